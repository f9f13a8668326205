/*
 * trans layer: B-tree modification with copy on write.
 *
 * Top-down, in the manner of Rodeh's copy-on-write B-trees as btrfs uses
 * them: a search for modification copies every block on its way down (a
 * block of this transaction is changed in place) and fixes nodes before
 * entering them - with an insertion ahead, a node with fewer than 3 free
 * pointers is split; with a deletion ahead, a node with fewer than a quarter
 * of its pointers is merged with or evened out against a neighbour, and a
 * root node with one child gives way to it.  After such a change the search
 * starts again from the root (the blocks are now this transaction's, so the
 * second descent copies nothing).  A leaf without room first moves items
 * into a neighbour under the same parent that has it (push_for_room, as the
 * kernel's push_leaf_left/right), else it is split (insert) - evenly by
 * bytes; an append at the end of the tree pushes nothing and leaves
 * the full leaf full (a new leaf takes it); leaves are merged into a
 * neighbour when less than a third full (delete) by the operation itself,
 * so a parent always has room for the pointer a leaf split adds.
 *
 * Invariants kept: a node's key for a child equals the child's first key
 * (low keys fixed up the path after a change at slot 0); no node is empty;
 * only the root may be an empty leaf.
 */
#include "trans/trans.h"

#include "base/base.h"
#include "tree/blockops.h"

#include <stdlib.h>
#include <string.h>

static bool is_fs_tree(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID ||
	       (id >= BTRFS_FIRST_FREE_OBJECTID && id <= BTRFS_LAST_FREE_OBJECTID) ||
	       id == BTRFS_TREE_RELOC_OBJECTID;
}

static uint32_t nodesize_of(const struct ubt_trans *t)
{
	return t->w->fs->nodesize;
}

/*
 * Errors that leave the tree as it was (nothing changed yet) are returned;
 * anything else may have left a half-done change in memory and aborts.
 */
static int abort_with(struct ubt_trans *t, int ret)
{
	if (ret < 0 && ret != -EEXIST && ret != -ENOENT && ret != -E2BIG && !t->w->aborted) {
		ubt_log(UBT_LOG_ERROR, "a tree change failed part way (%s): aborting",
			ubt_strerror(ret));
		t->w->aborted = true;
		t->w->abort_err = ret;
	}
	return ret;
}

static int add_dirty(struct ubt_trans *t, struct ubt_eb *eb)
{
	if (t->ndirty == t->dirty_cap) {
		size_t cap = t->dirty_cap ? t->dirty_cap * 2 : 64;
		struct ubt_eb **v = realloc(t->dirty, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->dirty = v;
		t->dirty_cap = cap;
	}
	t->dirty[t->ndirty++] = eb;
	return 0;
}

static void first_key(const struct ubt_eb *eb, struct btrfs_key *key)
{
	memset(key, 0, sizeof(*key));
	if (ubt_eb_nritems(eb) == 0)
		return;
	if (ubt_eb_level(eb) == 0)
		ubt_eb_item_key(eb, 0, key);
	else
		ubt_eb_node_key(eb, 0, key);
}

/*
 * A new block of this transaction at a fresh address, holding a copy of
 * `src` (or, src NULL, an empty block of `level` with tmpl's uuids).  The
 * transaction holds one reference, the caller gets another.
 */
static int new_block(struct ubt_trans *t, struct ubt_wroot *root, const struct ubt_eb *src,
		     const struct ubt_eb *tmpl, int level, struct ubt_eb **out)
{
	struct ubt_fs *fs = t->w->fs;
	uint64_t bytenr;
	int ret;

	ret = ubt_alloc_tree_block(t, root->objectid == BTRFS_CHUNK_TREE_OBJECTID, &bytenr);
	if (ret)
		return ret;
	struct ubt_eb *eb = ubt_eb_alloc(&fs->tree, bytenr);
	if (!eb)
		return -ENOMEM;
	struct btrfs_header *h = (struct btrfs_header *)eb->data;
	if (src) {
		memcpy(eb->data, src->data, fs->nodesize);
		btrfs_set_header_bytenr(h, bytenr);
		btrfs_set_header_generation(h, t->transid);
		btrfs_set_header_owner(h, root->objectid);
		btrfs_set_header_flags(h, BTRFS_HEADER_FLAG_WRITTEN);
		btrfs_set_header_backref_rev(h, BTRFS_MIXED_BACKREF_REV);
	} else {
		const struct btrfs_header *th = ubt_eb_header(tmpl);
		struct ubt_block_hdr bh = { bytenr, t->transid, root->objectid, (uint8_t)level,
					    th->fsid, th->chunk_tree_uuid, 0 };
		ret = ubt_block_init(eb->data, fs->nodesize, &bh);
		if (ret) {
			free(eb);
			return ret;
		}
	}
	ret = add_dirty(t, eb);
	if (ret) {
		free(eb);
		return ret;
	}
	ubt_eb_insert(&fs->tree, eb);
	ubt_eb_get(&fs->tree, eb);
	ret = ubt_dref_add(t, bytenr, root->objectid, +1, (uint8_t)level, NULL);
	if (ret) {
		ubt_eb_put(&fs->tree, eb);
		return ret;
	}
	*out = eb;
	return 0;
}

/* Drop a block from its tree: its reference goes at commit. */
static int free_block(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_eb *eb)
{
	struct ubt_fs *fs = t->w->fs;
	int ret = ubt_dref_add(t, eb->start, root->objectid, -1, ubt_eb_level(eb), NULL);

	if (ret)
		return ret;
	if (ubt_eb_generation(eb) == t->transid) {
		for (size_t i = 0; i < t->ndirty; i++) {
			if (t->dirty[i] == eb) {
				t->dirty[i] = t->dirty[--t->ndirty];
				ubt_eb_remove(&fs->tree, eb);
				ubt_eb_put(&fs->tree, eb);	/* the transaction's */
				break;
			}
		}
	}
	return 0;
}

/*
 * Add (delta +1) or drop (-1) the references block `eb` holds on what it
 * points at: a node's children, a leaf's data extents.  full: as
 * SHARED_*_REF with eb as the parent; else implicit refs of tree `root`.
 */
static int mod_refs(struct ubt_trans *t, const struct ubt_eb *eb, uint64_t root, bool full,
		    int delta)
{
	uint32_t n = ubt_eb_nritems(eb);
	int ret = 0;

	for (uint32_t i = 0; i < n && !ret; i++) {
		struct ubt_dref r = { 0 };
		r.delta = delta;
		if (ubt_eb_level(eb) > 0) {
			const struct btrfs_key_ptr *kp = ubt_eb_key_ptr(eb, (int)i);
			r.bytenr = btrfs_key_ptr_blockptr(kp);
			r.num_bytes = t->w->fs->nodesize;
			r.tree = true;
			r.level = (uint8_t)(ubt_eb_level(eb) - 1);
			r.type = full ? BTRFS_SHARED_BLOCK_REF_KEY : BTRFS_TREE_BLOCK_REF_KEY;
		} else {
			struct btrfs_key key;
			ubt_eb_item_key(eb, (int)i, &key);
			if (key.type != BTRFS_EXTENT_DATA_KEY)
				continue;
			const struct btrfs_file_extent_item *fi =
				(const void *)ubt_eb_item_data(eb, (int)i);
			if (ubt_eb_item_size(eb, (int)i) < sizeof(*fi) ||
			    btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_INLINE ||
			    btrfs_file_extent_disk_bytenr(fi) == 0)
				continue;
			r.bytenr = btrfs_file_extent_disk_bytenr(fi);
			r.num_bytes = btrfs_file_extent_disk_num_bytes(fi);
			r.type = full ? BTRFS_SHARED_DATA_REF_KEY : BTRFS_EXTENT_DATA_REF_KEY;
			r.owner = key.objectid;
			r.offset = key.offset - btrfs_file_extent_offset(fi);
		}
		r.root = root;
		r.parent = full ? eb->start : 0;
		if (!full)
			r.parent = 0;
		ret = ubt_dref_queue(t, &r);
	}
	return ret;
}

/*
 * The reference bookkeeping of copying `eb` (in tree `root`) to `neb`, for
 * trees whose blocks snapshots may share.  With several references, the
 * first copy by its owner turns eb's references on its children into
 * shared (parent) ones and marks eb FULL_BACKREF; a copy by anyone else
 * gives the copy implicit references of its own.  With eb's last
 * reference, a FULL_BACKREF eb hands its children over: the copy takes
 * implicit references and eb's shared ones go.  The caller then drops eb's
 * reference from this tree.
 */
static int update_refs_for_cow(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_eb *eb,
			       struct ubt_eb *neb)
{
	uint64_t refs, flags;
	int ret = ubt_extent_info(t, eb->start, &refs, &flags);

	if (ret)
		return ret;
	uint64_t owner = ubt_eb_owner(eb);
	if (refs > 1) {
		if (owner == root->objectid && !(flags & BTRFS_BLOCK_FLAG_FULL_BACKREF)) {
			ret = mod_refs(t, eb, 0, true, +1);
			if (!ret) {
				struct ubt_dref f = { 0 };
				f.bytenr = eb->start;
				f.num_bytes = t->w->fs->nodesize;
				f.tree = true;
				f.level = ubt_eb_level(eb);
				f.set_flags = BTRFS_BLOCK_FLAG_FULL_BACKREF;
				ret = ubt_dref_queue(t, &f);
			}
		} else {
			ret = mod_refs(t, neb, root->objectid, false, +1);
		}
	} else if (flags & BTRFS_BLOCK_FLAG_FULL_BACKREF) {
		ret = mod_refs(t, neb, root->objectid, false, +1);
		if (!ret)
			ret = mod_refs(t, eb, 0, true, -1);
	}
	return ret;
}

/*
 * Copy `eb` (child `pslot` of the dirty node `parent`, or the root when
 * parent is NULL) unless this transaction made it.  *out gets the block to
 * change (a new reference; the caller's reference to eb is dropped).
 */
static int cow_block(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_eb *eb,
		     struct ubt_eb *parent, int pslot, struct ubt_eb **out)
{
	struct ubt_fs *fs = t->w->fs;
	int level = ubt_eb_level(eb);
	struct ubt_eb *neb;
	int ret;

	if (ubt_eb_generation(eb) == t->transid) {
		*out = eb;
		return 0;
	}
	if (ubt_eb_generation(eb) > t->transid)
		return UBT_CORRUPT(eb->start, "tree block from the future (generation %llu)",
				   (unsigned long long)ubt_eb_generation(eb));
	if (btrfs_header_backref_rev(ubt_eb_header(eb)) != BTRFS_MIXED_BACKREF_REV ||
	    (btrfs_header_flags(ubt_eb_header(eb)) & BTRFS_HEADER_FLAG_RELOC)) {
		ubt_log(UBT_LOG_ERROR,
			"tree block %llu of tree %llu uses old-style or relocation back "
			"references; writing it is not supported",
			(unsigned long long)eb->start, (unsigned long long)root->objectid);
		return -EOPNOTSUPP;
	}
	if (!is_fs_tree(root->objectid) && ubt_eb_owner(eb) != root->objectid)
		return UBT_CORRUPT(eb->start, "tree block owner %llu in tree %llu",
				   (unsigned long long)ubt_eb_owner(eb),
				   (unsigned long long)root->objectid);
	ret = new_block(t, root, eb, NULL, level, &neb);
	if (ret)
		return ret;
	if (is_fs_tree(root->objectid))
		ret = update_refs_for_cow(t, root, eb, neb);
	if (!ret)
		ret = free_block(t, root, eb);
	if (ret) {
		ubt_eb_put(&fs->tree, neb);
		return ret;
	}
	if (parent) {
		ret = ubt_node_set_ptr(parent->data, fs->nodesize, pslot, neb->start, t->transid);
		if (ret) {
			ubt_eb_put(&fs->tree, neb);
			return ret;
		}
	} else {
		root->ref.bytenr = neb->start;
		root->ref.generation = t->transid;
		root->ref.level = (uint8_t)level;
		root->dirty = true;
		ubt_wroot_publish(t, root);
	}
	ubt_eb_put(&fs->tree, eb);
	*out = neb;
	return 0;
}

int ubt_tree_new_root(struct ubt_trans *t, uint64_t new_id, const struct ubt_wroot *like,
		      uint64_t *bytenr)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_wroot dst = { .objectid = new_id };
	struct ubt_eb *tmpl, *neb;

	if (new_id < BTRFS_FIRST_FREE_OBJECTID || new_id > BTRFS_LAST_FREE_OBJECTID)
		return -EINVAL;
	int ret = ubt_read_root(&fs->tree, &like->ref, &tmpl);
	if (ret)
		return ret;
	ret = new_block(t, &dst, NULL, tmpl, 0, &neb);
	ubt_eb_put(&fs->tree, tmpl);
	if (ret)
		return abort_with(t, ret);
	*bytenr = neb->start;
	ubt_eb_put(&fs->tree, neb);
	return 0;
}

int ubt_tree_snapshot_check(struct ubt_trans *t, struct ubt_wroot *src)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_eb *eb;

	if (!is_fs_tree(src->objectid) || src->objectid == BTRFS_TREE_RELOC_OBJECTID)
		return -EINVAL;
	/* Blocks of this transaction are changed in place: none of src may
	 * be one when the snapshot starts sharing them. */
	if (src->ref.generation >= t->transid)
		return -EAGAIN;
	int ret = ubt_read_root(&fs->tree, &src->ref, &eb);
	if (ret)
		return ret;
	/* What cow_block would refuse, refused before anything changes. */
	if (btrfs_header_backref_rev(ubt_eb_header(eb)) != BTRFS_MIXED_BACKREF_REV ||
	    (btrfs_header_flags(ubt_eb_header(eb)) & BTRFS_HEADER_FLAG_RELOC)) {
		ubt_log(UBT_LOG_ERROR, "the root of tree %llu uses old-style or relocation back "
			"references; snapshotting it is not supported",
			(unsigned long long)src->objectid);
		ret = -EOPNOTSUPP;
	}
	ubt_eb_put(&fs->tree, eb);
	return ret;
}

int ubt_tree_snapshot_root(struct ubt_trans *t, struct ubt_wroot *src, uint64_t new_id,
			   uint64_t *bytenr, uint8_t *level)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_wroot dst = { .objectid = new_id };
	struct ubt_eb *eb, *neb;
	int ret;

	if (new_id < BTRFS_FIRST_FREE_OBJECTID || new_id > BTRFS_LAST_FREE_OBJECTID)
		return -EINVAL;
	ret = ubt_tree_snapshot_check(t, src);
	if (ret)
		return ret;
	ret = ubt_read_root(&fs->tree, &src->ref, &eb);
	if (ret)
		return ret;
	/* The source's root, copied for this transaction (its children's
	 * references handed over as for any copy), then copied again for
	 * the new tree. */
	ret = cow_block(t, src, eb, NULL, 0, &eb);
	if (ret) {
		ubt_eb_put(&fs->tree, eb);
		return abort_with(t, ret);
	}
	ret = new_block(t, &dst, eb, NULL, ubt_eb_level(eb), &neb);
	ubt_eb_put(&fs->tree, eb);
	if (ret)
		return abort_with(t, ret);
	ret = mod_refs(t, neb, new_id, false, +1);
	*bytenr = neb->start;
	*level = (uint8_t)ubt_eb_level(neb);
	ubt_eb_put(&fs->tree, neb);
	return abort_with(t, ret);
}

/* Set the key of the block at `level` in its parents, up while it is the
 * first child (slot 0). */
static int fixup_low_keys(struct ubt_trans *t, struct ubt_path *path, int level,
			  const struct btrfs_key *key)
{
	for (int i = level; i < BTRFS_MAX_LEVEL && path->nodes[i]; i++) {
		int ret = ubt_node_set_key(path->nodes[i]->data, nodesize_of(t), path->slots[i], key);
		if (ret)
			return ret;
		if (path->slots[i] != 0)
			break;
	}
	return 0;
}

/* Put a new root node above the current root (path->nodes[level]). */
static int grow_root(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path,
		     int level)
{
	struct ubt_eb *old = path->nodes[level], *nr;
	struct btrfs_key key;
	int ret;

	if (level + 1 >= BTRFS_MAX_LEVEL)
		return -EOVERFLOW;
	ret = new_block(t, root, NULL, old, level + 1, &nr);
	if (ret)
		return ret;
	first_key(old, &key);
	ret = ubt_node_insert_ptr(nr->data, nodesize_of(t), 0, &key, old->start,
				  ubt_eb_generation(old));
	if (ret) {
		ubt_eb_put(&t->w->fs->tree, nr);
		return ret;
	}
	path->nodes[level + 1] = nr;
	path->slots[level + 1] = 0;
	root->ref.bytenr = nr->start;
	root->ref.generation = t->transid;
	root->ref.level = (uint8_t)(level + 1);
	root->dirty = true;
	ubt_wroot_publish(t, root);
	return 0;
}

/* Split the node at `level` in half (its parent has room: see header). */
static int split_node(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path,
		      int level)
{
	struct ubt_eb *node = path->nodes[level], *right;
	uint32_t ns = nodesize_of(t);
	struct btrfs_key key;
	int ret;

	if (!path->nodes[level + 1]) {
		ret = grow_root(t, root, path, level);
		if (ret)
			return ret;
	}
	ret = new_block(t, root, NULL, node, level, &right);
	if (ret)
		return ret;
	ret = ubt_node_split(node->data, right->data, ns, (int)ubt_eb_nritems(node) / 2);
	if (!ret) {
		first_key(right, &key);
		ret = ubt_node_insert_ptr(path->nodes[level + 1]->data, ns, path->slots[level + 1] + 1,
					  &key, right->start, t->transid);
	}
	ubt_eb_put(&t->w->fs->tree, right);
	return ret;
}

/* The path ends in the tree's last leaf (every slot on it is the last). */
static bool rightmost_leaf(const struct ubt_path *path)
{
	for (int i = 1; i < BTRFS_MAX_LEVEL && path->nodes[i]; i++)
		if (path->slots[i] + 1 != (int)ubt_eb_nritems(path->nodes[i]))
			return false;
	return true;
}

/*
 * Where to split a leaf whose item `slot` must grow by `add` bytes: the cut
 * c (items [0, c) stay, [c, n) move right; 0 < c < n) after which both
 * leaves fit, the grown item included, with their used bytes most even.
 * Else (the item with its growth fits only alone) c = slot + 1 if items
 * follow it, then slot: two splits isolate it.
 */
static int grow_split_point(const struct ubt_eb *leaf, uint32_t ns, int slot, uint32_t add)
{
	int n = (int)ubt_eb_nritems(leaf);
	int total = ubt_leaf_space_used(leaf->data, ns, 0, n);
	uint64_t cap = btrfs_leaf_data_size(ns), best = UINT64_MAX;
	int cut = -1;

	if (total < 0)
		return total;
	for (int c = 1; c < n; c++) {
		int l = ubt_leaf_space_used(leaf->data, ns, 0, c);
		if (l < 0)
			return l;
		uint64_t left = (uint64_t)l + (slot < c ? add : 0);
		uint64_t right = (uint64_t)(total - l) + (slot >= c ? add : 0);
		if (left > cap || right > cap)
			continue;
		if (UBT_MAX(left, right) < best) {
			best = UBT_MAX(left, right);
			cut = c;
		}
	}
	if (cut < 0)
		cut = slot + 1 < n ? slot + 1 : slot;
	return cut;
}

/*
 * Before a split: make `want` free bytes in the leaf at the path (a new
 * item's bytes with its header, or an existing item's growth) by moving
 * items into a neighbour under the same parent that has room, as the
 * kernel does: leaves stay full where a split would leave two half empty.
 * The insertion point (a new item's slot) or the growing item stays in
 * this leaf, which keeps at least one item, and the parent's key for the
 * leaf on the path keeps at or below the search key.  A neighbour is only
 * copied on write when it takes the items.  1: room made (search again);
 * 0: no neighbour can take enough.
 */
static int push_for_room(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path,
			 uint32_t want, bool existing)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ns = fs->nodesize;
	struct ubt_eb *leaf = path->nodes[0], *parent = path->nodes[1], *sib;
	int slot = path->slots[0], n = (int)ubt_eb_nritems(leaf);
	int free_space = ubt_leaf_free_space(leaf->data, ns);
	struct btrfs_key key;
	int ret, k, sfree;

	if (!parent || free_space < 0 || n < 2)
		return free_space < 0 ? free_space : 0;
	int pslot = path->slots[1];
	int pn = (int)ubt_eb_nritems(parent);
	uint32_t short_by = want - (uint32_t)free_space;

	/* Left: the first k items; a new item's key must stay above the
	 * leaf's new first key (k < slot), a growing item stays (k <= slot). */
	int max_left = UBT_MIN(existing ? slot : slot - 1, n - 1);
	if (pslot > 0 && max_left > 0) {
		ret = ubt_read_child(&fs->tree, parent, pslot - 1, root->objectid, &sib);
		if (ret)
			return ret;
		sfree = ubt_leaf_free_space(sib->data, ns);
		k = sfree > 0 ? ubt_leaf_push_left_max(leaf->data, ns, (uint32_t)sfree, max_left) : 0;
		int moved = k > 0 ? ubt_leaf_space_used(leaf->data, ns, 0, k) : 0;
		if (k < 0 || moved < 0) {
			ubt_eb_put(&fs->tree, sib);
			return k < 0 ? k : moved;
		}
		if (k > 0 && (uint32_t)moved >= short_by) {
			ret = cow_block(t, root, sib, parent, pslot - 1, &sib);
			if (ret) {
				ubt_eb_put(&fs->tree, sib);
				return ret;
			}
			ret = ubt_leaf_push_left(sib->data, leaf->data, ns, k);
			if (!ret) {
				first_key(leaf, &key);
				ret = fixup_low_keys(t, path, 1, &key);
			}
			ubt_eb_put(&fs->tree, sib);
			return ret ? ret : 1;
		}
		ubt_eb_put(&fs->tree, sib);
	}
	/* Right: the last k items, those after the insertion point (or
	 * after the growing item). */
	int max_right = UBT_MIN(n - slot - (existing ? 1 : 0), n - 1);
	if (pslot + 1 < pn && max_right > 0) {
		ret = ubt_read_child(&fs->tree, parent, pslot + 1, root->objectid, &sib);
		if (ret)
			return ret;
		sfree = ubt_leaf_free_space(sib->data, ns);
		k = sfree > 0 ? ubt_leaf_push_right_max(leaf->data, ns, (uint32_t)sfree, max_right) : 0;
		int moved = k > 0 ? ubt_leaf_space_used(leaf->data, ns, n - k, k) : 0;
		if (k < 0 || moved < 0) {
			ubt_eb_put(&fs->tree, sib);
			return k < 0 ? k : moved;
		}
		if (k > 0 && (uint32_t)moved >= short_by) {
			ret = cow_block(t, root, sib, parent, pslot + 1, &sib);
			if (ret) {
				ubt_eb_put(&fs->tree, sib);
				return ret;
			}
			ret = ubt_leaf_push_right(leaf->data, sib->data, ns, k);
			if (!ret) {
				first_key(sib, &key);
				ret = ubt_node_set_key(parent->data, ns, pslot + 1, &key);
			}
			ubt_eb_put(&fs->tree, sib);
			return ret ? ret : 1;
		}
		ubt_eb_put(&fs->tree, sib);
	}
	return 0;
}

/*
 * Split the leaf so that an item of data_size bytes fits at slots[0] (a
 * new item; with `existing`, the item at slots[0] grows by data_size).
 * The caller searches again afterwards.
 */
static int split_leaf(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path,
		      const struct btrfs_key *ins_key, uint32_t data_size, bool existing)
{
	struct ubt_eb *leaf = path->nodes[0], *right;
	uint32_t ns = nodesize_of(t);
	int slot = path->slots[0], nritems = (int)ubt_eb_nritems(leaf);
	int split;
	int ret;

	if (existing) {
		int used = ubt_leaf_space_used(leaf->data, ns, slot, 1);
		if (used < 0)
			return used;
		if ((uint32_t)used + data_size > btrfs_leaf_data_size(ns) || nritems < 2)
			return -E2BIG;
		if (slot == nritems - 1 && rightmost_leaf(path)) {
			/* The tree's last item grows (an append): it alone
			 * moves on, the full leaf stays full. */
			split = slot;
		} else {
			ret = grow_split_point(leaf, ns, slot, data_size);
			if (ret < 0)
				return ret;
			split = ret;
		}
	} else {
		struct ubt_leaf_split_plan plan;
		if (nritems == 0)
			return -E2BIG;	/* an empty leaf too small: cannot happen */
		if (slot == nritems && rightmost_leaf(path)) {
			/* Appending at the end of the tree (new inodes, new
			 * extents): keep this leaf full, start a new one. */
			split = nritems;
		} else {
			ret = ubt_leaf_split_plan(leaf->data, ns, slot, data_size, &plan);
			if (ret)
				return ret;
			split = plan.split;
		}
	}
	if (!path->nodes[1]) {
		ret = grow_root(t, root, path, 0);
		if (ret)
			return ret;
	}
	ret = new_block(t, root, NULL, leaf, 0, &right);
	if (ret)
		return ret;
	ret = ubt_leaf_split(leaf->data, right->data, ns, split);
	if (ret)
		goto out;
	/* Everything moved right: the left leaf now takes the new item, so
	 * its key in the parent becomes the new key first (the right leaf's
	 * pointer gets the old one, which must not be there twice). */
	if (ubt_eb_nritems(leaf) == 0) {
		ret = fixup_low_keys(t, path, 1, ins_key);
		if (ret)
			goto out;
	}
	struct btrfs_key rkey;
	if (ubt_eb_nritems(right))
		first_key(right, &rkey);
	else
		rkey = *ins_key;	/* empty: it is about to receive ins_key */
	ret = ubt_node_insert_ptr(path->nodes[1]->data, ns, path->slots[1] + 1, &rkey, right->start,
				  t->transid);
out:
	ubt_eb_put(&t->w->fs->tree, right);
	return ret;
}

/* Delete pointer `slot` of the node at `level`. */
static int del_ptr(struct ubt_trans *t, struct ubt_path *path, int level, int slot)
{
	struct ubt_eb *node = path->nodes[level];
	int ret = ubt_node_delete_ptrs(node->data, nodesize_of(t), slot, 1);

	if (ret)
		return ret;
	if (slot == 0 && ubt_eb_nritems(node) > 0 && path->nodes[level + 1]) {
		struct btrfs_key key;
		first_key(node, &key);
		ret = fixup_low_keys(t, path, level + 1, &key);
	}
	return ret;
}

/* Read child `slot` of the dirty node `parent` and make it writable. */
static int cow_child(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_eb *parent, int slot,
		     struct ubt_eb **out)
{
	struct ubt_eb *eb;
	int ret = ubt_read_child(&t->w->fs->tree, parent, slot, root->objectid, &eb);

	if (ret)
		return ret;
	ret = cow_block(t, root, eb, parent, slot, out);
	if (ret)
		ubt_eb_put(&t->w->fs->tree, eb);
	return ret;
}

/*
 * A node with few pointers on a deletion path: merge it into a neighbour
 * (or the neighbour into it), else even them out.  1 if anything changed.
 */
static int balance_node(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path,
			int level)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ns = fs->nodesize;
	struct ubt_eb *node = path->nodes[level], *parent = path->nodes[level + 1], *sib;
	int pslot = path->slots[level + 1];
	int n = (int)ubt_eb_nritems(node);
	struct btrfs_key key;
	int ret, shift = 0;
	bool moved = false;

	if (pslot > 0) {
		ret = cow_child(t, root, parent, pslot - 1, &sib);
		if (ret)
			return ret;
		if (ubt_node_free_slots(sib->data, ns) >= n) {
			ret = ubt_node_push_left(sib->data, node->data, ns, n);
			if (!ret)
				ret = del_ptr(t, path, level + 1, pslot);
			if (!ret)
				ret = free_block(t, root, node);
			moved = true;
		} else {
			ret = ubt_node_balance_shift(sib->data, node->data, ns, &shift);
			if (!ret && shift < 0)
				ret = ubt_node_push_right(sib->data, node->data, ns, -shift);
			if (!ret && shift < 0) {
				first_key(node, &key);
				ret = ubt_node_set_key(parent->data, ns, pslot, &key);
				moved = true;
			}
		}
		ubt_eb_put(&fs->tree, sib);
		if (ret || moved)
			return ret ? ret : 1;
	}
	if (pslot + 1 < (int)ubt_eb_nritems(parent)) {
		ret = cow_child(t, root, parent, pslot + 1, &sib);
		if (ret)
			return ret;
		int rn = (int)ubt_eb_nritems(sib);
		if (ubt_node_free_slots(node->data, ns) >= rn) {
			ret = ubt_node_push_left(node->data, sib->data, ns, rn);
			if (!ret)
				ret = del_ptr(t, path, level + 1, pslot + 1);
			if (!ret)
				ret = free_block(t, root, sib);
			moved = true;
		} else {
			ret = ubt_node_balance_shift(node->data, sib->data, ns, &shift);
			if (!ret && shift > 0)
				ret = ubt_node_push_left(node->data, sib->data, ns, shift);
			if (!ret && shift > 0) {
				first_key(sib, &key);
				ret = ubt_node_set_key(parent->data, ns, pslot + 1, &key);
				moved = true;
			}
		}
		ubt_eb_put(&fs->tree, sib);
		if (ret || moved)
			return ret ? ret : 1;
	}
	return 0;
}

/* The root node has one child: the child becomes the root. */
static int shrink_root(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path,
		       int level)
{
	struct ubt_eb *top = path->nodes[level], *child;
	int ret = cow_child(t, root, top, 0, &child);

	if (ret)
		return ret;
	root->ref.bytenr = child->start;
	root->ref.generation = t->transid;
	root->ref.level = (uint8_t)(level - 1);
	root->dirty = true;
	ubt_wroot_publish(t, root);
	ret = free_block(t, root, top);
	ubt_eb_put(&t->w->fs->tree, child);
	return ret;
}

/*
 * The search itself.  `grow`: bytes an existing item at the found slot must
 * be able to grow by (ubt_extend_item), instead of a new item's ins_len.
 */
static int search_w(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key,
		    struct ubt_path *path, int ins_len, bool grow)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ns = fs->nodesize;
	int max_ptrs = (int)btrfs_node_ptrs_per_block(ns);
	int ret, restarts = 0;

	if (t->w->aborted)
		return -EROFS;
	/* Space first: nothing is changed when it is missing. */
	ret = ubt_reserve_metadata(t, ins_len < 0);
	if (ret)
		return ret;
again:
	if (++restarts > 4 * BTRFS_MAX_LEVEL + 8)
		return UBT_CORRUPT(root->ref.bytenr, "tree %llu: search for write does not settle",
				   (unsigned long long)root->objectid);
	ubt_path_release(&fs->tree, path);
	struct ubt_eb *eb;
	ret = ubt_read_root(&fs->tree, &root->ref, &eb);
	if (ret)
		return ret;
	ret = cow_block(t, root, eb, NULL, 0, &eb);
	if (ret) {
		ubt_eb_put(&fs->tree, eb);
		return ret;
	}
	int top = ubt_eb_level(eb);
	path->nodes[top] = eb;
	if (ins_len < 0 && top > 0 && ubt_eb_nritems(eb) == 1) {
		ret = shrink_root(t, root, path, top);
		if (ret)
			goto fail;
		goto again;
	}
	for (int level = top;; level--) {
		eb = path->nodes[level];
		int slot;
		ret = ubt_bin_search(eb, key, &slot);
		if (level == 0) {
			path->slots[0] = slot;
			if (ins_len > 0) {
				int free_space = ubt_leaf_free_space(eb->data, ns);
				if (free_space < 0) {
					ret = free_space;
					goto fail;
				}
				bool existing = grow && ret == 0;
				bool need = grow ? existing : ret == 1;
				if (need && free_space < ins_len) {
					uint32_t want = existing ? (uint32_t)ins_len
								 : (uint32_t)ins_len - sizeof(struct btrfs_item);
					/* An append at the tree's end goes into a
					 * new leaf (split_leaf), never pushes the
					 * full leaf's items left: they would only
					 * come back with the next insertion there. */
					int last = (int)ubt_eb_nritems(eb) - (existing ? 1 : 0);
					int r2 = 0;
					if (slot != last || !rightmost_leaf(path))
						r2 = push_for_room(t, root, path, (uint32_t)ins_len,
								   existing);
					if (r2 > 0)
						goto again;
					if (r2 == 0)
						r2 = split_leaf(t, root, path, key, want, existing);
					if (r2) {
						ret = r2;
						goto fail;
					}
					goto again;
				}
			}
			return ret;
		}
		if (ret == 1 && slot > 0)
			slot--;
		path->slots[level] = slot;
		if (ins_len > 0 && max_ptrs - (int)ubt_eb_nritems(eb) < 3) {
			ret = split_node(t, root, path, level);
			if (ret)
				goto fail;
			goto again;
		}
		if (ins_len < 0 && level < top && (int)ubt_eb_nritems(eb) < max_ptrs / 4) {
			ret = balance_node(t, root, path, level);
			if (ret < 0)
				goto fail;
			if (ret > 0)
				goto again;
		}
		struct ubt_eb *child;
		ret = cow_child(t, root, eb, slot, &child);
		if (ret)
			goto fail;
		path->nodes[level - 1] = child;
	}
fail:
	ubt_path_release(&fs->tree, path);
	return abort_with(t, ret);
}

int ubt_search_slot_w(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key,
		      struct ubt_path *path, int ins_len)
{
	return search_w(t, root, key, path, ins_len, false);
}

/*
 * The lowest key after path->nodes[0] (the first key of the next leaf: the
 * separator where the way to it turns, ubt_path_next_level): false when
 * the leaf is the last one.
 */
static bool next_leaf_key(const struct ubt_path *path, struct btrfs_key *key)
{
	int level = ubt_path_next_level(path);

	if (!level)
		return false;
	ubt_eb_node_key(path->nodes[level], path->slots[level] + 1, key);
	return true;
}

int ubt_insert_items(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *keys,
		     const uint32_t *sizes, int n, uint8_t **data)
{
	struct ubt_path path;
	uint32_t ns = nodesize_of(t);
	uint64_t total = 0;
	int ret;

	if (n < 1)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		total += sizes[i] + sizeof(struct btrfs_item);
		if (i > 0 && btrfs_comp_keys(&keys[i - 1], &keys[i]) >= 0)
			return -EINVAL;
	}
	if (total > btrfs_leaf_data_size(ns))
		return -E2BIG;
	ubt_path_init(&path);
	/* Room for all of them at the slot of the first key. */
	ret = search_w(t, root, &keys[0], &path, (int)total, false);
	if (ret == 0)
		ret = -EEXIST;
	if (ret == 1) {
		struct ubt_eb *leaf = path.nodes[0];
		int slot = path.slots[0];
		struct btrfs_key next;
		bool has_next = slot < (int)ubt_eb_nritems(leaf);
		/* keys[0] is not there and slot is where it goes; the item
		 * after it (in this leaf or the next) must be above keys[n - 1]. */
		if (has_next)
			ubt_eb_item_key(leaf, slot, &next);
		else
			has_next = next_leaf_key(&path, &next);
		if (has_next && btrfs_comp_keys(&keys[n - 1], &next) >= 0) {
			/* Not a taken first key but an item among the new ones:
			 * the tree is not what the caller knows (and the search
			 * may have split the leaf for the room). */
			ret = abort_with(t, UBT_CORRUPT(leaf->start,
							"item (%llu %u %llu) lies among the keys of an insert",
							(unsigned long long)next.objectid, next.type,
							(unsigned long long)next.offset));
		} else {
			ret = ubt_leaf_insert_items(leaf->data, ns, slot, keys, sizes, n);
			if (!ret && slot == 0 && path.nodes[1])
				ret = fixup_low_keys(t, &path, 1, &keys[0]);
			for (int i = 0; !ret && data && i < n; i++)
				data[i] = ubt_eb_witem_data(leaf, slot + i);
			if (ret)
				abort_with(t, ret);
		}
	}
	ubt_path_release(&t->w->fs->tree, &path);
	return ret;
}

int ubt_insert_item(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key,
		    uint32_t size, uint8_t **data)
{
	return ubt_insert_items(t, root, key, &size, 1, data);
}

/* A leaf less than a third full: merge it into a neighbour or a neighbour
 * into it.  The path stays valid only for what the caller needs: nothing. */
static int merge_leaf(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ns = fs->nodesize;
	struct ubt_eb *leaf = path->nodes[0], *parent = path->nodes[1], *sib;
	int pslot = path->slots[1];
	int n = (int)ubt_eb_nritems(leaf);
	int used = ubt_leaf_space_used(leaf->data, ns, 0, n);
	int ret;

	if (used < 0)
		return used;
	if (pslot > 0) {
		/* Copied on write only when it takes the items. */
		ret = ubt_read_child(&fs->tree, parent, pslot - 1, root->objectid, &sib);
		if (ret)
			return ret;
		if (ubt_leaf_free_space(sib->data, ns) >= used) {
			ret = cow_block(t, root, sib, parent, pslot - 1, &sib);
			if (ret) {
				ubt_eb_put(&fs->tree, sib);
				return ret;
			}
			ret = ubt_leaf_push_left(sib->data, leaf->data, ns, n);
			if (!ret)
				ret = del_ptr(t, path, 1, pslot);
			if (!ret)
				ret = free_block(t, root, leaf);
			ubt_eb_put(&fs->tree, sib);
			return ret;
		}
		ubt_eb_put(&fs->tree, sib);
	}
	if (pslot + 1 < (int)ubt_eb_nritems(parent)) {
		ret = ubt_read_child(&fs->tree, parent, pslot + 1, root->objectid, &sib);
		if (ret)
			return ret;
		int rn = (int)ubt_eb_nritems(sib);
		int rused = ubt_leaf_space_used(sib->data, ns, 0, rn);
		if (rused >= 0 && ubt_leaf_free_space(leaf->data, ns) >= rused) {
			ret = cow_block(t, root, sib, parent, pslot + 1, &sib);
			if (ret) {
				ubt_eb_put(&fs->tree, sib);
				return ret;
			}
			ret = ubt_leaf_push_left(leaf->data, sib->data, ns, rn);
			if (!ret)
				ret = del_ptr(t, path, 1, pslot + 1);
			if (!ret)
				ret = free_block(t, root, sib);
		} else {
			ret = rused < 0 ? rused : 0;
		}
		ubt_eb_put(&fs->tree, sib);
		return ret;
	}
	return 0;
}

int ubt_del_items(struct ubt_trans *t, struct ubt_wroot *root, struct ubt_path *path, int n)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ns = fs->nodesize;
	struct ubt_eb *leaf = path->nodes[0];
	int slot = path->slots[0];
	int ret;

	ret = ubt_leaf_delete_items(leaf->data, ns, slot, n);
	if (ret)
		goto out;
	if (ubt_eb_nritems(leaf) == 0) {
		if (path->nodes[1]) {
			ret = del_ptr(t, path, 1, path->slots[1]);
			if (!ret)
				ret = free_block(t, root, leaf);
		}
		goto out;
	}
	if (slot == 0 && path->nodes[1]) {
		struct btrfs_key key;
		first_key(leaf, &key);
		ret = fixup_low_keys(t, path, 1, &key);
		if (ret)
			goto out;
	}
	if (path->nodes[1]) {
		int used = ubt_leaf_space_used(leaf->data, ns, 0, (int)ubt_eb_nritems(leaf));
		if (used >= 0 && (uint32_t)used < btrfs_leaf_data_size(ns) / 3)
			ret = merge_leaf(t, root, path);
		else if (used < 0)
			ret = used;
	}
out:
	ubt_path_release(&fs->tree, path);
	return abort_with(t, ret);
}

int ubt_delete_key(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key)
{
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = search_w(t, root, key, &path, -1, false);
	if (ret == 1) {
		ubt_path_release(&t->w->fs->tree, &path);
		return -ENOENT;
	}
	if (ret < 0)
		return ret;
	return ubt_del_items(t, root, &path, 1);
}

int ubt_extend_item(struct ubt_trans *t, struct ubt_path *path, uint32_t add)
{
	int ret = ubt_leaf_extend_item(path->nodes[0]->data, nodesize_of(t), path->slots[0], add);
	return abort_with(t, ret);
}

int ubt_truncate_item(struct ubt_trans *t, struct ubt_path *path, uint32_t new_size,
		      bool from_front)
{
	int ret = ubt_leaf_truncate_item(path->nodes[0]->data, nodesize_of(t), path->slots[0],
					 new_size, from_front);
	return abort_with(t, ret);
}

int ubt_search_slot_grow(struct ubt_trans *t, struct ubt_wroot *root, const struct btrfs_key *key,
			 struct ubt_path *path, uint32_t add)
{
	return search_w(t, root, key, path, (int)add, true);
}
