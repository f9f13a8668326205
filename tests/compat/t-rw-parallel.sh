#!/bin/bash
# t-rw-parallel: readers, writers and commits at once on one read-write
# FUSE mount, and the result the kernel reads.
#
# On a `ubtrfs mount -o rw,commit=1` of a new image: two untars of the same
# tree (a/ and b/) run while two walkers stat and read every file they find
# and fsync the mount after each pass, and a third process fsyncs it every
# 20 ms (commits, whose device writes run beside the readers); then a/ is
# removed while they go on.  The daemon must exit 0 with nothing from a sanitizer in its log;
# btrfs check is clean; the kernel reads b/ back equal to the tarball
# (`tar --compare`) and a/ is gone.
#
# With UBTRFS_TSAN_BUILD naming a ThreadSanitizer build (scripts/build
# tsan), its ubtrfs serves the mount and any ThreadSanitizer report fails
# the test: the tree-block cache skips its mutex for the thread that holds
# the write lock, which is only sound while every other thread in the
# library holds the read lock (docs/ARCHITECTURE.md, lock order).
#
# Needs root, btrfs-progs, FUSE, python3, tar.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd tar
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

served_by=$UBTRFS
served_lib=${LD_LIBRARY_PATH:-}
if [[ -n ${UBTRFS_TSAN_BUILD:-} ]]; then
	served_by=$UBTRFS_TSAN_BUILD/src/cli/ubtrfs
	# (meson's LD_LIBRARY_PATH names this build's library, which would
	# come before the TSan binary's own)
	served_lib=$UBTRFS_TSAN_BUILD/src/lib
	[[ -x $served_by ]] || oracle_fail "UBTRFS_TSAN_BUILD has no $served_by"
	export TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 second_deadlock_stack=1"
fi
nfiles=${UBTRFS_TEST_QUICK:+2000}
nfiles=${nfiles:-6000}
[[ -n ${UBTRFS_TSAN_BUILD:-} ]] && nfiles=1200
"$ORACLE_PYTHON" "$UBTRFS_SOURCE_ROOT/bench/lib/mktree.py" "$nfiles" 7 >"$T/tree.tar" ||
	oracle_fail "mktree.py failed"

img=$(oracle_image par.img 2G)
oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
m=$T/m
LD_LIBRARY_PATH=$served_lib UBTRFS=$served_by ro_fuse_up "$m" "$T/daemon.log" rw,commit=1 "$img" ||
	{ ro_show "$T/daemon.log"; oracle_fail "the read-write mount did not come up"; }
oracle_log "served by $served_by, $nfiles files per tree"

# walker N: stat every file found, read some, commit; until $T/stop exists.
walker() {
	"$ORACLE_PYTHON" - "$m" "$T/stop" "$1" <<'PY'
import os, sys
root, stop, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rounds = 0
while not os.path.exists(stop) or rounds < 2:
    rounds += 1
    for d, dirs, files in os.walk(root):
        for i, f in enumerate(files):
            p = os.path.join(d, f)
            try:
                os.lstat(p)
                if (i + n) % 7 == 0 and os.path.isfile(p):
                    with open(p, "rb") as fh:
                        fh.read()
            except OSError:
                pass  # removed meanwhile
    fd = os.open(root, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
PY
}

# committer: an fsync of the mount (a commit, whose device writes run
# beside the readers) every 20 ms, until $T/stop exists.
committer() {
	"$ORACLE_PYTHON" - "$m" "$T/stop" <<'PY'
import os, sys, time
root, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(stop):
    fd = os.open(root, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    time.sleep(0.02)
PY
}

walker 0 & w0=$!
walker 3 & w1=$!
committer & cm=$!
mkdir "$m/a" "$m/b"
tar -xf "$T/tree.tar" -C "$m/a" & ta=$!
tar -xf "$T/tree.tar" -C "$m/b" || ro_fail "untar into b/ failed"
wait "$ta" || ro_fail "untar into a/ failed"
rm -rf "$m/a" || ro_fail "rm -rf a/ failed"
touch "$T/stop"
wait "$w0" || ro_fail "walker 0 failed"
wait "$w1" || ro_fail "walker 1 failed"
wait "$cm" || ro_fail "the committer failed"
ro_fuse_down parallel "$m" "$T/daemon.log"
if grep -q 'ThreadSanitizer' "$T/daemon.log"; then
	ro_fail "ThreadSanitizer reports ($(grep -c 'WARNING: ThreadSanitizer' "$T/daemon.log"))"
	grep -m2 -A16 'WARNING: ThreadSanitizer' "$T/daemon.log" | sed 's/^/    /'
fi

oracle_check_clean parallel "$img" || ro_fail "btrfs check is not clean"
if oracle_kmount -o ro "$T/k" "$img"; then
	[[ ! -e $T/k/a ]] || ro_fail "a/ is still there for the kernel"
	tar --compare -f "$T/tree.tar" -C "$T/k/b" >"$T/compare.txt" 2>&1 ||
		{ ro_show "$T/compare.txt"; ro_fail "the kernel reads b/ other than the tarball"; }
	oracle_kumount "$T/k"
else
	ro_fail "the kernel does not mount the image"
fi
RO_CELLS=1
ro_finish
