/*
 * trans layer: new chunks (block groups) when space runs out.
 *
 * A chunk of the profile the filesystem already uses for that kind of
 * block group (SINGLE, DUP, RAID0, RAID1, RAID1C3, RAID1C4, RAID10; RAID5/6
 * are refused) is placed in the devices' unallocated space - the device
 * minus its first MiB minus its DEV_EXTENTs - on the devices with the
 * largest holes.  It becomes: a CHUNK_ITEM (chunk tree), one DEV_EXTENT per
 * stripe (device tree), the devices' DEV_ITEM bytes_used (chunk tree; the
 * superblocks copy it at commit), a BLOCK_GROUP_ITEM, the free-space tree's
 * entries for the group (written at commit), and the chunk map of the
 * volume so that its space can be used at once.  System chunks would also
 * need the superblock's system chunk array; they are not allocated (the
 * system group that mkfs makes holds the chunk tree of far larger
 * filesystems than this writer grows).
 */
#include "trans/trans.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define SZ_1M (1024ULL * 1024)

struct dev_hole {
	struct ubt_device *dev;
	uint64_t start, len;	/* largest unallocated hole */
};

/* The largest unallocated hole of a device (above its first MiB). */
static int largest_hole(struct ubt_fs *fs, struct ubt_device *dev, struct dev_hole *out)
{
	struct btrfs_key min = { dev->devid, BTRFS_DEV_EXTENT_KEY, 0 };
	struct btrfs_key max = { dev->devid, BTRFS_DEV_EXTENT_KEY, (uint64_t)-1 };
	uint64_t end = dev->total_bytes, pos = SZ_1M;
	struct ubt_iter it;
	int ret;

	out->dev = dev;
	out->start = out->len = 0;
	ubt_iter_start(&it, &fs->tree, &fs->dev_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.size < sizeof(struct btrfs_dev_extent)) {
			ret = UBT_CORRUPT(it.leaf->start, "dev extent item too small");
			break;
		}
		uint64_t s = it.key.offset;
		uint64_t l = btrfs_dev_extent_length((const struct btrfs_dev_extent *)it.data);
		if (s > pos && s - pos > out->len) {
			out->start = pos;
			out->len = s - pos;
		}
		pos = UBT_MAX(pos, s + l);
	}
	ubt_iter_end(&it);
	if (ret < 0)
		return ret;
	if (end > pos && end - pos > out->len) {
		out->start = pos;
		out->len = end - pos;
	}
	/* Whole MiBs only. */
	uint64_t s = UBT_ALIGN_UP(out->start, SZ_1M);
	uint64_t e = (out->start + out->len) & ~(SZ_1M - 1);
	out->start = s;
	out->len = e > s ? e - s : 0;
	return 0;
}

static int cmp_hole(const void *a, const void *b)
{
	const struct dev_hole *x = a, *y = b;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return x->dev->devid < y->dev->devid ? -1 : x->dev->devid > y->dev->devid;
}

static int update_dev_item(struct ubt_trans *t, struct ubt_device *dev, uint64_t add)
{
	struct ubt_wroot *ct;
	struct btrfs_key key = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, dev->devid };
	struct ubt_path path;
	int ret = ubt_wroot_get(t, BTRFS_CHUNK_TREE_OBJECTID, &ct);

	if (ret)
		return ret;
	ubt_path_init(&path);
	ret = ubt_search_slot_w(t, ct, &key, &path, 0);
	if (ret == 1)
		ret = UBT_CORRUPT(0, "devid %llu has no DEV_ITEM", (unsigned long long)dev->devid);
	if (ret == 0) {
		if (ubt_eb_item_size(path.nodes[0], path.slots[0]) < sizeof(struct btrfs_dev_item)) {
			ret = -EUCLEAN;
		} else {
			struct btrfs_dev_item *di =
				(void *)ubt_eb_witem_data(path.nodes[0], path.slots[0]);
			btrfs_set_dev_item_bytes_used(di, btrfs_dev_item_bytes_used(di) + add);
		}
	}
	ubt_path_release(&t->w->fs->tree, &path);
	return ret;
}

/* Insert bg into w->bgs in order (the array may move). */
static int add_bg(struct ubt_wfs *w, const struct ubt_bg *bg)
{
	struct ubt_bg *v = realloc(w->bgs, (w->nbgs + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	w->bgs = v;
	size_t i = w->nbgs;
	while (i > 0 && w->bgs[i - 1].start > bg->start) {
		w->bgs[i] = w->bgs[i - 1];
		i--;
	}
	w->bgs[i] = *bg;
	w->nbgs++;
	return 0;
}

int ubt_alloc_chunk(struct ubt_trans *t, uint64_t kind)
{
	struct ubt_wfs *w = t->w;
	struct ubt_fs *fs = w->fs;
	struct ubt_volume *vol = fs->vol;
	uint64_t profile = (uint64_t)-1;
	bool changed = false;
	int ret;

	if (kind & BTRFS_BLOCK_GROUP_SYSTEM)
		return -ENOSPC;
	for (size_t i = 0; i < w->nbgs; i++) {
		if ((w->bgs[i].flags & BTRFS_BLOCK_GROUP_TYPE_MASK) == kind) {
			profile = w->bgs[i].flags & BTRFS_BLOCK_GROUP_PROFILE_MASK;
			break;
		}
	}
	if (profile == (uint64_t)-1)
		return -ENOSPC;		/* mixed groups, or no group of that kind */
	if (profile & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)) {
		ubt_log(UBT_LOG_ERROR, "allocating RAID5/6 chunks is not supported");
		return -ENOSPC;
	}

	struct dev_hole *holes = calloc(vol->ndevices + 1, sizeof(*holes));
	if (!holes)
		return -ENOMEM;
	size_t nh = 0;
	for (size_t d = 0; d < vol->ndevices; d++) {
		ret = largest_hole(fs, &vol->devices[d], &holes[nh]);
		if (ret)
			goto out;
		if (holes[nh].len >= SZ_1M)
			nh++;
	}
	ubt_sort(holes, nh, sizeof(*holes), cmp_hole);

	uint32_t nstripes, sub = 1, ndev;
	switch (profile) {
	case 0: nstripes = ndev = 1; break;
	case BTRFS_BLOCK_GROUP_DUP: nstripes = 2; ndev = 1; break;
	case BTRFS_BLOCK_GROUP_RAID1: nstripes = ndev = 2; break;
	case BTRFS_BLOCK_GROUP_RAID1C3: nstripes = ndev = 3; break;
	case BTRFS_BLOCK_GROUP_RAID1C4: nstripes = ndev = 4; break;
	case BTRFS_BLOCK_GROUP_RAID0: nstripes = ndev = (uint32_t)nh; break;
	case BTRFS_BLOCK_GROUP_RAID10:
		nstripes = ndev = (uint32_t)(nh & ~(size_t)1);
		sub = 2;
		break;
	default:
		ret = -ENOSPC;
		goto out;
	}
	if (ndev == 0 || nh < ndev || (profile == BTRFS_BLOCK_GROUP_RAID10 && ndev < 2)) {
		ret = -ENOSPC;
		goto out;
	}
	/* Stripe size: at most 10% of the filesystem, 256 MiB (metadata) or
	 * 1 GiB (data), and what the smallest chosen hole holds. */
	uint64_t cap = kind & BTRFS_BLOCK_GROUP_DATA ? 1024 * SZ_1M : 256 * SZ_1M;
	uint64_t tenth = btrfs_super_total_bytes(&vol->super) / 10;
	cap = UBT_MIN(cap, UBT_MAX(tenth & ~(SZ_1M - 1), 4 * SZ_1M));
	uint64_t stripe = cap;
	for (uint32_t i = 0; i < ndev; i++) {
		uint64_t avail = holes[i].len / (profile == BTRFS_BLOCK_GROUP_DUP ? 2 : 1);
		stripe = UBT_MIN(stripe, avail & ~(SZ_1M - 1));
	}
	if (stripe < SZ_1M) {
		ret = -ENOSPC;
		goto out;
	}
	uint32_t data_stripes = profile == BTRFS_BLOCK_GROUP_RAID0 ? nstripes
				: profile == BTRFS_BLOCK_GROUP_RAID10 ? nstripes / 2 : 1;
	uint64_t length = stripe * data_stripes;
	uint64_t logical = SZ_1M;
	for (size_t i = 0; i < vol->nchunks; i++)
		logical = UBT_MAX(logical, vol->chunks[i]->start + vol->chunks[i]->length);
	logical = UBT_ALIGN_UP(logical, SZ_1M);

	/* The CHUNK_ITEM. */
	size_t csize = sizeof(struct btrfs_chunk) + nstripes * sizeof(struct btrfs_stripe);
	struct btrfs_chunk *chunk = calloc(1, csize);
	if (!chunk) {
		ret = -ENOMEM;
		goto out;
	}
	btrfs_set_chunk_length(chunk, length);
	btrfs_set_chunk_owner(chunk, BTRFS_EXTENT_TREE_OBJECTID);
	btrfs_set_chunk_stripe_len(chunk, BTRFS_STRIPE_LEN);
	btrfs_set_chunk_type(chunk, kind | profile);
	btrfs_set_chunk_io_align(chunk, fs->sectorsize);
	btrfs_set_chunk_io_width(chunk, fs->sectorsize);
	btrfs_set_chunk_sector_size(chunk, fs->sectorsize);
	btrfs_set_chunk_num_stripes(chunk, (uint16_t)nstripes);
	btrfs_set_chunk_sub_stripes(chunk, (uint16_t)sub);
	for (uint32_t i = 0; i < nstripes; i++) {
		const struct dev_hole *h = &holes[profile == BTRFS_BLOCK_GROUP_DUP ? 0 : i];
		uint64_t phys = h->start + (profile == BTRFS_BLOCK_GROUP_DUP ? i * stripe : 0);
		struct btrfs_stripe *s = &chunk->stripes[i];
		btrfs_set_stripe_devid(s, h->dev->devid);
		btrfs_set_stripe_offset(s, phys);
		memcpy(s->dev_uuid, h->dev->uuid, BTRFS_UUID_SIZE);
	}

	struct ubt_wroot *ct, *dt, *bgt;
	uint8_t *p;
	ret = ubt_wroot_get(t, BTRFS_CHUNK_TREE_OBJECTID, &ct);
	if (!ret)
		ret = ubt_wroot_get(t, BTRFS_DEV_TREE_OBJECTID, &dt);
	if (!ret)
		ret = ubt_wroot_get(t, fs->block_group_tree.bytenr ? BTRFS_BLOCK_GROUP_TREE_OBJECTID
								    : BTRFS_EXTENT_TREE_OBJECTID, &bgt);
	if (ret)
		goto out_chunk;
	/* Map it before the trees describe it (the block group joins the
	 * allocator only at the end). */
	ret = ubt_volume_add_chunk(vol, logical, chunk, (uint32_t)csize);
	if (ret)
		goto out_chunk;
	changed = true;
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, logical };
	ret = ubt_insert_item(t, ct, &key, (uint32_t)csize, &p);
	if (ret)
		goto out_chunk;
	memcpy(p, chunk, csize);

	/* The chunk tree's uuid, as every block header carries it. */
	struct ubt_eb *croot;
	ret = ubt_read_root(&fs->tree, &fs->chunk_tree, &croot);
	if (ret)
		goto out_chunk;
	uint8_t chunk_uuid[BTRFS_UUID_SIZE];
	memcpy(chunk_uuid, ubt_eb_header(croot)->chunk_tree_uuid, BTRFS_UUID_SIZE);
	ubt_eb_put(&fs->tree, croot);

	for (uint32_t i = 0; i < nstripes && !ret; i++) {
		const struct btrfs_stripe *s = &chunk->stripes[i];
		struct btrfs_key dk = { btrfs_stripe_devid(s), BTRFS_DEV_EXTENT_KEY,
					btrfs_stripe_offset(s) };
		ret = ubt_insert_item(t, dt, &dk, sizeof(struct btrfs_dev_extent), &p);
		if (ret)
			break;
		struct btrfs_dev_extent *de = (void *)p;
		btrfs_set_dev_extent_chunk_tree(de, BTRFS_CHUNK_TREE_OBJECTID);
		btrfs_set_dev_extent_chunk_objectid(de, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
		btrfs_set_dev_extent_chunk_offset(de, logical);
		btrfs_set_dev_extent_length(de, stripe);
		memcpy(de->chunk_tree_uuid, chunk_uuid, BTRFS_UUID_SIZE);
	}
	for (uint32_t i = 0; i < ndev && !ret; i++)
		ret = update_dev_item(t, holes[i].dev,
				      stripe * (profile == BTRFS_BLOCK_GROUP_DUP ? 2 : 1));
	if (ret)
		goto out_chunk;

	struct btrfs_key bk = { logical, BTRFS_BLOCK_GROUP_ITEM_KEY, length };
	ret = ubt_insert_item(t, bgt, &bk, sizeof(struct btrfs_block_group_item), &p);
	if (ret)
		goto out_chunk;
	struct btrfs_block_group_item *bgi = (void *)p;
	btrfs_set_block_group_used(bgi, 0);
	btrfs_set_block_group_chunk_objectid(bgi, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	btrfs_set_block_group_flags(bgi, kind | profile);

	struct ubt_bg bg = { 0 };
	bg.start = logical;
	bg.len = length;
	bg.flags = kind | profile;
	bg.chunk_objectid = BTRFS_FIRST_CHUNK_TREE_OBJECTID;
	bg.dirty = true;		/* free-space tree entries to write */
	bg.item_dirty = true;
	ret = add_bg(w, &bg);
	if (ret)
		goto out_chunk;
	/* Superblock stripes inside it, and nothing allocated yet. */
	ret = ubt_bg_load_extents(w, ubt_bg_find(w, logical));
	if (!ret)
		ubt_log(UBT_LOG_INFO, "new %s chunk at %llu, %llu bytes",
			ubt_profile_name(kind | profile), (unsigned long long)logical,
			(unsigned long long)length);
out_chunk:
	free(chunk);
	/* Mapped, and perhaps some of its items made: whatever the error
	 * (ENOSPC too), the transaction must not be committed so. */
	if (ret && changed && !w->aborted) {
		ubt_log(UBT_LOG_ERROR, "a new chunk failed part way (%s): aborting",
			ubt_strerror(ret));
		w->aborted = true;
		w->abort_err = ret;
	}
out:
	free(holes);
	return ret;
}
