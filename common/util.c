/* SPDX-License-Identifier: MIT */
/*
 * Time formatting, error lines, checked array growth, durations and token
 * files; see util.h.
 */
#include "util.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void fp_rfc3339(int64_t ns, char *buf, size_t len)
{
        time_t t = (time_t)(ns / 1000000000LL);
        struct tm tm;

        if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, len, "%lld", (long long)ns);
}

int fp_errf(char *err, size_t len, int r, const char *fmt, ...)
{
        va_list ap;

        if (err && len) {
                va_start(ap, fmt);
                vsnprintf(err, len, fmt, ap);
                va_end(ap);
        }
        return r;
}

static _Thread_local struct {
        bool on, exceeded;
        uint64_t max, used;
} budget;

void fp_budget_begin(uint64_t bytes)
{
        budget.on = true;
        budget.exceeded = false;
        budget.max = bytes;
        budget.used = 0;
}

bool fp_budget_charge(size_t n)
{
        if (!budget.on)
                return true;
        if (budget.exceeded || n > budget.max - budget.used) {
                budget.exceeded = true;
                return false;
        }
        budget.used += n;
        return true;
}

void *fp_budget_malloc(size_t n)
{
        return fp_budget_charge(n) ? malloc(n ? n : 1) : NULL;
}

void *fp_budget_calloc(size_t n, size_t size)
{
        if (size && n > SIZE_MAX / size)
                return NULL;
        return fp_budget_charge(n * size) ? calloc(n ? n : 1, size ? size : 1) : NULL;
}

char *fp_budget_strdup(const char *s)
{
        size_t n = strlen(s) + 1;
        char *d = fp_budget_malloc(n);

        return d ? memcpy(d, s, n) : NULL;
}

bool fp_budget_exceeded(void)
{
        return budget.on && budget.exceeded;
}

uint64_t fp_budget_end(void)
{
        uint64_t used = budget.used;

        budget.on = false;
        budget.exceeded = false;
        return used;
}

int fp_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
        void **p = arr;
        size_t n = *cap ? *cap : 16;

        if (need <= *cap)
                return 0;
        while (n < need) {
                if (n > SIZE_MAX / 2)
                        return -ENOMEM;
                n *= 2;
        }
        if (elem && n > SIZE_MAX / elem)
                return -ENOMEM;
        if (!fp_budget_charge((n - *cap) * elem))
                return -ENOMEM;
        void *q = realloc(*p, n * elem);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = n;
        return 0;
}

int fp_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        char *end;
        unsigned long long v;

        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int fp_parse_duration(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        char *end;
        unsigned long long v, mul = 1;

        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end && end[1])
                return -EINVAL;
        switch (*end) {
        case 0:
        case 's':
                break;
        case 'm':
                mul = 60;
                break;
        case 'h':
                mul = 3600;
                break;
        case 'd':
                mul = 86400;
                break;
        default:
                return -EINVAL;
        }
        if (v > UINT64_MAX / mul || v * mul < min || v * mul > max)
                return -ERANGE;
        *ret = v * mul;
        return 0;
}

int fp_read_token_file(const char *path, char **ret, char *err, size_t err_len)
{
        char buf[4097];
        struct stat st;
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

        if (fd < 0)
                return fp_errf(err, err_len, -errno, "Failed to read the token file '%s': %s", path,
                               strerror(errno));
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return fp_errf(err, err_len, -EINVAL, "token file '%s' is not a regular file",
                               path);
        }
        n = read(fd, buf, sizeof(buf) - 1);
        int e = errno;
        close(fd);
        if (n < 0)
                return fp_errf(err, err_len, -e, "Failed to read token file '%s': %s", path,
                               strerror(e));
        buf[n] = 0;
        buf[strcspn(buf, "\r\n")] = 0;
        char *s = buf, *t;
        while (*s == ' ' || *s == '\t')
                s++;
        t = s + strlen(s);
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
                *--t = 0;
        if (!*s)
                return fp_errf(err, err_len, -EINVAL, "The token file '%s' is empty", path);
        for (t = s; *t; t++)
                if (!isprint((unsigned char)*t))
                        return fp_errf(err, err_len, -EINVAL,
                                       "token file '%s': the token holds a non-printable byte",
                                       path);
        char *copy = strdup(s);
        if (!copy)
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        *ret = copy;
        return 0;
}

int fp_parse_listen(const char *listen, char *addr, size_t addrlen, unsigned *port)
{
        const char *colon = strrchr(listen, ':');
        const char *a = listen;
        size_t n;
        char *end;
        unsigned long p;

        if (!colon)
                return -EINVAL;
        n = (size_t)(colon - listen);
        if (n >= 2 && a[0] == '[' && a[n - 1] == ']')
                a++, n -= 2;
        if (n >= addrlen)
                return -EINVAL;
        memcpy(addr, a, n);
        addr[n] = 0;
        if (!n)
                snprintf(addr, addrlen, "0.0.0.0");
        errno = 0;
        p = strtoul(colon + 1, &end, 10);
        if (errno || *end || colon[1] == 0 || p == 0 || p > 65535)
                return -EINVAL;
        *port = (unsigned)p;
        return 0;
}

void fp_url_redact(const char *url, char *buf, size_t len)
{
        const char *scheme = strstr(url, "://");
        const char *host = scheme ? scheme + 3 : url;
        size_t auth = strcspn(host, "/?#");
        const char *at = memchr(host, '@', auth);
        const char *rest = at ? at + 1 : host;
        size_t keep = strcspn(rest, "?#");

        snprintf(buf, len, "%.*s%.*s", (int)(host - url), url, (int)keep, rest);
}

int fp_write_all(int fd, const void *buf, size_t len)
{
        const uint8_t *p = buf;

        while (len) {
                ssize_t n = write(fd, p, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n == 0)
                                errno = EIO;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}
