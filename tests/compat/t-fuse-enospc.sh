#!/bin/bash
# t-fuse-enospc: a full filesystem through the read-write FUSE mount.
#
# For each configuration, three rounds on the same image:
#   data    5000-byte files (a data extent each) until the data space runs
#           out,
#   inline  100-byte files (inline extents: metadata only) until the
#           metadata space runs out,
#   mixed   12000-byte files, on the metadata chunks the inline round left.
# Each round first writes a file of 600 small extents, and once the
# filesystem is full shrinks a few files to an unaligned size and punches
# unaligned holes into a few others (ENOSPC or done, never half done).
# A round writes files (100 to a directory) until 50 creates or writes have
# failed with ENOSPC; any other error fails the test.  Then: the daemon
# exits 0 without aborting a transaction, btrfs check is clean, and the
# kernel shows exactly the files whose write succeeded, with their bytes
# (one whose write met ENOSPC is empty, a failed create left nothing).  Then
# `rm` of the 600-extent file and `rm -rf` of everything through a new
# mount must succeed with no error (a full filesystem empties), btrfs check is clean and the kernel sees the
# directory gone.  The same image goes to the next round.
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

# files.py fill|verify MNT SIZE SEED LIST.  fill: the files, and LIST, a
# "name index size" line for every file that exists afterwards (size: the
# bytes it must hold).  verify: the tree under MNT/t is exactly LIST.
cat >"$T/files.py" <<'PY'
import ctypes, errno, hashlib, os, sys
mode, mnt, size, seed, listing = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]

PUNCH_LEN = 4000

def expect(i, n):
    # n < 0: -n bytes with [100, 100 + PUNCH_LEN) punched
    if n >= 0:
        return content(i)[:n]
    b = bytearray(content(i)[:-n])
    b[100:100 + PUNCH_LEN] = bytes(len(b[100:100 + PUNCH_LEN]))
    return bytes(b)

def content(i):
    out, n = b"", 0
    while len(out) < size:
        out += hashlib.sha256(("%s/%d/%d" % (seed, i, n)).encode()).digest()
        n += 1
    return out[:size]

def fill():
    # A file of 600 extents (4 KiB each, holes between) to delete on the
    # full filesystem: more than one operation's reserve if done at once.
    fd = os.open(os.path.join(mnt, "big"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    for k in range(600):
        os.pwrite(fd, content(k)[:4096].ljust(4096, b"x"), 8192 * k)
    os.close(fd)
    top = os.path.join(mnt, "t")
    os.mkdir(top)
    fails, i, kept, made_dir = 0, 0, [], None
    while fails < 50:
        d = os.path.join(top, "d%d" % (i // 100))
        if made_dir != d:
            try:
                os.mkdir(d)
                made_dir = d
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    sys.exit("mkdir %s: %s" % (d, e))
                fails += 1
                i += 100 - i % 100
                continue
        name = os.path.join("t", "d%d" % (i // 100), "f%d" % i)
        try:
            fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                sys.exit("create %s: %s" % (name, e))
            fails += 1
            i += 1
            continue
        data = content(i)
        try:
            n = os.write(fd, data)
            if n != len(data):
                sys.exit("short write of %s: %d" % (name, n))
            kept.append((name, i, size))
        except OSError as e:
            if e.errno != errno.ENOSPC:
                sys.exit("write %s: %s" % (name, e))
            fails += 1
            kept.append((name, i, 0))
        os.close(fd)
        i += 1
    # Full: shrinking to an unaligned size rewrites the last sector, which
    # needs data space - ENOSPC must leave the file as it was.
    shrunk = 0
    for j, (name, idx, n) in enumerate(kept):
        if shrunk == 3:
            break
        if n == size and size > 4096:
            try:
                os.truncate(os.path.join(mnt, name), 1000)
                kept[j] = (name, idx, 1000)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    sys.exit("truncate %s: %s" % (name, e))
            shrunk += 1
    # Full: punching a hole with unaligned edges rewrites the partial
    # sectors zeroed - ENOSPC or done, never half done.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    punched = 0
    for j, (name, idx, n) in enumerate(kept):
        if punched == 3:
            break
        if n == size and size > 4096:
            fd = os.open(os.path.join(mnt, name), os.O_WRONLY)
            if libc.fallocate(fd, 3, 100, PUNCH_LEN) == 0:   # PUNCH_HOLE | KEEP_SIZE
                kept[j] = (name, idx, -n)
            elif ctypes.get_errno() != errno.ENOSPC:
                sys.exit("punch %s: %s" % (name, os.strerror(ctypes.get_errno())))
            os.close(fd)
            punched += 1
    fd = os.open(mnt, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    with open(listing, "w") as f:
        for name, idx, n in kept:
            f.write("%s %d %d\n" % (name, idx, n))
    full = sum(1 for k in kept if k[2] != 0)
    print("%d files of %d bytes, %d empty after ENOSPC" % (full, size, len(kept) - full))
    if full < 10:
        sys.exit("only %d files fit" % full)

def verify():
    want = {}
    for line in open(listing):
        name, idx, n = line.split()
        want[name] = (int(idx), int(n))
    have = set()
    for dp, dns, fns in os.walk(os.path.join(mnt, "t")):
        for fn in fns:
            have.add(os.path.relpath(os.path.join(dp, fn), mnt))
    bad = sorted(have ^ set(want))
    if bad:
        sys.exit("%d names differ, e.g. %s" % (len(bad), bad[:5]))
    for name, (idx, n) in want.items():
        with open(os.path.join(mnt, name), "rb") as f:
            got = f.read()
        if got != expect(idx, n):
            sys.exit("%s: %d bytes, not the %d written" % (name, len(got), abs(n)))
    print("%d files verified" % len(want))

fill() if mode == "fill" else verify()
PY

CELL=
round() {
	local what=$1 size=$2 img=$3 mnt=$T/$CELL.$1.mnt k=$T/$CELL.$1.k
	local log=$T/$CELL.$1.log list=$T/$CELL.$1.list
	ro_fuse_up "$mnt" "$log" rw "$img" || { ro_show "$log"; ro_fail "$CELL $what: rw mount did not come up"; return 1; }
	if ! "$ORACLE_PYTHON" "$T/files.py" fill "$mnt" "$size" "$CELL.$what" "$list" >"$T/fill.out" 2>&1; then
		ro_show "$T/fill.out"
		ro_fail "$CELL $what: filling failed"
	fi
	oracle_log "$CELL $what: $(tail -n 1 "$T/fill.out")"
	ro_fuse_down "$CELL $what fill" "$mnt" "$log"
	if grep -qiE 'abort|read-only' "$log"; then
		ro_show "$log"
		ro_fail "$CELL $what: the daemon aborted a transaction while filling"
	fi
	oracle_check_clean "$CELL $what filled" "$img" || ro_fail "$CELL $what: btrfs check after filling is not clean"
	if oracle_kmount -o ro "$k" "$img"; then
		"$ORACLE_PYTHON" "$T/files.py" verify "$k" "$size" "$CELL.$what" "$list" >"$T/verify.out" 2>&1 ||
			{ ro_show "$T/verify.out"; ro_fail "$CELL $what: the kernel does not show what was written"; }
		oracle_kumount "$k"
	else
		ro_fail "$CELL $what: the kernel does not mount the filled image"
	fi

	ro_fuse_up "$mnt" "$log.rm" rw "$img" || { ro_show "$log.rm"; ro_fail "$CELL $what: second rw mount did not come up"; return 1; }
	if ! rm "$mnt/big" 2>"$T/rm.err"; then
		ro_show "$T/rm.err" 5
		ro_fail "$CELL $what: rm of a 600-extent file on the full filesystem failed"
	fi
	if ! rm -rf "$mnt/t" 2>"$T/rm.err"; then
		ro_show "$T/rm.err" 5
		ro_fail "$CELL $what: rm -rf of the full filesystem failed ($(wc -l <"$T/rm.err") errors)"
	fi
	"$ORACLE_PYTHON" -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$mnt" ||
		ro_fail "$CELL $what: fsync after rm -rf failed"
	ro_fuse_down "$CELL $what rm" "$mnt" "$log.rm"
	if grep -qiE 'abort|read-only' "$log.rm"; then
		ro_show "$log.rm"
		ro_fail "$CELL $what: the daemon aborted a transaction while emptying"
	fi
	oracle_check_clean "$CELL $what emptied" "$img" || ro_fail "$CELL $what: btrfs check after rm -rf is not clean"
	if oracle_kmount -o ro "$k" "$img"; then
		[[ -e $k/t ]] && ro_fail "$CELL $what: the kernel still sees t/ after rm -rf"
		oracle_kumount "$k"
	else
		ro_fail "$CELL $what: the kernel does not mount the emptied image"
	fi
}

# UBTRFS_TEST_QUICK=1 (the sanitizer run of scripts/test): the first cell,
# its data round only.
QUICK=${UBTRFS_TEST_QUICK:-0}
cell() {
	local maker=$2 opts=$3 img
	CELL=$1
	img=$(oracle_image "$CELL.img" 256M)
	if [[ $maker == ubtrfs ]]; then
		# shellcheck disable=SC2086
		oracle_ubtrfs mkfs -q -f $opts "$img" || oracle_fail "ubtrfs mkfs failed"
	else
		# shellcheck disable=SC2086
		mkfs.btrfs -q -f $opts "$img" >/dev/null || oracle_fail "mkfs.btrfs failed"
	fi
	RO_CELLS=$((RO_CELLS + 1))
	round data 5000 "$img"
	((QUICK)) && return 0
	round inline 100 "$img"
	round mixed 12000 "$img"
	rm -f -- "$img"
}

#    name       maker   mkfs options
cell ubt-4k     ubtrfs  "-n 4096"
((QUICK)) || cell progs-16k  progs   ""
ro_finish
