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
	"$UBTRFS" mount -f -o ro "$raw" "$mnt" >"$log" 2>&1 &
	pid=$!
	kill -0 "$pid" 2>/dev/null && { oracle_register_pid "$pid" || true; }
	up=0
	for _ in $(seq 1 100); do
		if grep -q " $mnt fuse" /proc/mounts; then up=1; break; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ $up = 1 ]; then
		mounted=$((mounted + 1))
		oracle_register_mount "$mnt"
		wrc=0
		walk "$mnt" || wrc=$?
		if [ $wrc = 3 ]; then
			echo "FAIL: $path: getxattr of a listed name said EOPNOTSUPP"; status=1
		elif [ $wrc != 0 ]; then
			echo "FAIL: $path: walking the mount timed out"; status=1
		fi
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	rc=0
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		echo "FAIL: $path: daemon still running after unmount"; kill -9 "$pid"; status=1
	fi
	wait "$pid"; rc=$?
	if [ $up = 1 ] && [ $rc -ne 0 ]; then
		echo "FAIL: $path: daemon exited $rc after unmount"; tail -5 "$log"; status=1
	elif [ $up = 0 ] && [ $rc -ne 1 ]; then
		echo "FAIL: $path: refused mount with exit $rc (want 1)"; tail -5 "$log"; status=1
	elif [ $up = 0 ] && ! grep -q . "$log"; then
		echo "FAIL: $path: refused mount without a message"; status=1
	fi
	if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "$log"; then
		echo "FAIL: $path: sanitizer report"; grep -m5 -E 'ERROR|runtime error' "$log"; status=1
	fi
	after=$(oracle_content_hash "$raw")
	[ "$before" = "$after" ] || { echo "FAIL: $path: image was modified"; status=1; }
	printf '%-70s %s\n' "$path" "$([ $up = 1 ] && echo mounted || echo refused) rc=$rc"
	rm -f "$raw"
done < "$IMAGES/expect.tsv"
oracle_log "$count images, $mounted mounted and walked"
exit $status
