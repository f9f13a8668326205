/*
 * unit: tree/blockops - the in-block primitives of the copy-on-write B-tree.
 *
 *  1. leaves, model based: a row of up to MAXB leaves with ascending keys
 *     and, beside each, a model (sorted array of key + bytes).  Tens of
 *     thousands of random operations - insert (single and batches, up to
 *     "fill until -ENOSPC"), delete, extend, truncate front and back, set
 *     key, split, split-for-insert through ubt_leaf_split_plan, push left and
 *     right (sized by the *_max helpers), merge - run on the real buffers
 *     and on the models; after each one every touched leaf must equal its
 *     model, keep its free space zeroed, and pass ubt_block_finish and
 *     ubt_check_tree_block (valid header, checksum, expected first key).
 *     Every refused call (-ENOSPC, -EINVAL) must leave the blocks byte for
 *     byte unchanged.  Nodesizes 4, 16 and 64 KiB.  Item types are ones the
 *     checker does not interpret, so random bodies are valid.
 *  2. nodes, the same way: insert, delete, set key / pointer, split, push,
 *     balance, merge, fill.
 *  3. targeted: full leaf and full node -ENOSPC, exact fits, the split
 *     planner with a huge item at the front, the back and the middle (and
 *     the brute-force optimum in part 1), an empty leaf after deleting
 *     everything, csum-item front truncation, header init and sealing.
 *  4. hostile: damaged and random blocks and random arguments; run under
 *     ASan, every call stays inside the block, a failing call changes
 *     nothing, and a call on a block that is not what it needs fails (the
 *     changes inside one leaf need a sound item table from their slot on,
 *     the rest a sound block).
 *
 * UBTRFS_TEST_SEED=n (decimal or 0x hex) replays a run (the seed is
 * printed); UBTRFS_BLOCKOPS_OPS=n sets the operations per leaf run (nodes
 * get half).
 */
#include "t.h"

#include "base/base.h"
#include "format/btrfs_format.h"
#include "tree/blockops.h"
#include "tree/checker.h"

#include <errno.h>
#include <stdbool.h>

#define HDR	((uint32_t)sizeof(struct btrfs_header))
#define ISZ	((uint32_t)sizeof(struct btrfs_item))
#define KPSZ	((uint32_t)sizeof(struct btrfs_key_ptr))
#define GEN	1000ULL
#define OWNER	BTRFS_CSUM_TREE_OBJECTID	/* a tree whose leaves may be empty */
#define MAXB	8				/* blocks in a row */

/* ---- random numbers ------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t rnd_below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

static bool chance(unsigned pct)
{
	return rnd_below(100) < pct;
}

static void rnd_fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* ---- fixture ---------------------------------------------------------------- */

static const uint8_t FSID[16] = { 0x5e, 0xed, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
				  0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e };
static const uint8_t CHUNK_UUID[16] = { 0xc4, 0x0c, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
					0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee };

static struct ubt_check_ctx ctx;
static uint32_t ns;		/* nodesize of the current run */
static uint32_t cap;		/* btrfs_leaf_data_size(ns) */
static uint32_t maxptrs;	/* btrfs_node_ptrs_per_block(ns) */
static uint64_t next_bytenr;
static uint8_t *snap1, *snap2;	/* copies taken before a call that must fail */

static int log_count;
static char last_log[1024];

static void quiet_log(void *c, int level, const char *msg)
{
	(void)c;
	(void)level;
	log_count++;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

static void setup(uint32_t nodesize)
{
	memset(&ctx, 0, sizeof(ctx));
	ctx.nodesize = nodesize;
	ctx.sectorsize = 4096;
	ctx.csum_type = BTRFS_CSUM_TYPE_CRC32;
	memcpy(ctx.fsid, FSID, sizeof(FSID));
	ctx.incompat_flags = BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF |
			     BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA | BTRFS_FEATURE_INCOMPAT_NO_HOLES;
	ns = nodesize;
	cap = btrfs_leaf_data_size(ns);
	maxptrs = btrfs_node_ptrs_per_block(ns);
	next_bytenr = 1ULL << 30;
	free(snap1);
	free(snap2);
	snap1 = malloc(ns);
	snap2 = malloc(ns);
}

static uint8_t *new_block(uint8_t level)
{
	uint8_t *b = malloc(ns);
	struct ubt_block_hdr h = {
		.bytenr = next_bytenr, .generation = GEN, .owner = OWNER, .level = level,
		.fsid = FSID, .chunk_tree_uuid = CHUNK_UUID,
	};

	next_bytenr += ns;
	if (!b) {
		perror("malloc");
		exit(1);
	}
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), 0);
	return b;
}

static void snap(const uint8_t *a, const uint8_t *b)
{
	memcpy(snap1, a, ns);
	if (b)
		memcpy(snap2, b, ns);
}

static bool unchanged(const uint8_t *a, const uint8_t *b)
{
	return memcmp(snap1, a, ns) == 0 && (!b || memcmp(snap2, b, ns) == 0);
}

static const uint8_t zeros[BTRFS_MAX_METADATA_BLOCKSIZE];

static bool all_zero(const uint8_t *p, size_t n)
{
	return n <= sizeof(zeros) && memcmp(p, zeros, n) == 0;
}

static int kcmp(const struct btrfs_key *a, const struct btrfs_key *b)
{
	return btrfs_comp_keys(a, b);
}

/* Types the checker accepts with any body. */
static const uint8_t free_types[] = {
	BTRFS_VERITY_DESC_ITEM_KEY, BTRFS_VERITY_MERKLE_ITEM_KEY, BTRFS_TEMPORARY_ITEM_KEY,
	BTRFS_PERSISTENT_ITEM_KEY, BTRFS_DEV_REPLACE_KEY, BTRFS_STRING_ITEM_KEY,
};

static void rnd_key(struct btrfs_key *k)
{
	k->objectid = 256 + rnd_below(512);
	k->type = free_types[rnd_below(UBT_ARRAY_SIZE(free_types))];
	k->offset = chance(50) ? rnd_below(64) : rnd() >> 4;
}

/* ======================================================================== */
/* Leaves                                                                   */
/* ======================================================================== */

struct mitem {
	struct btrfs_key key;
	uint32_t size;
	uint8_t *data;
};

struct tleaf {
	uint8_t *blk;
	struct mitem *it;	/* the model, capacity cap / ISZ */
	uint32_t n;
	bool dirty;
};

static struct tleaf lv[MAXB];
static int nleaves;
static bool grow_phase;
static int plan_count[3];	/* executed split-for-insert plans, by dest */

static void leaf_add(int at)
{
	memmove(&lv[at + 1], &lv[at], (size_t)(nleaves - at) * sizeof(lv[0]));
	lv[at].blk = new_block(0);
	lv[at].it = calloc(cap / ISZ + 1, sizeof(struct mitem));
	lv[at].n = 0;
	lv[at].dirty = true;
	nleaves++;
}

static void leaf_drop(int at)
{
	for (uint32_t i = 0; i < lv[at].n; i++)
		free(lv[at].it[i].data);
	free(lv[at].it);
	free(lv[at].blk);
	memmove(&lv[at], &lv[at + 1], (size_t)(nleaves - at - 1) * sizeof(lv[0]));
	nleaves--;
}

static uint32_t m_used(const struct tleaf *t, uint32_t a, uint32_t b)
{
	uint32_t u = 0;

	for (uint32_t i = a; i < b; i++)
		u += ISZ + t->it[i].size;
	return u;
}

static uint32_t m_free(const struct tleaf *t)
{
	return cap - m_used(t, 0, t->n);
}

/* Model: move items [from, from + k) of a to position `to` of b. */
static void m_move(struct tleaf *a, uint32_t from, uint32_t k, struct tleaf *b, uint32_t to)
{
	memmove(&b->it[to + k], &b->it[to], (b->n - to) * sizeof(struct mitem));
	memcpy(&b->it[to], &a->it[from], k * sizeof(struct mitem));
	b->n += k;
	memmove(&a->it[from], &a->it[from + k], (a->n - from - k) * sizeof(struct mitem));
	a->n -= k;
	a->dirty = b->dirty = true;
}

/* Check that a leaf equals its model and passes the checker. */
static bool verify_leaf(struct tleaf *t)
{
	const struct btrfs_header *h = (const struct btrfs_header *)t->blk;
	int f0 = t_failures;
	uint32_t used = 0;

	CHECK_EQ_U64(btrfs_header_nritems(h), t->n);
	CHECK_EQ_U64(btrfs_header_level(h), 0);
	if (t_failures != f0)
		return false;
	for (uint32_t i = 0; i < t->n; i++) {
		const struct mitem *m = &t->it[i];
		struct btrfs_key k;
		uint32_t sz = ~0u;
		const uint8_t *d;

		CHECK_EQ_INT(ubt_leaf_item_key(t->blk, ns, (int)i, &k), 0);
		CHECK(kcmp(&k, &m->key) == 0);
		d = ubt_leaf_item_data(t->blk, ns, (int)i, &sz);
		CHECK(d != NULL);
		CHECK_EQ_U64(sz, m->size);
		if (d && sz == m->size)
			CHECK(m->size == 0 || memcmp(d, m->data, m->size) == 0);
		used += ISZ + m->size;
		if (t_failures != f0) {
			fprintf(stderr, "  leaf mismatch at slot %u of %u\n", i, t->n);
			return false;
		}
	}
	CHECK_EQ_INT(ubt_leaf_free_space(t->blk, ns), (int)(cap - used));
	CHECK_EQ_INT(ubt_leaf_space_used(t->blk, ns, 0, (int)t->n), (int)used);
	/* Free space is [headers end, data start): always zero. */
	CHECK(all_zero(t->blk + HDR + t->n * ISZ, cap - used));

	int lc = log_count;
	CHECK_EQ_INT(ubt_block_finish(&ctx, t->blk), 0);
	struct ubt_block_expect exp = {
		.bytenr = btrfs_header_bytenr(h), .generation = GEN, .level = 0, .owner = OWNER,
		.has_first_key = t->n > 0,
	};
	if (t->n)
		exp.first_key = t->it[0].key;
	CHECK_EQ_INT(ubt_check_tree_block(&ctx, t->blk, &exp), 0);
	if (log_count != lc)
		fprintf(stderr, "  checker: %s\n", last_log);
	t->dirty = false;
	return t_failures == f0;
}

static bool verify_row(bool all)
{
	bool ok = true;

	for (int i = 0; i < nleaves; i++)
		if (all || lv[i].dirty)
			ok = verify_leaf(&lv[i]) && ok;
	/* Keys ascend across the row. */
	struct btrfs_key prev;
	bool have = false;
	for (int i = 0; i < nleaves; i++) {
		for (uint32_t j = 0; j < lv[i].n; j++) {
			if (have && kcmp(&prev, &lv[i].it[j].key) >= 0) {
				fprintf(stderr, "  row keys out of order at leaf %d slot %u\n", i, j);
				CHECK(false);
				return false;
			}
			prev = lv[i].it[j].key;
			have = true;
		}
	}
	return ok;
}

/* Last key of the non-empty leaves before `i`, first key of those after. */
static bool row_prev_key(int i, struct btrfs_key *k)
{
	for (int j = i - 1; j >= 0; j--) {
		if (lv[j].n) {
			*k = lv[j].it[lv[j].n - 1].key;
			return true;
		}
	}
	return false;
}

static bool row_next_key(int i, struct btrfs_key *k)
{
	for (int j = i + 1; j < nleaves; j++) {
		if (lv[j].n) {
			*k = lv[j].it[0].key;
			return true;
		}
	}
	return false;
}

/* Keys strictly between which slot `slot` of leaf i may lie (global row). */
static void leaf_bounds(int i, uint32_t lo_slot, uint32_t hi_slot, bool *has_lo,
			struct btrfs_key *lo, bool *has_hi, struct btrfs_key *hi)
{
	/* lo_slot: the slot below (UINT32_MAX: none in this leaf) */
	if (lo_slot != UINT32_MAX) {
		*lo = lv[i].it[lo_slot].key;
		*has_lo = true;
	} else {
		*has_lo = row_prev_key(i, lo);
	}
	if (hi_slot < lv[i].n) {
		*hi = lv[i].it[hi_slot].key;
		*has_hi = true;
	} else {
		*has_hi = row_next_key(i, hi);
	}
}

static bool key_between(const struct btrfs_key *k, bool has_lo, const struct btrfs_key *lo,
			bool has_hi, const struct btrfs_key *hi)
{
	return (!has_lo || kcmp(lo, k) < 0) && (!has_hi || kcmp(k, hi) < 0);
}

/* Index of the first model item >= k. */
static uint32_t m_lower_bound(const struct tleaf *t, const struct btrfs_key *k)
{
	uint32_t i = 0;

	while (i < t->n && kcmp(&t->it[i].key, k) < 0)
		i++;
	return i;
}

static uint32_t rnd_item_size(void)
{
	uint32_t r = rnd_below(100);

	if (r < 40)
		return rnd_below(33);
	if (r < 70)
		return rnd_below(257);
	if (r < 90)
		return rnd_below(cap / 8);
	if (r < 98)
		return rnd_below(cap / 2);
	return cap / 2 + rnd_below(cap / 2 - ISZ + 1);	/* huge, up to a whole leaf */
}

/* A leaf with at least one item, or -1. */
static int rnd_nonempty_leaf(void)
{
	int cand[MAXB], nc = 0;

	for (int i = 0; i < nleaves; i++)
		if (lv[i].n)
			cand[nc++] = i;
	return nc ? cand[rnd_below((uint32_t)nc)] : -1;
}

/* After a successful insert: new data must be zero; fill it at random. */
static void fill_new_items(struct tleaf *t, uint32_t slot, uint32_t nr)
{
	for (uint32_t i = slot; i < slot + nr; i++) {
		struct mitem *m = &t->it[i];
		uint32_t sz = 0;
		uint8_t *d = ubt_leaf_item_data(t->blk, ns, (int)i, &sz);

		CHECK(d != NULL && sz == m->size);
		if (!d || sz != m->size)
			continue;
		CHECK(all_zero(d, sz));
		rnd_fill(d, sz);
		memcpy(m->data, d, sz);
	}
}

/* Model side of an insert (data allocated, zero). */
static void m_insert(struct tleaf *t, uint32_t slot, const struct btrfs_key *keys,
		     const uint32_t *sizes, uint32_t nr)
{
	memmove(&t->it[slot + nr], &t->it[slot], (t->n - slot) * sizeof(struct mitem));
	for (uint32_t i = 0; i < nr; i++) {
		t->it[slot + i].key = keys[i];
		t->it[slot + i].size = sizes[i];
		t->it[slot + i].data = calloc(1, sizes[i] + 1);
	}
	t->n += nr;
	t->dirty = true;
}

/*
 * Check a split plan against brute force over the model: the new item fits
 * where the plan puts it, neither leaf is empty, the fuller side is as
 * empty as any valid cut allows, and ALONE only when no cut works.
 */
static void check_plan(const struct tleaf *t, uint32_t p, uint32_t size,
		       const struct ubt_leaf_split_plan *plan)
{
	uint64_t need = ISZ + (uint64_t)size, total = m_used(t, 0, t->n), best = UINT64_MAX;
	uint32_t n = t->n;

	for (uint32_t c = 1; c <= n; c++) {
		uint32_t split = c <= p ? c : c - 1;
		uint64_t l = m_used(t, 0, split), r = total - l;

		if (c <= p)
			r += need;
		else
			l += need;
		if (l <= cap && r <= cap && UBT_MAX(l, r) < best)
			best = UBT_MAX(l, r);
	}
	if (plan->dest == UBT_SPLIT_DEST_ALONE) {
		CHECK(best == UINT64_MAX);
		CHECK_EQ_INT(plan->split, p);
		CHECK(p > 0 && p < n);
		CHECK(m_used(t, 0, p) + need > cap);
		CHECK(m_used(t, p, n) + need > cap);
		return;
	}
	CHECK(plan->split >= 0 && (uint32_t)plan->split <= n);
	uint32_t s = (uint32_t)plan->split;
	uint64_t l = m_used(t, 0, s), r = total - l;
	uint32_t ln = s, rn = n - s;

	if (plan->dest == UBT_SPLIT_DEST_LEFT) {
		CHECK(p <= s);
		l += need;
		ln++;
	} else {
		CHECK(plan->dest == UBT_SPLIT_DEST_RIGHT);
		CHECK(p >= s);
		r += need;
		rn++;
	}
	CHECK(l <= cap && r <= cap);
	CHECK(ln > 0 && rn > 0);
	CHECK_EQ_U64(UBT_MAX(l, r), best);
}

/* Empty leaf `at` through the API (one delete of everything) and drop it. */
static void leaf_clear_drop(int at)
{
	struct tleaf *t = &lv[at];

	CHECK_EQ_INT(ubt_leaf_delete_items(t->blk, ns, 0, (int)t->n), 0);
	for (uint32_t i = 0; i < t->n; i++)
		free(t->it[i].data);
	t->n = 0;
	CHECK(all_zero(t->blk + HDR, cap));
	verify_leaf(t);
	leaf_drop(at);
}

/* Insert that did not fit: plan, split, insert where the plan says. */
static bool split_insert(int li, uint32_t slot, const struct btrfs_key *key, uint32_t size)
{
	struct tleaf *t = &lv[li];
	struct ubt_leaf_split_plan plan;
	int ret = ubt_leaf_split_plan(t->blk, ns, (int)slot, size, &plan);

	if (ISZ + (uint64_t)size > cap) {
		CHECK_EQ_INT(ret, -E2BIG);
		return false;
	}
	CHECK_EQ_INT(ret, 0);
	if (ret)
		return false;
	check_plan(t, slot, size, &plan);
	/* Make room in the row: drop leaves other than this one. */
	int extra = plan.dest == UBT_SPLIT_DEST_ALONE ? 2 : 1;
	while (nleaves + extra > MAXB) {
		int victim = (int)rnd_below((uint32_t)nleaves - 1);

		if (victim >= li)
			victim++;
		leaf_clear_drop(victim);
		if (victim < li)
			li--;
	}
	t = &lv[li];

	/* The right leaf first (after li), then a lone leaf between. */
	leaf_add(li + 1);
	t = &lv[li];
	struct tleaf *r = &lv[li + 1];
	uint32_t s = (uint32_t)plan.split;
	CHECK_EQ_INT(ubt_leaf_split(t->blk, r->blk, ns, plan.split), 0);
	m_move(t, s, t->n - s, r, 0);

	struct tleaf *dst;
	uint32_t dslot;
	switch (plan.dest) {
	case UBT_SPLIT_DEST_LEFT:
		dst = t;
		dslot = slot;
		break;
	case UBT_SPLIT_DEST_RIGHT:
		dst = r;
		dslot = slot - s;
		break;
	default:
		leaf_add(li + 1);
		dst = &lv[li + 1];
		dslot = 0;
		break;
	}
	CHECK_EQ_INT(ubt_leaf_insert_item(dst->blk, ns, (int)dslot, key, size), 0);
	plan_count[plan.dest]++;
	m_insert(dst, dslot, key, &size, 1);
	fill_new_items(dst, dslot, 1);
	return true;
}

static const char *leaf_op_insert(void)
{
	struct btrfs_key keys[4], lo, hi;
	uint32_t sizes[4], nr, slot, need = 0;
	bool has_lo, has_hi;
	int cand[MAXB], nc = 0, li;

	if (chance(50) && (li = rnd_nonempty_leaf()) >= 0) {
		/* next to an existing key: runs of adjacent keys */
		keys[0] = lv[li].it[rnd_below(lv[li].n)].key;
		keys[0].offset += 1 + rnd_below(3);
	} else {
		rnd_key(&keys[0]);
	}
	for (int i = 0; i < nleaves; i++) {
		struct btrfs_key a, b;

		if (row_prev_key(i, &a) && kcmp(&a, &keys[0]) >= 0)
			continue;
		if (row_next_key(i, &b) && kcmp(&keys[0], &b) >= 0)
			continue;
		cand[nc++] = i;
	}
	if (nc == 0)
		return "insert (key exists)";
	li = cand[rnd_below((uint32_t)nc)];
	struct tleaf *t = &lv[li];
	slot = m_lower_bound(t, &keys[0]);
	if (slot < t->n && kcmp(&t->it[slot].key, &keys[0]) == 0)
		return "insert (key exists)";
	leaf_bounds(li, slot ? slot - 1 : UINT32_MAX, slot, &has_lo, &lo, &has_hi, &hi);

	nr = chance(25) ? 1 + rnd_below(4) : 1;
	for (uint32_t i = 1; i < nr; i++) {
		keys[i] = keys[i - 1];
		keys[i].offset++;
		if (keys[i].offset == 0 || (has_hi && kcmp(&keys[i], &hi) >= 0)) {
			nr = i;
			break;
		}
	}
	for (uint32_t i = 0; i < nr; i++) {
		sizes[i] = nr > 1 ? rnd_below(cap / 16) : rnd_item_size();
		need += ISZ + sizes[i];
	}

	snap(t->blk, NULL);
	int ret = ubt_leaf_insert_items(t->blk, ns, (int)slot, keys, sizes, (int)nr);
	if (need <= m_free(t)) {
		CHECK_EQ_INT(ret, 0);
		m_insert(t, slot, keys, sizes, nr);
		fill_new_items(t, slot, nr);
		return "insert";
	}
	CHECK_EQ_INT(ret, -ENOSPC);
	CHECK(unchanged(t->blk, NULL));
	if (nr == 1 && chance(80))
		return split_insert(li, slot, &keys[0], sizes[0]) ? "insert (split)"
								  : "insert (ENOSPC, no split)";
	return "insert (ENOSPC)";
}

/* Insert small items with consecutive keys at one place until -ENOSPC. */
static const char *leaf_op_fill(void)
{
	int li = (int)rnd_below((uint32_t)nleaves);
	struct tleaf *t = &lv[li];
	uint32_t slot = rnd_below(t->n + 1);
	struct btrfs_key lo, hi, k;
	bool has_lo, has_hi;

	leaf_bounds(li, slot ? slot - 1 : UINT32_MAX, slot, &has_lo, &lo, &has_hi, &hi);
	if (has_lo) {
		k = lo;
	} else {
		k.objectid = 1;
		k.type = BTRFS_STRING_ITEM_KEY;
		k.offset = 0;
	}
	for (;;) {
		uint32_t size = rnd_below(48);
		int ret;

		k.offset++;
		if (k.offset == 0 || !key_between(&k, has_lo, &lo, has_hi, &hi))
			break;
		if (ISZ + size > m_free(t))
			snap(t->blk, NULL);
		ret = ubt_leaf_insert_item(t->blk, ns, (int)slot, &k, size);
		if (ISZ + size > m_free(t)) {
			CHECK_EQ_INT(ret, -ENOSPC);
			CHECK(unchanged(t->blk, NULL));
			break;
		}
		CHECK_EQ_INT(ret, 0);
		if (ret)
			break;
		m_insert(t, slot, &k, &size, 1);
		fill_new_items(t, slot, 1);
		slot++;
	}
	return "fill";
}

static const char *leaf_op_delete(void)
{
	int li = rnd_nonempty_leaf();

	if (li < 0)
		return "delete (empty)";
	struct tleaf *t = &lv[li];
	uint32_t slot = rnd_below(t->n);
	uint32_t nr = chance(70) ? 1 : 1 + rnd_below(t->n - slot);

	if (chance(3)) {
		slot = 0;
		nr = t->n;
	}
	CHECK_EQ_INT(ubt_leaf_delete_items(t->blk, ns, (int)slot, (int)nr), 0);
	for (uint32_t i = slot; i < slot + nr; i++)
		free(t->it[i].data);
	memmove(&t->it[slot], &t->it[slot + nr], (t->n - slot - nr) * sizeof(struct mitem));
	t->n -= nr;
	t->dirty = true;
	if (t->n == 0) {
		/* An empty leaf: all free, nothing but the header left. */
		CHECK_EQ_INT(ubt_leaf_free_space(t->blk, ns), (int)cap);
		CHECK(all_zero(t->blk + HDR, cap));
		if (nleaves > 1 && chance(70)) {
			verify_leaf(t);
			leaf_drop(li);
			return "delete (drop empty leaf)";
		}
	}
	return "delete";
}

static const char *leaf_op_extend(void)
{
	int li = rnd_nonempty_leaf();

	if (li < 0)
		return "extend (empty)";
	struct tleaf *t = &lv[li];
	uint32_t slot = rnd_below(t->n), fr = m_free(t), extra;
	uint32_t r = rnd_below(100);

	if (r < 60)
		extra = 1 + rnd_below(64);
	else if (r < 85)
		extra = 1 + rnd_below(cap / 4);
	else if (r < 95)
		extra = fr;
	else
		extra = fr + 1;
	snap(t->blk, NULL);
	int ret = ubt_leaf_extend_item(t->blk, ns, (int)slot, extra);
	if (extra > fr) {
		CHECK_EQ_INT(ret, -ENOSPC);
		CHECK(unchanged(t->blk, NULL));
		return "extend (ENOSPC)";
	}
	CHECK_EQ_INT(ret, 0);
	struct mitem *m = &t->it[slot];
	uint32_t sz = 0;
	uint8_t *d = ubt_leaf_item_data(t->blk, ns, (int)slot, &sz);
	CHECK(d && sz == m->size + extra);
	if (!d || sz != m->size + extra)
		return "extend";
	CHECK(memcmp(d, m->data, m->size) == 0);
	CHECK(all_zero(d + m->size, extra));
	rnd_fill(d + m->size, extra);
	free(m->data);
	m->data = malloc(sz + 1);
	memcpy(m->data, d, sz);
	m->size = sz;
	t->dirty = true;
	return "extend";
}

static const char *leaf_op_truncate(void)
{
	int li = rnd_nonempty_leaf();

	if (li < 0)
		return "truncate (empty)";
	struct tleaf *t = &lv[li];
	uint32_t slot = rnd_below(t->n);
	struct mitem *m = &t->it[slot];
	bool front = chance(50);
	uint32_t r = rnd_below(100), new_size;

	if (r < 80)
		new_size = rnd_below(m->size + 1);
	else if (r < 90)
		new_size = m->size;
	else
		new_size = m->size + 1 + rnd_below(10);
	snap(t->blk, NULL);
	int ret = ubt_leaf_truncate_item(t->blk, ns, (int)slot, new_size, front);
	if (new_size > m->size) {
		CHECK_EQ_INT(ret, -EINVAL);
		CHECK(unchanged(t->blk, NULL));
		return "truncate (EINVAL)";
	}
	CHECK_EQ_INT(ret, 0);
	if (front)
		memmove(m->data, m->data + (m->size - new_size), new_size);
	m->size = new_size;
	t->dirty = true;
	return front ? "truncate front" : "truncate back";
}

static const char *leaf_op_set_key(void)
{
	int li = rnd_nonempty_leaf();

	if (li < 0)
		return "set key (empty)";
	struct tleaf *t = &lv[li];
	uint32_t slot = rnd_below(t->n);
	struct btrfs_key lo, hi, k;
	bool has_lo, has_hi;

	leaf_bounds(li, slot ? slot - 1 : UINT32_MAX, slot + 1, &has_lo, &lo, &has_hi, &hi);
	if (chance(25) && (slot > 0 || slot + 1 < t->n)) {
		/* Equal to or beyond an in-leaf neighbour: refused. */
		if (slot > 0 && (slot + 1 == t->n || chance(50)))
			k = t->it[slot - 1].key;
		else
			k = t->it[slot + 1].key;
		if (chance(50) && slot > 0 && kcmp(&k, &t->it[slot - 1].key) == 0 && k.offset)
			k.offset--;
		else if (chance(50) && kcmp(&k, &t->it[slot].key) > 0 && k.offset != UINT64_MAX)
			k.offset++;
		snap(t->blk, NULL);
		CHECK_EQ_INT(ubt_leaf_set_key(t->blk, ns, (int)slot, &k), -EINVAL);
		CHECK(unchanged(t->blk, NULL));
		return "set key (EINVAL)";
	}
	k = t->it[slot].key;
	for (int tries = 0; tries < 8; tries++) {
		struct btrfs_key c;

		rnd_key(&c);
		if (tries > 4) {
			c = t->it[slot].key;
			c.offset += tries & 1 ? 1 : (uint64_t)-1;
		}
		if (key_between(&c, has_lo, &lo, has_hi, &hi)) {
			k = c;
			break;
		}
	}
	CHECK_EQ_INT(ubt_leaf_set_key(t->blk, ns, (int)slot, &k), 0);
	t->it[slot].key = k;
	t->dirty = true;
	return "set key";
}

static const char *leaf_op_split(void)
{
	if (nleaves >= MAXB)
		return "split (row full)";
	int li = (int)rnd_below((uint32_t)nleaves);
	uint32_t slot = rnd_below(lv[li].n + 1);

	leaf_add(li + 1);
	CHECK_EQ_INT(ubt_leaf_split(lv[li].blk, lv[li + 1].blk, ns, (int)slot), 0);
	m_move(&lv[li], slot, lv[li].n - slot, &lv[li + 1], 0);
	return "split";
}

/* Model answer of the push_*_max helpers. */
static uint32_t m_fit(const struct tleaf *t, bool from_front, uint32_t space, uint32_t max_k)
{
	uint32_t k = 0, used = 0;

	while (k < t->n && k < max_k) {
		uint32_t i = from_front ? k : t->n - 1 - k;

		if (used + ISZ + t->it[i].size > space)
			break;
		used += ISZ + t->it[i].size;
		k++;
	}
	return k;
}

static const char *leaf_op_push(void)
{
	if (nleaves < 2)
		return "push (one leaf)";
	int i = (int)rnd_below((uint32_t)nleaves - 1);
	struct tleaf *l = &lv[i], *r = &lv[i + 1];
	bool left = chance(50);
	struct tleaf *from = left ? r : l, *to = left ? l : r;
	uint32_t fr = m_free(to);
	uint32_t space = chance(70) ? fr : rnd_below(fr + 1);
	uint32_t max_k = chance(70) ? from->n : rnd_below(from->n + 2);
	int k = left ? ubt_leaf_push_left_max(from->blk, ns, space, (int)max_k)
		     : ubt_leaf_push_right_max(from->blk, ns, space, (int)max_k);

	CHECK_EQ_INT(k, m_fit(from, left, space, max_k));
	if (k < 0)
		return "push";
	uint32_t kmax = m_fit(from, left, fr, from->n);
	uint32_t kk = chance(60) ? (uint32_t)k : rnd_below((uint32_t)k + 1);
	bool too_many = false;

	if (chance(15) && kmax < from->n) {
		kk = kmax + 1;
		too_many = true;
	}
	snap(l->blk, r->blk);
	int ret = left ? ubt_leaf_push_left(l->blk, r->blk, ns, (int)kk)
		       : ubt_leaf_push_right(l->blk, r->blk, ns, (int)kk);
	if (too_many) {
		CHECK_EQ_INT(ret, -ENOSPC);
		CHECK(unchanged(l->blk, r->blk));
		return "push (ENOSPC)";
	}
	CHECK_EQ_INT(ret, 0);
	if (left)
		m_move(r, 0, kk, l, l->n);
	else
		m_move(l, l->n - kk, kk, r, 0);
	return left ? "push left" : "push right";
}

static const char *leaf_op_merge(void)
{
	if (nleaves < 2)
		return "merge (one leaf)";
	int i = (int)rnd_below((uint32_t)nleaves - 1);
	struct tleaf *l = &lv[i], *r = &lv[i + 1];

	if (m_used(r, 0, r->n) <= m_free(l)) {
		CHECK_EQ_INT(ubt_leaf_push_left(l->blk, r->blk, ns, (int)r->n), 0);
		m_move(r, 0, r->n, l, l->n);
		CHECK(all_zero(r->blk + HDR, cap));
		verify_leaf(r);
		leaf_drop(i + 1);
		return "merge left";
	}
	if (m_used(l, 0, l->n) <= m_free(r)) {
		CHECK_EQ_INT(ubt_leaf_push_right(l->blk, r->blk, ns, (int)l->n), 0);
		m_move(l, 0, l->n, r, 0);
		CHECK(all_zero(l->blk + HDR, cap));
		verify_leaf(l);
		leaf_drop(i);
		return "merge right";
	}
	return "merge (does not fit)";
}

/* Calls that must be refused, leaving the block(s) untouched. */
static const char *leaf_op_bad(void)
{
	int li = (int)rnd_below((uint32_t)nleaves);
	struct tleaf *t = &lv[li];
	int n = (int)t->n, ret = 0;
	struct btrfs_key k = { 1, BTRFS_STRING_ITEM_KEY, 1 };
	uint32_t size = 1;
	uint8_t *other = NULL;

	snap(t->blk, NULL);
	switch (rnd_below(12)) {
	case 0:
		ret = ubt_leaf_delete_items(t->blk, ns, n, 1);
		break;
	case 1:
		ret = ubt_leaf_delete_items(t->blk, ns, -1, 1);
		break;
	case 2:
		ret = ubt_leaf_extend_item(t->blk, ns, n, 1);
		break;
	case 3:
		ret = ubt_leaf_truncate_item(t->blk, ns, n + (int)rnd_below(3), 0, chance(50));
		break;
	case 4:
		ret = ubt_leaf_insert_items(t->blk, ns, n + 1, &k, &size, 1);
		break;
	case 5:
		ret = ubt_leaf_insert_items(t->blk, ns, 0, &k, &size, -1);
		break;
	case 6:
		/* Two keys out of order in one batch. */
		if (n == 0) {
			struct btrfs_key kk[2] = { { 300, BTRFS_STRING_ITEM_KEY, 5 },
						   { 300, BTRFS_STRING_ITEM_KEY, 4 } };
			uint32_t ss[2] = { 1, 1 };
			ret = ubt_leaf_insert_items(t->blk, ns, 0, kk, ss, 2);
		} else {
			/* An existing key at its own slot. */
			uint32_t s = rnd_below((uint32_t)n);
			ret = ubt_leaf_insert_item(t->blk, ns, (int)s, &t->it[s].key, 0);
		}
		break;
	case 7:
		ret = ubt_leaf_split(t->blk, t->blk, ns, 0);
		break;
	case 8:
		ret = ubt_leaf_push_left(t->blk, t->blk, ns, 0);
		break;
	case 9:
		/* A leaf operation on a node. */
		other = new_block(1);
		ret = ubt_leaf_split(t->blk, other, ns, 0);
		CHECK(ret == -EINVAL);
		ret = ubt_leaf_free_space(other, ns);
		break;
	case 10:
		/* Wrong nodesize: only a leaf with items can tell. */
		if (n == 0) {
			ret = ubt_leaf_free_space(t->blk, 1000);
			break;
		}
		ret = ubt_leaf_insert_item(t->blk, ns / 2, 0, &k, 0);
		CHECK(ret == -EINVAL);
		ret = ubt_leaf_delete_items(t->blk, ns * 2, 0, 1);
		break;
	default:
		/* Push into a non-empty right leaf whose keys are below. */
		if (li + 1 < nleaves && n && lv[li + 1].n) {
			snap(t->blk, lv[li + 1].blk);
			ret = ubt_leaf_push_left(lv[li + 1].blk, t->blk, ns, 1);
			CHECK(unchanged(t->blk, lv[li + 1].blk));
		} else {
			ret = ubt_leaf_split_plan(t->blk, ns, n + 1, 0,
						  &(struct ubt_leaf_split_plan){ 0 });
		}
		break;
	}
	CHECK(ret < 0);
	CHECK(unchanged(t->blk, NULL));
	free(other);
	return "bad call";
}

static void free_row(void)
{
	while (nleaves)
		leaf_drop(nleaves - 1);
}

static void test_leaf_random(uint32_t nodesize, uint64_t seed, int nops)
{
	int f0 = t_failures, splits = 0, enospc = 0, maxn = 0;

	setup(nodesize);
	rng_state = seed ^ nodesize;
	memset(plan_count, 0, sizeof(plan_count));
	leaf_add(0);
	grow_phase = true;
	for (int op = 0; op < nops; op++) {
		const char *name;
		uint32_t r = rnd_below(100);

		if (op % 700 == 0)
			grow_phase = chance(60);
		if (r < (grow_phase ? 40u : 15u))
			name = leaf_op_insert();
		else if (r < 45)
			name = leaf_op_fill();
		else if (r < (grow_phase ? 55u : 70u))
			name = leaf_op_delete();
		else if (r < 73)
			name = leaf_op_extend();
		else if (r < 81)
			name = leaf_op_truncate();
		else if (r < 86)
			name = leaf_op_set_key();
		else if (r < 88)
			name = leaf_op_split();
		else if (r < 95)
			name = leaf_op_push();
		else if (r < 97)
			name = leaf_op_merge();
		else
			name = leaf_op_bad();
		if (!strcmp(name, "insert (split)"))
			splits++;
		if (strstr(name, "ENOSPC"))
			enospc++;
		for (int i = 0; i < nleaves; i++)
			maxn = UBT_MAX(maxn, (int)lv[i].n);
		verify_row(op % 1000 == 999);
		if (t_failures != f0) {
			fprintf(stderr, "leaf run: nodesize %u, op %d (%s) failed; seed 0x%llx\n",
				nodesize, op, name, (unsigned long long)seed);
			break;
		}
	}
	printf("leaves %5u: %d ops, %d ENOSPC, %d split inserts (%d left, %d right, %d alone), "
	       "most items in a leaf %d\n", nodesize, nops, enospc, splits,
	       plan_count[UBT_SPLIT_DEST_LEFT], plan_count[UBT_SPLIT_DEST_RIGHT],
	       plan_count[UBT_SPLIT_DEST_ALONE], maxn);
	/* Every kind of plan must have been exercised. */
	CHECK(plan_count[UBT_SPLIT_DEST_LEFT] > 0 && plan_count[UBT_SPLIT_DEST_RIGHT] > 0);
	CHECK(nops < 5000 || plan_count[UBT_SPLIT_DEST_ALONE] > 0);
	free_row();
}

/* ======================================================================== */
/* Nodes                                                                    */
/* ======================================================================== */

struct mptr {
	struct btrfs_key key;
	uint64_t ptr, gen;
};

struct tnode {
	uint8_t *blk;
	struct mptr *p;
	uint32_t n;
	bool dirty;
};

static struct tnode nv[MAXB];
static int nnodes;
static uint8_t node_level;

static void node_add(int at)
{
	memmove(&nv[at + 1], &nv[at], (size_t)(nnodes - at) * sizeof(nv[0]));
	nv[at].blk = new_block(node_level);
	nv[at].p = calloc(maxptrs + 1, sizeof(struct mptr));
	nv[at].n = 0;
	nv[at].dirty = true;
	nnodes++;
}

static void node_drop(int at)
{
	free(nv[at].p);
	free(nv[at].blk);
	memmove(&nv[at], &nv[at + 1], (size_t)(nnodes - at - 1) * sizeof(nv[0]));
	nnodes--;
}

static void n_move(struct tnode *a, uint32_t from, uint32_t k, struct tnode *b, uint32_t to)
{
	memmove(&b->p[to + k], &b->p[to], (b->n - to) * sizeof(struct mptr));
	memcpy(&b->p[to], &a->p[from], k * sizeof(struct mptr));
	b->n += k;
	memmove(&a->p[from], &a->p[from + k], (a->n - from - k) * sizeof(struct mptr));
	a->n -= k;
	a->dirty = b->dirty = true;
}

static bool verify_node(struct tnode *t)
{
	const struct btrfs_header *h = (const struct btrfs_header *)t->blk;
	int f0 = t_failures;

	CHECK_EQ_U64(btrfs_header_nritems(h), t->n);
	CHECK_EQ_U64(btrfs_header_level(h), node_level);
	if (t_failures != f0)
		return false;
	for (uint32_t i = 0; i < t->n; i++) {
		struct btrfs_key k;
		uint64_t ptr = 0, gen = 0;

		CHECK_EQ_INT(ubt_node_get_ptr(t->blk, ns, (int)i, &k, &ptr, &gen), 0);
		CHECK(kcmp(&k, &t->p[i].key) == 0);
		CHECK_EQ_U64(ptr, t->p[i].ptr);
		CHECK_EQ_U64(gen, t->p[i].gen);
		if (t_failures != f0) {
			fprintf(stderr, "  node mismatch at slot %u of %u\n", i, t->n);
			return false;
		}
	}
	CHECK_EQ_INT(ubt_node_free_slots(t->blk, ns), (int)(maxptrs - t->n));
	CHECK(all_zero(t->blk + HDR + t->n * KPSZ, ns - HDR - t->n * KPSZ));

	int lc = log_count;
	int ret = ubt_block_finish(&ctx, t->blk);
	if (t->n == 0) {
		/* The checker refuses empty nodes: nothing to write. */
		CHECK_EQ_INT(ret, -EUCLEAN);
	} else {
		CHECK_EQ_INT(ret, 0);
		struct ubt_block_expect exp = {
			.bytenr = btrfs_header_bytenr(h), .generation = GEN, .level = node_level,
			.owner = OWNER, .has_first_key = true, .first_key = t->p[0].key,
		};
		CHECK_EQ_INT(ubt_check_tree_block(&ctx, t->blk, &exp), 0);
		if (log_count != lc)
			fprintf(stderr, "  checker: %s\n", last_log);
	}
	t->dirty = false;
	return t_failures == f0;
}

static bool nrow_prev_key(int i, struct btrfs_key *k)
{
	for (int j = i - 1; j >= 0; j--) {
		if (nv[j].n) {
			*k = nv[j].p[nv[j].n - 1].key;
			return true;
		}
	}
	return false;
}

static bool nrow_next_key(int i, struct btrfs_key *k)
{
	for (int j = i + 1; j < nnodes; j++) {
		if (nv[j].n) {
			*k = nv[j].p[0].key;
			return true;
		}
	}
	return false;
}

static void node_bounds(int i, uint32_t lo_slot, uint32_t hi_slot, bool *has_lo,
			struct btrfs_key *lo, bool *has_hi, struct btrfs_key *hi)
{
	if (lo_slot != UINT32_MAX) {
		*lo = nv[i].p[lo_slot].key;
		*has_lo = true;
	} else {
		*has_lo = nrow_prev_key(i, lo);
	}
	if (hi_slot < nv[i].n) {
		*hi = nv[i].p[hi_slot].key;
		*has_hi = true;
	} else {
		*has_hi = nrow_next_key(i, hi);
	}
}

static void rnd_ptr(struct mptr *m)
{
	m->ptr = (1 + (uint64_t)rnd_below(1u << 30)) * 4096;
	m->gen = 1 + rnd_below((uint32_t)GEN);
}

static int rnd_nonempty_node(void)
{
	int cand[MAXB], nc = 0;

	for (int i = 0; i < nnodes; i++)
		if (nv[i].n)
			cand[nc++] = i;
	return nc ? cand[rnd_below((uint32_t)nc)] : -1;
}

static void n_insert(struct tnode *t, uint32_t slot, const struct mptr *m)
{
	memmove(&t->p[slot + 1], &t->p[slot], (t->n - slot) * sizeof(struct mptr));
	t->p[slot] = *m;
	t->n++;
	t->dirty = true;
}

/* Find a key for a new pointer and where it goes; false if none found. */
static bool node_pick_slot(struct mptr *m, int *ni, uint32_t *slot)
{
	int cand[MAXB], nc = 0, i;

	if (chance(50) && (i = rnd_nonempty_node()) >= 0) {
		m->key = nv[i].p[rnd_below(nv[i].n)].key;
		m->key.offset += 1 + rnd_below(3);
	} else {
		rnd_key(&m->key);
	}
	for (i = 0; i < nnodes; i++) {
		struct btrfs_key a, b;

		if (nrow_prev_key(i, &a) && kcmp(&a, &m->key) >= 0)
			continue;
		if (nrow_next_key(i, &b) && kcmp(&m->key, &b) >= 0)
			continue;
		cand[nc++] = i;
	}
	if (nc == 0)
		return false;
	*ni = cand[rnd_below((uint32_t)nc)];
	struct tnode *t = &nv[*ni];
	uint32_t s = 0;
	while (s < t->n && kcmp(&t->p[s].key, &m->key) < 0)
		s++;
	if (s < t->n && kcmp(&t->p[s].key, &m->key) == 0)
		return false;
	*slot = s;
	rnd_ptr(m);
	return true;
}

static const char *node_op_insert(void)
{
	struct mptr m;
	uint32_t slot;
	int ni;

	if (!node_pick_slot(&m, &ni, &slot))
		return "insert (key exists)";
	struct tnode *t = &nv[ni];
	snap(t->blk, NULL);
	int ret = ubt_node_insert_ptr(t->blk, ns, (int)slot, &m.key, m.ptr, m.gen);
	if (t->n < maxptrs) {
		CHECK_EQ_INT(ret, 0);
		n_insert(t, slot, &m);
		return "insert";
	}
	CHECK_EQ_INT(ret, -ENOSPC);
	CHECK(unchanged(t->blk, NULL));
	if (nnodes >= MAXB)
		return "insert (ENOSPC)";
	/* Split at the middle and insert into the half it belongs to. */
	uint32_t mid = t->n / 2;
	node_add(ni + 1);
	t = &nv[ni];
	struct tnode *r = &nv[ni + 1];
	CHECK_EQ_INT(ubt_node_split(t->blk, r->blk, ns, (int)mid), 0);
	n_move(t, mid, t->n - mid, r, 0);
	if (slot <= mid) {
		CHECK_EQ_INT(ubt_node_insert_ptr(t->blk, ns, (int)slot, &m.key, m.ptr, m.gen), 0);
		n_insert(t, slot, &m);
	} else {
		CHECK_EQ_INT(ubt_node_insert_ptr(r->blk, ns, (int)(slot - mid), &m.key, m.ptr,
						 m.gen), 0);
		n_insert(r, slot - mid, &m);
	}
	return "insert (split)";
}

static const char *node_op_fill(void)
{
	int ni = (int)rnd_below((uint32_t)nnodes);
	struct tnode *t = &nv[ni];
	uint32_t slot = rnd_below(t->n + 1);
	struct btrfs_key lo, hi;
	struct mptr m;
	bool has_lo, has_hi;

	node_bounds(ni, slot ? slot - 1 : UINT32_MAX, slot, &has_lo, &lo, &has_hi, &hi);
	if (has_lo) {
		m.key = lo;
	} else {
		m.key.objectid = 1;
		m.key.type = BTRFS_STRING_ITEM_KEY;
		m.key.offset = 0;
	}
	for (;;) {
		m.key.offset++;
		if (m.key.offset == 0 || !key_between(&m.key, has_lo, &lo, has_hi, &hi))
			break;
		rnd_ptr(&m);
		snap(t->blk, NULL);
		int ret = ubt_node_insert_ptr(t->blk, ns, (int)slot, &m.key, m.ptr, m.gen);
		if (t->n == maxptrs) {
			CHECK_EQ_INT(ret, -ENOSPC);
			CHECK(unchanged(t->blk, NULL));
			break;
		}
		CHECK_EQ_INT(ret, 0);
		if (ret)
			break;
		n_insert(t, slot, &m);
		slot++;
	}
	return "fill";
}

static const char *node_op_delete(void)
{
	int ni = rnd_nonempty_node();

	if (ni < 0)
		return "delete (empty)";
	struct tnode *t = &nv[ni];
	uint32_t slot = rnd_below(t->n);
	uint32_t nr = chance(70) ? 1 : 1 + rnd_below(t->n - slot);

	CHECK_EQ_INT(ubt_node_delete_ptrs(t->blk, ns, (int)slot, (int)nr), 0);
	memmove(&t->p[slot], &t->p[slot + nr], (t->n - slot - nr) * sizeof(struct mptr));
	t->n -= nr;
	t->dirty = true;
	if (t->n == 0 && nnodes > 1 && chance(70)) {
		verify_node(t);
		node_drop(ni);
		return "delete (drop empty node)";
	}
	return "delete";
}

static const char *node_op_set(void)
{
	int ni = rnd_nonempty_node();

	if (ni < 0)
		return "set (empty)";
	struct tnode *t = &nv[ni];
	uint32_t slot = rnd_below(t->n);

	if (chance(40)) {
		struct mptr m;

		rnd_ptr(&m);
		CHECK_EQ_INT(ubt_node_set_ptr(t->blk, ns, (int)slot, m.ptr, m.gen), 0);
		t->p[slot].ptr = m.ptr;
		t->p[slot].gen = m.gen;
		t->dirty = true;
		return "set ptr";
	}
	struct btrfs_key lo, hi, k;
	bool has_lo, has_hi;

	node_bounds(ni, slot ? slot - 1 : UINT32_MAX, slot + 1, &has_lo, &lo, &has_hi, &hi);
	if (chance(25) && t->n > 1) {
		k = slot > 0 ? t->p[slot - 1].key : t->p[slot + 1].key;
		snap(t->blk, NULL);
		CHECK_EQ_INT(ubt_node_set_key(t->blk, ns, (int)slot, &k), -EINVAL);
		CHECK(unchanged(t->blk, NULL));
		return "set key (EINVAL)";
	}
	k = t->p[slot].key;
	for (int tries = 0; tries < 8; tries++) {
		struct btrfs_key c;

		rnd_key(&c);
		if (tries > 4) {
			c = t->p[slot].key;
			c.offset += tries & 1 ? 1 : (uint64_t)-1;
		}
		if (key_between(&c, has_lo, &lo, has_hi, &hi)) {
			k = c;
			break;
		}
	}
	CHECK_EQ_INT(ubt_node_set_key(t->blk, ns, (int)slot, &k), 0);
	t->p[slot].key = k;
	t->dirty = true;
	return "set key";
}

static const char *node_op_split(void)
{
	if (nnodes >= MAXB)
		return "split (row full)";
	int ni = (int)rnd_below((uint32_t)nnodes);
	uint32_t slot = rnd_below(nv[ni].n + 1);

	node_add(ni + 1);
	CHECK_EQ_INT(ubt_node_split(nv[ni].blk, nv[ni + 1].blk, ns, (int)slot), 0);
	n_move(&nv[ni], slot, nv[ni].n - slot, &nv[ni + 1], 0);
	return "split";
}

static const char *node_op_push(void)
{
	if (nnodes < 2)
		return "push (one node)";
	int i = (int)rnd_below((uint32_t)nnodes - 1);
	struct tnode *l = &nv[i], *r = &nv[i + 1];
	uint32_t r_ = rnd_below(100);

	if (r_ < 30) {
		int shift = 99999;

		CHECK_EQ_INT(ubt_node_balance_shift(l->blk, r->blk, ns, &shift), 0);
		uint32_t tot = l->n + r->n;
		CHECK_EQ_INT(shift, (int)((tot + 1) / 2) - (int)l->n);
		if (shift > 0) {
			CHECK_EQ_INT(ubt_node_push_left(l->blk, r->blk, ns, shift), 0);
			n_move(r, 0, (uint32_t)shift, l, l->n);
		} else if (shift < 0) {
			CHECK_EQ_INT(ubt_node_push_right(l->blk, r->blk, ns, -shift), 0);
			n_move(l, l->n + (uint32_t)shift, (uint32_t)-shift, r, 0);
		}
		CHECK(l->n == r->n || l->n == r->n + 1);
		return "balance";
	}
	bool left = r_ < 65;
	struct tnode *from = left ? r : l, *to = left ? l : r;
	uint32_t room = maxptrs - to->n, lim = UBT_MIN(room, from->n);
	uint32_t k = rnd_below(lim + 1);
	bool too_many = false;

	if (chance(15) && room < from->n) {
		k = room + 1;
		too_many = true;
	}
	snap(l->blk, r->blk);
	int ret = left ? ubt_node_push_left(l->blk, r->blk, ns, (int)k)
		       : ubt_node_push_right(l->blk, r->blk, ns, (int)k);
	if (too_many) {
		CHECK_EQ_INT(ret, -ENOSPC);
		CHECK(unchanged(l->blk, r->blk));
		return "push (ENOSPC)";
	}
	CHECK_EQ_INT(ret, 0);
	if (left)
		n_move(r, 0, k, l, l->n);
	else
		n_move(l, l->n - k, k, r, 0);
	return left ? "push left" : "push right";
}

static const char *node_op_merge(void)
{
	if (nnodes < 2)
		return "merge (one node)";
	int i = (int)rnd_below((uint32_t)nnodes - 1);
	struct tnode *l = &nv[i], *r = &nv[i + 1];

	if (l->n + r->n > maxptrs)
		return "merge (does not fit)";
	CHECK_EQ_INT(ubt_node_free_slots(l->blk, ns), (int)(maxptrs - l->n));
	CHECK_EQ_INT(ubt_node_push_left(l->blk, r->blk, ns, (int)r->n), 0);
	n_move(r, 0, r->n, l, l->n);
	CHECK(all_zero(r->blk + HDR, ns - HDR));
	verify_node(r);
	node_drop(i + 1);
	return "merge";
}

static const char *node_op_bad(void)
{
	int ni = (int)rnd_below((uint32_t)nnodes);
	struct tnode *t = &nv[ni];
	int n = (int)t->n, ret = 0;
	struct btrfs_key k = { 1, BTRFS_STRING_ITEM_KEY, 1 };
	uint8_t *other = NULL;

	snap(t->blk, NULL);
	switch (rnd_below(10)) {
	case 0:
		ret = ubt_node_insert_ptr(t->blk, ns, n + 1, &k, 4096, 1);
		break;
	case 1:
		ret = ubt_node_insert_ptr(t->blk, ns, 0, &k, 0, 1);	/* null pointer */
		break;
	case 2:
		ret = ubt_node_insert_ptr(t->blk, ns, 0, &k, 4096, 0);	/* generation 0 */
		break;
	case 3:
		ret = ubt_node_delete_ptrs(t->blk, ns, n, 1);
		break;
	case 4:
		ret = ubt_node_set_ptr(t->blk, ns, n, 4096, 1);
		break;
	case 5:
		ret = ubt_node_get_ptr(t->blk, ns, n, NULL, NULL, NULL);
		break;
	case 6:
		ret = ubt_node_split(t->blk, t->blk, ns, 0);
		break;
	case 7:
		/* Different levels. */
		other = malloc(ns);
		memcpy(other, t->blk, ns);
		btrfs_set_header_level((struct btrfs_header *)other,
				       (uint8_t)(node_level % 7 + 1));
		btrfs_set_header_nritems((struct btrfs_header *)other, 0);
		ret = ubt_node_split(t->blk, other, ns, 0);
		break;
	case 8:
		/* A node operation on a leaf. */
		other = new_block(0);
		ret = ubt_node_push_right(t->blk, other, ns, 0);
		CHECK(ret == -EINVAL);
		ret = ubt_node_free_slots(other, ns);
		break;
	default:
		if (n) {
			ret = ubt_node_insert_ptr(t->blk, ns, n, &t->p[0].key, 4096, 1);
		} else {
			int shift;
			ret = ubt_node_balance_shift(t->blk, t->blk, ns, &shift);
		}
		break;
	}
	CHECK(ret < 0);
	CHECK(unchanged(t->blk, NULL));
	free(other);
	return "bad call";
}

static void test_node_random(uint32_t nodesize, uint64_t seed, int nops)
{
	int f0 = t_failures, splits = 0, maxn = 0;

	setup(nodesize);
	rng_state = seed ^ nodesize ^ 0x6e6f6465ULL;
	node_level = (uint8_t)(1 + rnd_below(BTRFS_MAX_LEVEL - 1));
	node_add(0);
	grow_phase = true;
	for (int op = 0; op < nops; op++) {
		const char *name;
		uint32_t r = rnd_below(100);

		if (op % 500 == 0)
			grow_phase = chance(60);
		if (r < (grow_phase ? 45u : 20u))
			name = node_op_insert();
		else if (r < 50)
			name = node_op_fill();
		else if (r < (grow_phase ? 58u : 72u))
			name = node_op_delete();
		else if (r < 80)
			name = node_op_set();
		else if (r < 83)
			name = node_op_split();
		else if (r < 94)
			name = node_op_push();
		else if (r < 97)
			name = node_op_merge();
		else
			name = node_op_bad();
		if (!strcmp(name, "insert (split)"))
			splits++;
		for (int i = 0; i < nnodes; i++) {
			maxn = UBT_MAX(maxn, (int)nv[i].n);
			if (nv[i].dirty || op % 1000 == 999)
				verify_node(&nv[i]);
		}
		if (t_failures != f0) {
			fprintf(stderr, "node run: nodesize %u, op %d (%s) failed; seed 0x%llx\n",
				nodesize, op, name, (unsigned long long)seed);
			break;
		}
	}
	printf("nodes  %5u: %d ops at level %u, %d split inserts, most pointers in a node %d of %u\n",
	       nodesize, nops, node_level, splits, maxn, maxptrs);
	while (nnodes)
		node_drop(nnodes - 1);
}

/* ======================================================================== */
/* Targeted tests                                                           */
/* ======================================================================== */

/* Fill a leaf with `count` items of `size` bytes, keys (300, STRING, i). */
static void fill_leaf(uint8_t *b, uint32_t count, uint32_t size)
{
	for (uint32_t i = 0; i < count; i++) {
		struct btrfs_key k = { 300, BTRFS_STRING_ITEM_KEY, 10 * (i + 1) };
		uint32_t sz = 0;
		uint8_t *d;

		CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, (int)i, &k, size), 0);
		d = ubt_leaf_item_data(b, ns, (int)i, &sz);
		if (d)
			memset(d, (int)(i & 0xff) | 1, sz);
	}
}

static void test_full_leaf(uint32_t nodesize)
{
	setup(nodesize);
	uint8_t *b = new_block(0), *o = new_block(0);
	/* Items of 100 bytes, then one that takes the exact rest. */
	uint32_t n = cap / (ISZ + 100) - 1;

	fill_leaf(b, n, 100);
	int fr = ubt_leaf_free_space(b, ns);
	CHECK_EQ_INT(fr, (int)(cap - n * (ISZ + 100)));
	struct btrfs_key k = { 300, BTRFS_STRING_ITEM_KEY, 10 * (n + 1) };
	CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, (int)n, &k, (uint32_t)fr - ISZ + 1), -ENOSPC);
	CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, (int)n, &k, (uint32_t)fr - ISZ), 0);
	CHECK_EQ_INT(ubt_leaf_free_space(b, ns), 0);
	n++;
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), 0);

	/* Nothing fits any more: every growing call is refused untouched. */
	struct btrfs_key ks[2] = { { 1, BTRFS_STRING_ITEM_KEY, 1 }, { 1, BTRFS_STRING_ITEM_KEY, 2 } };
	uint32_t zs[2] = { 0, 0 };
	snap(b, o);
	CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, 0, &ks[0], 0), -ENOSPC);
	CHECK_EQ_INT(ubt_leaf_insert_items(b, ns, 0, ks, zs, 2), -ENOSPC);
	CHECK_EQ_INT(ubt_leaf_extend_item(b, ns, 0, 1), -ENOSPC);
	CHECK_EQ_INT(ubt_leaf_extend_item(b, ns, (int)n - 1, 1), -ENOSPC);
	CHECK(unchanged(b, o));
	/* A one-item leaf cannot push that item into the full one. */
	struct btrfs_key big = { 400, BTRFS_STRING_ITEM_KEY, 0 };
	CHECK_EQ_INT(ubt_leaf_insert_item(o, ns, 0, &big, 0), 0);
	snap(b, o);
	CHECK_EQ_INT(ubt_leaf_push_left(b, o, ns, 1), -ENOSPC);
	CHECK_EQ_INT(ubt_leaf_push_left_max(o, ns, 0, 1), 0);
	CHECK_EQ_INT(ubt_leaf_push_left_max(o, ns, ISZ, 1), 1);
	CHECK(unchanged(b, o));
	/* ...but the other way round it always fits an empty-enough leaf. */
	CHECK_EQ_INT(ubt_leaf_delete_items(o, ns, 0, 1), 0);
	CHECK_EQ_INT(ubt_leaf_push_right_max(b, ns, (uint32_t)ubt_leaf_free_space(o, ns), 1 << 30),
		     (int)n);
	CHECK_EQ_INT(ubt_leaf_push_right(b, o, ns, (int)n), 0);
	CHECK_EQ_INT(ubt_leaf_free_space(b, ns), (int)cap);
	CHECK_EQ_INT(ubt_leaf_free_space(o, ns), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, o), 0);
	free(b);
	free(o);
}

static void test_empty_leaf(uint32_t nodesize)
{
	setup(nodesize);
	uint8_t *b = new_block(0);

	fill_leaf(b, 40, 50);
	/* Delete from the middle, the back and the front until nothing is left. */
	CHECK_EQ_INT(ubt_leaf_delete_items(b, ns, 10, 10), 0);
	CHECK_EQ_INT(ubt_leaf_delete_items(b, ns, 25, 5), 0);
	CHECK_EQ_INT(ubt_leaf_delete_items(b, ns, 0, 5), 0);
	CHECK_EQ_INT(ubt_leaf_delete_items(b, ns, 0, 20), 0);
	CHECK_EQ_U64(btrfs_header_nritems((struct btrfs_header *)b), 0);
	CHECK_EQ_INT(ubt_leaf_free_space(b, ns), (int)cap);
	CHECK(all_zero(b + HDR, cap));
	CHECK_EQ_INT(ubt_leaf_delete_items(b, ns, 0, 1), -EINVAL);
	CHECK_EQ_INT(ubt_leaf_delete_items(b, ns, 0, 0), 0);
	CHECK(ubt_leaf_item_data(b, ns, 0, NULL) == NULL);
	struct ubt_leaf_split_plan plan;
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, 0, 10, &plan), -EINVAL);
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), 0);
	struct ubt_block_expect exp = { .bytenr = btrfs_header_bytenr((struct btrfs_header *)b),
					.generation = GEN, .level = 0, .owner = OWNER };
	CHECK_EQ_INT(ubt_check_tree_block(&ctx, b, &exp), 0);
	/* The biggest possible item fits the empty leaf exactly. */
	struct btrfs_key k = { 5, BTRFS_STRING_ITEM_KEY, 5 };
	CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, 0, &k, cap - ISZ + 1), -ENOSPC);
	CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, 0, &k, cap - ISZ), 0);
	CHECK_EQ_INT(ubt_leaf_free_space(b, ns), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), 0);
	free(b);
}

/* The planner with an item too big to share a leaf with its neighbours. */
static void test_split_plan(uint32_t nodesize)
{
	setup(nodesize);
	uint8_t *b = new_block(0);
	uint32_t n = cap / (ISZ + 60);
	struct ubt_leaf_split_plan plan;
	uint32_t huge = cap - ISZ;		/* needs a leaf of its own */

	fill_leaf(b, n, 60);
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, 0, huge + 1, &plan), -E2BIG);
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, (int)n + 1, 1, &plan), -EINVAL);
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, -1, 1, &plan), -EINVAL);
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, 0, 1, NULL), -EINVAL);

	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, 0, huge, &plan), 0);
	CHECK_EQ_INT(plan.split, 0);
	CHECK_EQ_INT(plan.dest, UBT_SPLIT_DEST_LEFT);
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, (int)n, huge, &plan), 0);
	CHECK_EQ_INT(plan.split, (int)n);
	CHECK_EQ_INT(plan.dest, UBT_SPLIT_DEST_RIGHT);
	for (uint32_t p = 1; p < n; p++) {
		CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, (int)p, huge, &plan), 0);
		CHECK_EQ_INT(plan.split, (int)p);
		CHECK_EQ_INT(plan.dest, UBT_SPLIT_DEST_ALONE);
	}
	/* Big, but it fits beside one side: at the front it goes left alone
	 * with the front items, at the back right with the back items. */
	uint32_t big = cap / 2;
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, 1, big, &plan), 0);
	CHECK(plan.dest != UBT_SPLIT_DEST_ALONE);
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, (int)n - 1, big, &plan), 0);
	CHECK(plan.dest != UBT_SPLIT_DEST_ALONE);
	/* A small item in a full leaf: split at the middle by bytes. */
	CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, 3, 0, &plan), 0);
	CHECK(plan.split >= (int)n / 2 - 1 && plan.split <= (int)n / 2 + 1);

	/* Execute each huge case and insert where the plan says. */
	for (int which = 0; which < 3; which++) {
		uint8_t *l = malloc(ns), *r = new_block(0), *u = new_block(0);
		uint32_t p = which == 0 ? 0 : which == 1 ? n : n / 2;
		struct btrfs_key k = { 300, BTRFS_STRING_ITEM_KEY, 10 * p + 5 };

		memcpy(l, b, ns);
		CHECK_EQ_INT(ubt_leaf_insert_item(l, ns, (int)p, &k, huge), -ENOSPC);
		CHECK_EQ_INT(ubt_leaf_split_plan(l, ns, (int)p, huge, &plan), 0);
		CHECK_EQ_INT(ubt_leaf_split(l, r, ns, plan.split), 0);
		if (plan.dest == UBT_SPLIT_DEST_LEFT)
			CHECK_EQ_INT(ubt_leaf_insert_item(l, ns, (int)p, &k, huge), 0);
		else if (plan.dest == UBT_SPLIT_DEST_RIGHT)
			CHECK_EQ_INT(ubt_leaf_insert_item(r, ns, (int)p - plan.split, &k, huge), 0);
		else
			CHECK_EQ_INT(ubt_leaf_insert_item(u, ns, 0, &k, huge), 0);
		uint32_t total = btrfs_header_nritems((struct btrfs_header *)l) +
				 btrfs_header_nritems((struct btrfs_header *)r) +
				 btrfs_header_nritems((struct btrfs_header *)u);
		CHECK_EQ_U64(total, n + 1);
		CHECK_EQ_INT(ubt_block_finish(&ctx, l), 0);
		CHECK_EQ_INT(ubt_block_finish(&ctx, r), 0);
		CHECK_EQ_INT(ubt_block_finish(&ctx, u), 0);
		free(l);
		free(r);
		free(u);
	}
	free(b);
}

/*
 * A csum item whose range start advances: drop the first checksums
 * (cut_front) and move the key offset by as many sectors; the checker's
 * csum rules must still hold and the remaining checksums be the old tail.
 */
static void test_csum_truncate(void)
{
	setup(16384);
	uint8_t *b = new_block(0);
	struct btrfs_key k = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 1 << 20 };
	uint32_t nsum = 64, cs = 4, sz = 0;

	/* A second item right after the range: the checker's overlap rule. */
	struct btrfs_key k2 = k;
	k2.offset += nsum * ctx.sectorsize;
	CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, 0, &k2, 8 * cs), 0);
	CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, 0, &k, nsum * cs), 0);
	uint8_t *d = ubt_leaf_item_data(b, ns, 0, &sz);
	for (uint32_t i = 0; d && i < sz; i++)
		d[i] = (uint8_t)i;
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), 0);
	/* Growing it by one checksum would overlap the next item. */
	CHECK_EQ_INT(ubt_leaf_extend_item(b, ns, 0, cs), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), -EUCLEAN);
	CHECK_EQ_INT(ubt_leaf_truncate_item(b, ns, 0, nsum * cs, false), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), 0);
	CHECK_EQ_INT(ubt_leaf_truncate_item(b, ns, 0, (nsum - 10) * cs, true), 0);
	k.offset += 10 * ctx.sectorsize;
	CHECK_EQ_INT(ubt_leaf_set_key(b, ns, 0, &k), 0);
	d = ubt_leaf_item_data(b, ns, 0, &sz);
	CHECK_EQ_U64(sz, (nsum - 10) * cs);
	for (uint32_t i = 0; d && i < sz; i++)
		CHECK_EQ_U64(d[i], (uint8_t)(i + 10 * cs));
	/* and the end: the range shrinks from the back */
	CHECK_EQ_INT(ubt_leaf_truncate_item(b, ns, 0, 20 * cs, false), 0);
	d = ubt_leaf_item_data(b, ns, 0, &sz);
	CHECK_EQ_U64(sz, 20 * cs);
	CHECK(d && d[0] == 10 * cs && d[sz - 1] == (uint8_t)(sz - 1 + 10 * cs));
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), 0);
	CHECK_EQ_INT(ubt_leaf_free_space(b, ns), (int)(cap - 2 * ISZ - sz - 8 * cs));
	free(b);
}

static void test_header(void)
{
	setup(4096);
	uint8_t *b = malloc(ns);
	struct ubt_block_hdr h = {
		.bytenr = 123 * 4096, .generation = 77, .owner = BTRFS_EXTENT_TREE_OBJECTID,
		.level = 2, .fsid = FSID, .chunk_tree_uuid = CHUNK_UUID,
		.flags = BTRFS_HEADER_FLAG_RELOC,
	};
	const struct btrfs_header *hd = (const struct btrfs_header *)b;

	memset(b, 0xaa, ns);
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), 0);
	CHECK_EQ_U64(btrfs_header_bytenr(hd), 123 * 4096);
	CHECK_EQ_U64(btrfs_header_generation(hd), 77);
	CHECK_EQ_U64(btrfs_header_owner(hd), BTRFS_EXTENT_TREE_OBJECTID);
	CHECK_EQ_U64(btrfs_header_level(hd), 2);
	CHECK_EQ_U64(btrfs_header_nritems(hd), 0);
	CHECK_EQ_U64(btrfs_header_flags(hd),
		     BTRFS_HEADER_FLAG_WRITTEN | BTRFS_HEADER_FLAG_RELOC |
			     (uint64_t)BTRFS_MIXED_BACKREF_REV << BTRFS_BACKREF_REV_SHIFT);
	CHECK(memcmp(btrfs_header_fsid(hd), FSID, 16) == 0);
	CHECK(memcmp(btrfs_header_chunk_tree_uuid(hd), CHUNK_UUID, 16) == 0);
	CHECK(all_zero(b, BTRFS_CSUM_SIZE));
	CHECK(all_zero(b + HDR, ns - HDR));

	/* Refused: bad level, nodesize, flags, missing uuids. */
	h.level = BTRFS_MAX_LEVEL;
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), -EINVAL);
	h.level = 0;
	CHECK_EQ_INT(ubt_block_init(b, 3000, &h), -EINVAL);
	CHECK_EQ_INT(ubt_block_init(b, 2048, &h), -EINVAL);
	h.flags = 1ULL << 60;
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), -EINVAL);
	h.flags = 0;
	h.fsid = NULL;
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), -EINVAL);
	h.fsid = FSID;

	/* Sealing: the checksum the checker verifies; wrong fsid or a
	 * missing WRITTEN flag are refused. */
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), 0);
	/* An empty extent-tree leaf is refused by the checker: not sealed. */
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), -EUCLEAN);
	CHECK(all_zero(b, BTRFS_CSUM_SIZE));
	h.owner = OWNER;
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), 0);
	struct ubt_block_expect exp = { .bytenr = h.bytenr, .generation = h.generation,
					.level = 0, .owner = OWNER };
	CHECK_EQ_INT(ubt_check_tree_block(&ctx, b, &exp), 0);
	b[200] ^= 1;
	CHECK_EQ_INT(ubt_check_tree_block(&ctx, b, &exp), -EIO);
	b[200] ^= 1;
	btrfs_set_header_flags((struct btrfs_header *)b, 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), -EINVAL);
	CHECK_EQ_INT(ubt_block_init(b, ns, &h), 0);
	b[BTRFS_CSUM_SIZE] ^= 0xff;	/* fsid */
	CHECK_EQ_INT(ubt_block_finish(&ctx, b), -EINVAL);
	CHECK_EQ_INT(ubt_block_finish(NULL, b), -EINVAL);
	free(b);
}

static void test_full_node(uint32_t nodesize)
{
	setup(nodesize);
	uint8_t *a = new_block(1), *c = new_block(1);

	for (uint32_t i = 0; i < maxptrs; i++) {
		struct btrfs_key k = { 300, BTRFS_STRING_ITEM_KEY, 10 * (i + 1) };
		CHECK_EQ_INT(ubt_node_insert_ptr(a, ns, (int)i, &k, 4096 * (i + 1), GEN), 0);
	}
	CHECK_EQ_INT(ubt_node_free_slots(a, ns), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, a), 0);
	struct btrfs_key k = { 300, BTRFS_STRING_ITEM_KEY, 5 };
	struct btrfs_key k2 = { 900, BTRFS_STRING_ITEM_KEY, 5 };
	CHECK_EQ_INT(ubt_node_insert_ptr(c, ns, 0, &k2, 4096, 1), 0);
	snap(a, c);
	CHECK_EQ_INT(ubt_node_insert_ptr(a, ns, 0, &k, 4096, 1), -ENOSPC);
	CHECK_EQ_INT(ubt_node_push_left(a, c, ns, 1), -ENOSPC);
	CHECK_EQ_INT(ubt_node_push_right(a, c, ns, (int)maxptrs), -ENOSPC);
	CHECK(unchanged(a, c));
	int shift = 0;
	CHECK_EQ_INT(ubt_node_balance_shift(a, c, ns, &shift), 0);
	CHECK_EQ_INT(shift, (int)((maxptrs + 2) / 2) - (int)maxptrs);
	CHECK_EQ_INT(ubt_node_push_right(a, c, ns, -shift), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, a), 0);
	CHECK_EQ_INT(ubt_block_finish(&ctx, c), 0);
	/* The first key of c is now a's old middle; set_key keeps order. */
	struct btrfs_key first;
	CHECK_EQ_INT(ubt_node_get_ptr(c, ns, 0, &first, NULL, NULL), 0);
	first.offset--;
	CHECK_EQ_INT(ubt_node_set_key(c, ns, 0, &first), 0);
	first.offset = 0;
	CHECK_EQ_INT(ubt_node_set_key(c, ns, 1, &first), -EINVAL);
	free(a);
	free(c);
}

/* ======================================================================== */
/* Hostile blocks                                                           */
/* ======================================================================== */

/* A random leaf or node made with the API (so it starts valid). */
static uint8_t *rnd_valid_block(void)
{
	bool leaf = chance(60);
	uint8_t *b = new_block(leaf ? 0 : 1);
	uint32_t n = rnd_below(leaf ? 40 : 60);

	for (uint32_t i = 0; i < n; i++) {
		struct btrfs_key k = { 300, BTRFS_STRING_ITEM_KEY, i + 1 };
		if (leaf)
			ubt_leaf_insert_item(b, ns, (int)i, &k, rnd_below(200));
		else
			ubt_node_insert_ptr(b, ns, (int)i, &k, 4096, 1);
	}
	return b;
}

static void damage(uint8_t *b)
{
	uint32_t r = rnd_below(100);

	if (r < 10) {
		rnd_fill(b + BTRFS_CSUM_SIZE, ns - BTRFS_CSUM_SIZE);
		b[100] = (uint8_t)rnd_below(9);			/* level */
		ubt_put_le32(b + 96, rnd_below(r < 5 ? 8 : 5000));	/* nritems */
		return;
	}
	int nflips = 1 + (int)rnd_below(3);
	for (int i = 0; i < nflips; i++) {
		/* Mostly the header tail and the item / pointer table. */
		uint32_t off = chance(80) ? 96 + rnd_below(5 + 30 * ISZ) : rnd_below(ns);
		if (chance(50))
			b[off] ^= (uint8_t)(1u << rnd_below(8));
		else
			b[off] = (uint8_t)rnd();
	}
}

/* Independent of blockops.c: is this a leaf whose item table is consistent? */
/*
 * The item table from item @from on (the whole table for 0 or a slot out
 * of range): item from - 1 starts inside the data area, each item's data
 * ends where the previous one's starts, the lowest is above the headers.
 * The changes inside one leaf (insert, delete, extend, truncate) check
 * this from their slot; everything else checks the whole table.
 */
static bool ref_leaf_ok_from(const uint8_t *b, int from)
{
	uint32_t n = ubt_get_le32(b + 96), end = cap, first = 0;

	if (b[100] != 0 || (uint64_t)n * ISZ > cap)
		return false;
	if (from > 0 && (uint32_t)from <= n) {
		first = (uint32_t)from;
		end = ubt_get_le32(b + HDR + (first - 1) * ISZ + 17);
		if (end > cap)
			return false;
	}
	for (uint32_t i = first; i < n; i++) {
		const uint8_t *it = b + HDR + i * ISZ;
		uint64_t off = ubt_get_le32(it + 17), size = ubt_get_le32(it + 21);

		if (off + size != end)
			return false;
		end = (uint32_t)off;
	}
	return end >= n * ISZ;
}

static bool ref_leaf_ok(const uint8_t *b)
{
	return ref_leaf_ok_from(b, 0);
}

static bool ref_node_ok(const uint8_t *b)
{
	return b[100] >= 1 && b[100] < BTRFS_MAX_LEVEL && ubt_get_le32(b + 96) <= maxptrs;
}

/*
 * One random call on (a, b): a failing call must not change either block,
 * and a call on a block that is not what the function needs must fail.
 */
static void hostile_call(uint8_t *a, uint8_t *b)
{
	const bool la = ref_leaf_ok(a), lab = la && ref_leaf_ok(b);
	const bool na = ref_node_ok(a), nab = na && ref_node_ok(b);
	bool valid = true;
	struct btrfs_key keys[3];
	uint32_t sizes[3];
	int slot = (int)rnd_below(50) - 5, nr = (int)rnd_below(6) - 1, ret;
	uint32_t sz = 0;
	struct ubt_leaf_split_plan plan;
	uint64_t p, g;
	int shift;

	for (int i = 0; i < 3; i++) {
		keys[i].objectid = 300;
		keys[i].type = BTRFS_STRING_ITEM_KEY;
		keys[i].offset = rnd_below(80) + (uint64_t)i;
		sizes[i] = chance(90) ? rnd_below(300) : (uint32_t)rnd();
	}
	snap(a, b);
	uint32_t op = rnd_below(22);
	/* The O(1) leaf readers (0..3) check what they read, the changes in
	 * one leaf (4..7) the table from their slot, everything else the
	 * whole block. */
	if (op >= 4 && op <= 7)
		valid = ref_leaf_ok_from(a, slot);
	else if (op >= 8 && op <= 13)
		valid = (op >= 9 && op <= 11) ? lab : la;
	else if (op >= 14)
		valid = op >= 18 ? nab : na;
	switch (op) {
	case 0:
		ret = ubt_leaf_free_space(a, ns);
		CHECK(ret < 0 || (uint32_t)ret <= cap);
		break;
	case 1:
		ret = ubt_leaf_space_used(a, ns, slot, nr);
		CHECK(ret < 0 || (uint32_t)ret <= cap);
		break;
	case 2: ret = ubt_leaf_item_key(a, ns, slot, &keys[0]); break;
	case 3: {
		/* O(1): only this item is checked, but it must lie in the data area. */
		const uint8_t *d = ubt_leaf_item_data(a, ns, slot, &sz);
		CHECK(!d || (a[100] == 0 && slot >= 0 && (uint32_t)slot < ubt_get_le32(a + 96)));
		CHECK(!d || (d >= a + HDR + ubt_get_le32(a + 96) * ISZ && d + sz <= a + ns));
		ret = 0;
		break;
	}
	case 4: ret = ubt_leaf_insert_items(a, ns, slot, keys, sizes, UBT_MAX(nr, 0) % 4); break;
	case 5: ret = ubt_leaf_delete_items(a, ns, slot, nr); break;
	case 6: ret = ubt_leaf_extend_item(a, ns, slot, sizes[0]); break;
	case 7: ret = ubt_leaf_truncate_item(a, ns, slot, sizes[0] % 64, chance(50)); break;
	case 8: ret = ubt_leaf_set_key(a, ns, slot, &keys[0]); break;
	case 9: ret = ubt_leaf_split(a, b, ns, slot); break;
	case 10: ret = ubt_leaf_push_left(a, b, ns, nr); break;
	case 11: ret = ubt_leaf_push_right(a, b, ns, nr); break;
	case 12: ret = ubt_leaf_push_left_max(a, ns, sizes[0], nr); break;
	case 13: ret = ubt_leaf_split_plan(a, ns, slot, sizes[0], &plan); break;
	case 14: ret = ubt_node_get_ptr(a, ns, slot, &keys[0], &p, &g); break;
	case 15: ret = ubt_node_insert_ptr(a, ns, slot, &keys[0], 4096, 1); break;
	case 16: ret = ubt_node_delete_ptrs(a, ns, slot, nr); break;
	case 17: ret = ubt_node_set_key(a, ns, slot, &keys[0]); break;
	case 18: ret = ubt_node_split(a, b, ns, slot); break;
	case 19: ret = ubt_node_push_left(a, b, ns, nr); break;
	case 20: ret = ubt_node_push_right(a, b, ns, nr); break;
	default: ret = ubt_node_balance_shift(a, b, ns, &shift); break;
	}
	if (!valid)
		CHECK_EQ_INT(ret, -EINVAL);
	if (ret < 0)
		CHECK(unchanged(a, b));
}

/*
 * Crafted leaves the item-table check must refuse: contiguous data that
 * reaches into the item headers, a gap between items, and an item table
 * longer than the block.  Every leaf operation gives -EINVAL untouched.
 */
static void test_crafted_leaf(uint32_t nodesize)
{
	setup(nodesize);
	uint8_t *b = malloc(ns), *o = new_block(0);

	for (int kind = 0; kind < 3; kind++) {
		struct btrfs_header *h;
		struct btrfs_item *it;

		free(b);
		b = new_block(0);
		h = (struct btrfs_header *)b;
		fill_leaf(b, 2, 10);
		it = btrfs_leaf_item(b, 1);
		if (kind == 0) {
			/* item 1 spans [0, cap - 10): over the headers */
			btrfs_set_item_offset(it, 0);
			btrfs_set_item_size(it, cap - 10);
		} else if (kind == 1) {
			btrfs_set_item_offset(it, btrfs_item_offset(it) - 1);
		} else {
			btrfs_set_header_nritems(h, cap / ISZ + 1);
		}
		struct btrfs_key k = { 1, BTRFS_STRING_ITEM_KEY, 1 }, kk;
		uint32_t sz;
		struct ubt_leaf_split_plan plan;
		snap(b, o);
		/* The O(1) readers see these three through the last item or nritems. */
		CHECK_EQ_INT(ubt_leaf_free_space(b, ns), -EINVAL);
		if (kind == 2) {
			CHECK_EQ_INT(ubt_leaf_space_used(b, ns, 0, 1), -EINVAL);
			CHECK_EQ_INT(ubt_leaf_item_key(b, ns, 0, &kk), -EINVAL);
		}
		CHECK_EQ_INT(ubt_leaf_insert_item(b, ns, 0, &k, 1), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_delete_items(b, ns, 0, 1), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_extend_item(b, ns, 0, 1), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_truncate_item(b, ns, 0, 0, false), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_set_key(b, ns, 0, &k), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_split(b, o, ns, 0), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_push_left(o, b, ns, 1), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_push_right(b, o, ns, 1), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_push_left_max(b, ns, cap, 1), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_push_right_max(b, ns, cap, 1), -EINVAL);
		CHECK_EQ_INT(ubt_leaf_split_plan(b, ns, 0, 1, &plan), -EINVAL);
		CHECK(unchanged(b, o));
		if (kind == 0)
			CHECK(ubt_leaf_item_data(b, ns, 1, &sz) == NULL);
		if (kind == 2)
			CHECK(ubt_leaf_item_data(b, ns, 0, &sz) == NULL);
	}
	free(b);
	free(o);
}

static void test_hostile(uint32_t nodesize, uint64_t seed)
{
	int f0 = t_failures;

	setup(nodesize);
	rng_state = seed ^ nodesize ^ 0x686f7374ULL;
	for (int round = 0; round < 400; round++) {
		uint8_t *a = rnd_valid_block(), *b = rnd_valid_block();

		if (chance(70))
			damage(a);
		if (chance(30))
			damage(b);
		for (int i = 0; i < 40; i++)
			hostile_call(a, b);
		free(a);
		free(b);
		if (t_failures != f0) {
			fprintf(stderr, "hostile: nodesize %u round %d failed; seed 0x%llx\n", nodesize,
				round, (unsigned long long)seed);
			break;
		}
	}
}

/* ======================================================================== */

int main(void)
{
	static const uint32_t sizes[] = { 4096, 16384, 65536 };
	const char *s = getenv("UBTRFS_TEST_SEED");
	const char *o = getenv("UBTRFS_BLOCKOPS_OPS");
	uint64_t seed = s ? strtoull(s, NULL, 0) : 0x0b10c0b5ULL;
	int nops = o ? atoi(o) : 20000;

	printf("seed 0x%llx (UBTRFS_TEST_SEED to replay)\n", (unsigned long long)seed);
	ubt_log_set_handler(quiet_log, NULL);

	test_header();
	test_csum_truncate();
	for (size_t i = 0; i < UBT_ARRAY_SIZE(sizes); i++) {
		test_full_leaf(sizes[i]);
		test_empty_leaf(sizes[i]);
		test_split_plan(sizes[i]);
		test_full_node(sizes[i]);
		test_crafted_leaf(sizes[i]);
	}
	for (size_t i = 0; i < UBT_ARRAY_SIZE(sizes); i++) {
		test_leaf_random(sizes[i], seed, nops);
		test_node_random(sizes[i], seed, nops / 2);
		test_hostile(sizes[i], seed);
	}
	free(snap1);
	free(snap2);
	return t_finish();
}
