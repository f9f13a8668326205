/*
 * trans layer: the copy-on-write engine.  Transactions, writable tree
 * blocks, B-tree modification (search for write with proactive split and
 * merge, insert, delete, extend, truncate), tree-block allocation from the
 * metadata block groups, extent back references applied at commit (delayed
 * refs), block-group accounting, the free-space tree, and the commit that
 * writes every dirty block and then the superblocks.
 *
 * Sits on tree (blocks, cache, checker), volume (mapping, writes) and fs
 * (the opened filesystem).  One writer at a time: every function here runs
 * under the caller's write lock (the library serialises writers; readers of
 * an fs being written take the same lock shared).
 *
 * Lifetime of a block:
 *   committed (generation < transid, immutable, shared by readers)
 *     --COW--> dirty (generation == transid, a new address, writable, held
 *              by the transaction, in the block cache so searches find it)
 *     --commit--> committed.
 * The old copy's space is released only when the commit that no longer
 * reaches it is on disk (it is "pinned" until then).
 *
 * Errors: any failure inside a transaction aborts it: nothing more is
 * written, the filesystem turns read-only (fs->wr->aborted) and the last
 * commit stays intact on disk.  -ENOSPC from an operation is returned before
 * anything changed where possible (tree operations reserve their worst case
 * up front); an ENOSPC discovered during commit aborts.
 *
 * Reference model: the full btrfs one (extent_w.c): implicit and shared
 * (parent) references of tree blocks and data, FULL_BACKREF, and the rules
 * for copying blocks that snapshots share (ctree_w.c).  Blocks with
 * pre-mixed or relocation back references are refused with -EOPNOTSUPP.
 */
#ifndef UBTRFS_TRANS_H
#define UBTRFS_TRANS_H

#include <stdbool.h>
#include <stdint.h>

#include "format/btrfs_format.h"
#include "fs/fs.h"
#include "tree/tree.h"

struct ubt_trans;

/* A byte range. */
struct ubt_range {
	uint64_t start, len;
};

/* A growable sorted set of disjoint ranges. */
struct ubt_rangeset {
	struct ubt_range *v;
	size_t n, cap;
};

/* One block group as the writer tracks it. */
struct ubt_bg {
	uint64_t start, len, flags;	/* BTRFS_BLOCK_GROUP_* */
	uint64_t used;			/* bytes in extents, as of now */
	uint64_t chunk_objectid;	/* from the item (256) */
	bool loaded;			/* `extents` built from the extent tree */
	bool dirty;			/* free-space tree entries need rewriting */
	bool item_dirty;		/* BLOCK_GROUP_ITEM needs rewriting */
	struct ubt_rangeset extents;	/* allocated ranges (incl. super stripes) */
	struct ubt_rangeset pinned;	/* freed in this transaction: not reusable */
	struct ubt_rangeset supers;	/* superblock copies inside this group */
	uint64_t cursor;		/* next-fit allocation hint */
};

/* A tree being written.  The root tree and chunk tree live in the
 * superblock; every other tree has a ROOT_ITEM in the root tree. */
struct ubt_wroot {
	uint64_t objectid;
	struct ubt_root_ref ref;	/* current root (bytenr, generation, level) */
	struct btrfs_root_item item;	/* with a ROOT_ITEM: its current content */
	struct btrfs_key item_key;	/* where the ROOT_ITEM is */
	bool has_item;
	bool dirty;			/* root moved or item changed: rewrite item */
};

/* A pending change of an extent's references or flags (a delayed ref). */
struct ubt_dref {
	uint64_t bytenr, num_bytes;
	bool tree;			/* a tree block (else data) */
	bool new_block;			/* allocated in this transaction */
	uint8_t level;			/* tree blocks */
	uint8_t type;			/* TREE_BLOCK_REF, SHARED_BLOCK_REF,
					 * EXTENT_DATA_REF, SHARED_DATA_REF (0: flags only) */
	uint64_t root;			/* TREE_BLOCK_REF, EXTENT_DATA_REF */
	uint64_t parent;		/* SHARED_* */
	uint64_t owner, offset;		/* EXTENT_DATA_REF: inode, file offset - extent offset */
	int delta;
	uint64_t set_flags;		/* extent flags to set (FULL_BACKREF) */
	struct btrfs_key first_key;	/* for non-skinny tree_block_info */
};

/* The writer state of an opened filesystem (fs->wr). */
struct ubt_wfs {
	struct ubt_fs *fs;
	bool aborted;
	int abort_err;
	uint64_t last_committed;	/* generation of the superblock on disk */
	struct ubt_bg *bgs;		/* sorted by start */
	size_t nbgs;
	struct ubt_wroot **roots;	/* trees opened for writing */
	size_t nroots, roots_cap;
	struct ubt_trans *running;
	int backup_index;		/* next backup-root slot to fill */
	bool chunk_alloc_failed;	/* this transaction: devices are full */
	/* Work held back until the commit (the namespace's delayed
	 * DIR_INDEX items, inode_w.c): done first thing in
	 * ubt_trans_commit_prepare, with the room promised for it
	 * (ubt_meta_owe_idx).  An error aborts the transaction. */
	int (*pre_commit)(void *ctx, struct ubt_trans *t);
	void *pre_commit_ctx;
};

/* What readers saw when the transaction started (restored on abort). */
struct ubt_saved_root {
	uint64_t id;
	struct ubt_root_ref root;
	struct btrfs_root_item item;
};

struct ubt_trans {
	struct ubt_wfs *w;
	struct ubt_root_ref saved_global[9];
	struct ubt_saved_root *saved_subvols;
	size_t nsaved_subvols;
	uint64_t transid;
	struct ubt_eb **dirty;		/* every block COWed or created */
	size_t ndirty, dirty_cap;
	struct ubt_dref *refs;
	size_t nrefs, refs_cap;
	/* refs indexed by bytenr (extent_w.c): ref_head[bucket] and
	 * ref_next[i] hold an index + 1 (0 ends a chain); ref_nbuckets is 0
	 * or a power of two above twice nrefs. */
	size_t *ref_head, *ref_next, ref_nbuckets;
	bool committing;		/* commit work uses every reserve */
	struct btrfs_super_block new_super;	/* written by the commit */
	bool allocating_chunk;		/* inside ubt_alloc_chunk */
	/* Blocks of the trees a commit rewrites (ubt_commit_ref_blocks):
	 * counted once per transaction; UINT64_MAX if not known. */
	uint64_t commit_tree_blocks;
	bool commit_tree_counted;
	/* Inside one user-visible operation (ubt_op_scope): its first reserve
	 * held back room for all of it (op_reserved). */
	bool op_scope, op_reserved;
	/* Blocks promised to work done just before the commit (ubt_meta_owe:
	 * the API's deferred ORPHAN_ITEMs): every reserve keeps them free,
	 * and that work itself (owed_work) checks nothing. */
	uint64_t owed;
	bool owed_work;
	/* The same for the delayed DIR_INDEX items (ubt_meta_owe_idx) and
	 * the held checksum run (below): room for owe_dirs directories'
	 * batches and owe_runs runs. */
	size_t owe_dirs, owe_runs;
	/* Checksums of consecutive new data sectors not yet in the csum tree
	 * (csum_w.c, "the held run"): n sectors from start, cap allocated. */
	struct ubt_csum_run {
		uint64_t start;
		size_t n, cap;
		uint8_t *cs;
	} csum_run;
	/* The data extent a file's last copy-on-write write created in this
	 * transaction (file_w.c): a write continuing the file right after it
	 * grows it in place instead of starting another extent.  Valid while
	 * its one reference, refs[ref], is the only change queued for it
	 * (any other reference queued for bytenr clears it: extent_w.c). */
	struct ubt_grow_hint {
		bool valid;
		uint64_t bytenr, num_bytes;	/* the extent, as refs[ref] says */
		uint64_t root, ino, file_off;	/* its one item's key */
		uint64_t last_snapshot;		/* the root's, when it was made */
		size_t ref;
	} grow;
};

/* ---- writer lifetime (trans.c) ----------------------------------------- */

/* Prepare fs (opened writable) for writing: block groups, roots. */
int ubt_wfs_init(struct ubt_fs *fs);
void ubt_wfs_destroy(struct ubt_fs *fs);

int ubt_trans_start(struct ubt_fs *fs, struct ubt_trans **out);
/* Commit: on success the transaction is gone and on disk.  On failure it
 * is aborted (and gone); the filesystem is read-only. */
int ubt_trans_commit(struct ubt_trans *t);
/*
 * The same in three steps, for callers that let readers run while the
 * blocks and superblocks go to the devices (no other writer may run):
 *   prepare (exclusive): settle every tree.  0: go on; 1: nothing to
 *     commit, the transaction is gone; < 0: aborted and gone.
 *   write (shared with readers): every dirty block, flush, superblocks,
 *     flush.  Changes nothing readers look at; never aborts.
 *   finish (exclusive) with write's result: publish the new generation,
 *     or abort.  The transaction is gone either way.
 */
int ubt_trans_commit_prepare(struct ubt_trans *t);
int ubt_trans_commit_write(struct ubt_trans *t);
int ubt_trans_commit_finish(struct ubt_trans *t, int ret);
/* Abort: drop every change; the filesystem turns read-only. */
void ubt_trans_abort(struct ubt_trans *t, int err);

/* A tree for writing: 1 root tree, 3 chunk tree, or any tree with a
 * ROOT_ITEM (extent 2, dev 4, fs trees 5/256+, csum 7, uuid 9, FST 10,
 * block group 11). */
int ubt_wroot_get(struct ubt_trans *t, uint64_t objectid, struct ubt_wroot **out);

/* Make the read side (fs->*_tree, the subvolume cache) use r's root. */
void ubt_wroot_publish(struct ubt_trans *t, struct ubt_wroot *r);

/* ---- B-tree modification (ctree_w.c) ----------------------------------- */

/*
 * Search `key` for modification: every block on the path is copied on
 * write, and with ins_len > 0 every node and the leaf are split in advance
 * so that an item of ins_len bytes (header included) fits; with ins_len < 0
 * underfull nodes are merged on the way down.  Results as ubt_search_slot.
 * The path's blocks are dirty and writable (ubt_eb_wdata).
 */
int ubt_search_slot_w(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key,
		      struct ubt_path *path, int ins_len);

/* Search for an existing item that must grow by `add` bytes in place
 * (then ubt_extend_item): splits its leaf as needed.  0 found, 1 not. */
int ubt_search_slot_grow(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key,
			 struct ubt_path *path, uint32_t add);
/* Insert an item of `size` bytes (zeroed); *data points at it in the leaf
 * (valid until the next tree operation).  -EEXIST if the key exists. */
int ubt_insert_item(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key,
		    uint32_t size, uint8_t **data);
/* Insert n >= 1 items with ascending keys, next to each other (no item
 * between them), sizes[i] bytes each (zeroed), in one leaf; data[i] (if
 * data) points at each.  -EEXIST, changing nothing, if keys[0] is taken;
 * an item between keys[0] and keys[n - 1] is -EUCLEAN and aborts the
 * transaction. */
int ubt_insert_items(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *keys,
		     const uint32_t *sizes, int n, uint8_t **data);
/* Delete `n` items from path->slots[0] in path->nodes[0] (from a search
 * with ins_len -1); merges or frees the leaf as needed.  Releases path. */
int ubt_del_items(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path, int n);
/* Delete the item with this exact key (-ENOENT if none). */
int ubt_delete_key(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key);
/* A new subvolume tree's root: an empty leaf owned by tree new_id (the
 * filesystem's uuids taken from tree `like`'s root).  *bytenr: the leaf,
 * for new_id's ROOT_ITEM. */
int ubt_tree_new_root(struct ubt_trans *t, uint64_t new_id, const struct ubt_wroot *like,
		      uint64_t *bytenr);
/*
 * A snapshot's root: copy the root of subvolume tree `src` (first copied
 * in this transaction, as every change does) into a new block owned by
 * tree `new_id`, which takes references of its own on everything that
 * root points at (children, or a leaf's data extents).  *bytenr and
 * *level: the copy, for new_id's ROOT_ITEM.  After the copy every block
 * the two trees share is older than the transaction, and either tree may
 * change as usual.  ubt_tree_snapshot_check, also made first here, says
 * whether it can be made, changing nothing: -EAGAIN when src changed in
 * this transaction (its blocks of this transaction would be changed in
 * place later, under the snapshot sharing them: commit first),
 * -EOPNOTSUPP for a root with old-style or relocation back references.
 */
int ubt_tree_snapshot_check(struct ubt_trans *t, struct ubt_wroot *src);
int ubt_tree_snapshot_root(struct ubt_trans *t, struct ubt_wroot *src, uint64_t new_id,
			   uint64_t *bytenr, uint8_t *level);
/* Grow the item at the path by `add` bytes at its end (zeroed); the path
 * must come from a search with ins_len >= add. */
int ubt_extend_item(struct ubt_trans *t, struct ubt_path *path, uint32_t add);
/* Shrink the item at the path to new_size, dropping bytes at the end
 * (from_front: at the start). */
int ubt_truncate_item(struct ubt_trans *t, struct ubt_path *path, uint32_t new_size,
		      bool from_front);

/* Writable view of a dirty block on a write path. */
static inline uint8_t *ubt_eb_wdata(struct ubt_eb *eb)
{
	return eb->data;
}
static inline uint8_t *ubt_eb_witem_data(struct ubt_eb *eb, int slot)
{
	return eb->data + sizeof(struct btrfs_header) + btrfs_item_offset(ubt_eb_item(eb, slot));
}

/* ---- allocation (alloc.c) ---------------------------------------------- */

/* Load block groups (items from the extent or block-group tree). */
int ubt_bgs_load(struct ubt_wfs *w);
void ubt_bgs_free(struct ubt_wfs *w);
struct ubt_bg *ubt_bg_find(struct ubt_wfs *w, uint64_t bytenr);
/* Build bg->extents from the extent tree and the superblock stripes. */
int ubt_bg_load_extents(struct ubt_wfs *w, struct ubt_bg *bg);
/* A free, nodesize-aligned tree block in a metadata (or system) group. */
int ubt_alloc_tree_block(struct ubt_trans *t, bool system, uint64_t *bytenr);
/* Space accounting of an allocation or a free (free: pinned till commit). */
int ubt_bg_account(struct ubt_trans *t, uint64_t bytenr, uint64_t len, bool alloc);
/* After a commit: pinned space becomes free. */
void ubt_bgs_unpin(struct ubt_wfs *w);
/* Free metadata bytes (for statfs and reserve decisions). */
uint64_t ubt_meta_free_bytes(struct ubt_wfs *w, bool system);
/*
 * Before a tree operation: make sure the metadata space it may need is there
 * together with what the commit will need, allocating a new metadata chunk
 * when free space runs low.  Insertions must also leave a global reserve
 * that only deletions and the commit may use, so that emptying a full
 * filesystem and committing always work.  -ENOSPC when it does not fit
 * (nothing changed).
 */
int ubt_reserve_metadata(struct ubt_trans *t, bool deleting);
/*
 * The most new blocks the commit's processing of the queued reference
 * changes may take, besides the per-dirty-block part of the reserve: one per
 * change, but never more than the blocks of the trees that processing
 * rewrites (each is copied at most once per transaction) plus room for the
 * splits its insertions may cause.
 */
uint64_t ubt_commit_ref_blocks(struct ubt_trans *t);
/*
 * Begin (on) or end (off) one user-visible operation, which may make many
 * tree operations.  Its first ubt_reserve_metadata() checks for the room of
 * the whole operation (besides the commit's reserve and, unless deleting,
 * the global one) and may fail with -ENOSPC, nothing changed; the later ones
 * inside it only make sure the commit's reserve is kept, and running out
 * there (the operation outgrew its room, half done) aborts the transaction.
 * Outside a scope every tree operation is checked on its own.
 */
void ubt_op_scope(struct ubt_trans *t, bool on);
/* A new metadata chunk now, while the metadata groups take less than an
 * eighth of the filesystem: room for a large transaction instead of an
 * early commit.  -ENOSPC when it may not or cannot grow. */
int ubt_meta_grow(struct ubt_trans *t);
/* During commit: a new metadata chunk when the queued work may not fit
 * (devices full: carry on with what is left). */
int ubt_commit_space(struct ubt_trans *t);
/* A data extent of up to `want` bytes (a sector multiple) in a data group:
 * the first free run from the group's cursor, at least a sector.
 * -ENOSPC when no data group has a free sector. */
int ubt_alloc_data_extent(struct ubt_trans *t, uint64_t want, uint64_t *bytenr, uint64_t *got);
/* Take exactly [bytenr, bytenr + len) for data, if all of it is free and in
 * the data group (not RAID5/6) that holds `extent` (an extent must not
 * cross block groups): 0, or -ENOSPC (nothing taken). */
int ubt_alloc_data_at(struct ubt_trans *t, uint64_t extent, uint64_t bytenr, uint64_t len);
/* Free bytes in the data groups (not counting pinned space). */
uint64_t ubt_data_free_bytes(struct ubt_wfs *w);
/* A new chunk of this kind (BTRFS_BLOCK_GROUP_DATA or _METADATA), in the
 * profile the filesystem uses for it (chunk_w.c).  -ENOSPC if the devices
 * have no room. */
int ubt_alloc_chunk(struct ubt_trans *t, uint64_t kind);

int ubt_rangeset_add(struct ubt_rangeset *s, uint64_t start, uint64_t len);
int ubt_rangeset_remove(struct ubt_rangeset *s, uint64_t start, uint64_t len);
bool ubt_rangeset_overlaps(const struct ubt_rangeset *s, uint64_t start, uint64_t len);
void ubt_rangeset_free(struct ubt_rangeset *s);

/* Promise room for `n` small item insertions before the commit (n = 0
 * takes the promise back): true when the room is there beyond what the
 * commit needs - from then on every reserve keeps it free - , false
 * (nothing promised beyond the earlier promise) when it is not. */
bool ubt_meta_owe(struct ubt_trans *t, size_t n);
/* The promised work runs between these two (reserves check nothing);
 * the promise ends with it. */
void ubt_meta_owed_begin(struct ubt_trans *t);
/* Keep room free for `n` batches of delayed DIR_INDEX items, each an
 * insertion of up to a quarter leaf (replacing what was kept for them
 * before): false, nothing changed, when that room is not there besides
 * the next operation's. */
bool ubt_meta_owe_idx(struct ubt_trans *t, size_t n);
/* The same for `n` held checksum runs (0 or 1; csum_w.c). */
bool ubt_meta_owe_run(struct ubt_trans *t, size_t n);
void ubt_meta_owed_end(struct ubt_trans *t);

/* ---- extent references (extent_w.c) ------------------------------------ */

/* Queue a TREE_BLOCK_REF change of a tree block (+1: a block allocated in
 * this transaction; -1: dropped from tree `root`). */
int ubt_dref_add(struct ubt_trans *t, uint64_t bytenr, uint64_t root, int delta, uint8_t level,
		 const struct btrfs_key *first_key);
/* Queue any reference or flag change. */
int ubt_dref_queue(struct ubt_trans *t, const struct ubt_dref *r);
/* The queued changes of one extent: for (size_t i = ubt_dref_first(t, b);
 * i; i = ubt_dref_next(t, i)) visits t->refs[i - 1] for every queued
 * change with bytenr b, in no particular order. */
size_t ubt_dref_first(const struct ubt_trans *t, uint64_t bytenr);
size_t ubt_dref_next(const struct ubt_trans *t, size_t i);
/* An extent's reference count and flags, with the queued changes. */
int ubt_extent_info(struct ubt_trans *t, uint64_t bytenr, uint64_t *refs, uint64_t *flags);
/* Apply queued changes to the extent tree (loops: its own COW queues more). */
int ubt_run_drefs(struct ubt_trans *t);
/* Rewrite the BLOCK_GROUP_ITEM of every dirty group. */
int ubt_write_bg_items(struct ubt_trans *t);

/* ---- free-space tree (fst_w.c) ----------------------------------------- */

/* Rewrite the free-space tree entries of every dirty group from its
 * in-memory extents (free = group - extents), as extents or bitmaps by the
 * kernel's thresholds. */
int ubt_fst_update(struct ubt_trans *t);

#endif /* UBTRFS_TRANS_H */
