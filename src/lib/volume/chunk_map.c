/*
 * volume layer: the chunk map — logical addresses to device stripes, for
 * every profile (SINGLE, DUP, RAID0, RAID1, RAID1C3, RAID1C4, RAID10, RAID5,
 * RAID6), and reads through it, rebuilding RAID5/6 data from parity when the
 * data stripe's device is missing or a caller asks for another copy.
 *
 * Invariants: chunks[] is sorted by start and non-overlapping; every chunk
 * was validated by ubt_volume_add_chunk() (profile and stripe counts agree,
 * stripe_len is 64 KiB, lengths are sector aligned), so the mapping
 * arithmetic below cannot divide by zero or overflow.
 *
 * Copies ("mirrors", numbered from 1 as the kernel does): SINGLE/RAID0 have
 * 1, DUP/RAID1/RAID10 2, RAID1C3 3, RAID1C4 4; RAID5 has 2 (the data, or a
 * rebuild from P) and RAID6 3 (data, rebuild from P, rebuild from Q).
 */
#include "volume.h"

#include "base/base.h"
#include "volume/raid56.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ubt_profile_name(uint64_t type)
{
	switch (type & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case 0:
		return "single";
	case BTRFS_BLOCK_GROUP_DUP:
		return "DUP";
	case BTRFS_BLOCK_GROUP_RAID0:
		return "RAID0";
	case BTRFS_BLOCK_GROUP_RAID1:
		return "RAID1";
	case BTRFS_BLOCK_GROUP_RAID1C3:
		return "RAID1C3";
	case BTRFS_BLOCK_GROUP_RAID1C4:
		return "RAID1C4";
	case BTRFS_BLOCK_GROUP_RAID10:
		return "RAID10";
	case BTRFS_BLOCK_GROUP_RAID5:
		return "RAID5";
	case BTRFS_BLOCK_GROUP_RAID6:
		return "RAID6";
	default:
		return "invalid";
	}
}

static int nparity(const struct ubt_chunk *c)
{
	if (c->type & BTRFS_BLOCK_GROUP_RAID5)
		return 1;
	if (c->type & BTRFS_BLOCK_GROUP_RAID6)
		return 2;
	return 0;
}

/* Validate a chunk item the way the kernel's chunk checks do. */
static int check_chunk(const struct ubt_volume *vol, uint64_t logical,
		       const struct btrfs_chunk *chunk, uint32_t item_size)
{
	uint64_t length = btrfs_chunk_length(chunk);
	uint64_t type = btrfs_chunk_type(chunk);
	uint64_t profile = type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
	uint16_t n = btrfs_chunk_num_stripes(chunk);
	uint16_t sub = btrfs_chunk_sub_stripes(chunk);
	uint32_t ss = vol->sectorsize;

	if (n == 0 || item_size != btrfs_chunk_item_size(n))
		return UBT_CORRUPT(logical, "chunk: item size %u does not hold %u stripes", item_size, n);
	if (length == 0 || !UBT_IS_ALIGNED(length, ss) || !UBT_IS_ALIGNED(logical, ss))
		return UBT_CORRUPT(logical, "chunk: start or length %llu not sector aligned",
				   (unsigned long long)length);
	if (logical + length < logical)
		return UBT_CORRUPT(logical, "chunk: end overflows");
	if (btrfs_chunk_stripe_len(chunk) != BTRFS_STRIPE_LEN)
		return UBT_CORRUPT(logical, "chunk: stripe_len %llu is not 64 KiB",
				   (unsigned long long)btrfs_chunk_stripe_len(chunk));
	if (!(type & BTRFS_BLOCK_GROUP_TYPE_MASK) ||
	    (type & ~(BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK)))
		return UBT_CORRUPT(logical, "chunk: bad type 0x%llx", (unsigned long long)type);
	if (profile & (profile - 1))
		return UBT_CORRUPT(logical, "chunk: several profiles in type 0x%llx",
				   (unsigned long long)type);
	if ((profile == BTRFS_BLOCK_GROUP_RAID10 && (sub != 2 || n < 2 || n % 2)) ||
	    (profile == BTRFS_BLOCK_GROUP_RAID1 && n != 2) ||
	    (profile == BTRFS_BLOCK_GROUP_RAID1C3 && n != 3) ||
	    (profile == BTRFS_BLOCK_GROUP_RAID1C4 && n != 4) ||
	    (profile == BTRFS_BLOCK_GROUP_RAID5 && n < 2) ||
	    (profile == BTRFS_BLOCK_GROUP_RAID6 && n < 3) ||
	    (profile == BTRFS_BLOCK_GROUP_DUP && n != 2) ||
	    (profile == 0 && n != 1))
		return UBT_CORRUPT(logical, "chunk: %u stripes (sub_stripes %u) invalid for %s", n, sub,
				   ubt_profile_name(type));
	for (uint16_t i = 0; i < n; i++) {
		uint64_t off = btrfs_stripe_offset_nr(chunk, i);
		if (!UBT_IS_ALIGNED(off, ss))
			return UBT_CORRUPT(logical, "chunk: stripe %u offset %llu not sector aligned", i,
					   (unsigned long long)off);
	}
	return 0;
}

static bool same_chunk(const struct ubt_chunk *a, uint64_t logical, const struct btrfs_chunk *c)
{
	if (a->start != logical || a->length != btrfs_chunk_length(c) ||
	    a->type != btrfs_chunk_type(c) || a->num_stripes != btrfs_chunk_num_stripes(c))
		return false;
	for (uint16_t i = 0; i < a->num_stripes; i++)
		if (a->stripes[i].devid != btrfs_stripe_devid_nr(c, i) ||
		    a->stripes[i].physical != btrfs_stripe_offset_nr(c, i))
			return false;
	return true;
}

int ubt_volume_add_chunk(struct ubt_volume *vol, uint64_t logical, const struct btrfs_chunk *chunk,
			 uint32_t item_size)
{
	struct ubt_chunk *c;
	size_t pos = 0;
	int ret;

	ret = check_chunk(vol, logical, chunk, item_size);
	if (ret)
		return ret;
	uint64_t length = btrfs_chunk_length(chunk);
	while (pos < vol->nchunks && vol->chunks[pos]->start < logical)
		pos++;
	if (pos < vol->nchunks && same_chunk(vol->chunks[pos], logical, chunk))
		return 0;	/* a system chunk seen in the array and the tree */
	if ((pos > 0 && vol->chunks[pos - 1]->start + vol->chunks[pos - 1]->length > logical) ||
	    (pos < vol->nchunks && logical + length > vol->chunks[pos]->start))
		return UBT_CORRUPT(logical, "chunk overlaps another chunk");
	if (vol->nchunks == vol->chunks_cap) {
		size_t cap = vol->chunks_cap ? vol->chunks_cap * 2 : 16;
		struct ubt_chunk **a = realloc(vol->chunks, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		vol->chunks = a;
		vol->chunks_cap = cap;
	}
	uint16_t n = btrfs_chunk_num_stripes(chunk);
	c = calloc(1, sizeof(*c) + n * sizeof(c->stripes[0]));
	if (!c)
		return -ENOMEM;
	c->start = logical;
	c->length = length;
	c->type = btrfs_chunk_type(chunk);
	c->stripe_len = btrfs_chunk_stripe_len(chunk);
	c->num_stripes = n;
	c->sub_stripes = btrfs_chunk_sub_stripes(chunk);
	for (uint16_t i = 0; i < n; i++) {
		c->stripes[i].devid = btrfs_stripe_devid_nr(chunk, i);
		c->stripes[i].physical = btrfs_stripe_offset_nr(chunk, i);
		c->stripes[i].dev = NULL;
	}
	memmove(&vol->chunks[pos + 1], &vol->chunks[pos], (vol->nchunks - pos) * sizeof(c));
	vol->chunks[pos] = c;
	vol->nchunks++;
	/* Until ubt_volume_finish() binds everything, bind what we know so the
	 * system chunks can be read while the chunk tree loads. */
	for (uint16_t i = 0; i < n; i++)
		for (size_t d = 0; d < vol->ndevices; d++)
			if (vol->devices[d].devid == c->stripes[i].devid && vol->devices[d].bd)
				c->stripes[i].dev = &vol->devices[d];
	return 0;
}

const struct ubt_chunk *ubt_volume_find_chunk(const struct ubt_volume *vol, uint64_t logical)
{
	size_t lo = 0, hi = vol->nchunks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ubt_chunk *c = vol->chunks[mid];
		if (logical < c->start)
			hi = mid;
		else if (logical >= c->start + c->length)
			lo = mid + 1;
		else
			return c;
	}
	return NULL;
}

static int chunk_num_copies(const struct ubt_chunk *c)
{
	switch (c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case BTRFS_BLOCK_GROUP_DUP:
	case BTRFS_BLOCK_GROUP_RAID1:
	case BTRFS_BLOCK_GROUP_RAID10:
		return 2;
	case BTRFS_BLOCK_GROUP_RAID1C3:
		return 3;
	case BTRFS_BLOCK_GROUP_RAID1C4:
		return 4;
	case BTRFS_BLOCK_GROUP_RAID5:
		return 2;
	case BTRFS_BLOCK_GROUP_RAID6:
		return 3;
	default:
		return 1;
	}
}

int ubt_volume_num_copies(const struct ubt_volume *vol, uint64_t logical)
{
	const struct ubt_chunk *c = ubt_volume_find_chunk(vol, logical);
	return c ? chunk_num_copies(c) : 0;
}

/*
 * Where copy `mirror` of chunk offset `off` lives for the mirrored and
 * striped profiles (not RAID5/6): the stripe and the physical byte; *room is
 * how many bytes stay contiguous there (to the end of the stripe element or
 * of the chunk).  -EINVAL for a mirror the profile does not have, -EUCLEAN
 * for RAID5/6 or an unknown profile.
 */
static int mirror_stripe(const struct ubt_chunk *c, uint64_t off, int mirror,
			 const struct ubt_stripe_map **out, uint64_t *physical, uint64_t *room)
{
	uint64_t stripe_nr = off / c->stripe_len, in_stripe = off % c->stripe_len;
	const struct ubt_stripe_map *s;

	*room = c->length - off;
	switch (c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case 0:
		if (mirror != 1)
			return -EINVAL;
		s = &c->stripes[0];
		*physical = s->physical + off;
		break;
	case BTRFS_BLOCK_GROUP_DUP:
	case BTRFS_BLOCK_GROUP_RAID1:
	case BTRFS_BLOCK_GROUP_RAID1C3:
	case BTRFS_BLOCK_GROUP_RAID1C4:
		if (mirror < 1 || mirror > c->num_stripes)
			return -EINVAL;
		s = &c->stripes[mirror - 1];
		*physical = s->physical + off;
		break;
	case BTRFS_BLOCK_GROUP_RAID0:
		if (mirror != 1)
			return -EINVAL;
		s = &c->stripes[stripe_nr % c->num_stripes];
		*physical = s->physical + stripe_nr / c->num_stripes * c->stripe_len + in_stripe;
		*room = UBT_MIN(*room, c->stripe_len - in_stripe);
		break;
	case BTRFS_BLOCK_GROUP_RAID10: {
		uint64_t groups = (uint64_t)c->num_stripes / c->sub_stripes;
		uint64_t idx = (stripe_nr % groups) * c->sub_stripes + (uint64_t)(mirror - 1);
		if (mirror < 1 || mirror > c->sub_stripes || idx >= c->num_stripes)
			return -EINVAL;
		s = &c->stripes[idx];
		*physical = s->physical + stripe_nr / groups * c->stripe_len + in_stripe;
		*room = UBT_MIN(*room, c->stripe_len - in_stripe);
		break;
	}
	default:
		return -EUCLEAN;
	}
	*out = s;
	return 0;
}

static int read_stripe(const struct ubt_stripe_map *s, uint64_t physical, void *buf, size_t len)
{
	if (!s->dev || !s->dev->bd)
		return -ENXIO;	/* missing device: expected in degraded mode, quiet */
	int ret = ubt_bdev_read(s->dev->bd, buf, len, physical);
	if (ret)
		ubt_log(UBT_LOG_WARNING, "read error on %s at %llu (+%zu): %s", s->dev->path,
			(unsigned long long)physical, len, ubt_strerror(ret));
	return ret;
}

/*
 * RAID5/6: read `len` bytes at `off` within the chunk where the range stays
 * inside one stripe element.  mirror 1 reads the data stripe; 2 rebuilds it
 * from the other data stripes and P; 3 (RAID6) from the others and Q.
 */
static int read_raid56(const struct ubt_chunk *c, uint64_t off, void *buf, size_t len, int mirror)
{
	int np = nparity(c);
	int ndata = c->num_stripes - np;
	uint64_t full_len = (uint64_t)ndata * c->stripe_len;
	uint64_t full_nr = off / full_len;
	uint64_t in_full = off % full_len;
	int data_idx = (int)(in_full / c->stripe_len);
	uint64_t in_stripe = in_full % c->stripe_len;
	uint64_t dev_off = full_nr * c->stripe_len + in_stripe;
	/* Stripes rotate by one device per full stripe. */
#define DEV_OF(k) ((int)((full_nr + (uint64_t)(k)) % c->num_stripes))
	int ret;

	if (mirror == 1)
		return read_stripe(&c->stripes[DEV_OF(data_idx)],
				   c->stripes[DEV_OF(data_idx)].physical + dev_off, buf, len);
	if (mirror > 1 + np)
		return -EINVAL;

	/* Rebuild: read every other element of this row and note which
	 * cannot be read; then rebuild data_idx from what is left. */
	uint8_t *rows = malloc((size_t)c->num_stripes * len);
	uint8_t **ptrs = malloc(sizeof(*ptrs) * (size_t)c->num_stripes);
	if (!rows || !ptrs) {
		free(rows);
		free(ptrs);
		return -ENOMEM;
	}
	int failed[3], nfailed = 0;
	failed[nfailed++] = data_idx;
	for (int k = 0; k < c->num_stripes; k++) {
		ptrs[k] = rows + (size_t)k * len;
		if (k == data_idx)
			continue;
		const struct ubt_stripe_map *s = &c->stripes[DEV_OF(k)];
		if (read_stripe(s, s->physical + dev_off, ptrs[k], len) == 0)
			continue;
		if (nfailed == 1 + np) {
			ret = -EIO;	/* more failures than the parity covers */
			goto out;
		}
		failed[nfailed++] = k;
	}
	if (np == 1) {
		ret = ubt_raid5_recover((size_t)ndata, len, ptrs, ptrs[ndata], data_idx);
	} else {
		int other = -1;
		if (nfailed == 2)
			other = failed[1];	/* a second element is lost too */
		else
			other = mirror == 2 ? ndata + 1 : ndata;	/* 2: use P; 3: use Q */
		if (nfailed == 2 && mirror == 3 && other == ndata + 1) {
			ret = -EIO;	/* copy 3 means "from Q", and Q is gone */
			goto out;
		}
		if (nfailed == 2 && mirror == 2 && other == ndata) {
			ret = -EIO;	/* copy 2 means "from P", and P is gone */
			goto out;
		}
		ret = ubt_raid6_recover((size_t)ndata, len, ptrs, ptrs[ndata], ptrs[ndata + 1],
					data_idx, other);
	}
	if (!ret)
		memcpy(buf, ptrs[data_idx], len);
out:
#undef DEV_OF
	free(rows);
	free(ptrs);
	return ret;
}

/* Read within one stripe element of chunk c (no stripe boundary inside). */
static int read_in_chunk(const struct ubt_chunk *c, uint64_t off, void *buf, size_t len, int mirror)
{
	uint64_t profile = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
	const struct ubt_stripe_map *s;
	uint64_t physical, room;

	if (profile & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
		return read_raid56(c, off, buf, len, mirror);
	int ret = mirror_stripe(c, off, mirror, &s, &physical, &room);
	if (ret)
		return ret == -EINVAL ? -EUCLEAN : ret;
	return read_stripe(s, physical, buf, len);
}

int ubt_volume_read(struct ubt_volume *vol, uint64_t logical, void *buf, size_t len, int mirror)
{
	uint8_t *p = buf;

	while (len) {
		const struct ubt_chunk *c = ubt_volume_find_chunk(vol, logical);
		if (!c)
			return UBT_CORRUPT(logical, "logical address is not mapped by any chunk");
		if (mirror < 1 || mirror > chunk_num_copies(c))
			return -EINVAL;
		uint64_t off = logical - c->start;
		uint64_t room = c->stripe_len - off % c->stripe_len;
		size_t n = (size_t)UBT_MIN((uint64_t)len, room);
		n = (size_t)UBT_MIN((uint64_t)n, c->length - off);
		int ret = read_in_chunk(c, off, p, n, mirror);
		if (ret)
			return ret;
		p += n;
		logical += n;
		len -= n;
	}
	return 0;
}

size_t ubt_volume_map(struct ubt_volume *vol, uint64_t logical, size_t len, int mirror,
		      const uint8_t **out)
{
	const struct ubt_chunk *c = ubt_volume_find_chunk(vol, logical);
	const struct ubt_stripe_map *s;
	uint64_t physical, room;

	*out = NULL;
	/* RAID5/6 (an error here): read_raid56 knows the layout and rebuilds. */
	if (!c || mirror_stripe(c, logical - c->start, mirror, &s, &physical, &room))
		return 0;
	struct ubt_bdev *bd = s->dev ? s->dev->bd : NULL;
	if (!bd || !bd->map || physical >= bd->size)
		return 0;
	room = UBT_MIN(room, bd->size - physical);
	size_t n = (size_t)UBT_MIN((uint64_t)len, room);
	/* Writes to the range still gathered (bdev.c): the caller reads the
	 * other way, which has them. */
	if (!ubt_bdev_map_current(bd, physical, n))
		return 0;
	*out = bd->map + physical;
	return n;
}

void ubt_volume_willneed(struct ubt_volume *vol, uint64_t logical, uint64_t len)
{
	while (len) {
		const uint8_t *m;
		size_t n = ubt_volume_map(vol, logical, (size_t)UBT_MIN(len, (uint64_t)1 << 30), 1,
					  &m);
		if (!n)
			return;
		ubt_map_willneed(m, n);
		logical += n;
		len -= n;
	}
}

/*
 * Linux caches a file in naturally aligned folios (up to 2 MiB with 4 KiB
 * pages) and drops only folios wholly inside the range it is given: each
 * device range is rounded down at both ends to DROP_ALIGN (the start not
 * below the stripe's own start), and what is left after the last aligned
 * end is the next call's (it returns where it stopped).
 */
#define DROP_ALIGN ((uint64_t)2 << 20)

uint64_t ubt_volume_drop_cached(struct ubt_volume *vol, uint64_t logical, uint64_t len)
{
	while (len) {
		const struct ubt_chunk *c = ubt_volume_find_chunk(vol, logical);
		const struct ubt_stripe_map *s;
		uint64_t physical, room;

		if (!c || mirror_stripe(c, logical - c->start, 1, &s, &physical, &room) || !room)
			return logical + len;	/* unmapped, RAID5/6: nothing to drop */
		uint64_t n = UBT_MIN(UBT_MIN(len, room), (uint64_t)1 << 30);
		uint64_t a = UBT_MAX(physical / DROP_ALIGN * DROP_ALIGN, s->physical);
		uint64_t b = (physical + n) / DROP_ALIGN * DROP_ALIGN;
		if (b > a && s->dev && s->dev->bd)
			ubt_bdev_drop_cached(s->dev->bd, a, (size_t)(b - a));
		if (n == len)	/* the rest, from b on, is the next call's */
			return b > physical ? logical + (b - physical) : logical;
		logical += n;	/* a stripe or chunk ends here: its tail stays */
		len -= n;
	}
	return logical;
}

int ubt_volume_write(struct ubt_volume *vol, uint64_t logical, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		const struct ubt_chunk *c = ubt_volume_find_chunk(vol, logical);
		if (!c)
			return UBT_CORRUPT(logical, "writing to an unmapped logical address");
		if (c->type & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)) {
			ubt_log(UBT_LOG_ERROR, "writing %s chunks is not supported",
				ubt_profile_name(c->type));
			return -EOPNOTSUPP;
		}
		uint64_t off = logical - c->start;
		size_t n = len;
		/* Every copy of this piece (mirror numbers as for reading). */
		for (int m = 1; m <= chunk_num_copies(c); m++) {
			const struct ubt_stripe_map *s;
			uint64_t physical, room;
			int ret = mirror_stripe(c, off, m, &s, &physical, &room);
			if (ret)
				return ret;
			n = (size_t)UBT_MIN((uint64_t)n, room);
			if (!s->dev || !s->dev->bd)
				return -EIO;	/* no degraded writes */
			ret = ubt_bdev_write(s->dev->bd, p, n, physical);
			if (ret)
				return ret;
		}
		p += n;
		logical += n;
		len -= n;
	}
	return 0;
}

void ubt_volume_describe(const struct ubt_volume *vol, uint64_t logical, int mirror, char *buf,
			 size_t len)
{
	const struct ubt_chunk *c = ubt_volume_find_chunk(vol, logical);
	const struct ubt_stripe_map *s = NULL;
	uint64_t physical = 0;

	if (!c) {
		snprintf(buf, len, "unmapped");
		return;
	}
	uint64_t off = logical - c->start;
	uint64_t stripe_nr = off / c->stripe_len, in_stripe = off % c->stripe_len;
	switch (c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case 0:
		s = &c->stripes[0];
		physical = s->physical + off;
		break;
	case BTRFS_BLOCK_GROUP_DUP:
	case BTRFS_BLOCK_GROUP_RAID1:
	case BTRFS_BLOCK_GROUP_RAID1C3:
	case BTRFS_BLOCK_GROUP_RAID1C4:
		if (mirror >= 1 && mirror <= c->num_stripes) {
			s = &c->stripes[mirror - 1];
			physical = s->physical + off;
		}
		break;
	case BTRFS_BLOCK_GROUP_RAID0:
		s = &c->stripes[stripe_nr % c->num_stripes];
		physical = s->physical + stripe_nr / c->num_stripes * c->stripe_len + in_stripe;
		break;
	case BTRFS_BLOCK_GROUP_RAID10: {
		uint64_t groups = (uint64_t)c->num_stripes / c->sub_stripes;
		uint64_t idx = (stripe_nr % groups) * c->sub_stripes + (uint64_t)(mirror - 1);
		if (idx < c->num_stripes) {
			s = &c->stripes[idx];
			physical = s->physical + stripe_nr / groups * c->stripe_len + in_stripe;
		}
		break;
	}
	default: {
		int ndata = c->num_stripes - nparity(c);
		uint64_t full = off / ((uint64_t)ndata * c->stripe_len);
		int d = (int)(off % ((uint64_t)ndata * c->stripe_len) / c->stripe_len);
		if (mirror > 1) {
			snprintf(buf, len, "%s rebuild from %s", ubt_profile_name(c->type),
				 mirror == 2 ? "P" : "Q");
			return;
		}
		s = &c->stripes[(full + (uint64_t)d) % c->num_stripes];
		physical = s->physical + full * c->stripe_len + in_stripe;
	}
	}
	if (!s) {
		snprintf(buf, len, "copy %d", mirror);
		return;
	}
	snprintf(buf, len, "devid %llu (%s) physical %llu", (unsigned long long)s->devid,
		 s->dev && s->dev->path ? s->dev->path : "missing", (unsigned long long)physical);
}
