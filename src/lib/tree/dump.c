/*
 * tree layer: walking a whole tree for `dump-tree`: each block printed
 * (print.c) before its children, depth first, in key order, as
 * btrfs-progs does.  A child that cannot be read is reported in the
 * listing and the walk goes on with its siblings.
 */
#include "tree.h"
#include "tree/print.h"

#include "base/base.h"

#include <stdio.h>
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

static int dump_block(struct ubt_tree_ctx *t, const struct ubt_block_expect *exp,
		      const struct ubt_print_ctx *pc, int depth)
{
	struct ubt_eb *eb;
	int ret = ubt_read_tree_block(t, exp, &eb), status = 0;

	if (ret) {
		say(pc, "ERROR: failed to read tree block %llu: %s\n",
		    (unsigned long long)exp->bytenr, ubt_strerror(ret));
		return ret;
	}
	ubt_print_tree_block(pc, eb->data);
	if (ubt_eb_level(eb) > 0 && depth < BTRFS_MAX_LEVEL) {
		uint32_t n = ubt_eb_nritems(eb);
		for (uint32_t i = 0; i < n; i++) {
			const struct btrfs_key_ptr *kp = ubt_eb_key_ptr(eb, (int)i);
			struct ubt_block_expect child = { 0 };
			child.bytenr = btrfs_key_ptr_blockptr(kp);
			child.generation = btrfs_key_ptr_generation(kp);
			child.level = ubt_eb_level(eb) - 1;
			child.has_first_key = true;
			btrfs_disk_key_to_cpu(&child.first_key, &kp->key);
			ret = dump_block(t, &child, pc, depth + 1);
			if (ret && !status)
				status = ret;
		}
	}
	ubt_eb_put(t, eb);
	return status;
}

int ubt_dump_tree(struct ubt_tree_ctx *t, const struct ubt_root_ref *root,
		  const struct ubt_print_ctx *pc)
{
	struct ubt_block_expect exp = { 0 };

	exp.bytenr = root->bytenr;
	exp.generation = root->generation;
	exp.level = root->level;
	return dump_block(t, &exp, pc, 0);
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
