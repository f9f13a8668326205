/*
 * ns_stress: namespace operations through the engine (trans/inode_w.c),
 * each one replayed on a reference directory with POSIX calls.
 *
 *   ns_stress IMAGE[,IMAGE...] REFDIR OPS SEED COMMIT_EVERY
 *
 * Opens the filesystem on the IMAGEs for writing and applies OPS random
 * operations in the top-level subvolume (UBTRFS_NS_SUBVOL=ID: another one):
 * create (open O_CREAT|O_EXCL), mkdir, symlink, mknod (fifo, socket, char,
 * block), link, unlink, rmdir, rename, chmod, chown, utimensat, setxattr,
 * removexattr - on random existing and missing paths, bad parents, names
 * of every length up to and over 255 bytes, names whose hashes collide,
 * symlink targets and xattr values around the filesystem's limits, hard
 * links by the dozen under long names in one directory (INODE_REF full:
 * INODE_EXTREF, or EMLINK without the feature), directories moved across
 * and into their own subtrees.  Each operation runs on the engine and on
 * REFDIR (a tmpfs, or a kernel btrfs mount), and:
 *   - the return codes must be equal (0 or the errno);
 *   - the inodes involved (parents, the inode, a replaced target) must
 *     agree afterwards: type, permissions, owner, rdev, link count and size
 *     of non-directories, existence; and whether mtime and ctime changed
 *     (the engine's clock is fake - one distinct time per operation - so a
 *     change there must show as a change on the reference, which stats
 *     each inode before and after: multigrain timestamps);
 *   - a new inode has all four times equal to the operation's time.
 * Every COMMIT_EVERY operations it commits and compares the whole tree
 * (names of every directory through DIR_INDEX and DIR_ITEM, attributes,
 * directory sizes, symlink targets, xattrs, file contents, hard-link
 * groups, reference counts against nlink); every tenth commit it closes and
 * reopens the filesystem first (UBTRFS_NS_REOPEN=N: every Nth, 0 never).
 * At the end every entry gets explicit atime/mtime on both sides, and the
 * final comparison includes them; REFDIR then matches the image for
 * tests/tools/manifest.py (apart from ctime, inode numbers and directory
 * sizes and link counts, which btrfs and tmpfs count differently).
 *
 * The VFS part of each call is emulated on the engine side, as a kernel
 * filesystem relies on it: path walks, setgid inheritance, mkdir's mode
 * mask, chown clearing setuid/setgid, user.* xattrs only on regular files
 * and directories.  What only btrfs refuses (symlink longer than an inline
 * extent, xattr larger than a leaf item, INODE_REF full without extref) is
 * expected without asking a tmpfs reference; a kernel btrfs reference is
 * asked.  Removing an inode with more than UBT_NS_DROP_SECTORS sectors of
 * data (made by the kernel in an earlier round) is refused by the engine
 * (EOPNOTSUPP: the API truncates such a file first) and then skipped on
 * the reference; smaller ones go with their data.
 *
 * With a tmpfs reference a time change is only required one way (a change
 * there must be a change here): tmpfs takes a directory's new time from
 * the inode it unlinks, which often leaves it as it was.  A kernel btrfs
 * reference is held to both ways.
 *
 * REFDIR should be mounted noatime (the final times must survive reads).
 * Run as root (mknod, chown, trusted.* xattrs).
 *
 * Environment: UBTRFS_NS_SUBVOL=ID (subvolume), UBTRFS_NS_REOPEN=N (reopen
 * every Nth commit, 0 never; default 10), UBTRFS_NS_POP=N (population the
 * operations keep near; default 150), UBTRFS_NS_TRACE=1 (each operation on
 * stderr).
 *
 * Exit: 0 ok, 1 mismatch or engine error (with the operation).
 */
#include "base/base.h"
#include "engine_tool.h"
#include "fs/fs.h"
#include "trans/inode_w.h"
#include "trans/trans.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#define BTRFS_SUPER_MAGIC_FS 0x9123683EUL
#define PATH_BUF 8192
#define MAX_DEPTH 4

/* ---- state ---------------------------------------------------------------- */

static struct ubt_fs *fs;
static struct ubt_ns *ns;
static const struct ubt_subvol *sv;
static struct ubt_trans *tr;
static uint64_t subvol = BTRFS_FS_TREE_OBJECTID;
static const char *images;
static int refdfd = -1;
static char refroot[PATH_MAX];
static bool ref_btrfs;
static uint64_t rng_state;
static struct ubt_ns_time now;
static unsigned long opno;
static size_t max_symlink, max_xattr;
static bool extref;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint64_t rn(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static void die(const char *fmt, ...) UBT_PRINTF(1, 2);
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "ns_stress: op %lu: ", opno);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* A path for messages: printable bytes as they are, others \xHH, long
 * runs shortened. */
static const char *esc(const char *s)
{
	static char bufs[4][1024];
	static int which;
	char *b = bufs[which++ & 3];
	size_t o = 0, n = strlen(s);
	for (size_t i = 0; i < n && o < sizeof(bufs[0]) - 16; i++) {
		unsigned char c = (unsigned char)s[i];
		if (i >= 40 && n - i > 20 && i < n - 20) {
			o += (size_t)snprintf(b + o, sizeof(bufs[0]) - o, "...(%zu)...", n - 40);
			i = n - 20;
			c = (unsigned char)s[i];
		}
		if (c > 0x20 && c < 0x7f && c != '\\')
			b[o++] = (char)c;
		else
			o += (size_t)snprintf(b + o, sizeof(bufs[0]) - o, "\\x%02x", c);
	}
	b[o] = 0;
	return b;
}

static const char *errname(int e)
{
	static char buf[4][32];
	static int which;
	if (e == 0)
		return "ok";
	char *b = buf[which++ & 3];
	snprintf(b, sizeof(buf[0]), "%s", ubt_strerror(e < 0 ? e : -e));
	return b;
}

/* ---- filesystem ----------------------------------------------------------- */

static int open_fs(void)
{
	int ret = engine_open(images, &fs);
	if (ret)
		return ret;
	ret = ubt_ns_new(fs, &ns);
	if (!ret)
		ret = ubt_fs_subvol(fs, subvol, &sv);
	if (ret)
		return ret;
	max_symlink = ubt_ns_max_symlink(fs);
	max_xattr = ubt_ns_max_xattr(fs);
	extref = btrfs_super_incompat_flags(&fs->vol->super) & BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF;
	return 0;
}

static void close_fs(void)
{
	ubt_ns_free(ns);
	ns = NULL;
	engine_close(fs);
	fs = NULL;
	sv = NULL;
}

static void ensure_trans(void)
{
	if (tr)
		return;
	int ret = ubt_trans_start(fs, &tr);
	if (ret)
		die("start transaction: %s", ubt_strerror(ret));
}

static void commit(void)
{
	if (!tr)
		return;
	int ret = ubt_trans_commit(tr);
	tr = NULL;
	if (ret)
		die("commit: %s", ubt_strerror(ret));
}

/* ---- the reference: a walk of REFDIR ------------------------------------- */

struct ent {
	char *path;			/* relative; "" is the root */
	struct stat st;
	int depth;
};

static struct ent *ents;
static size_t nents, ents_cap;

static void model_clear(void)
{
	for (size_t i = 0; i < nents; i++)
		free(ents[i].path);
	nents = 0;
}

static void model_add(const char *path, const struct stat *st, int depth)
{
	if (nents == ents_cap) {
		ents_cap = ents_cap ? ents_cap * 2 : 256;
		ents = realloc(ents, ents_cap * sizeof(*ents));
		if (!ents)
			die("out of memory");
	}
	ents[nents].path = strdup(path);
	ents[nents].st = *st;
	ents[nents].depth = depth;
	nents++;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in a reference directory, sorted bytewise. */
static char **ref_list(const char *rel, size_t *n)
{
	int fd = openat(refdfd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (fd < 0)
		die("reference: open %s: %s", esc(rel), strerror(errno));
	DIR *d = fdopendir(fd);
	if (!d)
		die("reference: fdopendir: %s", strerror(errno));
	char **v = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 32;
			v = realloc(v, cap * sizeof(*v));
		}
		v[cnt++] = strdup(de->d_name);
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_str);
	*n = cnt;
	return v;
}

static void free_list(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void join(char *out, const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	if (a + b + 2 > PATH_BUF)
		die("path too long");
	memmove(out + (a ? a + 1 : 0), name, b + 1);
	if (a) {
		memmove(out, dir, a);
		out[a] = '/';
	}
}

static void walk(const char *rel, int depth)
{
	size_t n;
	char **names = ref_list(rel, &n);
	for (size_t i = 0; i < n; i++) {
		char p[PATH_BUF];
		struct stat st;
		join(p, rel, names[i]);
		if (fstatat(refdfd, p, &st, AT_SYMLINK_NOFOLLOW))
			die("reference: lstat %s: %s", esc(p), strerror(errno));
		model_add(p, &st, depth + 1);
		if (S_ISDIR(st.st_mode))
			walk(p, depth + 1);
	}
	free_list(names, n);
}

static void model_rebuild(void)
{
	struct stat st;
	model_clear();
	if (fstat(refdfd, &st))
		die("reference: stat: %s", strerror(errno));
	model_add("", &st, 0);
	walk("", 0);
}

/* ---- names ---------------------------------------------------------------- */

#define NPOOL 96
static char *pool[NPOOL];
static size_t npool, coll_first;
static char *xpool[48];
static size_t nxpool;

struct hk {
	uint64_t h;
	uint32_t i;
};

static int cmp_hk(const void *a, const void *b)
{
	const struct hk *x = a, *y = b;
	return x->h < y->h ? -1 : x->h > y->h;
}

/* Pairs of names prefix + 7 letters whose name hashes collide. */
static size_t find_collisions(const char *prefix, char **out, size_t want)
{
	const uint32_t n = 200000;
	struct hk *v = malloc(n * sizeof(*v));
	char buf[64];
	size_t got = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = i * 2654435761u;
		snprintf(buf, sizeof(buf), "%s%c%c%c%c%c%c%c", prefix, 'a' + x % 26, 'a' + x / 26 % 26,
			 'a' + x / 676 % 26, 'a' + x / 17576 % 26, 'a' + x / 456976 % 26,
			 'a' + (x >> 24) % 26, 'a' + i % 26);
		v[i].h = ubt_name_hash(buf, strlen(buf));
		v[i].i = i;
	}
	qsort(v, n, sizeof(*v), cmp_hk);
	for (uint32_t k = 1; k < n && got + 2 <= want; k++) {
		if (v[k].h != v[k - 1].h)
			continue;
		for (int j = 0; j < 2; j++) {
			uint32_t i = v[k - 1 + j].i, x = i * 2654435761u;
			snprintf(buf, sizeof(buf), "%s%c%c%c%c%c%c%c", prefix, 'a' + x % 26,
				 'a' + x / 26 % 26, 'a' + x / 676 % 26, 'a' + x / 17576 % 26,
				 'a' + x / 456976 % 26, 'a' + (x >> 24) % 26, 'a' + i % 26);
			out[got++] = strdup(buf);
		}
	}
	free(v);
	return got;
}

static void build_pools(void)
{
	char buf[300];

	for (int i = 0; i < 30; i++) {
		snprintf(buf, sizeof(buf), "n%d", i);
		pool[npool++] = strdup(buf);
	}
	/* Long names: up to the limit (INODE_REF items fill up). */
	for (int i = 0; i < 24; i++) {
		int len = 230 + (i * 7) % 26;
		snprintf(buf, sizeof(buf), "L%02d", i);
		memset(buf + 3, 'a' + i % 26, (size_t)len - 3);
		buf[len] = 0;
		pool[npool++] = strdup(buf);
	}
	memset(buf, 'M', 255);
	buf[255] = 0;
	pool[npool++] = strdup(buf);
	pool[npool++] = strdup("sp ace");
	pool[npool++] = strdup("back\\slash");
	pool[npool++] = strdup("nl\nx");
	pool[npool++] = strdup("\xff\xfe\x01");
	pool[npool++] = strdup("\xc3\xa9t\xc3\xa9");
	pool[npool++] = strdup("...");
	coll_first = npool;
	npool += find_collisions("c", pool + npool, 6);

	static const char *fixed[] = { "user.a", "user.b", "user.long", "trusted.t", "trusted.u",
				       "user.x1", "user.x2", "user.empty" };
	for (size_t i = 0; i < UBT_ARRAY_SIZE(fixed); i++)
		xpool[nxpool++] = strdup(fixed[i]);
	memcpy(buf, "user.", 5);
	memset(buf + 5, 'X', 250);
	buf[255] = 0;
	xpool[nxpool++] = strdup(buf);
	nxpool += find_collisions("user.", xpool + nxpool, 4);
	nxpool += find_collisions("trusted.", xpool + nxpool, 2);
}

/* A name: mostly from the pool, sometimes too long. */
static const char *pick_name(char *buf)
{
	if (rn(60) == 0) {
		size_t len = 256 + rn(40);
		memset(buf, 'T', len);
		buf[len] = 0;
		return buf;
	}
	if (rn(4) == 0)
		return pool[rn(30)];	/* short names: collisions with what is there */
	return pool[rn(npool)];
}

/* ---- picking paths -------------------------------------------------------- */

static size_t pick_ent(bool with_root)
{
	if (nents <= 1)
		return 0;
	return with_root ? rn(nents) : 1 + rn(nents - 1);
}

static size_t pick_dir(void)
{
	for (int tries = 0; tries < 20; tries++) {
		size_t i = rn(nents);
		if (S_ISDIR(ents[i].st.st_mode))
			return i;
	}
	return 0;
}

/* A parent directory for a new name: usually a directory (not too deep),
 * sometimes a file (ENOTDIR) or a missing one (ENOENT); never a symlink
 * (the kernel would follow it). */
static void pick_parent(char *out)
{
	unsigned r = (unsigned)rn(40);
	if (r == 0) {
		size_t i = pick_ent(false);
		if (i && !S_ISDIR(ents[i].st.st_mode) && !S_ISLNK(ents[i].st.st_mode)) {
			snprintf(out, PATH_BUF, "%s", ents[i].path);
			return;
		}
	} else if (r == 1) {
		size_t i = pick_dir();
		join(out, ents[i].path, "missing-dir");
		return;
	}
	for (int tries = 0; tries < 10; tries++) {
		size_t i = pick_dir();
		if (ents[i].depth < MAX_DEPTH) {
			snprintf(out, PATH_BUF, "%s", ents[i].path);
			return;
		}
	}
	out[0] = 0;
}

static void new_path(char *out)
{
	char parent[PATH_BUF], nb[300];
	pick_parent(parent);
	join(out, parent, pick_name(nb));
}

/* An existing entry mostly, else a new name. */
static void some_path(char *out)
{
	if (nents > 1 && rn(6) != 0) {
		snprintf(out, PATH_BUF, "%s", ents[pick_ent(false)].path);
		return;
	}
	new_path(out);
}

static void split(const char *path, char *parent, const char **name)
{
	const char *s = strrchr(path, '/');
	if (!s) {
		parent[0] = 0;
		*name = path;
		return;
	}
	memcpy(parent, path, (size_t)(s - path));
	parent[s - path] = 0;
	*name = s + 1;
}

static int ref_stat(const char *rel, struct stat *st)
{
	return fstatat(refdfd, *rel ? rel : ".", st, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

/* ---- operations ----------------------------------------------------------- */

enum {
	OP_CREAT, OP_MKDIR, OP_SYMLINK, OP_MKNOD, OP_LINK, OP_UNLINK, OP_RMDIR, OP_RENAME,
	OP_CHMOD, OP_CHOWN, OP_UTIMES, OP_SETX, OP_RMX, OP_N
};
static const char *const op_names[OP_N] = { "create", "mkdir", "symlink", "mknod", "link",
					     "unlink", "rmdir", "rename", "chmod", "chown",
					     "utimes", "setxattr", "removexattr" };

struct op {
	int kind;
	char a[PATH_BUF], b[PATH_BUF];
	uint32_t mode, maj, min, uid, gid;
	char target[4200];
	size_t tlen;
	struct timespec ts[2];
	char xname[320];
	uint8_t *xval;
	size_t xlen;
	int xflags;
};

static unsigned long stat_ok[OP_N], stat_fail[OP_N], stat_skip[OP_N], stat_quirk[OP_N];

static const uint32_t owners[] = { 0, 1, 1000, 65534, 123456 };

static char burst_src[PATH_BUF], burst_dir[PATH_BUF];
static size_t burst_left, burst_total;
static uint32_t max_item(void);

static void gen_op(struct op *op)
{
	static const unsigned weights[OP_N] = { 12, 8, 6, 5, 10, 10, 5, 15, 5, 4, 4, 12, 5 };
	unsigned total = 0, r;
	for (int i = 0; i < OP_N; i++)
		total += weights[i];
	r = (unsigned)rn(total);
	op->kind = 0;
	while (r >= weights[op->kind])
		r -= weights[op->kind++];
	/* Keep the population near its target. */
	static size_t pop;
	if (!pop)
		pop = getenv("UBTRFS_NS_POP") ? strtoul(getenv("UBTRFS_NS_POP"), NULL, 0) : 150;
	if (nents > pop && op->kind <= OP_LINK && rn(3))
		op->kind = rn(3) ? OP_UNLINK : OP_RMDIR;
	if (burst_left)
		op->kind = OP_LINK;

	op->a[0] = op->b[0] = 0;
	switch (op->kind) {
	case OP_CREAT:
	case OP_MKDIR:
	case OP_MKNOD:
		if (rn(8) == 0)
			some_path(op->a);
		else if (rn(6) == 0)
			snprintf(op->a, PATH_BUF, "%s", pool[coll_first + rn(npool - coll_first)]);
		else
			new_path(op->a);
		op->mode = (uint32_t)(rn(3) ? 0644 + rn(2) * 0111 : rn(010000));
		if (op->kind == OP_MKNOD) {
			static const uint32_t types[] = { S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK };
			op->mode |= types[rn(4)];
			op->maj = (uint32_t)rn(4096);
			op->min = (uint32_t)(rn(2) ? rn(256) : rn(1u << 20));
		}
		break;
	case OP_SYMLINK: {
		if (rn(8) == 0)
			some_path(op->a);
		else
			new_path(op->a);
		unsigned k = (unsigned)rn(40);
		if (k == 0)
			op->tlen = 0;
		else if (k == 1)
			op->tlen = max_symlink;
		else if (k == 2)
			op->tlen = max_symlink + 1 + rn(3);
		else if (k == 3)
			op->tlen = 4096;
		else if (k < 8)
			op->tlen = 100 + rn(max_symlink);
		else
			op->tlen = 1 + rn(60);
		if (op->tlen > sizeof(op->target) - 1)
			op->tlen = sizeof(op->target) - 1;
		for (size_t i = 0; i < op->tlen; i++)
			op->target[i] = (char)(rn(8) ? 'a' + rn(26) : (rn(2) ? '/' : 1 + rn(255)));
		op->target[op->tlen] = 0;
		/* A NUL would cut the target short on the reference. */
		op->tlen = strlen(op->target);
		break;
	}
	case OP_LINK: {
		some_path(op->a);
		if (burst_left) {
			/* Many long names for one inode in one directory: its
			 * INODE_REF fills up (INODE_EXTREF, or EMLINK). */
			char nb[300];
			snprintf(op->a, PATH_BUF, "%s", burst_src);
			size_t k = burst_total - burst_left--;
			snprintf(nb, sizeof(nb), "S%03zu", k);
			memset(nb + 4, 's' + k % 7, 246);
			nb[250] = 0;
			join(op->b, burst_dir, nb);
			break;
		}
		size_t si = pick_ent(false);
		if (si && !S_ISDIR(ents[si].st.st_mode) && rn(40) == 0) {
			const char *n;
			snprintf(burst_src, PATH_BUF, "%s", ents[si].path);
			split(burst_src, burst_dir, &n);
			burst_total = burst_left = max_item() / 256 + 4;
			snprintf(op->a, PATH_BUF, "%s", burst_src);
			snprintf(op->b, PATH_BUF, "%s", burst_src);	/* EEXIST, then the burst */
			break;
		}
		if (nents > 1 && rn(3) == 0) {
			/* Many names under one directory: the INODE_REF fills up. */
			char parent[PATH_BUF];
			const char *n;
			split(op->a, parent, &n);
			join(op->b, parent, pool[30 + rn(24)]);
		} else if (rn(3) == 0) {
			some_path(op->b);
		} else {
			new_path(op->b);
		}
		break;
	}
	case OP_UNLINK:
	case OP_RMDIR:
		some_path(op->a);
		if (op->kind == OP_RMDIR && rn(2)) {
			size_t i = pick_dir();
			if (i)
				snprintf(op->a, PATH_BUF, "%s", ents[i].path);
		}
		break;
	case OP_RENAME: {
		some_path(op->a);
		unsigned k = (unsigned)rn(10);
		if (k < 4) {
			new_path(op->b);
		} else if (k < 7) {
			some_path(op->b);
		} else if (k < 8) {
			/* Same directory, another name. */
			char parent[PATH_BUF], nb[300];
			const char *n;
			split(op->a, parent, &n);
			join(op->b, parent, pick_name(nb));
		} else {
			/* Into a subdirectory of the source (EINVAL) or onto an
			 * ancestor (ENOTEMPTY). */
			char nb[300];
			if (rn(2)) {
				join(op->b, op->a, pick_name(nb));
			} else {
				char parent[PATH_BUF];
				const char *n;
				split(op->a, parent, &n);
				if (parent[0])
					snprintf(op->b, PATH_BUF, "%s", parent);
				else
					new_path(op->b);
			}
		}
		break;
	}
	case OP_CHMOD:
		some_path(op->a);
		op->mode = (uint32_t)rn(010000);
		break;
	case OP_CHOWN:
		some_path(op->a);
		op->uid = owners[rn(UBT_ARRAY_SIZE(owners))];
		op->gid = owners[rn(UBT_ARRAY_SIZE(owners))];
		break;
	case OP_UTIMES:
		some_path(op->a);
		for (int i = 0; i < 2; i++) {
			op->ts[i].tv_sec = (time_t)(100000000 + rn(900000000));
			op->ts[i].tv_nsec = (long)rn(1000000000);
		}
		if (rn(5) == 0)
			op->ts[rn(2)].tv_nsec = UTIME_OMIT;
		break;
	case OP_SETX:
	case OP_RMX: {
		some_path(op->a);
		unsigned k = (unsigned)rn(50);
		if (k == 0)
			op->xname[0] = 0;
		else if (k == 1)
			snprintf(op->xname, sizeof(op->xname), "user.%0256d", 7);
		else
			snprintf(op->xname, sizeof(op->xname), "%s", xpool[rn(nxpool)]);
		op->xflags = rn(3) ? 0 : (rn(2) ? XATTR_CREATE : XATTR_REPLACE);
		if ((op->kind == OP_RMX || op->xflags == XATTR_REPLACE) && rn(4)) {
			/* A name the entry has. */
			char full[PATH_BUF + PATH_MAX], list[1 << 16];
			snprintf(full, sizeof(full), "%s/%s", refroot, op->a);
			ssize_t n = llistxattr(full, list, sizeof(list));
			size_t cnt = 0;
			/* (not btrfs.* properties: the engine does not set them) */
			for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
				cnt += strncmp(list + i, "btrfs.", 6) != 0;
			if (cnt) {
				size_t want = rn(cnt);
				for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
					if (strncmp(list + i, "btrfs.", 6) && want-- == 0) {
						snprintf(op->xname, sizeof(op->xname), "%s", list + i);
						break;
					}
			}
		}
		unsigned s = (unsigned)rn(30);
		if (s == 0)
			op->xlen = ref_btrfs ? max_xattr / 4 : max_xattr - strlen(op->xname);
		else if (s == 1)
			op->xlen = max_xattr - strlen(op->xname) + 1 + rn(50);
		else if (s == 2)
			op->xlen = 65537;
		else if (s < 6)
			op->xlen = rn(ref_btrfs ? max_xattr / 4 : max_xattr);
		else if (s < 8)
			op->xlen = 0;
		else
			op->xlen = rn(100);
		op->xval = malloc(op->xlen + 1);
		for (size_t i = 0; i < op->xlen; i++)
			op->xval[i] = (uint8_t)rnd();
		break;
	}
	}
}

static void describe(const struct op *op, char *buf, size_t n)
{
	switch (op->kind) {
	case OP_LINK:
	case OP_RENAME:
		snprintf(buf, n, "%s %s -> %s", op_names[op->kind], esc(op->a), esc(op->b));
		break;
	case OP_SYMLINK:
		snprintf(buf, n, "symlink %s (target %zu bytes)", esc(op->a), op->tlen);
		break;
	case OP_SETX:
	case OP_RMX:
		snprintf(buf, n, "%s %s name %s (%zu bytes) value %zu bytes flags %d",
			 op_names[op->kind], esc(op->a), esc(op->xname), strlen(op->xname), op->xlen,
			 op->xflags);
		break;
	default:
		snprintf(buf, n, "%s %s mode %o", op_names[op->kind], esc(op->a), op->mode);
		break;
	}
}

/* ---- the engine side ------------------------------------------------------ */

static int e_lookup(const char *rel, struct ubt_inode *in)
{
	return ubt_path_lookup(fs, sv, rel, in);
}

/* The parent directory of a path and the last name. */
static int e_parent(const char *rel, struct ubt_inode *dir, const char **name)
{
	char parent[PATH_BUF];
	split(rel, parent, name);
	int ret = e_lookup(parent, dir);
	if (!ret && !S_ISDIR(ubt_inode_mode(dir)))
		ret = -ENOTDIR;
	return ret;
}

static int e_has_data(uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_EXTENT_DATA_KEY, 0 };
	struct btrfs_key max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 };
	struct ubt_iter it;
	int ret, found = 0;

	ubt_iter_start(&it, &fs->tree, &sv->root, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		const struct btrfs_file_extent_item *fi = (const void *)it.data;
		if (it.size >= sizeof(*fi) && btrfs_file_extent_type(fi) != BTRFS_FILE_EXTENT_INLINE &&
		    btrfs_file_extent_disk_bytenr(fi))
			found = 1;
	}
	ubt_iter_end(&it);
	return found;
}

/* Size of the INODE_REF item (ino, dir), 0 if none. */
static uint32_t e_ref_size(uint64_t ino, uint64_t dir)
{
	struct btrfs_key key = { ino, BTRFS_INODE_REF_KEY, dir };
	struct ubt_path path;
	uint32_t size = 0;
	ubt_path_init(&path);
	if (ubt_search_slot(&fs->tree, &sv->root, &key, &path) == 0)
		size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
	ubt_path_release(&fs->tree, &path);
	return size;
}

static uint32_t max_item(void)
{
	return btrfs_leaf_data_size(fs->nodesize) - (uint32_t)sizeof(struct btrfs_item);
}

/* Would adding (dir, name) to ino's names overflow its INODE_REF without
 * the extref feature?  (freed: bytes removed from that item first) */
static bool e_ref_overflows(uint64_t ino, uint64_t dir, size_t len, uint32_t freed)
{
	uint32_t size = e_ref_size(ino, dir);
	size -= UBT_MIN(size, freed);
	return !extref && size && size + sizeof(struct btrfs_inode_ref) + len > max_item();
}

/* Would the xattr's entry overflow the item it shares with other names of
 * the same hash? */
static bool e_xattr_item_full(uint64_t ino, const char *name, size_t vlen)
{
	size_t nl = strlen(name);
	struct btrfs_key key = { ino, BTRFS_XATTR_ITEM_KEY, ubt_name_hash(name, nl) };
	struct ubt_path path;
	uint32_t size = 0, own = 0;
	ubt_path_init(&path);
	if (ubt_search_slot(&fs->tree, &sv->root, &key, &path) == 0) {
		const uint8_t *p = ubt_eb_item_data(path.nodes[0], path.slots[0]);
		size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
		for (uint32_t off = 0; off + sizeof(struct btrfs_dir_item) <= size;) {
			const struct btrfs_dir_item *di = (const void *)(p + off);
			uint32_t es = (uint32_t)btrfs_dir_entry_size(di);
			if (btrfs_dir_name_len(di) == nl && !memcmp(p + off + sizeof(*di), name, nl))
				own = es;
			off += es;
		}
	}
	ubt_path_release(&fs->tree, &path);
	return size && size - own + sizeof(struct btrfs_dir_item) + nl + vlen > max_item();
}

struct eresult {
	int ret;
	bool quirk;			/* a btrfs-only result the reference is not asked about */
	uint64_t new_ino;
};

static bool is_user_xattr(const char *name)
{
	return !strncmp(name, "user.", 5);
}

static void e_run(const struct op *op, struct eresult *r)
{
	struct ubt_inode dir, in, dir2;
	const char *name, *name2;
	int ret;

	memset(r, 0, sizeof(*r));
	ensure_trans();
	switch (op->kind) {
	case OP_CREAT:
	case OP_MKDIR:
	case OP_SYMLINK:
	case OP_MKNOD: {
		struct ubt_ns_new_inode a = { 0 };
		if (op->kind == OP_SYMLINK) {
			if (op->tlen == 0) {
				r->ret = -ENOENT;
				return;
			}
			if (op->tlen >= 4096) {
				r->ret = -ENAMETOOLONG;
				return;
			}
		}
		ret = e_parent(op->a, &dir, &name);
		if (ret) {
			r->ret = ret;
			return;
		}
		/* inode_init_owner, vfs_prepare_mode (root: nothing stripped
		 * but mkdir's S_ISUID/S_ISGID). */
		uint32_t pmode = ubt_inode_mode(&dir);
		a.uid = 0;
		a.gid = (pmode & S_ISGID) ? btrfs_inode_gid(&dir.item) : 0;
		switch (op->kind) {
		case OP_CREAT:
			a.mode = S_IFREG | (op->mode & 07777);
			break;
		case OP_MKDIR:
			a.mode = S_IFDIR | (op->mode & 01777) | (pmode & S_ISGID);
			break;
		case OP_SYMLINK:
			a.mode = S_IFLNK | 0777;
			a.target = op->target;
			a.target_len = op->tlen;
			break;
		default:
			a.mode = op->mode;
			a.rdev_major = op->maj;
			a.rdev_minor = op->min;
			break;
		}
		ret = ubt_ns_create(ns, tr, subvol, dir.ino, name, strlen(name), &a, now, &r->new_ino);
		if (ret == -ENAMETOOLONG && op->kind == OP_SYMLINK && op->tlen > max_symlink)
			r->quirk = !ref_btrfs;
		r->ret = ret;
		return;
	}
	case OP_LINK:
		ret = e_lookup(op->a, &in);
		if (!ret)
			ret = e_parent(op->b, &dir, &name);
		if (!ret)
			ret = ubt_ns_link(ns, tr, subvol, in.ino, dir.ino, name, strlen(name), now);
		if (ret == -EMLINK && e_ref_overflows(in.ino, dir.ino, strlen(name), 0))
			r->quirk = !ref_btrfs;
		r->ret = ret;
		return;
	case OP_UNLINK:
	case OP_RMDIR:
		ret = e_parent(op->a, &dir, &name);
		if (!ret) {
			if (op->kind == OP_UNLINK)
				ret = ubt_ns_unlink(ns, tr, subvol, dir.ino, name, strlen(name), now);
			else
				ret = ubt_ns_rmdir(ns, tr, subvol, dir.ino, name, strlen(name), now);
		}
		if (ret == -EOPNOTSUPP && e_lookup(op->a, &in) == 0 && e_has_data(in.ino))
			r->quirk = true;
		r->ret = ret;
		return;
	case OP_RENAME:
		ret = e_parent(op->a, &dir, &name);
		if (!ret)
			ret = e_parent(op->b, &dir2, &name2);
		if (!ret)
			ret = ubt_ns_rename(ns, tr, subvol, dir.ino, name, strlen(name), dir2.ino,
					    name2, strlen(name2), now);
		if (ret == -EOPNOTSUPP && e_lookup(op->b, &in) == 0 && e_has_data(in.ino))
			r->quirk = true;
		if (ret == -EMLINK)
			r->quirk = true;	/* the kernel would abort its transaction */
		r->ret = ret;
		return;
	case OP_CHMOD:
	case OP_CHOWN:
	case OP_UTIMES: {
		ret = e_lookup(op->a, &in);
		if (ret) {
			r->ret = ret;
			return;
		}
		struct ubt_ns_attr at = { 0 };
		at.valid = UBT_NS_SET_CTIME;
		at.ctime = now;
		uint32_t mode = ubt_inode_mode(&in);
		if (op->kind == OP_CHMOD) {
			at.valid |= UBT_NS_SET_MODE;
			at.mode = op->mode & 07777;
		} else if (op->kind == OP_CHOWN) {
			at.valid |= UBT_NS_SET_UID | UBT_NS_SET_GID;
			at.uid = op->uid;
			at.gid = op->gid;
			/* chown clears setuid, and setgid with group exec, of a
			 * non-directory (notify_change, even for root). */
			if (!S_ISDIR(mode)) {
				uint32_t m = mode & 07777;
				if (m & S_ISUID)
					m &= ~(uint32_t)S_ISUID;
				if ((m & S_ISGID) && (m & S_IXGRP))
					m &= ~(uint32_t)S_ISGID;
				if (m != (mode & 07777)) {
					at.valid |= UBT_NS_SET_MODE;
					at.mode = m;
				}
			}
		} else {
			if (op->ts[0].tv_nsec != UTIME_OMIT) {
				at.valid |= UBT_NS_SET_ATIME;
				at.atime.sec = op->ts[0].tv_sec;
				at.atime.nsec = (uint32_t)op->ts[0].tv_nsec;
			}
			if (op->ts[1].tv_nsec != UTIME_OMIT) {
				at.valid |= UBT_NS_SET_MTIME;
				at.mtime.sec = op->ts[1].tv_sec;
				at.mtime.nsec = (uint32_t)op->ts[1].tv_nsec;
			}
		}
		r->ret = ubt_ns_setattr(ns, tr, subvol, in.ino, &at);
		return;
	}
	case OP_SETX:
	case OP_RMX: {
		size_t nl = strlen(op->xname);
		if (nl == 0 || nl > 255) {
			r->ret = -ERANGE;
			return;
		}
		if (op->kind == OP_SETX && op->xlen > 65536) {
			r->ret = -E2BIG;
			return;
		}
		ret = e_lookup(op->a, &in);
		if (ret) {
			r->ret = ret;
			return;
		}
		uint32_t mode = ubt_inode_mode(&in);
		if (is_user_xattr(op->xname) && !S_ISREG(mode) && !S_ISDIR(mode)) {
			r->ret = -EPERM;	/* xattr_permission */
			return;
		}
		if (op->kind == OP_SETX)
			ret = ubt_ns_setxattr(ns, tr, subvol, in.ino, op->xname, op->xval, op->xlen,
					      op->xflags, now);
		else
			ret = ubt_ns_removexattr(ns, tr, subvol, in.ino, op->xname, now);
		if (ret == -ENOSPC && (nl + op->xlen > max_xattr ||
				       e_xattr_item_full(in.ino, op->xname, op->xlen)))
			r->quirk = !ref_btrfs;
		r->ret = ret;
		return;
	}
	}
}

/* ---- the reference side --------------------------------------------------- */

static int ref_run(const struct op *op)
{
	char full[PATH_BUF + PATH_MAX];
	int ret = 0;

	switch (op->kind) {
	case OP_CREAT: {
		int fd = openat(refdfd, op->a, O_CREAT | O_EXCL | O_WRONLY, op->mode & 07777);
		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	}
	case OP_MKDIR:
		ret = mkdirat(refdfd, op->a, op->mode & 07777);
		break;
	case OP_SYMLINK:
		ret = symlinkat(op->target, refdfd, op->a);
		break;
	case OP_MKNOD:
		ret = mknodat(refdfd, op->a, op->mode, makedev(op->maj, op->min));
		break;
	case OP_LINK:
		ret = linkat(refdfd, op->a, refdfd, op->b, 0);
		break;
	case OP_UNLINK:
		ret = unlinkat(refdfd, op->a, 0);
		break;
	case OP_RMDIR:
		ret = unlinkat(refdfd, op->a, AT_REMOVEDIR);
		break;
	case OP_RENAME:
		ret = renameat(refdfd, op->a, refdfd, op->b);
		break;
	case OP_CHMOD:
		ret = fchmodat(refdfd, op->a, op->mode, 0);
		break;
	case OP_CHOWN:
		ret = fchownat(refdfd, op->a, op->uid, op->gid, AT_SYMLINK_NOFOLLOW);
		break;
	case OP_UTIMES:
		ret = utimensat(refdfd, op->a, op->ts, AT_SYMLINK_NOFOLLOW);
		break;
	case OP_SETX:
		snprintf(full, sizeof(full), "%s/%s", refroot, op->a);
		ret = lsetxattr(full, op->xname, op->xval, op->xlen, op->xflags);
		break;
	case OP_RMX:
		snprintf(full, sizeof(full), "%s/%s", refroot, op->a);
		ret = lremovexattr(full, op->xname);
		break;
	}
	return ret ? -errno : 0;
}

/* ---- comparisons ---------------------------------------------------------- */

static bool ts_eq(const struct btrfs_timespec *b, const struct timespec *t)
{
	return (int64_t)btrfs_timespec_sec(b) == (int64_t)t->tv_sec &&
	       btrfs_timespec_nsec(b) == (uint32_t)t->tv_nsec;
}

static bool ts_now(const struct btrfs_timespec *b)
{
	return (int64_t)btrfs_timespec_sec(b) == now.sec && btrfs_timespec_nsec(b) == now.nsec;
}

static bool bts_eq(const struct btrfs_timespec *a, const struct btrfs_timespec *b)
{
	return btrfs_timespec_sec(a) == btrfs_timespec_sec(b) &&
	       btrfs_timespec_nsec(a) == btrfs_timespec_nsec(b);
}

static bool sts_eq(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static uint64_t tr_transid_hint(void)
{
	return tr ? tr->transid : fs->wr->last_committed;
}

/* Attributes an engine inode and a reference entry must share. */
static void cmp_attr(const char *what, const char *path, const struct stat *st,
		     const struct btrfs_inode_item *ii)
{
	uint32_t mode = btrfs_inode_mode(ii);
	if ((mode & S_IFMT) != (st->st_mode & S_IFMT))
		die("%s %s: type %o, reference %o", what, esc(path), mode & S_IFMT,
		    st->st_mode & S_IFMT);
	if ((mode & 07777) != (st->st_mode & 07777))
		die("%s %s: mode %04o, reference %04o", what, esc(path), mode & 07777,
		    st->st_mode & 07777);
	if (btrfs_inode_uid(ii) != st->st_uid || btrfs_inode_gid(ii) != st->st_gid)
		die("%s %s: owner %u:%u, reference %u:%u", what, esc(path), btrfs_inode_uid(ii),
		    btrfs_inode_gid(ii), st->st_uid, st->st_gid);
	if (S_ISCHR(mode) || S_ISBLK(mode)) {
		uint64_t rdev = btrfs_inode_rdev(ii);
		if ((rdev >> 20) != major(st->st_rdev) || (rdev & 0xfffff) != minor(st->st_rdev))
			die("%s %s: rdev %" PRIu64 ":%" PRIu64 ", reference %u:%u", what, esc(path),
			    rdev >> 20, rdev & 0xfffff, major(st->st_rdev), minor(st->st_rdev));
	}
	if (S_ISDIR(mode)) {
		if (btrfs_inode_nlink(ii) != 1)
			die("%s %s: directory nlink %u", what, esc(path), btrfs_inode_nlink(ii));
		if (ref_btrfs && btrfs_inode_size(ii) != (uint64_t)st->st_size)
			die("%s %s: directory size %" PRIu64 ", kernel %jd", what, esc(path),
			    btrfs_inode_size(ii), (intmax_t)st->st_size);
	} else {
		if (btrfs_inode_nlink(ii) != st->st_nlink)
			die("%s %s: nlink %u, reference %ju", what, esc(path), btrfs_inode_nlink(ii),
			    (uintmax_t)st->st_nlink);
		if (btrfs_inode_size(ii) != (uint64_t)st->st_size)
			die("%s %s: size %" PRIu64 ", reference %jd", what, esc(path),
			    btrfs_inode_size(ii), (intmax_t)st->st_size);
	}
	if (btrfs_inode_transid(ii) > tr_transid_hint())
		die("%s %s: transid %" PRIu64 " from the future", what, esc(path),
		    btrfs_inode_transid(ii));
}

/* An inode an operation involves, seen before and after on both sides. */
struct watch {
	char path[PATH_BUF];
	int fd;				/* O_PATH on the reference */
	uint64_t ino;
	struct stat st;
	struct btrfs_inode_item ii;
};

static size_t watch_add(struct watch *w, size_t n, const char *path)
{
	struct ubt_inode in;
	struct watch *x = &w[n];
	if (e_lookup(path, &in))
		return n;
	x->fd = openat(refdfd, *path ? path : ".", O_PATH | O_NOFOLLOW);
	if (x->fd < 0)
		return n;
	if (fstatat(x->fd, "", &x->st, AT_EMPTY_PATH)) {
		close(x->fd);
		return n;
	}
	for (size_t i = 0; i < n; i++) {
		if (w[i].ino == in.ino) {
			close(x->fd);
			return n;
		}
	}
	snprintf(x->path, PATH_BUF, "%s", path);
	x->ino = in.ino;
	x->ii = in.item;
	return n + 1;
}

static void parent_of(const char *path, char *parent)
{
	const char *n;
	split(path, parent, &n);
}

static size_t watches_for(const struct op *op, struct watch *w)
{
	char p[PATH_BUF];
	size_t n = 0;
	parent_of(op->a, p);
	n = watch_add(w, n, p);
	n = watch_add(w, n, op->a);
	if (op->kind == OP_LINK || op->kind == OP_RENAME) {
		parent_of(op->b, p);
		n = watch_add(w, n, p);
		n = watch_add(w, n, op->b);
	}
	return n;
}

/* Is the watch the operation's own path (not a parent)? */
static bool nw_is_target(const struct op *op, const struct watch *x)
{
	return !strcmp(x->path, op->a);
}

static void watches_check(const struct op *op, struct watch *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct watch *x = &w[i];
		struct stat st;
		struct ubt_inode in;
		if (fstatat(x->fd, "", &st, AT_EMPTY_PATH))
			die("reference: fstat: %s", strerror(errno));
		close(x->fd);
		int ret = ubt_inode_read(fs, sv, x->ino, &in);
		bool ref_gone = st.st_nlink == 0;
		if (ret == -ENOENT) {
			if (!ref_gone)
				die("%s (inode %" PRIu64 ") is gone, but not on the reference",
				    esc(x->path), x->ino);
			continue;
		}
		if (ret)
			die("read inode %" PRIu64 ": %s", x->ino, ubt_strerror(ret));
		if (ref_gone)
			die("%s (inode %" PRIu64 ", nlink %u) is gone on the reference only",
			    esc(x->path), x->ino, btrfs_inode_nlink(&in.item));
		cmp_attr("after the operation,", x->path, &st, &in.item);
		/* Whether mtime and ctime changed, on both sides alike. */
		bool em = !bts_eq(btrfs_inode_mtime(&in.item), btrfs_inode_mtime(&x->ii));
		bool ec = !bts_eq(btrfs_inode_ctime(&in.item), btrfs_inode_ctime(&x->ii));
		bool rm = !sts_eq(&st.st_mtim, &x->st.st_mtim);
		bool rc = !sts_eq(&st.st_ctim, &x->st.st_ctim);
		/* A tmpfs reference sometimes keeps a directory's time across an
		 * unlink (it takes the time from the unlinked inode): there, only
		 * a change on the reference must show here. */
		bool bad = ref_btrfs ? (em != rm || ec != rc) : ((rm && !em) || (rc && !ec));
		if (bad)
			die("%s: mtime %s/ctime %s changed here, %s/%s on the reference "
			    "(reference mtime %jd.%09ld -> %jd.%09ld)",
			    esc(x->path), em ? "" : "not", ec ? "" : "not", rm ? "" : "not",
			    rc ? "" : "not", (intmax_t)x->st.st_mtim.tv_sec, x->st.st_mtim.tv_nsec,
			    (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		bool explicit_mtime = op->kind == OP_UTIMES && op->ts[1].tv_nsec != UTIME_OMIT;
		if ((em && !explicit_mtime && !ts_now(btrfs_inode_mtime(&in.item))) ||
		    (ec && !ts_now(btrfs_inode_ctime(&in.item))))
			die("%s: a changed time is not the operation's", esc(x->path));
		if (op->kind == OP_UTIMES && nw_is_target(op, x)) {
			if ((op->ts[0].tv_nsec != UTIME_OMIT &&
			     !ts_eq(btrfs_inode_atime(&in.item), &st.st_atim)) ||
			    (op->ts[1].tv_nsec != UTIME_OMIT &&
			     !ts_eq(btrfs_inode_mtime(&in.item), &st.st_mtim)))
				die("%s: atime/mtime differ from the reference", esc(x->path));
		}
		/* Changed inodes carry the transaction. */
		if ((em || ec) && btrfs_inode_transid(&in.item) != tr->transid)
			die("%s: changed, transid %" PRIu64 " not %" PRIu64, esc(x->path),
			    btrfs_inode_transid(&in.item), tr->transid);
	}
}

/* ---- the whole tree --------------------------------------------------------- */

struct names {
	char **v;
	size_t n, cap;
	uint64_t *ino;
	uint8_t *type;
};

static int collect_dirent(void *ctx, const struct ubt_dirent *e)
{
	struct names *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 32;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		l->ino = realloc(l->ino, l->cap * sizeof(*l->ino));
		l->type = realloc(l->type, l->cap);
	}
	l->v[l->n] = malloc(e->name_len + 1);
	memcpy(l->v[l->n], e->name, e->name_len);
	l->v[l->n][e->name_len] = 0;
	if (e->location.type != BTRFS_INODE_ITEM_KEY)
		die("entry %s leads to another subvolume", esc(l->v[l->n]));
	l->ino[l->n] = e->location.objectid;
	l->type[l->n] = e->type;
	l->n++;
	return 0;
}

/* Hard-link groups: reference inode -> engine inode. */
struct linkmap {
	dev_t dev;
	ino_t rino;
	uint64_t eino;
};
static struct linkmap *lmap;
static size_t nlmap, lmap_cap;

static void link_check(const char *path, const struct stat *st, uint64_t eino)
{
	for (size_t i = 0; i < nlmap; i++) {
		bool same_ref = lmap[i].rino == st->st_ino && lmap[i].dev == st->st_dev;
		if (same_ref != (lmap[i].eino == eino))
			die("%s: hard links differ (engine inode %" PRIu64 ")", esc(path), eino);
		if (same_ref)
			return;
	}
	if (nlmap == lmap_cap) {
		lmap_cap = lmap_cap ? lmap_cap * 2 : 256;
		lmap = realloc(lmap, lmap_cap * sizeof(*lmap));
	}
	lmap[nlmap++] = (struct linkmap){ st->st_dev, st->st_ino, eino };
}

/* Names recorded in the inode's INODE_REF and INODE_EXTREF items. */
static uint32_t count_refs(uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_INODE_REF_KEY, 0 };
	struct btrfs_key max = { ino, BTRFS_INODE_EXTREF_KEY, (uint64_t)-1 };
	struct ubt_iter it;
	uint32_t n = 0;
	ubt_iter_start(&it, &fs->tree, &sv->root, &min, &max);
	while (ubt_iter_next(&it) == 0) {
		uint32_t off = 0;
		bool ext = it.key.type == BTRFS_INODE_EXTREF_KEY;
		uint32_t hdr = ext ? sizeof(struct btrfs_inode_extref) : sizeof(struct btrfs_inode_ref);
		while (off + hdr <= it.size) {
			uint32_t nl = ext ? btrfs_inode_extref_name_len((const void *)(it.data + off))
					  : btrfs_inode_ref_name_len((const void *)(it.data + off));
			off += hdr + nl;
			n++;
		}
	}
	ubt_iter_end(&it);
	return n;
}

static unsigned long verify_entries;

static void cmp_xattrs(const char *path, uint64_t ino)
{
	char full[PATH_BUF + PATH_MAX];
	static char rl[1 << 16], el[1 << 16];
	static uint8_t rv[70000], ev[70000];
	snprintf(full, sizeof(full), "%s/%s", refroot, path);
	ssize_t rn_ = llistxattr(full, rl, sizeof(rl));
	if (rn_ < 0)
		die("reference: listxattr %s: %s", esc(path), strerror(errno));
	ssize_t en = ubt_xattr_list(fs, sv, ino, el, sizeof(el));
	if (en < 0)
		die("xattr list %s: %s", esc(path), ubt_strerror((int)en));
	char *rnames[512], *enames[512];
	size_t nr = 0, ne = 0;
	for (ssize_t i = 0; i < rn_ && nr < 512; i += (ssize_t)strlen(rl + i) + 1)
		rnames[nr++] = rl + i;
	for (ssize_t i = 0; i < en && ne < 512; i += (ssize_t)strlen(el + i) + 1)
		enames[ne++] = el + i;
	qsort(rnames, nr, sizeof(char *), cmp_str);
	qsort(enames, ne, sizeof(char *), cmp_str);
	if (nr != ne)
		die("%s: %zu xattrs, reference %zu", esc(path), ne, nr);
	for (size_t i = 0; i < nr; i++) {
		if (strcmp(rnames[i], enames[i]))
			die("%s: xattr %s, reference %s", esc(path), esc(enames[i]), esc(rnames[i]));
		ssize_t a = lgetxattr(full, rnames[i], rv, sizeof(rv));
		ssize_t b = ubt_xattr_get(fs, sv, ino, enames[i], ev, sizeof(ev));
		if (a < 0 || b < 0 || a != b || memcmp(rv, ev, (size_t)a))
			die("%s: xattr %s value differs (%zd / reference %zd bytes)", esc(path),
			    esc(rnames[i]), b, a);
	}
}

static void cmp_content(const char *path, const struct ubt_inode *in, const struct stat *st)
{
	static uint8_t a[1 << 20], b[1 << 20];
	if (st->st_size > (off_t)sizeof(a))
		return;
	int fd = openat(refdfd, path, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		die("reference: open %s: %s", esc(path), strerror(errno));
	ssize_t n = read(fd, a, sizeof(a));
	close(fd);
	ssize_t m = ubt_file_read(fs, in, b, sizeof(b), 0);
	if (n != m || (n > 0 && memcmp(a, b, (size_t)n)))
		die("%s: contents differ (%zd / reference %zd bytes)", esc(path), m, n);
}

static void verify_dir(const char *rel, const struct ubt_inode *dir, bool times);

static void verify_entry(const char *path, const struct stat *st, uint64_t ino, uint8_t type,
			 bool times)
{
	struct ubt_inode in;
	int ret = ubt_inode_read(fs, sv, ino, &in);
	if (ret)
		die("%s: inode %" PRIu64 ": %s", esc(path), ino, ubt_strerror(ret));
	verify_entries++;
	cmp_attr("", path, st, &in.item);
	uint32_t mode = ubt_inode_mode(&in);
	static const uint8_t ft[16] = { [S_IFREG >> 12] = BTRFS_FT_REG_FILE,
					[S_IFDIR >> 12] = BTRFS_FT_DIR,
					[S_IFCHR >> 12] = BTRFS_FT_CHRDEV,
					[S_IFBLK >> 12] = BTRFS_FT_BLKDEV,
					[S_IFIFO >> 12] = BTRFS_FT_FIFO,
					[S_IFSOCK >> 12] = BTRFS_FT_SOCK,
					[S_IFLNK >> 12] = BTRFS_FT_SYMLINK };
	if (*path && ft[(mode & S_IFMT) >> 12] != type)
		die("%s: dir entry type %u for mode %o", esc(path), type, mode);
	if (times && (!ts_eq(btrfs_inode_atime(&in.item), &st->st_atim) ||
		      !ts_eq(btrfs_inode_mtime(&in.item), &st->st_mtim)))
		die("%s: atime %" PRIu64 ".%09u mtime %" PRIu64 ".%09u, reference %jd.%09ld %jd.%09ld",
		    esc(path), btrfs_timespec_sec(btrfs_inode_atime(&in.item)),
		    btrfs_timespec_nsec(btrfs_inode_atime(&in.item)),
		    btrfs_timespec_sec(btrfs_inode_mtime(&in.item)),
		    btrfs_timespec_nsec(btrfs_inode_mtime(&in.item)), (intmax_t)st->st_atim.tv_sec,
		    st->st_atim.tv_nsec, (intmax_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (*path && count_refs(ino) != btrfs_inode_nlink(&in.item))
		die("%s: %u names in the refs, nlink %u", esc(path), count_refs(ino),
		    btrfs_inode_nlink(&in.item));
	cmp_xattrs(path, ino);
	if (S_ISLNK(mode)) {
		char a[4200], b[4200];
		ssize_t n = readlinkat(refdfd, path, a, sizeof(a));
		size_t m = sizeof(b);
		ret = ubt_readlink(fs, &in, b, &m);
		if (n < 0 || ret || (size_t)n != m || memcmp(a, b, m))
			die("%s: symlink target differs (%s)", esc(path), ubt_strerror(ret));
	} else if (S_ISREG(mode)) {
		cmp_content(path, &in, st);
		if (st->st_nlink > 1)
			link_check(path, st, ino);
	} else if (S_ISDIR(mode)) {
		verify_dir(path, &in, times);
	} else if (st->st_nlink > 1) {
		link_check(path, st, ino);
	}
}

static void verify_dir(const char *rel, const struct ubt_inode *dir, bool times)
{
	size_t n;
	char **names = ref_list(rel, &n);
	struct names l = { 0 };
	int ret = ubt_dir_iterate(fs, dir, 0, collect_dirent, &l);
	if (ret)
		die("%s: readdir: %s", esc(rel), ubt_strerror(ret));
	/* Sort the engine's names, keeping their inodes. */
	size_t *ord = malloc((l.n + 1) * sizeof(*ord));
	for (size_t i = 0; i < l.n; i++)
		ord[i] = i;
	for (size_t i = 1; i < l.n; i++)
		for (size_t k = i; k > 0 && strcmp(l.v[ord[k - 1]], l.v[ord[k]]) > 0; k--) {
			size_t x = ord[k];
			ord[k] = ord[k - 1];
			ord[k - 1] = x;
		}
	if (l.n != n)
		die("directory %s: %zu entries, reference %zu", esc(rel), l.n, n);
	uint64_t size = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = ord[i];
		if (strcmp(names[i], l.v[k]))
			die("directory %s: entry %s, reference %s", esc(rel), esc(l.v[k]),
			    esc(names[i]));
		size += 2 * strlen(names[i]);
		/* The DIR_ITEM (name hash) agrees with the DIR_INDEX. */
		uint64_t lino;
		uint8_t type;
		ret = ubt_ns_lookup(fs, subvol, dir->ino, l.v[k], strlen(l.v[k]), &lino, &type);
		if (ret || lino != l.ino[k] || type != l.type[k])
			die("directory %s: lookup of %s disagrees with its index (%s)", esc(rel),
			    esc(l.v[k]), ubt_strerror(ret));
		char p[PATH_BUF];
		struct stat st;
		join(p, rel, names[i]);
		if (ref_stat(p, &st))
			die("reference: lstat %s: %s", esc(p), strerror(errno));
		verify_entry(p, &st, l.ino[k], l.type[k], times);
	}
	if (btrfs_inode_size(&dir->item) != size)
		die("directory %s: size %" PRIu64 ", names make %" PRIu64, esc(rel),
		    btrfs_inode_size(&dir->item), size);
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i]);
	free(l.v);
	free(l.ino);
	free(l.type);
	free(ord);
	free_list(names, n);
}

static void verify_all(const char *when, bool times)
{
	struct ubt_inode root;
	struct stat st;
	int ret = ubt_inode_read(fs, sv, btrfs_root_root_dirid(&sv->item), &root);
	if (ret)
		die("%s: root directory: %s", when, ubt_strerror(ret));
	if (fstat(refdfd, &st))
		die("reference: stat: %s", strerror(errno));
	nlmap = 0;
	verify_entries = 0;
	verify_entry("", &st, root.ino, BTRFS_FT_DIR, times);
}

/* ---- main loop ------------------------------------------------------------- */

static void set_now(void)
{
	now.sec = 1700000000 + (int64_t)(rng_state % 1000) * 1000000 + (int64_t)opno;
	now.nsec = (uint32_t)((opno * 7919 + 13) % 1000000000);
}

static bool changes_names(int kind)
{
	return kind <= OP_RENAME;
}

/* Does the path walk through a symlink (which the kernel would follow and
 * the engine-side walk does not)? */
static bool through_symlink(const char *path)
{
	char p[PATH_BUF];
	for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		struct stat st;
		memcpy(p, path, (size_t)(s - path));
		p[s - path] = 0;
		if (ref_stat(p, &st) == 0 && S_ISLNK(st.st_mode))
			return true;
	}
	return false;
}

static void run_op(struct op *op)
{
	char desc[1200];
	struct watch w[4];
	struct eresult er;

	describe(op, desc, sizeof(desc));
	if (getenv("UBTRFS_NS_TRACE"))
		fprintf(stderr, "op %lu: %s\n", opno, desc);
	/* A rename that would fill an INODE_REF without extref: the kernel
	 * aborts its transaction there; not asked. */
	if (ref_btrfs && !extref && op->kind == OP_RENAME) {
		struct ubt_inode a, d;
		const char *n;
		if (e_lookup(op->a, &a) == 0 && e_parent(op->b, &d, &n) == 0 &&
		    e_ref_overflows(a.ino, d.ino, strlen(n), 0)) {
			stat_skip[op->kind]++;
			return;
		}
	}
	struct stat lst;
	if (through_symlink(op->a) || through_symlink(op->b) ||
	    (op->kind == OP_CHMOD && ref_stat(op->a, &lst) == 0 && S_ISLNK(lst.st_mode))) {
		stat_skip[op->kind]++;
		return;
	}
	size_t nw = watches_for(op, w);
	e_run(op, &er);
	if (tr && fs->wr->aborted)
		die("%s: the engine aborted the transaction (%s)", desc, errname(er.ret));
	int rr;
	if (er.quirk) {
		rr = er.ret;
		stat_quirk[op->kind]++;
	} else {
		rr = ref_run(op);
	}
	if (er.ret != rr)
		die("%s: engine %s, reference %s", desc, errname(er.ret), errname(rr));
	if (er.ret)
		stat_fail[op->kind]++;
	else
		stat_ok[op->kind]++;
	watches_check(op, w, nw);
	if (er.ret == 0 && er.new_ino) {
		struct ubt_inode in;
		struct stat st;
		if (ubt_inode_read(fs, sv, er.new_ino, &in) || ref_stat(op->a, &st))
			die("%s: the new inode is not there", desc);
		cmp_attr("new", op->a, &st, &in.item);
		const struct btrfs_inode_item *ii = &in.item;
		if (!ts_now(btrfs_inode_atime(ii)) || !ts_now(btrfs_inode_mtime(ii)) ||
		    !ts_now(btrfs_inode_ctime(ii)) || !ts_now(btrfs_inode_otime(ii)))
			die("%s: the new inode's times are not the operation's", desc);
		if (btrfs_inode_generation(ii) != tr->transid || btrfs_inode_transid(ii) != tr->transid)
			die("%s: generation/transid of the new inode", desc);
	}
	if (changes_names(op->kind) && (er.ret == 0 || er.quirk))
		model_rebuild();
	else if (er.ret == 0)
		model_rebuild();	/* modes may have changed (parents, setgid) */
}

/* Explicit atime/mtime everywhere, on both sides (they are compared). */
static void final_times(void)
{
	ensure_trans();
	for (size_t i = 0; i < nents; i++) {
		struct timespec ts[2];
		struct ubt_inode in;
		opno++;
		set_now();
		for (int k = 0; k < 2; k++) {
			ts[k].tv_sec = (time_t)(100000000 + rn(900000000));
			ts[k].tv_nsec = (long)rn(1000000000);
		}
		if (e_lookup(ents[i].path, &in))
			die("final times: %s is not there", esc(ents[i].path));
		struct ubt_ns_attr a = { 0 };
		a.valid = UBT_NS_SET_ATIME | UBT_NS_SET_MTIME | UBT_NS_SET_CTIME;
		a.atime.sec = ts[0].tv_sec;
		a.atime.nsec = (uint32_t)ts[0].tv_nsec;
		a.mtime.sec = ts[1].tv_sec;
		a.mtime.nsec = (uint32_t)ts[1].tv_nsec;
		a.ctime = now;
		int ret = ubt_ns_setattr(ns, tr, subvol, in.ino, &a);
		if (ret)
			die("final times: %s: %s", esc(ents[i].path), ubt_strerror(ret));
		if (utimensat(refdfd, *ents[i].path ? ents[i].path : ".", ts, AT_SYMLINK_NOFOLLOW))
			die("reference: utimensat %s: %s", esc(ents[i].path), strerror(errno));
	}
}

/* What the run built: extrefs, shared dir items, inodes. */
static unsigned long max_extrefs, max_shared_dir, max_shared_x, max_multi_ref;

static void census(bool print)
{
	struct btrfs_key min = { 0, 0, 0 };
	struct btrfs_key max = { (uint64_t)-1, (uint8_t)-1, (uint64_t)-1 };
	struct ubt_iter it;
	unsigned long inodes = 0, extrefs = 0, shared_dir = 0, shared_x = 0, multi_ref = 0;
	ubt_iter_start(&it, &fs->tree, &sv->root, &min, &max);
	while (ubt_iter_next(&it) == 0) {
		switch (it.key.type) {
		case BTRFS_INODE_ITEM_KEY:
			inodes++;
			break;
		case BTRFS_INODE_EXTREF_KEY:
			extrefs++;
			break;
		case BTRFS_INODE_REF_KEY: {
			const struct btrfs_inode_ref *r = (const void *)it.data;
			if (it.size > sizeof(*r) + btrfs_inode_ref_name_len(r))
				multi_ref++;
			break;
		}
		case BTRFS_DIR_ITEM_KEY:
		case BTRFS_XATTR_ITEM_KEY: {
			const struct btrfs_dir_item *d = (const void *)it.data;
			if (it.size > btrfs_dir_entry_size(d)) {
				if (it.key.type == BTRFS_DIR_ITEM_KEY)
					shared_dir++;
				else
					shared_x++;
			}
			break;
		}
		}
	}
	ubt_iter_end(&it);
	max_extrefs = UBT_MAX(max_extrefs, extrefs);
	max_shared_dir = UBT_MAX(max_shared_dir, shared_dir);
	max_shared_x = UBT_MAX(max_shared_x, shared_x);
	max_multi_ref = UBT_MAX(max_multi_ref, multi_ref);
	if (print)
		fprintf(stderr, "ns_stress: %lu inodes at the end; at most: INODE_REF items with "
			"several names %lu, INODE_EXTREF items %lu, shared DIR_ITEMs %lu, shared "
			"XATTR_ITEMs %lu\n", inodes, max_multi_ref, max_extrefs, max_shared_dir,
			max_shared_x);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: ns_stress IMAGE[,IMAGE...] REFDIR OPS SEED COMMIT_EVERY\n");
		return 2;
	}
	images = argv[1];
	if (!realpath(argv[2], refroot)) {
		fprintf(stderr, "ns_stress: %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	unsigned long ops = strtoul(argv[3], NULL, 0);
	uint64_t seed = strtoull(argv[4], NULL, 0);
	rng_state = seed * 2654435761u + 1;
	unsigned long every = strtoul(argv[5], NULL, 0);
	unsigned long reopen_every = getenv("UBTRFS_NS_REOPEN") ?
					     strtoul(getenv("UBTRFS_NS_REOPEN"), NULL, 0) : 10;
	if (getenv("UBTRFS_NS_SUBVOL"))
		subvol = strtoull(getenv("UBTRFS_NS_SUBVOL"), NULL, 0);
	if (!every)
		every = 1;

	umask(0);
	refdfd = open(refroot, O_RDONLY | O_DIRECTORY);
	struct statfs sfs;
	if (refdfd < 0 || fstatfs(refdfd, &sfs)) {
		fprintf(stderr, "ns_stress: %s: %s\n", refroot, strerror(errno));
		return 2;
	}
	ref_btrfs = (unsigned long)sfs.f_type == BTRFS_SUPER_MAGIC_FS;
	int ret = open_fs();
	if (ret) {
		fprintf(stderr, "ns_stress: open %s: %s\n", images, ubt_strerror(ret));
		return 1;
	}
	build_pools();
	model_rebuild();
	verify_all("at the start", false);
	fprintf(stderr, "ns_stress: reference %s (%s), %zu entries to start with, nodesize %u, %s\n",
		refroot, ref_btrfs ? "kernel btrfs" : "not btrfs", nents, fs->nodesize,
		extref ? "extref" : "no extref");

	unsigned long commits = 0;
	for (opno = 1; opno <= ops; opno++) {
		struct op op;
		memset(&op, 0, sizeof(op));
		set_now();
		gen_op(&op);
		run_op(&op);
		free(op.xval);
		if (opno % every == 0 || opno == ops) {
			commit();
			commits++;
			if (reopen_every && commits % reopen_every == 0) {
				close_fs();
				ret = open_fs();
				if (ret)
					die("reopen: %s", ubt_strerror(ret));
			}
			verify_all("after a commit", false);
			census(false);
		}
	}
	final_times();
	commit();
	close_fs();
	ret = open_fs();
	if (ret)
		die("reopen: %s", ubt_strerror(ret));
	model_rebuild();
	verify_all("at the end", true);
	census(true);
	unsigned long tot_ok = 0, tot_fail = 0;
	for (int k = 0; k < OP_N; k++) {
		fprintf(stderr, "  %-12s ok %5lu  errors %5lu  btrfs-only %4lu  skipped %lu\n",
			op_names[k], stat_ok[k], stat_fail[k], stat_quirk[k], stat_skip[k]);
		tot_ok += stat_ok[k];
		tot_fail += stat_fail[k];
	}
	fprintf(stderr, "ns_stress: %lu operations (%lu ok, %lu errors as the reference), %lu "
		"commits, %zu entries, generation %" PRIu64 "\n", ops, tot_ok, tot_fail, commits,
		nents, btrfs_super_generation(&fs->vol->super));
	close_fs();
	model_clear();
	free(ents);
	free(lmap);
	close(refdfd);
	return 0;
}
