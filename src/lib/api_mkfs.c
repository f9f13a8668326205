/*
 * The public API of filesystem creation (ubtrfs_mkfs): translates the
 * public options into the mkfs layer's configuration.  No logic of its own.
 */
#include <ubtrfs/ubtrfs.h>

#include "base/base.h"
#include "format/btrfs_format.h"
#include "mkfs/mkfs.h"

#include <string.h>

static int profile_bits(enum ubtrfs_profile p, uint64_t *out)
{
	switch (p) {
	case UBTRFS_PROFILE_DEFAULT: *out = UBT_MKFS_PROFILE_DEFAULT; return 0;
	case UBTRFS_PROFILE_SINGLE: *out = 0; return 0;
	case UBTRFS_PROFILE_DUP: *out = BTRFS_BLOCK_GROUP_DUP; return 0;
	case UBTRFS_PROFILE_RAID0: *out = BTRFS_BLOCK_GROUP_RAID0; return 0;
	case UBTRFS_PROFILE_RAID1: *out = BTRFS_BLOCK_GROUP_RAID1; return 0;
	case UBTRFS_PROFILE_RAID1C3: *out = BTRFS_BLOCK_GROUP_RAID1C3; return 0;
	case UBTRFS_PROFILE_RAID1C4: *out = BTRFS_BLOCK_GROUP_RAID1C4; return 0;
	case UBTRFS_PROFILE_RAID10: *out = BTRFS_BLOCK_GROUP_RAID10; return 0;
	case UBTRFS_PROFILE_RAID5: *out = BTRFS_BLOCK_GROUP_RAID5; return 0;
	case UBTRFS_PROFILE_RAID6: *out = BTRFS_BLOCK_GROUP_RAID6; return 0;
	}
	return -EINVAL;
}

int ubtrfs_mkfs(const char *const *devices, size_t ndev, const struct ubtrfs_mkfs_opts *opts)
{
	static const struct ubtrfs_mkfs_opts defaults;
	struct ubt_mkfs_cfg cfg;
	int ret;

	if (!devices)
		return -EINVAL;
	if (!opts)
		opts = &defaults;
	ubt_mkfs_cfg_init(&cfg);
	cfg.label = opts->label;
	if (opts->fsid) {
		cfg.have_fsid = true;
		memcpy(cfg.fsid, opts->fsid, 16);
	}
	if (opts->nodesize)
		cfg.nodesize = opts->nodesize;
	if (opts->sectorsize)
		cfg.sectorsize = opts->sectorsize;
	cfg.csum_type = (uint16_t)opts->csum_type;
	cfg.no_holes = !opts->disable_no_holes;
	cfg.free_space_tree = !opts->disable_free_space_tree;
	cfg.block_group_tree = opts->block_group_tree;
	cfg.byte_count = opts->byte_count;
	cfg.force = opts->force;
	if ((ret = profile_bits(opts->metadata_profile, &cfg.meta_profile)) ||
	    (ret = profile_bits(opts->data_profile, &cfg.data_profile)))
		return ret;
	cfg.reproducible = opts->reproducible;
	cfg.time_sec = opts->time;
	cfg.rootdir = opts->rootdir;
	cfg.progress = opts->progress;
	cfg.progress_ctx = opts->progress_ctx;
	return ubt_mkfs(devices, ndev, &cfg);
}
