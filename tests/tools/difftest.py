#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential tester: random operations on a ubtrfs mount and on tmpfs.

    difftest.py [--seeds LIST] [--ops N] [options]     random runs
    difftest.py --replay FILE...                       replay reproducers
    difftest.py --self-test-shrinker                   prove the shrinker works

Each seed gives one reproducible sequence of operations (random.Random(seed)
and nothing else decides what is done).  Every operation runs twice: on a
read-write FUSE mount (`ubtrfs mount -f -o rw IMAGE MNT`) of a fresh image
and on a reference directory (a tmpfs).  After each operation the return
value or errno of both must be equal, and so must what the touched paths
look like (lstat fields, symlink targets, directory listings, xattrs, file
bytes); every --full-every operations the whole trees are compared.  Every
--remount-every operations (an explicit "remount" operation, so a reproducer
keeps it): all descriptors are closed, the FUSE view is recorded,
fusermount3 -u (the daemon commits and must exit 0), `btrfs check
--readonly` must be clean, the image is mounted again and must show exactly
what it showed before (ctime, inode numbers, directory sizes included), and
the trees are compared.  At the end the same, and then the kernel mounts the
image read-only and its view must equal the reference (by the rules below)
and the last FUSE view (exactly).

Operations: open/creat with O_CREAT, O_EXCL, O_TRUNC, O_APPEND and every
access mode; close; write, pwrite (inline-small, sector-sized, large, far
sparse offsets), read, pread, lseek; truncate, ftruncate (up and down);
fsync, fdatasync; fstat, stat/lstat; mkdir, rmdir, unlink, link (also
following a symlink), symlink (short, long, dangling, looping), readlink;
rename (across directories, over files, over empty and non-empty
directories, file over directory, directory into itself); chmod, fchmod,
chown, lchown, fchown; utimensat/futimens with explicit times, UTIME_NOW and
UTIME_OMIT; mkfifo; setxattr (XATTR_CREATE, XATTR_REPLACE, values up to and
past btrfs's item limit, user.* and trusted.*), getxattr and listxattr
(including the size query and ERANGE), removexattr; listdir.  Optional kinds,
probed at start and skipped (reported as "skipped op kinds") when the daemon
does not support them: fallocate (mode 0), fallocate_keep (KEEP_SIZE),
punch_hole (PUNCH_HOLE|KEEP_SIZE), zero_range (ZERO_RANGE, with and without
KEEP_SIZE), seek_data (SEEK_DATA/SEEK_HOLE), copy_file_range,
rename_noreplace and rename_exchange (renameat2), open_unlinked (a file
unlinked while a descriptor is open stays usable through it).  While
open_unlinked is off, the tester closes the descriptors of a file before
removing its last name.  --require-all fails when any kind is unsupported.

What is compared, and what is not (btrfs and tmpfs legitimately differ):
  * atime is never compared: relatime updates it on reads, and the tester's
    own reads are reads.
  * ctime is not compared against the reference (always "now"); it is
    compared exactly across an unmount/remount and between the last FUSE
    view and the kernel's.
  * mtime: explicit stamps are chosen outside 2010..2100, which "now" never
    is.  Where the reference shows such a stamp both must be equal; where it
    shows a "now" value the ubtrfs side must show a "now" value too.
  * directory st_size (btrfs counts name bytes twice, tmpfs counts entries)
    and directory st_nlink (always 1 on btrfs) are compared only exactly
    (remount, kernel), not against the reference.
  * st_blocks (inline data, extents, preallocation vs pages), st_blksize,
    st_ino and st_dev are not compared against the reference; the hard-link
    structure (which paths share an inode) is.
  * an xattr whose name and value exceed btrfs's item limit (nodesize - 156
    bytes) is refused by btrfs with ENOSPC but taken by tmpfs: such a
    setxattr runs on ubtrfs only and must fail with ENOSPC (or with what the
    reference returns, for other errors).  The same for a symlink target
    longer than nodesize - 147 bytes (ENAMETOOLONG; only 4 KiB nodes).
  * truncate(2) to the current size: tmpfs sets mtime when the file has
    pages, btrfs never does; the reference's times are put back after it.
  * tmpfs has no FALLOC_FL_ZERO_RANGE: the reference punches the range and
    allocates it again (growing the file unless KEEP_SIZE).
  * fifo times: the kernel's pipe code updates a fifo's mtime and ctime on
    reads and writes in memory only; through FUSE no setattr reaches the
    daemon (kernel btrfs would persist them), so fifo mtime is not compared
    against the reference and fifo mtime/ctime not across remounts.
  * lseek on a directory is not compared: tmpfs refuses SEEK_END,
    SEEK_DATA and SEEK_HOLE, btrfs (generic_file_llseek) takes them;
    nothing reads directories through the slots.
  * SEEK_DATA/SEEK_HOLE: only what POSIX guarantees -- a data offset has
    only zero bytes before it, a hole offset lies in [off, size] and reads
    zero, ENXIO past EOF.  Both descriptors are set back to the asked
    offset afterwards, so later positional I/O does not depend on the
    granularity.

Regression files may also hold {"op": "expect", "path" or "slot": ...,
"field": F, "value": V}: the ubtrfs side's raw stat field F must be V (what
kernel btrfs shows; for fields the reference cannot judge, like st_blocks).

Known bugs: KNOWN_BUGS names differences found and not yet fixed; while
one is listed (and --avoid does not say otherwise) the generator does not
make the operations that trigger it, so random runs can go on finding
others.  Its minimized reproducer lies in tests/compat/difftest-regress/
with "known_bug" set: t-difftest.sh expects it to fail, and fails when it
passes (then drop the mark and the KNOWN_BUGS entry: it has become a plain
regression test).

Failures: the run stops at the first difference, writes the sequence to
OUT/difftest-seedN.json and shrinks it (delta debugging: the failing prefix,
then chunks of halving size, then single operations, each candidate on a
fresh image and reference; then renames are undone one by one (later
operations name the old path) and directories the sequence makes are
flattened away (the paths below them move up), each followed by the
removal again) to OUT/difftest-seedN.min.json.  A candidate
counts when it fails with the same key (the differing field or failing
step).  `--replay FILE` runs a reproducer (exit 0 clean, 1 failing).

--fake-bug corrupts the tester's own observation of the ubtrfs side: a
regular file with two or more links whose size is a non-zero multiple of
16384 shows size + 1.  --self-test-shrinker finds a failing seed with it,
shrinks, and checks that the reproducer is short, fails with the fake bug
and passes without it.

Backends: "ubtrfs" (default; needs root, FUSE, kernel btrfs, btrfs-progs)
and "dir" (both sides plain directories on one filesystem; no root, no
mounts; for the shrinker self-test and for trying the tester itself).

Exit status: 0 clean, 1 a difference was found, 2 usage or environment
error.  Python standard library only (ctypes for renameat2, fallocate,
utimensat and raw xattr calls).
"""

import argparse
import ctypes
import ctypes.util
import errno
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

# ---------------------------------------------------------------------------
# libc bits os does not offer.

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
SEEK_DATA = getattr(os, "SEEK_DATA", 3)
SEEK_HOLE = getattr(os, "SEEK_HOLE", 4)
XATTR_CREATE = getattr(os, "XATTR_CREATE", 1)
XATTR_REPLACE = getattr(os, "XATTR_REPLACE", 2)


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                            ctypes.c_char_p, ctypes.c_uint]
_libc.renameat2.restype = ctypes.c_int
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
_libc.fallocate.restype = ctypes.c_int
_libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Timespec),
                            ctypes.c_int]
_libc.utimensat.restype = ctypes.c_int
_libc.futimens.argtypes = [ctypes.c_int, ctypes.POINTER(Timespec)]
_libc.futimens.restype = ctypes.c_int
for _fn in ("getxattr", "lgetxattr"):
    getattr(_libc, _fn).argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                                    ctypes.c_size_t]
    getattr(_libc, _fn).restype = ctypes.c_ssize_t
for _fn in ("listxattr", "llistxattr"):
    getattr(_libc, _fn).argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    getattr(_libc, _fn).restype = ctypes.c_ssize_t


def _check(ret):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def renameat2(src, dst, flags):
    _check(_libc.renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags))


def fallocate(fd, mode, off, length):
    _check(_libc.fallocate(fd, mode, off, length))


def _times(spec):
    ts = (Timespec * 2)()
    for i, t in enumerate(spec):
        if t == "NOW":
            ts[i].tv_sec, ts[i].tv_nsec = 0, UTIME_NOW
        elif t == "OMIT":
            ts[i].tv_sec, ts[i].tv_nsec = 0, UTIME_OMIT
        else:
            ts[i].tv_sec, ts[i].tv_nsec = t[0], t[1]
    return ts


def utimensat(path, spec, nofollow):
    _check(_libc.utimensat(AT_FDCWD, os.fsencode(path), _times(spec),
                           AT_SYMLINK_NOFOLLOW if nofollow else 0))


def futimens(fd, spec):
    _check(_libc.futimens(fd, _times(spec)))


def raw_getxattr(path, name, bufsize, nofollow):
    fn = _libc.lgetxattr if nofollow else _libc.getxattr
    buf = ctypes.create_string_buffer(max(bufsize, 1))
    n = _check(fn(os.fsencode(path), os.fsencode(name), buf if bufsize else None, bufsize))
    return n if bufsize == 0 else buf.raw[:n]


def raw_listxattr(path, bufsize, nofollow):
    fn = _libc.llistxattr if nofollow else _libc.listxattr
    buf = ctypes.create_string_buffer(max(bufsize, 1))
    n = _check(fn(os.fsencode(path), buf if bufsize else None, bufsize))
    if bufsize == 0:
        return n
    return sorted(x for x in buf.raw[:n].split(b"\0") if x)


# ---------------------------------------------------------------------------
# Constants of the model.

SLOTS = 6                      # descriptor slots an operation can name
FULL_DATA_LIMIT = 1 << 20      # per-op checks read files up to this whole
EXPLICIT_LO = 1262304000       # 2010-01-01: explicit stamps are before this
EXPLICIT_HI = 4102444800       # 2100-01-01: ... or from this on
MAX_ENTRIES = 70               # the generator keeps the tree about this big
OPTIONAL_KINDS = ["fallocate", "fallocate_keep", "punch_hole", "zero_range",
                  "seek_data", "copy_file_range", "rename_noreplace",
                  "rename_exchange", "open_unlinked"]
PROFILES = {
    # name: (tool, mkfs options)
    "default": ("mkfs.btrfs", []),
    "holes": ("mkfs.btrfs", ["-O", "^no-holes"]),
    "ubtrfs": ("ubtrfs", []),
    "small-nodes": ("mkfs.btrfs", ["-n", "4096"]),
}
PROFILE_CYCLE = ["default", "holes", "ubtrfs", "small-nodes"]

ACC = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR}
OFLAGS = {"creat": os.O_CREAT, "excl": os.O_EXCL, "trunc": os.O_TRUNC,
          "append": os.O_APPEND}
TYPECH = {stat.S_IFREG: "f", stat.S_IFDIR: "d", stat.S_IFLNK: "l",
          stat.S_IFIFO: "p", stat.S_IFSOCK: "s", stat.S_IFCHR: "c", stat.S_IFBLK: "b"}

VERBOSE = 0

# Differences found and not fixed yet: name -> what they are and what the
# generator does to avoid them (Generator code testing `name in self.avoid`,
# to be deleted with the entry once the bug is fixed).  Empty: none open.
KNOWN_BUGS = {}


def log(msg):
    print("difftest: %s" % msg, file=sys.stderr, flush=True)


def errname(e):
    return errno.errorcode.get(e, str(e))


class Failure(Exception):
    """A difference (or a failing step); key says which kind, for the shrinker."""

    def __init__(self, key, msg, index=None):
        super().__init__(msg)
        self.key = key
        self.msg = msg
        self.index = index

    def as_dict(self):
        return {"key": self.key, "msg": self.msg, "index": self.index}


class EnvError(Exception):
    """The environment failed (not a difference): no retry, no shrink."""


# ---------------------------------------------------------------------------
# Data of writes and xattr values: small specs in the ops, bytes on demand.

_data_cache = {}


def data_bytes(spec):
    key = (spec["n"], spec.get("k", "r"), spec.get("s", 0))
    b = _data_cache.get(key)
    if b is None:
        n, k, s = key
        if k == "z":
            b = bytes(n)
        elif k == "p":
            b = bytes([s & 0xFF]) * n
        else:
            b = random.Random(s).randbytes(n)
        if len(_data_cache) > 16:
            _data_cache.clear()
        _data_cache[key] = b
    return b


# ---------------------------------------------------------------------------
# Observations.

def mtime_view(ns):
    sec = ns // 1_000_000_000
    if sec < EXPLICIT_LO or sec >= EXPLICIT_HI:
        return ns
    return "now"


def raw_stat(st, fake):
    """The fields of a stat result the tester knows about (raw)."""
    t = stat.S_IFMT(st.st_mode)
    d = {"type": TYPECH.get(t, "?"), "perm": st.st_mode & 0o7777, "uid": st.st_uid,
         "gid": st.st_gid, "nlink": st.st_nlink, "size": st.st_size,
         "mtime": st.st_mtime_ns, "ctime": st.st_ctime_ns, "ino": st.st_ino,
         "blocks": st.st_blocks}
    if t in (stat.S_IFCHR, stat.S_IFBLK):
        d["rdev"] = st.st_rdev
    if fake and t == stat.S_IFREG and st.st_nlink >= 2 and st.st_size and \
            st.st_size % 16384 == 0:
        d["size"] += 1     # the fake bug (--fake-bug): ubtrfs side only
    return d


EXACT_SKIP = ()
REF_SKIP = ("ctime", "ino", "blocks")


def ref_view(d):
    """What of a raw observation may be compared against the reference."""
    if not isinstance(d, dict):
        return d
    v = {k: x for k, x in d.items() if k not in REF_SKIP}
    if "mtime" in v:
        v["mtime"] = mtime_view(v["mtime"])
    if d.get("type") == "d":
        v.pop("size", None)
        v.pop("nlink", None)
    if d.get("type") == "p":
        v.pop("mtime", None)
    if isinstance(v.get("follow"), dict):
        v["follow"] = ref_view(v["follow"])
    return v


def exact_view(d):
    """Everything but atime (never recorded), and fifo times."""
    if not isinstance(d, dict):
        return d
    if d.get("type") == "p" or isinstance(d.get("follow"), dict):
        d = dict(d)
        if d.get("type") == "p":
            d.pop("mtime", None)
            d.pop("ctime", None)
        if isinstance(d.get("follow"), dict):
            d["follow"] = exact_view(d["follow"])
    return d


def file_digest(path, size, ranges, nofollow=True):
    """sha256 of the whole file (ranges None or size small) or of ranges."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC |
                 (os.O_NOFOLLOW if nofollow else 0))
    try:
        if ranges is None or size <= FULL_DATA_LIMIT:
            n = 0
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                h.update(b)
                n += len(b)
            return "%d:%s" % (n, h.hexdigest()[:32])
        parts = list(ranges) + [(0, 4096), (size - 4096, 4096)]
        for off, ln in sorted(parts):
            off = max(off, 0)
            ln = max(min(ln, size - off), 0)
            b = os.pread(fd, ln, off) if ln else b""
            h.update(b"%d+%d:" % (off, len(b)))
            h.update(b)
        return "ranges:%s" % h.hexdigest()[:32]
    finally:
        os.close(fd)


def xattrs_of(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        return "!" + errname(e.errno)
    out = {}
    for n in sorted(names):
        try:
            out[n] = os.getxattr(path, n, follow_symlinks=False).hex()
        except OSError as e:
            out[n] = "!" + errname(e.errno)
    return out


def observe(path, fake, ranges=None, listing=True):
    """One entry as seen through lstat and friends (raw fields)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return "!" + errname(e.errno)
    d = raw_stat(st, fake)
    t = d["type"]
    if t == "l":
        d["target"] = os.readlink(path)
        try:
            d["follow"] = raw_stat(os.stat(path), fake)
        except OSError as e:
            d["follow"] = "!" + errname(e.errno)
    elif t == "d" and listing:
        d["list"] = sorted(os.listdir(path))
    d["xattr"] = xattrs_of(path)
    if t == "f":
        d["data"] = file_digest(path, st.st_size, ranges)
    return d


def observe_fd(fd, fake, ranges=None):
    try:
        st = os.fstat(fd)
    except OSError as e:
        return "!" + errname(e.errno)
    d = raw_stat(st, fake)
    d.pop("ino")
    if d["type"] == "f":
        try:
            d["data"] = file_digest("/proc/self/fd/%d" % fd, st.st_size, ranges, False)
        except OSError as e:
            d["data"] = "!" + errname(e.errno)
    return d


def snapshot(root, fake):
    """Every entry below root (relative path -> raw observation, '' = root)."""
    out = {}

    def walk(rel):
        p = os.path.join(root, rel) if rel else root
        d = observe(p, fake)
        out[rel] = d
        if isinstance(d, dict) and d["type"] == "d":
            for n in d["list"]:
                walk(os.path.join(rel, n) if rel else n)

    walk("")
    return out


def link_groups(snap):
    by_ino = {}
    for rel, d in snap.items():
        if isinstance(d, dict) and d["type"] != "d":
            by_ino.setdefault(d["ino"], []).append(rel)
    return sorted(sorted(g) for g in by_ino.values() if len(g) > 1)


def short(v, limit=300):
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


def first_diff(a, b):
    """Name of the first differing field of two observations, or None."""
    if a == b:
        return None
    if not isinstance(a, dict) or not isinstance(b, dict):
        return "exists"
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            if k == "follow":
                sub = first_diff(a.get(k), b.get(k))
                return "follow." + (sub or "?")
            return k
    return None


def compare_entries(rel, a, b, view, what, names):
    va, vb = view(a), view(b)
    k = first_diff(va, vb)
    if k is None:
        return
    fa = va.get(k) if isinstance(va, dict) and k in va else va
    fb = vb.get(k) if isinstance(vb, dict) and k in vb else vb
    raise Failure("%s:%s" % (what, k),
                  "%s: %r differs in %s: %s %s, %s %s" %
                  (what, rel or ".", k, names[0], short(fa), names[1], short(fb)))


def compare_snapshots(sa, sb, view, what, names, groups=True):
    ka, kb = set(sa), set(sb)
    if ka != kb:
        only_a = sorted(ka - kb)[:5]
        only_b = sorted(kb - ka)[:5]
        raise Failure("%s:tree" % what, "%s: trees differ: only %s: %s; only %s: %s" %
                      (what, names[0], only_a, names[1], only_b))
    for rel in sorted(sa):
        compare_entries(rel, sa[rel], sb[rel], view, what, names)
    if groups:
        ga, gb = link_groups(sa), link_groups(sb)
        if ga != gb:
            raise Failure("%s:links" % what, "%s: hard-link groups differ: %s %s, %s %s" %
                          (what, names[0], short(ga), names[1], short(gb)))


# ---------------------------------------------------------------------------
# The two sides.

class Side:
    def __init__(self, name, root, fake=False, emulate_zero_range=False):
        self.name = name
        self.root = root
        self.fake = fake
        self.emulate_zero_range = emulate_zero_range
        self.fds = {}

    def p(self, rel):
        return os.path.join(self.root, rel) if rel else self.root

    def fd(self, slot):
        return self.fds.get(slot)

    def close(self, slot):
        fd = self.fds.pop(slot, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
            return True
        return False

    def close_all(self):
        for s in list(self.fds):
            self.close(s)


NEEDS_SLOT = {"write", "pwrite", "read", "pread", "lseek", "ftruncate", "fsync",
              "fdatasync", "fstat", "fchmod", "fchown", "futimens", "fallocate",
              "seek_data"}


def apply_op(side, op):
    """Run one operation on one side: ('ok', value) or ('err', ERRNAME)."""
    k = op["op"]
    try:
        if k in NEEDS_SLOT:
            fd = side.fd(op["slot"])
            if fd is None:
                return ("noslot",)
        if k == "open":
            side.close(op["slot"])
            fl = os.O_NONBLOCK | os.O_CLOEXEC | ACC[op["acc"]]
            for f in op.get("fl", []):
                fl |= OFLAGS[f]
            side.fds[op["slot"]] = os.open(side.p(op["path"]), fl, op.get("mode", 0o644))
            return ("ok",)
        if k == "close":
            return ("ok", side.close(op["slot"]))
        if k == "write":
            return ("ok", os.write(fd, data_bytes(op["data"])))
        if k == "pwrite":
            return ("ok", os.pwrite(fd, data_bytes(op["data"]), op["off"]))
        if k == "read":
            return ("ok", os.read(fd, op["len"]))
        if k == "pread":
            return ("ok", os.pread(fd, op["len"], op["off"]))
        if k == "lseek":
            return ("ok", os.lseek(fd, op["off"], op["whence"]))
        if k == "seek_data":
            try:
                return ("ok", os.lseek(fd, op["off"], SEEK_HOLE if op["hole"] else SEEK_DATA))
            finally:
                try:
                    os.lseek(fd, max(op["off"], 0), os.SEEK_SET)
                except OSError:
                    pass
        if k == "ftruncate":
            os.ftruncate(fd, op["size"])
            return ("ok",)
        if k == "truncate":
            os.truncate(side.p(op["path"]), op["size"])
            return ("ok",)
        if k == "fsync":
            os.fsync(fd)
            return ("ok",)
        if k == "fdatasync":
            os.fdatasync(fd)
            return ("ok",)
        if k == "fstat":
            return ("ok", observe_fd(fd, side.fake))
        if k == "mkdir":
            os.mkdir(side.p(op["path"]), op["mode"])
            return ("ok",)
        if k == "rmdir":
            os.rmdir(side.p(op["path"]))
            return ("ok",)
        if k == "unlink":
            os.unlink(side.p(op["path"]))
            return ("ok",)
        if k == "link":
            os.link(side.p(op["src"]), side.p(op["dst"]), follow_symlinks=op.get("follow", False))
            return ("ok",)
        if k == "symlink":
            os.symlink(op["target"], side.p(op["path"]))
            return ("ok",)
        if k == "readlink":
            return ("ok", os.readlink(side.p(op["path"])))
        if k == "rename":
            os.rename(side.p(op["src"]), side.p(op["dst"]))
            return ("ok",)
        if k == "rename2":
            renameat2(side.p(op["src"]), side.p(op["dst"]), op["flags"])
            return ("ok",)
        if k == "chmod":
            os.chmod(side.p(op["path"]), op["mode"])
            return ("ok",)
        if k == "fchmod":
            os.fchmod(fd, op["mode"])
            return ("ok",)
        if k == "chown":
            os.chown(side.p(op["path"]), op["uid"], op["gid"],
                     follow_symlinks=not op.get("nofollow", False))
            return ("ok",)
        if k == "fchown":
            os.fchown(fd, op["uid"], op["gid"])
            return ("ok",)
        if k == "utimens":
            utimensat(side.p(op["path"]), op["times"], op.get("nofollow", False))
            return ("ok",)
        if k == "futimens":
            futimens(fd, op["times"])
            return ("ok",)
        if k == "mkfifo":
            os.mkfifo(side.p(op["path"]), op["mode"])
            return ("ok",)
        if k == "setxattr":
            os.setxattr(side.p(op["path"]), op["name"], data_bytes(op["value"]),
                        op.get("flags", 0), follow_symlinks=not op.get("nofollow", False))
            return ("ok",)
        if k == "getxattr":
            return ("ok", raw_getxattr(side.p(op["path"]), op["name"], op["bufsize"],
                                       op.get("nofollow", False)))
        if k == "listxattr":
            return ("ok", raw_listxattr(side.p(op["path"]), op["bufsize"],
                                        op.get("nofollow", False)))
        if k == "removexattr":
            os.removexattr(side.p(op["path"]), op["name"],
                           follow_symlinks=not op.get("nofollow", False))
            return ("ok",)
        if k == "stat":
            p = side.p(op["path"])
            out = []
            for fn in (os.lstat, os.stat):
                try:
                    out.append(raw_stat(fn(p), side.fake))
                except OSError as e:
                    out.append("!" + errname(e.errno))
            return ("ok", out)
        if k == "listdir":
            return ("ok", sorted(os.listdir(side.p(op["path"]))))
        if k == "fallocate":
            if op["mode"] & FALLOC_FL_ZERO_RANGE and side.emulate_zero_range:
                # tmpfs has no ZERO_RANGE: punch the range, then allocate
                # it (growing the file unless KEEP_SIZE), as ZERO_RANGE does.
                fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, op["off"], op["len"])
                fallocate(fd, op["mode"] & FALLOC_FL_KEEP_SIZE, op["off"], op["len"])
                return ("ok",)
            fallocate(fd, op["mode"], op["off"], op["len"])
            return ("ok",)
        if k == "copy_file_range":
            src, dst = side.fd(op["src"]), side.fd(op["dst"])
            if src is None or dst is None:
                return ("noslot",)
            return ("ok", os.copy_file_range(src, dst, op["len"], op.get("off_in"),
                                             op.get("off_out")))
        raise EnvError("unknown operation %r" % k)
    except OSError as e:
        return ("err", errname(e.errno))


def op_paths(op):
    """Paths an operation touches (and their parents) for the quick check."""
    out = []
    for key in ("path", "src", "dst"):
        if key in op and isinstance(op[key], str):
            p = op[key]
            out.append(p)
            out.append(os.path.dirname(p))
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def op_slots(op):
    if op["op"] == "copy_file_range":
        return [op["src"], op["dst"]]
    if "slot" in op:
        return [op["slot"]]
    return []


def op_ranges(op, pos):
    """Byte ranges of a file an operation changed (for big files)."""
    k = op["op"]
    if k in ("write", "pwrite"):
        off = op.get("off", pos if pos is not None else 0)
        return [(off - 4096, op["data"]["n"] + 8192)]
    if k in ("truncate", "ftruncate"):
        return [(op["size"] - 4096, 8192)]
    if k == "fallocate":
        return [(op["off"] - 4096, op["len"] + 8192)]
    if k == "copy_file_range" and op.get("off_out") is not None:
        return [(op["off_out"] - 4096, op["len"] + 8192)]
    return []


# ---------------------------------------------------------------------------
# Environment: the reference, the image, the FUSE daemon, the kernel.

def _mounted(path):
    """major:minor of the mount at path, or None (reads mountinfo: no stat of
    a possibly hanging FUSE mount)."""
    with open("/proc/self/mountinfo", "rb") as f:
        data = f.read().decode("utf-8", "surrogateescape")
    found = None
    for line in data.splitlines():
        parts = line.split(" ")
        mp = parts[4].replace("\\040", " ").replace("\\011", "\t").replace(
            "\\012", "\n").replace("\\134", "\\")
        if mp == path:
            found = parts[2]
    return found


def _run(cmd, timeout=600, check=True, input_=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, input=input_)
    out = r.stdout.decode("utf-8", "replace")
    if check and r.returncode != 0:
        raise EnvError("%s exited %d: %s" % (" ".join(cmd), r.returncode, out.strip()[-2000:]))
    return r.returncode, out


# Lines of the daemon's output that fail a run (others are information).
DAEMON_BAD = re.compile(r"error|warning|fail|corrupt|abort|Sanitizer|runtime error|"
                        r"read-only|assert", re.IGNORECASE)


class DirEnv:
    """Both sides plain directories (no mounts): for the self-test."""

    backend = "dir"
    xattr_max = None
    symlink_max = None

    def __init__(self, args, profile):
        self.tmp = tempfile.mkdtemp(prefix="difftest.", dir=args.tmpdir)
        self.ref = os.path.join(self.tmp, "ref")
        self.ubt = os.path.join(self.tmp, "ubt")
        self.profile = profile

    def start(self):
        self.reset()

    def reset(self):
        for d in (self.ref, self.ubt):
            if os.path.exists(d):
                shutil.rmtree(d)
            os.mkdir(d, 0o755)

    def remount(self):
        pass

    def finish(self):
        pass

    def kernel_snapshot(self, fake):
        return None

    def daemon_note(self):
        return ""

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def abort(self):
        pass


class UbtrfsEnv:
    """tmpfs reference, a fresh image per run, ubtrfs mount -f -o rw."""

    backend = "ubtrfs"

    def __init__(self, args, profile):
        self.args = args
        self.profile = profile
        self.tmp = tempfile.mkdtemp(prefix="difftest.", dir=args.tmpdir)
        self.ref = os.path.join(self.tmp, "ref")
        self.ubt = os.path.join(self.tmp, "mnt")
        self.kmnt = os.path.join(self.tmp, "k")
        self.img = os.path.join(self.tmp, "fs.img")
        self.pristine = os.path.join(self.tmp, "pristine.img")
        self.log = os.path.join(self.tmp, "daemon.log")
        self.proc = None
        self.conn = None
        self.loop = None
        self.ref_mounted = False
        self.xattr_max = None
        self.symlink_max = None
        self.mounts = 0

    # -- setup
    def start(self):
        os.mkdir(self.ref)
        os.mkdir(self.ubt)
        os.mkdir(self.kmnt)
        tool, opts = PROFILES[self.profile]
        _run(["truncate", "-s", self.args.image_size, self.pristine])
        if tool == "ubtrfs":
            _run([self.args.ubtrfs, "mkfs", "-q", "-f"] + opts + [self.pristine])
        else:
            _run(["mkfs.btrfs", "-f", "-q"] + opts + [self.pristine])
        _, out = _run(["btrfs", "inspect-internal", "dump-super", self.pristine])
        nodesize = 16384
        for line in out.splitlines():
            if line.startswith("nodesize"):
                nodesize = int(line.split()[1])
        # btrfs's item limits (the kernel's BTRFS_MAX_XATTR_SIZE and
        # BTRFS_MAX_INLINE_DATA_SIZE): header 101, item 25, dir item 30,
        # file extent item up to disk_bytenr 21.
        self.xattr_max = nodesize - 156
        self.symlink_max = nodesize - 147
        self.reset()

    def _mount_ref(self):
        _run(["mount", "-t", "tmpfs", "-o", "size=16G,mode=0755", "tmpfs", self.ref])
        self.ref_mounted = True

    def _umount_ref(self):
        if self.ref_mounted:
            _run(["umount", self.ref])
            self.ref_mounted = False

    def reset(self):
        self.unmount(check_exit=False)
        self._umount_ref()
        self._mount_ref()
        _run(["cp", "--sparse=always", self.pristine, self.img])
        self.mount()

    # -- the daemon
    def mount(self):
        self.logf = open(self.log, "ab")
        self.logf.write(b"--- mount %d\n" % self.mounts)
        self.logf.flush()
        self.mounts += 1
        self.proc = subprocess.Popen([self.args.ubtrfs, "mount", "-f", "-o", "rw", self.img,
                                      self.ubt], stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=self.logf)
        t0 = time.monotonic()
        while True:
            dev = _mounted(self.ubt)
            if dev:
                self.conn = dev.split(":")[1]
                return
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                raise Failure("daemon", "ubtrfs mount exited %d before mounting: %s" %
                              (rc, self.log_tail()))
            if time.monotonic() - t0 > 60:
                raise EnvError("ubtrfs mount did not come up in 60 s")
            time.sleep(0.01)

    def log_tail(self, n=2000):
        try:
            with open(self.log, "rb") as f:
                data = f.read()
            return data[-n:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def unmount(self, check_exit=True):
        if self.proc is None:
            return
        if _mounted(self.ubt):
            rc, out = _run(["fusermount3", "-u", self.ubt], check=False)
            if rc != 0:
                _run(["fusermount3", "-u", "-z", self.ubt], check=False)
                if check_exit:
                    raise Failure("daemon", "fusermount3 -u failed: %s" % out.strip())
        try:
            rc = self.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            raise Failure("daemon", "the daemon did not exit 300 s after the unmount")
        self.proc = None
        self.conn = None
        self.logf.close()
        if check_exit:
            tail = self.log_tail()
            last = tail.split("--- mount")[-1]
            if rc != 0:
                raise Failure("daemon", "the daemon exited %d: %s" % (rc, last))
            bad = [ln for ln in last.splitlines()[1:] if DAEMON_BAD.search(ln)]
            if bad:
                raise Failure("daemon", "the daemon said: %s" % " | ".join(bad[:10]))

    def daemon_note(self):
        if self.proc is not None and self.proc.poll() is not None:
            return " (the daemon exited %d: %s)" % (self.proc.returncode, self.log_tail(500))
        return ""

    def abort(self):
        """Abort a hanging FUSE connection (the watchdog)."""
        if self.conn:
            try:
                with open("/sys/fs/fuse/connections/%s/abort" % self.conn, "w") as f:
                    f.write("1")
            except OSError:
                pass

    def check(self, what):
        rc, out = _run(["btrfs", "check", "--readonly", self.img], check=False)
        if rc != 0 or "no error found" not in out:
            lines = [ln for ln in out.splitlines() if ln.strip()]
            raise Failure("check", "%s: btrfs check --readonly exited %d: %s" %
                          (what, rc, " | ".join(lines[-25:])))

    def remount(self):
        self.unmount()
        self.check("remount")
        self.mount()

    def finish(self):
        self.unmount()
        self.check("final")

    def kernel_snapshot(self, fake):
        _, dev = _run(["losetup", "-f", "--show", "-r", self.img])
        self.loop = dev.strip()
        try:
            rc, out = _run(["mount", "-t", "btrfs", "-o", "ro,noatime", self.loop, self.kmnt],
                           check=False)
            if rc != 0:
                _, dm = _run(["dmesg"], check=False)
                raise Failure("kernel", "the kernel does not mount the image: %s %s" %
                              (out.strip(), " | ".join(dm.splitlines()[-8:])))
            try:
                return snapshot(self.kmnt, False)
            finally:
                _run(["umount", self.kmnt])
        finally:
            self._unloop()

    def _unloop(self):
        if self.loop:
            _run(["btrfs", "device", "scan", "--forget", self.loop], check=False)
            _run(["losetup", "-d", self.loop], check=False)
            self.loop = None

    def cleanup(self):
        try:
            if self.proc is not None:
                if _mounted(self.ubt):
                    rc, _ = _run(["fusermount3", "-u", self.ubt], check=False)
                    if rc != 0:
                        self.abort()
                        _run(["fusermount3", "-u", "-z", self.ubt], check=False)
                try:
                    self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                self.proc = None
            if _mounted(self.kmnt):
                _run(["umount", "-l", self.kmnt], check=False)
            self._unloop()
            if self.ref_mounted:
                rc, _ = _run(["umount", self.ref], check=False)
                if rc != 0:
                    _run(["umount", "-l", self.ref], check=False)
                self.ref_mounted = False
        finally:
            if not (_mounted(self.ubt) or _mounted(self.ref) or _mounted(self.kmnt)):
                shutil.rmtree(self.tmp, ignore_errors=True)
            else:
                log("cleanup: something is still mounted under %s" % self.tmp)


# ---------------------------------------------------------------------------
# Probing optional operations on the ubtrfs side.

UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL)


def lacks_zero_range(root):
    """True if the filesystem at root refuses FALLOC_FL_ZERO_RANGE."""
    p = os.path.join(root, ".difftest-zr")
    fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
    try:
        os.unlink(p)
        fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 4096)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def probe_kinds(root):
    """{kind: None if supported, else the reason} for every optional kind."""
    d = os.path.join(root, ".difftest-probe")
    os.mkdir(d)
    res = {}

    def attempt(kind, fn):
        try:
            fn()
            res[kind] = None
        except OSError as e:
            res[kind] = errname(e.errno) if e.errno in UNSUPPORTED else \
                "probe failed: %s" % errname(e.errno)
        except AssertionError as e:
            res[kind] = "probe misbehaved: %s" % e

    f = os.path.join(d, "f")
    fd = os.open(f, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.pwrite(fd, b"x" * 10000, 0)
        attempt("fallocate", lambda: fallocate(fd, 0, 0, 20000))
        attempt("fallocate_keep", lambda: fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 40000))
        attempt("punch_hole", lambda: fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                                4096, 4096))
        attempt("zero_range", lambda: fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 100))
        attempt("seek_data", lambda: (os.lseek(fd, 0, SEEK_DATA), os.lseek(fd, 0, SEEK_HOLE)))

        def cfr():
            g = os.open(os.path.join(d, "g"), os.O_CREAT | os.O_RDWR, 0o644)
            try:
                n = os.copy_file_range(fd, g, 100, 0, 0)
                assert n == 100, "copied %d of 100 bytes" % n
            finally:
                os.close(g)
        attempt("copy_file_range", cfr)
    finally:
        os.close(fd)

    def noreplace():
        renameat2(os.path.join(d, "g"), os.path.join(d, "h"), RENAME_NOREPLACE)
    attempt("rename_noreplace", noreplace)

    def exchange():
        a, b = os.path.join(d, "a"), os.path.join(d, "b")
        os.close(os.open(a, os.O_CREAT | os.O_WRONLY, 0o600))
        os.mkdir(b)
        renameat2(a, b, RENAME_EXCHANGE)
        assert stat.S_ISDIR(os.lstat(a).st_mode), "not exchanged"
    attempt("rename_exchange", exchange)

    def unlinked():
        p = os.path.join(d, "u")
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.write(fd, b"probe")
            os.unlink(p)
            assert os.pread(fd, 5, 0) == b"probe", "data gone"
            os.pwrite(fd, b"X", 0)
            assert os.pread(fd, 5, 0) == b"Xrobe", "write lost"
            assert os.fstat(fd).st_nlink == 0, "nlink not 0"
        finally:
            os.close(fd)
    attempt("open_unlinked", unlinked)
    shutil.rmtree(d, ignore_errors=True)
    return res


# ---------------------------------------------------------------------------
# The generator: a random next operation from the reference's state.

NAMES = ["a", "b", "c", "d", "e", "f", "g", "dir", "file", "x y", "\u00fcber", ".h",
         "n-1", "n_2", "sub", "q" * 40, "bad\udcff", "tab\tname"]
XNAMES = ["user.a", "user.b", "user.c", "user.long." + "x" * 180, "user.e", "trusted.t"]
MODES_F = [0o644, 0o600, 0o755, 0o444, 0o000, 0o777, 0o4755, 0o2755, 0o6711, 0o1644]
MODES_D = [0o755, 0o700, 0o777, 0o1777, 0o2755, 0o555, 0o000]
IDS = [0, 1, 1000, 65534, 123456, 3000000000]


class Generator:
    def __init__(self, rng, kinds, env, avoid=()):
        self.r = rng
        self.kinds = kinds          # enabled optional kinds
        self.env = env
        self.avoid = set(avoid)     # KNOWN_BUGS not to trigger (see KNOWN_BUGS)
        w = {
            "open": 10, "close": 3, "write": 6, "pwrite": 9, "read": 3, "pread": 5,
            "lseek": 2, "ftruncate": 3, "truncate": 3, "fsync": 1, "fdatasync": 1,
            "fstat": 2, "mkdir": 4, "rmdir": 3, "unlink": 4, "link": 3, "symlink": 3,
            "readlink": 1, "rename": 6, "mkfifo": 1, "stat": 2, "listdir": 1,
            "chmod": 2, "fchmod": 1, "chown": 2, "fchown": 1, "utimens": 3,
            "futimens": 1, "setxattr": 5, "getxattr": 2, "listxattr": 1,
            "removexattr": 2,
        }
        self.fallocate_modes = []
        if "fallocate" in kinds:
            self.fallocate_modes.append(0)
        if "fallocate_keep" in kinds:
            self.fallocate_modes.append(FALLOC_FL_KEEP_SIZE)
        if "punch_hole" in kinds:
            self.fallocate_modes.append(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
        if "zero_range" in kinds:
            self.fallocate_modes += [FALLOC_FL_ZERO_RANGE,
                                     FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE]
        if self.fallocate_modes:
            w["fallocate"] = 5
        if "seek_data" in kinds:
            w["seek_data"] = 2
        if "copy_file_range" in kinds:
            w["copy_file_range"] = 3
        self.rename2_flags = []
        if "rename_noreplace" in kinds:
            self.rename2_flags.append(RENAME_NOREPLACE)
        if "rename_exchange" in kinds:
            self.rename2_flags.append(RENAME_EXCHANGE)
        if self.rename2_flags:
            w["rename2"] = 3
        if "open_unlinked" in kinds:
            w["unlink_open"] = 2
        self.weights = w

    # -- state of the reference
    def scan(self, ref_root, slots):
        self.entries = []      # (rel, type, size)
        self.dirs = [""]
        blocks = 0
        for dirpath, dirnames, filenames in os.walk(ref_root):
            rel = os.path.relpath(dirpath, ref_root)
            rel = "" if rel == "." else rel
            for n in dirnames + filenames:
                p = os.path.join(rel, n) if rel else n
                try:
                    st = os.lstat(os.path.join(ref_root, p))
                except OSError:
                    continue
                t = TYPECH.get(stat.S_IFMT(st.st_mode), "?")
                self.entries.append((p, t, st.st_size))
                blocks += st.st_blocks
                if t == "d":
                    self.dirs.append(p)
        self.entries.sort()
        self.dirs.sort()
        self.bytes_used = blocks * 512
        self.slots = slots      # slot -> (ref fd, type, access)

    def pick(self, types=None, root=False):
        c = [e for e in self.entries if types is None or e[1] in types]
        if root and (types is None or "d" in types) and self.r.random() < 0.08:
            return ""
        if not c:
            return None
        return self.r.choice(c)[0]

    def new_name(self):
        r = self.r.random()
        if r < 0.04:
            return "L" * self.r.randint(200, 255)
        if r < 0.05:
            return "O" * self.r.randint(256, 270)
        if r < 0.15:
            return "n%d" % self.r.randrange(1000)
        return self.r.choice(NAMES)

    def new_path(self):
        shallow = [d for d in self.dirs if d.count("/") < 4]
        d = self.r.choice(shallow)
        n = self.new_name()
        return os.path.join(d, n) if d else n

    def any_path(self, types=None, p_new=0.25, root=False):
        if self.r.random() < p_new:
            return self.new_path()
        return self.pick(types, root) or self.new_path()

    def data(self, n):
        r = self.r.random()
        k = "r" if r < 0.8 else ("z" if r < 0.9 else "p")
        return {"n": n, "k": k, "s": self.r.randrange(1 << 30)}

    def length(self):
        r = self.r.random()
        if r < 0.02:
            return 0
        if r < 0.30:
            return self.r.randint(1, 100)
        if r < 0.45:
            return self.r.randint(100, 4000)
        if r < 0.60:
            return self.r.choice([511, 512, 1023, 1024, 2047, 2048, 2049, 3000, 4095, 4096,
                                  4097, 8191, 8192, 8193, 12288, 16384, 65536, 131072])
        if r < 0.85:
            return self.r.randint(4000, 131072)
        if r < 0.97:
            return self.r.randint(131072, 1 << 20)
        return self.r.randint(1 << 20, 3 << 20)

    def offset(self, size):
        r = self.r.random()
        if r < 0.2:
            return 0
        if r < 0.4:
            return size
        if r < 0.6:
            return self.r.randint(0, size)
        if r < 0.75:
            return self.r.randrange(0, size + 65536) // 4096 * 4096
        if r < 0.95:
            return self.r.randint(0, size + 20000)
        return self.r.randrange(1 << 20, 32 << 20)

    def trunc_size(self, size):
        r = self.r.random()
        if r < 0.15:
            return 0
        if r < 0.35:
            return self.r.randint(0, size)
        if r < 0.5:
            return max(0, size + self.r.randint(-5000, 5000))
        if r < 0.65:
            return self.r.randrange(0, size + 65536) // 4096 * 4096
        if r < 0.8:
            return self.r.choice([1, 100, 2047, 2048, 2049, 4095, 4096, 4097, 8192, 12345])
        if r < 0.95:
            return self.r.randint(size, size + 300000)
        return self.r.randrange(1 << 20, 40 << 20)

    def times(self):
        def one():
            r = self.r.random()
            if r < 0.12:
                return "NOW"
            if r < 0.24:
                return "OMIT"
            if r < 0.85:
                return [self.r.randrange(978307200, EXPLICIT_LO), self.r.randrange(10 ** 9)]
            return self.r.choice([[0, 0], [1, 1], [-1, 999999999], [-315619200, 5],
                                  [EXPLICIT_HI + self.r.randrange(10 ** 8),
                                   self.r.randrange(10 ** 9)],
                                  [1 << 33, 0]])
        return [one(), one()]

    def slot(self, want_reg=False, need=None):
        """A descriptor slot, mostly an open one fit for the operation
        (need: "r" readable, "w" writable)."""
        open_ = sorted(self.slots)
        c = [s for s in open_ if (not want_reg or self.slots[s][1] == "f") and
             (need is None or self.slots[s][2] in (need, "rw"))]
        if c and self.r.random() < 0.95:
            return self.r.choice(c)
        if open_ and self.r.random() < 0.8:
            return self.r.choice(open_)
        return self.r.randrange(SLOTS)

    def slot_size(self, s):
        info = self.slots.get(s)
        if info is None:
            return 0
        try:
            return os.fstat(info[0]).st_size
        except OSError:
            return 0

    def xattr_value(self, name):
        r = self.r.random()
        if r < 0.1:
            n = 0
        elif r < 0.55:
            n = self.r.randint(1, 100)
        elif r < 0.8:
            n = self.r.randint(100, 3000)
        elif r < 0.93:
            n = self.r.randint(3000, 16000)
        elif r < 0.98:
            lim = (self.env.xattr_max or 16228) - len(name.encode())
            n = max(0, lim + self.r.randint(-3, 3))
        else:
            n = self.r.choice([20000, 65536, 65537])
        return self.data(n)

    def next(self):
        w = dict(self.weights)
        if len(self.entries) > MAX_ENTRIES:
            for k in ("mkdir", "symlink", "mkfifo", "link"):
                w[k] *= 0.2
            for k in ("unlink", "rmdir"):
                w[k] *= 3
            w["rename"] *= 0.5
        if self.bytes_used > (400 << 20):
            w["unlink"] *= 5
            w["truncate"] *= 5
            w["ftruncate"] *= 5
        kinds = sorted(w)
        k = self.r.choices(kinds, [w[x] for x in kinds])[0]
        if k in NEEDS_SLOT or k == "copy_file_range":
            if not self.slots:
                k = "open"
        return getattr(self, "g_" + k)()

    # -- one method per operation kind
    def g_open(self):
        free = [s for s in range(SLOTS) if s not in self.slots]
        slot = self.r.choice(free) if free and self.r.random() < 0.8 else self.r.randrange(SLOTS)
        r = self.r.random()
        if r < 0.55:
            path = self.pick("f") or self.new_path()
        elif r < 0.8:
            path = self.new_path()
        else:
            path = self.pick(None, root=True) or self.new_path()
        acc = self.r.choices(["rw", "w", "r"], [6, 2, 2])[0]
        fl = []
        if self.r.random() < 0.6:
            fl.append("creat")
            if self.r.random() < 0.2:
                fl.append("excl")
        if self.r.random() < 0.15:
            fl.append("trunc")
        if self.r.random() < 0.15:
            fl.append("append")
        return {"op": "open", "slot": slot, "path": path, "acc": acc, "fl": fl,
                "mode": self.r.choice(MODES_F)}

    def g_close(self):
        return {"op": "close", "slot": self.slot()}

    def g_write(self):
        return {"op": "write", "slot": self.slot(True, "w"), "data": self.data(self.length())}

    def g_pwrite(self):
        s = self.slot(True, "w")
        return {"op": "pwrite", "slot": s, "off": self.offset(self.slot_size(s)),
                "data": self.data(self.length())}

    def g_read(self):
        return {"op": "read", "slot": self.slot(True, "r"), "len": self.length()}

    def g_pread(self):
        s = self.slot(True, "r")
        return {"op": "pread", "slot": s, "off": self.offset(self.slot_size(s)),
                "len": self.length()}

    def g_lseek(self):
        s = self.slot(True)
        wh = self.r.choice([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END])
        off = self.offset(self.slot_size(s)) if wh == os.SEEK_SET else \
            self.r.randint(-5000, 70000)
        return {"op": "lseek", "slot": s, "off": off, "whence": wh}

    def g_seek_data(self):
        s = self.slot(True)
        return {"op": "seek_data", "slot": s, "off": self.offset(self.slot_size(s)),
                "hole": self.r.random() < 0.5}

    def g_ftruncate(self):
        s = self.slot(True, "w")
        return {"op": "ftruncate", "slot": s, "size": self.trunc_size(self.slot_size(s))}

    def g_truncate(self):
        p = self.any_path("f", 0.05)
        size = next((e[2] for e in self.entries if e[0] == p), 0)
        return {"op": "truncate", "path": p, "size": self.trunc_size(size)}

    def g_fsync(self):
        return {"op": "fsync", "slot": self.slot()}

    def g_fdatasync(self):
        return {"op": "fdatasync", "slot": self.slot()}

    def g_fstat(self):
        return {"op": "fstat", "slot": self.slot()}

    def g_mkdir(self):
        return {"op": "mkdir", "path": self.any_path("d", 0.85), "mode": self.r.choice(MODES_D)}

    def g_rmdir(self):
        dirs = [e[0] for e in self.entries if e[1] == "d"]
        empty = [d for d in dirs if not any(e[0].startswith(d + "/") for e in self.entries)]
        r = self.r.random()
        if r < 0.6 and empty:
            p = self.r.choice(empty)
        elif r < 0.85 and dirs:
            p = self.r.choice(dirs)
        else:
            p = self.any_path(None, 0.3)
        return {"op": "rmdir", "path": p}

    def g_unlink(self):
        r = self.r.random()
        if r < 0.85:
            p = self.pick("flp") or self.new_path()
        else:
            p = self.any_path(None, 0.5)
        return {"op": "unlink", "path": p}

    def g_unlink_open(self):
        regs = [s for s in self.slots if self.slots[s][1] == "f"]
        if not regs:
            return self.g_unlink()
        s = self.r.choice(regs)
        try:
            ino = os.fstat(self.slots[s][0]).st_ino
        except OSError:
            return self.g_unlink()
        ref = self.scan_root
        names = [e[0] for e in self.entries if e[1] == "f" and
                 os.lstat(os.path.join(ref, e[0])).st_ino == ino]
        if not names:
            return self.g_unlink()
        return {"op": "unlink", "path": self.r.choice(names)}

    def g_link(self):
        src = self.pick("flp") if self.r.random() < 0.85 else self.any_path(None, 0.3)
        src = src or self.new_path()
        dst = self.new_path() if self.r.random() < 0.85 else self.any_path(None, 0.2)
        return {"op": "link", "src": src, "dst": dst, "follow": self.r.random() < 0.1}

    def g_symlink(self):
        path = self.new_path() if self.r.random() < 0.9 else self.any_path()
        d = os.path.dirname(path)
        r = self.r.random()
        below = [e[0] for e in self.entries if d == "" or e[0].startswith(d + "/")]
        if r < 0.5 and below:
            t = self.r.choice(below)
            t = t[len(d) + 1:] if d else t
        elif r < 0.65:
            t = os.path.basename(path)          # a loop
        elif r < 0.9:
            t = "/".join(self.r.choice(NAMES[:10]) for _ in range(self.r.randint(1, 3)))
        else:
            n = self.r.randint(100, 4095)
            if self.r.random() < 0.3 and (self.env.symlink_max or 9999) < 4095:
                n = self.env.symlink_max + self.r.randint(-2, 2)
            chars = "abcdefghij/"
            t = "".join(self.r.choice(chars) for _ in range(n)).replace("//", "/x")
            t = "x" + t[1:n]
        return {"op": "symlink", "path": path, "target": t}

    def g_readlink(self):
        return {"op": "readlink", "path": self.any_path("l", 0.1)}

    def g_rename(self, k="rename", flags=None):
        src = self.pick(None) if self.r.random() < 0.92 else self.new_path()
        src = src or self.new_path()
        r = self.r.random()
        if r < 0.4:
            dst = self.new_path()
        elif r < 0.8:
            st = next((e[1] for e in self.entries if e[0] == src), "f")
            dst = self.pick(st) or self.new_path()
        elif r < 0.9:
            dst = self.pick(None) or self.new_path()
        else:
            # into its own subtree, or onto an ancestor
            under = [e[0] for e in self.entries if e[0].startswith(src + "/")]
            dst = (self.r.choice(under) + "/x") if under else os.path.dirname(src) or "x"
        op = {"op": k, "src": src, "dst": dst}
        if flags is not None:
            op["flags"] = flags
        return op

    def g_rename2(self):
        f = self.r.choice(self.rename2_flags)
        op = self.g_rename("rename2", f)
        if f == RENAME_EXCHANGE and self.r.random() < 0.7:
            op["dst"] = self.pick(None) or op["dst"]
        return op

    def g_mkfifo(self):
        return {"op": "mkfifo", "path": self.any_path(None, 0.9), "mode": 0o644}

    def g_stat(self):
        return {"op": "stat", "path": self.any_path(None, 0.1, root=True)}

    def g_listdir(self):
        return {"op": "listdir", "path": self.any_path("d", 0.1, root=True)}

    def g_chmod(self):
        p = self.any_path(None, 0.05, root=True)
        st = next((e[1] for e in self.entries if e[0] == p), "d")
        return {"op": "chmod", "path": p,
                "mode": self.r.choice(MODES_D if st == "d" else MODES_F)}

    def g_fchmod(self):
        return {"op": "fchmod", "slot": self.slot(), "mode": self.r.choice(MODES_F)}

    def _ids(self):
        return (self.r.choice(IDS) if self.r.random() < 0.8 else -1,
                self.r.choice(IDS) if self.r.random() < 0.8 else -1)

    def g_chown(self):
        u, g = self._ids()
        return {"op": "chown", "path": self.any_path(None, 0.05, root=True), "uid": u,
                "gid": g, "nofollow": self.r.random() < 0.4}

    def g_fchown(self):
        u, g = self._ids()
        return {"op": "fchown", "slot": self.slot(), "uid": u, "gid": g}

    def g_utimens(self):
        return {"op": "utimens", "path": self.any_path(None, 0.05, root=True),
                "times": self.times(), "nofollow": self.r.random() < 0.3}

    def g_futimens(self):
        return {"op": "futimens", "slot": self.slot(), "times": self.times()}

    def _xpath(self):
        r = self.r.random()
        if r < 0.9:
            return self.pick("fd", root=True) or self.new_path()
        return self.any_path(None, 0.2)

    def _xattr_target(self, p_existing):
        """(path, name): mostly an xattr that exists, when one does."""
        if self.r.random() < p_existing:
            have = []
            for e in [("", "d", 0)] + self.entries:
                if e[1] in "fd":
                    try:
                        names = os.listxattr(os.path.join(self.scan_root, e[0]),
                                             follow_symlinks=False)
                    except OSError:
                        continue
                    have += [(e[0], n) for n in names]
            if have:
                return self.r.choice(have)
        return self._xpath(), self.r.choice(XNAMES)

    def g_setxattr(self):
        path, name = self._xattr_target(0.3)
        return {"op": "setxattr", "path": path, "name": name,
                "value": self.xattr_value(name),
                "flags": self.r.choices([0, XATTR_CREATE, XATTR_REPLACE], [6, 2, 2])[0],
                "nofollow": self.r.random() < 0.2}

    def _bufsize(self):
        r = self.r.random()
        if r < 0.2:
            return 0
        if r < 0.3:
            return self.r.randint(1, 40)
        return 65536

    def g_getxattr(self):
        path, name = self._xattr_target(0.7)
        return {"op": "getxattr", "path": path, "name": name,
                "bufsize": self._bufsize(), "nofollow": self.r.random() < 0.2}

    def g_listxattr(self):
        return {"op": "listxattr", "path": self._xpath(), "bufsize": self._bufsize(),
                "nofollow": self.r.random() < 0.2}

    def g_removexattr(self):
        path, name = self._xattr_target(0.7)
        return {"op": "removexattr", "path": path, "name": name,
                "nofollow": self.r.random() < 0.2}

    def g_fallocate(self):
        s = self.slot(True, "w")
        size = self.slot_size(s)
        ln = self.length() if self.r.random() < 0.9 else self.r.randint(1 << 20, 8 << 20)
        return {"op": "fallocate", "slot": s, "mode": self.r.choice(self.fallocate_modes),
                "off": self.offset(size), "len": ln}

    def g_copy_file_range(self):
        src = self.slot(True, "r")
        dst = self.slot(True, "w")
        op = {"op": "copy_file_range", "src": src, "dst": dst, "len": self.length()}
        if self.r.random() < 0.85:
            op["off_in"] = self.offset(self.slot_size(src))
            op["off_out"] = self.offset(self.slot_size(dst))
            if self.r.random() < 0.3:
                op["off_in"] = op["off_in"] // 4096 * 4096
                op["off_out"] = op["off_out"] // 4096 * 4096
                op["len"] = max(4096, op["len"] // 4096 * 4096)
        return op


# ---------------------------------------------------------------------------
# Running a sequence.

class Watchdog(threading.Thread):
    """Aborts the FUSE connection when one step hangs."""

    def __init__(self, env, limit):
        super().__init__(daemon=True)
        self.env = env
        self.limit = limit
        self.started = None
        self.fired = False
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(1.0):
            t = self.started
            if t is not None and time.monotonic() - t > self.limit:
                self.fired = True
                log("an operation has hung for %d s: aborting the FUSE connection" % self.limit)
                self.env.abort()
                self.started = None


class Runner:
    def __init__(self, env, cfg, kinds, fake_bug):
        self.env = env
        self.cfg = cfg
        self.kinds = set(kinds)
        self.fake = fake_bug
        self.counts = {}
        self.outcomes = {}
        self.times = {}         # seconds the ubtrfs side took, per kind
        self.remounts = 0

    def _sides(self):
        self.ref = Side("tmpfs", self.env.ref, emulate_zero_range=lacks_zero_range(self.env.ref))
        self.ubt = Side(self.env.backend, self.env.ubt, self.fake)

    def close_all(self):
        self.ref.close_all()
        self.ubt.close_all()

    def slot_info(self):
        out = {}
        for s, fd in self.ref.fds.items():
            try:
                st = os.fstat(fd)
                acc = fcntl_acc(fd)
            except OSError:
                continue
            out[s] = (fd, TYPECH.get(stat.S_IFMT(st.st_mode), "?"), acc)
        return out

    def run(self, ops=None, seed=None, nops=0, final=True, progress=False):
        """Run ops (a list) or generate nops from seed.  Returns
        (Failure or None, the operations run)."""
        self._sides()
        wd = None
        if self.env.backend == "ubtrfs":
            wd = Watchdog(self.env, self.cfg["op_timeout"])
            wd.start()
        self.wd = wd
        done = []
        gen = None
        if ops is None:
            gen = Generator(random.Random(seed), self.kinds, self.env, self.cfg["avoid"])
            total = nops
        else:
            total = len(ops)
        t0 = time.monotonic()
        try:
            for i in range(total):
                if gen is not None:
                    if self.cfg["remount_every"] and i and i % self.cfg["remount_every"] == 0:
                        op = {"op": "remount"}
                    else:
                        gen.scan(self.env.ref, self.slot_info())
                        gen.scan_root = self.env.ref
                        op = gen.next()
                else:
                    op = ops[i]
                done.append(op)
                try:
                    self.step(i, op)
                    if self.cfg["full_every"] and (i + 1) % self.cfg["full_every"] == 0:
                        self.full_compare("full")
                except Failure as f:
                    if f.index is None:
                        f.index = i
                    if wd is not None and wd.fired:
                        f.key = "hang"
                        f.msg = "operation hung (FUSE connection aborted): " + f.msg
                    return f, done
                if progress and (i + 1) % 1000 == 0:
                    log("  %d ops (%.0f s)" % (i + 1, time.monotonic() - t0))
            try:
                self.close_all()
                self.full_compare("full")
                if final:
                    self.finish()
            except Failure as f:
                if f.index is None:
                    f.index = len(done)
                return f, done
            return None, done
        finally:
            self.close_all()
            if wd is not None:
                wd.stop.set()

    def _timed(self, fn, *a):
        if self.wd is not None:
            self.wd.started = time.monotonic()
        try:
            return fn(*a)
        finally:
            if self.wd is not None:
                self.wd.started = None

    def step(self, i, op):
        k = op["op"]
        self.counts[k] = self.counts.get(k, 0) + 1
        if VERBOSE > 1:
            log("op %d: %s" % (i, short(op, 200)))
        if k == "remount":
            self.remount()
            return
        if k == "expect":
            self.expect(i, op)
            return
        if "open_unlinked" not in self.kinds:
            self.keep_open_files_named(op)
        pos = None
        for s in op_slots(op)[:1]:
            fd = self.ref.fd(s)
            if fd is not None:
                try:
                    pos = os.lseek(fd, 0, os.SEEK_CUR)
                except OSError:
                    pass
        # Past btrfs's item limits tmpfs goes on, btrfs refuses: the
        # operation runs on ubtrfs alone then and must fail as the kernel's.
        limit = None
        if k == "setxattr" and self.env.xattr_max is not None and \
                len(op["name"].encode()) + op["value"]["n"] > self.env.xattr_max:
            limit = ("xattr", self.env.xattr_max, "ENOSPC")
        if k == "symlink" and self.env.symlink_max is not None and \
                len(os.fsencode(op["target"])) > self.env.symlink_max:
            limit = ("symlink", self.env.symlink_max, "ENAMETOOLONG")
        t0 = time.monotonic()
        ru = self._timed(apply_op, self.ubt, op)
        self.times[k] = self.times.get(k, 0.0) + time.monotonic() - t0
        if limit and ru == ("err", limit[2]):
            rr = ru
        else:
            pre = None
            if k == "truncate":
                try:
                    pre = os.stat(self.ref.p(op["path"]))
                except OSError:
                    pass
            rr = apply_op(self.ref, op)
            if pre is not None and rr[0] == "ok" and stat.S_ISREG(pre.st_mode) and \
                    pre.st_size == op["size"] and self.env.backend == "ubtrfs":
                # tmpfs sets mtime on a same-size truncate(2) when the file
                # has pages; btrfs never: the reference keeps btrfs's times.
                os.utime(self.ref.p(op["path"]), ns=(pre.st_atime_ns, pre.st_mtime_ns))
            if limit and rr[0] == "ok":
                raise Failure("result:" + k, "op %d %s: over btrfs's %s limit (%d): ubtrfs "
                              "must refuse with %s as the kernel does, it returned %s" %
                              (i, short(op), limit[0], limit[1], limit[2], short(ru)))
        self.compare_result(i, op, rr, ru)
        oc = self.outcomes.setdefault(k, {})
        tag = rr[0] if rr[0] != "err" else rr[1]
        oc[tag] = oc.get(tag, 0) + 1
        self._timed(self.quick_compare, i, op, pos)

    def expect(self, i, op):
        """A hand-written assertion of a regression file: a stat field of
        the ubtrfs side (what the kernel shows there; the reference may
        legitimately differ, e.g. st_blocks)."""
        try:
            if "slot" in op:
                fd = self.ubt.fd(op["slot"])
                if fd is None:
                    raise Failure("expect", "op %d: slot %d is not open" % (i, op["slot"]))
                st = os.fstat(fd)
            else:
                st = os.lstat(self.ubt.p(op["path"]))
            got = raw_stat(st, self.fake).get(op["field"])
        except OSError as e:
            got = "!" + errname(e.errno)
        if got != op["value"]:
            raise Failure("expect:%s" % op["field"], "op %d %s: ubtrfs shows %s %r, the kernel %r" %
                          (i, short(op), op["field"], got, op["value"]))

    def keep_open_files_named(self, op):
        """Without open_unlinked: close the descriptors of a file before an
        operation can remove its last name (on both sides alike)."""
        k = op["op"]
        if k in ("unlink", "rmdir"):
            victims = [op["path"]]
        elif k == "rename" or (k == "rename2" and op["flags"] != RENAME_EXCHANGE):
            victims = [op["dst"]]
        else:
            return
        for v in victims:
            try:
                st = os.lstat(self.ref.p(v))
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
                continue
            for s, fd in list(self.ref.fds.items()):
                try:
                    if os.fstat(fd).st_ino == st.st_ino:
                        self.ref.close(s)
                        self.ubt.close(s)
                except OSError:
                    pass

    def compare_result(self, i, op, rr, ru):
        k = op["op"]
        if k == "seek_data":
            self.check_seek(i, op, rr, ru)
            return
        if rr == ru:
            return
        if k == "lseek" and self.ref.fd(op["slot"]) is not None and \
                stat.S_ISDIR(os.fstat(self.ref.fd(op["slot"])).st_mode):
            return      # directory offsets are each filesystem's own
        if k in ("stat", "fstat") and rr[0] == "ok" and ru[0] == "ok":
            a, b = rr[1], ru[1]
            pairs = list(zip(a, b)) if k == "stat" else [(a, b)]
            for x, y in pairs:
                f = first_diff(ref_view(x), ref_view(y))
                if f is not None:
                    raise Failure("field:%s" % f, "op %d %s: %s differs: tmpfs %s, ubtrfs %s" %
                                  (i, short(op), f, short(ref_view(x)), short(ref_view(y))))
            return
        what = "result:%s" % k
        raise Failure(what, "op %d %s: tmpfs returned %s, ubtrfs %s%s" %
                      (i, short(op), short(rr), short(ru), self.env.daemon_note()))

    def check_seek(self, i, op, rr, ru):
        """SEEK_DATA/SEEK_HOLE: only what POSIX promises."""
        fd = self.ref.fd(op["slot"])
        off = op["off"]
        bad = None
        if fd is not None and stat.S_ISDIR(os.fstat(fd).st_mode):
            return      # directory offsets are each filesystem's own
        if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
            if rr != ru:    # fifos: ESPIPE from the VFS on both
                raise Failure("result:seek_data", "op %d %s: tmpfs %s, ubtrfs %s" %
                              (i, short(op), short(rr), short(ru)))
            return
        if ru[0] != "ok" and ru != rr:
            if not (ru == ("err", "ENXIO") and rr[0] == "ok" and not op["hole"]):
                bad = "error differs"
        if bad is None and fd is not None and (ru[0] == "ok" or ru == ("err", "ENXIO")):
            size = os.fstat(fd).st_size
            rfd = os.open("/proc/self/fd/%d" % fd, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if off >= size and ru[0] == "ok":
                    bad = "offset %d at or past EOF %d must give ENXIO" % (off, size)
                elif ru[0] == "ok" and not op["hole"]:
                    d = ru[1]
                    if not off <= d < size:
                        bad = "data offset %d outside [%d, %d)" % (d, off, size)
                    elif any(os.pread(rfd, d - off, off)):
                        bad = "non-zero bytes in [%d, %d) skipped as hole" % (off, d)
                elif ru[0] == "ok":
                    h = ru[1]
                    if not off <= h <= size:
                        bad = "hole offset %d outside [%d, %d]" % (h, off, size)
                    elif h < size and any(os.pread(rfd, 1, h)):
                        bad = "hole offset %d holds data" % h
                elif off < size and any(os.pread(rfd, size - off, off)):
                    bad = "ENXIO but [%d, %d) holds data" % (off, size)
            finally:
                os.close(rfd)
        if bad:
            raise Failure("result:seek_data", "op %d %s: %s: tmpfs %s, ubtrfs %s" %
                          (i, short(op), bad, short(rr), short(ru)))

    def quick_compare(self, i, op, pos):
        ranges = op_ranges(op, pos)
        for rel in op_paths(op):
            a = observe(self.ref.p(rel), False, ranges)
            b = observe(self.ubt.p(rel), self.fake, ranges)
            k = first_diff(ref_view(a), ref_view(b))
            if k is not None:
                ra, rb = ref_view(a), ref_view(b)
                fa = ra.get(k) if isinstance(ra, dict) else ra
                fb = rb.get(k) if isinstance(rb, dict) else rb
                raise Failure("field:%s" % k, "op %d %s: after it, %r differs in %s: "
                              "tmpfs %s, ubtrfs %s%s" % (i, short(op), rel or ".", k, short(fa),
                                                         short(fb), self.env.daemon_note()))
        for s in op_slots(op):
            fr, fu = self.ref.fd(s), self.ubt.fd(s)
            if (fr is None) != (fu is None):
                raise Failure("slot", "op %d: slot %d open on one side only" % (i, s))
            if fr is None:
                continue
            a = observe_fd(fr, False, ranges)
            b = observe_fd(fu, self.fake, ranges)
            k = first_diff(ref_view(a), ref_view(b))
            if k is not None:
                raise Failure("field:%s" % k, "op %d %s: after it, the file open in slot %d "
                              "differs in %s: tmpfs %s, ubtrfs %s%s" %
                              (i, short(op), s, k, short(ref_view(a)), short(ref_view(b)),
                               self.env.daemon_note()))

    def full_compare(self, what):
        sr = snapshot(self.env.ref, False)
        su = self._timed(snapshot, self.env.ubt, self.fake)
        compare_snapshots(sr, su, ref_view, what, ("tmpfs", "ubtrfs"))
        return sr, su

    def remount(self):
        t0 = time.monotonic()
        try:
            self._remount()
        finally:
            self.times["remount"] = self.times.get("remount", 0.0) + time.monotonic() - t0

    def _remount(self):
        self.remounts += 1
        self.close_all()
        if self.env.backend == "dir":
            self.full_compare("remount")
            return
        before = self._timed(snapshot, self.env.ubt, self.fake)
        self.env.remount()
        after = self._timed(snapshot, self.env.ubt, self.fake)
        compare_snapshots(before, after, exact_view, "remount",
                          ("before unmount", "after remount"), groups=False)
        self.full_compare("remount")

    def finish(self):
        if self.env.backend == "dir":
            return
        sr, su = self.full_compare("final")
        self.env.finish()
        sk = self.env.kernel_snapshot(False)
        compare_snapshots(su, sk, exact_view, "kernel", ("ubtrfs FUSE", "kernel"),
                          groups=False)
        compare_snapshots(sr, sk, ref_view, "kernel-ref", ("tmpfs", "kernel"))


def fcntl_acc(fd):
    fl = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    return {os.O_RDONLY: "r", os.O_WRONLY: "w"}.get(fl, "rw")


# ---------------------------------------------------------------------------
# Shrinking.

class Shrinker:
    def __init__(self, args, profile, kinds, fake, failure, make_env):
        self.args = args
        self.profile = profile
        self.kinds = kinds
        self.fake = fake
        self.key = failure.key
        self.make_env = make_env
        self.tests = 0
        self.deadline = time.monotonic() + args.shrink_budget
        # Differences found while the ops run need no final unmount/check.
        self.need_final = failure.key in ("check", "daemon", "hang") or \
            failure.key.startswith("kernel") or failure.key.startswith("final")
        self.env = None

    def fails(self, ops):
        """The failure of ops if it is the same kind as the original."""
        self.tests += 1
        if self.env is None:
            self.env = self.make_env(self.args, self.profile)
            self.env.start()
        else:
            self.env.reset()
        r = Runner(self.env, cfg_of(self.args), self.kinds, self.fake)
        f, _ = r.run(ops=ops, final=self.need_final)
        if f is not None and (self.args.shrink_any or f.key == self.key):
            return f
        return None

    def close(self):
        if self.env is not None:
            self.env.cleanup()
            self.env = None

    def shrink(self, ops, failure):
        ops = list(ops[:failure.index + 1]) if failure.index is not None else list(ops)
        log("shrinking %d ops (failure key %s)" % (len(ops), self.key))
        ops, best = self.remove(ops, failure)
        while time.monotonic() < self.deadline:
            simpler = self.unrename(ops) or self.flatten(ops)
            if simpler is None:
                break
            ops, best = simpler
            ops, best = self.remove(ops, best)
        log("shrunk to %d ops in %d runs" % (len(ops), self.tests))
        return ops, best

    def unrename(self, ops):
        """Try to do without one rename: the later operations name the
        entry by its old path.  (ops, failure) or None."""
        def moved(path, a, b):
            if path == b:
                return a
            if path.startswith(b + "/"):
                return a + path[len(b):]
            return path

        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if op["op"] not in ("rename", "rename2"):
                continue
            a, b = op["src"], op["dst"]
            exchange = op["op"] == "rename2" and op["flags"] == RENAME_EXCHANGE
            cand = ops[:i]
            for o in ops[i + 1:]:
                o = dict(o)
                for key in ("path", "src", "dst"):
                    v = o.get(key)
                    if isinstance(v, str):
                        w = moved(v, a, b)
                        if exchange and w == v:
                            w = moved(v, b, a)
                        o[key] = w
                cand.append(o)
            f = self.fails(cand)
            if f is not None:
                if VERBOSE:
                    log("  without the rename at %d: %d ops" % (i, len(cand)))
                return (cand[:f.index + 1] if f.index is not None else cand), f
            if time.monotonic() >= self.deadline:
                break
        return None

    def flatten(self, ops):
        """Try to do without one directory: its mkdir goes and the paths
        below it move up to the root.  (ops, failure) or None."""
        dirs = [op["path"] for op in ops if op["op"] == "mkdir"]
        for d in sorted(set(dirs), key=lambda x: (-x.count("/"), x)):
            cand = []
            for op in ops:
                if op["op"] == "mkdir" and op["path"] == d:
                    continue
                o = dict(op)
                for key in ("path", "src", "dst"):
                    v = o.get(key)
                    if isinstance(v, str) and v.startswith(d + "/"):
                        o[key] = v[len(d) + 1:]
                cand.append(o)
            f = self.fails(cand)
            if f is not None:
                if VERBOSE:
                    log("  without directory %r: %d ops" % (d, len(cand)))
                return (cand[:f.index + 1] if f.index is not None else cand), f
            if time.monotonic() >= self.deadline:
                break
        return None

    def remove(self, ops, best):
        """Delta debugging: chunks of halving size, then single ops."""
        chunk = max(1, len(ops) // 2)
        while True:
            removed = False
            i = 0
            while i < len(ops) and time.monotonic() < self.deadline:
                cand = ops[:i] + ops[i + chunk:]
                if not cand:
                    i += chunk
                    continue
                f = self.fails(cand)
                if f is not None:
                    ops = cand[:f.index + 1] if f.index is not None else cand
                    best = f
                    removed = True
                    if VERBOSE:
                        log("  chunk %d at %d: now %d ops" % (chunk, i, len(ops)))
                else:
                    i += chunk
            if time.monotonic() >= self.deadline:
                log("shrink budget used up; keeping %d ops" % len(ops))
                break
            if chunk == 1 and not removed:
                break
            if not removed:
                chunk = max(1, chunk // 2)
        return ops, best


# ---------------------------------------------------------------------------
# Driver.

def cfg_of(args):
    return {"remount_every": args.remount_every, "full_every": args.full_every,
            "op_timeout": args.op_timeout, "avoid": args.avoid_list}


def parse_seeds(s):
    out = []
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part[1:]:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def make_env(args, profile):
    return DirEnv(args, profile) if args.backend == "dir" else UbtrfsEnv(args, profile)


def choose_kinds(args, env):
    """Probe the optional kinds; returns (enabled, {kind: reason skipped})."""
    probed = probe_kinds(env.ubt)
    on_ref = probe_kinds(env.ref)
    # tmpfs lacks ZERO_RANGE: the reference emulates it (punch + allocate).
    if on_ref["zero_range"] is not None and on_ref["punch_hole"] is None:
        on_ref["zero_range"] = None
    wanted = set(OPTIONAL_KINDS)
    if args.enable:
        wanted = set()
        for k in args.enable.split(","):
            k = k.strip()
            if k == "all":
                wanted |= set(OPTIONAL_KINDS)
            elif k in OPTIONAL_KINDS:
                wanted.add(k)
            elif k and k != "none":
                raise EnvError("unknown op kind %r (known: %s)" % (k, ", ".join(OPTIONAL_KINDS)))
    for k in (args.disable or "").split(","):
        k = k.strip()
        if k:
            if k not in OPTIONAL_KINDS:
                raise EnvError("unknown op kind %r" % k)
            wanted.discard(k)
    enabled, skipped = [], {}
    for k in OPTIONAL_KINDS:
        if k not in wanted:
            skipped[k] = "disabled"
        elif probed[k] is not None:
            skipped[k] = "unsupported (%s)" % probed[k]
        elif on_ref[k] is not None:
            skipped[k] = "the reference lacks it (%s)" % on_ref[k]
        else:
            enabled.append(k)
    return enabled, skipped, probed


def write_repro(path, profile, kinds, args, seed, failure, ops):
    doc = {"difftest": 1, "profile": profile, "kinds": sorted(kinds), "seed": seed,
           "backend": args.backend, "fake_bug": bool(args.fake_bug),
           "remount_every": args.remount_every, "full_every": args.full_every,
           "failure": failure.as_dict() if failure else None, "ops": ops}
    dump_repro(path, doc)


def dump_repro(path, doc):
    """JSON with one operation a line (reviewable, diffable)."""
    head = {k: v for k, v in doc.items() if k != "ops"}
    lines = ["{"]
    for k, v in head.items():
        lines.append("  %s: %s," % (json.dumps(k), json.dumps(v, sort_keys=True)))
    ops = doc.get("ops", [])
    lines.append('  "ops": [')
    for n, op in enumerate(ops):
        lines.append("    %s%s" % (json.dumps(op), "," if n + 1 < len(ops) else ""))
    lines.append("  ]")
    lines.append("}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def load_repro(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, list):
        doc = {"ops": doc}
    return doc


def run_seed(args, seed, profile):
    """One seed: run, on failure save and shrink.  Returns (ok, ops run)."""
    env = make_env(args, profile)
    try:
        env.start()
        enabled, skipped, _ = choose_kinds(args, env)
        unsupported = {k: v for k, v in skipped.items() if v != "disabled"}
        if args.require_all and unsupported:
            bad = ", ".join("%s: %s" % kv for kv in sorted(unsupported.items()))
            log("--require-all: op kinds unsupported: %s" % bad)
            return False, 0, skipped
        env.reset()
        runner = Runner(env, cfg_of(args), enabled, args.fake_bug)
        t0 = time.monotonic()
        f, ops = runner.run(seed=seed, nops=args.ops, progress=VERBOSE > 0)
        dt = time.monotonic() - t0
    finally:
        env.cleanup()
    if VERBOSE:
        for k in sorted(runner.outcomes):
            log("  %-16s %6.2fs %s" % (k, runner.times.get(k, 0.0), " ".join(
                "%s=%d" % kv for kv in sorted(runner.outcomes[k].items()))))
    if f is None:
        log("seed %d (%s): %d ops clean in %.0f s (%d remounts)%s" %
            (seed, profile, len(ops), dt, runner.remounts,
             "" if not skipped else "; skipped op kinds: " + ", ".join(
                 "%s (%s)" % kv for kv in sorted(skipped.items()))))
        return True, len(ops), skipped
    log("seed %d (%s): FAILED at op %s of %d after %.0f s: %s" %
        (seed, profile, f.index, len(ops), dt, f.msg))
    os.makedirs(args.out, exist_ok=True)
    full = os.path.join(args.out, "difftest-seed%d.json" % seed)
    write_repro(full, profile, enabled, args, seed, f, ops)
    log("sequence written to %s" % full)
    if not args.no_shrink:
        sh = Shrinker(args, profile, enabled, args.fake_bug, f, make_env)
        try:
            mops, mf = sh.shrink(ops, f)
        finally:
            sh.close()
        mpath = os.path.join(args.out, "difftest-seed%d.min.json" % seed)
        write_repro(mpath, profile, enabled, args, seed, mf, mops)
        log("minimized reproducer (%d ops): %s (run: difftest.py --replay %s)" %
            (len(mops), mpath, mpath))
        log("  failure: %s" % mf.msg)
        for n, op in enumerate(mops):
            log("  %3d %s" % (n, json.dumps(op)[:300]))
    return False, f.index or 0, skipped


def replay(args, path):
    doc = load_repro(path)
    profile = args.profile or doc.get("profile", "default")
    kinds = doc.get("kinds", OPTIONAL_KINDS)
    if args.remount_every is None:
        args.remount_every = 0
    env = make_env(args, profile)
    try:
        env.start()
        runner = Runner(env, cfg_of(args), kinds, args.fake_bug)
        f, ops = runner.run(ops=doc["ops"])
    finally:
        env.cleanup()
    known = doc.get("known_bug")
    if known and args.expect_known:
        want = (doc.get("failure") or {}).get("key")
        if f is None:
            log("%s: %d ops clean: known bug %r seems FIXED: remove \"known_bug\" from "
                "the file and the entry from KNOWN_BUGS in difftest.py" %
                (path, len(ops), known))
            return False
        if want and f.key != want:
            log("%s: known bug %r: fails otherwise than recorded (%s, want %s): %s" %
                (path, known, f.key, want, f.msg))
            return False
        log("%s: known bug %r still there (expected failure: %s)" % (path, known, f.msg))
        return True
    if f is None:
        log("%s: %d ops clean (%s)" % (path, len(ops), profile))
        return True
    log("%s: FAILED at op %s: %s" % (path, f.index, f.msg))
    return False


def self_test(args):
    """The shrinker on the fake bug: find a failing seed, shrink, replay."""
    args.fake_bug = True
    args.no_shrink = True
    found = None
    for seed in range(1, 41):
        profile = args.profile or "default"
        env = make_env(args, profile)
        try:
            env.start()
            enabled, _, _ = choose_kinds(args, env)
            env.reset()
            runner = Runner(env, cfg_of(args), enabled, True)
            f, ops = runner.run(seed=seed, nops=args.ops)
        finally:
            env.cleanup()
        if f is not None and f.key.endswith(":size"):
            found = (seed, profile, enabled, f, ops)
            break
        if f is not None:
            # A real difference (the fake bug only ever shows in sizes):
            # not this test's business, t-difftest's random runs report it.
            log("self-test: seed %d: NOTE: a difference that is not the fake bug's "
                "(key %s), next seed: %s" % (seed, f.key, f.msg))
    if found is None:
        log("self-test: FAIL: no seed hit the fake bug in %d ops" % args.ops)
        return False
    seed, profile, enabled, f, ops = found
    log("self-test: seed %d hits the fake bug at op %d of %d: %s" %
        (seed, f.index, len(ops), f.msg))
    sh = Shrinker(args, profile, enabled, True, f, make_env)
    t0 = time.monotonic()
    try:
        mops, mf = sh.shrink(ops, f)
    finally:
        sh.close()
    log("self-test: %d ops -> %d ops in %d runs, %.0f s" %
        (f.index + 1, len(mops), sh.tests, time.monotonic() - t0))
    for n, op in enumerate(mops):
        log("  %3d %s" % (n, json.dumps(op)[:200]))
    ok = True
    if len(mops) > args.self_test_max:
        log("self-test: FAIL: %d ops left, want at most %d" % (len(mops), args.self_test_max))
        ok = False
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "difftest-selftest.min.json")
    write_repro(path, profile, enabled, args, seed, mf, mops)
    # The reproducer through the command line: fails with the fake bug, not
    # without it.
    base = [sys.executable, os.path.abspath(__file__), "--backend", args.backend,
            "--tmpdir", args.tmpdir or tempfile.gettempdir(), "--replay", path]
    if args.backend == "ubtrfs":
        base += ["--ubtrfs", args.ubtrfs]
    rc1 = subprocess.run(base + ["--fake-bug"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL).returncode
    rc0 = subprocess.run(base, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL).returncode
    if rc1 != 1:
        log("self-test: FAIL: --replay --fake-bug of the reproducer exited %d, want 1" % rc1)
        ok = False
    if rc0 != 0:
        log("self-test: FAIL: --replay of the reproducer without the fake bug exited %d, "
            "want 0" % rc0)
        ok = False
    log("self-test: %s" % ("PASS" if ok else "FAIL"))
    return ok


def main(argv):
    global VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ubtrfs", default=os.environ.get("UBTRFS", "ubtrfs"),
                    help="the ubtrfs binary (default $UBTRFS or ubtrfs)")
    ap.add_argument("--backend", choices=["ubtrfs", "dir"], default="ubtrfs")
    ap.add_argument("--tmpdir", default=None, help="where images and mounts go")
    ap.add_argument("--seeds", default="1", help="seeds: 1,2,5-9")
    ap.add_argument("--ops", type=int, default=2000, help="operations per seed")
    ap.add_argument("--profile", choices=sorted(PROFILES), default=None,
                    help="image profile (default: cycles by seed: %s)" %
                    ", ".join(PROFILE_CYCLE))
    ap.add_argument("--image-size", default="4G")
    ap.add_argument("--remount-every", type=int, default=None,
                    help="insert a remount every K ops (default 500; 0 never)")
    ap.add_argument("--full-every", type=int, default=100,
                    help="compare the whole trees every N ops (0 never)")
    ap.add_argument("--enable", default=None,
                    help="optional op kinds to use if supported (comma list, 'all', "
                    "'none'; default all): " + ", ".join(OPTIONAL_KINDS))
    ap.add_argument("--disable", default=None, help="optional op kinds not to use")
    ap.add_argument("--require-all", action="store_true",
                    help="fail when an optional op kind is unsupported")
    ap.add_argument("--out", default=".", help="where reproducers go")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--shrink-budget", type=float, default=1800,
                    help="seconds the shrinker may take per failure")
    ap.add_argument("--shrink-any", action="store_true",
                    help="shrinking keeps candidates failing in any way")
    ap.add_argument("--op-timeout", type=float, default=120,
                    help="seconds before a hanging step aborts the FUSE connection")
    ap.add_argument("--fake-bug", action="store_true",
                    help="corrupt the observation of the ubtrfs side (see above)")
    ap.add_argument("--replay", nargs="+", metavar="FILE")
    ap.add_argument("--expect-known", action="store_true",
                    help="with --replay: a reproducer marked known_bug must still fail "
                    "(the same way), and fails the replay if it passes")
    ap.add_argument("--self-test-shrinker", action="store_true")
    ap.add_argument("--self-test-max", type=int, default=8,
                    help="most ops the self-test's reproducer may keep")
    ap.add_argument("--avoid", default=None,
                    help="known bugs the generator avoids (comma list, 'none'; default: "
                    "all of KNOWN_BUGS: %s)" % (", ".join(sorted(KNOWN_BUGS)) or "none"))
    ap.add_argument("--keep-going", action="store_true",
                    help="run the remaining seeds after a failure")
    ap.add_argument("-v", "--verbose", action="count", default=0)
    args = ap.parse_args(argv)
    VERBOSE = args.verbose
    if args.avoid is None:
        args.avoid_list = sorted(KNOWN_BUGS)
    else:
        args.avoid_list = [x for x in args.avoid.split(",") if x and x != "none"]
        for x in args.avoid_list:
            if x not in KNOWN_BUGS:
                ap.error("unknown known bug %r (known: %s)" % (x, ", ".join(KNOWN_BUGS)))

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    os.umask(0o022)

    if args.backend == "ubtrfs":
        if os.geteuid() != 0:
            log("the ubtrfs backend needs root (tmpfs, loop devices, kernel mount)")
            return 2
        for tool in ("fusermount3", "mkfs.btrfs", "btrfs", "losetup"):
            if shutil.which(tool) is None:
                log("needs %s" % tool)
                return 2
        if not (os.path.isfile(args.ubtrfs) or shutil.which(args.ubtrfs)):
            log("no ubtrfs binary %r (--ubtrfs or $UBTRFS)" % args.ubtrfs)
            return 2
        args.ubtrfs = os.path.abspath(args.ubtrfs) if os.path.isfile(args.ubtrfs) else \
            shutil.which(args.ubtrfs)
    if args.tmpdir:
        args.tmpdir = os.path.abspath(args.tmpdir)
    try:
        if args.self_test_shrinker:
            if args.remount_every is None:
                args.remount_every = 100
            if args.ops == 2000:
                args.ops = 500
            return 0 if self_test(args) else 1
        if args.replay:
            ok = True
            for p in args.replay:
                ok = replay(args, p) and ok
            return 0 if ok else 1
        if args.remount_every is None:
            args.remount_every = 500
        seeds = parse_seeds(args.seeds)
        total, bad = 0, []
        t0 = time.monotonic()
        skipped_all = {}
        for seed in seeds:
            profile = args.profile or PROFILE_CYCLE[seed % len(PROFILE_CYCLE)]
            ok, n, skipped = run_seed(args, seed, profile)
            skipped_all.update(skipped)
            if ok:
                total += n
            else:
                bad.append(seed)
                if not args.keep_going:
                    break
        log("total: %d ops clean over %d seed(s) in %.0f s%s" %
            (total, len(seeds) - len(bad) if not bad or args.keep_going else
             seeds.index(bad[0]), time.monotonic() - t0,
             "; FAILED seeds: %s" % bad if bad else ""))
        if skipped_all:
            log("skipped op kinds: %s" % ", ".join("%s (%s)" % kv
                                                   for kv in sorted(skipped_all.items())))
        else:
            log("every optional op kind was on: %s" % ", ".join(OPTIONAL_KINDS))
        return 1 if bad else 0
    except EnvError as e:
        log("environment error: %s" % e)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
