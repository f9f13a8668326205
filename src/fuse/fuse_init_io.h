/*
 * fuse: the session's device I/O with the INIT reply amended (init_io.c).
 */
#ifndef UBTRFS_FUSE_INIT_IO_H
#define UBTRFS_FUSE_INIT_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct ubtrfs_init_io {
	bool want_killpriv_v2;	/* set FUSE_HANDLE_KILLPRIV_V2 if offered */
	bool init_seen, init_replied;
	bool kernel_offers;	/* the INIT request carried the flag */
	bool killpriv_v2;	/* the reply we sent took it */
	uint64_t init_unique;
};

void ubtrfs_init_io_reset(struct ubtrfs_init_io *io, bool want_killpriv_v2);
/* read(2)/writev(2) on the FUSE device, watching for INIT. */
ssize_t ubtrfs_init_io_read(struct ubtrfs_init_io *io, int fd, void *buf, size_t len);
ssize_t ubtrfs_init_io_writev(struct ubtrfs_init_io *io, int fd, struct iovec *iov, int count);

#endif
