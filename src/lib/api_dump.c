/*
 * The public API, part 4: tree dumps in the form of
 * `btrfs inspect-internal dump-tree` (block contents by tree/print.c, the
 * walk by tree/dump.c; this file picks the trees and their headings).
 */
#include <ubtrfs/ubtrfs.h>

#include "api_internal.h"
#include "base/base.h"
#include "format/format_names.h"
#include "fs/fs.h"
#include "tree/print.h"

#include <stdio.h>
#include <string.h>

static const char *tree_name(uint64_t id)
{
	switch (id) {
	case BTRFS_ROOT_TREE_OBJECTID:
		return "root";
	case BTRFS_EXTENT_TREE_OBJECTID:
		return "extent";
	case BTRFS_CHUNK_TREE_OBJECTID:
		return "chunk";
	case BTRFS_DEV_TREE_OBJECTID:
		return "device";
	case BTRFS_FS_TREE_OBJECTID:
		return "fs";
	case BTRFS_ROOT_TREE_DIR_OBJECTID:
		return "directory";
	case BTRFS_CSUM_TREE_OBJECTID:
		return "checksum";
	case BTRFS_ORPHAN_OBJECTID:
		return "orphan";
	case BTRFS_TREE_LOG_OBJECTID:
		return "log";
	case BTRFS_TREE_LOG_FIXUP_OBJECTID:
		return "log fixup";
	case BTRFS_TREE_RELOC_OBJECTID:
		return "reloc";
	case BTRFS_DATA_RELOC_TREE_OBJECTID:
		return "data reloc";
	case BTRFS_EXTENT_CSUM_OBJECTID:
		return "extent checksum";
	case BTRFS_QUOTA_TREE_OBJECTID:
		return "quota";
	case BTRFS_UUID_TREE_OBJECTID:
		return "uuid";
	case BTRFS_FREE_SPACE_TREE_OBJECTID:
		return "free space";
	case BTRFS_MULTIPLE_OBJECTIDS:
		return "multiple";
	case BTRFS_BLOCK_GROUP_TREE_OBJECTID:
		return "block group";
	default:
		return "file";
	}
}

static void emitf(ubtrfs_write_fn write, void *ctx, const char *fmt, ...) UBT_PRINTF(3, 4);
static void emitf(ubtrfs_write_fn write, void *ctx, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		write(ctx, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static int dump_root_item_tree(struct ubt_fs *fs, const struct btrfs_key *key,
			       const struct btrfs_root_item *item, const struct ubt_print_ctx *pc)
{
	char k[160];
	struct ubt_root_ref ref = { key->objectid, btrfs_root_bytenr(item),
				    btrfs_root_generation(item), btrfs_root_level(item) };

	btrfs_key_str(key, k, sizeof(k));
	emitf(pc->write, pc->wctx, "%s tree %s \n", tree_name(key->objectid), k);
	return ubt_dump_tree(&fs->tree, &ref, pc);
}

static int unl_dump_tree(ubtrfs_fs *f, uint64_t tree_id, uint64_t bytenr, ubtrfs_write_fn write,
		     void *ctx)
{
	struct ubt_fs *fs = f->fs;
	struct ubt_print_ctx pc = { fs->nodesize, fs->sectorsize, fs->csum_type, 0, write, ctx,
				    NULL, NULL };
	int ret, status = 0;

	if (bytenr)
		return ubt_dump_block(&fs->tree, bytenr, &pc);
	if (tree_id == BTRFS_ROOT_TREE_OBJECTID || tree_id == 0) {
		emitf(write, ctx, "root tree\n");
		status = ubt_dump_tree(&fs->tree, &fs->root_tree, &pc);
	}
	if (tree_id == BTRFS_CHUNK_TREE_OBJECTID || tree_id == 0) {
		emitf(write, ctx, "chunk tree\n");
		ret = ubt_dump_tree(&fs->tree, &fs->chunk_tree, &pc);
		if (ret && !status)
			status = ret;
	}
	if (tree_id == BTRFS_ROOT_TREE_OBJECTID || tree_id == BTRFS_CHUNK_TREE_OBJECTID)
		return status;
	/* Asked for alone, the block group tree is printed like the root and
	 * chunk trees (as btrfs-progs does); in a full dump it comes in root
	 * tree order with the other trees. */
	if (tree_id == BTRFS_BLOCK_GROUP_TREE_OBJECTID && fs->block_group_tree.bytenr) {
		emitf(write, ctx, "block group tree\n");
		return ubt_dump_tree(&fs->tree, &fs->block_group_tree, &pc);
	}

	/* Every tree with a ROOT_ITEM, in root tree order (or just tree_id). */
	struct btrfs_key min = { tree_id, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_key max = { tree_id ? tree_id : (uint64_t)-1, BTRFS_ROOT_ITEM_KEY,
				 (uint64_t)-1 };
	struct ubt_iter it;
	bool found = false;
	ubt_iter_start(&it, &fs->tree, &fs->root_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.key.type != BTRFS_ROOT_ITEM_KEY)
			continue;
		struct btrfs_root_item item;
		memset(&item, 0, sizeof(item));
		memcpy(&item, it.data, UBT_MIN(it.size, (uint32_t)sizeof(item)));
		struct btrfs_key key = it.key;
		found = true;
		/* The walk reads other blocks: copy what we need first. */
		ret = dump_root_item_tree(fs, &key, &item, &pc);
		if (ret && !status)
			status = ret;
	}
	ubt_iter_end(&it);
	if (ret < 0 && !status)
		status = ret;
	if (tree_id && !found && !status) {
		ubt_log(UBT_LOG_ERROR, "tree %llu not found", (unsigned long long)tree_id);
		return -ENOENT;
	}
	{
		/* progs ends every dump except root/chunk-only with these */
		const struct btrfs_super_block *sb = &fs->vol->super;
		char u[40];
		ubt_uuid_str(sb->fsid, u);
		emitf(write, ctx, "total bytes %llu\n",
		      (unsigned long long)btrfs_super_total_bytes(sb));
		emitf(write, ctx, "bytes used %llu\n", (unsigned long long)btrfs_super_bytes_used(sb));
		emitf(write, ctx, "uuid %s\n", u);
	}
	return status;
}

int ubtrfs_dump_tree(ubtrfs_fs *f, uint64_t tree_id, uint64_t bytenr, ubtrfs_write_fn write,
		     void *ctx)
{
	ubt_api_rdlock_noerr(f);
	int ret = unl_dump_tree(f, tree_id, bytenr, write, ctx);
	ubt_api_unlock(f);
	return ret;
}
