/*
 * fuzz: fs/compress decompressors (zlib, LZO with btrfs framing, zstd).
 *
 * Input layout:
 *   byte 0     bits 0-1: compression type (0 none, 1 zlib, 2 lzo, 3 zstd)
 *              bits 2-4: sector size (4K, 512, 1K, 2K, 8K, 16K, 32K, 64K)
 *              bits 5-7: how much of the output to ask for (see out_len below)
 *   bytes 1-2  little-endian hint for the output size / range start
 *   the rest   the compressed extent bytes
 *
 * Checked: no out-of-bounds access (ASan), no undefined behaviour (UBSan),
 * out_got <= out_len and zeros after it, only the documented error codes,
 * the range helper agrees with a whole decode, and whatever decoded
 * compresses and decodes back to itself.
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *     -Iinclude -Isrc/lib tests/fuzz/fuzz_decompress.c src/lib/fs/compress.c \
 *     src/lib/base/log.c -llzo2 -lz -lzstd -lpthread
 * or with -DUBT_FUZZ_STANDALONE (any compiler) for a driver that runs the
 * files named on its command line once each (corpus regression).
 */
#include "base/base.h"
#include "fs/compress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t sector_sizes[8] = { 4096, 512, 1024, 2048, 8192, 16384, 32768, 65536 };

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_decompress: %s\n", what);
	abort();
}

static void check_result(int ret, const uint8_t *out, size_t out_len, size_t got)
{
	if (ret != 0 && ret != -EIO && ret != -EUCLEAN && ret != -ENOMEM)
		fail("unexpected error code");
	if (got > out_len)
		fail("out_got > out_len");
	for (size_t i = got; i < out_len; i++)
		if (out[i])
			fail("byte after out_got not zeroed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *out = NULL, *part = NULL, *comp = NULL, *back = NULL;
	size_t got = 0;

	if (size < 3)
		return 0;
	ubt_log_set_level(-1);	/* errors are expected; keep the run quiet */

	int type = data[0] & 3;
	size_t ss = sector_sizes[(data[0] >> 2) & 7];
	unsigned mode = data[0] >> 5;
	size_t hint = (size_t)data[1] | (size_t)data[2] << 8;
	const uint8_t *in = data + 3;
	size_t in_len = size - 3;

	/* Output sizes: the whole extent, small, odd, or from the hint. */
	size_t out_len;
	switch (mode) {
	case 0:
		out_len = UBT_MAX_UNCOMPRESSED;
		break;
	case 1:
		out_len = 4096;
		break;
	case 2:
		out_len = 1;
		break;
	case 3:
		out_len = 0;
		break;
	default:
		out_len = (hint * 2) % UBT_MAX_UNCOMPRESSED + 1;
		break;
	}

	/* Exactly out_len bytes, so ASan sees any overrun. */
	out = malloc(out_len ? out_len : 1);
	if (!out)
		goto done;
	int ret = ubt_decompress(type, in, in_len, out, out_len, ss, &got);
	check_result(ret, out, out_len, got);

	/* The range helper must agree with the whole decode. */
	if (out_len > 1) {
		size_t skip = hint % out_len;
		size_t len = out_len - skip;
		size_t pgot = 0;
		part = malloc(len);
		if (!part)
			goto done;
		int pret = ubt_decompress_range(type, in, in_len, ss, skip, part, len, &pgot);
		check_result(pret, part, len, pgot);
		if (pret != ret && pret != -ENOMEM && ret != -ENOMEM)
			fail("range helper and whole decode disagree on success");
		if (pret == 0 && ret == 0) {
			if (memcmp(part, out + skip, len))
				fail("range helper bytes differ from the whole decode");
			if (pgot != (got > skip ? got - skip : 0))
				fail("range helper out_got differs");
		}
	}

	/* Whatever decoded must survive our own compressor. */
	if (ret == 0 && got > 0 && type != BTRFS_COMPRESS_NONE) {
		size_t cap = ubt_compress_bound(type, got, ss), clen = 0, bgot = 0;
		comp = malloc(cap);
		back = malloc(got);
		if (!comp || !back)
			goto done;
		int cret = ubt_compress(type, 0, out, got, comp, cap, ss, &clen);
		if (cret == 0) {
			int bret = ubt_decompress(type, comp, clen, back, got, ss, &bgot);
			if (bret != 0 || bgot != got || memcmp(back, out, got))
				fail("round trip of decoded data failed");
		} else if (cret != -E2BIG && cret != -ENOMEM) {
			fail("compressing decoded data failed");
		}
	}
done:
	free(out);
	free(part);
	free(comp);
	free(back);
	return 0;
}

#ifdef UBT_FUZZ_STANDALONE
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 1;
		}
		static uint8_t buf[1 << 20];
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	return 0;
}
#endif
