/*
 * unit: the write log (io/wlog.c, UBTRFS_WRITE_LOG).
 *
 *   - unset: ubt_wlog_active() is false and writes go straight through;
 *   - a log that cannot be created makes every write and flush -EIO;
 *   - four threads writing and flushing two file devices at once: the log
 *     has a valid header, sequential record numbers and checksums, one
 *     DEVICE record per device (name, size) before its first use, every
 *     write with its data in each thread's issue order, every flush, and
 *     nothing for a write refused by the range check, a write dropped by
 *     the crash simulation or a flush of a read-only device; replaying its
 *     writes onto zeroed buffers gives the devices' contents.
 * The first two run in child processes (the variable is read once per
 * process).  No root needed.
 */
#include "t.h"

#include "base/base.h"
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEV_SIZE (1u << 20)
#define NTHREADS 4
#define NWRITES 120
#define FLUSH_EVERY 10

static char tmpdir[] = "/tmp/ubtrfs-test-wlog-XXXXXX";
static char dev_path[2][600];
static struct ubt_bdev *devs[2];

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int make_file(const char *path, uint64_t size)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);

	if (fd < 0)
		return -1;
	int ret = ftruncate(fd, (off_t)size);
	close(fd);
	return ret;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return NULL;
	}
	ssize_t n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(buf);
		return NULL;
	}
	*len = (size_t)n;
	return buf;
}

/* Child: exit 0 if the checks hold, 1 otherwise. */
static int child_disabled(void)
{
	struct ubt_bdev *bd;
	uint8_t b = 7;

	unsetenv("UBTRFS_WRITE_LOG");
	if (ubt_bdev_open_file(dev_path[0], 0, &bd))
		return 1;
	int ok = !ubt_wlog_active() && ubt_bdev_write(bd, &b, 1, 0) == 0 &&
		 ubt_bdev_flush(bd) == 0;
	ubt_bdev_close(bd);
	return ok ? 0 : 1;
}

static int child_broken(void)
{
	char path[700];
	struct ubt_bdev *bd;
	uint8_t b = 7;

	snprintf(path, sizeof(path), "%s/no/such/dir/log", tmpdir);
	setenv("UBTRFS_WRITE_LOG", path, 1);
	ubt_log_set_level(-1);	/* the expected error message */
	if (ubt_bdev_open_file(dev_path[0], 0, &bd))
		return 1;
	int ok = ubt_wlog_active() && ubt_bdev_write(bd, &b, 1, 0) == -EIO &&
		 ubt_bdev_flush(bd) == -EIO;
	ubt_bdev_close(bd);
	return ok ? 0 : 1;
}

static int in_child(int (*fn)(void))
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(fn());
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Thread t's k-th write: device t % 2, its own slot, bytes naming t and k. */
static void write_of(int t, int k, uint64_t *off, uint8_t *buf, size_t *len)
{
	*len = 100 + (size_t)(k * 37 % 900);
	*off = (uint64_t)t * (DEV_SIZE / NTHREADS) + (uint64_t)k * 1024;
	for (size_t i = 0; i < *len; i++)
		buf[i] = (uint8_t)(t * 61 + k * 7 + i);
	buf[0] = (uint8_t)t;
	buf[1] = (uint8_t)k;
}

static int thread_errors;

static void *writer(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint8_t buf[1024];
	uint64_t off;
	size_t len;

	for (int k = 0; k < NWRITES; k++) {
		write_of(t, k, &off, buf, &len);
		if (ubt_bdev_write(devs[t % 2], buf, len, off))
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED);
		if ((k + 1) % FLUSH_EVERY == 0 && ubt_bdev_flush(devs[t % 2]))
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void check_log(const char *log)
{
	size_t len, pos = 16;
	uint8_t *p = slurp(log, &len);
	uint8_t *img[2];
	uint32_t nr = 0, ndev = 0;
	int next_k[NTHREADS] = { 0 };
	unsigned flushes = 0, writes = 0;

	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(len >= 16 && !memcmp(p, "UBTWLOG1", 8) && le32(p + 8) == 16 && le32(p + 12) == 0);
	img[0] = calloc(1, DEV_SIZE);
	img[1] = calloc(1, DEV_SIZE);
	while (pos + 32 <= len) {
		const uint8_t *h = p + pos;
		uint32_t type = le32(h), dev = le32(h + 4);
		uint64_t off = le64(h + 8), dlen = le64(h + 16);
		if (pos + 32 + dlen > len) {
			CHECK(!"record past the end of the log");
			break;
		}
		const uint8_t *data = h + 32;
		uint32_t crc = ubt_crc32c(ubt_crc32c(~0u, h, 28), data, (size_t)dlen);
		CHECK_EQ_U64(le32(h + 28), ~crc);
		CHECK_EQ_U64(le32(h + 24), nr);
		nr++;
		pos += 32 + (size_t)dlen;
		if (type == 1) {
			CHECK_EQ_U64(dev, ndev);
			CHECK(dev < 2 && dlen == strlen(dev_path[dev]) &&
			      !memcmp(data, dev_path[dev], (size_t)dlen));
			CHECK_EQ_U64(off, DEV_SIZE);
			ndev++;
			continue;
		}
		CHECK(dev < ndev);
		if (dev >= 2)
			continue;
		if (type == 3) {
			CHECK_EQ_U64(dlen, 0);
			flushes++;
			continue;
		}
		CHECK_EQ_U64(type, 2);
		if (type != 2 || dlen < 2 || off + dlen > DEV_SIZE)
			continue;
		writes++;
		memcpy(img[dev] + off, data, (size_t)dlen);
		/* In the thread's issue order, with the data it wrote. */
		int t = data[0], k = data[1];
		if (t == NTHREADS)
			continue;	/* the write before the threads */
		if (t > NTHREADS) {
			CHECK(!"unknown writer (a write that should not be logged)");
			continue;
		}
		CHECK_EQ_INT(k, next_k[t]);
		next_k[t] = k + 1;
		uint8_t want[1024];
		uint64_t woff;
		size_t wlen;
		write_of(t, k, &woff, want, &wlen);
		CHECK(dev == (uint32_t)(t % 2) && woff == off && wlen == dlen &&
		      !memcmp(want, data, wlen));
	}
	CHECK_EQ_U64(pos, len);
	CHECK_EQ_U64(ndev, 2);
	CHECK_EQ_U64(writes, NTHREADS * NWRITES + 1);	/* + the one before the threads */
	CHECK_EQ_U64(flushes, NTHREADS * NWRITES / FLUSH_EVERY);
	for (int d = 0; d < 2; d++) {
		size_t dl;
		uint8_t *cur = slurp(dev_path[d], &dl);
		CHECK(cur && dl == DEV_SIZE && !memcmp(cur, img[d], DEV_SIZE));
		free(cur);
	}
	free(img[0]);
	free(img[1]);
	free(p);
}

int main(void)
{
	char log[700], ro_path[700];
	pthread_t th[NTHREADS];
	struct ubt_bdev *ro;

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	for (int d = 0; d < 2; d++) {
		snprintf(dev_path[d], sizeof(dev_path[d]), "%s/dev%d", tmpdir, d);
		CHECK_EQ_INT(make_file(dev_path[d], DEV_SIZE), 0);
	}
	snprintf(ro_path, sizeof(ro_path), "%s/ro", tmpdir);
	CHECK_EQ_INT(make_file(ro_path, 4096), 0);

	CHECK_EQ_INT(in_child(child_disabled), 0);
	CHECK_EQ_INT(in_child(child_broken), 0);
	CHECK_EQ_INT(make_file(dev_path[0], DEV_SIZE), 0);	/* zero again */

	snprintf(log, sizeof(log), "%s/w.log", tmpdir);
	setenv("UBTRFS_WRITE_LOG", log, 1);
	for (int d = 0; d < 2; d++)
		CHECK_EQ_INT(ubt_bdev_open_file(dev_path[d], 0, &devs[d]), 0);
	CHECK_EQ_INT(ubt_bdev_open_file(ro_path, UBT_BDEV_RDONLY, &ro), 0);
	if (!devs[0] || !devs[1] || !ro)
		return t_finish();
	CHECK(ubt_wlog_active());

	/* Not logged: a write past the end, a flush of a read-only device, a
	 * write the crash simulation drops.  Logged: one write into thread 0's
	 * first slot (rewritten by the thread later), announcing device 0. */
	uint8_t buf[1024];
	uint64_t off;
	size_t len;
	CHECK_EQ_INT(ubt_bdev_write(devs[1], buf, 16, DEV_SIZE - 8), -EIO);
	CHECK_EQ_INT(ubt_bdev_flush(ro), 0);
	write_of(0, 0, &off, buf, &len);
	buf[0] = NTHREADS + 1;	/* no such writer: the parser flags it if logged */
	ubt_bdev_crash_after((int64_t)ubt_bdev_write_count());
	CHECK_EQ_INT(ubt_bdev_write(devs[0], buf, len, off), 0);
	ubt_bdev_crash_after(-1);
	buf[0] = NTHREADS;
	CHECK_EQ_INT(ubt_bdev_write(devs[0], buf, len, off), 0);

	for (int t = 0; t < NTHREADS; t++)
		CHECK_EQ_INT(pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t), 0);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	CHECK_EQ_INT(thread_errors, 0);
	for (int d = 0; d < 2; d++)
		ubt_bdev_close(devs[d]);
	ubt_bdev_close(ro);
	check_log(log);

	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	return t_finish();
}
