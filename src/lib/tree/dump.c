/*
 * tree layer: walking a whole tree for `dump-tree`, breadth first in key
 * order as btrfs-progs 6.2 does, each block printed by print.c.  A child that cannot be read is reported in the
 * listing and the walk goes on with its siblings.
 */
#include "tree.h"
#include "tree/print.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(const struct ubt_print_ctx *pc, const char *fmt, ...) UBT_PRINTF(2, 3);
static void say(const struct ubt_print_ctx *pc, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		pc->write(pc->wctx, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

struct expect_list {
	struct ubt_block_expect *v;
	size_t n, cap;
};

static int list_push(struct expect_list *l, const struct ubt_block_expect *e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct ubt_block_expect *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *e;
	return 0;
}

/*
 * Breadth first, as btrfs-progs 6.2 prints by default: the root, then every
 * block of the next level in key order, and so on down to the leaves.
 */
int ubt_dump_tree(struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		  const struct ubt_print_ctx *pc)
{
	struct expect_list cur = { 0 }, next = { 0 };
	struct ubt_block_expect exp = { 0 };
	int status = 0, ret;

	exp.bytenr = root->bytenr;
	exp.generation = root->generation;
	exp.level = root->level;
	ret = list_push(&cur, &exp);
	for (int depth = 0; !ret && cur.n && depth < BTRFS_MAX_LEVEL; depth++) {
		for (size_t i = 0; i < cur.n && !ret; i++) {
			struct ubt_eb *eb;
			int r = ubt_read_tree_block(t, &cur.v[i], &eb);
			if (r) {
				say(pc, "ERROR: failed to read tree block %llu: %s\n",
				    (unsigned long long)cur.v[i].bytenr, ubt_strerror(r));
				if (!status)
					status = r;
				continue;
			}
			ubt_print_tree_block(pc, eb->data);
			uint32_t n = ubt_eb_level(eb) > 0 ? ubt_eb_nritems(eb) : 0;
			for (uint32_t k = 0; k < n && !ret; k++) {
				const struct btrfs_key_ptr *kp = ubt_eb_key_ptr(eb, (int)k);
				struct ubt_block_expect child = { 0 };
				child.bytenr = btrfs_key_ptr_blockptr(kp);
				child.generation = btrfs_key_ptr_generation(kp);
				child.level = ubt_eb_level(eb) - 1;
				child.has_first_key = true;
				btrfs_disk_key_to_cpu(&child.first_key, &kp->key);
				ret = list_push(&next, &child);
			}
			ubt_eb_put(t, eb);
		}
		struct expect_list tmp = cur;
		cur = next;
		next = tmp;
		next.n = 0;
	}
	free(cur.v);
	free(next.v);
	return ret ? ret : status;
}

int ubt_dump_block(struct ubt_tree_ctx *t, uint64_t bytenr, const struct ubt_print_ctx *pc)
{
	struct ubt_block_expect exp = { 0 };
	struct ubt_eb *eb;

	exp.bytenr = bytenr;
	exp.level = -1;
	int ret = ubt_read_tree_block(t, &exp, &eb);
	if (ret)
		return ret;
	ubt_print_tree_block(pc, eb->data);
	ubt_eb_put(t, eb);
	return 0;
}
