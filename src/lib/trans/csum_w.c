/*
 * trans layer: writing data checksums (the csum tree).
 *
 * Planning reads the tree through the read side (the transaction's dirty
 * blocks are in the block cache and the csum tree's current root is the
 * wroot's, so it sees every change so far); each change is then one search
 * for write on an exact key followed by one in-leaf operation.
 *
 * Insert: the last item starting before the end of the new range decides
 * everything - if it reaches into the range the range is taken (-EEXIST,
 * items never overlap), if it ends exactly at the start it is the item to
 * extend.  Then, while sectors remain: extend that item up to the maximum,
 * or insert a new item of up to the maximum and continue with it.
 *
 * Delete: repeatedly take the last item starting before the end of the
 * range, until it ends at or before the range's start: delete it (with the
 * items before it in the same leaf that are inside the range), cut its
 * front (the key moves forward), cut its end, or - an item covering the
 * range with room on both sides - split it in its leaf (punch_item).
 *
 * Atomicity: the engine reserves space per tree operation, so a multi-step
 * change can meet -ENOSPC half-way (a failed reservation changes nothing;
 * an ENOSPC after a change has aborted the transaction already).  An insert
 * then deletes what it added (deletions may use the global reserve) and
 * returns -ENOSPC with the tree as before.  A delete stops with the tree
 * well-formed and part of the range done; calling it again after a commit
 * (which returns the space this transaction freed) finishes the job.  The
 * split needs room for one item header in the leaf, made (or refused with
 * ENOSPC) before anything changes; the rest happens inside that leaf.
 * Any other failure after a change aborts the transaction.
 */
#include "trans/csum_w.h"

#include "base/base.h"
#include "tree/blockops.h"

#include <stdlib.h>
#include <string.h>

/* The kernel's PAGE_SIZE on x86-64: its cap on the checksums per item. */
#define CSUM_ITEM_PAGE_CAP 4096u

uint32_t ubt_csum_item_max(uint32_t nodesize, uint32_t csum_size)
{
	uint32_t room = btrfs_leaf_data_size(nodesize) - 2 * (uint32_t)sizeof(struct btrfs_item);
	uint32_t n;

	if (csum_size == 0)
		return 0;
	n = room / csum_size - 1;
	return n < CSUM_ITEM_PAGE_CAP ? n : CSUM_ITEM_PAGE_CAP;
}

/* A failure after this operation changed the tree: the transaction is
 * half-done and must not commit. */
static int abort_changed(struct ubt_trans *t, int ret)
{
	if (ret < 0 && !t->w->aborted) {
		ubt_log(UBT_LOG_ERROR, "a checksum tree change failed part way (%s): aborting",
			ubt_strerror(ret));
		t->w->aborted = true;
		t->w->abort_err = ret;
	}
	return ret;
}

static void csum_key(struct btrfs_key *key, uint64_t offset)
{
	key->objectid = BTRFS_EXTENT_CSUM_OBJECTID;
	key->type = BTRFS_EXTENT_CSUM_KEY;
	key->offset = offset;
}

static bool is_csum_key(const struct btrfs_key *key)
{
	return key->objectid == BTRFS_EXTENT_CSUM_OBJECTID && key->type == BTRFS_EXTENT_CSUM_KEY;
}

/* One csum item as the read side sees it. */
struct csum_span {
	uint64_t start, end;	/* [start, end): the sectors it covers */
	uint32_t n;		/* checksums */
};

/*
 * The csum item with the largest start below `end` (0 found, 1 none).
 */
static int last_item_before(struct ubt_trans *t, struct ubt_wroot *root, uint64_t end,
			    struct csum_span *out)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	struct btrfs_key key;
	struct ubt_path path;
	int ret;

	csum_key(&key, end - 1);
	ubt_path_init(&path);
	ret = ubt_search_le(&fs->tree, &root->ref, &key, &path);
	if (ret == 0) {
		const struct ubt_eb *leaf = path.nodes[0];
		int slot = path.slots[0];
		uint32_t size = ubt_eb_item_size(leaf, slot);
		ubt_eb_item_key(leaf, slot, &key);
		if (!is_csum_key(&key)) {
			ret = 1;
		} else if (size % cs || !UBT_IS_ALIGNED(key.offset, ss) ||
			   (uint64_t)(size / cs) * ss > UINT64_MAX - key.offset) {
			ret = UBT_CORRUPT(leaf->start, "csum item %llu of size %u",
					  (unsigned long long)key.offset, size);
		} else {
			out->start = key.offset;
			out->n = size / cs;
			out->end = key.offset + (uint64_t)out->n * ss;
		}
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/*
 * A search for write that must find the csum item starting at `start`
 * with n checksums.  ins_len as ubt_search_slot_w; grow > 0 searches to
 * extend it by that many bytes instead.
 */
static int find_item_w(struct ubt_trans *t, struct ubt_wroot *root, uint64_t start, uint32_t n,
		       int ins_len, uint32_t grow, struct ubt_path *path)
{
	struct btrfs_key key;
	int ret;

	csum_key(&key, start);
	ubt_path_init(path);
	if (grow)
		ret = ubt_search_slot_grow(t, root, &key, path, grow);
	else
		ret = ubt_search_slot_w(t, root, &key, path, ins_len);
	if (ret == 0 && ubt_eb_item_size(path->nodes[0], path->slots[0]) !=
			n * t->w->fs->csum_size)
		ret = UBT_CORRUPT(path->nodes[0]->start,
				  "csum item %llu changed size under the writer",
				  (unsigned long long)start);
	else if (ret == 1)
		ret = UBT_CORRUPT(root->ref.bytenr, "csum item %llu vanished under the writer",
				  (unsigned long long)start);
	if (ret)
		ubt_path_release(&t->w->fs->tree, path);
	return ret;
}

/*
 * Change the key of the item at the path (from a search for write: every
 * block on it is dirty).  It stays between its neighbours.  As its leaf's
 * first item it is also the key of the leaf in the parent, and so on up
 * while the block is its parent's first child - the invariant ctree_w.c
 * keeps ("a node's key for a child equals the child's first key").
 */
static int set_item_key(struct ubt_trans *t, struct ubt_path *path, const struct btrfs_key *key)
{
	uint32_t ns = t->w->fs->nodesize;
	int ret = ubt_leaf_set_key(ubt_eb_wdata(path->nodes[0]), ns, path->slots[0], key);

	if (ret || path->slots[0] != 0)
		return ret;
	for (int i = 1; i < BTRFS_MAX_LEVEL && path->nodes[i]; i++) {
		ret = ubt_node_set_key(ubt_eb_wdata(path->nodes[i]), ns, path->slots[i], key);
		if (ret || path->slots[i] != 0)
			break;
	}
	return ret;
}

int ubt_csum_data(struct ubt_fs *fs, const void *data, size_t len, uint8_t *out)
{
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	const uint8_t *p = data;
	uint8_t sum[UBT_CSUM_MAX];

	if (!ss || len % ss || cs == 0 || cs > UBT_CSUM_MAX || (len && (!data || !out)))
		return -EINVAL;
	for (size_t off = 0; off < len; off += ss) {
		int ret = ubt_csum(fs->csum_type, p + off, ss, sum);
		if (ret)
			return ret;
		memcpy(out + off / ss * cs, sum, cs);
	}
	return 0;
}

/* Checks shared by insert and delete; *root gets the csum tree. */
static int csum_begin(struct ubt_trans *t, uint64_t bytenr, uint64_t len, struct ubt_wroot **root)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;

	if (t->w->aborted)
		return -EROFS;
	if (!ss || !cs || !UBT_IS_ALIGNED(bytenr, ss) || !UBT_IS_ALIGNED(len, ss) ||
	    len > UINT64_MAX - bytenr)
		return -EINVAL;
	if (ubt_csum_item_max(fs->nodesize, cs) == 0)
		return -EINVAL;
	return ubt_wroot_get(t, BTRFS_CSUM_TREE_OBJECTID, root);
}

static int csum_insert_now(struct ubt_trans *t, uint64_t bytenr, const uint8_t *csums,
			   size_t nsect)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	uint32_t max = ubt_csum_item_max(fs->nodesize, cs);
	struct ubt_wroot *root;
	struct csum_span prev;
	bool have_prev = false;
	int ret;

	if (nsect == 0)
		return t->w->aborted ? -EROFS : 0;
	if (!csums || !ss || nsect > UINT64_MAX / ss)
		return -EINVAL;
	uint64_t len = (uint64_t)nsect * ss;
	ret = csum_begin(t, bytenr, len, &root);
	if (ret)
		return ret;

	/* Items do not overlap: only the last one starting before the end
	 * can reach into the range, and only it can end at its start. */
	ret = last_item_before(t, root, bytenr + len, &prev);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		if (prev.end > bytenr)
			return -EEXIST;
		have_prev = prev.end == bytenr;
	}

	size_t done = 0;
	while (done < nsect) {
		struct ubt_path path;
		uint8_t *dst;
		uint32_t k;

		if (have_prev && prev.n < max) {
			k = (uint32_t)UBT_MIN((uint64_t)(nsect - done), (uint64_t)(max - prev.n));
			ret = find_item_w(t, root, prev.start, prev.n, 0, k * cs, &path);
			if (ret)
				break;
			ret = ubt_extend_item(t, &path, k * cs);
			if (!ret) {
				dst = ubt_eb_witem_data(path.nodes[0], path.slots[0]) +
				      (size_t)prev.n * cs;
				memcpy(dst, csums + done * cs, (size_t)k * cs);
			}
			ubt_path_release(&fs->tree, &path);
			if (ret)
				break;
			prev.n += k;
		} else {
			struct btrfs_key key;
			uint64_t pos = bytenr + (uint64_t)done * ss;
			k = (uint32_t)UBT_MIN((uint64_t)(nsect - done), (uint64_t)max);
			csum_key(&key, pos);
			ret = ubt_insert_item(t, root, &key, k * cs, &dst);
			if (ret == -EEXIST)	/* the read side said the range is free */
				ret = UBT_CORRUPT(root->ref.bytenr,
						  "csum item %llu appeared under the writer",
						  (unsigned long long)pos);
			if (ret)
				break;
			memcpy(dst, csums + done * cs, (size_t)k * cs);
			prev.start = pos;
			prev.n = k;
			have_prev = true;
		}
		done += k;
		prev.end = prev.start + (uint64_t)prev.n * ss;
	}
	if (!ret || done == 0)
		return ret;	/* a failed first step changed nothing (or aborted) */
	if (ret == -ENOSPC && !t->w->aborted) {
		/* Take back what went in: deletions may use the global reserve. */
		int r2 = ubt_csum_delete(t, bytenr, (uint64_t)done * ss);
		if (!r2)
			return ret;
	}
	return abort_changed(t, ret);
}

/* ---- the held run --------------------------------------------------------- */

/*
 * A write of new data (ubt_csum_insert_held) puts its checksums into the
 * csum tree: one search,
 * and most often the extension of the item that ends where the new data
 * starts, which moves that item's bytes in the leaf - up to a leaf's worth
 * for a few bytes of checksums.  Writes of many small files allocate their
 * extents one after another, so their checksums are held back instead, as
 * one run of consecutive sectors (t->csum_run, at most one item's worth),
 * and go into the tree together: when a write's checksums do not continue
 * the run, when the run is full, before checksums of its range are deleted
 * and at the commit (ubt_csum_flush, before the queued reference changes
 * free data).  Readers overlay the run (fs->held_csums; csum_in_range in
 * file_w.c asks ubt_csum_held).  The room for inserting it is promised
 * (ubt_meta_owe_run); without it checksums go in at once.  A failure to
 * insert the run aborts the transaction: its data is referenced already.
 */

static void held_csums(struct ubt_fs *fs, uint64_t bytenr, size_t nsect, uint8_t *csums,
		       bool *have)
{
	struct ubt_trans *t = fs->wr ? fs->wr->running : NULL;

	if (!t || !t->csum_run.n)
		return;
	const struct ubt_csum_run *r = &t->csum_run;
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	uint64_t end = bytenr + (uint64_t)nsect * ss, rend = r->start + (uint64_t)r->n * ss;
	uint64_t a = UBT_MAX(bytenr, r->start), b = UBT_MIN(end, rend);
	for (uint64_t x = a; x < b; x += ss) {
		size_t i = (size_t)((x - bytenr) / ss);
		memcpy(csums + i * cs, r->cs + (x - r->start) / ss * cs, cs);
		have[i] = true;
	}
}

bool ubt_csum_held(const struct ubt_trans *t, uint64_t start, uint64_t len)
{
	const struct ubt_csum_run *r = &t->csum_run;
	uint64_t rend = r->start + (uint64_t)r->n * t->w->fs->sectorsize;

	return r->n && start < rend && start + len > r->start;
}

int ubt_csum_flush(struct ubt_trans *t)
{
	struct ubt_csum_run *r = &t->csum_run;
	size_t n = r->n;

	if (!n)
		return 0;
	r->n = 0;
	(void)ubt_meta_owe_run(t, 0);	/* less: always kept */
	if (t->w->aborted)
		return t->w->abort_err ? t->w->abort_err : -EROFS;
	bool owed = t->owed_work;
	t->owed_work = true;	/* the room was promised */
	int ret = csum_insert_now(t, r->start, r->cs, n);
	t->owed_work = owed;
	if (ret && !t->w->aborted) {
		ubt_log(UBT_LOG_ERROR, "cannot insert the checksums of data at %llu (%zu sectors): "
			"%s; aborting", (unsigned long long)r->start, n, ubt_strerror(ret));
		t->w->aborted = true;
		t->w->abort_err = ret;
	}
	return ret;
}

int ubt_csum_insert(struct ubt_trans *t, uint64_t bytenr, const uint8_t *csums, size_t nsect)
{
	/* The held run first: the search for overlaps and for the item to
	 * extend must see it in the tree. */
	int ret = ubt_csum_flush(t);

	return ret ? ret : csum_insert_now(t, bytenr, csums, nsect);
}

int ubt_csum_insert_held(struct ubt_trans *t, uint64_t bytenr, const uint8_t *csums,
			 size_t nsect)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_csum_run *r = &t->csum_run;
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	int ret;

	if (nsect == 0 || t->w->aborted || !fs->has_csum_tree || !csums || !ss || !cs)
		return ubt_csum_insert(t, bytenr, csums, nsect);	/* its checks */
	size_t max = ubt_csum_item_max(fs->nodesize, cs);
	if (r->n && bytenr == r->start + (uint64_t)r->n * ss && r->n + nsect <= max) {
		memcpy(r->cs + r->n * cs, csums, nsect * cs);
		r->n += nsect;
		return 0;
	}
	if (r->n) {
		ret = ubt_csum_flush(t);
		if (ret)
			return ret;
	}
	if (nsect > max || bytenr % ss || !ubt_meta_owe_run(t, 1))
		return csum_insert_now(t, bytenr, csums, nsect);
	if (!r->cs) {
		r->cs = malloc(max * cs);
		if (!r->cs) {
			(void)ubt_meta_owe_run(t, 0);
			return csum_insert_now(t, bytenr, csums, nsect);
		}
		r->cap = max;
	}
	fs->held_csums = held_csums;
	memcpy(r->cs, csums, nsect * cs);
	r->start = bytenr;
	r->n = nsect;
	return 0;
}

/* Delete the csum item `it` and the items before it in its leaf that
 * start at or after `from` (all inside the range being deleted).  *first
 * gets the start of the first one deleted. */
static int delete_items(struct ubt_trans *t, struct ubt_wroot *root, const struct csum_span *it,
			uint64_t from, uint64_t *first)
{
	struct ubt_path path;
	int ret = find_item_w(t, root, it->start, it->n, -1, 0, &path);

	if (ret)
		return ret;
	const struct ubt_eb *leaf = path.nodes[0];
	int slot = path.slots[0], lo = slot;
	*first = it->start;
	while (lo > 0) {
		struct btrfs_key key;
		ubt_eb_item_key(leaf, lo - 1, &key);
		if (!is_csum_key(&key) || key.offset < from)
			break;
		lo--;
		*first = key.offset;
	}
	path.slots[0] = lo;
	return ubt_del_items(t, root, &path, slot - lo + 1);
}

/* Shrink the csum item `it` to [new_start, new_end) (a part of it). */
static int shrink_item(struct ubt_trans *t, struct ubt_wroot *root, const struct csum_span *it,
		       uint64_t new_start, uint64_t new_end)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	uint32_t new_size = (uint32_t)((new_end - new_start) / ss) * cs;
	struct ubt_path path;
	/* ins_len -1: a change that frees space may use the global reserve. */
	int ret = find_item_w(t, root, it->start, it->n, -1, 0, &path);

	if (ret)
		return ret;
	bool front = new_start != it->start;
	ret = ubt_truncate_item(t, &path, new_size, front);
	if (!ret && front) {
		struct btrfs_key key;
		csum_key(&key, new_start);
		ret = abort_changed(t, set_item_key(t, &path, &key));	/* half done */
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/*
 * Take [bytenr, end) out of the middle of the csum item `it`, in its leaf
 * (as the kernel's btrfs_split_item): the item keeps [it.start, bytenr) and
 * a new item right after it holds [end, it.end).  The leaf needs room for
 * one more item header only - the search makes that much (the one step
 * that may meet ENOSPC, before any change); cutting the item first frees
 * the bytes the tail needs, so the rest cannot fail for space.
 */
static int punch_item(struct ubt_trans *t, struct ubt_wroot *root, const struct csum_span *it,
		      uint64_t bytenr, uint64_t end)
{
	struct ubt_fs *fs = t->w->fs;
	uint32_t ss = fs->sectorsize, cs = fs->csum_size, ns = fs->nodesize;
	uint32_t head = (uint32_t)((bytenr - it->start) / ss);
	uint32_t tail = (uint32_t)((it->end - end) / ss);
	struct ubt_path path;
	struct btrfs_key key;
	int ret = find_item_w(t, root, it->start, it->n, 0, (uint32_t)sizeof(struct btrfs_item),
			      &path);

	if (ret)
		return ret;
	struct ubt_eb *leaf = path.nodes[0];
	int slot = path.slots[0];
	uint8_t *copy = malloc((size_t)tail * cs + 1);
	if (!copy) {
		ubt_path_release(&fs->tree, &path);
		return -ENOMEM;
	}
	memcpy(copy, ubt_eb_item_data(leaf, slot) + (size_t)(it->n - tail) * cs, (size_t)tail * cs);
	ret = ubt_truncate_item(t, &path, head * cs, false);
	if (!ret) {
		csum_key(&key, end);
		ret = ubt_leaf_insert_item(ubt_eb_wdata(leaf), ns, slot + 1, &key, tail * cs);
	}
	if (!ret)
		memcpy(ubt_eb_witem_data(leaf, slot + 1), copy, (size_t)tail * cs);
	free(copy);
	ubt_path_release(&fs->tree, &path);
	return abort_changed(t, ret);
}

int ubt_csum_delete(struct ubt_trans *t, uint64_t bytenr, uint64_t len)
{
	struct ubt_wroot *root;
	bool changed = false;
	int ret;

	ret = csum_begin(t, bytenr, len, &root);
	if (ret || len == 0)
		return ret;
	if (ubt_csum_held(t, bytenr, len)) {
		ret = ubt_csum_flush(t);
		if (ret)
			return ret;
	}
	uint64_t end = bytenr + len;

	for (;;) {
		struct csum_span it;

		ret = last_item_before(t, root, end, &it);
		if (ret) {
			ret = ret < 0 ? ret : 0;	/* 1: no item starts before the end */
			break;
		}
		if (it.end <= bytenr)
			break;	/* and every item before it ends earlier still */
		if (it.start >= bytenr && it.end <= end) {
			uint64_t first;
			ret = delete_items(t, root, &it, bytenr, &first);
			if (ret)
				break;
			changed = true;
			if (first == bytenr)
				break;
		} else if (it.start < bytenr && it.end > end) {
			/* The range is inside: split the item in its leaf. */
			ret = punch_item(t, root, &it, bytenr, end);
			changed = changed || !ret;
			break;
		} else if (it.start < bytenr) {
			ret = shrink_item(t, root, &it, it.start, bytenr);	/* its end */
			changed = changed || !ret;
			break;
		} else {
			ret = shrink_item(t, root, &it, end, it.end);		/* its front */
			if (ret)
				break;
			changed = true;
			if (it.start == bytenr)
				break;
		}
	}
	if (ret == -ENOSPC && !t->w->aborted)
		return ret;	/* a reservation failed: the tree is well-formed */
	return changed ? abort_changed(t, ret) : ret;
}
