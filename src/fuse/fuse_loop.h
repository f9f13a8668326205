/*
 * fuse: the request loop (loop.c).
 */
#ifndef UBTRFS_FUSE_LOOP_H
#define UBTRFS_FUSE_LOOP_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>

/* Serve `se` until the session ends; at most `max_threads` threads handle
 * requests.  0, or -errno if the loop could not start or the device
 * failed. */
int ubtrfs_fuse_loop(struct fuse_session *se, unsigned max_threads);

/* Called by a request handler (directly, or through the library's block
 * hook) when it is about to wait: another thread reads the next requests
 * meanwhile.  A no-op on threads other than the one reading requests. */
void ubtrfs_fuse_loop_yield(void);

#endif
