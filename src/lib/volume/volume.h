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

/* ---- the device set and the chunk map -------------------------------- */

struct ubt_device {
	uint64_t devid;
	uint8_t uuid[BTRFS_UUID_SIZE];
	struct ubt_bdev *bd;	/* NULL while the device is missing */
	char *path;		/* NULL while missing */
	uint64_t total_bytes;	/* from the superblock or DEV_ITEM */
	uint64_t generation;	/* of the superblock read from it */
	bool in_dev_tree;	/* a DEV_ITEM of the chunk tree names it */
};

struct ubt_stripe_map {
	uint64_t devid;
	uint64_t physical;	/* where the chunk's stripe starts on the device */
	struct ubt_device *dev;	/* NULL when missing */
};

struct ubt_chunk {
	uint64_t start, length, type, stripe_len;
	uint16_t num_stripes, sub_stripes;
	struct ubt_stripe_map stripes[];
};

struct ubt_volume_opts {
	bool degraded;		/* allow missing devices where the profiles allow */
	bool writable;		/* open devices read-write */
	bool lock_shared;	/* read-only: keep writers out (UBT_BDEV_LOCK_SHARED) */
};

/*
 * The devices of one filesystem and the logical-to-physical map.
 * Immutable after ubt_volume_finish() until the write engine adds chunks, so
 * readers need no lock.
 */
struct ubt_volume {
	struct btrfs_super_block super;	/* newest valid copy over all devices */
	uint8_t fsid[BTRFS_FSID_SIZE];
	uint8_t metadata_uuid[BTRFS_FSID_SIZE];
	uint32_t sectorsize, nodesize, csum_size;
	uint16_t csum_type;
	struct ubt_volume_opts opts;

	struct ubt_device *devices;	/* sorted by devid */
	size_t ndevices, devices_cap;

	struct ubt_chunk **chunks;	/* sorted by start, non-overlapping */
	size_t nchunks, chunks_cap;
};

/*
 * Open every path, read each one's newest valid superblock, require them to
 * belong to one filesystem (a foreign or duplicate device is an error naming
 * it), and map the system chunks from the superblock's array.  The chunk
 * tree is loaded afterwards by the caller (it needs the tree layer) through
 * ubt_volume_add_chunk()/ubt_volume_add_dev_item(), then ubt_volume_finish().
 */
int ubt_volume_open(const char *const *paths, size_t npaths, const struct ubt_volume_opts *opts,
		    struct ubt_volume **out);
void ubt_volume_close(struct ubt_volume *vol);
/* Map the chunks of vol->super's system chunk array (done by open; exposed
 * for the fuzz harness). */
int ubt_volume_load_sys_array(struct ubt_volume *vol);

/* Validate and add one CHUNK_ITEM (logical start = key offset).  Duplicate
 * chunks identical to an existing one (system chunks) are accepted once. */
int ubt_volume_add_chunk(struct ubt_volume *vol, uint64_t logical, const struct btrfs_chunk *chunk,
			 uint32_t item_size);
/* Record a DEV_ITEM of the chunk tree. */
int ubt_volume_add_dev_item(struct ubt_volume *vol, const struct btrfs_dev_item *item);
/*
 * After the chunk tree: every chunk's stripes are bound to devices; fail with
 * a message naming the missing devices unless every chunk stays readable and
 * `degraded` was asked for.
 */
int ubt_volume_finish(struct ubt_volume *vol);

const struct ubt_chunk *ubt_volume_find_chunk(const struct ubt_volume *vol, uint64_t logical);
/* How many independent ways `logical` can be read (copies, or parity rebuilds). */
int ubt_volume_num_copies(const struct ubt_volume *vol, uint64_t logical);
/*
 * Read `len` bytes at `logical` using copy `mirror` (1..num_copies).  For
 * RAID5/6, mirror 1 reads the data stripe, 2 rebuilds it from P, 3 from Q.
 * The range may span stripes and chunks.  -ENXIO when that copy needs a
 * missing device (quietly: degraded mode expects it), -EIO on an I/O error,
 * -EUCLEAN for an unmapped address.
 * Checksums are the caller's business.
 */
int ubt_volume_read(struct ubt_volume *vol, uint64_t logical, void *buf, size_t len, int mirror);

/*
 * Write len bytes at `logical` to every copy (SINGLE, DUP, RAID1*, RAID0,
 * RAID10); RAID5/6 refuse with -EOPNOTSUPP, a missing device with -EIO.
 */
int ubt_volume_write(struct ubt_volume *vol, uint64_t logical, const void *buf, size_t len);

/*
 * Where copy `mirror` of [logical, logical + len) lies in a mapped device
 * (struct ubt_bdev.map): returns how many bytes from `logical` on are
 * contiguous there (<= len) and sets *out; 0 when that copy cannot be mapped
 * (device missing or without a mapping, parity rebuild, unmapped address).
 * The bytes are raw: the caller verifies them as it would a read.
 */
size_t ubt_volume_map(struct ubt_volume *vol, uint64_t logical, size_t len, int mirror,
		      const uint8_t **out);

/*
 * Advice: copy 1 of [logical, logical + len) will be read soon; the parts
 * ubt_volume_map can serve are asked for from their devices' mappings
 * (ubt_map_willneed), through the chunks that follow without a gap.  Stops
 * at the first part it cannot map (a gap between chunks, RAID5/6, a device
 * without a mapping, writes a file device still gathers).
 */
void ubt_volume_willneed(struct ubt_volume *vol, uint64_t logical, uint64_t len);

/*
 * Advice: copy 1 of [logical, logical + len) (what ubt_volume_map serves)
 * will not be read again soon; its devices may drop it from the host's
 * page cache (ubt_bdev_drop_cached) in aligned 2 MiB blocks of each
 * device, which may reach up to 2 MiB before a piece (within its stripe).
 * Returns how far it got: the bytes from there to logical + len are left
 * for a later call that continues the range.  Unmapped and RAID5/6 pieces
 * are skipped.  In RAID0/RAID10 chunks a piece is one stripe element
 * (64 KiB): only one that ends on a 2 MiB boundary of its device drops
 * the block it ends, which holds the elements before it there.
 */
uint64_t ubt_volume_drop_cached(struct ubt_volume *vol, uint64_t logical, uint64_t len);

/*
 * Where copy `mirror` of `logical` lives, for messages: "devid 2 (/dev/x)
 * physical 123456", or a note about parity rebuilds / missing devices.
 */
void ubt_volume_describe(const struct ubt_volume *vol, uint64_t logical, int mirror, char *buf,
			 size_t len);

/* Profile name for messages: "single", "DUP", "RAID1", ... */
const char *ubt_profile_name(uint64_t type);

#endif /* UBTRFS_VOLUME_H */
