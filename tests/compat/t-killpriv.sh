#!/bin/bash
# t-killpriv: Linux's privilege-clearing rules through the read-write FUSE
# mount, against ext4.
#
# A deterministic matrix (the Python below) runs on ext4 on a loop device
# (the kernel's own VFS + ext4: the reference) and on `ubtrfs mount -o
# rw,allow_other` of an image made by `ubtrfs mkfs`.  Each case gets a fresh
# 4-byte file with an initial mode (4755, 2755, 2745 with the writer in the
# group and out of it, 6775, 0755 and 4755 with a security.capability, 4757
# and 2747 owned by root and written by another user through o+w), runs one
# operation (or a short sequence) as root or as user nobody (setresuid in a
# forked child: no capabilities, no supplementary groups), and records the
# result of each step (errno), then mode, uid:gid, size and the
# security.capability value.  Operations: write of 1 byte at offset 0,
# append, write of 0 bytes, ftruncate smaller and to the same size,
# truncate(2) by path, open(O_TRUNC), fallocate, punch hole,
# copy_file_range, chown and chgrp by root (to a new owner, to the same one,
# and chown(-1, -1)), chgrp and chown(-1, -1) by the owner, chmod by the
# owner (control), and sequences (write, root re-chmod / re-setcap, write
# again); plus setgid directories chowned by root and fifos with the bits
# chowned, chgrp'ed and chmod'ed.  The kernel rules: a
# write or truncate by a caller without CAP_FSETID clears S_ISUID, and
# S_ISGID when the file has S_IXGRP or the caller is not in its group;
# chown clears them even for root; any write, truncate or chown removes
# security.capability, even root's (a write of 0 bytes changes nothing);
# chown(-1, -1) counts as a chown; directories keep setgid; a chown
# clears the bits of fifos as of regular files.  A few of
# these are asserted on the ext4 record itself (the reference must behave
# as documented, or the comparison proves nothing); then the two records
# must be equal line by line.  Then the image is unmounted, btrfs check is
# clean, and the kernel's view of every file (a read-only kernel mount)
# equals what the FUSE mount showed.
#
# Needs root, loop devices, kernel btrfs and ext4, btrfs-progs, FUSE,
# python3 and a user "nobody" with a group "nogroup".
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd mkfs.ext4
id nobody >/dev/null 2>&1 || oracle_skip "no user nobody"
getent group nogroup >/dev/null 2>&1 || oracle_skip "no group nogroup"
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

cat >"$T/killpriv.py" <<'EOF2'
"""killpriv matrix: `run DIR` builds and records every case under DIR (a
"case" section, then a "final" section of every file's state); `state DIR`
prints only the final section of an existing tree."""
import ctypes
import errno
import grp
import os
import pwd
import struct
import sys

U = pwd.getpwnam("nobody").pw_uid
G = grp.getgrnam("nogroup").gr_gid
CAPNAME = "security.capability"
# vfs_cap_data v2: magic_etc, permitted lo, inheritable lo, permitted hi,
# inheritable hi (cap_net_raw+ep).
CAP = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]

# name: (mode, uid, gid, capability)
INITS = {
    "suid": (0o4755, U, G, False),
    "sgid": (0o2755, U, G, False),
    "sgid-nox": (0o2745, U, G, False),       # no S_IXGRP, writer in the group
    "sgid-nox-fg": (0o2745, U, 0, False),    # no S_IXGRP, writer not in it
    "sgid-fg": (0o2755, U, 0, False),        # S_IXGRP, writer not in it
    "both": (0o6775, U, G, False),
    "cap": (0o0755, U, G, True),
    "suid-cap": (0o4755, U, G, True),
    "suid-ow": (0o4757, 0, 0, False),        # root's, written through o+w
    "sgid-nox-ow": (0o2747, 0, 0, False),    # root's, written through o+w
}

# op name: list of (actor, step); actor r = root, u = nobody.
OPS = {
    "r-write1": [("r", "write1")],
    "u-write1": [("u", "write1")],
    "u-append": [("u", "append")],
    "u-write0": [("u", "write0")],
    "r-write0": [("r", "write0")],
    "u-ftrunc": [("u", "ftrunc")],
    "u-ftrunc-same": [("u", "ftrunc-same")],
    "u-trunc": [("u", "trunc")],
    "u-otrunc": [("u", "otrunc")],
    "r-ftrunc": [("r", "ftrunc")],
    "r-trunc": [("r", "trunc")],
    "r-otrunc": [("r", "otrunc")],
    "u-falloc": [("u", "falloc")],
    "u-punch": [("u", "punch")],
    "u-cfr": [("u", "cfr")],
    "r-cfr": [("r", "cfr")],
    "r-chown": [("r", "chown")],
    "r-chgrp": [("r", "chgrp")],
    "r-chown-same": [("r", "chown-same")],
    "r-chown-noop": [("r", "chown-noop")],
    "u-chgrp": [("u", "chgrp-nogroup")],
    "u-chown-noop": [("u", "chown-noop")],
    "u-chmod": [("u", "chmod-init")],
    "r-chmod": [("r", "chmod-init")],
    "seq-rechmod": [("u", "write1"), ("r", "chmod-init"), ("u", "write1")],
    "seq-recap": [("u", "write1"), ("r", "chmod-init"), ("r", "setcap"), ("r", "write1")],
}


def ename(e):
    return errno.errorcode.get(e, str(e))


def step(path, what, init):
    mode, uid, gid, _ = init
    if what in ("write1", "append", "write0", "ftrunc", "ftrunc-same", "falloc", "punch", "cfr"):
        flags = os.O_WRONLY | (os.O_APPEND if what == "append" else 0)
        fd = os.open(path, flags)
        try:
            if what == "write1":
                os.pwrite(fd, b"X", 0)
            elif what == "append":
                os.write(fd, b"Y")
            elif what == "write0":
                os.write(fd, b"")
            elif what == "ftrunc":
                os.ftruncate(fd, 2)
            elif what == "ftrunc-same":
                os.ftruncate(fd, 4)
            elif what in ("falloc", "punch"):
                fmode, off, length = (0, 0, 8192) if what == "falloc" else (3, 0, 1)
                if libc.fallocate(fd, fmode, off, length) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, os.strerror(e))
            elif what == "cfr":
                src = os.open(".src", os.O_RDONLY)
                try:
                    n = os.copy_file_range(src, fd, 1, 0, 0)
                finally:
                    os.close(src)
                if n != 1:
                    raise OSError(errno.EIO, "copy_file_range copied %d" % n)
        finally:
            os.close(fd)
    elif what == "trunc":
        os.truncate(path, 2)
    elif what == "otrunc":
        os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
    elif what == "chown":
        os.chown(path, U if os.stat(path).st_uid == 0 else 0, -1)
    elif what == "chgrp":
        os.chown(path, -1, G if os.stat(path).st_gid == 0 else 0)
    elif what == "chown-same":
        st = os.stat(path)
        os.chown(path, st.st_uid, st.st_gid)
    elif what == "chown-noop":
        os.chown(path, -1, -1)
    elif what == "chgrp-nogroup":
        os.chown(path, -1, G)
    elif what == "chmod-init":
        os.chmod(path, mode)
    elif what == "setcap":
        os.setxattr(path, CAPNAME, CAP)
    else:
        raise ValueError(what)


def unprivileged(fn):
    """fn() as nobody:nogroup without supplementary groups; returns errno."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setresgid(G, G, G)
            os.setresuid(U, U, U)
            with open("/proc/self/status") as f:
                eff = [ln.split()[1] for ln in f if ln.startswith("CapEff:")]
            if not eff or int(eff[0], 16) != 0:
                code = 254
            else:
                fn()
        except OSError as e:
            code = e.errno
        except BaseException:
            code = 255
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 254:
        sys.exit("killpriv.py: the unprivileged child still has capabilities")
    if code == 255 or code < 0:
        sys.exit("killpriv.py: the unprivileged child failed (%d)" % code)
    return code


def state(path):
    st = os.stat(path)
    try:
        cap = os.getxattr(path, CAPNAME).hex()
    except OSError as e:
        if e.errno != errno.ENODATA:
            raise
        cap = "-"
    size = " size=%d" % st.st_size if os.path.isfile(path) else ""
    return "mode=%04o own=%d:%d%s cap=%s" % (
        st.st_mode & 0o7777, st.st_uid, st.st_gid, size, cap)


def setup(path, init, is_dir=False, fifo=False):
    mode, uid, gid, cap = init
    if is_dir:
        os.mkdir(path)
    elif fifo:
        os.mkfifo(path)
    else:
        with open(path, "wb") as f:
            f.write(b"abcd")
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    if cap:
        os.setxattr(path, CAPNAME, CAP)


def run(top):
    # Relative paths from inside TOP: nobody may not traverse its parents.
    os.umask(0o022)
    os.chdir(top)
    top = "."
    os.chmod(top, 0o755)
    with open(os.path.join(top, ".src"), "wb") as f:
        f.write(b"S")
    out = []

    def case(name, init, steps, fifo=False):
        path = name
        setup(path, init, fifo=fifo)
        pre = state(path)
        rcs = []
        for actor, what in steps:
            if actor == "u":
                rc = unprivileged(lambda: step(path, what, init))
            else:
                try:
                    step(path, what, init)
                    rc = 0
                except OSError as e:
                    rc = e.errno
            rcs.append("ok" if rc == 0 else ename(rc))
        out.append("%s pre: %s | %s | %s" % (name, pre, ",".join(rcs), state(path)))

    for iname, init in INITS.items():
        for oname, steps in OPS.items():
            case("%s.%s" % (iname, oname), init, steps)
    # Fifos: a chown clears the bits of every non-directory, not only of
    # regular files.
    fifos = {"fsuid": (0o4755, U, G, False), "fsgid": (0o2755, U, G, False),
             "fsgid-nox-fg": (0o2745, U, 0, False), "fboth": (0o6775, U, G, False)}
    for iname, init in fifos.items():
        for oname in ("r-chown", "r-chgrp", "r-chown-same", "r-chown-noop", "u-chgrp",
                      "u-chown-noop", "r-chmod"):
            case("%s.%s" % (iname, oname), init, OPS[oname], fifo=True)
    dirs = {"dsgid": (0o2775, 0, 0, False), "dboth": (0o6775, 0, 0, False)}
    for iname, init in dirs.items():
        for oname, what in (("r-chown", "chown"), ("r-chgrp", "chgrp"),
                            ("r-chown-noop", "chown-noop")):
            name = "%s.%s" % (iname, oname)
            path = name
            setup(path, init, is_dir=True)
            pre = state(path)
            step(path, what, init)
            out.append("%s pre: %s | ok | %s" % (name, pre, state(path)))
    print("\n".join(out))
    print("final:")
    final(".")


def final(top):
    os.chdir(top)
    for name in sorted(os.listdir(".")):
        if not name.startswith("."):
            print("%s %s" % (name, state(name)))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        final(sys.argv[2])
EOF2

# kp_post FILE CASE: the state of CASE after its operation, in a record.
kp_post() {
	awk -v c="$2" '$1 == c { sub(/.*\| /, ""); print; exit }' "$1"
}

# kp_expect CASE WANT: an assertion on the ext4 record (the reference).
kp_expect() {
	local got
	got=$(kp_post "$T/ref.out" "$1")
	[[ " $got " == *" $2 "* ]] ||
		ro_fail "ext4 reference: $1 gives '$got', expected $2 (the kernel's rules changed?)"
}

ext4img=$(oracle_image ref.ext4 256M)
mkfs.ext4 -q -F "$ext4img" || oracle_fail "mkfs.ext4 failed"
mkdir -p "$T/ref"
mount -o loop "$ext4img" "$T/ref" || oracle_fail "cannot mount the ext4 reference"
oracle_register_mount "$T/ref"
mkdir "$T/ref/w"
"$ORACLE_PYTHON" "$T/killpriv.py" run "$T/ref/w" >"$T/ref.out" ||
	oracle_fail "the matrix failed on ext4"
umount "$T/ref"
oracle_log "ext4: $(grep -c ' pre: ' "$T/ref.out") cases recorded"

# The reference itself: the rules above, so that equal records mean
# something.
kp_expect suid.u-write1 mode=0755
kp_expect suid.r-write1 mode=4755
kp_expect sgid.u-write1 mode=0755
kp_expect sgid-nox.u-write1 mode=2745
kp_expect both.u-ftrunc mode=0775
kp_expect suid.u-trunc mode=0755
kp_expect suid.u-otrunc mode=0755
kp_expect suid.r-chown mode=0755
kp_expect suid.r-chown-noop mode=0755
kp_expect cap.r-write1 cap=-
kp_expect cap.r-chown cap=-
kp_expect cap.r-ftrunc cap=-
kp_expect suid-cap.r-write1 "mode=4755 own=$(id -u nobody):$(getent group nogroup | cut -d: -f3) size=4 cap=-"
kp_expect dsgid.r-chown mode=2775
kp_expect fsuid.r-chown mode=0755
kp_expect fboth.r-chgrp mode=0775
kp_expect suid.u-chmod mode=4755
kp_expect cap.r-chmod cap=0100000200200000000000000000000000000000	# chmod keeps it

# kp_cell NAME: the matrix through a rw mount, compared with ext4 and read
# back by the kernel.  Cell kp: the daemon negotiates HANDLE_KILLPRIV_V2
# and applies every rule itself, so the records must equal ext4's exactly.
# Cell kp-v1 (UBTRFS_NO_KILLPRIV_V2=1): the kernel clears before writes,
# with one known deviation (README).
kp_cell() {
	local name=$1 img mnt
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image "$name.img" 1G)
	oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
	mnt=$T/$name.mnt
	ro_fuse_up "$mnt" "$T/$name.log" rw,allow_other "$img" ||
		{ ro_show "$T/$name.log"; oracle_fail "rw mount did not come up"; }
	mkdir "$mnt/w"
	if "$ORACLE_PYTHON" "$T/killpriv.py" run "$mnt/w" >"$T/$name.out"; then
		if [[ $name == kp-v1 ]]; then
			# chown(-1, -1) by someone who neither owns a setgid
			# file without group-execute nor is in its group is
			# EPERM on ext4 (the VFS turns it into a mode change);
			# without KILLPRIV_V2 it succeeds changing nothing
			# (FUSE sends it as the same empty SETATTR that precedes
			# a write).  Compared as EPERM only when nothing changed.
			sed -E 's/^(sgid-nox-ow\.u-chown-noop pre: (.*) \| )ok \| \2$/\1EPERM | \2/' \
				"$T/$name.out" >"$T/$name.cmp"
		else
			cp "$T/$name.out" "$T/$name.cmp"
			grep -q '^sgid-nox-ow\.u-chown-noop pre: .* | EPERM | ' "$T/$name.out" ||
				ro_fail "$name: chown(-1, -1) by a stranger is not EPERM (KILLPRIV_V2 not negotiated?)"
		fi
		if ! diff "$T/ref.out" "$T/$name.cmp" >"$T/$name.diff"; then
			# The cases first (one line), then the records themselves.
			sed -n 's/^< \([^ ]*\) pre: .*/\1/p' "$T/$name.diff" >"$T/$name.cases"
			ro_fail "$name: the FUSE mount differs from ext4 in $(wc -l <"$T/$name.cases") case(s) (< ext4, > ubtrfs): $(tr '\n' ' ' <"$T/$name.cases")"
			ro_show "$T/$name.diff" 60
			# What the daemon said (an empty SETATTR it could not
			# place is logged).
			ro_show "$T/$name.log" 20
		fi
	else
		ro_fail "$name: the matrix failed on the FUSE mount"
	fi
	ro_fuse_down "$name" "$mnt" "$T/$name.log"
	oracle_check_clean "$name" "$img" || ro_fail "$name: btrfs check is not clean"
	if oracle_kmount -o ro "$T/$name.k" "$img"; then
		"$ORACLE_PYTHON" "$T/killpriv.py" state "$T/$name.k/w" >"$T/$name.kernel" ||
			ro_fail "$name: reading the tree on the kernel mount failed"
		oracle_kumount "$T/$name.k"
		sed -n '/^final:$/,$p' "$T/$name.out" | tail -n +2 >"$T/$name.final"
		diff "$T/$name.final" "$T/$name.kernel" >"$T/$name.kdiff" ||
			{ ro_fail "$name: the kernel's view of the image differs from the FUSE mount's (< FUSE, > kernel btrfs)"; ro_show "$T/$name.kdiff" 40; }
	else
		ro_fail "$name: the kernel does not mount the image"
	fi
	oracle_log "$name: $(grep -c ' pre: ' "$T/$name.out" || true) cases"
}

# Cell exec: what the kernel caches after the daemon cleared the bits.  On
# a `suid` mount, user nobody appends a byte to a copy of id(1) that root
# owns with mode 4757 and runs it at once: the write cleared S_ISUID, so it
# must run as nobody (the daemon clears the bits itself and has to tell the
# kernel, whose cached mode exec would otherwise still find setuid).  Then
# the file's mode is 0757 through the mount.
exec_cell() {
	local img mnt out mode
	RO_CELLS=$((RO_CELLS + 1))
	command -v setpriv >/dev/null || { ro_fail "exec: setpriv is missing"; return 0; }
	img=$(oracle_image exec.img 256M)
	oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
	mnt=$T/exec.mnt
	chmod 0711 "$T"
	ro_fuse_up "$mnt" "$T/exec.log" rw,allow_other,suid "$img" ||
		{ ro_show "$T/exec.log"; oracle_fail "rw mount did not come up"; }
	cp /usr/bin/id "$mnt/idcopy"
	chmod 4757 "$mnt/idcopy"
	out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
		sh -c 'printf x >>"$1" && "$1"' sh "$mnt/idcopy" 2>&1) ||
		ro_fail "exec: the write or the run failed: $out"
	[[ $out == *"uid=$(id -u nobody)("* && $out != *euid=* ]] ||
		ro_fail "exec: the written file still ran setuid: $out"
	mode=$(stat -c %a "$mnt/idcopy")
	[[ $mode == 757 ]] || ro_fail "exec: mode $mode after the write, want 757"
	ro_fuse_down exec "$mnt" "$T/exec.log"
	oracle_log "exec: $out"
}

kp_cell kp
UBTRFS_NO_KILLPRIV_V2=1 kp_cell kp-v1
exec_cell
ro_finish
