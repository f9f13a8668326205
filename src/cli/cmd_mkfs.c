/*
 * cli: ubtrfs mkfs - create a btrfs filesystem, with the options and
 * defaults of mkfs.btrfs 6.2.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char cmd_mkfs_usage[] =
	"usage: ubtrfs mkfs [options] DEVICE...\n"
	"\n"
	"Create a btrfs filesystem on devices or image files, as mkfs.btrfs 6.2.\n"
	"\n"
	"  -L, --label LABEL        filesystem label\n"
	"  -U, --uuid UUID          filesystem uuid (default: random)\n"
	"  -n, --nodesize SIZE      tree block size (default 16K)\n"
	"  -s, --sectorsize SIZE    data block size (default 4K)\n"
	"      --csum, --checksum TYPE  crc32c (default), xxhash, sha256, blake2\n"
	"  -O, --features LIST      comma separated: no-holes (default on), extref,\n"
	"                           skinny-metadata (always on), block-group-tree\n"
	"                           (default off; needs no-holes and free-space-tree);\n"
	"                           ^FEATURE turns one off\n"
	"  -R, --runtime-features LIST  free-space-tree (default on); ^free-space-tree\n"
	"  -m, --metadata PROFILE   single, dup (default on one device), raid0, raid1\n"
	"                           (default on several), raid1c3, raid1c4, raid10\n"
	"  -d, --data PROFILE       same values (default single)\n"
	"  -b, --byte-count SIZE    use SIZE bytes of each device; image files are\n"
	"                           created or extended to SIZE\n"
	"  -r, --rootdir DIR        copy the files of DIR into the top-level subvolume\n"
	"                           (data, holes, hard links, symlinks, special files,\n"
	"                           xattrs, owners, modes, nanosecond times)\n"
	"  -f, --force              overwrite an existing btrfs filesystem\n"
	"  -K, --nodiscard          accepted (this tool never discards)\n"
	"  -q, --quiet              print nothing but errors\n"
	"      --reproducible       fixed times (SOURCE_DATE_EPOCH or 0) and uuids\n"
	"                           derived from the inputs: identical images for the\n"
	"                           same inputs (also turned on by SOURCE_DATE_EPOCH)\n"
	"\n"
	"SIZE takes a K, M, G, T, P or E suffix (powers of 1024).\n";

enum { OPT_CSUM = 0x200, OPT_REPRO };

static const struct option longopts[] = {
	{ "label", required_argument, NULL, 'L' },
	{ "uuid", required_argument, NULL, 'U' },
	{ "nodesize", required_argument, NULL, 'n' },
	{ "sectorsize", required_argument, NULL, 's' },
	{ "csum", required_argument, NULL, OPT_CSUM },
	{ "checksum", required_argument, NULL, OPT_CSUM },
	{ "features", required_argument, NULL, 'O' },
	{ "runtime-features", required_argument, NULL, 'R' },
	{ "metadata", required_argument, NULL, 'm' },
	{ "data", required_argument, NULL, 'd' },
	{ "byte-count", required_argument, NULL, 'b' },
	{ "rootdir", required_argument, NULL, 'r' },
	{ "force", no_argument, NULL, 'f' },
	{ "nodiscard", no_argument, NULL, 'K' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "reproducible", no_argument, NULL, OPT_REPRO },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	int shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 0: break;
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	case 'P': shift = 50; break;
	case 'E': shift = 60; break;
	default: return -1;
	}
	if (*end) {
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return -1;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_profile(const char *s, enum ubtrfs_profile *out)
{
	static const struct { const char *name; enum ubtrfs_profile p; } t[] = {
		{ "single", UBTRFS_PROFILE_SINGLE }, { "dup", UBTRFS_PROFILE_DUP },
		{ "raid0", UBTRFS_PROFILE_RAID0 }, { "raid1", UBTRFS_PROFILE_RAID1 },
		{ "raid1c3", UBTRFS_PROFILE_RAID1C3 }, { "raid1c4", UBTRFS_PROFILE_RAID1C4 },
		{ "raid10", UBTRFS_PROFILE_RAID10 }, { "raid5", UBTRFS_PROFILE_RAID5 },
		{ "raid6", UBTRFS_PROFILE_RAID6 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (!strcasecmp(s, t[i].name)) {
			*out = t[i].p;
			return 0;
		}
	}
	return -1;
}

static int parse_uuid(const char *s, uint8_t *u)
{
	size_t n = 0;
	for (const char *p = s; *p; p++) {
		if (*p == '-')
			continue;
		if (!isxdigit((unsigned char)p[0]) || !isxdigit((unsigned char)p[1]) || n == 16)
			return -1;
		char hex[3] = { p[0], p[1], 0 };
		u[n++] = (uint8_t)strtoul(hex, NULL, 16);
		p++;
	}
	return n == 16 ? 0 : -1;
}

/* -O and -R lists: one shared namespace, as newer mkfs.btrfs accepts. */
static int parse_features(const char *list, struct ubtrfs_mkfs_opts *o, bool runtime)
{
	char *dup = strdup(list), *save = NULL;
	int ret = 0;

	if (!dup)
		return -1;
	for (char *f = strtok_r(dup, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
		bool off = f[0] == '^';
		const char *name = off ? f + 1 : f;
		if (!strcmp(name, "list-all")) {
			printf("Filesystem features (-O):\n"
			       "  no-holes          no explicit hole extents (default)\n"
			       "  extref            more hard links per file (always on)\n"
			       "  skinny-metadata   smaller metadata extent items (always on)\n"
			       "  block-group-tree  block group items in their own tree, for\n"
			       "                    faster mounts (kernel 6.1+; off by default)\n"
			       "Runtime features (-R):\n"
			       "  free-space-tree   free space tree (default)\n");
			exit(0);
		} else if (!strcasecmp(name, "no-holes")) {
			o->disable_no_holes = off;
		} else if (!strcasecmp(name, "free-space-tree") || !strcasecmp(name, "fst")) {
			o->disable_free_space_tree = off;
		} else if (!strcasecmp(name, "block-group-tree")) {
			o->block_group_tree = !off;
		} else if (!strcasecmp(name, "extref") || !strcasecmp(name, "skinny-metadata") ||
			   !strcasecmp(name, "mixed-bg") || !strcasecmp(name, "raid56") ||
			   !strcasecmp(name, "zoned") ||
			   !strcasecmp(name, "quota") || !strcasecmp(name, "raid1c34")) {
			bool always = !strcasecmp(name, "extref") ||
				      !strcasecmp(name, "skinny-metadata") ||
				      !strcasecmp(name, "raid1c34");
			if (always && !off)
				continue;	/* on already (raid1c34: set by the profile) */
			if (!always && off)
				continue;	/* off already */
			fprintf(stderr, "ubtrfs mkfs: feature '%s' cannot be %s by this tool\n", name,
				off ? "turned off" : "turned on");
			ret = -1;
		} else {
			fprintf(stderr, "ubtrfs mkfs: unknown %sfeature '%s'\n", runtime ? "runtime " : "",
				name);
			ret = -1;
		}
	}
	free(dup);
	return ret;
}

static const char *profile_str(enum ubtrfs_profile p, bool meta, size_t ndev)
{
	static const char *names[] = { "", "single", "DUP", "RAID0", "RAID1", "RAID1C3",
				       "RAID1C4", "RAID10", "RAID5", "RAID6" };
	if (p == UBTRFS_PROFILE_DEFAULT)
		return meta ? (ndev > 1 ? "RAID1" : "DUP") : "single";
	return names[p];
}

static void human(uint64_t v, char *buf, size_t len)
{
	static const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double d = (double)v;
	int i = 0;
	while (d >= 1024.0 && i < 6) {
		d /= 1024.0;
		i++;
	}
	snprintf(buf, len, "%.2f%s", d, u[i]);
}

static void progress(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "%s\n", line);
}

int cmd_mkfs(int argc, char **argv)
{
	struct ubtrfs_mkfs_opts o;
	uint8_t fsid[16];
	uint64_t v;
	bool quiet = false;
	int c;

	memset(&o, 0, sizeof(o));
	optind = 1;
	while ((c = getopt_long(argc, argv, "L:U:n:s:O:R:m:d:b:r:fKqvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'L':
			o.label = optarg;
			break;
		case 'U':
			if (parse_uuid(optarg, fsid))
				return cli_usage_error("mkfs", "invalid uuid '%s'", optarg);
			o.fsid = fsid;
			break;
		case 'n':
		case 's':
			if (parse_size(optarg, &v) || v > UINT32_MAX)
				return cli_usage_error("mkfs", "invalid size '%s'", optarg);
			if (c == 'n')
				o.nodesize = (uint32_t)v;
			else
				o.sectorsize = (uint32_t)v;
			break;
		case OPT_CSUM:
			if (!strcasecmp(optarg, "crc32c"))
				o.csum_type = UBTRFS_CSUM_CRC32C;
			else if (!strcasecmp(optarg, "xxhash") || !strcasecmp(optarg, "xxhash64"))
				o.csum_type = UBTRFS_CSUM_XXHASH;
			else if (!strcasecmp(optarg, "sha256"))
				o.csum_type = UBTRFS_CSUM_SHA256;
			else if (!strcasecmp(optarg, "blake2") || !strcasecmp(optarg, "blake2b"))
				o.csum_type = UBTRFS_CSUM_BLAKE2;
			else
				return cli_usage_error("mkfs", "unknown checksum type '%s'", optarg);
			break;
		case 'O':
		case 'R':
			if (parse_features(optarg, &o, c == 'R'))
				return 1;
			break;
		case 'm':
		case 'd':
			if (parse_profile(optarg, c == 'm' ? &o.metadata_profile : &o.data_profile))
				return cli_usage_error("mkfs", "unknown profile '%s'", optarg);
			break;
		case 'b':
			if (parse_size(optarg, &o.byte_count) || o.byte_count == 0)
				return cli_usage_error("mkfs", "invalid size '%s'", optarg);
			break;
		case 'r':
			o.rootdir = optarg;
			break;
		case 'f':
			o.force = true;
			break;
		case 'K':
		case 'v':
			break;
		case 'q':
			quiet = true;
			break;
		case OPT_REPRO:
			o.reproducible = true;
			break;
		case 'h':
			fputs(cmd_mkfs_usage, stdout);
			return 0;
		default:
			return cli_usage_error("mkfs", "bad option");
		}
	}
	const char *epoch = getenv("SOURCE_DATE_EPOCH");
	if (epoch && *epoch) {
		char *end;
		errno = 0;
		long long t = strtoll(epoch, &end, 10);
		if (errno || *end)
			return cli_usage_error("mkfs", "invalid SOURCE_DATE_EPOCH '%s'", epoch);
		o.reproducible = true;
		o.time = t;
	}
	if (optind >= argc)
		return cli_usage_error("mkfs", "no device given");
	size_t ndev = (size_t)(argc - optind);
	const char *const *devs = (const char *const *)(argv + optind);
	if (!quiet)
		o.progress = progress;

	int ret = ubtrfs_mkfs(devs, ndev, &o);
	if (ret)
		return cli_lib_error("mkfs", ret);
	if (quiet)
		return 0;

	/* Read back what was written for the summary. */
	ubtrfs_fs *fs;
	struct ubtrfs_fs_info info;
	ret = ubtrfs_open(devs, ndev, 0, &fs);
	if (ret)
		return cli_lib_error("opening the new filesystem", ret);
	ret = ubtrfs_get_info(fs, &info);
	ubtrfs_close(fs);
	if (ret)
		return cli_lib_error("reading the new filesystem", ret);
	char uuid[37], size[32];
	ubtrfs_uuid_str(info.fsid, uuid);
	human(info.total_bytes, size, sizeof(size));
	printf("Label:              %s\n", info.label[0] ? info.label : "(null)");
	printf("UUID:               %s\n", uuid);
	printf("Node size:          %u\n", info.nodesize);
	printf("Sector size:        %u\n", info.sectorsize);
	printf("Filesystem size:    %s\n", size);
	printf("Block group profiles:\n");
	printf("  Data:             %s\n", profile_str(o.data_profile, false, ndev));
	printf("  Metadata:         %s\n", profile_str(o.metadata_profile, true, ndev));
	printf("  System:           %s\n", profile_str(o.metadata_profile, true, ndev));
	printf("Features:           extref, skinny-metadata%s%s%s\n",
	       o.disable_no_holes ? "" : ", no-holes",
	       o.disable_free_space_tree ? "" : ", free-space-tree",
	       o.block_group_tree ? ", block-group-tree" : "");
	printf("Checksum:           %s\n", info.csum_name);
	printf("Number of devices:  %zu\n", ndev);
	for (size_t i = 0; i < ndev; i++)
		printf("  %zu  %s\n", i + 1, devs[i]);
	return 0;
}
