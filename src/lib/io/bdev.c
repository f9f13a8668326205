/*
 * io layer: the generic block-device entry points and the two basic
 * implementations, a file (regular file or block device, pread/pwrite) and a
 * memory buffer.  Range checks live here, once, so implementations see only
 * in-bounds requests.
 */
#include "io.h"

#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/aio_abi.h>
#include <sys/syscall.h>
#endif

static bool range_ok(const struct ubt_bdev *bd, size_t len, uint64_t off)
{
	return off <= bd->size && len <= bd->size - off;
}

int ubt_bdev_read(struct ubt_bdev *bd, void *buf, size_t len, uint64_t off)
{
	if (!range_ok(bd, len, off))
		return -EIO;
	return bd->ops->read(bd, buf, len, off);
}

static _Atomic int64_t crash_budget = -1;
static _Atomic uint64_t write_count;

void ubt_bdev_crash_after(int64_t n)
{
	atomic_store(&crash_budget, n);
}

bool ubt_bdev_crashed(void)
{
	int64_t b = atomic_load(&crash_budget);
	return b >= 0 && atomic_load(&write_count) > (uint64_t)b;
}

uint64_t ubt_bdev_write_count(void)
{
	return atomic_load(&write_count);
}

int ubt_bdev_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off)
{
	if (bd->readonly)
		return -EROFS;
	if (!range_ok(bd, len, off))
		return -EIO;
	uint64_t nr = atomic_fetch_add(&write_count, 1) + 1;
	int64_t budget = atomic_load(&crash_budget);
	if (budget >= 0 && nr > (uint64_t)budget)
		return 0;	/* the simulated crash: this write never lands */
	if (ubt_wlog_active())
		return ubt_wlog_write(bd, buf, len, off);
	return bd->ops->write(bd, buf, len, off);
}

int ubt_bdev_flush(struct ubt_bdev *bd)
{
	if (bd->readonly)
		return 0;
	if (ubt_wlog_active())
		return ubt_wlog_flush(bd);
	return bd->ops->flush(bd);
}

static size_t page_size(void)
{
	static _Atomic size_t cached;
	size_t pg = atomic_load_explicit(&cached, memory_order_relaxed);

	if (!pg) {
		long v = sysconf(_SC_PAGESIZE);
		pg = v > 0 ? (size_t)v : 4096;
		atomic_store_explicit(&cached, pg, memory_order_relaxed);
	}
	return pg;
}

void ubt_map_willneed(const uint8_t *p, size_t len)
{
	size_t pg = page_size();
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uintptr_t b = ((uintptr_t)p + len + pg - 1) & ~(uintptr_t)(pg - 1);
	(void)posix_madvise((void *)a, (size_t)(b - a), POSIX_MADV_WILLNEED);
}

void ubt_bdev_drop_cached(struct ubt_bdev *bd, uint64_t off, size_t len)
{
	size_t pg = page_size();
	uint64_t a = (off + pg - 1) / pg * pg, b;

	/* Whole pages inside the range only: a neighbour's page stays. */
	if (!range_ok(bd, len, off) || off + len < a)
		return;
	b = (off + len) / pg * pg;
	if (b <= a)
		return;
	if (bd->ops->drop_cached)
		bd->ops->drop_cached(bd, a, (size_t)(b - a));
}

bool ubt_bdev_map_current(struct ubt_bdev *bd, uint64_t off, size_t len)
{
	return !bd->ops->map_current || bd->ops->map_current(bd, off, len);
}

void ubt_bdev_close(struct ubt_bdev *bd)
{
	if (!bd)
		return;
	bd->ops->destroy(bd);
	free(bd->name);
	free(bd);
}

/* ---- file ------------------------------------------------------------- */

/*
 * Writes to a file device are gathered in runs: a write that continues a
 * pending run (or lands inside it) is copied there; any other write first
 * writes out the run it replaces.  The host filesystem charges per call
 * and per page touched (measured on ext4: a 4 KiB pwrite 2.45 us, 0.96 us
 * per 4 KiB in 64 KiB calls), and the writes of a transaction come in
 * runs: new data extents one after another as they are allocated, the
 * dirty tree blocks of a commit sorted by address.  There are RUNS runs,
 * so that the two copies of a DUP block - one in each of two regions of
 * the device, written one after the other - each continue their own
 * (with one run, a commit of DUP metadata made two 16 KiB pwrites per
 * block).  Runs never overlap: a write joining one run first writes out
 * any other run it reaches into.
 *
 * Direct writes (Linux, where the host takes O_DIRECT on the file): a run
 * whose offset and length are multiples of DIO_ALIGN is written out with
 * O_DIRECT through Linux AIO, without waiting; its buffer goes with it
 * ("in flight", at most SLOTS at a time) and comes back for a later run
 * when the write completes.  So the data does not pass through the
 * host's page cache: no page to allocate, fill and write back per 4 KiB
 * (on a guest with free page reporting every fresh page costs ~3 us:
 * docs/PERFORMANCE.md), and the disk writes while the engine goes on.
 * Older bytes land first: two writes in flight never overlap (one to an
 * overlapping range waits for the first to complete), and every write
 * through the page cache (unaligned runs, writes too large for a run,
 * redone failures) waits for every write in flight - the host's pages and
 * folios may be larger than our blocks, and a page dirtied beside a
 * direct write could keep its range from being dropped from the cache
 * after it.  A write that fails or comes back short is made again through
 * the page cache before any later write-out that could overlap it, and
 * the device writes through the page cache from then on.  A fork waits for the writes in
 * flight (fork_prepare).  A device starts writing directly only once
 * DIRECT_AFTER bytes of runs have gone out through it: an AIO context
 * costs its process an RCU grace period when it goes (io_destroy, or the
 * exit: 30-40 ms here), which a short job - a mkfs, a snapshot, a small
 * commit - would pay for nothing (idle contexts are kept for the next
 * device: aio_take).  UBTRFS_DIRECT_WRITES=0 in the environment turns
 * direct writes off, =1 starts them at the first run (tests).
 *
 * Nothing reads around the runs and the writes in flight: a read that
 * touches them takes their bytes (newest last), and the mapping is not
 * used for a range they touch (ubt_bdev_map_current, for
 * ubt_volume_map).  A flush writes out every run and waits for every
 * write in flight before the fsync - so the superblock of a commit never
 * reaches the disk before the blocks it points to, as before.  A
 * write-out that fails keeps its bytes (reads still get them; the next
 * flush and the close try again, failed direct writes oldest first) and
 * the error: every later write and flush returns it, so the commit that
 * would rely on those bytes fails.
 */
#define PEND_MAX	((size_t)1 << 20)
#define RUNS		2
#define SLOTS		4
#define DIO_ALIGN	((uint64_t)4096)

/*
 * Write-behind: the host is asked to start writing back (not to wait for)
 * each contiguous stretch of WB_CHUNK bytes as soon as it has been
 * written through its page cache, so that the disk works while we go on
 * and a later fsync waits only for the tail.  Nothing changes in what is
 * durable when: the superblock still follows the fsync of everything
 * before it.  A stretch broken off shorter is left to the fsync.  Linux
 * only (sync_file_range); elsewhere the fsync writes everything, as
 * before.  Direct writes need none of it.
 */
#define WB_CHUNK	((uint64_t)4 << 20)
#define DIRECT_AFTER	((uint64_t)16 << 20)	/* bytes of runs before direct writes */

#if defined(__linux__) && defined(O_DIRECT) && defined(SYS_io_setup)
#define HAVE_DIRECT 1
#endif

struct wb {
	uint64_t off, len;		/* written, not yet handed to write-behind */
};

struct run {
	uint8_t *buf;			/* PEND_MAX bytes (DIO_ALIGN-aligned), once used */
	/* Changed under the lock; read without it to see whether a read
	 * touches the run at all (a read racing a write of the same bytes
	 * gets either, as with pwrite). */
	_Atomic uint64_t off;
	_Atomic size_t len;		/* 0: nothing pending */
	uint64_t used;			/* when last written to (the replaced run is the oldest) */
	struct wb wb;
};

/* A run written out directly: in flight until its completion is reaped;
 * failed (its write-out must be made again) when that write failed. */
struct slot {
	uint8_t *buf;			/* a run's buffer, or NULL */
	_Atomic uint64_t off;
	_Atomic size_t len;		/* 0: free (readers' view, as for runs) */
	uint64_t seq;			/* submission order */
	bool failed;
#ifdef HAVE_DIRECT
	struct iocb cb;
#endif
};

struct file_priv {
	int fd;
	int dfd;			/* O_DIRECT descriptor of the same file, or -1 */
	pthread_mutex_t lock;		/* the runs and slots */
	struct run run[RUNS];
	struct slot slot[SLOTS];
	unsigned busy;			/* slots in flight (not failed) */
	uint64_t ndirect;		/* direct writes submitted (ubt_bdev_direct_writes) */
	uint64_t direct_after;		/* bytes of runs to go out before direct writes */
	uint64_t runs_out;		/* bytes of runs gone out so far (up to direct_after) */
	uint64_t clock, seq;
	bool no_direct;			/* a direct write failed: page cache only */
	int pend_err;			/* a failed write-out (sticky) */
	struct wb wb_big;		/* large writes, made at once */
#ifdef HAVE_DIRECT
	aio_context_t aio;		/* made at the first direct write, 0 before */
	pid_t aio_pid;			/* by this process (a fork does not inherit it) */
	struct ubt_bdev *bd;		/* for fork_prepare */
	struct file_priv *dnext;	/* in direct_devs */
#endif
};

#ifdef HAVE_DIRECT
/*
 * Devices that may write directly, so that a fork (the daemon detaching
 * after the filesystem was opened) waits for their writes in flight: the
 * child cannot reap them, and one landing late could cover newer bytes.
 * fork_prepare holds every device's lock across the fork.
 */
static pthread_mutex_t direct_mu = PTHREAD_MUTEX_INITIALIZER;
static struct file_priv *direct_devs;
static pthread_once_t direct_once = PTHREAD_ONCE_INIT;

static void reap(struct ubt_bdev *bd, struct file_priv *fp, long min);

/* ubt_bdev_fault_direct: the fault set, and how many submissions (or
 * waits) are left before it. */
static _Atomic int fault_kind;
static _Atomic uint64_t fault_left;
static _Atomic bool fault_fired;

/* The fault to make at this submission of len bytes (wait: at this wait),
 * if any.  A short write is made of one of at least two blocks. */
static enum ubt_bdev_fault fault_take(bool wait, size_t len)
{
	int k = atomic_load_explicit(&fault_kind, memory_order_relaxed);

	if (k == UBT_BDEV_FAULT_NONE || (k == UBT_BDEV_FAULT_GETEVENTS) != wait)
		return UBT_BDEV_FAULT_NONE;
	if (k == UBT_BDEV_FAULT_SHORT && len < 2 * (size_t)DIO_ALIGN)
		return UBT_BDEV_FAULT_NONE;
	if (atomic_fetch_sub(&fault_left, 1) != 1)
		return UBT_BDEV_FAULT_NONE;
	atomic_store(&fault_kind, UBT_BDEV_FAULT_NONE);
	atomic_store(&fault_fired, true);
	return (enum ubt_bdev_fault)k;
}

static pthread_mutex_t aio_pool_mu;

static void fork_prepare(void)
{
	pthread_mutex_lock(&direct_mu);
	for (struct file_priv *fp = direct_devs; fp; fp = fp->dnext) {
		pthread_mutex_lock(&fp->lock);
		if (fp->busy)
			reap(fp->bd, fp, (long)fp->busy);
	}
	pthread_mutex_lock(&aio_pool_mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&aio_pool_mu);
	for (struct file_priv *fp = direct_devs; fp; fp = fp->dnext)
		pthread_mutex_unlock(&fp->lock);
	pthread_mutex_unlock(&direct_mu);
}

static void aio_pool_forget(void);

/* The child has none of the parent's AIO contexts (see aio_take). */
static void fork_child(void)
{
	aio_pool_forget();
	fork_parent();
}

static void direct_atfork(void)
{
	(void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/*
 * Idle AIO contexts of this process, kept for the next device opened:
 * io_destroy waits for an RCU grace period (30-40 ms measured here), which
 * every close - the end of every write command - would otherwise pay.  A
 * context is put here only with nothing in flight; the kernel frees what
 * is left at exit.  A fork's child has none of them (fork does not
 * inherit AIO contexts): entries of another process are dropped.
 */
#define AIO_POOL 4
static pthread_mutex_t aio_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static aio_context_t aio_pool[AIO_POOL];
static pid_t aio_pool_pid[AIO_POOL];

/* In a fork's child (aio_pool_mu held by fork_prepare). */
static void aio_pool_forget(void)
{
	memset(aio_pool, 0, sizeof(aio_pool));
}

/* A context for this process: an idle one kept, else a new one (0 and
 * errno set when io_setup fails). */
static aio_context_t aio_take(void)
{
	aio_context_t ctx = 0;
	pid_t me = getpid();

	pthread_mutex_lock(&aio_pool_mu);
	for (int i = 0; i < AIO_POOL && !ctx; i++) {
		if (aio_pool[i] && aio_pool_pid[i] == me)
			ctx = aio_pool[i];
		if (aio_pool[i] && (ctx || aio_pool_pid[i] != me))
			aio_pool[i] = 0;
	}
	pthread_mutex_unlock(&aio_pool_mu);
	if (!ctx && syscall(SYS_io_setup, (long)SLOTS, &ctx) < 0)
		ctx = 0;
	return ctx;
}

/* Done with an idle context of this process: kept, or destroyed when the
 * pool is full. */
static void aio_give(aio_context_t ctx)
{
	pid_t me = getpid();
	bool kept = false;

	pthread_mutex_lock(&aio_pool_mu);
	for (int i = 0; i < AIO_POOL && !kept; i++) {
		if (!aio_pool[i] || aio_pool_pid[i] != me) {
			aio_pool[i] = ctx;
			aio_pool_pid[i] = me;
			kept = true;
		}
	}
	pthread_mutex_unlock(&aio_pool_mu);
	if (!kept)
		(void)syscall(SYS_io_destroy, ctx);
}
#endif

/* [off, off + len) was just written to the file through the page cache
 * (locked); w is the stretch that write may continue. */
static void wb_note(struct file_priv *fp, struct wb *w, uint64_t off, size_t len)
{
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
	if (!w->len || off != w->off + w->len) {
		w->off = off;
		w->len = 0;
	}
	w->len += len;
	if (w->len >= WB_CHUNK) {
		/* Advisory: an error here also shows at the fsync, which
		 * is where it counts. */
		(void)sync_file_range(fp->fd, (off_t)w->off, (off_t)w->len, SYNC_FILE_RANGE_WRITE);
		w->len = 0;
	}
#else
	(void)fp;
	(void)w;
	(void)off;
	(void)len;
#endif
}

static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static bool overlaps(uint64_t a, size_t alen, uint64_t b, size_t blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

static bool run_touches(struct run *r, uint64_t off, size_t len)
{
	size_t rl = atomic_load(&r->len);

	return overlaps(atomic_load(&r->off), rl, off, len);
}

static bool slot_touches(struct slot *s, uint64_t off, size_t len)
{
	size_t sl = atomic_load(&s->len);

	return overlaps(atomic_load(&s->off), sl, off, len);
}

/* Does [off, off + len) touch a run or a write in flight?  Runs first: a
 * run going out becomes a slot before it stops being a run. */
static bool pend_touches(struct file_priv *fp, uint64_t off, size_t len)
{
	for (int i = 0; i < RUNS; i++)
		if (run_touches(&fp->run[i], off, len))
			return true;
	for (int i = 0; i < SLOTS; i++)
		if (slot_touches(&fp->slot[i], off, len))
			return true;
	return false;
}

static uint8_t *run_buffer(void)
{
	return aligned_alloc((size_t)DIO_ALIGN, PEND_MAX);
}

/* Write gathered bytes to the file through the page cache; a failure is
 * logged (the error may reach a later, unrelated call) and kept. */
static int gathered_out(struct ubt_bdev *bd, struct file_priv *fp, const uint8_t *buf,
			size_t len, uint64_t off)
{
	int ret = pwrite_all(fp->fd, buf, len, off);

	if (ret) {
		ubt_log(UBT_LOG_ERROR, "%s: writing %zu gathered bytes at offset %llu failed: %s",
			bd->name, len, (unsigned long long)off, ubt_strerror(ret));
		if (!fp->pend_err)
			fp->pend_err = ret;
	}
	return ret;
}

/* Write a failed slot's bytes again, through the page cache (locked; no
 * direct write is in flight: see retry_failed). */
static int slot_retry(struct ubt_bdev *bd, struct file_priv *fp, struct slot *s)
{
	size_t len = atomic_load(&s->len);
	int ret = gathered_out(bd, fp, s->buf, len, atomic_load(&s->off));

	if (ret)
		return ret;
	s->failed = false;
	atomic_store(&s->len, 0);
	return 0;
}

#ifdef HAVE_DIRECT
/* A direct write came back with res (bytes or -errno); locked.  One that
 * failed or fell short is to be made again through the page cache
 * (retry_failed, before any other write-out); from then on this device
 * writes through the page cache only. */
static void slot_done(struct ubt_bdev *bd, struct file_priv *fp, struct slot *s, int64_t res)
{
	size_t len = atomic_load(&s->len);

	fp->busy--;
	if (res == (int64_t)len) {
		atomic_store(&s->len, 0);
		return;
	}
	char what[64];
	if (res < 0)
		snprintf(what, sizeof(what), "failed: %s", ubt_strerror((int)res));
	else
		snprintf(what, sizeof(what), "came back short (%lld bytes)", (long long)res);
	ubt_log(UBT_LOG_WARNING, "%s: direct write of %zu bytes at offset %llu %s; writing "
		"through the page cache from now on", bd->name, len,
		(unsigned long long)atomic_load(&s->off), what);
	fp->no_direct = true;
	s->failed = true;
}

/* Every write in flight is to be made again: the context is gone (a fork
 * that did not go through fork_prepare) or io_getevents fails.  In this
 * process's own context io_destroy first waits for them all, so none
 * lands after what follows. */
static void abandon_inflight(struct ubt_bdev *bd, struct file_priv *fp)
{
	if (fp->aio && fp->aio_pid == getpid())
		(void)syscall(SYS_io_destroy, fp->aio);
	fp->aio = 0;
	for (int i = 0; i < SLOTS; i++)
		if (atomic_load(&fp->slot[i].len))
			fp->slot[i].failed = true;
	fp->busy = 0;
	fp->no_direct = true;
	ubt_log(UBT_LOG_ERROR, "%s: direct writes abandoned; writing through the page cache",
		bd->name);
}

/* Reap completed direct writes: at least min of them (waiting). */
static void reap(struct ubt_bdev *bd, struct file_priv *fp, long min)
{
	struct io_event ev[SLOTS];

	if (fp->busy && fp->aio_pid != getpid()) {
		abandon_inflight(bd, fp);
		return;
	}
	while (fp->busy) {
		long n;
		if (fault_take(true, 0) == UBT_BDEV_FAULT_GETEVENTS) {
			errno = EINVAL;
			n = -1;
		} else {
			n = syscall(SYS_io_getevents, fp->aio, min, (long)SLOTS, ev, NULL);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ubt_log(UBT_LOG_ERROR, "%s: io_getevents: %s", bd->name, strerror(errno));
			abandon_inflight(bd, fp);
			return;
		}
		for (long i = 0; i < n; i++)
			slot_done(bd, fp, (struct slot *)(uintptr_t)ev[i].data, (int64_t)ev[i].res);
		if (n >= min)
			return;
		min -= n;
	}
}
#endif

/* Wait until no write in flight touches [off, off + len) (locked). */
static void wait_overlap(struct ubt_bdev *bd, struct file_priv *fp, uint64_t off, size_t len)
{
#ifdef HAVE_DIRECT
	for (;;) {
		bool any = false;
		for (int i = 0; i < SLOTS && !any; i++)
			any = !fp->slot[i].failed && slot_touches(&fp->slot[i], off, len);
		if (!any || !fp->busy)
			return;
		reap(bd, fp, 1);
	}
#else
	(void)bd;
	(void)fp;
	(void)off;
	(void)len;
#endif
}

/*
 * Wait for every write in flight (locked).  Before any write through the
 * page cache: the host's page cache works in pages and folios larger than
 * our 4 KiB blocks, and a page dirtied next to a direct write in flight
 * could keep that write's range from being dropped from the cache after
 * it - stale bytes for later reads.
 */
static void wait_all(struct ubt_bdev *bd, struct file_priv *fp)
{
#ifdef HAVE_DIRECT
	if (fp->busy)
		reap(bd, fp, (long)fp->busy);
#else
	(void)bd;
	(void)fp;
#endif
}

/* Write the failed slots again, oldest first (locked). */
static int retry_failed(struct ubt_bdev *bd, struct file_priv *fp)
{
	for (bool waited = false;;) {
		struct slot *old = NULL;
		for (int i = 0; i < SLOTS; i++)
			if (fp->slot[i].failed && (!old || fp->slot[i].seq < old->seq))
				old = &fp->slot[i];
		if (!old)
			return 0;
		if (!waited) {
			/* The rest complete (or fail) first. */
			wait_all(bd, fp);
			waited = true;
			continue;
		}
		int ret = slot_retry(bd, fp, old);
		if (ret)
			return ret;
	}
}

#ifdef HAVE_DIRECT
/* Hand run r to a direct write; false if it must go through the page
 * cache instead (locked). */
static bool run_direct(struct ubt_bdev *bd, struct file_priv *fp, struct run *r)
{
	size_t len = atomic_load(&r->len);
	uint64_t off = atomic_load(&r->off);
	struct slot *s = NULL;

	if (fp->dfd < 0 || fp->no_direct || off % DIO_ALIGN || len % DIO_ALIGN)
		return false;
	if (fp->runs_out < fp->direct_after) {
		fp->runs_out += len;	/* a short job: no AIO context yet */
		return false;
	}
	if (fp->busy)
		reap(bd, fp, 0);
	if (!fp->aio || fp->aio_pid != getpid()) {
		aio_context_t ctx = fp->no_direct ? 0 : aio_take();
		if (!ctx) {
			fp->no_direct = true;
			return false;
		}
		fp->aio = ctx;
		fp->aio_pid = getpid();
	}
	for (;;) {
		struct slot *old = NULL;
		for (int i = 0; i < SLOTS && !s; i++) {
			struct slot *c = &fp->slot[i];
			if (c->failed)
				continue;
			if (!atomic_load(&c->len))
				s = c;
			else if (!old || c->seq < old->seq)
				old = c;
		}
		if (s || !old || !fp->busy)
			break;
		reap(bd, fp, 1);	/* every slot in flight: wait for one */
	}
	/* A write that failed meanwhile goes first, through the page cache. */
	if (!s || fp->no_direct)
		return false;
	/* The slot takes the run's buffer, the run the slot's (or none). */
	uint8_t *spare = s->buf;
	s->buf = r->buf;
	memset(&s->cb, 0, sizeof(s->cb));
	s->cb.aio_data = (uint64_t)(uintptr_t)s;
	s->cb.aio_lio_opcode = IOCB_CMD_PWRITE;
	s->cb.aio_fildes = (uint32_t)fp->dfd;
	s->cb.aio_buf = (uint64_t)(uintptr_t)s->buf;
	s->cb.aio_nbytes = len;
	s->cb.aio_offset = (int64_t)off;
	switch (fault_take(false, len)) {
	case UBT_BDEV_FAULT_SHORT:
		s->cb.aio_nbytes = len / 2 / DIO_ALIGN * DIO_ALIGN;
		break;
	case UBT_BDEV_FAULT_LOST:
		s->cb.aio_nbytes = 0;
		break;
	default:
		break;
	}
	struct iocb *cbp = &s->cb;
	atomic_store(&s->off, off);
	atomic_store(&s->len, len);
	long n;
	do
		n = syscall(SYS_io_submit, fp->aio, 1L, &cbp);
	while (n < 0 && errno == EINTR);
	if (n != 1) {
		atomic_store(&s->len, 0);
		r->buf = s->buf;
		s->buf = spare;
		fp->no_direct = true;
		return false;
	}
	s->seq = ++fp->seq;
	fp->busy++;
	fp->ndirect++;
	r->buf = spare;
	r->wb.len = 0;
	return true;
}
#endif

/* Write out run r (kept when that fails: logged, since the error reaches
 * a later, unrelated call).  Locked.  Older bytes first: writes in flight
 * over the same range complete, failed ones are made again. */
static int run_out(struct ubt_bdev *bd, struct file_priv *fp, struct run *r)
{
	size_t len = atomic_load(&r->len);

	if (!len)
		return 0;
	uint64_t off = atomic_load(&r->off);
	wait_overlap(bd, fp, off, len);
	int ret = retry_failed(bd, fp);
	if (ret)
		return ret;
#ifdef HAVE_DIRECT
	if (run_direct(bd, fp, r)) {
		atomic_store(&r->len, 0);
		return 0;
	}
	ret = retry_failed(bd, fp);
	if (ret)
		return ret;
#endif
	wait_all(bd, fp);
	ret = gathered_out(bd, fp, r->buf, len, off);
	if (ret)
		return ret;
	wb_note(fp, &r->wb, off, len);
	atomic_store(&r->len, 0);
	return 0;
}

/* Write out every run except keep that touches [off, off + len). */
static int runs_out_touching(struct ubt_bdev *bd, struct file_priv *fp, const struct run *keep,
			     uint64_t off, size_t len)
{
	for (int i = 0; i < RUNS; i++) {
		struct run *r = &fp->run[i];
		if (r != keep && run_touches(r, off, len)) {
			int ret = run_out(bd, fp, r);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Every run written out and every direct write completed (locked); the
 * first error, after trying every run. */
static int all_out(struct ubt_bdev *bd, struct file_priv *fp)
{
	int ret = retry_failed(bd, fp);

	for (int i = 0; i < RUNS; i++) {
		int r = run_out(bd, fp, &fp->run[i]);
		if (!ret)
			ret = r;
	}
	wait_all(bd, fp);
	int r = retry_failed(bd, fp);
	return ret ? ret : r;
}

static int pread_all(int fd, uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;	/* device shrank under us */
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Copy the bytes of [boff, boff + blen) held in src into buf, which holds
 * [off, off + len). */
static void overlay(uint8_t *buf, uint64_t off, size_t len, const uint8_t *src, uint64_t boff,
		    size_t blen)
{
	uint64_t a = UBT_MAX(off, boff), b = UBT_MIN(off + len, boff + blen);

	if (a < b)
		memcpy(buf + (a - off), src + (a - boff), (size_t)(b - a));
}

static int file_read(struct ubt_bdev *bd, void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = bd->priv;

	if (!pend_touches(fp, off, len))
		return pread_all(fp->fd, buf, len, off);
	pthread_mutex_lock(&fp->lock);
	/* The file's bytes, then over them the writes in flight (and
	 * failed) from oldest to newest, then the runs (newer still, and
	 * not overlapping each other). */
	int ret = pread_all(fp->fd, buf, len, off);
	uint64_t after = 0;
	for (;;) {
		struct slot *next = NULL;
		for (int i = 0; i < SLOTS; i++) {
			struct slot *s = &fp->slot[i];
			if (atomic_load(&s->len) && s->seq > after && (!next || s->seq < next->seq))
				next = s;
		}
		if (!next)
			break;
		overlay(buf, off, len, next->buf, atomic_load(&next->off), atomic_load(&next->len));
		after = next->seq;
	}
	for (int i = 0; i < RUNS; i++)
		overlay(buf, off, len, fp->run[i].buf, atomic_load(&fp->run[i].off),
			atomic_load(&fp->run[i].len));
	pthread_mutex_unlock(&fp->lock);
	return ret;
}

/* The run a write of [off, off + len) continues or lands inside, if any. */
static struct run *run_joined(struct file_priv *fp, uint64_t off, size_t len)
{
	for (int i = 0; i < RUNS; i++) {
		struct run *r = &fp->run[i];
		size_t rl = atomic_load(&r->len);
		uint64_t ro = atomic_load(&r->off);
		if (rl && off >= ro && off - ro <= rl && off - ro + len <= PEND_MAX)
			return r;
	}
	return NULL;
}

/* The run a write that joins none replaces: an empty one, else the one it
 * follows (full), else the one least recently written to. */
static struct run *run_victim(struct file_priv *fp, uint64_t off)
{
	struct run *v = NULL;

	for (int i = 0; i < RUNS; i++) {
		struct run *r = &fp->run[i];
		size_t rl = atomic_load(&r->len);
		if (!rl)
			return r;
		if (atomic_load(&r->off) + rl == off)
			return r;
		if (!v || r->used < v->used)
			v = r;
	}
	return v;
}

static int file_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = bd->priv;
	struct run *r;
	int ret = 0;

	pthread_mutex_lock(&fp->lock);
	if (fp->pend_err) {
		ret = fp->pend_err;
		goto out;
	}
	if (len <= PEND_MAX && (r = run_joined(fp, off, len)) != NULL) {
		/* Continues the run, or rewrites (and maybe extends) part of
		 * it: another run it reaches into goes out first. */
		ret = runs_out_touching(bd, fp, r, off, len);
		if (ret)
			goto out;
		size_t at = (size_t)(off - atomic_load(&r->off));
		memcpy(r->buf + at, buf, len);
		if (at + len > atomic_load(&r->len))
			atomic_store(&r->len, at + len);
		r->used = ++fp->clock;
		goto out;
	}
	r = len <= PEND_MAX ? run_victim(fp, off) : NULL;
	if (r) {
		ret = run_out(bd, fp, r);
		if (!ret)
			ret = runs_out_touching(bd, fp, r, off, len);
		if (ret)
			goto out;
		if (!r->buf)
			r->buf = run_buffer();
		if (r->buf) {
			memcpy(r->buf, buf, len);
			atomic_store(&r->off, off);
			atomic_store(&r->len, len);
			r->used = ++fp->clock;
			goto out;
		}
	}
	/* Too large for a run (or no memory for one): at once, after
	 * whatever it overlaps - and, as every write through the page
	 * cache, after every write in flight (wait_all) and every failed
	 * one, whose error it then returns. */
	ret = runs_out_touching(bd, fp, NULL, off, len);
	if (!ret) {
		wait_all(bd, fp);
		ret = retry_failed(bd, fp);
	}
	if (!ret)
		ret = fp->pend_err;
	if (ret)
		goto out;
	ret = pwrite_all(fp->fd, buf, len, off);
	if (ret)
		ubt_log(UBT_LOG_ERROR, "%s: writing %zu bytes at offset %llu failed: %s", bd->name,
			len, (unsigned long long)off, ubt_strerror(ret));
	else
		wb_note(fp, &fp->wb_big, off, len);
out:
	pthread_mutex_unlock(&fp->lock);
	return ret;
}

/*
 * The file's data on stable storage.  fdatasync where there is one: the
 * image's own times need not be durable, and an overwrite of blocks the
 * file already has (a commit's superblocks) then costs the host no journal
 * commit.  macOS's fsync leaves the drive's cache unflushed; F_FULLFSYNC
 * flushes it (fsync where the filesystem does not support it).  The data
 * of completed direct writes is covered: they reached the device, and
 * the fsync flushes its cache and the file's block allocations.
 */
static int sync_fd(int fd)
{
#if defined(__APPLE__)
	if (fcntl(fd, F_FULLFSYNC) == 0)
		return 0;
	return fsync(fd) < 0 ? -errno : 0;
#elif defined(_POSIX_SYNCHRONIZED_IO) && _POSIX_SYNCHRONIZED_IO > 0
	return fdatasync(fd) < 0 ? -errno : 0;
#else
	return fsync(fd) < 0 ? -errno : 0;
#endif
}

static int file_flush(struct ubt_bdev *bd)
{
	struct file_priv *fp = bd->priv;

	pthread_mutex_lock(&fp->lock);
	int ret = all_out(bd, fp);
	if (!ret)
		ret = fp->pend_err;
	pthread_mutex_unlock(&fp->lock);
	if (ret)
		return ret;
	return sync_fd(fp->fd);
}

static bool file_map_current(struct ubt_bdev *bd, uint64_t off, size_t len)
{
	struct file_priv *fp = bd->priv;

	return !pend_touches(fp, off, len);
}

/*
 * Let the host drop its cache of [off, off + len) of the file: unmap, then
 * drop (the host keeps a page that is still mapped).  On the file's shared
 * mapping MADV_DONTNEED only takes the pages out of our page tables -
 * never call this for a memory device's buffer, which it would zero.
 * Linux's MADV_DONTNEED: glibc's POSIX_MADV_DONTNEED does nothing.
 * Clean pages only go: Linux starts writeback of dirty ones without
 * waiting and leaves them, and pages under writeback, cached.
 */
static void file_drop_cached(struct ubt_bdev *bd, uint64_t off, size_t len)
{
#ifdef POSIX_FADV_DONTNEED
	struct file_priv *fp = bd->priv;

#ifdef MADV_DONTNEED
	if (bd->map)	/* ubt_bdev_drop_cached checked the range */
		(void)madvise((void *)(uintptr_t)(bd->map + off), len, MADV_DONTNEED);
#endif
	(void)posix_fadvise(fp->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
#else
	(void)bd;
	(void)off;
	(void)len;
#endif
}

static void file_destroy(struct ubt_bdev *bd)
{
	struct file_priv *fp = bd->priv;

	pthread_mutex_lock(&fp->lock);
	(void)all_out(bd, fp);		/* a failure is logged there */
	pthread_mutex_unlock(&fp->lock);
#ifdef HAVE_DIRECT
	if (fp->dfd >= 0) {
		pthread_mutex_lock(&direct_mu);
		for (struct file_priv **pp = &direct_devs; *pp; pp = &(*pp)->dnext) {
			if (*pp == fp) {
				*pp = fp->dnext;
				break;
			}
		}
		pthread_mutex_unlock(&direct_mu);
	}
#endif
	if (bd->map)
		munmap((void *)(uintptr_t)bd->map, (size_t)bd->size);
#ifdef HAVE_DIRECT
	/* all_out waited for every write in flight (or abandoned them,
	 * destroying the context): an idle context goes back to the pool. */
	if (fp->aio && fp->aio_pid == getpid()) {
		if (fp->busy)
			(void)syscall(SYS_io_destroy, fp->aio);
		else
			aio_give(fp->aio);
	}
#endif
	if (fp->dfd >= 0)
		close(fp->dfd);
	close(fp->fd);
	pthread_mutex_destroy(&fp->lock);
	for (int i = 0; i < RUNS; i++)
		free(fp->run[i].buf);
	for (int i = 0; i < SLOTS; i++)
		free(fp->slot[i].buf);
	free(fp);
}

static const struct ubt_bdev_ops file_ops = {
	.read = file_read,
	.write = file_write,
	.flush = file_flush,
	.map_current = file_map_current,
	.drop_cached = file_drop_cached,
	.destroy = file_destroy,
};

unsigned ubt_bdev_direct_inflight(struct ubt_bdev *bd)
{
	if (bd->ops != &file_ops)
		return 0;
	struct file_priv *fp = bd->priv;
	pthread_mutex_lock(&fp->lock);
	unsigned n = fp->busy;
	pthread_mutex_unlock(&fp->lock);
	return n;
}

void ubt_bdev_fault_direct(enum ubt_bdev_fault kind, uint64_t n)
{
#ifdef HAVE_DIRECT
	if (n == 0)
		kind = UBT_BDEV_FAULT_NONE;
	atomic_store(&fault_kind, UBT_BDEV_FAULT_NONE);
	atomic_store(&fault_fired, false);
	atomic_store(&fault_left, n);
	atomic_store(&fault_kind, (int)kind);
#else
	(void)kind;
	(void)n;
#endif
}

bool ubt_bdev_fault_fired(void)
{
#ifdef HAVE_DIRECT
	return atomic_load(&fault_fired);
#else
	return false;
#endif
}

uint64_t ubt_bdev_direct_writes(struct ubt_bdev *bd)
{
	if (bd->ops != &file_ops)
		return 0;
	struct file_priv *fp = bd->priv;
	pthread_mutex_lock(&fp->lock);
	uint64_t n = fp->ndirect;
	pthread_mutex_unlock(&fp->lock);
	return n;
}

/*
 * The device's flock (io.h).  udev holds a shared lock on a whole disk
 * for a moment after a writer closes it, so a block device gets a second
 * of retries; a filesystem that cannot lock (ENOLCK, EOPNOTSUPP: some
 * network filesystems) is used unlocked, with a warning.
 */
static int lock_device(int fd, const char *path, bool shared, bool blockdev)
{
	for (int tries = 0;; tries++) {
		if (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
			return 0;
		if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) {
			ubt_log(UBT_LOG_WARNING, "%s: cannot be locked (%s); nothing keeps a "
				"second writer out", path, strerror(errno));
			return 0;
		}
		if (errno != EWOULDBLOCK)
			return -errno;
		if (!blockdev || tries >= 20)
			return -EBUSY;
		usleep(50000);
	}
}

/*
 * The O_DIRECT descriptor for direct writes ("Direct writes" above; the
 * AIO context comes with the first of them, in the process that makes
 * it), where the host offers them: a second open of the
 * same file (checked: same device and inode), without O_EXCL, which a
 * block device held exclusively by our first descriptor would refuse.
 */
static void open_direct(const char *path, const struct stat *st, struct ubt_bdev *bd,
			struct file_priv *fp)
{
#ifdef HAVE_DIRECT
	const char *e = getenv("UBTRFS_DIRECT_WRITES");
	struct stat dst;

	if (e && !strcmp(e, "0"))
		return;
	fp->direct_after = e && !strcmp(e, "1") ? 0 : DIRECT_AFTER;
	int dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (dfd < 0)
		return;
	if (fstat(dfd, &dst) < 0 || dst.st_dev != st->st_dev || dst.st_ino != st->st_ino) {
		close(dfd);
		return;
	}
	fp->dfd = dfd;
	fp->bd = bd;
	pthread_once(&direct_once, direct_atfork);
	pthread_mutex_lock(&direct_mu);
	fp->dnext = direct_devs;
	direct_devs = fp;
	pthread_mutex_unlock(&direct_mu);
#else
	(void)path;
	(void)st;
	(void)bd;
	(void)fp;
#endif
}

int ubt_bdev_open_file(const char *path, unsigned flags, struct ubt_bdev **out)
{
	bool ro = flags & UBT_BDEV_RDONLY;
	struct ubt_bdev *bd = NULL;
	struct file_priv *fp = NULL;
	struct stat st;
	int fd, ret;

	*out = NULL;
	int oflags = (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
#ifdef __linux__
	/* A block device opened O_EXCL fails with EBUSY while mounted. */
	if (!ro && stat(path, &st) == 0 && S_ISBLK(st.st_mode))
		oflags |= O_EXCL;
#endif
	fd = open(path, oflags);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto fail;
	}
	if (!ro || (flags & UBT_BDEV_LOCK_SHARED)) {
		ret = lock_device(fd, path, ro, S_ISBLK(st.st_mode));
		if (ret)
			goto fail;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISCHR(st.st_mode)) {
		ret = -ENODEV;
		goto fail;
	}
	/* lseek(SEEK_END) gives the size of regular files and of block
	 * devices on Linux and the BSDs alike. */
	off_t end = lseek(fd, 0, SEEK_END);
	if (end < 0) {
		ret = -errno;
		goto fail;
	}
	bd = calloc(1, sizeof(*bd));
	fp = calloc(1, sizeof(*fp));
	if (!bd || !fp || !(bd->name = strdup(path))) {
		ret = -ENOMEM;
		goto fail;
	}
	fp->fd = fd;
	fp->dfd = -1;
	pthread_mutex_init(&fp->lock, NULL);
	if (!ro)
		open_direct(path, &st, bd, fp);
	bd->ops = &file_ops;
	bd->size = (uint64_t)end;
	bd->readonly = ro;
	bd->priv = fp;
	/* Best effort: without a mapping every read goes through pread.
	 * The mapping keeps the kernel's default fault read-around: the
	 * data path (fs/file_read.c) relies on it for sequential streams and
	 * prefetches every other read exactly, so those fault in nothing
	 * more.  MADV_RANDOM would cost the streams their large-folio
	 * read-ahead (measured: 0.75 instead of 0.46 s of daemon CPU per
	 * GiB read sequentially, docs/PERFORMANCE.md). */
	if (bd->size > 0 && bd->size <= SIZE_MAX) {
		void *m = mmap(NULL, (size_t)bd->size, PROT_READ, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED)
			bd->map = m;
	}
	*out = bd;
	return 0;
fail:
	if (bd)
		free(bd->name);
	free(bd);
	free(fp);
	close(fd);
	return ret;
}

/* ---- memory ----------------------------------------------------------- */

static int mem_read(struct ubt_bdev *bd, void *buf, size_t len, uint64_t off)
{
	memcpy(buf, (uint8_t *)bd->priv + off, len);
	return 0;
}

static int mem_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off)
{
	memcpy((uint8_t *)bd->priv + off, buf, len);
	return 0;
}

static int mem_flush(struct ubt_bdev *bd)
{
	(void)bd;
	return 0;
}

static void mem_destroy(struct ubt_bdev *bd)
{
	free(bd->priv);
}

static const struct ubt_bdev_ops mem_ops = {
	.read = mem_read,
	.write = mem_write,
	.flush = mem_flush,
	.destroy = mem_destroy,
};

int ubt_bdev_open_memory(uint64_t size, const void *init, size_t init_len, unsigned flags,
			 struct ubt_bdev **out)
{
	struct ubt_bdev *bd;

	*out = NULL;
	if (init && init_len > size)
		return -EINVAL;
	if (size > SIZE_MAX)
		return -ENOMEM;
	bd = calloc(1, sizeof(*bd));
	if (!bd)
		return -ENOMEM;
	bd->priv = calloc(1, (size_t)size ? (size_t)size : 1);
	bd->name = strdup("memory");
	if (!bd->priv || !bd->name) {
		free(bd->priv);
		free(bd->name);
		free(bd);
		return -ENOMEM;
	}
	if (init)
		memcpy(bd->priv, init, init_len);
	bd->ops = &mem_ops;
	bd->size = size;
	bd->map = bd->priv;
	bd->readonly = flags & UBT_BDEV_RDONLY;
	*out = bd;
	return 0;
}

uint8_t *ubt_bdev_memory_data(struct ubt_bdev *bd)
{
	return bd->ops == &mem_ops ? bd->priv : NULL;
}
