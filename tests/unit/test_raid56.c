/*
 * unit: volume/raid56 — GF(2^8) arithmetic, P/Q generation against a slow
 * bit-by-bit reference, and reconstruction after every 1- and 2-element
 * loss (RAID5 and RAID6) for many stripe counts, lengths and alignments.
 *
 * The kernel judges the on-disk layout in tests/compat/t-raid56-oracle.sh,
 * which drives this program's CLI mode on stripe elements it cut out of
 * real kernel-written devices:
 *
 *   test_raid56 --check-stripe raid5|raid6 D0 .. Dn-1 P [Q]
 *
 * Each argument is a file holding one element of the same row (all the same
 * size).  It checks that P (and Q) equal what we compute from the data,
 * then that every 1- and 2-loss rebuild gives the elements back.  Exit 0,
 * or 1 with the reason on stderr.
 */
#include "t.h"

#include "base/base.h"
#include "volume/raid56.h"

#include <errno.h>
#include <stdbool.h>

/* ---- independent reference (no tables, no word tricks) ----------------- */

static uint8_t ref_mul(uint8_t a, uint8_t b)
{
	uint8_t r = 0;
	while (b) {
		if (b & 1)
			r ^= a;
		a = (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1d : 0));
		b >>= 1;
	}
	return r;
}

static uint8_t ref_pow2(unsigned e)
{
	uint8_t r = 1;
	while (e--)
		r = ref_mul(r, 2);
	return r;
}

static void ref_pq(size_t ndata, size_t len, uint8_t *const *d, uint8_t *p, uint8_t *q)
{
	for (size_t off = 0; off < len; off++) {
		uint8_t pp = 0, qq = 0;
		for (size_t i = 0; i < ndata; i++) {
			pp ^= d[i][off];
			qq ^= ref_mul(ref_pow2((unsigned)i), d[i][off]);
		}
		p[off] = pp;
		q[off] = qq;
	}
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rnd() >> 56);
}

/* ---- GF(2^8) ----------------------------------------------------------- */

static void test_gf(void)
{
	int bad = 0;

	for (unsigned a = 0; a < 256; a++)
		for (unsigned b = 0; b < 256; b++)
			if (ubt_gf256_mul((uint8_t)a, (uint8_t)b) != ref_mul((uint8_t)a, (uint8_t)b))
				bad++;
	CHECK_EQ_INT(bad, 0);
	for (unsigned a = 1; a < 256; a++)
		if (ubt_gf256_mul((uint8_t)a, ubt_gf256_inv((uint8_t)a)) != 1)
			bad++;
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(ubt_gf256_inv(0), 0);
	/* 0x11d: x^8 = x^4 + x^3 + x^2 + 1. */
	CHECK_EQ_INT(ubt_gf256_pow2(8), 0x1d);
	CHECK_EQ_INT(ubt_gf256_mul(0x80, 2), 0x1d);
	CHECK_EQ_INT(ubt_gf256_pow2(0), 1);
	CHECK_EQ_INT(ubt_gf256_pow2(255), 1);
	/* 2 generates the whole multiplicative group. */
	uint8_t seen[256] = { 0 };
	for (unsigned e = 0; e < 255; e++) {
		uint8_t v = ubt_gf256_pow2(e);
		if (v != ref_pow2(e))
			bad++;
		seen[v]++;
	}
	CHECK_EQ_INT(bad, 0);
	for (unsigned v = 1; v < 256; v++)
		if (seen[v] != 1)
			bad++;
	CHECK_EQ_INT(bad, 0);
}

/* ---- generation -------------------------------------------------------- */

static void test_known_vectors(void)
{
	uint8_t d0[9] = { 1, 0, 0xff, 0x80, 0, 0, 0, 0, 7 };
	uint8_t d1[9] = { 1, 0, 0xff, 0x00, 0, 0, 0, 0, 7 };
	uint8_t d2[9] = { 0, 1, 0x00, 0x80, 0, 0, 0, 0, 7 };
	const uint8_t *const d[3] = { d0, d1, d2 };
	uint8_t p[9], q[9];

	ubt_raid6_gen_pq(3, 9, d, p, q);
	/* byte 0: P = 1^1 = 0, Q = 1 + 2 = 3 */
	CHECK_EQ_INT(p[0], 0);
	CHECK_EQ_INT(q[0], 3);
	/* byte 1: only D2: Q = 4 */
	CHECK_EQ_INT(p[1], 1);
	CHECK_EQ_INT(q[1], 4);
	/* byte 2: 0xff + 2*0xff = 0xff ^ 0xe3 = 0x1c */
	CHECK_EQ_INT(p[2], 0);
	CHECK_EQ_INT(q[2], 0xff ^ ref_mul(2, 0xff));
	/* byte 3: 0x80 + 4*0x80 = 0x80 ^ 0x3a */
	CHECK_EQ_INT(p[3], 0);
	CHECK_EQ_INT(q[3], 0x80 ^ 0x3a);
	/* byte 8 (tail path): 7 + 14 + 28 */
	CHECK_EQ_INT(p[8], 7);
	CHECK_EQ_INT(q[8], 7 ^ 14 ^ 28);
	uint8_t p5[9];
	ubt_raid_gen_p(3, 9, d, p5);
	CHECK(memcmp(p5, p, 9) == 0);
}

/* Buffers with a guard byte on each side, at a chosen misalignment. */
struct elem {
	uint8_t *mem;
	uint8_t *buf;
};

static struct elem elem_new(size_t len, size_t misalign)
{
	struct elem e;
	e.mem = malloc(len + 32);
	if (!e.mem)
		exit(2);
	memset(e.mem, 0x5a, len + 32);
	e.buf = e.mem + 8 + misalign;
	return e;
}

static bool guards_ok(const struct elem *e, size_t len, size_t misalign)
{
	for (size_t i = 0; i < 8 + misalign; i++)
		if (e->mem[i] != 0x5a)
			return false;
	for (size_t i = 8 + misalign + len; i < len + 32; i++)
		if (e->mem[i] != 0x5a)
			return false;
	return true;
}

static void test_generation(void)
{
	static const size_t lens[] = { 0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 4096, 4101, 65536 };

	for (size_t ndata = 1; ndata <= 10; ndata++)
		for (size_t li = 0; li < UBT_ARRAY_SIZE(lens); li++) {
			size_t len = lens[li];
			size_t mis = (ndata + li) % 8;
			struct elem e[12], rp = elem_new(len, 0), rq = elem_new(len, 0);
			uint8_t *dp[12];
			for (size_t i = 0; i < ndata + 2; i++) {
				e[i] = elem_new(len, (mis + i) % 8);
				dp[i] = e[i].buf;
			}
			for (size_t i = 0; i < ndata; i++)
				fill_random(dp[i], len);
			ref_pq(ndata, len, dp, rp.buf, rq.buf);
			ubt_raid6_gen_pq(ndata, len, (const uint8_t *const *)dp, dp[ndata],
					 dp[ndata + 1]);
			CHECK(memcmp(dp[ndata], rp.buf, len) == 0);
			CHECK(memcmp(dp[ndata + 1], rq.buf, len) == 0);
			memset(dp[ndata], 0, len);
			ubt_raid_gen_p(ndata, len, (const uint8_t *const *)dp, dp[ndata]);
			CHECK(memcmp(dp[ndata], rp.buf, len) == 0);
			for (size_t i = 0; i < ndata + 2; i++) {
				CHECK(guards_ok(&e[i], len, (mis + i) % 8));
				free(e[i].mem);
			}
			free(rp.mem);
			free(rq.mem);
		}
}

/* ---- reconstruction ---------------------------------------------------- */

/*
 * Lose elements a and b (b < 0: only a), scribble over them, rebuild and
 * compare every element with the original.
 */
static void lose_and_rebuild(bool raid6, size_t ndata, size_t len, uint8_t **el,
			     uint8_t *const *orig, int a, int b)
{
	size_t nel = ndata + (raid6 ? 2 : 1);
	int ret;

	fill_random(el[a], len);
	if (b >= 0)
		fill_random(el[b], len);
	if (raid6)
		ret = ubt_raid6_recover(ndata, len, el, el[ndata], el[ndata + 1], a, b);
	else
		ret = ubt_raid5_recover(ndata, len, el, el[ndata], a);
	CHECK_EQ_INT(ret, 0);
	for (size_t i = 0; i < nel; i++)
		if (memcmp(el[i], orig[i], len)) {
			fprintf(stderr, "  %s ndata %zu len %zu lost %d,%d: element %zu differs\n",
				raid6 ? "raid6" : "raid5", ndata, len, a, b, i);
			CHECK(!"rebuild mismatch");
			memcpy(el[i], orig[i], len);
		}
}

static void test_recovery(void)
{
	static const size_t lens[] = { 1, 13, 64, 4096 + 3 };

	for (size_t ndata = 1; ndata <= 6; ndata++)
		for (size_t li = 0; li < UBT_ARRAY_SIZE(lens); li++) {
			size_t len = lens[li];
			uint8_t *el[8], *orig[8];
			for (size_t i = 0; i < ndata + 2; i++) {
				/* odd offsets: not 8-byte aligned */
				el[i] = (uint8_t *)malloc(len + 1) + (i % 2);
				orig[i] = malloc(len);
			}
			for (size_t i = 0; i < ndata; i++)
				fill_random(el[i], len);
			ubt_raid6_gen_pq(ndata, len, (const uint8_t *const *)el, el[ndata],
					 el[ndata + 1]);
			for (size_t i = 0; i < ndata + 2; i++)
				memcpy(orig[i], el[i], len);

			/* RAID5 (data + P only). */
			for (int m = 0; m <= (int)ndata; m++)
				lose_and_rebuild(false, ndata, len, el, orig, m, -1);
			/* RAID6: every single loss, every pair (both orders). */
			int nel = (int)ndata + 2;
			for (int a = 0; a < nel; a++) {
				lose_and_rebuild(true, ndata, len, el, orig, a, -1);
				lose_and_rebuild(true, ndata, len, el, orig, a, a);
				for (int b = 0; b < nel; b++)
					if (b != a)
						lose_and_rebuild(true, ndata, len, el, orig, a, b);
			}
			for (size_t i = 0; i < ndata + 2; i++) {
				free(el[i] - (i % 2));
				free(orig[i]);
			}
		}

	/* The widest stripe: 255 data elements, lose the first and the last. */
	{
		enum { N = 255, L = 40 };
		static uint8_t bufs[N + 2][L], saved[N + 2][L];
		uint8_t *el[N + 2], *orig[N + 2];
		for (int i = 0; i < N + 2; i++) {
			el[i] = bufs[i];
			orig[i] = saved[i];
		}
		for (int i = 0; i < N; i++)
			fill_random(el[i], L);
		ubt_raid6_gen_pq(N, L, (const uint8_t *const *)el, el[N], el[N + 1]);
		uint8_t rp[L], rq[L];
		ref_pq(N, L, el, rp, rq);
		CHECK(memcmp(rp, el[N], L) == 0 && memcmp(rq, el[N + 1], L) == 0);
		for (int i = 0; i < N + 2; i++)
			memcpy(orig[i], el[i], L);
		lose_and_rebuild(true, N, L, el, orig, 0, N - 1);
		lose_and_rebuild(true, N, L, el, orig, N - 1, N);
		lose_and_rebuild(true, N, L, el, orig, 17, 200);
		lose_and_rebuild(true, N, L, el, orig, 254, N + 1);
	}
}

static void test_bad_args(void)
{
	uint8_t a[4] = { 0 }, b[4] = { 0 }, p[4], q[4];
	uint8_t *d[2] = { a, b };

	CHECK_EQ_INT(ubt_raid5_recover(2, 4, d, p, 3), -EINVAL);
	CHECK_EQ_INT(ubt_raid5_recover(2, 4, d, p, -1), -EINVAL);
	CHECK_EQ_INT(ubt_raid5_recover(0, 4, d, p, 0), -EINVAL);
	CHECK_EQ_INT(ubt_raid6_recover(2, 4, d, p, q, 4, -1), -EINVAL);
	CHECK_EQ_INT(ubt_raid6_recover(2, 4, d, p, q, 0, 4), -EINVAL);
	CHECK_EQ_INT(ubt_raid6_recover(2, 4, d, p, q, -1, 0), -EINVAL);
	CHECK_EQ_INT(ubt_raid6_recover(0, 4, d, p, q, 0, 1), -EINVAL);
	CHECK_EQ_INT(ubt_raid6_recover(256, 4, d, p, q, 0, 1), -EINVAL);
	CHECK_EQ_INT(ubt_raid6_recover(2, 4, d, NULL, q, 0, 1), -EINVAL);
	/* len 0 is a no-op that succeeds */
	CHECK_EQ_INT(ubt_raid6_recover(2, 0, d, p, q, 0, 1), 0);
}

/* ---- CLI mode for the oracle test -------------------------------------- */

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto out;
	buf = malloc(n ? (size_t)n : 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	*len = (size_t)n;
out:
	fclose(f);
	return buf;
}

static int cli_check_stripe(int argc, char **argv)
{
	if (argc < 4 || (strcmp(argv[2], "raid5") && strcmp(argv[2], "raid6"))) {
		fprintf(stderr, "usage: %s --check-stripe raid5|raid6 D0 .. Dn-1 P [Q]\n", argv[0]);
		return 1;
	}
	bool raid6 = !strcmp(argv[2], "raid6");
	int nel = argc - 3;
	int ndata = nel - (raid6 ? 2 : 1);
	if (ndata < 1) {
		fprintf(stderr, "too few elements\n");
		return 1;
	}
	uint8_t **el = calloc((size_t)nel, sizeof(*el)), **orig = calloc((size_t)nel, sizeof(*orig));
	size_t len = 0;
	for (int i = 0; i < nel; i++) {
		size_t n = 0;
		orig[i] = read_file(argv[3 + i], &n);
		if (!orig[i]) {
			fprintf(stderr, "cannot read %s\n", argv[3 + i]);
			return 1;
		}
		if (i && n != len) {
			fprintf(stderr, "%s: %zu bytes, the others %zu\n", argv[3 + i], n, len);
			return 1;
		}
		len = n;
	}
	for (int i = 0; i < nel; i++) {
		el[i] = malloc(len ? len : 1);
		memcpy(el[i], orig[i], len);
	}

	/* Parity as the kernel wrote it vs as we compute it. */
	uint8_t *p = malloc(len ? len : 1), *q = malloc(len ? len : 1);
	ubt_raid6_gen_pq((size_t)ndata, len, (const uint8_t *const *)orig, p, q);
	int fails = 0;
	const char *names[2] = { "P", "Q" };
	for (int k = 0; k < (raid6 ? 2 : 1); k++) {
		const uint8_t *ours = k ? q : p, *disk = orig[ndata + k];
		for (size_t off = 0; off < len; off++)
			if (ours[off] != disk[off]) {
				fprintf(stderr, "%s differs at byte %zu: on disk %02x, computed %02x\n",
					names[k], off, disk[off], ours[off]);
				fails++;
				break;
			}
	}

	/* Every 1- and 2-loss rebuild gives the on-disk elements back. */
	int rebuilds = 0;
	for (int a = 0; a < nel; a++)
		for (int b = a; b < (raid6 ? nel : a + 1); b++) {
			int lost_b = b == a ? -1 : b;
			memset(el[a], 0xe5, len);
			if (lost_b >= 0)
				memset(el[lost_b], 0x5e, len);
			int ret = raid6 ? ubt_raid6_recover((size_t)ndata, len, el, el[ndata],
							    el[ndata + 1], a, lost_b)
					: ubt_raid5_recover((size_t)ndata, len, el, el[ndata], a);
			rebuilds++;
			for (int i = 0; i < nel; i++)
				if (ret || memcmp(el[i], orig[i], len)) {
					fprintf(stderr, "rebuild after losing %d,%d: element %d wrong (ret %d)\n",
						a, lost_b, i, ret);
					fails++;
					memcpy(el[i], orig[i], len);
				}
		}
	if (fails)
		return 1;
	printf("%s row of %d+%d elements, %zu bytes: parity matches, %d rebuilds ok\n", argv[2],
	       ndata, raid6 ? 2 : 1, len, rebuilds);
	for (int i = 0; i < nel; i++) {
		free(el[i]);
		free(orig[i]);
	}
	free(el);
	free(orig);
	free(p);
	free(q);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "--check-stripe"))
		return cli_check_stripe(argc, argv);

	test_gf();
	test_known_vectors();
	test_generation();
	test_recovery();
	test_bad_args();
	return t_finish();
}
