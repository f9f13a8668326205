#!/bin/bash
# t-images: every image of tests/images/expect.tsv through every ubtrfs tool.
#
# For each image (unpacked into a private temp dir, deleted after use) every
# command of TOOLS runs under `timeout`:
#   - it must end with exit status 0 or 1: no signal, no timeout, no
#     sanitizer report (the suite runs again under ASan+UBSan), and exit 1
#     comes with a message on stderr;
#   - the image must be byte-identical afterwards (tools never write);
#   - where TOOLS names a btrfs-progs command, and ubtrfs exits 0, the two
#     outputs must be identical (modulo the device path).
# Superblock checks on top:
#   - fuzz/bad-superblock-* must be refused by `ubtrfs inspect dump-super`;
#   - so must every image whose primary superblock btrfs-progs flags as damaged
#     (bad magic, checksum or dev_item.fsid "[DON'T MATCH]", INVALID csum type,
#     unreadable).
# A table of results ends the output.  No root needed.
set -euo pipefail

# Commands run on every image: "UBTRFS ARGS|BTRFS-PROGS ARGS".  {} is the
# image.  The part after '|' is optional: the `btrfs` command whose output
# must equal ubtrfs' whenever ubtrfs exits 0.  Append new tools here, e.g.
#   "inspect dump-tree {}|inspect-internal dump-tree {}"
#   "ls {} /"
TOOLS=(
	"inspect dump-super -f -a {}|inspect-internal dump-super -f -a {}"
	"inspect dump-super -f {}|inspect-internal dump-super -f {}"
	"inspect dump-super -a -F -f {}|inspect-internal dump-super -a -F -f {}"
	"inspect dump-super -F -f {}|inspect-internal dump-super -F -f {}"
	"inspect dump-super -s 1 -f {}|inspect-internal dump-super -s 1 -f {}"
	"inspect dump-tree {}"
	"inspect dump-tree -t fs {}"
	"ls -R -l {}"
	"subvolume list {}"
	"filesystem show {}"
	"filesystem df {}"
)
TOOL_TIMEOUT=${TOOL_TIMEOUT:-10}
# UBTRFS_IMAGES_FILTER=REGEX (bash =~) runs only the images whose path matches.
FILTER=${UBTRFS_IMAGES_FILTER:-}
# UBTRFS_TEST_QUICK=1 (the sanitizer run of scripts/test): the outputs are
# not compared with btrfs-progs again (the development run compares them;
# the sanitizer run looks for memory errors, crashes and hangs).
QUICK=${UBTRFS_TEST_QUICK:-0}

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_ubtrfs
oracle_require_cmd btrfs btrfs-image xz timeout diff sed
oracle_require_python
oracle_init

IMAGES=$(oracle_shared_images)
LIST=$IMAGES/expect.tsv
[[ -f $LIST ]] || oracle_fail "no $LIST"
T=$ORACLE_TMP
FAILS=0
NIMG=0
declare -a TABLE=() PROBLEMS=()

# The device path is the only field allowed to differ.
norm() {
	sed -E 's/^(superblock: bytenr=[0-9]+, device=).*$/\1DEV/' "$1"
}

problem() {
	PROBLEMS+=("$1: $2")
	IMG_OK=0
}

# words STRING IMAGE: split STRING into WORDS, {} -> IMAGE (appended when
# absent).
words() {
	local w have=0
	local -a _w
	WORDS=()
	read -r -a _w <<<"$1"
	for w in "${_w[@]}"; do
		if [[ $w == "{}" ]]; then
			WORDS+=("$2")
			have=1
		else
			WORDS+=("$w")
		fi
	done
	((have)) || WORDS+=("$2")
}

# btrfs-progs' verdict on the primary superblock of IMAGE: "ok" or
# "damaged:<why>".
progs_verdict() {
	local img=$1 out=$T/verdict rc=0
	timeout "$TOOL_TIMEOUT" btrfs inspect-internal dump-super "$img" \
		</dev/null >"$out.out" 2>"$out.err" || rc=$?
	if ((rc >= 124)); then
		VERDICT="progs-crash($rc)"
	elif grep -q 'bad magic' "$out.err"; then
		VERDICT=damaged:magic
	elif grep -q 'failed to read' "$out.err" || ! grep -q '^csum_type' "$out.out"; then
		VERDICT=damaged:short
	elif grep -qE '^csum_type.*INVALID' "$out.out" ||
		grep -qE '^csum[[:space:]].*UNKNOWN CSUM' "$out.out"; then
		VERDICT=damaged:csum-type
	elif grep -qE "^csum[[:space:]].*\[DON'T MATCH\]" "$out.out"; then
		VERDICT=damaged:csum
	elif grep -qE "^dev_item\.fsid.*\[DON'T MATCH\]" "$out.out"; then
		VERDICT=damaged:fsid
	elif ((rc != 0)); then
		VERDICT="damaged:rc$rc"
	else
		VERDICT=ok
	fi
}

# run_tool INDEX IMAGE NAME: one TOOLS entry on IMAGE; sets TOOL_RC.
run_tool() {
	local idx=$1 img=$2 name=$3 uspec pspec base=$T/tool
	local spec=${TOOLS[$idx]}
	uspec=${spec%%|*}
	pspec=
	[[ $spec == *"|"* ]] && pspec=${spec#*|}
	words "$uspec" "$img"
	local -a uargs=("${WORDS[@]}")
	TOOL_RC=0
	timeout "$TOOL_TIMEOUT" "$UBTRFS" "${uargs[@]}" </dev/null >"$base.u.out" 2>"$base.u.err" ||
		TOOL_RC=$?
	local shown="ubtrfs $uspec"
	if ((TOOL_RC == 124)); then
		problem "$name" "'$shown' timed out after ${TOOL_TIMEOUT}s"
	elif ((TOOL_RC > 1)); then
		problem "$name" "'$shown' exited $TOOL_RC$( ((TOOL_RC > 128)) && printf ' (signal %d)' $((TOOL_RC - 128)))"
	fi
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$base.u.err"; then
		problem "$name" "'$shown': sanitizer report: $(grep -m1 -E 'ERROR: AddressSanitizer|runtime error:|LeakSanitizer' "$base.u.err")"
	fi
	if ((TOOL_RC > 1)); then
		sed 's/^/    stderr: /' "$base.u.err" | head -n 15
	fi
	if ((TOOL_RC == 1)) && [[ ! -s $base.u.err ]]; then
		problem "$name" "'$shown' exited 1 without a message on stderr"
	fi
	if ((TOOL_RC == 0)) && [[ -n $pspec ]] && ((!QUICK)); then
		words "$pspec" "$img"
		local prc=0
		timeout "$TOOL_TIMEOUT" btrfs "${WORDS[@]}" </dev/null >"$base.p.out" 2>"$base.p.err" || prc=$?
		if ((prc >= 124)); then
			oracle_log "$name: 'btrfs $pspec' exited $prc; output not compared"
		else
			norm "$base.p.out" >"$base.p.norm"
			norm "$base.u.out" >"$base.u.norm"
			if ! diff -u --label "btrfs $pspec" --label "ubtrfs $uspec" \
				"$base.p.norm" "$base.u.norm" >"$base.diff"; then
				problem "$name" "'$shown' exited 0 but its output differs from btrfs-progs (btrfs exit $prc)"
				sed 's/^/    /' "$base.diff" | head -n 40
			fi
		fi
	fi
}

# refuse_check IMAGE NAME WHY: `ubtrfs inspect dump-super IMAGE` must exit 1
# with a reason on stderr.
refuse_check() {
	local img=$1 name=$2 why=$3 rc=0 base=$T/refuse
	timeout "$TOOL_TIMEOUT" "$UBTRFS" inspect dump-super "$img" </dev/null >"$base.out" 2>"$base.err" ||
		rc=$?
	REFUSE_RC=$rc
	if ((rc != 1)); then
		problem "$name" "'ubtrfs inspect dump-super' exited $rc, expected 1 ($why)"
		sed 's/^/    stdout: /' "$base.out" | head -n 6
		sed 's/^/    stderr: /' "$base.err" | head -n 6
	elif [[ ! -s $base.err ]]; then
		problem "$name" "'ubtrfs inspect dump-super' exited 1 without a reason on stderr"
	fi
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$base.err"; then
		problem "$name" "'ubtrfs inspect dump-super': sanitizer report"
	fi
}

start=$SECONDS
while IFS=$'\t' read -r -u 3 path expect _note; do
	[[ -z $path || $path == path || $path == \#* ]] && continue
	[[ -z $FILTER || $path =~ $FILTER ]] || continue
	NIMG=$((NIMG + 1))
	IMG_OK=1
	src=$IMAGES/$path
	img=$T/image.raw
	rm -f -- "$img"
	if ! msg=$( (oracle_unpack "$src" "$img") 2>&1 </dev/null); then
		problem "$path" "cannot unpack: ${msg//$'\n'/ }"
		TABLE+=("$(printf '%-72s %-14s %-18s %s' "$path" "-" "-" FAIL)")
		FAILS=$((FAILS + 1))
		rm -f -- "$img"
		continue
	fi
	before=$(oracle_content_hash "$img")

	progs_verdict "$img"
	rcs=
	for i in "${!TOOLS[@]}"; do
		run_tool "$i" "$img" "$path"
		rcs+=${rcs:+,}$TOOL_RC
	done

	REFUSE_RC=-
	if [[ ${path##*/} == bad-superblock-* ]]; then
		refuse_check "$img" "$path" "fuzzed superblock"
	elif [[ $VERDICT == damaged:* ]]; then
		refuse_check "$img" "$path" "btrfs-progs: ${VERDICT#damaged:}"
	fi

	after=$(oracle_content_hash "$img")
	if [[ $before != "$after" ]]; then
		problem "$path" "the image changed while the tools ran (content hash $before -> $after)"
	fi
	rm -f -- "$img"

	((IMG_OK)) || FAILS=$((FAILS + 1))
	TABLE+=("$(printf '%-72s %-14s %-18s %s' "$path" "$rcs/$REFUSE_RC" "$VERDICT" \
		"$( ((IMG_OK)) && echo ok || echo FAIL)")")
	: "$expect"
done 3<"$LIST"

printf '\nTools (exit statuses in this order, then /plain dump-super when it must refuse):\n'
for i in "${!TOOLS[@]}"; do
	printf '  %d. ubtrfs %s\n' $((i + 1)) "${TOOLS[$i]%%|*}"
done
printf '\n%-72s %-14s %-18s %s\n' image "ubtrfs exits" "progs verdict" result
printf '%s\n' "${TABLE[@]}"
if ((${#PROBLEMS[@]})); then
	printf '\nProblems:\n'
	printf '  %s\n' "${PROBLEMS[@]}"
fi
printf '\n%d images, %d failed, %ds\n' "$NIMG" "$FAILS" $((SECONDS - start))
if ((FAILS)); then
	printf 'FAIL: %d of %d images\n' "$FAILS" "$NIMG"
	exit 1
fi
((NIMG)) || oracle_fail "no images in $LIST"
printf 'PASS\n'
exit 0
