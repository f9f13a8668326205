/*
 * tree layer: the tree checker's rules for item bodies.
 *
 * Owns: one check per item type whose layout we know, dispatched by key
 * type from ubt_checker_item().  Rules follow the kernel's tree-checker;
 * where we go further or stay more lenient the comment says so.
 *
 * Invariants:
 *   - called only after checker.c validated the leaf's item table, so
 *     it->data[0 .. it->size) lies inside the block; every read below is
 *     bounded by it->size first (fixed structs: exact or minimum size
 *     checked before any field; variable entries: remaining bytes checked
 *     before each header and again before each name/payload);
 *   - items are checked in slot order and checking stops at the first
 *     error, so the item at slot - 1 (used by the overlap rules) is valid;
 *   - stateless and thread-safe.
 *
 * Locks: none.
 */
#include "tree/checker_int.h"

#include "format/format_names.h"

#include <string.h>

/* Linux mode bits as stored in inode items (independent of the host). */
#define UBT_S_IFMT	0170000U
#define UBT_S_IFSOCK	0140000U
#define UBT_S_IFLNK	0120000U
#define UBT_S_IFREG	0100000U
#define UBT_S_IFBLK	0060000U
#define UBT_S_IFDIR	0040000U
#define UBT_S_IFCHR	0020000U
#define UBT_S_IFIFO	0010000U
#define UBT_S_ISUID	0004000U
#define UBT_S_ISGID	0002000U
#define UBT_S_ISVTX	0001000U

/* Longest xattr name (Linux XATTR_NAME_MAX). */
#define XATTR_NAME_MAX_LEN	255U

/* ---- EXTENT_DATA -------------------------------------------------------- */

/*
 * In subvolume trees every item of an inode follows its INODE_ITEM (the
 * smallest key of the inode), so an inode's item at slot > 0 must follow
 * another item of the same inode.  Log and reloc trees don't keep this.
 */
static int check_prev_ino(const struct item *it)
{
	if (it->slot == 0 || !chk_is_fstree(it->b->owner))
		return 0;
	if (it->prev.objectid != it->key.objectid)
		return ITEM_CORRUPT(it, "previous item belongs to inode %llu: inode item missing",
				    (unsigned long long)it->prev.objectid);
	return 0;
}

/* File range end of a validated file extent item (saturating). */
static uint64_t file_extent_end(const struct blk *b, const struct btrfs_key *key,
				const uint8_t *data)
{
	const struct btrfs_file_extent_item *fi = (const struct btrfs_file_extent_item *)data;
	uint32_t ss = b->ctx->sectorsize;

	if (btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_INLINE) {
		uint64_t end = chk_add_sat(key->offset, btrfs_file_extent_ram_bytes(fi));

		end = chk_add_sat(end, ss - 1);
		return end == UINT64_MAX ? end : end & ~((uint64_t)ss - 1);
	}
	return chk_add_sat(key->offset, btrfs_file_extent_num_bytes(fi));
}

static int check_file_extent(const struct item *it)
{
	const struct btrfs_file_extent_item *fi = (const struct btrfs_file_extent_item *)it->data;
	const uint32_t ss = it->b->ctx->sectorsize;
	const uint32_t inline_start = (uint32_t)btrfs_file_extent_inline_start();
	uint8_t type, compression;
	int ret;

	if (!chk_aligned(it->key.offset, ss))
		return ITEM_CORRUPT(it, "file offset %llu not aligned to sectorsize %u",
				    (unsigned long long)it->key.offset, ss);
	ret = check_prev_ino(it);
	if (ret)
		return ret;
	if (it->size < inline_start)
		return ITEM_CORRUPT(it, "file extent item size %u < %u", it->size, inline_start);
	type = btrfs_file_extent_type(fi);
	compression = btrfs_file_extent_compression(fi);
	if (type >= BTRFS_NR_FILE_EXTENT_TYPES)
		return ITEM_CORRUPT(it, "invalid file extent type %u", type);
	if (compression >= BTRFS_NR_COMPRESS_TYPES)
		return ITEM_CORRUPT(it, "invalid file extent compression %u", compression);
	if (btrfs_file_extent_encryption(fi) != BTRFS_ENCRYPTION_NONE)
		return ITEM_CORRUPT(it, "invalid file extent encryption %u",
				    btrfs_file_extent_encryption(fi));

	if (type == BTRFS_FILE_EXTENT_INLINE) {
		if (it->key.offset != 0)
			return ITEM_CORRUPT(it, "inline extent at file offset %llu, expect 0",
					    (unsigned long long)it->key.offset);
		/* Compressed inline data has no length of its own to compare. */
		if (compression == BTRFS_COMPRESS_NONE &&
		    btrfs_file_extent_ram_bytes(fi) != (uint64_t)(it->size - inline_start))
			return ITEM_CORRUPT(it,
					    "uncompressed inline extent ram_bytes %llu, item holds %u",
					    (unsigned long long)btrfs_file_extent_ram_bytes(fi),
					    it->size - inline_start);
		return 0;
	}

	if (it->size != sizeof(struct btrfs_file_extent_item))
		return ITEM_CORRUPT(it, "regular/prealloc file extent item size %u, expect %zu",
				    it->size, sizeof(struct btrfs_file_extent_item));
	{
		static const char *const names[] = { "ram_bytes", "disk_bytenr", "disk_num_bytes",
						     "offset", "num_bytes" };
		const uint64_t vals[] = {
			btrfs_file_extent_ram_bytes(fi), btrfs_file_extent_disk_bytenr(fi),
			btrfs_file_extent_disk_num_bytes(fi), btrfs_file_extent_offset(fi),
			btrfs_file_extent_num_bytes(fi),
		};

		for (size_t i = 0; i < UBT_ARRAY_SIZE(vals); i++)
			if (!chk_aligned(vals[i], ss))
				return ITEM_CORRUPT(it, "file extent %s %llu not aligned to %u",
						    names[i], (unsigned long long)vals[i], ss);
	}
	if (btrfs_file_extent_num_bytes(fi) > UINT64_MAX - it->key.offset)
		return ITEM_CORRUPT(it, "file extent end overflows: offset %llu num_bytes %llu",
				    (unsigned long long)it->key.offset,
				    (unsigned long long)btrfs_file_extent_num_bytes(fi));

	/* Consecutive extents of one inode in one leaf must not overlap. */
	if (it->slot > 0 && it->prev.objectid == it->key.objectid &&
	    it->prev.type == BTRFS_EXTENT_DATA_KEY) {
		const uint8_t *pdata;
		uint32_t psize;
		uint64_t prev_end;

		chk_item_at(it->b, (uint32_t)it->slot - 1, &pdata, &psize);
		prev_end = file_extent_end(it->b, &it->prev, pdata);
		if (prev_end > it->key.offset)
			return ITEM_CORRUPT(it, "previous file extent ends at %llu, past this start",
					    (unsigned long long)prev_end);
	}
	return 0;
}

/* ---- EXTENT_CSUM -------------------------------------------------------- */

static int check_csum_item(const struct item *it)
{
	const uint32_t ss = it->b->ctx->sectorsize;
	const uint32_t csum_size = btrfs_csum_type_size(it->b->ctx->csum_type);

	if (it->key.objectid != BTRFS_EXTENT_CSUM_OBJECTID)
		return ITEM_CORRUPT(it, "csum item objectid %llu, expect EXTENT_CSUM (%lld)",
				    (unsigned long long)it->key.objectid,
				    (long long)(int64_t)BTRFS_EXTENT_CSUM_OBJECTID);
	if (!chk_aligned(it->key.offset, ss))
		return ITEM_CORRUPT(it, "csum item offset %llu not aligned to sectorsize %u",
				    (unsigned long long)it->key.offset, ss);
	if (it->size % csum_size != 0)
		return ITEM_CORRUPT(it, "csum item size %u not a multiple of csum size %u", it->size,
				    csum_size);
	if (it->slot > 0 && it->prev.type == BTRFS_EXTENT_CSUM_KEY) {
		const uint8_t *pdata;
		uint32_t psize;
		uint64_t prev_end;

		chk_item_at(it->b, (uint32_t)it->slot - 1, &pdata, &psize);
		prev_end = chk_add_sat(it->prev.offset, (uint64_t)(psize / csum_size) * ss);
		if (prev_end > it->key.offset)
			return ITEM_CORRUPT(it, "previous csum item covers up to %llu, past this start",
					    (unsigned long long)prev_end);
	}
	return 0;
}

/* ---- keys of inodes and roots ------------------------------------------- */

/* Objectids an inode (or a dir entry's inode target) may have. */
static bool valid_inode_objectid(uint64_t ino)
{
	return (ino >= BTRFS_FIRST_FREE_OBJECTID && ino <= BTRFS_LAST_FREE_OBJECTID) ||
	       ino == BTRFS_ROOT_TREE_DIR_OBJECTID || ino == BTRFS_FREE_INO_OBJECTID;
}

/* Location key of one dir/xattr entry. */
static int check_dir_location(const struct item *it, const struct btrfs_key *loc)
{
	if (it->key.type == BTRFS_XATTR_ITEM_KEY) {
		if (loc->objectid || loc->type || loc->offset)
			return ITEM_CORRUPT(it, "xattr location key (%llu %u %llu), expect zero",
					    (unsigned long long)loc->objectid, loc->type,
					    (unsigned long long)loc->offset);
		return 0;
	}
	if (loc->type == BTRFS_ROOT_ITEM_KEY) {
		/* An entry for a subvolume points to its root; only subvolumes. */
		if (!chk_is_fstree(loc->objectid))
			return ITEM_CORRUPT(it, "location root id %llu is not a subvolume",
					    (unsigned long long)loc->objectid);
		return 0;
	}
	if (loc->type == BTRFS_INODE_ITEM_KEY) {
		if (!valid_inode_objectid(loc->objectid))
			return ITEM_CORRUPT(it, "location inode %llu out of range",
					    (unsigned long long)loc->objectid);
		if (loc->offset != 0)
			return ITEM_CORRUPT(it, "location key offset %llu, expect 0",
					    (unsigned long long)loc->offset);
		return 0;
	}
	return ITEM_CORRUPT(it, "location key type %u, expect INODE_ITEM or ROOT_ITEM", loc->type);
}

/* ---- DIR_ITEM, DIR_INDEX, XATTR_ITEM ------------------------------------ */

static int check_dir_item(const struct item *it)
{
	const uint32_t max_data = it->b->ctx->nodesize - HDR_SIZE - ITEM_SIZE -
				  (uint32_t)sizeof(struct btrfs_dir_item);
	const bool is_xattr = it->key.type == BTRFS_XATTR_ITEM_KEY;
	const char *what = is_xattr ? "xattr item" :
			   it->key.type == BTRFS_DIR_INDEX_KEY ? "dir index" : "dir item";
	uint32_t cur = 0, entries = 0;
	int ret;

	ret = check_prev_ino(it);
	if (ret)
		return ret;
	if (it->size == 0)
		return ITEM_CORRUPT(it, "empty %s", what);
	while (cur < it->size) {
		const struct btrfs_dir_item *di = (const struct btrfs_dir_item *)(it->data + cur);
		uint32_t name_len, data_len, total;
		struct btrfs_key loc;
		uint8_t ftype;

		if (it->size - cur < sizeof(*di))
			return ITEM_CORRUPT(it, "%s header at %u crosses item end %u", what, cur,
					    it->size);
		btrfs_disk_key_to_cpu(&loc, btrfs_dir_location(di));
		ret = check_dir_location(it, &loc);
		if (ret)
			return ret;
		/* The fscrypt bit is not a type of its own. */
		ftype = btrfs_dir_type(di) & (uint8_t)~BTRFS_FT_ENCRYPTED;
		if (ftype == BTRFS_FT_UNKNOWN || ftype >= BTRFS_FT_MAX)
			return ITEM_CORRUPT(it, "%s type %u invalid", what, ftype);
		if (is_xattr && ftype != BTRFS_FT_XATTR)
			return ITEM_CORRUPT(it, "xattr item type %u, expect XATTR", ftype);
		if (!is_xattr && ftype == BTRFS_FT_XATTR)
			return ITEM_CORRUPT(it, "%s has type XATTR", what);
		name_len = btrfs_dir_name_len(di);
		data_len = btrfs_dir_data_len(di);
		/* Not a kernel rule: an empty name cannot be created. */
		if (name_len == 0)
			return ITEM_CORRUPT(it, "%s with empty name", what);
		if (name_len > (is_xattr ? XATTR_NAME_MAX_LEN : BTRFS_NAME_LEN))
			return ITEM_CORRUPT(it, "%s name_len %u too long", what, name_len);
		if (name_len + data_len > max_data)
			return ITEM_CORRUPT(it, "%s name_len %u + data_len %u exceeds %u", what,
					    name_len, data_len, max_data);
		if (!is_xattr && data_len != 0)
			return ITEM_CORRUPT(it, "%s data_len %u, expect 0", what, data_len);
		total = (uint32_t)sizeof(*di) + name_len + data_len;
		if (total > it->size - cur)
			return ITEM_CORRUPT(it, "%s entry at %u (%u bytes) crosses item end %u", what,
					    cur, total, it->size);
		if (it->key.type != BTRFS_DIR_INDEX_KEY) {
			uint64_t hash = ubt_name_hash(btrfs_dir_name(di), name_len);

			if (hash != it->key.offset)
				return ITEM_CORRUPT(it, "%s name hash 0x%llx does not match key", what,
						    (unsigned long long)hash);
		}
		cur += total;
		entries++;
	}
	/* Not a kernel rule: indexes are unique, one entry per DIR_INDEX. */
	if (it->key.type == BTRFS_DIR_INDEX_KEY && entries != 1)
		return ITEM_CORRUPT(it, "dir index holds %u entries, expect 1", entries);
	return 0;
}

/* ---- INODE_REF, INODE_EXTREF, ROOT_REF/BACKREF -------------------------- */

static int check_ref_name_len(const struct item *it, const char *what, uint32_t name_len)
{
	/* Not kernel rules: names are 1..255 bytes everywhere in btrfs. */
	if (name_len == 0)
		return ITEM_CORRUPT(it, "%s with empty name", what);
	if (name_len > BTRFS_NAME_LEN)
		return ITEM_CORRUPT(it, "%s name_len %u too long", what, name_len);
	return 0;
}

static int check_inode_ref(const struct item *it)
{
	const uint32_t hsize = (uint32_t)sizeof(struct btrfs_inode_ref);
	uint32_t cur = 0;
	int ret;

	ret = check_prev_ino(it);
	if (ret)
		return ret;
	if (it->size <= hsize)
		return ITEM_CORRUPT(it, "inode ref item size %u, expect > %u", it->size, hsize);
	while (cur < it->size) {
		const struct btrfs_inode_ref *ref = (const struct btrfs_inode_ref *)(it->data + cur);
		uint32_t name_len;

		if (it->size - cur < hsize)
			return ITEM_CORRUPT(it, "inode ref header at %u crosses item end %u", cur,
					    it->size);
		name_len = btrfs_inode_ref_name_len(ref);
		ret = check_ref_name_len(it, "inode ref", name_len);
		if (ret)
			return ret;
		if (hsize + name_len > it->size - cur)
			return ITEM_CORRUPT(it, "inode ref name at %u (len %u) crosses item end %u",
					    cur, name_len, it->size);
		cur += hsize + name_len;
	}
	return 0;
}

static int check_inode_extref(const struct item *it)
{
	const uint32_t hsize = (uint32_t)sizeof(struct btrfs_inode_extref);
	uint32_t cur = 0;
	int ret;

	ret = check_prev_ino(it);
	if (ret)
		return ret;
	if (it->size == 0)
		return ITEM_CORRUPT(it, "empty inode extref item");
	while (cur < it->size) {
		const struct btrfs_inode_extref *ref =
			(const struct btrfs_inode_extref *)(it->data + cur);
		uint32_t name_len;
		uint64_t hash;

		if (it->size - cur < hsize)
			return ITEM_CORRUPT(it, "inode extref header at %u crosses item end %u", cur,
					    it->size);
		name_len = btrfs_inode_extref_name_len(ref);
		ret = check_ref_name_len(it, "inode extref", name_len);
		if (ret)
			return ret;
		if (hsize + name_len > it->size - cur)
			return ITEM_CORRUPT(it, "inode extref name at %u (len %u) crosses item end %u",
					    cur, name_len, it->size);
		/* Not a kernel rule: entries share an item only on equal hashes. */
		hash = ubt_extref_hash(btrfs_inode_extref_parent_objectid(ref),
				       btrfs_inode_extref_name(ref), name_len);
		if (hash != it->key.offset)
			return ITEM_CORRUPT(it, "inode extref name hash 0x%llx does not match key",
					    (unsigned long long)hash);
		cur += hsize + name_len;
	}
	return 0;
}

static int check_root_ref(const struct item *it)
{
	const struct btrfs_root_ref *ref = (const struct btrfs_root_ref *)it->data;
	const uint32_t hsize = (uint32_t)sizeof(*ref);
	const char *what = it->key.type == BTRFS_ROOT_REF_KEY ? "root ref" : "root backref";
	uint32_t name_len;
	int ret;

	/* Not kernel rules: one entry, its name exactly filling the item. */
	if (it->size < hsize)
		return ITEM_CORRUPT(it, "%s item size %u < %u", what, it->size, hsize);
	name_len = btrfs_root_ref_name_len(ref);
	ret = check_ref_name_len(it, what, name_len);
	if (ret)
		return ret;
	if (it->size != hsize + name_len)
		return ITEM_CORRUPT(it, "%s item size %u, name needs %u", what, it->size,
				    hsize + name_len);
	return 0;
}

/* ---- INODE_ITEM --------------------------------------------------------- */

static int check_inode_item(const struct item *it)
{
	const struct btrfs_inode_item *ii = (const struct btrfs_inode_item *)it->data;
	const struct ubt_check_ctx *c = it->b->ctx;
	const uint32_t valid_mode = UBT_S_IFMT | UBT_S_ISUID | UBT_S_ISGID | UBT_S_ISVTX | 0777U;
	uint32_t mode, fmt, flags, ro_flags;
	uint64_t all_flags;

	if (!valid_inode_objectid(it->key.objectid))
		return ITEM_CORRUPT(it, "inode objectid %llu out of range",
				    (unsigned long long)it->key.objectid);
	if (it->key.offset != 0)
		return ITEM_CORRUPT(it, "inode item key offset %llu, expect 0",
				    (unsigned long long)it->key.offset);
	if (it->size != sizeof(*ii))
		return ITEM_CORRUPT(it, "inode item size %u, expect %zu", it->size, sizeof(*ii));
	/* Log trees may hold the running transaction: allow super + 1. */
	if (chk_gen_in_future(c, btrfs_inode_generation(ii)))
		return ITEM_CORRUPT(it, "inode generation %llu beyond filesystem generation %llu",
				    (unsigned long long)btrfs_inode_generation(ii),
				    (unsigned long long)c->super_generation);
	if (chk_gen_in_future(c, btrfs_inode_transid(ii)))
		return ITEM_CORRUPT(it, "inode transid %llu beyond filesystem generation %llu",
				    (unsigned long long)btrfs_inode_transid(ii),
				    (unsigned long long)c->super_generation);
	mode = btrfs_inode_mode(ii);
	if (mode & ~valid_mode)
		return ITEM_CORRUPT(it, "inode mode 0%o has unknown bits 0%o", mode,
				    mode & ~valid_mode);
	fmt = mode & UBT_S_IFMT;
	if (fmt != UBT_S_IFSOCK && fmt != UBT_S_IFLNK && fmt != UBT_S_IFREG && fmt != UBT_S_IFBLK &&
	    fmt != UBT_S_IFDIR && fmt != UBT_S_IFCHR && fmt != UBT_S_IFIFO)
		return ITEM_CORRUPT(it, "inode mode 0%o has no valid file type", mode);
	if (fmt == UBT_S_IFDIR && btrfs_inode_nlink(ii) > 1)
		return ITEM_CORRUPT(it, "directory nlink %u, expect <= 1", btrfs_inode_nlink(ii));
	all_flags = btrfs_inode_flags(ii);
	flags = (uint32_t)all_flags;
	ro_flags = (uint32_t)(all_flags >> BTRFS_INODE_RO_FLAGS_SHIFT);
	if (flags & ~(uint32_t)BTRFS_INODE_FLAG_MASK)
		return ITEM_CORRUPT(it, "inode has unknown flags 0x%x",
				    flags & ~(uint32_t)BTRFS_INODE_FLAG_MASK);
	if (!c->read_only && (ro_flags & ~(uint32_t)BTRFS_INODE_RO_FLAG_MASK))
		return ITEM_CORRUPT(it, "inode has unknown read-only-compat flags 0x%x (writable use)",
				    ro_flags & ~(uint32_t)BTRFS_INODE_RO_FLAG_MASK);
	return 0;
}

/* ---- ROOT_ITEM ---------------------------------------------------------- */

static int check_root_item(const struct item *it)
{
	const struct btrfs_root_item *ri = (const struct btrfs_root_item *)it->data;
	const struct ubt_check_ctx *c = it->b->ctx;
	const uint64_t valid_flags = BTRFS_ROOT_SUBVOL_RDONLY | BTRFS_ROOT_SUBVOL_DEAD;

	if (it->key.objectid == 0)
		return ITEM_CORRUPT(it, "root item for tree id 0");
	/*
	 * Reloc trees exist for subvolumes; key offset names which.  Unlike
	 * the kernel we also accept one for the data reloc tree: old kernels
	 * created those, and a filesystem caught mid-balance keeps it.
	 */
	if (it->key.objectid == BTRFS_TREE_RELOC_OBJECTID && !chk_is_fstree(it->key.offset) &&
	    it->key.offset != BTRFS_DATA_RELOC_TREE_OBJECTID)
		return ITEM_CORRUPT(it, "reloc tree for %lld, which is not a subvolume",
				    (long long)(int64_t)it->key.offset);
	if (it->size != sizeof(*ri) && it->size != BTRFS_ROOT_ITEM_LEGACY_SIZE)
		return ITEM_CORRUPT(it, "root item size %u, expect %zu or %u", it->size,
				    sizeof(*ri), BTRFS_ROOT_ITEM_LEGACY_SIZE);
	if (chk_gen_in_future(c, btrfs_root_generation(ri)))
		return ITEM_CORRUPT(it, "root generation %llu beyond filesystem generation %llu",
				    (unsigned long long)btrfs_root_generation(ri),
				    (unsigned long long)c->super_generation);
	if (it->size == sizeof(*ri) && chk_gen_in_future(c, btrfs_root_generation_v2(ri)))
		return ITEM_CORRUPT(it, "root generation_v2 %llu beyond filesystem generation %llu",
				    (unsigned long long)btrfs_root_generation_v2(ri),
				    (unsigned long long)c->super_generation);
	if (chk_gen_in_future(c, btrfs_root_last_snapshot(ri)))
		return ITEM_CORRUPT(it, "root last_snapshot %llu beyond filesystem generation %llu",
				    (unsigned long long)btrfs_root_last_snapshot(ri),
				    (unsigned long long)c->super_generation);
	if (!chk_aligned(btrfs_root_bytenr(ri), c->sectorsize))
		return ITEM_CORRUPT(it, "root bytenr %llu not aligned to sectorsize %u",
				    (unsigned long long)btrfs_root_bytenr(ri), c->sectorsize);
	if (btrfs_root_level(ri) >= BTRFS_MAX_LEVEL)
		return ITEM_CORRUPT(it, "root level %u, expect < %u", btrfs_root_level(ri),
				    BTRFS_MAX_LEVEL);
	if (btrfs_root_drop_level(ri) >= BTRFS_MAX_LEVEL)
		return ITEM_CORRUPT(it, "root drop_level %u, expect < %u", btrfs_root_drop_level(ri),
				    BTRFS_MAX_LEVEL);
	if (btrfs_root_flags(ri) & ~valid_flags)
		return ITEM_CORRUPT(it, "root flags 0x%llx has unknown bits",
				    (unsigned long long)btrfs_root_flags(ri));
	return 0;
}

/* ---- CHUNK_ITEM, DEV_ITEM, DEV_EXTENT, BLOCK_GROUP_ITEM ----------------- */

/*
 * Per profile: copies kept, parity stripes, and whether a stripe count is
 * valid (SINGLE 1, DUP 2, RAID1/C3/C4 exactly 2/3/4, RAID5/6 at least 2/3,
 * RAID10 in pairs, RAID0 any).
 */
static bool chunk_stripes_valid(uint64_t profile, uint16_t num, uint16_t sub, unsigned *ncopies,
				unsigned *nparity)
{
	*nparity = 0;
	switch (profile) {
	case 0:
		*ncopies = 1;
		return num == 1;
	case BTRFS_BLOCK_GROUP_DUP:
		*ncopies = 2;
		return num == 2;
	case BTRFS_BLOCK_GROUP_RAID0:
		*ncopies = 1;
		return true;
	case BTRFS_BLOCK_GROUP_RAID1:
		*ncopies = 2;
		return num == 2;
	case BTRFS_BLOCK_GROUP_RAID1C3:
		*ncopies = 3;
		return num == 3;
	case BTRFS_BLOCK_GROUP_RAID1C4:
		*ncopies = 4;
		return num == 4;
	case BTRFS_BLOCK_GROUP_RAID10:
		*ncopies = 2;
		/* Not a kernel rule: stripes come in sub_stripes groups. */
		return sub == 2 && num % 2 == 0;
	case BTRFS_BLOCK_GROUP_RAID5:
		*ncopies = 1;
		*nparity = 1;
		return num >= 2;
	case BTRFS_BLOCK_GROUP_RAID6:
		*ncopies = 1;
		*nparity = 2;
		return num >= 3;
	default:
		*ncopies = 1;
		return false;
	}
}

static int check_chunk_item(const struct item *it)
{
	const struct btrfs_chunk *chunk = (const struct btrfs_chunk *)it->data;
	const struct ubt_check_ctx *c = it->b->ctx;
	const uint64_t logical = it->key.offset;
	const uint64_t valid_types = BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK;
	uint64_t length, stripe_len, type, profile;
	uint16_t num_stripes, sub_stripes;
	unsigned ncopies, nparity;
	bool stripes_ok;

	if (it->size < sizeof(*chunk))
		return ITEM_CORRUPT(it, "chunk item size %u < %zu", it->size, sizeof(*chunk));
	num_stripes = btrfs_chunk_num_stripes(chunk);
	sub_stripes = btrfs_chunk_sub_stripes(chunk);
	length = btrfs_chunk_length(chunk);
	stripe_len = btrfs_chunk_stripe_len(chunk);
	type = btrfs_chunk_type(chunk);
	profile = type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	if (num_stripes == 0)
		return ITEM_CORRUPT(it, "chunk has no stripes");
	if (it->size != btrfs_chunk_item_size(num_stripes))
		return ITEM_CORRUPT(it, "chunk item size %u, %u stripes need %zu", it->size,
				    num_stripes, btrfs_chunk_item_size(num_stripes));
	if (!chk_aligned(logical, c->sectorsize))
		return ITEM_CORRUPT(it, "chunk start %llu not aligned to sectorsize %u",
				    (unsigned long long)logical, c->sectorsize);
	if (btrfs_chunk_sector_size(chunk) != c->sectorsize)
		return ITEM_CORRUPT(it, "chunk sector_size %u, filesystem has %u",
				    btrfs_chunk_sector_size(chunk), c->sectorsize);
	if (length == 0 || !chk_aligned(length, c->sectorsize))
		return ITEM_CORRUPT(it, "chunk length %llu invalid", (unsigned long long)length);
	if (length > UINT64_MAX - logical)
		return ITEM_CORRUPT(it, "chunk end overflows: start %llu length %llu",
				    (unsigned long long)logical, (unsigned long long)length);
	if (stripe_len != BTRFS_STRIPE_LEN)
		return ITEM_CORRUPT(it, "chunk stripe_len %llu, expect %llu",
				    (unsigned long long)stripe_len,
				    (unsigned long long)BTRFS_STRIPE_LEN);
	/* Stripe numbers must fit in 32 bits. */
	if (length >= ((uint64_t)UINT32_MAX << BTRFS_STRIPE_LEN_SHIFT))
		return ITEM_CORRUPT(it, "chunk length %llu too large", (unsigned long long)length);
	if (type & ~valid_types)
		return ITEM_CORRUPT(it, "chunk type 0x%llx has unknown bits 0x%llx",
				    (unsigned long long)type,
				    (unsigned long long)(type & ~valid_types));
	if (chk_popcount64(profile) > 1)
		return ITEM_CORRUPT(it, "chunk type 0x%llx has several profiles",
				    (unsigned long long)type);
	if ((type & BTRFS_BLOCK_GROUP_TYPE_MASK) == 0)
		return ITEM_CORRUPT(it, "chunk type 0x%llx has no DATA/METADATA/SYSTEM bit",
				    (unsigned long long)type);
	if ((type & BTRFS_BLOCK_GROUP_SYSTEM) &&
	    (type & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DATA)))
		return ITEM_CORRUPT(it, "system chunk also data or metadata: type 0x%llx",
				    (unsigned long long)type);
	if (!(c->incompat_flags & BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS) &&
	    (type & BTRFS_BLOCK_GROUP_METADATA) && (type & BTRFS_BLOCK_GROUP_DATA))
		return ITEM_CORRUPT(it, "mixed data+metadata chunk without MIXED_GROUPS: type 0x%llx",
				    (unsigned long long)type);
	stripes_ok = chunk_stripes_valid(profile, num_stripes, sub_stripes, &ncopies, &nparity);
	if (num_stripes < ncopies)
		return ITEM_CORRUPT(it, "chunk num_stripes %u < copies %u", num_stripes, ncopies);
	if (nparity && num_stripes == nparity)
		return ITEM_CORRUPT(it, "chunk num_stripes %u == parity stripes", num_stripes);
	if (!stripes_ok)
		return ITEM_CORRUPT(it, "chunk num_stripes:sub_stripes %u:%u invalid for %s",
				    num_stripes, sub_stripes, btrfs_bg_profile_name(type));
	/* Not a kernel rule: stripes start where dev extents do, sector aligned. */
	for (unsigned i = 0; i < num_stripes; i++) {
		uint64_t off = btrfs_stripe_offset_nr(chunk, i);

		if (!chk_aligned(off, c->sectorsize))
			return ITEM_CORRUPT(it, "chunk stripe %u offset %llu not sector aligned", i,
					    (unsigned long long)off);
	}
	return 0;
}

static int check_dev_item(const struct item *it)
{
	const struct btrfs_dev_item *di = (const struct btrfs_dev_item *)it->data;

	if (it->key.objectid != BTRFS_DEV_ITEMS_OBJECTID)
		return ITEM_CORRUPT(it, "dev item objectid %llu, expect %llu",
				    (unsigned long long)it->key.objectid,
				    (unsigned long long)BTRFS_DEV_ITEMS_OBJECTID);
	if (it->size != sizeof(*di))
		return ITEM_CORRUPT(it, "dev item size %u, expect %zu", it->size, sizeof(*di));
	if (btrfs_dev_item_devid(di) != it->key.offset)
		return ITEM_CORRUPT(it, "dev item devid %llu differs from key",
				    (unsigned long long)btrfs_dev_item_devid(di));
	/* total_bytes may be 0 while a device is removed; only the order holds. */
	if (btrfs_dev_item_bytes_used(di) > btrfs_dev_item_total_bytes(di))
		return ITEM_CORRUPT(it, "dev item bytes_used %llu > total_bytes %llu",
				    (unsigned long long)btrfs_dev_item_bytes_used(di),
				    (unsigned long long)btrfs_dev_item_total_bytes(di));
	return 0;
}

static int check_dev_extent(const struct item *it)
{
	const struct btrfs_dev_extent *de = (const struct btrfs_dev_extent *)it->data;
	const uint32_t ss = it->b->ctx->sectorsize;

	if (it->size != sizeof(*de))
		return ITEM_CORRUPT(it, "dev extent size %u, expect %zu", it->size, sizeof(*de));
	if (btrfs_dev_extent_chunk_tree(de) != BTRFS_CHUNK_TREE_OBJECTID)
		return ITEM_CORRUPT(it, "dev extent chunk_tree %llu, expect %llu",
				    (unsigned long long)btrfs_dev_extent_chunk_tree(de),
				    (unsigned long long)BTRFS_CHUNK_TREE_OBJECTID);
	if (btrfs_dev_extent_chunk_objectid(de) != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
		return ITEM_CORRUPT(it, "dev extent chunk_objectid %llu, expect %llu",
				    (unsigned long long)btrfs_dev_extent_chunk_objectid(de),
				    (unsigned long long)BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	if (!chk_aligned(it->key.offset, ss))
		return ITEM_CORRUPT(it, "dev extent start %llu not aligned to %u",
				    (unsigned long long)it->key.offset, ss);
	if (!chk_aligned(btrfs_dev_extent_chunk_offset(de), ss))
		return ITEM_CORRUPT(it, "dev extent chunk_offset %llu not aligned to %u",
				    (unsigned long long)btrfs_dev_extent_chunk_offset(de), ss);
	/* Zero length: not a kernel rule, but such an extent maps nothing. */
	if (btrfs_dev_extent_length(de) == 0 || !chk_aligned(btrfs_dev_extent_length(de), ss))
		return ITEM_CORRUPT(it, "dev extent length %llu invalid",
				    (unsigned long long)btrfs_dev_extent_length(de));
	if (it->slot > 0 && it->prev.objectid == it->key.objectid &&
	    it->prev.type == it->key.type) {
		const uint8_t *pdata;
		uint32_t psize;
		uint64_t prev_end;

		chk_item_at(it->b, (uint32_t)it->slot - 1, &pdata, &psize);
		prev_end = chk_add_sat(it->prev.offset,
				   btrfs_dev_extent_length((const struct btrfs_dev_extent *)pdata));
		if (prev_end > it->key.offset)
			return ITEM_CORRUPT(it, "previous dev extent ends at %llu, past this start",
					    (unsigned long long)prev_end);
	}
	return 0;
}

static int check_block_group_item(const struct item *it)
{
	const struct btrfs_block_group_item *bg = (const struct btrfs_block_group_item *)it->data;
	const struct ubt_check_ctx *c = it->b->ctx;
	uint64_t flags, type;

	if (it->key.offset == 0)
		return ITEM_CORRUPT(it, "block group length 0");
	if (it->size != sizeof(*bg))
		return ITEM_CORRUPT(it, "block group item size %u, expect %zu", it->size,
				    sizeof(*bg));
	/* extent-tree-v2 reuses chunk_objectid as the global root id. */
	if (!(c->incompat_flags & BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2) &&
	    btrfs_block_group_chunk_objectid(bg) != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
		return ITEM_CORRUPT(it, "block group chunk_objectid %llu, expect %llu",
				    (unsigned long long)btrfs_block_group_chunk_objectid(bg),
				    (unsigned long long)BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	if (btrfs_block_group_used(bg) > it->key.offset)
		return ITEM_CORRUPT(it, "block group used %llu > length %llu",
				    (unsigned long long)btrfs_block_group_used(bg),
				    (unsigned long long)it->key.offset);
	flags = btrfs_block_group_flags(bg);
	if (chk_popcount64(flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) > 1)
		return ITEM_CORRUPT(it, "block group flags 0x%llx have several profiles",
				    (unsigned long long)flags);
	type = flags & BTRFS_BLOCK_GROUP_TYPE_MASK;
	if (type != BTRFS_BLOCK_GROUP_DATA && type != BTRFS_BLOCK_GROUP_METADATA &&
	    type != BTRFS_BLOCK_GROUP_SYSTEM &&
	    type != (BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA))
		return ITEM_CORRUPT(it, "block group type 0x%llx invalid", (unsigned long long)type);
	return 0;
}

/* ---- EXTENT_ITEM, METADATA_ITEM and keyed back references --------------- */

/* Trees that may own data: subvolumes, the data reloc tree, and the root
 * tree (v1 free space cache inodes). */
static bool valid_data_ref_root(uint64_t root)
{
	return chk_is_fstree(root) || root == BTRFS_DATA_RELOC_TREE_OBJECTID ||
	       root == BTRFS_ROOT_TREE_OBJECTID;
}

/* One extent_data_ref, inline or keyed. */
static int check_data_ref_body(const struct item *it, const struct btrfs_extent_data_ref *dref)
{
	const uint32_t ss = it->b->ctx->sectorsize;
	uint64_t root = btrfs_extent_data_ref_root(dref);
	uint64_t ino = btrfs_extent_data_ref_objectid(dref);
	uint64_t off = btrfs_extent_data_ref_offset(dref);

	if (!valid_data_ref_root(root))
		return ITEM_CORRUPT(it, "data ref root %llu cannot own data",
				    (unsigned long long)root);
	/*
	 * The kernel also refuses FREE_INO_OBJECTID, but filesystems that
	 * used the (removed) inode cache hold data of that inode; reading
	 * them is harmless, so we accept it.
	 */
	if ((ino < BTRFS_FIRST_FREE_OBJECTID || ino > BTRFS_LAST_FREE_OBJECTID) &&
	    ino != BTRFS_FREE_INO_OBJECTID)
		return ITEM_CORRUPT(it, "data ref inode %lld out of range", (long long)(int64_t)ino);
	if (!chk_aligned(off, ss))
		return ITEM_CORRUPT(it, "data ref offset %llu not aligned to %u",
				    (unsigned long long)off, ss);
	if (btrfs_extent_data_ref_count(dref) == 0)
		return ITEM_CORRUPT(it, "data ref count 0");
	return 0;
}

static int check_extent_item(const struct item *it)
{
	const struct ubt_check_ctx *c = it->b->ctx;
	const struct btrfs_extent_item *ei = (const struct btrfs_extent_item *)it->data;
	const bool skinny = it->key.type == BTRFS_METADATA_ITEM_KEY;
	const uint32_t ss = c->sectorsize;
	uint64_t flags, refs, inline_refs = 0, last_seq = UINT64_MAX;
	uint8_t last_type = 0;
	bool tree_block;
	uint32_t cur;
	int ret;

	if (skinny && !(c->incompat_flags & BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA))
		return ITEM_CORRUPT(it, "METADATA_ITEM without SKINNY_METADATA feature");
	if (!chk_aligned(it->key.objectid, ss))
		return ITEM_CORRUPT(it, "extent start %llu not aligned to sectorsize %u",
				    (unsigned long long)it->key.objectid, ss);
	if (skinny && it->key.offset >= BTRFS_MAX_LEVEL)
		return ITEM_CORRUPT(it, "metadata item level %llu, expect < %u",
				    (unsigned long long)it->key.offset, BTRFS_MAX_LEVEL);
	if (it->size < sizeof(*ei))
		return ITEM_CORRUPT(it, "extent item size %u < %zu", it->size, sizeof(*ei));
	flags = btrfs_extent_flags(ei);
	refs = btrfs_extent_refs(ei);
	if (chk_gen_in_future(c, btrfs_extent_generation(ei)))
		return ITEM_CORRUPT(it, "extent generation %llu beyond filesystem generation %llu",
				    (unsigned long long)btrfs_extent_generation(ei),
				    (unsigned long long)c->super_generation);
	if (chk_popcount64(flags & (BTRFS_EXTENT_FLAG_DATA | BTRFS_EXTENT_FLAG_TREE_BLOCK)) != 1)
		return ITEM_CORRUPT(it, "extent flags 0x%llx: expect exactly one of DATA, TREE_BLOCK",
				    (unsigned long long)flags);
	tree_block = (flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) != 0;
	if (tree_block) {
		if (!skinny && it->key.offset != c->nodesize)
			return ITEM_CORRUPT(it, "tree block extent length %llu, expect nodesize %u",
					    (unsigned long long)it->key.offset, c->nodesize);
	} else {
		if (skinny)
			return ITEM_CORRUPT(it, "data extent keyed as METADATA_ITEM");
		/* Zero length: not a kernel rule. */
		if (it->key.offset == 0 || !chk_aligned(it->key.offset, ss))
			return ITEM_CORRUPT(it, "data extent length %llu invalid",
					    (unsigned long long)it->key.offset);
		if (flags & BTRFS_BLOCK_FLAG_FULL_BACKREF)
			return ITEM_CORRUPT(it, "data extent with FULL_BACKREF flag");
	}
	cur = (uint32_t)sizeof(*ei);
	if (tree_block && !skinny) {
		const struct btrfs_tree_block_info *info;

		if (it->size - cur < sizeof(*info))
			return ITEM_CORRUPT(it, "tree block extent item size %u lacks block info",
					    it->size);
		info = (const struct btrfs_tree_block_info *)(it->data + cur);
		if (btrfs_tree_block_info_level(info) >= BTRFS_MAX_LEVEL)
			return ITEM_CORRUPT(it, "tree block info level %u, expect < %u",
					    btrfs_tree_block_info_level(info), BTRFS_MAX_LEVEL);
		cur += (uint32_t)sizeof(*info);
	}

	/*
	 * Inline refs: ascending by type; within a type descending by
	 * sequence (the offset, or the hash for EXTENT_DATA_REF); ending
	 * exactly at the item end.
	 */
	while (cur < it->size) {
		const struct btrfs_extent_inline_ref *iref =
			(const struct btrfs_extent_inline_ref *)(it->data + cur);
		uint32_t rsize;
		uint8_t type;
		uint64_t seq;

		if (it->size - cur < sizeof(*iref))
			return ITEM_CORRUPT(it, "inline ref at %u crosses item end %u", cur, it->size);
		type = btrfs_extent_inline_ref_type(iref);
		rsize = btrfs_extent_inline_ref_size(type);
		if (rsize == 0)
			return ITEM_CORRUPT(it, "inline ref at %u has unknown type %u", cur, type);
		if (rsize > it->size - cur)
			return ITEM_CORRUPT(it, "inline ref at %u (%u bytes) crosses item end %u", cur,
					    rsize, it->size);
		seq = btrfs_extent_inline_ref_offset(iref);
		switch (type) {
		case BTRFS_TREE_BLOCK_REF_KEY:
		case BTRFS_SHARED_BLOCK_REF_KEY:
			/* Not a kernel rule: block refs only on tree blocks. */
			if (!tree_block)
				return ITEM_CORRUPT(it, "tree block ref on a data extent");
			if (type == BTRFS_SHARED_BLOCK_REF_KEY && !chk_aligned(seq, ss))
				return ITEM_CORRUPT(it, "shared block ref parent %llu not aligned",
						    (unsigned long long)seq);
			inline_refs++;
			break;
		case BTRFS_EXTENT_DATA_REF_KEY: {
			const struct btrfs_extent_data_ref *dref =
				btrfs_extent_inline_ref_data_ref(iref);

			if (tree_block)
				return ITEM_CORRUPT(it, "data ref on a tree block");
			ret = check_data_ref_body(it, dref);
			if (ret)
				return ret;
			seq = ubt_extent_data_ref_hash(btrfs_extent_data_ref_root(dref),
						   btrfs_extent_data_ref_objectid(dref),
						   btrfs_extent_data_ref_offset(dref));
			inline_refs += btrfs_extent_data_ref_count(dref);
			break;
		}
		case BTRFS_SHARED_DATA_REF_KEY: {
			const struct btrfs_shared_data_ref *sref =
				btrfs_extent_inline_ref_shared_data_ref(iref);

			if (tree_block)
				return ITEM_CORRUPT(it, "shared data ref on a tree block");
			if (!chk_aligned(seq, ss))
				return ITEM_CORRUPT(it, "shared data ref parent %llu not aligned",
						    (unsigned long long)seq);
			if (btrfs_shared_data_ref_count(sref) == 0)
				return ITEM_CORRUPT(it, "shared data ref count 0");
			inline_refs += btrfs_shared_data_ref_count(sref);
			break;
		}
		case BTRFS_EXTENT_OWNER_REF_KEY:
			/* Simple quotas: owner root, not counted as a reference. */
			break;
		}
		if (type < last_type)
			return ITEM_CORRUPT(it, "inline ref type %u after type %u: out of order", type,
					    last_type);
		if (type > last_type)
			last_seq = UINT64_MAX;
		if (seq > last_seq)
			return ITEM_CORRUPT(it, "inline ref type %u sequence 0x%llx after 0x%llx: "
					    "out of order", type, (unsigned long long)seq,
					    (unsigned long long)last_seq);
		last_type = type;
		last_seq = seq;
		cur += rsize;
	}
	if (inline_refs > refs)
		return ITEM_CORRUPT(it, "extent refs %llu < inline refs %llu",
				    (unsigned long long)refs, (unsigned long long)inline_refs);
	if (it->slot > 0 && (it->prev.type == BTRFS_EXTENT_ITEM_KEY ||
			     it->prev.type == BTRFS_METADATA_ITEM_KEY)) {
		uint64_t prev_len = it->prev.type == BTRFS_METADATA_ITEM_KEY ? c->nodesize
									      : it->prev.offset;
		uint64_t prev_end = chk_add_sat(it->prev.objectid, prev_len);

		if (prev_end > it->key.objectid)
			return ITEM_CORRUPT(it, "previous extent ends at %llu, past this start",
					    (unsigned long long)prev_end);
	}
	return 0;
}

static int check_keyed_ref(const struct item *it)
{
	const uint32_t ss = it->b->ctx->sectorsize;
	uint32_t want = 0;

	if (it->key.type == BTRFS_SHARED_DATA_REF_KEY)
		want = (uint32_t)sizeof(struct btrfs_shared_data_ref);
	if (it->size != want)
		return ITEM_CORRUPT(it, "back reference item size %u, expect %u", it->size, want);
	if (it->key.type == BTRFS_SHARED_DATA_REF_KEY &&
	    btrfs_shared_data_ref_count((const struct btrfs_shared_data_ref *)it->data) == 0)
		return ITEM_CORRUPT(it, "shared data ref count 0");
	if (!chk_aligned(it->key.objectid, ss))
		return ITEM_CORRUPT(it, "back reference extent %llu not aligned to %u",
				    (unsigned long long)it->key.objectid, ss);
	/* SHARED_* refs are keyed by the parent block address. */
	if (it->key.type != BTRFS_TREE_BLOCK_REF_KEY && !chk_aligned(it->key.offset, ss))
		return ITEM_CORRUPT(it, "back reference parent %llu not aligned to %u",
				    (unsigned long long)it->key.offset, ss);
	return 0;
}

static int check_keyed_data_ref(const struct item *it)
{
	const uint32_t dsize = (uint32_t)sizeof(struct btrfs_extent_data_ref);
	int ret;

	/* Empty: not a kernel rule (an empty ref item would be deleted). */
	if (it->size == 0 || it->size % dsize != 0)
		return ITEM_CORRUPT(it, "extent data ref item size %u, expect a multiple of %u",
				    it->size, dsize);
	if (!chk_aligned(it->key.objectid, it->b->ctx->sectorsize))
		return ITEM_CORRUPT(it, "extent data ref extent %llu not aligned",
				    (unsigned long long)it->key.objectid);
	/* The key offset is a hash that collisions may have bumped: unchecked. */
	for (uint32_t cur = 0; cur < it->size; cur += dsize) {
		ret = check_data_ref_body(it, (const struct btrfs_extent_data_ref *)(it->data + cur));
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- free space tree ---------------------------------------------------- */

static int check_free_space_key(const struct item *it)
{
	const uint32_t ss = it->b->ctx->sectorsize;

	if (!chk_aligned(it->key.objectid, ss) || !chk_aligned(it->key.offset, ss) || it->key.offset == 0)
		return ITEM_CORRUPT(it, "free space key range not sector aligned or empty");
	return 0;
}

static int check_free_space_item(const struct item *it)
{
	const uint32_t ss = it->b->ctx->sectorsize;
	int ret = check_free_space_key(it);

	if (ret)
		return ret;
	switch (it->key.type) {
	case BTRFS_FREE_SPACE_INFO_KEY: {
		const struct btrfs_free_space_info *fsi =
			(const struct btrfs_free_space_info *)it->data;

		if (it->size != sizeof(*fsi))
			return ITEM_CORRUPT(it, "free space info size %u, expect %zu", it->size,
					    sizeof(*fsi));
		if (btrfs_free_space_info_flags(fsi) & ~(uint32_t)BTRFS_FREE_SPACE_USING_BITMAPS)
			return ITEM_CORRUPT(it, "free space info flags 0x%x unknown",
					    btrfs_free_space_info_flags(fsi));
		if (btrfs_free_space_info_extent_count(fsi) > it->key.offset / ss)
			return ITEM_CORRUPT(it, "free space extent count %u too large for %llu bytes",
					    btrfs_free_space_info_extent_count(fsi),
					    (unsigned long long)it->key.offset);
		return 0;
	}
	case BTRFS_FREE_SPACE_EXTENT_KEY:
		if (it->size != 0)
			return ITEM_CORRUPT(it, "free space extent size %u, expect 0", it->size);
		return 0;
	default: {
		/* Not a kernel rule: one bit per sector of the range. */
		uint64_t bits = it->key.offset / ss;
		uint64_t want = bits / 8 + (bits % 8 != 0);

		if (it->size != want)
			return ITEM_CORRUPT(it, "free space bitmap size %u, range needs %llu", it->size,
					    (unsigned long long)want);
		return 0;
	}
	}
}

/* ---- fixed-size items without further rules ------------------------------ */

static int check_exact_size(const struct item *it, const char *what, uint32_t want)
{
	if (it->size != want)
		return ITEM_CORRUPT(it, "%s item size %u, expect %u", what, it->size, want);
	return 0;
}

int ubt_checker_item(const struct item *it)
{
	switch (it->key.type) {
	case BTRFS_INODE_ITEM_KEY:
		return check_inode_item(it);
	case BTRFS_INODE_REF_KEY:
		return check_inode_ref(it);
	case BTRFS_INODE_EXTREF_KEY:
		return check_inode_extref(it);
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
	case BTRFS_XATTR_ITEM_KEY:
		return check_dir_item(it);
	case BTRFS_EXTENT_DATA_KEY:
		return check_file_extent(it);
	case BTRFS_EXTENT_CSUM_KEY:
		return check_csum_item(it);
	case BTRFS_ROOT_ITEM_KEY:
		return check_root_item(it);
	case BTRFS_ROOT_REF_KEY:
	case BTRFS_ROOT_BACKREF_KEY:
		return check_root_ref(it);
	case BTRFS_EXTENT_ITEM_KEY:
	case BTRFS_METADATA_ITEM_KEY:
		return check_extent_item(it);
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_SHARED_DATA_REF_KEY:
		return check_keyed_ref(it);
	case BTRFS_EXTENT_DATA_REF_KEY:
		return check_keyed_data_ref(it);
	case BTRFS_BLOCK_GROUP_ITEM_KEY:
		return check_block_group_item(it);
	case BTRFS_FREE_SPACE_INFO_KEY:
	case BTRFS_FREE_SPACE_EXTENT_KEY:
	case BTRFS_FREE_SPACE_BITMAP_KEY:
		return check_free_space_item(it);
	case BTRFS_DEV_EXTENT_KEY:
		return check_dev_extent(it);
	case BTRFS_DEV_ITEM_KEY:
		return check_dev_item(it);
	case BTRFS_CHUNK_ITEM_KEY:
		return check_chunk_item(it);
	case BTRFS_RAID_STRIPE_KEY:
		if (!(it->b->ctx->incompat_flags & BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE))
			return ITEM_CORRUPT(it, "raid stripe item without RAID_STRIPE_TREE feature");
		if (!chk_aligned(it->key.objectid, it->b->ctx->sectorsize))
			return ITEM_CORRUPT(it, "raid stripe start %llu not sector aligned",
					    (unsigned long long)it->key.objectid);
		/* Body layout differs between kernel versions: left to its reader. */
		return 0;
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		if (it->size % sizeof(uint64_t) != 0)
			return ITEM_CORRUPT(it, "uuid item size %u not a multiple of 8", it->size);
		return 0;
	case BTRFS_QGROUP_STATUS_KEY:
		/* 32 bytes before simple quotas added enable_gen; larger is fine. */
		if (it->size < BTRFS_QGROUP_STATUS_ITEM_V1_SIZE)
			return ITEM_CORRUPT(it, "qgroup status item size %u < %u", it->size,
					    BTRFS_QGROUP_STATUS_ITEM_V1_SIZE);
		return 0;
	case BTRFS_QGROUP_INFO_KEY:
		return check_exact_size(it, "qgroup info",
					(uint32_t)sizeof(struct btrfs_qgroup_info_item));
	case BTRFS_QGROUP_LIMIT_KEY:
		return check_exact_size(it, "qgroup limit",
					(uint32_t)sizeof(struct btrfs_qgroup_limit_item));
	case BTRFS_QGROUP_RELATION_KEY:
		return check_exact_size(it, "qgroup relation", 0);
	case BTRFS_DIR_LOG_ITEM_KEY:
	case BTRFS_DIR_LOG_INDEX_KEY:
		return check_exact_size(it, "dir log", (uint32_t)sizeof(struct btrfs_dir_log_item));
	case BTRFS_ORPHAN_ITEM_KEY:
		return check_exact_size(it, "orphan", 0);
	default:
		/*
		 * Unknown types, and types whose readers must check the size
		 * themselves: DEV_REPLACE (the kernel ignores a wrong-sized
		 * one instead of refusing the device tree), PERSISTENT_ITEM
		 * dev stats (older and newer kernels store fewer or more
		 * counters), TEMPORARY_ITEM (balance), verity items, free
		 * space cache headers, STRING_ITEM.
		 */
		return 0;
	}
}

