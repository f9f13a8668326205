/*
 * fuse: the libfuse3 low-level adapter.  Translates FUSE requests into
 * public libubtrfs calls and holds no filesystem logic of its own.
 */
#ifndef UBTRFS_FUSE_H
#define UBTRFS_FUSE_H

#include <stdbool.h>
#include <stdint.h>

#include <ubtrfs/ubtrfs.h>

struct ubtrfs_fuse_opts {
	const char *mountpoint;
	const char *fsname;		/* shown in /proc/mounts (the device) */
	uint64_t subvol;		/* subvolume to show at the mount root */
	bool foreground;
	bool allow_other;
	bool debug;
	bool rw;			/* EXPERIMENTAL read-write (fs opened RDWR) */
	unsigned commit_interval;	/* rw: seconds between commits (0: default 30) */
	bool no_xattr_scan;		/* ro: never answer getxattr ENOSYS (fuse_ll.c) */
	const char *extra_fuse_opts;	/* passed to libfuse's -o, may be NULL */
};

/*
 * Mount `fs` and serve it until unmounted.  Returns once the mount is
 * ready when !foreground (the server continues in a daemon process), or
 * when the filesystem is unmounted when foreground.  Exit status style:
 * 0 on success.
 */
int ubtrfs_fuse_serve(ubtrfs_fs *fs, const struct ubtrfs_fuse_opts *opts);

/* The inode-number mapping, exposed for tests: see fuse_ll.c. */
uint64_t ubtrfs_fuse_ino(uint64_t mount_subvol, ubtrfs_ino id);

#endif
