#!/bin/bash
# t-read-oracle-basic: the kernel writes single-device filesystems, ubtrfs
# reads them back, and must show exactly what the kernel shows.
#
# Cells (one mkfs + one workload run each; the workload is --btrfs, small
# profile, a fixed seed, so subvolumes, nested subvolumes, snapshots of
# snapshots, a deleted snapshot, reflinks, nodatacow and compression
# properties are in every cell):
#
#   b1  crc32c  16k nodes  no-holes, free-space tree  compress-force=zstd
#   b2  xxhash   4k nodes  ^no-holes                   compress-force=lzo
#   b3  sha256  64k nodes  v1 space cache              compress-force=zlib
#       (mkfs -R ^free-space-tree, mount -o space_cache=v1)
#   b4  blake2  16k nodes  defaults, -m single         no compression
#   b5  crc32c  16k nodes  block-group tree            no compression
#       (mkfs.btrfs 6.2 cannot make one: `ubtrfs mkfs -O block-group-tree`
#       makes the empty image, the kernel fills it like the others)
#
# Each cell: (a) kernel mount -o ro and a manifest with inode numbers, those
# of entries outside the mounted subvolume V mapped to V << 40 | ino (ubtrfs'
# documented numbering); (b) `ubtrfs mount -o ro` shows the same manifest;
# (c) st_ino is unique across the FUSE mount (hard links aside); (d) `find`
# on the FUSE mount prints nothing on stderr and visits as many entries as on
# the kernel mount; (e) `ubtrfs get IMG / DEST` onto a scratch btrfs gives
# the kernel's manifest (ctime and inode numbers aside); (f) `ubtrfs ls -R`
# exits 0 silently with one line per entry; `ubtrfs subvolume list` equals
# `btrfs subvolume list`; `ubtrfs filesystem df` equals `btrfs filesystem df`
# (block groups from the extent tree, or from tree 11 on b5); `ubtrfs
# inspect dump-tree` equals btrfs-progs'.  On b5 also: btrfs check is clean
# after the kernel's workload, and `dump-tree -t block-group` shows the
# blocks progs shows for `-t 11`.
#
# On b1, the same for subvolume mounts (-o subvol=btrfs/sv1,
# subvol=btrfs/sv1/nested, subvolid=<btrfs/snap2>, subvolid=5) against a
# kernel mount of the same subvolume (inode numbers then equal the kernel's
# inside it), with --subvol/--subvolid for get and ls.  Last, the shared
# image misc/025-zstd-compression: kernel ro mount against ubtrfs mount (in
# daemon mode, as users run it).
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE and python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd find awk xz
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS

ro_cell b1 "--csum crc32c --nodesize 16k" "compress-force=zstd" 1 2G
ro_check_df b1 "${RO_OFFLINE[@]}"
B1_IMG=${RO_IMGS[0]}

# Subvolume mounts of b1: kernel and ubtrfs mount the same subvolume.
sub_cell() {
	local name=$1 kopt=$2 tag
	local -a off=()
	shift 2
	off=("$@")
	RO_CELLS=$((RO_CELLS + 1))
	RO_IMGS=("$B1_IMG")
	ro_reference "$name" "$kopt"
	tag=${kopt%%=*}
	ro_check_fuse "$name" "$tag" "ro,$kopt" "$B1_IMG"
	ro_check_get "$name" "$tag" "${off[@]}" "$B1_IMG"
	ro_check_ls "$name" "$tag" "${off[@]}" "$B1_IMG"
}
snap2_id=$(awk '$NF == "btrfs/snap2" { print $2 }' "$T/b1.k.subvols")
[[ -n $snap2_id ]] || oracle_fail "b1: no btrfs/snap2 in btrfs subvolume list"
sub_cell b1-sv1 subvol=btrfs/sv1 --subvol btrfs/sv1
sub_cell b1-nested subvol=btrfs/sv1/nested --subvol btrfs/sv1/nested
sub_cell b1-snap2 "subvolid=$snap2_id" --subvolid "$snap2_id"
sub_cell b1-top subvolid=5 --subvolid 5
ro_drop_images

ro_cell b2 "--csum xxhash --nodesize 4k -O ^no-holes" "compress-force=lzo" 1 2G
ro_check_df b2 "${RO_OFFLINE[@]}"
ro_drop_images
ro_cell b3 "--csum sha256 --nodesize 64k -R ^free-space-tree" \
	"compress-force=zlib,space_cache=v1" 1 2G
ro_check_df b3 "${RO_OFFLINE[@]}"
ro_drop_images
ro_cell b4 "--csum blake2 --nodesize 16k -m single" "" 1 2G
ro_check_df b4 "${RO_OFFLINE[@]}"
ro_drop_images

# Block-group tree: mkfs.btrfs 6.2 cannot make one (its check and dump-tree
# read one), so ubtrfs mkfs makes the empty filesystem and the kernel writes
# everything else.
RO_MKFS=ubtrfs ro_cell b5 "--csum crc32c --nodesize 16k -O block-group-tree" "" 1 2G
ro_check_df b5 "${RO_OFFLINE[@]}"
b5_img=${RO_IMGS[0]}
oracle_btrfs_check "$b5_img" || ro_fail "b5: btrfs check --readonly fails after the kernel's workload"
if [[ $(btrfs inspect-internal dump-super "$b5_img") != *BLOCK_GROUP_TREE* ]]; then
	ro_fail "b5: the kernel's filesystem has no compat_ro BLOCK_GROUP_TREE"
fi
# progs 6.2 prints `-t 11` like the root and chunk trees (a bare heading, no
# totals), and so do we: everything from the first block on must be equal.
btrfs inspect-internal dump-tree -t 11 "$b5_img" 2>/dev/null | sed -n '/^\(leaf\|node\) /,$p' >"$T/b5.bg.progs"
ro_run "$T/b5.bg.out" "$T/b5.bg.err" inspect dump-tree -t block-group "$b5_img"
if ((RO_RC == 0)); then
	sed -n '/^\(leaf\|node\) /,$p' "$T/b5.bg.out" >"$T/b5.bg.ours"
	if [[ ! -s $T/b5.bg.progs ]] || ! grep -q ' BLOCK_GROUP_ITEM ' "$T/b5.bg.progs"; then
		ro_fail "b5: btrfs inspect-internal dump-tree -t 11 shows no block group items"
	elif ! diff -u --label progs --label ubtrfs "$T/b5.bg.progs" "$T/b5.bg.ours" >"$T/b5.bg.diff"; then
		ro_fail "b5: ubtrfs inspect dump-tree -t block-group differs from btrfs' -t 11"
		ro_show "$T/b5.bg.diff"
	fi
elif ((RO_RC < 124)); then
	ro_fail "b5: ubtrfs inspect dump-tree -t block-group exited $RO_RC"
	ro_show "$T/b5.bg.err"
fi
ro_drop_images

# The shared zstd/lzo/zlib image, mounted the way users do (daemon mode).
RO_CELLS=$((RO_CELLS + 1))
src=$(oracle_shared_images)/misc/025-zstd-compression/compress.raw.xz
img=$T/compress.img
oracle_unpack "$src" "$img"
RO_IMGS=("$img")
ro_reference compress
mnt=$T/compress.f
mkdir -p -- "$mnt"
oracle_register_mount "$mnt"
ro_run "$T/mount.out" "$T/mount.err" mount -o ro "$img" "$mnt"
if ((RO_RC != 0)) || ! oracle_is_mounted "$mnt"; then
	ro_fail "compress: ubtrfs mount -o ro $img $mnt exited $RO_RC, mounted: $(oracle_is_mounted "$mnt" && echo yes || echo no)"
	ro_show "$T/mount.err"
else
	if ! oracle_manifest "$mnt" --inodes -o "$T/compress.f.m" 2>"$T/compress.f.err"; then
		ro_fail "compress: manifest of the FUSE mount failed"
		ro_show "$T/compress.f.err"
	elif ! oracle_manifest_diff "$T/compress.k.m" "$T/compress.f.m" >"$T/compress.diff"; then
		ro_fail "compress: the FUSE mount differs from the kernel's (- kernel, + ubtrfs)"
		ro_show "$T/compress.diff" 30
	fi
	fusermount3 -u -- "$mnt" || ro_fail "compress: fusermount3 -u failed"
fi
ro_check_get compress all "$img"
ro_check_ls compress all "$img"

oracle_log "total $((SECONDS - T0)) s"
ro_finish
