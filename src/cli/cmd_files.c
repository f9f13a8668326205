/*
 * cli: offline file access on unmounted images, no root or kernel needed.
 *   ubtrfs ls [-l] [-R] DEVICE [PATH]
 *   ubtrfs cat DEVICE PATH
 *   ubtrfs get DEVICE PATH DEST
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define FS_USAGE_TAIL CLI_FS_OPTS_HELP

const char cmd_ls_usage[] =
	"usage: ubtrfs ls [-l] [-R] [-a] DEVICE [PATH]\n"
	"\n"
	"List a directory of an unmounted filesystem (PATH defaults to /).\n"
	"\n"
	"  -l                  long listing: mode, links, owner, group, size, mtime\n"
	"  -R                  recurse into subdirectories (and subvolumes)\n"
	"  -i                  print inode numbers (subvolume:inode)\n" FS_USAGE_TAIL;

const char cmd_cat_usage[] =
	"usage: ubtrfs cat DEVICE PATH\n"
	"\n"
	"Write a file of an unmounted filesystem to standard output.\n" FS_USAGE_TAIL;

const char cmd_get_usage[] =
	"usage: ubtrfs get [-q] DEVICE PATH DEST\n"
	"\n"
	"Copy PATH (a file or a whole tree) out of an unmounted filesystem to DEST,\n"
	"preserving modes, owners (when run as root), nanosecond times, xattrs,\n"
	"hard links, symlinks, device nodes, fifos and sparseness.  DEST must not\n"
	"exist.  A progress line goes to stderr on a terminal.\n"
	"\n"
	"  -q                  no progress line\n" FS_USAGE_TAIL;

static const struct option fs_longopts[] = {
	CLI_FS_LONGOPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Parse options; returns -1 to exit with *status, else 0. */
static int parse_fs_cmd(int argc, char **argv, const char *name, const char *shortopts,
			const char *usage, struct cli_fs_args *a,
			int (*own)(int c, void *ctx), void *ctx, int *status)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, shortopts, fs_longopts, NULL)) != -1) {
		int r = cli_fs_common_opt(a, c, optarg);
		if (r < 0) {
			*status = 1;
			return -1;
		}
		if (r)
			continue;
		if (c == 'h') {
			fputs(usage, stdout);
			*status = 0;
			return -1;
		}
		if (!own || own(c, ctx)) {
			*status = cli_usage_error(name, "invalid option");
			return -1;
		}
	}
	return 0;
}

/* Put the positional DEVICE first among the devices. */
static int take_device(struct cli_fs_args *a, const char *dev)
{
	if (a->ndev >= CLI_MAX_DEVICES)
		return -1;
	memmove(&a->devices[1], &a->devices[0], a->ndev * sizeof(a->devices[0]));
	a->devices[0] = dev;
	a->ndev++;
	return 0;
}

/* ---- ls ----------------------------------------------------------------- */

struct ls_opts {
	bool longfmt, recursive, inodes;
};

static int ls_opt(int c, void *ctx)
{
	struct ls_opts *o = ctx;
	switch (c) {
	case 'l':
		o->longfmt = true;
		return 0;
	case 'R':
		o->recursive = true;
		return 0;
	case 'i':
		o->inodes = true;
		return 0;
	case 'a':
		return 0;
	default:
		return 1;
	}
}

static void mode_string(uint32_t mode, char *s)
{
	const char *types = "?pc?d?b?-?l?s???";
	s[0] = types[(mode >> 12) & 15];
	const char *rwx = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		s[1 + i] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
	if (mode & S_ISUID)
		s[3] = (mode & S_IXUSR) ? 's' : 'S';
	if (mode & S_ISGID)
		s[6] = (mode & S_IXGRP) ? 's' : 'S';
	if (mode & S_ISVTX)
		s[9] = (mode & S_IXOTH) ? 't' : 'T';
	s[10] = 0;
}

struct ls_entry {
	char *name;
	struct ubtrfs_stat st;
};

struct ls_collect {
	ubtrfs_fs *fs;
	struct ls_entry *v;
	size_t n, cap;
	int err;
};

static int ls_collect_cb(void *ctx, const struct ubtrfs_dirent *e)
{
	struct ls_collect *c = ctx;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct ls_entry *v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	struct ls_entry *le = &c->v[c->n];
	le->name = strndup(e->name, e->name_len);
	if (!le->name)
		return -ENOMEM;
	int ret = ubtrfs_stat(c->fs, e->id, &le->st);
	if (ret) {
		fprintf(stderr, "ubtrfs: %s: %s\n", le->name, ubtrfs_strerror(ret));
		free(le->name);
		c->err = 1;
		return 0;
	}
	c->n++;
	return 0;
}

static void ls_print(ubtrfs_fs *fs, const struct ls_opts *o, const char *name,
		     const struct ubtrfs_stat *st)
{
	if (o->inodes)
		printf("%" PRIu64 ":%" PRIu64 " ", st->id.subvol, st->id.ino);
	if (!o->longfmt) {
		printf("%s\n", name);
		return;
	}
	char m[11], t[64], target[4200] = "";
	struct tm tm;
	time_t sec = (time_t)st->mtime.sec;
	mode_string(st->mode, m);
	gmtime_r(&sec, &tm);
	strftime(t, sizeof(t), "%Y-%m-%d %H:%M:%S", &tm);
	if (S_ISLNK(st->mode)) {
		char buf[4097];
		if (ubtrfs_readlink(fs, st->id, buf, sizeof(buf)) >= 0)
			snprintf(target, sizeof(target), " -> %s", buf);
	}
	if (S_ISCHR(st->mode) || S_ISBLK(st->mode))
		printf("%s %3u %5u %5u %5u, %5u %s.%09u %s%s\n", m, st->nlink, st->uid, st->gid,
		       st->rdev_major, st->rdev_minor, t, st->mtime.nsec, name, target);
	else
		printf("%s %3u %5u %5u %12" PRIu64 " %s.%09u %s%s\n", m, st->nlink, st->uid,
		       st->gid, st->size, t, st->mtime.nsec, name, target);
}

static int ls_dir(ubtrfs_fs *fs, const struct ls_opts *o, ubtrfs_ino dir, const char *path,
		  bool header)
{
	struct ls_collect c = { fs, NULL, 0, 0, 0 };
	int ret = ubtrfs_readdir(fs, dir, 0, ls_collect_cb, &c);
	int status = c.err;

	if (ret < 0) {
		fprintf(stderr, "ubtrfs: %s: %s\n", path, ubtrfs_strerror(ret));
		status = 1;
	}
	if (header)
		printf("%s:\n", path);
	for (size_t i = 0; i < c.n; i++)
		ls_print(fs, o, c.v[i].name, &c.v[i].st);
	if (o->recursive) {
		for (size_t i = 0; i < c.n; i++) {
			if (!S_ISDIR(c.v[i].st.mode))
				continue;
			size_t len = strlen(path) + strlen(c.v[i].name) + 2;
			char *sub = malloc(len);
			if (!sub)
				return 1;
			snprintf(sub, len, "%s%s%s", path,
				 path[strlen(path) - 1] == '/' ? "" : "/", c.v[i].name);
			printf("\n");
			status |= ls_dir(fs, o, c.v[i].st.id, sub, true);
			free(sub);
		}
	}
	for (size_t i = 0; i < c.n; i++)
		free(c.v[i].name);
	free(c.v);
	return status;
}

int cmd_ls(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	struct ls_opts o = { 0 };
	int status;

	if (parse_fs_cmd(argc, argv, "ls", "lRiah", cmd_ls_usage, &a, ls_opt, &o, &status))
		return status;
	if (optind >= argc || argc - optind > 2)
		return cli_usage_error("ls", "usage: ls [-l] [-R] DEVICE [PATH]");
	take_device(&a, argv[optind]);
	const char *path = optind + 1 < argc ? argv[optind + 1] : "/";
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	if (cli_fs_open(&a, &fs, &root))
		return 1;
	struct ubtrfs_stat st;
	int ret = ubtrfs_resolve(fs, root, path, &st);
	if (ret) {
		fprintf(stderr, "ubtrfs: %s: %s\n", path, ubtrfs_strerror(ret));
		status = 1;
	} else if (S_ISDIR(st.mode)) {
		status = ls_dir(fs, &o, st.id, path, o.recursive);
	} else {
		ls_print(fs, &o, path, &st);
		status = 0;
	}
	ubtrfs_close(fs);
	return status;
}

/* ---- cat ---------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int cmd_cat(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	int status;

	if (parse_fs_cmd(argc, argv, "cat", "h", cmd_cat_usage, &a, NULL, NULL, &status))
		return status;
	if (argc - optind != 2)
		return cli_usage_error("cat", "a DEVICE and a PATH are required");
	take_device(&a, argv[optind]);
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	if (cli_fs_open(&a, &fs, &root))
		return 1;
	struct ubtrfs_stat st;
	const char *path = argv[optind + 1];
	int ret = ubtrfs_resolve(fs, root, path, &st);
	if (!ret && !S_ISREG(st.mode))
		ret = S_ISDIR(st.mode) ? -EISDIR : -EINVAL;
	size_t bufsize = 1 << 20;
	char *buf = malloc(bufsize);
	for (uint64_t off = 0; !ret && buf && off < st.size;) {
		ssize_t n = ubtrfs_read(fs, st.id, buf, bufsize, off);
		if (n < 0) {
			ret = (int)n;
			fprintf(stderr, "ubtrfs: %s: read at offset %" PRIu64 ": %s\n", path, off,
				ubtrfs_strerror(ret));
			goto done;
		}
		if (n == 0)
			break;
		ret = write_all(1, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (ret)
		fprintf(stderr, "ubtrfs: %s: %s\n", path, ubtrfs_strerror(ret));
done:
	free(buf);
	ubtrfs_close(fs);
	return ret ? 1 : 0;
}

/* ---- get ---------------------------------------------------------------- */

struct link_seen {
	ubtrfs_ino id;
	char *path;
};

struct get_ctx {
	ubtrfs_fs *fs;
	bool progress, is_root;
	int errors;
	uint64_t files, bytes;
	time_t last_progress;
	struct link_seen *links;
	size_t nlinks, links_cap;
	char *buf;
	size_t bufsize;
};

static void get_progress(struct get_ctx *g, bool final)
{
	if (!g->progress)
		return;
	time_t now = time(NULL);
	if (!final && now == g->last_progress)
		return;
	g->last_progress = now;
	fprintf(stderr, "\r%" PRIu64 " files, %.1f MiB copied%s", g->files,
		(double)g->bytes / 1048576.0, final ? "\n" : "");
}

static void get_err(struct get_ctx *g, const char *path, const char *what, int err)
{
	fprintf(stderr, "%subtrfs: %s: %s: %s\n", g->progress ? "\n" : "", path, what,
		ubtrfs_strerror(err));
	g->errors++;
}

static void copy_xattrs(struct get_ctx *g, ubtrfs_ino id, const char *dest)
{
	ssize_t n = ubtrfs_listxattr(g->fs, id, NULL, 0);
	if (n <= 0) {
		if (n < 0)
			get_err(g, dest, "listing xattrs", (int)n);
		return;
	}
	char *names = malloc((size_t)n);
	if (!names)
		return;
	n = ubtrfs_listxattr(g->fs, id, names, (size_t)n);
	for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
		const char *name = names + off;
		ssize_t vlen = ubtrfs_getxattr(g->fs, id, name, NULL, 0);
		if (vlen < 0)
			continue;
		char *val = malloc((size_t)vlen + 1);
		if (!val)
			break;
		vlen = ubtrfs_getxattr(g->fs, id, name, val, (size_t)vlen);
		if (vlen >= 0 && lsetxattr(dest, name, val, (size_t)vlen, 0) < 0) {
			/* trusted.* and security.* need privileges; say so once per file */
			if (!(errno == EPERM && !g->is_root))
				get_err(g, dest, name, -errno);
		}
		free(val);
	}
	free(names);
}

static void set_meta(struct get_ctx *g, const struct ubtrfs_stat *st, const char *dest)
{
	if (g->is_root && lchown(dest, st->uid, st->gid) < 0)
		get_err(g, dest, "chown", -errno);
	if (!S_ISLNK(st->mode) && chmod(dest, st->mode & 07777) < 0)
		get_err(g, dest, "chmod", -errno);
	struct timespec ts[2] = { { (time_t)st->atime.sec, st->atime.nsec },
				  { (time_t)st->mtime.sec, st->mtime.nsec } };
	if (utimensat(AT_FDCWD, dest, ts, AT_SYMLINK_NOFOLLOW) < 0)
		get_err(g, dest, "setting times", -errno);
}

struct range_copy {
	struct get_ctx *g;
	ubtrfs_ino id;
	int fd;
	int err;
};

static int copy_range(void *ctx, uint64_t off, uint64_t len)
{
	struct range_copy *r = ctx;
	struct get_ctx *g = r->g;

	while (len) {
		size_t chunk = len < g->bufsize ? (size_t)len : g->bufsize;
		ssize_t n = ubtrfs_read(g->fs, r->id, g->buf, chunk, off);
		if (n <= 0) {
			r->err = n < 0 ? (int)n : -EIO;
			return 1;
		}
		const char *p = g->buf;
		size_t left = (size_t)n;
		uint64_t wo = off;
		while (left) {
			ssize_t w = pwrite(r->fd, p, left, (off_t)wo);
			if (w < 0) {
				r->err = -errno;
				return 1;
			}
			p += w;
			left -= (size_t)w;
			wo += (uint64_t)w;
		}
		g->bytes += (uint64_t)n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
		get_progress(g, false);
	}
	return 0;
}

static int get_tree(struct get_ctx *g, const struct ubtrfs_stat *st, const char *dest);

struct get_dir {
	struct get_ctx *g;
	const char *dest;
	int err;
};

static int get_dir_entry(void *ctx, const struct ubtrfs_dirent *e)
{
	struct get_dir *d = ctx;
	struct ubtrfs_stat st;
	size_t len = strlen(d->dest) + e->name_len + 2;
	char *path = malloc(len);

	if (!path)
		return -ENOMEM;
	snprintf(path, len, "%s/%.*s", d->dest, (int)e->name_len, e->name);
	int ret = ubtrfs_stat(d->g->fs, e->id, &st);
	if (ret)
		get_err(d->g, path, "stat", ret);
	else
		get_tree(d->g, &st, path);
	free(path);
	return 0;
}

static int get_tree(struct get_ctx *g, const struct ubtrfs_stat *st, const char *dest)
{
	int ret = 0;

	g->files++;
	get_progress(g, false);
	/* Hard links: a second path to an inode becomes a link. */
	if (!S_ISDIR(st->mode) && st->nlink > 1) {
		for (size_t i = 0; i < g->nlinks; i++) {
			if (g->links[i].id.subvol == st->id.subvol && g->links[i].id.ino == st->id.ino) {
				if (link(g->links[i].path, dest) < 0)
					get_err(g, dest, "link", -errno);
				return 0;
			}
		}
		if (g->nlinks == g->links_cap) {
			size_t cap = g->links_cap ? g->links_cap * 2 : 64;
			struct link_seen *l = realloc(g->links, cap * sizeof(*l));
			if (l) {
				g->links = l;
				g->links_cap = cap;
			}
		}
		if (g->nlinks < g->links_cap) {
			g->links[g->nlinks].id = st->id;
			g->links[g->nlinks].path = strdup(dest);
			if (g->links[g->nlinks].path)
				g->nlinks++;
		}
	}
	if (S_ISDIR(st->mode)) {
		if (mkdir(dest, 0700) < 0) {
			get_err(g, dest, "mkdir", -errno);
			return 0;
		}
		struct get_dir d = { g, dest, 0 };
		ret = ubtrfs_readdir(g->fs, st->id, 0, get_dir_entry, &d);
		if (ret < 0)
			get_err(g, dest, "reading directory", ret);
	} else if (S_ISREG(st->mode)) {
		int fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			get_err(g, dest, "create", -errno);
			return 0;
		}
		struct range_copy r = { g, st->id, fd, 0 };
		ret = ubtrfs_data_ranges(g->fs, st->id, copy_range, &r);
		if (r.err)
			get_err(g, dest, "copying data", r.err);
		else if (ret < 0)
			get_err(g, dest, "reading extents", ret);
		if (ftruncate(fd, (off_t)st->size) < 0)
			get_err(g, dest, "truncate", -errno);
		close(fd);
	} else if (S_ISLNK(st->mode)) {
		char target[4097];
		ssize_t n = ubtrfs_readlink(g->fs, st->id, target, sizeof(target));
		if (n < 0) {
			get_err(g, dest, "readlink", (int)n);
			return 0;
		}
		if (symlink(target, dest) < 0) {
			get_err(g, dest, "symlink", -errno);
			return 0;
		}
	} else {
		dev_t dev = makedev(st->rdev_major, st->rdev_minor);
		if (mknod(dest, (st->mode & S_IFMT) | 0600, dev) < 0) {
			get_err(g, dest, "mknod", -errno);
			return 0;
		}
	}
	copy_xattrs(g, st->id, dest);
	set_meta(g, st, dest);
	return 0;
}

static int get_opt(int c, void *ctx)
{
	bool *quiet = ctx;
	if (c == 'q') {
		*quiet = true;
		return 0;
	}
	return 1;
}

int cmd_get(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	bool quiet = false;
	int status;

	if (parse_fs_cmd(argc, argv, "get", "qh", cmd_get_usage, &a, get_opt, &quiet, &status))
		return status;
	if (argc - optind != 3)
		return cli_usage_error("get", "a DEVICE, a PATH and a DEST are required");
	take_device(&a, argv[optind]);
	const char *path = argv[optind + 1], *dest = argv[optind + 2];
	struct stat dst;
	if (lstat(dest, &dst) == 0) {
		fprintf(stderr, "ubtrfs: %s exists; give a new path\n", dest);
		return 1;
	}
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	if (cli_fs_open(&a, &fs, &root))
		return 1;
	struct get_ctx g = { 0 };
	g.fs = fs;
	g.progress = !quiet && isatty(2);
	g.is_root = geteuid() == 0;
	g.bufsize = 1 << 20;
	g.buf = malloc(g.bufsize);
	struct ubtrfs_stat st;
	int ret = g.buf ? ubtrfs_resolve(fs, root, path, &st) : -ENOMEM;
	if (ret) {
		fprintf(stderr, "ubtrfs: %s: %s\n", path, ubtrfs_strerror(ret));
		g.errors++;
	} else {
		get_tree(&g, &st, dest);
		get_progress(&g, true);
	}
	for (size_t i = 0; i < g.nlinks; i++)
		free(g.links[i].path);
	free(g.links);
	free(g.buf);
	ubtrfs_close(fs);
	return g.errors ? 1 : 0;
}
