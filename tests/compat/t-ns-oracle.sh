#!/bin/bash
# t-ns-oracle: namespace operations through the engine (src/lib/trans/
# inode_w.c), judged by a POSIX reference directory, btrfs check and the
# kernel.
#
# Reference cells: ns_stress (tests/tools/ns_stress.c) applies thousands of
# random create/mkdir/symlink/mknod/link/unlink/rmdir/rename/chmod/chown/
# utimensat/setxattr/removexattr operations to the image through the engine
# and the same ones to a tmpfs with POSIX calls, comparing every return
# code and the inodes involved after each operation and the whole tree
# after each commit.  Then:
#   - btrfs check --readonly is clean;
#   - the kernel mounts the image and its manifest (tests/tools/manifest.py:
#     names, types, modes, owners, link counts, sizes, rdev, symlink
#     targets, xattrs, atime/mtime; not ctime, inode numbers, directory
#     sizes and link counts, which tmpfs counts its own way) equals the
#     reference's;
#   - the kernel and the reference both get the same workload (new files
#     with data and inline data, hard links, renames and removals of
#     ns_stress's entries, chmod, chown, xattrs); check is clean, manifests
#     equal (times aside);
#   - ns_stress runs again on the kernel's filesystem with the same
#     reference (entries with data extents it cannot delete yet: refused,
#     and skipped on the reference); check and the comparison again.
# Cells: mkfs.btrfs with 4 KiB nodes (INODE_REF items fill up: extrefs),
# default 16 KiB nodes, 4 KiB nodes without the extref feature (EMLINK),
# ubtrfs mkfs, a subvolume the kernel made (the kernel's views mount it).
#
# Kernel cells: the reference is a kernel btrfs mount of a second image
# made with the same mkfs options; in both, the kernel first makes
# directories with the nodatacow and nocompress flags and compression
# properties, which new inodes inherit.  Every errno and time change is the
# kernel's own, and at the end both fs trees are dumped and compared item by
# item (keys, sizes, link counts, modes, flags, indexes, names, refs,
# extrefs, symlink extents, xattrs), with generations, transids and times
# left out.  The kernel starts a new inode's change counter (sequence) from
# whatever its inode cache held, so sequences are compared as differences:
# the run is cut in two with an unmount in between, and what each inode
# gained in the second half must be equal.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_python
oracle_require_cmd chattr
oracle_require_ubtrfs
NS=${UBTRFS_NS_STRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/ns_stress}
[[ -x $NS ]] || oracle_skip "ns_stress tool not built ($NS)"
oracle_init

T=$ORACLE_TMP
FAILS=0
QUICK=${UBTRFS_TEST_QUICK:-0}

check_clean() {
	local what=$1 img=$2 out rc=0
	out=$(btrfs check --readonly "$img" 2>&1) || rc=$?
	if ((rc)) || ! grep -q "no error found" <<<"$out"; then
		printf '%s\n' "$out" | tail -n 30 >&2
		oracle_log "$what: btrfs check --readonly failed (exit $rc)"
		return 1
	fi
}

# manifest DIR OUT [notimes]: the manifest with directory link counts
# blanked (btrfs: 1, tmpfs: 2 + subdirectories), optionally without times.
manifest() {
	local dir=$1 out=$2 notimes=${3:-}
	oracle_manifest "$dir" --no-ctime --no-dir-size -o "$out.raw" || return 1
	awk -v nt="$notimes" '
		$2 == "d" { sub(/ nlink=[0-9]+/, " nlink=*") }
		nt != "" { gsub(/ (atime|mtime)=[-0-9.*]+/, "") }
		{ print }' "$out.raw" >"$out"
}

# compare WHAT IMG REF NOTIMES [-o MOUNTOPTS]: the kernel's view of IMG
# equals REF (NOTIMES non-empty: atime and mtime left out).
compare() {
	local what=$1 img=$2 ref=$3 notimes=$4 mnt=$T/kview
	shift 4
	oracle_kmount -o ro "$@" "$mnt" "$img" || return 1
	local rc=0
	manifest "$mnt" "$T/kernel.m" "$notimes" || rc=1
	oracle_kumount "$mnt"
	manifest "$ref" "$T/ref.m" "$notimes" || rc=1
	((rc == 0)) || { oracle_log "$what: manifest failed"; return 1; }
	if ! oracle_manifest_diff "$T/ref.m" "$T/kernel.m" >"$T/diff"; then
		head -n 20 "$T/diff" >&2
		oracle_log "$what: the kernel's tree differs from the reference"
		return 1
	fi
}

# The same workload on the kernel's mount and on the reference: files with
# data (regular and inline extents), a hole, links, renames and removals
# of what ns_stress made, modes, owners, xattrs.  Deterministic: it decides
# from the (equal) listings.
workload() {
	"$ORACLE_PYTHON" - "$1" <<'EOF'
import os, random, sys
root = sys.argv[1]
r = random.Random(7)
kw = os.path.join(root, "kw")
os.mkdir(kw, 0o755)
os.mkdir(os.path.join(kw, "sub"), 0o750)
with open(os.path.join(kw, "data"), "wb") as f:
    f.write(r.randbytes(70000))
with open(os.path.join(kw, "inline"), "wb") as f:
    f.write(b"small inline data\n")
with open(os.path.join(kw, "sparse"), "wb") as f:
    f.truncate(20000)
    f.seek(12000)
    f.write(b"x" * 100)
os.link(os.path.join(kw, "data"), os.path.join(kw, "sub", "data-link"))
os.link(os.path.join(kw, "inline"), os.path.join(kw, "inline-link"))
os.symlink("../kw/inline", os.path.join(kw, "sym"))
os.mkfifo(os.path.join(kw, "fifo"), 0o640)
os.setxattr(os.path.join(kw, "data"), "user.kw", b"\x01\x02kernel")
os.chmod(os.path.join(kw, "sub"), 0o2775)
os.chown(os.path.join(kw, "inline"), 1000, 100)
# What ns_stress made at the top: rename some, remove some, relink some.
top = sorted(os.listdir(root.encode()))
top = [n for n in top if n != b"kw"]
files = [n for n in top if not os.path.isdir(os.path.join(root.encode(), n))
         and not os.path.islink(os.path.join(root.encode(), n))]
dirs = [n for n in top if os.path.isdir(os.path.join(root.encode(), n))
        and not os.path.islink(os.path.join(root.encode(), n))]
rb = root.encode()
for i, n in enumerate(files[:3]):
    os.rename(os.path.join(rb, n), os.path.join(rb, b"kw-renamed-%d" % i))
for n in files[3:5]:
    os.unlink(os.path.join(rb, n))
for n in files[5:7]:
    os.link(os.path.join(rb, n), os.path.join(rb, b"kw", n[:200] + b"-link"))
for i, n in enumerate(dirs[:2]):
    os.rename(os.path.join(rb, n), os.path.join(rb, b"kw", b"moved-%d" % i))
for n in files[7:9]:
    p = os.path.join(rb, n)
    os.chmod(p, 0o600)
    if os.path.isfile(p):
        os.setxattr(p, "user.kw2", b"v" * 100)
EOF
}

# run_cell NAME MAKER "MKFS OPTS" OPS COMMIT_EVERY [SUBVOL]: with SUBVOL,
# the kernel first makes a subvolume of that name and everything happens
# in it (its id 256; the kernel's views mount it with subvol=).
run_cell() {
	local name=$1 maker=$2 opts=$3 ops=$4 every=$5 sub=${6:-}
	local img ref=$T/$name/ref kmnt=$T/$name/k out rc=0 start=$SECONDS
	local -a kopts=() nsenv=()
	img=$(oracle_image "$name/fs.img" 512M)
	if [[ $maker == ubtrfs ]]; then
		# shellcheck disable=SC2086
		out=$("$UBTRFS" mkfs -q -f $opts "$img" 2>&1) || rc=$?
	else
		# shellcheck disable=SC2086
		out=$(mkfs.btrfs -f -q $opts "$img" 2>&1) || rc=$?
	fi
	if ((rc)); then
		printf '%s\n' "$out" >&2
		oracle_log "$name: mkfs failed"
		return 1
	fi
	oracle_tmpfs "$ref" 256M
	oracle_kremount "$ref" noatime
	if [[ -n $sub ]]; then
		oracle_kmount "$kmnt" "$img" || return 1
		btrfs subvolume create "$kmnt/$sub" >/dev/null || return 1
		oracle_kumount "$kmnt"
		kopts=(-o "subvol=$sub")
		nsenv=(UBTRFS_NS_SUBVOL=256)
	fi
	if ! env "${nsenv[@]}" "$NS" "$img" "$ref" "$ops" 1 "$every"; then
		oracle_log "$name: ns_stress (first run) failed"
		return 1
	fi
	check_clean "$name (after ubtrfs)" "$img" || return 1
	compare "$name (after ubtrfs)" "$img" "$ref" "" "${kopts[@]}" || return 1
	oracle_kmount "${kopts[@]}" "$kmnt" "$img" || return 1
	workload "$kmnt" || { oracle_log "$name: kernel workload failed"; return 1; }
	oracle_kumount "$kmnt"
	workload "$ref" || { oracle_log "$name: reference workload failed"; return 1; }
	check_clean "$name (after the kernel)" "$img" || return 1
	compare "$name (after the kernel)" "$img" "$ref" notimes "${kopts[@]}" || return 1
	if ! env "${nsenv[@]}" "$NS" "$img" "$ref" "$ops" 2 "$every"; then
		oracle_log "$name: ns_stress (second run, on the kernel's changes) failed"
		return 1
	fi
	check_clean "$name (after ubtrfs again)" "$img" || return 1
	compare "$name (after ubtrfs again)" "$img" "$ref" "" "${kopts[@]}" || return 1
	oracle_log "$name: ok ($((SECONDS - start)) s)"
}

# The fs tree of IMG, item by item, without what the two writers may
# legitimately differ in: block layout, generations, transids, times,
# sequences (compared apart), and the values of directory indexes, which
# the kernel counts from its tree when it first needs one (a deletion not
# yet flushed or an evicted inode moves it): each index becomes its rank
# in the directory, in DIR_INDEX keys and in the INODE_REF/INODE_EXTREF
# entries that name it.
fsdump() {
	btrfs inspect-internal dump-tree -t 5 "$1" | "$ORACLE_PYTHON" -c '
import re, sys
lines = sys.stdin.buffer.read().decode("latin-1").splitlines()
skip = re.compile(r"^(leaf|node|fs uuid|chunk uuid|total|uuid|bytes used|btrfs-progs|fs tree key)"
                  r"|^\s+key \(.*\) block [0-9]+ gen|^\s+(atime|ctime|mtime|otime) ")
item = re.compile(r"^\s+item [0-9]+ key \(([0-9]+) ([A-Z_]+) ([0-9]+)\) itemoff [0-9]+ (itemsize [0-9]+)")
indexes = {}
for l in lines:
    m = item.match(l)
    if m and m.group(2) == "DIR_INDEX":
        indexes.setdefault(int(m.group(1)), []).append(int(m.group(3)))
rank = {d: {v: i for i, v in enumerate(sorted(vs))} for d, vs in indexes.items()}
def r(d, v):
    return "r%d" % rank[d][v] if d in rank and v in rank[d] else "missing-%d" % v
out = []
cur = None
for l in lines:
    if skip.match(l):
        continue
    m = item.match(l)
    if m:
        o, t, off = int(m.group(1)), m.group(2), int(m.group(3))
        cur = (o, t, off)
        if t == "DIR_INDEX":
            off = r(o, off)
        out.append("\tkey (%d %s %s) %s" % (o, t, off, m.group(4)))
        continue
    if cur and cur[1] == "INODE_REF":
        l = re.sub(r"index ([0-9]+)", lambda x: "index " + r(cur[2], int(x.group(1))), l)
    if cur and cur[1] == "INODE_EXTREF":
        l = re.sub(r"index ([0-9]+) parent ([0-9]+)",
                   lambda x: "index %s parent %s" % (r(int(x.group(2)), int(x.group(1))), x.group(2)), l)
    l = re.sub(r"(generation|transid|gen) [0-9]+", r"\1 G", l)
    l = re.sub(r"sequence [0-9]+", "sequence S", l)
    out.append(l)
sys.stdout.buffer.write(("\n".join(out) + "\n").encode("latin-1"))
'
}

# seqs IMG: "ino generation sequence" per inode.
seqs() {
	btrfs inspect-internal dump-tree -t 5 "$1" | awk '
		/key \([0-9]+ INODE_ITEM 0\) itemoff/ { ino = substr($4, 2); want = 1; next }
		want && /generation [0-9]+ transid/ { gen = $2 }
		want && /sequence/ { print ino, gen, $2; want = 0 }'
}

# seq_deltas OURS_A OURS_B KERNEL_A KERNEL_B: what each inode's sequence
# gained between the two points must be the same for both writers (inodes
# that lived through both, per their generation, on both sides).
seq_deltas() {
	"$ORACLE_PYTHON" - "$@" <<'EOF'
import sys
def load(p):
    d = {}
    for line in open(p):
        ino, gen, seq = line.split()
        d[int(ino)] = (int(gen), int(seq))
    return d
oa, ob, ka, kb = (load(p) for p in sys.argv[1:5])
bad = compared = 0
for ino in sorted(set(oa) & set(ob) & set(ka) & set(kb)):
    if oa[ino][0] != ob[ino][0] or ka[ino][0] != kb[ino][0]:
        continue
    compared += 1
    d1, d2 = ob[ino][1] - oa[ino][1], kb[ino][1] - ka[ino][1]
    if d1 != d2:
        bad += 1
        if bad <= 10:
            print("inode %d: sequence +%d here, +%d by the kernel" % (ino, d1, d2))
if 256 in ob and 256 in kb and ob[256][1] != kb[256][1]:
    bad += 1
    print("root directory: sequence %d here, %d by the kernel" % (ob[256][1], kb[256][1]))
print("%d inodes compared" % compared, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

# kernel_cell NAME "MKFS OPTS" OPS COMMIT_EVERY HALVES PREP: the reference
# is the kernel; PREP runs in both images (by the kernel) first.
kernel_cell() {
	local name=$1 opts=$2 ops=$3 every=$4 halves=$5 prep=$6
	local img kimg ref=$T/$name/ref
	img=$(oracle_image "$name/fs.img" 512M)
	kimg=$(oracle_image "$name/kernel.img" 512M)
	# shellcheck disable=SC2086
	if ! mkfs.btrfs -f -q $opts "$img" >/dev/null 2>&1 ||
		! mkfs.btrfs -f -q $opts "$kimg" >/dev/null 2>&1; then
		oracle_log "$name: mkfs failed"
		return 1
	fi
	local i
	for i in "$img" "$kimg"; do
		oracle_kmount "$ref" "$i" || return 1
		(cd "$ref" && eval "$prep") || { oracle_log "$name: preparing failed"; return 1; }
		oracle_kumount "$ref"
	done
	local half start=$SECONDS
	for ((half = 1; half <= halves; half++)); do
		oracle_kmount -o noatime "$ref" "$kimg" || return 1
		# No reopen inside a run: the kernel keeps its counters too.
		if ! UBTRFS_NS_REOPEN=0 "$NS" "$img" "$ref" "$ops" "$half" "$every"; then
			oracle_log "$name: ns_stress (half $half) failed"
			return 1
		fi
		oracle_kumount "$ref"
		check_clean "$name (half $half)" "$img" || return 1
		check_clean "$name (the kernel's, half $half)" "$kimg" || return 1
		fsdump "$img" >"$T/$name/ours.dump"
		fsdump "$kimg" >"$T/$name/kernel.dump"
		if ! diff "$T/$name/kernel.dump" "$T/$name/ours.dump" >"$T/$name/dump.diff"; then
			head -n 30 "$T/$name/dump.diff" >&2
			oracle_log "$name: the fs trees differ from the kernel's (half $half)"
			return 1
		fi
		seqs "$img" >"$T/$name/ours.seq$half"
		seqs "$kimg" >"$T/$name/kernel.seq$half"
	done
	if ((halves == 2)) && ! seq_deltas "$T/$name/ours.seq1" "$T/$name/ours.seq2" \
		"$T/$name/kernel.seq1" "$T/$name/kernel.seq2"; then
		oracle_log "$name: sequence counters differ from the kernel's"
		return 1
	fi
	oracle_log "$name: $(wc -l <"$T/$name/ours.dump") dump lines equal to the kernel's: ok" \
		"($((SECONDS - start)) s)"
}

cell() {
	local -a a=("$@")
	((QUICK)) && a[3]=$((a[3] / 4))
	run_cell "${a[@]}" || FAILS=$((FAILS + 1))
}

kcell() {
	local -a a=("$@")
	((QUICK)) && a[2]=$((a[2] / 4))
	kernel_cell "${a[@]}" || FAILS=$((FAILS + 1))
}

# Directories whose flags new inodes inherit.
FLAGS='mkdir C N && chattr +C C && chattr +m N'
# And compression properties, which pass on too.  The kernel passes one on
# only while it has the directory's properties loaded, and it skips
# loading them when the directory's xattrs begin in the leaf after its
# inode item (layout, which differs): so a small tree, 16 KiB nodes, one
# mount.
PROPS="$FLAGS && mkdir P Q R && btrfs property set P compression zstd:3 &&
	btrfs property set Q compression none && btrfs property set R compression lzo &&
	mkdir C/sub P/sub"

#    name           maker   mkfs options           ops   commit  subvolume
cell progs-4k       progs   "-n 4096"              2500  50
cell progs-16k      progs   ""                     2000  100
cell progs-noextref progs   "-n 4096 -O ^extref"   2500  50
cell ubt-mkfs       ubtrfs  ""                     1500  100
cell subvol         progs   "-n 4096"              1200  50  sv
#     name          mkfs options                   ops   commit halves prep
kcell kernel-4k     "-n 4096"                      1500  50    2  "$FLAGS"
kcell kernel-noext  "-n 4096 -O ^extref"           1500  50    2  "$FLAGS"
UBTRFS_NS_POP=40 \
kcell kernel-props  ""                             300   50    1  "$PROPS"

if ((FAILS)); then
	oracle_fail "$FAILS cell(s) failed"
fi
oracle_log "all cells passed"
