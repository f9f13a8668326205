/*
 * cli: whole-filesystem information on unmounted images.
 *   ubtrfs subvolume list DEVICE
 *   ubtrfs filesystem show DEVICE
 *   ubtrfs filesystem df DEVICE
 */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

const char cmd_subvolume_list_usage[] =
	"usage: ubtrfs subvolume list [options] DEVICE\n"
	"\n"
	"List the subvolumes and snapshots, as `btrfs subvolume list` does:\n"
	"ID, generation, parent (top level) and path from the top level.\n"
	"\n"
	"  -u                  also print the uuid\n"
	"  -q                  also print the parent uuid\n"
	"  -R                  also print the received uuid\n"
	"  -r                  only read-only subvolumes\n" CLI_FS_OPTS_HELP;

const char cmd_filesystem_show_usage[] =
	"usage: ubtrfs filesystem show DEVICE...\n"
	"\n"
	"Label, uuid, devices and space used, as `btrfs filesystem show`.\n" CLI_FS_OPTS_HELP;

const char cmd_filesystem_df_usage[] =
	"usage: ubtrfs filesystem df DEVICE...\n"
	"\n"
	"Allocated and used space per block group type and profile, as\n"
	"`btrfs filesystem df` (without the kernel-only GlobalReserve line).\n" CLI_FS_OPTS_HELP;

static const struct option longopts[] = {
	CLI_FS_LONGOPTS,
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Sizes as btrfs-progs prints them by default: 1.50GiB, 0.00B. */
static void pretty(uint64_t v, char *buf, size_t len)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	int u = 0;
	double d = (double)v;
	while (d >= 1024.0 && u < 6) {
		d /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.2f%s", d, units[u]);
}

static int open_from_args(int argc, char **argv, const char *name, const char *usage,
			  const char *shortopts, struct cli_fs_args *a, unsigned *flags, ubtrfs_fs **fs)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		int r = cli_fs_common_opt(a, c, optarg);
		if (r < 0)
			return 1;
		if (r)
			continue;
		switch (c) {
		case 'h':
			fputs(usage, stdout);
			return -1;
		case 'u':
			*flags |= 1;
			break;
		case 'q':
			*flags |= 2;
			break;
		case 'R':
			*flags |= 4;
			break;
		case 'r':
			*flags |= 8;
			break;
		default:
			return cli_usage_error(name, "invalid option");
		}
	}
	if (optind >= argc)
		return cli_usage_error(name, "a DEVICE is required");
	for (int i = argc - 1; i >= optind; i--) {
		if (a->ndev >= CLI_MAX_DEVICES)
			return 1;
		memmove(&a->devices[1], &a->devices[0], a->ndev * sizeof(a->devices[0]));
		a->devices[0] = argv[i];
		a->ndev++;
	}
	ubtrfs_ino root;
	return cli_fs_open(a, fs, &root);
}

struct list_ctx {
	unsigned flags;
};

static int print_subvol(void *ctx, const struct ubtrfs_subvol_info *i)
{
	struct list_ctx *l = ctx;
	char u[40];

	if ((l->flags & 8) && !(i->flags & 1))
		return 0;
	printf("ID %" PRIu64 " gen %" PRIu64 " top level %" PRIu64, i->id, i->generation,
	       i->parent_id);
	if (l->flags & 2) {
		bool zero = true;
		for (int k = 0; k < 16; k++)
			zero &= i->parent_uuid[k] == 0;
		if (zero)
			printf(" parent_uuid -");
		else {
			ubtrfs_uuid_str(i->parent_uuid, u);
			printf(" parent_uuid %s", u);
		}
	}
	if (l->flags & 4) {
		ubtrfs_uuid_str(i->received_uuid, u);
		printf(" received_uuid %s", u);
	}
	if (l->flags & 1) {
		ubtrfs_uuid_str(i->uuid, u);
		printf(" uuid %s", u);
	}
	printf(" path %s\n", i->path);
	return 0;
}

int cmd_subvolume_list(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	unsigned flags = 0;
	ubtrfs_fs *fs;
	int r = open_from_args(argc, argv, "subvolume list", cmd_subvolume_list_usage, "uqRrh", &a,
			       &flags, &fs);
	if (r)
		return r < 0 ? 0 : r;
	struct list_ctx l = { flags };
	int ret = ubtrfs_subvol_list(fs, print_subvol, &l);
	if (ret)
		fprintf(stderr, "ubtrfs: listing subvolumes: %s\n", ubtrfs_strerror(ret));
	ubtrfs_close(fs);
	return ret ? 1 : 0;
}

static int print_device(void *ctx, const struct ubtrfs_device_info *d)
{
	char size[32], used[32];
	(void)ctx;
	pretty(d->total_bytes, size, sizeof(size));
	pretty(d->bytes_used, used, sizeof(used));
	if (d->path)
		printf("\tdevid %4" PRIu64 " size %s used %s path %s\n", d->devid, size, used,
		       d->path);
	else
		printf("\tdevid %4" PRIu64 " size %s used %s path <missing disk>\n", d->devid, size,
		       used);
	return 0;
}

int cmd_filesystem_show(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	unsigned flags = 0;
	ubtrfs_fs *fs;
	int r = open_from_args(argc, argv, "filesystem show", cmd_filesystem_show_usage, "h", &a,
			       &flags, &fs);
	if (r)
		return r < 0 ? 0 : r;
	struct ubtrfs_fs_info info;
	char u[40], used[32];
	ubtrfs_get_info(fs, &info);
	ubtrfs_uuid_str(info.fsid, u);
	pretty(info.bytes_used, used, sizeof(used));
	if (info.label[0])
		printf("Label: '%s'  uuid: %s\n", info.label, u);
	else
		printf("Label: none  uuid: %s\n", u);
	printf("\tTotal devices %" PRIu64 " FS bytes used %s\n", info.num_devices, used);
	int ret = ubtrfs_devices(fs, print_device, NULL);
	printf("\n");
	ubtrfs_close(fs);
	return ret ? 1 : 0;
}

static int print_space(void *ctx, const struct ubtrfs_space_info *s)
{
	char total[32], used[32];
	(void)ctx;
	pretty(s->total, total, sizeof(total));
	pretty(s->used, used, sizeof(used));
	printf("%s, %s: total=%s, used=%s\n", s->type, s->profile, total, used);
	return 0;
}

int cmd_filesystem_df(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	unsigned flags = 0;
	ubtrfs_fs *fs;
	int r = open_from_args(argc, argv, "filesystem df", cmd_filesystem_df_usage, "h", &a,
			       &flags, &fs);
	if (r)
		return r < 0 ? 0 : r;
	int ret = ubtrfs_space(fs, print_space, NULL);
	if (ret)
		fprintf(stderr, "ubtrfs: %s\n", ubtrfs_strerror(ret));
	ubtrfs_close(fs);
	return ret ? 1 : 0;
}
