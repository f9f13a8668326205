/*
 * fuse: the session's device I/O, through libfuse's custom-I/O hook, so
 * that a read-write mount can take over setuid/setgid clearing from the
 * kernel (FUSE_HANDLE_KILLPRIV_V2) although the libfuse we build against
 * (3.14, Debian 12) does not know that flag.
 *
 * Why: without it the kernel asks GETXATTR("security.capability") before
 * every WRITE (it may cache "nothing to clear" only on superblocks with
 * SB_NOSEC, which FUSE sets only under KILLPRIV_V2) and refreshes the
 * attributes with a GETATTR before every chown, to compute the mode it
 * would clear: two of the ~14 requests an untarred file costs.
 *
 * What the flag hands us, per the FUSE protocol: clear setuid (and setgid
 * where group-execute is set) on a write, a truncate or an O_TRUNC open by
 * a caller without CAP_FSETID, and on chown.  The daemon already applies
 * exactly these rules itself (killpriv.c, op_write, op_setattr (truncates
 * and O_TRUNC opens come as SETATTRs), fallocate, copy_file_range), which is what makes the flag safe to set.
 * security.capability stays the VFS's: it still removes it on write (once
 * per inode and attribute refresh) and on chown.
 *
 * How: reads pass through unchanged, noting the INIT request's unique id
 * and whether the kernel offered the flag; the one reply with that id gets
 * the flag added to its flags.  Every other reply passes through.
 */
#include "fuse_init_io.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/fuse.h>
#define HAVE_INIT_PATCH 1
#endif

void ubtrfs_init_io_reset(struct ubtrfs_init_io *io, bool want_killpriv_v2)
{
	memset(io, 0, sizeof(*io));
	io->want_killpriv_v2 = want_killpriv_v2;
}

ssize_t ubtrfs_init_io_read(struct ubtrfs_init_io *io, int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);
#ifdef HAVE_INIT_PATCH
	if (!io->init_seen && n >= (ssize_t)(sizeof(struct fuse_in_header) +
					      offsetof(struct fuse_init_in, flags) + 4)) {
		struct fuse_in_header h;
		memcpy(&h, buf, sizeof(h));
		if (h.opcode == FUSE_INIT) {
			struct fuse_init_in in;
			memset(&in, 0, sizeof(in));
			size_t have = (size_t)n - sizeof(h);
			memcpy(&in, (const char *)buf + sizeof(h), have < sizeof(in) ? have : sizeof(in));
			io->init_unique = h.unique;
			io->kernel_offers = (in.flags & FUSE_HANDLE_KILLPRIV_V2) != 0 && in.major == 7 &&
					    in.minor >= 33;
			io->init_seen = true;
		}
	}
#else
	(void)io;
#endif
	return n;
}

ssize_t ubtrfs_init_io_writev(struct ubtrfs_init_io *io, int fd, struct iovec *iov, int count)
{
#ifdef HAVE_INIT_PATCH
	if (io->init_seen && !io->init_replied && count >= 2 &&
	    iov[0].iov_len == sizeof(struct fuse_out_header)) {
		struct fuse_out_header h;
		memcpy(&h, iov[0].iov_base, sizeof(h));
		if (h.unique == io->init_unique) {
			io->init_replied = true;
			if (h.error == 0 && iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4 &&
			    iov[1].iov_len <= sizeof(struct fuse_init_out) &&
			    count <= 8) {
				struct fuse_init_out out;
				struct iovec v[8];
				memset(&out, 0, sizeof(out));
				memcpy(&out, iov[1].iov_base, iov[1].iov_len);
				/* What the kernel will run with decides, also
				 * where a newer libfuse set the flag itself. */
				if (io->want_killpriv_v2 && io->kernel_offers)
					out.flags |= FUSE_HANDLE_KILLPRIV_V2;
				else
					out.flags &= ~(uint32_t)FUSE_HANDLE_KILLPRIV_V2;
				io->killpriv_v2 = (out.flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
				memcpy(v, iov, (size_t)count * sizeof(*v));
				v[1].iov_base = &out;
				return writev(fd, v, count);
			}
		}
	}
#else
	(void)io;
#endif
	return writev(fd, iov, count);
}
