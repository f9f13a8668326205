/*
 * cli: the `ubtrfs` command.  One file per subcommand; this header is the
 * table every subcommand registers in.  The CLI uses only the public API
 * (include/ubtrfs/ubtrfs.h), so anything it needs is available to library
 * users too.
 */
#ifndef UBTRFS_CLI_H
#define UBTRFS_CLI_H

#include <stdio.h>

struct cli_cmd {
	const char *name;
	const char *alias;	/* a second full name (e.g. inspect-internal), or NULL */
	const char *summary;	/* one line for listings */
	const char *usage;	/* "usage: ...\n\n details" printed by --help */
	/* argv[0] is the command's own name; returns the process exit code. */
	int (*run)(int argc, char **argv);
	const struct cli_cmd *subcommands;	/* NULL-name terminated, or NULL */
};

extern const struct cli_cmd cli_inspect_commands[];

int cmd_inspect_dump_super(int argc, char **argv);
extern const char cmd_inspect_dump_super_usage[];

#include <stdbool.h>
#include <stdint.h>

#include <ubtrfs/ubtrfs.h>

#define CLI_MAX_DEVICES 64

struct cli_fs_args {
	const char *devices[CLI_MAX_DEVICES];
	size_t ndev;
	bool degraded, nologreplay;
	bool rdwr;			/* open read-write (mount -o rw) */
	bool keep_writers_out;		/* read-only mount: no writer meanwhile */
	const char *subvol_path;
	uint64_t subvolid;
	uint64_t cache_bytes;
	char *owned[CLI_MAX_DEVICES + 2];	/* strings parsed from -o, freed by release */
	size_t nowned;
};
void cli_fs_args_release(struct cli_fs_args *a);
int cli_fs_add_device(struct cli_fs_args *a, const char *path);
/* Open and find the root of the chosen subvolume; prints errors; 0 or 1. */
int cli_fs_open(struct cli_fs_args *a, ubtrfs_fs **fs, ubtrfs_ino *root);
/* Parse a mount-style option list into `a`; the rest goes to `rest`. */
int cli_fs_parse_opts(struct cli_fs_args *a, const char *opts, char *rest, size_t restlen,
		      bool *ro, bool *rw);

int cmd_mount(int argc, char **argv);
extern const char cmd_mount_usage[];
int cmd_ls(int argc, char **argv);
extern const char cmd_ls_usage[];
int cmd_cat(int argc, char **argv);
extern const char cmd_cat_usage[];
int cmd_get(int argc, char **argv);
extern const char cmd_get_usage[];
int cmd_subvolume_list(int argc, char **argv);
extern const char cmd_subvolume_list_usage[];
int cmd_subvolume_create(int argc, char **argv);
extern const char cmd_subvolume_create_usage[];
int cmd_subvolume_delete(int argc, char **argv);
extern const char cmd_subvolume_delete_usage[];
int cmd_subvolume_snapshot(int argc, char **argv);
extern const char cmd_subvolume_snapshot_usage[];
int cmd_filesystem_show(int argc, char **argv);
extern const char cmd_filesystem_show_usage[];
int cmd_filesystem_df(int argc, char **argv);
extern const char cmd_filesystem_df_usage[];
int cmd_inspect_dump_tree(int argc, char **argv);
extern const char cmd_inspect_dump_tree_usage[];
int cmd_mkfs(int argc, char **argv);
extern const char cmd_mkfs_usage[];

/* Parse the options every filesystem-reading command shares.  Returns 1 if
 * the option was consumed (optarg used), 0 if not ours. */
int cli_fs_common_opt(struct cli_fs_args *a, int c, const char *arg);
#define CLI_FS_LONGOPTS                                          \
	{ "device", required_argument, NULL, 0x100 },            \
	{ "degraded", no_argument, NULL, 0x101 },                \
	{ "nologreplay", no_argument, NULL, 0x102 },             \
	{ "subvol", required_argument, NULL, 0x103 },            \
	{ "subvolid", required_argument, NULL, 0x104 },          \
	{ "cache-size", required_argument, NULL, 0x105 }
#define CLI_FS_OPTS_HELP                                                               \
	"  --device PATH       another device of the filesystem (repeatable)\n"           \
	"  --degraded          read with devices missing where the profiles allow\n"      \
	"  --nologreplay       ignore an unreplayed fsync log (read the last commit)\n"  \
	"  --subvol PATH       work in this subvolume (path from the top level)\n"        \
	"  --subvolid ID       work in the subvolume with this id\n"                       \
	"  (default: the filesystem's default subvolume, as a kernel mount shows it)\n"

/* Print an error about the command line and return the usage exit code (1). */
int cli_usage_error(const char *cmdpath, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when argv has -h/--help before any "--"; prints usage then. */
int cli_wants_help(int argc, char **argv, const char *usage);
/* Report a library error for `what` and return exit code 1. */
int cli_lib_error(const char *what, int err);

#endif
