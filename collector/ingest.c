/* SPDX-License-Identifier: MIT */
/*
 * Upload decoding and validation; see ingest.h for the contract.
 *
 * Everything here treats its input as hostile: the profile goes through
 * fp_pprof_decode(), which bounds the inflated size and checks every
 * index, id and count, and then through the checks below, which hold it
 * to the shape the agent sends (two sample types, numeric thread labels,
 * stacks no deeper than the store takes). The query parameters are
 * checked for presence, range and characters before anything is stored.
 */
#include "ingest.h"
#include "escape.h"
#include "util.h"
#include "pprof.h"
#include "store.h"

#include <errno.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decimal integer in [lo, hi], nothing else. */
static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *ret)
{
        char *end;
        long long v;

        if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || *end || v < lo || v > hi)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_u64(const char *s, uint64_t *ret)
{
        char *end;
        unsigned long long v;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* No control characters (they would break logs and the web page). */
static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

static bool chars_in(const char *s, const char *extra)
{
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || strchr(extra, *s)))
                        return false;
        return true;
}

/* Copies a text parameter of at most size - 1 bytes, printable. */
static int copy_text(const char *name, const char *v, char *dst, size_t size, bool required,
                     char *err, size_t errlen)
{
        size_t n = strlen(v);

        if (required && n == 0)
                return fp_errf(err, errlen, -EINVAL, "parameter '%s' is empty", name);
        if (n >= size)
                return fp_errf(err, errlen, -EINVAL, "parameter '%s' is longer than %zu bytes",
                               name, size - 1);
        if (!printable(v))
                return fp_errf(err, errlen, -EINVAL, "parameter '%s' contains control characters",
                               name);
        memcpy(dst, v, n + 1);
        return 0;
}

/* "reason:count,reason:count": reasons [a-z0-9_], counts summed per reason. */
static int parse_drops(const char *v, struct fp_coll_meta *m, char *err, size_t errlen)
{
        const char *p = v;

        while (*p) {
                const char *colon = strchr(p, ':'), *comma;
                char num[24];
                uint64_t count;
                size_t rlen, nlen, i;

                if (!colon)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': '%.40s' is not reason:count", p);
                comma = strchr(colon, ',');
                if (!comma)
                        comma = colon + strlen(colon);
                rlen = (size_t)(colon - p);
                nlen = (size_t)(comma - colon - 1);
                if (rlen == 0 || rlen >= sizeof(m->drops[0].reason))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': a reason must be 1 to %zu characters",
                                       sizeof(m->drops[0].reason) - 1);
                for (i = 0; i < rlen; i++)
                        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') ||
                              p[i] == '_'))
                                return fp_errf(err, errlen, -EINVAL,
                                               "parameter 'drops': reason '%.*s' is not [a-z0-9_]",
                                               (int)(rlen > 40 ? 40 : rlen), p);
                if (nlen == 0 || nlen >= sizeof(num))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': bad count for reason '%.*s'", (int)rlen,
                                       p);
                memcpy(num, colon + 1, nlen);
                num[nlen] = 0;
                if (parse_u64(num, &count) < 0 || count > INT64_MAX)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': count '%s' of reason '%.*s' is not a "
                                       "non-negative integer",
                                       num, (int)rlen, p);
                for (i = 0; i < m->n_drops; i++)
                        if (strlen(m->drops[i].reason) == rlen &&
                            memcmp(m->drops[i].reason, p, rlen) == 0)
                                break;
                if (i == m->n_drops) {
                        if (m->n_drops == FP_COLL_MAX_DROPS)
                                return fp_errf(err, errlen, -EINVAL,
                                               "parameter 'drops': more than %d reasons",
                                               FP_COLL_MAX_DROPS);
                        memcpy(m->drops[i].reason, p, rlen);
                        m->drops[i].reason[rlen] = 0;
                        m->drops[i].count = 0;
                        m->n_drops++;
                }
                m->drops[i].count = count > (uint64_t)INT64_MAX - m->drops[i].count
                                        ? (uint64_t)INT64_MAX
                                        : m->drops[i].count + count;
                p = *comma ? comma + 1 : comma;
        }
        return 0;
}

enum {
        P_HOST = 1 << 0,
        P_PID = 1 << 1,
        P_STARTTIME = 1 << 2,
        P_COMM = 1 << 3,
        P_EXE = 1 << 4,
        P_EVENT = 1 << 5,
        P_FROM = 1 << 6,
        P_TO = 1 << 7,
        P_AGENT = 1 << 8,
        P_DROPS = 1 << 9,
        P_REQUIRED = P_HOST | P_PID | P_STARTTIME | P_EVENT | P_FROM | P_TO,
};

static const struct {
        const char *name;
        int bit;
} params[] = {
    {"host", P_HOST},   {"pid", P_PID},     {"starttime", P_STARTTIME}, {"comm", P_COMM},
    {"exe", P_EXE},     {"event", P_EVENT}, {"from", P_FROM},           {"to", P_TO},
    {"agent", P_AGENT}, {"drops", P_DROPS},
};

/* Ten years: a longer time range is a bug or an attack, not a bucket. */
#define MAX_RANGE_NS (10LL * 366 * 24 * 3600 * 1000000000LL)

static int meta_param(struct fp_coll_meta *m, int bit, const char *name, const char *v, char *err,
                      size_t errlen)
{
        int64_t n;

        switch (bit) {
        case P_HOST:
                if (!*v || !chars_in(v, ".-_:[]"))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'host' must be a host name (letters, digits, "
                                       "'.', '-', '_')");
                return copy_text(name, v, m->host, sizeof(m->host), true, err, errlen);
        case P_PID:
                if (parse_i64(v, 1, INT_MAX, &n) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'pid' must be an integer from 1 to %d", INT_MAX);
                m->pid = (pid_t)n;
                return 0;
        case P_STARTTIME:
                if (parse_u64(v, &m->starttime) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'starttime' must be a non-negative integer");
                return 0;
        case P_COMM:
                return copy_text(name, v, m->comm, sizeof(m->comm), false, err, errlen);
        case P_EXE:
                return copy_text(name, v, m->exe, sizeof(m->exe), false, err, errlen);
        case P_EVENT:
                if (!*v || !chars_in(v, "-_.:/"))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'event' must be an event name such as cpu-clock");
                return copy_text(name, v, m->event, sizeof(m->event), true, err, errlen);
        case P_FROM:
        case P_TO:
                if (parse_i64(v, 0, INT64_MAX, &n) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter '%s' must be a time in nanoseconds since the "
                                       "epoch",
                                       name);
                *(bit == P_FROM ? &m->from_ns : &m->to_ns) = n;
                return 0;
        case P_AGENT:
                return copy_text(name, v, m->agent, sizeof(m->agent), false, err, errlen);
        case P_DROPS:
                return parse_drops(v, m, err, errlen);
        }
        return -EINVAL;
}

int fp_coll_ingest_parse_meta(const char *query, struct fp_coll_meta *ret, char *err, size_t errlen)
{
        struct evkeyvalq q;
        struct evkeyval *kv;
        struct fp_coll_meta *m;
        int seen = 0, r = 0;

        m = calloc(1, sizeof(*m));
        if (!m)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        TAILQ_INIT(&q);
        if (evhttp_parse_query_str(query ? query : "", &q) < 0) {
                r = fp_errf(err, errlen, -EINVAL, "the query string is malformed");
                goto out;
        }
        TAILQ_FOREACH(kv, &q, next)
        {
                size_t i;

                for (i = 0; i < sizeof(params) / sizeof(params[0]); i++)
                        if (strcmp(kv->key, params[i].name) == 0)
                                break;
                if (i == sizeof(params) / sizeof(params[0])) {
                        r = fp_errf(err, errlen, -EINVAL, "unknown parameter '%.64s'", kv->key);
                        goto out;
                }
                if (seen & params[i].bit) {
                        r = fp_errf(err, errlen, -EINVAL, "parameter '%s' is given twice",
                                    params[i].name);
                        goto out;
                }
                seen |= params[i].bit;
                r = meta_param(m, params[i].bit, params[i].name, kv->value, err, errlen);
                if (r < 0)
                        goto out;
        }
        for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
                if ((P_REQUIRED & params[i].bit) && !(seen & params[i].bit)) {
                        r = fp_errf(err, errlen, -EINVAL, "missing parameter '%s'", params[i].name);
                        goto out;
                }
        if (m->to_ns <= m->from_ns || m->to_ns - m->from_ns > MAX_RANGE_NS) {
                r = fp_errf(err, errlen, -EINVAL,
                            "the time range from=%" PRId64 " to=%" PRId64
                            " is empty, reversed or longer than ten years",
                            m->from_ns, m->to_ns);
                goto out;
        }
        memcpy(ret, m, sizeof(*m));
out:
        evhttp_clear_headers(&q);
        free(m);
        return r;
}

int fp_coll_ingest_check_key(const char *key, char *err, size_t errlen)
{
        size_t n = strlen(key);

        if (n == 0 || n > FP_STORE_MAX_KEY)
                return fp_errf(err, errlen, -EINVAL, "Idempotency-Key must be 1 to %d characters",
                               FP_STORE_MAX_KEY);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)key[i] <= 0x20 || (unsigned char)key[i] >= 0x7f)
                        return fp_errf(err, errlen, -EINVAL,
                                       "Idempotency-Key must be printable ASCII without spaces");
        return 0;
}

/* One sample of the decoded profile into the batch. */
static int add_sample(const struct fp_pprof *p, size_t i, struct fp_store_batch *b, uint32_t target,
                      uint32_t event, struct fp_store_frame *frames, uint64_t *total, char *err,
                      size_t errlen)
{
        struct fp_pprof_sample_view v;
        int64_t tid = 0;
        const char *thread_name = NULL;
        uint32_t stack;
        int r;

        r = fp_pprof_sample_get(p, i, &v);
        if (r < 0)
                return fp_errf(err, errlen, r, "cannot read sample %zu", i);
        if (v.n_locations > FP_STORE_MAX_FRAMES)
                return fp_errf(err, errlen, -EINVAL,
                               "sample %zu has %zu frames; at most %d are kept", i, v.n_locations,
                               FP_STORE_MAX_FRAMES);
        for (size_t j = 0; j < v.n_labels; j++) {
                struct fp_pprof_label l;

                r = fp_pprof_sample_label(p, i, j, &l);
                if (r < 0)
                        return fp_errf(err, errlen, r, "cannot read label %zu of sample %zu", j, i);
                if (strcmp(l.key, "thread") == 0) {
                        if (l.str || l.num < 0 || l.num > INT_MAX)
                                return fp_errf(err, errlen, -EINVAL,
                                               "sample %zu: label 'thread' must be a thread id", i);
                        tid = l.num;
                } else if (strcmp(l.key, "thread_name") == 0) {
                        if (!l.str)
                                return fp_errf(err, errlen, -EINVAL,
                                               "sample %zu: label 'thread_name' must be a string",
                                               i);
                        thread_name = l.str;
                }
                /* pid, process and host come from the upload's parameters. */
        }
        for (size_t j = 0; j < v.n_locations; j++) {
                struct fp_pprof_location_view lv;

                r = fp_pprof_location_get(p, v.location_ids[j], &lv);
                if (r < 0)
                        return fp_errf(err, errlen, -EBADMSG,
                                       "sample %zu: location %" PRIu64 " is bad", i,
                                       v.location_ids[j]);
                frames[j] = (struct fp_store_frame){
                    .function = lv.function_name,
                    .mapping_file = lv.mapping_file,
                    .build_id = lv.build_id,
                    .mapping_start = lv.mapping_start,
                    .mapping_limit = lv.mapping_limit,
                    .mapping_offset = lv.mapping_offset,
                    .address = lv.address,
                };
        }
        if (v.values[0] == 0 && v.values[1] == 0)
                return 0; /* nothing to keep */
        r = fp_store_batch_add_stack(b, frames, v.n_locations, &stack);
        if (r < 0)
                return fp_errf(err, errlen, r, "cannot add a stack: %s", strerror(-r));
        r = fp_store_batch_add_sample(b, target, event, (pid_t)tid, thread_name, stack,
                                      (uint64_t)v.values[0], (uint64_t)v.values[1]);
        if (r < 0)
                return fp_errf(err, errlen, r, "cannot add a sample: %s", strerror(-r));
        *total = *total > UINT64_MAX - (uint64_t)v.values[0] ? UINT64_MAX
                                                             : *total + (uint64_t)v.values[0];
        return 0;
}

static int build(const struct fp_coll_meta *meta, const struct fp_pprof *p,
                 struct fp_store_batch *b, uint64_t *ret_samples, char *err, size_t errlen)
{
        const char *ct, *cu, *vt, *vu, *pt, *pu;
        struct fp_store_frame *frames;
        uint32_t target, event;
        uint64_t total = 0;
        int64_t period;
        int r;

        if (fp_pprof_n_sample_types(p) != 2)
                return fp_errf(err, errlen, -EINVAL,
                               "the profile has %zu sample types; an upload has two (count and "
                               "value)",
                               fp_pprof_n_sample_types(p));
        ct = fp_pprof_sample_type(p, 0, &cu);
        vt = fp_pprof_sample_type(p, 1, &vu);
        if (!*ct || !*cu || !*vt || !*vu)
                return fp_errf(err, errlen, -EINVAL,
                               "a sample type of the profile has no name or unit");
        period = fp_pprof_period(p, &pt, &pu);
        if (period < 0)
                return fp_errf(err, errlen, -EINVAL,
                               "the profile's period is negative (%" PRId64 ")", period);

        struct fp_store_target t = {.host = meta->host,
                                    .pid = meta->pid,
                                    .starttime = meta->starttime,
                                    .comm = meta->comm,
                                    .exe = meta->exe};
        struct fp_store_event e = {.name = meta->event,
                                   .count_type = ct,
                                   .count_unit = cu,
                                   .value_type = vt,
                                   .value_unit = vu,
                                   .period_type = *pt ? pt : NULL,
                                   .period_unit = *pt ? pu : NULL,
                                   .period = period};
        if ((r = fp_store_batch_add_target(b, &t, &target)) < 0 ||
            (r = fp_store_batch_add_event(b, &e, &event)) < 0)
                return fp_errf(err, errlen, r, "cannot describe the upload: %s", strerror(-r));
        for (size_t i = 0; i < meta->n_drops; i++) {
                r = fp_store_batch_add_drop(b, target, meta->drops[i].reason, meta->drops[i].count);
                if (r < 0)
                        return fp_errf(err, errlen, r, "cannot add drop counts: %s", strerror(-r));
        }
        frames = calloc(FP_STORE_MAX_FRAMES, sizeof(*frames));
        if (!frames)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        r = 0;
        for (size_t i = 0; i < fp_pprof_n_samples(p) && r >= 0; i++)
                r = add_sample(p, i, b, target, event, frames, &total, err, errlen);
        free(frames);
        if (r < 0)
                return r;
        *ret_samples = total;
        return 0;
}

int fp_coll_ingest_build(const struct fp_coll_meta *meta, const uint8_t *body, size_t len,
                         size_t max_decompressed, struct fp_store_batch **ret,
                         uint64_t *ret_samples, char *err, size_t errlen)
{
        struct fp_pprof *p = NULL;
        struct fp_store_batch *b;
        uint64_t samples = 0;
        char derr[256];
        int r;

        if (len < 2 || body[0] != 0x1f || body[1] != 0x8b)
                return fp_errf(err, errlen, -EBADMSG,
                               "the body is not gzip data (an upload is a gzip-compressed "
                               "profile.proto)");
        r = fp_pprof_decode(body, len, max_decompressed, &p, derr, sizeof(derr));
        if (r < 0)
                return fp_errf(err, errlen, r, "%s", derr[0] ? derr : strerror(-r));
        b = fp_store_batch_new(meta->from_ns, meta->to_ns - meta->from_ns);
        if (!b) {
                fp_pprof_free(p);
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        }
        r = build(meta, p, b, &samples, err, errlen);
        fp_pprof_free(p);
        if (r < 0) {
                fp_store_batch_free(b);
                return r;
        }
        fp_store_batch_set_uploaded(b, true);
        *ret = b;
        *ret_samples = samples;
        return 0;
}
