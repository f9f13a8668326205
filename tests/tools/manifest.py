#!/usr/bin/env python3
"""Canonical, byte-stable description of a directory tree.

    manifest.py DIR [options]          print the manifest of DIR
    manifest.py --diff A B [--paths] [--wildcards]
                                       compare two manifest files

One line per entry: the root first (path "."), then every other entry sorted
bytewise by its relative path.  Symlinks are never followed.  Every entry is
lstat'ed (the whole tree) before any content, symlink target or xattr is read,
and files are read with O_NOATIME when allowed, so that the manifest does not
disturb the atimes it reports.

Line format (fields separated by one space, always in this order):

    PATH TYPE mode=OOOO uid=N gid=N nlink=N [size=N] [rdev=MAJ:MIN]
    [atime=S.NNNNNNNNN] mtime=S.NNNNNNNNN [ctime=S.NNNNNNNNN] [blocks=N]
    [ino=N] [flags=XXXXXXXX] [hl=PATH] [sha256=HEX] [data=OFF+LEN,...]
    [target=ESC] [xattr:NAME=HEX]...

(A regular file the caller may not read shows "sha256=!EACCES".)

PATH, NAME and symlink targets are escaped: bytes 0x21..0x7e except '\\' stay
as they are, every other byte (space, '\\', controls, UTF-8) becomes \\xHH.
TYPE is f (regular), d, l (symlink), p (fifo), s (socket), c, b.  mode holds
the permission bits with setuid/setgid/sticky in octal.  Times are seconds
since the epoch with nanoseconds (negative times floor: -1 ns is
-1.999999999).  size is left out for directories with --no-dir-size.  hl names
the first path (in manifest order) of the entry's hard-link group; it appears
on every non-directory with nlink > 1, so the output does not depend on inode
numbers.  Xattr values are hex (empty value: "xattr:user.x=").

btrfs shows a nested subvolume inside a snapshot as an empty directory with
inode number 2 whose times the kernel invents each time it loads it; such
entries (directories other than the root whose st_ino is 2, or (V << 40) | 2
as a ubtrfs FUSE mount numbers them in another subvolume V) print "*" as
times.

Options:
    --no-atime       leave out atime
    --no-ctime       leave out ctime (needed to compare separate runs)
    --no-dir-size    leave out the size of directories
    --blocks         add st_blocks (--no-blocks, the default, leaves it out)
    --inodes         add inode numbers
    --subvol-inodes ID
                     DIR is a kernel btrfs mount of the subvolume with id ID
                     (5 for the top level): print inode numbers the way a
                     ubtrfs FUSE mount of that subvolume does, i.e. ino for
                     entries of subvolume ID and (V << 40) | ino for entries
                     of any other subvolume V.  The subvolume of an entry is
                     found from its st_dev (the kernel gives each subvolume
                     its own), looked up once per st_dev on the subvolume's
                     root with BTRFS_IOC_INO_LOOKUP (no privilege needed);
                     a nested-subvolume placeholder (inode 2) counts as
                     part of its parent directory's subvolume.  Implies
                     --inodes.
    --flags          add the inode flags (FS_IOC_GETFLAGS, as chattr) of
                     regular files and directories ("-" if unsupported)
    --holes          add the data ranges of regular files (SEEK_DATA/HOLE)
    --exclude PAT    leave out entries whose relative path or base name
                     matches the fnmatch pattern PAT (a directory's subtree
                     goes with it); may be repeated
    -o FILE          write to FILE instead of stdout

--diff A B prints, per path that differs, "- LINE" (in A) and/or "+ LINE" (in
B) and exits 1 if anything differs, 0 if not; with --paths it prints only the
differing (escaped) paths.  With --wildcards a time field (atime, mtime,
ctime) whose value is "*" in one file matches any value of the same field in
the other: the invented times of a nested-subvolume placeholder against a
copy of it that has real times.  Exit status 2 means an error.
"""

import argparse
import errno
import fcntl
import fnmatch
import hashlib
import os
import stat
import struct
import sys

_ESCAPE = [chr(c) if 0x21 <= c <= 0x7E and c != 0x5C else "\\x%02x" % c
           for c in range(256)]

FS_IOC_GETFLAGS = 0x80086601
EMPTY_SUBVOL_DIR_INO = 2
# _IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args), the struct is 4096 bytes:
# u64 treeid, u64 objectid, char name[4080].
BTRFS_IOC_INO_LOOKUP = 0xD0009412
BTRFS_FIRST_FREE_OBJECTID = 256
SUBVOL_INO_SHIFT = 40
SUBVOL_INO_MASK = (1 << SUBVOL_INO_SHIFT) - 1


def escape(raw: bytes) -> str:
    return "".join([_ESCAPE[c] for c in raw])


def fmt_time(ns: int) -> str:
    sec, nsec = divmod(ns, 1_000_000_000)
    return "%d.%09d" % (sec, nsec)


def file_type(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "f"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    if stat.S_ISFIFO(mode):
        return "p"
    if stat.S_ISSOCK(mode):
        return "s"
    if stat.S_ISCHR(mode):
        return "c"
    if stat.S_ISBLK(mode):
        return "b"
    return "?"


def excluded(rel: bytes, patterns) -> bool:
    if not patterns:
        return False
    text = os.fsdecode(rel)
    base = text.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(text, p) or fnmatch.fnmatchcase(base, p)
               for p in patterns)


def collect(root: bytes, patterns):
    """Phase 1: lstat every entry; no content is read here.

    A directory is lstat'ed (as a child of its parent) before it is listed,
    so the listing cannot change the atime recorded for it."""
    entries = [(b".", os.lstat(root))]
    stack = [b"."]
    while stack:
        rel = stack.pop()
        full = root if rel == b"." else root + b"/" + rel
        names = sorted(os.listdir(full))
        children = []
        for name in names:
            crel = name if rel == b"." else rel + b"/" + name
            if excluded(crel, patterns):
                continue
            st = os.lstat(root + b"/" + crel)
            entries.append((crel, st))
            if stat.S_ISDIR(st.st_mode):
                children.append(crel)
        stack.extend(reversed(children))
    head, rest = entries[0], entries[1:]
    rest.sort(key=lambda e: e[0])
    return [head] + rest


def btrfs_subvol_id(path: bytes) -> int:
    """Id of the btrfs subvolume holding directory path (treeid 0 means
    "the subvolume of this fd"; objectid 256 needs no CAP_SYS_ADMIN)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        args = bytearray(4096)
        struct.pack_into("=QQ", args, 0, 0, BTRFS_FIRST_FREE_OBJECTID)
        fcntl.ioctl(fd, BTRFS_IOC_INO_LOOKUP, args, True)
        return struct.unpack_from("=Q", args, 0)[0]
    finally:
        os.close(fd)


class SubvolInodes:
    """Maps (st_dev, st_ino) of a kernel btrfs mount to ubtrfs's numbers."""

    def __init__(self, root: bytes, mounted: int):
        self.root = root
        self.mounted = mounted
        self.dev_to_id = {}
        self.dir_id = {}

    def ino(self, rel: bytes, st) -> int:
        if stat.S_ISDIR(st.st_mode) and rel != b"." and \
                st.st_ino == EMPTY_SUBVOL_DIR_INO:
            # A nested-subvolume placeholder: the kernel gives it no
            # subvolume of its own (its st_dev is the superblock's); it
            # belongs to its parent directory's subvolume.
            parent = rel.rpartition(b"/")[0] or b"."
            sid = self.dir_id[parent]
        else:
            sid = self.subvol_of(rel, st)
        if stat.S_ISDIR(st.st_mode):
            self.dir_id[rel] = sid
        if sid == self.mounted:
            return st.st_ino
        return (sid << SUBVOL_INO_SHIFT) | st.st_ino

    def subvol_of(self, rel: bytes, st) -> int:
        sid = self.dev_to_id.get(st.st_dev)
        if sid is None:
            # The first entry of a subvolume (in manifest order, parents
            # before children) is its root directory.
            if not stat.S_ISDIR(st.st_mode):
                raise OSError(errno.EINVAL, "no subvolume root seen for "
                              "st_dev %d" % st.st_dev, os.fsdecode(rel))
            full = self.root if rel == b"." else self.root + b"/" + rel
            sid = btrfs_subvol_id(full)
            self.dev_to_id[st.st_dev] = sid
        return sid


def open_noatime(path: bytes, extra: int = 0) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | extra
    try:
        return os.open(path, flags | os.O_NOATIME)
    except PermissionError:
        return os.open(path, flags)


def content_hash(path: bytes) -> str:
    fd = open_noatime(path)
    try:
        h = hashlib.sha256()
        while True:
            buf = os.read(fd, 1 << 20)
            if not buf:
                break
            h.update(buf)
        return h.hexdigest()
    finally:
        os.close(fd)


def data_ranges(path: bytes, size: int) -> str:
    fd = open_noatime(path)
    try:
        ranges = []
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break
                if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                    return "?"
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            ranges.append("%d+%d" % (start, end - start))
            pos = end
        return ",".join(ranges) if ranges else "-"
    finally:
        os.close(fd)


def inode_flags(path: bytes, is_dir: bool) -> str:
    try:
        fd = open_noatime(path, os.O_DIRECTORY if is_dir else 0)
    except OSError:
        return "-"
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
        return "%08x" % struct.unpack("=I", buf[:4])[0]
    except OSError:
        return "-"
    finally:
        os.close(fd)


def xattrs(path: bytes):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return []
        raise
    out = []
    for name in sorted(names, key=os.fsencode):
        try:
            value = os.getxattr(path, name, follow_symlinks=False)
        except OSError as e:
            if e.errno == errno.ENODATA:
                continue
            raise
        out.append("xattr:%s=%s" % (escape(os.fsencode(name)), value.hex()))
    return out


def manifest_lines(root: bytes, opts):
    entries = collect(root, opts.exclude)
    inomap = None
    if opts.subvol_inodes is not None:
        inomap = SubvolInodes(root, opts.subvol_inodes)
    first_link = {}
    for rel, st in entries:
        if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
            first_link.setdefault((st.st_dev, st.st_ino), rel)
    lines = []
    for rel, st in entries:
        full = root if rel == b"." else root + b"/" + rel
        mode = st.st_mode
        kind = file_type(mode)
        f = [escape(rel), kind, "mode=%04o" % stat.S_IMODE(mode),
             "uid=%d" % st.st_uid, "gid=%d" % st.st_gid,
             "nlink=%d" % st.st_nlink]
        if kind != "d" or opts.dir_size:
            f.append("size=%d" % st.st_size)
        if kind in "cb":
            f.append("rdev=%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
        invented = (kind == "d" and rel != b"." and
                    st.st_ino & SUBVOL_INO_MASK == EMPTY_SUBVOL_DIR_INO)
        t = (lambda ns: "*") if invented else fmt_time
        if opts.atime:
            f.append("atime=" + t(st.st_atime_ns))
        f.append("mtime=" + t(st.st_mtime_ns))
        if opts.ctime:
            f.append("ctime=" + t(st.st_ctime_ns))
        if opts.blocks:
            f.append("blocks=%d" % st.st_blocks)
        if inomap is not None:
            f.append("ino=%d" % inomap.ino(rel, st))
        elif opts.inodes:
            f.append("ino=%d" % st.st_ino)
        if opts.flags and kind in "fd":
            f.append("flags=" + inode_flags(full, kind == "d"))
        if kind != "d" and st.st_nlink > 1:
            f.append("hl=" + escape(first_link[(st.st_dev, st.st_ino)]))
        if kind == "f":
            try:
                f.append("sha256=" + content_hash(full))
                if opts.holes:
                    f.append("data=" + data_ranges(full, st.st_size))
            except PermissionError:
                f.append("sha256=!EACCES")
        elif kind == "l":
            f.append("target=" + escape(os.readlink(full)))
        f.extend(xattrs(full))
        lines.append(" ".join(f))
    return lines


def read_manifest(path):
    entries = {}
    order = []
    with open(path, "rb") as fh:
        for raw in fh.read().decode("ascii").splitlines():
            key = raw.split(" ", 1)[0]
            if key not in entries:
                order.append(key)
            entries[key] = raw
    return entries, order


WILD_FIELDS = ("atime", "mtime", "ctime")


def same_with_wildcards(la, lb):
    """Lines equal field by field, a time field valued "*" matching any
    value of the same field."""
    fa, fb = la.split(" "), lb.split(" ")
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if x == y:
            continue
        nx, _, vx = x.partition("=")
        ny, _, vy = y.partition("=")
        if nx != ny or nx not in WILD_FIELDS or "*" not in (vx, vy):
            return False
    return True


def diff(a, b, paths_only, out, wildcards=False):
    ea, oa = read_manifest(a)
    eb, ob = read_manifest(b)
    keys = oa + [k for k in ob if k not in ea]
    keys.sort(key=lambda k: (k != ".", k.encode("ascii")))
    differ = False
    for k in keys:
        la, lb = ea.get(k), eb.get(k)
        if la == lb:
            continue
        if wildcards and la is not None and lb is not None and \
                same_with_wildcards(la, lb):
            continue
        differ = True
        if paths_only:
            out.write(k + "\n")
            continue
        if la is not None:
            out.write("- " + la + "\n")
        if lb is not None:
            out.write("+ " + lb + "\n")
    return 1 if differ else 0


def main(argv):
    p = argparse.ArgumentParser(
        description="Print a canonical manifest of a directory tree.",
        epilog="See the module docstring for the line format.")
    p.add_argument("dir", nargs="?")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"))
    p.add_argument("--paths", action="store_true",
                   help="with --diff: print only the differing paths")
    p.add_argument("--wildcards", action="store_true",
                   help="with --diff: a field valued * matches any value")
    p.add_argument("--no-atime", dest="atime", action="store_false")
    p.add_argument("--no-ctime", dest="ctime", action="store_false")
    p.add_argument("--no-dir-size", dest="dir_size", action="store_false")
    p.add_argument("--blocks", dest="blocks", action="store_true")
    p.add_argument("--no-blocks", dest="blocks", action="store_false")
    p.add_argument("--inodes", action="store_true")
    p.add_argument("--subvol-inodes", type=int, metavar="ID",
                   help="kernel btrfs mount of subvolume ID: number inodes "
                        "of other subvolumes V as (V << 40) | ino")
    p.add_argument("--flags", action="store_true")
    p.add_argument("--holes", action="store_true")
    p.add_argument("--exclude", action="append", default=[], metavar="PAT")
    p.add_argument("-o", "--output", metavar="FILE")
    opts = p.parse_args(argv)

    out = open(opts.output, "w", encoding="ascii", newline="\n") \
        if opts.output else sys.stdout
    try:
        if opts.diff:
            if opts.dir:
                p.error("--diff takes no DIR")
            return diff(opts.diff[0], opts.diff[1], opts.paths, out,
                        opts.wildcards)
        if not opts.dir:
            p.error("DIR is required")
        root = os.fsencode(opts.dir)
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            p.error("%s is not a directory" % opts.dir)
        for line in manifest_lines(root, opts):
            out.write(line + "\n")
        return 0
    finally:
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as e:
        sys.stderr.write("manifest.py: %s\n" % e)
        sys.exit(2)
