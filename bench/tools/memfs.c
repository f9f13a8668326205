/*
 * memfs: an in-memory FUSE filesystem that does as little as a filesystem
 * can, for bench/run's `fuse-memfs` target: the ceiling any FUSE
 * filesystem reaches on this machine and kernel for the write workloads.
 *
 * It negotiates what ubtrfs's read-write mount negotiates (see
 * src/fuse/fuse_ll.c op_init): default_permissions, names cached a day,
 * attributes for 1 s, no OPEN/OPENDIR/FLUSH round trips (ENOSYS), no
 * READDIRPLUS, POSIX ACLs and DONT_MASK where offered, setuid clearing by
 * the daemon (HANDLE_KILLPRIV_V2 through ubtrfs's init_io.c, compiled in),
 * O_CREAT opens as MKNOD.  So the kernel sends it the same requests it
 * sends ubtrfs, and the difference between the two is ubtrfs's own work:
 * the B-trees, allocation, checksums, the image.  Each request here is a
 * hash lookup or a memcpy.
 *
 * Not a filesystem to keep data in: nothing survives the unmount, no
 * xattrs are stored (getxattr and removexattr answer ENODATA, setxattr
 * EOPNOTSUPP), rename has no NOREPLACE/EXCHANGE, fallocate reserves
 * nothing.  It has every operation ubtrfs's read-write mount has, so the
 * kernel falls back to nothing ubtrfs would not.
 *
 * Build (bench/run does): cc -std=c17 -O2 -Wall -Wextra -Werror memfs.c ../../src/fuse/init_io.c
 *   -I../../src/fuse $(pkg-config --cflags --libs fuse3)
 * Run: memfs [-f] MOUNTPOINT
 */
#define FUSE_USE_VERSION 34
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuse_init_io.h"

#define ENTRY_TIMEOUT 86400.0
#define ATTR_TIMEOUT 1.0

struct dent {
	struct dent *hnext;	/* hash chain */
	uint64_t parent, ino;
	uint32_t slot;		/* index in the parent's entry list */
	uint32_t hash;
	char name[];
};

struct node {
	struct stat st;
	uint64_t lookups;
	char *data;		/* file data, or a symlink's target */
	size_t cap;
	struct dent **ents;	/* a directory's entries; NULL where removed */
	uint32_t nents, capents;
	bool live;		/* has a name, or is still looked up */
};

static struct node *nodes;
static uint64_t nnodes, capnodes;
static struct dent **htab;
static uint64_t hmask;
static struct ubtrfs_init_io iost;
static bool dont_mask;	/* the kernel leaves the umask to us */

static uint32_t name_hash(uint64_t parent, const char *name)
{
	uint32_t h = 2166136261u ^ (uint32_t)parent;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h ^ (h >> 15);
}

static struct dent *dfind(uint64_t parent, const char *name)
{
	uint32_t h = name_hash(parent, name);
	for (struct dent *d = htab[h & hmask]; d; d = d->hnext)
		if (d->hash == h && d->parent == parent && strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

static struct node *node_of(fuse_ino_t ino)
{
	return ino >= 1 && ino < nnodes && nodes[ino].live ? &nodes[ino] : NULL;
}

static void now_ts(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

static uint64_t node_new(mode_t mode, const struct fuse_ctx *ctx, dev_t rdev)
{
	if (nnodes == capnodes) {
		uint64_t cap = capnodes ? 2 * capnodes : 4096;
		struct node *n = realloc(nodes, cap * sizeof(*n));
		if (!n)
			return 0;
		nodes = n;
		capnodes = cap;
	}
	uint64_t ino = nnodes++;	/* 0 only for the placeholder */
	struct node *n = &nodes[ino];
	memset(n, 0, sizeof(*n));
	n->live = true;
	n->st.st_ino = ino;
	n->st.st_mode = mode;
	n->st.st_nlink = S_ISDIR(mode) ? 2 : 1;
	n->st.st_uid = ctx ? ctx->uid : 0;
	n->st.st_gid = ctx ? ctx->gid : 0;
	n->st.st_rdev = rdev;
	n->st.st_blksize = 4096;
	now_ts(&n->st.st_atim);
	n->st.st_mtim = n->st.st_ctim = n->st.st_atim;
	return ino;
}

static int dlink(uint64_t parent, const char *name, uint64_t ino)
{
	struct node *p = &nodes[parent];
	size_t len = strlen(name);
	struct dent *d = malloc(sizeof(*d) + len + 1);
	if (!d)
		return ENOMEM;
	if (p->nents == p->capents) {
		uint32_t cap = p->capents ? 2 * p->capents : 16;
		struct dent **e = realloc(p->ents, cap * sizeof(*e));
		if (!e) {
			free(d);
			return ENOMEM;
		}
		p->ents = e;
		p->capents = cap;
	}
	memcpy(d->name, name, len + 1);
	d->parent = parent;
	d->ino = ino;
	d->hash = name_hash(parent, name);
	d->slot = p->nents;
	p->ents[p->nents++] = d;
	d->hnext = htab[d->hash & hmask];
	htab[d->hash & hmask] = d;
	now_ts(&p->st.st_mtim);
	p->st.st_ctim = p->st.st_mtim;
	p->st.st_size += (off_t)len;
	return 0;
}

static void dunlink(struct dent *d)
{
	struct dent **pp = &htab[d->hash & hmask];
	while (*pp != d)
		pp = &(*pp)->hnext;
	*pp = d->hnext;
	struct node *p = &nodes[d->parent];
	p->ents[d->slot] = NULL;
	p->st.st_size -= (off_t)strlen(d->name);
	now_ts(&p->st.st_mtim);
	p->st.st_ctim = p->st.st_mtim;
	free(d);
}

/* The node goes once it has no name and the kernel forgot it. */
static void node_maybe_free(uint64_t ino)
{
	struct node *n = &nodes[ino];
	if (!n->live || n->lookups || n->st.st_nlink > (S_ISDIR(n->st.st_mode) ? 1u : 0u))
		return;
	if (S_ISDIR(n->st.st_mode) && n->st.st_nlink)
		return;
	free(n->data);
	free(n->ents);
	n->data = NULL;
	n->ents = NULL;
	n->live = false;
}

/* One name of n in directory `dir` goes (the caller removes the entry):
 * its link counts.  ENOTEMPTY for a directory with entries, else 0. */
static int drop_link(uint64_t dir, struct node *n)
{
	if (!S_ISDIR(n->st.st_mode)) {
		n->st.st_nlink--;
		return 0;
	}
	for (uint32_t i = 0; i < n->nents; i++)
		if (n->ents[i])
			return ENOTEMPTY;
	nodes[dir].st.st_nlink--;
	n->st.st_nlink = 0;
	return 0;
}

static void reply_entry(fuse_req_t req, uint64_t ino)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = 1;
	e.attr = nodes[ino].st;
	e.attr_timeout = ATTR_TIMEOUT;
	e.entry_timeout = ENTRY_TIMEOUT;
	nodes[ino].lookups++;
	fuse_reply_entry(req, &e);
}

static void m_init(void *ud, struct fuse_conn_info *conn)
{
	(void)ud;
	conn->want &= ~(unsigned)(FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_READDIRPLUS |
				  FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_WRITEBACK_CACHE |
				  FUSE_CAP_HANDLE_KILLPRIV);
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* As ubtrfs: DONT_MASK only along with ACLs (the umask is then ours). */
	if (conn->capable & FUSE_CAP_POSIX_ACL) {
		conn->want |= FUSE_CAP_POSIX_ACL;
		if (conn->capable & FUSE_CAP_DONT_MASK)
			conn->want |= FUSE_CAP_DONT_MASK;
	}
	dont_mask = (conn->want & FUSE_CAP_DONT_MASK) != 0;
}

static void m_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct dent *d = node_of(parent) ? dfind(parent, name) : NULL;
	if (!d) {
		/* A negative entry, cached as long as names are. */
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.entry_timeout = ENTRY_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry(req, d->ino);
}

static void m_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	if (ino < nnodes && nodes[ino].live) {
		nodes[ino].lookups -= n <= nodes[ino].lookups ? n : nodes[ino].lookups;
		node_maybe_free(ino);
	}
	fuse_reply_none(req);
}

static void m_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++) {
		uint64_t ino = f[i].ino;
		if (ino < nnodes && nodes[ino].live) {
			nodes[ino].lookups -= f[i].nlookup <= nodes[ino].lookups ?
						      f[i].nlookup : nodes[ino].lookups;
			node_maybe_free(ino);
		}
	}
	fuse_reply_none(req);
}

static void m_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_attr(req, &n->st, ATTR_TIMEOUT);
}

static int resize(struct node *n, off_t size)
{
	if ((size_t)size > n->cap) {
		size_t cap = n->cap ? n->cap : 4096;
		while (cap < (size_t)size)
			cap *= 2;
		char *d = realloc(n->data, cap);
		if (!d)
			return ENOMEM;
		n->data = d;
		n->cap = cap;
	}
	if (size > n->st.st_size)
		memset(n->data + n->st.st_size, 0, (size_t)(size - n->st.st_size));
	n->st.st_size = size;
	n->st.st_blocks = (size + 511) / 512;
	return 0;
}

/* resize, only ever growing: for writes past the end. */
static int grow(struct node *n, off_t end)
{
	return end > n->st.st_size ? resize(n, end) : 0;
}

static void m_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int set,
		      struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct timespec now;
	now_ts(&now);
	if (set & FUSE_SET_ATTR_MODE)
		n->st.st_mode = (n->st.st_mode & S_IFMT) | (a->st_mode & 07777);
	if (set & FUSE_SET_ATTR_UID)
		n->st.st_uid = a->st_uid;
	if (set & FUSE_SET_ATTR_GID)
		n->st.st_gid = a->st_gid;
	if ((set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && S_ISREG(n->st.st_mode))
		n->st.st_mode &= ~(mode_t)(S_ISUID | ((n->st.st_mode & S_IXGRP) ? S_ISGID : 0));
	if (set & FUSE_SET_ATTR_SIZE) {
		if (!S_ISREG(n->st.st_mode)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		int err = resize(n, a->st_size);
		if (err) {
			fuse_reply_err(req, err);
			return;
		}
		n->st.st_mtim = now;
	}
	if (set & FUSE_SET_ATTR_ATIME_NOW)
		n->st.st_atim = now;
	else if (set & FUSE_SET_ATTR_ATIME)
		n->st.st_atim = a->st_atim;
	if (set & FUSE_SET_ATTR_MTIME_NOW)
		n->st.st_mtim = now;
	else if (set & FUSE_SET_ATTR_MTIME)
		n->st.st_mtim = a->st_mtim;
	n->st.st_ctim = now;
	fuse_reply_attr(req, &n->st, ATTR_TIMEOUT);
}

static void make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		 const char *link)
{
	struct node *p = node_of(parent);
	if (!p || !S_ISDIR(p->st.st_mode)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (dfind(parent, name)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	/* DONT_MASK: the umask is ours to apply (no default ACLs here). */
	if (dont_mask && !S_ISLNK(mode))
		mode &= ~(mode_t)fuse_req_ctx(req)->umask;
	uint64_t ino = node_new(mode, fuse_req_ctx(req), rdev);
	if (!ino) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (link) {
		nodes[ino].data = strdup(link);
		nodes[ino].st.st_size = (off_t)strlen(link);
	}
	if (dlink(parent, name, ino)) {
		nodes[ino].live = false;
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (S_ISDIR(mode))
		nodes[parent].st.st_nlink++;
	reply_entry(req, ino);
}

static void m_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	make(req, parent, name, mode, rdev, NULL);
}

static void m_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void m_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void m_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct node *n = node_of(ino);
	if (!n || !S_ISLNK(n->st.st_mode))
		fuse_reply_err(req, EINVAL);
	else
		fuse_reply_readlink(req, n->data);
}

static void m_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	struct node *n = node_of(ino);
	if (!n || !node_of(parent)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (dfind(parent, name)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	int err = dlink(parent, name, ino);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	n->st.st_nlink++;
	now_ts(&n->st.st_ctim);
	reply_entry(req, ino);
}

static void drop(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct dent *d = node_of(parent) ? dfind(parent, name) : NULL;
	if (!d) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	uint64_t ino = d->ino;
	struct node *n = &nodes[ino];
	if (dir != S_ISDIR(n->st.st_mode)) {
		fuse_reply_err(req, dir ? ENOTDIR : EISDIR);
		return;
	}
	int err = drop_link(parent, n);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	dunlink(d);
	now_ts(&n->st.st_ctim);
	node_maybe_free(ino);
	fuse_reply_err(req, 0);
}

static void m_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	drop(req, parent, name, false);
}

static void m_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	drop(req, parent, name, true);
}

static void m_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);	/* no OPEN/RELEASE round trips */
}

static void m_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (off >= n->st.st_size)
		size = 0;
	else if ((off_t)size > n->st.st_size - off)
		size = (size_t)(n->st.st_size - off);
	fuse_reply_buf(req, size ? n->data + off : NULL, size);
}

static void m_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	int err = grow(n, off + (off_t)size);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	memcpy(n->data + off, buf, size);
	/* Setuid clearing on write (KILLPRIV_V2 makes it ours) is left out:
	 * libfuse 3.14 does not pass the kernel's "kill" flag, and the bench
	 * writes as root. */
	now_ts(&n->st.st_mtim);
	n->st.st_ctim = n->st.st_mtim;
	fuse_reply_write(req, size);
}

static void m_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

static void m_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void m_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

static void m_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	if (!n || !S_ISDIR(n->st.st_mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	/* Offsets: 1 ".", 2 "..", 3 + i the entry at slot i. */
	for (uint64_t o = (uint64_t)off; o < 2u + n->nents; o++) {
		struct stat st;
		const char *name;
		memset(&st, 0, sizeof(st));
		if (o == 0) {
			name = ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else if (o == 1) {
			name = "..";
			st.st_ino = 1;
			st.st_mode = S_IFDIR;
		} else {
			struct dent *d = n->ents[o - 2];
			if (!d)
				continue;
			name = d->name;
			st.st_ino = d->ino;
			st.st_mode = nodes[d->ino].st.st_mode & S_IFMT;
		}
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st,
						(off_t)(o + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void m_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	m_fsync(req, ino, datasync, fi);
}

static void m_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs s;
	memset(&s, 0, sizeof(s));
	s.f_bsize = s.f_frsize = 4096;
	s.f_blocks = s.f_bfree = s.f_bavail = 1u << 24;
	s.f_files = s.f_ffree = s.f_favail = 1u << 24;
	s.f_namemax = 255;
	fuse_reply_statfs(req, &s);
}

static void m_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	(void)ino;
	(void)name;
	(void)size;
	fuse_reply_err(req, ENODATA);
}

static void m_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	(void)ino;
	if (size)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_xattr(req, 0);
}

static void m_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		       size_t size, int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, EOPNOTSUPP);
}

static void m_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		     const char *newname, unsigned int flags)
{
	struct dent *d = node_of(parent) ? dfind(parent, name) : NULL;
	if (!d || !node_of(newparent)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (flags) {
		fuse_reply_err(req, EINVAL);	/* no NOREPLACE/EXCHANGE here */
		return;
	}
	uint64_t ino = d->ino;
	struct dent *old = dfind(newparent, newname);
	if (old == d) {
		fuse_reply_err(req, 0);
		return;
	}
	if (old) {
		int err = drop_link(newparent, &nodes[old->ino]);
		if (err) {
			fuse_reply_err(req, err);
			return;
		}
		uint64_t oino = old->ino;
		dunlink(old);
		node_maybe_free(oino);
	}
	int err = dlink(newparent, newname, ino);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	dunlink(d);
	if (S_ISDIR(nodes[ino].st.st_mode)) {
		nodes[parent].st.st_nlink--;
		nodes[newparent].st.st_nlink++;
	}
	now_ts(&nodes[ino].st.st_ctim);
	fuse_reply_err(req, 0);
}

static void m_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fuse_reply_err(req, ENODATA);
}

/* Mode 0 and KEEP_SIZE reserve nothing here (memory is allocated on
 * write); mode 0 grows the size.  PUNCH_HOLE zeroes. */
static void m_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	if (!n || !S_ISREG(n->st.st_mode)) {
		fuse_reply_err(req, n ? EINVAL : ENOENT);
		return;
	}
	int err = 0;
	if (mode == 0)
		err = grow(n, off + len);
	else if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) && off < n->st.st_size)
		memset(n->data + off, 0,
		       (size_t)(off + len > n->st.st_size ? n->st.st_size - off : len));
	else if (mode != FALLOC_FL_KEEP_SIZE && mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		err = EOPNOTSUPP;
	fuse_reply_err(req, err);
}

static void m_copy_file_range(fuse_req_t req, fuse_ino_t in, off_t off_in,
			      struct fuse_file_info *fi_in, fuse_ino_t out, off_t off_out,
			      struct fuse_file_info *fi_out, size_t len, int flags)
{
	(void)fi_in;
	(void)fi_out;
	(void)flags;
	struct node *a = node_of(in), *b = node_of(out);
	if (!a || !b) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (off_in >= a->st.st_size)
		len = 0;
	else if ((off_t)len > a->st.st_size - off_in)
		len = (size_t)(a->st.st_size - off_in);
	int err = len ? grow(b, off_out + (off_t)len) : 0;
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if (len)
		memmove(b->data + off_out, a->data + off_in, len);
	fuse_reply_write(req, len);
}

static const struct fuse_lowlevel_ops ops = {
	.init = m_init,
	.lookup = m_lookup,
	.forget = m_forget,
	.forget_multi = m_forget_multi,
	.getattr = m_getattr,
	.setattr = m_setattr,
	.readlink = m_readlink,
	.mknod = m_mknod,
	.mkdir = m_mkdir,
	.symlink = m_symlink,
	.link = m_link,
	.unlink = m_unlink,
	.rmdir = m_rmdir,
	.open = m_open,
	.read = m_read,
	.write = m_write,
	.flush = m_flush,
	.fsync = m_fsync,
	.opendir = m_opendir,
	.readdir = m_readdir,
	.fsyncdir = m_fsyncdir,
	.statfs = m_statfs,
	.getxattr = m_getxattr,
	.listxattr = m_listxattr,
	.setxattr = m_setxattr,
	.removexattr = m_removexattr,
	.rename = m_rename,
	.fallocate = m_fallocate,
	.copy_file_range = m_copy_file_range,
};

static ssize_t io_read(int fd, void *buf, size_t len, void *ud)
{
	(void)ud;
	return ubtrfs_init_io_read(&iost, fd, buf, len);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *ud)
{
	(void)ud;
	return ubtrfs_init_io_writev(&iost, fd, iov, count);
}

int main(int argc, char **argv)
{
	bool fg = argc == 3 && strcmp(argv[1], "-f") == 0;
	if (argc != 2 && !fg) {
		fprintf(stderr, "usage: memfs [-f] MOUNTPOINT\n");
		return 2;
	}
	const char *mnt = argv[argc - 1];
	hmask = (1u << 20) - 1;
	htab = calloc(hmask + 1, sizeof(*htab));
	/* Inode 0 is a placeholder (never live); the root is 1. */
	if (!htab || node_new(0, NULL, 0) != 0 || !nodes || node_new(S_IFDIR | 0755, NULL, 0) != 1)
		return 1;
	nodes[0].live = false;
	char *fargv[] = { "memfs", "-o", "rw,default_permissions,fsname=memfs,subtype=memfs",
			  NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	int ret = 1;
	if (fuse_set_signal_handlers(se) == 0) {
		if (fuse_session_mount(se, mnt) == 0) {
			static const struct fuse_custom_io cio = { .read = io_read,
								   .writev = io_writev };
			ubtrfs_init_io_reset(&iost, true);
			if (fuse_session_custom_io(se, &cio, fuse_session_fd(se)) != 0)
				ubtrfs_init_io_reset(&iost, false);
			if (fuse_daemonize(fg) == 0)
				ret = fuse_session_loop(se) ? 1 : 0;
			fuse_session_unmount(se);
		}
		fuse_remove_signal_handlers(se);
	}
	fuse_session_destroy(se);
	return ret;
}
