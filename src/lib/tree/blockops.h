/*
 * tree layer: in-block primitives of the copy-on-write B-tree.
 *
 * Pure functions on one or two raw tree blocks (nodesize bytes each, a
 * struct btrfs_header at the front): insert, delete, resize and re-key leaf
 * items; insert, delete and re-point node pointers; split one block into an
 * empty one and push items or pointers between neighbours; choose split
 * points; initialise a block and seal it (check + checksum) for writing.
 * No I/O, no allocation, no locking, no logging (except ubt_block_finish,
 * which runs the tree checker): the caller owns the buffers and serialises
 * access to them.
 *
 * Argument checking.  Every function that changes a block, or plans or
 * sizes a change, first verifies the block's real state: a valid nodesize,
 * the level (0 for leaf_* functions, 1..7 for node_*), nritems within the
 * block, and for leaves a consistent item table (item data packed from the
 * end of the block backwards, contiguous, not reaching into the item
 * headers - exactly the checker's layout rule; verifying it costs one pass
 * over the item table, the same order as the memmove any change needs).
 * Slots, counts and sizes are then checked against that state, and keys
 * against their neighbours (an operation that would leave keys out of
 * order is refused).  A failing call returns before writing anything: the
 * blocks are unchanged.  The reading functions (free space, space used,
 * item key and data, node pointers) are O(1), for use in searches: they
 * check the level, nritems, the slot and every offset they read, so they
 * never reach outside the block, but not the rest of the table.
 *
 * @nodesize must be the real size of the buffer(s): a block does not record
 * it, so a wrong value can only be caught when the item table contradicts
 * it (an empty leaf cannot).
 *   -EINVAL  bad arguments, or a block whose state does not allow the
 *            operation (wrong level, inconsistent item table, keys that
 *            would end up out of order, a non-empty split target, ...);
 *   -ENOSPC  the operation is valid but does not fit the block;
 *   -E2BIG   (split planning only) the item does not fit even an empty leaf.
 *
 * Invariant kept: bytes an operation frees (item headers past nritems, data
 * below the lowest item) are zeroed, and new item data is zeroed, so a block
 * that starts zeroed (ubt_block_init) never holds stale bytes.
 *
 * Slots and counts are int, like struct ubt_path; negative values are
 * refused.  Keys are host-order struct btrfs_key.
 */
#ifndef UBTRFS_TREE_BLOCKOPS_H
#define UBTRFS_TREE_BLOCKOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "format/btrfs_format.h"
#include "tree/checker.h"

/* ---- whole blocks ------------------------------------------------------- */

/* What a new block's header says (see ubt_block_init). */
struct ubt_block_hdr {
	uint64_t bytenr;		/* logical address */
	uint64_t generation;		/* transaction that writes it */
	uint64_t owner;			/* tree objectid */
	uint8_t level;			/* 0 leaf, 1..7 node */
	const uint8_t *fsid;		/* BTRFS_FSID_SIZE bytes: the metadata uuid
					 * with METADATA_UUID, else the fsid */
	const uint8_t *chunk_tree_uuid;	/* BTRFS_UUID_SIZE bytes */
	uint64_t flags;			/* extra flags: 0 or BTRFS_HEADER_FLAG_RELOC */
};

/* nodesize is a power of two in 4 KiB .. 64 KiB. */
bool ubt_nodesize_valid(uint32_t nodesize);

/*
 * Zero @blk (nodesize bytes) and write an empty block's header: bytenr,
 * generation, owner, level, fsid, chunk tree uuid, nritems 0, flags
 * WRITTEN | h->flags with the MIXED backref revision.  The checksum is left
 * zero (ubt_block_finish sets it).  -EINVAL for a bad nodesize, level >= 8,
 * NULL uuids or flags other than WRITTEN/RELOC.
 */
int ubt_block_init(uint8_t *blk, uint32_t nodesize, const struct ubt_block_hdr *h);

/*
 * Seal a block for writing: its fsid must be c->fsid and WRITTEN must be
 * set (-EINVAL otherwise), then the tree checker's structure rules
 * (ubt_check_leaf / ubt_check_node: -EUCLEAN, logged) and finally the
 * checksum (ubt_tree_block_set_csum).  The block is nodesize = c->nodesize
 * bytes.  Note the checker refuses empty nodes and empty leaves of trees
 * that are never empty, so only finished blocks can be sealed.
 */
int ubt_block_finish(const struct ubt_check_ctx *c, uint8_t *blk);

/* ---- leaves: reading ---------------------------------------------------- */

/*
 * Free bytes between the item headers and the item data (>= 0), or -EINVAL
 * if the leaf's lowest item contradicts that (O(1): it looks at the last
 * two items only).  A new item of s data bytes needs s +
 * sizeof(struct btrfs_item).
 */
int ubt_leaf_free_space(const uint8_t *blk, uint32_t nodesize);

/*
 * Bytes items [slot, slot + nr) take in the leaf: their item headers plus
 * their data (what moving them to another leaf needs there), from the
 * offsets at the ends of the range (O(1)).  >= 0, or -EINVAL for a bad
 * range or leaf.
 */
int ubt_leaf_space_used(const uint8_t *blk, uint32_t nodesize, int slot, int nr);

/* Key of item @slot (O(1)); -EINVAL if the slot does not exist. */
int ubt_leaf_item_key(const uint8_t *blk, uint32_t nodesize, int slot, struct btrfs_key *key);

/*
 * Pointer to the data of item @slot (for reading it, copying it out or
 * filling it after an insert) and its size in *size (may be NULL).  NULL if
 * the slot does not exist or the item's own extent is not inside the leaf's
 * data area.  Only checks that one item (O(1)); the pointer is valid until
 * the next operation that moves data (insert, delete, resize, push).  Like
 * strchr, the const of @blk is not carried over to the result.
 */
uint8_t *ubt_leaf_item_data(const uint8_t *blk, uint32_t nodesize, int slot, uint32_t *size);

/* ---- leaves: changing items in place ------------------------------------ */

/*
 * Insert @nr items at @slot (0 <= slot <= nritems): item slot + i gets
 * keys[i] and sizes[i] bytes of zeroed data; items from @slot on move up
 * by @nr slots.  keys[] must be strictly ascending and fit between the keys
 * at slot - 1 and slot (-EINVAL).  -ENOSPC, block untouched, if the headers
 * and data of all @nr items do not fit the free space.  nr == 0 is a no-op.
 */
int ubt_leaf_insert_items(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *keys,
			  const uint32_t *sizes, int nr);

/* One item: ubt_leaf_insert_items(blk, nodesize, slot, key, &size, 1). */
int ubt_leaf_insert_item(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key,
			 uint32_t size);

/*
 * Delete items [slot, slot + nr); the items after them move down, their data
 * up (the leaf stays packed).  Deleting every item leaves an empty leaf
 * (free space = btrfs_leaf_data_size(nodesize)).  nr == 0 is a no-op.
 */
int ubt_leaf_delete_items(uint8_t *blk, uint32_t nodesize, int slot, int nr);

/*
 * Grow item @slot by @extra zeroed bytes at the end of its data (the first
 * size bytes keep their content).  -ENOSPC if @extra bytes are not free.
 */
int ubt_leaf_extend_item(uint8_t *blk, uint32_t nodesize, int slot, uint32_t extra);

/*
 * Shrink item @slot to @new_size <= its size (-EINVAL if larger).  With
 * @cut_front false the end of the data is dropped and the first new_size
 * bytes are kept (most items); with @cut_front true the front is dropped
 * and the last new_size bytes are kept (a csum item whose start advances;
 * the caller changes the key's offset with ubt_leaf_set_key).
 */
int ubt_leaf_truncate_item(uint8_t *blk, uint32_t nodesize, int slot, uint32_t new_size,
			   bool cut_front);

/*
 * Change the key of item @slot.  It must stay strictly between the keys of
 * slot - 1 and slot + 1 (-EINVAL otherwise).  Changing slot 0 changes the
 * leaf's first key: the caller fixes the parents' keys (ubt_node_set_key).
 */
int ubt_leaf_set_key(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key);

/* ---- leaves: moving items between neighbours ----------------------------- */

/*
 * In all of these @left and @right are two leaves of the same nodesize in
 * separate, non-overlapping buffers (the same pointer twice is -EINVAL),
 * and @left's keys all sort before @right's (checked at the boundary:
 * -EINVAL if left's last key is not below right's first).
 * Headers other than nritems (owner, generation, ...) are not touched.
 */

/*
 * Move items [slot, nritems) of @left into @right, which must be an empty
 * leaf (-EINVAL otherwise; start it with ubt_block_init).  The moved items
 * keep their order and become slots 0.. of @right.  slot == nritems moves
 * nothing; slot == 0 moves everything.  Never -ENOSPC.
 */
int ubt_leaf_split(uint8_t *left, uint8_t *right, uint32_t nodesize, int slot);

/* Move the first @k items of @right to the end of @left.  -ENOSPC if they
 * do not fit @left's free space. */
int ubt_leaf_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, int k);

/* Move the last @k items of @left to the front of @right.  -ENOSPC if they
 * do not fit @right's free space. */
int ubt_leaf_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, int k);

/*
 * How many items may move: the largest k <= @max_k (and <= nritems) such
 * that the first k items of @blk (push_left_max, for pushing them from a
 * right leaf into its left neighbour) or the last k items (push_right_max,
 * for pushing a left leaf's tail into its right neighbour) take at most
 * @space bytes (ubt_leaf_space_used).  Pass the receiver's free space, less
 * anything it must keep free.  Returns k >= 0, or -EINVAL.
 */
int ubt_leaf_push_left_max(const uint8_t *blk, uint32_t nodesize, uint32_t space, int max_k);
int ubt_leaf_push_right_max(const uint8_t *blk, uint32_t nodesize, uint32_t space, int max_k);

/* Where a new item goes after a split (see ubt_leaf_split_plan). */
enum ubt_leaf_split_dest {
	UBT_SPLIT_DEST_LEFT,	/* the left leaf, at slot P */
	UBT_SPLIT_DEST_RIGHT,	/* the right leaf, at slot P - split */
	UBT_SPLIT_DEST_ALONE,	/* a third, empty leaf between left and right */
};

struct ubt_leaf_split_plan {
	int split;			/* ubt_leaf_split(left, right, nodesize, split) */
	enum ubt_leaf_split_dest dest;
};

/*
 * Plan the split of a leaf that must take a new item of @data_size bytes at
 * slot @slot = P (0 <= P <= nritems, the slot a search returned).  After
 * ubt_leaf_split(leaf, new right leaf, plan->split) the new item is
 * guaranteed to fit where plan->dest says, and both leaves keep at least one
 * item (or the new one).  Among the splits that allow that, the one that
 * leaves the two leaves' used bytes most even is chosen (by bytes, not item
 * count).  Cases:
 *   - usually split is near the middle, dest LEFT or RIGHT;
 *   - an item too big to share a leaf with the items before or after it
 *     at P == 0: split 0, dest LEFT (everything moves right, the item is
 *     alone in the left leaf); at P == nritems: split nritems, dest RIGHT
 *     (nothing moves, the item is alone in the new right leaf);
 *   - such an item at 0 < P < nritems: split P, dest ALONE - three leaves,
 *     [0, P) | new item | [P, nritems), each needing a new block.
 * The plan does not depend on whether the item would fit unsplit.
 * -E2BIG if the item does not fit an empty leaf; -EINVAL for a bad slot,
 * a bad leaf or an empty one (nothing to split).
 */
int ubt_leaf_split_plan(const uint8_t *blk, uint32_t nodesize, int slot, uint32_t data_size,
			struct ubt_leaf_split_plan *plan);

/* ---- nodes ---------------------------------------------------------------- */

/*
 * Node functions accept level 1..7 blocks with nritems <=
 * btrfs_node_ptrs_per_block(nodesize), including empty nodes (a split
 * target, or a node being built), which the checker would refuse on write.
 * Block pointers and generations must be non-zero (-EINVAL), as the checker
 * requires; alignment and generation <= the node's are left to it.
 */

/* Free pointer slots (>= 0) or -EINVAL. */
int ubt_node_free_slots(const uint8_t *blk, uint32_t nodesize);

/* Read pointer @slot: any of @key, @blockptr, @gen may be NULL. */
int ubt_node_get_ptr(const uint8_t *blk, uint32_t nodesize, int slot, struct btrfs_key *key,
		     uint64_t *blockptr, uint64_t *gen);

/*
 * Insert a pointer at @slot (0 <= slot <= nritems); pointers from @slot on
 * move up.  The key must fit between slot - 1 and slot (-EINVAL).  -ENOSPC
 * if the node is full.
 */
int ubt_node_insert_ptr(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key,
			uint64_t blockptr, uint64_t gen);

/* Delete pointers [slot, slot + nr); nr == 0 is a no-op. */
int ubt_node_delete_ptrs(uint8_t *blk, uint32_t nodesize, int slot, int nr);

/* Change the key at @slot, which must stay strictly between its neighbours. */
int ubt_node_set_key(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key);

/* Change the block pointer and its generation at @slot (after a COW). */
int ubt_node_set_ptr(uint8_t *blk, uint32_t nodesize, int slot, uint64_t blockptr, uint64_t gen);

/*
 * Split and push, as for leaves: @left and @right are different nodes of the
 * same level whose keys are in order across the boundary.  ubt_node_split
 * moves [slot, nritems) into the empty node @right; push_left moves right's
 * first @k pointers to the end of left, push_right left's last @k to the
 * front of right; -ENOSPC if the receiver lacks @k free slots.
 */
int ubt_node_split(uint8_t *left, uint8_t *right, uint32_t nodesize, int slot);
int ubt_node_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, int k);
int ubt_node_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, int k);

/*
 * Evening out two neighbours: *shift is the move that leaves them holding
 * ceil(n/2) and floor(n/2) of their n pointers - > 0: push_left(*shift),
 * < 0: push_right(-*shift), 0: already even.  Both nodes always have room
 * for it.  (To merge instead, push_left(right's nritems) when
 * ubt_node_free_slots(left) allows.)  The point to split a full node at
 * is simply nritems / 2.
 */
int ubt_node_balance_shift(const uint8_t *left, const uint8_t *right, uint32_t nodesize,
			   int *shift);

#endif /* UBTRFS_TREE_BLOCKOPS_H */
