#!/bin/bash
# t-crash-points: power failure at every point of a run of the engine.
#
# One run of cow_stress (random xattr inserts, replaces, deletes, extends,
# truncates; a commit every 40 operations) is counted: it makes W device
# writes.  Then, for N spread over the whole run (the step
# is about a commit's writes), points right around the superblock writes of
# a quarter of the commits, plus random points, the same run is
# repeated on a fresh copy of the image with every write after the Nth
# dropped (the io layer's crash simulation).  Each resulting image must:
#   - carry the generation of the last commit that fully landed, or of the
#     commit in flight (when its primary superblock happened to land);
#   - be clean for btrfs check --readonly;
#   - mount in the kernel and show exactly that commit's model;
#   - open in ubtrfs (ls).
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, getfattr.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_cmd getfattr
oracle_require_ubtrfs
COW=${UBTRFS_COW_STRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/cow_stress}
[[ -x $COW ]] || oracle_skip "cow_stress tool not built ($COW)"
oracle_init

T=$ORACLE_TMP
OPS=2000
EVERY=40
SEED=7
FAILS=0

template=$(oracle_image template.img 256M)
"$UBTRFS" mkfs -q -f -n 4096 "$template" >/dev/null
cp --sparse=always "$template" "$T/count.img"
UBTRFS_COUNT_WRITES=1 "$COW" "$T/count.img" "$OPS" "$SEED" "$EVERY" "$T/count.model" \
	>"$T/count.out" 2>/dev/null || oracle_fail "the counting run failed"
W=$(tail -n 1 "$T/count.out")
[[ $W =~ ^[0-9]+$ ]] || oracle_fail "could not count the run's writes"
mapfile -t ENDS < <(sed -n 's/^commit //p' "$T/count.out")
oracle_log "the run makes $W device writes"

generation_of() {
	btrfs inspect-internal dump-super "$1" 2>/dev/null | awk '$1 == "generation" { print $2 }'
}

trial() {
	local n=$1 img=$T/crash.img out gen model mnt=$T/mnt
	cp --sparse=always "$template" "$img"
	rm -f "$T"/crash.model.*
	if ! out=$(UBTRFS_CRASH_AFTER=$n "$COW" "$img" "$OPS" "$SEED" "$EVERY" "$T/crash.model" 2>&1); then
		printf '%s\n' "$out" >&2
		oracle_log "crash after $n writes: the run failed"
		return 1
	fi
	gen=$(generation_of "$img")
	model=$T/crash.model.$gen
	if [[ ! -f $model ]]; then
		printf '%s\n' "$out" >&2
		oracle_log "crash after $n writes: image generation $gen is neither the last landed commit nor the one in flight ($(ls "$T" | grep crash.model | tr '\n' ' '))"
		return 1
	fi
	out=$(btrfs check --readonly "$img" 2>&1) || {
		printf '%s\n' "$out" | tail -n 20 >&2
		oracle_log "crash after $n writes: btrfs check failed (generation $gen)"
		return 1
	}
	"$UBTRFS" ls "$img" / >/dev/null 2>&1 || {
		oracle_log "crash after $n writes: ubtrfs cannot open the image"
		return 1
	}
	oracle_kmount -o ro "$mnt" "$img" || return 1
	getfattr -d -m '^user\.k' -e hex -- "$mnt" 2>/dev/null | grep -v '^#' | grep -v '^$' |
		sort >"$T/kernel.xattrs" || true
	oracle_kumount "$mnt"
	if ! diff <(sort "$model") "$T/kernel.xattrs" >"$T/diff"; then
		head -n 10 "$T/diff" >&2
		oracle_log "crash after $n writes: the kernel shows something else than commit $gen"
		return 1
	fi
}

# Every point from 0 in steps of W/48, then 12 random ones.
points=()
# UBTRFS_TEST_QUICK=1 (the sanitizer run): 12 points instead of 32.
npts=$(( ${UBTRFS_TEST_QUICK:-0} == 1 ? 12 : 32 ))
step=$((W / npts > 0 ? W / npts : 1))
for ((n = 0; n < W; n += step)); do
	points+=("$n")
done
RANDOM=4242
for ((i = 0; i < npts / 4; i++)); do
	points+=("$((RANDOM * 32768 % W + RANDOM % W))")
done
# Around the superblock writes of some commits: each commit ends with its
# primary superblock and the mirror(s) (write E - 1 and E, one device with
# two copies): E - 2 cuts before the primary (the old commit must open),
# E - 1 after it (the new one), plus the last block write before them.
nends=${#ENDS[@]}
stride=$(( nends / (npts / 4) > 0 ? nends / (npts / 4) : 1 ))
for ((c = 0; c < nends; c += stride)); do
	e=${ENDS[c]}
	for d in 1 2 3; do
		((e - d > 0)) && points+=("$((e - d))")
	done
done
for n in "${points[@]}"; do
	n=$((n % W))
	trial "$n" || FAILS=$((FAILS + 1))
done
if ((FAILS)); then
	oracle_fail "$FAILS of ${#points[@]} crash points failed"
fi
oracle_log "${#points[@]} crash points over $W writes: every image opens at a complete commit and checks clean"
