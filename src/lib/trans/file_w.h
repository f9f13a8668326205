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
 * mtime/ctime updated).  As the kernel does, the parts over a preallocated
 * extent, or over an extent of a NODATACOW file, that only this file
 * references (and no snapshot shares) are written in place instead: the
 * preallocated piece turns into a REG item of the same disk extent, a
 * NODATACOW extent keeps its items.  -ENOSPC before anything changed when
 * the data written to new extents does not fit (space fallocate took is
 * written in place: it needs none).
 */
int ubt_file_write(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t off,
		   const void *buf, size_t len, const struct btrfs_timespec *now);
/* Will ubt_file_write(t, subvol, ino, off, buf, len) pass its checks (a
 * regular file, the size, metadata room, data room for every sector it
 * touches) in the state as it is?  0 if so, else -errno (perhaps where
 * the write itself would pass: it may need less data room).  Unless
 * joining: 1 (nothing checked) when off is not the file's size, and a new
 * data or metadata chunk when the groups are full, as the write would
 * take one.  joining (a held-back write of off.. grows to len): the data
 * room as it is, nothing changed - its metadata room was checked when it
 * began, and nothing may change before it is made. */
int ubt_file_write_check(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t off,
			 size_t len, bool joining);
/* Set the size of a regular file: extents past the end are dropped (a
 * partial last sector rewritten zero-padded); growing adds a hole. */
int ubt_file_truncate(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t size,
		      const struct btrfs_timespec *now);
/* For shrinking a file to `size` in steps: the sizes to truncate to first
 * (descending, sector aligned, between `size` and the current size), each
 * leaving at most `per_step` extent items past it.  *out (malloc'd, NULL
 * when none) holds *n of them. */
int ubt_file_step_targets(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t size,
			  unsigned per_step, uint64_t **out, size_t *n);

/* One reference less on data extent (bytenr, num_bytes) from inode `ino`
 * of `root`, under the data ref key offset `ref_offset` (the item's file
 * offset minus its extent offset): for an EXTENT_DATA item being deleted
 * with its inode.  Queued, applied at commit as every data ref change. */
int ubt_file_data_unref(struct ubt_trans *t, const struct ubt_wroot *root, uint64_t ino,
			uint64_t bytenr, uint64_t num_bytes, uint64_t ref_offset);

/* fallocate(2) modes (Linux values). */
#define UBT_FALLOC_KEEP_SIZE	0x01
#define UBT_FALLOC_PUNCH_HOLE	0x02
#define UBT_FALLOC_ZERO_RANGE	0x10

/*
 * fallocate(2) on a regular file: mode 0 / KEEP_SIZE preallocate every gap
 * of the range (PREALLOC extents, read as zeros; the inode gets the
 * PREALLOC flag), growing the size unless KEEP_SIZE; PUNCH_HOLE|KEEP_SIZE
 * zeroes partial sectors and drops whole ones (holes; clipped to the size);
 * ZERO_RANGE does both: zeros at the edges, preallocated space between.
 * An inline extent is first rewritten as a regular one.  Other modes
 * (collapse, insert, unshare) are -EOPNOTSUPP, as btrfs has them.  -ENOSPC
 * before anything changed when the space is not there.
 */
int ubt_file_fallocate(struct ubt_trans *t, uint64_t subvol, uint64_t ino, int mode,
		       uint64_t off, uint64_t len, const struct btrfs_timespec *now);

/*
 * Clone (reflink) [src_off, src_off + len) of regular file `src` into
 * `dst` at dst_off, both in subvolume `subvol`: dst's extent items over the
 * range are replaced by items referencing the source's data extents (one
 * more reference each), holes stay holes.  Offsets must be sector aligned,
 * and len too unless the range ends at the source's size and reaches the
 * destination's (-EINVAL); ranges of one file must not overlap (-EINVAL);
 * the source must not be inline and both files must agree on NODATASUM
 * (-EOPNOTSUPP / -EINVAL: the caller copies the bytes instead).
 */
int ubt_file_clone(struct ubt_trans *t, uint64_t subvol, uint64_t src, uint64_t src_off,
		   uint64_t dst, uint64_t dst_off, uint64_t len, const struct btrfs_timespec *now);

#endif /* UBTRFS_TRANS_FILE_W_H */
