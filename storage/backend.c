/* SPDX-License-Identifier: MIT */
/* The collector's store, SQLite or ClickHouse (backend.h): each call goes to the one opened. */
#include "backend.h"
#include "clickhouse.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>

struct fp_backend {
        struct fp_store *sq; /* one of the two */
        struct fp_ch *ch;
        int64_t deadline_ns; /* fp_backend_set_deadline()'s */
};

int fp_backend_open(const char *spec, const char *credentials_file, uint64_t max_bytes, bool writer,
                    struct fp_backend **ret, char *err, size_t errlen)
{
        struct fp_backend *b = calloc(1, sizeof(*b));
        int r;

        if (!b)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        if (fp_ch_is_url(spec))
                r = fp_ch_open(spec, credentials_file, max_bytes, writer, &b->ch, err, errlen);
        else if (writer)
                r = fp_store_open(spec, max_bytes, &b->sq, err, errlen);
        else
                r = fp_store_open_readonly(spec, &b->sq, err, errlen);
        if (r >= 0 && b->sq)
                fp_store_set_rollups(b->sq, true); /* a collector's: summaries kept and read */
        if (r < 0) {
                free(b);
                return r;
        }
        *ret = b;
        return r;
}

void fp_backend_close(struct fp_backend *b)
{
        if (!b)
                return;
        fp_store_close(b->sq);
        fp_ch_close(b->ch);
        free(b);
}

bool fp_backend_is_clickhouse(const struct fp_backend *b)
{
        return b && b->ch;
}

void fp_backend_set_deadline(struct fp_backend *b, int64_t deadline_ns)
{
        b->deadline_ns = deadline_ns;
        if (b->ch)
                fp_ch_set_deadline(b->ch, deadline_ns);
        else
                fp_store_set_deadline(b->sq, deadline_ns);
}

const char *fp_backend_errmsg(const struct fp_backend *b)
{
        return b->ch ? fp_ch_errmsg(b->ch) : fp_store_errmsg(b->sq);
}

int fp_backend_write_batches(struct fp_backend *b, const struct fp_store_batch *const *batches,
                             size_t n, int *results)
{
        return b->ch ? fp_ch_write_batches(b->ch, batches, n, results)
                     : fp_store_write_batches(b->sq, batches, n, results);
}

int fp_backend_expire(struct fp_backend *b, int64_t before_ns)
{
        return b->ch ? fp_ch_expire(b->ch, before_ns) : fp_store_expire(b->sq, before_ns);
}

int fp_backend_query_pprof(struct fp_backend *b, const struct fp_store_filter *f,
                           struct fp_pprof *p)
{
        return b->ch ? fp_ch_query_pprof(b->ch, f, p) : fp_store_query_pprof(b->sq, f, p);
}

int fp_backend_drop_totals(struct fp_backend *b, const struct fp_store_filter *f,
                           fp_store_drop_fn fn, void *userdata)
{
        return b->ch ? fp_ch_drop_totals(b->ch, f, fn, userdata)
                     : fp_store_drop_totals(b->sq, f, fn, userdata);
}

int fp_backend_list_series(struct fp_backend *b, const struct fp_store_filter *f,
                           fp_store_series_fn fn, void *userdata)
{
        return b->ch ? fp_ch_list_series(b->ch, f, fn, userdata)
                     : fp_store_list_series(b->sq, f, fn, userdata);
}

int fp_backend_timeline(struct fp_backend *b, const struct fp_store_filter *f, fp_store_point_fn fn,
                        void *userdata)
{
        return b->ch ? fp_ch_timeline(b->ch, f, fn, userdata)
                     : fp_store_timeline(b->sq, f, fn, userdata);
}

int fp_backend_host_costs(struct fp_backend *b, const struct fp_store_filter *f,
                          fp_store_host_cost_fn fn, void *userdata)
{
        return b->ch ? fp_ch_host_costs(b->ch, f, fn, userdata)
                     : fp_store_host_costs(b->sq, f, fn, userdata);
}

int fp_backend_stats(struct fp_backend *b, struct fp_store_stats *ret)
{
        return b->ch ? fp_ch_stats(b->ch, ret) : fp_store_stats(b->sq, ret);
}

void fp_backend_set_summaries(struct fp_backend *b, bool on)
{
        if (b->ch)
                fp_ch_set_summaries(b->ch, on);
        else
                fp_store_set_rollup_reads(b->sq, on);
}

int fp_backend_rollup_step(struct fp_backend *b, int64_t now_ns, int64_t grace_ns)
{
        return b->ch ? fp_ch_rollup_step(b->ch, now_ns, grace_ns)
                     : fp_store_rollup_step(b->sq, now_ns, grace_ns);
}

int64_t fp_backend_deadline(const struct fp_backend *b)
{
        return b->deadline_ns;
}
