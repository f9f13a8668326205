/*
 * volume layer: the device set of one filesystem.
 *
 * Owns opening the devices, matching them to the filesystem (fsid, and the
 * metadata uuid when that feature is on), devid bookkeeping, choosing the
 * trusted superblock (the newest over all devices, as the kernel does), and
 * bootstrapping the chunk map from the superblock's system chunk array.
 *
 * Invariants: devices[] is sorted by devid with no duplicates; every device
 * with a bd belongs to the filesystem in `super`.  A missing device has
 * bd == NULL.  No locks: the set is built before any reader runs.
 */
#include "volume.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

static struct ubt_device *find_device(struct ubt_volume *vol, uint64_t devid)
{
	size_t lo = 0, hi = vol->ndevices;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (vol->devices[mid].devid == devid)
			return &vol->devices[mid];
		if (vol->devices[mid].devid < devid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Insert a device slot for devid (sorted); returns it, or NULL on ENOMEM. */
static struct ubt_device *insert_device(struct ubt_volume *vol, uint64_t devid)
{
	size_t pos = 0;

	if (vol->ndevices == vol->devices_cap) {
		size_t cap = vol->devices_cap ? vol->devices_cap * 2 : 4;
		struct ubt_device *d = realloc(vol->devices, cap * sizeof(*d));
		if (!d)
			return NULL;
		vol->devices = d;
		vol->devices_cap = cap;
	}
	while (pos < vol->ndevices && vol->devices[pos].devid < devid)
		pos++;
	memmove(&vol->devices[pos + 1], &vol->devices[pos],
		(vol->ndevices - pos) * sizeof(vol->devices[0]));
	memset(&vol->devices[pos], 0, sizeof(vol->devices[0]));
	vol->devices[pos].devid = devid;
	vol->ndevices++;
	return &vol->devices[pos];
}

static const uint8_t *super_metadata_uuid(const struct btrfs_super_block *sb)
{
	return (btrfs_super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_METADATA_UUID) ?
		       sb->metadata_uuid : sb->fsid;
}

static int add_one_device(struct ubt_volume *vol, const char *path, bool first)
{
	struct btrfs_super_block sb;
	struct ubt_bdev *bd;
	struct ubt_device *dev;
	char a[40], b[40];
	int ret;

	unsigned bflags = 0;
	if (!vol->opts.writable)
		bflags = UBT_BDEV_RDONLY | (vol->opts.lock_shared ? UBT_BDEV_LOCK_SHARED : 0);
	ret = ubt_bdev_open_file(path, bflags, &bd);
	if (ret == -EBUSY) {
		ubt_log(UBT_LOG_ERROR, "device %s is in use: %s", path,
			vol->opts.writable ? "mounted, opened by another writer, or named twice"
					   : "opened read-write elsewhere");
		return ret;
	}
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "cannot open device %s: %s", path, ubt_strerror(ret));
		return ret;
	}
	ret = ubt_super_read_best(bd, &sb, NULL);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "%s: not a usable btrfs device", path);
		goto fail;
	}
	if (first) {
		memcpy(vol->fsid, sb.fsid, BTRFS_FSID_SIZE);
		memcpy(vol->metadata_uuid, super_metadata_uuid(&sb), BTRFS_FSID_SIZE);
	} else if (memcmp(vol->fsid, sb.fsid, BTRFS_FSID_SIZE) ||
		   memcmp(vol->metadata_uuid, super_metadata_uuid(&sb), BTRFS_FSID_SIZE)) {
		ubt_uuid_str(sb.fsid, a);
		ubt_uuid_str(vol->fsid, b);
		ubt_log(UBT_LOG_ERROR, "%s belongs to another filesystem (fsid %s, expected %s)", path,
			a, b);
		ret = -EINVAL;
		goto fail;
	}
	const struct btrfs_dev_item *di = &sb.dev_item;
	uint64_t devid = btrfs_dev_item_devid(di);
	if (find_device(vol, devid)) {
		ubt_log(UBT_LOG_ERROR, "%s: devid %llu was given twice", path,
			(unsigned long long)devid);
		ret = -EINVAL;
		goto fail;
	}
	dev = insert_device(vol, devid);
	if (!dev || !(dev->path = strdup(path))) {
		ret = -ENOMEM;
		goto fail;
	}
	memcpy(dev->uuid, di->uuid, BTRFS_UUID_SIZE);
	dev->bd = bd;
	dev->total_bytes = btrfs_dev_item_total_bytes(di);
	dev->generation = btrfs_super_generation(&sb);
	if (first || btrfs_super_generation(&sb) > btrfs_super_generation(&vol->super))
		memcpy(&vol->super, &sb, sizeof(sb));
	return 0;
fail:
	ubt_bdev_close(bd);
	return ret;
}

/* Map the system chunks listed in the superblock (bounds-checked walk). */
int ubt_volume_load_sys_array(struct ubt_volume *vol)
{
	const struct btrfs_super_block *sb = &vol->super;
	const uint8_t *arr = sb->sys_chunk_array;
	uint32_t size = btrfs_super_sys_chunk_array_size(sb);
	uint32_t off = 0;
	int ret;

	while (off < size) {
		struct btrfs_key key;

		if (size - off < sizeof(struct btrfs_disk_key) + btrfs_chunk_item_size(1))
			return UBT_CORRUPT(BTRFS_SUPER_INFO_OFFSET,
					   "system chunk array: %u trailing bytes at offset %u",
					   size - off, off);
		btrfs_disk_key_to_cpu(&key, (const struct btrfs_disk_key *)(arr + off));
		off += sizeof(struct btrfs_disk_key);
		if (key.type != BTRFS_CHUNK_ITEM_KEY)
			return UBT_CORRUPT(BTRFS_SUPER_INFO_OFFSET,
					   "system chunk array: item of type %u at offset %u",
					   key.type, off);
		const struct btrfs_chunk *c = (const struct btrfs_chunk *)(arr + off);
		uint16_t n = btrfs_chunk_num_stripes(c);
		if (n == 0 || btrfs_chunk_item_size(n) > size - off)
			return UBT_CORRUPT(BTRFS_SUPER_INFO_OFFSET,
					   "system chunk array: chunk at %llu with %u stripes overruns the array",
					   (unsigned long long)key.offset, n);
		if (!(btrfs_chunk_type(c) & BTRFS_BLOCK_GROUP_SYSTEM))
			return UBT_CORRUPT(BTRFS_SUPER_INFO_OFFSET,
					   "system chunk array: chunk at %llu is not a system chunk",
					   (unsigned long long)key.offset);
		ret = ubt_volume_add_chunk(vol, key.offset, c, (uint32_t)btrfs_chunk_item_size(n));
		if (ret)
			return ret;
		off += (uint32_t)btrfs_chunk_item_size(n);
	}
	if (vol->nchunks == 0)
		return UBT_CORRUPT(BTRFS_SUPER_INFO_OFFSET, "system chunk array maps nothing");
	return 0;
}

int ubt_volume_open(const char *const *paths, size_t npaths, const struct ubt_volume_opts *opts,
		    struct ubt_volume **out)
{
	struct ubt_volume *vol;
	int ret;

	*out = NULL;
	if (npaths == 0)
		return -EINVAL;
	vol = calloc(1, sizeof(*vol));
	if (!vol)
		return -ENOMEM;
	if (opts)
		vol->opts = *opts;
	for (size_t i = 0; i < npaths; i++) {
		ret = add_one_device(vol, paths[i], i == 0);
		if (ret)
			goto fail;
	}
	vol->sectorsize = btrfs_super_sectorsize(&vol->super);
	vol->nodesize = btrfs_super_nodesize(&vol->super);
	vol->csum_type = btrfs_super_csum_type(&vol->super);
	vol->csum_size = (uint32_t)ubt_csum_size(vol->csum_type);
	ret = ubt_volume_load_sys_array(vol);
	if (ret)
		goto fail;
	*out = vol;
	return 0;
fail:
	ubt_volume_close(vol);
	return ret;
}

void ubt_volume_close(struct ubt_volume *vol)
{
	if (!vol)
		return;
	for (size_t i = 0; i < vol->ndevices; i++) {
		ubt_bdev_close(vol->devices[i].bd);
		free(vol->devices[i].path);
	}
	free(vol->devices);
	for (size_t i = 0; i < vol->nchunks; i++)
		free(vol->chunks[i]);
	free(vol->chunks);
	free(vol);
}

int ubt_volume_add_dev_item(struct ubt_volume *vol, const struct btrfs_dev_item *item)
{
	uint64_t devid = btrfs_dev_item_devid(item);
	struct ubt_device *dev = find_device(vol, devid);
	char a[40], b[40];

	if (!dev) {
		/* Named by the filesystem but not given to us: missing. */
		dev = insert_device(vol, devid);
		if (!dev)
			return -ENOMEM;
		memcpy(dev->uuid, item->uuid, BTRFS_UUID_SIZE);
	} else if (dev->bd && memcmp(dev->uuid, item->uuid, BTRFS_UUID_SIZE)) {
		ubt_uuid_str(dev->uuid, a);
		ubt_uuid_str(item->uuid, b);
		ubt_log(UBT_LOG_ERROR, "%s: device uuid %s does not match the filesystem's devid %llu (%s)",
			dev->path, a, (unsigned long long)devid, b);
		return -EINVAL;
	}
	dev->in_dev_tree = true;
	dev->total_bytes = btrfs_dev_item_total_bytes(item);
	return 0;
}

/* Failures each profile survives while every byte stays readable. */
static int tolerated_failures(const struct ubt_chunk *c)
{
	if (c->type & BTRFS_BLOCK_GROUP_RAID1)
		return 1;
	if (c->type & BTRFS_BLOCK_GROUP_RAID1C3)
		return 2;
	if (c->type & BTRFS_BLOCK_GROUP_RAID1C4)
		return 3;
	if (c->type & BTRFS_BLOCK_GROUP_RAID5)
		return 1;
	if (c->type & BTRFS_BLOCK_GROUP_RAID6)
		return 2;
	return 0;
}

static bool chunk_readable(const struct ubt_chunk *c)
{
	int missing = 0;

	if (c->type & BTRFS_BLOCK_GROUP_RAID10) {
		/* Each group of sub_stripes mirrors needs one survivor. */
		for (uint16_t g = 0; g + c->sub_stripes <= c->num_stripes; g += c->sub_stripes) {
			bool any = false;
			for (uint16_t k = 0; k < c->sub_stripes; k++)
				any |= c->stripes[g + k].dev != NULL;
			if (!any)
				return false;
		}
		return true;
	}
	for (uint16_t i = 0; i < c->num_stripes; i++)
		missing += c->stripes[i].dev == NULL;
	return missing <= tolerated_failures(c);
}

int ubt_volume_finish(struct ubt_volume *vol)
{
	size_t missing = 0;
	char u[40];

	for (size_t i = 0; i < vol->nchunks; i++) {
		struct ubt_chunk *c = vol->chunks[i];
		for (uint16_t s = 0; s < c->num_stripes; s++) {
			struct ubt_device *dev = find_device(vol, c->stripes[s].devid);
			if (!dev) {
				dev = insert_device(vol, c->stripes[s].devid);
				if (!dev)
					return -ENOMEM;
			}
		}
	}
	/* Bind after all inserts: inserting moves the array. */
	for (size_t i = 0; i < vol->nchunks; i++) {
		struct ubt_chunk *c = vol->chunks[i];
		for (uint16_t s = 0; s < c->num_stripes; s++) {
			struct ubt_device *dev = find_device(vol, c->stripes[s].devid);
			c->stripes[s].dev = dev && dev->bd ? dev : NULL;
		}
	}
	for (size_t i = 0; i < vol->ndevices; i++) {
		if (vol->devices[i].bd)
			continue;
		missing++;
		ubt_uuid_str(vol->devices[i].uuid, u);
		ubt_log(vol->opts.degraded ? UBT_LOG_WARNING : UBT_LOG_ERROR,
			"device devid %llu (uuid %s) is missing",
			(unsigned long long)vol->devices[i].devid, u);
	}
	if (btrfs_super_num_devices(&vol->super) > vol->ndevices) {
		missing += btrfs_super_num_devices(&vol->super) - vol->ndevices;
		ubt_log(vol->opts.degraded ? UBT_LOG_WARNING : UBT_LOG_ERROR,
			"the filesystem has %llu devices, %zu are known",
			(unsigned long long)btrfs_super_num_devices(&vol->super), vol->ndevices);
	}
	if (missing && !vol->opts.degraded) {
		ubt_log(UBT_LOG_ERROR, "%zu device(s) missing; give every device, or use -o degraded",
			missing);
		return -ENODEV;
	}
	for (size_t i = 0; i < vol->nchunks; i++) {
		const struct ubt_chunk *c = vol->chunks[i];
		if (!chunk_readable(c)) {
			ubt_log(UBT_LOG_ERROR,
				"chunk at %llu (%s) has too many missing devices to be read",
				(unsigned long long)c->start, ubt_profile_name(c->type));
			return -ENODEV;
		}
	}
	return 0;
}
