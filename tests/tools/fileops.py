#!/usr/bin/env python3
"""fileops.py DIR SEED [--rounds N]: a reproducible sequence of the data
operations a read-write mount must get right beyond plain writes -
fallocate (mode 0, KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE, ZERO_RANGE|KEEP_SIZE),
lseek SEEK_DATA/SEEK_HOLE, copy_file_range (aligned and not, within and
across files), renameat2 RENAME_NOREPLACE/RENAME_EXCHANGE, and writes and
truncates between them - run in DIR.  Prints one line per operation: the
result (errno or size) and the SHA-1 of the file afterwards, so that two runs
(a reference filesystem and the one under test) can be compared line by
line.  SEEK_DATA/SEEK_HOLE answers are filesystem-specific (granularity,
preallocated space), so instead of printing them the tool checks what POSIX
promises: every non-zero byte lies in a reported data region, and prints a
SEEKBAD line when that fails.
"""
import ctypes
import errno
import hashlib
import os
import random
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
AT_FDCWD = -100
MODES = [0, 1, 3, 0x10, 0x11]


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) == 0:
        return 0
    return ctypes.get_errno()


def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) == 0:
        return 0
    return ctypes.get_errno()


def digest(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return "E%d" % e.errno
    return "%d:%s" % (len(data), hashlib.sha1(data).hexdigest()[:16])


def seek_check(fd):
    """Every non-zero byte must be inside a SEEK_DATA..SEEK_HOLE region."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    covered = bytearray(size)
    pos = 0
    while pos < size:
        try:
            d = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:
                return "lseek SEEK_DATA errno %d" % e.errno
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        if h <= d:
            return "SEEK_HOLE %d <= SEEK_DATA %d" % (h, d)
        covered[d:min(h, size)] = b"\1" * (min(h, size) - d)
        pos = h
    try:
        end = os.lseek(fd, size, os.SEEK_HOLE)
        return "SEEK_HOLE at EOF gave %d" % end
    except OSError as e:
        if e.errno != errno.ENXIO:
            return "SEEK_HOLE at EOF errno %d" % e.errno
    for i in range(size):
        if data[i] and not covered[i]:
            return "non-zero byte %d outside the data regions" % i
    return None


def offset(rnd):
    base = rnd.choice([0, 1, 100, 4095, 4096, 5000, 8192, 65536, 70000, 1 << 20])
    return base + rnd.randrange(3) * 4096


def length(rnd):
    return rnd.choice([1, 10, 3000, 4096, 5000, 8192, 20000, 131072, 200000])


def run(root, seed, rounds):
    rnd = random.Random(seed)
    os.chdir(root)
    names = ["f%d" % i for i in range(5)]
    fds = {n: os.open(n, os.O_RDWR | os.O_CREAT, 0o644) for n in names}
    for n in names[:3]:
        os.pwrite(fds[n], bytes(rnd.randrange(1, 256) for _ in range(300)) * 100, 0)
    out = []
    for step in range(rounds):
        n = rnd.choice(names)
        fd = fds[n]
        k = rnd.randrange(10)
        off, ln = offset(rnd), length(rnd)
        if k < 4:
            mode = rnd.choice(MODES)
            res = "fallocate %s %#x %d %d -> %d" % (n, mode, off, ln, fallocate(fd, mode, off, ln))
        elif k < 6:
            os.pwrite(fd, bytes([rnd.randrange(1, 256)]) * ln, off)
            res = "pwrite %s %d %d" % (n, off, ln)
        elif k == 6:
            size = rnd.randrange(0, 300000)
            os.ftruncate(fd, size)
            res = "ftruncate %s %d" % (n, size)
        elif k < 9:
            m = rnd.choice(names)
            src_off = rnd.choice([0, 4096, 8192, 100, 65536])
            dst_off = rnd.choice([0, 4096, 12288, 777, 1 << 20])
            if rnd.random() < 0.5:
                ln = rnd.choice([4096, 8192, 65536, 131072])
            if m == n and abs(src_off - dst_off) < ln:
                dst_off = src_off + ln + 4096 * rnd.randrange(3)
            try:
                got = os.copy_file_range(fds[m], fd, ln, src_off, dst_off)
                res = "copy_file_range %s@%d -> %s@%d %d -> %d" % (m, src_off, n, dst_off, ln, got)
            except OSError as e:
                res = "copy_file_range %s@%d -> %s@%d %d -> E%d" % (m, src_off, n, dst_off, ln,
                                                                     e.errno)
        else:
            m = rnd.choice(names)
            flags = rnd.choice([1, 2])
            r = renameat2(n, m, flags)
            if r == 0 and flags == 2:
                fds[n], fds[m] = fds[m], fds[n]
            res = "renameat2 %s %s %d -> %d" % (n, m, flags, r)
        out.append("%d %s | %s" % (step, res, " ".join(digest(x) for x in names)))
        bad = seek_check(fds[n])
        if bad:
            out.append("SEEKBAD %d %s: %s" % (step, n, bad))
    for fd in fds.values():
        os.close(fd)
    return out


def main():
    args = sys.argv[1:]
    rounds = 300
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    for line in run(args[0], int(args[1]), rounds):
        print(line)


if __name__ == "__main__":
    main()
