/*
 * tree layer: private header of the tree checker (checker.c, checker_items.c).
 *
 * checker.c owns the header, leaf-layout and node rules and the reporting;
 * checker_items.c owns the rules for item bodies.  Nothing outside the
 * checker includes this file.
 */
#ifndef UBTRFS_TREE_CHECKER_INT_H
#define UBTRFS_TREE_CHECKER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "format/btrfs_format.h"
#include "tree/checker.h"

#define HDR_SIZE	((uint32_t)sizeof(struct btrfs_header))
#define ITEM_SIZE	((uint32_t)sizeof(struct btrfs_item))

/* The block being checked, decoded once. */
struct blk {
	const struct ubt_check_ctx *ctx;
	const uint8_t *buf;
	uint64_t bytenr;
	uint64_t owner;
	uint64_t generation;
	uint32_t nritems;
	uint8_t level;
};

/*
 * One leaf item under check; prev is the key of slot - 1 (zero at slot 0).
 * data/size are valid: the item table passed its checks before any body is
 * looked at.
 */
struct item {
	const struct blk *b;
	int slot;
	struct btrfs_key key;
	struct btrfs_key prev;
	const uint8_t *data;
	uint32_t size;
};

/*
 * Report a rule broken by block @b (at @slot, or -1 for the whole block):
 * "corrupt leaf: root=5 block=30523392 slot=3 key (256 DIR_ITEM 1234): ..."
 * through UBT_CORRUPT's logger.  Returns -EUCLEAN.
 */
int ubt_checker_err(const char *file, int line, const struct blk *b, int slot, const char *fmt,
		    ...) UBT_PRINTF(5, 6);

#define BLK_CORRUPT(b, slot, ...) ubt_checker_err(__FILE__, __LINE__, (b), (slot), __VA_ARGS__)
#define ITEM_CORRUPT(it, ...) ubt_checker_err(__FILE__, __LINE__, (it)->b, (it)->slot, __VA_ARGS__)

/* checker_items.c: the rules for the body of one item (0 for unknown types). */
int ubt_checker_item(const struct item *it);

/* ---- helpers shared by both files ---------------------------------------- */

static inline bool chk_aligned(uint64_t v, uint32_t a)
{
	return (v & ((uint64_t)a - 1)) == 0;
}

/* a + b, or UINT64_MAX if that overflows (for "end" comparisons). */
static inline uint64_t chk_add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline unsigned chk_popcount64(uint64_t v)
{
	unsigned n = 0;

	for (; v; v &= v - 1)
		n++;
	return n;
}

/* Subvolume trees: FS_TREE and ids in [256, 2^48) (level-0 qgroup ids). */
static inline bool chk_is_fstree(uint64_t id)
{
	if (id == BTRFS_FS_TREE_OBJECTID)
		return true;
	if ((int64_t)id < (int64_t)BTRFS_FIRST_FREE_OBJECTID)
		return false;
	return btrfs_qgroup_level(id) == 0;
}

/* Generation sanity: at most one ahead of the committed superblock. */
static inline bool chk_gen_in_future(const struct ubt_check_ctx *c, uint64_t gen)
{
	return c->super_generation && gen > c->super_generation + 1;
}

/* Body of item @slot; only valid once the item table was accepted. */
static inline void chk_item_at(const struct blk *b, uint32_t slot, const uint8_t **data,
			       uint32_t *size)
{
	const struct btrfs_item *it = btrfs_leaf_item(b->buf, slot);

	*data = b->buf + HDR_SIZE + btrfs_item_offset(it);
	*size = btrfs_item_size(it);
}

#endif /* UBTRFS_TREE_CHECKER_INT_H */
