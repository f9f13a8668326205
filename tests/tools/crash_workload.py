#!/usr/bin/env python3
"""fsync workloads that record what every crash image must show (t-crash-fsync).

    crash_workload.py run --workload NAME --root MNT --log LOG --journal J
                          [--seed N] [--quick]
    crash_workload.py check --journal J --root DIR --at X
    crash_workload.py flushes LOG

`run` drives one workload (files, rename-trunc, mixed) in MNT, a ubtrfs
read-write FUSE mount whose daemon logs its device writes to LOG
(UBTRFS_WRITE_LOG), and keeps a model of the tree.  Every operation the
workload makes is one state-changing FUSE request (writes are cut to at most
64 KiB), so every state a commit can capture is a state of the model between
two operations.

The journal J (text, one event a line, tab separated) records:

    op      M  PATH  DESC   an operation that began when M flushes were in
                            the log left PATH as DESC
    sync    N  PATH  DESC   an fsync/fdatasync/fsyncdir of PATH returned with
                            N flushes in the log; PATH was DESC
    commit  N  PATH  DESC   the same fsync returned: PATH was DESC (ubtrfs
                            commits the whole transaction on fsync, so every
                            path is durable, not only the one fsync'ed)

M is read before the operation starts and N after the fsync returns, both
by counting FLUSH records in LOG (the daemon appends a flush record before
the flush returns), so M is at most and N at least the true count.  DESC is
"absent", "f:SIZE:SHA256:NLINK:XATTRS" or "d:NAMES:XATTRS" (hashes of the
sorted entry names and of the user.* xattrs).  Paths absent from the
initial tree start "absent" (the image is fresh).

`check` judges the tree at DIR (the kernel's mount of a crash image) as the
image after the prefix of LOG ending at flush K (X = K), or at flush K plus
some writes before flush K+1 (X = K.5).  For every path of the journal, the
last sync/commit event with N <= X says what was durable; the states op
events left with M < X (after that sync) may also show; nothing else may.
So a file fsync'ed before the crash point has exactly its fsync'ed content
unless it was changed again since, and then one of the contents it had.
Mismatches are printed; exit 1 if any.

`flushes` prints the number of flush records in LOG.
"""

import argparse
import errno
import hashlib
import os
import random
import stat
import struct
import sys

CHUNK = 64 * 1024
ABSENT = "absent"
REC_HDR = 32
FILE_HDR = 16
R_FLUSH = 3


class FlushCounter:
    """Counts FLUSH records of a growing write log, reading only new bytes."""

    def __init__(self, path):
        self.path = path
        self.f = None
        self.pos = FILE_HDR
        self.n = 0

    def count(self):
        if self.f is None:
            try:
                self.f = open(self.path, "rb")
            except FileNotFoundError:
                return 0
            if self.f.read(8) != b"UBTWLOG1":
                raise SystemExit(f"{self.path}: not a write log")
        size = os.fstat(self.f.fileno()).st_size
        while self.pos + REC_HDR <= size:
            self.f.seek(self.pos)
            h = self.f.read(REC_HDR)
            if len(h) < REC_HDR:
                break
            rtype, _dev, _off, length = struct.unpack_from("<IIQQ", h)
            if self.pos + REC_HDR + length > size:
                break  # still being appended
            if rtype == R_FLUSH:
                self.n += 1
            self.pos += REC_HDR + length
        return self.n


# ---------------------------------------------------------------------------
# Descriptions of a path's state.

def _xattr_desc(pairs):
    pairs = sorted(pairs)
    if not pairs:
        return "-"
    h = hashlib.sha256()
    for k, v in pairs:
        h.update(k.encode() + b"\0" + str(len(v)).encode() + b"\0" + v)
    return h.hexdigest()[:16]


def _names_desc(names):
    return hashlib.sha256("/".join(sorted(names)).encode()).hexdigest()[:16]


def file_desc(size, sha, nlink, xattrs):
    return f"f:{size}:{sha}:{nlink}:{_xattr_desc(xattrs)}"


def dir_desc(names, xattrs):
    return f"d:{_names_desc(names)}:{_xattr_desc(xattrs)}"


def actual_desc(root, path):
    """The description of PATH under ROOT as the filesystem shows it."""
    full = os.path.join(root, path)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return ABSENT
    try:
        names = [n for n in os.listxattr(full, follow_symlinks=False) if n.startswith("user.")]
        xattrs = [(n, os.getxattr(full, n, follow_symlinks=False)) for n in names]
        if stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            size = 0
            with open(full, "rb") as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    h.update(b)
                    size += len(b)
            return file_desc(size, h.hexdigest()[:24], st.st_nlink, xattrs)
        if stat.S_ISDIR(st.st_mode):
            return dir_desc(os.listdir(full), xattrs)
        return f"other:{st.st_mode:o}"
    except OSError as e:
        return f"error:{errno.errorcode.get(e.errno, e.errno)}"


# ---------------------------------------------------------------------------
# The model.

class Node:
    def __init__(self, kind):
        self.kind = kind  # "f" or "d"
        self.data = bytearray()
        self.xattrs = {}
        self.children = {} if kind == "d" else None
        self.nlink = 0
        self._sha = None

    def changed(self):
        self._sha = None

    def desc(self):
        x = list(self.xattrs.items())
        if self.kind == "d":
            return dir_desc(self.children.keys(), x)
        if self._sha is None:
            self._sha = hashlib.sha256(self.data).hexdigest()[:24]
        return file_desc(len(self.data), self._sha, self.nlink, x)


def split(path):
    d, _, n = path.rpartition("/")
    return (d or "."), n


class Handle:
    def __init__(self, fd, node, append=False):
        self.fd = fd
        self.node = node
        self.append = append


class Workload:
    def __init__(self, root, log, journal, rnd):
        self.root = root
        self.fc = FlushCounter(log)
        self.j = journal
        self.rnd = rnd
        self.top = Node("d")
        self.last = {}
        self.seen = set()
        self.ops = 0
        self.fsyncs = 0
        self.syncs_without_flush = 0
        self.syncs = 0
        # The initial tree (a fresh filesystem: the root directory only).
        for dirpath, dirnames, filenames in os.walk(root):
            if dirnames or filenames:
                raise SystemExit(f"{root} is not empty")
        self.last = self.snapshot()
        self._durable(0, None)

    # -- paths --------------------------------------------------------------
    def full(self, path):
        return os.path.join(self.root, path)

    def node(self, path):
        n = self.top
        if path == ".":
            return n
        for part in path.split("/"):
            n = n.children[part]
        return n

    def exists(self, path):
        try:
            self.node(path)
            return True
        except KeyError:
            return False

    def snapshot(self):
        out = {}
        stack = [(".", self.top)]
        while stack:
            p, n = stack.pop()
            out[p] = n.desc()
            if n.kind == "d":
                for name, c in n.children.items():
                    stack.append((name if p == "." else p + "/" + name, c))
        return out

    def paths_of(self, node):
        return [p for p, _ in self._walk() if _ is node]

    def _walk(self):
        stack = [(".", self.top)]
        while stack:
            p, n = stack.pop()
            yield p, n
            if n.kind == "d":
                for name, c in n.children.items():
                    stack.append((name if p == "." else p + "/" + name, c))

    # -- journal --------------------------------------------------------------
    def _emit(self, kind, count, path, desc):
        self.j.write(f"{kind}\t{count}\t{path}\t{desc}\n")

    def _op(self, fn):
        """Run fn (one state-changing request) and journal what changed."""
        m = self.fc.count()
        fn()
        self.ops += 1
        cur = self.snapshot()
        for p in sorted(set(cur) | set(self.last)):
            d = cur.get(p, ABSENT)
            if self.last.get(p, ABSENT) != d:
                self._emit("op", m, p, d)
        self.seen.update(cur)
        self.last = cur

    def _durable(self, n, targets):
        self.seen.update(self.last)
        for p in sorted(self.seen):
            kind = "sync" if targets is not None and p in targets else "commit"
            self._emit(kind, n, p, self.last.get(p, ABSENT))

    # -- operations -------------------------------------------------------------
    def mkdir(self, path):
        d, name = split(path)
        parent = self.node(d)

        def fn():
            os.mkdir(self.full(path), 0o755)
            parent.children[name] = Node("d")
        self._op(fn)

    def rmdir(self, path):
        d, name = split(path)
        parent = self.node(d)

        def fn():
            os.rmdir(self.full(path))
            del parent.children[name]
        self._op(fn)

    def create(self, path, append=False):
        d, name = split(path)
        parent = self.node(d)
        h = Handle(None, Node("f"), append)

        def fn():
            flags = os.O_CREAT | os.O_EXCL | os.O_RDWR | (os.O_APPEND if append else 0)
            h.fd = os.open(self.full(path), flags, 0o644)
            h.node.nlink = 1
            parent.children[name] = h.node
        self._op(fn)
        return h

    def open(self, path, trunc=False, append=False):
        node = self.node(path)
        flags = os.O_RDWR | (os.O_APPEND if append else 0)
        if not trunc:
            return Handle(os.open(self.full(path), flags), node, append)
        h = Handle(None, node, append)

        def fn():
            h.fd = os.open(self.full(path), flags | os.O_TRUNC)
            node.data = bytearray()
            node.changed()
        self._op(fn)
        return h

    def close(self, h):
        os.close(h.fd)
        h.fd = None

    def write(self, h, off, data):
        """pwrite (append on an O_APPEND handle, off ignored) in chunks."""
        pos = 0
        while pos < len(data):
            n = min(len(data) - pos, self.rnd.choice((CHUNK, CHUNK, 4096, 12345, 777)))
            chunk = data[pos:pos + n]
            at = len(h.node.data) if h.append else off + pos

            def fn(chunk=chunk, at=at):
                if h.append:
                    w = os.write(h.fd, chunk)
                else:
                    w = os.pwrite(h.fd, chunk, at)
                if w != len(chunk):
                    raise OSError(errno.EIO, f"short write {w} of {len(chunk)}")
                nd = h.node.data
                if len(nd) < at:
                    nd.extend(bytes(at - len(nd)))
                nd[at:at + len(chunk)] = chunk
                h.node.changed()
            self._op(fn)
            pos += n

    def truncate(self, h, size):
        def fn():
            os.ftruncate(h.fd, size)
            nd = h.node.data
            if size < len(nd):
                del nd[size:]
            else:
                nd.extend(bytes(size - len(nd)))
            h.node.changed()
        self._op(fn)

    def link(self, src, dst):
        node = self.node(src)
        d, name = split(dst)
        parent = self.node(d)

        def fn():
            os.link(self.full(src), self.full(dst))
            parent.children[name] = node
            node.nlink += 1
        self._op(fn)

    def unlink(self, path):
        d, name = split(path)
        parent = self.node(d)
        node = parent.children[name]

        def fn():
            os.unlink(self.full(path))
            del parent.children[name]
            node.nlink -= 1
        self._op(fn)

    def rename(self, src, dst):
        sd, sname = split(src)
        dd, dname = split(dst)
        sp, dp = self.node(sd), self.node(dd)
        node = sp.children[sname]
        old = dp.children.get(dname)

        def fn():
            os.rename(self.full(src), self.full(dst))
            if old is node:
                return
            del sp.children[sname]
            if old is not None and old.kind == "f":
                old.nlink -= 1
            dp.children[dname] = node
        self._op(fn)

    def setxattr(self, path, name, value, flags=0):
        node = self.node(path)

        def fn():
            os.setxattr(self.full(path), name, value, flags, follow_symlinks=False)
            node.xattrs[name] = value
        self._op(fn)

    def removexattr(self, path, name):
        node = self.node(path)

        def fn():
            os.removexattr(self.full(path), name, follow_symlinks=False)
            del node.xattrs[name]
        self._op(fn)

    # -- durability ----------------------------------------------------------------
    def fsync(self, h, data_only=False):
        (os.fdatasync if data_only else os.fsync)(h.fd)
        self._synced(set(self.paths_of(h.node)))

    def fsync_path(self, path, data_only=False):
        fd = os.open(self.full(path), os.O_RDONLY)
        try:
            (os.fdatasync if data_only else os.fsync)(fd)
        finally:
            os.close(fd)
        self._synced({path} | set(self.paths_of(self.node(path))))

    def _synced(self, targets):
        self.fsyncs += 1
        self._durable(self.fc.count(), targets)

    def sync(self):
        """sync(2): FUSE does not pass it to the daemon (only virtiofs gets
        FUSE_SYNCFS), so nothing is expected of it; counted for the notes."""
        before = self.fc.count()
        os.sync()
        self.syncs += 1
        if self.fc.count() == before:
            self.syncs_without_flush += 1


# ---------------------------------------------------------------------------
# The workloads.

def data_of(rnd, size):
    """Random bytes, some runs compressible, so extents differ in kind."""
    if size == 0:
        return b""
    if rnd.random() < 0.3:
        unit = rnd.randbytes(rnd.randint(1, 64))
        return (unit * (size // len(unit) + 1))[:size]
    return rnd.randbytes(size)


SIZES = [0, 1, 100, 2047, 2048, 2049, 4095, 4096, 4097, 8192, 65536, 65537,
         200000, 1 << 20, 1500000, 3 << 20]


def wl_files(w, rnd, quick):
    """Many small and large files, created, written and fsync'ed one by one
    (fsync, fdatasync, fsync of the directory, or none), then overwritten
    in place and some deleted."""
    for d in ("d0", "d1", "d2"):
        w.mkdir(d)
    w.fsync_path(".")
    n = 12 if quick else 32
    sizes = list(SIZES)
    rnd.shuffle(sizes)
    names = []
    for i in range(n):
        path = f"d{i % 3}/f{i}"
        h = w.create(path)
        w.write(h, 0, data_of(rnd, sizes[i % len(sizes)]))
        how = i % 4
        if how == 0:
            w.fsync(h)
        elif how == 1:
            w.fsync(h, data_only=True)
        w.close(h)
        if how == 3:
            w.fsync_path(f"d{i % 3}")
        names.append(path)
    for path in rnd.sample(names, len(names) // 3):
        h = w.open(path)
        size = len(h.node.data)
        off = rnd.randint(0, size + 5000)
        w.write(h, off, data_of(rnd, rnd.choice((1, 500, 4096, 70000))))
        w.fsync(h, data_only=rnd.random() < 0.5)
        w.close(h)
    for path in rnd.sample(names, len(names) // 4):
        w.unlink(path)
        w.fsync_path(split(path)[0])
    # Churn: rewrite a few files whole, several rounds, one fsync a round,
    # so that the space the last commit still uses is freed and allocation
    # comes round to freed space (which must stay pinned until the commit).
    churn = ["d0/churn0", "d1/churn1", "d2/churn2"]
    for path in churn:
        h = w.create(path)
        w.write(h, 0, data_of(rnd, 1 << 20))
        w.close(h)
    w.fsync_path(".")
    for _ in range(4 if quick else 10):
        for path in churn:
            h = w.open(path)
            w.write(h, 0, data_of(rnd, 1 << 20))
            w.close(h)
        w.fsync_path(rnd.choice(churn), data_only=rnd.random() < 0.5)
    w.fsync_path(".")


def wl_rename_trunc(w, rnd, quick):
    """The sequences where btrfs's fsync log has failed: replace by rename
    and fsync the file (or only the directory), rename across directories,
    truncate down/up with fsync, inline data grown and shrunk."""
    w.mkdir("a")
    w.mkdir("b")
    w.fsync_path(".")
    rounds = 3 if quick else 7
    for r in range(rounds):
        tgt = f"a/conf{r}"
        h = w.create(tgt)
        w.write(h, 0, data_of(rnd, rnd.choice((100, 3000, 70000))))
        w.fsync(h)
        w.close(h)
        # write a new version, fsync it, rename it over, fsync the file
        tmp = tgt + ".tmp"
        h = w.create(tmp)
        w.write(h, 0, data_of(rnd, rnd.choice((10, 2048, 9000, 150000))))
        w.fsync(h)
        w.close(h)
        w.rename(tmp, tgt)
        w.fsync_path(tgt)
        # a new version never fsync'ed itself, renamed over, directory fsync
        h = w.create(tmp)
        w.write(h, 0, data_of(rnd, rnd.choice((500, 5000, 40000))))
        w.close(h)
        w.rename(tmp, tgt)
        w.fsync_path("a")
        # rename across directories, fsync of the file at its new name
        moved = f"b/moved{r}"
        w.rename(tgt, moved)
        w.fsync_path(moved)
        # rename, then change the file and fsync it, the old name gone
        h = w.open(moved)
        w.write(h, 100, data_of(rnd, 3000))
        w.rename(moved, moved + ".v2")
        w.fsync(h)
        w.close(h)
        # truncate down, fsync; truncate up, fsync; ...
        p = f"b/t{r}"
        h = w.create(p)
        w.write(h, 0, data_of(rnd, 300000 + 777 * r))
        w.fsync(h)
        w.truncate(h, 5000 + r)
        w.fsync(h)
        w.truncate(h, 200000 + r)
        w.fsync(h)
        w.write(h, 100000, data_of(rnd, 10000))
        w.truncate(h, 4096)
        w.fsync(h, data_only=True)
        w.truncate(h, 0)
        w.write(h, 0, data_of(rnd, 100))
        w.fsync(h)
        w.truncate(h, 10000)
        w.fsync(h)
        w.write(h, 9000, data_of(rnd, 3000))
        w.truncate(h, 9500)
        w.fsync(h, data_only=True)
        w.close(h)
        # truncate after rename, fsync the new name only
        w.rename(p, p + ".r")
        h = w.open(p + ".r")
        w.truncate(h, 1234)
        w.fsync(h)
        w.close(h)
        # a directory with files renamed into the other one, parent fsync'ed
        d = f"a/dir{r}"
        w.mkdir(d)
        for k in range(3):
            h = w.create(f"{d}/x{k}")
            w.write(h, 0, data_of(rnd, rnd.choice((50, 5000))))
            w.close(h)
        w.rename(d, f"b/dir{r}")
        w.fsync_path("b")
        # rename over a file with hard links: the other name keeps it
        h = w.create(f"a/keep{r}")
        w.write(h, 0, data_of(rnd, 6000))
        w.close(h)
        w.link(f"a/keep{r}", f"b/keep{r}.link")
        h = w.create(f"a/new{r}")
        w.write(h, 0, data_of(rnd, 2500))
        w.close(h)
        w.rename(f"a/new{r}", f"a/keep{r}")
        w.fsync_path(f"b/keep{r}.link")
    w.fsync_path(".")


def wl_mixed(w, rnd, quick):
    """Random mix: nested mkdir, hard links, xattrs, unlink, overwrites in
    place, appends with fdatasync, renames, rmdir, sync(2); an fsync of a
    random file or directory every few operations."""
    w.mkdir("m")
    w.fsync_path(".")
    dirs = ["m"]
    files = []
    nops = 60 if quick else 200
    seq = 0
    for _ in range(nops):
        seq += 1
        op = rnd.choice(("mkdir", "create", "create", "overwrite", "append", "append", "link",
                         "unlink", "xattr", "xattr", "rmxattr", "rename", "rmdir", "truncate"))
        if op == "mkdir" or (op == "create" and len(dirs) < 2):
            p = f"{rnd.choice(dirs)}/d{seq}"
            w.mkdir(p)
            dirs.append(p)
        elif op == "create" or not files:
            p = f"{rnd.choice(dirs)}/f{seq}"
            h = w.create(p)
            w.write(h, 0, data_of(rnd, rnd.choice(SIZES[:13])))
            w.close(h)
            files.append(p)
        elif op == "overwrite":
            p = rnd.choice(files)
            h = w.open(p)
            size = len(h.node.data)
            w.write(h, rnd.randint(0, size), data_of(rnd, rnd.choice((1, 100, 4096, 20000))))
            if rnd.random() < 0.5:
                w.fsync(h)
            w.close(h)
        elif op == "append":
            p = rnd.choice(files)
            h = w.open(p, append=True)
            for _k in range(rnd.randint(1, 3)):
                w.write(h, 0, data_of(rnd, rnd.choice((10, 300, 5000))))
                w.fsync(h, data_only=True)
            w.close(h)
        elif op == "link":
            p = rnd.choice(files)
            q = f"{rnd.choice(dirs)}/l{seq}"
            w.link(p, q)
            files.append(q)
        elif op == "unlink":
            p = rnd.choice(files)
            w.unlink(p)
            files.remove(p)
        elif op == "xattr":
            p = rnd.choice(files + dirs)
            node = w.node(p)
            name = f"user.k{rnd.randint(0, 3)}"
            flags = os.XATTR_REPLACE if name in node.xattrs else os.XATTR_CREATE
            w.setxattr(p, name, rnd.randbytes(rnd.choice((0, 5, 200, 2000))), flags)
        elif op == "rmxattr":
            p = rnd.choice(files + dirs)
            node = w.node(p)
            if node.xattrs:
                w.removexattr(p, rnd.choice(sorted(node.xattrs)))
        elif op == "rename":
            p = rnd.choice(files)
            q = f"{rnd.choice(dirs)}/r{seq}"
            if rnd.random() < 0.4 and len(files) > 1:
                q = rnd.choice([f for f in files if f != p])
            if w.exists(q) and w.node(p) is w.node(q):
                continue  # hard links of one inode: rename does nothing
            w.rename(p, q)
            files.remove(p)
            if q not in files:
                files.append(q)
        elif op == "rmdir":
            empty = [d for d in dirs[1:] if not w.node(d).children]
            if empty:
                d = rnd.choice(empty)
                w.rmdir(d)
                dirs.remove(d)
        elif op == "truncate":
            p = rnd.choice(files)
            h = w.open(p)
            w.truncate(h, rnd.randint(0, len(h.node.data) + 10000))
            w.close(h)
        r = rnd.random()
        if r < 0.15 and files:
            w.fsync_path(rnd.choice(files), data_only=rnd.random() < 0.3)
        elif r < 0.22:
            w.fsync_path(rnd.choice(dirs))
        elif r < 0.25:
            w.sync()
    w.fsync_path(".")


def wl_orphans(w, rnd, quick):
    """Files unlinked while open (orphans: nlink 0, kept until their last
    close), written and fsync'ed through the descriptor after the unlink,
    while other files are fsync'ed (commits with orphans held) and held
    orphans are closed at random points (freed).  No path shows them, so
    the journal has nothing of theirs; what the crash images must show is
    btrfs check's view: every nlink-0 inode a commit holds has its
    ORPHAN_ITEM ("no orphan item" otherwise), every freed one is gone."""
    w.mkdir("o")
    w.fsync_path(".")
    held = []
    for i in range(6 if quick else 16):
        path = f"o/v{i}"
        h = w.create(path)
        w.write(h, 0, data_of(rnd, rnd.choice((100, 4096, 70000, 300000))))
        w.fsync(h)
        w.unlink(path)
        if rnd.random() < 0.5:
            w.fsync_path("o")
        w.write(h, rnd.randint(0, 5000), data_of(rnd, rnd.choice((1, 4096, 20000))))
        w.fsync(h, data_only=rnd.random() < 0.5)
        held.append(h)
        k = w.create(f"o/k{i}")
        w.write(k, 0, data_of(rnd, rnd.choice((10, 5000))))
        w.fsync(k)
        w.close(k)
        while held and rnd.random() < 0.4:
            w.close(held.pop(rnd.randrange(len(held))))
            w.fsync_path("o")
    for h in held:
        w.close(h)
    w.fsync_path(".")


WORKLOADS = {"files": wl_files, "rename-trunc": wl_rename_trunc, "mixed": wl_mixed,
             "orphans": wl_orphans}


def cmd_run(a):
    rnd = random.Random(a.seed)
    with open(a.journal, "w") as j:
        j.write(f"# crash_workload {a.workload} seed {a.seed}\n")
        w = Workload(a.root, a.log, j, rnd)
        WORKLOADS[a.workload](w, rnd, a.quick)
        j.write(f"# ops {w.ops} fsyncs {w.fsyncs} flushes {w.fc.count()}\n")
    print(f"{a.workload}: {w.ops} operations, {w.fsyncs} fsyncs, {w.fc.count()} flushes"
          + (f", sync(2) {w.syncs} times ({w.syncs_without_flush} without a flush)"
             if w.syncs else ""))


def load_journal(path):
    events = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            kind, count, p, desc = line.rstrip("\n").split("\t")
            events.setdefault(p, []).append((kind, int(count), desc))
    return events


def cmd_check(a):
    x = float(a.at)
    bad = 0
    events = load_journal(a.journal)
    for p in sorted(events):
        allowed = {ABSENT}
        durable = None
        for kind, c, desc in events[p]:
            if kind == "op":
                if c < x:
                    allowed.add(desc)
            elif c <= x:
                allowed = {desc}
                durable = (kind, c, desc)
        got = actual_desc(a.root, p)
        if got in allowed:
            continue
        bad += 1
        if bad <= 20:
            what = "fsync'ed" if durable and durable[0] == "sync" else "committed"
            since = f"{what} at flush {durable[1]} as {durable[2]}" if durable else "never durable"
            print(f"  {p}: shows {got}; {since}; may show {sorted(allowed)}")
    if bad:
        print(f"  {bad} of {len(events)} paths differ from every state allowed at {a.at}")
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    r.add_argument("--root", required=True)
    r.add_argument("--log", required=True)
    r.add_argument("--journal", required=True)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--quick", action="store_true")
    c = sub.add_parser("check")
    c.add_argument("--journal", required=True)
    c.add_argument("--root", required=True)
    c.add_argument("--at", required=True)
    f = sub.add_parser("flushes")
    f.add_argument("log")
    a = ap.parse_args()
    if a.cmd == "run":
        cmd_run(a)
        return 0
    if a.cmd == "check":
        return cmd_check(a)
    print(FlushCounter(a.log).count())
    return 0


if __name__ == "__main__":
    sys.exit(main())
