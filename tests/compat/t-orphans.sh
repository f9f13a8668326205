#!/bin/bash
# t-orphans: files unlinked while open through the read-write FUSE mount.
#
#   (a) a 300 KB file is opened, unlinked, then read and written through its
#       descriptor: the bytes stay (nlink 0), fsync works; after close the
#       inode and its space are gone: unmount, no ORPHAN_ITEM and no inode
#       in the dump of the subvolume tree, btrfs check clean;
#   (b) the same, but the daemon is killed (SIGKILL) while the file is open
#       after an fsync: the image holds the orphan (nlink 0 + ORPHAN_ITEM),
#       btrfs check is clean and the kernel mounts it; the next `ubtrfs
#       mount -o rw` frees it (no ORPHAN_ITEM left, the data extent gone from
#       the extent tree) and btrfs check is clean again.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

cat >"$T/victim.py" <<'PY'
import os, sys, time
d, mode = sys.argv[1], sys.argv[2]
p = os.path.join(d, "victim")
data = os.urandom(300000)
with open(p, "wb") as f:
    f.write(data)
fd = os.open(p, os.O_RDWR)
ino = os.fstat(fd).st_ino
os.unlink(p)
if os.path.exists(p):
    sys.exit("the name is still there after unlink")
if os.pread(fd, len(data), 0) != data:
    sys.exit("the data changed after unlink")
os.pwrite(fd, b"x" * 5000, 1000)
want = data[:1000] + b"x" * 5000 + data[6000:]
if os.pread(fd, len(data), 0) != want:
    sys.exit("a write after unlink does not read back")
st = os.fstat(fd)
if st.st_nlink != 0 or st.st_size != len(data):
    sys.exit("after unlink: nlink %d size %d" % (st.st_nlink, st.st_size))
os.fsync(fd)
print(ino, flush=True)
if mode == "hold":
    sys.stdout.write("held\n")
    sys.stdout.flush()
    time.sleep(600)
os.close(fd)
PY

orphans_in() {
	btrfs inspect-internal dump-tree -t 5 "$1" | grep -c 'ORPHAN_ITEM' || true
}

# (a) freed at close
img=$(oracle_image a.img 1G)
oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
mnt=$T/a.mnt
ro_fuse_up "$mnt" "$T/a.log" rw "$img" || { ro_show "$T/a.log"; oracle_fail "(a) rw mount did not come up"; }
ino=$("$ORACLE_PYTHON" "$T/victim.py" "$mnt" close) || oracle_fail "(a) the open-unlinked file misbehaved"
ro_fuse_down "(a)" "$mnt" "$T/a.log"
n=$(orphans_in "$img")
((n == 0)) || ro_fail "(a) $n ORPHAN_ITEMs left after close and unmount"
if btrfs inspect-internal dump-tree -t 5 "$img" | grep -qE "key \($ino (INODE_ITEM|EXTENT_DATA)"; then
	ro_fail "(a) inode $ino still has items after its last close"
fi
oracle_check_clean "(a)" "$img" || ro_fail "(a) btrfs check is not clean"

# (b) a crash while open: the next read-write mount frees it
img=$(oracle_image b.img 1G)
oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
mnt=$T/b.mnt
ro_fuse_up "$mnt" "$T/b.log" rw "$img" || { ro_show "$T/b.log"; oracle_fail "(b) rw mount did not come up"; }
pid=$RO_FUSE_PID
"$ORACLE_PYTHON" "$T/victim.py" "$mnt" hold >"$T/hold.out" 2>&1 &
hold=$!
oracle_register_pid "$hold"
for ((i = 0; i < 600; i++)); do
	grep -q '^held$' "$T/hold.out" && break
	kill -0 "$hold" 2>/dev/null || break
	sleep 0.1
done
grep -q '^held$' "$T/hold.out" || { ro_show "$T/hold.out"; oracle_fail "(b) the holder did not reach its hold"; }
ino=$(head -n 1 "$T/hold.out")
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
kill "$hold" 2>/dev/null || true
wait "$hold" 2>/dev/null || true
fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
n=$(orphans_in "$img")
((n == 1)) || ro_fail "(b) after the crash the image holds $n ORPHAN_ITEMs, not 1"
btrfs inspect-internal dump-tree -t 5 "$img" | grep -A2 "key ($ino INODE_ITEM" | grep -q " links 0 " ||
	ro_fail "(b) inode $ino is not kept with nlink 0 after the crash"
oracle_check_clean "(b) crashed" "$img" || ro_fail "(b) btrfs check of the crashed image is not clean"
oracle_kmount -o ro "$T/b.k" "$img" || ro_fail "(b) the kernel does not mount the crashed image"
oracle_is_mounted "$T/b.k" && oracle_kumount "$T/b.k"
ro_fuse_up "$mnt" "$T/b2.log" rw "$img" || { ro_show "$T/b2.log"; oracle_fail "(b) the second rw mount did not come up"; }
ro_fuse_down "(b) remount" "$mnt" "$T/b2.log"
grep -q "freed 1 orphan inode" "$T/b2.log" || ro_fail "(b) the second mount did not report freeing the orphan"
n=$(orphans_in "$img")
((n == 0)) || ro_fail "(b) $n ORPHAN_ITEMs left after the second mount"
if btrfs inspect-internal dump-tree -t 5 "$img" | grep -qE "key \($ino (INODE_ITEM|EXTENT_DATA)"; then
	ro_fail "(b) inode $ino still has items after the second mount"
fi
oracle_check_clean "(b) after cleanup" "$img" || ro_fail "(b) btrfs check after the cleanup is not clean"
RO_CELLS=2
ro_finish
