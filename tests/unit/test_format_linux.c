/* SPDX-License-Identifier: MIT */
/*
 * test_format_linux.c - layout facts taken from the Linux uapi header
 * <linux/btrfs_tree.h>, exported as plain tables for test_format.c to compare
 * against btrfs_format.h.  This translation unit must NOT include our header
 * (same struct names); test_format.c must not include the Linux one.
 *
 * The uapi header has grown over time (Debian 12 ships the 6.1 version, which
 * lacks the superblock and tree block structs), so newer pieces are guarded
 * by a macro that arrived with them.  Fields whose uapi name changed between
 * kernel versions are left out (their neighbours' offsets still pin them).
 */
#include <stddef.h>
#include <stdint.h>

/* Shared with test_format.c (declared identically there). */
struct ubt_layout_field {
	const char *name;
	size_t offset;
};

struct ubt_layout {
	const char *name;
	size_t size;
	const struct ubt_layout_field *fields;
	size_t nfields;
};

struct ubt_const {
	const char *name;
	uint64_t value;
};

extern const struct ubt_layout ubt_linux_layouts[];
extern const size_t ubt_linux_nlayouts;
extern const struct ubt_const ubt_linux_consts[];
extern const size_t ubt_linux_nconsts;

#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/btrfs_tree.h>)
#define HAVE_LINUX_BTRFS_TREE 1
#endif
#endif

#ifdef HAVE_LINUX_BTRFS_TREE
#include <linux/btrfs_tree.h>

#define F(s, m) { #m, offsetof(struct s, m) }
#define L(s, arr) { #s, sizeof(struct s), arr, sizeof(arr) / sizeof(arr[0]) }

static const struct ubt_layout_field f_disk_key[] = {
	F(btrfs_disk_key, objectid), F(btrfs_disk_key, type), F(btrfs_disk_key, offset),
};
static const struct ubt_layout_field f_dev_item[] = {
	F(btrfs_dev_item, devid), F(btrfs_dev_item, total_bytes),
	F(btrfs_dev_item, bytes_used), F(btrfs_dev_item, io_align),
	F(btrfs_dev_item, io_width), F(btrfs_dev_item, sector_size),
	F(btrfs_dev_item, type), F(btrfs_dev_item, generation),
	F(btrfs_dev_item, start_offset), F(btrfs_dev_item, dev_group),
	F(btrfs_dev_item, seek_speed), F(btrfs_dev_item, bandwidth),
	F(btrfs_dev_item, uuid), F(btrfs_dev_item, fsid),
};
static const struct ubt_layout_field f_stripe[] = {
	F(btrfs_stripe, devid), F(btrfs_stripe, offset), F(btrfs_stripe, dev_uuid),
};
static const struct ubt_layout_field f_chunk[] = {
	F(btrfs_chunk, length), F(btrfs_chunk, owner), F(btrfs_chunk, stripe_len),
	F(btrfs_chunk, type), F(btrfs_chunk, io_align), F(btrfs_chunk, io_width),
	F(btrfs_chunk, sector_size), F(btrfs_chunk, num_stripes),
	F(btrfs_chunk, sub_stripes), F(btrfs_chunk, stripe),
};
static const struct ubt_layout_field f_free_space_entry[] = {
	F(btrfs_free_space_entry, offset), F(btrfs_free_space_entry, bytes),
	F(btrfs_free_space_entry, type),
};
static const struct ubt_layout_field f_free_space_header[] = {
	F(btrfs_free_space_header, location), F(btrfs_free_space_header, generation),
	F(btrfs_free_space_header, num_entries), F(btrfs_free_space_header, num_bitmaps),
};
static const struct ubt_layout_field f_extent_item[] = {
	F(btrfs_extent_item, refs), F(btrfs_extent_item, generation),
	F(btrfs_extent_item, flags),
};
static const struct ubt_layout_field f_extent_item_v0[] = {
	F(btrfs_extent_item_v0, refs),
};
static const struct ubt_layout_field f_tree_block_info[] = {
	F(btrfs_tree_block_info, key), F(btrfs_tree_block_info, level),
};
static const struct ubt_layout_field f_extent_data_ref[] = {
	F(btrfs_extent_data_ref, root), F(btrfs_extent_data_ref, objectid),
	F(btrfs_extent_data_ref, offset), F(btrfs_extent_data_ref, count),
};
static const struct ubt_layout_field f_shared_data_ref[] = {
	F(btrfs_shared_data_ref, count),
};
static const struct ubt_layout_field f_extent_inline_ref[] = {
	F(btrfs_extent_inline_ref, type), F(btrfs_extent_inline_ref, offset),
};
static const struct ubt_layout_field f_dev_extent[] = {
	F(btrfs_dev_extent, chunk_tree), F(btrfs_dev_extent, chunk_objectid),
	F(btrfs_dev_extent, chunk_offset), F(btrfs_dev_extent, length),
	F(btrfs_dev_extent, chunk_tree_uuid),
};
static const struct ubt_layout_field f_inode_ref[] = {
	F(btrfs_inode_ref, index), F(btrfs_inode_ref, name_len),
};
static const struct ubt_layout_field f_inode_extref[] = {
	F(btrfs_inode_extref, parent_objectid), F(btrfs_inode_extref, index),
	F(btrfs_inode_extref, name_len), F(btrfs_inode_extref, name),
};
static const struct ubt_layout_field f_timespec[] = {
	F(btrfs_timespec, sec), F(btrfs_timespec, nsec),
};
static const struct ubt_layout_field f_inode_item[] = {
	F(btrfs_inode_item, generation), F(btrfs_inode_item, transid),
	F(btrfs_inode_item, size), F(btrfs_inode_item, nbytes),
	F(btrfs_inode_item, block_group), F(btrfs_inode_item, nlink),
	F(btrfs_inode_item, uid), F(btrfs_inode_item, gid),
	F(btrfs_inode_item, mode), F(btrfs_inode_item, rdev),
	F(btrfs_inode_item, flags), F(btrfs_inode_item, sequence),
	F(btrfs_inode_item, reserved), F(btrfs_inode_item, atime),
	F(btrfs_inode_item, ctime), F(btrfs_inode_item, mtime),
	F(btrfs_inode_item, otime),
};
static const struct ubt_layout_field f_dir_log_item[] = {
	F(btrfs_dir_log_item, end),
};
static const struct ubt_layout_field f_dir_item[] = {
	F(btrfs_dir_item, location), F(btrfs_dir_item, transid),
	F(btrfs_dir_item, data_len), F(btrfs_dir_item, name_len),
	F(btrfs_dir_item, type),
};
static const struct ubt_layout_field f_root_item[] = {
	F(btrfs_root_item, inode), F(btrfs_root_item, generation),
	F(btrfs_root_item, root_dirid), F(btrfs_root_item, bytenr),
	F(btrfs_root_item, byte_limit), F(btrfs_root_item, bytes_used),
	F(btrfs_root_item, last_snapshot), F(btrfs_root_item, flags),
	F(btrfs_root_item, refs), F(btrfs_root_item, drop_progress),
	F(btrfs_root_item, drop_level), F(btrfs_root_item, level),
	F(btrfs_root_item, generation_v2), F(btrfs_root_item, uuid),
	F(btrfs_root_item, parent_uuid), F(btrfs_root_item, received_uuid),
	F(btrfs_root_item, ctransid), F(btrfs_root_item, otransid),
	F(btrfs_root_item, stransid), F(btrfs_root_item, rtransid),
	F(btrfs_root_item, ctime), F(btrfs_root_item, otime),
	F(btrfs_root_item, stime), F(btrfs_root_item, rtime),
	F(btrfs_root_item, reserved),
};
static const struct ubt_layout_field f_root_ref[] = {
	F(btrfs_root_ref, dirid), F(btrfs_root_ref, sequence),
	F(btrfs_root_ref, name_len),
};
static const struct ubt_layout_field f_disk_balance_args[] = {
	F(btrfs_disk_balance_args, profiles), F(btrfs_disk_balance_args, usage),
	F(btrfs_disk_balance_args, usage_min), F(btrfs_disk_balance_args, usage_max),
	F(btrfs_disk_balance_args, devid), F(btrfs_disk_balance_args, pstart),
	F(btrfs_disk_balance_args, pend), F(btrfs_disk_balance_args, vstart),
	F(btrfs_disk_balance_args, vend), F(btrfs_disk_balance_args, target),
	F(btrfs_disk_balance_args, flags), F(btrfs_disk_balance_args, limit),
	F(btrfs_disk_balance_args, limit_min), F(btrfs_disk_balance_args, limit_max),
	F(btrfs_disk_balance_args, stripes_min), F(btrfs_disk_balance_args, stripes_max),
	F(btrfs_disk_balance_args, unused),
};
static const struct ubt_layout_field f_balance_item[] = {
	F(btrfs_balance_item, flags), F(btrfs_balance_item, data),
	F(btrfs_balance_item, meta), F(btrfs_balance_item, sys),
	F(btrfs_balance_item, unused),
};
static const struct ubt_layout_field f_file_extent_item[] = {
	F(btrfs_file_extent_item, generation), F(btrfs_file_extent_item, ram_bytes),
	F(btrfs_file_extent_item, compression), F(btrfs_file_extent_item, encryption),
	F(btrfs_file_extent_item, other_encoding), F(btrfs_file_extent_item, type),
	F(btrfs_file_extent_item, disk_bytenr), F(btrfs_file_extent_item, disk_num_bytes),
	F(btrfs_file_extent_item, offset), F(btrfs_file_extent_item, num_bytes),
};
static const struct ubt_layout_field f_dev_stats_item[] = {
	F(btrfs_dev_stats_item, values),
};
static const struct ubt_layout_field f_dev_replace_item[] = {
	F(btrfs_dev_replace_item, src_devid), F(btrfs_dev_replace_item, cursor_left),
	F(btrfs_dev_replace_item, cursor_right),
	F(btrfs_dev_replace_item, cont_reading_from_srcdev_mode),
	F(btrfs_dev_replace_item, replace_state), F(btrfs_dev_replace_item, time_started),
	F(btrfs_dev_replace_item, time_stopped), F(btrfs_dev_replace_item, num_write_errors),
	F(btrfs_dev_replace_item, num_uncorrectable_read_errors),
};
static const struct ubt_layout_field f_block_group_item[] = {
	F(btrfs_block_group_item, used), F(btrfs_block_group_item, chunk_objectid),
	F(btrfs_block_group_item, flags),
};
static const struct ubt_layout_field f_free_space_info[] = {
	F(btrfs_free_space_info, extent_count), F(btrfs_free_space_info, flags),
};
static const struct ubt_layout_field f_qgroup_status_item[] = {
	F(btrfs_qgroup_status_item, version), F(btrfs_qgroup_status_item, generation),
	F(btrfs_qgroup_status_item, flags), F(btrfs_qgroup_status_item, rescan),
#ifdef BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE
	F(btrfs_qgroup_status_item, enable_gen),
#endif
};
static const struct ubt_layout_field f_qgroup_info_item[] = {
	F(btrfs_qgroup_info_item, generation), F(btrfs_qgroup_info_item, rfer),
	F(btrfs_qgroup_info_item, rfer_cmpr), F(btrfs_qgroup_info_item, excl),
	F(btrfs_qgroup_info_item, excl_cmpr),
};
static const struct ubt_layout_field f_qgroup_limit_item[] = {
	F(btrfs_qgroup_limit_item, flags), F(btrfs_qgroup_limit_item, max_rfer),
	F(btrfs_qgroup_limit_item, max_excl), F(btrfs_qgroup_limit_item, rsv_rfer),
	F(btrfs_qgroup_limit_item, rsv_excl),
};
#ifdef BTRFS_VERITY_DESC_ITEM_KEY
static const struct ubt_layout_field f_verity_descriptor_item[] = {
	F(btrfs_verity_descriptor_item, size), F(btrfs_verity_descriptor_item, reserved),
	F(btrfs_verity_descriptor_item, encryption),
};
#endif
#ifdef BTRFS_MAGIC	/* tree block and superblock structs moved to uapi in 6.2 */
static const struct ubt_layout_field f_header[] = {
	F(btrfs_header, csum), F(btrfs_header, fsid), F(btrfs_header, bytenr),
	F(btrfs_header, flags), F(btrfs_header, chunk_tree_uuid),
	F(btrfs_header, generation), F(btrfs_header, owner),
	F(btrfs_header, nritems), F(btrfs_header, level),
};
static const struct ubt_layout_field f_item[] = {
	F(btrfs_item, key), F(btrfs_item, offset), F(btrfs_item, size),
};
static const struct ubt_layout_field f_key_ptr[] = {
	F(btrfs_key_ptr, key), F(btrfs_key_ptr, blockptr), F(btrfs_key_ptr, generation),
};
static const struct ubt_layout_field f_root_backup[] = {
	F(btrfs_root_backup, tree_root), F(btrfs_root_backup, tree_root_gen),
	F(btrfs_root_backup, chunk_root), F(btrfs_root_backup, chunk_root_gen),
	F(btrfs_root_backup, extent_root), F(btrfs_root_backup, extent_root_gen),
	F(btrfs_root_backup, fs_root), F(btrfs_root_backup, fs_root_gen),
	F(btrfs_root_backup, dev_root), F(btrfs_root_backup, dev_root_gen),
	F(btrfs_root_backup, csum_root), F(btrfs_root_backup, csum_root_gen),
	F(btrfs_root_backup, total_bytes), F(btrfs_root_backup, bytes_used),
	F(btrfs_root_backup, num_devices), F(btrfs_root_backup, unused_64),
	F(btrfs_root_backup, tree_root_level), F(btrfs_root_backup, chunk_root_level),
	F(btrfs_root_backup, extent_root_level), F(btrfs_root_backup, fs_root_level),
	F(btrfs_root_backup, dev_root_level), F(btrfs_root_backup, csum_root_level),
	F(btrfs_root_backup, unused_8),
};
/* log_root_transid / leafsize were renamed __unused_* in newer kernels and the
 * region 587..810 changed shape with extent-tree-v2 experiments: skipped. */
static const struct ubt_layout_field f_super_block[] = {
	F(btrfs_super_block, csum), F(btrfs_super_block, fsid),
	F(btrfs_super_block, bytenr), F(btrfs_super_block, flags),
	F(btrfs_super_block, magic), F(btrfs_super_block, generation),
	F(btrfs_super_block, root), F(btrfs_super_block, chunk_root),
	F(btrfs_super_block, log_root), F(btrfs_super_block, total_bytes),
	F(btrfs_super_block, bytes_used), F(btrfs_super_block, root_dir_objectid),
	F(btrfs_super_block, num_devices), F(btrfs_super_block, sectorsize),
	F(btrfs_super_block, nodesize), F(btrfs_super_block, stripesize),
	F(btrfs_super_block, sys_chunk_array_size),
	F(btrfs_super_block, chunk_root_generation),
	F(btrfs_super_block, compat_flags), F(btrfs_super_block, compat_ro_flags),
	F(btrfs_super_block, incompat_flags), F(btrfs_super_block, csum_type),
	F(btrfs_super_block, root_level), F(btrfs_super_block, chunk_root_level),
	F(btrfs_super_block, log_root_level), F(btrfs_super_block, dev_item),
	F(btrfs_super_block, label), F(btrfs_super_block, cache_generation),
	F(btrfs_super_block, uuid_tree_generation), F(btrfs_super_block, metadata_uuid),
	F(btrfs_super_block, sys_chunk_array), F(btrfs_super_block, super_roots),
	F(btrfs_super_block, padding),
};
#endif
#ifdef BTRFS_RAID_STRIPE_KEY
static const struct ubt_layout_field f_raid_stride[] = {
	F(btrfs_raid_stride, devid),
};
#endif
#ifdef BTRFS_EXTENT_OWNER_REF_KEY
static const struct ubt_layout_field f_extent_owner_ref[] = {
	F(btrfs_extent_owner_ref, root_id),
};
#endif

const struct ubt_layout ubt_linux_layouts[] = {
	L(btrfs_disk_key, f_disk_key),
	L(btrfs_dev_item, f_dev_item),
	L(btrfs_stripe, f_stripe),
	L(btrfs_chunk, f_chunk),
	L(btrfs_free_space_entry, f_free_space_entry),
	L(btrfs_free_space_header, f_free_space_header),
	L(btrfs_extent_item, f_extent_item),
	L(btrfs_extent_item_v0, f_extent_item_v0),
	L(btrfs_tree_block_info, f_tree_block_info),
	L(btrfs_extent_data_ref, f_extent_data_ref),
	L(btrfs_shared_data_ref, f_shared_data_ref),
	L(btrfs_extent_inline_ref, f_extent_inline_ref),
	L(btrfs_dev_extent, f_dev_extent),
	L(btrfs_inode_ref, f_inode_ref),
	L(btrfs_inode_extref, f_inode_extref),
	L(btrfs_timespec, f_timespec),
	L(btrfs_inode_item, f_inode_item),
	L(btrfs_dir_log_item, f_dir_log_item),
	L(btrfs_dir_item, f_dir_item),
	L(btrfs_root_item, f_root_item),
	L(btrfs_root_ref, f_root_ref),
	L(btrfs_disk_balance_args, f_disk_balance_args),
	L(btrfs_balance_item, f_balance_item),
	L(btrfs_file_extent_item, f_file_extent_item),
	L(btrfs_dev_stats_item, f_dev_stats_item),
	L(btrfs_dev_replace_item, f_dev_replace_item),
	L(btrfs_block_group_item, f_block_group_item),
	L(btrfs_free_space_info, f_free_space_info),
	L(btrfs_qgroup_status_item, f_qgroup_status_item),
	L(btrfs_qgroup_info_item, f_qgroup_info_item),
	L(btrfs_qgroup_limit_item, f_qgroup_limit_item),
#ifdef BTRFS_VERITY_DESC_ITEM_KEY
	L(btrfs_verity_descriptor_item, f_verity_descriptor_item),
#endif
#ifdef BTRFS_MAGIC
	L(btrfs_header, f_header),
	L(btrfs_item, f_item),
	L(btrfs_key_ptr, f_key_ptr),
	L(btrfs_root_backup, f_root_backup),
	L(btrfs_super_block, f_super_block),
#endif
#ifdef BTRFS_RAID_STRIPE_KEY
	L(btrfs_raid_stride, f_raid_stride),
#endif
#ifdef BTRFS_EXTENT_OWNER_REF_KEY
	L(btrfs_extent_owner_ref, f_extent_owner_ref),
#endif
};
const size_t ubt_linux_nlayouts = sizeof(ubt_linux_layouts) / sizeof(ubt_linux_layouts[0]);

#define C(name) { #name, (uint64_t)(name) }

/* Constants the uapi header has carried since well before 6.1. */
const struct ubt_const ubt_linux_consts[] = {
	C(BTRFS_CSUM_SIZE), C(BTRFS_FSID_SIZE), C(BTRFS_UUID_SIZE),
	C(BTRFS_LABEL_SIZE), C(BTRFS_DEV_STAT_VALUES_MAX),
	/* tree and special objectids */
	C(BTRFS_ROOT_TREE_OBJECTID), C(BTRFS_EXTENT_TREE_OBJECTID),
	C(BTRFS_CHUNK_TREE_OBJECTID), C(BTRFS_DEV_TREE_OBJECTID),
	C(BTRFS_FS_TREE_OBJECTID), C(BTRFS_ROOT_TREE_DIR_OBJECTID),
	C(BTRFS_CSUM_TREE_OBJECTID), C(BTRFS_QUOTA_TREE_OBJECTID),
	C(BTRFS_UUID_TREE_OBJECTID), C(BTRFS_FREE_SPACE_TREE_OBJECTID),
	C(BTRFS_DEV_STATS_OBJECTID), C(BTRFS_BALANCE_OBJECTID),
	C(BTRFS_ORPHAN_OBJECTID), C(BTRFS_TREE_LOG_OBJECTID),
	C(BTRFS_TREE_LOG_FIXUP_OBJECTID), C(BTRFS_TREE_RELOC_OBJECTID),
	C(BTRFS_DATA_RELOC_TREE_OBJECTID), C(BTRFS_EXTENT_CSUM_OBJECTID),
	C(BTRFS_FREE_SPACE_OBJECTID), C(BTRFS_FREE_INO_OBJECTID),
	C(BTRFS_MULTIPLE_OBJECTIDS), C(BTRFS_FIRST_FREE_OBJECTID),
	C(BTRFS_LAST_FREE_OBJECTID), C(BTRFS_FIRST_CHUNK_TREE_OBJECTID),
	C(BTRFS_DEV_ITEMS_OBJECTID), C(BTRFS_BTREE_INODE_OBJECTID),
	C(BTRFS_EMPTY_SUBVOL_DIR_OBJECTID), C(BTRFS_DEV_REPLACE_DEVID),
	/* key types */
	C(BTRFS_INODE_ITEM_KEY), C(BTRFS_INODE_REF_KEY), C(BTRFS_INODE_EXTREF_KEY),
	C(BTRFS_XATTR_ITEM_KEY), C(BTRFS_ORPHAN_ITEM_KEY),
	C(BTRFS_DIR_LOG_ITEM_KEY), C(BTRFS_DIR_LOG_INDEX_KEY),
	C(BTRFS_DIR_ITEM_KEY), C(BTRFS_DIR_INDEX_KEY), C(BTRFS_EXTENT_DATA_KEY),
	C(BTRFS_EXTENT_CSUM_KEY), C(BTRFS_ROOT_ITEM_KEY), C(BTRFS_ROOT_BACKREF_KEY),
	C(BTRFS_ROOT_REF_KEY), C(BTRFS_EXTENT_ITEM_KEY), C(BTRFS_METADATA_ITEM_KEY),
	C(BTRFS_TREE_BLOCK_REF_KEY), C(BTRFS_EXTENT_DATA_REF_KEY),
	C(BTRFS_EXTENT_REF_V0_KEY), C(BTRFS_SHARED_BLOCK_REF_KEY),
	C(BTRFS_SHARED_DATA_REF_KEY), C(BTRFS_BLOCK_GROUP_ITEM_KEY),
	C(BTRFS_FREE_SPACE_INFO_KEY), C(BTRFS_FREE_SPACE_EXTENT_KEY),
	C(BTRFS_FREE_SPACE_BITMAP_KEY), C(BTRFS_DEV_EXTENT_KEY),
	C(BTRFS_DEV_ITEM_KEY), C(BTRFS_CHUNK_ITEM_KEY), C(BTRFS_QGROUP_STATUS_KEY),
	C(BTRFS_QGROUP_INFO_KEY), C(BTRFS_QGROUP_LIMIT_KEY),
	C(BTRFS_QGROUP_RELATION_KEY), C(BTRFS_BALANCE_ITEM_KEY),
	C(BTRFS_TEMPORARY_ITEM_KEY), C(BTRFS_DEV_STATS_KEY),
	C(BTRFS_PERSISTENT_ITEM_KEY), C(BTRFS_DEV_REPLACE_KEY),
	C(BTRFS_UUID_KEY_SUBVOL), C(BTRFS_UUID_KEY_RECEIVED_SUBVOL),
	C(BTRFS_STRING_ITEM_KEY),
	/* checksums, dir types */
	C(BTRFS_CSUM_TYPE_CRC32), C(BTRFS_CSUM_TYPE_XXHASH),
	C(BTRFS_CSUM_TYPE_SHA256), C(BTRFS_CSUM_TYPE_BLAKE2),
	C(BTRFS_FT_UNKNOWN), C(BTRFS_FT_REG_FILE), C(BTRFS_FT_DIR),
	C(BTRFS_FT_CHRDEV), C(BTRFS_FT_BLKDEV), C(BTRFS_FT_FIFO), C(BTRFS_FT_SOCK),
	C(BTRFS_FT_SYMLINK), C(BTRFS_FT_XATTR), C(BTRFS_FT_MAX),
	/* flags */
	C(BTRFS_FREE_SPACE_EXTENT), C(BTRFS_FREE_SPACE_BITMAP),
	C(BTRFS_HEADER_FLAG_WRITTEN), C(BTRFS_HEADER_FLAG_RELOC),
	C(BTRFS_SUPER_FLAG_ERROR), C(BTRFS_SUPER_FLAG_SEEDING),
	C(BTRFS_SUPER_FLAG_METADUMP), C(BTRFS_SUPER_FLAG_METADUMP_V2),
	C(BTRFS_SUPER_FLAG_CHANGING_FSID), C(BTRFS_SUPER_FLAG_CHANGING_FSID_V2),
	C(BTRFS_EXTENT_FLAG_DATA), C(BTRFS_EXTENT_FLAG_TREE_BLOCK),
	C(BTRFS_BLOCK_FLAG_FULL_BACKREF), C(BTRFS_EXTENT_FLAG_SUPER),
	C(BTRFS_ROOT_SUBVOL_RDONLY), C(BTRFS_ROOT_SUBVOL_DEAD),
	C(BTRFS_FILE_EXTENT_INLINE), C(BTRFS_FILE_EXTENT_REG),
	C(BTRFS_FILE_EXTENT_PREALLOC), C(BTRFS_NR_FILE_EXTENT_TYPES),
	C(BTRFS_DEV_REPLACE_ITEM_CONT_READING_FROM_SRCDEV_MODE_ALWAYS),
	C(BTRFS_DEV_REPLACE_ITEM_CONT_READING_FROM_SRCDEV_MODE_AVOID),
	C(BTRFS_BLOCK_GROUP_DATA), C(BTRFS_BLOCK_GROUP_SYSTEM),
	C(BTRFS_BLOCK_GROUP_METADATA), C(BTRFS_BLOCK_GROUP_RAID0),
	C(BTRFS_BLOCK_GROUP_RAID1), C(BTRFS_BLOCK_GROUP_DUP),
	C(BTRFS_BLOCK_GROUP_RAID10), C(BTRFS_BLOCK_GROUP_RAID5),
	C(BTRFS_BLOCK_GROUP_RAID6), C(BTRFS_BLOCK_GROUP_RAID1C3),
	C(BTRFS_BLOCK_GROUP_RAID1C4), C(BTRFS_BLOCK_GROUP_RESERVED),
	C(BTRFS_BLOCK_GROUP_TYPE_MASK), C(BTRFS_BLOCK_GROUP_PROFILE_MASK),
	C(BTRFS_BLOCK_GROUP_RAID56_MASK), C(BTRFS_BLOCK_GROUP_RAID1_MASK),
	C(BTRFS_AVAIL_ALLOC_BIT_SINGLE), C(BTRFS_SPACE_INFO_GLOBAL_RSV),
	C(BTRFS_EXTENDED_PROFILE_MASK), C(BTRFS_FREE_SPACE_USING_BITMAPS),
	C(BTRFS_QGROUP_LEVEL_SHIFT), C(BTRFS_QGROUP_STATUS_FLAG_ON),
	C(BTRFS_QGROUP_STATUS_FLAG_RESCAN), C(BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT),
	C(BTRFS_QGROUP_STATUS_VERSION),
	/* <linux/btrfs.h>, pulled in by btrfs_tree.h */
	C(BTRFS_QGROUP_LIMIT_MAX_RFER), C(BTRFS_QGROUP_LIMIT_MAX_EXCL),
	C(BTRFS_QGROUP_LIMIT_RSV_RFER), C(BTRFS_QGROUP_LIMIT_RSV_EXCL),
	C(BTRFS_QGROUP_LIMIT_RFER_CMPR), C(BTRFS_QGROUP_LIMIT_EXCL_CMPR),
	C(BTRFS_BALANCE_DATA), C(BTRFS_BALANCE_SYSTEM), C(BTRFS_BALANCE_METADATA),
	C(BTRFS_BALANCE_FORCE), C(BTRFS_BALANCE_RESUME),
	C(BTRFS_BALANCE_ARGS_PROFILES), C(BTRFS_BALANCE_ARGS_USAGE),
	C(BTRFS_BALANCE_ARGS_DEVID), C(BTRFS_BALANCE_ARGS_DRANGE),
	C(BTRFS_BALANCE_ARGS_VRANGE), C(BTRFS_BALANCE_ARGS_LIMIT),
	C(BTRFS_BALANCE_ARGS_LIMIT_RANGE), C(BTRFS_BALANCE_ARGS_STRIPES_RANGE),
	C(BTRFS_BALANCE_ARGS_CONVERT), C(BTRFS_BALANCE_ARGS_SOFT),
	C(BTRFS_BALANCE_ARGS_USAGE_RANGE),
	C(BTRFS_IOCTL_DEV_REPLACE_STATE_NEVER_STARTED),
	C(BTRFS_IOCTL_DEV_REPLACE_STATE_STARTED),
	C(BTRFS_IOCTL_DEV_REPLACE_STATE_FINISHED),
	C(BTRFS_IOCTL_DEV_REPLACE_STATE_CANCELED),
	C(BTRFS_IOCTL_DEV_REPLACE_STATE_SUSPENDED),
	C(BTRFS_DEV_STAT_WRITE_ERRS), C(BTRFS_DEV_STAT_READ_ERRS),
	C(BTRFS_DEV_STAT_FLUSH_ERRS), C(BTRFS_DEV_STAT_CORRUPTION_ERRS),
	C(BTRFS_DEV_STAT_GENERATION_ERRS),
	C(BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE),
	C(BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID),
	C(BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF), C(BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL),
	C(BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS), C(BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO),
	C(BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD), C(BTRFS_FEATURE_INCOMPAT_BIG_METADATA),
	C(BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF), C(BTRFS_FEATURE_INCOMPAT_RAID56),
	C(BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA), C(BTRFS_FEATURE_INCOMPAT_NO_HOLES),
	C(BTRFS_FEATURE_INCOMPAT_METADATA_UUID), C(BTRFS_FEATURE_INCOMPAT_RAID1C34),
	/* newer, each guarded by its own presence */
#ifdef BTRFS_BLOCK_GROUP_TREE_OBJECTID
	C(BTRFS_BLOCK_GROUP_TREE_OBJECTID),
#endif
#ifdef BTRFS_VERITY_DESC_ITEM_KEY
	C(BTRFS_VERITY_DESC_ITEM_KEY), C(BTRFS_VERITY_MERKLE_ITEM_KEY),
#endif
#ifdef BTRFS_FEATURE_COMPAT_RO_VERITY
	C(BTRFS_FEATURE_COMPAT_RO_VERITY),
#endif
#ifdef BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE
	C(BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE),
#endif
#ifdef BTRFS_FEATURE_INCOMPAT_ZONED
	C(BTRFS_FEATURE_INCOMPAT_ZONED),
#endif
#ifdef BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2
	C(BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2),
#endif
#ifdef BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE
	C(BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE),
#endif
#ifdef BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA
	C(BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA),
#endif
#ifdef BTRFS_MAGIC
	C(BTRFS_MAGIC), C(BTRFS_MAX_LEVEL), C(BTRFS_NAME_LEN), C(BTRFS_LINK_MAX),
	C(BTRFS_SYSTEM_CHUNK_ARRAY_SIZE), C(BTRFS_NUM_BACKUP_ROOTS),
	C(BTRFS_MAX_METADATA_BLOCKSIZE),
#endif
#ifdef BTRFS_INODE_NODATASUM
	C(BTRFS_INODE_NODATASUM), C(BTRFS_INODE_NODATACOW), C(BTRFS_INODE_READONLY),
	C(BTRFS_INODE_NOCOMPRESS), C(BTRFS_INODE_PREALLOC), C(BTRFS_INODE_SYNC),
	C(BTRFS_INODE_IMMUTABLE), C(BTRFS_INODE_APPEND), C(BTRFS_INODE_NODUMP),
	C(BTRFS_INODE_NOATIME), C(BTRFS_INODE_DIRSYNC), C(BTRFS_INODE_COMPRESS),
	C(BTRFS_INODE_ROOT_ITEM_INIT), C(BTRFS_INODE_RO_VERITY),
#endif
#ifdef BTRFS_FT_ENCRYPTED
	C(BTRFS_FT_ENCRYPTED),
#endif
#ifdef BTRFS_RAID_STRIPE_TREE_OBJECTID
	C(BTRFS_RAID_STRIPE_TREE_OBJECTID),
#endif
#ifdef BTRFS_RAID_STRIPE_KEY
	C(BTRFS_RAID_STRIPE_KEY),
#endif
#ifdef BTRFS_EXTENT_OWNER_REF_KEY
	C(BTRFS_EXTENT_OWNER_REF_KEY),
#endif
#ifdef BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE
	C(BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE),
#endif
};
const size_t ubt_linux_nconsts = sizeof(ubt_linux_consts) / sizeof(ubt_linux_consts[0]);

#else /* !HAVE_LINUX_BTRFS_TREE */

const struct ubt_layout ubt_linux_layouts[1];
const size_t ubt_linux_nlayouts = 0;
const struct ubt_const ubt_linux_consts[1];
const size_t ubt_linux_nconsts = 0;

#endif
