#!/bin/bash
# t-file-ops: fallocate, SEEK_DATA/SEEK_HOLE, copy_file_range (reflink) and
# renameat2 flags through the read-write FUSE mount, against ext4.
#
# tests/tools/fileops.py runs one seeded sequence of those operations
# (with writes and truncates between them) and prints every result and the
# SHA-1 of every file after each step; it also checks SEEK_DATA/SEEK_HOLE
# against the bytes (every non-zero byte inside a data region).  ext4 on a
# loop device is the reference: it has every fallocate mode (tmpfs has no
# ZERO_RANGE).  Cells: images by `ubtrfs mkfs` with and without NO_HOLES
# (explicit hole items) and by mkfs.btrfs.  Each cell:
#   (a) the sequence on the rw FUSE mount prints exactly what it printed on
#       ext4, for two seeds;
#   (b) a 16 MiB copy_file_range is a reflink: statfs shows under 1 MiB
#       more used, and later the kernel's `btrfs filesystem du` shows the
#       copy's extents shared, 0 exclusive;
#   (b2) bytes written through a shared writable mmap read back;
#   (c) unmount (commit), btrfs check --readonly --check-data-csum clean;
#   (d) the kernel mounts the image and every file's SHA-1 is what the FUSE
#       mount showed.
#
# Needs root, loop devices, kernel btrfs and ext4, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd mkfs.ext4 sha1sum
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS
TOOL=$UBTRFS_SOURCE_ROOT/tests/tools/fileops.py
SEEDS=(11 12)
ROUNDS=200
[[ ${UBTRFS_TEST_QUICK:-} == 1 ]] && ROUNDS=80

# The reference runs once per seed.
ext4img=$(oracle_image ref.ext4 1G)
mkfs.ext4 -q -F "$ext4img" || oracle_fail "mkfs.ext4 failed"
mkdir -p "$T/ref"
mount -o loop "$ext4img" "$T/ref" || oracle_fail "cannot mount the ext4 reference"
oracle_register_mount "$T/ref"
for seed in "${SEEDS[@]}"; do
	mkdir "$T/ref/$seed"
	"$ORACLE_PYTHON" "$TOOL" "$T/ref/$seed" "$seed" --rounds "$ROUNDS" >"$T/ref.$seed.out" ||
		oracle_fail "fileops.py failed on ext4 (seed $seed)"
	grep -q SEEKBAD "$T/ref.$seed.out" && oracle_fail "ext4 fails the SEEK_DATA check (seed $seed)"
done
umount "$T/ref"

cell() {
	local name=$1 tool=$2 img mnt log rc=0 before after
	shift 2
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image "$name.img" 1G)
	if [[ $tool == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$@" "$img" || oracle_fail "$name: ubtrfs mkfs failed"
	else
		oracle_mkfs "$@" -- "$img"
	fi
	mnt=$T/$name.rw
	log=$T/$name.rw.log
	if ! ro_fuse_up "$mnt" "$log" rw "$img"; then
		ro_fail "$name: ubtrfs mount -o rw did not come up"
		ro_show "$log"
		return 0
	fi
	for seed in "${SEEDS[@]}"; do
		mkdir "$mnt/$seed"
		if ! "$ORACLE_PYTHON" "$TOOL" "$mnt/$seed" "$seed" --rounds "$ROUNDS" \
			>"$T/$name.$seed.out" 2>"$T/$name.$seed.err"; then
			ro_fail "$name: fileops.py failed on the FUSE mount (seed $seed)"
			ro_show "$T/$name.$seed.err"
		fi
		if ! diff "$T/ref.$seed.out" "$T/$name.$seed.out" >"$T/$name.$seed.diff"; then
			ro_fail "$name: seed $seed differs from ext4 (< ext4, > ubtrfs)"
			ro_show "$T/$name.$seed.diff" 20
		fi
	done
	# A large aligned copy is a reflink.
	# fsync commits the whole transaction (sync -f does not reach a FUSE
	# daemon), so that free space is measured on settled states.
	head -c $((16 << 20)) /dev/urandom >"$mnt/big"
	"$ORACLE_PYTHON" -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$mnt/big"
	before=$(stat -f -c '%b %f' "$mnt" | awk '{print $1 - $2}')
	"$ORACLE_PYTHON" - "$mnt/big" "$mnt/copy" <<'PY' || ro_fail "$name: copy_file_range failed"
import os, sys
a = os.open(sys.argv[1], os.O_RDONLY)
b = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
n = os.fstat(a).st_size
while n:
    r = os.copy_file_range(a, b, n)
    if r <= 0:
        sys.exit("copy_file_range returned %d" % r)
    n -= r
PY
	"$ORACLE_PYTHON" -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$mnt/copy"
	after=$(stat -f -c '%b %f %S' "$mnt" | awk '{print ($1 - $2) * $3}')
	before=$((before * $(stat -f -c '%S' "$mnt")))
	# A copy would take 16 MiB; a reflink takes only the metadata the
	# commit rewrites (1.5-2 MiB of tree blocks here).
	((after - before < 4194304)) ||
		ro_fail "$name: a 16 MiB copy_file_range used $((after - before)) bytes (no reflink)"
	cmp -s "$mnt/big" "$mnt/copy" || ro_fail "$name: the reflinked copy differs"
	# A shared writable mapping reaches the file (and, below, the disk).
	"$ORACLE_PYTHON" - "$mnt/mapped" <<'PY' || ro_fail "$name: writing through a shared mapping failed"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 3 * 4096 + 100)
m = mmap.mmap(fd, 3 * 4096 + 100, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:5] = b"hello"
m[8192:8197] = b"world"
m[-3:] = b"end"
m.flush()
m.close()
os.close(fd)
with open(sys.argv[1], "rb") as f:
    d = f.read()
if (d[:5], d[8192:8197], d[-3:], len(d)) != (b"hello", b"world", b"end", 3 * 4096 + 100):
    sys.exit("the mapped writes do not read back")
PY
	(cd "$mnt" && find . -type f -print0 | sort -z | xargs -0 sha1sum) >"$T/$name.fuse.sums"
	ro_fuse_down "$name rw" "$mnt" "$log"

	local ck
	ck=$(btrfs check --readonly --check-data-csum "$img" 2>&1) || rc=$?
	if ((rc)); then
		ro_fail "$name: btrfs check exited $rc"
		printf '%s\n' "$ck" | ro_show /dev/stdin 30
	fi
	oracle_kmount -o ro "$T/$name.k" "$img" ||
		{ ro_fail "$name: the kernel does not mount the image"; return 0; }
	(cd "$T/$name.k" && find . -type f -print0 | sort -z | xargs -0 sha1sum) >"$T/$name.k.sums"
	diff "$T/$name.fuse.sums" "$T/$name.k.sums" >"$T/$name.sums.diff" || {
		ro_fail "$name: the kernel reads other bytes than the FUSE mount showed"
		ro_show "$T/$name.sums.diff" 20
	}
	local excl
	excl=$(btrfs filesystem du --raw "$T/$name.k/copy" | awk 'NR == 2 {print $2}')
	[[ $excl == 0 ]] || ro_fail "$name: the kernel sees $excl exclusive bytes in the reflinked copy"
	oracle_kumount "$T/$name.k"
	oracle_log "$name: done ($tool $*)"
}

cell c1 ubtrfs
cell c2 ubtrfs -O ^no-holes
cell c3 mkfs.btrfs

oracle_log "total $((SECONDS - T0)) s"
ro_finish
