/*
 * mkfs layer: devices, chunks and logical addresses.
 *
 * Owns struct mk_chunk: where each chunk's stripes lie on the devices, which
 * of its 64 KiB stripes hold a superblock copy (never allocated, as the
 * kernel excludes them), the sequential allocator that hands out tree blocks
 * and data extents, and the mapping from a logical range to every copy on
 * disk for writing.  Profiles: SINGLE, DUP, RAID0, RAID1, RAID1C3, RAID1C4,
 * RAID10 (RAID5/6 are refused earlier).  Stripes of a chunk are taken from
 * the devices with the most free space, lowest devid first on ties, each
 * device's space handed out from its cursor upwards.
 */
#include "mkfs/mkfs_int.h"

#include <stdlib.h>
#include <string.h>

uint32_t mk_profile_data_stripes(uint64_t type, uint32_t nstripes)
{
	if (type & BTRFS_BLOCK_GROUP_RAID0)
		return nstripes;
	if (type & BTRFS_BLOCK_GROUP_RAID10)
		return nstripes / 2;
	return 1;
}

/* Devices ordered by free space (descending), then devid. */
static void devs_by_free(const struct mk_fs *fs, uint32_t *order)
{
	for (uint32_t i = 0; i < fs->ndev; i++)
		order[i] = i;
	for (uint32_t i = 1; i < fs->ndev; i++) {
		for (uint32_t j = i; j > 0; j--) {
			const struct mk_dev *a = &fs->devs[order[j - 1]], *b = &fs->devs[order[j]];
			uint64_t fa = a->size - a->cursor, fb = b->size - b->cursor;
			if (fa > fb || (fa == fb && a->devid < b->devid))
				break;
			uint32_t tmp = order[j];
			order[j] = order[j - 1];
			order[j - 1] = tmp;
		}
	}
}

static void add_excl(struct mk_chunk *c, uint64_t stripe_nr)
{
	uint64_t start = c->logical + stripe_nr * BTRFS_STRIPE_LEN;
	uint64_t len = BTRFS_STRIPE_LEN;

	if (start >= c->logical + c->length)
		return;
	if (start + len > c->logical + c->length)
		len = c->logical + c->length - start;
	for (uint32_t i = 0; i < c->nexcl; i++)
		if (c->excl[i].start == start)
			return;
	if (c->nexcl < UBT_ARRAY_SIZE(c->excl)) {
		/* keep sorted */
		uint32_t k = c->nexcl++;
		while (k > 0 && c->excl[k - 1].start > start) {
			c->excl[k] = c->excl[k - 1];
			k--;
		}
		c->excl[k].start = start;
		c->excl[k].len = len;
	}
}

/* The logical stripes holding a superblock copy, as the kernel's rmap does. */
static void compute_excluded(const struct mk_fs *fs, struct mk_chunk *c)
{
	uint32_t ds = mk_profile_data_stripes(c->type, c->nstripes);

	c->nexcl = 0;
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t sb = btrfs_sb_offset(m);
		for (uint32_t i = 0; i < c->nstripes; i++) {
			const struct mk_dev *d = &fs->devs[c->dev[i]];
			if (sb + BTRFS_SUPER_INFO_SIZE > d->size)
				continue;
			if (sb < c->phys[i] || sb >= c->phys[i] + c->stripe_size)
				continue;
			uint64_t row = (sb - c->phys[i]) / BTRFS_STRIPE_LEN;
			uint64_t nr = row;
			if (c->type & BTRFS_BLOCK_GROUP_RAID0)
				nr = row * c->nstripes + i;
			else if (c->type & BTRFS_BLOCK_GROUP_RAID10)
				nr = row * ds + i / c->sub_stripes;
			add_excl(c, nr);
		}
	}
}

int mk_chunk_create(struct mk_fs *fs, uint64_t type, uint64_t stripe_size, size_t *out)
{
	uint32_t order[MK_MAX_DEV];
	uint32_t nstripes, sub = 1;
	struct mk_chunk c;

	memset(&c, 0, sizeof(c));
	stripe_size &= ~(BTRFS_STRIPE_LEN - 1);
	if (stripe_size == 0)
		return -ENOSPC;
	devs_by_free(fs, order);

	/* How many devices with room for one (DUP: two) stripes. */
	uint32_t per_dev = (type & BTRFS_BLOCK_GROUP_DUP) ? 2 : 1;
	uint32_t avail = 0;
	for (uint32_t i = 0; i < fs->ndev; i++) {
		const struct mk_dev *d = &fs->devs[order[i]];
		if (d->size - d->cursor >= per_dev * stripe_size)
			avail++;
	}
	if (type & BTRFS_BLOCK_GROUP_DUP)
		nstripes = 2;
	else if (type & BTRFS_BLOCK_GROUP_RAID1)
		nstripes = 2;
	else if (type & BTRFS_BLOCK_GROUP_RAID1C3)
		nstripes = 3;
	else if (type & BTRFS_BLOCK_GROUP_RAID1C4)
		nstripes = 4;
	else if (type & BTRFS_BLOCK_GROUP_RAID0)
		nstripes = avail;
	else if (type & BTRFS_BLOCK_GROUP_RAID10) {
		nstripes = avail & ~1U;
		sub = 2;
	} else
		nstripes = 1;
	uint32_t devs_needed = (type & BTRFS_BLOCK_GROUP_DUP) ? 1 : nstripes;
	if (nstripes == 0 || devs_needed > avail || nstripes > MK_MAX_STRIPES)
		return -ENOSPC;
	if ((type & BTRFS_BLOCK_GROUP_RAID10) && nstripes < 2)
		return -ENOSPC;

	c.type = type;
	c.nstripes = nstripes;
	c.sub_stripes = sub;
	c.stripe_size = stripe_size;
	c.length = stripe_size * mk_profile_data_stripes(type, nstripes);
	for (uint32_t i = 0; i < nstripes; i++) {
		uint32_t di = (type & BTRFS_BLOCK_GROUP_DUP) ? order[0] : order[i];
		struct mk_dev *d = &fs->devs[di];
		c.dev[i] = di;
		c.phys[i] = d->cursor;
		d->cursor += stripe_size;
		d->used += stripe_size;
	}
	c.logical = fs->logical_cursor;
	fs->logical_cursor += c.length;
	compute_excluded(fs, &c);

	struct mk_chunk *nv = realloc(fs->chunks, (fs->nchunks + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	fs->chunks = nv;
	fs->chunks[fs->nchunks] = c;
	if (out)
		*out = fs->nchunks;
	fs->nchunks++;
	return 0;
}

void mk_chunks_reset_alloc(struct mk_fs *fs, uint64_t type_mask)
{
	for (size_t i = 0; i < fs->nchunks; i++) {
		struct mk_chunk *c = &fs->chunks[i];
		if (!(c->type & type_mask))
			continue;
		c->cursor = 0;
		c->used = 0;
		c->nalloc = 0;
	}
}

int mk_chunk_note_alloc(struct mk_chunk *c, uint64_t logical, uint64_t len)
{
	c->used += len;
	if (c->nalloc && c->alloc[c->nalloc - 1].start + c->alloc[c->nalloc - 1].len == logical) {
		c->alloc[c->nalloc - 1].len += len;
		return 0;
	}
	if (c->nalloc == c->calloc) {
		size_t ncap = c->calloc ? c->calloc * 2 : 16;
		struct mk_range *nv = realloc(c->alloc, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		c->alloc = nv;
		c->calloc = ncap;
	}
	c->alloc[c->nalloc].start = logical;
	c->alloc[c->nalloc].len = len;
	c->nalloc++;
	return 0;
}

uint64_t mk_chunk_clear_run(const struct mk_chunk *c, uint64_t off, uint64_t *skip_to)
{
	uint64_t at = c->logical + off;

	for (uint32_t i = 0; i < c->nexcl; i++) {
		const struct mk_range *e = &c->excl[i];
		if (at >= e->start && at < e->start + e->len) {
			*skip_to = e->start + e->len - c->logical;
			return 0;
		}
		if (e->start > at) {
			*skip_to = e->start + e->len - c->logical;
			return e->start - at;
		}
	}
	*skip_to = c->length;
	return c->length - off;
}

int mk_chunk_alloc(struct mk_fs *fs, struct mk_chunk *c, uint64_t len, uint64_t align,
		   uint64_t *logical)
{
	(void)fs;
	for (;;) {
		uint64_t off = (c->cursor + align - 1) & ~(align - 1);
		if (off + len > c->length)
			return -ENOSPC;
		uint64_t skip;
		uint64_t run = mk_chunk_clear_run(c, off, &skip);
		if (run >= len) {
			c->cursor = off + len;
			*logical = c->logical + off;
			return mk_chunk_note_alloc(c, *logical, len);
		}
		c->cursor = skip;
	}
}

int mk_chunk_alloc_upto(struct mk_chunk *c, uint64_t maxlen, uint64_t align, uint64_t *logical,
			uint64_t *len)
{
	for (;;) {
		uint64_t off = (c->cursor + align - 1) & ~(align - 1);
		if (off + align > c->length)
			return -ENOSPC;
		uint64_t skip;
		uint64_t run = mk_chunk_clear_run(c, off, &skip);
		run &= ~(align - 1);
		if (run >= align) {
			uint64_t n = UBT_MIN(run, maxlen);
			n = UBT_MIN(n, c->length - off);
			c->cursor = off + n;
			*logical = c->logical + off;
			*len = n;
			return mk_chunk_note_alloc(c, *logical, n);
		}
		c->cursor = skip;
	}
}

struct mk_chunk *mk_chunk_find(struct mk_fs *fs, uint64_t type_bit)
{
	for (size_t i = 0; i < fs->nchunks; i++)
		if (fs->chunks[i].type & type_bit)
			return &fs->chunks[i];
	return NULL;
}

struct mk_chunk *mk_chunk_at(struct mk_fs *fs, uint64_t logical)
{
	for (size_t i = 0; i < fs->nchunks; i++) {
		struct mk_chunk *c = &fs->chunks[i];
		if (logical >= c->logical && logical < c->logical + c->length)
			return c;
	}
	return NULL;
}

int mk_write_logical(struct mk_fs *fs, uint64_t logical, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		struct mk_chunk *c = mk_chunk_at(fs, logical);
		if (!c)
			return -EINVAL;
		uint64_t off = logical - c->logical;
		uint64_t avail = c->length - off;
		uint64_t stripe_nr = off / BTRFS_STRIPE_LEN, in = off % BTRFS_STRIPE_LEN;
		size_t n;
		int ret;

		if (c->type & (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10)) {
			uint32_t ds = mk_profile_data_stripes(c->type, c->nstripes);
			uint32_t copies = (c->type & BTRFS_BLOCK_GROUP_RAID10) ? c->sub_stripes : 1;
			uint64_t row = stripe_nr / ds;
			uint32_t col = (uint32_t)(stripe_nr % ds);

			n = (size_t)UBT_MIN((uint64_t)len, BTRFS_STRIPE_LEN - in);
			for (uint32_t k = 0; k < copies; k++) {
				uint32_t s = col * copies + k;
				ret = ubt_bdev_write(fs->devs[c->dev[s]].bd, p, n,
						     c->phys[s] + row * BTRFS_STRIPE_LEN + in);
				if (ret)
					return ret;
			}
		} else {
			n = (size_t)UBT_MIN((uint64_t)len, avail);
			for (uint32_t s = 0; s < c->nstripes; s++) {
				ret = ubt_bdev_write(fs->devs[c->dev[s]].bd, p, n, c->phys[s] + off);
				if (ret)
					return ret;
			}
		}
		p += n;
		len -= n;
		logical += n;
	}
	return 0;
}
