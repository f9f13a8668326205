#!/usr/bin/env python3
"""mktree.py - write a deterministic source-like tree as a tar stream.

Usage: mktree.py FILES [SEED] > tree.tar

The same FILES and SEED give the same archive byte for byte on any machine
(Python's Mersenne Twister is specified), so every benchmark run reads the
same tree.  Shape, modelled on a large C source tree:
  - one directory per ~14 files, nested up to 8 deep under "tree/";
  - file sizes log-normal (median ~4.4 KiB, mean ~10 KiB, capped at 1 MiB),
    so about a fifth are small enough for btrfs to store inline;
  - 1% symbolic links to a sibling file;
  - fixed owner (0:0), modes 0644/0755 and mtimes.
File contents are pseudo-random bytes: incompressible, which is irrelevant
here because no target compresses.
"""
import io
import math
import random
import sys
import tarfile

SYLLABLES = ["ar", "be", "co", "de", "fi", "ga", "hu", "io", "ka", "lo", "me",
             "nu", "or", "pa", "qu", "ri", "so", "ta", "ul", "ve", "wi", "xe",
             "yo", "ze", "net", "core", "drv", "mm", "fs", "blk", "io", "lib"]
EXTS = [".c"] * 10 + [".h"] * 6 + [".py", ".S", ".txt", ".md", ".json", ".rst",
                                   ".sh", "", ".yaml", ".in"]
MTIME = 1700000000


def word(rng, lo, hi):
    n = rng.randint(lo, hi)
    return "".join(rng.choice(SYLLABLES) for _ in range(n))


def main():
    nfiles = int(sys.argv[1])
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rng = random.Random(seed)
    ndirs = max(1, nfiles // 14)

    # dirs[i] = (path, depth); names unique within their parent.
    dirs = [("tree", 0)]
    children = {"tree": set()}
    while len(dirs) < ndirs:
        parent, depth = dirs[rng.randrange(len(dirs))]
        if depth >= 8:
            continue
        name = word(rng, 1, 4)
        if name in children[parent]:
            continue
        children[parent].add(name)
        path = parent + "/" + name
        dirs.append((path, depth + 1))
        children[path] = set()

    out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.GNU_FORMAT)

    def header(path, kind, size=0, mode=0o644):
        ti = tarfile.TarInfo(path)
        ti.type = kind
        ti.size = size
        ti.mode = mode
        ti.mtime = MTIME
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    for path, _ in dirs:
        out.addfile(header(path, tarfile.DIRTYPE, mode=0o755))

    files_in = {p: [] for p, _ in dirs}
    mu, sigma = math.log(4500), 1.25
    for _ in range(nfiles):
        parent = dirs[rng.randrange(len(dirs))][0]
        while True:
            name = word(rng, 1, 4) + rng.choice(EXTS)
            if name not in children[parent]:
                break
        children[parent].add(name)
        path = parent + "/" + name
        if files_in[parent] and rng.random() < 0.01:
            ti = header(path, tarfile.SYMTYPE, mode=0o777)
            ti.linkname = rng.choice(files_in[parent])
            out.addfile(ti)
            continue
        size = min(int(rng.lognormvariate(mu, sigma)), 1 << 20)
        mode = 0o755 if name.endswith(".sh") else 0o644
        out.addfile(header(path, tarfile.REGTYPE, size, mode), io.BytesIO(rng.randbytes(size)))
        files_in[parent].append(name)
    out.close()


if __name__ == "__main__":
    main()
