/* SPDX-License-Identifier: MIT */
/*
 * test_format.c - unit test of the format layer (btrfs_format.h,
 * format_names.c).  Standalone: exit 0 on success, 1 on failure, and every
 * failed check is printed to stderr.
 *
 *  (a) every generated accessor round-trips on a misaligned buffer and puts
 *      exactly the little-endian bytes at the documented offset;
 *  (b) struct sizes/offsets and constants agree with the Linux uapi header
 *      (tables from test_format_linux.c, a separate translation unit);
 *  (c) key ordering;
 *  (d) name tables against strings captured from btrfs-progs 6.2.
 */
#include "format/btrfs_format.h"
#include "format/format_names.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static int checks;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		checks++;                                                     \
		if (!(cond)) {                                                \
			failures++;                                           \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, \
				__LINE__, #cond);                             \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
		}                                                             \
	} while (0)

#define CHECK_STR(got, want)                                                  \
	do {                                                                  \
		const char *g_ = (got), *w_ = (want);                         \
		CHECK(g_ && strcmp(g_, w_) == 0, "got \"%s\" want \"%s\"",      \
		      g_ ? g_ : "(null)", w_);                                \
	} while (0)

/* ======================================================================== */
/* (a) accessor round trips                                                 */
/* ======================================================================== */

#define FILL 0xA5
#define MISALIGN 3

/* Bytes [at, at+n) must hold v little-endian; every other byte still FILL. */
static void check_le_bytes(const uint8_t *buf, size_t len, size_t at,
			   unsigned int n, uint64_t v, const char *what)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t want;

		if (i >= at && i < at + n)
			want = (uint8_t)(v >> (8 * (i - at)));
		else
			want = FILL;
		if (buf[i] != want) {
			checks++;
			failures++;
			fprintf(stderr, "%s: byte %zu is 0x%02x, want 0x%02x\n",
				what, i, buf[i], want);
			return;
		}
	}
	checks++;
}

static uint64_t pattern(unsigned int bits, size_t off)
{
	uint64_t v = 0x8877665544332211ULL ^ ((uint64_t)(off + 1) * 0x0101010101010101ULL);

	if (bits < 64)
		v &= (1ULL << bits) - 1;
	return v;
}

/* set, get, and check the bytes at the documented offset */
#define RT(sn, st, m, bits, off)                                              \
	do {                                                                  \
		uint8_t b_[sizeof(struct st) + 2 * MISALIGN];                 \
		struct st *p_ = (struct st *)(void *)(b_ + MISALIGN);         \
		uint64_t v_ = pattern(bits, off);                             \
		memset(b_, FILL, sizeof(b_));                                 \
		btrfs_set_##sn##_##m(p_, (uint##bits##_t)v_);                 \
		CHECK(btrfs_##sn##_##m(p_) == (uint##bits##_t)v_,             \
		      #st "." #m " round trip");                              \
		check_le_bytes(b_, sizeof(b_), MISALIGN + (off), (bits) / 8,  \
			       v_, #st "." #m);                               \
	} while (0)

/* nested struct / byte array accessors return base + documented offset */
#define PT(sn, st, m, off)                                                    \
	do {                                                                  \
		uint8_t b_[sizeof(struct st) + MISALIGN] = { 0 };             \
		const struct st *p_ = (const struct st *)(void *)(b_ + MISALIGN); \
		CHECK((const uint8_t *)btrfs_##sn##_##m(p_) ==                \
			      (const uint8_t *)p_ + (off),                    \
		      #st "." #m " pointer");                                 \
	} while (0)

static void test_le_helpers(void)
{
	uint8_t b[8];
	static const uint8_t want[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };

	ubt_put_le64(b, 0x0102030405060708ULL);
	CHECK(memcmp(b, want, 8) == 0, "le64 byte order");
	CHECK(ubt_get_le64(b) == 0x0102030405060708ULL, "le64 get");
	CHECK(ubt_get_le32(b) == 0x05060708U, "le32 get");
	CHECK(ubt_get_le16(b + 1) == 0x0607U, "le16 get misaligned");
	CHECK(ubt_get_le8(b + 7) == 1, "le8 get");
	ubt_put_le32(b + 1, 0xdeadbeefU);
	CHECK(b[1] == 0xef && b[4] == 0xde && b[0] == 8 && b[5] == 3, "le32 put");
	ubt_put_le16(b, 0xfffe);
	CHECK(b[0] == 0xfe && b[1] == 0xff, "le16 put");
	ubt_put_le64(b, UINT64_MAX);
	CHECK(ubt_get_le64(b) == UINT64_MAX, "le64 all ones");
}

static void test_accessors(void)
{
	RT(disk_key, btrfs_disk_key, objectid, 64, 0);
	RT(disk_key, btrfs_disk_key, type, 8, 8);
	RT(disk_key, btrfs_disk_key, offset, 64, 9);
	RT(header, btrfs_header, bytenr, 64, 48);
	RT(header, btrfs_header, flags, 64, 56);
	RT(header, btrfs_header, generation, 64, 80);
	RT(header, btrfs_header, owner, 64, 88);
	RT(header, btrfs_header, nritems, 32, 96);
	RT(header, btrfs_header, level, 8, 100);
	RT(item, btrfs_item, offset, 32, 17);
	RT(item, btrfs_item, size, 32, 21);
	RT(key_ptr, btrfs_key_ptr, blockptr, 64, 17);
	RT(key_ptr, btrfs_key_ptr, generation, 64, 25);
	RT(dev_item, btrfs_dev_item, devid, 64, 0);
	RT(dev_item, btrfs_dev_item, total_bytes, 64, 8);
	RT(dev_item, btrfs_dev_item, bytes_used, 64, 16);
	RT(dev_item, btrfs_dev_item, io_align, 32, 24);
	RT(dev_item, btrfs_dev_item, io_width, 32, 28);
	RT(dev_item, btrfs_dev_item, sector_size, 32, 32);
	RT(dev_item, btrfs_dev_item, type, 64, 36);
	RT(dev_item, btrfs_dev_item, generation, 64, 44);
	RT(dev_item, btrfs_dev_item, start_offset, 64, 52);
	RT(dev_item, btrfs_dev_item, dev_group, 32, 60);
	RT(dev_item, btrfs_dev_item, seek_speed, 8, 64);
	RT(dev_item, btrfs_dev_item, bandwidth, 8, 65);
	RT(stripe, btrfs_stripe, devid, 64, 0);
	RT(stripe, btrfs_stripe, offset, 64, 8);
	RT(chunk, btrfs_chunk, length, 64, 0);
	RT(chunk, btrfs_chunk, owner, 64, 8);
	RT(chunk, btrfs_chunk, stripe_len, 64, 16);
	RT(chunk, btrfs_chunk, type, 64, 24);
	RT(chunk, btrfs_chunk, io_align, 32, 32);
	RT(chunk, btrfs_chunk, io_width, 32, 36);
	RT(chunk, btrfs_chunk, sector_size, 32, 40);
	RT(chunk, btrfs_chunk, num_stripes, 16, 44);
	RT(chunk, btrfs_chunk, sub_stripes, 16, 46);
	RT(root_backup, btrfs_root_backup, tree_root, 64, 0);
	RT(root_backup, btrfs_root_backup, tree_root_gen, 64, 8);
	RT(root_backup, btrfs_root_backup, chunk_root, 64, 16);
	RT(root_backup, btrfs_root_backup, chunk_root_gen, 64, 24);
	RT(root_backup, btrfs_root_backup, extent_root, 64, 32);
	RT(root_backup, btrfs_root_backup, extent_root_gen, 64, 40);
	RT(root_backup, btrfs_root_backup, fs_root, 64, 48);
	RT(root_backup, btrfs_root_backup, fs_root_gen, 64, 56);
	RT(root_backup, btrfs_root_backup, dev_root, 64, 64);
	RT(root_backup, btrfs_root_backup, dev_root_gen, 64, 72);
	RT(root_backup, btrfs_root_backup, csum_root, 64, 80);
	RT(root_backup, btrfs_root_backup, csum_root_gen, 64, 88);
	RT(root_backup, btrfs_root_backup, total_bytes, 64, 96);
	RT(root_backup, btrfs_root_backup, bytes_used, 64, 104);
	RT(root_backup, btrfs_root_backup, num_devices, 64, 112);
	RT(root_backup, btrfs_root_backup, tree_root_level, 8, 152);
	RT(root_backup, btrfs_root_backup, chunk_root_level, 8, 153);
	RT(root_backup, btrfs_root_backup, extent_root_level, 8, 154);
	RT(root_backup, btrfs_root_backup, fs_root_level, 8, 155);
	RT(root_backup, btrfs_root_backup, dev_root_level, 8, 156);
	RT(root_backup, btrfs_root_backup, csum_root_level, 8, 157);
	RT(super, btrfs_super_block, bytenr, 64, 48);
	RT(super, btrfs_super_block, flags, 64, 56);
	RT(super, btrfs_super_block, magic, 64, 64);
	RT(super, btrfs_super_block, generation, 64, 72);
	RT(super, btrfs_super_block, root, 64, 80);
	RT(super, btrfs_super_block, chunk_root, 64, 88);
	RT(super, btrfs_super_block, log_root, 64, 96);
	RT(super, btrfs_super_block, log_root_transid, 64, 104);
	RT(super, btrfs_super_block, total_bytes, 64, 112);
	RT(super, btrfs_super_block, bytes_used, 64, 120);
	RT(super, btrfs_super_block, root_dir_objectid, 64, 128);
	RT(super, btrfs_super_block, num_devices, 64, 136);
	RT(super, btrfs_super_block, sectorsize, 32, 144);
	RT(super, btrfs_super_block, nodesize, 32, 148);
	RT(super, btrfs_super_block, leafsize, 32, 152);
	RT(super, btrfs_super_block, stripesize, 32, 156);
	RT(super, btrfs_super_block, sys_chunk_array_size, 32, 160);
	RT(super, btrfs_super_block, chunk_root_generation, 64, 164);
	RT(super, btrfs_super_block, compat_flags, 64, 172);
	RT(super, btrfs_super_block, compat_ro_flags, 64, 180);
	RT(super, btrfs_super_block, incompat_flags, 64, 188);
	RT(super, btrfs_super_block, csum_type, 16, 196);
	RT(super, btrfs_super_block, root_level, 8, 198);
	RT(super, btrfs_super_block, chunk_root_level, 8, 199);
	RT(super, btrfs_super_block, log_root_level, 8, 200);
	RT(super, btrfs_super_block, cache_generation, 64, 555);
	RT(super, btrfs_super_block, uuid_tree_generation, 64, 563);
	RT(super, btrfs_super_block, nr_global_roots, 64, 587);
	RT(timespec, btrfs_timespec, sec, 64, 0);
	RT(timespec, btrfs_timespec, nsec, 32, 8);
	RT(inode, btrfs_inode_item, generation, 64, 0);
	RT(inode, btrfs_inode_item, transid, 64, 8);
	RT(inode, btrfs_inode_item, size, 64, 16);
	RT(inode, btrfs_inode_item, nbytes, 64, 24);
	RT(inode, btrfs_inode_item, block_group, 64, 32);
	RT(inode, btrfs_inode_item, nlink, 32, 40);
	RT(inode, btrfs_inode_item, uid, 32, 44);
	RT(inode, btrfs_inode_item, gid, 32, 48);
	RT(inode, btrfs_inode_item, mode, 32, 52);
	RT(inode, btrfs_inode_item, rdev, 64, 56);
	RT(inode, btrfs_inode_item, flags, 64, 64);
	RT(inode, btrfs_inode_item, sequence, 64, 72);
	RT(inode_ref, btrfs_inode_ref, index, 64, 0);
	RT(inode_ref, btrfs_inode_ref, name_len, 16, 8);
	RT(inode_extref, btrfs_inode_extref, parent_objectid, 64, 0);
	RT(inode_extref, btrfs_inode_extref, index, 64, 8);
	RT(inode_extref, btrfs_inode_extref, name_len, 16, 16);
	RT(dir, btrfs_dir_item, transid, 64, 17);
	RT(dir, btrfs_dir_item, data_len, 16, 25);
	RT(dir, btrfs_dir_item, name_len, 16, 27);
	RT(dir, btrfs_dir_item, type, 8, 29);
	RT(dir_log, btrfs_dir_log_item, end, 64, 0);
	RT(root, btrfs_root_item, generation, 64, 160);
	RT(root, btrfs_root_item, root_dirid, 64, 168);
	RT(root, btrfs_root_item, bytenr, 64, 176);
	RT(root, btrfs_root_item, byte_limit, 64, 184);
	RT(root, btrfs_root_item, bytes_used, 64, 192);
	RT(root, btrfs_root_item, last_snapshot, 64, 200);
	RT(root, btrfs_root_item, flags, 64, 208);
	RT(root, btrfs_root_item, refs, 32, 216);
	RT(root, btrfs_root_item, drop_level, 8, 237);
	RT(root, btrfs_root_item, level, 8, 238);
	RT(root, btrfs_root_item, generation_v2, 64, 239);
	RT(root, btrfs_root_item, ctransid, 64, 295);
	RT(root, btrfs_root_item, otransid, 64, 303);
	RT(root, btrfs_root_item, stransid, 64, 311);
	RT(root, btrfs_root_item, rtransid, 64, 319);
	RT(root_ref, btrfs_root_ref, dirid, 64, 0);
	RT(root_ref, btrfs_root_ref, sequence, 64, 8);
	RT(root_ref, btrfs_root_ref, name_len, 16, 16);
	RT(extent, btrfs_extent_item, refs, 64, 0);
	RT(extent, btrfs_extent_item, generation, 64, 8);
	RT(extent, btrfs_extent_item, flags, 64, 16);
	RT(extent_v0, btrfs_extent_item_v0, refs, 32, 0);
	RT(tree_block_info, btrfs_tree_block_info, level, 8, 17);
	RT(extent_inline_ref, btrfs_extent_inline_ref, type, 8, 0);
	RT(extent_inline_ref, btrfs_extent_inline_ref, offset, 64, 1);
	RT(extent_data_ref, btrfs_extent_data_ref, root, 64, 0);
	RT(extent_data_ref, btrfs_extent_data_ref, objectid, 64, 8);
	RT(extent_data_ref, btrfs_extent_data_ref, offset, 64, 16);
	RT(extent_data_ref, btrfs_extent_data_ref, count, 32, 24);
	RT(shared_data_ref, btrfs_shared_data_ref, count, 32, 0);
	RT(extent_owner_ref, btrfs_extent_owner_ref, root_id, 64, 0);
	RT(file_extent, btrfs_file_extent_item, generation, 64, 0);
	RT(file_extent, btrfs_file_extent_item, ram_bytes, 64, 8);
	RT(file_extent, btrfs_file_extent_item, compression, 8, 16);
	RT(file_extent, btrfs_file_extent_item, encryption, 8, 17);
	RT(file_extent, btrfs_file_extent_item, other_encoding, 16, 18);
	RT(file_extent, btrfs_file_extent_item, type, 8, 20);
	RT(file_extent, btrfs_file_extent_item, disk_bytenr, 64, 21);
	RT(file_extent, btrfs_file_extent_item, disk_num_bytes, 64, 29);
	RT(file_extent, btrfs_file_extent_item, offset, 64, 37);
	RT(file_extent, btrfs_file_extent_item, num_bytes, 64, 45);
	RT(dev_extent, btrfs_dev_extent, chunk_tree, 64, 0);
	RT(dev_extent, btrfs_dev_extent, chunk_objectid, 64, 8);
	RT(dev_extent, btrfs_dev_extent, chunk_offset, 64, 16);
	RT(dev_extent, btrfs_dev_extent, length, 64, 24);
	RT(dev_replace, btrfs_dev_replace_item, src_devid, 64, 0);
	RT(dev_replace, btrfs_dev_replace_item, cursor_left, 64, 8);
	RT(dev_replace, btrfs_dev_replace_item, cursor_right, 64, 16);
	RT(dev_replace, btrfs_dev_replace_item, cont_reading_from_srcdev_mode, 64, 24);
	RT(dev_replace, btrfs_dev_replace_item, replace_state, 64, 32);
	RT(dev_replace, btrfs_dev_replace_item, time_started, 64, 40);
	RT(dev_replace, btrfs_dev_replace_item, time_stopped, 64, 48);
	RT(dev_replace, btrfs_dev_replace_item, num_write_errors, 64, 56);
	RT(dev_replace, btrfs_dev_replace_item, num_uncorrectable_read_errors, 64, 64);
	RT(block_group, btrfs_block_group_item, used, 64, 0);
	RT(block_group, btrfs_block_group_item, chunk_objectid, 64, 8);
	RT(block_group, btrfs_block_group_item, flags, 64, 16);
	RT(free_space_info, btrfs_free_space_info, extent_count, 32, 0);
	RT(free_space_info, btrfs_free_space_info, flags, 32, 4);
	RT(free_space_entry, btrfs_free_space_entry, offset, 64, 0);
	RT(free_space_entry, btrfs_free_space_entry, bytes, 64, 8);
	RT(free_space_entry, btrfs_free_space_entry, type, 8, 16);
	RT(free_space_header, btrfs_free_space_header, generation, 64, 17);
	RT(free_space_header, btrfs_free_space_header, num_entries, 64, 25);
	RT(free_space_header, btrfs_free_space_header, num_bitmaps, 64, 33);
	RT(qgroup_status, btrfs_qgroup_status_item, version, 64, 0);
	RT(qgroup_status, btrfs_qgroup_status_item, generation, 64, 8);
	RT(qgroup_status, btrfs_qgroup_status_item, flags, 64, 16);
	RT(qgroup_status, btrfs_qgroup_status_item, rescan, 64, 24);
	RT(qgroup_status, btrfs_qgroup_status_item, enable_gen, 64, 32);
	RT(qgroup_info, btrfs_qgroup_info_item, generation, 64, 0);
	RT(qgroup_info, btrfs_qgroup_info_item, rfer, 64, 8);
	RT(qgroup_info, btrfs_qgroup_info_item, rfer_cmpr, 64, 16);
	RT(qgroup_info, btrfs_qgroup_info_item, excl, 64, 24);
	RT(qgroup_info, btrfs_qgroup_info_item, excl_cmpr, 64, 32);
	RT(qgroup_limit, btrfs_qgroup_limit_item, flags, 64, 0);
	RT(qgroup_limit, btrfs_qgroup_limit_item, max_rfer, 64, 8);
	RT(qgroup_limit, btrfs_qgroup_limit_item, max_excl, 64, 16);
	RT(qgroup_limit, btrfs_qgroup_limit_item, rsv_rfer, 64, 24);
	RT(qgroup_limit, btrfs_qgroup_limit_item, rsv_excl, 64, 32);
	RT(balance_args, btrfs_disk_balance_args, profiles, 64, 0);
	RT(balance_args, btrfs_disk_balance_args, usage, 64, 8);
	RT(balance_args, btrfs_disk_balance_args, usage_min, 32, 8);
	RT(balance_args, btrfs_disk_balance_args, usage_max, 32, 12);
	RT(balance_args, btrfs_disk_balance_args, devid, 64, 16);
	RT(balance_args, btrfs_disk_balance_args, pstart, 64, 24);
	RT(balance_args, btrfs_disk_balance_args, pend, 64, 32);
	RT(balance_args, btrfs_disk_balance_args, vstart, 64, 40);
	RT(balance_args, btrfs_disk_balance_args, vend, 64, 48);
	RT(balance_args, btrfs_disk_balance_args, target, 64, 56);
	RT(balance_args, btrfs_disk_balance_args, flags, 64, 64);
	RT(balance_args, btrfs_disk_balance_args, limit, 64, 72);
	RT(balance_args, btrfs_disk_balance_args, limit_min, 32, 72);
	RT(balance_args, btrfs_disk_balance_args, limit_max, 32, 76);
	RT(balance_args, btrfs_disk_balance_args, stripes_min, 32, 80);
	RT(balance_args, btrfs_disk_balance_args, stripes_max, 32, 84);
	RT(balance, btrfs_balance_item, flags, 64, 0);
	RT(verity_desc, btrfs_verity_descriptor_item, size, 64, 0);
	RT(verity_desc, btrfs_verity_descriptor_item, encryption, 8, 24);
	RT(raid_stride, btrfs_raid_stride, devid, 64, 0);
	RT(raid_stride, btrfs_raid_stride, physical, 64, 8);
}

static void test_pointer_accessors(void)
{
	PT(header, btrfs_header, csum, 0);
	PT(header, btrfs_header, fsid, 32);
	PT(header, btrfs_header, chunk_tree_uuid, 64);
	PT(item, btrfs_item, key, 0);
	PT(key_ptr, btrfs_key_ptr, key, 0);
	PT(dev_item, btrfs_dev_item, uuid, 66);
	PT(dev_item, btrfs_dev_item, fsid, 82);
	PT(stripe, btrfs_stripe, dev_uuid, 16);
	PT(super, btrfs_super_block, csum, 0);
	PT(super, btrfs_super_block, fsid, 32);
	PT(super, btrfs_super_block, dev_item, 201);
	PT(super, btrfs_super_block, label, 299);
	PT(super, btrfs_super_block, metadata_uuid, 571);
	PT(super, btrfs_super_block, sys_chunk_array, 811);
	PT(inode, btrfs_inode_item, atime, 112);
	PT(inode, btrfs_inode_item, ctime, 124);
	PT(inode, btrfs_inode_item, mtime, 136);
	PT(inode, btrfs_inode_item, otime, 148);
	PT(inode_extref, btrfs_inode_extref, name, 18);
	PT(dir, btrfs_dir_item, location, 0);
	PT(root, btrfs_root_item, inode, 0);
	PT(root, btrfs_root_item, drop_progress, 220);
	PT(root, btrfs_root_item, uuid, 247);
	PT(root, btrfs_root_item, parent_uuid, 263);
	PT(root, btrfs_root_item, received_uuid, 279);
	PT(root, btrfs_root_item, ctime, 327);
	PT(root, btrfs_root_item, otime, 339);
	PT(root, btrfs_root_item, stime, 351);
	PT(root, btrfs_root_item, rtime, 363);
	PT(tree_block_info, btrfs_tree_block_info, key, 0);
	PT(dev_extent, btrfs_dev_extent, chunk_tree_uuid, 32);
	PT(free_space_header, btrfs_free_space_header, location, 0);
	PT(balance, btrfs_balance_item, data, 8);
	PT(balance, btrfs_balance_item, meta, 144);
	PT(balance, btrfs_balance_item, sys, 280);
}

/* Indexed and derived helpers. */
static void test_helpers(void)
{
	static uint8_t blk[16384];
	uint8_t *base = blk + 1;	/* misaligned on purpose */
	struct btrfs_super_block *sb = (struct btrfs_super_block *)(void *)base;
	struct btrfs_chunk *c = (struct btrfs_chunk *)(void *)base;
	struct btrfs_dev_stats_item *ds = (struct btrfs_dev_stats_item *)(void *)base;

	/* superblock mirrors */
	CHECK(btrfs_sb_offset(0) == 65536ULL, "mirror 0");
	CHECK(btrfs_sb_offset(1) == 64ULL << 20, "mirror 1 = 64MiB");
	CHECK(btrfs_sb_offset(2) == 256ULL << 30, "mirror 2 = 256GiB");
	CHECK(BTRFS_MAGIC == 0x4D5F53665248425FULL, "magic");

	/* magic stored as the ASCII string "_BHRfS_M" */
	memset(blk, 0, sizeof(blk));
	btrfs_set_super_magic(sb, BTRFS_MAGIC);
	CHECK(memcmp(base + 64, "_BHRfS_M", 8) == 0, "magic bytes");

	/* csum sizes */
	CHECK(btrfs_csum_type_size(BTRFS_CSUM_TYPE_CRC32) == 4, "crc32c size");
	CHECK(btrfs_csum_type_size(BTRFS_CSUM_TYPE_XXHASH) == 8, "xxhash size");
	CHECK(btrfs_csum_type_size(BTRFS_CSUM_TYPE_SHA256) == 32, "sha256 size");
	CHECK(btrfs_csum_type_size(BTRFS_CSUM_TYPE_BLAKE2) == 32, "blake2 size");
	CHECK(btrfs_csum_type_size(4) == 0, "unknown csum size");
	btrfs_set_super_csum_type(sb, BTRFS_CSUM_TYPE_XXHASH);
	CHECK(btrfs_super_csum_size(sb) == 8, "super csum size");

	/* metadata uuid selection */
	memset(btrfs_super_fsid(sb), 0x11, BTRFS_FSID_SIZE);
	memset(btrfs_super_metadata_uuid(sb), 0x22, BTRFS_FSID_SIZE);
	CHECK(btrfs_super_block_fsid(sb)[0] == 0x11, "fsid without METADATA_UUID");
	btrfs_set_super_incompat_flags(sb, BTRFS_FEATURE_INCOMPAT_METADATA_UUID);
	CHECK(btrfs_super_block_fsid(sb)[0] == 0x22, "fsid with METADATA_UUID");

	/* backup roots */
	for (unsigned int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++) {
		struct btrfs_root_backup *rb = btrfs_super_root_backup(sb, i);

		CHECK((uint8_t *)rb == base + 2859 + 168 * i, "backup root %u", i);
		btrfs_set_root_backup_tree_root_gen(rb, 100 + i);
	}
	CHECK(ubt_get_le64(base + 2859 + 168 * 3 + 8) == 103, "backup 3 gen");

	/* chunk stripes */
	memset(blk, 0, sizeof(blk));
	CHECK(btrfs_chunk_item_size(1) == 80, "chunk item size 1");
	CHECK(btrfs_chunk_item_size(2) == 112, "chunk item size 2");
	btrfs_set_chunk_num_stripes(c, 2);
	btrfs_set_stripe_devid(btrfs_chunk_stripe(c, 1), 7);
	btrfs_set_stripe_offset(btrfs_chunk_stripe(c, 1), 0x123456789ULL);
	CHECK(ubt_get_le64(base + 48 + 32) == 7, "stripe 1 devid at 80");
	CHECK(ubt_get_le64(base + 48 + 32 + 8) == 0x123456789ULL, "stripe 1 offset at 88");
	CHECK(btrfs_stripe_devid_nr(c, 1) == 7, "stripe_devid_nr");
	CHECK(btrfs_stripe_offset_nr(c, 1) == 0x123456789ULL, "stripe_offset_nr");
	CHECK(btrfs_stripe_dev_uuid(btrfs_chunk_stripe(c, 0)) == base + 64, "stripe 0 uuid");

	/* dev stats */
	for (unsigned int i = 0; i < BTRFS_DEV_STAT_VALUES_MAX; i++)
		btrfs_set_dev_stats_value(ds, i, 1000 + i);
	CHECK(ubt_get_le64(base + 8 * BTRFS_DEV_STAT_GENERATION_ERRS) == 1004, "dev stat 4");
	CHECK(btrfs_dev_stats_value(ds, BTRFS_DEV_STAT_READ_ERRS) == 1001, "dev stat 1");

	/* leaf and node layout */
	CHECK((uint8_t *)btrfs_leaf_item(base, 2) == base + 101 + 50, "leaf item 2");
	btrfs_set_item_offset(btrfs_leaf_item(base, 2), 1000);
	CHECK(btrfs_leaf_item_data(base, btrfs_leaf_item(base, 2)) == base + 1101, "item data");
	CHECK((uint8_t *)btrfs_node_key_ptr(base, 3) == base + 101 + 99, "key ptr 3");
	CHECK(btrfs_leaf_data_size(16384) == 16283, "leaf data size");
	CHECK(btrfs_node_ptrs_per_block(16384) == 493, "ptrs per node");

	/* header backref revision */
	memset(blk, 0, sizeof(blk));
	{
		struct btrfs_header *h = (struct btrfs_header *)(void *)base;

		btrfs_set_header_flags(h, BTRFS_HEADER_FLAG_WRITTEN);
		btrfs_set_header_backref_rev(h, BTRFS_MIXED_BACKREF_REV);
		CHECK(btrfs_header_flags(h) == ((1ULL << 56) | 1), "backref rev flags");
		CHECK(btrfs_header_backref_rev(h) == 1, "backref rev get");
		CHECK(base[63] == 1 && base[56] == 1, "backref rev bytes");
	}

	/* file extents */
	CHECK(btrfs_file_extent_inline_start() == 21, "inline start");
	CHECK(btrfs_file_extent_calc_inline_size(100) == 121, "inline size");
	CHECK(btrfs_file_extent_inline_len(121) == 100, "inline len");
	CHECK(btrfs_file_extent_inline_data((const struct btrfs_file_extent_item *)(void *)base) ==
	      base + 21, "inline data ptr");

	/* inline refs */
	CHECK(btrfs_extent_inline_ref_size(BTRFS_TREE_BLOCK_REF_KEY) == 9, "tbr size");
	CHECK(btrfs_extent_inline_ref_size(BTRFS_SHARED_BLOCK_REF_KEY) == 9, "sbr size");
	CHECK(btrfs_extent_inline_ref_size(BTRFS_EXTENT_DATA_REF_KEY) == 29, "edr size");
	CHECK(btrfs_extent_inline_ref_size(BTRFS_SHARED_DATA_REF_KEY) == 13, "sdr size");
	CHECK(btrfs_extent_inline_ref_size(BTRFS_EXTENT_OWNER_REF_KEY) == 9, "owner size");
	CHECK(btrfs_extent_inline_ref_size(BTRFS_EXTENT_ITEM_KEY) == 0, "bogus size");
	{
		const struct btrfs_extent_inline_ref *iref =
			(const struct btrfs_extent_inline_ref *)(void *)base;

		CHECK((uint8_t *)btrfs_extent_inline_ref_data_ref(iref) == base + 1, "data ref ptr");
		CHECK((uint8_t *)btrfs_extent_inline_ref_shared_data_ref(iref) == base + 9,
		      "shared data ref ptr");
	}

	/* variable parts */
	CHECK(btrfs_inode_ref_name((const struct btrfs_inode_ref *)(void *)base) == base + 10,
	      "inode ref name");
	CHECK(btrfs_root_ref_name((const struct btrfs_root_ref *)(void *)base) == base + 18,
	      "root ref name");
	{
		struct btrfs_dir_item *d = (struct btrfs_dir_item *)(void *)base;

		btrfs_set_dir_name_len(d, 5);
		btrfs_set_dir_data_len(d, 7);
		CHECK(btrfs_dir_name(d) == base + 30, "dir name");
		CHECK(btrfs_dir_data(d) == base + 35, "dir data");
		CHECK(btrfs_dir_entry_size(d) == 42, "dir entry size");
	}
	CHECK(BTRFS_ROOT_ITEM_LEGACY_SIZE == 239, "legacy root item size");
	CHECK(BTRFS_QGROUP_STATUS_ITEM_V1_SIZE == 32, "qgroup status v1 size");

	/* raid stripe extent and uuid items */
	CHECK(btrfs_stripe_extent_num_strides(48) == 3, "strides");
	CHECK((uint8_t *)btrfs_stripe_extent_stride(base, 2) == base + 32, "stride 2");
	btrfs_set_uuid_item_subvol(base, 1, 257);
	CHECK(btrfs_uuid_item_subvol(base, 1) == 257 && base[8] == 1 && base[9] == 1,
	      "uuid item subvol");
	{
		static const uint8_t uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8,
						  9, 10, 11, 12, 13, 14, 15, 16 };
		struct btrfs_key k;

		btrfs_uuid_to_key(uuid, BTRFS_UUID_KEY_SUBVOL, &k);
		CHECK(k.objectid == 0x0807060504030201ULL && k.type == 251 &&
		      k.offset == 0x100f0e0d0c0b0a09ULL, "uuid key");
	}

	/* qgroup ids and profiles */
	CHECK(btrfs_qgroupid(1, 5) == ((1ULL << 48) | 5), "qgroupid");
	CHECK(btrfs_qgroup_level((2ULL << 48) | 300) == 2, "qgroup level");
	CHECK(btrfs_qgroup_subvolid((2ULL << 48) | 300) == 300, "qgroup subvolid");
	CHECK(btrfs_chunk_to_extended(BTRFS_BLOCK_GROUP_DATA) ==
	      (BTRFS_BLOCK_GROUP_DATA | BTRFS_AVAIL_ALLOC_BIT_SINGLE), "to extended");
	CHECK(btrfs_extended_to_chunk(BTRFS_AVAIL_ALLOC_BIT_SINGLE | 1) == 1, "to chunk");
	CHECK(btrfs_csum_item_bytes(40, 4, 4096) == 40960, "csum item bytes");

	/* disk key conversion */
	{
		struct btrfs_key in = { 0x0102030405060708ULL, 0x84, 0x1112131415161718ULL };
		struct btrfs_key out;
		struct btrfs_disk_key *dk = (struct btrfs_disk_key *)(void *)base;

		btrfs_cpu_key_to_disk(dk, &in);
		CHECK(base[0] == 0x08 && base[7] == 0x01 && base[8] == 0x84 &&
		      base[9] == 0x18 && base[16] == 0x11, "disk key bytes");
		btrfs_disk_key_to_cpu(&out, dk);
		CHECK(btrfs_comp_keys(&in, &out) == 0, "disk key round trip");
		CHECK(btrfs_comp_disk_key(dk, &in) == 0, "comp disk key");
	}
}

/* ======================================================================== */
/* (b) cross-check against <linux/btrfs_tree.h>                             */
/* ======================================================================== */

/* Declared identically in test_format_linux.c. */
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

#define F(s, m) { #m, offsetof(struct s, m) }
#define L(s, arr) { #s, sizeof(struct s), arr, sizeof(arr) / sizeof(arr[0]) }

static const struct ubt_layout_field o_disk_key[] = {
	F(btrfs_disk_key, objectid), F(btrfs_disk_key, type), F(btrfs_disk_key, offset),
};
static const struct ubt_layout_field o_header[] = {
	F(btrfs_header, csum), F(btrfs_header, fsid), F(btrfs_header, bytenr),
	F(btrfs_header, flags), F(btrfs_header, chunk_tree_uuid),
	F(btrfs_header, generation), F(btrfs_header, owner),
	F(btrfs_header, nritems), F(btrfs_header, level),
};
static const struct ubt_layout_field o_item[] = {
	F(btrfs_item, key), F(btrfs_item, offset), F(btrfs_item, size),
};
static const struct ubt_layout_field o_key_ptr[] = {
	F(btrfs_key_ptr, key), F(btrfs_key_ptr, blockptr), F(btrfs_key_ptr, generation),
};
static const struct ubt_layout_field o_dev_item[] = {
	F(btrfs_dev_item, devid), F(btrfs_dev_item, total_bytes),
	F(btrfs_dev_item, bytes_used), F(btrfs_dev_item, io_align),
	F(btrfs_dev_item, io_width), F(btrfs_dev_item, sector_size),
	F(btrfs_dev_item, type), F(btrfs_dev_item, generation),
	F(btrfs_dev_item, start_offset), F(btrfs_dev_item, dev_group),
	F(btrfs_dev_item, seek_speed), F(btrfs_dev_item, bandwidth),
	F(btrfs_dev_item, uuid), F(btrfs_dev_item, fsid),
};
static const struct ubt_layout_field o_stripe[] = {
	F(btrfs_stripe, devid), F(btrfs_stripe, offset), F(btrfs_stripe, dev_uuid),
};
static const struct ubt_layout_field o_chunk[] = {
	F(btrfs_chunk, length), F(btrfs_chunk, owner), F(btrfs_chunk, stripe_len),
	F(btrfs_chunk, type), F(btrfs_chunk, io_align), F(btrfs_chunk, io_width),
	F(btrfs_chunk, sector_size), F(btrfs_chunk, num_stripes),
	F(btrfs_chunk, sub_stripes), F(btrfs_chunk, stripes),
};
static const struct ubt_layout_field o_root_backup[] = {
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
static const struct ubt_layout_field o_super_block[] = {
	F(btrfs_super_block, csum), F(btrfs_super_block, fsid),
	F(btrfs_super_block, bytenr), F(btrfs_super_block, flags),
	F(btrfs_super_block, magic), F(btrfs_super_block, generation),
	F(btrfs_super_block, root), F(btrfs_super_block, chunk_root),
	F(btrfs_super_block, log_root), F(btrfs_super_block, log_root_transid),
	F(btrfs_super_block, total_bytes), F(btrfs_super_block, bytes_used),
	F(btrfs_super_block, root_dir_objectid), F(btrfs_super_block, num_devices),
	F(btrfs_super_block, sectorsize), F(btrfs_super_block, nodesize),
	F(btrfs_super_block, leafsize), F(btrfs_super_block, stripesize),
	F(btrfs_super_block, sys_chunk_array_size),
	F(btrfs_super_block, chunk_root_generation),
	F(btrfs_super_block, compat_flags), F(btrfs_super_block, compat_ro_flags),
	F(btrfs_super_block, incompat_flags), F(btrfs_super_block, csum_type),
	F(btrfs_super_block, root_level), F(btrfs_super_block, chunk_root_level),
	F(btrfs_super_block, log_root_level), F(btrfs_super_block, dev_item),
	F(btrfs_super_block, label), F(btrfs_super_block, cache_generation),
	F(btrfs_super_block, uuid_tree_generation), F(btrfs_super_block, metadata_uuid),
	F(btrfs_super_block, nr_global_roots), F(btrfs_super_block, reserved),
	F(btrfs_super_block, sys_chunk_array), F(btrfs_super_block, super_roots),
	F(btrfs_super_block, padding),
};
static const struct ubt_layout_field o_free_space_entry[] = {
	F(btrfs_free_space_entry, offset), F(btrfs_free_space_entry, bytes),
	F(btrfs_free_space_entry, type),
};
static const struct ubt_layout_field o_free_space_header[] = {
	F(btrfs_free_space_header, location), F(btrfs_free_space_header, generation),
	F(btrfs_free_space_header, num_entries), F(btrfs_free_space_header, num_bitmaps),
};
static const struct ubt_layout_field o_extent_item[] = {
	F(btrfs_extent_item, refs), F(btrfs_extent_item, generation),
	F(btrfs_extent_item, flags),
};
static const struct ubt_layout_field o_extent_item_v0[] = {
	F(btrfs_extent_item_v0, refs),
};
static const struct ubt_layout_field o_tree_block_info[] = {
	F(btrfs_tree_block_info, key), F(btrfs_tree_block_info, level),
};
static const struct ubt_layout_field o_extent_data_ref[] = {
	F(btrfs_extent_data_ref, root), F(btrfs_extent_data_ref, objectid),
	F(btrfs_extent_data_ref, offset), F(btrfs_extent_data_ref, count),
};
static const struct ubt_layout_field o_shared_data_ref[] = {
	F(btrfs_shared_data_ref, count),
};
static const struct ubt_layout_field o_extent_owner_ref[] = {
	F(btrfs_extent_owner_ref, root_id),
};
static const struct ubt_layout_field o_extent_inline_ref[] = {
	F(btrfs_extent_inline_ref, type), F(btrfs_extent_inline_ref, offset),
};
static const struct ubt_layout_field o_dev_extent[] = {
	F(btrfs_dev_extent, chunk_tree), F(btrfs_dev_extent, chunk_objectid),
	F(btrfs_dev_extent, chunk_offset), F(btrfs_dev_extent, length),
	F(btrfs_dev_extent, chunk_tree_uuid),
};
static const struct ubt_layout_field o_inode_ref[] = {
	F(btrfs_inode_ref, index), F(btrfs_inode_ref, name_len),
};
static const struct ubt_layout_field o_inode_extref[] = {
	F(btrfs_inode_extref, parent_objectid), F(btrfs_inode_extref, index),
	F(btrfs_inode_extref, name_len), F(btrfs_inode_extref, name),
};
static const struct ubt_layout_field o_timespec[] = {
	F(btrfs_timespec, sec), F(btrfs_timespec, nsec),
};
static const struct ubt_layout_field o_inode_item[] = {
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
static const struct ubt_layout_field o_dir_log_item[] = {
	F(btrfs_dir_log_item, end),
};
static const struct ubt_layout_field o_dir_item[] = {
	F(btrfs_dir_item, location), F(btrfs_dir_item, transid),
	F(btrfs_dir_item, data_len), F(btrfs_dir_item, name_len),
	F(btrfs_dir_item, type),
};
static const struct ubt_layout_field o_root_item[] = {
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
static const struct ubt_layout_field o_root_ref[] = {
	F(btrfs_root_ref, dirid), F(btrfs_root_ref, sequence),
	F(btrfs_root_ref, name_len),
};
static const struct ubt_layout_field o_disk_balance_args[] = {
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
static const struct ubt_layout_field o_balance_item[] = {
	F(btrfs_balance_item, flags), F(btrfs_balance_item, data),
	F(btrfs_balance_item, meta), F(btrfs_balance_item, sys),
	F(btrfs_balance_item, unused),
};
static const struct ubt_layout_field o_file_extent_item[] = {
	F(btrfs_file_extent_item, generation), F(btrfs_file_extent_item, ram_bytes),
	F(btrfs_file_extent_item, compression), F(btrfs_file_extent_item, encryption),
	F(btrfs_file_extent_item, other_encoding), F(btrfs_file_extent_item, type),
	F(btrfs_file_extent_item, disk_bytenr), F(btrfs_file_extent_item, disk_num_bytes),
	F(btrfs_file_extent_item, offset), F(btrfs_file_extent_item, num_bytes),
};
static const struct ubt_layout_field o_dev_stats_item[] = {
	F(btrfs_dev_stats_item, values),
};
static const struct ubt_layout_field o_dev_replace_item[] = {
	F(btrfs_dev_replace_item, src_devid), F(btrfs_dev_replace_item, cursor_left),
	F(btrfs_dev_replace_item, cursor_right),
	F(btrfs_dev_replace_item, cont_reading_from_srcdev_mode),
	F(btrfs_dev_replace_item, replace_state), F(btrfs_dev_replace_item, time_started),
	F(btrfs_dev_replace_item, time_stopped), F(btrfs_dev_replace_item, num_write_errors),
	F(btrfs_dev_replace_item, num_uncorrectable_read_errors),
};
static const struct ubt_layout_field o_block_group_item[] = {
	F(btrfs_block_group_item, used), F(btrfs_block_group_item, chunk_objectid),
	F(btrfs_block_group_item, flags),
};
static const struct ubt_layout_field o_free_space_info[] = {
	F(btrfs_free_space_info, extent_count), F(btrfs_free_space_info, flags),
};
static const struct ubt_layout_field o_qgroup_status_item[] = {
	F(btrfs_qgroup_status_item, version), F(btrfs_qgroup_status_item, generation),
	F(btrfs_qgroup_status_item, flags), F(btrfs_qgroup_status_item, rescan),
	F(btrfs_qgroup_status_item, enable_gen),
};
static const struct ubt_layout_field o_qgroup_info_item[] = {
	F(btrfs_qgroup_info_item, generation), F(btrfs_qgroup_info_item, rfer),
	F(btrfs_qgroup_info_item, rfer_cmpr), F(btrfs_qgroup_info_item, excl),
	F(btrfs_qgroup_info_item, excl_cmpr),
};
static const struct ubt_layout_field o_qgroup_limit_item[] = {
	F(btrfs_qgroup_limit_item, flags), F(btrfs_qgroup_limit_item, max_rfer),
	F(btrfs_qgroup_limit_item, max_excl), F(btrfs_qgroup_limit_item, rsv_rfer),
	F(btrfs_qgroup_limit_item, rsv_excl),
};
static const struct ubt_layout_field o_verity_descriptor_item[] = {
	F(btrfs_verity_descriptor_item, size), F(btrfs_verity_descriptor_item, reserved),
	F(btrfs_verity_descriptor_item, encryption),
};
static const struct ubt_layout_field o_raid_stride[] = {
	F(btrfs_raid_stride, devid), F(btrfs_raid_stride, physical),
};

static const struct ubt_layout our_layouts[] = {
	L(btrfs_disk_key, o_disk_key),
	L(btrfs_header, o_header),
	L(btrfs_item, o_item),
	L(btrfs_key_ptr, o_key_ptr),
	L(btrfs_dev_item, o_dev_item),
	L(btrfs_stripe, o_stripe),
	L(btrfs_chunk, o_chunk),
	L(btrfs_root_backup, o_root_backup),
	L(btrfs_super_block, o_super_block),
	L(btrfs_free_space_entry, o_free_space_entry),
	L(btrfs_free_space_header, o_free_space_header),
	L(btrfs_extent_item, o_extent_item),
	L(btrfs_extent_item_v0, o_extent_item_v0),
	L(btrfs_tree_block_info, o_tree_block_info),
	L(btrfs_extent_data_ref, o_extent_data_ref),
	L(btrfs_shared_data_ref, o_shared_data_ref),
	L(btrfs_extent_owner_ref, o_extent_owner_ref),
	L(btrfs_extent_inline_ref, o_extent_inline_ref),
	L(btrfs_dev_extent, o_dev_extent),
	L(btrfs_inode_ref, o_inode_ref),
	L(btrfs_inode_extref, o_inode_extref),
	L(btrfs_timespec, o_timespec),
	L(btrfs_inode_item, o_inode_item),
	L(btrfs_dir_log_item, o_dir_log_item),
	L(btrfs_dir_item, o_dir_item),
	L(btrfs_root_item, o_root_item),
	L(btrfs_root_ref, o_root_ref),
	L(btrfs_disk_balance_args, o_disk_balance_args),
	L(btrfs_balance_item, o_balance_item),
	L(btrfs_file_extent_item, o_file_extent_item),
	L(btrfs_dev_stats_item, o_dev_stats_item),
	L(btrfs_dev_replace_item, o_dev_replace_item),
	L(btrfs_block_group_item, o_block_group_item),
	L(btrfs_free_space_info, o_free_space_info),
	L(btrfs_qgroup_status_item, o_qgroup_status_item),
	L(btrfs_qgroup_info_item, o_qgroup_info_item),
	L(btrfs_qgroup_limit_item, o_qgroup_limit_item),
	L(btrfs_verity_descriptor_item, o_verity_descriptor_item),
	L(btrfs_raid_stride, o_raid_stride),
};

#define C(name) { #name, (uint64_t)(name) }

static const struct ubt_const our_consts[] = {
	C(BTRFS_CSUM_SIZE), C(BTRFS_FSID_SIZE), C(BTRFS_UUID_SIZE),
	C(BTRFS_LABEL_SIZE), C(BTRFS_DEV_STAT_VALUES_MAX),
	C(BTRFS_MAGIC), C(BTRFS_MAX_LEVEL), C(BTRFS_NAME_LEN), C(BTRFS_LINK_MAX),
	C(BTRFS_SYSTEM_CHUNK_ARRAY_SIZE), C(BTRFS_NUM_BACKUP_ROOTS),
	C(BTRFS_MAX_METADATA_BLOCKSIZE),
	C(BTRFS_ROOT_TREE_OBJECTID), C(BTRFS_EXTENT_TREE_OBJECTID),
	C(BTRFS_CHUNK_TREE_OBJECTID), C(BTRFS_DEV_TREE_OBJECTID),
	C(BTRFS_FS_TREE_OBJECTID), C(BTRFS_ROOT_TREE_DIR_OBJECTID),
	C(BTRFS_CSUM_TREE_OBJECTID), C(BTRFS_QUOTA_TREE_OBJECTID),
	C(BTRFS_UUID_TREE_OBJECTID), C(BTRFS_FREE_SPACE_TREE_OBJECTID),
	C(BTRFS_BLOCK_GROUP_TREE_OBJECTID), C(BTRFS_RAID_STRIPE_TREE_OBJECTID),
	C(BTRFS_DEV_STATS_OBJECTID), C(BTRFS_BALANCE_OBJECTID),
	C(BTRFS_ORPHAN_OBJECTID), C(BTRFS_TREE_LOG_OBJECTID),
	C(BTRFS_TREE_LOG_FIXUP_OBJECTID), C(BTRFS_TREE_RELOC_OBJECTID),
	C(BTRFS_DATA_RELOC_TREE_OBJECTID), C(BTRFS_EXTENT_CSUM_OBJECTID),
	C(BTRFS_FREE_SPACE_OBJECTID), C(BTRFS_FREE_INO_OBJECTID),
	C(BTRFS_MULTIPLE_OBJECTIDS), C(BTRFS_FIRST_FREE_OBJECTID),
	C(BTRFS_LAST_FREE_OBJECTID), C(BTRFS_FIRST_CHUNK_TREE_OBJECTID),
	C(BTRFS_DEV_ITEMS_OBJECTID), C(BTRFS_BTREE_INODE_OBJECTID),
	C(BTRFS_EMPTY_SUBVOL_DIR_OBJECTID), C(BTRFS_DEV_REPLACE_DEVID),
	C(BTRFS_INODE_ITEM_KEY), C(BTRFS_INODE_REF_KEY), C(BTRFS_INODE_EXTREF_KEY),
	C(BTRFS_XATTR_ITEM_KEY), C(BTRFS_VERITY_DESC_ITEM_KEY),
	C(BTRFS_VERITY_MERKLE_ITEM_KEY), C(BTRFS_ORPHAN_ITEM_KEY),
	C(BTRFS_DIR_LOG_ITEM_KEY), C(BTRFS_DIR_LOG_INDEX_KEY),
	C(BTRFS_DIR_ITEM_KEY), C(BTRFS_DIR_INDEX_KEY), C(BTRFS_EXTENT_DATA_KEY),
	C(BTRFS_EXTENT_CSUM_KEY), C(BTRFS_ROOT_ITEM_KEY), C(BTRFS_ROOT_BACKREF_KEY),
	C(BTRFS_ROOT_REF_KEY), C(BTRFS_EXTENT_ITEM_KEY), C(BTRFS_METADATA_ITEM_KEY),
	C(BTRFS_EXTENT_OWNER_REF_KEY),
	C(BTRFS_TREE_BLOCK_REF_KEY), C(BTRFS_EXTENT_DATA_REF_KEY),
	C(BTRFS_EXTENT_REF_V0_KEY), C(BTRFS_SHARED_BLOCK_REF_KEY),
	C(BTRFS_SHARED_DATA_REF_KEY), C(BTRFS_BLOCK_GROUP_ITEM_KEY),
	C(BTRFS_FREE_SPACE_INFO_KEY), C(BTRFS_FREE_SPACE_EXTENT_KEY),
	C(BTRFS_FREE_SPACE_BITMAP_KEY), C(BTRFS_DEV_EXTENT_KEY),
	C(BTRFS_DEV_ITEM_KEY), C(BTRFS_CHUNK_ITEM_KEY), C(BTRFS_RAID_STRIPE_KEY),
	C(BTRFS_QGROUP_STATUS_KEY),
	C(BTRFS_QGROUP_INFO_KEY), C(BTRFS_QGROUP_LIMIT_KEY),
	C(BTRFS_QGROUP_RELATION_KEY), C(BTRFS_BALANCE_ITEM_KEY),
	C(BTRFS_TEMPORARY_ITEM_KEY), C(BTRFS_DEV_STATS_KEY),
	C(BTRFS_PERSISTENT_ITEM_KEY), C(BTRFS_DEV_REPLACE_KEY),
	C(BTRFS_UUID_KEY_SUBVOL), C(BTRFS_UUID_KEY_RECEIVED_SUBVOL),
	C(BTRFS_STRING_ITEM_KEY),
	C(BTRFS_CSUM_TYPE_CRC32), C(BTRFS_CSUM_TYPE_XXHASH),
	C(BTRFS_CSUM_TYPE_SHA256), C(BTRFS_CSUM_TYPE_BLAKE2),
	C(BTRFS_FT_UNKNOWN), C(BTRFS_FT_REG_FILE), C(BTRFS_FT_DIR),
	C(BTRFS_FT_CHRDEV), C(BTRFS_FT_BLKDEV), C(BTRFS_FT_FIFO), C(BTRFS_FT_SOCK),
	C(BTRFS_FT_SYMLINK), C(BTRFS_FT_XATTR), C(BTRFS_FT_MAX), C(BTRFS_FT_ENCRYPTED),
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
	C(BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE), C(BTRFS_QGROUP_STATUS_VERSION),
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
	C(BTRFS_FEATURE_COMPAT_RO_VERITY), C(BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE),
	C(BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF), C(BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL),
	C(BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS), C(BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO),
	C(BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD), C(BTRFS_FEATURE_INCOMPAT_BIG_METADATA),
	C(BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF), C(BTRFS_FEATURE_INCOMPAT_RAID56),
	C(BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA), C(BTRFS_FEATURE_INCOMPAT_NO_HOLES),
	C(BTRFS_FEATURE_INCOMPAT_METADATA_UUID), C(BTRFS_FEATURE_INCOMPAT_RAID1C34),
	C(BTRFS_FEATURE_INCOMPAT_ZONED), C(BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2),
	C(BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE),
	C(BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA),
	C(BTRFS_INODE_NODATASUM), C(BTRFS_INODE_NODATACOW), C(BTRFS_INODE_READONLY),
	C(BTRFS_INODE_NOCOMPRESS), C(BTRFS_INODE_PREALLOC), C(BTRFS_INODE_SYNC),
	C(BTRFS_INODE_IMMUTABLE), C(BTRFS_INODE_APPEND), C(BTRFS_INODE_NODUMP),
	C(BTRFS_INODE_NOATIME), C(BTRFS_INODE_DIRSYNC), C(BTRFS_INODE_COMPRESS),
	C(BTRFS_INODE_ROOT_ITEM_INIT), C(BTRFS_INODE_RO_VERITY),
};

static const struct ubt_layout *find_layout(const char *name)
{
	for (size_t i = 0; i < sizeof(our_layouts) / sizeof(our_layouts[0]); i++)
		if (strcmp(our_layouts[i].name, name) == 0)
			return &our_layouts[i];
	return NULL;
}

static const struct ubt_layout_field *find_field(const struct ubt_layout *l,
						 const char *name)
{
	/* the only member our layout spells differently: the chunk's first
	 * stripe ("stripe" in Linux) is our flexible array "stripes" */
	if (strcmp(l->name, "btrfs_chunk") == 0 && strcmp(name, "stripe") == 0)
		name = "stripes";
	for (size_t i = 0; i < l->nfields; i++)
		if (strcmp(l->fields[i].name, name) == 0)
			return &l->fields[i];
	return NULL;
}

static void test_linux_layouts(void)
{
	if (ubt_linux_nlayouts == 0) {
		fprintf(stderr, "note: <linux/btrfs_tree.h> not available, "
			"layout cross-check skipped\n");
		return;
	}
	for (size_t i = 0; i < ubt_linux_nlayouts; i++) {
		const struct ubt_layout *lx = &ubt_linux_layouts[i];
		const struct ubt_layout *ours = find_layout(lx->name);
		size_t want;

		CHECK(ours != NULL, "struct %s missing in btrfs_format.h", lx->name);
		if (!ours)
			continue;
		want = lx->size;
		/* documented deviations: */
		if (strcmp(lx->name, "btrfs_chunk") == 0)
			want -= sizeof(struct btrfs_stripe);	/* first stripe not inline */
		if (strcmp(lx->name, "btrfs_qgroup_status_item") == 0 && want == 32)
			want = 40;	/* header predates enable_gen */
		CHECK(ours->size == want, "sizeof(%s): ours %zu, linux %zu",
		      lx->name, ours->size, lx->size);
		for (size_t f = 0; f < lx->nfields; f++) {
			const struct ubt_layout_field *of = find_field(ours, lx->fields[f].name);

			CHECK(of != NULL, "%s.%s missing", lx->name, lx->fields[f].name);
			if (of)
				CHECK(of->offset == lx->fields[f].offset,
				      "offsetof(%s, %s): ours %zu, linux %zu", lx->name,
				      lx->fields[f].name, of->offset, lx->fields[f].offset);
		}
	}
	for (size_t i = 0; i < ubt_linux_nconsts; i++) {
		const struct ubt_const *lc = &ubt_linux_consts[i];
		const struct ubt_const *oc = NULL;

		for (size_t j = 0; j < sizeof(our_consts) / sizeof(our_consts[0]); j++)
			if (strcmp(our_consts[j].name, lc->name) == 0)
				oc = &our_consts[j];
		CHECK(oc != NULL, "constant %s not defined/checked by us", lc->name);
		if (oc)
			CHECK(oc->value == lc->value, "%s: ours 0x%" PRIx64 ", linux 0x%" PRIx64,
			      lc->name, oc->value, lc->value);
	}
}

/* ======================================================================== */
/* (c) key ordering                                                         */
/* ======================================================================== */

static int cmp_keys_qsort(const void *a, const void *b)
{
	return btrfs_comp_keys(a, b);
}

static void test_key_order(void)
{
	struct btrfs_key k[] = {
		{ 256, BTRFS_EXTENT_DATA_KEY, 0 },
		{ 256, BTRFS_INODE_ITEM_KEY, 0 },
		{ UINT64_MAX, 0, 0 },
		{ 256, BTRFS_INODE_REF_KEY, 256 },
		{ 257, 0, 0 },
		{ 256, BTRFS_EXTENT_DATA_KEY, UINT64_MAX },
		{ 256, BTRFS_EXTENT_DATA_KEY, 4096 },
		{ 0, 0, 0 },
		{ 256, BTRFS_INODE_REF_KEY, 5 },
		{ 1ULL << 63, 1, 0 },
	};
	static const struct btrfs_key want[] = {
		{ 0, 0, 0 },
		{ 256, BTRFS_INODE_ITEM_KEY, 0 },
		{ 256, BTRFS_INODE_REF_KEY, 5 },
		{ 256, BTRFS_INODE_REF_KEY, 256 },
		{ 256, BTRFS_EXTENT_DATA_KEY, 0 },
		{ 256, BTRFS_EXTENT_DATA_KEY, 4096 },
		{ 256, BTRFS_EXTENT_DATA_KEY, UINT64_MAX },
		{ 257, 0, 0 },
		{ 1ULL << 63, 1, 0 },
		{ UINT64_MAX, 0, 0 },
	};
	const size_t n = sizeof(k) / sizeof(k[0]);
	struct btrfs_key a = { 5, 200, 0 }, b = { 5, 1, UINT64_MAX };

	qsort(k, n, sizeof(k[0]), cmp_keys_qsort);
	for (size_t i = 0; i < n; i++)
		CHECK(btrfs_comp_keys(&k[i], &want[i]) == 0, "sorted key %zu", i);

	CHECK(btrfs_comp_keys(&a, &b) == 1, "type beats offset");
	CHECK(btrfs_comp_keys(&b, &a) == -1, "type beats offset (rev)");
	CHECK(btrfs_comp_keys(&a, &a) == 0, "equal");
	b.objectid = 6;
	CHECK(btrfs_comp_keys(&a, &b) == -1, "objectid beats type");
}

/* ======================================================================== */
/* (d) name tables (expected strings captured from btrfs-progs 6.2)         */
/* ======================================================================== */

static void check_flags(uint64_t flags, const struct btrfs_flag_table *t,
			const char *want)
{
	char buf[1024];
	size_t n = btrfs_flag_list_str(flags, t, buf, sizeof(buf));

	CHECK(strcmp(buf, want) == 0 && n == strlen(want),
	      "flags 0x%" PRIx64 ":\n--- got\n%s--- want\n%s---", flags, buf, want);
}

static void check_bg(uint64_t flags, const char *want)
{
	char buf[64];

	btrfs_bg_flags_str(flags, buf, sizeof(buf));
	CHECK(strcmp(buf, want) == 0, "bg flags 0x%" PRIx64 ": got \"%s\" want \"%s\"",
	      flags, buf, want);
}

static void check_key(uint64_t objectid, uint8_t type, uint64_t offset,
		      const char *want)
{
	struct btrfs_key k = { objectid, type, offset };
	char buf[128];

	btrfs_key_str(&k, buf, sizeof(buf));
	CHECK(strcmp(buf, want) == 0, "got \"%s\" want \"%s\"", buf, want);
}

static void test_names(void)
{
	char buf[256];
	const char *names[4];
	uint64_t unknown;

	/* key types */
	CHECK_STR(btrfs_key_type_name(BTRFS_INODE_ITEM_KEY), "INODE_ITEM");
	CHECK_STR(btrfs_key_type_name(BTRFS_CHUNK_ITEM_KEY), "CHUNK_ITEM");
	CHECK_STR(btrfs_key_type_name(BTRFS_EXTENT_DATA_KEY), "EXTENT_DATA");
	CHECK_STR(btrfs_key_type_name(BTRFS_EXTENT_CSUM_KEY), "EXTENT_CSUM");
	CHECK_STR(btrfs_key_type_name(248), "TEMPORARY_ITEM");
	CHECK_STR(btrfs_key_type_name(249), "PERSISTENT_ITEM");
	CHECK_STR(btrfs_key_type_name(BTRFS_UUID_KEY_RECEIVED_SUBVOL),
		  "UUID_KEY_RECEIVED_SUBVOL");
	CHECK(btrfs_key_type_name(0) == NULL, "type 0 unnamed");
	CHECK(btrfs_key_type_name(255) == NULL, "type 255 unnamed");
	btrfs_key_type_str(BTRFS_FREE_SPACE_OBJECTID, 0, buf, sizeof(buf));
	CHECK_STR(buf, "UNTYPED");
	btrfs_key_type_str(5, 0, buf, sizeof(buf));
	CHECK_STR(buf, "UNKNOWN.0");
	btrfs_key_type_str(5, 7, buf, sizeof(buf));
	CHECK_STR(buf, "UNKNOWN.7");

	/* objectids, with context */
	CHECK_STR(btrfs_objectid_name(1, BTRFS_ROOT_ITEM_KEY), "ROOT_TREE");
	CHECK_STR(btrfs_objectid_name(1, BTRFS_DEV_ITEM_KEY), "DEV_ITEMS");
	CHECK_STR(btrfs_objectid_name(256, BTRFS_CHUNK_ITEM_KEY), "FIRST_CHUNK_TREE");
	CHECK(btrfs_objectid_name(256, BTRFS_INODE_ITEM_KEY) == NULL, "256 inode");
	CHECK_STR(btrfs_objectid_name(0, BTRFS_PERSISTENT_ITEM_KEY), "DEV_STATS");
	CHECK(btrfs_objectid_name(0, 0) == NULL, "0 plain");
	CHECK(btrfs_objectid_name(1, BTRFS_DEV_EXTENT_KEY) == NULL, "devid 1");
	CHECK_STR(btrfs_objectid_name(BTRFS_TREE_LOG_FIXUP_OBJECTID, 0), "LOG_FIXUP");
	CHECK_STR(btrfs_objectid_name(BTRFS_DATA_RELOC_TREE_OBJECTID, 0), "DATA_RELOC_TREE");
	CHECK_STR(btrfs_objectid_name(BTRFS_MULTIPLE_OBJECTIDS, 0), "MULTIPLE");
	CHECK_STR(btrfs_objectid_name(BTRFS_BLOCK_GROUP_TREE_OBJECTID, 0), "BLOCK_GROUP_TREE");
	btrfs_objectid_str((uint64_t)-1, 0, buf, sizeof(buf));
	CHECK_STR(buf, "-1");
	btrfs_objectid_str((1ULL << 48) | 5, BTRFS_QGROUP_RELATION_KEY, buf, sizeof(buf));
	CHECK_STR(buf, "1/5");
	btrfs_objectid_str(0x1234, BTRFS_UUID_KEY_SUBVOL, buf, sizeof(buf));
	CHECK_STR(buf, "0x0000000000001234");
	btrfs_objectid_str(257, BTRFS_INODE_ITEM_KEY, buf, sizeof(buf));
	CHECK_STR(buf, "257");

	/* whole keys, as seen in progs 6.2 dump-tree output */
	check_key(BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1,
		  "key (FS_TREE ROOT_ITEM 18446744073709551615)");
	check_key(0, 0, 0, "key (0 UNKNOWN.0 0)");
	check_key(1, BTRFS_DEV_ITEM_KEY, 1, "key (DEV_ITEMS DEV_ITEM 1)");
	check_key(256, BTRFS_CHUNK_ITEM_KEY, 13631488,
		  "key (FIRST_CHUNK_TREE CHUNK_ITEM 13631488)");
	check_key(6, BTRFS_DIR_ITEM_KEY, 2378154706ULL,
		  "key (ROOT_TREE_DIR DIR_ITEM 2378154706)");
	check_key(256, BTRFS_INODE_ITEM_KEY, (uint64_t)-1, "key (256 INODE_ITEM -1)");
	check_key(BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, 5,
		  "key (TREE_RELOC ROOT_ITEM FS_TREE)");
	check_key(0, BTRFS_QGROUP_INFO_KEY, 5, "key (0 QGROUP_INFO 0/5)");
	check_key(0, BTRFS_PERSISTENT_ITEM_KEY, 1, "key (DEV_STATS PERSISTENT_ITEM 1)");

	/* csum names */
	CHECK_STR(btrfs_csum_type_name(0), "crc32c");
	CHECK_STR(btrfs_csum_type_name(1), "xxhash64");
	CHECK_STR(btrfs_csum_type_name(2), "sha256");
	CHECK_STR(btrfs_csum_type_name(3), "blake2");
	CHECK(btrfs_csum_type_name(4) == NULL, "csum 4 invalid");

	/* block group flags */
	check_bg(BTRFS_BLOCK_GROUP_DATA, "DATA|single");
	check_bg(BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_DUP, "SYSTEM|DUP");
	check_bg(BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP, "METADATA|DUP");
	check_bg(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1, "DATA|RAID1");
	check_bg(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1C4, "DATA|RAID1C4");
	check_bg(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA,
		 "DATA|METADATA|single");
	check_bg(BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM,
		 "METADATASYSTEM|single");
	check_bg(7, "DATA|METADATA|SYSTEM|single");
	check_bg(0, "|single");
	check_bg(BTRFS_BLOCK_GROUP_RAID0, "|RAID0");
	check_bg(0x28, "|DUP");
	check_bg(0x210, "|RAID1");
	check_bg(0x408, "|RAID1C4");
	check_bg(0x180, "|RAID5");
	check_bg(0x50, "|RAID10");
	check_bg(0x300, "|RAID1C3");
	check_bg(0x88, "|RAID0");
	check_bg(4 | 0x800, "METADATA|single");
	btrfs_bg_flags_str(7 | BTRFS_BLOCK_GROUP_RAID1C3, buf, 10);
	CHECK_STR(buf, "DATA|META");

	/* dump-super flag lists */
	check_flags(0, &btrfs_super_flag_table, "");
	check_flags(1, &btrfs_super_flag_table, "\t\t\t( WRITTEN )\n");
	check_flags(UINT64_MAX, &btrfs_super_flag_table,
		    "\t\t\t( WRITTEN |\n\t\t\t  RELOC |\n\t\t\t  CHANGING_FSID |\n"
		    "\t\t\t  SEEDING |\n\t\t\t  METADUMP |\n\t\t\t  METADUMP_V2 |\n"
		    "\t\t\t  unknown flag: 0xfffffff0fffffffc )\n");
	check_flags(4 | (1ULL << 36) | (1ULL << 38), &btrfs_super_flag_table,
		    "\t\t\t( unknown flag: 0x5000000004 )\n");
	check_flags(3, &btrfs_compat_ro_flag_table,
		    "\t\t\t( FREE_SPACE_TREE |\n\t\t\t  FREE_SPACE_TREE_VALID )\n");
	check_flags(4, &btrfs_compat_ro_flag_table, "\t\t\t( )\n");
	check_flags(UINT64_MAX, &btrfs_compat_ro_flag_table,
		    "\t\t\t( FREE_SPACE_TREE |\n\t\t\t  FREE_SPACE_TREE_VALID |\n"
		    "\t\t\t  BLOCK_GROUP_TREE |\n"
		    "\t\t\t  unknown flag: 0xfffffffffffffff0 )\n");
	check_flags(0x341, &btrfs_incompat_flag_table,
		    "\t\t\t( MIXED_BACKREF |\n\t\t\t  EXTENDED_IREF |\n"
		    "\t\t\t  SKINNY_METADATA |\n\t\t\t  NO_HOLES )\n");
	check_flags(0x2000, &btrfs_incompat_flag_table,
		    "\t\t\t( unknown flag: 0x2000 )\n");
	check_flags(0x3000, &btrfs_incompat_flag_table,
		    "\t\t\t( ZONED |\n\t\t\t  EXTENT_TREE_V2 |\n"
		    "\t\t\t  unknown flag: 0x2000 )\n");
	check_flags(0xfffffffffffff000ULL, &btrfs_incompat_flag_table,
		    "\t\t\t( ZONED |\n\t\t\t  EXTENT_TREE_V2 |\n"
		    "\t\t\t  unknown flag: 0xffffffffffffe000 )\n");
	check_flags(0x6000, &btrfs_incompat_flag_table,
		    "\t\t\t( unknown flag: 0x6000 )\n");
	CHECK(btrfs_flag_list_str(1, &btrfs_super_flag_table, buf, 5) == 15 &&
	      strcmp(buf, "\t\t\t(") == 0, "flag list truncation");

	CHECK(btrfs_flag_names(0x341, &btrfs_incompat_flag_table, names, 4, &unknown) == 4 &&
	      strcmp(names[0], "MIXED_BACKREF") == 0 && strcmp(names[3], "NO_HOLES") == 0 &&
	      unknown == 0, "flag names 0x341");
	CHECK(btrfs_flag_names(0x3001, &btrfs_incompat_flag_table, names, 1, &unknown) == 3 &&
	      strcmp(names[0], "MIXED_BACKREF") == 0 && unknown == 0x2000,
	      "flag names truncated");

	/* item value names */
	CHECK_STR(btrfs_dir_type_name(BTRFS_FT_REG_FILE), "FILE");
	CHECK_STR(btrfs_dir_type_name(BTRFS_FT_XATTR), "XATTR");
	CHECK(btrfs_dir_type_name(0) == NULL, "FT_UNKNOWN unnamed");
	CHECK_STR(btrfs_compress_type_name(BTRFS_COMPRESS_ZSTD), "zstd");
	CHECK(btrfs_compress_type_name(9) == NULL, "compress 9");
	CHECK_STR(btrfs_file_extent_type_name(BTRFS_FILE_EXTENT_REG), "regular");
	CHECK_STR(btrfs_file_extent_type_name(7), "unknown");
	btrfs_inode_flags_str(0, buf, sizeof(buf));
	CHECK_STR(buf, "none");
	btrfs_inode_flags_str(BTRFS_INODE_NODATASUM | BTRFS_INODE_NODATACOW |
			      BTRFS_INODE_COMPRESS, buf, sizeof(buf));
	CHECK_STR(buf, "NODATASUM|NODATACOW|COMPRESS");
	btrfs_extent_flags_str(BTRFS_EXTENT_FLAG_TREE_BLOCK, buf, sizeof(buf));
	CHECK_STR(buf, "TREE_BLOCK");
	btrfs_extent_flags_str(BTRFS_EXTENT_FLAG_TREE_BLOCK | BTRFS_BLOCK_FLAG_FULL_BACKREF,
			       buf, sizeof(buf));
	CHECK_STR(buf, "TREE_BLOCK|FULL_BACKREF");
	btrfs_header_flags_str(3, buf, sizeof(buf));
	CHECK_STR(buf, "WRITTEN|RELOC");
	CHECK_STR(btrfs_root_flags_name(BTRFS_ROOT_SUBVOL_RDONLY), "RDONLY");
	CHECK_STR(btrfs_root_flags_name(0), "none");
	btrfs_qgroup_status_flags_str(BTRFS_QGROUP_STATUS_FLAG_ON |
				      BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT, buf, sizeof(buf));
	CHECK_STR(buf, "ON|INCONSISTENT");
}

int main(void)
{
	test_le_helpers();
	test_accessors();
	test_pointer_accessors();
	test_helpers();
	test_linux_layouts();
	test_key_order();
	test_names();

	if (failures) {
		fprintf(stderr, "test_format: %d of %d checks FAILED\n", failures, checks);
		return 1;
	}
	printf("test_format: all %d checks passed\n", checks);
	return 0;
}
