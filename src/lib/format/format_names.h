/* SPDX-License-Identifier: MIT */
/*
 * format_names.h - human-readable names for on-disk values, spelled exactly
 * as btrfs-progs 6.2 prints them (dump-super, dump-tree), so our output can
 * be diffed against progs output byte for byte.
 *
 * Layer: format.  Only libc; no allocation; never prints.  Functions that
 * fill a buffer always NUL-terminate it (when len > 0), truncate silently,
 * and return the length the full string would have (snprintf convention).
 */
#ifndef UBTRFS_FORMAT_FORMAT_NAMES_H
#define UBTRFS_FORMAT_FORMAT_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "format/btrfs_format.h"

/* ---- flag tables (superblock flags, compat_ro, incompat) ---------------- */

struct btrfs_flag_name {
	uint64_t bit;
	const char *name;
};

/*
 * A printable flag set.  `names` is in progs' print order (not bit order).
 * `supported` is the mask progs 6.2 treats as known: bits outside it are
 * reported as "unknown flag: 0x..".  A named bit may lie outside `supported`
 * (incompat EXTENT_TREE_V2) and a supported bit may have no name
 * (compat_ro VERITY) - both reproduce progs 6.2 exactly.
 */
struct btrfs_flag_table {
	const struct btrfs_flag_name *names;
	size_t count;
	uint64_t supported;
};

extern const struct btrfs_flag_table btrfs_super_flag_table;
extern const struct btrfs_flag_table btrfs_compat_ro_flag_table;
extern const struct btrfs_flag_table btrfs_incompat_flag_table;

/*
 * Names of the bits of @flags that @t names, in table order, into
 * out[0..max).  Returns how many names matched (may exceed @max).
 * *unknown (if non-NULL) receives flags & ~t->supported.
 */
size_t btrfs_flag_names(uint64_t flags, const struct btrfs_flag_table *t,
			const char **out, size_t max, uint64_t *unknown);

/*
 * The multi-line decode dump-super prints under a flags line, e.g.
 *   "\t\t\t( WRITTEN |\n\t\t\t  SEEDING )\n"
 * including the trailing newline; "" when flags == 0.  Reproduces the progs
 * 6.2 rule that a named-but-unsupported bit is omitted when it would be the
 * first entry.
 */
size_t btrfs_flag_list_str(uint64_t flags, const struct btrfs_flag_table *t,
			   char *buf, size_t len);

/* ---- checksums ----------------------------------------------------------- */

/* "crc32c", "xxhash64", "sha256", "blake2"; NULL if unknown (progs: INVALID). */
const char *btrfs_csum_type_name(uint16_t csum_type);

/* ---- keys ---------------------------------------------------------------- */

/* "INODE_ITEM", "CHUNK_ITEM", ...; NULL if the type has no name. */
const char *btrfs_key_type_name(uint8_t type);

/* Key type as dump-tree prints it: name, "UNTYPED" for the v1 free space
 * cache header key (FREE_SPACE_OBJECTID, 0), else "UNKNOWN.<type>". */
size_t btrfs_key_type_str(uint64_t objectid, uint8_t type, char *buf,
			  size_t len);

/*
 * Name of a well-known objectid in the context of key type @type (progs
 * print_objectid), or NULL when progs prints something else (a number, a
 * qgroup id or a uuid half).  Context rules: 1 is DEV_ITEMS with DEV_ITEM
 * keys and ROOT_TREE otherwise; 256 is FIRST_CHUNK_TREE only with CHUNK_ITEM
 * keys; 0 is DEV_STATS only with PERSISTENT_ITEM keys; DEV_EXTENT,
 * QGROUP_RELATION and UUID_KEY_* objectids are never named.
 * Pass type 0 for contexts without a key (header owner, backref roots).
 */
const char *btrfs_objectid_name(uint64_t objectid, uint8_t type);

/* Objectid exactly as dump-tree prints it (name, number, "-1",
 * "level/subvolid" or "0x%016llx"). */
size_t btrfs_objectid_str(uint64_t objectid, uint8_t type, char *buf,
			  size_t len);

/* A whole key as dump-tree prints it: "key (FS_TREE ROOT_ITEM 0)". */
size_t btrfs_key_str(const struct btrfs_key *key, char *buf, size_t len);

/* ---- item field values (dump-tree) --------------------------------------- */

/* Block group / chunk type as progs prints it: "DATA|single", "SYSTEM|DUP",
 * "DATA|METADATA|RAID1" (including progs' quirks: "METADATASYSTEM|single",
 * "|single" for no type bits).  64 bytes always suffice. */
void btrfs_bg_flags_str(uint64_t flags, char *buf, size_t len);

/* Profile name of block group flags: "RAID10", "RAID1", "RAID1C3", "RAID1C4",
 * "DUP", "RAID0", "RAID5", "RAID6" or "single" (first match in that order). */
const char *btrfs_bg_profile_name(uint64_t flags);

/* dir item type: "FILE", "DIR", ..., "XATTR"; NULL if unknown (progs prints
 * "DIR_ITEM.<n>"). */
const char *btrfs_dir_type_name(uint8_t type);

/* "none", "zlib", "lzo", "zstd"; NULL if unknown (progs: "UNKNOWN.<n>"). */
const char *btrfs_compress_type_name(uint8_t type);

/* "inline", "regular", "prealloc", else "unknown". */
const char *btrfs_file_extent_type_name(uint8_t type);

/* Inode flags "NODATASUM|NOCOMPRESS", "none" if none of the named bits. */
void btrfs_inode_flags_str(uint64_t flags, char *buf, size_t len);

/* Extent item flags: "DATA", "TREE_BLOCK", "TREE_BLOCK|FULL_BACKREF". */
void btrfs_extent_flags_str(uint64_t flags, char *buf, size_t len);

/* Tree block header flags (backref rev bits masked by the caller):
 * "WRITTEN", "RELOC", "WRITTEN|RELOC" or "". */
void btrfs_header_flags_str(uint64_t flags, char *buf, size_t len);

/* Root item flags: "RDONLY" or "none". */
const char *btrfs_root_flags_name(uint64_t flags);

/* Qgroup status flags: "ON|SCANNING|INCONSISTENT", "OFF", ... */
void btrfs_qgroup_status_flags_str(uint64_t flags, char *buf, size_t len);

#endif /* UBTRFS_FORMAT_FORMAT_NAMES_H */
