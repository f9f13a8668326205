#!/bin/bash
# t-xattr-scan: a read-only mount of a filesystem without extended
# attributes stops costing a getxattr request per file, and nothing else
# changes.
#
# `ls -l` asks getxattr("security.selinux") of every entry and FUSE does
# not cache the answer.  On a read-only mount the first getxattr starts a
# scan of every subvolume; when it finds no xattr item the daemon answers
# getxattr ENOSYS, and the kernel stops sending it (callers see
# EOPNOTSUPP).  Requests are counted in the daemon's debug log (-d).
#
# An image made by mkfs.btrfs and filled by the kernel: directories of
# files, a subvolume, a snapshot of it, a copy of id(1).  Cells:
#   none        no xattr anywhere: the first getxattr is answered as always
#               (ENODATA), the scan reports none, then getxattr gives
#               EOPNOTSUPP, `ls -lR` sends no GETXATTR and lists what the
#               kernel lists, listxattr still answers (empty), the ACL name
#               still answers ENODATA, and on this -o suid mount a copy of
#               id(1) still runs (exec reads security.capability; the
#               kernel takes EOPNOTSUPP as "no file capabilities").
#   snapshot    one xattr, on a file of the snapshot only (the snapshot's
#               own leaf): the scan finds it; getxattr keeps answering
#               ENODATA for missing names and the value for the one there,
#               and `ls -lR` keeps asking.
#   noscan      -o ro,noxattrscan on the first image: no scan, ENODATA and
#               a GETXATTR per entry throughout.
#   rw          -o rw never scans; an xattr set through it is read back by
#               the kernel, and btrfs check is clean.
#
# Needs root, btrfs-progs, FUSE, python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

img=$(oracle_image none.img 256M)
oracle_mkfs -- "$img"
oracle_kmount "$T/k" "$img" || oracle_fail "the kernel does not mount the new image"
"$ORACLE_PYTHON" - "$T/k" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(8):
    os.mkdir(os.path.join(root, "d%d" % d))
    for f in range(60):
        with open(os.path.join(root, "d%d" % d, "f%d" % f), "w") as fh:
            fh.write("%d/%d\n" % (d, f))
PY
cp /usr/bin/id "$T/k/id"
btrfs subvolume create "$T/k/sub" >/dev/null
for i in $(seq 0 199); do printf '%s\n' "$i" >"$T/k/sub/g$i"; done
btrfs subvolume snapshot "$T/k/sub" "$T/k/snap" >/dev/null
(cd "$T/k" && ls -lR --time-style=full-iso . | grep -v '^total ') >"$T/kernel-ls.txt"
oracle_kumount "$T/k"

one=$(oracle_image one.img 256M)
cp --sparse=always "$img" "$one"
oracle_kmount "$T/k" "$one" || oracle_fail "the kernel does not mount the copy"
setfattr -n user.only -v here "$T/k/snap/g199"
oracle_kumount "$T/k"

# xget PATH NAME: "ENODATA", "ENOTSUP" (EOPNOTSUPP on Linux), ... or
# "value HEX".
xget() {
	"$ORACLE_PYTHON" - "$1" "$2" <<'PY'
import errno, os, sys
try:
    print("value " + os.getxattr(sys.argv[1], sys.argv[2], follow_symlinks=False).hex())
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

# getxattrs LOG: GETXATTR requests the daemon has logged so far.
getxattrs() {
	grep -c 'opcode: GETXATTR' "$1" || true
}

# wait_scan LOG: the daemon's line about its scan (30 s at most).
wait_scan() {
	local i
	for ((i = 0; i < 300; i++)); do
		if grep -q 'xattr scan:' "$1"; then
			grep -m1 'xattr scan:' "$1"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# lsr MNT OUT: ls -lR as the kernel's listing was made.
lsr() {
	(cd "$1" && ls -lR --time-style=full-iso . | grep -v '^total ') >"$2"
}

# ls_asks CELL LOG: ls -lR of the mount into $T/CELL-ls.txt; prints the
# GETXATTR requests it sent (-1 if ls failed).
ls_asks() {
	local n0 n1
	n0=$(getxattrs "$2")
	lsr "$m" "$T/$1-ls.txt" || { echo -1; return; }
	n1=$(getxattrs "$2")
	echo $((n1 - n0))
}

entries=$(grep -c '^[-dl]' "$T/kernel-ls.txt")
oracle_log "$entries entries"

# ---- none
m=$T/m
log=$T/none.log
if ro_fuse_up "$m" "$log" ro,suid -d "$img"; then
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENODATA ]] || ro_fail "none: the first getxattr gave $r, not ENODATA"
	if line=$(wait_scan "$log"); then
		[[ $line == *"no extended attributes"* ]] || ro_fail "none: the scan says: $line"
	else
		ro_fail "none: no word of the scan within 30 s"
	fi
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENOTSUP ]] || ro_fail "none: getxattr after the scan gave $r, not EOPNOTSUPP (ENOTSUP)"
	asked=$(ls_asks none "$log")
	((asked == 0)) || ro_fail "none: ls -lR sent $asked GETXATTR requests after the scan (-1: failed)"
	r=$(xget "$m/snap/g3" security.selinux)
	[[ $r == ENOTSUP ]] || ro_fail "none: security.selinux in the snapshot gave $r, not EOPNOTSUPP"
	diff -u "$T/kernel-ls.txt" "$T/none-ls.txt" >"$T/none-ls.diff" ||
		{ ro_show "$T/none-ls.diff"; ro_fail "none: ls -lR differs from the kernel's"; }
	r=$("$ORACLE_PYTHON" -c 'import os, sys; print(os.listxattr(sys.argv[1]))' "$m/d1/f1")
	[[ $r == "[]" ]] || ro_fail "none: listxattr gave $r"
	r=$(xget "$m/d1/f1" system.posix_acl_access)
	[[ $r == ENODATA ]] || ro_fail "none: the access ACL name gave $r, not ENODATA"
	[[ $("$m/id" -u 2>&1) == 0 ]] || ro_fail "none: id(1) does not run from the mount"
	oracle_log "none: GETXATTR requests: $(getxattrs "$log") in all, none from ls -lR of $entries entries"
	ro_fuse_down none "$m" "$log"
else
	ro_show "$log"
	ro_fail "none: the mount did not come up"
fi

# ---- snapshot
log=$T/snapshot.log
if ro_fuse_up "$m" "$log" ro -d "$one"; then
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENODATA ]] || ro_fail "snapshot: the first getxattr gave $r, not ENODATA"
	if line=$(wait_scan "$log"); then
		[[ $line == *"extended attributes found"* ]] || ro_fail "snapshot: the scan says: $line"
	else
		ro_fail "snapshot: no word of the scan within 30 s"
	fi
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENODATA ]] || ro_fail "snapshot: getxattr after the scan gave $r, not ENODATA"
	r=$(xget "$m/snap/g199" user.only)
	[[ $r == "value 68657265" ]] || ro_fail "snapshot: user.only reads as '$r'"
	r=$(xget "$m/sub/g199" user.only)
	[[ $r == ENODATA ]] || ro_fail "snapshot: the subvolume's g199 gives $r for user.only"
	asked=$(ls_asks snapshot "$log")
	((asked >= entries)) ||
		ro_fail "snapshot: ls -lR of $entries entries sent $asked GETXATTR requests (-1: failed)"
	ro_fuse_down snapshot "$m" "$log"
else
	ro_show "$log"
	ro_fail "snapshot: the mount did not come up"
fi

# ---- noscan
log=$T/noscan.log
if ro_fuse_up "$m" "$log" ro,noxattrscan -d "$img"; then
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENODATA ]] || ro_fail "noscan: getxattr gave $r, not ENODATA"
	asked=$(ls_asks noscan "$log")
	((asked >= entries)) ||
		ro_fail "noscan: ls -lR of $entries entries sent $asked GETXATTR requests (-1: failed)"
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENODATA ]] || ro_fail "noscan: getxattr after ls -lR gave $r, not ENODATA"
	! grep -q 'xattr scan:' "$log" || ro_fail "noscan: the daemon scanned"
	ro_fuse_down noscan "$m" "$log"
else
	ro_show "$log"
	ro_fail "noscan: the mount did not come up"
fi

# ---- rw
rwimg=$(oracle_image rw.img 256M)
cp --sparse=always "$img" "$rwimg"
log=$T/rw.log
if ro_fuse_up "$m" "$log" rw -d "$rwimg"; then
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENODATA ]] || ro_fail "rw: getxattr gave $r, not ENODATA"
	lsr "$m" "$T/rw-ls.txt" || ro_fail "rw: ls -lR failed"
	sleep 0.5
	r=$(xget "$m/d0/f0" user.x)
	[[ $r == ENODATA ]] || ro_fail "rw: getxattr after ls -lR gave $r, not ENODATA"
	setfattr -n user.new -v later "$m/d2/f2" || ro_fail "rw: setfattr failed"
	r=$(xget "$m/d2/f2" user.new)
	[[ $r == "value 6c61746572" ]] || ro_fail "rw: user.new reads as '$r'"
	! grep -q 'xattr scan:' "$log" || ro_fail "rw: the daemon scanned"
	ro_fuse_down rw "$m" "$log"
	oracle_check_clean "rw" "$rwimg" || ro_fail "rw: btrfs check is not clean"
	if oracle_kmount -o ro "$T/k" "$rwimg"; then
		[[ $(getfattr --only-values -n user.new "$T/k/d2/f2" 2>/dev/null) == later ]] ||
			ro_fail "rw: the kernel does not read user.new back"
		oracle_kumount "$T/k"
	else
		ro_fail "rw: the kernel does not mount the image"
	fi
else
	ro_show "$log"
	ro_fail "rw: the mount did not come up"
fi

RO_CELLS=4
ro_finish
