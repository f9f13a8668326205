/*
 * unit: fs/compress — zlib, LZO (btrfs framing) and zstd.
 *
 *   round trips over many sizes, data kinds, levels and sector sizes;
 *   a hand-built LZO stream whose segment header must skip the last bytes
 *   of a sector, checked against the compressor's layout;
 *   kernel read rules (unchecked Adler-32, zstd window cap, first frame
 *   only, frames without content size, LZO header length rules);
 *   truncated, bit-flipped and random inputs: no crash, bounded output,
 *   errors logged;
 *   the range helper for partially referenced extents.
 *
 * The kernel itself judges the formats in tests/compat/t-compress-oracle.sh,
 * which drives this program's CLI mode:
 *
 *   test_compress --decompress TYPE SECTORSIZE RAMBYTES [SKIP LEN] <in >out
 *
 * TYPE is 1/zlib, 2/lzo or 3/zstd; without SKIP/LEN it writes RAMBYTES
 * bytes, with them bytes [SKIP, SKIP+LEN).  Exit 0, or 1 with the reason on
 * stderr.
 */
#include "t.h"

#include "base/base.h"
#include "fs/compress.h"

#include <errno.h>
#include <stdbool.h>
#include <unistd.h>

#include <lzo/lzo1x.h>
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_getFrameHeader() */
#include <zstd.h>

#define KIB 1024u
static const int types[] = { BTRFS_COMPRESS_ZLIB, BTRFS_COMPRESS_LZO, BTRFS_COMPRESS_ZSTD };

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rnd() >> 56);
}

/* Compressible, text-like bytes: words from a small vocabulary. */
static void fill_text(uint8_t *p, size_t n)
{
	static const char *const words[] = {
		"btrfs ", "extent ", "compressed ", "sector ", "the ", "kernel ", "leaf ",
		"node\n", "checksum ", "subvolume ", "a ", "of ", "and ", "snapshot\n",
	};
	size_t i = 0;
	while (i < n) {
		const char *w = words[rnd() % UBT_ARRAY_SIZE(words)];
		for (size_t j = 0; w[j] && i < n; j++)
			p[i++] = (uint8_t)w[j];
	}
}

enum kind { K_TEXT, K_ZERO, K_RANDOM, K_MIXED };

static void fill(enum kind k, uint8_t *p, size_t n)
{
	switch (k) {
	case K_TEXT:
		fill_text(p, n);
		break;
	case K_ZERO:
		memset(p, 0, n);
		break;
	case K_RANDOM:
		fill_random(p, n);
		break;
	case K_MIXED:
		/* alternate 1000-byte runs of text and noise */
		for (size_t off = 0; off < n; off += 1000) {
			size_t m = UBT_MIN((size_t)1000, n - off);
			if ((off / 1000) % 2)
				fill_random(p + off, m);
			else
				fill_text(p + off, m);
		}
		break;
	}
}

static int log_errors;

static void count_log(void *ctx, int level, const char *msg)
{
	if (level <= UBT_LOG_ERROR)
		log_errors++;
	if (getenv("TEST_COMPRESS_VERBOSE"))
		fprintf(stderr, "  log: %s\n", msg);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static uint8_t *xmalloc(size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* ---- round trips ------------------------------------------------------- */

/*
 * Compress n bytes of kind k and check: compressible data compresses, the
 * stream decodes to the input exactly with every sector size it was made
 * for, decoding into a larger buffer zero-fills, decoding into a smaller one
 * stops early, and padding after the stream is ignored.
 */
static void round_trip(int type, int level, size_t sectorsize, enum kind k, size_t n)
{
	uint8_t *src = xmalloc(n), *dst = xmalloc(n + 8192);
	size_t cap = ubt_compress_bound(type, n, sectorsize);
	uint8_t *comp = xmalloc(cap + 2 * 65536);
	size_t clen = 0, got = 0;
	int ret;

	fill(k, src, n);
	CHECK(cap > n);
	ret = ubt_compress(type, level, src, n, comp, cap, sectorsize, &clen);
	if (ret == -E2BIG) {
		/* Fine for noise and for inputs too small to gain anything. */
		if (!((k == K_RANDOM) || n < 200 || (k == K_MIXED && n < 4096))) {
			fprintf(stderr, "  %s level %d ss %zu kind %d size %zu: unexpected E2BIG\n",
				ubt_compress_name(type), level, sectorsize, (int)k, n);
			CHECK(!"compressible data gave E2BIG");
		}
		goto out;
	}
	CHECK_EQ_INT(ret, 0);
	if (ret)
		goto out;
	CHECK(clen < n);
	if (k == K_ZERO && n >= 1000)
		CHECK(clen < n / 10);
	if (k == K_TEXT && n >= 16384)
		CHECK(clen < n * 3 / 4);

	/* exact */
	memset(dst, 0xaa, n + 8192);
	ret = ubt_decompress(type, comp, clen, dst, n, sectorsize, &got);
	CHECK_EQ_INT(ret, 0);
	CHECK_EQ_U64(got, n);
	CHECK(memcmp(dst, src, n) == 0);
	CHECK_EQ_INT(dst[n], 0xaa);	/* nothing past out_len */

	/* larger buffer: zero-filled, got tells the real size */
	memset(dst, 0xaa, n + 8192);
	ret = ubt_decompress(type, comp, clen, dst, n + 8192, sectorsize, &got);
	CHECK_EQ_INT(ret, 0);
	CHECK_EQ_U64(got, n);
	CHECK(memcmp(dst, src, n) == 0);
	CHECK(all_zero(dst + n, 8192));

	/* smaller buffer: stops there */
	if (n > 1) {
		size_t half = n / 2 + 1;
		memset(dst, 0xaa, n + 8192);
		ret = ubt_decompress(type, comp, clen, dst, half, sectorsize, &got);
		CHECK_EQ_INT(ret, 0);
		CHECK_EQ_U64(got, half);
		CHECK(memcmp(dst, src, half) == 0);
		CHECK_EQ_INT(dst[half], 0xaa);
	}

	/* as stored on disk: zero padding to the sector (a regular extent) */
	size_t padded = (clen + sectorsize - 1) / sectorsize * sectorsize;
	memset(comp + clen, 0, padded - clen);
	ret = ubt_decompress(type, comp, padded, dst, n, sectorsize, &got);
	CHECK_EQ_INT(ret, 0);
	CHECK_EQ_U64(got, n);
	CHECK(memcmp(dst, src, n) == 0);

	/* garbage after the stream, up to the sector end */
	if (padded > clen) {
		fill_random(comp + clen, padded - clen);
		ret = ubt_decompress(type, comp, padded, dst, n, sectorsize, &got);
		CHECK_EQ_INT(ret, 0);
		CHECK_EQ_U64(got, n);
		CHECK(memcmp(dst, src, n) == 0);
	}
out:
	free(src);
	free(dst);
	free(comp);
}

static void test_round_trips(void)
{
	static const size_t sizes[] = { 1,	    2,		 17,	     100,	 1000,
					4095,	    4096,	 4097,	     8191,	 8192,
					8193,	    12288,	 65535,	     65536,	 100000,
					128 * KIB - 1, 128 * KIB };
	static const enum kind kinds[] = { K_TEXT, K_ZERO, K_RANDOM, K_MIXED };

	for (size_t t = 0; t < UBT_ARRAY_SIZE(types); t++)
		for (size_t s = 0; s < UBT_ARRAY_SIZE(sizes); s++)
			for (size_t k = 0; k < UBT_ARRAY_SIZE(kinds); k++)
				round_trip(types[t], 0, 4096, kinds[k], sizes[s]);

	/* Every level. */
	for (int l = 1; l <= 9; l++)
		round_trip(BTRFS_COMPRESS_ZLIB, l, 4096, K_TEXT, 128 * KIB);
	for (int l = -15; l <= 15; l++)
		round_trip(BTRFS_COMPRESS_ZSTD, l, 4096, K_MIXED, 100000);

	/* LZO framing with other sector sizes. */
	static const size_t sss[] = { 512, 2048, 8192, 16384, 65536 };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(sss); i++)
		for (size_t s = 0; s < UBT_ARRAY_SIZE(sizes); s++) {
			round_trip(BTRFS_COMPRESS_LZO, 0, sss[i], K_TEXT, sizes[s]);
			round_trip(BTRFS_COMPRESS_LZO, 0, sss[i], K_MIXED, sizes[s]);
		}
}

/* Arguments and small cases. */
static void test_api_edges(void)
{
	uint8_t src[8192], comp[16384], dst[8192];
	size_t len = 0, got = 99;

	fill_text(src, sizeof(src));
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZLIB, 0, src, 0, comp, sizeof(comp), 4096, &len),
		     -EINVAL);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_NONE, 0, src, 100, comp, sizeof(comp), 4096, &len),
		     -EOPNOTSUPP);
	CHECK_EQ_INT(ubt_compress(7, 0, src, 100, comp, sizeof(comp), 4096, &len), -EOPNOTSUPP);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZLIB, 10, src, 100, comp, sizeof(comp), 4096, &len),
		     -EINVAL);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZLIB, -1, src, 100, comp, sizeof(comp), 4096, &len),
		     -EINVAL);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZSTD, 16, src, 100, comp, sizeof(comp), 4096, &len),
		     -EINVAL);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZSTD, -16, src, 100, comp, sizeof(comp), 4096, &len),
		     -EINVAL);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_LZO, 0, src, 100, comp, sizeof(comp), 3000, &len),
		     -EINVAL);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_LZO, 0, src, 100, comp, sizeof(comp), 0, &len),
		     -EINVAL);
	/* 128 KiB + 1 is more than one extent. */
	uint8_t *big = xmalloc(128 * KIB + 1);
	memset(big, 0, 128 * KIB + 1);
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZSTD, 0, big, 128 * KIB + 1, comp, sizeof(comp),
				  4096, &len),
		     -EINVAL);
	free(big);

	/* Output room: too small is E2BIG, for every type. */
	for (size_t t = 0; t < UBT_ARRAY_SIZE(types); t++) {
		size_t full = 0, small = 0;
		CHECK_EQ_INT(ubt_compress(types[t], 0, src, sizeof(src), comp, sizeof(comp), 4096,
					  &full),
			     0);
		CHECK_EQ_INT(ubt_compress(types[t], 0, src, sizeof(src), comp, full - 1, 4096,
					  &small),
			     -E2BIG);
		CHECK_EQ_INT(ubt_compress(types[t], 0, src, sizeof(src), comp, full, 4096, &small),
			     0);
		CHECK_EQ_U64(small, full);
		CHECK_EQ_INT(ubt_compress(types[t], 0, src, sizeof(src), comp, 3, 4096, &small),
			     -E2BIG);
		/* Random data is never "compressed". */
		uint8_t noise[8192];
		fill_random(noise, sizeof(noise));
		CHECK_EQ_INT(ubt_compress(types[t], 0, noise, sizeof(noise), comp, sizeof(comp),
					  4096, &small),
			     -E2BIG);
	}

	/* Decompress: nothing asked, nothing done; unknown type. */
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZLIB, "x", 1, dst, 0, 4096, &got), 0);
	CHECK_EQ_U64(got, 0);
	CHECK_EQ_INT(ubt_decompress(4, comp, 10, dst, 10, 4096, &got), -EOPNOTSUPP);
	CHECK_EQ_INT(ubt_decompress(-1, comp, 10, dst, 10, 4096, &got), -EOPNOTSUPP);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, comp, 10, dst, 10, 4097, &got), -EINVAL);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZLIB, NULL, 10, dst, 10, 4096, &got), -EINVAL);
	/* NONE copies, zero-filling. */
	memset(dst, 0xaa, 100);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_NONE, "abc", 3, dst, 100, 4096, &got), 0);
	CHECK_EQ_U64(got, 3);
	CHECK(memcmp(dst, "abc", 3) == 0 && all_zero(dst + 3, 97));
	/* Empty compressed input. */
	for (size_t t = 0; t < UBT_ARRAY_SIZE(types); t++) {
		int e0 = log_errors;
		int ret = ubt_decompress(types[t], comp, 0, dst, 100, 4096, &got);
		CHECK(ret == -EIO || ret == -EUCLEAN);
		CHECK(log_errors > e0);
		CHECK_EQ_U64(got, 0);
		CHECK(all_zero(dst, 100));
	}
	CHECK(strcmp(ubt_compress_name(BTRFS_COMPRESS_ZSTD), "zstd") == 0);
	CHECK(strcmp(ubt_compress_name(9), "unknown") == 0);
}

/* ---- LZO framing by hand ----------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static size_t lzo_raw(const uint8_t *in, size_t n, uint8_t *out)
{
	static uint8_t wrk[LZO1X_1_MEM_COMPRESS];
	lzo_uint olen = 0;
	int r = lzo1x_1_compress(in, n, out, &olen, wrk);
	CHECK_EQ_INT(r, LZO_E_OK);
	return olen;
}

/*
 * Sector 1 of the input is k zero bytes then noise; pick k so that its
 * LZO1X output is 4085..4087 bytes: after the 4-byte header and the first
 * 4-byte segment header the sector then has 1..3 bytes left, too few for the
 * next segment header, which must start at 4096.
 */
static void test_lzo_padding(void)
{
	enum { SS = 4096 };
	uint8_t src[3 * SS], seg[3][SS + SS / 16 + 64 + 3];
	size_t segl[3];
	uint8_t stream[4 * SS], dst[3 * SS], ours[4 * SS];
	size_t want_left = 0;
	size_t k;

	fill_text(src + SS, 2 * SS);
	for (k = 0; k <= 200; k++) {
		rng_state = 12345;
		memset(src, 0, k);
		fill_random(src + k, SS - k);
		segl[0] = lzo_raw(src, SS, seg[0]);
		if (segl[0] >= 4085 && segl[0] <= 4087)
			break;
	}
	CHECK(k <= 200);
	if (k > 200)
		return;
	want_left = SS - (8 + segl[0]);
	CHECK(want_left >= 1 && want_left <= 3);
	segl[1] = lzo_raw(src + SS, SS, seg[1]);
	segl[2] = lzo_raw(src + 2 * SS, SS, seg[2]);

	/* Lay it out: header, seg0, padding, seg1 at 4096, seg2 (+ padding?). */
	size_t pos = 4;
	memset(stream, 0, sizeof(stream));
	for (int i = 0; i < 3; i++) {
		put32(stream + pos, (uint32_t)segl[i]);
		memcpy(stream + pos + 4, seg[i], segl[i]);
		pos += 4 + segl[i];
		if (SS - pos % SS < 4)
			pos += SS - pos % SS;
		if (i == 0)
			CHECK_EQ_U64(pos, SS);
	}
	put32(stream, (uint32_t)pos);

	size_t got = 0;
	memset(dst, 0xaa, sizeof(dst));
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, stream, pos, dst, sizeof(dst), SS, &got),
		     0);
	CHECK_EQ_U64(got, sizeof(dst));
	CHECK(memcmp(dst, src, sizeof(dst)) == 0);

	/* Our compressor lays out the very same bytes. */
	size_t olen = 0;
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_LZO, 0, src, sizeof(src), ours, sizeof(ours), SS,
				  &olen),
		     0);
	CHECK_EQ_U64(olen, pos);
	CHECK(olen == pos && memcmp(ours, stream, pos) == 0);

	/* The padding is skipped, not read: garbage there changes nothing. */
	uint8_t bad[4 * SS];
	memcpy(bad, stream, pos);
	memset(bad + 8 + segl[0], 0xee, want_left);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, pos, dst, sizeof(dst), SS, &got), 0);
	CHECK(memcmp(dst, src, sizeof(dst)) == 0);

	/* With no padding (header straddling the boundary) it must not decode. */
	int e0 = log_errors;
	memcpy(bad, stream, 8 + segl[0]);
	size_t p2 = 8 + segl[0];
	for (int i = 1; i < 3; i++) {
		put32(bad + p2, (uint32_t)segl[i]);
		memcpy(bad + p2 + 4, seg[i], segl[i]);
		p2 += 4 + segl[i];
	}
	put32(bad, (uint32_t)p2);
	int ret = ubt_decompress(BTRFS_COMPRESS_LZO, bad, p2, dst, sizeof(dst), SS, &got);
	CHECK(ret == -EUCLEAN || ret == -EIO);
	CHECK(log_errors > e0);

	/* The layout depends on the sector size: read as 64K sectors, it fails. */
	e0 = log_errors;
	ret = ubt_decompress(BTRFS_COMPRESS_LZO, stream, pos, dst, sizeof(dst), 65536, &got);
	CHECK(ret == -EUCLEAN || ret == -EIO);
	CHECK(log_errors > e0);

	/* Header total: more than in_len, or leaving whole sectors unused. */
	memcpy(bad, stream, pos);
	put32(bad, (uint32_t)pos + 1);
	e0 = log_errors;
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, pos, dst, sizeof(dst), SS, &got),
		     -EUCLEAN);
	CHECK(log_errors > e0);
	size_t padded = (pos + SS - 1) / SS * SS;
	memcpy(bad, stream, pos);
	memset(bad + pos, 0, sizeof(bad) - pos);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, padded, dst, sizeof(dst), SS, &got), 0);
	CHECK(padded + SS <= sizeof(bad));
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, padded + SS, dst, sizeof(dst), SS,
				    &got),
		     -EUCLEAN);
	/* A total that stops early decodes only what it covers (zero-filled). */
	put32(bad, (uint32_t)(SS + 4 + segl[1]));
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, 2 * SS, dst, sizeof(dst), SS, &got), 0);
	CHECK_EQ_U64(got, 2 * SS);
	CHECK(memcmp(dst, src, 2 * SS) == 0 && all_zero(dst + 2 * SS, SS));
	/* A segment longer than lzo1x_worst_compress(sectorsize). */
	memcpy(bad, stream, pos);
	put32(bad + 4, 5000);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, pos, dst, sizeof(dst), SS, &got),
		     -EUCLEAN);
	/* A segment running past the total. */
	memcpy(bad, stream, pos);
	put32(bad + SS, (uint32_t)(pos - SS));
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, pos, dst, sizeof(dst), SS, &got),
		     -EUCLEAN);
	CHECK_EQ_U64(got, SS);	/* the first segment did decode */
	CHECK(memcmp(dst, src, SS) == 0 && all_zero(dst + SS, 2 * SS));
	/* A segment of zero bytes is not LZO data. */
	memcpy(bad, stream, pos);
	put32(bad + 4, 0);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, bad, pos, dst, sizeof(dst), SS, &got),
		     -EIO);

	/* Inline-style: one segment, total == in_len exactly. */
	uint8_t small[600], inl[800];
	fill_text(small, sizeof(small));
	size_t sl = lzo_raw(small, sizeof(small), inl + 8);
	put32(inl, (uint32_t)(sl + 8));
	put32(inl + 4, (uint32_t)sl);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_LZO, inl, sl + 8, dst, 600, SS, &got), 0);
	CHECK_EQ_U64(got, 600);
	CHECK(memcmp(dst, small, 600) == 0);
}

/* ---- kernel read rules for zlib and zstd ------------------------------- */

static void test_zlib_rules(void)
{
	uint8_t src[20000], comp[30000], dst[20000];
	size_t clen = 0, got = 0;

	fill_text(src, sizeof(src));
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZLIB, 0, src, sizeof(src), comp, sizeof(comp), 4096,
				  &clen),
		     0);
	/* zlib header: deflate, 32K window, FCHECK. */
	CHECK_EQ_INT(comp[0], 0x78);
	CHECK_EQ_INT(((comp[0] << 8) | comp[1]) % 31, 0);

	/* The kernel never checks the Adler-32 trailer, nor do we. */
	comp[clen - 1] ^= 0xff;
	comp[clen - 3] ^= 0x55;
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZLIB, comp, clen, dst, sizeof(dst), 4096, &got),
		     0);
	CHECK_EQ_U64(got, sizeof(dst));
	CHECK(memcmp(dst, src, sizeof(dst)) == 0);
	/* Not even the trailer's presence. */
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZLIB, comp, clen - 4, dst, sizeof(dst), 4096,
				    &got),
		     0);
	CHECK_EQ_U64(got, sizeof(dst));

	/* Bad headers: not deflate, bad FCHECK, preset dictionary. */
	uint8_t save0 = comp[0], save1 = comp[1];
	static const uint8_t hdrs[][2] = { { 0x79, 0x9c }, { 0x78, 0x9d }, { 0x78, 0xbb }, { 0x88, 0x98 } };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(hdrs); i++) {
		int e0 = log_errors;
		comp[0] = hdrs[i][0];
		comp[1] = hdrs[i][1];
		CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZLIB, comp, clen, dst, sizeof(dst), 4096,
					    &got),
			     -EIO);
		CHECK(log_errors > e0);
	}
	comp[0] = save0;
	comp[1] = save1;

	/* Cut short (no end of stream, out not full): -EIO, prefix kept. */
	int e0 = log_errors;
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZLIB, comp, clen / 2, dst, sizeof(dst), 4096,
				    &got),
		     -EIO);
	CHECK(log_errors > e0);
	CHECK(got < sizeof(dst));
	CHECK(memcmp(dst, src, got) == 0 && all_zero(dst + got, sizeof(dst) - got));
}

static void test_zstd_rules(void)
{
	enum { N = 100000 };
	uint8_t *src = xmalloc(200000), *comp = xmalloc(300000), *dst = xmalloc(200000);
	size_t clen, got = 0;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();

	fill(K_MIXED, src, 200000);

	/* Our frames: window <= 128 KiB, content size recorded. */
	CHECK_EQ_INT(ubt_compress(BTRFS_COMPRESS_ZSTD, 15, src, 128 * KIB, comp, 300000, 4096, &clen),
		     0);
	ZSTD_frameHeader fh;
	CHECK_EQ_U64(ZSTD_getFrameHeader(&fh, comp, clen), 0);
	CHECK(fh.windowSize <= 128 * KIB);
	CHECK_EQ_U64(fh.frameContentSize, 128 * KIB);
	CHECK_EQ_INT(fh.checksumFlag, 0);

	/* A frame without content size, as a streaming writer makes it. */
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 17);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	{
		ZSTD_inBuffer ib = { src, N, 0 };
		ZSTD_outBuffer ob = { comp, 300000, 0 };
		size_t r = ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_end);
		CHECK_EQ_U64(r, 0);
		clen = ob.pos;
	}
	CHECK_EQ_U64(ZSTD_getFrameContentSize(comp, clen), ZSTD_CONTENTSIZE_UNKNOWN);
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZSTD, comp, clen, dst, 128 * KIB, 4096, &got), 0);
	CHECK_EQ_U64(got, N);
	CHECK(memcmp(dst, src, N) == 0 && all_zero(dst + N, 128 * KIB - N));

	/* Only the first frame counts: a second one is ignored. */
	size_t c2 = ZSTD_compress(comp + clen, 300000 - clen, src + N, 1000, 3);
	CHECK(!ZSTD_isError(c2));
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZSTD, comp, clen + c2, dst, 128 * KIB, 4096,
				    &got),
		     0);
	CHECK_EQ_U64(got, N);

	/* Cut short: -EIO. */
	int e0 = log_errors;
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZSTD, comp, clen / 2, dst, 128 * KIB, 4096, &got),
		     -EIO);
	CHECK(log_errors > e0);
	CHECK(memcmp(dst, src, got) == 0 && all_zero(dst + got, 128 * KIB - got));

	/* A window over 128 KiB is refused, as the kernel refuses it. */
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 20);
	{
		ZSTD_inBuffer ib = { src, 200000, 0 };
		ZSTD_outBuffer ob = { comp, 300000, 0 };
		size_t r = ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_end);
		CHECK_EQ_U64(r, 0);
		clen = ob.pos;
	}
	e0 = log_errors;
	CHECK_EQ_INT(ubt_decompress(BTRFS_COMPRESS_ZSTD, comp, clen, dst, 128 * KIB, 4096, &got),
		     -EIO);
	CHECK(log_errors > e0);

	ZSTD_freeCCtx(cctx);
	free(src);
	free(comp);
	free(dst);
}

/* ---- hostile input ----------------------------------------------------- */

/*
 * Decode damaged streams: every outcome is fine but a crash (ASan/UBSan
 * watch), output past out_len, undefined bytes after out_got, or an error
 * without a log message.
 */
static void hostile_one(int type, const uint8_t *in, size_t in_len, size_t out_len, size_t ss)
{
	uint8_t *dst = xmalloc(out_len + 64);
	size_t got = 12345;
	int e0 = log_errors;

	memset(dst, 0xaa, out_len + 64);
	int ret = ubt_decompress(type, in, in_len, dst, out_len, ss, &got);
	CHECK(ret == 0 || ret == -EIO || ret == -EUCLEAN);
	CHECK(got <= out_len);
	if (got <= out_len)
		CHECK(all_zero(dst + got, out_len - got));
	for (size_t i = 0; i < 64; i++)
		if (dst[out_len + i] != 0xaa) {
			CHECK(!"wrote past out_len");
			break;
		}
	if (ret)
		CHECK(log_errors > e0);
	free(dst);
}

static void test_hostile(void)
{
	enum { N = 128 * KIB };
	uint8_t *src = xmalloc(N), *comp = xmalloc(2 * N), *mut = xmalloc(2 * N);
	size_t clen = 0;

	fill(K_MIXED, src, N);
	for (size_t t = 0; t < UBT_ARRAY_SIZE(types); t++) {
		int type = types[t];
		CHECK_EQ_INT(ubt_compress(type, 0, src, N, comp, 2 * N, 4096, &clen), 0);
		size_t padded = (clen + 4095) / 4096 * 4096;
		memset(comp + clen, 0, padded - clen);

		/* Every truncation length on a coarse grid, and near the ends. */
		for (size_t cut = 0; cut < padded; cut += (cut < 64 || padded - cut < 64) ? 1 : 997)
			hostile_one(type, comp, cut, N, 4096);
		/* Bit flips, single and many. */
		for (int it = 0; it < 1500; it++) {
			memcpy(mut, comp, padded);
			int flips = it % 3 == 0 ? 1 : (int)(rnd() % 20) + 1;
			for (int f = 0; f < flips; f++) {
				size_t pos = it < 200 ? rnd() % UBT_MIN(padded, (size_t)64)
						      : rnd() % padded;
				mut[pos] ^= (uint8_t)(1u << (rnd() % 8));
			}
			hostile_one(type, mut, padded, N, 4096);
			if (it % 50 == 0)
				hostile_one(type, mut, padded, 4096, 4096);
		}
		/* Random bytes, with plausible headers. */
		for (int it = 0; it < 300; it++) {
			size_t n = rnd() % 9000;
			fill_random(mut, n);
			if (n >= 8 && type == BTRFS_COMPRESS_LZO && it % 2) {
				put32(mut, (uint32_t)n);
				put32(mut + 4, (uint32_t)(rnd() % 5000));
			}
			if (n >= 2 && type == BTRFS_COMPRESS_ZLIB && it % 2) {
				mut[0] = 0x78;
				mut[1] = 0x9c;
			}
			if (n >= 4 && type == BTRFS_COMPRESS_ZSTD && it % 2)
				put32(mut, 0xFD2FB528u);
			hostile_one(type, mut, n, N, 4096);
		}
	}
	free(src);
	free(comp);
	free(mut);
}

/* ---- range helper ------------------------------------------------------ */

static void test_range(void)
{
	enum { N = 128 * KIB };
	uint8_t *src = xmalloc(N), *comp = xmalloc(2 * N), *dst = xmalloc(N + 100);
	size_t clen = 0, got = 0;

	fill(K_TEXT, src, N);
	for (size_t t = 0; t < UBT_ARRAY_SIZE(types); t++) {
		int type = types[t];
		CHECK_EQ_INT(ubt_compress(type, 0, src, N, comp, 2 * N, 4096, &clen), 0);
		for (int it = 0; it < 60; it++) {
			size_t skip = it == 0 ? 0 : (size_t)(rnd() % N);
			size_t len = (size_t)(rnd() % (N - skip)) + 1;
			if (it == 1) {
				skip = 4096;
				len = 8192;
			}
			memset(dst, 0xaa, N + 100);
			CHECK_EQ_INT(ubt_decompress_range(type, comp, clen, 4096, skip, dst, len, &got),
				     0);
			CHECK_EQ_U64(got, len);
			CHECK(memcmp(dst, src + skip, len) == 0);
			CHECK_EQ_INT(dst[len], 0xaa);
		}
		/* Past the real data: zeros, got counts only the real part. */
		memset(dst, 0xaa, N);
		CHECK_EQ_INT(ubt_decompress_range(type, comp, clen, 4096, 100000, dst, 1000, &got), 0);
		CHECK_EQ_U64(got, 1000);
		CHECK(memcmp(dst, src + 100000, 1000) == 0);
		uint8_t small[4000];
		size_t sl = 0;
		CHECK_EQ_INT(ubt_compress(type, 0, src, 3000, small, sizeof(small), 4096, &sl), 0);
		CHECK_EQ_INT(ubt_decompress_range(type, small, sl, 4096, 2000, dst, 2000, &got), 0);
		CHECK_EQ_U64(got, 1000);
		CHECK(memcmp(dst, src + 2000, 1000) == 0 && all_zero(dst + 1000, 1000));
		CHECK_EQ_INT(ubt_decompress_range(type, small, sl, 4096, 5000, dst, 100, &got), 0);
		CHECK_EQ_U64(got, 0);
		CHECK(all_zero(dst, 100));
		/* Beyond one extent. */
		CHECK_EQ_INT(ubt_decompress_range(type, comp, clen, 4096, N - 10, dst, 11, &got),
			     -EINVAL);
		CHECK_EQ_INT(ubt_decompress_range(type, comp, clen, 4096, (uint64_t)1 << 40, dst, 1,
						  NULL),
			     -EINVAL);
		/* Damaged input through the range path. */
		int e0 = log_errors;
		int ret = ubt_decompress_range(type, comp, clen / 3, 4096, 1000, dst, 50000, &got);
		CHECK(ret == -EIO || ret == -EUCLEAN);
		CHECK(log_errors > e0);
	}
	CHECK_EQ_INT(ubt_decompress_range(9, comp, 10, 4096, 10, dst, 10, &got), -EOPNOTSUPP);
	free(src);
	free(comp);
	free(dst);
}

/* ---- CLI mode for the oracle test -------------------------------------- */

static int parse_type(const char *s)
{
	if (!strcmp(s, "zlib") || !strcmp(s, "1"))
		return BTRFS_COMPRESS_ZLIB;
	if (!strcmp(s, "lzo") || !strcmp(s, "2"))
		return BTRFS_COMPRESS_LZO;
	if (!strcmp(s, "zstd") || !strcmp(s, "3"))
		return BTRFS_COMPRESS_ZSTD;
	return -1;
}

static int cli_decompress(int argc, char **argv)
{
	if (argc != 5 && argc != 7) {
		fprintf(stderr, "usage: %s --decompress TYPE SECTORSIZE RAMBYTES [SKIP LEN] <in >out\n",
			argv[0]);
		return 1;
	}
	int type = parse_type(argv[2]);
	size_t ss = strtoul(argv[3], NULL, 0);
	size_t ram = strtoul(argv[4], NULL, 0);
	uint64_t skip = 0;
	size_t len = ram;
	if (argc == 7) {
		skip = strtoull(argv[5], NULL, 0);
		len = strtoul(argv[6], NULL, 0);
	}
	if (type < 0 || ram > UBT_MAX_UNCOMPRESSED) {
		fprintf(stderr, "bad type or size\n");
		return 1;
	}
	size_t cap = 1 << 20, n = 0;
	uint8_t *in = xmalloc(cap), *out = xmalloc(len);
	ssize_t r;
	while ((r = read(0, in + n, cap - n)) > 0)
		n += (size_t)r;
	if (r < 0 || n == cap) {
		fprintf(stderr, "cannot read input (or more than 1 MiB)\n");
		return 1;
	}
	size_t got = 0;
	int ret;
	if (argc == 7)
		ret = ubt_decompress_range(type, in, n, ss, skip, out, len, &got);
	else
		ret = ubt_decompress(type, in, n, out, len, ss, &got);
	if (ret) {
		fprintf(stderr, "decompress (%s, %zu bytes in): %s\n", ubt_compress_name(type), n,
			strerror(-ret));
		return 1;
	}
	fprintf(stderr, "%s: %zu bytes in, %zu of %zu bytes out\n", ubt_compress_name(type), n, got,
		len);
	for (size_t off = 0; off < len;) {
		r = write(1, out + off, len - off);
		if (r <= 0) {
			fprintf(stderr, "write failed\n");
			return 1;
		}
		off += (size_t)r;
	}
	free(in);
	free(out);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "--decompress"))
		return cli_decompress(argc, argv);

	ubt_log_set_handler(count_log, NULL);
	test_api_edges();
	test_round_trips();
	test_lzo_padding();
	test_zlib_rules();
	test_zstd_rules();
	test_range();
	test_hostile();
	ubt_log_set_handler(NULL, NULL);
	return t_finish();
}
