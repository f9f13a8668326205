#!/bin/bash
# t-mkfs: `ubtrfs mkfs` writes filesystems; btrfs check and the kernel judge.
#
# For each option set (a cell):
#   (a) ubtrfs mkfs; btrfs check --readonly is clean;
#   (b) ubtrfs reads it (ls of the top level, dump-tree of every tree);
#   (c) the kernel mounts it rw, runs the workload (workload.py --seed N
#       --profile small --btrfs), unmounts; btrfs check --readonly is clean
#       again.
# Then: --reproducible (and SOURCE_DATE_EPOCH) twice gives identical bytes;
# a device holding a btrfs is refused without -f; -b creates the image.
#
# Block-group tree (-O block-group-tree; mkfs.btrfs 6.2 cannot make one, but
# its check and dump-tree read one): --rootdir cells on one and on three
# devices, where btrfs-progs must also find the feature bit, one
# BLOCK_GROUP_ITEM per chunk in tree 11, none in the extent tree, and tree
# 11's blocks as METADATA_ITEMs referenced by BLOCK_GROUP_TREE, on the fresh
# image and again after the kernel's workload; it is refused without
# no-holes or the free-space tree (the kernel rejects that superblock), and
# ^block-group-tree turns it off again.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs and python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_python
oracle_require_ubtrfs
oracle_init

T=$ORACLE_TMP
FAILS=0

# btrfs check --readonly must exit 0 and say so.
check_clean() {
	local what=$1 out rc=0
	shift
	out=$(btrfs check --readonly "$@" 2>&1) || rc=$?
	if ((rc)) || ! grep -q "no error found" <<<"$out"; then
		printf '%s\n' "$out" >&2
		oracle_log "$what: btrfs check --readonly $* failed (exit $rc)"
		return 1
	fi
}

# check_devs WHAT IMG...: btrfs check of a (multi-device) filesystem; several
# image files are attached to loop devices and scanned first.
check_devs() {
	local what=$1 rc=0 d
	shift
	if (($# == 1)); then
		check_clean "$what" "$1"
		return
	fi
	local -a loops=()
	for d in "$@"; do
		loops+=("$(oracle_loop "$d")")
	done
	btrfs device scan "${loops[@]}" >/dev/null 2>&1 || true
	check_clean "$what" "${loops[0]}" || rc=1
	for d in "${loops[@]}"; do
		oracle_unloop "$d"
	done
	return $rc
}

# cell NAME SEED SIZE "MKFS OPTS" [NDEV]
cell() {
	local name=$1 seed=$2 size=$3 opts=$4 ndev=${5:-1} i
	local -a imgs=()
	local mnt=$T/mnt-$name
	for ((i = 0; i < ndev; i++)); do
		imgs+=("$(oracle_image "$name.$i.img" "$size")")
	done
	# shellcheck disable=SC2086
	if ! oracle_ubtrfs mkfs -q $opts "${imgs[@]}"; then
		oracle_log "$name: ubtrfs mkfs $opts failed"
		return 1
	fi
	check_devs "$name (fresh)" "${imgs[@]}" || return 1
	local -a devopts=()
	for ((i = 1; i < ndev; i++)); do
		devopts+=(--device "${imgs[$i]}")
	done
	if ! oracle_ubtrfs ls "${devopts[@]}" "${imgs[0]}" >/dev/null 2>"$T/$name.ls.err"; then
		cat "$T/$name.ls.err" >&2
		oracle_log "$name: ubtrfs ls failed"
		return 1
	fi
	if ! oracle_ubtrfs inspect dump-tree "${imgs[@]}" >"$T/$name.dump" 2>&1; then
		tail -5 "$T/$name.dump" >&2
		oracle_log "$name: ubtrfs dump-tree failed"
		return 1
	fi
	oracle_kmount "$mnt" "${imgs[@]}" || { oracle_log "$name: kernel mount failed"; return 1; }
	if ! oracle_workload "$mnt" --seed "$seed" --profile small --btrfs >"$T/$name.wl" 2>&1; then
		tail -20 "$T/$name.wl" >&2
		oracle_kumount "$mnt"
		oracle_log "$name: workload failed on the kernel mount"
		return 1
	fi
	oracle_kumount "$mnt"
	check_devs "$name (after workload)" "${imgs[@]}" || return 1
	rm -f -- "${imgs[@]}"
	oracle_log "$name: ok ($opts)"
}

run_cell() {
	cell "$@" || FAILS=$((FAILS + 1))
}

run_cell defaults 1 1G ""
run_cell label-uuid 2 1G "-L ubtrfs-test -U 0b4c3f5e-1d2a-4c6b-9e8f-7a6b5c4d3e2f"
run_cell n4k-xxhash-holes 3 1G "-n 4k --csum xxhash -O ^no-holes"
run_cell n64k-sha256-nofst 4 1G "-n 64k --csum sha256 -R ^free-space-tree -m single"
run_cell blake2-dup 5 1G "--csum blake2 -m dup -d dup"
run_cell n32k-single 6 512M "-n 32k -m single -d single"
run_cell small 7 256M ""
run_cell big 8 300G ""
# Several devices.
run_cell multi-default 9 1G "" 2
run_cell multi-single 10 1G "-m single -d single" 2
run_cell multi-raid0 11 1G "-m raid0 -d raid0" 3
run_cell multi-raid1c3 12 1G "-m raid1c3 -d raid1c3" 3
run_cell multi-raid1c4-raid10 13 1G "-m raid1c4 -d raid10" 4
run_cell multi-raid10 14 1G "-m raid10 -d raid10" 4
run_cell multi-dup 15 1G "-m dup -d dup" 2

# --rootdir: the source is a workload tree (without --btrfs) on a tmpfs
# mounted noatime, so neither mkfs nor the manifest disturbs its atimes.
# The kernel's manifest of the image must equal the source's, apart from
# ctime, inode numbers and what differs by nature between tmpfs and btrfs
# (directory sizes and link counts: btrfs directories always have nlink 1).
SRC=$T/src
oracle_tmpfs "$SRC" 1G
oracle_workload "$SRC" --seed 31 --profile small >"$T/src.wl" 2>&1 ||
	{ tail -20 "$T/src.wl" >&2; oracle_fail "workload on the tmpfs failed"; }
mount -o remount,noatime "$SRC"
dirnlink() { sed -E 's/^(.* d mode=[0-7]+ uid=[0-9]+ gid=[0-9]+) nlink=[0-9]+/\1 nlink=D/'; }
oracle_manifest "$SRC" --no-ctime --no-dir-size | dirnlink >"$T/src.man"

# bgt_layout WHAT IMG...: the block-group-tree layout as btrfs-progs reads it
# (several image files are attached to loop devices and scanned first).
bgt_layout() {
	local what=$1 dev=$2 rc=0 d
	shift
	local -a loops=()
	if (($# > 1)); then
		for d in "$@"; do
			loops+=("$(oracle_loop "$d")")
		done
		btrfs device scan "${loops[@]}" >/dev/null 2>&1 || true
		dev=${loops[0]}
	fi
	bgt_layout_dev "$what" "$dev" || rc=1
	for d in "${loops[@]}"; do
		oracle_unloop "$d"
	done
	return $rc
}

bgt_layout_dev() {
	local what=$1 dev=$2 nchunk nbg next addr
	local f=$T/bgt-layout
	if ! btrfs inspect-internal dump-super "$dev" >"$f.super" 2>&1 ||
		! grep -q 'BLOCK_GROUP_TREE' "$f.super"; then
		grep -A4 compat_ro "$f.super" >&2
		oracle_log "$what: the superblock lacks compat_ro BLOCK_GROUP_TREE"
		return 1
	fi
	if ! btrfs inspect-internal dump-tree -t chunk "$dev" >"$f.chunk" 2>&1 ||
		! btrfs inspect-internal dump-tree -t 11 "$dev" >"$f.bg" 2>&1 ||
		! btrfs inspect-internal dump-tree -t extent "$dev" >"$f.extent" 2>&1; then
		tail -5 "$f.chunk" "$f.bg" "$f.extent" >&2
		oracle_log "$what: btrfs inspect-internal dump-tree failed"
		return 1
	fi
	nchunk=$(grep -c ' CHUNK_ITEM ' "$f.chunk" || true)
	nbg=$(grep -c ' BLOCK_GROUP_ITEM ' "$f.bg" || true)
	next=$(grep -c ' BLOCK_GROUP_ITEM ' "$f.extent" || true)
	if ((nchunk == 0 || nbg != nchunk || next != 0)); then
		oracle_log "$what: $nchunk chunks, $nbg block group items in tree 11, $next in the extent tree"
		return 1
	fi
	# Every block of tree 11 is a METADATA_ITEM whose backref names it.
	awk '/^(leaf|node) [0-9]+ / && $3 != "flags" { print $2 }' "$f.bg" | sort -u >"$f.blocks"
	[[ -s $f.blocks ]] || { oracle_log "$what: tree 11 has no blocks"; return 1; }
	while read -r addr; do
		if [[ $(grep -A3 "key ($addr METADATA_ITEM " "$f.extent") != \
			*"tree block backref root BLOCK_GROUP_TREE"* ]]; then
			oracle_log "$what: block $addr of tree 11 has no METADATA_ITEM with a BLOCK_GROUP_TREE backref"
			return 1
		fi
	done <"$f.blocks"
}

rootdir_cell() {
	local name=$1 opts=$2 ndev=${3:-1} i bgt=0
	local -a imgs=()
	local mnt=$T/mnt-$name
	[[ $opts == *block-group-tree* ]] && bgt=1
	for ((i = 0; i < ndev; i++)); do
		imgs+=("$(oracle_image "$name.$i.img" 1G)")
	done
	# shellcheck disable=SC2086
	if ! oracle_ubtrfs mkfs -q $opts -r "$SRC" "${imgs[@]}"; then
		oracle_log "$name: ubtrfs mkfs $opts -r failed"
		return 1
	fi
	check_devs "$name (fresh)" "${imgs[@]}" || return 1
	if ((bgt)); then
		bgt_layout "$name (fresh)" "${imgs[@]}" || return 1
	fi
	oracle_kmount -o ro "$mnt" "${imgs[@]}" || { oracle_log "$name: kernel mount failed"; return 1; }
	oracle_manifest "$mnt" --no-ctime --no-dir-size | dirnlink >"$T/$name.man"
	oracle_kumount "$mnt"
	if ! oracle_manifest --diff "$T/src.man" "$T/$name.man" --wildcards >&2; then
		oracle_log "$name: the image's manifest differs from the source's"
		return 1
	fi
	oracle_kmount "$mnt" "${imgs[@]}" || { oracle_log "$name: kernel rw mount failed"; return 1; }
	mkdir "$mnt/wl"
	if ! oracle_workload "$mnt/wl" --seed 32 --profile small --btrfs >"$T/$name.wl" 2>&1; then
		tail -20 "$T/$name.wl" >&2
		oracle_kumount "$mnt"
		oracle_log "$name: workload failed on the kernel mount"
		return 1
	fi
	oracle_kumount "$mnt"
	check_devs "$name (after workload)" "${imgs[@]}" || return 1
	if ((bgt)); then
		bgt_layout "$name (after workload)" "${imgs[@]}" || return 1
	fi
	rm -f -- "${imgs[@]}"
	oracle_log "$name: ok (--rootdir $opts)"
}
rootdir_cell rootdir "" || FAILS=$((FAILS + 1))
rootdir_cell rootdir-holes-8k "-O ^no-holes -n 8k --csum xxhash" || FAILS=$((FAILS + 1))
rootdir_cell rootdir-sha256-nofst "--csum sha256 -R ^free-space-tree -n 64k" || FAILS=$((FAILS + 1))
rootdir_cell rootdir-raid1 "-d raid1" 2 || FAILS=$((FAILS + 1))
rootdir_cell rootdir-bgt "-O block-group-tree" || FAILS=$((FAILS + 1))
rootdir_cell rootdir-bgt-raid1c3 "-R block-group-tree -n 8k --csum xxhash -m raid1c3 -d raid0" 3 ||
	FAILS=$((FAILS + 1))
for i in 1 2; do
	SOURCE_DATE_EPOCH=1700000000 oracle_ubtrfs mkfs -q -b 1G -r "$SRC" "$T/rr-$i.img"
done
if ! cmp -s "$T/rr-1.img" "$T/rr-2.img"; then
	oracle_log "reproducible --rootdir: images differ"
	FAILS=$((FAILS + 1))
fi
rm -f -- "$T"/rr-*.img

# -b creates a missing image file of that size.
B=$T/created.img
if oracle_ubtrfs mkfs -q -b 700M "$B" && [[ $(stat -c %s "$B") == $((700 << 20)) ]]; then
	check_clean "-b" "$B" || FAILS=$((FAILS + 1))
else
	oracle_log "-b 700M did not create the image"
	FAILS=$((FAILS + 1))
fi
# An existing btrfs is refused without -f, overwritten with it.
if oracle_ubtrfs mkfs -q "$B" 2>/dev/null; then
	oracle_log "mkfs overwrote a btrfs without -f"
	FAILS=$((FAILS + 1))
fi
oracle_ubtrfs mkfs -q -f "$B" || { oracle_log "mkfs -f failed"; FAILS=$((FAILS + 1)); }
rm -f -- "$B"

# Reproducible images: same inputs, same bytes.
for how in flag env; do
	for i in 1 2; do
		R=$T/repro-$how-$i.img
		if [[ $how == flag ]]; then
			oracle_ubtrfs mkfs -q --reproducible -L r -b 1G "$R"
		else
			SOURCE_DATE_EPOCH=1700000000 oracle_ubtrfs mkfs -q -L r -b 1G "$R"
		fi
	done
	if ! cmp -s "$T/repro-$how-1.img" "$T/repro-$how-2.img"; then
		oracle_log "reproducible ($how): images differ"
		FAILS=$((FAILS + 1))
	else
		check_clean "reproducible ($how)" "$T/repro-$how-1.img" || FAILS=$((FAILS + 1))
	fi
	rm -f -- "$T"/repro-$how-*.img
done

# Block-group tree: refused without no-holes or the free-space tree (the
# kernel's btrfs_validate_super rejects that combination); the last of
# block-group-tree / ^block-group-tree wins.
G=$T/bgt-opt.img
for opts in "-O block-group-tree,^no-holes" "-O block-group-tree -R ^free-space-tree"; do
	# shellcheck disable=SC2086
	if oracle_ubtrfs mkfs -q -f -b 1G $opts "$G" 2>"$T/bgt-opt.err"; then
		oracle_log "mkfs $opts was not refused"
		FAILS=$((FAILS + 1))
	elif ! grep -q "block-group-tree requires" "$T/bgt-opt.err"; then
		cat "$T/bgt-opt.err" >&2
		oracle_log "mkfs $opts refused without a clear message"
		FAILS=$((FAILS + 1))
	fi
done
if ! oracle_ubtrfs mkfs -q -f -b 1G -O block-group-tree,^block-group-tree "$G" ||
	[[ $(btrfs inspect-internal dump-super "$G") == *BLOCK_GROUP_TREE* ]]; then
	oracle_log "-O block-group-tree,^block-group-tree: the feature is not off"
	FAILS=$((FAILS + 1))
fi
rm -f -- "$G"

# RAID5/6 are refused with a message.
if oracle_ubtrfs mkfs -q -b 1G -d raid5 "$T/r5a.img" "$T/r5b.img" "$T/r5c.img" 2>"$T/r5.err"; then
	oracle_log "raid5 was not refused"
	FAILS=$((FAILS + 1))
elif ! grep -qi "raid5" "$T/r5.err"; then
	oracle_log "raid5 refused without a clear message"
	FAILS=$((FAILS + 1))
fi

((FAILS == 0)) || oracle_fail "$FAILS mkfs check(s) failed"
echo "PASS: t-mkfs"
