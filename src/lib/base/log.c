/*
 * base layer: logging and error strings.
 *
 * Library messages go through one handler (default: stderr with an
 * "ubtrfs: " prefix).  The handler and level are process-wide; they are
 * meant to be set once at start-up, before other threads use the library.
 */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static ubt_log_fn log_handler;
static void *log_ctx;
static int log_max_level = UBT_LOG_INFO;
static _Thread_local int log_demote;

void ubt_log_demote_begin(void)
{
	log_demote++;
}

void ubt_log_demote_end(void)
{
	if (log_demote > 0)
		log_demote--;
}

void ubt_log_set_handler(ubt_log_fn fn, void *ctx)
{
	log_handler = fn;
	log_ctx = ctx;
}

void ubt_log_set_level(int max_level)
{
	log_max_level = max_level;
}

void ubt_logv(int level, const char *fmt, va_list ap)
{
	char msg[1024];

	if (log_demote && level == UBT_LOG_ERROR)
		level = UBT_LOG_WARNING;
	if (level > log_max_level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_handler) {
		log_handler(log_ctx, level, msg);
		return;
	}
	static const char *const prefix[] = { "error: ", "warning: ", "", "debug: " };
	fprintf(stderr, "ubtrfs: %s%s\n",
		level >= 0 && level < (int)UBT_ARRAY_SIZE(prefix) ? prefix[level] : "", msg);
}

void ubt_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ubt_logv(level, fmt, ap);
	va_end(ap);
}

int ubt_corrupt_at(const char *file, int line, uint64_t where, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	const char *base = strrchr(file, '/');

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ubt_log(UBT_LOG_ERROR, "corruption at %llu: %s [%s:%d]",
		(unsigned long long)where, msg, base ? base + 1 : file, line);
	return -EUCLEAN;
}

const char *ubt_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EUCLEAN:
		return "filesystem structure is corrupt";
	case EIO:
		return "input/output error (checksum or device failure)";
	case EOPNOTSUPP:
		return "unsupported feature";
	case EROFS:
		return "filesystem is read-only";
	case ENOSPC:
		return "no space left on device";
	default:
		/* strerror() of glibc and the BSDs returns static strings for
		 * known codes; unknown ones are rare here. */
		return strerror(err);
	}
}

void ubt_uuid_v4(uint8_t *u)
{
	u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
	u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
}

int ubt_random_bytes(uint8_t *buf, size_t len)
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	size_t got = 0;

	if (fd < 0)
		return -errno;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -EIO;
			close(fd);
			return err;
		}
		got += (size_t)n;
	}
	close(fd);
	return 0;
}

int ubt_uuid_random(uint8_t *u)
{
	int ret = ubt_random_bytes(u, 16);

	if (!ret)
		ubt_uuid_v4(u);
	return ret;
}

void ubt_uuid_str(const uint8_t *u, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	int j = 0;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[j++] = '-';
		buf[j++] = hex[u[i] >> 4];
		buf[j++] = hex[u[i] & 15];
	}
	buf[j] = 0;
}
