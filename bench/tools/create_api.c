/*
 * create_api: the library calls the FUSE driver makes for bench's
 * create-4k (and create-empty) workload, without FUSE: for a profile of
 * ubtrfs's own work per file (perf, callgrind) and a per-call timing.
 *
 *   create_api IMAGE FILES DIRS SIZE
 *
 * Per directory: LOOKUP (absent), MKDIR (stat of the parent, its default
 * ACL, mkdir).  Per file: LOOKUP (absent); MKNOD (stat of the parent, its
 * default ACL, mknod); if SIZE: the setuid check (stat_mode), GETXATTR
 * security.capability, WRITE of SIZE bytes at 0; GETATTR of the parent (the
 * kernel's permission refresh after the create).  A commit every
 * COMMIT_EVERY files (environment; the daemon commits by time) and one at
 * the end.  Prints
 * microseconds per call kind.  Not a test; built by hand:
 *   cc -O2 -g -Wall -Wextra -Iinclude bench/tools/create_api.c -Lbuild/src/lib -lubtrfs
 */
#include <ubtrfs/ubtrfs.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { K_LOOKUP, K_MKNOD, K_SETUID, K_GETXATTR, K_WRITE, K_GETATTR, K_MKDIR, K_COMMIT, K_N };
static const char *const names[K_N] = { "LOOKUP", "MKNOD", "setuid", "GETXATTR",
					 "WRITE", "GETATTR", "MKDIR", "commit" };
static double total[K_N];
static long count[K_N];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#define TIMED(k, call)                          \
	do {                                    \
		double t0_ = now();             \
		call;                           \
		total[k] += now() - t0_;        \
		count[k]++;                     \
	} while (0)

static void die(const char *what, long err)
{
	fprintf(stderr, "create_api: %s: %s\n", what, strerror((int)-err));
	exit(1);
}

/* What the driver reads before a new inode (new_owner in fuse_ll.c): the
 * parent's stat and its default ACL. */
static int new_owner(ubtrfs_fs *fs, ubtrfs_ino dir)
{
	struct ubtrfs_stat d;
	char acl[64];
	int ret = ubtrfs_stat(fs, dir, &d);

	if (!ret)
		(void)ubtrfs_getxattr(fs, dir, "system.posix_acl_default", acl, sizeof(acl));
	return ret;
}

/* A new directory or regular file `name` in dir as the kernel asks for it:
 * LOOKUP (absent), then MKDIR or MKNOD. */
static void make_entry(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name, bool is_dir,
		       struct ubtrfs_stat *st)
{
	int ret;

	TIMED(K_LOOKUP, ret = ubtrfs_lookup(fs, dir, name, st));
	if (ret != -ENOENT)
		die("lookup (want ENOENT)", ret < 0 ? ret : -EEXIST);
	TIMED(is_dir ? K_MKDIR : K_MKNOD, {
		ret = new_owner(fs, dir);
		if (!ret && is_dir)
			ret = ubtrfs_mkdir(fs, dir, name, 0755, 0, 0, st);
		else if (!ret)
			ret = ubtrfs_mknod(fs, dir, name, S_IFREG | 0644, 0, 0, 0, 0, st);
	});
	if (ret)
		die(is_dir ? "mkdir" : "mknod", ret);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: create_api IMAGE FILES DIRS SIZE\n");
		return 2;
	}
	const char *devs[] = { argv[1] };
	long nfiles = atol(argv[2]), ndirs = atol(argv[3]);
	size_t size = (size_t)atol(argv[4]);
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	struct ubtrfs_stat st, d;
	int ret = ubtrfs_open(devs, 1, UBTRFS_OPEN_RDWR, &fs);

	if (ret)
		die("open", ret);
	if ((ret = ubtrfs_subvol_root(fs, ubtrfs_default_subvol(fs), &root)))
		die("root", ret);
	char *data = malloc(size + 1);
	if (!data)
		die("malloc", -ENOMEM);
	for (size_t i = 0; i < size; i++)
		data[i] = (char)((i * 7 + 1) & 0xff);
	long per_dir = ndirs ? (nfiles + ndirs - 1) / ndirs : nfiles;
	ubtrfs_ino dir = root;
	char name[32], cap[64];
	const char *ev = getenv("COMMIT_EVERY");	/* files per commit (the daemon's interval) */
	long every = ev ? atol(ev) : 0;
	double t_start = now();

	for (long i = 0; i < nfiles; i++) {
		if (ndirs && i % per_dir == 0) {
			snprintf(name, sizeof(name), "d%03ld", i / per_dir);
			make_entry(fs, root, name, true, &st);
			dir = st.id;
		}
		snprintf(name, sizeof(name), "f%05ld", ndirs ? i % per_dir : i);
		make_entry(fs, dir, name, false, &st);
		if (size) {
			struct ubtrfs_stat m;
			TIMED(K_SETUID, ret = ubtrfs_stat_mode(fs, st.id, &m));
			if (ret)
				die("stat_mode", ret);
			ssize_t n;
			TIMED(K_GETXATTR,
			      n = ubtrfs_getxattr(fs, st.id, "security.capability", cap, sizeof(cap)));
			if (n != -ENODATA)
				die("getxattr (want ENODATA)", n < 0 ? n : -EEXIST);
			TIMED(K_WRITE, n = ubtrfs_write(fs, st.id, data, size, 0));
			if (n != (ssize_t)size)
				die("write", n < 0 ? n : -EIO);
		}
		TIMED(K_GETATTR, ret = ubtrfs_stat(fs, dir, &d));
		if (ret)
			die("getattr", ret);
		if (every && (i + 1) % every == 0) {
			TIMED(K_COMMIT, ret = ubtrfs_commit(fs));
			if (ret)
				die("commit", ret);
		}
	}
	TIMED(K_COMMIT, ret = ubtrfs_commit(fs));
	if (ret)
		die("commit", ret);
	double all = now() - t_start;
	ubtrfs_close(fs);
	for (int k = 0; k < K_N; k++)
		if (count[k])
			printf("%-9s %7ld calls %8.2f us each %8.3f us/file\n", names[k], count[k],
			       total[k] / (double)count[k], total[k] / (double)nfiles);
	printf("all       %8.2f us/file\n", all / (double)nfiles);
	free(data);
	return 0;
}
