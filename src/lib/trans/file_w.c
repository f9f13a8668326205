/*
 * trans layer: writing file data.
 *
 * A write allocates data extents in the data block groups (new data chunks
 * when they run out), writes the bytes there at once - the space is not
 * referenced by the last commit, so a crash before the next commit only
 * loses the write - with their checksums in the csum tree (unless the inode
 * is NODATASUM), and replaces the file's EXTENT_DATA items over the range:
 * items inside it go (their data reference with them), items reaching in
 * are trimmed (the reference key root/inode/key.offset - offset stays the
 * same), an item spanning it is split in two (its data extent gains a
 * second reference of the same key).  Small files (size <= 2048, the
 * kernel's max_inline default, and below a sector) are stored inline.
 * Preallocated extents, and the extents of NODATACOW files, are written in
 * place when no one else references them ("writing in place" below).
 * Without NO_HOLES every gap gets an explicit hole item.  The inode's size,
 * nbytes, transid, sequence and times follow.
 *
 * A data extent whose last reference goes is freed at commit with its
 * checksums (extent_w.c).
 */
#include "trans/file_w.h"

#include "base/base.h"
#include "trans/csum_w.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_INLINE 2048u
#define MAX_EXTENT (128ull * 1024 * 1024)

struct fw {
	struct ubt_trans *t;
	struct ubt_fs *fs;
	struct ubt_wroot *root;
	uint64_t ino;
	struct btrfs_inode_item inode;
	int64_t nbytes_delta;
	/* The file has no EXTENT_DATA item (seen in the inode's leaf when it
	 * was read, none inserted since): the searches for items are
	 * skipped. */
	bool empty;
	/* has_inline found no inline extent, and none was written since:
	 * take_inline need not look again. */
	bool no_inline;
};

static bool no_holes(const struct ubt_fs *fs)
{
	return btrfs_super_incompat_flags(&fs->vol->super) & BTRFS_FEATURE_INCOMPAT_NO_HOLES;
}

static int read_inode(struct fw *w, const struct ubt_subvol *sv)
{
	struct ubt_inode in;

	if (w->ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		return -ENOENT;	/* no item: ubt_inode_read's placeholder is for readers */
	int ret = ubt_inode_read_facts(w->fs, sv, w->ino, &in, NULL, &w->empty);
	if (!ret)
		w->inode = in.item;
	return ret;
}

/* An EXTENT_DATA item is about to be inserted: the file is no longer
 * known to have none, here and in the inode cache. */
static void has_extents(struct fw *w)
{
	w->empty = false;
	ubt_icache_forget_facts(w->fs, w->root->objectid, w->ino, false, true);
}

static int write_inode(struct fw *w)
{
	struct btrfs_key key = { w->ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct ubt_path path;
	int ret;

	int64_t nb = (int64_t)btrfs_inode_nbytes(&w->inode) + w->nbytes_delta;
	if (nb < 0)
		return UBT_CORRUPT(0, "inode %llu nbytes below zero", (unsigned long long)w->ino);
	btrfs_set_inode_nbytes(&w->inode, (uint64_t)nb);
	w->nbytes_delta = 0;
	ubt_path_init(&path);
	ret = ubt_search_slot_w(w->t, w->root, &key, &path, 0);
	if (ret == 0) {
		memcpy(ubt_eb_witem_data(path.nodes[0], path.slots[0]), &w->inode, sizeof(w->inode));
		ubt_icache_put(w->fs, w->root->objectid, w->ino, &w->inode, -1, w->empty);
	} else if (ret == 1) {
		ret = -ENOENT;
	}
	ubt_path_release(&w->fs->tree, &path);
	return ret;
}

static int dref_data(struct ubt_trans *t, uint64_t root, uint64_t ino, uint64_t bytenr,
		     uint64_t num_bytes, uint64_t ref_offset, int delta, bool new_extent)
{
	struct ubt_dref r = { 0 };

	r.bytenr = bytenr;
	r.num_bytes = num_bytes;
	r.type = BTRFS_EXTENT_DATA_REF_KEY;
	r.root = root;
	r.owner = ino;
	r.offset = ref_offset;
	r.delta = delta;
	r.new_block = new_extent;
	return ubt_dref_queue(t, &r);
}

static int data_ref(struct fw *w, uint64_t bytenr, uint64_t num_bytes, uint64_t file_off,
		    uint64_t ext_offset, int delta, bool new_extent)
{
	return dref_data(w->t, w->root->objectid, w->ino, bytenr, num_bytes, file_off - ext_offset,
			 delta, new_extent);
}

int ubt_file_data_unref(struct ubt_trans *t, const struct ubt_wroot *root, uint64_t ino,
			uint64_t bytenr, uint64_t num_bytes, uint64_t ref_offset)
{
	return dref_data(t, root->objectid, ino, bytenr, num_bytes, ref_offset, -1, false);
}

/* Insert an EXTENT_DATA item (copy of fi) at file offset `off`. */
static int insert_extent_item(struct fw *w, uint64_t off, const struct btrfs_file_extent_item *fi)
{
	struct btrfs_key key = { w->ino, BTRFS_EXTENT_DATA_KEY, off };
	uint8_t *p;

	has_extents(w);
	int ret = ubt_insert_item(w->t, w->root, &key, sizeof(*fi), &p);

	if (!ret)
		memcpy(p, fi, sizeof(*fi));
	return ret;
}

static int item_at_path(struct fw *w, struct ubt_path *path, struct btrfs_key *key,
			struct btrfs_file_extent_item *fi)
{
	ubt_eb_item_key(path->nodes[0], path->slots[0], key);
	if (key->objectid != w->ino || key->type != BTRFS_EXTENT_DATA_KEY)
		return 1;
	uint32_t size = ubt_eb_item_size(path->nodes[0], path->slots[0]);
	memset(fi, 0, sizeof(*fi));
	memcpy(fi, ubt_eb_item_data(path->nodes[0], path->slots[0]),
	       UBT_MIN(size, (uint32_t)sizeof(*fi)));
	return 0;
}

/* The extent item with the largest offset <= pos (0), or none (1). */
static int item_le(struct fw *w, uint64_t pos, struct btrfs_key *key,
		   struct btrfs_file_extent_item *fi)
{
	struct btrfs_key k = { w->ino, BTRFS_EXTENT_DATA_KEY, pos };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_le(&w->fs->tree, &w->root->ref, &k, &path);
	if (ret == 0)
		ret = item_at_path(w, &path, key, fi);
	ubt_path_release(&w->fs->tree, &path);
	return ret;
}

/* The extent item with the smallest offset >= pos (0), or none (1). */
static int item_ge(struct fw *w, uint64_t pos, struct btrfs_key *key,
		   struct btrfs_file_extent_item *fi)
{
	struct btrfs_key k = { w->ino, BTRFS_EXTENT_DATA_KEY, pos };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot(&w->fs->tree, &w->root->ref, &k, &path);
	if (ret == 1 && path.slots[0] >= (int)ubt_eb_nritems(path.nodes[0])) {
		path.slots[0]--;
		ret = ubt_next_item(&w->fs->tree, &path);
	} else if (ret == 1) {
		ret = 0;
	}
	if (ret == 0)
		ret = item_at_path(w, &path, key, fi);
	ubt_path_release(&w->fs->tree, &path);
	return ret;
}

static uint64_t extent_end(const struct btrfs_key *key, const struct btrfs_file_extent_item *fi)
{
	if (btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_INLINE)
		return key->offset + btrfs_file_extent_ram_bytes(fi);
	return key->offset + btrfs_file_extent_num_bytes(fi);
}

/* Remove one item's coverage of [start, end) (it overlaps the range). */
static int drop_one(struct fw *w, const struct btrfs_key *key,
		    const struct btrfs_file_extent_item *fi, uint64_t start, uint64_t end)
{
	uint64_t es = key->offset, ee = extent_end(key, fi);
	int ret;

	if (btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_INLINE)
		return UBT_CORRUPT(0, "inode %llu: inline extent inside a write",
				   (unsigned long long)w->ino);
	uint64_t disk = btrfs_file_extent_disk_bytenr(fi);
	uint64_t dlen = btrfs_file_extent_disk_num_bytes(fi);
	uint64_t xoff = btrfs_file_extent_offset(fi);
	bool counts = disk != 0;
	ret = ubt_delete_key(w->t, w->root, key);
	if (ret)
		return ret;
	if (counts)
		w->nbytes_delta -= (int64_t)(ee - es);
	int pieces = 0;
	if (es < start) {	/* keep the front */
		struct btrfs_file_extent_item f = *fi;
		btrfs_set_file_extent_num_bytes(&f, start - es);
		ret = insert_extent_item(w, es, &f);
		if (ret)
			return ret;
		if (counts)
			w->nbytes_delta += (int64_t)(start - es);
		pieces++;
	}
	if (ee > end) {		/* keep the back */
		struct btrfs_file_extent_item f = *fi;
		btrfs_set_file_extent_offset(&f, xoff + (end - es));
		btrfs_set_file_extent_num_bytes(&f, ee - end);
		ret = insert_extent_item(w, end, &f);
		if (ret)
			return ret;
		if (counts)
			w->nbytes_delta += (int64_t)(ee - end);
		pieces++;
	}
	/* Every piece references the extent under the same data ref key
	 * (key.offset - offset does not change). */
	if (counts && pieces != 1)
		ret = data_ref(w, disk, dlen, es, xoff, pieces - 1, false);
	return ret;
}

/* Remove every extent item's coverage of [start, end). */
static int drop_extents(struct fw *w, uint64_t start, uint64_t end)
{
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;
	int ret;

	if (w->empty)
		return 0;
	/* The one item that may begin before the range and reach into it. */
	ret = item_le(w, start, &key, &fi);
	if (ret < 0)
		return ret;
	if (ret == 0 && key.offset < start && extent_end(&key, &fi) > start) {
		ret = drop_one(w, &key, &fi, start, end);
		if (ret)
			return ret;
	}
	/* Items beginning inside it; a back piece left at `end` stops this. */
	for (;;) {
		ret = item_ge(w, start, &key, &fi);
		if (ret == 1)
			return 0;
		if (ret)
			return ret;
		if (key.offset >= end)
			return 0;
		ret = drop_one(w, &key, &fi, start, end);
		if (ret)
			return ret;
	}
}

/* A data extent of up to `want` bytes (sector multiple) in a data group,
 * with a new data chunk when none has room. */
static int alloc_data(struct fw *w, uint64_t want, uint64_t *bytenr, uint64_t *got)
{
	int ret = ubt_alloc_data_extent(w->t, want, bytenr, got);

	if (ret != -ENOSPC)
		return ret;
	w->t->allocating_chunk = true;
	ret = ubt_alloc_chunk(w->t, BTRFS_BLOCK_GROUP_DATA);
	w->t->allocating_chunk = false;
	if (ret)
		return ret;
	return ubt_alloc_data_extent(w->t, want, bytenr, got);
}

/* Refuse a write of `bytes` new data bytes up front when the data groups
 * (and the devices, for a new chunk) cannot hold it: nothing changes. */
static int reserve_data(struct fw *w, uint64_t bytes)
{
	if (ubt_data_free_bytes(w->t->w) >= bytes)
		return 0;
	w->t->allocating_chunk = true;
	int ret = ubt_alloc_chunk(w->t, BTRFS_BLOCK_GROUP_DATA);
	w->t->allocating_chunk = false;
	if (ret)
		return ret;
	return ubt_data_free_bytes(w->t->w) >= bytes ? 0 : -ENOSPC;
}

static int write_inline(struct fw *w, const uint8_t *data, size_t len)
{
	size_t hdr = btrfs_file_extent_inline_start();
	struct btrfs_key key = { w->ino, BTRFS_EXTENT_DATA_KEY, 0 };
	uint8_t *p;

	has_extents(w);
	w->no_inline = false;
	int ret = ubt_insert_item(w->t, w->root, &key, (uint32_t)(hdr + len), &p);

	if (ret)
		return ret;
	struct btrfs_file_extent_item *fi = (void *)p;
	btrfs_set_file_extent_generation(fi, w->t->transid);
	btrfs_set_file_extent_ram_bytes(fi, len);
	btrfs_set_file_extent_compression(fi, BTRFS_COMPRESS_NONE);
	btrfs_set_file_extent_type(fi, BTRFS_FILE_EXTENT_INLINE);
	memcpy(p + hdr, data, len);
	w->nbytes_delta += (int64_t)len;
	return 0;
}

/* Write [off, off + len) as regular extents (the range has no items). */
static int write_regular(struct fw *w, uint64_t off, const uint8_t *data, size_t len)
{
	struct ubt_fs *fs = w->fs;
	uint32_t ss = fs->sectorsize;
	bool sum = !(btrfs_inode_flags(&w->inode) & BTRFS_INODE_NODATASUM);
	size_t done = 0;
	int ret = 0;

	while (done < len) {
		uint64_t want = UBT_MIN(UBT_ALIGN_UP((uint64_t)(len - done), (uint64_t)ss), MAX_EXTENT);
		uint64_t bytenr, got;
		ret = alloc_data(w, want, &bytenr, &got);
		if (ret)
			return ret;
		size_t take = (size_t)UBT_MIN((uint64_t)(len - done), got);
		/* Whole sectors on disk: the tail is zero padding (a copy
		 * only for a range that does not end on a sector). */
		uint8_t *copy = NULL;
		const uint8_t *buf = data + done;
		if (take < got) {
			copy = malloc((size_t)got);
			if (!copy)
				return -ENOMEM;
			memcpy(copy, data + done, take);
			memset(copy + take, 0, (size_t)got - take);
			buf = copy;
		}
		ret = ubt_volume_write(fs->vol, bytenr, buf, (size_t)got);
		if (!ret && sum) {
			size_t nsect = (size_t)(got / ss);
			uint8_t *cs = malloc(nsect * fs->csum_size);
			if (!cs)
				ret = -ENOMEM;
			if (!ret)
				ret = ubt_csum_data(fs, buf, (size_t)got, cs);
			if (!ret)
				ret = ubt_csum_insert_held(w->t, bytenr, cs, nsect);
			free(cs);
		}
		free(copy);
		if (ret)
			return ret;
		struct btrfs_file_extent_item fi = { 0 };
		btrfs_set_file_extent_generation(&fi, w->t->transid);
		btrfs_set_file_extent_ram_bytes(&fi, got);
		btrfs_set_file_extent_type(&fi, BTRFS_FILE_EXTENT_REG);
		btrfs_set_file_extent_disk_bytenr(&fi, bytenr);
		btrfs_set_file_extent_disk_num_bytes(&fi, got);
		btrfs_set_file_extent_offset(&fi, 0);
		/* The item covers whole sectors: the file size decides what
		 * is visible. */
		uint64_t cover = UBT_ALIGN_UP((uint64_t)take, (uint64_t)ss);
		btrfs_set_file_extent_num_bytes(&fi, cover);
		ret = insert_extent_item(w, off + done, &fi);
		if (!ret)
			ret = data_ref(w, bytenr, got, off + done, 0, +1, true);
		if (ret)
			return ret;
		w->t->grow = (struct ubt_grow_hint){
			.valid = cover == got, .bytenr = bytenr, .num_bytes = got,
			.root = w->root->objectid, .ino = w->ino, .file_off = off + done,
			.last_snapshot = btrfs_root_last_snapshot(&w->root->item),
			.ref = w->t->nrefs - 1,
		};
		w->nbytes_delta += (int64_t)cover;
		done += take;
	}
	return 0;
}

/* ---- writing in place ------------------------------------------------------
 *
 * As the kernel does (run_delalloc_nocow), a write goes into the data extent
 * already under it when that is safe: a PREALLOC extent (its written piece
 * becomes a REG item over the same disk extent - the kernel's
 * btrfs_mark_extent_written), or a REG extent of a NODATACOW file (nothing
 * changes but the bytes).  Safe means the extent belongs to this file alone
 * (can_nocow_file_extent): not compressed or encoded, not older than the
 * subvolume's last snapshot (a snapshot shares it without a reference of
 * its own), referenced only by this inode's items under one data-ref key
 * (the pieces of one split extent), and without checksums in the range
 * (checksums of an extent's sectors are valid or absent).  Writing before
 * the commit is crash-safe for PREALLOC: the last commit says the range is
 * unwritten and reads it as zeros.  A NODATACOW overwrite is not, as in the
 * kernel: that is what the flag asks for.
 */

/* A piece of a write that goes in place. */
struct inplace {
	uint64_t start, end;	/* file range (sector aligned) */
	uint64_t disk;		/* disk address of start */
	bool prealloc;		/* the item is PREALLOC: it becomes REG */
};

struct wplan {
	struct inplace *v;
	size_t n, cap;
	uint64_t cow;		/* bytes written copy-on-write */
};

/* Does the csum tree hold a checksum of any sector of [start, start + len)?
 * Items never overlap: only the last one starting before the end can. */
static int csum_in_range(struct fw *w, uint64_t start, uint64_t len)
{
	struct ubt_fs *fs = w->fs;
	struct btrfs_key key = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY,
				 start + len - 1 };
	struct ubt_path path;
	int ret;

	if (!fs->has_csum_tree)
		return 0;
	if (ubt_csum_held(w->t, start, len))
		return 1;
	ubt_path_init(&path);
	ret = ubt_search_le(&fs->tree, &fs->csum_tree, &key, &path);
	if (ret == 0) {
		ubt_eb_item_key(path.nodes[0], path.slots[0], &key);
		uint64_t n = ubt_eb_item_size(path.nodes[0], path.slots[0]) / fs->csum_size;
		ret = key.objectid == BTRFS_EXTENT_CSUM_OBJECTID &&
		      key.type == BTRFS_EXTENT_CSUM_KEY &&
		      key.offset + n * fs->sectorsize > start;
	} else if (ret == 1) {
		ret = 0;
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

static bool ours(const struct fw *w, const struct ubt_dref *r, uint64_t offset)
{
	return !r->tree && r->type == BTRFS_EXTENT_DATA_REF_KEY && r->root == w->root->objectid &&
	       r->owner == w->ino && r->offset == offset;
}

/*
 * Is data extent `bytenr` this file's alone: every reference is the data
 * ref (this root, this inode, `offset`), and the extent is younger than the
 * subvolume's last snapshot?  The kernel's check_committed_ref rule: the
 * extent item holds exactly one inline EXTENT_DATA_REF carrying all its
 * references (keyed references count as shared); changes queued in this
 * transaction must be to that same reference.  1 yes, 0 no, or -errno.
 */
static int extent_private(struct fw *w, uint64_t bytenr, uint64_t num_bytes, uint64_t offset,
			  uint64_t last_snapshot)
{
	struct ubt_trans *t = w->t;
	struct ubt_fs *fs = w->fs;
	bool queued = false;

	for (size_t i = ubt_dref_first(t, bytenr); i; i = ubt_dref_next(t, i)) {
		if (!ours(w, &t->refs[i - 1], offset))
			return 0;
		queued = true;
	}
	struct btrfs_key key = { bytenr, BTRFS_EXTENT_ITEM_KEY, num_bytes };
	struct ubt_path path;
	ubt_path_init(&path);
	int ret = ubt_search_slot(&fs->tree, &fs->extent_tree, &key, &path);
	if (ret == 1)	/* created in this transaction (or a bug: stay COW) */
		ret = queued;
	else if (ret == 0) {
		const uint8_t *p = ubt_eb_item_data(path.nodes[0], path.slots[0]);
		const struct btrfs_extent_item *ei = (const void *)p;
		const struct btrfs_extent_inline_ref *iref = (const void *)(p + sizeof(*ei));
		const struct btrfs_extent_data_ref *d = btrfs_extent_inline_ref_data_ref(iref);
		uint32_t one = sizeof(*ei) + btrfs_extent_inline_ref_size(BTRFS_EXTENT_DATA_REF_KEY);
		ret = ubt_eb_item_size(path.nodes[0], path.slots[0]) == one &&
		      (btrfs_extent_flags(ei) & BTRFS_EXTENT_FLAG_DATA) &&
		      btrfs_extent_generation(ei) > last_snapshot &&
		      btrfs_extent_inline_ref_type(iref) == BTRFS_EXTENT_DATA_REF_KEY &&
		      btrfs_extent_data_ref_root(d) == w->root->objectid &&
		      btrfs_extent_data_ref_objectid(d) == w->ino &&
		      btrfs_extent_data_ref_offset(d) == offset &&
		      btrfs_extent_data_ref_count(d) == btrfs_extent_refs(ei);
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/* May [s, e) (inside the item key/fi) be written in place?  1, 0 or -errno. */
static int can_nocow(struct fw *w, const struct btrfs_key *key,
		     const struct btrfs_file_extent_item *fi, uint64_t s, uint64_t e)
{
	uint64_t iflags = btrfs_inode_flags(&w->inode);
	uint64_t nocow = BTRFS_INODE_NODATACOW | BTRFS_INODE_NODATASUM;
	uint8_t type = btrfs_file_extent_type(fi);
	uint64_t ss = w->fs->sectorsize;

	if (type != BTRFS_FILE_EXTENT_PREALLOC &&
	    !(type == BTRFS_FILE_EXTENT_REG && (iflags & nocow) == nocow))
		return 0;
	uint64_t disk = btrfs_file_extent_disk_bytenr(fi);
	uint64_t dlen = btrfs_file_extent_disk_num_bytes(fi);
	uint64_t xoff = btrfs_file_extent_offset(fi);
	uint64_t last_snapshot = btrfs_root_last_snapshot(&w->root->item);
	if (disk == 0 || btrfs_file_extent_compression(fi) || btrfs_file_extent_encryption(fi) ||
	    btrfs_file_extent_other_encoding(fi) ||
	    btrfs_file_extent_generation(fi) <= last_snapshot)
		return 0;
	/* Whole sectors of the extent, as every sane item has. */
	if (!UBT_IS_ALIGNED(key->offset | btrfs_file_extent_num_bytes(fi) | xoff | disk | dlen, ss) ||
	    xoff + btrfs_file_extent_num_bytes(fi) > dlen)
		return 0;
	/* Parity stripes are not rewritten here (volume writes refuse them). */
	const struct ubt_bg *bg = ubt_bg_find(w->t->w, disk);
	if (!bg || !(bg->flags & BTRFS_BLOCK_GROUP_DATA) || disk + dlen > bg->start + bg->len ||
	    (bg->flags & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)))
		return 0;
	int ret = extent_private(w, disk, dlen, key->offset - xoff, last_snapshot);
	if (ret <= 0)
		return ret;
	ret = csum_in_range(w, disk + xoff + (s - key->offset), e - s);
	return ret < 0 ? ret : !ret;
}

static int plan_push(struct wplan *p, const struct inplace *ip)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		struct inplace *v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = *ip;
	return 0;
}

/* Which pieces of [a, b) (sector aligned) go in place; the rest is COW. */
static int plan_write(struct fw *w, uint64_t a, uint64_t b, struct wplan *p)
{
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;

	memset(p, 0, sizeof(*p));
	if (w->empty) {
		p->cow = b - a;		/* no item: all of it is new */
		return 0;
	}
	for (uint64_t pos = a; pos < b;) {
		int ret = item_le(w, pos, &key, &fi);
		if (ret < 0)
			return ret;
		if (ret == 1 || extent_end(&key, &fi) <= pos) {
			/* A gap up to the next item (an item at pos itself
			 * would have been found: it is empty, skip it). */
			ret = item_ge(w, pos + 1, &key, &fi);
			if (ret < 0)
				return ret;
			uint64_t next = ret == 1 ? b : UBT_MIN(key.offset, b);
			p->cow += next - pos;
			pos = next;
			continue;
		}
		uint64_t e = UBT_MIN(extent_end(&key, &fi), b);
		ret = can_nocow(w, &key, &fi, pos, e);
		if (ret < 0)
			return ret;
		if (ret) {
			struct inplace ip = { pos, e, 0, false };
			ip.disk = btrfs_file_extent_disk_bytenr(&fi) + btrfs_file_extent_offset(&fi) +
				  (pos - key.offset);
			ip.prealloc = btrfs_file_extent_type(&fi) == BTRFS_FILE_EXTENT_PREALLOC;
			ret = plan_push(p, &ip);
			if (ret)
				return ret;
		} else {
			p->cow += e - pos;
		}
		pos = e;
	}
	return 0;
}

/*
 * Write n bytes (whole sectors) at disk address `disk`: the first `have`
 * from data, zeros after (past the end of the file).  With cs, *cs gets
 * their checksums (malloc'd).
 */
static int write_sectors(struct fw *w, uint64_t disk, const uint8_t *data, size_t have,
			 uint64_t n, uint8_t **cs)
{
	struct ubt_fs *fs = w->fs;
	uint32_t ss = fs->sectorsize;
	size_t whole = have & ~((size_t)ss - 1);
	int ret;

	if (cs) {
		*cs = malloc((size_t)(n / ss) * fs->csum_size + 1);
		if (!*cs)
			return -ENOMEM;
	}
	ret = ubt_volume_write(fs->vol, disk, data, whole);
	if (!ret && cs)
		ret = ubt_csum_data(fs, data, whole, *cs);
	if (!ret && whole < n) {
		uint8_t *tail = calloc(1, (size_t)(n - whole));
		if (!tail)
			return -ENOMEM;
		memcpy(tail, data + whole, have - whole);
		ret = ubt_volume_write(fs->vol, disk + whole, tail, (size_t)(n - whole));
		if (!ret && cs)
			ret = ubt_csum_data(fs, tail, (size_t)(n - whole),
					    *cs + whole / ss * fs->csum_size);
		free(tail);
	}
	return ret;
}

/* May the item key/fi absorb a written piece of the extent at `disk` whose
 * items have data-ref offset `orig` (a REG item continuing it)? */
static bool mergeable(const struct btrfs_key *key, const struct btrfs_file_extent_item *fi,
		      uint64_t disk, uint64_t orig)
{
	return btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_REG &&
	       btrfs_file_extent_disk_bytenr(fi) == disk &&
	       key->offset - btrfs_file_extent_offset(fi) == orig &&
	       !btrfs_file_extent_compression(fi) && !btrfs_file_extent_encryption(fi) &&
	       !btrfs_file_extent_other_encoding(fi);
}

/*
 * [s, e) of a PREALLOC item has been written: the item becomes (prealloc |
 * REG | prealloc) pieces over the same disk extent, the REG piece merged
 * with REG neighbours that continue it in that extent (as the kernel
 * merges them).  Every piece keeps the data-ref key (root, inode, key.offset
 * - offset), so only that reference's count changes, by the change in the
 * number of items.  The pieces get the transaction's generation.
 */
static int mark_written(struct fw *w, uint64_t s, uint64_t e)
{
	struct btrfs_key key, nk;
	struct btrfs_file_extent_item fi, nf;
	int ret = item_le(w, s, &key, &fi);

	if (ret < 0)
		return ret;
	uint64_t es = key.offset, ee = ret ? 0 : extent_end(&key, &fi);
	if (ret || btrfs_file_extent_type(&fi) != BTRFS_FILE_EXTENT_PREALLOC || ee < e)
		return UBT_CORRUPT(0, "inode %llu: no preallocated extent at %llu",
				   (unsigned long long)w->ino, (unsigned long long)s);
	uint64_t disk = btrfs_file_extent_disk_bytenr(&fi);
	uint64_t orig = es - btrfs_file_extent_offset(&fi);
	uint64_t ns = s, ne = e;
	int before = 1, after = 1;

	if (s == es && es > 0) {	/* the item ending at es */
		ret = item_le(w, es - 1, &nk, &nf);
		if (ret == 0 && extent_end(&nk, &nf) == es && mergeable(&nk, &nf, disk, orig)) {
			ret = ubt_delete_key(w->t, w->root, &nk);
			ns = nk.offset;
			before++;
		}
		if (ret < 0)
			return ret;
	}
	if (e == ee) {			/* the item starting at ee */
		ret = item_ge(w, ee, &nk, &nf);
		if (ret == 0 && nk.offset == ee && mergeable(&nk, &nf, disk, orig)) {
			ret = ubt_delete_key(w->t, w->root, &nk);
			ne = extent_end(&nk, &nf);
			before++;
		}
		if (ret < 0)
			return ret;
	}
	ret = ubt_delete_key(w->t, w->root, &key);
	btrfs_set_file_extent_generation(&fi, w->t->transid);
	if (!ret && es < s) {	/* the front stays preallocated */
		nf = fi;
		btrfs_set_file_extent_num_bytes(&nf, s - es);
		ret = insert_extent_item(w, es, &nf);
		after++;
	}
	if (!ret && e < ee) {	/* and the back */
		nf = fi;
		btrfs_set_file_extent_offset(&nf, e - orig);
		btrfs_set_file_extent_num_bytes(&nf, ee - e);
		ret = insert_extent_item(w, e, &nf);
		after++;
	}
	if (!ret) {
		nf = fi;
		btrfs_set_file_extent_type(&nf, BTRFS_FILE_EXTENT_REG);
		btrfs_set_file_extent_offset(&nf, ns - orig);
		btrfs_set_file_extent_num_bytes(&nf, ne - ns);
		ret = insert_extent_item(w, ns, &nf);
	}
	if (!ret && after != before)
		ret = data_ref(w, disk, btrfs_file_extent_disk_num_bytes(&fi), es,
			       btrfs_file_extent_offset(&fi), after - before, false);
	return ret;
}

/* Write a planned in-place piece (data holds the write from file offset
 * off, len bytes). */
static int write_in_place(struct fw *w, const struct inplace *ip, uint64_t off,
			  const uint8_t *data, size_t len)
{
	bool sum = ip->prealloc && !(btrfs_inode_flags(&w->inode) & BTRFS_INODE_NODATASUM);
	uint64_t n = ip->end - ip->start;
	size_t have = (size_t)UBT_MIN((uint64_t)len - (ip->start - off), n);
	uint8_t *cs = NULL;
	int ret = write_sectors(w, ip->disk, data + (ip->start - off), have, n, sum ? &cs : NULL);

	/* can_nocow saw no checksums here: the REG piece gets its own. */
	if (!ret && sum)
		ret = ubt_csum_insert(w->t, ip->disk, cs, (size_t)(n / w->fs->sectorsize));
	free(cs);
	if (!ret && ip->prealloc)
		ret = mark_written(w, ip->start, ip->end);
	return ret;
}

/* Set the sizes of the REG item at `key` (a search for write finds it). */
static int set_extent_sizes(struct fw *w, const struct btrfs_key *key, uint64_t num_bytes,
			    uint64_t disk_num_bytes)
{
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot_w(w->t, w->root, key, &path, 0);
	if (ret == 1)
		ret = UBT_CORRUPT(0, "inode %llu: extent item %llu vanished under the writer",
				  (unsigned long long)w->ino, (unsigned long long)key->offset);
	if (ret == 0 && ubt_eb_item_size(path.nodes[0], path.slots[0]) <
				sizeof(struct btrfs_file_extent_item))
		ret = UBT_CORRUPT(path.nodes[0]->start, "inode %llu: short extent item",
				  (unsigned long long)w->ino);
	if (ret == 0) {
		struct btrfs_file_extent_item *fi =
			(void *)ubt_eb_witem_data(path.nodes[0], path.slots[0]);
		btrfs_set_file_extent_num_bytes(fi, num_bytes);
		btrfs_set_file_extent_disk_num_bytes(fi, disk_num_bytes);
		btrfs_set_file_extent_ram_bytes(fi, disk_num_bytes);
	}
	ubt_path_release(&w->fs->tree, &path);
	return ret;
}

/*
 * Appending (tar, cp and every program writing a file in pieces): a write
 * at s that continues the data extent this transaction made for the same
 * file's previous write grows that extent instead of starting another, as
 * the kernel's delayed allocation would have made one extent of it.  The
 * extent is referenced by this one item only and by no commit (the grow
 * hint, see trans.h, and the checks below), so its unreferenced tail - the
 * rest of a partial last sector the previous write left - is rewritten in
 * place, and the sectors after it are taken if they are free.  Only the
 * item's sizes, the queued reference's size and the checksums change.
 * 1: written; 0: not possible (nothing changed); < 0: error.
 */
static int grow_last(struct fw *w, uint64_t s, const uint8_t *data, size_t have)
{
	struct ubt_trans *t = w->t;
	struct ubt_grow_hint *g = &t->grow;
	uint32_t ss = w->fs->sectorsize;
	bool sum = !(btrfs_inode_flags(&w->inode) & BTRFS_INODE_NODATASUM);
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;
	int ret;

	if (!g->valid || have == 0 || g->root != w->root->objectid || g->ino != w->ino ||
	    s <= g->file_off || btrfs_root_last_snapshot(&w->root->item) != g->last_snapshot ||
	    g->ref >= t->nrefs || t->refs[g->ref].bytenr != g->bytenr ||
	    t->refs[g->ref].num_bytes != g->num_bytes || t->refs[g->ref].delta != 1)
		return 0;
	ret = item_le(w, s - 1, &key, &fi);
	if (ret)
		return ret < 0 ? ret : 0;
	uint64_t dlen = btrfs_file_extent_disk_num_bytes(&fi);
	uint64_t used = btrfs_file_extent_num_bytes(&fi);
	if (key.offset != g->file_off || btrfs_file_extent_type(&fi) != BTRFS_FILE_EXTENT_REG ||
	    btrfs_file_extent_disk_bytenr(&fi) != g->bytenr || dlen != g->num_bytes ||
	    btrfs_file_extent_ram_bytes(&fi) != dlen || btrfs_file_extent_offset(&fi) != 0 ||
	    btrfs_file_extent_compression(&fi) || btrfs_file_extent_encryption(&fi) ||
	    btrfs_file_extent_other_encoding(&fi) ||
	    btrfs_file_extent_generation(&fi) != t->transid || used > dlen ||
	    key.offset + used != s)
		return 0;
	uint64_t cover = UBT_ALIGN_UP((uint64_t)have, (uint64_t)ss);
	uint64_t new_used = used + cover;
	uint64_t new_len = UBT_MAX(dlen, new_used);
	if (new_len > MAX_EXTENT)
		return 0;
	if (new_len > dlen) {
		ret = ubt_alloc_data_at(t, g->bytenr, g->bytenr + dlen, new_len - dlen);
		if (ret)
			return ret == -ENOSPC ? 0 : ret;
	}
	/* From here on a failure leaves the extent half grown: abort. */
	uint8_t *cs = NULL;
	ret = write_sectors(w, g->bytenr + used, data, have, cover, sum ? &cs : NULL);
	if (!ret && sum && dlen > used)
		ret = ubt_csum_delete(t, g->bytenr + used, UBT_MIN(dlen, new_used) - used);
	if (!ret && sum)
		ret = ubt_csum_insert(t, g->bytenr + used, cs, (size_t)(cover / ss));
	free(cs);
	if (!ret)
		ret = set_extent_sizes(w, &key, new_used, new_len);
	if (ret) {
		if (!t->w->aborted) {
			ubt_log(UBT_LOG_ERROR, "growing a data extent of inode %llu failed part way "
				"(%s): aborting", (unsigned long long)w->ino, ubt_strerror(ret));
			t->w->aborted = true;
			t->w->abort_err = ret;
		}
		return ret;
	}
	t->refs[g->ref].num_bytes = new_len;
	g->num_bytes = new_len;
	w->nbytes_delta += (int64_t)cover;
	return 1;
}

/* Write [s, e) copy-on-write (the part of the write in it). */
static int write_cow(struct fw *w, uint64_t s, uint64_t e, uint64_t off, const uint8_t *data,
		     size_t len)
{
	size_t have = (size_t)UBT_MIN((uint64_t)len - (s - off), e - s);
	int ret = drop_extents(w, s, e);

	if (!ret)
		ret = grow_last(w, s, data + (s - off), have);
	if (ret == 0)
		ret = write_regular(w, s, data + (s - off), have);
	return ret < 0 ? ret : 0;
}

/*
 * Write len bytes at off (sector aligned; a partial last sector only where
 * its rest is past the end of the file): in place where can_nocow allows,
 * else into new extents.  -ENOSPC before anything changed when the new
 * extents do not fit.
 */
static int write_data(struct fw *w, uint64_t off, const uint8_t *data, size_t len)
{
	uint64_t b = UBT_ALIGN_UP(off + len, (uint64_t)w->fs->sectorsize), pos = off;
	struct wplan p;
	int ret = plan_write(w, off, b, &p);

	if (!ret)
		ret = reserve_data(w, p.cow);
	for (size_t i = 0; !ret && i <= p.n; i++) {
		uint64_t s = i < p.n ? p.v[i].start : b;
		if (pos < s)
			ret = write_cow(w, pos, s, off, data, len);
		if (!ret && i < p.n) {
			ret = write_in_place(w, &p.v[i], off, data, len);
			pos = p.v[i].end;
		}
	}
	free(p.v);
	return ret;
}

static int for_gaps(struct fw *w, uint64_t a, uint64_t b,
		    int (*fn)(struct fw *w, uint64_t s, uint64_t e, void *ctx), void *ctx);

/* One hole item over the gap [s, e) (hole items in it merged). */
static int hole_gap(struct fw *w, uint64_t s, uint64_t e, void *ctx)
{
	struct btrfs_file_extent_item fi = { 0 };
	(void)ctx;
	int ret = drop_extents(w, s, e);

	if (ret)
		return ret;
	btrfs_set_file_extent_generation(&fi, w->t->transid);
	btrfs_set_file_extent_ram_bytes(&fi, e - s);
	btrfs_set_file_extent_type(&fi, BTRFS_FILE_EXTENT_REG);
	btrfs_set_file_extent_num_bytes(&fi, e - s);
	return insert_extent_item(w, s, &fi);
}

/* Hole items over every gap of [start, end) (without NO_HOLES); extents
 * in the range (preallocated past the size) stay. */
static int insert_hole(struct fw *w, uint64_t start, uint64_t end)
{
	if (end <= start || no_holes(w->fs))
		return 0;
	return for_gaps(w, start, end, hole_gap, NULL);
}

/* Read the file's inline extent (if any) and remove it: *data (malloc'd),
 * *len its bytes; NULL when there is none. */
/* Does the file start with an inline extent?  1, 0 or -errno. */
static int has_inline(struct fw *w)
{
	struct btrfs_key key = { w->ino, BTRFS_EXTENT_DATA_KEY, 0 };
	struct ubt_path path;
	int ret;

	if (w->empty)
		return 0;
	ubt_path_init(&path);
	ret = ubt_search_slot(&w->fs->tree, &w->root->ref, &key, &path);
	if (ret == 0) {
		const struct btrfs_file_extent_item *fi =
			(const void *)ubt_eb_item_data(path.nodes[0], path.slots[0]);
		ret = ubt_eb_item_size(path.nodes[0], path.slots[0]) >=
			      btrfs_file_extent_inline_start() &&
		      btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_INLINE;
	} else if (ret == 1) {
		ret = 0;
	}
	ubt_path_release(&w->fs->tree, &path);
	w->no_inline = ret == 0;
	return ret;
}

static int take_inline(struct fw *w, uint8_t **data, size_t *len)
{
	struct btrfs_key key = { w->ino, BTRFS_EXTENT_DATA_KEY, 0 };
	struct ubt_path path;
	int ret;

	*data = NULL;
	*len = 0;
	if (w->empty || w->no_inline)
		return 0;
	ubt_path_init(&path);
	ret = ubt_search_slot(&w->fs->tree, &w->root->ref, &key, &path);
	if (ret == 1) {
		ubt_path_release(&w->fs->tree, &path);
		return 0;
	}
	if (ret < 0)
		return ret;
	const uint8_t *p = ubt_eb_item_data(path.nodes[0], path.slots[0]);
	uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
	const struct btrfs_file_extent_item *fi = (const void *)p;
	size_t hdr = btrfs_file_extent_inline_start();
	if (size < hdr || btrfs_file_extent_type(fi) != BTRFS_FILE_EXTENT_INLINE) {
		ubt_path_release(&w->fs->tree, &path);
		return 0;
	}
	uint64_t ram = btrfs_file_extent_ram_bytes(fi);
	if (btrfs_file_extent_compression(fi) != BTRFS_COMPRESS_NONE) {
		/* Compressed (the kernel's compress= mounts): its bytes through
		 * the read side, rewritten uncompressed. */
		ubt_path_release(&w->fs->tree, &path);
		if (ram > w->fs->sectorsize)
			return UBT_CORRUPT(0, "inode %llu: inline extent of %llu bytes",
					   (unsigned long long)w->ino, (unsigned long long)ram);
		*data = calloc(1, (size_t)ram + 1);
		if (!*data)
			return -ENOMEM;
		const struct ubt_subvol *sv;
		ret = ubt_fs_subvol(w->fs, w->root->objectid, &sv);
		if (!ret) {
			struct ubt_inode in = { w->ino, sv, w->inode };
			ssize_t n = ubt_file_read(w->fs, &in, *data, (size_t)ram, 0);
			if (n < 0)
				ret = (int)n;
		}
		if (ret) {
			free(*data);
			*data = NULL;
			return ret;
		}
		*len = (size_t)ram;
	} else {
		*len = size - hdr;
		*data = malloc(*len + 1);
		if (!*data) {
			ubt_path_release(&w->fs->tree, &path);
			return -ENOMEM;
		}
		memcpy(*data, p + hdr, *len);
		ubt_path_release(&w->fs->tree, &path);
	}
	ret = ubt_delete_key(w->t, w->root, &key);
	if (!ret)
		w->nbytes_delta -= (int64_t)ram;
	if (ram < *len)
		*len = (size_t)ram;
	return ret;
}

/*
 * Before the size grows past isize: the bytes of isize's sector beyond it
 * must read as zeros, but the disk may hold anything there (the kernel
 * leaves old bytes past a truncation).  Rewrite that sector zero-padded.
 */
static int zero_tail(struct fw *w, uint64_t subvol, uint64_t isize)
{
	uint32_t ss = w->fs->sectorsize;
	uint64_t a = isize & ~((uint64_t)ss - 1);
	const struct ubt_subvol *sv;
	int ret;

	if (isize % ss == 0)
		return 0;
	uint8_t *sec = calloc(1, ss);
	if (!sec)
		return -ENOMEM;
	ret = ubt_fs_subvol(w->fs, subvol, &sv);
	if (!ret) {
		struct ubt_inode in = { w->ino, sv, w->inode };
		ssize_t n = ubt_file_read(w->fs, &in, sec, (size_t)(isize - a), a);
		if (n < 0)
			ret = (int)n;
	}
	if (!ret)
		ret = write_data(w, a, sec, (size_t)(isize - a));
	free(sec);
	return ret;
}

static void touch(struct fw *w, const struct btrfs_timespec *now)
{
	btrfs_set_inode_transid(&w->inode, w->t->transid);
	btrfs_set_inode_sequence(&w->inode, btrfs_inode_sequence(&w->inode) + 1);
	if (now) {
		w->inode.mtime = *now;
		w->inode.ctime = *now;
	}
}

/* Does the file have extent items reaching past `pos` (preallocation past
 * its end)?  Then its data cannot be inline, which must be alone.  1, 0 or
 * -errno. */
static int items_beyond(struct fw *w, uint64_t pos)
{
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;

	if (w->empty)
		return 0;
	int ret = item_ge(w, pos, &key, &fi);

	if (ret <= 0)
		return ret < 0 ? ret : 1;
	ret = item_le(w, pos, &key, &fi);
	if (ret < 0)
		return ret;
	return ret == 0 && btrfs_file_extent_type(&fi) != BTRFS_FILE_EXTENT_INLINE &&
	       extent_end(&key, &fi) > pos;
}

static int fw_open(struct fw *w, struct ubt_trans *t, uint64_t subvol, uint64_t ino)
{
	memset(w, 0, sizeof(*w));
	w->t = t;
	w->fs = t->w->fs;
	w->ino = ino;
	/* A read-only snapshot's files are not written (as the namespace
	 * operations refuse it: inode_w.c). */
	const struct ubt_subvol *sv;
	int ret = ubt_fs_subvol(w->fs, subvol, &sv);
	if (!ret && sv->readonly)
		ret = -EROFS;
	if (!ret)
		ret = ubt_wroot_get(t, subvol, &w->root);
	if (!ret)
		ret = read_inode(w, sv);
	if (!ret && !S_ISREG(btrfs_inode_mode(&w->inode)))
		ret = S_ISDIR(btrfs_inode_mode(&w->inode)) ? -EISDIR : -EINVAL;
	return ret;
}

int ubt_file_write(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t off,
		   const void *buf, size_t len, const struct btrfs_timespec *now)
{
	struct fw w;
	int ret = fw_open(&w, t, subvol, ino);

	if (ret)
		return ret;
	if (len == 0)
		return 0;
	if (off + len < off)
		return -EFBIG;
	/* The room of the whole write, before anything changes (in an
	 * operation scope, the later tree operations only keep the commit's). */
	ret = ubt_reserve_metadata(t, false);
	if (ret)
		return ret;
	uint64_t isize = btrfs_inode_size(&w.inode);
	uint64_t new_size = UBT_MAX(isize, off + len);
	uint32_t ss = w.fs->sectorsize;

	/* An inline extent is absorbed into the write (rewritten whole).  When
	 * the result is no longer inline, its space is checked first: ENOSPC
	 * must come before the inline extent is gone. */
	uint8_t *old;
	size_t old_len;
	if (!(new_size <= MAX_INLINE && new_size < ss)) {
		ret = has_inline(&w);
		if (ret > 0)
			ret = reserve_data(&w, UBT_ALIGN_UP(new_size, (uint64_t)ss));
		if (ret)
			return ret;
	}
	ret = take_inline(&w, &old, &old_len);
	if (ret)
		return ret;
	const uint8_t *data = buf;
	uint8_t *merged = NULL;
	if (old) {
		uint64_t end = UBT_MAX((uint64_t)old_len, off + len);
		merged = calloc(1, (size_t)end);
		if (!merged) {
			free(old);
			return -ENOMEM;
		}
		memcpy(merged, old, old_len);
		memcpy(merged + off, buf, len);
		free(old);
		data = merged;
		len = (size_t)end;
		off = 0;
	}
	int beyond = 0;
	if (off == 0 && new_size <= MAX_INLINE && new_size < ss && len == new_size)
		beyond = items_beyond(&w, ss);
	if (beyond < 0) {
		ret = beyond;
		goto out;
	}
	if (off == 0 && new_size <= MAX_INLINE && new_size < ss && len == new_size && !beyond) {
		ret = drop_extents(&w, 0, UBT_ALIGN_UP(new_size, (uint64_t)ss));
		if (!ret)
			ret = write_inline(&w, data, len);
	} else {
		uint64_t a = off & ~((uint64_t)ss - 1);
		uint64_t b = UBT_ALIGN_UP(off + len, (uint64_t)ss);
		/* Partial sectors at the edges: read-modify-write through the
		 * read side so whole sectors are rewritten. */
		uint8_t *whole = NULL;
		if (a != off || (b != off + len && off + len < isize)) {
			whole = calloc(1, (size_t)(b - a));
			if (!whole) {
				ret = -ENOMEM;
				goto out;
			}
			struct ubt_inode in = { w.ino, NULL, w.inode };
			const struct ubt_subvol *sv;
			ret = ubt_fs_subvol(w.fs, subvol, &sv);
			if (!ret) {
				in.sv = sv;
				ssize_t n = ubt_file_read(w.fs, &in, whole, (size_t)(b - a), a);
				if (n < 0)
					ret = (int)n;
			}
			if (ret) {
				free(whole);
				goto out;
			}
			memcpy(whole + (off - a), data, len);
			data = whole;
			len = (size_t)(b - a);
			off = a;
		}
		uint64_t old_end = UBT_ALIGN_UP(isize, (uint64_t)ss);
		ret = 0;
		/* zero_tail rewrites the sector holding i_size before the
		 * write's own data check: both are checked first. */
		if (off >= old_end && isize % ss)
			ret = reserve_data(&w, UBT_ALIGN_UP(len, (uint64_t)ss) + ss);
		if (!ret && off >= old_end)
			ret = zero_tail(&w, subvol, isize);
		if (!ret)
			ret = write_data(&w, off, data, len);
		if (!ret && off > old_end)
			ret = insert_hole(&w, old_end, off);
		free(whole);
	}
	if (!ret) {
		btrfs_set_inode_size(&w.inode, new_size);
		touch(&w, now);
		ret = write_inode(&w);
	}
out:
	free(merged);
	return ret;
}

int ubt_file_write_check(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t off,
			 size_t len, bool joining)
{
	struct fw w;
	int ret = fw_open(&w, t, subvol, ino);

	if (ret)
		return ret;
	if (off + len < off)
		return -EFBIG;
	uint64_t isize = btrfs_inode_size(&w.inode);
	if (!joining && off != isize)
		return 1;
	/* The data the write can take at most: the sectors it touches, one
	 * partial sector at its start included - or, when it absorbs an
	 * inline extent, what ubt_file_write asks for then (the whole new
	 * size).  A write that ends up inline, or goes into preallocated or
	 * NODATACOW extents, takes less.  Data first: a new data chunk
	 * changes the metadata the reserve below then counts, as the write
	 * itself will meet it. */
	uint32_t ss = w.fs->sectorsize;
	uint64_t new_size = UBT_MAX(isize, off + len);
	uint64_t need = UBT_ALIGN_UP((uint64_t)len, (uint64_t)ss) + ss;
	if (!(new_size <= MAX_INLINE && new_size < ss)) {
		ret = has_inline(&w);
		if (ret < 0)
			return ret;
		if (ret > 0)
			need = UBT_MAX(need, UBT_ALIGN_UP(new_size, (uint64_t)ss));
	}
	if (joining)
		/* Nothing may change before the held-back write is made: the
		 * room as it is (its metadata room, which does not depend on
		 * the length, was checked when it began). */
		return ubt_data_free_bytes(t->w) >= need ? 0 : -ENOSPC;
	ret = reserve_data(&w, need);
	if (ret)
		return ret;
	return ubt_reserve_metadata(t, false);
}

/* Every extent item of `ino` from offset `from` on: fn(ctx, index, offset). */
static int each_item(struct fw *w, uint64_t from, void (*fn)(void *ctx, uint64_t i, uint64_t off),
		     void *ctx)
{
	struct btrfs_key min = { w->ino, BTRFS_EXTENT_DATA_KEY, from };
	struct btrfs_key max = { w->ino, BTRFS_EXTENT_DATA_KEY, UINT64_MAX };
	struct ubt_iter it;
	uint64_t i = 0;
	int ret;

	ubt_iter_start(&it, &w->fs->tree, &w->root->ref, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0)
		fn(ctx, i++, it.key.offset);
	ubt_iter_end(&it);
	return ret < 0 ? ret : 0;
}

struct steps {
	uint64_t count, per_step, *v;
	size_t n;
};

static void count_item(void *ctx, uint64_t i, uint64_t off)
{
	(void)i;
	(void)off;
	((struct steps *)ctx)->count++;
}

/* Items count - k * per_step (k = 1, 2, ...) start the steps, last first. */
static void pick_item(void *ctx, uint64_t i, uint64_t off)
{
	struct steps *st = ctx;

	if (i > 0 && (st->count - i) % st->per_step == 0)
		st->v[(st->count - i) / st->per_step - 1] = off;
}

int ubt_file_step_targets(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t size,
			  unsigned per_step, uint64_t **out, size_t *n)
{
	struct fw w;
	struct steps st = { 0, per_step, NULL, 0 };
	int ret = fw_open(&w, t, subvol, ino);

	*out = NULL;
	*n = 0;
	if (ret || per_step == 0)
		return ret;
	uint64_t isize = btrfs_inode_size(&w.inode);
	ret = each_item(&w, size, count_item, &st);
	if (ret || st.count <= per_step)
		return ret;
	size_t k = (size_t)((st.count - 1) / per_step);
	st.v = calloc(k, sizeof(*st.v));
	if (!st.v)
		return -ENOMEM;
	ret = each_item(&w, size, pick_item, &st);
	if (ret) {
		free(st.v);
		return ret;
	}
	/* Sector aligned, strictly between size and the current end,
	 * descending. */
	uint64_t last = isize;
	for (size_t i = 0; i < k; i++) {
		uint64_t at = UBT_ALIGN_UP(st.v[i], (uint64_t)w.fs->sectorsize);
		if (at > size && at < last)
			st.v[st.n++] = last = at;
	}
	if (st.n == 0) {
		free(st.v);
		st.v = NULL;
	}
	*out = st.v;
	*n = st.n;
	return 0;
}

int ubt_file_truncate(struct ubt_trans *t, uint64_t subvol, uint64_t ino, uint64_t size,
		      const struct btrfs_timespec *now)
{
	struct fw w;
	int ret = fw_open(&w, t, subvol, ino);

	if (ret)
		return ret;
	uint64_t isize = btrfs_inode_size(&w.inode);
	uint32_t ss = w.fs->sectorsize;
	/* Shrinking (or dropping preallocation past the end) is a deletion:
	 * it may use the global reserve, so that a full filesystem empties. */
	ret = ubt_reserve_metadata(t, size <= isize);
	if (ret)
		return ret;
	/* Data the truncate writes, checked before anything changes: an
	 * inline extent that no longer fits inline, the zero-padded sector at
	 * a new unaligned end, the sector holding the old end when growing. */
	if (size != isize) {
		uint64_t data = 0;
		ret = has_inline(&w);
		if (ret < 0)
			return ret;
		if (ret > 0 && !(size <= MAX_INLINE && size < ss))
			data = UBT_ALIGN_UP(size, (uint64_t)ss);
		else if (!ret && ((size < isize && size % ss) || (size > isize && isize % ss)))
			data = ss;
		ret = data ? reserve_data(&w, data) : 0;
		if (ret)
			return ret;
	}
	if (size == isize) {
		/* As btrfs_setsize does: nothing changes but the space
		 * preallocated past the end, which goes; no new times. */
		ret = drop_extents(&w, UBT_ALIGN_UP(size, (uint64_t)ss), UINT64_MAX - ss);
		if (ret)
			return ret;
		btrfs_set_inode_transid(&w.inode, w.t->transid);
		return write_inode(&w);
	}
	uint8_t *old;
	size_t old_len;
	ret = take_inline(&w, &old, &old_len);
	if (ret)
		return ret;
	if (old) {
		/* Rewrite what remains: inline again when it still fits, else as
		 * a regular extent from 0. */
		uint8_t *c = calloc(1, (size_t)UBT_MAX(size, 1));
		if (!c) {
			free(old);
			return -ENOMEM;
		}
		memcpy(c, old, (size_t)UBT_MIN((uint64_t)old_len, size));
		free(old);
		if (size == 0)
			ret = 0;
		else if (size <= MAX_INLINE && size < ss)
			ret = write_inline(&w, c, (size_t)size);
		else {
			ret = reserve_data(&w, UBT_ALIGN_UP(size, (uint64_t)ss));
			if (!ret)
				ret = write_regular(&w, 0, c, (size_t)size);
		}
		free(c);
		if (ret)
			return ret;
		btrfs_set_inode_size(&w.inode, size);
		touch(&w, now);
		return write_inode(&w);
	}
	if (size < isize) {
		uint64_t keep = UBT_ALIGN_UP(size, (uint64_t)ss);
		ret = drop_extents(&w, keep, UINT64_MAX - ss);
		/* The partial sector at the new end keeps stale bytes past
		 * `size` on disk; reads stop at i_size, and a later extension
		 * must read zeros there: rewrite that sector zero-padded. */
		if (!ret && size % ss) {
			uint64_t a = size & ~((uint64_t)ss - 1);
			uint8_t *sec = calloc(1, ss);
			struct ubt_inode in = { w.ino, NULL, w.inode };
			const struct ubt_subvol *sv;
			if (!sec)
				ret = -ENOMEM;
			if (!ret)
				ret = ubt_fs_subvol(w.fs, subvol, &sv);
			if (!ret) {
				in.sv = sv;
				ssize_t n = ubt_file_read(w.fs, &in, sec, (size_t)(size - a), a);
				if (n < 0)
					ret = (int)n;
			}
			if (!ret)
				ret = write_data(&w, a, sec, (size_t)(size - a));
			free(sec);
		}
	} else {
		uint64_t old_end = UBT_ALIGN_UP(isize, (uint64_t)ss);
		ret = zero_tail(&w, subvol, isize);
		if (!ret)
			ret = insert_hole(&w, old_end, UBT_ALIGN_UP(size, (uint64_t)ss));
	}
	if (ret)
		return ret;
	btrfs_set_inode_size(&w.inode, size);
	touch(&w, now);
	return write_inode(&w);
}

/* ---- fallocate ------------------------------------------------------------ */

/* Rewrite an inline extent as a regular one from 0 (nothing if none). */
static int uninline(struct fw *w)
{
	uint8_t *old;
	size_t old_len;
	/* The sector it becomes is checked for before the inline extent
	 * goes (ENOSPC must leave it as it was). */
	int ret = has_inline(w);

	if (ret > 0)
		ret = reserve_data(w, w->fs->sectorsize);
	if (!ret)
		ret = take_inline(w, &old, &old_len);
	if (ret || !old)
		return ret;
	if (old_len)
		ret = write_regular(w, 0, old, old_len);
	free(old);
	return ret;
}

/* Is [pos, ...) inside an item with a data extent?  *end: where that item
 * ends (0: pos is in a gap or a hole item). */
static int data_at(struct fw *w, uint64_t pos, uint64_t *end)
{
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;
	int ret = item_le(w, pos, &key, &fi);

	*end = 0;
	if (ret < 0)
		return ret;
	if (ret == 0 && extent_end(&key, &fi) > pos &&
	    btrfs_file_extent_type(&fi) != BTRFS_FILE_EXTENT_INLINE &&
	    btrfs_file_extent_disk_bytenr(&fi) != 0)
		*end = extent_end(&key, &fi);
	return 0;
}

/* Where the gap starting at pos ends: the next item with a data extent,
 * or `limit`. */
static int gap_end(struct fw *w, uint64_t pos, uint64_t limit, uint64_t *end)
{
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;

	for (uint64_t q = pos; q < limit;) {
		int ret = item_ge(w, q, &key, &fi);
		if (ret < 0)
			return ret;
		if (ret == 1 || key.offset >= limit)
			break;
		if (btrfs_file_extent_disk_bytenr(&fi) != 0 &&
		    btrfs_file_extent_type(&fi) != BTRFS_FILE_EXTENT_INLINE) {
			*end = UBT_MAX(key.offset, pos);
			return 0;
		}
		q = UBT_MAX(extent_end(&key, &fi), key.offset + 1);	/* a hole item */
	}
	*end = limit;
	return 0;
}

/* Calls fn for every gap (no data extent) in [a, b) (sector aligned). */
static int for_gaps(struct fw *w, uint64_t a, uint64_t b,
		    int (*fn)(struct fw *w, uint64_t s, uint64_t e, void *ctx), void *ctx)
{
	uint64_t pos = a;

	while (pos < b) {
		uint64_t e;
		int ret = data_at(w, pos, &e);
		if (ret)
			return ret;
		if (e) {
			pos = e;
			continue;
		}
		ret = gap_end(w, pos, b, &e);
		if (!ret)
			ret = fn(w, pos, e, ctx);
		if (ret)
			return ret;
		pos = e;
	}
	return 0;
}

static int count_gap(struct fw *w, uint64_t s, uint64_t e, void *ctx)
{
	(void)w;
	*(uint64_t *)ctx += e - s;
	return 0;
}

/* Fill a gap with preallocated extents (hole items in it go). */
static int fill_gap(struct fw *w, uint64_t s, uint64_t e, void *ctx)
{
	(void)ctx;
	int ret = drop_extents(w, s, e);

	while (!ret && s < e) {
		uint64_t bytenr, got;
		ret = alloc_data(w, UBT_MIN(e - s, MAX_EXTENT), &bytenr, &got);
		if (ret)
			break;
		struct btrfs_file_extent_item fi = { 0 };
		btrfs_set_file_extent_generation(&fi, w->t->transid);
		btrfs_set_file_extent_ram_bytes(&fi, got);
		btrfs_set_file_extent_type(&fi, BTRFS_FILE_EXTENT_PREALLOC);
		btrfs_set_file_extent_disk_bytenr(&fi, bytenr);
		btrfs_set_file_extent_disk_num_bytes(&fi, got);
		btrfs_set_file_extent_num_bytes(&fi, got);
		ret = insert_extent_item(w, s, &fi);
		if (!ret)
			ret = data_ref(w, bytenr, got, s, 0, +1, true);
		w->nbytes_delta += (int64_t)got;
		s += got;
	}
	return ret;
}

/* Preallocate every gap of [a, b) (sector aligned); ENOSPC up front. */
static int prealloc(struct fw *w, uint64_t a, uint64_t b)
{
	uint64_t need = 0;
	int ret = for_gaps(w, a, b, count_gap, &need);

	if (ret || need == 0)
		return ret;
	ret = reserve_data(w, need);
	if (!ret)
		ret = for_gaps(w, a, b, fill_gap, NULL);
	if (!ret)
		btrfs_set_inode_flags(&w->inode, btrfs_inode_flags(&w->inode) |
					BTRFS_INODE_PREALLOC);
	return ret;
}

/* Zeros over [a, b) (inside one sector, below i_size) of a data extent. */
static int zero_part(struct fw *w, uint64_t subvol, uint64_t a, uint64_t b)
{
	uint32_t ss = w->fs->sectorsize;
	uint64_t s = a & ~((uint64_t)ss - 1), e;

	if (b <= a)
		return 0;
	int ret = data_at(w, s, &e);

	if (ret || !e)
		return ret;	/* a hole or prealloc reads zeros already */
	uint8_t *sec = calloc(1, ss);
	if (!sec)
		return -ENOMEM;
	uint64_t isize = btrfs_inode_size(&w->inode);
	size_t keep = (size_t)(UBT_MIN(isize, s + ss) - s);
	const struct ubt_subvol *sv;
	ret = ubt_fs_subvol(w->fs, subvol, &sv);
	if (!ret) {
		struct ubt_inode in = { w->ino, sv, w->inode };
		ssize_t n = ubt_file_read(w->fs, &in, sec, keep, s);
		if (n < 0)
			ret = (int)n;
	}
	if (!ret) {
		memset(sec + (a - s), 0, (size_t)(b - a));
		ret = write_data(w, s, sec, keep);
	}
	free(sec);
	return ret;
}

/* Punch [off, end) (clipped to the sector-rounded size): zeros in partial
 * sectors, holes over whole ones. */
static int punch(struct fw *w, uint64_t subvol, uint64_t off, uint64_t end)
{
	uint32_t ss = w->fs->sectorsize;
	uint64_t isize = btrfs_inode_size(&w->inode);
	uint64_t lim = UBT_ALIGN_UP(isize, (uint64_t)ss);
	int ret = 0;

	if (end >= isize)
		end = lim;	/* the rest of the last sector is not visible */
	if (off >= end)
		return 0;
	uint64_t a = UBT_ALIGN_UP(off, (uint64_t)ss), b = end & ~((uint64_t)ss - 1);
	if (a > b) {		/* inside one sector */
		return zero_part(w, subvol, off, UBT_MIN(end, isize));
	}
	if (off < a)
		ret = zero_part(w, subvol, off, a);
	if (!ret && b < end)
		ret = zero_part(w, subvol, b, UBT_MIN(end, isize));
	if (!ret && a < b) {
		ret = drop_extents(w, a, b);
		if (!ret)
			ret = insert_hole(w, a, b);
	}
	return ret;
}

int ubt_file_fallocate(struct ubt_trans *t, uint64_t subvol, uint64_t ino, int mode,
		       uint64_t off, uint64_t len, const struct btrfs_timespec *now)
{
	struct fw w;
	int ret;

	if (mode & ~(UBT_FALLOC_KEEP_SIZE | UBT_FALLOC_PUNCH_HOLE | UBT_FALLOC_ZERO_RANGE))
		return -EOPNOTSUPP;
	if ((mode & UBT_FALLOC_PUNCH_HOLE) &&
	    (!(mode & UBT_FALLOC_KEEP_SIZE) || (mode & UBT_FALLOC_ZERO_RANGE)))
		return -EOPNOTSUPP;
	if (len == 0)
		return -EINVAL;
	if (off + len < off || off + len > (uint64_t)INT64_MAX)
		return -EFBIG;
	ret = fw_open(&w, t, subvol, ino);
	if (!ret)
		ret = ubt_reserve_metadata(t, (mode & UBT_FALLOC_PUNCH_HOLE) != 0);
	if (ret)
		return ret;
	uint32_t ss = w.fs->sectorsize;
	uint64_t end = off + len, isize = btrfs_inode_size(&w.inode);
	bool grow = !(mode & UBT_FALLOC_KEEP_SIZE) && end > isize;

	uint64_t lim = UBT_ALIGN_UP(isize, (uint64_t)ss);
	bool alloc = !(mode & UBT_FALLOC_PUNCH_HOLE);
	uint64_t a = off & ~((uint64_t)ss - 1), b = UBT_ALIGN_UP(end, (uint64_t)ss);

	if (mode & UBT_FALLOC_ZERO_RANGE) {
		/* Partial sectors at the edges are zeroed in place. */
		a = UBT_ALIGN_UP(off, (uint64_t)ss);
		if (end < isize)
			b = end & ~((uint64_t)ss - 1);
	}
	/* ENOSPC before anything changes (the kernel reserves the whole range
	 * up front too): the gaps to preallocate - all of [a, b) once a
	 * ZERO_RANGE punched it - and a sector for an inline extent. */
	uint64_t need = 0;
	if (alloc && a < b) {
		if (mode & UBT_FALLOC_ZERO_RANGE)
			need = b - a;
		else
			ret = for_gaps(&w, a, b, count_gap, &need);
		if (ret)
			return ret;
	}
	/* uninline below turns an inline extent into a sector of data. */
	int inl = has_inline(&w);
	if (inl < 0)
		return inl;
	if (inl)
		need += ss;
	/* And the sectors rewritten zeroed: partial ones at the edges of a
	 * punch or zeroed range, the one holding an unaligned old end. */
	if (mode & (UBT_FALLOC_PUNCH_HOLE | UBT_FALLOC_ZERO_RANGE)) {
		if (off % ss && off < isize)
			need += ss;
		if (end % ss && end < isize)
			need += ss;
	}
	if ((grow || (alloc && a < b && a > lim)) && isize % ss)
		need += ss;
	if (need) {
		ret = reserve_data(&w, need);
		if (ret)
			return ret;
	}
	ret = uninline(&w);
	if (!ret && (mode & (UBT_FALLOC_PUNCH_HOLE | UBT_FALLOC_ZERO_RANGE)))
		ret = punch(&w, subvol, off, end);
	if (!ret && (grow || (alloc && a < b && a > lim)))
		ret = zero_tail(&w, subvol, isize);
	/* As the kernel does, space allocated past the end leaves no gap
	 * behind it: holes from the end up to it (without NO_HOLES). */
	if (!ret && alloc && a < b && a > lim)
		ret = insert_hole(&w, lim, a);
	if (!ret && alloc && a < b)
		ret = prealloc(&w, a, b);
	/* A grown size is covered to its end (holes where nothing else is). */
	if (!ret && grow)
		ret = insert_hole(&w, lim, UBT_ALIGN_UP(end, (uint64_t)ss));
	if (ret)
		return ret;
	if (grow)
		btrfs_set_inode_size(&w.inode, end);
	btrfs_set_inode_transid(&w.inode, w.t->transid);
	btrfs_set_inode_sequence(&w.inode, btrfs_inode_sequence(&w.inode) + 1);
	if (now) {	/* file_modified(): every mode */
		w.inode.ctime = *now;
		w.inode.mtime = *now;
	}
	return write_inode(&w);
}

/* ---- clone (reflink) -------------------------------------------------------- */

struct piece {
	uint64_t start, end;		/* file range of the source covered */
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;
};

/* The source's extent items over [a, b), clipped; holes left out. */
static int collect(struct fw *ws, uint64_t a, uint64_t b, struct piece **out, size_t *n)
{
	struct piece *v = NULL;
	size_t cnt = 0, cap = 0;
	uint64_t pos = a;
	struct btrfs_key key;
	struct btrfs_file_extent_item fi;
	int ret = item_le(ws, a, &key, &fi);

	if (ret < 0)
		return ret;
	if (ret == 1 || extent_end(&key, &fi) <= a)
		goto next;
	for (;;) {
		if (btrfs_file_extent_type(&fi) == BTRFS_FILE_EXTENT_INLINE) {
			free(v);
			return -EOPNOTSUPP;	/* the caller copies instead */
		}
		uint64_t s = UBT_MAX(key.offset, a), e = UBT_MIN(extent_end(&key, &fi), b);
		if (s < e && btrfs_file_extent_disk_bytenr(&fi) != 0) {
			if (cnt == cap) {
				cap = cap ? cap * 2 : 16;
				struct piece *nv = realloc(v, cap * sizeof(*nv));
				if (!nv) {
					free(v);
					return -ENOMEM;
				}
				v = nv;
			}
			v[cnt].start = s;
			v[cnt].end = e;
			v[cnt].key = key;
			v[cnt].fi = fi;
			cnt++;
		}
		pos = UBT_MAX(extent_end(&key, &fi), key.offset + 1);
next:
		if (pos >= b)
			break;
		ret = item_ge(ws, pos, &key, &fi);
		if (ret < 0) {
			free(v);
			return ret;
		}
		if (ret == 1 || key.offset >= b)
			break;
	}
	*out = v;
	*n = cnt;
	return 0;
}

int ubt_file_clone(struct ubt_trans *t, uint64_t subvol, uint64_t src, uint64_t src_off,
		   uint64_t dst, uint64_t dst_off, uint64_t len, const struct btrfs_timespec *now)
{
	struct fw ws, w;
	struct piece *pieces = NULL;
	size_t n = 0;
	int ret = fw_open(&ws, t, subvol, src);

	if (!ret)
		ret = fw_open(&w, t, subvol, dst);
	if (ret)
		return ret;
	uint32_t ss = w.fs->sectorsize;
	uint64_t ssize = btrfs_inode_size(&ws.inode), isize = btrfs_inode_size(&w.inode);
	if (len == 0)
		return 0;
	if (src_off % ss || dst_off % ss || src_off + len > ssize ||
	    (len % ss && !(src_off + len == ssize && dst_off + len >= isize)))
		return -EINVAL;
	if ((btrfs_inode_flags(&ws.inode) ^ btrfs_inode_flags(&w.inode)) & BTRFS_INODE_NODATASUM)
		return -EINVAL;
	if (src == dst && src_off < dst_off + len && dst_off < src_off + len)
		return -EINVAL;
	uint64_t span = UBT_ALIGN_UP(len, (uint64_t)ss);
	ret = ubt_reserve_metadata(t, false);
	if (ret)
		return ret;
	ret = collect(&ws, src_off, src_off + span, &pieces, &n);
	if (ret)
		return ret;
	/* Data written before the clone: the sector an inline extent
	 * becomes, the one holding an unaligned end the clone starts past. */
	uint64_t need = 0;
	ret = has_inline(&w);
	if (ret > 0)
		need += ss;
	if (ret >= 0 && dst_off > isize && isize % ss)
		need += ss;
	ret = ret < 0 ? ret : need ? reserve_data(&w, need) : 0;
	if (!ret)
		ret = uninline(&w);
	if (!ret && dst_off > isize)
		ret = zero_tail(&w, subvol, isize);
	if (!ret && dst_off > UBT_ALIGN_UP(isize, (uint64_t)ss))
		ret = insert_hole(&w, UBT_ALIGN_UP(isize, (uint64_t)ss), dst_off);
	if (!ret)
		ret = drop_extents(&w, dst_off, dst_off + span);
	for (size_t i = 0; i < n && !ret; i++) {
		struct piece *p = &pieces[i];
		struct btrfs_file_extent_item fi = p->fi;
		uint64_t pos = dst_off + (p->start - src_off);
		uint64_t xoff = btrfs_file_extent_offset(&fi) + (p->start - p->key.offset);
		btrfs_set_file_extent_offset(&fi, xoff);
		btrfs_set_file_extent_num_bytes(&fi, p->end - p->start);
		ret = insert_extent_item(&w, pos, &fi);
		if (!ret)
			ret = data_ref(&w, btrfs_file_extent_disk_bytenr(&fi),
				       btrfs_file_extent_disk_num_bytes(&fi), pos, xoff, +1, false);
		w.nbytes_delta += (int64_t)(p->end - p->start);
	}
	free(pieces);
	if (!ret)
		ret = insert_hole(&w, dst_off, dst_off + span);
	if (ret)
		return ret;
	if (dst_off + len > isize)
		btrfs_set_inode_size(&w.inode, dst_off + len);
	touch(&w, now);
	return write_inode(&w);
}
