/*
 * tree layer: the tree checker - validation of one raw tree block.
 *
 * Every tree block is checked exactly once, when it is read (and, by the
 * write engine, before it is written).  Code that receives a block the
 * checker accepted never re-checks lengths or offsets; see "What a caller may
 * rely on" below.  The checker does no I/O, keeps no state and allocates
 * nothing: every function is safe to call from any thread.
 *
 * Errors:
 *   -EIO      this copy is not the block the parent points to: wrong
 *             address in the header, wrong fsid, checksum mismatch, or a
 *             generation other than the one the parent recorded (a stale
 *             or lost write - the kernel's "parent transid verify failed").
 *             Another mirror may hold the right block.
 *   -EUCLEAN  the checksum is right but the content is invalid: bad level,
 *             parent/child disagreement on level, owner or first key, or any
 *             structural rule below.  Logged through UBT_CORRUPT with the
 *             block's logical address.  Another mirror may still be good.
 *   -EINVAL   the caller passed an unusable context (programmer error).
 * Readers should try every other copy on either -EIO or -EUCLEAN.
 *
 * What a caller may rely on once ubt_check_tree_block() returned 0:
 *   - header: bytenr, fsid, checksum, generation, level (< 8, as expected),
 *     owner and first key as the parent described them; WRITTEN flag set;
 *   - leaf: nritems item headers fit in the block; item data is contiguous,
 *     packed from the end of the block backwards, never overlapping another
 *     item or the item headers; keys strictly ascending;
 *   - leaf items of known types have the exact size their struct needs (or,
 *     for variable items, entries that walk exactly to the item end): every
 *     fixed-offset accessor on a known item type stays inside the item;
 *   - node: 1 <= nritems <= btrfs_node_ptrs_per_block(nodesize); keys
 *     strictly ascending; every block pointer is non-zero and sector aligned;
 *     every pointer generation is non-zero and <= the node's generation.
 * Item types the checker does not know are accepted unchecked (their bodies
 * are only known to lie inside the block).
 */
#ifndef UBTRFS_TREE_CHECKER_H
#define UBTRFS_TREE_CHECKER_H

#include <stdbool.h>
#include <stdint.h>

#include "format/btrfs_format.h"

/* What the checker needs to know about the filesystem (from the superblock). */
struct ubt_check_ctx {
	uint32_t nodesize;		/* power of two, 4 KiB .. 64 KiB */
	uint32_t sectorsize;		/* power of two, <= nodesize */
	uint16_t csum_type;		/* BTRFS_CSUM_TYPE_* */
	uint8_t fsid[BTRFS_FSID_SIZE];	/* uuid in block headers: metadata_uuid
					 * with METADATA_UUID, else the fsid */
	uint64_t incompat_flags;	/* superblock incompat flags */
	/*
	 * Generation of the committed superblock (or, while a transaction
	 * runs, of the last commit).  Items may carry at most this + 1 (the
	 * running transaction / a log tree).  0 disables those checks.
	 */
	uint64_t super_generation;
	/* Read-only use: accept inode read-only-compat flags we don't know. */
	bool read_only;
};

/* What the parent (superblock, root item or node pointer) says of a block. */
struct ubt_block_expect {
	uint64_t bytenr;		/* logical address; always checked */
	uint64_t generation;		/* 0 = don't care */
	int level;			/* -1 = don't care */
	bool has_first_key;
	struct btrfs_key first_key;	/* valid if has_first_key */
	uint64_t owner;			/* tree id, 0 = don't care */
};

/*
 * Fill @c from a superblock already accepted by ubt_super_validate().
 * super_generation is the superblock's generation.
 */
void ubt_check_ctx_from_super(struct ubt_check_ctx *c, const struct btrfs_super_block *sb,
			      bool read_only);

/*
 * Header checks of a nodesize-byte block: bytenr, fsid, checksum over bytes
 * [32, nodesize), generation (-EIO on mismatch), then level < 8 and as
 * expected, WRITTEN flag, owner (for subvolume trees any subvolume owner is
 * accepted, since snapshots share blocks; log and reloc trees are not
 * checked) and first key (-EUCLEAN).  Items are not looked at.
 */
int ubt_check_block_header(const struct ubt_check_ctx *c, const uint8_t *block,
			   const struct ubt_block_expect *exp);

/*
 * Structure of a leaf (header level must be 0): item layout, key order and
 * every item of a known type.  Does not verify the checksum, so the write
 * engine can run it on a block it is about to checksum and write.
 */
int ubt_check_leaf(const struct ubt_check_ctx *c, const uint8_t *block);

/* Structure of a node (header level 1..7); no checksum either. */
int ubt_check_node(const struct ubt_check_ctx *c, const uint8_t *block);

/* The one call readers use: header, then leaf or node.  0 / -EIO / -EUCLEAN. */
int ubt_check_tree_block(const struct ubt_check_ctx *c, const uint8_t *block,
			 const struct ubt_block_expect *exp);

/*
 * Store the checksum of bytes [32, nodesize) of @block in its header (the
 * first csum-size bytes of the csum field).  For writers and tests.
 * Returns 0, or -EINVAL for an unusable context, -ENOMEM if hashing failed.
 */
int ubt_tree_block_set_csum(const struct ubt_check_ctx *c, uint8_t *block);

#endif /* UBTRFS_TREE_CHECKER_H */
