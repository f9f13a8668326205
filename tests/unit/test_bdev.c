/*
 * unit: io/bdev - the file device's gathered writes against a model.
 *
 * A file device keeps runs of writes in memory and writes each out with
 * one pwrite, or directly (O_DIRECT, AIO) where it is aligned and the host
 * allows (bdev.c).  Random writes - mostly continuing the last one, some
 * inside it, some elsewhere, some larger than a run - and random reads run
 * on a file device and on a plain array, first with any bytes, then in
 * 4 KiB blocks from two streams taking turns (direct writes, up to four in
 * flight, where the host takes O_DIRECT on the file: the working
 * directory's, or /tmp's; more than 100 of them are required there).
 * After every step:
 *  - every read equals the model;
 *  - where ubt_bdev_map_current says the mapping may be used, the mapping
 *    equals the model;
 *  - after every flush, and after the close, the file read through a
 *    second descriptor (not the device) equals the model: nothing stays
 *    behind in memory, and the newest bytes of every range won.
 * Then a write-out that fails (RLIMIT_FSIZE below the run's offset: pwrite
 * gives EFBIG): the run stays readable, the flush and every later write
 * and flush fail, and the failure shows in none of the earlier bytes.
 * Last, write-behind (Linux): after 12 MiB written in one stretch and no
 * flush, the host's page cache (cachestat(2)) holds the first 8 MiB as
 * clean or under writeback, not dirty - they were handed to the host's
 * writeback in 4 MiB pieces as they were written.  The file is made in
 * the working directory (meson's build directory), or in /tmp if that is
 * tmpfs (no writeback); where neither will do or cachestat(2) is missing
 * the check is not made - a failure under UBTRFS_REQUIRE_ORACLE=1.
 * Then two streams of 16 KiB writes taking turns (a commit's DUP copies):
 * through the page cache they go out in at most 16 write calls (one run
 * each: not 512), and written directly at most a sixteenth of their pages
 * is in the host's page cache after the flush (all of them without direct
 * writes); the same directory and oracle rules.
 * Then direct writes that go wrong for real (ubt_bdev_fault_direct), each
 * on a fresh device under the aligned model run: one the host writes only
 * half of, one it writes nothing of, a wait for them that fails - the
 * device writes the bytes again, before anything newer of the same range.
 * By default direct writes start after 16 MiB of runs (a short job makes
 * no AIO context): none in the first 8 MiB, some in 16 MiB more (the
 * rest of the test asks for them from the first run).
 * Last, a fork with a direct write in flight: the child has none in
 * flight, and its own model run (direct writes from a context of its own)
 * holds up to its close.  Each of these needs O_DIRECT on the scratch
 * file (the same oracle rule).
 * UBTRFS_TEST_SEED=n replays a run.
 */
#include "t.h"

#include "base/base.h"
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#ifdef __linux__
#include <linux/magic.h>
#endif
#include <stdbool.h>
#include <unistd.h>

#define DEV_SIZE	((size_t)8 << 20)

static uint64_t rng;

static uint64_t below(uint64_t n)
{
	return t_xorshift64(&rng) % n;
}

static bool file_equals(int fd, const uint8_t *model, size_t len)
{
	uint8_t *buf = malloc(len);
	bool same = buf && pread(fd, buf, len, 0) == (ssize_t)len && !memcmp(buf, model, len);

	free(buf);
	return same;
}

/* The failing write-out, on a fresh device over the file at path. */
static void test_failed_writeout(const char *path, int fd)
{
	struct ubt_bdev *bd = NULL;
	struct rlimit old, lim;
	uint8_t a[4096], b[4096], got[8192];

	memset(a, 0x5a, sizeof(a));
	memset(b, 0xa5, sizeof(b));
	CHECK_EQ_INT(ubt_bdev_open_file(path, 0, &bd), 0);
	if (!bd)
		return;
	CHECK_EQ_INT(ubt_bdev_write(bd, a, sizeof(a), 4096), 0);
	CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
	CHECK_EQ_INT(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 1 << 20;
	signal(SIGXFSZ, SIG_IGN);
	CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &lim), 0);
	/* Gathered: accepted, and readable back. */
	CHECK_EQ_INT(ubt_bdev_write(bd, b, sizeof(b), 6 << 20), 0);
	CHECK_EQ_INT(ubt_bdev_read(bd, got, sizeof(b), 6 << 20), 0);
	CHECK(!memcmp(got, b, sizeof(b)));
	/* The write-out fails: the flush says so, the run stays readable. */
	CHECK_EQ_INT(ubt_bdev_flush(bd), -EFBIG);
	CHECK_EQ_INT(ubt_bdev_read(bd, got, 8192, (6 << 20) - 4096), 0);
	CHECK(!memcmp(got + 4096, b, sizeof(b)));
	CHECK(bd->map == NULL || !ubt_bdev_map_current(bd, 6 << 20, sizeof(b)));
	/* Every later write and flush fails too, even one the host would take. */
	CHECK_EQ_INT(ubt_bdev_write(bd, a, sizeof(a), 8192), -EFBIG);
	CHECK_EQ_INT(ubt_bdev_flush(bd), -EFBIG);
	CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &old), 0);
	CHECK_EQ_INT(ubt_bdev_write(bd, a, sizeof(a), 8192), -EFBIG);
	/* The bytes written before are intact; the refused one never landed,
	 * nor did the failed run yet. */
	CHECK(pread(fd, got, 8192, 4096) == 8192);
	CHECK(!memcmp(got, a, sizeof(a)));
	CHECK(got[4096] != a[0] || got[4097] != a[1]);
	CHECK(pread(fd, got, sizeof(b), 6 << 20) == (ssize_t)sizeof(b));
	CHECK(memcmp(got, b, sizeof(b)) != 0);
	ubt_bdev_close(bd);	/* writes the failed run out now that it can */
	CHECK(pread(fd, got, sizeof(b), 6 << 20) == (ssize_t)sizeof(b));
	CHECK(!memcmp(got, b, sizeof(b)));
	signal(SIGXFSZ, SIG_DFL);
}

#ifdef __linux__
/* cachestat(2) (Linux 6.5); the C library may not wrap it yet. */
struct t_cachestat_range {
	uint64_t off, len;
};
struct t_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

static int cachestat(int fd, uint64_t off, uint64_t len, struct t_cachestat *cs)
{
	struct t_cachestat_range r = { off, len };

	return (int)syscall(SYS_cachestat, fd, &r, cs, 0);
}
#endif

#ifdef __linux__
/* A new file in the working directory, or else /tmp, on a filesystem with
 * a page cache of its own (not tmpfs); its name in path.  -1 if none. */
static int scratch_file(char *path, size_t size)
{
	static const char *const dirs[] = { ".", "/tmp" };
	struct statfs sf;
	int fd = -1;

	for (size_t i = 0; i < UBT_ARRAY_SIZE(dirs) && fd < 0; i++) {
		snprintf(path, size, "%s/ubtrfs-test-bdev-XXXXXX", dirs[i]);
		fd = mkstemp(path);
		if (fd >= 0 && fstatfs(fd, &sf) == 0 && sf.f_type == TMPFS_MAGIC) {
			close(fd);
			unlink(path);
			fd = -1;
		}
	}
	return fd;
}
#endif

/* A check that cannot be made here: said, and a failure where the oracle
 * (a Linux host with writeback, cachestat and O_DIRECT) is required. */
static void not_checked(const char *why)
{
	const char *req = getenv("UBTRFS_REQUIRE_ORACLE");

	printf("%s; not checked\n", why);
	CHECK(!(req && !strcmp(req, "1")));
}

/* Write-behind: a long stretch of writes is handed to the host's
 * writeback as it grows, without a flush. */
static void test_write_behind(void)
{
#ifdef __linux__
	char path[64] = "";
	int fd = -1;
	struct ubt_bdev *bd = NULL;
	struct t_cachestat cs;
	const size_t piece = 64 << 10;
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint8_t *buf = malloc(piece);

	CHECK(buf != NULL);
	if (!buf)
		goto out;
	fd = scratch_file(path, sizeof(path));
	if (fd < 0) {
		not_checked("write-behind: no directory with writeback (the working directory "
			    "and /tmp are tmpfs or not writable)");
		goto out;
	}
	CHECK_EQ_INT(ftruncate(fd, 16 << 20), 0);
	if (cachestat(fd, 0, 4096, &cs) != 0) {
		char why[128];
		snprintf(why, sizeof(why), "write-behind: no cachestat(2) here (%s)",
			 strerror(errno));
		not_checked(why);
		goto out;
	}
	/* Write-behind is for writes through the page cache. */
	setenv("UBTRFS_DIRECT_WRITES", "0", 1);
	CHECK_EQ_INT(ubt_bdev_open_file(path, 0, &bd), 0);
	setenv("UBTRFS_DIRECT_WRITES", "1", 1);
	if (!bd)
		goto out;
	for (size_t off = 0; off < (12u << 20); off += piece) {
		memset(buf, (int)(off >> 16) | 1, piece);
		CHECK_EQ_INT(ubt_bdev_write(bd, buf, piece, off), 0);
	}
	/* Gathered in 1 MiB runs; eleven of them are written, the first
	 * eight handed on at 4 and 8 MiB, the next three not yet. */
	CHECK_EQ_INT(cachestat(fd, 0, 8 << 20, &cs), 0);
	printf("write-behind: first 8 MiB: %llu pages cached, %llu dirty, %llu under writeback\n",
	       (unsigned long long)cs.nr_cache, (unsigned long long)cs.nr_dirty,
	       (unsigned long long)cs.nr_writeback);
	/* At most a quarter of the pages (without write-behind: all). */
	CHECK(cs.nr_dirty <= ((uint64_t)8 << 20) / page / 4);
	CHECK_EQ_INT(cachestat(fd, 8 << 20, 3 << 20, &cs), 0);
	printf("write-behind: the 3 MiB after: %llu pages dirty (not handed on yet)\n",
	       (unsigned long long)cs.nr_dirty);
	if (cs.nr_dirty < ((uint64_t)3 << 20) / page / 2)
		printf("write-behind: the host wrote those back on its own: the check above "
		       "says less here\n");
	CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
	CHECK_EQ_INT(cachestat(fd, 0, 12 << 20, &cs), 0);
	CHECK(cs.nr_dirty == 0);
	uint8_t got[4];
	CHECK(pread(fd, got, 4, (11 << 20) + 5) == 4 && got[0] == (((11 << 20) >> 16) | 1));
out:
	ubt_bdev_close(bd);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	free(buf);
#endif
}

/* Write syscalls this process has made (/proc/self/io), or -1. */
static long long syscw(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	long long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "syscw: %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/*
 * Two streams of 16 KiB writes taking turns, 4 MiB each, 8 MiB apart (the
 * two copies of a commit's DUP metadata): each gathers in a run of its own.
 * Through the page cache (direct writes off) they go out in a few 1 MiB
 * pwrites, not 512; with direct writes (on where the host takes O_DIRECT)
 * none of it stays in the host's page cache.  The file holds the bytes
 * after the flush either way.
 */
static void test_two_streams(bool direct)
{
#ifdef __linux__
	char path[64] = "";
	int fd = -1;
	struct ubt_bdev *bd = NULL;
	struct t_cachestat cs;
	const size_t piece = 16 << 10, half = 4 << 20, gap = 8 << 20;
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint8_t *buf = malloc(piece), *got = malloc(half);

	CHECK(buf && got);
	if (!buf || !got)
		goto out;
	fd = scratch_file(path, sizeof(path));
	if (fd < 0) {
		not_checked("two streams: no directory with a page cache of its own (the "
			       "working directory and /tmp are tmpfs or not writable)");
		goto out;
	}
	CHECK_EQ_INT(ftruncate(fd, (off_t)(gap + half)), 0);
	if (direct) {
		int dfd = open(path, O_RDWR | O_DIRECT);
		if (dfd < 0) {
			not_checked("direct writes: the host refuses O_DIRECT here");
			goto out;
		}
		close(dfd);
		if (cachestat(fd, 0, 4096, &cs) != 0) {
			not_checked("direct writes: no cachestat(2) here");
			goto out;
		}
	} else {
		setenv("UBTRFS_DIRECT_WRITES", "0", 1);
	}
	CHECK_EQ_INT(ubt_bdev_open_file(path, 0, &bd), 0);
	setenv("UBTRFS_DIRECT_WRITES", "1", 1);
	if (!bd)
		goto out;
	fflush(stdout);
	long long w0 = syscw();
	for (size_t at = 0; at < half; at += piece) {
		for (size_t copy = 0; copy < 2; copy++) {
			memset(buf, (int)((at / piece) * 2 + copy + 1), piece);
			CHECK_EQ_INT(ubt_bdev_write(bd, buf, piece, copy * gap + at), 0);
		}
	}
	CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
	long long w1 = syscw();
	if (direct) {
		CHECK_EQ_INT(cachestat(fd, 0, gap + half, &cs), 0);
		printf("two streams, direct: %llu pages of the 8 MiB written in the host's page "
		       "cache\n", (unsigned long long)cs.nr_cache);
		CHECK(cs.nr_cache <= ((uint64_t)2 * half) / page / 16);
	} else if (w0 >= 0 && w1 >= 0) {
		printf("two streams, page cache: %lld write calls for 512 writes of 16 KiB\n",
		       w1 - w0);
		CHECK(w1 - w0 <= 16);
	} else {
		not_checked("two streams: no /proc/self/io here");
	}
	for (size_t copy = 0; copy < 2; copy++) {
		CHECK(pread(fd, got, half, (off_t)(copy * gap)) == (ssize_t)half);
		for (size_t at = 0; at < half; at += piece)
			CHECK(got[at] == (uint8_t)((at / piece) * 2 + copy + 1) &&
			      got[at + piece - 1] == got[at]);
	}
out:
	ubt_bdev_close(bd);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	free(buf);
	free(got);
#else
	(void)direct;
#endif
}

/*
 * Random writes, reads and flushes on bd against the model.  Aligned:
 * offsets and lengths in 4 KiB blocks (the writes a filesystem makes, which
 * go out directly where the host allows), in two streams taking turns at
 * random (the two copies of DUP metadata); otherwise any bytes.
 */
static void model_run(struct ubt_bdev *bd, int fd, uint8_t *model, uint8_t *buf, bool aligned,
		      int steps)
{
	uint64_t last_end[2] = { 0, DEV_SIZE / 2 };
	int writes = 0, reads = 0, flushes = 0, mapped = 0;
	const uint64_t blk = aligned ? 4096 : 1;

	for (int step = 0; step < steps; step++) {
		uint64_t r = below(100);
		if (r < 55) {
			/* A write: mostly continuing the last one of its stream. */
			int st = aligned ? (int)below(2) : 0;
			size_t len = below(10) ? 1 + below(16384) : 1 + below(3 << 20);
			uint64_t off;
			uint64_t kind = below(10);
			if (kind < 6)
				off = last_end[st];
			else if (kind < 8)
				off = last_end[st] > 8192 ? last_end[st] - below(8192) : 0;
			else
				off = below(DEV_SIZE);
			off = off / blk * blk;
			len = (len + blk - 1) / blk * blk;
			if (off >= DEV_SIZE)
				off = 0;
			len = UBT_MIN(len, DEV_SIZE - off);
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)t_xorshift64(&rng);
			CHECK_EQ_INT(ubt_bdev_write(bd, buf, len, off), 0);
			memcpy(model + off, buf, len);
			last_end[st] = off + len;
			writes++;
		} else if (r < 90) {
			size_t len = 1 + below(below(4) ? 20000 : DEV_SIZE / 2);
			uint64_t off = below(DEV_SIZE - len + 1);
			CHECK_EQ_INT(ubt_bdev_read(bd, buf, len, off), 0);
			CHECK(!memcmp(buf, model + off, len));
			reads++;
		} else if (r < 95) {
			CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
			CHECK(file_equals(fd, model, DEV_SIZE));
			flushes++;
		}
		/* The mapping, where it may be used. */
		if (bd->map) {
			size_t len = 1 + below(65536);
			uint64_t off = below(DEV_SIZE - len + 1);
			if (ubt_bdev_map_current(bd, off, len)) {
				CHECK(!memcmp(bd->map + off, model + off, len));
				mapped++;
			}
		}
		if (t_failures) {
			fprintf(stderr, "failed at step %d (%s)\n", step, aligned ? "aligned" : "any");
			break;
		}
	}
	printf("%s: %d writes, %d reads, %d flushes, %d mapped ranges checked\n",
	       aligned ? "aligned, two streams" : "any bytes", writes, reads, flushes, mapped);
}

#ifdef __linux__
/* A scratch file of DEV_SIZE bytes (zeros) where the host takes O_DIRECT;
 * -1 (said: `what` not checked) where it does not. */
static int direct_scratch(char *path, size_t size, const char *what)
{
	char why[160];
	int fd = scratch_file(path, size);

	if (fd < 0) {
		snprintf(why, sizeof(why), "%s: no directory with a page cache of its own", what);
		not_checked(why);
		return -1;
	}
	int dfd = open(path, O_RDWR | O_DIRECT);
	if (dfd < 0 || ftruncate(fd, (off_t)DEV_SIZE) != 0) {
		snprintf(why, sizeof(why), "%s: the host refuses O_DIRECT here", what);
		not_checked(why);
		if (dfd >= 0)
			close(dfd);
		close(fd);
		unlink(path);
		return -1;
	}
	close(dfd);
	return fd;
}
#endif

/*
 * Direct writes that go wrong for real (ubt_bdev_fault_direct), one of the
 * first eight on a fresh device: one the host writes only half of, one it
 * writes nothing of, a wait for them that fails.  The aligned model run
 * goes on over each: every read equals the model, and so does the file
 * after every flush and after the close - the device wrote the lost bytes
 * again, and before anything newer of the same range.
 */
static void test_direct_faults(uint8_t *model, uint8_t *buf)
{
#ifdef __linux__
	static const struct {
		enum ubt_bdev_fault kind;
		const char *name;
	} faults[] = {
		{ UBT_BDEV_FAULT_SHORT, "a short direct write" },
		{ UBT_BDEV_FAULT_LOST, "a direct write that writes nothing" },
		{ UBT_BDEV_FAULT_GETEVENTS, "a failing io_getevents" },
	};

	for (size_t i = 0; i < UBT_ARRAY_SIZE(faults); i++) {
		char path[64] = "";
		struct ubt_bdev *bd = NULL;
		int fd = direct_scratch(path, sizeof(path), faults[i].name);
		if (fd < 0)
			return;
		memset(model, 0, DEV_SIZE);
		CHECK_EQ_INT(ubt_bdev_open_file(path, 0, &bd), 0);
		if (bd) {
			uint64_t nth = 1 + below(8);
			ubt_bdev_fault_direct(faults[i].kind, nth);
			printf("%s, at the %llu%s: ", faults[i].name, (unsigned long long)nth,
			       nth == 1 ? "st" : nth == 2 ? "nd" : nth == 3 ? "rd" : "th");
			model_run(bd, fd, model, buf, true, 2000);
			CHECK(ubt_bdev_fault_fired());
			ubt_bdev_fault_direct(UBT_BDEV_FAULT_NONE, 0);
			CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
			CHECK(file_equals(fd, model, DEV_SIZE));
			ubt_bdev_close(bd);
			CHECK(file_equals(fd, model, DEV_SIZE));
		}
		close(fd);
		unlink(path);
		if (t_failures)
			return;
	}
#else
	(void)model;
	(void)buf;
#endif
}

/*
 * By default a device writes directly only after 16 MiB of runs: a short
 * job (mkfs, a snapshot) makes no AIO context, whose end would cost its
 * process 30-40 ms.  8 MiB in 1 MiB writes: none direct; 16 MiB more:
 * direct ones; the file holds the last bytes.
 */
static void test_direct_after(uint8_t *buf)
{
#ifdef __linux__
	char path[64] = "";
	struct ubt_bdev *bd = NULL;
	int fd = direct_scratch(path, sizeof(path), "direct writes after 16 MiB");
	if (fd < 0)
		return;
	unsetenv("UBTRFS_DIRECT_WRITES");
	CHECK_EQ_INT(ubt_bdev_open_file(path, 0, &bd), 0);
	setenv("UBTRFS_DIRECT_WRITES", "1", 1);
	if (bd) {
		uint64_t early = 0;
		for (int pass = 0; pass < 3; pass++) {
			for (uint64_t off = 0; off < DEV_SIZE; off += 1 << 20) {
				memset(buf, pass * 16 + (int)(off >> 20) + 1, 1 << 20);
				CHECK_EQ_INT(ubt_bdev_write(bd, buf, 1 << 20, off), 0);
			}
			if (pass == 0) {
				CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
				early = ubt_bdev_direct_writes(bd);
			}
		}
		CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
		uint64_t late = ubt_bdev_direct_writes(bd);
		printf("direct writes after 16 MiB: %llu in the first 8 MiB, %llu in all 24 MiB\n",
		       (unsigned long long)early, (unsigned long long)late);
		CHECK(early == 0);
		CHECK(late > 0);
		uint8_t got[1];
		CHECK(pread(fd, got, 1, (5 << 20) + 7) == 1 && got[0] == 2 * 16 + 5 + 1);
		ubt_bdev_close(bd);
	}
	close(fd);
	unlink(path);
#else
	(void)buf;
#endif
}

/* The parent's copy of the device forked with writes in flight: never
 * used again (its close would write runs the child has since replaced). */
static struct ubt_bdev *forked_bd;

/*
 * A fork with direct writes in flight (the daemon detaching after the
 * filesystem was opened; the child goes on with it): none is in flight in
 * the child (the fork waited for them), and the child's aligned model run
 * - direct writes again, from a context of its own - keeps reads and the
 * file equal to the model, up to its close.  The child's verdict is its
 * exit status.
 */
static void test_fork_inflight(uint8_t *model, uint8_t *buf)
{
#ifdef __linux__
	char path[64] = "";
	struct ubt_bdev *bd = NULL;
	int fd = direct_scratch(path, sizeof(path), "fork with direct writes in flight");
	if (fd < 0)
		return;
	memset(model, 0, DEV_SIZE);
	CHECK_EQ_INT(ubt_bdev_open_file(path, 0, &bd), 0);
	if (!bd)
		goto out;
	/* 1 MiB writes one after another until one is in flight. */
	for (uint64_t off = 0; off < DEV_SIZE && !ubt_bdev_direct_inflight(bd); off += 1 << 20) {
		for (size_t j = 0; j < (1u << 20); j++)
			buf[j] = (uint8_t)t_xorshift64(&rng);
		CHECK_EQ_INT(ubt_bdev_write(bd, buf, 1 << 20, off), 0);
		memcpy(model + off, buf, 1 << 20);
	}
	unsigned inflight = ubt_bdev_direct_inflight(bd);
	CHECK(inflight > 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK_EQ_INT((int)ubt_bdev_direct_inflight(bd), 0);
		uint64_t before = ubt_bdev_direct_writes(bd);
		printf("fork with %u direct writes in flight, the child: ", inflight);
		model_run(bd, fd, model, buf, true, 2000);
		CHECK(ubt_bdev_direct_writes(bd) > before);
		CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
		CHECK(file_equals(fd, model, DEV_SIZE));
		ubt_bdev_close(bd);
		CHECK(file_equals(fd, model, DEV_SIZE));
		fflush(stdout);
		_exit(t_failures ? 1 : 0);
	}
	forked_bd = bd;
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
out:
	close(fd);
	unlink(path);
#else
	(void)model;
	(void)buf;
#endif
}

int main(void)
{
	const char *e = getenv("UBTRFS_TEST_SEED");
	uint64_t seed = e ? strtoull(e, NULL, 0) : 0x62646576ULL;
	char path[64] = "";
	int fd = -1;
#ifdef __linux__
	fd = scratch_file(path, sizeof(path));	/* direct writes where the host allows */
#endif
	if (fd < 0) {
		snprintf(path, sizeof(path), "/tmp/ubtrfs-test-bdev-XXXXXX");
		fd = mkstemp(path);
	}
	uint8_t *model = calloc(1, DEV_SIZE), *buf = malloc(DEV_SIZE);
	struct ubt_bdev *bd = NULL;

	printf("seed 0x%llx\n", (unsigned long long)seed);
	rng = seed | 1;
	/* Direct writes from the first run (by default only after 16 MiB). */
	setenv("UBTRFS_DIRECT_WRITES", "1", 1);
	CHECK(fd >= 0 && model && buf);
	if (fd < 0 || !model || !buf)
		return t_finish();
	CHECK_EQ_INT(ftruncate(fd, (off_t)DEV_SIZE), 0);
	CHECK_EQ_INT(ubt_bdev_open_file(path, 0, &bd), 0);
	if (!bd) {
		unlink(path);
		return t_finish();
	}
	model_run(bd, fd, model, buf, false, 6000);
	model_run(bd, fd, model, buf, true, 6000);
#ifdef __linux__
	/* The aligned run went out directly, where the host allows it. */
	uint64_t nd = ubt_bdev_direct_writes(bd);
	int dfd = open(path, O_RDWR | O_DIRECT);
	printf("aligned, two streams: %llu direct writes\n", (unsigned long long)nd);
	if (dfd >= 0) {
		close(dfd);
		CHECK(nd > 100);
	} else {
		not_checked("model: the host refuses O_DIRECT here, no direct writes");
	}
#endif
	/* Everything reaches the file at a flush, and at close. */
	CHECK_EQ_INT(ubt_bdev_flush(bd), 0);
	CHECK(file_equals(fd, model, DEV_SIZE));
	buf[0] = (uint8_t)(model[4096] + 1);
	CHECK_EQ_INT(ubt_bdev_write(bd, buf, 1, 4096), 0);
	model[4096] = buf[0];
	ubt_bdev_close(bd);
	CHECK(file_equals(fd, model, DEV_SIZE));
	memset(model, 0, DEV_SIZE);
	CHECK(pwrite(fd, model, DEV_SIZE, 0) == (ssize_t)DEV_SIZE);
	test_failed_writeout(path, fd);
	test_write_behind();
	test_two_streams(false);
	test_two_streams(true);
	test_direct_faults(model, buf);
	test_direct_after(buf);
	test_fork_inflight(model, buf);
	close(fd);
	unlink(path);
	free(model);
	free(buf);
	return t_finish();
}
