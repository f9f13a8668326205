#!/bin/bash
# t-difftest: the differential tester (tests/tools/difftest.py) -- random
# sequences of file system operations on a read-write ubtrfs FUSE mount and
# on tmpfs, every result and the touched state compared after each
# operation, whole trees every 100, an unmount + btrfs check --readonly +
# remount every 500, and at the end the kernel's read-only view of the image
# compared with the reference and with the last FUSE view.
#
#   (a) seeds x operations (dev: 3 x 3000; UBTRFS_TEST_QUICK=1: 2 x 600),
#       one image profile per seed (mkfs.btrfs defaults, -O ^no-holes,
#       ubtrfs mkfs, -n 4096); a failure is shrunk to a reproducer that is
#       printed here (cut the shrinking short: 150 s);
#   (b) the shrinker self-test: a fake bug in the tester's observation of
#       the ubtrfs side (the dir backend with UBTRFS_TEST_QUICK=1), shrunk
#       to at most 8 operations, the reproducer failing with the fake bug
#       and passing without it;
#   (c) every reproducer in tests/compat/difftest-regress/ replays clean,
#       except those marked "known_bug", which must still fail the recorded
#       way (and fail this test once they pass, so the mark gets dropped).
#
# Optional operation kinds the daemon does not support yet are reported as
# skipped.  Long runs by hand: difftest.py --ops 100000 --seeds 1-20 (see its
# --help).  UBTRFS_DIFFTEST_SEEDS and UBTRFS_DIFFTEST_OPS override (a).
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, FUSE and python3.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
[[ -e /sys/fs/fuse/connections ]] || oracle_skip "needs fusectl (/sys/fs/fuse/connections)"
oracle_init

T0=$SECONDS
DT=("$ORACLE_PYTHON" "$ORACLE_TOOLS/difftest.py" --ubtrfs "$UBTRFS" --tmpdir "$ORACLE_TMP")
fails=0

if [[ ${UBTRFS_TEST_QUICK:-0} == 1 ]]; then
	seeds=${UBTRFS_DIFFTEST_SEEDS:-1,2}
	ops=${UBTRFS_DIFFTEST_OPS:-600}
	selftest=(--backend dir)
else
	seeds=${UBTRFS_DIFFTEST_SEEDS:-1-3}
	ops=${UBTRFS_DIFFTEST_OPS:-3000}
	selftest=()
fi

# (a) random runs
mkdir "$ORACLE_TMP/out"
rc=0
"${DT[@]}" --seeds "$seeds" --ops "$ops" --keep-going --out "$ORACLE_TMP/out" \
	--shrink-budget 150 2>"$ORACLE_TMP/run.log" || rc=$?
cat "$ORACLE_TMP/run.log" >&2
if ((rc != 0)); then
	printf 'FAIL: difftest.py --seeds %s --ops %s exited %d\n' "$seeds" "$ops" "$rc"
	for f in "$ORACLE_TMP"/out/*.min.json; do
		[[ -e $f ]] || continue
		printf -- '--- reproducer %s (save it to tests/compat/difftest-regress/):\n' "${f##*/}"
		cat -- "$f"
	done
	fails=$((fails + 1))
fi
grep -q "total: .* ops clean" "$ORACLE_TMP/run.log" ||
	{ printf 'FAIL: difftest.py printed no total\n'; fails=$((fails + 1)); }
oracle_log "(a) done ($((SECONDS - T0)) s)"

# (b) the shrinker on a fake bug
rc=0
"${DT[@]}" "${selftest[@]}" --self-test-shrinker --out "$ORACLE_TMP/out" \
	2>"$ORACLE_TMP/self.log" || rc=$?
if ((rc != 0)) || ! grep -q "self-test: PASS" "$ORACLE_TMP/self.log"; then
	cat "$ORACLE_TMP/self.log"
	printf 'FAIL: difftest.py --self-test-shrinker exited %d\n' "$rc"
	fails=$((fails + 1))
else
	grep -E "self-test: [0-9]+ ops ->" "$ORACLE_TMP/self.log" >&2 || true
fi
oracle_log "(b) done ($((SECONDS - T0)) s)"

# (c) regression reproducers
regress=("$UBTRFS_SOURCE_ROOT"/tests/compat/difftest-regress/*.json)
if [[ -e ${regress[0]} ]]; then
	rc=0
	"${DT[@]}" --expect-known --replay "${regress[@]}" 2>"$ORACLE_TMP/regress.log" || rc=$?
	cat "$ORACLE_TMP/regress.log" >&2
	if ((rc != 0)); then
		printf 'FAIL: a regression reproducer failed:\n'
		grep -E "FAILED|FIXED|otherwise" "$ORACLE_TMP/regress.log" || true
		fails=$((fails + 1))
	fi
	oracle_log "(c) ${#regress[@]} reproducer(s) replayed ($((SECONDS - T0)) s)"
fi

((fails == 0)) || oracle_fail "$fails part(s) failed"
oracle_log "total $((SECONDS - T0)) s"
