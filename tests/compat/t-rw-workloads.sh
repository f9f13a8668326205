#!/bin/bash
# t-rw-workloads: real work through the EXPERIMENTAL read-write FUSE mount
# (`ubtrfs mount -o rw`), judged by btrfs check and the kernel.
#
# The workload (run as its own bash process, cwd = the tree; every input is
# made once per run under $T, so both runs get the same bytes):
#   src/      an untarred source tree (sorted entries of /usr/include and
#             /usr/share/man, pax format: nanosecond mtimes), then a
#             directory removed, one renamed across directories, files
#             appended to, rewritten (sed -i: temp file + rename over),
#             hard-linked, renamed and deleted;
#   git/repo  git init, commits (fixed GIT_*_DATE), git rm/mv, chmod +x, a
#             branch with commits, checkouts switching the work tree, a
#             --no-ff merge, an annotated tag, repack (one thread) +
#             prune-packed + pack-refs, more loose commits, a path checkout,
#             core.fsync=all; git fsck --full --strict, log, status, ls-files
#             and refs go to results/git.txt;
#   sqlite/   python3's sqlite3: journal_mode=DELETE and WAL, synchronous=FULL,
#             many one-row transactions (inserts, updates, deletes, blobs
#             from 0 to 40 KB), WAL checkpoints, one large transaction,
#             VACUUM; integrity_check, row summary and the sha256 of the
#             iterdump() text go to results/sqlite.txt;
#   make/     a generated C project (a few dozen .c files, a header, a
#             Makefile): make -j2 with cc and ar, run, edit one source,
#             incremental make -j2, run again, then a partial clean;
#   last:     every entry whose mtime the workload set (newer than a stamp
#             taken before it) gets one fixed mtime (touch -h), the rest keep
#             the times tar gave them.
#
# Part 1, cell "fresh" (mkfs.btrfs defaults): the workload on tmpfs
# (reference) and through `ubtrfs mount -o rw` (fusermount3 -u; the daemon
# commits at unmount and must exit 0); then
#   - btrfs check --readonly --check-data-csum is clean;
#   - the kernel's manifest (loop mount, read-only) equals the reference's,
#     leaving out atime, ctime, directory sizes and directory link counts
#     (tmpfs counts them differently) and .git/index (it records inode and
#     device numbers); every other byte must match, git objects and packs,
#     the sqlite databases and the objects, library and binary make built
#     included;
#   - on the kernel mount, git fsck/log/status/ls-files, sqlite
#     integrity_check + iterdump digest (immutable=1) and the built program
#     give what they give on the reference.
#
# Part 2, filesystems the kernel made: subvolume sv with text (compressible)
# and random files, inline files, a sparse file, hard links, a symlink,
# xattrs and an untarred tree; read-only snapshot snap-ro; changes to sv;
# writable snapshot snap-rw; changes to snap-rw; snap-rw2, a writable
# snapshot of snap-rw.  Cells:
#   snap    one device, no compression; ubtrfs mounts -o rw,subvol=sv
#   zstd    one device, kernel mount -o compress=zstd; ubtrfs mounts
#           -o rw,subvolid=<sv's id>
#   raid1   two devices, mkfs -d raid1 -m raid1, kernel mount -o compress=zlib;
#           ubtrfs mounts the top level -o rw with both images and writes
#           into sv/ (and must refuse a create in snap-ro, an append to
#           and a truncate of a file there with EROFS)
# Each: the kernel's record (manifests with inode numbers, ctime and atime of
# every snapshot; dump-tree of every snapshot's tree; the subvolume list);
# sv copied to tmpfs (cp -a) as the reference; the mutation workload
# (overwrites in the middle of compressed extents, aligned and not,
# truncates down and up of compressed files, appends, a file emptied and
# rewritten, holes filled, deletes, renames of files and directories, a
# rename over a file, small (inline, compressed where the kernel compressed)
# files truncated, rewritten, deleted and renamed over, hard links,
# symlinks, xattrs, chmod; each step runs even if one before failed, and the
# log names every failed step) and then the workload above (smaller) in
# sv/w, on the reference and through ubtrfs; then
#   - btrfs check --readonly is clean;
#   - every snapshot's manifest and tree dump are byte-for-byte unchanged,
#     and so is the subvolume list;
#   - the kernel's manifest of sv equals the reference's (as in part 1) and
#     the applications' checks agree;
#   - the kernel then deletes what the workload made and a snapshot, and
#     the filesystem is still clean.
#
# The workloads avoid fallocate, copy_file_range and reflinks (cp is not
# used on the FUSE mount); mv tries RENAME_NOREPLACE and falls back.
# UBTRFS_TEST_QUICK=1: smaller workloads; RW_CELLS="fresh snap zstd raid1"
# (any subset) picks the cells.  Needs root, loop devices, kernel
# btrfs, btrfs-progs, FUSE, python3 (>= 3.9, with sqlite3), git, cc, make, ar,
# tar, attr.
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd git cc make ar tar setfattr getfattr truncate dd sed awk timeout
"$ORACLE_PYTHON" -c 'import sqlite3' >/dev/null 2>&1 ||
	oracle_skip "needs the sqlite3 module of $ORACLE_PYTHON"
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

T0=$SECONDS
QUICK=${UBTRFS_TEST_QUICK:-0}
WL_TIMEOUT=${WL_TIMEOUT:-600}

# ---------------------------------------------------------------------------
# Inputs, made once.

mkdir -p "$T/home" "$T/in"
"$ORACLE_PYTHON" -c 'import random, sys
sys.stdout.buffer.write(random.Random(4711).randbytes(1 << 20))' >"$T/in/rand"

# mk_tar OUT N: a pax tarball of the first N entries (sorted) of the source
# directories.  Parents sort before their children, so every entry's parent
# is in it too.
mk_tar() {
	local out=$1 n=$2 d
	local -a dirs=()
	for d in usr/include usr/share/man; do
		[[ -d /$d ]] && dirs+=("$d")
	done
	((${#dirs[@]})) || oracle_skip "no /usr/include or /usr/share/man for a source tree"
	(cd / && find "${dirs[@]}" \( -type f -size -1024k -o -type d -o -type l \) -print) |
		LC_ALL=C sort | awk -v n="$n" 'NR <= n' >"$out.list"
	tar --format=posix --pax-option=delete=atime,delete=ctime --no-recursion \
		-C / -cf "$out" -T "$out.list" ||
		oracle_fail "cannot make the source tarball $out"
}

if ((QUICK)); then
	MAIN_TREE=3000 MAIN_SQL=300 MAIN_MAKE=12 MAIN_GIT=20
	K_TREE=600 K_SQL=120 K_MAKE=8 K_GIT=10
else
	MAIN_TREE=20000 MAIN_SQL=1000 MAIN_MAKE=36 MAIN_GIT=60
	K_TREE=1500 K_SQL=300 K_MAKE=12 K_GIT=20
fi
mk_tar "$T/in/main.tar" "$MAIN_TREE"
mk_tar "$T/in/k.tar" "$K_TREE"
mk_tar "$T/in/seed.tar" 800
oracle_log "source trees: $(wc -l <"$T/in/main.tar.list") entries ($(($(stat -c %s "$T/in/main.tar") / 1048576)) MiB)," \
	"$(wc -l <"$T/in/k.tar.list") for the kernel cells"

# The sqlite part: "write DIR COUNT SEED" runs the transactions and prints a
# summary per database; "verify DIR" prints the same summary of every
# database in DIR, opened immutable (works on read-only mounts).
cat >"$T/in/wl_sqlite.py" <<'EOF'
import hashlib, os, random, sqlite3, sys, urllib.parse


def summary(con, name):
    ic = ",".join(r[0] for r in con.execute("PRAGMA integrity_check"))
    n, size, total = con.execute(
        "SELECT count(*), coalesce(sum(length(v)), 0), coalesce(sum(n), 0) FROM kv").fetchone()
    h = hashlib.sha256()
    for line in con.iterdump():
        h.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return "%s integrity=%s rows=%d bytes=%d sum=%d dump=%s" % (
        name, ic, n, size, total, h.hexdigest())


def write(top, count, seed):
    os.mkdir(top)
    for mode in ("DELETE", "WAL"):
        rng = random.Random("%d-%s" % (seed, mode))
        path = os.path.join(top, mode.lower() + ".db")
        con = sqlite3.connect(path, isolation_level=None)
        got = con.execute("PRAGMA journal_mode=" + mode).fetchone()[0]
        if got.upper() != mode:
            sys.exit("journal_mode=%s gave %s" % (mode, got))
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE kv(id INTEGER PRIMARY KEY, k TEXT UNIQUE NOT NULL,"
                    " v BLOB, n INTEGER)")
        con.execute("CREATE INDEX kv_n ON kv(n)")
        ids, nextk = [], 0

        def blob():
            r = rng.random()
            size = (rng.randrange(0, 300) if r < 0.6 else
                    rng.randrange(300, 5000) if r < 0.95 else rng.randrange(5000, 40000))
            if rng.random() < 0.5:
                return rng.randbytes(size)
            return ((b"row %d " % size) * (size // 6 + 1))[:size]

        def insert():
            nonlocal nextk
            cur = con.execute("INSERT INTO kv(k, v, n) VALUES (?, ?, ?)",
                              ("key%07d" % nextk, blob(), rng.randrange(1000)))
            ids.append(cur.lastrowid)
            nextk += 1

        for i in range(count):
            con.execute("BEGIN")
            r = rng.random()
            if r < 0.6 or len(ids) < 10:
                insert()
            elif r < 0.85:
                con.execute("UPDATE kv SET v = ?, n = n + 1 WHERE id = ?",
                            (blob(), rng.choice(ids)))
            else:
                j = rng.randrange(len(ids))
                con.execute("DELETE FROM kv WHERE id = ?", (ids[j],))
                ids[j] = ids[-1]
                ids.pop()
            con.execute("COMMIT")
            if mode == "WAL" and i % 250 == 249:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("BEGIN")
        for _ in range(count // 4):
            insert()
        con.execute("DELETE FROM kv WHERE n % 3 = 0")
        con.execute("COMMIT")
        if mode == "DELETE":
            con.execute("VACUUM")
        print(summary(con, os.path.basename(path)))
        con.close()
        for sfx in ("-journal", "-wal", "-shm"):
            if os.path.exists(path + sfx):
                sys.exit("%s%s is left after close" % (path, sfx))


def verify(top):
    for name in sorted(os.listdir(top)):
        path = os.path.join(top, name)
        uri = "file:%s?immutable=1" % urllib.parse.quote(os.path.abspath(path))
        con = sqlite3.connect(uri, uri=True)
        print(summary(con, name))
        con.close()


if sys.argv[1] == "write":
    write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
else:
    verify(sys.argv[2])
EOF

# ---------------------------------------------------------------------------
# The workload.  Runs as `bash -euo pipefail` (set -e would be ignored in a
# function called under ||); everything it needs is exported.

export T FIXED_TIME='2020-05-06 07:08:09.5' ORACLE_PYTHON
export WL_TAR WL_SQL_N WL_MAKE_N WL_GIT_N WL_STAMP

# gen_lines SEED N: N deterministic text lines.
gen_lines() {
	awk -v s="$1" -v n="$2" 'BEGIN {
		for (i = 1; i <= n; i++)
			printf "line %d of %d: value %d\n", i, s, (i * 7919 + s * 104729) % 1000003
	}'
}

wl_tree() {
	mkdir src
	tar -xf "$WL_TAR" -C src
	local -a dirs files
	local n victim moved f i
	mapfile -t dirs < <(cd src && find . -mindepth 3 -type d | LC_ALL=C sort)
	n=${#dirs[@]}
	((n >= 4)) || { echo "wl_tree: only $n directories"; return 1; }
	# moved sorts before victim, so it is not inside victim (children sort
	# after their parent); victim may be inside moved: it goes first.
	victim=${dirs[n * 3 / 4]}
	moved=${dirs[n / 2]}
	rm -rf "src/$victim"
	mv "src/$moved" "src/moved-dir"
	mapfile -t files < <(cd src && find . -type f | LC_ALL=C sort)
	n=${#files[@]}
	for ((i = 0; i < n; i += 97)); do
		f=src/${files[i]}
		case $((i / 97 % 5)) in
		0) printf 'appended %d\n' "$i" >>"$f" ;;
		1) sed -i -e '1s/^/rewritten: /' "$f" ;;
		2) ln "$f" "$f.hardlink" ;;
		3) mv "$f" "$f.renamed" ;;
		4) rm "$f" ;;
		esac
	done
}

# gcommit N MSG: commit with the N-th fixed date.
gdate() {
	export GIT_AUTHOR_DATE="@$((1600000000 + $1 * 3600)) +0000"
	export GIT_COMMITTER_DATE=$GIT_AUTHOR_DATE
}
gcommit() {
	gdate "$1"
	git add -A
	git commit -q -m "$2"
}

wl_git() {
	local n=$WL_GIT_N i
	export HOME=$T/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
	export GIT_AUTHOR_NAME='ubtrfs test' GIT_AUTHOR_EMAIL='test@ubtrfs.invalid'
	export GIT_COMMITTER_NAME='ubtrfs test' GIT_COMMITTER_EMAIL='test@ubtrfs.invalid'
	mkdir git
	git init -q -b main git/repo
	(
		cd git/repo
		git config gc.auto 0
		git config core.fsync all
		mkdir lib docs data
		for ((i = 1; i <= n; i++)); do
			gen_lines "$i" $((20 + i % 80)) >"lib/mod$i.c"
		done
		gen_lines 1000 200 >docs/README
		head -c 65536 "$T/in/rand" >data/blob.bin
		gcommit 1 "initial"
		for ((i = 1; i <= n; i += 3)); do
			sed -i 's/value/VALUE/' "lib/mod$i.c"
		done
		git rm -q -f lib/mod2.c lib/mod4.c
		git mv lib/mod5.c docs/mod5.c
		chmod +x lib/mod6.c
		gcommit 2 "second"
		git checkout -q -b feature
		for ((i = 7; i <= n; i += 2)); do
			printf 'feature %d\n' "$i" >>"lib/mod$i.c"
		done
		gen_lines 2000 500 >lib/feature.c
		gcommit 3 "feature one"
		head -c 100000 "$T/in/rand" | tail -c 50000 >data/blob.bin
		gcommit 4 "feature two"
		git checkout -q main
		gen_lines 3000 50 >docs/CHANGES
		for ((i = 8; i <= n; i += 4)); do
			printf 'main %d\n' "$i" >>"lib/mod$i.c"
		done
		gcommit 5 "main work"
		gdate 6
		git merge -q --no-ff -m "merge feature" feature
		git tag -a v1 -m "release 1"
		git -c pack.threads=1 repack -a -d -q
		git prune-packed
		git pack-refs --all
		printf 'after the pack\n' >>docs/README
		gcommit 7 "after pack"
		git checkout -q -b topic HEAD~2
		gen_lines 4000 300 >lib/topic.c
		gcommit 8 "topic"
		git checkout -q main
		git checkout -q topic -- lib/topic.c
		gcommit 9 "topic file on main"
	)
	git_report git/repo >results/git.txt
}

# git_report REPO: what git says about REPO (read-only).
git_report() {
	local g=(git -C "$1" --no-optional-locks)
	echo "== fsck"
	"${g[@]}" fsck --full --strict 2>&1 || echo "fsck exit $?"
	echo "== log"
	"${g[@]}" log --all --topo-order --format='%H %P %at %ct %an %s' 2>&1 || echo "log exit $?"
	echo "== refs"
	"${g[@]}" for-each-ref 2>&1 || echo "for-each-ref exit $?"
	echo "== HEAD $("${g[@]}" symbolic-ref HEAD 2>&1)"
	echo "== status"
	"${g[@]}" status --porcelain=v1 --untracked-files=all 2>&1 || echo "status exit $?"
	echo "== ls-files"
	"${g[@]}" ls-files -s 2>&1 || echo "ls-files exit $?"
}

wl_sqlite() {
	"$ORACLE_PYTHON" "$T/in/wl_sqlite.py" write sqlite "$WL_SQL_N" 42 >results/sqlite.txt
}

wl_make() {
	local d=make n=$WL_MAKE_N i k name
	mkdir -p $d/src $d/include
	{
		printf '#ifndef PROJ_H\n#define PROJ_H\n'
		for ((i = 1; i <= n; i++)); do
			printf 'int f%02d(int x);\n' "$i"
		done
		printf '#endif\n'
	} >$d/include/proj.h
	for ((i = 1; i <= n; i++)); do
		name=$(printf 'f%02d' "$i")
		{
			printf '#include "proj.h"\n\nstatic const unsigned tab[] = {'
			for ((k = 0; k < 16 + i; k++)); do
				printf ' %d,' $(((k * 7919 + i * 104729) % 1009))
			done
			printf ' };\n\nint %s(int x)\n{\n\tunsigned s = %d;\n\n' "$name" "$i"
			printf '\tfor (unsigned k = 0; k < sizeof(tab) / sizeof(tab[0]); k++)\n'
			printf '\t\ts = s * 31u + (tab[k] ^ (unsigned)(x + (int)k));\n'
			printf '\treturn (int)(s & 0x7fffffff);\n}\n'
		} >"$d/src/$name.c"
	done
	{
		printf '#include <stdio.h>\n#include "proj.h"\n\nint main(void)\n{\n'
		for ((i = 1; i <= n; i++)); do
			printf '\tprintf("f%02d %%d\\n", f%02d(%d));\n' "$i" "$i" "$i"
		done
		printf '\treturn 0;\n}\n'
	} >$d/src/main.c
	# shellcheck disable=SC2016  # make's $(...), not the shell's
	{
		printf 'CC = cc\nCFLAGS = -O2 -Wall -Iinclude\n'
		printf 'SRCS := $(sort $(wildcard src/f*.c))\n'
		printf 'OBJS := $(patsubst src/%%.c,obj/%%.o,$(SRCS))\n\n'
		printf 'all: bin/prog\n\n'
		printf 'obj/%%.o: src/%%.c include/proj.h | obj\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n'
		printf 'lib/libproj.a: $(OBJS) | lib\n\trm -f $@\n\tar rcsD $@ $^\n\n'
		printf 'bin/prog: obj/main.o lib/libproj.a | bin\n\t$(CC) -o $@ obj/main.o -Llib -lproj\n\n'
		printf 'obj lib bin:\n\tmkdir -p $@\n\n'
		printf 'clean-part:\n\trm -f obj/f0*.o obj/main.o\n\n'
		printf 'clean:\n\trm -rf obj lib bin\n\n'
		printf '.PHONY: all clean clean-part\n'
	} >$d/Makefile
	make -s -j2 -C $d
	$d/bin/prog >results/prog1.txt
	sed -i 's/unsigned s = 7;/unsigned s = 77;/' $d/src/f07.c
	make -s -j2 -C $d
	$d/bin/prog >results/prog2.txt
	make -s -C $d clean-part
}

# workload_main: the whole workload in the current directory.
workload_main() {
	umask 022
	export LC_ALL=C TZ=UTC
	mkdir results
	wl_tree
	wl_git
	wl_sqlite
	wl_make
	# Times last: what the workload touched gets one fixed mtime.
	find . -newer "$WL_STAMP" -exec touch -h -d "$FIXED_TIME" {} +
}

# wl_mutate: changes to the content populate.py made (part 2), then the
# workload in w/.  Every step runs even if one fails (the log names each
# failed step); the workload fails at the end if one did.
wl_mutate() {
	umask 022
	export LC_ALL=C TZ=UTC
	local r=$T/in/rand fails=0 last
	step() {
		"$@" || {
			echo "STEP FAILED (exit $?): $*" >&2
			fails=$((fails + 1))
		}
	}
	step dd if="$r" of=data/text-big bs=1 skip=77 seek=1000003 count=5000 conv=notrunc status=none
	step dd if="$r" of=data/text-big bs=4096 skip=3 seek=100 count=10 conv=notrunc status=none
	step truncate -s 1500000 data/text-big
	step truncate -s 1700001 data/text-big
	step dd if="$r" of=data/text-300k bs=1000 skip=5 seek=1 count=3 conv=notrunc status=none
	step dd if="$r" of=data/text-300k bs=1 skip=9 seek=300030 count=29 conv=notrunc status=none
	step truncate -s 3000 data/text-70k
	step truncate -s 0 data/mixed-2m
	step dd if="$r" of=data/mixed-2m bs=65536 count=3 status=none
	step dd if=/dev/zero of=data/rand-1m bs=1024 seek=300 count=77 conv=notrunc status=none
	step dd if="$r" of=data/sparse bs=4096 skip=9 seek=50 count=2 conv=notrunc status=none
	step truncate -s 0 data/small-3
	step dd if="$r" of=data/small-4 bs=1 skip=3 seek=1 count=1 conv=notrunc status=none
	step truncate -s 1 data/small-8
	step rm data/hl-a
	step rm -r dirs/d03
	step mv dirs/d04 dirs/d05/d04-moved
	step mv data/small-5 dirs/d06/renamed
	step mv -f data/small-6 data/small-7
	step mv dirs/d08/f007 dirs/d08/f007.renamed
	step setfattr -n user.new -v fresh data/text-big
	step setfattr -x user.tag data/tagged
	step chmod 0600 data/rand-1m
	step ln data/text-300k dirs/d07/link-to-300k
	step ln -s ../../data/text-big dirs/d07/sym
	last=$(cd tree && find . -mindepth 2 -type d | LC_ALL=C sort | tail -n 1)
	[[ -n $last ]] || { echo "wl_mutate: no directory in tree/" >&2; return 1; }
	step rm -rf "tree/$last"
	step mkdir w
	step bash -euo pipefail -c 'cd w && workload_main'
	find . -newer "$WL_STAMP" -exec touch -h -d "$FIXED_TIME" {} +
	((fails == 0)) || { echo "$fails step(s) failed" >&2; return 1; }
}

export -f gen_lines wl_tree gdate gcommit wl_git git_report wl_sqlite wl_make
export -f workload_main wl_mutate

# run_workload WHAT DIR LOG: run WHAT (workload_main or wl_mutate) in DIR.
run_workload() {
	local what=$1 dir=$2 log=$3
	WL_STAMP=$T/stamp.$RANDOM$RANDOM
	: >"$WL_STAMP"
	sleep 0.1
	# shellcheck disable=SC2016  # expanded by the inner bash
	timeout "$WL_TIMEOUT" bash -euo pipefail -c 'cd "$1" && "$2"' _ "$dir" "$what" >"$log" 2>&1
}

# verify_apps DIR OUT: what git, sqlite and the built program say about the
# workload in DIR (read-only).
verify_apps() {
	local d=$1 out=$2
	{
		(
			export HOME=$T/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
			git_report "$d/git/repo"
		)
		echo "== sqlite"
		"$ORACLE_PYTHON" "$T/in/wl_sqlite.py" verify "$d/sqlite" 2>&1 || echo "sqlite exit $?"
		echo "== prog"
		"$d/make/bin/prog" 2>&1 || echo "prog exit $?"
	} >"$out"
}

# The view compared with tmpfs: no atime, ctime, directory size, directory
# link count, git index.
VIEW_OPTS=(--no-atime --no-ctime --no-dir-size --exclude 'git/repo/.git/index'
	--exclude 'w/git/repo/.git/index')
view() {
	local dir=$1 out=$2
	oracle_manifest "$dir" "${VIEW_OPTS[@]}" -o "$out.raw" || return 1
	sed -E -e '/^[^ ]+ d /s/ nlink=[0-9]+//' "$out.raw" >"$out"
}

# ref_tmpfs DIR SIZE: a tmpfs whose inode 2 is used up (manifest.py takes a
# directory numbered 2 for a btrfs subvolume placeholder).
ref_tmpfs() {
	oracle_tmpfs "$1" "$2"
	: >"$1/.pad"
	rm -f -- "$1/.pad"
}

# compare WHAT A B: manifest diff; a failure shows the first lines.
compare() {
	local what=$1 a=$2 b=$3
	if ! oracle_manifest_diff "$a" "$b" >"$b.diff" 2>&1; then
		ro_fail "$what ($(grep -c '^[-+] ' "$b.diff" || true) lines)"
		ro_show "$b.diff" 30
		return 1
	fi
}

same_file() {
	local what=$1 a=$2 b=$3
	if ! diff -u "$a" "$b" >"$b.diff" 2>&1; then
		ro_fail "$what"
		ro_show "$b.diff" 30
		return 1
	fi
}

# fuse_workload NAME OPTS WHAT SUBDIR DEV...: mount rw, run WHAT in
# MNT/SUBDIR, unmount (the daemon must exit 0).  Returns 1 if the mount did
# not come up; a failed workload is a failure, not fatal.
fuse_workload() {
	local name=$1 opts=$2 what=$3 sub=$4 mnt log t
	shift 4
	mnt=$T/$name.rw
	log=$T/$name.rw.log
	if ! ro_fuse_up "$mnt" "$log" "$opts" "$@"; then
		ro_fail "$name: ubtrfs mount -o $opts did not come up"
		ro_show "$log"
		return 1
	fi
	t=$SECONDS
	if ! run_workload "$what" "$mnt${sub:+/$sub}" "$T/$name.rw.wl.log"; then
		ro_fail "$name: the workload ($what) failed on the rw FUSE mount"
		ro_show "$T/$name.rw.wl.log" 40
	fi
	oracle_log "$name: workload through ubtrfs: $((SECONDS - t)) s"
	if [[ $sub == sv ]]; then
		# The top-level mount sees the read-only snapshot: EROFS.
		if (: >"$mnt/snap-ro/probe") 2>"$T/$name.probe.err"; then
			ro_fail "$name: creating a file in the read-only snapshot through ubtrfs succeeded"
		elif ! grep -q 'Read-only file system' "$T/$name.probe.err"; then
			ro_fail "$name: creating a file in the read-only snapshot: $(cat "$T/$name.probe.err") (want EROFS)"
		fi
		# Its files' data too (an append, a truncate): EROFS, and the
		# snapshot's manifest check below finds them unchanged.
		local f op rc
		f=$(find "$mnt/snap-ro" -type f -size +1 | LC_ALL=C sort | head -n 1)
		for op in append truncate; do
			rc=0
			case $op in
			append) (printf x >>"$f") 2>"$T/$name.probe.err" || rc=$? ;;
			truncate) truncate -s 1 -- "$f" 2>"$T/$name.probe.err" || rc=$? ;;
			esac
			if ((rc == 0)); then
				ro_fail "$name: $op of ${f#"$mnt/"} in the read-only snapshot through ubtrfs succeeded"
			elif ! grep -q 'Read-only file system' "$T/$name.probe.err"; then
				ro_fail "$name: $op in the read-only snapshot: $(cat "$T/$name.probe.err") (want EROFS)"
			fi
		done
	fi
	t=$SECONDS
	ro_fuse_down "$name rw" "$mnt" "$log"
	oracle_log "$name: unmount (commit): $((SECONDS - t)) s"
}

# lap WHAT: add "WHAT N s" (time since the last lap) to LAPS.
lap() {
	LAPS+=" $1 $((SECONDS - LAP0)) s,"
	LAP0=$SECONDS
}

# ---------------------------------------------------------------------------
# Part 1: a fresh filesystem.

main_cell() {
	local name=fresh img ref t0=$SECONDS
	LAPS='' LAP0=$SECONDS
	RO_CELLS=$((RO_CELLS + 1))
	WL_TAR=$T/in/main.tar WL_SQL_N=$MAIN_SQL WL_MAKE_N=$MAIN_MAKE WL_GIT_N=$MAIN_GIT
	img=$(oracle_image "$name.img" 4G)
	oracle_mkfs -- "$img"

	ref=$T/$name.ref
	ref_tmpfs "$ref" 2G
	run_workload workload_main "$ref" "$T/$name.ref.log" ||
		{ ro_show "$T/$name.ref.log" 30; oracle_fail "$name: the workload failed on tmpfs"; }
	view "$ref" "$T/$name.ref.v" || oracle_fail "$name: manifest of the reference failed"
	verify_apps "$ref" "$T/$name.ref.apps"
	oracle_kumount "$ref"
	rmdir -- "$ref"
	lap reference

	fuse_workload "$name" rw workload_main "" "$img" || return 0
	lap ubtrfs

	local ck rc=0
	ck=$(btrfs check --readonly --check-data-csum "$img" 2>&1) || rc=$?
	if ((rc)) || ! grep -q 'no error found' <<<"$ck"; then
		ro_fail "$name: btrfs check --readonly --check-data-csum after the rw session (exit $rc)"
		printf '%s\n' "$ck" | tail -n 30 | sed 's/^/    /'
	fi
	lap check

	oracle_kmount -o ro "$T/$name.k" "$img" ||
		{ ro_fail "$name: the kernel does not mount the written image"; return 0; }
	view "$T/$name.k" "$T/$name.k.v" || ro_fail "$name: manifest of the kernel mount failed"
	verify_apps "$T/$name.k" "$T/$name.k.apps"
	oracle_kumount "$T/$name.k"
	rmdir -- "$T/$name.k"
	compare "$name: the kernel's tree differs from the tmpfs reference (- tmpfs, + kernel)" \
		"$T/$name.ref.v" "$T/$name.k.v" || true
	same_file "$name: git/sqlite/the program say other things on the kernel mount than on tmpfs" \
		"$T/$name.ref.apps" "$T/$name.k.apps" || true
	rm -f -- "$img"
	lap kernel
	oracle_log "$name: done in $((SECONDS - t0)) s ($(wc -l <"$T/$name.k.v") entries):${LAPS%,}"
}

# ---------------------------------------------------------------------------
# Part 2: filesystems the kernel made, with snapshots.

# populate.py DIR SEED PHASE: fill (the first content of sv), change (sv
# after snap-ro), touch (snap-rw).
cat >"$T/in/populate.py" <<'EOF'
import os, random, sys

top, seed, phase = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random("%d-%s" % (seed, phase))
WORDS = ("btrfs extent compress subvolume snapshot inode tree leaf node "
         "checksum zstd zlib write commit generation reference").split()


def text(n):
    out, size = [], 0
    while size < n:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12)))
        line += " %d\n" % rng.randrange(100000)
        out.append(line)
        size += len(line)
    return "".join(out).encode()[:n]


def write(rel, data, mode=0o644):
    path = os.path.join(top, rel)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    return path


def j(*p):
    return os.path.join(top, *p)


if phase == "fill":
    os.mkdir(j("data"))
    write("data/text-big", text(2500000))
    write("data/text-300k", text(300000))
    write("data/text-70k", text(70000))
    write("data/rand-1m", rng.randbytes(1048576))
    mixed = b"".join(rng.randbytes(65536) if i % 2 else text(65536) for i in range(32))
    write("data/mixed-2m", mixed)
    for i in range(1, 9):
        write("data/small-%d" % i, text(rng.choice((1, 100, 1000, 2000, 3000))))
    with open(j("data/sparse"), "wb") as f:
        f.write(text(8192))
        f.seek(1 << 20)
        f.write(rng.randbytes(8192))
        f.truncate(2 << 20)
    write("data/hl-a", text(20000))
    os.link(j("data/hl-a"), j("data/hl-b"))
    write("data/tagged", text(5000))
    os.setxattr(j("data/tagged"), "user.tag", b"tag value")
    os.setxattr(j("data/tagged"), "user.keep", rng.randbytes(100))
    os.symlink("text-big", j("data/sym"))
    os.mkdir(j("dirs"))
    for d in range(10):
        os.mkdir(j("dirs", "d%02d" % d))
        for i in range(20):
            n = rng.choice((0, 10, 3000, 5000, 40000, 200000))
            data = text(n) if rng.random() < 0.6 else rng.randbytes(n)
            write("dirs/d%02d/f%03d" % (d, i), data)
elif phase == "change":
    with open(j("data/text-big"), "r+b") as f:
        f.seek(500000)
        f.write(text(100000))
    os.unlink(j("dirs/d00/f000"))
    write("data/after-snap-ro", text(30000))
    os.setxattr(j("data/text-300k"), "user.changed", b"1")
else:
    with open(j("data/text-300k"), "ab") as f:
        f.write(text(10000))
    write("data/only-in-snap-rw", text(7000))
    os.unlink(j("dirs/d01/f001"))
EOF

populate() {
	"$ORACLE_PYTHON" "$T/in/populate.py" "$1" 5 "$2"
}

# kbuild NAME KMOUNT_OPTS IMG...: the kernel builds sv and the snapshots.
kbuild() {
	local name=$1 kopts=$2 mnt=$T/$1.kb
	shift 2
	local -a mo=()
	[[ -n $kopts ]] && mo=(-o "$kopts")
	oracle_kmount "${mo[@]}" "$mnt" "$@" || return 1
	{
		btrfs subvolume create "$mnt/sv" >/dev/null &&
			populate "$mnt/sv" fill &&
			mkdir "$mnt/sv/tree" && tar -xf "$T/in/seed.tar" -C "$mnt/sv/tree" &&
			sync && btrfs subvolume snapshot -r "$mnt/sv" "$mnt/snap-ro" >/dev/null &&
			populate "$mnt/sv" change && sync &&
			btrfs subvolume snapshot "$mnt/sv" "$mnt/snap-rw" >/dev/null &&
			populate "$mnt/snap-rw" touch && sync &&
			btrfs subvolume snapshot "$mnt/snap-rw" "$mnt/snap-rw2" >/dev/null &&
			sync
	} || {
		oracle_kumount "$mnt"
		return 1
	}
	oracle_kumount "$mnt"
	rmdir -- "$mnt"
}

# off_open IMG...: OFF_DEV names the filesystem for btrfs-progs: the image,
# or for several images the first of their loop devices (attached and
# scanned here, detached by off_close).  The images get loop devices only
# while nothing else writes them, and once for several commands (each
# detach can race another process's device scan).
off_open() {
	local d
	OFF_LOOPS=()
	OFF_DEV=$1
	if (($# > 1)); then
		for d in "$@"; do
			OFF_LOOPS+=("$(oracle_loop "$d")")
		done
		btrfs device scan "${OFF_LOOPS[@]}" >/dev/null 2>&1 || true
		OFF_DEV=${OFF_LOOPS[0]}
	fi
}

off_close() {
	local d
	for d in "${OFF_LOOPS[@]}"; do
		oracle_unloop "$d"
	done
	OFF_LOOPS=()
}

# off_check WHAT: btrfs check --readonly finds nothing.
off_check() {
	local out rc=0
	out=$(btrfs check --readonly "$OFF_DEV" 2>&1) || rc=$?
	if ((rc)) || ! grep -q 'no error found' <<<"$out"; then
		ro_fail "$1: btrfs check --readonly (exit $rc)"
		printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /'
		return 1
	fi
}

# off_dumps PRE: PRE.S.dump, dump-tree of every snapshot S's tree (without
# the superblock's summary lines, where bytes used changes).
off_dumps() {
	local pre=$1 s
	for s in snap-ro snap-rw snap-rw2; do
		if ! btrfs inspect-internal dump-tree -t "${SVID[$s]}" "$OFF_DEV" \
			>"$pre.$s.dump.raw" 2>"$pre.$s.dump.err"; then
			ro_show "$pre.$s.dump.err"
			return 1
		fi
		sed -E '/^(total bytes|bytes used|uuid) /d' "$pre.$s.dump.raw" >"$pre.$s.dump"
		rm -f -- "$pre.$s.dump.raw"
	done
}

declare -A SVID
OFF_LOOPS=()

# krecord PRE IMG...: kernel read-only mount of the top level: PRE.S.m (full
# manifest: inode numbers, atime and ctime included) for every snapshot S,
# PRE.list (ids and paths of the subvolumes; sets SVID).  With KREC_REF=DIR,
# sv is copied to DIR (cp -a); with KREC_SV=PREFIX, PREFIX.v (view of sv)
# and PREFIX.apps (verify_apps of sv/w).
krecord() {
	local pre=$1 mnt=$T/krec s rc=0
	shift
	oracle_kmount -o ro,subvolid=5 "$mnt" "$@" || return 1
	for s in snap-ro snap-rw snap-rw2; do
		oracle_manifest "$mnt/$s" --inodes -o "$pre.$s.m" || rc=1
	done
	btrfs subvolume list "$mnt" | awk '{ print $2, $NF }' >"$pre.list" || rc=1
	if [[ -n ${KREC_REF:-} ]]; then
		cp -a -- "$mnt/sv/." "$KREC_REF/" || rc=1
	fi
	if [[ -n ${KREC_SV:-} ]]; then
		view "$mnt/sv" "$KREC_SV.v" || rc=1
		verify_apps "$mnt/sv/w" "$KREC_SV.apps"
	fi
	oracle_kumount "$mnt"
	((rc == 0)) || return 1
	for s in snap-ro snap-rw snap-rw2 sv; do
		SVID[$s]=$(awk -v p="$s" '$2 == p { print $1 }' "$pre.list")
		[[ -n ${SVID[$s]} ]] || { oracle_log "no subvolume $s"; return 1; }
	done
}

# kcell NAME MKFS_OPTS KMOUNT_OPTS MODE NDEV: MODE subvol, subvolid or top.
kcell() {
	local name=$1 mkfs_line=$2 kopts=$3 mode=$4 ndev=$5 i t0=$SECONDS
	LAPS='' LAP0=$SECONDS
	local -a imgs=() mkfs_args
	RO_CELLS=$((RO_CELLS + 1))
	WL_TAR=$T/in/k.tar WL_SQL_N=$K_SQL WL_MAKE_N=$K_MAKE WL_GIT_N=$K_GIT
	for ((i = 1; i <= ndev; i++)); do
		imgs+=("$(oracle_image "$name.$i.img" 1G)")
	done
	# shellcheck disable=SC2206  # word splitting of the option string
	mkfs_args=($mkfs_line)
	oracle_mkfs "${mkfs_args[@]}" -- "${imgs[@]}"
	kbuild "$name" "$kopts" "${imgs[@]}" ||
		{ ro_fail "$name: the kernel could not build the filesystem"; return 0; }

	# The kernel's record; sv copied to tmpfs for the reference.
	local ref=$T/$name.ref B=$T/$name.before A=$T/$name.after nc ok=1
	ref_tmpfs "$ref" 1G
	lap build
	KREC_REF=$ref krecord "$B" "${imgs[@]}" ||
		{ ro_fail "$name: recording the kernel's view failed"; return 0; }
	off_open "${imgs[@]}"
	off_check "$name (as the kernel made it)" || ok=0
	off_dumps "$B" || ok=0
	# Compressed extents in sv (shared with the snapshots).
	nc=$(btrfs inspect-internal dump-tree -t "${SVID[sv]}" "$OFF_DEV" 2>/dev/null |
		grep -c 'extent compression [1-3]' || true)
	off_close
	((ok)) || { ro_fail "$name: the filesystem the kernel made does not check"; return 0; }
	if [[ $kopts == *compress* ]] && ((nc < 10)); then
		ro_fail "$name: only $nc compressed extents in sv: the cell would test less than it says"
	fi
	oracle_log "$name: sv=${SVID[sv]} snap-ro=${SVID[snap-ro]} snap-rw=${SVID[snap-rw]}" \
		"snap-rw2=${SVID[snap-rw2]}; sv has $(find "$ref" | wc -l) entries, $nc compressed extents"

	lap record
	run_workload wl_mutate "$ref" "$T/$name.ref.log" ||
		{ ro_show "$T/$name.ref.log" 30; oracle_fail "$name: the workload failed on tmpfs"; }
	view "$ref" "$T/$name.ref.v" || oracle_fail "$name: manifest of the reference failed"
	verify_apps "$ref/w" "$T/$name.ref.apps"
	oracle_kumount "$ref"
	rmdir -- "$ref"

	lap reference
	# Through ubtrfs.
	local opts sub=
	case $mode in
	subvol) opts=rw,subvol=sv ;;
	subvolid) opts=rw,subvolid=${SVID[sv]} ;;
	top) opts=rw sub=sv ;;
	esac
	fuse_workload "$name" "$opts" wl_mutate "$sub" "${imgs[@]}" || return 0
	lap ubtrfs

	off_open "${imgs[@]}"
	off_check "$name (after the ubtrfs rw session)" || true
	off_dumps "$A" || ro_fail "$name: dump-tree after the rw session failed"
	off_close
	KREC_SV=$A krecord "$A" "${imgs[@]}" ||
		{ ro_fail "$name: recording the kernel's view after the rw session failed"; return 0; }
	local s
	for s in snap-ro snap-rw snap-rw2; do
		compare "$name: snapshot $s changed (- before, + after)" "$B.$s.m" "$A.$s.m" || true
		same_file "$name: the tree of snapshot $s changed (dump-tree)" "$B.$s.dump" "$A.$s.dump" ||
			true
	done
	same_file "$name: the subvolume list changed" "$B.list" "$A.list" || true
	compare "$name: the kernel's sv differs from the tmpfs reference (- tmpfs, + kernel)" \
		"$T/$name.ref.v" "$A.v" || true
	same_file "$name: git/sqlite/the program say other things on the kernel mount than on tmpfs" \
		"$T/$name.ref.apps" "$A.apps" || true

	lap checks
	# The kernel frees what ubtrfs wrote, and a snapshot; commit=1: the
	# cleaner (woken at commits) removes the snapshot at once.
	local mnt=$T/$name.kd
	if oracle_kmount -o commit=1 "$mnt" "${imgs[@]}"; then
		if ! { rm -rf -- "$mnt/sv/w" "$mnt/sv/data" &&
			btrfs subvolume delete "$mnt/snap-rw" >/dev/null &&
			sync && btrfs subvolume sync "$mnt" >/dev/null; } 2>"$T/$name.kd.err"; then
			ro_fail "$name: the kernel failed to delete files ubtrfs wrote or snap-rw"
			ro_show "$T/$name.kd.err"
		fi
		oracle_kumount "$mnt"
		off_open "${imgs[@]}"
		off_check "$name (after the kernel deleted what ubtrfs wrote)" || true
		off_close
	else
		ro_fail "$name: the kernel does not mount the filesystem read-write after ubtrfs wrote"
	fi
	rm -f -- "${imgs[@]}"
	lap "kernel deletes"
	oracle_log "$name: done in $((SECONDS - t0)) s ($(wc -l <"$A.v") entries in sv):${LAPS%,}"
}

# RW_CELLS (space-separated names) runs a subset.
cell() {
	if [[ " ${RW_CELLS:-fresh snap zstd raid1} " == *" $1 "* ]]; then
		"${@:2}"
	fi
}

cell fresh main_cell
#             name   mkfs.btrfs options   kernel mount   ubtrfs mounts  devices
cell snap  kcell snap   ""                   ""             subvol         1
cell zstd  kcell zstd   ""                   compress=zstd  subvolid       1
cell raid1 kcell raid1  "-d raid1 -m raid1"  compress=zlib  top            2

oracle_log "total $((SECONDS - T0)) s"
ro_finish
