/*
 * base layer: the checksum interface.
 *
 * One entry point, ubt_csum(), selected by the superblock's csum_type.  The
 * algorithms come from system libraries (libxxhash, libb2, OpenSSL
 * libcrypto) and our own crc32c; nothing is vendored.  All functions are
 * stateless and thread-safe.
 */
#include "base.h"

#include <string.h>

#include <blake2.h>
#include <openssl/evp.h>
#include <xxhash.h>

struct csum_desc {
	const char *name;
	size_t size;
};

static const struct csum_desc csum_descs[] = {
	[UBT_CSUM_CRC32C] = { "crc32c", 4 },
	[UBT_CSUM_XXHASH64] = { "xxhash64", 8 },
	[UBT_CSUM_SHA256] = { "sha256", 32 },
	[UBT_CSUM_BLAKE2B] = { "blake2b", 32 },
};

size_t ubt_csum_size(unsigned type)
{
	return type < UBT_ARRAY_SIZE(csum_descs) ? csum_descs[type].size : 0;
}

const char *ubt_csum_name(unsigned type)
{
	return type < UBT_ARRAY_SIZE(csum_descs) ? csum_descs[type].name : NULL;
}

static int csum_sha256(const void *data, size_t len, uint8_t *out)
{
	unsigned int outlen = 32;

	/* EVP_Digest is the one-shot interface of OpenSSL 1.1 and 3.x. */
	if (!EVP_Digest(data, len, out, &outlen, EVP_sha256(), NULL) || outlen != 32)
		return -ENOMEM;
	return 0;
}

int ubt_csum(unsigned type, const void *data, size_t len, uint8_t out[UBT_CSUM_MAX])
{
	memset(out, 0, UBT_CSUM_MAX);
	switch (type) {
	case UBT_CSUM_CRC32C: {
		uint32_t crc = ~ubt_crc32c(~(uint32_t)0, data, len);
		/* stored little-endian */
		out[0] = (uint8_t)crc;
		out[1] = (uint8_t)(crc >> 8);
		out[2] = (uint8_t)(crc >> 16);
		out[3] = (uint8_t)(crc >> 24);
		return 0;
	}
	case UBT_CSUM_XXHASH64: {
		uint64_t h = XXH64(data, len, 0);
		for (int i = 0; i < 8; i++)
			out[i] = (uint8_t)(h >> (8 * i));
		return 0;
	}
	case UBT_CSUM_SHA256:
		return csum_sha256(data, len, out);
	case UBT_CSUM_BLAKE2B:
		/* BLAKE2b with a 256-bit digest and no key; libb2's argument
		 * order is (out, in, key, outlen, inlen, keylen). */
		if (blake2b(out, data, NULL, 32, len, 0) != 0)
			return -ENOMEM;
		return 0;
	default:
		return -EINVAL;
	}
}
