/*
 * cli: `ubtrfs inspect dump-super [-f] [-a] [-s N] [-F] DEVICE...`
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <ubtrfs/ubtrfs.h>

const char cmd_inspect_dump_super_usage[] =
	"usage: ubtrfs inspect dump-super [options] DEVICE [DEVICE...]\n"
	"\n"
	"Print the superblock of each device, with the field names and values of\n"
	"btrfs inspect-internal dump-super.  A copy that fails validation is refused\n"
	"with the reason (exit status 1) unless --force is given.\n"
	"\n"
	"  -f, --full          also print the system chunk array and the backup roots\n"
	"  -a, --all           print every superblock copy that fits on the device\n"
	"  -s, --super N       print copy N (0: 64 KiB, 1: 64 MiB, 2: 256 GiB)\n"
	"  -F, --force         print copies that fail validation too\n"
	"  -h, --help          print this help\n";

static void write_stdout(void *ctx, const char *text, size_t len)
{
	(void)ctx;
	fwrite(text, 1, len, stdout);
}

int cmd_inspect_dump_super(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "full", no_argument, NULL, 'f' },
		{ "all", no_argument, NULL, 'a' },
		{ "super", required_argument, NULL, 's' },
		{ "force", no_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ubtrfs_dump_super_opts opts = { 0 };
	int c, status = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "fas:Fh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			opts.full = true;
			break;
		case 'a':
			opts.all = true;
			break;
		case 's': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > 2)
				return cli_usage_error("inspect dump-super",
						       "superblock copy must be 0, 1 or 2, not '%s'",
						       optarg);
			opts.copy = (int)v;
			break;
		}
		case 'F':
			opts.force = true;
			break;
		case 'h':
			fputs(cmd_inspect_dump_super_usage, stdout);
			return 0;
		default:
			return cli_usage_error("inspect dump-super", "invalid option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("inspect dump-super", "a DEVICE is required");
	if (opts.all && opts.copy)
		return cli_usage_error("inspect dump-super", "--all and --super exclude each other");
	for (int i = optind; i < argc; i++) {
		int ret = ubtrfs_dump_super(argv[i], &opts, write_stdout, NULL);
		fflush(stdout);
		if (ret < 0) {
			fprintf(stderr, "ubtrfs: %s: %s\n", argv[i], ubtrfs_strerror(ret));
			status = 1;
		}
	}
	return status;
}
