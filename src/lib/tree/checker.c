/*
 * tree layer: the tree checker - header, leaf layout and node rules.
 *
 * Owns: the validity rules for one raw tree block as a whole - the header
 * against what the parent expects, the leaf item table, node pointers - and
 * the corruption reports.  The bodies of the item types we know are checked
 * by checker_items.c.  The rules follow the Linux kernel's tree-checker
 * (fs/btrfs/tree-checker.c, disk-io.c) and btrfs-progs' Tree-checker.rst,
 * plus a few invariants the kernel leaves unchecked (marked "not a kernel
 * rule" where they are).
 *
 * Invariants:
 *   - nothing outside [block, block + nodesize) is ever read: the leaf item
 *     table is validated completely (pass 1) before any item body is looked
 *     at (pass 2);
 *   - item bodies are checked in slot order and checking stops at the first
 *     error, so a rule that looks at slot - 1 sees a valid item;
 *   - no state, no allocation, no I/O: thread-safe by construction;
 *   - every -EUCLEAN goes through ubt_checker_err() -> ubt_corrupt_at() and
 *     names leaf/node, owner, block address, slot and key; the -EIO class
 *     (not this block) is logged with ubt_log().
 *
 * Locks: none.
 */
#include "tree/checker_int.h"

#include "format/format_names.h"

#include <stdio.h>
#include <string.h>

/* ---- reporting ---------------------------------------------------------- */

static void owner_str(uint64_t owner, char *buf, size_t len)
{
	/* Special trees have ids near 2^64; print those as small negatives. */
	if ((int64_t)owner < 0)
		snprintf(buf, len, "%lld", (long long)(int64_t)owner);
	else
		snprintf(buf, len, "%llu", (unsigned long long)owner);
}

/* slot < 0 leaves slot and key out of the message. */
int ubt_checker_err(const char *file, int line, const struct blk *b, int slot, const char *fmt,
		    ...)
{
	char what[384], owner[24], where[160] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	owner_str(b->owner, owner, sizeof(owner));
	if (slot >= 0 && (uint32_t)slot < b->nritems) {
		/* The key sits at the same offset in item headers and key pointers. */
		size_t stride = b->level ? sizeof(struct btrfs_key_ptr) : ITEM_SIZE;
		const struct btrfs_disk_key *dk =
			(const struct btrfs_disk_key *)(b->buf + HDR_SIZE + (size_t)slot * stride);
		struct btrfs_key key;
		char keybuf[128];

		btrfs_disk_key_to_cpu(&key, dk);
		btrfs_key_str(&key, keybuf, sizeof(keybuf));
		snprintf(where, sizeof(where), " slot=%d %s", slot, keybuf);
	} else if (slot >= 0) {
		snprintf(where, sizeof(where), " slot=%d", slot);
	}
	return ubt_corrupt_at(file, line, b->bytenr, "corrupt %s: root=%s block=%llu%s: %s",
			      b->level == 0 ? "leaf" : "node", owner,
			      (unsigned long long)b->bytenr, where, what);
}

/* ---- context and block decoding ------------------------------------------ */

static int check_ctx(const struct ubt_check_ctx *c)
{
	if (!c)
		return -EINVAL;
	if (!UBT_IS_POW2(c->sectorsize) || c->sectorsize < 512)
		return -EINVAL;
	if (!UBT_IS_POW2(c->nodesize) || c->nodesize < 4096 ||
	    c->nodesize > BTRFS_MAX_METADATA_BLOCKSIZE || c->nodesize < c->sectorsize)
		return -EINVAL;
	if (btrfs_csum_type_size(c->csum_type) == 0)
		return -EINVAL;
	return 0;
}

static void blk_init(struct blk *b, const struct ubt_check_ctx *c, const uint8_t *block)
{
	const struct btrfs_header *h = (const struct btrfs_header *)block;

	b->ctx = c;
	b->buf = block;
	b->bytenr = btrfs_header_bytenr(h);
	b->owner = btrfs_header_owner(h);
	b->generation = btrfs_header_generation(h);
	b->nritems = btrfs_header_nritems(h);
	b->level = btrfs_header_level(h);
}

static void leaf_key(const struct blk *b, uint32_t slot, struct btrfs_key *key)
{
	btrfs_disk_key_to_cpu(key, btrfs_item_key(btrfs_leaf_item(b->buf, slot)));
}

/* ---- header ------------------------------------------------------------- */

void ubt_check_ctx_from_super(struct ubt_check_ctx *c, const struct btrfs_super_block *sb,
			      bool read_only)
{
	memset(c, 0, sizeof(*c));
	c->nodesize = btrfs_super_nodesize(sb);
	c->sectorsize = btrfs_super_sectorsize(sb);
	c->csum_type = btrfs_super_csum_type(sb);
	memcpy(c->fsid, btrfs_super_block_fsid(sb), BTRFS_FSID_SIZE);
	c->incompat_flags = btrfs_super_incompat_flags(sb);
	c->super_generation = btrfs_super_generation(sb);
	c->read_only = read_only;
}

int ubt_tree_block_set_csum(const struct ubt_check_ctx *c, uint8_t *block)
{
	uint8_t sum[UBT_CSUM_MAX];
	int ret = check_ctx(c);

	if (ret)
		return ret;
	ret = ubt_csum(c->csum_type, block + BTRFS_CSUM_SIZE, c->nodesize - BTRFS_CSUM_SIZE, sum);
	if (ret)
		return ret;
	memcpy(block, sum, btrfs_csum_type_size(c->csum_type));
	return 0;
}

static void hex_str(const uint8_t *p, size_t n, char *buf, size_t len)
{
	size_t i;

	buf[0] = '\0';
	for (i = 0; i < n && 2 * i + 2 < len; i++)
		snprintf(buf + 2 * i, len - 2 * i, "%02x", p[i]);
}

/*
 * Owner rule (kernel btrfs_check_eb_owner): blocks of non-subvolume trees
 * carry exactly that tree's id; subvolume blocks may be shared with
 * snapshots, so any subvolume id will do.  Log and reloc trees name the
 * tree they serve elsewhere, so they are not checked.
 */
static int check_owner(const struct blk *b, uint64_t want)
{
	char have_s[24], want_s[24];

	if (want == 0 || want == BTRFS_TREE_LOG_OBJECTID || want == BTRFS_TREE_RELOC_OBJECTID)
		return 0;
	owner_str(b->owner, have_s, sizeof(have_s));
	owner_str(want, want_s, sizeof(want_s));
	if (!chk_is_fstree(want)) {
		if (b->owner != want)
			return BLK_CORRUPT(b, -1, "owner mismatch: have %s, parent tree is %s",
					   have_s, want_s);
		return 0;
	}
	if (!chk_is_fstree(b->owner))
		return BLK_CORRUPT(b, -1,
				   "owner mismatch: have %s, parent is subvolume %s (expect a subvolume)",
				   have_s, want_s);
	return 0;
}

int ubt_check_block_header(const struct ubt_check_ctx *c, const uint8_t *block,
			   const struct ubt_block_expect *exp)
{
	const struct btrfs_header *h = (const struct btrfs_header *)block;
	uint8_t sum[UBT_CSUM_MAX];
	size_t csum_size;
	struct blk b;
	int ret;

	ret = check_ctx(c);
	if (ret)
		return ret;
	if (!block || !exp)
		return -EINVAL;
	blk_init(&b, c, block);
	csum_size = btrfs_csum_type_size(c->csum_type);

	/* -EIO class: this copy is not the block the parent points to. */
	if (b.bytenr != exp->bytenr) {
		ubt_log(UBT_LOG_ERROR, "bad tree block %llu: header bytenr is %llu",
			(unsigned long long)exp->bytenr, (unsigned long long)b.bytenr);
		return -EIO;
	}
	if (memcmp(btrfs_header_fsid(h), c->fsid, BTRFS_FSID_SIZE) != 0) {
		char have[40], want[40];

		hex_str(btrfs_header_fsid(h), BTRFS_FSID_SIZE, have, sizeof(have));
		hex_str(c->fsid, BTRFS_FSID_SIZE, want, sizeof(want));
		ubt_log(UBT_LOG_ERROR, "bad tree block %llu: fsid %s, filesystem has %s",
			(unsigned long long)exp->bytenr, have, want);
		return -EIO;
	}
	ret = ubt_csum(c->csum_type, block + BTRFS_CSUM_SIZE, c->nodesize - BTRFS_CSUM_SIZE, sum);
	if (ret)
		return ret;
	if (memcmp(sum, btrfs_header_csum(h), csum_size) != 0) {
		char have[2 * UBT_CSUM_MAX + 1], want[2 * UBT_CSUM_MAX + 1];

		hex_str(btrfs_header_csum(h), csum_size, have, sizeof(have));
		hex_str(sum, csum_size, want, sizeof(want));
		ubt_log(UBT_LOG_ERROR, "bad tree block %llu: checksum %s, computed %s (%s)",
			(unsigned long long)exp->bytenr, have, want,
			ubt_csum_name(c->csum_type));
		return -EIO;
	}
	if (exp->generation && b.generation != exp->generation) {
		ubt_log(UBT_LOG_ERROR,
			"bad tree block %llu: parent transid verify failed, wanted %llu found %llu",
			(unsigned long long)exp->bytenr, (unsigned long long)exp->generation,
			(unsigned long long)b.generation);
		return -EIO;
	}

	/* -EUCLEAN class: the checksummed content is wrong. */
	if (b.level >= BTRFS_MAX_LEVEL)
		return BLK_CORRUPT(&b, -1, "invalid level %u, expect < %u", b.level,
				   BTRFS_MAX_LEVEL);
	if (!(btrfs_header_flags(h) & BTRFS_HEADER_FLAG_WRITTEN))
		return BLK_CORRUPT(&b, -1, "WRITTEN flag not set");
	if (exp->level >= 0 && b.level != exp->level)
		return BLK_CORRUPT(&b, -1, "level mismatch: have %u, parent expects %d", b.level,
				   exp->level);
	ret = check_owner(&b, exp->owner);
	if (ret)
		return ret;
	if (exp->has_first_key) {
		struct btrfs_key first;
		char want[128], have[128];

		if (b.nritems == 0)
			return BLK_CORRUPT(&b, -1, "empty, parent expects a first key");
		/* Item key and key pointer key both start right after the header. */
		btrfs_disk_key_to_cpu(&first, (const struct btrfs_disk_key *)(block + HDR_SIZE));
		if (btrfs_comp_keys(&first, &exp->first_key) != 0) {
			btrfs_key_str(&exp->first_key, want, sizeof(want));
			btrfs_key_str(&first, have, sizeof(have));
			return BLK_CORRUPT(&b, -1, "first key mismatch: have %s, parent expects %s",
					   have, want);
		}
	}
	return 0;
}

/* ---- leaf --------------------------------------------------------------- */

/* Trees that always hold items (kernel rule), so their leaves can't be empty. */
static int check_empty_leaf(const struct blk *b)
{
	const struct btrfs_header *h = (const struct btrfs_header *)b->buf;
	const uint64_t owner = b->owner;

	/* A reloc tree's blocks carry the owner of the tree they copy. */
	if (btrfs_header_flags(h) & BTRFS_HEADER_FLAG_RELOC)
		return 0;
	if (owner == 0)
		return BLK_CORRUPT(b, -1, "owner 0 is not a tree");
	if (owner == BTRFS_ROOT_TREE_OBJECTID || owner == BTRFS_CHUNK_TREE_OBJECTID ||
	    owner == BTRFS_DEV_TREE_OBJECTID || owner == BTRFS_FS_TREE_OBJECTID ||
	    owner == BTRFS_DATA_RELOC_TREE_OBJECTID)
		return BLK_CORRUPT(b, -1, "empty leaf in a tree that is never empty");
	if (owner == BTRFS_EXTENT_TREE_OBJECTID &&
	    !(b->ctx->incompat_flags & BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2))
		return BLK_CORRUPT(b, -1, "empty extent tree leaf");
	return 0;
}

/*
 * Pass 1: the item table.  Item i's data must end where item i-1's begins
 * (item 0's at the end of the block), and no data may reach into the item
 * headers.  After this every item body lies inside the block.
 */
static int check_leaf_layout(const struct blk *b)
{
	const uint32_t data_size = btrfs_leaf_data_size(b->ctx->nodesize);
	const uint64_t headers_end = (uint64_t)b->nritems * ITEM_SIZE;
	struct btrfs_key prev = { 0, 0, 0 }, key;
	uint32_t expect_end = data_size;

	if (headers_end > data_size)
		return BLK_CORRUPT(b, -1, "nritems %u too large for nodesize %u", b->nritems,
				   b->ctx->nodesize);
	for (uint32_t slot = 0; slot < b->nritems; slot++) {
		const struct btrfs_item *item = btrfs_leaf_item(b->buf, slot);
		uint32_t off = btrfs_item_offset(item), size = btrfs_item_size(item);
		uint64_t end = (uint64_t)off + size;

		leaf_key(b, slot, &key);
		/* No key type is 0 at (0, 0, 0), so prev starts below any key. */
		if (btrfs_comp_keys(&prev, &key) >= 0) {
			char pbuf[128];

			btrfs_key_str(&prev, pbuf, sizeof(pbuf));
			return BLK_CORRUPT(b, (int)slot, "bad key order, previous %s", pbuf);
		}
		if (end != expect_end)
			return BLK_CORRUPT(b, (int)slot,
					   "item data [%u, +%u) ends at %llu, expect %u", off, size,
					   (unsigned long long)end, expect_end);
		if (off < headers_end)
			return BLK_CORRUPT(b, (int)slot,
					   "item data offset %u overlaps item headers ending at %llu",
					   off, (unsigned long long)headers_end);
		expect_end = off;
		prev = key;
	}
	return 0;
}

int ubt_check_leaf(const struct ubt_check_ctx *c, const uint8_t *block)
{
	struct blk b;
	struct item it;
	int ret;

	ret = check_ctx(c);
	if (ret)
		return ret;
	if (!block)
		return -EINVAL;
	blk_init(&b, c, block);
	if (b.level != 0)
		return BLK_CORRUPT(&b, -1, "leaf check on level %u block", b.level);
	if (b.nritems == 0)
		return check_empty_leaf(&b);
	ret = check_leaf_layout(&b);
	if (ret)
		return ret;

	/* Pass 2: item bodies, in slot order. */
	memset(&it, 0, sizeof(it));
	it.b = &b;
	for (uint32_t slot = 0; slot < b.nritems; slot++) {
		it.slot = (int)slot;
		leaf_key(&b, slot, &it.key);
		chk_item_at(&b, slot, &it.data, &it.size);
		ret = ubt_checker_item(&it);
		if (ret)
			return ret;
		it.prev = it.key;
	}
	return 0;
}

/* ---- node --------------------------------------------------------------- */

int ubt_check_node(const struct ubt_check_ctx *c, const uint8_t *block)
{
	struct btrfs_key prev = { 0, 0, 0 }, key;
	uint32_t max_ptrs;
	struct blk b;
	int ret;

	ret = check_ctx(c);
	if (ret)
		return ret;
	if (!block)
		return -EINVAL;
	blk_init(&b, c, block);
	if (b.level == 0 || b.level >= BTRFS_MAX_LEVEL)
		return BLK_CORRUPT(&b, -1, "invalid node level %u, expect 1..%u", b.level,
				   BTRFS_MAX_LEVEL - 1);
	max_ptrs = btrfs_node_ptrs_per_block(c->nodesize);
	if (b.nritems == 0 || b.nritems > max_ptrs)
		return BLK_CORRUPT(&b, -1, "nritems %u, expect 1..%u", b.nritems, max_ptrs);
	for (uint32_t slot = 0; slot < b.nritems; slot++) {
		const struct btrfs_key_ptr *kp = btrfs_node_key_ptr(block, slot);
		uint64_t ptr = btrfs_key_ptr_blockptr(kp);
		uint64_t gen = btrfs_key_ptr_generation(kp);

		btrfs_disk_key_to_cpu(&key, btrfs_key_ptr_key(kp));
		if (slot > 0 && btrfs_comp_keys(&prev, &key) >= 0) {
			char pbuf[128];

			btrfs_key_str(&prev, pbuf, sizeof(pbuf));
			return BLK_CORRUPT(&b, (int)slot, "bad key order, previous %s", pbuf);
		}
		if (ptr == 0)
			return BLK_CORRUPT(&b, (int)slot, "null block pointer");
		if (!chk_aligned(ptr, c->sectorsize))
			return BLK_CORRUPT(&b, (int)slot, "block pointer %llu not aligned to %u",
					   (unsigned long long)ptr, c->sectorsize);
		/*
		 * Not kernel rules: a child is written no later than its parent
		 * (COW copies the path top-down), and generation 0 is never used.
		 */
		if (gen == 0)
			return BLK_CORRUPT(&b, (int)slot, "pointer generation 0");
		if (gen > b.generation)
			return BLK_CORRUPT(&b, (int)slot,
					   "pointer generation %llu newer than node generation %llu",
					   (unsigned long long)gen, (unsigned long long)b.generation);
		prev = key;
	}
	return 0;
}

/* ---- the reader's entry point -------------------------------------------- */

int ubt_check_tree_block(const struct ubt_check_ctx *c, const uint8_t *block,
			 const struct ubt_block_expect *exp)
{
	int ret = ubt_check_block_header(c, block, exp);

	if (ret)
		return ret;
	if (btrfs_header_level((const struct btrfs_header *)block) == 0)
		return ubt_check_leaf(c, block);
	return ubt_check_node(c, block);
}
