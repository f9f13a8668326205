#!/bin/bash
# t-cow-stress: the copy-on-write engine against a model, judged by
# btrfs check and the kernel.
#
# For each cell (mkfs options, devices): make the filesystem; cow_stress
# (tests/tools/cow_stress.c) applies tens of thousands of random xattr
# insert/replace/delete operations on the top directory through the engine,
# committing every 50-200 operations and comparing every value with its
# model after every commit (reopening from disk every tenth commit), and
# finally deletes about half (the trees shrink again).  Then:
#   - btrfs check --readonly is clean (extent tree refs, block group used
#     bytes, free-space tree, tree shapes, superblock bytes_used);
#   - the kernel mounts it and `getfattr -d` shows exactly the model;
#   - the kernel changes it (sets and removes some user.k xattrs, writes a
#     file) and unmounts; check is clean; cow_stress runs again on the
#     kernel's filesystem (its free-space tree, its new blocks) with a new
#     seed; check and the kernel comparison once more.
# Then a million operations in five rounds on 4 KiB nodes, btrfs check clean
# after every round (`rounds`).
# Cells cover node sizes 4k (deep trees: many splits and merges), 16k, 64k;
# skinny and non-skinny extent items; the free-space tree and the v1 space
# cache; block-group-tree; DUP, RAID1 and RAID10 metadata on 1-4 devices;
# images made by mkfs.btrfs and by ubtrfs mkfs.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, getfattr/setfattr.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_cmd getfattr setfattr
oracle_require_ubtrfs
COW=${UBTRFS_COW_STRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/cow_stress}
[[ -x $COW ]] || oracle_skip "cow_stress tool not built ($COW)"
oracle_init

T=$ORACLE_TMP
FAILS=0

check_clean() {
	oracle_check_clean "$@"
}

# kernel_compare WHAT MODEL IMG...: the kernel's getfattr equals the model.
kernel_compare() {
	local what=$1 model=$2 mnt=$T/mnt
	shift 2
	oracle_kmount -o ro "$mnt" "$@" || return 1
	getfattr -d -m '^user\.k' -e hex -- "$mnt" 2>/dev/null | grep -v '^#' | grep -v '^$' |
		sort >"$T/kernel.xattrs" || true
	oracle_kumount "$mnt"
	if ! diff <(sort "$model") "$T/kernel.xattrs" >"$T/diff" 2>&1; then
		head -n 20 "$T/diff" >&2
		oracle_log "$what: the kernel's xattrs differ from the model"
		return 1
	fi
}

# kernel_changes IMG...: the kernel writes to the filesystem.
kernel_changes() {
	local mnt=$T/mnt k
	oracle_kmount "$mnt" "$@" || return 1
	for k in 1 5 9 13 17 21 25 29; do
		setfattr -n "user.k$k" -v "0x$(printf '%02x' "$k")ab" -- "$mnt" || return 1
	done
	for k in 2 6 10 14; do
		setfattr -x "user.k$k" -- "$mnt" 2>/dev/null || true
	done
	head -c 300000 /dev/urandom >"$mnt/kernel-file"
	sync
	oracle_kumount "$mnt"
}

run_cell() {
	local name=$1 maker=$2 opts=$3 ndev=$4 ops=$5 every=$6
	local -a imgs=()
	local i
	for ((i = 0; i < ndev; i++)); do
		imgs+=("$(oracle_image "$name/d$i.img" 512M)")
	done
	local out rc=0
	if [[ $maker == ubtrfs ]]; then
		# shellcheck disable=SC2086
		out=$("$UBTRFS" mkfs -q -f $opts "${imgs[@]}" 2>&1) || rc=$?
	else
		# shellcheck disable=SC2086
		out=$(mkfs.btrfs -f -q $opts "${imgs[@]}" 2>&1) || rc=$?
	fi
	if ((rc)); then
		printf '%s\n' "$out" >&2
		oracle_log "$name: mkfs failed"
		return 1
	fi
	local joined
	joined=$(IFS=,; printf '%s' "${imgs[*]}")
	if ! "$COW" "$joined" "$ops" 1 "$every" "$T/$name/model1"; then
		oracle_log "$name: cow_stress (first run) failed"
		return 1
	fi
	check_clean "$name (after ubtrfs)" "${imgs[@]}" || return 1
	kernel_compare "$name (after ubtrfs)" "$T/$name/model1" "${imgs[@]}" || return 1
	kernel_changes "${imgs[@]}" || { oracle_log "$name: kernel rw pass failed"; return 1; }
	check_clean "$name (after the kernel)" "${imgs[@]}" || return 1
	if ! "$COW" "$joined" "$((ops / 2))" 2 "$every" "$T/$name/model2"; then
		oracle_log "$name: cow_stress (second run, on the kernel's changes) failed"
		return 1
	fi
	check_clean "$name (after ubtrfs again)" "${imgs[@]}" || return 1
	kernel_compare "$name (after ubtrfs again)" "$T/$name/model2" "${imgs[@]}" || return 1
	oracle_log "$name: ok"
}

# UBTRFS_TEST_QUICK=1 (the sanitizer run of scripts/test): an eighth of the
# operations and one round; the full counts run in the development build.
QUICK=${UBTRFS_TEST_QUICK:-0}
cell() {
	local -a a=("$@")
	((QUICK)) && a[4]=$((a[4] / 8))
	run_cell "${a[@]}" || FAILS=$((FAILS + 1))
}

# rounds NAME MKFS-OPTS ROUNDS OPS: the long run - ROUNDS runs of cow_stress
# (each a fresh process: reopen from disk) on one filesystem, btrfs check
# clean after every round, the kernel compared with the model at the end.
rounds() {
	local name=$1 opts=$2 nrounds=$3 ops=$4 r img
	img=$(oracle_image "$name/d0.img" 512M)
	# shellcheck disable=SC2086
	"$UBTRFS" mkfs -q -f $opts "$img" >/dev/null 2>&1 || {
		oracle_log "$name: mkfs failed"
		return 1
	}
	for ((r = 1; r <= nrounds; r++)); do
		if ! "$COW" "$img" "$ops" "$((100 + r))" 250 "$T/$name/model"; then
			oracle_log "$name: round $r failed"
			return 1
		fi
		check_clean "$name (round $r)" "$img" || return 1
	done
	kernel_compare "$name (after $nrounds rounds)" "$T/$name/model" "$img" || return 1
	oracle_log "$name: $nrounds x $ops operations: ok"
}

#    name             maker   mkfs options                                   devs ops   commit
cell ubt-4k           ubtrfs  "-n 4096"                                        1 40000 100
cell ubt-16k-xxhash   ubtrfs  "--csum xxhash"                                  1 20000 200
cell ubt-bgt-raid1    ubtrfs  "-n 4096 -O block-group-tree -m raid1 -d raid1"  2 20000 50
cell progs-4k         progs   "-n 4096"                                        1 30000 100
cell progs-noskinny   progs   "-n 4096 -O ^skinny-metadata"                    1 20000 100
cell progs-v1cache    progs   "-n 4096 -R ^free-space-tree"                    1 20000 100
cell progs-64k-sha    progs   "-n 65536 --csum sha256"                         1 10000 200
cell progs-raid10     progs   "-n 4096 -m raid10 -d raid10"                    4 20000 100

# A million operations on 4 KiB nodes (deepest trees), five rounds.
if ((QUICK)); then
	rounds million-4k "-n 4096" 1 50000 || FAILS=$((FAILS + 1))
else
	rounds million-4k "-n 4096" 5 200000 || FAILS=$((FAILS + 1))
fi

if ((FAILS)); then
	oracle_fail "$FAILS cell(s) failed"
fi
oracle_log "all cells passed"
