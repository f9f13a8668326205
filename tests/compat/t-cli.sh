#!/bin/bash
# t-cli: the command line of `ubtrfs`: help, version, unique-prefix
# abbreviations, the inspect-internal alias, and errors for unknown words,
# missing or unreadable devices and bad option values.  No root needed.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_ubtrfs
oracle_require_cmd mkfs.btrfs cmp grep
oracle_init

T=$ORACLE_TMP
FAILS=0
CHECKS=0

fail() {
	printf 'FAIL: %s\n' "$*"
	FAILS=$((FAILS + 1))
}

# run ARGS...: ubtrfs ARGS with stdout in $T/out, stderr in $T/err, exit
# status in RC.  A crash, a timeout or a sanitizer report fails the check.
run() {
	CHECKS=$((CHECKS + 1))
	RC=0
	timeout 30 "$UBTRFS" "$@" >"$T/out" 2>"$T/err" || RC=$?
	if ((RC >= 124)); then
		fail "ubtrfs $*: exited $RC (crash or timeout)"
		head -n 20 "$T/err"
	elif grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/err"; then
		fail "ubtrfs $*: sanitizer report"
		head -n 40 "$T/err"
		RC=125
	fi
}

show() {
	sed 's/^/  stdout: /' "$T/out" | head -n 8
	sed 's/^/  stderr: /' "$T/err" | head -n 8
}

# expect_ok DESC ARGS...: exit 0.
expect_ok() {
	local desc=$1
	shift
	run "$@"
	if ((RC != 0)); then
		fail "$desc: 'ubtrfs $*' exited $RC, expected 0"
		show
		return 1
	fi
}

# expect_err DESC ARGS...: a non-zero exit (not a crash) with a message on
# stderr and nothing on stdout.
expect_err() {
	local desc=$1
	shift
	run "$@"
	if ((RC == 0)); then
		fail "$desc: 'ubtrfs $*' exited 0, expected an error"
		show
		return 1
	fi
	((RC < 124)) || return 1
	if [[ ! -s $T/err ]]; then
		fail "$desc: 'ubtrfs $*' exited $RC without a message on stderr"
		show
		return 1
	fi
}

# out_has DESC PATTERN [FILE]: grep -Ei PATTERN in the last stdout (or FILE).
out_has() {
	if ! grep -Eqi -- "$2" "${3:-$T/out}"; then
		fail "$1: no /$2/ in the output"
		show
	fi
}

err_has() {
	out_has "$1" "$2" "$T/err"
}

save() {
	cp -- "$T/out" "$T/$1.out"
	cp -- "$T/err" "$T/$1.err"
}

same() {
	local desc=$1 a=$2 b=$3
	if ! cmp -s -- "$T/$a.out" "$T/$b.out"; then
		fail "$desc: outputs differ"
		diff -u --label "$a" --label "$b" -- "$T/$a.out" "$T/$b.out" | head -n 40
	fi
}

IMG=$(oracle_image cli.img 256M)
oracle_mkfs -L cli -- "$IMG" >/dev/null

# ---------------------------------------------------------------------------
# Top level.

if expect_ok "--help" --help; then
	out_has "--help" 'usage'
	out_has "--help lists inspect" '(^|[[:space:]])inspect([[:space:]]|$)'
fi
save top-help
expect_ok "-h" -h && save top-h && same "'ubtrfs -h' vs 'ubtrfs --help'" top-help top-h

run
if ((RC == 0)); then
	fail "ubtrfs without arguments exited 0"
	show
elif ! grep -qi usage "$T/out" "$T/err"; then
	fail "ubtrfs without arguments prints no usage"
	show
fi

if expect_ok "--version" --version; then
	out_has "--version" '^ubtrfs .*[0-9]+\.[0-9]+'
fi

# ---------------------------------------------------------------------------
# Groups.

if expect_ok "inspect --help" inspect --help; then
	out_has "inspect --help lists dump-super" 'dump-super'
fi
save inspect-help
expect_ok "inspect-internal --help" inspect-internal --help && save alias-help &&
	same "inspect-internal --help is inspect --help" inspect-help alias-help
expect_ok "help inspect" help inspect && save help-inspect &&
	same "'help inspect' is 'inspect --help'" inspect-help help-inspect
expect_ok "insp --help" insp --help && save insp-help &&
	same "'insp --help' is 'inspect --help'" inspect-help insp-help
# A group without a command: usage, not exit 0 silently.
run inspect
if [[ ! -s $T/out && ! -s $T/err ]]; then
	fail "'ubtrfs inspect' prints nothing"
fi

# ---------------------------------------------------------------------------
# dump-super: prefixes and the alias give the same result.

if expect_ok "inspect dump-super" inspect dump-super "$IMG"; then
	out_has "inspect dump-super" '^superblock: bytenr=65536, device='
	out_has "inspect dump-super" '^label[[:space:]]+cli$'
fi
save full-name
for words in "inspect-internal dump-super" "insp dump-s" \
	"inspect-i dump-super" "inspect-internal dump-s" "ins dump-su"; do
	# shellcheck disable=SC2086
	expect_ok "$words" $words "$IMG" || continue
	save abbrev
	same "'ubtrfs $words IMG' vs 'ubtrfs inspect dump-super IMG'" full-name abbrev
done

# Option forms: combined flags, long options, --opt=value, options after
# the device, "--".
expect_ok "-f -a" inspect dump-super -f -a "$IMG" && save fa
for form in "-fa" "--full --all" "-af" ; do
	# shellcheck disable=SC2086
	expect_ok "$form" inspect dump-super $form "$IMG" || continue
	save form
	same "dump-super $form vs -f -a" fa form
done
expect_ok "IMG -f -a" inspect dump-super "$IMG" -f -a && save form &&
	same "options after the device" fa form
expect_ok "-s 1" inspect dump-super -s 1 "$IMG" && save s1
for form in "-s1" "--super 1" "--super=1"; do
	# shellcheck disable=SC2086
	expect_ok "$form" inspect dump-super $form "$IMG" || continue
	save form
	same "dump-super $form vs -s 1" s1 form
done
out_has "-s 1" '^superblock: bytenr=67108864, device=' "$T/s1.out"
expect_ok "--" inspect dump-super -- "$IMG" && save form &&
	same "dump-super -- IMG" full-name form

# Two devices: both printed.
if expect_ok "two devices" inspect dump-super "$IMG" "$IMG"; then
	n=$(grep -c '^superblock: bytenr=65536' "$T/out" || true)
	((n == 2)) || fail "dump-super IMG IMG printed $n superblocks, expected 2"
fi

# ---------------------------------------------------------------------------
# Help for the command.

if expect_ok "inspect dump-super --help" inspect dump-super --help; then
	out_has "dump-super --help" '--full'
	out_has "dump-super --help" 'usage'
fi
save ds-help
expect_ok "help inspect dump-super" help inspect dump-super && save help-ds &&
	same "'help inspect dump-super' vs 'inspect dump-super --help'" ds-help help-ds
expect_ok "help insp dump-s" help insp dump-s && save help-ds2 &&
	same "'help insp dump-s' vs 'inspect dump-super --help'" ds-help help-ds2
expect_ok "inspect-internal dump-super --help" inspect-internal dump-super --help &&
	save alias-ds-help && same "alias --help" ds-help alias-ds-help
expect_ok "dump-super -h" inspect dump-super -h && save ds-h &&
	same "dump-super -h vs --help" ds-help ds-h
# --help wins even with a device given.
expect_ok "dump-super --help IMG" inspect dump-super --help "$IMG" && save ds-help3 &&
	same "dump-super --help IMG" ds-help ds-help3

# ---------------------------------------------------------------------------
# Errors.

if expect_err "unknown command" frobnicate; then
	err_has "unknown command" 'unknown'
	err_has "unknown command" 'frobnicate'
fi
if expect_err "unknown subcommand" inspect frobnicate "$IMG"; then
	err_has "unknown subcommand" 'unknown'
	err_has "unknown subcommand" 'frobnicate'
fi
expect_err "prefix that is too long" inspect dump-superX "$IMG" || true
expect_err "unknown help topic" help frobnicate || true
expect_err "unknown top-level option" --frobnicate || true

# An ambiguous prefix, if the command set has one: two commands of a group
# sharing a prefix that is neither of their names.
ambiguous_check() {
	local group=$1 listing=$2 a b p
	local -a names
	mapfile -t names < <(sed -n '/^Commands:/,/^$/p' "$listing" |
		awk 'NF && $1 != "Commands:" { print $1 }')
	for a in "${names[@]}"; do
		for b in "${names[@]}"; do
			[[ $a < $b ]] || continue
			p=
			while ((${#p} < ${#a})) && [[ $b == "${a:0:${#p}+1}"* ]]; do
				p=${a:0:${#p}+1}
			done
			[[ -n $p && $p != "$a" && $p != "$b" ]] || continue
			# shellcheck disable=SC2086
			if expect_err "ambiguous '$group $p'" $group "$p" "$IMG"; then
				err_has "ambiguous '$group $p'" 'ambiguous'
			fi
			return 0
		done
	done
	oracle_log "no two commands in '${group:-top}' share a prefix; ambiguity not tested"
}
ambiguous_check "" "$T/top-help.out"
ambiguous_check inspect "$T/inspect-help.out"

if expect_err "missing device" inspect dump-super; then
	[[ -s $T/out ]] && { fail "missing device: output on stdout"; show; }
fi
expect_err "missing device with options" inspect dump-super -f -a || true
expect_err "unknown option" inspect dump-super --frobnicate "$IMG" || true
expect_err "-s without value" inspect dump-super -s || true

if expect_err "nonexistent file" inspect dump-super "$T/no-such-image.img"; then
	((RC == 1)) || fail "nonexistent file: exit $RC, expected 1"
	err_has "nonexistent file names it" 'no-such-image\.img'
	err_has "nonexistent file says why" 'no such file|not found|does not exist|ENOENT'
fi
# One good and one missing device: the good one is printed, exit 1.
if expect_err "good + missing device" inspect dump-super "$IMG" "$T/no-such-image.img"; then
	((RC == 1)) || fail "good + missing device: exit $RC, expected 1"
	out_has "good + missing device prints the good one" '^superblock: bytenr=65536'
fi

for bad in 3 -1 abc 1x 99999999999999999999; do
	if expect_err "-s '$bad'" inspect dump-super -s "$bad" "$IMG"; then
		if [[ -s $T/out ]]; then
			fail "-s '$bad': printed a superblock"
			show
		fi
	fi
done
expect_err "--super=3" inspect dump-super --super=3 "$IMG" || true

# Writing to a full stdout: an error, no crash.
CHECKS=$((CHECKS + 1))
RC=0
timeout 30 "$UBTRFS" inspect dump-super -f -a "$IMG" >/dev/full 2>"$T/err" || RC=$?
if ((RC >= 124)) || grep -qE 'AddressSanitizer|runtime error:' "$T/err"; then
	fail "dump-super >/dev/full: exit $RC"
	head -n 20 "$T/err"
elif ((RC == 0)); then
	oracle_log "note: dump-super >/dev/full exits 0 (write error not reported)"
fi

if ((FAILS)); then
	printf 'FAIL: %d failed checks (of %d runs)\n' "$FAILS" "$CHECKS"
	exit 1
fi
printf 'PASS: %d runs\n' "$CHECKS"
exit 0
