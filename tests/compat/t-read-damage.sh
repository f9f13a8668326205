#!/bin/bash
# t-read-damage: ubtrfs reads damaged filesystems the kernel wrote.
#
#   (a) DUP metadata: one byte flipped in the first copy of one fs-tree leaf
#       and in the second copy of another.  `ubtrfs ls -R`, `ubtrfs cat`,
#       `ubtrfs get` and the FUSE mount read everything exactly as before
#       (the other copy is used; a warning may be printed).
#   (b) SINGLE metadata (-m single): one byte flipped in an fs-tree leaf in
#       the middle of a directory's files.  The files whose items live in
#       that leaf fail with a clear error (EIO/EUCLEAN, the message names the
#       block) through cat, ls -l and FUSE; files outside it still read; no
#       crash.
#   (c) Data: one byte flipped in the third sector of a file (single data).
#       `ubtrfs cat` exits non-zero with an I/O error, other files read; under
#       FUSE, dd of the sectors before and after the bad one works, dd of the
#       bad one gets EIO.  With RAID1 data (a byte flipped in mirror 1 of one
#       file and in mirror 2 of another) the good mirror is used: cat and
#       FUSE give the right bytes.
#   (d) None of this writes to the images (a hash of their data before and
#       after every ubtrfs run).
#
# Leaves and extents are found with `btrfs inspect-internal dump-tree`, and
# logical addresses are mapped to device offsets with the chunk tree.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE and python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd dd cmp awk
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS
PY=$T/damage.py
cat >"$PY" <<'PY'
"""Helpers: parse dump-tree output, map addresses, flip bytes, hash."""
import hashlib
import os
import re
import sys


def leaves(dump):
    """Leaves of a dump-tree listing: bytenr, first and last objectid."""
    out = []
    cur = None
    for line in open(dump, errors="replace"):
        m = re.match(r"^leaf (\d+) items (\d+)", line)
        if m:
            cur = [int(m.group(1)), None, None]
            out.append(cur)
            continue
        m = re.match(r"^node (\d+) ", line)
        if m:
            cur = None
            continue
        m = re.match(r"^\s+item \d+ key \((-?\d+) ", line)
        if m and cur is not None:
            oid = int(m.group(1))
            if cur[1] is None:
                cur[1] = oid
            cur[2] = oid
    for bytenr, first, last in out:
        if first is not None:
            print(bytenr, first, last)


def chunk_map(dump, logical):
    """Device offsets (devid physical per line) of a logical address in a
    non-striped chunk (SINGLE, DUP, RAID1*)."""
    chunks = []
    cur = None
    for line in open(dump, errors="replace"):
        m = re.search(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)", line)
        if m:
            cur = {"start": int(m.group(1)), "stripes": []}
            chunks.append(cur)
            continue
        if cur is None:
            continue
        m = re.search(r"length (\d+) owner \d+ stripe_len \d+ type (\S+)", line)
        if m:
            cur["length"] = int(m.group(1))
            cur["type"] = m.group(2)
            continue
        m = re.search(r"stripe \d+ devid (\d+) offset (\d+)", line)
        if m:
            cur["stripes"].append((int(m.group(1)), int(m.group(2))))
    for c in chunks:
        if c["start"] <= logical < c["start"] + c.get("length", 0):
            if re.search(r"RAID0|RAID10|RAID5|RAID6", c["type"]):
                sys.exit("striped chunk %s: not supported here" % c["type"])
            for devid, phys in c["stripes"]:
                print(devid, phys + logical - c["start"])
            return
    sys.exit("no chunk holds logical %d" % logical)


def extent(dump, ino):
    """disk bytenr and extent offset of the first EXTENT_DATA of ino."""
    want = False
    disk = None
    for line in open(dump, errors="replace"):
        m = re.match(r"^\s+item \d+ key \((\d+) (\S+) (\d+)\)", line)
        if m:
            want = int(m.group(1)) == ino and m.group(2) == "EXTENT_DATA" \
                and m.group(3) == "0"
            continue
        if not want:
            continue
        m = re.search(r"extent data disk byte (\d+) nr (\d+)", line)
        if m:
            disk = int(m.group(1))
            continue
        m = re.search(r"extent data offset (\d+) nr", line)
        if m and disk is not None:
            print(disk, int(m.group(1)))
            return
    sys.exit("no regular EXTENT_DATA for inode %d" % ino)


def flip(path, offset):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0xFF]))


def datahash(paths):
    """sha256 over the data ranges (and their offsets) of sparse files."""
    for path in paths:
        h = hashlib.sha256()
        fd = os.open(path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            h.update(b"@%d;" % start)
            off = start
            while off < end:
                buf = os.pread(fd, min(1 << 20, end - off), off)
                if not buf:
                    break
                h.update(buf)
                off += len(buf)
            pos = end
        os.close(fd)
        print(h.hexdigest(), path)


def content(path, i):
    """Deterministic file contents: index i, kind from the file name."""
    name = os.path.basename(path)
    if name.startswith("f"):
        data = (("file %03d " % i) * (i % 50 + 1)).encode()
    else:
        import random
        rng = random.Random(i)
        data = bytes(rng.getrandbits(8) for _ in range(int(sys.argv[4])))
    with open(path, "wb") as fh:
        fh.write(data)


cmd = sys.argv[1]
if cmd == "leaves":
    leaves(sys.argv[2])
elif cmd == "map":
    chunk_map(sys.argv[2], int(sys.argv[3]))
elif cmd == "extent":
    extent(sys.argv[2], int(sys.argv[3]))
elif cmd == "flip":
    flip(sys.argv[2], int(sys.argv[3]))
elif cmd == "hash":
    datahash(sys.argv[2:])
elif cmd == "content":
    content(sys.argv[2], int(sys.argv[3]))
else:
    sys.exit("unknown command " + cmd)
PY

dpy() {
	"$ORACLE_PYTHON" "$PY" "$@"
}

NFILES=600

# Source files: many/f000..f599 (small, inline), data/victim* (256 KiB),
# data/other (64 KiB), all deterministic.
mkdir -p "$T/src/many" "$T/src/data"
for ((i = 0; i < NFILES; i++)); do
	printf -v f 'f%03d' "$i"
	for ((k = 0; k <= i % 50; k++)); do printf 'file %03d ' "$i"; done >"$T/src/many/$f"
done
dpy content "$T/src/data/victim" 1 262144
dpy content "$T/src/data/victim2" 2 262144
dpy content "$T/src/data/other" 3 65536

# fill MNT: the tree above, written by the kernel.
fill() {
	mkdir "$1/many" "$1/data"
	cp "$T/src/many/"* "$1/many/"
	cp "$T/src/data/"* "$1/data/"
	sync
}

# loopdev IMG: the loop device oracle_kmount attached for IMG.
loopdev() {
	losetup -j "$1" -O NAME -n | head -n 1
}

# hash_images TAG IMG...: record the data hash of the images.
hash_images() {
	local tag=$1
	shift
	dpy hash "$@" >"$T/hash.$tag"
}

# same_hash TAG IMG...: the images still hash as recorded.
same_hash() {
	local tag=$1
	shift
	dpy hash "$@" >"$T/hash.$tag.after"
	cmp -s "$T/hash.$tag" "$T/hash.$tag.after" ||
		ro_fail "$tag: ubtrfs wrote to the image(s): $(diff "$T/hash.$tag" "$T/hash.$tag.after" | tr '\n' ' ')"
}

# errno_msg FILE: an I/O-error-like message.
errno_msg() {
	grep -qiE 'input/output error|\bEIO\b|EUCLEAN|structure needs cleaning|checksum|csum' -- "$1"
}

# names_block FILE BYTENR: the message names the tree block.
names_block() {
	grep -qE "(^|[^0-9])$2([^0-9]|$)|0x0*$(printf '%x' "$2")([^0-9a-fA-F]|$)" -- "$1"
}

# ---------------------------------------------------------------------------
# Metadata images: build, reference, pick leaves.

# meta_image NAME MKFS_OPTS: image, filled by the kernel; the fs tree and
# chunk tree dumps in $T/NAME.fs and $T/NAME.chunk, the reference manifest
# in $T/NAME.k.m, inode numbers of many/* in $T/NAME.inos ("ino name").
meta_image() {
	local name=$1 mkfs_line=$2 img
	local -a mkfs_args=()
	# shellcheck disable=SC2206
	mkfs_args=($mkfs_line)
	img=$(oracle_image "$name.img" 256M)
	oracle_mkfs "${mkfs_args[@]}" -- "$img"
	oracle_kmount "$T/$name.w" "$img" || oracle_fail "$name: kernel mount failed"
	fill "$T/$name.w"
	oracle_kumount "$T/$name.w"
	RO_IMGS=("$img")
	ro_reference "$name"
	oracle_kmount -o ro "$T/$name.k" "$img" || oracle_fail "$name: kernel mount failed"
	(cd "$T/$name.k/many" && stat -c '%i %n' -- *) >"$T/$name.inos"
	btrfs inspect-internal dump-tree -t 5 "$(loopdev "$img")" >"$T/$name.fs"
	btrfs inspect-internal dump-tree -t chunk "$(loopdev "$img")" >"$T/$name.chunk"
	oracle_kumount "$T/$name.k"
	IMG=$img
}

# pick_leaves NAME COUNT: COUNT leaves from the middle of the fs tree whose
# items all belong to files of many/ (objectids past the directory's, not
# the last leaf); "bytenr first last" per line.
pick_leaves() {
	local name=$1 count=$2 dir_ino
	dir_ino=$(awk 'NR == 1 { print $1 - 1 }' "$T/$name.inos")
	dpy leaves "$T/$name.fs" >"$T/$name.leaves"
	awk -v d="$dir_ino" '$2 > d + 3 { print }' "$T/$name.leaves" | sed '$d' >"$T/$name.cand"
	local n
	n=$(wc -l <"$T/$name.cand")
	((n >= count)) || oracle_fail "$name: only $n candidate leaves in the fs tree"
	awk -v n="$n" -v c="$count" 'NR == int(n * 1 / 3) + 1 || (c > 1 && NR == int(n * 2 / 3) + 1)' \
		"$T/$name.cand" | head -n "$count"
}

# name_of NAME INO: the file name of inode INO in many/.
name_of() {
	awk -v i="$2" '$1 == i { print $2; exit }' "$T/$1.inos"
}

# corrupt NAME LOGICAL COPY OFFSET: flip the byte OFFSET bytes into copy COPY
# (1-based stripe of the chunk) of the block at LOGICAL.
corrupt() {
	local name=$1 logical=$2 copy=$3 off=$4 line phys
	line=$(dpy map "$T/$name.chunk" "$logical" | sed -n "${copy}p")
	[[ -n $line ]] || oracle_fail "$name: no copy $copy of $logical"
	phys=${line#* }
	dpy flip "$IMG" $((phys + off))
	oracle_log "$name: flipped byte $off of copy $copy of block $logical (device offset $phys)"
}

# ---------------------------------------------------------------------------
# (a) DUP metadata: both copies of two leaves damaged, one each.

RO_CELLS=$((RO_CELLS + 1))
meta_image dup ""
grep -q 'METADATA|DUP' "$T/dup.chunk" || oracle_fail "dup: metadata is not DUP"
ro_run "$T/dup.ls.before" "$T/dup.ls.before.err" ls -R -l -i "$IMG"
((RO_RC == 0)) || oracle_fail "dup: ubtrfs ls -R fails on the undamaged image"
pick_leaves dup 2 >"$T/dup.picked"
mapfile -t picked <"$T/dup.picked"
((${#picked[@]} == 2)) || oracle_fail "dup: cannot pick two leaves"
read -r leaf1 first1 last1 <<<"${picked[0]}"
read -r leaf2 first2 last2 <<<"${picked[1]}"
corrupt dup "$leaf1" 1 200
corrupt dup "$leaf2" 2 3000
hash_images dup "$IMG"

ro_run "$T/dup.ls" "$T/dup.ls.err" ls -R -l -i "$IMG"
if ((RO_RC != 0)); then
	ro_fail "dup: ubtrfs ls -R exits $RO_RC with one copy of two leaves damaged"
	ro_show "$T/dup.ls.err"
elif ! cmp -s "$T/dup.ls.before" "$T/dup.ls"; then
	ro_fail "dup: ubtrfs ls -R lists something else than before the damage"
	diff "$T/dup.ls.before" "$T/dup.ls" | head -n 20
fi
# A damaged copy with a good one beside it is worth a warning, no more.
if RO_WARN_OK=1 ro_unexpected_messages "$T/dup.ls.err" >"$T/dup.ls.msgs"; then
	ro_fail "dup: ubtrfs ls -R reports more than warnings for a recovered block"
	ro_show "$T/dup.ls.msgs"
fi
for ino in $((first1 + 1)) "$last1" $((first2 + 1)) "$last2"; do
	f=$(name_of dup "$ino")
	[[ -n $f ]] || continue
	ro_run "$T/cat.out" "$T/cat.err" cat "$IMG" "/many/$f"
	if ((RO_RC != 0)) || ! cmp -s "$T/cat.out" "$T/src/many/$f"; then
		ro_fail "dup: ubtrfs cat /many/$f (inode $ino, in a damaged leaf) exits $RO_RC or differs"
		ro_show "$T/cat.err"
	elif RO_WARN_OK=1 ro_unexpected_messages "$T/cat.err" >"$T/cat.msgs"; then
		ro_fail "dup: ubtrfs cat /many/$f reports more than warnings for a recovered block"
		ro_show "$T/cat.msgs"
	fi
done
ro_check_fuse dup damaged ro "$IMG"
RO_WARN_OK=1 ro_check_get dup damaged "$IMG"
same_hash dup "$IMG"
rm -f -- "$IMG"

# ---------------------------------------------------------------------------
# (b) SINGLE metadata: one leaf damaged, no other copy.

RO_CELLS=$((RO_CELLS + 1))
meta_image single "-m single"
grep -q 'METADATA|single' "$T/single.chunk" || oracle_fail "single: metadata is not single"
pick_leaves single 1 >"$T/single.picked"
read -r leaf first last <"$T/single.picked" || oracle_fail "single: cannot pick a leaf"
corrupt single "$leaf" 1 200
hash_images single "$IMG"
oracle_log "single: leaf $leaf holds inodes $first..$last"

# Files whose items are all in the leaf, and files well away from it.
bad=() good=()
mid=$(((first + last) / 2))
for ino in $((first + 1)) "$mid" $((last - 1)); do
	f=$(name_of single "$ino")
	[[ -n $f ]] && bad+=("$f")
done
for ino in $((first - 30)) $((first - 5)) $((last + 5)) $((last + 30)); do
	f=$(name_of single "$ino")
	[[ -n $f ]] && good+=("$f")
done
((${#bad[@]} >= 2 && ${#good[@]} >= 2)) ||
	oracle_fail "single: cannot pick files (leaf $leaf, inodes $first..$last)"
oracle_log "single: files in the leaf: ${bad[*]}; outside: ${good[*]}"

for f in "${bad[@]}"; do
	ro_run "$T/cat.out" "$T/cat.err" cat "$IMG" "/many/$f"
	((RO_RC < 124)) || continue
	if ((RO_RC == 0)); then
		ro_fail "single: ubtrfs cat /many/$f (items in the damaged leaf $leaf) exits 0"
	elif ! errno_msg "$T/cat.err" || ! names_block "$T/cat.err" "$leaf"; then
		ro_fail "single: ubtrfs cat /many/$f: no I/O error naming block $leaf"
		ro_show "$T/cat.err"
	fi
done
for f in "${good[@]}"; do
	ro_run "$T/cat.out" "$T/cat.err" cat "$IMG" "/many/$f"
	if ((RO_RC != 0)) || ! cmp -s "$T/cat.out" "$T/src/many/$f"; then
		ro_fail "single: ubtrfs cat /many/$f (outside the damaged leaf) exits $RO_RC or differs"
		ro_show "$T/cat.err"
	fi
done
ro_run "$T/ls.out" "$T/ls.err" ls -R -l "$IMG"
if ((RO_RC < 124)); then
	((RO_RC != 0)) || ro_fail "single: ubtrfs ls -R -l exits 0 although entries cannot be read"
	names_block "$T/ls.err" "$leaf" ||
		{ ro_fail "single: ubtrfs ls -R -l does not name block $leaf"; ro_show "$T/ls.err"; }
	for f in "${good[@]}"; do
		grep -q " $f\$" "$T/ls.out" || ro_fail "single: ubtrfs ls -R -l leaves out /many/$f"
	done
fi

# The same through FUSE.
mnt=$T/single.f
if ro_fuse_up "$mnt" "$T/single.log" ro "$IMG"; then
	for f in "${bad[@]}"; do
		if cat -- "$mnt/many/$f" >/dev/null 2>"$T/fcat.err"; then
			ro_fail "single (FUSE): cat /many/$f (in the damaged leaf) succeeds"
		elif ! grep -qiE 'input/output error|structure needs cleaning' "$T/fcat.err"; then
			ro_fail "single (FUSE): cat /many/$f: not EIO/EUCLEAN: $(cat "$T/fcat.err")"
		fi
	done
	for f in "${good[@]}"; do
		cmp -s -- "$mnt/many/$f" "$T/src/many/$f" ||
			ro_fail "single (FUSE): /many/$f (outside the damaged leaf) does not read back"
	done
	ls -- "$mnt/many" >"$T/fls.out" 2>/dev/null || true
	for f in "${good[@]}"; do
		grep -qx -- "$f" "$T/fls.out" || ro_fail "single (FUSE): ls many/ leaves out $f"
	done
	names_block "$T/single.log" "$leaf" ||
		{ ro_fail "single (FUSE): the mount's log does not name block $leaf"; ro_show "$T/single.log"; }
else
	ro_fail "single: ubtrfs mount did not come up"
	ro_show "$T/single.log"
fi
ro_fuse_down single "$mnt" "$T/single.log"
same_hash single "$IMG"
rm -f -- "$IMG"

# ---------------------------------------------------------------------------
# (c) Data: a flipped byte in one data sector.

# data_image NAME MKFS_OPTS NDEV: images filled by the kernel; the extent of
# data/victim and data/victim2 ("disk_bytenr offset") in $T/NAME.victim{,2}.
data_image() {
	local name=$1 mkfs_line=$2 ndev=$3 i v ino
	local -a mkfs_args=() imgs=()
	# shellcheck disable=SC2206
	mkfs_args=($mkfs_line)
	for ((i = 1; i <= ndev; i++)); do
		imgs+=("$(oracle_image "$name.$i.img" 256M)")
	done
	oracle_mkfs "${mkfs_args[@]}" -- "${imgs[@]}"
	oracle_kmount "$T/$name.w" "${imgs[@]}" || oracle_fail "$name: kernel mount failed"
	fill "$T/$name.w"
	oracle_kumount "$T/$name.w"
	oracle_kmount -o ro "$T/$name.k" "${imgs[@]}" || oracle_fail "$name: kernel mount failed"
	btrfs inspect-internal dump-tree -t 5 "$(loopdev "${imgs[0]}")" >"$T/$name.fs"
	btrfs inspect-internal dump-tree -t chunk "$(loopdev "${imgs[0]}")" >"$T/$name.chunk"
	for v in victim victim2; do
		ino=$(stat -c %i "$T/$name.k/data/$v")
		dpy extent "$T/$name.fs" "$ino" >"$T/$name.$v" ||
			oracle_fail "$name: no extent for data/$v"
	done
	oracle_kumount "$T/$name.k"
	DIMGS=("${imgs[@]}")
}

# image_of DEVID: the image of device DEVID (mkfs numbers them in order).
image_of() {
	printf '%s\n' "${DIMGS[$1 - 1]}"
}

# corrupt_data NAME VICTIM COPY: flip a byte in file sector 2 (bytes
# 8192..12287) of copy COPY.
corrupt_data() {
	local name=$1 v=$2 copy=$3 disk off line devid phys
	read -r disk off <"$T/$name.$v"
	line=$(dpy map "$T/$name.chunk" $((disk + off + 8192)) | sed -n "${copy}p")
	[[ -n $line ]] || oracle_fail "$name: no copy $copy of data/$v"
	read -r devid phys <<<"$line"
	dpy flip "$(image_of "$devid")" $((phys + 100))
	oracle_log "$name: flipped a byte of data/$v sector 2, copy $copy (devid $devid, offset $phys)"
}

RO_CELLS=$((RO_CELLS + 1))
data_image sdata "-d single" 1
grep -q 'DATA|single' "$T/sdata.chunk" || oracle_fail "sdata: data is not single"
IMG=${DIMGS[0]}
corrupt_data sdata victim 1
hash_images sdata "$IMG"
ro_run "$T/cat.out" "$T/cat.err" cat "$IMG" /data/victim
if ((RO_RC < 124)); then
	if ((RO_RC == 0)); then
		ro_fail "sdata: ubtrfs cat /data/victim exits 0 over a corrupted sector"
	elif ! errno_msg "$T/cat.err"; then
		ro_fail "sdata: ubtrfs cat /data/victim: no I/O error message"
		ro_show "$T/cat.err"
	fi
	# Whatever went out before the error is the file's beginning.
	cmp -s -n "$(stat -c %s "$T/cat.out")" "$T/cat.out" "$T/src/data/victim" ||
		ro_fail "sdata: ubtrfs cat /data/victim wrote wrong bytes before failing"
fi
for v in other victim2; do
	ro_run "$T/cat.out" "$T/cat.err" cat "$IMG" "/data/$v"
	if ((RO_RC != 0)) || ! cmp -s "$T/cat.out" "$T/src/data/$v"; then
		ro_fail "sdata: ubtrfs cat /data/$v (undamaged) exits $RO_RC or differs"
		ro_show "$T/cat.err"
	fi
done
mnt=$T/sdata.f
if ro_fuse_up "$mnt" "$T/sdata.log" ro "$IMG"; then
	f=$mnt/data/victim
	if ! dd if="$f" of="$T/dd.0" bs=4096 count=2 status=none 2>"$T/dd.err"; then
		ro_fail "sdata (FUSE): reading sectors 0-1 of data/victim fails: $(cat "$T/dd.err")"
	elif ! cmp -s -n 8192 "$T/dd.0" "$T/src/data/victim" || [[ $(stat -c %s "$T/dd.0") != 8192 ]]; then
		ro_fail "sdata (FUSE): sectors 0-1 of data/victim read back wrong"
	fi
	if dd if="$f" of="$T/dd.2" bs=4096 skip=2 count=1 status=none 2>"$T/dd.err"; then
		ro_fail "sdata (FUSE): reading the corrupted sector 2 of data/victim succeeds"
	elif ! grep -qi 'input/output error' "$T/dd.err"; then
		ro_fail "sdata (FUSE): sector 2 of data/victim: not EIO: $(cat "$T/dd.err")"
	fi
	if ! dd if="$f" of="$T/dd.3" bs=4096 skip=3 status=none 2>"$T/dd.err"; then
		ro_fail "sdata (FUSE): reading sectors 3.. of data/victim fails: $(cat "$T/dd.err")"
	elif ! tail -c +12289 "$T/src/data/victim" | cmp -s - "$T/dd.3"; then
		ro_fail "sdata (FUSE): sectors 3.. of data/victim read back wrong"
	fi
	cmp -s "$mnt/data/other" "$T/src/data/other" ||
		ro_fail "sdata (FUSE): data/other (undamaged) does not read back"
else
	ro_fail "sdata: ubtrfs mount did not come up"
	ro_show "$T/sdata.log"
fi
ro_fuse_down sdata "$mnt" "$T/sdata.log"
same_hash sdata "$IMG"
rm -f -- "${DIMGS[@]}"

# RAID1 data: mirror 1 of victim and mirror 2 of victim2 damaged.
RO_CELLS=$((RO_CELLS + 1))
data_image r1data "-d raid1 -m raid1" 2
grep -q 'DATA|RAID1' "$T/r1data.chunk" || oracle_fail "r1data: data is not RAID1"
corrupt_data r1data victim 1
corrupt_data r1data victim2 2
hash_images r1data "${DIMGS[@]}"
ro_offline_args "${DIMGS[@]}"
for v in victim victim2 other; do
	ro_run "$T/cat.out" "$T/cat.err" cat "${RO_OFFLINE[@]}" "/data/$v"
	if ((RO_RC != 0)) || ! cmp -s "$T/cat.out" "$T/src/data/$v"; then
		ro_fail "r1data: ubtrfs cat /data/$v (one mirror damaged) exits $RO_RC or differs"
		ro_show "$T/cat.err"
	fi
done
mnt=$T/r1data.f
if ro_fuse_up "$mnt" "$T/r1data.log" ro "${DIMGS[@]}"; then
	for v in victim victim2 other; do
		cmp -s "$mnt/data/$v" "$T/src/data/$v" ||
			ro_fail "r1data (FUSE): data/$v (one mirror damaged) does not read back"
	done
else
	ro_fail "r1data: ubtrfs mount did not come up"
	ro_show "$T/r1data.log"
fi
ro_fuse_down r1data "$mnt" "$T/r1data.log"
same_hash r1data "${DIMGS[@]}"
rm -f -- "${DIMGS[@]}"

oracle_log "total $((SECONDS - T0)) s"
ro_finish
