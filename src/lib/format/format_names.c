/* SPDX-License-Identifier: MIT */
/*
 * format_names.c - names of on-disk values (key types, objectids, flags,
 * checksum and profile names) for dump-super / dump-tree style output.
 *
 * Layer: format, the bottom layer (below volume/ and tree/); depends only on
 * libc and btrfs_format.h.
 * Owns: the name tables and the string builders that reproduce the exact
 * spelling of btrfs-progs 6.2 output (verified against the progs 6.2 binary
 * on crafted superblocks where noted).
 * Invariants: no allocation, no I/O, no global mutable state (thread safe);
 * every buffer-filling function NUL-terminates when len > 0 and returns the
 * untruncated length.
 * Locks: none.
 */
#include "format/format_names.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Bounded string builder                                                   */
/* ------------------------------------------------------------------------ */

struct strbuf {
	char *buf;
	size_t len;	/* capacity including the NUL */
	size_t pos;	/* length the full string would have */
};

static void sb_init(struct strbuf *sb, char *buf, size_t len)
{
	sb->buf = buf;
	sb->len = len;
	sb->pos = 0;
	if (len)
		buf[0] = '\0';
}

static void sb_puts(struct strbuf *sb, const char *s)
{
	size_t n = strlen(s);

	if (sb->pos + 1 < sb->len) {
		size_t room = sb->len - 1 - sb->pos;
		size_t c = n < room ? n : room;

		memcpy(sb->buf + sb->pos, s, c);
		sb->buf[sb->pos + c] = '\0';
	}
	sb->pos += n;
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct strbuf *sb, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	sb_puts(sb, tmp);
}

/* ------------------------------------------------------------------------ */
/* Superblock flag tables (progs 6.2 order and masks)                       */
/* ------------------------------------------------------------------------ */

static const struct btrfs_flag_name super_flag_names[] = {
	{ BTRFS_HEADER_FLAG_WRITTEN, "WRITTEN" },
	{ BTRFS_HEADER_FLAG_RELOC, "RELOC" },
	{ BTRFS_SUPER_FLAG_CHANGING_FSID, "CHANGING_FSID" },
	{ BTRFS_SUPER_FLAG_SEEDING, "SEEDING" },
	{ BTRFS_SUPER_FLAG_METADUMP, "METADUMP" },
	{ BTRFS_SUPER_FLAG_METADUMP_V2, "METADUMP_V2" },
};

/* progs 6.2 does not name CHANGING_FSID_V2, ERROR or the CHANGING_* bits
 * 38-40: they print as "unknown flag". */
const struct btrfs_flag_table btrfs_super_flag_table = {
	super_flag_names,
	sizeof(super_flag_names) / sizeof(super_flag_names[0]),
	BTRFS_HEADER_FLAG_WRITTEN | BTRFS_HEADER_FLAG_RELOC |
		BTRFS_SUPER_FLAG_CHANGING_FSID | BTRFS_SUPER_FLAG_SEEDING |
		BTRFS_SUPER_FLAG_METADUMP | BTRFS_SUPER_FLAG_METADUMP_V2,
};

static const struct btrfs_flag_name compat_ro_flag_names[] = {
	{ BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE, "FREE_SPACE_TREE" },
	{ BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID, "FREE_SPACE_TREE_VALID" },
	{ BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE, "BLOCK_GROUP_TREE" },
};

/* VERITY is known to progs 6.2 but has no name: bit 2 alone prints "( )". */
const struct btrfs_flag_table btrfs_compat_ro_flag_table = {
	compat_ro_flag_names,
	sizeof(compat_ro_flag_names) / sizeof(compat_ro_flag_names[0]),
	BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE |
		BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID |
		BTRFS_FEATURE_COMPAT_RO_VERITY |
		BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE,
};

static const struct btrfs_flag_name incompat_flag_names[] = {
	{ BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF, "MIXED_BACKREF" },
	{ BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL, "DEFAULT_SUBVOL" },
	{ BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS, "MIXED_GROUPS" },
	{ BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO, "COMPRESS_LZO" },
	{ BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD, "COMPRESS_ZSTD" },
	{ BTRFS_FEATURE_INCOMPAT_BIG_METADATA, "BIG_METADATA" },
	{ BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF, "EXTENDED_IREF" },
	{ BTRFS_FEATURE_INCOMPAT_RAID56, "RAID56" },
	{ BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA, "SKINNY_METADATA" },
	{ BTRFS_FEATURE_INCOMPAT_NO_HOLES, "NO_HOLES" },
	{ BTRFS_FEATURE_INCOMPAT_METADATA_UUID, "METADATA_UUID" },
	{ BTRFS_FEATURE_INCOMPAT_RAID1C34, "RAID1C34" },
	{ BTRFS_FEATURE_INCOMPAT_ZONED, "ZONED" },
	{ BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2, "EXTENT_TREE_V2" },
};

/* EXTENT_TREE_V2 is named but, in a non-experimental progs 6.2, unsupported:
 * it also shows up as "unknown flag: 0x2000". */
const struct btrfs_flag_table btrfs_incompat_flag_table = {
	incompat_flag_names,
	sizeof(incompat_flag_names) / sizeof(incompat_flag_names[0]),
	(BTRFS_FEATURE_INCOMPAT_ZONED << 1) - 1,	/* bits 0..12 */
};

size_t btrfs_flag_names(uint64_t flags, const struct btrfs_flag_table *t,
			const char **out, size_t max, uint64_t *unknown)
{
	size_t n = 0;

	for (size_t i = 0; i < t->count; i++) {
		if (!(flags & t->names[i].bit))
			continue;
		if (n < max)
			out[n] = t->names[i].name;
		n++;
	}
	if (unknown)
		*unknown = flags & ~t->supported;
	return n;
}

size_t btrfs_flag_list_str(uint64_t flags, const struct btrfs_flag_table *t,
			   char *buf, size_t len)
{
	struct strbuf sb;
	uint64_t unknown = flags & ~t->supported;
	int first = 1;

	sb_init(&sb, buf, len);
	if (!flags)
		return 0;

	sb_puts(&sb, "\t\t\t( ");
	for (size_t i = 0; i < t->count; i++) {
		const struct btrfs_flag_name *e = &t->names[i];

		if (!(flags & e->bit))
			continue;
		/* progs 6.2: an unsupported name never opens the list */
		if (first && !(e->bit & t->supported))
			continue;
		if (!first)
			sb_puts(&sb, "|\n\t\t\t  ");
		sb_puts(&sb, e->name);
		sb_puts(&sb, " ");
		first = 0;
	}
	if (unknown) {
		if (!first)
			sb_puts(&sb, "|\n\t\t\t  ");
		sb_printf(&sb, "unknown flag: 0x%llx ", (unsigned long long)unknown);
	}
	sb_puts(&sb, ")\n");
	return sb.pos;
}

/* ------------------------------------------------------------------------ */
/* Checksums                                                                */
/* ------------------------------------------------------------------------ */

const char *btrfs_csum_type_name(uint16_t csum_type)
{
	switch (csum_type) {
	case BTRFS_CSUM_TYPE_CRC32:	return "crc32c";
	case BTRFS_CSUM_TYPE_XXHASH:	return "xxhash64";
	case BTRFS_CSUM_TYPE_SHA256:	return "sha256";
	case BTRFS_CSUM_TYPE_BLAKE2:	return "blake2";
	default:			return NULL;
	}
}

/* ------------------------------------------------------------------------ */
/* Keys and objectids                                                       */
/* ------------------------------------------------------------------------ */

static const char *const key_type_names[256] = {
	[BTRFS_INODE_ITEM_KEY] = "INODE_ITEM",
	[BTRFS_INODE_REF_KEY] = "INODE_REF",
	[BTRFS_INODE_EXTREF_KEY] = "INODE_EXTREF",
	[BTRFS_XATTR_ITEM_KEY] = "XATTR_ITEM",
	[BTRFS_VERITY_DESC_ITEM_KEY] = "VERITY_DESC_ITEM",
	[BTRFS_VERITY_MERKLE_ITEM_KEY] = "VERITY_MERKLE_ITEM",
	[BTRFS_ORPHAN_ITEM_KEY] = "ORPHAN_ITEM",
	[BTRFS_DIR_LOG_ITEM_KEY] = "DIR_LOG_ITEM",
	[BTRFS_DIR_LOG_INDEX_KEY] = "DIR_LOG_INDEX",
	[BTRFS_DIR_ITEM_KEY] = "DIR_ITEM",
	[BTRFS_DIR_INDEX_KEY] = "DIR_INDEX",
	[BTRFS_EXTENT_DATA_KEY] = "EXTENT_DATA",
	[BTRFS_CSUM_ITEM_KEY] = "CSUM_ITEM",
	[BTRFS_EXTENT_CSUM_KEY] = "EXTENT_CSUM",
	[BTRFS_ROOT_ITEM_KEY] = "ROOT_ITEM",
	[BTRFS_ROOT_BACKREF_KEY] = "ROOT_BACKREF",
	[BTRFS_ROOT_REF_KEY] = "ROOT_REF",
	[BTRFS_EXTENT_ITEM_KEY] = "EXTENT_ITEM",
	[BTRFS_METADATA_ITEM_KEY] = "METADATA_ITEM",
	[BTRFS_EXTENT_OWNER_REF_KEY] = "EXTENT_OWNER_REF",	/* progs >= 6.7 */
	[BTRFS_TREE_BLOCK_REF_KEY] = "TREE_BLOCK_REF",
	[BTRFS_EXTENT_DATA_REF_KEY] = "EXTENT_DATA_REF",
	[BTRFS_EXTENT_REF_V0_KEY] = "EXTENT_REF_V0",
	[BTRFS_SHARED_BLOCK_REF_KEY] = "SHARED_BLOCK_REF",
	[BTRFS_SHARED_DATA_REF_KEY] = "SHARED_DATA_REF",
	[BTRFS_BLOCK_GROUP_ITEM_KEY] = "BLOCK_GROUP_ITEM",
	[BTRFS_FREE_SPACE_INFO_KEY] = "FREE_SPACE_INFO",
	[BTRFS_FREE_SPACE_EXTENT_KEY] = "FREE_SPACE_EXTENT",
	[BTRFS_FREE_SPACE_BITMAP_KEY] = "FREE_SPACE_BITMAP",
	[BTRFS_DEV_EXTENT_KEY] = "DEV_EXTENT",
	[BTRFS_DEV_ITEM_KEY] = "DEV_ITEM",
	[BTRFS_CHUNK_ITEM_KEY] = "CHUNK_ITEM",
	[BTRFS_RAID_STRIPE_KEY] = "RAID_STRIPE",		/* newer progs */
	[BTRFS_QGROUP_STATUS_KEY] = "QGROUP_STATUS",
	[BTRFS_QGROUP_INFO_KEY] = "QGROUP_INFO",
	[BTRFS_QGROUP_LIMIT_KEY] = "QGROUP_LIMIT",
	[BTRFS_QGROUP_RELATION_KEY] = "QGROUP_RELATION",
	[BTRFS_TEMPORARY_ITEM_KEY] = "TEMPORARY_ITEM",
	[BTRFS_PERSISTENT_ITEM_KEY] = "PERSISTENT_ITEM",
	[BTRFS_DEV_REPLACE_KEY] = "DEV_REPLACE",
	[BTRFS_UUID_KEY_SUBVOL] = "UUID_KEY_SUBVOL",
	[BTRFS_UUID_KEY_RECEIVED_SUBVOL] = "UUID_KEY_RECEIVED_SUBVOL",
	[BTRFS_STRING_ITEM_KEY] = "STRING_ITEM",
};

const char *btrfs_key_type_name(uint8_t type)
{
	return key_type_names[type];
}

size_t btrfs_key_type_str(uint64_t objectid, uint8_t type, char *buf,
			  size_t len)
{
	struct strbuf sb;
	const char *name = key_type_names[type];

	sb_init(&sb, buf, len);
	if (type == 0 && objectid == BTRFS_FREE_SPACE_OBJECTID)
		sb_puts(&sb, "UNTYPED");
	else if (name)
		sb_puts(&sb, name);
	else
		sb_printf(&sb, "UNKNOWN.%u", (unsigned int)type);
	return sb.pos;
}

const char *btrfs_objectid_name(uint64_t objectid, uint8_t type)
{
	switch (type) {
	case BTRFS_PERSISTENT_ITEM_KEY:
		return objectid == BTRFS_DEV_STATS_OBJECTID ? "DEV_STATS" : NULL;
	case BTRFS_DEV_EXTENT_KEY:
	case BTRFS_QGROUP_RELATION_KEY:
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		return NULL;
	default:
		break;
	}

	switch (objectid) {
	case BTRFS_ROOT_TREE_OBJECTID:	/* == BTRFS_DEV_ITEMS_OBJECTID */
		return type == BTRFS_DEV_ITEM_KEY ? "DEV_ITEMS" : "ROOT_TREE";
	case BTRFS_EXTENT_TREE_OBJECTID:	return "EXTENT_TREE";
	case BTRFS_CHUNK_TREE_OBJECTID:		return "CHUNK_TREE";
	case BTRFS_DEV_TREE_OBJECTID:		return "DEV_TREE";
	case BTRFS_FS_TREE_OBJECTID:		return "FS_TREE";
	case BTRFS_ROOT_TREE_DIR_OBJECTID:	return "ROOT_TREE_DIR";
	case BTRFS_CSUM_TREE_OBJECTID:		return "CSUM_TREE";
	case BTRFS_QUOTA_TREE_OBJECTID:		return "QUOTA_TREE";
	case BTRFS_UUID_TREE_OBJECTID:		return "UUID_TREE";
	case BTRFS_FREE_SPACE_TREE_OBJECTID:	return "FREE_SPACE_TREE";
	case BTRFS_BLOCK_GROUP_TREE_OBJECTID:	return "BLOCK_GROUP_TREE";
	case BTRFS_RAID_STRIPE_TREE_OBJECTID:	return "RAID_STRIPE_TREE"; /* newer progs */
	case BTRFS_BALANCE_OBJECTID:		return "BALANCE";
	case BTRFS_ORPHAN_OBJECTID:		return "ORPHAN";
	case BTRFS_TREE_LOG_OBJECTID:		return "TREE_LOG";
	case BTRFS_TREE_LOG_FIXUP_OBJECTID:	return "LOG_FIXUP";
	case BTRFS_TREE_RELOC_OBJECTID:		return "TREE_RELOC";
	case BTRFS_DATA_RELOC_TREE_OBJECTID:	return "DATA_RELOC_TREE";
	case BTRFS_EXTENT_CSUM_OBJECTID:	return "EXTENT_CSUM";
	case BTRFS_FREE_SPACE_OBJECTID:		return "FREE_SPACE";
	case BTRFS_FREE_INO_OBJECTID:		return "FREE_INO";
	case BTRFS_CSUM_CHANGE_OBJECTID:	return "CSUM_CHANGE";	/* newer progs */
	case BTRFS_MULTIPLE_OBJECTIDS:		return "MULTIPLE";
	case BTRFS_FIRST_CHUNK_TREE_OBJECTID:
		return type == BTRFS_CHUNK_ITEM_KEY ? "FIRST_CHUNK_TREE" : NULL;
	default:
		return NULL;
	}
}

static void sb_objectid(struct strbuf *sb, uint64_t objectid, uint8_t type)
{
	const char *name;

	switch (type) {
	case BTRFS_QGROUP_RELATION_KEY:
		sb_printf(sb, "%u/%llu", (unsigned int)btrfs_qgroup_level(objectid),
			  (unsigned long long)btrfs_qgroup_subvolid(objectid));
		return;
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		sb_printf(sb, "0x%016llx", (unsigned long long)objectid);
		return;
	default:
		break;
	}
	name = btrfs_objectid_name(objectid, type);
	if (name)
		sb_puts(sb, name);
	else if (objectid == (uint64_t)-1 && type != BTRFS_PERSISTENT_ITEM_KEY &&
		 type != BTRFS_DEV_EXTENT_KEY)
		sb_puts(sb, "-1");
	else
		sb_printf(sb, "%llu", (unsigned long long)objectid);
}

size_t btrfs_objectid_str(uint64_t objectid, uint8_t type, char *buf,
			  size_t len)
{
	struct strbuf sb;

	sb_init(&sb, buf, len);
	sb_objectid(&sb, objectid, type);
	return sb.pos;
}

size_t btrfs_key_str(const struct btrfs_key *key, char *buf, size_t len)
{
	struct strbuf sb;
	char tname[32];

	sb_init(&sb, buf, len);
	sb_puts(&sb, "key (");
	sb_objectid(&sb, key->objectid, key->type);
	btrfs_key_type_str(key->objectid, key->type, tname, sizeof(tname));
	sb_puts(&sb, " ");
	sb_puts(&sb, tname);

	switch (key->type) {
	case BTRFS_QGROUP_RELATION_KEY:
	case BTRFS_QGROUP_INFO_KEY:
	case BTRFS_QGROUP_LIMIT_KEY:
		sb_printf(&sb, " %u/%llu)",
			  (unsigned int)btrfs_qgroup_level(key->offset),
			  (unsigned long long)btrfs_qgroup_subvolid(key->offset));
		break;
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		sb_printf(&sb, " 0x%016llx)", (unsigned long long)key->offset);
		break;
	case BTRFS_ROOT_ITEM_KEY:
		/* offset of a reloc tree's root item is the source tree id */
		sb_puts(&sb, " ");
		if (key->objectid == BTRFS_TREE_RELOC_OBJECTID)
			sb_objectid(&sb, key->offset, key->type);
		else
			sb_printf(&sb, "%llu", (unsigned long long)key->offset);
		sb_puts(&sb, ")");
		break;
	default:
		if (key->offset == (uint64_t)-1)
			sb_puts(&sb, " -1)");
		else
			sb_printf(&sb, " %llu)", (unsigned long long)key->offset);
		break;
	}
	return sb.pos;
}

/* ------------------------------------------------------------------------ */
/* Item field values                                                        */
/* ------------------------------------------------------------------------ */

const char *btrfs_bg_profile_name(uint64_t flags)
{
	/* first match wins, in this order (checked against progs 6.2) */
	if (flags & BTRFS_BLOCK_GROUP_RAID10)
		return "RAID10";
	if (flags & BTRFS_BLOCK_GROUP_RAID1)
		return "RAID1";
	if (flags & BTRFS_BLOCK_GROUP_RAID1C3)
		return "RAID1C3";
	if (flags & BTRFS_BLOCK_GROUP_RAID1C4)
		return "RAID1C4";
	if (flags & BTRFS_BLOCK_GROUP_DUP)
		return "DUP";
	if (flags & BTRFS_BLOCK_GROUP_RAID0)
		return "RAID0";
	if (flags & BTRFS_BLOCK_GROUP_RAID5)
		return "RAID5";
	if (flags & BTRFS_BLOCK_GROUP_RAID6)
		return "RAID6";
	return "single";
}

void btrfs_bg_flags_str(uint64_t flags, char *buf, size_t len)
{
	struct strbuf sb;
	int have_data = 0;

	sb_init(&sb, buf, len);
	/* progs only emits a separator after DATA, hence "METADATASYSTEM" */
	if (flags & BTRFS_BLOCK_GROUP_DATA) {
		sb_puts(&sb, "DATA");
		have_data = 1;
	}
	if (flags & BTRFS_BLOCK_GROUP_METADATA) {
		if (have_data)
			sb_puts(&sb, "|");
		sb_puts(&sb, "METADATA");
	}
	if (flags & BTRFS_BLOCK_GROUP_SYSTEM) {
		if (have_data)
			sb_puts(&sb, "|");
		sb_puts(&sb, "SYSTEM");
	}
	sb_puts(&sb, "|");
	sb_puts(&sb, btrfs_bg_profile_name(flags));
}

const char *btrfs_dir_type_name(uint8_t type)
{
	switch (type) {
	case BTRFS_FT_REG_FILE:	return "FILE";
	case BTRFS_FT_DIR:	return "DIR";
	case BTRFS_FT_CHRDEV:	return "CHRDEV";
	case BTRFS_FT_BLKDEV:	return "BLKDEV";
	case BTRFS_FT_FIFO:	return "FIFO";
	case BTRFS_FT_SOCK:	return "SOCK";
	case BTRFS_FT_SYMLINK:	return "SYMLINK";
	case BTRFS_FT_XATTR:	return "XATTR";
	default:		return NULL;
	}
}

const char *btrfs_compress_type_name(uint8_t type)
{
	switch (type) {
	case BTRFS_COMPRESS_NONE:	return "none";
	case BTRFS_COMPRESS_ZLIB:	return "zlib";
	case BTRFS_COMPRESS_LZO:	return "lzo";
	case BTRFS_COMPRESS_ZSTD:	return "zstd";
	default:			return NULL;
	}
}

const char *btrfs_file_extent_type_name(uint8_t type)
{
	switch (type) {
	case BTRFS_FILE_EXTENT_INLINE:		return "inline";
	case BTRFS_FILE_EXTENT_REG:		return "regular";
	case BTRFS_FILE_EXTENT_PREALLOC:	return "prealloc";
	default:				return "unknown";
	}
}

static const struct btrfs_flag_name inode_flag_names[] = {
	{ BTRFS_INODE_NODATASUM, "NODATASUM" },
	{ BTRFS_INODE_NODATACOW, "NODATACOW" },
	{ BTRFS_INODE_READONLY, "READONLY" },
	{ BTRFS_INODE_NOCOMPRESS, "NOCOMPRESS" },
	{ BTRFS_INODE_PREALLOC, "PREALLOC" },
	{ BTRFS_INODE_SYNC, "SYNC" },
	{ BTRFS_INODE_IMMUTABLE, "IMMUTABLE" },
	{ BTRFS_INODE_APPEND, "APPEND" },
	{ BTRFS_INODE_NODUMP, "NODUMP" },
	{ BTRFS_INODE_NOATIME, "NOATIME" },
	{ BTRFS_INODE_DIRSYNC, "DIRSYNC" },
	{ BTRFS_INODE_COMPRESS, "COMPRESS" },
};

void btrfs_inode_flags_str(uint64_t flags, char *buf, size_t len)
{
	struct strbuf sb;
	int empty = 1;

	sb_init(&sb, buf, len);
	for (size_t i = 0; i < sizeof(inode_flag_names) / sizeof(inode_flag_names[0]); i++) {
		if (!(flags & inode_flag_names[i].bit))
			continue;
		if (!empty)
			sb_puts(&sb, "|");
		sb_puts(&sb, inode_flag_names[i].name);
		empty = 0;
	}
	if (empty)
		sb_puts(&sb, "none");
}

void btrfs_extent_flags_str(uint64_t flags, char *buf, size_t len)
{
	struct strbuf sb;

	sb_init(&sb, buf, len);
	if (flags & BTRFS_EXTENT_FLAG_DATA)
		sb_puts(&sb, "DATA");
	if (flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) {
		if (flags & BTRFS_EXTENT_FLAG_DATA)
			sb_puts(&sb, "|");
		sb_puts(&sb, "TREE_BLOCK");
	}
	/* progs always prefixes this one with '|' */
	if (flags & BTRFS_BLOCK_FLAG_FULL_BACKREF)
		sb_puts(&sb, "|FULL_BACKREF");
}

void btrfs_header_flags_str(uint64_t flags, char *buf, size_t len)
{
	struct strbuf sb;

	sb_init(&sb, buf, len);
	if (flags & BTRFS_HEADER_FLAG_WRITTEN)
		sb_puts(&sb, "WRITTEN");
	if (flags & BTRFS_HEADER_FLAG_RELOC) {
		if (flags & BTRFS_HEADER_FLAG_WRITTEN)
			sb_puts(&sb, "|");
		sb_puts(&sb, "RELOC");
	}
}

const char *btrfs_root_flags_name(uint64_t flags)
{
	return (flags & BTRFS_ROOT_SUBVOL_RDONLY) ? "RDONLY" : "none";
}

void btrfs_qgroup_status_flags_str(uint64_t flags, char *buf, size_t len)
{
	struct strbuf sb;

	sb_init(&sb, buf, len);
	sb_puts(&sb, (flags & BTRFS_QGROUP_STATUS_FLAG_ON) ? "ON" : "OFF");
	if (flags & BTRFS_QGROUP_STATUS_FLAG_RESCAN)
		sb_puts(&sb, "|SCANNING");
	if (flags & BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT)
		sb_puts(&sb, "|INCONSISTENT");
}
