/*
 * volume layer: RAID5/RAID6 parity math over one row of a full stripe.
 *
 * A btrfs RAID5/6 full stripe is ndata data stripe elements, then P, then
 * (RAID6) Q, each BTRFS_STRIPE_LEN bytes on its own device; which device
 * holds which element rotates by one per full stripe (the chunk map's
 * concern, not this file's).  These functions see one row: `len` bytes at
 * the same offset of every element.
 *
 *   P = D_0 ^ D_1 ^ ... ^ D_{ndata-1}
 *   Q = g^0*D_0 ^ g^1*D_1 ^ ... ^ g^{ndata-1}*D_{ndata-1}
 * in GF(2^8) with polynomial x^8+x^4+x^3+x^2+1 (0x11d) and g = 2: the same
 * code as Linux's lib/raid6, which btrfs uses.
 *
 * Element indices used by the recover functions: 0..ndata-1 are the data
 * elements, ndata is P, ndata+1 is Q.  A lost element's buffer must still
 * be writable memory of `len` bytes: it receives the rebuilt contents.
 * ndata is 1..UBT_RAID6_MAX_DATA.  All functions are thread-safe.
 */
#ifndef UBTRFS_VOLUME_RAID56_H
#define UBTRFS_VOLUME_RAID56_H

#include <stddef.h>
#include <stdint.h>

/* g^i must be distinct for every data index: at most 255 data elements. */
#define UBT_RAID6_MAX_DATA 255

/* p = XOR of data[0..ndata-1] (RAID5 parity, also RAID6's P). */
void ubt_raid_gen_p(size_t ndata, size_t len, const uint8_t *const *data, uint8_t *p);

/* p and q of data[0..ndata-1] (RAID6 syndromes). */
void ubt_raid6_gen_pq(size_t ndata, size_t len, const uint8_t *const *data, uint8_t *p,
		      uint8_t *q);

/*
 * RAID5: rebuild element `missing` (a data index, or ndata for P) from the
 * others.  0, or -EINVAL for a bad index or ndata.
 */
int ubt_raid5_recover(size_t ndata, size_t len, uint8_t **data, uint8_t *p, int missing);

/*
 * RAID6: rebuild up to two lost elements, fail_a and fail_b (indices as
 * above; fail_b < 0 or == fail_a for a single loss): two data elements, data
 * and P, data and Q, P and Q, or any single one.  Every other element must
 * hold its correct contents (the unused parity is not read: for data + Q
 * the q buffer is only written).  0, or -EINVAL for bad indices or ndata.
 */
int ubt_raid6_recover(size_t ndata, size_t len, uint8_t **data, uint8_t *p, uint8_t *q,
		      int fail_a, int fail_b);

/* GF(2^8) helpers (0x11d), exposed for tests and callers doing partial math. */
uint8_t ubt_gf256_mul(uint8_t a, uint8_t b);
uint8_t ubt_gf256_inv(uint8_t a);	/* a != 0; inv(0) is 0 */
uint8_t ubt_gf256_pow2(unsigned e);	/* g^e, g = 2 */

#endif /* UBTRFS_VOLUME_RAID56_H */
