#!/usr/bin/env python3
"""mkfiles.py - create many files, as the metadata write workloads need.

Usage: mkfiles.py DIR FILES [DIRS [SIZE]]

Creates FILES new files under DIR (which must exist): with DIRS = 0 (the
default) all directly in DIR, named f00000, f00001, ...; otherwise spread
evenly over DIRS new subdirectories d000, d001, ... (made first, each as
its files start).  Each file is created with O_CREAT|O_EXCL and, when SIZE
> 0, gets SIZE bytes in one write(2) before it is closed.  Nothing is
synced: the caller measures its own sync afterwards.  The bytes are a fixed
non-zero pattern (no target compresses, so content does not matter).
"""
import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    top = sys.argv[1]
    nfiles = int(sys.argv[2])
    ndirs = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    data = bytes((i * 7 + 1) & 0xFF for i in range(size))
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    per_dir = -(-nfiles // ndirs) if ndirs else nfiles
    for i in range(nfiles):
        if ndirs:
            d = os.path.join(top, f"d{i // per_dir:03d}")
            if i % per_dir == 0:
                os.mkdir(d, 0o755)
            path = os.path.join(d, f"f{i % per_dir:05d}")
        else:
            path = os.path.join(top, f"f{i:05d}")
        fd = os.open(path, flags, 0o644)
        try:
            if size:
                n = os.write(fd, data)
                if n != size:
                    sys.exit(f"mkfiles.py: short write to {path}: {n} of {size}")
        finally:
            os.close(fd)


if __name__ == "__main__":
    main()
