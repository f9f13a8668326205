/*
 * unit: trans/inode_w - the delayed DIR_INDEX items go in by batches.
 *
 * The oracle tests show that the names come out right; this one shows that
 * the batching itself happens, and that it loses nothing on the way.  On a
 * filesystem `ubtrfs_mkfs` makes in a temporary file (4 KiB and 16 KiB
 * nodes), in one transaction:
 *  1. Names are created in directory A, with a few in B between them.  The
 *     fs tree (read as it stands in the transaction) must then hold fewer
 *     DIR_INDEX items than A has names: some wait.  What is in the tree is
 *     a prefix of the creation order (batches go in whole, oldest first),
 *     and more than one batch's worth went in already (a full batch goes
 *     in).  At most one batch's bytes wait per directory.  Every name is
 *     found by its DIR_ITEM at once.
 *  2. Names are removed (unlink, rename into B): some whose index is in the
 *     tree, some whose index waits.  After ubt_ns_index_flush nothing waits
 *     and the DIR_INDEX items are exactly the surviving names, with their
 *     inodes, in creation order.
 *  3. One name in each of more directories than there are batch slots:
 *     the oldest slots are emptied into the tree to make room, so some of
 *     those indexes are in the tree before any flush.
 *  4. The commit inserts what waits; the image, closed and opened again,
 *     lists every directory as the model says.  Then `btrfs check
 *     --readonly` must find it clean (skipped without btrfs-progs, a failure
 *     under UBTRFS_REQUIRE_ORACLE=1).
 */
#include "t.h"

#include "../tools/engine_tool.h"
#include "base/base.h"
#include "trans/inode_w.h"
#include <ubtrfs/ubtrfs.h>

#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#define FS_TREE 5
#define ROOT_DIR 256
#define NA 400		/* names in A */
#define NB 40		/* names in B */
#define NDIRS 80	/* step 3: more than the 64 batch slots */

struct name {
	char s[32];
	uint64_t ino;
	bool gone;
};

static struct ubt_ns_time now = { 1700000000, 0 };

/* DIR_INDEX items of `dir` as the transaction's tree holds them now. */
static size_t tree_indexes(struct ubt_fs *fs, struct ubt_trans *t, uint64_t dir,
			   uint64_t *inos, char (*names)[32], size_t max)
{
	struct ubt_wroot *r;
	if (ubt_wroot_get(t, FS_TREE, &r)) {
		CHECK(!"fs tree root");
		return 0;
	}
	struct btrfs_key min = { dir, BTRFS_DIR_INDEX_KEY, 0 };
	struct btrfs_key max_k = { dir, BTRFS_DIR_INDEX_KEY, (uint64_t)-1 };
	struct ubt_iter it;
	size_t n = 0;
	uint64_t last = 0;
	int ret;
	ubt_iter_start(&it, &fs->tree, &r->ref, &min, &max_k);
	while ((ret = ubt_iter_next(&it)) == 0) {
		const struct btrfs_dir_item *di = (const struct btrfs_dir_item *)it.data;
		uint16_t len = btrfs_dir_name_len(di);
		CHECK(it.key.offset > last);	/* indexes only grow */
		last = it.key.offset;
		CHECK(it.size == sizeof(*di) + len && len < 32);
		if (n < max && len < 32) {
			struct btrfs_disk_key loc = di->location;
			inos[n] = btrfs_disk_key_objectid(&loc);
			memcpy(names[n], di + 1, len);
			names[n][len] = 0;
		}
		n++;
	}
	CHECK_EQ_INT(ret, 1);
	ubt_iter_end(&it);
	return n;
}

/* The tree's DIR_INDEX items of dir must be exactly the live names of
 * v[0..n), in order. */
static void expect_exact(struct ubt_fs *fs, struct ubt_trans *t, uint64_t dir,
			 const struct name *v, size_t n, const char *step)
{
	static uint64_t inos[1024];
	static char names[1024][32];
	size_t got = tree_indexes(fs, t, dir, inos, names, 1024);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].gone)
			continue;
		if (k >= got || strcmp(names[k], v[i].s) || inos[k] != v[i].ino) {
			fprintf(stderr, "%s: dir %llu index %zu is %s, want %s\n", step,
				(unsigned long long)dir, k, k < got ? names[k] : "(none)", v[i].s);
			CHECK(!"DIR_INDEX items match the names");
			return;
		}
		k++;
	}
	CHECK_EQ_U64(got, k);
}

static int mk(struct ubt_ns *ns, struct ubt_trans *t, uint64_t dir, const char *name,
	      uint32_t mode, uint64_t *ino)
{
	struct ubt_ns_new_inode a = { .mode = mode };
	now.nsec++;
	int ret = ubt_ns_create(ns, t, FS_TREE, dir, name, strlen(name), &a, now, ino);
	if (ret)
		fprintf(stderr, "create %s in %llu: %s\n", name, (unsigned long long)dir,
			ubt_strerror(ret));
	CHECK_EQ_INT(ret, 0);
	return ret;
}

struct listing {
	struct name *v;
	size_t n, cap;
};

static int collect(void *ctx, const struct ubt_dirent *e)
{
	struct listing *l = ctx;
	if (l->n == l->cap)
		return -ENOSPC;
	snprintf(l->v[l->n].s, sizeof(l->v[l->n].s), "%.*s", (int)e->name_len, e->name);
	l->v[l->n].ino = e->location.objectid;
	l->n++;
	return 0;
}

/* After reopening: readdir of dir lists the live names of v, in order. */
static void expect_listing(struct ubt_fs *fs, uint64_t dir, const struct name *v, size_t n)
{
	static struct name got[1024];
	struct listing l = { got, 0, 1024 };
	const struct ubt_subvol *sv;
	struct ubt_inode in;
	int ret = ubt_fs_subvol(fs, FS_TREE, &sv);
	if (!ret)
		ret = ubt_inode_read(fs, sv, dir, &in);
	CHECK_EQ_INT(ret, 0);
	if (ret)
		return;
	ret = ubt_dir_iterate(fs, &in, 0, collect, &l);
	CHECK_EQ_INT(ret, 0);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].gone)
			continue;
		if (k >= l.n || strcmp(got[k].s, v[i].s) || got[k].ino != v[i].ino) {
			fprintf(stderr, "reopened: dir %llu entry %zu is %s, want %s\n",
				(unsigned long long)dir, k, k < l.n ? got[k].s : "(none)", v[i].s);
			CHECK(!"listing matches the names");
			return;
		}
		k++;
	}
	CHECK_EQ_U64(l.n, k);
}

static void run(uint32_t nodesize, const char *path)
{
	static struct name a[NA], b[NB + NA], d[NDIRS];
	size_t nb = 0;
	uint64_t dir_a, dir_b, dir_c, dirs[NDIRS];
	struct ubt_fs *fs = NULL;
	struct ubt_ns *ns = NULL;
	struct ubt_trans *t = NULL;

	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	memset(d, 0, sizeof(d));
	printf("nodesize %u\n", nodesize);
	const char *devs[1] = { path };
	struct ubtrfs_mkfs_opts mo = { 0 };
	mo.nodesize = nodesize;
	mo.byte_count = 256ull << 20;
	mo.force = true;
	int ret = ubtrfs_mkfs(devs, 1, &mo);
	CHECK_EQ_INT(ret, 0);
	if (ret)
		return;
	ret = engine_open(path, &fs);
	CHECK_EQ_INT(ret, 0);
	if (ret)
		return;
	ret = ubt_ns_new(fs, &ns);
	CHECK_EQ_INT(ret, 0);
	if (!ret)
		ret = ubt_trans_start(fs, &t);
	CHECK_EQ_INT(ret, 0);
	if (ret)
		goto out;
	if (mk(ns, t, ROOT_DIR, "A", S_IFDIR | 0755, &dir_a) ||
	    mk(ns, t, ROOT_DIR, "B", S_IFDIR | 0755, &dir_b) ||
	    mk(ns, t, ROOT_DIR, "C", S_IFDIR | 0755, &dir_c))
		goto out;

	/* 1. Names in A (and now and then one in B). */
	for (size_t i = 0; i < NA; i++) {
		snprintf(a[i].s, sizeof(a[i].s), "file-%05zu", i);
		if (mk(ns, t, dir_a, a[i].s, S_IFREG | 0644, &a[i].ino))
			goto out;
		if (i % 10 == 0) {
			snprintf(b[nb].s, sizeof(b[nb].s), "b-%05zu", nb);
			if (mk(ns, t, dir_b, b[nb].s, S_IFREG | 0644, &b[nb].ino))
				goto out;
			nb++;
		}
	}
	CHECK(ubt_ns_index_pending(ns));
	static uint64_t inos[1024];
	static char names[1024][32];
	size_t in_tree = tree_indexes(fs, t, dir_a, inos, names, 1024);
	/* A batch holds up to a quarter leaf of DIR_INDEX item bodies and a
	 * small header each (inode_w.c): between these two counts. */
	size_t body = sizeof(struct btrfs_dir_item) + strlen(a[0].s);
	size_t batch_max = nodesize / 4 / body + 1, batch_min = nodesize / 4 / (body + 32);
	printf("  A: %zu of %d indexes in the tree, a batch %zu-%zu\n", in_tree, NA, batch_min,
	       batch_max);
	CHECK(in_tree < NA);			/* some wait */
	CHECK(NA - in_tree <= batch_max);	/* at most one batch waits */
	CHECK(in_tree >= 2 * batch_min);	/* full batches went in */
	for (size_t k = 0; k < in_tree && k < NA; k++)	/* oldest first, whole */
		CHECK(!strcmp(names[k], a[k].s) && inos[k] == a[k].ino);
	for (size_t i = 0; i < NA; i++) {
		uint64_t ino = 0;
		uint8_t type = 0;
		ret = ubt_ns_lookup(fs, FS_TREE, dir_a, a[i].s, strlen(a[i].s), &ino, &type);
		CHECK(ret == 0 && ino == a[i].ino && type == BTRFS_FT_REG_FILE);
	}

	/* 2. Remove names whose index is in the tree and some that wait. */
	size_t waiting_from = in_tree;
	size_t gone[] = { 0, 7, in_tree / 2, in_tree - 1, waiting_from, waiting_from + 1,
			  NA - 3, NA - 1 };
	for (size_t g = 0; g < sizeof(gone) / sizeof(gone[0]); g++) {
		size_t i = gone[g];
		if (i >= NA || a[i].gone)
			continue;
		now.nsec++;
		if (g % 2) {
			char nn[32];
			snprintf(nn, sizeof(nn), "moved-%05zu", i);
			ret = ubt_ns_rename(ns, t, FS_TREE, dir_a, a[i].s, strlen(a[i].s), dir_b, nn,
					    strlen(nn), now);
			CHECK_EQ_INT(ret, 0);
			snprintf(b[nb].s, sizeof(b[nb].s), "%s", nn);
			b[nb++].ino = a[i].ino;
		} else {
			ret = ubt_ns_unlink(ns, t, FS_TREE, dir_a, a[i].s, strlen(a[i].s), now);
			CHECK_EQ_INT(ret, 0);
		}
		a[i].gone = true;
	}
	ret = ubt_ns_index_flush(ns, t);
	CHECK_EQ_INT(ret, 0);
	CHECK(!ubt_ns_index_pending(ns));
	expect_exact(fs, t, dir_a, a, NA, "after the flush");
	expect_exact(fs, t, dir_b, b, nb, "after the flush");

	/* 3. More directories than batch slots, one name each. */
	for (size_t i = 0; i < NDIRS; i++) {
		char dn[32];
		snprintf(dn, sizeof(dn), "dir-%03zu", i);
		if (mk(ns, t, dir_c, dn, S_IFDIR | 0755, &dirs[i]))
			goto out;
		snprintf(d[i].s, sizeof(d[i].s), "only-%03zu", i);
		if (mk(ns, t, dirs[i], d[i].s, S_IFREG | 0600, &d[i].ino))
			goto out;
	}
	size_t early = 0;
	for (size_t i = 0; i < NDIRS; i++)
		early += tree_indexes(fs, t, dirs[i], inos, names, 1024);
	printf("  %d directories: %zu indexes in the tree before the commit\n", NDIRS, early);
	CHECK(early > 0);		/* slots were emptied for newer directories */
	CHECK(early < NDIRS);		/* and the newest still wait */

	/* 4. The commit inserts the rest. */
	ret = ubt_trans_commit(t);
	t = NULL;
	CHECK_EQ_INT(ret, 0);
	CHECK(!ubt_ns_index_pending(ns));
	ubt_ns_free(ns);
	ns = NULL;
	engine_close(fs);
	fs = NULL;
	ret = engine_open(path, &fs);
	CHECK_EQ_INT(ret, 0);
	if (ret)
		return;
	expect_listing(fs, dir_a, a, NA);
	expect_listing(fs, dir_b, b, nb);
	for (size_t i = 0; i < NDIRS; i++)
		expect_listing(fs, dirs[i], &d[i], 1);
out:
	if (t)
		ubt_trans_abort(t, -ECANCELED);
	ubt_ns_free(ns);
	if (fs)
		engine_close(fs);
}

static int btrfs_check(const char *path)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "btrfs check --readonly '%s' >/dev/null 2>&1", path);
	return system(cmd);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	bool have_check = system("btrfs --version >/dev/null 2>&1") == 0;
	int fd;

	snprintf(path, sizeof(path), "%s/ns_batch.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);
	uint32_t sizes[] = { 4096, 16384 };
	for (size_t i = 0; i < 2; i++) {
		int before = t_failures;
		run(sizes[i], path);
		if (have_check && t_failures == before) {
			int st = btrfs_check(path);
			if (st)
				fprintf(stderr, "btrfs check --readonly %s: not clean (nodesize %u)\n",
					path, sizes[i]);
			CHECK_EQ_INT(st, 0);
		}
	}
	unlink(path);
	if (!have_check && !t_failures)
		return t_skip("btrfs-progs missing: the images were not checked by btrfs check");
	return t_finish();
}
