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
 * may be cached by the kernel for a long time (read-only mount).
 *
 * Threads: libfuse's multi-threaded loop; the library is thread-safe.
 */
#define FUSE_USE_VERSION 312
#include "ubtrfs_fuse.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define INO_SHIFT 40
#define INO_MASK ((1ull << INO_SHIFT) - 1)
#define CACHE_TIMEOUT 86400.0

struct fuse_state {
	ubtrfs_fs *fs;
	uint64_t subvol;	/* mounted subvolume */
	ubtrfs_ino root;	/* its root directory */
};

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
	e.attr_timeout = CACHE_TIMEOUT;
	e.entry_timeout = CACHE_TIMEOUT;
	fuse_reply_entry(req, &e);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* Let the kernel cache pages across opens and read ahead freely. */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
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
	 */
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL;
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
		e.entry_timeout = CACHE_TIMEOUT;
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
	fuse_reply_attr(req, &a, CACHE_TIMEOUT);
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
static void op_open(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	(void)node;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
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
	ssize_t n = ubtrfs_read_iov(s->fs, id, buf, size, (uint64_t)off, iov, &cnt);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_iov(req, iov, (int)cnt);
	free(buf);
	free(iov);
}

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
		e.attr_timeout = CACHE_TIMEOUT;
		e.entry_timeout = CACHE_TIMEOUT;
		n = fuse_add_direntry_plus(d->req, d->buf + d->used, d->size - d->used, name, &e,
					   (off_t)next_off);
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

static void op_getxattr(fuse_req_t req, fuse_ino_t node, const char *name, size_t size)
{
	struct xattr_call c = { state(req), { 0, 0 }, name };

	from_node(c.s, node, &c.id);
	reply_xattr_call(req, size, get_value, &c);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t node, size_t size)
{
	struct xattr_call c = { state(req), { 0, 0 }, NULL };

	from_node(c.s, node, &c.id);
	reply_xattr_call(req, size, get_names, &c);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
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
};

int ubtrfs_fuse_serve(ubtrfs_fs *fs, const struct ubtrfs_fuse_opts *o)
{
	struct fuse_state s = { fs, o->subvol, { 0, 0 } };
	char optbuf[4096];
	int ret;

	ret = ubtrfs_subvol_root(fs, o->subvol, &s.root);
	if (ret) {
		fprintf(stderr, "ubtrfs: subvolume %llu: %s\n", (unsigned long long)o->subvol,
			ubtrfs_strerror(ret));
		return 1;
	}
	snprintf(optbuf, sizeof(optbuf), "ro,default_permissions,fsname=%s,subtype=ubtrfs%s%s%s",
		 o->fsname, o->allow_other ? ",allow_other" : "",
		 o->extra_fuse_opts && *o->extra_fuse_opts ? "," : "",
		 o->extra_fuse_opts ? o->extra_fuse_opts : "");
	char *argv[] = { "ubtrfs", "-o", optbuf, o->debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), &s);
	if (!se) {
		fuse_opt_free_args(&args);
		return 1;
	}
	ret = 1;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy;
	if (fuse_session_mount(se, o->mountpoint) != 0)
		goto out_signals;
	/* The mount exists now: the parent may return to its caller. */
	if (fuse_daemonize(o->foreground) != 0)
		goto out_unmount;
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (cfg) {
		fuse_loop_cfg_set_clone_fd(cfg, 0);
		/* Keep idle workers: a thread created per request costs more than
		 * the request itself. */
		fuse_loop_cfg_set_idle_threads(cfg, 8);
		fuse_loop_cfg_set_max_threads(cfg, 16);
		ret = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	} else {
		ret = fuse_session_loop(se);
	}
	ret = ret < 0 ? 1 : 0;
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return ret;
}
