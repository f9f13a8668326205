/*
 * fuse: libfuse3 low-level operations over the public libubtrfs API.
 *
 * Inode numbers.  The kernel gives every btrfs subvolume its own st_dev;
 * FUSE has one st_dev per mount, so (st_dev, st_ino) stays unique only if
 * st_ino does.  The mapping (stable, stateless, documented in README):
 *   - inside the mounted subvolume S: st_ino = the btrfs inode number, as
 *     `ls -i` shows under the kernel;
 *   - inside any other subvolume V:  st_ino = V << 40 | inode number.
 * btrfs inode numbers stay far below 2^40 in practice and subvolume ids
 * below 2^24; an inode outside those ranges gets EOVERFLOW rather than a
 * number that could collide.  The FUSE node id is st_ino, except that the
 * mount root is node 1 (FUSE_ROOT_ID) as FUSE requires.  Because node ids
 * are derived rather than allocated, forget needs no bookkeeping.
 *
 * Caching: the daemon owns the image, so entries, attributes and file data
 * may be cached by the kernel for a long time.  Read-write (EXPERIMENTAL),
 * every change comes through this mount: the kernel drops or updates what
 * it cached for each change it sends (an entry change invalidates the
 * directory's attributes, a write the file's size and times, an unlink the
 * inode's), and our replies carry fresh attributes; entries are kept for a
 * day, attributes for 1 s (see attr_timeout).  Where the daemon changes
 * attributes on its own (setuid/setgid cleared by a write), it tells the
 * kernel (killpriv_write).
 *
 * Writing: the library runs one transaction at a time; it is committed on
 * fsync/fsyncdir, every commit_interval seconds (mount option commit=N,
 * default 30 as the kernel's) by a timer thread, by size (commit_due in
 * the library's api_write.c) and at unmount.
 *
 * Threads: loop.c's; a request is handled by the thread that read it, and
 * one about to wait (a READ, the library's block hook) lets another thread
 * read on.  The library is thread-safe.
 */
#define FUSE_USE_VERSION 312
#include "ubtrfs_fuse.h"
#include "fuse_acl.h"
#include "fuse_init_io.h"
#include "fuse_killpriv.h"
#include "fuse_loop.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define INO_SHIFT 40
#define INO_MASK ((1ull << INO_SHIFT) - 1)
#define CACHE_TIMEOUT 86400.0
#define RW_ATTR_TIMEOUT 1.0
#define DEFAULT_COMMIT_INTERVAL 30
#define MAX_THREADS 16

struct fuse_state {
	ubtrfs_fs *fs;
	uint64_t subvol;	/* mounted subvolume */
	ubtrfs_ino root;	/* its root directory */
	bool rw;
	struct fuse_session *se;	/* for notifications (op_rename) */
	bool acl;		/* rw: the kernel enforces POSIX ACLs (FUSE_CAP_POSIX_ACL) */
	bool dont_mask;		/* rw: we apply the umask (FUSE_CAP_DONT_MASK) */
	/* rw: the device I/O that negotiates HANDLE_KILLPRIV_V2 (init_io.c) */
	struct ubtrfs_init_io io;
	/* the commit timer (rw): every commit_interval seconds */
	unsigned commit_interval;
	pthread_t timer;
	bool timer_running, stop;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	/* ro: the xattr scan (op_getxattr); scanner and scanner_started
	 * under `mu` */
	bool xattr_scan;
	bool debug;
	_Atomic int xattr_state;
	atomic_bool scan_stop;
	bool scanner_started;
	pthread_t scanner;
};

enum { XS_IDLE, XS_RUNNING, XS_NONE, XS_SOME };

/* Entries (names, and names that do not exist) for a day in both modes;
 * attributes for a day read-only, for RW_ATTR_TIMEOUT read-write: after
 * an aborted transaction the daemon answers from the last commit, and the
 * kernel then learns the committed sizes, times and modes within that. */
static double entry_timeout(const struct fuse_state *s)
{
	(void)s;
	return CACHE_TIMEOUT;
}

static double attr_timeout(const struct fuse_state *s)
{
	return s->rw ? RW_ATTR_TIMEOUT : CACHE_TIMEOUT;
}

uint64_t ubtrfs_fuse_ino(uint64_t mount_subvol, ubtrfs_ino id)
{
	if (id.subvol == mount_subvol)
		return id.ino;
	if (id.ino > INO_MASK || id.subvol >= (1ull << (64 - INO_SHIFT)))
		return 0;
	return id.subvol << INO_SHIFT | id.ino;
}

static struct fuse_state *state(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t to_node(const struct fuse_state *s, ubtrfs_ino id)
{
	if (id.subvol == s->root.subvol && id.ino == s->root.ino)
		return FUSE_ROOT_ID;
	return ubtrfs_fuse_ino(s->subvol, id);
}

static int from_node(const struct fuse_state *s, fuse_ino_t node, ubtrfs_ino *id)
{
	if (node == FUSE_ROOT_ID) {
		*id = s->root;
		return 0;
	}
	if (node <= INO_MASK) {
		id->subvol = s->subvol;
		id->ino = node;
	} else {
		id->subvol = node >> INO_SHIFT;
		id->ino = node & INO_MASK;
	}
	return 0;
}

static void fill_attr(const struct fuse_state *s, const struct ubtrfs_stat *st, struct stat *a)
{
	memset(a, 0, sizeof(*a));
	a->st_ino = ubtrfs_fuse_ino(s->subvol, st->id);
	a->st_mode = st->mode;
	a->st_nlink = st->nlink;
	a->st_uid = st->uid;
	a->st_gid = st->gid;
	a->st_rdev = makedev(st->rdev_major, st->rdev_minor);
	a->st_size = (off_t)st->size;
	a->st_blocks = (blkcnt_t)st->blocks;
	a->st_blksize = st->blksize;
	a->st_atim.tv_sec = st->atime.sec;
	a->st_atim.tv_nsec = st->atime.nsec;
	a->st_mtim.tv_sec = st->mtime.sec;
	a->st_mtim.tv_nsec = st->mtime.nsec;
	a->st_ctim.tv_sec = st->ctime.sec;
	a->st_ctim.tv_nsec = st->ctime.nsec;
}

static bool ino_ok(const struct fuse_state *s, const struct ubtrfs_stat *st)
{
	return ubtrfs_fuse_ino(s->subvol, st->id) != 0;
}

/*
 * Lookup counts (read-write): every entry replied counts one reference
 * of the inode until the kernel forgets it, so that a file unlinked while
 * open stays (an orphan) until its last FORGET.  Read-only mounts need no
 * counts: nothing can be deleted.
 */
static void count_lookup(struct fuse_state *s, ubtrfs_ino id)
{
	if (s->rw)
		ubtrfs_ref(s->fs, id);
}

static void forget_lookup(struct fuse_state *s, ubtrfs_ino id, uint64_t n)
{
	if (!s->rw)
		return;
	int ret = ubtrfs_forget(s->fs, id, n);
	if (ret && ret != -EROFS)
		fprintf(stderr, "ubtrfs: freeing unlinked inode %llu failed: %s\n",
			(unsigned long long)id.ino, ubtrfs_strerror(ret));
}

static void reply_entry(fuse_req_t req, const struct ubtrfs_stat *st)
{
	struct fuse_state *s = state(req);
	struct fuse_entry_param e;

	if (!ino_ok(s, st)) {
		fuse_reply_err(req, EOVERFLOW);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = to_node(s, st->id);
	e.generation = 1;
	fill_attr(s, st, &e.attr);
	e.attr_timeout = attr_timeout(s);
	e.entry_timeout = entry_timeout(s);
	count_lookup(s, st->id);
	if (fuse_reply_entry(req, &e) != 0)
		forget_lookup(s, st->id, 1);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fuse_state *s = userdata;

	/* Let the kernel cache pages across opens and read ahead freely. */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* O_TRUNC comes as a SETATTR (there is no OPEN: op_open); with
	 * ATOMIC_O_TRUNC the kernel would leave it to an OPEN never sent. */
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * No READDIRPLUS: it makes every readdir stat every entry, which reads
	 * nearly every leaf of the tree for a plain `find` (4.7x the kernel
	 * cold; 1.3x without it; docs/PERFORMANCE.md).  Lookups stay cached.
	 */
	conn->want &= ~(unsigned)(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
	/*
	 * POSIX ACLs: the kernel caches and enforces them (as it does for a
	 * kernel btrfs mount; default_permissions is on), which also saves a
	 * getxattr round trip per file for `ls -l`.
	 *
	 * Read-write: write-through (no writeback cache); setuid/setgid are
	 * cleared by us (HANDLE_KILLPRIV_V2, negotiated by init_io.c).  With
	 * ACLs the kernel leaves their upkeep to us (acl.c): inheritance at
	 * create - for which it must pass the mode without the umask
	 * (DONT_MASK; we apply the umask where no default ACL does) - and the
	 * access ACL following chmod and the mode following setfacl.
	 */
	if (conn->capable & FUSE_CAP_POSIX_ACL) {
		conn->want |= FUSE_CAP_POSIX_ACL;
		s->acl = s->rw;
	}
	if (s->rw) {
		conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_HANDLE_KILLPRIV |
					  FUSE_CAP_DONT_MASK);
		if (s->acl && (conn->capable & FUSE_CAP_DONT_MASK)) {
			conn->want |= FUSE_CAP_DONT_MASK;
			s->dont_mask = true;
		}
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_stat st;
	ubtrfs_ino dir;
	int ret;

	from_node(s, parent, &dir);
	if (!strcmp(name, "..")) {
		ubtrfs_ino up;
		if (dir.subvol == s->root.subvol && dir.ino == s->root.ino)
			up = dir;	/* never above the mount root */
		else if ((ret = ubtrfs_parent(s->fs, dir, &up)) != 0)
			goto err;
		ret = ubtrfs_stat(s->fs, up, &st);
	} else if (!strcmp(name, ".")) {
		ret = ubtrfs_stat(s->fs, dir, &st);
	} else {
		ret = ubtrfs_lookup(s->fs, dir, name, &st);
	}
	if (ret == 0) {
		reply_entry(req, &st);
		return;
	}
err:
	if (ret == -ENOENT) {
		/* A negative entry the kernel may cache as long as the rest. */
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.entry_timeout = entry_timeout(s);
		fuse_reply_entry(req, &e);
		return;
	}
	fuse_reply_err(req, -ret);
}

static void op_getattr(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_stat st;
	struct stat a;
	ubtrfs_ino id;
	(void)fi;

	from_node(s, node, &id);
	int ret = ubtrfs_stat(s->fs, id, &st);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fill_attr(s, &st, &a);
	fuse_reply_attr(req, &a, attr_timeout(s));
}

static void op_readlink(fuse_req_t req, fuse_ino_t node)
{
	struct fuse_state *s = state(req);
	char buf[PATH_MAX + 1];
	ubtrfs_ino id;

	from_node(s, node, &id);
	ssize_t n = ubtrfs_readlink(s->fs, id, buf, sizeof(buf));
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_readlink(req, buf);
}

/*
 * OPEN and OPENDIR answer ENOSYS: the kernel then stops sending OPEN,
 * OPENDIR, RELEASE and RELEASEDIR for the life of the mount and treats every
 * open as FOPEN_KEEP_CACHE (plus FOPEN_CACHE_DIR for directories) - exactly
 * the reply we would give, without two round trips per open.  This halves
 * the requests of a warm `find`.  Writes never get this far: the mount is
 * "ro", so the VFS refuses them with EROFS.
 */
/* ---- setuid/setgid clearing (killpriv.c has the rules) ---------------- */

/* Is the caller in group gid (its own or a supplementary one)? */
static bool caller_in_group(fuse_req_t req, uint32_t gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t small[64], *groups = small;
	bool in = ctx->gid == gid;

	if (in)
		return true;
	int n = fuse_req_getgroups(req, 64, groups);
	if (n > 64) {
		groups = malloc((size_t)n * sizeof(*groups));
		if (!groups)
			return false;
		n = fuse_req_getgroups(req, n, groups);
	}
	for (int i = 0; i < n && !in; i++)
		in = groups[i] == gid;
	if (groups != small)
		free(groups);
	return in;
}

/* The mode st's file keeps after op by the request's caller.  Requests the
 * kernel makes on its own (pid 0 and uid 0: page writeback of a shared
 * mapping) clear nothing, as a write fault on ext4 does not; a caller we
 * cannot see (pid 0 from another pid namespace) counts as unprivileged. */
static uint32_t killpriv_mode(fuse_req_t req, const struct ubtrfs_stat *st,
			      enum ubtrfs_killpriv_op op)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (S_ISDIR(st->mode) || !(st->mode & (S_ISUID | S_ISGID)) ||
	    (ctx->pid <= 0 && ctx->uid == 0))
		return st->mode;
	bool cap = ubtrfs_pid_capable(ctx->pid, UBTRFS_CAP_FSETID);
	bool in = cap || caller_in_group(req, st->gid);
	return ubtrfs_killpriv_mode(st->mode, op, cap, in);
}

/* Before a write, fallocate or copy into id: clear what the caller's
 * write clears.  0 or -errno. */
static int killpriv_write(fuse_req_t req, ubtrfs_ino id)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_stat st;
	int ret = ubtrfs_stat_mode(s->fs, id, &st);

	if (ret)
		return ret;
	uint32_t mode = killpriv_mode(req, &st, UBTRFS_KILLPRIV_WRITE);
	if (mode == st.mode)
		return 0;
	struct ubtrfs_setattr a;
	memset(&a, 0, sizeof(a));
	a.valid = UBTRFS_SET_MODE;
	a.mode = mode & 07777;
	ret = ubtrfs_setattr(s->fs, id, &a, NULL);
	/* The kernel's cached mode still has the bits (our reply to the empty
	 * SETATTR before the write carried them); what it invalidates after a
	 * write, fallocate or copy is its own business: drop its attributes
	 * (offset -1: no pages), so that exec and permission checks see the
	 * new mode (t-killpriv, cell exec). */
	if (!ret && s->se)
		fuse_lowlevel_notify_inval_inode(s->se, to_node(s, id), -1, 0);
	return ret;
}

/*
 * OPEN answers ENOSYS in both modes: the kernel then sends no OPEN and no
 * RELEASE for regular files again (two round trips per open saved) and
 * keeps their page cache across opens.  That is safe read-write too: every
 * change to a file's bytes comes through this mount's kernel inode, which
 * updates or drops its pages itself (write-through WRITE, truncating
 * SETATTR, fallocate, copy_file_range), and a changed size or mtime in a
 * reply drops them too (auto_inval_data).  There is no per-open state.
 * Without ATOMIC_O_TRUNC (op_init) an O_TRUNC open reaches us as a
 * truncating SETATTR; without CREATE (rw_table) an O_CREAT open as MKNOD.
 */
static void op_open(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	(void)node;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

/*
 * After a reply from the mapped image: drop our page-table entries of the
 * pages sent (the page cache keeps them), so the daemon's resident size
 * stays its own memory - the tree-block cache and buffers - instead of
 * growing with every byte read.
 */
static void release_mapped(const struct iovec *iov, size_t cnt, const char *buf, size_t size)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < cnt; i++) {
		const char *p = iov[i].iov_base;
		if (p >= buf && p < buf + size)
			continue;	/* our scratch buffer */
		uintptr_t a = (uintptr_t)p & ~(page - 1);
		uintptr_t b = ((uintptr_t)p + iov[i].iov_len + page - 1) & ~(page - 1);
		madvise((void *)a, b - a, MADV_DONTNEED);
	}
}

/*
 * READ replies with segments pointing into the mapped image where the data
 * is there uncompressed (verified in place), so the only copy of the bytes
 * is the kernel's, from the page cache into the FUSE reply.
 */
static void op_read(fuse_req_t req, fuse_ino_t node, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;
	(void)fi;

	from_node(s, node, &id);
	/* The data may come from the disk: let another thread read on. */
	ubtrfs_fuse_loop_yield();
	size_t cap = 2 * (size / 4096) + 3;
	char *buf = malloc(size ? size : 1);
	struct iovec *iov = malloc(cap * sizeof(*iov));
	if (!buf || !iov) {
		free(buf);
		free(iov);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t cnt = cap;
	ssize_t n;
	if (s->rw) {
		/* Read-write: a copy made under the library's lock.  Segments
		 * into the mapped image could be overwritten once a later
		 * transaction reuses the space of data freed meanwhile. */
		n = ubtrfs_read(s->fs, id, buf, size, (uint64_t)off);
		cnt = 1;
		iov[0].iov_base = buf;
		iov[0].iov_len = n > 0 ? (size_t)n : 0;
	} else {
		n = ubtrfs_read_iov(s->fs, id, buf, size, (uint64_t)off, iov, &cnt);
	}
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
	} else {
		fuse_reply_iov(req, iov, (int)cnt);
		release_mapped(iov, cnt, buf, size);
	}
	free(buf);
	free(iov);
}

/*
 * OPENDIR answers ENOSYS in both modes: no OPENDIR or RELEASEDIR round
 * trips, and the kernel caches readdir results (FOPEN_CACHE_DIR).  Read-
 * write that is safe: every entry change comes through this mount, and the
 * kernel drops a directory's cache when it changes it (fuse_dir_changed
 * bumps the version the cache is checked against) or sees its mtime move.
 */
static void op_opendir(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	(void)node;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

/*
 * Readdir offsets: "." is 1, ".." is 2, an entry with DIR_INDEX i is i + 2
 * (indexes start at 2, so they never collide); resuming at offset o skips
 * everything at or below o.
 */
struct dir_fill {
	fuse_req_t req;
	struct fuse_state *s;
	char *buf;
	size_t size, used;
	bool plus;
	int err;
};

static int add_entry(struct dir_fill *d, const char *name, const struct ubtrfs_stat *st,
		     uint32_t dtype, uint64_t next_off)
{
	struct stat a;
	size_t n;

	if (d->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.ino = to_node(d->s, st->id);
		e.generation = 1;
		fill_attr(d->s, st, &e.attr);
		e.attr_timeout = attr_timeout(d->s);
		e.entry_timeout = entry_timeout(d->s);
		n = fuse_add_direntry_plus(d->req, d->buf + d->used, d->size - d->used, name, &e,
					   (off_t)next_off);
		/* Every entry but "." and ".." counts a lookup once it is sent
		 * (a failed reply is not undone: the inode then merely stays
		 * an orphan until unmount). */
		if (n <= d->size - d->used && strcmp(name, ".") && strcmp(name, ".."))
			count_lookup(d->s, st->id);
	} else {
		memset(&a, 0, sizeof(a));
		a.st_ino = ubtrfs_fuse_ino(d->s->subvol, st->id);
		a.st_mode = dtype << 12;
		n = fuse_add_direntry(d->req, d->buf + d->used, d->size - d->used, name, &a,
				      (off_t)next_off);
	}
	if (n > d->size - d->used)
		return 1;	/* full: stop, the kernel asks again from next_off */
	d->used += n;
	return 0;
}

static int dir_entry_cb(void *ctx, const struct ubtrfs_dirent *e)
{
	struct dir_fill *d = ctx;
	struct ubtrfs_stat st;
	char name[256];

	memset(&st, 0, sizeof(st));
	st.id = e->id;
	if (d->plus) {
		int ret = ubtrfs_stat(d->s->fs, e->id, &st);
		if (ret) {
			d->err = ret;
			return 1;
		}
	}
	if (!ino_ok(d->s, &st)) {
		d->err = -EOVERFLOW;
		return 1;
	}
	size_t len = e->name_len < sizeof(name) ? e->name_len : sizeof(name) - 1;
	memcpy(name, e->name, len);
	name[len] = 0;
	return add_entry(d, name, &st, e->dtype, e->offset + 2);
}

static void do_readdir(fuse_req_t req, fuse_ino_t node, size_t size, off_t off, bool plus)
{
	struct fuse_state *s = state(req);
	struct dir_fill d = { req, s, NULL, size, 0, plus, 0 };
	struct ubtrfs_stat st;
	ubtrfs_ino id;
	int ret = 0;

	from_node(s, node, &id);
	d.buf = malloc(size ? size : 1);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off < 1) {
		ret = ubtrfs_stat(s->fs, id, &st);
		if (ret || add_entry(&d, ".", &st, 4, 1))
			goto done;
	}
	if (off < 2) {
		ubtrfs_ino up = id;
		if (!(id.subvol == s->root.subvol && id.ino == s->root.ino))
			ubtrfs_parent(s->fs, id, &up);
		if (ubtrfs_stat(s->fs, up, &st) != 0)
			ret = ubtrfs_stat(s->fs, id, &st);
		if (ret || add_entry(&d, "..", &st, 4, 2))
			goto done;
	}
	ret = ubtrfs_readdir(s->fs, id, off > 2 ? (uint64_t)off - 2 : 0, dir_entry_cb, &d);
	if (ret > 0)
		ret = 0;
	if (d.err && d.used == 0)
		ret = d.err;
done:
	if (ret < 0 && d.used == 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t node, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, node, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t node, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, node, size, off, true);
}

static void op_statfs(fuse_req_t req, fuse_ino_t node)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_statfs sf;
	struct statvfs v;
	(void)node;

	int ret = ubtrfs_statfs(s->fs, &sf);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	memset(&v, 0, sizeof(v));
	v.f_bsize = sf.bsize;
	v.f_frsize = sf.bsize;
	v.f_blocks = sf.blocks;
	v.f_bfree = sf.bfree;
	v.f_bavail = sf.bavail;
	v.f_files = sf.files;
	v.f_ffree = sf.ffree;
	v.f_namemax = sf.namelen;
	fuse_reply_statfs(req, &v);
}

/* getxattr and listxattr share one reply protocol: size 0 asks for the
 * size needed, otherwise the bytes (or ERANGE from the library). */
static void reply_xattr_call(fuse_req_t req, size_t size,
			     ssize_t (*get)(void *ctx, char *buf, size_t size), void *ctx)
{
	if (size == 0) {
		ssize_t n = get(ctx, NULL, 0);
		if (n < 0)
			fuse_reply_err(req, (int)-n);
		else
			fuse_reply_xattr(req, (size_t)n);
		return;
	}
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = get(ctx, buf, size);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

struct xattr_call {
	struct fuse_state *s;
	ubtrfs_ino id;
	const char *name;
};

static ssize_t get_value(void *ctx, char *buf, size_t size)
{
	struct xattr_call *c = ctx;
	return ubtrfs_getxattr(c->s->fs, c->id, c->name, buf, size);
}

static ssize_t get_names(void *ctx, char *buf, size_t size)
{
	struct xattr_call *c = ctx;
	return ubtrfs_listxattr(c->s->fs, c->id, buf, size);
}

/*
 * The xattr scan (read-only mounts, unless -o noxattrscan).  `ls -l` asks
 * getxattr("security.selinux") of every file, which FUSE never caches: one
 * round trip per entry, the difference between a warm `ls -lR` here and on
 * a kernel mount.  The first getxattr starts a thread that reads every
 * subvolume tree (ubtrfs_any_xattr); if no inode has an extended attribute
 * - and on a read-only mount none can appear - getxattr answers ENOSYS
 * from then on, and the kernel stops sending it for the life of the mount
 * (callers get EOPNOTSUPP for ordinary names; the kernel reads it as "no
 * ACL", so the ACL names answer ENODATA, and as "no file capabilities").
 * listxattr keeps answering.  Until the scan ends, or if it finds an
 * attribute or fails (a damaged block: the reader logs it), getxattr is
 * answered as always.
 */
static int scan_should_stop(void *ctx)
{
	return atomic_load_explicit(&((struct fuse_state *)ctx)->scan_stop, memory_order_relaxed);
}

static void *xattr_scanner(void *arg)
{
	struct fuse_state *s = arg;
	int ret = ubtrfs_any_xattr(s->fs, scan_should_stop, s);

	atomic_store(&s->xattr_state, ret == 0 ? XS_NONE : XS_SOME);
	if (s->debug)
		fprintf(stderr, "ubtrfs: xattr scan: %s\n",
			ret == 0 ? "no extended attributes; getxattr answers ENOSYS from now on"
			: ret == 1 ? "extended attributes found" : ubtrfs_strerror(ret));
	return NULL;
}

static void xattr_scan_start(struct fuse_state *s)
{
	pthread_mutex_lock(&s->mu);
	if (atomic_load(&s->xattr_state) == XS_IDLE && !atomic_load(&s->scan_stop)) {
		/* RUNNING before the thread exists: its answer comes after. */
		atomic_store(&s->xattr_state, XS_RUNNING);
		if (pthread_create(&s->scanner, NULL, xattr_scanner, s) == 0)
			s->scanner_started = true;
		else
			atomic_store(&s->xattr_state, XS_SOME);
	}
	pthread_mutex_unlock(&s->mu);
}

static void xattr_scan_end(struct fuse_state *s)
{
	pthread_mutex_lock(&s->mu);
	atomic_store(&s->scan_stop, true);
	bool started = s->scanner_started;
	pthread_mutex_unlock(&s->mu);
	if (started)
		pthread_join(s->scanner, NULL);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t node, const char *name, size_t size)
{
	struct xattr_call c = { state(req), { 0, 0 }, name };

	if (c.s->xattr_scan) {
		int st = atomic_load_explicit(&c.s->xattr_state, memory_order_relaxed);
		if (st == XS_NONE) {
			fuse_reply_err(req, ENOSYS);
			return;
		}
		if (st == XS_IDLE)
			xattr_scan_start(c.s);
	}
	from_node(c.s, node, &c.id);
	reply_xattr_call(req, size, get_value, &c);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t node, size_t size)
{
	struct xattr_call c = { state(req), { 0, 0 }, NULL };

	from_node(c.s, node, &c.id);
	reply_xattr_call(req, size, get_names, &c);
}

/* ---- read-write (EXPERIMENTAL) ------------------------------------------- */

/* Reply to an operation that made or changed an inode. */
static void reply_new(fuse_req_t req, int ret, const struct ubtrfs_stat *st)
{
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_entry(req, st);
}

static int acl_follow_mode(struct fuse_state *s, ubtrfs_ino id, uint32_t mode);

/* ACLs a new inode inherits (malloc'd copies; NULL: none). */
struct new_acls {
	void *access, *def;
	size_t access_len, def_len;
};

static void new_acls_free(struct new_acls *a)
{
	free(a->access);
	free(a->def);
}

/*
 * Owner and mode of a new inode: the caller's uid and gid, or the
 * directory's gid when it is setgid (which a new directory inherits), as
 * the kernel's inode_init_owner does.  With ACLs on (the kernel passes the
 * mode without the umask: DONT_MASK), posix_acl_create's rule: under a
 * directory with a default ACL the ACL, not the umask, limits the mode, and
 * the new inode gets it as its access ACL (unless the mode says it all) and,
 * a directory, as its default ACL; elsewhere the umask applies.
 */
static int new_owner(fuse_req_t req, ubtrfs_ino dir, uint32_t *mode, uint32_t *uid,
		     uint32_t *gid, struct new_acls *acls)
{
	struct fuse_state *s = state(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct ubtrfs_stat d;
	int ret = ubtrfs_stat(s->fs, dir, &d);

	memset(acls, 0, sizeof(*acls));
	if (ret)
		return ret;
	*uid = ctx->uid;
	*gid = ctx->gid;
	if (d.mode & S_ISGID) {
		*gid = d.gid;
		if (S_ISDIR(*mode))
			*mode |= S_ISGID;
	}
	if (!s->dont_mask || S_ISLNK(*mode))
		return 0;
	ssize_t n = s->acl ? ubtrfs_getxattr(s->fs, dir, UBTRFS_ACL_DEFAULT, NULL, 0) : -ENODATA;
	if (n > 0) {
		void *buf = malloc((size_t)n), *copy = malloc((size_t)n);
		if (!buf || !copy) {
			free(buf);
			free(copy);
			return -ENOMEM;
		}
		n = ubtrfs_getxattr(s->fs, dir, UBTRFS_ACL_DEFAULT, buf, (size_t)n);
		if (n > 0 && ubtrfs_acl_valid(buf, (size_t)n)) {
			memcpy(copy, buf, (size_t)n);
			uint32_t perm = *mode & 07777;
			int r = ubtrfs_acl_create_masq(copy, (size_t)n, &perm);
			if (r >= 0) {
				*mode = (*mode & ~(uint32_t)07777) | perm;
				if (r == 1) {
					acls->access = copy;
					acls->access_len = (size_t)n;
					copy = NULL;
				}
				if (S_ISDIR(*mode)) {
					acls->def = buf;
					acls->def_len = (size_t)n;
					buf = NULL;
				}
				free(buf);
				free(copy);
				return 0;
			}
		}
		free(buf);
		free(copy);
	}
	*mode &= ~(uint32_t)(ctx->umask & 0777);
	return 0;
}

/* Give a new inode the ACLs it inherits. */
static int apply_acls(struct fuse_state *s, ubtrfs_ino id, const struct new_acls *a)
{
	int ret = 0;

	if (a->access)
		ret = ubtrfs_setxattr(s->fs, id, UBTRFS_ACL_ACCESS, a->access, a->access_len, 0);
	if (!ret && a->def)
		ret = ubtrfs_setxattr(s->fs, id, UBTRFS_ACL_DEFAULT, a->def, a->def_len, 0);
	return ret;
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_stat st;
	uint32_t m = mode, uid, gid;
	ubtrfs_ino dir;

	struct new_acls acls;
	from_node(s, parent, &dir);
	int ret = new_owner(req, dir, &m, &uid, &gid, &acls);
	if (!ret)
		ret = ubtrfs_mknod(s->fs, dir, name, m, uid, gid, major(rdev), minor(rdev), &st);
	if (!ret && (acls.access || acls.def)) {
		ret = apply_acls(s, st.id, &acls);
		if (!ret)
			ret = ubtrfs_stat(s->fs, st.id, &st);
	}
	new_acls_free(&acls);
	reply_new(req, ret, &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	op_mknod(req, parent, name, S_IFDIR | (mode & 07777), 0);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_stat st;
	uint32_t m = S_IFLNK | 0777, uid, gid;
	ubtrfs_ino dir;

	struct new_acls acls;
	from_node(s, parent, &dir);
	int ret = new_owner(req, dir, &m, &uid, &gid, &acls);
	new_acls_free(&acls);
	if (!ret)
		ret = ubtrfs_symlink(s->fs, dir, name, target, uid, gid, &st);
	reply_new(req, ret, &st);
}

static void op_link(fuse_req_t req, fuse_ino_t node, fuse_ino_t newparent, const char *newname)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_stat st;
	ubtrfs_ino id, dir;

	from_node(s, node, &id);
	from_node(s, newparent, &dir);
	reply_new(req, ubtrfs_link(s->fs, id, dir, newname, &st), &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino dir;

	from_node(s, parent, &dir);
	fuse_reply_err(req, -ubtrfs_unlink(s->fs, dir, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino dir;

	from_node(s, parent, &dir);
	fuse_reply_err(req, -ubtrfs_rmdir(s->fs, dir, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino dir, newdir;

	/* RENAME_NOREPLACE and RENAME_EXCHANGE have the library's values;
	 * RENAME_WHITEOUT (overlayfs) is refused there with EINVAL. */
	from_node(s, parent, &dir);
	from_node(s, newparent, &newdir);
	int ret = ubtrfs_rename(s->fs, dir, name, newdir, newname, flags);
	fuse_reply_err(req, -ret);
	/*
	 * A directory moved to another parent has a new "..", which its
	 * readdir cache in the kernel (no OPENDIR: op_opendir) still holds:
	 * nothing the kernel does to it at a rename drops that cache.  Drop
	 * it, after the reply (the rename holds locks until then).
	 */
	if (ret || parent == newparent)
		return;
	struct ubtrfs_stat st;
	if (ubtrfs_lookup(s->fs, newdir, newname, &st) == 0 && S_ISDIR(st.mode))
		fuse_lowlevel_notify_inval_inode(s->se, to_node(s, st.id), 0, 0);
	if ((flags & RENAME_EXCHANGE) && ubtrfs_lookup(s->fs, dir, name, &st) == 0 &&
	    S_ISDIR(st.mode))
		fuse_lowlevel_notify_inval_inode(s->se, to_node(s, st.id), 0, 0);
}

/* An empty SETATTR whose caller's system call could not be read: said
 * for the first few only (where /proc cannot be read at all - hidepid,
 * Yama - it would be every write into a setuid file). */
static void log_unknown_caller(ubtrfs_ino id, pid_t pid)
{
	static atomic_uint said;
	unsigned n = atomic_fetch_add(&said, 1);

	if (n >= 5)
		return;
	fprintf(stderr,
		"ubtrfs: subvolume %llu inode %llu: cannot tell what pid %d's empty SETATTR is "
		"for; clearing setuid/setgid as for chown(-1, -1)%s\n",
		(unsigned long long)id.subvol, (unsigned long long)id.ino, (int)pid,
		n == 4 ? " (not said again)" : "");
}

static void op_setattr(fuse_req_t req, fuse_ino_t node, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fuse_state *s = state(req);
	struct ubtrfs_setattr a;
	struct ubtrfs_stat st;
	struct stat out;
	ubtrfs_ino id;

	from_node(s, node, &id);
	memset(&a, 0, sizeof(a));
	if (to_set & FUSE_SET_ATTR_MODE) {
		a.valid |= UBTRFS_SET_MODE;
		a.mode = attr->st_mode & 07777;
	}
	/*
	 * A truncate or a chown: the bits the VFS rule clears, on top of any
	 * mode the kernel sent.  An empty SETATTR (nothing in it) is
	 * chown(-1, -1) or the kernel's step before a write: under KILLPRIV_V2
	 * told apart below; without it only the group rule, and only for the
	 * owner (or CAP_FOWNER) - for anyone else chown(-1, -1) would be EPERM
	 * on ext4, which cannot be told apart then from a write's request.
	 */
	const int attrs = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
			  FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
			  FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
	bool empty = !(to_set & attrs);
	if (to_set & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) || empty) {
		int r = ubtrfs_stat(s->fs, id, &st);
		if (r) {
			fuse_reply_err(req, -r);
			return;
		}
		const struct fuse_ctx *ctx = fuse_req_ctx(req);
		enum ubtrfs_killpriv_op op = to_set & FUSE_SET_ATTR_SIZE ? UBTRFS_KILLPRIV_WRITE :
					     empty ? UBTRFS_KILLPRIV_SGID_ONLY :
						     UBTRFS_KILLPRIV_CHOWN;
		uint32_t keep = st.mode;
		/* KILLPRIV_V2: an empty SETATTR is chown(-1, -1), or the
		 * kernel's step before a write into a file it finds bits or
		 * security.capability on (the WRITE then clears by itself).
		 * The caller's system call tells them apart; when it is
		 * unknown, the chown rule (it clears what a write by a caller
		 * without CAP_FSETID clears, and more: erring towards
		 * clearing), but no EPERM, which would fail a write. */
		int sc = empty && s->io.killpriv_v2 ? ubtrfs_pid_syscall(ctx->pid) : -2;
		if (sc == UBTRFS_SYSCALL_UNKNOWN && ctx->pid > 0)
			log_unknown_caller(id, ctx->pid);
		if (sc == UBTRFS_SYSCALL_WRITE) {
			/* nothing: the WRITE that follows clears */
		} else if (sc != -2) {
			keep = killpriv_mode(req, &st, UBTRFS_KILLPRIV_CHOWN);
			/* The VFS makes chown(-1, -1) a mode change: the
			 * owner's or CAP_FOWNER's only. */
			if (sc == UBTRFS_SYSCALL_CHOWN && keep != st.mode && ctx->uid != st.uid &&
			    !ubtrfs_pid_capable(ctx->pid, UBTRFS_CAP_FOWNER)) {
				fuse_reply_err(req, EPERM);
				return;
			}
		} else if (!empty || ctx->uid == st.uid ||
			   (st.mode & S_ISGID && ubtrfs_pid_capable(ctx->pid, UBTRFS_CAP_FOWNER))) {
			keep = killpriv_mode(req, &st, op);
		}
		if (keep != st.mode) {
			if (!(a.valid & UBTRFS_SET_MODE))
				a.mode = st.mode & 07777;
			a.valid |= UBTRFS_SET_MODE;
			a.mode &= ~(uint32_t)(st.mode & ~keep);
		}
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		a.valid |= UBTRFS_SET_UID;
		a.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		a.valid |= UBTRFS_SET_GID;
		a.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		a.valid |= UBTRFS_SET_SIZE;
		a.size = (uint64_t)attr->st_size;
		/* ftruncate(2) (a handle) sets mtime and ctime even to the same
		 * size, as the VFS asks of a kernel filesystem; FUSE sends no
		 * time with it.  truncate(2) by path changes them only with the
		 * size (the library's rule). */
		if (fi && !(to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)))
			a.valid |= UBTRFS_SET_MTIME | UBTRFS_SET_MTIME_NOW;
		/* An O_TRUNC open comes as this same SETATTR by path (no OPEN,
		 * no ATOMIC_O_TRUNC), and sets the times even to the same
		 * size, as open(2) does: the caller's system call tells it from
		 * truncate(2).  (Unknowable from another pid namespace: there
		 * an O_TRUNC of an empty file keeps its times.) */
		else if (!fi && a.size == st.size &&
			 !(to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) &&
			 ubtrfs_pid_syscall(fuse_req_ctx(req)->pid) == UBTRFS_SYSCALL_OPEN)
			a.valid |= UBTRFS_SET_MTIME | UBTRFS_SET_MTIME_NOW;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		a.valid |= UBTRFS_SET_ATIME | UBTRFS_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		a.valid |= UBTRFS_SET_ATIME;
		a.atime.sec = attr->st_atim.tv_sec;
		a.atime.nsec = (uint32_t)attr->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		a.valid |= UBTRFS_SET_MTIME | UBTRFS_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		a.valid |= UBTRFS_SET_MTIME;
		a.mtime.sec = attr->st_mtim.tv_sec;
		a.mtime.nsec = (uint32_t)attr->st_mtim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		a.valid |= UBTRFS_SET_CTIME;
		a.ctime.sec = attr->st_ctim.tv_sec;
		a.ctime.nsec = (uint32_t)attr->st_ctim.tv_nsec;
	}
	int ret = ubtrfs_setattr(s->fs, id, &a, &st);
	if (!ret && s->acl && (a.valid & UBTRFS_SET_MODE)) {
		ret = acl_follow_mode(s, id, st.mode);
		/* The ACL's rewrite set the ctime again: reply with that. */
		if (ret == 1)
			ret = ubtrfs_stat(s->fs, id, &st);
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fill_attr(s, &st, &out);
	fuse_reply_attr(req, &out, attr_timeout(s));
}

static void op_write(fuse_req_t req, fuse_ino_t node, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;
	(void)fi;

	from_node(s, node, &id);
	int ret = size ? killpriv_write(req, id) : 0;
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	ssize_t n = ubtrfs_write(s->fs, id, buf, size, (uint64_t)off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void op_fsync(fuse_req_t req, fuse_ino_t node, int datasync, struct fuse_file_info *fi)
{
	(void)node;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, -ubtrfs_commit(state(req)->fs));
}

/* chmod of an inode with an access ACL: the ACL follows (posix_acl_chmod).
 * 0: no ACL to follow, 1: rewritten, <0: error. */
static int acl_follow_mode(struct fuse_state *s, ubtrfs_ino id, uint32_t mode)
{
	uint8_t buf[4 + 8 * 64];
	ssize_t n = ubtrfs_getxattr(s->fs, id, UBTRFS_ACL_ACCESS, buf, sizeof(buf));

	if (n == -ENODATA)
		return 0;
	if (n < 0)
		return n == -ERANGE ? 0 : (int)n;	/* huge ACLs: left alone */
	if (!ubtrfs_acl_valid(buf, (size_t)n) || ubtrfs_acl_chmod(buf, (size_t)n, mode))
		return 0;	/* not ours to repair */
	int ret = ubtrfs_setxattr(s->fs, id, UBTRFS_ACL_ACCESS, buf, (size_t)n, 0);
	return ret ? ret : 1;
}

/*
 * setfacl: an access ACL sets the mode's permission bits too and is not
 * stored when the mode says it all (posix_acl_update_mode); a default ACL
 * only exists on directories.
 */
static int set_acl(struct fuse_state *s, ubtrfs_ino id, const char *name, const char *value,
		   size_t size, int flags)
{
	struct ubtrfs_stat st;
	int ret = ubtrfs_stat(s->fs, id, &st);

	if (ret)
		return ret;
	if (!ubtrfs_acl_valid(value, size))
		return -EINVAL;
	if (!strcmp(name, UBTRFS_ACL_DEFAULT))
		return S_ISDIR(st.mode) ? ubtrfs_setxattr(s->fs, id, name, value, size, flags)
					: -EACCES;
	uint32_t mode = st.mode;
	int equiv = ubtrfs_acl_mode(value, size, &mode);
	if (equiv < 0)
		return equiv;
	if (equiv == 0) {
		ret = ubtrfs_removexattr(s->fs, id, name);
		if (ret == -ENODATA)
			ret = 0;
	} else {
		ret = ubtrfs_setxattr(s->fs, id, name, value, size, flags);
	}
	if (!ret && mode != st.mode) {
		struct ubtrfs_setattr a;
		memset(&a, 0, sizeof(a));
		a.valid = UBTRFS_SET_MODE;
		a.mode = mode & 07777;
		ret = ubtrfs_setattr(s->fs, id, &a, NULL);
	}
	return ret;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t node, const char *name, const char *value,
			size_t size, int flags)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;

	from_node(s, node, &id);
	if (s->acl && (!strcmp(name, UBTRFS_ACL_ACCESS) || !strcmp(name, UBTRFS_ACL_DEFAULT))) {
		fuse_reply_err(req, -set_acl(s, id, name, value, size, flags));
		return;
	}
	fuse_reply_err(req, -ubtrfs_setxattr(s->fs, id, name, value, size, flags));
}

static void op_removexattr(fuse_req_t req, fuse_ino_t node, const char *name)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;

	from_node(s, node, &id);
	fuse_reply_err(req, -ubtrfs_removexattr(s->fs, id, name));
}

static void op_forget(fuse_req_t req, fuse_ino_t node, uint64_t nlookup)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;

	from_node(s, node, &id);
	forget_lookup(s, id, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;

	for (size_t i = 0; i < count; i++) {
		from_node(s, forgets[i].ino, &id);
		forget_lookup(s, id, forgets[i].nlookup);
	}
	fuse_reply_none(req);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t node, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;
	(void)fi;

	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	from_node(s, node, &id);
	int ret = killpriv_write(req, id);
	if (!ret)
		ret = ubtrfs_fallocate(s->fs, id, mode, (uint64_t)off, (uint64_t)len);
	fuse_reply_err(req, -ret);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino src, dst;
	(void)fi_in;
	(void)fi_out;

	if (flags || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	from_node(s, in, &src);
	from_node(s, out, &dst);
	int ret = len ? killpriv_write(req, dst) : 0;
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	ssize_t n = ubtrfs_copy_range(s->fs, src, (uint64_t)off_in, dst, (uint64_t)off_out, len);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* SEEK_DATA / SEEK_HOLE (the kernel handles SEEK_SET/CUR/END itself). */
static void op_lseek(fuse_req_t req, fuse_ino_t node, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct fuse_state *s = state(req);
	ubtrfs_ino id;
	uint64_t out;
	(void)fi;

	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	from_node(s, node, &id);
	int ret = ubtrfs_lseek(s->fs, id, (uint64_t)off, whence, &out);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_lseek(req, (off_t)out);
}

/* Commit every commit_interval seconds until stopped. */
static void *commit_timer(void *arg)
{
	struct fuse_state *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += s->commit_interval;
		pthread_cond_timedwait(&s->cond, &s->mu, &ts);
		if (s->stop)
			break;
		pthread_mutex_unlock(&s->mu);
		int ret = ubtrfs_commit(s->fs);
		if (ret && ret != -EROFS)
			fprintf(stderr, "ubtrfs: periodic commit failed: %s\n", ubtrfs_strerror(ret));
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void stop_timer(struct fuse_state *s)
{
	if (!s->timer_running)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->timer, NULL);
	s->timer_running = false;
}

/* Unmount: everything still running goes to disk. */
static void op_destroy(void *userdata)
{
	struct fuse_state *s = userdata;

	if (!s->rw)
		return;
	stop_timer(s);
	int ret = ubtrfs_commit(s->fs);
	if (ret)
		fprintf(stderr, "ubtrfs: commit at unmount failed: %s\n", ubtrfs_strerror(ret));
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.open = op_open,
	.read = op_read,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.lseek = op_lseek,
};

/* The read-write table: the same plus every changing operation.  No
 * CREATE: O_CREAT opens come as MKNOD (then no OPEN, no RELEASE).  No
 * FLUSH: the first answers ENOSYS and the kernel sends no more (nothing is
 * buffered here).  No RELEASE: OPEN and OPENDIR answer ENOSYS, so none
 * come. */
static void rw_table(struct fuse_lowlevel_ops *t)
{
	*t = ops;
	t->mknod = op_mknod;
	t->mkdir = op_mkdir;
	t->symlink = op_symlink;
	t->link = op_link;
	t->unlink = op_unlink;
	t->rmdir = op_rmdir;
	t->rename = op_rename;
	t->setattr = op_setattr;
	t->write = op_write;
	t->fsync = op_fsync;
	t->fsyncdir = op_fsync;
	t->setxattr = op_setxattr;
	t->removexattr = op_removexattr;
	t->fallocate = op_fallocate;
	t->copy_file_range = op_copy_file_range;
	t->forget = op_forget;
	t->forget_multi = op_forget_multi;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	return ubtrfs_init_io_read(&((struct fuse_state *)userdata)->io, fd, buf, len);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	return ubtrfs_init_io_writev(&((struct fuse_state *)userdata)->io, fd, iov, count);
}

static void block_hook(void *ctx)
{
	(void)ctx;
	ubtrfs_fuse_loop_yield();
}

/*
 * The write transaction was aborted (the library's abort hook, called
 * once with its write lock held): readers are back at the last commit,
 * but the kernel caches names for a day, among them names the aborted
 * transaction made (positive entries) or removed (negative ones).
 * FUSE_NOTIFY_INC_EPOCH (Linux 6.16, protocol 7.44) makes the kernel look
 * every cached name up again (listings follow the directory's mtime
 * within RW_ATTR_TIMEOUT, as before).  libfuse 3.14
 * cannot send it, so it is written here: an out header whose unique is 0
 * and whose error field is the notify code.  Attributes are cached for
 * RW_ATTR_TIMEOUT only.
 */
#define UBT_FUSE_NOTIFY_INC_EPOCH 8
static void abort_hook(void *ctx)
{
	struct fuse_state *s = ctx;
	struct {
		uint32_t len;
		int32_t error;
		uint64_t unique;
	} oh = { sizeof(oh), UBT_FUSE_NOTIFY_INC_EPOCH, 0 };
	ssize_t n = write(fuse_session_fd(s->se), &oh, sizeof(oh));

	if (n == (ssize_t)sizeof(oh))
		fprintf(stderr, "ubtrfs: the write transaction was aborted; the kernel looks "
			"every cached name up again\n");
	else
		fprintf(stderr, "ubtrfs: the write transaction was aborted; the kernel cannot "
			"be told to drop its cached names (FUSE_NOTIFY_INC_EPOCH: %s): names "
			"made or removed since the last commit may show until the unmount\n",
			n < 0 ? strerror(errno) : "short write");
}

int ubtrfs_fuse_serve(ubtrfs_fs *fs, const struct ubtrfs_fuse_opts *o)
{
	struct fuse_state s = { 0 };
	char optbuf[4 * PATH_MAX + 4096];
	int ret;

#ifdef __GLIBC__
	/* glibc gives each worker thread its own malloc arena; freed memory
	 * scattered over 16 of them kept `rm -rf` of 21k entries at 124-134
	 * MiB resident against 74-93 MiB with one or two (same speed). */
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 2);
#endif
	s.fs = fs;
	s.subvol = o->subvol;
	s.rw = o->rw && !ubtrfs_is_readonly(fs);
	s.commit_interval = o->commit_interval ? o->commit_interval : DEFAULT_COMMIT_INTERVAL;
	s.xattr_scan = !o->no_xattr_scan && ubtrfs_is_readonly(fs);	/* nothing can add one */
	s.debug = o->debug;
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cond, NULL);
	ret = ubtrfs_subvol_root(fs, o->subvol, &s.root);
	if (ret) {
		fprintf(stderr, "ubtrfs: subvolume %llu: %s\n", (unsigned long long)o->subvol,
			ubtrfs_strerror(ret));
		return 1;
	}
	/* libfuse splits options at unescaped commas: escape the device path. */
	char fsname[2 * PATH_MAX];
	size_t k = 0;
	for (const char *c = o->fsname; *c && k + 2 < sizeof(fsname); c++) {
		if (*c == ',' || *c == '\\')
			fsname[k++] = '\\';
		fsname[k++] = *c;
	}
	fsname[k] = 0;
	int olen = snprintf(optbuf, sizeof(optbuf),
			    "%s,default_permissions,fsname=%s,subtype=ubtrfs%s%s%s",
			    s.rw ? "rw" : "ro", fsname, o->allow_other ? ",allow_other" : "",
			    o->extra_fuse_opts && *o->extra_fuse_opts ? "," : "",
			    o->extra_fuse_opts ? o->extra_fuse_opts : "");
	if (olen < 0 || (size_t)olen >= sizeof(optbuf)) {
		fprintf(stderr, "ubtrfs: mount options too long\n");
		return 1;
	}
	char *argv[] = { "ubtrfs", "-o", optbuf, o->debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);
	struct fuse_lowlevel_ops rw_ops;
	const struct fuse_lowlevel_ops *table = &ops;
	if (s.rw) {
		rw_table(&rw_ops);
		table = &rw_ops;
	}
	struct fuse_session *se = fuse_session_new(&args, table, sizeof(*table), &s);
	s.se = se;
	if (!se) {
		fuse_opt_free_args(&args);
		return 1;
	}
	ret = 1;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy;
	if (fuse_session_mount(se, o->mountpoint) != 0)
		goto out_signals;
	/* Read-write: our own device I/O, which offers the kernel to leave
	 * setuid/setgid clearing to us (init_io.c).  UBTRFS_NO_KILLPRIV_V2=1
	 * keeps the kernel's own clearing (for comparison). */
	const char *nokp = getenv("UBTRFS_NO_KILLPRIV_V2");
	ubtrfs_init_io_reset(&s.io, s.rw && !(nokp && *nokp == '1'));
	if (s.rw) {
		static const struct fuse_custom_io cio = { .read = io_read, .writev = io_writev };
		if (fuse_session_custom_io(se, &cio, fuse_session_fd(se)) != 0)
			ubtrfs_init_io_reset(&s.io, false);	/* libfuse's own I/O */
	}
	/* The mount exists now: the parent may return to its caller. */
	if (fuse_daemonize(o->foreground) != 0)
		goto out_unmount;
	/* Requests are handled on the thread that reads them; a handler about
	 * to wait lets another thread read on (loop.c).  The hook is set
	 * before any other thread uses the handle. */
	ubtrfs_set_block_hook(fs, block_hook, NULL);
	if (s.rw)
		ubtrfs_set_abort_hook(fs, abort_hook, &s);
	/* Threads after daemonizing: fork keeps only the calling thread. */
	if (s.rw && pthread_create(&s.timer, NULL, commit_timer, &s) == 0)
		s.timer_running = true;
	ret = ubtrfs_fuse_loop(se, MAX_THREADS);
	ret = ret < 0 ? 1 : 0;
out_unmount:
	stop_timer(&s);
	xattr_scan_end(&s);
	ubtrfs_set_block_hook(fs, NULL, NULL);
	ubtrfs_set_abort_hook(fs, NULL, NULL);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.mu);
	return ret;
}
