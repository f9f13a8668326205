/*
 * The public API (include/ubtrfs/ubtrfs.h): the one place that turns
 * library internals into the stable interface.  Nothing else implements
 * ubtrfs_* functions, and nothing here holds filesystem logic of its own.
 */
#include <ubtrfs/ubtrfs.h>

#include "api_internal.h"
#include "base/base.h"
#include "fs/fs.h"
#include "format/format_names.h"
#include "io/io.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *ubtrfs_version(void)
{
	return UBTRFS_VERSION_STRING;
}

const char *ubtrfs_strerror(int err)
{
	return ubt_strerror(err);
}

void ubtrfs_set_log_handler(ubtrfs_log_fn fn, void *ctx)
{
	ubt_log_set_handler(fn, ctx);
}

void ubtrfs_uuid_str(const uint8_t uuid[16], char *buf)
{
	ubt_uuid_str(uuid, buf);
}

void ubtrfs_set_log_level(int max_level)
{
	ubt_log_set_level(max_level);
}

/* ---- dump-super -------------------------------------------------------- */

struct emitter {
	ubtrfs_write_fn write;
	void *ctx;
};

static void emit(struct emitter *e, const char *s)
{
	e->write(e->ctx, s, strlen(s));
}

static int dump_one_copy(struct ubt_bdev *bd, const char *device, int copy,
			 const struct ubtrfs_dump_super_opts *opts, struct emitter *e)
{
	struct btrfs_super_block sb;
	char why[UBT_SUPER_WHY_LEN], line[512];
	uint64_t off = btrfs_sb_offset(copy);
	int ret;

	ret = ubt_super_read_raw(bd, copy, &sb);
	if (ret == -ENOENT) {
		ubt_log(UBT_LOG_ERROR, "%s: superblock copy %d at %llu lies past the end of the device (%llu bytes)",
			device, copy, (unsigned long long)off, (unsigned long long)bd->size);
		return ret;
	}
	if (ret < 0) {
		ubt_log(UBT_LOG_ERROR, "%s: cannot read superblock copy %d at %llu: %s", device,
			copy, (unsigned long long)off, ubt_strerror(ret));
		return ret;
	}
	ret = ubt_super_validate(&sb, off, why, sizeof(why));
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "%s: superblock copy %d at %llu is invalid: %s%s", device, copy,
			(unsigned long long)off, why, opts->force ? " (printed anyway: --force)" : "");
		if (!opts->force)
			return ret;
	}
	snprintf(line, sizeof(line), "superblock: bytenr=%llu, device=%s\n",
		 (unsigned long long)off, device);
	emit(e, line);
	emit(e, "---------------------------------------------------------\n");
	ubt_super_print(&sb, opts->full, e->write, e->ctx);
	return ret;
}

int ubtrfs_dump_super(const char *device, const struct ubtrfs_dump_super_opts *opts,
		      ubtrfs_write_fn write, void *ctx)
{
	struct emitter e = { write, ctx };
	struct ubt_bdev *bd;
	int ret, status = 0;

	ret = ubt_bdev_open_file(device, UBT_BDEV_RDONLY, &bd);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "cannot open %s: %s", device, ubt_strerror(ret));
		return ret;
	}
	if (bd->size < btrfs_sb_offset(0) + BTRFS_SUPER_INFO_SIZE) {
		ubt_log(UBT_LOG_ERROR, "%s: device of %llu bytes is too small to hold a btrfs superblock",
			device, (unsigned long long)bd->size);
		status = -EUCLEAN;
	} else if (!opts->all) {
		status = dump_one_copy(bd, device, opts->copy, opts, &e);
		if (status == 0 || opts->force)
			emit(&e, "\n");
	} else {
		/* As btrfs-progs: one blank line per copy slot, even for the
		 * copies that lie past the end of the device (and do not exist). */
		for (int copy = 0; copy < BTRFS_SUPER_MIRROR_MAX; copy++) {
			if (btrfs_sb_offset(copy) + BTRFS_SUPER_INFO_SIZE <= bd->size) {
				ret = dump_one_copy(bd, device, copy, opts, &e);
				if (ret && !status)
					status = ret;
			}
			emit(&e, "\n");
		}
	}
	ubt_bdev_close(bd);
	return status;
}

/* ---- open / close ------------------------------------------------------ */

int ubtrfs_open_cache(const char *const *devices, size_t ndev, unsigned flags,
		      uint64_t cache_bytes, ubtrfs_fs **out)
{
	bool rw = flags & UBTRFS_OPEN_RDWR;
	struct btrfs_super_block sb;
	struct ubt_bdev *bd;
	ubtrfs_fs *f;
	int ret;

	*out = NULL;
	if (ndev == 0)
		return -EINVAL;
	/* The feature policy first, before any tree is read. */
	ret = ubt_bdev_open_file(devices[0], UBT_BDEV_RDONLY, &bd);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "cannot open %s: %s", devices[0], ubt_strerror(ret));
		return ret;
	}
	ret = ubt_super_read_best(bd, &sb, NULL);
	ubt_bdev_close(bd);
	if (ret)
		return ret;
	/* Read-write also needs every feature bit writable; the writer's own
	 * checks (ubt_wfs_init) refuse further conditions. */
	ret = ubt_super_check_features(&sb, rw, &ubt_feature_policy_current, devices[0]);
	if (ret)
		return ret;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	struct ubt_fs_opts opts = { 0 };
	opts.vol.degraded = flags & UBTRFS_OPEN_DEGRADED;
	opts.nologreplay = flags & UBTRFS_OPEN_NOLOGREPLAY;
	opts.cache_bytes = cache_bytes;
	opts.vol.writable = rw;
	opts.vol.lock_shared = flags & UBTRFS_OPEN_KEEP_WRITERS_OUT;
	if (pthread_rwlock_init(&f->lock, NULL)) {
		free(f);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&f->wlock, NULL)) {
		pthread_rwlock_destroy(&f->lock);
		free(f);
		return -ENOMEM;
	}
	ret = ubt_fs_open(devices, ndev, &opts, &f->fs);
	if (ret) {
		pthread_mutex_destroy(&f->wlock);
		pthread_rwlock_destroy(&f->lock);
		free(f);
		return ret;
	}
	/* Every device must pass the policy too (they share the features, but
	 * a stale device's superblock is checked rather than assumed). */
	ret = ubt_super_check_features(&f->fs->vol->super, rw, &ubt_feature_policy_current,
				       devices[0]);
	if (!ret && rw)
		ret = ubt_api_write_init(f);
	if (ret) {
		ubtrfs_close(f);
		return ret;
	}
	f->readonly = !rw;
	*out = f;
	return 0;
}

int ubtrfs_open(const char *const *devices, size_t ndev, unsigned flags, ubtrfs_fs **out)
{
	return ubtrfs_open_cache(devices, ndev, flags, 0, out);
}

void ubtrfs_close(ubtrfs_fs *f)
{
	if (!f)
		return;
	ubt_api_write_close(f);	/* commits what a writable handle still holds */
	ubt_fs_close(f->fs);
	pthread_mutex_destroy(&f->wlock);
	pthread_rwlock_destroy(&f->lock);
	free(f);
}

bool ubtrfs_is_readonly(const ubtrfs_fs *f)
{
	return f->readonly;
}

void ubtrfs_set_block_hook(ubtrfs_fs *f, ubtrfs_block_fn fn, void *ctx)
{
	f->block_hook = fn;
	f->block_ctx = ctx;
}

void ubtrfs_set_abort_hook(ubtrfs_fs *f, ubtrfs_abort_fn fn, void *ctx)
{
	f->abort_hook = fn;
	f->abort_ctx = ctx;
}

/* ---- features ---------------------------------------------------------- */

void ubtrfs_supported_features(struct ubtrfs_feature_report *out)
{
	memset(out, 0, sizeof(*out));
	out->known[UBTRFS_FEATURE_COMPAT] = ubt_compat_known;
	out->known[UBTRFS_FEATURE_COMPAT_RO] = ubt_compat_ro_known;
	out->known[UBTRFS_FEATURE_INCOMPAT] = ubt_incompat_known;
	/* Unknown compat bits never restrict; compat_ro bits never restrict reading. */
	out->read_supported[UBTRFS_FEATURE_COMPAT] = ~(uint64_t)0;
	out->read_supported[UBTRFS_FEATURE_COMPAT_RO] = ~(uint64_t)0;
	out->read_supported[UBTRFS_FEATURE_INCOMPAT] = ubt_feature_policy_current.incompat_read;
	out->write_supported[UBTRFS_FEATURE_COMPAT] = ~(uint64_t)0;
	out->write_supported[UBTRFS_FEATURE_COMPAT_RO] = ubt_feature_policy_current.compat_ro_write;
	out->write_supported[UBTRFS_FEATURE_INCOMPAT] = ubt_feature_policy_current.incompat_write;
}

void ubtrfs_features(const ubtrfs_fs *fs, struct ubtrfs_feature_report *out)
{
	ubtrfs_supported_features(out);
	/* A commit rewrites the superblock: read it under the read lock. */
	ubt_api_rdlock_noerr((ubtrfs_fs *)fs);
	const struct btrfs_super_block *sb = &fs->fs->vol->super;
	out->used[UBTRFS_FEATURE_COMPAT] = btrfs_super_compat_flags(sb);
	out->used[UBTRFS_FEATURE_COMPAT_RO] = btrfs_super_compat_ro_flags(sb);
	out->used[UBTRFS_FEATURE_INCOMPAT] = btrfs_super_incompat_flags(sb);
	ubt_api_unlock((ubtrfs_fs *)fs);
}

const char *ubtrfs_feature_name(enum ubtrfs_feature_class cls, unsigned bit)
{
	const struct btrfs_flag_table *table;

	if (bit >= 64)
		return NULL;
	switch (cls) {
	case UBTRFS_FEATURE_COMPAT_RO:
		table = &btrfs_compat_ro_flag_table;
		break;
	case UBTRFS_FEATURE_INCOMPAT:
		table = &btrfs_incompat_flag_table;
		break;
	default:
		return NULL;
	}
	return ubt_feature_bit_name(table, (uint64_t)1 << bit);
}

void ubt_api_set_excl(ubtrfs_fs *f, bool on)
{
	if (f->fs)
		ubt_tree_set_exclusive(&f->fs->tree, on);
}

void ubt_api_lock_misuse(void)
{
	fprintf(stderr, "libubtrfs: a read call was made from inside a write call on the same "
			"handle (from a callback, the block hook or the log handler); stopping\n");
	abort();
}
