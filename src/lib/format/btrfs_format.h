/* SPDX-License-Identifier: MIT */
/*
 * btrfs_format.h - the btrfs on-disk format: constants, packed structs and
 * little-endian accessors.
 *
 * Layer: format (the bottom layer; volume/, tree/ and everything above use it).
 * Pure header, C17, depends only on the C library headers below.
 *
 * Rules:
 *  - Every on-disk struct is __attribute__((packed)) and byte-exact; each field
 *    carries its byte offset in a trailing comment and every size and offset is
 *    checked with static_assert right after the struct.
 *  - Multi-byte members hold LITTLE-ENDIAN values.  Never read or write them
 *    directly: use the generated accessors btrfs_<struct>_<field>() and
 *    btrfs_set_<struct>_<field>(), which work on any alignment and any host
 *    byte order.
 *  - Nested structs and byte arrays (uuids, csums, label) are reached through
 *    accessors that return a pointer into the same buffer.
 */
#ifndef UBTRFS_FORMAT_BTRFS_FORMAT_H
#define UBTRFS_FORMAT_BTRFS_FORMAT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ======================================================================== */
/* Little-endian load/store helpers (alignment- and host-order-independent)  */
/* ======================================================================== */

static inline uint8_t ubt_get_le8(const void *p)
{
	return *(const uint8_t *)p;
}

static inline void ubt_put_le8(void *p, uint8_t v)
{
	*(uint8_t *)p = v;
}

static inline uint16_t ubt_get_le16(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;

	return (uint16_t)(b[0] | (uint16_t)b[1] << 8);
}

static inline uint32_t ubt_get_le32(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;

	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static inline uint64_t ubt_get_le64(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;

	return (uint64_t)ubt_get_le32(b) | (uint64_t)ubt_get_le32(b + 4) << 32;
}

static inline void ubt_put_le16(void *p, uint16_t v)
{
	uint8_t *b = (uint8_t *)p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static inline void ubt_put_le32(void *p, uint32_t v)
{
	uint8_t *b = (uint8_t *)p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static inline void ubt_put_le64(void *p, uint64_t v)
{
	uint8_t *b = (uint8_t *)p;

	ubt_put_le32(b, (uint32_t)v);
	ubt_put_le32(b + 4, (uint32_t)(v >> 32));
}

/* ======================================================================== */
/* Accessor generators                                                      */
/* ======================================================================== */

/*
 * UBT_MEMBER_PTR: address of a member of a packed struct as a byte pointer.
 * Going through offsetof avoids -Waddress-of-packed-member and never forms a
 * misaligned typed pointer.  The const is cast away on purpose (like strchr):
 * callers holding a const struct get a pointer they must not write through.
 */
#define UBT_MEMBER_PTR(stype, s, member) \
	((uint8_t *)(uintptr_t)(s) + offsetof(stype, member))

/*
 * BTRFS_SETGET(sname, stype, member, bits) defines
 *   uintN_t btrfs_<sname>_<member>(const stype *s);
 *   void    btrfs_set_<sname>_<member>(stype *s, uintN_t v);
 */
#define BTRFS_SETGET(sname, stype, member, bits)                              \
	static inline uint##bits##_t btrfs_##sname##_##member(const stype *s) \
	{                                                                     \
		return ubt_get_le##bits(UBT_MEMBER_PTR(stype, s, member));    \
	}                                                                     \
	static inline void btrfs_set_##sname##_##member(stype *s,             \
							uint##bits##_t v)     \
	{                                                                     \
		ubt_put_le##bits(UBT_MEMBER_PTR(stype, s, member), v);        \
	}

/*
 * BTRFS_PTRGET(sname, stype, member, rtype) defines
 *   rtype *btrfs_<sname>_<member>(const stype *s);
 * returning a pointer to a nested struct or a byte array inside *s.
 */
#define BTRFS_PTRGET(sname, stype, member, rtype)                             \
	static inline rtype *btrfs_##sname##_##member(const stype *s)         \
	{                                                                     \
		return (rtype *)(void *)UBT_MEMBER_PTR(stype, s, member);     \
	}

/* Compile-time layout checks. */
#define UBT_CHECK_SIZE(stype, size) \
	static_assert(sizeof(stype) == (size), "sizeof(" #stype ")")
#define UBT_CHECK_OFF(stype, member, off) \
	static_assert(offsetof(stype, member) == (off), #stype "." #member)

/* ======================================================================== */
/* Basic sizes and superblock placement                                     */
/* ======================================================================== */

#define BTRFS_MAGIC			0x4D5F53665248425FULL /* "_BHRfS_M" */

#define BTRFS_CSUM_SIZE			32
#define BTRFS_FSID_SIZE			16
#define BTRFS_UUID_SIZE			16
#define BTRFS_LABEL_SIZE		256
#define BTRFS_SYSTEM_CHUNK_ARRAY_SIZE	2048
#define BTRFS_NUM_BACKUP_ROOTS		4
#define BTRFS_MAX_LEVEL			8
#define BTRFS_NAME_LEN			255
#define BTRFS_LINK_MAX			65535U
#define BTRFS_STRIPE_LEN		(64ULL * 1024)
#define BTRFS_STRIPE_LEN_SHIFT		16
#define BTRFS_MAX_METADATA_BLOCKSIZE	65536	/* largest nodesize */
#define BTRFS_DEV_STAT_VALUES_MAX	5

#define BTRFS_SUPER_INFO_OFFSET		65536ULL
#define BTRFS_SUPER_INFO_SIZE		4096
#define BTRFS_SUPER_MIRROR_MAX		3
#define BTRFS_SUPER_MIRROR_SHIFT	12

/*
 * Byte offset of superblock copy @mirror (0: 64KiB, 1: 64MiB, 2: 256GiB),
 * 0 <= mirror < BTRFS_SUPER_MIRROR_MAX.  A copy exists only if it fits on the
 * device.  Not valid for zoned devices (those keep superblocks in log zones).
 */
static inline uint64_t btrfs_sb_offset(int mirror)
{
	uint64_t start = 16ULL * 1024;

	if (mirror > 0)
		return start << (BTRFS_SUPER_MIRROR_SHIFT * mirror);
	return BTRFS_SUPER_INFO_OFFSET;
}

/* ======================================================================== */
/* Checksum types                                                           */
/* ======================================================================== */

#define BTRFS_CSUM_TYPE_CRC32		0 /* crc32c */
#define BTRFS_CSUM_TYPE_XXHASH		1 /* xxhash64 */
#define BTRFS_CSUM_TYPE_SHA256		2
#define BTRFS_CSUM_TYPE_BLAKE2		3 /* blake2b-256 */

/* Size in bytes of a checksum of @type, 0 if the type is unknown. */
static inline unsigned int btrfs_csum_type_size(uint16_t type)
{
	switch (type) {
	case BTRFS_CSUM_TYPE_CRC32:	return 4;
	case BTRFS_CSUM_TYPE_XXHASH:	return 8;
	case BTRFS_CSUM_TYPE_SHA256:	return 32;
	case BTRFS_CSUM_TYPE_BLAKE2:	return 32;
	default:			return 0;
	}
}

/* ======================================================================== */
/* Feature flags (superblock compat / compat_ro / incompat)                 */
/* ======================================================================== */

/* compat: no bits defined. */

/* compat_ro */
#define BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE		(1ULL << 0)
#define BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID	(1ULL << 1)
#define BTRFS_FEATURE_COMPAT_RO_VERITY			(1ULL << 2)
#define BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE	(1ULL << 3)

/* incompat */
#define BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF		(1ULL << 0)
#define BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL		(1ULL << 1)
#define BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS		(1ULL << 2)
#define BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO		(1ULL << 3)
#define BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD		(1ULL << 4)
#define BTRFS_FEATURE_INCOMPAT_BIG_METADATA		(1ULL << 5)
#define BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF		(1ULL << 6)
#define BTRFS_FEATURE_INCOMPAT_RAID56			(1ULL << 7)
#define BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA		(1ULL << 8)
#define BTRFS_FEATURE_INCOMPAT_NO_HOLES			(1ULL << 9)
#define BTRFS_FEATURE_INCOMPAT_METADATA_UUID		(1ULL << 10)
#define BTRFS_FEATURE_INCOMPAT_RAID1C34			(1ULL << 11)
#define BTRFS_FEATURE_INCOMPAT_ZONED			(1ULL << 12)
#define BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2		(1ULL << 13)
#define BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE		(1ULL << 14)
#define BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA		(1ULL << 16)

/*
 * What ubtrfs understands.  Policy (DESIGN.md): an incompat bit outside
 * BTRFS_FEATURE_INCOMPAT_SUPP refuses the mount; a compat_ro bit outside
 * BTRFS_FEATURE_COMPAT_RO_SUPP allows read-only access only.
 * Not (yet) supported: ZONED, EXTENT_TREE_V2, RAID_STRIPE_TREE, SIMPLE_QUOTA.
 */
#define BTRFS_FEATURE_COMPAT_SUPP		0ULL
#define BTRFS_FEATURE_COMPAT_SAFE_SET		0ULL
#define BTRFS_FEATURE_COMPAT_SAFE_CLEAR		0ULL

#define BTRFS_FEATURE_COMPAT_RO_SUPP			\
	(BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE |	\
	 BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID |	\
	 BTRFS_FEATURE_COMPAT_RO_VERITY |		\
	 BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE)

#define BTRFS_FEATURE_INCOMPAT_SUPP			\
	(BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF |		\
	 BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL |	\
	 BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS |		\
	 BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO |		\
	 BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD |		\
	 BTRFS_FEATURE_INCOMPAT_BIG_METADATA |		\
	 BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF |		\
	 BTRFS_FEATURE_INCOMPAT_RAID56 |		\
	 BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA |	\
	 BTRFS_FEATURE_INCOMPAT_NO_HOLES |		\
	 BTRFS_FEATURE_INCOMPAT_METADATA_UUID |		\
	 BTRFS_FEATURE_INCOMPAT_RAID1C34)

/* ======================================================================== */
/* Superblock flags (super.flags; bits 0-1 double as header flags)          */
/* ======================================================================== */

#define BTRFS_HEADER_FLAG_WRITTEN		(1ULL << 0)
#define BTRFS_HEADER_FLAG_RELOC			(1ULL << 1)
#define BTRFS_SUPER_FLAG_ERROR			(1ULL << 2)
#define BTRFS_SUPER_FLAG_SEEDING		(1ULL << 32)
#define BTRFS_SUPER_FLAG_METADUMP		(1ULL << 33)
#define BTRFS_SUPER_FLAG_METADUMP_V2		(1ULL << 34)
#define BTRFS_SUPER_FLAG_CHANGING_FSID		(1ULL << 35)
#define BTRFS_SUPER_FLAG_CHANGING_FSID_V2	(1ULL << 36)
/* btrfs-progs only (offline conversions in progress): */
#define BTRFS_SUPER_FLAG_CHANGING_BG_TREE	(1ULL << 38)
#define BTRFS_SUPER_FLAG_CHANGING_DATA_CSUM	(1ULL << 39)
#define BTRFS_SUPER_FLAG_CHANGING_META_CSUM	(1ULL << 40)

/* Tree block header: top byte of header.flags is the backref revision. */
#define BTRFS_BACKREF_REV_SHIFT			56
#define BTRFS_BACKREF_REV_MASK			(0xffULL << BTRFS_BACKREF_REV_SHIFT)
#define BTRFS_OLD_BACKREF_REV			0
#define BTRFS_MIXED_BACKREF_REV			1

/* ======================================================================== */
/* Block group / chunk type flags                                           */
/* ======================================================================== */

#define BTRFS_BLOCK_GROUP_DATA		(1ULL << 0)
#define BTRFS_BLOCK_GROUP_SYSTEM	(1ULL << 1)
#define BTRFS_BLOCK_GROUP_METADATA	(1ULL << 2)
#define BTRFS_BLOCK_GROUP_RAID0		(1ULL << 3)
#define BTRFS_BLOCK_GROUP_RAID1		(1ULL << 4)
#define BTRFS_BLOCK_GROUP_DUP		(1ULL << 5)
#define BTRFS_BLOCK_GROUP_RAID10	(1ULL << 6)
#define BTRFS_BLOCK_GROUP_RAID5		(1ULL << 7)
#define BTRFS_BLOCK_GROUP_RAID6		(1ULL << 8)
#define BTRFS_BLOCK_GROUP_RAID1C3	(1ULL << 9)
#define BTRFS_BLOCK_GROUP_RAID1C4	(1ULL << 10)
/* In-memory/balance-args only, never in a chunk item: */
#define BTRFS_AVAIL_ALLOC_BIT_SINGLE	(1ULL << 48)
#define BTRFS_SPACE_INFO_GLOBAL_RSV	(1ULL << 49)
#define BTRFS_BLOCK_GROUP_RESERVED \
	(BTRFS_AVAIL_ALLOC_BIT_SINGLE | BTRFS_SPACE_INFO_GLOBAL_RSV)

#define BTRFS_BLOCK_GROUP_TYPE_MASK \
	(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_SYSTEM | \
	 BTRFS_BLOCK_GROUP_METADATA)
#define BTRFS_BLOCK_GROUP_PROFILE_MASK \
	(BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID1 | \
	 BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4 | \
	 BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6 | \
	 BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID10)
#define BTRFS_BLOCK_GROUP_RAID56_MASK \
	(BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)
#define BTRFS_BLOCK_GROUP_RAID1_MASK \
	(BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_RAID1C3 | \
	 BTRFS_BLOCK_GROUP_RAID1C4)
#define BTRFS_EXTENDED_PROFILE_MASK \
	(BTRFS_BLOCK_GROUP_PROFILE_MASK | BTRFS_AVAIL_ALLOC_BIT_SINGLE)

/* ======================================================================== */
/* Well-known objectids                                                     */
/* ======================================================================== */

/* Tree roots (objectid of ROOT_ITEMs in the root tree, header.owner). */
#define BTRFS_ROOT_TREE_OBJECTID		1ULL
#define BTRFS_EXTENT_TREE_OBJECTID		2ULL
#define BTRFS_CHUNK_TREE_OBJECTID		3ULL
#define BTRFS_DEV_TREE_OBJECTID			4ULL
#define BTRFS_FS_TREE_OBJECTID			5ULL
#define BTRFS_ROOT_TREE_DIR_OBJECTID		6ULL
#define BTRFS_CSUM_TREE_OBJECTID		7ULL
#define BTRFS_QUOTA_TREE_OBJECTID		8ULL
#define BTRFS_UUID_TREE_OBJECTID		9ULL
#define BTRFS_FREE_SPACE_TREE_OBJECTID		10ULL
#define BTRFS_BLOCK_GROUP_TREE_OBJECTID		11ULL
#define BTRFS_RAID_STRIPE_TREE_OBJECTID		12ULL

/* Special objectids in various trees. */
#define BTRFS_DEV_STATS_OBJECTID		0ULL
#define BTRFS_BALANCE_OBJECTID			(-4ULL)
#define BTRFS_ORPHAN_OBJECTID			(-5ULL)
#define BTRFS_TREE_LOG_OBJECTID			(-6ULL)
#define BTRFS_TREE_LOG_FIXUP_OBJECTID		(-7ULL)
#define BTRFS_TREE_RELOC_OBJECTID		(-8ULL)
#define BTRFS_DATA_RELOC_TREE_OBJECTID		(-9ULL)
#define BTRFS_EXTENT_CSUM_OBJECTID		(-10ULL)
#define BTRFS_FREE_SPACE_OBJECTID		(-11ULL)
#define BTRFS_FREE_INO_OBJECTID			(-12ULL)
#define BTRFS_CSUM_CHANGE_OBJECTID		(-13ULL) /* progs: csum conversion */
#define BTRFS_MULTIPLE_OBJECTIDS		(-255ULL)

#define BTRFS_FIRST_FREE_OBJECTID		256ULL
#define BTRFS_LAST_FREE_OBJECTID		(-256ULL)
#define BTRFS_FIRST_CHUNK_TREE_OBJECTID		256ULL

/* Chunk tree: objectid of DEV_ITEMs. */
#define BTRFS_DEV_ITEMS_OBJECTID		1ULL
/* Inode numbers with special meaning. */
#define BTRFS_BTREE_INODE_OBJECTID		1ULL
#define BTRFS_EMPTY_SUBVOL_DIR_OBJECTID		2ULL
/* devid of the target device while a replace runs. */
#define BTRFS_DEV_REPLACE_DEVID			0ULL

/* ======================================================================== */
/* Item key types                                                           */
/* ======================================================================== */

#define BTRFS_INODE_ITEM_KEY			1
#define BTRFS_INODE_REF_KEY			12
#define BTRFS_INODE_EXTREF_KEY			13
#define BTRFS_XATTR_ITEM_KEY			24
#define BTRFS_VERITY_DESC_ITEM_KEY		36
#define BTRFS_VERITY_MERKLE_ITEM_KEY		37
#define BTRFS_ORPHAN_ITEM_KEY			48
#define BTRFS_DIR_LOG_ITEM_KEY			60
#define BTRFS_DIR_LOG_INDEX_KEY			72
#define BTRFS_DIR_ITEM_KEY			84
#define BTRFS_DIR_INDEX_KEY			96
#define BTRFS_EXTENT_DATA_KEY			108
#define BTRFS_CSUM_ITEM_KEY			120 /* obsolete */
#define BTRFS_EXTENT_CSUM_KEY			128
#define BTRFS_ROOT_ITEM_KEY			132
#define BTRFS_ROOT_BACKREF_KEY			144
#define BTRFS_ROOT_REF_KEY			156
#define BTRFS_EXTENT_ITEM_KEY			168
#define BTRFS_METADATA_ITEM_KEY			169
#define BTRFS_EXTENT_OWNER_REF_KEY		172
#define BTRFS_TREE_BLOCK_REF_KEY		176
#define BTRFS_EXTENT_DATA_REF_KEY		178
#define BTRFS_EXTENT_REF_V0_KEY			180 /* obsolete */
#define BTRFS_SHARED_BLOCK_REF_KEY		182
#define BTRFS_SHARED_DATA_REF_KEY		184
#define BTRFS_BLOCK_GROUP_ITEM_KEY		192
#define BTRFS_FREE_SPACE_INFO_KEY		198
#define BTRFS_FREE_SPACE_EXTENT_KEY		199
#define BTRFS_FREE_SPACE_BITMAP_KEY		200
#define BTRFS_DEV_EXTENT_KEY			204
#define BTRFS_DEV_ITEM_KEY			216
#define BTRFS_CHUNK_ITEM_KEY			228
#define BTRFS_RAID_STRIPE_KEY			230
#define BTRFS_QGROUP_STATUS_KEY			240
#define BTRFS_QGROUP_INFO_KEY			242
#define BTRFS_QGROUP_LIMIT_KEY			244
#define BTRFS_QGROUP_RELATION_KEY		246
/* 248: the balance item is a TEMPORARY_ITEM keyed (BALANCE_OBJECTID, 248, 0). */
#define BTRFS_BALANCE_ITEM_KEY			248
#define BTRFS_TEMPORARY_ITEM_KEY		248
/* 249: device stats are PERSISTENT_ITEMs keyed (DEV_STATS_OBJECTID, 249, devid). */
#define BTRFS_DEV_STATS_KEY			249
#define BTRFS_PERSISTENT_ITEM_KEY		249
#define BTRFS_DEV_REPLACE_KEY			250
#define BTRFS_UUID_KEY_SUBVOL			251
#define BTRFS_UUID_KEY_RECEIVED_SUBVOL		252
#define BTRFS_STRING_ITEM_KEY			253

/* ======================================================================== */
/* Keys                                                                     */
/* ======================================================================== */

/* On-disk key: 17 bytes. */
struct btrfs_disk_key {
	uint64_t objectid;	/*  0 */
	uint8_t type;		/*  8 */
	uint64_t offset;	/*  9 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_disk_key, 17);
UBT_CHECK_OFF(struct btrfs_disk_key, objectid, 0);
UBT_CHECK_OFF(struct btrfs_disk_key, type, 8);
UBT_CHECK_OFF(struct btrfs_disk_key, offset, 9);

BTRFS_SETGET(disk_key, struct btrfs_disk_key, objectid, 64)
BTRFS_SETGET(disk_key, struct btrfs_disk_key, type, 8)
BTRFS_SETGET(disk_key, struct btrfs_disk_key, offset, 64)

/* Host-order key, never stored on disk as is. */
struct btrfs_key {
	uint64_t objectid;
	uint8_t type;
	uint64_t offset;
};

static inline void btrfs_disk_key_to_cpu(struct btrfs_key *cpu,
					 const struct btrfs_disk_key *disk)
{
	cpu->objectid = btrfs_disk_key_objectid(disk);
	cpu->type = btrfs_disk_key_type(disk);
	cpu->offset = btrfs_disk_key_offset(disk);
}

static inline void btrfs_cpu_key_to_disk(struct btrfs_disk_key *disk,
					 const struct btrfs_key *cpu)
{
	btrfs_set_disk_key_objectid(disk, cpu->objectid);
	btrfs_set_disk_key_type(disk, cpu->type);
	btrfs_set_disk_key_offset(disk, cpu->offset);
}

/* Key order: objectid, then type, then offset.  Returns -1, 0 or 1. */
static inline int btrfs_comp_keys(const struct btrfs_key *a,
				  const struct btrfs_key *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return 0;
}

/* Compare an on-disk key with a host key, same order as btrfs_comp_keys. */
static inline int btrfs_comp_disk_key(const struct btrfs_disk_key *disk,
				      const struct btrfs_key *b)
{
	struct btrfs_key a;

	btrfs_disk_key_to_cpu(&a, disk);
	return btrfs_comp_keys(&a, b);
}

/* ======================================================================== */
/* Tree blocks: header, leaf items, node pointers                           */
/* ======================================================================== */

/* Every tree block (node or leaf) starts with this: 101 bytes. */
struct btrfs_header {
	uint8_t csum[BTRFS_CSUM_SIZE];		/*   0 */
	uint8_t fsid[BTRFS_FSID_SIZE];		/*  32: metadata_uuid if set */
	uint64_t bytenr;			/*  48: logical address */
	uint64_t flags;				/*  56: WRITTEN/RELOC, backref rev */
	uint8_t chunk_tree_uuid[BTRFS_UUID_SIZE]; /*  64 */
	uint64_t generation;			/*  80 */
	uint64_t owner;				/*  88: tree objectid */
	uint32_t nritems;			/*  96 */
	uint8_t level;				/* 100: 0 = leaf */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_header, 101);
UBT_CHECK_OFF(struct btrfs_header, csum, 0);
UBT_CHECK_OFF(struct btrfs_header, fsid, 32);
UBT_CHECK_OFF(struct btrfs_header, bytenr, 48);
UBT_CHECK_OFF(struct btrfs_header, flags, 56);
UBT_CHECK_OFF(struct btrfs_header, chunk_tree_uuid, 64);
UBT_CHECK_OFF(struct btrfs_header, generation, 80);
UBT_CHECK_OFF(struct btrfs_header, owner, 88);
UBT_CHECK_OFF(struct btrfs_header, nritems, 96);
UBT_CHECK_OFF(struct btrfs_header, level, 100);

BTRFS_PTRGET(header, struct btrfs_header, csum, uint8_t)
BTRFS_PTRGET(header, struct btrfs_header, fsid, uint8_t)
BTRFS_SETGET(header, struct btrfs_header, bytenr, 64)
BTRFS_SETGET(header, struct btrfs_header, flags, 64)
BTRFS_PTRGET(header, struct btrfs_header, chunk_tree_uuid, uint8_t)
BTRFS_SETGET(header, struct btrfs_header, generation, 64)
BTRFS_SETGET(header, struct btrfs_header, owner, 64)
BTRFS_SETGET(header, struct btrfs_header, nritems, 32)
BTRFS_SETGET(header, struct btrfs_header, level, 8)

static inline int btrfs_header_backref_rev(const struct btrfs_header *h)
{
	return (int)(btrfs_header_flags(h) >> BTRFS_BACKREF_REV_SHIFT);
}

static inline void btrfs_set_header_backref_rev(struct btrfs_header *h,
						int rev)
{
	uint64_t f = btrfs_header_flags(h) & ~BTRFS_BACKREF_REV_MASK;

	btrfs_set_header_flags(h, f | ((uint64_t)rev << BTRFS_BACKREF_REV_SHIFT));
}

/*
 * Leaf item header: 25 bytes.  Item headers follow the block header; item
 * data grows from the end of the block.  offset is relative to the end of the
 * block header (i.e. to byte 101 of the block).
 */
struct btrfs_item {
	struct btrfs_disk_key key;	/*  0 */
	uint32_t offset;		/* 17 */
	uint32_t size;			/* 21 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_item, 25);
UBT_CHECK_OFF(struct btrfs_item, key, 0);
UBT_CHECK_OFF(struct btrfs_item, offset, 17);
UBT_CHECK_OFF(struct btrfs_item, size, 21);

BTRFS_PTRGET(item, struct btrfs_item, key, struct btrfs_disk_key)
BTRFS_SETGET(item, struct btrfs_item, offset, 32)
BTRFS_SETGET(item, struct btrfs_item, size, 32)

/* Node pointer: 33 bytes, follows the block header in internal nodes. */
struct btrfs_key_ptr {
	struct btrfs_disk_key key;	/*  0 */
	uint64_t blockptr;		/* 17 */
	uint64_t generation;		/* 25 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_key_ptr, 33);
UBT_CHECK_OFF(struct btrfs_key_ptr, key, 0);
UBT_CHECK_OFF(struct btrfs_key_ptr, blockptr, 17);
UBT_CHECK_OFF(struct btrfs_key_ptr, generation, 25);

BTRFS_PTRGET(key_ptr, struct btrfs_key_ptr, key, struct btrfs_disk_key)
BTRFS_SETGET(key_ptr, struct btrfs_key_ptr, blockptr, 64)
BTRFS_SETGET(key_ptr, struct btrfs_key_ptr, generation, 64)

/* Capacity of a tree block of @nodesize bytes. */
static inline uint32_t btrfs_leaf_data_size(uint32_t nodesize)
{
	return nodesize - (uint32_t)sizeof(struct btrfs_header);
}

static inline uint32_t btrfs_node_ptrs_per_block(uint32_t nodesize)
{
	return btrfs_leaf_data_size(nodesize) /
	       (uint32_t)sizeof(struct btrfs_key_ptr);
}

/* ======================================================================== */
/* Devices and chunks (chunk tree, sys_chunk_array)                         */
/* ======================================================================== */

/* DEV_ITEM (DEV_ITEMS_OBJECTID, DEV_ITEM, devid), also super.dev_item: 98. */
struct btrfs_dev_item {
	uint64_t devid;			/*  0 */
	uint64_t total_bytes;		/*  8 */
	uint64_t bytes_used;		/* 16 */
	uint32_t io_align;		/* 24 */
	uint32_t io_width;		/* 28 */
	uint32_t sector_size;		/* 32 */
	uint64_t type;			/* 36 */
	uint64_t generation;		/* 44 */
	uint64_t start_offset;		/* 52 */
	uint32_t dev_group;		/* 60 */
	uint8_t seek_speed;		/* 64 */
	uint8_t bandwidth;		/* 65 */
	uint8_t uuid[BTRFS_UUID_SIZE];	/* 66: device uuid */
	uint8_t fsid[BTRFS_UUID_SIZE];	/* 82: fs uuid */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_dev_item, 98);
UBT_CHECK_OFF(struct btrfs_dev_item, devid, 0);
UBT_CHECK_OFF(struct btrfs_dev_item, total_bytes, 8);
UBT_CHECK_OFF(struct btrfs_dev_item, bytes_used, 16);
UBT_CHECK_OFF(struct btrfs_dev_item, io_align, 24);
UBT_CHECK_OFF(struct btrfs_dev_item, io_width, 28);
UBT_CHECK_OFF(struct btrfs_dev_item, sector_size, 32);
UBT_CHECK_OFF(struct btrfs_dev_item, type, 36);
UBT_CHECK_OFF(struct btrfs_dev_item, generation, 44);
UBT_CHECK_OFF(struct btrfs_dev_item, start_offset, 52);
UBT_CHECK_OFF(struct btrfs_dev_item, dev_group, 60);
UBT_CHECK_OFF(struct btrfs_dev_item, seek_speed, 64);
UBT_CHECK_OFF(struct btrfs_dev_item, bandwidth, 65);
UBT_CHECK_OFF(struct btrfs_dev_item, uuid, 66);
UBT_CHECK_OFF(struct btrfs_dev_item, fsid, 82);

BTRFS_SETGET(dev_item, struct btrfs_dev_item, devid, 64)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, total_bytes, 64)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, bytes_used, 64)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, io_align, 32)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, io_width, 32)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, sector_size, 32)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, type, 64)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, generation, 64)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, start_offset, 64)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, dev_group, 32)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, seek_speed, 8)
BTRFS_SETGET(dev_item, struct btrfs_dev_item, bandwidth, 8)
BTRFS_PTRGET(dev_item, struct btrfs_dev_item, uuid, uint8_t)
BTRFS_PTRGET(dev_item, struct btrfs_dev_item, fsid, uint8_t)

/* One stripe of a chunk: 32 bytes. */
struct btrfs_stripe {
	uint64_t devid;				/*  0 */
	uint64_t offset;			/*  8: physical byte on devid */
	uint8_t dev_uuid[BTRFS_UUID_SIZE];	/* 16 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_stripe, 32);
UBT_CHECK_OFF(struct btrfs_stripe, devid, 0);
UBT_CHECK_OFF(struct btrfs_stripe, offset, 8);
UBT_CHECK_OFF(struct btrfs_stripe, dev_uuid, 16);

BTRFS_SETGET(stripe, struct btrfs_stripe, devid, 64)
BTRFS_SETGET(stripe, struct btrfs_stripe, offset, 64)
BTRFS_PTRGET(stripe, struct btrfs_stripe, dev_uuid, uint8_t)

/*
 * CHUNK_ITEM (FIRST_CHUNK_TREE_OBJECTID, CHUNK_ITEM, logical start).
 *
 * Layout choice: unlike the kernel's struct (which embeds the first stripe
 * and so has sizeof 80), ours is the 48-byte fixed part followed by a
 * flexible array of num_stripes stripes.  sizeof(struct btrfs_chunk) == 48;
 * the item size is btrfs_chunk_item_size(num_stripes) = 48 + 32 * n.
 */
struct btrfs_chunk {
	uint64_t length;		/*  0 */
	uint64_t owner;			/*  8: EXTENT_TREE_OBJECTID */
	uint64_t stripe_len;		/* 16: BTRFS_STRIPE_LEN */
	uint64_t type;			/* 24: BTRFS_BLOCK_GROUP_* */
	uint32_t io_align;		/* 32 */
	uint32_t io_width;		/* 36 */
	uint32_t sector_size;		/* 40 */
	uint16_t num_stripes;		/* 44 */
	uint16_t sub_stripes;		/* 46 */
	struct btrfs_stripe stripes[];	/* 48 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_chunk, 48);
UBT_CHECK_OFF(struct btrfs_chunk, length, 0);
UBT_CHECK_OFF(struct btrfs_chunk, owner, 8);
UBT_CHECK_OFF(struct btrfs_chunk, stripe_len, 16);
UBT_CHECK_OFF(struct btrfs_chunk, type, 24);
UBT_CHECK_OFF(struct btrfs_chunk, io_align, 32);
UBT_CHECK_OFF(struct btrfs_chunk, io_width, 36);
UBT_CHECK_OFF(struct btrfs_chunk, sector_size, 40);
UBT_CHECK_OFF(struct btrfs_chunk, num_stripes, 44);
UBT_CHECK_OFF(struct btrfs_chunk, sub_stripes, 46);
UBT_CHECK_OFF(struct btrfs_chunk, stripes, 48);

BTRFS_SETGET(chunk, struct btrfs_chunk, length, 64)
BTRFS_SETGET(chunk, struct btrfs_chunk, owner, 64)
BTRFS_SETGET(chunk, struct btrfs_chunk, stripe_len, 64)
BTRFS_SETGET(chunk, struct btrfs_chunk, type, 64)
BTRFS_SETGET(chunk, struct btrfs_chunk, io_align, 32)
BTRFS_SETGET(chunk, struct btrfs_chunk, io_width, 32)
BTRFS_SETGET(chunk, struct btrfs_chunk, sector_size, 32)
BTRFS_SETGET(chunk, struct btrfs_chunk, num_stripes, 16)
BTRFS_SETGET(chunk, struct btrfs_chunk, sub_stripes, 16)

/* Item size of a chunk with @num_stripes stripes. */
static inline size_t btrfs_chunk_item_size(unsigned int num_stripes)
{
	return sizeof(struct btrfs_chunk) +
	       (size_t)num_stripes * sizeof(struct btrfs_stripe);
}

/* Pointer to stripe @i of @c (caller checks i < num_stripes and item size). */
static inline struct btrfs_stripe *btrfs_chunk_stripe(const struct btrfs_chunk *c,
						      unsigned int i)
{
	return (struct btrfs_stripe *)(void *)(UBT_MEMBER_PTR(struct btrfs_chunk, c, stripes) +
					       (size_t)i * sizeof(struct btrfs_stripe));
}

static inline uint64_t btrfs_stripe_devid_nr(const struct btrfs_chunk *c,
					     unsigned int i)
{
	return btrfs_stripe_devid(btrfs_chunk_stripe(c, i));
}

static inline uint64_t btrfs_stripe_offset_nr(const struct btrfs_chunk *c,
					      unsigned int i)
{
	return btrfs_stripe_offset(btrfs_chunk_stripe(c, i));
}

/* ======================================================================== */
/* Superblock                                                               */
/* ======================================================================== */

/* One of the 4 rotating backup root sets in the superblock: 168 bytes. */
struct btrfs_root_backup {
	uint64_t tree_root;		/*   0 */
	uint64_t tree_root_gen;		/*   8 */
	uint64_t chunk_root;		/*  16 */
	uint64_t chunk_root_gen;	/*  24 */
	uint64_t extent_root;		/*  32 */
	uint64_t extent_root_gen;	/*  40 */
	uint64_t fs_root;		/*  48 */
	uint64_t fs_root_gen;		/*  56 */
	uint64_t dev_root;		/*  64 */
	uint64_t dev_root_gen;		/*  72 */
	uint64_t csum_root;		/*  80 */
	uint64_t csum_root_gen;		/*  88 */
	uint64_t total_bytes;		/*  96 */
	uint64_t bytes_used;		/* 104 */
	uint64_t num_devices;		/* 112 */
	uint64_t unused_64[4];		/* 120 */
	uint8_t tree_root_level;	/* 152 */
	uint8_t chunk_root_level;	/* 153 */
	uint8_t extent_root_level;	/* 154 */
	uint8_t fs_root_level;		/* 155 */
	uint8_t dev_root_level;		/* 156 */
	uint8_t csum_root_level;	/* 157 */
	uint8_t unused_8[10];		/* 158 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_root_backup, 168);
UBT_CHECK_OFF(struct btrfs_root_backup, tree_root, 0);
UBT_CHECK_OFF(struct btrfs_root_backup, tree_root_gen, 8);
UBT_CHECK_OFF(struct btrfs_root_backup, chunk_root, 16);
UBT_CHECK_OFF(struct btrfs_root_backup, chunk_root_gen, 24);
UBT_CHECK_OFF(struct btrfs_root_backup, extent_root, 32);
UBT_CHECK_OFF(struct btrfs_root_backup, extent_root_gen, 40);
UBT_CHECK_OFF(struct btrfs_root_backup, fs_root, 48);
UBT_CHECK_OFF(struct btrfs_root_backup, fs_root_gen, 56);
UBT_CHECK_OFF(struct btrfs_root_backup, dev_root, 64);
UBT_CHECK_OFF(struct btrfs_root_backup, dev_root_gen, 72);
UBT_CHECK_OFF(struct btrfs_root_backup, csum_root, 80);
UBT_CHECK_OFF(struct btrfs_root_backup, csum_root_gen, 88);
UBT_CHECK_OFF(struct btrfs_root_backup, total_bytes, 96);
UBT_CHECK_OFF(struct btrfs_root_backup, bytes_used, 104);
UBT_CHECK_OFF(struct btrfs_root_backup, num_devices, 112);
UBT_CHECK_OFF(struct btrfs_root_backup, unused_64, 120);
UBT_CHECK_OFF(struct btrfs_root_backup, tree_root_level, 152);
UBT_CHECK_OFF(struct btrfs_root_backup, chunk_root_level, 153);
UBT_CHECK_OFF(struct btrfs_root_backup, extent_root_level, 154);
UBT_CHECK_OFF(struct btrfs_root_backup, fs_root_level, 155);
UBT_CHECK_OFF(struct btrfs_root_backup, dev_root_level, 156);
UBT_CHECK_OFF(struct btrfs_root_backup, csum_root_level, 157);
UBT_CHECK_OFF(struct btrfs_root_backup, unused_8, 158);

BTRFS_SETGET(root_backup, struct btrfs_root_backup, tree_root, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, tree_root_gen, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, chunk_root, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, chunk_root_gen, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, extent_root, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, extent_root_gen, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, fs_root, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, fs_root_gen, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, dev_root, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, dev_root_gen, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, csum_root, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, csum_root_gen, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, total_bytes, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, bytes_used, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, num_devices, 64)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, tree_root_level, 8)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, chunk_root_level, 8)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, extent_root_level, 8)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, fs_root_level, 8)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, dev_root_level, 8)
BTRFS_SETGET(root_backup, struct btrfs_root_backup, csum_root_level, 8)

/* The superblock: 4096 bytes at each btrfs_sb_offset(mirror). */
struct btrfs_super_block {
	uint8_t csum[BTRFS_CSUM_SIZE];		/*    0: over bytes 32..4095 */
	uint8_t fsid[BTRFS_FSID_SIZE];		/*   32 */
	uint64_t bytenr;			/*   48: this copy's offset */
	uint64_t flags;				/*   56: BTRFS_SUPER_FLAG_* */
	uint64_t magic;				/*   64: BTRFS_MAGIC */
	uint64_t generation;			/*   72 */
	uint64_t root;				/*   80: root tree bytenr */
	uint64_t chunk_root;			/*   88 */
	uint64_t log_root;			/*   96 */
	uint64_t log_root_transid;		/*  104: unused, always 0 */
	uint64_t total_bytes;			/*  112 */
	uint64_t bytes_used;			/*  120 */
	uint64_t root_dir_objectid;		/*  128: 6 */
	uint64_t num_devices;			/*  136 */
	uint32_t sectorsize;			/*  144 */
	uint32_t nodesize;			/*  148 */
	uint32_t leafsize;			/*  152: unused, == nodesize */
	uint32_t stripesize;			/*  156 */
	uint32_t sys_chunk_array_size;		/*  160 */
	uint64_t chunk_root_generation;		/*  164 */
	uint64_t compat_flags;			/*  172 */
	uint64_t compat_ro_flags;		/*  180 */
	uint64_t incompat_flags;		/*  188 */
	uint16_t csum_type;			/*  196 */
	uint8_t root_level;			/*  198 */
	uint8_t chunk_root_level;		/*  199 */
	uint8_t log_root_level;			/*  200 */
	struct btrfs_dev_item dev_item;		/*  201 */
	char label[BTRFS_LABEL_SIZE];		/*  299 */
	uint64_t cache_generation;		/*  555 */
	uint64_t uuid_tree_generation;		/*  563 */
	uint8_t metadata_uuid[BTRFS_FSID_SIZE];	/*  571 */
	uint64_t nr_global_roots;		/*  587: extent-tree-v2 */
	uint64_t reserved[27];			/*  595 */
	uint8_t sys_chunk_array[BTRFS_SYSTEM_CHUNK_ARRAY_SIZE];	/*  811 */
	struct btrfs_root_backup super_roots[BTRFS_NUM_BACKUP_ROOTS];	/* 2859 */
	uint8_t padding[565];			/* 3531 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_super_block, BTRFS_SUPER_INFO_SIZE);
UBT_CHECK_OFF(struct btrfs_super_block, csum, 0);
UBT_CHECK_OFF(struct btrfs_super_block, fsid, 32);
UBT_CHECK_OFF(struct btrfs_super_block, bytenr, 48);
UBT_CHECK_OFF(struct btrfs_super_block, flags, 56);
UBT_CHECK_OFF(struct btrfs_super_block, magic, 64);
UBT_CHECK_OFF(struct btrfs_super_block, generation, 72);
UBT_CHECK_OFF(struct btrfs_super_block, root, 80);
UBT_CHECK_OFF(struct btrfs_super_block, chunk_root, 88);
UBT_CHECK_OFF(struct btrfs_super_block, log_root, 96);
UBT_CHECK_OFF(struct btrfs_super_block, log_root_transid, 104);
UBT_CHECK_OFF(struct btrfs_super_block, total_bytes, 112);
UBT_CHECK_OFF(struct btrfs_super_block, bytes_used, 120);
UBT_CHECK_OFF(struct btrfs_super_block, root_dir_objectid, 128);
UBT_CHECK_OFF(struct btrfs_super_block, num_devices, 136);
UBT_CHECK_OFF(struct btrfs_super_block, sectorsize, 144);
UBT_CHECK_OFF(struct btrfs_super_block, nodesize, 148);
UBT_CHECK_OFF(struct btrfs_super_block, leafsize, 152);
UBT_CHECK_OFF(struct btrfs_super_block, stripesize, 156);
UBT_CHECK_OFF(struct btrfs_super_block, sys_chunk_array_size, 160);
UBT_CHECK_OFF(struct btrfs_super_block, chunk_root_generation, 164);
UBT_CHECK_OFF(struct btrfs_super_block, compat_flags, 172);
UBT_CHECK_OFF(struct btrfs_super_block, compat_ro_flags, 180);
UBT_CHECK_OFF(struct btrfs_super_block, incompat_flags, 188);
UBT_CHECK_OFF(struct btrfs_super_block, csum_type, 196);
UBT_CHECK_OFF(struct btrfs_super_block, root_level, 198);
UBT_CHECK_OFF(struct btrfs_super_block, chunk_root_level, 199);
UBT_CHECK_OFF(struct btrfs_super_block, log_root_level, 200);
UBT_CHECK_OFF(struct btrfs_super_block, dev_item, 201);
UBT_CHECK_OFF(struct btrfs_super_block, label, 299);
UBT_CHECK_OFF(struct btrfs_super_block, cache_generation, 555);
UBT_CHECK_OFF(struct btrfs_super_block, uuid_tree_generation, 563);
UBT_CHECK_OFF(struct btrfs_super_block, metadata_uuid, 571);
UBT_CHECK_OFF(struct btrfs_super_block, nr_global_roots, 587);
UBT_CHECK_OFF(struct btrfs_super_block, reserved, 595);
UBT_CHECK_OFF(struct btrfs_super_block, sys_chunk_array, 811);
UBT_CHECK_OFF(struct btrfs_super_block, super_roots, 2859);
UBT_CHECK_OFF(struct btrfs_super_block, padding, 3531);

BTRFS_PTRGET(super, struct btrfs_super_block, csum, uint8_t)
BTRFS_PTRGET(super, struct btrfs_super_block, fsid, uint8_t)
BTRFS_SETGET(super, struct btrfs_super_block, bytenr, 64)
BTRFS_SETGET(super, struct btrfs_super_block, flags, 64)
BTRFS_SETGET(super, struct btrfs_super_block, magic, 64)
BTRFS_SETGET(super, struct btrfs_super_block, generation, 64)
BTRFS_SETGET(super, struct btrfs_super_block, root, 64)
BTRFS_SETGET(super, struct btrfs_super_block, chunk_root, 64)
BTRFS_SETGET(super, struct btrfs_super_block, log_root, 64)
BTRFS_SETGET(super, struct btrfs_super_block, log_root_transid, 64)
BTRFS_SETGET(super, struct btrfs_super_block, total_bytes, 64)
BTRFS_SETGET(super, struct btrfs_super_block, bytes_used, 64)
BTRFS_SETGET(super, struct btrfs_super_block, root_dir_objectid, 64)
BTRFS_SETGET(super, struct btrfs_super_block, num_devices, 64)
BTRFS_SETGET(super, struct btrfs_super_block, sectorsize, 32)
BTRFS_SETGET(super, struct btrfs_super_block, nodesize, 32)
BTRFS_SETGET(super, struct btrfs_super_block, leafsize, 32)
BTRFS_SETGET(super, struct btrfs_super_block, stripesize, 32)
BTRFS_SETGET(super, struct btrfs_super_block, sys_chunk_array_size, 32)
BTRFS_SETGET(super, struct btrfs_super_block, chunk_root_generation, 64)
BTRFS_SETGET(super, struct btrfs_super_block, compat_flags, 64)
BTRFS_SETGET(super, struct btrfs_super_block, compat_ro_flags, 64)
BTRFS_SETGET(super, struct btrfs_super_block, incompat_flags, 64)
BTRFS_SETGET(super, struct btrfs_super_block, csum_type, 16)
BTRFS_SETGET(super, struct btrfs_super_block, root_level, 8)
BTRFS_SETGET(super, struct btrfs_super_block, chunk_root_level, 8)
BTRFS_SETGET(super, struct btrfs_super_block, log_root_level, 8)
BTRFS_PTRGET(super, struct btrfs_super_block, dev_item, struct btrfs_dev_item)
BTRFS_PTRGET(super, struct btrfs_super_block, label, char)
BTRFS_SETGET(super, struct btrfs_super_block, cache_generation, 64)
BTRFS_SETGET(super, struct btrfs_super_block, uuid_tree_generation, 64)
BTRFS_PTRGET(super, struct btrfs_super_block, metadata_uuid, uint8_t)
BTRFS_SETGET(super, struct btrfs_super_block, nr_global_roots, 64)
BTRFS_PTRGET(super, struct btrfs_super_block, sys_chunk_array, uint8_t)

/* Backup root slot @i (0 <= i < BTRFS_NUM_BACKUP_ROOTS). */
static inline struct btrfs_root_backup *
btrfs_super_root_backup(const struct btrfs_super_block *sb, unsigned int i)
{
	return (struct btrfs_root_backup *)(void *)(UBT_MEMBER_PTR(struct btrfs_super_block, sb, super_roots) +
						    (size_t)i * sizeof(struct btrfs_root_backup));
}

/* Checksum size of the filesystem (0 if csum_type is unknown). */
static inline unsigned int btrfs_super_csum_size(const struct btrfs_super_block *sb)
{
	return btrfs_csum_type_size(btrfs_super_csum_type(sb));
}

/* The uuid stamped in tree block headers: metadata_uuid if that feature is on. */
static inline uint8_t *btrfs_super_block_fsid(const struct btrfs_super_block *sb)
{
	if (btrfs_super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_METADATA_UUID)
		return btrfs_super_metadata_uuid(sb);
	return btrfs_super_fsid(sb);
}

/* ======================================================================== */
/* Leaf / node layout helpers (operate on a whole tree block buffer)        */
/* ======================================================================== */

/* Item header @slot of a leaf held in @block. */
static inline struct btrfs_item *btrfs_leaf_item(const void *block,
						 unsigned int slot)
{
	return (struct btrfs_item *)(void *)((uint8_t *)(uintptr_t)block +
					     sizeof(struct btrfs_header) +
					     (size_t)slot * sizeof(struct btrfs_item));
}

/* Start of the body of @item inside the leaf held in @block (unchecked). */
static inline uint8_t *btrfs_leaf_item_data(const void *block,
					    const struct btrfs_item *item)
{
	return (uint8_t *)(uintptr_t)block + sizeof(struct btrfs_header) +
	       btrfs_item_offset(item);
}

/* Key pointer @slot of an internal node held in @block. */
static inline struct btrfs_key_ptr *btrfs_node_key_ptr(const void *block,
						       unsigned int slot)
{
	return (struct btrfs_key_ptr *)(void *)((uint8_t *)(uintptr_t)block +
						sizeof(struct btrfs_header) +
						(size_t)slot * sizeof(struct btrfs_key_ptr));
}

/* ======================================================================== */
/* Inode items (fs trees)                                                   */
/* ======================================================================== */

/* Inode flags: low 32 bits of btrfs_inode_item.flags. */
#define BTRFS_INODE_NODATASUM		(1ULL << 0)
#define BTRFS_INODE_NODATACOW		(1ULL << 1)
#define BTRFS_INODE_READONLY		(1ULL << 2)
#define BTRFS_INODE_NOCOMPRESS		(1ULL << 3)
#define BTRFS_INODE_PREALLOC		(1ULL << 4)
#define BTRFS_INODE_SYNC		(1ULL << 5)
#define BTRFS_INODE_IMMUTABLE		(1ULL << 6)
#define BTRFS_INODE_APPEND		(1ULL << 7)
#define BTRFS_INODE_NODUMP		(1ULL << 8)
#define BTRFS_INODE_NOATIME		(1ULL << 9)
#define BTRFS_INODE_DIRSYNC		(1ULL << 10)
#define BTRFS_INODE_COMPRESS		(1ULL << 11)
#define BTRFS_INODE_ROOT_ITEM_INIT	(1ULL << 31)
#define BTRFS_INODE_FLAG_MASK		0x80000fffULL

/*
 * Read-only-compat inode flags live in the HIGH 32 bits of the same u64:
 * on disk, flags = (ro_flags << 32) | flags.  The value below is the ro_flags
 * bit; BTRFS_INODE_RO_VERITY_DISK is the bit as it appears in the u64.
 */
#define BTRFS_INODE_RO_FLAGS_SHIFT	32
#define BTRFS_INODE_RO_VERITY		(1U << 0)
#define BTRFS_INODE_RO_FLAG_MASK	(BTRFS_INODE_RO_VERITY)
#define BTRFS_INODE_RO_VERITY_DISK	(1ULL << 32)

/* 12 bytes. */
struct btrfs_timespec {
	uint64_t sec;		/*  0 */
	uint32_t nsec;		/*  8 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_timespec, 12);
UBT_CHECK_OFF(struct btrfs_timespec, sec, 0);
UBT_CHECK_OFF(struct btrfs_timespec, nsec, 8);

BTRFS_SETGET(timespec, struct btrfs_timespec, sec, 64)
BTRFS_SETGET(timespec, struct btrfs_timespec, nsec, 32)

/* INODE_ITEM (ino, INODE_ITEM, 0); also embedded in ROOT_ITEM: 160 bytes. */
struct btrfs_inode_item {
	uint64_t generation;		/*   0: NFS generation */
	uint64_t transid;		/*   8: last transaction touching it */
	uint64_t size;			/*  16 */
	uint64_t nbytes;		/*  24: bytes allocated */
	uint64_t block_group;		/*  32: unused hint */
	uint32_t nlink;			/*  40 */
	uint32_t uid;			/*  44 */
	uint32_t gid;			/*  48 */
	uint32_t mode;			/*  52 */
	uint64_t rdev;			/*  56 */
	uint64_t flags;			/*  64: BTRFS_INODE_* (+ ro flags << 32) */
	uint64_t sequence;		/*  72: NFS change counter */
	uint64_t reserved[4];		/*  80 */
	struct btrfs_timespec atime;	/* 112 */
	struct btrfs_timespec ctime;	/* 124 */
	struct btrfs_timespec mtime;	/* 136 */
	struct btrfs_timespec otime;	/* 148: creation time */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_inode_item, 160);
UBT_CHECK_OFF(struct btrfs_inode_item, generation, 0);
UBT_CHECK_OFF(struct btrfs_inode_item, transid, 8);
UBT_CHECK_OFF(struct btrfs_inode_item, size, 16);
UBT_CHECK_OFF(struct btrfs_inode_item, nbytes, 24);
UBT_CHECK_OFF(struct btrfs_inode_item, block_group, 32);
UBT_CHECK_OFF(struct btrfs_inode_item, nlink, 40);
UBT_CHECK_OFF(struct btrfs_inode_item, uid, 44);
UBT_CHECK_OFF(struct btrfs_inode_item, gid, 48);
UBT_CHECK_OFF(struct btrfs_inode_item, mode, 52);
UBT_CHECK_OFF(struct btrfs_inode_item, rdev, 56);
UBT_CHECK_OFF(struct btrfs_inode_item, flags, 64);
UBT_CHECK_OFF(struct btrfs_inode_item, sequence, 72);
UBT_CHECK_OFF(struct btrfs_inode_item, reserved, 80);
UBT_CHECK_OFF(struct btrfs_inode_item, atime, 112);
UBT_CHECK_OFF(struct btrfs_inode_item, ctime, 124);
UBT_CHECK_OFF(struct btrfs_inode_item, mtime, 136);
UBT_CHECK_OFF(struct btrfs_inode_item, otime, 148);

BTRFS_SETGET(inode, struct btrfs_inode_item, generation, 64)
BTRFS_SETGET(inode, struct btrfs_inode_item, transid, 64)
BTRFS_SETGET(inode, struct btrfs_inode_item, size, 64)
BTRFS_SETGET(inode, struct btrfs_inode_item, nbytes, 64)
BTRFS_SETGET(inode, struct btrfs_inode_item, block_group, 64)
BTRFS_SETGET(inode, struct btrfs_inode_item, nlink, 32)
BTRFS_SETGET(inode, struct btrfs_inode_item, uid, 32)
BTRFS_SETGET(inode, struct btrfs_inode_item, gid, 32)
BTRFS_SETGET(inode, struct btrfs_inode_item, mode, 32)
BTRFS_SETGET(inode, struct btrfs_inode_item, rdev, 64)
BTRFS_SETGET(inode, struct btrfs_inode_item, flags, 64)
BTRFS_SETGET(inode, struct btrfs_inode_item, sequence, 64)
BTRFS_PTRGET(inode, struct btrfs_inode_item, atime, struct btrfs_timespec)
BTRFS_PTRGET(inode, struct btrfs_inode_item, ctime, struct btrfs_timespec)
BTRFS_PTRGET(inode, struct btrfs_inode_item, mtime, struct btrfs_timespec)
BTRFS_PTRGET(inode, struct btrfs_inode_item, otime, struct btrfs_timespec)

/*
 * INODE_REF (ino, INODE_REF, parent dir ino): one or more packed entries of
 * this 10-byte header followed by name_len name bytes.
 */
struct btrfs_inode_ref {
	uint64_t index;		/*  0: DIR_INDEX offset in the parent */
	uint16_t name_len;	/*  8 */
	/* name follows at 10 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_inode_ref, 10);
UBT_CHECK_OFF(struct btrfs_inode_ref, index, 0);
UBT_CHECK_OFF(struct btrfs_inode_ref, name_len, 8);

BTRFS_SETGET(inode_ref, struct btrfs_inode_ref, index, 64)
BTRFS_SETGET(inode_ref, struct btrfs_inode_ref, name_len, 16)

static inline uint8_t *btrfs_inode_ref_name(const struct btrfs_inode_ref *r)
{
	return (uint8_t *)(uintptr_t)r + sizeof(*r);
}

/*
 * INODE_EXTREF (ino, INODE_EXTREF, hash(parent, name)), EXTENDED_IREF
 * feature: packed entries of this 18-byte header + name.
 */
struct btrfs_inode_extref {
	uint64_t parent_objectid;	/*  0 */
	uint64_t index;			/*  8 */
	uint16_t name_len;		/* 16 */
	uint8_t name[];			/* 18 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_inode_extref, 18);
UBT_CHECK_OFF(struct btrfs_inode_extref, parent_objectid, 0);
UBT_CHECK_OFF(struct btrfs_inode_extref, index, 8);
UBT_CHECK_OFF(struct btrfs_inode_extref, name_len, 16);
UBT_CHECK_OFF(struct btrfs_inode_extref, name, 18);

BTRFS_SETGET(inode_extref, struct btrfs_inode_extref, parent_objectid, 64)
BTRFS_SETGET(inode_extref, struct btrfs_inode_extref, index, 64)
BTRFS_SETGET(inode_extref, struct btrfs_inode_extref, name_len, 16)
BTRFS_PTRGET(inode_extref, struct btrfs_inode_extref, name, uint8_t)

/* ======================================================================== */
/* Directory entries and xattrs                                             */
/* ======================================================================== */

/* btrfs_dir_item.type (low bits match the common DT_* numbering). */
#define BTRFS_FT_UNKNOWN	0
#define BTRFS_FT_REG_FILE	1
#define BTRFS_FT_DIR		2
#define BTRFS_FT_CHRDEV		3
#define BTRFS_FT_BLKDEV		4
#define BTRFS_FT_FIFO		5
#define BTRFS_FT_SOCK		6
#define BTRFS_FT_SYMLINK	7
#define BTRFS_FT_XATTR		8
#define BTRFS_FT_MAX		9
#define BTRFS_FT_ENCRYPTED	0x80	/* reserved for fscrypt */

/* Seed of the crc32c name hash used as DIR_ITEM/XATTR_ITEM key offset. */
#define BTRFS_NAME_HASH_SEED	((uint32_t)~1U)

/*
 * DIR_ITEM (dir ino, DIR_ITEM, name hash), DIR_INDEX (dir ino, DIR_INDEX,
 * index), XATTR_ITEM (ino, XATTR_ITEM, name hash): 30-byte header followed by
 * name_len name bytes then data_len data bytes (xattr value; 0 for dirs).
 * DIR_ITEM and XATTR_ITEM may hold several entries on hash collision.
 */
struct btrfs_dir_item {
	struct btrfs_disk_key location;	/*  0: target inode or root key */
	uint64_t transid;		/* 17 */
	uint16_t data_len;		/* 25 */
	uint16_t name_len;		/* 27 */
	uint8_t type;			/* 29: BTRFS_FT_* */
	/* name follows at 30, then data */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_dir_item, 30);
UBT_CHECK_OFF(struct btrfs_dir_item, location, 0);
UBT_CHECK_OFF(struct btrfs_dir_item, transid, 17);
UBT_CHECK_OFF(struct btrfs_dir_item, data_len, 25);
UBT_CHECK_OFF(struct btrfs_dir_item, name_len, 27);
UBT_CHECK_OFF(struct btrfs_dir_item, type, 29);

BTRFS_PTRGET(dir, struct btrfs_dir_item, location, struct btrfs_disk_key)
BTRFS_SETGET(dir, struct btrfs_dir_item, transid, 64)
BTRFS_SETGET(dir, struct btrfs_dir_item, data_len, 16)
BTRFS_SETGET(dir, struct btrfs_dir_item, name_len, 16)
BTRFS_SETGET(dir, struct btrfs_dir_item, type, 8)

static inline uint8_t *btrfs_dir_name(const struct btrfs_dir_item *d)
{
	return (uint8_t *)(uintptr_t)d + sizeof(*d);
}

static inline uint8_t *btrfs_dir_data(const struct btrfs_dir_item *d)
{
	return btrfs_dir_name(d) + btrfs_dir_name_len(d);
}

/* Total size of one dir entry (header + name + data). */
static inline size_t btrfs_dir_entry_size(const struct btrfs_dir_item *d)
{
	return sizeof(*d) + btrfs_dir_name_len(d) + btrfs_dir_data_len(d);
}

/* DIR_LOG_ITEM / DIR_LOG_INDEX (log trees only): 8 bytes. */
struct btrfs_dir_log_item {
	uint64_t end;		/*  0 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_dir_log_item, 8);
UBT_CHECK_OFF(struct btrfs_dir_log_item, end, 0);

BTRFS_SETGET(dir_log, struct btrfs_dir_log_item, end, 64)

/* ORPHAN_ITEM (ORPHAN_OBJECTID, ORPHAN_ITEM, ino): no body (size 0). */

/* ======================================================================== */
/* Root items and root refs (root tree)                                     */
/* ======================================================================== */

#define BTRFS_ROOT_SUBVOL_RDONLY	(1ULL << 0)
#define BTRFS_ROOT_SUBVOL_DEAD		(1ULL << 48)

/*
 * ROOT_ITEM (tree id, ROOT_ITEM, 0 or snapshot transid; for reloc trees the
 * offset is the source subvolume id): 439 bytes.  Items written by very old
 * kernels end at generation_v2 (BTRFS_ROOT_ITEM_LEGACY_SIZE = 239); fields
 * from generation_v2 on are valid only if generation_v2 == generation.
 */
struct btrfs_root_item {
	struct btrfs_inode_item inode;		/*   0 */
	uint64_t generation;			/* 160 */
	uint64_t root_dirid;			/* 168 */
	uint64_t bytenr;			/* 176: root block */
	uint64_t byte_limit;			/* 184 */
	uint64_t bytes_used;			/* 192 */
	uint64_t last_snapshot;			/* 200 */
	uint64_t flags;				/* 208: BTRFS_ROOT_SUBVOL_* */
	uint32_t refs;				/* 216 */
	struct btrfs_disk_key drop_progress;	/* 220 */
	uint8_t drop_level;			/* 237 */
	uint8_t level;				/* 238 */
	uint64_t generation_v2;			/* 239 */
	uint8_t uuid[BTRFS_UUID_SIZE];		/* 247 */
	uint8_t parent_uuid[BTRFS_UUID_SIZE];	/* 263 */
	uint8_t received_uuid[BTRFS_UUID_SIZE];	/* 279 */
	uint64_t ctransid;			/* 295 */
	uint64_t otransid;			/* 303 */
	uint64_t stransid;			/* 311 */
	uint64_t rtransid;			/* 319 */
	struct btrfs_timespec ctime;		/* 327 */
	struct btrfs_timespec otime;		/* 339 */
	struct btrfs_timespec stime;		/* 351 */
	struct btrfs_timespec rtime;		/* 363 */
	uint64_t reserved[8];			/* 375 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_root_item, 439);
UBT_CHECK_OFF(struct btrfs_root_item, inode, 0);
UBT_CHECK_OFF(struct btrfs_root_item, generation, 160);
UBT_CHECK_OFF(struct btrfs_root_item, root_dirid, 168);
UBT_CHECK_OFF(struct btrfs_root_item, bytenr, 176);
UBT_CHECK_OFF(struct btrfs_root_item, byte_limit, 184);
UBT_CHECK_OFF(struct btrfs_root_item, bytes_used, 192);
UBT_CHECK_OFF(struct btrfs_root_item, last_snapshot, 200);
UBT_CHECK_OFF(struct btrfs_root_item, flags, 208);
UBT_CHECK_OFF(struct btrfs_root_item, refs, 216);
UBT_CHECK_OFF(struct btrfs_root_item, drop_progress, 220);
UBT_CHECK_OFF(struct btrfs_root_item, drop_level, 237);
UBT_CHECK_OFF(struct btrfs_root_item, level, 238);
UBT_CHECK_OFF(struct btrfs_root_item, generation_v2, 239);
UBT_CHECK_OFF(struct btrfs_root_item, uuid, 247);
UBT_CHECK_OFF(struct btrfs_root_item, parent_uuid, 263);
UBT_CHECK_OFF(struct btrfs_root_item, received_uuid, 279);
UBT_CHECK_OFF(struct btrfs_root_item, ctransid, 295);
UBT_CHECK_OFF(struct btrfs_root_item, otransid, 303);
UBT_CHECK_OFF(struct btrfs_root_item, stransid, 311);
UBT_CHECK_OFF(struct btrfs_root_item, rtransid, 319);
UBT_CHECK_OFF(struct btrfs_root_item, ctime, 327);
UBT_CHECK_OFF(struct btrfs_root_item, otime, 339);
UBT_CHECK_OFF(struct btrfs_root_item, stime, 351);
UBT_CHECK_OFF(struct btrfs_root_item, rtime, 363);
UBT_CHECK_OFF(struct btrfs_root_item, reserved, 375);

#define BTRFS_ROOT_ITEM_LEGACY_SIZE \
	((uint32_t)offsetof(struct btrfs_root_item, generation_v2))

BTRFS_PTRGET(root, struct btrfs_root_item, inode, struct btrfs_inode_item)
BTRFS_SETGET(root, struct btrfs_root_item, generation, 64)
BTRFS_SETGET(root, struct btrfs_root_item, root_dirid, 64)
BTRFS_SETGET(root, struct btrfs_root_item, bytenr, 64)
BTRFS_SETGET(root, struct btrfs_root_item, byte_limit, 64)
BTRFS_SETGET(root, struct btrfs_root_item, bytes_used, 64)
BTRFS_SETGET(root, struct btrfs_root_item, last_snapshot, 64)
BTRFS_SETGET(root, struct btrfs_root_item, flags, 64)
BTRFS_SETGET(root, struct btrfs_root_item, refs, 32)
BTRFS_PTRGET(root, struct btrfs_root_item, drop_progress, struct btrfs_disk_key)
BTRFS_SETGET(root, struct btrfs_root_item, drop_level, 8)
BTRFS_SETGET(root, struct btrfs_root_item, level, 8)
BTRFS_SETGET(root, struct btrfs_root_item, generation_v2, 64)
BTRFS_PTRGET(root, struct btrfs_root_item, uuid, uint8_t)
BTRFS_PTRGET(root, struct btrfs_root_item, parent_uuid, uint8_t)
BTRFS_PTRGET(root, struct btrfs_root_item, received_uuid, uint8_t)
BTRFS_SETGET(root, struct btrfs_root_item, ctransid, 64)
BTRFS_SETGET(root, struct btrfs_root_item, otransid, 64)
BTRFS_SETGET(root, struct btrfs_root_item, stransid, 64)
BTRFS_SETGET(root, struct btrfs_root_item, rtransid, 64)
BTRFS_PTRGET(root, struct btrfs_root_item, ctime, struct btrfs_timespec)
BTRFS_PTRGET(root, struct btrfs_root_item, otime, struct btrfs_timespec)
BTRFS_PTRGET(root, struct btrfs_root_item, stime, struct btrfs_timespec)
BTRFS_PTRGET(root, struct btrfs_root_item, rtime, struct btrfs_timespec)

/*
 * ROOT_REF (parent tree, ROOT_REF, child tree) and ROOT_BACKREF (child tree,
 * ROOT_BACKREF, parent tree): 18-byte header followed by name_len bytes.
 */
struct btrfs_root_ref {
	uint64_t dirid;		/*  0: directory in the parent */
	uint64_t sequence;	/*  8: its DIR_INDEX */
	uint16_t name_len;	/* 16 */
	/* name follows at 18 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_root_ref, 18);
UBT_CHECK_OFF(struct btrfs_root_ref, dirid, 0);
UBT_CHECK_OFF(struct btrfs_root_ref, sequence, 8);
UBT_CHECK_OFF(struct btrfs_root_ref, name_len, 16);

BTRFS_SETGET(root_ref, struct btrfs_root_ref, dirid, 64)
BTRFS_SETGET(root_ref, struct btrfs_root_ref, sequence, 64)
BTRFS_SETGET(root_ref, struct btrfs_root_ref, name_len, 16)

static inline uint8_t *btrfs_root_ref_name(const struct btrfs_root_ref *r)
{
	return (uint8_t *)(uintptr_t)r + sizeof(*r);
}

/* ======================================================================== */
/* Extent tree: extent items and back references                            */
/* ======================================================================== */

#define BTRFS_EXTENT_FLAG_DATA		(1ULL << 0)
#define BTRFS_EXTENT_FLAG_TREE_BLOCK	(1ULL << 1)
#define BTRFS_BLOCK_FLAG_FULL_BACKREF	(1ULL << 8)	/* tree blocks only */
#define BTRFS_EXTENT_FLAG_SUPER		(1ULL << 48)	/* scrub, in memory */

/*
 * EXTENT_ITEM (bytenr, EXTENT_ITEM, length) and, with SKINNY_METADATA,
 * METADATA_ITEM (bytenr, METADATA_ITEM, level): 24 bytes, then (for a
 * non-skinny tree block) a btrfs_tree_block_info, then inline refs.
 */
struct btrfs_extent_item {
	uint64_t refs;		/*  0 */
	uint64_t generation;	/*  8 */
	uint64_t flags;		/* 16: BTRFS_EXTENT_FLAG_* */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_extent_item, 24);
UBT_CHECK_OFF(struct btrfs_extent_item, refs, 0);
UBT_CHECK_OFF(struct btrfs_extent_item, generation, 8);
UBT_CHECK_OFF(struct btrfs_extent_item, flags, 16);

BTRFS_SETGET(extent, struct btrfs_extent_item, refs, 64)
BTRFS_SETGET(extent, struct btrfs_extent_item, generation, 64)
BTRFS_SETGET(extent, struct btrfs_extent_item, flags, 64)

/* Pre-2.6.31 extent item (item size 4); only ever to be detected/refused. */
struct btrfs_extent_item_v0 {
	uint32_t refs;		/*  0 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_extent_item_v0, 4);
UBT_CHECK_OFF(struct btrfs_extent_item_v0, refs, 0);

BTRFS_SETGET(extent_v0, struct btrfs_extent_item_v0, refs, 32)

/* Follows a non-skinny tree-block extent item: 18 bytes. */
struct btrfs_tree_block_info {
	struct btrfs_disk_key key;	/*  0: first key of the block */
	uint8_t level;			/* 17 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_tree_block_info, 18);
UBT_CHECK_OFF(struct btrfs_tree_block_info, key, 0);
UBT_CHECK_OFF(struct btrfs_tree_block_info, level, 17);

BTRFS_PTRGET(tree_block_info, struct btrfs_tree_block_info, key, struct btrfs_disk_key)
BTRFS_SETGET(tree_block_info, struct btrfs_tree_block_info, level, 8)

/*
 * Inline back reference: 9 bytes, type = TREE_BLOCK_REF / SHARED_BLOCK_REF /
 * EXTENT_DATA_REF / SHARED_DATA_REF / EXTENT_OWNER_REF key type.
 *  - TREE_BLOCK_REF:   offset = root objectid                    (9 bytes)
 *  - SHARED_BLOCK_REF: offset = parent block bytenr              (9 bytes)
 *  - SHARED_DATA_REF:  offset = parent bytenr, then shared_data_ref (13)
 *  - EXTENT_DATA_REF:  no offset; an extent_data_ref starts at byte 1 (29)
 *  - EXTENT_OWNER_REF: offset = owning root (simple quota; must come first) (9)
 */
struct btrfs_extent_inline_ref {
	uint8_t type;		/*  0 */
	uint64_t offset;	/*  1 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_extent_inline_ref, 9);
UBT_CHECK_OFF(struct btrfs_extent_inline_ref, type, 0);
UBT_CHECK_OFF(struct btrfs_extent_inline_ref, offset, 1);

BTRFS_SETGET(extent_inline_ref, struct btrfs_extent_inline_ref, type, 8)
BTRFS_SETGET(extent_inline_ref, struct btrfs_extent_inline_ref, offset, 64)

/*
 * EXTENT_DATA_REF key item (bytenr, EXTENT_DATA_REF, hash(root,ino,offset))
 * and inline body: 28 bytes.
 */
struct btrfs_extent_data_ref {
	uint64_t root;		/*  0 */
	uint64_t objectid;	/*  8: inode number */
	uint64_t offset;	/* 16: file offset - extent offset */
	uint32_t count;		/* 24 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_extent_data_ref, 28);
UBT_CHECK_OFF(struct btrfs_extent_data_ref, root, 0);
UBT_CHECK_OFF(struct btrfs_extent_data_ref, objectid, 8);
UBT_CHECK_OFF(struct btrfs_extent_data_ref, offset, 16);
UBT_CHECK_OFF(struct btrfs_extent_data_ref, count, 24);

BTRFS_SETGET(extent_data_ref, struct btrfs_extent_data_ref, root, 64)
BTRFS_SETGET(extent_data_ref, struct btrfs_extent_data_ref, objectid, 64)
BTRFS_SETGET(extent_data_ref, struct btrfs_extent_data_ref, offset, 64)
BTRFS_SETGET(extent_data_ref, struct btrfs_extent_data_ref, count, 32)

/* SHARED_DATA_REF key item (bytenr, SHARED_DATA_REF, parent): 4 bytes. */
struct btrfs_shared_data_ref {
	uint32_t count;		/*  0 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_shared_data_ref, 4);
UBT_CHECK_OFF(struct btrfs_shared_data_ref, count, 0);

BTRFS_SETGET(shared_data_ref, struct btrfs_shared_data_ref, count, 32)

/* EXTENT_OWNER_REF key item (simple quotas): 8 bytes. */
struct btrfs_extent_owner_ref {
	uint64_t root_id;	/*  0 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_extent_owner_ref, 8);
UBT_CHECK_OFF(struct btrfs_extent_owner_ref, root_id, 0);

BTRFS_SETGET(extent_owner_ref, struct btrfs_extent_owner_ref, root_id, 64)

/*
 * TREE_BLOCK_REF (bytenr, TREE_BLOCK_REF, root) and SHARED_BLOCK_REF
 * (bytenr, SHARED_BLOCK_REF, parent) key items have no body.
 */

/* Size of an inline ref of @type, 0 if @type is not an inline ref type. */
static inline unsigned int btrfs_extent_inline_ref_size(uint8_t type)
{
	switch (type) {
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_EXTENT_OWNER_REF_KEY:
		return (unsigned int)sizeof(struct btrfs_extent_inline_ref);
	case BTRFS_SHARED_DATA_REF_KEY:
		return (unsigned int)(sizeof(struct btrfs_extent_inline_ref) +
				      sizeof(struct btrfs_shared_data_ref));
	case BTRFS_EXTENT_DATA_REF_KEY:
		return (unsigned int)(offsetof(struct btrfs_extent_inline_ref, offset) +
				      sizeof(struct btrfs_extent_data_ref));
	default:
		return 0;
	}
}

/* The extent_data_ref embedded in an EXTENT_DATA_REF inline ref. */
static inline struct btrfs_extent_data_ref *
btrfs_extent_inline_ref_data_ref(const struct btrfs_extent_inline_ref *iref)
{
	return (struct btrfs_extent_data_ref *)(void *)
		UBT_MEMBER_PTR(struct btrfs_extent_inline_ref, iref, offset);
}

/* The shared_data_ref following a SHARED_DATA_REF inline ref. */
static inline struct btrfs_shared_data_ref *
btrfs_extent_inline_ref_shared_data_ref(const struct btrfs_extent_inline_ref *iref)
{
	return (struct btrfs_shared_data_ref *)(void *)
		((uint8_t *)(uintptr_t)iref + sizeof(*iref));
}

/* ======================================================================== */
/* File extents (fs trees) and checksums (csum tree)                        */
/* ======================================================================== */

#define BTRFS_FILE_EXTENT_INLINE	0
#define BTRFS_FILE_EXTENT_REG		1
#define BTRFS_FILE_EXTENT_PREALLOC	2
#define BTRFS_NR_FILE_EXTENT_TYPES	3

#define BTRFS_COMPRESS_NONE		0
#define BTRFS_COMPRESS_ZLIB		1
#define BTRFS_COMPRESS_LZO		2
#define BTRFS_COMPRESS_ZSTD		3
#define BTRFS_NR_COMPRESS_TYPES		4

#define BTRFS_ENCRYPTION_NONE		0

/*
 * EXTENT_DATA (ino, EXTENT_DATA, file offset): 53 bytes.  For INLINE
 * extents the item ends after `type`: file data (possibly compressed) starts
 * at byte 21 (btrfs_file_extent_inline_start()) and runs to the item end.
 */
struct btrfs_file_extent_item {
	uint64_t generation;		/*  0 */
	uint64_t ram_bytes;		/*  8: decompressed size */
	uint8_t compression;		/* 16: BTRFS_COMPRESS_* */
	uint8_t encryption;		/* 17 */
	uint16_t other_encoding;	/* 18 */
	uint8_t type;			/* 20: BTRFS_FILE_EXTENT_* */
	uint64_t disk_bytenr;		/* 21: 0 = hole; inline data starts here */
	uint64_t disk_num_bytes;	/* 29 */
	uint64_t offset;		/* 37: into the decompressed extent */
	uint64_t num_bytes;		/* 45 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_file_extent_item, 53);
UBT_CHECK_OFF(struct btrfs_file_extent_item, generation, 0);
UBT_CHECK_OFF(struct btrfs_file_extent_item, ram_bytes, 8);
UBT_CHECK_OFF(struct btrfs_file_extent_item, compression, 16);
UBT_CHECK_OFF(struct btrfs_file_extent_item, encryption, 17);
UBT_CHECK_OFF(struct btrfs_file_extent_item, other_encoding, 18);
UBT_CHECK_OFF(struct btrfs_file_extent_item, type, 20);
UBT_CHECK_OFF(struct btrfs_file_extent_item, disk_bytenr, 21);
UBT_CHECK_OFF(struct btrfs_file_extent_item, disk_num_bytes, 29);
UBT_CHECK_OFF(struct btrfs_file_extent_item, offset, 37);
UBT_CHECK_OFF(struct btrfs_file_extent_item, num_bytes, 45);

BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, generation, 64)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, ram_bytes, 64)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, compression, 8)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, encryption, 8)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, other_encoding, 16)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, type, 8)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, disk_bytenr, 64)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, disk_num_bytes, 64)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, offset, 64)
BTRFS_SETGET(file_extent, struct btrfs_file_extent_item, num_bytes, 64)

/* Byte offset of inline data inside an EXTENT_DATA item (21). */
static inline size_t btrfs_file_extent_inline_start(void)
{
	return offsetof(struct btrfs_file_extent_item, disk_bytenr);
}

/* Item size of an inline extent carrying @datasize bytes. */
static inline size_t btrfs_file_extent_calc_inline_size(size_t datasize)
{
	return btrfs_file_extent_inline_start() + datasize;
}

/* Stored (possibly compressed) inline data length of an item of @item_size. */
static inline size_t btrfs_file_extent_inline_len(size_t item_size)
{
	return item_size - btrfs_file_extent_inline_start();
}

static inline uint8_t *btrfs_file_extent_inline_data(const struct btrfs_file_extent_item *fi)
{
	return UBT_MEMBER_PTR(struct btrfs_file_extent_item, fi, disk_bytenr);
}

/*
 * EXTENT_CSUM (EXTENT_CSUM_OBJECTID, EXTENT_CSUM, logical bytenr): no fixed
 * fields (so no struct here) - the body is an array of checksums of
 * btrfs_super_csum_size() bytes, one per sector starting at key.offset.
 */
static inline uint64_t btrfs_csum_item_bytes(uint32_t item_size,
					     unsigned int csum_size,
					     uint32_t sectorsize)
{
	return csum_size ? (uint64_t)(item_size / csum_size) * sectorsize : 0;
}

/* ======================================================================== */
/* Device tree: dev extents, dev stats, dev replace                         */
/* ======================================================================== */

/* DEV_EXTENT (devid, DEV_EXTENT, physical start): 48 bytes. */
struct btrfs_dev_extent {
	uint64_t chunk_tree;			/*  0: CHUNK_TREE_OBJECTID */
	uint64_t chunk_objectid;		/*  8: FIRST_CHUNK_TREE_OBJECTID */
	uint64_t chunk_offset;			/* 16: chunk logical start */
	uint64_t length;			/* 24 */
	uint8_t chunk_tree_uuid[BTRFS_UUID_SIZE]; /* 32 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_dev_extent, 48);
UBT_CHECK_OFF(struct btrfs_dev_extent, chunk_tree, 0);
UBT_CHECK_OFF(struct btrfs_dev_extent, chunk_objectid, 8);
UBT_CHECK_OFF(struct btrfs_dev_extent, chunk_offset, 16);
UBT_CHECK_OFF(struct btrfs_dev_extent, length, 24);
UBT_CHECK_OFF(struct btrfs_dev_extent, chunk_tree_uuid, 32);

BTRFS_SETGET(dev_extent, struct btrfs_dev_extent, chunk_tree, 64)
BTRFS_SETGET(dev_extent, struct btrfs_dev_extent, chunk_objectid, 64)
BTRFS_SETGET(dev_extent, struct btrfs_dev_extent, chunk_offset, 64)
BTRFS_SETGET(dev_extent, struct btrfs_dev_extent, length, 64)
BTRFS_PTRGET(dev_extent, struct btrfs_dev_extent, chunk_tree_uuid, uint8_t)

/* Indexes into btrfs_dev_stats_item.values. */
#define BTRFS_DEV_STAT_WRITE_ERRS	0
#define BTRFS_DEV_STAT_READ_ERRS	1
#define BTRFS_DEV_STAT_FLUSH_ERRS	2
#define BTRFS_DEV_STAT_CORRUPTION_ERRS	3
#define BTRFS_DEV_STAT_GENERATION_ERRS	4

/*
 * Device stats: PERSISTENT_ITEM (DEV_STATS_OBJECTID, 249, devid): 40 bytes.
 * The item may be shorter (older) or longer (newer); read only the values
 * that fit in the item size.
 */
struct btrfs_dev_stats_item {
	uint64_t values[BTRFS_DEV_STAT_VALUES_MAX];	/*  0 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_dev_stats_item, 40);
UBT_CHECK_OFF(struct btrfs_dev_stats_item, values, 0);

static inline uint64_t btrfs_dev_stats_value(const struct btrfs_dev_stats_item *s,
					     unsigned int i)
{
	return ubt_get_le64(UBT_MEMBER_PTR(struct btrfs_dev_stats_item, s, values) +
			    (size_t)i * 8);
}

static inline void btrfs_set_dev_stats_value(struct btrfs_dev_stats_item *s,
					     unsigned int i, uint64_t v)
{
	ubt_put_le64(UBT_MEMBER_PTR(struct btrfs_dev_stats_item, s, values) +
		     (size_t)i * 8, v);
}

#define BTRFS_DEV_REPLACE_ITEM_CONT_READING_FROM_SRCDEV_MODE_ALWAYS	0
#define BTRFS_DEV_REPLACE_ITEM_CONT_READING_FROM_SRCDEV_MODE_AVOID	1

#define BTRFS_IOCTL_DEV_REPLACE_STATE_NEVER_STARTED	0
#define BTRFS_IOCTL_DEV_REPLACE_STATE_STARTED		1
#define BTRFS_IOCTL_DEV_REPLACE_STATE_FINISHED		2
#define BTRFS_IOCTL_DEV_REPLACE_STATE_CANCELED		3
#define BTRFS_IOCTL_DEV_REPLACE_STATE_SUSPENDED		4

/* DEV_REPLACE (0, DEV_REPLACE, 0) in the device tree: 72 bytes. */
struct btrfs_dev_replace_item {
	uint64_t src_devid;				/*  0 */
	uint64_t cursor_left;				/*  8 */
	uint64_t cursor_right;				/* 16 */
	uint64_t cont_reading_from_srcdev_mode;		/* 24 */
	uint64_t replace_state;				/* 32 */
	uint64_t time_started;				/* 40 */
	uint64_t time_stopped;				/* 48 */
	uint64_t num_write_errors;			/* 56 */
	uint64_t num_uncorrectable_read_errors;		/* 64 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_dev_replace_item, 72);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, src_devid, 0);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, cursor_left, 8);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, cursor_right, 16);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, cont_reading_from_srcdev_mode, 24);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, replace_state, 32);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, time_started, 40);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, time_stopped, 48);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, num_write_errors, 56);
UBT_CHECK_OFF(struct btrfs_dev_replace_item, num_uncorrectable_read_errors, 64);

BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, src_devid, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, cursor_left, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, cursor_right, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, cont_reading_from_srcdev_mode, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, replace_state, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, time_started, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, time_stopped, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, num_write_errors, 64)
BTRFS_SETGET(dev_replace, struct btrfs_dev_replace_item, num_uncorrectable_read_errors, 64)

/* ======================================================================== */
/* Block groups and free space                                              */
/* ======================================================================== */

static inline uint64_t btrfs_chunk_to_extended(uint64_t flags)
{
	if ((flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) == 0)
		flags |= BTRFS_AVAIL_ALLOC_BIT_SINGLE;
	return flags;
}

static inline uint64_t btrfs_extended_to_chunk(uint64_t flags)
{
	return flags & ~BTRFS_AVAIL_ALLOC_BIT_SINGLE;
}

/*
 * BLOCK_GROUP_ITEM (logical start, BLOCK_GROUP_ITEM, length), in the extent
 * tree or, with BLOCK_GROUP_TREE, in the block group tree: 24 bytes.
 */
struct btrfs_block_group_item {
	uint64_t used;			/*  0 */
	uint64_t chunk_objectid;	/*  8: FIRST_CHUNK_TREE_OBJECTID */
	uint64_t flags;			/* 16: BTRFS_BLOCK_GROUP_* */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_block_group_item, 24);
UBT_CHECK_OFF(struct btrfs_block_group_item, used, 0);
UBT_CHECK_OFF(struct btrfs_block_group_item, chunk_objectid, 8);
UBT_CHECK_OFF(struct btrfs_block_group_item, flags, 16);

BTRFS_SETGET(block_group, struct btrfs_block_group_item, used, 64)
BTRFS_SETGET(block_group, struct btrfs_block_group_item, chunk_objectid, 64)
BTRFS_SETGET(block_group, struct btrfs_block_group_item, flags, 64)

#define BTRFS_FREE_SPACE_USING_BITMAPS	(1ULL << 0)

/*
 * Free space tree: FREE_SPACE_INFO (bg start, FREE_SPACE_INFO, bg length):
 * 8 bytes.  FREE_SPACE_EXTENT (start, FREE_SPACE_EXTENT, length) has no
 * body; FREE_SPACE_BITMAP (start, FREE_SPACE_BITMAP, length) holds
 * length / sectorsize bits, LSB first, set = free.
 */
struct btrfs_free_space_info {
	uint32_t extent_count;	/*  0 */
	uint32_t flags;		/*  4: BTRFS_FREE_SPACE_USING_BITMAPS */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_free_space_info, 8);
UBT_CHECK_OFF(struct btrfs_free_space_info, extent_count, 0);
UBT_CHECK_OFF(struct btrfs_free_space_info, flags, 4);

BTRFS_SETGET(free_space_info, struct btrfs_free_space_info, extent_count, 32)
BTRFS_SETGET(free_space_info, struct btrfs_free_space_info, flags, 32)

/* Free space cache v1 (legacy): entry types in the cache inode's pages. */
#define BTRFS_FREE_SPACE_EXTENT		1
#define BTRFS_FREE_SPACE_BITMAP		2

/* v1 cache page entry: 17 bytes. */
struct btrfs_free_space_entry {
	uint64_t offset;	/*  0 */
	uint64_t bytes;		/*  8 */
	uint8_t type;		/* 16 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_free_space_entry, 17);
UBT_CHECK_OFF(struct btrfs_free_space_entry, offset, 0);
UBT_CHECK_OFF(struct btrfs_free_space_entry, bytes, 8);
UBT_CHECK_OFF(struct btrfs_free_space_entry, type, 16);

BTRFS_SETGET(free_space_entry, struct btrfs_free_space_entry, offset, 64)
BTRFS_SETGET(free_space_entry, struct btrfs_free_space_entry, bytes, 64)
BTRFS_SETGET(free_space_entry, struct btrfs_free_space_entry, type, 8)

/*
 * v1 cache header in the root tree: (FREE_SPACE_OBJECTID, 0, bg start):
 * 41 bytes.  location is the key of the cache inode.
 */
struct btrfs_free_space_header {
	struct btrfs_disk_key location;	/*  0 */
	uint64_t generation;		/* 17 */
	uint64_t num_entries;		/* 25 */
	uint64_t num_bitmaps;		/* 33 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_free_space_header, 41);
UBT_CHECK_OFF(struct btrfs_free_space_header, location, 0);
UBT_CHECK_OFF(struct btrfs_free_space_header, generation, 17);
UBT_CHECK_OFF(struct btrfs_free_space_header, num_entries, 25);
UBT_CHECK_OFF(struct btrfs_free_space_header, num_bitmaps, 33);

BTRFS_PTRGET(free_space_header, struct btrfs_free_space_header, location, struct btrfs_disk_key)
BTRFS_SETGET(free_space_header, struct btrfs_free_space_header, generation, 64)
BTRFS_SETGET(free_space_header, struct btrfs_free_space_header, num_entries, 64)
BTRFS_SETGET(free_space_header, struct btrfs_free_space_header, num_bitmaps, 64)

/* ======================================================================== */
/* Quota tree                                                               */
/* ======================================================================== */

#define BTRFS_QGROUP_LEVEL_SHIFT		48

static inline uint16_t btrfs_qgroup_level(uint64_t qgroupid)
{
	return (uint16_t)(qgroupid >> BTRFS_QGROUP_LEVEL_SHIFT);
}

static inline uint64_t btrfs_qgroup_subvolid(uint64_t qgroupid)
{
	return qgroupid & ((1ULL << BTRFS_QGROUP_LEVEL_SHIFT) - 1);
}

static inline uint64_t btrfs_qgroupid(uint16_t level, uint64_t id)
{
	return ((uint64_t)level << BTRFS_QGROUP_LEVEL_SHIFT) | btrfs_qgroup_subvolid(id);
}

#define BTRFS_QGROUP_STATUS_FLAG_ON		(1ULL << 0)
#define BTRFS_QGROUP_STATUS_FLAG_RESCAN		(1ULL << 1)
#define BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT	(1ULL << 2)
#define BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE	(1ULL << 3)
#define BTRFS_QGROUP_STATUS_FLAGS_MASK		0xfULL
#define BTRFS_QGROUP_STATUS_VERSION		1

#define BTRFS_QGROUP_LIMIT_MAX_RFER		(1ULL << 0)
#define BTRFS_QGROUP_LIMIT_MAX_EXCL		(1ULL << 1)
#define BTRFS_QGROUP_LIMIT_RSV_RFER		(1ULL << 2)
#define BTRFS_QGROUP_LIMIT_RSV_EXCL		(1ULL << 3)
#define BTRFS_QGROUP_LIMIT_RFER_CMPR		(1ULL << 4)
#define BTRFS_QGROUP_LIMIT_EXCL_CMPR		(1ULL << 5)

/*
 * QGROUP_STATUS (0, QGROUP_STATUS, 0): 40 bytes.  enable_gen exists only
 * with SIMPLE_QUOTA; items written without it are 32 bytes
 * (BTRFS_QGROUP_STATUS_ITEM_V1_SIZE) - check the item size before reading it.
 */
struct btrfs_qgroup_status_item {
	uint64_t version;	/*  0 */
	uint64_t generation;	/*  8 */
	uint64_t flags;		/* 16 */
	uint64_t rescan;	/* 24: rescan progress (logical) */
	uint64_t enable_gen;	/* 32: simple quota only */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_qgroup_status_item, 40);
UBT_CHECK_OFF(struct btrfs_qgroup_status_item, version, 0);
UBT_CHECK_OFF(struct btrfs_qgroup_status_item, generation, 8);
UBT_CHECK_OFF(struct btrfs_qgroup_status_item, flags, 16);
UBT_CHECK_OFF(struct btrfs_qgroup_status_item, rescan, 24);
UBT_CHECK_OFF(struct btrfs_qgroup_status_item, enable_gen, 32);

#define BTRFS_QGROUP_STATUS_ITEM_V1_SIZE \
	((uint32_t)offsetof(struct btrfs_qgroup_status_item, enable_gen))

BTRFS_SETGET(qgroup_status, struct btrfs_qgroup_status_item, version, 64)
BTRFS_SETGET(qgroup_status, struct btrfs_qgroup_status_item, generation, 64)
BTRFS_SETGET(qgroup_status, struct btrfs_qgroup_status_item, flags, 64)
BTRFS_SETGET(qgroup_status, struct btrfs_qgroup_status_item, rescan, 64)
BTRFS_SETGET(qgroup_status, struct btrfs_qgroup_status_item, enable_gen, 64)

/* QGROUP_INFO (0, QGROUP_INFO, qgroupid): 40 bytes. */
struct btrfs_qgroup_info_item {
	uint64_t generation;	/*  0 */
	uint64_t rfer;		/*  8 */
	uint64_t rfer_cmpr;	/* 16 */
	uint64_t excl;		/* 24 */
	uint64_t excl_cmpr;	/* 32 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_qgroup_info_item, 40);
UBT_CHECK_OFF(struct btrfs_qgroup_info_item, generation, 0);
UBT_CHECK_OFF(struct btrfs_qgroup_info_item, rfer, 8);
UBT_CHECK_OFF(struct btrfs_qgroup_info_item, rfer_cmpr, 16);
UBT_CHECK_OFF(struct btrfs_qgroup_info_item, excl, 24);
UBT_CHECK_OFF(struct btrfs_qgroup_info_item, excl_cmpr, 32);

BTRFS_SETGET(qgroup_info, struct btrfs_qgroup_info_item, generation, 64)
BTRFS_SETGET(qgroup_info, struct btrfs_qgroup_info_item, rfer, 64)
BTRFS_SETGET(qgroup_info, struct btrfs_qgroup_info_item, rfer_cmpr, 64)
BTRFS_SETGET(qgroup_info, struct btrfs_qgroup_info_item, excl, 64)
BTRFS_SETGET(qgroup_info, struct btrfs_qgroup_info_item, excl_cmpr, 64)

/* QGROUP_LIMIT (0, QGROUP_LIMIT, qgroupid): 40 bytes. */
struct btrfs_qgroup_limit_item {
	uint64_t flags;		/*  0: BTRFS_QGROUP_LIMIT_* */
	uint64_t max_rfer;	/*  8 */
	uint64_t max_excl;	/* 16 */
	uint64_t rsv_rfer;	/* 24 */
	uint64_t rsv_excl;	/* 32 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_qgroup_limit_item, 40);
UBT_CHECK_OFF(struct btrfs_qgroup_limit_item, flags, 0);
UBT_CHECK_OFF(struct btrfs_qgroup_limit_item, max_rfer, 8);
UBT_CHECK_OFF(struct btrfs_qgroup_limit_item, max_excl, 16);
UBT_CHECK_OFF(struct btrfs_qgroup_limit_item, rsv_rfer, 24);
UBT_CHECK_OFF(struct btrfs_qgroup_limit_item, rsv_excl, 32);

BTRFS_SETGET(qgroup_limit, struct btrfs_qgroup_limit_item, flags, 64)
BTRFS_SETGET(qgroup_limit, struct btrfs_qgroup_limit_item, max_rfer, 64)
BTRFS_SETGET(qgroup_limit, struct btrfs_qgroup_limit_item, max_excl, 64)
BTRFS_SETGET(qgroup_limit, struct btrfs_qgroup_limit_item, rsv_rfer, 64)
BTRFS_SETGET(qgroup_limit, struct btrfs_qgroup_limit_item, rsv_excl, 64)

/* QGROUP_RELATION (child, 246, parent) and (parent, 246, child): no body. */

/* ======================================================================== */
/* Balance (root tree)                                                      */
/* ======================================================================== */

#define BTRFS_BALANCE_DATA		(1ULL << 0)
#define BTRFS_BALANCE_SYSTEM		(1ULL << 1)
#define BTRFS_BALANCE_METADATA		(1ULL << 2)
#define BTRFS_BALANCE_FORCE		(1ULL << 3)
#define BTRFS_BALANCE_RESUME		(1ULL << 4)

#define BTRFS_BALANCE_ARGS_PROFILES	(1ULL << 0)
#define BTRFS_BALANCE_ARGS_USAGE	(1ULL << 1)
#define BTRFS_BALANCE_ARGS_DEVID	(1ULL << 2)
#define BTRFS_BALANCE_ARGS_DRANGE	(1ULL << 3)
#define BTRFS_BALANCE_ARGS_VRANGE	(1ULL << 4)
#define BTRFS_BALANCE_ARGS_LIMIT	(1ULL << 5)
#define BTRFS_BALANCE_ARGS_LIMIT_RANGE	(1ULL << 6)
#define BTRFS_BALANCE_ARGS_STRIPES_RANGE (1ULL << 7)
#define BTRFS_BALANCE_ARGS_CONVERT	(1ULL << 8)
#define BTRFS_BALANCE_ARGS_SOFT		(1ULL << 9)
#define BTRFS_BALANCE_ARGS_USAGE_RANGE	(1ULL << 10)

/* Filter set for one block group type: 136 bytes. */
struct btrfs_disk_balance_args {
	uint64_t profiles;			/*   0 */
	union {
		uint64_t usage;			/*   8 */
		struct {
			uint32_t usage_min;	/*   8 */
			uint32_t usage_max;	/*  12 */
		} __attribute__((packed));
	} __attribute__((packed));
	uint64_t devid;				/*  16 */
	uint64_t pstart;			/*  24 */
	uint64_t pend;				/*  32 */
	uint64_t vstart;			/*  40 */
	uint64_t vend;				/*  48 */
	uint64_t target;			/*  56 */
	uint64_t flags;				/*  64: BTRFS_BALANCE_ARGS_* */
	union {
		uint64_t limit;			/*  72 */
		struct {
			uint32_t limit_min;	/*  72 */
			uint32_t limit_max;	/*  76 */
		} __attribute__((packed));
	} __attribute__((packed));
	uint32_t stripes_min;			/*  80 */
	uint32_t stripes_max;			/*  84 */
	uint64_t unused[6];			/*  88 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_disk_balance_args, 136);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, profiles, 0);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, usage, 8);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, usage_min, 8);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, usage_max, 12);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, devid, 16);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, pstart, 24);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, pend, 32);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, vstart, 40);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, vend, 48);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, target, 56);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, flags, 64);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, limit, 72);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, limit_min, 72);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, limit_max, 76);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, stripes_min, 80);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, stripes_max, 84);
UBT_CHECK_OFF(struct btrfs_disk_balance_args, unused, 88);

BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, profiles, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, usage, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, usage_min, 32)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, usage_max, 32)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, devid, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, pstart, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, pend, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, vstart, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, vend, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, target, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, flags, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, limit, 64)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, limit_min, 32)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, limit_max, 32)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, stripes_min, 32)
BTRFS_SETGET(balance_args, struct btrfs_disk_balance_args, stripes_max, 32)

/*
 * Balance status: TEMPORARY_ITEM (BALANCE_OBJECTID, 248, 0) in the root
 * tree: 448 bytes.
 */
struct btrfs_balance_item {
	uint64_t flags;				/*   0: BTRFS_BALANCE_* */
	struct btrfs_disk_balance_args data;	/*   8 */
	struct btrfs_disk_balance_args meta;	/* 144 */
	struct btrfs_disk_balance_args sys;	/* 280 */
	uint64_t unused[4];			/* 416 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_balance_item, 448);
UBT_CHECK_OFF(struct btrfs_balance_item, flags, 0);
UBT_CHECK_OFF(struct btrfs_balance_item, data, 8);
UBT_CHECK_OFF(struct btrfs_balance_item, meta, 144);
UBT_CHECK_OFF(struct btrfs_balance_item, sys, 280);
UBT_CHECK_OFF(struct btrfs_balance_item, unused, 416);

BTRFS_SETGET(balance, struct btrfs_balance_item, flags, 64)
BTRFS_PTRGET(balance, struct btrfs_balance_item, data, struct btrfs_disk_balance_args)
BTRFS_PTRGET(balance, struct btrfs_balance_item, meta, struct btrfs_disk_balance_args)
BTRFS_PTRGET(balance, struct btrfs_balance_item, sys, struct btrfs_disk_balance_args)

/* ======================================================================== */
/* fs-verity (fs trees)                                                     */
/* ======================================================================== */

/*
 * VERITY_DESC_ITEM (ino, 36, 0): this 25-byte header; (ino, 36, n >= 1):
 * the raw fs-verity descriptor bytes.  VERITY_MERKLE_ITEM (ino, 37, offset):
 * raw Merkle tree bytes.
 */
struct btrfs_verity_descriptor_item {
	uint64_t size;		/*  0: descriptor size in bytes */
	uint64_t reserved[2];	/*  8 */
	uint8_t encryption;	/* 24 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_verity_descriptor_item, 25);
UBT_CHECK_OFF(struct btrfs_verity_descriptor_item, size, 0);
UBT_CHECK_OFF(struct btrfs_verity_descriptor_item, reserved, 8);
UBT_CHECK_OFF(struct btrfs_verity_descriptor_item, encryption, 24);

BTRFS_SETGET(verity_desc, struct btrfs_verity_descriptor_item, size, 64)
BTRFS_SETGET(verity_desc, struct btrfs_verity_descriptor_item, encryption, 8)

/* ======================================================================== */
/* RAID stripe tree (RAID_STRIPE_TREE feature, experimental)                 */
/* ======================================================================== */

/* One device stride of a stripe extent: 16 bytes. */
struct btrfs_raid_stride {
	uint64_t devid;		/*  0 */
	uint64_t physical;	/*  8 */
} __attribute__((packed));
UBT_CHECK_SIZE(struct btrfs_raid_stride, 16);
UBT_CHECK_OFF(struct btrfs_raid_stride, devid, 0);
UBT_CHECK_OFF(struct btrfs_raid_stride, physical, 8);

BTRFS_SETGET(raid_stride, struct btrfs_raid_stride, devid, 64)
BTRFS_SETGET(raid_stride, struct btrfs_raid_stride, physical, 64)

/*
 * RAID_STRIPE (logical, RAID_STRIPE, length): an array of strides, count =
 * item_size / 16 (current kernel format, 6.9+).  NOTE: kernels 6.7/6.8 and
 * progs 6.7 wrote an 8-byte header (u8 encoding, 7 reserved) before the
 * strides; that variant is not described here.
 */
static inline unsigned int btrfs_stripe_extent_num_strides(uint32_t item_size)
{
	return item_size / (uint32_t)sizeof(struct btrfs_raid_stride);
}

static inline struct btrfs_raid_stride *btrfs_stripe_extent_stride(const void *item,
								   unsigned int i)
{
	return (struct btrfs_raid_stride *)(void *)((uint8_t *)(uintptr_t)item +
						    (size_t)i * sizeof(struct btrfs_raid_stride));
}

/* ======================================================================== */
/* UUID tree                                                                */
/* ======================================================================== */

/*
 * UUID_KEY_SUBVOL / UUID_KEY_RECEIVED_SUBVOL items: key objectid = first 8
 * uuid bytes read as le64, key offset = last 8 bytes as le64; the body is an
 * array of le64 subvolume ids (item size a multiple of 8).
 */
static inline void btrfs_uuid_to_key(const uint8_t *uuid, uint8_t type,
				     struct btrfs_key *key)
{
	key->objectid = ubt_get_le64(uuid);
	key->type = type;
	key->offset = ubt_get_le64(uuid + 8);
}

static inline uint64_t btrfs_uuid_item_subvol(const void *item, unsigned int i)
{
	return ubt_get_le64((const uint8_t *)item + (size_t)i * 8);
}

static inline void btrfs_set_uuid_item_subvol(void *item, unsigned int i,
					      uint64_t subvol)
{
	ubt_put_le64((uint8_t *)item + (size_t)i * 8, subvol);
}

/*
 * Items without a struct:
 *  - STRING_ITEM (debug): raw bytes.
 *  - TEMPORARY_ITEM / PERSISTENT_ITEM: typed by objectid (balance, dev stats).
 *  - TREE_BLOCK_REF, SHARED_BLOCK_REF, QGROUP_RELATION, ORPHAN_ITEM,
 *    FREE_SPACE_EXTENT: empty bodies.
 */


#endif /* UBTRFS_FORMAT_BTRFS_FORMAT_H */
