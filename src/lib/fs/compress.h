/*
 * fs layer: compressed file extents (zlib, LZO, zstd) in the exact on-disk
 * formats the Linux kernel reads and writes.
 *
 * A compressed extent is compressed as one unit: a regular extent stores
 * disk_num_bytes bytes (the compressed stream, zero padded to the sector
 * size) that expand to ram_bytes (at most 128 KiB); an inline extent stores
 * the stream in the leaf, after the 21-byte file extent item header.  The
 * formats are:
 *
 *   zlib  one zlib stream (RFC 1950 header + deflate); the Adler-32 trailer is
 *         not checked on read, as the kernel does not check it.
 *   zstd  one zstd frame, window at most 128 KiB (the kernel refuses larger
 *         windows); the frame may or may not carry its content size.
 *   LZO   btrfs framing around LZO1X: a 4-byte LE total length (including
 *         itself), then segments, each a 4-byte LE compressed length and the
 *         LZO1X data of at most one sector of output; a segment header never
 *         crosses a sector boundary (1..3 padding bytes skip to the next
 *         sector), so the layout depends on the filesystem's sector size.
 *
 * Nothing here allocates more than a few hundred KiB or keeps state between
 * calls; every function is thread-safe.
 */
#ifndef UBTRFS_FS_COMPRESS_H
#define UBTRFS_FS_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "format/btrfs_format.h"	/* BTRFS_COMPRESS_* */

/* Largest decompressed size of one compressed extent (BTRFS_MAX_UNCOMPRESSED). */
#define UBT_MAX_UNCOMPRESSED (128u * 1024)
/* Largest compressed size of one compressed extent (BTRFS_MAX_COMPRESSED). */
#define UBT_MAX_COMPRESSED (128u * 1024)

/* "zlib", "lzo", "zstd", "none", or "unknown". */
const char *ubt_compress_name(int type);

/*
 * Decompress one compressed extent.
 *
 * in/in_len: the extent's whole stored bytes — disk_num_bytes of a regular
 * extent (zero padding or garbage after the stream is fine), or the inline
 * data of an inline extent.  sectorsize: the filesystem's sector size; only
 * LZO depends on it (it must be a power of two in 512..65536), the others
 * ignore it.  out/out_len: room for the first out_len bytes of the expanded
 * data (normally ram_bytes; less is fine — decompression stops there).
 *
 * Returns 0 with *out_got = bytes of real output (<= out_len); when the
 * stream ends before out_len, out[*out_got .. out_len) is zero-filled, as the
 * kernel zero-fills short decompression.  On error out is fully defined too
 * (whatever decoded, then zeros) and *out_got says how much decoded:
 *   -EUCLEAN  LZO framing is inconsistent (logged as corruption);
 *   -EIO      the codec rejected the data, or the stream was cut short
 *             before out_len bytes and without its end marker (logged);
 *   -EOPNOTSUPP unknown type; -EINVAL bad arguments; -ENOMEM.
 * BTRFS_COMPRESS_NONE copies min(in_len, out_len) bytes.  Hostile input never
 * makes it read or write out of bounds or loop without progress.
 */
int ubt_decompress(int type, const void *in, size_t in_len, void *out, size_t out_len,
		   size_t sectorsize, size_t *out_got);

/*
 * Bytes [skip, skip + out_len) of the decompressed extent, for file extent
 * items that reference part of a compressed extent (their `offset`).
 * skip + out_len must not exceed UBT_MAX_UNCOMPRESSED (-EINVAL otherwise).
 * Same errors and zero-filling as ubt_decompress(); out_got may be NULL.
 */
int ubt_decompress_range(int type, const void *in, size_t in_len, size_t sectorsize,
			 uint64_t skip, void *out, size_t out_len, size_t *out_got);

/*
 * Compress in_len (1..UBT_MAX_UNCOMPRESSED) bytes into the format above, in
 * a form the kernel reads back.  level: 0 = the kernel's default (zlib 3,
 * zstd 3); zlib 1..9, zstd -15..15, LZO has one level (ignored).  sectorsize
 * as for ubt_decompress() (LZO only).  *out_len = compressed bytes written.
 *
 * -E2BIG when the result is not smaller than the input or does not fit in
 * out_cap: store the data uncompressed then (the kernel's write path further
 * wants a regular extent to save at least one sector: see
 * ubt_compress_worthwhile()).  -EINVAL bad arguments or level, -EOPNOTSUPP
 * unknown type (including NONE), -ENOMEM, -EIO library failure.
 *
 * A regular extent stores the result zero-padded to the sector size.  An
 * inline LZO extent must be a single segment with no trailing padding (the
 * kernel's inline reader wants total == 8 + segment length == item data
 * size): that holds when in_len <= sectorsize and *out_len equals 8 plus the
 * segment length stored at byte 4; otherwise do not inline it.
 */
int ubt_compress(int type, int level, const void *in, size_t in_len, void *out, size_t out_cap,
		 size_t sectorsize, size_t *out_len);

/*
 * Worst-case compressed size of in_len bytes (a safe out_cap for
 * ubt_compress(); with a smaller out_cap it may fail with -E2BIG), or 0 for
 * an unknown type or a bad sectorsize.
 */
size_t ubt_compress_bound(int type, size_t in_len, size_t sectorsize);

/*
 * The kernel's rule for keeping a compressed regular extent
 * (compress_file_range): the compressed size plus one sector must not
 * exceed the input rounded up to the sector size.  Inline extents are not
 * held to it.
 */
static inline int ubt_compress_worthwhile(size_t in_len, size_t comp_len, size_t sectorsize)
{
	size_t in_round = (in_len + sectorsize - 1) / sectorsize * sectorsize;
	return comp_len + sectorsize <= in_round;
}

#endif /* UBTRFS_FS_COMPRESS_H */
