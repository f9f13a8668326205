/*
 * volume layer: superblocks (read, validate, choose, write), and later the
 * device set, the chunk map and RAID math.
 *
 * Sits on io (devices) and format (structures); below tree.
 */
#ifndef UBTRFS_VOLUME_H
#define UBTRFS_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/btrfs_format.h"
#include "io/io.h"

/* Room for a one-line reason why a superblock copy was rejected. */
#define UBT_SUPER_WHY_LEN 160

/*
 * Validate a superblock copy read from byte offset `bytenr`: magic, checksum
 * type and checksum, bytenr, every size, level and alignment rule the
 * kernel and btrfs-progs apply.  Returns 0, or -EUCLEAN with `why` filled.
 */
int ubt_super_validate(const struct btrfs_super_block *sb, uint64_t bytenr, char *why,
		       size_t whylen);

/* True when the stored checksum matches the contents. */
bool ubt_super_csum_matches(const struct btrfs_super_block *sb);
/* Recompute and store the checksum (before writing a modified copy). */
int ubt_super_update_csum(struct btrfs_super_block *sb);

/*
 * Read copy `copy` (0..2) of the superblock.  -ENOENT when it lies past the
 * end of the device, -EIO on a read error.  No validation.
 */
int ubt_super_read_raw(struct ubt_bdev *bd, int copy, struct btrfs_super_block *out);

/*
 * Read every copy that fits on the device, validate each, and return the
 * newest valid one (highest generation) among those of the same filesystem
 * as the first valid copy.  A copy that fails validation is logged with the
 * reason and skipped.  -EUCLEAN when no copy is valid.
 */
int ubt_super_read_best(struct ubt_bdev *bd, struct btrfs_super_block *out, int *copy_out);

/* ---- feature policy (ext2/3/4 discipline) ---------------------------- */

/* Feature bits, per class, that a library build can read and write. */
struct ubt_feature_policy {
	uint64_t compat_ro_write;	/* compat_ro bits we can keep consistent */
	uint64_t incompat_read;		/* incompat bits whose structures we read */
	uint64_t incompat_write;	/* incompat bits whose structures we write */
};

/* Bits the format defines (known by name), for reports. */
extern const uint64_t ubt_compat_known, ubt_compat_ro_known, ubt_incompat_known;
/* What this build supports. */
extern const struct ubt_feature_policy ubt_feature_policy_current;

struct btrfs_flag_table;
/* The name of one feature bit in a table of format_names, or NULL. */
const char *ubt_feature_bit_name(const struct btrfs_flag_table *table, uint64_t bit);

/*
 * May this superblock be opened (read-write when `rw`) under `policy`?  An
 * incompat bit we cannot read refuses (-EOPNOTSUPP); a compat_ro or incompat
 * bit we cannot write refuses read-write (-EROFS) but allows read-only.
 * Unknown compat bits never restrict, as their definition allows.  The log
 * names the feature (unknown bits first).
 */
int ubt_super_check_features(const struct btrfs_super_block *sb, bool rw,
			     const struct ubt_feature_policy *policy, const char *devname);

/* ---- printing (dump-super) -------------------------------------------- */

typedef void (*ubt_write_fn)(void *ctx, const char *text, size_t len);

/* Print one copy in the layout of btrfs inspect-internal dump-super. */
void ubt_super_print(const struct btrfs_super_block *sb, bool full, ubt_write_fn write,
		     void *ctx);

#endif /* UBTRFS_VOLUME_H */
