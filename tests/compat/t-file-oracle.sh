#!/bin/bash
# t-file-oracle: file data written by the engine, judged by the kernel.
#
# The kernel makes files f0..f7 in the top directory (some empty, some with
# data, one small inline file); file_stress (tests/tools/file_stress.c)
# applies random writes, overwrites, extensions past the end and truncates
# through the engine, committing every 20 operations and checking every
# file against its model after each commit.  Then: btrfs check --readonly
# (checksums verified: --check-data-csum) is clean; the kernel reads every
# file byte-identical to the model; the kernel overwrites and appends to
# some; check; file_stress runs again on the kernel's result; check and the
# kernel comparison again.  Cells: 4k nodes with and without NO_HOLES,
# 16k defaults, DUP data, ubtrfs mkfs.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_ubtrfs
FS_TOOL=${UBTRFS_FILE_STRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/file_stress}
[[ -x $FS_TOOL ]] || oracle_skip "file_stress tool not built ($FS_TOOL)"
oracle_init

T=$ORACLE_TMP
FAILS=0
QUICK=${UBTRFS_TEST_QUICK:-0}

kernel_compare() {
	local what=$1 img=$2 model=$3 mnt=$T/mnt f bad=0
	oracle_kmount -o ro "$mnt" "$img" || return 1
	for f in f0 f1 f2 f3 f4 f5 f6 f7; do
		if ! cmp -s "$mnt/$f" "$model/$f"; then
			oracle_log "$what: $f differs: kernel $(stat -c %s "$mnt/$f") bytes, model $(stat -c %s "$model/$f") bytes"
			cmp "$mnt/$f" "$model/$f" 2>&1 | head -n 2 >&2 || true
			bad=1
		fi
	done
	oracle_kumount "$mnt"
	return $bad
}

run_cell() {
	local name=$1 maker=$2 opts=$3 ops=$4 img out mnt=$T/mnt
	((QUICK)) && ops=$((ops / 4))
	img=$(oracle_image "$name.img" 1G)
	oracle_mkfs_with "$maker" "$opts" "$img" || return 1
	oracle_kmount "$mnt" "$img" || return 1
	: >"$mnt/f0"
	: >"$mnt/f1"
	head -c 1500 /dev/urandom >"$mnt/f2"
	head -c 300000 /dev/urandom >"$mnt/f3"
	head -c 5000000 /dev/urandom >"$mnt/f4"
	truncate -s 2M "$mnt/f5"
	printf 'x' >"$mnt/f6"
	head -c 70000 /dev/urandom >"$mnt/f7"
	oracle_kumount "$mnt"
	mkdir -p "$T/$name.m1" "$T/$name.m2"
	if ! "$FS_TOOL" "$img" "$ops" 1 20 "$T/$name.m1"; then
		oracle_log "$name: file_stress failed"
		return 1
	fi
	oracle_check_clean_data "$name (after ubtrfs)" "$img" || return 1
	kernel_compare "$name (after ubtrfs)" "$img" "$T/$name.m1" || return 1
	oracle_kmount "$mnt" "$img" || return 1
	head -c 100000 /dev/urandom | dd of="$mnt/f3" bs=4096 seek=3 conv=notrunc status=none
	head -c 5000 /dev/urandom >>"$mnt/f1"
	truncate -s 10000 "$mnt/f4"
	sync
	oracle_kumount "$mnt"
	oracle_check_clean_data "$name (after the kernel)" "$img" || return 1
	if ! "$FS_TOOL" "$img" "$((ops / 2))" 2 20 "$T/$name.m2"; then
		oracle_log "$name: file_stress (second run, on the kernel's changes) failed"
		return 1
	fi
	oracle_check_clean_data "$name (after ubtrfs again)" "$img" || return 1
	kernel_compare "$name (after ubtrfs again)" "$img" "$T/$name.m2" || return 1
	oracle_log "$name: ok"
}

cell() {
	run_cell "$@" || FAILS=$((FAILS + 1))
}

#    name            maker   mkfs options                ops
cell progs-4k        progs   "-n 4096"                   3000
cell progs-4k-holes  progs   "-n 4096 -O ^no-holes"      3000
cell progs-16k       progs   ""                          2000
cell progs-dupdata   progs   "-n 4096 -d dup"            1500
cell ubt-16k         ubtrfs  ""                          2000

if ((FAILS)); then
	oracle_fail "$FAILS cell(s) failed"
fi
oracle_log "all cells passed"
