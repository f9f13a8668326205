/*
 * fuse: Linux's rules for clearing setuid/setgid on write, truncate and
 * chown, where the FUSE kernel module leaves them to the daemon.
 *
 * Without FUSE_HANDLE_KILLPRIV_V2 (libfuse 3.14 cannot ask for it) the
 * kernel clears the bits itself before a WRITE or a truncate, but with its
 * own older rule (setgid only together with group-execute).  The VFS rule (what ext4 and a
 * kernel btrfs mount do):
 *   - a write or truncate by a caller without CAP_FSETID clears S_ISUID,
 *     and S_ISGID when the file has S_IXGRP;
 *   - a write, truncate or chown clears S_ISGID of a file without S_IXGRP
 *     when the caller is neither in the file's group nor has CAP_FSETID;
 *   - a chown clears S_ISUID, and S_ISGID with S_IXGRP, whoever asks;
 *   - directories keep both bits; special files (fifos, devices) lose
 *     them on chown as regular files do.
 * (security.capability is removed by the kernel itself: it sends a
 * REMOVEXATTR.)
 *
 * With FUSE_HANDLE_KILLPRIV_V2 (negotiated by init_io.c) the kernel clears
 * nothing itself and strips the mode it would have set from a chown's
 * SETATTR, so chown(-1, -1) reaches us as a SETATTR with nothing in it -
 * as does the kernel's own step before a write that removes
 * security.capability.  What the caller is doing tells them apart
 * (ubtrfs_pid_syscall).
 */
#include "fuse_killpriv.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Is pid in our user namespace?  CapEff counts in the process's own
 * namespace; the VFS asks about the initial one (capable()), so a process
 * in a namespace of its own (unshare -U) has none of them for us. */
static bool same_userns(int pid)
{
	char path[64], mine[128], theirs[128];
	ssize_t a, b;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	a = readlink("/proc/self/ns/user", mine, sizeof(mine));
	b = readlink(path, theirs, sizeof(theirs));
	return a > 0 && a == b && memcmp(mine, theirs, (size_t)a) == 0;
}

bool ubtrfs_pid_capable(int pid, int cap_bit)
{
	char path[64], line[256];
	bool cap = false;

	if (pid <= 0 || !same_userns(pid))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;	/* gone: the safe answer clears the bits */
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (sscanf(line, "CapEff: %llx", &v) == 1) {
			cap = (v >> cap_bit) & 1;
			break;
		}
	}
	fclose(f);
	return cap;
}

uint32_t ubtrfs_killpriv_mode(uint32_t mode, enum ubtrfs_killpriv_op op, bool capable,
			      bool in_group)
{
	/* Writes and truncates reach only regular files; a chown clears the
	 * bits of every non-directory (fifos, devices, sockets too). */
	if (S_ISDIR(mode) || !(mode & (S_ISUID | S_ISGID)) ||
	    (!S_ISREG(mode) && op == UBTRFS_KILLPRIV_WRITE))
		return mode;
	uint32_t out = mode;
	bool gexec = mode & S_IXGRP;

	if (op == UBTRFS_KILLPRIV_SGID_ONLY) {
		/* nothing but the group rule below */
	} else if (op == UBTRFS_KILLPRIV_CHOWN) {
		out &= ~(uint32_t)S_ISUID;
		if (gexec)
			out &= ~(uint32_t)S_ISGID;
	} else if (!capable) {
		out &= ~(uint32_t)S_ISUID;
		if (gexec)
			out &= ~(uint32_t)S_ISGID;
	}
	if (!gexec && !capable && !in_group)
		out &= ~(uint32_t)S_ISGID;
	return out;
}

/* The number of the system call thread pid is in, -1 if none or unknown. */
static long read_syscall(int pid)
{
	char path[64], word[32];

	snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
	/* The kernel wakes us before the caller has gone to sleep waiting
	 * for our reply: while it reads "running", let it get there.  A
	 * caller preempted on a busy CPU can take milliseconds (a CI run
	 * with parallel tests once outlasted 200 bare yields, and a root
	 * write lost its setuid bit to the unknown case's chown rule), so
	 * the wait is bounded by time: yields first, then short sleeps, for
	 * up to a quarter of a second (a scheduler's time slice is a few
	 * milliseconds; the bound only matters for a process that really
	 * runs, such as another one with that number when /proc is not our
	 * pid namespace's). */
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (int tries = 0;; tries++) {
		FILE *f = fopen(path, "re");
		if (!f)
			return -1;
		int n = fscanf(f, "%31s", word);
		fclose(f);
		if (n != 1)
			return -1;
		if (strcmp(word, "running") != 0) {
			char *end;
			long nr = strtol(word, &end, 10);
			if (*end || nr < 0)
				return -1;	/* not in a system call */
#if defined(__x86_64__)
			nr &= ~0x40000000L;	/* x32 callers: __X32_SYSCALL_BIT */
#endif
			return nr;
		}
		if (tries < 200) {
			sched_yield();
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t waited_ns = ((int64_t)now.tv_sec - (int64_t)start.tv_sec) * 1000000000 +
				    ((int64_t)now.tv_nsec - (int64_t)start.tv_nsec);
		if (waited_ns > 250000000)
			return -1;
		struct timespec nap = { 0, 100000 };
		nanosleep(&nap, NULL);
	}
}

int ubtrfs_pid_syscall(int pid)
{
	long nr = pid > 0 ? read_syscall(pid) : -1;

	if (nr < 0)
		return UBTRFS_SYSCALL_UNKNOWN;
	switch (nr) {
#ifdef SYS_chown
	case SYS_chown:
#endif
#ifdef SYS_lchown
	case SYS_lchown:
#endif
#ifdef SYS_fchown
	case SYS_fchown:
#endif
#ifdef SYS_fchownat
	case SYS_fchownat:
#endif
		return UBTRFS_SYSCALL_CHOWN;
#ifdef SYS_open
	case SYS_open:
#endif
#ifdef SYS_creat
	case SYS_creat:
#endif
#ifdef SYS_openat
	case SYS_openat:
#endif
#ifdef SYS_openat2
	case SYS_openat2:
#endif
		return UBTRFS_SYSCALL_OPEN;
	/* What writes into a file (file_remove_privs before the data). */
#ifdef SYS_write
	case SYS_write:
#endif
#ifdef SYS_pwrite64
	case SYS_pwrite64:
#endif
#ifdef SYS_writev
	case SYS_writev:
#endif
#ifdef SYS_pwritev
	case SYS_pwritev:
#endif
#ifdef SYS_pwritev2
	case SYS_pwritev2:
#endif
#ifdef SYS_fallocate
	case SYS_fallocate:
#endif
#ifdef SYS_copy_file_range
	case SYS_copy_file_range:
#endif
#ifdef SYS_splice
	case SYS_splice:
#endif
#ifdef SYS_sendfile
	case SYS_sendfile:
#endif
#ifdef SYS_io_uring_enter
	case SYS_io_uring_enter:
#endif
		return UBTRFS_SYSCALL_WRITE;
	default:
		return UBTRFS_SYSCALL_OTHER;
	}
}
