/*
 * unit: fs/file_read, volume, io - drop-behind of a sequential read.
 *
 * A file read from start to end in 256 KiB requests (as FUSE sends them)
 * through ubt_file_read_vec is a sequential stream; what it read more than
 * a few MiB ago is let go from the host's page cache of the image.  On an
 * image `ubtrfs_mkfs --rootdir` makes with one 48 MiB file of
 * pseudo-random bytes, wholly in the host's page cache and clean before the
 * read (read once, fsync'd):
 *  - every request returns exactly the file's bytes;
 *  - afterwards at least 32 MiB of the file's bytes in the image (found by
 *    their content) have left the page cache (mincore(2) on a mapping of
 *    our own), and at most 2 MiB of the rest of the image (the alignment
 *    before the file's start): only what the stream had read;
 *  - a second read of the whole file (the dropped part comes from the disk
 *    again) returns exactly the file's bytes.
 * The image is made in the working directory (meson's build directory), or
 * in /tmp if that is tmpfs (whose pages cannot be dropped); where neither
 * will do the test is skipped - a failure under UBTRFS_REQUIRE_ORACLE=1.
 */
#include "t.h"

#include "base/base.h"
#include "fs/fs.h"
#include <ubtrfs/ubtrfs.h>

#ifdef __linux__
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#define FILE_BYTES	((size_t)48 << 20)
#define IMAGE_BYTES	((uint64_t)256 << 20)
#define REQ		((size_t)256 << 10)
#define MIB		((size_t)1 << 20)

static uint8_t *data;	/* the file's bytes */

/* Pages of [map, map + len) in the host's page cache. */
static size_t resident(const uint8_t *map, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (len + pg - 1) / pg, count = 0;
	unsigned char *vec = malloc(n);

	CHECK(vec != NULL);
	if (!vec)
		return 0;
	CHECK_EQ_INT(mincore((void *)(uintptr_t)map, len, (void *)vec), 0);
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	free(vec);
	return count * pg;
}

/* Read the whole file as FUSE would; true when every byte is right. */
static bool read_all(struct ubt_fs *fs, const struct ubt_inode *in, uint8_t *buf)
{
	bool same = true;

	for (size_t off = 0; off < FILE_BYTES; off += REQ) {
		struct iovec iov[64];
		size_t cnt = 64, at = off;
		ssize_t n = ubt_file_read_vec(fs, in, buf, REQ, off, iov, &cnt);
		if (n != (ssize_t)REQ) {
			fprintf(stderr, "read at %zu: %zd\n", off, n);
			return false;
		}
		for (size_t i = 0; i < cnt; i++) {
			if (at + iov[i].iov_len > off + REQ ||
			    memcmp(iov[i].iov_base, data + at, iov[i].iov_len))
				same = false;
			at += iov[i].iov_len;
		}
		if (at != off + REQ)
			same = false;
		if (!same) {
			fprintf(stderr, "wrong bytes in the request at %zu\n", off);
			return false;
		}
	}
	return true;
}

static bool write_file(const char *path, const uint8_t *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	bool ok = fd >= 0 && write(fd, p, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok;
}

static void run(const char *dir)
{
	char root[256], file[300], image[300];
	struct ubt_fs *fs = NULL;
	const struct ubt_subvol *sv;
	struct ubt_inode in;
	uint8_t *buf = malloc(REQ), *map = MAP_FAILED;
	int fd = -1;

	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(file, sizeof(file), "%s/big", root);
	snprintf(image, sizeof(image), "%s/image", dir);
	CHECK(buf != NULL);
	CHECK_EQ_INT(mkdir(root, 0755), 0);
	CHECK(write_file(file, data, FILE_BYTES));

	const char *devs[1] = { image };
	struct ubtrfs_mkfs_opts mo = { 0 };
	mo.byte_count = IMAGE_BYTES;
	mo.rootdir = root;
	int ret = ubtrfs_mkfs(devs, 1, &mo);
	CHECK_EQ_INT(ret, 0);
	unlink(file);
	rmdir(root);
	if (ret || !buf)
		goto out;

	/* The whole image cached and clean. */
	fd = open(image, O_RDONLY);
	CHECK(fd >= 0);
	if (fd < 0)
		goto out;
	CHECK_EQ_INT(fsync(fd), 0);
	for (uint64_t off = 0; off < IMAGE_BYTES; off += REQ)
		CHECK(pread(fd, buf, REQ, (off_t)off) == (ssize_t)REQ);
	map = mmap(NULL, IMAGE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	if (map == MAP_FAILED)
		goto out;
	/* Where the file's bytes are in the image (mkfs writes them in one
	 * run): its first 4 KiB are unique. */
	const uint8_t *hit = memmem(map, IMAGE_BYTES, data, 4096);
	CHECK(hit != NULL);
	if (!hit)
		goto out;
	size_t at = (size_t)(hit - map);
	CHECK(at + FILE_BYTES <= IMAGE_BYTES && !memcmp(hit, data, FILE_BYTES));
	if (at + FILE_BYTES > IMAGE_BYTES)
		goto out;
	/* Searching mapped the pages into this process, and the host keeps
	 * mapped pages: unmap them again (a shared file mapping only loses its
	 * page-table entries). */
	CHECK_EQ_INT(madvise(map, IMAGE_BYTES, MADV_DONTNEED), 0);
	size_t file_before = resident(hit, FILE_BYTES);
	size_t all_before = resident(map, IMAGE_BYTES);
	printf("the file at image offset %zu; cached before: the file's %zu MiB, the image's %zu MiB\n",
	       at, file_before / MIB, all_before / MIB);
	CHECK(file_before == FILE_BYTES);

	struct ubt_fs_opts o = { 0 };
	const char *paths[1] = { image };
	ret = ubt_fs_open(paths, 1, &o, &fs);
	CHECK_EQ_INT(ret, 0);
	if (!ret)
		ret = ubt_fs_subvol(fs, 5, &sv);
	if (!ret)
		ret = ubt_path_lookup(fs, sv, "big", &in);
	CHECK_EQ_INT(ret, 0);
	if (ret)
		goto out;
	CHECK_EQ_U64(in.item.size, FILE_BYTES);

	CHECK(read_all(fs, &in, buf));
	size_t file_after = resident(hit, FILE_BYTES);
	size_t all_after = resident(map, IMAGE_BYTES);
	size_t gone = file_before - file_after;
	size_t others_before = all_before - file_before, others_after = all_after - file_after;
	size_t others_gone = others_before > others_after ? others_before - others_after : 0;
	printf("after one sequential read of %zu MiB: %zu MiB of the file and %zu KiB of the "
	       "rest left the page cache\n", FILE_BYTES / MIB, gone / MIB, others_gone >> 10);
	CHECK(gone >= (size_t)32 << 20);
	CHECK(others_gone <= 2 * MIB);

	CHECK(read_all(fs, &in, buf));	/* again, partly from the disk */
out:
	if (fs)
		ubt_fs_close(fs);
	if (map != MAP_FAILED)
		munmap(map, IMAGE_BYTES);
	if (fd >= 0)
		close(fd);
	unlink(image);
	free(buf);
}

int main(void)
{
	static const char *const dirs[] = { ".", "/tmp" };
	char dir[64] = "";
	bool have = false;
	uint64_t rng = 0x5eed0fd20bull;

	for (size_t i = 0; i < UBT_ARRAY_SIZE(dirs) && !have; i++) {
		struct statfs sf;
		snprintf(dir, sizeof(dir), "%s/ubtrfs-test-drop-XXXXXX", dirs[i]);
		if (!mkdtemp(dir))
			continue;
		if (statfs(dir, &sf) == 0 && sf.f_type != TMPFS_MAGIC)
			have = true;
		else
			rmdir(dir);
	}
	if (!have)
		return t_skip("no directory whose page cache can be dropped (the working "
			      "directory and /tmp are tmpfs or not writable)");
	data = malloc(FILE_BYTES);
	CHECK(data != NULL);
	if (data) {
		for (size_t i = 0; i < FILE_BYTES; i += 8) {
			uint64_t v = t_xorshift64(&rng);
			memcpy(data + i, &v, 8);
		}
		run(dir);
	}
	rmdir(dir);
	free(data);
	return t_finish();
}
#else
int main(void)
{
	return t_skip("drop-behind is measured with mincore(2) and fadvise on Linux");
}
#endif
