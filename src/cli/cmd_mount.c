/*
 * cli: `ubtrfs mount [-f] [-o OPTIONS] DEVICE... MOUNTPOINT`
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/ubtrfs_fuse.h"

const char cmd_mount_usage[] =
	"usage: ubtrfs mount [-f] [-o OPTIONS] DEVICE... MOUNTPOINT\n"
	"\n"
	"Mount a btrfs filesystem through FUSE, read-only unless -o rw.  Returns\n"
	"once the mount is ready; unmount with `fusermount3 -u MOUNTPOINT` or umount.\n"
	"\n"
	"  -f                  stay in the foreground\n"
	"  -d                  FUSE debug output (implies -f)\n"
	"  -o OPTIONS          comma-separated:\n"
	"     ro               read-only (the default)\n"
	"     rw               read-write: EXPERIMENTAL, keep a backup.  Changes are\n"
	"                      committed on fsync, every 5 s and at unmount (a crash\n"
	"                      loses at most what came after the last commit).  Not\n"
	"                      supported: RENAME_EXCHANGE/NOREPLACE, fallocate, POSIX\n"
	"                      ACL inheritance and enforcement, subvolume operations,\n"
	"                      compression on write, files kept open after their last\n"
	"                      name is removed (their data goes at once).  Refused on\n"
	"                      filesystems with quotas, an fsync log, a balance in\n"
	"                      progress or features the writer does not know.\n"
	"     subvol=PATH      mount this subvolume (path from the top level)\n"
	"     subvolid=ID      mount the subvolume with this id\n"
	"     degraded         allow missing devices where the profiles allow\n"
	"     device=PATH      another device of the filesystem (repeatable)\n"
	"     nologreplay      ignore an unreplayed fsync log\n"
	"     cache_size=N[KMG] bound of the tree-block cache (default 64M)\n"
	"     allow_other      let other users in (needs user_allow_other as non-root)\n"
	"     other options are passed to FUSE\n"
	"\n"
	"Inode numbers: inside the mounted subvolume st_ino is the btrfs inode\n"
	"number; inside any other subvolume it is (subvolume id << 40) | inode, so\n"
	"(st_dev, st_ino) stays unique although FUSE has a single st_dev.\n";

static int mount_main(int argc, char **argv, struct cli_fs_args *a);

int cmd_mount(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	int ret = mount_main(argc, argv, &a);

	cli_fs_args_release(&a);
	return ret;
}

static int mount_main(int argc, char **argv, struct cli_fs_args *ap)
{
	struct cli_fs_args *a = ap;
	struct ubtrfs_fuse_opts fo = { 0 };
	char rest[2048] = "", fuse_extra[2048] = "";
	bool ro = false, rw = false;
	int c;

	optind = 1;
	while ((c = getopt(argc, argv, "+fdo:h")) != -1) {
		switch (c) {
		case 'f':
			fo.foreground = true;
			break;
		case 'd':
			fo.foreground = true;
			fo.debug = true;
			break;
		case 'o':
			if (cli_fs_parse_opts(a, optarg, rest, sizeof(rest), &ro, &rw))
				return 1;
			/* collect what FUSE should see */
			for (char *save = NULL, *o = strtok_r(rest, ",", &save); o;
			     o = strtok_r(NULL, ",", &save)) {
				if (!strcmp(o, "allow_other")) {
					fo.allow_other = true;
					continue;
				}
				if (!strcmp(o, "defaults") || !strcmp(o, "nodev") ||
				    !strcmp(o, "nosuid") || !strcmp(o, "noatime") ||
				    !strcmp(o, "relatime") || !strcmp(o, "noexec") ||
				    !strcmp(o, "exec") || !strcmp(o, "dev") || !strcmp(o, "suid") ||
				    !strcmp(o, "auto") || !strcmp(o, "noauto") ||
				    !strcmp(o, "user") || !strcmp(o, "nouser") || !strcmp(o, "_netdev"))
					continue;
				size_t used = strlen(fuse_extra);
				snprintf(fuse_extra + used, sizeof(fuse_extra) - used, "%s%s",
					 used ? "," : "", o);
			}
			break;
		case 'h':
			fputs(cmd_mount_usage, stdout);
			return 0;
		default:
			return cli_usage_error("mount", "invalid option");
		}
	}
	if (argc - optind < 2)
		return cli_usage_error("mount", "a DEVICE and a MOUNTPOINT are required");
	if (rw && ro)
		return cli_usage_error("mount", "both ro and rw given");
	a->rdwr = rw;
	fo.rw = rw;
	for (int i = optind; i < argc - 1; i++)
		if (cli_fs_add_device(a, argv[i]))
			return 1;
	/* device= options came first in a.devices; the named device must be
	 * first so messages and fsname name it. */
	ubtrfs_fs *fs;
	ubtrfs_ino root;
	if (cli_fs_open(a, &fs, &root))
		return 1;
	char *fsname = realpath(argv[optind], NULL);
	fo.mountpoint = argv[argc - 1];
	fo.fsname = fsname ? fsname : argv[optind];
	fo.subvol = root.subvol;
	fo.extra_fuse_opts = fuse_extra;
	int ret = ubtrfs_fuse_serve(fs, &fo);
	ubtrfs_close(fs);
	free(fsname);
	return ret;
}
