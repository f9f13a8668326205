/*
 * unit: the tree checker (src/lib/tree/checker.c).
 *
 *  1. real blocks: images made by mkfs.btrfs --rootdir (files, dirs, a
 *     symlink, a hard link, a fifo, xattrs) with each checksum type and
 *     nodesize 4, 16 and 64 KiB, skinny and non-skinny metadata; every tree
 *     block dump-tree lists must pass, with the generation and level the
 *     parent node recorded.  Logical addresses map to the image through the
 *     chunk items dump-tree prints; DUP copies are checked too.
 *  2. mutations of real blocks, one rule at a time, checksum recomputed:
 *     each must give -EUCLEAN from the intended rule (the log message is
 *     matched); header mismatches give -EIO; a flipped bit without a new
 *     checksum gives the checksum error.
 *  3. garbage: random blocks and randomly damaged real blocks with valid
 *     checksums never crash (run under ASan/UBSan) and give 0 or an error.
 *  4. optional: the btrfs-progs test images in UBTRFS_TEST_IMAGES (default
 *     tests/images), if present: valid ones pass, and images with a
 *     corruption the tree checker owns are caught.
 *
 * Needs mkfs.btrfs and btrfs (no root): skips without them, fails under
 * UBTRFS_REQUIRE_ORACLE=1.  UBTRFS_CHECKER_IMAGE=path only checks that image
 * and lists every block it rejects (a debugging aid).
 */
#include "t.h"

#include "base/base.h"
#include "format/btrfs_format.h"
#include "format/format_names.h"
#include "tree/checker.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ubtrfs-test-checker-XXXXXX";

/* ---- log capture -------------------------------------------------------- */

static char last_msg[1024];
static int log_count;
static bool log_verbose;

static void capture_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	snprintf(last_msg, sizeof(last_msg), "%s", msg);
	log_count++;
	if (log_verbose)
		fprintf(stderr, "  log[%d]: %s\n", level, msg);
}

/* ---- shell helpers ------------------------------------------------------ */

static int run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static bool have_tools(void)
{
	return run("mkfs.btrfs --version >/dev/null 2>&1") == 0 &&
	       run("btrfs --version >/dev/null 2>&1") == 0;
}

/* ---- image model: chunk map and block list from dump-tree --------------- */

#define MAX_CHUNKS 256
#define MAX_STRIPES 4

struct chunk_ent {
	uint64_t start, len;
	int nstripes;
	uint64_t phys[MAX_STRIPES];
};

struct block_ent {
	uint64_t bytenr;
	uint64_t generation;	/* from the header line */
	uint64_t owner;		/* 0 when not parsed */
	int level;
	uint64_t parent_gen;	/* pointer generation in the parent, 0 if root */
	int parent_level;	/* -1 if root */
};

struct img {
	char path[512];
	int fd;
	struct btrfs_super_block sb;
	struct ubt_check_ctx ctx;
	struct chunk_ent chunks[MAX_CHUNKS];
	int nchunks;
	struct block_ent *blocks;
	size_t nblocks, cap;
};

static uint64_t parse_owner(const char *s)
{
	static const uint64_t ids[] = {
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
		BTRFS_TREE_LOG_OBJECTID, BTRFS_TREE_LOG_FIXUP_OBJECTID, BTRFS_TREE_RELOC_OBJECTID,
		BTRFS_DATA_RELOC_TREE_OBJECTID, BTRFS_EXTENT_CSUM_OBJECTID,
		BTRFS_FREE_SPACE_OBJECTID, BTRFS_FREE_INO_OBJECTID, BTRFS_ORPHAN_OBJECTID,
	};
	char word[64];

	if (sscanf(s, "%63s", word) != 1)
		return 0;
	if (word[0] >= '0' && word[0] <= '9')
		return strtoull(word, NULL, 10);
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		const char *name = btrfs_objectid_name(ids[i], 0);

		if (name && !strcmp(name, word))
			return ids[i];
	}
	return 0;
}

static struct block_ent *find_block(struct img *im, uint64_t bytenr)
{
	for (size_t i = 0; i < im->nblocks; i++)
		if (im->blocks[i].bytenr == bytenr)
			return &im->blocks[i];
	return NULL;
}

static struct block_ent *add_block(struct img *im, uint64_t bytenr)
{
	struct block_ent *b = find_block(im, bytenr);

	if (b)
		return b;
	if (im->nblocks == im->cap) {
		size_t cap = im->cap ? im->cap * 2 : 256;
		struct block_ent *nb = realloc(im->blocks, cap * sizeof(*nb));

		if (!nb)
			abort();
		im->blocks = nb;
		im->cap = cap;
	}
	b = &im->blocks[im->nblocks++];
	memset(b, 0, sizeof(*b));
	b->bytenr = bytenr;
	b->level = -1;
	b->parent_level = -1;
	return b;
}

static int parse_chunks(struct img *im)
{
	char cmd[700], line[512];
	struct chunk_ent *cur = NULL;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "btrfs inspect-internal dump-tree -t chunk '%s' 2>/dev/null",
		 im->path);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *p;
		unsigned long long a, b;
		int idx;

		if ((p = strstr(line, "CHUNK_ITEM ")) && sscanf(p, "CHUNK_ITEM %llu", &a) == 1) {
			cur = im->nchunks < MAX_CHUNKS ? &im->chunks[im->nchunks++] : NULL;
			if (cur) {
				memset(cur, 0, sizeof(*cur));
				cur->start = a;
			}
		} else if (cur && (p = strstr(line, "length ")) && strstr(line, "stripe_len") &&
			   sscanf(p, "length %llu", &a) == 1) {
			cur->len = a;
		} else if (cur && (p = strstr(line, "stripe ")) &&
			   sscanf(p, "stripe %d devid %llu offset %llu", &idx, &b, &a) == 3) {
			if (idx >= 0 && idx < MAX_STRIPES && b == 1) {
				cur->phys[idx] = a;
				if (idx + 1 > cur->nstripes)
					cur->nstripes = idx + 1;
			}
		}
	}
	pclose(f);
	return im->nchunks > 0 ? 0 : -1;
}

static int parse_blocks(struct img *im)
{
	char cmd[700], line[1024];
	int cur_level = -1;	/* level of the node whose pointers we read */
	FILE *f;

	snprintf(cmd, sizeof(cmd), "btrfs inspect-internal dump-tree '%s' 2>/dev/null", im->path);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long bytenr, gen, items;
		unsigned level;
		const char *p;
		struct block_ent *b;

		if (sscanf(line, "leaf %llu items %llu", &bytenr, &items) == 2 &&
		    (p = strstr(line, " generation ")) && sscanf(p, " generation %llu", &gen) == 1) {
			level = 0;
		} else if (sscanf(line, "node %llu level %u items %llu", &bytenr, &level, &items) ==
				   3 &&
			   (p = strstr(line, " generation ")) &&
			   sscanf(p, " generation %llu", &gen) == 1) {
			/* header line of a node */
		} else {
			if (cur_level > 0 && (p = strstr(line, ") block ")) &&
			    sscanf(p, ") block %llu gen %llu", &bytenr, &gen) == 2) {
				b = add_block(im, bytenr);
				b->parent_gen = gen;
				b->parent_level = cur_level;
			}
			continue;
		}
		b = add_block(im, bytenr);
		b->level = (int)level;
		b->generation = gen;
		p = strstr(line, " owner ");
		b->owner = p ? parse_owner(p + 7) : 0;
		cur_level = (int)level;
	}
	pclose(f);
	return im->nblocks > 0 ? 0 : -1;
}

static void img_close(struct img *im)
{
	if (im->fd >= 0)
		close(im->fd);
	im->fd = -1;
	free(im->blocks);
	im->blocks = NULL;
	im->nblocks = im->cap = 0;
}

static int img_open(struct img *im, const char *path)
{
	memset(im, 0, sizeof(*im));
	snprintf(im->path, sizeof(im->path), "%s", path);
	im->fd = open(path, O_RDONLY);
	if (im->fd < 0)
		return -1;
	if (pread(im->fd, &im->sb, sizeof(im->sb), BTRFS_SUPER_INFO_OFFSET) != sizeof(im->sb) ||
	    btrfs_super_magic(&im->sb) != BTRFS_MAGIC)
		goto fail;
	ubt_check_ctx_from_super(&im->ctx, &im->sb, true);
	if (parse_chunks(im) || parse_blocks(im))
		goto fail;
	return 0;
fail:
	img_close(im);
	return -1;
}

/* Physical offset of copy @stripe of @logical, or -1. */
static int64_t img_map(const struct img *im, uint64_t logical, int stripe)
{
	for (int i = 0; i < im->nchunks; i++) {
		const struct chunk_ent *c = &im->chunks[i];

		if (logical >= c->start && logical - c->start < c->len)
			return stripe < c->nstripes ? (int64_t)(c->phys[stripe] + (logical - c->start))
						    : -1;
	}
	return -1;
}

static int img_read(const struct img *im, uint64_t logical, int stripe, uint8_t *buf)
{
	int64_t phys = img_map(im, logical, stripe);
	ssize_t n;

	if (phys < 0)
		return -1;
	n = pread(im->fd, buf, im->ctx.nodesize, phys);
	return n == (ssize_t)im->ctx.nodesize ? 0 : -1;
}

static int img_copies(const struct img *im, uint64_t logical)
{
	for (int i = 0; i < im->nchunks; i++) {
		const struct chunk_ent *c = &im->chunks[i];

		if (logical >= c->start && logical - c->start < c->len)
			return c->nstripes;
	}
	return 0;
}

/* Expectation for a listed block as its parent (or dump-tree) describes it. */
static struct ubt_block_expect block_expect(const struct block_ent *b)
{
	struct ubt_block_expect e;

	memset(&e, 0, sizeof(e));
	e.bytenr = b->bytenr;
	e.generation = b->parent_gen ? b->parent_gen : b->generation;
	e.level = b->parent_level > 0 ? b->parent_level - 1 : b->level;
	e.owner = b->owner;
	return e;
}

struct walk_stats {
	size_t blocks, leaves, nodes, copies, failed;
	bool seen_type[256];
	char first_error[1024];
};

/* Check every listed block (every copy); returns the number rejected. */
static size_t check_all_blocks(struct img *im, struct walk_stats *st, bool report)
{
	uint8_t *buf = malloc(im->ctx.nodesize);

	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < im->nblocks; i++) {
		const struct block_ent *b = &im->blocks[i];
		struct ubt_block_expect e;
		int ncopies;

		if (b->level < 0)
			continue;	/* pointed to but never printed */
		e = block_expect(b);
		ncopies = img_copies(im, b->bytenr);
		st->blocks++;
		if (b->level == 0)
			st->leaves++;
		else
			st->nodes++;
		for (int s = 0; s < ncopies; s++) {
			int ret;

			if (img_read(im, b->bytenr, s, buf)) {
				st->failed++;
				if (report)
					fprintf(stderr, "%s: cannot read block %llu copy %d\n", im->path,
						(unsigned long long)b->bytenr, s);
				continue;
			}
			st->copies++;
			last_msg[0] = '\0';
			ret = ubt_check_tree_block(&im->ctx, buf, &e);
			if (ret) {
				if (!st->failed)
					snprintf(st->first_error, sizeof(st->first_error), "%s",
						 last_msg);
				st->failed++;
				if (report)
					fprintf(stderr, "%s: block %llu copy %d level %d: %s: %s\n",
						im->path, (unsigned long long)b->bytenr, s, b->level,
						ubt_strerror(ret), last_msg);
				continue;
			}
			if (b->level == 0) {
				uint32_t n = btrfs_header_nritems((const struct btrfs_header *)buf);

				for (uint32_t k = 0; k < n; k++)
					st->seen_type[btrfs_disk_key_type(
						btrfs_item_key(btrfs_leaf_item(buf, k)))] = true;
			}
		}
	}
	free(buf);
	return st->failed;
}

/* ---- part 1: images made by mkfs.btrfs ---------------------------------- */

static void write_file(const char *path, size_t size, unsigned seed)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return;
	for (size_t i = 0; i < size; i++)
		fputc((int)((i * 131 + seed * 7 + (i >> 12) * seed) & 0xff), f);
	fclose(f);
}

/* A source tree for --rootdir: inline, regular and empty files, many
 * entries (so 4 KiB trees grow nodes), a symlink, a hard link, a fifo and
 * xattrs (when the temp filesystem takes them). */
static int make_rootdir(const char *dir)
{
	char p[1024], q[1024];

	if (mkdir(dir, 0755))
		return -1;
	snprintf(p, sizeof(p), "%s/small", dir);
	write_file(p, 100, 1);
	snprintf(p, sizeof(p), "%s/empty", dir);
	write_file(p, 0, 2);
	snprintf(p, sizeof(p), "%s/big", dir);
	write_file(p, 300 * 1024 + 123, 3);
	snprintf(p, sizeof(p), "%s/mid", dir);
	write_file(p, 9000, 4);
	snprintf(p, sizeof(p), "%s/small", dir);
	snprintf(q, sizeof(q), "%s/hardlink", dir);
	if (link(p, q))
		return -1;
	snprintf(q, sizeof(q), "%s/symlink", dir);
	if (symlink("small", q))
		return -1;
	snprintf(q, sizeof(q), "%s/fifo", dir);
	if (mkfifo(q, 0644))
		return -1;
	/* Best effort: tmpfs takes user xattrs on recent kernels only. */
	(void)setxattr(p, "user.test", "value", 5, 0);
	(void)setxattr(p, "user.another.attribute", "0123456789abcdef", 16, 0);
	snprintf(p, sizeof(p), "%s/sub", dir);
	if (mkdir(p, 0700))
		return -1;
	for (int i = 0; i < 400; i++) {
		snprintf(q, sizeof(q), "%s/sub/entry-with-a-rather-long-name-%04d", dir, i);
		write_file(q, (size_t)(i % 7) * 700, (unsigned)i);
	}
	/* Many long-named links to one inode overflow INODE_REF into extrefs. */
	snprintf(p, sizeof(p), "%s/links", dir);
	if (mkdir(p, 0755))
		return -1;
	snprintf(p, sizeof(p), "%s/links/target", dir);
	write_file(p, 10, 5);
	for (int i = 0; i < 40; i++) {
		char name[230];

		memset(name, 'L', 200);
		snprintf(name + 200, sizeof(name) - 200, "-%d", i);
		snprintf(q, sizeof(q), "%s/links/%s", dir, name);
		if (link(p, q))
			return -1;
	}
	snprintf(p, sizeof(p), "%s/sub/deeper", dir);
	if (mkdir(p, 0755))
		return -1;
	snprintf(q, sizeof(q), "%s/sub/deeper/file", dir);
	write_file(q, 70000, 9);
	return 0;
}

static int make_image(const char *path, const char *rootdir, const char *opts)
{
	char cmd[2000];
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);

	if (fd < 0)
		return -1;
	if (ftruncate(fd, 300ll << 20) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "mkfs.btrfs -q -f %s --rootdir '%s' '%s' >/dev/null 2>&1", opts,
		 rootdir, path);
	return run(cmd);
}

struct mkfs_case {
	const char *name, *opts;
	unsigned csum_type;
	uint32_t nodesize;
};

static const struct mkfs_case mkfs_cases[] = {
	{ "crc32c-16k", "--csum crc32c", 0, 16384 },
	{ "crc32c-4k", "--csum crc32c -n 4096", 0, 4096 },
	{ "xxhash-4k", "--csum xxhash -n 4096", 1, 4096 },
	{ "sha256-64k", "--csum sha256 -n 65536", 2, 65536 },
	{ "blake2-16k", "--csum blake2 -n 16384", 3, 16384 },
	{ "crc32c-4k-noskinny", "--csum crc32c -n 4096 -O ^skinny-metadata,^no-holes", 0, 4096 },
	{ "xxhash-4k-mixed", "--csum xxhash -n 4096 -M", 1, 4096 },
};

static void test_mkfs_images(const char *rootdir)
{
	for (size_t i = 0; i < UBT_ARRAY_SIZE(mkfs_cases); i++) {
		const struct mkfs_case *mc = &mkfs_cases[i];
		char path[700];
		struct walk_stats st;
		struct img im;

		snprintf(path, sizeof(path), "%s/%s.img", tmpdir, mc->name);
		if (make_image(path, rootdir, mc->opts)) {
			fprintf(stderr, "mkfs failed for %s\n", mc->name);
			CHECK(0);
			continue;
		}
		if (img_open(&im, path)) {
			fprintf(stderr, "cannot model image %s\n", mc->name);
			CHECK(0);
			continue;
		}
		CHECK_EQ_INT(im.ctx.csum_type, mc->csum_type);
		CHECK_EQ_INT(im.ctx.nodesize, mc->nodesize);
		CHECK_EQ_U64(check_all_blocks(&im, &st, true), 0);
		printf("%-20s %zu blocks (%zu leaves, %zu nodes), %zu copies checked\n", mc->name,
		       st.blocks, st.leaves, st.nodes, st.copies);
		CHECK(st.blocks >= 9);
		CHECK(st.copies >= st.blocks);
		/* The content reached the item types the checker knows. */
		CHECK(st.seen_type[BTRFS_INODE_ITEM_KEY]);
		CHECK(st.seen_type[BTRFS_INODE_REF_KEY]);
		CHECK(st.seen_type[BTRFS_DIR_ITEM_KEY]);
		CHECK(st.seen_type[BTRFS_DIR_INDEX_KEY]);
		CHECK(st.seen_type[BTRFS_EXTENT_DATA_KEY]);
		CHECK(st.seen_type[BTRFS_EXTENT_CSUM_KEY]);
		CHECK(st.seen_type[BTRFS_ROOT_ITEM_KEY]);
		CHECK(st.seen_type[BTRFS_CHUNK_ITEM_KEY]);
		CHECK(st.seen_type[BTRFS_DEV_ITEM_KEY]);
		CHECK(st.seen_type[BTRFS_DEV_EXTENT_KEY]);
		CHECK(st.seen_type[BTRFS_BLOCK_GROUP_ITEM_KEY]);
		CHECK(st.seen_type[BTRFS_EXTENT_ITEM_KEY]);
		if (mc->nodesize == 4096) {
			CHECK(st.nodes > 0);
			CHECK(st.seen_type[BTRFS_INODE_EXTREF_KEY]);
		}
		img_close(&im);
	}
}

/* ---- part 2: mutations of real blocks ----------------------------------- */

struct target {
	struct img *im;
	const struct block_ent *be;
	struct ubt_check_ctx ctx;	/* tests may tweak it */
	int slot;
	uint8_t orig[BTRFS_MAX_METADATA_BLOCKSIZE];
	uint8_t buf[BTRFS_MAX_METADATA_BLOCKSIZE];
};

static struct target T;

typedef bool (*item_pred)(const uint8_t *blk, int slot);

static struct btrfs_item *item_hdr(const uint8_t *blk, int slot)
{
	return btrfs_leaf_item(blk, (unsigned)slot);
}

static uint8_t *item_ptr(const uint8_t *blk, int slot)
{
	return btrfs_leaf_item_data(blk, item_hdr(blk, slot));
}

static uint32_t item_len(const uint8_t *blk, int slot)
{
	return btrfs_item_size(item_hdr(blk, slot));
}

static struct btrfs_disk_key *item_dkey(const uint8_t *blk, int slot)
{
	return btrfs_item_key(item_hdr(blk, slot));
}

static uint32_t nritems(const uint8_t *blk)
{
	return btrfs_header_nritems((const struct btrfs_header *)blk);
}

static void set_nritems(uint8_t *blk, uint32_t n)
{
	btrfs_set_header_nritems((struct btrfs_header *)blk, n);
}

static uint32_t leaf_free(const uint8_t *blk)
{
	uint32_t n = nritems(blk);

	if (n == 0)
		return 0;
	return btrfs_item_offset(item_hdr(blk, (int)n - 1)) - n * (uint32_t)sizeof(struct btrfs_item);
}

/*
 * Point T at the first block of the image at @level (leaf: holding an item
 * of @type satisfying @pred) that passes the checker as is.
 */
static bool target_find(struct img *im, int level, int type, item_pred pred)
{
	T.im = im;
	T.ctx = im->ctx;
	for (size_t i = 0; i < im->nblocks; i++) {
		const struct block_ent *b = &im->blocks[i];
		struct ubt_block_expect e = block_expect(b);

		if (b->level < 0 || (level == 0) != (b->level == 0))
			continue;
		if (img_read(im, b->bytenr, 0, T.orig) ||
		    ubt_check_tree_block(&im->ctx, T.orig, &e) != 0)
			continue;
		T.be = b;
		if (level != 0) {
			T.slot = 0;
			return true;
		}
		for (uint32_t s = 0; s < nritems(T.orig); s++) {
			if (type >= 0 && btrfs_disk_key_type(item_dkey(T.orig, (int)s)) != type)
				continue;
			if (pred && !pred(T.orig, (int)s))
				continue;
			T.slot = (int)s;
			return true;
		}
	}
	return false;
}

static uint8_t *target_reset(void)
{
	memcpy(T.buf, T.orig, T.ctx.nodesize);
	T.ctx = T.im->ctx;
	return T.buf;
}

static uint8_t *tdata(void)
{
	return item_ptr(T.buf, T.slot);
}

/*
 * Change the size of item T.slot at its end, moving the data of later
 * items like btrfs truncate/extend does.  Grown bytes are zeroed.
 */
static bool target_resize(uint32_t new_size)
{
	uint8_t *base = T.buf + sizeof(struct btrfs_header);
	uint32_t n = nritems(T.buf);
	struct btrfs_item *it = item_hdr(T.buf, T.slot);
	uint32_t off = btrfs_item_offset(it), size = btrfs_item_size(it);
	uint32_t low = btrfs_item_offset(item_hdr(T.buf, (int)n - 1));
	int64_t delta = (int64_t)new_size - (int64_t)size;
	uint32_t keep = new_size < size ? new_size : size;

	if (delta > 0 && (int64_t)leaf_free(T.buf) < delta)
		return false;
	memmove(base + low - delta, base + low, off + keep - low);
	for (uint32_t s = (uint32_t)T.slot; s < n; s++) {
		struct btrfs_item *x = item_hdr(T.buf, (int)s);

		btrfs_set_item_offset(x, (uint32_t)((int64_t)btrfs_item_offset(x) - delta));
	}
	btrfs_set_item_size(it, new_size);
	if (delta > 0)
		memset(item_ptr(T.buf, T.slot) + size, 0, (size_t)delta);
	return true;
}

/*
 * Insert a new item after T.slot with @key and @size bytes of @data, moving
 * the data of later items down (free space permitting).
 */
static bool target_insert_after(const struct btrfs_key *key, const void *data, uint32_t size)
{
	uint8_t *base = T.buf + sizeof(struct btrfs_header);
	uint32_t n = nritems(T.buf), pos = (uint32_t)T.slot + 1;
	uint32_t top = btrfs_item_offset(item_hdr(T.buf, T.slot));
	uint32_t low = btrfs_item_offset(item_hdr(T.buf, (int)n - 1));
	struct btrfs_item *it;

	if (leaf_free(T.buf) < size + sizeof(struct btrfs_item))
		return false;
	memmove(base + low - size, base + low, top - low);
	for (uint32_t s = pos; s < n; s++) {
		struct btrfs_item *x = item_hdr(T.buf, (int)s);

		btrfs_set_item_offset(x, btrfs_item_offset(x) - size);
	}
	memmove(item_hdr(T.buf, (int)pos + 1), item_hdr(T.buf, (int)pos),
		(n - pos) * sizeof(struct btrfs_item));
	it = item_hdr(T.buf, (int)pos);
	btrfs_cpu_key_to_disk(btrfs_item_key(it), key);
	btrfs_set_item_offset(it, top - size);
	btrfs_set_item_size(it, size);
	memcpy(base + top - size, data, size);
	set_nritems(T.buf, n + 1);
	return true;
}

static void target_expect(const struct ubt_block_expect *e, int want, const char *needle,
			  bool recsum, int line)
{
	int ret;

	if (recsum)
		ubt_tree_block_set_csum(&T.ctx, T.buf);
	last_msg[0] = '\0';
	ret = ubt_check_tree_block(&T.ctx, T.buf, e);
	t_checks++;
	if (ret != want || (needle && !strstr(last_msg, needle))) {
		t_failures++;
		fprintf(stderr, "%s:%d: block %llu slot %d: got %d (%s), want %d with \"%s\"\n",
			__FILE__, line, (unsigned long long)T.be->bytenr, T.slot, ret, last_msg, want,
			needle ? needle : "");
	}
}

#define EXPECT_BAD(needle) do { struct ubt_block_expect e_ = block_expect(T.be); \
	target_expect(&e_, -EUCLEAN, (needle), true, __LINE__); } while (0)
#define EXPECT_OK() do { struct ubt_block_expect e_ = block_expect(T.be); \
	target_expect(&e_, 0, NULL, true, __LINE__); } while (0)
#define EXPECT_RET(e, want, needle, recsum) target_expect((e), (want), (needle), (recsum), __LINE__)

/* Find a target or record a failure naming what was missing. */
#define FIND(im, level, type, pred) find_or_fail((im), (level), (type), (pred), #type, __LINE__)

static bool find_or_fail(struct img *im, int level, int type, item_pred pred, const char *what,
			 int line)
{
	t_checks++;
	if (target_find(im, level, type, pred))
		return true;
	t_failures++;
	fprintf(stderr, "%s:%d: no block with %s in %s\n", __FILE__, line, what, im->path);
	return false;
}

/* ---- predicates --------------------------------------------------------- */

static bool is_fs_leaf(const uint8_t *blk)
{
	return btrfs_header_owner((const struct btrfs_header *)blk) == BTRFS_FS_TREE_OBJECTID;
}

static bool p_fs(const uint8_t *blk, int slot)
{
	return is_fs_leaf(blk);
}

static bool p_fs_not_first(const uint8_t *blk, int slot)
{
	return is_fs_leaf(blk) && slot > 0 && slot + 1 < (int)nritems(blk);
}

static bool p_inline(const uint8_t *blk, int slot)
{
	const struct btrfs_file_extent_item *fi = (const void *)item_ptr(blk, slot);

	return btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_INLINE &&
	       btrfs_file_extent_compression(fi) == BTRFS_COMPRESS_NONE;
}

static bool p_regular(const uint8_t *blk, int slot)
{
	const struct btrfs_file_extent_item *fi = (const void *)item_ptr(blk, slot);

	return btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_REG &&
	       btrfs_file_extent_disk_bytenr(fi) != 0 && slot + 1 < (int)nritems(blk);
}

static bool p_dir_inode(const uint8_t *blk, int slot)
{
	const struct btrfs_inode_item *ii = (const void *)item_ptr(blk, slot);

	return (btrfs_inode_mode(ii) & 0170000) == 0040000;
}

static bool p_first_of_inode(const uint8_t *blk, int slot)
{
	return is_fs_leaf(blk) && slot > 0 && slot + 1 < (int)nritems(blk) &&
	       btrfs_disk_key_objectid(item_dkey(blk, slot - 1)) !=
		       btrfs_disk_key_objectid(item_dkey(blk, slot)) &&
	       btrfs_disk_key_type(item_dkey(blk, slot + 1)) == BTRFS_INODE_REF_KEY;
}

static bool p_room_for_dir_entry(const uint8_t *blk, int slot)
{
	return leaf_free(blk) >= item_len(blk, slot) + 8;
}

static bool p_room_8(const uint8_t *blk, int slot)
{
	return leaf_free(blk) >= 8;
}

static bool p_last(const uint8_t *blk, int slot)
{
	return slot + 1 == (int)nritems(blk);
}

static bool p_last_room(const uint8_t *blk, int slot)
{
	return slot + 1 == (int)nritems(blk) && leaf_free(blk) >= 8;
}

static bool p_tree_block_extent(const uint8_t *blk, int slot)
{
	const struct btrfs_extent_item *ei = (const void *)item_ptr(blk, slot);

	return (btrfs_extent_flags(ei) & BTRFS_EXTENT_FLAG_TREE_BLOCK) && slot + 1 < (int)nritems(blk);
}

static bool p_dup_chunk(const uint8_t *blk, int slot)
{
	const struct btrfs_chunk *c = (const void *)item_ptr(blk, slot);

	return btrfs_chunk_type(c) & BTRFS_BLOCK_GROUP_DUP;
}

static bool p_data_extent(const uint8_t *blk, int slot)
{
	const struct btrfs_extent_item *ei = (const void *)item_ptr(blk, slot);

	return (btrfs_extent_flags(ei) & BTRFS_EXTENT_FLAG_DATA) &&
	       item_len(blk, slot) == 24 + 29 && slot + 1 < (int)nritems(blk) &&
	       item_ptr(blk, slot)[24] == BTRFS_EXTENT_DATA_REF_KEY;
}

static bool p_long_data_extent_then_extent(const uint8_t *blk, int slot)
{
	const struct btrfs_extent_item *ei = (const void *)item_ptr(blk, slot);

	return (btrfs_extent_flags(ei) & BTRFS_EXTENT_FLAG_DATA) &&
	       btrfs_disk_key_offset(item_dkey(blk, slot)) > 4096 &&
	       slot + 1 < (int)nritems(blk) &&
	       btrfs_disk_key_type(item_dkey(blk, slot + 1)) == BTRFS_EXTENT_ITEM_KEY;
}

static bool p_splittable_csum(const uint8_t *blk, int slot)
{
	return item_len(blk, slot) >= 64 && leaf_free(blk) >= 64;
}

static bool p_mixed_bg(const uint8_t *blk, int slot)
{
	const uint64_t mixed = BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA;

	return (btrfs_block_group_flags((const void *)item_ptr(blk, slot)) & mixed) == mixed;
}

static bool p_regular_split(const uint8_t *blk, int slot)
{
	const struct btrfs_file_extent_item *fi = (const void *)item_ptr(blk, slot);

	return p_regular(blk, slot) && btrfs_file_extent_num_bytes(fi) >= 8192 &&
	       leaf_free(blk) >= 53 + 25;
}

static bool p_dev_extent_pair(const uint8_t *blk, int slot)
{
	return slot + 1 < (int)nritems(blk) &&
	       btrfs_disk_key_type(item_dkey(blk, slot + 1)) == BTRFS_DEV_EXTENT_KEY;
}

/* ---- the mutations ------------------------------------------------------ */

static void mutate_header_and_layout(struct img *im)
{
	struct ubt_block_expect e;
	uint8_t *b;

	if (!FIND(im, 0, BTRFS_DIR_ITEM_KEY, p_fs_not_first))
		return;
	b = target_reset();
	EXPECT_OK();

	/* -EIO class */
	e = block_expect(T.be);
	e.bytenr += im->ctx.nodesize;
	EXPECT_RET(&e, -EIO, "header bytenr", false);
	b = target_reset();
	b[im->ctx.nodesize - 1] ^= 0x10;		/* no new checksum */
	e = block_expect(T.be);
	EXPECT_RET(&e, -EIO, "checksum", false);
	b = target_reset();
	b[40] ^= 1;				/* fsid, checksum redone */
	EXPECT_RET(&e, -EIO, "fsid", true);
	b = target_reset();
	e.generation++;
	EXPECT_RET(&e, -EIO, "transid", true);

	/* -EUCLEAN class from the parent's expectations */
	e = block_expect(T.be);
	e.level = 1;
	EXPECT_RET(&e, -EUCLEAN, "level mismatch", true);
	e = block_expect(T.be);
	e.owner = BTRFS_EXTENT_TREE_OBJECTID;
	EXPECT_RET(&e, -EUCLEAN, "owner mismatch", true);
	e.owner = 300;		/* a snapshot may share fs tree blocks */
	EXPECT_RET(&e, 0, NULL, true);
	e = block_expect(T.be);
	e.has_first_key = true;
	btrfs_disk_key_to_cpu(&e.first_key, item_dkey(b, 0));
	EXPECT_RET(&e, 0, NULL, true);
	e.first_key.offset++;
	EXPECT_RET(&e, -EUCLEAN, "first key mismatch", true);

	b = target_reset();
	btrfs_set_header_flags((struct btrfs_header *)b,
			       btrfs_header_flags((struct btrfs_header *)b) & ~BTRFS_HEADER_FLAG_WRITTEN);
	EXPECT_BAD("WRITTEN");
	b = target_reset();
	btrfs_set_header_level((struct btrfs_header *)b, 8);
	e = block_expect(T.be);
	e.level = -1;
	EXPECT_RET(&e, -EUCLEAN, "invalid level 8", true);

	/* an unusable context is the caller's bug */
	b = target_reset();
	T.ctx.nodesize = 3000;
	e = block_expect(T.be);
	EXPECT_RET(&e, -EINVAL, NULL, false);
	T.ctx.nodesize = im->ctx.nodesize;
	T.ctx.csum_type = 9;
	EXPECT_RET(&e, -EINVAL, NULL, false);

	/* leaf layout */
	b = target_reset();
	{
		struct btrfs_disk_key k;

		memcpy(&k, item_dkey(b, T.slot), sizeof(k));
		memcpy(item_dkey(b, T.slot), item_dkey(b, T.slot + 1), sizeof(k));
		memcpy(item_dkey(b, T.slot + 1), &k, sizeof(k));
	}
	EXPECT_BAD("bad key order");
	b = target_reset();
	memcpy(item_dkey(b, T.slot), item_dkey(b, T.slot - 1), sizeof(struct btrfs_disk_key));
	EXPECT_BAD("bad key order");
	b = target_reset();
	btrfs_set_item_offset(item_hdr(b, 1), btrfs_item_offset(item_hdr(b, 1)) - 1);
	EXPECT_BAD("ends at");
	b = target_reset();
	btrfs_set_item_size(item_hdr(b, 0), btrfs_item_size(item_hdr(b, 0)) + 1);
	EXPECT_BAD("ends at");
	b = target_reset();
	btrfs_set_item_offset(item_hdr(b, 0), 0);
	btrfs_set_item_size(item_hdr(b, 0), btrfs_leaf_data_size(im->ctx.nodesize));
	EXPECT_BAD("overlaps item headers");
	b = target_reset();
	set_nritems(b, 0xffff);
	EXPECT_BAD("too large");
	b = target_reset();
	memset(item_hdr(b, (int)nritems(b)), 0, sizeof(struct btrfs_item));
	set_nritems(b, nritems(b) + 1);
	EXPECT_BAD("bad key order");
	b = target_reset();
	set_nritems(b, 0);
	EXPECT_BAD("never empty");		/* an fs tree leaf */
	b = target_reset();
	set_nritems(b, 0);
	btrfs_set_header_owner((struct btrfs_header *)b, 0);
	e = block_expect(T.be);
	e.owner = 0;
	EXPECT_RET(&e, -EUCLEAN, "owner 0", true);
	b = target_reset();
	set_nritems(b, 0);
	btrfs_set_header_owner((struct btrfs_header *)b, BTRFS_CSUM_TREE_OBJECTID);
	EXPECT_RET(&e, 0, NULL, true);		/* an empty csum tree is fine */
}

static void mutate_node(struct img *im)
{
	struct btrfs_key_ptr *kp;
	uint8_t *b;

	if (!FIND(im, 1, -1, NULL))
		return;
	b = target_reset();
	EXPECT_OK();
	kp = btrfs_node_key_ptr(b, 1);
	btrfs_set_key_ptr_blockptr(kp, 0);
	EXPECT_BAD("null block pointer");
	b = target_reset();
	kp = btrfs_node_key_ptr(b, 1);
	btrfs_set_key_ptr_blockptr(kp, btrfs_key_ptr_blockptr(kp) + 512);
	EXPECT_BAD("not aligned");
	b = target_reset();
	kp = btrfs_node_key_ptr(b, 1);
	btrfs_set_key_ptr_generation(kp, 0);
	EXPECT_BAD("generation 0");
	b = target_reset();
	kp = btrfs_node_key_ptr(b, 1);
	btrfs_set_key_ptr_generation(kp, btrfs_header_generation((struct btrfs_header *)b) + 1);
	EXPECT_BAD("newer than node");
	b = target_reset();
	memcpy(btrfs_key_ptr_key(btrfs_node_key_ptr(b, 1)), btrfs_key_ptr_key(btrfs_node_key_ptr(b, 0)),
	       sizeof(struct btrfs_disk_key));
	EXPECT_BAD("bad key order");
	b = target_reset();
	set_nritems(b, 0);
	EXPECT_BAD("nritems 0");
	b = target_reset();
	set_nritems(b, btrfs_node_ptrs_per_block(im->ctx.nodesize) + 1);
	EXPECT_BAD("nritems");
	b = target_reset();
	btrfs_set_header_level((struct btrfs_header *)b, 0);
	{
		struct ubt_block_expect e = block_expect(T.be);

		e.level = -1;
		EXPECT_RET(&e, -EUCLEAN, NULL, true);	/* a node read as a leaf */
	}
}

static void mutate_fs_items(struct img *im)
{
	uint8_t *b;

	/* DIR_ITEM */
	if (FIND(im, 0, BTRFS_DIR_ITEM_KEY, p_fs)) {
		struct btrfs_dir_item *di;

		b = target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_name_len(di, 300);
		EXPECT_BAD("name_len 300 too long");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_dir_name(di)[0] ^= 0x20;
		EXPECT_BAD("name hash");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_disk_key_type(btrfs_dir_location(di), 7);
		EXPECT_BAD("location key type 7");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_disk_key_objectid(btrfs_dir_location(di), 5);
		EXPECT_BAD("location inode 5 out of range");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_type(di, 0);
		EXPECT_BAD("type 0 invalid");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_type(di, BTRFS_FT_XATTR);
		EXPECT_BAD("has type XATTR");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_data_len(di, 1);
		EXPECT_BAD("data_len 1, expect 0");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_name_len(di, (uint16_t)(btrfs_dir_name_len(di) + 1));
		EXPECT_BAD("crosses item end");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_name_len(di, 0);
		EXPECT_BAD("empty name");
		target_reset();
		CHECK(target_resize(29));
		EXPECT_BAD("header at 0 crosses");
		(void)b;
	}
	/* DIR_INDEX: exactly one entry */
	if (FIND(im, 0, BTRFS_DIR_INDEX_KEY, p_room_for_dir_entry)) {
		uint32_t len;

		target_reset();
		len = item_len(T.buf, T.slot);
		CHECK(target_resize(2 * len));
		memcpy(tdata() + len, tdata(), len);
		EXPECT_BAD("holds 2 entries");
	}
	/* XATTR_ITEM */
	if (FIND(im, 0, BTRFS_XATTR_ITEM_KEY, NULL)) {
		struct btrfs_dir_item *di;

		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_data_len(di, 65000);
		EXPECT_BAD("exceeds");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_data_len(di, (uint16_t)(btrfs_dir_data_len(di) + 1));
		EXPECT_BAD("crosses item end");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_disk_key_objectid(btrfs_dir_location(di), 256);
		EXPECT_BAD("xattr location key");
		target_reset();
		di = (struct btrfs_dir_item *)tdata();
		btrfs_set_dir_type(di, BTRFS_FT_REG_FILE);
		EXPECT_BAD("expect XATTR");
	} else {
		printf("note: no xattrs in the image (temp filesystem without user xattrs?)\n");
	}
	/* INODE_ITEM */
	if (FIND(im, 0, BTRFS_INODE_ITEM_KEY, p_dir_inode)) {
		struct btrfs_inode_item *ii;

		target_reset();
		ii = (struct btrfs_inode_item *)tdata();
		btrfs_set_inode_nlink(ii, 2);
		EXPECT_BAD("directory nlink 2");
		target_reset();
		ii = (struct btrfs_inode_item *)tdata();
		btrfs_set_inode_mode(ii, btrfs_inode_mode(ii) & 07777);
		EXPECT_BAD("no valid file type");
		target_reset();
		ii = (struct btrfs_inode_item *)tdata();
		btrfs_set_inode_mode(ii, btrfs_inode_mode(ii) | 0200000);
		EXPECT_BAD("unknown bits");
		target_reset();
		ii = (struct btrfs_inode_item *)tdata();
		btrfs_set_inode_flags(ii, btrfs_inode_flags(ii) | (1ULL << 20));
		EXPECT_BAD("unknown flags");
		target_reset();
		ii = (struct btrfs_inode_item *)tdata();
		btrfs_set_inode_flags(ii, btrfs_inode_flags(ii) | (1ULL << 33));
		EXPECT_OK();				/* read-only context */
		T.ctx.read_only = false;
		EXPECT_BAD("read-only-compat");
		target_reset();
		ii = (struct btrfs_inode_item *)tdata();
		btrfs_set_inode_generation(ii, im->ctx.super_generation + 2);
		EXPECT_BAD("inode generation");
		target_reset();
		ii = (struct btrfs_inode_item *)tdata();
		btrfs_set_inode_transid(ii, im->ctx.super_generation + 1);
		EXPECT_OK();				/* a running transaction */
		btrfs_set_inode_transid(ii, im->ctx.super_generation + 2);
		EXPECT_BAD("inode transid");
		target_reset();
		CHECK(target_resize(159));
		EXPECT_BAD("inode item size 159");
	}
	/* a missing INODE_ITEM: an inode's first item is then not an inode item */
	if (FIND(im, 0, BTRFS_INODE_ITEM_KEY, p_first_of_inode)) {
		target_reset();
		btrfs_set_disk_key_type(item_dkey(T.buf, T.slot), BTRFS_INODE_REF_KEY);
		EXPECT_BAD("inode item missing");
	}
	/* INODE_REF */
	if (FIND(im, 0, BTRFS_INODE_REF_KEY, NULL)) {
		struct btrfs_inode_ref *r;

		target_reset();
		r = (struct btrfs_inode_ref *)tdata();
		btrfs_set_inode_ref_name_len(r, (uint16_t)item_len(T.buf, T.slot));
		EXPECT_BAD("crosses item end");
		target_reset();
		r = (struct btrfs_inode_ref *)tdata();
		btrfs_set_inode_ref_name_len(r, 0);
		EXPECT_BAD("empty name");
		target_reset();
		CHECK(target_resize(10));
		EXPECT_BAD("expect > 10");
	}
	/* INODE_EXTREF */
	if (FIND(im, 0, BTRFS_INODE_EXTREF_KEY, NULL)) {
		struct btrfs_inode_extref *r;

		target_reset();
		r = (struct btrfs_inode_extref *)tdata();
		btrfs_inode_extref_name(r)[0] ^= 1;
		EXPECT_BAD("extref name hash");
		target_reset();
		r = (struct btrfs_inode_extref *)tdata();
		btrfs_set_inode_extref_parent_objectid(r, btrfs_inode_extref_parent_objectid(r) + 1);
		EXPECT_BAD("extref name hash");
		target_reset();
		r = (struct btrfs_inode_extref *)tdata();
		btrfs_set_inode_extref_name_len(r, 256);
		EXPECT_BAD("name_len 256 too long");
		target_reset();
		CHECK(target_resize(17));
		EXPECT_BAD("header at 0 crosses");
		target_reset();
		CHECK(target_resize(0));
		EXPECT_BAD("empty inode extref");
	}
	/* EXTENT_DATA, inline */
	if (FIND(im, 0, BTRFS_EXTENT_DATA_KEY, p_inline)) {
		struct btrfs_file_extent_item *fi;

		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_ram_bytes(fi, btrfs_file_extent_ram_bytes(fi) + 1);
		EXPECT_BAD("ram_bytes");
		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_type(fi, 3);
		EXPECT_BAD("file extent type 3");
		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_compression(fi, 4);
		EXPECT_BAD("compression 4");
		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_compression(fi, BTRFS_COMPRESS_ZSTD);
		EXPECT_OK();		/* compressed inline data has no length to compare */
		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_encryption(fi, 1);
		EXPECT_BAD("encryption 1");
		target_reset();
		CHECK(target_resize(20));
		EXPECT_BAD("item size 20");
	}
	/* EXTENT_DATA, regular */
	if (FIND(im, 0, BTRFS_EXTENT_DATA_KEY, p_regular)) {
		struct btrfs_file_extent_item *fi;

		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_num_bytes(fi, btrfs_file_extent_num_bytes(fi) + 1);
		EXPECT_BAD("num_bytes");
		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_disk_bytenr(fi, btrfs_file_extent_disk_bytenr(fi) + 512);
		EXPECT_BAD("disk_bytenr");
		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_offset(fi, UINT64_MAX - 4095);
		EXPECT_OK();		/* the offset into the extent may be anything aligned */
		target_reset();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot),
					  btrfs_disk_key_offset(item_dkey(T.buf, T.slot)) + 1);
		EXPECT_BAD("file offset");
		target_reset();
		CHECK(target_resize(52));
		EXPECT_BAD("item size 52");
	}
	/* Split a regular extent in two (valid), then make them overlap. */
	if (FIND(im, 0, BTRFS_EXTENT_DATA_KEY, p_regular_split)) {
		struct btrfs_file_extent_item *fi, *fi2;
		uint8_t second[sizeof(struct btrfs_file_extent_item)];
		struct btrfs_key k;
		uint64_t n;

		target_reset();
		fi = (struct btrfs_file_extent_item *)tdata();
		n = btrfs_file_extent_num_bytes(fi);
		memcpy(second, fi, sizeof(second));
		fi2 = (struct btrfs_file_extent_item *)second;
		btrfs_set_file_extent_offset(fi2, btrfs_file_extent_offset(fi) + 4096);
		btrfs_set_file_extent_num_bytes(fi2, n - 4096);
		btrfs_set_file_extent_num_bytes(fi, 4096);
		btrfs_disk_key_to_cpu(&k, item_dkey(T.buf, T.slot));
		k.offset += 4096;
		CHECK(target_insert_after(&k, second, sizeof(second)));
		EXPECT_OK();
		fi = (struct btrfs_file_extent_item *)tdata();
		btrfs_set_file_extent_num_bytes(fi, 8192);
		EXPECT_BAD("previous file extent ends");
		target_reset();
		CHECK(target_insert_after(&k, second, sizeof(second)));
		fi2 = (struct btrfs_file_extent_item *)item_ptr(T.buf, T.slot + 1);
		btrfs_set_file_extent_num_bytes(fi2, UINT64_MAX - 4095);
		EXPECT_BAD("overflows");
	}
}

static void mutate_csum_items(struct img *im)
{
	if (FIND(im, 0, BTRFS_EXTENT_CSUM_KEY, p_last)) {
		target_reset();
		CHECK(target_resize(item_len(T.buf, T.slot) - 1));
		EXPECT_BAD("not a multiple of csum size");
		target_reset();
		btrfs_set_disk_key_objectid(item_dkey(T.buf, T.slot), BTRFS_DATA_RELOC_TREE_OBJECTID);
		EXPECT_BAD("csum item objectid");
		target_reset();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot),
					  btrfs_disk_key_offset(item_dkey(T.buf, T.slot)) + 1);
		EXPECT_BAD("not aligned to sectorsize");
	}
	/* Split a csum item in two (valid), then make the halves overlap. */
	if (FIND(im, 0, BTRFS_EXTENT_CSUM_KEY, p_splittable_csum)) {
		uint32_t cs = btrfs_csum_type_size(im->ctx.csum_type);
		uint32_t size, half;
		struct btrfs_key k;
		uint8_t tail[BTRFS_MAX_METADATA_BLOCKSIZE];

		target_reset();
		size = item_len(T.buf, T.slot);
		half = size / cs / 2 * cs;
		memcpy(tail, tdata() + half, size - half);
		btrfs_disk_key_to_cpu(&k, item_dkey(T.buf, T.slot));
		k.offset += (uint64_t)(half / cs) * im->ctx.sectorsize;
		CHECK(target_resize(half));
		CHECK(target_insert_after(&k, tail, size - half));
		EXPECT_OK();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot + 1), k.offset - im->ctx.sectorsize);
		EXPECT_BAD("previous csum item covers");
	}
}

static void mutate_root_items(struct img *im)
{
	struct btrfs_root_item *ri;

	if (!FIND(im, 0, BTRFS_ROOT_ITEM_KEY, p_room_8))
		return;
	target_reset();
	ri = (struct btrfs_root_item *)tdata();
	btrfs_set_root_level(ri, 8);
	EXPECT_BAD("root level 8");
	target_reset();
	ri = (struct btrfs_root_item *)tdata();
	btrfs_set_root_drop_level(ri, 9);
	EXPECT_BAD("drop_level 9");
	target_reset();
	ri = (struct btrfs_root_item *)tdata();
	btrfs_set_root_bytenr(ri, btrfs_root_bytenr(ri) + 1);
	EXPECT_BAD("root bytenr");
	target_reset();
	ri = (struct btrfs_root_item *)tdata();
	btrfs_set_root_flags(ri, 2);
	EXPECT_BAD("root flags");
	target_reset();
	ri = (struct btrfs_root_item *)tdata();
	btrfs_set_root_generation(ri, im->ctx.super_generation + 2);
	EXPECT_BAD("root generation");
	target_reset();
	CHECK(target_resize(BTRFS_ROOT_ITEM_LEGACY_SIZE));
	EXPECT_OK();				/* the pre-2.6.37 root item */
	target_reset();
	CHECK(target_resize(300));
	EXPECT_BAD("root item size 300");
}

static void mutate_chunk_tree(struct img *im)
{
	struct btrfs_chunk *c;

	if (FIND(im, 0, BTRFS_CHUNK_ITEM_KEY, p_dup_chunk)) {
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_num_stripes(c, (uint16_t)(btrfs_chunk_num_stripes(c) + 1));
		EXPECT_BAD("chunk item size");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_stripe_len(c, 4096);
		EXPECT_BAD("stripe_len 4096");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, btrfs_chunk_type(c) | BTRFS_BLOCK_GROUP_RAID0);
		EXPECT_BAD("several profiles");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, BTRFS_BLOCK_GROUP_DUP);
		EXPECT_BAD("no DATA/METADATA/SYSTEM");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_DATA |
					      BTRFS_BLOCK_GROUP_DUP);
		EXPECT_BAD("system chunk also");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DATA |
					      BTRFS_BLOCK_GROUP_DUP);
		if (im->ctx.incompat_flags & BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS)
			EXPECT_OK();
		else
			EXPECT_BAD("without MIXED_GROUPS");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, btrfs_chunk_type(c) & ~BTRFS_BLOCK_GROUP_PROFILE_MASK);
		EXPECT_BAD("num_stripes:sub_stripes 2:");	/* single with 2 stripes */
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, (btrfs_chunk_type(c) & ~BTRFS_BLOCK_GROUP_PROFILE_MASK) |
					      BTRFS_BLOCK_GROUP_RAID1C3);
		EXPECT_BAD("num_stripes 2 < copies 3");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, (btrfs_chunk_type(c) & ~BTRFS_BLOCK_GROUP_PROFILE_MASK) |
					      BTRFS_BLOCK_GROUP_RAID6);
		EXPECT_BAD("== parity");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, btrfs_chunk_type(c) | (1ULL << 20));
		EXPECT_BAD("unknown bits");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_sector_size(c, 512);
		EXPECT_BAD("sector_size 512");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_length(c, 0);
		EXPECT_BAD("chunk length 0");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_length(c, 1ULL << 50);
		EXPECT_BAD("too large");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_stripe_offset(btrfs_chunk_stripe(c, 1),
					btrfs_stripe_offset_nr(c, 1) + 512);
		EXPECT_BAD("stripe 1 offset");
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_num_stripes(c, 0);
		EXPECT_BAD("no stripes");
		target_reset();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot),
					  btrfs_disk_key_offset(item_dkey(T.buf, T.slot)) + 512);
		EXPECT_BAD("chunk start");
		target_reset();
		CHECK(target_resize(40));
		EXPECT_BAD("chunk item size 40");
	}
	if (FIND(im, 0, BTRFS_DEV_ITEM_KEY, NULL)) {
		struct btrfs_dev_item *di;

		target_reset();
		di = (struct btrfs_dev_item *)tdata();
		btrfs_set_dev_item_devid(di, 2);
		EXPECT_BAD("devid 2 differs");
		target_reset();
		di = (struct btrfs_dev_item *)tdata();
		btrfs_set_dev_item_bytes_used(di, btrfs_dev_item_total_bytes(di) + 1);
		EXPECT_BAD("bytes_used");
		target_reset();
		CHECK(target_resize(97));
		EXPECT_BAD("dev item size 97");
	}
}

/* Mixed block groups: DATA|METADATA is valid only with MIXED_GROUPS. */
static void mutate_mixed(struct img *im)
{
	const uint64_t mixed = BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA;
	struct btrfs_chunk *c;

	CHECK(im->ctx.incompat_flags & BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS);
	if (FIND(im, 0, BTRFS_CHUNK_ITEM_KEY, NULL)) {
		target_reset();
		c = (struct btrfs_chunk *)tdata();
		btrfs_set_chunk_type(c, (btrfs_chunk_type(c) & ~BTRFS_BLOCK_GROUP_TYPE_MASK) | mixed);
		EXPECT_OK();
		T.ctx.incompat_flags &= ~BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS;
		EXPECT_BAD("without MIXED_GROUPS");
	}
	if (FIND(im, 0, BTRFS_BLOCK_GROUP_ITEM_KEY, p_mixed_bg)) {
		target_reset();
		EXPECT_OK();
	}
}

static void mutate_extent_tree(struct img *im, bool skinny)
{
	if (FIND(im, 0, BTRFS_BLOCK_GROUP_ITEM_KEY, p_room_8)) {
		struct btrfs_block_group_item *bg;

		target_reset();
		bg = (struct btrfs_block_group_item *)tdata();
		btrfs_set_block_group_used(bg, btrfs_disk_key_offset(item_dkey(T.buf, T.slot)) + 1);
		EXPECT_BAD("used");
		target_reset();
		bg = (struct btrfs_block_group_item *)tdata();
		btrfs_set_block_group_flags(bg, btrfs_block_group_flags(bg) | BTRFS_BLOCK_GROUP_RAID0 |
							BTRFS_BLOCK_GROUP_RAID1);
		EXPECT_BAD("several profiles");
		target_reset();
		bg = (struct btrfs_block_group_item *)tdata();
		btrfs_set_block_group_flags(bg, 0);
		EXPECT_BAD("type 0x0 invalid");
		target_reset();
		bg = (struct btrfs_block_group_item *)tdata();
		btrfs_set_block_group_chunk_objectid(bg, 257);
		EXPECT_BAD("chunk_objectid 257");
		target_reset();
		CHECK(target_resize(25));
		EXPECT_BAD("block group item size 25");
	}
	if (skinny && FIND(im, 0, BTRFS_METADATA_ITEM_KEY, p_room_8)) {
		struct btrfs_extent_item *ei;

		target_reset();
		ei = (struct btrfs_extent_item *)tdata();
		btrfs_set_extent_flags(ei, BTRFS_EXTENT_FLAG_DATA | BTRFS_EXTENT_FLAG_TREE_BLOCK);
		EXPECT_BAD("exactly one of DATA, TREE_BLOCK");
		target_reset();
		ei = (struct btrfs_extent_item *)tdata();
		btrfs_set_extent_refs(ei, 0);
		EXPECT_BAD("< inline refs 1");
		target_reset();
		ei = (struct btrfs_extent_item *)tdata();
		btrfs_set_extent_generation(ei, im->ctx.super_generation + 2);
		EXPECT_BAD("extent generation");
		target_reset();
		tdata()[24] = 99;
		EXPECT_BAD("unknown type 99");
		target_reset();
		tdata()[24] = BTRFS_EXTENT_DATA_REF_KEY;
		EXPECT_BAD(NULL);		/* a 29-byte ref in a 9-byte slot */
		target_reset();
		CHECK(target_resize(item_len(T.buf, T.slot) + 1));
		EXPECT_BAD("crosses item end");
		target_reset();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot), 9);
		EXPECT_BAD("metadata item level 9");
		target_reset();
		T.ctx.incompat_flags &= ~BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA;
		EXPECT_BAD("without SKINNY_METADATA");
	}
	/* non-skinny: tree blocks are EXTENT_ITEMs with a tree_block_info */
	if (!skinny && FIND(im, 0, BTRFS_EXTENT_ITEM_KEY, p_tree_block_extent)) {
		struct btrfs_tree_block_info *info;

		target_reset();
		info = (struct btrfs_tree_block_info *)(tdata() + 24);
		btrfs_set_tree_block_info_level(info, 8);
		EXPECT_BAD("tree block info level 8");
		target_reset();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot), 2ULL * im->ctx.nodesize);
		EXPECT_BAD("expect nodesize");
		target_reset();
		CHECK(target_resize(24 + 10));
		EXPECT_BAD("lacks block info");
	}
	if (FIND(im, 0, BTRFS_EXTENT_ITEM_KEY, p_data_extent)) {
		struct btrfs_extent_item *ei;
		struct btrfs_extent_data_ref *dref;

		target_reset();
		dref = (struct btrfs_extent_data_ref *)(tdata() + 24 + 1);
		btrfs_set_extent_data_ref_root(dref, BTRFS_EXTENT_TREE_OBJECTID);
		EXPECT_BAD("cannot own data");
		target_reset();
		dref = (struct btrfs_extent_data_ref *)(tdata() + 24 + 1);
		btrfs_set_extent_data_ref_count(dref, 0);
		EXPECT_BAD("data ref count 0");
		target_reset();
		dref = (struct btrfs_extent_data_ref *)(tdata() + 24 + 1);
		btrfs_set_extent_data_ref_offset(dref, 100);
		EXPECT_BAD("data ref offset 100");
		target_reset();
		dref = (struct btrfs_extent_data_ref *)(tdata() + 24 + 1);
		btrfs_set_extent_data_ref_objectid(dref, 5);
		EXPECT_BAD("data ref inode 5");
		target_reset();
		ei = (struct btrfs_extent_item *)tdata();
		btrfs_set_extent_flags(ei, btrfs_extent_flags(ei) | BTRFS_BLOCK_FLAG_FULL_BACKREF);
		EXPECT_BAD("FULL_BACKREF");
		target_reset();
		tdata()[24] = BTRFS_TREE_BLOCK_REF_KEY;
		EXPECT_BAD(NULL);	/* a 9-byte ref then garbage */
		target_reset();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot),
					  btrfs_disk_key_offset(item_dkey(T.buf, T.slot)) + 1);
		EXPECT_BAD("data extent length");
		target_reset();
		ei = (struct btrfs_extent_item *)tdata();
		btrfs_set_extent_flags(ei, BTRFS_EXTENT_FLAG_TREE_BLOCK);
		EXPECT_BAD(NULL);
	}
	if (target_find(im, 0, BTRFS_EXTENT_ITEM_KEY, p_long_data_extent_then_extent)) {
		struct btrfs_disk_key *next;

		target_reset();
		next = item_dkey(T.buf, T.slot + 1);
		btrfs_set_disk_key_objectid(next, btrfs_disk_key_objectid(item_dkey(T.buf, T.slot)) +
							  im->ctx.sectorsize);
		EXPECT_BAD("previous extent ends");
	} else {
		printf("note: no long data extent followed by another; overlap rule not exercised\n");
	}
}

static void mutate_dev_tree(struct img *im)
{
	struct btrfs_dev_extent *de;

	if (FIND(im, 0, BTRFS_DEV_EXTENT_KEY, p_dev_extent_pair)) {
		target_reset();
		de = (struct btrfs_dev_extent *)tdata();
		btrfs_set_dev_extent_chunk_tree(de, 4);
		EXPECT_BAD("chunk_tree 4");
		target_reset();
		de = (struct btrfs_dev_extent *)tdata();
		btrfs_set_dev_extent_chunk_objectid(de, 255);
		EXPECT_BAD("chunk_objectid 255");
		target_reset();
		de = (struct btrfs_dev_extent *)tdata();
		btrfs_set_dev_extent_length(de, btrfs_dev_extent_length(de) + 1);
		EXPECT_BAD("length");
		target_reset();
		de = (struct btrfs_dev_extent *)tdata();
		btrfs_set_dev_extent_chunk_offset(de, btrfs_dev_extent_chunk_offset(de) + 1);
		EXPECT_BAD("chunk_offset");
		target_reset();
		de = (struct btrfs_dev_extent *)tdata();
		btrfs_set_dev_extent_length(de, btrfs_disk_key_offset(item_dkey(T.buf, T.slot + 1)) -
							btrfs_disk_key_offset(item_dkey(T.buf, T.slot)) +
							im->ctx.sectorsize);
		T.slot++;
		EXPECT_BAD("previous dev extent ends");
		T.slot--;
		target_reset();
		CHECK(target_resize(47));
		EXPECT_BAD("dev extent size 47");
	}
}

static void mutate_misc_trees(struct img *im)
{
	if (FIND(im, 0, BTRFS_FREE_SPACE_INFO_KEY, NULL)) {
		struct btrfs_free_space_info *fsi;

		target_reset();
		fsi = (struct btrfs_free_space_info *)tdata();
		btrfs_set_free_space_info_extent_count(fsi, 0x7fffffff);
		EXPECT_BAD("extent count");
		target_reset();
		fsi = (struct btrfs_free_space_info *)tdata();
		btrfs_set_free_space_info_flags(fsi, 4);
		EXPECT_BAD("flags 0x4");
		target_reset();
		btrfs_set_disk_key_offset(item_dkey(T.buf, T.slot), 0);
		EXPECT_BAD(NULL);
	}
	if (FIND(im, 0, BTRFS_FREE_SPACE_EXTENT_KEY, p_last_room)) {
		target_reset();
		CHECK(target_resize(1));
		EXPECT_BAD("free space extent size 1");
	}
	/* RAID_STRIPE items need the RAID_STRIPE_TREE feature. */
	if (FIND(im, 0, BTRFS_UUID_KEY_SUBVOL, p_last_room)) {
		/* Past any uuid half, so the key order holds. */
		struct btrfs_key k = { UINT64_MAX - 4095, BTRFS_RAID_STRIPE_KEY, 4096 };
		uint8_t stride[16] = { 1 };

		target_reset();
		CHECK(target_insert_after(&k, stride, sizeof(stride)));
		EXPECT_BAD("without RAID_STRIPE_TREE");
		T.ctx.incompat_flags |= BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE;
		EXPECT_OK();
		btrfs_set_disk_key_objectid(item_dkey(T.buf, T.slot + 1), UINT64_MAX - 511);
		EXPECT_BAD("not sector aligned");
	}
	if (FIND(im, 0, BTRFS_UUID_KEY_SUBVOL, p_room_8)) {
		target_reset();
		CHECK(target_resize(item_len(T.buf, T.slot) + 4));
		EXPECT_BAD("not a multiple of 8");
		target_reset();
		CHECK(target_resize(item_len(T.buf, T.slot) + 8));
		EXPECT_OK();
	}
}

/* ---- part 3: garbage ------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	return t_xorshift64(&rng);
}

struct garbage_stats {
	size_t runs, ok, bad;
};

static void garbage_check(const struct ubt_check_ctx *c, uint8_t *blk, uint64_t bytenr,
			  struct garbage_stats *gs)
{
	struct ubt_block_expect e;
	int ret;

	memset(&e, 0, sizeof(e));
	e.bytenr = bytenr;
	e.level = -1;
	ubt_tree_block_set_csum(c, blk);
	ret = ubt_check_tree_block(c, blk, &e);
	gs->runs++;
	if (ret == 0)
		gs->ok++;
	else
		gs->bad++;
	if (ret != 0 && ret != -EUCLEAN) {
		t_checks++;
		t_failures++;
		fprintf(stderr, "garbage block gave %d (%s)\n", ret, last_msg);
	}
}

static void set_header(const struct ubt_check_ctx *c, uint8_t *blk, uint64_t bytenr,
		       uint8_t level, uint32_t n, uint64_t owner)
{
	struct btrfs_header *h = (struct btrfs_header *)blk;

	memcpy(btrfs_header_fsid(h), c->fsid, BTRFS_FSID_SIZE);
	btrfs_set_header_bytenr(h, bytenr);
	btrfs_set_header_flags(h, BTRFS_HEADER_FLAG_WRITTEN |
				  ((uint64_t)BTRFS_MIXED_BACKREF_REV << BTRFS_BACKREF_REV_SHIFT));
	btrfs_set_header_generation(h, 1 + rnd() % 20);
	btrfs_set_header_owner(h, owner);
	btrfs_set_header_nritems(h, n);
	btrfs_set_header_level(h, level);
}

static const uint8_t known_types[] = {
	BTRFS_INODE_ITEM_KEY, BTRFS_INODE_REF_KEY, BTRFS_INODE_EXTREF_KEY, BTRFS_XATTR_ITEM_KEY,
	BTRFS_ORPHAN_ITEM_KEY, BTRFS_DIR_LOG_ITEM_KEY, BTRFS_DIR_LOG_INDEX_KEY,
	BTRFS_DIR_ITEM_KEY, BTRFS_DIR_INDEX_KEY, BTRFS_EXTENT_DATA_KEY, BTRFS_EXTENT_CSUM_KEY,
	BTRFS_ROOT_ITEM_KEY, BTRFS_ROOT_BACKREF_KEY, BTRFS_ROOT_REF_KEY, BTRFS_EXTENT_ITEM_KEY,
	BTRFS_METADATA_ITEM_KEY, BTRFS_TREE_BLOCK_REF_KEY, BTRFS_EXTENT_DATA_REF_KEY,
	BTRFS_SHARED_BLOCK_REF_KEY, BTRFS_SHARED_DATA_REF_KEY, BTRFS_BLOCK_GROUP_ITEM_KEY,
	BTRFS_FREE_SPACE_INFO_KEY, BTRFS_FREE_SPACE_EXTENT_KEY, BTRFS_FREE_SPACE_BITMAP_KEY,
	BTRFS_DEV_EXTENT_KEY, BTRFS_DEV_ITEM_KEY, BTRFS_CHUNK_ITEM_KEY, BTRFS_QGROUP_STATUS_KEY,
	BTRFS_QGROUP_INFO_KEY, BTRFS_QGROUP_LIMIT_KEY, BTRFS_QGROUP_RELATION_KEY,
	BTRFS_DEV_REPLACE_KEY, BTRFS_UUID_KEY_SUBVOL, BTRFS_UUID_KEY_RECEIVED_SUBVOL,
	BTRFS_RAID_STRIPE_KEY, BTRFS_EXTENT_OWNER_REF_KEY, 7,
};

/* A leaf whose item table is valid and whose keys and bodies are random. */
static void random_layout_leaf(const struct ubt_check_ctx *c, uint8_t *blk, uint64_t bytenr)
{
	uint32_t data_size = btrfs_leaf_data_size(c->nodesize);
	uint32_t n = 1 + (uint32_t)(rnd() % 40), end = data_size;
	uint64_t objectid = rnd() % 3 ? 256 + rnd() % 4 : rnd();
	uint64_t owners[] = { 5, 1, 2, 3, 4, 7, 10, 256, BTRFS_TREE_LOG_OBJECTID };

	for (uint32_t i = 0; i < c->nodesize; i++)
		blk[i] = (uint8_t)(rnd() % 4 ? rnd() % 4 : rnd());
	set_header(c, blk, bytenr, 0, n, owners[rnd() % UBT_ARRAY_SIZE(owners)]);
	for (uint32_t s = 0; s < n; s++) {
		struct btrfs_item *it = btrfs_leaf_item(blk, s);
		uint32_t room = end - n * (uint32_t)sizeof(struct btrfs_item);
		uint32_t size = (uint32_t)(rnd() % 200);
		struct btrfs_key k;

		if (size > room)
			size = room;
		k.objectid = objectid;
		k.type = known_types[s % 5 == 0 ? rnd() % UBT_ARRAY_SIZE(known_types) :
						  (s * 7 + objectid) % UBT_ARRAY_SIZE(known_types)];
		k.offset = rnd() % 2 ? rnd() : rnd() % 8 * 4096;
		btrfs_cpu_key_to_disk(btrfs_item_key(it), &k);
		btrfs_set_item_offset(it, end - size);
		btrfs_set_item_size(it, size);
		end -= size;
		objectid += 1 + rnd() % 2;
	}
}

static void test_garbage(struct img *im, size_t iters)
{
	const struct ubt_check_ctx *c = &im->ctx;
	uint8_t *blk = malloc(c->nodesize);
	struct garbage_stats gs = { 0, 0, 0 };
	const uint64_t bytenr = 1ULL << 30;

	/* a) random bytes under a plausible header */
	for (size_t i = 0; i < iters; i++) {
		uint32_t n;

		for (uint32_t k = 0; k < c->nodesize; k += 8) {
			uint64_t v = rnd();

			memcpy(blk + k, &v, 8);
		}
		n = rnd() % 4 ? (uint32_t)(rnd() % 64) : (uint32_t)rnd();
		set_header(c, blk, bytenr, (uint8_t)(rnd() % 3 ? 0 : rnd() % 10), n, rnd() % 12);
		garbage_check(c, blk, bytenr, &gs);
	}
	/* b) valid item tables with random keys and bodies */
	for (size_t i = 0; i < iters; i++) {
		random_layout_leaf(c, blk, bytenr);
		garbage_check(c, blk, bytenr, &gs);
	}
	/* c) real blocks with a few random bytes changed */
	for (size_t i = 0; i < iters && im->nblocks; i++) {
		const struct block_ent *b = &im->blocks[rnd() % im->nblocks];
		int flips = 1 + (int)(rnd() % 8);

		if (b->level < 0 || img_read(im, b->bytenr, 0, blk))
			continue;
		for (int f = 0; f < flips; f++) {
			uint32_t pos = (uint32_t)sizeof(struct btrfs_header) +
				       (uint32_t)(rnd() % (c->nodesize - sizeof(struct btrfs_header)));

			/* aim at the item table half of the time */
			if (rnd() % 2)
				pos = (uint32_t)sizeof(struct btrfs_header) + (uint32_t)(rnd() % 400);
			blk[pos] = (uint8_t)rnd();
		}
		if (rnd() % 16 == 0)
			btrfs_set_header_nritems((struct btrfs_header *)blk, (uint32_t)rnd());
		garbage_check(c, blk, b->bytenr, &gs);
	}
	printf("garbage (nodesize %u): %zu blocks, %zu accepted, %zu rejected\n", c->nodesize,
	       gs.runs, gs.ok, gs.bad);
	CHECK(gs.bad > 0);
	free(blk);
}

/* ---- part 4: the btrfs-progs test images --------------------------------- */

struct shared_case {
	const char *file;
	bool clean;		/* every block must pass */
	const char *needle;	/* for damaged ones: a message that must appear */
};

/*
 * Clean images must check clean.  Damaged ones are listed only where the
 * damage is inside one block and so is the tree checker's to find (the
 * others break rules across trees: missing items, wrong counts).  064 is an
 * error for btrfs check only because the inode cache is deprecated; each of
 * its blocks is valid.
 */
static const struct shared_case shared_cases[] = {
	{ "fsck/019-non-skinny-false-alert/default_case.img.xz", true, NULL },
	{ "fsck/020-extent-ref-cases/block_group_item_false_alert.raw.xz", true, NULL },
	{ "fsck/020-extent-ref-cases/extent_data_ref.img", true, NULL },
	{ "fsck/020-extent-ref-cases/inline_regular_coexist.img", true, NULL },
	{ "fsck/020-extent-ref-cases/keyed_block_ref.img", true, NULL },
	{ "fsck/020-extent-ref-cases/keyed_data_ref.img", true, NULL },
	{ "fsck/020-extent-ref-cases/keyed_data_ref_only.img", true, NULL },
	{ "fsck/020-extent-ref-cases/keyed_data_ref_with_reloc_leaf.img", true, NULL },
	{ "fsck/020-extent-ref-cases/keyed_data_ref_with_shared_leaf.img", true, NULL },
	{ "fsck/020-extent-ref-cases/no_inline_ref.img", true, NULL },
	{ "fsck/020-extent-ref-cases/no_skinny_ref.img", true, NULL },
	{ "fsck/020-extent-ref-cases/ref_count_mismatch_false_alert.img", true, NULL },
	{ "fsck/020-extent-ref-cases/shared_block_ref.img", true, NULL },
	{ "fsck/020-extent-ref-cases/shared_block_ref_only.raw.xz", true, NULL },
	{ "fsck/020-extent-ref-cases/shared_data_ref.img", true, NULL },
	{ "fsck/020-extent-ref-cases/shared_data_ref_only.img", true, NULL },
	{ "fsck/020-extent-ref-cases/tree_reloc_for_data_reloc.img.xz", true, NULL },
	{ "fsck/020-extent-ref-cases/tree_reloc_for_fs_tree.img.xz", true, NULL },
	{ "fsck/022-qgroup-rescan-halfway/qgroup_rescan_halfway.raw.xz", true, NULL },
	{ "fsck/023-qgroup-stack-overflow/quota_balance_loop_backref.raw.xz", true, NULL },
	{ "fsck/029-valid-orphan-item/orphan_inode.img.xz", true, NULL },
	{ "fsck/065-valid-log-tree/already-present.img.xz", true, NULL },
	{ "fsck/065-valid-log-tree/compressed.img.xz", true, NULL },
	{ "fsck/065-valid-log-tree/hole.img.xz", true, NULL },
	{ "misc/025-zstd-compression/compress.raw.xz", true, NULL },
	{ "misc/051-warning-rw-subvol-received-uuid/subvol-rw-recv.img", true, NULL },
	{ "misc/060-ino-cache-clean/ino-cache-enabled.raw.xz", true, NULL },
	{ "fsck/064-deprecated-inode-cache/4k_nodesize.img.xz", true, NULL },
	{ "fsck/001-bad-file-extent-bytenr/default_case.img", false, "disk_bytenr" },
	{ "fsck/011-no-inode-item/default_case.img", false, "inode item missing" },
	{ "fsck/026-bad-dir-item-name/default_case.img.xz", false, "name hash" },
	{ "fsck/035-inline-bad-ram-bytes/offset_by_one.img", false, "ram_bytes" },
	{ "fsck/041-invalid-root-generation/default_case.img", false, "root generation" },
	{ "fsck/043-bad-inode-generation/bad_inode_geneartion.img.xz", false, "inode generation" },
	{ "fsck/043-bad-inode-generation/bad_inode_transid.img.xz", false, "inode transid" },
	{ "fsck/044-invalid-extent-item-generation/bad_extent_item_gen_for_data.img.xz", false,
	  "extent generation" },
	{ "fsck/044-invalid-extent-item-generation/bad_extent_item_gen_for_tree_block.img.xz",
	  false, "extent generation" },
	{ "fsck/049-dir-hard-link/default.img.xz", false, "directory nlink" },
	{ "fsck/050-invalid-block-group-used/default.img.xz", false, "block group used" },
	{ "fsck/053-bad-metadata-level/default.img.xz", false, "metadata item level" },
	{ "fsck/058-bad-free-space-tree-entry/corrupt-free-space-tree.img.xz", false,
	  "free space key" },
	{ "fsck/061-out-of-order-inline-backref/btrfs_image.img.xz", false, "out of order" },
};

/* Unpack @rel from the image directory into a raw image; 0 or -1. */
static int restore_image(const char *dir, const char *rel, const char *out)
{
	char cmd[6000];
	size_t len = strlen(rel);
	bool xz = len > 3 && !strcmp(rel + len - 3, ".xz");
	bool raw = strstr(rel, ".raw") != NULL;

	if (raw)
		snprintf(cmd, sizeof(cmd), "xz -dc '%s/%s' | cp --sparse=always /dev/stdin '%s'", dir,
			 rel, out);
	else if (xz)
		snprintf(cmd, sizeof(cmd),
			 "xz -dc '%s/%s' > '%s.dump' && btrfs-image -r '%s.dump' '%s' >/dev/null 2>&1; "
			 "r=$?; rm -f '%s.dump'; exit $r",
			 dir, rel, out, out, out, out);
	else
		snprintf(cmd, sizeof(cmd), "btrfs-image -r '%s/%s' '%s' >/dev/null 2>&1", dir, rel,
			 out);
	return run(cmd);
}

static void test_shared_images(void)
{
	const char *dir = getenv("UBTRFS_TEST_IMAGES");
	char path[700], probe[800];
	size_t done = 0;

	if (!dir)
		dir = "tests/images";
	snprintf(probe, sizeof(probe), "%s/expect.tsv", dir);
	if (access(probe, R_OK) != 0) {
		printf("note: no btrfs-progs test images in %s; part 4 skipped\n", dir);
		return;
	}
	if (run("xz --version >/dev/null 2>&1") != 0 ||
	    run("btrfs-image 2>&1 | grep -q usage") != 0) {
		const char *req = getenv("UBTRFS_REQUIRE_ORACLE");

		printf("note: xz or btrfs-image missing; part 4 skipped\n");
		CHECK(!(req && !strcmp(req, "1")));
		return;
	}
	for (size_t i = 0; i < UBT_ARRAY_SIZE(shared_cases); i++) {
		const struct shared_case *sc = &shared_cases[i];
		struct walk_stats st;
		struct img im;
		size_t failed;

		snprintf(probe, sizeof(probe), "%s/%s", dir, sc->file);
		if (access(probe, R_OK) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/shared-%zu.raw", tmpdir, i);
		if (restore_image(dir, sc->file, path) || img_open(&im, path)) {
			fprintf(stderr, "cannot restore %s\n", sc->file);
			CHECK(0);
			unlink(path);
			continue;
		}
		failed = check_all_blocks(&im, &st, sc->clean);
		if (sc->clean) {
			CHECK_EQ_U64(failed, 0);
		} else {
			t_checks++;
			if (!failed || !strstr(st.first_error, sc->needle)) {
				t_failures++;
				fprintf(stderr, "%s: expected \"%s\", got %zu rejected (%s)\n",
					sc->file, sc->needle, failed, st.first_error);
			}
		}
		done++;
		img_close(&im);
		unlink(path);
	}
	printf("btrfs-progs test images: %zu checked\n", done);
}

/* ---- main ----------------------------------------------------------------- */

static int check_one_image(const char *path)
{
	struct walk_stats st;
	struct img im;
	size_t failed;

	if (img_open(&im, path)) {
		fprintf(stderr, "cannot read %s (superblock or dump-tree)\n", path);
		return 1;
	}
	failed = check_all_blocks(&im, &st, true);
	printf("%s: %zu blocks (%zu leaves, %zu nodes), %zu copies, %zu rejected\n", path,
	       st.blocks, st.leaves, st.nodes, st.copies, failed);
	img_close(&im);
	return failed ? 1 : 0;
}

int main(void)
{
	char rootdir[256], path[700];
	const char *one = getenv("UBTRFS_CHECKER_IMAGE");
	struct img im;

	ubt_log_set_handler(capture_log, NULL);
	log_verbose = getenv("UBTRFS_TEST_VERBOSE") != NULL;
	if (one)
		return check_one_image(one);
	if (!have_tools())
		return t_skip("mkfs.btrfs / btrfs (btrfs-progs) not found");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(rootdir, sizeof(rootdir), "%s/root", tmpdir);
	if (make_rootdir(rootdir)) {
		perror("make_rootdir");
		return 1;
	}

	test_mkfs_images(rootdir);

	snprintf(path, sizeof(path), "%s/crc32c-4k.img", tmpdir);
	if (img_open(&im, path) == 0) {
		mutate_header_and_layout(&im);
		mutate_node(&im);
		mutate_fs_items(&im);
		mutate_csum_items(&im);
		mutate_root_items(&im);
		mutate_chunk_tree(&im);
		mutate_extent_tree(&im, true);
		mutate_dev_tree(&im);
		mutate_misc_trees(&im);
		test_garbage(&im, 3000);
		img_close(&im);
	} else {
		CHECK(0);
	}
	snprintf(path, sizeof(path), "%s/crc32c-4k-noskinny.img", tmpdir);
	if (img_open(&im, path) == 0) {
		mutate_extent_tree(&im, false);
		img_close(&im);
	} else {
		CHECK(0);
	}
	snprintf(path, sizeof(path), "%s/xxhash-4k-mixed.img", tmpdir);
	if (img_open(&im, path) == 0) {
		mutate_mixed(&im);
		img_close(&im);
	} else {
		CHECK(0);
	}
	snprintf(path, sizeof(path), "%s/blake2-16k.img", tmpdir);
	if (img_open(&im, path) == 0) {
		mutate_header_and_layout(&im);
		test_garbage(&im, 1000);
		img_close(&im);
	} else {
		CHECK(0);
	}
	snprintf(path, sizeof(path), "%s/sha256-64k.img", tmpdir);
	if (img_open(&im, path) == 0) {
		test_garbage(&im, 300);
		img_close(&im);
	} else {
		CHECK(0);
	}

	test_shared_images();

	if (!getenv("UBTRFS_KEEP_TMP")) {
		char cmd[800];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		(void)run(cmd);
	}
	return t_finish();
}
