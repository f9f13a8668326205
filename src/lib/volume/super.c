/*
 * volume layer: superblock copies — reading, validation, choosing the copy
 * to trust, checksums, and the feature-flag policy.
 *
 * Invariants:
 *   - a superblock is used only after ubt_super_validate() accepted it, so
 *     every later layer may rely on: sectorsize and nodesize are powers of two
 *     in [4 KiB, 64 KiB] with nodesize >= sectorsize, tree-root addresses are
 *     sector aligned, levels are < BTRFS_MAX_LEVEL, the system chunk array
 *     size is within its 2048-byte buffer, and the csum type is known;
 *   - nothing here writes to a device.
 */
#include "volume.h"

#include "base/base.h"
#include "format/format_names.h"

#include <stdio.h>
#include <string.h>

/* ---- feature policy ---------------------------------------------------- */

/*
 * Known bits: everything the current format defines.  Read support: the
 * features whose on-disk structures the read path understands.  Write
 * support: what the copy-on-write engine (trans/) keeps consistent; it
 * refuses further conditions of its own (quotas, balance, dirty log).
 */
const uint64_t ubt_compat_known = 0;
const uint64_t ubt_compat_ro_known =
	BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE | BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID |
	BTRFS_FEATURE_COMPAT_RO_VERITY | BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;
const uint64_t ubt_incompat_known =
	BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF | BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL |
	BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS | BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO |
	BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD | BTRFS_FEATURE_INCOMPAT_BIG_METADATA |
	BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF | BTRFS_FEATURE_INCOMPAT_RAID56 |
	BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA | BTRFS_FEATURE_INCOMPAT_NO_HOLES |
	BTRFS_FEATURE_INCOMPAT_METADATA_UUID | BTRFS_FEATURE_INCOMPAT_RAID1C34 |
	BTRFS_FEATURE_INCOMPAT_ZONED | BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2 |
	BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE | BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA;

const struct ubt_feature_policy ubt_feature_policy_current = {
	.compat_ro_write = BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE |
			   BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID |
			   BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE,
	.incompat_read = BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF | BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL |
			 BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS | BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO |
			 BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD | BTRFS_FEATURE_INCOMPAT_BIG_METADATA |
			 BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF | BTRFS_FEATURE_INCOMPAT_RAID56 |
			 BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA | BTRFS_FEATURE_INCOMPAT_NO_HOLES |
			 BTRFS_FEATURE_INCOMPAT_METADATA_UUID | BTRFS_FEATURE_INCOMPAT_RAID1C34,
	.incompat_write = BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF | BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL |
			  BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO | BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD |
			  BTRFS_FEATURE_INCOMPAT_BIG_METADATA | BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF |
			  BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA | BTRFS_FEATURE_INCOMPAT_NO_HOLES |
			  BTRFS_FEATURE_INCOMPAT_RAID1C34 | BTRFS_FEATURE_INCOMPAT_METADATA_UUID,
};

/* Describe the most telling bit of `bits`: an unknown one if any. */
static void describe_bits(uint64_t bits, uint64_t known, const struct btrfs_flag_table *table,
			  char *buf, size_t len)
{
	uint64_t unknown = bits & ~known;
	uint64_t pick = unknown ? unknown : bits;
	uint64_t bit = pick & (~pick + 1);	/* lowest set bit */
	const char *name = ubt_feature_bit_name(table, bit);

	if (name)
		snprintf(buf, len, "%s (0x%llx)", name, (unsigned long long)bit);
	else
		snprintf(buf, len, "unknown bit 0x%llx", (unsigned long long)bit);
}

int ubt_super_check_features(const struct btrfs_super_block *sb, bool rw,
			     const struct ubt_feature_policy *policy, const char *devname)
{
	uint64_t incompat = btrfs_super_incompat_flags(sb);
	uint64_t compat_ro = btrfs_super_compat_ro_flags(sb);
	char what[96];

	if (incompat & ~policy->incompat_read) {
		describe_bits(incompat & ~policy->incompat_read, ubt_incompat_known,
			      &btrfs_incompat_flag_table, what, sizeof(what));
		ubt_log(UBT_LOG_ERROR,
			"%s: cannot open: incompatible feature %s is not supported (incompat_flags 0x%llx)",
			devname, what, (unsigned long long)incompat);
		return -EOPNOTSUPP;
	}
	/*
	 * Superblock flags: an unfinished btrfstune operation (fsid, csum or
	 * block-group-tree conversion) or a bit we do not know makes the
	 * filesystem unsafe to change, and the kernel refuses to mount it at
	 * all.  Reading stays possible (it is how such a filesystem is
	 * rescued); writing is refused.
	 */
	uint64_t sflags = btrfs_super_flags(sb);
	const uint64_t harmless = BTRFS_HEADER_FLAG_WRITTEN | BTRFS_HEADER_FLAG_RELOC |
				  BTRFS_SUPER_FLAG_ERROR | BTRFS_SUPER_FLAG_SEEDING |
				  BTRFS_SUPER_FLAG_METADUMP | BTRFS_SUPER_FLAG_METADUMP_V2;
	if (sflags & ~harmless) {
		ubt_log(rw ? UBT_LOG_ERROR : UBT_LOG_WARNING,
			"%s: superblock flags 0x%llx mark an unfinished conversion or are unknown; %s",
			devname, (unsigned long long)sflags,
			rw ? "refusing to write" : "reading only (the kernel refuses to mount it)");
		if (rw)
			return -EROFS;
	}
	if (!rw)
		return 0;
	if (sflags & (BTRFS_SUPER_FLAG_SEEDING | BTRFS_SUPER_FLAG_METADUMP |
		      BTRFS_SUPER_FLAG_METADUMP_V2)) {
		ubt_log(UBT_LOG_ERROR, "%s: a %s cannot be written", devname,
			sflags & BTRFS_SUPER_FLAG_SEEDING ? "seed device" : "metadata dump");
		return -EROFS;
	}
	if (compat_ro & ~policy->compat_ro_write) {
		describe_bits(compat_ro & ~policy->compat_ro_write, ubt_compat_ro_known,
			      &btrfs_compat_ro_flag_table, what, sizeof(what));
		ubt_log(UBT_LOG_ERROR,
			"%s: read-only: feature %s cannot be written by this version (compat_ro_flags 0x%llx)",
			devname, what, (unsigned long long)compat_ro);
		return -EROFS;
	}
	if (incompat & ~policy->incompat_write) {
		describe_bits(incompat & ~policy->incompat_write, ubt_incompat_known,
			      &btrfs_incompat_flag_table, what, sizeof(what));
		ubt_log(UBT_LOG_ERROR,
			"%s: read-only: feature %s cannot be written by this version (incompat_flags 0x%llx)",
			devname, what, (unsigned long long)incompat);
		return -EROFS;
	}
	return 0;
}

const char *ubt_feature_bit_name(const struct btrfs_flag_table *table, uint64_t bit)
{
	for (size_t i = 0; i < table->count; i++)
		if (table->names[i].bit == bit)
			return table->names[i].name;
	return NULL;
}

/* ---- checksums --------------------------------------------------------- */

bool ubt_super_csum_matches(const struct btrfs_super_block *sb)
{
	uint8_t out[UBT_CSUM_MAX];
	unsigned type = btrfs_super_csum_type(sb);
	size_t size = ubt_csum_size(type);

	if (!size || ubt_csum(type, (const uint8_t *)sb + BTRFS_CSUM_SIZE,
			      BTRFS_SUPER_INFO_SIZE - BTRFS_CSUM_SIZE, out))
		return false;
	return memcmp(out, sb->csum, size) == 0;
}

int ubt_super_update_csum(struct btrfs_super_block *sb)
{
	uint8_t out[UBT_CSUM_MAX];
	unsigned type = btrfs_super_csum_type(sb);
	int ret;

	if (!ubt_csum_size(type))
		return -EINVAL;
	ret = ubt_csum(type, (const uint8_t *)sb + BTRFS_CSUM_SIZE,
		       BTRFS_SUPER_INFO_SIZE - BTRFS_CSUM_SIZE, out);
	if (ret)
		return ret;
	memcpy(sb->csum, out, BTRFS_CSUM_SIZE);
	return 0;
}

/* ---- validation -------------------------------------------------------- */

#define REJECT(...)                                   \
	do {                                          \
		snprintf(why, whylen, __VA_ARGS__);   \
		return -EUCLEAN;                      \
	} while (0)

int ubt_super_validate(const struct btrfs_super_block *sb, uint64_t bytenr, char *why,
		       size_t whylen)
{
	uint64_t magic = btrfs_super_magic(sb);
	unsigned csum_type = btrfs_super_csum_type(sb);
	uint32_t sectorsize = btrfs_super_sectorsize(sb);
	uint32_t nodesize = btrfs_super_nodesize(sb);
	uint32_t stripesize = btrfs_super_stripesize(sb);
	uint32_t sys_array = btrfs_super_sys_chunk_array_size(sb);
	const uint8_t *meta_uuid;

	if (magic != BTRFS_MAGIC)
		REJECT("bad magic 0x%016llx (not a btrfs superblock)", (unsigned long long)magic);
	if (!ubt_csum_size(csum_type))
		REJECT("unsupported checksum type %u", csum_type);
	if (!ubt_super_csum_matches(sb))
		REJECT("superblock checksum mismatch (%s)", ubt_csum_name(csum_type));
	if (btrfs_super_bytenr(sb) != bytenr)
		REJECT("bytenr %llu does not match the copy's offset %llu",
		       (unsigned long long)btrfs_super_bytenr(sb), (unsigned long long)bytenr);
	if (!UBT_IS_POW2(sectorsize) || sectorsize < 4096 || sectorsize > 65536)
		REJECT("invalid sectorsize %u", sectorsize);
	if (!UBT_IS_POW2(nodesize) || nodesize < sectorsize || nodesize > 65536)
		REJECT("invalid nodesize %u (sectorsize %u)", nodesize, sectorsize);
	if (btrfs_super_leafsize(sb) != nodesize)
		REJECT("leafsize %u differs from nodesize %u", btrfs_super_leafsize(sb), nodesize);
	if (stripesize != 4096 && stripesize != sectorsize)
		REJECT("invalid stripesize %u", stripesize);
	if (btrfs_super_root_level(sb) >= BTRFS_MAX_LEVEL)
		REJECT("root tree level %u too big", btrfs_super_root_level(sb));
	if (btrfs_super_chunk_root_level(sb) >= BTRFS_MAX_LEVEL)
		REJECT("chunk tree level %u too big", btrfs_super_chunk_root_level(sb));
	if (btrfs_super_log_root_level(sb) >= BTRFS_MAX_LEVEL)
		REJECT("log tree level %u too big", btrfs_super_log_root_level(sb));
	if (!UBT_IS_ALIGNED(btrfs_super_root(sb), sectorsize))
		REJECT("root tree address %llu not aligned to sectorsize",
		       (unsigned long long)btrfs_super_root(sb));
	if (!UBT_IS_ALIGNED(btrfs_super_chunk_root(sb), sectorsize))
		REJECT("chunk tree address %llu not aligned to sectorsize",
		       (unsigned long long)btrfs_super_chunk_root(sb));
	if (!UBT_IS_ALIGNED(btrfs_super_log_root(sb), sectorsize))
		REJECT("log tree address %llu not aligned to sectorsize",
		       (unsigned long long)btrfs_super_log_root(sb));
	if (btrfs_super_total_bytes(sb) == 0)
		REJECT("total_bytes is zero");
	if (btrfs_super_bytes_used(sb) < 6ull * nodesize)
		REJECT("bytes_used %llu is impossibly small",
		       (unsigned long long)btrfs_super_bytes_used(sb));
	if (btrfs_super_num_devices(sb) == 0)
		REJECT("number of devices is 0");
	if (sys_array > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE)
		REJECT("system chunk array size %u exceeds %u", sys_array,
		       BTRFS_SYSTEM_CHUNK_ARRAY_SIZE);
	if (sys_array < sizeof(struct btrfs_disk_key) + btrfs_chunk_item_size(1))
		REJECT("system chunk array size %u too small for one chunk", sys_array);
	if (btrfs_super_generation(sb) == 0)
		REJECT("generation is zero");
	meta_uuid = (btrfs_super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_METADATA_UUID) ?
			    sb->metadata_uuid : sb->fsid;
	if (memcmp(meta_uuid, sb->dev_item.fsid, BTRFS_FSID_SIZE) != 0)
		REJECT("dev_item fsid does not match the filesystem's %s",
		       meta_uuid == sb->fsid ? "fsid" : "metadata_uuid");
	return 0;
}

/* ---- reading ----------------------------------------------------------- */

int ubt_super_read_raw(struct ubt_bdev *bd, int copy, struct btrfs_super_block *out)
{
	uint64_t off;

	if (copy < 0 || copy >= BTRFS_SUPER_MIRROR_MAX)
		return -EINVAL;
	off = btrfs_sb_offset(copy);
	if (off + BTRFS_SUPER_INFO_SIZE > bd->size)
		return -ENOENT;
	return ubt_bdev_read(bd, out, BTRFS_SUPER_INFO_SIZE, off);
}

int ubt_super_read_best(struct ubt_bdev *bd, struct btrfs_super_block *out, int *copy_out)
{
	struct btrfs_super_block cand;
	char why[UBT_SUPER_WHY_LEN];
	uint8_t fsid[BTRFS_FSID_SIZE];
	uint64_t best_gen = 0;
	int best = -1, ret, last_err = -EUCLEAN;

	for (int copy = 0; copy < BTRFS_SUPER_MIRROR_MAX; copy++) {
		ret = ubt_super_read_raw(bd, copy, &cand);
		if (ret == -ENOENT)
			break;
		if (ret < 0) {
			ubt_log(UBT_LOG_WARNING, "%s: cannot read superblock copy %d at %llu: %s",
				bd->name, copy, (unsigned long long)btrfs_sb_offset(copy),
				ubt_strerror(ret));
			last_err = ret;
			continue;
		}
		ret = ubt_super_validate(&cand, btrfs_sb_offset(copy), why, sizeof(why));
		if (ret) {
			/* An all-zero copy 1 or 2 is normal on small or wiped devices. */
			if (copy == 0 || btrfs_super_magic(&cand) != 0)
				ubt_log(copy == 0 ? UBT_LOG_WARNING : UBT_LOG_INFO,
					"%s: superblock copy %d at %llu rejected: %s", bd->name, copy,
					(unsigned long long)btrfs_sb_offset(copy), why);
			continue;
		}
		if (best < 0) {
			memcpy(fsid, cand.fsid, BTRFS_FSID_SIZE);
		} else if (memcmp(fsid, cand.fsid, BTRFS_FSID_SIZE) != 0) {
			/* A leftover of an earlier filesystem on the same device. */
			ubt_log(UBT_LOG_INFO, "%s: superblock copy %d belongs to another filesystem",
				bd->name, copy);
			continue;
		}
		if (best < 0 || btrfs_super_generation(&cand) > best_gen) {
			memcpy(out, &cand, sizeof(cand));
			best_gen = btrfs_super_generation(&cand);
			best = copy;
		}
	}
	if (best < 0) {
		ubt_log(UBT_LOG_ERROR, "%s: no valid btrfs superblock found", bd->name);
		return last_err;
	}
	if (best != 0)
		ubt_log(UBT_LOG_WARNING, "%s: using superblock copy %d (generation %llu)", bd->name,
			best, (unsigned long long)best_gen);
	if (copy_out)
		*copy_out = best;
	return 0;
}
