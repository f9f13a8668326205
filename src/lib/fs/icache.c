/*
 * The inode cache: copies of INODE_ITEMs by (subvolume, inode number), so
 * that the stats, permission checks and parent reads that come with every
 * name operation do not search the subvolume's tree again and again.
 *
 * It is filled by ubt_inode_read and kept current by the write engine,
 * which is the only thing that changes a tree while a filesystem is open:
 * every change of an INODE_ITEM (written, inserted, deleted), of an inode's
 * xattrs or of whether it has EXTENT_DATA items goes through the calls
 * below, and an aborted transaction (readers return to the last commit)
 * empties the cache.  Besides the item, an entry may know two facts about
 * the inode's other items, each either known (1) or unknown (0): it has no
 * XATTR_ITEM, it has no EXTENT_DATA item.
 *
 * Shape: 4-way sets, second-chance replacement within a set; 2048 sets
 * (8192 inodes, about 1.5 MiB).  The keys of a set share one cache line,
 * apart from the items, so that a lookup reads one line before the item it
 * finds.  One mutex, skipped by the thread that holds the filesystem
 * exclusively (the tree-block cache's rule).
 *
 * UBTRFS_ICACHE_CHECK=1 in the environment makes every hit search the tree
 * as well and compare: a difference is logged and read as -EUCLEAN (for
 * the tests; it proves no writer was missed).
 */
#include "fs/fs.h"

#include "base/base.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define IC_WAYS 4
#define IC_SETS 2048u

struct ic_key {
	uint64_t subvol, ino;		/* ino 0: free */
};

struct ic_ent {
	struct btrfs_inode_item item;
	uint8_t ref;			/* second chance */
	uint8_t noxattr, noextents;
};

struct ubt_icache {
	struct ic_key keys[IC_SETS][IC_WAYS] __attribute__((aligned(64)));
	struct ic_ent ents[IC_SETS][IC_WAYS];
	uint8_t hand[IC_SETS];
	pthread_mutex_t lock;
	bool check;
};

int ubt_icache_init(struct ubt_fs *fs)
{
	struct ubt_icache *c = aligned_alloc(64, sizeof(*c));

	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	const char *e = getenv("UBTRFS_ICACHE_CHECK");
	c->check = e && *e && strcmp(e, "0") != 0;
	fs->icache = c;
	return 0;
}

void ubt_icache_destroy(struct ubt_fs *fs)
{
	if (!fs->icache)
		return;
	pthread_mutex_destroy(&fs->icache->lock);
	free(fs->icache);
	fs->icache = NULL;
}

bool ubt_icache_checking(const struct ubt_fs *fs)
{
	return fs->icache && fs->icache->check;
}

static void ic_lock(struct ubt_fs *fs)
{
	if (!ubt_tree_exclusive(&fs->tree))
		pthread_mutex_lock(&fs->icache->lock);
}

static void ic_unlock(struct ubt_fs *fs)
{
	if (!ubt_tree_exclusive(&fs->tree))
		pthread_mutex_unlock(&fs->icache->lock);
}

static uint32_t ic_set(uint64_t subvol, uint64_t ino)
{
	return (uint32_t)(ubt_mix64(ino ^ ubt_mix64(subvol)) & (IC_SETS - 1));
}

static struct ic_ent *ic_find(struct ubt_icache *c, uint64_t subvol, uint64_t ino)
{
	uint32_t s = ic_set(subvol, ino);
	const struct ic_key *k = c->keys[s];

	for (int i = 0; i < IC_WAYS; i++)
		if (k[i].ino == ino && k[i].subvol == subvol)
			return &c->ents[s][i];
	return NULL;
}

/* The key of entry e (one of c->ents). */
static struct ic_key *ic_key_of(struct ubt_icache *c, const struct ic_ent *e)
{
	size_t i = (size_t)(e - &c->ents[0][0]);

	return &c->keys[i / IC_WAYS][i % IC_WAYS];
}

bool ubt_icache_get(struct ubt_fs *fs, uint64_t subvol, uint64_t ino,
		    struct btrfs_inode_item *out, bool *noxattr, bool *noextents)
{
	struct ic_ent *e;

	if (!fs->icache || ino == 0)
		return false;
	ic_lock(fs);
	e = ic_find(fs->icache, subvol, ino);
	if (e) {
		*out = e->item;
		e->ref = 1;
		*noxattr = e->noxattr;
		*noextents = e->noextents;
	}
	ic_unlock(fs);
	return e != NULL;
}

void ubt_icache_put(struct ubt_fs *fs, uint64_t subvol, uint64_t ino,
		    const struct btrfs_inode_item *item, int noxattr, int noextents)
{
	struct ubt_icache *c = fs->icache;

	if (!c || ino == 0)
		return;
	ic_lock(fs);
	struct ic_ent *e = ic_find(c, subvol, ino);
	if (!e) {
		uint32_t s = ic_set(subvol, ino);
		struct ic_ent *set = c->ents[s];
		for (int i = 0; i < IC_WAYS && !e; i++)
			if (c->keys[s][i].ino == 0)
				e = &set[i];
		while (!e) {
			struct ic_ent *v = &set[c->hand[s]];
			c->hand[s] = (uint8_t)((c->hand[s] + 1) % IC_WAYS);
			if (v->ref)
				v->ref = 0;
			else
				e = v;
		}
		*ic_key_of(c, e) = (struct ic_key){ subvol, ino };
		e->noxattr = 0;
		e->noextents = 0;
	}
	e->item = *item;
	e->ref = 1;
	if (noxattr >= 0)
		e->noxattr = (uint8_t)noxattr;
	if (noextents >= 0)
		e->noextents = (uint8_t)noextents;
	ic_unlock(fs);
}

void ubt_icache_drop(struct ubt_fs *fs, uint64_t subvol, uint64_t ino)
{
	if (!fs->icache)
		return;
	ic_lock(fs);
	struct ic_ent *e = ic_find(fs->icache, subvol, ino);
	if (e) {
		memset(e, 0, sizeof(*e));
		memset(ic_key_of(fs->icache, e), 0, sizeof(struct ic_key));
	}
	ic_unlock(fs);
}

void ubt_icache_forget_facts(struct ubt_fs *fs, uint64_t subvol, uint64_t ino, bool xattrs,
			     bool extents)
{
	if (!fs->icache)
		return;
	ic_lock(fs);
	struct ic_ent *e = ic_find(fs->icache, subvol, ino);
	if (e) {
		if (xattrs)
			e->noxattr = 0;
		if (extents)
			e->noextents = 0;
	}
	ic_unlock(fs);
}

bool ubt_icache_no_xattrs(struct ubt_fs *fs, uint64_t subvol, uint64_t ino)
{
	bool known = false;

	if (!fs->icache)
		return false;
	ic_lock(fs);
	struct ic_ent *e = ic_find(fs->icache, subvol, ino);
	if (e)
		known = e->noxattr;
	ic_unlock(fs);
	return known;
}

void ubt_icache_clear(struct ubt_fs *fs)
{
	if (!fs->icache)
		return;
	ic_lock(fs);
	memset(fs->icache->keys, 0, sizeof(fs->icache->keys));
	memset(fs->icache->ents, 0, sizeof(fs->icache->ents));
	memset(fs->icache->hand, 0, sizeof(fs->icache->hand));
	ic_unlock(fs);
}
