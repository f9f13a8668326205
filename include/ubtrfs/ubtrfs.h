/*
 * libubtrfs: read and write btrfs filesystems from userspace.
 *
 * The public API.  Handles are opaque; every function that can fail returns 0
 * or a negative errno and passes results through out-parameters.  Errors of
 * our own meaning (corruption is -EUCLEAN, an unsupported feature is
 * -EOPNOTSUPP) are explained by ubtrfs_strerror().  The library never writes
 * to stdout and never exits the process, except that it aborts on the one
 * broken contract below where going on would corrupt its memory (a read call
 * made from inside a write call on the same handle); diagnostics go to the
 * log handler (stderr by default).
 *
 * Thread-safety: functions that take no handle are thread-safe.  A handle may
 * be used by several threads at once unless a function says otherwise;
 * ubtrfs_close() not while other calls on it run.  A callback passed to a
 * read call (readdir, data ranges, subvolume list, ...) may make read calls
 * on the same handle, never write calls; the block hook and the log handler
 * make no calls into the library.
 */
#ifndef UBTRFS_UBTRFS_H
#define UBTRFS_UBTRFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UBTRFS_API __attribute__((visibility("default")))

/* ---- library ---------------------------------------------------------- */

UBTRFS_API const char *ubtrfs_version(void);
/* A message for a negative errno returned by this library; never NULL. */
UBTRFS_API const char *ubtrfs_strerror(int err);

enum ubtrfs_log_level {
	UBTRFS_LOG_ERROR = 0,
	UBTRFS_LOG_WARNING = 1,
	UBTRFS_LOG_INFO = 2,
	UBTRFS_LOG_DEBUG = 3,
};
typedef void (*ubtrfs_log_fn)(void *ctx, int level, const char *msg);
/* Process-wide; set before other threads use the library.  NULL: stderr.
 * The handler may run while a handle's locks are held: it must not call
 * into the library. */
UBTRFS_API void ubtrfs_set_log_handler(ubtrfs_log_fn fn, void *ctx);
UBTRFS_API void ubtrfs_set_log_level(int max_level);

/* A 16-byte uuid as the canonical 36 characters plus NUL (buf: 37 bytes). */
UBTRFS_API void ubtrfs_uuid_str(const uint8_t uuid[16], char *buf);

/* Text output of inspection functions goes through a writer the caller owns. */
typedef void (*ubtrfs_write_fn)(void *ctx, const char *text, size_t len);

/* ---- superblock inspection -------------------------------------------- */

struct ubtrfs_dump_super_opts {
	int copy;		/* superblock copy 0..2 (64 KiB, 64 MiB, 256 GiB) */
	bool all;		/* every copy that fits on the device (-a) */
	bool full;		/* system chunk array and backup roots too (-f) */
	bool force;		/* print even without a valid magic (-F) */
};

/*
 * Print the superblock(s) of one device in the form of
 * `btrfs inspect-internal dump-super`.  Returns 0 when everything requested
 * was printed; -EUCLEAN when a copy fails validation (it is still printed
 * with the reason when `force` is set; otherwise the reason is logged);
 * -ENOENT when a requested copy lies past the end of the device.
 */
UBTRFS_API int ubtrfs_dump_super(const char *device, const struct ubtrfs_dump_super_opts *opts,
				 ubtrfs_write_fn write, void *ctx);

/* ---- filesystems ------------------------------------------------------ */

typedef struct ubtrfs_fs ubtrfs_fs;

enum ubtrfs_open_flags {
	UBTRFS_OPEN_RDWR = 1 << 0,	/* default is read-only; EXPERIMENTAL: see
					 * "writing" below */
	UBTRFS_OPEN_DEGRADED = 1 << 1,	/* allow missing devices where profiles allow */
	UBTRFS_OPEN_NOLOGREPLAY = 1 << 2, /* open despite a dirty fsync log, ignoring it */
	UBTRFS_OPEN_KEEP_WRITERS_OUT = 1 << 3, /* read-only: while open, a read-write
					 * open of the devices fails (-EBUSY) */
};

/*
 * Open the filesystem on `ndev` devices (image files or block devices): the
 * devices are matched by fsid, the newest superblock is used, the chunk and
 * root trees are loaded.  Feature policy, as ext2/3/4 do it: an incompat
 * feature we do not support refuses the open (-EOPNOTSUPP); a compat_ro
 * feature we cannot write refuses read-write (-EROFS) but opens read-only.
 * `cache_bytes` bounds the tree-block cache (0: 256 MiB, or an eighth of
 * the machine's memory if less, at least 64 MiB).  The log says why
 * an open failed.  A read-write open holds its devices alone (an exclusive
 * flock(2); on Linux a block device is opened O_EXCL, so not while the
 * kernel has it mounted): another read-write open, or a read-only one with
 * UBTRFS_OPEN_KEEP_WRITERS_OUT, fails with -EBUSY meanwhile, and the other
 * way round.
 */
UBTRFS_API int ubtrfs_open(const char *const *devices, size_t ndev, unsigned flags,
			   ubtrfs_fs **out);
UBTRFS_API int ubtrfs_open_cache(const char *const *devices, size_t ndev, unsigned flags,
				 uint64_t cache_bytes, ubtrfs_fs **out);
UBTRFS_API void ubtrfs_close(ubtrfs_fs *fs);
UBTRFS_API bool ubtrfs_is_readonly(const ubtrfs_fs *fs);

/*
 * A function the library calls on the calling thread just before that
 * thread waits: for a lock another thread holds, or for the device writes
 * and flushes of a commit.  A server that handles requests on one thread
 * at a time uses it to let another thread take over (the FUSE driver).
 * The hook must not call into the library.  NULL removes it; set it before
 * other threads use the handle.
 */
typedef void (*ubtrfs_block_fn)(void *ctx);
UBTRFS_API void ubtrfs_set_block_hook(ubtrfs_fs *fs, ubtrfs_block_fn fn, void *ctx);

/*
 * A function the library calls once per handle, when a write call or a
 * commit (not the one in ubtrfs_close) ends with the running transaction
 * aborted (readers are back at
 * the last commit; every later write returns -EROFS): on that call's
 * thread, before it returns, with the handle's write lock held.  A server
 * that let its clients cache names and attributes drops them here (the
 * FUSE driver).  The hook must not call into the library.  NULL removes
 * it; set it before other threads use the handle.
 */
typedef void (*ubtrfs_abort_fn)(void *ctx);
UBTRFS_API void ubtrfs_set_abort_hook(ubtrfs_fs *fs, ubtrfs_abort_fn fn, void *ctx);

/* An inode: the subvolume (tree id) and the inode number inside it. */
typedef struct ubtrfs_ino {
	uint64_t subvol;
	uint64_t ino;
} ubtrfs_ino;

struct ubtrfs_time {
	int64_t sec;
	uint32_t nsec;
};

struct ubtrfs_stat {
	ubtrfs_ino id;
	uint32_t mode, nlink, uid, gid;
	uint32_t rdev_major, rdev_minor;
	uint64_t size;
	uint64_t blocks;		/* 512-byte units, as st_blocks */
	uint32_t blksize;
	uint64_t generation, flags;	/* btrfs inode generation and flags */
	struct ubtrfs_time atime, mtime, ctime, otime;
};

/* The default subvolume's id (5 unless `btrfs subvolume set-default`). */
UBTRFS_API uint64_t ubtrfs_default_subvol(ubtrfs_fs *fs);
/* Root directory of subvolume `subvol`. -ENOENT if it does not exist. */
UBTRFS_API int ubtrfs_subvol_root(ubtrfs_fs *fs, uint64_t subvol, ubtrfs_ino *out);
/* Resolve a path ('/'-separated, from `start`, crossing subvolumes). */
UBTRFS_API int ubtrfs_resolve(ubtrfs_fs *fs, ubtrfs_ino start, const char *path,
			      struct ubtrfs_stat *out);
UBTRFS_API int ubtrfs_stat(ubtrfs_fs *fs, ubtrfs_ino id, struct ubtrfs_stat *out);
/* As ubtrfs_stat, but the size, blocks and times may not count small
 * appending writes the handle still holds back (ubtrfs_write); the mode,
 * owner and the rest are current.  For permission checks before a write,
 * which would otherwise make the held-back writes land one by one. */
UBTRFS_API int ubtrfs_stat_mode(ubtrfs_fs *fs, ubtrfs_ino id, struct ubtrfs_stat *out);
UBTRFS_API int ubtrfs_lookup(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name,
			     struct ubtrfs_stat *out);

struct ubtrfs_dirent {
	uint64_t offset;	/* pass offset to resume after this entry */
	ubtrfs_ino id;		/* the entry's inode (subvolume crossings resolved) */
	uint32_t dtype;		/* DT_* */
	const char *name;
	size_t name_len;
};
/* Entries with offset > `offset` (0: from the start), in the stable btrfs
 * DIR_INDEX order; "." and ".." are not included.  fn returns non-zero to
 * stop, and that value is returned. */
UBTRFS_API int ubtrfs_readdir(ubtrfs_fs *fs, ubtrfs_ino dir, uint64_t offset,
			      int (*fn)(void *ctx, const struct ubtrfs_dirent *e), void *ctx);
/* The parent directory of `dir` (for ".."); a subvolume root's parent is the
 * directory it is mounted in.  The top-level root is its own parent. */
UBTRFS_API int ubtrfs_parent(ubtrfs_fs *fs, ubtrfs_ino dir, ubtrfs_ino *out);

/* File data; returns bytes read (0 at EOF) or -errno (-EIO: checksum). */
UBTRFS_API ssize_t ubtrfs_read(ubtrfs_fs *fs, ubtrfs_ino id, void *buf, size_t len, uint64_t off);
/*
 * The same bytes without a copy where possible: fills iov[0..*iovcnt)
 * (capacity *iovcnt on entry, at least 3; 2 * len / 4096 + 1 entries let
 * every mappable byte be mapped, and what does not fit is copied) with
 * pointers into the read-only mapped image where the data lies there
 * uncompressed and its checksums verified, and into `scratch` (len bytes)
 * for everything else.  The pointers stay valid while `fs` is open; the
 * caller must not write through them.  Returns bytes described, as
 * ubtrfs_read.  The FUSE driver replies to READ from these segments.
 */
struct iovec;
UBTRFS_API ssize_t ubtrfs_read_iov(ubtrfs_fs *fs, ubtrfs_ino id, void *scratch, size_t len,
				   uint64_t off, struct iovec *iov, size_t *iovcnt);
/* Symlink target, NUL-terminated; returns its length or -errno. */
UBTRFS_API ssize_t ubtrfs_readlink(ubtrfs_fs *fs, ubtrfs_ino id, char *buf, size_t size);
/* As listxattr(2)/getxattr(2): size 0 asks for the size needed. */
UBTRFS_API ssize_t ubtrfs_listxattr(ubtrfs_fs *fs, ubtrfs_ino id, char *buf, size_t size);
UBTRFS_API ssize_t ubtrfs_getxattr(ubtrfs_fs *fs, ubtrfs_ino id, const char *name, void *buf,
				   size_t size);
/*
 * Does any inode of any subvolume carry an extended attribute (an
 * XATTR_ITEM, ACLs included)?  Reads every leaf of every subvolume tree
 * once (blocks shared by snapshots once; the tree-block cache keeps what
 * fits): 1 yes, 0 none, -errno on a read error, -ECANCELED when `stop`
 * (may be NULL; asked before each subvolume and each block below a root)
 * returns non-zero, -EINVAL on a writable handle (the answer could change
 * at once).  Other read calls go on meanwhile.  Memory: 16-32 bytes per
 * tree block while it runs.
 */
UBTRFS_API int ubtrfs_any_xattr(ubtrfs_fs *fs, int (*stop)(void *ctx), void *ctx);
/* Ranges of a file that hold data (not holes or preallocated space). */
UBTRFS_API int ubtrfs_data_ranges(ubtrfs_fs *fs, ubtrfs_ino id,
				  int (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx);

/* lseek(2) SEEK_DATA / SEEK_HOLE from `off`: *out the offset found;
 * -ENXIO at or past the size (or no data after off for SEEK_DATA). */
UBTRFS_API int ubtrfs_lseek(ubtrfs_fs *fs, ubtrfs_ino id, uint64_t off, int whence,
			    uint64_t *out);

struct ubtrfs_statfs {
	uint32_t bsize;
	uint64_t blocks, bfree, bavail;	/* in bsize units */
	uint64_t files, ffree;
	uint32_t namelen;
};
UBTRFS_API int ubtrfs_statfs(ubtrfs_fs *fs, struct ubtrfs_statfs *out);

struct ubtrfs_subvol_info {
	uint64_t id, parent_id, dirid, generation, ctransid, otransid;
	uint64_t flags;			/* 1: read-only */
	const char *path;		/* from the top level, e.g. "a/b/snap" */
	uint8_t uuid[16], parent_uuid[16], received_uuid[16];
	struct ubtrfs_time otime;
};
/* Every subvolume except the top level, ordered by id. */
UBTRFS_API int ubtrfs_subvol_list(ubtrfs_fs *fs,
				  int (*fn)(void *ctx, const struct ubtrfs_subvol_info *i),
				  void *ctx);

struct ubtrfs_device_info {
	uint64_t devid, total_bytes, bytes_used;
	const char *path;		/* NULL when missing */
	uint8_t uuid[16];
};
struct ubtrfs_fs_info {
	char label[257];
	uint8_t fsid[16];
	uint64_t total_bytes, bytes_used, generation, num_devices;
	uint32_t sectorsize, nodesize;
	const char *csum_name;
};
UBTRFS_API int ubtrfs_get_info(ubtrfs_fs *fs, struct ubtrfs_fs_info *out);
UBTRFS_API int ubtrfs_devices(ubtrfs_fs *fs,
			      int (*fn)(void *ctx, const struct ubtrfs_device_info *d), void *ctx);

struct ubtrfs_space_info {
	uint64_t flags;			/* block group type and profile bits */
	const char *type;		/* "Data", "Metadata", "System", "Data+Metadata" */
	const char *profile;		/* "single", "DUP", "RAID1", ... */
	uint64_t total, used;		/* bytes of usable space */
};
/* One call per (type, profile), like `btrfs filesystem df`. */
UBTRFS_API int ubtrfs_space(ubtrfs_fs *fs,
			    int (*fn)(void *ctx, const struct ubtrfs_space_info *s), void *ctx);

/* Print trees as `btrfs inspect-internal dump-tree`: tree_id 0 prints every
 * tree; bytenr != 0 prints that block only. */
UBTRFS_API int ubtrfs_dump_tree(ubtrfs_fs *fs, uint64_t tree_id, uint64_t bytenr,
				ubtrfs_write_fn write, void *ctx);

enum ubtrfs_feature_class {
	UBTRFS_FEATURE_COMPAT = 0,
	UBTRFS_FEATURE_COMPAT_RO = 1,
	UBTRFS_FEATURE_INCOMPAT = 2,
};

struct ubtrfs_feature_report {
	uint64_t used[3];		/* bits set in the superblock, per class */
	uint64_t known[3];		/* bits this library knows by name */
	uint64_t read_supported[3];	/* bits it can open read-only */
	uint64_t write_supported[3];	/* bits it can open read-write */
};

/* What the open filesystem uses and what this library supports. */
UBTRFS_API void ubtrfs_features(const ubtrfs_fs *fs, struct ubtrfs_feature_report *out);
/* What this library supports, without a filesystem (used[] is zero). */
UBTRFS_API void ubtrfs_supported_features(struct ubtrfs_feature_report *out);
/* The name of feature bit `bit` (0..63) of a class, or NULL when unknown. */
UBTRFS_API const char *ubtrfs_feature_name(enum ubtrfs_feature_class cls, unsigned bit);

/* ---- writing (EXPERIMENTAL) ------------------------------------------- */

/*
 * A handle opened with UBTRFS_OPEN_RDWR can be changed through the calls
 * below.  The open refuses (-EROFS, the log says why) what the writer cannot
 * keep consistent: unknown compat_ro/incompat features, quotas, an
 * unreplayed fsync log, a balance in progress, missing devices.
 *
 * One writer at a time: each call below holds the handle's lock exclusively
 * and every read call holds it shared, so readers never see half an
 * operation (a commit lets readers in while it writes and flushes).  The
 * first change starts a transaction; it reaches the disk with
 * ubtrfs_commit() (or ubtrfs_close(), or automatically when it grows large:
 * a quarter of the block cache dirty, its commit reserve at half the free
 * metadata space, or 100,000 operations).  An operation that meets ENOSPC
 * while the transaction holds freed (pinned) space commits and tries once
 * more.  Until then a crash loses it and the last commit stays
 * intact.  When an operation or a commit fails in a way that aborts the
 * transaction, its changes are dropped and every later write returns
 * -EROFS.  On a read-only handle every call here returns -EROFS.
 *
 * All calls address inodes by id and names within a directory, as a FUSE
 * low-level driver does, and return 0 or -errno with the errno of the
 * Linux syscall.  Permission checks, the umask, setgid inheritance and
 * clearing setuid/setgid are the caller's (the VFS's) business.  Every
 * inode touched must be in one subvolume (-EXDEV otherwise).  On success
 * `out` (may be NULL) receives the new or changed inode's attributes.
 * Times are the current time (CLOCK_REALTIME) unless given.
 *
 * Limits: subvolumes are created, snapshotted and deleted (below), but a
 * deleted one's blocks are only freed by the kernel; no compression on
 * write.
 */

/* mode: S_IFREG, S_IFDIR, S_IFIFO, S_IFSOCK, S_IFCHR or S_IFBLK | 07777
 * (rdev for devices only). */
UBTRFS_API int ubtrfs_mknod(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name, uint32_t mode,
			    uint32_t uid, uint32_t gid, uint32_t rdev_major, uint32_t rdev_minor,
			    struct ubtrfs_stat *out);
/* A regular file (mode: permission bits; a type in it is ignored). */
UBTRFS_API int ubtrfs_create(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name, uint32_t mode,
			     uint32_t uid, uint32_t gid, struct ubtrfs_stat *out);
UBTRFS_API int ubtrfs_mkdir(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name, uint32_t mode,
			    uint32_t uid, uint32_t gid, struct ubtrfs_stat *out);
UBTRFS_API int ubtrfs_symlink(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name,
			      const char *target, uint32_t uid, uint32_t gid,
			      struct ubtrfs_stat *out);
/* A new name for non-directory `id`. */
UBTRFS_API int ubtrfs_link(ubtrfs_fs *fs, ubtrfs_ino id, ubtrfs_ino newdir, const char *newname,
			   struct ubtrfs_stat *out);
UBTRFS_API int ubtrfs_unlink(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name);
UBTRFS_API int ubtrfs_rmdir(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name);
/* renameat2(2): flags 0, UBTRFS_RENAME_NOREPLACE (-EEXIST when newname
 * exists) or UBTRFS_RENAME_EXCHANGE (both names exist and trade inodes);
 * anything else (RENAME_WHITEOUT) is -EINVAL. */
#define UBTRFS_RENAME_NOREPLACE 1u	/* = RENAME_NOREPLACE */
#define UBTRFS_RENAME_EXCHANGE 2u	/* = RENAME_EXCHANGE */
UBTRFS_API int ubtrfs_rename(ubtrfs_fs *fs, ubtrfs_ino olddir, const char *oldname,
			     ubtrfs_ino newdir, const char *newname, unsigned flags);

enum ubtrfs_setattr_valid {
	UBTRFS_SET_MODE = 1 << 0,	/* permission bits (07777); the type stays */
	UBTRFS_SET_UID = 1 << 1,
	UBTRFS_SET_GID = 1 << 2,
	UBTRFS_SET_ATIME = 1 << 3,
	UBTRFS_SET_MTIME = 1 << 4,
	UBTRFS_SET_CTIME = 1 << 5,	/* else ctime becomes the current time */
	UBTRFS_SET_SIZE = 1 << 6,	/* regular files: truncate or extend */
	UBTRFS_SET_ATIME_NOW = 1 << 7,	/* with _ATIME: the current time */
	UBTRFS_SET_MTIME_NOW = 1 << 8,	/* with _MTIME: the current time */
};
struct ubtrfs_setattr {
	unsigned valid;			/* UBTRFS_SET_* */
	uint32_t mode, uid, gid;
	uint64_t size;
	struct ubtrfs_time atime, mtime, ctime;
};
UBTRFS_API int ubtrfs_setattr(ubtrfs_fs *fs, ubtrfs_ino id, const struct ubtrfs_setattr *a,
			      struct ubtrfs_stat *out);
/* Write into a regular file (mtime and ctime become the current time);
 * returns len or -errno.  A small write at the file's end may be held
 * back, to be joined with the appends after it into one extent; every
 * other call (reads included) and every commit writes it first, and its
 * every check (room included) is made before this returns: an error it
 * could meet later aborts the transaction (the filesystem turns
 * read-only with the last commit), as any half-done change does.  buf
 * must not change while the call runs (the data and its checksums are
 * both taken from it). */
UBTRFS_API ssize_t ubtrfs_write(ubtrfs_fs *fs, ubtrfs_ino id, const void *buf, size_t len,
				uint64_t off);
/* fallocate(2) with mode 0 or the Linux FALLOC_FL_ values KEEP_SIZE (1),
 * PUNCH_HOLE (2, with KEEP_SIZE) and ZERO_RANGE (0x10); other modes are
 * -EOPNOTSUPP as on btrfs. */
UBTRFS_API int ubtrfs_fallocate(ubtrfs_fs *fs, ubtrfs_ino id, int mode, uint64_t off,
				uint64_t len);
/* copy_file_range(2): up to len bytes (clipped at the source's size) from
 * src at off_in to dst at off_out; a reflink (shared extents, no data
 * copied) where both offsets are sector aligned and the length is too or
 * reaches the source's end, a copy otherwise.  Returns the bytes copied. */
UBTRFS_API ssize_t ubtrfs_copy_range(ubtrfs_fs *fs, ubtrfs_ino src, uint64_t off_in,
				     ubtrfs_ino dst, uint64_t off_out, uint64_t len);
/* As setxattr(2) (flags XATTR_CREATE / XATTR_REPLACE) and removexattr(2). */
UBTRFS_API int ubtrfs_setxattr(ubtrfs_fs *fs, ubtrfs_ino id, const char *name, const void *value,
			       size_t size, int flags);
UBTRFS_API int ubtrfs_removexattr(ubtrfs_fs *fs, ubtrfs_ino id, const char *name);
/*
 * Inodes in use (a FUSE driver's lookup counts): while an inode has
 * references, losing its last name leaves it an orphan (nlink 0, an
 * ORPHAN_ITEM on disk, data readable and writable); the last
 * ubtrfs_forget frees it, as does ubtrfs_close and, after a crash, the
 * next read-write open.  No-ops on read-only handles.
 */
UBTRFS_API int ubtrfs_ref(ubtrfs_fs *fs, ubtrfs_ino id);
UBTRFS_API int ubtrfs_forget(ubtrfs_fs *fs, ubtrfs_ino id, uint64_t n);
/*
 * A snapshot of subvolume `src` (the tree id, 5 for the top level) named
 * `name` in directory `dir`, which may be in src itself or in another
 * subvolume (the one exception to "one subvolume per call"); `readonly`
 * makes it read-only.  As `btrfs subvolume snapshot`: the new subvolume
 * shares every block of src as src is now (this call's changes included)
 * and gets the next free tree id (in *id, may be NULL), a uuid of its own,
 * parent_uuid = src's uuid.  Inside the snapshot, an entry for another
 * subvolume is an empty directory, as on the kernel (a snapshot made inside
 * src does not hold its own name).  The call commits what came before,
 * and ends with a commit: on success the snapshot is on disk.  -EAGAIN
 * when other writers kept changing src between that first commit and the
 * copy (eight times); -EOPNOTSUPP for a source whose root has old-style
 * or relocation back references.
 */
UBTRFS_API int ubtrfs_snapshot(ubtrfs_fs *fs, uint64_t src, ubtrfs_ino dir, const char *name,
			       bool readonly, uint64_t *id);
/*
 * A new, empty subvolume named `name` in directory `dir` (as `btrfs
 * subvolume create`): its root directory owned by uid and gid, with the
 * permissions mode & 0777 (the caller applies the umask, as the kernel
 * does with 0777), the compression property of the parent subvolume's
 * root and no flags of dir's; the new tree id in *id (may be NULL).
 */
UBTRFS_API int ubtrfs_subvol_create(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name, uint32_t mode,
				    uint32_t uid, uint32_t gid, uint64_t *id);
/*
 * Delete the subvolume named `name` in directory `dir` (as `btrfs
 * subvolume delete`): its name goes and it is marked dead; its blocks stay
 * allocated until the kernel drops the tree at its next read-write mount
 * (ubtrfs does not).  -EINVAL if `name` is not a subvolume, -EPERM for the
 * default subvolume, -ENOTEMPTY while it holds subvolumes, -EBUSY while a
 * file of it unlinked while in use (ubtrfs_ref) is still referenced.  On
 * this handle the subvolume is gone from then on (-ENOENT).  *id (may be
 * NULL): the deleted tree.
 */
UBTRFS_API int ubtrfs_subvol_delete(ubtrfs_fs *fs, ubtrfs_ino dir, const char *name, uint64_t *id);
/* Write the running transaction to disk (0 when there is none). */
UBTRFS_API int ubtrfs_commit(ubtrfs_fs *fs);

/* ---- creating a filesystem (mkfs) ------------------------------------- */

enum ubtrfs_profile {
	UBTRFS_PROFILE_DEFAULT = 0,	/* metadata: DUP on one device, RAID1 on more;
					 * data: single */
	UBTRFS_PROFILE_SINGLE,
	UBTRFS_PROFILE_DUP,
	UBTRFS_PROFILE_RAID0,
	UBTRFS_PROFILE_RAID1,
	UBTRFS_PROFILE_RAID1C3,
	UBTRFS_PROFILE_RAID1C4,
	UBTRFS_PROFILE_RAID10,
	UBTRFS_PROFILE_RAID5,		/* refused (-EOPNOTSUPP) */
	UBTRFS_PROFILE_RAID6,		/* refused (-EOPNOTSUPP) */
};

enum ubtrfs_csum_type {
	UBTRFS_CSUM_CRC32C = 0,
	UBTRFS_CSUM_XXHASH = 1,
	UBTRFS_CSUM_SHA256 = 2,
	UBTRFS_CSUM_BLAKE2 = 3,
};

/* Zero-initialised options give the defaults of mkfs.btrfs 6.2. */
struct ubtrfs_mkfs_opts {
	const char *label;		/* NULL: no label (< 256 bytes) */
	const uint8_t *fsid;		/* 16 bytes, NULL: random */
	uint32_t nodesize;		/* 0: 16 KiB */
	uint32_t sectorsize;		/* 0: 4 KiB */
	enum ubtrfs_csum_type csum_type;
	bool disable_no_holes;		/* -O ^no-holes */
	bool disable_free_space_tree;	/* -R ^free-space-tree */
	bool block_group_tree;		/* -O block-group-tree (off by default; needs
					 * no-holes and the free-space tree) */
	uint64_t byte_count;		/* size of each device, 0: all of it; a missing
					 * image file is created, a short one extended */
	bool force;			/* overwrite an existing btrfs */
	enum ubtrfs_profile metadata_profile, data_profile;
	bool reproducible;		/* fixed times (`time`), uuids derived from the
					 * inputs: same inputs, identical bytes */
	int64_t time;			/* creation time when reproducible */
	const char *rootdir;		/* populate the top level from this directory
					 * (NULL: empty) */
	void (*progress)(void *ctx, const char *line);	/* optional */
	void *progress_ctx;
};

/*
 * Create a new btrfs filesystem on `ndev` devices (image files or block
 * devices).  Returns 0, or -EEXIST when a device holds a btrfs and force is
 * not set, -EINVAL for bad options, -EOPNOTSUPP for RAID5/6, -ENOSPC when
 * the devices are too small; the log says why.
 */
UBTRFS_API int ubtrfs_mkfs(const char *const *devices, size_t ndev,
			   const struct ubtrfs_mkfs_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* UBTRFS_UBTRFS_H */
