/*
 * trans layer: writing data checksums (the csum tree, tree 7).
 *
 * Each EXTENT_CSUM item, key (BTRFS_EXTENT_CSUM_OBJECTID,
 * BTRFS_EXTENT_CSUM_KEY, logical address of its first sector), holds the
 * checksums of consecutive data sectors, csum_size bytes each, in order.
 * Items never overlap.  Like the kernel, an item holds at most
 * ubt_csum_item_max() checksums (see there), so that an item always leaves
 * room in its leaf for another item header.
 *
 * All functions run inside a transaction (under the writer lock).  Errors:
 * -EINVAL bad arguments, -EEXIST (insert) a checksum of the range exists,
 * -ENOSPC no metadata space.  A failure before anything changed leaves the
 * transaction usable, and so does -ENOSPC (see each function); any other
 * failure after a change aborts it, as every engine error does.
 */
#ifndef UBTRFS_TRANS_CSUM_W_H
#define UBTRFS_TRANS_CSUM_W_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trans/trans.h"

/*
 * The most checksums one csum item holds, the kernel's MAX_CSUM_ITEMS
 * (fs/btrfs/file-item.c): (leaf data size - 2 item headers) / csum_size - 1,
 * but at most PAGE_SIZE (4096 on x86-64; a value of the kernel's machine
 * that the format does not record - the lower bound of every common page
 * size, so items never exceed what any kernel would write).
 */
uint32_t ubt_csum_item_max(uint32_t nodesize, uint32_t csum_size);

/*
 * Add the checksums of data sectors [bytenr, bytenr + nsect * sectorsize):
 * csums holds nsect checksums of fs->csum_size bytes.  The item that ends
 * exactly at bytenr is extended while it is below the maximum; the rest
 * goes into new items of at most the maximum each.  bytenr must be
 * sector-aligned.  -EEXIST (nothing changed) if any sector of the range
 * already has a checksum: the caller freed the old data's checksums first,
 * or this is a bug.  nsect 0 does nothing.  All or nothing: on -ENOSPC what
 * went in is taken out again.
 */
int ubt_csum_insert(struct ubt_trans *t, uint64_t bytenr, const uint8_t *csums, size_t nsect);

/*
 * ubt_csum_insert for the checksums of newly allocated data (no checksum of
 * the range can exist): they are held back as one run of consecutive
 * sectors ("the held run" in csum_w.c) and go into the tree later - no
 * -EEXIST check now, and a failure then aborts the transaction.  Readers
 * of checksums see the run through fs->held_csums.  ubt_csum_held: does
 * the run hold a checksum of a sector of [start, start + len)?
 * ubt_csum_flush: insert the run now (the commit does, first thing, and so
 * do ubt_csum_insert and ubt_csum_delete of an overlapping range); a
 * failure aborts the transaction.
 */
int ubt_csum_insert_held(struct ubt_trans *t, uint64_t bytenr, const uint8_t *csums,
			 size_t nsect);
bool ubt_csum_held(const struct ubt_trans *t, uint64_t start, uint64_t len);
int ubt_csum_flush(struct ubt_trans *t);

/*
 * Remove every checksum of [bytenr, bytenr + len) (sector-aligned): items
 * inside are deleted, an item that starts before the range loses its end,
 * one that ends after it loses its front (its key moves to bytenr + len),
 * and one that covers the range with room on both sides is split in two.
 * Sectors without checksums are fine (nothing to do).  Space: a delete
 * needs new blocks (copy on write) and the blocks it frees return only at
 * the commit, so a large delete on a full filesystem can fail with -ENOSPC
 * after part of the range lost its checksums; the tree is well-formed and
 * the transaction usable - commit and call again for the same range.
 */
int ubt_csum_delete(struct ubt_trans *t, uint64_t bytenr, uint64_t len);

/*
 * The checksums of `len` bytes of data (a multiple of fs->sectorsize), one
 * per sector, into out (len / sectorsize * fs->csum_size bytes), with the
 * filesystem's checksum type.
 */
int ubt_csum_data(struct ubt_fs *fs, const void *data, size_t len, uint8_t *out);

#endif /* UBTRFS_TRANS_CSUM_W_H */
