/*
 * io layer: block devices behind an operations table.
 *
 * Everything above reads and writes devices only through struct ubt_bdev, so
 * tests substitute a memory device (no root, no files) and, later, devices
 * that inject faults or log every write and flush for crash tests.
 *
 * Contract of every implementation:
 *   - read/write transfer exactly `len` bytes at byte offset `off` or fail;
 *     a range past the end of the device is -EIO (never a short transfer);
 *   - write on a read-only device is -EROFS and changes nothing;
 *   - flush returns once every completed write is durable;
 *   - implementations are safe for concurrent reads from several threads.
 */
#ifndef UBTRFS_IO_H
#define UBTRFS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ubt_bdev;

struct ubt_bdev_ops {
	int (*read)(struct ubt_bdev *bd, void *buf, size_t len, uint64_t off);
	int (*write)(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off);
	int (*flush)(struct ubt_bdev *bd);
	/* Optional: does the mapping show every write to [off, off + len)? */
	bool (*map_current)(struct ubt_bdev *bd, uint64_t off, size_t len);
	/* Optional: let the host's cache of [off, off + len) go (advice). */
	void (*drop_cached)(struct ubt_bdev *bd, uint64_t off, size_t len);
	void (*destroy)(struct ubt_bdev *bd);
};

struct ubt_bdev {
	const struct ubt_bdev_ops *ops;
	uint64_t size;		/* bytes */
	bool readonly;
	char *name;		/* path or description, for messages */
	void *priv;
	/*
	 * The whole device mapped read-only (mmap of the file; the buffer of a
	 * memory device), or NULL where mapping failed or is not offered.
	 * Readers may take bytes straight from here instead of read() - the
	 * data path replies to FUSE from it without a copy.  Bounds are the
	 * caller's to check against `size`.  The mapping sees writes made
	 * through `write` (one page cache) where ubt_bdev_map_current says
	 * so (a file device gathers writes: bdev.c).  A file truncated
	 * behind our back
	 * would fault on access: the daemon assumes it owns its images.
	 */
	const uint8_t *map;
};

enum {
	UBT_BDEV_RDONLY = 1 << 0,
	UBT_BDEV_LOCK_SHARED = 1 << 1,	/* read-only: keep writers out (below) */
};

/*
 * Open a regular file or block device.  -errno on failure.  A writable
 * open takes an exclusive flock(2) on it (and, on Linux, opens a block
 * device O_EXCL: not while the kernel has it mounted); UBT_BDEV_LOCK_SHARED
 * takes a shared one.  Either is held until the device is closed, and a
 * conflicting lock held by anyone makes the open fail with -EBUSY: one
 * writer at a time, and no writer under a mount that caches what it read.
 */
int ubt_bdev_open_file(const char *path, unsigned flags, struct ubt_bdev **out);

/*
 * A device in memory of `size` bytes, zero-filled, or a copy of `init`
 * (init_len <= size) when init is non-NULL.  For tests.
 */
int ubt_bdev_open_memory(uint64_t size, const void *init, size_t init_len, unsigned flags,
			 struct ubt_bdev **out);
/* Direct access to a memory device's bytes (NULL for other kinds). */
uint8_t *ubt_bdev_memory_data(struct ubt_bdev *bd);

/*
 * Crash simulation, for tests: after ubt_bdev_crash_after(n), the first n
 * writes (over all devices of the process) reach their device and every
 * later one is silently dropped, as if the power failed after write n
 * (flushes still succeed).  n < 0 turns it off.  ubt_bdev_write_count()
 * counts every write since the process started.
 */
void ubt_bdev_crash_after(int64_t n);
bool ubt_bdev_crashed(void);
uint64_t ubt_bdev_write_count(void);

/*
 * Write log (io/wlog.c), a testing facility for crash tests: with
 * UBTRFS_WRITE_LOG=/path/file in the environment (read once, at the
 * process's first device write or flush), every write that reaches a device
 * and every flush is appended to that file (created or truncated), in the
 * devices' order, a flush before it returns; tests/tools/wlog_replay
 * rebuilds the devices after any prefix.  Format: the comment in wlog.c.
 * Unset, ubt_bdev_write/flush only test one flag.  ubt_wlog_active() says
 * whether logging is on (or broken: then the two calls fail with -EIO);
 * ubt_wlog_write/flush perform the device operation and log it.
 */
bool ubt_wlog_active(void);
int ubt_wlog_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off);
int ubt_wlog_flush(struct ubt_bdev *bd);

int ubt_bdev_read(struct ubt_bdev *bd, void *buf, size_t len, uint64_t off);
int ubt_bdev_write(struct ubt_bdev *bd, const void *buf, size_t len, uint64_t off);
int ubt_bdev_flush(struct ubt_bdev *bd);
/* May [off, off + len) be read through bd->map?  False while writes to it
 * are still gathered (ubt_bdev_read has them). */
bool ubt_bdev_map_current(struct ubt_bdev *bd, uint64_t off, size_t len);
/* Writes a file device has made directly (O_DIRECT, bdev.c); 0 for other
 * devices.  For tests and statistics. */
uint64_t ubt_bdev_direct_writes(struct ubt_bdev *bd);
/* Direct writes of a file device now in flight (0 for other devices). */
unsigned ubt_bdev_direct_inflight(struct ubt_bdev *bd);
/*
 * Direct-write faults, for tests (over all devices of the process, once):
 * after ubt_bdev_fault_direct(kind, n), the nth direct write submitted
 * from now on (FAULT_SHORT, FAULT_LOST), or the nth wait for direct writes
 * (FAULT_GETEVENTS), goes wrong for real.  SHORT: the host is asked to
 * write only the first half of the run (rounded down to 4 KiB; only runs
 * of 8 KiB or more count), so the write comes back short and the rest
 * never lands.
 * LOST: the host is asked to write nothing of it.  GETEVENTS: the wait
 * fails as if io_getevents had (EINVAL) without being made.  The device
 * must then make the write again through the page cache, before anything
 * newer of the same bytes, as it does after a real failure.
 * n 0 sets no fault.  ubt_bdev_fault_fired() says whether the fault set
 * last has happened (it was made; the host may still have refused the
 * submission itself).  The hook costs a relaxed load per direct write-out
 * and per wait for direct writes.
 */
enum ubt_bdev_fault {
	UBT_BDEV_FAULT_NONE,
	UBT_BDEV_FAULT_SHORT,
	UBT_BDEV_FAULT_LOST,
	UBT_BDEV_FAULT_GETEVENTS,
};
void ubt_bdev_fault_direct(enum ubt_bdev_fault kind, uint64_t n);
bool ubt_bdev_fault_fired(void);
/* Advice only: fetch the pages of mapped bytes [p, p + len) (of some
 * device's `map`) into the page cache now, without waiting for them. */
void ubt_map_willneed(const uint8_t *p, size_t len);
/*
 * Advice only: bytes [off, off + len) of the device are not wanted again
 * soon.  Unmaps their pages from bd->map and lets the host drop them from
 * its page cache (clean pages only: dirty ones and ones under writeback
 * stay).  Never loses data: a later read reads them again.
 */
void ubt_bdev_drop_cached(struct ubt_bdev *bd, uint64_t off, size_t len);
void ubt_bdev_close(struct ubt_bdev *bd);

#endif /* UBTRFS_IO_H */
