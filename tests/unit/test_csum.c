/*
 * unit: crc32c, the four checksum types and the btrfs name hashes on
 * published test vectors.  (Blocks of real images are checked in
 * test_super.c and by tests/compat/t-csum-images.sh.)
 */
#include "t.h"

#include "base/base.h"

static void test_crc32c_vectors(void)
{
	uint8_t buf[64];

	/* The CRC-32C check value. */
	CHECK_EQ_U64(~ubt_crc32c(~0u, "123456789", 9), 0xE3069283u);
	/* RFC 3720 (iSCSI) B.4 vectors, 32 bytes each. */
	memset(buf, 0, 32);
	CHECK_EQ_U64(~ubt_crc32c(~0u, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, 32);
	CHECK_EQ_U64(~ubt_crc32c(~0u, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	CHECK_EQ_U64(~ubt_crc32c(~0u, buf, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	CHECK_EQ_U64(~ubt_crc32c(~0u, buf, 32), 0x113FDB5Cu);
	/* Empty input leaves the seed unchanged. */
	CHECK_EQ_U64(ubt_crc32c(0x12345678u, buf, 0), 0x12345678u);
}

/* Hardware and table paths agree for every length and misalignment. */
static void test_crc32c_paths_agree(void)
{
	uint8_t data[16384 + 16];
	uint32_t x = 1;

	for (size_t i = 0; i < sizeof(data); i++) {
		x = x * 1103515245u + 12345u;
		data[i] = (uint8_t)(x >> 16);
	}
	int mismatches = 0;
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len < 300; len++)
			if (ubt_crc32c(~0u, data + off, len) != ubt_crc32c_sw(~0u, data + off, len))
				mismatches++;
	CHECK_EQ_INT(mismatches, 0);
	CHECK_EQ_U64(ubt_crc32c(~0u, data + 3, 4096), ubt_crc32c_sw(~0u, data + 3, 4096));
	/* Around the multiples of the three-stretch block of the hardware
	 * path (4,080 bytes), misaligned, and a whole tree block. */
	for (size_t off = 0; off < 9; off += 3)
		for (size_t len = 4000; len < 16384; len += 37)
			if (ubt_crc32c(~0u, data + off, len) != ubt_crc32c_sw(~0u, data + off, len))
				mismatches++;
	for (size_t len = 4070; len < 4090; len++)
		if (ubt_crc32c(0x1234u, data + 1, len) != ubt_crc32c_sw(0x1234u, data + 1, len))
			mismatches++;
	CHECK_EQ_INT(mismatches, 0);
	CHECK_EQ_U64(ubt_crc32c(~0u, data, 16384), ubt_crc32c_sw(~0u, data, 16384));
	/* Chaining: crc(a||b) == crc(crc(a), b). */
	CHECK_EQ_U64(ubt_crc32c(ubt_crc32c(~0u, data, 1000), data + 1000, 3096),
		     ubt_crc32c(~0u, data, 4096));
	printf("crc32c implementation: %s\n", ubt_crc32c_impl());
}

static void check_digest(unsigned type, const char *msg, const char *hex)
{
	uint8_t out[UBT_CSUM_MAX], want[UBT_CSUM_MAX] = { 0 };
	size_t n = strlen(hex) / 2;

	t_hex(hex, want, n);
	CHECK_EQ_INT(ubt_csum(type, msg, strlen(msg), out), 0);
	CHECK(n == ubt_csum_size(type));
	CHECK(memcmp(out, want, UBT_CSUM_MAX) == 0);
}

static void test_csum_types(void)
{
	CHECK_EQ_INT(ubt_csum_size(UBT_CSUM_CRC32C), 4);
	CHECK_EQ_INT(ubt_csum_size(UBT_CSUM_XXHASH64), 8);
	CHECK_EQ_INT(ubt_csum_size(UBT_CSUM_SHA256), 32);
	CHECK_EQ_INT(ubt_csum_size(UBT_CSUM_BLAKE2B), 32);
	CHECK_EQ_INT(ubt_csum_size(4), 0);
	CHECK(ubt_csum_name(4) == NULL);

	uint8_t out[UBT_CSUM_MAX];
	CHECK_EQ_INT(ubt_csum(7, "x", 1, out), -EINVAL);

	/* crc32c of "123456789" is 0xE3069283, stored little-endian. */
	check_digest(UBT_CSUM_CRC32C, "123456789", "839206e3");
	/* XXH64 with seed 0: "" = 0xEF46DB3751D8E999, "abc" = 0x44BC2CF5AD770999,
	 * stored little-endian. */
	check_digest(UBT_CSUM_XXHASH64, "", "99e9d85137db46ef");
	check_digest(UBT_CSUM_XXHASH64, "abc", "990977adf52cbc44");
	/* FIPS 180-2 SHA-256("abc"). */
	check_digest(UBT_CSUM_SHA256, "abc",
		     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* BLAKE2b with a 32-byte digest (RFC 7693 parameters). */
	check_digest(UBT_CSUM_BLAKE2B, "abc",
		     "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
	check_digest(UBT_CSUM_BLAKE2B, "",
		     "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
}

static void test_name_hashes(void)
{
	/* The root tree's DIR_ITEM for "default" has offset 2378154706 on
	 * every btrfs (visible in btrfs inspect-internal dump-tree -t root). */
	CHECK_EQ_U64(ubt_name_hash("default", 7), 2378154706u);
	/* Name hashes are 32-bit values in a 64-bit key offset. */
	CHECK(ubt_name_hash("a", 1) <= UINT32_MAX);
	CHECK_EQ_U64(ubt_name_hash("abc", 3), ubt_crc32c(~1u, "abc", 3));
	/* The extref hash seeds with the parent objectid, truncated to 32 bits. */
	CHECK_EQ_U64(ubt_extref_hash(256, "x", 1), ubt_crc32c(256, "x", 1));
	CHECK_EQ_U64(ubt_extref_hash(0x100000100ull, "x", 1), ubt_crc32c(0x100, "x", 1));
}

int main(void)
{
	test_crc32c_vectors();
	test_crc32c_paths_agree();
	test_csum_types();
	test_name_hashes();
	return t_finish();
}
