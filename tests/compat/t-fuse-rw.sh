#!/bin/bash
# t-fuse-rw: the EXPERIMENTAL read-write FUSE mount (`ubtrfs mount -o rw`).
#
# Cells: an image made by mkfs.btrfs (defaults) and one made by `ubtrfs
# mkfs` (defaults).  Each cell:
#   (a) mount it rw through FUSE (the daemon registered with the harness);
#   (b) run one shell workload in the FUSE mount and in a reference directory
#       on tmpfs: mkdir -p trees, files of several sizes (inline, one sector,
#       multi-extent), partial overwrites (dd conv=notrunc), appends,
#       truncates down and up, chmod, touch -d, hard links, symlinks, mv
#       within and across directories (also replacing a file), rm, rmdir,
#       setfattr / setfattr -x, a fifo, a sync (fsync -> commit) in the
#       middle, and last every entry's times set to a fixed value;
#   (c) while mounted: the manifests (without atime, ctime, directory sizes
#       and directory link counts, which tmpfs counts differently) are equal;
#   (d) fusermount3 -u: the daemon commits at unmount and exits 0;
#   (e) btrfs check --readonly --check-data-csum is clean;
#   (f) kernel mount: its manifest equals the reference (as in c) and equals
#       the FUSE mount's full manifest (ctime, directory sizes and link
#       counts included: what the daemon showed is what it wrote);
#   (g) afterwards the read-only FUSE mount shows the kernel's manifest and
#       `ubtrfs ls -R` lists every entry.
#
# Cell w3 runs the harness workload (tests/tools/workload.py) through the rw
# mount and through the kernel and compares them (see harness_cell).
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE, attr and python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd setfattr mkfifo dd
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS

# Source data, the same bytes for both trees.
head -c $((3 * 1024 * 1024 + 12345)) /dev/urandom >"$T/src.big"
head -c 70000 /dev/urandom >"$T/src.mid"

# The workload, run with the tree as the current directory.
workload() {
	set -e
	mkdir -p a/b/c/d e/f g
	printf 'hello\n' >a/small
	head -c 4096 "$T/src.mid" >a/b/sector
	cp "$T/src.mid" a/b/c/mid
	cp "$T/src.big" e/big
	dd if=/dev/zero of=e/big bs=1k seek=100 count=7 conv=notrunc status=none
	dd if="$T/src.mid" of=e/big bs=4096 seek=300 count=3 conv=notrunc status=none
	dd if="$T/src.mid" of=a/b/c/mid bs=1 seek=5 count=10 conv=notrunc status=none
	printf 'more\n' >>a/small
	head -c 9000 "$T/src.mid" >>a/b/sector
	cp "$T/src.mid" e/f/trunc
	truncate -s 12345 e/f/trunc
	truncate -s 200000 e/f/trunc
	truncate -s 0 a/b/sector
	printf 'again\n' >a/b/sector
	chmod 0600 a/small
	chmod 2750 g
	chmod 0444 e/big
	touch -d '2001-02-03 04:05:06.789' a/b/c/mid
	ln a/b/c/mid g/mid.link
	ln a/small a/small.2
	ln -s ../a/b/c/mid g/sym
	ln -s "$(printf 'x%.0s' {1..300})" g/longsym
	sync
	mv a/small.2 e/f/moved
	mv a/b/c/d g/d-moved
	cp "$T/src.mid" g/victim
	cp "$T/src.big" g/replacer
	mv g/replacer g/victim
	mv e/f/trunc e/f/trunc2
	cp "$T/src.mid" a/gone
	rm a/gone
	mkdir -p h/i/j
	rmdir h/i/j h/i
	setfattr -n user.one -v value1 a/small
	setfattr -n user.two -v 0x00ff00 a/small
	setfattr -n user.dir -v d g
	setfattr -x user.two a/small
	setfattr -n user.one -v replaced a/small
	mkfifo g/fifo
	: >empty
	# times last: everything gets the same fixed mtime in both trees
	find . -mindepth 1 -exec touch -h -d '2020-05-06 07:08:09.5' {} +
	touch -d '2020-05-06 07:08:09.5' .
}

# Manifest without the fields tmpfs and btrfs cannot share.
ref_view() {
	sed -E -e '/^[^ ]+ d /s/ nlink=[0-9]+//' "$1"
}

# dotdot_check NAME MNT: the kernel may cache readdir results of the rw mount
# (the daemon answers OPENDIR with ENOSYS), so ".." of a directory listed
# and then moved to another parent (rename, RENAME_EXCHANGE) must still be
# its new parent's inode number in getdents64 (the 6.18 kernel lists a moved
# directory afresh; the daemon also drops its cache: op_rename).
dotdot_check() {
	local name=$1 mnt=$2
	"$ORACLE_PYTHON" - "$mnt/dd" <<'EOF2' >"$T/$name.dotdot" 2>&1 ||
import ctypes, os, struct, sys
top = sys.argv[1]
os.makedirs(top + "/a/x"); os.makedirs(top + "/b"); os.makedirs(top + "/c/y")
libc = ctypes.CDLL(None, use_errno=True)
NR_GETDENTS64 = {"x86_64": 217, "aarch64": 61}[os.uname().machine]
def dotdot(d):
    # d_ino of ".." as getdents64 returns it (ls and stat look it up).
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        buf = ctypes.create_string_buffer(65536)
        n = libc.syscall(NR_GETDENTS64, fd, buf, len(buf))
        if n < 0:
            sys.exit("getdents64: %s" % os.strerror(ctypes.get_errno()))
        raw, off = buf.raw[:n], 0
        while off < n:
            ino, _, reclen = struct.unpack_from("<QqH", raw, off)
            name = raw[off + 19:off + reclen].split(b"\0", 1)[0]
            if name == b"..":
                return ino
            off += reclen
    finally:
        os.close(fd)
    sys.exit("%s: no '..' entry" % d)
def want(d, parent):
    got, ino = dotdot(d), os.stat(parent).st_ino
    if got != ino:
        sys.exit("%s: '..' is inode %d, its parent %s is %d" % (d, got, parent, ino))
want(top + "/a/x", top + "/a"); want(top + "/c/y", top + "/c")   # cached now
os.rename(top + "/a/x", top + "/b/x")
want(top + "/b/x", top + "/b")
if libc.renameat2(-100, (top + "/b/x").encode(), -100, (top + "/c/y").encode(), 2) != 0:
    sys.exit("renameat2(RENAME_EXCHANGE): %s" % os.strerror(ctypes.get_errno()))
want(top + "/b/x", top + "/b"); want(top + "/c/y", top + "/c")
print("ok")
EOF2
		{ ro_fail "$name: '..' in a cached listing after a directory moved"; ro_show "$T/$name.dotdot"; }
}

# Cell dd: dotdot_check on a fresh image, then btrfs check.
dotdot_cell() {
	local img mnt=$T/dd.mnt
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image dd.img 256M)
	oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "dd: ubtrfs mkfs failed"
	ro_fuse_up "$mnt" "$T/dd.log" rw "$img" ||
		{ ro_show "$T/dd.log"; ro_fail "dd: ubtrfs mount -o rw did not come up"; return 0; }
	dotdot_check dd "$mnt"
	ro_fuse_down dd "$mnt" "$T/dd.log"
	oracle_check_clean dd "$img" || ro_fail "dd: btrfs check is not clean"
}

rw_cell() {
	local name=$1 tool=$2 img mnt log ref
	local pid_rw rc=0
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image "$name.img" 1G)
	if [[ $tool == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "$name: ubtrfs mkfs failed"
	else
		oracle_mkfs -- "$img"
	fi

	ref=$T/$name.ref
	oracle_tmpfs "$ref" 256M
	# tmpfs numbers its first inode 2, which manifest.py takes for a btrfs
	# subvolume placeholder (times "*"): use that number up first.
	: >"$ref/.pad"
	rm -f -- "$ref/.pad"
	# In the background and waited for: `set -e` inside the workload is
	# ignored in a `cmd || ...` context, but not in `cmd &`.
	(cd "$ref" && workload) >"$T/$name.ref.log" 2>&1 &
	wait $! ||
		{ ro_show "$T/$name.ref.log"; oracle_fail "$name: workload on tmpfs failed"; }
	oracle_manifest "$ref" --no-atime --no-ctime --no-dir-size -o "$T/$name.ref.m" ||
		oracle_fail "$name: manifest of the reference failed"
	ref_view "$T/$name.ref.m" >"$T/$name.ref.v"

	mnt=$T/$name.rw
	log=$T/$name.rw.log
	if ! ro_fuse_up "$mnt" "$log" rw "$img"; then
		ro_fail "$name: ubtrfs mount -o rw did not come up"
		ro_show "$log"
		return 0
	fi
	pid_rw=$RO_FUSE_PID
	grep -qE "^[^ ]+ $mnt fuse.ubtrfs rw[ ,]" /proc/mounts ||
		ro_fail "$name: the FUSE mount is not rw in /proc/mounts"
	(cd "$mnt" && workload) >"$T/$name.rw.wl.log" 2>&1 &
	if ! wait $!; then
		ro_fail "$name: the workload failed on the rw FUSE mount"
		ro_show "$T/$name.rw.wl.log" 30
	fi
	oracle_manifest "$mnt" --no-atime --no-ctime --no-dir-size -o "$T/$name.rw.m" ||
		ro_fail "$name: manifest of the rw FUSE mount failed"
	oracle_manifest "$mnt" --no-atime -o "$T/$name.rw.full.m" ||
		ro_fail "$name: full manifest of the rw FUSE mount failed"
	ref_view "$T/$name.rw.m" >"$T/$name.rw.v"
	if ! oracle_manifest_diff "$T/$name.ref.v" "$T/$name.rw.v" >"$T/$name.rw.diff"; then
		ro_fail "$name: the rw FUSE mount differs from the tmpfs reference (- tmpfs, + ubtrfs)"
		ro_show "$T/$name.rw.diff" 30
	fi
	RO_FUSE_PID=$pid_rw
	ro_fuse_down "$name rw" "$mnt" "$log"
	oracle_kumount "$ref"
	rmdir -- "$ref"

	local ck
	ck=$(btrfs check --readonly --check-data-csum "$img" 2>&1) || rc=$?
	if ((rc)); then
		ro_fail "$name: btrfs check after the rw session exited $rc"
		printf '%s\n' "$ck" | ro_show /dev/stdin 30
	fi

	oracle_kmount -o ro "$T/$name.k" "$img" ||
		{ ro_fail "$name: the kernel does not mount the written image"; return 0; }
	oracle_manifest "$T/$name.k" --no-atime --no-ctime --no-dir-size -o "$T/$name.k.m" ||
		ro_fail "$name: manifest of the kernel mount failed"
	oracle_manifest "$T/$name.k" --no-atime -o "$T/$name.k.full.m" ||
		ro_fail "$name: full manifest of the kernel mount failed"
	oracle_kumount "$T/$name.k"
	rmdir -- "$T/$name.k"
	ref_view "$T/$name.k.m" >"$T/$name.k.v"
	if ! oracle_manifest_diff "$T/$name.ref.v" "$T/$name.k.v" >"$T/$name.k.diff"; then
		ro_fail "$name: the kernel's view differs from the tmpfs reference (- tmpfs, + kernel)"
		ro_show "$T/$name.k.diff" 30
	fi
	if ! oracle_manifest_diff "$T/$name.rw.full.m" "$T/$name.k.full.m" >"$T/$name.kf.diff"; then
		ro_fail "$name: the kernel shows other than the rw FUSE mount showed (- FUSE, + kernel)"
		ro_show "$T/$name.kf.diff" 30
	fi

	# The read-only paths still work on the written image.
	mnt=$T/$name.ro
	log=$T/$name.ro.log
	if ro_fuse_up "$mnt" "$log" ro "$img"; then
		oracle_manifest "$mnt" --no-atime -o "$T/$name.ro.m" ||
			ro_fail "$name: manifest of the ro FUSE mount failed"
		oracle_manifest_diff "$T/$name.k.full.m" "$T/$name.ro.m" >"$T/$name.ro.diff" || {
			ro_fail "$name: the ro FUSE mount differs from the kernel (- kernel, + FUSE)"
			ro_show "$T/$name.ro.diff" 30
		}
		ro_fuse_down "$name ro" "$mnt" "$log"
	else
		ro_fail "$name: ubtrfs mount -o ro of the written image did not come up"
		ro_show "$log"
	fi
	local n want
	if ! oracle_ubtrfs ls -R "$img" / >"$T/$name.ls" 2>"$T/$name.ls.err" || [[ -s $T/$name.ls.err ]]; then
		ro_fail "$name: ubtrfs ls -R of the written image failed"
		ro_show "$T/$name.ls.err"
	fi
	n=$(grep -c . "$T/$name.ls" || true)
	want=$(($(wc -l <"$T/$name.k.full.m") - 1))
	((n >= want)) || ro_fail "$name: ubtrfs ls -R lists $n lines, the kernel shows $want entries"
	oracle_log "$name: done ($tool; $(wc -l <"$T/$name.k.full.m") entries)"
}

# The harness workload (tests/tools/workload.py: every object kind, sparse
# and preallocated files, punched holes, ACLs, devices, odd names, big
# directories, renames, times) through the rw FUSE mount and through the
# kernel, each on a fresh mkfs.btrfs image: the manifests (inode numbers,
# directory sizes and link counts included; atime and ctime not) must be
# equal, the FUSE-written image clean in btrfs check and read back equal by
# the kernel.
harness_cell() {
	local name=w3 img kimg mnt log rc=0
	RO_CELLS=$((RO_CELLS + 1))
	kimg=$(oracle_image "$name.kernel.img" 1G)
	oracle_mkfs -- "$kimg"
	oracle_kmount "$T/$name.kw" "$kimg" || oracle_fail "$name: kernel mount failed"
	oracle_workload "$T/$name.kw" --seed "$RO_SEED" >"$T/$name.kwl.log" 2>&1 ||
		{ ro_show "$T/$name.kwl.log"; oracle_fail "$name: the workload failed on kernel btrfs"; }
	oracle_manifest "$T/$name.kw" --no-atime --no-ctime -o "$T/$name.kernel.m" ||
		oracle_fail "$name: manifest of the kernel's tree failed"
	oracle_kumount "$T/$name.kw"

	img=$(oracle_image "$name.img" 1G)
	oracle_mkfs -- "$img"
	mnt=$T/$name.rw
	log=$T/$name.rw.log
	ro_fuse_up "$mnt" "$log" rw "$img" ||
		{ ro_show "$log"; ro_fail "$name: ubtrfs mount -o rw did not come up"; return 0; }
	oracle_workload "$mnt" --seed "$RO_SEED" >"$T/$name.wl.log" 2>&1 ||
		{ ro_fail "$name: the workload failed on the rw FUSE mount"; ro_show "$T/$name.wl.log"; }
	oracle_manifest "$mnt" --no-atime --no-ctime -o "$T/$name.fuse.m" ||
		ro_fail "$name: manifest of the rw FUSE mount failed"
	ro_fuse_down "$name rw" "$mnt" "$log"
	oracle_manifest_diff "$T/$name.kernel.m" "$T/$name.fuse.m" >"$T/$name.diff" ||
		{ ro_fail "$name: the FUSE mount differs from kernel btrfs (- kernel, + ubtrfs)"; ro_show "$T/$name.diff" 30; }
	oracle_check_clean "$name" "$img" || ro_fail "$name: btrfs check is not clean"
	oracle_kmount -o ro "$T/$name.k" "$img" || { ro_fail "$name: the kernel does not mount it"; return 0; }
	oracle_manifest "$T/$name.k" --no-atime --no-ctime -o "$T/$name.k.m" ||
		ro_fail "$name: manifest of the kernel mount failed"
	oracle_kumount "$T/$name.k"
	oracle_manifest_diff "$T/$name.fuse.m" "$T/$name.k.m" >"$T/$name.kdiff" ||
		{ ro_fail "$name: the kernel reads other than the FUSE mount showed (- FUSE, + kernel)"; ro_show "$T/$name.kdiff" 30; }
	oracle_log "$name: done (harness workload, $(wc -l <"$T/$name.k.m") entries)"
}

rw_cell w1 mkfs.btrfs
rw_cell w2 ubtrfs
harness_cell
dotdot_cell

oracle_log "total $((SECONDS - T0)) s"
ro_finish
