/*
 * mkfs layer: create a new btrfs filesystem in one pass.
 *
 * Sits beside the future transaction layer, above format/, base/, io/,
 * volume/ (superblock checksums) and tree/ (the checker, run on every block
 * before it is written).  No copy-on-write engine is involved: a bulk builder
 * collects every item of every tree in memory, sorts them, packs leaves and
 * nodes bottom-up, allocates tree blocks sequentially in the metadata (chunk
 * tree: system) chunk and derives the extent, free-space and (with the
 * block-group-tree feature) block group trees from that allocation,
 * iterating until the allocation no longer changes.
 *
 * The library never prints: progress text goes through cfg->progress.
 */
#ifndef UBTRFS_MKFS_H
#define UBTRFS_MKFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Profiles as BTRFS_BLOCK_GROUP_* bits; UBT_MKFS_PROFILE_DEFAULT picks. */
#define UBT_MKFS_PROFILE_DEFAULT (~0ULL)
#define UBT_MKFS_PROFILE_SINGLE 0ULL

typedef void (*ubt_mkfs_progress_fn)(void *ctx, const char *text);

struct ubt_mkfs_cfg {
	const char *label;		/* NULL or "": none; < 256 bytes */
	bool have_fsid;
	uint8_t fsid[16];
	uint32_t nodesize;		/* 0: 16 KiB */
	uint32_t sectorsize;		/* 0: 4 KiB */
	uint16_t csum_type;		/* BTRFS_CSUM_TYPE_* */
	bool no_holes;			/* NO_HOLES incompat bit */
	bool free_space_tree;		/* FREE_SPACE_TREE compat_ro bits + tree */
	bool block_group_tree;		/* BLOCK_GROUP_TREE compat_ro bit + tree 11
					 * (needs no_holes and free_space_tree) */
	uint64_t byte_count;		/* size of each device, 0: all of it */
	bool force;			/* overwrite an existing btrfs */
	uint64_t meta_profile;		/* BTRFS_BLOCK_GROUP_* profile bit or default */
	uint64_t data_profile;
	bool reproducible;		/* fixed times, derived uuids */
	int64_t time_sec;		/* creation time when reproducible */
	const char *rootdir;		/* populate the top level from this directory */
	ubt_mkfs_progress_fn progress;	/* optional progress lines */
	void *progress_ctx;
};

void ubt_mkfs_cfg_init(struct ubt_mkfs_cfg *cfg);

/*
 * Create the filesystem on `ndev` devices (files or block devices; with
 * byte_count a missing file is created).  0 or -errno; the log says why.
 *   -EEXIST     a btrfs superblock is present and force is not set
 *   -EINVAL     bad option or combination
 *   -EOPNOTSUPP a profile or feature this builder does not write
 *   -ENOSPC     the devices are too small
 */
int ubt_mkfs(const char *const *paths, size_t ndev, const struct ubt_mkfs_cfg *cfg);

#endif /* UBTRFS_MKFS_H */
