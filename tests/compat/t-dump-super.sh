#!/bin/bash
# t-dump-super: `ubtrfs inspect dump-super` against `btrfs inspect-internal
# dump-super` (btrfs-progs) on images made by mkfs.btrfs / btrfstune with many
# feature combinations, and on damaged superblocks.
#
# Valid images: the outputs must be identical but for the device path in the
# "superblock: bytenr=..., device=..." line.  Damaged primary superblock:
# ubtrfs refuses it (exit 1, reason on stderr, nothing printed for that copy);
# with -F it prints it as btrfs-progs -F does.  No root needed.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_ubtrfs
oracle_require_cmd mkfs.btrfs btrfs btrfstune diff dd od truncate sed grep
oracle_init

T=$ORACLE_TMP
FAILS=0
CHECKS=0
SUPER1_MIN=$((64 * 1024 * 1024 + 4096))	# a copy 1 fits from this size on

fail() {
	printf 'FAIL: %s\n' "$*"
	FAILS=$((FAILS + 1))
}

# Replace the device path in the per-copy header; nothing else changes.
norm() {
	sed -E 's/^(superblock: bytenr=[0-9]+, device=).*$/\1DEV/' "$1"
}

# Run ubtrfs (stdout OUT.out, stderr OUT.err); sets URC.  A signal, a
# timeout, or a sanitizer report is a failure of its own.
run_ubtrfs() {
	local out=$1
	shift
	URC=0
	timeout 60 "$UBTRFS" inspect dump-super "$@" >"$out.out" 2>"$out.err" || URC=$?
	if ((URC >= 124)); then
		fail "ubtrfs inspect dump-super $* exited $URC (crash/timeout)"
		sed 's/^/  stderr: /' "$out.err" | head -n 20
		return 1
	fi
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$out.err"; then
		fail "ubtrfs inspect dump-super $*: sanitizer report"
		head -n 40 "$out.err"
		return 1
	fi
	return 0
}

# Run btrfs-progs; sets PRC.
run_progs() {
	local out=$1
	shift
	PRC=0
	btrfs inspect-internal dump-super "$@" >"$out.out" 2>"$out.err" || PRC=$?
}

# same_output LABEL PROGS_OUT UBTRFS_OUT: unified diff of the normalized
# outputs; fails on any difference.
same_output() {
	local label=$1 p=$2 u=$3
	norm "$p" >"$p.norm"
	norm "$u" >"$u.norm"
	if ! diff -u --label "btrfs-progs $label" --label "ubtrfs $label" \
		"$p.norm" "$u.norm" >"$u.diff"; then
		fail "$label: output differs from btrfs-progs"
		head -n 80 "$u.diff"
		return 1
	fi
	return 0
}

# compare NAME IMAGE [OPTS...]: both tools on a valid image, both exit 0,
# identical output.
compare() {
	local name=$1 img=$2
	shift 2
	local label="$name: dump-super $* ${img##*/}"
	local base=$T/cmp.$CHECKS
	CHECKS=$((CHECKS + 1))
	run_progs "$base.p" "$@" "$img"
	if ((PRC != 0)); then
		fail "$label: btrfs-progs exited $PRC (test bug?)"
		cat "$base.p.err"
		return 0
	fi
	run_ubtrfs "$base.u" "$@" "$img" || return 0
	if ((URC != 0)); then
		fail "$label: ubtrfs exited $URC on a valid image"
		sed 's/^/  stderr: /' "$base.u.err" | head -n 20
		return 0
	fi
	same_output "$label" "$base.p.out" "$base.u.out" || return 0
	if [[ -s $base.u.err ]]; then
		oracle_log "note: $label: ubtrfs wrote to stderr: $(head -c 300 "$base.u.err")"
	fi
}

# The option sets every valid image is dumped with.
compare_all() {
	local name=$1 img=$2 size
	compare "$name" "$img" -f -a
	compare "$name" "$img" -a
	compare "$name" "$img"
	compare "$name" "$img" -f
	compare "$name" "$img" -s 0
	compare "$name" "$img" --full --all
	size=$(stat -c %s -- "$img")
	if ((size >= SUPER1_MIN)); then
		compare "$name" "$img" -s 1
		compare "$name" "$img" -f -s 1
		compare "$name" "$img" --super 1 --full
	fi
}

# mkimg NAME SIZE MKFS_OPTS...: make $T/NAME.img (path in IMG) or end the
# test (call at top level).
mkimg() {
	local name=$1 size=$2
	shift 2
	IMG=$(oracle_image "$name.img" "$size")
	oracle_mkfs "$@" -- "$IMG" >/dev/null
}

# case NAME SIZE MKFS_OPTS...: make an image and compare every option set.
mkcase() {
	local name=$1 size=$2 img
	shift 2
	local out rc=0
	img=$T/$name.img
	rm -f -- "$img"
	truncate -s "$size" -- "$img"
	out=$(mkfs.btrfs -f -q "$@" "$img" 2>&1) || rc=$?
	if ((rc)); then
		printf '%s\n' "$out"
		fail "$name: mkfs.btrfs $* failed"
		return 0
	fi
	oracle_log "case $name: mkfs.btrfs $*"
	compare_all "$name" "$img"
	rm -f -- "$img"
}

# optcase: like mkcase, but a mkfs.btrfs that does not know the option only
# skips the case (features that depend on the btrfs-progs build).
optcase() {
	local name=$1 size=$2 img
	shift 2
	img=$T/$name.img
	rm -f -- "$img"
	truncate -s "$size" -- "$img"
	if ! mkfs.btrfs -f -q "$@" "$img" >/dev/null 2>&1; then
		oracle_log "case $name: mkfs.btrfs $* not supported here; skipped"
		rm -f -- "$img"
		return 0
	fi
	oracle_log "case $name: mkfs.btrfs $*"
	compare_all "$name" "$img"
	rm -f -- "$img"
}

# ---------------------------------------------------------------------------
# 1. Valid images.

for c in crc32c xxhash sha256 blake2; do
	mkcase "csum-$c" 512M --csum "$c"
done
mkcase node-4k 512M -s 4096 -n 4096
mkcase node-16k 512M -n 16384
mkcase node-64k 512M -n 65536
mkcase holes 512M -O ^no-holes
mkcase no-holes 512M -O no-holes
mkcase no-fst 512M -R ^free-space-tree
mkcase fst 512M -R free-space-tree
mkcase label 512M -L 'my vol  with spaces ünïcødé ☃ 日本語'
mkcase label-max 512M -L "$(printf 'L%.0s' {1..255})"
mkcase meta-single 512M -m single
mkcase meta-dup 512M -m dup -d single
mkcase mixed-small 48M -M
mkcase mixed-256m 256M -M --csum sha256
mkcase old-features 512M -O ^skinny-metadata,^extref,^no-holes -R ^free-space-tree
mkcase combo 1G --csum blake2 -n 65536 -O ^no-holes -R ^free-space-tree -m single -L 'combo ✓'
mkcase tiny-copy1 $((SUPER1_MIN)) -M
optcase sector-64k 512M -s 65536 -n 65536
optcase block-group-tree 512M -O block-group-tree

# mkfs --rootdir: a filled filesystem (bytes_used, generations differ).
mkdir -p -- "$T/rootdir/sub"
printf 'hello\n' >"$T/rootdir/sub/file"
head -c 200000 /dev/urandom >"$T/rootdir/big" 2>/dev/null || true
mkcase rootdir 512M --rootdir "$T/rootdir"

# Two devices: dump each, and both in one command line.
d1=$(oracle_image two-1.img 512M)
d2=$(oracle_image two-2.img 512M)
mkfs.btrfs -f -q -L two "$d1" "$d2" >/dev/null 2>&1 || oracle_fail "mkfs.btrfs two devices failed"
oracle_log "case two-devices"
compare_all two-dev-1 "$d1"
compare_all two-dev-2 "$d2"
compare two-dev-both "$d1" -f -a "$d2"
compare two-dev-both "$d1" "$d2"
rm -f -- "$d1" "$d2"

# Three devices, raid1c3 metadata and raid5 data (RAID1C34, RAID56 flags).
r1=$(oracle_image r-1.img 300M)
r2=$(oracle_image r-2.img 300M)
r3=$(oracle_image r-3.img 300M)
if mkfs.btrfs -f -q -m raid1c3 -d raid5 "$r1" "$r2" "$r3" >/dev/null 2>&1; then
	oracle_log "case three-devices raid1c3/raid5"
	compare_all three-dev-1 "$r1"
	compare_all three-dev-3 "$r3"
	compare three-dev-all "$r1" -f -a "$r2" "$r3"
fi
rm -f -- "$r1" "$r2" "$r3"

# metadata_uuid: btrfstune -m (random new fsid) and -M UUID, unmounted.
mkimg meta-uuid-m 512M
img=$IMG
btrfstune -m "$img" >/dev/null 2>&1 || oracle_fail "btrfstune -m failed"
grep -q METADATA_UUID < <(btrfs inspect-internal dump-super "$img") ||
	oracle_fail "btrfstune -m did not set METADATA_UUID"
oracle_log "case metadata-uuid (btrfstune -m)"
compare_all meta-uuid-m "$img"
rm -f -- "$img"

mkimg meta-uuid-M 512M --csum xxhash
img=$IMG
btrfstune -M 0badc0de-1234-4321-8765-0123456789ab "$img" >/dev/null 2>&1 ||
	oracle_fail "btrfstune -M failed"
oracle_log "case metadata-uuid (btrfstune -M)"
compare_all meta-uuid-M "$img"
rm -f -- "$img"

# Two-device metadata_uuid.
d1=$(oracle_image mu-1.img 300M)
d2=$(oracle_image mu-2.img 300M)
mkfs.btrfs -f -q "$d1" "$d2" >/dev/null 2>&1 || oracle_fail "mkfs.btrfs two devices failed"
if btrfstune -m "$d1" >/dev/null 2>&1; then
	oracle_log "case metadata-uuid two devices"
	compare_all meta-uuid-dev1 "$d1"
	compare_all meta-uuid-dev2 "$d2"
fi
rm -f -- "$d1" "$d2"

# A new fsid rewritten everywhere (btrfstune -U), and the SEEDING flag.
mkimg new-fsid 512M
img=$IMG
if btrfstune -f -U 12345678-9abc-def0-1234-56789abcdef0 "$img" >/dev/null 2>&1; then
	oracle_log "case btrfstune -U"
	compare_all new-fsid "$img"
fi
rm -f -- "$img"
mkimg seeding 512M
img=$IMG
btrfstune -S 1 "$img" >/dev/null 2>&1 || oracle_fail "btrfstune -S 1 failed"
oracle_log "case seeding"
compare_all seeding "$img"
rm -f -- "$img"

# ---------------------------------------------------------------------------
# 2. Damaged superblocks.

# poke IMAGE OFFSET BYTES(printf format): overwrite bytes in place.
poke() {
	# shellcheck disable=SC2059
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# flip IMAGE OFFSET: invert one byte.
flip() {
	local v
	v=$(od -An -tu1 -j "$2" -N1 -- "$1" | tr -d ' ')
	poke "$1" "$2" "\\$(printf %03o $((v ^ 0xff)))"
}

# refused NAME IMAGE PATTERN [OPTS...]: ubtrfs must exit 1 with a message
# matching PATTERN (grep -Ei) on stderr and print nothing for the bad copy.
refused() {
	local name=$1 img=$2 pat=$3
	shift 3
	local base=$T/ref.$CHECKS
	CHECKS=$((CHECKS + 1))
	REFUSED_OUT=/dev/null
	run_ubtrfs "$base.u" "$@" "$img" || return 0
	if ((URC != 1)); then
		fail "$name: ubtrfs inspect dump-super $* exited $URC, expected 1"
		sed 's/^/  stdout: /' "$base.u.out" | head -n 5
	fi
	if ! grep -Eqi -- "$pat" "$base.u.err"; then
		fail "$name: stderr does not match /$pat/:"
		sed 's/^/  stderr: /' "$base.u.err" | head -n 10
	elif ! grep -q '^ubtrfs: ' "$base.u.err"; then
		fail "$name: the error on stderr does not start with 'ubtrfs: '"
		sed 's/^/  stderr: /' "$base.u.err" | head -n 10
	fi
	REFUSED_OUT=$base.u.out
}

# forced NAME IMAGE OPTS...: ubtrfs -F must print what btrfs-progs -F prints.
# Its exit status may be 0 or 1 (not a crash).
forced() {
	local name=$1 img=$2
	shift 2
	local label="$name: dump-super -F $* ${img##*/}"
	local base=$T/frc.$CHECKS
	CHECKS=$((CHECKS + 1))
	FORCED_OUT=/dev/null
	run_progs "$base.p" -F "$@" "$img"
	run_ubtrfs "$base.u" -F "$@" "$img" || return 0
	if ((URC > 1)); then
		fail "$label: ubtrfs exited $URC"
		return 0
	fi
	same_output "$label" "$base.p.out" "$base.u.out" || true
	FORCED_OUT=$base.u.out
}

mkimg good 512M -L 'label'
good=$IMG

# 2a. One byte of the label flipped: checksum mismatch on copy 0 only.
img=$T/bad-csum.img
cp --sparse=always -- "$good" "$img"
flip "$img" $((65536 + 0x12b))
oracle_log "case damaged: label byte flipped (checksum mismatch)"
refused csum-flip "$img" 'checksum|csum'
if [[ -s $REFUSED_OUT ]]; then
	fail "csum-flip: ubtrfs printed the refused copy:"
	head -n 5 "$REFUSED_OUT"
fi
refused csum-flip-s0 "$img" 'checksum|csum' -s 0
refused csum-flip-full "$img" 'checksum|csum' -f
forced csum-flip "$img"
grep -q "DON'T MATCH" "$FORCED_OUT" ||
	fail "csum-flip: -F output has no [DON'T MATCH]"
forced csum-flip "$img" -f
forced csum-flip "$img" -f -a
forced csum-flip "$img" -s 1
# -a: copy 0 is refused, copy 1 (intact) printed as btrfs-progs prints it.
# Where the blank separator lines go when a copy is left out is not fixed, so
# compare without blank lines.
refused csum-flip-all "$img" 'checksum|csum' -a -f
run_progs "$T/copy1.p" -f -s 1 "$img"
grep -v '^$' "$T/copy1.p.out" >"$T/copy1.p.nb" || true
grep -v '^$' "$REFUSED_OUT" >"$T/copy1.u.nb" || true
same_output "csum-flip: dump-super -a -f (good copy 1 only, blank lines ignored)" \
	"$T/copy1.p.nb" "$T/copy1.u.nb" || true
compare csum-flip-copy1 "$img" -f -s 1
rm -f -- "$img"

# 2b. Bad magic.
img=$T/bad-magic.img
cp --sparse=always -- "$good" "$img"
poke "$img" $((65536 + 0x40)) 'XXXXXXXX'
oracle_log "case damaged: bad magic"
refused bad-magic "$img" 'magic'
forced bad-magic "$img" -f
rm -f -- "$img"

# 2c. Unsupported checksum type (7).
img=$T/bad-csum-type.img
cp --sparse=always -- "$good" "$img"
poke "$img" $((65536 + 0xc4)) '\007'
oracle_log "case damaged: csum_type 7"
refused bad-csum-type "$img" 'csum|checksum'
forced bad-csum-type "$img"
rm -f -- "$img"

# 2d. Checksum field itself corrupted (xxhash image).
mkimg bad-csum-xx 512M --csum xxhash
img=$IMG
flip "$img" $((65536 + 3))
oracle_log "case damaged: xxhash checksum bytes"
refused bad-csum-xx "$img" 'checksum|csum'
forced bad-csum-xx "$img" -f
rm -f -- "$img"

# 2e. Truncated images: shorter than 64 KiB + 4 KiB.
for sz in $((65536 + 4096 - 1)) 68000 65537 65536 32768 0; do
	img=$T/trunc-$sz.img
	rm -f -- "$img"
	head -c "$sz" -- "$good" >"$img"
	oracle_log "case truncated to $sz"
	refused "truncated-$sz" "$img" '.'
	refused "truncated-$sz-all" "$img" '.' -a -f
done

# 2f. Not a file we can read.
refused missing-file "$T/does-not-exist.img" 'does-not-exist'
refused directory "$T/rootdir" '.'

rm -f -- "$good"

if ((FAILS)); then
	printf 'FAIL: %d of %d checks failed\n' "$FAILS" "$CHECKS"
	exit 1
fi
printf 'PASS: %d checks\n' "$CHECKS"
exit 0
