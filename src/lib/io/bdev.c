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
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
 * Writes to a file device are gathered: a write that continues the
 * pending run (or lands inside it) is copied there, anything else first
 * writes the run out with one pwrite.  The host filesystem charges per
 * call and per page touched (measured on ext4: a 4 KiB pwrite 2.45 us,
 * 0.96 us per 4 KiB in 64 KiB calls), and the writes of a transaction come
 * in runs: new data extents one after another as they are allocated, the
 * dirty tree blocks of a commit sorted by address.
 *
 * Nothing reads around the run: a read that touches it takes those bytes
 * from it, and the mapping is not used for a range it touches
 * (ubt_bdev_map_current, for ubt_volume_map).  A flush writes the run
 * before the fsync - so the superblock of a commit never reaches the disk
 * before the blocks it points to, as before.  A write-out that fails
 * keeps the run (reads still get its bytes; the next write-out tries
 * again) and the error: every later write and flush returns it, so the
 * commit that would rely on those bytes fails.
 */
#define PEND_MAX	((size_t)1 << 20)

/*
 * Write-behind: the host is asked to start writing back (not to wait for)
 * each contiguous stretch of WB_CHUNK bytes as soon as it has been
 * written, so that the disk works while we go on and a later fsync waits
 * only for the tail.  Nothing changes in what is durable when: the
 * superblock still follows the fsync of everything before it.  A
 * stretch broken off shorter is left to the fsync.  Linux only
 * (sync_file_range); elsewhere the fsync writes everything, as before.
 */
#define WB_CHUNK	((uint64_t)4 << 20)

struct file_priv {
	int fd;
	pthread_mutex_t lock;		/* the pending run */
	uint8_t *pend;			/* PEND_MAX bytes, once the first run starts */
	/* Changed under the lock; read without it to see whether a read
	 * touches the run at all (a read racing a write of the same bytes
	 * gets either, as with pwrite). */
	_Atomic uint64_t pend_off;
	_Atomic size_t pend_len;	/* 0: nothing pending */
	int pend_err;			/* a failed write-out (sticky) */
	uint64_t wb_off, wb_len;	/* written, not yet handed to write-behind */
};

/* [off, off + len) was just written to the file (locked). */
static void wb_note(struct file_priv *fp, uint64_t off, size_t len)
{
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
	if (!fp->wb_len || off != fp->wb_off + fp->wb_len) {
		fp->wb_off = off;
		fp->wb_len = 0;
	}
	fp->wb_len += len;
	if (fp->wb_len >= WB_CHUNK) {
		/* Advisory: an error here also shows at the fsync, which
		 * is where it counts. */
		(void)sync_file_range(fp->fd, (off_t)fp->wb_off, (off_t)fp->wb_len,
				      SYNC_FILE_RANGE_WRITE);
		fp->wb_len = 0;
	}
#else
	(void)fp;
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

/* Write out the pending run (kept when that fails: logged, since the
 * error reaches a later, unrelated call).  Locked. */
static int pend_out(struct ubt_bdev *bd, struct file_priv *fp)
{
	size_t len = atomic_load(&fp->pend_len);

	if (!len)
		return 0;
	uint64_t off = atomic_load(&fp->pend_off);
	int ret = pwrite_all(fp->fd, fp->pend, len, off);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "%s: writing %zu gathered bytes at offset %llu failed: %s",
			bd->name, len, (unsigned long long)off, ubt_strerror(ret));
		if (!fp->pend_err)
			fp->pend_err = ret;
		return ret;
	}
	wb_note(fp, off, len);
	atomic_store(&fp->pend_len, 0);
	return 0;
}

/* Does [off, off + len) touch the pending run? */
static bool pend_touches(struct file_priv *fp, uint64_t off, size_t len)
{
	size_t plen = atomic_load(&fp->pend_len);
	uint64_t poff = atomic_load(&fp->pend_off);

	return plen && off < poff + plen && poff < off + len;
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

static int file_read(struct ubt_bdev *bd, void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = bd->priv;

	if (!pend_touches(fp, off, len))
		return pread_all(fp->fd, buf, len, off);
	pthread_mutex_lock(&fp->lock);
	if (!pend_touches(fp, off, len)) {
		pthread_mutex_unlock(&fp->lock);
		return pread_all(fp->fd, buf, len, off);
	}
	/* [a, b) from the run; the file's bytes around it.  (Not the file's
	 * bytes under it: where the run fills a hole, a read there would
	 * only make the host read ahead zeros.) */
	uint8_t *p = buf;
	uint64_t poff = atomic_load(&fp->pend_off);
	uint64_t a = UBT_MAX(off, poff);
	uint64_t b = UBT_MIN(off + len, poff + atomic_load(&fp->pend_len));
	int ret = a > off ? pread_all(fp->fd, p, (size_t)(a - off), off) : 0;
	if (!ret && off + len > b)
		ret = pread_all(fp->fd, p + (b - off), (size_t)(off + len - b), b);
	if (!ret)
		memcpy(p + (a - off), fp->pend + (a - poff), (size_t)(b - a));
	pthread_mutex_unlock(&fp->lock);
	return ret;
}

static int file_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = bd->priv;
	int ret = 0;

	pthread_mutex_lock(&fp->lock);
	size_t plen = atomic_load(&fp->pend_len);
	uint64_t poff = atomic_load(&fp->pend_off);
	if (fp->pend_err) {
		ret = fp->pend_err;
		goto out;
	}
	if (plen && off >= poff && off - poff <= plen && off - poff + len <= PEND_MAX) {
		/* Continues the run, or rewrites (and maybe extends) part of it. */
		size_t at = (size_t)(off - poff);
		memcpy(fp->pend + at, buf, len);
		if (at + len > plen)
			atomic_store(&fp->pend_len, at + len);
		goto out;
	}
	ret = pend_out(bd, fp);
	if (ret)
		goto out;
	if (len < PEND_MAX && !fp->pend)
		fp->pend = malloc(PEND_MAX);
	if (len < PEND_MAX && fp->pend) {
		memcpy(fp->pend, buf, len);
		atomic_store(&fp->pend_off, off);
		atomic_store(&fp->pend_len, len);
		goto out;
	}
	ret = pwrite_all(fp->fd, buf, len, off);
	if (ret)
		ubt_log(UBT_LOG_ERROR, "%s: writing %zu bytes at offset %llu failed: %s", bd->name,
			len, (unsigned long long)off, ubt_strerror(ret));
	else
		wb_note(fp, off, len);
out:
	pthread_mutex_unlock(&fp->lock);
	return ret;
}

/*
 * The file's data on stable storage.  fdatasync where there is one: the
 * image's own times need not be durable, and an overwrite of blocks the
 * file already has (a commit's superblocks) then costs the host no journal
 * commit.  macOS's fsync leaves the drive's cache unflushed; F_FULLFSYNC
 * flushes it (fsync where the filesystem does not support it).
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
	int ret = pend_out(bd, fp);
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
	(void)pend_out(bd, fp);		/* a failure is logged there */
	pthread_mutex_unlock(&fp->lock);
	if (bd->map)
		munmap((void *)(uintptr_t)bd->map, (size_t)bd->size);
	close(fp->fd);
	pthread_mutex_destroy(&fp->lock);
	free(fp->pend);
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
	pthread_mutex_init(&fp->lock, NULL);
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
