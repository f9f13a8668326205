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
#       the extent tree) and btrfs check is clean again;
#   (c) small files (4 KiB to 33 sectors, a reflinked copy, a preallocated
#       one) unlinked while open and closed: no items of theirs and no
#       data reference from them left, btrfs check clean, the reflink
#       source reads back through the kernel.
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
# (c) small files freed at close: their data goes with the inode's items
# (up to 32 sectors, one reference less per extent) instead of a truncate
# first; 33 sectors still take the truncate.  A reflinked victim leaves its
# source's extent alone, a preallocated one its whole extent.
cat >"$T/small.py" <<'PY'
import os, sys
d = sys.argv[1]
def victim(name, make):
    p = os.path.join(d, name)
    make(p)
    fd = os.open(p, os.O_RDWR)
    ino = os.fstat(fd).st_ino
    os.unlink(p)
    os.fsync(fd)
    os.close(fd)
    print(name, ino, flush=True)
def plain(n):
    def make(p):
        with open(p, "wb") as f:
            f.write(os.urandom(n))
    return make
def reflinked(p):
    src = os.path.join(d, "keep")
    with open(src, "wb") as f:
        f.write(os.urandom(65536))
    s, t = os.open(src, os.O_RDONLY), os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    if os.copy_file_range(s, t, 65536) != 65536:
        sys.exit("copy_file_range was short")
    os.close(s)
    os.close(t)
def prealloc(p):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, 65536)
    os.pwrite(fd, b"y" * 4096, 0)
    os.close(fd)
victim("s4k", plain(4096))
victim("s100k", plain(100000))
victim("s32sect", plain(32 * 4096))
victim("s33sect", plain(33 * 4096))
victim("reflinked", reflinked)
victim("prealloc", prealloc)
PY
img=$(oracle_image c.img 1G)
oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
mnt=$T/c.mnt
ro_fuse_up "$mnt" "$T/c.log" rw "$img" || { ro_show "$T/c.log"; oracle_fail "(c) rw mount did not come up"; }
"$ORACLE_PYTHON" "$T/small.py" "$mnt" >"$T/small.out" || oracle_fail "(c) the small victims misbehaved"
keep_sum=$(sha256sum <"$mnt/keep")
ro_fuse_down "(c)" "$mnt" "$T/c.log"
n=$(orphans_in "$img")
((n == 0)) || ro_fail "(c) $n ORPHAN_ITEMs left after close and unmount"
btrfs inspect-internal dump-tree -t 5 "$img" >"$T/c.fs"
btrfs inspect-internal dump-tree -t 2 "$img" >"$T/c.extent"
[[ $(wc -l <"$T/small.out") == 6 ]] || ro_fail "(c) $(wc -l <"$T/small.out") victims reported, not 6"
while read -r name ino; do
	grep -qE "key \($ino (INODE_ITEM|EXTENT_DATA)" "$T/c.fs" &&
		ro_fail "(c) $name: inode $ino still has items after its last close"
	grep -qE "data backref root (5|FS_TREE) objectid $ino " "$T/c.extent" &&
		ro_fail "(c) $name: an extent still has a reference from inode $ino"
done <"$T/small.out"
oracle_check_clean "(c)" "$img" || ro_fail "(c) btrfs check is not clean"
oracle_kmount -o ro "$T/c.k" "$img" || ro_fail "(c) the kernel does not mount the image"
if oracle_is_mounted "$T/c.k"; then
	[[ $(sha256sum <"$T/c.k/keep") == "$keep_sum" ]] ||
		ro_fail "(c) the reflink source reads back differently through the kernel"
	oracle_kumount "$T/c.k"
fi
RO_CELLS=3
ro_finish
