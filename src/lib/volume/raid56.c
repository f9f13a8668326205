/*
 * volume layer: RAID5/6 parity generation and reconstruction.
 *
 * Owns: GF(2^8) arithmetic (polynomial 0x11d, generator 2, as Linux's
 * lib/raid6) and the row-wise P/Q math of raid56.h.  Knows nothing about
 * chunks, devices or stripe rotation.
 *
 * Math (H. Peter Anvin, "The mathematics of RAID-6"):
 *   P  = sum D_i,  Q = sum g^i D_i  (sum is XOR).
 *   Lost D_a, D_b (a < b):  let Pd = P + sum_{i!=a,b} D_i = D_a + D_b and
 *     Qd = Q + sum_{i!=a,b} g^i D_i = g^a D_a + g^b D_b; then
 *     D_a = (Qd + g^b Pd) / (g^a + g^b),  D_b = Pd + D_a.
 *   Lost D_a and P:  D_a = (Q + sum_{i!=a} g^i D_i) / g^a, then P anew.
 *   Lost D_a and Q:  D_a from P as in RAID5, then Q anew.
 *   Lost P and Q:    both anew.
 * Q is evaluated by Horner's rule from the highest index down (multiply by
 * g = shift left and reduce), which needs no tables; the multiplications
 * by constants in a rebuild use one 256-byte row per constant.
 *
 * Invariants: exp/log tables are built exactly once (pthread_once) and
 * read-only afterwards; rebuilt elements are written only into the lost
 * elements' buffers (and p/q); scratch space is those buffers themselves,
 * so nothing here allocates.
 *
 * Speed: 64-bit SWAR, 8 bytes at a time, multiply-by-2 on every byte lane
 * at once.  SIMD (SSE2/AVX2/NEON, as lib/raid6 has) would go into gen_q_skip()
 * and mul_rows(); not needed yet.
 *
 * Locks: none besides the one-time table initialisation.
 */
#include "volume/raid56.h"

#include "base/base.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>

#define GF_POLY 0x11d

static uint8_t gf_exp[510];	/* gf_exp[i] = g^i, doubled to skip a modulo */
static uint8_t gf_log[256];	/* gf_log[g^i] = i; gf_log[0] unused */
static pthread_once_t gf_once = PTHREAD_ONCE_INIT;

static void gf_build(void)
{
	unsigned x = 1;

	for (unsigned i = 0; i < 255; i++) {
		gf_exp[i] = (uint8_t)x;
		gf_exp[i + 255] = (uint8_t)x;
		gf_log[x] = (uint8_t)i;
		x <<= 1;
		if (x & 0x100)
			x ^= GF_POLY;
	}
}

static void gf_init(void)
{
	pthread_once(&gf_once, gf_build);
}

uint8_t ubt_gf256_mul(uint8_t a, uint8_t b)
{
	gf_init();
	if (!a || !b)
		return 0;
	return gf_exp[gf_log[a] + gf_log[b]];
}

uint8_t ubt_gf256_inv(uint8_t a)
{
	gf_init();
	if (!a)
		return 0;
	return gf_exp[255 - gf_log[a]];
}

uint8_t ubt_gf256_pow2(unsigned e)
{
	gf_init();
	return gf_exp[e % 255];
}

/* Multiplication table row: row[x] = c * x. */
static void mul_row(uint8_t c, uint8_t row[256])
{
	row[0] = 0;
	for (unsigned x = 1; x < 256; x++)
		row[x] = c ? gf_exp[gf_log[c] + gf_log[x]] : 0;
}

/* ---- word helpers ------------------------------------------------------ */

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void store64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* Multiply each of the 8 byte lanes by g = 2 (byte order does not matter). */
static inline uint64_t mul2_64(uint64_t v)
{
	uint64_t hi = v & 0x8080808080808080ull;
	/* (hi >> 7) has 0x01 in each lane that overflowed; 0x1d fits a lane. */
	return ((v << 1) & 0xfefefefefefefefeull) ^ ((hi >> 7) * (GF_POLY & 0xff));
}

static inline uint8_t mul2_8(uint8_t v)
{
	return (uint8_t)((v << 1) ^ ((v & 0x80) ? (GF_POLY & 0xff) : 0));
}

/*
 * out = extra ^ XOR of data[i] for i not in {skip_a, skip_b} (extra may be
 * NULL).  out may be one of the skipped elements' buffers.
 */
static void xor_skip(size_t ndata, size_t len, const uint8_t *const *data, const uint8_t *extra,
		     long skip_a, long skip_b, uint8_t *out)
{
	size_t off = 0;

	for (; off + 8 <= len; off += 8) {
		uint64_t w = extra ? load64(extra + off) : 0;
		for (size_t i = 0; i < ndata; i++)
			if ((long)i != skip_a && (long)i != skip_b)
				w ^= load64(data[i] + off);
		store64(out + off, w);
	}
	for (; off < len; off++) {
		uint8_t b = extra ? extra[off] : 0;
		for (size_t i = 0; i < ndata; i++)
			if ((long)i != skip_a && (long)i != skip_b)
				b ^= data[i][off];
		out[off] = b;
	}
}

/*
 * out = extra ^ sum of g^i data[i] for i not in {skip_a, skip_b}, by
 * Horner's rule from the top index down.  out may be a skipped buffer.
 */
static void gen_q_skip(size_t ndata, size_t len, const uint8_t *const *data, const uint8_t *extra,
		       long skip_a, long skip_b, uint8_t *out)
{
	size_t off = 0;

	for (; off + 8 <= len; off += 8) {
		uint64_t w = 0;
		for (size_t z = ndata; z-- > 0;) {
			w = mul2_64(w);
			if ((long)z != skip_a && (long)z != skip_b)
				w ^= load64(data[z] + off);
		}
		if (extra)
			w ^= load64(extra + off);
		store64(out + off, w);
	}
	for (; off < len; off++) {
		uint8_t b = 0;
		for (size_t z = ndata; z-- > 0;) {
			b = mul2_8(b);
			if ((long)z != skip_a && (long)z != skip_b)
				b ^= data[z][off];
		}
		if (extra)
			b ^= extra[off];
		out[off] = b;
	}
}

/* ---- generation -------------------------------------------------------- */

void ubt_raid_gen_p(size_t ndata, size_t len, const uint8_t *const *data, uint8_t *p)
{
	assert(ndata >= 1);
	xor_skip(ndata, len, data, NULL, -1, -1, p);
}

void ubt_raid6_gen_pq(size_t ndata, size_t len, const uint8_t *const *data, uint8_t *p,
		      uint8_t *q)
{
	assert(ndata >= 1 && ndata <= UBT_RAID6_MAX_DATA);
	xor_skip(ndata, len, data, NULL, -1, -1, p);
	gen_q_skip(ndata, len, data, NULL, -1, -1, q);
}

/* ---- reconstruction ---------------------------------------------------- */

int ubt_raid5_recover(size_t ndata, size_t len, uint8_t **data, uint8_t *p, int missing)
{
	const uint8_t *const *cdata = (const uint8_t *const *)data;

	if (ndata < 1 || !data || !p || missing < 0 || (size_t)missing > ndata)
		return -EINVAL;
	if ((size_t)missing == ndata)
		xor_skip(ndata, len, cdata, NULL, -1, -1, p);
	else
		xor_skip(ndata, len, cdata, p, missing, -1, data[missing]);
	return 0;
}

int ubt_raid6_recover(size_t ndata, size_t len, uint8_t **data, uint8_t *p, uint8_t *q,
		      int fail_a, int fail_b)
{
	const uint8_t *const *cdata = (const uint8_t *const *)data;
	const long P = (long)ndata, Q = (long)ndata + 1;
	long a = fail_a, b = fail_b;
	uint8_t row_p[256], row_q[256];

	if (ndata < 1 || ndata > UBT_RAID6_MAX_DATA || !data || !p || !q)
		return -EINVAL;
	if (b < 0 || b == a)
		b = -1;
	if (a < 0 || a > Q || b > Q)
		return -EINVAL;
	if (b >= 0 && b < a) {
		long t = a;
		a = b;
		b = t;
	}
	gf_init();

	if (b < 0) {
		/* One loss. */
		if (a == P)
			xor_skip(ndata, len, cdata, NULL, -1, -1, p);
		else if (a == Q)
			gen_q_skip(ndata, len, cdata, NULL, -1, -1, q);
		else
			xor_skip(ndata, len, cdata, p, a, -1, data[a]);
		return 0;
	}
	if (a == P) {
		/* P and Q. */
		xor_skip(ndata, len, cdata, NULL, -1, -1, p);
		gen_q_skip(ndata, len, cdata, NULL, -1, -1, q);
		return 0;
	}
	if (b == Q) {
		/* Data and Q: the data from P, then Q. */
		xor_skip(ndata, len, cdata, p, a, -1, data[a]);
		gen_q_skip(ndata, len, cdata, NULL, -1, -1, q);
		return 0;
	}
	if (b == P) {
		/* Data and P: D_a = (Q + Q without a) / g^a, then P. */
		uint8_t *da = data[a];
		gen_q_skip(ndata, len, cdata, q, a, -1, da);
		mul_row(gf_exp[255 - a], row_q);
		for (size_t i = 0; i < len; i++)
			da[i] = row_q[da[i]];
		xor_skip(ndata, len, cdata, NULL, -1, -1, p);
		return 0;
	}

	/* Two data elements a < b; their buffers hold Pd and Qd meanwhile. */
	uint8_t *da = data[a], *db = data[b];
	xor_skip(ndata, len, cdata, p, a, b, da);	/* Pd = D_a + D_b */
	gen_q_skip(ndata, len, cdata, q, a, b, db);	/* Qd = g^a D_a + g^b D_b */
	uint8_t inv = ubt_gf256_inv(gf_exp[a] ^ gf_exp[b]);
	mul_row(inv, row_q);
	mul_row(ubt_gf256_mul(inv, gf_exp[b]), row_p);
	for (size_t i = 0; i < len; i++) {
		uint8_t pd = da[i], qd = db[i];
		uint8_t x = row_q[qd] ^ row_p[pd];
		da[i] = x;
		db[i] = pd ^ x;
	}
	return 0;
}
