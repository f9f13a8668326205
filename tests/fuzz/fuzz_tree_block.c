/*
 * fuzz: the tree checker on arbitrary 4 KiB tree blocks.
 *
 * The input is the block (short inputs are zero-padded, long ones cut).  The
 * harness stamps the filesystem's fsid and a valid crc32c into the header so
 * mutations reach the item checks instead of dying at the checksum, then
 * runs the reader's entry point and the leaf/node checks directly.  Byte 0
 * (part of the checksum field, so otherwise unused) picks context options:
 *   bit 0 MIXED_GROUPS, bit 1 SKINNY_METADATA, bit 2 read-only,
 *   bit 3 super_generation known (= header generation), bit 4 keep the
 *   input's fsid (exercise the -EIO path).
 * The checker must never crash, read outside the block or return anything
 * but 0, -EIO or -EUCLEAN.
 *
 * Build with libFuzzer (BASE = the .c files of src/lib/base):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc/lib
 *     tests/fuzz/fuzz_tree_block.c src/lib/tree/checker*.c BASE
 *     src/lib/format/format_names.c -lxxhash -lb2 -lcrypto -lpthread
 * Without libFuzzer, -DUBT_FUZZ_STANDALONE (or -DUBT_FUZZ_MAIN) adds a main()
 * that runs each file named on the command line once (seed replay, crashes).
 */
#include "base/base.h"
#include "format/btrfs_format.h"
#include "tree/checker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NODESIZE 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t fuzz_fsid[BTRFS_FSID_SIZE] = {
	0x3a, 0x1c, 0x55, 0x02, 0x9e, 0x41, 0x4b, 0x7d,
	0x86, 0x11, 0xc2, 0x5f, 0x60, 0x0e, 0xd3, 0x29,
};

static void quiet_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
}

static void check_result(int ret)
{
	if (ret != 0 && ret != -EIO && ret != -EUCLEAN)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t block[FUZZ_NODESIZE];
	struct btrfs_header *h = (struct btrfs_header *)block;
	struct ubt_check_ctx ctx;
	struct ubt_block_expect exp;
	uint8_t opts;

	ubt_log_set_handler(quiet_log, NULL);
	memset(block, 0, sizeof(block));
	memcpy(block, data, size < sizeof(block) ? size : sizeof(block));
	opts = block[0];

	memset(&ctx, 0, sizeof(ctx));
	ctx.nodesize = FUZZ_NODESIZE;
	ctx.sectorsize = 4096;
	ctx.csum_type = BTRFS_CSUM_TYPE_CRC32;
	memcpy(ctx.fsid, fuzz_fsid, sizeof(ctx.fsid));
	if (opts & 1)
		ctx.incompat_flags |= BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS;
	if (opts & 2)
		ctx.incompat_flags |= BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA;
	ctx.read_only = (opts & 4) != 0;
	if (opts & 8)
		ctx.super_generation = btrfs_header_generation(h);
	if (!(opts & 16))
		memcpy(btrfs_header_fsid(h), fuzz_fsid, BTRFS_FSID_SIZE);
	if (ubt_tree_block_set_csum(&ctx, block) != 0)
		abort();

	memset(&exp, 0, sizeof(exp));
	exp.bytenr = btrfs_header_bytenr(h);
	exp.level = -1;
	check_result(ubt_check_tree_block(&ctx, block, &exp));

	/* The structure checks on their own, whatever the header says. */
	if (btrfs_header_level(h) == 0)
		check_result(ubt_check_leaf(&ctx, block));
	else
		check_result(ubt_check_node(&ctx, block));

	/* With expectations taken from the block itself. */
	exp.generation = btrfs_header_generation(h);
	exp.level = btrfs_header_level(h) < BTRFS_MAX_LEVEL ? btrfs_header_level(h) : -1;
	exp.owner = btrfs_header_owner(h);
	exp.has_first_key = true;
	btrfs_disk_key_to_cpu(&exp.first_key,
			      (const struct btrfs_disk_key *)(block + sizeof(struct btrfs_header)));
	check_result(ubt_check_tree_block(&ctx, block, &exp));
	return 0;
}

#if defined(UBT_FUZZ_STANDALONE) || defined(UBT_FUZZ_MAIN)
int main(int argc, char **argv)
{
	static uint8_t buf[1 << 20];

	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		size_t n;

		if (!f) {
			perror(argv[i]);
			return 1;
		}
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	return 0;
}
#endif
