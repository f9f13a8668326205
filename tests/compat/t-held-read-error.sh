#!/bin/bash
# t-held-read-error: a held-back append whose write fails when a read makes
# it land.
#
# Through `ubtrfs mount -o rw` of a mkfs.btrfs image: a file `f` of 5000
# bytes (a regular extent ending inside its second sector) is written and
# fsync'ed; then 100 bytes are appended - a small write at the file's end
# inside a sector, which the daemon holds back (written with the next call).
# Behind the daemon's back one byte of the file's partial last sector is
# flipped in the image, so the held write, which must read that sector
# back to rewrite it, meets a checksum error.  Then a stat of `f` (the call
# that makes the held write land) must fail with EIO - not answer the last
# commit's size as if nothing happened; the mount is read-only afterwards
# (a new file: EROFS); the daemon exits 0 and its log names the held write
# that failed (inode, offset, length).  With the byte put back, the image
# is clean in btrfs check and the kernel reads `f` as committed: 5000
# bytes, without the append.
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

# held.py write MNT | flip IMG SAVE | stat MNT | restore IMG SAVE | verify DIR
cat >"$T/held.py" <<'PY'
import errno, hashlib, os, sys, time

def content(n):
    out = b""
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"held-read-error %d" % i).digest()
        i += 1
    return out[:n]

BASE = content(5000)
TAIL = BASE[4096:]          # the partial last sector's bytes
mode = sys.argv[1]
if mode == "write":
    p = os.path.join(sys.argv[2], "f")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, BASE)
    os.fsync(fd)
    os.close(fd)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    if os.write(fd, b"A" * 100) != 100:
        sys.exit("short append")
    os.close(fd)
elif mode == "flip":
    img, save = sys.argv[2:4]
    data = open(img, "rb").read()
    hits = []
    at = data.find(TAIL)
    while at >= 0:
        hits.append(at)
        at = data.find(TAIL, at + 1)
    if len(hits) != 1 or hits[0] % 4096:
        sys.exit("the file's last sector is at %s in the image, expected one aligned copy" % hits)
    off = hits[0] + 10
    open(save, "w").write("%d %d\n" % (off, data[off]))
    fd = os.open(img, os.O_WRONLY)
    os.pwrite(fd, bytes([data[off] ^ 0xff]), off)
    os.fsync(fd)
    os.close(fd)
    print("flipped the byte at image offset %d" % off)
elif mode == "stat":
    mnt = sys.argv[2]
    time.sleep(1.2)         # past the 1 s the kernel keeps attributes
    try:
        st = os.stat(os.path.join(mnt, "f"))
        sys.exit("stat of f succeeded (size %d) although its held-back write failed"
                 % st.st_size)
    except OSError as e:
        if e.errno != errno.EIO:
            sys.exit("stat of f: %s, expected EIO" % os.strerror(e.errno))
    print("stat: EIO")
    try:
        os.close(os.open(os.path.join(mnt, "g"), os.O_WRONLY | os.O_CREAT, 0o644))
        sys.exit("a new file after the failure was created")
    except OSError as e:
        if e.errno != errno.EROFS:
            sys.exit("creating g: %s, expected EROFS" % os.strerror(e.errno))
    print("then create: EROFS")
elif mode == "restore":
    img, save = sys.argv[2:4]
    off, val = map(int, open(save).read().split())
    fd = os.open(img, os.O_WRONLY)
    os.pwrite(fd, bytes([val]), off)
    os.close(fd)
elif mode == "verify":
    with open(os.path.join(sys.argv[2], "f"), "rb") as f:
        got = f.read()
    if got != BASE:
        sys.exit("the kernel reads %d bytes of f, not the 5000 committed" % len(got))
    print("kernel: f holds its 5000 committed bytes")
PY

img=$T/img
truncate -s 256M "$img"
oracle_mkfs -- "$img"
mnt=$T/mnt
log=$T/daemon.log
# No commit by the timer between the append and the stat (it would make
# the held write land first).
ro_fuse_up "$mnt" "$log" rw,commit=3600 "$img" || { ro_show "$log"; oracle_fail "rw mount did not come up"; }
"$ORACLE_PYTHON" "$T/held.py" write "$mnt" || ro_fail "writing f"
"$ORACLE_PYTHON" "$T/held.py" flip "$img" "$T/saved" >"$T/out" 2>&1 ||
	{ ro_show "$T/out"; ro_fuse_down "after flip" "$mnt" "$log"; oracle_fail "flipping a byte of f"; }
oracle_log "$(cat "$T/out")"
if timeout 60 "$ORACLE_PYTHON" "$T/held.py" stat "$mnt" >"$T/out" 2>&1; then
	oracle_log "$(tr '\n' ' ' <"$T/out")"
else
	ro_show "$T/out"
	ro_fail "after the held-back write failed"
fi
ro_fuse_down "after the failed held-back write" "$mnt" "$log"
grep -qE 'held-back write of 100 bytes at offset 5000 of inode [0-9]+' "$log" ||
	{ ro_show "$log"; ro_fail "the daemon did not name the held-back write that failed"; }
oracle_log "the daemon said: $(grep -E "held-back" "$log" | head -n 2 | tr "\n" " ")"

"$ORACLE_PYTHON" "$T/held.py" restore "$img" "$T/saved"
oracle_check_clean "the image" "$img" || ro_fail "btrfs check of the image is not clean"
if oracle_kmount -o ro "$T/k" "$img"; then
	"$ORACLE_PYTHON" "$T/held.py" verify "$T/k" >"$T/out" 2>&1 ||
		{ ro_show "$T/out"; ro_fail "the kernel does not show the last commit"; }
	oracle_log "$(cat "$T/out")"
	oracle_kumount "$T/k"
else
	ro_fail "the kernel does not mount the image"
fi

((RO_FAILS == 0)) || oracle_fail "$RO_FAILS check(s) failed"
oracle_log "passed"
