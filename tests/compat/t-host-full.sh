#!/bin/bash
# t-host-full: the filesystem that holds the image fills up under a
# read-write FUSE mount.
#
# The image is a sparse 2 GiB file on an 80 MiB tmpfs (mkfs.btrfs
# defaults), then on a 96 MiB ext4 on a loop device, where the daemon
# writes the image directly (O_DIRECT; tmpfs has no page cache of its own
# to bypass): everything below holds on both.  Through `ubtrfs mount -o rw`: a file `keep` is written and
# fsync'ed, then 4 MiB files, each fsync'ed, until an operation fails (the
# host's ENOSPC reaches the daemon when it writes the image; writes
# gathered in memory meet it at the next write-out or commit).  Then:
#   - the failure is an error returned to the caller (no crash, no hang),
#     and writes fail from then on (the transaction aborted: read-only);
#   - `keep` still reads back through the mount;
#   - the daemon exits 0 after the unmount without a sanitizer report,
#     names the image write that failed (file and offset) and says
#     it went read-only;
#   - a copy of the image on a roomier filesystem is clean in btrfs check,
#     and the kernel reads `keep` and every file whose fsync succeeded,
#     byte for byte: the last commit is intact.
#
# Needs root, tmpfs, ext4, loop devices, kernel btrfs, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

# files.py fill MNT LIST: keep, then f0, f1, ... (each fsync'ed) until an
# operation fails; LIST gets the name of every file whose fsync returned.
# Then a write must fail too, and keep must read back.  verify DIR LIST:
# every listed file holds its bytes.
cat >"$T/files.py" <<'PY'
import hashlib, os, sys

def content(name, size=4 << 20):
    seed = hashlib.sha256(name.encode()).digest()
    block = b"".join(hashlib.sha256(seed + bytes([i])).digest() for i in range(128))
    return (block * (size // len(block) + 1))[:size]

def write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, len(data), 1 << 20):
            os.write(fd, data[off:off + (1 << 20)])
        os.fsync(fd)
    finally:
        os.close(fd)

mode, mnt, listing = sys.argv[1:4]
if mode == "fill":
    keep = content("keep", 1 << 20)
    write(os.path.join(mnt, "keep"), keep)
    done = ["keep"]
    err = None
    for i in range(100):
        name = "f%d" % i
        try:
            write(os.path.join(mnt, name), content(name))
        except OSError as e:
            err = e
            break
        done.append(name)
    open(listing, "w").write("\n".join(done) + "\n")
    if err is None:
        sys.exit("100 files of 4 MiB fit on an 80 MiB filesystem")
    print("%d files written; then %s" % (len(done), os.strerror(err.errno)))
    try:
        write(os.path.join(mnt, "after"), b"x" * 5000)
        sys.exit("a write after the failure succeeded")
    except OSError as e:
        print("a write after it: %s" % os.strerror(e.errno))
    with open(os.path.join(mnt, "keep"), "rb") as f:
        if f.read() != keep:
            sys.exit("keep does not read back through the mount")
else:
    n = 0
    for name in open(listing).read().split():
        with open(os.path.join(mnt, name), "rb") as f:
            if f.read() != content(name, 1 << 20 if name == "keep" else 4 << 20):
                sys.exit("%s does not hold what was written" % name)
        n += 1
    print("%d files verified" % n)
PY

# fill_host HOST SMALL: the whole check, the image on the filesystem at SMALL.
fill_host() {
	local host=$1 small=$2 img mnt log
	img=$small/img
	truncate -s 2G "$img"
	oracle_mkfs -- "$img"
	mnt=$T/mnt-$host
	log=$T/daemon-$host.log
	ro_fuse_up "$mnt" "$log" rw "$img" || { ro_show "$log"; oracle_fail "rw mount did not come up"; }
	if ! timeout 300 "$ORACLE_PYTHON" "$T/files.py" fill "$mnt" "$T/list-$host" >"$T/fill-$host.out" 2>&1; then
		ro_show "$T/fill-$host.out"
		ro_show "$log"
		ro_fail "$host: filling the host filesystem"
	fi
	oracle_log "$host: $(tr '\n' ' ' <"$T/fill-$host.out")"
	# Unmounted, the daemon exits 0 by itself (ro_fuse_down), the abort
	# reported.
	ro_fuse_down "after the host filled" "$mnt" "$log"
	grep -qE 'aborted|read-only' "$log" || { ro_show "$log"; ro_fail "$host: the daemon did not say it went read-only"; }
	grep -qE 'writing [0-9]+ (gathered )?bytes at offset [0-9]+ failed' "$log" ||
		{ ro_show "$log"; ro_fail "$host: the daemon did not name the image write that failed"; }
	oracle_log "$host: the daemon said: $(grep -E "error" "$log" | head -n 3 | tr "\n" " ")"

	cp --sparse=always -- "$img" "$T/copy-$host.img"
	oracle_check_clean "copy of the image" "$T/copy-$host.img" || ro_fail "$host: btrfs check of the image is not clean"
	if oracle_kmount -o ro "$T/k-$host" "$T/copy-$host.img"; then
		"$ORACLE_PYTHON" "$T/files.py" verify "$T/k-$host" "$T/list-$host" >"$T/verify-$host.out" 2>&1 ||
			{ ro_show "$T/verify-$host.out"; ro_fail "$host: the kernel does not show what was fsync'ed"; }
		oracle_log "$host: kernel: $(cat "$T/verify-$host.out")"
		oracle_kumount "$T/k-$host"
	else
		ro_fail "$host: the kernel does not mount the image"
	fi
}

oracle_tmpfs "$T/small-tmpfs" 80M
fill_host tmpfs "$T/small-tmpfs"
# ext4 (O_DIRECT, a page cache of its own): the daemon's direct writes
# meet the full disk there (io/bdev.c; from the first write-out, not only
# after 16 MiB as by default).
oracle_ext4 "$T/small-ext4" "$T/ext4.img" 96M
UBTRFS_DIRECT_WRITES=1 fill_host ext4 "$T/small-ext4"
if ! grep -q 'direct write of [0-9]* bytes at offset [0-9]* failed' "$T/daemon-ext4.log"; then
	oracle_log "ext4: the full disk was met outside a direct write (io_submit refused it, or a page-cache write)"
fi

((RO_FAILS == 0)) || oracle_fail "$RO_FAILS check(s) failed"
oracle_log "passed"
