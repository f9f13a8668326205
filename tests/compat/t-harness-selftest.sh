#!/bin/bash
# t-harness-selftest.sh - proves the oracle harness before any test relies on it.
#
#  1. skip/fail conventions of lib.sh (SKIP exit 77; FAIL exit 1 under
#     UBTRFS_REQUIRE_ORACLE=1);
#  2. cleanup: child tests that fail under set -e, die of SIGTERM, or leave a
#     busy mount behind end with no mount, loop device, process or temp dir
#     of theirs left;
#  3. a kernel btrfs filesystem filled by workload.py --btrfs, remounted
#     read-only, gives two identical manifests; one byte changed in one file
#     (size and times restored) changes exactly that file's line, in sha256
#     and ctime only;
#  4. workload.py is deterministic: the same seed on a second fresh btrfs and
#     on two tmpfs gives the same manifest (without ctime); another seed not;
#  5. oracle_kmount of a two-device raid1 set made from image files;
#  6. oracle_unpack of a .raw.xz image and of btrfs-image dumps;
#  7. btrfs check --readonly is clean on every image the kernel wrote.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
. "$here/lib.sh"

SEED=${ORACLE_SEED:-20240917}
LIB=$here/lib.sh

# ORACLE_SELFTEST_BREAK=N fails on purpose after step N (3..7), with mounts and
# loop devices in place, to show the trap cleans up after a real failure.
step_done() {
	if [[ ${ORACLE_SELFTEST_BREAK:-} == "$1" ]]; then
		oracle_fail "deliberate failure after step $1 (ORACLE_SELFTEST_BREAK)"
	fi
}

# --- 1. conventions (need nothing) ------------------------------------------
conv() {	# expected-rc expected-stdout env... -- bash code
	local want_rc=$1 want_out=$2 rc=0 out
	shift 2
	local -a envs=()
	while [[ $1 != -- ]]; do envs+=("$1"); shift; done
	shift
	out=$(env -u UBTRFS_REQUIRE_ORACLE "${envs[@]}" bash -c ". '$LIB'; $1" 2>/dev/null) || rc=$?
	[[ $rc == "$want_rc" && $out == "$want_out" ]] ||
		oracle_fail "convention: '$1' ${envs[*]} gave rc=$rc out='$out', want rc=$want_rc out='$want_out'"
}
conv 77 "SKIP: no widget" -- 'oracle_skip "no widget"; echo after'
conv 1 "FAIL: no widget (UBTRFS_REQUIRE_ORACLE=1)" UBTRFS_REQUIRE_ORACLE=1 -- 'oracle_skip "no widget"'
conv 77 "SKIP: needs no-such-cmd-ubtrfs" -- 'oracle_require_cmd sh no-such-cmd-ubtrfs'
conv 1 "FAIL: needs no-such-cmd-ubtrfs (UBTRFS_REQUIRE_ORACLE=1)" UBTRFS_REQUIRE_ORACLE=1 -- 'oracle_require_cmd no-such-cmd-ubtrfs'
conv 1 "FAIL: broken" -- 'oracle_fail broken; echo after'
conv 0 "" -- 'oracle_require_cmd sh'

oracle_require_kernel_btrfs
oracle_require_python
oracle_require_cmd xz btrfs-image od truncate realpath
oracle_init
oracle_log "workdir $ORACLE_TMP, seed $SEED"
start=$SECONDS

# --- 2. cleanup under failure ------------------------------------------------
kids=$ORACLE_TMP/kids
mkdir "$kids"

# Child test body: sets up two kernel mounts (one stacked in the other), a
# spare loop device and registered processes (one keeping the mount busy),
# records what it made in $REPORT, then does what $MODE says.
cat >"$kids/child.sh" <<'EOF'
set -euo pipefail
. "$LIB"
oracle_init
echo "tmp $ORACLE_TMP" >>"$REPORT"
img=$(oracle_image a.img 300M)
spare=$(oracle_image spare.img 1M)
oracle_mkfs -- "$img"
oracle_kmount "$ORACLE_TMP/mnt" "$img"
oracle_tmpfs "$ORACLE_TMP/mnt/tmpfs" 16M
dev=$(oracle_loop "$spare")
echo "loop $dev" >>"$REPORT"
sleep 1000 &
oracle_register_pid $!
echo "pid $!" >>"$REPORT"
(cd "$ORACLE_TMP/mnt" && exec sleep 1000) &
oracle_register_pid $!
echo "pid $!" >>"$REPORT"
oracle_defer touch "$REPORT.deferred"
case $MODE in
fail)	false ;;
term)	echo ready >>"$REPORT"; sleep 1000 & oracle_register_pid $!; wait $! ;;
busy)	# an unregistered process keeps the fs busy: lazy unmount, leak report
	(cd "$ORACLE_TMP/mnt" && exec sleep 60) &
	echo "holder $!" >>"$REPORT" ;;
esac
echo "end of child" >>"$REPORT"
EOF

# Nothing of the child may be left: no mount or loop under its temp dir, no
# process of its, no temp dir.
check_child_clean() {
	local report=$1 what tmp='' key val
	while read -r key val; do
		case $key in
		tmp) tmp=$val ;;
		pid) [[ -e /proc/$val && $(awk '{print $3}' "/proc/$val/stat" 2>/dev/null) != Z ]] &&
			oracle_fail "cleanup($2): process $val survived" ;;
		loop) what=$(_oracle_loop_backfile "$val")
			[[ $what == "$tmp"/* ]] && oracle_fail "cleanup($2): $val still attached" ;;
		esac
	done <"$report"
	[[ -n $tmp ]] || oracle_fail "cleanup($2): child made no temp dir"
	[[ -z $(_oracle_mounts_under "$tmp") ]] || oracle_fail "cleanup($2): mounts left under $tmp"
	[[ -z $(_oracle_loops_under "$tmp") ]] || oracle_fail "cleanup($2): loops left for $tmp"
	[[ ! -e $tmp ]] || oracle_fail "cleanup($2): $tmp not removed"
	[[ -e $report.deferred ]] || oracle_fail "cleanup($2): deferred command not run"
}

run_child() {	# mode -> sets child_rc
	local mode=$1
	child_report=$kids/$mode.report
	child_rc=0
	LIB=$LIB MODE=$mode REPORT=$child_report TMPDIR=$kids \
		bash "$kids/child.sh" >"$kids/$mode.out" 2>&1 || child_rc=$?
}

run_child fail
[[ $child_rc == 1 ]] || { cat "$kids/fail.out"; oracle_fail "child failing under set -e exited $child_rc"; }
grep -q '^end of child' "$kids/fail.report" && oracle_fail "set -e did not stop the child"
check_child_clean "$kids/fail.report" fail

child_report=$kids/term.report
LIB=$LIB MODE=term REPORT=$child_report TMPDIR=$kids bash "$kids/child.sh" >"$kids/term.out" 2>&1 &
child=$!
oracle_register_pid "$child"
for ((i = 0; i < 100; i++)); do
	grep -q '^ready' "$child_report" 2>/dev/null && break
	sleep 0.1
done
grep -q '^ready' "$child_report" || { cat "$kids/term.out"; oracle_fail "TERM child never got ready"; }
kill -TERM "$child"
child_rc=0
wait "$child" || child_rc=$?
[[ $child_rc == 143 ]] || { cat "$kids/term.out"; oracle_fail "TERM'ed child exited $child_rc, want 143"; }
check_child_clean "$child_report" term

run_child busy
holder=$(awk '$1 == "holder" { print $2 }' "$kids/busy.report")
[[ $child_rc == 1 ]] || { cat "$kids/busy.out"; oracle_fail "busy child exited $child_rc, want 1 (leak reported)"; }
grep -q 'lazy unmount' "$kids/busy.out" || oracle_fail "busy child did not fall back to lazy unmount"
grep -q '^FAIL: cleanup left something behind' "$kids/busy.out" ||
	oracle_fail "busy child did not report its leak"
# Once the holder is gone the kernel finishes the unmount and autoclears the
# loop device that losetup -d could not detach.
kill -TERM "$holder" 2>/dev/null || true
for ((i = 0; i < 50; i++)); do
	[[ -z $(_oracle_loops_under "$(awk '$1 == "tmp" { print $2 }' "$kids/busy.report")") ]] && break
	sleep 0.1
done
check_child_clean "$kids/busy.report" busy
oracle_log "cleanup checks passed ($((SECONDS - start))s)"

# --- 3. manifests of a kernel btrfs are stable and sensitive -----------------
img_a=$(oracle_image a.img 2G)
oracle_mkfs -- "$img_a"
mnt_a=$ORACLE_TMP/a
oracle_kmount "$mnt_a" "$img_a"
t0=$SECONDS
oracle_workload "$mnt_a" --seed "$SEED" --btrfs --profile small
oracle_log "workload took $((SECONDS - t0))s"
oracle_kremount "$mnt_a" ro
oracle_manifest "$mnt_a" -o "$ORACLE_TMP/a.1"
oracle_manifest "$mnt_a" -o "$ORACLE_TMP/a.2"
oracle_manifest "$mnt_a" --no-ctime -o "$ORACLE_TMP/a.noctime"
oracle_manifest_diff "$ORACLE_TMP/a.1" "$ORACLE_TMP/a.2" ||
	oracle_fail "two manifests of a read-only mount differ"
nlines=$(wc -l <"$ORACLE_TMP/a.1")
((nlines > 500)) || oracle_fail "manifest has only $nlines lines"
for kind in f d l p s c b; do
	grep -q "^[^ ]* $kind " "$ORACLE_TMP/a.1" || oracle_fail "manifest has no entry of type $kind"
done
for needle in ' hl=' 'xattr:user.' 'xattr:trusted.' 'xattr:system.posix_acl_access=' \
	'xattr:btrfs.compression=' 'mtime=-' ' uid=123456 ' 'mode=4755' 'atime=\*'; do
	grep -q -- "$needle" "$ORACLE_TMP/a.1" || oracle_fail "manifest lacks '$needle'"
done

victim=files/size-65537
grep -q "^$victim f .* nlink=1 " "$ORACLE_TMP/a.1" || oracle_fail "no single-link $victim in the manifest"
oracle_kremount "$mnt_a" rw
"$ORACLE_PYTHON" - "$mnt_a/$victim" <<'EOF'
import os, sys
path = sys.argv[1]
st = os.lstat(path)
fd = os.open(path, os.O_RDWR)
off = st.st_size // 2
old = os.pread(fd, 1, off)
os.pwrite(fd, bytes([old[0] ^ 0x5A]), off)
os.fsync(fd)
os.close(fd)
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
now = os.lstat(path)
assert (now.st_size, now.st_atime_ns, now.st_mtime_ns) == \
    (st.st_size, st.st_atime_ns, st.st_mtime_ns), "size or times changed"
EOF
oracle_kremount "$mnt_a" ro
oracle_manifest "$mnt_a" -o "$ORACLE_TMP/a.3"
changed=$("$ORACLE_PYTHON" "$ORACLE_TOOLS/manifest.py" --diff "$ORACLE_TMP/a.1" "$ORACLE_TMP/a.3" --paths || true)
[[ $changed == "$victim" ]] || oracle_fail "after a one-byte change, differing paths are '$changed', want '$victim'"
fields=$("$ORACLE_PYTHON" - "$ORACLE_TMP/a.1" "$ORACLE_TMP/a.3" "$victim" <<'EOF'
import sys
def line(path, key):
    for raw in open(path, encoding="ascii"):
        if raw.split(" ", 1)[0] == key:
            return raw.split()
a, b = line(sys.argv[1], sys.argv[3]), line(sys.argv[2], sys.argv[3])
assert len(a) == len(b)
print(" ".join(sorted(x.split("=")[0] for x, y in zip(a, b) if x != y)))
EOF
)
[[ $fields == "ctime sha256" ]] || oracle_fail "changed fields are '$fields', want 'ctime sha256'"
oracle_log "manifest stability and sensitivity passed"
step_done 3

# --- 4. determinism -----------------------------------------------------------
img_b=$(oracle_image b.img 2G)
oracle_mkfs -- "$img_b"
mnt_b=$ORACLE_TMP/b
oracle_kmount "$mnt_b" "$img_b"
oracle_workload "$mnt_b" --seed "$SEED" --btrfs --profile small 2>/dev/null
oracle_manifest "$mnt_b" --no-ctime -o "$ORACLE_TMP/b.noctime"
oracle_manifest_diff "$ORACLE_TMP/a.noctime" "$ORACLE_TMP/b.noctime" | head -n 20 >&2 || true
cmp -s "$ORACLE_TMP/a.noctime" "$ORACLE_TMP/b.noctime" ||
	oracle_fail "the same seed gave different trees on two fresh btrfs filesystems"

for t in t1 t2 t3; do
	oracle_tmpfs "$ORACLE_TMP/$t" 256M
done
oracle_workload "$ORACLE_TMP/t1" --seed "$SEED" 2>/dev/null
oracle_workload "$ORACLE_TMP/t2" --seed "$SEED" 2>/dev/null
oracle_workload "$ORACLE_TMP/t3" --seed $((SEED + 1)) 2>/dev/null
for t in t1 t2 t3; do
	oracle_manifest "$ORACLE_TMP/$t" --no-ctime -o "$ORACLE_TMP/$t.noctime"
done
oracle_manifest_diff "$ORACLE_TMP/t1.noctime" "$ORACLE_TMP/t2.noctime" | head -n 20 >&2 || true
cmp -s "$ORACLE_TMP/t1.noctime" "$ORACLE_TMP/t2.noctime" ||
	oracle_fail "the same seed gave different trees on two tmpfs"
cmp -s "$ORACLE_TMP/t1.noctime" "$ORACLE_TMP/t3.noctime" &&
	oracle_fail "different seeds gave the same tree"
oracle_log "determinism passed"
step_done 4

# --- 5. multi-device kernel mount from image files ----------------------------
img_m1=$(oracle_image m1.img 300M)
img_m2=$(oracle_image m2.img 300M)
oracle_mkfs -d raid1 -m raid1 -- "$img_m1" "$img_m2"
mnt_m=$ORACLE_TMP/m
oracle_kmount "$mnt_m" "$img_m1" "$img_m2"
show=$(btrfs filesystem show "$mnt_m")
[[ $show == *"Total devices 2"* ]] || oracle_fail "raid1 mount does not show two devices"
head -c 300000 /dev/urandom >"$mnt_m/data"
oracle_kumount "$mnt_m"
[[ -z $(losetup -j "$img_m1") && -z $(losetup -j "$img_m2") ]] ||
	oracle_fail "oracle_kumount left the loop devices of $mnt_m attached"
step_done 5

# --- 6. unpacking shared images -----------------------------------------------
images=$(oracle_shared_images)
has_super() {
	[[ $(od -An -c -j $((65536 + 64)) -N8 "$1" | tr -d ' ') == _BHRfS_M ]]
}
for src in misc/025-zstd-compression/compress.raw.xz \
	fsck/020-extent-ref-cases/keyed_data_ref.img \
	fsck/019-non-skinny-false-alert/default_case.img.xz; do
	[[ -f $images/$src ]] || oracle_fail "missing shared image $src"
	out=$ORACLE_TMP/unpacked.img
	oracle_unpack "$images/$src" "$out"
	has_super "$out" || oracle_fail "oracle_unpack $src: no btrfs superblock in the result"
	oracle_btrfs_check "$out" || oracle_fail "the clean image $src does not check clean"
	rm -f "$out"
done
oracle_unpack "$images/misc/025-zstd-compression/compress.raw.xz" "$ORACLE_TMP/zstd.img"
oracle_kmount -o ro "$ORACLE_TMP/z" "$ORACLE_TMP/zstd.img"
oracle_manifest "$ORACLE_TMP/z" >/dev/null
oracle_kumount "$ORACLE_TMP/z"
step_done 6

# --- 7. btrfs check on what the kernel wrote ----------------------------------
oracle_kumount "$mnt_a"
oracle_kumount "$mnt_b"
for img in "$img_a" "$img_b" ; do
	oracle_btrfs_check "$img" || oracle_fail "btrfs check --readonly $img is not clean"
done
dev=$(oracle_loop "$img_m1")
dev2=$(oracle_loop "$img_m2")
btrfs device scan "$dev" "$dev2" >/dev/null
oracle_btrfs_check "$dev" || oracle_fail "btrfs check --readonly of the raid1 set is not clean"
step_done 7
oracle_log "all passed in $((SECONDS - start))s"
