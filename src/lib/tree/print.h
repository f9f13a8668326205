/*
 * tree layer: printing one tree block (leaf or node) exactly as
 * `btrfs inspect-internal dump-tree` of btrfs-progs 6.2 prints it, so the
 * two outputs can be diffed line by line.
 *
 * Works on a raw block of ctx->nodesize bytes; needs no volume, cache or
 * filesystem handle.  Never reads outside the block: a block the tree checker
 * would reject still prints (fields past the block end read as zero), and an
 * item pointer outside the leaf ends the listing with an error line.
 * Text goes to the caller's writer; nothing here touches stdout.
 */
#ifndef UBTRFS_TREE_PRINT_H
#define UBTRFS_TREE_PRINT_H

#include <stddef.h>
#include <stdint.h>

#include "format/btrfs_format.h"

/* Same type as in volume/volume.h (a repeated identical typedef is valid C11). */
typedef void (*ubt_write_fn)(void *ctx, const char *text, size_t len);

/* ubt_print_ctx.flags: the dump-tree options that change a block's text. */
#define UBT_PRINT_HIDE_NAMES	(1u << 0)	/* --hide-names */
#define UBT_PRINT_CSUM_HEADERS	(1u << 1)	/* --csum-headers */
#define UBT_PRINT_CSUM_ITEMS	(1u << 2)	/* --csum-items */

struct ubt_print_ctx {
	uint32_t nodesize;	/* size of the block buffer */
	uint32_t sectorsize;	/* for EXTENT_CSUM ranges */
	uint16_t csum_type;	/* superblock csum_type (csum sizes) */
	uint32_t flags;		/* UBT_PRINT_* */
	ubt_write_fn write;	/* the listing (progs: stdout) */
	void *wctx;
	/*
	 * Where "ERROR: ..." / "WARNING: ..." lines go (progs: stderr).
	 * NULL sends them to `write`, in order with the listing.
	 */
	ubt_write_fn err_write;
	void *err_wctx;
};

/*
 * Print the block: for a leaf the two header lines, "fs uuid", "chunk uuid",
 * then every item line ("\titem 0 key (...) itemoff N itemsize M") with its
 * body lines; for a node the same header and one "\tkey (...) block N gen G"
 * line per pointer.  Output is flushed before returning.
 */
void ubt_print_tree_block(const struct ubt_print_ctx *ctx, const uint8_t *block);

/*
 * A key as progs 6.2 prints it: "key (FS_TREE ROOT_ITEM 0)".  Unlike
 * btrfs_key_str() of format_names, this follows progs 6.2 for the names it
 * does not know yet (objectids 12 and -13 print as numbers, key types 172
 * and 230 as UNKNOWN.<n>).  snprintf conventions.
 */
size_t ubt_print_key_str(const struct btrfs_key *key, char *buf, size_t len);

/* An objectid in the context of key type @type (0: none), as progs 6.2. */
size_t ubt_print_objectid_str(uint64_t objectid, uint8_t type, char *buf, size_t len);

#endif /* UBTRFS_TREE_PRINT_H */
