/*
 * file_stress: drive the engine's file data writes against a model.
 *
 *   file_stress IMAGE OPS SEED COMMIT_EVERY OUTDIR
 *
 * The top-level directory of IMAGE must hold regular files f0 .. f7 (the
 * test script makes them with the kernel, empty or not).  Their current
 * contents are read into the model, then OPS random operations run through
 * the engine: writes at random offsets (mostly small, some up to 1 MiB,
 * some past the end leaving holes), truncates (shrink and grow), overwrites
 * that split extents, small files that stay inline and grow out of it.
 * After every commit each file is read back through the read side and
 * compared with the model; every fifth commit the image is reopened first.
 * At the end the model's files are written to OUTDIR/f0.. for comparison
 * with the kernel's view.  Exit 0 ok, 1 mismatch or error.
 */
#include "base/base.h"
#include "fs/fs.h"
#include "trans/file_w.h"
#include "trans/trans.h"
#include "engine_tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NFILES 8
#define MAX_SIZE (6u << 20)

struct mfile {
	uint64_t ino;
	uint8_t *data;	/* MAX_SIZE bytes */
	uint64_t size;
};

static struct mfile files[NFILES];
static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "file_stress: %s: %s\n", what, ubt_strerror(err));
	return 1;
}

static int open_fs(const char *images, struct ubt_fs **fs)
{
	return engine_open(images, fs);
}

static void close_fs(struct ubt_fs *fs)
{
	engine_close(fs);
}

static int read_file(struct ubt_fs *fs, uint64_t ino, uint8_t *buf, uint64_t *size)
{
	const struct ubt_subvol *sv;
	struct ubt_inode in;
	int ret = ubt_fs_subvol(fs, BTRFS_FS_TREE_OBJECTID, &sv);

	if (!ret)
		ret = ubt_inode_read(fs, sv, ino, &in);
	if (ret)
		return ret;
	*size = btrfs_inode_size(&in.item);
	if (*size > MAX_SIZE)
		return -EFBIG;
	ssize_t n = ubt_file_read(fs, &in, buf, (size_t)*size, 0);
	if (n < 0)
		return (int)n;
	if ((uint64_t)n != *size)
		return -EIO;
	return 0;
}

static int verify(struct ubt_fs *fs, const char *when)
{
	static uint8_t buf[MAX_SIZE];
	int bad = 0;

	for (int f = 0; f < NFILES; f++) {
		uint64_t size;
		int ret = read_file(fs, files[f].ino, buf, &size);
		if (ret) {
			fprintf(stderr, "%s: f%d: %s\n", when, f, ubt_strerror(ret));
			bad++;
			continue;
		}
		if (size != files[f].size) {
			fprintf(stderr, "%s: f%d: size %" PRIu64 ", model %" PRIu64 "\n", when, f,
				size, files[f].size);
			bad++;
			continue;
		}
		for (uint64_t i = 0; i < size; i++) {
			if (buf[i] != files[f].data[i]) {
				fprintf(stderr, "%s: f%d: byte %" PRIu64 " is %02x, model %02x\n", when,
					f, i, buf[i], files[f].data[i]);
				bad++;
				break;
			}
		}
	}
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: file_stress IMAGE OPS SEED COMMIT_EVERY OUTDIR\n");
		return 2;
	}
	const char *image = argv[1];
	unsigned long ops = strtoul(argv[2], NULL, 0);
	rng_state = strtoull(argv[3], NULL, 0) * 2654435761u + 7;
	unsigned long every = strtoul(argv[4], NULL, 0);
	struct ubt_fs *fs;
	struct ubt_trans *t = NULL;
	int ret;

	ret = open_fs(image, &fs);
	if (ret)
		return fail("open for writing", ret);
	const struct ubt_subvol *sv;
	ret = ubt_fs_subvol(fs, BTRFS_FS_TREE_OBJECTID, &sv);
	if (ret)
		return fail("subvolume 5", ret);
	for (int f = 0; f < NFILES; f++) {
		char name[8];
		struct ubt_inode in;
		snprintf(name, sizeof(name), "f%d", f);
		ret = ubt_path_lookup(fs, sv, name, &in);
		if (ret)
			return fail(name, ret);
		files[f].ino = in.ino;
		files[f].data = calloc(1, MAX_SIZE);
		if (!files[f].data)
			return fail("memory", -ENOMEM);
		ret = read_file(fs, in.ino, files[f].data, &files[f].size);
		if (ret)
			return fail(name, ret);
	}
	static uint8_t wbuf[1 << 20];
	unsigned long commits = 0, writes = 0, truncs = 0;
	for (unsigned long i = 0; i <= ops; i++) {
		bool final = i == ops;
		if (!t) {
			ret = ubt_trans_start(fs, &t);
			if (ret)
				return fail("start transaction", ret);
		}
		if (!final) {
			struct mfile *m = &files[rnd() % NFILES];
			struct btrfs_timespec now = { 0 };
			btrfs_set_timespec_sec(&now, 1700000000 + i);
			unsigned r = (unsigned)(rnd() % 10);
			if (r < 8) {
				uint64_t len = rnd() % 4 ? 1 + rnd() % 5000 : 1 + rnd() % sizeof(wbuf);
				uint64_t span = m->size + 70000;
				uint64_t off = rnd() % 3 ? rnd() % (span ? span : 1) : m->size;
				if (rnd() % 16 == 0)
					off = rnd() % 200;	/* small files, inline */
				if (off >= MAX_SIZE)
					off = rnd() % MAX_SIZE;
				if (off + len > MAX_SIZE)
					len = MAX_SIZE - off;
				for (uint64_t b = 0; b < len; b++)
					wbuf[b] = (uint8_t)rnd();
				ret = ubt_file_write(t, BTRFS_FS_TREE_OBJECTID, m->ino, off, wbuf,
						     (size_t)len, &now);
				if (ret)
					return fail("write", ret);
				memcpy(m->data + off, wbuf, len);
				if (off + len > m->size)
					m->size = off + len;
				writes++;
			} else {
				uint64_t size = rnd() % 2 ? rnd() % (m->size + 1) : rnd() % (m->size + 300000);
				if (rnd() % 8 == 0)
					size = rnd() % 3000;
				if (size > MAX_SIZE)
					size = MAX_SIZE;
				ret = ubt_file_truncate(t, BTRFS_FS_TREE_OBJECTID, m->ino, size, &now);
				if (ret)
					return fail("truncate", ret);
				if (size < m->size)
					memset(m->data + size, 0, m->size - size);
				m->size = size;
				truncs++;
			}
		}
		if (final || (i + 1) % every == 0) {
			ret = ubt_trans_commit(t);
			t = NULL;
			if (ret)
				return fail("commit", ret);
			commits++;
			if (commits % 5 == 0 || final) {
				close_fs(fs);
				ret = open_fs(image, &fs);
				if (ret)
					return fail("reopen", ret);
			}
			char when[64];
			snprintf(when, sizeof(when), "after commit %lu (op %lu)", commits, i + 1);
			if (verify(fs, when))
				return 1;
		}
	}
	fprintf(stderr, "file_stress: %lu writes, %lu truncates, %lu commits\n", writes, truncs,
		commits);
	close_fs(fs);
	for (int f = 0; f < NFILES; f++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/f%d", argv[5], f);
		FILE *out = fopen(path, "wb");
		if (!out || fwrite(files[f].data, 1, files[f].size, out) != files[f].size ||
		    fclose(out))
			return fail(path, -errno);
		free(files[f].data);
	}
	return 0;
}
