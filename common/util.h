/* SPDX-License-Identifier: MIT */
/*
 * The small helpers every fleetprof module needs: clocks, one-line error
 * messages, checked array growth and cleanup attributes. Header-only where
 * a function is a line or two; util.c holds the rest.
 */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Nanoseconds on clock clk (CLOCK_REALTIME, CLOCK_MONOTONIC, ...). */
static inline uint64_t fp_now_ns(clockid_t clk)
{
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* v's bits spread over all 64 (murmur3's finaliser, first half): a hash table's slot. */
static inline uint64_t fp_mix64(uint64_t v)
{
        v ^= v >> 33;
        v *= 0xff51afd7ed558ccdULL;
        v ^= v >> 33;
        return v;
}

/* CLOCK_REALTIME nanoseconds as "2026-11-23T09:03:10Z" into buf (>= 32 bytes). */
void fp_rfc3339(int64_t ns, char *buf, size_t len);

/*
 * Writes one formatted line into err (len bytes; err may be NULL or len
 * 0) and returns r, so an error return is one statement:
 *     return fp_errf(err, len, -EINVAL, "bad value '%s'", s);
 */
int fp_errf(char *err, size_t len, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Makes room for need elements of elem bytes in *arr (capacity *cap),
 * doubling from 16; checks need * elem and the doubling for overflow.
 * On failure (-ENOMEM) *arr and *cap are unchanged.
 */
int fp_grow(void *arr, size_t *cap, size_t need, size_t elem);

/*
 * A thread's memory allowance for the work at hand: the collector's reads,
 * so that no request can take the process's memory. Between
 * fp_budget_begin(bytes) and fp_budget_end(), fp_budget_charge(n) counts
 * n bytes and fails (charging nothing) once the total would pass the
 * allowance; from then on fp_budget_exceeded() is true. fp_grow() and the
 * pprof builder's allocations (proto/) charge what they add, and through
 * them the stores' rows and ClickHouse's answers. Frees are not credited:
 * the bound is on what the work allocated, so it holds however the work
 * frees. Outside a budget (and on every other thread) each charge succeeds.
 */
void fp_budget_begin(uint64_t bytes);
bool fp_budget_charge(size_t n);
bool fp_budget_exceeded(void);
/* malloc, calloc and strdup that charge the thread's allowance first: NULL past it. */
void *fp_budget_malloc(size_t n);
void *fp_budget_calloc(size_t n, size_t size);
char *fp_budget_strdup(const char *s);
/* Ends the budget: the bytes it charged. */
uint64_t fp_budget_end(void);

/*
 * Writes all len bytes of buf to fd, again after EINTR and short writes:
 * 0, or -errno with errno set (EIO for a write that wrote nothing).
 */
int fp_write_all(int fd, const void *buf, size_t len);

/*
 * Parses a duration: N, Ns, Nm, Nh or Nd (seconds, minutes, hours, days)
 * into seconds, within [min, max]. -EINVAL for a malformed text, -ERANGE
 * outside the bounds.
 */
int fp_parse_duration(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

/*
 * A decimal number within [min, max]: digits only (no sign, no blank, no
 * suffix). 0 or -EINVAL.
 */
int fp_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

/*
 * url without what may be a secret, for users who may not see one: no
 * "user:password@", no query, no fragment ("https://h:8443/path"). Into
 * buf (truncated to len).
 */
void fp_url_redact(const char *url, char *buf, size_t len);

/*
 * A listening address: "ADDR:PORT", "[v6]:PORT" or ":PORT" (all IPv4
 * addresses) into addr and *port (1 to 65535). 0 or -EINVAL.
 */
int fp_parse_listen(const char *listen, char *addr, size_t addrlen, unsigned *port);

/*
 * Reads a bearer token: the first line of path, without its newline and
 * surrounding blanks; the file must be a regular file of at most 4 KiB
 * holding a non-empty token of printable ASCII. *ret is malloc'd, owned by
 * the caller. -errno with one line in err.
 */
int fp_read_token_file(const char *path, char **ret, char *err, size_t err_len);

/* FNV-1a over n bytes, from x (FP_FNV1A_SEED to start): a small, stable hash. */
#define FP_FNV1A_SEED 0xcbf29ce484222325ULL
static inline uint64_t fp_fnv1a(uint64_t x, const void *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                x = (x ^ ((const uint8_t *)p)[i]) * 0x100000001b3ULL;
        return x;
}

/* Cleanup attributes (systemd style): variables freed when they leave scope. */
#define _cleanup_(f) __attribute__((cleanup(f)))
static inline void fp_freep(void *p)
{
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(fp_freep)
static inline void fp_closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_close_ _cleanup_(fp_closep)
