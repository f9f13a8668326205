#!/bin/bash
# t-print-oracle: the tree block printer (src/lib/tree/print.c) against
# `btrfs inspect-internal dump-tree -b N` (btrfs-progs 6.2) on every stored
# image of tests/images (fsck/ and misc/: old formats, log trees, inode
# caches, metadata_uuid, compression, received subvolumes, damaged trees).
#
# Each image is unpacked into a private temp dir and handed to the unit test
# binary test_print, which prints every tree block progs lists, plain, with
# --hide-names and with --csum-headers --csum-items, and compares byte for
# byte.  fuzz/ images run too, but only have to print without a crash or a
# sanitizer report: progs itself reads garbage on several of them.
#
# Finds the binary as $UBTRFS_TEST_PRINT, else $UBTRFS_BUILD_ROOT/tests/test_print.
# UBTRFS_IMAGES_FILTER=REGEX limits the images.  No root needed.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

TP=${UBTRFS_TEST_PRINT:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/test_print}
[[ -x $TP ]] || oracle_skip "test_print binary not found (set UBTRFS_TEST_PRINT)"
oracle_require_cmd btrfs btrfs-image xz timeout
oracle_init

IMAGES=$(oracle_shared_images)
FILTER=${UBTRFS_IMAGES_FILTER:-}
T=$ORACLE_TMP
FAILS=0
N=0

while IFS=$'\t' read -r path expect _; do
	[[ $path == path ]] && continue
	[[ -n $FILTER && ! $path =~ $FILTER ]] && continue
	case $path in
	*.stream.xz) continue ;;	# a send stream, not an image
	esac
	raw=$T/img.raw
	rm -f -- "$raw"
	oracle_unpack "$IMAGES/$path" "$raw"
	N=$((N + 1))
	rc=0
	timeout 600 "$TP" "$raw" >"$T/out" 2>"$T/err" || rc=$?
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/err"; then
		printf 'FAIL: %s: sanitizer report\n' "$path"
		head -n 40 "$T/err"
		FAILS=$((FAILS + 1))
	elif ((rc > 1)); then
		printf 'FAIL: %s: test_print exited %d\n' "$path" "$rc"
		tail -n 20 "$T/err"
		FAILS=$((FAILS + 1))
	elif [[ $path == fuzz/* ]] && ((rc != 0)); then
		printf '%-70s %s\n' "$path" "differs (fuzz: not required)"
		grep -E '^(MISMATCH|  progs:|  ours:)' "$T/err" | head -n 6 | sed 's/^/    /'
	elif ((rc != 0)); then
		printf 'FAIL: %s: output differs from btrfs-progs\n' "$path"
		grep -vE '^[0-9]+ of [0-9]+ checks failed' "$T/err" | head -n 30
		FAILS=$((FAILS + 1))
	else
		printf '%-70s %s\n' "$path" "$(grep -E 'blocks x3|nothing compared' "$T/out" | sed -E 's/^[^ ]+ +//')"
	fi
	rm -f -- "$raw"
done <"$IMAGES/expect.tsv"

printf '%d images, %d failed\n' "$N" "$FAILS"
((FAILS == 0))
