/*
 * tree layer: tree blocks in memory (extent buffers), the bounded block
 * cache, verified reads with fallback to every other copy, and B-tree search
 * and iteration.  Sits on volume (logical reads) and format; the checker
 * (checker.h) and printer (print.h) of this layer work on raw blocks.
 *
 * Locking: the cache has one mutex, held only for hash/LRU updates, never
 * across device I/O.  An extent buffer is immutable once in the cache (the
 * write engine will copy before changing), so readers share it freely while
 * they hold a reference.
 */
#ifndef UBTRFS_TREE_H
#define UBTRFS_TREE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "format/btrfs_format.h"
#include "tree/checker.h"
#include "volume/volume.h"

struct ubt_eb {
	uint64_t start;		/* logical address */
	uint32_t len;		/* nodesize */
	int refs;		/* protected by the cache mutex */
	struct ubt_eb *hash_next;
	struct ubt_eb *clock_prev, *clock_next;	/* the cache's CLOCK ring */
	bool referenced;	/* used since the hand last passed */
	bool unhashed;		/* removed from the cache: freed at the last put */
	uint8_t data[];
};

struct ubt_tree_stats {
	uint64_t hits, misses, evictions, bytes;
};

#define UBT_RA_SLOTS 64	/* read-around windows remembered */

struct ubt_tree_ctx {
	struct ubt_volume *vol;
	struct ubt_check_ctx check;
	pthread_mutex_t lock;
	struct ubt_eb **buckets;
	size_t nbuckets;	/* a power of two */
	struct ubt_eb *hand;	/* CLOCK ring of every cached block */
	uint64_t bytes, max_bytes, nblocks;
	struct ubt_tree_stats stats;
	/*
	 * Set by a thread that holds the filesystem exclusively (the API's
	 * write lock: no other thread is inside the tree code), which then
	 * skips `lock`.  Written only under that exclusion, so every other
	 * thread sees it false (ubt_tree_set_exclusive).
	 */
	bool excl;
	pthread_t excl_owner;
	/* Read-around (eb_cache.c): the windows asked for lately, as window
	 * number + 1 in a direct-mapped table, forgotten every
	 * UBT_RA_FORGET tree blocks read from the device.  Advice only: racy
	 * by design, relaxed atomics. */
	_Atomic uint64_t ra_seen[UBT_RA_SLOTS];
	_Atomic uint64_t ra_reads;
};

/* A tree's root as its parent (superblock or ROOT_ITEM) describes it. */
struct ubt_root_ref {
	uint64_t objectid;	/* owner tree id, for the owner check (0: skip) */
	uint64_t bytenr;
	uint64_t generation;
	uint8_t level;
};

int ubt_tree_ctx_init(struct ubt_tree_ctx *t, struct ubt_volume *vol, uint64_t cache_bytes);
/* The calling thread now holds (on) or no longer holds (off) the
 * filesystem exclusively: while on, its cache calls take no mutex.  Call
 * with the exclusion held, before letting go of it. */
void ubt_tree_set_exclusive(struct ubt_tree_ctx *t, bool on);
/* The calling thread holds the filesystem exclusively (caches built on the
 * same rule skip their mutex). */
bool ubt_tree_exclusive(const struct ubt_tree_ctx *t);
void ubt_tree_ctx_destroy(struct ubt_tree_ctx *t);

/*
 * Read and verify the tree block at exp->bytenr: checksum, bytenr, fsid,
 * level, owner, generation and first key as the parent expects them, then
 * every item (tree checker).  Every copy is tried before failing; the error
 * is logged with the logical address and the reason.  Returns a reference
 * the caller drops with ubt_eb_put().
 */
int ubt_read_tree_block(struct ubt_tree_ctx *t, const struct ubt_block_expect *exp,
			struct ubt_eb **out);
void ubt_eb_put(struct ubt_tree_ctx *t, struct ubt_eb *eb);

/*
 * For the write engine: a new block (refs 1, contents uninitialised) to be
 * filled and then published with ubt_eb_insert(), which replaces any cached
 * block at the same address (a freed block whose space is being reused).
 * ubt_eb_remove() takes a block out of the cache (it was freed); holders
 * keep their references and the last put frees it.
 */
struct ubt_eb *ubt_eb_alloc(struct ubt_tree_ctx *t, uint64_t start);
void ubt_eb_insert(struct ubt_tree_ctx *t, struct ubt_eb *eb);
void ubt_eb_remove(struct ubt_tree_ctx *t, struct ubt_eb *eb);
/* One more reference to a block already held. */
void ubt_eb_get(struct ubt_tree_ctx *t, struct ubt_eb *eb);

/* ---- block accessors (valid after the checker accepted the block) ----- */

static inline const struct btrfs_header *ubt_eb_header(const struct ubt_eb *eb)
{
	return (const struct btrfs_header *)eb->data;
}
static inline uint32_t ubt_eb_nritems(const struct ubt_eb *eb)
{
	return btrfs_header_nritems(ubt_eb_header(eb));
}
static inline uint8_t ubt_eb_level(const struct ubt_eb *eb)
{
	return btrfs_header_level(ubt_eb_header(eb));
}
static inline uint64_t ubt_eb_generation(const struct ubt_eb *eb)
{
	return btrfs_header_generation(ubt_eb_header(eb));
}
static inline uint64_t ubt_eb_owner(const struct ubt_eb *eb)
{
	return btrfs_header_owner(ubt_eb_header(eb));
}
static inline const struct btrfs_item *ubt_eb_item(const struct ubt_eb *eb, int slot)
{
	return (const struct btrfs_item *)(eb->data + sizeof(struct btrfs_header) +
					   (size_t)slot * sizeof(struct btrfs_item));
}
static inline void ubt_eb_item_key(const struct ubt_eb *eb, int slot, struct btrfs_key *key)
{
	btrfs_disk_key_to_cpu(key, &ubt_eb_item(eb, slot)->key);
}
static inline uint32_t ubt_eb_item_size(const struct ubt_eb *eb, int slot)
{
	return btrfs_item_size(ubt_eb_item(eb, slot));
}
static inline const uint8_t *ubt_eb_item_data(const struct ubt_eb *eb, int slot)
{
	return eb->data + sizeof(struct btrfs_header) + btrfs_item_offset(ubt_eb_item(eb, slot));
}
static inline const struct btrfs_key_ptr *ubt_eb_key_ptr(const struct ubt_eb *eb, int slot)
{
	return (const struct btrfs_key_ptr *)(eb->data + sizeof(struct btrfs_header) +
					      (size_t)slot * sizeof(struct btrfs_key_ptr));
}
static inline void ubt_eb_node_key(const struct ubt_eb *eb, int slot, struct btrfs_key *key)
{
	btrfs_disk_key_to_cpu(key, &ubt_eb_key_ptr(eb, slot)->key);
}

/* ---- search and iteration -------------------------------------------- */

struct ubt_path {
	struct ubt_eb *nodes[BTRFS_MAX_LEVEL];
	int slots[BTRFS_MAX_LEVEL];
};

/* The lowest level at which a full path (root to leaf) has a pointer right
 * of its own, i.e. where the way to the next leaf turns; 0 when the leaf is
 * the tree's last. */
int ubt_path_next_level(const struct ubt_path *path);

/* Building blocks shared with the write engine.  ubt_bin_search: 0 and the
 * slot when found, else 1 and the first slot with a greater key.  The read
 * functions check what the parent (node pointer / root) records. */
int ubt_bin_search(const struct ubt_eb *eb, const struct btrfs_key *key, int *slot);
int ubt_read_child(struct ubt_tree_ctx *t, const struct ubt_eb *parent, int slot,
		   uint64_t owner, struct ubt_eb **out);
int ubt_read_root(struct ubt_tree_ctx *t, const struct ubt_root_ref *root, struct ubt_eb **out);

void ubt_path_init(struct ubt_path *p);
void ubt_path_release(struct ubt_tree_ctx *t, struct ubt_path *p);

/*
 * Find `key` in the tree.  0: found, path->nodes[0]/slots[0] is the item.
 * 1: not found, slots[0] is where it would go (may equal nritems).  <0 error.
 */
int ubt_search_slot(struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		    const struct btrfs_key *key, struct ubt_path *path);
/* Move to the next item (crossing leaves).  0 ok, 1 past the end, <0 error.
 * Also fixes a path left at slot == nritems by a not-found search. */
int ubt_next_item(struct ubt_tree_ctx *t, struct ubt_path *path);
/* Move to the previous item.  0 ok, 1 before the start, <0 error. */
int ubt_prev_item(struct ubt_tree_ctx *t, struct ubt_path *path);

/*
 * Range iteration: every item with min <= key <= max, in key order.
 *   ubt_iter_start(); while ((ret = ubt_iter_next(&it)) == 0) { use it.key, it.data, it.size }
 * ubt_iter_next returns 1 at the end, <0 on error; ubt_iter_end() always.
 */
struct ubt_iter {
	struct ubt_tree_ctx *t;
	struct ubt_root_ref root;
	struct btrfs_key min, max;
	struct ubt_path path;
	bool started, done;
	struct btrfs_key key;		/* current item */
	const uint8_t *data;
	uint32_t size;
	const struct ubt_eb *leaf;
	int slot;
};

void ubt_iter_start(struct ubt_iter *it, struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		    const struct btrfs_key *min, const struct btrfs_key *max);
int ubt_iter_next(struct ubt_iter *it);
void ubt_iter_end(struct ubt_iter *it);

/* Find the item with the largest key <= `key` ... convenience for lookups
 * such as "latest ROOT_ITEM of objectid X": 0 found (path at it), 1 none. */
int ubt_search_le(struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		  const struct btrfs_key *key, struct ubt_path *path);

/* ---- dump-tree --------------------------------------------------------- */

struct ubt_print_ctx;
/* Print every block of a tree, depth first (read errors are listed). */
int ubt_dump_tree(struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		  const struct ubt_print_ctx *pc);
/* Print one block, read without parent expectations. */
int ubt_dump_block(struct ubt_tree_ctx *t, uint64_t bytenr, const struct ubt_print_ctx *pc);

#endif /* UBTRFS_TREE_H */
