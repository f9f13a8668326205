/*
 * cow_stress: drive the copy-on-write engine against a model.
 *
 *   cow_stress IMAGE[,IMAGE...] OPS SEED COMMIT_EVERY MODEL_OUT
 *
 * Opens the filesystem on the IMAGEs for writing and applies OPS random
 * operations to the top-level subvolume's root directory (inode 256): set
 * an xattr "user.kN" to a random value (insert, or replace: delete +
 * insert), grow or shrink a value in place (extend / truncate the item), or
 * remove one.  Values run from empty to ~3/4 of a leaf, so
 * leaves split, merge and empty, and the tree grows and shrinks in height.
 * Every COMMIT_EVERY operations it commits, then checks every xattr against
 * the model through the read side; every tenth commit it also closes and
 * reopens the image, so the check reads what is on disk.  At the end it
 * removes about half of the keys (the tree shrinks), commits, verifies
 * again, and writes the model to MODEL_OUT as `getfattr -d -e hex` prints
 * it, for the kernel comparison in t-cow-stress.sh.
 *
 * xattrs "user.kN" already there (from an earlier run, possibly changed by
 * the kernel since) are read into the model first.
 *
 * Crash points: with UBTRFS_CRASH_AFTER=N in the environment every device
 * write after the Nth is dropped (io layer).  The run stops after the
 * commit during which that happened, without verifying (the disk no longer
 * matches memory), and writes two models: MODEL_OUT.G for the last commit
 * all of whose writes landed (generation G) and MODEL_OUT.G+1 for the one
 * in flight; the image on disk must be one of the two.  With
 * UBTRFS_COUNT_WRITES set, the number of writes is printed at the end.
 *
 * UBTRFS_COW_SUBVOL=ID works in subvolume ID instead of the top level (its
 * root directory, inode 256 too).
 *
 * Exit: 0 ok, 1 mismatch or engine error (with the reason).
 */
#include "base/base.h"
#include "fs/fs.h"
#include "trans/trans.h"
#include "engine_tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 65536
#define STRESS_KEYS 4096
#define ROOT_DIR 256ULL

struct model_ent {
	bool present;
	uint32_t len;
	uint8_t *val;
};

static struct model_ent model[MAX_KEYS];
static uint64_t subvol = BTRFS_FS_TREE_OBJECTID;
static uint64_t rng_state;
static unsigned long stats_resize;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static void key_name(unsigned k, char *buf, size_t n)
{
	snprintf(buf, n, "user.k%u", k);
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "cow_stress: %s: %s\n", what, ubt_strerror(err));
	return 1;
}

static int open_fs(const char *images, struct ubt_fs **fs)
{
	return engine_open(images, fs);
}

static void close_fs(struct ubt_fs *fs)
{
	engine_close(fs);
}

/* Delete the XATTR_ITEM of name k (its hash must be unique in the model). */
static int del_xattr(struct ubt_trans *t, struct ubt_wroot *root, unsigned k)
{
	char name[32];
	key_name(k, name, sizeof(name));
	struct btrfs_key key = { ROOT_DIR, BTRFS_XATTR_ITEM_KEY, ubt_name_hash(name, strlen(name)) };
	return ubt_delete_key(t, root, &key);
}

static int set_xattr(struct ubt_trans *t, struct ubt_wroot *root, unsigned k, const uint8_t *val,
		     uint32_t len)
{
	char name[32];
	key_name(k, name, sizeof(name));
	size_t nl = strlen(name);
	struct btrfs_key key = { ROOT_DIR, BTRFS_XATTR_ITEM_KEY, ubt_name_hash(name, nl) };
	uint8_t *p;
	int ret = ubt_insert_item(t, root, &key, (uint32_t)(sizeof(struct btrfs_dir_item) + nl + len),
				  &p);
	if (ret)
		return ret;
	struct btrfs_dir_item *di = (void *)p;
	btrfs_set_dir_transid(di, t->transid);
	btrfs_set_dir_data_len(di, (uint16_t)len);
	btrfs_set_dir_name_len(di, (uint16_t)nl);
	btrfs_set_dir_type(di, BTRFS_FT_XATTR);
	memcpy(p + sizeof(*di), name, nl);
	memcpy(p + sizeof(*di) + nl, val, len);
	return 0;
}

/* Resize the value of xattr k in place to new_len (item extend/truncate);
 * new bytes come from val. */
static int resize_xattr(struct ubt_trans *t, struct ubt_wroot *root, unsigned k,
			uint32_t new_len, const uint8_t *val)
{
	char name[32];
	key_name(k, name, sizeof(name));
	size_t nl = strlen(name);
	struct btrfs_key key = { ROOT_DIR, BTRFS_XATTR_ITEM_KEY, ubt_name_hash(name, nl) };
	struct ubt_path path;
	uint32_t old_len = model[k].len;
	int ret;

	ubt_path_init(&path);
	if (new_len > old_len)
		ret = ubt_search_slot_grow(t, root, &key, &path, new_len - old_len);
	else
		ret = ubt_search_slot_w(t, root, &key, &path, 0);
	if (ret == 1)
		ret = -ENOENT;
	if (!ret) {
		uint32_t item = (uint32_t)(sizeof(struct btrfs_dir_item) + nl);
		if (new_len > old_len)
			ret = ubt_extend_item(t, &path, new_len - old_len);
		else
			ret = ubt_truncate_item(t, &path, item + new_len, false);
		if (!ret) {
			uint8_t *p = ubt_eb_witem_data(path.nodes[0], path.slots[0]);
			btrfs_set_dir_data_len((struct btrfs_dir_item *)p, (uint16_t)new_len);
			if (new_len > old_len)
				memcpy(p + item + old_len, val + old_len, new_len - old_len);
		}
	}
	ubt_path_release(&t->w->fs->tree, &path);
	return ret;
}

static int cmp_hash(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int verify(struct ubt_fs *fs, unsigned nkeys, const char *when)
{
	const struct ubt_subvol *sv;
	int ret = ubt_fs_subvol(fs, subvol, &sv);
	static uint8_t buf[70000];
	int bad = 0;

	if (ret)
		return fail("subvolume", ret);
	for (unsigned k = 0; k < nkeys; k++) {
		char name[32];
		key_name(k, name, sizeof(name));
		ssize_t n = ubt_xattr_get(fs, sv, ROOT_DIR, name, buf, sizeof(buf));
		if (!model[k].present) {
			if (n != -ENODATA) {
				fprintf(stderr, "%s: %s should be absent, got %zd\n", when, name, n);
				bad++;
			}
			continue;
		}
		if (n < 0 || (uint32_t)n != model[k].len ||
		    memcmp(buf, model[k].val, model[k].len)) {
			fprintf(stderr, "%s: %s: got %zd bytes, want %u\n", when, name, n,
				model[k].len);
			bad++;
		}
	}
	/* And nothing else: the listing has exactly the model's names. */
	static char names[MAX_KEYS * 16];
	ssize_t ln = ubt_xattr_list(fs, sv, ROOT_DIR, names, sizeof(names));
	unsigned listed = 0, want = 0;
	for (ssize_t i = 0; ln > 0 && i < ln; i += (ssize_t)strlen(names + i) + 1)
		if (!strncmp(names + i, "user.k", 6))
			listed++;
	for (unsigned k = 0; k < nkeys; k++)
		want += model[k].present;
	if (ln < 0 || listed != want) {
		fprintf(stderr, "%s: listxattr gives %u names (%zd), want %u\n", when, listed, ln,
			want);
		bad++;
	}
	return bad ? 1 : 0;
}

static int write_model(const char *path, unsigned nkeys)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return fail(path, -errno);
	/* getfattr -d -m 'user\.k' -e hex sorts by name. */
	char (*names)[32] = calloc(nkeys, 32);
	unsigned n = 0;
	for (unsigned k = 0; k < nkeys; k++)
		if (model[k].present)
			key_name(k, names[n++], 32);
	qsort(names, n, 32, (int (*)(const void *, const void *))strcmp);
	for (unsigned i = 0; i < n; i++) {
		unsigned k = (unsigned)strtoul(names[i] + 6, NULL, 10);
		fprintf(f, "%s=", names[i]);
		if (model[k].len == 0) {
			fputs("0x\n", f);	/* getfattr -e hex prints an empty value as 0x */
			continue;
		}
		fputs("0x", f);
		for (uint32_t b = 0; b < model[k].len; b++)
			fprintf(f, "%02x", model[k].val[b]);
		fputs("\n", f);
	}
	free(names);
	return fclose(f) ? fail(path, -errno) : 0;
}

/*
 * UBTRFS_COW_FILL=1: insert large xattrs until ENOSPC; that insert must fail
 * cleanly (filesystem not aborted), the commit after it must succeed, and
 * the model must hold after reopening.  UBTRFS_COW_FILL=2: delete every
 * xattr of the model (committing and retrying when a delete meets ENOSPC,
 * as space freed in a transaction returns at its commit), then commit.
 */
static int fill_mode(const char *image, struct ubt_fs *fs, int phase, unsigned nkeys,
		     const bool *usable, uint32_t maxval, unsigned long every, const char *out)
{
	struct ubt_trans *t = NULL;
	struct ubt_wroot *root;
	uint8_t *val = malloc(maxval + 1);
	unsigned long done = 0, enospc = 0;
	int ret = 0;

	for (unsigned k = 0; k < nkeys; k++) {
		if (!usable[k] || (phase == 1 && model[k].present) ||
		    (phase == 2 && !model[k].present))
			continue;
		if (!t) {
			ret = ubt_trans_start(fs, &t);
			if (!ret)
				ret = ubt_wroot_get(t, subvol, &root);
			if (ret)
				return fail("start transaction", ret);
		}
		if (phase == 1) {
			uint32_t len = maxval / 2 + (uint32_t)(rnd() % (maxval / 2));
			for (uint32_t b = 0; b < len; b++)
				val[b] = (uint8_t)rnd();
			ret = set_xattr(t, root, k, val, len);
			if (ret == -ENOSPC) {
				if (fs->wr->aborted)
					return fail("ENOSPC aborted the transaction", ret);
				enospc++;
				break;
			}
			if (ret)
				return fail("insert", ret);
			model[k].val = malloc(len + 1);
			memcpy(model[k].val, val, len);
			model[k].len = len;
			model[k].present = true;
		} else {
			ret = del_xattr(t, root, k);
			if (ret == -ENOSPC && !fs->wr->aborted) {
				enospc++;
				ret = ubt_trans_commit(t);
				t = NULL;
				if (ret)
					return fail("commit after ENOSPC", ret);
				k--;	/* again, with the pinned space back */
				continue;
			}
			if (ret)
				return fail("delete", ret);
			model[k].present = false;
		}
		done++;
		if (done % every == 0) {
			ret = ubt_trans_commit(t);
			t = NULL;
			if (ret)
				return fail("commit", ret);
		}
	}
	if (t) {
		ret = ubt_trans_commit(t);
		if (ret)
			return fail("final commit", ret);
	}
	if (phase == 1 && !enospc)
		return fail("the filesystem never filled up", -EINVAL);
	close_fs(fs);
	ret = open_fs(image, &fs);
	if (ret)
		return fail("reopen", ret);
	if (verify(fs, nkeys, phase == 1 ? "after filling" : "after emptying"))
		return 1;
	uint64_t meta = 0, used = 0;
	for (size_t i = 0; i < fs->wr->nbgs; i++) {
		if (fs->wr->bgs[i].flags & BTRFS_BLOCK_GROUP_METADATA) {
			meta += fs->wr->bgs[i].len;
			used += fs->wr->bgs[i].used;
		}
	}
	fprintf(stderr, "cow_stress: %s %lu xattrs (%lu ENOSPC); metadata %" PRIu64 " of %" PRIu64
		" bytes used\n", phase == 1 ? "filled" : "deleted", done, enospc, used, meta);
	close_fs(fs);
	free(val);
	return write_model(out, nkeys);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: cow_stress IMAGE OPS SEED COMMIT_EVERY MODEL_OUT\n");
		return 2;
	}
	const char *image = argv[1];
	if (getenv("UBTRFS_COW_SUBVOL"))
		subvol = strtoull(getenv("UBTRFS_COW_SUBVOL"), NULL, 0);
	unsigned long ops = strtoul(argv[2], NULL, 0);
	rng_state = strtoull(argv[3], NULL, 0) * 2654435761u + 1;
	unsigned long every = strtoul(argv[4], NULL, 0);
	struct ubt_fs *fs;
	struct ubt_trans *t = NULL;
	struct ubt_wroot *root;
	int ret;

	ret = open_fs(image, &fs);
	if (ret)
		return fail("open for writing", ret);
	uint32_t leaf = btrfs_leaf_data_size(fs->nodesize);
	uint32_t maxval = leaf * 3 / 4 - 64;
	if (maxval > 16000)
		maxval = 16000;	/* the kernel's xattr size limit is about a leaf */
	/* The same key space in every run, so a later run sees all names. */
	const char *fill = getenv("UBTRFS_COW_FILL");
	unsigned nkeys = fill ? MAX_KEYS : STRESS_KEYS;

	/* Names whose hashes collide with a lower one are never used. */
	static bool usable[MAX_KEYS];
	static struct { uint64_t h; unsigned k; } hk[MAX_KEYS];
	for (unsigned k = 0; k < nkeys; k++) {
		char a[32];
		key_name(k, a, sizeof(a));
		hk[k].h = ubt_name_hash(a, strlen(a));
		hk[k].k = k;
		usable[k] = true;
	}
	qsort(hk, nkeys, sizeof(hk[0]), cmp_hash);
	for (unsigned i = 1; i < nkeys; i++)
		if (hk[i].h == hk[i - 1].h)
			usable[hk[i].k > hk[i - 1].k ? hk[i].k : hk[i - 1].k] = false;

	/* What an earlier run (or the kernel) left. */
	const struct ubt_subvol *sv0;
	ret = ubt_fs_subvol(fs, subvol, &sv0);
	if (ret)
		return fail("subvolume", ret);
	static uint8_t vbuf[70000];
	unsigned preexisting = 0;
	for (unsigned k = 0; k < nkeys; k++) {
		char name[32];
		key_name(k, name, sizeof(name));
		ssize_t n = ubt_xattr_get(fs, sv0, ROOT_DIR, name, vbuf, sizeof(vbuf));
		if (n == -ENODATA)
			continue;
		if (n < 0)
			return fail(name, (int)n);
		model[k].present = true;
		model[k].len = (uint32_t)n;
		model[k].val = malloc((size_t)n + 1);
		memcpy(model[k].val, vbuf, (size_t)n);
		preexisting++;
	}
	if (preexisting)
		fprintf(stderr, "cow_stress: %u xattrs already there\n", preexisting);

	if (fill)
		return fill_mode(image, fs, atoi(fill), nkeys, usable, maxval, every, argv[5]);

	const char *crash = getenv("UBTRFS_CRASH_AFTER");
	if (crash)
		ubt_bdev_crash_after(strtoll(crash, NULL, 0));
	/* The model as of the last commit that fully landed (crash mode). */
	static struct model_ent landed[MAX_KEYS];
	uint64_t landed_gen = btrfs_super_generation(&fs->vol->super);
	if (crash) {
		for (unsigned k = 0; k < nkeys; k++) {
			landed[k] = model[k];
			if (model[k].present) {
				landed[k].val = malloc(model[k].len + 1);
				memcpy(landed[k].val, model[k].val, model[k].len);
			}
		}
	}

	unsigned long commits = 0;
	uint8_t *val = malloc(maxval + 1);
	for (unsigned long i = 0; i <= ops; i++) {
		bool final = i == ops;
		if (!t) {
			ret = ubt_trans_start(fs, &t);
			if (!ret)
				ret = ubt_wroot_get(t, subvol, &root);
			if (ret)
				return fail("start transaction", ret);
		}
		if (final) {
			/* Shrink: drop about half of what is left. */
			for (unsigned k = 0; k < nkeys; k++) {
				if (model[k].present && (rnd() & 1)) {
					ret = del_xattr(t, root, k);
					if (ret)
						return fail("final delete", ret);
					model[k].present = false;
				}
			}
		} else {
			unsigned k = (unsigned)(rnd() % nkeys);
			if (!usable[k])
				continue;
			bool del = model[k].present && rnd() % 3 == 0;
			unsigned r = (unsigned)(rnd() % 6);
			if (model[k].present && !del && r < 2) {
				/* In place: grow (r 0) or shrink (r 1). */
				uint32_t len = model[k].len, nlen;
				if (r == 0)
					nlen = len + (uint32_t)(rnd() % (rnd() % 8 ? 100 : 4000)) + 1;
				else
					nlen = len ? (uint32_t)(rnd() % len) : 0;
				if (nlen > maxval)
					nlen = maxval;
				uint8_t *nv = malloc(nlen + 1);
				memcpy(nv, model[k].val, len < nlen ? len : nlen);
				for (uint32_t b = len; b < nlen; b++)
					nv[b] = (uint8_t)rnd();
				if (nlen != len) {
					ret = resize_xattr(t, root, k, nlen, nv);
					if (ret)
						return fail(nlen > len ? "extend" : "truncate", ret);
				}
				free(model[k].val);
				model[k].val = nv;
				model[k].len = nlen;
				stats_resize++;
				goto after_op;
			}
			if (model[k].present) {
				ret = del_xattr(t, root, k);
				if (ret)
					return fail("delete", ret);
				model[k].present = false;
			}
			if (!del) {
				/* Mostly small values, some large. */
				uint32_t len = (uint32_t)(rnd() % 8 ? rnd() % 200 : rnd() % maxval);
				for (uint32_t b = 0; b < len; b++)
					val[b] = (uint8_t)rnd();
				ret = set_xattr(t, root, k, val, len);
				if (ret)
					return fail("insert", ret);
				free(model[k].val);
				model[k].val = malloc(len + 1);
				memcpy(model[k].val, val, len);
				model[k].len = len;
				model[k].present = true;
			}
		}
after_op:
		if (final || (i + 1) % every == 0) {
			ret = ubt_trans_commit(t);
			t = NULL;
			if (ret)
				return fail("commit", ret);
			commits++;
			if (getenv("UBTRFS_COUNT_WRITES"))
				printf("commit %" PRIu64 "\n", ubt_bdev_write_count());
			if (crash && ubt_bdev_crashed()) {
				char path[4096];
				uint64_t g = btrfs_super_generation(&fs->vol->super);
				fprintf(stderr, "cow_stress: crashed during commit %" PRIu64
					" (after %s writes); last landed generation %" PRIu64 "\n",
					g, crash, landed_gen);
				snprintf(path, sizeof(path), "%s.%" PRIu64, argv[5], g);
				ret = write_model(path, nkeys);
				for (unsigned k = 0; k < nkeys; k++) {
					free(model[k].val);
					model[k] = landed[k];
				}
				snprintf(path, sizeof(path), "%s.%" PRIu64, argv[5], landed_gen);
				if (!ret)
					ret = write_model(path, nkeys);
				for (unsigned k = 0; k < nkeys; k++)
					free(model[k].val);
				free(val);
				close_fs(fs);
				return ret;
			}
			if (crash) {
				landed_gen = btrfs_super_generation(&fs->vol->super);
				for (unsigned k = 0; k < nkeys; k++) {
					free(landed[k].val);
					landed[k] = model[k];
					landed[k].val = NULL;
					if (model[k].present) {
						landed[k].val = malloc(model[k].len + 1);
						memcpy(landed[k].val, model[k].val, model[k].len);
					}
				}
			}
			char when[64];
			snprintf(when, sizeof(when), "after commit %lu (op %lu)", commits, i + 1);
			if (commits % 10 == 0 || final) {
				close_fs(fs);
				ret = open_fs(image, &fs);
				if (ret)
					return fail("reopen", ret);
			}
			if (verify(fs, nkeys, when))
				return 1;
		}
	}
	free(val);
	if (getenv("UBTRFS_COUNT_WRITES"))
		printf("%" PRIu64 "\n", ubt_bdev_write_count());
	const struct ubt_subvol *sv;
	ubt_fs_subvol(fs, subvol, &sv);
	fprintf(stderr, "cow_stress: %lu ops (%lu in-place resizes), %lu commits, generation %" PRIu64
		", fs tree level %u\n", ops, stats_resize, commits,
		btrfs_super_generation(&fs->vol->super), sv ? sv->root.level : 0);
	close_fs(fs);
	ret = write_model(argv[5], nkeys);
	for (unsigned k = 0; k < nkeys; k++)
		free(model[k].val);
	return ret;
}
