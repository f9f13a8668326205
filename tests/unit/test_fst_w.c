/*
 * unit: trans/fst_w - the pure part of the free-space-tree writer.
 *
 * fst_w.c is included with UBT_FST_W_PURE_ONLY, which leaves out the part
 * that calls the write engine, so this runs without a transaction:
 *  1. the kernel's bitmap thresholds for several group and sector sizes,
 *     and the hysteresis between them;
 *  2. free runs (group minus allocated ranges) against a per-sector model,
 *     including ranges outside the group, touching ranges and unaligned
 *     edges;
 *  3. bitmap bodies against a bit-by-bit reference;
 *  4. the diff, model based: a random "tree" (empty, an earlier state in
 *     either format, plus stray items) is compared with a new allocation
 *     map; applying the listed changes (deletes, in-place updates, inserts,
 *     in that order, each checked for being possible) must give exactly
 *     the wanted item set, whose decoded free sectors must equal the model;
 *     planning again on the result must list no change (convergence).
 *
 * UBTRFS_TEST_SEED=n replays a run (the seed is printed).
 */
#include "t.h"

#define UBT_FST_W_PURE_ONLY
#include "trans/fst_w.c"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* ---- 1. thresholds ------------------------------------------------------ */

static void test_thresholds(void)
{
	static const struct {
		uint64_t len;
		uint32_t ss;
		uint64_t high, low;
	} cases[] = {
		/* ceil(len / (ss * 2048)) * 281 / 25, low = high - 100 or 0 */
		{ 1ull << 30, 4096, 1438, 1338 },
		{ 256ull << 20, 4096, 359, 259 },
		{ 8ull << 20, 4096, 11, 0 },
		{ 4ull << 20, 4096, 11, 0 },
		{ (8ull << 20) + 4096, 4096, 22, 0 },
		{ 10ull << 30, 4096, 14387, 14287 },
		{ 1ull << 30, 16384, 359, 259 },
		{ 1ull << 30, 65536, 89, 0 },
		{ 5ull << 30, 65536, 449, 349 },
	};
	for (size_t i = 0; i < UBT_ARRAY_SIZE(cases); i++) {
		uint64_t high, low;
		fst_thresholds(cases[i].len, cases[i].ss, &high, &low);
		CHECK_EQ_U64(high, cases[i].high);
		CHECK_EQ_U64(low, cases[i].low);
	}
	CHECK_EQ_U64(fst_bitmap_range(4096), 8ull << 20);
	CHECK_EQ_U64(fst_bitmap_bytes(8ull << 20, 4096), 256);
	CHECK_EQ_U64(fst_bitmap_bytes(4096, 4096), 1);
	CHECK_EQ_U64(fst_bitmap_bytes(9 * 4096, 4096), 2);

	/* Hysteresis: extents -> bitmaps above high, back only below low. */
	CHECK(!fst_want_bitmaps(false, 1438, 1438, 1338));
	CHECK(fst_want_bitmaps(false, 1439, 1438, 1338));
	CHECK(fst_want_bitmaps(true, 1338, 1438, 1338));
	CHECK(fst_want_bitmaps(true, 1400, 1438, 1338));
	CHECK(!fst_want_bitmaps(true, 1337, 1438, 1338));
	CHECK(!fst_want_bitmaps(false, 1400, 1438, 1338));
	/* low 0: a bitmap group never goes back. */
	CHECK(fst_want_bitmaps(true, 0, 11, 0));
}

/* ---- 2./3. free runs and bitmaps ------------------------------------------ */

#define MAXALLOC 200

struct grp {
	uint64_t start, len;
	uint32_t ss;
	struct ubt_range alloc[MAXALLOC];
	size_t nalloc;
};

/* Random sorted, disjoint allocated ranges around and inside the group;
 * some touching, some unaligned, some outside. */
static void rand_alloc(struct grp *g, size_t maxn)
{
	uint64_t lo = g->start > 3 * (uint64_t)g->ss ? g->start - 3 * (uint64_t)g->ss : 0;
	uint64_t hi = g->start + g->len + 3 * (uint64_t)g->ss;
	uint64_t pos = lo;
	size_t want = (size_t)rnd_below(maxn + 1);

	g->nalloc = 0;
	while (g->nalloc < want && pos < hi) {
		uint64_t gap, len;
		switch (rnd_below(4)) {
		case 0:
			gap = 0;
			break;
		case 1:
			gap = rnd_below(3 * (uint64_t)g->ss);
			break;
		default:
			gap = rnd_below(g->len / (want + 1) + 1) / g->ss * g->ss;
		}
		len = rnd_below(4) == 0 ? 1 + rnd_below(2 * (uint64_t)g->ss)
					: (1 + rnd_below(g->len / (want + 1) / g->ss + 1)) * g->ss;
		if (pos + gap >= hi)
			break;
		g->alloc[g->nalloc].start = pos + gap;
		g->alloc[g->nalloc].len = len;
		g->nalloc++;
		pos += gap + len;
	}
}

/* Per-sector model: 1 = free. */
static uint8_t *model_free(const struct grp *g, size_t *nsec)
{
	size_t n = (size_t)(g->len / g->ss);
	uint8_t *m = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++) {
		uint64_t s = g->start + (uint64_t)i * g->ss, e = s + g->ss;
		m[i] = 1;
		for (size_t k = 0; k < g->nalloc; k++) {
			uint64_t a = g->alloc[k].start, b = a + g->alloc[k].len;
			if (a < e && b > s)
				m[i] = 0;
		}
	}
	*nsec = n;
	return m;
}

static void check_runs(const struct grp *g, const struct ubt_range *runs, size_t nruns)
{
	size_t nsec;
	uint8_t *m = model_free(g, &nsec);
	uint8_t *got = calloc(nsec ? nsec : 1, 1);
	size_t want_runs = 0;

	for (size_t i = 0; i < nsec; i++)
		if (m[i] && (i == 0 || !m[i - 1]))
			want_runs++;
	CHECK_EQ_U64(nruns, want_runs);
	for (size_t r = 0; r < nruns; r++) {
		CHECK(runs[r].len > 0);
		CHECK(runs[r].start % g->ss == 0 && runs[r].len % g->ss == 0);
		CHECK(runs[r].start >= g->start &&
		      runs[r].start + runs[r].len <= g->start + g->len);
		if (r)	/* sorted and maximal: a gap between runs */
			CHECK(runs[r - 1].start + runs[r - 1].len < runs[r].start);
		for (uint64_t a = runs[r].start; a < runs[r].start + runs[r].len; a += g->ss)
			if (a >= g->start && a < g->start + g->len)
				got[(a - g->start) / g->ss] = 1;
	}
	CHECK(memcmp(got, m, nsec) == 0);
	free(got);
	free(m);
}

static void test_free_runs_fixed(void)
{
	struct grp g = { .start = 1ull << 30, .len = 1ull << 20, .ss = 4096 };
	struct ubt_range runs[MAXALLOC + 1];
	size_t n;

	/* Nothing allocated: one run, the whole group. */
	g.nalloc = 0;
	n = fst_free_runs(g.start, g.len, g.ss, g.alloc, 0, runs);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(runs[0].start, g.start);
	CHECK_EQ_U64(runs[0].len, g.len);

	/* Everything allocated by one range larger than the group. */
	g.alloc[0] = (struct ubt_range){ g.start - 4096, g.len + 8192 };
	n = fst_free_runs(g.start, g.len, g.ss, g.alloc, 1, runs);
	CHECK_EQ_U64(n, 0);

	/* Touching ranges leave no free run between them; a range before
	 * and one after the group are ignored. */
	g.alloc[0] = (struct ubt_range){ 0, 4096 };
	g.alloc[1] = (struct ubt_range){ g.start, 8192 };
	g.alloc[2] = (struct ubt_range){ g.start + 8192, 4096 };
	g.alloc[3] = (struct ubt_range){ g.start + 65536, 4096 };
	g.alloc[4] = (struct ubt_range){ g.start + g.len, 4096 };
	g.nalloc = 5;
	n = fst_free_runs(g.start, g.len, g.ss, g.alloc, g.nalloc, runs);
	CHECK_EQ_U64(n, 2);
	CHECK_EQ_U64(runs[0].start, g.start + 12288);
	CHECK_EQ_U64(runs[0].len, 65536 - 12288);
	CHECK_EQ_U64(runs[1].start, g.start + 65536 + 4096);
	CHECK_EQ_U64(runs[1].len, g.len - 65536 - 4096);
	check_runs(&g, runs, n);

	/* Unaligned allocation: the partly used sectors are not free. */
	g.alloc[0] = (struct ubt_range){ g.start + 4096 + 100, 10 };
	g.alloc[1] = (struct ubt_range){ g.start + 3 * 4096 + 4000, 200 };
	g.nalloc = 2;
	n = fst_free_runs(g.start, g.len, g.ss, g.alloc, g.nalloc, runs);
	CHECK_EQ_U64(n, 3);
	CHECK_EQ_U64(runs[0].start, g.start);
	CHECK_EQ_U64(runs[0].len, 4096);
	CHECK_EQ_U64(runs[1].start, g.start + 2 * 4096);
	CHECK_EQ_U64(runs[1].len, 4096);
	CHECK_EQ_U64(runs[2].start, g.start + 5 * 4096);
	check_runs(&g, runs, n);
}

static void test_free_runs_random(void)
{
	static const uint32_t sss[] = { 512, 4096, 65536 };
	struct ubt_range runs[MAXALLOC + 1];

	for (int iter = 0; iter < 3000; iter++) {
		struct grp g;
		g.ss = sss[rnd_below(3)];
		g.start = (rnd_below(1000) + 1) * (uint64_t)g.ss * 16;
		g.len = (1 + rnd_below(600)) * (uint64_t)g.ss;
		rand_alloc(&g, rnd_below(3) ? 20 : MAXALLOC);
		size_t n = fst_free_runs(g.start, g.len, g.ss, g.alloc, g.nalloc, runs);
		CHECK(n <= g.nalloc + 1);
		check_runs(&g, runs, n);
	}
}

static void test_bitmap_fill(void)
{
	for (int iter = 0; iter < 2000; iter++) {
		const uint32_t ss = 4096;
		uint64_t start = (1 + rnd_below(100)) << 30;
		uint64_t len = (1 + rnd_below(3000)) * (uint64_t)ss;
		struct ubt_range runs[64];
		size_t n = 0;
		uint64_t pos = start;
		while (n < 64 && pos < start + len && rnd_below(8)) {
			uint64_t gap = rnd_below(40) * ss, l = (1 + rnd_below(40)) * ss;
			if (n && gap == 0)
				gap = ss;	/* runs are maximal */
			if (pos + gap >= start + len)
				break;
			if (pos + gap + l > start + len)
				l = start + len - pos - gap;
			runs[n++] = (struct ubt_range){ pos + gap, l };
			pos += gap + l;
		}
		/* A window somewhere in the group, any length up to a full bitmap. */
		uint64_t nsec = len / ss;
		uint64_t b0 = rnd_below(nsec), bl = 1 + rnd_below(nsec - b0);
		if (bl > BTRFS_FREE_SPACE_BITMAP_BITS)
			bl = BTRFS_FREE_SPACE_BITMAP_BITS;
		uint8_t map[FST_MAX_BODY + 8];
		memset(map, 0xa5, sizeof(map));
		fst_bitmap_fill(runs, n, ss, start + b0 * ss, bl * ss, map);
		uint32_t bytes = fst_bitmap_bytes(bl * ss, ss);
		bool ok = true;
		for (uint64_t i = 0; i < (uint64_t)bytes * 8; i++) {
			uint64_t a = start + (b0 + i) * ss;
			int want = 0;
			if (i < bl)
				for (size_t r = 0; r < n; r++)
					if (a >= runs[r].start && a < runs[r].start + runs[r].len)
						want = 1;
			int got = (map[i / 8] >> (i % 8)) & 1;
			if (got != want)
				ok = false;
		}
		CHECK(ok);
		CHECK(map[bytes] == 0xa5);	/* nothing past the body */
	}
}

/* ---- 4. diff, model based ------------------------------------------------- */

struct mitem {
	struct btrfs_key key;
	uint32_t size;
	uint8_t body[FST_MAX_BODY];
};
struct model {
	struct mitem *v;
	size_t n, cap;
};

static size_t model_find(const struct model *m, const struct btrfs_key *key, bool *found)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = btrfs_comp_keys(&m->v[mid].key, key);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static bool model_put(struct model *m, const struct btrfs_key *key, const uint8_t *body,
		      uint32_t size, bool insert_only)
{
	bool found;
	size_t at = model_find(m, key, &found);
	if (found) {
		if (insert_only)
			return false;
		m->v[at].size = size;
		memcpy(m->v[at].body, body, size);
		return true;
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->v = realloc(m->v, m->cap * sizeof(*m->v));
	}
	memmove(m->v + at + 1, m->v + at, (m->n - at) * sizeof(*m->v));
	m->v[at].key = *key;
	m->v[at].size = size;
	memcpy(m->v[at].body, body, size);
	m->n++;
	return true;
}

static bool model_del(struct model *m, const struct btrfs_key *key)
{
	bool found;
	size_t at = model_find(m, key, &found);
	if (!found)
		return false;
	memmove(m->v + at, m->v + at + 1, (m->n - at - 1) * sizeof(*m->v));
	m->n--;
	return true;
}

/* Render a wanted item set into the model (replacing its content). */
static void model_render(struct model *m, const struct fst_want *wt)
{
	uint8_t body[FST_MAX_BODY];
	m->n = 0;
	for (size_t k = 0; k < wt->nitems; k++) {
		struct btrfs_key key;
		fst_want_key(wt, k, &key);
		uint32_t size = fst_want_size(wt, &key);
		fst_want_body(wt, &key, body);
		model_put(m, &key, body, size, true);
	}
}

static void model_to_have(const struct model *m, struct fst_have *h)
{
	fst_have_reset(h);
	for (size_t i = 0; i < m->n; i++)
		CHECK_EQ_INT(fst_have_add(h, &m->v[i].key, m->v[i].body, m->v[i].size), 0);
}

/* Apply the ops in the writer's order; every op must be possible. */
static void model_apply(struct model *m, const struct fst_want *wt, const struct fst_ops *ops)
{
	uint8_t body[FST_MAX_BODY];
	struct btrfs_key prev[3];
	bool have_prev[3] = { false, false, false };

	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < ops->n; i++) {
			const struct fst_op *op = &ops->v[i];
			if ((int)op->kind != pass)
				continue;
			/* Each kind in ascending key order. */
			if (have_prev[pass])
				CHECK(btrfs_comp_keys(&prev[pass], &op->key) < 0);
			prev[pass] = op->key;
			have_prev[pass] = true;
			if (op->kind == FST_OP_DEL) {
				CHECK(model_del(m, &op->key));
				continue;
			}
			struct btrfs_key wkey;
			fst_want_key(wt, op->want, &wkey);
			CHECK(btrfs_comp_keys(&wkey, &op->key) == 0);
			uint32_t size = fst_want_size(wt, &op->key);
			fst_want_body(wt, &op->key, body);
			if (op->kind == FST_OP_SET) {
				bool found;
				size_t at = model_find(m, &op->key, &found);
				CHECK(found);
				if (found) {
					CHECK_EQ_U64(m->v[at].size, size);
					memcpy(m->v[at].body, body, size);
				}
			} else {
				CHECK(model_put(m, &op->key, body, size, true));
			}
		}
	}
}

/* Decode the model's items of the group into free sectors and check them,
 * the INFO item and the format's consistency. */
static void model_check_decoded(const struct model *m, const struct grp *g, bool bitmaps)
{
	size_t nsec;
	uint8_t *want = model_free(g, &nsec);
	uint8_t *got = calloc(nsec ? nsec : 1, 1);
	uint64_t runs = 0;

	CHECK(m->n >= 1);
	CHECK_EQ_U64(m->v[0].key.objectid, g->start);
	CHECK_EQ_U64(m->v[0].key.type, BTRFS_FREE_SPACE_INFO_KEY);
	CHECK_EQ_U64(m->v[0].key.offset, g->len);
	CHECK_EQ_U64(m->v[0].size, 8);
	const struct btrfs_free_space_info *info = (const void *)m->v[0].body;
	CHECK_EQ_U64(btrfs_free_space_info_flags(info),
		     bitmaps ? BTRFS_FREE_SPACE_USING_BITMAPS : 0);
	uint64_t next_bitmap = g->start;
	for (size_t i = 1; i < m->n; i++) {
		const struct mitem *it = &m->v[i];
		CHECK(it->key.type == (bitmaps ? BTRFS_FREE_SPACE_BITMAP_KEY
					       : BTRFS_FREE_SPACE_EXTENT_KEY));
		CHECK(it->key.objectid >= g->start &&
		      it->key.objectid + it->key.offset <= g->start + g->len);
		uint64_t first = (it->key.objectid - g->start) / g->ss;
		uint64_t count = it->key.offset / g->ss;
		if (bitmaps) {
			CHECK_EQ_U64(it->key.objectid, next_bitmap);
			CHECK(it->key.offset <= fst_bitmap_range(g->ss));
			next_bitmap += it->key.offset;
			CHECK_EQ_U64(it->size, (count + 7) / 8);
			for (uint64_t b = 0; b < count && first + b < nsec; b++)
				got[first + b] = (it->body[b / 8] >> (b % 8)) & 1;
		} else {
			CHECK_EQ_U64(it->size, 0);
			for (uint64_t b = 0; b < count && first + b < nsec; b++)
				got[first + b] = 1;
		}
	}
	if (bitmaps)
		CHECK_EQ_U64(next_bitmap, g->start + g->len);
	for (size_t i = 0; i < nsec; i++)
		if (want[i] && (i == 0 || !want[i - 1]))
			runs++;
	CHECK_EQ_U64(btrfs_free_space_info_extent_count(info), runs);
	CHECK(memcmp(got, want, nsec) == 0);
	free(got);
	free(want);
}

static void add_strays(struct model *m, const struct grp *g)
{
	int n = (int)rnd_below(4);
	uint8_t body[FST_MAX_BODY];
	memset(body, 0x3c, sizeof(body));
	for (int i = 0; i < n; i++) {
		struct btrfs_key key;
		uint32_t size = 0;
		key.objectid = g->start + rnd_below(g->len / g->ss) * g->ss;
		switch (rnd_below(4)) {
		case 0:
			key.type = BTRFS_FREE_SPACE_EXTENT_KEY;
			key.offset = g->ss;
			break;
		case 1:
			key.type = BTRFS_FREE_SPACE_BITMAP_KEY;
			key.offset = g->ss * 8;
			size = 1;
			break;
		case 2:	/* an INFO item with a wrong length */
			key.objectid = g->start;
			key.type = BTRFS_FREE_SPACE_INFO_KEY;
			key.offset = g->len + g->ss;
			size = 8;
			break;
		default:	/* a right key with a wrong body size */
			key.objectid = g->start;
			key.type = BTRFS_FREE_SPACE_INFO_KEY;
			key.offset = g->len;
			size = 7;
		}
		model_put(m, &key, body, size, false);
	}
}

static void test_diff_random(void)
{
	static const uint32_t sss[] = { 4096, 4096, 16384 };
	struct model m = { 0 };
	struct fst_have h = { 0 };
	struct fst_ops ops = { 0 };
	size_t n_bitmap_states = 0, n_switches = 0, n_sets = 0;

	for (int iter = 0; iter < 1500; iter++) {
		struct grp g;
		g.ss = sss[rnd_below(3)];
		g.start = (1 + rnd_below(64)) << 30;
		/* Up to ~3.5 bitmaps' worth of sectors. */
		g.len = (1 + rnd_below(7 * BTRFS_FREE_SPACE_BITMAP_BITS / 2)) * (uint64_t)g.ss;

		/* The tree before: empty, or an earlier state of the group. */
		m.n = 0;
		struct ubt_range prev_runs[MAXALLOC + 1];
		bool prev_bitmaps = false;
		if (rnd_below(5)) {
			struct grp prev = g;
			struct fst_want pw;
			rand_alloc(&prev, rnd_below(2) ? 15 : MAXALLOC);
			size_t pn = fst_free_runs(prev.start, prev.len, prev.ss, prev.alloc,
						  prev.nalloc, prev_runs);
			prev_bitmaps = rnd_below(2);
			fst_want_init(&pw, prev.start, prev.len, prev.ss, prev_runs, pn,
				      prev_bitmaps);
			model_render(&m, &pw);
			if (rnd_below(2))
				g = prev;	/* often only a little changes */
		}
		if (rnd_below(4) == 0)
			add_strays(&m, &g);
		bool strays_info_ok = m.n && m.v[0].key.type == BTRFS_FREE_SPACE_INFO_KEY &&
				      m.v[0].key.objectid == g.start &&
				      m.v[0].key.offset == g.len && m.v[0].size == 8;

		/* New allocation map: the old one changed a little, or a new one. */
		if (rnd_below(3) == 0) {
			rand_alloc(&g, rnd_below(2) ? 15 : MAXALLOC);
		} else if (g.nalloc && rnd_below(2)) {
			g.nalloc--;	/* a free */
		} else if (g.nalloc < MAXALLOC) {
			uint64_t a = g.start + rnd_below(g.len / g.ss) * g.ss;
			bool clash = false;
			for (size_t i = 0; i < g.nalloc; i++)
				if (g.alloc[i].start < a + g.ss &&
				    g.alloc[i].start + g.alloc[i].len > a)
					clash = true;
			if (!clash) {	/* an allocation, kept sorted */
				size_t at = 0;
				while (at < g.nalloc && g.alloc[at].start < a)
					at++;
				memmove(g.alloc + at + 1, g.alloc + at,
					(g.nalloc - at) * sizeof(g.alloc[0]));
				g.alloc[at] = (struct ubt_range){ a, g.ss };
				g.nalloc++;
			}
		}

		struct ubt_rangeset rs = { .v = g.alloc, .n = g.nalloc, .cap = MAXALLOC };
		struct ubt_range *runs = NULL;
		struct fst_want wt;
		model_to_have(&m, &h);
		bool cur_bitmaps = fst_have_bitmaps(&h, g.start, g.len);
		CHECK_EQ_INT(fst_plan_group(g.start, g.len, g.ss, &rs, &h, &runs, &wt, &ops), 0);

		/* The format rule, from the recorded format. */
		uint64_t high, low;
		fst_thresholds(g.len, g.ss, &high, &low);
		CHECK(cur_bitmaps == (strays_info_ok && m.n && prev_bitmaps));
		CHECK(wt.bitmaps == fst_want_bitmaps(cur_bitmaps, wt.nruns, high, low));
		n_bitmap_states += wt.bitmaps;
		n_switches += wt.bitmaps != cur_bitmaps;
		n_sets += ops.nset;

		model_apply(&m, &wt, &ops);
		model_check_decoded(&m, &g, wt.bitmaps);

		/* What was written is what is wanted: planning again is a no-op. */
		struct ubt_range *runs2 = NULL;
		struct fst_want wt2;
		struct fst_ops ops2 = { 0 };
		model_to_have(&m, &h);
		CHECK_EQ_INT(fst_plan_group(g.start, g.len, g.ss, &rs, &h, &runs2, &wt2, &ops2), 0);
		CHECK_EQ_U64(ops2.n, 0);
		CHECK(wt2.bitmaps == wt.bitmaps);
		free(runs2);
		fst_ops_free(&ops2);
		free(runs);
	}
	/* The random states reached every path. */
	CHECK(n_bitmap_states > 50);
	CHECK(n_switches > 50);
	CHECK(n_sets > 50);
	free(m.v);
	fst_have_free(&h);
	fst_ops_free(&ops);
}

/* An unchanged group lists nothing; a single allocation in the middle of a
 * free extent is one delete and two inserts plus the INFO update. */
static void test_diff_small(void)
{
	struct grp g = { .start = 1ull << 30, .len = 64ull << 20, .ss = 4096 };
	struct model m = { 0 };
	struct fst_have h = { 0 };
	struct fst_ops ops = { 0 };
	struct ubt_range *runs = NULL;
	struct fst_want wt;

	g.alloc[0] = (struct ubt_range){ g.start, 1 << 20 };
	g.nalloc = 1;
	struct ubt_rangeset rs = { .v = g.alloc, .n = g.nalloc, .cap = MAXALLOC };

	/* New group: INFO and one extent inserted. */
	model_to_have(&m, &h);
	CHECK_EQ_INT(fst_plan_group(g.start, g.len, g.ss, &rs, &h, &runs, &wt, &ops), 0);
	CHECK_EQ_U64(ops.nins, 2);
	CHECK_EQ_U64(ops.ndel + ops.nset, 0);
	CHECK(!wt.bitmaps);
	model_apply(&m, &wt, &ops);
	free(runs);

	/* Unchanged. */
	model_to_have(&m, &h);
	CHECK_EQ_INT(fst_plan_group(g.start, g.len, g.ss, &rs, &h, &runs, &wt, &ops), 0);
	CHECK_EQ_U64(ops.n, 0);
	free(runs);

	/* One block allocated in the middle of the free extent. */
	g.alloc[1] = (struct ubt_range){ g.start + (8 << 20), 16384 };
	rs.n = g.nalloc = 2;
	CHECK_EQ_INT(fst_plan_group(g.start, g.len, g.ss, &rs, &h, &runs, &wt, &ops), 0);
	CHECK_EQ_U64(ops.ndel, 1);
	CHECK_EQ_U64(ops.nins, 2);
	CHECK_EQ_U64(ops.nset, 1);	/* INFO: extent_count 1 -> 2 */
	model_apply(&m, &wt, &ops);
	model_check_decoded(&m, &g, false);
	free(runs);

	/* In bitmap format a change rewrites one bitmap body and the INFO in
	 * place (64 MiB: 8 bitmaps, high 89, low 0: stays bitmaps). */
	struct fst_want bw;
	struct ubt_range br[3];
	size_t bn = fst_free_runs(g.start, g.len, g.ss, g.alloc, g.nalloc, br);
	fst_want_init(&bw, g.start, g.len, g.ss, br, bn, true);
	model_render(&m, &bw);
	CHECK_EQ_U64(m.n, 9);
	model_to_have(&m, &h);
	g.alloc[2] = (struct ubt_range){ g.start + (40 << 20), 4096 };
	rs.n = g.nalloc = 3;
	CHECK_EQ_INT(fst_plan_group(g.start, g.len, g.ss, &rs, &h, &runs, &wt, &ops), 0);
	CHECK(wt.bitmaps);
	CHECK_EQ_U64(ops.nset, 2);
	CHECK_EQ_U64(ops.ndel + ops.nins, 0);
	model_apply(&m, &wt, &ops);
	model_check_decoded(&m, &g, true);
	free(runs);

	free(m.v);
	fst_have_free(&h);
	fst_ops_free(&ops);
}

int main(void)
{
	const char *seed = getenv("UBTRFS_TEST_SEED");
	rng_state = seed ? strtoull(seed, NULL, 0) : 0x9e3779b97f4a7c15ull;
	if (!rng_state)
		rng_state = 1;
	printf("seed 0x%" PRIx64 "\n", rng_state);

	test_thresholds();
	test_free_runs_fixed();
	test_free_runs_random();
	test_bitmap_fill();
	test_diff_small();
	test_diff_random();
	return t_finish();
}
