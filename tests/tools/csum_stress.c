/*
 * csum_stress: the csum-tree writer (trans/csum_w.c) against a model.
 *
 *   csum_stress [OPS [SEED]]
 *
 * For node sizes 4 KiB and 16 KiB and each checksum type (crc32c, xxhash64,
 * sha256, blake2b: 4, 8, 32, 32 bytes) it creates a filesystem in a
 * temporary image file with ubtrfs_mkfs (no root needed), opens it for
 * writing and
 *  1. checks ubt_csum_item_max against the kernel's rule and ubt_csum_data
 *     against ubt_csum sector by sector;
 *  2. runs a directed sequence whose item layout is known exactly:
 *     extending the item that ends at the start, the per-item maximum
 *     (a longer insert continues in a new item), -EEXIST for every kind
 *     of overlap (transaction still usable), and deletes that split an
 *     item, cut an item's end, cut its front (key moves), remove whole
 *     items, and cross several items at once; an insert in front of a
 *     first leaf that a full item fills;
 *  3. fills 60% of a window of sectors (sized so that the csum tree reaches
 *     level 2: 1.5 MiB of checksums with 4 KiB nodes, 12 MiB with 16 KiB),
 *     then runs OPS random operations on it - inserts into free space
 *     (often right after existing checksums, so items grow to their
 *     maximum; some around the maximum), inserts that must fail with
 *     -EEXIST, deletes of random ranges (1 sector to 8 MiB, now and then
 *     an eighth of the window) and of ranges at item edges - with a model
 *     of bytenr -> checksum, committing every 1..6 operations and closing
 *     and reopening the image every third commit.  Half of the inserts
 *     into free space go through ubt_csum_insert_held, as new data's
 *     checksums do: held back as one run, they must show at once through
 *     the readers' overlay (fs->held_csums) exactly where ubt_csum_held
 *     says the run holds them, and reach the tree by the next commit (or
 *     the next insert or delete that meets them: -EEXIST included);
 *  4. deletes everything and checks that the tree is empty.
 * Then, once (4 KiB nodes, sha256), on a 64 MiB filesystem:
 *  5. inserts until -ENOSPC: the transaction must stay usable and the tree
 *     exactly as before the failed insert (partial work taken back);
 *     commits and goes on until an insert fails right after a commit;
 *     then OPS small deletes (splits need space; -ENOSPC leaves part of
 *     the range done - the model is taken from the tree there - and the
 *     test commits and goes on), and everything in 64 steps.
 * After every commit (and every directed step) the whole csum tree is
 * checked through the read side: only EXTENT_CSUM items, sector-aligned
 * keys ascending, sizes a non-zero multiple of the checksum size and at
 * most the maximum, no overlaps, every checksum equal to the model and no
 * sector of the model missing.  The commit runs the tree checker on every
 * block written; after a reopen every block is read again and checked
 * against its parent's key.
 *
 * btrfs check cannot judge these images: it would report checksums
 * without data extents.
 *
 * A transaction that changed no block is not committed (the engine cannot
 * commit an empty transaction) but left open for the next operations.
 *
 * UBTRFS_TEST_QUICK=1 runs fewer operations (sanitizer builds);
 * UBTRFS_TEST_SEED=n or SEED replays a run; TMPDIR says where the images
 * go.  Debugging: UBTRFS_CSUM_STRESS_ONLY=4096,sha256 (or "enospc") runs one
 * configuration, UBTRFS_CSUM_STRESS_PARANOID=1 verifies after every
 * operation, UBTRFS_CSUM_STRESS_VERBOSE=1 prints every operation,
 * UBTRFS_CSUM_STRESS_EMPTY_PARTS=N sets the steps of the final delete in 5.
 * Exit: 0 ok, 1 failure (with the reason).
 */
#include <ubtrfs/ubtrfs.h>

#include "base/base.h"
#include "fs/fs.h"
#include "trans/csum_w.h"
#include "trans/trans.h"
#include "engine_tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BASE (1ull << 30)		/* logical address of sector 0 */
#define MAX_ITEMS 65536

static uint64_t rng_state;
static uint32_t ss, cs, maxn;		/* sectorsize, csum size, csums per item */
static uint32_t win;			/* sectors the model covers */
static uint32_t present;		/* of them with a checksum */
static bool *mhave;			/* win */
static uint8_t *mcs;			/* win * cs */
static const char *image;
static int failures;
static bool paranoid;			/* UBTRFS_CSUM_STRESS_PARANOID: verify after every op */
static bool verbose;			/* UBTRFS_CSUM_STRESS_VERBOSE: print every op */

/* The random phase: inserts may be held (ubt_csum_insert_held); the
 * directed steps check the tree's exact layout after each insert. */
static bool allow_held;

static struct {
	unsigned long held, held_seen;	/* held inserts; of them still held after the call */
	unsigned long inserts, extends_adjacent, eexist, deletes, commits, reopens, empty_commits;
	unsigned long enospc_del;
	unsigned long max_items_seen, max_level;
	uint64_t max_sectors;
} st;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint32_t rnd_below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

#define FAIL(...)                                                                          \
	do {                                                                               \
		fprintf(stderr, "csum_stress: " __VA_ARGS__);                              \
		fputc('\n', stderr);                                                       \
		failures++;                                                                \
	} while (0)

static uint64_t addr(uint32_t sector)
{
	return BASE + (uint64_t)sector * ss;
}

static int open_fs(struct ubt_fs **fs)
{
	return engine_open(image, fs);
}

static void close_fs(struct ubt_fs *fs)
{
	engine_close(fs);
}

/* ---- the read side's view ------------------------------------------------- */

struct item {
	uint32_t start, n;	/* in sectors of the window */
};

/*
 * Every item of the csum tree, checked structurally and against the model.
 * items/nitems (optional) get the layout.  Returns the number of problems.
 */
static int verify(struct ubt_fs *fs, const char *when, struct item *items, size_t *nitems)
{
	struct btrfs_key min = { 0, 0, 0 };
	struct btrfs_key max = { UINT64_MAX, 0xff, UINT64_MAX };
	struct ubt_iter it;
	uint64_t prev_end = 0, covered = 0, want = 0;
	size_t n = 0;
	int bad = 0, ret;

	if (fs->wr && fs->wr->aborted) {
		FAIL("%s: the filesystem is aborted (%s)", when, ubt_strerror(fs->wr->abort_err));
		return 1;
	}
	ubt_iter_start(&it, &fs->tree, &fs->csum_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0 && bad < 10) {
		uint64_t s = it.key.offset;
		if (it.key.objectid != BTRFS_EXTENT_CSUM_OBJECTID ||
		    it.key.type != BTRFS_EXTENT_CSUM_KEY) {
			FAIL("%s: foreign item (%" PRIu64 " %u %" PRIu64 ")", when, it.key.objectid,
			     it.key.type, it.key.offset);
			bad++;
			continue;
		}
		if (s % ss || it.size == 0 || it.size % cs || it.size / cs > maxn) {
			FAIL("%s: item %" PRIu64 " size %u (csum %u, max %u csums)", when, s,
			     it.size, cs, maxn);
			bad++;
			continue;
		}
		uint64_t e = s + (uint64_t)(it.size / cs) * ss;
		if (s < BASE || e > addr(win)) {
			FAIL("%s: item [%" PRIu64 ", %" PRIu64 ") outside the window", when, s, e);
			bad++;
			continue;
		}
		if (n && s < prev_end) {
			FAIL("%s: item at %" PRIu64 " overlaps the one before (ends %" PRIu64 ")",
			     when, s, prev_end);
			bad++;
		}
		prev_end = e;
		uint32_t first = (uint32_t)((s - BASE) / ss), cnt = it.size / cs;
		if (cnt == maxn)
			st.max_items_seen++;
		for (uint32_t i = 0; i < cnt; i++) {
			uint32_t sec = first + i;
			if (!mhave[sec]) {
				FAIL("%s: sector %u has a checksum, the model has none", when, sec);
				bad++;
				break;
			}
			if (memcmp(it.data + (size_t)i * cs, mcs + (size_t)sec * cs, cs)) {
				FAIL("%s: sector %u: wrong checksum", when, sec);
				bad++;
				break;
			}
		}
		covered += cnt;
		if (items) {
			if (n < MAX_ITEMS)
				items[n] = (struct item){ first, cnt };
		}
		n++;
	}
	ubt_iter_end(&it);
	if (ret < 0) {
		FAIL("%s: iterating the csum tree: %s", when, ubt_strerror(ret));
		bad++;
	}
	/* Checksums the writer still holds back (ubt_csum_insert_held): the
	 * readers' overlay must give each of them, for sectors the tree does
	 * not have. */
	if (!bad && fs->held_csums) {
		bool *have = calloc(win, sizeof(bool));
		uint8_t *v = malloc((size_t)win * cs + 1);
		fs->held_csums(fs, addr(0), win, v, have);
		for (uint32_t i = 0; i < win && bad < 10; i++) {
			if (!have[i])
				continue;
			covered++;
			if (!mhave[i] || memcmp(v + (size_t)i * cs, mcs + (size_t)i * cs, cs)) {
				FAIL("%s: sector %u: held checksum %s", when, i,
				     mhave[i] ? "wrong" : "the model does not have");
				bad++;
			}
		}
		free(have);
		free(v);
	}
	for (uint32_t i = 0; i < win; i++)
		want += mhave[i];
	if (!bad && covered != want) {
		FAIL("%s: %" PRIu64 " sectors have checksums, the model has %" PRIu64, when,
		     covered, want);
		bad++;
	}
	if (nitems)
		*nitems = n;
	if (fs->csum_tree.level > st.max_level)
		st.max_level = fs->csum_tree.level;
	return bad;
}

/* ---- operations that keep the model ---------------------------------------- */

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/*
 * Insert checksums of [s, s + n) and return what the library said; the
 * model follows a success.  A failure must leave the transaction usable.
 */
/* held: ubt_csum_insert_held (the range is free: new data's checksums),
 * whose checksums must show at once through the readers' overlay or the
 * tree (ubt_csum_held says which). */
static int try_insert(struct ubt_trans *t, uint32_t s, uint32_t n, bool held)
{
	uint8_t *c = malloc((size_t)n * cs + 1);
	int ret;

	fill_random(c, (size_t)n * cs);
	ret = held ? ubt_csum_insert_held(t, addr(s), c, n) : ubt_csum_insert(t, addr(s), c, n);
	if (verbose)
		fprintf(stderr, "insert%s [%u, %u): %d\n", held ? " held" : "", s, s + n, ret);
	if (ret == 0 && held) {
		st.held++;
		struct ubt_fs *fs = t->w->fs;
		bool *have = calloc(n, sizeof(bool));
		uint8_t *v = malloc((size_t)n * cs + 1);
		if (fs->held_csums)
			fs->held_csums(fs, addr(s), n, v, have);
		bool in_run = ubt_csum_held(t, addr(s), (uint64_t)n * ss);
		for (uint32_t i = 0; i < n; i++) {
			if (have[i] != in_run) {
				FAIL("held insert [%u, %u): sector %u %s the overlay, the run %s it",
				     s, s + n, s + i, have[i] ? "in" : "not in",
				     in_run ? "holds" : "does not hold");
				break;
			}
			if (have[i] && memcmp(v + (size_t)i * cs, c + (size_t)i * cs, cs)) {
				FAIL("held insert [%u, %u): sector %u: the overlay's checksum differs",
				     s, s + n, s + i);
				break;
			}
		}
		st.held_seen += in_run;
		free(have);
		free(v);
	}
	if (ret == 0) {
		if (s > 0 && mhave[s - 1])
			st.extends_adjacent++;
		for (uint32_t i = 0; i < n; i++) {
			present += !mhave[s + i];
			mhave[s + i] = true;
			memcpy(mcs + (size_t)(s + i) * cs, c + (size_t)i * cs, cs);
		}
		st.inserts++;
	} else if (t->w->aborted) {
		FAIL("insert [%u, %u) failed with %s and aborted the transaction", s, s + n,
		     ubt_strerror(ret));
		ret = -ECANCELED;
	}
	free(c);
	return ret;
}

/* Insert; `expect` is what the call must return. */
static int do_insert(struct ubt_trans *t, uint32_t s, uint32_t n, int expect)
{
	/* Half of the inserts into free space as the writer makes them for
	 * new data. */
	int ret = try_insert(t, s, n, allow_held && expect == 0 && rnd_below(2) == 0);

	if (ret == -ECANCELED)
		return 1;
	if (ret != expect) {
		FAIL("insert [%u, %u): %s, expected %s", s, s + n, ubt_strerror(ret),
		     ubt_strerror(expect));
		return 1;
	}
	if (ret == -EEXIST)
		st.eexist++;
	return 0;
}

/*
 * After a delete stopped with -ENOSPC part of [s, s + n) may be gone: take
 * the model of the range from the tree (no checksum may have appeared; the
 * next verify compares the values).
 */
static int resync_range(struct ubt_fs *fs, uint32_t s, uint32_t n)
{
	bool *in = calloc(n, sizeof(bool));
	uint64_t from = addr(s) - UBT_MIN(addr(s), (uint64_t)maxn * ss);
	struct btrfs_key min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, from };
	struct btrfs_key max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, addr(s + n) - 1 };
	struct ubt_iter it;
	int ret, bad = 0;

	if (!in)
		return 1;
	ubt_iter_start(&it, &fs->tree, &fs->csum_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		uint64_t a = it.key.offset, b = a + (uint64_t)(it.size / cs) * ss;
		for (uint64_t x = UBT_MAX(a, addr(s)); x < UBT_MIN(b, addr(s + n)); x += ss)
			in[(x - addr(s)) / ss] = true;
	}
	ubt_iter_end(&it);
	if (ret < 0) {
		FAIL("resync: %s", ubt_strerror(ret));
		bad++;
	}
	for (uint32_t i = 0; i < n && !bad; i++) {
		if (in[i] && !mhave[s + i]) {
			FAIL("sector %u gained a checksum in a delete", s + i);
			bad++;
		}
		present -= mhave[s + i] && !in[i];
		mhave[s + i] = in[i];
	}
	free(in);
	return bad;
}

static int try_delete(struct ubt_trans *t, uint32_t s, uint32_t n)
{
	int ret = ubt_csum_delete(t, addr(s), (uint64_t)n * ss);

	if (verbose)
		fprintf(stderr, "delete [%u, %u): %d\n", s, s + n, ret);
	if (ret == 0) {
		for (uint32_t i = 0; i < n; i++)
			present -= mhave[s + i];
		memset(mhave + s, 0, n * sizeof(bool));
		st.deletes++;
	} else if (t->w->aborted) {
		FAIL("delete [%u, %u) failed with %s and aborted the transaction", s, s + n,
		     ubt_strerror(ret));
		ret = -ECANCELED;
	} else if (ret == -ENOSPC) {
		st.enospc_del++;
		if (resync_range(t->w->fs, s, n))
			ret = -ECANCELED;
	}
	return ret;
}

static int do_delete(struct ubt_trans *t, uint32_t s, uint32_t n)
{
	int ret = try_delete(t, s, n);

	if (ret && ret != -ECANCELED)
		FAIL("delete [%u, %u): %s", s, s + n, ubt_strerror(ret));
	return ret ? 1 : 0;
}

/*
 * Commit (if one is open), unless it changed no block: the engine cannot commit
 * an empty transaction yet (the superblock's generation would move past the
 * root tree's block), so such a transaction stays open for the next ops.
 */
static int commit(struct ubt_fs *fs, struct ubt_trans **t)
{
	if (!*t)
		return 0;
	if ((*t)->ndirty == 0) {
		st.empty_commits++;
		return 0;
	}
	int ret = ubt_trans_commit(*t);

	*t = NULL;
	if (verbose)
		fprintf(stderr, "commit: %d\n", ret);
	if (ret) {
		FAIL("commit: %s", ubt_strerror(ret));
		return 1;
	}
	st.commits++;
	return 0;
}

/* ---- 1. pure parts ---------------------------------------------------------- */

static void check_pure(struct ubt_fs *fs)
{
	/* The kernel's MAX_CSUM_ITEMS: min((leaf data - 2 * 25) / csum - 1, PAGE_SIZE),
	 * worked out by hand for the leaf data sizes 3995 (4 KiB) and 16283 (16 KiB). */
	static const struct {
		uint32_t nodesize, csum, max;
	} cases[] = {
		{ 4096, 4, 985 },    { 4096, 8, 492 },    { 4096, 32, 122 },
		{ 16384, 4, 4057 },  { 16384, 8, 2028 },  { 16384, 32, 506 },
		{ 65536, 4, 4096 },  { 65536, 32, 2042 }, { 32768, 4, 4096 },
	};
	for (size_t i = 0; i < UBT_ARRAY_SIZE(cases); i++) {
		uint32_t got = ubt_csum_item_max(cases[i].nodesize, cases[i].csum);
		if (got != cases[i].max)
			FAIL("ubt_csum_item_max(%u, %u) = %u, want %u", cases[i].nodesize,
			     cases[i].csum, got, cases[i].max);
	}

	enum { NS = 9 };
	uint8_t *data = malloc((size_t)NS * ss), out[NS * UBT_CSUM_MAX], one[UBT_CSUM_MAX];
	fill_random(data, (size_t)NS * ss);
	int ret = ubt_csum_data(fs, data, (size_t)NS * ss, out);
	if (ret)
		FAIL("ubt_csum_data: %s", ubt_strerror(ret));
	for (unsigned i = 0; i < NS && !ret; i++) {
		ubt_csum(fs->csum_type, data + (size_t)i * ss, ss, one);
		if (memcmp(one, out + (size_t)i * cs, cs))
			FAIL("ubt_csum_data: sector %u differs from ubt_csum", i);
	}
	if (ubt_csum_data(fs, data, ss + 1, out) != -EINVAL)
		FAIL("ubt_csum_data accepts a length that is not a multiple of the sector size");
	if (ubt_csum_data(fs, data, 0, NULL) != 0)
		FAIL("ubt_csum_data of nothing fails");
	free(data);
}

/* ---- 2. directed ------------------------------------------------------------- */

/* The item layout must be exactly want[0..n) (start, count pairs). */
static int expect_items(struct ubt_fs *fs, const char *step, const struct item *want, size_t n)
{
	static struct item got[MAX_ITEMS];
	size_t ng;
	int bad = verify(fs, step, got, &ng);

	if (bad)
		return bad;
	bool same = ng == n;
	for (size_t i = 0; same && i < n; i++)
		same = got[i].start == want[i].start && got[i].n == want[i].n;
	if (!same) {
		FAIL("%s: item layout differs", step);
		fprintf(stderr, "  got: ");
		for (size_t i = 0; i < ng && i < 16; i++)
			fprintf(stderr, " (%u,%u)", got[i].start, got[i].n);
		fprintf(stderr, "\n  want:");
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, " (%u,%u)", want[i].start, want[i].n);
		fputc('\n', stderr);
		return 1;
	}
	return 0;
}

#define EXPECT(step, ...)                                                                  \
	do {                                                                               \
		const struct item w_[] = { __VA_ARGS__ };                                  \
		if (expect_items(fs, step, w_, UBT_ARRAY_SIZE(w_)))                        \
			return 1;                                                          \
	} while (0)
#define EXPECT_NONE(step)                                                                  \
	do {                                                                               \
		if (expect_items(fs, step, NULL, 0))                                       \
			return 1;                                                          \
	} while (0)
#define DO(x)                                                                              \
	do {                                                                               \
		if (x)                                                                     \
			return 1;                                                          \
	} while (0)

static int directed(struct ubt_fs *fs)
{
	struct ubt_trans *t;
	const uint32_t M = maxn;
	int ret = ubt_trans_start(fs, &t);

	if (ret) {
		FAIL("start transaction: %s", ubt_strerror(ret));
		return 1;
	}
	/* Arguments. */
	uint8_t c[UBT_CSUM_MAX] = { 0 };
	if (ubt_csum_insert(t, addr(0) + 512, c, 1) != -EINVAL ||
	    ubt_csum_delete(t, addr(0), 512) != -EINVAL ||
	    ubt_csum_delete(t, addr(0) + 512, ss) != -EINVAL ||
	    ubt_csum_insert(t, addr(0), c, 0) != 0 || ubt_csum_delete(t, addr(0), 0) != 0 ||
	    ubt_csum_delete(t, UINT64_MAX - ss + 1, 2ull * ss) != -EINVAL)
		FAIL("argument checks");
	EXPECT_NONE("empty");

	/* Extension of the item ending at the start. */
	DO(do_insert(t, 0, 3, 0));
	DO(do_insert(t, 3, 5, 0));
	EXPECT("extend", { 0, 8 });
	/* Past the maximum: the rest goes into a new item. */
	DO(do_insert(t, 8, M + 10, 0));
	EXPECT("cap", { 0, M }, { M, 18 });
	DO(do_insert(t, M + 19, 5, 0));
	EXPECT("gap", { 0, M }, { M, 18 }, { M + 19, 5 });
	/* Fills the gap by extending the item before it; no merge with the next. */
	DO(do_insert(t, M + 18, 1, 0));
	EXPECT("fill gap", { 0, M }, { M, 19 }, { M + 19, 5 });
	DO(do_insert(t, M + 30, 1, 0));
	/* Every overlap is refused, and nothing changes. */
	DO(do_insert(t, M + 20, 1, -EEXIST));		/* inside an item */
	DO(do_insert(t, M + 25, 10, -EEXIST));		/* reaches an item after */
	DO(do_insert(t, M + 24, 7, -EEXIST));		/* ends on that item's first sector */
	DO(do_insert(t, M - 1, 1, -EEXIST));		/* an item's last sector */
	DO(do_insert(t, M + 23, 2, -EEXIST));		/* starts on an item's last sector */
	DO(do_insert(t, 0, win, -EEXIST));		/* covers everything */
	EXPECT("eexist", { 0, M }, { M, 19 }, { M + 19, 5 }, { M + 30, 1 });
	/* Split, then cut an end and a front, then cross several items. */
	DO(do_delete(t, 10, 10));
	EXPECT("split", { 0, 10 }, { 20, M - 20 }, { M, 19 }, { M + 19, 5 }, { M + 30, 1 });
	DO(do_delete(t, 5, 20));
	EXPECT("cut end and front", { 0, 5 }, { 25, M - 25 }, { M, 19 }, { M + 19, 5 },
	       { M + 30, 1 });
	DO(do_delete(t, 3, M + 19));
	EXPECT("across items", { 0, 3 }, { M + 22, 2 }, { M + 30, 1 });
	DO(do_delete(t, M + 24, 6));
	EXPECT("nothing there", { 0, 3 }, { M + 22, 2 }, { M + 30, 1 });
	DO(commit(fs, &t) || t != NULL);
	EXPECT("committed", { 0, 3 }, { M + 22, 2 }, { M + 30, 1 });

	ret = ubt_trans_start(fs, &t);
	if (ret) {
		FAIL("start transaction: %s", ubt_strerror(ret));
		return 1;
	}
	DO(do_insert(t, 3, M + 19, 0));
	EXPECT("refill", { 0, M }, { M, 22 }, { M + 22, 2 }, { M + 30, 1 });
	/* Exactly one whole item; then the first sector of one, the last of another. */
	DO(do_delete(t, M, 22));
	EXPECT("whole item", { 0, M }, { M + 22, 2 }, { M + 30, 1 });
	DO(do_delete(t, M + 22, 1));
	DO(do_delete(t, M - 1, 1));
	EXPECT("edges", { 0, M - 1 }, { M + 23, 1 }, { M + 30, 1 });
	/* A single-sector item in the middle of a range. */
	DO(do_delete(t, M + 29, 3));
	EXPECT("single", { 0, M - 1 }, { M + 23, 1 });
	/* One sector out of the middle of a full item, and back. */
	DO(do_insert(t, M - 1, 1, 0));
	DO(do_delete(t, M / 2, 1));
	EXPECT("hole", { 0, M / 2 }, { M / 2 + 1, M - M / 2 - 1 }, { M + 23, 1 });
	DO(do_insert(t, M / 2, 1, 0));
	EXPECT("hole filled", { 0, M / 2 + 1 }, { M / 2 + 1, M - M / 2 - 1 }, { M + 23, 1 });
	/* In front of a full item that fills the first leaf: the new item
	 * cannot share that leaf (a split with everything moving right). */
	DO(do_delete(t, 0, win));
	uint32_t room = btrfs_leaf_data_size(fs->nodesize) - (uint32_t)sizeof(struct btrfs_item) - M * cs;
	uint32_t n0 = (room - (uint32_t)sizeof(struct btrfs_item)) / cs + 1;
	DO(do_insert(t, n0, M, 0));
	EXPECT("one full item", { n0, M });
	DO(do_insert(t, 0, n0, 0));
	EXPECT("in front of a full first leaf", { 0, n0 }, { n0, M });
	DO(commit(fs, &t) || t != NULL);
	EXPECT("in front of a full first leaf, committed", { 0, n0 }, { n0, M });
	ret = ubt_trans_start(fs, &t);
	if (ret) {
		FAIL("start transaction: %s", ubt_strerror(ret));
		return 1;
	}
	/* Everything. */
	DO(do_delete(t, 0, win));
	EXPECT_NONE("all gone");
	DO(commit(fs, &t) || t != NULL);
	EXPECT_NONE("all gone, committed");
	return 0;
}

/* ---- 3. random --------------------------------------------------------------- */

static uint32_t rnd_len(void)
{
	switch (rnd_below(8)) {
	case 0: case 1: case 2: return 1 + rnd_below(8);
	case 3: case 4: case 5: return 1 + rnd_below(256);
	case 6: return 1 + rnd_below(1024);		/* up to 4 MiB of 4 KiB sectors */
	default: return 1 + rnd_below(2048);		/* up to 8 MiB */
	}
}

static uint32_t run_end(uint32_t s, bool have)
{
	while (s < win && mhave[s] == have)
		s++;
	return s;
}

static int random_op(struct ubt_trans *t)
{
	uint32_t density = (uint32_t)((uint64_t)present * 100 / win);
	uint32_t r = rnd_below(100);
	uint32_t insert_pct = density < 25 ? 70 : density > 60 ? 25 : 48;

	if (r < insert_pct) {
		uint32_t s = rnd_below(win);
		if (rnd_below(3) == 0 && present) {
			/* Right after existing checksums: the item there grows. */
			s = run_end(s, false);
			s = run_end(s < win ? s : 0, true);
		}
		if (s >= win)
			return 0;
		if (mhave[s]) {
			if (rnd_below(2)) {
				uint32_t n = rnd_len();
				return do_insert(t, s, UBT_MIN(n, win - s), -EEXIST);
			}
			s = run_end(s, true);
			if (s >= win)
				return 0;
		}
		uint32_t free_end = run_end(s, false), n = rnd_len();
		if (rnd_below(12) == 0)
			n = maxn / 2 + rnd_below(2 * maxn);	/* around the per-item maximum */
		if (s + n > free_end) {
			if (free_end < win && rnd_below(4) == 0)
				return do_insert(t, s, UBT_MIN(n, win - s), -EEXIST);
			n = free_end - s;
		}
		return do_insert(t, s, n, 0);
	}
	if (r < 90 || !present) {
		uint32_t s = rnd_below(win), n = rnd_len();
		if (rnd_below(50) == 0)
			n = rnd_below(win / 8) + 1;	/* a big one: leaves and nodes merge */
		return do_delete(t, s, UBT_MIN(n, win - s));
	}
	/* At the edges of a run of checksums (often an item's edges). */
	uint32_t s = rnd_below(win);
	s = run_end(s, false);
	if (s >= win)
		return 0;
	uint32_t e = run_end(s, true);
	uint32_t a = s + (rnd_below(3) == 0 ? rnd_below(2) : 0);
	uint32_t b = e - (rnd_below(3) == 0 && e - a > 1 ? rnd_below(2) : 0);
	if (rnd_below(4) == 0 && a > 0)
		a--;
	if (rnd_below(4) == 0 && b < win)
		b++;
	return b > a ? do_delete(t, a, b - a) : 0;
}

/*
 * Fill about 60% of the window in runs of up to four items' worth with
 * small gaps, committing every 1..6 MiB of data: the tree reaches its full
 * height before the random phase starts.
 */
static int fill(struct ubt_fs *fs)
{
	struct ubt_trans *t = NULL;
	uint32_t s = rnd_below(64);
	unsigned long n_ops = 0;
	int ret;

	while (s < win && present < win / 10 * 6) {
		if (!t) {
			ret = ubt_trans_start(fs, &t);
			if (ret) {
				FAIL("start transaction: %s", ubt_strerror(ret));
				return 1;
			}
		}
		uint32_t n = 1 + rnd_below(4 * maxn);
		n = UBT_MIN(n, win - s);
		if (do_insert(t, s, n, 0))
			return 1;
		s += n + (rnd_below(3) ? rnd_below(64) : 0);
		if (++n_ops % (1 + rnd_below(6)) == 0 || s >= win || present >= win / 10 * 6) {
			if (commit(fs, &t))
				return 1;
		}
	}
	if (t && commit(fs, &t))
		return 1;
	return verify(fs, "filled", NULL, NULL) ? 1 : 0;
}

/*
 * A new filesystem of `mib` MiB in a temporary file (path, 4096 bytes),
 * opened for writing, and an empty model of `window` sectors (0: enough
 * that a dense window needs a tree of height 3 - about 1.5 MiB of
 * checksums with 4 KiB nodes, 12 MiB with 16 KiB).
 */
static int setup(uint32_t nodesize, enum ubtrfs_csum_type type, unsigned mib, uint32_t window,
		 char *path, struct ubt_fs **fs)
{
	const char *tmp = getenv("TMPDIR");
	int ret, fd;

	*fs = NULL;
	snprintf(path, 4096, "%s/csum_stress.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	if (fd < 0) {
		FAIL("mkstemp %s: %s", path, strerror(errno));
		path[0] = 0;
		return 1;
	}
	close(fd);
	image = path;
	const char *devs[1] = { path };
	struct ubtrfs_mkfs_opts mo = { 0 };
	mo.nodesize = nodesize;
	mo.csum_type = type;
	mo.byte_count = (uint64_t)mib << 20;
	ret = ubtrfs_mkfs(devs, 1, &mo);
	if (ret) {
		FAIL("mkfs (nodesize %u, csum type %d): %s", nodesize, type, ubt_strerror(ret));
		return 1;
	}
	ret = open_fs(fs);
	if (ret) {
		FAIL("open for writing: %s", ubt_strerror(ret));
		return 1;
	}
	ss = (*fs)->sectorsize;
	cs = (*fs)->csum_size;
	maxn = ubt_csum_item_max((*fs)->nodesize, cs);
	memset(&st, 0, sizeof(st));
	win = window ? window : (uint32_t)((nodesize < 16384 ? 3u << 19 : 12u << 20) / cs);
	if (win < 65536)
		win = 65536;
	present = 0;
	free(mhave);
	free(mcs);
	mhave = calloc(win, sizeof(bool));
	mcs = calloc(win, cs);
	if (!mhave || !mcs) {
		FAIL("out of memory");
		return 1;
	}
	return 0;
}

/*
 * Close and open the image again.  A transaction still open must have
 * changed nothing (commit() leaves such ones open): it is dropped quietly
 * (an abort, which would make the filesystem read-only, but it is closed).
 */
static int reopen(struct ubt_fs **fs, struct ubt_trans **t)
{
	if (*t) {
		if ((*t)->ndirty) {
			FAIL("reopening with changes not committed");
			return 1;
		}
		ubt_log_set_level(-1);
		ubt_trans_abort(*t, -ECANCELED);
		ubt_log_set_level(UBT_LOG_INFO);
		*t = NULL;
	}
	close_fs(*fs);
	*fs = NULL;
	int ret = open_fs(fs);
	if (ret) {
		FAIL("reopen: %s", ubt_strerror(ret));
		return 1;
	}
	st.reopens++;
	return 0;
}

static int start(struct ubt_fs *fs, struct ubt_trans **t)
{
	int ret = *t ? 0 : ubt_trans_start(fs, t);

	if (ret)
		FAIL("start transaction: %s", ubt_strerror(ret));
	return ret ? 1 : 0;
}

/*
 * Delete everything in `parts` deletes, a transaction each (one sector first:
 * the transaction must change something), commit, reopen: the tree must be
 * empty.  A delete stopped by ENOSPC goes on after a commit.
 */
static int empty_all(struct ubt_fs **fs, struct ubt_trans **t, uint32_t parts)
{
	uint32_t step = (win + parts - 1) / parts;

	for (uint32_t a = 0; a < win; a += step) {
		uint32_t n = UBT_MIN(step, win - a);
		if (start(*fs, t))
			return 1;
		if (!mhave[a] && do_insert(*t, a, 1, 0))
			return 1;
		for (int tries = 0;; tries++) {
			int ret = try_delete(*t, a, n);
			if (ret == 0)
				break;
			if (ret != -ENOSPC || tries == 100) {
				if (ret != -ECANCELED)
					FAIL("delete [%u, %u): %s", a, a + n, ubt_strerror(ret));
				return 1;
			}
			/* Partly done: the commit returns the space it freed. */
			if (verify(*fs, "deleting everything: ENOSPC", NULL, NULL) ||
			    commit(*fs, t) || start(*fs, t))
				return 1;
		}
		if (commit(*fs, t))
			return 1;
		if (*t) {
			FAIL("emptying the tree changed no block");
			return 1;
		}
	}
	if (reopen(fs, t))
		return 1;
	size_t n;
	if (verify(*fs, "emptied", NULL, &n))
		return 1;
	if (n) {
		FAIL("emptied: %zu items left", n);
		return 1;
	}
	return 0;
}

static void finish(struct ubt_fs *fs, struct ubt_trans *t, const char *path)
{
	if (t)
		ubt_trans_abort(t, -ECANCELED);
	if (fs)
		close_fs(fs);
	if (path[0])
		unlink(path);
}

static int run_config(uint32_t nodesize, enum ubtrfs_csum_type type, unsigned long ops,
		      uint64_t seed)
{
	char path[4096];
	struct ubt_fs *fs = NULL;
	struct ubt_trans *t = NULL;
	int before = failures;

	rng_state = seed * 2654435761u + nodesize + (uint64_t)type * 7919 + 1;
	if (setup(nodesize, type, 256, 0, path, &fs))
		goto out;
	check_pure(fs);
	if (directed(fs) || fill(fs))
		goto out;

	unsigned long next_commit = 1 + rnd_below(6);
	allow_held = true;
	for (unsigned long i = 0; i < ops; i++) {
		if (start(fs, &t) || random_op(t))
			goto out;
		if (paranoid) {
			char when[64];
			snprintf(when, sizeof(when), "op %lu (not committed)", i + 1);
			if (verify(fs, when, NULL, NULL))
				goto out;
		}
		bool last = i + 1 == ops;
		if (--next_commit && !last)
			continue;
		next_commit = 1 + rnd_below(6);
		if (commit(fs, &t))
			goto out;
		char when[96];
		snprintf(when, sizeof(when), "op %lu, commit %lu", i + 1, st.commits);
		if (!t && (st.commits % 3 == 0 || last)) {
			if (reopen(&fs, &t))
				goto out;
			strncat(when, ", reopened", sizeof(when) - strlen(when) - 1);
		}
		if (verify(fs, when, NULL, NULL))
			goto out;
	}
	allow_held = false;
	if (empty_all(&fs, &t, 1))
		goto out;
	if (st.held_seen == 0)
		FAIL("no insert was held back (%lu held inserts)", st.held);
	printf("nodesize %5u %-8s (max %4u csums/item): %lu inserts (%lu after existing; %lu "
	       "held, %lu of them waiting after the call), "
	       "%lu EEXIST, %lu deletes, %lu commits (%lu empty skipped), %lu reopens, "
	       "%lu full items seen, tree level up to %lu%s\n",
	       nodesize, ubt_csum_name(type), maxn, st.inserts, st.extends_adjacent, st.held,
	       st.held_seen, st.eexist,
	       st.deletes, st.commits, st.empty_commits, st.reopens, st.max_items_seen,
	       st.max_level, st.enospc_del ? " (the final delete met ENOSPC)" : "");
out:
	allow_held = false;
	finish(fs, t, path);
	return failures != before;
}

/*
 * 5. Running out of metadata space, on a 64 MiB filesystem: insert runs
 * until -ENOSPC - the transaction must stay usable and the tree must be
 * exactly as before the failed insert (its partial work taken back) -
 * commit and go on until an insert fails right after a commit.  Then
 * delete small ranges (splits need new items) committing and retrying on
 * -ENOSPC, and finally everything.
 */
static int enospc_config(uint32_t nodesize, enum ubtrfs_csum_type type, unsigned long ops,
			 uint64_t seed)
{
	char path[4096];
	struct ubt_fs *fs = NULL;
	struct ubt_trans *t = NULL;
	unsigned long enospc_ins = 0, since_commit = 0;
	uint32_t s = 0;
	int before = failures, ret;

	rng_state = seed * 2654435761u + 77;
	if (setup(nodesize, type, 64, 1u << 20, path, &fs))
		goto out;
	for (;;) {
		uint32_t n = 1 + rnd_below(4 * maxn);
		n = UBT_MIN(n, win - s);
		if (s >= win) {
			FAIL("the window filled up before the filesystem");
			goto out;
		}
		if (start(fs, &t))
			goto out;
		ret = try_insert(t, s, n, false);
		if (ret == -ENOSPC) {
			enospc_ins++;
			if (verify(fs, "after ENOSPC (insert taken back)", NULL, NULL))
				goto out;
			if (since_commit == 0)
				break;	/* not even right after a commit */
		} else if (ret) {
			if (ret != -ECANCELED)
				FAIL("insert [%u, %u): %s", s, s + n, ubt_strerror(ret));
			goto out;
		} else {
			s += n + (rnd_below(3) ? rnd_below(64) : 0);
			if (++since_commit % 8)
				continue;
		}
		if (commit(fs, &t))
			goto out;
		since_commit = 0;
	}
	if (commit(fs, &t) || reopen(&fs, &t) || verify(fs, "full, reopened", NULL, NULL))
		goto out;
	uint32_t full = present;

	for (unsigned long i = 0; i < ops; i++) {
		uint32_t a = rnd_below(s), n = 1 + rnd_below(64);
		n = UBT_MIN(n, win - a);
		if (start(fs, &t))
			goto out;
		ret = try_delete(t, a, n);
		if (ret == -ENOSPC) {
			/* The commit returns the space this transaction freed; then
			 * another range.  (A transaction that changed nothing is
			 * not committed: see commit().) */
			if (commit(fs, &t))
				goto out;
			continue;
		}
		if (ret) {
			if (ret != -ECANCELED)
				FAIL("delete [%u, %u): %s", a, a + n, ubt_strerror(ret));
			goto out;
		}
		if ((i + 1) % 16 == 0 && (commit(fs, &t) || verify(fs, "deleting", NULL, NULL)))
			goto out;
	}
	if (commit(fs, &t) || reopen(&fs, &t) || verify(fs, "punched, reopened", NULL, NULL))
		goto out;
	if (!enospc_ins)
		FAIL("the filesystem never filled up");
	/* In 64 transactions: the engine's reservation does not count the
	 * commit's work for the blocks a transaction frees, so one delete of
	 * everything on a full filesystem can make the commit run out of
	 * space (UBTRFS_CSUM_STRESS_EMPTY_PARTS=1 shows it, e.g. seed 5). */
	const char *parts = getenv("UBTRFS_CSUM_STRESS_EMPTY_PARTS");
	if (empty_all(&fs, &t, parts ? (uint32_t)UBT_MAX(atoi(parts), 1) : 64))
		goto out;
	printf("nodesize %5u %-8s ENOSPC: %u sectors' checksums fit a 64 MiB filesystem; "
	       "%lu inserts failed cleanly with ENOSPC, %lu deletes done, %lu stopped by "
	       "ENOSPC (committed, went on), tree level up to %lu\n",
	       nodesize, ubt_csum_name(type), full, enospc_ins, st.deletes, st.enospc_del,
	       st.max_level);
out:
	finish(fs, t, path);
	return failures != before;
}

int main(int argc, char **argv)
{
	const char *quick = getenv("UBTRFS_TEST_QUICK");
	unsigned long ops = quick && *quick && strcmp(quick, "0") ? 120 : 500;
	uint64_t seed = (uint64_t)time(NULL);
	const char *env_seed = getenv("UBTRFS_TEST_SEED");

	if (argc > 3) {
		fprintf(stderr, "usage: csum_stress [OPS [SEED]]\n");
		return 2;
	}
	if (argc > 1)
		ops = strtoul(argv[1], NULL, 0);
	if (env_seed)
		seed = strtoull(env_seed, NULL, 0);
	if (argc > 2)
		seed = strtoull(argv[2], NULL, 0);
	printf("csum_stress: %lu operations per configuration, seed %" PRIu64 "\n", ops, seed);
	fflush(stdout);

	paranoid = getenv("UBTRFS_CSUM_STRESS_PARANOID") != NULL;
	verbose = getenv("UBTRFS_CSUM_STRESS_VERBOSE") != NULL;
	/* UBTRFS_CSUM_STRESS_ONLY=NODESIZE,TYPE (or "enospc") runs one configuration. */
	const char *only = getenv("UBTRFS_CSUM_STRESS_ONLY");
	static const uint32_t nodesizes[] = { 4096, 16384 };
	static const enum ubtrfs_csum_type types[] = { UBTRFS_CSUM_CRC32C, UBTRFS_CSUM_XXHASH,
						       UBTRFS_CSUM_SHA256, UBTRFS_CSUM_BLAKE2 };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(nodesizes); i++) {
		for (size_t k = 0; k < UBT_ARRAY_SIZE(types); k++) {
			char cfg[32];
			snprintf(cfg, sizeof(cfg), "%u,%s", nodesizes[i], ubt_csum_name(types[k]));
			if (only && strcmp(only, cfg))
				continue;
			if (run_config(nodesizes[i], types[k], ops, seed))
				fprintf(stderr, "csum_stress: FAILED with nodesize %u, %s (seed %" PRIu64
					")\n", nodesizes[i], ubt_csum_name(types[k]), seed);
			fflush(stdout);
		}
	}
	if (!only || !strcmp(only, "enospc")) {
		if (enospc_config(4096, UBTRFS_CSUM_SHA256, ops, seed))
			fprintf(stderr, "csum_stress: FAILED running out of space (seed %" PRIu64 ")\n",
				seed);
		fflush(stdout);
	}
	free(mcs);
	free(mhave);
	return failures ? 1 : 0;
}
