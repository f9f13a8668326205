/*
 * mkfs layer: the superblocks of a new filesystem.
 *
 * Fields as mkfs.btrfs 6.2 sets them: WRITTEN flag, root_dir 6, stripesize
 * = sectorsize, cache_generation 0 with the free-space tree (-1 without, so
 * no v1 cache is trusted), uuid_tree_generation 0 (the kernel rescans),
 * metadata_uuid left zero, the system chunks in sys_chunk_array and the
 * backup root slot 0 describing this generation.  Every device gets every
 * copy that fits, each with its own bytenr and dev_item, validated by the
 * superblock checker before it is written.  Written last, after the tree
 * blocks were flushed; then flushed again.
 */
#include "mkfs/mkfs_int.h"
#include "volume/volume.h"

#include <stdlib.h>
#include <string.h>

static int fill_sys_array(struct mk_fs *fs, struct btrfs_super_block *sb)
{
	uint8_t *arr = btrfs_super_sys_chunk_array(sb);
	uint32_t pos = 0;

	for (size_t i = 0; i < fs->nchunks; i++) {
		const struct mk_chunk *c = &fs->chunks[i];
		if (!(c->type & BTRFS_BLOCK_GROUP_SYSTEM))
			continue;
		size_t need = sizeof(struct btrfs_disk_key) + btrfs_chunk_item_size(c->nstripes);
		if (pos + need > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE)
			return -E2BIG;
		struct btrfs_key k = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
				       c->logical };
		btrfs_cpu_key_to_disk((struct btrfs_disk_key *)(arr + pos), &k);
		pos += (uint32_t)sizeof(struct btrfs_disk_key);
		pos += (uint32_t)mk_fill_chunk_item(fs, c, arr + pos);
	}
	btrfs_set_super_sys_chunk_array_size(sb, pos);
	return 0;
}

static void fill_backup(struct mk_fs *fs, struct btrfs_super_block *sb, uint64_t bytes_used)
{
	struct btrfs_root_backup *b = btrfs_super_root_backup(sb, 0);

	btrfs_set_root_backup_tree_root(b, mk_tree_root(&fs->root));
	btrfs_set_root_backup_tree_root_gen(b, fs->gen);
	btrfs_set_root_backup_tree_root_level(b, (uint8_t)fs->root.level);
	btrfs_set_root_backup_chunk_root(b, mk_tree_root(&fs->chunk));
	btrfs_set_root_backup_chunk_root_gen(b, fs->gen);
	btrfs_set_root_backup_chunk_root_level(b, (uint8_t)fs->chunk.level);
	btrfs_set_root_backup_extent_root(b, mk_tree_root(&fs->extent));
	btrfs_set_root_backup_extent_root_gen(b, fs->gen);
	btrfs_set_root_backup_extent_root_level(b, (uint8_t)fs->extent.level);
	btrfs_set_root_backup_fs_root(b, mk_tree_root(&fs->fs));
	btrfs_set_root_backup_fs_root_gen(b, fs->gen);
	btrfs_set_root_backup_fs_root_level(b, (uint8_t)fs->fs.level);
	btrfs_set_root_backup_dev_root(b, mk_tree_root(&fs->dev));
	btrfs_set_root_backup_dev_root_gen(b, fs->gen);
	btrfs_set_root_backup_dev_root_level(b, (uint8_t)fs->dev.level);
	btrfs_set_root_backup_csum_root(b, mk_tree_root(&fs->csum));
	btrfs_set_root_backup_csum_root_gen(b, fs->gen);
	btrfs_set_root_backup_csum_root_level(b, (uint8_t)fs->csum.level);
	btrfs_set_root_backup_total_bytes(b, fs->total_bytes);
	btrfs_set_root_backup_bytes_used(b, bytes_used);
	btrfs_set_root_backup_num_devices(b, fs->ndev);
}

int mk_write_supers(struct mk_fs *fs)
{
	struct btrfs_super_block *sb = calloc(1, sizeof(*sb));
	uint64_t bytes_used = 0;
	int ret;

	if (!sb)
		return -ENOMEM;
	for (size_t i = 0; i < fs->nchunks; i++)
		bytes_used += fs->chunks[i].used;

	memcpy(btrfs_super_fsid(sb), fs->fsid, 16);
	btrfs_set_super_flags(sb, BTRFS_HEADER_FLAG_WRITTEN);
	btrfs_set_super_magic(sb, BTRFS_MAGIC);
	btrfs_set_super_generation(sb, fs->gen);
	btrfs_set_super_root(sb, mk_tree_root(&fs->root));
	btrfs_set_super_chunk_root(sb, mk_tree_root(&fs->chunk));
	btrfs_set_super_total_bytes(sb, fs->total_bytes);
	btrfs_set_super_bytes_used(sb, bytes_used);
	btrfs_set_super_root_dir_objectid(sb, BTRFS_ROOT_TREE_DIR_OBJECTID);
	btrfs_set_super_num_devices(sb, fs->ndev);
	btrfs_set_super_sectorsize(sb, fs->sectorsize);
	btrfs_set_super_nodesize(sb, fs->nodesize);
	btrfs_set_super_leafsize(sb, fs->nodesize);
	btrfs_set_super_stripesize(sb, fs->sectorsize);
	btrfs_set_super_chunk_root_generation(sb, fs->gen);
	btrfs_set_super_compat_flags(sb, 0);
	btrfs_set_super_compat_ro_flags(sb, fs->compat_ro);
	btrfs_set_super_incompat_flags(sb, fs->incompat);
	btrfs_set_super_csum_type(sb, fs->cfg->csum_type);
	btrfs_set_super_root_level(sb, (uint8_t)fs->root.level);
	btrfs_set_super_chunk_root_level(sb, (uint8_t)fs->chunk.level);
	if (fs->cfg->label)
		strncpy(btrfs_super_label(sb), fs->cfg->label, BTRFS_LABEL_SIZE - 1);
	btrfs_set_super_cache_generation(sb, fs->cfg->free_space_tree ? 0 : (uint64_t)-1);
	btrfs_set_super_uuid_tree_generation(sb, 0);
	ret = fill_sys_array(fs, sb);
	if (ret)
		goto out;
	fill_backup(fs, sb, bytes_used);

	for (size_t d = 0; d < fs->ndev; d++) {
		struct mk_dev *dev = &fs->devs[d];
		mk_fill_super_dev_item(fs, dev, btrfs_super_dev_item(sb));
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
			uint64_t off = btrfs_sb_offset(m);
			char why[UBT_SUPER_WHY_LEN];
			if (off + BTRFS_SUPER_INFO_SIZE > dev->size)
				break;
			btrfs_set_super_bytenr(sb, off);
			ret = ubt_super_update_csum(sb);
			if (ret)
				goto out;
			ret = ubt_super_validate(sb, off, why, sizeof(why));
			if (ret) {
				ubt_log(UBT_LOG_ERROR, "mkfs: built an invalid superblock: %s", why);
				goto out;
			}
			ret = ubt_bdev_write(dev->bd, sb, BTRFS_SUPER_INFO_SIZE, off);
			if (ret)
				goto out;
		}
	}
	for (size_t d = 0; d < fs->ndev; d++) {
		ret = ubt_bdev_flush(fs->devs[d].bd);
		if (ret)
			goto out;
	}
out:
	free(sb);
	return ret;
}
