/*
 * cli: subvolume changes on unmounted images.
 *   ubtrfs subvolume create DEVICE... PATH
 *   ubtrfs subvolume delete DEVICE... PATH
 *   ubtrfs subvolume snapshot [-r] DEVICE... SOURCE DEST
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char cmd_subvolume_create_usage[] =
	"usage: ubtrfs subvolume create DEVICE... PATH\n"
	"\n"
	"Make a new, empty subvolume PATH on an unmounted filesystem, as `btrfs\n"
	"subvolume create` does on a mounted one (its root directory owned by the\n"
	"caller, mode 0777 less the umask).  PATH is from the top level unless --subvol/--subvolid\n"
	"says otherwise; its parent must exist.  EXPERIMENTAL, as every write.\n"
	"\n"
	"  --device PATH       another device of the filesystem (repeatable)\n"
	"  --subvol PATH       PATH is from this subvolume (path from the top level)\n"
	"  --subvolid ID       PATH is from the subvolume with this id\n";

const char cmd_subvolume_snapshot_usage[] =
	"usage: ubtrfs subvolume snapshot [-r] DEVICE... SOURCE DEST\n"
	"\n"
	"Make a snapshot of subvolume SOURCE as DEST on an unmounted filesystem, as\n"
	"`btrfs subvolume snapshot` does on a mounted one: a new subvolume sharing\n"
	"all of SOURCE's data and metadata.  Paths are from the top level (\"/\" is\n"
	"the top-level subvolume itself) unless --subvol/--subvolid says otherwise.\n"
	"If DEST is an existing directory, the snapshot goes inside it under\n"
	"SOURCE's name.  Subvolumes inside SOURCE are not included: the snapshot\n"
	"shows an empty directory in their place.  EXPERIMENTAL, as every write.\n"
	"\n"
	"  -r                  make the snapshot read-only\n"
	"  --device PATH       another device of the filesystem (repeatable)\n"
	"  --subvol PATH       paths are from this subvolume (path from the top level)\n"
	"  --subvolid ID       paths are from the subvolume with this id\n";

const char cmd_subvolume_delete_usage[] =
	"usage: ubtrfs subvolume delete DEVICE... PATH\n"
	"\n"
	"Delete subvolume PATH of an unmounted filesystem, as `btrfs subvolume delete`\n"
	"does on a mounted one: its name goes and it is marked dead.  Its blocks stay\n"
	"allocated until the Linux kernel mounts the filesystem read-write and drops\n"
	"the dead tree (as it does after its own deletes); ubtrfs does not free them.\n"
	"Refused for the default subvolume and for one that holds subvolumes.\n"
	"PATH is from the top level unless --subvol/--subvolid says otherwise.\n"
	"EXPERIMENTAL, as every write.\n"
	"\n"
	"  --device PATH       another device of the filesystem (repeatable)\n"
	"  --subvol PATH       PATH is from this subvolume (path from the top level)\n"
	"  --subvolid ID       PATH is from the subvolume with this id\n";

static const struct option longopts[] = {
	CLI_FS_LONGOPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* The last component of path (trailing slashes ignored) into name: 0,
 * -EINVAL when there is none ("/", ""), -ENAMETOOLONG. */
static int last_name(const char *path, char *name, size_t size, size_t *dirlen)
{
	size_t end = strlen(path);

	while (end > 0 && path[end - 1] == '/')
		end--;
	size_t start = end;
	while (start > 0 && path[start - 1] != '/')
		start--;
	if (end == start)
		return -EINVAL;
	if (end - start >= size)
		return -ENAMETOOLONG;
	memcpy(name, path + start, end - start);
	name[end - start] = 0;
	*dirlen = start;
	return 0;
}

/* Options and devices: all positional arguments but the last npaths are
 * devices.  0 to go on, else the exit status (-1: help shown, 0). */
static int parse(int argc, char **argv, const char *name, const char *usage, int npaths,
		 struct cli_fs_args *a, bool *readonly)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, readonly ? "rh" : "h", longopts, NULL)) != -1) {
		int r = cli_fs_common_opt(a, c, optarg);
		if (r < 0)
			return 1;
		if (r)
			continue;
		if (c == 'h') {
			fputs(usage, stdout);
			return -1;
		}
		if (c == 'r' && readonly) {
			*readonly = true;
			continue;
		}
		return cli_usage_error(name, "invalid option");
	}
	if (argc - optind < npaths + 1)
		return cli_usage_error(name, "%s are required",
				       npaths == 1 ? "a DEVICE and a PATH" : "a DEVICE, a SOURCE and a DEST");
	for (int i = argc - npaths - 1; i >= optind; i--) {
		if (a->ndev >= CLI_MAX_DEVICES)
			return cli_usage_error(name, "too many devices");
		memmove(&a->devices[1], &a->devices[0], a->ndev * sizeof(a->devices[0]));
		a->devices[0] = argv[i];
		a->ndev++;
	}
	if (!a->subvolid && !a->subvol_path)
		a->subvolid = 5;
	a->rdwr = true;
	return 0;
}

/* parse, then open the filesystem read-write and find the root paths
 * start from: 0 to go on (a released by the caller), else the exit
 * status to return (everything released). */
static int open_rw(int argc, char **argv, const char *name, const char *usage, int npaths,
		   struct cli_fs_args *a, bool *readonly, ubtrfs_fs **fs, ubtrfs_ino *root)
{
	int r = parse(argc, argv, name, usage, npaths, a, readonly);

	if (r) {
		cli_fs_args_release(a);
		return r < 0 ? 0 : r;
	}
	if (cli_fs_open(a, fs, root)) {
		cli_fs_args_release(a);
		return 1;
	}
	return -1;
}

/* The directory a new name goes in and the name, from path; prints why
 * not.  *dir (freed by the caller) is the directory's path. */
static int new_name(ubtrfs_fs *fs, ubtrfs_ino root, const char *path, struct ubtrfs_stat *dst,
		    char *name, size_t size, char **dir)
{
	size_t dirlen = 0;
	int ret = last_name(path, name, size, &dirlen);

	if (ret) {
		fprintf(stderr, "ubtrfs: %s: %s\n", path,
			ret == -EINVAL ? "not a valid name" : ubtrfs_strerror(ret));
		return ret;
	}
	*dir = strndup(path, dirlen);
	ret = *dir ? ubtrfs_resolve(fs, root, **dir ? *dir : "/", dst) : -ENOMEM;
	if (!ret && !S_ISDIR(dst->mode))
		ret = -ENOTDIR;
	if (ret)
		fprintf(stderr, "ubtrfs: %s: %s\n", *dir && **dir ? *dir : "/", ubtrfs_strerror(ret));
	return ret;
}

int cmd_subvolume_create(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	int r = open_rw(argc, argv, "subvolume create", cmd_subvolume_create_usage, 1, &a, NULL,
			&fs, &root);
	if (r >= 0)
		return r;
	const char *path = argv[argc - 1];
	struct ubtrfs_stat st;
	char name[256], *dir = NULL;
	uint64_t id = 0;
	int ret = ubtrfs_resolve(fs, root, path, &st);
	if (ret == 0) {
		fprintf(stderr, "ubtrfs: %s: %s\n", path, ubtrfs_strerror(-EEXIST));
		ret = -EEXIST;
	} else if (ret == -ENOENT) {
		ret = new_name(fs, root, path, &st, name, sizeof(name), &dir);
		if (!ret) {
			mode_t um = umask(0);
			umask(um);
			ret = ubtrfs_subvol_create(fs, st.id, name, 0777 & ~(uint32_t)um,
						   (uint32_t)geteuid(), (uint32_t)getegid(), &id);
			if (ret)
				fprintf(stderr, "ubtrfs: subvolume %s: %s\n", path,
					ubtrfs_strerror(ret));
		}
	} else {
		fprintf(stderr, "ubtrfs: %s: %s\n", path, ubtrfs_strerror(ret));
	}
	if (!ret)
		ret = ubtrfs_commit(fs);
	if (!ret)
		printf("Create subvolume '%s' (id %" PRIu64 ")\n", path, id);
	else if (ret != -EEXIST && id)
		fprintf(stderr, "ubtrfs: committing: %s\n", ubtrfs_strerror(ret));
	free(dir);
	ubtrfs_close(fs);
	cli_fs_args_release(&a);
	return ret ? 1 : 0;
}

int cmd_subvolume_delete(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	int r = open_rw(argc, argv, "subvolume delete", cmd_subvolume_delete_usage, 1, &a, NULL,
			&fs, &root);
	if (r >= 0)
		return r;
	const char *path = argv[argc - 1];
	struct ubtrfs_stat st, dst;
	char name[256], *dir = NULL;
	uint64_t id = 0;
	int ret = ubtrfs_resolve(fs, root, path, &st);
	if (!ret && (st.id.ino != 256 || !S_ISDIR(st.mode) || st.id.subvol == 5)) {
		fprintf(stderr, "ubtrfs: %s: not a subvolume\n", path);
		ret = -EINVAL;
	} else if (ret) {
		fprintf(stderr, "ubtrfs: %s: %s\n", path, ubtrfs_strerror(ret));
	}
	if (!ret)
		ret = new_name(fs, root, path, &dst, name, sizeof(name), &dir);
	if (!ret) {
		ret = ubtrfs_subvol_delete(fs, dst.id, name, &id);
		if (!ret)
			ret = ubtrfs_commit(fs);
		if (ret)
			fprintf(stderr, "ubtrfs: deleting subvolume %s: %s\n", path,
				ubtrfs_strerror(ret));
		else
			printf("Delete subvolume '%s' (id %" PRIu64 ")\n", path, id);
	}
	free(dir);
	ubtrfs_close(fs);
	cli_fs_args_release(&a);
	return ret ? 1 : 0;
}

int cmd_subvolume_snapshot(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	bool readonly = false;
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	int r = open_rw(argc, argv, "subvolume snapshot", cmd_subvolume_snapshot_usage, 2, &a,
			&readonly, &fs, &root);
	if (r >= 0)
		return r;
	const char *src = argv[argc - 2], *dest = argv[argc - 1];
	struct ubtrfs_stat sst, dst;
	char name[256], *dir = NULL;
	bool into = false;
	size_t dirlen = 0;
	int ret = ubtrfs_resolve(fs, root, src, &sst);
	if (ret) {
		fprintf(stderr, "ubtrfs: %s: %s\n", src, ubtrfs_strerror(ret));
		goto out;
	}
	if (sst.id.ino != 256 || !S_ISDIR(sst.mode)) {
		fprintf(stderr, "ubtrfs: %s: not a subvolume\n", src);
		ret = -EINVAL;
		goto out;
	}
	ret = ubtrfs_resolve(fs, root, dest, &dst);
	if (ret == 0 && S_ISDIR(dst.mode)) {
		/* Into an existing directory, under the source's name. */
		into = true;
		ret = last_name(src, name, sizeof(name), &dirlen);
		if (ret == -EINVAL) {
			fprintf(stderr, "ubtrfs: %s exists; give the snapshot a new name\n", dest);
			ret = -EEXIST;
			goto out;
		}
		if (ret) {
			fprintf(stderr, "ubtrfs: %s: %s\n", src, ubtrfs_strerror(ret));
			goto out;
		}
	} else if (ret == 0) {
		fprintf(stderr, "ubtrfs: %s: %s\n", dest, ubtrfs_strerror(-EEXIST));
		ret = -EEXIST;
		goto out;
	} else if (ret == -ENOENT) {
		ret = new_name(fs, root, dest, &dst, name, sizeof(name), &dir);
		if (ret)
			goto out;
	} else {
		fprintf(stderr, "ubtrfs: %s: %s\n", dest, ubtrfs_strerror(ret));
		goto out;
	}
	uint64_t id = 0;
	ret = ubtrfs_snapshot(fs, sst.id.subvol, dst.id, name, readonly, &id);
	if (ret)
		fprintf(stderr, "ubtrfs: snapshot of %s as %s: %s\n", src, dest, ubtrfs_strerror(ret));
	else
		printf("Create a%s snapshot of '%s' in '%s%s%s' (id %" PRIu64 ")\n",
		       readonly ? " readonly" : "", src, dest, into ? "/" : "", into ? name : "", id);
out:
	free(dir);
	ubtrfs_close(fs);
	cli_fs_args_release(&a);
	return ret ? 1 : 0;
}
