/*
 * fuse: setuid/setgid clearing rules (killpriv.c).
 */
#ifndef UBTRFS_FUSE_KILLPRIV_H
#define UBTRFS_FUSE_KILLPRIV_H

#include <stdbool.h>
#include <stdint.h>

enum ubtrfs_killpriv_op {
	UBTRFS_KILLPRIV_WRITE,	/* write, truncate, fallocate, copy into */
	UBTRFS_KILLPRIV_CHOWN,	/* chown, chgrp */
	UBTRFS_KILLPRIV_SGID_ONLY,	/* only the group rule (chown(-1, -1)) */
};

#define UBTRFS_CAP_FOWNER 3	/* linux/capability.h */
#define UBTRFS_CAP_FSETID 4

/* Does process pid have capability cap_bit in effect?  false if it cannot
 * tell. */
bool ubtrfs_pid_capable(int pid, int cap_bit);

/* Which system call is thread pid (blocked in a request of ours) in?
 * From /proc/PID/syscall (native numbers; a 32-bit caller's are another
 * table's, so mostly OTHER); UNKNOWN without /proc, without permission
 * (ptrace rules: a non-root daemon and another user's process, Yama), for
 * pid 0 (a caller outside the daemon's pid namespace) or on other systems. */
enum ubtrfs_syscall_kind {
	UBTRFS_SYSCALL_UNKNOWN = -1,
	UBTRFS_SYSCALL_OTHER = 0,
	UBTRFS_SYSCALL_CHOWN,	/* chown, lchown, fchown, fchownat */
	UBTRFS_SYSCALL_OPEN,	/* open, creat, openat, openat2 */
	UBTRFS_SYSCALL_WRITE,	/* write family, fallocate, copy_file_range, splice,
				 * sendfile, io_uring_enter */
};
int ubtrfs_pid_syscall(int pid);

/* The mode a file keeps after op by a caller with or without CAP_FSETID,
 * in or out of the file's group. */
uint32_t ubtrfs_killpriv_mode(uint32_t mode, enum ubtrfs_killpriv_op op, bool capable,
			      bool in_group);

#endif
