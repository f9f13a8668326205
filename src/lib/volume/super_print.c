/*
 * volume layer: printing a superblock copy in the layout of
 * `btrfs inspect-internal dump-super` (btrfs-progs 6.x): the same field
 * names, values, order and flag lists, so outputs can be compared line by
 * line.  Text goes to a caller-supplied writer; nothing here touches stdout.
 *
 * The system chunk array is printed with every length checked against the
 * array size first: a hostile array ends the listing with a logged error.
 */
#include "volume.h"

#include "base/base.h"
#include "format/format_names.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct out {
	ubt_write_fn write;
	void *ctx;
};

UBT_PRINTF(2, 3)
static void pr(struct out *o, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	o->write(o->ctx, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* The names dump-super uses for csum types (note "blake2", not "blake2b"). */
static const char *dump_csum_name(unsigned type)
{
	static const char *const names[] = { "crc32c", "xxhash64", "sha256", "blake2" };
	return type < UBT_ARRAY_SIZE(names) ? names[type] : NULL;
}

/* Print the decoded flag list under a flags line (progs 6.2 wording). */
static void print_flag_list(struct out *o, uint64_t flags, const struct btrfs_flag_table *t)
{
	char buf[1024];
	size_t n = btrfs_flag_list_str(flags, t, buf, sizeof(buf));

	if (n)
		o->write(o->ctx, buf, n < sizeof(buf) ? n : sizeof(buf) - 1);
}

static void print_sys_chunk_array(struct out *o, const struct btrfs_super_block *sb)
{
	const uint8_t *arr = sb->sys_chunk_array;
	uint32_t size = btrfs_super_sys_chunk_array_size(sb);
	uint32_t off = 0, need = 0;
	int item = 0;

	if (size > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE) {
		ubt_log(UBT_LOG_ERROR, "sys_array_size %u shouldn't exceed %u bytes", size,
			BTRFS_SYSTEM_CHUNK_ARRAY_SIZE);
		return;
	}
	while (off < size) {
		struct btrfs_key key;

		need = sizeof(struct btrfs_disk_key);

		if (off + need > size)
			goto short_read;
		btrfs_disk_key_to_cpu(&key, (const struct btrfs_disk_key *)(arr + off));
		off += need;
		char kbuf[160];
		btrfs_key_str(&key, kbuf, sizeof(kbuf));
		pr(o, "\titem %d %s\n", item, kbuf);
		if (key.type != BTRFS_CHUNK_ITEM_KEY) {
			ubt_log(UBT_LOG_ERROR, "unexpected item type %u in sys_array at offset %u",
				key.type, off - need);
			return;
		}
		need = btrfs_chunk_item_size(1);
		if (off + need > size)
			goto short_read;
		const struct btrfs_chunk *c = (const struct btrfs_chunk *)(arr + off);
		uint16_t nstripes = btrfs_chunk_num_stripes(c);
		if (nstripes == 0) {
			ubt_log(UBT_LOG_ERROR, "invalid number of stripes %u in sys_array at offset %u",
				nstripes, off);
			return;
		}
		need = btrfs_chunk_item_size(nstripes);
		if (off + need > size)
			goto short_read;
		char type[96];
		btrfs_bg_flags_str(btrfs_chunk_type(c), type, sizeof(type));
		pr(o, "\t\tlength %" PRIu64 " owner %" PRIu64 " stripe_len %" PRIu64 " type %s\n",
		   btrfs_chunk_length(c), btrfs_chunk_owner(c), btrfs_chunk_stripe_len(c), type);
		pr(o, "\t\tio_align %u io_width %u sector_size %u\n", btrfs_chunk_io_align(c),
		   btrfs_chunk_io_width(c), btrfs_chunk_sector_size(c));
		pr(o, "\t\tnum_stripes %u sub_stripes %u\n", nstripes, btrfs_chunk_sub_stripes(c));
		for (uint16_t i = 0; i < nstripes; i++) {
			const struct btrfs_stripe *s = btrfs_chunk_stripe(c, i);
			char u[40];
			ubt_uuid_str(s->dev_uuid, u);
			pr(o, "\t\t\tstripe %u devid %" PRIu64 " offset %" PRIu64 "\n", i,
			   btrfs_stripe_devid(s), btrfs_stripe_offset(s));
			pr(o, "\t\t\tdev_uuid %s\n", u);
		}
		off += need;
		item++;
	}
	return;
short_read:
	ubt_log(UBT_LOG_ERROR, "sys_array too short to read %u bytes at offset %u", need, off);
}

static void print_backup_roots(struct out *o, const struct btrfs_super_block *sb)
{
	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++) {
		const struct btrfs_root_backup *b = &sb->super_roots[i];

		if (btrfs_root_backup_tree_root(b) == 0 && btrfs_root_backup_tree_root_gen(b) == 0)
			continue;
		pr(o, "\tbackup %d:\n", i);
		pr(o, "\t\tbackup_tree_root:\t%" PRIu64 "\tgen: %" PRIu64 "\tlevel: %u\n",
		   btrfs_root_backup_tree_root(b), btrfs_root_backup_tree_root_gen(b),
		   btrfs_root_backup_tree_root_level(b));
		pr(o, "\t\tbackup_chunk_root:\t%" PRIu64 "\tgen: %" PRIu64 "\tlevel: %u\n",
		   btrfs_root_backup_chunk_root(b), btrfs_root_backup_chunk_root_gen(b),
		   btrfs_root_backup_chunk_root_level(b));
		pr(o, "\t\tbackup_extent_root:\t%" PRIu64 "\tgen: %" PRIu64 "\tlevel: %u\n",
		   btrfs_root_backup_extent_root(b), btrfs_root_backup_extent_root_gen(b),
		   btrfs_root_backup_extent_root_level(b));
		pr(o, "\t\tbackup_fs_root:\t\t%" PRIu64 "\tgen: %" PRIu64 "\tlevel: %u\n",
		   btrfs_root_backup_fs_root(b), btrfs_root_backup_fs_root_gen(b),
		   btrfs_root_backup_fs_root_level(b));
		pr(o, "\t\tbackup_dev_root:\t%" PRIu64 "\tgen: %" PRIu64 "\tlevel: %u\n",
		   btrfs_root_backup_dev_root(b), btrfs_root_backup_dev_root_gen(b),
		   btrfs_root_backup_dev_root_level(b));
		pr(o, "\t\tcsum_root:\t%" PRIu64 "\tgen: %" PRIu64 "\tlevel: %u\n",
		   btrfs_root_backup_csum_root(b), btrfs_root_backup_csum_root_gen(b),
		   btrfs_root_backup_csum_root_level(b));
		pr(o, "\t\tbackup_total_bytes:\t%" PRIu64 "\n", btrfs_root_backup_total_bytes(b));
		pr(o, "\t\tbackup_bytes_used:\t%" PRIu64 "\n", btrfs_root_backup_bytes_used(b));
		pr(o, "\t\tbackup_num_devices:\t%" PRIu64 "\n", btrfs_root_backup_num_devices(b));
		pr(o, "\n");
	}
}

void ubt_super_print(const struct btrfs_super_block *sb, bool full, ubt_write_fn write, void *ctx)
{
	struct out o = { write, ctx };
	unsigned csum_type = btrfs_super_csum_type(sb);
	const char *csum_name = dump_csum_name(csum_type);
	size_t csum_size = csum_name ? ubt_csum_size(csum_type) : BTRFS_CSUM_SIZE;
	bool meta_uuid = btrfs_super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_METADATA_UUID;
	const uint8_t *fs_meta = meta_uuid ? sb->metadata_uuid : sb->fsid;
	const struct btrfs_dev_item *dev = &sb->dev_item;
	char u[40], line[3 * BTRFS_CSUM_SIZE + 8];

	pr(&o, "csum_type\t\t%u (%s)\n", csum_type, csum_name ? csum_name : "INVALID");
	pr(&o, "csum_size\t\t%zu\n", csum_size);
	for (size_t i = 0; i < csum_size; i++)
		snprintf(line + 2 * i, 3, "%02x", sb->csum[i]);
	pr(&o, "csum\t\t\t0x%s %s\n", line,
	   !csum_name ? "[UNKNOWN CSUM TYPE OR SIZE]"
		      : ubt_super_csum_matches(sb) ? "[match]" : "[DON'T MATCH]");
	pr(&o, "bytenr\t\t\t%" PRIu64 "\n", btrfs_super_bytenr(sb));
	pr(&o, "flags\t\t\t0x%" PRIx64 "\n", btrfs_super_flags(sb));
	print_flag_list(&o, btrfs_super_flags(sb), &btrfs_super_flag_table);

	const uint8_t *magic = (const uint8_t *)&sb->magic;
	char m[9];
	for (int i = 0; i < 8; i++)
		m[i] = isprint(magic[i]) ? (char)magic[i] : '.';
	m[8] = 0;
	pr(&o, "magic\t\t\t%s %s\n", m,
	   btrfs_super_magic(sb) == BTRFS_MAGIC ? "[match]" : "[DON'T MATCH]");
	ubt_uuid_str(sb->fsid, u);
	pr(&o, "fsid\t\t\t%s\n", u);
	/* Without the METADATA_UUID feature the fsid is the metadata uuid. */
	ubt_uuid_str(fs_meta, u);
	pr(&o, "metadata_uuid\t\t%s\n", u);

	char label[BTRFS_LABEL_SIZE + 1];
	size_t n = 0;
	for (; n < BTRFS_LABEL_SIZE && sb->label[n]; n++)
		label[n] = isprint((unsigned char)sb->label[n]) ? sb->label[n] : '.';
	label[n] = 0;
	pr(&o, "label\t\t\t%s\n", label);

	pr(&o, "generation\t\t%" PRIu64 "\n", btrfs_super_generation(sb));
	pr(&o, "root\t\t\t%" PRIu64 "\n", btrfs_super_root(sb));
	pr(&o, "sys_array_size\t\t%u\n", btrfs_super_sys_chunk_array_size(sb));
	pr(&o, "chunk_root_generation\t%" PRIu64 "\n", btrfs_super_chunk_root_generation(sb));
	pr(&o, "root_level\t\t%u\n", btrfs_super_root_level(sb));
	pr(&o, "chunk_root\t\t%" PRIu64 "\n", btrfs_super_chunk_root(sb));
	pr(&o, "chunk_root_level\t%u\n", btrfs_super_chunk_root_level(sb));
	pr(&o, "log_root\t\t%" PRIu64 "\n", btrfs_super_log_root(sb));
	pr(&o, "log_root_transid (deprecated)\t%" PRIu64 "\n", btrfs_super_log_root_transid(sb));
	pr(&o, "log_root_level\t\t%u\n", btrfs_super_log_root_level(sb));
	pr(&o, "total_bytes\t\t%" PRIu64 "\n", btrfs_super_total_bytes(sb));
	pr(&o, "bytes_used\t\t%" PRIu64 "\n", btrfs_super_bytes_used(sb));
	pr(&o, "sectorsize\t\t%u\n", btrfs_super_sectorsize(sb));
	pr(&o, "nodesize\t\t%u\n", btrfs_super_nodesize(sb));
	pr(&o, "leafsize (deprecated)\t%u\n", btrfs_super_leafsize(sb));
	pr(&o, "stripesize\t\t%u\n", btrfs_super_stripesize(sb));
	pr(&o, "root_dir\t\t%" PRIu64 "\n", btrfs_super_root_dir_objectid(sb));
	pr(&o, "num_devices\t\t%" PRIu64 "\n", btrfs_super_num_devices(sb));
	pr(&o, "compat_flags\t\t0x%" PRIx64 "\n", btrfs_super_compat_flags(sb));
	pr(&o, "compat_ro_flags\t\t0x%" PRIx64 "\n", btrfs_super_compat_ro_flags(sb));
	print_flag_list(&o, btrfs_super_compat_ro_flags(sb), &btrfs_compat_ro_flag_table);
	pr(&o, "incompat_flags\t\t0x%" PRIx64 "\n", btrfs_super_incompat_flags(sb));
	print_flag_list(&o, btrfs_super_incompat_flags(sb), &btrfs_incompat_flag_table);
	pr(&o, "cache_generation\t%" PRIu64 "\n", btrfs_super_cache_generation(sb));
	pr(&o, "uuid_tree_generation\t%" PRIu64 "\n", btrfs_super_uuid_tree_generation(sb));

	ubt_uuid_str(dev->uuid, u);
	pr(&o, "dev_item.uuid\t\t%s\n", u);
	ubt_uuid_str(dev->fsid, u);
	pr(&o, "dev_item.fsid\t\t%s %s\n", u,
	   memcmp(dev->fsid, fs_meta, BTRFS_FSID_SIZE) == 0 ? "[match]" : "[DON'T MATCH]");
	pr(&o, "dev_item.type\t\t%" PRIu64 "\n", btrfs_dev_item_type(dev));
	pr(&o, "dev_item.total_bytes\t%" PRIu64 "\n", btrfs_dev_item_total_bytes(dev));
	pr(&o, "dev_item.bytes_used\t%" PRIu64 "\n", btrfs_dev_item_bytes_used(dev));
	pr(&o, "dev_item.io_align\t%u\n", btrfs_dev_item_io_align(dev));
	pr(&o, "dev_item.io_width\t%u\n", btrfs_dev_item_io_width(dev));
	pr(&o, "dev_item.sector_size\t%u\n", btrfs_dev_item_sector_size(dev));
	pr(&o, "dev_item.devid\t\t%" PRIu64 "\n", btrfs_dev_item_devid(dev));
	pr(&o, "dev_item.dev_group\t%u\n", btrfs_dev_item_dev_group(dev));
	pr(&o, "dev_item.seek_speed\t%u\n", btrfs_dev_item_seek_speed(dev));
	pr(&o, "dev_item.bandwidth\t%u\n", btrfs_dev_item_bandwidth(dev));
	pr(&o, "dev_item.generation\t%" PRIu64 "\n", btrfs_dev_item_generation(dev));
	if (full) {
		pr(&o, "sys_chunk_array[%d]:\n", BTRFS_SYSTEM_CHUNK_ARRAY_SIZE);
		print_sys_chunk_array(&o, sb);
		pr(&o, "backup_roots[%d]:\n", BTRFS_NUM_BACKUP_ROOTS);
		print_backup_roots(&o, sb);
	}
}
