/*
 * cli: `ubtrfs inspect dump-tree [-t TREE] [-b BYTENR] DEVICE...`
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char cmd_inspect_dump_tree_usage[] =
	"usage: ubtrfs inspect dump-tree [options] DEVICE [DEVICE...]\n"
	"\n"
	"Print trees in the form of btrfs inspect-internal dump-tree: every key and\n"
	"the fields of every item.  Without -t or -b, every tree.\n"
	"\n"
	"  -t, --tree TREE     one tree: a number or root, extent, chunk, dev, fs,\n"
	"                      csum, quota, uuid, free-space, block-group, data-reloc\n"
	"  -b, --block BYTENR  one tree block at this logical address\n"
	"  --degraded          read with devices missing where the profiles allow\n"
	"  --nologreplay       ignore an unreplayed fsync log\n";

static int parse_tree(const char *s, uint64_t *id)
{
	static const struct {
		const char *name;
		uint64_t id;
	} names[] = {
		{ "root", 1 }, { "extent", 2 }, { "chunk", 3 }, { "dev", 4 }, { "device", 4 },
		{ "fs", 5 }, { "csum", 7 }, { "checksum", 7 }, { "quota", 8 }, { "uuid", 9 },
		{ "free-space", 10 }, { "free_space", 10 }, { "block-group", 11 },
		{ "block_group", 11 }, { "data-reloc", (uint64_t)-9 }, { "data_reloc", (uint64_t)-9 },
	};
	char *end;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcasecmp(s, names[i].name)) {
			*id = names[i].id;
			return 0;
		}
	}
	unsigned long long v = strtoull(s, &end, 0);
	if (*end || !*s || v == 0)
		return -1;
	*id = v;
	return 0;
}

static void write_stdout(void *ctx, const char *text, size_t len)
{
	(void)ctx;
	fwrite(text, 1, len, stdout);
}

int cmd_inspect_dump_tree(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tree", required_argument, NULL, 't' },
		{ "block", required_argument, NULL, 'b' },
		{ "degraded", no_argument, NULL, 0x101 },
		{ "nologreplay", no_argument, NULL, 0x102 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_fs_args a = { 0 };
	uint64_t tree = 0, bytenr = 0;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:b:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_tree(optarg, &tree))
				return cli_usage_error("inspect dump-tree", "unknown tree '%s'", optarg);
			break;
		case 'b': {
			char *end;
			bytenr = strtoull(optarg, &end, 0);
			if (*end || !bytenr)
				return cli_usage_error("inspect dump-tree", "bad block address '%s'",
						       optarg);
			break;
		}
		case 0x101:
			a.degraded = true;
			break;
		case 0x102:
			a.nologreplay = true;
			break;
		case 'h':
			fputs(cmd_inspect_dump_tree_usage, stdout);
			return 0;
		default:
			return cli_usage_error("inspect dump-tree", "invalid option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("inspect dump-tree", "a DEVICE is required");
	for (int i = optind; i < argc; i++)
		if (cli_fs_add_device(&a, argv[i]))
			return 1;
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	if (cli_fs_open(&a, &fs, &root))
		return 1;
	int ret = ubtrfs_dump_tree(fs, tree, bytenr, write_stdout, NULL);
	fflush(stdout);
	if (ret)
		fprintf(stderr, "ubtrfs: dump-tree: %s\n", ubtrfs_strerror(ret));
	ubtrfs_close(fs);
	return ret ? 1 : 0;
}
