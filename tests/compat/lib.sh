# shellcheck shell=bash
# lib.sh - the oracle test harness: kernel btrfs builds and checks, we compare.
#
# Source it from a bash test script, then call oracle_init:
#
#   #!/bin/bash
#   set -euo pipefail
#   . "$(dirname "$0")/lib.sh"
#   oracle_require_kernel_btrfs
#   oracle_init
#   img=$(oracle_image a.img 1G)
#   oracle_mkfs -- "$img"
#   oracle_kmount "$ORACLE_TMP/mnt" "$img"
#
# Exit codes: 0 pass, 1 fail, 77 skip.  A missing environment (root, loop
# devices, kernel btrfs, mkfs.btrfs, FUSE, python3, the ubtrfs binary) skips
# with one line "SKIP: <reason>" -- or fails with "FAIL: <reason>
# (UBTRFS_REQUIRE_ORACLE=1)" when UBTRFS_REQUIRE_ORACLE=1 (CI).
#
# Environment read: UBTRFS (the built ubtrfs binary), UBTRFS_SOURCE_ROOT (repo
# root; derived from this file's location when unset), UBTRFS_REQUIRE_ORACLE,
# ORACLE_PYTHON (python interpreter, default python3), TMPDIR.
#
# Variables set: ORACLE_TMP (private temp dir, after oracle_init), ORACLE_TOOLS
# (tests/tools), ORACLE_PYTHON, UBTRFS_SOURCE_ROOT, ORACLE_NAME (test name).
#
# API (every failure inside a harness function ends the test with FAIL unless
# said otherwise; call the require/skip/fail functions at top level, not inside
# $(...), where exit would only leave the subshell):
#
#   oracle_log MSG...             progress line on stderr, prefixed by test name
#   oracle_skip REASON            SKIP (exit 77), or FAIL under REQUIRE_ORACLE=1
#   oracle_fail MSG               "FAIL: MSG", exit 1
#   oracle_require_root           skip unless running as uid 0
#   oracle_require_cmd CMD...     skip unless every CMD is in PATH
#   oracle_require_python         skip unless $ORACLE_PYTHON (>= 3.9) runs
#   oracle_require_kernel_btrfs   root + losetup + a free loop device + btrfs
#                                 in /proc/filesystems (modprobe tried) +
#                                 mkfs.btrfs and btrfs
#   oracle_require_fuse           /dev/fuse + fusermount3 + fuse filesystem
#   oracle_require_ubtrfs         skip unless $UBTRFS is an executable file
#   oracle_init                   make $ORACLE_TMP, install the cleanup trap
#                                 (EXIT, INT, TERM, HUP); idempotent
#   oracle_cleanup                what the trap runs: run deferred commands,
#                                 kill registered processes, unmount registered
#                                 mounts and anything mounted under $ORACLE_TMP
#                                 (retry, then lazy), detach registered loop
#                                 devices and any loop backed by a file under
#                                 $ORACLE_TMP, remove $ORACLE_TMP; idempotent.
#                                 Ends the session: $ORACLE_TMP is gone after.
#   oracle_defer CMD [ARG...]     run CMD ARG... at cleanup, before the rest,
#                                 last deferred first (use instead of your own
#                                 EXIT trap, which would replace the harness's)
#   oracle_register_mount MNT     unmount MNT at cleanup (FUSE mounts: it uses
#                                 fusermount3 -u for fuse.* filesystems)
#   oracle_register_pid PID       kill PID at cleanup (TERM, then KILL after 3s);
#                                 PID reuse is detected by its start time
#   oracle_register_loop DEV      detach loop DEV at cleanup
#   oracle_image NAME SIZE        create sparse $ORACLE_TMP/NAME of SIZE
#                                 (truncate syntax: 512M, 1G); prints the path
#   oracle_mkfs [OPTS...] -- IMAGE...
#                                 mkfs.btrfs -f -q OPTS IMAGE... (files or devs)
#   oracle_loop [-r] IMAGE        attach IMAGE (read-only with -r) to a loop
#                                 device, or reuse the one this test attached;
#                                 prints /dev/loopN
#   oracle_unloop DEV             forget (btrfs device scan --forget) and detach
#   oracle_kmount [-o OPTS]... MNT DEV...
#                                 kernel-mount btrfs: image files get loop
#                                 devices (detached again by oracle_kumount),
#                                 several DEVs pass device=... options; MNT is
#                                 created if missing.  Returns 1 (with the
#                                 kernel log tail) if the kernel refuses.
#   oracle_kumount MNT            unmount (retrying while busy), detach the
#                                 loops oracle_kmount attached for MNT
#   oracle_kremount MNT OPTS      mount -o remount,OPTS MNT (e.g. ro, rw)
#   oracle_tmpfs MNT [SIZE]       mount a tmpfs (default 1G) on MNT, registered
#   oracle_is_mounted PATH        true if PATH is a mount point right now
#   oracle_ns_detach              in a fresh unshare -m namespace: lazily drop the
#                                 copies of FUSE, btrfs and temp-dir mounts (other
#                                 tests' too), so they are not kept alive
#   oracle_manifest DIR [OPTS]    tests/tools/manifest.py DIR OPTS (stdout)
#   oracle_manifest_diff A B      compare two manifest files; prints the
#                                 differing entries, returns 1 if they differ
#   oracle_workload DIR [OPTS]    tests/tools/workload.py DIR OPTS
#   oracle_btrfs_check DEV|IMAGE [OPTS]
#                                 btrfs check --readonly; prints its output and
#                                 returns 1 if it reports a problem
#   oracle_shared_images          prints $UBTRFS_SOURCE_ROOT/tests/images
#   oracle_unpack SRC DEST        SRC (.raw.xz, .img, .img.xz, .btrfs-image,
#                                 .tar.xz, raw) -> sparse raw image DEST; a
#                                 btrfs-image dump (found by its magic) is
#                                 restored with btrfs-image -r
#   oracle_ubtrfs ARGS...         run "$UBTRFS" ARGS
#
# Cleanup is also guaranteed under `set -e`: the EXIT trap keeps the test's exit
# status, except that a pass turns into a fail if something could not be
# cleaned up (a leak is a harness bug worth seeing).  Do not use
# `local x=$(cmd)`: it hides cmd's failure from set -e.

if [[ -n ${_ORACLE_LIB_LOADED:-} ]]; then
	return 0
fi
_ORACLE_LIB_LOADED=1

if [[ -z ${UBTRFS_SOURCE_ROOT:-} ]]; then
	UBTRFS_SOURCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
fi
ORACLE_TOOLS=$UBTRFS_SOURCE_ROOT/tests/tools
# A python3 reached through a version manager's shim (pyenv) costs ~0.4 s
# a start, and the tests start python thousands of times: put the
# interpreter's own directory first in PATH so every `python3` is direct.
# Only for a shim: a plain /usr/bin/python3 leaves PATH as it is.
if [[ -z ${ORACLE_PYTHON:-} ]] && _oracle_py=$(command -v python3) &&
	[[ $_oracle_py == */shims/* ]]; then
	_oracle_py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || _oracle_py=
	if [[ $_oracle_py == /* && -x $_oracle_py && $_oracle_py != */shims/* ]]; then
		PATH=${_oracle_py%/*}:$PATH
		export PATH
	fi
	unset _oracle_py
fi
ORACLE_PYTHON=${ORACLE_PYTHON:-python3}
ORACLE_NAME=$(basename "$0" .sh)
ORACLE_TMP=
_ORACLE_STATE=
_ORACLE_OWNER=
_ORACLE_CLEANING=0

# Magic of a btrfs-image metadata dump (first 8 bytes, little endian).
_ORACLE_DUMP_MAGIC="8b 66 95 72 e2 25 5c bd"

oracle_log() {
	printf '%s: %s\n' "$ORACLE_NAME" "$*" >&2
}

oracle_skip() {
	if [[ ${UBTRFS_REQUIRE_ORACLE:-0} == 1 ]]; then
		printf 'FAIL: %s (UBTRFS_REQUIRE_ORACLE=1)\n' "$*"
		exit 1
	fi
	printf 'SKIP: %s\n' "$*"
	exit 77
}

oracle_fail() {
	printf 'FAIL: %s\n' "$*"
	exit 1
}

oracle_require_root() {
	[[ $(id -u) == 0 ]] || oracle_skip "needs root"
}

oracle_require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || oracle_skip "needs $c"
	done
}

# oracle_init_block_patching: the opening of the tests that damage tree
# blocks of an image they mount through FUSE (t-rw-damage, t-rw-bgitems,
# t-rw-hostile): FUSE and the oracle, btrfs-map-logical, oracle_init and
# the read-oracle helpers (read-oracle-common.sh declares nothing local,
# so sourcing it here defines the same globals as at the top level).
oracle_init_block_patching() {
	oracle_require_fuse_oracle
	oracle_require_cmd btrfs-map-logical
	oracle_init
	# shellcheck source=read-oracle-common.sh
	. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"
}

# oracle_block_copies IMG LOGICAL: ORACLE_COPIES = the physical offsets of
# every copy of the block at LOGICAL in the single-device image IMG
# (btrfs-map-logical: the caller requires it); none fails the test.
# btrfs-map-logical first looks the block up in the extent tree, and
# btrfs-progs 6.2 sometimes misses one that is there (seen once in CI on
# a kernel-made image); then the chunk tree's dump maps it (SINGLE and DUP
# chunks: each stripe's offset plus the block's offset in the chunk).
ORACLE_COPIES=()
oracle_block_copies() {
	mapfile -t ORACLE_COPIES < <(btrfs-map-logical -l "$2" "$1" 2>/dev/null |
		awk '/physical/ { for (i = 1; i <= NF; i++) if ($i == "physical") print $(i + 1) }')
	if ((${#ORACLE_COPIES[@]} == 0)); then
		mapfile -t ORACLE_COPIES < <(btrfs inspect-internal dump-tree -t chunk "$1" 2>/dev/null |
			awk -v l="$2" '
			/CHUNK_ITEM [0-9]+\)/ { s = $0; sub(/.*CHUNK_ITEM /, "", s); sub(/\).*/, "", s); start = s + 0; len = 0 }
			$1 == "length" { len = $2 + 0; plain = $0 !~ /RAID/ }
			$1 == "stripe" && $3 == "devid" && plain && l + 0 >= start && l + 0 < start + len { print $6 + (l - start) }')
	fi
	((${#ORACLE_COPIES[@]} >= 1)) || oracle_fail "neither btrfs-map-logical nor the chunk tree found a copy of block $2"
}

oracle_require_python() {
	"$ORACLE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 9))' \
		>/dev/null 2>&1 || oracle_skip "needs $ORACLE_PYTHON >= 3.9"
}

_oracle_have_fs() {
	grep -qw "$1" /proc/filesystems 2>/dev/null
}

oracle_require_kernel_btrfs() {
	oracle_require_root
	oracle_require_cmd losetup mount umount mkfs.btrfs btrfs
	[[ -e /dev/loop-control || -e /dev/loop0 ]] || oracle_skip "needs loop devices"
	losetup -f >/dev/null 2>&1 || oracle_skip "needs a free loop device"
	if ! _oracle_have_fs btrfs; then
		modprobe btrfs >/dev/null 2>&1 || true
		_oracle_have_fs btrfs || oracle_skip "needs btrfs in the kernel"
	fi
}

oracle_require_fuse() {
	[[ -c /dev/fuse ]] || oracle_skip "needs /dev/fuse"
	oracle_require_cmd fusermount3
	if ! _oracle_have_fs fuse; then
		modprobe fuse >/dev/null 2>&1 || true
		_oracle_have_fs fuse || oracle_skip "needs fuse in the kernel"
	fi
}

oracle_require_ubtrfs() {
	[[ -n ${UBTRFS:-} && -x ${UBTRFS:-} && -f ${UBTRFS:-} ]] ||
		oracle_skip "needs the ubtrfs binary in \$UBTRFS"
}

# What the FUSE oracle tests need: the kernel's btrfs (to mount and compare),
# FUSE, python3 and the ubtrfs binary.
oracle_require_fuse_oracle() {
	oracle_require_kernel_btrfs
	oracle_require_fuse
	oracle_require_python
	oracle_require_ubtrfs
}

# ---------------------------------------------------------------------------
# Session and cleanup.  Registrations live in files under $ORACLE_TMP/.oracle
# so that helpers called inside $(...) subshells register for the parent too.

_oracle_need_init() {
	[[ -n $_ORACLE_STATE && -d $_ORACLE_STATE ]] ||
		oracle_fail "${FUNCNAME[1]}: call oracle_init first"
}

oracle_init() {
	if [[ -n $_ORACLE_STATE && -d $_ORACLE_STATE ]]; then
		return 0
	fi
	local base=${TMPDIR:-/tmp}
	ORACLE_TMP=$(mktemp -d "$base/ubtrfs-oracle.XXXXXXXX") ||
		oracle_fail "mktemp -d in $base failed"
	ORACLE_TMP=$(cd "$ORACLE_TMP" && pwd -P)
	_ORACLE_STATE=$ORACLE_TMP/.oracle
	mkdir "$_ORACLE_STATE"
	: >"$_ORACLE_STATE/mounts"	# mount point per line
	: >"$_ORACLE_STATE/loops"	# "DEV<TAB>BACKING FILE"
	: >"$_ORACLE_STATE/pids"	# "PID<TAB>START TIME"
	: >"$_ORACLE_STATE/automount"	# "MNT<TAB>DEV" loops oracle_kmount made
	: >"$_ORACLE_STATE/defer"	# shell command per line
	_ORACLE_OWNER=$BASHPID
	_ORACLE_CLEANING=0
	trap '_oracle_on_exit' EXIT
	trap '_oracle_on_signal 130' INT
	trap '_oracle_on_signal 143' TERM
	trap '_oracle_on_signal 129' HUP
}

_oracle_on_signal() {
	# exit runs the EXIT trap, which cleans up and keeps this status.
	exit "$1"
}

_oracle_on_exit() {
	local rc=$?
	# Traps are not run by subshells, but be sure a subshell never cleans up.
	[[ $BASHPID == "$_ORACLE_OWNER" ]] || return 0
	set +e
	trap - EXIT
	# A second signal must not cut the cleanup short.
	trap '' INT TERM HUP
	if ! oracle_cleanup && [[ $rc == 0 ]]; then
		printf 'FAIL: cleanup left something behind\n'
		rc=1
	fi
	exit "$rc"
}

# Start time (clock ticks since boot) of PID, or nothing if it is gone or a
# zombie.  The comm field may hold spaces, so cut after its last ')'.
_oracle_pid_start() {
	local stat rest
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	rest=${stat##*) }
	# rest: state ppid pgrp session tty tpgid flags minflt cminflt majflt
	#       cmajflt utime stime cutime cstime priority nice threads
	#       itrealvalue starttime ...
	# shellcheck disable=SC2086
	set -- $rest
	[[ $1 == Z || $1 == X ]] && return 0
	printf '%s\n' "${20}"
}

oracle_register_pid() {
	_oracle_need_init
	local pid=$1 start
	start=$(_oracle_pid_start "$pid")
	[[ -n $start ]] || return 0	# already gone: nothing to clean up
	printf '%s\t%s\n' "$pid" "$start" >>"$_ORACLE_STATE/pids"
}

_oracle_abspath() {
	realpath -m -- "$1"
}

oracle_register_mount() {
	_oracle_need_init
	_oracle_abspath "$1" >>"$_ORACLE_STATE/mounts"
}

oracle_register_loop() {
	_oracle_need_init
	local dev=$1 back
	back=$(losetup -n -O BACK-FILE -- "$dev" 2>/dev/null) || back=
	printf '%s\t%s\n' "$dev" "$back" >>"$_ORACLE_STATE/loops"
}

oracle_defer() {
	_oracle_need_init
	local cmd
	printf -v cmd '%q ' "$@"
	printf '%s\n' "$cmd" >>"$_ORACLE_STATE/defer"
}

# "MOUNT POINT<TAB>FSTYPE" per line, in mount order (last mounted last).  The
# table is read with one large read (cat): reading it piecemeal (bash's read
# builtin seeks) can skip entries while other processes mount or unmount.
_oracle_mounttab() {
	local info _a _b _c _d mp rest fstype
	info=$(cat /proc/self/mountinfo) || return 0
	while read -r _a _b _c _d mp rest; do
		# after the optional fields: "- FSTYPE SOURCE SUPEROPTS"
		fstype=${rest#* - }
		printf '%b\t%s\n' "$mp" "${fstype%% *}"
	done <<<"$info"
}

_oracle_mountpoints() {
	_oracle_mounttab | cut -f1
}

# Mount points strictly below DIR.
_oracle_mounts_under() {
	local mp
	_oracle_mountpoints | while IFS= read -r mp; do
		[[ $mp == "$1"/* ]] && printf '%s\n' "$mp"
	done
	return 0
}

# (No "| grep -q" here or elsewhere: under pipefail the writer's SIGPIPE,
# when grep quits at the first match, would turn a match into a failure.)
oracle_is_mounted() {
	local p mps
	p=$(_oracle_abspath "$1")
	mps=$(_oracle_mountpoints)
	[[ $'\n'$mps$'\n' == *$'\n'"$p"$'\n'* ]]
}

_oracle_fstype() {
	_oracle_mounttab | awk -F '\t' -v p="$1" '$1 == p { t = $2 } END { print t }'
}

# Unmount one mount point for good: plain umount with retries (fusermount3 for
# FUSE), then lazy.  Loops while something is still stacked on the point.
_oracle_umount_hard() {
	local mp=$1 try fstype
	for ((try = 0; try < 20; try++)); do
		oracle_is_mounted "$mp" || return 0
		fstype=$(_oracle_fstype "$mp")
		if [[ $fstype == fuse* ]] && command -v fusermount3 >/dev/null; then
			fusermount3 -u -- "$mp" >/dev/null 2>&1 && continue
		fi
		umount -- "$mp" >/dev/null 2>&1 && continue
		if ((try >= 5)); then
			oracle_log "cleanup: $mp busy, lazy unmount"
			if [[ $fstype == fuse* ]] && command -v fusermount3 >/dev/null; then
				fusermount3 -u -z -- "$mp" >/dev/null 2>&1 && continue
			fi
			umount -l -- "$mp" >/dev/null 2>&1 && continue
		fi
		sleep 0.2
	done
	! oracle_is_mounted "$mp"
}

# Loop devices (one "DEV<TAB>BACKING FILE" a line) backed by files under DIR.
_oracle_loops_under() {
	local dir=$1 dev back
	losetup -n -l --raw -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
		back=${back% (deleted)}
		if [[ $back == "$dir"/* ]]; then
			printf '%s\t%s\n' "$dev" "$back"
		fi
	done
}

_oracle_loop_backfile() {
	local b
	b=$(losetup -n -O BACK-FILE -- "$1" 2>/dev/null) || return 0
	printf '%s\n' "${b% (deleted)}"
}

# Detach DEV if it is still backed by BACK (else someone else owns it now).
_oracle_detach() {
	local dev=$1 back=$2 cur try
	for ((try = 0; try < 15; try++)); do
		cur=$(_oracle_loop_backfile "$dev")
		[[ -n $cur ]] || return 0
		[[ -z $back || $cur == "$back" ]] || return 0
		if ((try == 0)) && command -v btrfs >/dev/null; then
			btrfs device scan --forget "$dev" >/dev/null 2>&1 || true
		fi
		losetup -d "$dev" >/dev/null 2>&1 || true
		cur=$(_oracle_loop_backfile "$dev")
		[[ -n $cur ]] || return 0
		# A lazily unmounted fs may still hold it: -d has set autoclear,
		# the kernel detaches when the last user goes.
		sleep 0.2
	done
	oracle_log "cleanup: $dev ($back) is still attached (autoclear set)"
	return 1
}

oracle_cleanup() {
	[[ -n $_ORACLE_STATE && -d $_ORACLE_STATE ]] || return 0
	[[ $_ORACLE_CLEANING == 0 ]] || return 0
	_ORACLE_CLEANING=1
	local errexit=0
	[[ $- == *e* ]] && errexit=1
	set +e
	_oracle_cleanup_body
	local rc=$?
	((errexit)) && set -e
	return $rc
}

_oracle_cleanup_body() {
	local st=$_ORACLE_STATE leaked=0 line pid start mp dev back i
	local -a lines mps
	cd / || true

	# 1. Deferred commands, last first.
	mapfile -t lines <"$st/defer"
	for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
		eval "${lines[i]}" || oracle_log "cleanup: deferred command failed: ${lines[i]}"
	done

	# 2. Registered processes: TERM, wait up to 3 s, then KILL.
	mapfile -t lines <"$st/pids"
	for line in "${lines[@]}"; do
		IFS=$'\t' read -r pid start <<<"$line"
		[[ $(_oracle_pid_start "$pid") == "$start" ]] && kill -TERM "$pid" 2>/dev/null
	done
	for ((i = 0; i < 30; i++)); do
		local alive=0
		for line in "${lines[@]}"; do
			IFS=$'\t' read -r pid start <<<"$line"
			[[ $(_oracle_pid_start "$pid") == "$start" ]] && alive=1
		done
		((alive)) || break
		sleep 0.1
	done
	for line in "${lines[@]}"; do
		IFS=$'\t' read -r pid start <<<"$line"
		if [[ $(_oracle_pid_start "$pid") == "$start" ]]; then
			oracle_log "cleanup: killing $pid"
			kill -KILL "$pid" 2>/dev/null
		fi
	done
	# Reap the registered processes that are our children (others: no-op).
	for line in "${lines[@]}"; do
		wait "${line%%$'\t'*}" 2>/dev/null
	done

	# 3. Mounts: registered ones last-first, then anything under ORACLE_TMP,
	#    deepest first.
	mapfile -t lines <"$st/mounts"
	mps=()
	for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
		mps+=("${lines[i]}")
	done
	mapfile -t lines < <(_oracle_mounts_under "$ORACLE_TMP" |
		awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-)
	mps+=("${lines[@]}")
	for mp in "${mps[@]}"; do
		[[ -n $mp ]] || continue
		_oracle_umount_hard "$mp" || { oracle_log "cleanup: cannot unmount $mp"; leaked=1; }
	done

	# 4. Loop devices: registered ones, then any backed by our files.
	mapfile -t lines < <(cat "$st/loops"; _oracle_loops_under "$ORACLE_TMP")
	local done_devs=" "
	for line in "${lines[@]}"; do
		IFS=$'\t' read -r dev back <<<"$line"
		[[ -n $dev && $done_devs != *" $dev "* ]] || continue
		done_devs+="$dev "
		_oracle_detach "$dev" "$back" || leaked=1
	done

	# 5. The temp dir, unless something is still mounted below it.
	if [[ -n $(_oracle_mounts_under "$ORACLE_TMP") ]]; then
		oracle_log "cleanup: mounts remain under $ORACLE_TMP; keeping it"
		leaked=1
	else
		rm -rf --one-file-system -- "$ORACLE_TMP" 2>/dev/null ||
			{ oracle_log "cleanup: cannot remove $ORACLE_TMP"; leaked=1; }
	fi
	_ORACLE_STATE=
	return $((leaked))
}

# ---------------------------------------------------------------------------
# Images, loop devices and kernel mounts.

# oracle_ns_detach: in a fresh private mount namespace (unshare -m), drop
# the copies of every FUSE and btrfs mount and of everything below the temp
# directory - concurrent tests' mounts included - so that this namespace
# does not keep them (and their loop devices and FUSE daemons) alive after
# their owners unmount.  Call it first thing after unshare.
oracle_ns_detach() {
	local tmp mp
	tmp=$(realpath "${TMPDIR:-/tmp}")
	awk -v tmp="$tmp/" '{
		for (i = 7; $i != "-"; i++) ;
		t = $(i + 1)
		if ($5 != "/" && (t ~ /^fuse/ || t == "btrfs" || index($5, tmp) == 1))
			print length($5) "\t" $5
	}' /proc/self/mountinfo | sort -rn | cut -f2- | while IFS= read -r mp; do
		umount -l -- "$(printf '%b' "$mp")" 2>/dev/null || true
	done
}

oracle_image() {
	_oracle_need_init
	(($# == 2)) || oracle_fail "usage: oracle_image NAME SIZE"
	local path=$ORACLE_TMP/$1
	mkdir -p -- "$(dirname -- "$path")"
	rm -f -- "$path"
	truncate -s "$2" -- "$path" || oracle_fail "oracle_image: truncate -s $2 $path"
	printf '%s\n' "$path"
}

oracle_mkfs() {
	local -a mkfs_opts=() devs=()
	while (($#)) && [[ $1 != -- ]]; do
		mkfs_opts+=("$1")
		shift
	done
	(($#)) || oracle_fail "usage: oracle_mkfs [OPTS...] -- IMAGE..."
	shift
	devs=("$@")
	((${#devs[@]})) || oracle_fail "oracle_mkfs: no image given"
	local out
	if ! out=$(mkfs.btrfs -f -q "${mkfs_opts[@]}" "${devs[@]}" 2>&1); then
		printf '%s\n' "$out" >&2
		oracle_fail "mkfs.btrfs ${mkfs_opts[*]} ${devs[*]} failed"
	fi
}

# oracle_mkfs_with MAKER OPTS IMAGE...: a filesystem made by `ubtrfs mkfs`
# (MAKER ubtrfs) or mkfs.btrfs (any other MAKER) with the options in the
# word list OPTS; on failure the tool's output goes to stderr, return 1.
oracle_mkfs_with() {
	local maker=$1 opts=$2 out
	shift 2
	if [[ $maker == ubtrfs ]]; then
		# shellcheck disable=SC2086
		out=$("$UBTRFS" mkfs -q -f $opts "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
	else
		# shellcheck disable=SC2086
		out=$(mkfs.btrfs -f -q $opts "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
	fi
}

# Attach (or reuse) a loop device; sets _ORACLE_LOOP_DEV and _ORACLE_LOOP_NEW.
_oracle_attach() {
	local ro=$1 img dev back
	img=$(realpath -e -- "$2") || oracle_fail "oracle_loop: no such file: $2"
	while IFS=$'\t' read -r dev back; do
		if [[ $back == "$img" && $(_oracle_loop_backfile "$dev") == "$img" ]]; then
			_ORACLE_LOOP_DEV=$dev
			_ORACLE_LOOP_NEW=0
			return 0
		fi
	done <"$_ORACLE_STATE/loops"
	local -a args=(--find --show)
	[[ $ro == 1 ]] && args+=(--read-only)
	dev=$(losetup "${args[@]}" -- "$img") || oracle_fail "losetup --find --show $img failed"
	printf '%s\t%s\n' "$dev" "$img" >>"$_ORACLE_STATE/loops"
	_ORACLE_LOOP_DEV=$dev
	_ORACLE_LOOP_NEW=1
}

oracle_loop() {
	_oracle_need_init
	local ro=0
	if [[ ${1:-} == -r ]]; then
		ro=1
		shift
	fi
	(($# == 1)) || oracle_fail "usage: oracle_loop [-r] IMAGE"
	_oracle_attach "$ro" "$1"
	printf '%s\n' "$_ORACLE_LOOP_DEV"
}

oracle_unloop() {
	_oracle_need_init
	local dev=$1 back d b
	# Detach only what this test attached: the device may have been
	# released meanwhile and reused by another test for its own file.
	back=
	while IFS=$'\t' read -r d b; do
		[[ $d == "$dev" ]] && back=$b
	done <"$_ORACLE_STATE/loops"
	[[ -n $back ]] || back=$(_oracle_loop_backfile "$dev")
	_oracle_detach "$dev" "$back" || oracle_fail "cannot detach $dev"
	_oracle_drop_line "$_ORACLE_STATE/loops" "$dev"$'\t'
}

# Remove lines starting with PREFIX (exactly; no pattern) from FILE.
_oracle_drop_line() {
	local file=$1 prefix=$2 line
	local -a keep=()
	while IFS= read -r line; do
		[[ $line == "$prefix"* ]] || keep+=("$line")
	done <"$file"
	if ((${#keep[@]})); then
		printf '%s\n' "${keep[@]}" >"$file"
	else
		: >"$file"
	fi
}

_oracle_drop_exact() {
	local file=$1 want=$2 line
	local -a keep=()
	while IFS= read -r line; do
		[[ $line == "$want" ]] || keep+=("$line")
	done <"$file"
	if ((${#keep[@]})); then
		printf '%s\n' "${keep[@]}" >"$file"
	else
		: >"$file"
	fi
}

oracle_kmount() {
	_oracle_need_init
	local mount_opts='' mnt d
	local -a devs=() newloops=()
	while [[ ${1:-} == -o ]]; do
		mount_opts+=${mount_opts:+,}$2
		shift 2
	done
	(($# >= 2)) || oracle_fail "usage: oracle_kmount [-o OPTS] MNT DEV..."
	mkdir -p -- "$1"
	mnt=$(_oracle_abspath "$1")
	shift
	for d in "$@"; do
		if [[ -b $d ]]; then
			devs+=("$d")
		elif [[ -f $d ]]; then
			_oracle_attach 0 "$d"
			devs+=("$_ORACLE_LOOP_DEV")
			((_ORACLE_LOOP_NEW)) && newloops+=("$_ORACLE_LOOP_DEV")
		else
			oracle_fail "oracle_kmount: $d is neither a block device nor a file"
		fi
	done
	if ((${#devs[@]} > 1)); then
		for d in "${devs[@]}"; do
			mount_opts+=${mount_opts:+,}device=$d
		done
	fi
	for d in "${newloops[@]}"; do
		printf '%s\t%s\n' "$mnt" "$d" >>"$_ORACLE_STATE/automount"
	done
	local out
	if ! out=$(mount -t btrfs ${mount_opts:+-o "$mount_opts"} -- "${devs[0]}" "$mnt" 2>&1); then
		printf '%s\n' "$out" >&2
		dmesg 2>/dev/null | grep -i btrfs | tail -n 15 >&2 || true
		for d in "${newloops[@]}"; do
			oracle_unloop "$d"
		done
		_oracle_drop_line "$_ORACLE_STATE/automount" "$mnt"$'\t'
		oracle_log "kernel mount of ${*} on $mnt failed"
		return 1
	fi
	printf '%s\n' "$mnt" >>"$_ORACLE_STATE/mounts"
}

oracle_kumount() {
	_oracle_need_init
	local mnt try out='' mp dev
	mnt=$(_oracle_abspath "$1")
	oracle_is_mounted "$mnt" || oracle_fail "oracle_kumount: $mnt is not mounted"
	for ((try = 0; try < 25; try++)); do
		out=$(umount -- "$mnt" 2>&1) && break
		sleep 0.2
	done
	oracle_is_mounted "$mnt" && oracle_fail "oracle_kumount: umount $mnt: $out"
	_oracle_drop_exact "$_ORACLE_STATE/mounts" "$mnt"
	local -a lines
	mapfile -t lines <"$_ORACLE_STATE/automount"
	for line in "${lines[@]}"; do
		IFS=$'\t' read -r mp dev <<<"$line"
		[[ $mp == "$mnt" ]] && oracle_unloop "$dev"
	done
	_oracle_drop_line "$_ORACLE_STATE/automount" "$mnt"$'\t'
}

oracle_kremount() {
	(($# == 2)) || oracle_fail "usage: oracle_kremount MNT OPTS"
	mount -o "remount,$2" -- "$1" || oracle_fail "remount,$2 $1 failed"
}

oracle_tmpfs() {
	_oracle_need_init
	local mnt
	mkdir -p -- "$1"
	mnt=$(_oracle_abspath "$1")
	mount -t tmpfs -o "size=${2:-1G},mode=0755" tmpfs "$mnt" ||
		oracle_fail "mount -t tmpfs on $mnt failed"
	printf '%s\n' "$mnt" >>"$_ORACLE_STATE/mounts"
}

# oracle_ext4 MNT IMG SIZE: a fresh ext4 of SIZE in the file IMG, on a loop
# device, mounted on MNT (a host filesystem with a page cache of its own
# and O_DIRECT, where tmpfs has neither); unmounted and detached at exit.
oracle_ext4() {
	_oracle_need_init
	(($# == 3)) || oracle_fail "usage: oracle_ext4 MNT IMG SIZE"
	local mnt out
	mkdir -p -- "$1"
	mnt=$(_oracle_abspath "$1")
	truncate -s "$3" -- "$2" || oracle_fail "oracle_ext4: truncate $2"
	out=$(mkfs.ext4 -q -F -- "$2" 2>&1) || { printf '%s\n' "$out" >&2; oracle_fail "mkfs.ext4 $2 failed"; }
	_oracle_attach 0 "$2"
	mount -t ext4 -- "$_ORACLE_LOOP_DEV" "$mnt" || oracle_fail "mount -t ext4 on $mnt failed"
	printf '%s\n' "$mnt" >>"$_ORACLE_STATE/mounts"
}

oracle_btrfs_check() {
	local out rc=0
	out=$(btrfs check --readonly "$@" 2>&1) || rc=$?
	if ((rc)); then
		printf '%s\n' "$out" >&2
		oracle_log "btrfs check --readonly $* exited $rc"
		return 1
	fi
}

# oracle_check_clean WHAT IMG...: btrfs check --readonly of a filesystem on
# one or several image files (several are attached to loop devices and
# scanned first) must exit 0 and report no error.
oracle_check_clean() {
	local what=$1 out rc=0 d
	shift
	local -a devs=("$@") loops=()
	if ((${#devs[@]} > 1)); then
		for d in "${devs[@]}"; do
			loops+=("$(oracle_loop "$d")")
		done
		btrfs device scan "${loops[@]}" >/dev/null 2>&1 || true
		devs=("${loops[0]}")
	fi
	out=$(btrfs check --readonly "${devs[0]}" 2>&1) || rc=$?
	for d in "${loops[@]}"; do
		oracle_unloop "$d"
	done
	if ((rc)) || ! grep -q "no error found" <<<"$out"; then
		printf '%s\n' "$out" | tail -n 30 >&2
		oracle_log "$what: btrfs check --readonly failed (exit $rc)"
		return 1
	fi
}

# oracle_check_clean_data WHAT IMG: as oracle_check_clean for a filesystem
# on one image file, its data checksums verified too (--check-data-csum).
oracle_check_clean_data() {
	local what=$1 out rc=0
	out=$(btrfs check --readonly --check-data-csum "$2" 2>&1) || rc=$?
	if ((rc)) || ! grep -q "no error found" <<<"$out"; then
		printf '%s\n' "$out" | tail -n 30 >&2
		oracle_log "$what: btrfs check --readonly --check-data-csum failed (exit $rc)"
		return 1
	fi
}

# ---------------------------------------------------------------------------
# Tools and images.

oracle_manifest() {
	"$ORACLE_PYTHON" "$ORACLE_TOOLS/manifest.py" "$@"
}

oracle_manifest_diff() {
	"$ORACLE_PYTHON" "$ORACLE_TOOLS/manifest.py" --diff "$1" "$2"
}

oracle_workload() {
	"$ORACLE_PYTHON" "$ORACLE_TOOLS/workload.py" "$@"
}

oracle_ubtrfs() {
	[[ -n ${UBTRFS:-} ]] || oracle_fail "UBTRFS is not set"
	"$UBTRFS" "$@"
}

oracle_shared_images() {
	local d=$UBTRFS_SOURCE_ROOT/tests/images
	[[ -d $d ]] || oracle_fail "no image directory $d"
	printf '%s\n' "$d"
}

# oracle_unpack SRC DEST: DEST becomes the raw image SRC holds (.xz, a tar,
# or a btrfs-image dump restored).  With UBTRFS_IMAGE_CACHE set (scripts/test
# sets it), each SRC is unpacked once into that directory, keyed by its path,
# size and mtime, and DEST is a sparse copy: the crafted images hold 10 GB of
# mostly zeros, and several tests, twice per suite run, read them all.
oracle_unpack() {
	(($# == 2)) || oracle_fail "usage: oracle_unpack SRC DEST"
	local src=$1 dest=$2 cache=${UBTRFS_IMAGE_CACHE:-} key
	[[ -f $src ]] || oracle_fail "oracle_unpack: no such file: $src"
	if [[ -z $cache ]]; then
		_oracle_unpack_raw "$src" "$dest"
		return
	fi
	# btrfs-image restores dumps: a new btrfs-progs means new entries.
	if [[ -z ${_ORACLE_UNPACK_VER:-} ]]; then
		_ORACLE_UNPACK_VER="unpack-1 $(btrfs --version 2>/dev/null | head -n 1)"
	fi
	key=$(printf '%s\n%s\n' "$(realpath -- "$src")" "$_ORACLE_UNPACK_VER" | sha256sum)
	key=${key:0:24}-$(stat -L -c '%s-%Y' -- "$src")
	if [[ ! -f $cache/$key.img ]]; then
		mkdir -p -- "$cache" || oracle_fail "oracle_unpack: cannot create $cache"
		# Leftovers of unpacks that failed or were killed (an hour old).
		find "$cache" -maxdepth 1 -name '*.img.*' -mmin +60 \
			-exec rm -rf -- {} + 2>/dev/null || true
		# Unpacked under a private name, then renamed: tests running in
		# parallel may unpack the same image at once.
		_oracle_unpack_raw "$src" "$cache/$key.img.$$"
		mv -f -- "$cache/$key.img.$$" "$cache/$key.img" ||
			oracle_fail "oracle_unpack: cannot store $cache/$key.img"
	fi
	cp --sparse=always -- "$cache/$key.img" "$dest" ||
		oracle_fail "oracle_unpack: cp $cache/$key.img"
}

_oracle_unpack_raw() {
	local src=$1 dest=$2 tmp magic
	tmp=$dest.unpack.$$
	rm -rf -- "$tmp"
	case $src in
	*.tar.xz | *.tar.gz | *.tar.zst | *.tar | *.tgz)
		mkdir -p -- "$tmp.d"
		tar -xf "$src" -C "$tmp.d" || oracle_fail "oracle_unpack: tar -xf $src"
		local found
		found=$(find "$tmp.d" -type f -name test.img -print -quit)
		[[ -n $found ]] || found=$(find "$tmp.d" -type f -print -quit)
		[[ -n $found ]] || oracle_fail "oracle_unpack: $src holds no file"
		mv -- "$found" "$tmp"
		rm -rf -- "$tmp.d"
		;;
	*.xz)
		# shellcheck disable=SC2216  # cp reads the pipe as /dev/stdin
		xz -dc -- "$src" | cp --sparse=always /dev/stdin "$tmp" ||
			oracle_fail "oracle_unpack: xz -dc $src"
		;;
	*)
		cp --sparse=always -- "$src" "$tmp" || oracle_fail "oracle_unpack: cp $src"
		;;
	esac
	magic=$(od -An -tx1 -N8 -- "$tmp" | tr -s ' ' | sed 's/^ //; s/ $//')
	if [[ $magic == "$_ORACLE_DUMP_MAGIC" ]]; then
		local out
		rm -f -- "$dest"
		if ! out=$(btrfs-image -r "$tmp" "$dest" 2>&1); then
			printf '%s\n' "$out" >&2
			rm -f -- "$tmp"
			oracle_fail "oracle_unpack: btrfs-image -r $src failed"
		fi
		rm -f -- "$tmp"
	else
		mv -f -- "$tmp" "$dest"
	fi
}

# Content hash of a (sparse) file: sha256 over its non-zero 64 KiB blocks
# with their offsets, found with SEEK_DATA/SEEK_HOLE, so that a 3 TB sparse
# btrfs-image restore hashes in milliseconds.  Equal hashes = equal bytes.
# oracle_image_daemon_start OPTS IMG MNT LOG: `ubtrfs mount -f -o OPTS IMG
# MNT` in the background (registered with the harness), waiting up to 10 s
# for the mount: ORACLE_DAEMON_PID, and ORACLE_DAEMON_UP 1 if it came up
# (the mount registered too), 0 if the daemon ended first or it is late.
ORACLE_DAEMON_PID=
ORACLE_DAEMON_UP=0
oracle_image_daemon_start() {
	local opts=$1 img=$2 mnt=$3 log=$4 i
	"$UBTRFS" mount -f -o "$opts" "$img" "$mnt" >"$log" 2>&1 &
	ORACLE_DAEMON_PID=$!
	kill -0 "$ORACLE_DAEMON_PID" 2>/dev/null && { oracle_register_pid "$ORACLE_DAEMON_PID" || true; }
	ORACLE_DAEMON_UP=0
	for ((i = 0; i < 100; i++)); do
		if grep -q " $mnt fuse" /proc/mounts; then
			ORACLE_DAEMON_UP=1
			oracle_register_mount "$mnt"
			return 0
		fi
		kill -0 "$ORACLE_DAEMON_PID" 2>/dev/null || break
		sleep 0.1
	done
}

# oracle_image_daemon_end NAME UP PID LOG TENTHS: the end of a `ubtrfs
# mount -f` of a crafted image (t-images-mount, t-images-rw), after the
# unmount when it came up (UP 1): the daemon exits within TENTHS tenths of
# a second (else killed), with 0 after a mount, with 1 and a message when
# it refused the image, and without a sanitizer report.  Prints a FAIL
# line per breach and returns 1 if there was one; ORACLE_DAEMON_RC = its
# exit status.
ORACLE_DAEMON_RC=0
oracle_image_daemon_end() {
	local name=$1 up=$2 pid=$3 log=$4 tenths=$5 bad=0 i
	for ((i = 0; i < tenths; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "FAIL: $name: daemon still running $((tenths / 10)) s after unmount"
		kill -9 "$pid"
		bad=1
	fi
	ORACLE_DAEMON_RC=0
	wait "$pid" || ORACLE_DAEMON_RC=$?
	if [[ $up == 1 && $ORACLE_DAEMON_RC != 0 ]]; then
		echo "FAIL: $name: daemon exited $ORACLE_DAEMON_RC after unmount"; tail -5 "$log"; bad=1
	elif [[ $up == 0 && $ORACLE_DAEMON_RC != 1 ]]; then
		echo "FAIL: $name: refused mount with exit $ORACLE_DAEMON_RC (want 1)"; tail -5 "$log"; bad=1
	elif [[ $up == 0 ]] && ! grep -q . "$log"; then
		echo "FAIL: $name: refused mount without a message"; bad=1
	fi
	if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "$log"; then
		echo "FAIL: $name: sanitizer report"; grep -m5 -E 'ERROR|runtime error' "$log"; bad=1
	fi
	return $bad
}

oracle_content_hash() {
	"${ORACLE_PYTHON:-python3}" - "$1" <<'EOF'
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
h = hashlib.sha256(b"size %d\n" % size)
blk = 1 << 16
zero = bytes(blk)
off = 0
while off < size:
    try:
        data = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        break
    hole = os.lseek(fd, data, os.SEEK_HOLE)
    pos = data - data % blk
    while pos < hole:
        buf = os.pread(fd, blk, pos)
        if not buf:
            break
        if buf != zero[:len(buf)]:
            h.update(b"%d\n" % pos)
            h.update(buf)
        pos += len(buf)
    off = max(hole, pos)
print(h.hexdigest())
EOF
}

