/*
 * Minimal unit-test support: CHECK records a failure and continues, so one
 * run reports every broken assertion; t_finish() gives the exit status the
 * meson test runner expects (0 pass, 1 fail, 77 skip).
 */
#ifndef UBTRFS_T_H
#define UBTRFS_T_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failures;
static int t_checks;

#define CHECK(cond)                                                                    \
	do {                                                                           \
		t_checks++;                                                            \
		if (!(cond)) {                                                         \
			t_failures++;                                                  \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                      \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                             \
	do {                                                                           \
		uint64_t t_a_ = (uint64_t)(a), t_b_ = (uint64_t)(b);                   \
		t_checks++;                                                            \
		if (t_a_ != t_b_) {                                                    \
			t_failures++;                                                  \
			fprintf(stderr, "%s:%d: %s == %s failed: 0x%" PRIx64 " != 0x%" PRIx64 "\n", \
				__FILE__, __LINE__, #a, #b, t_a_, t_b_);                \
		}                                                                      \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                             \
	do {                                                                           \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);                \
		t_checks++;                                                            \
		if (t_a_ != t_b_) {                                                    \
			t_failures++;                                                  \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n",       \
				__FILE__, __LINE__, #a, #b, t_a_, t_b_);                \
		}                                                                      \
	} while (0)

/* Skip, or fail under UBTRFS_REQUIRE_ORACLE=1 (CI must not skip). */
static inline int t_skip(const char *why)
{
	const char *req = getenv("UBTRFS_REQUIRE_ORACLE");
	if (req && !strcmp(req, "1")) {
		fprintf(stderr, "FAIL (oracle required): %s\n", why);
		return 1;
	}
	printf("SKIP: %s\n", why);
	return 77;
}

/* xorshift64: the unit tests' deterministic pseudo-random numbers
 * (*state must start non-zero). */
static inline uint64_t t_xorshift64(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

static inline int t_finish(void)
{
	if (t_failures) {
		fprintf(stderr, "%d of %d checks failed\n", t_failures, t_checks);
		return 1;
	}
	printf("%d checks passed\n", t_checks);
	return 0;
}

static inline void t_hex(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(hex + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
}

#endif
