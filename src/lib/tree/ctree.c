/*
 * tree layer: read-only B-tree search, stepping and range iteration.
 *
 * A path holds one referenced block per level from the root down to a leaf
 * (nodes[0] is the leaf).  Search follows the key pointers with binary
 * search, reading each child with the generation, level and first key its
 * parent records, so a misdirected or stale block is caught on the way down.
 *
 * Return convention (DESIGN.md): 0 found, 1 not found with slots[0] at the
 * insert position, <0 error.
 */
#include "tree.h"

#include "base/base.h"

#include <string.h>

void ubt_path_init(struct ubt_path *p)
{
	memset(p, 0, sizeof(*p));
}

void ubt_path_release(struct ubt_tree_ctx *t, struct ubt_path *p)
{
	for (int i = 0; i < BTRFS_MAX_LEVEL; i++) {
		ubt_eb_put(t, p->nodes[i]);
		p->nodes[i] = NULL;
		p->slots[i] = 0;
	}
}

/* Binary search in a block: 0 and the slot when found, else 1 and the
 * first slot with a greater key. */
int ubt_bin_search(const struct ubt_eb *eb, const struct btrfs_key *key, int *slot)
{
	int lo = 0, hi = (int)ubt_eb_nritems(eb);
	bool leaf = ubt_eb_level(eb) == 0;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		struct btrfs_key k;
		if (leaf)
			ubt_eb_item_key(eb, mid, &k);
		else
			ubt_eb_node_key(eb, mid, &k);
		int c = btrfs_comp_keys(&k, key);
		if (c < 0) {
			lo = mid + 1;
		} else if (c > 0) {
			hi = mid;
		} else {
			*slot = mid;
			return 0;
		}
	}
	*slot = lo;
	return 1;
}

/*
 * Which owner a tree's blocks must carry.  Subvolume trees share blocks with
 * their snapshots, so a block reached from a snapshot may be owned by any
 * subvolume: only non-subvolume trees get the exact check (as the kernel).
 */
static uint64_t expected_owner(uint64_t tree)
{
	if (tree == BTRFS_FS_TREE_OBJECTID ||
	    (tree >= BTRFS_FIRST_FREE_OBJECTID && tree <= BTRFS_LAST_FREE_OBJECTID) ||
	    tree == BTRFS_TREE_RELOC_OBJECTID || tree == BTRFS_DATA_RELOC_TREE_OBJECTID)
		return 0;
	return tree;
}

int ubt_read_child(struct ubt_tree_ctx *t, const struct ubt_eb *parent, int slot,
		      uint64_t owner, struct ubt_eb **out)
{
	const struct btrfs_key_ptr *kp = ubt_eb_key_ptr(parent, slot);
	struct ubt_block_expect exp = { 0 };

	exp.bytenr = btrfs_key_ptr_blockptr(kp);
	exp.generation = btrfs_key_ptr_generation(kp);
	exp.level = ubt_eb_level(parent) - 1;
	exp.has_first_key = true;
	btrfs_disk_key_to_cpu(&exp.first_key, &kp->key);
	exp.owner = expected_owner(owner);
	return ubt_read_tree_block(t, &exp, out);
}

int ubt_read_root(struct ubt_tree_ctx *t, const struct ubt_root_ref *root, struct ubt_eb **out)
{
	struct ubt_block_expect exp = { 0 };

	exp.bytenr = root->bytenr;
	exp.generation = root->generation;
	exp.level = root->level;
	exp.owner = expected_owner(root->objectid);
	return ubt_read_tree_block(t, &exp, out);
}

int ubt_search_slot(struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		    const struct btrfs_key *key, struct ubt_path *path)
{
	struct ubt_eb *eb;
	int ret, slot = 0;

	ubt_path_release(t, path);
	ret = ubt_read_root(t, root, &eb);
	if (ret)
		return ret;
	for (;;) {
		int level = ubt_eb_level(eb);
		path->nodes[level] = eb;
		ret = ubt_bin_search(eb, key, &slot);
		if (level == 0) {
			path->slots[0] = slot;
			return ret;
		}
		/* In a node, descend into the last pointer whose key <= key. */
		if (ret == 1 && slot > 0)
			slot--;
		path->slots[level] = slot;
		if (ubt_eb_nritems(eb) == 0)
			return UBT_CORRUPT(eb->start, "empty tree node");
		ret = ubt_read_child(t, eb, slot, root->objectid, &eb);
		if (ret) {
			ubt_path_release(t, path);
			return ret;
		}
		if (ubt_eb_level(eb) != level - 1) {
			ubt_eb_put(t, eb);
			ubt_path_release(t, path);
			return -EUCLEAN;
		}
	}
}

/*
 * Move the path to the first item of the next leaf.  0 ok, 1 no more leaves.
 */
int ubt_path_next_level(const struct ubt_path *path)
{
	int level = 1;

	while (level < BTRFS_MAX_LEVEL && path->nodes[level] &&
	       path->slots[level] + 1 >= (int)ubt_eb_nritems(path->nodes[level]))
		level++;
	return level < BTRFS_MAX_LEVEL && path->nodes[level] ? level : 0;
}

static int next_leaf(struct ubt_tree_ctx *t, struct ubt_path *path, uint64_t owner)
{
	int level = ubt_path_next_level(path);

	if (!level)
		return 1;
	path->slots[level]++;
	while (level > 0) {
		struct ubt_eb *child;
		int ret = ubt_read_child(t, path->nodes[level], path->slots[level], owner, &child);
		if (ret)
			return ret;
		level--;
		ubt_eb_put(t, path->nodes[level]);
		path->nodes[level] = child;
		path->slots[level] = 0;
	}
	return 0;
}

static int prev_leaf(struct ubt_tree_ctx *t, struct ubt_path *path, uint64_t owner)
{
	int level = 1;

	while (level < BTRFS_MAX_LEVEL && path->nodes[level] && path->slots[level] == 0)
		level++;
	if (level >= BTRFS_MAX_LEVEL || !path->nodes[level])
		return 1;
	path->slots[level]--;
	while (level > 0) {
		struct ubt_eb *child;
		int ret = ubt_read_child(t, path->nodes[level], path->slots[level], owner, &child);
		if (ret)
			return ret;
		level--;
		ubt_eb_put(t, path->nodes[level]);
		path->nodes[level] = child;
		path->slots[level] = (int)ubt_eb_nritems(child) - 1;
	}
	return 0;
}

int ubt_next_item(struct ubt_tree_ctx *t, struct ubt_path *path)
{
	struct ubt_eb *leaf = path->nodes[0];

	if (!leaf)
		return 1;
	uint64_t owner = ubt_eb_owner(leaf);
	path->slots[0]++;
	while (path->slots[0] >= (int)ubt_eb_nritems(path->nodes[0])) {
		int ret = next_leaf(t, path, owner);
		if (ret)
			return ret;
		/* An empty leaf is only legal as a root; skip defensively. */
	}
	return 0;
}

int ubt_prev_item(struct ubt_tree_ctx *t, struct ubt_path *path)
{
	struct ubt_eb *leaf = path->nodes[0];

	if (!leaf)
		return 1;
	uint64_t owner = ubt_eb_owner(leaf);
	while (path->slots[0] == 0 || ubt_eb_nritems(path->nodes[0]) == 0) {
		int ret = prev_leaf(t, path, owner);
		if (ret)
			return ret;
		if (ubt_eb_nritems(path->nodes[0]) > 0) {
			path->slots[0] = (int)ubt_eb_nritems(path->nodes[0]);
			break;
		}
	}
	path->slots[0]--;
	return 0;
}

int ubt_search_le(struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		  const struct btrfs_key *key, struct ubt_path *path)
{
	int ret = ubt_search_slot(t, root, key, path);

	if (ret <= 0)
		return ret;
	ret = ubt_prev_item(t, path);
	return ret;
}

void ubt_iter_start(struct ubt_iter *it, struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		    const struct btrfs_key *min, const struct btrfs_key *max)
{
	memset(it, 0, sizeof(*it));
	it->t = t;
	it->root = *root;
	it->min = *min;
	it->max = *max;
	ubt_path_init(&it->path);
}

int ubt_iter_next(struct ubt_iter *it)
{
	int ret;

	if (it->done)
		return 1;
	if (!it->started) {
		it->started = true;
		ret = ubt_search_slot(it->t, &it->root, &it->min, &it->path);
		if (ret < 0)
			goto fail;
		if (ret == 1 && it->path.slots[0] >= (int)ubt_eb_nritems(it->path.nodes[0])) {
			/* Positioned past the leaf end: step to the next leaf. */
			it->path.slots[0]--;
			ret = ubt_next_item(it->t, &it->path);
			if (ret)
				goto end_or_fail;
		}
	} else {
		ret = ubt_next_item(it->t, &it->path);
		if (ret)
			goto end_or_fail;
	}
	const struct ubt_eb *leaf = it->path.nodes[0];
	int slot = it->path.slots[0];
	if (slot < 0 || slot >= (int)ubt_eb_nritems(leaf)) {
		ret = 1;
		goto end_or_fail;
	}
	ubt_eb_item_key(leaf, slot, &it->key);
	if (btrfs_comp_keys(&it->key, &it->max) > 0) {
		ret = 1;
		goto end_or_fail;
	}
	it->leaf = leaf;
	it->slot = slot;
	it->data = ubt_eb_item_data(leaf, slot);
	it->size = ubt_eb_item_size(leaf, slot);
	return 0;
end_or_fail:
	if (ret < 0)
		goto fail;
	it->done = true;
	return 1;
fail:
	it->done = true;
	return ret;
}

void ubt_iter_end(struct ubt_iter *it)
{
	if (it->t)
		ubt_path_release(it->t, &it->path);
	it->done = true;
}
