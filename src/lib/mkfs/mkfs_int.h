/*
 * mkfs layer, private: the in-memory model of the filesystem being built,
 * shared by layout.c (devices, chunks, addresses), treebuild.c (items,
 * packing, serialising), trees.c (the content of every tree), rootdir.c
 * (populating from a directory) and mkfs_super.c (superblocks).
 *
 * Invariants: every chunk's logical start and length are multiples of 64 KiB;
 * tree blocks are nodesize-aligned inside their chunk and never overlap a
 * superblock stripe; a tree's blocks are numbered leaves first (in key
 * order), then each node level, so its root is always the last block.
 */
#ifndef UBTRFS_MKFS_INT_H
#define UBTRFS_MKFS_INT_H

#include "mkfs/mkfs.h"
#include "base/base.h"
#include "format/btrfs_format.h"
#include "tree/checker.h"
#include "io/io.h"

#define MK_MAX_DEV 64
#define MK_MAX_STRIPES 64
#define MK_SZ_1M (1024ULL * 1024)

/* ---- items and trees (treebuild.c) ------------------------------------ */

struct mk_item {
	struct btrfs_key key;
	uint32_t size;
	uint8_t *data;		/* owned, size bytes (NULL when size is 0) */
};

struct mk_block {
	int level;
	size_t first, count;	/* leaf: item range; node: child block range */
	struct btrfs_key key;	/* first key below this block */
	uint64_t addr;
};

struct mk_tree {
	uint64_t id;
	bool system;		/* lives in the system chunk (chunk tree) */
	struct mk_item *items;
	size_t nitems, cap;
	struct mk_block *blocks;
	size_t nblocks;
	int level;		/* of the root */
};

/* Append an item; data is copied. */
int mk_tree_add(struct mk_tree *t, uint64_t objectid, uint8_t type, uint64_t offset,
		const void *data, uint32_t size);
/* Add and return the item's buffer (zeroed) to fill in place. */
int mk_tree_add_buf(struct mk_tree *t, uint64_t objectid, uint8_t type, uint64_t offset,
		    uint32_t size, uint8_t **buf);
void mk_tree_clear_items(struct mk_tree *t);
void mk_tree_free(struct mk_tree *t);
/* Sort the items; -EEXIST (logged) on a duplicate key. */
int mk_tree_sort(struct mk_tree *t);
/* Compute the block shape (leaves, nodes, levels) from sorted items. */
int mk_tree_pack(struct mk_tree *t, uint32_t nodesize);
static inline uint64_t mk_tree_root(const struct mk_tree *t)
{
	return t->blocks[t->nblocks - 1].addr;
}

/* ---- devices and chunks (layout.c) ----------------------------------- */

struct mk_dev {
	const char *path;
	struct ubt_bdev *bd;
	uint64_t size;		/* bytes the filesystem uses (sector aligned) */
	uint64_t devid;
	uint8_t uuid[16];
	uint64_t cursor;	/* next free physical byte */
	uint64_t used;		/* bytes in dev extents */
};

struct mk_range {
	uint64_t start, len;
};

struct mk_chunk {
	uint64_t logical, length, type;	/* type: BTRFS_BLOCK_GROUP_* */
	uint64_t stripe_size;
	uint32_t nstripes, sub_stripes;
	uint32_t dev[MK_MAX_STRIPES];
	uint64_t phys[MK_MAX_STRIPES];
	struct mk_range excl[3 * MK_MAX_STRIPES];	/* superblock stripes (logical) */
	uint32_t nexcl;
	uint64_t cursor;	/* allocation cursor (offset in chunk) */
	uint64_t used;		/* bytes allocated */
	struct mk_range *alloc;	/* allocated ranges, ascending, merged */
	size_t nalloc, calloc;
};

struct mk_data_extent {
	uint64_t logical, len;
	uint64_t root, ino, offset;	/* the one file extent referring to it */
};

struct mk_fs {
	const struct ubt_mkfs_cfg *cfg;
	uint32_t nodesize, sectorsize;
	uint64_t incompat, compat_ro;
	uint64_t gen;
	int64_t now_sec;
	uint32_t now_nsec;
	uint8_t fsid[16], chunk_uuid[16], fs_tree_uuid[16];
	uint64_t meta_profile, data_profile;

	struct mk_dev devs[MK_MAX_DEV];
	size_t ndev;
	uint64_t total_bytes;

	struct mk_chunk *chunks;
	size_t nchunks;
	uint64_t logical_cursor;

	struct mk_data_extent *dext;
	size_t ndext, cdext;

	/* trees (bgt: the block group tree, only with cfg->block_group_tree) */
	struct mk_tree root, extent, chunk, dev, fs, csum, uuid, fst, reloc, bgt;

	struct ubt_check_ctx chk;
	struct rd_state *rd;	/* rootdir.c's scan of the source directory */
	uint8_t *seed;		/* reproducible: bytes the uuids derive from */
	size_t seedlen;
};

/* Create a chunk of `type` (with profile bits) whose stripes hold
 * `stripe_size` bytes each; *out is its index. */
int mk_chunk_create(struct mk_fs *fs, uint64_t type, uint64_t stripe_size, size_t *out);
/* Data stripes of a chunk of that profile with n stripes. */
uint32_t mk_profile_data_stripes(uint64_t type, uint32_t nstripes);
/* Reset every chunk's allocation state (before a new fixpoint round). */
void mk_chunks_reset_alloc(struct mk_fs *fs, uint64_t type_mask);
/* Allocate len bytes (aligned to align) in chunk c, skipping superblock
 * stripes; -ENOSPC if it does not fit. */
int mk_chunk_alloc(struct mk_fs *fs, struct mk_chunk *c, uint64_t len, uint64_t align,
		   uint64_t *logical);
/* Allocate up to maxlen bytes (at least `align`) at the chunk's cursor,
 * stopping before a superblock stripe; -ENOSPC when the chunk is full. */
int mk_chunk_alloc_upto(struct mk_chunk *c, uint64_t maxlen, uint64_t align, uint64_t *logical,
			uint64_t *len);
/* Record an allocated range without moving the cursor logic (data). */
int mk_chunk_note_alloc(struct mk_chunk *c, uint64_t logical, uint64_t len);
struct mk_chunk *mk_chunk_find(struct mk_fs *fs, uint64_t type_bit);
struct mk_chunk *mk_chunk_at(struct mk_fs *fs, uint64_t logical);
/* Bytes of chunk c from offset off up to the next superblock stripe. */
uint64_t mk_chunk_clear_run(const struct mk_chunk *c, uint64_t off, uint64_t *skip_to);
/* Write len bytes at a logical address to every copy. */
int mk_write_logical(struct mk_fs *fs, uint64_t logical, const void *buf, size_t len);

/* ---- trees (trees.c) -------------------------------------------------- */

int mk_build_fixed_trees(struct mk_fs *fs);
int mk_build_allocated_trees(struct mk_fs *fs);
int mk_write_trees(struct mk_fs *fs);
/* The DEV_ITEM of a device (chunk tree and superblock). */
void mk_fill_super_dev_item(const struct mk_fs *fs, const struct mk_dev *d,
			    struct btrfs_dev_item *di);
/* A chunk item with its stripes into buf (chunk tree, sys_chunk_array). */
size_t mk_fill_chunk_item(const struct mk_fs *fs, const struct mk_chunk *c, uint8_t *buf);
/* Inode 256 with ".." of an empty subvolume tree, as mkfs.btrfs makes it. */
int mk_add_empty_root_dir(struct mk_fs *fs, struct mk_tree *t, uint64_t nbytes, bool otime);

/* ---- rootdir (rootdir.c) ---------------------------------------------- */

int mk_rootdir_scan(struct mk_fs *fs, uint64_t *data_bytes, uint64_t *meta_estimate);
int mk_rootdir_build(struct mk_fs *fs);
void mk_rootdir_free(struct mk_fs *fs);

/* ---- superblocks (mkfs_super.c) ---------------------------------------- */

int mk_write_supers(struct mk_fs *fs);

/* ---- helpers (mkfs.c) ------------------------------------------------- */

void mk_fill_inode(struct mk_fs *fs, struct btrfs_inode_item *ii, uint32_t mode, uint32_t nlink,
		   uint64_t size, uint64_t nbytes);
void mk_progress(struct mk_fs *fs, const char *fmt, ...) UBT_PRINTF(2, 3);

#endif /* UBTRFS_MKFS_INT_H */
