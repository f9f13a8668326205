/*
 * trans layer: namespace operations (see inode_w.h).
 *
 * On-disk rules followed here (btrfs documentation, compared with what the
 * kernel writes):
 *   - a new inode: INODE_ITEM with generation = transid = the transaction,
 *     nlink 1 (directories keep nlink 1 for life), sequence 0, the four
 *     times equal; an INODE_REF (inode, INODE_REF, parent dir) holding
 *     { index, name_len, name }; a symlink also has an uncompressed inline
 *     EXTENT_DATA at offset 0 holding the target, with size = nbytes =
 *     target length; devices keep rdev as major << 20 | minor.
 *   - flags from the parent directory: NOCOMPRESS or else COMPRESS, and
 *     NODATACOW (with NODATASUM for regular files); the algorithm of a
 *     "btrfs.compression" property of the parent passes on to new regular
 *     files and directories (not under NODATACOW) as their own property.
 *     (The kernel does so while it has the parent's properties loaded; it
 *     skips loading them when an inode's xattrs begin in the leaf after its
 *     inode item, a layout accident not followed here.)
 *   - a directory entry is a DIR_ITEM keyed by the name hash (several names
 *     with one hash share the item, appended in turn) and a DIR_INDEX keyed
 *     by the directory's next index (highest + 1, from 2); the directory's
 *     size grows by 2 x name length.
 *   - more names of an inode in one directory share its INODE_REF item;
 *     when the item would outgrow a leaf item, the name goes to an
 *     INODE_EXTREF (inode, INODE_EXTREF, crc32c(parent, name)) with the
 *     EXTENDED_IREF feature and is refused with EMLINK without it.
 *   - xattrs are XATTR_ITEMs keyed by the name hash, with a zero location
 *     key; a replaced value is written in place (with the new transid).
 *   - the sequence (NFS i_version) counts changes as the kernel counts
 *     them: +1 per link added or removed in a directory, per setattr, per
 *     xattr change, per name added or removed of an inode; rename adds one
 *     more to both directories and to the inode moved (and to a replaced
 *     inode).
 *   - every change sets the subvolume's ROOT_ITEM ctransid and ctime.
 */
#include "trans/inode_w.h"
#include "trans/file_w.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DIR_START_INDEX 2
#define IDX_SLOTS 4096			/* cached directory counters (power of 2) */
#define XATTR_NAME_MAX_LEN 255
#define XATTR_VALUE_MAX 65536
#define SYMLINK_PATH_MAX 4096		/* PATH_MAX: targets up to 4095 bytes */
#define COMPRESSION_XATTR "btrfs.compression"
#define PIDX_DIRS 64			/* directories with delayed DIR_INDEX items */

struct idx_slot {
	uint64_t subvol, dir, next;	/* dir 0: empty */
};

struct ino_next {
	uint64_t subvol, next;
};

/* A directory's delayed DIR_INDEX items ("delayed DIR_INDEX items"). */
struct pidx_dir {
	uint64_t subvol, dir;		/* dir 0: a free slot */
	uint64_t last;			/* the highest index held */
	uint32_t len, n;		/* bytes of buf used, entries */
	uint8_t *buf;			/* entries: struct pidx_hdr, the item */
};

struct pidx_hdr {
	uint64_t index;
	uint32_t size;			/* of the item after the header */
};

struct ubt_ns {
	struct ubt_fs *fs;
	struct ino_next *inos;
	size_t ninos;
	struct idx_slot *idx;
	size_t nidx;
	/* Delayed DIR_INDEX items of transaction pidx_transid: npidx of the
	 * slots in use, pidx_hint the last one used, pidx_victim the next to
	 * go when all are taken. */
	struct pidx_dir pidx[PIDX_DIRS];
	unsigned npidx, pidx_hint, pidx_victim;
	uint64_t pidx_transid;
	/* Is an inode losing its last name still in use (open)? */
	int (*keep)(void *ctx, uint64_t subvol, uint64_t ino, bool decide);
	void *keep_ctx;
};

/* One operation in progress. */
struct nsop {
	struct ubt_ns *ns;
	struct ubt_trans *t;
	struct ubt_fs *fs;
	struct ubt_wroot *root;
	const struct ubt_subvol *sv;
	uint64_t subvol;
	struct ubt_ns_time now;
	bool changed;			/* the tree changed: a failure now aborts */
	bool keep_root_time;		/* setattr without a ctime */
};

/* ---- the writer state ---------------------------------------------------- */

static int pidx_commit_hook(void *ctx, struct ubt_trans *t);

int ubt_ns_new(struct ubt_fs *fs, struct ubt_ns **out)
{
	struct ubt_ns *ns = calloc(1, sizeof(*ns));

	*out = NULL;
	if (!ns)
		return -ENOMEM;
	ns->idx = calloc(IDX_SLOTS, sizeof(*ns->idx));
	if (!ns->idx) {
		free(ns);
		return -ENOMEM;
	}
	ns->fs = fs;
	/* The commit must insert the delayed DIR_INDEX items: one namespace
	 * state per writer, made after it. */
	if (!fs->wr || fs->wr->pre_commit) {
		free(ns->idx);
		free(ns);
		return fs->wr ? -EBUSY : -EINVAL;
	}
	fs->wr->pre_commit = pidx_commit_hook;
	fs->wr->pre_commit_ctx = ns;
	*out = ns;
	return 0;
}

void ubt_ns_free(struct ubt_ns *ns)
{
	if (!ns)
		return;
	if (ns->fs->wr && ns->fs->wr->pre_commit_ctx == ns) {
		ns->fs->wr->pre_commit = NULL;
		ns->fs->wr->pre_commit_ctx = NULL;
	}
	for (unsigned i = 0; i < PIDX_DIRS; i++)
		free(ns->pidx[i].buf);
	free(ns->inos);
	free(ns->idx);
	free(ns);
}

void ubt_ns_set_keep(struct ubt_ns *ns,
		     int (*keep)(void *ctx, uint64_t subvol, uint64_t ino, bool decide), void *ctx)
{
	ns->keep = keep;
	ns->keep_ctx = ctx;
}

/* UBT_NS_DELETE, UBT_NS_KEEP or UBT_NS_KEEP_LATER: the decision, made
 * after the operation's reserve. */
static int keep_mode(struct nsop *o, uint64_t ino)
{
	return o->ns->keep ? o->ns->keep(o->ns->keep_ctx, o->subvol, ino, true) : UBT_NS_DELETE;
}

/* The question, asked while checking. */
static bool kept(struct nsop *o, uint64_t ino)
{
	return o->ns->keep && o->ns->keep(o->ns->keep_ctx, o->subvol, ino, false) != UBT_NS_DELETE;
}

static uint32_t max_item_size(const struct ubt_fs *fs)
{
	return btrfs_leaf_data_size(fs->nodesize) - (uint32_t)sizeof(struct btrfs_item);
}

size_t ubt_ns_max_symlink(const struct ubt_fs *fs)
{
	size_t inl = max_item_size(fs) - btrfs_file_extent_inline_start();
	return UBT_MIN(inl, (size_t)SYMLINK_PATH_MAX - 1);
}

size_t ubt_ns_max_xattr(const struct ubt_fs *fs)
{
	return max_item_size(fs) - sizeof(struct btrfs_dir_item);
}

static bool has_extref(const struct ubt_fs *fs)
{
	return btrfs_super_incompat_flags(&fs->vol->super) & BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF;
}

/* ---- operation frame ------------------------------------------------------ */

static int op_begin(struct nsop *o, struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol,
		    struct ubt_ns_time now)
{
	int ret;

	memset(o, 0, sizeof(*o));
	o->ns = ns;
	o->t = t;
	o->fs = ns->fs;
	o->subvol = subvol;
	o->now = now;
	if (t->w->fs != ns->fs)
		return -EINVAL;
	if (t->w->aborted)
		return -EROFS;
	ret = ubt_fs_subvol(o->fs, subvol, &o->sv);
	if (ret)
		return ret;
	if (o->sv->readonly)
		return -EROFS;
	return ubt_wroot_get(t, subvol, &o->root);
}

/* A failure after the first change leaves a half-done operation: abort. */
static int op_end(struct nsop *o, int ret)
{
	if (ret < 0 && o->changed && !o->t->w->aborted) {
		ubt_log(UBT_LOG_ERROR, "namespace operation failed half way (%s): aborting",
			ubt_strerror(ret));
		o->t->w->aborted = true;
		o->t->w->abort_err = ret;
	}
	return ret;
}

/* Reserve before the first change (ENOSPC leaves everything as it was). */
static int op_reserve(struct nsop *o, bool deleting)
{
	int ret = ubt_reserve_metadata(o->t, deleting);
	if (!ret)
		o->changed = true;
	return ret;
}

static void set_time(struct btrfs_timespec *ts, struct ubt_ns_time t)
{
	btrfs_set_timespec_sec(ts, (uint64_t)t.sec);
	btrfs_set_timespec_nsec(ts, t.nsec);
}

static void touch_root(struct nsop *o)
{
	btrfs_set_root_ctransid(&o->root->item, o->t->transid);
	if (!o->keep_root_time)
		set_time(btrfs_root_ctime(&o->root->item), o->now);
	o->root->dirty = true;
	ubt_wroot_publish(o->t, o->root);
}

static int check_name(const char *name, size_t len)
{
	if (len == 0)
		return -ENOENT;
	if (len > BTRFS_NAME_LEN)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len) || memchr(name, 0, len) ||
	    (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return -EINVAL;
	return 0;
}

/* ---- reading (through the read side) -------------------------------------- */

static int read_inode(struct nsop *o, uint64_t ino, struct btrfs_inode_item *ii)
{
	struct ubt_inode in;
	int ret;

	if (ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		return -EPERM;
	if (ino < BTRFS_FIRST_FREE_OBJECTID || ino > BTRFS_LAST_FREE_OBJECTID)
		return -ENOENT;
	ret = ubt_inode_read(o->fs, o->sv, ino, &in);
	if (!ret)
		*ii = in.item;
	return ret;
}

static int read_dir(struct nsop *o, uint64_t dir, struct btrfs_inode_item *ii)
{
	int ret = read_inode(o, dir, ii);
	if (!ret && !S_ISDIR(btrfs_inode_mode(ii)))
		ret = -ENOTDIR;
	return ret;
}

/* An entry of `dir`: 0 with the inode number, -ENOENT, -EXDEV for an entry
 * that leads to another subvolume. */
static int lookup(struct nsop *o, uint64_t dir, const char *name, size_t len, uint64_t *ino,
		  uint8_t *type)
{
	struct ubt_inode d = { .ino = dir, .sv = o->sv };
	struct btrfs_key loc;
	uint8_t ft;
	int ret = ubt_dir_lookup(o->fs, &d, name, len, &loc, &ft);

	if (ret)
		return ret;
	if (loc.type != BTRFS_INODE_ITEM_KEY)
		return -EXDEV;
	*ino = loc.objectid;
	if (type)
		*type = ft;
	return 0;
}

int ubt_ns_lookup(struct ubt_fs *fs, uint64_t subvol, uint64_t dir, const char *name, size_t len,
		  uint64_t *ino, uint8_t *type)
{
	const struct ubt_subvol *sv;
	struct ubt_inode d;
	struct btrfs_key loc;
	int ret = ubt_fs_subvol(fs, subvol, &sv);

	if (ret)
		return ret;
	ret = ubt_inode_read(fs, sv, dir, &d);
	if (ret)
		return ret;
	if (!S_ISDIR(ubt_inode_mode(&d)))
		return -ENOTDIR;
	ret = ubt_dir_lookup(fs, &d, name, len, &loc, type);
	if (ret)
		return ret;
	if (loc.type != BTRFS_INODE_ITEM_KEY)
		return -EXDEV;
	*ino = loc.objectid;
	return 0;
}

/* ---- packed entries: dir items, xattrs, inode refs, extrefs ---------------- */

enum ekind { E_DIR, E_REF, E_EXTREF };

struct entry {
	uint32_t off, size;		/* within the item */
	uint64_t index;			/* E_REF, E_EXTREF */
};

/* Size of the entry at p (avail bytes in the item from p), 0 if it does not
 * fit; its name and, for extrefs, parent. */
static uint32_t entry_parse(enum ekind k, const uint8_t *p, uint32_t avail, const uint8_t **name,
			    uint32_t *nlen, uint64_t *parent, uint64_t *index)
{
	uint32_t hdr, size;

	*parent = 0;
	*index = 0;
	switch (k) {
	case E_DIR: {
		const struct btrfs_dir_item *di = (const void *)p;
		hdr = sizeof(*di);
		if (avail < hdr)
			return 0;
		*nlen = btrfs_dir_name_len(di);
		size = hdr + *nlen + btrfs_dir_data_len(di);
		break;
	}
	case E_REF: {
		const struct btrfs_inode_ref *r = (const void *)p;
		hdr = sizeof(*r);
		if (avail < hdr)
			return 0;
		*nlen = btrfs_inode_ref_name_len(r);
		*index = btrfs_inode_ref_index(r);
		size = hdr + *nlen;
		break;
	}
	default: {
		const struct btrfs_inode_extref *r = (const void *)p;
		hdr = sizeof(*r);
		if (avail < hdr)
			return 0;
		*nlen = btrfs_inode_extref_name_len(r);
		*index = btrfs_inode_extref_index(r);
		*parent = btrfs_inode_extref_parent_objectid(r);
		size = hdr + *nlen;
		break;
	}
	}
	if (size > avail)
		return 0;
	*name = p + hdr;
	return size;
}

/* Find the entry `name` (of `parent`, for extrefs) in an item's body:
 * 1 found, 0 not, <0 corrupt. */
static int entry_find(enum ekind k, const uint8_t *p, uint32_t size, uint64_t parent,
		      const char *name, size_t len, struct entry *e, uint64_t where)
{
	uint32_t off = 0;

	while (off < size) {
		const uint8_t *n;
		uint32_t nl;
		uint64_t par, index;
		uint32_t es = entry_parse(k, p + off, size - off, &n, &nl, &par, &index);
		if (!es)
			return UBT_CORRUPT(where, "packed entry overruns its item");
		if (nl == len && !memcmp(n, name, len) && (k != E_EXTREF || par == parent)) {
			e->off = off;
			e->size = es;
			e->index = index;
			return 1;
		}
		off += es;
	}
	return 0;
}

/* Read side: the item at key (size 0 if none) and the entry `name` in it. */
static int probe(struct nsop *o, const struct btrfs_key *key, enum ekind k, uint64_t parent,
		 const char *name, size_t len, uint32_t *item_size, struct entry *e)
{
	struct ubt_path path;
	int ret;

	*item_size = 0;
	ubt_path_init(&path);
	ret = ubt_search_slot(&o->fs->tree, &o->sv->root, key, &path);
	if (ret == 0) {
		*item_size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
		ret = entry_find(k, ubt_eb_item_data(path.nodes[0], path.slots[0]), *item_size,
				 parent, name, len, e, path.nodes[0]->start);
	} else if (ret == 1) {
		ret = 0;
	}
	ubt_path_release(&o->fs->tree, &path);
	return ret;
}

/* Add an entry to the item at key: a new item, or appended to the item
 * already there (hash collision, more names). */
static int item_append(struct nsop *o, const struct btrfs_key *key, const void *entry,
		       uint32_t esz)
{
	struct ubt_path path;
	uint8_t *p;
	int ret = ubt_insert_item(o->t, o->root, key, esz, &p);

	if (ret == 0) {
		memcpy(p, entry, esz);
		return 0;
	}
	if (ret != -EEXIST)
		return ret;
	ubt_path_init(&path);
	ret = ubt_search_slot_grow(o->t, o->root, key, &path, esz);
	if (ret == 1)
		ret = UBT_CORRUPT(0, "item (%llu %u %llu) vanished", (unsigned long long)key->objectid,
				  key->type, (unsigned long long)key->offset);
	if (ret == 0) {
		uint32_t old = ubt_eb_item_size(path.nodes[0], path.slots[0]);
		ret = ubt_extend_item(o->t, &path, esz);
		if (!ret)
			memcpy(ubt_eb_witem_data(path.nodes[0], path.slots[0]) + old, entry, esz);
	}
	ubt_path_release(&o->fs->tree, &path);
	return ret;
}

/* Remove the entry `name` from the item at key (the item goes with its
 * last entry). */
static int item_remove(struct nsop *o, const struct btrfs_key *key, enum ekind k,
		       uint64_t parent, const char *name, size_t len)
{
	struct ubt_path path;
	struct entry e;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot_w(o->t, o->root, key, &path, -1);
	if (ret == 1)
		ret = UBT_CORRUPT(0, "item (%llu %u %llu) vanished", (unsigned long long)key->objectid,
				  key->type, (unsigned long long)key->offset);
	if (ret)
		goto out;
	struct ubt_eb *leaf = path.nodes[0];
	int slot = path.slots[0];
	uint32_t size = ubt_eb_item_size(leaf, slot);
	uint8_t *p = ubt_eb_witem_data(leaf, slot);
	ret = entry_find(k, p, size, parent, name, len, &e, leaf->start);
	if (ret == 0)
		ret = UBT_CORRUPT(leaf->start, "entry '%.*s' vanished from its item", (int)len, name);
	if (ret < 0)
		goto out;
	if (e.size == size)
		return ubt_del_items(o->t, o->root, &path, 1);	/* releases the path */
	memmove(p + e.off, p + e.off + e.size, size - e.off - e.size);
	ret = ubt_truncate_item(o->t, &path, size - e.size, false);
out:
	ubt_path_release(&o->fs->tree, &path);
	return ret;
}

/* A dir item / xattr entry in buf (room for 30 + name + data). */
static uint32_t build_dirent(uint8_t *buf, const struct btrfs_key *location, uint64_t transid,
			     uint8_t type, const char *name, size_t len, const void *data,
			     size_t dlen)
{
	struct btrfs_dir_item *di = (void *)buf;

	memset(di, 0, sizeof(*di));
	btrfs_cpu_key_to_disk(btrfs_dir_location(di), location);
	btrfs_set_dir_transid(di, transid);
	btrfs_set_dir_data_len(di, (uint16_t)dlen);
	btrfs_set_dir_name_len(di, (uint16_t)len);
	btrfs_set_dir_type(di, type);
	memcpy(buf + sizeof(*di), name, len);
	if (dlen)
		memcpy(buf + sizeof(*di) + len, data, dlen);
	return (uint32_t)(sizeof(*di) + len + dlen);
}

/* ---- delayed DIR_INDEX items ------------------------------------------------ */

/*
 * As in the kernel (its delayed items), a new name's DIR_INDEX item is not
 * inserted at once: it waits, with the other new indexes of its directory,
 * and they go in together - one search and one shift of the leaf instead of
 * one per name.  A directory's new indexes are all above the ones in its tree
 * (its counter, next_index, only grows), so its batch is one run of items
 * right after them.  A batch goes in when it reaches a quarter of a leaf,
 * when its slot is needed for another directory (PIDX_DIRS), at the commit
 * (the transaction's pre_commit hook) and before anything reads DIR_INDEX
 * items (ubt_ns_index_flush: the API does it before a readdir).  A name
 * removed while its index waits is taken out of the batch.  The room for the
 * batches is promised to them (ubt_meta_owe_idx), as for the API's deferred
 * ORPHAN_ITEMs; without it an index goes in at once.  Lookups use DIR_ITEMs,
 * which go in at once, and a directory's size counts every name.
 */

static uint32_t pidx_limit(const struct ubt_fs *fs)
{
	return fs->nodesize / 4;
}

/* The slot of the directory's batch, or NULL. */
static struct pidx_dir *pidx_find(struct ubt_ns *ns, uint64_t subvol, uint64_t dir)
{
	if (ns->npidx == 0)
		return NULL;
	struct pidx_dir *p = &ns->pidx[ns->pidx_hint];
	if (p->dir == dir && p->subvol == subvol)
		return p;
	for (unsigned i = 0; i < PIDX_DIRS; i++) {
		p = &ns->pidx[i];
		if (p->dir == dir && p->subvol == subvol) {
			ns->pidx_hint = i;
			return p;
		}
	}
	return NULL;
}

static void pidx_free_slot(struct ubt_ns *ns, struct pidx_dir *p)
{
	p->dir = p->subvol = p->last = 0;
	p->len = p->n = 0;
	ns->npidx--;
}

/* Batches of another (aborted) transaction are gone with it. */
static void pidx_check_trans(struct ubt_ns *ns, const struct ubt_trans *t)
{
	if (ns->pidx_transid != t->transid)
		ubt_ns_index_drop(ns);
	ns->pidx_transid = t->transid;
}

/* Insert the batch and free its slot.  An error aborts the transaction:
 * its names are in, their indexes not. */
static int pidx_flush_dir(struct ubt_ns *ns, struct ubt_trans *t, struct pidx_dir *p)
{
	uint32_t n = p->n;
	int ret = 0;

	if (n) {
		struct btrfs_key *keys = malloc(n * sizeof(*keys));
		uint32_t *sizes = malloc(n * sizeof(*sizes));
		uint8_t **data = malloc(n * sizeof(*data));
		struct ubt_wroot *root = NULL;
		ret = keys && sizes && data ? 0 : -ENOMEM;
		if (!ret)
			ret = ubt_wroot_get(t, p->subvol, &root);
		uint32_t off = 0;
		for (uint32_t i = 0; !ret && i < n; i++) {
			struct pidx_hdr h;
			memcpy(&h, p->buf + off, sizeof(h));
			keys[i] = (struct btrfs_key){ p->dir, BTRFS_DIR_INDEX_KEY, h.index };
			sizes[i] = h.size;
			off += (uint32_t)sizeof(h) + h.size;
		}
		if (!ret) {
			/* The room was promised (ubt_meta_owe_idx). */
			bool owed = t->owed_work;
			t->owed_work = true;
			ret = ubt_insert_items(t, root, keys, sizes, (int)n, data);
			t->owed_work = owed;
			if (ret == -EEXIST)
				ret = UBT_CORRUPT(0, "directory %llu index %llu taken",
						  (unsigned long long)p->dir,
						  (unsigned long long)keys[0].offset);
		}
		off = 0;
		for (uint32_t i = 0; !ret && i < n; i++) {
			off += (uint32_t)sizeof(struct pidx_hdr);
			memcpy(data[i], p->buf + off, sizes[i]);
			off += sizes[i];
		}
		free(keys);
		free(sizes);
		free(data);
		if (ret && !t->w->aborted) {
			ubt_log(UBT_LOG_ERROR, "cannot insert the %u new index items of directory "
				"%llu: %s; aborting", n, (unsigned long long)p->dir, ubt_strerror(ret));
			t->w->aborted = true;
			t->w->abort_err = ret;
		}
	}
	pidx_free_slot(ns, p);
	(void)ubt_meta_owe_idx(t, ns->npidx);	/* less: always kept */
	return ret;
}

bool ubt_ns_index_pending(const struct ubt_ns *ns)
{
	return ns && ns->npidx > 0;
}

int ubt_ns_index_flush(struct ubt_ns *ns, struct ubt_trans *t)
{
	int ret = 0;

	pidx_check_trans(ns, t);
	for (unsigned i = 0; i < PIDX_DIRS && ns->npidx; i++) {
		if (!ns->pidx[i].dir)
			continue;
		int r = t->w->aborted ? -EROFS : pidx_flush_dir(ns, t, &ns->pidx[i]);
		if (r && !ret)
			ret = r;
		if (r && ns->pidx[i].dir)
			pidx_free_slot(ns, &ns->pidx[i]);
	}
	return ret;
}

void ubt_ns_index_drop(struct ubt_ns *ns)
{
	for (unsigned i = 0; i < PIDX_DIRS && ns->npidx; i++)
		if (ns->pidx[i].dir)
			pidx_free_slot(ns, &ns->pidx[i]);
}

static int pidx_commit_hook(void *ctx, struct ubt_trans *t)
{
	return ubt_ns_index_flush(ctx, t);
}

/* Hold the DIR_INDEX item (esz bytes at item) of `index` in dir: 1 held,
 * 0 not (no room promised: the caller inserts it), <0 error (aborted). */
static int pidx_add(struct nsop *o, uint64_t dir, uint64_t index, const uint8_t *item,
		    uint32_t esz)
{
	struct ubt_ns *ns = o->ns;
	uint32_t limit = pidx_limit(o->fs);
	uint32_t need = (uint32_t)sizeof(struct pidx_hdr) + esz;
	int ret;

	pidx_check_trans(ns, o->t);
	struct pidx_dir *p = pidx_find(ns, o->subvol, dir);
	if (p && (index <= p->last || p->len + need > limit)) {
		/* Full (or, which the counter rules out, out of order). */
		ret = pidx_flush_dir(ns, o->t, p);
		if (ret)
			return ret;
		p = NULL;
	}
	if (!p) {
		if (ns->npidx == PIDX_DIRS) {
			p = &ns->pidx[ns->pidx_victim];
			ns->pidx_victim = (ns->pidx_victim + 1) % PIDX_DIRS;
			ret = pidx_flush_dir(ns, o->t, p);
			if (ret)
				return ret;
		}
		if (!ubt_meta_owe_idx(o->t, ns->npidx + 1))
			return 0;
		for (unsigned i = 0; i < PIDX_DIRS; i++) {
			if (!ns->pidx[i].dir) {
				p = &ns->pidx[i];
				ns->pidx_hint = i;
				break;
			}
		}
		if (!p->buf) {
			/* A quarter leaf, and one item more that starts a batch
			 * alone. */
			p->buf = malloc(limit + sizeof(struct pidx_hdr) +
					sizeof(struct btrfs_dir_item) + BTRFS_NAME_LEN);
			if (!p->buf) {
				(void)ubt_meta_owe_idx(o->t, ns->npidx);
				return 0;
			}
		}
		p->subvol = o->subvol;
		p->dir = dir;
		p->len = p->n = 0;
		ns->npidx++;
	}
	struct pidx_hdr h = { index, esz };
	memcpy(p->buf + p->len, &h, sizeof(h));
	memcpy(p->buf + p->len + sizeof(h), item, esz);
	p->len += need;
	p->n++;
	p->last = index;
	return 1;
}

/* Take index `index` of dir out of its batch: 1 done, 0 not held. */
static int pidx_remove(struct nsop *o, uint64_t dir, uint64_t index)
{
	pidx_check_trans(o->ns, o->t);
	struct pidx_dir *p = pidx_find(o->ns, o->subvol, dir);
	if (!p)
		return 0;
	uint32_t off = 0;
	for (uint32_t i = 0; i < p->n; i++) {
		struct pidx_hdr h;
		memcpy(&h, p->buf + off, sizeof(h));
		uint32_t sz = (uint32_t)sizeof(h) + h.size;
		if (h.index == index) {
			memmove(p->buf + off, p->buf + off + sz, p->len - off - sz);
			p->len -= sz;
			p->n--;
			if (p->n == 0) {
				pidx_free_slot(o->ns, p);
				(void)ubt_meta_owe_idx(o->t, o->ns->npidx);
			}
			return 1;
		}
		off += sz;
	}
	return 0;
}

/* The highest index the directory's batch holds (0: none). */
static uint64_t pidx_last(struct nsop *o, uint64_t dir)
{
	struct pidx_dir *p = pidx_find(o->ns, o->subvol, dir);

	return p && p->n && o->ns->pidx_transid == o->t->transid ? p->last : 0;
}

/* ---- counters -------------------------------------------------------------- */

static struct idx_slot *idx_slot(struct ubt_ns *ns, uint64_t subvol, uint64_t dir, bool *found)
{
	size_t i = (size_t)ubt_mix64(dir ^ ubt_mix64(subvol)) & (IDX_SLOTS - 1);

	for (;; i = (i + 1) & (IDX_SLOTS - 1)) {
		struct idx_slot *s = &ns->idx[i];
		if (s->dir == 0) {
			*found = false;
			return s;
		}
		if (s->dir == dir && s->subvol == subvol) {
			*found = true;
			return s;
		}
	}
}

/* The directory's next DIR_INDEX: cached, else the highest there + 1.
 * Like the kernel's counter it is not given back when an operation fails
 * after taking it, and an evicted counter restarts from what is there. */
static int next_index(struct nsop *o, uint64_t dir, uint64_t *index)
{
	struct ubt_ns *ns = o->ns;
	bool found;
	struct idx_slot *s = idx_slot(ns, o->subvol, dir, &found);

	if (!found) {
		struct btrfs_key key = { dir, BTRFS_DIR_INDEX_KEY, (uint64_t)-1 };
		struct ubt_path path;
		uint64_t next = DIR_START_INDEX;
		ubt_path_init(&path);
		int ret = ubt_search_le(&o->fs->tree, &o->sv->root, &key, &path);
		if (ret == 0) {
			struct btrfs_key k;
			ubt_eb_item_key(path.nodes[0], path.slots[0], &k);
			if (k.objectid == dir && k.type == BTRFS_DIR_INDEX_KEY)
				next = UBT_MAX(k.offset + 1, (uint64_t)DIR_START_INDEX);
		}
		ubt_path_release(&o->fs->tree, &path);
		if (ret < 0)
			return ret;
		/* An evicted counter: its directory's batch may hold more. */
		uint64_t held = pidx_last(o, dir);
		if (held >= next)
			next = held + 1;
		if (ns->nidx >= IDX_SLOTS * 3 / 4) {
			memset(ns->idx, 0, IDX_SLOTS * sizeof(*ns->idx));
			ns->nidx = 0;
			s = idx_slot(ns, o->subvol, dir, &found);
		}
		s->subvol = o->subvol;
		s->dir = dir;
		s->next = next;
		ns->nidx++;
	}
	*index = s->next++;
	return 0;
}

/* A new inode number: the highest in the tree + 1 at first use, counted
 * up from there (never reused while ns lives), as the kernel does. */
static int next_ino(struct nsop *o, uint64_t *ino)
{
	struct ubt_ns *ns = o->ns;
	struct ino_next *n = NULL;

	for (size_t i = 0; i < ns->ninos; i++)
		if (ns->inos[i].subvol == o->subvol)
			n = &ns->inos[i];
	if (!n) {
		struct btrfs_key key = { BTRFS_LAST_FREE_OBJECTID, (uint8_t)-1, (uint64_t)-1 };
		struct ubt_path path;
		uint64_t next = BTRFS_FIRST_FREE_OBJECTID;
		ubt_path_init(&path);
		int ret = ubt_search_le(&o->fs->tree, &o->sv->root, &key, &path);
		if (ret == 0) {
			struct btrfs_key k;
			ubt_eb_item_key(path.nodes[0], path.slots[0], &k);
			if (k.objectid >= BTRFS_FIRST_FREE_OBJECTID)
				next = k.objectid + 1;
		}
		ubt_path_release(&o->fs->tree, &path);
		if (ret < 0)
			return ret;
		struct ino_next *v = realloc(ns->inos, (ns->ninos + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ns->inos = v;
		n = &v[ns->ninos++];
		n->subvol = o->subvol;
		n->next = next;
	}
	if (n->next >= BTRFS_LAST_FREE_OBJECTID)
		return -ENOSPC;
	*ino = n->next++;
	return 0;
}

/* ---- inode items ----------------------------------------------------------- */

static int write_inode(struct nsop *o, uint64_t ino, const struct btrfs_inode_item *ii)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot_w(o->t, o->root, &key, &path, 0);
	if (ret == 1)
		ret = UBT_CORRUPT(0, "inode %llu vanished", (unsigned long long)ino);
	if (ret == 0) {
		if (ubt_eb_item_size(path.nodes[0], path.slots[0]) < sizeof(*ii))
			ret = UBT_CORRUPT(path.nodes[0]->start, "inode %llu item too small",
					  (unsigned long long)ino);
		else
			memcpy(ubt_eb_witem_data(path.nodes[0], path.slots[0]), ii, sizeof(*ii));
	}
	if (ret == 0)
		ubt_icache_put(o->fs, o->subvol, ino, ii, -1, -1);
	ubt_path_release(&o->fs->tree, &path);
	return ret;
}

/* Changed in this transaction: transid, `seq` more on the change counter,
 * ctime (and mtime) now. */
static void touch(struct nsop *o, struct btrfs_inode_item *ii, unsigned seq, bool mtime)
{
	btrfs_set_inode_transid(ii, o->t->transid);
	btrfs_set_inode_sequence(ii, btrfs_inode_sequence(ii) + seq);
	set_time(btrfs_inode_ctime(ii), o->now);
	if (mtime)
		set_time(btrfs_inode_mtime(ii), o->now);
}

static void dir_resize(struct btrfs_inode_item *dir, size_t len, bool add)
{
	uint64_t size = btrfs_inode_size(dir);
	uint64_t d = 2 * (uint64_t)len;
	btrfs_set_inode_size(dir, add ? size + d : (size >= d ? size - d : 0));
}

/* A data extent an EXTENT_DATA item of a deleted inode references. */
struct data_drop {
	uint64_t bytenr, num_bytes, ref_offset;
};

/* What the EXTENT_DATA item at `it` references: 1 a data extent (*d set),
 * 0 nothing (an inline extent or a hole), or -EUCLEAN. */
static int extent_data_ref(uint64_t file_off, const uint8_t *data, uint32_t size, uint64_t where,
			   struct data_drop *d)
{
	const struct btrfs_file_extent_item *fi = (const void *)data;

	if (size < btrfs_file_extent_inline_start())
		return UBT_CORRUPT(where, "file extent item too small");
	if (btrfs_file_extent_type(fi) == BTRFS_FILE_EXTENT_INLINE)
		return 0;
	if (size < sizeof(*fi))
		return UBT_CORRUPT(where, "file extent item too small");
	if (btrfs_file_extent_disk_bytenr(fi) == 0)
		return 0;
	*d = (struct data_drop){ btrfs_file_extent_disk_bytenr(fi),
				 btrfs_file_extent_disk_num_bytes(fi),
				 file_off - btrfs_file_extent_offset(fi) };
	return 1;
}

static int item_data_ref(const struct ubt_iter *it, struct data_drop *d)
{
	return extent_data_ref(it->key.offset, it->data, it->size, it->leaf->start, d);
}

/* Does the inode have data extents (which deleting it would have to free)? */
static int has_data_extents(struct nsop *o, uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_EXTENT_DATA_KEY, 0 };
	struct btrfs_key max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 };
	struct data_drop d;
	struct ubt_iter it;
	int ret, found = 0;

	ubt_iter_start(&it, &o->fs->tree, &o->sv->root, &min, &max);
	while (!found && (ret = ubt_iter_next(&it)) == 0) {
		found = item_data_ref(&it, &d);
		if (found < 0)
			ret = found;
	}
	ubt_iter_end(&it);
	return ret < 0 ? ret : found > 0;
}

bool ubt_ns_drops_data(const struct ubt_fs *fs, uint64_t nbytes)
{
	return nbytes <= (uint64_t)UBT_NS_DROP_SECTORS * fs->sectorsize;
}

/* May the inode be deleted with its data, or must its data go first (in
 * the caller's steps)?  Decided from nbytes, without a search. */
static int data_deletable(struct nsop *o, uint64_t ino, const struct btrfs_inode_item *ii)
{
	if (ubt_ns_drops_data(o->fs, btrfs_inode_nbytes(ii)))
		return 0;
	int ret = has_data_extents(o, ino);
	if (ret < 0)
		return ret;
	return ret ? -EOPNOTSUPP : 0;
}

/* Note what a deleted EXTENT_DATA item (at file_off: data, size bytes, in
 * the block at where) references, if anything. */
static int note_drop(uint64_t file_off, const uint8_t *data, uint32_t size, uint64_t where,
		     struct data_drop **v, size_t *n, size_t *cap)
{
	struct data_drop d;
	int ret = extent_data_ref(file_off, data, size, where, &d);

	if (ret <= 0)
		return ret;
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 4;
		struct data_drop *nv = realloc(*v, *cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
	}
	(*v)[(*n)++] = d;
	return 0;
}

static void warn_drops(uint64_t ino, size_t nd, const struct btrfs_inode_item *ii)
{
	ubt_log(UBT_LOG_WARNING, "inode %llu: %zu data extents under nbytes %llu "
		"(btrfs check: nbytes wrong); deleted all the same",
		(unsigned long long)ino, nd, (unsigned long long)btrfs_inode_nbytes(ii));
}

/*
 * delete_inode's usual case in one search: every item of the inode in the
 * leaf where its first one is, with items of a later inode after them.  1:
 * not so (nothing changed), 0 deleted, <0 error.
 */
static int delete_inode_leaf(struct nsop *o, uint64_t ino, const struct btrfs_inode_item *ii)
{
	struct btrfs_key key = { ino, 0, 0 }, k;
	struct data_drop *drops = NULL;
	size_t nd = 0, dcap = 0;
	struct ubt_path path;
	int ret, run = 0;

	ubt_path_init(&path);
	ret = ubt_search_slot_w(o->t, o->root, &key, &path, -1);
	if (ret < 0)
		goto out;
	struct ubt_eb *leaf = path.nodes[0];
	int slot = path.slots[0], nr = (int)ubt_eb_nritems(leaf);
	ret = 1;
	for (; slot + run < nr; run++) {
		ubt_eb_item_key(leaf, slot + run, &k);
		if (k.objectid != ino)
			break;
		if (k.type == BTRFS_EXTENT_DATA_KEY) {
			int r = note_drop(k.offset, ubt_eb_item_data(leaf, slot + run),
					  ubt_eb_item_size(leaf, slot + run), leaf->start, &drops, &nd,
					  &dcap);
			if (r) {
				ret = r;
				goto out;
			}
		}
	}
	if (run == 0 || slot + run == nr)
		goto out;	/* none here, or more may follow in the next leaf */
	if (nd > UBT_NS_DROP_SECTORS && ubt_ns_drops_data(o->fs, btrfs_inode_nbytes(ii)))
		warn_drops(ino, nd, ii);
	ret = ubt_del_items(o->t, o->root, &path, run);	/* releases the path */
	for (size_t i = 0; i < nd && !ret; i++)
		ret = ubt_file_data_unref(o->t, o->root, ino, drops[i].bytenr, drops[i].num_bytes,
					  drops[i].ref_offset);
	free(drops);
	return ret;
out:
	ubt_path_release(&o->fs->tree, &path);
	free(drops);
	return ret;
}

/* Delete every item of an inode (its last link is gone), with one data
 * reference less for each EXTENT_DATA item that has one.  The caller
 * checked data_deletable; more than UBT_NS_DROP_SECTORS such items under
 * a small nbytes (a wrong nbytes, as btrfs check reports it) are dropped
 * all the same, with a warning: the deletion is right, only larger than
 * the rule's step. */
static int delete_inode(struct nsop *o, uint64_t ino, const struct btrfs_inode_item *ii)
{
	struct btrfs_key min = { ino, 0, 0 };
	struct btrfs_key max = { ino, (uint8_t)-1, (uint64_t)-1 };
	struct btrfs_key *keys = NULL;
	struct data_drop *drops = NULL;
	size_t n = 0, cap = 0, nd = 0, dcap = 0;
	struct ubt_iter it;
	int ret;

	ubt_icache_drop(o->fs, o->subvol, ino);
	ret = delete_inode_leaf(o, ino, ii);
	if (ret != 1)
		return ret;
	ubt_iter_start(&it, &o->fs->tree, &o->sv->root, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.key.type == BTRFS_EXTENT_DATA_KEY) {
			ret = note_drop(it.key.offset, it.data, it.size, it.leaf->start, &drops,
					&nd, &dcap);
			if (ret)
				break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct btrfs_key *v = realloc(keys, cap * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			keys = v;
		}
		keys[n++] = it.key;
	}
	ubt_iter_end(&it);
	if (ret < 0)
		goto out;
	ret = 0;
	if (nd > UBT_NS_DROP_SECTORS && ubt_ns_drops_data(o->fs, btrfs_inode_nbytes(ii)))
		warn_drops(ino, nd, ii);
	for (size_t i = 0; i < n && !ret;) {
		struct ubt_path path;
		ubt_path_init(&path);
		ret = ubt_search_slot_w(o->t, o->root, &keys[i], &path, -1);
		if (ret == 1)
			ret = UBT_CORRUPT(0, "item of inode %llu vanished", (unsigned long long)ino);
		if (ret) {
			ubt_path_release(&o->fs->tree, &path);
			break;
		}
		/* The run of this inode's items in the leaf, from the slot. */
		struct ubt_eb *leaf = path.nodes[0];
		int slot = path.slots[0], run = 0;
		while (slot + run < (int)ubt_eb_nritems(leaf) && i + (size_t)run < n) {
			struct btrfs_key k;
			ubt_eb_item_key(leaf, slot + run, &k);
			if (btrfs_comp_keys(&k, &keys[i + (size_t)run]) != 0)
				break;
			run++;
		}
		ret = ubt_del_items(o->t, o->root, &path, run);
		i += (size_t)run;
	}
	/* After the items are gone, as a truncate drops them. */
	for (size_t i = 0; i < nd && !ret; i++)
		ret = ubt_file_data_unref(o->t, o->root, ino, drops[i].bytenr, drops[i].num_bytes,
					  drops[i].ref_offset);
out:
	free(keys);
	free(drops);
	return ret;
}

/* ---- references ------------------------------------------------------------ */

struct ref_loc {
	bool ext;			/* an INODE_EXTREF entry */
	uint64_t index;
	uint32_t size;			/* of the entry */
};

static void extref_key(struct btrfs_key *key, uint64_t ino, uint64_t dir, const char *name,
		       size_t len)
{
	key->objectid = ino;
	key->type = BTRFS_INODE_EXTREF_KEY;
	key->offset = ubt_extref_hash(dir, name, len);
}

/* Where the name (dir, name) of inode ino is recorded. */
static int ref_find(struct nsop *o, uint64_t ino, uint64_t dir, const char *name, size_t len,
		    struct ref_loc *r)
{
	struct btrfs_key key = { ino, BTRFS_INODE_REF_KEY, dir };
	struct entry e;
	uint32_t isz;
	int ret = probe(o, &key, E_REF, 0, name, len, &isz, &e);

	if (ret == 0) {
		extref_key(&key, ino, dir, name, len);
		ret = probe(o, &key, E_EXTREF, dir, name, len, &isz, &e);
		r->ext = true;
	} else {
		r->ext = false;
	}
	if (ret == 0)
		return UBT_CORRUPT(0, "inode %llu has no reference for '%.*s' in directory %llu",
				   (unsigned long long)ino, (int)len, name, (unsigned long long)dir);
	if (ret < 0)
		return ret;
	r->index = e.index;
	r->size = e.size;
	return 0;
}

/* Would a new name fit?  `freed`: bytes the operation removes from the
 * INODE_REF of (ino, dir) before adding.  0, -EMLINK or -EOVERFLOW. */
static int ref_room(struct nsop *o, uint64_t ino, uint64_t dir, const char *name, size_t len,
		    uint32_t freed)
{
	struct btrfs_key key = { ino, BTRFS_INODE_REF_KEY, dir };
	struct entry e;
	uint32_t isz;
	uint32_t max = max_item_size(o->fs);
	int ret = probe(o, &key, E_REF, 0, name, len, &isz, &e);

	if (ret < 0)
		return ret;
	isz -= UBT_MIN(isz, freed);
	if (isz == 0 || isz + sizeof(struct btrfs_inode_ref) + len <= max)
		return 0;
	if (!has_extref(o->fs))
		return -EMLINK;
	extref_key(&key, ino, dir, name, len);
	ret = probe(o, &key, E_EXTREF, dir, name, len, &isz, &e);
	if (ret < 0)
		return ret;
	if (isz && isz + sizeof(struct btrfs_inode_extref) + len > max)
		return -EMLINK;
	return 0;
}

/* Add the name to an existing inode's references (a new inode gets its
 * INODE_REF together with its INODE_ITEM: ubt_ns_create). */
static int ref_add(struct nsop *o, uint64_t ino, uint64_t dir, const char *name, size_t len,
		   uint64_t index)
{
	uint8_t buf[sizeof(struct btrfs_inode_extref) + BTRFS_NAME_LEN];
	struct btrfs_key key = { ino, BTRFS_INODE_REF_KEY, dir };
	struct entry e;
	uint32_t isz = 0;
	int ret = probe(o, &key, E_REF, 0, name, len, &isz, &e);

	if (ret < 0)
		return ret;
	if (ret == 1)
		return UBT_CORRUPT(0, "inode %llu already has the name '%.*s'",
				   (unsigned long long)ino, (int)len, name);
	if (isz == 0 || isz + sizeof(struct btrfs_inode_ref) + len <= max_item_size(o->fs)) {
		struct btrfs_inode_ref *r = (void *)buf;
		btrfs_set_inode_ref_index(r, index);
		btrfs_set_inode_ref_name_len(r, (uint16_t)len);
		memcpy(buf + sizeof(*r), name, len);
		return item_append(o, &key, buf, (uint32_t)(sizeof(*r) + len));
	}
	if (!has_extref(o->fs))
		return -EMLINK;
	struct btrfs_inode_extref *x = (void *)buf;
	btrfs_set_inode_extref_parent_objectid(x, dir);
	btrfs_set_inode_extref_index(x, index);
	btrfs_set_inode_extref_name_len(x, (uint16_t)len);
	memcpy(buf + sizeof(*x), name, len);
	extref_key(&key, ino, dir, name, len);
	return item_append(o, &key, buf, (uint32_t)(sizeof(*x) + len));
}

static int ref_remove(struct nsop *o, uint64_t ino, uint64_t dir, const char *name, size_t len,
		      const struct ref_loc *r)
{
	struct btrfs_key key = { ino, BTRFS_INODE_REF_KEY, dir };

	if (!r->ext)
		return item_remove(o, &key, E_REF, 0, name, len);
	extref_key(&key, ino, dir, name, len);
	return item_remove(o, &key, E_EXTREF, dir, name, len);
}

/* ---- directory entries ----------------------------------------------------- */

static uint8_t mode_to_ft(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return BTRFS_FT_REG_FILE;
	case S_IFDIR: return BTRFS_FT_DIR;
	case S_IFCHR: return BTRFS_FT_CHRDEV;
	case S_IFBLK: return BTRFS_FT_BLKDEV;
	case S_IFIFO: return BTRFS_FT_FIFO;
	case S_IFSOCK: return BTRFS_FT_SOCK;
	case S_IFLNK: return BTRFS_FT_SYMLINK;
	default: return BTRFS_FT_UNKNOWN;
	}
}

/* The DIR_ITEM of the name's hash: 1 the name is in it (an inode's or a
 * subvolume's entry), 0 not, <0 error; *isz its size (0: no item). */
static int dirent_probe(struct nsop *o, uint64_t dir, const char *name, size_t len,
			uint32_t *isz)
{
	struct btrfs_key key = { dir, BTRFS_DIR_ITEM_KEY, ubt_name_hash(name, len) };
	struct entry e;

	return probe(o, &key, E_DIR, 0, name, len, isz, &e);
}

/* The start of an operation adding `name` to dir: the name is valid and
 * not taken (-EEXIST); *dii the directory, *disz the size of the DIR_ITEM
 * of the name's hash (one probe: is the name there, would an entry fit).
 * name_add_begin_fit (below) also refuses a name whose entry would not fit. */
static int name_add_begin(struct nsop *o, struct ubt_ns *ns, struct ubt_trans *t,
			  uint64_t subvol, uint64_t dir, const char *name, size_t len,
			  struct ubt_ns_time now, struct btrfs_inode_item *dii, uint32_t *disz)
{
	int ret = check_name(name, len);

	if (!ret)
		ret = op_begin(o, ns, t, subvol, now);
	if (!ret)
		ret = read_dir(o, dir, dii);
	if (!ret)
		ret = dirent_probe(o, dir, name, len, disz);
	if (ret == 1)
		return -EEXIST;
	return ret < 0 ? ret : 0;
}

/* Would a new entry fit in a DIR_ITEM of `isz` bytes?  0 or -EOVERFLOW. */
static int dirent_fits(struct nsop *o, uint32_t isz, size_t len)
{
	if (isz && isz + sizeof(struct btrfs_dir_item) + len > max_item_size(o->fs))
		return -EOVERFLOW;
	return 0;
}

static int name_add_begin_fit(struct nsop *o, struct ubt_ns *ns, struct ubt_trans *t,
			      uint64_t subvol, uint64_t dir, const char *name, size_t len,
			      struct ubt_ns_time now, struct btrfs_inode_item *dii)
{
	uint32_t disz;
	int ret = name_add_begin(o, ns, t, subvol, dir, name, len, now, dii, &disz);

	return ret ? ret : dirent_fits(o, disz, len);
}

/* Would a new entry fit in the DIR_ITEM of its hash?  `freed`: bytes the
 * operation removes from that item first.  0 or -EOVERFLOW. */
static int dirent_room(struct nsop *o, uint64_t dir, const char *name, size_t len, uint32_t freed)
{
	uint32_t isz;
	int ret = dirent_probe(o, dir, name, len, &isz);

	if (ret < 0)
		return ret;
	return dirent_fits(o, isz - UBT_MIN(isz, freed), len);
}

/* A new entry `name` in dir leading to loc (an inode's INODE_ITEM key, or
 * a subvolume's ROOT_ITEM key), with its DIR_INDEX at index. */
static int dirent_add_loc(struct nsop *o, uint64_t dir, const char *name, size_t len,
			  const struct btrfs_key *loc, uint8_t ft, uint64_t index)
{
	uint8_t buf[sizeof(struct btrfs_dir_item) + BTRFS_NAME_LEN];
	uint32_t esz = build_dirent(buf, loc, o->t->transid, ft, name, len, NULL, 0);
	struct btrfs_key key = { dir, BTRFS_DIR_ITEM_KEY, ubt_name_hash(name, len) };
	int ret = item_append(o, &key, buf, esz);

	if (ret)
		return ret;
	key.type = BTRFS_DIR_INDEX_KEY;
	key.offset = index;
	ret = pidx_add(o, dir, index, buf, esz);
	if (ret)
		return ret < 0 ? ret : 0;
	uint8_t *p;
	ret = ubt_insert_item(o->t, o->root, &key, esz, &p);
	if (ret == -EEXIST)
		return UBT_CORRUPT(0, "directory %llu index %llu taken", (unsigned long long)dir,
				   (unsigned long long)index);
	if (!ret)
		memcpy(p, buf, esz);
	return ret;
}

static int dirent_add(struct nsop *o, uint64_t dir, const char *name, size_t len, uint64_t ino,
		      uint8_t ft, uint64_t index)
{
	struct btrfs_key loc = { ino, BTRFS_INODE_ITEM_KEY, 0 };

	return dirent_add_loc(o, dir, name, len, &loc, ft, index);
}

static int dirent_remove(struct nsop *o, uint64_t dir, const char *name, size_t len,
			 uint64_t index)
{
	struct btrfs_key key = { dir, BTRFS_DIR_ITEM_KEY, ubt_name_hash(name, len) };
	int ret = item_remove(o, &key, E_DIR, 0, name, len);

	if (ret)
		return ret;
	key.type = BTRFS_DIR_INDEX_KEY;
	key.offset = index;
	if (pidx_remove(o, dir, index))
		return 0;
	ret = ubt_delete_key(o->t, o->root, &key);
	if (ret == -ENOENT)
		ret = UBT_CORRUPT(0, "directory %llu has no index %llu for '%.*s'",
				  (unsigned long long)dir, (unsigned long long)index, (int)len, name);
	return ret;
}

/* The new entry (dirent_add_loc) counted in its directory - size, mtime,
 * ctime, sequence - and the subvolume's ctime; a failure ends (op_end). */
static int name_add_finish(struct nsop *o, uint64_t dir, struct btrfs_inode_item *dii,
			   const char *name, size_t len, const struct btrfs_key *loc, uint8_t ft,
			   uint64_t index)
{
	int ret = dirent_add_loc(o, dir, name, len, loc, ft, index);

	if (!ret) {
		dir_resize(dii, len, true);
		touch(o, dii, 1, true);
		ret = write_inode(o, dir, dii);
	}
	if (ret)
		return op_end(o, ret);
	touch_root(o);
	return 0;
}

/* ---- create ---------------------------------------------------------------- */

/* The "btrfs.compression" property of the parent, if any (value in buf). */
static ssize_t parent_compression(struct nsop *o, uint64_t dir, char *buf, size_t size)
{
	ssize_t n = ubt_xattr_get(o->fs, o->sv, dir, COMPRESSION_XATTR, buf, size);
	if (n == -ENODATA || n == -ERANGE)
		return 0;
	return n;
}

/*
 * The flags a new inode of `type` in dir (its item dii) inherits, in
 * *flags, and the compression property it takes (into prop, 64 bytes):
 * the property's length, 0 for none, or -errno.
 */
static ssize_t inherit(struct nsop *o, uint64_t dir, const struct btrfs_inode_item *dii,
		       uint32_t type, uint64_t *flags, char *prop)
{
	uint64_t pflags = btrfs_inode_flags(dii), f = 0;
	ssize_t plen = 0;

	if (pflags & BTRFS_INODE_NOCOMPRESS)
		f |= BTRFS_INODE_NOCOMPRESS;
	else if (pflags & BTRFS_INODE_COMPRESS)
		f |= BTRFS_INODE_COMPRESS;
	if (pflags & BTRFS_INODE_NODATACOW) {
		f |= BTRFS_INODE_NODATACOW;
		if (type == S_IFREG)
			f |= BTRFS_INODE_NODATASUM;
	}
	if ((type == S_IFREG || type == S_IFDIR) && !(f & BTRFS_INODE_NODATACOW)) {
		/* The algorithm passes on (without a level: "zstd:3" gives
		 * "zstd"); "no"/"none" does not (the NOCOMPRESS flag does). */
		plen = parent_compression(o, dir, prop, 64);
		if (plen < 0)
			return plen;
		static const char *const algs[] = { "zlib", "lzo", "zstd" };
		const char *alg = NULL;
		for (size_t i = 0; plen > 0 && i < UBT_ARRAY_SIZE(algs); i++)
			if ((size_t)plen >= strlen(algs[i]) && !memcmp(prop, algs[i], strlen(algs[i])))
				alg = algs[i];
		plen = 0;
		if (alg) {
			plen = (ssize_t)strlen(alg);
			memcpy(prop, alg, (size_t)plen);
			f &= ~BTRFS_INODE_NOCOMPRESS;
			f |= BTRFS_INODE_COMPRESS;
		}
	}
	*flags = f;
	return plen;
}

/* The compression property of a new inode (prop, plen bytes). */
static int put_compression(struct nsop *o, uint64_t ino, const char *prop, size_t plen)
{
	uint8_t buf[sizeof(struct btrfs_dir_item) + sizeof(COMPRESSION_XATTR) + 64];
	struct btrfs_key zero = { 0, 0, 0 };
	uint32_t esz = build_dirent(buf, &zero, o->t->transid, BTRFS_FT_XATTR, COMPRESSION_XATTR,
				    strlen(COMPRESSION_XATTR), prop, plen);
	struct btrfs_key xk = { ino, BTRFS_XATTR_ITEM_KEY,
				ubt_name_hash(COMPRESSION_XATTR, strlen(COMPRESSION_XATTR)) };

	return item_append(o, &xk, buf, esz);
}

int ubt_ns_create(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		  const char *name, size_t len, const struct ubt_ns_new_inode *a,
		  struct ubt_ns_time now, uint64_t *ino_out)
{
	struct nsop o;
	struct btrfs_inode_item dii, ii;
	uint32_t type = a->mode & S_IFMT;
	uint64_t ino, index;
	bool lnk = type == S_IFLNK;
	char prop[64];
	ssize_t plen = 0;
	int ret;

	if (mode_to_ft(a->mode) == BTRFS_FT_UNKNOWN)
		return -EINVAL;
	if (lnk && a->target_len == 0)
		return -ENOENT;
	if (lnk && a->target_len >= SYMLINK_PATH_MAX)
		return -ENAMETOOLONG;
	if ((type == S_IFCHR || type == S_IFBLK) &&
	    (a->rdev_major >= (1u << 12) || a->rdev_minor >= (1u << 20)))
		return -EINVAL;
	uint32_t disz;
	ret = name_add_begin(&o, ns, t, subvol, dir, name, len, now, &dii, &disz);
	if (ret)
		return ret;
	if (lnk && a->target_len > ubt_ns_max_symlink(o.fs))
		return -ENAMETOOLONG;
	ret = dirent_fits(&o, disz, len);
	if (ret)
		return ret;

	/* Flags and properties the new inode inherits. */
	uint64_t flags;
	plen = inherit(&o, dir, &dii, type, &flags, prop);
	if (plen < 0)
		return (int)plen;

	ret = next_ino(&o, &ino);
	if (!ret)
		ret = next_index(&o, dir, &index);
	if (!ret)
		ret = op_reserve(&o, false);
	if (ret)
		return ret;

	memset(&ii, 0, sizeof(ii));
	btrfs_set_inode_generation(&ii, t->transid);
	btrfs_set_inode_transid(&ii, t->transid);
	btrfs_set_inode_nlink(&ii, 1);
	btrfs_set_inode_uid(&ii, a->uid);
	btrfs_set_inode_gid(&ii, a->gid);
	btrfs_set_inode_mode(&ii, lnk ? (S_IFLNK | 0777) : (type | (a->mode & 07777)));
	if (type == S_IFCHR || type == S_IFBLK)
		btrfs_set_inode_rdev(&ii, ((uint64_t)a->rdev_major << 20) | a->rdev_minor);
	btrfs_set_inode_flags(&ii, flags);
	if (lnk) {
		btrfs_set_inode_size(&ii, a->target_len);
		btrfs_set_inode_nbytes(&ii, a->target_len);
	}
	set_time(btrfs_inode_atime(&ii), now);
	set_time(btrfs_inode_ctime(&ii), now);
	set_time(btrfs_inode_mtime(&ii), now);
	set_time(btrfs_inode_otime(&ii), now);

	/* The INODE_ITEM and the new name's INODE_REF, (ino 1 0) and (ino 12
	 * dir): neighbours in the tree, inserted together. */
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct btrfs_key keys[2] = { key, { ino, BTRFS_INODE_REF_KEY, dir } };
	uint32_t sizes[2] = { sizeof(ii), (uint32_t)(sizeof(struct btrfs_inode_ref) + len) };
	uint8_t *data[2], *p;
	ret = ubt_insert_items(t, o.root, keys, sizes, 2, data);
	if (ret == -EEXIST)
		ret = UBT_CORRUPT(0, "new inode number %llu is taken", (unsigned long long)ino);
	if (ret)
		return op_end(&o, ret);
	memcpy(data[0], &ii, sizeof(ii));
	struct btrfs_inode_ref *ref = (void *)data[1];
	btrfs_set_inode_ref_index(ref, index);
	btrfs_set_inode_ref_name_len(ref, (uint16_t)len);
	memcpy(data[1] + sizeof(*ref), name, len);
	/* Known from here: no xattr unless the compression property goes in
	 * below, no EXTENT_DATA unless it is a symlink. */
	ubt_icache_put(o.fs, subvol, ino, &ii, plen > 0 ? 0 : 1, lnk ? 0 : 1);
	if (plen > 0)
		ret = put_compression(&o, ino, prop, (size_t)plen);
	if (!ret && lnk) {
		size_t isz = btrfs_file_extent_inline_start() + a->target_len;
		key.type = BTRFS_EXTENT_DATA_KEY;
		key.offset = 0;
		ret = ubt_insert_item(t, o.root, &key, (uint32_t)isz, &p);
		if (!ret) {
			struct btrfs_file_extent_item *fi = (void *)p;
			btrfs_set_file_extent_generation(fi, t->transid);
			btrfs_set_file_extent_ram_bytes(fi, a->target_len);
			btrfs_set_file_extent_compression(fi, BTRFS_COMPRESS_NONE);
			btrfs_set_file_extent_type(fi, BTRFS_FILE_EXTENT_INLINE);
			memcpy(p + btrfs_file_extent_inline_start(), a->target, a->target_len);
		}
	}
	if (ret)
		return op_end(&o, ret);
	struct btrfs_key loc = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	ret = name_add_finish(&o, dir, &dii, name, len, &loc, mode_to_ft(a->mode), index);
	if (ret)
		return ret;
	if (ino_out)
		*ino_out = ino;
	return 0;
}

/* ---- snapshots ------------------------------------------------------------ */

/* The tree id a new subvolume gets: one above the highest id in the root
 * tree (as the kernel picks it), at least BTRFS_FIRST_FREE_OBJECTID. */
static int new_tree_id(struct ubt_fs *fs, uint64_t *id)
{
	struct btrfs_key key = { BTRFS_LAST_FREE_OBJECTID, (uint8_t)-1, (uint64_t)-1 };
	struct ubt_path path;
	uint64_t next = BTRFS_FIRST_FREE_OBJECTID;

	ubt_path_init(&path);
	int ret = ubt_search_le(&fs->tree, &fs->root_tree, &key, &path);
	if (ret == 0) {
		struct btrfs_key k;
		ubt_eb_item_key(path.nodes[0], path.slots[0], &k);
		if (k.objectid >= BTRFS_FIRST_FREE_OBJECTID)
			next = k.objectid + 1;
		ret = 0;
	} else if (ret == 1) {
		ret = 0;
	}
	ubt_path_release(&fs->tree, &path);
	if (!ret && next > BTRFS_LAST_FREE_OBJECTID)
		ret = -ENOSPC;
	*id = next;
	return ret;
}

/* Insert a copy of `len` bytes at key into tree r. */
static int insert_copy(struct ubt_trans *t, struct ubt_wroot *r, const struct btrfs_key *key,
		       const void *data, uint32_t len)
{
	uint8_t *p;
	int ret = ubt_insert_item(t, r, key, len, &p);

	if (ret == -EEXIST)
		return UBT_CORRUPT(0, "item (%llu %u %llu) exists already",
				   (unsigned long long)key->objectid, key->type,
				   (unsigned long long)key->offset);
	if (!ret)
		memcpy(p, data, len);
	return ret;
}

/* An entry of the uuid tree (type UUID_KEY_SUBVOL or _RECEIVED_SUBVOL:
 * uuid -> subvolume id), where the filesystem has a uuid tree (without
 * one the kernel builds it at its next read-write mount). */
static int uuid_add(struct ubt_trans *t, const uint8_t *uuid, uint8_t type, uint64_t id)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_wroot *ut;
	struct btrfs_key key;
	uint8_t v[8];
	uint8_t *p;

	if (!fs->uuid_tree.bytenr)
		return 0;
	int ret = ubt_wroot_get(t, BTRFS_UUID_TREE_OBJECTID, &ut);
	if (ret)
		return ret;
	btrfs_uuid_to_key(uuid, type, &key);
	ubt_put_le64(v, id);
	ret = ubt_insert_item(t, ut, &key, sizeof(v), &p);
	if (!ret) {
		memcpy(p, v, sizeof(v));
		return 0;
	}
	if (ret != -EEXIST)
		return ret;
	/* Another subvolume with these uuid bytes (a received copy, say). */
	struct ubt_path path;
	ubt_path_init(&path);
	ret = ubt_search_slot_grow(t, ut, &key, &path, sizeof(v));
	if (ret == 1)
		ret = UBT_CORRUPT(0, "uuid item vanished");
	if (!ret) {
		uint32_t old = ubt_eb_item_size(path.nodes[0], path.slots[0]);
		ret = ubt_extend_item(t, &path, sizeof(v));
		if (!ret)
			memcpy(ubt_eb_witem_data(path.nodes[0], path.slots[0]) + old, v, sizeof(v));
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/* A new subvolume `id` (its ROOT_ITEM in place) named in dir of o's
 * subvolume (its item dii, the name's index): the entry (a directory,
 * located by the ROOT_ITEM key) counted in dir, ROOT_REF and ROOT_BACKREF
 * in the root tree rt, the uuid tree's entry.  A failure ends (op_end). */
static int subvol_link(struct nsop *o, struct ubt_wroot *rt, uint64_t dir,
		       struct btrfs_inode_item *dii, const char *name, size_t len, uint64_t id,
		       uint64_t index, const uint8_t *uuid)
{
	struct btrfs_key loc = { id, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	int ret = name_add_finish(o, dir, dii, name, len, &loc, BTRFS_FT_DIR, index);

	if (ret)
		return ret;
	uint8_t rbuf[sizeof(struct btrfs_root_ref) + BTRFS_NAME_LEN];
	struct btrfs_root_ref *rr = (void *)rbuf;
	btrfs_set_root_ref_dirid(rr, dir);
	btrfs_set_root_ref_sequence(rr, index);
	btrfs_set_root_ref_name_len(rr, (uint16_t)len);
	memcpy(rbuf + sizeof(*rr), name, len);
	uint32_t rlen = (uint32_t)(sizeof(*rr) + len);
	struct btrfs_key k = { o->subvol, BTRFS_ROOT_REF_KEY, id };
	ret = insert_copy(o->t, rt, &k, rbuf, rlen);
	if (!ret) {
		k = (struct btrfs_key){ id, BTRFS_ROOT_BACKREF_KEY, o->subvol };
		ret = insert_copy(o->t, rt, &k, rbuf, rlen);
	}
	if (!ret)
		ret = uuid_add(o->t, uuid, BTRFS_UUID_KEY_SUBVOL, id);
	return ret ? op_end(o, ret) : 0;
}

int ubt_ns_snapshot(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		    const char *name, size_t len, uint64_t src, bool readonly,
		    struct ubt_ns_time now, uint64_t *id_out)
{
	struct nsop o;
	struct btrfs_inode_item dii;
	struct ubt_wroot *sroot, *rt;
	uint64_t id, index, bytenr;
	uint8_t level;
	int ret;

	ret = name_add_begin_fit(&o, ns, t, subvol, dir, name, len, now, &dii);
	if (ret)
		return ret;
	if (src != BTRFS_FS_TREE_OBJECTID &&
	    (src < BTRFS_FIRST_FREE_OBJECTID || src > BTRFS_LAST_FREE_OBJECTID))
		return -EINVAL;
	const struct ubt_subvol *ssv;
	ret = ubt_fs_subvol(o.fs, src, &ssv);
	if (!ret)
		ret = ubt_wroot_get(t, src, &sroot);
	if (!ret && !sroot->has_item)
		ret = -ENOENT;
	if (!ret && (btrfs_root_flags(&sroot->item) & BTRFS_ROOT_SUBVOL_DEAD))
		ret = -ENOENT;
	if (!ret)
		ret = ubt_tree_snapshot_check(t, sroot);	/* -EAGAIN: commit first */
	if (!ret)
		ret = ubt_wroot_get(t, BTRFS_ROOT_TREE_OBJECTID, &rt);
	if (!ret)
		ret = new_tree_id(o.fs, &id);
	if (!ret)
		ret = next_index(&o, dir, &index);
	uint8_t uuid[BTRFS_UUID_SIZE];
	if (!ret)
		ret = ubt_uuid_random(uuid);
	if (!ret)
		ret = op_reserve(&o, false);
	if (ret)
		return ret;

	/* The copy first: src as it was before this operation (the kernel's
	 * snapshot does not hold its own name either). */
	ret = ubt_tree_snapshot_root(t, sroot, id, &bytenr, &level);
	if (ret)
		return op_end(&o, ret);
	/* The source's item: when it was last snapshotted. */
	btrfs_set_root_last_snapshot(&sroot->item, t->transid);
	sroot->dirty = true;
	ubt_wroot_publish(t, sroot);

	/* The snapshot's item: the source's (as it is before the new name,
	 * as the kernel copies it), as a new subvolume of its own.  An item
	 * never initialised for snapshots (inode flag ROOT_ITEM_INIT) gets
	 * its flags and byte limit cleared first, as the kernel does. */
	struct btrfs_root_item ri = sroot->item;
	struct btrfs_inode_item *rii = btrfs_root_inode(&ri);
	if (!(btrfs_inode_flags(rii) & BTRFS_INODE_ROOT_ITEM_INIT)) {
		btrfs_set_inode_flags(rii, btrfs_inode_flags(rii) | BTRFS_INODE_ROOT_ITEM_INIT);
		btrfs_set_root_flags(&ri, 0);
		btrfs_set_root_byte_limit(&ri, 0);
	}
	uint64_t flags = btrfs_root_flags(&ri);
	if (readonly)
		flags |= BTRFS_ROOT_SUBVOL_RDONLY;
	else
		flags &= ~BTRFS_ROOT_SUBVOL_RDONLY;
	btrfs_set_root_flags(&ri, flags);
	btrfs_set_root_bytenr(&ri, bytenr);
	btrfs_set_root_level(&ri, level);
	btrfs_set_root_generation(&ri, t->transid);
	btrfs_set_root_generation_v2(&ri, t->transid);
	btrfs_set_root_refs(&ri, 1);
	memcpy(btrfs_root_parent_uuid(&ri), btrfs_root_uuid(&sroot->item), BTRFS_UUID_SIZE);
	memcpy(btrfs_root_uuid(&ri), uuid, BTRFS_UUID_SIZE);
	if (!readonly) {
		memset(btrfs_root_received_uuid(&ri), 0, BTRFS_UUID_SIZE);
		memset(btrfs_root_stime(&ri), 0, sizeof(struct btrfs_timespec));
		memset(btrfs_root_rtime(&ri), 0, sizeof(struct btrfs_timespec));
		btrfs_set_root_stransid(&ri, 0);
		btrfs_set_root_rtransid(&ri, 0);
	}
	set_time(btrfs_root_otime(&ri), now);
	btrfs_set_root_otransid(&ri, t->transid);

	struct btrfs_key key = { id, BTRFS_ROOT_ITEM_KEY, t->transid };
	ret = insert_copy(t, rt, &key, &ri, sizeof(ri));
	if (ret)
		return op_end(&o, ret);
	/* The name, in the parent subvolume (src itself, perhaps: every block
	 * the snapshot shares with src is older than this transaction, and is
	 * copied as any shared block is), its ROOT_REF and ROOT_BACKREF, the
	 * uuid tree's entry. */
	ret = subvol_link(&o, rt, dir, &dii, name, len, id, index, uuid);
	if (ret)
		return ret;
	/* A read-only snapshot of a received subvolume is found by the
	 * received uuid too (btrfs receive's parent search). */
	static const uint8_t zero_uuid[BTRFS_UUID_SIZE];
	if (memcmp(btrfs_root_received_uuid(&ri), zero_uuid, BTRFS_UUID_SIZE)) {
		ret = uuid_add(t, btrfs_root_received_uuid(&ri), BTRFS_UUID_KEY_RECEIVED_SUBVOL, id);
		if (ret)
			return op_end(&o, ret);
	}
	if (id_out)
		*id_out = id;
	return 0;
}

int ubt_ns_subvol_create(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
			 const char *name, size_t len, uint32_t mode, uint32_t uid, uint32_t gid,
			 struct ubt_ns_time now, uint64_t *id_out)
{
	struct nsop o, n;
	struct btrfs_inode_item dii, ii;
	struct ubt_wroot *rt;
	uint64_t id, index, bytenr, flags;
	uint8_t uuid[BTRFS_UUID_SIZE];
	char prop[64];
	int ret;

	ret = name_add_begin_fit(&o, ns, t, subvol, dir, name, len, now, &dii);
	if (ret)
		return ret;
	/* A subvolume inherits no flags from the directory it is made in,
	 * and its properties from the parent subvolume's root directory (as
	 * the kernel does). */
	struct btrfs_inode_item noflags;
	memset(&noflags, 0, sizeof(noflags));
	ssize_t plen = inherit(&o, BTRFS_FIRST_FREE_OBJECTID, &noflags, S_IFDIR, &flags, prop);
	if (plen < 0)
		return (int)plen;
	ret = ubt_wroot_get(t, BTRFS_ROOT_TREE_OBJECTID, &rt);
	if (!ret)
		ret = new_tree_id(o.fs, &id);
	if (!ret)
		ret = next_index(&o, dir, &index);
	if (!ret)
		ret = ubt_uuid_random(uuid);
	if (!ret)
		ret = op_reserve(&o, false);
	if (ret)
		return ret;

	/* The tree: an empty leaf, and its ROOT_ITEM as the kernel makes a
	 * new subvolume's (the item's own inode: generation 1, size 3, one
	 * link, a node's bytes, a directory 0755, ROOT_ITEM_INIT). */
	ret = ubt_tree_new_root(t, id, o.root, &bytenr);
	if (ret)
		return op_end(&o, ret);
	struct btrfs_root_item ri;
	memset(&ri, 0, sizeof(ri));
	struct btrfs_inode_item *rii = btrfs_root_inode(&ri);
	btrfs_set_inode_generation(rii, 1);
	btrfs_set_inode_size(rii, 3);
	btrfs_set_inode_nlink(rii, 1);
	btrfs_set_inode_nbytes(rii, o.fs->nodesize);
	btrfs_set_inode_mode(rii, S_IFDIR | 0755);
	btrfs_set_inode_flags(rii, BTRFS_INODE_ROOT_ITEM_INIT);
	btrfs_set_root_generation(&ri, t->transid);
	btrfs_set_root_root_dirid(&ri, BTRFS_FIRST_FREE_OBJECTID);
	btrfs_set_root_bytenr(&ri, bytenr);
	btrfs_set_root_bytes_used(&ri, o.fs->nodesize);
	btrfs_set_root_refs(&ri, 1);
	btrfs_set_root_level(&ri, 0);
	btrfs_set_root_generation_v2(&ri, t->transid);
	memcpy(btrfs_root_uuid(&ri), uuid, BTRFS_UUID_SIZE);
	btrfs_set_root_ctransid(&ri, t->transid);
	btrfs_set_root_otransid(&ri, t->transid);
	set_time(btrfs_root_ctime(&ri), now);
	set_time(btrfs_root_otime(&ri), now);
	struct btrfs_key key = { id, BTRFS_ROOT_ITEM_KEY, 0 };
	ret = insert_copy(t, rt, &key, &ri, sizeof(ri));
	if (ret)
		return op_end(&o, ret);

	/* Its root directory: inode 256, named ".." in itself at index 0,
	 * owned by the caller, with the parent subvolume's properties. */
	ret = op_begin(&n, ns, t, id, now);
	if (ret)
		return op_end(&o, ret);
	n.changed = true;
	memset(&ii, 0, sizeof(ii));
	btrfs_set_inode_generation(&ii, t->transid);
	btrfs_set_inode_transid(&ii, t->transid);
	btrfs_set_inode_nlink(&ii, 1);
	btrfs_set_inode_uid(&ii, uid);
	btrfs_set_inode_gid(&ii, gid);
	btrfs_set_inode_mode(&ii, S_IFDIR | (mode & 0777));
	btrfs_set_inode_flags(&ii, flags);
	set_time(btrfs_inode_atime(&ii), now);
	set_time(btrfs_inode_ctime(&ii), now);
	set_time(btrfs_inode_mtime(&ii), now);
	set_time(btrfs_inode_otime(&ii), now);
	uint64_t root_ino = BTRFS_FIRST_FREE_OBJECTID;
	struct btrfs_key keys[2] = { { root_ino, BTRFS_INODE_ITEM_KEY, 0 },
				     { root_ino, BTRFS_INODE_REF_KEY, root_ino } };
	uint32_t sizes[2] = { sizeof(ii), (uint32_t)sizeof(struct btrfs_inode_ref) + 2 };
	uint8_t *data[2];
	ret = ubt_insert_items(t, n.root, keys, sizes, 2, data);
	if (ret)
		return op_end(&o, ret == -EEXIST ? -EUCLEAN : ret);
	memcpy(data[0], &ii, sizeof(ii));
	struct btrfs_inode_ref *ref = (void *)data[1];
	btrfs_set_inode_ref_index(ref, 0);
	btrfs_set_inode_ref_name_len(ref, 2);
	memcpy(data[1] + sizeof(*ref), "..", 2);
	ubt_icache_put(o.fs, id, root_ino, &ii, plen > 0 ? 0 : 1, 1);
	if (plen > 0) {
		ret = put_compression(&n, root_ino, prop, (size_t)plen);
		if (ret)
			return op_end(&o, ret);
	}

	/* The name in dir, ROOT_REF and ROOT_BACKREF, the uuid tree. */
	ret = subvol_link(&o, rt, dir, &dii, name, len, id, index, uuid);
	if (ret)
		return ret;
	if (id_out)
		*id_out = id;
	return 0;
}

/* Take subvolume `id` out of the uuid tree item of (uuid, type). */
static int uuid_remove(struct ubt_trans *t, const uint8_t *uuid, uint8_t type, uint64_t id)
{
	struct ubt_fs *fs = t->w->fs;
	struct ubt_wroot *ut;
	struct btrfs_key key;
	struct ubt_path path;
	static const uint8_t zero[BTRFS_UUID_SIZE];

	if (!fs->uuid_tree.bytenr || !memcmp(uuid, zero, BTRFS_UUID_SIZE))
		return 0;
	int ret = ubt_wroot_get(t, BTRFS_UUID_TREE_OBJECTID, &ut);
	if (ret)
		return ret;
	btrfs_uuid_to_key(uuid, type, &key);
	ubt_path_init(&path);
	ret = ubt_search_slot_w(t, ut, &key, &path, -1);
	if (ret == 1) {
		ubt_path_release(&fs->tree, &path);
		return 0;	/* never listed (the kernel rebuilds what is missing) */
	}
	if (ret) {
		ubt_path_release(&fs->tree, &path);
		return ret;
	}
	uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
	uint8_t *p = ubt_eb_witem_data(path.nodes[0], path.slots[0]);
	for (uint32_t off = 0; off + 8 <= size; off += 8) {
		if (ubt_get_le64(p + off) != id)
			continue;
		if (size == 8)
			return ubt_del_items(t, ut, &path, 1);	/* releases the path */
		memmove(p + off, p + off + 8, size - off - 8);
		ret = ubt_truncate_item(t, &path, size - 8, false);
		break;
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

int ubt_ns_subvol_delete(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
			 const char *name, size_t len, struct ubt_ns_time now, uint64_t *id_out)
{
	struct nsop o;
	struct btrfs_inode_item dii;
	struct ubt_wroot *rt;
	int ret;

	ret = check_name(name, len);
	if (!ret)
		ret = op_begin(&o, ns, t, subvol, now);
	if (!ret)
		ret = read_dir(&o, dir, &dii);
	if (ret)
		return ret;
	struct ubt_inode d = { .ino = dir, .sv = o.sv };
	struct btrfs_key loc;
	uint8_t ft;
	ret = ubt_dir_lookup(o.fs, &d, name, len, &loc, &ft);
	if (ret)
		return ret;
	if (loc.type != BTRFS_ROOT_ITEM_KEY)
		return -EINVAL;	/* not a subvolume's entry */
	uint64_t id = loc.objectid;
	if (id == o.fs->default_subvol) {
		ubt_log(UBT_LOG_ERROR, "subvolume %llu is the default subvolume; not deleted",
			(unsigned long long)id);
		return -EPERM;
	}
	ret = ubt_wroot_get(t, BTRFS_ROOT_TREE_OBJECTID, &rt);
	if (ret)
		return ret;
	/* Its ROOT_REF here (the index of the name), and no subvolume of its
	 * own below it. */
	struct btrfs_key rk = { subvol, BTRFS_ROOT_REF_KEY, id };
	struct ubt_path path;
	uint64_t index = 0;
	ubt_path_init(&path);
	ret = ubt_search_slot(&o.fs->tree, &o.fs->root_tree, &rk, &path);
	if (ret == 0) {
		const struct btrfs_root_ref *rr = (const void *)ubt_eb_item_data(path.nodes[0],
										   path.slots[0]);
		if (ubt_eb_item_size(path.nodes[0], path.slots[0]) < sizeof(*rr) + len ||
		    btrfs_root_ref_dirid(rr) != dir || btrfs_root_ref_name_len(rr) != len ||
		    memcmp((const uint8_t *)rr + sizeof(*rr), name, len))
			ret = -EINVAL;	/* a placeholder: the subvolume is named elsewhere */
		else
			index = btrfs_root_ref_sequence(rr);
	} else if (ret == 1) {
		ret = -EINVAL;	/* a snapshot's placeholder of a nested subvolume */
	}
	ubt_path_release(&o.fs->tree, &path);
	if (ret)
		return ret;
	struct btrfs_key nmin = { id, BTRFS_ROOT_REF_KEY, 0 }, nmax = { id, BTRFS_ROOT_REF_KEY, (uint64_t)-1 };
	struct ubt_iter it;
	ubt_iter_start(&it, &o.fs->tree, &o.fs->root_tree, &nmin, &nmax);
	ret = ubt_iter_next(&it);
	ubt_iter_end(&it);
	if (ret == 0)
		return -ENOTEMPTY;
	if (ret < 0)
		return ret;
	/* Its ROOT_ITEM (the key's offset: 0, or a snapshot's transid). */
	struct btrfs_key ik = { id, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct btrfs_root_item ri;
	ubt_path_init(&path);
	ret = ubt_search_le(&o.fs->tree, &o.fs->root_tree, &ik, &path);
	if (ret == 0) {
		ubt_eb_item_key(path.nodes[0], path.slots[0], &ik);
		if (ik.objectid != id || ik.type != BTRFS_ROOT_ITEM_KEY ||
		    ubt_eb_item_size(path.nodes[0], path.slots[0]) < sizeof(ri))
			ret = UBT_CORRUPT(path.nodes[0]->start, "no root item for subvolume %llu",
					  (unsigned long long)id);
		else
			memcpy(&ri, ubt_eb_item_data(path.nodes[0], path.slots[0]), sizeof(ri));
	} else if (ret == 1) {
		ret = UBT_CORRUPT(0, "no root item for subvolume %llu", (unsigned long long)id);
	}
	ubt_path_release(&o.fs->tree, &path);
	if (!ret && (btrfs_root_flags(&ri) & BTRFS_ROOT_SUBVOL_DEAD))
		ret = -ENOENT;
	struct btrfs_key bk = { id, BTRFS_ROOT_BACKREF_KEY, subvol };
	if (!ret) {
		ubt_path_init(&path);
		ret = ubt_search_slot(&o.fs->tree, &o.fs->root_tree, &bk, &path);
		ubt_path_release(&o.fs->tree, &path);
		if (ret == 1)
			ret = UBT_CORRUPT(0, "subvolume %llu has a ROOT_REF but no ROOT_BACKREF",
					  (unsigned long long)id);
	}
	if (!ret)
		ret = op_reserve(&o, true);
	if (ret)
		return ret;

	/* The name, from dir; ROOT_REF and ROOT_BACKREF. */
	ret = dirent_remove(&o, dir, name, len, index);
	if (!ret) {
		dir_resize(&dii, len, false);
		touch(&o, &dii, 1, true);
		ret = write_inode(&o, dir, &dii);
	}
	if (!ret)
		ret = ubt_delete_key(t, rt, &rk);
	if (!ret)
		ret = ubt_delete_key(t, rt, &bk);
	/* Dead, with no references, and an ORPHAN_ITEM of the root tree: the
	 * kernel drops the tree at its next read-write mount, as after its
	 * own `btrfs subvolume delete`.  The item changes in place (its
	 * generation stays the root block's). */
	if (!ret) {
		btrfs_set_root_flags(&ri, btrfs_root_flags(&ri) | BTRFS_ROOT_SUBVOL_DEAD);
		btrfs_set_root_refs(&ri, 0);
		memset(btrfs_root_drop_progress(&ri), 0, sizeof(struct btrfs_disk_key));
		btrfs_set_root_drop_level(&ri, 0);
		ubt_path_init(&path);
		ret = ubt_search_slot_w(t, rt, &ik, &path, 0);
		if (ret == 1)
			ret = UBT_CORRUPT(0, "root item of subvolume %llu vanished",
					  (unsigned long long)id);
		if (!ret)
			memcpy(ubt_eb_witem_data(path.nodes[0], path.slots[0]), &ri, sizeof(ri));
		ubt_path_release(&o.fs->tree, &path);
	}
	for (size_t i = 0; !ret && i < t->w->nroots; i++) {
		struct ubt_wroot *r = t->w->roots[i];
		if (r->objectid == id) {
			btrfs_set_root_flags(&r->item, btrfs_root_flags(&ri));
			btrfs_set_root_refs(&r->item, 0);
		}
	}
	/* The read side's copy too: on this handle ubt_fs_subvol no longer
	 * finds it (an abort restores the saved item). */
	if (!ret) {
		pthread_mutex_lock(&o.fs->subvol_lock);
		for (size_t i = 0; i < o.fs->nsubvols; i++) {
			if (o.fs->subvols[i]->id == id) {
				btrfs_set_root_flags(&o.fs->subvols[i]->item, btrfs_root_flags(&ri));
				btrfs_set_root_refs(&o.fs->subvols[i]->item, 0);
			}
		}
		pthread_mutex_unlock(&o.fs->subvol_lock);
	}
	if (!ret) {
		uint8_t *p;
		struct btrfs_key ok = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, id };
		ret = ubt_insert_item(t, rt, &ok, 0, &p);
		if (ret == -EEXIST)
			ret = 0;
	}
	if (!ret)
		ret = uuid_remove(t, btrfs_root_uuid(&ri), BTRFS_UUID_KEY_SUBVOL, id);
	if (!ret)
		ret = uuid_remove(t, btrfs_root_received_uuid(&ri), BTRFS_UUID_KEY_RECEIVED_SUBVOL, id);
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	if (id_out)
		*id_out = id;
	return 0;
}

/* ---- link, unlink, rmdir -------------------------------------------------- */

int ubt_ns_link(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		uint64_t dir, const char *name, size_t len, struct ubt_ns_time now)
{
	struct nsop o;
	struct btrfs_inode_item dii, ii;
	uint64_t index, dummy;
	int ret;

	ret = check_name(name, len);
	if (ret)
		return ret;
	ret = op_begin(&o, ns, t, subvol, now);
	if (!ret)
		ret = read_inode(&o, ino, &ii);
	if (!ret)
		ret = read_dir(&o, dir, &dii);
	if (ret)
		return ret;
	ret = lookup(&o, dir, name, len, &dummy, NULL);
	if (ret == 0 || ret == -EXDEV)
		return -EEXIST;
	if (ret != -ENOENT)
		return ret;
	if (S_ISDIR(btrfs_inode_mode(&ii)))
		return -EPERM;
	if (btrfs_inode_nlink(&ii) == 0)
		return -ENOENT;
	if (btrfs_inode_nlink(&ii) >= BTRFS_LINK_MAX)
		return -EMLINK;
	/* The kernel takes the index before it finds the reference full. */
	ret = next_index(&o, dir, &index);
	if (!ret)
		ret = ref_room(&o, ino, dir, name, len, 0);
	if (ret == -EMLINK) {
		/* ... and by then it has stamped the inode's ctime and change
		 * counter, which it writes although the link fails. */
		ret = op_reserve(&o, false);
		if (ret)
			return ret;
		touch(&o, &ii, 1, false);
		ret = write_inode(&o, ino, &ii);
		if (ret)
			return op_end(&o, ret);
		touch_root(&o);
		return -EMLINK;
	}
	if (!ret)
		ret = dirent_room(&o, dir, name, len, 0);
	if (!ret)
		ret = op_reserve(&o, false);
	if (ret)
		return ret;
	ret = ref_add(&o, ino, dir, name, len, index);
	if (!ret)
		ret = dirent_add(&o, dir, name, len, ino, mode_to_ft(btrfs_inode_mode(&ii)), index);
	if (!ret) {
		btrfs_set_inode_nlink(&ii, btrfs_inode_nlink(&ii) + 1);
		touch(&o, &ii, 1, false);
		ret = write_inode(&o, ino, &ii);
	}
	if (!ret) {
		dir_resize(&dii, len, true);
		touch(&o, &dii, 1, true);
		ret = write_inode(&o, dir, &dii);
	}
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 0;
}

/* ---- orphans ------------------------------------------------------------------ */

static int orphan_add(struct nsop *o, uint64_t ino)
{
	struct btrfs_key key = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, ino };
	uint8_t *p;
	int ret = ubt_insert_item(o->t, o->root, &key, 0, &p);

	return ret == -EEXIST ? 0 : ret;
}

int ubt_ns_orphan_add(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino)
{
	struct btrfs_inode_item ii;
	struct nsop o;
	int ret = op_begin(&o, ns, t, subvol, (struct ubt_ns_time){ 0, 0 });

	if (!ret)
		ret = read_inode(&o, ino, &ii);
	if (ret == -ENOENT)
		return 0;	/* deleted since */
	if (ret || btrfs_inode_nlink(&ii) != 0)
		return ret;
	o.keep_root_time = true;
	ret = op_reserve(&o, true);
	if (!ret)
		ret = orphan_add(&o, ino);
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 1;
}

int ubt_ns_orphan_delete(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
			 bool item)
{
	struct btrfs_key key = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, ino };
	struct btrfs_inode_item ii;
	struct nsop o;
	bool gone = false;
	int ret = op_begin(&o, ns, t, subvol, (struct ubt_ns_time){ 0, 0 });

	if (ret)
		return ret;
	o.keep_root_time = true;
	ret = read_inode(&o, ino, &ii);
	if (ret == -ENOENT)
		gone = true;
	else if (ret)
		return ret;
	if (!item && (gone || btrfs_inode_nlink(&ii) != 0))
		return 0;	/* nothing to do */
	if (!gone && btrfs_inode_nlink(&ii) == 0) {
		ret = data_deletable(&o, ino, &ii);
		if (ret)
			return ret;
	}
	ret = op_reserve(&o, true);
	if (ret)
		return ret;
	if (!gone && btrfs_inode_nlink(&ii) == 0)
		ret = delete_inode(&o, ino, &ii);
	if (!ret && item) {
		ret = ubt_delete_key(o.t, o.root, &key);
		if (ret == -ENOENT)
			ret = 0;
	}
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 0;
}

int ubt_ns_orphans(struct ubt_fs *fs, uint64_t subvol, int (*fn)(void *ctx, uint64_t ino),
		   void *ctx)
{
	struct btrfs_key min = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, (uint64_t)-1 };
	const struct ubt_subvol *sv;
	struct ubt_iter it;
	uint64_t *v = NULL;
	size_t n = 0, cap = 0;
	int ret = ubt_fs_subvol(fs, subvol, &sv);

	if (ret)
		return ret;
	ubt_iter_start(&it, &fs->tree, &sv->root, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			uint64_t *nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n++] = it.key.offset;
	}
	ubt_iter_end(&it);
	if (ret > 0)
		ret = 0;
	for (size_t i = 0; i < n && !ret; i++)
		ret = fn(ctx, v[i]);
	free(v);
	return ret;
}

/*
 * Remove the name (dir, name) of inode ino: dir item entry, dir index,
 * reference; the inode loses a link (seq_inode more on its counter) and
 * goes with its last one.  The caller has checked everything and writes
 * the directory.
 */
static int remove_name(struct nsop *o, uint64_t dir, const char *name, size_t len, uint64_t ino,
		       struct btrfs_inode_item *ii, const struct ref_loc *r, unsigned seq_inode)
{
	int ret = dirent_remove(o, dir, name, len, r->index);

	if (!ret)
		ret = ref_remove(o, ino, dir, name, len, r);
	if (ret)
		return ret;
	uint32_t nlink = btrfs_inode_nlink(ii);
	bool last = S_ISDIR(btrfs_inode_mode(ii)) || nlink <= 1;
	int mode = last ? keep_mode(o, ino) : UBT_NS_DELETE;
	if (last && mode == UBT_NS_DELETE)
		return delete_inode(o, ino, ii);
	if (last) {
		/* Still open: an orphan until its last user goes. */
		btrfs_set_inode_nlink(ii, 0);
		touch(o, ii, seq_inode, false);
		ret = write_inode(o, ino, ii);
		if (!ret && mode == UBT_NS_KEEP)
			ret = orphan_add(o, ino);
		return ret;
	}
	btrfs_set_inode_nlink(ii, nlink - 1);
	touch(o, ii, seq_inode, false);
	return write_inode(o, ino, ii);
}

/*
 * The usual removal of a name that is an inode's last, in one search: the
 * INODE_REF right after the INODE_ITEM in the same leaf holds this name
 * only.  The inode item becomes *ii (the caller's nlink 0) and the
 * reference goes; *index is the name's.  1: not that layout (nothing
 * changed: the general way takes over), 0 done, <0 error.
 */
static int last_ref_drop(struct nsop *o, uint64_t ino, uint64_t dir, const char *name, size_t len,
			 const struct btrfs_inode_item *ii, uint64_t *index)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 }, k;
	struct ubt_path path;
	struct entry e;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot_w(o->t, o->root, &key, &path, -1);
	if (ret == 1)
		ret = UBT_CORRUPT(0, "inode %llu vanished", (unsigned long long)ino);
	if (ret)
		goto out;
	struct ubt_eb *leaf = path.nodes[0];
	int slot = path.slots[0];
	if (ubt_eb_item_size(leaf, slot) < sizeof(*ii)) {
		ret = UBT_CORRUPT(leaf->start, "inode %llu item too small", (unsigned long long)ino);
		goto out;
	}
	ret = 1;
	if (slot + 1 >= (int)ubt_eb_nritems(leaf))
		goto out;
	ubt_eb_item_key(leaf, slot + 1, &k);
	if (k.objectid != ino || k.type != BTRFS_INODE_REF_KEY || k.offset != dir)
		goto out;
	uint32_t size = ubt_eb_item_size(leaf, slot + 1);
	ret = entry_find(E_REF, ubt_eb_item_data(leaf, slot + 1), size, 0, name, len, &e, leaf->start);
	if (ret < 0)
		goto out;
	if (ret == 0 || e.size != size) {
		ret = 1;
		goto out;
	}
	*index = e.index;
	memcpy(ubt_eb_witem_data(leaf, slot), ii, sizeof(*ii));
	ubt_icache_put(o->fs, o->subvol, ino, ii, -1, -1);
	path.slots[0] = slot + 1;
	return ubt_del_items(o->t, o->root, &path, 1);	/* releases the path */
out:
	ubt_path_release(&o->fs->tree, &path);
	return ret;
}

/* Can the inode be deleted by dropping its last link here? */
static int check_deletable(struct nsop *o, uint64_t ino, const struct btrfs_inode_item *ii)
{
	if (kept(o, ino) || (!S_ISDIR(btrfs_inode_mode(ii)) && btrfs_inode_nlink(ii) > 1))
		return 0;
	return data_deletable(o, ino, ii);
}

/* `known`: the inode the name leads to, as the caller looked it up in this
 * operation (0: look it up here). */
static int unlink_common(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
			 const char *name, size_t len, struct ubt_ns_time now, bool rmdir,
			 uint64_t known)
{
	struct nsop o;
	struct btrfs_inode_item dii, ii;
	struct ref_loc r;
	uint64_t ino = known;
	int ret;

	if (len == 0)
		return -ENOENT;
	if (len > BTRFS_NAME_LEN)
		return -ENAMETOOLONG;
	ret = op_begin(&o, ns, t, subvol, now);
	if (!ret)
		ret = read_dir(&o, dir, &dii);
	if (ret)
		return ret;
	ret = known ? 0 : lookup(&o, dir, name, len, &ino, NULL);
	if (ret == -EXDEV)
		return rmdir ? -EOPNOTSUPP : -EISDIR;
	if (!ret)
		ret = read_inode(&o, ino, &ii);
	if (ret)
		return ret;
	if (rmdir) {
		if (!S_ISDIR(btrfs_inode_mode(&ii)))
			return -ENOTDIR;
		if (btrfs_inode_size(&ii) != 0)
			return -ENOTEMPTY;
	} else if (S_ISDIR(btrfs_inode_mode(&ii))) {
		return -EISDIR;
	}
	ret = check_deletable(&o, ino, &ii);
	if (!ret)
		ret = op_reserve(&o, true);
	if (ret)
		return ret;
	/* The last name of an inode the caller still uses (an unlinked file
	 * open or known to the kernel): kept as remove_name keeps it, in
	 * fewer searches.  The rest, and other layouts, go remove_name's way. */
	ret = 1;
	if ((S_ISDIR(btrfs_inode_mode(&ii)) || btrfs_inode_nlink(&ii) <= 1) && kept(&o, ino)) {
		struct btrfs_inode_item gone = ii;
		uint64_t index = 0;
		btrfs_set_inode_nlink(&gone, 0);
		touch(&o, &gone, 1, false);
		ret = last_ref_drop(&o, ino, dir, name, len, &gone, &index);
		if (ret == 0) {
			int mode = keep_mode(&o, ino);
			if (mode == UBT_NS_DELETE)
				ret = delete_inode(&o, ino, &gone);
			else if (mode == UBT_NS_KEEP)
				ret = orphan_add(&o, ino);
			if (!ret)
				ret = dirent_remove(&o, dir, name, len, index);
		}
	}
	if (ret == 1) {
		/* Nothing has changed yet (last_ref_drop looked or was not
		 * tried): a reference that cannot be found or read fails this
		 * unlink alone, as it did before the reserve. */
		bool changed = o.changed;
		o.changed = false;
		ret = ref_find(&o, ino, dir, name, len, &r);
		o.changed = changed;
		if (ret)
			return ret;
		ret = remove_name(&o, dir, name, len, ino, &ii, &r, 1);
	}
	if (!ret) {
		dir_resize(&dii, len, false);
		touch(&o, &dii, 1, true);
		ret = write_inode(&o, dir, &dii);
	}
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 0;
}

int ubt_ns_unlink(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		  const char *name, size_t len, struct ubt_ns_time now)
{
	return unlink_common(ns, t, subvol, dir, name, len, now, false, 0);
}

int ubt_ns_unlink_ino(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		      const char *name, size_t len, uint64_t ino, struct ubt_ns_time now)
{
	return unlink_common(ns, t, subvol, dir, name, len, now, false, ino);
}

int ubt_ns_rmdir(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir,
		 const char *name, size_t len, struct ubt_ns_time now)
{
	return unlink_common(ns, t, subvol, dir, name, len, now, true, 0);
}

/* ---- rename ---------------------------------------------------------------- */

/* The parent of directory d (its one INODE_REF). */
static int dir_parent(struct nsop *o, uint64_t d, uint64_t *parent)
{
	struct btrfs_key min = { d, BTRFS_INODE_REF_KEY, 0 };
	struct btrfs_key max = { d, BTRFS_INODE_EXTREF_KEY, (uint64_t)-1 };
	struct ubt_iter it;
	int ret;

	ubt_iter_start(&it, &o->fs->tree, &o->sv->root, &min, &max);
	ret = ubt_iter_next(&it);
	if (ret == 0) {
		if (it.key.type == BTRFS_INODE_REF_KEY)
			*parent = it.key.offset;
		else if (it.size >= sizeof(struct btrfs_inode_extref))
			*parent = btrfs_inode_extref_parent_objectid((const void *)it.data);
		else
			ret = UBT_CORRUPT(it.leaf->start, "extref too small");
	} else if (ret == 1) {
		ret = UBT_CORRUPT(0, "directory %llu has no parent", (unsigned long long)d);
	}
	ubt_iter_end(&it);
	return ret;
}

/* Is directory anc an ancestor of directory d, or d itself?  1 yes, 0 no. */
static int is_ancestor(struct nsop *o, uint64_t anc, uint64_t d)
{
	uint64_t top = btrfs_root_root_dirid(&o->sv->item);

	for (unsigned steps = 0; steps < 1u << 20; steps++) {
		if (d == anc)
			return 1;
		if (d == top)
			return 0;
		uint64_t p;
		int ret = dir_parent(o, d, &p);
		if (ret)
			return ret;
		if (p == d)
			return 0;
		d = p;
	}
	return UBT_CORRUPT(0, "directory %llu: parent chain loops", (unsigned long long)d);
}

int ubt_ns_rename(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t olddir,
		  const char *oldname, size_t oldlen, uint64_t newdir, const char *newname,
		  size_t newlen, struct ubt_ns_time now)
{
	struct nsop o;
	struct btrfs_inode_item odi, ndi, sii, tii;
	struct ref_loc sref, tref;
	uint64_t src, tgt = 0, index;
	bool same = olddir == newdir, has_tgt;
	int ret;

	if (oldlen == 0)
		return -ENOENT;
	if (oldlen > BTRFS_NAME_LEN)
		return -ENAMETOOLONG;
	ret = op_begin(&o, ns, t, subvol, now);
	if (!ret)
		ret = read_dir(&o, olddir, &odi);
	if (!ret)
		ret = read_dir(&o, newdir, &ndi);
	if (ret)
		return ret;
	if (same)
		ndi = odi;
	ret = lookup(&o, olddir, oldname, oldlen, &src, NULL);
	if (ret == -EXDEV)
		return -EOPNOTSUPP;
	if (ret)
		return ret;
	ret = check_name(newname, newlen);
	if (ret)
		return ret;
	ret = lookup(&o, newdir, newname, newlen, &tgt, NULL);
	if (ret == -EXDEV)
		return -EOPNOTSUPP;
	if (ret && ret != -ENOENT)
		return ret;
	has_tgt = ret == 0;
	ret = read_inode(&o, src, &sii);
	if (!ret && has_tgt)
		ret = read_inode(&o, tgt, &tii);
	if (ret)
		return ret;
	bool sdir = S_ISDIR(btrfs_inode_mode(&sii));
	bool tdir = has_tgt && S_ISDIR(btrfs_inode_mode(&tii));
	/* The VFS: a directory may not move below itself (EINVAL); the target
	 * may not be an ancestor of the source (ENOTEMPTY). */
	if (!same) {
		if (sdir) {
			ret = is_ancestor(&o, src, newdir);
			if (ret)
				return ret < 0 ? ret : -EINVAL;
		}
		if (tdir) {
			ret = is_ancestor(&o, tgt, olddir);
			if (ret)
				return ret < 0 ? ret : -ENOTEMPTY;
		}
	}
	if (has_tgt && tgt == src)
		return 0;
	if (has_tgt) {
		if (sdir && !tdir)
			return -ENOTDIR;
		if (!sdir && tdir)
			return -EISDIR;
		if (tdir && btrfs_inode_size(&tii) != 0)
			return -ENOTEMPTY;
		ret = check_deletable(&o, tgt, &tii);
		if (!ret)
			ret = ref_find(&o, tgt, newdir, newname, newlen, &tref);
		if (ret)
			return ret;
	}
	ret = ref_find(&o, src, olddir, oldname, oldlen, &sref);
	if (ret)
		return ret;
	ret = next_index(&o, newdir, &index);
	if (!ret) {
		uint32_t freed = (same && !sref.ext) ? sref.size : 0;
		ret = ref_room(&o, src, newdir, newname, newlen, freed);
	}
	if (!ret) {
		uint32_t freed = 0;
		if (has_tgt)
			freed = (uint32_t)(sizeof(struct btrfs_dir_item) + newlen);
		if (same && ubt_name_hash(oldname, oldlen) == ubt_name_hash(newname, newlen))
			freed += (uint32_t)(sizeof(struct btrfs_dir_item) + oldlen);
		ret = dirent_room(&o, newdir, newname, newlen, freed);
	}
	if (!ret)
		ret = op_reserve(&o, false);
	if (ret)
		return ret;

	/* Source out of the old directory, target out of the new one. */
	ret = dirent_remove(&o, olddir, oldname, oldlen, sref.index);
	if (!ret)
		ret = ref_remove(&o, src, olddir, oldname, oldlen, &sref);
	if (!ret && has_tgt)
		ret = remove_name(&o, newdir, newname, newlen, tgt, &tii, &tref, 2);
	if (!ret)
		ret = ref_add(&o, src, newdir, newname, newlen, index);
	if (!ret)
		ret = dirent_add(&o, newdir, newname, newlen, src,
				 mode_to_ft(btrfs_inode_mode(&sii)), index);
	if (!ret) {
		touch(&o, &sii, 2, false);
		ret = write_inode(&o, src, &sii);
	}
	if (!ret) {
		if (same) {
			dir_resize(&odi, oldlen, false);
			if (has_tgt)
				dir_resize(&odi, newlen, false);
			dir_resize(&odi, newlen, true);
			touch(&o, &odi, has_tgt ? 5 : 4, true);
			ret = write_inode(&o, olddir, &odi);
		} else {
			dir_resize(&odi, oldlen, false);
			touch(&o, &odi, 2, true);
			ret = write_inode(&o, olddir, &odi);
			if (!ret) {
				if (has_tgt)
					dir_resize(&ndi, newlen, false);
				dir_resize(&ndi, newlen, true);
				touch(&o, &ndi, has_tgt ? 3 : 2, true);
				ret = write_inode(&o, newdir, &ndi);
			}
		}
	}
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 0;
}

/*
 * renameat2(RENAME_EXCHANGE): the two names trade inodes.  As the kernel
 * does, each inode gets a fresh index in its new directory (the first
 * directory's counter first), both inodes' ctime and both directories'
 * mtime/ctime change; sizes stay (each directory keeps its name).
 */
int ubt_ns_exchange(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t dir1,
		    const char *name1, size_t len1, uint64_t dir2, const char *name2, size_t len2,
		    struct ubt_ns_time now)
{
	struct nsop o;
	struct btrfs_inode_item d1i, d2i, ai, bi;
	struct ref_loc aref, bref;
	uint64_t a, b, aidx, bidx;
	bool same = dir1 == dir2;
	int ret;

	if (len1 == 0 || len2 == 0)
		return -ENOENT;
	if (len1 > BTRFS_NAME_LEN || len2 > BTRFS_NAME_LEN)
		return -ENAMETOOLONG;
	ret = op_begin(&o, ns, t, subvol, now);
	if (!ret)
		ret = read_dir(&o, dir1, &d1i);
	if (!ret)
		ret = read_dir(&o, dir2, &d2i);
	if (ret)
		return ret;
	ret = lookup(&o, dir1, name1, len1, &a, NULL);
	if (!ret)
		ret = lookup(&o, dir2, name2, len2, &b, NULL);
	if (ret == -EXDEV)
		return -EOPNOTSUPP;
	if (ret)
		return ret;
	ret = read_inode(&o, a, &ai);
	if (!ret)
		ret = read_inode(&o, b, &bi);
	if (ret)
		return ret;
	if (a == b)
		return 0;
	/* The VFS: neither may end up below itself (both EINVAL here). */
	if (!same) {
		if (S_ISDIR(btrfs_inode_mode(&ai))) {
			ret = is_ancestor(&o, a, dir2);
			if (ret)
				return ret < 0 ? ret : -EINVAL;
		}
		if (S_ISDIR(btrfs_inode_mode(&bi))) {
			ret = is_ancestor(&o, b, dir1);
			if (ret)
				return ret < 0 ? ret : -EINVAL;
		}
	}
	ret = ref_find(&o, a, dir1, name1, len1, &aref);
	if (!ret)
		ret = ref_find(&o, b, dir2, name2, len2, &bref);
	if (!ret)
		ret = next_index(&o, dir2, &aidx);
	if (!ret)
		ret = next_index(&o, dir1, &bidx);
	if (!ret)
		ret = ref_room(&o, a, dir2, name2, len2, same && !aref.ext ? aref.size : 0);
	if (!ret)
		ret = ref_room(&o, b, dir1, name1, len1, same && !bref.ext ? bref.size : 0);
	if (!ret)
		ret = op_reserve(&o, false);
	if (ret)
		return ret;

	ret = dirent_remove(&o, dir1, name1, len1, aref.index);
	if (!ret)
		ret = dirent_remove(&o, dir2, name2, len2, bref.index);
	if (!ret)
		ret = ref_remove(&o, a, dir1, name1, len1, &aref);
	if (!ret)
		ret = ref_remove(&o, b, dir2, name2, len2, &bref);
	if (!ret)
		ret = ref_add(&o, a, dir2, name2, len2, aidx);
	if (!ret)
		ret = dirent_add(&o, dir2, name2, len2, a, mode_to_ft(btrfs_inode_mode(&ai)), aidx);
	if (!ret)
		ret = ref_add(&o, b, dir1, name1, len1, bidx);
	if (!ret)
		ret = dirent_add(&o, dir1, name1, len1, b, mode_to_ft(btrfs_inode_mode(&bi)), bidx);
	if (!ret) {
		touch(&o, &ai, 2, false);
		ret = write_inode(&o, a, &ai);
	}
	if (!ret) {
		touch(&o, &bi, 2, false);
		ret = write_inode(&o, b, &bi);
	}
	if (!ret) {
		touch(&o, &d1i, same ? 4 : 2, true);
		ret = write_inode(&o, dir1, &d1i);
	}
	if (!ret && !same) {
		touch(&o, &d2i, 2, true);
		ret = write_inode(&o, dir2, &d2i);
	}
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 0;
}

/* ---- attributes and xattrs ------------------------------------------------- */

int ubt_ns_setattr(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		   const struct ubt_ns_attr *a)
{
	struct nsop o;
	struct btrfs_inode_item ii;
	int ret;

	ret = op_begin(&o, ns, t, subvol, a->ctime);
	o.keep_root_time = !(a->valid & UBT_NS_SET_CTIME);
	if (!ret)
		ret = read_inode(&o, ino, &ii);
	if (!ret)
		ret = op_reserve(&o, false);
	if (ret)
		return ret;
	if (a->valid & UBT_NS_SET_MODE)
		btrfs_set_inode_mode(&ii, (btrfs_inode_mode(&ii) & S_IFMT) | (a->mode & 07777));
	if (a->valid & UBT_NS_SET_UID)
		btrfs_set_inode_uid(&ii, a->uid);
	if (a->valid & UBT_NS_SET_GID)
		btrfs_set_inode_gid(&ii, a->gid);
	if (a->valid & UBT_NS_SET_ATIME)
		set_time(btrfs_inode_atime(&ii), a->atime);
	if (a->valid & UBT_NS_SET_MTIME)
		set_time(btrfs_inode_mtime(&ii), a->mtime);
	if (a->valid & UBT_NS_SET_CTIME)
		set_time(btrfs_inode_ctime(&ii), a->ctime);
	btrfs_set_inode_transid(&ii, t->transid);
	btrfs_set_inode_sequence(&ii, btrfs_inode_sequence(&ii) + 1);
	ret = write_inode(&o, ino, &ii);
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 0;
}

/* Find an xattr: 1 with its item size and entry, 0 absent. */
static int xattr_probe(struct nsop *o, uint64_t ino, const char *name, size_t len,
		       uint32_t *isz, struct entry *e)
{
	struct btrfs_key key = { ino, BTRFS_XATTR_ITEM_KEY, ubt_name_hash(name, len) };
	return probe(o, &key, E_DIR, 0, name, len, isz, e);
}

static int xattr_common(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
			const char *name, const void *value, size_t size, int flags, bool remove,
			struct ubt_ns_time now)
{
	struct nsop o;
	struct btrfs_inode_item ii;
	struct entry e;
	uint32_t isz;
	size_t len = strlen(name);
	int ret;

	if (len == 0 || len > XATTR_NAME_MAX_LEN)
		return -ERANGE;
	if (!remove && size > XATTR_VALUE_MAX)
		return -E2BIG;
	if (flags & ~(UBT_NS_XATTR_CREATE | UBT_NS_XATTR_REPLACE))
		return -EINVAL;
	ret = op_begin(&o, ns, t, subvol, now);
	if (!ret)
		ret = read_inode(&o, ino, &ii);
	if (ret)
		return ret;
	if (len >= 6 && !memcmp(name, "btrfs.", 6))
		return -EOPNOTSUPP;
	if (!remove && len + size > ubt_ns_max_xattr(o.fs))
		return -ENOSPC;
	ret = xattr_probe(&o, ino, name, len, &isz, &e);
	if (ret < 0)
		return ret;
	bool exists = ret == 1;
	if (remove || (flags & UBT_NS_XATTR_REPLACE)) {
		if (!exists)
			return -ENODATA;
	}
	if (!remove && (flags & UBT_NS_XATTR_CREATE) && exists)
		return -EEXIST;
	/* Collisions: the entry must fit in the shared item. */
	uint32_t esz = (uint32_t)(sizeof(struct btrfs_dir_item) + len + size);
	if (!remove && isz - (exists ? e.size : 0) + esz > max_item_size(o.fs))
		return -ENOSPC;
	ret = op_reserve(&o, remove);
	if (ret)
		return ret;

	ubt_icache_forget_facts(o.fs, subvol, ino, true, false);
	struct btrfs_key key = { ino, BTRFS_XATTR_ITEM_KEY, ubt_name_hash(name, len) };
	if (remove) {
		ret = item_remove(&o, &key, E_DIR, 0, name, len);
	} else if (exists && e.size == isz) {
		/* The item's only entry: resized and rewritten in place. */
		struct ubt_path path;
		ubt_path_init(&path);
		if (esz > isz)
			ret = ubt_search_slot_grow(t, o.root, &key, &path, esz - isz);
		else
			ret = ubt_search_slot_w(t, o.root, &key, &path, 0);
		if (ret == 1)
			ret = UBT_CORRUPT(0, "xattr item of inode %llu vanished",
					  (unsigned long long)ino);
		if (!ret && esz > isz)
			ret = ubt_extend_item(t, &path, esz - isz);
		else if (!ret && esz < isz)
			ret = ubt_truncate_item(t, &path, esz, false);
		if (!ret) {
			struct btrfs_key zero = { 0, 0, 0 };
			build_dirent(ubt_eb_witem_data(path.nodes[0], path.slots[0]), &zero,
				     t->transid, BTRFS_FT_XATTR, name, len, value, size);
		}
		ubt_path_release(&o.fs->tree, &path);
	} else {
		/* New, or sharing its item with other names: (out and) in at the end. */
		uint8_t *buf = malloc(esz);
		if (!buf)
			return op_end(&o, -ENOMEM);
		struct btrfs_key zero = { 0, 0, 0 };
		build_dirent(buf, &zero, t->transid, BTRFS_FT_XATTR, name, len, value, size);
		if (exists)
			ret = item_remove(&o, &key, E_DIR, 0, name, len);
		if (!ret)
			ret = item_append(&o, &key, buf, esz);
		free(buf);
	}
	if (!ret) {
		touch(&o, &ii, 1, false);
		ret = write_inode(&o, ino, &ii);
	}
	if (ret)
		return op_end(&o, ret);
	touch_root(&o);
	return 0;
}

int ubt_ns_setxattr(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		    const char *name, const void *value, size_t size, int flags,
		    struct ubt_ns_time now)
{
	return xattr_common(ns, t, subvol, ino, name, value, size, flags, false, now);
}

int ubt_ns_removexattr(struct ubt_ns *ns, struct ubt_trans *t, uint64_t subvol, uint64_t ino,
		       const char *name, struct ubt_ns_time now)
{
	return xattr_common(ns, t, subvol, ino, name, NULL, 0, 0, true, now);
}
