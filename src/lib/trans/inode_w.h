/*
 * trans layer: namespace operations through the copy-on-write engine -
 * creating inodes (files, directories, symlinks, fifos, sockets, devices),
 * link, unlink, rmdir, rename, setattr and xattrs, written item by item as
 * the Linux kernel writes them (INODE_ITEM, INODE_REF / INODE_EXTREF,
 * DIR_ITEM, DIR_INDEX, XATTR_ITEM, the inline EXTENT_DATA of a symlink).
 *
 * Every operation runs inside a caller's transaction on one subvolume and
 * addresses inodes by number and directory entries by (directory, name), as
 * a FUSE low-level driver does.  Lookups go through the read side (fs/),
 * which sees the transaction's dirty blocks.
 *
 * What the VFS decides is the caller's business, as it is for a kernel
 * filesystem: permissions, the setgid inheritance of inode_init_owner, the
 * umask, clearing setuid/setgid on chown, xattr namespaces and their
 * permissions (user.* only on regular files and directories), ACL updates
 * on chmod.  What btrfs itself decides happens here: inode numbers (highest
 * at first use + 1, never reused while the ubt_ns lives), directory indexes
 * (highest + 1 from 2, never reused while cached), flag and compression
 * property inheritance from the parent directory, directory sizes (2 x name
 * length per entry), directory nlink 1, link counts, the NFS sequence
 * counter (incremented as the kernel increments i_version), transids, and
 * the subvolume's ROOT_ITEM ctransid/ctime.
 *
 * Errors are the errno the Linux syscall returns, in the kernel's order of
 * checks: -ENAMETOOLONG (name > 255 bytes, symlink target longer than an
 * inline extent or 4095), -ENOENT, -ENOTDIR, -EISDIR, -EEXIST, -ENOTEMPTY,
 * -EPERM (link to a directory, the subvolume placeholder), -EMLINK (65535
 * links; INODE_REF full without the EXTENDED_IREF feature), -EINVAL
 * (renaming a directory into its own subtree), -ENOSPC, -ENODATA, -ERANGE,
 * -E2BIG, -EROFS (read-only subvolume, aborted filesystem).
 *
 * Deleting an inode drops its data with it (one reference less on each
 * data extent, applied at commit) when its nbytes is at most
 * UBT_NS_DROP_SECTORS sectors; a larger one is refused with -EOPNOTSUPP
 * (before anything changes): the caller truncates it first, in steps.
 *
 * Limits: any operation on a directory entry that leads to another
 * subvolume is refused with -EOPNOTSUPP, as is setting "btrfs.*"
 * properties.
 *
 * Orphans: a non-directory whose last name goes is deleted in the same
 * transaction, unless the keep callback (ubt_ns_set_keep) says it is still
 * in use: then it stays with nlink 0 and an ORPHAN_ITEM (ORPHAN_OBJECTID,
 * ORPHAN_ITEM, ino) in its subvolume, as the kernel leaves an unlinked open
 * file, until ubt_ns_orphan_delete (after its last use, or at the next
 * read-write open after a crash).  The callback may take the item upon
 * itself (UBT_NS_KEEP_LATER): then no commit may happen before it has
 * called ubt_ns_orphan_add or deleted the orphan.
 *
 * Atomicity: every check runs, and the metadata reservation is made, before
 * the first change; a failure after that (I/O, ENOMEM, a metadata ENOSPC the
 * one-operation reservation did not foresee) aborts the transaction, as any
 * engine failure does.
 *
 * Each operation looks the subvolume up on the read side (ubt_fs_subvol)
 * before opening it for writing, so that the read side follows the
 * transaction's root of it.  Writing a subvolume through ubt_wroot_get
 * before it was ever looked up leaves readers on the last commit's root.
 *
 * Kernel behaviour kept although it is odd: a link refused with EMLINK
 * because the INODE_REF is full (no EXTENDED_IREF) still stamps the
 * inode's ctime and change counter, and consumes a directory index.
 */
#ifndef UBTRFS_INODE_W_H
#define UBTRFS_INODE_W_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trans/trans.h"

/* Namespace writer state of one opened filesystem: the next inode number of
 * each subvolume, the next directory index of recently used directories and
 * the delayed DIR_INDEX items.  One per writer, made after ubt_wfs_init (it
 * registers the commit's pre_commit hook): -EINVAL without a writer, -EBUSY
 * when the writer has one already. */
struct ubt_ns;

int ubt_ns_new(struct ubt_fs *fs, struct ubt_ns **out);

/* Does deleting an inode of `nbytes` drop its data itself (see above)?
 * Every EXTENT_DATA item that references data covers at least one sector
 * counted in nbytes, so such an inode has at most this many of them. */
#define UBT_NS_DROP_SECTORS 32
bool ubt_ns_drops_data(const struct ubt_fs *fs, uint64_t nbytes);
void ubt_ns_free(struct ubt_ns *ns);
/*
 * New names' DIR_INDEX items wait in the namespace state and go in by
 * directory, in batches (inode_w.c, "delayed DIR_INDEX items"); the commit
 * inserts what waits.  Before anything reads DIR_INDEX items outside the
 * namespace calls (a readdir), ubt_ns_index_flush inserts them
 * (an error aborts the transaction).  ubt_ns_index_pending: does anything
 * wait?  ubt_ns_index_drop: forget them (the transaction is gone).
 */
bool ubt_ns_index_pending(const struct ubt_ns *ns);
int ubt_ns_index_flush(struct ubt_ns *ns, struct ubt_trans *t);
void ubt_ns_index_drop(struct ubt_ns *ns);

struct ubt_ns_time {
	int64_t sec;
	uint32_t nsec;
};

/* A new inode. */
struct ubt_ns_new_inode {
	uint32_t mode;			/* S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK,
					 * S_IFCHR or S_IFBLK | permission bits (07777);
					 * symlinks are always 0777 */
	uint32_t uid, gid;
	uint32_t rdev_major, rdev_minor;	/* devices: < 4096, < 2^20 */
	const char *target;		/* symlinks: the target (not NUL-terminated) */
	size_t target_len;
};

/*
 * Create `name` in directory `dir`: atime, mtime, ctime and otime of the new
 * inode and mtime, ctime of the directory become `now`.  *ino (may be NULL)
 * receives the new inode number.
 */
int ubt_ns_create(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		  const char *name, size_t len, const struct ubt_ns_new_inode *a,
		  struct ubt_ns_time now, uint64_t *ino);

/*
 * A snapshot of subvolume `src` (its last state in this transaction), named
 * `name` in directory `dir` of subvolume `subvol` (src itself, or another):
 * a new subvolume tree (id one above the highest in the root tree, in
 * *id), sharing src's blocks, with the ROOT_ITEM (key offset: this
 * transaction) the source's has but for its own uuid, parent_uuid = the
 * source's uuid, otime/otransid now, RDONLY as `readonly` asks (received
 * uuid and send/receive times kept only for read-only ones, as the
 * kernel does); ROOT_REF and ROOT_BACKREF; the uuid tree's entries where
 * there is a uuid tree (the uuid, and for a read-only snapshot of a
 * received subvolume the received uuid); the entry (a directory, its location the ROOT_ITEM
 * key) in dir, whose size, mtime and ctime change as for any new name
 * (after the copy: a snapshot into src does not hold its own name, as on
 * the kernel).  src must be unchanged in this transaction (-EAGAIN,
 * nothing done: commit first).
 */
int ubt_ns_snapshot(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		    const char *name, size_t len, uint64_t src, bool readonly,
		    struct ubt_ns_time now, uint64_t *id);

/*
 * A new, empty subvolume named `name` in directory `dir` of subvolume
 * `subvol`, as the kernel makes one: a tree (id one above the highest in
 * the root tree, in *id) holding its root directory (inode 256, owned by
 * uid and gid, permissions mode & 0777 - the caller applies the umask -,
 * no flags from dir but the compression property of the parent
 * subvolume's root directory), the ROOT_ITEM (key offset 0, a new uuid,
 * otime and ctime now), ROOT_REF and ROOT_BACKREF, the uuid tree's entry,
 * the entry in dir.
 */
int ubt_ns_subvol_create(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
			 const char *name, size_t len, uint32_t mode, uint32_t uid, uint32_t gid,
			 struct ubt_ns_time now, uint64_t *id);

/*
 * Delete the subvolume named `name` in directory `dir` of subvolume
 * `subvol`, as the kernel's `btrfs subvolume delete` does: the entry,
 * ROOT_REF and ROOT_BACKREF go, the ROOT_ITEM becomes DEAD with no
 * references, an ORPHAN_ITEM in the root tree names it, its uuid tree
 * entries go; its tree stays until the kernel drops it (its next
 * read-write mount).  -EINVAL for a name that is not a subvolume's,
 * -EPERM for the default subvolume, -ENOTEMPTY when it holds subvolumes
 * of its own.  *id: the deleted tree.
 */
int ubt_ns_subvol_delete(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
			 const char *name, size_t len, struct ubt_ns_time now, uint64_t *id);

/* A new name for non-directory `ino`. */
int ubt_ns_link(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		uint64_t dir, const char *name, size_t len, struct ubt_ns_time now);

/* Remove a non-directory name (-EISDIR for a directory); the inode goes
 * with its last name. */
int ubt_ns_unlink(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		  const char *name, size_t len, struct ubt_ns_time now);
/* The same, for a name the caller has looked up in the same operation
 * (ubt_ns_lookup: it leads to inode `ino`); the lookup is not repeated. */
int ubt_ns_unlink_ino(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		      const char *name, size_t len, uint64_t ino, struct ubt_ns_time now);

/* Remove an empty directory. */
int ubt_ns_rmdir(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		 const char *name, size_t len, struct ubt_ns_time now);

/*
 * rename(2) without flags: within a directory or across directories of the
 * subvolume, replacing an existing non-directory or empty directory of a
 * compatible type.  Two names of one inode: nothing happens, 0.
 */
int ubt_ns_rename(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t olddir,
		  const char *oldname, size_t oldlen, uint64_t newdir, const char *newname,
		  size_t newlen, struct ubt_ns_time now);

/* The caller's "still in use" test for inodes losing their last name:
 * UBT_NS_DELETE (not in use: delete it now), UBT_NS_KEEP (an orphan; the
 * ORPHAN_ITEM is inserted now) or UBT_NS_KEEP_LATER (an orphan whose
 * ORPHAN_ITEM the caller inserts with ubt_ns_orphan_add before the
 * transaction commits, unless it deletes the orphan first: an rm -rf
 * then writes no item at all).  Asked first while checking (decide
 * false: only whether it is kept matters, nothing may change), then once
 * the operation holds its reserve (decide true), just before the name
 * goes. */
enum { UBT_NS_DELETE, UBT_NS_KEEP, UBT_NS_KEEP_LATER };
void ubt_ns_set_keep(struct ubt_ns *ns,
		     int (*keep)(void *ctx, uint64_t subvol, uint64_t ino, bool decide), void *ctx);
/* Insert the ORPHAN_ITEM of `ino` if it is an orphan (nlink 0): 1 when
 * the item is there, 0 when the inode has links or is gone.  Reserves as a
 * deletion does (the global reserve may serve). */
int ubt_ns_orphan_add(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino);
/* Delete orphan `ino` (nlink 0; more data than ubt_ns_drops_data allows
 * must be dropped first, else -EOPNOTSUPP) and, with `item`, its
 * ORPHAN_ITEM; an inode with links keeps itself and loses only the item. */
int ubt_ns_orphan_delete(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
			 bool item);
/* Calls fn for the inode of every ORPHAN_ITEM of the subvolume (read side;
 * fn may change the tree). */
int ubt_ns_orphans(struct ubt_fs *fs, uint64_t subvol, int (*fn)(void *ctx, uint64_t ino),
		   void *ctx);

/* renameat2(RENAME_EXCHANGE): both names exist and trade their inodes. */
int ubt_ns_exchange(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir1,
		    const char *name1, size_t len1, uint64_t dir2, const char *name2, size_t len2,
		    struct ubt_ns_time now);

#define UBT_NS_SET_MODE		(1u << 0)	/* permission bits; the type stays */
#define UBT_NS_SET_UID		(1u << 1)
#define UBT_NS_SET_GID		(1u << 2)
#define UBT_NS_SET_ATIME	(1u << 3)
#define UBT_NS_SET_MTIME	(1u << 4)
#define UBT_NS_SET_CTIME	(1u << 5)

struct ubt_ns_attr {
	unsigned valid;			/* UBT_NS_SET_* */
	uint32_t mode, uid, gid;
	struct ubt_ns_time atime, mtime, ctime;
};

/* chmod/chown/utimensat (not truncate).  The VFS sets ctime on every
 * change: pass UBT_NS_SET_CTIME with the current time to do the same. */
int ubt_ns_setattr(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		   const struct ubt_ns_attr *a);

#define UBT_NS_XATTR_CREATE	1	/* = XATTR_CREATE */
#define UBT_NS_XATTR_REPLACE	2	/* = XATTR_REPLACE */

/* setxattr(2) (the inode's ctime becomes `now`); the largest name + value is
 * a leaf item minus a dir item header (-ENOSPC beyond). */
int ubt_ns_setxattr(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		    const char *name, const void *value, size_t size, int flags,
		    struct ubt_ns_time now);
int ubt_ns_removexattr(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		       const char *name, struct ubt_ns_time now);

/* Look `name` up in directory `dir` (read side): *ino and *type (BTRFS_FT_*).
 * -ENOTDIR if dir is not a directory; -EXDEV for an entry that leads to
 * another subvolume. */
int ubt_ns_lookup(struct ubt_fs *fs, uint64_t subvol, uint64_t dir, const char *name, size_t len,
		  uint64_t *ino, uint8_t *type);

/* The largest symlink target and xattr name + value length of this fs. */
size_t ubt_ns_max_symlink(const struct ubt_fs *fs);
size_t ubt_ns_max_xattr(const struct ubt_fs *fs);

#endif /* UBTRFS_INODE_W_H */
