/*
 * libubtrfs: read and write btrfs filesystems from userspace.
 *
 * The public API.  Handles are opaque; every function that can fail returns 0
 * or a negative errno and passes results through out-parameters.  Errors of
 * our own meaning (corruption is -EUCLEAN, an unsupported feature is
 * -EOPNOTSUPP) are explained by ubtrfs_strerror().  The library never writes
 * to stdout and never exits the process; diagnostics go to the log handler
 * (stderr by default).
 *
 * Thread-safety: functions that take no handle are thread-safe.  A handle may
 * be used by several threads at once unless a function says otherwise.
 */
#ifndef UBTRFS_UBTRFS_H
#define UBTRFS_UBTRFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UBTRFS_API __attribute__((visibility("default")))

/* ---- library ---------------------------------------------------------- */

UBTRFS_API const char *ubtrfs_version(void);
/* A message for a negative errno returned by this library; never NULL. */
UBTRFS_API const char *ubtrfs_strerror(int err);

enum ubtrfs_log_level {
	UBTRFS_LOG_ERROR = 0,
	UBTRFS_LOG_WARNING = 1,
	UBTRFS_LOG_INFO = 2,
	UBTRFS_LOG_DEBUG = 3,
};
typedef void (*ubtrfs_log_fn)(void *ctx, int level, const char *msg);
/* Process-wide; set before other threads use the library.  NULL: stderr. */
UBTRFS_API void ubtrfs_set_log_handler(ubtrfs_log_fn fn, void *ctx);
UBTRFS_API void ubtrfs_set_log_level(int max_level);

/* Text output of inspection functions goes through a writer the caller owns. */
typedef void (*ubtrfs_write_fn)(void *ctx, const char *text, size_t len);

/* ---- superblock inspection -------------------------------------------- */

struct ubtrfs_dump_super_opts {
	int copy;		/* superblock copy 0..2 (64 KiB, 64 MiB, 256 GiB) */
	bool all;		/* every copy that fits on the device (-a) */
	bool full;		/* system chunk array and backup roots too (-f) */
	bool force;		/* print even without a valid magic (-F) */
};

/*
 * Print the superblock(s) of one device in the form of
 * `btrfs inspect-internal dump-super`.  Returns 0 when everything requested
 * was printed; -EUCLEAN when a copy fails validation (it is still printed
 * with the reason when `force` is set; otherwise the reason is logged);
 * -ENOENT when a requested copy lies past the end of the device.
 */
UBTRFS_API int ubtrfs_dump_super(const char *device, const struct ubtrfs_dump_super_opts *opts,
				 ubtrfs_write_fn write, void *ctx);

/* ---- filesystems ------------------------------------------------------ */

typedef struct ubtrfs_fs ubtrfs_fs;

enum ubtrfs_open_flags {
	UBTRFS_OPEN_RDWR = 1 << 0,	/* default is read-only */
};

/*
 * Open the filesystem on `ndev` devices (image files or block devices).  The
 * newest valid superblock copy is used.  Feature policy, as ext2/3/4 do it:
 * an incompat feature we do not support refuses the open (-EOPNOTSUPP); a
 * compat_ro feature we do not support refuses read-write (-EROFS) but opens
 * read-only.  The log says which feature.
 */
UBTRFS_API int ubtrfs_open(const char *const *devices, size_t ndev, unsigned flags,
			   ubtrfs_fs **out);
UBTRFS_API void ubtrfs_close(ubtrfs_fs *fs);
UBTRFS_API bool ubtrfs_is_readonly(const ubtrfs_fs *fs);

enum ubtrfs_feature_class {
	UBTRFS_FEATURE_COMPAT = 0,
	UBTRFS_FEATURE_COMPAT_RO = 1,
	UBTRFS_FEATURE_INCOMPAT = 2,
};

struct ubtrfs_feature_report {
	uint64_t used[3];		/* bits set in the superblock, per class */
	uint64_t known[3];		/* bits this library knows by name */
	uint64_t read_supported[3];	/* bits it can open read-only */
	uint64_t write_supported[3];	/* bits it can open read-write */
};

/* What the open filesystem uses and what this library supports. */
UBTRFS_API void ubtrfs_features(const ubtrfs_fs *fs, struct ubtrfs_feature_report *out);
/* What this library supports, without a filesystem (used[] is zero). */
UBTRFS_API void ubtrfs_supported_features(struct ubtrfs_feature_report *out);
/* The name of feature bit `bit` (0..63) of a class, or NULL when unknown. */
UBTRFS_API const char *ubtrfs_feature_name(enum ubtrfs_feature_class cls, unsigned bit);

#ifdef __cplusplus
}
#endif

#endif /* UBTRFS_UBTRFS_H */
