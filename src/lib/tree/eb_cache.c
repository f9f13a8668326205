/*
 * tree layer: the bounded tree-block cache and verified block reads.
 *
 * Owns: struct ubt_eb lifetime (reference counted), the hash from logical
 * address to block, and the replacement policy that keeps the cache under
 * max_bytes: CLOCK (second chance).  Every cached block sits on one ring; a
 * hit only sets the block's `referenced` bit, and eviction moves the hand
 * round the ring, clearing bits and freeing the first unreferenced block
 * nobody holds.  A hit thus costs a hash lookup and two stores under the
 * lock, where an LRU relinked the block (and touched both neighbours) on
 * every get and put.  A block enters the cache only after the tree checker
 * accepted it against what its parent expects, so everything reachable from
 * the cache is safe to index without further bounds checks.
 *
 * Lock: t->lock guards buckets, the ring, refs and stats.  It is never held
 * during device I/O: two threads missing on the same block both read it and
 * the second insert keeps the first copy.
 */
#include "tree.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A power-of-two table: the mask, not two divisions (a search looks up
 * a block per level; the divisions were half of a lookup's time). */
static size_t bucket_of(const struct ubt_tree_ctx *t, uint64_t start)
{
	return (size_t)ubt_mix64(start) & (t->nbuckets - 1);
}

/*
 * The default bound: 256 MiB, or an eighth of the machine's memory where
 * that is less (at least 64 MiB).  A quarter of it may be dirty before a
 * read-write mount commits early (api_write.c): a transaction that touches
 * blocks all over a large tree (rm -rf of a tree created in another order)
 * then rewrites it a few times rather than dozens.  The cache only grows to
 * its bound when that much metadata is read or changed.
 */
static uint64_t default_cache_bytes(void)
{
	uint64_t def = 256ull << 20, lo = 64ull << 20;
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	if (pages > 0 && psz > 0) {
		uint64_t eighth = (uint64_t)pages * (uint64_t)psz / 8;
		if (eighth < def)
			def = eighth > lo ? eighth : lo;
	}
#endif
	return def;
}

int ubt_tree_ctx_init(struct ubt_tree_ctx *t, struct ubt_volume *vol, uint64_t cache_bytes)
{
	memset(t, 0, sizeof(*t));
	t->vol = vol;
	t->max_bytes = cache_bytes ? cache_bytes : default_cache_bytes();
	/* Never fewer than a few root-to-leaf paths' worth of blocks. */
	if (t->max_bytes < 64ull * vol->nodesize)
		t->max_bytes = 64ull * vol->nodesize;
	size_t want = (size_t)UBT_MAX(t->max_bytes / vol->nodesize, 64);
	t->nbuckets = 64;
	while (t->nbuckets < want)
		t->nbuckets *= 2;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	ubt_check_ctx_from_super(&t->check, &vol->super, !vol->opts.writable);
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void ubt_tree_ctx_destroy(struct ubt_tree_ctx *t)
{
	if (!t->buckets)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct ubt_eb *eb = t->buckets[i];
		while (eb) {
			struct ubt_eb *next = eb->hash_next;
			free(eb);
			eb = next;
		}
	}
	free(t->buckets);
	t->buckets = NULL;
	pthread_mutex_destroy(&t->lock);
}

void ubt_tree_set_exclusive(struct ubt_tree_ctx *t, bool on)
{
	if (on)
		t->excl_owner = pthread_self();
	t->excl = on;
}

bool ubt_tree_exclusive(const struct ubt_tree_ctx *t)
{
	return t->excl && pthread_equal(t->excl_owner, pthread_self());
}

/* The cache's mutex, unless this thread holds the filesystem exclusively. */
static void cache_lock(struct ubt_tree_ctx *t)
{
	if (!ubt_tree_exclusive(t))
		pthread_mutex_lock(&t->lock);
}

static void cache_unlock(struct ubt_tree_ctx *t)
{
	if (!ubt_tree_exclusive(t))
		pthread_mutex_unlock(&t->lock);
}

static void ring_unlink(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	if (eb->clock_next == eb) {
		t->hand = NULL;
	} else {
		eb->clock_prev->clock_next = eb->clock_next;
		eb->clock_next->clock_prev = eb->clock_prev;
		if (t->hand == eb)
			t->hand = eb->clock_next;
	}
	eb->clock_next = eb->clock_prev = NULL;
}

/* Insert just behind the hand: the last block the hand will reach. */
static void ring_insert(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	if (!t->hand) {
		eb->clock_next = eb->clock_prev = eb;
		t->hand = eb;
		return;
	}
	eb->clock_next = t->hand;
	eb->clock_prev = t->hand->clock_prev;
	eb->clock_prev->clock_next = eb;
	t->hand->clock_prev = eb;
}

static void hash_unlink(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	struct ubt_eb **pp = &t->buckets[bucket_of(t, eb->start)];

	while (*pp && *pp != eb)
		pp = &(*pp)->hash_next;
	if (*pp)
		*pp = eb->hash_next;
}

/*
 * Free blocks nobody holds until under the limit.  The hand gives each
 * recently used block a second chance; held blocks are skipped.  At most two
 * turns of the ring: when everything is held, the cache stays over its limit
 * by what the callers hold.  Locked.
 */
static void evict_locked(struct ubt_tree_ctx *t)
{
	uint64_t steps = 2 * t->nblocks;

	while (t->bytes > t->max_bytes && t->hand && steps--) {
		struct ubt_eb *eb = t->hand;
		if (eb->refs > 0 || eb->referenced) {
			eb->referenced = false;
			t->hand = eb->clock_next;
			continue;
		}
		ring_unlink(t, eb);
		hash_unlink(t, eb);
		t->bytes -= eb->len;
		t->nblocks--;
		t->stats.evictions++;
		free(eb);
	}
}

static struct ubt_eb *lookup_locked(struct ubt_tree_ctx *t, uint64_t start)
{
	for (struct ubt_eb *eb = t->buckets[bucket_of(t, start)]; eb; eb = eb->hash_next)
		if (eb->start == start)
			return eb;
	return NULL;
}

void ubt_eb_put(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	if (!eb)
		return;
	cache_lock(t);
	if (--eb->refs == 0) {
		if (eb->unhashed)
			free(eb);
		else if (t->bytes > t->max_bytes)
			evict_locked(t);
	}
	cache_unlock(t);
}

/* Does a cached block satisfy what this parent expects of it? */
static int cached_matches(const struct ubt_eb *eb, const struct ubt_block_expect *exp)
{
	const struct btrfs_header *h = ubt_eb_header(eb);

	if (exp->generation && btrfs_header_generation(h) != exp->generation)
		return UBT_CORRUPT(eb->start, "tree block generation %llu, parent expects %llu",
				   (unsigned long long)btrfs_header_generation(h),
				   (unsigned long long)exp->generation);
	if (exp->level >= 0 && btrfs_header_level(h) != exp->level)
		return UBT_CORRUPT(eb->start, "tree block level %u, parent expects %d",
				   btrfs_header_level(h), exp->level);
	if (exp->has_first_key && btrfs_header_nritems(h) > 0) {
		struct btrfs_key k;
		if (btrfs_header_level(h) == 0)
			ubt_eb_item_key(eb, 0, &k);
		else
			ubt_eb_node_key(eb, 0, &k);
		if (btrfs_comp_keys(&k, &exp->first_key) != 0)
			return UBT_CORRUPT(eb->start, "tree block first key differs from its parent's key");
	}
	return 0;
}

/*
 * Read-around.  A cold walk in a tree (a lookup of every file of a tree in
 * path order, a stat walk, a scan) reads one block after another from the
 * device, each a synchronous read; they lie near each other in the
 * metadata chunks but seldom in the order the walk needs them, so the
 * kernel's read-ahead of the image (which follows sequential reads) often
 * misses.  After a tree block has come from the device, the aligned
 * window of RA_WINDOW bytes around it (copy 1, from the block's chunk on,
 * through the chunks that follow it without a gap) is asked for at once
 * (ubt_volume_willneed: the device mappings): the kernel reads it into the
 * page cache in large requests while we work, and the next blocks of the
 * walk come from memory.  Each window is asked for once while it is
 * remembered (ra_seen, which forgets every UBT_RA_FORGET blocks read); the
 * part of a window that cannot be mapped (a device without a mapping,
 * RAID5/6 chunks, writes a file device still gathers) stops the asking.
 * Measured on a cold `git status` of 40k files (docs/PERFORMANCE.md,
 * thirteenth session): median 0.72 s before, 0.56 s after; most of the
 * difference was time the daemon waited for the disk.
 */
#define RA_WINDOW (512u << 10)
#define UBT_RA_FORGET 4096

static void read_around(struct ubt_tree_ctx *t, uint64_t bytenr)
{
	uint64_t win = bytenr / RA_WINDOW;
	_Atomic uint64_t *seen = &t->ra_seen[win % UBT_RA_SLOTS];

	if (atomic_fetch_add_explicit(&t->ra_reads, 1, memory_order_relaxed) % UBT_RA_FORGET ==
	    UBT_RA_FORGET - 1) {
		for (size_t i = 0; i < UBT_RA_SLOTS; i++)
			atomic_store_explicit(&t->ra_seen[i], 0, memory_order_relaxed);
	}
	if (atomic_exchange_explicit(seen, win + 1, memory_order_relaxed) == win + 1)
		return;
	const struct ubt_chunk *c = ubt_volume_find_chunk(t->vol, bytenr);
	if (!c)
		return;
	uint64_t a = UBT_MAX(win * RA_WINDOW, c->start);
	uint64_t end = win * RA_WINDOW + RA_WINDOW;
	if (end < a)
		end = UINT64_MAX;	/* the last window of the address space */
	ubt_volume_willneed(t->vol, a, end - a);
}

int ubt_read_tree_block(struct ubt_tree_ctx *t, const struct ubt_block_expect *exp,
			struct ubt_eb **out)
{
	uint32_t nodesize = t->vol->nodesize;
	struct ubt_eb *eb, *other;
	int copies, ret = -EIO, first_err = 0;

	*out = NULL;
	if (!UBT_IS_ALIGNED(exp->bytenr, t->vol->sectorsize) || exp->bytenr == 0)
		return UBT_CORRUPT(exp->bytenr, "tree block address not sector aligned");

	cache_lock(t);
	eb = lookup_locked(t, exp->bytenr);
	if (eb) {
		eb->refs++;
		eb->referenced = true;
		t->stats.hits++;
	} else {
		t->stats.misses++;
	}
	cache_unlock(t);
	if (eb) {
		ret = cached_matches(eb, exp);
		if (ret) {
			ubt_eb_put(t, eb);
			return ret;
		}
		*out = eb;
		return 0;
	}

	eb = malloc(sizeof(*eb) + nodesize);
	if (!eb)
		return -ENOMEM;
	memset(eb, 0, sizeof(*eb));
	eb->start = exp->bytenr;
	eb->len = nodesize;
	eb->refs = 1;

	copies = ubt_volume_num_copies(t->vol, exp->bytenr);
	if (copies <= 0) {
		free(eb);
		return UBT_CORRUPT(exp->bytenr, "tree block address is not mapped by any chunk");
	}
	/* Try every copy; a failure is an error only once all have failed,
	 * and a copy on a missing device is skipped without a word. */
	int bad_copies = 0;
	for (int mirror = 1; mirror <= copies; mirror++) {
		ubt_log_demote_begin();
		ret = ubt_volume_read(t->vol, exp->bytenr, eb->data, nodesize, mirror);
		if (ret == 0)
			ret = ubt_check_tree_block(&t->check, eb->data, exp);
		ubt_log_demote_end();
		if (ret == 0) {
			if (bad_copies)
				ubt_log(UBT_LOG_WARNING,
					"tree block %llu: copy %d is good, %d earlier cop%s bad",
					(unsigned long long)exp->bytenr, mirror, bad_copies,
					bad_copies == 1 ? "y was" : "ies were");
			break;
		}
		if (ret == -ENXIO)
			continue;
		char where[160];
		ubt_volume_describe(t->vol, exp->bytenr, mirror, where, sizeof(where));
		ubt_log(UBT_LOG_WARNING, "tree block %llu copy %d/%d on %s: %s",
			(unsigned long long)exp->bytenr, mirror, copies, where, ubt_strerror(ret));
		bad_copies++;
		if (!first_err)
			first_err = ret;
	}
	if (ret) {
		free(eb);
		if (!first_err)
			first_err = -EIO;	/* every copy was on a missing device */
		ubt_log(UBT_LOG_ERROR, "tree block %llu: no good copy (%s)",
			(unsigned long long)exp->bytenr, ubt_strerror(first_err));
		return first_err;
	}
	read_around(t, exp->bytenr);

	cache_lock(t);
	other = lookup_locked(t, exp->bytenr);
	if (other) {
		/* Another thread won the race; use its copy. */
		other->refs++;
		other->referenced = true;
		cache_unlock(t);
		free(eb);
		*out = other;
		return 0;
	}
	size_t b = bucket_of(t, eb->start);
	eb->hash_next = t->buckets[b];
	t->buckets[b] = eb;
	ring_insert(t, eb);
	t->bytes += eb->len;
	t->nblocks++;
	evict_locked(t);
	cache_unlock(t);
	*out = eb;
	return 0;
}

struct ubt_eb *ubt_eb_alloc(struct ubt_tree_ctx *t, uint64_t start)
{
	struct ubt_eb *eb = malloc(sizeof(*eb) + t->vol->nodesize);

	if (!eb)
		return NULL;
	memset(eb, 0, sizeof(*eb));
	eb->start = start;
	eb->len = t->vol->nodesize;
	eb->refs = 1;
	return eb;
}

/* Take eb off the hash and the ring.  Locked. */
static void unpublish_locked(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	ring_unlink(t, eb);
	hash_unlink(t, eb);
	t->bytes -= eb->len;
	t->nblocks--;
	eb->unhashed = true;
}

void ubt_eb_insert(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	cache_lock(t);
	struct ubt_eb *old = lookup_locked(t, eb->start);
	if (old) {
		unpublish_locked(t, old);
		if (old->refs == 0)
			free(old);
	}
	size_t b = bucket_of(t, eb->start);
	eb->hash_next = t->buckets[b];
	t->buckets[b] = eb;
	eb->unhashed = false;
	ring_insert(t, eb);
	t->bytes += eb->len;
	t->nblocks++;
	evict_locked(t);
	cache_unlock(t);
}

void ubt_eb_remove(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	cache_lock(t);
	if (!eb->unhashed && lookup_locked(t, eb->start) == eb)
		unpublish_locked(t, eb);
	cache_unlock(t);
}

void ubt_eb_get(struct ubt_tree_ctx *t, struct ubt_eb *eb)
{
	cache_lock(t);
	eb->refs++;
	cache_unlock(t);
}
