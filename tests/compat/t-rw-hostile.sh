#!/bin/bash
# t-rw-hostile: the write paths on an image whose metadata lies, though
# every block's checksum is right (a buggy or hostile writer made it).
#
#   (a) an inode whose data extents outnumber its nbytes (btrfs check:
#       "nbytes wrong"): a file of 40 separate 4 KiB extents is given
#       nbytes 4096 in every copy of its leaf, the checksum recomputed, and
#       btrfs check must then complain.  Removing the file through the
#       read-write mount frees the inode with all 40 of its data
#       references and a warning that names it - not an aborted
#       transaction (ubtrfs takes the delete-with-items path for nbytes up
#       to 32 sectors and must not trust the count): a file is created
#       after it, the daemon exits 0, btrfs check is clean again (no item
#       of the inode, no reference to its extents) and the kernel reads
#       back the file made before and the one made after.
#   (b) a leaf whose last key runs past the key its parent gives the next
#       leaf (the tree is out of order; each block alone is fine, so the
#       block checker lets it through): in a kernel-made image (4 KiB
#       nodes, 2000 files of 6000 bytes) a leaf that ends with file X's
#       INODE_ITEM and INODE_REF while the next leaf starts with X's
#       EXTENT_DATA gets that INODE_REF's key type changed to 110, a type
#       no reader knows (so the block checker accepts it) and above
#       EXTENT_DATA's 108 (every copy, checksum recomputed).  Seen from X's
#       leaf, X then looks like a file without data; a search finds its
#       extent in the next leaf.  An
#       overwrite of X's first 4 KiB through the read-write mount must take
#       the searching path (the writer's shortcut for files without data
#       checks the leaf against the separator): the data reads back, the
#       daemon exits 0 without an abort, and `ubtrfs cat` of the unmounted
#       image shows the new bytes.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_init_block_patching

# (a) nbytes below the data extents
img=$(oracle_image a.img 512M)
oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
mnt=$T/a.mnt
ro_fuse_up "$mnt" "$T/a1.log" rw "$img" || { ro_show "$T/a1.log"; oracle_fail "(a) rw mount did not come up"; }
"$ORACLE_PYTHON" - "$mnt" >"$T/a.ino" <<'PY' || oracle_fail "(a) writing the files failed"
import os, sys
m = sys.argv[1]
fd = os.open(os.path.join(m, "victim"), os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(40):
    # 4 KiB at every other 4 KiB: 40 extents that cannot merge
    if os.pwrite(fd, bytes([i + 1]) * 4096, i * 8192) != 4096:
        sys.exit("short write")
os.fsync(fd)
print(os.fstat(fd).st_ino)
os.close(fd)
with open(os.path.join(m, "before"), "wb") as f:
    f.write(b"made before the damage\n" * 500)
    os.fsync(f.fileno())
PY
ro_fuse_down "(a) fill" "$mnt" "$T/a1.log"
oracle_check_clean "(a) filled" "$img" || oracle_fail "(a) btrfs check after filling is not clean"
ino=$(cat "$T/a.ino")
btrfs inspect-internal dump-tree -t 5 "$img" >"$T/a.fs"
btrfs inspect-internal dump-tree -t 2 "$img" >"$T/a.extent"
n=$(grep -cE "key \($ino EXTENT_DATA [0-9]+\)" "$T/a.fs" || true)
((n >= 40)) || oracle_fail "(a) the victim has $n EXTENT_DATA items, the test needs 40"
# The same pattern that must find none after the removal finds them now.
n=$(grep -cE "data backref root (5|FS_TREE) objectid $ino " "$T/a.extent" || true)
((n >= 40)) || oracle_fail "(a) $n data back references from inode $ino in the dump, not 40"
# The leaf that holds the victim's INODE_ITEM, and where in it.
leaf='' itemoff=''
read -r leaf itemoff < <(awk -v k="key ($ino INODE_ITEM 0)" '
	/^leaf [0-9]+ items/ { leaf = $2 }
	index($0, k) { for (i = 1; i <= NF; i++) if ($i == "itemoff") { print leaf, $(i + 1); exit } }' "$T/a.fs") || true
[[ -n ${leaf:-} && -n ${itemoff:-} ]] || oracle_fail "(a) cannot find inode $ino's INODE_ITEM in the dump"
oracle_block_copies "$img" "$leaf"
phys=("${ORACLE_COPIES[@]}")
nodesize=$(btrfs inspect-internal dump-super "$img" | awk '$1 == "nodesize" { print $2 }')
oracle_log "(a) inode $ino: INODE_ITEM in leaf $leaf at itemoff $itemoff; ${#phys[@]} copies at ${phys[*]}"
for p in "${phys[@]}"; do
	"$ORACLE_PYTHON" - "$img" "$p" "$itemoff" "$nodesize" "$UBTRFS_SOURCE_ROOT/tests/tools" <<'PY' ||
import struct, sys
sys.path.insert(0, sys.argv[5])
from crc32c import seal
img, phys, itemoff, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(img, "r+b") as f:
    f.seek(phys)
    blk = bytearray(f.read(ns))
    # header 101 bytes; inode item: generation, transid, size, nbytes
    at = 101 + itemoff + 24
    old = struct.unpack_from("<Q", blk, at)[0]
    if old < 40 * 4096:
        sys.exit("nbytes is %d before the damage, not the 40 extents' bytes" % old)
    struct.pack_into("<Q", blk, at, 4096)
    seal(blk)
    f.seek(phys)
    f.write(blk)
PY
		oracle_fail "(a) patching the copy at $p failed"
done
if btrfs check --readonly "$img" >"$T/a.check" 2>&1; then
	ro_show "$T/a.check"
	oracle_fail "(a) btrfs check finds nothing wrong after the damage: it did not take"
fi
grep -q "nbytes" "$T/a.check" || { ro_show "$T/a.check" 40; oracle_fail "(a) btrfs check does not report the nbytes damage"; }

ro_fuse_up "$mnt" "$T/a2.log" rw "$img" || { ro_show "$T/a2.log"; oracle_fail "(a) rw mount of the damaged image did not come up"; }
"$ORACLE_PYTHON" - "$mnt" >"$T/a.out" 2>&1 <<'PY' || ro_fail "(a) removing the damaged file misbehaved: $(cat "$T/a.out")"
import os, sys
m = sys.argv[1]
os.unlink(os.path.join(m, "victim"))
with open(os.path.join(m, "after"), "wb") as f:
    f.write(b"made after the removal\n" * 500)
    os.fsync(f.fileno())
if os.path.exists(os.path.join(m, "victim")):
    sys.exit("the victim is still there")
PY
ro_fuse_down "(a) removal" "$mnt" "$T/a2.log"
grep -q "inode $ino: .*data extents under nbytes" "$T/a2.log" ||
	{ ro_show "$T/a2.log"; ro_fail "(a) no warning naming inode $ino's wrong nbytes"; }
# ubt_trans_abort says "aborted", the paths that abort from inside an
# operation say "aborting" (and the former is then not printed).
if grep -qE "abort(ed|ing)" "$T/a2.log"; then
	ro_show "$T/a2.log"
	ro_fail "(a) the removal aborted a transaction"
fi
btrfs inspect-internal dump-tree -t 5 "$img" >"$T/a2.fs"
btrfs inspect-internal dump-tree -t 2 "$img" >"$T/a2.extent"
grep -qE "key \($ino (INODE_ITEM|INODE_REF|EXTENT_DATA)" "$T/a2.fs" &&
	ro_fail "(a) inode $ino still has items after its removal"
grep -qE "data backref root (5|FS_TREE) objectid $ino " "$T/a2.extent" &&
	ro_fail "(a) an extent still has a reference from inode $ino"
oracle_check_clean "(a) after the removal" "$img" || ro_fail "(a) btrfs check after the removal is not clean"
oracle_kmount -o ro "$T/a.k" "$img" || ro_fail "(a) the kernel does not mount the image"
if oracle_is_mounted "$T/a.k"; then
	"$ORACLE_PYTHON" - "$T/a.k" <<'PY' || ro_fail "(a) the kernel reads back something else"
import os, sys
k = sys.argv[1]
if open(os.path.join(k, "before"), "rb").read() != b"made before the damage\n" * 500:
    sys.exit("before differs")
if open(os.path.join(k, "after"), "rb").read() != b"made after the removal\n" * 500:
    sys.exit("after differs")
if os.path.exists(os.path.join(k, "victim")):
    sys.exit("victim is still there")
PY
	oracle_kumount "$T/a.k"
fi
# (b) a leaf past its separator
img=$(oracle_image b.img 512M)
mkfs.btrfs -q -f -n 4096 "$img" >/dev/null 2>&1 || oracle_fail "(b) mkfs.btrfs failed"
oracle_kmount "$T/b.k" "$img" || oracle_fail "(b) the kernel does not mount the new image"
"$ORACLE_PYTHON" - "$T/b.k" <<'PY' || oracle_fail "(b) writing the files failed"
import os, sys
for i in range(2000):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(bytes([i % 251 + 1]) * 6000)
PY
oracle_kumount "$T/b.k"
btrfs inspect-internal dump-tree -t 5 "$img" >"$T/b.fs"
# A leaf ending (X INODE_ITEM) (X INODE_REF) whose next leaf starts with
# (X EXTENT_DATA 0): its bytenr, item count and X's name.
read -r bleaf bnr bname < <("$ORACLE_PYTHON" - "$T/b.fs" <<'PY'
import re, sys
leaves, cur = [], None
for line in open(sys.argv[1]):
    m = re.match(r"leaf (\d+) items (\d+)", line)
    if m:
        cur = {"at": int(m.group(1)), "n": int(m.group(2)), "items": []}
        leaves.append(cur)
        continue
    m = re.match(r"\s+item \d+ key \((\d+) (\S+) (\d+)\)", line)
    if m and cur is not None:
        cur["items"].append([int(m.group(1)), m.group(2), int(m.group(3)), None])
        continue
    m = re.search(r"\bname: (\S+)", line)
    if m and cur and cur["items"] and cur["items"][-1][1] == "INODE_REF":
        cur["items"][-1][3] = m.group(1)
for a, b in zip(leaves, leaves[1:]):
    it, nx = a["items"], b["items"]
    if (len(it) == a["n"] >= 2 and nx and it[-2][1] == "INODE_ITEM" and it[-1][1] == "INODE_REF"
            and nx[0][1] == "EXTENT_DATA" and nx[0][2] == 0
            and it[-2][0] == it[-1][0] == nx[0][0] and it[-1][3]):
        print(a["at"], a["n"], it[-1][3])
        break
PY
) || true
[[ -n ${bleaf:-} ]] || oracle_fail "(b) no leaf ends with a file's INODE_REF before its EXTENT_DATA"
oracle_block_copies "$img" "$bleaf"
phys=("${ORACLE_COPIES[@]}")
oracle_log "(b) $bname: INODE_REF last of leaf $bleaf ($bnr items), its EXTENT_DATA first of the next; ${#phys[@]} copies"
for p in "${phys[@]}"; do
	"$ORACLE_PYTHON" - "$img" "$p" "$bnr" "$UBTRFS_SOURCE_ROOT/tests/tools" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[4])
from crc32c import seal
img, phys, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(img, "r+b") as f:
    f.seek(phys)
    blk = bytearray(f.read(4096))
    # item headers follow the 101-byte header, 25 bytes each; the key is
    # objectid (8), type (1), offset (8); INODE_REF is type 12
    at = 101 + (n - 1) * 25
    if blk[at + 8] != 12:
        sys.exit("the last item is not an INODE_REF (type %d)" % blk[at + 8])
    blk[at + 8] = 110
    seal(blk)
    f.seek(phys)
    f.write(blk)
PY
		oracle_fail "(b) patching the copy at $p failed"
done
i=$((10#${bname#f}))
mnt=$T/b.mnt
ro_fuse_up "$mnt" "$T/b.log" rw "$img" || { ro_show "$T/b.log"; oracle_fail "(b) rw mount of the damaged image did not come up"; }
"$ORACLE_PYTHON" - "$mnt/$bname" "$i" >"$T/b.out" 2>&1 <<'PY' || ro_fail "(b) overwriting $bname misbehaved: $(cat "$T/b.out")"
import os, sys
p, i = sys.argv[1], int(sys.argv[2])
want = b"Z" * 4096 + bytes([i % 251 + 1]) * (6000 - 4096)
fd = os.open(p, os.O_RDWR)
if os.pread(fd, 6000, 0) != bytes([i % 251 + 1]) * 6000:
    sys.exit("the file does not read back as written before the damage")
os.pwrite(fd, b"Z" * 4096, 0)
os.fsync(fd)
if os.pread(fd, 7000, 0) != want:
    sys.exit("the overwrite does not read back")
os.close(fd)
PY
ro_fuse_down "(b)" "$mnt" "$T/b.log"
if grep -qE "abort(ed|ing)" "$T/b.log"; then
	ro_show "$T/b.log"
	ro_fail "(b) the overwrite aborted a transaction"
fi
"$UBTRFS" cat "$img" "/$bname" >"$T/b.cat" 2>"$T/b.cat.err" || ro_fail "(b) ubtrfs cat /$bname failed: $(head -n 3 "$T/b.cat.err")"
"$ORACLE_PYTHON" - "$T/b.cat" "$i" <<'PY' || ro_fail "(b) the committed file is not the overwritten one"
import sys
i = int(sys.argv[2])
if open(sys.argv[1], "rb").read() != b"Z" * 4096 + bytes([i % 251 + 1]) * (6000 - 4096):
    sys.exit(1)
PY
RO_CELLS=2
ro_finish
