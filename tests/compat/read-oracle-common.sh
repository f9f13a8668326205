# shellcheck shell=bash
# read-oracle-common.sh - the steps t-read-oracle-*.sh share.  Source it after
# lib.sh and oracle_init.
#
# One configuration ("cell") goes like this:
#
#   ro_build NAME MKFS_OPTS MOUNT_OPTS NDEV SIZE
#       NDEV sparse image files $T/NAME.N.img, mkfs.btrfs MKFS_OPTS over all
#       of them (`ubtrfs mkfs` instead with RO_MKFS=ubtrfs, for what
#       mkfs.btrfs 6.2 cannot make), kernel mount with MOUNT_OPTS, the
#       workload (--btrfs, small profile, seed $RO_SEED), unmount.  Sets
#       RO_IMGS.
#   ro_reference NAME [KMOUNT_OPTS]
#       kernel mount -o ro[,KMOUNT_OPTS] of RO_IMGS: $T/NAME.k.m (manifest,
#       inode numbers mapped to ubtrfs' convention for the mounted
#       subvolume), $T/NAME.k.plain.m (the same without ctime and inode
#       numbers), $T/NAME.k.find (`find` entry count), $T/NAME.k.subvols
#       (`btrfs subvolume list`).
#   ro_check_fuse NAME TAG OPTS DEV...
#       ubtrfs mount -f -o OPTS DEV... : (b) manifest equal to $T/NAME.k.m,
#       (c) st_ino unique but for hard links, (d) find clean with the
#       kernel's entry count; the daemon must exit 0 after fusermount3 -u.
#   ro_check_get NAME TAG ARGS...
#       (e) ubtrfs get -q ARGS / DEST onto a scratch btrfs: the manifest of
#       DEST equals $T/NAME.k.plain.m (placeholder times are wildcards).
#   ro_check_ls NAME TAG ARGS...
#       (f) ubtrfs ls -R -l -i ARGS: exit 0, nothing on stderr, one line per
#       entry of the kernel's manifest.
#   ro_check_subvols NAME ARGS...
#       ubtrfs subvolume list ARGS equals the kernel's btrfs subvolume list.
#   ro_check_df NAME ARGS...
#       ubtrfs filesystem df ARGS equals the kernel's btrfs filesystem df
#       ($T/NAME.k.df, recorded by ro_reference) without GlobalReserve.
#
# Failures are counted (RO_FAILS), not fatal: the other cells still run.
# ro_finish prints the notes and the verdict and exits.

RO_SEED=${RO_SEED:-7301}
RO_FAILS=0
RO_CELLS=0
RO_TIMEOUT=${RO_TIMEOUT:-300}
RO_NOTES=()
RO_IMGS=()
T=$ORACLE_TMP
RO_DEST=

ro_fail() {
	printf 'FAIL: %s\n' "$*"
	RO_FAILS=$((RO_FAILS + 1))
}

ro_note() {
	oracle_log "NOTE: $*"
	RO_NOTES+=("$*")
}

# ro_show FILE [N]: the first N lines of FILE, indented.
ro_show() {
	[[ -s $1 ]] || return 0
	head -n "${2:-20}" -- "$1" | sed 's/^/    /'
}

# ro_run OUT ERR ARGS...: ubtrfs ARGS under timeout, output to OUT and ERR,
# status in RO_RC.  A signal, a timeout or a sanitizer report is a failure
# in itself (and sets RO_RC to at least 124).
ro_run() {
	local out=$1 err=$2
	shift 2
	RO_RC=0
	timeout "$RO_TIMEOUT" "$UBTRFS" "$@" >"$out" 2>"$err" || RO_RC=$?
	if ((RO_RC >= 124)); then
		ro_fail "ubtrfs $*: exited $RO_RC (crash, signal or timeout)"
		ro_show "$err"
	elif grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$err"; then
		ro_fail "ubtrfs $*: sanitizer report"
		ro_show "$err" 40
		RO_RC=125
	fi
}

# ro_offline_args IMG...: RO_OFFLINE=(--device IMG2 ... IMG1) for the
# offline tools.
ro_offline_args() {
	local d
	RO_OFFLINE=()
	for d in "${@:2}"; do
		RO_OFFLINE+=(--device "$d")
	done
	RO_OFFLINE+=("$1")
}

ro_build() {
	local name=$1 mkfs_line=$2 mount_opts=$3 ndev=$4 size=$5 i img
	local -a mkfs_args=()
	RO_CELLS=$((RO_CELLS + 1))
	RO_IMGS=()
	for ((i = 1; i <= ndev; i++)); do
		img=$(oracle_image "$name.$i.img" "$size")
		RO_IMGS+=("$img")
	done
	# shellcheck disable=SC2206  # word splitting of the option string
	mkfs_args=($mkfs_line)
	local tool=${RO_MKFS:-mkfs.btrfs}
	if [[ $tool == ubtrfs ]]; then
		tool="ubtrfs mkfs"
		oracle_ubtrfs mkfs -q -f "${mkfs_args[@]}" "${RO_IMGS[@]}" ||
			oracle_fail "$name: ubtrfs mkfs $mkfs_line failed"
	else
		oracle_mkfs "${mkfs_args[@]}" -- "${RO_IMGS[@]}"
	fi
	local -a mo=()
	[[ -n $mount_opts ]] && mo=(-o "$mount_opts")
	oracle_kmount "${mo[@]}" "$T/$name.w" "${RO_IMGS[@]}" ||
		oracle_fail "$name: the kernel does not mount $tool $mkfs_line"
	oracle_workload "$T/$name.w" --seed "$RO_SEED" --btrfs --profile small \
		2>"$T/$name.workload.log" ||
		{ cat "$T/$name.workload.log"; oracle_fail "$name: workload failed"; }
	oracle_kumount "$T/$name.w"
	rmdir -- "$T/$name.w"
	oracle_log "$name: built ($tool $mkfs_line; mount ${mount_opts:-defaults}; $ndev device(s))"
}

ro_reference() {
	local name=$1 extra=${2:-} mnt sid
	mnt=$T/$name.k
	oracle_kmount -o "ro${extra:+,$extra}" "$mnt" "${RO_IMGS[@]}" ||
		oracle_fail "$name: the kernel does not mount the image read-only"
	sid=$(btrfs inspect-internal rootid "$mnt") ||
		oracle_fail "$name: btrfs inspect-internal rootid $mnt failed"
	oracle_manifest "$mnt" --subvol-inodes "$sid" -o "$T/$name.k.m" ||
		oracle_fail "$name: manifest of the kernel mount failed"
	sed -e 's/ ctime=[^ ]*//' -e 's/ ino=[0-9]*//' "$T/$name.k.m" >"$T/$name.k.plain.m"
	find "$mnt" >"$T/$name.k.list" 2>"$T/$name.k.list.err" ||
		{ cat "$T/$name.k.list.err"; oracle_fail "$name: find on the kernel mount failed"; }
	wc -l <"$T/$name.k.list" >"$T/$name.k.find"
	rm -f -- "$T/$name.k.list"
	local n
	n=$(wc -l <"$T/$name.k.m")
	oracle_log "$name: kernel mount (ro${extra:+,$extra}, subvolume $sid): $n entries"
	((n >= ${RO_MIN_ENTRIES:-2})) ||
		oracle_fail "$name: the kernel shows only $n entries; the workload did not run?"
	if [[ -z $extra ]]; then
		btrfs subvolume list "$mnt" >"$T/$name.k.subvols" ||
			oracle_fail "$name: btrfs subvolume list failed"
		btrfs filesystem df "$mnt" | grep -v '^GlobalReserve' >"$T/$name.k.df" ||
			oracle_fail "$name: btrfs filesystem df failed"
	fi
	oracle_kumount "$mnt"
	rmdir -- "$mnt"
}

# ro_fuse_up MNT LOG OPTS DEV...: start `ubtrfs mount -f` in the background
# (registered with the harness before it runs, through a FIFO gate, so that
# an early exit cannot race the registration) and wait until MNT is
# mounted.  Sets RO_FUSE_PID.  Returns 1 if the mount does not come up.
ro_fuse_up() {
	local mnt=$1 log=$2 opts=$3 gate i
	shift 3
	mkdir -p -- "$mnt"
	gate=$T/.gate.$RANDOM$RANDOM
	mkfifo -- "$gate"
	(
		read -r _ <"$gate"
		exec "$UBTRFS" mount -f -o "$opts" "$@" "$mnt"
	) >"$log" 2>&1 &
	RO_FUSE_PID=$!
	oracle_register_pid "$RO_FUSE_PID"
	oracle_register_mount "$mnt"
	echo go >"$gate"
	rm -f -- "$gate"
	for ((i = 0; i < 300; i++)); do
		oracle_is_mounted "$mnt" && return 0
		kill -0 "$RO_FUSE_PID" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}

# ro_fuse_down DESC MNT LOG: fusermount3 -u, then the daemon must exit 0
# within 20 s without a sanitizer report.
ro_fuse_down() {
	local desc=$1 mnt=$2 log=$3 i rc=0
	if oracle_is_mounted "$mnt"; then
		fusermount3 -u -- "$mnt" || ro_fail "$desc: fusermount3 -u $mnt failed"
	fi
	for ((i = 0; i < 200; i++)); do
		kill -0 "$RO_FUSE_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$RO_FUSE_PID" 2>/dev/null; then
		ro_fail "$desc: ubtrfs mount still runs 20 s after the unmount"
		return 0	# the harness kills it
	fi
	wait "$RO_FUSE_PID" || rc=$?
	if ((rc != 0)); then
		ro_fail "$desc: ubtrfs mount exited $rc"
		ro_show "$log"
	elif grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$log"; then
		ro_fail "$desc: sanitizer report from ubtrfs mount"
		ro_show "$log" 40
	fi
	rmdir -- "$mnt" 2>/dev/null || true
}

# ro_unique_inodes MANIFEST: every st_ino names one entry, except the
# members of one hard-link group.  Prints the offenders.
ro_unique_inodes() {
	awk '
	{
		ino = ""; hl = ""
		for (i = 3; i <= NF; i++) {
			if ($i ~ /^ino=/) ino = substr($i, 5)
			else if ($i ~ /^hl=/) hl = substr($i, 4)
		}
		if (ino == "") next
		if (ino in first) {
			if ($2 == "d" || hl == "" || hl != group[ino]) {
				print "st_ino " ino ": " first[ino] " and " $1
				bad = 1
			}
		} else {
			first[ino] = $1
			group[ino] = ($2 == "d") ? "" : hl
		}
	}
	END { exit bad }' "$1"
}

# ro_check_fuse NAME TAG OPTS DEV...
ro_check_fuse() {
	local name=$1 tag=$2 opts=$3
	shift 3
	local mnt=$T/$name.$tag.f log=$T/$name.$tag.mount.log desc="$name ($tag)"
	local m=$T/$name.$tag.f.m kcount fcount
	if ! ro_fuse_up "$mnt" "$log" "$opts" "$@"; then
		ro_fail "$desc: ubtrfs mount -o $opts did not come up"
		ro_show "$log"
		ro_fuse_down "$desc" "$mnt" "$log"
		return 0
	fi
	# (b) the same tree, inode numbers included.
	if ! oracle_manifest "$mnt" --inodes -o "$m" 2>"$m.err"; then
		ro_fail "$desc: manifest of the FUSE mount failed"
		ro_show "$m.err"
	elif ! oracle_manifest_diff "$T/$name.k.m" "$m" >"$m.diff"; then
		ro_fail "$desc: the FUSE mount differs from the kernel's ($(grep -c '^[-+] ' "$m.diff") lines; - kernel, + ubtrfs)"
		ro_show "$m.diff" 30
	fi
	# (c) unique inode numbers.
	if [[ -s $m ]] && ! ro_unique_inodes "$m" >"$m.dups"; then
		ro_fail "$desc: st_ino shared by unrelated entries"
		ro_show "$m.dups"
	fi
	# (d) find: no loop warnings, every entry visited.
	local frc=0
	find "$mnt" >"$mnt.find" 2>"$mnt.find.err" || frc=$?
	if ((frc != 0)) || [[ -s $mnt.find.err ]]; then
		ro_fail "$desc: find exited $frc with messages"
		ro_show "$mnt.find.err"
	fi
	kcount=$(<"$T/$name.k.find")
	fcount=$(wc -l <"$mnt.find")
	((kcount == fcount)) ||
		ro_fail "$desc: find visits $fcount entries under FUSE, $kcount on the kernel mount"
	rm -f -- "$mnt.find"
	ro_fuse_down "$desc" "$mnt" "$log"
}

# ro_dest: a scratch kernel btrfs for `ubtrfs get` (xattrs of any size and
# namespace, btrfs.compression, directory sizes and link counts as btrfs
# has them), made once per script.
ro_dest() {
	[[ -n $RO_DEST ]] && return 0
	local img
	img=$(oracle_image dest.img 8G)
	oracle_mkfs -- "$img"
	oracle_kmount -o noatime "$T/dest" "$img" || oracle_fail "cannot mount the scratch btrfs"
	RO_DEST=$T/dest
}

# ro_unexpected_messages ERRFILE: print the lines of ERRFILE a clean run
# must not print, and succeed if there are any.  With every device present
# that is any line; with RO_WARN_OK=1 (degraded runs: missing devices and
# the copies on them are worth a warning) lines "ubtrfs: warning: ..." pass.
ro_unexpected_messages() {
	if [[ ${RO_WARN_OK:-0} == 1 ]]; then
		grep -v '^ubtrfs: warning: ' -- "$1"
	else
		grep '' -- "$1"
	fi
}

# ro_check_get NAME TAG ARGS... (ARGS: options and the device)
ro_check_get() {
	local name=$1 tag=$2
	shift 2
	local dest desc="$name ($tag)" m
	ro_dest
	dest=$RO_DEST/$name.$tag
	m=$T/$name.$tag.get.m
	ro_run "$T/get.out" "$T/get.err" get -q "$@" / "$dest"
	((RO_RC < 124)) || { rm -rf -- "$dest"; return 0; }
	if ((RO_RC != 0)); then
		ro_fail "$desc: ubtrfs get exited $RO_RC"
		ro_show "$T/get.err"
	elif ro_unexpected_messages "$T/get.err" >"$T/get.msgs"; then
		ro_fail "$desc: ubtrfs get printed messages"
		ro_show "$T/get.msgs"
	fi
	if [[ -d $dest ]]; then
		if ! oracle_manifest "$dest" --no-ctime -o "$m" 2>"$m.err"; then
			ro_fail "$desc: manifest of the copy failed"
			ro_show "$m.err"
		elif ! "$ORACLE_PYTHON" "$ORACLE_TOOLS/manifest.py" --diff \
			"$T/$name.k.plain.m" "$m" --wildcards >"$m.diff"; then
			ro_fail "$desc: ubtrfs get's copy differs from the kernel's tree ($(grep -c '^[-+] ' "$m.diff") lines; - kernel, + copy)"
			ro_show "$m.diff" 30
		fi
	else
		ro_fail "$desc: ubtrfs get made no $dest"
	fi
	rm -rf -- "$dest"
}

# ro_check_ls NAME TAG ARGS...
ro_check_ls() {
	local name=$1 tag=$2 want got
	shift 2
	local desc="$name ($tag)"
	ro_run "$T/ls.out" "$T/ls.err" ls -R -l -i "$@"
	((RO_RC < 124)) || return 0
	if ((RO_RC != 0)); then
		ro_fail "$desc: ubtrfs ls -R -l -i $* exited $RO_RC"
		ro_show "$T/ls.err"
		return 0
	fi
	if ro_unexpected_messages "$T/ls.err" >"$T/ls.msgs"; then
		ro_fail "$desc: ubtrfs ls -R -l -i $* printed messages"
		ro_show "$T/ls.msgs"
	fi
	# Entry lines start with SUBVOL:INODE; names holding a newline
	# continue on lines that do not.
	want=$(($(wc -l <"$T/$name.k.m") - 1))
	got=$(grep -cE '^[0-9]+:[0-9]+ ' "$T/ls.out" || true)
	((want == got)) ||
		ro_fail "$desc: ubtrfs ls -R lists $got entries, the kernel's manifest has $want"
}

# ro_check_subvols NAME ARGS...
ro_check_subvols() {
	local name=$1
	shift
	ro_run "$T/sv.out" "$T/sv.err" subvolume list "$@"
	((RO_RC < 124)) || return 0
	if ((RO_RC != 0)); then
		ro_fail "$name: ubtrfs subvolume list exited $RO_RC"
		ro_show "$T/sv.err"
	elif ! diff -u --label kernel --label ubtrfs "$T/$name.k.subvols" "$T/sv.out" >"$T/sv.diff"; then
		ro_fail "$name: ubtrfs subvolume list differs from btrfs subvolume list"
		ro_show "$T/sv.diff"
	fi
}

# ro_check_df NAME ARGS...
ro_check_df() {
	local name=$1
	shift
	ro_run "$T/df.out" "$T/df.err" filesystem df "$@"
	((RO_RC < 124)) || return 0
	if ((RO_RC != 0)); then
		ro_fail "$name: ubtrfs filesystem df exited $RO_RC"
		ro_show "$T/df.err"
	elif ! diff -u --label kernel --label ubtrfs "$T/$name.k.df" "$T/df.out" >"$T/df.diff"; then
		ro_fail "$name: ubtrfs filesystem df differs from btrfs filesystem df"
		ro_show "$T/df.diff"
	fi
}

# ro_check_dump_tree NAME IMG: `ubtrfs inspect dump-tree` prints exactly what
# `btrfs inspect-internal dump-tree` prints (every tree, every key, every
# item field), minus progs' version line.  Single-device images only: progs
# cannot assemble unattached multi-device image files.
ro_check_dump_tree() {
	local name=$1 img=$2
	btrfs inspect-internal dump-tree "$img" 2>/dev/null | tail -n +2 >"$T/dt.progs"
	ro_run "$T/dt.out" "$T/dt.err" inspect dump-tree "$img"
	((RO_RC < 124)) || return 0
	if ((RO_RC != 0)); then
		ro_fail "$name: ubtrfs inspect dump-tree exited $RO_RC"
		ro_show "$T/dt.err"
	elif ! diff -u --label progs --label ubtrfs "$T/dt.progs" "$T/dt.out" >"$T/dt.diff"; then
		ro_fail "$name: ubtrfs inspect dump-tree differs from btrfs inspect-internal dump-tree"
		ro_show "$T/dt.diff"
	fi
}

# ro_cell NAME MKFS_OPTS MOUNT_OPTS NDEV SIZE: build, reference, and every
# check with all devices.
ro_cell() {
	local name=$1 ndev=$4
	local t0=$SECONDS
	ro_build "$@"
	RO_MIN_ENTRIES=500 ro_reference "$name"
	local opts=ro
	local -a fusedevs=("${RO_IMGS[@]}")
	ro_check_fuse "$name" all "$opts" "${fusedevs[@]}"
	ro_offline_args "${RO_IMGS[@]}"
	ro_check_get "$name" all "${RO_OFFLINE[@]}"
	ro_check_ls "$name" all "${RO_OFFLINE[@]}"
	ro_check_subvols "$name" "${RO_OFFLINE[@]}"
	((ndev == 1)) && ro_check_dump_tree "$name" "${RO_IMGS[0]}"
	oracle_log "$name: checked in $((SECONDS - t0)) s ($ndev device(s))"
}

# ro_drop_images: delete the images of the last cell (space, page cache).
ro_drop_images() {
	rm -f -- "${RO_IMGS[@]}"
	RO_IMGS=()
}

ro_finish() {
	local n
	for n in "${RO_NOTES[@]}"; do
		printf 'NOTE: %s\n' "$n"
	done
	if ((RO_FAILS)); then
		printf 'FAIL: %d check(s) failed over %d configuration(s)\n' "$RO_FAILS" "$RO_CELLS"
		exit 1
	fi
	printf 'PASS: %d configuration(s)\n' "$RO_CELLS"
	exit 0
}
