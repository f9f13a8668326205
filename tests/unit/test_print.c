/*
 * unit/oracle: the tree block printer (tree/print.c) against btrfs-progs 6.2
 * `btrfs inspect-internal dump-tree -b N`, block by block, byte for byte.
 *
 *   test_print                 the whole suite (below)
 *   test_print IMG[,DEV2..] .. compare every tree block of the given images
 *                              (comma-separated device files of one fs)
 *
 * The suite:
 *  1. key/objectid strings and robustness: damaged and random blocks must
 *     print without reading outside the block (run it under ASan/UBSan) and
 *     report bad item pointers with an error line;
 *  2. mkfs.btrfs images (--rootdir with files of many sizes, sparse files,
 *     dirs, symlinks, hardlinks, xattrs, fifos; all four csum types; 4K and
 *     16K nodes; ^no-holes, ^free-space-tree, ^skinny-metadata, ^extref,
 *     mixed block groups, quota, 16K sectors; multi-device RAID0/10/1C3/1C4/
 *     5/6 metadata): every block the full dump-tree lists, printed plain,
 *     with --hide-names and with --csum-headers --csum-items;
 *  3. crafted leaves and nodes written into an image: every item type and
 *     key type 0..255, every well-known objectid, damaged items (short,
 *     oversized, unknown inline refs, bad uuid item sizes, ...);
 *  4. as root, a kernel-made image (loop mount): subvolumes, snapshots,
 *     compress-force zstd/lzo/zlib, quotas and qgroup limits, reflinks,
 *     prealloc, nodatacow, extrefs, a received subvolume, free space
 *     bitmaps, device stats, a finished device replace, orphans, a paused
 *     balance, and a copy taken after fsync with a live log tree.
 *
 * Exit 0 pass, 1 fail, 77 skip (no btrfs-progs); never skips under
 * UBTRFS_REQUIRE_ORACLE=1.  Set UBTRFS_TEST_KEEP=1 to keep the temp dir.
 */
#include "t.h"

#include "base/base.h"
#include "format/btrfs_format.h"
#include "format/format_names.h"
#include "tree/print.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ubtrfs-test-print-XXXXXX";
static int verbose;
static int keep;	/* UBTRFS_TEST_KEEP=1: keep every image for inspection */
static int strict = 1;	/* 0 for images given on the command line (see compare_image) */

static void drop(const char *path)
{
	if (!keep)
		unlink(path);
}

/* ------------------------------------------------------------------------ */
/* Small helpers: growable strings, commands                                */
/* ------------------------------------------------------------------------ */

struct sbuf {
	char *p;
	size_t n, cap;
};

static void sb_add(struct sbuf *s, const char *t, size_t n)
{
	if (s->n + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;

		while (cap < s->n + n + 1)
			cap *= 2;
		s->p = realloc(s->p, cap);
		if (!s->p) {
			perror("realloc");
			exit(1);
		}
		s->cap = cap;
	}
	memcpy(s->p + s->n, t, n);
	s->n += n;
	s->p[s->n] = '\0';
}

static void sb_addf(struct sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_addf(struct sbuf *s, const char *fmt, ...)
{
	char tmp[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(s, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void sb_reset(struct sbuf *s)
{
	s->n = 0;
	if (s->p)
		s->p[0] = '\0';
}

static void sb_writer(void *ctx, const char *text, size_t len)
{
	sb_add(ctx, text, len);
}

/* Run a shell command, capture stdout. Returns the exit status or -1. */
static int run_capture(const char *cmd, struct sbuf *out)
{
	FILE *f = popen(cmd, "r");
	char buf[65536];
	size_t n;
	int st;

	sb_reset(out);
	if (!f)
		return -1;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		sb_add(out, buf, n);
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (verbose)
		fprintf(stderr, "+ %s\n", cmd);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int have_progs(void)
{
	return run("btrfs --version >/dev/null 2>&1") == 0 &&
	       run("mkfs.btrfs --version >/dev/null 2>&1") == 0;
}

/* ------------------------------------------------------------------------ */
/* Images: devices, chunk map, logical reads                                */
/* ------------------------------------------------------------------------ */

#define MAX_DEVS 8
#define MAX_STRIPES 16

struct chunk {
	uint64_t logical, length, type, stripe_len;
	uint16_t num, sub;
	uint64_t devid[MAX_STRIPES], phys[MAX_STRIPES];
};

struct img {
	char name[128];
	int ndev;
	char path[MAX_DEVS][PATH_MAX];
	int fd[MAX_DEVS];
	uint64_t devid[MAX_DEVS];
	struct btrfs_super_block sb;
	uint32_t nodesize, sectorsize;
	uint16_t csum_type;
	struct chunk *chunks;
	size_t nchunks;
};

static void img_close(struct img *im)
{
	for (int i = 0; i < im->ndev; i++)
		if (im->fd[i] >= 0)
			close(im->fd[i]);
	free(im->chunks);
	im->chunks = NULL;
	im->nchunks = 0;
	im->ndev = 0;
}

static void add_chunk(struct img *im, uint64_t logical, const uint8_t *c, size_t avail)
{
	const struct btrfs_chunk *ck = (const void *)c;
	struct chunk *n;
	uint16_t ns;

	if (avail < sizeof(struct btrfs_chunk))
		return;
	ns = btrfs_chunk_num_stripes(ck);
	if (!ns || avail < btrfs_chunk_item_size(ns))
		return;
	for (size_t i = 0; i < im->nchunks; i++)
		if (im->chunks[i].logical == logical)
			return;
	im->chunks = realloc(im->chunks, (im->nchunks + 1) * sizeof(*im->chunks));
	n = &im->chunks[im->nchunks++];
	memset(n, 0, sizeof(*n));
	n->logical = logical;
	n->length = btrfs_chunk_length(ck);
	n->type = btrfs_chunk_type(ck);
	n->stripe_len = btrfs_chunk_stripe_len(ck);
	n->num = ns > MAX_STRIPES ? MAX_STRIPES : ns;
	n->sub = btrfs_chunk_sub_stripes(ck);
	for (unsigned i = 0; i < n->num; i++) {
		n->devid[i] = btrfs_stripe_devid_nr(ck, i);
		n->phys[i] = btrfs_stripe_offset_nr(ck, i);
	}
}

static int dev_fd(const struct img *im, uint64_t devid)
{
	for (int i = 0; i < im->ndev; i++)
		if (im->devid[i] == devid)
			return im->fd[i];
	return -1;
}

/* Candidate (devid, physical) copies of a logical address, per profile. */
static int map_logical(const struct img *im, uint64_t logical, uint64_t *devid, uint64_t *phys,
		       int max)
{
	for (size_t i = 0; i < im->nchunks; i++) {
		const struct chunk *c = &im->chunks[i];
		uint64_t off, snr, soff, sl = c->stripe_len ? c->stripe_len : BTRFS_STRIPE_LEN;
		int n = 0;

		if (logical < c->logical || logical >= c->logical + c->length)
			continue;
		off = logical - c->logical;
		snr = off / sl;
		soff = off % sl;
		if (c->type & BTRFS_BLOCK_GROUP_RAID0) {
			unsigned idx = (unsigned)(snr % c->num);

			devid[n] = c->devid[idx];
			phys[n++] = c->phys[idx] + (snr / c->num) * sl + soff;
		} else if (c->type & BTRFS_BLOCK_GROUP_RAID10) {
			unsigned sub = c->sub ? c->sub : 2, factor = c->num / sub;
			unsigned idx;

			if (!factor)
				return 0;
			idx = (unsigned)(snr % factor) * sub;

			for (unsigned j = 0; j < sub && n < max; j++) {
				devid[n] = c->devid[idx + j];
				phys[n++] = c->phys[idx + j] + (snr / factor) * sl + soff;
			}
		} else if (c->type & BTRFS_BLOCK_GROUP_RAID56_MASK) {
			unsigned parity = (c->type & BTRFS_BLOCK_GROUP_RAID6) ? 2 : 1;
			unsigned nr_data = c->num > parity ? c->num - parity : 0;
			uint64_t full;
			unsigned idx;

			if (!nr_data)
				return 0;
			full = snr / nr_data;
			idx = (unsigned)((snr % nr_data + full) % c->num);

			devid[n] = c->devid[idx];
			phys[n++] = c->phys[idx] + full * sl + soff;
		} else {
			for (unsigned j = 0; j < c->num && n < max; j++) {
				devid[n] = c->devid[j];
				phys[n++] = c->phys[j] + off;
			}
		}
		return n;
	}
	return 0;
}

/* Read the tree block at `logical` (first copy whose header agrees). */
static int read_block(const struct img *im, uint64_t logical, uint8_t *buf)
{
	uint64_t devid[MAX_STRIPES], phys[MAX_STRIPES];
	int n = map_logical(im, logical, devid, phys, MAX_STRIPES);
	const struct btrfs_header *h = (const void *)buf;

	for (int i = 0; i < n; i++) {
		int fd = dev_fd(im, devid[i]);

		if (fd < 0)
			continue;
		if (pread(fd, buf, im->nodesize, (off_t)phys[i]) != (ssize_t)im->nodesize)
			continue;
		if (btrfs_header_bytenr(h) == logical &&
		    !memcmp(btrfs_header_fsid(h), btrfs_super_block_fsid(&im->sb), BTRFS_FSID_SIZE))
			return 0;
	}
	return -1;
}

/* Write a (crafted) tree block to every copy of `logical`. */
static int write_block(const struct img *im, uint64_t logical, const uint8_t *buf)
{
	uint64_t devid[MAX_STRIPES], phys[MAX_STRIPES];
	int n = map_logical(im, logical, devid, phys, MAX_STRIPES);

	for (int i = 0; i < n; i++) {
		int fd = dev_fd(im, devid[i]);

		if (fd < 0 || pwrite(fd, buf, im->nodesize, (off_t)phys[i]) != (ssize_t)im->nodesize)
			return -1;
	}
	return n ? 0 : -1;
}

static void load_chunk_tree(struct img *im, uint64_t bytenr, int depth)
{
	uint8_t *b = malloc(im->nodesize);
	const struct btrfs_header *h = (const void *)b;

	if (!b || depth > BTRFS_MAX_LEVEL || read_block(im, bytenr, b)) {
		free(b);
		return;
	}
	for (uint32_t i = 0; i < btrfs_header_nritems(h); i++) {
		if (btrfs_header_level(h)) {
			const struct btrfs_key_ptr *kp = btrfs_node_key_ptr(b, i);

			if ((uint8_t *)(kp + 1) > b + im->nodesize)
				break;
			load_chunk_tree(im, btrfs_key_ptr_blockptr(kp), depth + 1);
		} else {
			const struct btrfs_item *it = btrfs_leaf_item(b, i);
			uint64_t off, sz;

			if ((uint8_t *)(it + 1) > b + im->nodesize)
				break;
			off = sizeof(struct btrfs_header) + btrfs_item_offset(it);
			sz = btrfs_item_size(it);
			if (btrfs_disk_key_type(btrfs_item_key(it)) != BTRFS_CHUNK_ITEM_KEY ||
			    off + sz > im->nodesize)
				continue;
			add_chunk(im, btrfs_disk_key_offset(btrfs_item_key(it)), b + off, sz);
		}
	}
	free(b);
}

/* Open the devices of one filesystem (paths separated by commas). */
static int img_open(struct img *im, const char *name, const char *paths)
{
	char tmp[PATH_MAX * 2];
	char *save = NULL, *tok;
	const uint8_t *arr;
	uint32_t asz, off = 0;

	memset(im, 0, sizeof(*im));
	snprintf(im->name, sizeof(im->name), "%s", name);
	snprintf(tmp, sizeof(tmp), "%s", paths);
	for (tok = strtok_r(tmp, ",", &save); tok && im->ndev < MAX_DEVS;
	     tok = strtok_r(NULL, ",", &save)) {
		struct btrfs_super_block sb;
		int fd = open(tok, O_RDWR);

		if (fd < 0)
			fd = open(tok, O_RDONLY);
		if (fd < 0 || pread(fd, &sb, sizeof(sb), BTRFS_SUPER_INFO_OFFSET) != sizeof(sb) ||
		    btrfs_super_magic(&sb) != BTRFS_MAGIC) {
			fprintf(stderr, "%s: not a btrfs device: %s\n", name, tok);
			if (fd >= 0)
				close(fd);
			img_close(im);
			return -1;
		}
		snprintf(im->path[im->ndev], PATH_MAX, "%s", tok);
		im->fd[im->ndev] = fd;
		im->devid[im->ndev] = btrfs_dev_item_devid(btrfs_super_dev_item(&sb));
		if (!im->ndev)
			im->sb = sb;
		im->ndev++;
	}
	im->nodesize = btrfs_super_nodesize(&im->sb);
	im->sectorsize = btrfs_super_sectorsize(&im->sb);
	im->csum_type = btrfs_super_csum_type(&im->sb);
	if (im->nodesize < 4096 || im->nodesize > BTRFS_MAX_METADATA_BLOCKSIZE) {
		img_close(im);
		return -1;
	}
	arr = btrfs_super_sys_chunk_array(&im->sb);
	asz = btrfs_super_sys_chunk_array_size(&im->sb);
	if (asz > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE)
		asz = BTRFS_SYSTEM_CHUNK_ARRAY_SIZE;
	while (off + sizeof(struct btrfs_disk_key) + sizeof(struct btrfs_chunk) <= asz) {
		const struct btrfs_disk_key *k = (const void *)(arr + off);
		const struct btrfs_chunk *c = (const void *)(arr + off + sizeof(*k));
		uint16_t ns = btrfs_chunk_num_stripes(c);

		if (!ns)
			break;
		add_chunk(im, btrfs_disk_key_offset(k), (const uint8_t *)c,
			  asz - off - sizeof(*k));
		off += (uint32_t)(sizeof(*k) + btrfs_chunk_item_size(ns));
	}
	load_chunk_tree(im, btrfs_super_chunk_root(&im->sb), 0);
	return 0;
}

static void img_devs_arg(const struct img *im, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < im->ndev && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, " '%s'", im->path[i]);
}

/* ------------------------------------------------------------------------ */
/* The oracle comparison                                                    */
/* ------------------------------------------------------------------------ */

struct stats {
	long blocks, leaves, nodes, mismatches, unreadable;
	long types[256];	/* items seen per key type */
	long progs_failed;
};
static struct stats total;

/* "leaf N items" / "node N level": the first line of a block; returns N. */
static int block_start(const char *line, uint64_t *bytenr)
{
	char *end;

	if (strncmp(line, "leaf ", 5) && strncmp(line, "node ", 5))
		return 0;
	*bytenr = strtoull(line + 5, &end, 10);
	if (end == line + 5)
		return 0;
	return !strncmp(end, " items ", 7) || !strncmp(end, " level ", 7);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every tree block the full dump-tree prints (sorted, unique). */
static size_t list_blocks(const struct img *im, uint64_t **out)
{
	char devs[PATH_MAX * MAX_DEVS + 64], cmd[sizeof(devs) + 128];
	struct sbuf o = { 0 };
	uint64_t *v = NULL;
	size_t n = 0, cap = 0, u = 0;
	char *line, *save = NULL;

	img_devs_arg(im, devs, sizeof(devs));
	snprintf(cmd, sizeof(cmd), "btrfs inspect-internal dump-tree --noscan%s 2>/dev/null", devs);
	run_capture(cmd, &o);
	for (line = o.p ? strtok_r(o.p, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		uint64_t b;

		if (!block_start(line, &b))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			v = realloc(v, cap * sizeof(*v));
		}
		v[n++] = b;
	}
	free(o.p);
	if (n) {
		qsort(v, n, sizeof(*v), cmp_u64);
		for (size_t i = 0; i < n; i++)
			if (!u || v[u - 1] != v[i])
				v[u++] = v[i];
	}
	*out = v;
	return u;
}

static void tally_types(const uint8_t *b, uint32_t nodesize)
{
	const struct btrfs_header *h = (const void *)b;

	if (btrfs_header_level(h)) {
		total.nodes++;
		return;
	}
	total.leaves++;
	for (uint32_t i = 0; i < btrfs_header_nritems(h); i++) {
		const struct btrfs_item *it = btrfs_leaf_item(b, i);

		if ((const uint8_t *)(it + 1) > b + nodesize)
			break;
		total.types[btrfs_disk_key_type(btrfs_item_key(it))]++;
	}
}

static const char *opts_str(uint32_t flags)
{
	switch (flags) {
	case 0:
		return "";
	case UBT_PRINT_HIDE_NAMES:
		return " --hide-names";
	case UBT_PRINT_CSUM_HEADERS | UBT_PRINT_CSUM_ITEMS:
		return " --csum-headers --csum-items";
	default:
		return NULL;
	}
}

/* Report the first differing line of two texts. */
static void report_diff(const struct img *im, uint64_t bytenr, const char *opts, const char *want,
			const char *got)
{
	int line = 1;
	const char *a = want, *b = got;

	while (*a && *a == *b) {
		if (*a == '\n')
			line++;
		a++;
		b++;
	}
	while (a > want && a[-1] != '\n')
		a--;
	while (b > got && b[-1] != '\n')
		b--;
	fprintf(stderr, "MISMATCH %s block %llu%s, line %d\n  progs: %.*s\n  ours:  %.*s\n",
		im->name, (unsigned long long)bytenr, opts, line, (int)strcspn(a, "\n"), a,
		(int)strcspn(b, "\n"), b);
}

/* The text of block `bytenr` in a dump-tree listing (up to the next block). */
static const char *find_block_text(const char *text, uint64_t bytenr, size_t *len)
{
	const char *p, *next;

	for (p = text; p && *p; p = next) {
		uint64_t b;

		next = strchr(p, '\n');
		next = next ? next + 1 : p + strlen(p);
		if (!block_start(p, &b) || b != bytenr)
			continue;
		while (*next && !block_start(next, &b)) {
			const char *nl = strchr(next, '\n');

			next = nl ? nl + 1 : next + strlen(next);
		}
		*len = (size_t)(next - p);
		return p;
	}
	return NULL;
}

/*
 * Print `n` blocks with progs (-b each, in batches) and with us; compare.
 * Returns the number of mismatching blocks.
 */
static long compare_blocks(const struct img *im, const uint64_t *blocks, size_t n, uint32_t flags,
			   int count_stats)
{
	const char *opts = opts_str(flags);
	char devs[PATH_MAX * MAX_DEVS + 64];
	struct sbuf cmd = { 0 }, out = { 0 }, ours = { 0 };
	uint8_t *buf = malloc(im->nodesize);
	struct ubt_print_ctx ctx = {
		.nodesize = im->nodesize,
		.sectorsize = im->sectorsize,
		.csum_type = im->csum_type,
		.flags = flags,
		.write = sb_writer,
		.wctx = &ours,
	};
	long bad = 0, reported = 0;
	const size_t batch = 64;

	img_devs_arg(im, devs, sizeof(devs));
	for (size_t s = 0; s < n; s += batch) {
		size_t e = s + batch < n ? s + batch : n;
		sb_reset(&cmd);
		sb_addf(&cmd, "btrfs inspect-internal dump-tree --noscan%s", opts);
		for (size_t i = s; i < e; i++)
			sb_addf(&cmd, " -b %llu", (unsigned long long)blocks[i]);
		sb_addf(&cmd, "%s 2>/dev/null", devs);
		run_capture(cmd.p, &out);

		for (size_t i = s; i < e; i++) {
			const char *want = NULL;
			size_t want_len = 0;
			struct sbuf single = { 0 };

			if (read_block(im, blocks[i], buf)) {
				fprintf(stderr, "%s: cannot read block %llu\n", im->name,
					(unsigned long long)blocks[i]);
				total.unreadable++;
				bad++;
				continue;
			}
			want = find_block_text(out.p, blocks[i], &want_len);
			if (!want) {
				/* progs gives up a batch at a block it cannot read: ask alone */
				sb_reset(&cmd);
				sb_addf(&cmd, "btrfs inspect-internal dump-tree --noscan%s -b %llu%s 2>/dev/null",
					opts, (unsigned long long)blocks[i], devs);
				run_capture(cmd.p, &single);
				want = find_block_text(single.p, blocks[i], &want_len);
			}
			if (!want) {
				fprintf(stderr, "%s: progs cannot print block %llu%s:\n", im->name,
					(unsigned long long)blocks[i], opts);
				run("btrfs inspect-internal dump-tree --noscan%s -b %llu%s >/dev/null",
				    opts, (unsigned long long)blocks[i], devs);
				total.progs_failed++;
				bad++;
				free(single.p);
				continue;
			}
			sb_reset(&ours);
			ubt_print_tree_block(&ctx, buf);
			if (count_stats) {
				total.blocks++;
				tally_types(buf, im->nodesize);
			}
			if (ours.n != want_len || memcmp(ours.p, want, want_len)) {
				char *w = strndup(want, want_len);

				bad++;
				if (reported++ < 8)
					report_diff(im, blocks[i], opts, w, ours.p ? ours.p : "");
				free(w);
			}
			free(single.p);
		}
	}
	free(cmd.p);
	free(out.p);
	free(ours.p);
	free(buf);
	return bad;
}

/* Every block of an image, with the three option sets. */
static void compare_image(struct img *im)
{
	static const uint32_t sets[] = { 0, UBT_PRINT_HIDE_NAMES,
					 UBT_PRINT_CSUM_HEADERS | UBT_PRINT_CSUM_ITEMS };
	uint64_t *blocks;
	size_t n = list_blocks(im, &blocks);
	long bad = 0;

	if (!n) {
		/* our own images must print; a given one progs cannot open is no test */
		if (strict) {
			fprintf(stderr, "%s: dump-tree listed no blocks\n", im->name);
			CHECK(n > 0);
		} else {
			printf("%-28s btrfs-progs prints no block: nothing compared\n", im->name);
		}
		free(blocks);
		return;
	}
	for (size_t i = 0; i < UBT_ARRAY_SIZE(sets); i++)
		bad += compare_blocks(im, blocks, n, sets[i], i == 0);
	total.mismatches += bad;
	printf("%-28s %5zu blocks x3 option sets: %s\n", im->name, n,
	       bad ? "MISMATCHES" : "identical");
	CHECK_EQ_INT(bad, 0);
	free(blocks);
}

static void compare_paths(const char *name, const char *paths)
{
	struct img im;

	if (img_open(&im, name, paths)) {
		if (strict)
			CHECK(!"image opens");
		else
			printf("%-28s no valid superblock: nothing compared\n", name);
		return;
	}
	compare_image(&im);
	img_close(&im);
}

/* ------------------------------------------------------------------------ */
/* mkfs images                                                              */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static int write_file(const char *path, size_t size, int random, off_t seek)
{
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	uint8_t buf[8192];
	size_t done = 0;

	if (fd < 0)
		return -1;
	while (done < size) {
		size_t c = size - done < sizeof(buf) ? size - done : sizeof(buf);

		for (size_t i = 0; i < c; i++)
			buf[i] = random ? (uint8_t)rng() : (uint8_t)("compressible "[(done + i) % 13]);
		if (pwrite(fd, buf, c, seek + (off_t)done) != (ssize_t)c) {
			close(fd);
			return -1;
		}
		done += c;
	}
	close(fd);
	return 0;
}

/* The tree mkfs --rootdir copies: one of everything a leaf can describe. */
static int make_source_tree(const char *dir)
{
	static const size_t sizes[] = { 0, 1, 7, 100, 1000, 2047, 2048, 3000, 4095, 4096, 4097,
					8191, 8192, 12289, 65536, 100000, 262145, 1048593 };
	char p[PATH_MAX], q[PATH_MAX], longname[256];

	if (mkdir(dir, 0755))
		return -1;
	for (size_t i = 0; i < UBT_ARRAY_SIZE(sizes); i++) {
		snprintf(p, sizeof(p), "%s/file-%zu", dir, sizes[i]);
		if (write_file(p, sizes[i], (int)(i & 1), 0))
			return -1;
	}
	/* sparse: data, a hole, data, a hole up to the size */
	snprintf(p, sizeof(p), "%s/sparse", dir);
	if (write_file(p, 4096, 1, 0) || write_file(p, 5000, 1, 1 << 20) || truncate(p, 3 << 20))
		return -1;
	snprintf(p, sizeof(p), "%s/a", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/a/b", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/a/b/c", dir);
	mkdir(p, 0750);
	snprintf(p, sizeof(p), "%s/a/b/c/deep", dir);
	write_file(p, 12, 0, 0);
	snprintf(p, sizeof(p), "%s/empty-dir", dir);
	mkdir(p, 0755);
	/* many entries: multi-leaf directories (and nodes with 4K blocks) */
	snprintf(p, sizeof(p), "%s/many", dir);
	mkdir(p, 0755);
	for (int i = 0; i < 400; i++) {
		snprintf(p, sizeof(p), "%s/many/entry-%04d", dir, i);
		write_file(p, (size_t)(i * 37 % 3000), i & 1, 0);
	}
	/* names: 255 bytes, UTF-8, blanks, high bytes */
	memset(longname, 'n', 255);
	longname[255] = '\0';
	snprintf(p, sizeof(p), "%s/%s", dir, longname);
	write_file(p, 10, 0, 0);
	snprintf(p, sizeof(p), "%s/\xc3\xbcnic\xc3\xb8" "de-\xe5\x90\x8d", dir);
	write_file(p, 10, 0, 0);
	snprintf(p, sizeof(p), "%s/with space\tand tab", dir);
	write_file(p, 10, 0, 0);
	snprintf(p, sizeof(p), "%s/high\xff\xfe", dir);
	write_file(p, 10, 0, 0);
	/* links */
	snprintf(p, sizeof(p), "%s/sym", dir);
	if (symlink("file-100", p))
		return -1;
	snprintf(p, sizeof(p), "%s/dangling", dir);
	symlink("does/not/exist", p);
	{
		char target[1500];

		memset(target, 't', sizeof(target) - 1);
		target[sizeof(target) - 1] = '\0';
		snprintf(p, sizeof(p), "%s/longsym", dir);
		symlink(target, p);
	}
	snprintf(p, sizeof(p), "%s/file-4096", dir);
	snprintf(q, sizeof(q), "%s/hardlink", dir);
	link(p, q);
	snprintf(q, sizeof(q), "%s/a/hardlink2", dir);
	link(p, q);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	mkfifo(p, 0644);
	/* xattrs: short, empty, long, several on one inode, on a dir */
	snprintf(p, sizeof(p), "%s/file-1", dir);
	setxattr(p, "user.short", "v", 1, 0);
	setxattr(p, "user.empty", "", 0, 0);
	{
		char val[300];

		memset(val, 'x', sizeof(val));
		setxattr(p, "user.long", val, sizeof(val), 0);
	}
	snprintf(p, sizeof(p), "%s/a", dir);
	setxattr(p, "user.on-dir", "dir value", 9, 0);
	return 0;
}

static int mkfs_image(const char *path, const char *opts, const char *rootdir, int size_mb)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);

	if (fd < 0 || ftruncate(fd, (off_t)size_mb << 20)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return run("mkfs.btrfs -q -f %s%s%s '%s' >/dev/null 2>&1", opts, rootdir ? " --rootdir " : "",
		   rootdir ? rootdir : "", path);
}

struct mkfs_case {
	const char *name;
	const char *opts;
	int rootdir;
	int ndev;
};

static const struct mkfs_case mkfs_cases[] = {
	{ "crc32c-16k", "--csum crc32c -n 16384", 1, 1 },
	{ "crc32c-4k", "--csum crc32c -n 4096", 1, 1 },
	{ "xxhash-4k", "--csum xxhash -n 4096", 1, 1 },
	{ "xxhash-16k", "--csum xxhash", 1, 1 },
	{ "sha256-16k", "--csum sha256", 1, 1 },
	{ "sha256-4k", "--csum sha256 -n 4096", 1, 1 },
	{ "blake2-4k", "--csum blake2 -n 4096", 1, 1 },
	{ "blake2-64k", "--csum blake2 -n 65536", 1, 1 },
	{ "holes", "-O ^no-holes -n 4096", 1, 1 },
	{ "no-free-space-tree", "-R ^free-space-tree", 1, 1 },
	{ "no-skinny", "-O ^skinny-metadata -n 4096", 1, 1 },
	{ "no-extref", "-O ^extref", 1, 1 },
	{ "mixed", "-M -n 4096", 1, 1 },
	{ "quota", "-R quota -n 4096", 1, 1 },
	{ "sector16k", "-s 16384 -n 16384", 1, 1 },
	{ "raid10-raid1c4", "-m raid10 -d raid1c4", 0, 4 },
	{ "raid1c4-raid0", "-m raid1c4 -d raid0", 0, 4 },
	{ "raid1c3-raid10", "-m raid1c3 -d raid10", 0, 4 },
	{ "raid0-raid1", "-m raid0 -d raid1", 0, 3 },
	{ "raid5-raid6", "-m raid5 -d raid6", 0, 4 },
	{ "raid6-raid5", "-m raid6 -d raid5", 0, 4 },
	{ "single", "-m single -d single", 1, 1 },
};

static void test_mkfs_images(const char *srcdir)
{
	for (size_t i = 0; i < UBT_ARRAY_SIZE(mkfs_cases); i++) {
		const struct mkfs_case *c = &mkfs_cases[i];
		char paths[PATH_MAX * MAX_DEVS], devs[PATH_MAX * MAX_DEVS], one[PATH_MAX];
		size_t pn = 0, dn = 0;
		int ok = 1;

		paths[0] = devs[0] = '\0';
		for (int d = 0; d < c->ndev; d++) {
			int fd;

			snprintf(one, sizeof(one), "%s/%s.%d.img", tmpdir, c->name, d);
			fd = open(one, O_CREAT | O_TRUNC | O_RDWR, 0644);
			if (fd < 0 || ftruncate(fd, 300ll << 20))
				ok = 0;
			if (fd >= 0)
				close(fd);
			pn += (size_t)snprintf(paths + pn, sizeof(paths) - pn, "%s%s", d ? "," : "", one);
			dn += (size_t)snprintf(devs + dn, sizeof(devs) - dn, " '%s'", one);
		}
		if (ok && run("mkfs.btrfs -q -f %s%s%s%s >/dev/null 2>&1", c->opts,
			      c->rootdir ? " --rootdir " : "", c->rootdir ? srcdir : "", devs)) {
			fprintf(stderr, "mkfs.btrfs %s failed\n", c->opts);
			ok = 0;
		}
		CHECK(ok);
		if (ok)
			compare_paths(c->name, paths);
		for (int d = 0; d < c->ndev; d++) {
			snprintf(one, sizeof(one), "%s/%s.%d.img", tmpdir, c->name, d);
			drop(one);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Crafted blocks                                                           */
/* ------------------------------------------------------------------------ */

/* Byte builder for item bodies. */
struct bb {
	uint8_t d[8192];
	size_t n;
};

static struct bb *bb_new(void)
{
	struct bb *b = calloc(1, sizeof(*b));

	if (!b)
		exit(1);
	return b;
}

static void bb_bytes(struct bb *b, const void *p, size_t n)
{
	if (!n)
		return;
	if (b->n + n > sizeof(b->d))
		n = sizeof(b->d) - b->n;
	memcpy(b->d + b->n, p, n);
	b->n += n;
}

static void bb_fill(struct bb *b, uint8_t v, size_t n)
{
	while (n-- && b->n < sizeof(b->d))
		b->d[b->n++] = v;
}

static void bb_u8(struct bb *b, uint8_t v)
{
	bb_bytes(b, &v, 1);
}

static void bb_u16(struct bb *b, uint16_t v)
{
	uint8_t t[2];

	ubt_put_le16(t, v);
	bb_bytes(b, t, 2);
}

static void bb_u32(struct bb *b, uint32_t v)
{
	uint8_t t[4];

	ubt_put_le32(t, v);
	bb_bytes(b, t, 4);
}

static void bb_u64(struct bb *b, uint64_t v)
{
	uint8_t t[8];

	ubt_put_le64(t, v);
	bb_bytes(b, t, 8);
}

static void bb_key(struct bb *b, uint64_t oid, uint8_t type, uint64_t off)
{
	bb_u64(b, oid);
	bb_u8(b, type);
	bb_u64(b, off);
}

static void bb_str(struct bb *b, const char *s)
{
	bb_bytes(b, s, strlen(s));
}

static void bb_uuid(struct bb *b, uint8_t seed)
{
	for (int i = 0; i < 16; i++)
		bb_u8(b, (uint8_t)(seed + i * 17));
}

static void bb_timespec(struct bb *b, uint64_t sec, uint32_t nsec)
{
	bb_u64(b, sec);
	bb_u32(b, nsec);
}

/* A leaf (or node) under construction. */
struct citem {
	uint64_t oid, off;
	uint8_t type;
	uint8_t *data;
	uint32_t len;
	uint64_t blockptr, gen;	/* nodes */
};

struct cblock {
	struct citem it[600];
	int n;
};

static void cb_add(struct cblock *c, uint64_t oid, uint8_t type, uint64_t off, const void *data,
		   size_t len)
{
	struct citem *i = &c->it[c->n++];

	i->oid = oid;
	i->type = type;
	i->off = off;
	i->data = malloc(len ? len : 1);
	if (len)
		memcpy(i->data, data, len);
	i->len = (uint32_t)len;
}

static void cb_addb(struct cblock *c, uint64_t oid, uint8_t type, uint64_t off, struct bb *b)
{
	cb_add(c, oid, type, off, b->d, b->n);
	b->n = 0;
}

static void cb_ptr(struct cblock *c, uint64_t oid, uint8_t type, uint64_t off, uint64_t ptr,
		   uint64_t gen)
{
	struct citem *i = &c->it[c->n++];

	memset(i, 0, sizeof(*i));
	i->oid = oid;
	i->type = type;
	i->off = off;
	i->blockptr = ptr;
	i->gen = gen;
}

static int citem_cmp(const void *a, const void *b)
{
	const struct citem *x = a, *y = b;

	if (x->oid != y->oid)
		return x->oid < y->oid ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return 0;
}

static void cb_free(struct cblock *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->it[i].data);
	c->n = 0;
}

/* Lay out, checksum and write a crafted block; resets the builder. */
static int cb_write(const struct img *im, struct cblock *c, uint64_t bytenr, uint8_t level,
		    uint64_t owner, uint64_t flags)
{
	uint8_t *b = calloc(1, im->nodesize);
	struct btrfs_header *h = (void *)b;
	uint8_t csum[UBT_CSUM_MAX];
	uint32_t end = btrfs_leaf_data_size(im->nodesize);
	int ret;

	qsort(c->it, (size_t)c->n, sizeof(c->it[0]), citem_cmp);
	for (int i = 0; i < c->n; i++) {
		const struct citem *ci = &c->it[i];
		struct btrfs_disk_key k;

		btrfs_set_disk_key_objectid(&k, ci->oid);
		btrfs_set_disk_key_type(&k, ci->type);
		btrfs_set_disk_key_offset(&k, ci->off);
		if (level) {
			struct btrfs_key_ptr *kp = btrfs_node_key_ptr(b, (unsigned)i);

			memcpy(btrfs_key_ptr_key(kp), &k, sizeof(k));
			btrfs_set_key_ptr_blockptr(kp, ci->blockptr);
			btrfs_set_key_ptr_generation(kp, ci->gen);
		} else {
			struct btrfs_item *it = btrfs_leaf_item(b, (unsigned)i);

			if (ci->len > end || sizeof(*h) + (size_t)(i + 1) * sizeof(*it) > sizeof(*h) + end - ci->len) {
				fprintf(stderr, "crafted leaf overflows at item %d\n", i);
				free(b);
				cb_free(c);
				return -1;
			}
			end -= ci->len;
			memcpy(btrfs_item_key(it), &k, sizeof(k));
			btrfs_set_item_offset(it, end);
			btrfs_set_item_size(it, ci->len);
			memcpy(b + sizeof(*h) + end, ci->data, ci->len);
		}
	}
	memcpy(btrfs_header_fsid(h), btrfs_super_block_fsid(&im->sb), BTRFS_FSID_SIZE);
	btrfs_set_header_bytenr(h, bytenr);
	btrfs_set_header_flags(h, flags);
	/* chunk tree uuid: the one the chunk root carries */
	{
		uint8_t *cr = malloc(im->nodesize);

		if (cr && !read_block(im, btrfs_super_chunk_root(&im->sb), cr))
			memcpy(btrfs_header_chunk_tree_uuid(h),
			       btrfs_header_chunk_tree_uuid((struct btrfs_header *)cr), BTRFS_UUID_SIZE);
		free(cr);
	}
	btrfs_set_header_generation(h, 1000);
	btrfs_set_header_owner(h, owner);
	btrfs_set_header_nritems(h, (uint32_t)c->n);
	btrfs_set_header_level(h, level);
	ubt_csum(im->csum_type, b + BTRFS_CSUM_SIZE, im->nodesize - BTRFS_CSUM_SIZE, csum);
	memcpy(btrfs_header_csum(h), csum, BTRFS_CSUM_SIZE);
	ret = write_block(im, bytenr, b);
	free(b);
	cb_free(c);
	return ret;
}

#define WRITTEN_REV1 (BTRFS_HEADER_FLAG_WRITTEN | (1ULL << BTRFS_BACKREF_REV_SHIFT))

static void inode_body(struct bb *b, uint64_t flags, uint32_t mode, uint64_t t0)
{
	bb_u64(b, 1);
	bb_u64(b, 2);
	bb_u64(b, 3);
	bb_u64(b, 4);
	bb_u64(b, 5);
	bb_u32(b, 6);
	bb_u32(b, 7);
	bb_u32(b, 8);
	bb_u32(b, mode);
	bb_u64(b, 9);
	bb_u64(b, flags);
	bb_u64(b, 10);
	bb_fill(b, 0, 32);
	bb_timespec(b, t0, 1);
	bb_timespec(b, t0 + 1000000, 999999999);
	bb_timespec(b, 1099511627776ULL, 5);	/* year 36812 */
	bb_timespec(b, 0, 0);
}

static void dir_entry(struct bb *b, uint64_t oid, uint8_t ktype, uint64_t koff, uint8_t type,
		      const void *name, uint16_t nlen, const void *data, uint16_t dlen)
{
	bb_key(b, oid, ktype, koff);
	bb_u64(b, 7);
	bb_u16(b, dlen);
	bb_u16(b, nlen);
	bb_u8(b, type);
	bb_bytes(b, name, nlen);
	bb_bytes(b, data, dlen);
}

static void file_extent(struct bb *b, uint64_t gen, uint64_t ram, uint8_t comp, uint8_t type)
{
	bb_u64(b, gen);
	bb_u64(b, ram);
	bb_u8(b, comp);
	bb_u8(b, 0);
	bb_u16(b, 0);
	bb_u8(b, type);
}

static void chunk_body(struct bb *b, uint64_t type, uint16_t num, uint16_t sub, int nwrite)
{
	bb_u64(b, 1ULL << 30);
	bb_u64(b, BTRFS_EXTENT_TREE_OBJECTID);
	bb_u64(b, BTRFS_STRIPE_LEN);
	bb_u64(b, type);
	bb_u32(b, 65536);
	bb_u32(b, 65536);
	bb_u32(b, 4096);
	bb_u16(b, num);
	bb_u16(b, sub);
	for (int i = 0; i < nwrite; i++) {
		bb_u64(b, (uint64_t)i + 1);
		bb_u64(b, (uint64_t)i * 1048576);
		bb_uuid(b, (uint8_t)i);
	}
}

static void balance_args(struct bb *b, uint64_t base)
{
	for (int i = 0; i < 9; i++)
		bb_u64(b, base + (uint64_t)i + 1);
	for (int i = 0; i < 4; i++)
		bb_u32(b, (uint32_t)(base + 10 + (uint64_t)i));
	bb_fill(b, 0, 48);
}

/* fs tree items: inodes, refs, dir entries, file extents, verity, orphans */
static void craft_fs_leaf(struct cblock *c)
{
	struct bb *b = bb_new();
	uint8_t big[600];

	inode_body(b, 0, 040755, 1700000000);
	cb_addb(c, 256, BTRFS_INODE_ITEM_KEY, 0, b);
	inode_body(b, ~0ULL, 0100644, 1);
	cb_addb(c, 257, BTRFS_INODE_ITEM_KEY, 0, b);
	inode_body(b, BTRFS_INODE_ROOT_ITEM_INIT | BTRFS_INODE_RO_VERITY_DISK | (1 << 12), 0170777, 2);
	cb_addb(c, 258, BTRFS_INODE_ITEM_KEY, 0, b);
	inode_body(b, BTRFS_INODE_NODATASUM | BTRFS_INODE_COMPRESS, 020644, 3);
	b->n = 100;	/* a short inode item: the rest comes from the next item */
	cb_addb(c, 259, BTRFS_INODE_ITEM_KEY, 0, b);

	/* inode refs: two packed entries; a NUL in a name; an extref */
	bb_u64(b, 2);
	bb_u16(b, 1);
	bb_str(b, "a");
	bb_u64(b, 3);
	bb_u16(b, 3);
	bb_bytes(b, "b\0c", 3);
	cb_addb(c, 257, BTRFS_INODE_REF_KEY, 256, b);
	bb_u64(b, 256);
	bb_u64(b, 5);
	bb_u16(b, 3);
	bb_str(b, "ccc");
	bb_u64(b, 300);
	bb_u64(b, 6);
	bb_u16(b, 4);
	bb_str(b, "dddd");
	cb_addb(c, 257, BTRFS_INODE_EXTREF_KEY, 999, b);

	/* xattrs: two entries in one item, one with 300-byte name and value */
	memset(big, 'N', 300);
	memset(big + 300, 'D', 300);
	dir_entry(b, 0, 0, 0, BTRFS_FT_XATTR, "user.x", 6, "xyz", 3);
	dir_entry(b, 0, 0, 0, BTRFS_FT_XATTR, big, 300, big + 300, 300);
	cb_addb(c, 257, BTRFS_XATTR_ITEM_KEY, 123, b);
	dir_entry(b, 0, 0, 0, BTRFS_FT_XATTR, "user.empty", 10, "", 0);
	cb_addb(c, 257, BTRFS_XATTR_ITEM_KEY, 124, b);
	/* dir entries: every type, an unknown type, a subvolume location */
	for (uint8_t t = 0; t <= 9; t++) {
		char nm[8];

		snprintf(nm, sizeof(nm), "t%u", t);
		dir_entry(b, 300 + t, BTRFS_INODE_ITEM_KEY, 0, t, nm, (uint16_t)strlen(nm), NULL, 0);
	}
	dir_entry(b, 300, BTRFS_INODE_ITEM_KEY, 0, 0x80 | 1, "enc", 3, NULL, 0);
	cb_addb(c, 256, BTRFS_DIR_ITEM_KEY, 5, b);
	dir_entry(b, 260, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1, BTRFS_FT_DIR, "subvol", 6, NULL, 0);
	cb_addb(c, 256, BTRFS_DIR_INDEX_KEY, 2, b);
	dir_entry(b, 261, BTRFS_INODE_ITEM_KEY, 0, BTRFS_FT_REG_FILE, "ab\0c", 4, NULL, 0);
	cb_addb(c, 256, BTRFS_DIR_INDEX_KEY, 3, b);
	bb_u64(b, 77);
	cb_addb(c, 256, BTRFS_DIR_LOG_ITEM_KEY, 0, b);
	bb_u64(b, 78);
	cb_addb(c, 256, BTRFS_DIR_LOG_INDEX_KEY, 2, b);

	/* file extents: inline (plain, compressed, too short), regular, prealloc, unknown */
	file_extent(b, 5, 10, BTRFS_COMPRESS_NONE, BTRFS_FILE_EXTENT_INLINE);
	bb_str(b, "0123456789");
	cb_addb(c, 257, BTRFS_EXTENT_DATA_KEY, 0, b);
	file_extent(b, 5, 4000, BTRFS_COMPRESS_ZLIB, BTRFS_FILE_EXTENT_INLINE);
	bb_str(b, "zz");
	cb_addb(c, 257, BTRFS_EXTENT_DATA_KEY, 1, b);
	file_extent(b, 5, 4000, BTRFS_COMPRESS_LZO, BTRFS_FILE_EXTENT_INLINE);
	b->n = 19;	/* shorter than the inline header: size wraps as u32 */
	cb_addb(c, 257, BTRFS_EXTENT_DATA_KEY, 2, b);
	for (uint8_t comp = 0; comp <= 4; comp++) {
		file_extent(b, 6, 8192, comp, BTRFS_FILE_EXTENT_REG);
		bb_u64(b, 12582912 + comp * 4096ULL);
		bb_u64(b, 4096);
		bb_u64(b, 0);
		bb_u64(b, 8192);
		cb_addb(c, 257, BTRFS_EXTENT_DATA_KEY, 4096ULL * (comp + 1), b);
	}
	file_extent(b, 7, 1 << 20, BTRFS_COMPRESS_NONE, BTRFS_FILE_EXTENT_PREALLOC);
	bb_u64(b, 13631488);
	bb_u64(b, 1 << 20);
	bb_u64(b, 4096);
	bb_u64(b, 8192);
	cb_addb(c, 257, BTRFS_EXTENT_DATA_KEY, 65536, b);
	file_extent(b, 7, 1 << 20, 200, 9);
	bb_u64(b, 0);
	bb_u64(b, 0);
	bb_u64(b, 0);
	bb_u64(b, 4096);
	cb_addb(c, 257, BTRFS_EXTENT_DATA_KEY, 131072, b);

	/* verity: descriptor header, descriptor bytes, merkle bytes (no body in 6.2) */
	bb_u64(b, 100);
	bb_fill(b, 0, 17);
	cb_addb(c, 257, BTRFS_VERITY_DESC_ITEM_KEY, 0, b);
	bb_str(b, "desc");
	cb_addb(c, 257, BTRFS_VERITY_DESC_ITEM_KEY, 1, b);
	bb_fill(b, 0xaa, 32);
	cb_addb(c, 257, BTRFS_VERITY_MERKLE_ITEM_KEY, 0, b);

	cb_add(c, BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, 257, NULL, 0);
	bb_bytes(b, "hello\0world", 11);
	cb_addb(c, BTRFS_ORPHAN_OBJECTID, BTRFS_STRING_ITEM_KEY, 1, b);
	free(b);
}

static void root_item_body(struct bb *b, uint64_t gen, uint64_t gen_v2, uint64_t flags)
{
	inode_body(b, 0, 040755, 5);
	bb_u64(b, gen);
	bb_u64(b, 256);
	bb_u64(b, 30425088);
	bb_u64(b, 0);
	bb_u64(b, 16384);
	bb_u64(b, 3);
	bb_u64(b, flags);
	bb_u32(b, 1);
	bb_key(b, 257, BTRFS_INODE_ITEM_KEY, 0);
	bb_u8(b, 1);
	bb_u8(b, 2);
	bb_u64(b, gen_v2);
	bb_uuid(b, 1);
	bb_uuid(b, 2);
	bb_uuid(b, 3);
	bb_u64(b, 11);
	bb_u64(b, 12);
	bb_u64(b, 13);
	bb_u64(b, 14);
	bb_timespec(b, 1700000000, 123);
	bb_timespec(b, 1600000000, 456);
	bb_timespec(b, 0, 0);
	bb_timespec(b, 1, 999999999);
	bb_fill(b, 0, 64);
}

/* root tree items: root items (full, legacy, short, oversized), refs, misc */
static void craft_root_leaf(struct cblock *c)
{
	struct bb *b = bb_new();

	root_item_body(b, 9, 9, 0);
	cb_addb(c, BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0, b);
	root_item_body(b, 9, 9, BTRFS_ROOT_SUBVOL_RDONLY | BTRFS_ROOT_SUBVOL_DEAD);
	cb_addb(c, 256, BTRFS_ROOT_ITEM_KEY, 7, b);
	root_item_body(b, 9, 8, 0);	/* generation_v2 mismatch: short form */
	cb_addb(c, 257, BTRFS_ROOT_ITEM_KEY, 0, b);
	root_item_body(b, 9, 9, 0);
	b->n = BTRFS_ROOT_ITEM_LEGACY_SIZE;	/* legacy 239-byte item */
	cb_addb(c, 258, BTRFS_ROOT_ITEM_KEY, 0, b);
	root_item_body(b, 0, 0, 0);
	b->n = 300;	/* short, gen == gen_v2: times come from the next item */
	cb_addb(c, 259, BTRFS_ROOT_ITEM_KEY, 0, b);
	/* times localtime() cannot convert (not first in the item: see print.c) */
	root_item_body(b, 9, 9, 0);
	ubt_put_le64(b->d + offsetof(struct btrfs_root_item, otime), 1ULL << 62);
	ubt_put_le64(b->d + offsetof(struct btrfs_root_item, stime), 18012701963040325632ULL);
	ubt_put_le64(b->d + offsetof(struct btrfs_root_item, rtime), (uint64_t)-1);
	cb_addb(c, 260, BTRFS_ROOT_ITEM_KEY, 0, b);
	inode_body(b, 0, 0100600, 1);
	ubt_put_le64(b->d + offsetof(struct btrfs_inode_item, mtime), 73024543218884962ULL);
	ubt_put_le64(b->d + offsetof(struct btrfs_inode_item, otime), 1ULL << 63);
	cb_addb(c, 261, BTRFS_INODE_ITEM_KEY, 0, b);
	root_item_body(b, 9, 9, 0);
	cb_addb(c, BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, 5, b);
	root_item_body(b, 9, 9, 0);
	cb_addb(c, BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, 256, b);
	root_item_body(b, 9, 9, 0);
	cb_addb(c, BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, BTRFS_DATA_RELOC_TREE_OBJECTID, b);

	bb_u64(b, 256);
	bb_u64(b, 2);
	bb_u16(b, 6);
	bb_str(b, "subvol");
	cb_addb(c, BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_REF_KEY, 256, b);
	bb_u64(b, 256);
	bb_u64(b, 2);
	bb_u16(b, 6);
	bb_str(b, "subvol");
	cb_addb(c, 256, BTRFS_ROOT_BACKREF_KEY, 5, b);
	bb_u64(b, 256);
	bb_u64(b, 3);
	bb_u16(b, 3);
	bb_bytes(b, "R\0R", 3);
	cb_addb(c, 257, BTRFS_ROOT_BACKREF_KEY, 5, b);

	/* free space cache v1 header (UNTYPED key) */
	bb_key(b, 257, BTRFS_INODE_ITEM_KEY, 0);
	bb_u64(b, 5);
	bb_u64(b, 6);
	bb_u64(b, 7);
	cb_addb(c, BTRFS_FREE_SPACE_OBJECTID, 0, 1ULL << 30, b);

	/* balance (TEMPORARY_ITEM), an unknown temporary item */
	bb_u64(b, 99);
	balance_args(b, 0);
	balance_args(b, 100);
	balance_args(b, 200);
	bb_fill(b, 0, 32);
	cb_addb(c, BTRFS_BALANCE_OBJECTID, BTRFS_TEMPORARY_ITEM_KEY, 0, b);
	cb_add(c, BTRFS_ORPHAN_OBJECTID, BTRFS_TEMPORARY_ITEM_KEY, 0, "abc", 3);
	cb_add(c, BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, 256, NULL, 0);
	free(b);
}

/* extent tree: every inline ref kind, keyed refs, v0, truncated items */
static void craft_extent_leaf(struct cblock *c)
{
	struct bb *b = bb_new();

	/* non-skinny tree block with FULL_BACKREF: tree block info + refs */
	bb_u64(b, 2);
	bb_u64(b, 5);
	bb_u64(b, BTRFS_EXTENT_FLAG_TREE_BLOCK | BTRFS_BLOCK_FLAG_FULL_BACKREF);
	bb_key(b, 256, BTRFS_INODE_ITEM_KEY, 0);
	bb_u8(b, 1);
	bb_u8(b, BTRFS_TREE_BLOCK_REF_KEY);
	bb_u64(b, 5);
	bb_u8(b, BTRFS_SHARED_BLOCK_REF_KEY);
	bb_u64(b, 12345 * 4096);
	cb_addb(c, 30408704, BTRFS_EXTENT_ITEM_KEY, 16384, b);
	/* skinny metadata with a reloc tree ref */
	bb_u64(b, 1);
	bb_u64(b, 5);
	bb_u64(b, BTRFS_EXTENT_FLAG_TREE_BLOCK);
	bb_u8(b, BTRFS_TREE_BLOCK_REF_KEY);
	bb_u64(b, BTRFS_TREE_RELOC_OBJECTID);
	cb_addb(c, 30425088, BTRFS_METADATA_ITEM_KEY, 1, b);
	/* data: extent data ref + shared data ref */
	bb_u64(b, 3);
	bb_u64(b, 5);
	bb_u64(b, BTRFS_EXTENT_FLAG_DATA);
	bb_u8(b, BTRFS_EXTENT_DATA_REF_KEY);
	bb_u64(b, BTRFS_FS_TREE_OBJECTID);
	bb_u64(b, 257);
	bb_u64(b, 0);
	bb_u32(b, 1);
	bb_u8(b, BTRFS_EXTENT_DATA_REF_KEY);
	bb_u64(b, 256);
	bb_u64(b, 258);
	bb_u64(b, 4096);
	bb_u32(b, 2);
	bb_u8(b, BTRFS_SHARED_DATA_REF_KEY);
	bb_u64(b, 999 * 4096);
	bb_u32(b, 2);
	cb_addb(c, 13631488, BTRFS_EXTENT_ITEM_KEY, 8192, b);
	/* simple-quota owner ref first: progs 6.2 stops there */
	bb_u64(b, 1);
	bb_u64(b, 5);
	bb_u64(b, BTRFS_EXTENT_FLAG_DATA);
	bb_u8(b, BTRFS_EXTENT_OWNER_REF_KEY);
	bb_u64(b, 5);
	bb_u8(b, BTRFS_EXTENT_DATA_REF_KEY);
	bb_u64(b, 5);
	bb_u64(b, 257);
	bb_u64(b, 0);
	bb_u32(b, 1);
	cb_addb(c, 13639680, BTRFS_EXTENT_ITEM_KEY, 4096, b);
	/* no flags; a ref that runs past the item end */
	bb_u64(b, 3);
	bb_u64(b, 5);
	bb_u64(b, 0);
	cb_addb(c, 13643776, BTRFS_EXTENT_ITEM_KEY, 4096, b);
	bb_u64(b, 1);
	bb_u64(b, 5);
	bb_u64(b, BTRFS_EXTENT_FLAG_DATA | BTRFS_EXTENT_FLAG_TREE_BLOCK);
	bb_key(b, 1, 2, 3);
	bb_u8(b, 0);
	bb_u8(b, BTRFS_EXTENT_DATA_REF_KEY);
	bb_u64(b, 5);
	cb_addb(c, 13647872, BTRFS_EXTENT_ITEM_KEY, 4096, b);
	/* v0 (4 bytes) and 20 bytes: nothing printed */
	cb_add(c, 13651968, BTRFS_EXTENT_ITEM_KEY, 4096, "\x01\0\0\0", 4);
	cb_add(c, 13656064, BTRFS_EXTENT_ITEM_KEY, 4096, "01234567890123456789", 20);

	/* keyed back references */
	cb_add(c, 13660160, BTRFS_TREE_BLOCK_REF_KEY, 5, NULL, 0);
	cb_add(c, 13660160, BTRFS_SHARED_BLOCK_REF_KEY, 30408704, NULL, 0);
	bb_u64(b, BTRFS_DATA_RELOC_TREE_OBJECTID);
	bb_u64(b, 258);
	bb_u64(b, 4096);
	bb_u32(b, 3);
	cb_addb(c, 13660160, BTRFS_EXTENT_DATA_REF_KEY, 0x1234, b);
	bb_u32(b, 4);
	cb_addb(c, 13660160, BTRFS_SHARED_DATA_REF_KEY, 30408704, b);
	bb_fill(b, 0, 12);
	cb_addb(c, 13660160, BTRFS_EXTENT_REF_V0_KEY, 1, b);
	bb_u64(b, 5);
	cb_addb(c, 13660160, BTRFS_EXTENT_OWNER_REF_KEY, 0, b);
	cb_add(c, 13660160, BTRFS_CSUM_ITEM_KEY, 0, NULL, 0);

	/* block groups: every profile and type combination progs spells */
	{
		static const uint64_t bg[] = {
			BTRFS_BLOCK_GROUP_DATA,
			BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP,
			BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_RAID1,
			BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_RAID10,
			BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_RAID0,
			BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID5,
			BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID6,
			BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1C3,
			BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1C4,
			0,
			BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_RAID0,
			BTRFS_BLOCK_GROUP_DATA | (1ULL << 11) | BTRFS_AVAIL_ALLOC_BIT_SINGLE,
		};

		for (size_t i = 0; i < UBT_ARRAY_SIZE(bg); i++) {
			bb_u64(b, 12345 + i);
			bb_u64(b, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
			bb_u64(b, bg[i]);
			cb_addb(c, (1ULL << 32) + i * (1ULL << 30), BTRFS_BLOCK_GROUP_ITEM_KEY,
				1ULL << 30, b);
		}
	}
	free(b);
}

/* chunk tree, dev tree, free space, uuid, quota, dev stats, csums */
static void craft_misc_leaf(struct cblock *c)
{
	struct bb *b = bb_new();
	static const uint64_t ct[] = {
		BTRFS_BLOCK_GROUP_DATA,
		BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_RAID1,
		BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_RAID10,
		BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_RAID1C3,
		0,
	};

	for (size_t i = 0; i < UBT_ARRAY_SIZE(ct); i++) {
		chunk_body(b, ct[i], (uint16_t)(i + 1), i == 2 ? 2 : 1, (int)i + 1);
		cb_addb(c, BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 100 + i, b);
	}
	chunk_body(b, BTRFS_BLOCK_GROUP_DATA, 0, 1, 0);	/* no stripes */
	cb_addb(c, BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 200, b);
	chunk_body(b, BTRFS_BLOCK_GROUP_DATA, 2, 1, 1);	/* stripe 1 past the item */
	cb_addb(c, BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 201, b);
	chunk_body(b, BTRFS_BLOCK_GROUP_DATA, 600, 1, 1);	/* past the block */
	cb_addb(c, BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 202, b);

	for (int i = 0; i < 2; i++) {
		bb_u64(b, 1);
		bb_u64(b, 2);
		bb_u64(b, 3);
		bb_u32(b, 4);
		bb_u32(b, 5);
		bb_u32(b, 6);
		bb_u64(b, 7);
		bb_u64(b, 8);
		bb_u64(b, 9);
		bb_u32(b, 10);
		bb_u8(b, 11);
		bb_u8(b, 255);
		bb_uuid(b, 0x10);
		bb_uuid(b, 0x20);
		cb_addb(c, (uint64_t)i + 1, BTRFS_DEV_ITEM_KEY, 1, b);
	}
	bb_u64(b, BTRFS_CHUNK_TREE_OBJECTID);
	bb_u64(b, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	bb_u64(b, 1ULL << 30);
	bb_u64(b, 1ULL << 26);
	bb_uuid(b, 0x30);
	cb_addb(c, 1, BTRFS_DEV_EXTENT_KEY, 1 << 20, b);
	bb_fill(b, 0, 48);
	cb_addb(c, (uint64_t)-1, BTRFS_DEV_EXTENT_KEY, (uint64_t)-1, b);

	bb_u32(b, 7);
	bb_u32(b, BTRFS_FREE_SPACE_USING_BITMAPS);
	cb_addb(c, 1ULL << 30, BTRFS_FREE_SPACE_INFO_KEY, 1ULL << 26, b);
	cb_add(c, 1ULL << 30, BTRFS_FREE_SPACE_EXTENT_KEY, 4096, NULL, 0);
	cb_add(c, (1ULL << 30) + 8192, BTRFS_FREE_SPACE_BITMAP_KEY, 32768, "\xff", 1);

	bb_u64(b, 256);
	bb_u64(b, 257);
	cb_addb(c, 0x0706050403020100ULL, BTRFS_UUID_KEY_SUBVOL, 0x0f0e0d0c0b0a0908ULL, b);
	bb_u64(b, 258);
	bb_u8(b, 1);
	cb_addb(c, 0x0706050403020100ULL, BTRFS_UUID_KEY_RECEIVED_SUBVOL, 0x0f0e0d0c0b0a0908ULL, b);
	cb_add(c, 0x1706050403020100ULL, BTRFS_UUID_KEY_RECEIVED_SUBVOL, 1, NULL, 0);

	bb_u64(b, 1);
	bb_u64(b, 9);
	bb_u64(b, 7);
	bb_u64(b, 4096);
	cb_addb(c, 0, BTRFS_QGROUP_STATUS_KEY, 0, b);
	bb_u64(b, 1);
	bb_u64(b, 9);
	bb_u64(b, BTRFS_QGROUP_STATUS_FLAG_ON | BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE);
	bb_u64(b, 4096);
	bb_u64(b, 77);
	cb_addb(c, 0, BTRFS_QGROUP_STATUS_KEY, 1, b);
	for (int i = 0; i < 5; i++)
		bb_u64(b, (uint64_t)i + 1);
	cb_addb(c, 0, BTRFS_QGROUP_INFO_KEY, (1ULL << 48) | 5, b);
	bb_u64(b, 3);
	bb_u64(b, (uint64_t)-1);
	bb_u64(b, 1ULL << 63);
	bb_u64(b, 4);
	bb_u64(b, 5);
	cb_addb(c, 0, BTRFS_QGROUP_LIMIT_KEY, 5, b);
	cb_add(c, 5, BTRFS_QGROUP_RELATION_KEY, (1ULL << 48) | 5, NULL, 0);
	cb_add(c, (1ULL << 48) | 5, BTRFS_QGROUP_RELATION_KEY, 5, NULL, 0);

	/* device stats: exact, short, long, odd length; unknown persistent item */
	for (int i = 0; i < 7; i++)
		bb_u64(b, (uint64_t)i + 1);
	cb_add(c, BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 1, b->d, 40);
	cb_add(c, BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 2, b->d, 16);
	cb_add(c, BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 3, b->d, 56);
	cb_add(c, BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 4, b->d, 44);
	cb_add(c, 7, BTRFS_PERSISTENT_ITEM_KEY, 3, b->d, 40);
	cb_add(c, (uint64_t)-1, BTRFS_PERSISTENT_ITEM_KEY, (uint64_t)-1, b->d, 8);
	b->n = 0;
	/* dev replace: the key line only in 6.2 */
	for (int i = 0; i < 9; i++)
		bb_u64(b, (uint64_t)i + 1);
	cb_addb(c, 0, BTRFS_DEV_REPLACE_KEY, 0, b);

	/* checksums: whole sectors, a partial one, none */
	for (int i = 0; i < 40; i++)
		bb_u8(b, (uint8_t)i);
	cb_addb(c, BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 1 << 20, b);
	cb_add(c, BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 2 << 20, "abc", 3);
	cb_add(c, BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 3 << 20, "abcdefgh", 8);

	/* RAID stripe items and an EXTENT_OWNER_REF key: unknown to progs 6.2 */
	bb_u64(b, 1);
	bb_u64(b, 1 << 20);
	cb_addb(c, 1 << 20, BTRFS_RAID_STRIPE_KEY, 65536, b);
	free(b);
}

/* One item of every key type 0..255 (small bodies; bodies read on). */
static void craft_all_types_leaf(struct cblock *c)
{
	uint8_t body[16], pad[600];

	/*
	 * Zero bodies (non-zero garbage would make progs print times it cannot
	 * convert, or crash); the lowest key sits at the block end with 600
	 * zero bytes, so bodies that read on stay inside the block.
	 */
	memset(pad, 0, sizeof(pad));
	memset(body, 0, sizeof(body));
	cb_add(c, 299, 0xfe, 0, pad, sizeof(pad));
	for (int t = 0; t < 256; t++)
		cb_add(c, 300, (uint8_t)t, (uint64_t)t, body, t % 3 ? 16 : 8);
}

/* Keys with every well-known objectid in several contexts (no bodies). */
static void craft_objectid_leaf(struct cblock *c)
{
	static const uint64_t oids[] = {
		0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 255, 256, 257,
		(uint64_t)-1, (uint64_t)-2, (uint64_t)-3, (uint64_t)-4, (uint64_t)-5,
		(uint64_t)-6, (uint64_t)-7, (uint64_t)-8, (uint64_t)-9, (uint64_t)-10,
		(uint64_t)-11, (uint64_t)-12, (uint64_t)-13, (uint64_t)-14, (uint64_t)-255,
		(uint64_t)-256,
	};
	/* contexts whose objectid/offset spelling differs; bodies printed are tiny */
	static const uint8_t types[] = { 0, 0xfe, BTRFS_DEV_EXTENT_KEY, BTRFS_ORPHAN_ITEM_KEY,
					 BTRFS_QGROUP_RELATION_KEY, BTRFS_UUID_KEY_SUBVOL,
					 BTRFS_TREE_BLOCK_REF_KEY };
	uint8_t pad[100];

	/* the lowest key holds the block end: bodies read on into zeros */
	memset(pad, 0, sizeof(pad));
	cb_add(c, 0, 0, 1, pad, sizeof(pad));
	for (size_t i = 0; i < UBT_ARRAY_SIZE(oids); i++)
		for (size_t j = 0; j < UBT_ARRAY_SIZE(types); j++) {
			uint8_t t = types[j];

			/* the v1 free space header needs 41 bytes; progs rejects a first key of 0 */
			if (t == 0 && (oids[i] == BTRFS_FREE_SPACE_OBJECTID || oids[i] == 0))
				continue;
			cb_add(c, oids[i], t, oids[(i + j) % UBT_ARRAY_SIZE(oids)], NULL, 0);
		}
}

/* Key contexts with bodies: DEV_ITEM, CHUNK_ITEM, PERSISTENT, QGROUP keys. */
static void craft_context_leaf(struct cblock *c)
{
	static const uint64_t oids[] = { 0, 1, 2, 5, 12, 256, (uint64_t)-1, (uint64_t)-4,
					 (uint64_t)-8, (uint64_t)-13 };
	uint8_t zero[100];

	memset(zero, 0, sizeof(zero));
	for (size_t i = 0; i < UBT_ARRAY_SIZE(oids); i++) {
		cb_add(c, oids[i], BTRFS_DEV_ITEM_KEY, 1, zero, 98);
		cb_add(c, oids[i], BTRFS_PERSISTENT_ITEM_KEY, oids[i], zero, 40);
		cb_add(c, oids[i], BTRFS_TEMPORARY_ITEM_KEY, oids[i], zero, 8);
		cb_add(c, oids[i], BTRFS_QGROUP_INFO_KEY, oids[i], zero, 40);
		cb_add(c, oids[i], BTRFS_QGROUP_LIMIT_KEY, (1ULL << 48) | oids[i], zero, 40);
		cb_add(c, BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, oids[i], zero, 20);
		cb_add(c, oids[i], BTRFS_UUID_KEY_RECEIVED_SUBVOL, oids[i], zero, 8);
	}
}

/*
 * Crafted blocks into a single-metadata image at the top of its metadata
 * chunk (mkfs uses only the bottom), then compare with progs.
 */
static void test_crafted(void)
{
	char path[PATH_MAX];
	struct img im;
	struct cblock *c = calloc(1, sizeof(*c));
	uint64_t blocks[96], top = 0;
	size_t nb = 0;
	long bad = 0;
	static const uint64_t owners[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 256,
					   (uint64_t)-1, (uint64_t)-4, (uint64_t)-5, (uint64_t)-6,
					   (uint64_t)-7, (uint64_t)-8, (uint64_t)-9, (uint64_t)-10,
					   (uint64_t)-11, (uint64_t)-12, (uint64_t)-13 };
	static const uint64_t hflags[] = {
		WRITTEN_REV1, 0, BTRFS_HEADER_FLAG_RELOC,
		BTRFS_HEADER_FLAG_WRITTEN | BTRFS_HEADER_FLAG_RELOC,
		BTRFS_HEADER_FLAG_WRITTEN | (0ULL << BTRFS_BACKREF_REV_SHIFT),
		4 | (5ULL << BTRFS_BACKREF_REV_SHIFT), 1ULL << 40,
	};

	snprintf(path, sizeof(path), "%s/crafted.img", tmpdir);
	if (mkfs_image(path, "-m single -d single -n 16384", NULL, 300) ||
	    img_open(&im, "crafted", path)) {
		CHECK(!"crafted image");
		free(c);
		return;
	}
	for (size_t i = 0; i < im.nchunks; i++)
		if ((im.chunks[i].type & BTRFS_BLOCK_GROUP_METADATA) &&
		    !(im.chunks[i].type & BTRFS_BLOCK_GROUP_SYSTEM))
			top = im.chunks[i].logical + im.chunks[i].length;
	CHECK(top != 0);
	if (!top)
		goto out;
#define NEXT_BLOCK() (blocks[nb] = top - (uint64_t)(nb + 1) * im.nodesize, blocks[nb++])

	craft_fs_leaf(c);
	CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, BTRFS_FS_TREE_OBJECTID, WRITTEN_REV1));
	craft_root_leaf(c);
	CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, BTRFS_ROOT_TREE_OBJECTID, WRITTEN_REV1));
	craft_extent_leaf(c);
	CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, BTRFS_EXTENT_TREE_OBJECTID, WRITTEN_REV1));
	craft_misc_leaf(c);
	CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, BTRFS_DEV_TREE_OBJECTID, WRITTEN_REV1));
	craft_all_types_leaf(c);
	CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, 256, WRITTEN_REV1));
	craft_objectid_leaf(c);
	CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, BTRFS_QUOTA_TREE_OBJECTID, WRITTEN_REV1));
	craft_context_leaf(c);
	CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, BTRFS_CHUNK_TREE_OBJECTID, WRITTEN_REV1));
	/* empty leaves with every owner and header flag spelling */
	for (size_t i = 0; i < UBT_ARRAY_SIZE(owners); i++)
		CHECK(!cb_write(&im, c, NEXT_BLOCK(), 0, owners[i],
				hflags[i % UBT_ARRAY_SIZE(hflags)]));
	/* nodes: odd keys, levels 1..7 */
	for (uint8_t level = 1; level <= 7; level++) {
		cb_ptr(c, 256, BTRFS_INODE_ITEM_KEY, 0, 30408704, 7);
		cb_ptr(c, 257, BTRFS_DIR_ITEM_KEY, (uint64_t)-1, 30408704 + 16384, 8);
		cb_ptr(c, 0, BTRFS_QGROUP_INFO_KEY, (1ULL << 48) | 5, 4096, 2);
		cb_ptr(c, 0x0706050403020100ULL, BTRFS_UUID_KEY_SUBVOL, 9, 8192, 3);
		if (level & 1)
			cb_ptr(c, (uint64_t)-1, 0xff, (uint64_t)-1, 12288, (uint64_t)-1);
		CHECK(!cb_write(&im, c, NEXT_BLOCK(), level, owners[level * 3 % UBT_ARRAY_SIZE(owners)],
				hflags[level % UBT_ARRAY_SIZE(hflags)]));
	}
#undef NEXT_BLOCK
	fsync(im.fd[0]);

	bad += compare_blocks(&im, blocks, nb, 0, 1);
	bad += compare_blocks(&im, blocks, nb, UBT_PRINT_HIDE_NAMES, 0);
	bad += compare_blocks(&im, blocks, nb, UBT_PRINT_CSUM_HEADERS | UBT_PRINT_CSUM_ITEMS, 0);
	total.mismatches += bad;
	printf("%-28s %5zu blocks x3 option sets: %s\n", "crafted", nb,
	       bad ? "MISMATCHES" : "identical");
	CHECK_EQ_INT(bad, 0);
out:
	img_close(&im);
	free(c);
	drop(path);
}

/* ------------------------------------------------------------------------ */
/* No-oracle checks: key strings, damaged and random blocks                 */
/* ------------------------------------------------------------------------ */

static void test_key_strings(void)
{
	static const struct {
		struct btrfs_key k;
		const char *want;
	} cases[] = {
		{ { 5, BTRFS_ROOT_ITEM_KEY, 0 }, "key (FS_TREE ROOT_ITEM 0)" },
		{ { BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, 5 },
		  "key (TREE_RELOC ROOT_ITEM FS_TREE)" },
		{ { BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, 12 },
		  "key (TREE_RELOC ROOT_ITEM 12)" },
		{ { 12, BTRFS_INODE_ITEM_KEY, (uint64_t)-1 }, "key (12 INODE_ITEM -1)" },
		{ { (uint64_t)-13, 0, 0 }, "key (18446744073709551603 UNKNOWN.0 0)" },
		{ { 0, BTRFS_QGROUP_RELATION_KEY, (1ULL << 48) | 5 }, "key (0/0 QGROUP_RELATION 1/5)" },
		{ { 1, BTRFS_DEV_ITEM_KEY, 1 }, "key (DEV_ITEMS DEV_ITEM 1)" },
		{ { 256, BTRFS_CHUNK_ITEM_KEY, 0 }, "key (FIRST_CHUNK_TREE CHUNK_ITEM 0)" },
		{ { 256, BTRFS_INODE_ITEM_KEY, 0 }, "key (256 INODE_ITEM 0)" },
		{ { 7, BTRFS_EXTENT_OWNER_REF_KEY, 5 }, "key (CSUM_TREE UNKNOWN.172 5)" },
		{ { 12, BTRFS_RAID_STRIPE_KEY, 4096 }, "key (12 UNKNOWN.230 4096)" },
		{ { BTRFS_FREE_SPACE_OBJECTID, 0, 1 }, "key (FREE_SPACE UNTYPED 1)" },
		{ { 0, BTRFS_PERSISTENT_ITEM_KEY, 1 }, "key (DEV_STATS PERSISTENT_ITEM 1)" },
		{ { (uint64_t)-1, BTRFS_DEV_EXTENT_KEY, (uint64_t)-1 },
		  "key (18446744073709551615 DEV_EXTENT -1)" },
		{ { 0x0706050403020100ULL, BTRFS_UUID_KEY_SUBVOL, 1 },
		  "key (0x0706050403020100 UUID_KEY_SUBVOL 0x0000000000000001)" },
	};
	char buf[160];

	for (size_t i = 0; i < UBT_ARRAY_SIZE(cases); i++) {
		size_t n = ubt_print_key_str(&cases[i].k, buf, sizeof(buf));

		CHECK_EQ_INT(n, strlen(cases[i].want));
		if (strcmp(buf, cases[i].want)) {
			fprintf(stderr, "key string: got '%s' want '%s'\n", buf, cases[i].want);
			CHECK(!"key string");
		}
	}
	/* truncation follows snprintf */
	CHECK_EQ_INT(ubt_print_key_str(&cases[0].k, buf, 5), strlen(cases[0].want));
	CHECK(!strcmp(buf, "key "));
}

struct sink {
	struct sbuf out, err;
};

static void sink_err(void *ctx, const char *t, size_t n)
{
	sb_add(&((struct sink *)ctx)->err, t, n);
}

static void print_to(struct sink *s, uint32_t nodesize, uint32_t flags, const uint8_t *blk,
		     int sep_err)
{
	struct ubt_print_ctx ctx = {
		.nodesize = nodesize,
		.sectorsize = 4096,
		.csum_type = BTRFS_CSUM_TYPE_CRC32,
		.flags = flags,
		.write = sb_writer,
		.wctx = &s->out,
		.err_write = sep_err ? sink_err : NULL,
		.err_wctx = s,
	};

	sb_reset(&s->out);
	sb_reset(&s->err);
	ubt_print_tree_block(&ctx, blk);
}

/*
 * Blocks no checker would pass.  Each is printed from a heap buffer of
 * exactly nodesize bytes, so ASan catches any read past the block.
 */
static void test_damaged_blocks(void)
{
	const uint32_t ns = 4096;
	struct sink s = { 0 };
	uint8_t *b = calloc(1, ns);
	struct btrfs_header *h = (void *)b;
	struct btrfs_item *it;

	/* an item pointer outside the leaf: error line, the rest skipped */
	btrfs_set_header_bytenr(h, 65536);
	btrfs_set_header_nritems(h, 2);
	it = btrfs_leaf_item(b, 0);
	btrfs_set_disk_key_type(btrfs_item_key(it), BTRFS_INODE_ITEM_KEY);
	btrfs_set_item_offset(it, ns - 101 - 160);
	btrfs_set_item_size(it, 160);
	it = btrfs_leaf_item(b, 1);
	btrfs_set_disk_key_type(btrfs_item_key(it), BTRFS_INODE_ITEM_KEY);
	btrfs_set_item_offset(it, ns);
	btrfs_set_item_size(it, 160);
	print_to(&s, ns, 0, b, 1);
	CHECK(s.out.p && strstr(s.out.p, "\titem 0 key (0 INODE_ITEM 0) itemoff 3835 itemsize 160\n"));
	CHECK(s.out.p && !strstr(s.out.p, "item 1"));
	CHECK(s.err.p && strstr(s.err.p, "ERROR: leaf 65536 slot 1 pointer invalid, offset 4096 size 160 leaf data limit 3995\n"));
	CHECK(s.err.p && strstr(s.err.p, "ERROR: skip remaining slots\n"));
	/* without an error writer the line goes, in order, into the listing */
	print_to(&s, ns, 0, b, 0);
	CHECK(s.out.p && strstr(s.out.p, "rtime") < strstr(s.out.p, "ERROR: leaf 65536 slot 1"));
	/* offset + size overflowing 32 bits */
	btrfs_set_item_offset(it, 100);
	btrfs_set_item_size(it, 0xffffffffu);
	print_to(&s, ns, 0, b, 1);
	CHECK(s.err.p && strstr(s.err.p, "pointer invalid"));

	/* nritems beyond the headers that fit */
	btrfs_set_header_nritems(h, 1000000);
	print_to(&s, ns, 0, b, 1);
	CHECK(s.err.p && strstr(s.err.p, "ERROR: "));

	/* a node claiming more pointers than fit */
	memset(b, 0, ns);
	btrfs_set_header_bytenr(h, 65536);
	btrfs_set_header_level(h, 1);
	btrfs_set_header_nritems(h, 0xffffffffu);
	print_to(&s, ns, 0, b, 1);
	CHECK(s.err.p && strstr(s.err.p, "WARNING: node nr_items corrupted, has 4294967295 limit 121, continue anyway\n"));
	CHECK(s.out.p && strstr(s.out.p, "node 65536 level 1 items 4294967295 free space 122 generation 0 owner 0\n"));
	{
		size_t keys = 0;

		for (const char *p = s.out.p; (p = strstr(p, "\tkey (")); p++)
			keys++;
		CHECK_EQ_INT(keys, 121);
	}

	/* items at the very end of the block whose bodies claim to run on */
	memset(b, 0, ns);
	btrfs_set_header_bytenr(h, 65536);
	btrfs_set_header_nritems(h, 12);
	{
		static const uint8_t types[] = {
			BTRFS_DIR_ITEM_KEY, BTRFS_INODE_REF_KEY, BTRFS_INODE_EXTREF_KEY,
			BTRFS_ROOT_ITEM_KEY, BTRFS_EXTENT_ITEM_KEY, BTRFS_CHUNK_ITEM_KEY,
			BTRFS_DEV_ITEM_KEY, BTRFS_PERSISTENT_ITEM_KEY, BTRFS_TEMPORARY_ITEM_KEY,
			BTRFS_STRING_ITEM_KEY, BTRFS_EXTENT_CSUM_KEY, BTRFS_INODE_ITEM_KEY,
		};

		for (unsigned i = 0; i < 12; i++) {
			it = btrfs_leaf_item(b, i);
			btrfs_set_disk_key_objectid(btrfs_item_key(it),
						    types[i] == BTRFS_TEMPORARY_ITEM_KEY ? BTRFS_BALANCE_OBJECTID : 0);
			btrfs_set_disk_key_type(btrfs_item_key(it), types[i]);
			btrfs_set_item_offset(it, ns - 101 - 3);
			btrfs_set_item_size(it, 3);
		}
		/* the body: huge name lengths, an inline ref type, huge stripes */
		memset(b + ns - 3, 0xff, 3);
		b[ns - 3] = BTRFS_EXTENT_DATA_REF_KEY;
	}
	for (uint32_t f = 0; f < 8; f++) {
		print_to(&s, ns, f, b, 1);
		CHECK(s.out.p && strstr(s.out.p, "item 11 key"));
	}

	/* too small to be a tree block */
	print_to(&s, 50, 0, b, 1);
	CHECK(s.err.p && strstr(s.err.p, "ERROR: "));
	CHECK_EQ_INT(s.out.n, 0);

	free(b);
	free(s.out.p);
	free(s.err.p);
}

/* Random and bit-flipped blocks: must not crash or read outside (ASan). */
static void test_random_blocks(void)
{
	static const uint32_t sizes[] = { 4096, 16384, 65536 };
	struct sink s = { 0 };
	long printed = 0;

	for (size_t z = 0; z < UBT_ARRAY_SIZE(sizes); z++) {
		uint32_t ns = sizes[z];
		uint8_t *b = malloc(ns);

		for (int iter = 0; iter < 300; iter++) {
			struct btrfs_header *h = (void *)b;
			uint32_t nr;

			for (uint32_t i = 0; i < ns; i++)
				b[i] = (uint8_t)rng();
			/* plausible headers make the printer walk deeper */
			nr = (uint32_t)(rng() % 64);
			btrfs_set_header_nritems(h, iter % 10 ? nr : (uint32_t)rng());
			btrfs_set_header_level(h, iter % 7 ? 0 : (uint8_t)(rng() % 8));
			if (iter % 3 == 0) {
				uint32_t end = ns - 101;

				for (uint32_t i = 0; i < nr; i++) {
					struct btrfs_item *it = btrfs_leaf_item(b, i);
					uint32_t sz = (uint32_t)(rng() % 200);

					if (sz > end)
						sz = end;
					end -= sz;
					btrfs_set_disk_key_type(btrfs_item_key(it),
								(uint8_t)(rng() % 256));
					btrfs_set_item_offset(it, end);
					btrfs_set_item_size(it, sz);
				}
			}
			print_to(&s, ns, (uint32_t)(rng() % 8), b, iter & 1);
			printed += (long)s.out.n;
		}
		free(b);
	}
	CHECK(printed > 0);
	free(s.out.p);
	free(s.err.p);
}

/* Real leaves with random byte flips (exercises every item printer). */
static void test_flipped_real_blocks(const struct img *im)
{
	uint64_t *blocks;
	size_t n = list_blocks(im, &blocks);
	uint8_t *orig = malloc(im->nodesize), *b = malloc(im->nodesize);
	struct sink s = { 0 };

	for (size_t i = 0; i < n; i++) {
		if (read_block(im, blocks[i], orig))
			continue;
		for (int iter = 0; iter < 40; iter++) {
			memcpy(b, orig, im->nodesize);
			for (int f = 0; f < 1 + iter % 8; f++) {
				uint32_t pos = (uint32_t)(rng() % im->nodesize);

				/* bias towards headers and item headers */
				if (f & 1)
					pos = (uint32_t)(rng() % 700);
				b[pos] ^= (uint8_t)(1u << (rng() % 8));
			}
			print_to(&s, im->nodesize, (uint32_t)(rng() % 8), b, 1);
		}
	}
	free(blocks);
	free(orig);
	free(b);
	free(s.out.p);
	free(s.err.p);
}

/* ------------------------------------------------------------------------ */
/* The kernel-made image (root only)                                        */
/* ------------------------------------------------------------------------ */

static const char kernel_script[] =
	"#!/bin/sh\n"
	"# Build kernel.img (clean) and kernel-log.img (copy with a live log tree).\n"
	"set -eu\n"
	"out=$1\n"
	"mnt=$(mktemp -d \"$out/mnt.XXXXXX\")\n"
	"loop2=\n"
	"cleanup() {\n"
	"\tset +e\n"
	"\texec 3>&- 2>/dev/null\n"
	"\tmountpoint -q \"$mnt\" && umount \"$mnt\"\n"
	"\t[ -n \"$loop2\" ] && losetup -d \"$loop2\" 2>/dev/null\n"
	"\trmdir \"$mnt\"\n"
	"}\n"
	"trap cleanup EXIT\n"
	"trap 'exit 1' INT TERM\n"
	"truncate -s 1G \"$out/a.img\" \"$out/kernel.img\"\n"
	"mkfs.btrfs -q -f -n 4096 \"$out/a.img\" >/dev/null 2>&1\n"
	"mount -o loop,commit=300 \"$out/a.img\" \"$mnt\" || exit 77\n"
	"# a finished device replace leaves a DEV_REPLACE item\n"
	"loop2=$(losetup -f --show \"$out/kernel.img\")\n"
	"btrfs replace start -B -f 1 \"$loop2\" \"$mnt\" >/dev/null\n"
	"rm -f \"$out/a.img\"\n"
	"btrfs quota enable \"$mnt\"\n"
	"btrfs subvolume create \"$mnt/sv1\" >/dev/null\n"
	"btrfs qgroup create 1/100 \"$mnt\"\n"
	"btrfs qgroup assign --no-rescan 0/256 1/100 \"$mnt\" >/dev/null 2>&1 || true\n"
	"btrfs qgroup limit 10M 0/256 \"$mnt\"\n"
	"for c in zstd lzo zlib; do\n"
	"\tmount -o remount,compress-force=$c \"$mnt\"\n"
	"\tmkdir \"$mnt/sv1/$c\"\n"
	"\tyes \"compress me $c\" | head -c 300000 > \"$mnt/sv1/$c/big\"\n"
	"\techo \"small $c\" > \"$mnt/sv1/$c/small\"\n"
	"\thead -c 3000 /dev/zero > \"$mnt/sv1/$c/zero3k\"\n"
	"done\n"
	"mount -o remount,compress-force=no,compress=no \"$mnt\" 2>/dev/null ||"
	" mount -o remount,compress=no \"$mnt\"\n"
	"mkdir \"$mnt/d\"\n"
	"i=0\n"
	"while [ $i -lt 300 ]; do\n"
	"\thead -c $(( (i * 977) % 20000 )) /dev/urandom > \"$mnt/d/f$i\"\n"
	"\ti=$((i+1))\n"
	"done\n"
	"dd if=/dev/urandom of=\"$mnt/d/big\" bs=1M count=3 2>/dev/null\n"
	"cp --reflink=always \"$mnt/d/big\" \"$mnt/d/big.reflink\"\n"
	"cp --reflink=always \"$mnt/d/big\" \"$mnt/sv1/big.reflink\"\n"
	"fallocate -l 1M \"$mnt/d/prealloc\"\n"
	"fallocate -l 1M \"$mnt/d/prealloc2\"\n"
	"dd if=/dev/urandom of=\"$mnt/d/prealloc2\" bs=4k count=3 seek=10 conv=notrunc 2>/dev/null\n"
	"touch \"$mnt/d/nocow\"; chattr +C \"$mnt/d/nocow\" 2>/dev/null || true\n"
	"head -c 100000 /dev/urandom > \"$mnt/d/nocow\"\n"
	"btrfs property set \"$mnt/d/f1\" compression zstd\n"
	"ln -s f1 \"$mnt/d/sym\"\n"
	"mkfifo \"$mnt/d/fifo\"; mknod \"$mnt/d/chr\" c 1 3; mknod \"$mnt/d/blk\" b 7 0\n"
	"long=$(head -c 200 /dev/zero | tr '\\0' L)\n"
	"i=0\n"
	"while [ $i -lt 40 ]; do ln \"$mnt/d/f2\" \"$mnt/d/$long$i\"; i=$((i+1)); done\n"
	"btrfs subvolume snapshot \"$mnt/sv1\" \"$mnt/snap1\" >/dev/null\n"
	"btrfs subvolume snapshot -r \"$mnt/sv1\" \"$mnt/snap-ro\" >/dev/null\n"
	"echo change > \"$mnt/snap1/zstd/small\"\n"
	"btrfs subvolume create \"$mnt/sv-del\" >/dev/null\n"
	"btrfs send -q \"$mnt/snap-ro\" 2>/dev/null | btrfs receive -q \"$mnt/d\" >/dev/null 2>&1 || true\n"
	"mkdir \"$mnt/frag\"\n"
	"i=0\n"
	"while [ $i -lt 1500 ]; do head -c 8192 /dev/zero > \"$mnt/frag/$i\"; i=$((i+1)); done\n"
	"sync\n"
	"i=0\n"
	"while [ $i -lt 1500 ]; do rm \"$mnt/frag/$i\"; i=$((i+2)); done\n"
	"btrfs device stats -z \"$mnt\" >/dev/null\n"
	"sync\n"
	"# an open unlinked file (orphan), a deleted subvolume, then a log tree\n"
	"exec 3>\"$mnt/d/orphan\"; echo x >&3; rm \"$mnt/d/orphan\"\n"
	"btrfs subvolume delete \"$mnt/sv-del\" >/dev/null\n"
	"sync\n"
	"echo logged > \"$mnt/d/logged\"; mkdir \"$mnt/d/logdir\"; echo y > \"$mnt/d/logdir/z\"\n"
	"sync \"$mnt/d/logged\" \"$mnt/d/logdir/z\" \"$mnt/d/logdir\"\n"
	"cp --sparse=always \"$out/kernel.img\" \"$out/kernel-log.img\"\n"
	"exec 3>&-\n"
	"# a paused balance leaves its item (BALANCE TEMPORARY_ITEM) on disk\n"
	"i=0\n"
	"while [ $i -lt 8 ]; do head -c 16M /dev/zero > \"$mnt/bal$i\"; i=$((i+1)); done\n"
	"sync\n"
	"btrfs balance start --full-balance \"$mnt\" >/dev/null 2>&1 &\n"
	"bal=$!\n"
	"i=0\n"
	"while [ $i -lt 50 ] && ! btrfs balance pause \"$mnt\" >/dev/null 2>&1; do sleep 0.1; i=$((i+1)); done\n"
	"wait $bal || true\n"
	"umount \"$mnt\"\n";

static void test_kernel_image(void)
{
	char script[PATH_MAX], img[PATH_MAX];
	FILE *f;
	int st;

	if (geteuid() != 0) {
		printf("kernel image: not root, skipped\n");
		return;
	}
	if (run("grep -qw btrfs /proc/filesystems 2>/dev/null || modprobe btrfs 2>/dev/null")) {
		printf("kernel image: no btrfs in this kernel, skipped\n");
		return;
	}
	snprintf(script, sizeof(script), "%s/mk-kernel.sh", tmpdir);
	f = fopen(script, "w");
	if (!f || fputs(kernel_script, f) < 0) {
		CHECK(!"write kernel script");
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	st = run("sh '%s' '%s' >&2", script, tmpdir);
	if (st == 77) {
		printf("kernel image: cannot loop-mount here, skipped\n");
		return;
	}
	CHECK_EQ_INT(st, 0);
	if (st)
		return;
	snprintf(img, sizeof(img), "%s/kernel.img", tmpdir);
	compare_paths("kernel", img);
	drop(img);
	snprintf(img, sizeof(img), "%s/kernel-log.img", tmpdir);
	compare_paths("kernel-log-tree", img);
	drop(img);
}

/* ------------------------------------------------------------------------ */

static void print_coverage(void)
{
	char line[4096];
	size_t n = 0;

	printf("compared %ld blocks (%ld leaves, %ld nodes), %ld mismatching block prints\n",
	       total.blocks, total.leaves, total.nodes, total.mismatches);
	n += (size_t)snprintf(line + n, sizeof(line) - n, "item types seen:");
	for (int t = 0; t < 256; t++) {
		char name[32];

		if (!total.types[t] || n >= sizeof(line))
			continue;
		btrfs_key_type_str(0, (uint8_t)t, name, sizeof(name));
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %s:%ld", name, total.types[t]);
	}
	printf("%s\n", line);
}

static void cleanup_tmp(void)
{
	if (keep) {
		printf("kept %s\n", tmpdir);
		return;
	}
	run("rm -rf --one-file-system '%s'", tmpdir);
}

/* Killed (^C, a closed pipe): remove the temp dir all the same. */
static void on_signal(int sig)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/rm", "rm", "-rf", "--one-file-system", tmpdir, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	char src[PATH_MAX];

	verbose = getenv("UBTRFS_TEST_VERBOSE") != NULL;
	keep = getenv("UBTRFS_TEST_KEEP") && !strcmp(getenv("UBTRFS_TEST_KEEP"), "1");
	test_key_strings();
	test_damaged_blocks();
	test_random_blocks();

	if (!have_progs()) {
		int r = t_skip("btrfs-progs (btrfs, mkfs.btrfs) not installed");

		return t_failures ? 1 : r;
	}
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (!keep) {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGHUP, on_signal);
		signal(SIGPIPE, on_signal);
	}
	{
		/* mkfs.btrfs may be installed but unusable (e.g. no access to mount info) */
		char probe[PATH_MAX];

		snprintf(probe, sizeof(probe), "%s/probe.img", tmpdir);
		if (mkfs_image(probe, "", NULL, 128)) {
			int r = t_skip("mkfs.btrfs cannot make an image here");

			cleanup_tmp();
			return t_failures ? 1 : r;
		}
		drop(probe);
	}
	if (argc > 1) {
		strict = 0;
		for (int i = 1; i < argc; i++)
			compare_paths(argv[i], argv[i]);
		print_coverage();
		cleanup_tmp();
		return t_finish();
	}

	snprintf(src, sizeof(src), "%s/src", tmpdir);
	CHECK(!make_source_tree(src));
	test_mkfs_images(src);
	{
		/* bit flips over the blocks of a rich image (ASan/UBSan) */
		struct img im;
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/flip.img", tmpdir);
		if (!mkfs_image(path, "-n 4096 -O ^no-holes", src, 300) &&
		    !img_open(&im, "flip", path)) {
			test_flipped_real_blocks(&im);
			img_close(&im);
		} else {
			CHECK(!"flip image");
		}
		drop(path);
	}
	test_crafted();
	test_kernel_image();
	print_coverage();
	cleanup_tmp();
	return t_finish();
}
