/*
 * append_stress: small appending writes through the public API (which
 * holds them back and joins them, api_write.c) against a model.
 *
 *   append_stress IMAGE OPS SEED OUTDIR
 *   append_stress IMAGE fill SEED OUTDIR
 *
 * Creates files a0 .. a5 in the top directory of IMAGE's default subvolume
 * (replacing any of that name), then runs OPS random calls: runs of small
 * appends, mostly continuing the file the last call wrote (what tar does),
 * interleaved with every kind of call that must see them first - reads,
 * stats, lookups, overwrites inside the file, large writes, truncates,
 * unlinks, renames, commits, and closing and reopening the handle.  Every
 * read and stat is checked against the model at once; ubtrfs_stat_mode
 * must report the mode without making the held writes land (the size it
 * reports may lag; it is not checked).  At the end the files are compared
 * once more and the model written to OUTDIR/a0.. for the kernel.
 *
 * `fill` appends runs of small pieces until the filesystem is full: the
 * write that does not fit must fail with ENOSPC (the held-back writes
 * before it must not be what fails later), and then everything written
 * before must be there, in the model, after the handle is closed.
 * Exit 0 ok, 1 mismatch or error.
 */
#include <ubtrfs/ubtrfs.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NFILES 6
#define MAX_SIZE (4u << 20)

struct mfile {
	char name[8];
	ubtrfs_ino id;
	uint8_t *data;	/* MAX_SIZE bytes */
	uint64_t size;
	uint32_t mode;
	struct timespec wrote;	/* just before the last write returned */
};

static struct mfile files[NFILES];
static uint64_t rng_state;
static ubtrfs_fs *fs;
static ubtrfs_ino root;
static const char *image;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static int fail(long op, const char *what, long long err)
{
	fprintf(stderr, "append_stress: op %ld: %s: %s\n", op, what, strerror((int)-err));
	return 1;
}

static int mismatch(long op, const char *what, long long got, long long want)
{
	fprintf(stderr, "append_stress: op %ld: %s is %lld, the model says %lld\n", op, what, got,
		want);
	return 1;
}

static int open_fs(void)
{
	const char *devs[] = { image };
	int ret = ubtrfs_open(devs, 1, UBTRFS_OPEN_RDWR, &fs);

	if (ret)
		return ret;
	return ubtrfs_subvol_root(fs, ubtrfs_default_subvol(fs), &root);
}

static int make_file(struct mfile *m)
{
	struct ubtrfs_stat st;
	int ret = ubtrfs_unlink(fs, root, m->name);

	if (ret && ret != -ENOENT)
		return ret;
	m->mode = 0600 | (uint32_t)below(2) * 044;
	ret = ubtrfs_create(fs, root, m->name, m->mode, 0, 0, &st);
	if (ret)
		return ret;
	m->id = st.id;
	m->size = 0;
	memset(&m->wrote, 0, sizeof(m->wrote));
	return 0;
}

static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = rnd();
		memcpy(p + i, &v, n - i < 8 ? n - i : 8);
	}
}

/* Write len bytes at off through the API and into the model. */
static int do_write(long op, struct mfile *m, uint64_t off, size_t len)
{
	static uint8_t buf[MAX_SIZE];

	if (off + len > MAX_SIZE)
		return 0;
	fill(buf, len);
	clock_gettime(CLOCK_REALTIME, &m->wrote);
	ssize_t n = ubtrfs_write(fs, m->id, buf, len, off);
	if (n < 0)
		return fail(op, "write", n);
	if (n != (ssize_t)len)
		return mismatch(op, "write length", n, (long long)len);
	if (off > m->size)
		memset(m->data + m->size, 0, off - m->size);
	memcpy(m->data + off, buf, len);
	if (off + len > m->size)
		m->size = off + len;
	return 0;
}

static int check_read(long op, struct mfile *m, uint64_t off, size_t len)
{
	static uint8_t buf[MAX_SIZE];
	size_t want = off >= m->size ? 0 : (size_t)(m->size - off < len ? m->size - off : len);
	ssize_t n = ubtrfs_read(fs, m->id, buf, len, off);

	if (n < 0)
		return fail(op, "read", n);
	if (n != (ssize_t)want)
		return mismatch(op, "read length", n, (long long)want);
	if (memcmp(buf, m->data + off, want)) {
		fprintf(stderr, "append_stress: op %ld: %s bytes %" PRIu64 "+%zu differ\n", op,
			m->name, off, want);
		return 1;
	}
	return 0;
}

static int check_stat(long op, struct mfile *m)
{
	struct ubtrfs_stat st;
	int ret = ubtrfs_stat(fs, m->id, &st);

	if (ret)
		return fail(op, "stat", ret);
	if (st.size != m->size)
		return mismatch(op, "stat size", (long long)st.size, (long long)m->size);
	/* mtime: the last write's time, not an earlier one (truncates and
	 * renames set it too, later: never earlier than the last write) */
	if (st.mtime.sec < m->wrote.tv_sec ||
	    (st.mtime.sec == m->wrote.tv_sec && st.mtime.nsec < m->wrote.tv_nsec))
		return mismatch(op, "mtime (ns before the last write)",
				((long long)m->wrote.tv_sec - st.mtime.sec) * 1000000000ll +
					m->wrote.tv_nsec - st.mtime.nsec,
				0);
	return 0;
}

static int check_all(long op)
{
	for (int i = 0; i < NFILES; i++)
		if (files[i].id.ino &&
		    (check_stat(op, &files[i]) || check_read(op, &files[i], 0, MAX_SIZE)))
			return 1;
	return 0;
}

/* Append len bytes of noise to m: the write's result (the model follows
 * on success). */
static ssize_t try_append(struct mfile *m, size_t len)
{
	static uint8_t buf[8192];
	struct timespec before;

	if (len > sizeof(buf) || m->size + len > MAX_SIZE)
		return -EFBIG;
	fill(buf, len);
	clock_gettime(CLOCK_REALTIME, &before);
	ssize_t n = ubtrfs_write(fs, m->id, buf, len, m->size);
	if (n == (ssize_t)len) {
		memcpy(m->data + m->size, buf, len);
		m->size += len;
		m->wrote = before;
	}
	return n;
}

/*
 * After `fill`: a file with a regular extent cut to 100 bytes, the data
 * space used up to its last sectors (whole-sector appends to another file
 * until ENOSPC comes twice), then the cut file appended to - a write that
 * would be inline-sized but must rewrite a data sector.  It may fail with ENOSPC; it must not be
 * held back and fail later (the commit after it must work).
 */
static int last_sector(long op)
{
	struct mfile *z = NULL, *v = NULL;

	for (int i = 0; i < NFILES; i++) {
		if (!files[i].id.ino)
			continue;
		if (!z && files[i].size + 16 * 4096 <= MAX_SIZE)
			z = &files[i];
		else if (!v && files[i].size > 8192)
			v = &files[i];
	}
	if (!z || !v)
		return 0;
	struct ubtrfs_setattr a;
	memset(&a, 0, sizeof(a));
	a.valid = UBTRFS_SET_SIZE;
	a.size = 100;
	int ret = ubtrfs_setattr(fs, v->id, &a, NULL);
	if (ret)
		return fail(op, "cutting a file to 100 bytes", ret);
	v->size = 100;
	ret = ubtrfs_commit(fs);
	if (ret)
		return fail(op, "the commit after the cut", ret);
	for (int nospc = 0; nospc < 2;) {
		ssize_t n = try_append(z, z->size % 4096 ? 4096 - z->size % 4096 : 4096);
		if (n == -ENOSPC || n == -EFBIG)
			nospc++;
		else if (n < 0)
			return fail(op, "a last-sector append", n);
	}
	ssize_t n = try_append(v, 10);
	if (n < 0 && n != -ENOSPC)
		return fail(op, "an append after the cut", n);
	ret = ubtrfs_commit(fs);
	if (ret)
		return fail(op, "the commit after the append", ret);
	return 0;
}

static int reopen(long op)
{
	ubtrfs_close(fs);
	fs = NULL;
	int ret = open_fs();
	if (ret)
		return fail(op, "reopen", ret);
	for (int i = 0; i < NFILES; i++) {
		struct ubtrfs_stat st;
		if (!files[i].id.ino)
			continue;
		ret = ubtrfs_lookup(fs, root, files[i].name, &st);
		if (ret)
			return fail(op, "lookup after reopen", ret);
		files[i].id = st.id;
	}
	return 0;
}

static int one_op(long op, struct mfile **last)
{
	struct mfile *m = below(10) < 7 ? *last : &files[below(NFILES)];
	uint64_t r = below(100);
	int ret;

	*last = m;
	if (r < 50) {		/* a run of appends, tar-sized pieces */
		for (uint64_t k = 1 + below(6); k--;)
			if (do_write(op, m, m->size, 1 + below(below(4) ? 10240 : 70000)))
				return 1;
		return 0;
	}
	if (r < 56)		/* an append that does not start at the end */
		return do_write(op, m, m->size + below(9000), 1 + below(5000));
	if (r < 62)		/* an overwrite inside the file */
		return do_write(op, m, below(m->size + 1), 1 + below(9000));
	if (r < 65)		/* a large write at the end */
		return do_write(op, m, m->size, 65536 + below(300000));
	if (r < 72)
		return check_read(op, m, below(m->size + 100), 1 + below(20000));
	if (r < 77)
		return check_stat(op, m);
	if (r < 80) {		/* the mode, without the writes landing */
		struct ubtrfs_stat st;
		ret = ubtrfs_stat_mode(fs, m->id, &st);
		if (ret)
			return fail(op, "stat_mode", ret);
		if ((st.mode & 07777) != m->mode)
			return mismatch(op, "stat_mode mode", st.mode & 07777, m->mode);
		return 0;
	}
	if (r < 83) {		/* a lookup returns the size too */
		struct ubtrfs_stat st;
		ret = ubtrfs_lookup(fs, root, m->name, &st);
		if (ret)
			return fail(op, "lookup", ret);
		if (st.size != m->size)
			return mismatch(op, "lookup size", (long long)st.size, (long long)m->size);
		return 0;
	}
	if (r < 87) {		/* truncate, shrink or grow */
		struct ubtrfs_setattr a;
		memset(&a, 0, sizeof(a));
		a.valid = UBTRFS_SET_SIZE;
		a.size = below(m->size + 20000);
		if (a.size > MAX_SIZE)
			return 0;
		ret = ubtrfs_setattr(fs, m->id, &a, NULL);
		if (ret)
			return fail(op, "truncate", ret);
		if (a.size > m->size)
			memset(m->data + m->size, 0, a.size - m->size);
		m->size = a.size;
		return 0;
	}
	if (r < 89) {		/* a new file under the name */
		ret = make_file(m);
		return ret ? fail(op, "recreate", ret) : 0;
	}
	if (r < 91) {		/* two names trade places */
		struct mfile *o = &files[below(NFILES)], tmp;
		if (o == m)
			return 0;
		ret = ubtrfs_rename(fs, root, m->name, root, o->name, UBTRFS_RENAME_EXCHANGE);
		if (ret)
			return fail(op, "rename", ret);
		tmp = *m;
		m->id = o->id;
		m->data = o->data;
		m->size = o->size;
		m->mode = o->mode;
		m->wrote = o->wrote;
		o->wrote = tmp.wrote;
		o->id = tmp.id;
		o->data = tmp.data;
		o->size = tmp.size;
		o->mode = tmp.mode;
		return 0;
	}
	if (r < 94) {
		ret = ubtrfs_commit(fs);
		return ret ? fail(op, "commit", ret) : 0;
	}
	if (r < 95)		/* the handle closed with writes held back */
		return reopen(op) || check_all(op);
	return check_all(op);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: append_stress IMAGE OPS SEED OUTDIR\n");
		return 2;
	}
	image = argv[1];
	long ops = strtol(argv[2], NULL, 10);
	rng_state = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
	int ret = open_fs();
	if (ret)
		return fail(-1, "open", ret);
	for (int i = 0; i < NFILES; i++) {
		snprintf(files[i].name, sizeof(files[i].name), "a%d", i);
		files[i].data = calloc(1, MAX_SIZE);
		if (!files[i].data)
			return fail(-1, "calloc", -ENOMEM);
		ret = make_file(&files[i]);
		if (ret)
			return fail(-1, "create", ret);
	}
	struct mfile *last = &files[0];
	if (!strcmp(argv[2], "fill")) {
		static uint8_t buf[200000];
		long op = 0, nospc = 0;
		for (; nospc < 20; op++) {
			struct mfile *m = below(8) ? last : &files[below(NFILES)];
			size_t len = 1 + below(below(6) ? 16384 : sizeof(buf));
			last = m;
			if (!m->id.ino)
				continue;
			uint64_t r = below(100);
			if (r < 3) {	/* cut down: its extent stays, no longer inline-sized */
				struct ubtrfs_setattr a;
				struct ubtrfs_stat st;
				memset(&a, 0, sizeof(a));
				a.valid = UBTRFS_SET_SIZE;
				a.size = below(3000);
				if (a.size < m->size && ubtrfs_setattr(fs, m->id, &a, NULL)) {
					/* ENOSPC part way: a shorter file all the same */
					ret = ubtrfs_stat(fs, m->id, &st);
					if (ret)
						return fail(op, "stat after a failed truncate", ret);
					a.size = st.size;
				}
				if (a.size < m->size)
					m->size = a.size;
				continue;
			}
			if (r < 6) {	/* preallocated past the end, then appended to */
				ret = ubtrfs_fallocate(fs, m->id, 1, m->size, 1 + below(200000));
				if (ret && ret != -ENOSPC)
					return fail(op, "fallocate", ret);
				continue;
			}
			if (m->size + len > MAX_SIZE) {
				last = &files[below(NFILES)];
				continue;
			}
			fill(buf, len);
			struct timespec before;
			clock_gettime(CLOCK_REALTIME, &before);
			ssize_t n = ubtrfs_write(fs, m->id, buf, len, m->size);
			if (n == -ENOSPC) {
				nospc++;
				continue;
			}
			if (n < 0)
				return fail(op, "write", n);
			if (n != (ssize_t)len)
				return mismatch(op, "write length", n, (long long)len);
			memcpy(m->data + m->size, buf, len);
			m->size += len;
			m->wrote = before;
			if (m->size + sizeof(buf) > MAX_SIZE) {
				/* full in the model: a new file under the name */
				char path[4096];
				snprintf(path, sizeof(path), "%s/%s.%ld", argv[4], m->name, op);
				FILE *f = fopen(path, "wb");
				if (!f || fwrite(m->data, 1, m->size, f) != m->size || fclose(f))
					return fail(op, "saving a full file", -EIO);
				char nn[64];
				snprintf(nn, sizeof(nn), "%s.%ld", m->name, op);
				ret = ubtrfs_rename(fs, root, m->name, root, nn, 0);
				if (ret == -ENOSPC) {
					remove(path);
					break;
				}
				if (!ret) {
					ret = make_file(m);
					if (ret == -ENOSPC) {
						m->id.ino = 0;	/* the name is gone */
						break;
					}
				}
				if (ret)
					return fail(op, "rename a full file", ret);
			}
		}
		printf("append_stress: %ld writes until ENOSPC came 20 times\n", op);
		ops = op;
		if (last_sector(op))
			return 1;
	}
	for (long op = 0; op < ops && strcmp(argv[2], "fill"); op++)
		if (one_op(op, &last))
			return 1;
	/* Closed with the last writes perhaps held back; read back after. */
	if (reopen(ops) || check_all(ops))
		return 1;
	ubtrfs_close(fs);
	for (int i = 0; i < NFILES; i++) {
		char path[4096];
		if (!files[i].id.ino)
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[4], files[i].name);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(files[i].data, 1, files[i].size, f) != files[i].size || fclose(f)) {
			fprintf(stderr, "append_stress: cannot write %s\n", path);
			return 1;
		}
	}
	printf("append_stress: %ld operations, files compared\n", ops);
	return 0;
}
