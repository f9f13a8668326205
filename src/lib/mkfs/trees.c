/*
 * mkfs layer: the content of every tree and the allocation fixpoint.
 *
 * Fixed trees (chunk, dev, fs, csum, uuid, data-reloc) are described once
 * their inputs exist (chunks, devices, the populated directory).  The root,
 * extent, free-space and block group trees describe the allocation itself,
 * so they are rebuilt until their own block counts stop changing:
 *   allocate every tree's blocks -> describe root/extent/free-space/block
 *   group trees -> pack them -> same block counts as before? done : again.
 * With the block-group-tree feature (compat_ro BLOCK_GROUP_TREE) the
 * BLOCK_GROUP_ITEMs live in tree 11, found through its ROOT_ITEM in the root
 * tree like the other global trees, and not in the extent tree; its blocks
 * are metadata like any tree's (METADATA_ITEM with a TREE_BLOCK_REF to 11).
 * With the counts equal, every item has the same size and order, so the
 * shapes (and the levels the extent tree records) are those allocated.
 * Every block is checked by the tree checker before it is written.
 */
#include "mkfs/mkfs_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- chunk and dev trees --------------------------------------------- */

static void fill_dev_item(const struct mk_fs *fs, const struct mk_dev *d, struct btrfs_dev_item *di)
{
	memset(di, 0, sizeof(*di));
	btrfs_set_dev_item_devid(di, d->devid);
	btrfs_set_dev_item_total_bytes(di, d->size);
	btrfs_set_dev_item_bytes_used(di, d->used);
	btrfs_set_dev_item_io_align(di, fs->sectorsize);
	btrfs_set_dev_item_io_width(di, fs->sectorsize);
	btrfs_set_dev_item_sector_size(di, fs->sectorsize);
	memcpy(btrfs_dev_item_uuid(di), d->uuid, 16);
	memcpy(btrfs_dev_item_fsid(di), fs->fsid, 16);
}

void mk_fill_super_dev_item(const struct mk_fs *fs, const struct mk_dev *d,
			    struct btrfs_dev_item *di)
{
	fill_dev_item(fs, d, di);
}

/* Serialise a chunk item (with its stripes) into buf; returns its size. */
size_t mk_fill_chunk_item(const struct mk_fs *fs, const struct mk_chunk *c, uint8_t *buf)
{
	struct btrfs_chunk *ci = (struct btrfs_chunk *)buf;
	size_t size = btrfs_chunk_item_size(c->nstripes);

	memset(buf, 0, size);
	btrfs_set_chunk_length(ci, c->length);
	btrfs_set_chunk_owner(ci, BTRFS_EXTENT_TREE_OBJECTID);
	btrfs_set_chunk_stripe_len(ci, BTRFS_STRIPE_LEN);
	btrfs_set_chunk_type(ci, c->type);
	btrfs_set_chunk_io_align(ci, (uint32_t)BTRFS_STRIPE_LEN);
	btrfs_set_chunk_io_width(ci, (uint32_t)BTRFS_STRIPE_LEN);
	btrfs_set_chunk_sector_size(ci, fs->sectorsize);
	btrfs_set_chunk_num_stripes(ci, (uint16_t)c->nstripes);
	btrfs_set_chunk_sub_stripes(ci, (uint16_t)c->sub_stripes);
	for (uint32_t i = 0; i < c->nstripes; i++) {
		struct btrfs_stripe *s = btrfs_chunk_stripe(ci, i);
		const struct mk_dev *d = &fs->devs[c->dev[i]];
		btrfs_set_stripe_devid(s, d->devid);
		btrfs_set_stripe_offset(s, c->phys[i]);
		memcpy(btrfs_stripe_dev_uuid(s), d->uuid, 16);
	}
	return size;
}

static int build_chunk_tree(struct mk_fs *fs)
{
	uint8_t buf[sizeof(struct btrfs_chunk) + MK_MAX_STRIPES * sizeof(struct btrfs_stripe)];
	int ret;

	for (size_t i = 0; i < fs->ndev; i++) {
		struct btrfs_dev_item di;
		fill_dev_item(fs, &fs->devs[i], &di);
		ret = mk_tree_add(&fs->chunk, BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY,
				  fs->devs[i].devid, &di, sizeof(di));
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < fs->nchunks; i++) {
		size_t sz = mk_fill_chunk_item(fs, &fs->chunks[i], buf);
		ret = mk_tree_add(&fs->chunk, BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
				  fs->chunks[i].logical, buf, (uint32_t)sz);
		if (ret)
			return ret;
	}
	return 0;
}

static int build_dev_tree(struct mk_fs *fs)
{
	for (size_t i = 0; i < fs->nchunks; i++) {
		const struct mk_chunk *c = &fs->chunks[i];
		for (uint32_t s = 0; s < c->nstripes; s++) {
			struct btrfs_dev_extent de;
			memset(&de, 0, sizeof(de));
			btrfs_set_dev_extent_chunk_tree(&de, BTRFS_CHUNK_TREE_OBJECTID);
			btrfs_set_dev_extent_chunk_objectid(&de, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
			btrfs_set_dev_extent_chunk_offset(&de, c->logical);
			btrfs_set_dev_extent_length(&de, c->stripe_size);
			memcpy(btrfs_dev_extent_chunk_tree_uuid(&de), fs->chunk_uuid, 16);
			int ret = mk_tree_add(&fs->dev, fs->devs[c->dev[s]].devid, BTRFS_DEV_EXTENT_KEY,
					      c->phys[s], &de, sizeof(de));
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* ---- subvolume roots -------------------------------------------------- */

/* Root directory (inode 256) of an empty subvolume tree, as mkfs makes it. */
int mk_add_empty_root_dir(struct mk_fs *fs, struct mk_tree *t, uint64_t nbytes, bool otime)
{
	struct btrfs_inode_item ii;
	uint8_t ref[sizeof(struct btrfs_inode_ref) + 2];
	int ret;

	mk_fill_inode(fs, &ii, 040755, 1, 0, nbytes);
	if (!otime) {
		btrfs_set_timespec_sec(btrfs_inode_otime(&ii), 0);
		btrfs_set_timespec_nsec(btrfs_inode_otime(&ii), 0);
	}
	ret = mk_tree_add(t, BTRFS_FIRST_FREE_OBJECTID, BTRFS_INODE_ITEM_KEY, 0, &ii, sizeof(ii));
	if (ret)
		return ret;
	memset(ref, 0, sizeof(ref));
	struct btrfs_inode_ref *r = (struct btrfs_inode_ref *)ref;
	btrfs_set_inode_ref_index(r, 0);
	btrfs_set_inode_ref_name_len(r, 2);
	memcpy(ref + sizeof(*r), "..", 2);
	return mk_tree_add(t, BTRFS_FIRST_FREE_OBJECTID, BTRFS_INODE_REF_KEY,
			   BTRFS_FIRST_FREE_OBJECTID, ref, sizeof(ref));
}

static int build_uuid_tree(struct mk_fs *fs)
{
	struct btrfs_key k;
	uint8_t v[8];

	btrfs_uuid_to_key(fs->fs_tree_uuid, BTRFS_UUID_KEY_SUBVOL, &k);
	btrfs_set_uuid_item_subvol(v, 0, BTRFS_FS_TREE_OBJECTID);
	return mk_tree_add(&fs->uuid, k.objectid, k.type, k.offset, v, sizeof(v));
}

static int sort_pack(struct mk_fs *fs, struct mk_tree *t)
{
	int ret = mk_tree_sort(t);

	return ret ? ret : mk_tree_pack(t, fs->nodesize);
}

int mk_build_fixed_trees(struct mk_fs *fs)
{
	int ret;

	if ((ret = build_chunk_tree(fs)) || (ret = build_dev_tree(fs)) ||
	    (ret = build_uuid_tree(fs)))
		return ret;
	if (!fs->cfg->rootdir) {
		ret = mk_add_empty_root_dir(fs, &fs->fs, fs->nodesize, true);
		if (ret)
			return ret;
	}
	ret = mk_add_empty_root_dir(fs, &fs->reloc, 0, false);
	if (ret)
		return ret;
	struct mk_tree *ts[] = { &fs->chunk, &fs->dev, &fs->fs, &fs->csum, &fs->uuid, &fs->reloc };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(ts); i++)
		if ((ret = sort_pack(fs, ts[i])))
			return ret;
	return 0;
}

/* ---- root tree -------------------------------------------------------- */

static int add_root_item(struct mk_fs *fs, const struct mk_tree *t)
{
	struct btrfs_root_item ri;
	bool subvol = t->id == BTRFS_FS_TREE_OBJECTID || t->id == BTRFS_DATA_RELOC_TREE_OBJECTID;

	memset(&ri, 0, sizeof(ri));
	struct btrfs_inode_item *ii = btrfs_root_inode(&ri);
	btrfs_set_inode_generation(ii, 1);
	btrfs_set_inode_size(ii, 3);
	btrfs_set_inode_nlink(ii, 1);
	btrfs_set_inode_nbytes(ii, fs->nodesize);
	btrfs_set_inode_mode(ii, 040755);
	btrfs_set_root_generation(&ri, fs->gen);
	btrfs_set_root_root_dirid(&ri, subvol ? BTRFS_FIRST_FREE_OBJECTID : 0);
	btrfs_set_root_bytenr(&ri, t->nblocks ? mk_tree_root(t) : 0);
	btrfs_set_root_bytes_used(&ri, (uint64_t)t->nblocks * fs->nodesize);
	btrfs_set_root_refs(&ri, 1);
	btrfs_set_root_level(&ri, (uint8_t)t->level);
	btrfs_set_root_generation_v2(&ri, fs->gen);
	if (t->id == BTRFS_FS_TREE_OBJECTID) {
		memcpy(btrfs_root_uuid(&ri), fs->fs_tree_uuid, 16);
		btrfs_set_timespec_sec(btrfs_root_ctime(&ri), (uint64_t)fs->now_sec);
		btrfs_set_timespec_nsec(btrfs_root_ctime(&ri), fs->now_nsec);
		btrfs_set_timespec_sec(btrfs_root_otime(&ri), (uint64_t)fs->now_sec);
		btrfs_set_timespec_nsec(btrfs_root_otime(&ri), fs->now_nsec);
	}
	return mk_tree_add(&fs->root, t->id, BTRFS_ROOT_ITEM_KEY, 0, &ri, sizeof(ri));
}

static int build_root_tree(struct mk_fs *fs)
{
	static const char name[] = "default";
	const uint16_t nlen = (uint16_t)(sizeof(name) - 1);
	uint8_t buf[64];
	int ret;

	mk_tree_clear_items(&fs->root);
	const struct mk_tree *ts[] = { &fs->extent, &fs->dev, &fs->fs, &fs->csum, &fs->uuid,
				       &fs->fst, &fs->bgt, &fs->reloc };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(ts); i++) {
		if ((ts[i] == &fs->fst && !fs->cfg->free_space_tree) ||
		    (ts[i] == &fs->bgt && !fs->cfg->block_group_tree))
			continue;
		if ((ret = add_root_item(fs, ts[i])))
			return ret;
	}

	/* (FS_TREE INODE_REF 6) "default", as mkfs.btrfs leaves it. */
	struct btrfs_inode_ref *r = (struct btrfs_inode_ref *)buf;
	memset(buf, 0, sizeof(buf));
	btrfs_set_inode_ref_index(r, 0);
	btrfs_set_inode_ref_name_len(r, nlen);
	memcpy(buf + sizeof(*r), name, nlen);
	ret = mk_tree_add(&fs->root, BTRFS_FS_TREE_OBJECTID, BTRFS_INODE_REF_KEY,
			  BTRFS_ROOT_TREE_DIR_OBJECTID, buf, (uint32_t)(sizeof(*r) + nlen));
	if (ret)
		return ret;

	/* The root tree directory (inode 6) with its "default" entry. */
	struct btrfs_inode_item ii;
	mk_fill_inode(fs, &ii, 040755, 1, 0, fs->nodesize);
	ret = mk_tree_add(&fs->root, BTRFS_ROOT_TREE_DIR_OBJECTID, BTRFS_INODE_ITEM_KEY, 0, &ii,
			  sizeof(ii));
	if (ret)
		return ret;
	memset(buf, 0, sizeof(buf));
	btrfs_set_inode_ref_name_len(r, 2);
	memcpy(buf + sizeof(*r), "..", 2);
	ret = mk_tree_add(&fs->root, BTRFS_ROOT_TREE_DIR_OBJECTID, BTRFS_INODE_REF_KEY,
			  BTRFS_ROOT_TREE_DIR_OBJECTID, buf, (uint32_t)(sizeof(*r) + 2));
	if (ret)
		return ret;
	memset(buf, 0, sizeof(buf));
	struct btrfs_dir_item *di = (struct btrfs_dir_item *)buf;
	struct btrfs_key loc = { BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	btrfs_cpu_key_to_disk(btrfs_dir_location(di), &loc);
	btrfs_set_dir_transid(di, 0);
	btrfs_set_dir_data_len(di, 0);
	btrfs_set_dir_name_len(di, nlen);
	btrfs_set_dir_type(di, BTRFS_FT_DIR);
	memcpy(btrfs_dir_name(di), name, nlen);
	return mk_tree_add(&fs->root, BTRFS_ROOT_TREE_DIR_OBJECTID, BTRFS_DIR_ITEM_KEY,
			   ubt_name_hash(name, nlen), buf, (uint32_t)(sizeof(*di) + nlen));
}

/* ---- extent tree ------------------------------------------------------ */

static int add_tree_block_refs(struct mk_fs *fs, const struct mk_tree *t)
{
	for (size_t i = 0; i < t->nblocks; i++) {
		uint8_t *buf;
		uint32_t size = (uint32_t)(sizeof(struct btrfs_extent_item) +
					   sizeof(struct btrfs_extent_inline_ref));
		int ret = mk_tree_add_buf(&fs->extent, t->blocks[i].addr, BTRFS_METADATA_ITEM_KEY,
					  (uint64_t)t->blocks[i].level, size, &buf);
		if (ret)
			return ret;
		struct btrfs_extent_item *ei = (struct btrfs_extent_item *)buf;
		btrfs_set_extent_refs(ei, 1);
		btrfs_set_extent_generation(ei, fs->gen);
		btrfs_set_extent_flags(ei, BTRFS_EXTENT_FLAG_TREE_BLOCK);
		struct btrfs_extent_inline_ref *ir = (struct btrfs_extent_inline_ref *)(ei + 1);
		btrfs_set_extent_inline_ref_type(ir, BTRFS_TREE_BLOCK_REF_KEY);
		btrfs_set_extent_inline_ref_offset(ir, t->id);
	}
	return 0;
}

/* The i-th tree of the filesystem (allocation and write order), NULL past the last. */
static struct mk_tree *all_trees(struct mk_fs *fs, size_t i)
{
	struct mk_tree *ts[] = { &fs->chunk, &fs->root, &fs->extent, &fs->dev, &fs->fs,
				 &fs->csum, &fs->uuid, &fs->reloc, &fs->fst, &fs->bgt };

	for (size_t k = 0; k < UBT_ARRAY_SIZE(ts); k++) {
		if ((ts[k] == &fs->fst && !fs->cfg->free_space_tree) ||
		    (ts[k] == &fs->bgt && !fs->cfg->block_group_tree))
			continue;
		if (i-- == 0)
			return ts[k];
	}
	return NULL;
}

/* The extent tree and, with the feature, the block group tree (which then
 * holds the BLOCK_GROUP_ITEMs instead of the extent tree). */
static int build_extent_tree(struct mk_fs *fs)
{
	struct mk_tree *bg_tree = fs->cfg->block_group_tree ? &fs->bgt : &fs->extent;
	int ret;

	mk_tree_clear_items(&fs->extent);
	mk_tree_clear_items(&fs->bgt);
	for (size_t i = 0; i < fs->nchunks; i++) {
		const struct mk_chunk *c = &fs->chunks[i];
		struct btrfs_block_group_item bg;
		memset(&bg, 0, sizeof(bg));
		btrfs_set_block_group_used(&bg, c->used);
		btrfs_set_block_group_chunk_objectid(&bg, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
		btrfs_set_block_group_flags(&bg, c->type);
		ret = mk_tree_add(bg_tree, c->logical, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length, &bg,
				  sizeof(bg));
		if (ret)
			return ret;
	}
	for (size_t i = 0;; i++) {
		struct mk_tree *t = all_trees(fs, i);
		if (!t)
			break;
		if ((ret = add_tree_block_refs(fs, t)))
			return ret;
	}
	for (size_t i = 0; i < fs->ndext; i++) {
		const struct mk_data_extent *d = &fs->dext[i];
		uint8_t *buf;
		uint32_t size = (uint32_t)(sizeof(struct btrfs_extent_item) +
					   btrfs_extent_inline_ref_size(BTRFS_EXTENT_DATA_REF_KEY));
		ret = mk_tree_add_buf(&fs->extent, d->logical, BTRFS_EXTENT_ITEM_KEY, d->len, size,
				      &buf);
		if (ret)
			return ret;
		struct btrfs_extent_item *ei = (struct btrfs_extent_item *)buf;
		btrfs_set_extent_refs(ei, 1);
		btrfs_set_extent_generation(ei, fs->gen);
		btrfs_set_extent_flags(ei, BTRFS_EXTENT_FLAG_DATA);
		struct btrfs_extent_inline_ref *ir = (struct btrfs_extent_inline_ref *)(ei + 1);
		btrfs_set_extent_inline_ref_type(ir, BTRFS_EXTENT_DATA_REF_KEY);
		struct btrfs_extent_data_ref *dr = btrfs_extent_inline_ref_data_ref(ir);
		btrfs_set_extent_data_ref_root(dr, d->root);
		btrfs_set_extent_data_ref_objectid(dr, d->ino);
		btrfs_set_extent_data_ref_offset(dr, d->offset);
		btrfs_set_extent_data_ref_count(dr, 1);
	}
	if (fs->cfg->block_group_tree && (ret = sort_pack(fs, &fs->bgt)))
		return ret;
	return sort_pack(fs, &fs->extent);
}

/* ---- free space tree -------------------------------------------------- */

static int build_fst(struct mk_fs *fs)
{
	int ret;

	mk_tree_clear_items(&fs->fst);
	for (size_t i = 0; i < fs->nchunks; i++) {
		const struct mk_chunk *c = &fs->chunks[i];
		uint64_t pos = c->logical, end = c->logical + c->length;
		uint32_t count = 0;

		for (size_t k = 0; k <= c->nalloc; k++) {
			uint64_t stop = k < c->nalloc ? c->alloc[k].start : end;
			if (stop > pos) {
				ret = mk_tree_add(&fs->fst, pos, BTRFS_FREE_SPACE_EXTENT_KEY, stop - pos,
						  NULL, 0);
				if (ret)
					return ret;
				count++;
			}
			if (k < c->nalloc)
				pos = c->alloc[k].start + c->alloc[k].len;
		}
		struct btrfs_free_space_info info;
		memset(&info, 0, sizeof(info));
		btrfs_set_free_space_info_extent_count(&info, count);
		btrfs_set_free_space_info_flags(&info, 0);
		ret = mk_tree_add(&fs->fst, c->logical, BTRFS_FREE_SPACE_INFO_KEY, c->length, &info,
				  sizeof(info));
		if (ret)
			return ret;
	}
	return sort_pack(fs, &fs->fst);
}

/* ---- allocation fixpoint ---------------------------------------------- */

static int allocate_all(struct mk_fs *fs)
{
	struct mk_chunk *sys = mk_chunk_find(fs, BTRFS_BLOCK_GROUP_SYSTEM);
	struct mk_chunk *meta = mk_chunk_find(fs, BTRFS_BLOCK_GROUP_METADATA);
	int ret;

	mk_chunks_reset_alloc(fs, BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_METADATA);
	for (size_t i = 0;; i++) {
		struct mk_tree *t = all_trees(fs, i);
		if (!t)
			break;
		for (size_t b = 0; b < t->nblocks; b++) {
			ret = mk_chunk_alloc(fs, t->system ? sys : meta, fs->nodesize, fs->nodesize,
					     &t->blocks[b].addr);
			if (ret) {
				ubt_log(UBT_LOG_ERROR, "mkfs: the %s chunk is too small for the trees",
					t->system ? "system" : "metadata");
				return ret;
			}
		}
	}
	return 0;
}

int mk_build_allocated_trees(struct mk_fs *fs)
{
	int ret;

	/* First shapes: one block each (the root tree's size never changes). */
	if ((ret = build_root_tree(fs)) || (ret = sort_pack(fs, &fs->root)))
		return ret;
	if ((ret = sort_pack(fs, &fs->extent)))
		return ret;
	if (fs->cfg->free_space_tree && (ret = sort_pack(fs, &fs->fst)))
		return ret;
	if (fs->cfg->block_group_tree && (ret = sort_pack(fs, &fs->bgt)))
		return ret;

	for (int iter = 0; iter < 32; iter++) {
		size_t before[4] = { fs->root.nblocks, fs->extent.nblocks, fs->fst.nblocks,
				     fs->bgt.nblocks };

		if ((ret = allocate_all(fs)))
			return ret;
		if ((ret = build_extent_tree(fs)))
			return ret;
		if (fs->cfg->free_space_tree && (ret = build_fst(fs)))
			return ret;
		if ((ret = build_root_tree(fs)) || (ret = sort_pack(fs, &fs->root)))
			return ret;
		if (before[0] == fs->root.nblocks && before[1] == fs->extent.nblocks &&
		    before[2] == fs->fst.nblocks && before[3] == fs->bgt.nblocks) {
			/* Same shapes: assign the same addresses to the new blocks. */
			if ((ret = allocate_all(fs)))
				return ret;
			/* root items name the roots; rebuild with final addresses. */
			if ((ret = build_root_tree(fs)) || (ret = sort_pack(fs, &fs->root)) ||
			    (ret = allocate_all(fs)))
				return ret;
			return 0;
		}
	}
	ubt_log(UBT_LOG_ERROR, "mkfs: tree allocation did not converge");
	return -EDEADLK;
}

/* ---- serialising ------------------------------------------------------ */

static int write_block(struct mk_fs *fs, const struct mk_tree *t, size_t bi, uint8_t *buf)
{
	const struct mk_block *b = &t->blocks[bi];
	struct btrfs_header *h = (struct btrfs_header *)buf;
	int ret;

	memset(buf, 0, fs->nodesize);
	memcpy(btrfs_header_fsid(h), fs->fsid, 16);
	btrfs_set_header_bytenr(h, b->addr);
	btrfs_set_header_flags(h, BTRFS_HEADER_FLAG_WRITTEN);
	btrfs_set_header_backref_rev(h, BTRFS_MIXED_BACKREF_REV);
	memcpy(btrfs_header_chunk_tree_uuid(h), fs->chunk_uuid, 16);
	btrfs_set_header_generation(h, fs->gen);
	btrfs_set_header_owner(h, t->id);
	btrfs_set_header_nritems(h, (uint32_t)b->count);
	btrfs_set_header_level(h, (uint8_t)b->level);
	if (b->level == 0) {
		uint32_t off = btrfs_leaf_data_size(fs->nodesize);
		for (size_t i = 0; i < b->count; i++) {
			const struct mk_item *it = &t->items[b->first + i];
			struct btrfs_item *hi = btrfs_leaf_item(buf, (int)i);
			off -= it->size;
			btrfs_cpu_key_to_disk(btrfs_item_key(hi), &it->key);
			btrfs_set_item_offset(hi, off);
			btrfs_set_item_size(hi, it->size);
			if (it->size)
				memcpy(buf + sizeof(struct btrfs_header) + off, it->data, it->size);
		}
	} else {
		for (size_t i = 0; i < b->count; i++) {
			const struct mk_block *c = &t->blocks[b->first + i];
			struct btrfs_key_ptr *kp = btrfs_node_key_ptr(buf, (int)i);
			btrfs_cpu_key_to_disk(btrfs_key_ptr_key(kp), &c->key);
			btrfs_set_key_ptr_blockptr(kp, c->addr);
			btrfs_set_key_ptr_generation(kp, fs->gen);
		}
	}
	ret = ubt_tree_block_set_csum(&fs->chk, buf);
	if (ret)
		return ret;
	struct ubt_block_expect exp = {
		.bytenr = b->addr, .generation = fs->gen, .level = b->level,
		.has_first_key = b->count > 0, .first_key = b->key, .owner = t->id,
	};
	ret = ubt_check_tree_block(&fs->chk, buf, &exp);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "mkfs: built an invalid block %llu of tree %lld",
			(unsigned long long)b->addr, (long long)t->id);
		return ret;
	}
	return mk_write_logical(fs, b->addr, buf, fs->nodesize);
}

int mk_write_trees(struct mk_fs *fs)
{
	uint8_t *buf = malloc(fs->nodesize);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; ret == 0; i++) {
		struct mk_tree *t = all_trees(fs, i);
		if (!t)
			break;
		for (size_t b = 0; b < t->nblocks && ret == 0; b++)
			ret = write_block(fs, t, b, buf);
	}
	free(buf);
	return ret;
}
