/*
 * fs layer: opening a filesystem — the device set, the chunk tree, the root
 * tree and the global trees — and the subvolume root cache.
 *
 * Open sequence (each step needs the previous one):
 *   1. ubt_volume_open: devices, newest superblock, system chunks;
 *   2. the chunk tree (read through the system chunks): every CHUNK_ITEM and
 *      DEV_ITEM, then ubt_volume_finish() (missing devices, degraded rules);
 *   3. the root tree from the superblock, then the ROOT_ITEMs of the
 *      extent, csum, device, uuid, free-space, block-group and quota trees;
 *   4. the default subvolume from the root tree directory.
 * A dirty fsync log (super.log_root != 0) is refused unless nologreplay.
 */
#include "fs.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

static int load_chunk_tree(struct ubt_fs *fs)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 };
	struct ubt_iter it;
	int ret;

	ubt_iter_start(&it, &fs->tree, &fs->chunk_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.key.type == BTRFS_DEV_ITEM_KEY) {
			if (it.size < sizeof(struct btrfs_dev_item)) {
				ret = UBT_CORRUPT(it.leaf->start, "dev item too small");
				break;
			}
			ret = ubt_volume_add_dev_item(fs->vol, (const struct btrfs_dev_item *)it.data);
		} else if (it.key.type == BTRFS_CHUNK_ITEM_KEY) {
			ret = ubt_volume_add_chunk(fs->vol, it.key.offset,
						   (const struct btrfs_chunk *)it.data, it.size);
		}
		if (ret)
			break;
	}
	ubt_iter_end(&it);
	if (ret < 0)
		return ret;
	return ubt_volume_finish(fs->vol);
}

int ubt_fs_read_root_item(struct ubt_fs *fs, uint64_t objectid, struct btrfs_root_item *item,
			  struct ubt_root_ref *ref)
{
	struct btrfs_key key = { objectid, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_le(&fs->tree, &fs->root_tree, &key, &path);
	if (ret < 0)
		goto out;
	if (ret == 1) {
		ret = -ENOENT;
		goto out;
	}
	struct btrfs_key found;
	ubt_eb_item_key(path.nodes[0], path.slots[0], &found);
	if (found.objectid != objectid || found.type != BTRFS_ROOT_ITEM_KEY) {
		ret = -ENOENT;
		goto out;
	}
	uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
	memset(item, 0, sizeof(*item));
	memcpy(item, ubt_eb_item_data(path.nodes[0], path.slots[0]),
	       UBT_MIN(size, (uint32_t)sizeof(*item)));
	ref->objectid = objectid;
	ref->bytenr = btrfs_root_bytenr(item);
	ref->level = btrfs_root_level(item);
	ref->generation = btrfs_root_generation(item);
	ret = 0;
out:
	ubt_path_release(&fs->tree, &path);
	return ret;
}

static int load_global_root(struct ubt_fs *fs, uint64_t objectid, struct ubt_root_ref *ref,
			    bool required)
{
	struct btrfs_root_item item;
	int ret = ubt_fs_read_root_item(fs, objectid, &item, ref);

	if (ret == -ENOENT && !required) {
		memset(ref, 0, sizeof(*ref));
		return 0;
	}
	if (ret == -ENOENT)
		ubt_log(UBT_LOG_ERROR, "the root tree has no item for tree %llu",
			(unsigned long long)objectid);
	return ret;
}

/* The "default" entry of the root tree directory names the default subvol. */
static int find_default_subvol(struct ubt_fs *fs)
{
	static const char name[] = "default";
	struct btrfs_key key = { BTRFS_ROOT_TREE_DIR_OBJECTID, BTRFS_DIR_ITEM_KEY,
				 ubt_name_hash(name, sizeof(name) - 1) };
	struct ubt_path path;
	int ret;

	fs->default_subvol = BTRFS_FS_TREE_OBJECTID;
	ubt_path_init(&path);
	ret = ubt_search_slot(&fs->tree, &fs->root_tree, &key, &path);
	if (ret == 0) {
		const uint8_t *p = ubt_eb_item_data(path.nodes[0], path.slots[0]);
		uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
		uint32_t off = 0;
		while (off + sizeof(struct btrfs_dir_item) <= size) {
			const struct btrfs_dir_item *di = (const void *)(p + off);
			uint16_t nl = btrfs_dir_name_len(di);
			uint16_t dl = btrfs_dir_data_len(di);
			if (nl == sizeof(name) - 1 &&
			    !memcmp(p + off + sizeof(*di), name, nl)) {
				struct btrfs_key loc;
				btrfs_disk_key_to_cpu(&loc, &di->location);
				fs->default_subvol = loc.objectid;
				break;
			}
			off += (uint32_t)sizeof(*di) + nl + dl;
		}
	}
	ubt_path_release(&fs->tree, &path);
	return ret < 0 ? ret : 0;
}

int ubt_fs_open(const char *const *paths, size_t npaths, const struct ubt_fs_opts *opts,
		struct ubt_fs **out)
{
	struct ubt_fs *fs;
	int ret;

	*out = NULL;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	if (opts)
		fs->opts = *opts;
	pthread_mutex_init(&fs->subvol_lock, NULL);
	ret = ubt_icache_init(fs);
	if (ret) {
		pthread_mutex_destroy(&fs->subvol_lock);
		free(fs);
		return ret;
	}
	ret = ubt_volume_open(paths, npaths, &fs->opts.vol, &fs->vol);
	if (ret)
		goto fail;
	const struct btrfs_super_block *sb = &fs->vol->super;
	fs->sectorsize = fs->vol->sectorsize;
	fs->nodesize = fs->vol->nodesize;
	fs->csum_type = fs->vol->csum_type;
	fs->csum_size = fs->vol->csum_size;
	fs->no_holes = btrfs_super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_NO_HOLES;
	ret = ubt_tree_ctx_init(&fs->tree, fs->vol, fs->opts.cache_bytes);
	if (ret)
		goto fail;

	if (btrfs_super_log_root(sb) && !fs->opts.nologreplay) {
		ubt_log(UBT_LOG_ERROR,
			"%s: the filesystem has an unreplayed fsync log (log_root %llu); "
			"mount it once with the kernel to replay it, or use -o nologreplay to "
			"read the last commit without the logged changes",
			paths[0], (unsigned long long)btrfs_super_log_root(sb));
		ret = -EOPNOTSUPP;	/* not damage: a step we do not take */
		goto fail;
	}

	fs->chunk_tree = (struct ubt_root_ref){ BTRFS_CHUNK_TREE_OBJECTID,
						btrfs_super_chunk_root(sb),
						btrfs_super_chunk_root_generation(sb),
						btrfs_super_chunk_root_level(sb) };
	ret = load_chunk_tree(fs);
	if (ret)
		goto fail;
	fs->root_tree = (struct ubt_root_ref){ BTRFS_ROOT_TREE_OBJECTID, btrfs_super_root(sb),
					       btrfs_super_generation(sb),
					       btrfs_super_root_level(sb) };
	ret = load_global_root(fs, BTRFS_EXTENT_TREE_OBJECTID, &fs->extent_tree, true);
	if (!ret)
		ret = load_global_root(fs, BTRFS_DEV_TREE_OBJECTID, &fs->dev_tree, true);
	if (!ret)
		ret = load_global_root(fs, BTRFS_CSUM_TREE_OBJECTID, &fs->csum_tree, false);
	if (!ret)
		ret = load_global_root(fs, BTRFS_UUID_TREE_OBJECTID, &fs->uuid_tree, false);
	if (!ret)
		ret = load_global_root(fs, BTRFS_FREE_SPACE_TREE_OBJECTID, &fs->free_space_tree,
				       false);
	if (!ret)
		ret = load_global_root(fs, BTRFS_BLOCK_GROUP_TREE_OBJECTID, &fs->block_group_tree,
				       false);
	if (!ret)
		ret = load_global_root(fs, BTRFS_QUOTA_TREE_OBJECTID, &fs->quota_tree, false);
	if (ret)
		goto fail;
	fs->has_csum_tree = fs->csum_tree.bytenr != 0;
	ret = find_default_subvol(fs);
	if (ret)
		goto fail;
	*out = fs;
	return 0;
fail:
	ubt_fs_close(fs);
	return ret;
}

void ubt_fs_close(struct ubt_fs *fs)
{
	if (!fs)
		return;
	for (size_t i = 0; i < fs->nsubvols; i++)
		free(fs->subvols[i]);
	free(fs->subvols);
	if (fs->vol)
		ubt_tree_ctx_destroy(&fs->tree);
	ubt_volume_close(fs->vol);
	pthread_mutex_destroy(&fs->subvol_lock);
	ubt_icache_destroy(fs);
	free(fs);
}

int ubt_fs_subvol(struct ubt_fs *fs, uint64_t id, const struct ubt_subvol **out)
{
	struct ubt_subvol *sv;
	int ret;

	*out = NULL;
	if (id != BTRFS_FS_TREE_OBJECTID &&
	    (id < BTRFS_FIRST_FREE_OBJECTID || id > BTRFS_LAST_FREE_OBJECTID))
		return -ENOENT;
	pthread_mutex_lock(&fs->subvol_lock);
	for (size_t i = 0; i < fs->nsubvols; i++) {
		if (fs->subvols[i]->id == id) {
			/* Deleted (or made by an aborted transaction) since it
			 * was cached: gone, as below. */
			bool gone = btrfs_root_refs(&fs->subvols[i]->item) == 0;
			*out = gone ? NULL : fs->subvols[i];
			pthread_mutex_unlock(&fs->subvol_lock);
			return gone ? -ENOENT : 0;
		}
	}
	pthread_mutex_unlock(&fs->subvol_lock);

	sv = calloc(1, sizeof(*sv));
	if (!sv)
		return -ENOMEM;
	sv->id = id;
	ret = ubt_fs_read_root_item(fs, id, &sv->item, &sv->root);
	if (ret) {
		free(sv);
		return ret;
	}
	if (btrfs_root_refs(&sv->item) == 0) {
		/* Deleted, waiting for the cleaner: invisible as in the kernel. */
		free(sv);
		return -ENOENT;
	}
	sv->readonly = btrfs_root_flags(&sv->item) & BTRFS_ROOT_SUBVOL_RDONLY;

	pthread_mutex_lock(&fs->subvol_lock);
	for (size_t i = 0; i < fs->nsubvols; i++) {
		if (fs->subvols[i]->id == id) {
			bool gone = btrfs_root_refs(&fs->subvols[i]->item) == 0;
			*out = gone ? NULL : fs->subvols[i];
			pthread_mutex_unlock(&fs->subvol_lock);
			free(sv);
			return gone ? -ENOENT : 0;
		}
	}
	if (fs->nsubvols == fs->subvols_cap) {
		size_t cap = fs->subvols_cap ? fs->subvols_cap * 2 : 8;
		struct ubt_subvol **a = realloc(fs->subvols, cap * sizeof(*a));
		if (!a) {
			pthread_mutex_unlock(&fs->subvol_lock);
			free(sv);
			return -ENOMEM;
		}
		fs->subvols = a;
		fs->subvols_cap = cap;
	}
	fs->subvols[fs->nsubvols++] = sv;
	pthread_mutex_unlock(&fs->subvol_lock);
	*out = sv;
	return 0;
}
