/*
 * mkfs layer: the entry point and the order of work.
 *
 *   validate options -> open (create/extend) the devices, refuse an existing
 *   btrfs without force -> uuids and times -> chunks (system, metadata, data)
 *   -> populate from --rootdir (data extents laid out and written) -> fixed
 *   trees -> allocation fixpoint -> zero the first MiB, write tree blocks,
 *   flush -> superblocks, flush.
 * Only file data (--rootdir) reaches the devices before every tree is built
 * and checked; the superblocks come last, so a failure never leaves a
 * filesystem that looks valid.
 */
#include "mkfs/mkfs_int.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void ubt_mkfs_cfg_init(struct ubt_mkfs_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->nodesize = 16384;
	cfg->sectorsize = 4096;
	cfg->csum_type = BTRFS_CSUM_TYPE_CRC32;
	cfg->no_holes = true;
	cfg->free_space_tree = true;
	cfg->meta_profile = UBT_MKFS_PROFILE_DEFAULT;
	cfg->data_profile = UBT_MKFS_PROFILE_DEFAULT;
}

void mk_progress(struct mk_fs *fs, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	if (!fs->cfg->progress)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fs->cfg->progress(fs->cfg->progress_ctx, buf);
}

void mk_fill_inode(struct mk_fs *fs, struct btrfs_inode_item *ii, uint32_t mode, uint32_t nlink,
		   uint64_t size, uint64_t nbytes)
{
	memset(ii, 0, sizeof(*ii));
	btrfs_set_inode_generation(ii, fs->gen);
	btrfs_set_inode_transid(ii, fs->gen);
	btrfs_set_inode_size(ii, size);
	btrfs_set_inode_nbytes(ii, nbytes);
	btrfs_set_inode_nlink(ii, nlink);
	btrfs_set_inode_mode(ii, mode);
	struct btrfs_timespec *ts[] = { btrfs_inode_atime(ii), btrfs_inode_ctime(ii),
					btrfs_inode_mtime(ii), btrfs_inode_otime(ii) };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(ts); i++) {
		btrfs_set_timespec_sec(ts[i], (uint64_t)fs->now_sec);
		btrfs_set_timespec_nsec(ts[i], fs->now_nsec);
	}
}

/* ---- uuids ------------------------------------------------------------ */

/* A uuid: random, or (reproducible) derived from the inputs and `what`. */
static int make_uuid(struct mk_fs *fs, const char *what, uint64_t idx, uint8_t *out)
{
	int ret;

	if (!fs->cfg->reproducible) {
		ret = ubt_random_bytes(out, 16);
	} else {
		uint8_t h[UBT_CSUM_MAX];
		size_t wl = strlen(what);
		uint8_t *m = malloc(fs->seedlen + wl + 8);
		if (!m)
			return -ENOMEM;
		memcpy(m, fs->seed, fs->seedlen);
		memcpy(m + fs->seedlen, what, wl);
		ubt_put_le64(m + fs->seedlen + wl, idx);
		ret = ubt_csum(UBT_CSUM_SHA256, m, fs->seedlen + wl + 8, h);
		free(m);
		if (ret == 0)
			memcpy(out, h, 16);
	}
	if (ret == 0)
		ubt_uuid_v4(out);
	return ret;
}

static int make_seed(struct mk_fs *fs)
{
	const struct ubt_mkfs_cfg *cfg = fs->cfg;
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "ubtrfs-mkfs-1|%s|%lld|%u|%u|%u|%d|%d|%llx|%llx|%s|",
			 cfg->label ? cfg->label : "", (long long)cfg->time_sec, cfg->nodesize,
			 cfg->sectorsize, cfg->csum_type, cfg->no_holes, cfg->free_space_tree,
			 (unsigned long long)fs->meta_profile, (unsigned long long)fs->data_profile,
			 cfg->rootdir ? cfg->rootdir : "");
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = (int)strlen(buf);
	/* Appended only when on, so images without it keep their uuids. */
	if (cfg->block_group_tree && (size_t)n + 4 < sizeof(buf)) {
		memcpy(buf + n, "bgt|", 5);
		n += 4;
	}
	size_t len = (size_t)n + fs->ndev * 8 + (cfg->have_fsid ? 16 : 0);
	fs->seed = malloc(len);
	if (!fs->seed)
		return -ENOMEM;
	memcpy(fs->seed, buf, (size_t)n);
	size_t pos = (size_t)n;
	for (size_t i = 0; i < fs->ndev; i++, pos += 8)
		ubt_put_le64(fs->seed + pos, fs->devs[i].size);
	if (cfg->have_fsid)
		memcpy(fs->seed + pos, cfg->fsid, 16);
	fs->seedlen = len;
	return 0;
}

/* ---- devices ---------------------------------------------------------- */

static int in_use(const char *path)
{
	ubt_log(UBT_LOG_ERROR, "mkfs: %s is in use: mounted, or opened by another program", path);
	return -EBUSY;
}

static int open_device(struct mk_fs *fs, const char *path, struct mk_dev *d)
{
	const struct ubt_mkfs_cfg *cfg = fs->cfg;
	struct stat st;
	int ret;

	d->path = path;
	if (cfg->byte_count) {
		bool exists = stat(path, &st) == 0;
		if (!exists || S_ISREG(st.st_mode)) {
			int fd = open(path, O_WRONLY | O_CREAT, 0644);
			if (fd < 0) {
				ret = -errno;
				ubt_log(UBT_LOG_ERROR, "mkfs: cannot create %s: %s", path,
					ubt_strerror(ret));
				return ret;
			}
			/* Not even grown while someone holds it (the locked
			 * open below would refuse it after the fact). */
			if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
				close(fd);
				return in_use(path);
			}
			if ((!exists || (uint64_t)st.st_size < cfg->byte_count) &&
			    ftruncate(fd, (off_t)cfg->byte_count) != 0) {
				ret = -errno;
				close(fd);
				ubt_log(UBT_LOG_ERROR, "mkfs: cannot size %s: %s", path,
					ubt_strerror(ret));
				return ret;
			}
			close(fd);
		}
	}
	ret = ubt_bdev_open_file(path, 0, &d->bd);
	if (ret == -EBUSY)
		return in_use(path);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "mkfs: cannot open %s: %s", path, ubt_strerror(ret));
		return ret;
	}
	uint64_t size = d->bd->size;
	if (cfg->byte_count) {
		if (cfg->byte_count > size) {
			ubt_log(UBT_LOG_ERROR, "mkfs: %s is smaller than the requested size", path);
			return -ENOSPC;
		}
		size = cfg->byte_count;
	}
	d->size = size & ~((uint64_t)fs->sectorsize - 1);
	d->cursor = MK_SZ_1M;

	if (!cfg->force) {
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
			uint8_t sb[BTRFS_SUPER_INFO_SIZE];
			uint64_t off = btrfs_sb_offset(m);
			if (off + sizeof(sb) > d->bd->size)
				break;
			if (ubt_bdev_read(d->bd, sb, sizeof(sb), off) == 0 &&
			    ubt_get_le64(sb + 64) == BTRFS_MAGIC) {
				ubt_log(UBT_LOG_ERROR,
					"mkfs: %s appears to contain an existing btrfs filesystem; "
					"use force (-f) to overwrite", path);
				return -EEXIST;
			}
		}
	}
	return 0;
}

/* ---- profiles and chunk sizes ----------------------------------------- */

static const char *profile_name(uint64_t p)
{
	switch (p) {
	case 0: return "single";
	case BTRFS_BLOCK_GROUP_DUP: return "dup";
	case BTRFS_BLOCK_GROUP_RAID0: return "raid0";
	case BTRFS_BLOCK_GROUP_RAID1: return "raid1";
	case BTRFS_BLOCK_GROUP_RAID1C3: return "raid1c3";
	case BTRFS_BLOCK_GROUP_RAID1C4: return "raid1c4";
	case BTRFS_BLOCK_GROUP_RAID10: return "raid10";
	case BTRFS_BLOCK_GROUP_RAID5: return "raid5";
	case BTRFS_BLOCK_GROUP_RAID6: return "raid6";
	default: return "?";
	}
}

static int check_profile(size_t ndev, uint64_t p, const char *what)
{
	size_t min = 1;

	switch (p) {
	case 0: case BTRFS_BLOCK_GROUP_DUP: break;
	case BTRFS_BLOCK_GROUP_RAID0: case BTRFS_BLOCK_GROUP_RAID1:
	case BTRFS_BLOCK_GROUP_RAID10: min = 2; break;
	case BTRFS_BLOCK_GROUP_RAID1C3: min = 3; break;
	case BTRFS_BLOCK_GROUP_RAID1C4: min = 4; break;
	case BTRFS_BLOCK_GROUP_RAID5: case BTRFS_BLOCK_GROUP_RAID6:
		ubt_log(UBT_LOG_ERROR, "mkfs: %s profile %s is not supported (RAID5/6 are not "
			"written by this tool)", what, profile_name(p));
		return -EOPNOTSUPP;
	default:
		ubt_log(UBT_LOG_ERROR, "mkfs: unknown %s profile", what);
		return -EINVAL;
	}
	if (ndev < min) {
		ubt_log(UBT_LOG_ERROR, "mkfs: %s profile %s needs at least %zu devices, have %zu",
			what, profile_name(p), min, ndev);
		return -EINVAL;
	}
	return 0;
}

/* Copies of each byte a profile keeps (space per byte of chunk). */
static uint64_t profile_copies(uint64_t p)
{
	if (p & (BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_RAID10))
		return 2;
	if (p & BTRFS_BLOCK_GROUP_RAID1C3)
		return 3;
	if (p & BTRFS_BLOCK_GROUP_RAID1C4)
		return 4;
	return 1;
}

static uint32_t profile_nstripes(const struct mk_fs *fs, uint64_t p)
{
	if (p & BTRFS_BLOCK_GROUP_RAID0)
		return (uint32_t)fs->ndev;
	if (p & BTRFS_BLOCK_GROUP_RAID10)
		return (uint32_t)(fs->ndev & ~(size_t)1);
	return (uint32_t)profile_copies(p);
}

/* Stripe size for a chunk of about `len` bytes. */
static uint64_t stripe_for(const struct mk_fs *fs, uint64_t p, uint64_t len)
{
	uint32_t ds = mk_profile_data_stripes(p, profile_nstripes(fs, p));
	uint64_t s = (len / ds + BTRFS_STRIPE_LEN - 1) & ~(BTRFS_STRIPE_LEN - 1);

	return s ? s : BTRFS_STRIPE_LEN;
}

static int create_chunks(struct mk_fs *fs, uint64_t data_len, uint64_t meta_min)
{
	const uint64_t mib = MK_SZ_1M;
	uint64_t mp = fs->meta_profile, dp = fs->data_profile;
	int ret;

	/* Metadata: 10% of the filesystem per copy, 32..256 MiB (as mkfs.btrfs). */
	uint64_t meta = fs->total_bytes / 10 / profile_copies(mp);
	meta &= ~(BTRFS_STRIPE_LEN - 1);
	meta = UBT_MAX(meta, 32 * mib);
	meta = UBT_MIN(meta, 256 * mib);
	meta = UBT_MAX(meta, meta_min);
	uint64_t data = UBT_MAX(data_len, 8 * mib);

	/* Shrink metadata to what the devices hold (sizes in device bytes). */
	uint64_t room = 0;
	for (size_t i = 0; i < fs->ndev; i++)
		room += fs->devs[i].size - fs->devs[i].cursor;
	uint64_t sys_need = 8 * mib * profile_copies(mp);
	uint64_t data_need = data * profile_copies(dp);
	if (room < sys_need + data_need + 4 * mib * profile_copies(mp)) {
		ubt_log(UBT_LOG_ERROR, "mkfs: the device%s too small for this filesystem",
			fs->ndev > 1 ? "s are" : " is");
		return -ENOSPC;
	}
	while (meta > 4 * mib && sys_need + data_need + meta * profile_copies(mp) > room)
		meta -= mib;

	ret = mk_chunk_create(fs, BTRFS_BLOCK_GROUP_SYSTEM | mp, stripe_for(fs, mp, 8 * mib), NULL);
	if (ret == 0)
		ret = mk_chunk_create(fs, BTRFS_BLOCK_GROUP_METADATA | mp, stripe_for(fs, mp, meta),
				      NULL);
	if (ret == 0)
		ret = mk_chunk_create(fs, BTRFS_BLOCK_GROUP_DATA | dp, stripe_for(fs, dp, data), NULL);
	if (ret == -ENOSPC)
		ubt_log(UBT_LOG_ERROR, "mkfs: no room for the %s chunks on the device%s",
			"initial", fs->ndev > 1 ? "s" : "");
	return ret;
}

/* ---- the whole run ---------------------------------------------------- */

static int zero_start(struct mk_fs *fs)
{
	uint8_t *z = calloc(1, MK_SZ_1M);
	int ret = 0;

	if (!z)
		return -ENOMEM;
	for (size_t i = 0; i < fs->ndev && ret == 0; i++)
		ret = ubt_bdev_write(fs->devs[i].bd, z, MK_SZ_1M, 0);
	free(z);
	return ret;
}

static int check_cfg(const struct ubt_mkfs_cfg *cfg, size_t ndev)
{
	if (ndev == 0 || ndev > MK_MAX_DEV) {
		ubt_log(UBT_LOG_ERROR, "mkfs: between 1 and %d devices", MK_MAX_DEV);
		return -EINVAL;
	}
	if (!UBT_IS_POW2(cfg->sectorsize) || cfg->sectorsize < 4096 || cfg->sectorsize > 65536) {
		ubt_log(UBT_LOG_ERROR, "mkfs: invalid sectorsize %u", cfg->sectorsize);
		return -EINVAL;
	}
	if (!UBT_IS_POW2(cfg->nodesize) || cfg->nodesize < cfg->sectorsize ||
	    cfg->nodesize > BTRFS_MAX_METADATA_BLOCKSIZE) {
		ubt_log(UBT_LOG_ERROR, "mkfs: invalid nodesize %u (power of two, sectorsize..64K)",
			cfg->nodesize);
		return -EINVAL;
	}
	if (ubt_csum_size(cfg->csum_type) == 0) {
		ubt_log(UBT_LOG_ERROR, "mkfs: unknown checksum type %u", cfg->csum_type);
		return -EINVAL;
	}
	/* The kernel refuses a block group tree without both (btrfs_validate_super). */
	if (cfg->block_group_tree && (!cfg->no_holes || !cfg->free_space_tree)) {
		ubt_log(UBT_LOG_ERROR, "mkfs: block-group-tree requires the no-holes and "
			"free-space-tree features");
		return -EINVAL;
	}
	if (cfg->label && strlen(cfg->label) >= BTRFS_LABEL_SIZE) {
		ubt_log(UBT_LOG_ERROR, "mkfs: label too long (max %d bytes)", BTRFS_LABEL_SIZE - 1);
		return -EINVAL;
	}
	return 0;
}

int ubt_mkfs(const char *const *paths, size_t ndev, const struct ubt_mkfs_cfg *cfg)
{
	struct mk_fs *fs;
	int ret;

	ret = check_cfg(cfg, ndev);
	if (ret)
		return ret;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->cfg = cfg;
	fs->nodesize = cfg->nodesize;
	fs->sectorsize = cfg->sectorsize;
	fs->gen = 1;
	fs->ndev = ndev;
	fs->logical_cursor = MK_SZ_1M;
	fs->meta_profile = cfg->meta_profile == UBT_MKFS_PROFILE_DEFAULT
				   ? (ndev > 1 ? BTRFS_BLOCK_GROUP_RAID1 : BTRFS_BLOCK_GROUP_DUP)
				   : cfg->meta_profile;
	fs->data_profile = cfg->data_profile == UBT_MKFS_PROFILE_DEFAULT ? 0 : cfg->data_profile;
	if ((ret = check_profile(ndev, fs->meta_profile, "metadata")) ||
	    (ret = check_profile(ndev, fs->data_profile, "data")))
		goto out;

	fs->incompat = BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF | BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF |
		       BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA;
	if (cfg->no_holes)
		fs->incompat |= BTRFS_FEATURE_INCOMPAT_NO_HOLES;
	if ((fs->meta_profile | fs->data_profile) &
	    (BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4))
		fs->incompat |= BTRFS_FEATURE_INCOMPAT_RAID1C34;
	if (cfg->free_space_tree)
		fs->compat_ro = BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE |
				BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID;
	if (cfg->block_group_tree)
		fs->compat_ro |= BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;

	for (size_t i = 0; i < ndev; i++) {
		fs->devs[i].devid = i + 1;
		ret = open_device(fs, paths[i], &fs->devs[i]);
		if (ret)
			goto out;
		fs->total_bytes += fs->devs[i].size;
	}

	if (cfg->reproducible) {
		fs->now_sec = cfg->time_sec;
		fs->now_nsec = 0;
		if ((ret = make_seed(fs)))
			goto out;
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		fs->now_sec = ts.tv_sec;
		fs->now_nsec = (uint32_t)ts.tv_nsec;
	}
	if (cfg->have_fsid)
		memcpy(fs->fsid, cfg->fsid, 16);
	else if ((ret = make_uuid(fs, "fsid", 0, fs->fsid)))
		goto out;
	if ((ret = make_uuid(fs, "chunk-tree", 0, fs->chunk_uuid)) ||
	    (ret = make_uuid(fs, "fs-tree", 0, fs->fs_tree_uuid)))
		goto out;
	for (size_t i = 0; i < ndev; i++)
		if ((ret = make_uuid(fs, "device", i + 1, fs->devs[i].uuid)))
			goto out;

	fs->root.id = BTRFS_ROOT_TREE_OBJECTID;
	fs->extent.id = BTRFS_EXTENT_TREE_OBJECTID;
	fs->chunk.id = BTRFS_CHUNK_TREE_OBJECTID;
	fs->chunk.system = true;
	fs->dev.id = BTRFS_DEV_TREE_OBJECTID;
	fs->fs.id = BTRFS_FS_TREE_OBJECTID;
	fs->csum.id = BTRFS_CSUM_TREE_OBJECTID;
	fs->uuid.id = BTRFS_UUID_TREE_OBJECTID;
	fs->fst.id = BTRFS_FREE_SPACE_TREE_OBJECTID;
	fs->reloc.id = BTRFS_DATA_RELOC_TREE_OBJECTID;
	fs->bgt.id = BTRFS_BLOCK_GROUP_TREE_OBJECTID;

	fs->chk.nodesize = fs->nodesize;
	fs->chk.sectorsize = fs->sectorsize;
	fs->chk.csum_type = cfg->csum_type;
	memcpy(fs->chk.fsid, fs->fsid, 16);
	fs->chk.incompat_flags = fs->incompat;
	fs->chk.super_generation = fs->gen;

	uint64_t data_bytes = 0, meta_est = 0;
	if (cfg->rootdir) {
		ret = mk_rootdir_scan(fs, &data_bytes, &meta_est);
		if (ret)
			goto out;
	}
	if ((ret = create_chunks(fs, data_bytes, meta_est)))
		goto out;
	if (cfg->rootdir && (ret = mk_rootdir_build(fs)))
		goto out;
	if ((ret = mk_build_fixed_trees(fs)) || (ret = mk_build_allocated_trees(fs)))
		goto out;

	if ((ret = zero_start(fs)) || (ret = mk_write_trees(fs)))
		goto out;
	for (size_t i = 0; i < ndev; i++)
		if ((ret = ubt_bdev_flush(fs->devs[i].bd)))
			goto out;
	ret = mk_write_supers(fs);
out:
	if (cfg->rootdir)
		mk_rootdir_free(fs);
	struct mk_tree *ts[] = { &fs->root, &fs->extent, &fs->chunk, &fs->dev, &fs->fs,
				 &fs->csum, &fs->uuid, &fs->fst, &fs->reloc, &fs->bgt };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(ts); i++)
		mk_tree_free(ts[i]);
	for (size_t i = 0; i < fs->nchunks; i++)
		free(fs->chunks[i].alloc);
	free(fs->chunks);
	free(fs->dext);
	free(fs->seed);
	for (size_t i = 0; i < ndev; i++)
		if (fs->devs[i].bd)
			ubt_bdev_close(fs->devs[i].bd);
	free(fs);
	return ret;
}
