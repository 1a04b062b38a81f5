/* SPDX-License-Identifier: MIT */
/*
 * Read-query parsing; see filter.h.
 */
#include "filter.h"
#include "http.h"
#include "settings.h"
#include "escape.h"
#include "util.h"

#include <errno.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS 1000000000LL

int fp_coll_parse_time(const char *s, int64_t now_ns, int64_t *ret)
{
        struct tm tm = {0};
        uint64_t secs;
        char *end;

        if (strcmp(s, "now") == 0) {
                *ret = now_ns;
                return 0;
        }
        if (s[0] == '-') {
                if (fp_parse_duration(s + 1, 0, UINT64_MAX, &secs) < 0 ||
                    secs > (uint64_t)(now_ns / NS))
                        return -EINVAL;
                *ret = now_ns - (int64_t)secs * NS;
                return 0;
        }
        if (strlen(s) == 20 && s[4] == '-' && s[10] == 'T' && s[19] == 'Z') {
                end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
                if (!end || *end)
                        return -EINVAL;
                time_t t = timegm(&tm);
                if (t < 0 || t > INT64_MAX / NS) /* past 2262 nanoseconds do not fit */
                        return -EINVAL;
                *ret = (int64_t)t * NS;
                return 0;
        }
        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || *end || v < 0 || v > (double)(INT64_MAX / NS))
                return -EINVAL;
        *ret = (int64_t)(v * 1e9);
        return 0;
}

static int text(const char *name, const char *v, char *dst, size_t size, char *err, size_t errlen)
{
        size_t n = strlen(v);

        if (n == 0 || n >= size)
                return fp_errf(err, errlen, -EINVAL, "parameter '%s' must be 1 to %zu characters",
                               name, size - 1);
        memcpy(dst, v, n + 1);
        return 0;
}

int fp_coll_filter_parse(const char *query, int64_t now_ns, struct fp_coll_filter *ret, char *err,
                         size_t errlen)
{
        return fp_coll_filter_parse_ex(query, now_ns, NULL, NULL, ret, err, errlen);
}

/* Whether key is one of the endpoint's own (extra), or another filter's (prefixed). */
static bool skipped(const char *key, const char *prefix, const char *const *extra)
{
        if (!prefix && strncmp(key, FP_COLL_BASE_PREFIX, strlen(FP_COLL_BASE_PREFIX)) == 0)
                return extra != NULL; /* base_ keys belong to a diff's baseline */
        for (; extra && *extra; extra++)
                if (strcmp(key, *extra) == 0)
                        return true;
        return false;
}

struct wbuf {
        char *p;
        size_t len, cap;
};

static void wbuf_add(void *ctx, const void *data, size_t n)
{
        struct wbuf *b = ctx;

        if (b->len + n < b->cap)
                memcpy(b->p + b->len, data, n);
        b->len += n;
}

/*
 * label=KEY:VALUE into the word a series' text holds for it: KEY=VALUE with
 * VALUE URL-escaped (foreign.c writes it so). 0 or -EINVAL.
 */
static int label_word(const char *v, char *out, size_t len, char *err, size_t errlen)
{
        size_t k = strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-");
        struct wbuf b = {out, 0, len};

        if (k == 0 || k > 64 || v[k] != ':' || strlen(v + k + 1) > 256)
                return fp_errf(err, errlen, -EINVAL,
                               "parameter 'label' must be KEY:VALUE (a label's name of 1 to 64 "
                               "letters, digits, '_', '.', '-'; a value of at most 256 bytes)");
        for (const char *c = v + k + 1; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'label': a control character in the value");
        wbuf_add(&b, v, k);
        wbuf_add(&b, "=", 1);
        fp_escape_url(wbuf_add, &b, v + k + 1);
        if (b.len >= len)
                return fp_errf(err, errlen, -EINVAL, "parameter 'label' is too long");
        out[b.len] = 0;
        return 0;
}

int fp_coll_filter_parse_ex(const char *query, int64_t now_ns, const char *prefix,
                            const char *const *extra, struct fp_coll_filter *ret, char *err,
                            size_t errlen)
{
        struct fp_coll_filter *f;
        struct evkeyvalq q;
        struct evkeyval *kv;
        bool have_from = false, have_seconds = false;
        int r = 0;

        f = calloc(1, sizeof(*f));
        if (!f)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        TAILQ_INIT(&q);
        if (evhttp_parse_query_str(query ? query : "", &q) < 0) {
                r = fp_errf(err, errlen, -EINVAL, "the query string is malformed");
                goto out;
        }
        TAILQ_FOREACH(kv, &q, next)
        {
                const char *k = kv->key, *v = kv->value;
                char *end;
                long n;

                if (prefix) {
                        /* A baseline: only its own keys, without the prefix. */
                        if (strncmp(k, prefix, strlen(prefix)) != 0)
                                continue;
                        k += strlen(prefix);
                } else if (skipped(k, prefix, extra)) {
                        continue;
                }

                if (strcmp(k, "host") == 0) {
                        r = text(k, v, f->host, sizeof(f->host), err, errlen);
                        f->f.host = f->host;
                } else if (strcmp(k, "process") == 0) {
                        r = text(k, v, f->process, sizeof(f->process), err, errlen);
                        f->f.process = f->process;
                } else if (strcmp(k, "thread") == 0) {
                        r = text(k, v, f->thread, sizeof(f->thread), err, errlen);
                        f->f.thread_name = f->thread;
                } else if (strcmp(k, "service") == 0) {
                        r = text(k, v, f->service, sizeof(f->service), err, errlen);
                        f->f.service = f->service;
                } else if (strcmp(k, "container") == 0) {
                        r = text(k, v, f->container, sizeof(f->container), err, errlen);
                        f->f.container = f->container;
                } else if (strcmp(k, "label") == 0) {
                        r = label_word(v, f->label, sizeof(f->label), err, errlen);
                        f->f.config_word = f->label;
                } else if (strcmp(k, "event") == 0) {
                        r = text(k, v, f->event, sizeof(f->event), err, errlen);
                        f->f.event = f->event;
                } else if (strcmp(k, "pid") == 0 || strcmp(k, "seconds") == 0 ||
                           strcmp(k, "n") == 0) {
                        errno = 0;
                        n = *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
                        if (n < 1 || errno || *end || n > INT_MAX) {
                                r = fp_errf(err, errlen, -EINVAL,
                                            "parameter '%s' must be a positive integer", k);
                        } else if (k[0] == 'p') {
                                f->f.pid = (pid_t)n;
                        } else if (k[0] == 'n') {
                                f->top_n = (unsigned)n;
                        } else {
                                have_seconds = true;
                                f->f.since_ns = now_ns - (int64_t)n * NS;
                        }
                } else if (strcmp(k, "from") == 0 || strcmp(k, "to") == 0) {
                        int64_t t;

                        if (fp_coll_parse_time(v, now_ns, &t) < 0)
                                r = fp_errf(err, errlen, -EINVAL,
                                            "parameter '%s': '%.64s' is not a time (Unix seconds, "
                                            "2026-01-31T12:00:00Z, now, or -15m/-2h/-7d)",
                                            k, v);
                        else if (k[0] == 'f')
                                f->f.since_ns = t, have_from = true;
                        else
                                f->f.until_ns = t;
                } else {
                        r = fp_errf(err, errlen, -EINVAL,
                                    "unknown parameter '%.64s' (known: host, service, container, "
                                    "label, process, pid, event, from, to, seconds)",
                                    k);
                }
                if (r < 0)
                        goto out;
        }
        if (have_from && have_seconds) {
                r = fp_errf(err, errlen, -EINVAL, "give either 'from' or 'seconds', not both");
                goto out;
        }
        if (f->f.until_ns && f->f.until_ns <= f->f.since_ns) {
                r = fp_errf(err, errlen, -EINVAL, "'to' must be later than 'from'");
                goto out;
        }
        memcpy(ret, f, sizeof(*f));
        /* The copy's pointers must point into the copy. */
        ret->f.host = f->f.host ? ret->host : NULL;
        ret->f.process = f->f.process ? ret->process : NULL;
        ret->f.service = f->f.service ? ret->service : NULL;
        ret->f.container = f->f.container ? ret->container : NULL;
        ret->f.config_word = f->f.config_word ? ret->label : NULL;
        ret->f.thread_name = f->f.thread_name ? ret->thread : NULL;
        ret->f.event = f->f.event ? ret->event : NULL;
out:
        evhttp_clear_headers(&q);
        free(f);
        return r;
}

int fp_coll_filter_from_request(struct evhttp_request *req, struct fp_coll_filter *f)
{
        const struct evhttp_uri *uri = fp_coll_req_uri(req);
        char err[256];
        int r;

        r = fp_coll_filter_parse(uri ? evhttp_uri_get_query(uri) : NULL,
                                 (int64_t)fp_now_ns(CLOCK_REALTIME), f, err, sizeof(err));
        if (r < 0)
                fp_coll_reply_error(req, 400, "%s", err);
        return r;
}
