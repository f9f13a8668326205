/*
 * Shared by the engine test tools: open a filesystem for writing and close
 * it again.
 */
#ifndef UBTRFS_TESTS_ENGINE_TOOL_H
#define UBTRFS_TESTS_ENGINE_TOOL_H

#include "fs/fs.h"
#include "trans/trans.h"

#include <stdio.h>
#include <string.h>

/*
 * Open the filesystem on `images` (one path, or several separated by
 * commas) writable, with a small block cache so that blocks are evicted and
 * read back, and prepare the writer.  0 or -errno (nothing left open).
 */
static inline int engine_open(const char *images, struct ubt_fs **fs)
{
	struct ubt_fs_opts o = { 0 };
	const char *paths[16];
	size_t n = 0;
	char buf[4096];
	int ret;

	snprintf(buf, sizeof(buf), "%s", images);
	for (char *save = NULL, *p = strtok_r(buf, ",", &save); p && n < 16;
	     p = strtok_r(NULL, ",", &save))
		paths[n++] = p;
	o.vol.writable = true;
	o.cache_bytes = 8ull << 20;
	ret = ubt_fs_open(paths, n, &o, fs);
	if (ret)
		return ret;
	ret = ubt_wfs_init(*fs);
	if (ret) {
		ubt_fs_close(*fs);
		*fs = NULL;
	}
	return ret;
}

static inline void engine_close(struct ubt_fs *fs)
{
	ubt_wfs_destroy(fs);
	ubt_fs_close(fs);
}

#endif /* UBTRFS_TESTS_ENGINE_TOOL_H */
