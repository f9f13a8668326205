#!/bin/bash
# t-enospc: fill a small filesystem until ENOSPC, empty it, fill it again.
#
# cow_stress in fill mode (UBTRFS_COW_FILL=1) inserts large xattrs through
# the engine - new metadata chunks are allocated as the groups fill - until
# an insert returns ENOSPC; that must leave the filesystem writable, and the
# commit after it must succeed.  Then: btrfs check clean, the kernel shows
# the model.  Emptying (UBTRFS_COW_FILL=2) deletes everything, committing
# and retrying when a delete meets ENOSPC; check clean, kernel shows no
# xattr.  Filling again must reach about the same amount.  Then the kernel
# writes to it and check is clean once more.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, python3, setfattr.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_kernel_btrfs
oracle_require_cmd setfattr
oracle_require_python
oracle_require_ubtrfs
COW=${UBTRFS_COW_STRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/cow_stress}
[[ -x $COW ]] || oracle_skip "cow_stress tool not built ($COW)"
oracle_init

T=$ORACLE_TMP
FAILS=0

check_clean() {
	oracle_check_clean "$@"
}

# kernel_compare WHAT MODEL IMG...: every xattr of the model, read by name
# through the kernel, has the model's value (tens of thousands of names:
# more than listxattr's 64 KiB can list), and names outside the model are
# absent.
kernel_compare() {
	local what=$1 model=$2 mnt=$T/mnt
	shift 2
	oracle_kmount -o ro "$mnt" "$@" || return 1
	local rc=0
	"$ORACLE_PYTHON" - "$mnt" "$model" <<'PY' || rc=$?
import errno, os, sys
mnt, model = sys.argv[1], sys.argv[2]
want = {}
for line in open(model):
    name, _, val = line.rstrip("\n").partition("=")
    want[name] = bytes.fromhex(val[2:]) if val.startswith("0x") else b""
bad = 0
for name, val in want.items():
    try:
        got = os.getxattr(mnt, name)
    except OSError as e:
        got = "missing (%s)" % errno.errorcode.get(e.errno, e.errno)
    if got != val:
        bad += 1
        if bad < 5:
            print("%s: kernel %s, model %d bytes" % (name, got if isinstance(got, str) else "%d bytes" % len(got), len(val)), file=sys.stderr)
for k in range(65536):
    name = "user.k%d" % k
    if name in want:
        continue
    try:
        os.getxattr(mnt, name)
        bad += 1
        print("%s: present in the kernel, absent in the model" % name, file=sys.stderr)
    except OSError as e:
        if e.errno != errno.ENODATA:
            bad += 1
print("compared %d xattrs" % len(want), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
	oracle_kumount "$mnt"
	if ((rc)); then
		oracle_log "$what: the kernel's xattrs differ from the model"
		return 1
	fi
}

# fill NAME PHASE SEED IMG...: prints the count cow_stress reports.
fill() {
	local name=$1 phase=$2 seed=$3 out
	shift 3
	local joined
	joined=$(IFS=,; printf '%s' "$*")
	if ! out=$(UBTRFS_COW_FILL=$phase "$COW" "$joined" 0 "$seed" 50 "$T/$name.model" 2>&1); then
		printf '%s\n' "$out" >&2
		oracle_log "$name: cow_stress fill phase $phase failed"
		return 1
	fi
	printf '%s\n' "$out" | grep -E '^cow_stress: (filled|deleted)' >&2
	printf '%s\n' "$out" | sed -n 's/^cow_stress: filled \([0-9]*\) xattrs.*/\1/p'
}

run_cell() {
	local name=$1 maker=$2 opts=$3 ndev=$4 size=$5 i out
	local -a imgs=()
	for ((i = 0; i < ndev; i++)); do
		imgs+=("$(oracle_image "$name/d$i.img" "$size")")
	done
	oracle_mkfs_with "$maker" "$opts" "${imgs[@]}" || return 1
	local first second
	first=$(fill "$name-fill1" 1 1 "${imgs[@]}") || return 1
	check_clean "$name (full)" "${imgs[@]}" || return 1
	kernel_compare "$name (full)" "$T/$name-fill1.model" "${imgs[@]}" || return 1
	fill "$name-empty" 2 2 "${imgs[@]}" >/dev/null || return 1
	check_clean "$name (emptied)" "${imgs[@]}" || return 1
	kernel_compare "$name (emptied)" "$T/$name-empty.model" "${imgs[@]}" || return 1
	second=$(fill "$name-fill2" 1 3 "${imgs[@]}") || return 1
	check_clean "$name (full again)" "${imgs[@]}" || return 1
	# Emptied space is reusable: the second fill holds about as much.
	if ((second * 10 < first * 9)); then
		oracle_log "$name: first fill took $first xattrs, the second only $second"
		return 1
	fi
	# The kernel can still delete on the full filesystem and commit.
	local mnt=$T/mnt
	oracle_kmount "$mnt" "${imgs[@]}" || return 1
	# Two names of the model (the fill starts at k0 and skips colliding
	# names, so the first two present ones are taken from it).
	local n
	for n in $(sed -n 's/^\(user\.k[0-9]*\)=.*/\1/p' "$T/$name-fill2.model" | head -n 2); do
		if ! setfattr -x "$n" "$mnt"; then
			oracle_log "$name: the kernel could not delete $n on the full filesystem"
			oracle_kumount "$mnt"
			return 1
		fi
	done
	sync
	oracle_kumount "$mnt"
	check_clean "$name (after the kernel)" "${imgs[@]}" || return 1
	oracle_log "$name: filled $first, emptied, filled $second: ok"
}

# UBTRFS_TEST_QUICK=1 (the sanitizer run of scripts/test): the first cell.
QUICK=${UBTRFS_TEST_QUICK:-0}
NCELLS=0
cell() {
	NCELLS=$((NCELLS + 1))
	((QUICK && NCELLS > 1)) && return 0
	run_cell "$@" || FAILS=$((FAILS + 1))
}

#    name          maker   mkfs options                  devs size
cell ubt-4k        ubtrfs  "-n 4096"                     1    256M
cell progs-16k     progs   ""                            1    256M
cell progs-raid1   progs   "-n 4096 -m raid1 -d raid1"   2    192M

if ((FAILS)); then
	oracle_fail "$FAILS cell(s) failed"
fi
oracle_log "all cells passed"
