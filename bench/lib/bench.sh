# shellcheck shell=bash
# bench/lib/bench.sh - helpers for bench/run, sourced after tests/compat/lib.sh.
#
# State (globals set by bench/run): T (private temp dir), PIN (taskset prefix
# array, empty when unpinned), PIN_CPU, PERF_CPU, PINNED, RAW, META, LOG, NFILES,
# RAND_RUNTIME, TARGETS, WORKLOADS, IMAGELESS_WORKLOADS, PROFILE, PROFILE_DIR,
# UBTRFS.
# Set here: UB (private copy of the ubtrfs binary), IMG_BTRFS, IMG_EXT4,
# LOOP_BTRFS, LOOP_EXT4, MNT[target], IMG[target], DPID[target], ENTRIES,
# TREE_BYTES, TREE_FILE_BYTES, ROOTDIR, ELAPSED.
#
# Every figure is recorded as one line of $RAW:
#   workload  target  repetition  value  unit  cpu_seconds  peak_rss_kib
# cpu_seconds/peak_rss_kib are the FUSE daemon's (utime+stime delta over the
# measured command, VmHWM at its end) or, for the offline tools, the tool's
# own (/usr/bin/time); "-" where there is no such process.

declare -A MNT=() IMG=() DPID=()
UB=
CLK_TCK=$(getconf CLK_TCK)
# bindfs with the same kernel-cache policy ubtrfs asks for (entries,
# attributes and pages cached for a day): the fair FUSE-overhead reference.
BINDFS_OPTS=ro,kernel_cache,entry_timeout=86400,attr_timeout=86400
# btrfs restore: only the tree, with owners/modes/times, xattrs, symlinks,
# like `ubtrfs get`.
RESTORE_REGEX='^/(|tree(|/.*))$'
MEMORY_CACHE_SIZES=(4M 16M 64M)

bench_log() {
	printf 'bench [%4ds]: %s\n' "$((SECONDS - ${START_S:-0}))" "$*" >&2
}

bench_fail() {
	printf 'FAIL: %s\n' "$*" >&2
	[[ -s ${LOG:-} ]] && { echo "--- daemon log tail:" >&2; tail -n 20 "$LOG" >&2; }
	exit 1
}

bench_is_fuse() {
	[[ $1 == ubtrfs || $1 == ubtrfs-kernelmkfs || $1 == fuse-passthrough ]]
}

bench_is_ubtrfs() {
	[[ $1 == ubtrfs || $1 == ubtrfs-kernelmkfs ]]
}

bench_drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# ---------------------------------------------------------------------------
# Setup.

# Copy the binary and its libubtrfs (RUNPATH $ORIGIN/../lib) into $T, so a
# rebuild of build/ during the run changes nothing and perf can resolve
# symbols.
bench_snapshot_ubtrfs() {
	local lib
	mkdir -p "$T/sw/cli" "$T/sw/lib"
	cp -L -- "$UBTRFS" "$T/sw/cli/ubtrfs"
	lib=$(ldd "$UBTRFS" | awk '$1 ~ /^libubtrfs/ && $3 ~ /^\// { print $3; exit }')
	[[ -n $lib ]] && cp -L -- "$lib" "$T/sw/lib/$(basename -- "$lib")"
	UB=$T/sw/cli/ubtrfs
	"$UB" --version >/dev/null 2>&1 || bench_fail "$UB --version does not run"
	if [[ -n $lib ]] && ! ldd "$UB" | grep -q "$T/sw/"; then
		bench_log "warning: the copied binary does not pick up the copied libubtrfs"
	fi
}

# The data every target reads: data/seq-1g, data/rand-256m (deterministic
# pseudo-random bytes, AES-CTR keystream) and tree/ (bench/lib/mktree.py).
# bench_bytes SEED MIB: MIB mebibytes of deterministic pseudo-random bytes
# (AES-CTR keystream from openssl; Python's Mersenne Twister without it).
bench_bytes() {
	if command -v openssl >/dev/null; then
		{ openssl enc -aes-128-ctr -pbkdf2 -nosalt -pass "pass:ubtrfs-bench-$1" \
			-in /dev/zero 2>/dev/null || true; } | head -c "$(($2 << 20))"
	else
		python3 -c 'import random, sys
r = random.Random(int(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    sys.stdout.buffer.write(r.randbytes(1 << 20))' "$1" "$2"
	fi
}

bench_populate() {
	local root=$1 tarball=$2
	mkdir -p "$root/data"
	bench_bytes 1 1024 >"$root/data/seq-1g"
	bench_bytes 2 256 >"$root/data/rand-256m"
	[[ $(stat -c %s "$root/data/seq-1g") == $((1 << 30)) ]] || bench_fail "seq-1g short"
	[[ $(stat -c %s "$root/data/rand-256m") == $((1 << 28)) ]] || bench_fail "rand-256m short"
	tar -C "$root" -xf "$tarball" || bench_fail "tar -x into $root"
	sync
}

# An image made by `ubtrfs mkfs` (defaults), populated through a kernel mount.
# Sets IMG[ubtrfs]; returns 1 (leaving it alone) if mkfs or the kernel refuses.
bench_ubtrfs_mkfs_image() {
	local tarball=$1 img n
	img=$(oracle_image ubtrfs-mkfs.img 4G)
	bench_log "btrfs image for the ubtrfs target: ubtrfs mkfs, populated by the kernel"
	if ! "$UB" mkfs -q -f "$img" >>"$LOG" 2>&1; then
		bench_log "warning: ubtrfs mkfs failed (log: $LOG)"
		rm -f -- "$img"
		return 1
	fi
	if ! oracle_kmount "$T/pop" "$img" 2>>"$LOG"; then
		bench_log "warning: the kernel does not mount the ubtrfs mkfs image"
		rm -f -- "$img"
		return 1
	fi
	bench_populate "$T/pop" "$tarball"
	n=$(find "$T/pop/tree" | wc -l)
	oracle_kumount "$T/pop"
	[[ $n == "$ENTRIES" ]] || bench_fail "ubtrfs mkfs image: $n tree entries, expected $ENTRIES"
	IMG[ubtrfs]=$img
}

# bench_wants WL: is workload WL selected?
bench_wants() {
	[[ " ${WORKLOADS[*]} " == *" $1 "* ]]
}

# Do the selected workloads need the populated images (every workload but
# the mkfs ones)?
bench_wants_images() {
	local w
	for w in "${WORKLOADS[@]}"; do
		[[ " ${IMAGELESS_WORKLOADS[*]} " == *" $w "* ]] || return 0
	done
	return 1
}

# Sum of the regular files' sizes under DIR (comparable across filesystems,
# unlike du, which counts directory sizes).
bench_file_bytes() {
	find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# Entry counts and sizes of the tree at DIR/tree into $META; sets ENTRIES,
# TREE_BYTES and TREE_FILE_BYTES.
bench_tree_meta() {
	local dir=$1/tree
	ENTRIES=$(find "$dir" | wc -l)
	TREE_BYTES=$(du -s --apparent-size -B1 "$dir" | cut -f1)
	TREE_FILE_BYTES=$(bench_file_bytes "$dir")
	{
		printf 'tree_files=%s\n' "$(find "$dir" -type f | wc -l)"
		printf 'tree_dirs=%s\n' "$(find "$dir" -type d | wc -l)"
		printf 'tree_symlinks=%s\n' "$(find "$dir" -type l | wc -l)"
		printf 'tree_entries=%s\n' "$ENTRIES"
		printf 'tree_bytes=%s\n' "$TREE_BYTES"
	} >>"$META"
}

bench_setup_data() {
	local tarball=$T/tree.tar dev
	if ! bench_wants_images && ! bench_wants mkfs-rootdir; then
		bench_log "no data needed (only mkfs selected)"
		return 0
	fi
	bench_log "generating the tree: $NFILES files (bench/lib/mktree.py)"
	python3 "$BENCH_DIR/lib/mktree.py" "$NFILES" 1 >"$tarball"

	# mkfs-rootdir's source: the same tree, extracted into a directory on the
	# disk that holds the images.
	ROOTDIR=
	if bench_wants mkfs-rootdir; then
		ROOTDIR=$T/rootdir
		bench_log "mkfs --rootdir source: the tree extracted into $ROOTDIR"
		mkdir -p -- "$ROOTDIR"
		tar -C "$ROOTDIR" -xf "$tarball" || bench_fail "tar -x into $ROOTDIR"
		sync
	fi
	if ! bench_wants_images; then
		bench_tree_meta "$ROOTDIR"
		printf 'images=no images were built (only mkfs workloads selected)\n' >>"$META"
		rm -f -- "$tarball"
		return 0
	fi

	bench_log "btrfs image: mkfs.btrfs defaults, populated by the kernel"
	IMG_BTRFS=$(oracle_image btrfs.img 4G)
	oracle_mkfs -- "$IMG_BTRFS"
	oracle_kmount "$T/pop" "$IMG_BTRFS" || bench_fail "kernel mount of the new btrfs image"
	bench_populate "$T/pop" "$tarball"
	bench_tree_meta "$T/pop"
	printf 'btrfs_metadata=%s\n' "$(btrfs filesystem df -b "$T/pop" |
		awk -F'[=, ]+' '/^Metadata/ { for (i = 1; i < NF; i++) if ($i == "used") print $(i + 1) }')" \
		>>"$META"
	oracle_kumount "$T/pop"

	# The `ubtrfs` target's image: made by `ubtrfs mkfs` when the binary has
	# it (populated by the kernel until ubtrfs can write), else the same
	# mkfs.btrfs image as ubtrfs-kernelmkfs.  BENCH_UBTRFS_MKFS=0 forces the
	# latter.
	IMG[ubtrfs-kernelmkfs]=$IMG_BTRFS
	IMG[ubtrfs]=$IMG_BTRFS
	local how="mkfs.btrfs (the same image as ubtrfs-kernelmkfs), populated by the kernel"
	if [[ " ${TARGETS[*]} " == *" ubtrfs "* ]]; then
		if [[ ${BENCH_UBTRFS_MKFS:-1} != 0 ]] && "$UB" mkfs --help >/dev/null 2>&1; then
			if bench_ubtrfs_mkfs_image "$tarball"; then
				how="ubtrfs mkfs, populated by the kernel"
			else
				how="$how: ubtrfs mkfs failed, see the log"
			fi
		else
			how="$how: this ubtrfs has no mkfs"
		fi
	fi
	printf 'ubtrfs_image=%s\n' "$how" >>"$META"
	bench_log "ubtrfs target's image: $how"

	bench_log "ext4 image: mkfs.ext4 defaults, populated by the kernel"
	IMG_EXT4=$(oracle_image ext4.img 4G)
	mkfs.ext4 -q -F "$IMG_EXT4" || bench_fail "mkfs.ext4"
	dev=$(oracle_loop "$IMG_EXT4")
	mount -t ext4 -- "$dev" "$T/pop" || bench_fail "mount ext4"
	oracle_register_mount "$T/pop"
	bench_populate "$T/pop" "$tarball"
	[[ $(find "$T/pop/tree" | wc -l) == "$ENTRIES" ]] || bench_fail "ext4 tree differs"
	umount -- "$T/pop" || bench_fail "umount ext4"
	oracle_unloop "$dev"
	rm -f -- "$tarball"

	# Read-only loops for the kernel targets, for the rest of the run.
	LOOP_BTRFS=$(oracle_loop -r "$IMG_BTRFS")
	LOOP_EXT4=$(oracle_loop -r "$IMG_EXT4")
	local t
	for t in "${ALL_TARGETS[@]}"; do
		MNT[$t]=$T/mnt/$t
		mkdir -p -- "${MNT[$t]}"
	done
	mkdir -p "$T/dest"
	oracle_tmpfs "$T/dest" "$((TREE_BYTES * 2 / 1048576 + 256))M"
	bench_kernel_btrfs_up
	bench_kernel_ext4_up
	bench_verify
}

# Every selected target must show the same tree and bytes before we time it.
bench_verify() {
	local t n sum ref
	ref=$(sha256sum <"${MNT[kernel-ext4]}/data/rand-256m" | cut -d' ' -f1)
	for t in "${TARGETS[@]}"; do
		bench_is_fuse "$t" && bench_fuse_up "$t"
		n=$(find "${MNT[$t]}/tree" | wc -l)
		sum=$(sha256sum <"${MNT[$t]}/data/rand-256m" | cut -d' ' -f1)
		bench_is_fuse "$t" && bench_fuse_down "$t"
		[[ $n == "$ENTRIES" ]] || bench_fail "$t: $n entries in tree/, expected $ENTRIES"
		[[ $sum == "$ref" ]] || bench_fail "$t: data/rand-256m differs from ext4's"
	done
	bench_log "verified: every target shows $ENTRIES tree entries and the same data"
}

bench_collect_meta() {
	local src disk
	src=$(findmnt -n -o SOURCE -T "$T" | head -n1)
	disk=$(lsblk -n -d -o NAME,SIZE,ROTA,MODEL "$src" 2>/dev/null | head -n1 || true)
	{
		printf 'stamp=%s\n' "$STAMP"
		printf 'date=%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
		printf 'mode=%s\n' "$( ((QUICK)) && echo quick || echo full)"
		printf 'reps=%s\n' "$REPS"
		printf 'pinned=%s\n' "$( ((PINNED)) && echo "CPU $PIN_CPU" || echo no)"
		printf 'profile=%s\n' "$PROFILE"
		printf 'targets=%s\n' "${TARGETS[*]}"
		printf 'rand_runtime=%s\n' "$RAND_RUNTIME"
		printf 'cpu=%s\n' "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
		printf 'cores=%s\n' "$(nproc --all)"
		printf 'ram=%s\n' "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
		printf 'kernel=%s\n' "$(uname -r)"
		printf 'os=%s\n' "$(. /etc/os-release && echo "$PRETTY_NAME")"
		printf 'disk=%s (%s), images under %s (%s)\n' "$src" "${disk:-?}" "$T" \
			"$(findmnt -n -o FSTYPE -T "$T")"
		printf 'ubtrfs=%s (%s)\n' "$("$UB" --version 2>&1 | head -n1)" "$UBTRFS"
		printf 'ubtrfs_build=%s\n' "$(meson configure "$REPO/build" 2>/dev/null |
			awk '$1 == "buildtype" { print $2; exit }')"
		printf 'git=%s\n' "$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?')"
		printf 'fio=%s\n' "$(fio --version)"
		printf 'bindfs=%s\n' "$(bindfs --version 2>&1 | head -n1)"
		printf 'btrfs_progs=%s\n' "$(btrfs --version | head -n1)"
		printf 'bindfs_opts=%s\n' "$BINDFS_OPTS"
		printf 'load_start=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	} >>"$META"
}

# ---------------------------------------------------------------------------
# Targets up and down.  Kernel targets stay mounted between runs (except
# where a workload needs them down); FUSE targets are mounted fresh for every
# run and unmounted after it, so each run has a cold daemon and its own
# CPU/RSS figures.

bench_kernel_btrfs_up() {
	oracle_is_mounted "${MNT[kernel-btrfs]}" && return 0
	mount -t btrfs -o ro -- "$LOOP_BTRFS" "${MNT[kernel-btrfs]}" ||
		bench_fail "kernel mount of btrfs"
	oracle_register_mount "${MNT[kernel-btrfs]}"
}

bench_kernel_btrfs_down() {
	oracle_is_mounted "${MNT[kernel-btrfs]}" || return 0
	umount -- "${MNT[kernel-btrfs]}" || bench_fail "umount kernel-btrfs"
}

bench_kernel_ext4_up() {
	oracle_is_mounted "${MNT[kernel-ext4]}" && return 0
	mount -t ext4 -o ro -- "$LOOP_EXT4" "${MNT[kernel-ext4]}" || bench_fail "mount ext4"
	oracle_register_mount "${MNT[kernel-ext4]}"
}

bench_kernel_ext4_down() {
	oracle_is_mounted "${MNT[kernel-ext4]}" || return 0
	umount -- "${MNT[kernel-ext4]}" || bench_fail "umount kernel-ext4"
}

bench_wait_mounted() {
	local mnt=$1 pid=$2 i
	for ((i = 0; i < 1500; i++)); do
		oracle_is_mounted "$mnt" && return 0
		kill -0 "$pid" 2>/dev/null || bench_fail "FUSE daemon $pid died before mounting $mnt"
		sleep 0.02
	done
	bench_fail "$mnt not mounted after 30 s"
}

# bench_fuse_up TARGET [CACHE_SIZE]: start the daemon in the foreground (so
# we own its PID), pinned like the workload, and wait for the mount.
bench_fuse_up() {
	local t=$1 cache=${2:-} pid
	case $t in
	ubtrfs | ubtrfs-kernelmkfs)
		"${PIN[@]}" "$UB" mount -f -o "ro${cache:+,cache_size=$cache}" \
			"${IMG[$t]}" "${MNT[$t]}" >>"$LOG" 2>&1 &
		pid=$!
		;;
	fuse-passthrough)
		bench_kernel_ext4_up
		"${PIN[@]}" bindfs -f -o "$BINDFS_OPTS" "${MNT[kernel-ext4]}" "${MNT[$t]}" \
			>>"$LOG" 2>&1 &
		pid=$!
		;;
	*) bench_fail "bench_fuse_up: $t is not a FUSE target" ;;
	esac
	kill -0 "$pid" 2>/dev/null && oracle_register_pid "$pid"
	bench_wait_mounted "${MNT[$t]}" "$pid"
	oracle_register_mount "${MNT[$t]}"
	DPID[$t]=$pid
}

bench_fuse_down() {
	local t=$1 pid=${DPID[$1]:-} i
	for ((i = 0; i < 50; i++)); do
		oracle_is_mounted "${MNT[$t]}" || break
		fusermount3 -u -- "${MNT[$t]}" 2>/dev/null && break
		sleep 0.1
	done
	oracle_is_mounted "${MNT[$t]}" && bench_fail "cannot unmount ${MNT[$t]}"
	if [[ -n $pid ]]; then
		wait "$pid" 2>/dev/null || true
		unset "DPID[$t]"
	fi
}

bench_target_up() {
	case $1 in
	kernel-btrfs) bench_kernel_btrfs_up ;;
	kernel-ext4) bench_kernel_ext4_up ;;
	*) bench_fuse_up "$@" ;;
	esac
}

bench_target_down() {
	bench_is_fuse "$1" && bench_fuse_down "$1"
	return 0
}

# ---------------------------------------------------------------------------
# Measuring.

bench_cpu_ticks() {
	local s
	s=$(<"/proc/$1/stat") || { echo 0; return; }
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	echo $((${12} + ${13}))
}

bench_hwm_kib() {
	awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo -
}

# bench_time CMD...: run CMD (its stdout to $T/out), set ELAPSED in seconds.
bench_time() {
	local t0 t1 rc=0
	t0=$EPOCHREALTIME
	"$@" >"$T/out" 2>"$T/err" || rc=$?
	t1=$EPOCHREALTIME
	if ((rc)); then
		tail -n 20 "$T/err" >&2
		bench_fail "exit $rc: $*"
	fi
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
}

bench_record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RAW"
}

# perf around the measured command (--profile, first repetition, ubtrfs).
PERF_PID=
PERF_CTL=
PERF_ACK=
bench_perf_start() {
	local wl=$1 t=$2 rep=$3
	PERF_PID=
	((PROFILE)) && ((rep == 1)) && bench_is_ubtrfs "$t" || return 0
	local -a where=(-a)
	((PINNED)) && where=(-C "$PIN_CPU")
	rm -f -- "$T/perf.ctl" "$T/perf.ack"
	mkfifo "$T/perf.ctl" "$T/perf.ack"
	# perf runs on another CPU than the one it watches, starts disabled (-D
	# -1) and is switched on and off around the measured command only.
	# shellcheck disable=SC2153  # PERF_CPU is set by bench/run
	taskset -c "$PERF_CPU" perf record -q "${where[@]}" -F 999 --call-graph dwarf,16384 \
		-D -1 --control "fifo:$T/perf.ctl,$T/perf.ack" \
		-o "$T/perf-$wl.data" >"$T/perf.log" 2>&1 &
	PERF_PID=$!
	exec {PERF_CTL}<>"$T/perf.ctl" {PERF_ACK}<>"$T/perf.ack"
	sleep 0.5
	echo enable >&"$PERF_CTL"
	read -r -t 10 -u "$PERF_ACK" _ || bench_fail "perf did not start (see $T/perf.log)"
}

bench_perf_stop() {
	local wl=$1 t=$2
	[[ -n $PERF_PID ]] || return 0
	echo disable >&"$PERF_CTL"
	read -r -t 10 -u "$PERF_ACK" _ || true
	exec {PERF_CTL}>&- {PERF_ACK}<&-
	kill -INT "$PERF_PID" 2>/dev/null || true
	wait "$PERF_PID" 2>/dev/null || true
	PERF_PID=
	local d=$T/perf-$wl.data out=$PROFILE_DIR/$wl-$t.txt
	{
		echo "# perf record -F 999 --call-graph dwarf, $( ((PINNED)) && echo "CPU $PIN_CPU" || echo "all CPUs"), $wl on $t"
		echo "# --- share of samples by command and DSO"
		perf report -i "$d" --stdio --no-children --sort comm,dso -g none \
			--percent-limit 0.5 2>/dev/null | grep -v '^$'
		echo "# --- flat profile (self), all commands"
		perf report -i "$d" --stdio --no-children --sort comm,sym -g none \
			--percent-limit 0.3 2>/dev/null | grep -v '^$'
		echo "# --- the daemon's user-space functions, inclusive (children)"
		perf report -i "$d" --stdio --children --comm ubtrfs --sort sym -g none \
			--percent-limit 1 2>/dev/null | grep -v '^$'
		echo "# --- call graphs of the daemon's hottest symbols (caller view)"
		perf report -i "$d" --stdio --no-children --comm ubtrfs --sort sym \
			-g graph,0.5,caller --percent-limit 2 2>/dev/null |
			grep -v '^$' | head -n 400
	} >"$out"
	rm -f -- "$d"
	bench_log "profile: $out"
}

# bench_measure WL TARGET REP CMD...: the measured command (run by this
# shell, which bench/run has pinned, so a shell function is fine), with the FUSE
# daemon's CPU time and peak RSS around it.  Sets ELAPSED, CPU_S, RSS_KIB.
bench_measure() {
	local wl=$1 t=$2 rep=$3 pid c0=0 c1=0
	shift 3
	pid=${DPID[$t]:-}
	[[ -n $pid ]] && c0=$(bench_cpu_ticks "$pid")
	bench_perf_start "$wl" "$t" "$rep"
	local io0='' io1=''
	[[ -n $PERF_PID && -n $pid ]] && io0=$(<"/proc/$pid/io")
	bench_time "$@"
	[[ -n $PERF_PID && -n $pid ]] && io1=$(<"/proc/$pid/io")
	bench_perf_stop "$wl" "$t"
	if [[ -n $io0 ]]; then
		# The daemon's read syscalls and bytes during the run, for the profile.
		paste <(printf '%s\n' "$io0") <(printf '%s\n' "$io1") |
			awk -v e="$ELAPSED" 'BEGIN { print "# --- daemon /proc/PID/io during the run (" e " s): field, delta" }
				{ sub(":", "", $1); printf "#   %s %d\n", $1, $4 - $2 }' \
			>>"$PROFILE_DIR/$wl-$t.txt"
	fi
	if [[ -n $pid ]]; then
		c1=$(bench_cpu_ticks "$pid")
		CPU_S=$(awk -v a="$c0" -v b="$c1" -v h="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / h }')
		RSS_KIB=$(bench_hwm_kib "$pid")
	else
		CPU_S=-
		RSS_KIB=-
	fi
}

# fio terse v3: field 7 = read bandwidth (KiB/s), field 8 = read IOPS.
bench_fio_field() {
	awk -F';' -v f="$1" 'NR == 1 { print $f }' "$T/out"
}

# The measured commands.  $1 = the target's root directory.
wl_seqread() {
	fio --name=seqread --filename="$1/data/seq-1g" --readonly --invalidate=0 \
		--rw=read --bs=1M --ioengine=psync --size=1g \
		--output-format=terse --terse-version=3
}

# Cold: 8192 distinct 4 KiB blocks (fio's random map: no block twice), so
# every read misses the page cache however fast the target is.  Warm: the
# whole file is cached; time-based, repeats allowed.
wl_randread_cold() {
	fio --name=randread --filename="$1/data/rand-256m" --readonly --invalidate=0 \
		--rw=randread --bs=4k --ioengine=psync --iodepth=1 --size=256m \
		--io_size=32m --randrepeat=1 \
		--output-format=terse --terse-version=3
}

wl_randread_warm() {
	fio --name=randread --filename="$1/data/rand-256m" --readonly --invalidate=0 \
		--rw=randread --bs=4k --ioengine=psync --iodepth=1 --size=256m \
		--time_based --runtime="$RAND_RUNTIME" --randrepeat=1 --norandommap \
		--output-format=terse --terse-version=3
}

wl_find() {
	find "$1/tree"
}

wl_ls() {
	ls -lR "$1/tree"
}

# Through a pipe: GNU tar skips reading file data when the archive is /dev/null.
wl_tar() {
	tar -C "$1" -cf - tree | cat >/dev/null
}

# ---------------------------------------------------------------------------
# Which targets a workload applies to (in the selected order).
bench_targets_for() {
	local wl=$1 t
	for t in "${TARGETS[@]}"; do
		case $wl in
		memory) [[ $t == ubtrfs ]] || continue ;;
		get-cold) bench_is_ubtrfs "$t" || [[ $t == kernel-btrfs ]] || continue ;;
		mkfs | mkfs-rootdir) [[ $t == ubtrfs || $t == kernel-btrfs ]] || continue ;;
		esac
		printf '%s\n' "$t"
	done
}

# One run of one workload on one target.
bench_run_one() {
	local wl=$1 t=$2 rep=$3 root=${MNT[$2]:-} fn value unit
	case $wl in
	get-cold) bench_run_get "$t" "$rep"; return ;;
	mount) bench_run_mount "$t" "$rep"; return ;;
	memory) bench_run_memory "$t" "$rep"; return ;;
	mkfs | mkfs-rootdir) bench_run_mkfs "$wl" "$t" "$rep"; return ;;
	esac
	# get-cold and mount may have left kernel-btrfs down.
	[[ $t == kernel-btrfs ]] && bench_kernel_btrfs_up
	case $wl in
	seqread-*) fn=wl_seqread ;;
	randread-cold) fn=wl_randread_cold ;;
	randread-warm) fn=wl_randread_warm ;;
	find-*) fn=wl_find ;;
	ls-*) fn=wl_ls ;;
	tar-*) fn=wl_tar ;;
	*) bench_fail "unknown workload $wl" ;;
	esac
	bench_target_up "$t"
	if [[ $wl == *-cold ]]; then
		bench_drop_caches
	elif [[ $fn == wl_randread_warm ]]; then
		cat "$root/data/rand-256m" >/dev/null
	else
		"$fn" "$root" >/dev/null 2>&1
	fi
	bench_measure "$wl" "$t" "$rep" "$fn" "$root"
	case $fn in
	wl_seqread) value=$(bench_fio_field 7); value=$(awk -v v="$value" 'BEGIN { printf "%.1f", v / 1024 }'); unit=MiB/s ;;
	wl_randread_*) value=$(bench_fio_field 8); unit=IOPS ;;
	wl_ls) value=$(awk -v n="$ENTRIES" -v s="$ELAPSED" 'BEGIN { printf "%.0f", n / s }'); unit=entries/s ;;
	*) value=$ELAPSED; unit=s ;;
	esac
	bench_record "$wl" "$t" "$rep" "$value" "$unit" "$CPU_S" "$RSS_KIB"
	bench_target_down "$t"
}

# The offline tools on the image file: `ubtrfs get` (ubtrfs targets) and
# btrfs-progs' `btrfs restore` (recorded as kernel-btrfs: the btrfs reference).
# btrfs restore refuses an image whose loop device is mounted, so the kernel
# mount goes down first.  CPU and peak RSS are the tool's.
bench_run_get() {
	local t=$1 rep=$2 dest=$T/dest/tree n
	bench_kernel_btrfs_down
	rm -rf -- "$dest"
	bench_drop_caches
	local -a cmd
	if bench_is_ubtrfs "$t"; then
		cmd=("$UB" get -q "${IMG[$t]}" /tree "$dest")
	else
		mkdir -p -- "$dest"
		cmd=(btrfs restore -x -m -S --path-regex "$RESTORE_REGEX" "$IMG_BTRFS" "$dest")
	fi
	bench_perf_start get-cold "$t" "$rep"
	bench_time /usr/bin/time -f '%U %S %M' -o "$T/time" "${cmd[@]}"
	bench_perf_stop get-cold "$t"
	if ((rep == 1)); then
		[[ $t == kernel-btrfs ]] && n=$(find "$dest/tree" | wc -l) || n=$(find "$dest" | wc -l)
		[[ $n == "$ENTRIES" ]] ||
			bench_log "warning: get-cold on $t produced $n entries, expected $ENTRIES"
	fi
	read -r u s m <"$T/time"
	bench_record get-cold "$t" "$rep" "$ELAPSED" s \
		"$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')" "$m"
	rm -rf -- "$dest"
}

# Mount time, cold: from the mount command's start until it returns with the
# mount ready (ubtrfs and bindfs daemonize once the mount exists).
bench_run_mount() {
	local t=$1 rep=$2 mnt=${MNT[$1]}
	case $t in
	ubtrfs | ubtrfs-kernelmkfs)
		bench_drop_caches
		bench_time "$UB" mount -o ro "${IMG[$t]}" "$mnt"
		oracle_register_mount "$mnt"
		;;
	fuse-passthrough)
		bench_kernel_ext4_up
		bench_drop_caches
		bench_time bindfs -o "$BINDFS_OPTS" "${MNT[kernel-ext4]}" "$mnt"
		oracle_register_mount "$mnt"
		;;
	kernel-btrfs)
		bench_kernel_btrfs_down
		bench_drop_caches
		bench_time mount -t btrfs -o ro "$LOOP_BTRFS" "$mnt"
		oracle_register_mount "$mnt"
		;;
	kernel-ext4)
		bench_kernel_ext4_down
		bench_drop_caches
		bench_time mount -t ext4 -o ro "$LOOP_EXT4" "$mnt"
		oracle_register_mount "$mnt"
		;;
	esac
	oracle_is_mounted "$mnt" || bench_fail "$t: not mounted after the mount command"
	bench_record mount "$t" "$rep" "$(awk -v s="$ELAPSED" 'BEGIN { printf "%.1f", s * 1000 }')" \
		ms - -
	if bench_is_fuse "$t"; then
		bench_fuse_down "$t"
	fi
}

# bench_anon_watch PID: sample the process's RssAnon every 10 ms in the
# background (on the CPU perf would use, not the pinned one) until
# bench_anon_peak; the kernel keeps no high-water mark per RSS type.
ANON_PID=
bench_anon_watch() {
	rm -f -- "$T/anon.stop" "$T/anon.max"
	taskset -c "$PERF_CPU" python3 -c 'import os, sys, time
pid, out, stop = sys.argv[1:4]
peak = 0
while True:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    peak = max(peak, int(line.split()[1]))
                    break
    except OSError:
        break
    if os.path.exists(stop):
        break
    time.sleep(0.01)
with open(out, "w") as f:
    f.write(f"{peak}\n")' "$1" "$T/anon.max" "$T/anon.stop" &
	ANON_PID=$!
}

# Sets ANON_KIB to the peak RssAnon (KiB) seen since bench_anon_watch (not
# in a subshell: only this shell can wait for the sampler).
ANON_KIB=
bench_anon_peak() {
	: >"$T/anon.stop"
	wait "$ANON_PID" 2>/dev/null || true
	ANON_PID=
	ANON_KIB=$(cat -- "$T/anon.max" 2>/dev/null) || bench_fail "no RssAnon samples"
}

# Memory bound: the daemon's peak RSS after a cold tar of the tree (every
# tree block and every file's data once), for several cache_size settings.
# VmHWM also counts image pages the daemon touched through its read-only
# mapping of the image (since a878748; released after each reply since
# 10c5ae1): clean page-cache pages, shared and reclaimable.  The daemon's own
# memory is the anonymous part, so the peak RssAnon is recorded too
# (memory-anon-cacheN).
bench_run_memory() {
	local t=$1 rep=$2 c
	for c in "${MEMORY_CACHE_SIZES[@]}"; do
		bench_fuse_up "$t" "$c"
		bench_record "memory-mounted" "$t" "$rep" \
			"$(awk -v k="$(bench_hwm_kib "${DPID[$t]}")" 'BEGIN { printf "%.1f", k / 1024 }')" \
			MiB - -
		bench_drop_caches
		bench_anon_watch "${DPID[$t]}"
		bench_measure "memory-cache$c" "$t" "$rep" wl_tar "${MNT[$t]}"
		bench_anon_peak
		bench_record "memory-cache$c" "$t" "$rep" \
			"$(awk -v k="$RSS_KIB" 'BEGIN { printf "%.1f", k / 1024 }')" MiB "$CPU_S" "$RSS_KIB"
		bench_record "memory-anon-cache$c" "$t" "$rep" \
			"$(awk -v k="$ANON_KIB" 'BEGIN { printf "%.1f", k / 1024 }')" MiB - -
		bench_fuse_down "$t"
	done
}

# mkfs and mkfs-rootdir: `ubtrfs mkfs` (target ubtrfs) against btrfs-progs'
# mkfs.btrfs (recorded as kernel-btrfs: the btrfs reference, as for get-cold),
# both `-f -q`, both writing a fresh 4 GiB sparse image file on the disk that
# holds the other images.  The measured time runs from the tool's start until
# it has exited and `sync IMG` (fsync of the image) has returned, so data
# still in the page cache counts for both.  mkfs-rootdir drops the caches
# first, so the source tree (and the tool's binary) is read cold; mkfs leaves
# them warm (it reads nothing but its binary, loaded by an unmeasured run at
# the first repetition).  CPU and peak RSS are the tool's (/usr/bin/time).
bench_mkfs_synced() {
	local img=$1
	shift
	/usr/bin/time -f '%U %S %M' -o "$T/time" "$@" || return
	sync -- "$img"
}

bench_run_mkfs() {
	local wl=$1 t=$2 rep=$3 img=$T/mkfs.img value unit n bytes u s m
	local -a cmd opts=(-f -q)
	[[ $wl == mkfs-rootdir ]] && opts+=(--rootdir "$ROOTDIR")
	if [[ $t == ubtrfs ]]; then
		cmd=("$UB" mkfs "${opts[@]}" "$img")
	else
		cmd=(mkfs.btrfs "${opts[@]}" "$img")
	fi
	if [[ $wl == mkfs ]] && ((rep == 1)); then
		rm -f -- "$img"
		truncate -s 4G -- "$img"
		"${cmd[@]}" >/dev/null 2>&1 || bench_fail "unmeasured warm-up: ${cmd[*]}"
	fi
	rm -f -- "$img"
	truncate -s 4G -- "$img"
	if [[ $wl == mkfs-rootdir ]]; then
		bench_drop_caches
	else
		sync
	fi
	bench_perf_start "$wl" "$t" "$rep"
	bench_time bench_mkfs_synced "$img" "${cmd[@]}"
	bench_perf_stop "$wl" "$t"
	if ((rep == 1)); then
		# Outside the measurement: the kernel mounts what was made, and for
		# --rootdir it holds the whole tree.
		oracle_kmount -o ro "$T/mkfs-check" "$img" 2>>"$LOG" ||
			bench_fail "$wl on $t: the kernel does not mount the image"
		if [[ $wl == mkfs-rootdir ]]; then
			n=$(find "$T/mkfs-check/tree" | wc -l)
			bytes=$(bench_file_bytes "$T/mkfs-check/tree")
			oracle_kumount "$T/mkfs-check"
			[[ $n == "$ENTRIES" && $bytes == "$TREE_FILE_BYTES" ]] ||
				bench_fail "$wl on $t: $n entries, $bytes file bytes; expected $ENTRIES, $TREE_FILE_BYTES"
		else
			oracle_kumount "$T/mkfs-check"
		fi
	fi
	if [[ $wl == mkfs ]]; then
		value=$(awk -v s="$ELAPSED" 'BEGIN { printf "%.1f", s * 1000 }')
		unit=ms
	else
		value=$ELAPSED
		unit=s
	fi
	read -r u s m <"$T/time"
	bench_record "$wl" "$t" "$rep" "$value" "$unit" \
		"$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')" "$m"
	rm -f -- "$img"
}
