/*
 * mkfs layer: populating the top-level subvolume from a directory (--rootdir).
 *
 * Two passes over the source:
 *   scan  (before the chunks exist): walk the tree with openat/fstatat (no
 *         path length limit), give every inode a number (hard links share
 *         one, found by st_dev/st_ino), note names, modes, owners, times with
 *         nanoseconds, symlink targets and xattrs, and measure the data
 *         (SEEK_DATA/SEEK_HOLE, so holes stay holes) to size the data and
 *         metadata chunks;
 *   build (chunks exist): walk our own tree again, read each regular file
 *         once, lay its data out sequentially in the data chunk as extents
 *         of at most 128 MiB, write it, checksum every sector, and describe
 *         everything as fs-tree, csum-tree and extent-tree items.
 * Small files (size <= 2048, the kernel's max_inline default, and below the
 * sectorsize) are inline; symlink targets are always inline.  With NO_HOLES
 * holes have no items; without it every gap gets an explicit hole extent.
 * Source files are opened with O_NOATIME where the system has it, so the
 * source's atimes are not disturbed.  Directory entries are added in name
 * order, so the same tree gives the same image.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mkfs/mkfs_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#endif

#ifndef O_NOATIME
#define O_NOATIME 0
#endif

#define RD_MAX_INLINE 2048
#define RD_MAX_EXTENT (128ULL * 1024 * 1024)

struct rd_xattr {
	char *name;
	uint16_t nlen;
	uint8_t *value;
	uint32_t vlen;
};

struct rd_entry {
	uint64_t parent;	/* directory inode index */
	uint64_t child;		/* inode index */
	char *name;
	uint16_t nlen;
	uint64_t index;		/* DIR_INDEX in the parent */
};

struct rd_inode {
	uint64_t ino;
	struct stat st;
	uint32_t nlink;		/* names inside the tree */
	uint64_t dir_size;	/* directories: sum of 2 * name lengths */
	uint64_t next_index;
	size_t first_entry, nentries;	/* directories: their entries */
	char *target;		/* symlinks */
	size_t tlen;
	struct rd_xattr *xattrs;
	size_t nxattrs;
	bool data_done;
};

struct rd_state {
	struct rd_inode *inodes;
	size_t ninodes, cinodes;
	struct rd_entry *entries;
	size_t nentries, centries;
	/* (st_dev, st_ino) -> inode index, for hard links */
	struct { dev_t dev; ino_t ino; size_t idx; bool used; } *links;
	size_t nlinks_cap;
	uint64_t data_bytes, meta_bytes;
	/* csum run being built */
	uint64_t csum_start;
	uint8_t *csums;
	size_t ncsums, ccsums;
	uint64_t files_done, bytes_done, next_report;
	uint8_t *buf;
};

/* ---- small helpers ---------------------------------------------------- */

static uint8_t ftype_of(mode_t m)
{
	if (S_ISREG(m)) return BTRFS_FT_REG_FILE;
	if (S_ISDIR(m)) return BTRFS_FT_DIR;
	if (S_ISCHR(m)) return BTRFS_FT_CHRDEV;
	if (S_ISBLK(m)) return BTRFS_FT_BLKDEV;
	if (S_ISFIFO(m)) return BTRFS_FT_FIFO;
	if (S_ISSOCK(m)) return BTRFS_FT_SOCK;
	if (S_ISLNK(m)) return BTRFS_FT_SYMLINK;
	return BTRFS_FT_UNKNOWN;
}

static uint64_t link_hash(dev_t d, ino_t i)
{
	return ubt_mix64((uint64_t)i ^ ubt_mix64((uint64_t)d));
}

static int links_find_or_add(struct rd_state *rd, const struct stat *st, size_t idx, size_t *found)
{
	if (rd->nlinks_cap == 0) {
		rd->nlinks_cap = 1024;
		rd->links = calloc(rd->nlinks_cap, sizeof(*rd->links));
		if (!rd->links)
			return -ENOMEM;
	}
	size_t mask = rd->nlinks_cap - 1;
	size_t h = (size_t)link_hash(st->st_dev, st->st_ino) & mask;
	size_t used = 0;
	for (size_t k = h;; k = (k + 1) & mask) {
		if (!rd->links[k].used) {
			rd->links[k].used = true;
			rd->links[k].dev = st->st_dev;
			rd->links[k].ino = st->st_ino;
			rd->links[k].idx = idx;
			*found = idx;
			break;
		}
		if (rd->links[k].dev == st->st_dev && rd->links[k].ino == st->st_ino) {
			*found = rd->links[k].idx;
			return 0;
		}
	}
	for (size_t k = 0; k < rd->nlinks_cap; k++)
		used += rd->links[k].used;
	if (used * 2 > rd->nlinks_cap) {
		/* grow: rehash */
		size_t ncap = rd->nlinks_cap * 2;
		__typeof__(rd->links) nl = calloc(ncap, sizeof(*nl));
		if (!nl)
			return -ENOMEM;
		for (size_t k = 0; k < rd->nlinks_cap; k++) {
			if (!rd->links[k].used)
				continue;
			size_t j = (size_t)link_hash(rd->links[k].dev, rd->links[k].ino) & (ncap - 1);
			while (nl[j].used)
				j = (j + 1) & (ncap - 1);
			nl[j] = rd->links[k];
		}
		free(rd->links);
		rd->links = nl;
		rd->nlinks_cap = ncap;
	}
	return 0;
}

static int new_inode(struct rd_state *rd, const struct stat *st, size_t *out)
{
	if (rd->ninodes == rd->cinodes) {
		size_t ncap = rd->cinodes ? rd->cinodes * 2 : 256;
		struct rd_inode *n = realloc(rd->inodes, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		rd->inodes = n;
		rd->cinodes = ncap;
	}
	struct rd_inode *ri = &rd->inodes[rd->ninodes];
	memset(ri, 0, sizeof(*ri));
	ri->ino = BTRFS_FIRST_FREE_OBJECTID + rd->ninodes;
	ri->st = *st;
	ri->next_index = 2;
	*out = rd->ninodes++;
	rd->meta_bytes += 200;
	return 0;
}

static int add_entry(struct rd_state *rd, size_t parent, size_t child, const char *name)
{
	size_t nlen = strlen(name);

	if (nlen > BTRFS_NAME_LEN)
		return -ENAMETOOLONG;
	if (rd->nentries == rd->centries) {
		size_t ncap = rd->centries ? rd->centries * 2 : 256;
		struct rd_entry *n = realloc(rd->entries, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		rd->entries = n;
		rd->centries = ncap;
	}
	struct rd_entry *e = &rd->entries[rd->nentries++];
	e->parent = parent;
	e->child = child;
	e->nlen = (uint16_t)nlen;
	e->name = strdup(name);
	if (!e->name)
		return -ENOMEM;
	e->index = rd->inodes[parent].next_index++;
	rd->inodes[parent].dir_size += 2 * nlen;
	rd->inodes[child].nlink++;
	rd->meta_bytes += 3 * (nlen + 60);
	return 0;
}

/* ---- scan ------------------------------------------------------------- */

#ifdef __linux__
/* Read every xattr of `fd` (or, fd < 0, of the path, not following it). */
static int read_xattrs(struct rd_inode *ri, int fd, const char *path)
{
	ssize_t n = fd >= 0 ? flistxattr(fd, NULL, 0) : llistxattr(path, NULL, 0);
	if (n < 0)
		return (errno == ENOTSUP || errno == EPERM) ? 0 : -errno;
	if (n == 0)
		return 0;
	char *list = malloc((size_t)n);
	if (!list)
		return -ENOMEM;
	n = fd >= 0 ? flistxattr(fd, list, (size_t)n) : llistxattr(path, list, (size_t)n);
	if (n < 0) {
		free(list);
		return -errno;
	}
	int ret = 0;
	for (char *p = list; p < list + n; p += strlen(p) + 1) {
		ssize_t vl = fd >= 0 ? fgetxattr(fd, p, NULL, 0) : lgetxattr(path, p, NULL, 0);
		if (vl < 0) {
			ret = -errno;
			break;
		}
		uint8_t *v = malloc(vl ? (size_t)vl : 1);
		if (!v) {
			ret = -ENOMEM;
			break;
		}
		vl = fd >= 0 ? fgetxattr(fd, p, v, (size_t)vl) : lgetxattr(path, p, v, (size_t)vl);
		if (vl < 0) {
			free(v);
			ret = -errno;
			break;
		}
		struct rd_xattr *nx = realloc(ri->xattrs, (ri->nxattrs + 1) * sizeof(*nx));
		if (!nx) {
			free(v);
			ret = -ENOMEM;
			break;
		}
		ri->xattrs = nx;
		nx[ri->nxattrs].name = strdup(p);
		nx[ri->nxattrs].nlen = (uint16_t)strlen(p);
		nx[ri->nxattrs].value = v;
		nx[ri->nxattrs].vlen = (uint32_t)vl;
		ri->nxattrs++;
	}
	free(list);
	return ret;
}
#endif

/* Bytes of data extents a regular file needs (holes skipped). */
static int measure_file(int fd, uint64_t size, uint32_t sectorsize, uint64_t *bytes,
			uint64_t *nextents)
{
	uint64_t pos = 0, total = 0, last_end = 0, n = 0;

	while (pos < size) {
		off_t ds = lseek(fd, (off_t)pos, SEEK_DATA);
		if (ds < 0) {
			if (errno == ENXIO)
				break;
			/* no SEEK_DATA: all data */
			ds = (off_t)pos;
		}
		off_t de = lseek(fd, ds, SEEK_HOLE);
		if (de < 0 || (uint64_t)de > size)
			de = (off_t)size;
		uint64_t s = (uint64_t)ds & ~((uint64_t)sectorsize - 1);
		uint64_t e = ((uint64_t)de + sectorsize - 1) & ~((uint64_t)sectorsize - 1);
		if (s < last_end)
			s = last_end;
		if (e > s) {
			total += e - s;
			n += (e - s + RD_MAX_EXTENT - 1) / RD_MAX_EXTENT;
		}
		last_end = e;
		pos = (uint64_t)de;
		if (de <= ds)
			break;
	}
	*bytes = total;
	*nextents = n;
	return 0;
}

static bool is_inline(const struct mk_fs *fs, uint64_t size)
{
	return size > 0 && size <= RD_MAX_INLINE && size < fs->sectorsize;
}

static int scan_dir(struct mk_fs *fs, struct rd_state *rd, int dfd, size_t dir_idx);

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int scan_child(struct mk_fs *fs, struct rd_state *rd, int dfd, size_t dir_idx,
		      const char *name, size_t *subdir)
{
	struct stat st;
	size_t idx;
	int ret;

	*subdir = SIZE_MAX;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		ret = -errno;
		ubt_log(UBT_LOG_ERROR, "mkfs: cannot stat %s: %s", name, ubt_strerror(ret));
		return ret;
	}
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		size_t next = rd->ninodes;
		ret = links_find_or_add(rd, &st, next, &idx);
		if (ret)
			return ret;
		if (idx != next)	/* another name of an inode we have */
			return add_entry(rd, dir_idx, idx, name);
	}
	if ((ret = new_inode(rd, &st, &idx)) || (ret = add_entry(rd, dir_idx, idx, name)))
		return ret;
	struct rd_inode *ri = &rd->inodes[idx];

	if (S_ISLNK(st.st_mode)) {
		char tgt[BTRFS_MAX_METADATA_BLOCKSIZE];
		ssize_t n = readlinkat(dfd, name, tgt, sizeof(tgt));
		if (n < 0)
			return -errno;
		if ((size_t)n >= fs->sectorsize || (size_t)n + 200 > btrfs_leaf_data_size(fs->nodesize)) {
			ubt_log(UBT_LOG_ERROR, "mkfs: symlink %s: target too long", name);
			return -ENAMETOOLONG;
		}
		ri->target = malloc((size_t)n + 1);
		if (!ri->target)
			return -ENOMEM;
		memcpy(ri->target, tgt, (size_t)n);
		ri->tlen = (size_t)n;
		rd->meta_bytes += (uint64_t)n + 60;
	}
	if (S_ISDIR(st.st_mode))
		*subdir = idx;
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC |
					    (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
		if (fd < 0 && errno == EPERM)
			fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
					       (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
		if (fd < 0) {
			ret = -errno;
			ubt_log(UBT_LOG_ERROR, "mkfs: cannot open %s: %s", name, ubt_strerror(ret));
			return ret;
		}
#ifdef __linux__
		ret = read_xattrs(ri, fd, NULL);
#else
		ret = 0;
#endif
		if (ret == 0 && S_ISREG(st.st_mode) && !is_inline(fs, (uint64_t)st.st_size)) {
			uint64_t bytes, n;
			ret = measure_file(fd, (uint64_t)st.st_size, fs->sectorsize, &bytes, &n);
			rd->data_bytes += bytes;
			rd->meta_bytes += n * 200 + bytes / fs->sectorsize * 32;
		} else if (S_ISREG(st.st_mode)) {
			rd->meta_bytes += (uint64_t)st.st_size + 60;
		}
		close(fd);
		if (ret)
			return ret;
	}
#ifdef __linux__
	else {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d/", dfd);
		size_t pl = strlen(path), nl = strlen(name);
		char *full = malloc(pl + nl + 1);
		if (!full)
			return -ENOMEM;
		memcpy(full, path, pl);
		memcpy(full + pl, name, nl + 1);
		ret = read_xattrs(ri, -1, full);
		free(full);
		if (ret)
			return ret;
	}
#endif
	for (size_t i = 0; i < ri->nxattrs; i++)
		rd->meta_bytes += ri->xattrs[i].nlen + ri->xattrs[i].vlen + 60;
	return 0;
}

static int scan_dir(struct mk_fs *fs, struct rd_state *rd, int dfd, size_t dir_idx)
{
	int fd2 = dup(dfd);
	if (fd2 < 0)
		return -errno;
	DIR *d = fdopendir(fd2);
	if (!d) {
		close(fd2);
		return -errno;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **nn = realloc(names, ncap * sizeof(*nn));
			if (!nn) {
				ret = -ENOMEM;
				goto out;
			}
			names = nn;
			cap = ncap;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			ret = -ENOMEM;
			goto out;
		}
		n++;
	}
	ubt_sort(names, n, sizeof(*names), name_cmp);

	size_t *subdirs = calloc(n ? n : 1, sizeof(*subdirs));
	if (!subdirs) {
		ret = -ENOMEM;
		goto out;
	}
	rd->inodes[dir_idx].first_entry = rd->nentries;
	for (size_t i = 0; i < n && ret == 0; i++)
		ret = scan_child(fs, rd, dfd, dir_idx, names[i], &subdirs[i]);
	rd->inodes[dir_idx].nentries = rd->nentries - rd->inodes[dir_idx].first_entry;
	for (size_t i = 0; i < n && ret == 0; i++) {
		if (subdirs[i] == SIZE_MAX)
			continue;
		int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			ret = -errno;
			ubt_log(UBT_LOG_ERROR, "mkfs: cannot open directory %s: %s", names[i],
				ubt_strerror(ret));
			break;
		}
		ret = scan_dir(fs, rd, cfd, subdirs[i]);
		close(cfd);
	}
	free(subdirs);
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return ret;
}

int mk_rootdir_scan(struct mk_fs *fs, uint64_t *data_bytes, uint64_t *meta_estimate)
{
	struct rd_state *rd = calloc(1, sizeof(*rd));
	struct stat st;
	size_t root;
	int ret;

	if (!rd)
		return -ENOMEM;
	fs->rd = rd;
	int dfd = open(fs->cfg->rootdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st) != 0) {
		ret = -errno;
		ubt_log(UBT_LOG_ERROR, "mkfs: cannot open %s: %s", fs->cfg->rootdir,
			ubt_strerror(ret));
		if (dfd >= 0)
			close(dfd);
		return ret;
	}
	mk_progress(fs, "scanning %s", fs->cfg->rootdir);
	ret = new_inode(rd, &st, &root);
	if (ret == 0) {
#ifdef __linux__
		ret = read_xattrs(&rd->inodes[root], dfd, NULL);
#endif
	}
	if (ret == 0)
		ret = scan_dir(fs, rd, dfd, root);
	close(dfd);
	if (ret)
		return ret;
	/* Room for the superblock stripes skipped inside the data chunk. */
	*data_bytes = rd->data_bytes + (rd->data_bytes ? 4 * MK_SZ_1M : 0);
	*meta_estimate = rd->meta_bytes * 3 / 2 + 4 * MK_SZ_1M;
	*meta_estimate = (*meta_estimate + BTRFS_STRIPE_LEN - 1) & ~(BTRFS_STRIPE_LEN - 1);
	mk_progress(fs, "%zu inodes, %llu MiB of data", rd->ninodes,
		    (unsigned long long)(rd->data_bytes >> 20));
	return 0;
}

/* ---- build: data -------------------------------------------------------- */

static int csum_flush(struct mk_fs *fs, struct rd_state *rd)
{
	size_t cs = ubt_csum_size(fs->cfg->csum_type);
	int ret = 0;

	if (rd->ncsums)
		ret = mk_tree_add(&fs->csum, BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY,
				  rd->csum_start, rd->csums, (uint32_t)(rd->ncsums * cs));
	rd->ncsums = 0;
	return ret;
}

static int csum_add(struct mk_fs *fs, struct rd_state *rd, uint64_t logical, const uint8_t *data,
		    uint64_t len)
{
	size_t cs = ubt_csum_size(fs->cfg->csum_type);
	size_t max = (btrfs_leaf_data_size(fs->nodesize) - 2 * sizeof(struct btrfs_item)) / cs - 1;
	int ret;

	for (uint64_t off = 0; off < len; off += fs->sectorsize) {
		uint64_t at = logical + off;
		if (rd->ncsums &&
		    (rd->csum_start + rd->ncsums * fs->sectorsize != at || rd->ncsums >= max)) {
			if ((ret = csum_flush(fs, rd)))
				return ret;
		}
		if (rd->ncsums == 0)
			rd->csum_start = at;
		if (rd->ncsums == rd->ccsums) {
			size_t ncap = max;
			uint8_t *n = realloc(rd->csums, ncap * cs);
			if (!n)
				return -ENOMEM;
			rd->csums = n;
			rd->ccsums = ncap;
		}
		uint8_t out[UBT_CSUM_MAX];
		ret = ubt_csum(fs->cfg->csum_type, data + off, fs->sectorsize, out);
		if (ret)
			return ret;
		memcpy(rd->csums + rd->ncsums * cs, out, cs);
		rd->ncsums++;
	}
	return 0;
}

static int add_file_extent(struct mk_fs *fs, uint64_t ino, uint64_t file_off, uint64_t disk,
			   uint64_t len)
{
	struct btrfs_file_extent_item fe;

	memset(&fe, 0, sizeof(fe));
	btrfs_set_file_extent_generation(&fe, fs->gen);
	btrfs_set_file_extent_ram_bytes(&fe, len);
	btrfs_set_file_extent_type(&fe, BTRFS_FILE_EXTENT_REG);
	btrfs_set_file_extent_disk_bytenr(&fe, disk);
	btrfs_set_file_extent_disk_num_bytes(&fe, disk ? len : 0);
	btrfs_set_file_extent_offset(&fe, 0);
	btrfs_set_file_extent_num_bytes(&fe, len);
	return mk_tree_add(&fs->fs, ino, BTRFS_EXTENT_DATA_KEY, file_off, &fe, sizeof(fe));
}

static int add_inline(struct mk_fs *fs, uint64_t ino, const void *data, size_t len)
{
	uint8_t *buf;
	size_t hdr = btrfs_file_extent_inline_start();
	int ret = mk_tree_add_buf(&fs->fs, ino, BTRFS_EXTENT_DATA_KEY, 0, (uint32_t)(hdr + len),
				  &buf);
	if (ret)
		return ret;
	struct btrfs_file_extent_item *fe = (struct btrfs_file_extent_item *)buf;
	btrfs_set_file_extent_generation(fe, fs->gen);
	btrfs_set_file_extent_ram_bytes(fe, len);
	btrfs_set_file_extent_type(fe, BTRFS_FILE_EXTENT_INLINE);
	memcpy(buf + hdr, data, len);
	return 0;
}

static int add_dext(struct mk_fs *fs, uint64_t logical, uint64_t len, uint64_t ino, uint64_t off)
{
	if (fs->ndext == fs->cdext) {
		size_t ncap = fs->cdext ? fs->cdext * 2 : 64;
		struct mk_data_extent *n = realloc(fs->dext, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		fs->dext = n;
		fs->cdext = ncap;
	}
	struct mk_data_extent *d = &fs->dext[fs->ndext++];
	d->logical = logical;
	d->len = len;
	d->root = BTRFS_FS_TREE_OBJECTID;
	d->ino = ino;
	d->offset = off;
	return 0;
}

#define RD_BUF (8 * MK_SZ_1M)

/* Copy [start, end) of the file (sector aligned; past EOF reads as zeros). */
static int copy_range(struct mk_fs *fs, struct rd_state *rd, int fd, uint64_t ino, uint64_t start,
		      uint64_t end, uint64_t *nbytes)
{
	struct mk_chunk *dc = mk_chunk_find(fs, BTRFS_BLOCK_GROUP_DATA);
	int ret;

	while (start < end) {
		uint64_t logical, len;
		uint64_t want = UBT_MIN(end - start, RD_MAX_EXTENT);
		ret = mk_chunk_alloc_upto(dc, want, fs->sectorsize, &logical, &len);
		if (ret) {
			ubt_log(UBT_LOG_ERROR, "mkfs: the data chunk is full");
			return ret;
		}
		if ((ret = add_file_extent(fs, ino, start, logical, len)) ||
		    (ret = add_dext(fs, logical, len, ino, start)))
			return ret;
		*nbytes += len;
		for (uint64_t done = 0; done < len;) {
			size_t n = (size_t)UBT_MIN(len - done, (uint64_t)RD_BUF);
			size_t got = 0;
			while (got < n) {
				ssize_t r = pread(fd, rd->buf + got, n - got, (off_t)(start + done + got));
				if (r < 0) {
					if (errno == EINTR)
						continue;
					return -errno;
				}
				if (r == 0)
					break;
				got += (size_t)r;
			}
			memset(rd->buf + got, 0, n - got);
			if ((ret = mk_write_logical(fs, logical + done, rd->buf, n)) ||
			    (ret = csum_add(fs, rd, logical + done, rd->buf, n)))
				return ret;
			done += n;
		}
		rd->bytes_done += len;
		start += len;
	}
	return 0;
}

static int copy_file(struct mk_fs *fs, struct rd_state *rd, int dfd, const char *name,
		     struct rd_inode *ri, uint64_t *nbytes)
{
	uint64_t size = (uint64_t)ri->st.st_size;
	int ret = 0;

	*nbytes = 0;
	if (size == 0)
		return 0;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC);
	if (fd < 0 && errno == EPERM)
		fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		ubt_log(UBT_LOG_ERROR, "mkfs: cannot open %s: %s", name, ubt_strerror(ret));
		return ret;
	}
	if (is_inline(fs, size)) {
		/* A file of holes only stays without data. */
		off_t ds = lseek(fd, 0, SEEK_DATA);
		if (ds < 0 && errno == ENXIO)
			goto out;
		ssize_t r = pread(fd, rd->buf, (size_t)size, 0);
		if (r < 0) {
			ret = -errno;
			goto out;
		}
		memset(rd->buf + r, 0, (size_t)size - (size_t)r);
		ret = add_inline(fs, ri->ino, rd->buf, (size_t)size);
		*nbytes = size;
		goto out;
	}
	uint64_t pos = 0, last_end = 0, aligned = (size + fs->sectorsize - 1) & ~((uint64_t)fs->sectorsize - 1);
	while (pos < size && ret == 0) {
		off_t ds = lseek(fd, (off_t)pos, SEEK_DATA);
		if (ds < 0) {
			if (errno == ENXIO)
				break;
			ds = (off_t)pos;
		}
		off_t de = lseek(fd, ds, SEEK_HOLE);
		if (de < 0 || (uint64_t)de > size)
			de = (off_t)size;
		uint64_t s = (uint64_t)ds & ~((uint64_t)fs->sectorsize - 1);
		uint64_t e = ((uint64_t)de + fs->sectorsize - 1) & ~((uint64_t)fs->sectorsize - 1);
		if (s < last_end)
			s = last_end;
		if (e > s) {
			if (!fs->cfg->no_holes && s > last_end)
				ret = add_file_extent(fs, ri->ino, last_end, 0, s - last_end);
			if (ret == 0)
				ret = copy_range(fs, rd, fd, ri->ino, s, e, nbytes);
			last_end = e;
		}
		if (de <= ds)
			break;
		pos = (uint64_t)de;
	}
	if (ret == 0 && !fs->cfg->no_holes && last_end < aligned)
		ret = add_file_extent(fs, ri->ino, last_end, 0, aligned - last_end);
out:
	close(fd);
	return ret;
}

static int build_data_dir(struct mk_fs *fs, struct rd_state *rd, int dfd, size_t dir_idx,
			  uint64_t *nbytes_of)
{
	struct rd_inode *dir = &rd->inodes[dir_idx];
	int ret = 0;

	for (size_t k = 0; k < dir->nentries && ret == 0; k++) {
		struct rd_entry *e = &rd->entries[dir->first_entry + k];
		struct rd_inode *ri = &rd->inodes[e->child];
		if (S_ISREG(ri->st.st_mode) && !ri->data_done) {
			ri->data_done = true;
			ret = copy_file(fs, rd, dfd, e->name, ri, &nbytes_of[e->child]);
			rd->files_done++;
			if (rd->bytes_done >= rd->next_report) {
				mk_progress(fs, "copied %llu files, %llu MiB",
					    (unsigned long long)rd->files_done,
					    (unsigned long long)(rd->bytes_done >> 20));
				rd->next_report = rd->bytes_done + 1024 * MK_SZ_1M;
			}
		} else if (S_ISDIR(ri->st.st_mode)) {
			int cfd = openat(dfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0)
				return -errno;
			ret = build_data_dir(fs, rd, cfd, e->child, nbytes_of);
			close(cfd);
		}
	}
	return ret;
}

/* ---- build: metadata items --------------------------------------------- */

static void fill_times(struct btrfs_timespec *t, time_t sec, long nsec)
{
	btrfs_set_timespec_sec(t, (uint64_t)(int64_t)sec);
	btrfs_set_timespec_nsec(t, (uint32_t)nsec);
}

static int add_inode_item(struct mk_fs *fs, const struct rd_inode *ri, uint64_t nbytes)
{
	struct btrfs_inode_item ii;
	const struct stat *st = &ri->st;
	uint64_t size = S_ISDIR(st->st_mode) ? ri->dir_size
		      : S_ISLNK(st->st_mode) ? ri->tlen
		      : S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0;

	mk_fill_inode(fs, &ii, st->st_mode, S_ISDIR(st->st_mode) ? 1 : ri->nlink, size, nbytes);
	btrfs_set_inode_uid(&ii, st->st_uid);
	btrfs_set_inode_gid(&ii, st->st_gid);
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
#ifdef __linux__
		btrfs_set_inode_rdev(&ii, ((uint64_t)major(st->st_rdev) << 20) | minor(st->st_rdev));
#else
		btrfs_set_inode_rdev(&ii, (uint64_t)st->st_rdev);
#endif
	}
	fill_times(btrfs_inode_atime(&ii), st->st_atim.tv_sec, st->st_atim.tv_nsec);
	fill_times(btrfs_inode_mtime(&ii), st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	fill_times(btrfs_inode_ctime(&ii), st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	fill_times(btrfs_inode_otime(&ii), st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	return mk_tree_add(&fs->fs, ri->ino, BTRFS_INODE_ITEM_KEY, 0, &ii, sizeof(ii));
}

/* Append one entry to the item (objectid,type,offset), creating it if new.
 * Items are kept unsorted until the end, so collisions are merged here
 * through a small search of the items added for this inode. */
static int append_to_item(struct mk_tree *t, size_t search_from, uint64_t oid, uint8_t type,
			  uint64_t off, const uint8_t *data, uint32_t len)
{
	for (size_t i = search_from; i < t->nitems; i++) {
		struct mk_item *it = &t->items[i];
		if (it->key.objectid == oid && it->key.type == type && it->key.offset == off) {
			uint8_t *n = realloc(it->data, it->size + len);
			if (!n)
				return -ENOMEM;
			memcpy(n + it->size, data, len);
			it->data = n;
			it->size += len;
			return 0;
		}
	}
	return mk_tree_add(t, oid, type, off, data, len);
}

static int dir_entry_bytes(uint8_t *buf, const struct btrfs_key *loc, uint8_t type, uint64_t transid,
			   const void *name, uint16_t nlen, const void *data, uint16_t dlen)
{
	struct btrfs_dir_item *di = (struct btrfs_dir_item *)buf;

	memset(di, 0, sizeof(*di));
	btrfs_cpu_key_to_disk(btrfs_dir_location(di), loc);
	btrfs_set_dir_transid(di, transid);
	btrfs_set_dir_data_len(di, dlen);
	btrfs_set_dir_name_len(di, nlen);
	btrfs_set_dir_type(di, type);
	memcpy(buf + sizeof(*di), name, nlen);
	if (dlen)
		memcpy(buf + sizeof(*di) + nlen, data, dlen);
	return (int)(sizeof(*di) + nlen + dlen);
}

static int build_items(struct mk_fs *fs, struct rd_state *rd, const uint64_t *nbytes_of)
{
	const uint32_t max_item = btrfs_leaf_data_size(fs->nodesize) - sizeof(struct btrfs_item);
	uint8_t *buf = malloc(BTRFS_MAX_METADATA_BLOCKSIZE);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < rd->ninodes && ret == 0; i++) {
		struct rd_inode *ri = &rd->inodes[i];
		size_t mark = fs->fs.nitems;
		uint64_t nbytes = S_ISLNK(ri->st.st_mode) ? ri->tlen : nbytes_of[i];

		if (i == 0) {
			ri->nlink = 1;
			/* ".." of the top directory: itself, index 0 */
			struct btrfs_inode_ref *r = (struct btrfs_inode_ref *)buf;
			memset(buf, 0, sizeof(*r));
			btrfs_set_inode_ref_index(r, 0);
			btrfs_set_inode_ref_name_len(r, 2);
			memcpy(buf + sizeof(*r), "..", 2);
			ret = mk_tree_add(&fs->fs, ri->ino, BTRFS_INODE_REF_KEY, ri->ino, buf,
					  (uint32_t)sizeof(*r) + 2);
			if (ret)
				break;
		}
		if ((ret = add_inode_item(fs, ri, nbytes)))
			break;
		if (S_ISLNK(ri->st.st_mode) && (ret = add_inline(fs, ri->ino, ri->target, ri->tlen)))
			break;
		for (size_t x = 0; x < ri->nxattrs && ret == 0; x++) {
			const struct rd_xattr *xa = &ri->xattrs[x];
			struct btrfs_key loc = { 0, 0, 0 };
			if (sizeof(struct btrfs_dir_item) + xa->nlen + xa->vlen > max_item ||
			    xa->vlen > UINT16_MAX) {
				ubt_log(UBT_LOG_ERROR, "mkfs: xattr %s of inode %llu is too large for "
					"nodesize %u", xa->name, (unsigned long long)ri->ino,
					fs->nodesize);
				ret = -E2BIG;
				break;
			}
			int n = dir_entry_bytes(buf, &loc, BTRFS_FT_XATTR, fs->gen, xa->name, xa->nlen,
						xa->value, (uint16_t)xa->vlen);
			ret = append_to_item(&fs->fs, mark, ri->ino, BTRFS_XATTR_ITEM_KEY,
					     ubt_name_hash(xa->name, xa->nlen), buf, (uint32_t)n);
		}
		if (ret)
			break;
		/* Entries of a directory: DIR_ITEM (by hash) and DIR_INDEX. */
		if (S_ISDIR(ri->st.st_mode)) {
			for (size_t k = 0; k < ri->nentries && ret == 0; k++) {
				const struct rd_entry *e = &rd->entries[ri->first_entry + k];
				const struct rd_inode *c = &rd->inodes[e->child];
				struct btrfs_key loc = { c->ino, BTRFS_INODE_ITEM_KEY, 0 };
				int n = dir_entry_bytes(buf, &loc, ftype_of(c->st.st_mode), fs->gen,
							e->name, e->nlen, NULL, 0);
				ret = append_to_item(&fs->fs, mark, ri->ino, BTRFS_DIR_ITEM_KEY,
						     ubt_name_hash(e->name, e->nlen), buf, (uint32_t)n);
				if (ret == 0)
					ret = mk_tree_add(&fs->fs, ri->ino, BTRFS_DIR_INDEX_KEY, e->index,
							  buf, (uint32_t)n);
			}
		}
	}
	/* Back references: INODE_REF (child, parent) holding every name in it. */
	for (size_t k = 0; k < rd->nentries && ret == 0; k++) {
		const struct rd_entry *e = &rd->entries[k];
		const struct rd_inode *c = &rd->inodes[e->child];
		struct btrfs_inode_ref *r = (struct btrfs_inode_ref *)buf;
		memset(buf, 0, sizeof(*r));
		btrfs_set_inode_ref_index(r, e->index);
		btrfs_set_inode_ref_name_len(r, e->nlen);
		memcpy(buf + sizeof(*r), e->name, e->nlen);
		/* hard links in one directory share the item: search recent items */
		size_t from = fs->fs.nitems > 64 ? fs->fs.nitems - 64 : 0;
		if (c->nlink > 1)
			from = 0;
		ret = append_to_item(&fs->fs, from, c->ino, BTRFS_INODE_REF_KEY,
				     rd->inodes[e->parent].ino, buf,
				     (uint32_t)(sizeof(*r) + e->nlen));
	}
	free(buf);
	return ret;
}

int mk_rootdir_build(struct mk_fs *fs)
{
	struct rd_state *rd = fs->rd;
	uint64_t *nbytes_of = calloc(rd->ninodes, sizeof(*nbytes_of));
	int ret;

	rd->buf = malloc(RD_BUF);
	if (!nbytes_of || !rd->buf) {
		free(nbytes_of);
		return -ENOMEM;
	}
	int dfd = open(fs->cfg->rootdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		ret = -errno;
		goto out;
	}
	rd->next_report = 1024 * MK_SZ_1M;
	ret = build_data_dir(fs, rd, dfd, 0, nbytes_of);
	close(dfd);
	if (ret == 0)
		ret = csum_flush(fs, rd);
	if (ret == 0)
		ret = build_items(fs, rd, nbytes_of);
	if (ret == 0 && rd->bytes_done >= 1024 * MK_SZ_1M)
		mk_progress(fs, "copied %llu files, %llu MiB", (unsigned long long)rd->files_done,
			    (unsigned long long)(rd->bytes_done >> 20));
out:
	free(nbytes_of);
	return ret;
}

void mk_rootdir_free(struct mk_fs *fs)
{
	struct rd_state *rd = fs->rd;

	if (!rd)
		return;
	for (size_t i = 0; i < rd->ninodes; i++) {
		free(rd->inodes[i].target);
		for (size_t x = 0; x < rd->inodes[i].nxattrs; x++) {
			free(rd->inodes[i].xattrs[x].name);
			free(rd->inodes[i].xattrs[x].value);
		}
		free(rd->inodes[i].xattrs);
	}
	for (size_t i = 0; i < rd->nentries; i++)
		free(rd->entries[i].name);
	free(rd->inodes);
	free(rd->entries);
	free(rd->links);
	free(rd->csums);
	free(rd->buf);
	free(rd);
	fs->rd = NULL;
}
