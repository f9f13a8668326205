/*
 * fs layer: compression of file extents — zlib, LZO (btrfs framing) and zstd.
 *
 * Owns: the three stream formats as the kernel writes and reads them
 * (fs/btrfs/zlib.c, lzo.c, zstd.c are the reference for every rule below);
 * nothing about extents, trees or pages.  Callers hand in whole buffers.
 *
 * Invariants:
 *   - no read outside in[0, in_len) and no write outside out[0, out_len) /
 *     out[0, out_cap), whatever the input; every loop consumes input or ends;
 *   - on return (success or error) a decompressor has defined every byte of
 *     out: decoded bytes first, zeros after;
 *   - framing errors are -EUCLEAN (UBT_CORRUPT), codec rejections and
 *     truncated streams -EIO, both logged; nothing is printed to stdout.
 *
 * Kernel behaviour mirrored on read:
 *   zlib: the header must be a valid deflate header without a preset
 *     dictionary; the data is then inflated raw, so the Adler-32 trailer is
 *     never checked.  Decompression stops when out is full; a stream that
 *     ends early is zero-filled.
 *   zstd: the decoder's window is capped at 128 KiB; decoding stops at the
 *     end of the first frame (anything after it is ignored) or when out is
 *     full.
 *   LZO: the header's total length must not exceed min(128 KiB, in_len) and,
 *     rounded up to the sector, must cover in_len (every stored sector is
 *     used); a segment may hold at most lzo1x_worst_compress(sectorsize)
 *     bytes and decode to at most that many; segment outputs are
 *     concatenated.
 * Stricter than the kernel: a zstd frame cut short (input exhausted before
 * the frame ends and before out is full) is -EIO, as it is for zlib; the
 * kernel would zero-fill it.  More lenient: the kernel's inline LZO reader
 * also wants exactly one segment and a total equal to the inline size.
 *
 * On write the output is what the kernel reads, not byte-identical to what
 * it writes: zlib here deflates in one call (the kernel syncs-flushes per
 * page), zstd compresses in one call with the window capped at 128 KiB and
 * the content size recorded, LZO uses liblzo2's LZO1X-1 with the kernel's
 * exact framing and padding.
 *
 * Locks: none.  liblzo2 is initialised once through pthread_once.
 * SIMD/ISA notes: none needed; the codec libraries carry their own.
 */
#include "fs/compress.h"

#include "base/base.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lzo/lzo1x.h>
#define ZLIB_CONST
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

/* Bytes of the LZO total-length header and of each segment header. */
#define LZO_LEN 4
/* The kernel's lzo1x_worst_compress(): largest LZO1X output for x input. */
#define LZO_WORST(x) ((x) + (x) / 16 + 64 + 3 + 2)

/* zstd: the kernel's ZSTD_BTRFS_MAX_WINDOWLOG and level range. */
#define ZSTD_BTRFS_MAX_WINDOWLOG 17
#define ZSTD_BTRFS_DEFAULT_LEVEL 3
#define ZSTD_BTRFS_MIN_LEVEL -15
#define ZSTD_BTRFS_MAX_LEVEL 15
#define ZLIB_BTRFS_DEFAULT_LEVEL 3

const char *ubt_compress_name(int type)
{
	switch (type) {
	case BTRFS_COMPRESS_NONE:
		return "none";
	case BTRFS_COMPRESS_ZLIB:
		return "zlib";
	case BTRFS_COMPRESS_LZO:
		return "lzo";
	case BTRFS_COMPRESS_ZSTD:
		return "zstd";
	default:
		return "unknown";
	}
}

static bool sectorsize_ok(size_t sectorsize)
{
	return UBT_IS_POW2(sectorsize) && sectorsize >= 512 && sectorsize <= 65536;
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* ---- liblzo2 initialisation ------------------------------------------ */

static pthread_once_t lzo_once = PTHREAD_ONCE_INIT;
static int lzo_init_status;

static void lzo_init_once(void)
{
	lzo_init_status = lzo_init();
}

static int lzo_ready(void)
{
	pthread_once(&lzo_once, lzo_init_once);
	if (lzo_init_status != LZO_E_OK) {
		ubt_log(UBT_LOG_ERROR, "lzo: library initialisation failed (%d)", lzo_init_status);
		return -EIO;
	}
	return 0;
}

/* ---- zlib ------------------------------------------------------------ */

static int zlib_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
			   size_t *got)
{
	z_stream zs;
	int ret = 0, zret;
	bool inited = false;

	memset(&zs, 0, sizeof(zs));
	if (in_len > UINT_MAX || out_len > UINT_MAX)
		return -EINVAL;
	/*
	 * A valid zlib header (CM 8 = deflate, FCHECK, no FDICT, window <= 32K)
	 * is required; the kernel then inflates raw data after it, so a bad
	 * Adler-32 trailer goes unnoticed, and so it does here.
	 */
	if (in_len <= 2) {
		ubt_log(UBT_LOG_ERROR, "zlib: compressed data of %zu bytes is too short", in_len);
		return -EIO;
	}
	unsigned cmf = in[0], flg = in[1];
	if ((cmf & 0x0f) != Z_DEFLATED || ((cmf << 8) | flg) % 31 != 0 || (flg & 0x20) ||
	    (cmf >> 4) > 7) {
		ubt_log(UBT_LOG_ERROR, "zlib: bad stream header %02x %02x", cmf, flg);
		return -EIO;
	}
	zret = inflateInit2(&zs, -(int)((cmf >> 4) + 8));
	if (zret != Z_OK) {
		ret = zret == Z_MEM_ERROR ? -ENOMEM : -EIO;
		ubt_log(UBT_LOG_ERROR, "zlib: inflateInit2 failed (%d)", zret);
		goto out;
	}
	inited = true;
	zs.next_in = in + 2;
	zs.avail_in = (uInt)(in_len - 2);
	zs.next_out = out;
	zs.avail_out = (uInt)out_len;

	for (;;) {
		uLong before_in = zs.total_in, before_out = zs.total_out;

		zret = inflate(&zs, Z_NO_FLUSH);
		if (zret == Z_STREAM_END || zs.avail_out == 0)
			break;	/* the end, or all that was asked for */
		if (zret == Z_OK && (zs.total_in != before_in || zs.total_out != before_out))
			continue;
		if (zret == Z_MEM_ERROR) {
			ret = -ENOMEM;
		} else if (zret == Z_OK || zret == Z_BUF_ERROR) {
			/* No progress with output room left: the input ran out. */
			ubt_log(UBT_LOG_ERROR,
				"zlib: stream truncated after %lu of %zu bytes, %lu bytes out",
				zs.total_in + 2, in_len, zs.total_out);
			ret = -EIO;
		} else {
			ubt_log(UBT_LOG_ERROR, "zlib: inflate failed (%d: %s) at input byte %lu",
				zret, zs.msg ? zs.msg : "?", zs.total_in + 2);
			ret = -EIO;
		}
		break;
	}
out:
	*got = zs.total_out;
	if (inited)
		inflateEnd(&zs);
	return ret;
}

static int zlib_compress(int level, const uint8_t *in, size_t in_len, uint8_t *out,
			 size_t out_cap, size_t *out_len)
{
	z_stream zs;
	int ret = 0, zret;

	if (level == 0)
		level = ZLIB_BTRFS_DEFAULT_LEVEL;
	if (level < 1 || level > 9)
		return -EINVAL;
	if (out_cap > UINT_MAX)
		out_cap = UINT_MAX;
	memset(&zs, 0, sizeof(zs));
	/* What the kernel's zlib_deflateInit(level) sets up: 32K window, memLevel 8. */
	zret = deflateInit2(&zs, level, Z_DEFLATED, MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	if (zret != Z_OK)
		return zret == Z_MEM_ERROR ? -ENOMEM : -EIO;
	zs.next_in = in;
	zs.avail_in = (uInt)in_len;
	zs.next_out = out;
	zs.avail_out = (uInt)out_cap;
	zret = deflate(&zs, Z_FINISH);
	if (zret == Z_OK || zret == Z_BUF_ERROR) {
		ret = -E2BIG;	/* out of room before the end */
		goto out;
	}
	if (zret != Z_STREAM_END) {
		ubt_log(UBT_LOG_ERROR, "zlib: deflate failed (%d)", zret);
		ret = -EIO;
		goto out;
	}
	*out_len = zs.total_out;
out:
	deflateEnd(&zs);
	return ret;
}

/* ---- LZO (btrfs framing) --------------------------------------------- */

static int lzo_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
			  size_t sectorsize, size_t *got)
{
	const size_t seg_max = LZO_WORST(sectorsize);
	uint8_t *tmp = NULL;
	size_t cur, total, done = 0;
	int ret;

	*got = 0;
	ret = lzo_ready();
	if (ret)
		return ret;
	if (in_len < LZO_LEN)
		return UBT_CORRUPT(0, "lzo: compressed data of %zu bytes has no header", in_len);
	total = get_le32(in);
	if (total > UBT_MIN((size_t)UBT_MAX_COMPRESSED, in_len) ||
	    (uint64_t)(total + sectorsize - 1) / sectorsize * sectorsize < in_len)
		return UBT_CORRUPT(0, "lzo: header length %zu does not match compressed length %zu",
				   total, in_len);
	cur = LZO_LEN;

	while (cur < total && done < out_len) {
		size_t seg;
		lzo_uint dlen;
		uint8_t *dst;
		int lret;

		/* By construction a header never crosses a sector boundary. */
		if (total - cur < LZO_LEN) {
			ret = UBT_CORRUPT(0, "lzo: segment header at %zu runs past the end %zu", cur,
					  total);
			goto out;
		}
		seg = get_le32(in + cur);
		cur += LZO_LEN;
		if (seg > seg_max) {
			ret = UBT_CORRUPT(0, "lzo: segment at %zu is %zu bytes, more than %zu", cur,
					  seg, seg_max);
			goto out;
		}
		if (seg > total - cur) {
			ret = UBT_CORRUPT(0, "lzo: segment at %zu of %zu bytes runs past the end %zu",
					  cur, seg, total);
			goto out;
		}
		/* Decode in place when the rest of out can hold a worst case. */
		if (out_len - done >= seg_max) {
			dst = out + done;
		} else {
			if (!tmp) {
				tmp = malloc(seg_max);
				if (!tmp) {
					ret = -ENOMEM;
					goto out;
				}
			}
			dst = tmp;
		}
		dlen = seg_max;
		lret = lzo1x_decompress_safe(in + cur, seg, dst, &dlen, NULL);
		if (lret != LZO_E_OK) {
			ubt_log(UBT_LOG_ERROR, "lzo: segment at byte %zu (%zu bytes) failed to decompress (%d)",
				cur, seg, lret);
			ret = -EIO;
			goto out;
		}
		if (dst == tmp) {
			size_t n = UBT_MIN((size_t)dlen, out_len - done);
			memcpy(out + done, tmp, n);
			done += n;
		} else {
			done += dlen;
		}
		cur += seg;
		/* Fewer than LZO_LEN bytes left in this sector: padding. */
		size_t left = sectorsize - cur % sectorsize;
		if (left < LZO_LEN)
			cur += left;
	}
out:
	*got = done;
	free(tmp);
	return ret;
}

/* Append one segment (header + payload, then padding) at *pos. */
static int lzo_put_segment(uint8_t *out, size_t out_cap, size_t *pos, const uint8_t *seg,
			   size_t seg_len, size_t sectorsize)
{
	size_t cur = *pos;

	if (out_cap - cur < LZO_LEN + seg_len)
		return -E2BIG;
	put_le32(out + cur, (uint32_t)seg_len);
	cur += LZO_LEN;
	memcpy(out + cur, seg, seg_len);
	cur += seg_len;
	/* Keep the next header inside one sector, as the kernel does. */
	size_t left = sectorsize - cur % sectorsize;
	if (left < LZO_LEN) {
		if (out_cap - cur < left)
			return -E2BIG;
		memset(out + cur, 0, left);
		cur += left;
	}
	*pos = cur;
	return 0;
}

static int lzo_compress(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
			size_t sectorsize, size_t *out_len)
{
	uint8_t *wrk = NULL, *seg = NULL;
	size_t cur_in = 0, cur_out = LZO_LEN;
	int ret;

	ret = lzo_ready();
	if (ret)
		return ret;
	if (out_cap < LZO_LEN)
		return -E2BIG;
	wrk = malloc(LZO1X_1_MEM_COMPRESS);
	seg = malloc(LZO_WORST(sectorsize));
	if (!wrk || !seg) {
		ret = -ENOMEM;
		goto out;
	}
	while (cur_in < in_len) {
		/* One sector of input per segment. */
		size_t n = UBT_MIN(in_len - cur_in, sectorsize);
		lzo_uint seg_len = 0;
		int lret = lzo1x_1_compress(in + cur_in, n, seg, &seg_len, wrk);

		if (lret != LZO_E_OK) {
			ubt_log(UBT_LOG_ERROR, "lzo: compression failed (%d)", lret);
			ret = -EIO;
			goto out;
		}
		ret = lzo_put_segment(out, out_cap, &cur_out, seg, seg_len, sectorsize);
		if (ret)
			goto out;
		cur_in += n;
		/* The kernel gives up once past two sectors and growing. */
		if (cur_in > 2 * sectorsize && cur_in < cur_out) {
			ret = -E2BIG;
			goto out;
		}
	}
	put_le32(out, (uint32_t)cur_out);
	*out_len = cur_out;
out:
	free(wrk);
	free(seg);
	return ret;
}

/* ---- zstd ------------------------------------------------------------ */

static int zstd_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
			   size_t *got)
{
	ZSTD_DCtx *dctx;
	ZSTD_inBuffer ib = { in, in_len, 0 };
	ZSTD_outBuffer ob = { out, out_len, 0 };
	int ret = 0;

	*got = 0;
	dctx = ZSTD_createDCtx();
	if (!dctx)
		return -ENOMEM;
	size_t zr = ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, ZSTD_BTRFS_MAX_WINDOWLOG);
	if (ZSTD_isError(zr)) {
		ubt_log(UBT_LOG_ERROR, "zstd: cannot limit the window: %s", ZSTD_getErrorName(zr));
		ret = -EIO;
		goto out;
	}
	for (;;) {
		size_t before_in = ib.pos, before_out = ob.pos;

		zr = ZSTD_decompressStream(dctx, &ob, &ib);
		if (ZSTD_isError(zr)) {
			if (ZSTD_getErrorCode(zr) == ZSTD_error_memory_allocation)
				ret = -ENOMEM;
			else
				ret = -EIO;
			ubt_log(UBT_LOG_ERROR, "zstd: decompression failed at input byte %zu: %s",
				ib.pos, ZSTD_getErrorName(zr));
			break;
		}
		if (zr == 0 || ob.pos == ob.size)
			break;	/* end of the frame, or all that was asked for */
		if (ib.pos == ib.size || (ib.pos == before_in && ob.pos == before_out)) {
			ubt_log(UBT_LOG_ERROR,
				"zstd: frame truncated after %zu bytes, %zu bytes out", ib.pos,
				ob.pos);
			ret = -EIO;
			break;
		}
	}
out:
	*got = ob.pos;
	ZSTD_freeDCtx(dctx);
	return ret;
}

static int zstd_compress(int level, const uint8_t *in, size_t in_len, uint8_t *out,
			 size_t out_cap, size_t *out_len)
{
	ZSTD_CCtx *cctx;
	uint8_t *tmp = NULL;
	size_t zr;
	int ret = 0;

	if (level == 0)
		level = ZSTD_BTRFS_DEFAULT_LEVEL;
	if (level < ZSTD_BTRFS_MIN_LEVEL || level > ZSTD_BTRFS_MAX_LEVEL)
		return -EINVAL;
	cctx = ZSTD_createCCtx();
	if (!cctx)
		return -ENOMEM;
	/*
	 * The kernel takes the level's parameters for this input size and caps
	 * the window at 128 KiB; its decoder refuses anything larger.  No
	 * checksum; the content size is recorded (the kernel pledges it).
	 */
	zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	if (!ZSTD_isError(zr))
		zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, ZSTD_BTRFS_MAX_WINDOWLOG);
	if (!ZSTD_isError(zr))
		zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
	if (!ZSTD_isError(zr))
		zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	if (ZSTD_isError(zr)) {
		ubt_log(UBT_LOG_ERROR, "zstd: cannot set parameters: %s", ZSTD_getErrorName(zr));
		ret = -EIO;
		goto out;
	}
	zr = ZSTD_compress2(cctx, out, out_cap, in, in_len);
	if (ZSTD_isError(zr) && ZSTD_getErrorCode(zr) == ZSTD_error_dstSize_tooSmall &&
	    out_cap < ZSTD_compressBound(in_len)) {
		/*
		 * With less room than the bound zstd may give up although the
		 * frame would fit; make the result independent of the room.
		 */
		size_t bound = ZSTD_compressBound(in_len);
		tmp = malloc(bound);
		if (!tmp) {
			ret = -ENOMEM;
			goto out;
		}
		zr = ZSTD_compress2(cctx, tmp, bound, in, in_len);
		if (!ZSTD_isError(zr)) {
			if (zr > out_cap) {
				ret = -E2BIG;
				goto out;
			}
			memcpy(out, tmp, zr);
		}
	}
	if (ZSTD_isError(zr)) {
		if (ZSTD_getErrorCode(zr) == ZSTD_error_dstSize_tooSmall) {
			ret = -E2BIG;
		} else if (ZSTD_getErrorCode(zr) == ZSTD_error_memory_allocation) {
			ret = -ENOMEM;
		} else {
			ubt_log(UBT_LOG_ERROR, "zstd: compression failed: %s", ZSTD_getErrorName(zr));
			ret = -EIO;
		}
		goto out;
	}
	*out_len = zr;
out:
	free(tmp);
	ZSTD_freeCCtx(cctx);
	return ret;
}

/* ---- public entry points --------------------------------------------- */

int ubt_decompress(int type, const void *in, size_t in_len, void *out, size_t out_len,
		   size_t sectorsize, size_t *out_got)
{
	size_t got = 0;
	int ret;

	if (!out_got || (!in && in_len) || (!out && out_len))
		return -EINVAL;
	*out_got = 0;
	switch (type) {
	case BTRFS_COMPRESS_NONE:
		got = UBT_MIN(in_len, out_len);
		if (got)
			memcpy(out, in, got);
		ret = 0;
		break;
	case BTRFS_COMPRESS_ZLIB:
		ret = out_len ? zlib_decompress(in, in_len, out, out_len, &got) : 0;
		break;
	case BTRFS_COMPRESS_LZO:
		if (!sectorsize_ok(sectorsize))
			return -EINVAL;
		ret = out_len ? lzo_decompress(in, in_len, out, out_len, sectorsize, &got) : 0;
		break;
	case BTRFS_COMPRESS_ZSTD:
		ret = out_len ? zstd_decompress(in, in_len, out, out_len, &got) : 0;
		break;
	default:
		ubt_log(UBT_LOG_ERROR, "unknown compression type %d", type);
		return -EOPNOTSUPP;
	}
	if (got > out_len)	/* cannot happen; keep the zero-fill in bounds */
		got = out_len;
	if (got < out_len)
		memset((uint8_t *)out + got, 0, out_len - got);
	*out_got = got;
	return ret;
}

int ubt_decompress_range(int type, const void *in, size_t in_len, size_t sectorsize,
			 uint64_t skip, void *out, size_t out_len, size_t *out_got)
{
	uint8_t *tmp = NULL;
	size_t got = 0, whole;
	int ret;

	if (out_got)
		*out_got = 0;
	if ((!out && out_len) || skip > UBT_MAX_UNCOMPRESSED ||
	    out_len > UBT_MAX_UNCOMPRESSED - skip)
		return -EINVAL;
	if (skip == 0) {
		ret = ubt_decompress(type, in, in_len, out, out_len, sectorsize, &got);
		goto out;
	}
	whole = (size_t)skip + out_len;
	tmp = malloc(whole);
	if (!tmp) {
		ret = -ENOMEM;
		goto out;
	}
	ret = ubt_decompress(type, in, in_len, tmp, whole, sectorsize, &got);
	if (ret == -EINVAL || ret == -EOPNOTSUPP) {
		got = 0;
		goto out;
	}
	/* tmp is fully defined (decoded bytes, then zeros) even on error. */
	if (out_len)
		memcpy(out, tmp + skip, out_len);
	got = got > skip ? got - (size_t)skip : 0;
out:
	if (out_got)
		*out_got = got;
	free(tmp);
	return ret;
}

int ubt_compress(int type, int level, const void *in, size_t in_len, void *out, size_t out_cap,
		 size_t sectorsize, size_t *out_len)
{
	size_t len = 0;
	int ret;

	if (!out_len || !in || !out)
		return -EINVAL;
	*out_len = 0;
	if (in_len == 0 || in_len > UBT_MAX_UNCOMPRESSED)
		return -EINVAL;
	switch (type) {
	case BTRFS_COMPRESS_ZLIB:
		ret = zlib_compress(level, in, in_len, out, out_cap, &len);
		break;
	case BTRFS_COMPRESS_LZO:
		if (!sectorsize_ok(sectorsize))
			return -EINVAL;
		ret = lzo_compress(in, in_len, out, out_cap, sectorsize, &len);
		break;
	case BTRFS_COMPRESS_ZSTD:
		ret = zstd_compress(level, in, in_len, out, out_cap, &len);
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (ret)
		return ret;
	/* Not smaller than the input: the kernel stores it uncompressed. */
	if (len >= in_len)
		return -E2BIG;
	*out_len = len;
	return 0;
}

size_t ubt_compress_bound(int type, size_t in_len, size_t sectorsize)
{
	switch (type) {
	case BTRFS_COMPRESS_ZLIB:
		return compressBound((uLong)in_len) + 16;
	case BTRFS_COMPRESS_LZO: {
		if (!sectorsize_ok(sectorsize))
			return 0;
		size_t nseg = (in_len + sectorsize - 1) / sectorsize;
		/* Every segment: header, worst payload, up to 3 padding bytes. */
		return LZO_LEN + nseg * (LZO_LEN + LZO_WORST(sectorsize) + LZO_LEN - 1);
	}
	case BTRFS_COMPRESS_ZSTD:
		return ZSTD_compressBound(in_len);
	default:
		return 0;
	}
}
