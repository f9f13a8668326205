#!/bin/bash
# t-mount-opts: the mount conventions of `ubtrfs mount` and its mount(8)
# helper mount.fuse.ubtrfs (issue 5, items 4 and 5).
#
# Cells (each check counts a failure; the other cells still run):
#   options   refused options (compress=, compress-force= and nodatacow on
#             rw, unknown ones, dirsync, noacl, bad values) exit non-zero
#             with their message, mount nothing and leave the image
#             unchanged; compress= and nodatacow are accepted read-only,
#             compress=no read-write; a long list of kernel-only and fstab
#             options is accepted; nosuid/nodev by default, suid,dev and
#             noexec,noatime when asked (noexec really refuses exec);
#             fsname= (default: the device); allow_other only when asked
#             (user nobody is refused without it); sync commits each write.
#   commit    commit=3600 commits nothing within 6 s; commit=2 commits a
#             write within 4 s; the default (30 s) commits nothing within
#             6 s and by 34 s.  "Committed" = `ubtrfs cat` finds the data
#             in a copy of the image taken while it is mounted.
#   sigterm   SIGTERM to a foreground daemon, to a daemonized one
#             (mounted on a relative path) and to the commit timer's thread
#             of a third (tgkill; x86_64 and aarch64): exit 0, unmounted, the uncommitted writes are in the image,
#             btrfs check --readonly clean, the kernel reads them.
#   exclusive one writer per image: while a read-write mount is up, a
#             second read-write mount, a read-only mount and `ubtrfs mkfs
#             -f` of the image fail with "in use" and change nothing, the
#             first mount keeps working and an offline `ubtrfs cat` still
#             reads; while a read-only mount is up, a read-write mount
#             fails and a second read-only one comes up.
#   remount   ubtrfs mount -o remount,ro commits and refuses writes,
#             remount,rw writes again; a read-only mount refuses
#             remount,rw with its message; a non-mount is refused.
#   helper    in a private mount namespace with the build tree's
#             mount.fuse.ubtrfs overlaid on /usr/sbin (nothing left on the
#             host): mount -t fuse.ubtrfs (rw; dev,suid for root; fsname),
#             mount -o remount,ro / remount,rw / remount,noexec, umount;
#             mount -t fuse.ubtrfs -r then remount,rw refused; compress=
#             refused through mount(8); an fstab line (mount -T) with
#             commit=2 and fstab-only options, remounted from fstab.
#   user      as user nobody, in a private mount namespace where /dev/fuse
#             is world-accessible as on a stock system (here it may be
#             0600; libfuse opens it before falling back to the setuid
#             fusermount3): an image in a directory nobody owns mounted
#             read-only (suid,dev asked but not granted; root is refused;
#             fusermount3 -u) and read-write (umount as nobody), and through
#             an fstab `user` line and the helper.  Skipped when
#             fusermount3 is not setuid or nobody cannot run $UBTRFS.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE, unshare,
# setpriv, overlayfs (helper and user cells).
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_fuse
oracle_require_ubtrfs
oracle_require_cmd unshare setpriv mknod cp timeout
oracle_require_python
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS
HELPER=${UBTRFS_MOUNT_HELPER:-$(dirname "$UBTRFS")/mount.fuse.ubtrfs}
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
# user nobody must reach mount points below $T (allow_other checks)
chmod 0711 "$T"

# ---------------------------------------------------------------------------
# Helpers.

# cell_skip REASON: a cell this machine cannot run: a note, or a failure
# under UBTRFS_REQUIRE_ORACLE=1.
cell_skip() {
	if [[ ${UBTRFS_REQUIRE_ORACLE:-0} == 1 ]]; then
		ro_fail "$* (UBTRFS_REQUIRE_ORACLE=1)"
	else
		ro_note "$*"
	fi
}

# new_image NAME: $T/NAME.img, made by mkfs.btrfs, holding /hello ("hello")
# written by the kernel; sets IMG.
new_image() {
	IMG=$(oracle_image "$1.img" 256M)
	oracle_mkfs -- "$IMG"
	oracle_kmount "$T/$1.k" "$IMG" || oracle_fail "$1: kernel mount of a new image failed"
	printf 'hello\n' >"$T/$1.k/hello"
	oracle_kumount "$T/$1.k"
	rmdir -- "$T/$1.k"
}

# committed IMG PATH: PATH's content in a copy of IMG taken now (what the
# last commit holds); fails if the copy does not have it.
committed() {
	cp --sparse=always -- "$1" "$T/copy.img" &&
		"$UBTRFS" cat "$T/copy.img" "$2" 2>/dev/null
}

# expect_committed WHAT IMG PATH CONTENT / expect_uncommitted WHAT IMG PATH
expect_committed() {
	local got
	got=$(committed "$2" "$3") || got='<missing>'
	[[ $got == "$4" ]] || ro_fail "$1: $3 in the image is '$got', want '$4'"
}
expect_uncommitted() {
	if committed "$2" "$3" >/dev/null; then
		ro_fail "$1: $3 is already committed"
	fi
}

# img_holders FILE: PIDs of the processes that have FILE open (the daemon).
img_holders() {
	local want=$1 fd p
	for fd in /proc/[0-9]*/fd/*; do
		if [[ $(readlink "$fd" 2>/dev/null) == "$want" ]]; then
			p=${fd#/proc/}
			printf '%s\n' "${p%%/*}"
		fi
	done | sort -u
}

# wait_gone PID...: true once none runs (30 s at most).
wait_gone() {
	local i p alive
	for ((i = 0; i < 300; i++)); do
		alive=0
		for p in "$@"; do
			kill -0 "$p" 2>/dev/null && alive=1
		done
		((alive)) || return 0
		sleep 0.1
	done
	return 1
}

# mi MNT: "PER-MOUNT-OPTIONS FSTYPE SOURCE SUPER-OPTIONS" of the top mount
# at MNT, or nothing.
mi() {
	awk -v m="$1" '$5 == m {
		for (i = 7; $i != "-"; i++) ;
		line = $6 " " $(i + 1) " " $(i + 2) " " $(i + 3)
	} END { if (line != "") print line }' /proc/self/mountinfo
}

# has_opt LIST OPT: OPT is one of the comma-separated LIST.
has_opt() {
	[[ ,$1, == *,"$2",* ]]
}

# refuse WHAT MESSAGE OPTS: ubtrfs mount -o OPTS on IMG must fail, say
# MESSAGE and mount nothing.
refuse() {
	local what=$1 msg=$2 opts=$3 rc=0 mnt=$T/refuse
	mkdir -p -- "$mnt"
	timeout 60 "$UBTRFS" mount -o "$opts" "$IMG" "$mnt" >"$T/refuse.out" 2>&1 || rc=$?
	if oracle_is_mounted "$mnt"; then
		ro_fail "$what: -o $opts mounted"
		oracle_register_mount "$mnt"
		fusermount3 -u -- "$mnt" || true
		return 0
	fi
	((rc != 0)) || ro_fail "$what: -o $opts exited 0"
	if ((rc > 128)) || grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/refuse.out"; then
		ro_fail "$what: -o $opts crashed (exit $rc) or a sanitizer reported"
		ro_show "$T/refuse.out" 30
	fi
	if ! grep -qF -- "$msg" "$T/refuse.out"; then
		ro_fail "$what: -o $opts does not say '$msg'"
		ro_show "$T/refuse.out"
	fi
}

# up NAME OPTS: foreground daemon on MNT=$T/NAME.m for IMG (RO_FUSE_PID,
# its output in LOG); fails the cell (returns 1) if it does not come up.
up() {
	MNT=$T/$1.m
	LOG=$T/$1.log
	if ! ro_fuse_up "$MNT" "$T/$1.log" "$2" "$IMG"; then
		ro_fail "$1: ubtrfs mount -o $2 did not come up"
		ro_show "$T/$1.log"
		return 1
	fi
}

# pinned_by MNT: "PID COMMAND" of a process in another mount namespace in
# which MNT is still mounted, or nothing.
pinned_by() {
	local mine p ns seen=' '
	mine=$(readlink /proc/self/ns/mnt)
	for p in /proc/[0-9]*; do
		ns=$(readlink "$p/ns/mnt" 2>/dev/null) || continue
		[[ $ns != "$mine" && $seen != *" $ns "* ]] || continue
		seen+="$ns "
		if awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' "$p/mountinfo" 2>/dev/null; then
			printf '%s %s\n' "${p#/proc/}" "$(cat "$p/comm" 2>/dev/null)"
			return 0
		fi
	done
}

# down WHAT: unmount MNT (fusermount3 -u), then the daemon RO_FUSE_PID must
# exit 0 within 60 s (it commits first); a hung daemon's threads are shown.
down() {
	local what=$1 i rc=0
	if oracle_is_mounted "$MNT"; then
		fusermount3 -u -- "$MNT" || ro_fail "$what: fusermount3 -u $MNT failed"
	fi
	for ((i = 0; i < 600; i++)); do
		kill -0 "$RO_FUSE_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$RO_FUSE_PID" 2>/dev/null && [[ -n $(pinned_by "$MNT") ]]; then
		# Another mount namespace (a concurrent test's unshare) copied the
		# mount: the FUSE connection lives on there.  SIGTERM commits.
		ro_note "$what: the mount lives on in another mount namespace ($(pinned_by "$MNT")); SIGTERM to the daemon"
		kill -TERM "$RO_FUSE_PID"
		wait_gone "$RO_FUSE_PID" || true
	fi
	if kill -0 "$RO_FUSE_PID" 2>/dev/null; then
		ro_fail "$what: the daemon still runs 60 s after the unmount"
		if command -v gdb >/dev/null; then
			gdb -p "$RO_FUSE_PID" -batch -ex 'thread apply all bt' 2>/dev/null |
				grep -E '^(#|Thread)' | head -n 60 | sed 's/^/    /'
		fi
		return 0	# the harness kills it
	fi
	wait "$RO_FUSE_PID" || rc=$?
	((rc == 0)) || { ro_fail "$what: the daemon exited $rc"; ro_show "$LOG"; }
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$LOG"; then
		ro_fail "$what: sanitizer report from the daemon"
		ro_show "$LOG" 40
	fi
	rmdir -- "$MNT" 2>/dev/null || true
}

# kernel_has WHAT IMG PATH CONTENT: btrfs check clean, and the kernel reads
# CONTENT at PATH.
kernel_has() {
	local got
	oracle_check_clean "$1" "$2" || ro_fail "$1: btrfs check --readonly is not clean"
	oracle_kmount -o ro "$T/kcheck" "$2" || { ro_fail "$1: the kernel does not mount it"; return 0; }
	got=$(cat "$T/kcheck/$3" 2>/dev/null) || got='<missing>'
	oracle_kumount "$T/kcheck"
	[[ $got == "$4" ]] || ro_fail "$1: the kernel reads '$got' at $3, want '$4'"
}

# ---------------------------------------------------------------------------
# The default commit interval runs alongside the other cells: mounted and
# written first, looked at after 6 s and after 34 s.

cell_default_start() {
	RO_CELLS=$((RO_CELLS + 1))
	new_image defcommit
	DEF_IMG=$IMG
	up defcommit rw || { DEF_PID=; return 0; }
	DEF_PID=$RO_FUSE_PID
	DEF_MNT=$MNT
	DEF_LOG=$LOG
	DEF_T0=$SECONDS
	printf 'def\n' >"$DEF_MNT/def" || ro_fail "default commit: write failed"
}

# ---------------------------------------------------------------------------
cell_options() {
	RO_CELLS=$((RO_CELLS + 1))
	new_image opts
	local before after
	before=$(oracle_content_hash "$IMG")
	local C='compression on write is not supported yet; mount without compress='
	local CF='compression on write is not supported yet; mount without compress-force='
	refuse compress "$C" rw,compress=zstd
	refuse compress "$C" rw,compress
	refuse compress "$C" compress=lzo,rw
	refuse compress-force "$CF" rw,compress-force=zstd:3
	refuse nodatacow 'without data checksums' rw,nodatacow
	refuse nodatasum 'without data checksums' rw,nodatasum
	refuse unknown "unknown mount option 'bogus'" ro,bogus
	refuse unknown "unknown mount option 'check_int'" rw,check_int
	refuse dirsync "'dirsync'" rw,dirsync
	refuse noacl "'noacl'" noacl
	refuse usebackuproot "'usebackuproot'" usebackuproot
	refuse rescue 'rescue=ibadroots is not supported' rescue=nologreplay:ibadroots
	refuse subtype "'subtype=x'" subtype=x
	refuse commit 'commit=abc: expected seconds' rw,commit=abc
	refuse commit 'commit=-1: expected seconds' rw,commit=-1
	refuse subvolid 'subvolid=1x: not a subvolume id' subvolid=1x
	refuse cache_size 'cache_size=5Q: expected a size' cache_size=5Q
	after=$(oracle_content_hash "$IMG")
	[[ $before == "$after" ]] || ro_fail "options: a refused mount changed the image"

	# accepted read-only: options that change only what is written
	local o
	for o in ro,compress=zstd ro,compress-force=lzo:1,nodatacow,nodatasum rw,compress=no,compress-force=no; do
		up opts-acc "$o" || continue
		[[ $(cat "$MNT/hello" 2>/dev/null) == hello ]] || ro_fail "options: -o $o does not read /hello"
		down "options -o $o"
	done

	# kernel-only tuning and fstab bookkeeping: accepted, no effect
	o=rw,noatime,relatime,nodiratime,strictatime,lazytime,space_cache=v2,nospace_cache
	o+=,ssd,nossd,ssd_spread,discard=async,discard,nodiscard,autodefrag,noautodefrag
	o+=,thread_pool=4,commit=5,barrier,nobarrier,flushoncommit,treelog,notreelog
	o+=,max_inline=0,metadata_ratio=2,skip_balance,enospc_debug,fatal_errors=bug
	o+=,user_subvol_rm_allowed,datacow,datasum,acl,clear_cache,inode_cache,iversion
	o+=,x-systemd.automount,nofail,_netdev,auto,noauto,user,users,nouser,defaults
	o+=,comment=x,user_id=0,group_id=0,default_permissions,norecovery,async
	if up opts-ign "$o"; then
		printf 'ign\n' >"$MNT/ign" || ro_fail "options: write with the ignored options failed"
		[[ $(mi "$MNT") == *' fuse.ubtrfs '*' rw,'* ]] || ro_fail "options: not a rw fuse.ubtrfs mount: $(mi "$MNT")"
		down "options (ignored)"
	fi

	# FUSE flags: nosuid,nodev by default; suid,dev / noexec,noatime when asked
	local m
	if up opts-def rw; then
		m=$(mi "$MNT")
		{ has_opt "${m%% *}" nosuid && has_opt "${m%% *}" nodev; } ||
			ro_fail "options: default mount is not nosuid,nodev: $m"
		[[ ${m#* * } == "$(realpath "$IMG") "* ]] || ro_fail "options: source is not the image: $m"
		printf '#!/bin/sh\necho ran\n' >"$MNT/x.sh" && chmod 755 "$MNT/x.sh"
		[[ $("$MNT/x.sh" 2>/dev/null) == ran ]] || ro_fail "options: cannot exec by default"
		# allow_other only when asked
		if "${NOBODY[@]}" stat -- "$MNT/hello" >/dev/null 2>&1; then
			ro_fail "options: user nobody reads the mount without allow_other"
		fi
		down "options (default)"
	fi
	if up opts-flags ro,suid,dev,noexec,noatime,allow_other,fsname=mydisk; then
		m=$(mi "$MNT")
		local per=${m%% *}
		has_opt "$per" nosuid && ro_fail "options: suid asked, mount is nosuid: $m"
		has_opt "$per" nodev && ro_fail "options: dev asked, mount is nodev: $m"
		has_opt "$per" noexec || ro_fail "options: noexec asked, not shown: $m"
		has_opt "$per" noatime || ro_fail "options: noatime asked, not shown: $m"
		[[ ${m#* * } == "mydisk "* ]] || ro_fail "options: fsname=mydisk not the source: $m"
		if "$MNT/x.sh" >/dev/null 2>&1; then
			ro_fail "options: noexec mount runs a program"
		fi
		[[ $("${NOBODY[@]}" cat -- "$MNT/hello" 2>/dev/null) == hello ]] ||
			ro_fail "options: user nobody cannot read with allow_other"
		down "options (flags)"
	fi

	# sync: each write is committed before it returns
	if up opts-sync rw,sync,commit=3600; then
		printf 'sync\n' >"$MNT/sync" || ro_fail "options: write with sync failed"
		expect_committed "options sync" "$IMG" /sync sync
		down "options (sync)"
	fi
	oracle_check_clean options "$IMG" || ro_fail "options: btrfs check --readonly is not clean"
	oracle_log "options: done"
}

# ---------------------------------------------------------------------------
# commit=N, and SIGTERM on the same mounts.
cell_commit_sigterm() {
	RO_CELLS=$((RO_CELLS + 1))
	new_image commit
	if up commit2 rw,commit=2; then
		printf 'two\n' >"$MNT/two" || ro_fail "commit=2: write failed"
		sleep 4
		expect_committed "commit=2" "$IMG" /two two
		down "commit=2"
	fi

	# commit=3600: nothing in 6 s; then SIGTERM to the foreground daemon
	RO_CELLS=$((RO_CELLS + 1))
	new_image term
	if up term rw,commit=3600; then
		local pid=$RO_FUSE_PID rc=0
		{ mkdir "$MNT/dir" && printf 'term\n' >"$MNT/dir/term"; } || ro_fail "sigterm: write failed"
		{ head -c 300000 /dev/urandom >"$T/big" && cp "$T/big" "$MNT/big"; } || ro_fail "sigterm: write failed"
		sleep 6
		expect_uncommitted "commit=3600" "$IMG" /dir/term
		kill -TERM "$pid"
		if ! wait_gone "$pid"; then
			ro_fail "sigterm: the daemon still runs 30 s after SIGTERM"
		else
			wait "$pid" || rc=$?
			((rc == 0)) || { ro_fail "sigterm: the daemon exited $rc"; ro_show "$T/term.log"; }
		fi
		oracle_is_mounted "$MNT" && ro_fail "sigterm: still mounted after SIGTERM"
		expect_committed sigterm "$IMG" /dir/term term
		kernel_has sigterm "$IMG" dir/term term
		oracle_kmount -o ro "$T/kcheck" "$IMG" && {
			cmp -s "$T/big" "$T/kcheck/big" || ro_fail "sigterm: the kernel reads other bytes in /big"
			oracle_kumount "$T/kcheck"
		}
	fi

	# a daemonized mount, its mount point given relative to the caller's
	# directory (the daemon runs in /): its PID found by the image it holds
	local mnt=$T/termd.m pids
	mkdir -p "$mnt"
	oracle_register_mount "$mnt"
	if ! (cd "$T" && "$UBTRFS" mount -o rw,commit=3600 "$IMG" termd.m) 2>"$T/termd.log"; then
		ro_fail "sigterm: daemonized mount failed"
		ro_show "$T/termd.log"
		return 0
	fi
	mapfile -t pids < <(img_holders "$(realpath "$IMG")")
	if ((${#pids[@]} != 1)); then
		ro_fail "sigterm: ${#pids[@]} processes hold the image, want the daemon alone"
		return 0
	fi
	oracle_register_pid "${pids[0]}"
	printf 'daemon\n' >"$mnt/daemon" || ro_fail "sigterm: write to the daemonized mount failed"
	expect_uncommitted "sigterm (daemonized)" "$IMG" /daemon
	kill -TERM "${pids[0]}"
	wait_gone "${pids[0]}" || ro_fail "sigterm: the daemonized daemon still runs 30 s after SIGTERM"
	oracle_is_mounted "$mnt" && ro_fail "sigterm: daemonized mount still mounted after SIGTERM"
	kernel_has "sigterm (daemonized)" "$IMG" daemon daemon

	# SIGTERM delivered to the commit timer's thread (tgkill), not to the
	# main thread that waits for the end: the daemon must still end.
	RO_CELLS=$((RO_CELLS + 1))
	local tgkill
	case $(uname -m) in
	x86_64) tgkill=234 ;;
	aarch64) tgkill=131 ;;
	*) tgkill= ;;
	esac
	if [[ -z $tgkill ]]; then
		cell_skip "sigterm (timer thread): no tgkill number for $(uname -m)"
	elif up termt rw,commit=3600; then
		local tid
		printf 'thread\n' >"$MNT/thread" || ro_fail "sigterm (timer thread): write failed"
		tid=$(ls "/proc/$RO_FUSE_PID/task" | sort -n | sed -n 2p)
		if [[ -z $tid ]]; then
			ro_fail "sigterm (timer thread): the daemon has no second thread"
		else
			"$ORACLE_PYTHON" -c 'import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(libc.syscall(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), 15) != 0)' \
				"$tgkill" "$RO_FUSE_PID" "$tid" || ro_fail "sigterm (timer thread): tgkill failed"
			wait_gone "$RO_FUSE_PID" ||
				ro_fail "sigterm (timer thread): the daemon still runs 30 s after SIGTERM to thread $tid"
			oracle_is_mounted "$MNT" && ro_fail "sigterm (timer thread): still mounted"
			expect_committed "sigterm (timer thread)" "$IMG" /thread thread
		fi
	fi
	oracle_log "commit, sigterm: done"
}

# ---------------------------------------------------------------------------
# refused WHAT CMD...: CMD must fail with an "in use" message.
refused() {
	local what=$1 rc=0
	shift
	timeout 30 "$@" >"$T/refused.out" 2>&1 || rc=$?
	((rc != 0)) || ro_fail "$what: succeeded"
	grep -q 'in use' "$T/refused.out" || ro_fail "$what: no 'in use' message: $(head -c 300 "$T/refused.out")"
}

cell_exclusive() {
	RO_CELLS=$((RO_CELLS + 1))
	new_image excl
	local m2=$T/excl2.m sum first_pid first_mnt first_log
	mkdir -p "$m2"
	oracle_register_mount "$m2"
	if up excl rw,commit=3600; then
		printf 'one\n' >"$MNT/one" || ro_fail "exclusive: write failed"
		sum=$(sha256sum <"$IMG")
		refused "exclusive: a second read-write mount" "$UBTRFS" mount -f -o rw "$IMG" "$m2"
		refused "exclusive: a read-only mount under a writer" "$UBTRFS" mount -f -o ro "$IMG" "$m2"
		refused "exclusive: mkfs -f of a mounted image" "$UBTRFS" mkfs -f -q "$IMG"
		oracle_is_mounted "$m2" && { umount -l "$m2"; ro_fail "exclusive: a refused mount is mounted"; }
		[[ $(sha256sum <"$IMG") == "$sum" ]] || ro_fail "exclusive: a refused open changed the image"
		[[ $("$UBTRFS" cat "$IMG" /hello 2>/dev/null) == hello ]] ||
			ro_fail "exclusive: ubtrfs cat does not read the mounted image"
		printf 'two\n' >"$MNT/two" || ro_fail "exclusive: the first mount stopped writing"
		[[ $(cat "$MNT/one") == one ]] || ro_fail "exclusive: the first mount reads other bytes"
		down "exclusive (rw)"
		expect_committed "exclusive" "$IMG" /two two
	fi
	if up excl-ro ro; then
		first_pid=$RO_FUSE_PID first_mnt=$MNT first_log=$LOG
		refused "exclusive: a read-write mount under a read-only one" \
			"$UBTRFS" mount -f -o rw "$IMG" "$m2"
		oracle_is_mounted "$m2" && { umount -l "$m2"; ro_fail "exclusive: a refused mount is mounted"; }
		if up excl-ro2 ro; then
			[[ $(cat "$MNT/one") == one ]] || ro_fail "exclusive: the second read-only mount reads other bytes"
			down "exclusive (second ro)"
		fi
		RO_FUSE_PID=$first_pid MNT=$first_mnt LOG=$first_log
		down "exclusive (ro)"
	fi
	oracle_log "exclusive: done"
}

# ---------------------------------------------------------------------------
cell_remount() {
	RO_CELLS=$((RO_CELLS + 1))
	new_image remount
	local m out rc
	if up remount rw,commit=3600; then
		printf 'one\n' >"$MNT/one" || ro_fail "remount: write failed"
		expect_uncommitted "remount" "$IMG" /one
		"$UBTRFS" mount -o remount,ro "$MNT" 2>"$T/remount.err" ||
			{ ro_fail "remount: remount,ro failed"; ro_show "$T/remount.err"; }
		m=$(mi "$MNT")
		[[ $m == ro,* ]] || ro_fail "remount: not read-only after remount,ro: $m"
		if { printf 'x\n' >"$MNT/two"; } 2>"$T/remount.err"; then
			ro_fail "remount: write succeeds after remount,ro"
		else
			grep -q 'Read-only file system' "$T/remount.err" ||
				ro_fail "remount: write after remount,ro: $(cat "$T/remount.err")"
		fi
		expect_committed "remount,ro" "$IMG" /one one
		"$UBTRFS" mount -o remount,rw,noexec "$MNT" 2>"$T/remount.err" ||
			{ ro_fail "remount: remount,rw failed"; ro_show "$T/remount.err"; }
		m=$(mi "$MNT")
		{ [[ $m == rw,* ]] && has_opt "${m%% *}" noexec; } || ro_fail "remount: after remount,rw,noexec: $m"
		printf 'two\n' >"$MNT/two" || ro_fail "remount: write after remount,rw failed"
		down "remount"
		expect_committed "remount (unmounted)" "$IMG" /two two
	fi
	if up remount-ro ro; then
		rc=0
		out=$("$UBTRFS" mount -o remount,rw "$IMG" "$MNT" 2>&1) || rc=$?
		((rc != 0)) || ro_fail "remount: remount,rw of a read-only mount succeeded"
		[[ $out == *'cannot become read-write in place'*'mount it again with -o rw'* ]] ||
			ro_fail "remount: remount,rw of a read-only mount says: $out"
		[[ $(mi "$MNT") == *' fuse.ubtrfs '*' ro,'* ]] || ro_fail "remount: ro mount changed: $(mi "$MNT")"
		down "remount (ro)"
	fi
	rc=0
	out=$("$UBTRFS" mount -o remount,ro "$T" 2>&1) || rc=$?
	{ ((rc != 0)) && [[ $out == *'is not mounted'* ]]; } || ro_fail "remount: of a non-mount: rc $rc: $out"
	oracle_log "remount: done"
}

# ---------------------------------------------------------------------------
# Private mount namespaces.  The scenario runs inside (bash -c with these
# functions); it prints "FAIL: ..." lines and the daemons' PIDs go to
# $T/ns.pids so the harness can stop them if the scenario does not.

# ns_run NAME FUNC ARGS...: run FUNC in a new mount namespace.
ns_run() {
	local name=$1 rc=0 line p
	shift
	: >"$T/ns.pids"
	timeout 300 unshare -m --propagation private -- bash -c "
		set -uo pipefail
		$(declare -f ns_fail oracle_ns_detach ns_holders ns_wait_mnt_daemon mi has_opt committed img_holders wait_gone "$1")
		T='$T' UBTRFS='$UBTRFS' HELPER='$HELPER'
		oracle_ns_detach
		$*" >"$T/$name.ns.log" 2>&1 || rc=$?
	while IFS= read -r line; do
		[[ $line == FAIL:* ]] && ro_fail "$name: ${line#FAIL: }"
	done <"$T/$name.ns.log"
	((rc == 0)) || { ro_fail "$name: the namespace scenario exited $rc"; ro_show "$T/$name.ns.log" 30; }
	# daemons the scenario left running (it should leave none)
	while IFS= read -r p; do
		[[ -n $p ]] || continue
		if kill -0 "$p" 2>/dev/null; then
			ro_fail "$name: daemon $p still runs after the scenario"
			kill -TERM "$p" 2>/dev/null || true
			wait_gone "$p" || kill -KILL "$p" 2>/dev/null || true
		fi
	done <"$T/ns.pids"
}

ns_fail() {
	printf 'FAIL: %s\n' "$*"
}

# ns_holders IMG: record and print the daemon holding IMG.
ns_holders() {
	local p
	p=$(img_holders "$(realpath "$1")")
	printf '%s\n' "$p" >>"$T/ns.pids"
	printf '%s\n' "$p"
}

# ns_wait_mnt_daemon WHAT PIDS: after an unmount, the daemon must exit
# (it commits first).
ns_wait_mnt_daemon() {
	[[ -n $2 ]] || { ns_fail "$1: no daemon found"; return 0; }
	# shellcheck disable=SC2086
	wait_gone $2 || ns_fail "$1: the daemon still runs 30 s after the unmount"
}

# Inside: the helper overlaid on /usr/sbin, so mount(8) finds it as
# /sbin/mount.fuse.ubtrfs.
ns_helper() {
	local img=$1 mnt=$T/helper.m m pids out
	mkdir -p "$T/sbin" "$mnt"
	install -m 0755 "$HELPER" "$T/sbin/mount.fuse.ubtrfs"
	mount -t overlay overlay -o "lowerdir=$T/sbin:/usr/sbin" /usr/sbin ||
		{ ns_fail "helper: cannot overlay /usr/sbin"; return 0; }
	[[ -x /sbin/mount.fuse.ubtrfs ]] || { ns_fail "helper: not in /sbin"; return 0; }

	# mount -t fuse.ubtrfs, rw
	if ! mount -t fuse.ubtrfs -o rw,commit=3600 "$img" "$mnt"; then
		ns_fail "helper: mount -t fuse.ubtrfs -o rw,commit=3600 failed"
		return 0
	fi
	pids=$(ns_holders "$img")
	m=$(mi "$mnt")
	[[ $m == *' fuse.ubtrfs '"$(realpath "$img")"' rw,'* ]] || ns_fail "helper: mount is $m"
	has_opt "${m%% *}" nosuid && ns_fail "helper: root mount is nosuid: $m"
	has_opt "${m%% *}" nodev && ns_fail "helper: root mount is nodev: $m"
	printf 'h1\n' >"$mnt/h1" || ns_fail "helper: write failed"
	committed "$img" /h1 >/dev/null && ns_fail "helper: /h1 committed before the remount"
	mount -o remount,ro "$mnt" || ns_fail "helper: mount -o remount,ro failed"
	[[ $(mi "$mnt") == ro,* ]] || ns_fail "helper: after remount,ro: $(mi "$mnt")"
	printf 'x\n' >"$mnt/h2" 2>/dev/null && ns_fail "helper: write after remount,ro succeeded"
	[[ $(committed "$img" /h1) == h1 ]] || ns_fail "helper: remount,ro did not commit /h1"
	mount -o remount,rw "$mnt" || ns_fail "helper: mount -o remount,rw failed"
	printf 'h2\n' >"$mnt/h2" || ns_fail "helper: write after remount,rw failed"
	mount -o remount,noexec "$mnt" || ns_fail "helper: mount -o remount,noexec failed"
	has_opt "$(mi "$mnt" | cut -d' ' -f1)" noexec || ns_fail "helper: remount,noexec: $(mi "$mnt")"
	umount "$mnt" || ns_fail "helper: umount failed"
	ns_wait_mnt_daemon "helper umount" "$pids"
	[[ $(committed "$img" /h2) == h2 ]] || ns_fail "helper: /h2 not in the image after umount"

	# read-only through mount(8); remount,rw refused
	if mount -t fuse.ubtrfs -r "$img" "$mnt"; then
		pids=$(ns_holders "$img")
		[[ $(mi "$mnt") == *' ro,'* ]] || ns_fail "helper: -r mount is $(mi "$mnt")"
		out=$(mount -o remount,rw "$mnt" 2>&1) && ns_fail "helper: remount,rw of a ro mount succeeded"
		[[ $out == *'cannot become read-write in place'* ]] || ns_fail "helper: remount,rw says: $out"
		umount "$mnt" || ns_fail "helper: umount of the ro mount failed"
		ns_wait_mnt_daemon "helper ro umount" "$pids"
	else
		ns_fail "helper: mount -t fuse.ubtrfs -r failed"
	fi

	# compress= refused through mount(8)
	out=$(mount -t fuse.ubtrfs -o rw,compress=zstd "$img" "$mnt" 2>&1) &&
		ns_fail "helper: rw,compress=zstd mounted"
	[[ $out == *'compression on write is not supported yet; mount without compress='* ]] ||
		ns_fail "helper: rw,compress=zstd says: $out"
	[[ -z $(mi "$mnt") ]] || { ns_fail "helper: compress= left a mount"; umount "$mnt"; }

	# an fstab line (mount -T), its options through the helper
	printf '%s %s fuse.ubtrfs rw,commit=2,noauto,nofail,_netdev,x-test.opt=1 0 0\n' \
		"$img" "$mnt" >"$T/fstab"
	if mount -T "$T/fstab" "$mnt"; then
		pids=$(ns_holders "$img")
		printf 'f1\n' >"$mnt/f1" || ns_fail "helper fstab: write failed"
		sleep 4
		[[ $(committed "$img" /f1) == f1 ]] || ns_fail "helper fstab: commit=2 did not commit /f1"
		mount -T "$T/fstab" -o remount,ro "$mnt" || ns_fail "helper fstab: remount,ro failed"
		[[ $(mi "$mnt") == ro,* ]] || ns_fail "helper fstab: after remount,ro: $(mi "$mnt")"
		umount "$mnt" || ns_fail "helper fstab: umount failed"
		ns_wait_mnt_daemon "helper fstab umount" "$pids"
	else
		ns_fail "helper fstab: mount -T fstab $mnt failed"
	fi
	umount /usr/sbin || ns_fail "helper: cannot unmount the overlay"
}

cell_helper() {
	RO_CELLS=$((RO_CELLS + 1))
	if [[ ! -f $HELPER ]]; then
		ro_fail "helper: $HELPER does not exist (set UBTRFS_MOUNT_HELPER)"
		return 0
	fi
	if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
		cell_skip "helper cell skipped: no overlayfs to put the helper in /sbin privately"
		return 0
	fi
	new_image helper
	ns_run helper ns_helper "$IMG"
	kernel_has helper "$IMG" f1 f1
	oracle_log "helper: done"
}

# Inside: /dev/fuse world-accessible, fstab replaced, the helper in /sbin.
ns_user() {
	local img=$1 mnt=$2 m pids out
	local majmin
	majmin=$(stat -c '%Hr %Lr' /dev/fuse)
	# shellcheck disable=SC2086  # "MAJOR MINOR"
	{ mount -t tmpfs -o mode=0755,size=1M tmpfs "$T/nsdev" &&
		mknod -m 0666 "$T/nsdev/fuse" c $majmin &&
		mount --bind "$T/nsdev/fuse" /dev/fuse; } || { ns_fail "user: cannot provide /dev/fuse"; return 0; }
	local NB=(setpriv --reuid=65534 --regid=65534 --clear-groups --)

	# read-only; suid,dev asked by a user are not granted
	if "${NB[@]}" "$UBTRFS" mount -o suid,dev "$img" "$mnt"; then
		pids=$(ns_holders "$img")
		m=$(mi "$mnt")
		[[ $m == *' fuse.ubtrfs '*' ro,user_id=65534,group_id=65534'* ]] || ns_fail "user ro: mount is $m"
		{ has_opt "${m%% *}" nosuid && has_opt "${m%% *}" nodev; } || ns_fail "user ro: suid/dev granted: $m"
		[[ $("${NB[@]}" cat "$mnt/hello") == hello ]] || ns_fail "user ro: nobody cannot read /hello"
		stat "$mnt/hello" >/dev/null 2>&1 && ns_fail "user ro: root reads without allow_other"
		"${NB[@]}" fusermount3 -u "$mnt" || ns_fail "user ro: fusermount3 -u failed"
		ns_wait_mnt_daemon "user ro" "$pids"
	else
		ns_fail "user: nobody cannot mount read-only"
	fi

	# read-write; umount(8) as the user
	if "${NB[@]}" "$UBTRFS" mount -o rw,commit=3600 "$img" "$mnt"; then
		pids=$(ns_holders "$img")
		[[ $(mi "$mnt") == *' rw,user_id=65534'* ]] || ns_fail "user rw: mount is $(mi "$mnt")"
		"${NB[@]}" sh -c "mkdir '$mnt/d' && printf 'u1\n' >'$mnt/d/u1'" || ns_fail "user rw: nobody cannot write"
		"${NB[@]}" umount "$mnt" || ns_fail "user rw: umount as nobody failed"
		ns_wait_mnt_daemon "user rw" "$pids"
		[[ $(committed "$img" /d/u1) == u1 ]] || ns_fail "user rw: /d/u1 not in the image"
	else
		ns_fail "user: nobody cannot mount read-write"
	fi

	# an fstab `user` line through mount(8) and the helper
	mkdir -p "$T/sbin"
	install -m 0755 "$HELPER" "$T/sbin/mount.fuse.ubtrfs"
	mount -t overlay overlay -o "lowerdir=$T/sbin:/usr/sbin" /usr/sbin ||
		{ ns_fail "user: cannot overlay /usr/sbin"; return 0; }
	printf '%s %s fuse.ubtrfs rw,user,noauto,commit=3600 0 0\n' "$img" "$mnt" >"$T/fstab.user"
	chmod 0644 "$T/fstab.user"
	mount --bind "$T/fstab.user" /etc/fstab || { ns_fail "user: cannot replace /etc/fstab"; return 0; }
	if out=$("${NB[@]}" mount "$mnt" 2>&1); then
		pids=$(ns_holders "$img")
		m=$(mi "$mnt")
		[[ $m == *' rw,user_id=65534'* ]] || ns_fail "user fstab: mount is $m"
		has_opt "${m%% *}" noexec || ns_fail "user fstab: user mount is not noexec: $m"
		"${NB[@]}" sh -c "printf 'u2\n' >'$mnt/d/u2'" || ns_fail "user fstab: nobody cannot write"
		"${NB[@]}" umount "$mnt" || ns_fail "user fstab: umount as nobody failed"
		ns_wait_mnt_daemon "user fstab" "$pids"
		[[ $(committed "$img" /d/u2) == u2 ]] || ns_fail "user fstab: /d/u2 not in the image"
	else
		ns_fail "user fstab: mount $mnt as nobody failed: $out"
	fi
}

cell_user() {
	RO_CELLS=$((RO_CELLS + 1))
	local fm
	fm=$(command -v fusermount3)
	if [[ ! -u $fm ]]; then
		cell_skip "user cell skipped: $fm is not setuid root, users cannot mount FUSE here"
		return 0
	fi
	if ! "${NOBODY[@]}" "$UBTRFS" --version >/dev/null 2>&1; then
		cell_skip "user cell skipped: user nobody cannot run $UBTRFS (its directory is private)"
		return 0
	fi
	if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
		cell_skip "user cell skipped: no overlayfs to put the helper in /sbin privately"
		return 0
	fi
	# the image lives in a directory nobody owns; its top directory too
	local home=$T/nobody
	mkdir -p "$home/mnt" "$T/nsdev"
	new_image user
	oracle_kmount "$T/user.k" "$IMG" || oracle_fail "user: kernel mount failed"
	chown 65534:65534 "$T/user.k"
	oracle_kumount "$T/user.k"
	mv -- "$IMG" "$home/disk.img"
	chown -R 65534:65534 "$home"
	chmod 0700 "$home"
	ns_run user ns_user "$home/disk.img" "$home/mnt"
	kernel_has user "$home/disk.img" d/u2 u2
	oracle_log "user: done"
}

# ---------------------------------------------------------------------------
cell_default_start
cell_options
if [[ -n $DEF_PID ]]; then
	el=$((SECONDS - DEF_T0))
	((el >= 6)) || sleep $((6 - el))
	el=$((SECONDS - DEF_T0))
	if ((el < 28)); then
		expect_uncommitted "default commit interval (after $el s)" "$DEF_IMG" /def
	else
		ro_note "default commit: the first look came after $el s, too late to see no commit"
	fi
fi
cell_commit_sigterm
cell_exclusive
cell_remount
cell_helper
cell_user
if [[ -n $DEF_PID ]]; then
	el=$((SECONDS - DEF_T0))
	((el >= 34)) || sleep $((34 - el))
	expect_committed "default commit interval (after 34 s)" "$DEF_IMG" /def def
	RO_FUSE_PID=$DEF_PID MNT=$DEF_MNT LOG=$DEF_LOG
	down "default commit"
fi

oracle_log "total $((SECONDS - T0)) s"
ro_finish
