/*
 * trans layer: extent back references (delayed refs) and block group items.
 *
 * Every change to who references an extent is queued as a delayed ref and
 * applied at commit, summed per extent and per reference:
 *   - TREE_BLOCK_REF (root): the block is reached from that tree at its
 *     position ("implicit": valid wherever the tree keeps the pointer);
 *   - SHARED_BLOCK_REF (parent): reached from that parent block;
 *   - EXTENT_DATA_REF (root, inode, offset) with a count: file extent items
 *     of that tree point at the data extent;
 *   - SHARED_DATA_REF (parent) with a count: items in that leaf point at it.
 * A reference lives inline in the EXTENT_ITEM / METADATA_ITEM (sorted by
 * type, then by descending offset - the root, parent or data-ref hash) while
 * the item stays under the kernel's inline size limit, else as its own
 * keyed item.  refs in the item is the sum of all of them.  An extent whose
 * count reaches zero loses its item and its space is pinned until the
 * commit is on disk.  Flag changes (FULL_BACKREF, set when a shared block
 * is copied) are queued the same way.
 *
 * Applying changes modifies the extent tree, whose own copies queue more:
 * the run repeats until the queue is empty.  Lookups made while copying a
 * block (ubt_extent_info) add the queued changes to what is on disk.
 */
#include "trans/trans.h"

#include "base/base.h"
#include "trans/csum_w.h"

#include <stdlib.h>
#include <string.h>

/* ---- queueing ------------------------------------------------------------ */

/* The queue is indexed by bytenr: looking an extent's changes up
 * (ubt_extent_info, for every block a transaction COWs first) must not walk
 * a queue that holds one entry per data extent an rm -rf freed. */
static size_t ref_bucket(uint64_t bytenr, size_t nbuckets)
{
	return (size_t)ubt_mix64(bytenr) & (nbuckets - 1);
}

static void ref_link(struct ubt_trans *t, size_t i)
{
	size_t b = ref_bucket(t->refs[i].bytenr, t->ref_nbuckets);

	t->ref_next[i] = t->ref_head[b];
	t->ref_head[b] = i + 1;
}

/* Index refs[0..n) in `nbuckets` buckets. */
static int ref_reindex(struct ubt_trans *t, size_t n, size_t nbuckets)
{
	size_t *head = calloc(nbuckets, sizeof(*head));

	if (!head)
		return -ENOMEM;
	free(t->ref_head);
	t->ref_head = head;
	t->ref_nbuckets = nbuckets;
	for (size_t i = 0; i < n; i++)
		ref_link(t, i);
	return 0;
}

size_t ubt_dref_first(const struct ubt_trans *t, uint64_t bytenr)
{
	if (!t->ref_nbuckets)
		return 0;
	size_t i = t->ref_head[ref_bucket(bytenr, t->ref_nbuckets)];
	while (i && t->refs[i - 1].bytenr != bytenr)
		i = t->ref_next[i - 1];
	return i;
}

size_t ubt_dref_next(const struct ubt_trans *t, size_t i)
{
	uint64_t bytenr = t->refs[i - 1].bytenr;

	for (i = t->ref_next[i - 1]; i && t->refs[i - 1].bytenr != bytenr;)
		i = t->ref_next[i - 1];
	return i;
}

static int push(struct ubt_trans *t, const struct ubt_dref *r)
{
	if (t->nrefs == t->refs_cap) {
		size_t cap = t->refs_cap ? t->refs_cap * 2 : 256;
		struct ubt_dref *v = realloc(t->refs, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->refs = v;
		size_t *nx = realloc(t->ref_next, cap * sizeof(*nx));
		if (!nx)
			return -ENOMEM;
		t->ref_next = nx;
		t->refs_cap = cap;
	}
	size_t i = t->nrefs;
	t->refs[i] = *r;
	if (2 * (i + 1) > t->ref_nbuckets) {
		int ret = ref_reindex(t, i + 1, t->ref_nbuckets ? 2 * t->ref_nbuckets : 512);
		if (ret)
			return ret;
	} else {
		ref_link(t, i);
	}
	if (t->grow.valid && r->bytenr == t->grow.bytenr)
		t->grow.valid = false;	/* no longer the one reference */
	t->nrefs = i + 1;
	return 0;
}

int ubt_dref_add(struct ubt_trans *t, uint64_t bytenr, uint64_t root, int delta, uint8_t level,
		 const struct btrfs_key *first_key)
{
	struct ubt_dref r = { 0 };

	r.bytenr = bytenr;
	r.num_bytes = t->w->fs->nodesize;
	r.tree = true;
	r.level = level;
	r.type = BTRFS_TREE_BLOCK_REF_KEY;
	r.root = root;
	r.delta = delta;
	r.new_block = delta > 0;
	if (first_key)
		r.first_key = *first_key;
	return push(t, &r);
}

int ubt_dref_queue(struct ubt_trans *t, const struct ubt_dref *r)
{
	return push(t, r);
}

/* ---- one extent item in memory ------------------------------------------ */

struct xref {
	uint8_t type;
	uint64_t root, parent, owner, offset;	/* by type, as struct ubt_dref */
	uint64_t count;
	bool keyed;		/* a keyed item holds it (not inline) */
	uint64_t key_offset;	/* keyed: its key offset */
};

struct xitem {
	bool exists;
	struct btrfs_key key;
	uint64_t refs, generation, flags;
	bool has_info;
	struct btrfs_tree_block_info info;
	struct xref *v;
	size_t n, cap;
};

static uint64_t ref_seq(uint8_t type, uint64_t root, uint64_t parent, uint64_t owner,
			uint64_t offset)
{
	switch (type) {
	case BTRFS_TREE_BLOCK_REF_KEY:
		return root;
	case BTRFS_EXTENT_DATA_REF_KEY:
		return ubt_extent_data_ref_hash(root, owner, offset);
	default:
		return parent;
	}
}

static bool same_ref(const struct xref *x, const struct ubt_dref *r)
{
	if (x->type != r->type)
		return false;
	switch (r->type) {
	case BTRFS_TREE_BLOCK_REF_KEY:
		return x->root == r->root;
	case BTRFS_EXTENT_DATA_REF_KEY:
		return x->root == r->root && x->owner == r->owner && x->offset == r->offset;
	default:
		return x->parent == r->parent;
	}
}

static int xitem_push(struct xitem *x, const struct xref *r)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 8;
		struct xref *v = realloc(x->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = *r;
	return 0;
}

static uint32_t inline_size(uint8_t type)
{
	return btrfs_extent_inline_ref_size(type);
}

/* Bytes the item takes with its inline refs. */
static uint32_t xitem_size(const struct xitem *x)
{
	uint32_t size = sizeof(struct btrfs_extent_item) +
			(x->has_info ? sizeof(struct btrfs_tree_block_info) : 0);
	for (size_t i = 0; i < x->n; i++)
		if (!x->v[i].keyed && x->v[i].count)
			size += inline_size(x->v[i].type);
	return size;
}

/* The kernel's limit for an extent item with inline refs. */
static uint32_t max_item_size(uint32_t nodesize)
{
	return (btrfs_leaf_data_size(nodesize) >> 4) - (uint32_t)sizeof(struct btrfs_item);
}

static int parse_item(const uint8_t *p, uint32_t size, bool skinny_tree, struct xitem *x,
		      uint64_t where)
{
	const struct btrfs_extent_item *ei = (const void *)p;
	uint32_t cur = sizeof(*ei);

	x->refs = btrfs_extent_refs(ei);
	x->generation = btrfs_extent_generation(ei);
	x->flags = btrfs_extent_flags(ei);
	if ((x->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) && !skinny_tree) {
		memcpy(&x->info, p + cur, sizeof(x->info));
		x->has_info = true;
		cur += sizeof(x->info);
	}
	while (cur < size) {	/* the checker vouched for the layout */
		const struct btrfs_extent_inline_ref *iref = (const void *)(p + cur);
		struct xref r = { 0 };
		r.type = btrfs_extent_inline_ref_type(iref);
		switch (r.type) {
		case BTRFS_TREE_BLOCK_REF_KEY:
			r.root = btrfs_extent_inline_ref_offset(iref);
			r.count = 1;
			break;
		case BTRFS_SHARED_BLOCK_REF_KEY:
			r.parent = btrfs_extent_inline_ref_offset(iref);
			r.count = 1;
			break;
		case BTRFS_EXTENT_DATA_REF_KEY: {
			const struct btrfs_extent_data_ref *d = btrfs_extent_inline_ref_data_ref(iref);
			r.root = btrfs_extent_data_ref_root(d);
			r.owner = btrfs_extent_data_ref_objectid(d);
			r.offset = btrfs_extent_data_ref_offset(d);
			r.count = btrfs_extent_data_ref_count(d);
			break;
		}
		case BTRFS_SHARED_DATA_REF_KEY:
			r.parent = btrfs_extent_inline_ref_offset(iref);
			r.count = btrfs_shared_data_ref_count(btrfs_extent_inline_ref_shared_data_ref(iref));
			break;
		default:
			return UBT_CORRUPT(where, "extent %llu: inline ref type %u not supported",
					   (unsigned long long)x->key.objectid, r.type);
		}
		int ret = xitem_push(x, &r);
		if (ret)
			return ret;
		cur += inline_size(r.type);
	}
	return 0;
}

static int cmp_inline(const void *a, const void *b)
{
	const struct xref *x = a, *y = b;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	uint64_t sx = ref_seq(x->type, x->root, x->parent, x->owner, x->offset);
	uint64_t sy = ref_seq(y->type, y->root, y->parent, y->owner, y->offset);
	return sx > sy ? -1 : sx < sy;	/* descending */
}

static void serialize(const struct xitem *x, uint8_t *p)
{
	struct btrfs_extent_item *ei = (void *)p;
	uint32_t cur = sizeof(*ei);

	btrfs_set_extent_refs(ei, x->refs);
	btrfs_set_extent_generation(ei, x->generation);
	btrfs_set_extent_flags(ei, x->flags);
	if (x->has_info) {
		memcpy(p + cur, &x->info, sizeof(x->info));
		cur += sizeof(x->info);
	}
	for (size_t i = 0; i < x->n; i++) {
		const struct xref *r = &x->v[i];
		if (r->keyed || !r->count)
			continue;
		struct btrfs_extent_inline_ref *iref = (void *)(p + cur);
		btrfs_set_extent_inline_ref_type(iref, r->type);
		switch (r->type) {
		case BTRFS_TREE_BLOCK_REF_KEY:
			btrfs_set_extent_inline_ref_offset(iref, r->root);
			break;
		case BTRFS_SHARED_BLOCK_REF_KEY:
			btrfs_set_extent_inline_ref_offset(iref, r->parent);
			break;
		case BTRFS_EXTENT_DATA_REF_KEY: {
			struct btrfs_extent_data_ref *d = (void *)btrfs_extent_inline_ref_data_ref(iref);
			btrfs_set_extent_data_ref_root(d, r->root);
			btrfs_set_extent_data_ref_objectid(d, r->owner);
			btrfs_set_extent_data_ref_offset(d, r->offset);
			btrfs_set_extent_data_ref_count(d, (uint32_t)r->count);
			break;
		}
		case BTRFS_SHARED_DATA_REF_KEY:
			btrfs_set_extent_inline_ref_offset(iref, r->parent);
			btrfs_set_shared_data_ref_count(
				(struct btrfs_shared_data_ref *)btrfs_extent_inline_ref_shared_data_ref(iref),
				(uint32_t)r->count);
			break;
		}
		cur += inline_size(r->type);
	}
}

static bool skinny(const struct ubt_fs *fs)
{
	return btrfs_super_incompat_flags(&fs->vol->super) & BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA;
}

/* Find the EXTENT_ITEM / METADATA_ITEM of bytenr (0 found, 1 none). */
static int find_item(struct ubt_fs *fs, const struct ubt_root_ref *et, uint64_t bytenr,
		     struct xitem *x)
{
	struct btrfs_key key = { bytenr, BTRFS_METADATA_ITEM_KEY, (uint64_t)-1 };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_le(&fs->tree, et, &key, &path);
	if (ret == 0) {
		struct btrfs_key k;
		ubt_eb_item_key(path.nodes[0], path.slots[0], &k);
		if (k.objectid == bytenr &&
		    (k.type == BTRFS_EXTENT_ITEM_KEY || k.type == BTRFS_METADATA_ITEM_KEY)) {
			x->exists = true;
			x->key = k;
			ret = parse_item(ubt_eb_item_data(path.nodes[0], path.slots[0]),
					 ubt_eb_item_size(path.nodes[0], path.slots[0]),
					 k.type == BTRFS_METADATA_ITEM_KEY, x, path.nodes[0]->start);
		} else {
			ret = 1;
		}
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/* ---- lookups while copying ---------------------------------------------- */

int ubt_extent_info(struct ubt_trans *t, uint64_t bytenr, uint64_t *refs, uint64_t *flags)
{
	struct ubt_fs *fs = t->w->fs;
	struct xitem x = { 0 };
	int ret = find_item(fs, &fs->extent_tree, bytenr, &x);
	int64_t r = 0;
	uint64_t f = 0;

	free(x.v);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		r = (int64_t)x.refs;
		f = x.flags;
	}
	for (size_t i = ubt_dref_first(t, bytenr); i; i = ubt_dref_next(t, i)) {
		r += t->refs[i - 1].delta;
		f |= t->refs[i - 1].set_flags;
	}
	if (r <= 0)
		return UBT_CORRUPT(bytenr, "extent %llu has no references",
				   (unsigned long long)bytenr);
	*refs = (uint64_t)r;
	*flags = f;
	return 0;
}

/* ---- applying ------------------------------------------------------------ */

/* The keyed item of reference r: 0 found (*key set), 1 none (*key = where
 * a new one goes).  Data refs probe past hash collisions. */
static int find_keyed(struct ubt_trans *t, struct ubt_wroot *et, uint64_t bytenr,
		      const struct ubt_dref *r, struct btrfs_key *key, uint32_t *count)
{
	struct ubt_fs *fs = t->w->fs;
	uint64_t seq = ref_seq(r->type, r->root, r->parent, r->owner, r->offset);

	for (int probe = 0; probe < 64; probe++) {
		struct ubt_path path;
		struct btrfs_key k = { bytenr, r->type, seq + (uint64_t)probe };
		ubt_path_init(&path);
		int ret = ubt_search_slot(&fs->tree, &et->ref, &k, &path);
		if (ret == 0) {
			const uint8_t *p = ubt_eb_item_data(path.nodes[0], path.slots[0]);
			bool match = true;
			*count = 1;
			if (r->type == BTRFS_EXTENT_DATA_REF_KEY) {
				const struct btrfs_extent_data_ref *d = (const void *)p;
				match = btrfs_extent_data_ref_root(d) == r->root &&
					btrfs_extent_data_ref_objectid(d) == r->owner &&
					btrfs_extent_data_ref_offset(d) == r->offset;
				*count = btrfs_extent_data_ref_count(d);
			} else if (r->type == BTRFS_SHARED_DATA_REF_KEY) {
				*count = btrfs_shared_data_ref_count((const void *)p);
			}
			ubt_path_release(&fs->tree, &path);
			if (match) {
				*key = k;
				return 0;
			}
			if (r->type != BTRFS_EXTENT_DATA_REF_KEY)
				return UBT_CORRUPT(bytenr, "keyed ref collision");
			continue;
		}
		ubt_path_release(&fs->tree, &path);
		if (ret < 0)
			return ret;
		*key = k;
		return 1;
	}
	return UBT_CORRUPT(bytenr, "too many data ref hash collisions");
}

/* Change a keyed ref by delta (creating or deleting its item). */
static int change_keyed(struct ubt_trans *t, struct ubt_wroot *et, uint64_t bytenr,
			const struct ubt_dref *r, int64_t delta)
{
	struct btrfs_key key;
	uint32_t count = 0;
	int ret = find_keyed(t, et, bytenr, r, &key, &count);

	if (ret < 0)
		return ret;
	int64_t now = (ret == 0 ? (int64_t)count : 0) + delta;
	if (now < 0)
		return UBT_CORRUPT(bytenr, "extent %llu: dropping a reference it does not have",
				   (unsigned long long)bytenr);
	if (ret == 0 && now == 0)
		return ubt_delete_key(t, et, &key);
	uint32_t size = r->type == BTRFS_EXTENT_DATA_REF_KEY ? sizeof(struct btrfs_extent_data_ref)
			: r->type == BTRFS_SHARED_DATA_REF_KEY ? sizeof(struct btrfs_shared_data_ref) : 0;
	uint8_t *p;
	if (ret == 1) {
		ret = ubt_insert_item(t, et, &key, size, &p);
		if (ret)
			return ret;
	} else {
		struct ubt_path path;
		ubt_path_init(&path);
		ret = ubt_search_slot_w(t, et, &key, &path, 0);
		if (ret) {
			ubt_path_release(&t->w->fs->tree, &path);
			return ret < 0 ? ret : -EUCLEAN;
		}
		p = ubt_eb_witem_data(path.nodes[0], path.slots[0]);
		if (r->type == BTRFS_SHARED_DATA_REF_KEY)
			btrfs_set_shared_data_ref_count((void *)p, (uint32_t)now);
		else if (r->type == BTRFS_EXTENT_DATA_REF_KEY)
			btrfs_set_extent_data_ref_count((void *)p, (uint32_t)now);
		ubt_path_release(&t->w->fs->tree, &path);
		return 0;
	}
	if (r->type == BTRFS_EXTENT_DATA_REF_KEY) {
		struct btrfs_extent_data_ref *d = (void *)p;
		btrfs_set_extent_data_ref_root(d, r->root);
		btrfs_set_extent_data_ref_objectid(d, r->owner);
		btrfs_set_extent_data_ref_offset(d, r->offset);
		btrfs_set_extent_data_ref_count(d, (uint32_t)now);
	} else if (r->type == BTRFS_SHARED_DATA_REF_KEY) {
		btrfs_set_shared_data_ref_count((void *)p, (uint32_t)now);
	}
	return 0;
}

/* Rewrite the extent item (size may change: delete and insert). */
static int store_item(struct ubt_trans *t, struct ubt_wroot *et, struct xitem *x)
{
	uint32_t size = xitem_size(x);
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot_w(t, et, &x->key, &path, 0);
	if (ret == 0 && ubt_eb_item_size(path.nodes[0], path.slots[0]) == size) {
		serialize(x, ubt_eb_witem_data(path.nodes[0], path.slots[0]));
		ubt_path_release(&t->w->fs->tree, &path);
		return 0;
	}
	ubt_path_release(&t->w->fs->tree, &path);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		ret = ubt_delete_key(t, et, &x->key);
		if (ret)
			return ret;
	}
	uint8_t *p;
	ret = ubt_insert_item(t, et, &x->key, size, &p);
	if (ret)
		return ret;
	serialize(x, p);
	return 0;
}

static int cmp_dref(const void *a, const void *b)
{
	const struct ubt_dref *x = a, *y = b;
	if (x->bytenr != y->bytenr)
		return x->bytenr < y->bytenr ? -1 : 1;
	return 0;
}

/*
 * Apply every queued change of one extent: refs[0..n) share bytenr.
 */
/*
 * Checksums of freed data extents, deleted a run at a time: ubt_run_drefs
 * applies extents in bytenr order, and the extents of files written one
 * after another lie next to each other, as do their checksums.  One
 * ubt_csum_delete of the run removes whole csum items where one per extent
 * would cut the front of the same item again and again.  Safe to put off
 * to the end of the round: nothing in it writes checksums, and the freed
 * space stays pinned until the commit.
 */
struct csum_run {
	uint64_t start, len;
};

static int csum_run_flush(struct ubt_trans *t, struct csum_run *run)
{
	int ret = run->len ? ubt_csum_delete(t, run->start, run->len) : 0;

	run->len = 0;
	return ret;
}

static int csum_run_add(struct ubt_trans *t, struct csum_run *run, uint64_t bytenr, uint64_t len)
{
	if (run->len && run->start + run->len == bytenr) {
		run->len += len;
		return 0;
	}
	int ret = csum_run_flush(t, run);
	run->start = bytenr;
	run->len = len;
	return ret;
}

static int apply_extent(struct ubt_trans *t, struct ubt_wroot *et, struct ubt_dref *refs,
			size_t n, struct csum_run *csums)
{
	struct ubt_wfs *w = t->w;
	struct ubt_fs *fs = w->fs;
	uint64_t bytenr = refs[0].bytenr;
	struct xitem x = { 0 };
	int64_t total = 0;
	uint64_t set_flags = 0;
	bool any_ref = false;
	int ret;

	for (size_t i = 0; i < n; i++) {
		total += refs[i].delta;
		set_flags |= refs[i].set_flags;
		any_ref |= refs[i].delta != 0;
	}
	/* The group's allocation map is built from the extent tree: before its
	 * items change. */
	struct ubt_bg *bg = ubt_bg_find(w, bytenr);
	if (!bg)
		return UBT_CORRUPT(bytenr, "extent outside every block group");
	ret = ubt_bg_load_extents(w, bg);
	if (ret)
		return ret;
	ret = find_item(fs, &et->ref, bytenr, &x);
	if (ret < 0)
		goto out;
	if (ret == 1) {
		/* A block made in this transaction: dropped again, or new. */
		bool made = false;
		for (size_t i = 0; i < n; i++)
			made |= refs[i].new_block;
		if (!made) {
			ret = UBT_CORRUPT(bytenr, "extent %llu has no extent item",
					  (unsigned long long)bytenr);
			goto out;
		}
		if (total == 0) {
			ret = 0;
			if (!refs[0].tree)
				ret = csum_run_add(t, csums, bytenr, refs[0].num_bytes);
			if (!ret)
				ret = ubt_bg_account(t, bytenr, refs[0].num_bytes, false);
			goto out;
		}
		x.exists = false;
		if (refs[0].tree && skinny(fs)) {
			x.key = (struct btrfs_key){ bytenr, BTRFS_METADATA_ITEM_KEY, refs[0].level };
		} else {
			x.key = (struct btrfs_key){ bytenr, BTRFS_EXTENT_ITEM_KEY, refs[0].num_bytes };
			if (refs[0].tree) {
				x.has_info = true;
				btrfs_cpu_key_to_disk(&x.info.key, &refs[0].first_key);
				btrfs_set_tree_block_info_level(&x.info, refs[0].level);
			}
		}
		x.generation = t->transid;
		x.flags = refs[0].tree ? BTRFS_EXTENT_FLAG_TREE_BLOCK : BTRFS_EXTENT_FLAG_DATA;
	}
	x.flags |= set_flags;
	if (!any_ref && x.exists) {
		ret = store_item(t, et, &x);	/* flags only */
		goto out;
	}
	/* Net change per distinct reference. */
	for (size_t i = 0; i < n; i++) {
		const struct ubt_dref *r = &refs[i];
		if (!r->delta)
			continue;
		int64_t delta = r->delta;
		refs[i].delta = 0;
		for (size_t j = i + 1; j < n; j++) {
			struct xref tmp = { refs[j].type, refs[j].root, refs[j].parent, refs[j].owner,
					    refs[j].offset, 0, false, 0 };
			if (refs[j].delta && same_ref(&tmp, r)) {
				delta += refs[j].delta;
				refs[j].delta = 0;
			}
		}
		if (!delta)
			continue;
		size_t k;
		for (k = 0; k < x.n; k++)
			if (same_ref(&x.v[k], r))
				break;
		if (k < x.n) {
			int64_t now = (int64_t)x.v[k].count + delta;
			if (now < 0) {
				ret = UBT_CORRUPT(bytenr, "extent %llu: reference count below zero",
						  (unsigned long long)bytenr);
				goto out;
			}
			if (now > 1 && (r->type == BTRFS_TREE_BLOCK_REF_KEY ||
					r->type == BTRFS_SHARED_BLOCK_REF_KEY)) {
				ret = UBT_CORRUPT(bytenr, "tree block %llu: duplicate reference",
						  (unsigned long long)bytenr);
				goto out;
			}
			x.v[k].count = (uint64_t)now;
			continue;
		}
		/* Not inline: keyed, or new. */
		struct xref nr = { r->type, r->root, r->parent, r->owner, r->offset,
				   delta > 0 ? (uint64_t)delta : 0, false, 0 };
		uint32_t grown = xitem_size(&x) + inline_size(r->type);
		bool has_keyed = false;
		if (x.exists) {
			struct btrfs_key kk;
			uint32_t cnt;
			int kr = find_keyed(t, et, bytenr, r, &kk, &cnt);
			if (kr < 0) {
				ret = kr;
				goto out;
			}
			has_keyed = kr == 0;
		}
		if (delta < 0 && !has_keyed) {
			ret = UBT_CORRUPT(bytenr, "extent %llu: dropping a reference it does not have",
					  (unsigned long long)bytenr);
			goto out;
		}
		if (has_keyed || grown > max_item_size(fs->nodesize)) {
			ret = change_keyed(t, et, bytenr, r, delta);
			if (ret)
				goto out;
			continue;
		}
		ret = xitem_push(&x, &nr);
		if (ret)
			goto out;
	}
	int64_t refs_now = (int64_t)x.refs + total;
	if (refs_now < 0) {
		ret = UBT_CORRUPT(bytenr, "extent %llu: references below zero",
				  (unsigned long long)bytenr);
		goto out;
	}
	if (refs_now == 0) {
		for (size_t k = 0; k < x.n; k++) {
			if (x.v[k].count) {
				ret = UBT_CORRUPT(bytenr, "extent %llu: count 0 with references left",
						  (unsigned long long)bytenr);
				goto out;
			}
		}
		if (x.exists)
			ret = ubt_delete_key(t, et, &x.key);
		if (!ret && !refs[0].tree)
			ret = csum_run_add(t, csums, bytenr, x.key.offset);
		if (!ret)
			ret = ubt_bg_account(t, bytenr, refs[0].num_bytes, false);
		goto out;
	}
	x.refs = (uint64_t)refs_now;
	/* Drop emptied inline refs; keep the rest in the kernel's order. */
	size_t keep = 0;
	for (size_t k = 0; k < x.n; k++)
		if (x.v[k].count)
			x.v[keep++] = x.v[k];
	x.n = keep;
	ubt_sort(x.v, x.n, sizeof(*x.v), cmp_inline);	/* none: keyed references only */
	if (x.exists) {
		ret = store_item(t, et, &x);
	} else {
		uint8_t *p;
		ret = ubt_insert_item(t, et, &x.key, xitem_size(&x), &p);
		if (!ret)
			serialize(&x, p);
	}
out:
	free(x.v);
	return ret;
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
	struct ubt_wroot *et;
	int ret;

	ret = ubt_wroot_get(t, BTRFS_EXTENT_TREE_OBJECTID, &et);
	if (ret)
		return ret;
	t->grow.valid = false;	/* its reference is about to be applied */
	for (int round = 0; t->nrefs; round++) {
		if (round > 1000)
			return UBT_CORRUPT(0, "delayed references do not settle");
		struct ubt_dref *batch = t->refs;
		size_t n = t->nrefs;
		t->refs = NULL;
		t->nrefs = t->refs_cap = 0;
		free(t->ref_head);
		free(t->ref_next);
		t->ref_head = t->ref_next = NULL;
		t->ref_nbuckets = 0;
		ubt_sort(batch, n, sizeof(*batch), cmp_dref);
		struct csum_run csums = { 0, 0 };
		ret = 0;
		for (size_t i = 0; i < n && !ret;) {
			size_t j = i;
			while (j < n && batch[j].bytenr == batch[i].bytenr)
				j++;
			/* Which entry describes a new block: put it first. */
			for (size_t k = i; k < j; k++) {
				if (batch[k].new_block) {
					struct ubt_dref tmp = batch[i];
					batch[i] = batch[k];
					batch[k] = tmp;
					break;
				}
			}
			if (batch[i].new_block && batch[i].tree && !skinny(t->w->fs))
				fill_first_key(t, &batch[i]);
			ret = apply_extent(t, et, &batch[i], j - i, &csums);
			if (ret > 0)	/* a search status leaking out is a bug */
				ret = UBT_CORRUPT(batch[i].bytenr, "extent %llu: status %d",
						  (unsigned long long)batch[i].bytenr, ret);
			i = j;
		}
		if (!ret)
			ret = csum_run_flush(t, &csums);
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
					w->bgs[i].used);
		} else if (ret == 1) {
			ret = UBT_CORRUPT(bg->start, "block group item vanished");
		}
		ubt_path_release(&fs->tree, &path);
		if (ret)
			return ret;
		/* Writing the item may have changed `used` of this very group
		 * (a copied block), or moved the array (a new chunk): then it is
		 * dirty again for the next round. */
	}
	return 0;
}
