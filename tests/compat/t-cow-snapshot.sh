#!/bin/bash
# t-cow-snapshot: the copy-on-write engine writes into a subvolume whose
# blocks snapshots share, on filesystems the kernel made; btrfs check and
# the kernel judge, and every snapshot must stay exactly as it was.
#
# For each cell (mkfs.btrfs options, devices):
#   1. mkfs.btrfs; the kernel mounts it read-write and builds subvolume `sv`:
#      the workload (small profile, --btrfs: reflinks, compression, nodatacow,
#      nested subvolumes) plus thousands of files and directories with
#      xattrs (inline and regular data) and user.kN xattrs on sv's root
#      directory, so that sv's tree has several levels at 4 KiB nodes;
#      read-only snapshot `snap1` of sv; more changes to sv (files added,
#      removed and rewritten, root xattrs set and removed); writable
#      snapshot `snap2` of sv; small changes to snap2; writable snapshot
#      `snap3` of snap2; unmount.  Every block of sv is now shared with
#      snap2 and many with snap1; snap2's with snap3.
#   2. Reference (kernel, read-only mount of the top level): the manifest
#      (inode numbers included) of sv, snap1, snap2, snap3; the subvolume
#      ids (`btrfs subvolume list`); `btrfs inspect-internal dump-tree` of
#      every snapshot's tree (a shared block is never changed in place, so
#      the dump must stay byte-identical).
#   3. cow_stress (tests/tools/cow_stress.c) with UBTRFS_COW_SUBVOL=<sv>:
#      random user.kN xattr operations on sv's root directory through the
#      engine, committing every 50-100 operations; it starts from the
#      user.kN xattrs the kernel left.  Then:
#        - btrfs check --readonly is clean;
#        - the kernel's getfattr of sv's root equals cow_stress's model;
#        - sv's manifest equals the reference but for the root's user.k
#          xattrs; snap1, snap2, snap3: manifests and tree dumps unchanged;
#          the list of subvolumes unchanged.
#   4. cow_stress again on snap2 (writable; shares blocks with sv's old tree
#      and with snap3): check clean; snap2's getfattr equals the new model,
#      the rest of snap2 unchanged; sv (as after step 3), snap1 and snap3
#      unchanged.
# When cow_stress fails, the checks of 3 that do not need its model still run
# and say whether the failed run left the filesystem clean and the
# snapshots unchanged (an engine that refuses must do no damage), but the
# cell fails either way.
#
# Cells: 4 KiB nodes (default features: skinny metadata, free-space tree,
# no-holes), 16 KiB nodes, 4 KiB without skinny metadata, 4 KiB with RAID1
# metadata on two devices.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, python3,
# getfattr/setfattr and the cow_stress tool.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_python
oracle_require_cmd getfattr setfattr
COW=${UBTRFS_COW_STRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/cow_stress}
[[ -x $COW ]] || oracle_skip "cow_stress tool not built ($COW)"
oracle_init

T=$ORACLE_TMP
FAILS=0

# ---------------------------------------------------------------------------
# Content.  make_content DIR SEED PHASE: deterministic files, directories and
# xattrs.  PHASE "fill" builds DIR/many and the user.kN xattrs of DIR itself;
# "change" adds, removes and rewrites some of it (and DIR's user.kN);
# "touch" makes a few changes only.
make_content() {
	"$ORACLE_PYTHON" - "$@" <<'EOF'
import os, random, sys

top, seed, phase = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed * 7 + {"fill": 0, "change": 1, "touch": 2}[phase])
many = os.path.join(top, "many")

def data(n):
    return bytes(rng.getrandbits(8) for _ in range(min(n, 64))) * (n // 64 + 1)

def write(path, n):
    with open(path, "wb") as f:
        f.write(data(n)[:n])

def size():
    r = rng.random()
    if r < 0.1:
        return 0
    if r < 0.7:
        return rng.randrange(1, 2000)        # inline
    return rng.randrange(4096, 40000)        # regular extents

def root_xattrs(keys):
    for k in keys:
        n = rng.choice((0, rng.randrange(1, 64), rng.randrange(64, 600)))
        os.setxattr(top, "user.k%d" % k, data(n)[:n])

if phase == "fill":
    os.mkdir(many)
    for d in range(40):
        dp = os.path.join(many, "d%02d" % d)
        os.mkdir(dp)
        os.setxattr(dp, "user.dir", data(rng.randrange(8, 200)))
        for i in range(40):
            p = os.path.join(dp, "f%03d-%s" % (i, "x" * rng.randrange(0, 40)))
            write(p, size())
            os.setxattr(p, "user.meta", data(rng.randrange(16, 300)))
            if rng.random() < 0.2:
                os.setxattr(p, "user.big", data(rng.randrange(500, 1500)))
    root_xattrs(range(0, 120, 2))
elif phase == "change":
    names = sorted(os.listdir(many))
    for d in names:
        dp = os.path.join(many, d)
        files = sorted(os.listdir(dp))
        for f in files:
            p = os.path.join(dp, f)
            r = rng.random()
            if r < 0.1:
                os.unlink(p)
            elif r < 0.15:
                with open(p, "r+b") as fh:
                    fh.seek(rng.randrange(0, 3000))
                    fh.write(data(500))
            elif r < 0.2:
                os.setxattr(p, "user.meta", data(rng.randrange(16, 300)))
        for i in range(6):
            p = os.path.join(dp, "new%02d" % i)
            write(p, size())
            os.setxattr(p, "user.meta", data(rng.randrange(16, 300)))
    root_xattrs(rng.sample(range(0, 120, 2), 12) + [121, 123, 125, 127])
    for k in rng.sample(range(0, 120, 2), 6):
        try:
            os.removexattr(top, "user.k%d" % k)
        except OSError:
            pass
else:
    write(os.path.join(top, "touched"), 3000)
    os.unlink(os.path.join(many, "d03", sorted(os.listdir(os.path.join(many, "d03")))[0]))
    root_xattrs([7, 9, 11])
EOF
}

# ---------------------------------------------------------------------------
# Offline tools on the images.  For several devices the images get loop
# devices (found by `btrfs device scan`) only while the tool runs: cow_stress
# writes the image files, so no loop device may keep stale cached blocks.

# offline CMD... -- IMG...: run CMD... DEV (DEV = the image, or the first
# loop device of a multi-device set).
offline() {
	local -a cmd=() imgs=() loops=()
	while [[ $1 != -- ]]; do
		cmd+=("$1")
		shift
	done
	shift
	imgs=("$@")
	local dev=${imgs[0]} d rc=0
	if ((${#imgs[@]} > 1)); then
		for d in "${imgs[@]}"; do
			loops+=("$(oracle_loop "$d")")
		done
		btrfs device scan "${loops[@]}" >/dev/null 2>&1 || true
		dev=${loops[0]}
	fi
	"${cmd[@]}" "$dev" || rc=$?
	for d in "${loops[@]}"; do
		oracle_unloop "$d"
	done
	return $rc
}

# check_clean WHAT IMG...: btrfs check --readonly finds nothing.
check_clean() {
	local what=$1 out rc=0
	shift
	out=$(offline btrfs check --readonly -- "$@" 2>&1) || rc=$?
	if ((rc)) || ! grep -q "no error found" <<<"$out"; then
		printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /' >&2
		oracle_log "$what: btrfs check --readonly failed (exit $rc)"
		return 1
	fi
}

# dump_trees OUTPREFIX IMG...: OUTPREFIX.S.dump, dump-tree of snapshot S's
# tree (ids in IDS) for S in snap1 snap2 snap3.
dump_trees() {
	local pre=$1 name
	shift
	for name in snap1 snap2 snap3; do
		offline btrfs inspect-internal dump-tree -t "${IDS[$name]}" -- "$@" \
			>"$pre.$name.dump.raw" 2>"$pre.$name.dump.err" ||
			{ cat "$pre.$name.dump.err" >&2; return 1; }
		# Without the superblock summary at the end (bytes used changes).
		sed -E '/^(total bytes|bytes used|uuid) /d' "$pre.$name.dump.raw" >"$pre.$name.dump"
		rm -f -- "$pre.$name.dump.raw"
		grep -a -q -E '^(leaf|node) [0-9]+ ' "$pre.$name.dump" || {
			head -n 5 "$pre.$name.dump" >&2
			return 1
		}
	done
}

# strip_rootk MANIFEST: MANIFEST.s, the manifest without the user.k xattrs and
# the ctime of its root (the kernel changes the ctime with an xattr; the
# engine need not).
strip_rootk() {
	sed -E -e '1s/ xattr:user\.k[0-9]+=[0-9a-f]*//g' -e '1s/ ctime=[^ ]*//' "$1" >"$1s"
}

# record OUTPREFIX IMG...: kernel read-only mount of the top level; for every
# subvolume S of sv snap1 snap2 snap3, OUTPREFIX.S.m (manifest, inode
# numbers included), OUTPREFIX.S.ms (the same, see strip_rootk) and
# OUTPREFIX.S.x (getfattr of user.k on its root); OUTPREFIX.list (ids and
# paths of all subvolumes).
record() {
	local pre=$1 mnt=$T/mnt s rc=0
	shift
	oracle_kmount -o ro,subvolid=5 "$mnt" "$@" || return 1
	# The manifests in parallel (they dominate the run time).
	local -a pids=()
	for s in sv snap1 snap2 snap3; do
		oracle_manifest "$mnt/$s" --inodes -o "$pre.$s.m" &
		pids+=($!)
		oracle_register_pid "$!"
	done
	for s in "${pids[@]}"; do
		wait "$s" || rc=1
	done
	for s in sv snap1 snap2 snap3; do
		if [[ -s $pre.$s.m ]]; then
			strip_rootk "$pre.$s.m"
		fi
		getfattr -d -m '^user\.k' -e hex -- "$mnt/$s" 2>/dev/null |
			grep -v -e '^#' -e '^$' | sort >"$pre.$s.x" || true
	done
	btrfs subvolume list "$mnt" | awk '{ print $2, $NF }' >"$pre.list" || rc=1
	oracle_kumount "$mnt"
	return $rc
}

# same WHAT A B: files A and B are equal (shows the difference if not).
same() {
	local what=$1 a=$2 b=$3
	if ! diff -u "$a" "$b" >"$T/diff" 2>&1; then
		head -n 20 "$T/diff" | sed 's/^/    /' >&2
		oracle_log "$what"
		return 1
	fi
}

# same_manifest WHAT A B: manifest files A and B are byte-equal
# (manifest.py --diff shows how they differ if not).
same_manifest() {
	local what=$1 out
	cmp -s -- "$2" "$3" && return 0
	out=$(oracle_manifest_diff "$2" "$3" 2>&1) || true
	[[ -n $out ]] || out=$(diff -- "$2" "$3")
	printf '%s\n' "$out" | head -n 20 | sed 's/^/    /' >&2
	oracle_log "$what"
	return 1
}

# model_equal WHAT MODEL XATTRS: cow_stress's model equals the kernel's view.
model_equal() {
	same "$1" <(sort "$2") "$3"
}

# build NAME SEED IMG...: step 1 (see the top).  Runs under `||` (no set -e):
# every step checks its status.
build() {
	local name=$1 seed=$2 mnt=$T/mnt
	shift 2
	oracle_kmount "$mnt" "$@" || return 1
	{
		btrfs subvolume create "$mnt/sv" >/dev/null &&
			mkdir "$mnt/sv/w" &&
			oracle_workload "$mnt/sv/w" --seed "$seed" --btrfs --profile small \
				2>"$T/$name/workload.log" &&
			make_content "$mnt/sv" "$seed" fill && sync &&
			btrfs subvolume snapshot -r "$mnt/sv" "$mnt/snap1" >/dev/null &&
			make_content "$mnt/sv" "$seed" change && sync &&
			btrfs subvolume snapshot "$mnt/sv" "$mnt/snap2" >/dev/null &&
			make_content "$mnt/snap2" "$seed" touch && sync &&
			btrfs subvolume snapshot "$mnt/snap2" "$mnt/snap3" >/dev/null &&
			# The workload deletes a snapshot: let the cleaner finish.
			btrfs subvolume sync "$mnt" >/dev/null
	} || {
		tail -n 5 "$T/$name/workload.log" >&2
		oracle_kumount "$mnt"
		return 1
	}
	oracle_kumount "$mnt"
}

# tree_level IMG...: level of sv's root node.
tree_level() {
	offline btrfs inspect-internal dump-tree -t "${IDS[sv]}" -- "$@" 2>/dev/null |
		awk '!n && /^node [0-9]+ level / { l = $4 } !n && /^(node|leaf) [0-9]+ / { n = 1 }
			END { print l + 0 }'
}

declare -A IDS

run_cell() {
	local name=$1 opts=$2 ndev=$3 seed=$4 ops=$5 every=$6 i
	local -a imgs=()
	mkdir -p "$T/$name"
	for ((i = 0; i < ndev; i++)); do
		imgs+=("$(oracle_image "$name/d$i.img" 1G)")
	done
	# shellcheck disable=SC2086
	oracle_mkfs $opts -- "${imgs[@]}"
	build "$name" "$seed" "${imgs[@]}" || { oracle_log "$name: building the filesystem failed"; return 1; }
	check_clean "$name (as the kernel made it)" "${imgs[@]}" || return 1

	local R=$T/$name/ref A=$T/$name/after1 B=$T/$name/after2 s
	record "$R" "${imgs[@]}" || { oracle_log "$name: reference mount failed"; return 1; }
	IDS=()
	for s in sv snap1 snap2 snap3; do
		IDS[$s]=$(awk -v p="$s" '$2 == p { print $1 }' "$R.list")
		[[ -n ${IDS[$s]} ]] || { oracle_log "$name: no subvolume $s"; return 1; }
	done
	dump_trees "$R" "${imgs[@]}" || { oracle_log "$name: dump-tree failed"; return 1; }
	local level joined bad=0
	level=$(tree_level "${imgs[@]}")
	oracle_log "$name: sv=${IDS[sv]} snap1=${IDS[snap1]} snap2=${IDS[snap2]} snap3=${IDS[snap3]}," \
		"sv's tree has root level ${level:-?}, $(wc -l <"$R.sv.m") entries," \
		"$(wc -l <"$R.sv.x") user.k xattrs on its root"
	joined=$(IFS=,; printf '%s' "${imgs[*]}")

	# 3. The engine writes into sv.
	local cow_ok=1 damage=0
	if ! UBTRFS_COW_SUBVOL=${IDS[sv]} "$COW" "$joined" "$ops" "$seed" "$every" "$A.model" \
		2>"$A.cow.log"; then
		tail -n 5 "$A.cow.log" | sed 's/^/    /' >&2
		oracle_log "$name: cow_stress on sv (subvolume ${IDS[sv]}) failed"
		cow_ok=0
		bad=1
	fi
	check_clean "$name (after cow_stress on sv)" "${imgs[@]}" || damage=1
	record "$A" "${imgs[@]}" || { oracle_log "$name: kernel mount after cow_stress failed"; return 1; }
	dump_trees "$A" "${imgs[@]}" || { oracle_log "$name: dump-tree failed"; return 1; }
	if ((cow_ok)); then
		model_equal "$name: sv's root xattrs (kernel) differ from cow_stress's model" \
			"$A.model" "$A.sv.x" || bad=1
	fi
	same_manifest "$name: sv changed beyond its root's user.k xattrs" \
		"$R.sv.ms" "$A.sv.ms" || damage=1
	for s in snap1 snap2 snap3; do
		same_manifest "$name: $s changed (manifest) after cow_stress on sv" \
			"$R.$s.m" "$A.$s.m" || damage=1
		same "$name: $s changed (dump-tree) after cow_stress on sv" \
			"$R.$s.dump" "$A.$s.dump" || damage=1
	done
	same "$name: the subvolume list changed" "$R.list" "$A.list" || damage=1
	if ((!cow_ok && !damage)); then
		oracle_log "$name: after the failed cow_stress the filesystem is still clean" \
			"and sv and every snapshot are unchanged"
	fi
	if ((bad || damage)); then
		return 1
	fi
	oracle_log "$name: sv: $(grep -o '[0-9]* ops.*' "$A.cow.log" | tail -n 1)"

	# 4. The engine writes into snap2.
	cow_ok=1
	if ! UBTRFS_COW_SUBVOL=${IDS[snap2]} "$COW" "$joined" "$ops" "$((seed + 1))" "$every" \
		"$B.model" 2>"$B.cow.log"; then
		tail -n 5 "$B.cow.log" | sed 's/^/    /' >&2
		oracle_log "$name: cow_stress on snap2 (subvolume ${IDS[snap2]}) failed"
		cow_ok=0
		bad=1
	fi
	check_clean "$name (after cow_stress on snap2)" "${imgs[@]}" || bad=1
	record "$B" "${imgs[@]}" || { oracle_log "$name: kernel mount after cow_stress failed"; return 1; }
	dump_trees "$B" "${imgs[@]}" || { oracle_log "$name: dump-tree failed"; return 1; }
	if ((cow_ok)); then
		model_equal "$name: snap2's root xattrs (kernel) differ from cow_stress's model" \
			"$B.model" "$B.snap2.x" || bad=1
	fi
	same_manifest "$name: snap2 changed beyond its root's user.k xattrs" \
		"$R.snap2.ms" "$B.snap2.ms" || bad=1
	same_manifest "$name: sv changed (manifest) after cow_stress on snap2" \
		"$A.sv.m" "$B.sv.m" || bad=1
	for s in snap1 snap3; do
		same_manifest "$name: $s changed (manifest) after cow_stress on snap2" \
			"$R.$s.m" "$B.$s.m" || bad=1
		same "$name: $s changed (dump-tree) after cow_stress on snap2" \
			"$R.$s.dump" "$B.$s.dump" || bad=1
	done
	same "$name: the subvolume list changed" "$R.list" "$B.list" || bad=1
	if ((bad)); then
		return 1
	fi
	oracle_log "$name: snap2: $(grep -o '[0-9]* ops.*' "$B.cow.log" | tail -n 1)"
	oracle_log "$name: ok"
}

# UBTRFS_TEST_QUICK=1 (the sanitizer run of scripts/test): the first two cells.
QUICK=${UBTRFS_TEST_QUICK:-0}
NCELLS=0
cell() {
	NCELLS=$((NCELLS + 1))
	((QUICK && NCELLS > 2)) && return 0
	run_cell "$@" || FAILS=$((FAILS + 1))
}

#    name           mkfs.btrfs options            devs seed ops  commit
cell progs-4k       "-n 4096"                      1   11   5000 60
cell progs-16k      "-n 16384"                     1   12   4000 100
cell progs-noskinny "-n 4096 -O ^skinny-metadata"  1   13   4000 50
cell progs-raid1    "-n 4096 -m raid1 -d single"   2   14   4000 80

if ((FAILS)); then
	oracle_fail "$FAILS cell(s) failed"
fi
oracle_log "all cells passed"
