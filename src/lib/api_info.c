/*
 * The public API, part 3: whole-filesystem information — devices, space
 * (block groups per type and profile), statfs figures and the subvolume
 * list.  Translation over fs/ and volume/; no caching of its own.
 */
#include <ubtrfs/ubtrfs.h>

#include "api_internal.h"
#include "base/base.h"
#include "fs/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ubtrfs_get_info(ubtrfs_fs *f, struct ubtrfs_fs_info *out)
{
	const struct btrfs_super_block *sb = &f->fs->vol->super;

	ubt_api_rdlock_noerr(f);	/* a commit rewrites the superblock */
	memset(out, 0, sizeof(*out));
	memcpy(out->label, sb->label, BTRFS_LABEL_SIZE);
	out->label[BTRFS_LABEL_SIZE] = 0;
	memcpy(out->fsid, sb->fsid, 16);
	out->total_bytes = btrfs_super_total_bytes(sb);
	out->bytes_used = btrfs_super_bytes_used(sb);
	out->generation = btrfs_super_generation(sb);
	out->num_devices = btrfs_super_num_devices(sb);
	out->sectorsize = btrfs_super_sectorsize(sb);
	out->nodesize = btrfs_super_nodesize(sb);
	out->csum_name = ubt_csum_name(btrfs_super_csum_type(sb));
	ubt_api_unlock(f);
	return 0;
}

static int unl_devices(ubtrfs_fs *f, int (*fn)(void *ctx, const struct ubtrfs_device_info *d),
		   void *ctx)
{
	const struct ubt_volume *vol = f->fs->vol;
	struct btrfs_key min = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, (uint64_t)-1 };
	struct ubt_iter it;
	int ret;

	/* The chunk tree's DEV_ITEMs are the authority on size and use. */
	ubt_iter_start(&it, &f->fs->tree, &f->fs->chunk_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.size < sizeof(struct btrfs_dev_item))
			continue;
		const struct btrfs_dev_item *di = (const void *)it.data;
		struct ubtrfs_device_info d = { 0 };
		d.devid = btrfs_dev_item_devid(di);
		d.total_bytes = btrfs_dev_item_total_bytes(di);
		d.bytes_used = btrfs_dev_item_bytes_used(di);
		memcpy(d.uuid, di->uuid, 16);
		for (size_t i = 0; i < vol->ndevices; i++)
			if (vol->devices[i].devid == d.devid)
				d.path = vol->devices[i].path;
		ret = fn(ctx, &d);
		if (ret)
			break;
	}
	ubt_iter_end(&it);
	return ret == 1 ? 0 : ret;
}

/* Usable-space factor of a profile (raw bytes per logical byte), x100. */
static uint64_t factor_x100(uint64_t flags, uint16_t num_stripes)
{
	uint64_t p = flags & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	if (p & (BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_RAID10))
		return 200;
	if (p & BTRFS_BLOCK_GROUP_RAID1C3)
		return 300;
	if (p & BTRFS_BLOCK_GROUP_RAID1C4)
		return 400;
	if ((p & BTRFS_BLOCK_GROUP_RAID5) && num_stripes > 1)
		return 100ull * num_stripes / (num_stripes - 1u);
	if ((p & BTRFS_BLOCK_GROUP_RAID6) && num_stripes > 2)
		return 100ull * num_stripes / (num_stripes - 2u);
	return 100;
}

struct bg_sum {
	uint64_t flags;
	uint64_t total, used;		/* logical bytes */
	uint64_t raw_total, raw_used;	/* device bytes */
};

/*
 * Sum the block groups per flags.  Each chunk has exactly one block group
 * item (in the block-group tree when that feature is on, else the extent
 * tree) keyed (start, BLOCK_GROUP_ITEM, length): one point lookup per chunk.
 */
static int sum_block_groups(ubtrfs_fs *f, struct bg_sum *sums, size_t *nsums, size_t cap)
{
	struct ubt_fs *fs = f->fs;
	const struct ubt_root_ref *root =
		fs->block_group_tree.bytenr ? &fs->block_group_tree : &fs->extent_tree;
	int ret = 0;

	*nsums = 0;
	for (size_t i = 0; i < fs->vol->nchunks; i++) {
		const struct ubt_chunk *c = fs->vol->chunks[i];
		struct btrfs_key key = { c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
		struct ubt_path path;
		uint64_t used = 0, flags = c->type;

		ubt_path_init(&path);
		ret = ubt_search_slot(&fs->tree, root, &key, &path);
		if (ret == 0 && ubt_eb_item_size(path.nodes[0], path.slots[0]) >=
					sizeof(struct btrfs_block_group_item)) {
			const struct btrfs_block_group_item *bg =
				(const void *)ubt_eb_item_data(path.nodes[0], path.slots[0]);
			used = btrfs_block_group_used(bg);
			flags = btrfs_block_group_flags(bg);
		}
		ubt_path_release(&fs->tree, &path);
		if (ret < 0)
			return ret;
		ret = 0;
		size_t k = 0;
		while (k < *nsums && sums[k].flags != flags)
			k++;
		if (k == *nsums) {
			if (*nsums == cap)
				continue;
			memset(&sums[k], 0, sizeof(sums[k]));
			sums[k].flags = flags;
			(*nsums)++;
		}
		uint64_t fx = factor_x100(flags, c->num_stripes);
		sums[k].total += c->length;
		sums[k].used += used;
		sums[k].raw_total += c->length * fx / 100;
		sums[k].raw_used += used * fx / 100;
	}
	return ret;
}

static const char *type_name(uint64_t flags)
{
	bool d = flags & BTRFS_BLOCK_GROUP_DATA, m = flags & BTRFS_BLOCK_GROUP_METADATA;

	if (d && m)
		return "Data+Metadata";
	if (d)
		return "Data";
	if (m)
		return "Metadata";
	if (flags & BTRFS_BLOCK_GROUP_SYSTEM)
		return "System";
	return "unknown";
}

static int unl_space(ubtrfs_fs *f, int (*fn)(void *ctx, const struct ubtrfs_space_info *s), void *ctx)
{
	struct bg_sum sums[64];
	size_t n;
	int ret = sum_block_groups(f, sums, &n, UBT_ARRAY_SIZE(sums));

	if (ret)
		return ret;
	/* Data, System, Metadata order as btrfs filesystem df prints. */
	static const uint64_t order[] = { BTRFS_BLOCK_GROUP_DATA, BTRFS_BLOCK_GROUP_SYSTEM,
					  BTRFS_BLOCK_GROUP_METADATA };
	for (size_t o = 0; o < UBT_ARRAY_SIZE(order); o++) {
		for (size_t i = 0; i < n; i++) {
			uint64_t t = sums[i].flags & BTRFS_BLOCK_GROUP_TYPE_MASK;
			uint64_t first = t & BTRFS_BLOCK_GROUP_DATA ? BTRFS_BLOCK_GROUP_DATA : t;
			if (first != order[o])
				continue;
			struct ubtrfs_space_info s = { sums[i].flags, type_name(sums[i].flags),
						       ubt_profile_name(sums[i].flags), sums[i].total,
						       sums[i].used };
			ret = fn(ctx, &s);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int add_unallocated(void *ctx, const struct ubtrfs_device_info *d)
{
	uint64_t *sum = ctx;

	if (d->path && d->total_bytes > d->bytes_used)
		*sum += d->total_bytes - d->bytes_used;
	return 0;
}

static int statfs_unlocked(ubtrfs_fs *f, struct ubtrfs_statfs *out)
{
	const struct btrfs_super_block *sb = &f->fs->vol->super;
	struct bg_sum sums[64];
	uint64_t free_data = 0, used_raw = 0, fx = 100;
	size_t n;
	int ret = sum_block_groups(f, sums, &n, UBT_ARRAY_SIZE(sums));

	if (ret)
		return ret;
	/* The kernel's statfs: sizes in data-profile units; used counts every
	 * block group's raw use; available is free data space plus the
	 * unallocated device space a data chunk could take. */
	for (size_t i = 0; i < n; i++) {
		if (sums[i].flags & BTRFS_BLOCK_GROUP_DATA) {
			free_data += sums[i].raw_total - sums[i].raw_used;
			fx = sums[i].total ? sums[i].raw_total * 100 / sums[i].total : 100;
		}
		used_raw += sums[i].raw_used;
	}
	uint64_t unallocated = 0;
	ret = unl_devices(f, add_unallocated, &unallocated);
	if (ret)
		return ret;
	uint32_t bsize = btrfs_super_sectorsize(sb);
	memset(out, 0, sizeof(*out));
	out->bsize = bsize;
	out->blocks = btrfs_super_total_bytes(sb) * 100 / fx / bsize;
	uint64_t used_blocks = used_raw * 100 / fx / bsize;
	out->bfree = out->blocks > used_blocks ? out->blocks - used_blocks : 0;
	out->bavail = (free_data + unallocated) * 100 / fx / bsize;
	out->namelen = BTRFS_NAME_LEN;
	return 0;
}

/* Block-group items change under a writer: hold the handle lock. */
int ubtrfs_statfs(ubtrfs_fs *f, struct ubtrfs_statfs *out)
{
	ubt_api_rdlock_noerr(f);
	int ret = statfs_unlocked(f, out);
	ubt_api_unlock(f);
	return ret;
}

/* ---- subvolume list ----------------------------------------------------- */

/* Prepend "name/" to the path being built right-to-left in buf[0..*pos). */
static int prepend(char *buf, size_t *pos, const char *name, size_t len, bool slash)
{
	size_t need = len + (slash ? 1 : 0);

	if (need > *pos)
		return -ENAMETOOLONG;
	if (slash)
		buf[--*pos] = '/';
	*pos -= len;
	memcpy(buf + *pos, name, len);
	return 0;
}

/* First (objectid, type, *) item of `root`: key and a copy of the body. */
static int first_item(struct ubt_fs *fs, const struct ubt_root_ref *root, uint64_t objectid,
		      uint8_t type, struct btrfs_key *key, uint8_t *buf, uint32_t cap, uint32_t *size)
{
	struct btrfs_key min = { objectid, type, 0 }, max = { objectid, type, (uint64_t)-1 };
	struct ubt_iter it;
	int ret;

	ubt_iter_start(&it, &fs->tree, root, &min, &max);
	ret = ubt_iter_next(&it);
	if (ret == 0) {
		*key = it.key;
		*size = UBT_MIN(it.size, cap);
		memcpy(buf, it.data, *size);
	}
	ubt_iter_end(&it);
	return ret == 1 ? -ENOENT : ret;
}

/* Path of subvolume `id` from the top level, built right-to-left. */
static int subvol_path(struct ubt_fs *fs, uint64_t id, char *buf, size_t *pos)
{
	uint8_t body[sizeof(struct btrfs_root_ref) + BTRFS_NAME_LEN];
	struct btrfs_key key;
	uint32_t size;
	int ret = 0;
	bool first = true;

	for (int depth = 0; id != BTRFS_FS_TREE_OBJECTID; depth++) {
		if (depth > 4096)
			return UBT_CORRUPT(0, "subvolume %llu: parent chain loops",
					   (unsigned long long)id);
		ret = first_item(fs, &fs->root_tree, id, BTRFS_ROOT_BACKREF_KEY, &key, body,
				 sizeof(body), &size);
		if (ret)
			return ret;
		const struct btrfs_root_ref *rr = (const void *)body;
		uint16_t nl = btrfs_root_ref_name_len(rr);
		if (size < sizeof(*rr) || nl > size - sizeof(*rr))
			return UBT_CORRUPT(0, "root backref of %llu truncated", (unsigned long long)id);
		ret = prepend(buf, pos, (const char *)body + sizeof(*rr), nl, !first);
		if (ret)
			return ret;
		first = false;
		/* The directory inside the parent, walked up by inode refs. */
		uint64_t parent = key.offset, dir = btrfs_root_ref_dirid(rr);
		const struct ubt_subvol *psv;
		ret = ubt_fs_subvol(fs, parent, &psv);
		if (ret)
			return ret;
		uint64_t top = btrfs_root_root_dirid(&psv->item);
		for (int steps = 0; dir != top; steps++) {
			uint8_t ref[sizeof(struct btrfs_inode_ref) + BTRFS_NAME_LEN];
			struct btrfs_key rk;
			if (steps > 65536)
				return UBT_CORRUPT(0, "directory %llu: parent chain loops",
						   (unsigned long long)dir);
			ret = first_item(fs, &psv->root, dir, BTRFS_INODE_REF_KEY, &rk, ref,
					 sizeof(ref), &size);
			if (ret)
				return ret;
			const struct btrfs_inode_ref *ir = (const void *)ref;
			uint16_t inl = btrfs_inode_ref_name_len(ir);
			if (size < sizeof(*ir) || inl > size - sizeof(*ir))
				return UBT_CORRUPT(0, "inode ref of %llu truncated",
						   (unsigned long long)dir);
			ret = prepend(buf, pos, (const char *)ref + sizeof(*ir), inl, true);
			if (ret)
				return ret;
			dir = rk.offset;
		}
		id = parent;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int unl_subvol_list(ubtrfs_fs *f, int (*fn)(void *ctx, const struct ubtrfs_subvol_info *i),
		       void *ctx)
{
	struct ubt_fs *fs = f->fs;
	struct btrfs_key min = { BTRFS_FIRST_FREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_LAST_FREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	struct ubt_iter it;
	int ret;

	ubt_iter_start(&it, &fs->tree, &fs->root_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.key.type != BTRFS_ROOT_ITEM_KEY || (n && ids[n - 1] == it.key.objectid))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			uint64_t *a = realloc(ids, cap * sizeof(*a));
			if (!a) {
				ret = -ENOMEM;
				break;
			}
			ids = a;
		}
		ids[n++] = it.key.objectid;
	}
	ubt_iter_end(&it);
	if (ret < 0)
		goto out;
	ubt_sort(ids, n, sizeof(*ids), cmp_u64);
	ret = 0;
	for (size_t i = 0; i < n && ret == 0; i++) {
		const struct ubt_subvol *sv;
		int r = ubt_fs_subvol(fs, ids[i], &sv);
		if (r == -ENOENT)
			continue;	/* deleted, not yet cleaned */
		if (r) {
			ret = r;
			break;
		}
		char buf[4096];
		size_t pos = sizeof(buf) - 1;
		buf[pos] = 0;
		struct ubtrfs_subvol_info info = { 0 };
		r = subvol_path(fs, ids[i], buf, &pos);
		if (r == -ENOENT)
			continue;	/* no backref: an orphan being deleted */
		if (r) {
			ret = r;
			break;
		}
		uint8_t body[sizeof(struct btrfs_root_ref)];
		struct btrfs_key key;
		uint32_t size;
		if (first_item(fs, &fs->root_tree, ids[i], BTRFS_ROOT_BACKREF_KEY, &key, body,
			       sizeof(body), &size) == 0) {
			info.parent_id = key.offset;
			info.dirid = btrfs_root_ref_dirid((const struct btrfs_root_ref *)body);
		}
		info.id = ids[i];
		info.generation = btrfs_root_generation(&sv->item);
		info.ctransid = btrfs_root_ctransid(&sv->item);
		info.otransid = btrfs_root_otransid(&sv->item);
		info.flags = sv->readonly ? 1 : 0;
		info.path = buf + pos;
		memcpy(info.uuid, btrfs_root_uuid(&sv->item), 16);
		memcpy(info.parent_uuid, btrfs_root_parent_uuid(&sv->item), 16);
		memcpy(info.received_uuid, btrfs_root_received_uuid(&sv->item), 16);
		const struct btrfs_timespec *ot = btrfs_root_otime(&sv->item);
		info.otime.sec = (int64_t)btrfs_timespec_sec(ot);
		info.otime.nsec = btrfs_timespec_nsec(ot);
		ret = fn(ctx, &info);
	}
out:
	free(ids);
	return ret;
}

int ubtrfs_devices(ubtrfs_fs *f, int (*fn)(void *ctx, const struct ubtrfs_device_info *d), void *ctx)
{
	ubt_api_rdlock_noerr(f);
	int ret = unl_devices(f, fn, ctx);
	ubt_api_unlock(f);
	return ret;
}

int ubtrfs_space(ubtrfs_fs *f, int (*fn)(void *ctx, const struct ubtrfs_space_info *s), void *ctx)
{
	ubt_api_rdlock_noerr(f);
	int ret = unl_space(f, fn, ctx);
	ubt_api_unlock(f);
	return ret;
}

int ubtrfs_subvol_list(ubtrfs_fs *f, int (*fn)(void *ctx, const struct ubtrfs_subvol_info *i),
		       void *ctx)
{
	ubt_api_rdlock_noerr(f);
	int ret = unl_subvol_list(f, fn, ctx);
	ubt_api_unlock(f);
	return ret;
}
