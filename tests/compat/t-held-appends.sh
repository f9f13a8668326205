#!/bin/bash
# t-held-appends: small appending writes, which ubtrfs_write holds back and
# joins into one engine write (src/lib/api_write.c, "held-back appends"),
# judged by a model, btrfs check and the kernel.
#
# append_stress (tests/tools/append_stress.c) drives the public API: runs
# of tar-sized appends, mostly continuing the file written last,
# interleaved with every kind of call that must see them first (reads,
# stats, lookups, overwrites, large writes, truncates, a file replaced,
# names exchanged, commits, the handle closed and reopened), each read and
# stat checked against the model at once.  Then btrfs check --readonly
# --check-data-csum must be clean and the kernel must read every file
# byte-identical to the model, with no other file in the directory.
# Cells: 4k nodes, 4k nodes without NO_HOLES, 16k defaults, ubtrfs mkfs;
# and "fill": appends to a 160 MiB filesystem until ENOSPC has come 20
# times - a write that does not fit must be the one that fails, and every
# write acknowledged before it must be on disk after the close.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_ubtrfs
TOOL=${UBTRFS_APPEND_STRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/append_stress}
[[ -x $TOOL ]] || oracle_skip "append_stress tool not built ($TOOL)"
oracle_init

T=$ORACLE_TMP
FAILS=0
QUICK=${UBTRFS_TEST_QUICK:-0}

# The kernel's top directory holds exactly the model's files, byte-identical.
kernel_compare() {
	local what=$1 img=$2 model=$3 mnt=$T/mnt f bad=0
	oracle_kmount -o ro "$mnt" "$img" || return 1
	if [[ "$(cd "$mnt" && ls -A | LC_ALL=C sort)" != "$(cd "$model" && ls -A | LC_ALL=C sort)" ]]; then
		oracle_log "$what: the kernel lists $(cd "$mnt" && ls -A | tr '\n' ' '), the model $(cd "$model" && ls -A | tr '\n' ' ')"
		bad=1
	fi
	for f in "$model"/*; do
		f=${f##*/}
		if ! cmp -s "$mnt/$f" "$model/$f"; then
			oracle_log "$what: $f differs: kernel $(stat -c %s "$mnt/$f" 2>&1) bytes, model $(stat -c %s "$model/$f") bytes"
			cmp "$mnt/$f" "$model/$f" 2>&1 | head -n 2 >&2 || true
			bad=1
		fi
	done
	oracle_kumount "$mnt"
	return $bad
}

run_cell() {
	local name=$1 maker=$2 opts=$3 ops=$4 size=$5 img out
	((QUICK)) && [[ $ops != fill ]] && ops=$((ops / 4))
	img=$(oracle_image "$name.img" "$size")
	oracle_mkfs_with "$maker" "$opts" "$img" || return 1
	mkdir -p "$T/$name.m"
	if ! "$TOOL" "$img" "$ops" 7 "$T/$name.m"; then
		oracle_log "$name: append_stress failed"
		return 1
	fi
	oracle_check_clean_data "$name" "$img" || return 1
	kernel_compare "$name" "$img" "$T/$name.m" || return 1
	oracle_log "$name: ok"
}

cell() {
	run_cell "$@" || FAILS=$((FAILS + 1))
}

#    name        maker   mkfs options             ops    image
cell progs-4k    progs   "-n 4096"                4000   1G
cell progs-holes progs   "-n 4096 -O ^no-holes"   3000   1G
cell progs-16k   progs   ""                       3000   1G
cell ubt-16k     ubtrfs  ""                       3000   1G
cell fill        progs   ""                       fill   160M

if ((FAILS)); then
	oracle_fail "$FAILS cell(s) failed"
fi
oracle_log "all cells passed"
