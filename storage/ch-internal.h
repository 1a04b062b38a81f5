/* SPDX-License-Identifier: MIT */
/*
 * What the ClickHouse store's files share (clickhouse.c, ch-rollup.c,
 * ch-wire.c): the connection, growing buffers of SQL and RowBinary, the
 * reader of RowBinary answers, and one request over HTTP.
 *
 * A request's answer lands in the connection's buffer (c->answer) and
 * stays there until the next request; an error sets c->errmsg to one
 * line and returns -errno.
 */
#ifndef FP_STORAGE_CH_INTERNAL_H
#define FP_STORAGE_CH_INTERNAL_H

#include "store-internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HOUR_NS           3600000000000LL
#define DAY_NS            86400000000000LL
#define CONNECT_TIMEOUT_S 5L
#define WRITE_TIMEOUT_S   20L
#define READ_TIMEOUT_S    30L
#define MAX_ANSWER        ((size_t)1 << 30) /* bytes of one answer */

/* ---- growing buffers ---- */

struct buf {
        char *p;
        size_t n, cap;
        bool oom;
};

static inline void buf_need(struct buf *b, size_t more)
{
        if (b->oom)
                return;
        if (fp_grow((void **)&b->p, &b->cap, b->n + more + 1, 1) < 0)
                b->oom = true;
}

static inline void buf_add(struct buf *b, const void *data, size_t len)
{
        buf_need(b, len);
        if (b->oom)
                return;
        memcpy(b->p + b->n, data, len);
        b->n += len;
        b->p[b->n] = 0;
}

static inline void __attribute__((format(printf, 2, 3)))
buf_printf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
                b->oom = true;
                return;
        }
        buf_need(b, (size_t)n);
        if (b->oom)
                return;
        va_start(ap, fmt);
        vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->n += (size_t)n;
}

/* A SQL string literal: quotes and backslashes escaped, control bytes as \xHH. */
static inline void buf_lit(struct buf *b, const char *s)
{
        buf_add(b, "'", 1);
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                if (ch == '\'' || ch == '\\')
                        buf_printf(b, "\\%c", ch);
                else if (ch < 0x20 || ch == 0x7f)
                        buf_printf(b, "\\x%02x", ch);
                else
                        buf_add(b, s, 1);
        }
        buf_add(b, "'", 1);
}

/* RowBinary: little-endian integers, strings and arrays prefixed by a LEB128 length. */
static inline void rb_uint(struct buf *b, uint64_t v, size_t bytes)
{
        uint8_t w[8];
        for (size_t i = 0; i < bytes; i++)
                w[i] = (uint8_t)(v >> (8 * i));
        buf_add(b, w, bytes);
}

static inline void rb_len(struct buf *b, uint64_t n)
{
        uint8_t w[10];
        size_t k = 0;
        do {
                w[k] = (uint8_t)(n & 0x7f);
                n >>= 7;
                if (n)
                        w[k] |= 0x80;
                k++;
        } while (n);
        buf_add(b, w, k);
}

static inline void rb_str(struct buf *b, const char *s)
{
        size_t n = s ? strlen(s) : 0;
        rb_len(b, n);
        buf_add(b, s ? s : "", n);
}

/* A sample's thread_name column: the name, and "\0" wait when it waited. */
static inline void rb_thread(struct buf *b, const char *name, const char *wait)
{
        size_t n = strlen(name), w = strlen(wait);
        rb_len(b, w ? n + 1 + w : n);
        buf_add(b, name, n);
        if (w) {
                buf_add(b, "", 1);
                buf_add(b, wait, w);
        }
}

/* Reading RowBinary: strings are NUL-terminated in place (moved over their length). */
struct rd {
        uint8_t *p, *end;
        bool bad;
};

static inline uint64_t rd_uint(struct rd *r, size_t bytes)
{
        uint64_t v = 0;
        if (r->bad || (size_t)(r->end - r->p) < bytes) {
                r->bad = true;
                return 0;
        }
        for (size_t i = 0; i < bytes; i++)
                v |= (uint64_t)r->p[i] << (8 * i);
        r->p += bytes;
        return v;
}

static inline uint64_t rd_len(struct rd *r)
{
        uint64_t v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
                if (r->bad || r->p >= r->end) {
                        r->bad = true;
                        return 0;
                }
                uint8_t c = *r->p++;
                v |= (uint64_t)(c & 0x7f) << shift;
                if (!(c & 0x80))
                        return v;
        }
        r->bad = true;
        return 0;
}

/* A string and its length (it may hold NULs). */
static inline const char *rd_str_len(struct rd *r, size_t *ret_len)
{
        uint8_t *start = r->p;
        uint64_t n = rd_len(r);
        *ret_len = 0;
        if (r->bad || (uint64_t)(r->end - r->p) < n) {
                r->bad = true;
                return "";
        }
        memmove(start, r->p, n); /* the length took at least one byte: room for the NUL */
        start[n] = 0;
        r->p += n;
        *ret_len = n;
        return (const char *)start;
}

static inline const char *rd_str(struct rd *r)
{
        size_t n;
        return rd_str_len(r, &n);
}

/* A reader of c's last answer. */
#define ANSWER(c)                                                                                  \
        ((struct rd){(uint8_t *)(c)->answer.p, (uint8_t *)(c)->answer.p + (c)->answer.n, false})

#define RD_U8(r)  ((uint8_t)rd_uint((r), 1))
#define RD_U32(r) ((uint32_t)rd_uint((r), 4))
#define RD_I32(r) ((int32_t)(uint32_t)rd_uint((r), 4))
#define RD_U64(r) rd_uint((r), 8)
#define RD_I64(r) ((int64_t)rd_uint((r), 8))

/* ---- the connection ---- */

struct fp_ch {
        CURL *curl;
        char *base;     /* http(s)://host:port/ */
        char *hostport; /* for messages */
        char db[64];
        char *user, *password;
        bool writer, ready;
        uint64_t max_bytes;
        int64_t next_upkeep_ns;
        struct fp_store_map written; /* (day, id) of dictionary rows this handle stored */
        struct buf answer;
        char errmsg[512];
        int64_t deadline_ns; /* CLOCK_MONOTONIC; 0: none (fp_ch_set_deadline()) */
        /* Summaries (ch-rollup.c), the writer's: */
        struct fp_store_map rollup_seen;      /* hour + 1 -> (second looked at, look number) */
        struct fp_store_map rollup_days_seen; /* day + 1 -> (last look number then) */
        struct fp_store_map rollup_forget;    /* replaced summaries: (hour, span) -> when */
        uint64_t rollup_looks;
        bool rollups_off; /* neither read nor made (fp_ch_set_summaries()) */
};

/* Creates, migrates or checks the schema once (a handle not yet set up): 0 or -errno. */
int fp_ch_setup(struct fp_ch *c);
/* Sets c->errmsg from fmt and returns r. */
int fp_ch_failf(struct fp_ch *c, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* -ENOMEM, said. */
int fp_ch_oom(struct fp_ch *c);
/* curl's write callback: appends to c->answer, up to MAX_ANSWER. */
size_t fp_ch_on_answer(char *data, size_t size, size_t nmemb, void *userdata);
/* Runs the SQL in sql (its answer in c->answer): 0 or -errno. */
int fp_ch_exec(struct fp_ch *c, const struct buf *sql, long timeout_s);
/* The one number (UInt64 or Int64) the SQL in sql answers; about names it in an error. */
int fp_ch_query_number(struct fp_ch *c, const struct buf *sql, const char *about, uint64_t *ret);
/* INSERT INTO table (columns) of RowBinary rows (none: nothing sent): 0 or -errno. */
int fp_ch_insert(struct fp_ch *c, const char *table, const char *columns, const struct buf *rows);

/* ---- summaries (ch-rollup.c) ---- */

/*
 * How a read of [since_ns, until_ns) takes its rows: builds, the ids of
 * the summaries it reads ("" when none); raw, what the WHERE of the raw
 * rows (samples, drops) adds: the first hour an upload reaching into the
 * range can be of and, when summaries are read, the hours they leave as
 * ranges (" AND hour >= ... AND ((hour >= ... AND hour < ...) OR ...)");
 * [first_hour, end_hour) the whole hours of the range.
 */
struct fp_ch_plan {
        struct buf builds, raw;
        size_t n_builds;
        uint32_t first_hour, end_hour;
};
/* The plan, with the summaries whose hours' buckets say what they hold (none when they are
 * off); 0 or -errno. */
int fp_ch_read_plan(struct fp_ch *c, int64_t since_ns, int64_t until_ns, struct fp_ch_plan *ret);
void fp_ch_plan_free(struct fp_ch_plan *p);
/*
 * One step of keeping summaries: looks at one ended hour (grace_ns
 * after its end) changed since last looked at and writes its summary if
 * none holds what its buckets say, else one day the same way from its
 * hours'. 1 when it did, 0 when nothing is due, or -errno.
 */
int fp_ch_rollups_keep(struct fp_ch *c, int64_t now_ns, int64_t grace_ns);
/* Ended hours with buckets that no summary holds as they are now. */
int fp_ch_rollups_unsummarised(struct fp_ch *c, int64_t now_ns, uint64_t *ret);

#endif
