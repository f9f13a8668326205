/*
 * unit: superblock reading, validation, copy selection and the feature
 * policy, on images made by mkfs.btrfs (all four checksum types) and on
 * memory devices holding deliberately damaged copies.  Also checks the
 * checksum of real tree blocks (the chunk root) for every checksum type.
 *
 * Needs mkfs.btrfs (no root): skips without it, fails under
 * UBTRFS_REQUIRE_ORACLE=1.
 */
#include "t.h"

#include <ubtrfs/ubtrfs.h>

#include "base/base.h"
#include "format/btrfs_format.h"
#include "io/io.h"
#include "volume/volume.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ubtrfs-test-super-XXXXXX";

static int run_mkfs(const char *path, const char *csum, const char *extra)
{
	char cmd[1200];
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);

	if (fd < 0)
		return -1;
	/* 300 MiB: room for the second superblock copy at 64 MiB. */
	if (ftruncate(fd, 300ll << 20) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "mkfs.btrfs -q -f --csum %s %s '%s' >/dev/null 2>&1", csum,
		 extra, path);
	int st = system(cmd);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int have_mkfs(void)
{
	int st = system("mkfs.btrfs --version >/dev/null 2>&1");
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Map a logical address inside the first sys_chunk_array chunk to stripe 0. */
static int sys_array_map(const struct btrfs_super_block *sb, uint64_t logical, uint64_t *phys)
{
	const uint8_t *p = sb->sys_chunk_array;
	uint32_t size = btrfs_super_sys_chunk_array_size(sb);
	uint32_t off = 0;

	while (off + sizeof(struct btrfs_disk_key) + btrfs_chunk_item_size(1) <= size) {
		const struct btrfs_disk_key *k = (const void *)(p + off);
		const struct btrfs_chunk *c = (const void *)(p + off + sizeof(*k));
		uint16_t n = btrfs_chunk_num_stripes(c);
		uint64_t start = btrfs_disk_key_offset(k);

		if (n == 0)
			return -1;
		if (logical >= start && logical < start + btrfs_chunk_length(c)) {
			*phys = btrfs_stripe_offset(btrfs_chunk_stripe(c, 0)) + (logical - start);
			return 0;
		}
		off += sizeof(*k) + btrfs_chunk_item_size(n);
	}
	return -1;
}

static void test_real_image(const char *csum, unsigned type, const char *extra)
{
	char path[512];
	struct ubt_bdev *bd;
	struct btrfs_super_block sb, copy1;
	char why[UBT_SUPER_WHY_LEN];
	int which = -1;

	snprintf(path, sizeof(path), "%s/%s.img", tmpdir, csum);
	CHECK_EQ_INT(run_mkfs(path, csum, extra), 0);
	CHECK_EQ_INT(ubt_bdev_open_file(path, UBT_BDEV_RDONLY, &bd), 0);
	if (!bd)
		return;
	CHECK_EQ_INT(ubt_super_read_best(bd, &sb, &which), 0);
	CHECK_EQ_INT(which, 0);
	CHECK_EQ_INT(btrfs_super_csum_type(&sb), type);
	CHECK(ubt_super_csum_matches(&sb));
	CHECK_EQ_INT(ubt_super_validate(&sb, 65536, why, sizeof(why)), 0);
	/* The same copy fails when claimed to live elsewhere. */
	CHECK_EQ_INT(ubt_super_validate(&sb, 1ull << 26, why, sizeof(why)), -EUCLEAN);

	/* Copy 1 at 64 MiB exists and is valid; copy 2 (256 GiB) does not fit. */
	CHECK_EQ_INT(ubt_super_read_raw(bd, 1, &copy1), 0);
	CHECK_EQ_INT(ubt_super_validate(&copy1, 1ull << 26, why, sizeof(why)), 0);
	CHECK_EQ_INT(ubt_super_read_raw(bd, 2, &copy1), -ENOENT);

	/* Recomputing the checksum of an untouched copy reproduces it. */
	struct btrfs_super_block again = sb;
	CHECK_EQ_INT(ubt_super_update_csum(&again), 0);
	CHECK(memcmp(&again, &sb, sizeof(sb)) == 0);

	/* A real tree block: the chunk root, checksummed with the same type. */
	uint32_t nodesize = btrfs_super_nodesize(&sb);
	uint64_t phys = 0;
	CHECK_EQ_INT(sys_array_map(&sb, btrfs_super_chunk_root(&sb), &phys), 0);
	uint8_t *block = malloc(nodesize);
	uint8_t out[UBT_CSUM_MAX];
	CHECK_EQ_INT(ubt_bdev_read(bd, block, nodesize, phys), 0);
	const struct btrfs_header *h = (const void *)block;
	CHECK_EQ_U64(btrfs_header_bytenr(h), btrfs_super_chunk_root(&sb));
	CHECK_EQ_INT(ubt_csum(type, block + BTRFS_CSUM_SIZE, nodesize - BTRFS_CSUM_SIZE, out), 0);
	CHECK(memcmp(out, block, ubt_csum_size(type)) == 0);
	/* and a flipped bit is detected */
	block[nodesize / 2] ^= 1;
	CHECK_EQ_INT(ubt_csum(type, block + BTRFS_CSUM_SIZE, nodesize - BTRFS_CSUM_SIZE, out), 0);
	CHECK(memcmp(out, block, ubt_csum_size(type)) != 0);
	free(block);
	ubt_bdev_close(bd);
}

/* A mutation of a valid superblock that validation must reject. */
struct mutation {
	const char *what;
	void (*apply)(struct btrfs_super_block *sb);
	int keep_csum;	/* leave the checksum stale (the checksum test itself) */
};

static void m_magic(struct btrfs_super_block *sb) { btrfs_set_super_magic(sb, 0x1234); }
static void m_csum(struct btrfs_super_block *sb) { sb->label[10] ^= 0x55; }
static void m_csum_type(struct btrfs_super_block *sb) { btrfs_set_super_csum_type(sb, 9); }
static void m_bytenr(struct btrfs_super_block *sb) { btrfs_set_super_bytenr(sb, 4096); }
static void m_sector_small(struct btrfs_super_block *sb) { btrfs_set_super_sectorsize(sb, 2048); }
static void m_sector_pow2(struct btrfs_super_block *sb) { btrfs_set_super_sectorsize(sb, 12288); }
static void m_node_big(struct btrfs_super_block *sb)
{
	btrfs_set_super_nodesize(sb, 131072);
	btrfs_set_super_leafsize(sb, 131072);
}
static void m_node_zero(struct btrfs_super_block *sb)
{
	btrfs_set_super_nodesize(sb, 0);
	btrfs_set_super_leafsize(sb, 0);
}
static void m_leaf(struct btrfs_super_block *sb) { btrfs_set_super_leafsize(sb, 4096); }
static void m_stripe(struct btrfs_super_block *sb) { btrfs_set_super_stripesize(sb, 512); }
static void m_level(struct btrfs_super_block *sb) { btrfs_set_super_root_level(sb, 8); }
static void m_chunk_level(struct btrfs_super_block *sb) { btrfs_set_super_chunk_root_level(sb, 200); }
static void m_log_level(struct btrfs_super_block *sb) { btrfs_set_super_log_root_level(sb, 9); }
static void m_root_align(struct btrfs_super_block *sb) { btrfs_set_super_root(sb, btrfs_super_root(sb) + 1); }
static void m_chunk_align(struct btrfs_super_block *sb) { btrfs_set_super_chunk_root(sb, 4095); }
static void m_log_align(struct btrfs_super_block *sb) { btrfs_set_super_log_root(sb, 77); }
static void m_total(struct btrfs_super_block *sb) { btrfs_set_super_total_bytes(sb, 0); }
static void m_used(struct btrfs_super_block *sb) { btrfs_set_super_bytes_used(sb, 4096); }
static void m_ndev(struct btrfs_super_block *sb) { btrfs_set_super_num_devices(sb, 0); }
static void m_sys_big(struct btrfs_super_block *sb) { btrfs_set_super_sys_chunk_array_size(sb, 2049); }
static void m_sys_small(struct btrfs_super_block *sb) { btrfs_set_super_sys_chunk_array_size(sb, 20); }
static void m_devfsid(struct btrfs_super_block *sb) { sb->dev_item.fsid[3] ^= 1; }
static void m_gen(struct btrfs_super_block *sb) { btrfs_set_super_generation(sb, 0); }

static const struct mutation mutations[] = {
	{ "magic", m_magic, 0 },
	{ "checksum", m_csum, 1 },
	{ "csum type", m_csum_type, 1 },
	{ "bytenr", m_bytenr, 0 },
	{ "sectorsize too small", m_sector_small, 0 },
	{ "sectorsize not a power of two", m_sector_pow2, 0 },
	{ "nodesize too big", m_node_big, 0 },
	{ "nodesize zero", m_node_zero, 0 },
	{ "leafsize", m_leaf, 0 },
	{ "stripesize", m_stripe, 0 },
	{ "root level", m_level, 0 },
	{ "chunk root level", m_chunk_level, 0 },
	{ "log root level", m_log_level, 0 },
	{ "root alignment", m_root_align, 0 },
	{ "chunk root alignment", m_chunk_align, 0 },
	{ "log root alignment", m_log_align, 0 },
	{ "total_bytes", m_total, 0 },
	{ "bytes_used", m_used, 0 },
	{ "num_devices", m_ndev, 0 },
	{ "sys array too big", m_sys_big, 0 },
	{ "sys array too small", m_sys_small, 0 },
	{ "dev_item fsid", m_devfsid, 0 },
	{ "generation", m_gen, 0 },
};

static void test_validation_rules(const struct btrfs_super_block *good)
{
	char why[UBT_SUPER_WHY_LEN];

	for (size_t i = 0; i < UBT_ARRAY_SIZE(mutations); i++) {
		struct btrfs_super_block sb = *good;
		mutations[i].apply(&sb);
		if (!mutations[i].keep_csum)
			CHECK_EQ_INT(ubt_super_update_csum(&sb), 0);
		why[0] = 0;
		int ret = ubt_super_validate(&sb, 65536, why, sizeof(why));
		if (ret != -EUCLEAN)
			fprintf(stderr, "mutation '%s' was not rejected\n", mutations[i].what);
		CHECK_EQ_INT(ret, -EUCLEAN);
		CHECK(why[0] != 0);
	}
	/* The unmodified copy passes. */
	CHECK_EQ_INT(ubt_super_validate(good, 65536, why, sizeof(why)), 0);
}

/* Build a memory device holding copies 0 and 1 of `good`. */
static struct ubt_bdev *mem_with_copies(const struct btrfs_super_block *c0,
					const struct btrfs_super_block *c1)
{
	struct ubt_bdev *bd;
	uint8_t *data;

	if (ubt_bdev_open_memory((64ull << 20) + 65536, NULL, 0, 0, &bd))
		return NULL;
	data = ubt_bdev_memory_data(bd);
	if (c0)
		memcpy(data + 65536, c0, sizeof(*c0));
	if (c1)
		memcpy(data + (64ull << 20), c1, sizeof(*c1));
	return bd;
}

static void test_copy_selection(const struct btrfs_super_block *good)
{
	struct btrfs_super_block c0 = *good, c1 = *good, out;
	struct ubt_bdev *bd;
	int which;

	btrfs_set_super_bytenr(&c1, 64ull << 20);
	CHECK_EQ_INT(ubt_super_update_csum(&c1), 0);

	/* Equal generations: the primary wins. */
	bd = mem_with_copies(&c0, &c1);
	CHECK_EQ_INT(ubt_super_read_best(bd, &out, &which), 0);
	CHECK_EQ_INT(which, 0);
	ubt_bdev_close(bd);

	/* A newer mirror wins. */
	struct btrfs_super_block newer = c1;
	btrfs_set_super_generation(&newer, btrfs_super_generation(good) + 5);
	CHECK_EQ_INT(ubt_super_update_csum(&newer), 0);
	bd = mem_with_copies(&c0, &newer);
	CHECK_EQ_INT(ubt_super_read_best(bd, &out, &which), 0);
	CHECK_EQ_INT(which, 1);
	CHECK_EQ_U64(btrfs_super_generation(&out), btrfs_super_generation(good) + 5);
	ubt_bdev_close(bd);

	/* A damaged primary falls back to the mirror. */
	struct btrfs_super_block bad = c0;
	bad.label[0] ^= 1;
	bd = mem_with_copies(&bad, &c1);
	CHECK_EQ_INT(ubt_super_read_best(bd, &out, &which), 0);
	CHECK_EQ_INT(which, 1);
	ubt_bdev_close(bd);

	/* A newer mirror of another filesystem is ignored. */
	struct btrfs_super_block other = newer;
	other.fsid[0] ^= 0xff;
	memcpy(other.dev_item.fsid, other.fsid, BTRFS_FSID_SIZE);
	CHECK_EQ_INT(ubt_super_update_csum(&other), 0);
	bd = mem_with_copies(&c0, &other);
	CHECK_EQ_INT(ubt_super_read_best(bd, &out, &which), 0);
	CHECK_EQ_INT(which, 0);
	ubt_bdev_close(bd);

	/* Nothing valid: -EUCLEAN. */
	bd = mem_with_copies(&bad, NULL);
	CHECK_EQ_INT(ubt_super_read_best(bd, &out, &which), -EUCLEAN);
	ubt_bdev_close(bd);

	/* A device too small for even the primary copy. */
	CHECK_EQ_INT(ubt_bdev_open_memory(65536 + 100, NULL, 0, 0, &bd), 0);
	CHECK(ubt_super_read_best(bd, &out, &which) < 0);
	ubt_bdev_close(bd);
}

static void test_feature_policy(const struct btrfs_super_block *good)
{
	/* A build that could write everything it knows. */
	const struct ubt_feature_policy permissive = {
		.compat_ro_write = ubt_compat_ro_known,
		.incompat_read = ubt_incompat_known,
		.incompat_write = ubt_incompat_known,
	};
	struct btrfs_super_block sb = *good;

	CHECK_EQ_INT(ubt_super_check_features(&sb, false, &permissive, "t"), 0);
	CHECK_EQ_INT(ubt_super_check_features(&sb, true, &permissive, "t"), 0);
	CHECK_EQ_INT(ubt_super_check_features(&sb, false, &ubt_feature_policy_current, "t"), 0);

	/* Unknown incompat bit: refused for reading and writing. */
	btrfs_set_super_incompat_flags(&sb, btrfs_super_incompat_flags(good) | (1ull << 60));
	CHECK_EQ_INT(ubt_super_check_features(&sb, false, &permissive, "t"), -EOPNOTSUPP);
	CHECK_EQ_INT(ubt_super_check_features(&sb, true, &permissive, "t"), -EOPNOTSUPP);

	/* Unknown compat_ro bit: read-only only. */
	sb = *good;
	btrfs_set_super_compat_ro_flags(&sb, btrfs_super_compat_ro_flags(good) | (1ull << 61));
	CHECK_EQ_INT(ubt_super_check_features(&sb, false, &permissive, "t"), 0);
	CHECK_EQ_INT(ubt_super_check_features(&sb, true, &permissive, "t"), -EROFS);

	/* An unfinished conversion (super flag) or an unknown super flag:
	 * read-only only; a seed device or metadata dump is never written. */
	sb = *good;
	btrfs_set_super_flags(&sb, btrfs_super_flags(good) | BTRFS_SUPER_FLAG_CHANGING_BG_TREE);
	CHECK_EQ_INT(ubt_super_check_features(&sb, false, &permissive, "t"), 0);
	CHECK_EQ_INT(ubt_super_check_features(&sb, true, &permissive, "t"), -EROFS);
	btrfs_set_super_flags(&sb, btrfs_super_flags(good) | (1ull << 50));
	CHECK_EQ_INT(ubt_super_check_features(&sb, true, &permissive, "t"), -EROFS);
	btrfs_set_super_flags(&sb, btrfs_super_flags(good) | BTRFS_SUPER_FLAG_SEEDING);
	CHECK_EQ_INT(ubt_super_check_features(&sb, false, &permissive, "t"), 0);
	CHECK_EQ_INT(ubt_super_check_features(&sb, true, &permissive, "t"), -EROFS);

	/* Unknown compat bit: no restriction. */
	sb = *good;
	btrfs_set_super_compat_flags(&sb, 1ull << 40);
	CHECK_EQ_INT(ubt_super_check_features(&sb, true, &permissive, "t"), 0);
}

/* Write `sb` as the primary copy of a copy of image `src` and open it. */
static int open_modified(const char *src, const struct btrfs_super_block *sb, unsigned flags,
			 ubtrfs_fs **fs)
{
	char path[512], cmd[1100];

	snprintf(path, sizeof(path), "%s/modified.img", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", src, path);
	if (system(cmd) != 0)
		return -EIO;
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	ssize_t n = pwrite(fd, sb, sizeof(*sb), 65536);
	/* Remove the mirror so the modified primary is the only candidate. */
	static const uint8_t zero[4096];
	ssize_t m = pwrite(fd, zero, sizeof(zero), 64ll << 20);
	close(fd);
	if (n != (ssize_t)sizeof(*sb) || m != (ssize_t)sizeof(zero))
		return -EIO;
	const char *devs[] = { path };
	return ubtrfs_open(devs, 1, flags, fs);
}

static void test_public_open(const char *img, const struct btrfs_super_block *good)
{
	struct btrfs_super_block sb = *good;
	ubtrfs_fs *fs = NULL;

	CHECK_EQ_INT(open_modified(img, &sb, 0, &fs), 0);
	if (fs) {
		struct ubtrfs_feature_report rep;
		CHECK(ubtrfs_is_readonly(fs));
		ubtrfs_features(fs, &rep);
		CHECK_EQ_U64(rep.used[UBTRFS_FEATURE_INCOMPAT], btrfs_super_incompat_flags(good));
		CHECK_EQ_U64(rep.used[UBTRFS_FEATURE_INCOMPAT] & ~rep.read_supported[UBTRFS_FEATURE_INCOMPAT], 0);
		ubtrfs_close(fs);
		fs = NULL;
	}

	btrfs_set_super_incompat_flags(&sb, btrfs_super_incompat_flags(good) | (1ull << 62));
	CHECK_EQ_INT(ubt_super_update_csum(&sb), 0);
	CHECK_EQ_INT(open_modified(img, &sb, 0, &fs), -EOPNOTSUPP);
	CHECK(fs == NULL);

	sb = *good;
	btrfs_set_super_compat_ro_flags(&sb, btrfs_super_compat_ro_flags(good) | (1ull << 62));
	CHECK_EQ_INT(ubt_super_update_csum(&sb), 0);
	CHECK_EQ_INT(open_modified(img, &sb, 0, &fs), 0);
	if (fs) {
		CHECK(ubtrfs_is_readonly(fs));
		ubtrfs_close(fs);
		fs = NULL;
	}
	CHECK_EQ_INT(open_modified(img, &sb, UBTRFS_OPEN_RDWR, &fs), -EROFS);
	CHECK(fs == NULL);

	/* Names of known features are reported. */
	CHECK(ubtrfs_feature_name(UBTRFS_FEATURE_INCOMPAT, 9) != NULL);	/* NO_HOLES */
	CHECK(ubtrfs_feature_name(UBTRFS_FEATURE_INCOMPAT, 62) == NULL);
}

int main(void)
{
	static const struct { const char *name; unsigned type; const char *extra; } types[] = {
		{ "crc32c", UBT_CSUM_CRC32C, "" },
		{ "xxhash", UBT_CSUM_XXHASH64, "-n 4096" },
		{ "sha256", UBT_CSUM_SHA256, "-n 65536" },
		{ "blake2", UBT_CSUM_BLAKE2B, "-O ^no-holes" },
	};

	if (!have_mkfs())
		return t_skip("mkfs.btrfs not installed (apt-get install btrfs-progs)");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	for (size_t i = 0; i < UBT_ARRAY_SIZE(types); i++)
		test_real_image(types[i].name, types[i].type, types[i].extra);

	char img[600];
	snprintf(img, sizeof(img), "%s/crc32c.img", tmpdir);
	struct ubt_bdev *bd;
	struct btrfs_super_block good;
	if (ubt_bdev_open_file(img, UBT_BDEV_RDONLY, &bd) == 0) {
		CHECK_EQ_INT(ubt_super_read_raw(bd, 0, &good), 0);
		ubt_bdev_close(bd);
		test_validation_rules(&good);
		test_copy_selection(&good);
		test_feature_policy(&good);
		test_public_open(img, &good);
	} else {
		CHECK(0);
	}

	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	return t_finish();
}
