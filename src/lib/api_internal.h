/*
 * Shared by the api*.c files only: the public handle's layout and its lock.
 */
#ifndef UBTRFS_API_INTERNAL_H
#define UBTRFS_API_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include <ubtrfs/ubtrfs.h>

struct ubt_fs;
struct ubt_ns;
struct ubt_trans;
struct ubt_inuse;

struct ubtrfs_fs {
	struct ubt_fs *fs;
	bool readonly;
	/*
	 * One writer at a time: every read call holds `lock` shared; every
	 * write call holds `wlock`, then `lock` exclusively, so readers never
	 * see half an operation.  A commit keeps `wlock` but lets go of `lock`
	 * while its blocks and superblocks go to the devices (the state being
	 * written is the state readers see, and no writer changes it), so
	 * reads go on during the device writes and flushes.  Order: wlock,
	 * then lock.  (glibc's default rwlock prefers readers, so a read call
	 * may nest another read call.)
	 */
	pthread_mutex_t wlock;
	pthread_rwlock_t lock;
	/* Called before this thread waits (ubtrfs_set_block_hook). */
	ubtrfs_block_fn block_hook;
	void *block_ctx;
	/* Called once when a write call ends with the transaction aborted
	 * (ubtrfs_set_abort_hook); abort_told: it was. */
	ubtrfs_abort_fn abort_hook;
	void *abort_ctx;
	bool abort_told;
	/* Writable handles (api_write.c): namespace state and the running
	 * transaction, started by the first write, ended by ubtrfs_commit. */
	struct ubt_ns *ns;
	struct ubt_trans *trans;
	unsigned nops;			/* operations in the running transaction */
	/* Inodes in use by the caller (ubtrfs_ref), for orphans: api_write.c. */
	struct ubt_inuse *inuse;
	/*
	 * Held-back appends (api_write.c, "held-back appends"): small writes
	 * that each continue the one before at a file's end, joined into one
	 * engine write, made before any other call sees the filesystem.  len 0:
	 * none.  Changed only under `lock` held exclusively; read calls look at
	 * len under it shared and have it written first (ubt_api_rdlock).
	 */
	struct {
		uint64_t subvol, ino, off;
		size_t len, cap;
		unsigned char *buf;
		uint64_t now_sec;	/* the last write's time: mtime and ctime */
		uint32_t now_nsec;
	} held;
};

static inline void ubt_api_will_block(ubtrfs_fs *f)
{
	if (f->block_hook)
		f->block_hook(f->block_ctx);
}
/* A read call from inside a write call (a callback or hook breaking its
 * contract): going on would let go of the writer's lock. */
void ubt_api_lock_misuse(void) __attribute__((noreturn));

/* Write held-back appends now (api_write.c): takes the write locks,
 * returns with the read lock held.  0, or the error the write met (the
 * transaction is aborted then: the read goes on in the last commit). */
int ubt_api_write_held(ubtrfs_fs *f);

/* The read lock, without writing held-back appends first: for reads that
 * do not look at file sizes, data or times. */
static inline void ubt_api_rdlock_held(ubtrfs_fs *f)
{
	if (pthread_rwlock_tryrdlock(&f->lock)) {
		ubt_api_will_block(f);
		if (pthread_rwlock_rdlock(&f->lock) == EDEADLK)
			ubt_api_lock_misuse();
	}
}

/* The read lock, held-back appends written: a read sees every write that
 * returned.  (A nested read call finds none held back: no writer ran
 * since the outer call looked.)  Returns with the lock held in any case:
 * 0, or -EIO when it made a held-back write that failed (the write's own
 * error is logged; EIO as for any write-back error, never an answer such
 * as ENOENT that a caller could take for the state of a name).  The calls
 * that read what the write changed (a file's data, size, times, the names
 * of its directory) return it rather than the last commit's state without
 * a word; the others ignore it, with a (void). */
__attribute__((warn_unused_result)) static inline int ubt_api_rdlock(ubtrfs_fs *f)
{
	ubt_api_rdlock_held(f);
	if (f->held.len) {
		pthread_rwlock_unlock(&f->lock);
		return ubt_api_write_held(f) ? -EIO : 0;
	}
	return 0;
}
/* Write held-back appends and the delayed DIR_INDEX items (api_write.c),
 * as ubt_api_write_held; does any DIR_INDEX item wait (under the read
 * lock)? */
int ubt_api_write_all_pending(ubtrfs_fs *f);
bool ubt_api_index_pending(ubtrfs_fs *f);
/* ubt_api_rdlock for the calls that read directories' index items
 * (readdir): the delayed DIR_INDEX items are inserted first as well.  (A
 * tree dump finds subvolume trees through their ROOT_ITEMs, which only a
 * commit rewrites: it shows the last commit's trees either way.) */
__attribute__((warn_unused_result)) static inline int ubt_api_rdlock_all(ubtrfs_fs *f)
{
	ubt_api_rdlock_held(f);
	if (f->held.len || ubt_api_index_pending(f)) {
		pthread_rwlock_unlock(&f->lock);
		return ubt_api_write_all_pending(f) ? -EIO : 0;
	}
	return 0;
}
/* ubt_api_rdlock for the calls that read nothing a held-back write changes
 * (subvolumes, statfs, features, xattrs, symlinks, tree dumps): a failure
 * of the write is logged and turns the filesystem read-only; they answer
 * from the last commit. */
static inline void ubt_api_rdlock_noerr(ubtrfs_fs *f)
{
	int e = ubt_api_rdlock(f);
	(void)e;
}
static inline void ubt_api_unlock(ubtrfs_fs *f)
{
	pthread_rwlock_unlock(&f->lock);
}
/* Holding `lock` exclusively, the thread tells the tree-block cache it is
 * alone in it (ubt_tree_set_exclusive; api.c). */
void ubt_api_set_excl(ubtrfs_fs *f, bool on);

/* Writers: both locks (api_write.c). */
static inline void ubt_api_wrlock(ubtrfs_fs *f)
{
	if (pthread_mutex_trylock(&f->wlock)) {
		ubt_api_will_block(f);
		pthread_mutex_lock(&f->wlock);
	}
	if (pthread_rwlock_trywrlock(&f->lock)) {
		ubt_api_will_block(f);
		pthread_rwlock_wrlock(&f->lock);
	}
	ubt_api_set_excl(f, true);
}
/* The write call ends: tell the abort hook if the transaction is gone
 * (api_write.c). */
void ubt_api_tell_abort(ubtrfs_fs *f);
static inline void ubt_api_wrunlock(ubtrfs_fs *f)
{
	ubt_api_tell_abort(f);
	ubt_api_set_excl(f, false);
	pthread_rwlock_unlock(&f->lock);
	pthread_mutex_unlock(&f->wlock);
}

/* Unlocked versions for callers that hold the lock (api_fs.c). */
int ubt_api_stat(ubtrfs_fs *f, ubtrfs_ino id, struct ubtrfs_stat *out);
int ubt_api_lookup(ubtrfs_fs *f, ubtrfs_ino dir, const char *name, struct ubtrfs_stat *out);

/* api_write.c: set up / tear down the writer of a handle opened read-write. */
int ubt_api_write_init(ubtrfs_fs *f);
void ubt_api_write_close(ubtrfs_fs *f);

#endif
