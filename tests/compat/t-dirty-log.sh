#!/bin/bash
# t-dirty-log: a filesystem with the kernel's unreplayed fsync log.
#
# The kernel writes a file, syncs, then writes another and fsyncs it with a
# long commit interval, and the image is copied while still mounted: the
# copy has log_root set (checked with dump-super).  Then:
#   (a) `ubtrfs ls` and `ubtrfs mount -o ro` and `-o rw` refuse with a
#       message naming the fsync log and the way out, and write nothing (the
#       image's checksum is unchanged);
#   (b) `-o ro,nologreplay` shows the last commit: the synced file, not the
#       fsynced one;
#   (c) the kernel mounts the copy and replays the log (the fsynced file is
#       there); after that `ubtrfs mount -o rw` works, a write through it
#       is clean in btrfs check and the kernel reads it.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_fuse
oracle_require_ubtrfs
oracle_require_cmd sha256sum
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"
RO_CELLS=1

img=$(oracle_image live.img 512M)
oracle_mkfs -- "$img"
oracle_kmount -o commit=300 "$T/k" "$img" || oracle_fail "kernel mount failed"
echo base >"$T/k/base"
sync -f "$T/k/base"
btrfs filesystem sync "$T/k"
head -c 50000 /dev/urandom >"$T/logged.src"
dd if="$T/logged.src" of="$T/k/logged" conv=fsync status=none
cp --sparse=always "$img" "$T/crash.img"
oracle_kumount "$T/k"
crash=$T/crash.img
[[ $(btrfs inspect-internal dump-super "$crash" | awk '$1 == "log_root" {print $2}') != 0 ]] ||
	oracle_fail "the copy has no fsync log (log_root 0): cannot test"
sum=$(sha256sum <"$crash")

# (a) refused, nothing written
if oracle_ubtrfs ls "$crash" / >"$T/ls.out" 2>"$T/ls.err"; then
	ro_fail "(a) ubtrfs ls read a filesystem with an unreplayed log"
fi
grep -q "unreplayed fsync log" "$T/ls.err" && grep -q "nologreplay" "$T/ls.err" ||
	{ ro_fail "(a) ubtrfs ls does not explain the refusal"; ro_show "$T/ls.err"; }
for o in ro rw; do
	mkdir -p "$T/m"
	if "$UBTRFS" mount -o "$o" "$crash" "$T/m" 2>"$T/mount.$o.err"; then
		oracle_register_mount "$T/m"
		fusermount3 -u "$T/m" || true
		ro_fail "(a) mount -o $o accepted an unreplayed log"
	fi
	grep -q "unreplayed fsync log" "$T/mount.$o.err" ||
		{ ro_fail "(a) mount -o $o does not explain the refusal"; ro_show "$T/mount.$o.err"; }
done
[[ $(sha256sum <"$crash") == "$sum" ]] || ro_fail "(a) a refused open changed the image"

# (b) nologreplay: the last commit
ro_fuse_up "$T/m" "$T/nlr.log" ro,nologreplay "$crash" ||
	{ ro_show "$T/nlr.log"; oracle_fail "(b) mount -o ro,nologreplay did not come up"; }
[[ $(cat "$T/m/base" 2>/dev/null) == base ]] || ro_fail "(b) the committed file is not there"
[[ ! -e $T/m/logged ]] || ro_fail "(b) the logged (uncommitted) file shows without replay"
ro_fuse_down "(b)" "$T/m" "$T/nlr.log"
[[ $(sha256sum <"$crash") == "$sum" ]] || ro_fail "(b) the nologreplay mount changed the image"

# (c) the kernel replays; then we write
oracle_kmount "$T/k2" "$crash" || oracle_fail "(c) the kernel does not mount the crash copy"
cmp -s "$T/logged.src" "$T/k2/logged" || ro_fail "(c) the kernel's replay lacks the fsynced file"
oracle_kumount "$T/k2"
ro_fuse_up "$T/m" "$T/rw.log" rw "$crash" ||
	{ ro_show "$T/rw.log"; oracle_fail "(c) rw mount after the replay did not come up"; }
echo after >"$T/m/after"
ro_fuse_down "(c)" "$T/m" "$T/rw.log"
oracle_check_clean "(c)" "$crash" || ro_fail "(c) btrfs check after the write is not clean"
oracle_kmount -o ro "$T/k3" "$crash" || oracle_fail "(c) the kernel does not mount the result"
[[ $(cat "$T/k3/after") == after ]] || ro_fail "(c) the kernel does not read what ubtrfs wrote"
cmp -s "$T/logged.src" "$T/k3/logged" || ro_fail "(c) the replayed file is gone"
oracle_kumount "$T/k3"
ro_finish
