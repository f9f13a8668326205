#!/usr/bin/env python3
"""Deterministic filesystem workload: builds a tree full of edge cases.

    workload.py DIR --seed N [--profile small|full] [--btrfs]
                [--no-root-only-things]

Everything -- names, contents, modes, owners, xattrs, times -- comes from
random.Random(N), so the same seed on the same kind of filesystem gives the
same tree (same manifest apart from ctime and inode numbers).  DIR must exist
and should be empty.  A summary goes to stderr; exit 0 on success.

What it makes (top-level directories of DIR):
    files/     regular files of edge sizes (0, 1, inline limit +-1, sector
               +-1, 64/128 KiB +-1, 1 MiB +-1; full adds larger), zero-filled
               and compressible ones, overwritten/appended/truncated ones
    sparse/    leading, middle, trailing holes; hole-only; unaligned data
    prealloc/  posix_fallocate, FALLOC_FL_KEEP_SIZE past EOF, punched holes
               (aligned and not), zero range, prealloc partly written
    links/     hard-link groups across directories (also of a symlink and a
               fifo), a link whose original was unlinked
    symlinks/  short, relative, absolute, dangling, looping, 3900 and 4095
               byte targets, targets with UTF-8 and spaces
    special/   fifos, unix sockets, char and block devices (root only)
    xattr/     user.* (empty, binary, ~3900 bytes, 255-byte names, many on one
               file, replaced, removed), trusted.* (root only)
    acl/       system.posix_acl_access/default (binary format written here),
               files and directories inheriting a default ACL
    modes/     setuid/setgid/sticky, 000, 777, setgid directory
    owners/    arbitrary uids/gids (root only), lchown'ed symlink
    names/     255-byte ASCII and UTF-8 names, spaces, newlines, backslash,
               invalid UTF-8, deep paths of long names
    bigdir/    hundreds (small) or thousands (full) of entries, some removed
    renames/   renamed files, replaced targets, moved directory trees
    btrfs/     with --btrfs: subvolumes, nested subvolumes, snapshots (rw and
               -r) and snapshots of snapshots, a deleted snapshot, reflinks
               (FICLONE, FICLONERANGE), zstd/lzo/zlib compression (property
               and chattr +c), nodatacow (chattr +C) files and directory

Root-only parts (device nodes, chown, trusted.*, mode 000) run when euid is 0,
unless --no-root-only-things.  Times (atime and mtime, with nanoseconds, some
before 1970 and after 2038) are set last on every entry, symlinks included,
deepest first; read-only snapshots get theirs before they are taken.  The
nested-subvolume placeholders btrfs shows inside snapshots (inode 2) cannot
take times and are left alone.  Operations a filesystem refuses with
EOPNOTSUPP/ENOTSUP/E2BIG/ENOSPC/ENAMETOOLONG (e.g. a 4095-byte symlink on 4 KiB
btrfs nodes) are counted as skipped in the summary, not fatal.
"""

import argparse
import ctypes
import ctypes.util
import errno
import fcntl
import os
import socket
import stat
import struct
import subprocess
import sys
import random

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10
FICLONE = 0x40049409
FICLONERANGE = 0x4020940D
FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_COMPR_FL = 0x00000004
FS_NOCOW_FL = 0x00800000
BTRFS_EMPTY_SUBVOL_DIR_INO = 2

ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ = 0x01, 0x02, 0x04
ACL_GROUP, ACL_MASK, ACL_OTHER = 0x08, 0x10, 0x20
ACL_UNDEFINED_ID = 0xFFFFFFFF

KiB = 1024
MiB = 1024 * KiB

SOFT_ERRORS = (errno.EOPNOTSUPP, errno.ENOTSUP, errno.E2BIG, errno.ENOSPC,
               errno.ENAMETOOLONG, errno.ENOTTY)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                    use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_int64]
_libc.fallocate.restype = ctypes.c_int

WORDS = ("btrfs", "extent", "inode", "chunk", "stripe", "subvolume", "leaf",
         "node", "csum", "tree", "root", "backref", "delalloc", "snapshot",
         "reflink", "compress", "the", "of", "and", "a", "zstd", "lzo",
         "zlib", "transaction", "generation", "ordered", "\n")


def fallocate(fd, mode, offset, length):
    if _libc.fallocate(fd, mode, offset, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def acl_xattr(entries):
    """Binary system.posix_acl_* value: version 2, then (tag, perm, id)."""
    entries = sorted(entries, key=lambda e: (e[0], e[2]))
    out = struct.pack("<I", 2)
    for tag, perm, ident in entries:
        out += struct.pack("<HHI", tag, perm, ident)
    return out


class Workload:
    def __init__(self, root, seed, profile, btrfs, root_things):
        self.root = os.path.abspath(root)
        self.rng = random.Random(seed)
        self.full = profile == "full"
        self.btrfs = btrfs
        self.root_things = root_things
        self.counts = {}
        self.skipped = []
        self.ro_subvols = []      # paths whose subtree can no longer change

    # -- helpers -----------------------------------------------------------

    def p(self, *parts):
        return os.path.join(self.root, *parts)

    def count(self, what, n=1):
        self.counts[what] = self.counts.get(what, 0) + n

    def soft(self, what, func, *args, **kw):
        """Run func; a refusal in SOFT_ERRORS is recorded, not fatal."""
        try:
            func(*args, **kw)
            return True
        except OSError as e:
            if e.errno in SOFT_ERRORS:
                self.skipped.append("%s (%s)" % (what.split(" ")[0],
                                                 errno.errorcode.get(
                                                     e.errno, e.errno)))
                return False
            raise

    def mkdir(self, *parts, mode=0o755):
        path = self.p(*parts)
        os.mkdir(path)
        os.chmod(path, mode)
        self.count("dirs")
        return path

    def randbytes(self, n):
        return self.rng.randbytes(n)

    def text(self, n):
        """Compressible bytes: seeded words, then cut to n."""
        out = []
        size = 0
        chunk = " ".join(self.rng.choice(WORDS) for _ in range(512)).encode()
        while size < n:
            piece = chunk if self.rng.random() < 0.9 else self.randbytes(64)
            out.append(piece)
            size += len(piece)
        return b"".join(out)[:n]

    def write_file(self, path, data, mode=0o644):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
        os.chmod(path, mode)
        self.count("files")
        self.count("bytes", len(data))
        return path

    def pwrite(self, path, offset, data):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def setx(self, path, name, value):
        if self.soft("xattr %s" % name, os.setxattr, path, name, value,
                     follow_symlinks=False):
            self.count("xattrs")

    def name(self, length, alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-"):
        return "".join(self.rng.choice(alphabet) for _ in range(length))

    # -- parts -------------------------------------------------------------

    def files(self):
        d = self.mkdir("files")
        sizes = [0, 1, 2, 100, 1000, 2047, 2048, 2049, 3000, 4095, 4096,
                 4097, 8191, 8192, 8193, 65535, 65536, 65537, 131071,
                 131072, 131073, 1 * MiB - 1, 1 * MiB, 1 * MiB + 1]
        if self.full:
            sizes += [4 * MiB - 1, 4 * MiB + 1, 16 * MiB + 4097,
                      128 * MiB + 1]
            sizes += [self.rng.randrange(1, 3 * MiB) for _ in range(20)]
        for size in sizes:
            self.write_file(os.path.join(d, "size-%d" % size),
                            self.randbytes(size))
        for size in (2000, 4096, 65536, 300 * KiB):
            self.write_file(os.path.join(d, "zeros-%d" % size), bytes(size))
            self.write_file(os.path.join(d, "text-%d" % size), self.text(size))
        # Rewritten in place: extents split by overwrites, appends, truncates.
        path = self.write_file(os.path.join(d, "overwritten"),
                               self.randbytes(256 * KiB))
        self.pwrite(path, 100 * KiB, self.randbytes(4 * KiB))
        self.pwrite(path, 5000, self.randbytes(1234))
        self.pwrite(path, 256 * KiB, self.randbytes(10000))
        with open(path, "ab") as fh:
            fh.write(self.randbytes(777))
        path = self.write_file(os.path.join(d, "truncated-down"),
                               self.randbytes(1 * MiB))
        os.truncate(path, 5000)
        path = self.write_file(os.path.join(d, "truncated-to-inline"),
                               self.randbytes(10000))
        os.truncate(path, 1000)
        path = self.write_file(os.path.join(d, "truncated-up"),
                               self.randbytes(3000))
        os.truncate(path, 70000)
        path = self.write_file(os.path.join(d, "inline-grown"),
                               self.randbytes(500))
        self.pwrite(path, 500, self.randbytes(9000))
        path = os.path.join(d, "appended")
        for _ in range(20):
            with open(path, "ab") as fh:
                fh.write(self.randbytes(self.rng.randrange(1, 9000)))
        self.count("files")

    def sparse(self):
        d = self.mkdir("sparse")
        j = lambda n: os.path.join(d, n)   # noqa: E731
        self.pwrite(j("leading-hole"), 1 * MiB, self.randbytes(4096))
        self.pwrite(j("trailing-hole"), 0, self.randbytes(4096))
        os.truncate(j("trailing-hole"), 2 * MiB)
        for off in (0, 200000, 777777, 3 * MiB):
            self.pwrite(j("middle-holes"), off, self.randbytes(5000))
        with open(j("hole-only"), "wb") as fh:
            fh.truncate(5 * MiB)
        self.pwrite(j("inline-after-gap"), 1000, self.randbytes(10))
        self.pwrite(j("sector-after-gap"), 4096, self.randbytes(1))
        self.pwrite(j("one-byte-at-end"), 8 * MiB - 1, b"\x01")
        path = j("random")
        for _ in range(40 if self.full else 12):
            off = self.rng.randrange(0, 6 * MiB)
            self.pwrite(path, off, self.randbytes(self.rng.randrange(1, 20000)))
        if self.full:
            self.pwrite(j("far"), 64 * MiB + 12345, self.randbytes(100))
        self.count("sparse files", 8 + self.full)

    def prealloc(self):
        d = self.mkdir("prealloc")
        j = lambda n: os.path.join(d, n)   # noqa: E731

        def with_fd(name, func, data=b""):
            path = j(name)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if data:
                    os.pwrite(fd, data, 0)
                self.soft("fallocate %s" % name, func, fd)
            finally:
                os.close(fd)
            self.count("prealloc files")

        with_fd("posix-fallocate", lambda fd: os.posix_fallocate(fd, 0, 1 * MiB))
        with_fd("keep-size", lambda fd: fallocate(fd, FALLOC_FL_KEEP_SIZE, 0,
                                                  256 * KiB),
                self.randbytes(100))

        def partly(fd):
            os.posix_fallocate(fd, 0, 512 * KiB)
            os.pwrite(fd, self.randbytes(4096), 128 * KiB)
            os.pwrite(fd, self.randbytes(10), 300001)
        with_fd("partly-written", partly)

        def punch(fd):
            keep = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
            fallocate(fd, keep, 64 * KiB, 64 * KiB)
            fallocate(fd, keep, 1000, 9000)
            fallocate(fd, keep, 250000, 100000)
        with_fd("punched", punch, self.randbytes(256 * KiB))

        def punch_all(fd):
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                      1 * MiB)
        with_fd("punched-all", punch_all, self.randbytes(100 * KiB))
        with_fd("punched-inline", lambda fd: fallocate(
            fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 200),
            self.randbytes(1500))
        with_fd("zero-range", lambda fd: fallocate(
            fd, FALLOC_FL_ZERO_RANGE, 10000, 50000), self.randbytes(128 * KiB))

        def beyond(fd):
            fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 * MiB)
            os.ftruncate(fd, 600 * KiB)
        with_fd("keep-size-then-truncate", beyond, self.randbytes(4096))

    def links(self):
        self.mkdir("links")
        self.mkdir("links", "a")
        self.mkdir("links", "b")
        self.mkdir("links", "b", "c")
        j = lambda *n: self.p("links", *n)   # noqa: E731
        self.write_file(j("a", "three"), self.randbytes(5000))
        os.link(j("a", "three"), j("b", "c", "three-2"))
        os.link(j("a", "three"), j("three-3"))
        self.write_file(j("b", "five"), self.randbytes(100))
        for i in range(2, 6):
            os.link(j("b", "five"), j("b", "five-%d" % i))
        self.write_file(j("survivor"), self.randbytes(3000))
        os.link(j("survivor"), j("a", "survivor-link"))
        os.unlink(j("survivor"))
        os.symlink("three", j("a", "sym"))
        os.link(j("a", "sym"), j("b", "sym-link"), follow_symlinks=False)
        os.mkfifo(j("fifo"), 0o644)
        os.link(j("fifo"), j("a", "fifo-link"))
        self.write_file(j("inline-linked"), self.randbytes(10))
        os.link(j("inline-linked"), j("b", "c", "inline-linked-2"))
        self.count("hard links", 4 + 4 + 1 + 1 + 1 + 1)

    def symlinks(self):
        d = self.mkdir("symlinks")
        j = lambda n: os.path.join(d, n)   # noqa: E731
        os.symlink("x", j("one-byte"))
        os.symlink("../files/size-4096", j("relative"))
        os.symlink("/etc/hostname", j("absolute"))
        os.symlink("/nonexistent/ubtrfs/" + self.name(20), j("dangling"))
        os.symlink("../links", j("to-dir"))
        os.symlink("loop-b", j("loop-a"))
        os.symlink("loop-a", j("loop-b"))
        os.symlink("caf\u00e9 \u65e5\u672c/with space", j("utf8-target"))
        long = "/".join(self.name(self.rng.randrange(1, 30))
                        for _ in range(400))
        os.symlink(long[:3900], j("long-3900"))
        n = 9
        full = long[:4095]
        if self.soft("symlink 4095", os.symlink, full, j("long-4095")):
            n += 1
        self.count("symlinks", n)

    def special(self):
        d = self.mkdir("special")
        j = lambda n: os.path.join(d, n)   # noqa: E731
        os.mkfifo(j("fifo"), 0o644)
        os.mkfifo(j("fifo-600"), 0o600)
        self.count("fifos", 2)
        cwd = os.getcwd()
        os.chdir(d)             # sun_path is short; bind a relative name
        try:
            for name in ("socket", "socket-2"):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind(name)
                s.close()
                self.count("sockets")
        finally:
            os.chdir(cwd)
        if self.root_things:
            devs = [("null", stat.S_IFCHR, 1, 3), ("zero", stat.S_IFCHR, 1, 5),
                    ("loop", stat.S_IFBLK, 7, 0), ("sda1", stat.S_IFBLK, 8, 1),
                    ("char-max", stat.S_IFCHR, 4095, 1048575),
                    ("blk-big-minor", stat.S_IFBLK, 259, 65536),
                    ("char-0-0", stat.S_IFCHR, 0, 0)]
            for name, kind, major, minor in devs:
                os.mknod(j(name), kind | 0o640, os.makedev(major, minor))
                self.count("device nodes")

    def xattrs(self):
        d = self.mkdir("xattr")
        j = lambda n: os.path.join(d, n)   # noqa: E731
        path = self.write_file(j("basic"), self.randbytes(100))
        self.setx(path, "user.hello", b"world")
        self.setx(path, "user.empty", b"")
        self.setx(path, "user.binary", b"\0\1\2\xff\0" + self.randbytes(30))
        self.setx(path, "user.big", self.randbytes(3900))
        self.setx(path, "user." + self.name(250), self.randbytes(20))
        self.setx(path, "user.replaced", b"first value, rather long")
        self.setx(path, "user.replaced", b"second")
        self.setx(path, "user.removed", b"gone")
        os.removexattr(path, "user.removed")
        path = self.write_file(j("many"), b"")
        for i in range(300 if self.full else 100):
            self.setx(path, "user.many.%04d" % i,
                      self.randbytes(self.rng.randrange(0, 64)))
        path = self.write_file(j("inline-data"), self.text(1500))
        self.setx(path, "user.a", self.randbytes(1000))
        dpath = self.mkdir("xattr", "dir")
        self.setx(dpath, "user.on-dir", b"dir value")
        self.setx(dpath, "user.empty", b"")
        if self.root_things:
            self.setx(j("basic"), "trusted.ubtrfs", b"trusted value")
            os.symlink("basic", j("symlink"))
            self.setx(j("symlink"), "trusted.on-symlink", b"link value")
            os.mkfifo(j("fifo"), 0o644)
            self.setx(j("fifo"), "trusted.on-fifo", self.randbytes(50))

    def acls(self):
        d = self.mkdir("acl")
        j = lambda n: os.path.join(d, n)   # noqa: E731
        uid, gid = os.geteuid(), os.getegid()
        access = acl_xattr([
            (ACL_USER_OBJ, 6, ACL_UNDEFINED_ID), (ACL_USER, 4, 1000),
            (ACL_USER, 6, uid + 4242), (ACL_GROUP_OBJ, 4, ACL_UNDEFINED_ID),
            (ACL_GROUP, 6, 2000), (ACL_MASK, 6, ACL_UNDEFINED_ID),
            (ACL_OTHER, 0, ACL_UNDEFINED_ID)])
        path = self.write_file(j("file"), self.randbytes(300))
        if self.soft("acl", os.setxattr, path, "system.posix_acl_access",
                     access):
            self.count("acls")
        minimal = acl_xattr([(ACL_USER_OBJ, 7, ACL_UNDEFINED_ID),
                             (ACL_GROUP_OBJ, 5, ACL_UNDEFINED_ID),
                             (ACL_OTHER, 1, ACL_UNDEFINED_ID)])
        path = self.write_file(j("minimal"), b"minimal acl becomes a mode")
        self.soft("acl", os.setxattr, path, "system.posix_acl_access", minimal)
        dpath = self.mkdir("acl", "inherit")
        default = acl_xattr([
            (ACL_USER_OBJ, 7, ACL_UNDEFINED_ID), (ACL_USER, 5, 1001),
            (ACL_GROUP_OBJ, 5, ACL_UNDEFINED_ID), (ACL_GROUP, 7, gid + 17),
            (ACL_MASK, 7, ACL_UNDEFINED_ID), (ACL_OTHER, 1, ACL_UNDEFINED_ID)])
        if self.soft("acl", os.setxattr, dpath, "system.posix_acl_default",
                     default):
            self.count("acls")
        dir_access = acl_xattr([
            (ACL_USER_OBJ, 7, ACL_UNDEFINED_ID), (ACL_USER, 5, 1000),
            (ACL_GROUP_OBJ, 5, ACL_UNDEFINED_ID), (ACL_MASK, 7,
                                                    ACL_UNDEFINED_ID),
            (ACL_OTHER, 5, ACL_UNDEFINED_ID)])
        self.soft("acl", os.setxattr, dpath, "system.posix_acl_access",
                  dir_access)
        # Created after the default ACL: they inherit it.
        fd = os.open(os.path.join(dpath, "child"), os.O_WRONLY | os.O_CREAT,
                     0o666)
        os.write(fd, self.randbytes(10))
        os.close(fd)
        os.mkdir(os.path.join(dpath, "subdir"), 0o777)
        self.count("files")
        self.count("dirs")

    def modes(self):
        d = self.mkdir("modes")
        j = lambda n: os.path.join(d, n)   # noqa: E731
        modes = [0o4755, 0o2755, 0o6755, 0o4644, 0o2644, 0o1644, 0o7777,
                 0o777, 0o400, 0o1400]
        if self.root_things:    # the owner cannot read these back
            modes += [0o200, 0o111, 0o1000, 0o000]
        for mode in modes:
            self.write_file(j("file-%04o" % mode), self.randbytes(10), mode)
        self.mkdir("modes", "sticky", mode=0o1777)
        sgid = self.mkdir("modes", "setgid", mode=0o2775)
        if self.root_things:
            os.chown(sgid, -1, 4242)
            os.chmod(sgid, 0o2775)
        self.write_file(os.path.join(sgid, "inherits-gid"), b"x")
        os.mkdir(os.path.join(sgid, "subdir-inherits-setgid"))
        self.count("dirs")
        self.mkdir("modes", "dir-0555", mode=0o555)
        if self.root_things:
            self.mkdir("modes", "dir-0000", mode=0o000)
            self.mkdir("modes", "dir-7777", mode=0o7777)

    def owners(self):
        d = self.mkdir("owners")
        if not self.root_things:
            return
        j = lambda n: os.path.join(d, n)   # noqa: E731
        ids = [(1000, 1000), (0, 65534), (65534, 0), (123456, 654321),
               (4294967294, 4294967294), (65536, 1), (1, 65536)]
        for uid, gid in ids:
            path = self.write_file(j("file-%d-%d" % (uid, gid)), b"owned")
            os.chown(path, uid, gid)
            self.count("chowns")
        path = self.write_file(j("setuid-after-chown"), b"x")
        os.chown(path, 4321, 8765)
        os.chmod(path, 0o6755)
        os.symlink("file-1000-1000", j("symlink"))
        os.chown(j("symlink"), 2222, 3333, follow_symlinks=False)
        sub = self.mkdir("owners", "dir")
        os.chown(sub, 777, 888)
        os.mkfifo(j("fifo"))
        os.chown(j("fifo"), 5, 6)
        self.count("chowns", 3)

    def names(self):
        d = self.mkdir("names")
        j = lambda n: os.path.join(d, n)   # noqa: E731
        raw_names = [
            b"a" * 255,
            ("\u00e9" * 127 + "a").encode(),           # 2-byte UTF-8
            ("\u65e5" * 85).encode(),                  # 3-byte UTF-8
            ("\U0001F600" * 63 + "abc").encode(),      # 4-byte UTF-8
            b"with space", b" leading-space", b"trailing-space ",
            b"tab\there", b"new\nline", b"back\\slash", b"equals=sign",
            b"colon:x", b"-leading-dash", b".hidden", b"..double-dot",
            b"...", b"glob*?[x]", b"quote'\"", b"\xff\xfe-not-utf8",
            b"\x01\x7f-controls", b"UPPER", b"upper", b"%s %d",
        ]
        for raw in raw_names:
            self.write_file(os.path.join(os.fsencode(d), raw),
                            self.randbytes(self.rng.randrange(0, 100)))
        dname = ("\u00fc" * 127).encode() + b"d"
        sub = os.path.join(os.fsencode(d), dname)
        os.mkdir(sub)
        self.write_file(os.path.join(sub, b"z" * 255), b"inside long dir")
        self.count("dirs")
        # Deep path of long names (kept under PATH_MAX).
        depth = 10 if self.full else 3
        path = j("deep")
        os.mkdir(path)
        for i in range(depth):
            path = os.path.join(path, ("%02d" % i) + self.name(253))
            os.mkdir(path)
        self.write_file(os.path.join(path, "leaf"), b"deep")
        self.count("dirs", depth + 1)
        self.count("odd names", len(raw_names) + 2)

    def bigdir(self):
        d = self.mkdir("bigdir")
        n = 5000 if self.full else 400
        used = set()
        names = []
        while len(names) < n:
            length = self.rng.choice((1, 2, 3, 8, 12, 20, 40, 100, 255))
            name = self.name(length)
            if name in used:
                continue
            used.add(name)
            names.append(name)
        for i, name in enumerate(names):
            path = os.path.join(d, name)
            r = i % 20
            if r == 0:
                os.mkdir(path)
                self.count("dirs")
            elif r == 1:
                os.symlink(names[(i * 7) % n], path)
                self.count("symlinks")
            else:
                self.write_file(path, self.randbytes(r % 3))
        for i in range(3, n, 7):        # holes in the directory index
            path = os.path.join(d, names[i])
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
        for i in range(5, n, 11):
            if i % 7 == 3:
                continue
            os.rename(os.path.join(d, names[i]),
                      os.path.join(d, names[i][:200] + ".renamed"))
        self.count("bigdir entries", n)

    def renames(self):
        self.mkdir("renames")
        j = lambda *n: self.p("renames", *n)   # noqa: E731
        self.mkdir("renames", "src")
        self.mkdir("renames", "dst")
        for i in range(10):
            self.write_file(j("src", "f%d" % i), self.randbytes(i * 300))
        os.rename(j("src", "f0"), j("src", "f0-renamed"))
        os.rename(j("src", "f1"), j("dst", "f1-moved"))
        os.rename(j("src", "f2"), j("src", "f3"))          # replaces f3
        os.rename(j("src", "f4"), j("dst", "f4"))
        self.write_file(j("src", "f4"), b"recreated after the move")
        self.mkdir("renames", "tree")
        self.mkdir("renames", "tree", "sub")
        self.mkdir("renames", "tree", "sub", "subsub")
        self.write_file(j("tree", "sub", "subsub", "file"), b"moved along")
        os.rename(j("tree", "sub"), j("dst", "sub-moved"))
        os.rename(j("tree"), j("dst", "sub-moved", "tree-moved"))
        self.write_file(j("unlinked"), b"x")
        os.unlink(j("unlinked"))
        self.write_file(j("unlinked"), b"same name, new inode")
        self.mkdir("renames", "emptied")
        self.write_file(j("emptied", "gone"), b"x")
        os.unlink(j("emptied", "gone"))
        self.count("renames", 7)

    # -- btrfs -------------------------------------------------------------

    def btrfs_cmd(self, *args):
        res = subprocess.run(("btrfs", "-q") + args, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        if res.returncode != 0:
            raise SystemExit("workload.py: btrfs %s failed: %s" % (
                " ".join(args), res.stdout.decode(errors="replace").strip()))

    def subvol(self, *parts):
        path = self.p(*parts)
        self.btrfs_cmd("subvolume", "create", path)
        self.count("subvolumes")
        return path

    def snapshot(self, src, dst, readonly=False):
        # The snapshot keeps the source's times; make them deterministic.
        if src not in self.ro_subvols:
            self.set_times(src)
        args = ["subvolume", "snapshot"] + (["-r"] if readonly else [])
        self.btrfs_cmd(*args, src, dst)
        self.count("snapshots")
        if readonly:
            self.ro_subvols.append(dst)

    def set_flags(self, path, flags):
        fd = os.open(path, os.O_RDONLY)
        try:
            buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
            cur = struct.unpack("=I", buf[:4])[0]
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("=I", cur | flags)
                        + b"\0" * 4)
        finally:
            os.close(fd)

    def clone(self, src, dst, src_off=None, length=0, dst_off=0):
        sfd = os.open(src, os.O_RDONLY)
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if src_off is None:
                fcntl.ioctl(dfd, FICLONE, sfd)
            else:
                fcntl.ioctl(dfd, FICLONERANGE, struct.pack(
                    "=qQQQ", sfd, src_off, length, dst_off))
        finally:
            os.close(sfd)
            os.close(dfd)
        self.count("reflinks")

    def btrfs_part(self):
        self.mkdir("btrfs")
        j = lambda *n: self.p("btrfs", *n)   # noqa: E731
        # Subvolumes, nested ones, and content shared with snapshots.
        sv = self.subvol("btrfs", "sv1")
        self.write_file(j("sv1", "big"), self.randbytes(1 * MiB + 4097))
        self.write_file(j("sv1", "small"), self.randbytes(700))
        self.write_file(j("sv1", "to-delete"), self.randbytes(9000))
        os.link(j("sv1", "small"), j("sv1", "small-link"))
        self.count("hard links")
        os.mkdir(j("sv1", "dir"))
        self.write_file(j("sv1", "dir", "f"), self.text(20000))
        self.setx(j("sv1", "dir", "f"), "user.in-subvol", b"yes")
        os.symlink("../small", j("sv1", "dir", "sym"))
        self.subvol("btrfs", "sv1", "nested")
        self.write_file(j("sv1", "nested", "file"), self.randbytes(5000))
        self.subvol("btrfs", "sv1", "nested", "deeper")
        self.write_file(j("sv1", "nested", "deeper", "file"), b"deepest")
        self.subvol("btrfs", "empty-subvol")

        self.snapshot(sv, j("snap1"))
        self.snapshot(sv, j("snap1-ro"), readonly=True)
        # Diverge the source and the writable snapshot (CoW of shared data).
        self.pwrite(j("sv1", "big"), 4096 * 10, self.randbytes(8192))
        with open(j("sv1", "big"), "ab") as fh:
            fh.write(self.randbytes(5000))
        os.unlink(j("sv1", "to-delete"))
        self.write_file(j("sv1", "after-snapshot"), self.randbytes(333))
        os.rename(j("sv1", "dir", "f"), j("sv1", "dir", "f-renamed"))
        os.unlink(j("snap1", "small"))
        self.write_file(j("snap1", "only-in-snap1"), self.randbytes(4096))
        self.setx(j("snap1", "big"), "user.snap", b"1")
        self.pwrite(j("snap1", "big"), 0, self.randbytes(100))
        # Snapshots of snapshots, and a snapshot inside a subvolume.
        self.snapshot(j("snap1"), j("snap2"))
        self.snapshot(j("snap1"), j("snap2-ro"), readonly=True)
        self.snapshot(j("snap1-ro"), j("snap-of-ro"))
        self.write_file(j("snap2", "only-in-snap2"), self.text(9000))
        self.snapshot(j("snap2"), j("sv1", "inner-snap"), readonly=True)
        self.snapshot(sv, j("deleted-snap"))
        self.btrfs_cmd("subvolume", "delete", "--commit-after",
                       j("deleted-snap"))
        self.count("snapshots", -1)

        # Reflinks, across directories and subvolumes, whole and ranges.
        os.mkdir(j("reflink"))
        self.count("dirs")
        src = self.write_file(j("reflink", "src"), self.randbytes(1 * MiB))
        self.clone(src, j("reflink", "full-clone"))
        self.count("files")
        self.clone(src, j("sv1", "clone-from-outside"))
        self.count("files")
        dst = self.write_file(j("reflink", "range-clone"),
                              self.randbytes(512 * KiB))
        self.clone(src, dst, 256 * KiB, 128 * KiB, 64 * KiB)
        self.clone(src, dst, 0, 64 * KiB, 1 * MiB)          # past EOF
        self.clone(dst, dst, 0, 64 * KiB, 256 * KiB)        # within itself
        self.clone(src, j("reflink", "modified-clone"))
        self.count("files")
        self.pwrite(j("reflink", "modified-clone"), 12345, b"changed")
        small = self.write_file(j("reflink", "tail-src"),
                                self.randbytes(10000))
        self.clone(small, j("reflink", "tail-clone"))       # unaligned EOF
        self.count("files")

        # Compression: per-file property, inherited from a directory, chattr.
        os.mkdir(j("compress"))
        self.count("dirs")
        for algo in ("zstd", "lzo", "zlib"):
            path = self.write_file(j("compress", algo), b"")
            os.setxattr(path, "btrfs.compression", algo.encode())
            self.write_file(path, self.text(1 * MiB + 3000))
            self.count("compressed files")
        cdir = j("compress", "zstd-dir")
        os.mkdir(cdir)
        self.count("dirs")
        os.setxattr(cdir, "btrfs.compression", b"zstd")
        self.write_file(os.path.join(cdir, "inline"), self.text(1500))
        self.write_file(os.path.join(cdir, "below-sector"), self.text(3000))
        self.write_file(os.path.join(cdir, "incompressible"),
                        self.randbytes(300 * KiB))
        mixed = self.text(200 * KiB) + self.randbytes(200 * KiB) + \
            self.text(300 * KiB)
        self.write_file(os.path.join(cdir, "mixed"), mixed)
        self.write_file(os.path.join(cdir, "sparse-compressed"), b"")
        self.pwrite(os.path.join(cdir, "sparse-compressed"), 1 * MiB,
                    self.text(200 * KiB))
        path = self.write_file(j("compress", "chattr-c"), b"")
        self.set_flags(path, FS_COMPR_FL)
        self.write_file(path, self.text(256 * KiB))
        self.count("compressed files", 6)

        # nodatacow: chattr +C on empty files and on a directory.
        os.mkdir(j("nocow"))
        self.count("dirs")
        path = self.write_file(j("nocow", "file"), b"")
        self.set_flags(path, FS_NOCOW_FL)
        self.write_file(path, self.randbytes(300 * KiB))
        self.pwrite(path, 4096, self.randbytes(4096))
        ndir = j("nocow", "dir")
        os.mkdir(ndir)
        self.count("dirs")
        self.set_flags(ndir, FS_NOCOW_FL)
        self.write_file(os.path.join(ndir, "inherits"), self.randbytes(70000))
        path = os.path.join(ndir, "prealloc")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.posix_fallocate(fd, 0, 256 * KiB)
        os.pwrite(fd, self.randbytes(4096), 8192)
        os.close(fd)
        self.count("files")
        self.count("nodatacow files", 3)

    # -- times -------------------------------------------------------------

    def random_time_ns(self):
        r = self.rng.random()
        if r < 0.05:
            sec = self.rng.choice((0, -1, 2**31 - 1, 2**31, 2**32, -2**31))
        elif r < 0.15:
            sec = self.rng.randrange(-2_000_000_000, 0)       # before 1970
        elif r < 0.25:
            sec = self.rng.randrange(2**31, 7_000_000_000)    # after 2038
        else:
            sec = self.rng.randrange(946684800, 1893456000)   # 2000..2030
        nsec = self.rng.choice((0, 999_999_999, self.rng.randrange(10**9)))
        return sec * 10**9 + nsec

    def set_times(self, top):
        """Give every entry under top (and top) seeded atime/mtime.

        Paths are listed first (listing changes directory atimes), times
        are drawn in sorted path order (independent of readdir order) and
        applied deepest first."""
        paths = []
        skip = set(self.ro_subvols)
        for dirpath, dirnames, filenames in os.walk(top):
            keep = []
            for name in dirnames:
                full = os.path.join(dirpath, name)
                if full in skip:
                    continue
                if os.path.islink(full):
                    filenames.append(name)
                    continue
                if os.lstat(full).st_ino == BTRFS_EMPTY_SUBVOL_DIR_INO \
                        and self.btrfs:
                    continue
                keep.append(name)
            dirnames[:] = keep
            paths.append(dirpath)
            paths.extend(os.path.join(dirpath, n) for n in filenames)
        paths.sort(key=os.fsencode)
        times = [(path, self.random_time_ns(), self.random_time_ns())
                 for path in paths]
        times.sort(key=lambda t: (-os.fsencode(t[0]).count(b"/"),
                                  os.fsencode(t[0])))
        for path, atime, mtime in times:
            os.utime(path, ns=(atime, mtime), follow_symlinks=False)
        return len(times)

    # -- driver ------------------------------------------------------------

    def run(self):
        os.umask(0o022)
        if os.listdir(self.root):
            raise SystemExit("workload.py: %s is not empty" % self.root)
        parts = [self.files, self.sparse, self.prealloc, self.links,
                 self.symlinks, self.special, self.xattrs, self.acls,
                 self.modes, self.owners, self.names, self.bigdir,
                 self.renames]
        if self.btrfs:
            parts.append(self.btrfs_part)
        for part in parts:
            part()
        n = self.set_times(self.root)
        self.count("entries timed", n)
        os.sync()

    def summary(self):
        items = ", ".join("%s %d" % kv for kv in self.counts.items())
        sys.stderr.write("workload: %s\n" % items)
        if self.skipped:
            kinds = {}
            for what in self.skipped:
                kinds[what] = kinds.get(what, 0) + 1
            sys.stderr.write("workload: skipped %d: %s\n" % (
                len(self.skipped),
                ", ".join("%s x%d" % kv for kv in kinds.items())))


def main(argv):
    p = argparse.ArgumentParser(
        description="Build a deterministic tree of filesystem edge cases.")
    p.add_argument("dir")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--profile", choices=("small", "full"), default="small")
    p.add_argument("--btrfs", action="store_true",
                   help="DIR is on kernel btrfs: add subvolumes, snapshots, "
                        "reflinks, compression, nodatacow")
    p.add_argument("--no-root-only-things", dest="root_things",
                   action="store_false",
                   help="skip device nodes, chown, trusted.*, mode 000 even "
                        "as root")
    opts = p.parse_args(argv)
    root_things = opts.root_things and os.geteuid() == 0
    w = Workload(opts.dir, opts.seed, opts.profile, opts.btrfs, root_things)
    w.run()
    w.summary()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
