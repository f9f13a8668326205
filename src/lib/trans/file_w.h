/*
 * trans layer: file data writes (file_w.c).
 */
#ifndef UBTRFS_TRANS_FILE_W_H
#define UBTRFS_TRANS_FILE_W_H

#include "trans/trans.h"

/*
 * Write len bytes at off into regular file `ino` of subvolume `subvol`
 * (extents allocated, written and checksummed at once, EXTENT_DATA items
 * replacing the range, inode size/nbytes/transid/sequence and, with `now`,
 * mtime/ctime updated).  -ENOSPC before anything changed when the data does
 * not fit.
 */
int ubt_file_write(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t off,
		   const void *buf, size_t len, const struct btrfs_timespec *now);
/* Set the size of a regular file: extents past the end are dropped (a
 * partial last sector rewritten zero-padded); growing adds a hole. */
int ubt_file_truncate(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t size,
		      const struct btrfs_timespec *now);

#endif /* UBTRFS_TRANS_FILE_W_H */
