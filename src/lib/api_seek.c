/*
 * The public API: lseek(2) SEEK_DATA / SEEK_HOLE over the read side.
 *
 * Data is what ubtrfs_data_ranges reports (regular and compressed extents,
 * inline data); holes and preallocated extents are holes, as btrfs reports
 * them.  Everything from the size on is a hole (the virtual hole at EOF).
 */
#include <ubtrfs/ubtrfs.h>

#include <errno.h>
#include <unistd.h>

struct seek_ctx {
	uint64_t off, size;
	int whence;
	uint64_t result;
	bool found;
};

/* Ranges come in file order. */
static int seek_cb(void *ctx, uint64_t off, uint64_t len)
{
	struct seek_ctx *c = ctx;
	uint64_t end = off + len;

	if (end > c->size)
		end = c->size;
	if (off >= end || end <= c->off)
		return 0;	/* empty, or wholly before the offset */
	if (c->whence == SEEK_DATA) {
		c->result = off > c->off ? off : c->off;
		c->found = true;
		return 1;
	}
	/* SEEK_HOLE: the first byte at or after off not covered. */
	if (off > c->result) {
		c->found = true;
		return 1;
	}
	c->result = end;
	return 0;
}

int ubtrfs_lseek(ubtrfs_fs *fs, ubtrfs_ino id, uint64_t off, int whence, uint64_t *out)
{
	struct ubtrfs_stat st;
	int ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	ret = ubtrfs_stat(fs, id, &st);
	if (ret)
		return ret;
	if (off >= st.size)
		return -ENXIO;
	struct seek_ctx c = { off, st.size, whence, off, false };
	ret = ubtrfs_data_ranges(fs, id, seek_cb, &c);
	if (ret < 0)
		return ret;
	if (whence == SEEK_DATA) {
		if (!c.found)
			return -ENXIO;
		*out = c.result;
	} else {
		*out = c.result < st.size ? c.result : st.size;
	}
	return 0;
}
