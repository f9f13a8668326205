/*
 * cli: entry point and command dispatch.
 *
 * Commands form a tree (ubtrfs -> inspect -> dump-super).  Every word may be
 * abbreviated to a unique prefix, as btrfs-progs allows (`ubtrfs insp
 * dump-s`); an exact name always wins; an ambiguous prefix is an error that
 * lists the candidates.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <ubtrfs/ubtrfs.h>

const struct cli_cmd cli_inspect_commands[] = {
	{ "dump-super", NULL, "print superblock fields as btrfs inspect-internal dump-super",
	  cmd_inspect_dump_super_usage, cmd_inspect_dump_super, NULL },
	{ "dump-tree", NULL, "print trees as btrfs inspect-internal dump-tree",
	  cmd_inspect_dump_tree_usage, cmd_inspect_dump_tree, NULL },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const char inspect_usage[] =
	"usage: ubtrfs inspect <command> [options]\n"
	"\n"
	"Inspect the internals of a btrfs filesystem (alias: inspect-internal).\n";

static const struct cli_cmd subvolume_commands[] = {
	{ "list", NULL, "list subvolumes and snapshots", cmd_subvolume_list_usage,
	  cmd_subvolume_list, NULL },
	{ "create", NULL, "make a new, empty subvolume (unmounted; experimental)",
	  cmd_subvolume_create_usage, cmd_subvolume_create, NULL },
	{ "delete", NULL, "delete a subvolume (unmounted; experimental)",
	  cmd_subvolume_delete_usage, cmd_subvolume_delete, NULL },
	{ "snapshot", NULL, "make a snapshot of a subvolume (unmounted; experimental)",
	  cmd_subvolume_snapshot_usage, cmd_subvolume_snapshot, NULL },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const char subvolume_usage[] =
	"usage: ubtrfs subvolume <command> [options]\n"
	"\n"
	"Subvolumes and snapshots of an unmounted filesystem.\n";

static const struct cli_cmd filesystem_commands[] = {
	{ "show", NULL, "label, uuid and devices", cmd_filesystem_show_usage, cmd_filesystem_show,
	  NULL },
	{ "df", NULL, "space per block group type and profile", cmd_filesystem_df_usage,
	  cmd_filesystem_df, NULL },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const char filesystem_usage[] =
	"usage: ubtrfs filesystem <command> [options]\n"
	"\n"
	"Whole-filesystem information of an unmounted filesystem.\n";

static const struct cli_cmd top_commands[] = {
	{ "mkfs", NULL, "create a btrfs filesystem", cmd_mkfs_usage, cmd_mkfs, NULL },
	{ "mount", NULL, "mount through FUSE (read-only)", cmd_mount_usage, cmd_mount, NULL },
	{ "ls", NULL, "list a directory of an unmounted filesystem", cmd_ls_usage, cmd_ls, NULL },
	{ "cat", NULL, "print a file of an unmounted filesystem", cmd_cat_usage, cmd_cat, NULL },
	{ "get", NULL, "copy files out of an unmounted filesystem", cmd_get_usage, cmd_get, NULL },
	{ "subvolume", NULL, "subvolume commands", subvolume_usage, NULL, subvolume_commands },
	{ "filesystem", NULL, "filesystem commands", filesystem_usage, NULL, filesystem_commands },
	{ "inspect", "inspect-internal", "inspect on-disk structures", inspect_usage, NULL,
	  cli_inspect_commands },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const char top_usage[] =
	"usage: ubtrfs [--help] [--version] <command> [<args>]\n"
	"\n"
	"ubtrfs reads and writes btrfs filesystems from userspace.\n"
	"Every command word may be abbreviated to a unique prefix.\n";

int cli_usage_error(const char *cmdpath, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ubtrfs %s: ", cmdpath);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'ubtrfs %s --help'.\n", cmdpath);
	return 1;
}

int cli_wants_help(int argc, char **argv, const char *usage)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 1;
		}
	}
	return 0;
}

int cli_lib_error(const char *what, int err)
{
	fprintf(stderr, "ubtrfs: %s: %s\n", what, ubtrfs_strerror(err));
	return 1;
}

static void print_group(const char *path, const char *usage, const struct cli_cmd *cmds)
{
	fputs(usage, stdout);
	printf("\nCommands:\n");
	for (const struct cli_cmd *c = cmds; c->name; c++)
		printf("  %-20s %s\n", c->name, c->summary);
	printf("\nRun 'ubtrfs %s%s<command> --help' for a command's options.\n", path,
	       *path ? " " : "");
}

static bool name_matches(const char *name, const char *word, bool exact)
{
	if (!name)
		return false;
	return exact ? !strcmp(name, word) : !strncmp(name, word, strlen(word));
}

/* Resolve `word` in `cmds`: exact name or alias first, then unique prefix. */
static const struct cli_cmd *resolve(const struct cli_cmd *cmds, const char *word,
				     const char *path)
{
	const struct cli_cmd *found = NULL;
	int n = 0;

	for (const struct cli_cmd *c = cmds; c->name; c++)
		if (name_matches(c->name, word, true) || name_matches(c->alias, word, true))
			return c;
	for (const struct cli_cmd *c = cmds; c->name; c++) {
		if (name_matches(c->name, word, false) || name_matches(c->alias, word, false)) {
			found = c;
			n++;
		}
	}
	if (n == 1)
		return found;
	if (n == 0) {
		fprintf(stderr, "ubtrfs: unknown command '%s%s%s'\n", path, *path ? " " : "", word);
	} else {
		fprintf(stderr, "ubtrfs: ambiguous command '%s'; could be:", word);
		for (const struct cli_cmd *c = cmds; c->name; c++)
			if (name_matches(c->name, word, false) || name_matches(c->alias, word, false))
				fprintf(stderr, " %s", c->name);
		fputc('\n', stderr);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const struct cli_cmd *cmds = top_commands;
	const char *usage = top_usage;
	char path[256] = "";
	int i = 1;

	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("ubtrfs %s\n", ubtrfs_version());
		return 0;
	}
	/* `ubtrfs help X Y` is `ubtrfs X Y --help`. */
	bool help = false;
	if (argc >= 2 && !strcmp(argv[1], "help")) {
		help = true;
		i = 2;
	}
	for (;;) {
		if (i >= argc || !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			print_group(path, usage, cmds);
			return i >= argc && !help && cmds == top_commands ? 1 : 0;
		}
		if (argv[i][0] == '-')
			return cli_usage_error(*path ? path : "", "unknown option '%s'", argv[i]);
		const struct cli_cmd *c = resolve(cmds, argv[i], path);
		if (!c)
			return 1;
		size_t used = strlen(path);
		snprintf(path + used, sizeof(path) - used, "%s%s", used ? " " : "", c->name);
		if (c->subcommands) {
			cmds = c->subcommands;
			usage = c->usage;
			i++;
			continue;
		}
		if (help) {
			fputs(c->usage, stdout);
			return 0;
		}
		/* Give the command its canonical name as argv[0]. */
		argv[i] = (char *)c->name;
		return c->run(argc - i, argv + i);
	}
}
