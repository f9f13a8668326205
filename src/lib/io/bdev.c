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

void ubt_bdev_close(struct ubt_bdev *bd)
{
	if (!bd)
		return;
	bd->ops->destroy(bd);
	free(bd->name);
	free(bd);
}

/* ---- file ------------------------------------------------------------- */

struct file_priv {
	int fd;
};

static int file_read(struct ubt_bdev *bd, void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = bd->priv;
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fp->fd, p, len, (off_t)off);
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

static int file_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = bd->priv;
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fp->fd, p, len, (off_t)off);
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

static int file_flush(struct ubt_bdev *bd)
{
	struct file_priv *fp = bd->priv;

	if (fsync(fp->fd) < 0)
		return -errno;
	return 0;
}

static void file_destroy(struct ubt_bdev *bd)
{
	struct file_priv *fp = bd->priv;

	if (bd->map)
		munmap((void *)(uintptr_t)bd->map, (size_t)bd->size);
	close(fp->fd);
	free(fp);
}

static const struct ubt_bdev_ops file_ops = {
	.read = file_read,
	.write = file_write,
	.flush = file_flush,
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
