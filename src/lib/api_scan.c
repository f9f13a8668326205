/*
 * The public API, part 4: whole-filesystem scans.
 *
 * ubtrfs_any_xattr() reads every leaf of every subvolume tree once (blocks
 * that snapshots share are read once) and says whether any of them holds
 * an XATTR_ITEM.  The FUSE daemon uses the answer on read-only mounts
 * (fuse_ll.c: the xattr scan).
 */
#include <ubtrfs/ubtrfs.h>

#include "api_internal.h"
#include "base/base.h"
#include "fs/fs.h"
#include "tree/tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The tree blocks already scanned: an open-addressing set of addresses. */
struct block_set {
	uint64_t *slot;		/* 0: empty; an address is stored plus one */
	size_t cap, n;
	bool has_max;		/* the address UINT64_MAX (stored as 0 otherwise) */
};

static size_t hash_u64(uint64_t v, size_t cap)
{
	return (size_t)ubt_mix64(v) & (cap - 1);
}

static int set_grow(struct block_set *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024;
	uint64_t *slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		if (!s->slot[i])
			continue;
		size_t h = hash_u64(s->slot[i], cap);
		while (slot[h])
			h = (h + 1) & (cap - 1);
		slot[h] = s->slot[i];
	}
	free(s->slot);
	s->slot = slot;
	s->cap = cap;
	return 0;
}

/* 1: added, 0: was there, <0: error. */
static int set_add(struct block_set *s, uint64_t addr)
{
	if (addr == UINT64_MAX) {
		if (s->has_max)
			return 0;
		s->has_max = true;
		return 1;
	}
	if ((s->n + 1) * 2 > s->cap) {
		int ret = set_grow(s);
		if (ret)
			return ret;
	}
	uint64_t v = addr + 1;
	size_t h = hash_u64(v, s->cap);
	while (s->slot[h]) {
		if (s->slot[h] == v)
			return 0;
		h = (h + 1) & (s->cap - 1);
	}
	s->slot[h] = v;
	s->n++;
	return 1;
}

struct scan {
	struct ubt_fs *fs;
	struct block_set seen;
	int (*stop)(void *ctx);
	void *ctx;
};

static bool leaf_has_xattr(const struct ubt_eb *leaf)
{
	uint32_t n = ubt_eb_nritems(leaf);

	for (uint32_t i = 0; i < n; i++) {
		struct btrfs_key key;
		ubt_eb_item_key(leaf, (int)i, &key);
		if (key.type == BTRFS_XATTR_ITEM_KEY)
			return true;
	}
	return false;
}

/* Depth first over one tree, skipping blocks already scanned.  1: an
 * xattr item found, 0: none, <0: error or -ECANCELED. */
static int scan_tree(struct scan *sc, const struct ubt_root_ref *root)
{
	struct ubt_tree_ctx *t = &sc->fs->tree;
	struct ubt_eb *node[BTRFS_MAX_LEVEL] = { 0 };
	uint32_t next[BTRFS_MAX_LEVEL] = { 0 };
	struct ubt_eb *eb;
	int ret = set_add(&sc->seen, root->bytenr);

	if (ret <= 0)
		return ret;
	ret = ubt_read_root(t, root, &eb);
	if (ret)
		return ret;
	int level = ubt_eb_level(eb);
	if (level >= BTRFS_MAX_LEVEL) {
		ubt_eb_put(t, eb);
		return -EUCLEAN;
	}
	node[level] = eb;
	ret = 0;
	while (level < BTRFS_MAX_LEVEL && node[level]) {
		eb = node[level];
		if (level == 0 || next[level] >= ubt_eb_nritems(eb)) {
			if (level == 0 && leaf_has_xattr(eb))
				ret = 1;
			ubt_eb_put(t, eb);
			node[level] = NULL;
			if (ret)
				break;
			level++;
			continue;
		}
		uint32_t slot = next[level]++;
		int r = set_add(&sc->seen, btrfs_key_ptr_blockptr(ubt_eb_key_ptr(eb, (int)slot)));
		if (r == 0)
			continue;
		if (r < 0 || (sc->stop && sc->stop(sc->ctx))) {
			ret = r < 0 ? r : -ECANCELED;
			break;
		}
		struct ubt_eb *child;
		r = ubt_read_child(t, eb, (int)slot, root->objectid, &child);
		if (r) {
			ret = r;
			break;
		}
		/* The reader checked the level against the pointer's (parent's
		 * minus one), so the walk goes down one step at a time. */
		level--;
		node[level] = child;
		next[level] = 0;
	}
	for (int i = 0; i < BTRFS_MAX_LEVEL; i++)
		if (node[i])
			ubt_eb_put(t, node[i]);
	return ret;
}

static int scan_subvol(struct scan *sc, uint64_t id)
{
	const struct ubt_subvol *sv;

	if (sc->stop && sc->stop(sc->ctx))
		return -ECANCELED;
	int ret = ubt_fs_subvol(sc->fs, id, &sv);

	if (ret == -ENOENT)
		return 0;	/* deleted, not yet cleaned: nothing reaches it */
	if (ret)
		return ret;
	return scan_tree(sc, &sv->root);
}

int ubtrfs_any_xattr(ubtrfs_fs *f, int (*stop)(void *ctx), void *ctx)
{
	if (!f->readonly)
		return -EINVAL;

	struct scan sc = { .fs = f->fs, .stop = stop, .ctx = ctx };
	struct btrfs_key min = { BTRFS_FIRST_FREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_LAST_FREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	uint64_t last = 0;
	struct ubt_iter it;
	int ret;

	ubt_api_rdlock_noerr(f);
	ret = scan_subvol(&sc, BTRFS_FS_TREE_OBJECTID);
	if (ret == 0) {
		/* The root tree's ROOT_ITEMs, one subvolume at a time. */
		int found = 0;
		ubt_iter_start(&it, &sc.fs->tree, &sc.fs->root_tree, &min, &max);
		while (!found && (ret = ubt_iter_next(&it)) == 0) {
			if (it.key.type != BTRFS_ROOT_ITEM_KEY || it.key.objectid == last)
				continue;
			last = it.key.objectid;
			found = scan_subvol(&sc, last);
			if (found < 0)
				ret = found;
		}
		ubt_iter_end(&it);
		if (found > 0)
			ret = 1;
		else if (ret == 1)
			ret = 0;	/* the end of the ROOT_ITEMs: none anywhere */
	}
	ubt_api_unlock(f);
	free(sc.seen.slot);
	return ret;
}
