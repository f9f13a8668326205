/*
 * trans layer: block groups and tree-block allocation.
 *
 * Owns struct ubt_bg: the BLOCK_GROUP_ITEMs (extent tree, or block group
 * tree with that feature), and for each group touched by the writer the set
 * of allocated ranges, built once from the extent tree's EXTENT_ITEMs and
 * METADATA_ITEMs plus the superblock copies inside the group (which the
 * kernel never allocates).  Free space = group - allocated - pinned, where
 * pinned holds what this transaction freed (still referenced by the last
 * commit, so not reusable before the next one is on disk).
 *
 * Tree blocks are taken next-fit from the metadata (or system) groups,
 * nodesize aligned, never crossing a 64 KiB stripe boundary (the kernel's
 * checker rejects such blocks).
 */
#include "trans/trans.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- range sets --------------------------------------------------------- */

/* Index of the first range ending after `start`. */
static size_t rs_lower(const struct ubt_rangeset *s, uint64_t start)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->v[mid].start + s->v[mid].len <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int rs_reserve(struct ubt_rangeset *s, size_t need)
{
	if (need <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap * 2 : 16;
	while (cap < need)
		cap *= 2;
	struct ubt_range *v = realloc(s->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->v = v;
	s->cap = cap;
	return 0;
}

int ubt_rangeset_add(struct ubt_rangeset *s, uint64_t start, uint64_t len)
{
	if (!len)
		return 0;
	uint64_t end = start + len;
	/* Merge with every range touching [start, end). */
	size_t i = s->n;
	size_t lo = 0, hi = s->n;
	while (lo < hi) {	/* first range with end >= start (touching counts) */
		size_t mid = lo + (hi - lo) / 2;
		if (s->v[mid].start + s->v[mid].len < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	i = lo;
	size_t j = i;
	while (j < s->n && s->v[j].start <= end) {
		start = UBT_MIN(start, s->v[j].start);
		end = UBT_MAX(end, s->v[j].start + s->v[j].len);
		j++;
	}
	if (j > i) {
		s->v[i].start = start;
		s->v[i].len = end - start;
		memmove(&s->v[i + 1], &s->v[j], (s->n - j) * sizeof(*s->v));
		s->n -= j - i - 1;
		return 0;
	}
	int ret = rs_reserve(s, s->n + 1);
	if (ret)
		return ret;
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
	s->v[i].start = start;
	s->v[i].len = end - start;
	s->n++;
	return 0;
}

int ubt_rangeset_remove(struct ubt_rangeset *s, uint64_t start, uint64_t len)
{
	uint64_t end = start + len;
	size_t i = rs_lower(s, start);

	while (i < s->n && s->v[i].start < end) {
		struct ubt_range r = s->v[i];
		uint64_t rend = r.start + r.len;
		if (r.start < start && rend > end) {	/* split in two */
			int ret = rs_reserve(s, s->n + 1);
			if (ret)
				return ret;
			memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
			s->n++;
			s->v[i].len = start - r.start;
			s->v[i + 1].start = end;
			s->v[i + 1].len = rend - end;
			return 0;
		}
		if (r.start < start) {
			s->v[i].len = start - r.start;
			i++;
		} else if (rend > end) {
			s->v[i].start = end;
			s->v[i].len = rend - end;
			i++;
		} else {
			memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
			s->n--;
		}
	}
	return 0;
}

bool ubt_rangeset_overlaps(const struct ubt_rangeset *s, uint64_t start, uint64_t len)
{
	size_t i = rs_lower(s, start);
	return i < s->n && s->v[i].start < start + len;
}

void ubt_rangeset_free(struct ubt_rangeset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- block groups ------------------------------------------------------- */

static int add_bg(struct ubt_wfs *w, const struct btrfs_key *key,
		  const struct btrfs_block_group_item *item, size_t *cap)
{
	if (w->nbgs == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct ubt_bg *v = realloc(w->bgs, ncap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		w->bgs = v;
		*cap = ncap;
	}
	struct ubt_bg *bg = &w->bgs[w->nbgs++];
	memset(bg, 0, sizeof(*bg));
	bg->start = key->objectid;
	bg->len = key->offset;
	bg->flags = btrfs_block_group_flags(item);
	bg->used = btrfs_block_group_used(item);
	bg->chunk_objectid = btrfs_block_group_chunk_objectid(item);
	return 0;
}

/*
 * Walk [from, to] of the block group items' tree: every BLOCK_GROUP_ITEM met
 * must be the one of `c` (start and length), which is added; with c NULL
 * (past the last chunk) any is corruption.  Other items are skipped.
 */
static int bgs_range(struct ubt_wfs *w, const struct ubt_root_ref *tree,
		     const struct btrfs_key *from, const struct btrfs_key *to,
		     const struct ubt_chunk *c, bool *found, size_t *cap)
{
	struct ubt_iter it;
	int ret;

	ubt_iter_start(&it, &w->fs->tree, tree, from, to);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.key.type != BTRFS_BLOCK_GROUP_ITEM_KEY)
			continue;
		if (!c || it.key.objectid != c->start) {
			ret = UBT_CORRUPT(it.leaf->start, "block group %llu has no chunk",
					  (unsigned long long)it.key.objectid);
			break;
		}
		if (it.key.offset != c->length) {
			ret = UBT_CORRUPT(it.leaf->start,
					  "block group %llu has length %llu, its chunk %llu",
					  (unsigned long long)c->start,
					  (unsigned long long)it.key.offset,
					  (unsigned long long)c->length);
			break;
		}
		if (it.size < sizeof(struct btrfs_block_group_item)) {
			ret = UBT_CORRUPT(it.leaf->start, "block group item too small");
			break;
		}
		ret = add_bg(w, &it.key, (const void *)it.data, cap);
		if (ret)
			break;
		*found = true;
	}
	ubt_iter_end(&it);
	return ret < 0 ? ret : 0;
}

/*
 * The block groups, one to one with the chunks (the kernel refuses a chunk
 * without its item, and an item without a chunk, too).  In the extent tree
 * the BLOCK_GROUP_ITEM (start, BLOCK_GROUP_ITEM, length) sits among the
 * extents of its group; walking every item to find them made a read-write
 * open cost time in proportion to the filesystem's contents (100,000
 * files: 35 ms more).  So per chunk only the keys from the end of the
 * previous chunk up to this chunk's item are walked - in a sound tree the
 * item itself and the few items of the extent starting at the chunk's
 * start - and past the last chunk, the rest (normally nothing).
 */
int ubt_bgs_load(struct ubt_wfs *w)
{
	struct ubt_fs *fs = w->fs;
	const struct ubt_root_ref *tree =
		fs->block_group_tree.bytenr ? &fs->block_group_tree : &fs->extent_tree;
	uint64_t prev_end = 0;
	size_t cap = 0;
	int ret = 0;

	for (size_t i = 0; i < fs->vol->nchunks && !ret; i++) {
		const struct ubt_chunk *c = fs->vol->chunks[i];
		struct btrfs_key from = { prev_end, BTRFS_BLOCK_GROUP_ITEM_KEY, 0 };
		struct btrfs_key to = { c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, (uint64_t)-1 };
		bool found = false;

		ret = bgs_range(w, tree, &from, &to, c, &found, &cap);
		if (!ret && !found)
			ret = UBT_CORRUPT(c->start, "chunk %llu has no block group item",
					  (unsigned long long)c->start);
		prev_end = c->start + c->length;
	}
	if (!ret) {
		struct btrfs_key from = { prev_end, BTRFS_BLOCK_GROUP_ITEM_KEY, 0 };
		struct btrfs_key to = { (uint64_t)-1, (uint8_t)-1, (uint64_t)-1 };
		bool found = false;
		ret = bgs_range(w, tree, &from, &to, NULL, &found, &cap);
	}
	return ret;
}

void ubt_bgs_free(struct ubt_wfs *w)
{
	for (size_t i = 0; i < w->nbgs; i++) {
		ubt_rangeset_free(&w->bgs[i].extents);
		ubt_rangeset_free(&w->bgs[i].pinned);
		ubt_rangeset_free(&w->bgs[i].supers);
	}
	free(w->bgs);
	w->bgs = NULL;
	w->nbgs = 0;
}

struct ubt_bg *ubt_bg_find(struct ubt_wfs *w, uint64_t bytenr)
{
	size_t lo = 0, hi = w->nbgs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->bgs[mid].start + w->bgs[mid].len <= bytenr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < w->nbgs && w->bgs[lo].start <= bytenr)
		return &w->bgs[lo];
	return NULL;
}

static uint64_t chunk_stripe_size(const struct ubt_chunk *c)
{
	uint64_t p = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	if (p & BTRFS_BLOCK_GROUP_RAID0)
		return c->length / c->num_stripes;
	if (p & BTRFS_BLOCK_GROUP_RAID10)
		return c->length / (c->num_stripes / c->sub_stripes);
	if (p & BTRFS_BLOCK_GROUP_RAID5)
		return c->length / (uint64_t)(c->num_stripes - 1);
	if (p & BTRFS_BLOCK_GROUP_RAID6)
		return c->length / (uint64_t)(c->num_stripes - 2);
	return c->length;
}

/*
 * The logical 64 KiB stripes of the group that hold a superblock copy on
 * some device, as the kernel's reverse mapping computes them (those bytes
 * are never allocated and never free).
 */
static int compute_supers(struct ubt_wfs *w, struct ubt_bg *bg)
{
	const struct ubt_chunk *c = ubt_volume_find_chunk(w->fs->vol, bg->start);
	uint64_t stripe_size = chunk_stripe_size(c);
	uint64_t p = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
	uint64_t data_stripes = 1;

	if (p & BTRFS_BLOCK_GROUP_RAID0)
		data_stripes = c->num_stripes;
	else if (p & BTRFS_BLOCK_GROUP_RAID10)
		data_stripes = c->num_stripes / c->sub_stripes;
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t sb = btrfs_sb_offset(m);
		for (uint16_t i = 0; i < c->num_stripes; i++) {
			const struct ubt_stripe_map *s = &c->stripes[i];
			if (!s->dev || sb + BTRFS_SUPER_INFO_SIZE > s->dev->total_bytes)
				continue;
			if (sb < s->physical || sb >= s->physical + stripe_size)
				continue;
			uint64_t row = (sb - s->physical) / BTRFS_STRIPE_LEN;
			uint64_t nr = row;
			if (p & BTRFS_BLOCK_GROUP_RAID0)
				nr = row * c->num_stripes + i;
			else if (p & BTRFS_BLOCK_GROUP_RAID10)
				nr = row * data_stripes + i / c->sub_stripes;
			else if (p & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
				return -EOPNOTSUPP;
			uint64_t start = c->start + nr * BTRFS_STRIPE_LEN;
			if (start >= c->start + c->length)
				continue;
			uint64_t len = UBT_MIN((uint64_t)BTRFS_STRIPE_LEN, c->start + c->length - start);
			int ret = ubt_rangeset_add(&bg->supers, start, len);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int ubt_bg_load_extents(struct ubt_wfs *w, struct ubt_bg *bg)
{
	struct ubt_fs *fs = w->fs;
	struct btrfs_key min = { bg->start, 0, 0 };
	struct btrfs_key max = { bg->start + bg->len - 1, (uint8_t)-1, (uint64_t)-1 };
	struct ubt_iter it;
	uint64_t used = 0;
	int ret;

	if (bg->loaded)
		return 0;
	ret = compute_supers(w, bg);
	if (ret)
		return ret;
	for (size_t i = 0; i < bg->supers.n; i++) {
		ret = ubt_rangeset_add(&bg->extents, bg->supers.v[i].start, bg->supers.v[i].len);
		if (ret)
			return ret;
	}
	/* An extent starting before the group cannot exist (extents never
	 * cross groups), so the walk starts at the group. */
	ubt_iter_start(&it, &fs->tree, &fs->extent_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		uint64_t len;
		if (it.key.type == BTRFS_EXTENT_ITEM_KEY)
			len = it.key.offset;
		else if (it.key.type == BTRFS_METADATA_ITEM_KEY)
			len = fs->nodesize;
		else
			continue;
		if (it.key.objectid + len > bg->start + bg->len || len == 0) {
			ret = UBT_CORRUPT(it.leaf->start, "extent %llu+%llu crosses block group %llu",
					  (unsigned long long)it.key.objectid,
					  (unsigned long long)len, (unsigned long long)bg->start);
			break;
		}
		if (ubt_rangeset_overlaps(&bg->extents, it.key.objectid, len)) {
			ret = UBT_CORRUPT(it.leaf->start, "extent %llu+%llu overlaps another",
					  (unsigned long long)it.key.objectid,
					  (unsigned long long)len);
			break;
		}
		ret = ubt_rangeset_add(&bg->extents, it.key.objectid, len);
		if (ret)
			break;
		used += len;
	}
	ubt_iter_end(&it);
	if (ret < 0)
		return ret;
	if (used != bg->used)
		return UBT_CORRUPT(0, "block group %llu records %llu bytes used, its extents %llu",
				   (unsigned long long)bg->start, (unsigned long long)bg->used,
				   (unsigned long long)used);
	bg->cursor = bg->start;
	bg->loaded = true;
	return 0;
}

/* A free nodesize block in bg at or after `from`, or 0. */
static uint64_t find_free_block(const struct ubt_bg *bg, uint64_t from, uint32_t nodesize)
{
	uint64_t end = bg->start + bg->len;
	uint64_t pos = UBT_ALIGN_UP(from, (uint64_t)nodesize);

	while (pos + nodesize <= end) {
		/* Never across a 64 KiB stripe boundary. */
		if (pos / BTRFS_STRIPE_LEN != (pos + nodesize - 1) / BTRFS_STRIPE_LEN) {
			pos = UBT_ALIGN_UP(pos + 1, (uint64_t)BTRFS_STRIPE_LEN);
			continue;
		}
		size_t i = rs_lower(&bg->extents, pos);
		if (i < bg->extents.n && bg->extents.v[i].start < pos + nodesize) {
			pos = UBT_ALIGN_UP(bg->extents.v[i].start + bg->extents.v[i].len,
					   (uint64_t)nodesize);
			continue;
		}
		i = rs_lower(&bg->pinned, pos);
		if (i < bg->pinned.n && bg->pinned.v[i].start < pos + nodesize) {
			pos = UBT_ALIGN_UP(bg->pinned.v[i].start + bg->pinned.v[i].len,
					   (uint64_t)nodesize);
			continue;
		}
		return pos;
	}
	return 0;
}

int ubt_alloc_tree_block(struct ubt_trans *t, bool system, uint64_t *bytenr)
{
	struct ubt_wfs *w = t->w;
	uint64_t want = system ? BTRFS_BLOCK_GROUP_SYSTEM : BTRFS_BLOCK_GROUP_METADATA;
	uint32_t nodesize = w->fs->nodesize;
	int ret;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < w->nbgs; i++) {
			struct ubt_bg *bg = &w->bgs[i];
			if (!(bg->flags & want))
				continue;
			if ((bg->flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) &
			    (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
				continue;	/* partial-stripe writes are not done */
			if (bg->len - bg->used < nodesize)
				continue;
			ret = ubt_bg_load_extents(w, bg);
			if (ret)
				return ret;
			uint64_t pos = find_free_block(bg, pass ? bg->start : bg->cursor, nodesize);
			if (!pos)
				continue;
			ret = ubt_bg_account(t, pos, nodesize, true);
			if (ret)
				return ret;
			bg->cursor = pos + nodesize;
			*bytenr = pos;
			return 0;
		}
	}
	return -ENOSPC;
}

/* The first free run in bg at or after `from`: start and length (0: none). */
static uint64_t find_free_run(const struct ubt_bg *bg, uint64_t from, uint32_t ss,
			      uint64_t *len)
{
	uint64_t end = bg->start + bg->len;
	uint64_t pos = UBT_ALIGN_UP(from, (uint64_t)ss);

	while (pos + ss <= end) {
		size_t i = rs_lower(&bg->extents, pos);
		if (i < bg->extents.n && bg->extents.v[i].start <= pos) {
			pos = UBT_ALIGN_UP(bg->extents.v[i].start + bg->extents.v[i].len, (uint64_t)ss);
			continue;
		}
		size_t k = rs_lower(&bg->pinned, pos);
		if (k < bg->pinned.n && bg->pinned.v[k].start <= pos) {
			pos = UBT_ALIGN_UP(bg->pinned.v[k].start + bg->pinned.v[k].len, (uint64_t)ss);
			continue;
		}
		uint64_t stop = end;
		if (i < bg->extents.n)
			stop = UBT_MIN(stop, bg->extents.v[i].start);
		if (k < bg->pinned.n)
			stop = UBT_MIN(stop, bg->pinned.v[k].start);
		stop &= ~((uint64_t)ss - 1);
		if (stop > pos) {
			*len = stop - pos;
			return pos;
		}
		pos += ss;
	}
	*len = 0;
	return 0;
}

int ubt_alloc_data_extent(struct ubt_trans *t, uint64_t want, uint64_t *bytenr, uint64_t *got)
{
	struct ubt_wfs *w = t->w;
	uint32_t ss = w->fs->sectorsize;
	int ret;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < w->nbgs; i++) {
			struct ubt_bg *bg = &w->bgs[i];
			if ((bg->flags & BTRFS_BLOCK_GROUP_TYPE_MASK) != BTRFS_BLOCK_GROUP_DATA ||
			    ((bg->flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) &
			     (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)))
				continue;
			if (bg->len - bg->used < ss)
				continue;
			ret = ubt_bg_load_extents(w, bg);
			if (ret)
				return ret;
			uint64_t len;
			uint64_t pos = find_free_run(bg, pass ? bg->start : bg->cursor, ss, &len);
			if (!len)
				continue;
			len = UBT_MIN(len, want);
			ret = ubt_bg_account(t, pos, len, true);
			if (ret)
				return ret;
			w->bgs[i].cursor = pos + len;
			*bytenr = pos;
			*got = len;
			return 0;
		}
	}
	return -ENOSPC;
}

int ubt_alloc_data_at(struct ubt_trans *t, uint64_t extent, uint64_t bytenr, uint64_t len)
{
	struct ubt_wfs *w = t->w;
	struct ubt_bg *bg = ubt_bg_find(w, extent);
	uint32_t ss = w->fs->sectorsize;
	int ret;

	if (!bg || len == 0 || !UBT_IS_ALIGNED(bytenr | len, ss) || bytenr < extent ||
	    (bg->flags & BTRFS_BLOCK_GROUP_TYPE_MASK) != BTRFS_BLOCK_GROUP_DATA ||
	    (bg->flags & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)) ||
	    bytenr < bg->start || len > bg->start + bg->len - bytenr)
		return -ENOSPC;
	ret = ubt_bg_load_extents(w, bg);
	if (ret)
		return ret;
	if (ubt_rangeset_overlaps(&bg->extents, bytenr, len) ||
	    ubt_rangeset_overlaps(&bg->pinned, bytenr, len))
		return -ENOSPC;
	ret = ubt_bg_account(t, bytenr, len, true);
	if (!ret)
		bg->cursor = bytenr + len;
	return ret;
}

uint64_t ubt_data_free_bytes(struct ubt_wfs *w)
{
	uint64_t total = 0;

	for (size_t i = 0; i < w->nbgs; i++) {
		const struct ubt_bg *bg = &w->bgs[i];
		if ((bg->flags & BTRFS_BLOCK_GROUP_TYPE_MASK) != BTRFS_BLOCK_GROUP_DATA ||
		    ((bg->flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) &
		     (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)))
			continue;
		uint64_t taken = bg->used;
		for (size_t k = 0; k < bg->pinned.n; k++)
			taken += bg->pinned.v[k].len;
		for (size_t k = 0; k < bg->supers.n; k++)
			taken += bg->supers.v[k].len;
		if (taken < bg->len)
			total += bg->len - taken;
	}
	return total;
}

int ubt_bg_account(struct ubt_trans *t, uint64_t bytenr, uint64_t len, bool alloc)
{
	struct ubt_wfs *w = t->w;
	struct ubt_bg *bg = ubt_bg_find(w, bytenr);
	int ret;

	if (!bg || bytenr + len > bg->start + bg->len)
		return UBT_CORRUPT(bytenr, "extent %llu+%llu outside every block group",
				   (unsigned long long)bytenr, (unsigned long long)len);
	ret = ubt_bg_load_extents(w, bg);
	if (ret)
		return ret;
	if (alloc) {
		if (ubt_rangeset_overlaps(&bg->extents, bytenr, len))
			return UBT_CORRUPT(bytenr, "allocating an extent that is in use");
		ret = ubt_rangeset_add(&bg->extents, bytenr, len);
		if (ret)
			return ret;
		bg->used += len;
	} else {
		if (bg->used < len)
			return UBT_CORRUPT(bytenr, "block group %llu used bytes underflow",
					   (unsigned long long)bg->start);
		ret = ubt_rangeset_remove(&bg->extents, bytenr, len);
		if (!ret)
			ret = ubt_rangeset_add(&bg->pinned, bytenr, len);
		if (ret)
			return ret;
		bg->used -= len;
	}
	bg->dirty = true;
	bg->item_dirty = true;
	return 0;
}

void ubt_bgs_unpin(struct ubt_wfs *w)
{
	for (size_t i = 0; i < w->nbgs; i++)
		w->bgs[i].pinned.n = 0;
}

uint64_t ubt_meta_free_bytes(struct ubt_wfs *w, bool system)
{
	uint64_t want = system ? BTRFS_BLOCK_GROUP_SYSTEM : BTRFS_BLOCK_GROUP_METADATA;
	uint64_t total = 0;

	for (size_t i = 0; i < w->nbgs; i++) {
		const struct ubt_bg *bg = &w->bgs[i];
		if (!(bg->flags & want) ||
		    ((bg->flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) &
		     (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)))
			continue;
		uint64_t pinned = 0;
		for (size_t k = 0; k < bg->pinned.n; k++)
			pinned += bg->pinned.v[k].len;
		uint64_t supers = 0;
		for (size_t k = 0; k < bg->supers.n; k++)
			supers += bg->supers.v[k].len;
		uint64_t taken = bg->used + pinned + supers;
		if (taken < bg->len)
			total += bg->len - taken;
	}
	return total;
}

/* In nodesize blocks: the most one tree operation copies or creates (a
 * path of up to 8 levels copied, a split or a merge at each, a new root). */
#define RESERVE_OP 24
/* What the commit needs: a copied extent-tree path for every extent whose
 * references change (each queued change may touch its own leaf), block
 * group items, free-space tree entries and root items.  Measured: 2.3-6
 * new blocks per dirty block, and up to one per queued reference change.
 * Reserved: 2 per dirty block plus 1 per queued change (at most what
 * ubt_commit_ref_blocks bounds) plus a base. */
#define RESERVE_COMMIT_BASE 64
#define RESERVE_COMMIT_PER_DIRTY 2
#define RESERVE_COMMIT_PER_REF 1
/* What one user-visible operation (ubt_op_scope) may take: several tree
 * operations, each copying a path and splitting, and the commit's share of
 * every block it copies (2 per block, 2 queued reference changes). */
#define RESERVE_SCOPED_OP (4 * RESERVE_OP)
/* Kept for deletions and commits on a full filesystem. */
#define RESERVE_GLOBAL 64
/* Room for the tree updates of a chunk allocation itself. */
#define RESERVE_CHUNK 32

/*
 * The commit's reference processing (ubt_run_drefs, ubt_write_bg_items,
 * ubt_fst_update, root items) changes the extent tree, the csum tree (data
 * extents freed), the free-space tree, the block group tree and the root
 * tree.  A block is copied at most once per transaction, and every block
 * made after this count is one of the transaction's own (already copied),
 * so the blocks of those trees counted at any point of the transaction bound
 * the copies the commit can still make.  New blocks besides copies come
 * from splits: an item inserted per change is under 128 bytes (an extent
 * item with one inline reference, a keyed reference, a free-space entry),
 * an eighth of a half-full 4 KiB leaf.  Counting reads the trees' interior
 * nodes only (a leaf's count is in its parent); past COUNT_MAX_NODES of
 * them the bound is left unknown.
 */
#define COUNT_MIN_REFS 256
#define COUNT_MAX_NODES 512

static int count_tree(struct ubt_tree_ctx *tc, const struct ubt_eb *eb, uint64_t owner,
		      uint64_t *blocks, unsigned *nodes)
{
	uint32_t n = ubt_eb_nritems(eb);

	*blocks += 1;
	if (ubt_eb_level(eb) == 0)
		return 0;
	if (ubt_eb_level(eb) == 1) {
		*blocks += n;
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct ubt_eb *child;
		if (++*nodes > COUNT_MAX_NODES)
			return -E2BIG;
		int ret = ubt_read_child(tc, eb, (int)i, owner, &child);
		if (ret)
			return ret;
		ret = count_tree(tc, child, owner, blocks, nodes);
		ubt_eb_put(tc, child);
		if (ret)
			return ret;
	}
	return 0;
}

static uint64_t commit_tree_blocks(struct ubt_trans *t)
{
	struct ubt_fs *fs = t->w->fs;
	const struct ubt_root_ref *trees[] = { &fs->extent_tree, &fs->csum_tree,
					       &fs->free_space_tree, &fs->block_group_tree,
					       &fs->root_tree };
	uint64_t blocks = 0;
	unsigned nodes = 0;

	for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
		struct ubt_eb *root;
		if (!trees[i]->bytenr)
			continue;
		if (++nodes > COUNT_MAX_NODES || ubt_read_root(&fs->tree, trees[i], &root))
			return UINT64_MAX;
		int ret = count_tree(&fs->tree, root, trees[i]->objectid, &blocks, &nodes);
		ubt_eb_put(&fs->tree, root);
		if (ret)
			return UINT64_MAX;
	}
	return blocks;
}

uint64_t ubt_commit_ref_blocks(struct ubt_trans *t)
{
	uint64_t n = t->nrefs;

	if (n < COUNT_MIN_REFS)
		return n;
	if (!t->commit_tree_counted) {
		t->commit_tree_blocks = commit_tree_blocks(t);
		t->commit_tree_counted = true;
	}
	uint64_t c = t->commit_tree_blocks;
	if (c >= n)
		return n;
	uint64_t bound = c + c / 8 + n / 8 + 16;
	return bound < n ? bound : n;
}

void ubt_op_scope(struct ubt_trans *t, bool on)
{
	t->op_scope = on;
	t->op_reserved = false;
}

/* n insertions of small items, made one after another in one scope: a
 * scoped operation's room, and a split's worth (and its commit share) per
 * item. */
static uint64_t owed_blocks(size_t n)
{
	return n ? RESERVE_SCOPED_OP + 3 * (uint64_t)n : 0;
}

/* Is there room to promise `blocks` in all (every promise), besides the
 * next operation's room - a deletion's, or an insertion's with the global
 * reserve: a promise must not be what fails it - and the commit's? */
static bool owe_fits(struct ubt_trans *t, uint64_t blocks)
{
	uint64_t need = (blocks + RESERVE_GLOBAL + RESERVE_SCOPED_OP + RESERVE_COMMIT_BASE +
			 RESERVE_COMMIT_PER_DIRTY * (uint64_t)t->ndirty +
			 RESERVE_COMMIT_PER_REF * ubt_commit_ref_blocks(t)) * t->w->fs->nodesize;

	return ubt_meta_free_bytes(t->w, false) >= need;
}

/* The room promised to the delayed DIR_INDEX batches and the held run. */
static uint64_t owed_batches(const struct ubt_trans *t)
{
	return owed_blocks(t->owe_dirs + t->owe_runs);
}

bool ubt_meta_owe(struct ubt_trans *t, size_t n)
{
	uint64_t want = owed_blocks(n);

	if (want > t->owed && !owe_fits(t, want + owed_batches(t)))
		return false;
	t->owed = want;
	return true;
}

static bool owe_batches(struct ubt_trans *t, size_t dirs, size_t runs)
{
	uint64_t blocks = owed_blocks(dirs + runs);

	if (blocks > owed_batches(t) && !owe_fits(t, blocks + t->owed))
		return false;
	t->owe_dirs = dirs;
	t->owe_runs = runs;
	return true;
}

bool ubt_meta_owe_idx(struct ubt_trans *t, size_t n)
{
	return owe_batches(t, n, t->owe_runs);
}

bool ubt_meta_owe_run(struct ubt_trans *t, size_t n)
{
	return owe_batches(t, t->owe_dirs, n);
}

void ubt_meta_owed_begin(struct ubt_trans *t)
{
	t->owed_work = true;
}

void ubt_meta_owed_end(struct ubt_trans *t)
{
	t->owed_work = false;
	t->owed = 0;
}

int ubt_reserve_metadata(struct ubt_trans *t, bool deleting)
{
	struct ubt_wfs *w = t->w;
	uint64_t ns = w->fs->nodesize;
	uint64_t free_bytes, total = 0;

	if (t->committing || t->allocating_chunk || t->owed_work)
		return 0;	/* what the reserves were kept for */
	/* Within a scoped operation past its first reserve: only the commit's
	 * reserve is kept (the operation's own room and the global reserve
	 * were checked at its start). */
	bool within = t->op_scope && t->op_reserved;
	uint64_t op, global;
	if (within) {
		op = global = 0;
	} else if (!t->op_scope) {
		op = RESERVE_OP;
		global = deleting ? 0 : RESERVE_GLOBAL;
	} else if (deleting) {
		/* A deletion's room comes out of the global reserve, which
		 * insertions leave alone: emptying a full filesystem works. */
		op = RESERVE_GLOBAL;
		global = 0;
	} else {
		op = RESERVE_SCOPED_OP;
		global = RESERVE_GLOBAL;
	}
	uint64_t need = (op + t->owed + owed_batches(t) + RESERVE_COMMIT_BASE +
			 RESERVE_COMMIT_PER_DIRTY * (uint64_t)t->ndirty +
			 RESERVE_COMMIT_PER_REF * ubt_commit_ref_blocks(t)) * ns;
	global *= ns;
	free_bytes = ubt_meta_free_bytes(w, false);
	for (size_t i = 0; i < w->nbgs; i++)
		if (w->bgs[i].flags & BTRFS_BLOCK_GROUP_METADATA)
			total += w->bgs[i].len;
	/* A new chunk early: when the reserves are at stake or less than an
	 * eighth of the metadata space is left. */
	uint64_t low = UBT_MAX(need + (RESERVE_GLOBAL + RESERVE_CHUNK) * ns, total / 8);
	if (free_bytes < low && !w->chunk_alloc_failed) {
		t->allocating_chunk = true;
		int ret = ubt_alloc_chunk(t, BTRFS_BLOCK_GROUP_METADATA);
		t->allocating_chunk = false;
		if (w->aborted)
			return w->abort_err ? w->abort_err : -EROFS;
		if (ret == -ENOSPC)
			w->chunk_alloc_failed = true;
		else if (ret)
			return ret;
		free_bytes = ubt_meta_free_bytes(w, false);
	}
	if (free_bytes < need + global) {
		if (getenv("UBTRFS_DEBUG_SPACE"))
			fprintf(stderr, "reserve: ENOSPC free %llu need %llu global %llu (scope %d within %d deleting %d dirty %zu refs %zu)\n",
				(unsigned long long)free_bytes, (unsigned long long)need,
				(unsigned long long)global, t->op_scope, within, deleting, t->ndirty, t->nrefs);
		if (within && !w->aborted) {
			/* Half done: what is in memory cannot be committed. */
			ubt_log(UBT_LOG_ERROR, "metadata space ran out within an operation "
				"(%llu bytes free, the commit needs %llu): aborting",
				(unsigned long long)free_bytes, (unsigned long long)need);
			w->aborted = true;
			w->abort_err = -ENOSPC;
		}
		return -ENOSPC;
	}
	if (t->op_scope)
		t->op_reserved = true;
	return 0;
}

int ubt_meta_grow(struct ubt_trans *t)
{
	struct ubt_wfs *w = t->w;
	const struct ubt_volume *vol = w->fs->vol;
	uint64_t total = btrfs_super_total_bytes(&vol->super);
	uint64_t meta = 0, allocated = 0, stripes = 1;

	if (w->chunk_alloc_failed || t->committing || t->allocating_chunk || w->aborted)
		return -ENOSPC;
	/* Raw bytes on the devices, from the chunk map. */
	for (size_t i = 0; i < vol->nchunks; i++) {
		const struct ubt_chunk *c = vol->chunks[i];
		uint64_t raw = chunk_stripe_size(c) * c->num_stripes;
		allocated += raw;
		if (c->type & BTRFS_BLOCK_GROUP_METADATA) {
			meta += raw;
			stripes = c->num_stripes;
		}
	}
	/* Metadata under a quarter of the devices, and after a new chunk
	 * (stripes of at most 256 MiB or a tenth of the filesystem, as
	 * ubt_alloc_chunk sizes them) a tenth of them still unallocated. */
	uint64_t chunk = UBT_MIN(256ull << 20, total / 10) * stripes;
	if (meta >= total / 4 || allocated + chunk + total / 10 > total)
		return -ENOSPC;
	t->allocating_chunk = true;
	int ret = ubt_alloc_chunk(t, BTRFS_BLOCK_GROUP_METADATA);
	t->allocating_chunk = false;
	if (ret == -ENOSPC && !w->aborted)
		w->chunk_alloc_failed = true;
	return ret;
}

int ubt_commit_space(struct ubt_trans *t)
{
	struct ubt_wfs *w = t->w;
	uint64_t ns = w->fs->nodesize;
	uint64_t want = (RESERVE_COMMIT_BASE + RESERVE_COMMIT_PER_REF * ubt_commit_ref_blocks(t)) * ns;

	if (w->chunk_alloc_failed || ubt_meta_free_bytes(w, false) >= want)
		return 0;
	t->allocating_chunk = true;
	int ret = ubt_alloc_chunk(t, BTRFS_BLOCK_GROUP_METADATA);
	t->allocating_chunk = false;
	if (ret == -ENOSPC) {
		w->chunk_alloc_failed = true;
		return 0;	/* carry on with what is left */
	}
	return ret;
}
