#!/usr/bin/env bash
# Every crafted image through the FUSE mount: `ubtrfs mount -f -o ro` runs in
# the background (so its exit status and any sanitizer report are seen);
# when the mount comes up, every entry is stat'ed, every file read, every
# xattr and symlink fetched, and security.selinux asked of every entry (as
# `ls -l` does; it starts the daemon's xattr scan), all under timeouts.
# Passing means: the daemon never crashes or hangs (it exits 0 after
# unmount, or refuses to mount with a message and exit 1), no sanitizer
# report, and the image is not written.
set -uo pipefail
UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"
oracle_require_ubtrfs
oracle_require_fuse
oracle_require_cmd xz timeout btrfs-image
oracle_require_python
oracle_init

IMAGES=$(oracle_shared_images)
status=0
count=0
mounted=0

walk() {
	# Read everything; errors (EIO, EUCLEAN) are fine, hangs are not.
	timeout 60 python3 - "$1" <<'PY' >/dev/null 2>&1
import errno, os, sys
root = sys.argv[1]
for d, dirs, files in os.walk(root):
    for n in dirs + files:
        p = os.path.join(d, n)
        try:
            st = os.lstat(p)
            for name in os.listxattr(p, follow_symlinks=False):
                try:
                    os.getxattr(p, name, follow_symlinks=False)
                except OSError as e:
                    # A listed name never "not supported": the scan would
                    # have missed an xattr item.
                    if e.errno == errno.EOPNOTSUPP:
                        print("EOPNOTSUPP for listed %s of %s" % (name, p))
                        sys.exit(3)
            # As `ls -l` asks: starts the daemon's xattr scan.
            try:
                os.getxattr(p, "security.selinux", follow_symlinks=False)
            except OSError:
                pass
            if os.path.islink(p):
                os.readlink(p)
            elif os.path.isfile(p):
                with open(p, 'rb') as f:
                    while f.read(1 << 20):
                        pass
        except OSError:
            pass
PY
}

while IFS=$'\t' read -r path expect _; do
	[ "$path" = path ] && continue
	case "$path" in *.stream.xz) continue ;; esac
	raw=$ORACLE_TMP/img.raw
	if ! (oracle_unpack "$IMAGES/$path" "$raw") >/dev/null 2>&1; then
		oracle_log "$path: could not unpack, skipped"
		continue
	fi
	count=$((count + 1))
	before=$(oracle_content_hash "$raw")
	mnt=$ORACLE_TMP/mnt
	mkdir -p "$mnt"
	log=$ORACLE_TMP/daemon.log
	oracle_image_daemon_start ro "$raw" "$mnt" "$log"
	pid=$ORACLE_DAEMON_PID
	up=$ORACLE_DAEMON_UP
	if [ $up = 1 ]; then
		mounted=$((mounted + 1))
		wrc=0
		walk "$mnt" || wrc=$?
		if [ $wrc = 3 ]; then
			echo "FAIL: $path: getxattr of a listed name said EOPNOTSUPP"; status=1
		elif [ $wrc != 0 ]; then
			echo "FAIL: $path: walking the mount timed out"; status=1
		fi
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	oracle_image_daemon_end "$path" $up "$pid" "$log" 100 || status=1
	rc=$ORACLE_DAEMON_RC
	after=$(oracle_content_hash "$raw")
	[ "$before" = "$after" ] || { echo "FAIL: $path: image was modified"; status=1; }
	printf '%-70s %s\n' "$path" "$([ $up = 1 ] && echo mounted || echo refused) rc=$rc"
	rm -f "$raw"
done < "$IMAGES/expect.tsv"
oracle_log "$count images, $mounted mounted and walked"
exit $status
