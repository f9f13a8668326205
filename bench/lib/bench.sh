# shellcheck shell=bash
# bench/lib/bench.sh - helpers for bench/run, sourced after tests/compat/lib.sh.
#
# State (globals set by bench/run): T (private temp dir), PIN (taskset prefix
# array, empty when unpinned), PIN_CPU, PERF_CPU, PINNED, RAW, META, LOG, NFILES,
# RAND_RUNTIME, TARGETS, WORKLOADS, IMAGELESS_WORKLOADS, PROFILE, PROFILE_DIR,
# UBTRFS.
# Set here: UB (private copy of the ubtrfs binary), IMG_BTRFS, IMG_EXT4,
# MNT[target], IMG[target], DPID[target], CUR_LOOP[target], ENTRIES,
# TREE_BYTES, TREE_FILE_BYTES, ROOTDIR, ELAPSED.
#
# Every figure is recorded as one line of $RAW:
#   workload  target  repetition  value  unit  cpu_seconds  peak_rss_kib
# cpu_seconds/peak_rss_kib are the FUSE daemon's (utime+stime delta over the
# measured command, VmHWM at its end) or, for the offline tools, the tool's
# own (/usr/bin/time); "-" where there is no such process.

declare -A MNT=() IMG=() DPID=() CUR_LOOP=()
UB=
CLK_TCK=$(getconf CLK_TCK)
# bindfs with the same kernel-cache policy ubtrfs asks for (entries,
# attributes and pages cached for a day): the fair FUSE-overhead reference.
BINDFS_OPTS=ro,kernel_cache,entry_timeout=86400,attr_timeout=86400
# libfuse's own low-level passthrough (its example passthrough_ll.c, which
# libfuse3-dev ships as source; bench/run builds it where it can: PTLL is
# then the binary): single-threaded (-s: on one pinned CPU libfuse's
# multi-threaded loop pays a thread hand-off per request; measured 1.3-2.2x
# slower) and cache=always (entries and attributes for a day, page cache
# kept: the same policy as bindfs's options above).
PTLL=
PTLL_NOFILE=
PTLL_OPTS=cache=always
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
	[[ $1 == ubtrfs || $1 == ubtrfs-kernelmkfs || $1 == fuse-memfs ]] || bench_is_passthrough "$1"
}

# The two FUSE passthroughs over an ext4 mount: bindfs and libfuse's.
bench_is_passthrough() {
	[[ $1 == fuse-passthrough || $1 == fuse-passthrough-ll ]]
}

# bench_passthrough_cmd TARGET SOURCE MOUNTPOINT ro|rw [-f]: set PT_CMD to
# the command that mounts TARGET's passthrough of SOURCE (the ext4 mount) on
# MOUNTPOINT with the bench's cache policy; -f keeps it in the foreground
# (the caller pins it and takes its PID), else it daemonizes once the mount
# exists.
PT_CMD=()
bench_passthrough_cmd() {
	local t=$1 src=$2 mnt=$3 mode=$4 fg=${5:-}
	case $t in
	fuse-passthrough)
		if [[ $mode == ro ]]; then
			PT_CMD=(bindfs ${fg:+"$fg"} -o "$BINDFS_OPTS" "$src" "$mnt")
		else
			PT_CMD=(bindfs ${fg:+"$fg"} -o "$BINDFS_WOPTS" "$src" "$mnt")
		fi
		;;
	fuse-passthrough-ll)
		# It holds an O_PATH descriptor for every inode the kernel
		# knows: soft limit up to the hard one (bench/run checked it).
		PT_CMD=(prlimit "--nofile=$PTLL_NOFILE:$PTLL_NOFILE" "$PTLL" ${fg:+"$fg"} -s
			-o "source=$src,$PTLL_OPTS")
		if [[ $mode == ro ]]; then
			PT_CMD+=(-o ro "$mnt")
		else
			PT_CMD+=("$mnt")
		fi
		;;
	*) bench_fail "bench_passthrough_cmd: $t is not a passthrough" ;;
	esac
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

# git-status-cold's repository: ROOT/.git indexing ROOT/tree, made once
# (in the first image populated) and copied into the others as $T/git.tar.
# Its index is built with `update-index --info-only` (object ids hashed, no
# blobs stored: `git status` of an unchanged tree compares stat data and
# never reads a blob) and core.checkStat=minimal, which compares only
# mtime and size - tar gives every image the same ones, while inode numbers
# and ctimes differ between images.
bench_git_repo() {
	local root=$1 tree c
	if [[ -s $T/git.tar ]]; then
		tar -C "$root" -xf "$T/git.tar" || bench_fail "git.tar into $root"
		return
	fi
	(
		set -e
		cd -- "$root"
		export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
		export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
		export GIT_AUTHOR_DATE=@1700000000 GIT_COMMITTER_DATE=@1700000000
		git init -q --template= .
		git config core.checkStat minimal
		git config core.trustctime false
		git ls-files -o -z -- tree | git update-index --add --info-only -z --stdin
		tree=$(git write-tree --missing-ok)
		c=$(echo bench | git commit-tree "$tree")
		git update-ref HEAD "$c"
	) >>"$LOG" 2>&1 || bench_fail "cannot make the git repository for git-status-cold (see $LOG)"
	tar -C "$root" -cf "$T/git.tar" .git || bench_fail "tar of .git"
}

bench_populate() {
	local root=$1 tarball=$2
	mkdir -p "$root/data"
	bench_bytes 1 1024 >"$root/data/seq-1g"
	bench_bytes 2 256 >"$root/data/rand-256m"
	[[ $(stat -c %s "$root/data/seq-1g") == $((1 << 30)) ]] || bench_fail "seq-1g short"
	[[ $(stat -c %s "$root/data/rand-256m") == $((1 << 28)) ]] || bench_fail "rand-256m short"
	tar -C "$root" -xf "$tarball" || bench_fail "tar -x into $root"
	bench_wants git-status-cold && bench_git_repo "$root"
	sync
}

# bench_kmount [-r] FSTYPE IMG MNT: mount an image file through `mount -o
# loop`, whose loop device detaches by itself (autoclear) once unmounted and
# closed by everyone: on a shared machine other jobs' device scans may hold
# a loop device open for a moment, which makes an explicit detach fail.
bench_kmount() {
	local opts=loop
	if [[ $1 == -r ]]; then
		opts=loop,ro
		shift
	fi
	mkdir -p -- "$3"
	mount -t "$1" -o "$opts" -- "$2" "$3" || return 1
	oracle_register_mount "$3"
}

# bench_kumount [-n] MNT: unmount (retrying while busy); a btrfs loop device
# is forgotten by the kernel's device list.  A read-write mount is first
# remounted read-only, which leaves the filesystem clean on disk.  Then
# (unless -n: the image is about to be deleted) wait up to a minute until
# the loop device has let go of its image: until then the filesystem may
# still be alive - a mount namespace another job on the machine made
# meanwhile keeps a copy of the mount - and the image should not be mounted
# again through another loop device.
bench_kumount() {
	local wait=1
	if [[ $1 == -n ]]; then
		wait=0
		shift
	fi
	local mnt=$1 dev fstype try back=
	dev=$(findmnt -n -o SOURCE -M "$mnt") || bench_fail "bench_kumount: $mnt is not mounted"
	fstype=$(findmnt -n -o FSTYPE -M "$mnt")
	[[ -r /sys/class/block/${dev#/dev/}/loop/backing_file ]] &&
		back=$(<"/sys/class/block/${dev#/dev/}/loop/backing_file")
	if [[ $(findmnt -n -o OPTIONS -M "$mnt") == rw* ]]; then
		mount -o remount,ro -- "$mnt" 2>/dev/null || true
	fi
	for ((try = 0; try < 25; try++)); do
		umount -- "$mnt" 2>/dev/null && break
		sleep 0.2
	done
	oracle_is_mounted "$mnt" && bench_fail "cannot unmount $mnt"
	if [[ $fstype == btrfs ]]; then
		btrfs device scan --forget "$dev" >/dev/null 2>&1 || true
	fi
	[[ -n $back ]] && ((wait)) || return 0
	for ((try = 0; try < 600; try++)); do
		[[ -z $(losetup -n -O NAME -j "$back" 2>/dev/null) ]] && return 0
		sleep 0.1
	done
	bench_log "warning: $dev still holds $back a minute after unmounting $mnt" \
		"(another mount namespace keeps the filesystem?); going on"
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
	if ! bench_kmount btrfs "$img" "$T/pop" 2>>"$LOG"; then
		bench_log "warning: the kernel does not mount the ubtrfs mkfs image"
		rm -f -- "$img"
		return 1
	fi
	bench_populate "$T/pop" "$tarball"
	n=$(find "$T/pop/tree" | wc -l)
	bench_kumount "$T/pop"
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

# Entry counts and sizes of the tree in the tarball (when nothing extracts
# it before the runs); the same figures as bench_tree_meta.
bench_tar_meta() {
	local out
	out=$(python3 -c 'import sys, tarfile
f = d = l = b = 0
with tarfile.open(sys.argv[1]) as t:
    for m in t:
        f += m.isreg(); d += m.isdir(); l += m.issym(); b += m.size if m.isreg() else 0
print(f, d, l, f + d + l, b)' "$1") || bench_fail "cannot read $1"
	read -r f d l ENTRIES TREE_FILE_BYTES <<<"$out"
	TREE_BYTES=$TREE_FILE_BYTES
	{
		printf 'tree_files=%s\ntree_dirs=%s\ntree_symlinks=%s\n' "$f" "$d" "$l"
		printf 'tree_entries=%s\ntree_bytes=%s\n' "$ENTRIES" "$TREE_BYTES"
	} >>"$META"
}

# Do the selected workloads need the tree extracted into a directory
# (mkfs --rootdir; the snapshot workloads' image is made from it)?
bench_wants_rootdir() {
	bench_wants mkfs-rootdir || bench_wants snapshot-small || bench_wants snapshot-large
}

# Do the selected workloads extract the tree through the mounts?
bench_wants_tarball() {
	bench_wants untar || bench_wants rm-tree
}

TARBALL=
bench_setup_data() {
	local tarball=$T/tree.tar
	if ! bench_wants_images && ! bench_wants_rootdir && ! bench_wants_tarball; then
		bench_log "no data needed (only mkfs and file-creating write workloads selected)"
		printf 'images=no images and no tree were built (only mkfs and write workloads that make their own data)\n' >>"$META"
		return 0
	fi
	bench_log "generating the tree: $NFILES files (bench/lib/mktree.py)"
	python3 "$BENCH_DIR/lib/mktree.py" "$NFILES" 1 >"$tarball"
	# untar and rm-tree extract it through every target.
	bench_wants_tarball && TARBALL=$tarball

	# mkfs-rootdir's source: the same tree, extracted into a directory on the
	# disk that holds the images.
	ROOTDIR=
	if bench_wants_rootdir; then
		ROOTDIR=$T/rootdir
		bench_log "mkfs --rootdir source: the tree extracted into $ROOTDIR"
		mkdir -p -- "$ROOTDIR"
		tar -C "$ROOTDIR" -xf "$tarball" || bench_fail "tar -x into $ROOTDIR"
		sync
	fi
	if ! bench_wants_images; then
		if [[ -n $ROOTDIR ]]; then
			bench_tree_meta "$ROOTDIR"
		else
			bench_tar_meta "$tarball"
		fi
		printf 'images=no read images were built (only mkfs and write workloads selected)\n' >>"$META"
		[[ -n $TARBALL ]] || rm -f -- "$tarball"
		return 0
	fi

	bench_log "btrfs image: mkfs.btrfs defaults, populated by the kernel"
	IMG_BTRFS=$(oracle_image btrfs.img 4G)
	oracle_mkfs -- "$IMG_BTRFS"
	bench_kmount btrfs "$IMG_BTRFS" "$T/pop" || bench_fail "kernel mount of the new btrfs image"
	bench_populate "$T/pop" "$tarball"
	bench_tree_meta "$T/pop"
	printf 'btrfs_metadata=%s\n' "$(btrfs filesystem df -b "$T/pop" |
		awk -F'[=, ]+' '/^Metadata/ { for (i = 1; i < NF; i++) if ($i == "used") print $(i + 1) }')" \
		>>"$META"
	bench_kumount "$T/pop"

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
	bench_kmount ext4 "$IMG_EXT4" "$T/pop" || bench_fail "mount ext4"
	bench_populate "$T/pop" "$tarball"
	[[ $(find "$T/pop/tree" | wc -l) == "$ENTRIES" ]] || bench_fail "ext4 tree differs"
	bench_kumount "$T/pop"
	[[ -n $TARBALL ]] || rm -f -- "$tarball"

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
		[[ $t == fuse-memfs ]] && continue	# writes only
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
		# The build directory of $UBTRFS (BUILD/src/cli/ubtrfs).
		printf 'ubtrfs_build=%s\n' "$(meson configure "$(dirname -- "$UBTRFS")/../.." 2>/dev/null |
			awk '$1 == "buildtype" { print $2; exit }')"
		printf 'git=%s\n' "$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?')"
		printf 'fio=%s\n' "$(fio --version)"
		printf 'bindfs=%s\n' "$(bindfs --version 2>&1 | head -n1)"
		printf 'btrfs_progs=%s\n' "$(btrfs --version | head -n1)"
		printf 'bindfs_opts=%s\n' "$BINDFS_OPTS"
		if [[ -n $PTLL ]]; then
			printf 'passthrough_ll=libfuse %s example passthrough_ll.c, built by bench/run\n' \
				"$(pkg-config --modversion fuse3 2>/dev/null || echo '?')"
			printf 'passthrough_ll_opts=-s -o %s\n' "$PTLL_OPTS"
		fi
		printf 'w_seq_mib=%s\nw_rand_mib=%s\nw_rand_io_mib=%s\nw_files=%s\nlarge_files=%s\n' \
			"$W_SEQ_MIB" "$W_RAND_MIB" "$W_RAND_IO_MIB" "$W_FILES" "$LARGE_FILES"
		printf 'load_start=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	} >>"$META"
}

# ---------------------------------------------------------------------------
# Targets up and down.  Kernel targets stay mounted between runs (except
# where a workload needs them down); FUSE targets are mounted fresh for every
# run and unmounted after it, so each run has a cold daemon and its own
# CPU/RSS figures.

# The kernel targets mount their image through `mount -o loop,ro`: a loop
# device that exists only while mounted (autoclear), so no other job on the
# machine can detach or reuse it under us between runs.
bench_kernel_btrfs_up() {
	oracle_is_mounted "${MNT[kernel-btrfs]}" && return 0
	bench_kmount -r btrfs "$IMG_BTRFS" "${MNT[kernel-btrfs]}" ||
		bench_fail "kernel mount of btrfs"
}

bench_kernel_btrfs_down() {
	oracle_is_mounted "${MNT[kernel-btrfs]}" || return 0
	bench_kumount "${MNT[kernel-btrfs]}"
}

bench_kernel_ext4_up() {
	oracle_is_mounted "${MNT[kernel-ext4]}" && return 0
	bench_kmount -r ext4 "$IMG_EXT4" "${MNT[kernel-ext4]}" || bench_fail "mount ext4"
}

bench_kernel_ext4_down() {
	oracle_is_mounted "${MNT[kernel-ext4]}" || return 0
	bench_kumount "${MNT[kernel-ext4]}"
}

# bench_timed_kmount FSTYPE IMG MNT: the mount workload for a kernel target:
# a read-only loop device is set up first (unmeasured, as a block device
# would be there already), then only `mount` is timed; the loop device is
# then marked to go with the unmount (losetup -d of a busy device).
bench_timed_kmount() {
	local dev
	dev=$(losetup --find --show --read-only -- "$2") || bench_fail "losetup $2"
	bench_drop_caches
	bench_time mount -t "$1" -o ro -- "$dev" "$3"
	oracle_register_mount "$3"
	losetup -d "$dev" 2>/dev/null || true
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
	fuse-passthrough | fuse-passthrough-ll)
		bench_kernel_ext4_up
		bench_passthrough_cmd "$t" "${MNT[kernel-ext4]}" "${MNT[$t]}" ro -f
		"${PIN[@]}" "${PT_CMD[@]}" >>"$LOG" 2>&1 &
		pid=$!
		;;
	*) bench_fail "bench_fuse_up: $t is not a FUSE target" ;;
	esac
	kill -0 "$pid" 2>/dev/null && oracle_register_pid "$pid"
	bench_wait_mounted "${MNT[$t]}" "$pid"
	oracle_register_mount "${MNT[$t]}"
	DPID[$t]=$pid
}

# bench_fusermount MNT: unmount a FUSE mount, retrying for 5 s while busy.
bench_fusermount() {
	local i
	for ((i = 0; i < 50; i++)); do
		oracle_is_mounted "$1" || break
		fusermount3 -u -- "$1" 2>/dev/null && break
		sleep 0.1
	done
	oracle_is_mounted "$1" && bench_fail "cannot unmount $1"
	return 0
}

bench_fuse_down() {
	local t=$1 pid=${DPID[$1]:-}
	bench_fusermount "${MNT[$t]}"
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

# bench_rd_kib TARGET: KiB the target has read from its image so far, or ""
# when unknown.  Counted where only that target reads, so other jobs on a
# shared machine do not show: a ubtrfs daemon's read_bytes (/proc/PID/io:
# its tree-block preads and the page faults on its mapping of the image),
# and for kernel targets and the passthroughs (over the ext4 mount) the loop device's
# sectors read.  The loop device reads its image through the page cache,
# which a cold run has just dropped.
bench_rd_kib() {
	local t=$1 dev='' pid
	case $t in
	ubtrfs | ubtrfs-kernelmkfs)
		pid=${DPID[$t]:-}
		[[ -n $pid ]] || { echo; return; }
		awk '/^read_bytes:/ { printf "%d\n", $2 / 1024 }' "/proc/$pid/io" 2>/dev/null || echo
		return
		;;
	kernel-btrfs) dev=${CUR_LOOP[$t]:-$(findmnt -n -o SOURCE -M "${MNT[kernel-btrfs]}")} ;;
	kernel-ext4 | fuse-passthrough | fuse-passthrough-ll)
		dev=${CUR_LOOP[$t]:-$(findmnt -n -o SOURCE -M "${MNT[kernel-ext4]}")} ;;
	esac
	[[ -n $dev && -r /sys/class/block/${dev#/dev/}/stat ]] || { echo; return; }
	awk '{ printf "%d\n", $3 / 2 }' "/sys/class/block/${dev#/dev/}/stat"
}

# bench_wr_kib TARGET: KiB the target has written to its image so far, or
# "": the daemon's write_bytes (its pwrites to the image) for ubtrfs, the
# loop device's sectors written for the others (a passthrough: the ext4 below it).
# Used by the write workloads, where every target has its own loop device
# (CUR_LOOP).
bench_wr_kib() {
	local t=$1 dev='' pid
	case $t in
	ubtrfs | ubtrfs-kernelmkfs)
		pid=${DPID[$t]:-}
		[[ -n $pid ]] || { echo; return; }
		awk '/^write_bytes:/ { printf "%d\n", $2 / 1024 }' "/proc/$pid/io" 2>/dev/null || echo
		return
		;;
	*) dev=${CUR_LOOP[$t]:-} ;;
	esac
	[[ -n $dev && -r /sys/class/block/${dev#/dev/}/stat ]] || { echo; return; }
	awk '{ printf "%d\n", $7 / 2 }' "/sys/class/block/${dev#/dev/}/stat"
}

# bench_record WL TARGET REP VALUE UNIT CPU_S RSS_KIB [DISK_KIB]: one line of
# $RAW; DISK_KIB defaults to the last bench_measure's DISK_RD_KIB.
DISK_RD_KIB=-
bench_record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" \
		"${8-$DISK_RD_KIB}" >>"$RAW"
}

# perf around the measured command (--profile, first repetition, ubtrfs).
PERF_PID=
PERF_CTL=
PERF_ACK=
bench_perf_start() {
	local wl=$1 t=$2 rep=$3
	PERF_PID=
	((PROFILE)) && ((rep == 1)) && bench_is_fuse "$t" || return 0
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
	local d=$T/perf-$wl.data out=$PROFILE_DIR/$wl-$t.txt comm=ubtrfs
	[[ $t == fuse-passthrough ]] && comm=bindfs
	[[ $t == fuse-passthrough-ll ]] && comm=passthrough_ll
	[[ $t == fuse-memfs ]] && comm=memfs
	{
		echo "# perf record -F 999 --call-graph dwarf, $( ((PINNED)) && echo "CPU $PIN_CPU" || echo "all CPUs"), $wl on $t"
		echo "# --- share of samples by command and DSO"
		perf report -i "$d" --stdio --no-children --sort comm,dso -g none \
			--percent-limit 0.5 2>/dev/null | grep -v '^$'
		# Pinned, the samples of the one CPU add up to the run's time:
		# who spent it (the workload, the daemon's code, the kernel on
		# either's behalf, idle as "swapper") - comparable across targets.
		echo "# --- seconds by command and DSO (samples / 999 Hz)"
		perf report -i "$d" --stdio --no-children --sort comm,dso -g none -n \
			--percent-limit 0.5 2>/dev/null |
			awk '/%/ { printf "#   %-16s %-28s %8.3f s\n", $3, $4, $2 / 999 }'
		echo "# --- flat profile (self), all commands"
		perf report -i "$d" --stdio --no-children --sort comm,sym -g none \
			--percent-limit 0.3 2>/dev/null | grep -v '^$'
		echo "# --- the daemon's user-space functions, inclusive (children)"
		perf report -i "$d" --stdio --children --comm "$comm" --sort sym -g none \
			--percent-limit 1 2>/dev/null | grep -v '^$'
		echo "# --- call graphs of the daemon's hottest symbols (caller view)"
		perf report -i "$d" --stdio --no-children --comm "$comm" --sort sym \
			-g graph,0.5,caller --percent-limit 2 2>/dev/null |
			grep -v '^$' | head -n 400
	} >"$out"
	rm -f -- "$d"
	bench_log "profile: $out"
}

# bench_measure WL TARGET REP CMD...: the measured command (run by this
# shell, which bench/run has pinned, so a shell function is fine), with the FUSE
# daemon's CPU time and peak RSS around it and what the target read from its
# image.  Sets ELAPSED, CPU_S, RSS_KIB, DISK_RD_KIB.
bench_measure() {
	local wl=$1 t=$2 rep=$3 pid c0=0 c1=0 d0 d1
	shift 3
	pid=${DPID[$t]:-}
	[[ -n $pid ]] && c0=$(bench_cpu_ticks "$pid")
	bench_perf_start "$wl" "$t" "$rep"
	local io0='' io1=''
	[[ -n $PERF_PID && -n $pid ]] && io0=$(<"/proc/$pid/io")
	local io_fn=bench_rd_kib
	bench_is_write_wl "$wl" && io_fn=bench_wr_kib
	d0=$($io_fn "$t")
	if bench_is_write_wl "$wl"; then
		bench_time_w "$@"
	else
		bench_time "$@"
	fi
	d1=$($io_fn "$t")
	DISK_RD_KIB=-
	[[ -n $d0 && -n $d1 ]] && DISK_RD_KIB=$((d1 - d0))
	[[ -n $PERF_PID && -n $pid ]] && io1=$(<"/proc/$pid/io")
	bench_perf_stop "$wl" "$t"
	if [[ -n $io0 ]]; then
		# The daemon's read syscalls and bytes during the run, for the profile.
		paste <(printf '%s\n' "$io0") <(printf '%s\n' "$io1") |
			awk -v e="$ELAPSED" 'BEGIN { print "# --- daemon /proc/PID/io during the run (" e " s): field, delta" }
				{ sub(":", "", $1); printf "#   %s %.0f\n", $1, $4 - $2 }' \
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

# An unchanged work tree: git lstat()s every file and reads every directory
# (for untracked files), compares with its index; writes nothing.
wl_git_status() {
	git -c safe.directory='*' -C "$1" --no-optional-locks status --porcelain -- tree
}

# ---------------------------------------------------------------------------
# Write workloads through the mounts.  Every run gets a fresh filesystem: a
# new 4 GiB sparse image in the temp dir, made for the target (`ubtrfs
# mkfs` for ubtrfs, mkfs.btrfs for ubtrfs-kernelmkfs and kernel-btrfs,
# mkfs.ext4 with inode tables and journal written at once - no lazy init
# running behind the measurement - for kernel-ext4 and the passthrough),
# mounted read-write (ubtrfs: `mount -f -o rw`, pinned like the read
# daemons; kernel: a loop device; a passthrough over such an ext4 mount).  A
# workload's setup is done and made durable unmeasured; the measured command
# ends by making everything it wrote durable in the target's own way
# (bench_w_sync).  No cache is dropped: the source (the tarball) is read
# once before, so every target reads it from the page cache.

WRITE_WLS=(seqwrite randwrite-4k create-empty create-4k untar rm-tree)
bench_is_write_wl() {
	[[ " ${WRITE_WLS[*]} " == *" $1 "* ]]
}

# How long a measured write command may take before the run counts as
# failed (the ubtrfs daemon is killed, so the command errors out).
W_TIMEOUT=${BENCH_WRITE_TIMEOUT:-600}
# Failed runs go to $T/wfail.tsv (WL TARGET REP reason), the btrfs check
# results to $T/wcheck.tsv (WL TARGET result detail), for the report.

# bench_time_w CMD...: bench_time for the write workloads: a failing command
# is recorded (W_ERR set to a reason), not fatal; past W_TIMEOUT seconds the
# FUSE daemon (a process we started) is killed so the command returns.
W_ERR=
bench_time_w() {
	local t0 t1 rc=0 wd='' pid=${DPID[$W_TGT]:-}
	W_ERR=
	if [[ -n $pid ]]; then
		# The watchdog's sleep goes with it when it is stopped (TERM).
		(
			trap 'kill "$sl" 2>/dev/null; exit 0' TERM
			sleep "$W_TIMEOUT" &
			sl=$!
			wait "$sl" && kill -KILL "$pid" 2>/dev/null && : >"$T/w.timeout"
		) &
		wd=$!
	fi
	rm -f -- "$T/w.timeout"
	t0=$EPOCHREALTIME
	"$@" >"$T/out" 2>"$T/err" || rc=$?
	t1=$EPOCHREALTIME
	if [[ -n $wd ]]; then
		kill "$wd" 2>/dev/null || true
		wait "$wd" 2>/dev/null || true
	fi
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
	if [[ -e $T/w.timeout ]]; then
		W_ERR="timed out after ${W_TIMEOUT}s (daemon killed)"
	elif ((rc)); then
		W_ERR="exit $rc: $(tail -n 3 "$T/err" | tr '\n\t' '  ' | cut -c1-300)"
	elif [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
		W_ERR="the daemon exited during the run"
	fi
}

# bench_w_fail WL TARGET REP REASON: an honest record of a failed run.
bench_w_fail() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$T/wfail.tsv"
	bench_log "FAILED: $1 on $2 (repetition $3): $4"
	{ echo "--- $1 on $2, repetition $3: $4"; tail -n 20 "$T/err" 2>/dev/null; } >>"$LOG"
}

BINDFS_WOPTS=kernel_cache,entry_timeout=86400,attr_timeout=86400
WIMG=
WMNT=
WUNDER=
bench_w_up() {
	local t=$1 pid
	WIMG=$T/w-$t.img
	WMNT=$T/wmnt/$t
	WUNDER=$T/wmnt/under
	mkdir -p -- "$WMNT" "$WUNDER"
	rm -f -- "$WIMG"
	[[ $t == fuse-memfs ]] || truncate -s 4G -- "$WIMG"
	case $t in
	ubtrfs) "$UB" mkfs -q -f "$WIMG" >>"$LOG" 2>&1 || bench_fail "ubtrfs mkfs $WIMG" ;;
	ubtrfs-kernelmkfs | kernel-btrfs)
		mkfs.btrfs -q -f "$WIMG" >>"$LOG" 2>&1 || bench_fail "mkfs.btrfs $WIMG" ;;
	kernel-ext4 | fuse-passthrough | fuse-passthrough-ll)
		mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$WIMG" >>"$LOG" 2>&1 ||
			bench_fail "mkfs.ext4 $WIMG" ;;
	esac
	case $t in
	fuse-memfs)
		# No image: the ceiling's files live in its memory.
		"${PIN[@]}" "$MEMFS" -f "$WMNT" >>"$LOG" 2>&1 &
		pid=$!
		kill -0 "$pid" 2>/dev/null && oracle_register_pid "$pid"
		bench_wait_mounted "$WMNT" "$pid"
		oracle_register_mount "$WMNT"
		DPID[$t]=$pid
		;;
	ubtrfs | ubtrfs-kernelmkfs)
		"${PIN[@]}" "$UB" mount -f -o rw "$WIMG" "$WMNT" >>"$LOG" 2>&1 &
		pid=$!
		kill -0 "$pid" 2>/dev/null && oracle_register_pid "$pid"
		bench_wait_mounted "$WMNT" "$pid"
		oracle_register_mount "$WMNT"
		DPID[$t]=$pid
		;;
	kernel-btrfs | kernel-ext4)
		# mount -o loop: the loop device goes by itself (autoclear) once
		# the unmount and whoever probes it after (udev) let go.
		bench_kmount "${t#kernel-}" "$WIMG" "$WMNT" || bench_fail "mount $t $WIMG"
		CUR_LOOP[$t]=$(findmnt -n -o SOURCE -M "$WMNT")
		;;
	fuse-passthrough | fuse-passthrough-ll)
		bench_kmount ext4 "$WIMG" "$WUNDER" || bench_fail "mount ext4 $WIMG"
		CUR_LOOP[$t]=$(findmnt -n -o SOURCE -M "$WUNDER")
		bench_passthrough_cmd "$t" "$WUNDER" "$WMNT" rw -f
		"${PIN[@]}" "${PT_CMD[@]}" >>"$LOG" 2>&1 &
		pid=$!
		kill -0 "$pid" 2>/dev/null && oracle_register_pid "$pid"
		bench_wait_mounted "$WMNT" "$pid"
		oracle_register_mount "$WMNT"
		DPID[$t]=$pid
		;;
	esac
}

# Unmount (a ubtrfs daemon commits what is left and exits), detach, and for
# ubtrfs at the first repetition `btrfs check --readonly` the image the
# daemon wrote.  bench_w_down TARGET WL REP.
bench_w_down() {
	local t=$1 wl=$2 rep=$3 pid=${DPID[$1]:-} i dev=${CUR_LOOP[$1]:-}
	[[ $wl == untar ]] && bench_wants rm-tree && wl="untar+rm-tree"
	if bench_is_fuse "$t"; then
		for ((i = 0; i < 100; i++)); do
			oracle_is_mounted "$WMNT" || break
			fusermount3 -u -- "$WMNT" 2>/dev/null && break
			sleep 0.1
		done
		oracle_is_mounted "$WMNT" && fusermount3 -u -z -- "$WMNT" 2>/dev/null
		if [[ -n $pid ]]; then
			for ((i = 0; i < 600; i++)); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			if kill -0 "$pid" 2>/dev/null; then
				bench_w_fail "$wl" "$t" "$rep" "daemon still running 60 s after the unmount; killed"
				kill -KILL "$pid" 2>/dev/null || true
			fi
			wait "$pid" 2>/dev/null || true
			unset "DPID[$t]"
		fi
	fi
	if bench_is_passthrough "$t"; then
		bench_kumount -n "$WUNDER"
	elif [[ $t == kernel-* ]]; then
		bench_kumount -n "$WMNT"
	fi
	[[ -z $dev ]] || unset "CUR_LOOP[$t]"
	if bench_is_ubtrfs "$t" && ((rep == 1)); then
		local out res
		if out=$(btrfs check --readonly "$WIMG" 2>&1); then
			res=clean
		else
			res=errors
		fi
		printf '%s\t%s\t%s\t%s\n' "$wl" "$t" "$res" \
			"$(printf '%s\n' "$out" | grep -E '^(found|ERROR|error)' | head -n 3 | tr '\n\t' '  ' | cut -c1-300)" \
			>>"$T/wcheck.tsv"
		{ echo "--- btrfs check --readonly after $wl on $t: $res"; printf '%s\n' "$out"; } >>"$LOG"
		[[ $res == clean ]] || bench_log "btrfs check after $wl on $t: ERRORS (see $LOG)"
	fi
	rm -f -- "$WIMG"
}

# bench_w_sync TARGET: make everything written durable, each target its own
# way: syncfs for kernel mounts (for a passthrough: of the ext4 below it; syncfs on
# a FUSE mount does nothing here); for ubtrfs an fsync of the mount's root
# directory, which the daemon answers by committing its transaction.
bench_w_sync() {
	case $1 in
	ubtrfs | ubtrfs-kernelmkfs | fuse-memfs) sync -- "$WMNT" ;;
	kernel-btrfs | kernel-ext4) sync -f -- "$WMNT" ;;
	fuse-passthrough | fuse-passthrough-ll) sync -f -- "$WUNDER" ;;
	esac
}

# The measured write commands: $1 = the mount, $2 = the target.  fio's own
# end_fsync is inside its measured time (its runtime includes it).
# Sizes (bench/run sets them: full 1 GiB, 256 MiB with 32 MiB of random
# writes; --quick 512, 128 and 16 MiB).
W_SEQ_MIB=${W_SEQ_MIB:-1024}
W_RAND_MIB=${W_RAND_MIB:-256}
W_RAND_IO_MIB=${W_RAND_IO_MIB:-32}
wl_seqwrite() {
	fio --name=seqwrite --filename="$1/seqwrite" --rw=write --bs=1M --size="${W_SEQ_MIB}m" \
		--ioengine=psync --end_fsync=1 --output-format=terse --terse-version=3
}

wl_randwrite_setup() {
	fio --name=layout --filename="$1/randwrite" --rw=write --bs=1M --size="${W_RAND_MIB}m" \
		--ioengine=psync --end_fsync=1 --output-format=terse --terse-version=3 >/dev/null
}

# W_RAND_IO_MIB of distinct 4 KiB blocks (fio's random map) of the file.
wl_randwrite() {
	fio --name=randwrite --filename="$1/randwrite" --rw=randwrite --bs=4k --ioengine=psync \
		--iodepth=1 --size="${W_RAND_MIB}m" --io_size="${W_RAND_IO_MIB}m" --randrepeat=1 --end_fsync=1 \
		--output-format=terse --terse-version=3
}

W_FILES=${W_FILES:-20000}
wl_create() {
	python3 "$BENCH_DIR/lib/mkfiles.py" "$1/create" "$W_FILES" && bench_w_sync "$2"
}

wl_files4k() {
	python3 "$BENCH_DIR/lib/mkfiles.py" "$1/files" "$W_FILES" 100 4096 && bench_w_sync "$2"
}

wl_untar() {
	tar -C "$1" -xf "$TARBALL" && bench_w_sync "$2"
}

wl_rmtree() {
	rm -rf -- "$1/tree" && bench_w_sync "$2"
}

# bench_w_verify WL ROOT: after the first repetition, outside the timing,
# check that the workload did what it says; prints a reason if not.
bench_w_verify() {
	local wl=$1 r=$2 n
	case $wl in
	seqwrite) n=$(stat -c %s -- "$r/seqwrite" 2>/dev/null); [[ $n == $((W_SEQ_MIB << 20)) ]] || echo "seqwrite is ${n:-missing} bytes" ;;
	randwrite-4k) n=$(stat -c %s -- "$r/randwrite" 2>/dev/null); [[ $n == $((W_RAND_MIB << 20)) ]] || echo "randwrite is ${n:-missing} bytes" ;;
	create-empty) n=$(find "$r/create" -mindepth 1 -type f -size 0 | wc -l); [[ $n == "$W_FILES" ]] || echo "$n empty files, expected $W_FILES" ;;
	create-4k) n=$(find "$r/files" -type f -size 4096c | wc -l); [[ $n == "$W_FILES" ]] || echo "$n files of 4 KiB, expected $W_FILES" ;;
	untar) n=$(find "$r/tree" | wc -l); [[ $n == "$ENTRIES" ]] || echo "$n entries after untar, expected $ENTRIES" ;;
	rm-tree) [[ ! -e $r/tree ]] || echo "tree still there after rm -rf" ;;
	esac
}

# bench_w_measure WL TARGET REP FN: one measured write command on the
# mounted target, recorded (or recorded as failed), verified at repetition 1.
bench_w_measure() {
	local wl=$1 t=$2 rep=$3 fn=$4 value unit why
	W_TGT=$t
	bench_measure "$wl" "$t" "$rep" "$fn" "$WMNT" "$t"
	if [[ -n $W_ERR ]]; then
		bench_w_fail "$wl" "$t" "$rep" "$W_ERR"
		return 1
	fi
	case $wl in
	seqwrite) value=$(awk -F';' 'NR == 1 { printf "%.1f", $48 / 1024 }' "$T/out"); unit=MiB/s ;;
	randwrite-4k) value=$(awk -F';' 'NR == 1 { print $49 }' "$T/out"); unit=IOPS ;;
	create-empty | create-4k) value=$(awk -v n="$W_FILES" -v s="$ELAPSED" 'BEGIN { printf "%.0f", n / s }'); unit=files/s ;;
	untar) value=$ELAPSED; unit=s ;;
	rm-tree) value=$(awk -v n="$ENTRIES" -v s="$ELAPSED" 'BEGIN { printf "%.0f", n / s }'); unit=entries/s ;;
	esac
	if ((rep == 1)); then
		why=$(bench_w_verify "$wl" "$WMNT")
		if [[ -n $why ]]; then
			bench_w_fail "$wl" "$t" "$rep" "wrong result: $why"
			return 1
		fi
	fi
	bench_record "$wl" "$t" "$rep" "$value" "$unit" "$CPU_S" "$RSS_KIB"
}

# One write workload run: fresh filesystem, setup, measure, tear down.
# untar is followed on the same mount by rm-tree when that is selected too
# (rm -rf of the tree just extracted, caches warm); rm-tree alone extracts
# the tree unmeasured first.
bench_run_write() {
	local wl=$1 t=$2 rep=$3 ok=1
	bench_w_up "$t"
	case $wl in
	randwrite-4k)
		wl_randwrite_setup "$WMNT" || ok=0
		bench_w_sync "$t" || ok=0 ;;
	create-empty) mkdir -- "$WMNT/create" || ok=0 ;;
	create-4k) mkdir -- "$WMNT/files" || ok=0 ;;
	untar | rm-tree) cat -- "$TARBALL" >/dev/null ;;
	esac
	if [[ $wl == rm-tree ]]; then
		wl_untar "$WMNT" "$t" >/dev/null 2>&1 || ok=0
	fi
	if ((!ok)); then
		bench_w_fail "$wl" "$t" "$rep" "setup failed"
	else
		sync
		case $wl in
		seqwrite) bench_w_measure "$wl" "$t" "$rep" wl_seqwrite ;;
		randwrite-4k) bench_w_measure "$wl" "$t" "$rep" wl_randwrite ;;
		create-empty) bench_w_measure "$wl" "$t" "$rep" wl_create ;;
		create-4k) bench_w_measure "$wl" "$t" "$rep" wl_files4k ;;
		untar)
			if bench_w_measure "$wl" "$t" "$rep" wl_untar && bench_wants rm-tree; then
				bench_w_measure rm-tree "$t" "$rep" wl_rmtree || true
			fi
			;;
		rm-tree) bench_w_measure "$wl" "$t" "$rep" wl_rmtree ;;
		esac || true
	fi
	bench_w_down "$t" "$wl" "$rep"
}

# ---------------------------------------------------------------------------
# Which targets a workload applies to (in the selected order).
bench_targets_for() {
	local wl=$1 t
	for t in "${TARGETS[@]}"; do
		# The in-memory ceiling has writes only.
		[[ $t == fuse-memfs ]] && ! bench_is_write_wl "$wl" && continue
		case $wl in
		memory) [[ $t == ubtrfs ]] || continue ;;
		get-cold) bench_is_ubtrfs "$t" || [[ $t == kernel-btrfs ]] || continue ;;
		mkfs | mkfs-rootdir | mount-large | mount-large-rw | snapshot-*)
			[[ $t == ubtrfs || $t == kernel-btrfs ]] || continue ;;
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
	mount-large | mount-large-rw) bench_run_mount_large "$wl" "$t" "$rep"; return ;;
	memory) bench_run_memory "$t" "$rep"; return ;;
	mkfs | mkfs-rootdir) bench_run_mkfs "$wl" "$t" "$rep"; return ;;
	snapshot-*) bench_run_snapshot "$wl" "$t" "$rep"; return ;;
	esac
	if bench_is_write_wl "$wl"; then
		bench_run_write "$wl" "$t" "$rep"
		return
	fi
	# get-cold and mount may have left kernel-btrfs down.
	[[ $t == kernel-btrfs ]] && bench_kernel_btrfs_up
	case $wl in
	seqread-*) fn=wl_seqread ;;
	randread-cold) fn=wl_randread_cold ;;
	randread-warm) fn=wl_randread_warm ;;
	find-*) fn=wl_find ;;
	ls-*) fn=wl_ls ;;
	tar-*) fn=wl_tar ;;
	git-status-*) fn=wl_git_status ;;
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
	if [[ $fn == wl_git_status && -s $T/out ]]; then
		head -n 5 "$T/out" >&2
		bench_fail "git status on $t reports changes: the walk would not be a stat walk"
	fi
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
		"$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')" "$m" -
	rm -rf -- "$dest"
}

# Mount time, cold: from the mount command's start until it returns with the
# mount ready (ubtrfs and the passthroughs daemonize once the mount exists).
bench_run_mount() {
	local t=$1 rep=$2 mnt=${MNT[$1]}
	case $t in
	ubtrfs | ubtrfs-kernelmkfs)
		bench_drop_caches
		bench_time "$UB" mount -o ro "${IMG[$t]}" "$mnt"
		oracle_register_mount "$mnt"
		;;
	fuse-passthrough | fuse-passthrough-ll)
		bench_kernel_ext4_up
		bench_drop_caches
		bench_passthrough_cmd "$t" "${MNT[kernel-ext4]}" "$mnt" ro
		bench_time "${PT_CMD[@]}"
		oracle_register_mount "$mnt"
		;;
	kernel-btrfs)
		bench_kernel_btrfs_down
		bench_timed_kmount btrfs "$IMG_BTRFS" "$mnt"
		;;
	kernel-ext4)
		bench_kernel_ext4_down
		bench_timed_kmount ext4 "$IMG_EXT4" "$mnt"
		;;
	esac
	oracle_is_mounted "$mnt" || bench_fail "$t: not mounted after the mount command"
	bench_record mount "$t" "$rep" "$(awk -v s="$ELAPSED" 'BEGIN { printf "%.1f", s * 1000 }')" \
		ms - - -
	if bench_is_fuse "$t"; then
		bench_fuse_down "$t"
	fi
}

# mount-large, mount-large-rw: the mount time of a large filesystem (the
# goal: under 100 ms for 100,000 files on 10 GiB, and independent of the
# size).  A 10 GiB mkfs.btrfs image, made once per run and populated by the
# kernel with LARGE_FILES files of 4 KiB in 100 directories, mounted
# read-only (mount-large) and read-write (mount-large-rw) by ubtrfs and by
# the kernel (a loop device set up unmeasured, as for `mount`), page cache
# dropped first.  Nothing is written through the mounts.
LARGE_IMG=
bench_large_image() {
	[[ -n $LARGE_IMG ]] && return 0
	LARGE_IMG=$(oracle_image large.img 10G)
	bench_log "mount-large: a 10 GiB mkfs.btrfs image with $LARGE_FILES files of 4 KiB (kernel)"
	oracle_mkfs -- "$LARGE_IMG"
	bench_kmount btrfs "$LARGE_IMG" "$T/pop-large" || bench_fail "kernel mount of $LARGE_IMG"
	python3 "$BENCH_DIR/lib/mkfiles.py" "$T/pop-large" "$LARGE_FILES" 100 4096 ||
		bench_fail "populating $LARGE_IMG"
	bench_kumount "$T/pop-large"
	printf 'mount_large=%s files of 4 KiB in 100 directories on a 10 GiB mkfs.btrfs image (%s MiB allocated)\n' \
		"$LARGE_FILES" "$(($(stat -c %b -- "$LARGE_IMG") * 512 / 1048576))" >>"$META"
	mkdir -p -- "$T/mnt-large"
}

bench_run_mount_large() {
	local wl=$1 t=$2 rep=$3 mnt=$T/mnt-large opt=ro dev pid i n
	[[ $wl == mount-large-rw ]] && opt=rw
	bench_large_image
	case $t in
	ubtrfs)
		bench_drop_caches
		bench_time "$UB" mount -o "$opt" "$LARGE_IMG" "$mnt"
		oracle_register_mount "$mnt"
		;;
	kernel-btrfs)
		if [[ $opt == ro ]]; then
			dev=$(losetup --find --show --read-only -- "$LARGE_IMG") || bench_fail "losetup"
		else
			dev=$(losetup --find --show -- "$LARGE_IMG") || bench_fail "losetup"
		fi
		bench_drop_caches
		bench_time mount -t btrfs -o "$opt" -- "$dev" "$mnt"
		oracle_register_mount "$mnt"
		losetup -d "$dev" 2>/dev/null || true
		;;
	*) bench_fail "$wl: no run for target $t" ;;
	esac
	oracle_is_mounted "$mnt" || bench_fail "$wl: $t: not mounted after the mount command"
	n=$(find "$mnt/d099" -maxdepth 1 -type f | wc -l)
	((n == LARGE_FILES / 100)) || bench_fail "$wl: $t shows $n files in d099, want $((LARGE_FILES / 100))"
	bench_record "$wl" "$t" "$rep" "$(awk -v s="$ELAPSED" 'BEGIN { printf "%.1f", s * 1000 }')" \
		ms - - -
	if [[ $t == ubtrfs ]]; then
		# The daemon (daemonized: not our child) lets go of the image
		# once unmounted; the next run must find it free.
		pid=$(pgrep -f -- "mount -o $opt $LARGE_IMG" | head -n1) || true
		bench_fusermount "$mnt"
		for ((i = 0; i < 300; i++)); do
			[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	else
		bench_kumount "$mnt"
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
			MiB - - -
		bench_drop_caches
		bench_anon_watch "${DPID[$t]}"
		bench_measure "memory-cache$c" "$t" "$rep" wl_tar "${MNT[$t]}"
		bench_anon_peak
		bench_record "memory-cache$c" "$t" "$rep" \
			"$(awk -v k="$RSS_KIB" 'BEGIN { printf "%.1f", k / 1024 }')" MiB "$CPU_S" "$RSS_KIB"
		bench_record "memory-anon-cache$c" "$t" "$rep" \
			"$(awk -v k="$ANON_KIB" 'BEGIN { printf "%.1f", k / 1024 }')" MiB - - -
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
# The snapshot workloads' filesystem: `mkfs.btrfs --rootdir` of the tree
# (the top level: the large subvolume) plus a subvolume `small` of ten
# small files made by the kernel; one copy for each target, so that each
# takes its snapshots of the same filesystem.
SNAP_IMG_U=
SNAP_IMG_K=
bench_snapshot_images() {
	[[ -n $SNAP_IMG_U ]] && return 0
	local img i
	img=$(oracle_image snap-k.img 4G)
	bench_log "snapshot: mkfs.btrfs --rootdir of the tree, and a subvolume of ten files"
	mkfs.btrfs -f -q --rootdir "$ROOTDIR" "$img" >>"$LOG" 2>&1 ||
		bench_fail "mkfs.btrfs --rootdir for the snapshot workloads"
	bench_kmount btrfs "$img" "$T/pop-snap" || bench_fail "kernel mount of $img"
	btrfs subvolume create "$T/pop-snap/small" >>"$LOG" 2>&1 || bench_fail "btrfs subvolume create"
	for ((i = 0; i < 10; i++)); do
		printf 'file %d\n' "$i" >"$T/pop-snap/small/f$i"
	done
	bench_kumount "$T/pop-snap"
	SNAP_IMG_K=$img
	SNAP_IMG_U=$T/snap-u.img
	cp --sparse=always -- "$SNAP_IMG_K" "$SNAP_IMG_U" || bench_fail "copying $img"
	mkdir -p -- "$T/mnt-snap"
}

# One snapshot: `ubtrfs subvolume snapshot IMG SRC /NAME` of the unmounted
# image against the kernel's `btrfs subvolume snapshot` on a mount of its
# copy (the mount and unmount outside the time; the kernel's snapshot
# commits before the command returns, as ubtrfs's does).  Caches warm.
bench_run_snapshot() {
	local wl=$1 t=$2 rep=$3 src=/ name n want u s m
	[[ $wl == snapshot-small ]] && src=/small
	name=s-$wl-$rep
	bench_snapshot_images
	if [[ $t == ubtrfs ]]; then
		sync
		bench_time /usr/bin/time -f '%U %S %M' -o "$T/time" "$UB" subvolume snapshot \
			"$SNAP_IMG_U" "$src" "/$name"
		read -r u s m <"$T/time"
		bench_kmount -r btrfs "$SNAP_IMG_U" "$T/mnt-snap" || bench_fail "$wl: the kernel does not mount ubtrfs's image"
	else
		bench_kmount btrfs "$SNAP_IMG_K" "$T/mnt-snap" || bench_fail "$wl: kernel mount of $SNAP_IMG_K"
		sync
		bench_time /usr/bin/time -f '%U %S %M' -o "$T/time" btrfs subvolume snapshot \
			"$T/mnt-snap$src" "$T/mnt-snap/$name"
		read -r u s m <"$T/time"
	fi
	# Outside the time: the snapshot holds what its source holds.
	if [[ $wl == snapshot-small ]]; then
		n=$(find "$T/mnt-snap/$name" -type f | wc -l)
		want=10
	else
		n=$(find "$T/mnt-snap/$name/tree" | wc -l)
		want=$ENTRIES
	fi
	bench_kumount "$T/mnt-snap"
	[[ $n == "$want" ]] || bench_fail "$wl on $t: the snapshot holds $n entries, expected $want"
	bench_record "$wl" "$t" "$rep" "$(awk -v s="$ELAPSED" 'BEGIN { printf "%.1f", s * 1000 }')" ms \
		"$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')" "$m" -
}

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
		bench_kmount -r btrfs "$img" "$T/mkfs-check" 2>>"$LOG" ||
			bench_fail "$wl on $t: the kernel does not mount the image"
		if [[ $wl == mkfs-rootdir ]]; then
			n=$(find "$T/mkfs-check/tree" | wc -l)
			bytes=$(bench_file_bytes "$T/mkfs-check/tree")
			bench_kumount "$T/mkfs-check"
			[[ $n == "$ENTRIES" && $bytes == "$TREE_FILE_BYTES" ]] ||
				bench_fail "$wl on $t: $n entries, $bytes file bytes; expected $ENTRIES, $TREE_FILE_BYTES"
		else
			bench_kumount "$T/mkfs-check"
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
		"$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')" "$m" -
	rm -f -- "$img"
}
