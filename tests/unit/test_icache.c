/*
 * unit: the inode cache (fs/icache.c) against a model.
 *
 *   - random puts (new versions of an item, facts set, kept or unknown),
 *     gets, drops, fact forgets and clears over 3,000 keys in two
 *     subvolumes - more than the cache holds, so entries are evicted: a
 *     hit must return the model's latest item for that key, never a
 *     dropped or cleared key, never a fact the model does not hold; a get
 *     right after a put must hit; no more keys hit than the cache holds;
 *   - four threads putting and getting the same keys at once (the readers'
 *     side, under the cache's mutex): every hit is the item that key's
 *     writers put, whole.
 * No root needed.
 */
#include "t.h"

#include "fs/fs.h"

#include <pthread.h>
#include <stdbool.h>

#define NKEYS 3000
#define CAPACITY 8192
#define NTHREADS 4

struct model {
	bool present;
	uint32_t version;
	bool noxattr, noextents;
};

static struct model model[2][NKEYS];

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	return t_xorshift64(&rng_state);
}

/* The item a (subvolume, inode, version) stands for: every byte depends on
 * all three. */
static void make_item(struct btrfs_inode_item *ii, uint64_t subvol, uint64_t ino, uint32_t v)
{
	uint8_t *p = (uint8_t *)ii;
	uint64_t x = subvol * 0x100000001b3ULL ^ ino * 0x9e3779b97f4a7c15ULL ^ v;

	for (size_t i = 0; i < sizeof(*ii); i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (uint8_t)(x >> 56);
	}
}

static uint64_t subvol_of(int s)
{
	return s ? 257 : 5;
}

static uint64_t ino_of(int k)
{
	return 256 + (uint64_t)k;
}

static void model_run(struct ubt_fs *fs)
{
	struct btrfs_inode_item got, want;

	for (int round = 0; round < 200000; round++) {
		int s = (int)(rnd() % 2), k = (int)(rnd() % NKEYS);
		struct model *m = &model[s][k];
		uint64_t sv = subvol_of(s), ino = ino_of(k);
		unsigned op = (unsigned)(rnd() % 100);
		bool nx, ne;

		if (op < 45) {
			int fx = (int)(rnd() % 3) - 1, fe = (int)(rnd() % 3) - 1;
			bool was = m->present;
			m->version++;
			make_item(&want, sv, ino, m->version);
			ubt_icache_put(fs, sv, ino, &want, fx, fe);
			/* A fact kept (-1) survives only if the entry did; the
			 * model keeps it only when the key was present, and a
			 * hit may still have lost it to an eviction. */
			m->noxattr = fx >= 0 ? fx == 1 : was && m->noxattr;
			m->noextents = fe >= 0 ? fe == 1 : was && m->noextents;
			m->present = true;
			CHECK(ubt_icache_get(fs, sv, ino, &got, &nx, &ne));
			CHECK(memcmp(&got, &want, sizeof(got)) == 0);
			if (fx >= 0)
				CHECK_EQ_INT(nx, fx == 1);
			if (fe >= 0)
				CHECK_EQ_INT(ne, fe == 1);
		} else if (op < 85) {
			if (ubt_icache_get(fs, sv, ino, &got, &nx, &ne)) {
				CHECK(m->present);
				make_item(&want, sv, ino, m->version);
				CHECK(memcmp(&got, &want, sizeof(got)) == 0);
				CHECK(!nx || m->noxattr);
				CHECK(!ne || m->noextents);
				CHECK_EQ_INT(ubt_icache_no_xattrs(fs, sv, ino), nx);
			}
		} else if (op < 92) {
			ubt_icache_drop(fs, sv, ino);
			m->present = false;
			CHECK(!ubt_icache_get(fs, sv, ino, &got, &nx, &ne));
		} else if (op < 99) {
			bool fx = rnd() & 1, fe = rnd() & 1;
			ubt_icache_forget_facts(fs, sv, ino, fx, fe);
			if (fx)
				m->noxattr = false;
			if (fe)
				m->noextents = false;
			if (ubt_icache_get(fs, sv, ino, &got, &nx, &ne)) {
				CHECK(!(fx && nx));
				CHECK(!(fe && ne));
			}
		} else if (rnd() % 20 == 0) {
			ubt_icache_clear(fs);
			for (int a = 0; a < 2; a++)
				for (int b = 0; b < NKEYS; b++)
					model[a][b].present = false;
		}
	}

	/* Fill well past the capacity: at most CAPACITY keys can hit. */
	ubt_icache_clear(fs);
	int hits = 0;
	for (int i = 0; i < 3 * CAPACITY; i++) {
		make_item(&want, 999, 1000 + (uint64_t)i, 1);
		ubt_icache_put(fs, 999, 1000 + (uint64_t)i, &want, 1, 1);
	}
	for (int i = 0; i < 3 * CAPACITY; i++) {
		bool nx, ne;
		if (ubt_icache_get(fs, 999, 1000 + (uint64_t)i, &got, &nx, &ne)) {
			hits++;
			make_item(&want, 999, 1000 + (uint64_t)i, 1);
			CHECK(memcmp(&got, &want, sizeof(got)) == 0);
		}
	}
	CHECK(hits <= CAPACITY);
	CHECK(hits >= CAPACITY / 2);	/* the sets fill: most of it is used */
	printf("fill: %d of %d keys cached\n", hits, 3 * CAPACITY);
}

/* Threads: every key's item is fixed (version 1), so any hit must be it. */
static struct ubt_fs *shared_fs;

static void *thread_run(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
	struct btrfs_inode_item got, want;
	long bad = 0;

	for (int i = 0; i < 100000; i++) {
		t_xorshift64(&x);
		uint64_t ino = 256 + x % 20000;
		bool nx, ne;
		if (x & 1) {
			make_item(&want, 5, ino, 1);
			ubt_icache_put(shared_fs, 5, ino, &want, 1, 0);
		} else if (ubt_icache_get(shared_fs, 5, ino, &got, &nx, &ne)) {
			make_item(&want, 5, ino, 1);
			bad += memcmp(&got, &want, sizeof(got)) != 0 || !nx || ne;
		}
	}
	return (void *)bad;
}

int main(void)
{
	struct ubt_fs *fs = calloc(1, sizeof(*fs));

	CHECK(fs != NULL);
	if (!fs)
		return t_finish();
	CHECK_EQ_INT(ubt_icache_init(fs), 0);
	model_run(fs);

	ubt_icache_clear(fs);
	shared_fs = fs;
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		CHECK_EQ_INT(pthread_create(&th[i], NULL, thread_run, (void *)(uintptr_t)(i + 1)), 0);
	long bad = 0;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;
		pthread_join(th[i], &r);
		bad += (long)r;
	}
	CHECK_EQ_INT(bad, 0);

	ubt_icache_destroy(fs);
	free(fs);
	return t_finish();
}
