/*
 * wlog_replay: rebuild devices from a write log (UBTRFS_WRITE_LOG, format in
 * src/lib/io/wlog.c) as they were after a prefix of the run - a simulated
 * power failure.
 *
 *   wlog_replay list LOG
 *       Check every record's checksum and print a summary:
 *         devices N / device I SIZE NAME (one line each)
 *         records R / writes W / bytes B / flushes F / tail T
 *         flush K RECORD WRITES (one line per flush: its record number
 *                                and the writes since the flush before)
 *       `tail` counts the writes after the last flush.
 *   wlog_replay count LOG
 *       Print the number of flush records (a cut-short last record is
 *       ignored, so it may run while the log is being written).
 *   wlog_replay apply [--from J] [--to K] [--subset SEED] [--percent P] [-v]
 *                     LOG IMAGE...
 *       Write the log's writes onto IMAGE... (one per DEVICE record, in
 *       their order; each a copy of the device taken before the run):
 *         --to K      the prefix ending at the K-th flush (K = 0: nothing;
 *                     default: every record, the tail included);
 *         --from J    the images already hold the prefix ending at flush J:
 *                     only the writes after it are applied (J <= K);
 *         --subset S  also apply a random subset of the writes between
 *                     flush K and flush K+1 (or the end of the log), each
 *                     with chance P percent (--percent, default 50), drawn
 *                     from a generator seeded with S: the same S picks the
 *                     same writes.  Needs --to.
 *       Prints "applied N writes (M of W from the subset)".
 *
 * Exit 0, 1 on a usage error, 2 on a bad log or I/O error.  A last record
 * cut short (the process died while appending it) ends the log with a
 * warning; a checksum mismatch anywhere is an error.
 */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "UBTWLOG1"
#define FILE_HDR 16
#define REC_HDR 32
#define MAX_DEVS 64

enum { R_DEVICE = 1, R_WRITE = 2, R_FLUSH = 3 };

struct rec {
	uint32_t type, dev, nr;
	uint64_t off, len;
	uint8_t *data;		/* payload (malloc'd by next_rec, reused) */
};

struct log {
	FILE *f;
	const char *path;
	uint8_t *buf;
	size_t cap;
	uint64_t records;
	uint32_t ndevs;
	uint64_t dev_size[MAX_DEVS];
};

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int bad(const struct log *lg, const char *what)
{
	fprintf(stderr, "wlog_replay: %s: record %" PRIu64 ": %s\n", lg->path, lg->records, what);
	return -2;
}

static int log_open(struct log *lg, const char *path)
{
	uint8_t hdr[FILE_HDR];

	memset(lg, 0, sizeof(*lg));
	lg->path = path;
	lg->f = fopen(path, "rb");
	if (!lg->f) {
		fprintf(stderr, "wlog_replay: %s: %s\n", path, strerror(errno));
		return -2;
	}
	if (fread(hdr, 1, sizeof(hdr), lg->f) != sizeof(hdr) || memcmp(hdr, MAGIC, 8) ||
	    le32(hdr + 8) != FILE_HDR) {
		fprintf(stderr, "wlog_replay: %s: not a write log\n", path);
		fclose(lg->f);
		return -2;
	}
	return 0;
}

static void log_close(struct log *lg)
{
	if (lg->f)
		fclose(lg->f);
	free(lg->buf);
}

/* The next record: 1 got one, 0 end of log, -2 bad log. */
static int next_rec(struct log *lg, struct rec *r)
{
	uint8_t h[REC_HDR];
	size_t n = fread(h, 1, sizeof(h), lg->f);
	uint32_t crc;

	if (n == 0 && feof(lg->f))
		return 0;
	if (n != sizeof(h)) {
		if (ferror(lg->f))
			return bad(lg, "read error");
		fprintf(stderr, "wlog_replay: %s: last record cut short (ignored)\n", lg->path);
		return 0;
	}
	r->type = le32(h);
	r->dev = le32(h + 4);
	r->off = le64(h + 8);
	r->len = le64(h + 16);
	r->nr = le32(h + 24);
	if (r->type < R_DEVICE || r->type > R_FLUSH)
		return bad(lg, "unknown record type");
	if (r->nr != (uint32_t)lg->records)
		return bad(lg, "record number out of sequence");
	if (r->len > (1ull << 32) || (r->type == R_FLUSH && r->len))
		return bad(lg, "impossible payload length");
	if (r->len > lg->cap) {
		uint8_t *nb = realloc(lg->buf, (size_t)r->len);
		if (!nb)
			return bad(lg, "out of memory");
		lg->buf = nb;
		lg->cap = (size_t)r->len;
	}
	r->data = lg->buf;
	if (r->len && fread(lg->buf, 1, (size_t)r->len, lg->f) != r->len) {
		if (ferror(lg->f))
			return bad(lg, "read error");
		fprintf(stderr, "wlog_replay: %s: last record cut short (ignored)\n", lg->path);
		return 0;
	}
	crc = ubt_crc32c(~0u, h, 28);
	if (r->len)
		crc = ubt_crc32c(crc, lg->buf, (size_t)r->len);
	if (~crc != le32(h + 28))
		return bad(lg, "checksum mismatch");
	if (r->type == R_DEVICE) {
		if (r->dev != lg->ndevs || r->dev >= MAX_DEVS)
			return bad(lg, "device record out of order");
		lg->dev_size[lg->ndevs++] = r->off;
	} else if (r->dev >= lg->ndevs) {
		return bad(lg, "record names an unannounced device");
	} else if (r->type == R_WRITE && (r->off > lg->dev_size[r->dev] ||
					  r->len > lg->dev_size[r->dev] - r->off)) {
		return bad(lg, "write past the end of its device");
	}
	lg->records++;
	return 1;
}

static int cmd_list(const char *path, bool count_only)
{
	struct log lg;
	struct rec r;
	uint64_t writes = 0, bytes = 0, flushes = 0, since = 0;
	int ret;

	if (log_open(&lg, path))
		return 2;
	while ((ret = next_rec(&lg, &r)) > 0) {
		if (r.type == R_DEVICE && !count_only) {
			printf("device %" PRIu32 " %" PRIu64 " %.*s\n", r.dev, r.off, (int)r.len,
			       (const char *)r.data);
		} else if (r.type == R_WRITE) {
			writes++;
			since++;
			bytes += r.len;
		} else if (r.type == R_FLUSH) {
			flushes++;
			if (!count_only)
				printf("flush %" PRIu64 " %" PRIu32 " %" PRIu64 "\n", flushes, r.nr,
				       since);
			since = 0;
		}
	}
	if (ret == 0) {
		if (count_only)
			printf("%" PRIu64 "\n", flushes);
		else
			printf("devices %" PRIu32 "\nrecords %" PRIu64 "\nwrites %" PRIu64
			       "\nbytes %" PRIu64 "\nflushes %" PRIu64 "\ntail %" PRIu64 "\n",
			       lg.ndevs, lg.records, writes, bytes, flushes, since);
	}
	log_close(&lg);
	return ret == 0 ? 0 : 2;
}

static uint64_t rng;

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int pwrite_all(int fd, const uint8_t *p, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, (size_t)len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (uint64_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: wlog_replay list LOG\n"
			"       wlog_replay count LOG\n"
			"       wlog_replay apply [--from J] [--to K] [--subset SEED] [--percent P] [-v]"
			" LOG IMAGE...\n");
	return 1;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return !errno && !*end;
}

static int cmd_apply(int argc, char **argv)
{
	uint64_t from = 0, to = UINT64_MAX, seed = 0, percent = 50;
	bool subset = false, verbose = false;
	int fds[MAX_DEVS], nimg, i, ret, rc = 2;
	uint64_t flushes = 0, applied = 0, sub_seen = 0, sub_applied = 0;
	struct log lg;
	struct rec r;

	for (i = 0; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		bool ok = true;
		if (!strcmp(a, "-v"))
			verbose = true;
		else if (!strcmp(a, "--from"))
			ok = parse_u64(argv[++i], &from);
		else if (!strcmp(a, "--to"))
			ok = parse_u64(argv[++i], &to);
		else if (!strcmp(a, "--subset"))
			ok = subset = parse_u64(argv[++i], &seed);
		else if (!strcmp(a, "--percent"))
			ok = parse_u64(argv[++i], &percent) && percent <= 100;
		else
			ok = false;
		if (!ok || i >= argc)
			return usage();
	}
	argc -= i;
	argv += i;
	if (argc < 2 || (subset && to == UINT64_MAX) || from > to)
		return usage();
	nimg = argc - 1;
	if (nimg > MAX_DEVS)
		return usage();
	rng = seed;
	for (i = 0; i < nimg; i++) {
		fds[i] = open(argv[1 + i], O_WRONLY);
		if (fds[i] < 0) {
			fprintf(stderr, "wlog_replay: %s: %s\n", argv[1 + i], strerror(errno));
			while (i--)
				close(fds[i]);
			return 2;
		}
	}
	if (log_open(&lg, argv[0]))
		goto out_fds;
	while ((ret = next_rec(&lg, &r)) > 0) {
		if (r.type == R_DEVICE) {
			struct stat st;
			if (r.dev >= (uint32_t)nimg) {
				fprintf(stderr, "wlog_replay: the log has more devices than the %d image(s) given\n",
					nimg);
				goto out;
			}
			if (fstat(fds[r.dev], &st) || (uint64_t)st.st_size < r.off) {
				fprintf(stderr, "wlog_replay: %s is smaller than device %" PRIu32
					" of the log (%" PRIu64 " bytes)\n", argv[1 + r.dev], r.dev,
					r.off);
				goto out;
			}
			continue;
		}
		if (r.type == R_FLUSH) {
			flushes++;
			if (flushes > to)
				break;	/* the end of the subset's window */
			continue;
		}
		bool take;
		if (flushes < from)
			take = false;
		else if (flushes < to)
			take = true;
		else if (subset) {
			sub_seen++;
			take = rnd() % 100 < percent;
			sub_applied += take;
		} else
			take = false;
		if (!take)
			continue;
		ret = pwrite_all(fds[r.dev], r.data, r.len, r.off);
		if (ret) {
			fprintf(stderr, "wlog_replay: %s: %s\n", argv[1 + r.dev], strerror(-ret));
			goto out;
		}
		if (verbose)
			fprintf(stderr, "write %" PRIu32 " dev %" PRIu32 " off %" PRIu64 " len %" PRIu64
				"\n", r.nr, r.dev, r.off, r.len);
		applied++;
	}
	if (ret < 0)
		goto out;
	if (to != UINT64_MAX && flushes < to) {
		fprintf(stderr, "wlog_replay: the log has %" PRIu64 " flushes, not %" PRIu64 "\n",
			flushes, to);
		goto out;
	}
	printf("applied %" PRIu64 " writes (%" PRIu64 " of %" PRIu64 " from the subset)\n", applied,
	       sub_applied, sub_seen);
	rc = 0;
out:
	log_close(&lg);
out_fds:
	for (i = 0; i < nimg; i++)
		close(fds[i]);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "list"))
		return cmd_list(argv[2], false);
	if (argc == 3 && !strcmp(argv[1], "count"))
		return cmd_list(argv[2], true);
	if (argc >= 2 && !strcmp(argv[1], "apply"))
		return cmd_apply(argc - 2, argv + 2);
	return usage();
}
