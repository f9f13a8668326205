#!/bin/bash
# t-acl: POSIX ACLs through the read-write FUSE mount, against ext4.
#
# One script (below) sets default and access ACLs with setfacl, creates
# files, directories, fifos and symlinks under them with several umasks,
# chmods files that carry ACLs (and the ctime shown after such a chmod is
# the one written), sets ACLs equivalent to a mode (stored as the
# mode only) and removes them; then `getfacl -R` and every mode are
# recorded, and user nobody probes what the ACLs allow and deny (read,
# create, append, traverse with only x).  Run on ext4 on a loop device (the
# kernel's own ACL code: the reference) and on `ubtrfs mount -o
# rw,allow_other`: the records must be equal (inheritance with the umask
# ignored under a default ACL, the mask following chmod, the mode following
# setfacl, the kernel enforcing them).  Then the image is unmounted, btrfs
# check is clean, and the kernel's getfacl of it equals the reference.
#
# Needs root, loop devices, kernel btrfs and ext4, btrfs-progs, FUSE, the acl
# tools, python3 and a user "nobody".
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

oracle_require_fuse_oracle
oracle_require_cmd setfacl getfacl mkfs.ext4 su
id nobody >/dev/null 2>&1 || oracle_skip "no user nobody"
oracle_init
# shellcheck source=read-oracle-common.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/read-oracle-common.sh"

cat >"$T/facls.sh" <<'EOF2'
# record the ACLs and modes of the tree in $PWD, in a stable order
getfacl -R -p . 2>/dev/null | python3 -c '
import sys
blocks = sys.stdin.read().strip().split("\n\n")
print("\n\n".join(sorted(b for b in blocks if not b.startswith("# file: .\n"))))'
find . -mindepth 1 | sort | xargs stat -c '%n %a'
EOF2
cat >"$T/acl-workload.sh" <<'EOF2'
set -e
umask 022
mkdir d
setfacl -d -m u:nobody:rwx,g::r-x,o::--- d
setfacl -m u:nobody:r-x d
touch d/f; mkdir d/sub; mkfifo d/p; ln -s x d/l
(umask 077; touch d/f2; mkdir d/sub2; mkdir d/sub2/deeper)
echo hi >d/f3; chmod 640 d/f3
touch plain; (umask 027; touch plain2; mkdir plaind)
mkdir e; setfacl -m u:nobody:rw- plain; chmod 600 plain
setfacl -m u::rwx,g::r--,o::r-- plain2
setfacl -b d/f2
echo data >d/sub/inner
mkdir priv; chmod 700 priv; setfacl -m u:nobody:x priv; echo s >priv/s; chmod 644 priv/s
setfacl -m g:nogroup:rw plain2; setfacl -x g:nogroup plain2
bash "$FACLS" >"$OUT"
chmod 755 .
su nobody -s /bin/sh -c 'cat d/sub/inner; touch d/sub/bynobody && echo created; cat plain;
	echo x >>plain && echo appended; cat priv/s; ls priv; touch e/no && echo bad' >>"$OUT" 2>&1 || true
EOF2

ext4img=$(oracle_image ref.ext4 256M)
mkfs.ext4 -q -F "$ext4img" || oracle_fail "mkfs.ext4 failed"
mkdir -p "$T/ref"
mount -o loop,acl "$ext4img" "$T/ref" || oracle_fail "cannot mount the ext4 reference"
oracle_register_mount "$T/ref"
mkdir "$T/ref/w"
(cd "$T/ref/w" && FACLS=$T/facls.sh OUT=$T/ref.out bash "$T/acl-workload.sh") ||
	oracle_fail "the workload failed on ext4"
(cd "$T/ref/w" && bash "$T/facls.sh") >"$T/ref.final" || oracle_fail "getfacl on ext4 failed"
umount "$T/ref"

for tool in ubtrfs mkfs.btrfs; do
	name=a-$tool
	RO_CELLS=$((RO_CELLS + 1))
	img=$(oracle_image "$name.img" 1G)
	if [[ $tool == ubtrfs ]]; then
		oracle_ubtrfs mkfs -q -f "$img" || oracle_fail "ubtrfs mkfs failed"
	else
		oracle_mkfs -- "$img"
	fi
	mnt=$T/$name.mnt
	ro_fuse_up "$mnt" "$T/$name.log" rw,allow_other "$img" ||
		{ ro_show "$T/$name.log"; oracle_fail "$name: rw mount did not come up"; }
	mkdir "$mnt/w"
	(cd "$mnt/w" && FACLS=$T/facls.sh OUT=$T/$name.out bash "$T/acl-workload.sh") ||
		ro_fail "$name: the workload failed on the FUSE mount"
	diff "$T/ref.out" "$T/$name.out" >"$T/$name.diff" ||
		{ ro_fail "$name: ACLs differ from ext4 (< ext4, > ubtrfs)"; ro_show "$T/$name.diff" 40; }
	# chmod rewrites the access ACL after the mode: the ctime the kernel
	# caches from the reply is the one on disk (read back below).
	touch "$mnt/ct" && setfacl -m u:nobody:r "$mnt/ct" && chmod 640 "$mnt/ct" &&
		ctime=$(stat -c %z "$mnt/ct") || ro_fail "$name: chmod of a file with an ACL failed"
	ro_fuse_down "$name" "$mnt" "$T/$name.log"
	oracle_check_clean "$name" "$img" || ro_fail "$name: btrfs check is not clean"
	oracle_kmount -o ro "$T/$name.k" "$img" || { ro_fail "$name: the kernel does not mount it"; continue; }
	(cd "$T/$name.k/w" && bash "$T/facls.sh") >"$T/$name.final" || ro_fail "$name: getfacl on the kernel mount failed"
	[[ $(stat -c %z "$T/$name.k/ct") == "${ctime:-}" ]] ||
		ro_fail "$name: the mount showed ctime ${ctime:-?} after chmod, the kernel reads $(stat -c %z "$T/$name.k/ct")"
	oracle_kumount "$T/$name.k"
	diff "$T/ref.final" "$T/$name.final" >"$T/$name.fdiff" ||
		{ ro_fail "$name: the kernel's ACLs differ from ext4's (< ext4, > kernel btrfs)"; ro_show "$T/$name.fdiff" 40; }
	oracle_log "$name: done"
done
ro_finish
