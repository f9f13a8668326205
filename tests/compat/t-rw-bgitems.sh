#!/bin/bash
# t-rw-bgitems: a read-write open finds every chunk's block group item, and
# refuses an image where one is missing, has the wrong length, or an item
# has no chunk.
#
# A read-write open looks each block group item up by its chunk (one search
# per chunk, so the open does not read the whole extent tree).  An image
# made by mkfs.btrfs and filled by the kernel gets its data block group's
# item damaged in every copy of the extent tree's only leaf (the checksum
# recomputed, so the leaf itself is valid):
#   len   the item's key offset (the group's length) doubled;
#   gone  the item's key objectid moved one byte on: the data chunk has no
#         item, and the moved item no chunk.
#   stray an item added past the end of the last chunk (every chunk keeps
#         its own): a block group without a chunk.
# For each: `ubtrfs mount -o rw` fails, its message names the chunk (the
# stray item's start for stray), and
# the image is not written (same bytes); a read-only mount still reads a
# file back.  With the leaf restored: btrfs check is clean, and a
# read-write mount comes up, writes a file, and the kernel reads it back.
#
# Needs root, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_init_block_patching

img=$(oracle_image bg.img 512M)
oracle_mkfs -- "$img"
oracle_kmount "$T/k" "$img" || oracle_fail "the kernel does not mount the new image"
head -c 300000 /dev/urandom >"$T/data"
cp "$T/data" "$T/k/data"
oracle_kumount "$T/k"

# The extent tree must be one leaf (its root): a changed first key would
# otherwise also need the parent's key changed.
btrfs inspect-internal dump-tree -t 2 "$img" >"$T/extent.txt"
nodes=$(grep -c '^node [0-9]' "$T/extent.txt" || true)
leaf=$(awk '/^leaf [0-9]+ items/ { print $2; exit }' "$T/extent.txt")
((nodes == 0)) && [[ -n $leaf ]] || oracle_fail "the extent tree is not a single leaf"
# The data block group: "item N key (X BLOCK_GROUP_ITEM Y)", then "... flags DATA".
read -r bg_start bg_len < <(awk '
	/key \([0-9]+ BLOCK_GROUP_ITEM [0-9]+\)/ {
		s = $0; sub(/.*key \(/, "", s); split(s, k, /[ )]/); cand = k[1] " " k[3]; next }
	cand != "" && /flags DATA/ { print cand; exit }
	{ cand = "" }' "$T/extent.txt")
[[ -n ${bg_start:-} ]] || oracle_fail "no DATA block group item in the extent tree"
oracle_block_copies "$img" "$leaf"
phys=("${ORACLE_COPIES[@]}")
nodesize=$(btrfs inspect-internal dump-super "$img" | awk '$1 == "nodesize" { print $2 }')
# The end of the last chunk: "item N key (FIRST_CHUNK_TREE CHUNK_ITEM start)"
# then "length L owner ...".
chunks_end=$(btrfs inspect-internal dump-tree -t 3 "$img" | awk '
	/CHUNK_ITEM [0-9]+\)/ { s = $0; sub(/.*CHUNK_ITEM /, "", s); sub(/\).*/, "", s); start = s; next }
	start != "" && /length [0-9]+/ { for (i = 1; i <= NF; i++) if ($i == "length") { e = start + $(i + 1); if (e > m) m = e }; start = "" }
	END { printf "%.0f\n", m }')
[[ $chunks_end =~ ^[1-9][0-9]*$ ]] || oracle_fail "cannot find the end of the last chunk"
oracle_log "data block group $bg_start (length $bg_len) in extent leaf $leaf (${#phys[@]} copies)"

# patch MODE: MODE len|gone|stray damages the leaf in every copy (saving the
# originals once), MODE restore puts them back.
patch() {
	PYTHONPATH=$UBTRFS_SOURCE_ROOT/tests/tools "$ORACLE_PYTHON" - "$img" "$1" "$bg_start" "$bg_len" \
		"$nodesize" "$T/orig" "$chunks_end" "${phys[@]}" <<'PY'
import os, struct, sys
from crc32c import seal
img, mode, start, length, nodesize, orig, chunks_end = sys.argv[1:8]
start, length, nodesize, chunks_end = int(start), int(length), int(nodesize), int(chunks_end)
phys = [int(p) for p in sys.argv[8:]]
HDR, ITEM = 101, 25

with open(img, "r+b") as f:
    for n, p in enumerate(phys):
        saved = "%s.%d" % (orig, n)
        if mode == "restore":
            with open(saved, "rb") as s:
                f.seek(p)
                f.write(s.read())
            continue
        f.seek(p)
        leaf = bytearray(f.read(nodesize))
        if not os.path.exists(saved):
            with open(saved, "wb") as s:
                s.write(leaf)
        nritems = struct.unpack_from("<I", leaf, 0x60)[0]
        if mode == "stray":
            # Append (chunks_end BLOCK_GROUP_ITEM 8 MiB): used 0, chunk
            # objectid 256, flags DATA; its data just below the lowest.
            last = HDR + ITEM * (nritems - 1)
            if struct.unpack_from("<Q", leaf, last)[0] >= chunks_end:
                sys.exit("the leaf's last key is past the last chunk")
            low = min(struct.unpack_from("<I", leaf, HDR + ITEM * i + 17)[0]
                      for i in range(nritems))
            off = low - 24
            if HDR + ITEM * (nritems + 1) > HDR + off:
                sys.exit("no room in the leaf for another item")
            struct.pack_into("<QBQII", leaf, HDR + ITEM * nritems, chunks_end, 192, 8 << 20,
                             off, 24)
            struct.pack_into("<QQQ", leaf, HDR + off, 0, 256, 1)
            struct.pack_into("<I", leaf, 0x60, nritems + 1)
            seal(leaf)
            f.seek(p)
            f.write(leaf)
            continue
        for i in range(nritems):
            off = 0x65 + 25 * i
            objectid, typ, offset = struct.unpack_from("<QBQ", leaf, off)
            if (objectid, typ, offset) == (start, 192, length):
                if i == 0:
                    sys.exit("the block group item is the leaf's first item")
                if mode == "len":
                    struct.pack_into("<Q", leaf, off + 9, length * 2)
                else:
                    struct.pack_into("<Q", leaf, off, start + 1)
                break
        else:
            sys.exit("item (%d BLOCK_GROUP_ITEM %d) not in the copy at %d" % (start, length, p))
        seal(leaf)
        f.seek(p)
        f.write(leaf)
PY
}

for mode in len gone stray; do
	patch "$mode" || oracle_fail "$mode: patching the extent leaf failed"
	before=$(sha256sum <"$img")
	rc=0
	mkdir -p "$T/m"
	oracle_register_mount "$T/m"
	# (Should it come up after all, the timeout ends it.)
	timeout 30 "$UBTRFS" mount -f -o rw "$img" "$T/m" >"$T/$mode.log" 2>&1 || rc=$?
	oracle_is_mounted "$T/m" && { umount -l "$T/m"; ro_fail "$mode: the read-write mount came up"; }
	((rc != 0)) || ro_fail "$mode: the read-write mount exited 0"
	named=$bg_start
	[[ $mode == stray ]] && named=$chunks_end
	grep -q "$named" "$T/$mode.log" ||
		{ ro_show "$T/$mode.log"; ro_fail "$mode: the message does not name block group $named"; }
	[[ $(sha256sum <"$img") == "$before" ]] || ro_fail "$mode: the refused open wrote to the image"
	oracle_log "$mode: refused: $(grep -m1 -i 'block group\|chunk' "$T/$mode.log" || true)"
	# Read-only needs no block group.
	if ro_fuse_up "$T/m" "$T/$mode-ro.log" ro "$img"; then
		cmp -s "$T/data" "$T/m/data" || ro_fail "$mode: the read-only mount reads other bytes"
		ro_fuse_down "$mode-ro" "$T/m" "$T/$mode-ro.log"
	else
		ro_show "$T/$mode-ro.log"
		ro_fail "$mode: the read-only mount did not come up"
	fi
	patch restore || oracle_fail "restoring the extent leaf failed"
done

oracle_check_clean "restored" "$img" || ro_fail "btrfs check after restoring the leaf is not clean"
if ro_fuse_up "$T/m" "$T/rw.log" rw "$img"; then
	printf 'written\n' >"$T/m/new" || ro_fail "writing through the restored image failed"
	ro_fuse_down "rw" "$T/m" "$T/rw.log"
	oracle_check_clean "written" "$img" || ro_fail "btrfs check after the write is not clean"
	if oracle_kmount -o ro "$T/k" "$img"; then
		[[ $(cat "$T/k/new") == written ]] || ro_fail "the kernel does not read the new file"
		cmp -s "$T/data" "$T/k/data" || ro_fail "the kernel reads other bytes in /data"
		oracle_kumount "$T/k"
	else
		ro_fail "the kernel does not mount the written image"
	fi
else
	ro_show "$T/rw.log"
	ro_fail "the read-write mount of the restored image did not come up"
fi
RO_CELLS=4
ro_finish
