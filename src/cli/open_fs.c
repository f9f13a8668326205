/*
 * cli: the shared way commands name and open a filesystem.
 *   DEVICE [--device PATH]... [--degraded] [--nologreplay]
 *   [--subvol PATH | --subvolid N]  (default: the default subvolume)
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ubtrfs/ubtrfs.h>

int cli_fs_add_device(struct cli_fs_args *a, const char *path)
{
	if (a->ndev >= CLI_MAX_DEVICES) {
		fprintf(stderr, "ubtrfs: at most %d devices\n", CLI_MAX_DEVICES);
		return -1;
	}
	a->devices[a->ndev++] = path;
	return 0;
}

int cli_fs_open(struct cli_fs_args *a, ubtrfs_fs **fs, ubtrfs_ino *root)
{
	unsigned flags = (a->degraded ? UBTRFS_OPEN_DEGRADED : 0) |
			 (a->nologreplay ? UBTRFS_OPEN_NOLOGREPLAY : 0) |
			 (a->rdwr ? UBTRFS_OPEN_RDWR : 0) |
			 (a->keep_writers_out ? UBTRFS_OPEN_KEEP_WRITERS_OUT : 0);
	int ret = ubtrfs_open_cache(a->devices, a->ndev, flags, a->cache_bytes, fs);

	if (ret) {
		fprintf(stderr, "ubtrfs: cannot open %s: %s\n", a->devices[0], ubtrfs_strerror(ret));
		return 1;
	}
	uint64_t sv = a->subvolid ? a->subvolid : ubtrfs_default_subvol(*fs);
	if (a->subvol_path) {
		ubtrfs_ino top;
		struct ubtrfs_stat st;
		ret = ubtrfs_subvol_root(*fs, 5, &top);
		if (!ret)
			ret = ubtrfs_resolve(*fs, top, a->subvol_path, &st);
		if (!ret && (st.id.ino != 256 || (st.mode & 0170000) != 0040000))
			ret = -EINVAL;
		if (ret) {
			fprintf(stderr, "ubtrfs: subvol=%s: %s\n", a->subvol_path,
				ret == -EINVAL ? "not a subvolume" : ubtrfs_strerror(ret));
			ubtrfs_close(*fs);
			return 1;
		}
		sv = st.id.subvol;
	}
	ret = ubtrfs_subvol_root(*fs, sv, root);
	if (ret) {
		fprintf(stderr, "ubtrfs: subvolume %llu: %s\n", (unsigned long long)sv,
			ubtrfs_strerror(ret));
		ubtrfs_close(*fs);
		return 1;
	}
	return 0;
}

/* A copy of s that lives until cli_fs_args_release(). */
static const char *keep(struct cli_fs_args *a, const char *s)
{
	if (a->nowned >= sizeof(a->owned) / sizeof(a->owned[0]))
		return NULL;
	char *c = strdup(s);
	if (c)
		a->owned[a->nowned++] = c;
	return c;
}

void cli_fs_args_release(struct cli_fs_args *a)
{
	for (size_t i = 0; i < a->nowned; i++)
		free(a->owned[i]);
	a->nowned = 0;
}

/* A size with an optional K/M/G suffix; false if malformed. */
static bool parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned shift = 0;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return false;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (*end || (shift && v > (~0ull >> shift)))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* rescue=a:b:...: what we can honour is nologreplay (norecovery). */
static int parse_rescue(struct cli_fs_args *a, const char *list)
{
	char *copy = strdup(list), *save = NULL;

	if (!copy)
		return -1;
	for (char *r = strtok_r(copy, ":", &save); r; r = strtok_r(NULL, ":", &save)) {
		if (!strcmp(r, "nologreplay")) {
			a->nologreplay = true;
			continue;
		}
		fprintf(stderr, "ubtrfs: mount option rescue=%s is not supported (only "
				"rescue=nologreplay is)\n", r);
		free(copy);
		return -1;
	}
	free(copy);
	return 0;
}

/*
 * Parse one "-o" style option list: the options that choose how the
 * filesystem is opened.  Everything else is left in `rest` (comma
 * separated) for the caller.  Of ro and rw the last one wins, as for
 * mount(8).  Prints a message and returns -1 on a malformed option.
 */
int cli_fs_parse_opts(struct cli_fs_args *a, const char *opts, char *rest, size_t restlen,
		      bool *ro, bool *rw)
{
	char *copy = strdup(opts), *save = NULL;

	if (!copy)
		return -1;
	rest[0] = 0;
	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strcmp(o, "ro")) {
			*ro = true;
			*rw = false;
		} else if (!strcmp(o, "rw")) {
			*rw = true;
			*ro = false;
		} else if (!strcmp(o, "degraded")) {
			a->degraded = true;
		} else if (!strcmp(o, "nologreplay") || !strcmp(o, "norecovery")) {
			a->nologreplay = true;
		} else if (!strncmp(o, "rescue=", 7)) {
			if (parse_rescue(a, o + 7))
				goto fail;
		} else if (!strncmp(o, "subvol=", 7)) {
			a->subvol_path = keep(a, o + 7);
			if (!a->subvol_path)
				goto fail;
		} else if (!strncmp(o, "subvolid=", 9)) {
			char *end;
			errno = 0;
			a->subvolid = strtoull(o + 9, &end, 0);
			if (errno || end == o + 9 || *end) {
				fprintf(stderr, "ubtrfs: mount option %s: not a subvolume id\n", o);
				goto fail;
			}
		} else if (!strncmp(o, "device=", 7)) {
			const char *dev = keep(a, o + 7);
			if (!dev || cli_fs_add_device(a, dev))
				goto fail;
		} else if (!strncmp(o, "cache_size=", 11)) {
			if (!parse_size(o + 11, &a->cache_bytes)) {
				fprintf(stderr, "ubtrfs: mount option %s: expected a size such as "
						"256M\n", o);
				goto fail;
			}
		} else {
			size_t used = strlen(rest);
			int n = snprintf(rest + used, restlen - used, "%s%s", used ? "," : "", o);
			if (n < 0 || (size_t)n >= restlen - used) {
				fprintf(stderr, "ubtrfs: mount options too long\n");
				goto fail;
			}
		}
	}
	free(copy);
	return 0;
fail:
	free(copy);
	return -1;
}

int cli_fs_common_opt(struct cli_fs_args *a, int c, const char *arg)
{
	switch (c) {
	case 0x100:
		return cli_fs_add_device(a, arg) ? -1 : 1;
	case 0x101:
		a->degraded = true;
		return 1;
	case 0x102:
		a->nologreplay = true;
		return 1;
	case 0x103:
		a->subvol_path = arg;
		return 1;
	case 0x104:
		a->subvolid = strtoull(arg, NULL, 0);
		return 1;
	case 0x105:
		a->cache_bytes = strtoull(arg, NULL, 0) << 20;
		return 1;
	default:
		return 0;
	}
}
