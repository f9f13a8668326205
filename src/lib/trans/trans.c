/*
 * trans layer: writer state, transactions and the commit.
 *
 * Commit, in order:
 *   0. the work held back for it: the writer's pre_commit hook (the
 *      namespace's delayed DIR_INDEX items) and the held checksum run;
 *   1. settle the metadata: apply queued reference changes to the extent
 *      tree, rewrite block group items, the free-space tree and the ROOT_ITEMs
 *      of trees whose root moved, until a round changes nothing (each step
 *      may copy blocks of the trees the others write);
 *   2. write every dirty block (tree checker, checksum, every copy);
 *   3. flush every device;
 *   4. write every superblock copy of every device (new roots, generation,
 *      bytes used, the next backup-root slot), then flush again.
 * Until step 4 reaches a disk, the previous generation is what every
 * superblock points to, and none of its blocks was overwritten (the space
 * freed in this transaction stays pinned until after step 4).
 *
 * The caller may let readers run during steps 2-4 (ubt_trans_commit_write):
 * they change nothing a reader looks at (the checksum written into a dirty
 * block's header is not read back from memory), and the in-memory state a
 * reader sees is already the one being written.  What readers do see
 * change (the superblock copy, the checker's generation, pinned space
 * returning) happens in ubt_trans_commit_finish.
 */
#include "trans/trans.h"

#include "trans/csum_w.h"

#include "base/base.h"
#include "tree/blockops.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

/* ---- writer state ----------------------------------------------------- */

/* The backup slot after the one holding the current generation. */
static int next_backup_index(const struct btrfs_super_block *sb)
{
	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++)
		if (btrfs_root_backup_tree_root_gen(&sb->super_roots[i]) == btrfs_super_generation(sb))
			return (i + 1) % BTRFS_NUM_BACKUP_ROOTS;
	return 0;
}

static bool has_balance_item(struct ubt_fs *fs)
{
	struct btrfs_key key = { BTRFS_BALANCE_OBJECTID, BTRFS_TEMPORARY_ITEM_KEY, 0 };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot(&fs->tree, &fs->root_tree, &key, &path);
	ubt_path_release(&fs->tree, &path);
	return ret != 1;	/* found, or unreadable: do not write */
}

int ubt_wfs_init(struct ubt_fs *fs)
{
	const struct btrfs_super_block *sb = &fs->vol->super;
	uint64_t incompat = btrfs_super_incompat_flags(sb);
	uint64_t compat_ro = btrfs_super_compat_ro_flags(sb);
	struct ubt_wfs *w;
	int ret;

	if (!fs->opts.vol.writable)
		return -EROFS;
	if (incompat & ~ubt_feature_policy_current.incompat_write) {
		ubt_log(UBT_LOG_ERROR, "incompat features 0x%llx cannot be written yet",
			(unsigned long long)(incompat & ~ubt_feature_policy_current.incompat_write));
		return -EROFS;
	}
	if (compat_ro & ~ubt_feature_policy_current.compat_ro_write) {
		ubt_log(UBT_LOG_ERROR, "compat_ro features 0x%llx cannot be written yet",
			(unsigned long long)(compat_ro & ~ubt_feature_policy_current.compat_ro_write));
		return -EROFS;
	}
	if ((compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE) &&
	    !(compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID)) {
		ubt_log(UBT_LOG_ERROR, "the free-space tree is not marked valid; refusing to write");
		return -EROFS;
	}
	if (btrfs_super_log_root(sb)) {
		ubt_log(UBT_LOG_ERROR, "an unreplayed fsync log exists; refusing to write");
		return -EROFS;
	}
	if (fs->quota_tree.bytenr) {
		ubt_log(UBT_LOG_ERROR, "quotas are enabled; keeping qgroup counts is not "
			"supported yet, refusing to write");
		return -EROFS;
	}
	if (has_balance_item(fs)) {
		ubt_log(UBT_LOG_ERROR, "a balance is in progress (paused or interrupted); "
			"finish or cancel it with the kernel first, refusing to write");
		return -EROFS;
	}
	for (size_t i = 0; i < fs->vol->ndevices; i++) {
		if (!fs->vol->devices[i].bd) {
			ubt_log(UBT_LOG_ERROR, "devid %llu is missing; no degraded writes",
				(unsigned long long)fs->vol->devices[i].devid);
			return -EROFS;
		}
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fs = fs;
	w->last_committed = btrfs_super_generation(sb);
	w->backup_index = next_backup_index(sb);
	fs->wr = w;
	ret = ubt_bgs_load(w);
	if (ret) {
		ubt_wfs_destroy(fs);
		return ret;
	}
	return 0;
}

void ubt_wfs_destroy(struct ubt_fs *fs)
{
	struct ubt_wfs *w = fs->wr;

	if (!w)
		return;
	if (w->running)
		ubt_trans_abort(w->running, -ECANCELED);
	ubt_bgs_free(w);
	for (size_t i = 0; i < w->nroots; i++)
		free(w->roots[i]);
	free(w->roots);
	free(w);
	fs->held_csums = NULL;
	fs->wr = NULL;
}

int ubt_trans_start(struct ubt_fs *fs, struct ubt_trans **out)
{
	struct ubt_wfs *w = fs->wr;
	struct ubt_trans *t;

	*out = NULL;
	if (!w)
		return -EROFS;
	if (w->aborted)
		return -EROFS;
	if (w->running)
		return -EBUSY;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->w = w;
	t->transid = w->last_committed + 1;
	struct ubt_root_ref *g[] = { &fs->root_tree, &fs->chunk_tree, &fs->extent_tree,
				     &fs->dev_tree, &fs->csum_tree, &fs->uuid_tree,
				     &fs->free_space_tree, &fs->block_group_tree, &fs->quota_tree };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(g); i++)
		t->saved_global[i] = *g[i];
	pthread_mutex_lock(&fs->subvol_lock);
	t->saved_subvols = calloc(fs->nsubvols + 1, sizeof(*t->saved_subvols));
	if (t->saved_subvols) {
		for (size_t i = 0; i < fs->nsubvols; i++) {
			t->saved_subvols[i].id = fs->subvols[i]->id;
			t->saved_subvols[i].root = fs->subvols[i]->root;
			t->saved_subvols[i].item = fs->subvols[i]->item;
		}
		t->nsaved_subvols = fs->nsubvols;
	}
	pthread_mutex_unlock(&fs->subvol_lock);
	if (!t->saved_subvols) {
		free(t);
		return -ENOMEM;
	}
	w->running = t;
	*out = t;
	return 0;
}

/* ---- roots ---------------------------------------------------------------- */

/* Tell the read side where a tree's root is now (it reads dirty blocks too). */
void ubt_wroot_publish(struct ubt_trans *t, struct ubt_wroot *r)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_root_ref *g = NULL;

	switch (r->objectid) {
	case BTRFS_ROOT_TREE_OBJECTID: g = &fs->root_tree; break;
	case BTRFS_CHUNK_TREE_OBJECTID: g = &fs->chunk_tree; break;
	case BTRFS_EXTENT_TREE_OBJECTID: g = &fs->extent_tree; break;
	case BTRFS_DEV_TREE_OBJECTID: g = &fs->dev_tree; break;
	case BTRFS_CSUM_TREE_OBJECTID: g = &fs->csum_tree; break;
	case BTRFS_UUID_TREE_OBJECTID: g = &fs->uuid_tree; break;
	case BTRFS_FREE_SPACE_TREE_OBJECTID: g = &fs->free_space_tree; break;
	case BTRFS_BLOCK_GROUP_TREE_OBJECTID: g = &fs->block_group_tree; break;
	case BTRFS_QUOTA_TREE_OBJECTID: g = &fs->quota_tree; break;
	default: break;
	}
	if (g) {
		*g = r->ref;
		return;
	}
	pthread_mutex_lock(&fs->subvol_lock);
	for (size_t i = 0; i < fs->nsubvols; i++) {
		if (fs->subvols[i]->id == r->objectid) {
			fs->subvols[i]->root = r->ref;
			fs->subvols[i]->item = r->item;
		}
	}
	pthread_mutex_unlock(&fs->subvol_lock);
}

int ubt_wroot_get(struct ubt_trans *t, uint64_t objectid, struct ubt_wroot **out)
{
	struct ubt_wfs *w = t->w;
	struct ubt_fs *fs = w->fs;
	struct ubt_wroot *r;
	int ret;

	for (size_t i = 0; i < w->nroots; i++) {
		if (w->roots[i]->objectid == objectid) {
			*out = w->roots[i];
			return 0;
		}
	}
	/* A subvolume: make sure the read side caches it first, so that every
	 * root this writer publishes reaches readers (ubt_wroot_publish only
	 * updates cached subvolumes). */
	if (objectid == BTRFS_FS_TREE_OBJECTID ||
	    (objectid >= BTRFS_FIRST_FREE_OBJECTID && objectid <= BTRFS_LAST_FREE_OBJECTID)) {
		const struct ubt_subvol *sv;
		ret = ubt_fs_subvol(fs, objectid, &sv);
		if (ret && ret != -ENOENT)
			return ret;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->objectid = objectid;
	if (objectid == BTRFS_ROOT_TREE_OBJECTID) {
		r->ref = fs->root_tree;
	} else if (objectid == BTRFS_CHUNK_TREE_OBJECTID) {
		r->ref = fs->chunk_tree;
	} else {
		struct ubt_path path;
		struct btrfs_key key = { objectid, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
		ubt_path_init(&path);
		ret = ubt_search_le(&fs->tree, &fs->root_tree, &key, &path);
		if (ret == 0) {
			ubt_eb_item_key(path.nodes[0], path.slots[0], &r->item_key);
			uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
			if (r->item_key.objectid != objectid || r->item_key.type != BTRFS_ROOT_ITEM_KEY)
				ret = -ENOENT;
			else if (size < sizeof(r->item))
				ret = UBT_CORRUPT(path.nodes[0]->start,
						  "root item of tree %llu has an old short layout",
						  (unsigned long long)objectid);
			else
				memcpy(&r->item, ubt_eb_item_data(path.nodes[0], path.slots[0]),
				       sizeof(r->item));
		} else if (ret == 1) {
			ret = -ENOENT;
		}
		ubt_path_release(&fs->tree, &path);
		if (ret) {
			free(r);
			return ret;
		}
		r->has_item = true;
		r->ref = (struct ubt_root_ref){ objectid, btrfs_root_bytenr(&r->item),
						btrfs_root_generation(&r->item),
						btrfs_root_level(&r->item) };
	}
	if (w->nroots == w->roots_cap) {
		size_t cap = w->roots_cap ? w->roots_cap * 2 : 16;
		struct ubt_wroot **v = realloc(w->roots, cap * sizeof(*v));
		if (!v) {
			free(r);
			return -ENOMEM;
		}
		w->roots = v;
		w->roots_cap = cap;
	}
	w->roots[w->nroots++] = r;
	*out = r;
	return 0;
}

/* Rewrite the ROOT_ITEM of every tree whose root moved.  1 if any did. */
static int update_root_items(struct ubt_trans *t)
{
	struct ubt_wfs *w = t->w;
	struct ubt_wroot *rt;
	int ret, changed = 0;

	ret = ubt_wroot_get(t, BTRFS_ROOT_TREE_OBJECTID, &rt);
	if (ret)
		return ret;
	for (size_t i = 0; i < w->nroots; i++) {
		struct ubt_wroot *r = w->roots[i];
		struct ubt_path path;
		if (!r->dirty || !r->has_item)
			continue;
		r->dirty = false;
		btrfs_set_root_bytenr(&r->item, r->ref.bytenr);
		btrfs_set_root_level(&r->item, r->ref.level);
		btrfs_set_root_generation(&r->item, t->transid);
		btrfs_set_root_generation_v2(&r->item, t->transid);
		ubt_path_init(&path);
		ret = ubt_search_slot_w(t, rt, &r->item_key, &path, 0);
		if (ret == 0) {
			if (ubt_eb_item_size(path.nodes[0], path.slots[0]) < sizeof(r->item))
				ret = -EUCLEAN;
			else
				memcpy(ubt_eb_witem_data(path.nodes[0], path.slots[0]), &r->item,
				       sizeof(r->item));
		} else if (ret == 1) {
			ret = UBT_CORRUPT(0, "root item of tree %llu vanished",
					  (unsigned long long)r->objectid);
		}
		ubt_path_release(&w->fs->tree, &path);
		if (ret)
			return ret;
		ubt_wroot_publish(t, r);
		changed = 1;
	}
	return changed;
}

static bool any_bg_dirty(const struct ubt_wfs *w)
{
	for (size_t i = 0; i < w->nbgs; i++)
		if (w->bgs[i].dirty || w->bgs[i].item_dirty)
			return true;
	return false;
}

static bool any_root_item_dirty(const struct ubt_wfs *w)
{
	for (size_t i = 0; i < w->nroots; i++)
		if (w->roots[i]->dirty && w->roots[i]->has_item)
			return true;
	return false;
}

/* Step 1: until nothing changes. */
static int settle(struct ubt_trans *t)
{
	for (int round = 0; round < 64; round++) {
		int ret = ubt_commit_space(t);
		if (ret)
			return ret;
		ret = ubt_run_drefs(t);
		if (ret > 0)
			ret = UBT_CORRUPT(0, "commit: unexpected status %d from the reference run", ret);
		if (!ret)
			ret = ubt_write_bg_items(t);
		if (!ret)
			ret = ubt_fst_update(t);
		if (ret >= 0)
			ret = update_root_items(t);
		if (ret < 0)
			return ret;
		if (t->nrefs == 0 && !any_bg_dirty(t->w) && !any_root_item_dirty(t->w))
			return 0;
	}
	ubt_log(UBT_LOG_ERROR, "commit %llu: metadata did not settle",
		(unsigned long long)t->transid);
	return -EUCLEAN;
}

static int cmp_eb(const void *a, const void *b)
{
	const struct ubt_eb *x = *(const struct ubt_eb *const *)a;
	const struct ubt_eb *y = *(const struct ubt_eb *const *)b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Steps 2 and 3. */
static int write_dirty(struct ubt_trans *t)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_check_ctx chk = fs->tree.check;
	int ret;

	chk.super_generation = t->w->last_committed;
	chk.read_only = false;
	ubt_sort(t->dirty, t->ndirty, sizeof(*t->dirty), cmp_eb);
	for (size_t i = 0; i < t->ndirty; i++) {
		struct ubt_eb *eb = t->dirty[i];
		ret = ubt_block_finish(&chk, eb->data);
		if (ret) {
			ubt_log(UBT_LOG_ERROR, "commit %llu: block %llu fails the tree checker",
				(unsigned long long)t->transid, (unsigned long long)eb->start);
			return ret;
		}
		ret = ubt_volume_write(fs->vol, eb->start, eb->data, eb->len);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < fs->vol->ndevices; i++) {
		ret = ubt_bdev_flush(fs->vol->devices[i].bd);
		if (ret)
			return ret;
	}
	return 0;
}

static uint64_t total_used(const struct ubt_wfs *w)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < w->nbgs; i++)
		sum += w->bgs[i].used;
	return sum;
}

static void fill_backup(struct ubt_trans *t, struct btrfs_super_block *sb)
{
	struct ubt_fs *fs = t->w->fs;
	struct btrfs_root_backup *b = &sb->super_roots[t->w->backup_index];
	const struct ubt_subvol *top = NULL;

	memset(b, 0, sizeof(*b));
	btrfs_set_root_backup_tree_root(b, fs->root_tree.bytenr);
	btrfs_set_root_backup_tree_root_gen(b, t->transid);
	btrfs_set_root_backup_tree_root_level(b, fs->root_tree.level);
	btrfs_set_root_backup_chunk_root(b, fs->chunk_tree.bytenr);
	btrfs_set_root_backup_chunk_root_gen(b, fs->chunk_tree.generation);
	btrfs_set_root_backup_chunk_root_level(b, fs->chunk_tree.level);
	btrfs_set_root_backup_extent_root(b, fs->extent_tree.bytenr);
	btrfs_set_root_backup_extent_root_gen(b, fs->extent_tree.generation);
	btrfs_set_root_backup_extent_root_level(b, fs->extent_tree.level);
	if (ubt_fs_subvol(fs, BTRFS_FS_TREE_OBJECTID, &top) == 0) {
		btrfs_set_root_backup_fs_root(b, top->root.bytenr);
		btrfs_set_root_backup_fs_root_gen(b, top->root.generation);
		btrfs_set_root_backup_fs_root_level(b, top->root.level);
	}
	btrfs_set_root_backup_dev_root(b, fs->dev_tree.bytenr);
	btrfs_set_root_backup_dev_root_gen(b, fs->dev_tree.generation);
	btrfs_set_root_backup_dev_root_level(b, fs->dev_tree.level);
	btrfs_set_root_backup_csum_root(b, fs->csum_tree.bytenr);
	btrfs_set_root_backup_csum_root_gen(b, fs->csum_tree.generation);
	btrfs_set_root_backup_csum_root_level(b, fs->csum_tree.level);
	btrfs_set_root_backup_total_bytes(b, btrfs_super_total_bytes(sb));
	btrfs_set_root_backup_bytes_used(b, btrfs_super_bytes_used(sb));
	btrfs_set_root_backup_num_devices(b, btrfs_super_num_devices(sb));
}

/* A device's DEV_ITEM as the chunk tree now has it (bytes_used grows with
 * new chunks). */
static int sync_dev_item(struct ubt_fs *fs, struct btrfs_dev_item *di)
{
	struct btrfs_key key = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY,
				 btrfs_dev_item_devid(di) };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot(&fs->tree, &fs->chunk_tree, &key, &path);
	if (ret == 0 && ubt_eb_item_size(path.nodes[0], path.slots[0]) >= sizeof(*di)) {
		const struct btrfs_dev_item *cur =
			(const void *)ubt_eb_item_data(path.nodes[0], path.slots[0]);
		btrfs_set_dev_item_bytes_used(di, btrfs_dev_item_bytes_used(cur));
		btrfs_set_dev_item_total_bytes(di, btrfs_dev_item_total_bytes(cur));
	} else if (ret == 1) {
		ret = UBT_CORRUPT(0, "devid %llu has no DEV_ITEM",
				  (unsigned long long)btrfs_dev_item_devid(di));
	} else if (ret == 0) {
		ret = -EUCLEAN;
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/* Step 4: every superblock copy of every device, then flush. */
static int write_supers(struct ubt_trans *t)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_volume *vol = fs->vol;
	struct btrfs_super_block sb = vol->super;
	int ret;

	/* Readers check the root tree's root against the superblock's
	 * generation: it must be this transaction's copy. */
	if (fs->root_tree.generation != t->transid)
		return UBT_CORRUPT(fs->root_tree.bytenr,
				   "commit %llu: the root tree's root is from generation %llu",
				   (unsigned long long)t->transid,
				   (unsigned long long)fs->root_tree.generation);
	btrfs_set_super_generation(&sb, t->transid);
	btrfs_set_super_root(&sb, fs->root_tree.bytenr);
	btrfs_set_super_root_level(&sb, fs->root_tree.level);
	btrfs_set_super_chunk_root(&sb, fs->chunk_tree.bytenr);
	btrfs_set_super_chunk_root_generation(&sb, fs->chunk_tree.generation);
	btrfs_set_super_chunk_root_level(&sb, fs->chunk_tree.level);
	btrfs_set_super_bytes_used(&sb, total_used(t->w));
	fill_backup(t, &sb);

	for (size_t d = 0; d < vol->ndevices; d++) {
		struct ubt_device *dev = &vol->devices[d];
		struct btrfs_super_block own;
		/* Each device keeps its own dev_item. */
		ret = ubt_super_read_best(dev->bd, &own, NULL);
		if (ret)
			return ret;
		struct btrfs_super_block out = sb;
		memcpy(&out.dev_item, &own.dev_item, sizeof(out.dev_item));
		ret = sync_dev_item(fs, &out.dev_item);
		if (ret)
			return ret;
		/* Copies inside the device as the filesystem sizes it (the
		 * kernel's rule), not the file or disk behind it. */
		uint64_t limit = UBT_MIN(btrfs_dev_item_total_bytes(&out.dev_item), dev->bd->size);
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
			uint64_t off = btrfs_sb_offset(m);
			if (off + BTRFS_SUPER_INFO_SIZE >= limit)
				break;
			btrfs_set_super_bytenr(&out, off);
			ret = ubt_super_update_csum(&out);
			if (!ret)
				ret = ubt_bdev_write(dev->bd, &out, sizeof(out), off);
			if (ret)
				return ret;
		}
	}
	for (size_t d = 0; d < vol->ndevices; d++) {
		ret = ubt_bdev_flush(vol->devices[d].bd);
		if (ret)
			return ret;
	}
	btrfs_set_super_bytenr(&sb, btrfs_sb_offset(0));
	t->new_super = sb;	/* vol->super changes in ubt_trans_commit_finish */
	return 0;
}

static void trans_free(struct ubt_trans *t)
{
	struct ubt_fs *fs = t->w->fs;

	for (size_t i = 0; i < t->ndirty; i++)
		ubt_eb_put(&fs->tree, t->dirty[i]);
	free(t->dirty);
	free(t->refs);
	free(t->ref_head);
	free(t->ref_next);
	free(t->saved_subvols);
	free(t->csum_run.cs);
	t->w->running = NULL;
	free(t);
}

int ubt_trans_commit_prepare(struct ubt_trans *t)
{
	struct ubt_wfs *w = t->w;
	int ret;

	if (w->aborted) {
		ubt_trans_abort(t, w->abort_err);
		return -EROFS;
	}
	if (w->pre_commit || t->csum_run.n) {
		ret = w->pre_commit ? w->pre_commit(w->pre_commit_ctx, t) : 0;
		if (!ret)
			ret = ubt_csum_flush(t);
		if (ret || w->aborted) {
			ret = ret ? ret : (w->abort_err ? w->abort_err : -EIO);
			ubt_trans_abort(t, ret);
			return ret;
		}
	}
	if (t->ndirty == 0 && t->nrefs == 0 && !any_bg_dirty(w)) {
		/* Nothing changed: no new generation (every commit must copy
		 * the root tree's root, whose generation readers check against
		 * the superblock's). */
		trans_free(t);
		return 1;
	}
	t->committing = true;
	uint64_t dbg_free = ubt_meta_free_bytes(w, false);
	size_t dbg_dirty = t->ndirty;
	size_t dbg_refs = t->nrefs;
	uint64_t dbg_bound = ubt_commit_ref_blocks(t);
	ret = settle(t);
	if (getenv("UBTRFS_DEBUG_SPACE")) {
		unsigned cnt[16][3] = { { 0 } };
		for (size_t i = 0; i < t->ndirty; i++) {
			uint64_t o = ubt_eb_owner(t->dirty[i]);
			unsigned lv = btrfs_header_level(ubt_eb_header(t->dirty[i]));
			cnt[o < 15 ? o : 15][lv > 1 ? 2 : lv]++;
		}
		for (int o = 0; o < 16; o++)
			if (cnt[o][0] + cnt[o][1] + cnt[o][2])
				fprintf(stderr, "  owner %d: leaves %u l1 %u higher %u\n", o, cnt[o][0], cnt[o][1], cnt[o][2]);
	}
	if (getenv("UBTRFS_DEBUG_SPACE"))
		fprintf(stderr, "commit %llu: free %llu -> %llu, dirty %zu -> %zu, "
			"refs %zu (bound %llu, trees %llu) (%d)\n",
			(unsigned long long)t->transid, (unsigned long long)dbg_free,
			(unsigned long long)ubt_meta_free_bytes(w, false), dbg_dirty, t->ndirty,
			dbg_refs, (unsigned long long)dbg_bound,
			(unsigned long long)t->commit_tree_blocks, ret);
	if (ret) {
		ubt_trans_abort(t, ret);
		return ret;
	}
	return 0;
}

int ubt_trans_commit_write(struct ubt_trans *t)
{
	/* Test hook (t-concurrency): a slow device, to show that readers
	 * are not held up by a commit. */
	const char *delay = getenv("UBTRFS_DEBUG_COMMIT_DELAY_MS");
	if (delay) {
		long ms = strtol(delay, NULL, 10);
		if (ms > 0 && ms < 60000) {
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	int ret = write_dirty(t);
	if (!ret)
		ret = write_supers(t);
	return ret;
}

int ubt_trans_commit_finish(struct ubt_trans *t, int ret)
{
	struct ubt_wfs *w = t->w;

	if (ret) {
		ubt_trans_abort(t, ret);
		return ret;
	}
	w->fs->vol->super = t->new_super;
	w->last_committed = t->transid;
	w->backup_index = (w->backup_index + 1) % BTRFS_NUM_BACKUP_ROOTS;
	w->fs->tree.check.super_generation = t->transid;
	w->chunk_alloc_failed = false;
	ubt_bgs_unpin(w);
	for (size_t i = 0; i < w->nroots; i++)
		w->roots[i]->dirty = false;
	trans_free(t);
	return 0;
}

int ubt_trans_commit(struct ubt_trans *t)
{
	int ret = ubt_trans_commit_prepare(t);
	if (ret)
		return ret > 0 ? 0 : ret;
	return ubt_trans_commit_finish(t, ubt_trans_commit_write(t));
}

void ubt_trans_abort(struct ubt_trans *t, int err)
{
	struct ubt_wfs *w = t->w;
	struct ubt_fs *fs = w->fs;

	if (!w->aborted)
		ubt_log(UBT_LOG_ERROR,
			"transaction %llu aborted (%s); the filesystem is read-only, the last "
			"commit (generation %llu) is intact",
			(unsigned long long)t->transid, ubt_strerror(err),
			(unsigned long long)w->last_committed);
	w->aborted = true;
	w->abort_err = err;
	/* Readers go back to the last commit; dirty blocks must not be found
	 * again (their addresses may hold anything on disk). */
	struct ubt_root_ref *g[] = { &fs->root_tree, &fs->chunk_tree, &fs->extent_tree,
				     &fs->dev_tree, &fs->csum_tree, &fs->uuid_tree,
				     &fs->free_space_tree, &fs->block_group_tree, &fs->quota_tree };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(g); i++)
		*g[i] = t->saved_global[i];
	pthread_mutex_lock(&fs->subvol_lock);
	for (size_t i = 0; i < fs->nsubvols; i++) {
		for (size_t k = 0; k < t->nsaved_subvols; k++) {
			if (t->saved_subvols[k].id == fs->subvols[i]->id) {
				fs->subvols[i]->root = t->saved_subvols[k].root;
				fs->subvols[i]->item = t->saved_subvols[k].item;
			}
		}
	}
	/* Subvolumes first opened during the transaction: from the last
	 * commit's root tree. */
	for (size_t i = 0; i < fs->nsubvols; i++) {
		bool saved = false;
		for (size_t k = 0; k < t->nsaved_subvols; k++)
			saved |= t->saved_subvols[k].id == fs->subvols[i]->id;
		/* One the transaction made is gone: no references (so
		 * ubt_fs_subvol no longer finds it) and a root pointing
		 * nowhere (for whoever still holds it). */
		if (!saved && ubt_fs_read_root_item(fs, fs->subvols[i]->id, &fs->subvols[i]->item,
						    &fs->subvols[i]->root)) {
			btrfs_set_root_refs(&fs->subvols[i]->item, 0);
			fs->subvols[i]->root.bytenr = 0;
		}
	}
	pthread_mutex_unlock(&fs->subvol_lock);
	for (size_t i = 0; i < t->ndirty; i++)
		ubt_eb_remove(&fs->tree, t->dirty[i]);
	ubt_icache_clear(fs);
	fs->tree.check.super_generation = w->last_committed;
	trans_free(t);
}
