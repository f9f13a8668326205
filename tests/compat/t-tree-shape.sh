#!/bin/bash
# t-tree-shape: the trees the read-write mount writes are as compact as the
# kernel's, and stay correct while they are.
#
# Cell "appends": files written in tar's 10 KiB pieces (sizes 10 KiB to
# 1.5 MiB, some ending mid-sector), two of them written in alternation,
# one rewritten in the middle and one truncated and extended.  Each file
# written front to back in one piece-by-piece run must have ONE regular
# extent item (a write continuing the file's extent of the same transaction
# grows it: file_w.c grow_last), as the kernel's delayed allocation gives.
# Cell "fill": a 3,000-file tree (bench/lib/mktree.py: directories in
# random order, a fifth of the files inline) extracted by tar.  The fs
# tree's leaves must be at least 70% full on average (a leaf pushes items
# into a neighbour before it splits; half-and-half splits of key-ordered
# inserts left them at 53%; the kernel's are at 85%), and the csum tree
# must take at most twice the leaves its items need (a csum item cut in the
# middle used to send its tail to a leaf of its own: 103 one-item leaves
# where 3 do).  The cells use the ubtrfs mkfs image and a mkfs.btrfs one.
# For every image: btrfs check --check-data-csum is clean and the kernel
# reads every byte as written (a model for "appends", tar --diff for
# "fill").  The trees are read with btrfs inspect-internal dump-tree.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE, python3, tar.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd tar
oracle_require_python
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

# The appends workload (argument: the directory) and its model (argument:
# --model; prints "name sha256" per file).  Contents are a function of the
# file name and offset, so the model needs no copy.
cat >"$T/appends.py" <<'EOF2'
import hashlib, os, sys

PIECE = 10240
SIZES = [10240, 10241, 20480, 30000, 65536, 100000, 409600, 1 << 20, 1572864 + 123]

def content(name, size):
    seed = hashlib.sha256(name.encode()).digest()
    out = bytearray()
    i = 0
    while len(out) < size:
        out += hashlib.sha256(seed + i.to_bytes(8, "little")).digest()
        i += 1
    return bytes(out[:size])

def files():
    """name -> final content, for the model and the checks."""
    f = {}
    for n, size in enumerate(SIZES):
        f[f"seq{n}"] = content(f"seq{n}", size)
    f["alt0"] = content("alt0", 307200)
    f["alt1"] = content("alt1", 204800 + 17)
    base = content("mid", 262144)
    patch = content("midpatch", 5000)
    f["mid"] = base[:70000] + patch + base[75000:]
    t = content("trunc", 200000)
    f["trunc"] = t[:50000] + content("trunc2", 90000)
    return f

def write_pieces(fd, data):
    for off in range(0, len(data), PIECE):
        os.write(fd, data[off:off + PIECE])

def run(d):
    flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
    for n, size in enumerate(SIZES):
        fd = os.open(os.path.join(d, f"seq{n}"), flags, 0o644)
        write_pieces(fd, content(f"seq{n}", size))
        os.close(fd)
    a = [content("alt0", 307200), content("alt1", 204800 + 17)]
    fds = [os.open(os.path.join(d, f"alt{i}"), flags, 0o644) for i in range(2)]
    for off in range(0, 307200, PIECE):
        for i in range(2):
            if off < len(a[i]):
                os.write(fds[i], a[i][off:off + PIECE])
    for fd in fds:
        os.close(fd)
    fd = os.open(os.path.join(d, "mid"), flags, 0o644)
    write_pieces(fd, content("mid", 262144))
    os.pwrite(fd, content("midpatch", 5000), 70000)
    os.close(fd)
    fd = os.open(os.path.join(d, "trunc"), flags, 0o644)
    write_pieces(fd, content("trunc", 200000))
    os.ftruncate(fd, 50000)
    os.lseek(fd, 50000, os.SEEK_SET)
    write_pieces(fd, content("trunc2", 90000))
    os.close(fd)

if sys.argv[1] == "--model":
    for name, data in sorted(files().items()):
        print(name, hashlib.sha256(data).hexdigest(), len(data))
else:
    run(sys.argv[1])
EOF2

# Leaf statistics of one tree of a dump: "leaves mean_fill item_bytes".
cat >"$T/leafstat.py" <<'EOF2'
import re, sys
nodesize = int(sys.argv[1])
room = nodesize - 101			# the leaf header
leaves, used, items = 0, 0, 0
for line in sys.stdin:
    m = re.match(r"leaf \d+ items (\d+) free space (\d+) ", line)
    if m:
        leaves += 1
        used += room - int(m.group(2))
        continue
    m = re.search(r"itemoff \d+ itemsize (\d+)", line)
    if m:
        items += int(m.group(1)) + 25	# with its item header
print(leaves, f"{used / max(1, leaves * room):.3f}", items)
EOF2

# Regular extent items per inode of the fs tree dump: "ino count".
cat >"$T/extents.py" <<'EOF2'
import re, sys, collections
per = collections.Counter()
cur = None
for line in sys.stdin:
    m = re.search(r"key \((\d+) EXTENT_DATA \d+\)", line)
    if m:
        cur = int(m.group(1))
        continue
    if cur is not None and "extent data disk byte" in line:
        if not re.search(r"disk byte 0 ", line):
            per[cur] += 1
        cur = None
    elif "inline extent" in line:
        cur = None
for ino, n in sorted(per.items()):
    print(ino, n)
EOF2

python3 "$T/appends.py" --model >"$T/appends.model"
python3 "$UBTRFS_SOURCE_ROOT/bench/lib/mktree.py" 3000 7 >"$T/tree.tar"

for tool in ubtrfs mkfs.btrfs; do
	name=s-$tool
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image "$name.img" 2G)
	if [[ $tool == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
	else
		oracle_mkfs -- "$img"
	fi
	mnt=$T/$name.mnt
	ro_fuse_up "$mnt" "$T/$name.log" rw "$img" ||
		{ ro_show "$T/$name.log"; oracle_fail "$name: rw mount did not come up"; }
	mkdir "$mnt/a"
	python3 "$T/appends.py" "$mnt/a" 2>"$T/$name.aerr" ||
		{ ro_fail "$name: the appends workload failed"; ro_show "$T/$name.aerr"; }
	tar -C "$mnt" -xf "$T/tree.tar" 2>"$T/$name.terr" ||
		{ ro_fail "$name: tar failed on the mount"; ro_show "$T/$name.terr"; }
	ro_fuse_down "$name" "$mnt" "$T/$name.log"

	oracle_btrfs_check --check-data-csum "$img" >"$T/$name.check" 2>&1 ||
		{ ro_fail "$name: btrfs check --check-data-csum is not clean"; ro_show "$T/$name.check" 30; }
	oracle_kmount -o ro "$T/$name.k" "$img" || { ro_fail "$name: the kernel does not mount it"; continue; }
	(cd "$T/$name.k/a" && for f in *; do
		printf '%s %s %s\n' "$f" "$(sha256sum <"$f" | cut -d' ' -f1)" "$(stat -c %s "$f")"
	done) >"$T/$name.read"
	diff "$T/appends.model" "$T/$name.read" >"$T/$name.rdiff" ||
		{ ro_fail "$name: the kernel reads other contents than written (< model, > kernel)"; ro_show "$T/$name.rdiff"; }
	tar -C "$T/$name.k" -df "$T/tree.tar" >"$T/$name.tdiff" 2>&1 ||
		{ ro_fail "$name: the kernel's tree differs from the tarball (tar --diff)"; ro_show "$T/$name.tdiff"; }
	# inode numbers of the sequentially written files, from the kernel
	declare -A seqino=()
	for f in "$T/$name.k"/a/seq*; do
		seqino[$(stat -c %i "$f")]=$(basename "$f")
	done
	oracle_kumount "$T/$name.k"

	nodesize=$(btrfs inspect-internal dump-super "$img" | awk '$1 == "nodesize" { print $2 }')
	btrfs inspect-internal dump-tree -t 5 "$img" >"$T/$name.fs" 2>&1 ||
		{ ro_fail "$name: dump-tree of the fs tree failed"; continue; }
	btrfs inspect-internal dump-tree -t 7 "$img" >"$T/$name.csum" 2>&1 ||
		{ ro_fail "$name: dump-tree of the csum tree failed"; continue; }

	# appends: one regular extent per file written front to back
	python3 "$T/extents.py" <"$T/$name.fs" >"$T/$name.ext"
	nseq=0
	while read -r ino n; do
		[[ -n ${seqino[$ino]:-} ]] || continue
		nseq=$((nseq + 1))
		((n == 1)) || ro_fail "$name: ${seqino[$ino]} was written in 10 KiB pieces and has $n extents, not 1"
	done <"$T/$name.ext"
	((nseq == ${#seqino[@]})) ||
		ro_fail "$name: found the extents of $nseq of the ${#seqino[@]} sequential files"
	unset seqino

	# fill: the fs tree's leaves, and the csum tree against what its
	# items need
	read -r fl ff _ < <(python3 "$T/leafstat.py" "$nodesize" <"$T/$name.fs")
	read -r cl cf cb < <(python3 "$T/leafstat.py" "$nodesize" <"$T/$name.csum")
	oracle_log "$name: fs tree $fl leaves, $ff full; csum tree $cl leaves, $cf full ($cb item bytes)"
	python3 -c "import sys; sys.exit(0 if float('$ff') >= 0.70 else 1)" ||
		ro_fail "$name: the fs tree's leaves are $ff full on average (want >= 0.70)"
	need=$(((cb + nodesize - 102) / (nodesize - 101)))
	((cl <= 2 * need + 1)) ||
		ro_fail "$name: the csum tree has $cl leaves for $cb bytes of items (at most $((2 * need + 1)))"
	oracle_log "$name: done"
done
ro_finish
