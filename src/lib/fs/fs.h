/*
 * fs layer: an opened filesystem — its trees, subvolume roots, inodes,
 * directories, xattrs and file data (with checksums and decompression).
 *
 * Sits on tree, volume and base.  Read-only today; the write engine will
 * extend it.  Thread-safety: all read functions may run concurrently; the
 * root cache has its own mutex, never held across I/O.
 */
#ifndef UBTRFS_FS_H
#define UBTRFS_FS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/btrfs_format.h"
#include "tree/tree.h"
#include "volume/volume.h"

struct ubt_wfs;

struct ubt_fs_opts {
	struct ubt_volume_opts vol;
	uint64_t cache_bytes;		/* tree-block cache bound (0: 64 MiB) */
	bool nologreplay;		/* open even with a dirty fsync log, ignoring it */
};

/* One subvolume (fs tree) as its ROOT_ITEM describes it. */
struct ubt_subvol {
	uint64_t id;
	struct ubt_root_ref root;
	struct btrfs_root_item item;	/* copy; old short items zero-extended */
	bool readonly;
};

struct ubt_fs {
	struct ubt_volume *vol;
	struct ubt_tree_ctx tree;
	struct ubt_fs_opts opts;
	struct ubt_root_ref root_tree, chunk_tree;
	struct ubt_root_ref extent_tree, csum_tree, dev_tree, uuid_tree, free_space_tree,
		block_group_tree, quota_tree;
	bool has_csum_tree;
	uint64_t default_subvol;	/* from the root tree's "default" dir item */
	uint32_t sectorsize, nodesize, csum_size;
	uint16_t csum_type;
	bool no_holes;

	struct ubt_wfs *wr;		/* writer state (trans layer), NULL read-only */
	/* Data checksums the writer holds back from the csum tree (trans
	 * layer, csum_w.c): readers of checksums overlay them.  Sets have[i]
	 * and csums[i] for each sector of [bytenr, bytenr + nsect sectors)
	 * it holds.  NULL: none are held (read-only). */
	void (*held_csums)(struct ubt_fs *fs, uint64_t bytenr, size_t nsect, uint8_t *csums,
			   bool *have);

	pthread_mutex_t subvol_lock;
	struct ubt_subvol **subvols;	/* cache of opened subvolumes, by id */
	size_t nsubvols, subvols_cap;

	struct ubt_icache *icache;	/* INODE_ITEM copies (fs/icache.c) */
};

int ubt_fs_open(const char *const *paths, size_t npaths, const struct ubt_fs_opts *opts,
		struct ubt_fs **out);
void ubt_fs_close(struct ubt_fs *fs);

/* Latest ROOT_ITEM of tree `objectid` from the root tree.  -ENOENT if none. */
int ubt_fs_read_root_item(struct ubt_fs *fs, uint64_t objectid, struct btrfs_root_item *item,
			  struct ubt_root_ref *ref);
/* A subvolume by id (5 = top level); cached for the life of the fs. */
int ubt_fs_subvol(struct ubt_fs *fs, uint64_t id, const struct ubt_subvol **out);

/* ---- inode cache (fs/icache.c) ------------------------------------------ */

/*
 * Copies of INODE_ITEMs by (subvolume id, inode number), filled by
 * ubt_inode_read.  Whoever changes a tree of an open filesystem (the write
 * engine) must keep it current: ubt_icache_put after writing or inserting
 * an INODE_ITEM, ubt_icache_drop after deleting one, ubt_icache_forget_facts
 * before adding an XATTR_ITEM or EXTENT_DATA item, ubt_icache_clear when the
 * trees go back to an older state (an abort).  The facts are -1 (keep), 0
 * (unknown) or 1 (known: the inode has no XATTR_ITEM / no EXTENT_DATA item).
 */
struct ubt_icache;
int ubt_icache_init(struct ubt_fs *fs);
void ubt_icache_destroy(struct ubt_fs *fs);
bool ubt_icache_get(struct ubt_fs *fs, uint64_t subvol, uint64_t ino,
		    struct btrfs_inode_item *out, bool *noxattr, bool *noextents);
void ubt_icache_put(struct ubt_fs *fs, uint64_t subvol, uint64_t ino,
		    const struct btrfs_inode_item *item, int noxattr, int noextents);
void ubt_icache_drop(struct ubt_fs *fs, uint64_t subvol, uint64_t ino);
void ubt_icache_forget_facts(struct ubt_fs *fs, uint64_t subvol, uint64_t ino, bool xattrs,
			     bool extents);
bool ubt_icache_no_xattrs(struct ubt_fs *fs, uint64_t subvol, uint64_t ino);
void ubt_icache_clear(struct ubt_fs *fs);
/* UBTRFS_ICACHE_CHECK is set: hits are compared with the tree. */
bool ubt_icache_checking(const struct ubt_fs *fs);

/* ---- inodes ----------------------------------------------------------- */

struct ubt_inode {
	uint64_t ino;
	const struct ubt_subvol *sv;
	struct btrfs_inode_item item;
};

int ubt_inode_read(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
		   struct ubt_inode *out);
/* ubt_inode_read, and what is known of the inode's other items: no
 * XATTR_ITEM (*noxattr), no EXTENT_DATA item (*noextents); either may be
 * NULL.  False means unknown. */
int ubt_inode_read_facts(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
			 struct ubt_inode *out, bool *noxattr, bool *noextents);
/* Known (inode cache) that the inode has no XATTR_ITEM: 1, else 0; <0
 * only when UBTRFS_ICACHE_CHECK finds the cache wrong. */
int ubt_inode_no_xattrs(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino);
/*
 * With `path` at inode `ino`'s INODE_ITEM: what the items after it in the
 * leaf prove (up to another inode's items, or the tree's end; checked
 * against the next leaf's separator): the inode has no XATTR_ITEM
 * (*noxattr), no EXTENT_DATA item (*noextents).  False means unknown.
 */
void ubt_inode_leaf_facts(const struct ubt_path *path, uint64_t ino, bool *noxattr,
			  bool *noextents);
/* The empty directory (inode 2) the kernel shows where a snapshot holds an
 * entry for a subvolume it cannot reach. */
void ubt_placeholder_inode(const struct ubt_subvol *sv, struct ubt_inode *out);
static inline uint32_t ubt_inode_mode(const struct ubt_inode *in)
{
	return btrfs_inode_mode(&in->item);
}

/*
 * Look `name` up in directory `dir` via its DIR_ITEM name hash (collisions
 * handled).  On success *location is the entry's key: an INODE_ITEM in the
 * same subvolume or a ROOT_ITEM (a subvolume boundary), *type the BTRFS_FT_*.
 * -ENOENT when absent.
 */
int ubt_dir_lookup(struct ubt_fs *fs, const struct ubt_inode *dir, const char *name, size_t len,
		   struct btrfs_key *location, uint8_t *type);

/*
 * The inode a directory entry leads to: the inode in the same subvolume,
 * the root directory of a subvolume, or the kernel's empty placeholder
 * directory (inode 2) for a subvolume the entry cannot reach.
 */
int ubt_dir_entry_inode(struct ubt_fs *fs, const struct ubt_inode *dir, const char *name,
			size_t len, const struct btrfs_key *location, struct ubt_inode *out);

struct ubt_dirent {
	uint64_t index;			/* DIR_INDEX sequence: the stable offset */
	struct btrfs_key location;
	uint8_t type;
	uint16_t name_len;
	char name[BTRFS_NAME_LEN + 1];
};
/* Call fn for each entry with index >= start, in DIR_INDEX order; fn returns
 * non-zero to stop (that value is returned). */
int ubt_dir_iterate(struct ubt_fs *fs, const struct ubt_inode *dir, uint64_t start,
		    int (*fn)(void *ctx, const struct ubt_dirent *e), void *ctx);

/* Target of a symlink (an inline extent).  *len in/out. */
int ubt_readlink(struct ubt_fs *fs, const struct ubt_inode *in, char *buf, size_t *len);

/* xattrs: list names (NUL-separated, like listxattr) / get one value.
 * With size 0 they return the size needed.  -ENODATA when absent, -ERANGE
 * when the buffer is too small, -ENOENT when inode `ino` does not exist.
 * They take the inode number rather than an inode read beforehand: the
 * common case (ls asking for security.selinux on every file) then costs one
 * tree search, which also proves that the inode exists. */
ssize_t ubt_xattr_list(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino, char *buf,
		       size_t size);
ssize_t ubt_xattr_get(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
		      const char *name, void *buf, size_t size);

/* Read file data [off, off+len) clipped at i_size; returns bytes read or <0.
 * Checksums are verified (other copies tried) unless the inode is NODATASUM. */
ssize_t ubt_file_read(struct ubt_fs *fs, const struct ubt_inode *in, void *buf, size_t len,
		      uint64_t off);
/*
 * The same bytes as a segment list: iov[0..*iovcnt) (capacity *iovcnt on
 * entry) points into mapped devices where the data is there and verified,
 * and into buf (len bytes, used as scratch) for the rest.  The pointers stay
 * valid while the filesystem is open.  Returns the byte count like
 * ubt_file_read; 0 segments at EOF.
 */
struct iovec;
ssize_t ubt_file_read_vec(struct ubt_fs *fs, const struct ubt_inode *in, void *buf, size_t len,
			  uint64_t off, struct iovec *iov, size_t *iovcnt);

/* Data extents of a file for sparseness-preserving copies: call fn for each
 * range that holds data (not holes, not preallocated). */
int ubt_file_data_ranges(struct ubt_fs *fs, const struct ubt_inode *in,
			 int (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx);

/* Resolve a '/'-separated path from subvolume `sv`'s root directory,
 * crossing into nested subvolumes.  Returns the final inode. */
int ubt_path_lookup(struct ubt_fs *fs, const struct ubt_subvol *sv, const char *path,
		    struct ubt_inode *out);

#endif /* UBTRFS_FS_H */
