#!/bin/bash
# t-read-oracle-raid: the kernel writes multi-device filesystems (data and
# metadata in the same profile), ubtrfs reads them back with every device
# listed, then with devices missing where the profile allows it.
#
#   r1  RAID1    2 devices  xxhash                    then without device 2
#   r2  RAID1C3  3 devices  compress-force=zstd       then without devices 1, 2
#   r3  RAID10   4 devices  4k nodes                  then without device 3
#   r4  RAID5    3 devices  compress-force=lzo        then without device 1
#   r5  RAID6    4 devices  64k nodes, compress-force=zlib
#                                                    then without devices 1, 2
#                                                    and without devices 1, 3
#
# Two RAID6 pairs: whether two missing devices hold both data stripes of a
# full stripe (P+Q rebuild) or one data stripe and a parity depends on their
# places in each chunk's stripe order; of the pairs {1,2} and {1,3} at least
# one is adjacent in every order, so the P+Q rebuild is always exercised.
#
# Each cell runs the checks of t-read-oracle-basic (see read-oracle-common.sh:
# FUSE manifest with inode numbers against a kernel ro mount, unique st_ino,
# find, `ubtrfs get` onto a scratch btrfs, `ubtrfs ls -R`, subvolume list),
# with `ubtrfs mount -o ro DEV1 DEV2 ... MNT` and --device for the offline
# tools.  The degraded runs compare against the reference the kernel made
# with all devices present: `ubtrfs mount -o ro,degraded`, get and ls with
# --degraded; without degraded, mount and ls must refuse (as the kernel does).
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE and python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd find awk
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS

# degraded NAME MISSING...: checks with the devices numbered MISSING left
# out (1-based), against the full reference of cell NAME.
degraded() {
	local name=$1 i keep=() tag
	shift
	local missing=" $* "
	for ((i = 1; i <= ${#RO_IMGS[@]}; i++)); do
		[[ $missing == *" $i "* ]] || keep+=("${RO_IMGS[i - 1]}")
	done
	tag=without-$(printf '%s' "$*" | tr ' ' '-')
	RO_CELLS=$((RO_CELLS + 1))

	# Without "degraded" the filesystem must not open.
	ro_offline_args "${keep[@]}"
	ro_run "$T/nd.out" "$T/nd.err" ls "${RO_OFFLINE[@]}" /
	if ((RO_RC == 0)); then
		ro_fail "$name ($tag): ubtrfs ls without --degraded succeeds with device(s) $* missing"
	elif ((RO_RC < 124)) && [[ ! -s $T/nd.err ]]; then
		ro_fail "$name ($tag): ubtrfs ls without --degraded fails silently"
	fi
	local mnt=$T/$name.$tag.nd
	mkdir -p -- "$mnt"
	oracle_register_mount "$mnt"
	ro_run "$T/nd.out" "$T/nd.err" mount -o ro "${keep[@]}" "$mnt"
	if ((RO_RC == 0)) || oracle_is_mounted "$mnt"; then
		ro_fail "$name ($tag): ubtrfs mount -o ro without degraded succeeds with device(s) $* missing"
		oracle_is_mounted "$mnt" && fusermount3 -u -- "$mnt"
	elif [[ ! -s $T/nd.err ]]; then
		ro_fail "$name ($tag): ubtrfs mount without degraded fails silently"
	fi

	ro_check_fuse "$name" "$tag" ro,degraded "${keep[@]}"
	RO_WARN_OK=1 ro_check_get "$name" "$tag" --degraded "${RO_OFFLINE[@]}"
	RO_WARN_OK=1 ro_check_ls "$name" "$tag" --degraded "${RO_OFFLINE[@]}"
	oracle_log "$name: checked with device(s) $* missing"
}

ro_cell r1 "--csum xxhash -d raid1 -m raid1" "" 2 1G
degraded r1 2
ro_drop_images

ro_cell r2 "-d raid1c3 -m raid1c3" "compress-force=zstd" 3 1G
degraded r2 1 2
ro_drop_images

ro_cell r3 "--nodesize 4k -d raid10 -m raid10" "" 4 1G
degraded r3 3
ro_drop_images

ro_cell r4 "-d raid5 -m raid5" "compress-force=lzo" 3 1G
degraded r4 1
ro_drop_images

ro_cell r5 "--nodesize 64k -d raid6 -m raid6" "compress-force=zlib" 4 1G
degraded r5 1 2
degraded r5 1 3
ro_drop_images

oracle_log "total $((SECONDS - T0)) s"
ro_finish
