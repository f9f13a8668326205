#!/bin/bash
# t-rw-damage: writing to a filesystem with a corrupt metadata block.
#
# A ubtrfs-made image (4 KiB nodes) gets 3000 files of 5000 bytes through
# the read-write FUSE mount, so that the csum tree spans several leaves; it
# is unmounted and checked clean.  Then every copy of the csum tree's last
# leaf - where the checksums of new data go - is damaged (one byte flipped:
# the checksum fails).  Through a new read-write mount a new file is
# written, and:
#   - the write (or the fsync after it) fails with EIO, and the daemon's
#     messages name the block;
#   - the mount has turned read-only: creating another file fails with
#     EROFS, and a file whose checksums are elsewhere still reads back;
#   - the kernel's cached names follow the last commit again (on Linux
#     6.16 or later, which the daemon can ask to look every name up again):
#     a file removed in the aborted transaction (f0005, unlinked just
#     before the failing write) is there, and the failed new file is not,
#     by name and in the directory listing;
#   - the daemon exits 0 after the unmount, without a sanitizer report;
#   - no superblock was written: the last commit stays the last (new data
#     may have gone to free space, which no commit references).
# Then the damaged copies are restored: btrfs check is clean and the
# kernel shows exactly the 3000 files, nothing of the failed operations.
#
# Needs root, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_init_block_patching

img=$(oracle_image d.img 256M)
oracle_ubtrfs mkfs -q -f -n 4096 "$img" || oracle_fail "ubtrfs mkfs failed"
mnt=$T/d.mnt
ro_fuse_up "$mnt" "$T/fill.log" rw "$img" || { ro_show "$T/fill.log"; oracle_fail "rw mount did not come up"; }
"$ORACLE_PYTHON" - "$mnt" <<'PY' || oracle_fail "writing the files failed"
import os, sys
m = sys.argv[1]
for i in range(3000):
    with open(os.path.join(m, "f%04d" % i), "wb") as f:
        f.write(b"%d" % (i % 10) * 5000)
os.fsync(os.open(m, os.O_RDONLY))
PY
ro_fuse_down "fill" "$mnt" "$T/fill.log"
oracle_check_clean "filled" "$img" || oracle_fail "btrfs check after filling is not clean"

# The csum tree's last leaf.
btrfs inspect-internal dump-tree -t 7 "$img" >"$T/csum.txt"
leaf=$(awk '/^leaf [0-9]+ items/ { leaf = $2 } END { print leaf }' "$T/csum.txt")
nleaves=$(grep -c '^leaf [0-9]* items' "$T/csum.txt" || true)
[[ -n $leaf ]] || oracle_fail "cannot find the csum tree's leaves"
((nleaves >= 2)) || oracle_fail "the csum tree has $nleaves leaf: the test needs several"
oracle_block_copies "$img" "$leaf"
phys=("${ORACLE_COPIES[@]}")
oracle_log "damaging csum-tree leaf $leaf (last of $nleaves): ${#phys[@]} copies at ${phys[*]}"
flip() {
	"$ORACLE_PYTHON" - "$img" "$1" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]) + 500)
    b = f.read(1)
    f.seek(int(sys.argv[2]) + 500)
    f.write(bytes([b[0] ^ 0xFF]))
PY
}
for p in "${phys[@]}"; do flip "$p"; done
supers() {
	local off
	for off in 65536 67108864; do
		dd if="$img" bs=4096 skip=$((off / 4096)) count=1 status=none | sha256sum | cut -d' ' -f1
	done
}
before=$(supers)

# FUSE_NOTIFY_INC_EPOCH came with Linux 6.16.
kver=$(uname -r)
kmaj=${kver%%.*}
kmin=${kver#*.}
kmin=${kmin%%[!0-9]*}
epoch=0
if ((kmaj > 6 || (kmaj == 6 && kmin >= 16))); then
	epoch=1
else
	oracle_log "Linux $kver has no FUSE_NOTIFY_INC_EPOCH: the cached-name cells are not run"
fi
# No timer commit may land between the unlink and the failing write.
ro_fuse_up "$mnt" "$T/damage.log" rw,commit=3600 "$img" || { ro_show "$T/damage.log"; oracle_fail "rw mount of the damaged image did not come up"; }
"$ORACLE_PYTHON" - "$mnt" "$epoch" >"$T/probe.out" 2>&1 <<'PY' || ro_fail "the damaged filesystem misbehaved: $(cat "$T/probe.out")"
import errno, os, sys
m = sys.argv[1]
epoch = sys.argv[2] == "1"
# Removed in the transaction that is about to fail: the kernel caches
# the name as absent (for a day).
os.unlink(os.path.join(m, "f0005"))
if os.path.exists(os.path.join(m, "f0005")):
    sys.exit("f0005 still there after its unlink")
try:
    with open(os.path.join(m, "victim"), "wb") as f:
        f.write(b"v" * 20000)
        f.flush()
        os.fsync(f.fileno())
    sys.exit("writing new data over the damaged csum leaf succeeded")
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("writing new data: %s (want EIO)" % e)
try:
    with open(os.path.join(m, "new-file"), "wb") as f:
        f.write(b"x")
    sys.exit("creating a file after the failure succeeded: the mount did not turn read-only")
except OSError as e:
    if e.errno != errno.EROFS:
        sys.exit("creating a file after the failure: %s (want EROFS)" % e)
with open(os.path.join(m, "f0003"), "rb") as f:
    if f.read() != b"3" * 5000:
        sys.exit("f0003 does not read back")
if epoch:
    names = os.listdir(m)
    if not os.path.exists(os.path.join(m, "f0005")) or "f0005" not in names:
        sys.exit("f0005, removed by the aborted transaction, is still missing "
                 "(the kernel's cached names were not dropped)")
    with open(os.path.join(m, "f0005"), "rb") as f:
        if f.read() != b"5" * 5000:
            sys.exit("f0005 does not read back after the abort")
    if os.path.exists(os.path.join(m, "victim")) or "victim" in names:
        sys.exit("victim, made by the aborted transaction, is still there")
print("EIO, then read-only; other files read back; cached names follow the last commit")
PY
ro_fuse_down "damaged" "$mnt" "$T/damage.log"
grep -q "$leaf" "$T/damage.log" || { ro_show "$T/damage.log"; ro_fail "the daemon's messages do not name block $leaf"; }
if ((epoch)); then
	grep -q "the kernel looks every cached name up again" "$T/damage.log" ||
		{ ro_show "$T/damage.log"; ro_fail "the daemon did not tell the kernel to drop its cached names"; }
else
	grep -q "the kernel cannot be told to drop its cached names" "$T/damage.log" ||
		{ ro_show "$T/damage.log"; ro_fail "the daemon's log does not say the kernel keeps its cached names"; }
fi
after=$(supers)
[[ $before == "$after" ]] || ro_fail "a superblock was written after the damage (the last commit must stay the last)"

for p in "${phys[@]}"; do flip "$p"; done
oracle_check_clean "restored" "$img" || ro_fail "btrfs check after restoring the damaged leaf is not clean"
# The kernel shows the last commit: the 3000 files, nothing of the failed
# operations.
if oracle_kmount -o ro "$T/k" "$img"; then
	"$ORACLE_PYTHON" - "$T/k" <<'PY' || ro_fail "the kernel does not show the last commit"
import os, sys
m = sys.argv[1]
names = sorted(os.listdir(m))
want = ["f%04d" % i for i in range(3000)]
if names != want:
    sys.exit("names differ: %s" % sorted(set(names) ^ set(want))[:5])
for i in range(3000):
    with open(os.path.join(m, "f%04d" % i), "rb") as f:
        if f.read() != b"%d" % (i % 10) * 5000:
            sys.exit("f%04d differs" % i)
PY
	oracle_kumount "$T/k"
else
	ro_fail "the kernel does not mount the restored image"
fi
RO_CELLS=1
ro_finish
