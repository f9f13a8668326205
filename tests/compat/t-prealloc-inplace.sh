#!/bin/bash
# t-prealloc-inplace: writes into preallocated extents and into NODATACOW
# files go in place, as the kernel writes them, unless the extent is shared.
#
# Through the read-write FUSE mount, on images by `ubtrfs mkfs` and by
# mkfs.btrfs; the trees are read with `btrfs inspect-internal dump-tree`
# on the unmounted image.  Each cell:
#   (a) files preallocated through the mount (fallocate) and by the kernel
#       get pieces written - aligned and not, at the start, in the middle,
#       at the end, adjacent ones, and a run of consecutive writes - each
#       sector written once: afterwards every item of the file points into
#       the disk extents it had before (no new data extent), the REG items
#       cover exactly the written sectors and PREALLOC items the rest, the
#       run of consecutive writes is one REG item (merged as the kernel
#       merges), and each extent item counts one reference per item;
#       overlapping writes into another preallocated file read back right;
#   (b) NODATACOW files (a `chattr +C` directory made by the kernel; one
#       file written by the kernel, one created and written through the
#       mount) overwritten in pieces keep exactly their items (same
#       disk_bytenr), and stay NODATACOW;
#   (c) btrfs check --readonly --check-data-csum is clean and the kernel
#       reads what a model file (the same writes on a plain file) holds;
#   (d) after a snapshot by the kernel, overwriting both kinds of file in
#       the source subvolume copies on write: the items over the new bytes
#       point at new extents, the snapshot keeps its items and its bytes,
#       the source reads the new bytes; check clean again.
# And on a small filesystem of each kind, (e) fallocate (mode 0) of 64 MiB,
# data filled up to ENOSPC (a new 4 KiB write fails), then writing all of
# the preallocated range (sector-aligned pieces, an unaligned end at the
# file size) succeeds, in place; check clean, the kernel reads the bytes.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE, python3,
# fallocate(1), chattr/lsattr.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd fallocate chattr lsattr cmp
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS
MiB=$((1 << 20))

# pw.py FILE MODEL OFF:LEN...: pwrite seeded bytes at each OFF (LEN bytes)
# into FILE and the same into MODEL, then fsync FILE.  Any error fails.
cat >"$T/pw.py" <<'PY'
import os, random, sys
path, model = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY)
md = os.open(model, os.O_WRONLY)
for arg in sys.argv[3:]:
    off, ln = (int(x, 0) for x in arg.split(":"))
    data = random.Random("%s:%d:%d" % (os.path.basename(path), off, ln)).randbytes(ln)
    if os.pwrite(fd, data, off) != ln or os.pwrite(md, data, off) != ln:
        sys.exit("%s: short write at %d" % (path, off))
os.fsync(fd)
PY

# check.py MODE ARGS: judge EXTENT_DATA lists ("offset type disk disk_nr
# extent_offset nr" per item, from `extents` below).
cat >"$T/check.py" <<'PY'
import sys

SS = 4096

def items(path):
    out = []
    for line in open(path):
        f = [int(x) for x in line.split()]
        out.append(dict(off=f[0], type=f[1], disk=f[2], dnr=f[3], xoff=f[4], nr=f[5]))
    return out

def ranges(spec):
    out = []
    for r in spec.split(","):
        if r:
            o, n = (int(x, 0) for x in r.split(":"))
            out.append((o // SS * SS, -(-(o + n) // SS) * SS))
    return out

def union(rs):
    out = []
    for a, b in sorted(rs):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out

def fail(msg):
    print(msg)
    sys.exit(1)

mode = sys.argv[1]
if mode == "inplace":
    # BEFORE AFTER SPAN WRITTEN [ONE]: every item of AFTER lies in the
    # extents of BEFORE at the same disk position, items tile [0, SPAN),
    # REG items cover exactly WRITTEN (sector-rounded), PREALLOC the rest;
    # ONE (off:len) is covered by a single REG item.
    before, after = items(sys.argv[2]), items(sys.argv[3])
    span, written = int(sys.argv[4]), union(ranges(sys.argv[5]))
    disks = {(i["disk"], i["dnr"]) for i in before if i["disk"]}
    pos_of = {}
    for i in before:
        pos_of.setdefault((i["disk"], i["dnr"]), i["off"] - i["xoff"])
    if not disks or any(i["type"] != 2 for i in before):
        fail("before the writes the file is not all preallocated: %s" % before)
    pos, reg = 0, []
    for i in after:
        if i["off"] != pos:
            fail("items do not tile the file at %d: %s" % (pos, i))
        if (i["disk"], i["dnr"]) not in disks:
            fail("item at %d points at a new extent %d (not in place)" % (i["off"], i["disk"]))
        if i["off"] - i["xoff"] != pos_of[(i["disk"], i["dnr"])]:
            fail("item at %d moved inside its extent" % i["off"])
        if i["type"] == 1:
            reg.append((i["off"], i["off"] + i["nr"]))
        elif i["type"] != 2:
            fail("item at %d has type %d" % (i["off"], i["type"]))
        pos += i["nr"]
    if pos != span:
        fail("items end at %d, not %d" % (pos, span))
    if union(reg) != written:
        fail("REG ranges %s, written %s" % (union(reg), written))
    if len(sys.argv) > 6:
        a, b = ranges(sys.argv[6])[0]
        if not any(r[0] <= a and b <= r[1] for r in reg):
            fail("the consecutive writes %d..%d are not one REG item: %s" % (a, b, reg))
elif mode == "refs":
    # ITEMS REFS: each extent's reference count is its number of items.
    want = {}
    for i in items(sys.argv[2]):
        if i["disk"]:
            want[i["disk"]] = want.get(i["disk"], 0) + 1
    got = {}
    for line in open(sys.argv[3]):
        d, r = line.split()
        got[int(d)] = int(r)
    for d, n in want.items():
        if got.get(d) != n:
            fail("extent %d: refs %s, referenced by %d items" % (d, got.get(d), n))
elif mode == "same":
    # BEFORE AFTER: the very same items.
    if items(sys.argv[2]) != items(sys.argv[3]):
        fail("items changed:\n%s\n%s" % (open(sys.argv[2]).read(), open(sys.argv[3]).read()))
elif mode == "cow":
    # BEFORE AFTER RANGES: every item over RANGES is REG in an extent that
    # BEFORE did not use.
    old = {i["disk"] for i in items(sys.argv[2])}
    for a, b in ranges(sys.argv[4]):
        for i in items(sys.argv[3]):
            if i["off"] < b and a < i["off"] + i["nr"]:
                if i["type"] != 1 or i["disk"] in old:
                    fail("item at %d (type %d, disk %d) over %d..%d is not a new extent"
                         % (i["off"], i["type"], i["disk"], a, b))
else:
    fail("check.py: mode %s" % mode)
PY

# extents IMG TREE INO: the EXTENT_DATA items of INO in TREE, one line each:
# "offset type disk_bytenr disk_num_bytes offset num_bytes".
extents() {
	btrfs inspect-internal dump-tree -t "$2" "$1" | awk -v ino="$3" '
		$1 == "item" && $3 == "key" {
			want = ($4 == "(" ino && $5 == "EXTENT_DATA")
			off = $6; sub(/\)$/, "", off)
			next
		}
		!want { next }
		$1 == "generation" { type = $4; next }
		$3 == "disk" && $4 == "byte" { disk = $5; dnr = $7; next }
		$3 == "offset" { print off, type, disk, dnr, $4, $6; want = 0 }
		$1 == "inline" { print off, 0, 0, 0, 0, 0; want = 0 }'
}

# ino_of IMG TREE NAME: the inode number of the (unique) name NAME.  (awk
# reads to the end: an early exit would kill dump-tree with SIGPIPE.)
ino_of() {
	btrfs inspect-internal dump-tree -t "$2" "$1" | awk -v name="$3" '
		$1 == "item" { o = ""; if ($5 == "INODE_REF") { o = $4; sub(/^\(/, "", o) }; next }
		o != "" && !found && $NF == name && $(NF - 1) == "name:" { print o; found = 1 }'
}

# refs IMG: "bytenr refs" of every data extent item.
refs() {
	btrfs inspect-internal dump-tree -t 2 "$1" | awk '
		$1 == "item" && $5 == "EXTENT_ITEM" { d = $4; sub(/^\(/, "", d); next }
		d != "" && $1 == "refs" && $NF == "DATA" { print d, $2 }
		{ d = "" }'
}

judge() {
	local what=$1
	shift
	"$ORACLE_PYTHON" "$T/check.py" "$@" >"$T/judge.out" 2>&1 || {
		ro_fail "$what: $(head -c 2000 "$T/judge.out")"
		return 0
	}
}

check_img() {
	local what=$1 img=$2 out rc=0
	out=$(btrfs check --readonly --check-data-csum "$img" 2>&1) || rc=$?
	if ((rc)) || ! grep -q "no error found" <<<"$out"; then
		ro_fail "$what: btrfs check --check-data-csum exited $rc"
		printf '%s\n' "$out" | tail -n 20 | sed 's/^/    /'
	fi
}

# kcmp WHAT MNT PATH MODEL: the kernel reads MODEL's bytes at MNT/PATH.
kcmp() {
	cmp -s "$2/$3" "$4" || ro_fail "$1: the kernel reads other bytes in $3 than the model"
}

fuse_up() {
	if ! ro_fuse_up "$T/$1.rw" "$T/$1.rw.log" rw "$2"; then
		ro_show "$T/$1.rw.log"
		oracle_fail "$1: ubtrfs mount -o rw did not come up"
	fi
}

fuse_down() {
	ro_fuse_down "$1 rw" "$T/$1.rw" "$T/$1.rw.log"
}

# Pieces, each sector written once (in bytes: off:len).
A_PIECES=(0:4096 10000:100 20480:65536 $((MiB + 100)):200000
	$((5 * MiB)):4096 $((5 * MiB + 4096)):4096 $((8 * MiB - 3000)):3000)
A_RUN=()
for ((i = 0; i < 16; i++)); do
	A_RUN+=($((3 * MiB + i * 65536)):65536)
done
K_PIECES=(0:1 $((MiB - 5)):10 $((2 * MiB)):$((MiB / 2)) $((4 * MiB - 4096)):4096)
B_PIECES=(100:5000 4000:8000 0:1 $((64 * 1024 - 7)):14 60000:100000 70000:10)
N_PIECES=(0:4096 5000:3000 $((300 * 1024)):$((200 * 1024)) $((MiB - 10)):10)
# After the snapshot: into written and still preallocated parts.
S_A_PIECES=(0:8192 $((3 * MiB)):4096 $((6 * MiB)):12288)
S_N_PIECES=(8192:8192 $((512 * 1024)):100)

join() {
	local IFS=,
	echo "$*"
}

cell() {
	local name=$1 tool=$2 img k=$T/$1.k m mnt=$T/$1.rw f
	local -A ino=()
	shift 2
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image "$name.img" 1G)
	if [[ $tool == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$@" "$img" || oracle_fail "$name: ubtrfs mkfs failed"
	else
		oracle_mkfs "$@" -- "$img"
	fi
	m=$T/$name.model
	mkdir -p "$m"

	# The kernel: a preallocated file, a NODATACOW directory and a file
	# written in it.
	oracle_kmount "$k" "$img" || oracle_fail "$name: the kernel does not mount the image"
	fallocate -l $((4 * MiB)) "$k/kfile"
	truncate -s $((4 * MiB)) "$m/kfile"
	mkdir "$k/nocow"
	chattr +C "$k/nocow"
	head -c "$MiB" /dev/urandom >"$m/nk"
	cp "$m/nk" "$k/nocow/k"
	sync -f "$k/nocow/k"
	oracle_kumount "$k"

	# ubtrfs: preallocated files, a NODATACOW file.
	fuse_up "$name" "$img"
	fallocate -l $((8 * MiB)) "$mnt/A"
	fallocate -l $((MiB)) "$mnt/B"
	truncate -s $((8 * MiB)) "$m/A"
	truncate -s $((MiB)) "$m/B"
	head -c "$MiB" /dev/urandom >"$m/nu"
	cp "$m/nu" "$mnt/nocow/u"
	sync -f "$mnt/nocow/u"
	fuse_down "$name"

	for f in A kfile k u; do
		ino[$f]=$(ino_of "$img" 5 "$f")
		[[ -n ${ino[$f]} ]] || oracle_fail "$name: no inode for $f in the dump"
		extents "$img" 5 "${ino[$f]}" >"$T/$name.$f.0"
	done

	# (a), (b): the writes.
	fuse_up "$name" "$img"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/A" "$m/A" "${A_PIECES[@]}" "${A_RUN[@]}" ||
		ro_fail "$name: writing A failed"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/kfile" "$m/kfile" "${K_PIECES[@]}" ||
		ro_fail "$name: writing kfile failed"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/B" "$m/B" "${B_PIECES[@]}" ||
		ro_fail "$name: writing B failed"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/nocow/k" "$m/nk" "${N_PIECES[@]}" ||
		ro_fail "$name: writing nocow/k failed"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/nocow/u" "$m/nu" "${N_PIECES[@]}" ||
		ro_fail "$name: writing nocow/u failed"
	fuse_down "$name"

	check_img "$name (writes)" "$img"
	for f in A kfile k u; do
		extents "$img" 5 "${ino[$f]}" >"$T/$name.$f.1"
	done
	refs "$img" >"$T/$name.refs"
	judge "$name: A" inplace "$T/$name.A.0" "$T/$name.A.1" $((8 * MiB)) \
		"$(join "${A_PIECES[@]}" "${A_RUN[@]}")" "$((3 * MiB)):$MiB"
	judge "$name: A refs" refs "$T/$name.A.1" "$T/$name.refs"
	judge "$name: kfile" inplace "$T/$name.kfile.0" "$T/$name.kfile.1" $((4 * MiB)) \
		"$(join "${K_PIECES[@]}")"
	judge "$name: kfile refs" refs "$T/$name.kfile.1" "$T/$name.refs"
	judge "$name: nocow/k" same "$T/$name.k.0" "$T/$name.k.1"
	judge "$name: nocow/u" same "$T/$name.u.0" "$T/$name.u.1"

	# (c) the kernel's view.
	oracle_kmount -o ro "$k" "$img" || oracle_fail "$name: the kernel does not mount the image"
	kcmp "$name" "$k" A "$m/A"
	kcmp "$name" "$k" kfile "$m/kfile"
	kcmp "$name" "$k" B "$m/B"
	kcmp "$name" "$k" nocow/k "$m/nk"
	kcmp "$name" "$k" nocow/u "$m/nu"
	for f in nocow/k nocow/u; do
		[[ $(lsattr "$k/$f" | awk '{print $1}') == *C* ]] ||
			ro_fail "$name: $f lost its NODATACOW flag"
	done
	oracle_kumount "$k"

	# (d) a snapshot shares the extents: writes copy on write.
	oracle_kmount "$k" "$img" || oracle_fail "$name: the kernel does not mount the image"
	btrfs subvolume snapshot "$k" "$k/snap" >/dev/null ||
		oracle_fail "$name: btrfs subvolume snapshot failed"
	local snap
	snap=$(btrfs inspect-internal rootid "$k/snap")
	oracle_kumount "$k"
	cp "$m/A" "$m/A2"
	cp "$m/nk" "$m/nk2"
	fuse_up "$name" "$img"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/A" "$m/A2" "${S_A_PIECES[@]}" ||
		ro_fail "$name: writing A after the snapshot failed"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/nocow/k" "$m/nk2" "${S_N_PIECES[@]}" ||
		ro_fail "$name: writing nocow/k after the snapshot failed"
	fuse_down "$name"

	check_img "$name (after the snapshot)" "$img"
	extents "$img" 5 "${ino[A]}" >"$T/$name.A.2"
	extents "$img" 5 "${ino[k]}" >"$T/$name.k.2"
	extents "$img" "$snap" "${ino[A]}" >"$T/$name.A.snap"
	extents "$img" "$snap" "${ino[k]}" >"$T/$name.k.snap"
	judge "$name: A after the snapshot" cow "$T/$name.A.1" "$T/$name.A.2" "$(join "${S_A_PIECES[@]}")"
	judge "$name: nocow/k after the snapshot" cow "$T/$name.k.1" "$T/$name.k.2" \
		"$(join "${S_N_PIECES[@]}")"
	judge "$name: snapshot of A" same "$T/$name.A.1" "$T/$name.A.snap"
	judge "$name: snapshot of nocow/k" same "$T/$name.k.1" "$T/$name.k.snap"
	oracle_kmount -o ro "$k" "$img" || oracle_fail "$name: the kernel does not mount the image"
	kcmp "$name" "$k" A "$m/A2"
	kcmp "$name" "$k" nocow/k "$m/nk2"
	kcmp "$name (snapshot)" "$k" snap/A "$m/A"
	kcmp "$name (snapshot)" "$k" snap/nocow/k "$m/nk"
	oracle_kumount "$k"
	oracle_log "$name: done ($tool $*)"
}

# (e) The space fallocate took is there for writing it.
enospc_cell() {
	local name=$1 tool=$2 img k=$T/$1.k mnt=$T/$1.rw size=$((64 * MiB - 1000)) ino
	shift 2
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image "$name.img" 512M)
	if [[ $tool == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$@" "$img" || oracle_fail "$name: ubtrfs mkfs failed"
	else
		oracle_mkfs "$@" -- "$img"
	fi
	fuse_up "$name" "$img"
	fallocate -l "$size" "$mnt/P"
	truncate -s "$size" "$T/$name.P"
	"$ORACLE_PYTHON" - "$mnt" <<'PY' || ro_fail "$name: filling the data space failed"
import errno, os, sys
mnt = sys.argv[1]
fd = os.open(os.path.join(mnt, "fill"), os.O_WRONLY | os.O_CREAT, 0o644)
for chunk in (1 << 20, 4096):
    buf = b"\xa5" * chunk
    while True:
        try:
            os.write(fd, buf)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            break
os.fsync(fd)
os.close(fd)
fd = os.open(os.path.join(mnt, "probe"), os.O_WRONLY | os.O_CREAT, 0o644)
try:
    os.write(fd, b"x" * 4096)
    os.fsync(fd)
    sys.exit("a 4 KiB write into a new file still succeeds: the data space is not full")
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
PY
	fuse_down "$name"
	ino=$(ino_of "$img" 5 P)
	[[ -n $ino ]] || oracle_fail "$name: no inode for P in the dump"
	extents "$img" 5 "$ino" >"$T/$name.P.0"
	local -a pieces=(0:4096 4096:$((MiB - 4096)))
	local off
	for ((off = MiB; off + MiB <= size; off += MiB)); do
		pieces+=("$off:$MiB")
	done
	pieces+=("$off:$((size - off))")
	fuse_up "$name" "$img"
	"$ORACLE_PYTHON" "$T/pw.py" "$mnt/P" "$T/$name.P" "${pieces[@]}" 2>"$T/$name.pw.err" || {
		ro_fail "$name: writing the preallocated range on a full filesystem failed"
		ro_show "$T/$name.pw.err"
	}
	fuse_down "$name"
	check_img "$name" "$img"
	extents "$img" 5 "$ino" >"$T/$name.P.1"
	judge "$name: P" inplace "$T/$name.P.0" "$T/$name.P.1" $((64 * MiB)) "0:$size"
	oracle_kmount -o ro "$k" "$img" || oracle_fail "$name: the kernel does not mount the image"
	kcmp "$name" "$k" P "$T/$name.P"
	oracle_kumount "$k"
	oracle_log "$name: done ($tool $*)"
}

cell c1 ubtrfs
cell c2 mkfs.btrfs
enospc_cell e1 ubtrfs
enospc_cell e2 mkfs.btrfs

oracle_log "total $((SECONDS - T0)) s"
ro_finish
