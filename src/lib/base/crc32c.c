/*
 * base layer: CRC-32C.
 *
 * Owns the one CRC-32C routine of the library.  The function is the raw
 * update step (no inversions) so that callers can express both btrfs uses:
 * block checksums (~crc32c(~0, ...)) and name hashes (crc32c(~1, ...)).
 *
 * Dispatch: the first call picks the SSE4.2 (x86-64) or ARMv8 CRC32
 * instruction path when the CPU has it, otherwise a slice-by-8 table.  The
 * choice is made once under pthread_once and is immutable afterwards, so the
 * function is safe to call from any thread.
 */
#include "base.h"

#include <pthread.h>
#include <string.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static uint32_t (*crc_impl)(uint32_t, const uint8_t *, size_t);
static const char *crc_impl_name = "table";

static void crc_build_tables(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
		crc_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = crc_table[0][n];
		for (int t = 1; t < 8; t++) {
			c = crc_table[0][c & 0xff] ^ (c >> 8);
			crc_table[t][n] = c;
		}
	}
}

static uint32_t crc_slice8(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		/* Assemble little-endian words byte by byte: no alignment or
		 * endianness assumptions, and compilers fuse it into one load. */
		uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
			      (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
			      (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		lo ^= crc;
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define UBT_CRC_X86 1
/*
 * The CRC32 instruction takes three cycles before its result can feed the
 * next one but starts one per cycle, so a single chain runs at a third of
 * the speed.  Long buffers go in blocks of three stretches of STRIDE bytes,
 * three independent chains, joined after each block.  The update is linear
 * over GF(2): crc(c, X) = shift(c, |X|) ^ crc(0, X), where shift(c, n) is
 * the state c followed by n zero bytes.  So for a block A B C:
 * crc(c, ABC) = shift(shift(crc(c, A), STRIDE) ^ crc(0, B), STRIDE) ^ crc(0, C),
 * and shift by STRIDE, a fixed linear map of 32 bits, is four lookups in
 * tables made once (crc_shift_init).  4,080 bytes per block: a 4 KiB sector
 * is one block and 16 bytes, a 16 KiB tree block four.
 */
#define CRC_STRIDE 1360u
static uint32_t crc_shift_table[4][256];

__attribute__((target("sse4.2")))
static uint32_t crc_zeros_sse42(uint32_t c, size_t n)
{
	uint64_t x = c;

	for (size_t i = 0; i < n; i += 8)
		x = __builtin_ia32_crc32di(x, 0);
	return (uint32_t)x;
}

__attribute__((target("sse4.2")))
static void crc_shift_init(void)
{
	for (uint32_t t = 0; t < 4; t++)
		for (uint32_t b = 0; b < 256; b++)
			crc_shift_table[t][b] = crc_zeros_sse42(b << (8 * t), CRC_STRIDE);
}

static inline uint32_t crc_shift(uint32_t c)
{
	return crc_shift_table[0][c & 0xff] ^ crc_shift_table[1][(c >> 8) & 0xff] ^
	       crc_shift_table[2][(c >> 16) & 0xff] ^ crc_shift_table[3][c >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 3 * CRC_STRIDE) {
		uint64_t a = c, b = 0, d = 0;
		for (size_t i = 0; i < CRC_STRIDE; i += 8) {
			uint64_t va, vb, vd;
			memcpy(&va, p + i, 8);
			memcpy(&vb, p + CRC_STRIDE + i, 8);
			memcpy(&vd, p + 2 * CRC_STRIDE + i, 8);
			a = __builtin_ia32_crc32di(a, va);
			b = __builtin_ia32_crc32di(b, vb);
			d = __builtin_ia32_crc32di(d, vd);
		}
		c = crc_shift(crc_shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
		p += 3 * CRC_STRIDE;
		len -= 3 * CRC_STRIDE;
	}
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

#if defined(__aarch64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define UBT_CRC_ARM 1
__attribute__((target("+crc")))
static uint32_t crc_armv8(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = __builtin_aarch64_crc32cb(crc, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		crc = __builtin_aarch64_crc32cx(crc, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = __builtin_aarch64_crc32cb(crc, *p++);
	return crc;
}
#endif

static void crc_init(void)
{
	crc_build_tables();
	crc_impl = crc_slice8;
#ifdef UBT_CRC_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2")) {
		crc_shift_init();
		crc_impl = crc_sse42;
		crc_impl_name = "sse4.2";
	}
#endif
#ifdef UBT_CRC_ARM
	if (getauxval(AT_HWCAP) & HWCAP_CRC32) {
		crc_impl = crc_armv8;
		crc_impl_name = "armv8-crc";
	}
#endif
}

uint32_t ubt_crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return crc_impl(crc, data, len);
}

uint32_t ubt_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return crc_slice8(crc, data, len);
}

const char *ubt_crc32c_impl(void)
{
	pthread_once(&crc_once, crc_init);
	return crc_impl_name;
}

uint64_t ubt_name_hash(const void *name, size_t len)
{
	return ubt_crc32c(~(uint32_t)1, name, len);
}

uint64_t ubt_extref_hash(uint64_t parent_ino, const void *name, size_t len)
{
	/* The seed is the parent's objectid truncated to 32 bits. */
	return ubt_crc32c((uint32_t)parent_ino, name, len);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* crc32c of the little-endian root in the high half, of owner and offset in
 * the low half, overlapping by one bit. */
uint64_t ubt_extent_data_ref_hash(uint64_t root, uint64_t owner, uint64_t offset)
{
	uint8_t le[8];
	uint32_t high, low;

	put_le64(le, root);
	high = ubt_crc32c(~(uint32_t)0, le, sizeof(le));
	put_le64(le, owner);
	low = ubt_crc32c(~(uint32_t)0, le, sizeof(le));
	put_le64(le, offset);
	low = ubt_crc32c(low, le, sizeof(le));
	return ((uint64_t)high << 31) ^ (uint64_t)low;
}
