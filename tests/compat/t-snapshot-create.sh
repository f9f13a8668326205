#!/bin/bash
# t-snapshot-create: `ubtrfs subvolume create/snapshot/delete` on unmounted images, judged
# by btrfs check and by the kernel making the same snapshots.
#
# For each cell (the filesystem's maker and node size):
#   1. mkfs; the kernel mounts it and builds the top level: the workload
#      (small profile, --btrfs: nested subvolumes, snapshots, reflinks,
#      compression, nodatacow) in w/, and 1,500 files in many/ (several
#      tree levels at 4 KiB nodes); subvolume sv with the workload and
#      files of its own; recv/ro0, a received subvolume (btrfs send |
#      btrfs receive of a read-only snapshot of sv).  Unmount; a copy of
#      the image for the kernel.
#   2. Three new subvolumes (/new1, /sv/new2, /nocow/new3: the top level
#      has a compression property, nocow the NODATACOW flag; umask 027) by
#      `ubtrfs subvolume create` and by the kernel's `btrfs subvolume
#      create` (and a sync), then the
#      same snapshots, by `ubtrfs subvolume snapshot` on the image (btrfs
#      check --readonly clean after each) and by the kernel's `btrfs
#      subvolume snapshot` on the copy:
#        - the top level into itself (/s-top), writable;
#        - sv, read-only (-r), as /s-ro;
#        - sv into the existing directory /w (it becomes /w/sv);
#        - /s-top (a snapshot) as /sv/s-nested, in another subvolume;
#        - recv/ro0, read-only, as /s-recv (keeps the received uuid).
#   3. The kernel mounts both read-only.  Equal: the manifests of the whole
#      tree (every subvolume, placeholders of nested subvolumes, inode
#      numbers, data, xattrs; atime and ctime left out, and the mtime of
#      the directories that got the new names); `btrfs subvolume list` (ids,
#      parents, paths; generations left out); the ro property of each
#      snapshot; each snapshot's parent uuid is its source's uuid, its own
#      uuid new; as many uuid tree entries of each type as the kernel's;
#      the snapshots' ROOT_ITEMs as btrfs-progs prints them, but for the
#      root block's address, the uuids, otime and ctime; the new
#      subvolumes' root directories (inode, mode, owner, links).
#   4. The kernel mounts the image read-write and changes sv, s-top, w/sv
#      and the new subvolumes (files written, removed, renamed); btrfs
#      check clean; s-ro and s-nested unchanged (manifests).
#   5. ubtrfs's own read-write mount (FUSE) writes into s-top and sv - the
#      engine copying blocks the snapshots share; btrfs check clean; the
#      kernel reads the new files; s-ro and s-nested unchanged again.
#   6. Refusals, each leaving the image unchanged (btrfs check; the same
#      list): a SOURCE that is not a subvolume, a DEST that exists, a DEST
#      whose parent does not exist, a read-only parent subvolume (s-ro);
#      and creates of an existing name, under a missing parent, in s-ro,
#      of "..", under a regular file.
#
# Then `ubtrfs subvolume delete` against the kernel's (see deletes below).
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, python3; step 5
# also FUSE (skipped with a message where it is missing, a failure under
# UBTRFS_REQUIRE_ORACLE=1).
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_python
oracle_require_ubtrfs
oracle_init

T=$ORACLE_TMP
FAILS=0
fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

# many_files DIR N SEED: N small and some larger files in DIR.
many_files() {
	"$ORACLE_PYTHON" - "$@" <<'EOF'
import os, random, sys
d, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
os.makedirs(d, exist_ok=True)
for i in range(n):
    size = rng.choice([0, 10, 300, 2000, 5000, 70000]) if i % 50 else 300000
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(bytes(rng.getrandbits(8) for _ in range(min(size, 97))) * (size // 97 + 1))
EOF
}

# manifest MNT OUT: the whole tree, for comparing two filesystems that made
# the same snapshots at different times: no atime/ctime, and no mtime for
# the directories that received the new names.
manifest() {
	oracle_manifest "$1" --inodes --flags --no-atime --no-ctime >"$2.raw" || return 1
	"$ORACLE_PYTHON" - "$2.raw" >"$2" <<'EOF'
import re, sys
touched = {".", "w", "sv", "s-top", "sv/s-nested", "new1", "sv/new2", "s-ro", "w/sv",
           "nocow", "nocow/new3", "s-top/nocow", "sv/s-nested/nocow"}
for line in open(sys.argv[1]):
    path = line.split(" ", 1)[0]
    if path in touched:
        line = re.sub(r" mtime=\S+", "", line)
    sys.stdout.write(line)
EOF
}

# subvols MNT: `btrfs subvolume list` of a kernel mount, without
# generations.
subvols() {
	btrfs subvolume list "$1" | sed -E 's/ gen [0-9]+//' | sort
}

# root_items IMG ID...: the ROOT_ITEMs of these trees as btrfs-progs
# prints them, with what must differ between two runs masked: the root
# block's address, the uuid and parent uuid (compared on their own), otime
# and ctime (the times of changes; their transids stay).
root_items() {
	local img=$1
	shift
	btrfs inspect-internal dump-tree -t root "$img" | "$ORACLE_PYTHON" -c '
import re, sys
want = set(sys.argv[1:])
out, cur = [], None
for line in sys.stdin:
    m = re.match(r"\s*item \d+ key \((\S+) (\S+) (\S+)\)", line)
    if m:
        cur = m.group(1) if m.group(2) == "ROOT_ITEM" and m.group(1) in want else None
        if cur:
            out.append("key (%s ROOT_ITEM %s)" % (cur, m.group(3)))
        continue
    if cur is None or not line.startswith("\t\t"):
        cur = None
        continue
    line = line.strip()
    if line.startswith(("uuid ", "parent_uuid ", "otime ", "ctime ")):
        continue
    out.append(re.sub(r"bytenr \d+", "bytenr *", line))
print("\n".join(out))
' "$@"
}

# uuid_count IMG TYPE: subvolume ids under uuid-tree items of one type
# (one item holds every subvolume with that uuid).
uuid_count() {
	btrfs inspect-internal dump-tree -t uuid "$1" |
		awk -v ty=" $2 " '/item [0-9]+ key / { on = index($0, ty) > 0; next }
			on && /subvol_id/ { n++ } END { print n + 0 }'
}

# uuid_of MNT/PATH [Parent]: a subvolume's uuid, or its parent uuid.
uuid_of() {
	btrfs subvolume show "$1" | awk -v p="${2:-}" '
		p == "" && $1 == "UUID:" { print $2 }
		p != "" && $1 == "Parent" && $2 == "UUID:" { print $3 }'
}

snap_ubtrfs() {
	local img=$1 what=$2
	shift 2
	local out
	if ! out=$("$UBTRFS" subvolume snapshot "$@" 2>&1); then
		printf '%s\n' "$out"
		fail "$what: ubtrfs subvolume snapshot $* failed"
		return 1
	fi
	oracle_check_clean "$what" "$img" || fail "$what: btrfs check after the snapshot"
}

cell() {
	local name=$1 maker=$2 opts=$3
	local img=$T/$name.img kimg=$T/$name.k.img m=$T/$name.m k=$T/$name.k
	echo "== $name ($maker $opts)"
	rm -f "$img" "$kimg"
	truncate -s 1G "$img"
	oracle_mkfs_with "$maker" "$opts" "$img" || { fail "$name: mkfs"; return; }
	oracle_kmount "$m" "$img" || { fail "$name: kernel mount"; return; }
	mkdir "$m/w"
	oracle_workload --seed 3 --profile small --btrfs "$m/w" >/dev/null
	many_files "$m/many" 1500 7
	btrfs subvolume create "$m/sv" >/dev/null
	mkdir "$m/sv/w"
	oracle_workload --seed 5 --profile small "$m/sv/w" >/dev/null
	many_files "$m/sv/many" 400 9
	# A received subvolume (its ROOT_ITEM has a received uuid).
	btrfs subvolume snapshot -r "$m/sv" "$m/ro0" >/dev/null
	mkdir "$m/recv"
	btrfs send -q "$m/ro0" | btrfs receive -q "$m/recv" ||
		{ fail "$name: btrfs send | receive"; oracle_kumount "$m"; return; }
	# What new subvolumes inherit: the top level's compression property,
	# not the NODATACOW flag of the directory they are made in.
	mkdir "$m/nocow"
	chattr +C "$m/nocow"
	btrfs property set "$m" compression zstd
	oracle_kumount "$m"
	cp --sparse=always "$img" "$kimg"

	# 2. The snapshots, both ways.
	local src dst ro
	local -a ops=("c /new1" "c /sv/new2" "c /nocow/new3" "- / /s-top" "r /sv /s-ro"
		"- /sv /w" "- /s-top /sv/s-nested" "r /recv/ro0 /s-recv")
	local out
	for op in "${ops[@]}"; do
		read -r ro src dst <<<"$op"
		if [[ $ro == c ]]; then
			out=$(umask 027 && "$UBTRFS" subvolume create "$img" "$src" 2>&1) ||
				{ printf '%s\n' "$out"; fail "$name: ubtrfs subvolume create $src"; return; }
			oracle_check_clean "$name: create $src" "$img" || fail "$name: btrfs check after creating $src"
			continue
		fi
		local flag=()
		[[ $ro == r ]] && flag=(-r)
		snap_ubtrfs "$img" "$name: snapshot $src $dst" "${flag[@]}" "$img" "$src" "$dst" || return
	done
	oracle_kmount "$k" "$kimg" || { fail "$name: kernel mount of the copy"; return; }
	for op in "${ops[@]}"; do
		read -r ro src dst <<<"$op"
		if [[ $ro == c ]]; then
			# A commit of its own, as ubtrfs's command makes.
			(umask 027 && btrfs subvolume create "$k$src" >/dev/null) &&
				btrfs filesystem sync "$k" ||
				fail "$name: kernel subvolume create $src"
			continue
		fi
		local flag=()
		[[ $ro == r ]] && flag=(-r)
		btrfs subvolume snapshot "${flag[@]}" "$k$src" "$k$dst" >/dev/null ||
			fail "$name: kernel snapshot $src $dst"
	done
	oracle_kumount "$k"

	# 3. The same filesystem.
	oracle_kmount -o ro "$m" "$img" || { fail "$name: kernel mount after the snapshots"; return; }
	oracle_kmount -o ro "$k" "$kimg" || { fail "$name: kernel mount of the copy"; return; }
	subvols "$m" >"$T/$name.sv.u"
	subvols "$k" >"$T/$name.sv.k"
	[[ $(wc -l <"$T/$name.sv.u") -ge 10 ]] || fail "$name: too few subvolumes listed"
	cmp -s "$T/$name.sv.k" "$T/$name.sv.u" ||
		{ diff "$T/$name.sv.k" "$T/$name.sv.u" | head -20; fail "$name: subvolume lists differ"; }
	manifest "$m" "$T/$name.man.u" || fail "$name: manifest of ours"
	manifest "$k" "$T/$name.man.k" || fail "$name: manifest of the kernel's"
	if ! cmp -s "$T/$name.man.k" "$T/$name.man.u"; then
		oracle_manifest_diff "$T/$name.man.k" "$T/$name.man.u" | head -20
		fail "$name: the snapshots differ from the kernel's"
	fi
	local p want got
	for p in s-top s-ro w/sv sv/s-nested s-recv; do
		want=$(btrfs property get -ts "$k/$p" ro)
		got=$(btrfs property get -ts "$m/$p" ro)
		[[ $want == "$got" ]] || fail "$name: $p: $got (the kernel's: $want)"
	done
	# Parent uuids: as the kernel's where the source is older than both
	# images (the same uuid in the copy); s-nested's is our s-top's.
	for p in s-top s-ro w/sv s-recv; do
		want=$(uuid_of "$k/$p" Parent)
		got=$(uuid_of "$m/$p" Parent)
		[[ -n $want && $want != - && $got == "$want" ]] ||
			fail "$name: $p: parent uuid $got, the kernel's $want"
	done
	want=$(uuid_of "$m/s-top")
	got=$(uuid_of "$m/sv/s-nested" Parent)
	[[ -n $want && $got == "$want" ]] || fail "$name: sv/s-nested: parent uuid $got, want $want"
	for p in "s-top ." "s-ro sv" "w/sv sv" "sv/s-nested s-top" "s-recv recv/ro0"; do
		read -r dst src <<<"$p"
		got=$(uuid_of "$m/$dst")
		[[ -n $got && $got != "$(uuid_of "$m/$src" 2>/dev/null)" ]] ||
			fail "$name: $dst's uuid $got is not new"
	done
	# The uuid tree: an entry per subvolume, and per received uuid of a
	# read-only subvolume, as the kernel's.
	local nu nk ty
	for ty in UUID_KEY_SUBVOL UUID_KEY_RECEIVED_SUBVOL; do
		nu=$(uuid_count "$img" $ty)
		nk=$(uuid_count "$kimg" $ty)
		[[ $nu == "$nk" && $nu -ge 1 ]] || fail "$name: $nu $ty ids, the kernel's $nk"
	done
	# The snapshots' ROOT_ITEMs.
	local ids
	ids=$(btrfs subvolume list "$m" | awk '$NF ~ /^(s-top|s-ro|w\/sv|sv\/s-nested|s-recv)$/ {print $2}')
	[[ $(wc -w <<<"$ids") == 5 ]] || fail "$name: snapshot ids: $ids"
	# shellcheck disable=SC2086
	[[ $(root_items "$img" $ids | grep -c '^key (') == 5 ]] || fail "$name: ROOT_ITEMs not found"
	# shellcheck disable=SC2086
	if ! diff <(root_items "$kimg" $ids) <(root_items "$img" $ids) >"$T/$name.ri.diff"; then
		head -20 "$T/$name.ri.diff"
		fail "$name: the snapshots' ROOT_ITEMs differ from the kernel's"
	fi
	ids=$(btrfs subvolume list "$m" | awk '$NF ~ /^(new1|sv\/new2|nocow\/new3)$/ {print $2}')
	[[ $(wc -w <<<"$ids") == 3 ]] || fail "$name: new subvolume ids: $ids"
	# shellcheck disable=SC2086
	[[ $(root_items "$img" $ids | grep -c '^key (') == 3 ]] || fail "$name: ROOT_ITEMs not found"
	# shellcheck disable=SC2086
	if ! diff <(root_items "$kimg" $ids) <(root_items "$img" $ids) >"$T/$name.rn.diff"; then
		head -20 "$T/$name.rn.diff"
		fail "$name: the new subvolumes' ROOT_ITEMs differ from the kernel's"
	fi
	# Their root directories: inode, mode (umask 027: 0750), owner, links
	# (the flags and the property are in the manifests).
	[[ $(stat -c %a "$m/new1") == 750 ]] || fail "$name: new1 has mode $(stat -c %a "$m/new1")"
	for p in new1 sv/new2 nocow/new3; do
		[[ $(stat -c '%i %a %u %g %h' "$m/$p") == "$(stat -c '%i %a %u %g %h' "$k/$p")" ]] ||
			fail "$name: $p: $(stat -c '%i %a %u %g %h' "$m/$p"), the kernel's $(stat -c '%i %a %u %g %h' "$k/$p")"
	done
	oracle_manifest "$m/s-ro" --inodes >"$T/$name.ro.0"
	oracle_manifest "$m/sv/s-nested" --inodes >"$T/$name.nested.0"
	oracle_kumount "$m"
	oracle_kumount "$k"

	# 4. The kernel writes into the snapshots and their sources.
	oracle_kmount "$m" "$img" || { fail "$name: kernel read-write mount"; return; }
	echo "new in sv" >"$m/sv/new-k"
	dd if=/dev/urandom of="$m/s-top/many/f00001" bs=64k count=3 conv=notrunc status=none
	rm -f "$m/w/sv/many/f00002" "$m/s-top/many/f00003"
	mv "$m/sv/many/f00004" "$m/sv/many/renamed"
	head -c 300000 /dev/urandom >"$m/new1/by-kernel"
	mkdir "$m/sv/new2/d" && echo x >"$m/sv/new2/d/f"
	oracle_kumount "$m"
	oracle_check_clean "$name: after the kernel's writes" "$img" || fail "$name: check after the kernel's writes"
	oracle_kmount -o ro "$m" "$img" || { fail "$name: kernel mount"; return; }
	oracle_manifest "$m/s-ro" --inodes >"$T/$name.ro.1"
	oracle_manifest "$m/sv/s-nested" --inodes >"$T/$name.nested.1"
	cmp -s "$T/$name.ro.0" "$T/$name.ro.1" || fail "$name: s-ro changed by writes elsewhere"
	cmp -s "$T/$name.nested.0" "$T/$name.nested.1" || fail "$name: s-nested changed by writes elsewhere"
	[[ -e $m/w/sv/many/f00002 ]] && fail "$name: w/sv/many/f00002 still there"
	[[ -e $m/sv/many/f00002 && -e $m/s-ro/many/f00002 ]] || fail "$name: sv lost a file removed from a snapshot of it"
	oracle_kumount "$m"

	# 5. ubtrfs's read-write mount copies shared blocks.
	if [[ ! -e /dev/fuse ]] || ! command -v fusermount3 >/dev/null; then
		oracle_log "$name: no FUSE here: the engine's writes into the snapshots are not checked"
		[[ ${UBTRFS_REQUIRE_ORACLE:-} == 1 ]] && fail "$name: FUSE required"
	else
		local f=$T/$name.f
		mkdir -p "$f"
		oracle_image_daemon_start rw "$img" "$f" "$T/$name.daemon.log"
		if [[ $ORACLE_DAEMON_UP != 1 ]]; then
			tail -5 "$T/$name.daemon.log"
			fail "$name: ubtrfs mount -o rw did not come up"
		else
			head -c 100000 /dev/urandom >"$T/$name.data"
			cp "$T/$name.data" "$f/s-top/many/by-ubtrfs"
			cp "$T/$name.data" "$f/sv/by-ubtrfs"
			rm -f "$f/s-top/many/f00010" "$f/sv/many/f00011"
			echo changed >"$f/s-top/w/small-by-ubtrfs"
			cp "$T/$name.data" "$f/nocow/new3/by-ubtrfs"
			rm -f "$f/new1/by-kernel"
			sync -f "$f/sv" || true
			fusermount3 -u "$f" || umount "$f"
			oracle_image_daemon_end "$name: rw mount" 1 "$ORACLE_DAEMON_PID" "$T/$name.daemon.log" 100 ||
				fail "$name: the rw daemon"
		fi
		oracle_check_clean "$name: after ubtrfs's writes" "$img" || fail "$name: check after ubtrfs's writes"
		oracle_kmount -o ro "$m" "$img" || { fail "$name: kernel mount"; return; }
		cmp -s "$T/$name.data" "$m/s-top/many/by-ubtrfs" || fail "$name: s-top/many/by-ubtrfs"
		cmp -s "$T/$name.data" "$m/sv/by-ubtrfs" || fail "$name: sv/by-ubtrfs"
		cmp -s "$T/$name.data" "$m/nocow/new3/by-ubtrfs" || fail "$name: nocow/new3/by-ubtrfs"
		[[ -e $m/new1/by-kernel ]] && fail "$name: new1/by-kernel still there"
		[[ -f $m/sv/new2/d/f ]] || fail "$name: sv/new2/d/f missing"
		[[ -e $m/s-top/many/f00010 || -e $m/sv/many/f00011 ]] && fail "$name: removed files still there"
		[[ -e $m/many/f00010 && -e $m/s-ro/many/f00011 ]] || fail "$name: a source lost a file removed from its snapshot"
		oracle_manifest "$m/s-ro" --inodes >"$T/$name.ro.2"
		oracle_manifest "$m/sv/s-nested" --inodes >"$T/$name.nested.2"
		cmp -s "$T/$name.ro.0" "$T/$name.ro.2" || fail "$name: s-ro changed by ubtrfs's writes"
		cmp -s "$T/$name.nested.0" "$T/$name.nested.2" || fail "$name: s-nested changed by ubtrfs's writes"
		oracle_kumount "$m"
	fi

	# 6. Refusals leave the image as it was.
	local before after
	oracle_kmount -o ro "$m" "$img" || { fail "$name: kernel mount"; return; }
	before=$(subvols "$m")
	oracle_kumount "$m"
	local -a bad=("/many /x" "/sv /many/f00000" "/sv /nope/x" "/sv /s-ro/x")
	for p in "${bad[@]}"; do
		read -r src dst <<<"$p"
		if "$UBTRFS" subvolume snapshot "$img" "$src" "$dst" >"$T/$name.refuse" 2>&1; then
			fail "$name: snapshot $src $dst was made"
		elif ! grep -q . "$T/$name.refuse"; then
			fail "$name: snapshot $src $dst refused without a message"
		fi
	done
	for p in /new1 /nope/x /s-ro/x /new1/.. /many/f00000/x; do
		if "$UBTRFS" subvolume create "$img" "$p" >"$T/$name.refuse" 2>&1; then
			fail "$name: subvolume create $p was made"
		elif ! grep -q . "$T/$name.refuse"; then
			fail "$name: subvolume create $p refused without a message"
		fi
	done
	oracle_kmount -o ro "$m" "$img" || { fail "$name: kernel mount"; return; }
	after=$(subvols "$m")
	oracle_kumount "$m"
	[[ $before == "$after" ]] || fail "$name: a refused snapshot or create changed the subvolumes"
	oracle_check_clean "$name: after the refusals" "$img" || fail "$name: check after the refusals"
	rm -f "$img" "$kimg" "$T/$name".*.raw
}

# root_keys IMG: the root tree's item keys, a ROOT_ITEM's with its
# last_snapshot/flags/refs line (no addresses): what a deletion leaves.
root_keys() {
	btrfs inspect-internal dump-tree -t root "$1" | awk '
		/^[ \t]*item [0-9]+ key/ { if (k != "") print k; sub(/^.* key /, ""); sub(/ itemoff.*/, ""); k = $0; next }
		/^[ \t]*last_snapshot/ { sub(/^[ \t]*/, ""); k = k " " $0 }
		END { if (k != "") print k }'
}

# deletes: `ubtrfs subvolume delete` against the kernel's `btrfs subvolume
# delete` on a copy (a, with files and a snapshot sa of it; b/c, nested):
# the root tree's items and flags (DEAD, no references, ORPHAN_ITEMs) and
# the uuid tree as the kernel's; btrfs check clean; the kernel mounts ours
# read-write and drops the dead trees (`btrfs subvolume sync`): check clean,
# nothing of them left, sa intact.  Refused, changing nothing: b (holds c),
# the top level, a plain directory, the default subvolume, a missing name.
deletes() {
	local img=$T/del.img kimg=$T/del.k.img m=$T/del.m k=$T/del.k id
	echo "== deletes"
	truncate -s 1G "$img"
	oracle_mkfs_with mkfs.btrfs "-n 4096" "$img" || { fail "deletes: mkfs"; return; }
	oracle_kmount "$m" "$img" || { fail "deletes: kernel mount"; return; }
	btrfs subvolume create "$m/a" >/dev/null
	many_files "$m/a" 600 11
	btrfs subvolume create "$m/b" >/dev/null
	btrfs subvolume create "$m/b/c" >/dev/null
	echo c >"$m/b/c/f"
	btrfs subvolume snapshot "$m/a" "$m/sa" >/dev/null
	btrfs subvolume snapshot -r "$m/a" "$m/sro" >/dev/null
	mkdir "$m/plain"
	local ida idc
	ida=$(btrfs subvolume list "$m" | awk '$NF == "a" {print $2}')
	idc=$(btrfs subvolume list "$m" | awk '$NF == "b/c" {print $2}')
	id=$(btrfs subvolume list "$m" | awk '$NF == "sro" {print $2}')
	btrfs subvolume set-default "$id" "$m"
	oracle_kumount "$m"
	# (Kernel mounts below name the top level: the default is sro now.)
	cp --sparse=always "$img" "$kimg"
	local p out before gen
	before=$(root_keys "$img")
	gen=$(btrfs inspect-internal dump-super "$img" | awk '$1 == "generation" {print $2}')
	for p in /b / /plain /sro /nope; do
		if "$UBTRFS" subvolume delete "$img" "$p" >"$T/del.refuse" 2>&1; then
			fail "deletes: $p was deleted"
		elif ! grep -q . "$T/del.refuse"; then
			fail "deletes: $p refused without a message"
		fi
	done
	[[ $(root_keys "$img") == "$before" ]] || fail "deletes: a refused delete changed the root tree"
	[[ $(btrfs inspect-internal dump-super "$img" | awk '$1 == "generation" {print $2}') == "$gen" ]] ||
		fail "deletes: a refused delete committed a transaction"
	for p in /a /b/c; do
		out=$("$UBTRFS" subvolume delete "$img" "$p" 2>&1) ||
			{ printf '%s\n' "$out"; fail "deletes: ubtrfs subvolume delete $p"; return; }
		oracle_check_clean "deletes: $p" "$img" || fail "deletes: btrfs check after deleting $p"
	done
	oracle_kmount -o subvolid=5 "$k" "$kimg" || { fail "deletes: kernel mount of the copy"; return; }
	btrfs subvolume delete "$k/a" "$k/b/c" >/dev/null || fail "deletes: the kernel's delete"
	oracle_kumount "$k"
	# The kernel's cleaner may already have dropped a small dead tree
	# before its unmount: the dead trees' items are compared with what the
	# kernel leaves at first (DEAD, no references, an ORPHAN_ITEM), the
	# rest with the kernel's copy.
	local dead="\\(($ida|$idc) ROOT_ITEM|ORPHAN_ITEM ($ida|$idc)\\)"
	diff <(root_keys "$kimg" | grep -Ev "$dead") <(root_keys "$img" | grep -Ev "$dead") >"$T/del.diff" ||
		{ head -20 "$T/del.diff"; fail "deletes: the root tree differs from the kernel's"; }
	for p in $ida $idc; do
		root_keys "$img" | grep -qE "^\\(ORPHAN ORPHAN_ITEM $p\\)$" || fail "deletes: no ORPHAN_ITEM for $p"
		root_keys "$img" | grep -qE "^\\($p ROOT_ITEM [0-9]+\\) .*flags 0x1000000000000\\(none\\) refs 0$" ||
			fail "deletes: the ROOT_ITEM of $p is not dead: $(root_keys "$img" | grep "($p ROOT_ITEM")"
	done
	local ty
	for ty in UUID_KEY_SUBVOL UUID_KEY_RECEIVED_SUBVOL; do
		[[ $(uuid_count "$img" $ty) == "$(uuid_count "$kimg" $ty)" ]] ||
			fail "deletes: $ty ids $(uuid_count "$img" $ty), the kernel's $(uuid_count "$kimg" $ty)"
	done
	# The kernel drops the dead trees.
	oracle_kmount -o subvolid=5 "$m" "$img" || { fail "deletes: kernel mount after the deletes"; return; }
	[[ -e $m/a || -e $m/b/c ]] && fail "deletes: a deleted subvolume is still there"
	btrfs subvolume sync "$m" >/dev/null || fail "deletes: btrfs subvolume sync"
	oracle_kmount -o ro,subvolid=5 "$k" "$kimg" || { fail "deletes: kernel mount of the copy"; return; }
	cmp -s <(oracle_manifest "$m/sa" --inodes) <(oracle_manifest "$k/sa" --inodes) ||
		fail "deletes: sa differs from the kernel's"
	oracle_kumount "$k"
	oracle_kumount "$m"
	oracle_check_clean "deletes: after the kernel's cleanup" "$img" || fail "deletes: check after cleanup"
	root_keys "$img" | grep -qE "$dead" && fail "deletes: the dead trees were not dropped"
	rm -f "$img" "$kimg"
}

cell kernel4k mkfs.btrfs "-n 4096"
cell ubtrfs16k ubtrfs ""
deletes

if ((FAILS)); then
	echo "t-snapshot-create: $FAILS failure(s)"
	exit 1
fi
echo "t-snapshot-create: ok"
