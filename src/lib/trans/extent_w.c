/*
 * trans layer: extent back references of tree blocks (delayed refs) and
 * block group items.
 *
 * Copying and freeing tree blocks only queue reference changes (+1 for a
 * new block, -1 for a dropped one).  At commit they are summed per block
 * and applied to the extent tree: a new block gets a METADATA_ITEM (skinny
 * metadata; an EXTENT_ITEM with tree_block_info otherwise) with refs 1 and
 * an inline TREE_BLOCK_REF to its tree; a dropped block loses its item and
 * its space is pinned until the commit is on disk; a block made and dropped
 * in the same transaction never reaches the extent tree (its space is
 * pinned all the same, as it may be referenced by nothing but could have
 * been written).  Changing the extent tree copies its blocks, which queues
 * more changes: the run repeats until the queue is empty.
 */
#include "trans/trans.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

int ubt_dref_add(struct ubt_trans *t, uint64_t bytenr, uint64_t root, int delta, uint8_t level,
		 const struct btrfs_key *first_key)
{
	if (t->nrefs == t->refs_cap) {
		size_t cap = t->refs_cap ? t->refs_cap * 2 : 256;
		struct ubt_dref *v = realloc(t->refs, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->refs = v;
		t->refs_cap = cap;
	}
	struct ubt_dref *r = &t->refs[t->nrefs++];
	memset(r, 0, sizeof(*r));
	r->bytenr = bytenr;
	r->root = root;
	r->delta = delta;
	r->level = level;
	if (first_key)
		r->first_key = *first_key;
	return 0;
}

static int cmp_dref(const void *a, const void *b)
{
	const struct ubt_dref *x = a, *y = b;
	if (x->bytenr != y->bytenr)
		return x->bytenr < y->bytenr ? -1 : 1;
	return 0;
}

static bool skinny(const struct ubt_fs *fs)
{
	return btrfs_super_incompat_flags(&fs->vol->super) & BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA;
}

static int insert_tree_block_ref(struct ubt_trans *t, struct ubt_wroot *et, const struct ubt_dref *r)
{
	struct ubt_fs *fs = t->w->fs;
	bool sk = skinny(fs);
	struct btrfs_key key = { r->bytenr, sk ? BTRFS_METADATA_ITEM_KEY : BTRFS_EXTENT_ITEM_KEY,
				 sk ? r->level : fs->nodesize };
	uint32_t size = sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_extent_inline_ref) +
			(sk ? 0 : sizeof(struct btrfs_tree_block_info));
	uint8_t *p;
	int ret = ubt_insert_item(t, et, &key, size, &p);

	if (ret == -EEXIST)
		return UBT_CORRUPT(r->bytenr, "new tree block %llu already has an extent item",
				   (unsigned long long)r->bytenr);
	if (ret)
		return ret;
	struct btrfs_extent_item *ei = (void *)p;
	btrfs_set_extent_refs(ei, 1);
	btrfs_set_extent_generation(ei, t->transid);
	btrfs_set_extent_flags(ei, BTRFS_EXTENT_FLAG_TREE_BLOCK);
	p += sizeof(*ei);
	if (!sk) {
		struct btrfs_tree_block_info *bi = (void *)p;
		struct btrfs_key fk = r->first_key;
		btrfs_cpu_key_to_disk(&bi->key, &fk);
		btrfs_set_tree_block_info_level(bi, r->level);
		p += sizeof(*bi);
	}
	struct btrfs_extent_inline_ref *ir = (void *)p;
	btrfs_set_extent_inline_ref_type(ir, BTRFS_TREE_BLOCK_REF_KEY);
	btrfs_set_extent_inline_ref_offset(ir, r->root);
	return 0;
}

static int drop_tree_block_ref(struct ubt_trans *t, struct ubt_wroot *et, const struct ubt_dref *r)
{
	struct ubt_fs *fs = t->w->fs;
	bool sk = skinny(fs);
	struct btrfs_key key = { r->bytenr, sk ? BTRFS_METADATA_ITEM_KEY : BTRFS_EXTENT_ITEM_KEY,
				 sk ? r->level : fs->nodesize };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot_w(t, et, &key, &path, -1);
	if (ret == 1) {
		ubt_path_release(&fs->tree, &path);
		return UBT_CORRUPT(r->bytenr, "dropped tree block %llu has no extent item",
				   (unsigned long long)r->bytenr);
	}
	if (ret < 0)
		return ret;
	const struct btrfs_extent_item *ei =
		(const void *)ubt_eb_item_data(path.nodes[0], path.slots[0]);
	uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
	uint32_t want = sizeof(*ei) + (sk ? 0 : sizeof(struct btrfs_tree_block_info));
	if (size < want + sizeof(struct btrfs_extent_inline_ref) || btrfs_extent_refs(ei) != 1) {
		ubt_path_release(&fs->tree, &path);
		ubt_log(UBT_LOG_ERROR,
			"tree block %llu has %llu references; dropping shared blocks is not "
			"supported yet", (unsigned long long)r->bytenr,
			(unsigned long long)btrfs_extent_refs(ei));
		return -EOPNOTSUPP;
	}
	const struct btrfs_extent_inline_ref *ir = (const void *)((const uint8_t *)ei + want);
	if (btrfs_extent_inline_ref_type(ir) != BTRFS_TREE_BLOCK_REF_KEY ||
	    btrfs_extent_inline_ref_offset(ir) != r->root) {
		ubt_path_release(&fs->tree, &path);
		ubt_log(UBT_LOG_ERROR,
			"tree block %llu: reference is not a TREE_BLOCK_REF of tree %llu; "
			"shared back references are not supported yet",
			(unsigned long long)r->bytenr, (unsigned long long)r->root);
		return -EOPNOTSUPP;
	}
	return ubt_del_items(t, et, &path, 1);
}

/* The first key of a dirty block, for tree_block_info (non-skinny). */
static void fill_first_key(struct ubt_trans *t, struct ubt_dref *r)
{
	for (size_t i = 0; i < t->ndirty; i++) {
		const struct ubt_eb *eb = t->dirty[i];
		if (eb->start != r->bytenr)
			continue;
		if (ubt_eb_nritems(eb) == 0)
			return;
		if (ubt_eb_level(eb) == 0)
			ubt_eb_item_key(eb, 0, &r->first_key);
		else
			ubt_eb_node_key(eb, 0, &r->first_key);
		return;
	}
}

int ubt_run_drefs(struct ubt_trans *t)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_wroot *et;
	int ret;

	ret = ubt_wroot_get(t, BTRFS_EXTENT_TREE_OBJECTID, &et);
	if (ret)
		return ret;
	for (int round = 0; t->nrefs; round++) {
		if (round > 1000)
			return UBT_CORRUPT(0, "delayed references do not settle");
		struct ubt_dref *batch = t->refs;
		size_t n = t->nrefs;
		t->refs = NULL;
		t->nrefs = t->refs_cap = 0;
		/* Group per block (a block has at most one +1 and one -1). */
		qsort(batch, n, sizeof(*batch), cmp_dref);
		ret = 0;
		for (size_t i = 0; i < n && !ret;) {
			size_t j = i;
			int net = 0;
			const struct ubt_dref *add = NULL, *drop = NULL;
			for (; j < n && batch[j].bytenr == batch[i].bytenr; j++) {
				net += batch[j].delta;
				if (batch[j].delta > 0)
					add = &batch[j];
				else
					drop = &batch[j];
			}
			if (net > 1 || net < -1) {
				ret = UBT_CORRUPT(batch[i].bytenr, "tree block %llu: reference change %d",
						  (unsigned long long)batch[i].bytenr, net);
			} else if (net == 1) {
				struct ubt_dref r = *add;
				if (!skinny(fs))
					fill_first_key(t, &r);
				ret = insert_tree_block_ref(t, et, &r);
			} else if (net == -1) {
				/* Build the group's allocation map before its extent
				 * items change (it is read from the extent tree). */
				struct ubt_bg *bg = ubt_bg_find(t->w, drop->bytenr);
				ret = bg ? ubt_bg_load_extents(t->w, bg)
					 : UBT_CORRUPT(drop->bytenr, "tree block outside every block group");
				if (!ret)
					ret = drop_tree_block_ref(t, et, drop);
				if (!ret)
					ret = ubt_bg_account(t, drop->bytenr, fs->nodesize, false);
			} else if (add && drop) {
				/* Made and dropped in this transaction. */
				ret = ubt_bg_account(t, add->bytenr, fs->nodesize, false);
			}
			i = j;
		}
		free(batch);
		if (ret)
			return ret;
	}
	return 0;
}

int ubt_write_bg_items(struct ubt_trans *t)
{
	struct ubt_wfs *w = t->w;
	struct ubt_fs *fs = w->fs;
	struct ubt_wroot *tree;
	int ret;

	ret = ubt_wroot_get(t, fs->block_group_tree.bytenr ? BTRFS_BLOCK_GROUP_TREE_OBJECTID
							   : BTRFS_EXTENT_TREE_OBJECTID, &tree);
	if (ret)
		return ret;
	for (size_t i = 0; i < w->nbgs; i++) {
		struct ubt_bg *bg = &w->bgs[i];
		struct btrfs_key key = { bg->start, BTRFS_BLOCK_GROUP_ITEM_KEY, bg->len };
		struct ubt_path path;
		if (!bg->item_dirty)
			continue;
		bg->item_dirty = false;
		ubt_path_init(&path);
		ret = ubt_search_slot_w(t, tree, &key, &path, 0);
		if (ret == 0) {
			if (ubt_eb_item_size(path.nodes[0], path.slots[0]) <
			    sizeof(struct btrfs_block_group_item))
				ret = -EUCLEAN;
			else
				btrfs_set_block_group_used(
					(struct btrfs_block_group_item *)
						ubt_eb_witem_data(path.nodes[0], path.slots[0]),
					bg->used);
		} else if (ret == 1) {
			ret = UBT_CORRUPT(bg->start, "block group item vanished");
		}
		ubt_path_release(&fs->tree, &path);
		if (ret)
			return ret;
		/* Writing the item may have changed `used` of this very group
		 * (a copied block): then it is dirty again for the next round. */
	}
	return 0;
}
