/*
 * Shared by api.c and api_fs.c only: the public handle's layout.
 */
#ifndef UBTRFS_API_INTERNAL_H
#define UBTRFS_API_INTERNAL_H

#include <stdbool.h>

struct ubt_fs;

struct ubtrfs_fs {
	struct ubt_fs *fs;
	bool readonly;
};

#endif
