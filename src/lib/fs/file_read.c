/*
 * fs layer: reading file data — inline, regular and preallocated extents,
 * holes (explicit or NO_HOLES gaps), compressed extents (whole or partially
 * referenced), and data checksums from the csum tree, trying every copy of a
 * sector before answering -EIO.
 *
 * A file extent item at key offset F covers file bytes [F, F + num_bytes)
 * (inline: [0, ram_bytes)).  Uncompressed data for file byte P lives at
 * disk_bytenr + offset + (P - F).  Compressed extents are read whole
 * (disk_num_bytes, at most 128 KiB expanded), checked, expanded, and the
 * referenced slice [offset, offset + num_bytes) is used.  Checksums always
 * cover what is on disk: the compressed bytes for compressed extents.
 *
 * Zero copy: ubt_file_read_vec() answers uncompressed data that lies in a
 * mapped device (ubt_volume_map) with pointers into the mapping, verified in
 * place; everything else (holes, inline, compressed, unmappable or failing
 * copies) is produced in the caller's buffer as ubt_file_read() does.  What
 * the mapping reads from disk is steered per read (see "Reading through the
 * mapping"): exactly the touched pages, or the kernel's read-ahead for
 * sequential streams.
 */
#include "fs.h"

#include "base/base.h"
#include "fs/compress.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

/*
 * Fill csums[i] for each sector of [bytenr, bytenr + n * sectorsize) that
 * has a checksum; have[i] says which do.
 */
static int lookup_csums(struct ubt_fs *fs, uint64_t bytenr, size_t nsect, uint8_t *csums,
			bool *have)
{
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	uint64_t end = bytenr + (uint64_t)nsect * ss;
	struct btrfs_key key = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, bytenr };
	struct btrfs_key max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, end - 1 };
	struct ubt_path path;
	struct ubt_iter it;
	uint64_t start = bytenr;
	int ret;

	memset(have, 0, nsect * sizeof(*have));
	if (!fs->has_csum_tree)
		return 0;
	/* The item covering bytenr may start before it. */
	ubt_path_init(&path);
	ret = ubt_search_le(&fs->tree, &fs->csum_tree, &key, &path);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		struct btrfs_key k;
		ubt_eb_item_key(path.nodes[0], path.slots[0], &k);
		if (k.objectid == BTRFS_EXTENT_CSUM_OBJECTID && k.type == BTRFS_EXTENT_CSUM_KEY)
			start = k.offset;
	}
	ubt_path_release(&fs->tree, &path);

	struct btrfs_key min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, start };
	ubt_iter_start(&it, &fs->tree, &fs->csum_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		uint64_t item_start = it.key.offset;
		uint64_t item_end = item_start + (uint64_t)(it.size / cs) * ss;
		uint64_t a = UBT_MAX(item_start, bytenr), b = UBT_MIN(item_end, end);
		for (uint64_t x = a; x < b; x += ss) {
			size_t i = (size_t)((x - bytenr) / ss);
			memcpy(csums + i * cs, it.data + (x - item_start) / ss * cs, cs);
			have[i] = true;
		}
	}
	ubt_iter_end(&it);
	if (ret >= 0 && fs->held_csums)
		fs->held_csums(fs, bytenr, nsect, csums, have);
	return ret < 0 ? ret : 0;
}

/*
 * Read [bytenr, bytenr + len) (sector aligned) into buf with checksum
 * verification, sector by sector falling back to the other copies.
 */
static int read_data_verified(struct ubt_fs *fs, uint64_t bytenr, uint8_t *buf, size_t len,
			      bool verify)
{
	uint32_t ss = fs->sectorsize;
	size_t nsect = len / ss;
	int copies = ubt_volume_num_copies(fs->vol, bytenr);
	uint8_t *csums = NULL;
	bool *have = NULL;
	int ret;

	if (copies <= 0)
		return UBT_CORRUPT(bytenr, "data address not mapped by any chunk");
	ret = ubt_volume_read(fs->vol, bytenr, buf, len, 1);
	if (!verify && ret == 0)
		return 0;
	if (verify) {
		csums = malloc(nsect * fs->csum_size + 1);
		have = malloc(nsect * sizeof(*have) + 1);
		if (!csums || !have) {
			ret = -ENOMEM;
			goto out;
		}
		int lr = lookup_csums(fs, bytenr, nsect, csums, have);
		if (lr) {
			ret = lr;
			goto out;
		}
	}
	bool whole_ok = ret == 0;
	for (size_t i = 0; i < nsect; i++) {
		uint8_t *sec = buf + i * ss;
		uint8_t got[UBT_CSUM_MAX];
		bool ok = false;

		int bad = 0;
		for (int m = 1; m <= copies; m++) {
			/* Copy 1 of every sector is already in buf when the
			 * whole read worked; otherwise read this sector alone. */
			if (m > 1 || !whole_ok) {
				int r = ubt_volume_read(fs->vol, bytenr + i * ss, sec, ss, m);
				if (r) {
					bad += r != -ENXIO;	/* missing device: quiet */
					continue;
				}
			}
			if (!verify || !have[i]) {
				ok = true;
				break;
			}
			ubt_csum(fs->csum_type, sec, ss, got);
			if (!memcmp(got, csums + i * fs->csum_size, fs->csum_size)) {
				if (bad)
					ubt_log(UBT_LOG_WARNING,
						"data at %llu: copy %d is good, earlier copies were bad",
						(unsigned long long)(bytenr + i * ss), m);
				ok = true;
				break;
			}
			bad++;
			char where[160];
			ubt_volume_describe(fs->vol, bytenr + i * ss, m, where, sizeof(where));
			ubt_log(copies > 1 ? UBT_LOG_WARNING : UBT_LOG_ERROR,
				"data checksum mismatch at logical %llu (copy %d of %d, %s)",
				(unsigned long long)(bytenr + i * ss), m, copies, where);
		}
		if (!ok)
			ubt_log(UBT_LOG_ERROR, "data at logical %llu: no good copy",
				(unsigned long long)(bytenr + i * ss));
		if (!ok) {
			ret = -EIO;
			goto out;
		}
	}
	ret = 0;
out:
	free(csums);
	free(have);
	return ret;
}

struct extent_info {
	uint64_t file_start, file_end;	/* the file bytes this item covers */
	uint8_t type, compression;
	uint64_t disk_bytenr, disk_num_bytes, offset, ram_bytes;
	const uint8_t *inline_data;
	size_t inline_len;
};

static int parse_extent(const struct btrfs_key *key, const uint8_t *data, uint32_t size,
			uint64_t where, struct extent_info *x)
{
	const struct btrfs_file_extent_item *fi = (const void *)data;

	if (size < btrfs_file_extent_inline_start())
		return UBT_CORRUPT(where, "file extent item too small");
	memset(x, 0, sizeof(*x));
	x->type = btrfs_file_extent_type(fi);
	x->compression = btrfs_file_extent_compression(fi);
	x->ram_bytes = btrfs_file_extent_ram_bytes(fi);
	x->file_start = key->offset;
	if (btrfs_file_extent_encryption(fi) || btrfs_file_extent_other_encoding(fi))
		return UBT_CORRUPT(where, "encrypted or encoded file extent is not supported");
	if (x->type == BTRFS_FILE_EXTENT_INLINE) {
		x->inline_data = data + btrfs_file_extent_inline_start();
		x->inline_len = size - btrfs_file_extent_inline_start();
		x->file_end = x->file_start + x->ram_bytes;
		return 0;
	}
	if (size < sizeof(*fi))
		return UBT_CORRUPT(where, "regular file extent item too small");
	x->disk_bytenr = btrfs_file_extent_disk_bytenr(fi);
	x->disk_num_bytes = btrfs_file_extent_disk_num_bytes(fi);
	x->offset = btrfs_file_extent_offset(fi);
	x->file_end = x->file_start + btrfs_file_extent_num_bytes(fi);
	if (x->file_end < x->file_start)
		return UBT_CORRUPT(where, "file extent end overflows");
	return 0;
}

/* Copy file bytes [a, b) of extent x into dst (dst corresponds to byte a). */
static int read_extent_part(struct ubt_fs *fs, const struct ubt_inode *in,
			    const struct extent_info *x, uint64_t a, uint64_t b, uint8_t *dst)
{
	uint32_t ss = fs->sectorsize;
	bool verify = !(btrfs_inode_flags(&in->item) & BTRFS_INODE_NODATASUM);
	int ret;

	if (x->type == BTRFS_FILE_EXTENT_INLINE) {
		if (x->compression == BTRFS_COMPRESS_NONE) {
			uint64_t avail = x->inline_len;
			for (uint64_t p = a; p < b; p++)
				dst[p - a] = (p - x->file_start) < avail ? x->inline_data[p - x->file_start] : 0;
			return 0;
		}
		if (x->ram_bytes > UBT_MAX_UNCOMPRESSED)
			return UBT_CORRUPT(0, "inline compressed extent of %llu bytes",
					   (unsigned long long)x->ram_bytes);
		return ubt_decompress_range(x->compression, x->inline_data, x->inline_len, ss,
					    a - x->file_start, dst, (size_t)(b - a), NULL);
	}
	if (x->type == BTRFS_FILE_EXTENT_PREALLOC || x->disk_bytenr == 0) {
		memset(dst, 0, (size_t)(b - a));
		return 0;
	}
	if (x->compression != BTRFS_COMPRESS_NONE) {
		if (x->disk_num_bytes == 0 || x->disk_num_bytes > UBT_MAX_UNCOMPRESSED * 2 ||
		    !UBT_IS_ALIGNED(x->disk_num_bytes, ss))
			return UBT_CORRUPT(x->disk_bytenr, "compressed extent of %llu bytes",
					   (unsigned long long)x->disk_num_bytes);
		if (x->ram_bytes > UBT_MAX_UNCOMPRESSED ||
		    x->offset + (x->file_end - x->file_start) > x->ram_bytes)
			return UBT_CORRUPT(x->disk_bytenr,
					   "compressed extent reference [%llu, +%llu) outside ram_bytes %llu",
					   (unsigned long long)x->offset,
					   (unsigned long long)(x->file_end - x->file_start),
					   (unsigned long long)x->ram_bytes);
		uint8_t *cbuf = malloc((size_t)x->disk_num_bytes);
		if (!cbuf)
			return -ENOMEM;
		ret = read_data_verified(fs, x->disk_bytenr, cbuf, (size_t)x->disk_num_bytes, verify);
		if (!ret)
			ret = ubt_decompress_range(x->compression, cbuf, (size_t)x->disk_num_bytes, ss,
						   x->offset + (a - x->file_start), dst,
						   (size_t)(b - a), NULL);
		free(cbuf);
		return ret;
	}
	/* Uncompressed: read the covering sectors, verify, copy the slice. */
	uint64_t disk_a = x->disk_bytenr + x->offset + (a - x->file_start);
	uint64_t start = disk_a & ~((uint64_t)ss - 1);
	uint64_t end = (disk_a + (b - a) + ss - 1) & ~((uint64_t)ss - 1);
	if (start == disk_a && end == disk_a + (b - a))
		return read_data_verified(fs, start, dst, (size_t)(b - a), verify);
	uint8_t *tmp = malloc((size_t)(end - start));
	if (!tmp)
		return -ENOMEM;
	ret = read_data_verified(fs, start, tmp, (size_t)(end - start), verify);
	if (!ret)
		memcpy(dst, tmp + (disk_a - start), (size_t)(b - a));
	free(tmp);
	return ret;
}

/*
 * Verify the mapped copy of [bytenr, bytenr + len) (sector aligned) against
 * the csum tree without logging: 0 when every sector with a checksum
 * matches, 1 when one does not (the caller then takes the logged read path
 * that tries the other copies), <0 on errors.
 */
static int verify_mapped(struct ubt_fs *fs, uint64_t bytenr, const uint8_t *p, size_t len)
{
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	size_t nsect = len / ss;
	uint8_t *csums = malloc(nsect * cs + 1);
	bool *have = malloc(nsect * sizeof(*have) + 1);
	int ret;

	if (!csums || !have) {
		ret = -ENOMEM;
		goto out;
	}
	ret = lookup_csums(fs, bytenr, nsect, csums, have);
	for (size_t i = 0; ret == 0 && i < nsect; i++) {
		uint8_t got[UBT_CSUM_MAX];
		if (!have[i])
			continue;
		if (i + 1 < nsect)	/* mapped pages come from memory, not cache */
			ubt_prefetch(p + (i + 1) * ss, ss);
		ubt_csum(fs->csum_type, p + i * ss, ss, got);
		if (memcmp(got, csums + i * cs, cs))
			ret = 1;
	}
out:
	free(csums);
	free(have);
	return ret;
}

/*
 * Reading through the mapping.  A page fault on a mapped file makes the
 * kernel read around the faulting page: a window of the file's read-ahead
 * size (8 MiB on some disks), then, as the reader reaches the window's
 * marks, the next windows asynchronously, in large folios.  That streams
 * big sequential reads at full speed with little CPU, but a random 4 KiB
 * read would cost a whole window from disk.  So only reads that continue a
 * sequential stream are left to the kernel's read-ahead; every other read
 * first asks for exactly the pages it will touch (MADV_WILLNEED: one disk
 * read for the range), and its faults then find them cached, which starts
 * no read-around.
 *
 * Streams are followed by logical address: a read starting within
 * RA_SLACK of where a recent read ended (the daemon's threads may take the
 * kernel's read-ahead requests slightly out of order) continues that
 * stream; from its RA_HITS-th continuation on it is sequential.  Random
 * reads almost never continue one stream RA_HITS times in a row.  The
 * table is shared by every filesystem of the process (keyed by volume) and
 * holds hints only: a stale or lost entry costs one read-around window or
 * one exact prefetch too many.
 *
 * Drop-behind (ubt_file_read_vec only: the zero-copy path of read-only
 * mounts): what a sequential stream has read more than RA_DROP_LAG before
 * the start of the current read is let go from the host's page cache
 * (ubt_volume_drop_cached), in steps of at least RA_DROP_STEP and at most
 * RA_DROP_MAX (a stale entry of a closed volume whose address comes back
 * drops no more than that).  The FUSE file's page cache holds those bytes
 * already, so keeping the image's copy doubled the memory a big read
 * takes; and the next read-ahead reuses the pages just freed instead of
 * pages that must be made ready afresh, which on a VM whose host takes
 * free memory back (free page reporting) costs more CPU than the reading
 * itself (PERFORMANCE.md, fourteenth session).  Requests larger than
 * RA_DROP_LAG / 2 drop nothing, so a request never drops its own pages;
 * the lag is far behind what other requests in flight touch, and one that
 * still lands there reads the disk again - as when memory pressure evicts
 * a page between its check and the reply.
 */
#define RA_STREAMS 8
#define RA_SLACK (512u << 10)
#define RA_HITS 3
#define RA_DROP_LAG (8u << 20)
#define RA_DROP_STEP (2u << 20)
#define RA_DROP_MAX (32u << 20)

struct ra_stream {
	const void *vol;	/* NULL: free slot */
	uint64_t next;		/* logical end of the stream's latest read */
	uint64_t stamp;		/* last use, for replacement */
	uint64_t dropped;	/* logical start of what is not dropped yet */
	unsigned hits;		/* reads that continued the stream */
};

static pthread_mutex_t ra_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ra_stream ra_streams[RA_STREAMS];
static uint64_t ra_clock;

/*
 * Note a read of logical [a, e) on vol: does it continue a sequential
 * stream?  When it does, `drop` is set and the stream's tail is due to be
 * dropped, that range is set in [*drop_a, *drop_e) (else *drop_e ==
 * *drop_a).
 */
static bool ra_sequential(const void *vol, uint64_t a, uint64_t e, bool drop, uint64_t *drop_a,
			  uint64_t *drop_e)
{
	struct ra_stream *s = NULL, *victim = &ra_streams[0];
	bool seq;

	pthread_mutex_lock(&ra_lock);
	ra_clock++;
	for (size_t i = 0; i < RA_STREAMS; i++) {
		struct ra_stream *c = &ra_streams[i];
		if (c->vol == vol && a + RA_SLACK >= c->next && a <= c->next + RA_SLACK) {
			s = c;
			break;
		}
		if (!c->vol || (victim->vol && c->stamp < victim->stamp))
			victim = c;
	}
	*drop_a = *drop_e = 0;
	if (!s) {
		*victim = (struct ra_stream){ .vol = vol, .next = e, .stamp = ra_clock,
					      .dropped = a };
		pthread_mutex_unlock(&ra_lock);
		return false;
	}
	s->stamp = ra_clock;
	s->hits += s->hits < RA_HITS;
	s->next = UBT_MAX(s->next, e);
	seq = s->hits >= RA_HITS;
	uint64_t lim = UBT_MIN(s->next, a);	/* behind this read's start */
	if (seq && drop && lim >= RA_DROP_LAG && lim - RA_DROP_LAG >= s->dropped + RA_DROP_STEP) {
		*drop_e = lim - RA_DROP_LAG;
		*drop_a = UBT_MAX(s->dropped, *drop_e - RA_DROP_MAX);
		s->dropped = *drop_e;	/* claimed: no other thread drops it too */
	}
	pthread_mutex_unlock(&ra_lock);
	return seq;
}

/* A drop claimed up to `claimed` got only to `got`: the rest is due again. */
static void ra_dropped(const void *vol, uint64_t claimed, uint64_t got)
{
	if (got >= claimed)
		return;
	pthread_mutex_lock(&ra_lock);
	for (size_t i = 0; i < RA_STREAMS; i++) {
		struct ra_stream *c = &ra_streams[i];
		if (c->vol == vol && c->dropped == claimed) {
			c->dropped = got;
			break;
		}
	}
	pthread_mutex_unlock(&ra_lock);
}

/*
 * The segment list of ubt_file_read_vec: file bytes [vec->from, cursor) are
 * described by iov[0..n); bytes from `cursor` on that are not mapped are
 * produced in buf and added as one segment when the next mapped piece (or
 * the end) comes.
 */
struct read_vec {
	struct iovec *iov;
	size_t n, cap;
	uint8_t *buf;		/* file byte `from` is buf[0] */
	uint64_t from, cursor;
	bool drop_behind;	/* small enough a request to drop behind it */
};

static void vec_add(struct read_vec *v, const void *p, size_t len)
{
	struct iovec *last = v->n ? &v->iov[v->n - 1] : NULL;

	if (!len)
		return;
	if (last && (const uint8_t *)last->iov_base + last->iov_len == (const uint8_t *)p) {
		last->iov_len += len;
		return;
	}
	v->iov[v->n].iov_base = (void *)(uintptr_t)p;
	v->iov[v->n].iov_len = len;
	v->n++;
}

/* Describe file bytes [cursor, to) by the caller's buffer. */
static void vec_flush_buf(struct read_vec *v, uint64_t to)
{
	if (to > v->cursor) {
		vec_add(v, v->buf + (v->cursor - v->from), (size_t)(to - v->cursor));
		v->cursor = to;
	}
}

/*
 * Answer file bytes [a, b) of uncompressed extent x from the mapped device:
 * returns how far (from a) it got; the rest is for the buffer path.  Only
 * sector-aligned starts are mapped (reads at sector-aligned offsets, which
 * the kernel's page-sized requests always are); a tail that ends inside a
 * sector is verified as the whole sector.
 */
static uint64_t map_extent_part(struct ubt_fs *fs, bool verify, const struct extent_info *x,
				uint64_t a, uint64_t b, struct read_vec *v)
{
	uint32_t ss = fs->sectorsize;
	uint64_t disk = x->disk_bytenr + x->offset + (a - x->file_start);
	uint64_t done = a;

	if (disk % ss)
		return a;
	while (done < b && v->cap - v->n >= 3) {	/* room for buf + map + buf */
		uint64_t want = b - done;
		size_t want_r = (size_t)UBT_MIN((want + ss - 1) / ss * ss, (uint64_t)SIZE_MAX / 2);
		const uint8_t *p;
		size_t n = ubt_volume_map(fs->vol, disk, want_r, 1, &p) / ss * ss;
		if (n == 0)
			break;
		size_t use = (size_t)UBT_MIN((uint64_t)n, want);
		size_t span = (use + ss - 1) / ss * ss;		/* <= n */
		uint64_t drop_a, drop_e;
		if (!ra_sequential(fs->vol, disk, disk + span, v->drop_behind, &drop_a, &drop_e))
			ubt_map_willneed(p, span);
		else if (drop_e > drop_a)
			ra_dropped(fs->vol, drop_e,
				   ubt_volume_drop_cached(fs->vol, drop_a, drop_e - drop_a));
		if (verify && verify_mapped(fs, disk, p, span) != 0)
			break;
		vec_flush_buf(v, done);
		vec_add(v, p, use);
		v->cursor = done + use;
		done += use;
		disk += use;
	}
	return done;
}

/* Walk the extent items overlapping [from, to). fn gets each parsed one. */
static int for_each_extent(struct ubt_fs *fs, const struct ubt_inode *in, uint64_t from,
			   uint64_t to,
			   int (*fn)(void *ctx, const struct extent_info *x), void *ctx)
{
	struct btrfs_key key = { in->ino, BTRFS_EXTENT_DATA_KEY, from };
	struct ubt_path path;
	uint64_t first = 0;
	struct ubt_iter it;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_le(&fs->tree, &in->sv->root, &key, &path);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		struct btrfs_key k;
		ubt_eb_item_key(path.nodes[0], path.slots[0], &k);
		if (k.objectid == in->ino && k.type == BTRFS_EXTENT_DATA_KEY)
			first = k.offset;
	}
	ubt_path_release(&fs->tree, &path);

	struct btrfs_key min = { in->ino, BTRFS_EXTENT_DATA_KEY, first };
	struct btrfs_key max = { in->ino, BTRFS_EXTENT_DATA_KEY, to ? to - 1 : 0 };
	ubt_iter_start(&it, &fs->tree, &in->sv->root, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		struct extent_info x;
		ret = parse_extent(&it.key, it.data, it.size, it.leaf->start, &x);
		if (ret)
			break;
		if (x.file_end <= from)
			continue;
		ret = fn(ctx, &x);
		if (ret)
			break;
	}
	ubt_iter_end(&it);
	return ret == 1 ? 0 : ret;
}

struct read_ctx {
	struct ubt_fs *fs;
	const struct ubt_inode *in;
	uint8_t *buf;
	uint64_t from, to;
	uint64_t zeroed_to;	/* buf holds defined bytes for [from, zeroed_to) */
	struct read_vec *vec;	/* NULL: everything into buf */
};

/* Holes and NO_HOLES gaps read as zeros: clear what no extent covered. */
static void zero_gap(struct read_ctx *r, uint64_t to)
{
	if (to > r->zeroed_to) {
		memset(r->buf + (r->zeroed_to - r->from), 0, (size_t)(to - r->zeroed_to));
		r->zeroed_to = to;
	}
}

static int read_one(void *ctx, const struct extent_info *x)
{
	struct read_ctx *r = ctx;
	uint64_t a = UBT_MAX(x->file_start, r->from), b = UBT_MIN(x->file_end, r->to);

	if (a >= b)
		return 0;
	zero_gap(r, a);
	if (r->vec && x->type == BTRFS_FILE_EXTENT_REG && x->disk_bytenr != 0 &&
	    x->compression == BTRFS_COMPRESS_NONE) {
		bool verify = !(btrfs_inode_flags(&r->in->item) & BTRFS_INODE_NODATASUM);
		a = map_extent_part(r->fs, verify, x, a, b, r->vec);
		if (a >= b) {
			r->zeroed_to = UBT_MAX(r->zeroed_to, b);
			return 0;
		}
	}
	int ret = read_extent_part(r->fs, r->in, x, a, b, r->buf + (a - r->from));
	if (ret < 0)
		return ret;
	r->zeroed_to = UBT_MAX(r->zeroed_to, b);
	return 0;
}

static ssize_t file_read(struct ubt_fs *fs, const struct ubt_inode *in, void *buf, size_t len,
			 uint64_t off, struct read_vec *vec)
{
	uint64_t isize = btrfs_inode_size(&in->item);
	mode_t mode = ubt_inode_mode(in);
	int ret;

	if (S_ISDIR(mode))
		return -EISDIR;
	if (off >= isize || len == 0)
		return 0;
	if (len > isize - off)
		len = (size_t)(isize - off);
	struct read_ctx r = { fs, in, buf, off, off + len, off, vec };
	ret = for_each_extent(fs, in, off, off + len, read_one, &r);
	if (ret < 0)
		return ret;
	zero_gap(&r, off + len);
	if (vec)
		vec_flush_buf(vec, off + len);
	return (ssize_t)len;
}

ssize_t ubt_file_read(struct ubt_fs *fs, const struct ubt_inode *in, void *buf, size_t len,
		      uint64_t off)
{
	return file_read(fs, in, buf, len, off, NULL);
}

ssize_t ubt_file_read_vec(struct ubt_fs *fs, const struct ubt_inode *in, void *buf, size_t len,
			  uint64_t off, struct iovec *iov, size_t *iovcnt)
{
	struct read_vec v = { iov, 0, *iovcnt, buf, off, off, len <= RA_DROP_LAG / 2 };

	*iovcnt = 0;
	if (v.cap < 3) {
		ssize_t n = file_read(fs, in, buf, len, off, NULL);
		if (n > 0 && v.cap) {
			iov[0].iov_base = buf;
			iov[0].iov_len = (size_t)n;
			*iovcnt = 1;
		}
		return n;
	}
	ssize_t n = file_read(fs, in, buf, len, off, &v);
	if (n >= 0)
		*iovcnt = v.n;
	return n;
}

struct ranges_ctx {
	int (*fn)(void *ctx, uint64_t off, uint64_t len);
	void *ctx;
	uint64_t isize;
};

static int range_one(void *ctx, const struct extent_info *x)
{
	struct ranges_ctx *r = ctx;

	if (x->type != BTRFS_FILE_EXTENT_INLINE &&
	    (x->type == BTRFS_FILE_EXTENT_PREALLOC || x->disk_bytenr == 0))
		return 0;
	uint64_t end = UBT_MIN(x->file_end, r->isize);
	if (end <= x->file_start)
		return 0;
	return r->fn(r->ctx, x->file_start, end - x->file_start);
}

int ubt_file_data_ranges(struct ubt_fs *fs, const struct ubt_inode *in,
			 int (*fn)(void *ctx, uint64_t off, uint64_t len), void *ctx)
{
	struct ranges_ctx r = { fn, ctx, btrfs_inode_size(&in->item) };

	if (r.isize == 0)
		return 0;
	return for_each_extent(fs, in, 0, (uint64_t)-1, range_one, &r);
}
