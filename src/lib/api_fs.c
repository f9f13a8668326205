/*
 * The public API, part 2: an opened filesystem — inodes, directories, data,
 * xattrs, subvolumes, space figures and tree dumps.  Translation only: the
 * logic lives in fs/, tree/ and volume/.  (api.c holds the library-wide and
 * superblock functions; the two files together implement ubtrfs.h.)
 */
#include <ubtrfs/ubtrfs.h>

#include "api_internal.h"
#include "base/base.h"
#include "format/format_names.h"
#include "fs/fs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int unl_parent(ubtrfs_fs *f, ubtrfs_ino dir, ubtrfs_ino *out);

static int get_inode(ubtrfs_fs *f, ubtrfs_ino id, struct ubt_inode *out)
{
	const struct ubt_subvol *sv;
	int ret = ubt_fs_subvol(f->fs, id.subvol, &sv);

	if (ret)
		return ret;
	return ubt_inode_read(f->fs, sv, id.ino, out);
}

static struct ubtrfs_time conv_time(const struct btrfs_timespec *t)
{
	struct ubtrfs_time r = { (int64_t)btrfs_timespec_sec(t), btrfs_timespec_nsec(t) };
	return r;
}

static void fill_stat(const struct ubt_fs *fs, const struct ubt_inode *in, struct ubtrfs_stat *st)
{
	const struct btrfs_inode_item *ii = &in->item;
	uint64_t rdev = btrfs_inode_rdev(ii);
	uint64_t nbytes = btrfs_inode_nbytes(ii);

	memset(st, 0, sizeof(*st));
	st->id.subvol = in->sv->id;
	st->id.ino = in->ino;
	st->mode = btrfs_inode_mode(ii);
	st->nlink = btrfs_inode_nlink(ii);
	st->uid = btrfs_inode_uid(ii);
	st->gid = btrfs_inode_gid(ii);
	/* btrfs stores the kernel's internal dev_t: major << 20 | minor. */
	st->rdev_major = (uint32_t)(rdev >> 20);
	st->rdev_minor = (uint32_t)(rdev & 0xfffff);
	st->size = btrfs_inode_size(ii);
	st->blksize = fs->sectorsize;
	st->blocks = ((nbytes + fs->sectorsize - 1) & ~((uint64_t)fs->sectorsize - 1)) >> 9;
	st->generation = btrfs_inode_generation(ii);
	st->flags = btrfs_inode_flags(ii);
	st->atime = conv_time(&ii->atime);
	st->mtime = conv_time(&ii->mtime);
	st->ctime = conv_time(&ii->ctime);
	st->otime = conv_time(&ii->otime);
#ifdef UBTRFS_INJECT_BUG
	/* A DELIBERATE BUG, compiled only with -Dinject_bug=true, for showing
	 * the differential tester's shrinker (tests/tools/difftest.py) on a
	 * real build: a sticky regular file whose size is a non-zero multiple
	 * of 4096 reports one byte more. */
	if (S_ISREG(st->mode) && (st->mode & S_ISVTX) && st->size && st->size % 4096 == 0)
		st->size += 1;
#endif
}

static uint64_t unl_default_subvol(ubtrfs_fs *f)
{
	return f->fs->default_subvol;
}

static int unl_subvol_root(ubtrfs_fs *f, uint64_t subvol, ubtrfs_ino *out)
{
	const struct ubt_subvol *sv;
	int ret = ubt_fs_subvol(f->fs, subvol, &sv);

	if (ret)
		return ret;
	out->subvol = subvol;
	out->ino = btrfs_root_root_dirid(&sv->item);
	return 0;
}

static int unl_stat(ubtrfs_fs *f, ubtrfs_ino id, struct ubtrfs_stat *out)
{
	struct ubt_inode in;
	int ret = get_inode(f, id, &in);

	if (ret)
		return ret;
	fill_stat(f->fs, &in, out);
	return 0;
}

static int unl_lookup(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, struct ubtrfs_stat *out)
{
	struct ubt_inode d, child;
	struct btrfs_key loc;
	uint8_t type;
	size_t len = strlen(name);
	int ret = get_inode(f, dir, &d);

	if (ret)
		return ret;
	if (!S_ISDIR(ubt_inode_mode(&d)))
		return -ENOTDIR;
	if (d.ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		return -ENOENT;
	ret = ubt_dir_lookup(f->fs, &d, name, len, &loc, &type);
	if (ret)
		return ret;
	ret = ubt_dir_entry_inode(f->fs, &d, name, len, &loc, &child);
	if (ret)
		return ret;
	fill_stat(f->fs, &child, out);
	return 0;
}

static int unl_resolve(ubtrfs_fs *f, ubtrfs_ino start, const char *path, struct ubtrfs_stat *out)
{
	struct ubtrfs_stat cur;
	char name[BTRFS_NAME_LEN + 1];
	int ret = unl_stat(f, start, &cur);

	while (ret == 0 && *path) {
		while (*path == '/')
			path++;
		if (!*path)
			break;
		const char *end = strchr(path, '/');
		size_t len = end ? (size_t)(end - path) : strlen(path);
		if (len > BTRFS_NAME_LEN)
			return -ENAMETOOLONG;
		memcpy(name, path, len);
		name[len] = 0;
		path += len;
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, "..")) {
			ubtrfs_ino parent;
			ret = unl_parent(f, cur.id, &parent);
			if (!ret)
				ret = unl_stat(f, parent, &cur);
			continue;
		}
		ret = unl_lookup(f, cur.id, name, &cur);
	}
	if (!ret)
		*out = cur;
	return ret;
}

static uint32_t ft_to_dtype(uint8_t ft)
{
	switch (ft & ~BTRFS_FT_ENCRYPTED) {
	case BTRFS_FT_REG_FILE:
		return DT_REG;
	case BTRFS_FT_DIR:
		return DT_DIR;
	case BTRFS_FT_CHRDEV:
		return DT_CHR;
	case BTRFS_FT_BLKDEV:
		return DT_BLK;
	case BTRFS_FT_FIFO:
		return DT_FIFO;
	case BTRFS_FT_SOCK:
		return DT_SOCK;
	case BTRFS_FT_SYMLINK:
		return DT_LNK;
	default:
		return DT_UNKNOWN;
	}
}

struct readdir_ctx {
	ubtrfs_fs *f;
	const struct ubt_inode *dir;
	int (*fn)(void *ctx, const struct ubtrfs_dirent *e);
	void *ctx;
};

static int readdir_one(void *ctx, const struct ubt_dirent *e)
{
	struct readdir_ctx *r = ctx;
	struct ubtrfs_dirent out = { 0 };

	out.offset = e->index;
	out.dtype = ft_to_dtype(e->type);
	out.name = e->name;
	out.name_len = e->name_len;
	if (e->location.type == BTRFS_ROOT_ITEM_KEY) {
		struct ubt_inode child;
		int ret = ubt_dir_entry_inode(r->f->fs, r->dir, e->name, e->name_len, &e->location,
					      &child);
		if (ret)
			return ret;
		out.id.subvol = child.sv->id;
		out.id.ino = child.ino;
		out.dtype = DT_DIR;
	} else {
		out.id.subvol = r->dir->sv->id;
		out.id.ino = e->location.objectid;
	}
	return r->fn(r->ctx, &out);
}

static int unl_readdir(ubtrfs_fs *f, ubtrfs_ino dir, uint64_t offset,
		   int (*fn)(void *ctx, const struct ubtrfs_dirent *e), void *ctx)
{
	struct ubt_inode d;
	int ret = get_inode(f, dir, &d);

	if (ret)
		return ret;
	if (!S_ISDIR(ubt_inode_mode(&d)))
		return -ENOTDIR;
	if (d.ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID || offset == UINT64_MAX)
		return 0;
	struct readdir_ctx r = { f, &d, fn, ctx };
	return ubt_dir_iterate(f->fs, &d, offset + 1, readdir_one, &r);
}

/* First item of (objectid, type, *) in `root`; its key into *key. */
static int first_item_of(struct ubt_fs *fs, const struct ubt_root_ref *root, uint64_t objectid,
			 uint8_t type, struct btrfs_key *key, uint8_t *data, uint32_t cap,
			 uint32_t *size)
{
	struct btrfs_key min = { objectid, type, 0 }, max = { objectid, type, (uint64_t)-1 };
	struct ubt_iter it;
	int ret;

	ubt_iter_start(&it, &fs->tree, root, &min, &max);
	ret = ubt_iter_next(&it);
	if (ret == 0) {
		*key = it.key;
		*size = it.size;
		memcpy(data, it.data, UBT_MIN(it.size, cap));
	}
	ubt_iter_end(&it);
	return ret == 1 ? -ENOENT : ret;
}

static int unl_parent(ubtrfs_fs *f, ubtrfs_ino dir, ubtrfs_ino *out)
{
	const struct ubt_subvol *sv;
	struct btrfs_key key;
	uint8_t buf[sizeof(struct btrfs_root_ref)];
	uint32_t size;
	int ret = ubt_fs_subvol(f->fs, dir.subvol, &sv);

	if (ret)
		return ret;
	if (dir.ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		return -ENOENT;	/* the placeholder's parent is not recorded */
	if (dir.ino != btrfs_root_root_dirid(&sv->item)) {
		ret = first_item_of(f->fs, &sv->root, dir.ino, BTRFS_INODE_REF_KEY, &key, buf,
				    sizeof(buf), &size);
		if (ret == -ENOENT)
			ret = first_item_of(f->fs, &sv->root, dir.ino, BTRFS_INODE_EXTREF_KEY, &key,
					    buf, sizeof(buf), &size);
		if (ret)
			return ret;
		out->subvol = dir.subvol;
		out->ino = key.type == BTRFS_INODE_REF_KEY ?
				   key.offset : btrfs_inode_extref_parent_objectid((const void *)buf);
		return 0;
	}
	if (dir.subvol == BTRFS_FS_TREE_OBJECTID) {
		*out = dir;
		return 0;
	}
	ret = first_item_of(f->fs, &f->fs->root_tree, dir.subvol, BTRFS_ROOT_BACKREF_KEY, &key, buf,
			    sizeof(buf), &size);
	if (ret)
		return ret;
	if (size < sizeof(struct btrfs_root_ref))
		return UBT_CORRUPT(0, "root backref of %llu too small", (unsigned long long)dir.subvol);
	out->subvol = key.offset;
	out->ino = btrfs_root_ref_dirid((const struct btrfs_root_ref *)buf);
	return 0;
}

static ssize_t unl_read(ubtrfs_fs *f, ubtrfs_ino id, void *buf, size_t len, uint64_t off)
{
	struct ubt_inode in;
	int ret = get_inode(f, id, &in);

	if (ret)
		return ret;
	if (!S_ISREG(ubt_inode_mode(&in)) && !S_ISLNK(ubt_inode_mode(&in)))
		return S_ISDIR(ubt_inode_mode(&in)) ? -EISDIR : -EINVAL;
	return ubt_file_read(f->fs, &in, buf, len, off);
}

static ssize_t unl_read_iov(ubtrfs_fs *f, ubtrfs_ino id, void *scratch, size_t len, uint64_t off,
			struct iovec *iov, size_t *iovcnt)
{
	struct ubt_inode in;
	int ret = get_inode(f, id, &in);

	if (ret) {
		*iovcnt = 0;
		return ret;
	}
	if (!S_ISREG(ubt_inode_mode(&in)) && !S_ISLNK(ubt_inode_mode(&in))) {
		*iovcnt = 0;
		return S_ISDIR(ubt_inode_mode(&in)) ? -EISDIR : -EINVAL;
	}
	return ubt_file_read_vec(f->fs, &in, scratch, len, off, iov, iovcnt);
}

static ssize_t unl_readlink(ubtrfs_fs *f, ubtrfs_ino id, char *buf, size_t size)
{
	struct ubt_inode in;
	int ret = get_inode(f, id, &in);

	if (ret)
		return ret;
	if (size == 0)
		return -ERANGE;
	size_t len = size - 1;
	ret = ubt_readlink(f->fs, &in, buf, &len);
	if (ret)
		return ret;
	buf[len] = 0;
	return (ssize_t)len;
}

static ssize_t unl_listxattr(ubtrfs_fs *f, ubtrfs_ino id, char *buf, size_t size)
{
	const struct ubt_subvol *sv;
	int ret = ubt_fs_subvol(f->fs, id.subvol, &sv);

	if (ret)
		return ret;
	return ubt_xattr_list(f->fs, sv, id.ino, buf, size);
}

static ssize_t unl_getxattr(ubtrfs_fs *f, ubtrfs_ino id, const char *name, void *buf, size_t size)
{
	const struct ubt_subvol *sv;
	int ret = ubt_fs_subvol(f->fs, id.subvol, &sv);

	if (ret)
		return ret;
	return ubt_xattr_get(f->fs, sv, id.ino, name, buf, size);
}

static int unl_data_ranges(ubtrfs_fs *f, ubtrfs_ino id,
		       int (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx)
{
	struct ubt_inode in;
	int ret = get_inode(f, id, &in);

	if (ret)
		return ret;
	if (!S_ISREG(ubt_inode_mode(&in)))
		return -EINVAL;
	return ubt_file_data_ranges(f->fs, &in, fn, ctx);
}

/* ---- the public entry points: each holds the handle lock shared ------- */

int ubt_api_stat(ubtrfs_fs *f, ubtrfs_ino id, struct ubtrfs_stat *out)
{
	return unl_stat(f, id, out);
}

int ubt_api_lookup(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, struct ubtrfs_stat *out)
{
	return unl_lookup(f, dir, name, out);
}

uint64_t ubtrfs_default_subvol(ubtrfs_fs *f)
{
	ubt_api_rdlock_noerr(f);
	uint64_t r = unl_default_subvol(f);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_subvol_root(ubtrfs_fs *f, uint64_t subvol, ubtrfs_ino *out)
{
	ubt_api_rdlock_noerr(f);
	int r = unl_subvol_root(f, subvol, out);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_stat(ubtrfs_fs *f, ubtrfs_ino id, struct ubtrfs_stat *out)
{
	int e = ubt_api_rdlock(f);
	int r = e ? e : unl_stat(f, id, out);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_stat_mode(ubtrfs_fs *f, ubtrfs_ino id, struct ubtrfs_stat *out)
{
	ubt_api_rdlock_held(f);
	int r = unl_stat(f, id, out);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_lookup(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, struct ubtrfs_stat *out)
{
	int e = ubt_api_rdlock(f);
	int r = e ? e : unl_lookup(f, dir, name, out);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_resolve(ubtrfs_fs *f, ubtrfs_ino start, const char *path, struct ubtrfs_stat *out)
{
	int e = ubt_api_rdlock(f);
	int r = e ? e : unl_resolve(f, start, path, out);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_readdir(ubtrfs_fs *f, ubtrfs_ino dir, uint64_t offset,
		   int (*fn)(void *ctx, const struct ubtrfs_dirent *e), void *ctx)
{
	int e = ubt_api_rdlock_all(f);
	int r = e ? e : unl_readdir(f, dir, offset, fn, ctx);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_parent(ubtrfs_fs *f, ubtrfs_ino dir, ubtrfs_ino *out)
{
	ubt_api_rdlock_noerr(f);
	int r = unl_parent(f, dir, out);
	ubt_api_unlock(f);
	return r;
}

ssize_t ubtrfs_read(ubtrfs_fs *f, ubtrfs_ino id, void *buf, size_t len, uint64_t off)
{
	int e = ubt_api_rdlock(f);
	ssize_t r = e ? e : unl_read(f, id, buf, len, off);
	ubt_api_unlock(f);
	return r;
}

ssize_t ubtrfs_read_iov(ubtrfs_fs *f, ubtrfs_ino id, void *scratch, size_t len, uint64_t off,
			struct iovec *iov, size_t *iovcnt)
{
	int e = ubt_api_rdlock(f);
	ssize_t r = e ? e : unl_read_iov(f, id, scratch, len, off, iov, iovcnt);
	ubt_api_unlock(f);
	return r;
}

ssize_t ubtrfs_readlink(ubtrfs_fs *f, ubtrfs_ino id, char *buf, size_t size)
{
	ubt_api_rdlock_noerr(f);
	ssize_t r = unl_readlink(f, id, buf, size);
	ubt_api_unlock(f);
	return r;
}

ssize_t ubtrfs_listxattr(ubtrfs_fs *f, ubtrfs_ino id, char *buf, size_t size)
{
	ubt_api_rdlock_noerr(f);
	ssize_t r = unl_listxattr(f, id, buf, size);
	ubt_api_unlock(f);
	return r;
}

ssize_t ubtrfs_getxattr(ubtrfs_fs *f, ubtrfs_ino id, const char *name, void *buf, size_t size)
{
	ubt_api_rdlock_noerr(f);
	ssize_t r = unl_getxattr(f, id, name, buf, size);
	ubt_api_unlock(f);
	return r;
}

int ubtrfs_data_ranges(ubtrfs_fs *f, ubtrfs_ino id,
		       int (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx)
{
	int e = ubt_api_rdlock(f);
	int r = e ? e : unl_data_ranges(f, id, fn, ctx);
	ubt_api_unlock(f);
	return r;
}
