/* SPDX-License-Identifier: MIT */
/*
 * The samples of one series in one bucket, as one compact value: the
 * format of bucket_series.data (schema.c says why the store keeps samples
 * this way).
 *
 *   byte 0        format: 1
 *   varint        length of the payload before compression
 *   rest          the payload, compressed with zlib (deflate)
 *
 * The payload is columns of unsigned LEB128 varints, for entries sorted
 * by (thread, stack):
 *
 *   n_entries, unit, n_runs
 *   per run of one thread:   thread gap (from the previous run's thread,
 *                            the first from 0), entries in the run
 *   per entry:               stack gap (from the previous entry's stack in
 *                            the run, the first from 0)
 *   per entry:               count
 *   per entry:               value - count * unit, zigzag-coded
 *
 * unit is the series' mean value per sample (total value / total count,
 * rounded), so a value is stored as its small difference from what its
 * count predicts (sampling periods vary a little: the agent's jitter, the
 * kernel's frequency mode). Columns of like numbers are what deflate
 * compresses best. Decoding checks every bound: a damaged value is an
 * error, never a crash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "store-internal.h"

#define FORMAT_DEFLATE 1
#define MAX_PAYLOAD    (256u << 20)

struct buf {
        uint8_t *p;
        size_t len, cap;
};

static int put(struct buf *b, uint64_t v)
{
        if (b->len + 10 > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 256;
                while (cap < b->len + 10)
                        cap *= 2;
                uint8_t *p = realloc(b->p, cap);
                if (!p)
                        return -ENOMEM;
                b->p = p;
                b->cap = cap;
        }
        do {
                uint8_t c = v & 0x7f;
                v >>= 7;
                b->p[b->len++] = c | (v ? 0x80 : 0);
        } while (v);
        return 0;
}

static int get(const uint8_t **p, const uint8_t *end, uint64_t *ret)
{
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 64; shift += 7) {
                if (*p >= end)
                        return -EBADMSG;
                uint8_t c = *(*p)++;
                v |= (uint64_t)(c & 0x7f) << shift;
                if (!(c & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

static uint64_t zigzag(int64_t v)
{
        return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
        return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

int fp_store_samples_encode(const struct fp_store_sample *v, size_t n, uint8_t **ret,
                            size_t *ret_len)
{
        struct buf b = {0};
        uint64_t count = 0, value = 0, unit = 0;
        size_t runs = 0;
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                count += v[i].count;
                value += v[i].value;
                runs += i == 0 || v[i].thread != v[i - 1].thread;
                if (i && (v[i].thread < v[i - 1].thread ||
                          (v[i].thread == v[i - 1].thread && v[i].stack <= v[i - 1].stack)))
                        return -EINVAL; /* not sorted, or a (thread, stack) twice */
        }
        if (count)
                unit = (value + count / 2) / count;
        r = put(&b, n) ?: put(&b, unit) ?: put(&b, runs);
        for (size_t i = 0, prev = 0; r == 0 && i < n;) {
                size_t j = i;
                while (j < n && v[j].thread == v[i].thread)
                        j++;
                r = put(&b, v[i].thread - prev) ?: put(&b, j - i);
                prev = v[i].thread;
                i = j;
        }
        for (size_t i = 0; r == 0 && i < n; i++) {
                bool first = i == 0 || v[i].thread != v[i - 1].thread;
                r = put(&b, v[i].stack - (first ? 0 : v[i - 1].stack));
        }
        for (size_t i = 0; r == 0 && i < n; i++)
                r = put(&b, v[i].count);
        for (size_t i = 0; r == 0 && i < n; i++)
                r = put(&b, zigzag((int64_t)(v[i].value - v[i].count * unit)));
        if (r < 0) {
                free(b.p);
                return r;
        }

        uLongf zlen = compressBound((uLong)b.len);
        uint8_t *out = malloc(zlen + 11);
        struct buf head = {.p = out, .cap = 11};
        if (!out) {
                free(b.p);
                return -ENOMEM;
        }
        out[head.len++] = FORMAT_DEFLATE;
        (void)put(&head, b.len); /* fits: cap is 11 */
        if (compress2(out + head.len, &zlen, b.p, (uLong)b.len, 6) != Z_OK) {
                free(b.p);
                free(out);
                return -ENOMEM;
        }
        free(b.p);
        *ret = out;
        *ret_len = head.len + zlen;
        return 0;
}

int fp_store_samples_decode(const uint8_t *data, size_t len, fp_store_sample_fn fn, void *userdata)
{
        const uint8_t *p = data, *end = data + len;
        uint64_t raw_len, n, unit, runs;
        uint8_t *raw = NULL;
        int r;

        if (len == 0)
                return 0; /* a series with no samples */
        if (*p++ != FORMAT_DEFLATE)
                return -EBADMSG;
        if ((r = get(&p, end, &raw_len)) < 0)
                return r;
        if (raw_len == 0 || raw_len > MAX_PAYLOAD)
                return -EBADMSG;
        raw = malloc(raw_len);
        if (!raw)
                return -ENOMEM;
        uLongf got = (uLongf)raw_len;
        if (uncompress(raw, &got, p, (uLong)(end - p)) != Z_OK || got != raw_len) {
                free(raw);
                return -EBADMSG;
        }

        /* Four cursors: runs, stacks, counts, values; each column read in turn. */
        const uint8_t *q = raw, *qend = raw + raw_len;
        if ((r = get(&q, qend, &n)) < 0 || (r = get(&q, qend, &unit)) < 0 ||
            (r = get(&q, qend, &runs)) < 0 || n > raw_len || runs > n) {
                free(raw);
                return r < 0 ? r : -EBADMSG;
        }
        const uint8_t *run = q, *col = q;
        uint64_t skip;
        for (uint64_t i = 0; i < 2 * runs; i++)
                if ((r = get(&col, qend, &skip)) < 0)
                        goto out;
        const uint8_t *stacks = col;
        for (uint64_t i = 0; i < n; i++)
                if ((r = get(&col, qend, &skip)) < 0)
                        goto out;
        const uint8_t *counts = col;
        for (uint64_t i = 0; i < n; i++)
                if ((r = get(&col, qend, &skip)) < 0)
                        goto out;
        const uint8_t *values = col;

        uint64_t thread = 0, seen = 0;
        for (uint64_t k = 0; k < runs; k++) {
                uint64_t gap, m, stack = 0;
                if ((r = get(&run, qend, &gap)) < 0 || (r = get(&run, qend, &m)) < 0)
                        goto out;
                thread += gap;
                if (m > n - seen) {
                        r = -EBADMSG;
                        goto out;
                }
                for (uint64_t i = 0; i < m; i++, seen++) {
                        uint64_t sg, c, zv;
                        if ((r = get(&stacks, qend, &sg)) < 0 || (r = get(&counts, qend, &c)) < 0 ||
                            (r = get(&values, qend, &zv)) < 0)
                                goto out;
                        stack += sg;
                        if (thread > UINT32_MAX || stack > UINT32_MAX) {
                                r = -EBADMSG;
                                goto out;
                        }
                        struct fp_store_sample e = {.thread = (uint32_t)thread,
                                                    .stack = (uint32_t)stack,
                                                    .count = c,
                                                    .value = c * unit + (uint64_t)unzigzag(zv)};
                        if ((r = fn(userdata, &e)) < 0)
                                goto out;
                }
        }
        r = seen == n ? 0 : -EBADMSG;
out:
        free(raw);
        return r;
}

/* ---- checking references ---- */

struct refs {
        struct fp_store_map threads, stacks; /* id -> 1 */
        int err;
};

static int note_ref(void *userdata, const struct fp_store_sample *e)
{
        struct refs *x = userdata;
        if ((!fp_store_map_get(&x->threads, e->thread) &&
             fp_store_map_put(&x->threads, e->thread, 1, 0) < 0) ||
            (!fp_store_map_get(&x->stacks, e->stack) &&
             fp_store_map_put(&x->stacks, e->stack, 1, 0) < 0))
                return -ENOMEM;
        return 0;
}

/* Counts the ids of table that refs does (found) and does not (unused) hold. */
static int count_ids(struct fp_store *s, const char *sql, const struct fp_store_map *refs,
                     uint64_t *found, uint64_t *unused)
{
        sqlite3_stmt *st = NULL;
        int rc, r = fp_store_prepare(s, sql, &st);

        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (fp_store_map_get(refs, (uint64_t)sqlite3_column_int64(st, 0)))
                        (*found)++;
                else
                        (*unused)++;
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : fp_store_db_fail(s, rc, "check references");
}

int fp_store_check_refs(struct fp_store *s, uint64_t *ret_missing, uint64_t *ret_unused)
{
        struct refs x = {0};
        sqlite3_stmt *st = NULL;
        uint64_t found = 0, unused = 0;
        int rc, r;

        s->errmsg[0] = '\0';
        if ((r = fp_store_read_begin(s)) < 0)
                return r;
        r = fp_store_prepare(s, "SELECT data FROM series_samples", &st);
        while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
                r = fp_store_samples_decode(sqlite3_column_blob(st, 0),
                                            (size_t)sqlite3_column_bytes(st, 0), note_ref, &x);
        if (r == 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "read samples");
        sqlite3_finalize(st);
        if (r == 0)
                r = count_ids(s, "SELECT id FROM threads", &x.threads, &found, &unused);
        if (r == 0)
                r = count_ids(s, "SELECT id FROM stacks", &x.stacks, &found, &unused);
        fp_store_read_end(s);
        if (r == 0) {
                *ret_missing = x.threads.n + x.stacks.n - found;
                *ret_unused = unused;
        }
        fp_store_map_free(&x.threads);
        fp_store_map_free(&x.stacks);
        return r;
}
