/*
 * libFuzzer harness: superblock validation, copy selection, printing
 * (dump-super, including the system chunk array walk) and the system chunk
 * array loader, on arbitrary 4 KiB superblocks.  The input is placed at the
 * primary copy's offset of a memory device; when it carries a valid-looking
 * magic the harness also fixes its checksum so the deeper checks run.
 *
 * Build with clang -fsanitize=fuzzer (meson -Dfuzzers=true), or with
 * -DUBT_FUZZ_STANDALONE for a driver that replays files.
 */
#include "base/base.h"
#include "format/btrfs_format.h"
#include "io/io.h"
#include "volume/volume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, const char *text, size_t len)
{
	(void)ctx;
	(void)text;
	(void)len;
}

static void quiet(void *ctx, int level, const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct btrfs_super_block sb;
	struct ubt_bdev *bd;
	char why[UBT_SUPER_WHY_LEN];

	ubt_log_set_handler(quiet, NULL);
	memset(&sb, 0, sizeof(sb));
	memcpy(&sb, data, size < sizeof(sb) ? size : sizeof(sb));
	/* Let inputs reach past the checksum check. */
	if (size > 0 && (data[0] & 1)) {
		btrfs_set_super_bytenr(&sb, BTRFS_SUPER_INFO_OFFSET);
		btrfs_set_super_magic(&sb, BTRFS_MAGIC);
		btrfs_set_super_csum_type(&sb, btrfs_super_csum_type(&sb) & 3);
		ubt_super_update_csum(&sb);
	}
	ubt_super_validate(&sb, BTRFS_SUPER_INFO_OFFSET, why, sizeof(why));
	ubt_super_print(&sb, true, sink, NULL);

	if (ubt_bdev_open_memory(BTRFS_SUPER_INFO_OFFSET + BTRFS_SUPER_INFO_SIZE, NULL, 0, 0, &bd) == 0) {
		memcpy(ubt_bdev_memory_data(bd) + BTRFS_SUPER_INFO_OFFSET, &sb, sizeof(sb));
		struct btrfs_super_block out;
		if (ubt_super_read_best(bd, &out, NULL) == 0) {
			struct ubt_volume *vol = calloc(1, sizeof(*vol));
			if (vol) {
				memcpy(&vol->super, &out, sizeof(out));
				vol->sectorsize = btrfs_super_sectorsize(&out);
				vol->nodesize = btrfs_super_nodesize(&out);
				ubt_volume_load_sys_array(vol);
				for (uint64_t l = 0; l < 4; l++)
					ubt_volume_num_copies(vol, l << 22);
				ubt_volume_close(vol);
			}
		}
		ubt_bdev_close(bd);
	}
	return 0;
}

#ifdef UBT_FUZZ_STANDALONE
int main(int argc, char **argv)
{
	static uint8_t buf[1 << 16];
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 1;
		}
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	return 0;
}
#endif
