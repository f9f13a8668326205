#!/bin/bash
# t-rw-features: unknown feature bits refuse a read-write FUSE mount
# (issue 5, acceptance "bad input").
#
# Images by `ubtrfs mkfs --rootdir` and by `mkfs.btrfs --rootdir` (a few
# files, a directory, a symlink) get one bit the writer does not know set
# in their superblocks, the crc32c recomputed (sb_patch below; it first
# checks the stored checksum with its own crc32c, so a wrong patcher cannot
# pass as a refusal):
#   incompat    bit 45 (unknown) in incompat_flags of every copy;
#   compat_ro   bit 40 (unknown) in compat_ro_flags of every copy;
#   *-primary   the same in the primary (64 KiB) only: the mirror at 64 MiB
#               keeps the old flags at the same generation and must not be
#               taken instead (the kernel mounts from the primary).
# Each: `ubtrfs mount -o rw` (daemon mode) and `ubtrfs mount -f -o rw`
# exit non-zero with a message naming the field and the bit (its value
# alone, not only the whole field's), nothing is mounted,
# and the image is byte-identical afterwards (a hash of its data).  incompat:
# `-o ro` and `ubtrfs ls` refuse too.  compat_ro: `-o ro` mounts and shows
# exactly the source tree and bytes, `-o remount,rw` is refused, the daemon
# exits 0, and the image is still unchanged.  The kernel agrees on a copy:
# it refuses the incompat image and a read-write mount of the compat_ro one,
# and mounts that read-only.
# Control (per mkfs): the same patcher changes only the label; then the rw
# mount comes up, a write lands (the image hash changes: the unchanged-hash
# check can fail), btrfs check is clean and the kernel reads the file and
# the label.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd timeout find sort cmp
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS
INCOMPAT_BIT=$((1 << 45))
COMPAT_RO_BIT=$((1 << 40))

# sb_patch IMG FIELD VALUE [primary]: in every superblock copy of IMG (or the
# primary only), OR VALUE into FIELD (incompat, compat_ro) or set the label
# to VALUE (label); recompute the crc32c over bytes 32..4095 into bytes 0..3.
# Offsets from src/lib/format/btrfs_format.h: compat_ro_flags 180,
# incompat_flags 188, csum_type 196, label 299 (256 bytes).
sb_patch() {
	PYTHONPATH=$UBTRFS_SOURCE_ROOT/tests/tools "$ORACLE_PYTHON" - "$@" <<'EOF'
import struct, sys
from crc32c import crc32c

img, field, value = sys.argv[1], sys.argv[2], sys.argv[3]
primary_only = len(sys.argv) > 4 and sys.argv[4] == "primary"
copies = (65536,) if primary_only else (65536, 64 << 20, 256 << 30)
done = 0
with open(img, "r+b") as f:
    for bytenr in copies:
        f.seek(bytenr)
        sb = bytearray(f.read(4096))
        if len(sb) < 4096 or sb[64:72] != b"_BHRfS_M":
            continue
        if struct.unpack_from("<Q", sb, 48)[0] != bytenr:
            sys.exit("copy at %d records bytenr %d" % (bytenr, struct.unpack_from("<Q", sb, 48)[0]))
        if struct.unpack_from("<H", sb, 196)[0] != 0:
            sys.exit("copy at %d: checksum type is not crc32c" % bytenr)
        if struct.unpack_from("<I", sb, 0)[0] != crc32c(sb[32:4096]):
            sys.exit("copy at %d: stored crc32c does not match ours" % bytenr)
        if field == "label":
            lab = value.encode()
            sb[299:299 + 256] = lab + bytes(256 - len(lab))
        else:
            off = {"compat_ro": 180, "incompat": 188}[field]
            old = struct.unpack_from("<Q", sb, off)[0]
            if old & int(value, 0):
                sys.exit("copy at %d: %s already has 0x%x" % (bytenr, field, int(value, 0)))
            struct.pack_into("<Q", sb, off, old | int(value, 0))
        struct.pack_into("<I", sb, 0, crc32c(sb[32:4096]))
        f.seek(bytenr)
        f.write(sb)
        done += 1
if done == 0 or (not primary_only and done < 2):
    sys.exit("%s: patched %d superblock copies" % (img, done))
EOF
}

# The source tree every image holds.
src=$T/src
mkdir -p "$src/dir/sub"
printf 'hello\n' >"$src/small"
"$ORACLE_PYTHON" -c 'import random, sys
sys.stdout.buffer.write(random.Random(45).randbytes(300000))' >"$src/dir/big"
printf 'inner\n' >"$src/dir/sub/f"
ln -s ../small "$src/dir/link"
(cd "$src" && find . | sort) >"$T/src.list"

# make_image NAME MKFS: a 512 MiB image holding $src, made by MKFS.
make_image() {
	local img
	img=$(oracle_image "$1.img" 512M)
	case $2 in
	ubtrfs) oracle_ubtrfs mkfs -q -f -r "$src" "$img" >&2 || return 1 ;;
	mkfs.btrfs)
		mkfs.btrfs -f -q --csum crc32c -r "$src" "$img" >"$T/mkfs.log" 2>&1 ||
			{ ro_show "$T/mkfs.log" >&2; return 1; }
		;;
	esac
	printf '%s\n' "$img"
}

# not_mounted DESC MNT: fail (and unmount) if MNT is mounted.
not_mounted() {
	if oracle_is_mounted "$2"; then
		ro_fail "$1: $2 is mounted"
		oracle_register_mount "$2"
		fusermount3 -u -- "$2" || true
	fi
}

# expect_refused DESC IMG MNT OPTS PATTERN...: `ubtrfs mount -o OPTS` (daemon
# mode) and `ubtrfs mount -f -o OPTS` must exit non-zero (not by a signal or
# timeout), mount nothing, and print every PATTERN (grep -E) on stderr.
expect_refused() {
	local desc=$1 img=$2 mnt=$3 opts=$4 rc p
	shift 4
	mkdir -p -- "$mnt"
	rc=0
	timeout 60 "$UBTRFS" mount -o "$opts" "$img" "$mnt" >"$mnt.d.out" 2>"$mnt.d.err" || rc=$?
	if ((rc == 0)); then
		ro_fail "$desc: ubtrfs mount -o $opts succeeded"
	elif ((rc >= 124)); then
		ro_fail "$desc: ubtrfs mount -o $opts exited $rc (crash, signal or timeout)"
	fi
	not_mounted "$desc (mount -o $opts)" "$mnt"
	for p in "$@"; do
		grep -qE -- "$p" "$mnt.d.err" ||
			{ ro_fail "$desc: mount -o $opts does not say /$p/"; ro_show "$mnt.d.err"; }
	done
	# Foreground: the process must end by itself, with a non-zero status.
	if ro_fuse_up "$mnt" "$mnt.f.log" "$opts" "$img"; then
		ro_fail "$desc: ubtrfs mount -f -o $opts came up"
		ro_fuse_down "$desc" "$mnt" "$mnt.f.log"
		return 0
	fi
	rc=0
	wait "$RO_FUSE_PID" || rc=$?
	((rc != 0 && rc < 124)) || ro_fail "$desc: ubtrfs mount -f -o $opts exited $rc"
	not_mounted "$desc (mount -f -o $opts)" "$mnt"
	for p in "$@"; do
		grep -qE -- "$p" "$mnt.f.log" ||
			{ ro_fail "$desc: mount -f -o $opts does not say /$p/"; ro_show "$mnt.f.log"; }
	done
}

# same_tree DESC DIR: DIR holds exactly the entries of $src, same bytes.
same_tree() {
	local desc=$1 dir=$2 f
	(cd "$dir" && find . | sort) >"$T/got.list" 2>"$T/got.err" ||
		ro_fail "$desc: find failed"
	cmp -s "$T/src.list" "$T/got.list" ||
		{ ro_fail "$desc: other entries than the source"; diff "$T/src.list" "$T/got.list" | head -n 20; }
	for f in small dir/big dir/sub/f; do
		cmp -s "$src/$f" "$dir/$f" || ro_fail "$desc: $f differs from the source"
	done
	[[ $(readlink "$dir/dir/link") == ../small ]] || ro_fail "$desc: dir/link is not ../small"
}

# kernel_view DESC IMG FIELD: the kernel's verdict on a copy of IMG.
kernel_view() {
	local desc=$1 img=$2 field=$3 copy=$T/kcopy.img
	cp --sparse=always -- "$img" "$copy"
	if [[ $field == incompat ]]; then
		if oracle_kmount -o ro "$T/k" "$copy" 2>"$T/k.err"; then
			ro_fail "$desc: the kernel mounts it (the patched bit is not an incompat bit?)"
			oracle_kumount "$T/k"
		fi
	else
		if oracle_kmount "$T/k" "$copy" 2>"$T/k.err"; then
			ro_fail "$desc: the kernel mounts it read-write (the patched bit is not compat_ro?)"
			oracle_kumount "$T/k"
		fi
		if oracle_kmount -o ro "$T/k" "$copy" 2>"$T/k.err"; then
			same_tree "$desc: kernel ro" "$T/k"
			oracle_kumount "$T/k"
		else
			ro_fail "$desc: the kernel does not mount it read-only"
			ro_show "$T/k.err"
		fi
	fi
	rm -f -- "$copy"
}

# bit_cell MKFS FIELD [primary]
bit_cell() {
	local mk=$1 field=$2 where=${3:-all} name img mnt h0 h1 bit hex hexpat rc
	name=$mk-$field-$where
	RO_CELLS=$((RO_CELLS + 1))
	if [[ $field == incompat ]]; then bit=$INCOMPAT_BIT; else bit=$COMPAT_RO_BIT; fi
	hex=$(printf '0x%x' "$bit")
	hexpat="$hex([^0-9a-fA-F]|\$)"	# the bit itself, not only the whole field
	img=$(make_image "$name" "$mk") || { ro_fail "$name: $mk failed"; return 0; }
	if [[ $where == primary ]]; then
		sb_patch "$img" "$field" "$bit" primary || { ro_fail "$name: sb_patch failed"; return 0; }
	else
		sb_patch "$img" "$field" "$bit" || { ro_fail "$name: sb_patch failed"; return 0; }
	fi
	h0=$(oracle_content_hash "$img")
	mnt=$T/$name.mnt

	if [[ $field == incompat ]]; then
		expect_refused "$name" "$img" "$mnt" rw "$hexpat" "incompat"
		expect_refused "$name" "$img" "$mnt" ro "$hexpat" "incompat"
		rc=0
		timeout 60 "$UBTRFS" ls "$img" / >"$T/ls.out" 2>"$T/ls.err" || rc=$?
		((rc != 0 && rc < 124)) || ro_fail "$name: ubtrfs ls exited $rc"
		grep -qE -- "$hexpat" "$T/ls.err" ||
			{ ro_fail "$name: ubtrfs ls does not name the bit"; ro_show "$T/ls.err"; }
	else
		expect_refused "$name" "$img" "$mnt" rw "$hexpat" "compat_ro" "cannot be written"
		if ro_fuse_up "$mnt" "$mnt.ro.log" ro "$img"; then
			same_tree "$name: ro FUSE mount" "$mnt"
			rc=0
			timeout 60 "$UBTRFS" mount -o remount,rw "$mnt" >"$T/rem.out" 2>"$T/rem.err" || rc=$?
			((rc != 0 && rc < 124)) || ro_fail "$name: remount,rw of the ro mount exited $rc"
			(: >"$mnt/new") 2>/dev/null && ro_fail "$name: created a file on the ro mount"
			ro_fuse_down "$name ro" "$mnt" "$mnt.ro.log"
		else
			ro_fail "$name: ubtrfs mount -o ro did not come up"
			ro_show "$mnt.ro.log"
		fi
		rc=0
		timeout 60 "$UBTRFS" ls -R "$img" >"$T/ls.out" 2>"$T/ls.err" || rc=$?
		((rc == 0)) || { ro_fail "$name: ubtrfs ls -R exited $rc"; ro_show "$T/ls.err"; }
		grep -q 'big' "$T/ls.out" || ro_fail "$name: ubtrfs ls -R does not list dir/big"
	fi
	h1=$(oracle_content_hash "$img")
	[[ $h0 == "$h1" ]] || ro_fail "$name: the image changed"
	kernel_view "$name" "$img" "$field"
	rm -f -- "$img"
	oracle_log "$name: done ($((SECONDS - T0)) s)"
}

# control_cell MKFS: the patcher alone (label) leaves a writable filesystem.
control_cell() {
	local mk=$1 name=$1-control img mnt h0 h1 label
	RO_CELLS=$((RO_CELLS + 1))
	img=$(make_image "$name" "$mk") || { ro_fail "$name: $mk failed"; return 0; }
	sb_patch "$img" label rwfeat-ctl || { ro_fail "$name: sb_patch failed"; return 0; }
	h0=$(oracle_content_hash "$img")
	mnt=$T/$name.mnt
	if ro_fuse_up "$mnt" "$mnt.log" rw "$img"; then
		printf 'written\n' >"$mnt/written" || ro_fail "$name: write through the rw mount failed"
		ro_fuse_down "$name rw" "$mnt" "$mnt.log"
	else
		ro_fail "$name: the rw mount of the label-patched image did not come up"
		ro_show "$mnt.log"
		return 0
	fi
	h1=$(oracle_content_hash "$img")
	[[ $h0 != "$h1" ]] || ro_fail "$name: the rw mount wrote nothing (the hash check cannot see writes)"
	oracle_check_clean "$name" "$img" || ro_fail "$name: btrfs check is not clean"
	if oracle_kmount -o ro "$T/k" "$img"; then
		[[ $(cat "$T/k/written" 2>/dev/null) == written ]] || ro_fail "$name: the kernel lacks the written file"
		label=$(btrfs filesystem label "$T/k" 2>/dev/null) || label=
		[[ $label == rwfeat-ctl ]] || ro_fail "$name: the kernel sees label '$label'"
		oracle_kumount "$T/k"
	else
		ro_fail "$name: the kernel does not mount the control image"
	fi
	rm -f -- "$img"
	oracle_log "$name: done ($((SECONDS - T0)) s)"
}

for mk in ubtrfs mkfs.btrfs; do
	control_cell "$mk"
	for field in incompat compat_ro; do
		bit_cell "$mk" "$field"
		bit_cell "$mk" "$field" primary
	done
done
ro_finish
