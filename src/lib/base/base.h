/*
 * base layer: errors, logging, checksums and hashes.
 *
 * The bottom of libubtrfs (format sits beside it and needs nothing).  Nothing
 * here knows about btrfs trees; every other layer may include this header.
 *
 * Conventions kept throughout the library:
 *   - functions return 0 or a negative errno; results go through out-params;
 *   - corruption is reported with UBT_CORRUPT(), which logs where it was found
 *     and evaluates to -EUCLEAN; it is never an assert();
 *   - the library never writes to stdout and never calls exit().
 */
#ifndef UBTRFS_BASE_H
#define UBTRFS_BASE_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* EUCLEAN ("structure needs cleaning") is Linux-only; keep the value portable. */
#ifndef EUCLEAN
#define EUCLEAN 117
#endif

/* qsort for arrays that may be empty (and NULL then): qsort's pointer must
 * never be NULL, even for no elements. */
static inline void ubt_sort(void *base, size_t n, size_t size,
			    int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

#define UBT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define UBT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define UBT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define UBT_IS_POW2(x) ((x) != 0 && (((x) & ((x) - 1)) == 0))
#define UBT_IS_ALIGNED(x, a) (((x) & ((a) - 1)) == 0)
#define UBT_ALIGN_UP(x, a) (((x) + (a) - 1) & ~((a) - 1))

#if defined(__GNUC__)
#define UBT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define UBT_PRINTF(f, a)
#endif

/* The mixer of every hash table keyed by addresses or inode numbers
 * (splitmix64's finalizer: each input bit reaches every output bit, so
 * the low bits serve as a power-of-two table's index).  Pairs combine as
 * ubt_mix64(a ^ ubt_mix64(b)). */
static inline uint64_t ubt_mix64(uint64_t v)
{
	v ^= v >> 30;
	v *= 0xbf58476d1ce4e5b9ULL;
	v ^= v >> 27;
	v *= 0x94d049bb133111ebULL;
	return v ^ (v >> 31);
}

/* ---- logging ---------------------------------------------------------- */

enum ubt_log_level {
	UBT_LOG_ERROR = 0,
	UBT_LOG_WARNING = 1,
	UBT_LOG_INFO = 2,
	UBT_LOG_DEBUG = 3,
};

typedef void (*ubt_log_fn)(void *ctx, int level, const char *msg);

/* Route library messages; NULL restores the default (stderr, "ubtrfs: "). */
void ubt_log_set_handler(ubt_log_fn fn, void *ctx);
void ubt_log_set_level(int max_level);
void ubt_log(int level, const char *fmt, ...) UBT_PRINTF(2, 3);
/*
 * While a thread has demotion on (nested), its errors are logged as
 * warnings: for trying one copy of several, where a failure is only an
 * error once every copy failed.
 */
void ubt_log_demote_begin(void);
void ubt_log_demote_end(void);
void ubt_logv(int level, const char *fmt, va_list ap);

/*
 * Report corruption found at byte address `where` (a logical address, a device
 * offset or 0 when there is none) and evaluate to -EUCLEAN.  The message names
 * the source line so a report can be traced to the check that failed.
 */
int ubt_corrupt_at(const char *file, int line, uint64_t where, const char *fmt, ...)
	UBT_PRINTF(4, 5);
#define UBT_CORRUPT(where, ...) ubt_corrupt_at(__FILE__, __LINE__, (where), __VA_ARGS__)

/* A uuid in the canonical 36-character form (buf holds 37 bytes). */
void ubt_uuid_str(const uint8_t *uuid, char *buf);
/* len random bytes (/dev/urandom); 0 or -errno. */
int ubt_random_bytes(uint8_t *buf, size_t len);
/* Mark 16 bytes as a version 4 (random) uuid. */
void ubt_uuid_v4(uint8_t *u);
/* A new random (version 4) uuid; 0 or -errno. */
int ubt_uuid_random(uint8_t *u);

/* strerror for our negative errnos, thread-safe, never NULL. */
const char *ubt_strerror(int err);

/* ---- crc32c ----------------------------------------------------------- */

/*
 * Raw CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) update: no pre- or
 * post-inversion, exactly like the kernel's crc32c(seed, data, len).  btrfs
 * block checksums are ~ubt_crc32c(~0, data, len); names hash with seed ~1.
 * Uses SSE4.2 or ARMv8 CRC instructions when the CPU has them.
 */
uint32_t ubt_crc32c(uint32_t crc, const void *data, size_t len);
/* The portable table implementation, for tests and odd CPUs. */
uint32_t ubt_crc32c_sw(uint32_t crc, const void *data, size_t len);
/* Name of the implementation ubt_crc32c() dispatches to ("sse4.2", ...). */
const char *ubt_crc32c_impl(void);

/* ---- checksum interface ---------------------------------------------- */

#define UBT_CSUM_MAX 32

/* On-disk csum_type values (btrfs superblock). */
enum ubt_csum_type {
	UBT_CSUM_CRC32C = 0,
	UBT_CSUM_XXHASH64 = 1,
	UBT_CSUM_SHA256 = 2,
	UBT_CSUM_BLAKE2B = 3,
};

/* Bytes of checksum the type stores (4, 8, 32, 32), 0 for unknown types. */
size_t ubt_csum_size(unsigned type);
/* The name btrfs-progs prints ("crc32c", "xxhash64", "sha256", "blake2b"). */
const char *ubt_csum_name(unsigned type);
/*
 * Compute the checksum of `len` bytes into out[UBT_CSUM_MAX]: the first
 * ubt_csum_size(type) bytes are the on-disk checksum, the rest are zeroed.
 * Returns 0 or -EINVAL for an unknown type, -ENOMEM if a crypto library fails.
 */
int ubt_csum(unsigned type, const void *data, size_t len, uint8_t out[UBT_CSUM_MAX]);

/*
 * Ask the CPU to start loading [p, p + len) into its caches (a hint: no
 * fault, no effect on results).  The hardware prefetcher stops at page
 * boundaries, so a loop checksumming page after page from memory waits
 * for each new page's first lines; hinting the next page while summing
 * this one halved crc32c's time per GiB from memory (0.19 -> 0.09 s).
 */
static inline void ubt_prefetch(const void *p, size_t len)
{
#if defined(__GNUC__) || defined(__clang__)
	for (size_t i = 0; i < len; i += 64)
		__builtin_prefetch((const char *)p + i);
#else
	(void)p;
	(void)len;
#endif
}

/* ---- btrfs name hashes ------------------------------------------------ */

/* DIR_ITEM key offset and xattr key offset: crc32c(~1, name). */
uint64_t ubt_name_hash(const void *name, size_t len);
/* INODE_EXTREF key offset: crc32c(parent_objectid, name), 64-bit result. */
uint64_t ubt_extref_hash(uint64_t parent_ino, const void *name, size_t len);
/* Order key of an EXTENT_DATA_REF among inline refs, and the key offset of a
 * keyed one (before collision probing). */
uint64_t ubt_extent_data_ref_hash(uint64_t root, uint64_t owner, uint64_t offset);

#endif /* UBTRFS_BASE_H */
