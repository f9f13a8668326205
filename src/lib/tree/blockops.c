/*
 * tree layer: in-block primitives of the copy-on-write B-tree (blockops.h).
 *
 * Leaf layout, as the checker enforces it: item headers follow the block
 * header from the front; item data is packed from the end of the block
 * backwards, item i's data directly above item i + 1's.  Offsets are
 * relative to the end of the block header, so the data area is
 * [0, cap) with cap = btrfs_leaf_data_size(nodesize), item 0's data ends at
 * cap and the lowest item's data starts at "data_start"; the free space is
 * [nritems * sizeof(item), data_start).  Every change below is a memmove of
 * the data between data_start and some item boundary plus a fix-up of the
 * offsets of the items whose data moved.
 *
 * Each public function decodes its block(s) with leaf_get()/node_get(),
 * which verify the whole item table (leaves) or the pointer count (nodes),
 * then checks its arguments against that, and only then writes.  The four
 * changes a write makes most (insert, delete, extend, truncate of items in
 * one leaf) verify only the part of the table they move, leaf_get_from():
 * the items from the slot on, whose data and offsets they shift.  Every
 * byte they read or write is then inside the block; a damaged entry above
 * the slot, which they neither read nor move, is left for the tree checker
 * every dirty block passes before it is written (trans.c).
 *
 * Locks: none (pure functions on caller-owned buffers).
 */
#include "tree/blockops.h"

#include "base/base.h"

#include <string.h>

#define HDR_SIZE	((uint32_t)sizeof(struct btrfs_header))
#define ITEM_SIZE	((uint32_t)sizeof(struct btrfs_item))
#define KP_SIZE		((uint32_t)sizeof(struct btrfs_key_ptr))

bool ubt_nodesize_valid(uint32_t nodesize)
{
	return UBT_IS_POW2(nodesize) && nodesize >= 4096 &&
	       nodesize <= BTRFS_MAX_METADATA_BLOCKSIZE;
}

/* ---- whole blocks ------------------------------------------------------- */

int ubt_block_init(uint8_t *blk, uint32_t nodesize, const struct ubt_block_hdr *h)
{
	struct btrfs_header *hdr = (struct btrfs_header *)blk;

	if (!blk || !h || !h->fsid || !h->chunk_tree_uuid || !ubt_nodesize_valid(nodesize))
		return -EINVAL;
	if (h->level >= BTRFS_MAX_LEVEL)
		return -EINVAL;
	if (h->flags & ~(BTRFS_HEADER_FLAG_WRITTEN | BTRFS_HEADER_FLAG_RELOC))
		return -EINVAL;
	memset(blk, 0, nodesize);
	memcpy(btrfs_header_fsid(hdr), h->fsid, BTRFS_FSID_SIZE);
	btrfs_set_header_bytenr(hdr, h->bytenr);
	btrfs_set_header_flags(hdr, BTRFS_HEADER_FLAG_WRITTEN | h->flags);
	btrfs_set_header_backref_rev(hdr, BTRFS_MIXED_BACKREF_REV);
	memcpy(btrfs_header_chunk_tree_uuid(hdr), h->chunk_tree_uuid, BTRFS_UUID_SIZE);
	btrfs_set_header_generation(hdr, h->generation);
	btrfs_set_header_owner(hdr, h->owner);
	btrfs_set_header_nritems(hdr, 0);
	btrfs_set_header_level(hdr, h->level);
	return 0;
}

int ubt_block_finish(const struct ubt_check_ctx *c, uint8_t *blk)
{
	const struct btrfs_header *hdr = (const struct btrfs_header *)blk;
	int ret;

	if (!c || !blk || !ubt_nodesize_valid(c->nodesize))
		return -EINVAL;
	if (memcmp(btrfs_header_fsid(hdr), c->fsid, BTRFS_FSID_SIZE) != 0)
		return -EINVAL;
	if (!(btrfs_header_flags(hdr) & BTRFS_HEADER_FLAG_WRITTEN))
		return -EINVAL;
	if (btrfs_header_level(hdr) == 0)
		ret = ubt_check_leaf(c, blk);
	else
		ret = ubt_check_node(c, blk);
	if (ret)
		return ret;
	return ubt_tree_block_set_csum(c, blk);
}

/* ---- leaves: decoding ----------------------------------------------------- */

/* A leaf whose item table leaf_get() verified. */
struct leaf {
	uint8_t *b;
	uint32_t nr;		/* nritems */
	uint32_t cap;		/* size of the data area (item offsets are below it) */
	uint32_t data_start;	/* offset of the lowest item's data; cap when empty */
};

static inline struct btrfs_item *l_item(const struct leaf *l, uint32_t slot)
{
	return btrfs_leaf_item(l->b, slot);
}

static inline uint32_t l_off(const struct leaf *l, uint32_t slot)
{
	return btrfs_item_offset(l_item(l, slot));
}

static inline uint32_t l_size(const struct leaf *l, uint32_t slot)
{
	return btrfs_item_size(l_item(l, slot));
}

/* End of item @slot's data = start of item slot - 1's (cap for slot 0). */
static inline uint32_t l_end(const struct leaf *l, uint32_t slot)
{
	return slot == 0 ? l->cap : l_off(l, slot - 1);
}

static inline uint8_t *l_data(const struct leaf *l, uint32_t off)
{
	return l->b + HDR_SIZE + off;
}

static inline uint32_t l_free(const struct leaf *l)
{
	return l->data_start - l->nr * ITEM_SIZE;
}

static inline void l_key(const struct leaf *l, uint32_t slot, struct btrfs_key *key)
{
	btrfs_disk_key_to_cpu(key, btrfs_item_key(l_item(l, slot)));
}

/* Add @delta (mod 2^32, so "subtract" works too) to the offsets of [from, to). */
static void l_shift_offsets(const struct leaf *l, uint32_t from, uint32_t to, uint32_t delta)
{
	for (uint32_t i = from; i < to; i++) {
		struct btrfs_item *it = l_item(l, i);

		btrfs_set_item_offset(it, btrfs_item_offset(it) + delta);
	}
}

static void l_set_nritems(struct leaf *l, uint32_t nr)
{
	l->nr = nr;
	btrfs_set_header_nritems((struct btrfs_header *)l->b, nr);
}

/*
 * O(1) view for the reading functions: level 0 and the item headers inside
 * the block, nothing else (data_start is not computed).  Each reader then
 * checks exactly the offsets it uses.
 */
static int leaf_peek(struct leaf *l, const uint8_t *blk, uint32_t nodesize)
{
	const struct btrfs_header *hdr = (const struct btrfs_header *)blk;

	if (!blk || !ubt_nodesize_valid(nodesize) || btrfs_header_level(hdr) != 0)
		return -EINVAL;
	l->b = (uint8_t *)(uintptr_t)blk;
	l->nr = btrfs_header_nritems(hdr);
	l->cap = btrfs_leaf_data_size(nodesize);
	l->data_start = 0;
	if (l->nr > l->cap / ITEM_SIZE)
		return -EINVAL;
	return 0;
}

/*
 * Decode and verify a leaf for a change: leaf_peek, then the data of every
 * item from slot @from on ending exactly where the previous item's begins
 * (item 0's at cap; item from - 1's start inside the data area) and the
 * lowest item's data above the item headers.  After this every offset and
 * size of items from - 1 on is safe to compute with (leaf_get: all).
 */
static int leaf_get_from(struct leaf *l, const uint8_t *blk, uint32_t nodesize, int from)
{
	uint32_t expect_end, first;
	int ret = leaf_peek(l, blk, nodesize);

	if (ret)
		return ret;
	/* A slot out of range checks everything (the caller refuses it). */
	first = from > 0 && (uint32_t)from <= l->nr ? (uint32_t)from : 0;
	expect_end = first == 0 ? l->cap : l_off(l, first - 1);
	if (expect_end > l->cap)
		return -EINVAL;
	for (uint32_t slot = first; slot < l->nr; slot++) {
		uint32_t off = l_off(l, slot), size = l_size(l, slot);

		if ((uint64_t)off + size != expect_end)
			return -EINVAL;
		expect_end = off;
	}
	if (expect_end < l->nr * ITEM_SIZE)
		return -EINVAL;
	l->data_start = expect_end;
	return 0;
}

static int leaf_get(struct leaf *l, const uint8_t *blk, uint32_t nodesize)
{
	return leaf_get_from(l, blk, nodesize, 0);
}

/* Is [slot, slot + nr) a range of existing items (nr may be 0)? */
static bool range_ok(int slot, int nr, uint32_t nritems)
{
	return slot >= 0 && nr >= 0 && (uint64_t)slot + (uint64_t)nr <= nritems;
}

/* Bytes items [slot, slot + nr) use: headers plus data.  Range checked. */
static uint32_t l_used(const struct leaf *l, uint32_t slot, uint32_t nr)
{
	if (nr == 0)
		return 0;
	return nr * ITEM_SIZE + l_end(l, slot) - l_off(l, slot + nr - 1);
}

/* ---- leaves: reading ---------------------------------------------------- */

int ubt_leaf_free_space(const uint8_t *blk, uint32_t nodesize)
{
	uint32_t last, off, size;
	struct leaf l;
	int ret = leaf_peek(&l, blk, nodesize);

	if (ret)
		return ret;
	if (l.nr == 0)
		return (int)l.cap;
	/* The lowest item: its data must end at the one above and start
	 * above the item headers. */
	last = l.nr - 1;
	off = l_off(&l, last);
	size = l_size(&l, last);
	if ((uint64_t)off + size != l_end(&l, last) || l_end(&l, last) > l.cap ||
	    off < l.nr * ITEM_SIZE)
		return -EINVAL;
	return (int)(off - l.nr * ITEM_SIZE);
}

int ubt_leaf_space_used(const uint8_t *blk, uint32_t nodesize, int slot, int nr)
{
	uint32_t top, bottom;
	struct leaf l;
	int ret = leaf_peek(&l, blk, nodesize);

	if (ret)
		return ret;
	if (!range_ok(slot, nr, l.nr))
		return -EINVAL;
	if (nr == 0)
		return 0;
	top = l_end(&l, (uint32_t)slot);
	bottom = l_off(&l, (uint32_t)(slot + nr - 1));
	if (top > l.cap || bottom > top)
		return -EINVAL;
	return (int)((uint32_t)nr * ITEM_SIZE + top - bottom);
}

int ubt_leaf_item_key(const uint8_t *blk, uint32_t nodesize, int slot, struct btrfs_key *key)
{
	struct leaf l;
	int ret = leaf_peek(&l, blk, nodesize);

	if (ret)
		return ret;
	if (!key || !range_ok(slot, 1, l.nr))
		return -EINVAL;
	l_key(&l, (uint32_t)slot, key);
	return 0;
}

uint8_t *ubt_leaf_item_data(const uint8_t *blk, uint32_t nodesize, int slot, uint32_t *size)
{
	uint32_t off, sz;
	struct leaf l;

	if (leaf_peek(&l, blk, nodesize) || !range_ok(slot, 1, l.nr))
		return NULL;
	off = l_off(&l, (uint32_t)slot);
	sz = l_size(&l, (uint32_t)slot);
	if (off < l.nr * ITEM_SIZE || (uint64_t)off + sz > l.cap)
		return NULL;
	if (size)
		*size = sz;
	return l_data(&l, off);
}

/* ---- leaves: changing items in place ------------------------------------ */

/*
 * Would @key at a position between slots lo and hi (lo = -1: no lower
 * neighbour, hi = nr: no upper one) keep the leaf's keys strictly ordered?
 */
static bool l_key_fits(const struct leaf *l, int lo, uint32_t hi, const struct btrfs_key *key)
{
	struct btrfs_key k;

	if (lo >= 0) {
		l_key(l, (uint32_t)lo, &k);
		if (btrfs_comp_keys(&k, key) >= 0)
			return false;
	}
	if (hi < l->nr) {
		l_key(l, hi, &k);
		if (btrfs_comp_keys(key, &k) >= 0)
			return false;
	}
	return true;
}

int ubt_leaf_insert_items(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *keys,
			  const uint32_t *sizes, int nr)
{
	uint64_t total = 0;
	uint32_t s, n, d, top, off;
	struct leaf l;
	int ret = leaf_get_from(&l, blk, nodesize, slot);

	if (ret)
		return ret;
	if (slot < 0 || (uint32_t)slot > l.nr || nr < 0)
		return -EINVAL;
	if (nr == 0)
		return 0;
	if (!keys || !sizes)
		return -EINVAL;
	s = (uint32_t)slot;
	n = (uint32_t)nr;
	/* More headers than could ever fit: refuse before reading the arrays. */
	if ((uint64_t)n * ITEM_SIZE > l_free(&l))
		return -ENOSPC;
	for (uint32_t i = 0; i < n; i++) {
		total += sizes[i];
		if (i > 0 && btrfs_comp_keys(&keys[i - 1], &keys[i]) >= 0)
			return -EINVAL;
	}
	/* keys[0] above slot - 1's key, keys[n - 1] below slot's. */
	if (!l_key_fits(&l, slot - 1, l.nr, &keys[0]) || !l_key_fits(&l, -1, s, &keys[n - 1]))
		return -EINVAL;
	if ((uint64_t)n * ITEM_SIZE + total > l_free(&l))
		return -ENOSPC;
	d = (uint32_t)total;

	/* The new items' data goes right below item slot - 1's: [top - d, top). */
	top = l_end(&l, s);
	/* Data of items [s, nr) is [data_start, top): move it down by d. */
	memmove(l_data(&l, l.data_start - d), l_data(&l, l.data_start), top - l.data_start);
	l_shift_offsets(&l, s, l.nr, -d);
	memmove(l_item(&l, s + n), l_item(&l, s), (size_t)(l.nr - s) * ITEM_SIZE);
	off = top;
	for (uint32_t i = 0; i < n; i++) {
		struct btrfs_item *it = l_item(&l, s + i);

		off -= sizes[i];
		btrfs_cpu_key_to_disk(btrfs_item_key(it), &keys[i]);
		btrfs_set_item_offset(it, off);
		btrfs_set_item_size(it, sizes[i]);
	}
	memset(l_data(&l, top - d), 0, d);
	l_set_nritems(&l, l.nr + n);
	return 0;
}

int ubt_leaf_insert_item(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key,
			 uint32_t size)
{
	return ubt_leaf_insert_items(blk, nodesize, slot, key, &size, 1);
}

int ubt_leaf_delete_items(uint8_t *blk, uint32_t nodesize, int slot, int nr)
{
	uint32_t s, n, bottom, d;
	struct leaf l;
	int ret = leaf_get_from(&l, blk, nodesize, slot);

	if (ret)
		return ret;
	if (!range_ok(slot, nr, l.nr))
		return -EINVAL;
	if (nr == 0)
		return 0;
	s = (uint32_t)slot;
	n = (uint32_t)nr;
	/* The deleted items' data is [bottom, end of item s). */
	bottom = l_off(&l, s + n - 1);
	d = l_end(&l, s) - bottom;
	/* Data of items [s + n, nr) is [data_start, bottom): move it up by d. */
	memmove(l_data(&l, l.data_start + d), l_data(&l, l.data_start), bottom - l.data_start);
	l_shift_offsets(&l, s + n, l.nr, d);
	memmove(l_item(&l, s), l_item(&l, s + n), (size_t)(l.nr - s - n) * ITEM_SIZE);
	memset(l_item(&l, l.nr - n), 0, (size_t)n * ITEM_SIZE);
	memset(l_data(&l, l.data_start), 0, d);
	l_set_nritems(&l, l.nr - n);
	return 0;
}

int ubt_leaf_extend_item(uint8_t *blk, uint32_t nodesize, int slot, uint32_t extra)
{
	uint32_t s, end;
	struct leaf l;
	int ret = leaf_get_from(&l, blk, nodesize, slot);

	if (ret)
		return ret;
	if (!range_ok(slot, 1, l.nr))
		return -EINVAL;
	if (extra == 0)
		return 0;
	if (extra > l_free(&l))
		return -ENOSPC;
	s = (uint32_t)slot;
	end = l_end(&l, s);
	/*
	 * Item s keeps its end; its data and all data below it move down by
	 * extra, which opens [end - extra, end) as the new tail of item s.
	 */
	memmove(l_data(&l, l.data_start - extra), l_data(&l, l.data_start), end - l.data_start);
	l_shift_offsets(&l, s, l.nr, -extra);
	btrfs_set_item_size(l_item(&l, s), l_size(&l, s) + extra);
	memset(l_data(&l, end - extra), 0, extra);
	return 0;
}

int ubt_leaf_truncate_item(uint8_t *blk, uint32_t nodesize, int slot, uint32_t new_size,
			   bool cut_front)
{
	uint32_t s, size, off, d, keep_to;
	struct leaf l;
	int ret = leaf_get_from(&l, blk, nodesize, slot);

	if (ret)
		return ret;
	if (!range_ok(slot, 1, l.nr))
		return -EINVAL;
	s = (uint32_t)slot;
	size = l_size(&l, s);
	if (new_size > size)
		return -EINVAL;
	if (new_size == size)
		return 0;
	off = l_off(&l, s);
	d = size - new_size;
	/*
	 * Item s keeps its end, so its new data is [off + d, end).  Cutting
	 * the front, the kept bytes are already there and only the data below
	 * item s moves up; cutting the end, the kept front [off, off +
	 * new_size) moves up by d together with the data below it.
	 */
	keep_to = cut_front ? off : off + new_size;
	memmove(l_data(&l, l.data_start + d), l_data(&l, l.data_start), keep_to - l.data_start);
	l_shift_offsets(&l, s, l.nr, d);
	btrfs_set_item_size(l_item(&l, s), new_size);
	memset(l_data(&l, l.data_start), 0, d);
	return 0;
}

int ubt_leaf_set_key(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key)
{
	struct leaf l;
	int ret = leaf_get(&l, blk, nodesize);

	if (ret)
		return ret;
	if (!key || !range_ok(slot, 1, l.nr))
		return -EINVAL;
	if (!l_key_fits(&l, slot - 1, (uint32_t)slot + 1, key))
		return -EINVAL;
	btrfs_cpu_key_to_disk(btrfs_item_key(l_item(&l, (uint32_t)slot)), key);
	return 0;
}

/* ---- leaves: moving items between neighbours ----------------------------- */

/* Decode two neighbour leaves; their keys must be in order at the boundary. */
static int leaf_pair_get(struct leaf *left, struct leaf *right, const uint8_t *lb,
			 const uint8_t *rb, uint32_t nodesize)
{
	int ret;

	if (lb == rb)
		return -EINVAL;
	ret = leaf_get(left, lb, nodesize);
	if (ret)
		return ret;
	ret = leaf_get(right, rb, nodesize);
	if (ret)
		return ret;
	if (left->nr && right->nr) {
		struct btrfs_key a, b;

		l_key(left, left->nr - 1, &a);
		l_key(right, 0, &b);
		if (btrfs_comp_keys(&a, &b) >= 0)
			return -EINVAL;
	}
	return 0;
}

/* Move the last k (>= 1) items of @l to the front of @r (space checked). */
static void leaf_move_right(struct leaf *l, struct leaf *r, uint32_t k)
{
	uint32_t first = l->nr - k;
	uint32_t lend = l_end(l, first);	/* top of the moving data in l */
	uint32_t d = lend - l->data_start;	/* bytes of moving data */

	/* Open room at the front of r: its data down by d, headers up by k. */
	memmove(l_data(r, r->data_start - d), l_data(r, r->data_start), r->cap - r->data_start);
	l_shift_offsets(r, 0, r->nr, -d);
	memmove(l_item(r, k), l_item(r, 0), (size_t)r->nr * ITEM_SIZE);

	/* The moved data becomes the top of r's data area. */
	memcpy(l_data(r, r->cap - d), l_data(l, l->data_start), d);
	memcpy(l_item(r, 0), l_item(l, first), (size_t)k * ITEM_SIZE);
	l_shift_offsets(r, 0, k, r->cap - lend);

	memset(l_item(l, first), 0, (size_t)k * ITEM_SIZE);
	memset(l_data(l, l->data_start), 0, d);
	l_set_nritems(r, r->nr + k);
	l_set_nritems(l, first);
}

int ubt_leaf_split(uint8_t *left, uint8_t *right, uint32_t nodesize, int slot)
{
	struct leaf l, r;
	int ret = leaf_pair_get(&l, &r, left, right, nodesize);

	if (ret)
		return ret;
	if (r.nr != 0 || slot < 0 || (uint32_t)slot > l.nr)
		return -EINVAL;
	/* Items that fit one leaf fit an empty one: no space check needed. */
	if ((uint32_t)slot < l.nr)
		leaf_move_right(&l, &r, l.nr - (uint32_t)slot);
	return 0;
}

int ubt_leaf_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, int k)
{
	struct leaf l, r;
	int ret = leaf_pair_get(&l, &r, left, right, nodesize);

	if (ret)
		return ret;
	if (k < 0 || (uint32_t)k > l.nr)
		return -EINVAL;
	if (k == 0)
		return 0;
	if (l_used(&l, l.nr - (uint32_t)k, (uint32_t)k) > l_free(&r))
		return -ENOSPC;
	leaf_move_right(&l, &r, (uint32_t)k);
	return 0;
}

int ubt_leaf_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, int k)
{
	uint32_t n, rbottom, d;
	struct leaf l, r;
	int ret = leaf_pair_get(&l, &r, left, right, nodesize);

	if (ret)
		return ret;
	if (k < 0 || (uint32_t)k > r.nr)
		return -EINVAL;
	if (k == 0)
		return 0;
	n = (uint32_t)k;
	if (l_used(&r, 0, n) > l_free(&l))
		return -ENOSPC;
	rbottom = l_off(&r, n - 1);	/* the moving data is [rbottom, cap) of r */
	d = r.cap - rbottom;

	/* Append: the data right below l's, the headers after l's. */
	memcpy(l_data(&l, l.data_start - d), l_data(&r, rbottom), d);
	memcpy(l_item(&l, l.nr), l_item(&r, 0), (size_t)n * ITEM_SIZE);
	l_shift_offsets(&l, l.nr, l.nr + n, l.data_start - r.cap);

	/* Close the gap in r: the remaining data up by d, headers down by n. */
	memmove(l_data(&r, r.data_start + d), l_data(&r, r.data_start), rbottom - r.data_start);
	l_shift_offsets(&r, n, r.nr, d);
	memmove(l_item(&r, 0), l_item(&r, n), (size_t)(r.nr - n) * ITEM_SIZE);
	memset(l_item(&r, r.nr - n), 0, (size_t)n * ITEM_SIZE);
	memset(l_data(&r, r.data_start), 0, d);
	l_set_nritems(&l, l.nr + n);
	l_set_nritems(&r, r.nr - n);
	return 0;
}

int ubt_leaf_push_left_max(const uint8_t *blk, uint32_t nodesize, uint32_t space, int max_k)
{
	struct leaf l;
	uint32_t k, lim;
	int ret = leaf_get(&l, blk, nodesize);

	if (ret)
		return ret;
	if (max_k < 0)
		return -EINVAL;
	lim = UBT_MIN(l.nr, (uint32_t)max_k);
	/* l_used(0, k) grows with k: the first k that overflows stops the scan. */
	for (k = 0; k < lim && l_used(&l, 0, k + 1) <= space; k++)
		;
	return (int)k;
}

int ubt_leaf_push_right_max(const uint8_t *blk, uint32_t nodesize, uint32_t space, int max_k)
{
	struct leaf l;
	uint32_t k, lim;
	int ret = leaf_get(&l, blk, nodesize);

	if (ret)
		return ret;
	if (max_k < 0)
		return -EINVAL;
	lim = UBT_MIN(l.nr, (uint32_t)max_k);
	for (k = 0; k < lim && l_used(&l, l.nr - k - 1, k + 1) <= space; k++)
		;
	return (int)k;
}

int ubt_leaf_split_plan(const uint8_t *blk, uint32_t nodesize, int slot, uint32_t data_size,
			struct ubt_leaf_split_plan *plan)
{
	uint64_t need, total, best = UINT64_MAX;
	uint32_t p;
	struct leaf l;
	int ret = leaf_get(&l, blk, nodesize);

	if (ret)
		return ret;
	if (!plan || slot < 0 || (uint32_t)slot > l.nr || l.nr == 0)
		return -EINVAL;
	need = (uint64_t)ITEM_SIZE + data_size;
	if (need > l.cap)
		return -E2BIG;
	p = (uint32_t)slot;
	total = l_used(&l, 0, l.nr);

	/*
	 * Think of the n + 1 items with the new one inserted at P and cut
	 * that sequence before position c, 1 <= c <= n, so neither side is
	 * empty.  c <= P puts the new item into the right part (leaf split at
	 * c, item at slot P - c of the right leaf); c > P puts it at the end
	 * of the left part (leaf split at c - 1, item at slot P of the left
	 * leaf).  The side without the new item is a part of the old leaf
	 * and always fits; keep the cut whose fuller side is least full.
	 */
	for (uint32_t c = 1; c <= l.nr; c++) {
		uint32_t split = c <= p ? c : c - 1;
		uint64_t left = l_used(&l, 0, split);
		uint64_t right = total - left;
		uint64_t worst;

		if (c <= p)
			right += need;
		else
			left += need;
		if (left > l.cap || right > l.cap)
			continue;
		worst = UBT_MAX(left, right);
		if (worst < best) {
			best = worst;
			plan->split = (int)split;
			plan->dest = c <= p ? UBT_SPLIT_DEST_RIGHT : UBT_SPLIT_DEST_LEFT;
		}
	}
	if (best == UINT64_MAX) {
		/*
		 * Neither [0, P) nor [P, n) can share a leaf with the item;
		 * every other cut puts a superset of one of them beside it.
		 * At P == 0 or n the cut c = 1 or n leaves it alone and always
		 * fits, so this is 0 < P < n.
		 */
		plan->split = slot;
		plan->dest = UBT_SPLIT_DEST_ALONE;
	}
	return 0;
}

/* ---- nodes ---------------------------------------------------------------- */

struct node {
	uint8_t *b;
	uint32_t nr, max;
	uint8_t level;
};

static inline struct btrfs_key_ptr *n_ptr(const struct node *n, uint32_t slot)
{
	return btrfs_node_key_ptr(n->b, slot);
}

static inline void n_key(const struct node *n, uint32_t slot, struct btrfs_key *key)
{
	btrfs_disk_key_to_cpu(key, btrfs_key_ptr_key(n_ptr(n, slot)));
}

static void n_set_nritems(struct node *n, uint32_t nr)
{
	n->nr = nr;
	btrfs_set_header_nritems((struct btrfs_header *)n->b, nr);
}

static int node_get(struct node *n, const uint8_t *blk, uint32_t nodesize)
{
	const struct btrfs_header *hdr = (const struct btrfs_header *)blk;

	if (!blk || !ubt_nodesize_valid(nodesize))
		return -EINVAL;
	n->b = (uint8_t *)(uintptr_t)blk;
	n->level = btrfs_header_level(hdr);
	n->nr = btrfs_header_nritems(hdr);
	n->max = btrfs_node_ptrs_per_block(nodesize);
	if (n->level == 0 || n->level >= BTRFS_MAX_LEVEL || n->nr > n->max)
		return -EINVAL;
	return 0;
}

/* As l_key_fits: is @key strictly between slots lo (-1: none) and hi? */
static bool n_key_fits(const struct node *n, int lo, uint32_t hi, const struct btrfs_key *key)
{
	struct btrfs_key k;

	if (lo >= 0) {
		n_key(n, (uint32_t)lo, &k);
		if (btrfs_comp_keys(&k, key) >= 0)
			return false;
	}
	if (hi < n->nr) {
		n_key(n, hi, &k);
		if (btrfs_comp_keys(key, &k) >= 0)
			return false;
	}
	return true;
}

int ubt_node_free_slots(const uint8_t *blk, uint32_t nodesize)
{
	struct node n;
	int ret = node_get(&n, blk, nodesize);

	if (ret)
		return ret;
	return (int)(n.max - n.nr);
}

int ubt_node_get_ptr(const uint8_t *blk, uint32_t nodesize, int slot, struct btrfs_key *key,
		     uint64_t *blockptr, uint64_t *gen)
{
	const struct btrfs_key_ptr *kp;
	struct node n;
	int ret = node_get(&n, blk, nodesize);

	if (ret)
		return ret;
	if (!range_ok(slot, 1, n.nr))
		return -EINVAL;
	kp = n_ptr(&n, (uint32_t)slot);
	if (key)
		btrfs_disk_key_to_cpu(key, btrfs_key_ptr_key(kp));
	if (blockptr)
		*blockptr = btrfs_key_ptr_blockptr(kp);
	if (gen)
		*gen = btrfs_key_ptr_generation(kp);
	return 0;
}

int ubt_node_insert_ptr(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key,
			uint64_t blockptr, uint64_t gen)
{
	struct btrfs_key_ptr *kp;
	struct node n;
	int ret = node_get(&n, blk, nodesize);

	if (ret)
		return ret;
	if (!key || slot < 0 || (uint32_t)slot > n.nr || blockptr == 0 || gen == 0)
		return -EINVAL;
	if (!n_key_fits(&n, slot - 1, (uint32_t)slot, key))
		return -EINVAL;
	if (n.nr == n.max)
		return -ENOSPC;
	memmove(n_ptr(&n, (uint32_t)slot + 1), n_ptr(&n, (uint32_t)slot),
		(size_t)(n.nr - (uint32_t)slot) * KP_SIZE);
	kp = n_ptr(&n, (uint32_t)slot);
	btrfs_cpu_key_to_disk(btrfs_key_ptr_key(kp), key);
	btrfs_set_key_ptr_blockptr(kp, blockptr);
	btrfs_set_key_ptr_generation(kp, gen);
	n_set_nritems(&n, n.nr + 1);
	return 0;
}

int ubt_node_delete_ptrs(uint8_t *blk, uint32_t nodesize, int slot, int nr)
{
	uint32_t s, k;
	struct node n;
	int ret = node_get(&n, blk, nodesize);

	if (ret)
		return ret;
	if (!range_ok(slot, nr, n.nr))
		return -EINVAL;
	if (nr == 0)
		return 0;
	s = (uint32_t)slot;
	k = (uint32_t)nr;
	memmove(n_ptr(&n, s), n_ptr(&n, s + k), (size_t)(n.nr - s - k) * KP_SIZE);
	memset(n_ptr(&n, n.nr - k), 0, (size_t)k * KP_SIZE);
	n_set_nritems(&n, n.nr - k);
	return 0;
}

int ubt_node_set_key(uint8_t *blk, uint32_t nodesize, int slot, const struct btrfs_key *key)
{
	struct node n;
	int ret = node_get(&n, blk, nodesize);

	if (ret)
		return ret;
	if (!key || !range_ok(slot, 1, n.nr))
		return -EINVAL;
	if (!n_key_fits(&n, slot - 1, (uint32_t)slot + 1, key))
		return -EINVAL;
	btrfs_cpu_key_to_disk(btrfs_key_ptr_key(n_ptr(&n, (uint32_t)slot)), key);
	return 0;
}

int ubt_node_set_ptr(uint8_t *blk, uint32_t nodesize, int slot, uint64_t blockptr, uint64_t gen)
{
	struct btrfs_key_ptr *kp;
	struct node n;
	int ret = node_get(&n, blk, nodesize);

	if (ret)
		return ret;
	if (!range_ok(slot, 1, n.nr) || blockptr == 0 || gen == 0)
		return -EINVAL;
	kp = n_ptr(&n, (uint32_t)slot);
	btrfs_set_key_ptr_blockptr(kp, blockptr);
	btrfs_set_key_ptr_generation(kp, gen);
	return 0;
}

/* Decode two neighbour nodes of one level, keys in order at the boundary. */
static int node_pair_get(struct node *left, struct node *right, const uint8_t *lb,
			 const uint8_t *rb, uint32_t nodesize)
{
	int ret;

	if (lb == rb)
		return -EINVAL;
	ret = node_get(left, lb, nodesize);
	if (ret)
		return ret;
	ret = node_get(right, rb, nodesize);
	if (ret)
		return ret;
	if (left->level != right->level)
		return -EINVAL;
	if (left->nr && right->nr) {
		struct btrfs_key a, b;

		n_key(left, left->nr - 1, &a);
		n_key(right, 0, &b);
		if (btrfs_comp_keys(&a, &b) >= 0)
			return -EINVAL;
	}
	return 0;
}

/* Move the last k pointers of @l to the front of @r (room checked). */
static void node_move_right(struct node *l, struct node *r, uint32_t k)
{
	uint32_t first = l->nr - k;

	memmove(n_ptr(r, k), n_ptr(r, 0), (size_t)r->nr * KP_SIZE);
	memcpy(n_ptr(r, 0), n_ptr(l, first), (size_t)k * KP_SIZE);
	memset(n_ptr(l, first), 0, (size_t)k * KP_SIZE);
	n_set_nritems(r, r->nr + k);
	n_set_nritems(l, first);
}

int ubt_node_split(uint8_t *left, uint8_t *right, uint32_t nodesize, int slot)
{
	struct node l, r;
	int ret = node_pair_get(&l, &r, left, right, nodesize);

	if (ret)
		return ret;
	if (r.nr != 0 || slot < 0 || (uint32_t)slot > l.nr)
		return -EINVAL;
	if ((uint32_t)slot < l.nr)
		node_move_right(&l, &r, l.nr - (uint32_t)slot);
	return 0;
}

int ubt_node_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, int k)
{
	struct node l, r;
	int ret = node_pair_get(&l, &r, left, right, nodesize);

	if (ret)
		return ret;
	if (k < 0 || (uint32_t)k > l.nr)
		return -EINVAL;
	if (k == 0)
		return 0;
	if ((uint32_t)k > r.max - r.nr)
		return -ENOSPC;
	node_move_right(&l, &r, (uint32_t)k);
	return 0;
}

int ubt_node_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, int k)
{
	uint32_t n;
	struct node l, r;
	int ret = node_pair_get(&l, &r, left, right, nodesize);

	if (ret)
		return ret;
	if (k < 0 || (uint32_t)k > r.nr)
		return -EINVAL;
	if (k == 0)
		return 0;
	n = (uint32_t)k;
	if (n > l.max - l.nr)
		return -ENOSPC;
	memcpy(n_ptr(&l, l.nr), n_ptr(&r, 0), (size_t)n * KP_SIZE);
	memmove(n_ptr(&r, 0), n_ptr(&r, n), (size_t)(r.nr - n) * KP_SIZE);
	memset(n_ptr(&r, r.nr - n), 0, (size_t)n * KP_SIZE);
	n_set_nritems(&l, l.nr + n);
	n_set_nritems(&r, r.nr - n);
	return 0;
}

int ubt_node_balance_shift(const uint8_t *left, const uint8_t *right, uint32_t nodesize,
			   int *shift)
{
	struct node l, r;
	int ret = node_pair_get(&l, &r, left, right, nodesize);

	if (ret)
		return ret;
	if (!shift)
		return -EINVAL;
	/* Left gets the odd one: ceil((l + r) / 2), at most max since both are. */
	*shift = (int)((l.nr + r.nr + 1) / 2) - (int)l.nr;
	return 0;
}
