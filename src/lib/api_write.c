/*
 * The public API, part 5: writing through a handle opened read-write
 * (EXPERIMENTAL).  Translation over the copy-on-write engine (trans/): a
 * transaction started by the first change and ended by ubtrfs_commit, the
 * handle lock held exclusively for every change, and the few VFS-side steps
 * the engine leaves to its caller (an inode's data goes before its last
 * name; the current time).
 */
#include <ubtrfs/ubtrfs.h>

#include "api_internal.h"
#include "base/base.h"
#include "fs/fs.h"
#include "trans/file_w.h"
#include "trans/inode_w.h"
#include "trans/trans.h"

#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/*
 * When a transaction commits by itself (besides fsync, the caller's timer
 * and close): its dirty blocks stay in memory until the commit, and the
 * space reserved for the commit grows with them, so it commits when its
 * dirty blocks reach a quarter of the block cache (at least
 * AUTO_COMMIT_MIN_DIRTY), when what its commit would need passes half the
 * free metadata space, or after AUTO_COMMIT_OPS operations.  Few large
 * commits write far less than many small ones: every commit rewrites the
 * paths to everything it changed, the extent, free-space and root trees'
 * included.
 */
#define AUTO_COMMIT_OPS 100000
#define AUTO_COMMIT_MIN_DIRTY (8ull << 20)

/* op_end_retry: the operation met ENOSPC, a commit made room, try again. */
#define OP_RETRY (-0x7ffe)	/* no errno */

/* One operation: the handle locked exclusively, a transaction running. */
struct op {
	ubtrfs_fs *f;
	struct ubt_trans *t;
	struct ubt_ns_time now;
	struct btrfs_timespec bnow;
};

static int op_begin(ubtrfs_fs *f, struct op *op);
static int op_end(struct op *op, int ret);
static int op_end_retry(struct op *op, int ret, int *pass);
static int truncate_steps(struct op *op, uint64_t subvol, uint64_t ino, uint64_t size,
			  const struct btrfs_timespec *now);

/* ---- held-back appends -------------------------------------------------- */

/*
 * tar writes each file in the pieces its 10 KiB records cut it into (2.6
 * writes per file in the benchmark's untar).  Written one by one, every
 * piece after the first rewrites the file's partial last sector (a new
 * extent, the old one freed, the checksums of both) and searches the
 * file's extents and the checksum tree again.  So a small write that
 * starts at a file's end and ends inside a sector is held back, and the
 * writes that continue it directly join it; the first call of any other kind - a read or a stat
 * too (ubt_api_rdlock) - and every commit write them as one engine write
 * first.  Nothing else runs in between, so the engine write meets the
 * state the checks saw: ubt_file_write_check makes every check of the
 * joined write (file type, size, data and metadata room; a joining piece
 * the data room only, taking no chunk - the metadata room, which does not
 * depend on the length, was checked when the hold began) before a write
 * is held and returns.  The joined write can then only fail as a half-done
 * change does (a read error, no memory): the transaction aborts, and the
 * filesystem turns read-only with its last commit, as for any such error.
 */
#define HELD_PIECE (64u << 10)	/* larger writes go straight through */
#define HELD_MAX (256u << 10)	/* the most held back */

/* Tear down a transaction the engine marked aborted (readers go back to
 * the last commit).  With the write locks. */
static void abort_teardown(ubtrfs_fs *f)
{
	f->held.len = 0;
	if (f->ns)
		ubt_ns_index_drop(f->ns);
	if (f->fs->wr->running)
		ubt_trans_abort(f->fs->wr->running,
				f->fs->wr->abort_err ? f->fs->wr->abort_err : -EIO);
	f->trans = NULL;
}

/* With the write locks: write the held-back appends as one.  0, or the
 * error with which the transaction was marked aborted (the caller tears
 * it down: abort_teardown). */
static int held_write(ubtrfs_fs *f)
{
	size_t len = f->held.len;

	if (!len)
		return 0;
	f->held.len = 0;
	if (!f->trans || !f->fs->wr || f->fs->wr->aborted)
		return -EROFS;	/* went with the aborted transaction */
	struct btrfs_timespec now;
	memset(&now, 0, sizeof(now));
	btrfs_set_timespec_sec(&now, f->held.now_sec);
	btrfs_set_timespec_nsec(&now, f->held.now_nsec);
	/* Its own operation scope, inside the caller's if there is one. */
	bool scope = f->trans->op_scope;
	ubt_op_scope(f->trans, true);
	int ret = ubt_file_write(f->trans, f->held.subvol, f->held.ino, f->held.off, f->held.buf,
				 len, &now);
	/* Back to the caller's scope, its reserve to be checked again in
	 * full: this write took room after it was checked. */
	ubt_op_scope(f->trans, scope);
	if (ret) {
		ubt_log(UBT_LOG_ERROR,
			"held-back write of %zu bytes at offset %llu of inode %llu (subvolume "
			"%llu) failed: %s; aborting the transaction",
			len, (unsigned long long)f->held.off, (unsigned long long)f->held.ino,
			(unsigned long long)f->held.subvol, ubt_strerror(ret));
		f->fs->wr->aborted = true;
		f->fs->wr->abort_err = ret;
	}
	return ret;
}

/* With the write locks: the delayed DIR_INDEX items in (inode_w.c).  0,
 * or the error with which the transaction was marked aborted.  Items of a
 * transaction already aborted (an orphan item that failed at the commit,
 * say) went with it: readers see the last commit, nothing to report. */
static int index_write(ubtrfs_fs *f)
{
	if (!f->ns || !ubt_ns_index_pending(f->ns))
		return 0;
	if (!f->trans || !f->fs->wr || f->fs->wr->aborted) {
		ubt_ns_index_drop(f->ns);
		return 0;
	}
	return ubt_ns_index_flush(f->ns, f->trans);
}

static int write_pending(ubtrfs_fs *f, bool index)
{
	ubt_api_wrlock(f);
	int ret = held_write(f);
	if (!ret && index)
		ret = index_write(f);
	if (ret && f->fs->wr && f->fs->wr->aborted)
		abort_teardown(f);
	/* Back to the read lock before the writer's mutex goes: no writer
	 * can hold back another write before this reader has read. */
	ubt_api_tell_abort(f);
	ubt_api_set_excl(f, false);
	pthread_rwlock_unlock(&f->lock);
	ubt_api_rdlock_held(f);
	pthread_mutex_unlock(&f->wlock);
	return ret;
}

int ubt_api_write_held(ubtrfs_fs *f)
{
	return write_pending(f, false);
}

int ubt_api_write_all_pending(ubtrfs_fs *f)
{
	return write_pending(f, true);
}

bool ubt_api_index_pending(ubtrfs_fs *f)
{
	return f->ns && ubt_ns_index_pending(f->ns);
}

/* Add len bytes at the end of the held-back write (starting one at off if
 * none is held).  0 or -ENOMEM. */
static int hold(ubtrfs_fs *f, const struct op *op, ubtrfs_ino id, const void *buf, size_t len,
		uint64_t off)
{
	size_t need = f->held.len + len;

	if (need > f->held.cap) {
		size_t cap = UBT_MAX(need, UBT_MIN((size_t)HELD_MAX, 2 * f->held.cap));
		cap = UBT_MAX(cap, (size_t)16384);
		unsigned char *nb = realloc(f->held.buf, cap);
		if (!nb)
			return -ENOMEM;
		f->held.buf = nb;
		f->held.cap = cap;
	}
	if (!f->held.len) {
		f->held.subvol = id.subvol;
		f->held.ino = id.ino;
		f->held.off = off;
	}
	memcpy(f->held.buf + f->held.len, buf, len);
	f->held.len = need;
	f->held.now_sec = btrfs_timespec_sec(&op->bnow);
	f->held.now_nsec = btrfs_timespec_nsec(&op->bnow);
	return 0;
}

/* ubtrfs_write's change: held back when it is small and appends (to the
 * held-back write, or at the file's end), written straight away else. */
static int write_or_hold(struct op *op, ubtrfs_ino id, const void *buf, size_t len, uint64_t off)
{
	ubtrfs_fs *f = op->f;
	bool joins = f->held.len && f->held.subvol == id.subvol && f->held.ino == id.ino &&
		     off == f->held.off + f->held.len && f->held.len + len <= HELD_MAX;
	int ret;

	if (f->held.len && !joins) {
		ret = held_write(f);
		if (ret)
			return ret;
	}
	/* A new hold only for a write that ends inside a sector: the next
	 * piece would rewrite that sector (a whole-sector write that no piece
	 * continues - a 4 KiB file - gains nothing from waiting). */
	if (joins || (len <= HELD_PIECE && (off + len) % f->fs->sectorsize)) {
		/* Joining (a piece of any size up to the limit): the whole
		 * joined write is checked. */
		ret = ubt_file_write_check(op->t, id.subvol, id.ino, joins ? f->held.off : off,
					   (joins ? f->held.len : 0) + len, joins);
		if (!ret && !hold(f, op, id, buf, len, off))
			return 0;
		/* Else straight through: its own checks decide (the check
		 * may ask for more room than it needs). */
		if (joins) {
			ret = held_write(f);
			if (ret)
				return ret;
		}
	}
	return ubt_file_write(op->t, id.subvol, id.ino, off, buf, len, &op->bnow);
}

/* ---- inodes in use (for orphans) ---------------------------------------- */

struct inuse_ent {
	uint64_t subvol, ino;		/* ino 0: free slot */
	uint64_t count;
	bool orphan;			/* lost its last name while in use */
	bool item;			/* its ORPHAN_ITEM is (or will be, by the
					 * unlink deciding so) in the tree */
	bool later;			/* ... or waits for the commit */
	bool closing;			/* freed at close (inuse_free_orphans) */
};

struct ubt_inuse {
	pthread_mutex_t mu;
	struct inuse_ent *v;
	size_t cap, n;			/* cap: power of two */
	/* Orphans of this transaction whose ORPHAN_ITEM waits for the
	 * commit (orphans_flush); an entry may be stale.  nlater of them are
	 * still in use: the transaction holds room for their items
	 * (ubt_meta_owe). */
	struct inuse_pend {
		uint64_t subvol, ino;
	} *pend;
	size_t npend, pcap, nlater;
	ubtrfs_fs *f;
};

static size_t inuse_hash(const struct ubt_inuse *u, uint64_t subvol, uint64_t ino)
{
	return (size_t)ubt_mix64(ino ^ ubt_mix64(subvol)) & (u->cap - 1);
}

static struct inuse_ent *inuse_find(struct ubt_inuse *u, uint64_t subvol, uint64_t ino)
{
	if (!u->cap)
		return NULL;
	for (size_t i = inuse_hash(u, subvol, ino);; i = (i + 1) & (u->cap - 1)) {
		struct inuse_ent *e = &u->v[i];
		if (e->ino == 0)
			return NULL;
		if (e->ino == ino && e->subvol == subvol)
			return e;
	}
}

/* Backward-shift deletion keeps every probe chain unbroken. */
static void inuse_remove(struct ubt_inuse *u, struct inuse_ent *e)
{
	size_t i = (size_t)(e - u->v), j = i;

	for (;;) {
		j = (j + 1) & (u->cap - 1);
		if (u->v[j].ino == 0)
			break;
		size_t h = inuse_hash(u, u->v[j].subvol, u->v[j].ino);
		/* Can the entry at j move to the hole at i? */
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			u->v[i] = u->v[j];
			i = j;
		}
	}
	memset(&u->v[i], 0, sizeof(u->v[i]));
	u->n--;
}

static int inuse_grow(struct ubt_inuse *u)
{
	size_t ncap = u->cap ? u->cap * 2 : 1024;
	struct inuse_ent *old = u->v, *nv = calloc(ncap, sizeof(*nv));
	size_t ocap = u->cap;

	if (!nv)
		return -ENOMEM;
	u->v = nv;
	u->cap = ncap;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].ino == 0)
			continue;
		size_t j = inuse_hash(u, old[i].subvol, old[i].ino);
		while (nv[j].ino)
			j = (j + 1) & (ncap - 1);
		nv[j] = old[i];
	}
	free(old);
	return 0;
}

int ubtrfs_ref(ubtrfs_fs *f, ubtrfs_ino id)
{
	struct ubt_inuse *u = f->inuse;
	int ret = 0;

	if (!u || id.ino == 0)
		return 0;
	pthread_mutex_lock(&u->mu);
	struct inuse_ent *e = inuse_find(u, id.subvol, id.ino);
	if (!e && (u->n + 1) * 4 > u->cap * 3)
		ret = inuse_grow(u);
	if (!ret && !e) {
		size_t i = inuse_hash(u, id.subvol, id.ino);
		while (u->v[i].ino)
			i = (i + 1) & (u->cap - 1);
		e = &u->v[i];
		e->subvol = id.subvol;
		e->ino = id.ino;
		e->count = 0;
		e->orphan = false;
		e->item = e->later = e->closing = false;
		u->n++;
	}
	if (!ret)
		e->count++;
	pthread_mutex_unlock(&u->mu);
	return ret;
}

/* The namespace writer's question, asked with the handle lock held: is
 * this inode, about to lose its last name, still in use?  Then it becomes
 * an orphan (deleted at its last ubtrfs_forget).  Its ORPHAN_ITEM waits
 * for the commit: an orphan the kernel forgets in the same transaction -
 * every file of an rm -rf - never needs one. */
static int inuse_keep(void *ctx, uint64_t subvol, uint64_t ino, bool decide)
{
	struct ubt_inuse *u = ctx;
	int mode = UBT_NS_DELETE;

	pthread_mutex_lock(&u->mu);
	struct inuse_ent *e = inuse_find(u, subvol, ino);
	if (e && e->count && !decide) {
		mode = UBT_NS_KEEP;	/* the question only */
	} else if (e && e->count) {
		e->orphan = true;
		mode = UBT_NS_KEEP;
		if (e->item || e->later) {
			mode = UBT_NS_KEEP_LATER;	/* there, or already promised */
		} else {
			if (u->npend == u->pcap) {
				size_t cap = u->pcap ? 2 * u->pcap : 64;
				struct inuse_pend *v = realloc(u->pend, cap * sizeof(*v));
				if (v) {
					u->pend = v;
					u->pcap = cap;
				}
			}
			/* Later only with the room for it held (else, on a
			 * nearly full filesystem, the unlink inserts it). */
			if (u->npend < u->pcap && ubt_meta_owe(u->f->trans, u->nlater + 1)) {
				u->pend[u->npend++] = (struct inuse_pend){ subvol, ino };
				u->nlater++;
				e->later = true;
				mode = UBT_NS_KEEP_LATER;
			}
		}
		if (mode == UBT_NS_KEEP)
			e->item = true;	/* the unlink inserts it now */
	}
	pthread_mutex_unlock(&u->mu);
	return mode;
}

/* Before a commit, with the handle lock held: the ORPHAN_ITEM of every
 * orphan of this transaction still in use (the kernel's state of an open
 * unlinked file).  Holding the table's mutex throughout, a FORGET cannot
 * take an entry away between its check and its item. */
static int orphans_flush(ubtrfs_fs *f, struct ubt_trans *t)
{
	struct ubt_inuse *u = f->inuse;
	int ret = 0;

	if (!u || t->w->aborted)
		return 0;
	pthread_mutex_lock(&u->mu);
	ubt_meta_owed_begin(t);		/* the room promised for these */
	for (size_t i = 0; i < u->npend; i++) {
		struct inuse_ent *e = inuse_find(u, u->pend[i].subvol, u->pend[i].ino);
		if (!e || !e->later)
			continue;
		e->later = false;
		if (ret)
			continue;	/* aborting: only the marks go */
		/* 0: it kept a link (its unlink failed after the question). */
		ret = ubt_ns_orphan_add(f->ns, t, e->subvol, e->ino);
		if (ret == 1)
			e->item = true;
		if (ret < 0)
			ubt_log(UBT_LOG_ERROR, "cannot write the ORPHAN_ITEM of inode %llu: %s",
				(unsigned long long)e->ino, ubt_strerror(ret));
		ret = ret < 0 ? ret : 0;
	}
	ubt_meta_owed_end(t);
	u->npend = 0;
	u->nlater = 0;
	pthread_mutex_unlock(&u->mu);
	return ret;
}

static int orphan_free(ubtrfs_fs *f, uint64_t subvol, uint64_t ino, bool scan);

int ubtrfs_forget(ubtrfs_fs *f, ubtrfs_ino id, uint64_t n)
{
	struct ubt_inuse *u = f->inuse;
	bool orphan = false;

	if (!u || id.ino == 0)
		return 0;
	pthread_mutex_lock(&u->mu);
	struct inuse_ent *e = inuse_find(u, id.subvol, id.ino);
	if (e) {
		e->count = e->count > n ? e->count - n : 0;
		/* An orphan stays in the table until it is gone: until then
		 * a commit must still write its ORPHAN_ITEM (orphans_flush). */
		if (e->count == 0 && e->orphan)
			orphan = true;
		else if (e->count == 0)
			inuse_remove(u, e);
	}
	pthread_mutex_unlock(&u->mu);
	return orphan ? orphan_free(f, id.subvol, id.ino, false) : 0;
}

/* With the handle lock held (no commit runs): is the orphan's ORPHAN_ITEM
 * (perhaps) in the tree (1) or not (0), is it in use again (-1), or freed
 * already (-2: a second free)?  An orphan found at open (scan) has its
 * item. */
static int orphan_item(ubtrfs_fs *f, uint64_t subvol, uint64_t ino, bool scan)
{
	struct ubt_inuse *u = f->inuse;

	if (scan || !u)
		return 1;
	pthread_mutex_lock(&u->mu);
	struct inuse_ent *e = inuse_find(u, subvol, ino);
	int r = !e ? -2 : e->count ? -1 : e->item;
	pthread_mutex_unlock(&u->mu);
	return r;
}

/* With the handle lock held, once the orphan is deleted in `t`: its table
 * entry goes, and so does the room promised for its item. */
static void orphan_gone(ubtrfs_fs *f, struct ubt_trans *t, uint64_t subvol, uint64_t ino)
{
	struct ubt_inuse *u = f->inuse;

	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	struct inuse_ent *e = inuse_find(u, subvol, ino);
	if (e && e->count == 0) {
		if (e->later)
			u->nlater--;
		inuse_remove(u, e);
	}
	size_t n = u->nlater;
	pthread_mutex_unlock(&u->mu);
	ubt_meta_owe(t, n);
}

/*
 * Free orphan `ino`: its data, its items, its ORPHAN_ITEM if one was
 * written (an orphan of the running transaction may have none yet: the
 * table says, asked again after anything that may have committed).  Only
 * inodes without links go; an inode with links and an item (the kernel's
 * orphan for a truncate in progress, found at open: `scan`) loses just
 * the item - the truncate is complete in every commit we write.  Until it
 * is gone the orphan stays in the table, so that a commit meanwhile (the
 * commit timer, a truncate step on ENOSPC) writes its item.
 */
static int orphan_free(ubtrfs_fs *f, uint64_t subvol, uint64_t ino, bool scan)
{
	struct op op;
	int ret, pass = 0;

	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		int item = orphan_item(f, subvol, ino, scan);
		if (item < 0)
			return op_end(&op, 0);	/* in use again, or gone */
		/* Small data goes with the inode's items; more in steps first. */
		ret = ubt_ns_orphan_delete(f->ns, op.t, subvol, ino, item);
		if (ret == -EOPNOTSUPP) {
			ret = truncate_steps(&op, subvol, ino, 0, NULL);
			item = ret ? 0 : orphan_item(f, subvol, ino, scan);
			if (item < 0)
				return op_end(&op, 0);
			if (!ret)
				ret = ubt_ns_orphan_delete(f->ns, op.t, subvol, ino, item);
		}
		if (!ret)
			orphan_gone(f, op.t, subvol, ino);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

struct scan_ctx {
	ubtrfs_fs *f;
	uint64_t subvol;
	unsigned freed;
};

static int scan_one(void *ctx, uint64_t ino)
{
	struct scan_ctx *c = ctx;
	int ret = orphan_free(c->f, c->subvol, ino, true);

	if (ret == 0)
		c->freed++;
	if (ret)
		ubt_log(UBT_LOG_ERROR, "subvolume %llu: cannot free orphan inode %llu: %s",
			(unsigned long long)c->subvol, (unsigned long long)ino, ubt_strerror(ret));
	return ret;
}

/* At a read-write open: free the orphans a crash left in every writable
 * subvolume (as the kernel does when it loads a subvolume), then commit. */
static int orphan_cleanup(ubtrfs_fs *f)
{
	struct btrfs_key min = { BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_LAST_FREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct ubt_fs *fs = f->fs;
	struct ubt_iter it;
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	int ret;

	ubt_iter_start(&it, &fs->tree, &fs->root_tree, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (it.key.type != BTRFS_ROOT_ITEM_KEY ||
		    (it.key.objectid != BTRFS_FS_TREE_OBJECTID &&
		     it.key.objectid < BTRFS_FIRST_FREE_OBJECTID))
			continue;
		if (it.size < offsetof(struct btrfs_root_item, refs) + 4 ||
		    btrfs_root_refs((const struct btrfs_root_item *)it.data) == 0)
			continue;	/* a deleted subvolume: the kernel's to clean */
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			uint64_t *v = realloc(ids, cap * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			ids = v;
		}
		ids[n++] = it.key.objectid;
	}
	ubt_iter_end(&it);
	if (ret > 0)
		ret = 0;
	unsigned freed = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		const struct ubt_subvol *sv;
		if (ubt_fs_subvol(fs, ids[i], &sv) != 0 || sv->readonly)
			continue;
		struct scan_ctx c = { f, ids[i], 0 };
		ret = ubt_ns_orphans(fs, ids[i], scan_one, &c);
		freed += c.freed;
	}
	free(ids);
	if (!ret && freed) {
		ubt_log(UBT_LOG_INFO, "freed %u orphan inode%s left by a crash", freed,
			freed == 1 ? "" : "s");
		ret = ubtrfs_commit(f);
	}
	return ret;
}

int ubt_api_write_init(ubtrfs_fs *f)
{
	int ret = ubt_wfs_init(f->fs);

	if (!ret)
		ret = ubt_ns_new(f->fs, &f->ns);
	if (!ret) {
		f->inuse = calloc(1, sizeof(*f->inuse));
		if (!f->inuse)
			ret = -ENOMEM;
		else
			pthread_mutex_init(&f->inuse->mu, NULL);
		if (f->inuse)
			f->inuse->f = f;
	}
	if (!ret)
		ubt_ns_set_keep(f->ns, inuse_keep, f->inuse);
	if (!ret)
		ret = orphan_cleanup(f);
	return ret;
}

void ubt_api_tell_abort(ubtrfs_fs *f)
{
	if (f->abort_told || !f->fs->wr || !f->fs->wr->aborted)
		return;
	f->abort_told = true;
	if (f->abort_hook)
		f->abort_hook(f->abort_ctx);
}

/* With both locks held (ubt_api_wrlock); `lock` is let go while the
 * blocks are written, so that readers run meanwhile. */
static int commit_locked(ubtrfs_fs *f)
{
	if (!f->trans) {
		f->held.len = 0;
		return f->fs->wr && f->fs->wr->aborted ? -EROFS : 0;
	}
	int ret = held_write(f);
	if (ret) {
		abort_teardown(f);
		return ret;
	}
	struct ubt_trans *t = f->trans;
	ret = orphans_flush(f, t);
	if (ret && !t->w->aborted) {
		/* Committing an orphan without its item would leak it. */
		t->w->aborted = true;
		t->w->abort_err = ret;
	}
	f->trans = NULL;	/* committed, or aborted and gone */
	f->nops = 0;
	ret = ubt_trans_commit_prepare(t);
	if (ret)
		return ret > 0 ? 0 : ret;
	ubt_api_will_block(f);
	ubt_api_set_excl(f, false);	/* readers come in from here */
	pthread_rwlock_unlock(&f->lock);
	ret = ubt_trans_commit_write(t);
	if (pthread_rwlock_trywrlock(&f->lock)) {
		ubt_api_will_block(f);
		pthread_rwlock_wrlock(&f->lock);
	}
	ubt_api_set_excl(f, true);
	return ubt_trans_commit_finish(t, ret);
}

/* At close: every orphan still "in use" has no user left.  One at a time
 * (freeing one takes its entry out of the table); one that cannot be
 * freed stays, and the commit at close writes its item. */
static void inuse_free_orphans(ubtrfs_fs *f)
{
	struct ubt_inuse *u = f->inuse;

	if (!u)
		return;
	for (;;) {
		uint64_t subvol = 0, ino = 0;
		pthread_mutex_lock(&u->mu);
		for (size_t i = 0; i < u->cap && !ino; i++) {
			struct inuse_ent *e = &u->v[i];
			if (e->ino && e->orphan && !e->closing) {
				e->closing = true;
				e->count = 0;
				subvol = e->subvol;
				ino = e->ino;
			}
		}
		pthread_mutex_unlock(&u->mu);
		if (!ino)
			break;
		int ret = orphan_free(f, subvol, ino, false);
		if (ret && ret != -EROFS)
			ubt_log(UBT_LOG_ERROR, "cannot free orphan inode %llu: %s",
				(unsigned long long)ino, ubt_strerror(ret));
	}
}

static void inuse_destroy(ubtrfs_fs *f)
{
	struct ubt_inuse *u = f->inuse;

	if (!u)
		return;
	pthread_mutex_destroy(&u->mu);
	free(u->v);
	free(u->pend);
	free(u);
	f->inuse = NULL;
}

void ubt_api_write_close(ubtrfs_fs *f)
{
	if (!f->fs || !f->fs->wr) {
		inuse_destroy(f);
		return;
	}
	inuse_free_orphans(f);
	ubt_api_wrlock(f);
	int ret = commit_locked(f);
	if (ret && ret != -EROFS)
		ubt_log(UBT_LOG_ERROR, "commit at close failed: %s", ubt_strerror(ret));
	inuse_destroy(f);
	free(f->held.buf);
	f->held.buf = NULL;
	f->held.cap = f->held.len = 0;
	ubt_ns_free(f->ns);
	f->ns = NULL;
	ubt_wfs_destroy(f->fs);
	f->fs->wr = NULL;
	ubt_api_wrunlock(f);
}

int ubtrfs_commit(ubtrfs_fs *f)
{
	if (f->readonly)
		return -EROFS;
	ubt_api_wrlock(f);
	int ret = commit_locked(f);
	ubt_api_wrunlock(f);
	return ret;
}

/* ---- one operation ------------------------------------------------------ */


/* Take the lock exclusively and make sure a transaction runs; held-back
 * appends are written first unless keep_held (ubtrfs_write). */
static int op_begin_keep(ubtrfs_fs *f, struct op *op, bool keep_held)
{
	struct timespec ts;

	if (f->readonly)
		return -EROFS;
	ubt_api_wrlock(f);
	if (!f->fs->wr || f->fs->wr->aborted) {
		f->trans = NULL;
		f->held.len = 0;
		ubt_api_wrunlock(f);
		return -EROFS;
	}
	if (!keep_held && held_write(f)) {
		abort_teardown(f);
		ubt_api_wrunlock(f);
		return -EROFS;
	}
	if (!f->trans) {
		int ret = ubt_trans_start(f->fs, &f->trans);
		if (ret) {
			f->trans = NULL;
			ubt_api_wrunlock(f);
			return ret;
		}
		f->nops = 0;
	}
	ubt_op_scope(f->trans, true);
	clock_gettime(CLOCK_REALTIME, &ts);
	op->f = f;
	op->t = f->trans;
	op->now.sec = ts.tv_sec;
	op->now.nsec = (uint32_t)ts.tv_nsec;
	memset(&op->bnow, 0, sizeof(op->bnow));
	btrfs_set_timespec_sec(&op->bnow, (uint64_t)ts.tv_sec);
	btrfs_set_timespec_nsec(&op->bnow, (uint32_t)ts.tv_nsec);
	return 0;
}

static int op_begin(ubtrfs_fs *f, struct op *op)
{
	return op_begin_keep(f, op, false);
}

static bool commit_due(ubtrfs_fs *f)
{
	struct ubt_trans *t = f->trans;
	uint64_t ns = f->fs->nodesize;
	uint64_t dirty_max = UBT_MAX(f->fs->tree.max_bytes / 4, AUTO_COMMIT_MIN_DIRTY);

	if (!t)
		return false;
	if (f->nops >= AUTO_COMMIT_OPS || (uint64_t)t->ndirty * ns >= dirty_max)
		return true;
	/* The commit's reserve (ubt_reserve_metadata): about 2 blocks per
	 * dirty block and one per queued reference change, bounded by the
	 * trees the commit rewrites (ubt_commit_ref_blocks).  Past half the
	 * free metadata space: first more metadata space while the devices
	 * have room and metadata is small (as the kernel allocates it), which
	 * keeps commits large; else commit now. */
	uint64_t need = (3 * (uint64_t)t->ndirty + ubt_commit_ref_blocks(t)) * ns;
	if (need <= ubt_meta_free_bytes(f->fs->wr, false) / 2)
		return false;
	if (ubt_meta_grow(t) == 0)
		return need > ubt_meta_free_bytes(f->fs->wr, false) / 2;
	return true;
}

static int op_end(struct op *op, int ret)
{
	ubtrfs_fs *f = op->f;

	/* A read or memory failure after the operation's reserve - after its
	 * first change, perhaps (a data extent taken, an item inserted) - may
	 * leave it half done: the transaction must not be committed. */
	if ((ret == -EIO || ret == -EUCLEAN || ret == -ENOMEM) && f->trans &&
	    f->trans->op_reserved && !f->fs->wr->aborted) {
		ubt_log(UBT_LOG_ERROR, "a write operation failed part way (%s): aborting",
			ubt_strerror(ret));
		f->fs->wr->aborted = true;
		f->fs->wr->abort_err = ret;
	}
	if (f->fs->wr->aborted) {
		/* The engine gave up on the transaction (half-done change):
		 * readers go back to the last commit. */
		abort_teardown(f);
		if (ret == 0)
			ret = -EROFS;
	} else if (f->trans && (ubt_op_scope(f->trans, false), ++f->nops, commit_due(f))) {
		int c = commit_locked(f);
		if (c && ret == 0)
			ret = c;
	}
	ubt_api_wrunlock(f);
	return ret;
}

/*
 * op_end for operations that may simply be tried again: ENOSPC from an
 * operation leaves everything as it was (the engine reserves up front), but
 * may come from space the running transaction freed (pinned until its
 * commit) or from the reserve its own size needs: commit, and return
 * OP_RETRY once (*pass counts) for the caller to begin the operation again.
 */
static int op_end_retry(struct op *op, int ret, int *pass)
{
	ubtrfs_fs *f = op->f;

	if (ret != -ENOSPC || (*pass)++ > 0 || f->fs->wr->aborted || !f->trans ||
	    (f->trans->ndirty == 0 && f->trans->nrefs == 0))
		return op_end(op, ret);
	ubt_op_scope(f->trans, false);
	int c = commit_locked(f);
	ubt_api_wrunlock(f);
	return c ? c : OP_RETRY;
}

/* Attributes after a successful operation (out may be NULL). */
static int op_stat(struct op *op, int ret, uint64_t subvol, uint64_t ino, struct ubtrfs_stat *out)
{
	if (ret || !out)
		return ret;
	ubtrfs_ino id = { subvol, ino };
	return ubt_api_stat(op->f, id, out);
}

/*
 * Shrink a regular file to `size` in steps of at most TRUNCATE_STEP_ITEMS
 * extent items, each with its own reserve (one operation's room is bounded:
 * ubt_op_scope), committing when a step meets ENOSPC (space the transaction
 * freed returns at its commit): a file of any number of extents can go on a
 * full filesystem.  Each step leaves a consistent, shorter file.
 */
#define TRUNCATE_STEP_ITEMS 32
static int truncate_steps(struct op *op, uint64_t subvol, uint64_t ino, uint64_t size,
			  const struct btrfs_timespec *now)
{
	ubtrfs_fs *f = op->f;
	uint64_t *to;
	size_t n;
	int ret = ubt_file_step_targets(op->t, subvol, ino, size, TRUNCATE_STEP_ITEMS, &to, &n);

	if (ret)
		return ret;
	/* The items only shrink from the end (this operation holds the
	 * lock), so the targets stay valid across the commits below. */
	for (size_t i = 0, commits = 0; i <= n;) {
		uint64_t sz = i < n ? to[i] : size;
		ubt_op_scope(op->t, true);
		ret = ubt_file_truncate(op->t, subvol, ino, sz, now);
		if (ret == -ENOSPC && !f->fs->wr->aborted && commits < 8 &&
		    (op->t->ndirty || op->t->nrefs)) {
			commits++;
			ret = commit_locked(f);
			if (!ret)
				ret = ubt_trans_start(f->fs, &f->trans);
			if (ret) {
				f->trans = NULL;
				break;
			}
			f->nops = 0;
			op->t = f->trans;
			continue;
		}
		if (ret)
			break;
		i++;
	}
	free(to);
	/* What the operation does next (the inode's times, the unlink) runs
	 * on the last step's reserve: a fresh check failing there would
	 * report ENOSPC for a truncate that happened. */
	return ret;
}

/* Before a name goes: a file losing its last link, not in use and with
 * more data than its deletion drops itself, is truncated first (in steps). */
static int drop_data_if_last(struct op *op, uint64_t subvol, uint64_t ino)
{
	struct ubtrfs_stat st;
	ubtrfs_ino id = { subvol, ino };

	if (op->f->inuse) {
		struct ubt_inuse *u = op->f->inuse;
		pthread_mutex_lock(&u->mu);
		struct inuse_ent *e = inuse_find(u, subvol, ino);
		bool busy = e && e->count;
		pthread_mutex_unlock(&u->mu);
		if (busy)
			return 0;	/* it becomes an orphan and keeps its data */
	}
	int ret = ubt_api_stat(op->f, id, &st);
	if (ret)
		return ret;
	if (!S_ISREG(st.mode) || st.nlink != 1 || (st.size == 0 && st.blocks == 0) ||
	    ubt_ns_drops_data(op->f->fs, st.blocks << 9))
		return 0;
	return truncate_steps(op, subvol, ino, 0, &op->bnow);
}

/* ---- namespace ------------------------------------------------------------ */

static int new_inode(ubtrfs_fs *f, ubtrfs_ino dir, const char *name,
		     const struct ubt_ns_new_inode *a, struct ubtrfs_stat *out)
{
	struct op op;
	int ret, pass = 0;

	do {
		uint64_t ino = 0;
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_create(f->ns, op.t, dir.subvol, dir.ino, name, strlen(name), a,
				    op.now, &ino);
		ret = op_stat(&op, ret, dir.subvol, ino, out);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

int ubtrfs_mknod(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, uint32_t mode, uint32_t uid,
		 uint32_t gid, uint32_t rdev_major, uint32_t rdev_minor, struct ubtrfs_stat *out)
{
	struct ubt_ns_new_inode a = { 0 };

	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	case S_IFCHR:
	case S_IFBLK:
		a.rdev_major = rdev_major;
		a.rdev_minor = rdev_minor;
		break;
	default:
		return -EINVAL;
	}
	a.mode = mode & (S_IFMT | 07777);
	a.uid = uid;
	a.gid = gid;
	return new_inode(f, dir, name, &a, out);
}

int ubtrfs_create(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, uint32_t mode, uint32_t uid,
		  uint32_t gid, struct ubtrfs_stat *out)
{
	return ubtrfs_mknod(f, dir, name, S_IFREG | (mode & 07777), uid, gid, 0, 0, out);
}

int ubtrfs_mkdir(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, uint32_t mode, uint32_t uid,
		 uint32_t gid, struct ubtrfs_stat *out)
{
	return ubtrfs_mknod(f, dir, name, S_IFDIR | (mode & 07777), uid, gid, 0, 0, out);
}

int ubtrfs_symlink(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, const char *target,
		   uint32_t uid, uint32_t gid, struct ubtrfs_stat *out)
{
	struct ubt_ns_new_inode a = { 0 };

	a.mode = S_IFLNK | 0777;
	a.uid = uid;
	a.gid = gid;
	a.target = target;
	a.target_len = strlen(target);
	return new_inode(f, dir, name, &a, out);
}

int ubtrfs_link(ubtrfs_fs *f, ubtrfs_ino id, ubtrfs_ino newdir, const char *newname,
		struct ubtrfs_stat *out)
{
	struct op op;
	int ret, pass = 0;

	if (id.subvol != newdir.subvol)
		return -EXDEV;
	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_link(f->ns, op.t, id.subvol, id.ino, newdir.ino, newname,
				  strlen(newname), op.now);
		ret = op_stat(&op, ret, id.subvol, id.ino, out);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

int ubtrfs_snapshot(ubtrfs_fs *f, uint64_t src, ubtrfs_ino dir, const char *name, bool readonly,
		    uint64_t *id)
{
	struct op op;
	int ret, pass = 0, tries = 0;
	uint64_t nid = 0;

	do {
		/* The snapshot shares src's blocks: none of them may be the
		 * running transaction's (changed in place later), so what
		 * came before is committed first.  Another writer between
		 * the two steps makes the copy refuse (-EAGAIN): again. */
		ret = ubtrfs_commit(f);
		if (ret)
			return ret;
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_snapshot(f->ns, op.t, dir.subvol, dir.ino, name, strlen(name), src,
				      readonly, op.now, &nid);
		if (!ret)
			ret = commit_locked(f);
		if (ret == -EAGAIN && ++tries < 8) {
			int e = op_end(&op, 0);
			ret = e ? e : OP_RETRY;
		} else
			ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	if (!ret && id)
		*id = nid;
	return ret;
}

int ubtrfs_subvol_create(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, uint32_t mode,
			 uint32_t uid, uint32_t gid, uint64_t *id)
{
	struct op op;
	int ret, pass = 0;
	uint64_t nid = 0;

	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_subvol_create(f->ns, op.t, dir.subvol, dir.ino, name, strlen(name), mode,
					   uid, gid, op.now, &nid);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	if (!ret && id)
		*id = nid;
	return ret;
}

/* Does an inode of subvolume `subvol` in use lack its last name (an
 * orphan: its ORPHAN_ITEM and its freeing need the subvolume)? */
static bool subvol_has_orphans(ubtrfs_fs *f, uint64_t subvol)
{
	struct ubt_inuse *u = f->inuse;
	bool any = false;

	if (!u)
		return false;
	pthread_mutex_lock(&u->mu);
	for (size_t i = 0; i < u->cap && !any; i++)
		any = u->v[i].ino && u->v[i].subvol == subvol && u->v[i].orphan;
	pthread_mutex_unlock(&u->mu);
	return any;
}

int ubtrfs_subvol_delete(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, uint64_t *id)
{
	struct op op;
	int ret, pass = 0;
	uint64_t nid = 0;
	struct ubtrfs_stat st;

	/* Files of it unlinked while open still need it: -EBUSY, as for a
	 * busy mount, until they are closed. */
	ret = ubtrfs_lookup(f, dir, name, &st);
	if (ret)
		return ret;
	if (st.id.ino == BTRFS_FIRST_FREE_OBJECTID && st.id.subvol != dir.subvol &&
	    subvol_has_orphans(f, st.id.subvol))
		return -EBUSY;
	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_subvol_delete(f->ns, op.t, dir.subvol, dir.ino, name, strlen(name),
					   op.now, &nid);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	if (!ret && id)
		*id = nid;
	return ret;
}

int ubtrfs_unlink(ubtrfs_fs *f, ubtrfs_ino dir, const char *name)
{
	struct op op;
	uint64_t ino;
	uint8_t type;
	size_t len = strlen(name);
	int ret, pass = 0;

	/* ENOSPC on a full filesystem: a commit releases what the
	 * transaction freed, then once more (op_end_retry). */
	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_lookup(f->fs, dir.subvol, dir.ino, name, len, &ino, &type);
		if (!ret && type == BTRFS_FT_REG_FILE)
			ret = drop_data_if_last(&op, dir.subvol, ino);
		if (!ret)
			ret = ubt_ns_unlink_ino(f->ns, op.t, dir.subvol, dir.ino, name, len, ino,
						op.now);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

int ubtrfs_rmdir(ubtrfs_fs *f, ubtrfs_ino dir, const char *name)
{
	struct op op;
	int ret, pass = 0;

	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_rmdir(f->ns, op.t, dir.subvol, dir.ino, name, strlen(name), op.now);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

/* The rename itself, inside op_begin..op_end. */
static int rename_in(ubtrfs_fs *f, struct op *op, ubtrfs_ino olddir, const char *oldname,
		     ubtrfs_ino newdir, const char *newname, unsigned flags)
{
	uint64_t src, dst;
	uint8_t stype, dtype;
	size_t oldlen = strlen(oldname), newlen = strlen(newname);
	int ret = 0;

	if (flags & UBTRFS_RENAME_EXCHANGE)
		return ubt_ns_exchange(f->ns, op->t, olddir.subvol, olddir.ino, oldname, oldlen,
				       newdir.ino, newname, newlen, op->now);
	if (flags & UBTRFS_RENAME_NOREPLACE) {
		/* The VFS order: the source must exist first. */
		ret = ubt_ns_lookup(f->fs, olddir.subvol, olddir.ino, oldname, oldlen, &src,
				    &stype);
		if (!ret || ret == -EXDEV) {
			ret = ubt_ns_lookup(f->fs, newdir.subvol, newdir.ino, newname, newlen,
					    &dst, &dtype);
			ret = ret == 0 || ret == -EXDEV ? -EEXIST : ret == -ENOENT ? 0 : ret;
		}
		if (ret)
			return ret;
	}
	/* A regular file replaced with its last name loses its data first;
	 * only when the rename is otherwise sure to go ahead. */
	if (ubt_ns_lookup(f->fs, newdir.subvol, newdir.ino, newname, newlen, &dst, &dtype) == 0 &&
	    dtype == BTRFS_FT_REG_FILE &&
	    ubt_ns_lookup(f->fs, olddir.subvol, olddir.ino, oldname, oldlen, &src, &stype) == 0 &&
	    stype != BTRFS_FT_DIR && src != dst)
		ret = drop_data_if_last(op, newdir.subvol, dst);
	if (!ret)
		ret = ubt_ns_rename(f->ns, op->t, olddir.subvol, olddir.ino, oldname, oldlen,
				    newdir.ino, newname, newlen, op->now);
	return ret;
}

int ubtrfs_rename(ubtrfs_fs *f, ubtrfs_ino olddir, const char *oldname, ubtrfs_ino newdir,
		  const char *newname, unsigned flags)
{
	struct op op;
	int ret, pass = 0;

	if (flags & ~(UBTRFS_RENAME_NOREPLACE | UBTRFS_RENAME_EXCHANGE) ||
	    flags == (UBTRFS_RENAME_NOREPLACE | UBTRFS_RENAME_EXCHANGE))
		return -EINVAL;
	if (olddir.subvol != newdir.subvol)
		return -EXDEV;
	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = rename_in(f, &op, olddir, oldname, newdir, newname, flags);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

/* ---- attributes and data ---------------------------------------------------- */

static struct ubt_ns_time ns_time(struct ubtrfs_time t)
{
	struct ubt_ns_time r = { t.sec, t.nsec };
	return r;
}

int ubtrfs_setattr(ubtrfs_fs *f, ubtrfs_ino id, const struct ubtrfs_setattr *a,
		   struct ubtrfs_stat *out)
{
	struct ubt_ns_attr na = { 0 };
	struct op op;
	int ret = op_begin(f, &op);

	if (ret)
		return ret;
	if (a->valid & UBTRFS_SET_SIZE) {
		struct ubtrfs_stat st;
		ret = ubt_api_stat(f, id, &st);
		if (!ret && S_ISDIR(st.mode))
			ret = -EISDIR;
		else if (!ret && !S_ISREG(st.mode))
			ret = -EINVAL;
		if (!ret)
			ret = truncate_steps(&op, id.subvol, id.ino, a->size, &op.bnow);
	}
	if (a->valid & UBTRFS_SET_MODE) {
		na.valid |= UBT_NS_SET_MODE;
		na.mode = a->mode & 07777;
	}
	if (a->valid & UBTRFS_SET_UID) {
		na.valid |= UBT_NS_SET_UID;
		na.uid = a->uid;
	}
	if (a->valid & UBTRFS_SET_GID) {
		na.valid |= UBT_NS_SET_GID;
		na.gid = a->gid;
	}
	if (a->valid & UBTRFS_SET_ATIME) {
		na.valid |= UBT_NS_SET_ATIME;
		na.atime = a->valid & UBTRFS_SET_ATIME_NOW ? op.now : ns_time(a->atime);
	}
	if (a->valid & UBTRFS_SET_MTIME) {
		na.valid |= UBT_NS_SET_MTIME;
		na.mtime = a->valid & UBTRFS_SET_MTIME_NOW ? op.now : ns_time(a->mtime);
	}
	if (!ret && (na.valid || (a->valid & UBTRFS_SET_CTIME))) {
		na.valid |= UBT_NS_SET_CTIME;
		na.ctime = a->valid & UBTRFS_SET_CTIME ? ns_time(a->ctime) : op.now;
		ret = ubt_ns_setattr(f->ns, op.t, id.subvol, id.ino, &na);
	}
	ret = op_stat(&op, ret, id.subvol, id.ino, out);
	return op_end(&op, ret);
}

ssize_t ubtrfs_write(ubtrfs_fs *f, ubtrfs_ino id, const void *buf, size_t len, uint64_t off)
{
	struct op op;
	int ret;

	int pass = 0;

	if (len > SSIZE_MAX)
		return -EINVAL;
	do {
		ret = op_begin_keep(f, &op, true);
		if (ret)
			return ret;
		if (len)
			ret = write_or_hold(&op, id, buf, len, off);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret ? ret : (ssize_t)len;
}

int ubtrfs_setxattr(ubtrfs_fs *f, ubtrfs_ino id, const char *name, const void *value,
		    size_t size, int flags)
{
	struct op op;
	int ret, pass = 0;

	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_ns_setxattr(f->ns, op.t, id.subvol, id.ino, name, value, size, flags,
				      op.now);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

int ubtrfs_removexattr(ubtrfs_fs *f, ubtrfs_ino id, const char *name)
{
	struct op op;
	int ret = op_begin(f, &op);

	if (ret)
		return ret;
	ret = ubt_ns_removexattr(f->ns, op.t, id.subvol, id.ino, name, op.now);
	return op_end(&op, ret);
}

int ubtrfs_fallocate(ubtrfs_fs *f, ubtrfs_ino id, int mode, uint64_t off, uint64_t len)
{
	struct op op;
	int ret, pass = 0;

	do {
		ret = op_begin(f, &op);
		if (ret)
			return ret;
		ret = ubt_file_fallocate(op.t, id.subvol, id.ino, mode, off, len, &op.bnow);
		ret = op_end_retry(&op, ret, &pass);
	} while (ret == OP_RETRY);
	return ret;
}

/* Read file bytes with the lock held. */
static ssize_t read_locked(ubtrfs_fs *f, ubtrfs_ino id, void *buf, size_t len, uint64_t off)
{
	const struct ubt_subvol *sv;
	struct ubt_inode in;
	int ret = ubt_fs_subvol(f->fs, id.subvol, &sv);

	if (!ret)
		ret = ubt_inode_read(f->fs, sv, id.ino, &in);
	if (ret)
		return ret;
	return ubt_file_read(f->fs, &in, buf, len, off);
}

/* Copy by reading and writing, in pieces of COPY_CHUNK bytes. */
#define COPY_CHUNK (1u << 20)

static ssize_t copy_bytes(ubtrfs_fs *f, struct op *op, ubtrfs_ino src, uint64_t off_in,
			  ubtrfs_ino dst, uint64_t off_out, uint64_t len)
{
	uint8_t *buf = malloc(UBT_MIN(len, (uint64_t)COPY_CHUNK));
	uint64_t done = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (done < len) {
		size_t want = (size_t)UBT_MIN(len - done, (uint64_t)COPY_CHUNK);
		ssize_t n = read_locked(f, src, buf, want, off_in + done);
		if (n <= 0) {
			ret = (int)n;
			break;
		}
		ret = ubt_file_write(op->t, dst.subvol, dst.ino, off_out + done, buf, (size_t)n,
				     &op->bnow);
		if (ret)
			break;
		done += (uint64_t)n;
	}
	free(buf);
	return done ? (ssize_t)done : ret;
}

ssize_t ubtrfs_copy_range(ubtrfs_fs *f, ubtrfs_ino src, uint64_t off_in, ubtrfs_ino dst,
			  uint64_t off_out, uint64_t len)
{
	struct ubtrfs_stat ss, ds;
	struct op op;
	ssize_t n;
	int ret = op_begin(f, &op);

	if (ret)
		return ret;
	ret = ubt_api_stat(f, src, &ss);
	if (!ret)
		ret = ubt_api_stat(f, dst, &ds);
	if (!ret && (S_ISDIR(ss.mode) || S_ISDIR(ds.mode)))
		ret = -EISDIR;
	else if (!ret && (!S_ISREG(ss.mode) || !S_ISREG(ds.mode)))
		ret = -EINVAL;
	if (ret)
		return op_end(&op, ret);
	if (off_in >= ss.size)
		return op_end(&op, 0);
	len = UBT_MIN(len, ss.size - off_in);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX & ~(uint64_t)0xfffff;
	if (src.subvol == dst.subvol && !(src.ino == dst.ino && off_in < off_out + len &&
					  off_out < off_in + len)) {
		/* A reflink where the ranges allow it; else plain copying. */
		ret = ubt_file_clone(op.t, src.subvol, src.ino, off_in, dst.ino, off_out, len,
				     &op.bnow);
		if (ret == 0) {
			ret = op_end(&op, 0);
			return ret ? ret : (ssize_t)len;
		}
		if (ret != -EINVAL && ret != -EOPNOTSUPP)
			return op_end(&op, ret);
	}
	n = copy_bytes(f, &op, src, off_in, dst, off_out, len);
	ret = op_end(&op, n < 0 ? (int)n : 0);
	return ret ? ret : n;
}
