/*
 * tree layer: the tree block printer (dump-tree text).
 *
 * Owns: turning one raw tree block into the text btrfs-progs 6.2 prints for
 * it with `btrfs inspect-internal dump-tree` (-b): header lines, then every
 * leaf item with its decoded body, or every node key pointer.  The output
 * format (field names, order, spacing, progs' quirks) is reproduced from
 * observation of the progs 6.2 binary; the code is our own.
 *
 * Invariants:
 *  - Every byte is read through blk_* helpers that bounds-check against the
 *    block size: fields that lie past the block end read as zero, so the
 *    printer never touches memory outside the block, whatever the block says.
 *    Reads that run past an item's end but stay inside the block are allowed
 *    on purpose: progs reads them too, and printing the same bytes keeps the
 *    outputs identical on damaged items.
 *  - An item whose offset/size points outside the leaf data area ends the
 *    listing with an error line (as progs does); nodes never print more
 *    pointers than fit in the block.
 *  - Text is assembled in a fixed buffer and handed to the caller's writer;
 *    no allocation, no global state, no stdout.  Thread safe.
 * Locks: none.
 *
 * Where progs 6.2 has undefined behaviour on damaged items (a ROOT_ITEM
 * larger than the structure, a ROOT_REF name longer than 255 bytes, bytes
 * past the block end) we print a clamped, deterministic form.  A time that
 * localtime() cannot convert prints what glibc leaves behind (out_timespec).
 */
#include "tree/print.h"

#include "base/base.h"
#include "format/format_names.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Output buffer                                                            */
/* ------------------------------------------------------------------------ */

#define OUT_BUF_SIZE 4096

struct pout {
	const struct ubt_print_ctx *ctx;
	const uint8_t *blk;	/* the block */
	uint32_t size;		/* its size (ctx->nodesize) */
	uint64_t bytenr;	/* header bytenr, for messages */
	struct tm last_tm;	/* the previous time conversion (see out_timespec) */
	size_t len;
	char buf[OUT_BUF_SIZE];
};

static void out_flush(struct pout *o)
{
	if (o->len && o->ctx->write)
		o->ctx->write(o->ctx->wctx, o->buf, o->len);
	o->len = 0;
}

static void out_bytes(struct pout *o, const char *s, size_t n)
{
	while (n) {
		size_t room = sizeof(o->buf) - o->len;
		size_t c = n < room ? n : room;

		memcpy(o->buf + o->len, s, c);
		o->len += c;
		s += c;
		n -= c;
		if (o->len == sizeof(o->buf))
			out_flush(o);
	}
}

static void out_str(struct pout *o, const char *s)
{
	out_bytes(o, s, strlen(s));
}

UBT_PRINTF(2, 3)
static void out_printf(struct pout *o, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	/* every format here is bounded well below the buffer size */
	out_bytes(o, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/*
 * An "ERROR: "/"WARNING: " line for the error writer (progs: stderr).  The
 * listing is flushed first so a shared sink keeps the order.
 */
UBT_PRINTF(3, 4)
static void out_diag(struct pout *o, const char *prefix, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n, p;

	p = snprintf(tmp, sizeof(tmp), "%s", prefix);
	va_start(ap, fmt);
	n = vsnprintf(tmp + p, sizeof(tmp) - (size_t)p - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n += p;
	if ((size_t)n > sizeof(tmp) - 2)
		n = (int)sizeof(tmp) - 2;
	tmp[n++] = '\n';
	out_flush(o);
	if (o->ctx->err_write)
		o->ctx->err_write(o->ctx->err_wctx, tmp, (size_t)n);
	else if (o->ctx->write)
		o->ctx->write(o->ctx->wctx, tmp, (size_t)n);
}

/* ------------------------------------------------------------------------ */
/* Bounds-checked block reads (absolute offsets into the block)             */
/* ------------------------------------------------------------------------ */

static int blk_has(const struct pout *o, uint64_t off, uint64_t n)
{
	return off <= o->size && n <= o->size - off;
}

static uint8_t blk8(const struct pout *o, uint64_t off)
{
	return blk_has(o, off, 1) ? o->blk[off] : 0;
}

static uint16_t blk16(const struct pout *o, uint64_t off)
{
	return blk_has(o, off, 2) ? ubt_get_le16(o->blk + off) : 0;
}

static uint32_t blk32(const struct pout *o, uint64_t off)
{
	return blk_has(o, off, 4) ? ubt_get_le32(o->blk + off) : 0;
}

static uint64_t blk64(const struct pout *o, uint64_t off)
{
	return blk_has(o, off, 8) ? ubt_get_le64(o->blk + off) : 0;
}

/* Copy n bytes from off; the part outside the block reads as zero. */
static void blk_copy(const struct pout *o, uint64_t off, void *dst, size_t n)
{
	uint8_t *d = dst;

	memset(d, 0, n);
	if (off >= o->size)
		return;
	if (n > o->size - off)
		n = (size_t)(o->size - off);
	memcpy(d, o->blk + off, n);
}

/* A btrfs_disk_key at off (17 bytes). */
static void blk_key(const struct pout *o, uint64_t off, struct btrfs_key *k)
{
	k->objectid = blk64(o, off + offsetof(struct btrfs_disk_key, objectid));
	k->type = blk8(o, off + offsetof(struct btrfs_disk_key, type));
	k->offset = blk64(o, off + offsetof(struct btrfs_disk_key, offset));
}

/* Field offset helper: absolute offset of member m of struct s at base. */
#define F(base, s, m) ((uint64_t)(base) + offsetof(struct s, m))

/* ------------------------------------------------------------------------ */
/* Names, keys, uuids, times                                                */
/* ------------------------------------------------------------------------ */

/*
 * Names format_names knows but progs 6.2 does not: those objectids print as
 * plain numbers there (print_objectid's default case).
 */
static int progs62_unnamed_objectid(uint64_t objectid)
{
	return objectid == BTRFS_RAID_STRIPE_TREE_OBJECTID ||
	       objectid == BTRFS_CSUM_CHANGE_OBJECTID;
}

/* Key types format_names knows but progs 6.2 prints as UNKNOWN.<n>. */
static int progs62_unknown_key_type(uint8_t type)
{
	return type == BTRFS_EXTENT_OWNER_REF_KEY || type == BTRFS_RAID_STRIPE_KEY;
}

size_t ubt_print_objectid_str(uint64_t objectid, uint8_t type, char *buf, size_t len)
{
	switch (type) {
	case BTRFS_QGROUP_RELATION_KEY:
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		/* printed from the value alone, never as a name */
		return btrfs_objectid_str(objectid, type, buf, len);
	default:
		break;
	}
	if (progs62_unnamed_objectid(objectid)) {
		int n = snprintf(buf, len, "%llu", (unsigned long long)objectid);

		return n < 0 ? 0 : (size_t)n;
	}
	return btrfs_objectid_str(objectid, type, buf, len);
}

static size_t key_type_str(uint64_t objectid, uint8_t type, char *buf, size_t len)
{
	if (progs62_unknown_key_type(type)) {
		int n = snprintf(buf, len, "UNKNOWN.%u", (unsigned int)type);

		return n < 0 ? 0 : (size_t)n;
	}
	return btrfs_key_type_str(objectid, type, buf, len);
}

size_t ubt_print_key_str(const struct btrfs_key *key, char *buf, size_t len)
{
	char obj[48], typ[32], off[48];
	int n;

	ubt_print_objectid_str(key->objectid, key->type, obj, sizeof(obj));
	key_type_str(key->objectid, key->type, typ, sizeof(typ));

	switch (key->type) {
	case BTRFS_QGROUP_RELATION_KEY:
	case BTRFS_QGROUP_INFO_KEY:
	case BTRFS_QGROUP_LIMIT_KEY:
		snprintf(off, sizeof(off), "%u/%llu", (unsigned int)btrfs_qgroup_level(key->offset),
			 (unsigned long long)btrfs_qgroup_subvolid(key->offset));
		break;
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		snprintf(off, sizeof(off), "0x%016llx", (unsigned long long)key->offset);
		break;
	case BTRFS_ROOT_ITEM_KEY:
		/* a reloc tree's root item offset is the id of its source tree */
		if (key->objectid == BTRFS_TREE_RELOC_OBJECTID)
			ubt_print_objectid_str(key->offset, key->type, off, sizeof(off));
		else
			snprintf(off, sizeof(off), "%llu", (unsigned long long)key->offset);
		break;
	default:
		if (key->offset == (uint64_t)-1)
			snprintf(off, sizeof(off), "-1");
		else
			snprintf(off, sizeof(off), "%llu", (unsigned long long)key->offset);
		break;
	}
	n = snprintf(buf, len, "key (%s %s %s)", obj, typ, off);
	return n < 0 ? 0 : (size_t)n;
}

static void out_key(struct pout *o, const struct btrfs_key *k)
{
	char buf[160];

	ubt_print_key_str(k, buf, sizeof(buf));
	out_str(o, buf);
}

static void out_objectid(struct pout *o, uint64_t objectid, uint8_t type)
{
	char buf[48];

	ubt_print_objectid_str(objectid, type, buf, sizeof(buf));
	out_str(o, buf);
}

/* uuid_unparse() layout, lower case. */
static void uuid_fmt(const uint8_t u[BTRFS_UUID_SIZE], char out[37])
{
	static const char hex[] = "0123456789abcdef";
	int j = 0;

	for (int i = 0; i < BTRFS_UUID_SIZE; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[j++] = '-';
		out[j++] = hex[u[i] >> 4];
		out[j++] = hex[u[i] & 15];
	}
	out[j] = '\0';
}

static void out_uuid_at(struct pout *o, uint64_t off)
{
	uint8_t u[BTRFS_UUID_SIZE];
	char s[37];

	blk_copy(o, off, u, sizeof(u));
	uuid_fmt(u, s);
	out_str(o, s);
}

/*
 * "%.*s" of up to n bytes at off: stops at a NUL byte like printf, and at
 * the block end.
 */
static void out_raw_str(struct pout *o, uint64_t off, uint64_t n)
{
	size_t c = 0;

	if (off >= o->size)
		return;
	if (n > o->size - off)
		n = o->size - off;
	while (c < n && o->blk[off + c])
		c++;
	out_bytes(o, (const char *)o->blk + off, c);
}

/* A name or xattr value: progs copies at most BTRFS_NAME_LEN bytes. */
static void out_name(struct pout *o, uint64_t off, uint64_t n)
{
	out_raw_str(o, off, n < BTRFS_NAME_LEN ? n : BTRFS_NAME_LEN);
}

static int hide_names(const struct pout *o)
{
	return (o->ctx->flags & UBT_PRINT_HIDE_NAMES) != 0;
}

/*
 * What glibc's localtime_r() leaves in *tm when the year overflows an int
 * (it returns NULL, but has already stored the time of day and the
 * truncated year; month and day keep their old values).  progs formats that
 * struct anyway, so damaged timestamps print as "-869343088-01-01 22:06:56".
 * Same arithmetic as glibc's __offtime(), with 64-bit long int.
 */
#define TM_DIV(a, b) ((a) / (b) - ((a) % (b) < 0))
#define TM_LEAPS(y) (TM_DIV(y, 4) - TM_DIV(y, 100) + TM_DIV(y, 400))
#define TM_ISLEAP(y) ((y) % 4 == 0 && ((y) % 100 != 0 || (y) % 400 == 0))

static void tm_overflow(int64_t t, long gmtoff, struct tm *tm)
{
	const int64_t day = 86400;
	int64_t days = t / day, rem = t % day + gmtoff, y = 1970;

	while (rem < 0) {
		rem += day;
		days--;
	}
	while (rem >= day) {
		rem -= day;
		days++;
	}
	tm->tm_hour = (int)(rem / 3600);
	rem %= 3600;
	tm->tm_min = (int)(rem / 60);
	tm->tm_sec = (int)(rem % 60);
	while (days < 0 || days >= (TM_ISLEAP(y) ? 366 : 365)) {
		int64_t yg = y + days / 365 - (days % 365 < 0);

		days -= (yg - y) * 365 + TM_LEAPS(yg - 1) - TM_LEAPS(y - 1);
		y = yg;
	}
	/* truncated to int, as glibc stores it before noticing the overflow */
	tm->tm_year = (int)(uint32_t)(uint64_t)(y - 1900);
}

/*
 * "<prefix><sec>.<nsec> (YYYY-mm-dd HH:MM:SS)\n" in local time.  progs
 * keeps its struct tm on the stack, so an unconvertible time prints the
 * month and day of the conversion before it in the same item (o->last_tm,
 * reset per item; progs' very first one is stack garbage, ours zero).
 */
static void out_timespec(struct pout *o, uint64_t off, const char *prefix)
{
	uint64_t sec = blk64(o, F(off, btrfs_timespec, sec));
	uint32_t nsec = blk32(o, F(off, btrfs_timespec, nsec));
	time_t t = (time_t)sec;
	struct tm tm = o->last_tm;
	char ts[128];

	if (!localtime_r(&t, &tm)) {
		/*
		 * glibc applies the zone's offset for that far past (the first
		 * zone type, e.g. LMT) or future (the TZ rule): take it from a
		 * time as far out that still converts.
		 */
		time_t far = (time_t)(t < 0 ? -(1LL << 55) : (1LL << 55));
		struct tm ftm;
		long gmtoff = localtime_r(&far, &ftm) ? ftm.tm_gmtoff : 0;

		tm_overflow((int64_t)t, gmtoff, &tm);
	}
	o->last_tm = tm;
	if (!strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm))
		ts[0] = '\0';
	out_printf(o, "%s%llu.%u (%s)\n", prefix, (unsigned long long)sec, nsec, ts);
}

static unsigned int csum_size(const struct pout *o)
{
	return btrfs_csum_type_size(o->ctx->csum_type);
}

/* ------------------------------------------------------------------------ */
/* Inodes, refs, directory entries (fs trees)                               */
/* ------------------------------------------------------------------------ */

static void print_inode_item(struct pout *o, uint64_t p)
{
	char flags[160];
	uint64_t f = blk64(o, F(p, btrfs_inode_item, flags));

	btrfs_inode_flags_str(f, flags, sizeof(flags));
	out_printf(o, "\t\tgeneration %llu transid %llu size %llu nbytes %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_inode_item, generation)),
		   (unsigned long long)blk64(o, F(p, btrfs_inode_item, transid)),
		   (unsigned long long)blk64(o, F(p, btrfs_inode_item, size)),
		   (unsigned long long)blk64(o, F(p, btrfs_inode_item, nbytes)));
	out_printf(o, "\t\tblock group %llu mode %o links %u uid %u gid %u rdev %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_inode_item, block_group)),
		   blk32(o, F(p, btrfs_inode_item, mode)),
		   blk32(o, F(p, btrfs_inode_item, nlink)),
		   blk32(o, F(p, btrfs_inode_item, uid)),
		   blk32(o, F(p, btrfs_inode_item, gid)),
		   (unsigned long long)blk64(o, F(p, btrfs_inode_item, rdev)));
	out_printf(o, "\t\tsequence %llu flags 0x%llx(%s)\n",
		   (unsigned long long)blk64(o, F(p, btrfs_inode_item, sequence)),
		   (unsigned long long)f, flags);
	out_timespec(o, F(p, btrfs_inode_item, atime), "\t\tatime ");
	out_timespec(o, F(p, btrfs_inode_item, ctime), "\t\tctime ");
	out_timespec(o, F(p, btrfs_inode_item, mtime), "\t\tmtime ");
	out_timespec(o, F(p, btrfs_inode_item, otime), "\t\totime ");
}

/*
 * Entry walkers below stop with an error line when an entry header would
 * cross the block end (progs would read past its buffer there).
 */
static int entry_fits(struct pout *o, uint64_t p, uint64_t hdr, const char *what)
{
	if (blk_has(o, p, hdr))
		return 1;
	out_diag(o, "ERROR: ", "leaf %llu %s at offset %llu crosses the block end",
		 (unsigned long long)o->bytenr, what, (unsigned long long)p);
	return 0;
}

static void print_inode_ref(struct pout *o, uint64_t p, uint32_t size)
{
	uint32_t cur = 0;

	while (cur < size) {
		uint64_t e = p + cur;
		uint32_t name_len;

		if (!entry_fits(o, e, sizeof(struct btrfs_inode_ref), "inode ref"))
			return;
		name_len = blk16(o, F(e, btrfs_inode_ref, name_len));
		out_printf(o, "\t\tindex %llu namelen %u ",
			   (unsigned long long)blk64(o, F(e, btrfs_inode_ref, index)), name_len);
		if (hide_names(o)) {
			out_str(o, "name: HIDDEN\n");
		} else {
			out_str(o, "name: ");
			out_name(o, e + sizeof(struct btrfs_inode_ref), name_len);
			out_str(o, "\n");
		}
		cur += (uint32_t)sizeof(struct btrfs_inode_ref) + name_len;
	}
}

static void print_inode_extref(struct pout *o, uint64_t p, uint32_t size)
{
	uint32_t cur = 0;

	while (cur < size) {
		uint64_t e = p + cur;
		uint32_t name_len;

		if (!entry_fits(o, e, sizeof(struct btrfs_inode_extref), "inode extref"))
			return;
		name_len = blk16(o, F(e, btrfs_inode_extref, name_len));
		out_printf(o, "\t\tindex %llu parent %llu namelen %u ",
			   (unsigned long long)blk64(o, F(e, btrfs_inode_extref, index)),
			   (unsigned long long)blk64(o, F(e, btrfs_inode_extref, parent_objectid)),
			   name_len);
		if (hide_names(o)) {
			out_str(o, "name: HIDDEN\n");
		} else {
			out_str(o, "name: ");
			out_name(o, F(e, btrfs_inode_extref, name), name_len);
			out_str(o, "\n");
		}
		cur += (uint32_t)sizeof(struct btrfs_inode_extref) + name_len;
	}
}

/* DIR_ITEM, DIR_INDEX and XATTR_ITEM: one or more packed entries. */
static void print_dir_item(struct pout *o, uint64_t p, uint32_t size)
{
	uint32_t cur = 0;

	while (cur < size) {
		uint64_t e = p + cur;
		struct btrfs_key loc;
		uint32_t name_len, data_len;
		uint8_t type;
		const char *tname;

		if (!entry_fits(o, e, sizeof(struct btrfs_dir_item), "dir item"))
			return;
		blk_key(o, F(e, btrfs_dir_item, location), &loc);
		type = blk8(o, F(e, btrfs_dir_item, type));
		name_len = blk16(o, F(e, btrfs_dir_item, name_len));
		data_len = blk16(o, F(e, btrfs_dir_item, data_len));

		out_str(o, "\t\tlocation ");
		out_key(o, &loc);
		tname = btrfs_dir_type_name(type);
		if (tname)
			out_printf(o, " type %s\n", tname);
		else
			out_printf(o, " type DIR_ITEM.%u\n", (unsigned int)type);
		out_printf(o, "\t\ttransid %llu data_len %u name_len %u\n",
			   (unsigned long long)blk64(o, F(e, btrfs_dir_item, transid)),
			   data_len, name_len);
		if (hide_names(o)) {
			out_str(o, "\t\tname: HIDDEN\n");
		} else {
			out_str(o, "\t\tname: ");
			out_name(o, e + sizeof(struct btrfs_dir_item), name_len);
			out_str(o, "\n");
		}
		if (data_len) {
			if (hide_names(o)) {
				out_str(o, "\t\tdata HIDDEN\n");
			} else {
				out_str(o, "\t\tdata ");
				out_name(o, e + sizeof(struct btrfs_dir_item) + name_len, data_len);
				out_str(o, "\n");
			}
		}
		cur += (uint32_t)sizeof(struct btrfs_dir_item) + name_len + data_len;
	}
}

static void print_file_extent(struct pout *o, uint64_t p, uint32_t size)
{
	uint8_t type = blk8(o, F(p, btrfs_file_extent_item, type));
	uint8_t comp = blk8(o, F(p, btrfs_file_extent_item, compression));
	const char *cname = btrfs_compress_type_name(comp);
	char cbuf[24];

	if (!cname) {
		snprintf(cbuf, sizeof(cbuf), "UNKNOWN.%d", (int)comp);
		cname = cbuf;
	}
	out_printf(o, "\t\tgeneration %llu type %u (%s)\n",
		   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, generation)),
		   (unsigned int)type, btrfs_file_extent_type_name(type));

	if (type == BTRFS_FILE_EXTENT_INLINE) {
		/* u32 arithmetic as progs: a too short item wraps around */
		uint32_t data = size - (uint32_t)btrfs_file_extent_inline_start();

		out_printf(o, "\t\tinline extent data size %u ram_bytes %llu compression %u (%s)\n",
			   data,
			   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, ram_bytes)),
			   (unsigned int)comp, cname);
		return;
	}
	if (type == BTRFS_FILE_EXTENT_PREALLOC) {
		out_printf(o, "\t\tprealloc data disk byte %llu nr %llu\n",
			   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, disk_bytenr)),
			   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, disk_num_bytes)));
		out_printf(o, "\t\tprealloc data offset %llu nr %llu\n",
			   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, offset)),
			   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, num_bytes)));
		return;
	}
	/* regular, and any unknown type */
	out_printf(o, "\t\textent data disk byte %llu nr %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, disk_bytenr)),
		   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, disk_num_bytes)));
	out_printf(o, "\t\textent data offset %llu nr %llu ram %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, offset)),
		   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, num_bytes)),
		   (unsigned long long)blk64(o, F(p, btrfs_file_extent_item, ram_bytes)));
	out_printf(o, "\t\textent compression %u (%s)\n", (unsigned int)comp, cname);
}

/* EXTENT_CSUM: the covered range and, with --csum-items, every checksum. */
static void print_extent_csum(struct pout *o, uint64_t p, uint32_t item_size, uint64_t start)
{
	unsigned int cs = csum_size(o);
	uint32_t sectorsize = o->ctx->sectorsize;
	uint32_t len;

	if (!cs || !sectorsize) {
		/* progs without a csum size: only the start */
		out_printf(o, "\t\trange start %llu\n", (unsigned long long)start);
		return;
	}
	len = (item_size / cs) * sectorsize;
	out_printf(o, "\t\trange start %llu end %llu length %u\n", (unsigned long long)start,
		   (unsigned long long)(start + len), len);

	if (o->ctx->flags & UBT_PRINT_CSUM_ITEMS) {
		/* one line holds 32 bytes of sums: 4 crc32c, 2 xxhash, 1 sha256/blake2 */
		unsigned int per_line = BTRFS_CSUM_SIZE / cs / 2;
		unsigned int left_on_line;
		uint64_t pos = p;
		uint64_t cur = start;

		if (per_line < 1)
			per_line = 1;
		left_on_line = per_line;
		while (len > 0) {
			char hex[2 * BTRFS_CSUM_SIZE + 1];
			uint8_t sum[BTRFS_CSUM_SIZE];

			if (left_on_line == per_line) {
				out_str(o, "\t\t");
			} else if (left_on_line == 0) {
				left_on_line = per_line;
				out_str(o, "\n\t\t");
			} else {
				out_str(o, " ");
			}
			blk_copy(o, pos, sum, cs);
			for (unsigned int i = 0; i < cs; i++)
				snprintf(hex + 2 * i, 3, "%02x", sum[i]);
			out_printf(o, "[%llu] 0x%s", (unsigned long long)cur, hex);
			pos += cs;
			cur += sectorsize;
			len -= sectorsize;
			left_on_line--;
		}
		out_str(o, "\n");
	}
}

/* ------------------------------------------------------------------------ */
/* Root tree items                                                          */
/* ------------------------------------------------------------------------ */

static void print_root_item(struct pout *o, uint64_t p, uint32_t size)
{
	/* progs: a zeroed struct overlaid with the item's bytes */
	uint8_t ri[sizeof(struct btrfs_root_item)];
	const struct btrfs_root_item *r = (const void *)ri;
	struct btrfs_key drop;
	uint64_t flags;
	char u[37];

	memset(ri, 0, sizeof(ri));
	blk_copy(o, p, ri, size < sizeof(ri) ? size : sizeof(ri));
	flags = btrfs_root_flags(r);

	out_printf(o, "\t\tgeneration %llu root_dirid %llu bytenr %llu byte_limit %llu bytes_used %llu\n",
		   (unsigned long long)btrfs_root_generation(r),
		   (unsigned long long)btrfs_root_root_dirid(r),
		   (unsigned long long)btrfs_root_bytenr(r),
		   (unsigned long long)btrfs_root_byte_limit(r),
		   (unsigned long long)btrfs_root_bytes_used(r));
	out_printf(o, "\t\tlast_snapshot %llu flags 0x%llx(%s) refs %u\n",
		   (unsigned long long)btrfs_root_last_snapshot(r), (unsigned long long)flags,
		   btrfs_root_flags_name(flags), btrfs_root_refs(r));
	btrfs_disk_key_to_cpu(&drop, btrfs_root_drop_progress(r));
	out_str(o, "\t\tdrop_progress ");
	out_key(o, &drop);
	out_printf(o, " drop_level %u\n", (unsigned int)btrfs_root_drop_level(r));
	out_printf(o, "\t\tlevel %u generation_v2 %llu\n", (unsigned int)btrfs_root_level(r),
		   (unsigned long long)btrfs_root_generation_v2(r));

	/* the extended fields are valid only when generation_v2 matches */
	if (btrfs_root_generation(r) != btrfs_root_generation_v2(r))
		return;
	uuid_fmt(btrfs_root_uuid(r), u);
	out_printf(o, "\t\tuuid %s\n", u);
	uuid_fmt(btrfs_root_parent_uuid(r), u);
	out_printf(o, "\t\tparent_uuid %s\n", u);
	uuid_fmt(btrfs_root_received_uuid(r), u);
	out_printf(o, "\t\treceived_uuid %s\n", u);
	out_printf(o, "\t\tctransid %llu otransid %llu stransid %llu rtransid %llu\n",
		   (unsigned long long)btrfs_root_ctransid(r),
		   (unsigned long long)btrfs_root_otransid(r),
		   (unsigned long long)btrfs_root_stransid(r),
		   (unsigned long long)btrfs_root_rtransid(r));
	/* progs reads the times from the leaf itself, even past a short item */
	out_timespec(o, F(p, btrfs_root_item, ctime), "\t\tctime ");
	out_timespec(o, F(p, btrfs_root_item, otime), "\t\totime ");
	out_timespec(o, F(p, btrfs_root_item, stime), "\t\tstime ");
	out_timespec(o, F(p, btrfs_root_item, rtime), "\t\trtime ");
}

static void print_root_ref(struct pout *o, uint64_t p, const char *tag)
{
	uint32_t name_len = blk16(o, F(p, btrfs_root_ref, name_len));

	/* never hidden by --hide-names in progs 6.2 */
	out_printf(o, "\t\troot %s key dirid %llu sequence %llu name ", tag,
		   (unsigned long long)blk64(o, F(p, btrfs_root_ref, dirid)),
		   (unsigned long long)blk64(o, F(p, btrfs_root_ref, sequence)));
	out_name(o, p + sizeof(struct btrfs_root_ref), name_len);
	out_str(o, "\n");
}

/* v1 free space cache header: key (FREE_SPACE_OBJECTID, 0, bg start). */
static void print_free_space_header(struct pout *o, uint64_t p)
{
	struct btrfs_key loc;

	blk_key(o, F(p, btrfs_free_space_header, location), &loc);
	out_str(o, "\t\tlocation ");
	out_key(o, &loc);
	out_str(o, "\n");
	out_printf(o, "\t\tcache generation %llu entries %llu bitmaps %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_free_space_header, generation)),
		   (unsigned long long)blk64(o, F(p, btrfs_free_space_header, num_entries)),
		   (unsigned long long)blk64(o, F(p, btrfs_free_space_header, num_bitmaps)));
}

static void print_balance_args(struct pout *o, uint64_t a)
{
	out_printf(o, "\t\tprofiles %llu devid %llu target %llu flags %llu\n",
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, profiles)),
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, devid)),
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, target)),
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, flags)));
	out_printf(o, "\t\tusage_min %u usage_max %u pstart %llu pend %llu\n",
		   blk32(o, F(a, btrfs_disk_balance_args, usage_min)),
		   blk32(o, F(a, btrfs_disk_balance_args, usage_max)),
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, pstart)),
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, pend)));
	out_printf(o, "\t\tvstart %llu vend %llu limit_min %u limit_max %u\n",
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, vstart)),
		   (unsigned long long)blk64(o, F(a, btrfs_disk_balance_args, vend)),
		   blk32(o, F(a, btrfs_disk_balance_args, limit_min)),
		   blk32(o, F(a, btrfs_disk_balance_args, limit_max)));
	out_printf(o, "\t\tstripes_min %u stripes_max %u\n",
		   blk32(o, F(a, btrfs_disk_balance_args, stripes_min)),
		   blk32(o, F(a, btrfs_disk_balance_args, stripes_max)));
}

/* TEMPORARY_ITEM: the balance status is the only one progs decodes. */
static void print_temporary_item(struct pout *o, uint64_t p, const struct btrfs_key *k)
{
	out_str(o, "\t\ttemporary item objectid ");
	out_objectid(o, k->objectid, BTRFS_TEMPORARY_ITEM_KEY);
	out_printf(o, " offset %llu\n", (unsigned long long)k->offset);
	if (k->objectid != BTRFS_BALANCE_OBJECTID) {
		out_printf(o, "\t\tunknown temporary item objectid %llu\n",
			   (unsigned long long)k->objectid);
		return;
	}
	out_printf(o, "\t\tbalance status flags %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_balance_item, flags)));
	out_str(o, "\t\tDATA\n");
	print_balance_args(o, F(p, btrfs_balance_item, data));
	out_str(o, "\t\tMETADATA\n");
	print_balance_args(o, F(p, btrfs_balance_item, meta));
	out_str(o, "\t\tSYSTEM\n");
	print_balance_args(o, F(p, btrfs_balance_item, sys));
}

/* PERSISTENT_ITEM: device statistics are the only one progs decodes. */
static void print_persistent_item(struct pout *o, uint64_t p, uint32_t size,
				  const struct btrfs_key *k)
{
	const uint32_t known = BTRFS_DEV_STAT_VALUES_MAX * 8;

	out_str(o, "\t\tpersistent item objectid ");
	out_objectid(o, k->objectid, BTRFS_PERSISTENT_ITEM_KEY);
	out_printf(o, " offset %llu\n", (unsigned long long)k->offset);
	if (k->objectid != BTRFS_DEV_STATS_OBJECTID) {
		out_printf(o, "\t\tunknown persistent item objectid %llu\n",
			   (unsigned long long)k->objectid);
		return;
	}
	out_str(o, "\t\tdevice stats\n");
	/* all five values, whatever the item size (as progs) */
	out_printf(o, "\t\twrite_errs %llu read_errs %llu flush_errs %llu corruption_errs %llu generation %llu\n",
		   (unsigned long long)blk64(o, p + 8 * BTRFS_DEV_STAT_WRITE_ERRS),
		   (unsigned long long)blk64(o, p + 8 * BTRFS_DEV_STAT_READ_ERRS),
		   (unsigned long long)blk64(o, p + 8 * BTRFS_DEV_STAT_FLUSH_ERRS),
		   (unsigned long long)blk64(o, p + 8 * BTRFS_DEV_STAT_CORRUPTION_ERRS),
		   (unsigned long long)blk64(o, p + 8 * BTRFS_DEV_STAT_GENERATION_ERRS));
	if (size > known) {
		/* progs ends this line without a newline */
		out_printf(o, "\t\tunknown stats item bytes %u", size - known);
		for (uint32_t i = BTRFS_DEV_STAT_VALUES_MAX; (uint64_t)i * 8 < size; i++)
			out_printf(o, "\t\tunknown item %u offset %u value %llu\n", i, i * 8,
				   (unsigned long long)blk64(o, p + (uint64_t)i * 8));
	}
}

/* UUID_KEY_SUBVOL / UUID_KEY_RECEIVED_SUBVOL: an array of subvolume ids. */
static void print_uuid_item(struct pout *o, uint64_t p, uint32_t size)
{
	if (size & 7) {
		out_printf(o, "btrfs: uuid item with illegal size %lu!\n", (unsigned long)size);
		return;
	}
	for (uint32_t off = 0; off < size; off += 8)
		out_printf(o, "\t\tsubvol_id %llu\n", (unsigned long long)blk64(o, p + off));
}

/* ------------------------------------------------------------------------ */
/* Extent tree                                                              */
/* ------------------------------------------------------------------------ */

static void print_extent_item(struct pout *o, uint64_t p, uint32_t size,
			      const struct btrfs_key *k)
{
	int metadata = k->type == BTRFS_METADATA_ITEM_KEY;
	uint64_t flags, ptr, end;
	char fstr[48];

	/* v0 extent items (4 bytes) and anything shorter print nothing */
	if (size < sizeof(struct btrfs_extent_item))
		return;
	flags = blk64(o, F(p, btrfs_extent_item, flags));
	btrfs_extent_flags_str(flags, fstr, sizeof(fstr));
	out_printf(o, "\t\trefs %llu gen %llu flags %s\n",
		   (unsigned long long)blk64(o, F(p, btrfs_extent_item, refs)),
		   (unsigned long long)blk64(o, F(p, btrfs_extent_item, generation)), fstr);

	ptr = p + sizeof(struct btrfs_extent_item);
	if ((flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) && !metadata) {
		struct btrfs_key tk;

		blk_key(o, F(ptr, btrfs_tree_block_info, key), &tk);
		out_str(o, "\t\ttree block ");
		out_key(o, &tk);
		out_printf(o, " level %d\n", (int)blk8(o, F(ptr, btrfs_tree_block_info, level)));
		ptr += sizeof(struct btrfs_tree_block_info);
	} else if (metadata) {
		out_printf(o, "\t\ttree block skinny level %d\n", (int)k->offset);
	}

	end = p + size;
	while (ptr < end) {
		uint8_t type = blk8(o, F(ptr, btrfs_extent_inline_ref, type));
		uint64_t offset = blk64(o, F(ptr, btrfs_extent_inline_ref, offset));
		uint64_t d;

		switch (type) {
		case BTRFS_TREE_BLOCK_REF_KEY:
			out_str(o, "\t\ttree block backref root ");
			out_objectid(o, offset, 0);
			out_str(o, "\n");
			break;
		case BTRFS_SHARED_BLOCK_REF_KEY:
			out_printf(o, "\t\tshared block backref parent %llu\n",
				   (unsigned long long)offset);
			break;
		case BTRFS_EXTENT_DATA_REF_KEY:
			d = F(ptr, btrfs_extent_inline_ref, offset);
			out_str(o, "\t\textent data backref root ");
			out_objectid(o, blk64(o, F(d, btrfs_extent_data_ref, root)), 0);
			out_printf(o, " objectid %llu offset %llu count %u\n",
				   (unsigned long long)blk64(o, F(d, btrfs_extent_data_ref, objectid)),
				   (unsigned long long)blk64(o, F(d, btrfs_extent_data_ref, offset)),
				   blk32(o, F(d, btrfs_extent_data_ref, count)));
			break;
		case BTRFS_SHARED_DATA_REF_KEY:
			d = ptr + sizeof(struct btrfs_extent_inline_ref);
			out_printf(o, "\t\tshared data backref parent %llu count %u\n",
				   (unsigned long long)offset,
				   blk32(o, F(d, btrfs_shared_data_ref, count)));
			break;
		default:
			/* progs 6.2 stops at a type it does not know (EXTENT_OWNER_REF too) */
			return;
		}
		ptr += btrfs_extent_inline_ref_size(type);
	}
}

static void print_extent_data_ref(struct pout *o, uint64_t p)
{
	out_str(o, "\t\textent data backref root ");
	out_objectid(o, blk64(o, F(p, btrfs_extent_data_ref, root)), 0);
	out_printf(o, " objectid %llu offset %llu count %u\n",
		   (unsigned long long)blk64(o, F(p, btrfs_extent_data_ref, objectid)),
		   (unsigned long long)blk64(o, F(p, btrfs_extent_data_ref, offset)),
		   blk32(o, F(p, btrfs_extent_data_ref, count)));
}

static void print_block_group_item(struct pout *o, uint64_t p)
{
	char fl[96];

	btrfs_bg_flags_str(blk64(o, F(p, btrfs_block_group_item, flags)), fl, sizeof(fl));
	out_printf(o, "\t\tblock group used %llu chunk_objectid %llu flags %s\n",
		   (unsigned long long)blk64(o, F(p, btrfs_block_group_item, used)),
		   (unsigned long long)blk64(o, F(p, btrfs_block_group_item, chunk_objectid)), fl);
}

/* ------------------------------------------------------------------------ */
/* Chunk and device trees                                                   */
/* ------------------------------------------------------------------------ */

static void print_chunk_item(struct pout *o, uint64_t p)
{
	uint16_t num_stripes = blk16(o, F(p, btrfs_chunk, num_stripes));
	char fl[96];

	if (num_stripes < 1) {
		out_printf(o, "invalid num_stripes: %u\n", (unsigned int)num_stripes);
		return;
	}
	/* progs checks the stripes against the block, not the item */
	if (!blk_has(o, p, btrfs_chunk_item_size(num_stripes))) {
		out_str(o, "\t\tchunk item invalid\n");
		return;
	}
	btrfs_bg_flags_str(blk64(o, F(p, btrfs_chunk, type)), fl, sizeof(fl));
	out_printf(o, "\t\tlength %llu owner %llu stripe_len %llu type %s\n",
		   (unsigned long long)blk64(o, F(p, btrfs_chunk, length)),
		   (unsigned long long)blk64(o, F(p, btrfs_chunk, owner)),
		   (unsigned long long)blk64(o, F(p, btrfs_chunk, stripe_len)), fl);
	out_printf(o, "\t\tio_align %u io_width %u sector_size %u\n",
		   blk32(o, F(p, btrfs_chunk, io_align)),
		   blk32(o, F(p, btrfs_chunk, io_width)),
		   blk32(o, F(p, btrfs_chunk, sector_size)));
	out_printf(o, "\t\tnum_stripes %u sub_stripes %u\n", (unsigned int)num_stripes,
		   (unsigned int)blk16(o, F(p, btrfs_chunk, sub_stripes)));
	for (unsigned int i = 0; i < num_stripes; i++) {
		uint64_t s = p + btrfs_chunk_item_size(i);

		out_printf(o, "\t\t\tstripe %u devid %llu offset %llu\n", i,
			   (unsigned long long)blk64(o, F(s, btrfs_stripe, devid)),
			   (unsigned long long)blk64(o, F(s, btrfs_stripe, offset)));
		out_str(o, "\t\t\tdev_uuid ");
		out_uuid_at(o, F(s, btrfs_stripe, dev_uuid));
		out_str(o, "\n");
	}
}

static void print_dev_item(struct pout *o, uint64_t p)
{
	out_printf(o, "\t\tdevid %llu total_bytes %llu bytes_used %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_dev_item, devid)),
		   (unsigned long long)blk64(o, F(p, btrfs_dev_item, total_bytes)),
		   (unsigned long long)blk64(o, F(p, btrfs_dev_item, bytes_used)));
	out_printf(o, "\t\tio_align %u io_width %u sector_size %u type %llu\n",
		   blk32(o, F(p, btrfs_dev_item, io_align)),
		   blk32(o, F(p, btrfs_dev_item, io_width)),
		   blk32(o, F(p, btrfs_dev_item, sector_size)),
		   (unsigned long long)blk64(o, F(p, btrfs_dev_item, type)));
	out_printf(o, "\t\tgeneration %llu start_offset %llu dev_group %u\n",
		   (unsigned long long)blk64(o, F(p, btrfs_dev_item, generation)),
		   (unsigned long long)blk64(o, F(p, btrfs_dev_item, start_offset)),
		   blk32(o, F(p, btrfs_dev_item, dev_group)));
	out_printf(o, "\t\tseek_speed %u bandwidth %u\n",
		   (unsigned int)blk8(o, F(p, btrfs_dev_item, seek_speed)),
		   (unsigned int)blk8(o, F(p, btrfs_dev_item, bandwidth)));
	out_str(o, "\t\tuuid ");
	out_uuid_at(o, F(p, btrfs_dev_item, uuid));
	out_str(o, "\n\t\tfsid ");
	out_uuid_at(o, F(p, btrfs_dev_item, fsid));
	out_str(o, "\n");
}

static void print_dev_extent(struct pout *o, uint64_t p)
{
	out_printf(o, "\t\tdev extent chunk_tree %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_dev_extent, chunk_tree)));
	out_printf(o, "\t\tchunk_objectid %llu chunk_offset %llu length %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_dev_extent, chunk_objectid)),
		   (unsigned long long)blk64(o, F(p, btrfs_dev_extent, chunk_offset)),
		   (unsigned long long)blk64(o, F(p, btrfs_dev_extent, length)));
	out_str(o, "\t\tchunk_tree_uuid ");
	out_uuid_at(o, F(p, btrfs_dev_extent, chunk_tree_uuid));
	out_str(o, "\n");
}

/* ------------------------------------------------------------------------ */
/* Quota tree                                                               */
/* ------------------------------------------------------------------------ */

static void print_qgroup_status(struct pout *o, uint64_t p)
{
	char fl[64];

	/* progs 6.2 knows nothing of enable_gen (simple quotas) */
	btrfs_qgroup_status_flags_str(blk64(o, F(p, btrfs_qgroup_status_item, flags)), fl,
				      sizeof(fl));
	out_printf(o, "\t\tversion %llu generation %llu flags %s scan %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_status_item, version)),
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_status_item, generation)), fl,
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_status_item, rescan)));
}

static void print_qgroup_info(struct pout *o, uint64_t p)
{
	out_printf(o, "\t\tgeneration %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_info_item, generation)));
	out_printf(o, "\t\treferenced %llu referenced_compressed %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_info_item, rfer)),
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_info_item, rfer_cmpr)));
	out_printf(o, "\t\texclusive %llu exclusive_compressed %llu\n",
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_info_item, excl)),
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_info_item, excl_cmpr)));
}

static void print_qgroup_limit(struct pout *o, uint64_t p)
{
	/* flags in bare hex, limits signed: "max_referenced -1" means none */
	out_printf(o, "\t\tflags %llx\n",
		   (unsigned long long)blk64(o, F(p, btrfs_qgroup_limit_item, flags)));
	out_printf(o, "\t\tmax_referenced %lld max_exclusive %lld\n",
		   (long long)blk64(o, F(p, btrfs_qgroup_limit_item, max_rfer)),
		   (long long)blk64(o, F(p, btrfs_qgroup_limit_item, max_excl)));
	out_printf(o, "\t\trsv_referenced %lld rsv_exclusive %lld\n",
		   (long long)blk64(o, F(p, btrfs_qgroup_limit_item, rsv_rfer)),
		   (long long)blk64(o, F(p, btrfs_qgroup_limit_item, rsv_excl)));
}

/* ------------------------------------------------------------------------ */
/* Item dispatch, leaves and nodes                                          */
/* ------------------------------------------------------------------------ */

static void print_item_body(struct pout *o, uint64_t p, uint32_t size, const struct btrfs_key *k)
{
	/* the v1 free space cache header has key type 0 */
	if (k->type == 0 && k->objectid == BTRFS_FREE_SPACE_OBJECTID)
		print_free_space_header(o, p);

	switch (k->type) {
	case BTRFS_INODE_ITEM_KEY:
		print_inode_item(o, p);
		break;
	case BTRFS_INODE_REF_KEY:
		print_inode_ref(o, p, size);
		break;
	case BTRFS_INODE_EXTREF_KEY:
		print_inode_extref(o, p, size);
		break;
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
	case BTRFS_XATTR_ITEM_KEY:
		print_dir_item(o, p, size);
		break;
	case BTRFS_DIR_LOG_ITEM_KEY:
	case BTRFS_DIR_LOG_INDEX_KEY:
		out_printf(o, "\t\tdir log end %llu\n",
			   (unsigned long long)blk64(o, F(p, btrfs_dir_log_item, end)));
		break;
	case BTRFS_ORPHAN_ITEM_KEY:
		out_str(o, "\t\torphan item\n");
		break;
	case BTRFS_ROOT_ITEM_KEY:
		print_root_item(o, p, size);
		break;
	case BTRFS_ROOT_REF_KEY:
		print_root_ref(o, p, "ref");
		break;
	case BTRFS_ROOT_BACKREF_KEY:
		print_root_ref(o, p, "backref");
		break;
	case BTRFS_EXTENT_ITEM_KEY:
	case BTRFS_METADATA_ITEM_KEY:
		print_extent_item(o, p, size, k);
		break;
	case BTRFS_TREE_BLOCK_REF_KEY:
		out_str(o, "\t\ttree block backref\n");
		break;
	case BTRFS_SHARED_BLOCK_REF_KEY:
		out_str(o, "\t\tshared block backref\n");
		break;
	case BTRFS_EXTENT_DATA_REF_KEY:
		print_extent_data_ref(o, p);
		break;
	case BTRFS_SHARED_DATA_REF_KEY:
		out_printf(o, "\t\tshared data backref count %u\n",
			   blk32(o, F(p, btrfs_shared_data_ref, count)));
		break;
	case BTRFS_EXTENT_REF_V0_KEY:
		out_str(o, "\t\textent ref v0 (deprecated)\n");
		break;
	case BTRFS_CSUM_ITEM_KEY:
		out_str(o, "\t\tcsum item\n");
		break;
	case BTRFS_EXTENT_CSUM_KEY:
		print_extent_csum(o, p, size, k->offset);
		break;
	case BTRFS_EXTENT_DATA_KEY:
		print_file_extent(o, p, size);
		break;
	case BTRFS_BLOCK_GROUP_ITEM_KEY:
		print_block_group_item(o, p);
		break;
	case BTRFS_FREE_SPACE_INFO_KEY:
		out_printf(o, "\t\tfree space info extent count %u flags %u\n",
			   blk32(o, F(p, btrfs_free_space_info, extent_count)),
			   blk32(o, F(p, btrfs_free_space_info, flags)));
		break;
	case BTRFS_FREE_SPACE_EXTENT_KEY:
		out_str(o, "\t\tfree space extent\n");
		break;
	case BTRFS_FREE_SPACE_BITMAP_KEY:
		out_str(o, "\t\tfree space bitmap\n");
		break;
	case BTRFS_CHUNK_ITEM_KEY:
		print_chunk_item(o, p);
		break;
	case BTRFS_DEV_ITEM_KEY:
		print_dev_item(o, p);
		break;
	case BTRFS_DEV_EXTENT_KEY:
		print_dev_extent(o, p);
		break;
	case BTRFS_QGROUP_STATUS_KEY:
		print_qgroup_status(o, p);
		break;
	case BTRFS_QGROUP_INFO_KEY:
		print_qgroup_info(o, p);
		break;
	case BTRFS_QGROUP_LIMIT_KEY:
		print_qgroup_limit(o, p);
		break;
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		print_uuid_item(o, p, size);
		break;
	case BTRFS_STRING_ITEM_KEY:
		out_str(o, "\t\titem data ");
		out_raw_str(o, p, size);
		out_str(o, "\n");
		break;
	case BTRFS_PERSISTENT_ITEM_KEY:
		print_persistent_item(o, p, size, k);
		break;
	case BTRFS_TEMPORARY_ITEM_KEY:
		print_temporary_item(o, p, k);
		break;
	default:
		/*
		 * Nothing for QGROUP_RELATION, DEV_REPLACE, VERITY_DESC_ITEM,
		 * VERITY_MERKLE_ITEM and every type progs 6.2 does not know
		 * (EXTENT_OWNER_REF, RAID_STRIPE, ...): the key line only.
		 */
		break;
	}
}

static void print_header(struct pout *o)
{
	const struct btrfs_header *h = (const void *)o->blk;
	uint64_t raw = btrfs_header_flags(h);
	uint64_t flags = raw & ~BTRFS_BACKREF_REV_MASK;
	unsigned int rev = (unsigned int)(raw >> BTRFS_BACKREF_REV_SHIFT);
	uint8_t level = btrfs_header_level(h);
	uint32_t nr = btrfs_header_nritems(h);
	char fl[32], csum[2 * BTRFS_CSUM_SIZE + 16];
	char fsid[37], chunk[37];

	if (level) {
		uint32_t max = btrfs_node_ptrs_per_block(o->size);

		out_printf(o, "node %llu level %d items %u free space %u generation %llu owner ",
			   (unsigned long long)o->bytenr, (int)level, nr, max - nr,
			   (unsigned long long)btrfs_header_generation(h));
	} else {
		/* progs: data size minus the span from item 0's end to item nr-1 */
		uint32_t used = 0;
		int free_space;

		if (nr) {
			uint64_t first = (uint64_t)sizeof(*h);
			uint64_t last = first + (uint64_t)(nr - 1) * sizeof(struct btrfs_item);
			uint32_t end0 = blk32(o, F(first, btrfs_item, offset)) +
					blk32(o, F(first, btrfs_item, size));

			used = end0 - blk32(o, F(last, btrfs_item, offset)) +
			       nr * (uint32_t)sizeof(struct btrfs_item);
		}
		free_space = (int)(btrfs_leaf_data_size(o->size) - used);
		out_printf(o, "leaf %llu items %u free space %d generation %llu owner ",
			   (unsigned long long)o->bytenr, nr, free_space,
			   (unsigned long long)btrfs_header_generation(h));
	}
	out_objectid(o, btrfs_header_owner(h), 0);
	out_str(o, "\n");

	csum[0] = '\0';
	if (o->ctx->flags & UBT_PRINT_CSUM_HEADERS) {
		unsigned int cs = csum_size(o);
		size_t n = (size_t)snprintf(csum, sizeof(csum), " csum 0x");

		for (unsigned int i = 0; i < cs && n + 3 <= sizeof(csum); i++)
			n += (size_t)snprintf(csum + n, sizeof(csum) - n, "%02x",
					      btrfs_header_csum(h)[i]);
	}
	btrfs_header_flags_str(flags, fl, sizeof(fl));
	out_printf(o, "%s %llu flags 0x%llx(%s) backref revision %u%s\n", level ? "node" : "leaf",
		   (unsigned long long)o->bytenr, (unsigned long long)flags, fl, rev, csum);

	uuid_fmt(btrfs_header_fsid(h), fsid);
	uuid_fmt(btrfs_header_chunk_tree_uuid(h), chunk);
	out_printf(o, "fs uuid %s\nchunk uuid %s\n", fsid, chunk);
}

static void print_leaf(struct pout *o)
{
	uint32_t nr = btrfs_header_nritems((const struct btrfs_header *)o->blk);
	uint32_t data_size = btrfs_leaf_data_size(o->size);

	print_header(o);
	for (uint32_t i = 0; i < nr; i++) {
		uint64_t ih = sizeof(struct btrfs_header) + (uint64_t)i * sizeof(struct btrfs_item);
		uint32_t ioff, isize;
		struct btrfs_key key;

		if (!blk_has(o, ih, sizeof(struct btrfs_item))) {
			out_diag(o, "ERROR: ", "leaf %llu slot %u item header beyond the block, nritems %u",
				 (unsigned long long)o->bytenr, i, nr);
			out_diag(o, "ERROR: ", "skip remaining slots");
			break;
		}
		ioff = blk32(o, F(ih, btrfs_item, offset));
		isize = blk32(o, F(ih, btrfs_item, size));
		if (ioff > data_size || (uint64_t)ioff + isize > data_size) {
			out_diag(o, "ERROR: ",
				 "leaf %llu slot %u pointer invalid, offset %u size %u leaf data limit %u",
				 (unsigned long long)o->bytenr, i, ioff, isize, data_size);
			out_diag(o, "ERROR: ", "skip remaining slots");
			break;
		}
		blk_key(o, F(ih, btrfs_item, key), &key);
		memset(&o->last_tm, 0, sizeof(o->last_tm));
		out_printf(o, "\titem %u ", i);
		out_key(o, &key);
		out_printf(o, " itemoff %u itemsize %u\n", ioff, isize);
		print_item_body(o, sizeof(struct btrfs_header) + (uint64_t)ioff, isize, &key);
	}
}

static void print_node(struct pout *o)
{
	uint32_t nr = btrfs_header_nritems((const struct btrfs_header *)o->blk);
	uint32_t max = btrfs_node_ptrs_per_block(o->size);

	if (nr > max)
		out_diag(o, "WARNING: ", "node nr_items corrupted, has %u limit %u, continue anyway",
			 nr, max);
	print_header(o);
	for (uint32_t i = 0; i < nr && i < max; i++) {
		uint64_t kp = sizeof(struct btrfs_header) + (uint64_t)i * sizeof(struct btrfs_key_ptr);
		struct btrfs_key key;

		blk_key(o, F(kp, btrfs_key_ptr, key), &key);
		out_str(o, "\t");
		out_key(o, &key);
		out_printf(o, " block %llu gen %llu\n",
			   (unsigned long long)blk64(o, F(kp, btrfs_key_ptr, blockptr)),
			   (unsigned long long)blk64(o, F(kp, btrfs_key_ptr, generation)));
	}
}

void ubt_print_tree_block(const struct ubt_print_ctx *ctx, const uint8_t *block)
{
	struct pout o;

	o.ctx = ctx;
	o.blk = block;
	o.size = ctx->nodesize;
	o.len = 0;
	memset(&o.last_tm, 0, sizeof(o.last_tm));
	if (!block || o.size < sizeof(struct btrfs_header)) {
		o.bytenr = 0;
		out_diag(&o, "ERROR: ", "tree block of %u bytes is smaller than its header",
			 (unsigned int)o.size);
		return;
	}
	o.bytenr = btrfs_header_bytenr((const struct btrfs_header *)block);
	if (btrfs_header_level((const struct btrfs_header *)block) == 0)
		print_leaf(&o);
	else
		print_node(&o);
	out_flush(&o);
}
