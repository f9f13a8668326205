/*
 * mkfs layer: the bulk tree builder.
 *
 * Owns struct mk_tree: an unsorted bag of items while the trees are being
 * described, then sorted, then packed into a shape (which items go in which
 * leaf, which leaves under which node) that depends only on the item sizes.
 * Addresses are assigned by trees.c; serialising a block (mk_tree_write_block
 * in trees.c) then only copies bytes.  Leaves are filled greedily in key
 * order (item headers from the front, data from the back); node levels hold
 * as many pointers as fit, spread evenly over the nodes of a level.
 * No locks: mkfs is single-threaded.
 */
#include "mkfs/mkfs_int.h"

#include <stdlib.h>
#include <string.h>

int mk_tree_add_buf(struct mk_tree *t, uint64_t objectid, uint8_t type, uint64_t offset,
		    uint32_t size, uint8_t **buf)
{
	if (t->nitems == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct mk_item *n = realloc(t->items, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->items = n;
		t->cap = ncap;
	}
	struct mk_item *it = &t->items[t->nitems];
	it->key.objectid = objectid;
	it->key.type = type;
	it->key.offset = offset;
	it->size = size;
	it->data = NULL;
	if (size) {
		it->data = calloc(1, size);
		if (!it->data)
			return -ENOMEM;
	}
	t->nitems++;
	if (buf)
		*buf = it->data;
	return 0;
}

int mk_tree_add(struct mk_tree *t, uint64_t objectid, uint8_t type, uint64_t offset,
		const void *data, uint32_t size)
{
	uint8_t *buf;
	int ret = mk_tree_add_buf(t, objectid, type, offset, size, &buf);

	if (ret == 0 && size)
		memcpy(buf, data, size);
	return ret;
}

void mk_tree_clear_items(struct mk_tree *t)
{
	for (size_t i = 0; i < t->nitems; i++)
		free(t->items[i].data);
	t->nitems = 0;
}

void mk_tree_free(struct mk_tree *t)
{
	mk_tree_clear_items(t);
	free(t->items);
	free(t->blocks);
	t->items = NULL;
	t->blocks = NULL;
	t->cap = t->nblocks = 0;
}

static int item_cmp(const void *a, const void *b)
{
	const struct mk_item *x = a, *y = b;

	return btrfs_comp_keys(&x->key, &y->key);
}

int mk_tree_sort(struct mk_tree *t)
{
	ubt_sort(t->items, t->nitems, sizeof(*t->items), item_cmp);
	for (size_t i = 1; i < t->nitems; i++) {
		if (btrfs_comp_keys(&t->items[i - 1].key, &t->items[i].key) == 0) {
			ubt_log(UBT_LOG_ERROR,
				"mkfs: duplicate key (%llu %u %llu) in tree %lld",
				(unsigned long long)t->items[i].key.objectid, t->items[i].key.type,
				(unsigned long long)t->items[i].key.offset, (long long)t->id);
			return -EEXIST;
		}
	}
	return 0;
}

static int push_block(struct mk_block **v, size_t *n, size_t *cap, const struct mk_block *b)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct mk_block *nv = realloc(*v, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = ncap;
	}
	(*v)[(*n)++] = *b;
	return 0;
}

int mk_tree_pack(struct mk_tree *t, uint32_t nodesize)
{
	const uint32_t space = btrfs_leaf_data_size(nodesize);
	const uint32_t maxptrs = btrfs_node_ptrs_per_block(nodesize);
	struct mk_block *v = NULL;
	size_t n = 0, cap = 0;
	int ret;

	/* Leaves. */
	size_t i = 0;
	do {
		struct mk_block b = { .level = 0, .first = i, .count = 0 };
		uint32_t used = 0;

		if (i < t->nitems)
			b.key = t->items[i].key;
		while (i < t->nitems) {
			uint32_t need = (uint32_t)sizeof(struct btrfs_item) + t->items[i].size;
			if (need > space) {
				ubt_log(UBT_LOG_ERROR, "mkfs: item of %u bytes does not fit a leaf",
					t->items[i].size);
				free(v);
				return -E2BIG;
			}
			if (used + need > space)
				break;
			used += need;
			b.count++;
			i++;
		}
		ret = push_block(&v, &n, &cap, &b);
		if (ret)
			goto fail;
	} while (i < t->nitems);

	/* Nodes, level by level, until one block remains. */
	size_t lvl_first = 0, lvl_count = n;
	int level = 0;
	while (lvl_count > 1) {
		size_t nnodes = (lvl_count + maxptrs - 1) / maxptrs;
		size_t base = lvl_count / nnodes, extra = lvl_count % nnodes;
		size_t child = lvl_first;
		size_t next_first = n;

		level++;
		if (level >= BTRFS_MAX_LEVEL) {
			ret = -E2BIG;
			goto fail;
		}
		for (size_t k = 0; k < nnodes; k++) {
			struct mk_block b = { .level = level, .first = child,
					      .count = base + (k < extra ? 1 : 0) };
			b.key = v[child].key;
			child += b.count;
			ret = push_block(&v, &n, &cap, &b);
			if (ret)
				goto fail;
		}
		lvl_first = next_first;
		lvl_count = nnodes;
	}
	free(t->blocks);
	t->blocks = v;
	t->nblocks = n;
	t->level = level;
	return 0;
fail:
	free(v);
	return ret;
}
