/*
 * io layer: the write log, a testing facility for crash tests.
 *
 * With UBTRFS_WRITE_LOG=/path/file in the environment (read once, at the
 * first write or flush of the process), every write that reaches a device
 * and every flush is appended to that file, in the order the devices saw
 * them.  tests/tools/wlog_replay rebuilds the devices as they were after
 * any prefix of the log (a simulated power failure), which t-crash-fsync
 * checks with btrfs check and the kernel.  Without the variable nothing
 * changes: ubt_bdev_write/flush test one atomic flag and go on.
 *
 * The file is created (or truncated) when logging starts: one log holds one
 * process's run.  Records are appended under one mutex, held across the
 * device operation too, so the log's order is the devices' order even with
 * many threads writing; a flush record is in the file before the flush
 * returns to its caller.  A write that fails on the device is not logged;
 * a write dropped by the crash simulation (ubt_bdev_crash_after) never gets
 * here.  If the log cannot be opened or appended to, the error is reported
 * once and every later write and flush fails with -EIO: a test must never
 * run on with a log that silently misses writes.
 *
 * Devices are told apart by name (bd->name, the path as opened): a path
 * opened twice is one device.  Memory devices all share the name "memory".
 *
 * File format (all integers little endian):
 *
 *   file header, 16 bytes:
 *     0  8  magic "UBTWLOG1"
 *     8  4  header size (16)
 *    12  4  0 (reserved)
 *   then records, each a 32-byte header and a payload of `len` bytes:
 *     0  4  type: 1 DEVICE, 2 WRITE, 3 FLUSH
 *     4  4  device index (0, 1, ... in the order of the DEVICE records)
 *     8  8  DEVICE: device size in bytes; WRITE: byte offset; FLUSH: 0
 *    16  8  payload length: DEVICE: name bytes (no NUL); WRITE: data
 *           bytes; FLUSH: 0
 *    24  4  record number (from 0, counting every record, modulo 2^32)
 *    28  4  ~crc32c(~0) over bytes 0..27 and then the payload
 *
 * A DEVICE record comes before the first WRITE or FLUSH naming its index.
 * A reader may meet a last record that is cut short (the process died while
 * appending it); it is to be ignored.
 */
#include "io.h"

#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define WLOG_ENV "UBTRFS_WRITE_LOG"
#define WLOG_MAGIC "UBTWLOG1"
#define WLOG_FILE_HDR 16
#define WLOG_REC_HDR 32

enum { WLOG_DEVICE = 1, WLOG_WRITE = 2, WLOG_FLUSH = 3 };

/* 0: not looked at yet, 1: off, 2: on, 3: on but broken (-EIO). */
enum { ST_UNKNOWN, ST_OFF, ST_ON, ST_BROKEN };
static _Atomic int wlog_state = ST_UNKNOWN;
static pthread_once_t wlog_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t wlog_mu = PTHREAD_MUTEX_INITIALIZER;

/* Everything below is guarded by wlog_mu (set up once by wlog_init). */
static int wlog_fd = -1;
static uint32_t wlog_nr;	/* records written */
static char **wlog_devs;	/* device names by index */
static uint32_t wlog_ndevs;

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Write all of iov[0..n) (n <= 2) to fd; 0 or -errno. */
static int write_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		size_t left = (size_t)w;
		while (n > 0 && left >= iov[0].iov_len) {
			left -= iov[0].iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov[0].iov_base = (uint8_t *)iov[0].iov_base + left;
			iov[0].iov_len -= left;
		}
	}
	return 0;
}

static void wlog_init(void)
{
	const char *path = getenv(WLOG_ENV);
	uint8_t hdr[WLOG_FILE_HDR] = { 0 };
	struct iovec iov = { hdr, sizeof(hdr) };
	int ret;

	if (!path || !*path) {
		atomic_store(&wlog_state, ST_OFF);
		return;
	}
	wlog_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	if (wlog_fd < 0) {
		ret = -errno;
		ubt_log(UBT_LOG_ERROR, "%s=%s: cannot create the write log: %s", WLOG_ENV, path,
			ubt_strerror(ret));
		atomic_store(&wlog_state, ST_BROKEN);
		return;
	}
	memcpy(hdr, WLOG_MAGIC, 8);
	put_le32(hdr + 8, WLOG_FILE_HDR);
	ret = write_all(wlog_fd, &iov, 1);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "%s: cannot write the write log: %s", path,
			ubt_strerror(ret));
		atomic_store(&wlog_state, ST_BROKEN);
		return;
	}
	atomic_store(&wlog_state, ST_ON);
}

bool ubt_wlog_active(void)
{
	int st = atomic_load_explicit(&wlog_state, memory_order_acquire);

	if (st == ST_UNKNOWN) {
		pthread_once(&wlog_once, wlog_init);
		st = atomic_load_explicit(&wlog_state, memory_order_acquire);
	}
	return st != ST_OFF;
}

/* Append one record; caller holds wlog_mu.  A failure breaks the log. */
static int append(uint32_t type, uint32_t dev, uint64_t off, const void *data, size_t len)
{
	uint8_t hdr[WLOG_REC_HDR];
	struct iovec iov[2];
	uint32_t crc;
	int ret;

	put_le32(hdr, type);
	put_le32(hdr + 4, dev);
	put_le64(hdr + 8, off);
	put_le64(hdr + 16, (uint64_t)len);
	put_le32(hdr + 24, wlog_nr);
	crc = ubt_crc32c(~0u, hdr, 28);
	if (len)
		crc = ubt_crc32c(crc, data, len);
	put_le32(hdr + 28, ~crc);
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(hdr);
	iov[1].iov_base = (void *)(uintptr_t)data;
	iov[1].iov_len = len;
	ret = write_all(wlog_fd, iov, len ? 2 : 1);
	if (ret) {
		ubt_log(UBT_LOG_ERROR, "write log: append failed: %s; device I/O fails from now on",
			ubt_strerror(ret));
		atomic_store(&wlog_state, ST_BROKEN);
		return -EIO;
	}
	wlog_nr++;
	return 0;
}

/* The index of bd's device, announcing it with a DEVICE record the first
 * time; caller holds wlog_mu.  0.. or -errno. */
static int64_t device_index(struct ubt_bdev *bd)
{
	const char *name = bd->name ? bd->name : "";
	char **grown;
	int ret;

	for (uint32_t i = 0; i < wlog_ndevs; i++)
		if (!strcmp(wlog_devs[i], name))
			return i;
	grown = realloc(wlog_devs, (wlog_ndevs + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	wlog_devs = grown;
	wlog_devs[wlog_ndevs] = strdup(name);
	if (!wlog_devs[wlog_ndevs])
		return -ENOMEM;
	ret = append(WLOG_DEVICE, wlog_ndevs, bd->size, name, strlen(name));
	if (ret)
		return ret;
	return wlog_ndevs++;
}

static bool broken(void)
{
	return atomic_load(&wlog_state) == ST_BROKEN;
}

int ubt_wlog_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off)
{
	int64_t dev;
	int ret;

	pthread_mutex_lock(&wlog_mu);
	if (broken()) {
		ret = -EIO;
		goto out;
	}
	dev = device_index(bd);
	if (dev < 0) {
		ret = (int)dev;
		goto out;
	}
	ret = bd->ops->write(bd, buf, len, off);
	if (!ret)
		ret = append(WLOG_WRITE, (uint32_t)dev, off, buf, len);
out:
	pthread_mutex_unlock(&wlog_mu);
	return ret;
}

int ubt_wlog_flush(struct ubt_bdev *bd)
{
	int64_t dev;
	int ret;

	pthread_mutex_lock(&wlog_mu);
	if (broken()) {
		ret = -EIO;
		goto out;
	}
	dev = device_index(bd);
	if (dev < 0) {
		ret = (int)dev;
		goto out;
	}
	ret = bd->ops->flush(bd);
	if (!ret)
		ret = append(WLOG_FLUSH, (uint32_t)dev, 0, NULL, 0);
out:
	pthread_mutex_unlock(&wlog_mu);
	return ret;
}
