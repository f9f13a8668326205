/*
 * trans layer: the free-space tree (space cache v2) kept in step with the
 * in-memory allocation map of every block group the transaction touched.
 *
 * Items of one block group [start, end), all in tree 10:
 *   (start, FREE_SPACE_INFO, len)   struct btrfs_free_space_info:
 *                                   extent_count = number of maximal free
 *                                   runs (in both formats), flags =
 *                                   USING_BITMAPS or 0;
 *   extent format: (s, FREE_SPACE_EXTENT, l) for each free run, no body;
 *   bitmap format: (b, FREE_SPACE_BITMAP, l) tiling the group from its
 *                  start, each covering at most sectorsize * BITMAP_BITS
 *                  bytes (the last one shorter), body = one bit per
 *                  sector, bit i in byte i / 8 at value 1 << (i % 8),
 *                  set = free, rounded up to whole bytes.
 *
 * Method.  For a dirty group the wanted item set is derived from scratch
 * (free = group minus bg->extents), the items the tree holds in the group's
 * key range are read with the read-side iterator (dirty blocks are in the
 * same cache), and only the differences are written: items that are no
 * longer wanted are deleted (neighbours in one leaf in one call), wanted
 * items whose body changed but not its size are overwritten in place, and
 * missing items are inserted.  A group whose free space is what the tree
 * already says causes no tree operation at all, so the caller's loop
 * (every tree change may allocate a block and dirty a group again) ends.
 *
 * Format choice (the kernel's rule, from its per-group thresholds): a group
 * in extent format turns to bitmaps when its extent count exceeds
 * bitmap_high, a group in bitmap format turns back when the count falls
 * below bitmap_low, and in between it keeps the format its existing
 * FREE_SPACE_INFO records (a new group starts in extent format).
 *   range  = sectorsize * BITMAP_BITS            (bytes per bitmap item)
 *   high   = ceil(len / range) * (item header + BITMAP_SIZE) / item header
 *   low    = high > 100 ? high - 100 : 0
 * i.e. bitmaps once the extent items' headers would take more leaf space
 * than the bitmap items.  With 4 KiB sectors: 1 GiB -> 1438 / 1338,
 * 256 MiB -> 359 / 259, 8 MiB or less -> 11 / 0.
 *
 * The tree is maintained only when the superblock has both FREE_SPACE_TREE
 * and FREE_SPACE_TREE_VALID.  Without VALID the tree is known stale (the
 * kernel clears and rebuilds it on its next read-write mount), so it is left
 * alone, as it is when the filesystem has no free-space tree.
 *
 * The helpers above the UBT_FST_W_PURE_ONLY guard are pure (no tree, no
 * transaction) so that tests/unit/test_fst_w.c can include this file and
 * check them without the write engine.
 */
#include "trans/trans.h"

#include "base/base.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BTRFS_FREE_SPACE_BITMAP_SIZE
/* Bytes of a full FREE_SPACE_BITMAP item body. */
#define BTRFS_FREE_SPACE_BITMAP_SIZE 256
#endif
#ifndef BTRFS_FREE_SPACE_BITMAP_BITS
#define BTRFS_FREE_SPACE_BITMAP_BITS (BTRFS_FREE_SPACE_BITMAP_SIZE * 8)
#endif

/* Largest item body this file builds or compares (a full bitmap). */
#define FST_MAX_BODY BTRFS_FREE_SPACE_BITMAP_SIZE

/* ---- pure helpers ------------------------------------------------------ */

/* Bytes one bitmap item covers. */
static uint64_t fst_bitmap_range(uint32_t sectorsize)
{
	return (uint64_t)sectorsize * BTRFS_FREE_SPACE_BITMAP_BITS;
}

/* Body size of a bitmap item covering `len` bytes. */
static uint32_t fst_bitmap_bytes(uint64_t len, uint32_t sectorsize)
{
	uint64_t bits = len / sectorsize;
	return (uint32_t)((bits + 7) / 8);
}

/* The kernel's conversion thresholds of a group of `len` bytes. */
static void fst_thresholds(uint64_t len, uint32_t sectorsize, uint64_t *high, uint64_t *low)
{
	uint64_t range = fst_bitmap_range(sectorsize);
	uint64_t nbitmaps = (len + range - 1) / range;
	uint64_t item = sizeof(struct btrfs_item);
	uint64_t bitmap_bytes = nbitmaps * (item + BTRFS_FREE_SPACE_BITMAP_SIZE);

	*high = bitmap_bytes / item;
	*low = *high > 100 ? *high - 100 : 0;
}

/* Format of a group now in `cur_bitmaps` format with `count` free runs. */
static bool fst_want_bitmaps(bool cur_bitmaps, uint64_t count, uint64_t high, uint64_t low)
{
	if (!cur_bitmaps)
		return count > high;
	return !(count < low);
}

/*
 * Free runs of [start, start + len) given the allocated ranges alloc[0..n)
 * (sorted, disjoint; parts outside the group are ignored).  Each run is
 * shrunk to whole sectors (a partly allocated sector is not free) and empty
 * runs are dropped, so the runs are maximal, sorted and sector aligned.
 * out must hold n + 1 ranges; returns the number written.
 */
static size_t fst_free_runs(uint64_t start, uint64_t len, uint32_t sectorsize,
			    const struct ubt_range *alloc, size_t n, struct ubt_range *out)
{
	const uint64_t end = start + len;
	uint64_t pos = start;
	size_t nout = 0;

	for (size_t i = 0; i <= n; i++) {
		uint64_t stop = end, next = end;

		if (i < n) {
			uint64_t a = alloc[i].start, b = alloc[i].start + alloc[i].len;
			if (alloc[i].len == 0 || b <= pos)
				continue;
			if (a >= end)
				continue;	/* past the group; the final run follows */
			stop = a < pos ? pos : a;
			next = b < end ? b : end;
		}
		/* pos < end and end is aligned: rounding up cannot pass end. */
		uint64_t s = pos % sectorsize ? pos + (sectorsize - pos % sectorsize) : pos;
		uint64_t e = stop - stop % sectorsize;
		if (e > s) {
			out[nout].start = s;
			out[nout].len = e - s;
			nout++;
		}
		pos = next;
		if (pos >= end)
			break;
	}
	return nout;
}

/* Set `count` bits from bit `first` (LSB-first within each byte). */
static void fst_set_bits(uint8_t *map, uint64_t first, uint64_t count)
{
	while (count && (first & 7)) {
		map[first >> 3] |= (uint8_t)(1u << (first & 7));
		first++;
		count--;
	}
	if (count >= 8) {
		memset(map + (first >> 3), 0xff, (size_t)(count >> 3));
		first += count & ~(uint64_t)7;
		count &= 7;
	}
	while (count) {
		map[first >> 3] |= (uint8_t)(1u << (first & 7));
		first++;
		count--;
	}
}

/*
 * The body of the bitmap item covering [bstart, bstart + blen): one bit per
 * sector, set where the sector lies in a free run.  out holds
 * fst_bitmap_bytes(blen) bytes.
 */
static void fst_bitmap_fill(const struct ubt_range *runs, size_t nruns, uint32_t sectorsize,
			    uint64_t bstart, uint64_t blen, uint8_t *out)
{
	const uint64_t bend = bstart + blen;
	size_t lo = 0, hi = nruns;

	memset(out, 0, fst_bitmap_bytes(blen, sectorsize));
	/* First run that ends after bstart. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (runs[mid].start + runs[mid].len <= bstart)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < nruns && runs[i].start < bend; i++) {
		uint64_t s = runs[i].start > bstart ? runs[i].start : bstart;
		uint64_t e = runs[i].start + runs[i].len;
		if (e > bend)
			e = bend;
		if (e > s)
			fst_set_bits(out, (s - bstart) / sectorsize, (e - s) / sectorsize);
	}
}

/* The wanted items of one group: item 0 is FREE_SPACE_INFO, then the free
 * runs (extent format) or the bitmaps (bitmap format), in key order. */
struct fst_want {
	uint64_t start, len;
	uint32_t sectorsize;
	const struct ubt_range *runs;	/* free runs */
	size_t nruns;
	bool bitmaps;
	uint64_t range;		/* bytes per bitmap item */
	size_t nitems;
};

static void fst_want_init(struct fst_want *wt, uint64_t start, uint64_t len, uint32_t sectorsize,
			  const struct ubt_range *runs, size_t nruns, bool bitmaps)
{
	memset(wt, 0, sizeof(*wt));
	wt->start = start;
	wt->len = len;
	wt->sectorsize = sectorsize;
	wt->runs = runs;
	wt->nruns = nruns;
	wt->bitmaps = bitmaps;
	wt->range = fst_bitmap_range(sectorsize);
	wt->nitems = 1 + (bitmaps ? (size_t)((len + wt->range - 1) / wt->range) : nruns);
}

static void fst_want_key(const struct fst_want *wt, size_t k, struct btrfs_key *key)
{
	if (k == 0) {
		key->objectid = wt->start;
		key->type = BTRFS_FREE_SPACE_INFO_KEY;
		key->offset = wt->len;
	} else if (!wt->bitmaps) {
		key->objectid = wt->runs[k - 1].start;
		key->type = BTRFS_FREE_SPACE_EXTENT_KEY;
		key->offset = wt->runs[k - 1].len;
	} else {
		uint64_t b = wt->start + (uint64_t)(k - 1) * wt->range;
		uint64_t left = wt->start + wt->len - b;
		key->objectid = b;
		key->type = BTRFS_FREE_SPACE_BITMAP_KEY;
		key->offset = left < wt->range ? left : wt->range;
	}
}

static uint32_t fst_want_size(const struct fst_want *wt, const struct btrfs_key *key)
{
	switch (key->type) {
	case BTRFS_FREE_SPACE_INFO_KEY:
		return sizeof(struct btrfs_free_space_info);
	case BTRFS_FREE_SPACE_BITMAP_KEY:
		return fst_bitmap_bytes(key->offset, wt->sectorsize);
	default:
		return 0;
	}
}

/* Body of wanted item `key` into buf (fst_want_size bytes). */
static void fst_want_body(const struct fst_want *wt, const struct btrfs_key *key, uint8_t *buf)
{
	if (key->type == BTRFS_FREE_SPACE_INFO_KEY) {
		struct btrfs_free_space_info info;
		memset(&info, 0, sizeof(info));
		btrfs_set_free_space_info_extent_count(&info, (uint32_t)wt->nruns);
		uint32_t flags = wt->bitmaps ? (uint32_t)BTRFS_FREE_SPACE_USING_BITMAPS : 0;
		btrfs_set_free_space_info_flags(&info, flags);
		memcpy(buf, &info, sizeof(info));
	} else if (key->type == BTRFS_FREE_SPACE_BITMAP_KEY) {
		fst_bitmap_fill(wt->runs, wt->nruns, wt->sectorsize, key->objectid, key->offset,
				buf);
	}
}

/* Items found in the tree for a group's key range, in key order. */
struct fst_have_item {
	struct btrfs_key key;
	uint32_t size;
	size_t off;		/* body at data + off */
};
struct fst_have {
	struct fst_have_item *v;
	size_t n, cap;
	uint8_t *data;
	size_t dlen, dcap;
};

static int fst_have_add(struct fst_have *h, const struct btrfs_key *key, const uint8_t *body,
			uint32_t size)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct fst_have_item *v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	if (size > h->dcap - h->dlen) {
		size_t cap = h->dcap ? h->dcap : 4096;
		while (cap - h->dlen < size)
			cap *= 2;
		uint8_t *d = realloc(h->data, cap);
		if (!d)
			return -ENOMEM;
		h->data = d;
		h->dcap = cap;
	}
	h->v[h->n].key = *key;
	h->v[h->n].size = size;
	h->v[h->n].off = h->dlen;
	if (size)
		memcpy(h->data + h->dlen, body, size);
	h->dlen += size;
	h->n++;
	return 0;
}

static void fst_have_reset(struct fst_have *h)
{
	h->n = 0;
	h->dlen = 0;
}

static void fst_have_free(struct fst_have *h)
{
	free(h->v);
	free(h->data);
	memset(h, 0, sizeof(*h));
}

/* The format the tree records for the group: its INFO item's flag; a
 * missing or malformed INFO counts as extent format (a new group). */
static bool fst_have_bitmaps(const struct fst_have *h, uint64_t start, uint64_t len)
{
	if (h->n == 0)
		return false;
	const struct fst_have_item *it = &h->v[0];
	if (it->key.objectid != start || it->key.type != BTRFS_FREE_SPACE_INFO_KEY ||
	    it->key.offset != len || it->size != sizeof(struct btrfs_free_space_info))
		return false;
	const struct btrfs_free_space_info *info =
		(const struct btrfs_free_space_info *)(h->data + it->off);
	return (btrfs_free_space_info_flags(info) & BTRFS_FREE_SPACE_USING_BITMAPS) != 0;
}

/* One change to make.  DEL: delete the item at key.  SET: overwrite the
 * body of the item at key (same size) with wanted item `want`.  INS: insert
 * wanted item `want` at key.  Each kind appears in ascending key order. */
enum fst_op_kind { FST_OP_DEL, FST_OP_SET, FST_OP_INS };
struct fst_op {
	struct btrfs_key key;
	size_t want;
	enum fst_op_kind kind;
};
struct fst_ops {
	struct fst_op *v;
	size_t n, cap;
	size_t ndel, nset, nins;
};

static int fst_ops_add(struct fst_ops *o, enum fst_op_kind kind, const struct btrfs_key *key,
		       size_t want)
{
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		struct fst_op *v = realloc(o->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		o->v = v;
		o->cap = cap;
	}
	o->v[o->n].key = *key;
	o->v[o->n].want = want;
	o->v[o->n].kind = kind;
	o->n++;
	if (kind == FST_OP_DEL)
		o->ndel++;
	else if (kind == FST_OP_SET)
		o->nset++;
	else
		o->nins++;
	return 0;
}

static void fst_ops_reset(struct fst_ops *o)
{
	o->n = o->ndel = o->nset = o->nins = 0;
}

static void fst_ops_free(struct fst_ops *o)
{
	free(o->v);
	memset(o, 0, sizeof(*o));
}

/*
 * Compare what the tree has with what is wanted (both in key order) and
 * list the changes.  Identical content yields no operation.
 */
static int fst_diff(const struct fst_want *wt, const struct fst_have *h, struct fst_ops *ops)
{
	uint8_t body[FST_MAX_BODY];
	size_t j = 0, k = 0;
	int ret;

	fst_ops_reset(ops);
	while (j < h->n || k < wt->nitems) {
		struct btrfs_key wkey;
		int c;

		if (k < wt->nitems)
			fst_want_key(wt, k, &wkey);
		if (j == h->n)
			c = 1;
		else if (k == wt->nitems)
			c = -1;
		else
			c = btrfs_comp_keys(&h->v[j].key, &wkey);

		if (c < 0) {
			ret = fst_ops_add(ops, FST_OP_DEL, &h->v[j].key, 0);
			j++;
		} else if (c > 0) {
			ret = fst_ops_add(ops, FST_OP_INS, &wkey, k);
			k++;
		} else {
			uint32_t size = fst_want_size(wt, &wkey);
			const struct fst_have_item *it = &h->v[j];

			ret = 0;
			if (it->size != size) {
				ret = fst_ops_add(ops, FST_OP_DEL, &it->key, 0);
				if (!ret)
					ret = fst_ops_add(ops, FST_OP_INS, &wkey, k);
			} else if (size) {
				fst_want_body(wt, &wkey, body);
				if (memcmp(body, h->data + it->off, size) != 0)
					ret = fst_ops_add(ops, FST_OP_SET, &wkey, k);
			}
			j++;
			k++;
		}
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Everything decided for one group from its allocation map and the items
 * the tree holds: the free runs (*free_out, malloc'ed, caller frees), the
 * wanted items and the changes.
 */
static int fst_plan_group(uint64_t start, uint64_t len, uint32_t sectorsize,
			  const struct ubt_rangeset *alloc, const struct fst_have *h,
			  struct ubt_range **free_out, struct fst_want *wt, struct fst_ops *ops)
{
	struct ubt_range *free_runs;
	uint64_t high, low;
	size_t nfree;

	*free_out = NULL;
	free_runs = malloc((alloc->n + 1) * sizeof(*free_runs));
	if (!free_runs)
		return -ENOMEM;
	nfree = fst_free_runs(start, len, sectorsize, alloc->v, alloc->n, free_runs);
	if (nfree > UINT32_MAX) {
		free(free_runs);
		return -EOVERFLOW;
	}
	fst_thresholds(len, sectorsize, &high, &low);
	bool bitmaps = fst_want_bitmaps(fst_have_bitmaps(h, start, len), nfree, high, low);
	fst_want_init(wt, start, len, sectorsize, free_runs, nfree, bitmaps);
	*free_out = free_runs;
	return fst_diff(wt, h, ops);
}

#ifndef UBT_FST_W_PURE_ONLY

/* ---- tree side --------------------------------------------------------- */

static bool fst_maintained(const struct ubt_fs *fs)
{
	const uint64_t need = BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE |
			      BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID;

	return (btrfs_super_compat_ro_flags(&fs->vol->super) & need) == need;
}

/* Every item of the tree in the group's key range [(start), (end - 1)]. */
static int fst_read_group(struct ubt_fs *fs, const struct ubt_wroot *root, uint64_t start,
			  uint64_t len, struct fst_have *h)
{
	struct btrfs_key min = { .objectid = start, .type = 0, .offset = 0 };
	struct btrfs_key max = { .objectid = start + len - 1, .type = UINT8_MAX,
				 .offset = UINT64_MAX };
	struct ubt_iter it;
	int ret;

	fst_have_reset(h);
	ubt_iter_start(&it, &fs->tree, &root->ref, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		ret = fst_have_add(h, &it.key, it.data, it.size);
		if (ret)
			break;
	}
	ubt_iter_end(&it);
	return ret < 0 ? ret : 0;
}

static void fst_log_key(const char *what, const struct btrfs_key *key, int err)
{
	ubt_log(UBT_LOG_ERROR, "free space tree: %s (%llu %u %llu): %s", what,
		(unsigned long long)key->objectid, key->type, (unsigned long long)key->offset,
		ubt_strerror(err));
}

/* Delete the DEL items; neighbours that share a leaf go in one call. */
static int fst_apply_deletes(struct ubt_trans *t, struct ubt_wroot *root,
			     const struct fst_ops *ops)
{
	struct ubt_tree_ctx *tc = &t->w->fs->tree;
	size_t i = 0;

	while (i < ops->n) {
		if (ops->v[i].kind != FST_OP_DEL) {
			i++;
			continue;
		}
		struct ubt_path path;
		ubt_path_init(&path);
		int ret = ubt_search_slot_w(t, root, &ops->v[i].key, &path, -1);
		if (ret != 0) {
			ubt_path_release(tc, &path);
			if (ret > 0)
				ret = -EUCLEAN;	/* the read view listed it */
			fst_log_key("deleting item", &ops->v[i].key, ret);
			return ret;
		}
		const struct ubt_eb *leaf = path.nodes[0];
		int slot = path.slots[0], nr = (int)ubt_eb_nritems(leaf), n = 1;
		size_t next = i + 1;
		/* Later DELs continue the run while they are the next slots. */
		while (next < ops->n && slot + n < nr) {
			struct btrfs_key k;
			if (ops->v[next].kind != FST_OP_DEL) {
				next++;
				continue;
			}
			ubt_eb_item_key(leaf, slot + n, &k);
			if (btrfs_comp_keys(&k, &ops->v[next].key) != 0)
				break;
			n++;
			next++;
		}
		ret = ubt_del_items(t, root, &path, n);
		if (ret) {
			fst_log_key("deleting items from", &ops->v[i].key, ret);
			return ret;
		}
		i = next;
	}
	return 0;
}

/* Overwrite changed bodies in place (SET). */
static int fst_apply_sets(struct ubt_trans *t, struct ubt_wroot *root, const struct fst_want *wt,
			  const struct fst_ops *ops)
{
	struct ubt_tree_ctx *tc = &t->w->fs->tree;

	for (size_t i = 0; i < ops->n; i++) {
		const struct fst_op *op = &ops->v[i];
		if (op->kind != FST_OP_SET)
			continue;
		struct ubt_path path;
		ubt_path_init(&path);
		int ret = ubt_search_slot_w(t, root, &op->key, &path, 0);
		uint32_t size = fst_want_size(wt, &op->key);
		if (ret == 0 && ubt_eb_item_size(path.nodes[0], path.slots[0]) != size)
			ret = -EUCLEAN;
		if (ret == 0) {
			uint8_t *body = ubt_eb_witem_data(path.nodes[0], path.slots[0]);
			fst_want_body(wt, &op->key, body);
		}
		ubt_path_release(tc, &path);
		if (ret) {
			if (ret > 0)
				ret = -EUCLEAN;
			fst_log_key("updating item", &op->key, ret);
			return ret;
		}
	}
	return 0;
}

/* Insert the missing items (INS). */
static int fst_apply_inserts(struct ubt_trans *t, struct ubt_wroot *root,
			     const struct fst_want *wt, const struct fst_ops *ops)
{
	for (size_t i = 0; i < ops->n; i++) {
		const struct fst_op *op = &ops->v[i];
		if (op->kind != FST_OP_INS)
			continue;
		uint32_t size = fst_want_size(wt, &op->key);
		uint8_t *data = NULL;
		int ret = ubt_insert_item(t, root, &op->key, size, &data);
		if (ret) {
			fst_log_key("inserting item", &op->key, ret);
			return ret;
		}
		if (size)
			fst_want_body(wt, &op->key, data);
	}
	return 0;
}

/* Bring one group's items in line with its allocation map.  `alloc` (the
 * group's extents) is used only before the first tree change: a change may
 * allocate a block, which grows some group's rangeset or even the
 * block-group array, so neither may be touched afterwards. */
static int fst_update_group(struct ubt_trans *t, struct ubt_wroot *root, uint64_t start,
			    uint64_t len, const struct ubt_rangeset *alloc, struct fst_have *h,
			    struct fst_ops *ops)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_range *free_runs = NULL;
	struct fst_want wt;
	int ret;

	ret = fst_read_group(fs, root, start, len, h);
	if (ret)
		return ret;
	ret = fst_plan_group(start, len, fs->sectorsize, alloc, h, &free_runs, &wt, ops);
	if (ret)
		goto out;
	if (ops->n == 0)
		goto out;
	/* Deletes first: a DEL+INS pair for one key then works, and the
	 * inserts land in leaves that already lost the stale items. */
	ret = fst_apply_deletes(t, root, ops);
	if (!ret)
		ret = fst_apply_sets(t, root, &wt, ops);
	if (!ret)
		ret = fst_apply_inserts(t, root, &wt, ops);
out:
	free(free_runs);
	return ret;
}

int ubt_fst_update(struct ubt_trans *t)
{
	struct ubt_wfs *w = t->w;
	struct ubt_fs *fs = w->fs;
	struct ubt_wroot *root = NULL;
	struct fst_have have = { 0 };
	struct fst_ops ops = { 0 };
	const bool maintained = fst_maintained(fs);
	const uint32_t ss = fs->sectorsize;
	int ret = 0;

	/* Index-based and re-reading w->bgs / w->nbgs each round: a tree
	 * change may add a block group (and move the array).  A group that
	 * becomes dirty behind the cursor is left for the caller's next call. */
	for (size_t i = 0; i < w->nbgs; i++) {
		struct ubt_bg *bg = &w->bgs[i];

		if (!bg->dirty)
			continue;
		/* Cleared first: a change made while processing the group (a
		 * tree block allocated in it) dirties it again. */
		bg->dirty = false;
		if (!maintained)
			continue;
		if (!bg->loaded) {
			ubt_log(UBT_LOG_ERROR, "free space tree: block group %llu is dirty "
				"but its extents are not loaded", (unsigned long long)bg->start);
			ret = -EINVAL;
			break;
		}
		if (bg->len == 0 || ss == 0 || bg->start % ss || bg->len % ss ||
		    bg->start + bg->len < bg->start) {
			ret = UBT_CORRUPT(bg->start,
					  "block group %llu length %llu not sector aligned",
					  (unsigned long long)bg->start,
					  (unsigned long long)bg->len);
			break;
		}
		if (!root) {
			ret = ubt_wroot_get(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &root);
			if (ret) {
				ubt_log(UBT_LOG_ERROR,
					"free space tree: cannot open for writing: %s",
					ubt_strerror(ret));
				break;
			}
		}
		/* bg is not used after this call (see fst_update_group). */
		ret = fst_update_group(t, root, bg->start, bg->len, &bg->extents, &have, &ops);
		if (ret)
			break;
	}
	fst_have_free(&have);
	fst_ops_free(&ops);
	return ret;
}

#endif /* UBT_FST_W_PURE_ONLY */
