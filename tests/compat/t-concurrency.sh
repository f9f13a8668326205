#!/bin/bash
# t-concurrency: reads run while a commit writes its blocks.
#
# The daemon runs with UBTRFS_DEBUG_COMMIT_DELAY_MS (a test hook that makes
# every commit wait that long before its device writes, like a slow disk).
# With the kernel's caches dropped, one process fsyncs a freshly written
# file (a commit: at least the delay) while others, started once the fsync
# is under way, read a cold 4 MiB file, stat 200 cold entries and list a
# directory through the mount.  Every reader must finish -- with the right
# bytes -- before the fsync returns: no lock a reader needs is held across
# the commit's device I/O.  A writer started during the commit waits for it
# (one writer at a time) and then succeeds.  (The writer works in another
# directory than the readers: the kernel itself holds a directory's lock
# across a create in it.)  Afterwards: btrfs check clean,
# the kernel reads every byte written.
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

DELAY_MS=3000

cat >"$T/setup.py" <<'PY'
import os, random, sys
d = sys.argv[1]
r = random.Random(7)
with open(os.path.join(d, "cold"), "wb") as f:
    f.write(r.randbytes(4 << 20))
os.mkdir(os.path.join(d, "dir"))
os.mkdir(os.path.join(d, "w"))
for i in range(200):
    with open(os.path.join(d, "dir", "f%03d" % i), "wb") as f:
        f.write(r.randbytes(100 + i))
fd = os.open(os.path.join(d, "cold"), os.O_RDONLY)
os.fsync(fd)
os.close(fd)
PY

cat >"$T/race.py" <<'PY'
import os, random, sys, threading, time
d, delay = sys.argv[1], int(sys.argv[2]) / 1000.0
r = random.Random(7)
cold = r.randbytes(4 << 20)
small = [r.randbytes(100 + i) for i in range(200)]
t0 = time.monotonic()
done = {}
errors = []

def fsyncer():
    fd = os.open(os.path.join(d, "new"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"fsync me\n")
    os.fsync(fd)
    os.close(fd)
    done["fsync"] = time.monotonic() - t0

def reader():
    with open(os.path.join(d, "cold"), "rb") as f:
        if f.read() != cold:
            errors.append("cold: wrong bytes")
    for i in range(200):
        p = os.path.join(d, "dir", "f%03d" % i)
        if os.stat(p).st_size != 100 + i:
            errors.append(p + ": wrong size")
    names = sorted(os.listdir(os.path.join(d, "dir")))
    if names != ["f%03d" % i for i in range(200)]:
        errors.append("dir: wrong listing")
    with open(os.path.join(d, "dir", "f150"), "rb") as f:
        if f.read() != small[150]:
            errors.append("f150: wrong bytes")
    done["read"] = time.monotonic() - t0

def writer():
    # In its own directory: a create holds its parent's lock in the
    # kernel's VFS, which would stop lookups in the same directory.
    with open(os.path.join(d, "w", "during"), "wb") as f:
        f.write(b"written during a commit\n")
    done["write"] = time.monotonic() - t0

a = threading.Thread(target=fsyncer)
a.start()
time.sleep(min(1.0, delay / 3))     # the commit is now waiting in its write phase
b = threading.Thread(target=reader)
c = threading.Thread(target=writer)
b.start(); c.start()
for t in (a, b, c):
    t.join()
for e in errors:
    print("FAIL:", e)
print("fsync %.2f s, reads done at %.2f s, write done at %.2f s"
      % (done["fsync"], done["read"], done["write"]))
if done["fsync"] < delay * 0.9:
    print("FAIL: the fsync took %.2f s: no commit with the injected delay ran" % done["fsync"])
    errors.append(1)
if done["read"] >= done["fsync"]:
    print("FAIL: the reads waited for the commit")
    errors.append(1)
sys.exit(1 if errors else 0)
PY

for kind in ubtrfs mkfs.btrfs; do
	img=$(oracle_image "$kind.img" 1G)
	if [[ $kind == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
	else
		oracle_mkfs -- "$img"
	fi
	mnt=$T/$kind.mnt
	ro_fuse_up "$mnt" "$T/$kind.log" rw "$img" || { ro_show "$T/$kind.log"; oracle_fail "$kind: rw mount did not come up"; }
	"$ORACLE_PYTHON" "$T/setup.py" "$mnt" || ro_fail "$kind: setup failed"
	# The hook applies to the commits from now on: the daemon reads the
	# variable at each commit, so restart it with the variable set.
	ro_fuse_down "$kind (setup)" "$mnt" "$T/$kind.log"
	UBTRFS_DEBUG_COMMIT_DELAY_MS=$DELAY_MS ro_fuse_up "$mnt" "$T/$kind.2.log" rw "$img" ||
		{ ro_show "$T/$kind.2.log"; oracle_fail "$kind: second rw mount did not come up"; }
	sync
	echo 3 >/proc/sys/vm/drop_caches
	if "$ORACLE_PYTHON" "$T/race.py" "$mnt" "$DELAY_MS" >"$T/$kind.race" 2>&1; then
		ro_note "$kind: $(tail -n 1 "$T/$kind.race")"
	else
		ro_show "$T/$kind.race"
		ro_fail "$kind: readers during a commit"
	fi
	ro_fuse_down "$kind" "$mnt" "$T/$kind.2.log"
	oracle_check_clean "$kind" "$img" || ro_fail "$kind: btrfs check is not clean"
	oracle_kmount -o ro "$T/$kind.k" "$img" || { ro_fail "$kind: the kernel does not mount it"; continue; }
	"$ORACLE_PYTHON" - "$T/$kind.k" <<'PY' || ro_fail "$kind: the kernel reads other bytes"
import os, random, sys
d = sys.argv[1]
r = random.Random(7)
assert open(os.path.join(d, "cold"), "rb").read() == r.randbytes(4 << 20)
for i in range(200):
    assert open(os.path.join(d, "dir", "f%03d" % i), "rb").read() == r.randbytes(100 + i)
assert open(os.path.join(d, "new"), "rb").read() == b"fsync me\n"
assert open(os.path.join(d, "w", "during"), "rb").read() == b"written during a commit\n"
PY
	oracle_kumount "$T/$kind.k"
done
RO_CELLS=2
ro_finish
