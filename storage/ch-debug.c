/* SPDX-License-Identifier: MIT */
/*
 * Uploaded debug files on ClickHouse (debugfiles.h; schema 8 in
 * clickhouse.c): debugfiles holds each build's bytes (ReplacingMergeTree
 * by build ID: two collectors storing one build at once leave one row),
 * debugfiles_used when a collector last named from it. The budget is
 * kept by the collector that stores: past it, the least recently used
 * builds are deleted (ALTER TABLE ... DELETE, which ClickHouse finishes in
 * the background: for a moment after, a deleted build may still be read).
 */
#include "ch-internal.h"
#include "clickhouse.h"
#include "debugfiles.h"

#include <inttypes.h>
#include <stdlib.h>

/* A build ID is hex (the caller checked): safe between quotes as it is. */
static int one_row(struct fp_ch *c, const char *id, bool with_data, uint8_t **ret_data,
                   size_t *ret_len, struct fp_dfiles_info *ret)
{
        struct buf q = {0};
        int r;

        buf_printf(&q, "SELECT executable, size, added_ns%s FROM %s.debugfiles WHERE build_id = ",
                   with_data ? ", data" : "", c->db);
        buf_lit(&q, id);
        buf_printf(&q, " LIMIT 1 FORMAT RowBinary");
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        if (rd.p == rd.end)
                return 0;
        ret->executable = RD_U8(&rd) != 0;
        ret->size = RD_U64(&rd);
        ret->added_ns = RD_I64(&rd);
        if (with_data) {
                size_t n;
                const char *p = rd_str_len(&rd, &n);

                if (!rd.bad) {
                        *ret_data = malloc(n ? n : 1);
                        if (!*ret_data)
                                return fp_ch_oom(c);
                        memcpy(*ret_data, p, n);
                        *ret_len = n;
                }
        }
        if (rd.bad) {
                if (with_data)
                        free(*ret_data);
                return fp_ch_failf(
                    c, -EIO, "ClickHouse at %s: unexpected answer about a debug file", c->hostport);
        }
        return 1;
}

static int mark_used(struct fp_ch *c, const char *id)
{
        struct buf rows = {0};
        int r;

        rb_str(&rows, id);
        rb_uint(&rows, (uint64_t)fp_now_ns(CLOCK_REALTIME), 8);
        r = fp_ch_insert(c, "debugfiles_used", "build_id, used_ns", &rows);
        free(rows.p);
        return r;
}

struct held {
        char *id;
        uint64_t size;
        int64_t used_ns;
};

static int by_use(const void *a, const void *b)
{
        const struct held *x = a, *y = b;

        return x->used_ns < y->used_ns ? -1 : x->used_ns > y->used_ns;
}

/* Deletes the least recently used builds (never keep) until the rest fit budget. */
static int evict(struct fp_ch *c, const char *keep, uint64_t budget, uint64_t *ret_evicted)
{
        struct buf q = {0}, del = {0};
        struct held *v = NULL;
        size_t n = 0, cap = 0, k = 0;
        uint64_t total = 0;
        int r;

        buf_printf(&q,
                   "SELECT build_id, size, greatest(added_ns, used) FROM (SELECT build_id,"
                   " any(size) AS size, max(added_ns) AS added_ns FROM %s.debugfiles GROUP BY"
                   " build_id) ANY LEFT JOIN (SELECT build_id, max(used_ns) AS used FROM"
                   " %s.debugfiles_used GROUP BY build_id) USING build_id FORMAT RowBinary",
                   c->db, c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad) {
                const char *id = rd_str(&rd);
                uint64_t size = RD_U64(&rd);
                int64_t used = RD_I64(&rd);

                if (rd.bad)
                        break;
                total += size;
                if (strcmp(id, keep) == 0)
                        continue;
                if (fp_grow(&v, &cap, n + 1, sizeof(*v)) < 0 || !(v[n].id = strdup(id))) {
                        r = fp_ch_oom(c);
                        goto out;
                }
                v[n].size = size;
                v[n++].used_ns = used;
        }
        if (rd.bad) {
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about debug files",
                                c->hostport);
                goto out;
        }
        if (total <= budget)
                goto out;
        if (n)
                qsort(v, n, sizeof(*v), by_use);
        buf_printf(&del, "IN (");
        for (; k < n && total > budget; k++) {
                total -= v[k].size;
                if (k)
                        buf_add(&del, ", ", 2);
                buf_lit(&del, v[k].id);
        }
        buf_add(&del, ")", 1);
        if (!k)
                goto out;
        for (int t = 0; t < 2 && r == 0; t++) {
                q = (struct buf){0};
                buf_printf(&q, "ALTER TABLE %s.%s DELETE WHERE build_id %s", c->db,
                           t ? "debugfiles_used" : "debugfiles", del.p ? del.p : "");
                r = del.oom ? fp_ch_oom(c) : fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                free(q.p);
        }
        if (r == 0)
                *ret_evicted = k;
out:
        for (size_t i = 0; i < n; i++)
                free(v[i].id);
        free(v);
        free(del.p);
        return r;
}

int fp_ch_debug_put(struct fp_ch *c, const char *id, bool executable, const void *data, size_t len,
                    uint64_t budget, uint64_t *ret_evicted)
{
        struct fp_dfiles_info info;
        struct buf rows = {0};
        int r;

        if ((r = fp_ch_setup(c)) < 0 || (r = one_row(c, id, false, NULL, NULL, &info)) < 0)
                return r;
        if (r > 0) {
                r = mark_used(c, id);
                return r < 0 ? r : 1;
        }
        rb_str(&rows, id);
        rb_uint(&rows, executable, 1);
        rb_uint(&rows, len, 8);
        rb_uint(&rows, (uint64_t)fp_now_ns(CLOCK_REALTIME), 8);
        rb_len(&rows, len);
        buf_add(&rows, data, len);
        r = fp_ch_insert(c, "debugfiles", "build_id, executable, size, added_ns, data", &rows);
        free(rows.p);
        if (r < 0)
                return r;
        return evict(c, id, budget, ret_evicted);
}

int fp_ch_debug_info(struct fp_ch *c, const char *id, struct fp_dfiles_info *ret)
{
        int r = fp_ch_setup(c);

        return r < 0 ? r : one_row(c, id, false, NULL, NULL, ret);
}

int fp_ch_debug_get(struct fp_ch *c, const char *id, bool used, uint8_t **ret_data, size_t *ret_len,
                    struct fp_dfiles_info *ret_info)
{
        int r = fp_ch_setup(c);

        if (r < 0 || (r = one_row(c, id, true, ret_data, ret_len, ret_info)) <= 0)
                return r;
        if (used)
                mark_used(c, id); /* named all the same if this fails */
        return 1;
}

int fp_ch_debug_totals(struct fp_ch *c, uint64_t *ret_files, uint64_t *ret_bytes)
{
        struct buf q = {0};
        int r = fp_ch_setup(c);

        if (r < 0)
                return r;
        buf_printf(&q,
                   "SELECT toUInt64(count()), toUInt64(sum(size)) FROM (SELECT build_id,"
                   " any(size) AS size FROM %s.debugfiles GROUP BY build_id) FORMAT RowBinary",
                   c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        *ret_files = RD_U64(&rd);
        *ret_bytes = RD_U64(&rd);
        return rd.bad
                   ? fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about debug files",
                                 c->hostport)
                   : 0;
}
