/*
 * cli: `ubtrfs mount [-f] [-d] [-o OPTIONS] DEVICE... MOUNTPOINT`
 *      `ubtrfs mount -o remount[,OPTIONS] [DEVICE] MOUNTPOINT`
 *
 * Mount options follow kernel btrfs and FUSE conventions, so that fstab
 * lines and `mount -t fuse.ubtrfs` (through the mount.fuse.ubtrfs helper)
 * work.  Every option is classified (table below): it chooses how the
 * filesystem is opened (open_fs.c), is handled here, is passed to FUSE, is
 * accepted without effect, or is refused with the reason.  Unknown options
 * are refused.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fuse/ubtrfs_fuse.h"

const char cmd_mount_usage[] =
	"usage: ubtrfs mount [-f] [-d] [-o OPTIONS] DEVICE... MOUNTPOINT\n"
	"       ubtrfs mount -o remount[,OPTIONS] [DEVICE] MOUNTPOINT\n"
	"\n"
	"Mount a btrfs filesystem through FUSE, read-only unless -o rw.  Returns\n"
	"once the mount is ready.  Unmount with `umount MOUNTPOINT` or\n"
	"`fusermount3 -u MOUNTPOINT`: they return at once, and the daemon then\n"
	"writes its last commit and exits; wait for it before using the image\n"
	"elsewhere (e.g. `while fuser -s IMAGE; do sleep 0.1; done`).  SIGTERM,\n"
	"SIGINT or SIGHUP to the daemon also commit and unmount.\n"
	"\n"
	"Any user can mount an image they may read (and write, for rw) on a\n"
	"directory they own: FUSE's setuid fusermount3 does the mount.\n"
	"\n"
	"A read-write mount holds its image alone: another read-write or\n"
	"read-only mount of it, or ubtrfs mkfs, fails with \"in use\" meanwhile\n"
	"(and a read-write mount while a read-only one is up).  The kernel's loop\n"
	"device does not look at these locks.\n"
	"\n"
	"mount(8): with mount.fuse.ubtrfs in /sbin, `mount -t fuse.ubtrfs IMAGE\n"
	"DIR` and fstab lines such as `/srv/disk.img /mnt fuse.ubtrfs\n"
	"rw,commit=5,nofail 0 0` run `ubtrfs mount`; `user` lines let users mount\n"
	"them.  mount(8) passes rw unless ro is given, so these mounts are\n"
	"read-write unless ro (or -r) is given.\n"
	"\n"
	"  -f                  stay in the foreground\n"
	"  -d                  FUSE debug output (implies -f)\n"
	"  -o OPTIONS          comma-separated, repeatable; of ro and rw the last wins:\n"
	"     ro               read-only (the default)\n"
	"     rw               read-write: EXPERIMENTAL, keep a backup.  Changes are\n"
	"                      committed on fsync, every commit= seconds, when a\n"
	"                      quarter of cache_size is dirty, and at unmount or\n"
	"                      SIGTERM; a crash loses\n"
	"                      what came after the last commit.  Not supported:\n"
	"                      RENAME_WHITEOUT, fallocate COLLAPSE/INSERT/UNSHARE,\n"
	"                      changes across subvolumes, subvolume and snapshot\n"
	"                      creation, compression on write.  Refused (with the\n"
	"                      reason) on filesystems with quotas, an unreplayed\n"
	"                      fsync log, a balance in progress, missing devices or\n"
	"                      features the writer does not know.\n"
	"     commit=N         rw: commit every N seconds (default and 0: 30)\n"
	"     subvol=PATH      mount this subvolume (path from the top level)\n"
	"     subvolid=ID      mount the subvolume with this id\n"
	"     degraded         allow missing devices where the profiles allow\n"
	"     device=PATH      another device of the filesystem (repeatable)\n"
	"     nologreplay      ignore an unreplayed fsync log (also norecovery,\n"
	"                      rescue=nologreplay; other rescue= modes are refused)\n"
	"     cache_size=N[KMG] bound of the tree-block cache (default 256M, at most\n"
	"                      an eighth of the machine's memory, at least 64M)\n"
	"     noxattrscan      read-only: keep asking the filesystem for every\n"
	"                      getxattr.  By default (xattrscan) the first getxattr\n"
	"                      starts a background scan of every subvolume; if no\n"
	"                      inode has an extended attribute, getxattr then fails\n"
	"                      with EOPNOTSUPP (not ENODATA) for the rest of the\n"
	"                      mount and stops costing a request per call (ls -l).\n"
	"                      listxattr keeps answering (an empty list); the ACL\n"
	"                      names keep answering ENODATA.  No effect with rw.\n"
	"     fsname=NAME      source shown in /proc/mounts (default: the device)\n"
	"     allow_other      let other users in (needs user_allow_other in\n"
	"                      /etc/fuse.conf as non-root); without it only the user\n"
	"                      who mounted has access, not even root\n"
	"   Passed to FUSE (the kernel applies them):\n"
	"     nosuid, suid, nodev, dev, noexec, exec, sync, async, noatime, atime,\n"
	"     allow_root, auto_unmount, max_read=N, context=, fscontext=, defcontext=,\n"
	"     rootcontext=.  FUSE mounts are nosuid,nodev unless -o suid,dev (root\n"
	"     only; mount -t fuse.ubtrfs as root implies them, as mount.fuse3 does).\n"
	"     sync: every write is committed before it returns (the kernel fsyncs\n"
	"     it); directory changes wait for the next fsync or commit.\n"
	"     Access times are not updated by reading (as noatime) whatever the\n"
	"     atime options say; relatime, norelatime, strictatime, nostrictatime,\n"
	"     diratime, nodiratime, lazytime and nolazytime are accepted, no effect.\n"
	"   Changing what is written, not supported yet: accepted read-only (as the\n"
	"   kernel ignores them for reading), refused with rw:\n"
	"     compress[=TYPE[:LEVEL]], compress-force[=...] (=no is accepted),\n"
	"     nodatacow, nodatasum\n"
	"   Accepted, no effect (they tune only the kernel's implementation):\n"
	"     acl, autodefrag, noautodefrag, barrier, nobarrier (ubtrfs always\n"
	"     flushes), clear_cache, space_cache[=v1|v2], nospace_cache (the free\n"
	"     space tree or cache the filesystem has is kept), datacow, datasum,\n"
	"     discard[=sync|async], nodiscard, enospc_debug, noenospc_debug,\n"
	"     fatal_errors=, flushoncommit, noflushoncommit, inode_cache,\n"
	"     noinode_cache, max_inline= (the kernel's default is used),\n"
	"     metadata_ratio=, skip_balance, ssd, ssd_spread, nossd, nossd_spread,\n"
	"     thread_pool=, treelog, notreelog (ubtrfs never writes a log tree),\n"
	"     user_subvol_rm_allowed, subvolrootid=, alloc_start=, iversion,\n"
	"     noiversion, nomand\n"
	"   Accepted, no effect (fstab and mount(8) bookkeeping; FUSE's own):\n"
	"     defaults, auto, noauto, user, users, nouser, owner, group, nofail,\n"
	"     _netdev, comment=, x-*, user_id=, group_id=, rootmode=,\n"
	"     default_permissions (always on: the kernel checks permissions)\n"
	"   Refused: noacl, dirsync, usebackuproot, recovery, subtype=, blkdev,\n"
	"     blksize=, and any option not listed here.\n"
	"\n"
	"Remount: `mount -o remount,ro MOUNTPOINT` (or ubtrfs mount -o remount,ro\n"
	"MOUNTPOINT) commits and makes the mount read-only: the kernel refuses\n"
	"writes (it is a read-only bind remount; the daemon stays read-write), and\n"
	"remount,rw makes it writable again.  A mount made read-only cannot become\n"
	"read-write in place: unmount it and mount it again with -o rw.  A remount\n"
	"changes ro/rw and nosuid/nodev/noexec/atime flags only; other options keep\n"
	"their values (commit= and the rest are ignored).  Needs root.\n"
	"\n"
	"Inode numbers: inside the mounted subvolume st_ino is the btrfs inode\n"
	"number; inside any other subvolume it is (subvolume id << 40) | inode, so\n"
	"(st_dev, st_ino) stays unique although FUSE has a single st_dev.\n";

/* ---- option classification ---- */

enum mopt_action {
	MOPT_IGNORE,	/* accepted, no effect */
	MOPT_FUSE,	/* passed to FUSE as given */
	MOPT_RO_ONLY,	/* changes what is written: ignored ro, refused rw */
	MOPT_REFUSE,	/* refused, with `why` */
};

struct mopt_rule {
	const char *name;	/* "name": exact; "name=": any value; "name*": prefix */
	enum mopt_action action;
	const char *why;	/* MOPT_RO_ONLY, MOPT_REFUSE: the message */
};

#define RO_ONLY_COMPRESS "compression on write is not supported yet; mount without compress="
#define RO_ONLY_FORCE "compression on write is not supported yet; mount without compress-force="
#define RO_ONLY_NODATASUM                                                               \
	"writing without data checksums is not supported yet; mount without nodatacow " \
	"and nodatasum"

static const struct mopt_rule mopt_rules[] = {
	/* fstab and mount(8) bookkeeping */
	{ "defaults", MOPT_IGNORE, NULL },
	{ "auto", MOPT_IGNORE, NULL },
	{ "noauto", MOPT_IGNORE, NULL },
	{ "user", MOPT_IGNORE, NULL },
	{ "users", MOPT_IGNORE, NULL },
	{ "nouser", MOPT_IGNORE, NULL },
	{ "owner", MOPT_IGNORE, NULL },
	{ "group", MOPT_IGNORE, NULL },
	{ "nofail", MOPT_IGNORE, NULL },
	{ "_netdev", MOPT_IGNORE, NULL },
	{ "comment=", MOPT_IGNORE, NULL },
	{ "x-*", MOPT_IGNORE, NULL },
	/* FUSE's own, as /proc/mounts shows them (a copied line must work) */
	{ "user_id=", MOPT_IGNORE, NULL },
	{ "group_id=", MOPT_IGNORE, NULL },
	{ "rootmode=", MOPT_IGNORE, NULL },
	{ "default_permissions", MOPT_IGNORE, NULL },
	/* btrfs options that tune only the kernel's implementation */
	{ "acl", MOPT_IGNORE, NULL },
	{ "autodefrag", MOPT_IGNORE, NULL },
	{ "noautodefrag", MOPT_IGNORE, NULL },
	{ "barrier", MOPT_IGNORE, NULL },
	{ "nobarrier", MOPT_IGNORE, NULL },
	{ "clear_cache", MOPT_IGNORE, NULL },
	{ "space_cache", MOPT_IGNORE, NULL },
	{ "space_cache=", MOPT_IGNORE, NULL },
	{ "nospace_cache", MOPT_IGNORE, NULL },
	{ "datacow", MOPT_IGNORE, NULL },
	{ "datasum", MOPT_IGNORE, NULL },
	{ "discard", MOPT_IGNORE, NULL },
	{ "discard=", MOPT_IGNORE, NULL },
	{ "nodiscard", MOPT_IGNORE, NULL },
	{ "enospc_debug", MOPT_IGNORE, NULL },
	{ "noenospc_debug", MOPT_IGNORE, NULL },
	{ "fatal_errors=", MOPT_IGNORE, NULL },
	{ "flushoncommit", MOPT_IGNORE, NULL },
	{ "noflushoncommit", MOPT_IGNORE, NULL },
	{ "inode_cache", MOPT_IGNORE, NULL },
	{ "noinode_cache", MOPT_IGNORE, NULL },
	{ "max_inline=", MOPT_IGNORE, NULL },
	{ "metadata_ratio=", MOPT_IGNORE, NULL },
	{ "skip_balance", MOPT_IGNORE, NULL },
	{ "ssd", MOPT_IGNORE, NULL },
	{ "ssd_spread", MOPT_IGNORE, NULL },
	{ "nossd", MOPT_IGNORE, NULL },
	{ "nossd_spread", MOPT_IGNORE, NULL },
	{ "thread_pool=", MOPT_IGNORE, NULL },
	{ "treelog", MOPT_IGNORE, NULL },
	{ "notreelog", MOPT_IGNORE, NULL },
	{ "user_subvol_rm_allowed", MOPT_IGNORE, NULL },
	{ "subvolrootid=", MOPT_IGNORE, NULL },
	{ "alloc_start=", MOPT_IGNORE, NULL },
	/* VFS options libfuse 3.14 does not know.  The kernel leaves access
	 * times of FUSE inodes to the daemon, which does not update them on
	 * reads (as noatime), so the atime flags have no effect anyway. */
	{ "relatime", MOPT_IGNORE, NULL },
	{ "norelatime", MOPT_IGNORE, NULL },
	{ "strictatime", MOPT_IGNORE, NULL },
	{ "nostrictatime", MOPT_IGNORE, NULL },
	{ "diratime", MOPT_IGNORE, NULL },
	{ "nodiratime", MOPT_IGNORE, NULL },
	{ "lazytime", MOPT_IGNORE, NULL },
	{ "nolazytime", MOPT_IGNORE, NULL },
	{ "iversion", MOPT_IGNORE, NULL },
	{ "noiversion", MOPT_IGNORE, NULL },
	{ "nomand", MOPT_IGNORE, NULL },
	/* VFS flags and FUSE mount options: libfuse applies them */
	{ "suid", MOPT_FUSE, NULL },
	{ "nosuid", MOPT_FUSE, NULL },
	{ "dev", MOPT_FUSE, NULL },
	{ "nodev", MOPT_FUSE, NULL },
	{ "exec", MOPT_FUSE, NULL },
	{ "noexec", MOPT_FUSE, NULL },
	{ "sync", MOPT_FUSE, NULL },
	{ "async", MOPT_FUSE, NULL },
	{ "atime", MOPT_FUSE, NULL },
	{ "noatime", MOPT_FUSE, NULL },
	{ "allow_root", MOPT_FUSE, NULL },
	{ "auto_unmount", MOPT_FUSE, NULL },
	{ "max_read=", MOPT_FUSE, NULL },
	{ "context=", MOPT_FUSE, NULL },
	{ "fscontext=", MOPT_FUSE, NULL },
	{ "defcontext=", MOPT_FUSE, NULL },
	{ "rootcontext=", MOPT_FUSE, NULL },
	/* changing what is written */
	{ "compress", MOPT_RO_ONLY, RO_ONLY_COMPRESS },
	{ "compress=", MOPT_RO_ONLY, RO_ONLY_COMPRESS },
	{ "compress-force", MOPT_RO_ONLY, RO_ONLY_FORCE },
	{ "compress-force=", MOPT_RO_ONLY, RO_ONLY_FORCE },
	{ "nodatacow", MOPT_RO_ONLY, RO_ONLY_NODATASUM },
	{ "nodatasum", MOPT_RO_ONLY, RO_ONLY_NODATASUM },
	/* refused */
	{ "noacl", MOPT_REFUSE, "POSIX ACLs cannot be turned off" },
	{ "dirsync", MOPT_REFUSE,
	  "not supported: directory changes are committed on fsync and every commit= "
	  "seconds" },
	{ "usebackuproot", MOPT_REFUSE, "reading from backup roots is not supported" },
	{ "recovery", MOPT_REFUSE, "reading from backup roots is not supported" },
	{ "subtype=", MOPT_REFUSE, "the FUSE subtype is always ubtrfs" },
	{ "blkdev", MOPT_REFUSE, "fuseblk mounts are not supported" },
	{ "blksize=", MOPT_REFUSE, "fuseblk mounts are not supported" },
};

static const struct mopt_rule *mopt_find(const char *o)
{
	for (size_t i = 0; i < sizeof(mopt_rules) / sizeof(mopt_rules[0]); i++) {
		const char *n = mopt_rules[i].name;
		size_t len = strlen(n);
		if (n[len - 1] == '*' ? !strncmp(o, n, len - 1)
		    : n[len - 1] == '=' ? !strncmp(o, n, len)
					: !strcmp(o, n))
			return &mopt_rules[i];
	}
	return NULL;
}

/* compress=no and compress-force=no ask for what we do anyway. */
static bool compress_off(const char *o)
{
	const char *eq = strchr(o, '=');
	return eq && (!strcmp(eq + 1, "no") || !strcmp(eq + 1, "none"));
}

/* Append `o` to the comma-separated list `buf`; false if it does not fit. */
static bool opt_append(char *buf, size_t size, const char *o)
{
	size_t used = strlen(buf);
	int n = snprintf(buf + used, size - used, "%s%s", used ? "," : "", o);
	return n >= 0 && (size_t)n < size - used;
}

/* commit=N: seconds, 0 meaning the default, as the kernel takes it. */
static bool parse_commit(const char *v, unsigned *out)
{
	char *end;

	if (*v < '0' || *v > '9')
		return false;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || *end || n > UINT_MAX)
		return false;
	*out = (unsigned)n;
	return true;
}

/* ---- remount ---- */

/* Undo the octal escapes of a path in /proc/self/mountinfo, in place. */
static void mountinfo_unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = 0;
}

struct mount_entry {
	char fstype[64];
	bool mnt_ro;	/* the mount (per mount point) is read-only */
	bool sb_ro;	/* the superblock is: the daemon was mounted read-only */
};

/* The topmost mount at `path` (absolute, resolved); 0, or -ENOENT. */
static int find_mount(const char *path, struct mount_entry *me)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		/* id parent maj:min root MOUNTPOINT MNTOPTS [optional...] - TYPE SOURCE SUPEROPTS */
		char *save = NULL, *fld[6] = { 0 };
		int n;
		for (n = 0; n < 6; n++)
			if (!(fld[n] = strtok_r(n ? NULL : line, " \n", &save)))
				break;
		if (n < 6)
			continue;
		mountinfo_unescape(fld[4]);
		if (strcmp(fld[4], path))
			continue;
		char *t;
		while ((t = strtok_r(NULL, " \n", &save)) && strcmp(t, "-"))
			;
		char *type = strtok_r(NULL, " \n", &save);
		char *source = strtok_r(NULL, " \n", &save);
		char *super = strtok_r(NULL, " \n", &save);
		if (!type || !source || !super)
			continue;
		snprintf(me->fstype, sizeof(me->fstype), "%s", type);
		me->mnt_ro = !strncmp(fld[5], "ro", 2) && (!fld[5][2] || fld[5][2] == ',');
		me->sb_ro = !strncmp(super, "ro", 2) && (!super[2] || super[2] == ',');
		ret = 0;	/* keep going: the last one is on top */
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * `-o remount,...`: a FUSE daemon cannot reopen its filesystem, so ro/rw
 * is changed with a read-only bind remount (per mount point; the kernel
 * refuses writes, the daemon stays as it was) after committing.  A daemon
 * that opened the filesystem read-only (its superblock is ro) cannot
 * become read-write.  Other mount flags change as asked; every other
 * option keeps its mount-time value.
 */
static int do_remount(const char *mountpoint, const char *opts)
{
	char *path = realpath(mountpoint, NULL);
	struct mount_entry me;
	struct statvfs sv;
	int ret;

	if (!path) {
		fprintf(stderr, "ubtrfs: %s: %s\n", mountpoint, strerror(errno));
		return 1;
	}
	ret = find_mount(path, &me);
	if (ret) {
		fprintf(stderr, "ubtrfs: remount: %s is not mounted\n", path);
		free(path);
		return 1;
	}
	if (strcmp(me.fstype, "fuse.ubtrfs")) {
		fprintf(stderr, "ubtrfs: remount: %s is a %s mount, not fuse.ubtrfs\n", path,
			me.fstype);
		free(path);
		return 1;
	}
	if (statvfs(path, &sv)) {
		fprintf(stderr, "ubtrfs: remount: %s: %s\n", path, strerror(errno));
		free(path);
		return 1;
	}
	/* Start from the mount's flags; apply the options in order. */
	bool ro = me.mnt_ro || me.sb_ro, want_rw = false;
	unsigned long fl = 0;
	const char *compress = NULL;
	if (sv.f_flag & ST_NOSUID)
		fl |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		fl |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		fl |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		fl |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		fl |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		fl |= MS_RELATIME;
	if (!(fl & (MS_NOATIME | MS_RELATIME)))
		fl |= MS_STRICTATIME;

	static const struct {
		const char *name;
		unsigned long set, clear;
	} flag_opts[] = {
		{ "nosuid", MS_NOSUID, 0 },
		{ "suid", 0, MS_NOSUID },
		{ "nodev", MS_NODEV, 0 },
		{ "dev", 0, MS_NODEV },
		{ "noexec", MS_NOEXEC, 0 },
		{ "exec", 0, MS_NOEXEC },
		{ "noatime", MS_NOATIME, MS_RELATIME | MS_STRICTATIME },
		{ "atime", 0, MS_NOATIME },
		{ "relatime", MS_RELATIME, MS_NOATIME | MS_STRICTATIME },
		{ "norelatime", 0, MS_RELATIME },
		{ "strictatime", MS_STRICTATIME, MS_NOATIME | MS_RELATIME },
		{ "nostrictatime", 0, MS_STRICTATIME },
		{ "nodiratime", MS_NODIRATIME, 0 },
		{ "diratime", 0, MS_NODIRATIME },
	};
	char *copy = strdup(opts), *save = NULL;
	if (!copy) {
		free(path);
		return 1;
	}
	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strcmp(o, "ro")) {
			ro = true;
			want_rw = false;
			continue;
		}
		if (!strcmp(o, "rw")) {
			ro = false;
			want_rw = true;
			continue;
		}
		for (size_t i = 0; i < sizeof(flag_opts) / sizeof(flag_opts[0]); i++) {
			if (!strcmp(o, flag_opts[i].name)) {
				fl = (fl & ~flag_opts[i].clear) | flag_opts[i].set;
				break;
			}
		}
		const struct mopt_rule *r = mopt_find(o);
		if (r && r->action == MOPT_RO_ONLY && !compress_off(o))
			compress = r->why;
		/* anything else keeps its mount-time value */
	}
	free(copy);

	ret = 1;
	if (want_rw && me.sb_ro) {
		fprintf(stderr,
			"ubtrfs: remount: %s was mounted read-only and cannot become read-write "
			"in place (a FUSE daemon cannot reopen its filesystem): unmount it and "
			"mount it again with -o rw\n", path);
		goto out;
	}
	if (!ro && compress) {
		fprintf(stderr, "ubtrfs: remount: %s\n", compress);
		goto out;
	}
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "ubtrfs: remount: %s: %s\n", path, strerror(errno));
		goto out;
	}
	if (ro)
		fl |= MS_RDONLY;
	if (ro && !me.mnt_ro && !me.sb_ro)
		syncfs(fd);	/* pages to the daemon (it writes through anyway) */
	if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | fl, NULL)) {
		int e = errno;
		if (e == EPERM)
			fprintf(stderr, "ubtrfs: remount: %s: only root can remount; unmount "
					"with `fusermount3 -u %s` and mount again\n", path, path);
		else if (e == EBUSY)
			fprintf(stderr, "ubtrfs: remount: %s is busy: files are open for "
					"writing\n", path);
		else
			fprintf(stderr, "ubtrfs: remount: %s: %s\n", path, strerror(e));
		close(fd);
		goto out;
	}
	/* The directory's fsync commits the daemon's open transaction. */
	if (ro && !me.sb_ro && fsync(fd))
		fprintf(stderr, "ubtrfs: remount: %s: commit: %s\n", path, strerror(errno));
	else
		ret = 0;
	close(fd);
out:
	free(path);
	return ret;
}

/* ---- mount ---- */

static int mount_main(int argc, char **argv, struct cli_fs_args *a);

int cmd_mount(int argc, char **argv)
{
	struct cli_fs_args a = { 0 };
	int ret = mount_main(argc, argv, &a);

	cli_fs_args_release(&a);
	return ret;
}

/* Does the option list hold `remount`? */
static bool has_remount(const char *opts)
{
	size_t n = strlen("remount");

	for (const char *p = opts; (p = strstr(p, "remount")); p += n)
		if ((p == opts || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return true;
	return false;
}

/*
 * Sort the options `parse_opts` left over: FUSE's into `fuse_extra`, ours
 * into `fo`.  Prints the reason and returns -1 for a refused one.
 */
static int classify_opts(char *rest, bool rw, struct ubtrfs_fuse_opts *fo, char *fuse_extra,
			 size_t extra_size)
{
	for (char *save = NULL, *o = strtok_r(rest, ",", &save); o;
	     o = strtok_r(NULL, ",", &save)) {
		if (!strcmp(o, "allow_other")) {
			fo->allow_other = true;
			continue;
		}
		if (!strcmp(o, "xattrscan") || !strcmp(o, "noxattrscan")) {
			fo->no_xattr_scan = o[0] == 'n';
			continue;
		}
		if (!strncmp(o, "commit=", 7)) {
			if (!parse_commit(o + 7, &fo->commit_interval)) {
				fprintf(stderr, "ubtrfs: mount option %s: expected seconds\n", o);
				return -1;
			}
			continue;
		}
		if (!strncmp(o, "fsname=", 7)) {
			if (!o[7]) {
				fprintf(stderr, "ubtrfs: mount option %s: expected a name\n", o);
				return -1;
			}
			fo->fsname = o + 7;	/* lives in `rest` */
			continue;
		}
		const struct mopt_rule *r = mopt_find(o);
		if (!r) {
			fprintf(stderr, "ubtrfs: unknown mount option '%s' (see ubtrfs mount "
					"--help)\n", o);
			return -1;
		}
		switch (r->action) {
		case MOPT_IGNORE:
			break;
		case MOPT_FUSE:
			if (!opt_append(fuse_extra, extra_size, o)) {
				fprintf(stderr, "ubtrfs: mount options too long\n");
				return -1;
			}
			break;
		case MOPT_RO_ONLY:
			if (rw && !compress_off(o)) {
				fprintf(stderr, "ubtrfs: mount option '%s': %s\n", o, r->why);
				return -1;
			}
			break;
		case MOPT_REFUSE:
			fprintf(stderr, "ubtrfs: mount option '%s': %s\n", o, r->why);
			return -1;
		}
	}
	return 0;
}

static int mount_main(int argc, char **argv, struct cli_fs_args *a)
{
	struct ubtrfs_fuse_opts fo = { 0 };
	char opts[4096] = "", rest[4096] = "", fuse_extra[2048] = "";
	bool ro = false, rw = false;
	int c;

	/* Options may also follow the operands (`ubtrfs mount SRC DIR -o OPTS`,
	 * as mount helpers are called). */
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	optind = 1;
	while ((c = getopt_long(argc, argv, "fdo:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			fo.foreground = true;
			break;
		case 'd':
			fo.foreground = true;
			fo.debug = true;
			break;
		case 'o':
			if (!opt_append(opts, sizeof(opts), optarg)) {
				fprintf(stderr, "ubtrfs: mount options too long\n");
				return 1;
			}
			break;
		case 'h':
			fputs(cmd_mount_usage, stdout);
			return 0;
		default:
			return cli_usage_error("mount", "invalid option");
		}
	}
	if (has_remount(opts)) {
		if (argc - optind < 1 || argc - optind > 2)
			return cli_usage_error("mount", "remount takes [DEVICE] MOUNTPOINT");
		return do_remount(argv[argc - 1], opts);
	}
	if (argc - optind < 2)
		return cli_usage_error("mount", "a DEVICE and a MOUNTPOINT are required");
	if (cli_fs_parse_opts(a, opts, rest, sizeof(rest), &ro, &rw))
		return 1;
	if (classify_opts(rest, rw, &fo, fuse_extra, sizeof(fuse_extra)))
		return 1;
	a->rdwr = rw;
	/* A read-only mount caches what it read for a day: no writer may
	 * change the image under it (a read-write open holds it alone). */
	a->keep_writers_out = !rw;
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
	/* Absolute: the daemon changes to / and must still find the mount
	 * point to unmount it when it gets SIGTERM. */
	char *mnt = realpath(argv[argc - 1], NULL);
	fo.mountpoint = mnt ? mnt : argv[argc - 1];
	if (!fo.fsname)
		fo.fsname = fsname ? fsname : argv[optind];
	fo.subvol = root.subvol;
	fo.extra_fuse_opts = fuse_extra;
	int ret = ubtrfs_fuse_serve(fs, &fo);
	ubtrfs_close(fs);
	free(fsname);
	free(mnt);
	return ret;
}
