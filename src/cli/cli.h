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

/* Print an error about the command line and return the usage exit code (1). */
int cli_usage_error(const char *cmdpath, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when argv has -h/--help before any "--"; prints usage then. */
int cli_wants_help(int argc, char **argv, const char *usage);
/* Report a library error for `what` and return exit code 1. */
int cli_lib_error(const char *what, int err);

#endif
