#!/bin/bash
# t-crash-fsync: power failure at any flush of a read-write FUSE session;
# whatever was fsync'ed must survive.
#
# For each of four workloads (tests/tools/crash_workload.py):
#   files         many small and large files written and fsync'ed (fsync,
#                 fdatasync, directory fsync), overwritten in place, deleted;
#   rename-trunc  replace by rename with fsync of the file or only of the
#                 directory, renames across directories, truncate down and
#                 up with fsync, inline data grown and shrunk;
#   mixed         random mkdir, hard links, xattrs, unlink, overwrites,
#                 appends with fdatasync, renames, rmdir, sync(2);
#   orphans       files unlinked while open, written and fsync'ed through
#                 the descriptor, other files fsync'ed meanwhile, the
#                 orphans closed at random points (btrfs check then finds
#                 an nlink-0 inode without its ORPHAN_ITEM an error);
# an image (mkfs.btrfs for files and mixed, ubtrfs mkfs for rename-trunc
# and orphans)
# is copied, mounted with `ubtrfs mount -o rw` with UBTRFS_WRITE_LOG set in
# the daemon's environment (every device write and flush is logged), the
# workload runs and journals, at each fsync, the state of every path and
# the number of flushes in the log, and the daemon is unmounted.  Then:
#   - replaying the whole log onto the copy gives the final image, byte for
#     byte (the log misses nothing);
#   - for every prefix of the log that ends at a flush (a bounded, seeded
#     sample when there are more than UBTRFS_CRASH_POINTS, default 32, 12
#     with UBTRFS_TEST_QUICK=1; UBTRFS_CRASH_POINTS=all takes every one)
#     and for prefixes ending at a flush plus a random subset of the writes
#     before the next flush (8 per workload, 3 quick), the image after the
#     prefix (tests/tools/wlog_replay) must be clean for
#     btrfs check --readonly --check-data-csum, mount in the kernel, and
#     show every path as the journal allows: what was last made durable
#     before that point (an fsync returned), or a state a later operation
#     left it in - never anything else.
# A failure names the workload and crash point (the seeds are fixed;
# UBTRFS_CRASH_SEED=N shifts them for manual runs); with
# UBTRFS_CRASH_KEEP=DIR the copy, the log and the journal of a failing
# workload are kept in DIR to reproduce it by hand (wlog_replay apply).
#
# Runs in a private mount namespace (unshare) where available.  Needs root,
# loop devices, kernel btrfs, btrfs-progs, FUSE and python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
REPLAY=${UBTRFS_WLOG_REPLAY:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/wlog_replay}
[[ -x $REPLAY ]] || oracle_skip "wlog_replay tool not built ($REPLAY)"
# Run in a private mount namespace: a process of another test that makes a
# mount namespace copies every mount of the moment, and a copy of one of
# ours would keep its loop device (and its FUSE connection) alive for as
# long as that namespace lives.  Our mounts also go away with us.
if [[ -z ${_T_CRASH_FSYNC_NS:-} ]] && command -v unshare >/dev/null 2>&1; then
	export _T_CRASH_FSYNC_NS=1
	exec unshare --mount --propagation private -- "$BASH" "$0" "$@"
fi
# Our namespace must not hold concurrent tests' mounts alive.
[[ -n ${_T_CRASH_FSYNC_NS:-} ]] && oracle_ns_detach
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T=$ORACLE_TMP
WL=$UBTRFS_SOURCE_ROOT/tests/tools/crash_workload.py
QUICK=${UBTRFS_TEST_QUICK:-0}
if [[ $QUICK == 1 ]]; then
	MAXPTS=${UBTRFS_CRASH_POINTS:-12}
	NSUB=3
	QUICKARG=(--quick)
else
	MAXPTS=${UBTRFS_CRASH_POINTS:-32}
	NSUB=8
	QUICKARG=()
fi
FAILS=0
IMAGES=0
T0=$SECONDS

fail() {
	printf 'FAIL: %s\n' "$*"
	FAILS=$((FAILS + 1))
}

show() {
	ro_show "$@"
}

# fuse_up MNT DAEMONLOG WLOG IMG: ro_fuse_up with UBTRFS_WRITE_LOG=WLOG.
# Sets FUSE_PID.
fuse_up() {
	local rc=0
	UBTRFS_WRITE_LOG=$3 ro_fuse_up "$1" "$2" rw "$4" || rc=$?
	FUSE_PID=$RO_FUSE_PID
	return $rc
}

# fuse_down MNT DAEMONLOG: ro_fuse_down (the daemon must exit 0 within 20 s
# without a sanitizer report); its failures count here, and return 1.
fuse_down() {
	local f0=$RO_FAILS
	ro_fuse_down "ubtrfs mount" "$1" "$2"
	((RO_FAILS == f0)) && return 0
	FAILS=$((FAILS + RO_FAILS - f0))
	RO_FAILS=$f0
	return 1
}

# unloop DEV IMG: detach the loop device DEV backed by IMG: losetup -d
# (autoclear while busy), then wait up to 60 s until DEV no longer holds
# IMG, and never touch DEV after - once released it may be another test's,
# which oracle_unloop (it goes by DEV's backing file at the time) would
# detach.  The harness's record of DEV stays; its cleanup detaches DEV only
# while DEV still holds IMG.
unloop() {
	local dev=$1 img i b
	img=$(realpath -- "$2")
	btrfs device scan --forget "$dev" >/dev/null 2>&1 || true
	losetup -d "$dev" >/dev/null 2>&1 || true
	for ((i = 0; i < 300; i++)); do
		b=$(losetup -n -O BACK-FILE -- "$dev" 2>/dev/null) || b=
		[[ ${b% (deleted)} == "$img" ]] || return 0
		sleep 0.2
	done
	fail "$dev still holds $img 60 s after the unmount"
	return 1
}

# check_image NAME IMG AT: one crash image judged (AT: K or K.5).  Returns 1
# (after printing why) if it fails.
check_image() {
	local name=$1 img=$2 at=$3 out rc=0 dev mnt=$T/k
	IMAGES=$((IMAGES + 1))
	out=$(btrfs check --readonly --check-data-csum "$img" 2>&1) || rc=$?
	if ((rc)) || ! grep -q "no error found" <<<"$out"; then
		fail "$name at $at: btrfs check --readonly failed (exit $rc)"
		printf '%s\n' "$out" | tail -n 25 | sed 's/^/    /'
		return 1
	fi
	# A new loop device each time: one reused would serve the superblock
	# of the image before from its page cache.
	dev=$(losetup --find --show --read-only -- "$img") ||
		{ fail "$name at $at: losetup --read-only $img failed"; return 1; }
	oracle_register_loop "$dev"
	if ! oracle_kmount -o ro "$mnt" "$dev" 2>"$T/kmount.err"; then
		fail "$name at $at: the kernel does not mount the image"
		show "$T/kmount.err"
		unloop "$dev" "$img"
		return 1
	fi
	rc=0
	"$ORACLE_PYTHON" "$WL" check --journal "$T/$name.journal" --root "$mnt" --at "$at" \
		>"$T/check.out" 2>&1 || rc=$?
	oracle_kumount "$mnt"
	unloop "$dev" "$img"
	if ((rc)); then
		fail "$name at $at: the kernel shows what was never durable there"
		show "$T/check.out" 25
		return 1
	fi
}

keep_evidence() {
	local name=$1
	[[ -n ${UBTRFS_CRASH_KEEP:-} ]] || return 0
	mkdir -p -- "$UBTRFS_CRASH_KEEP"
	cp --sparse=always -- "$T/$name.orig" "$UBTRFS_CRASH_KEEP/$name.orig.img"
	cp -- "$T/$name.wlog" "$T/$name.journal" "$UBTRFS_CRASH_KEEP/"
	oracle_log "$name: evidence kept in $UBTRFS_CRASH_KEEP"
}

# cell NAME WORKLOAD MKFS SEED
cell() {
	local name=$1 workload=$2 mkfs=$3 seed=$4 img t0=$SECONDS
	local mnt=$T/$name.rw orig=$T/$name.orig wlog=$T/$name.wlog
	local work=$T/$name.work sub=$T/$name.sub
	local fails0=$FAILS images0=$IMAGES
	img=$(oracle_image "$name.img" 512M)
	if [[ $mkfs == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "$name: ubtrfs mkfs failed"
	else
		oracle_mkfs -- "$img"
	fi
	cp --sparse=always -- "$img" "$orig"

	if ! fuse_up "$mnt" "$T/$name.daemon.log" "$wlog" "$img"; then
		fail "$name: ubtrfs mount -o rw did not come up"
		show "$T/$name.daemon.log"
		return 0
	fi
	if ! "$ORACLE_PYTHON" "$WL" run --workload "$workload" --root "$mnt" --log "$wlog" \
		--journal "$T/$name.journal" --seed "$seed" "${QUICKARG[@]}" >"$T/$name.wl.out" 2>&1; then
		fail "$name: the workload failed on the FUSE mount (seed $seed)"
		show "$T/$name.wl.out" 30
		fuse_down "$mnt" "$T/$name.daemon.log" || true
		return 0
	fi
	fuse_down "$mnt" "$T/$name.daemon.log" || return 0
	oracle_log "$name (seed $seed): $(tail -n 1 "$T/$name.wl.out")"

	# The log: flushes, and the writes in each flush's window.
	"$REPLAY" list "$wlog" >"$T/$name.list" 2>"$T/$name.list.err" ||
		{ fail "$name: wlog_replay list failed"; show "$T/$name.list.err"; return 0; }
	local nflush tail
	nflush=$(awk '$1 == "flushes" { print $2 }' "$T/$name.list")
	tail=$(awk '$1 == "tail" { print $2 }' "$T/$name.list")
	((nflush >= 10)) || { fail "$name: only $nflush flushes in the log"; return 0; }
	# The log is complete: all of it on the copy is the final image.
	cp --sparse=always -- "$orig" "$work"
	"$REPLAY" apply "$wlog" "$work" >/dev/null ||
		{ fail "$name: wlog_replay apply (everything) failed"; return 0; }
	if ! cmp -s -- "$work" "$img"; then
		fail "$name: the whole log replayed differs from the final image (a write was not logged)"
		keep_evidence "$name"
		return 0
	fi
	rm -f -- "$img"

	# The crash points: every flush, or a seeded sample with the last one.
	local -a points=() wins=()
	local k i
	mapfile -t wins < <(awk '$1 == "flush" { print $4 }' "$T/$name.list")
	wins+=("$tail")	# wins[k]: the writes after flush k, before flush k + 1 (or the end)
	if [[ $MAXPTS == all ]] || ((nflush + 1 <= MAXPTS)); then
		for ((k = 0; k <= nflush; k++)); do
			points+=("$k")
		done
	else
		RANDOM=$seed
		local -A pick=()
		pick[$nflush]=1
		for ((i = 0; i < MAXPTS / 2; i++)); do
			pick[$((1 + i * nflush / (MAXPTS / 2)))]=1
		done
		while ((${#pick[@]} < MAXPTS)); do
			pick[$((1 + (RANDOM * 32768 + RANDOM) % nflush))]=1
		done
		mapfile -t points < <(printf '%s\n' "${!pick[@]}" | sort -n)
	fi
	# Subsets after flushes whose window holds at least two writes.
	local -a cands=()
	for ((k = 0; k <= nflush; k++)); do
		if ((wins[k] >= 2)); then
			cands+=("$k")
		fi
	done
	RANDOM=$((seed + 1))
	local -A subpick=()
	for ((i = 0; i < NSUB && ${#cands[@]}; i++)); do
		subpick[${cands[RANDOM % ${#cands[@]}]}]=1
	done
	local -A want=()
	for k in "${points[@]}"; do
		want[$k]=1
	done
	for k in "${!subpick[@]}"; do
		want[$k]=1
	done
	mapfile -t points < <(printf '%s\n' "${!want[@]}" | sort -n)

	local prev=0 bad=0 nsub=0 pct
	cp --sparse=always -- "$orig" "$work"
	for k in "${points[@]}"; do
		"$REPLAY" apply --from "$prev" --to "$k" "$wlog" "$work" >/dev/null ||
			{ fail "$name: wlog_replay apply --to $k failed"; bad=$((bad + 1)); break; }
		prev=$k
		check_image "$name" "$work" "$k" || bad=$((bad + 1))
		if [[ -n ${subpick[$k]:-} ]]; then
			cp --sparse=always -- "$work" "$sub"
			pct=$((20 + (seed * 31 + k * 17) % 61))
			"$REPLAY" apply --from "$k" --to "$k" --subset "$((seed * 1000 + k))" \
				--percent "$pct" "$wlog" "$sub" >"$T/sub.out" ||
				{ fail "$name: wlog_replay apply --subset after flush $k failed"; bad=$((bad + 1)); break; }
			check_image "$name" "$sub" "$k.5" || {
				bad=$((bad + 1))
				oracle_log "$name: subset image: flush $k + $(cat "$T/sub.out") (seed $((seed * 1000 + k)), $pct%)"
			}
			nsub=$((nsub + 1))
			rm -f -- "$sub"
		fi
		if ((bad >= 5)); then
			oracle_log "$name: stopping after $bad failing images"
			break
		fi
	done
	if ((bad)); then
		keep_evidence "$name"
	fi
	rm -f -- "$work" "$orig" "$wlog"
	oracle_log "$name: $((IMAGES - images0)) images ($((${#points[@]})) of $((nflush + 1)) flush points, $nsub with random subsets) in $((SECONDS - t0)) s: $((FAILS - fails0)) failed"
}

# UBTRFS_CRASH_SEED=N (manual runs) shifts every workload's seed.
S=${UBTRFS_CRASH_SEED:-0}
[[ $S =~ ^[0-9]+$ ]] || oracle_fail "UBTRFS_CRASH_SEED must be a number"
cell files files mkfs.btrfs $((101 + S))
cell rename-trunc rename-trunc ubtrfs $((202 + S))
cell mixed mixed mkfs.btrfs $((303 + S))
cell orphans orphans ubtrfs $((404 + S))

if ((FAILS)); then
	oracle_fail "$FAILS check(s) failed over $IMAGES crash images ($((SECONDS - T0)) s)"
fi
oracle_log "$IMAGES crash images checked clean in $((SECONDS - T0)) s"
