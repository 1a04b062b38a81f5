/* SPDX-License-Identifier: MIT */
/*
 * Summaries of the ClickHouse store (ch-internal.h): the samples and
 * drops of every series over an hour of uploads (the hour partition, by
 * upload start) and over a day, merged once, which profiles of whole
 * hours and days read in place of their raw rows (clickhouse.c's
 * fp_ch_query_pprof() and fp_ch_drop_totals(), through fp_ch_read_plan()).
 *
 * Tables (schema version 6, all partitioned by hour, so that retention
 * and the byte budget drop a summary with its hour; a day's summary lives
 * in its first hour's partition and goes with it):
 *
 *   rollups        (hour, build, series_id, tid, thread_name, stack_id,
 *                  count, value): one summary's samples, each (series,
 *                  thread, stack) once per build.
 *   rollup_drops   (hour, build, target_id, reason, count): its drops.
 *   rollup_builds  (hour, span, build, uploads, fingerprint, built_ns):
 *                  a summary that was written whole (its rows first, this
 *                  row last: a collector killed half-way leaves rows no
 *                  read takes), span 1 (an hour) or 24 (a day), and what
 *                  it summarised: how many bucket rows its hours held (a
 *                  row written twice and not merged yet counts twice), and
 *                  the sum of their hashes.
 *
 * There is no transaction to mark what a write changes, and several
 * collectors may write one database: a summary instead says which
 * uploads it holds, and a read takes it only while the buckets of its
 * hours say the same (their fingerprint). A late, retried or duplicated
 * upload changes the fingerprint (buckets are written last, after their
 * samples: a bucket row means its samples are all there), so the hour is
 * read from its samples until summarised again; an upload written twice
 * is counted once, as the reads of samples count it (by the rows its
 * bucket says it wrote). The fingerprint is taken before the summary's
 * rows are read, so a summary never holds less than it says.
 *
 * The writer (fp_ch_rollups_keep(), from the collector's writer thread
 * when uploads pause) looks for hour partitions of buckets changed since
 * it last looked (system.parts), checks each ended hour against its
 * summaries, and writes what is missing: an hour from its samples, a
 * day from its hours' summaries. A summary that another replaced is
 * deleted only once its successor is STALE_AFTER old, longer than any
 * read that may have chosen it takes.
 */
#include "ch-internal.h"

#include "util.h"

#include <inttypes.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#define BUILD_TIMEOUT_S 600L /* one hour's samples summarised */
#define STALE_AFTER_NS  (10 * 60 * 1000000000LL)
#define SPAN_HOUR       1
#define SPAN_DAY        24
#define LOOK_MARGIN_S   2

/* An hour's buckets: how many (series, upload) rows, and the sum of their hashes. */
struct fingerprint {
        uint64_t uploads, sum;
};

struct build {
        uint32_t hour;
        uint8_t span;
        uint64_t id;
        struct fingerprint fp;
        int64_t built_ns;
};

struct builds {
        struct build *v;
        size_t n, cap;
};

static bool fp_equal(struct fingerprint a, struct fingerprint b)
{
        return a.uploads == b.uploads && a.sum == b.sum;
}

/*
 * The SQL of each hour's fingerprint: (hour, n, s) of db's buckets WHERE
 * where. A bucket row written twice and not merged yet counts twice: the
 * fingerprint changes when ClickHouse merges it away, and the hour is
 * summarised again (rare: a retry or a race), where grouping by upload
 * to count it once would cost every read a group per upload.
 */
static void fingerprint_sql(struct buf *q, const char *db, const char *where)
{
        buf_printf(q,
                   "SELECT hour, toUInt64(count()) AS n, toUInt64(sum(cityHash64(series_id,"
                   " upload, rows, count, value))) AS s FROM %s.buckets WHERE %s GROUP BY hour",
                   db, where);
}

/* The fingerprints of hours [a, b) that have buckets: fps[h - a]. */
static int fingerprints(struct fp_ch *c, uint32_t a, uint32_t b, struct fingerprint *fps)
{
        struct buf q = {0};
        int r;

        char where[64];
        memset(fps, 0, sizeof(*fps) * (b - a));
        snprintf(where, sizeof(where), "hour >= %" PRIu32 " AND hour < %" PRIu32, a, b);
        fingerprint_sql(&q, c->db, where);
        buf_printf(&q, " FORMAT RowBinary");
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        struct rd rd = ANSWER(c);
        while (r == 0 && rd.p < rd.end && !rd.bad) {
                uint32_t h = RD_U32(&rd);
                struct fingerprint fp;
                fp.uploads = RD_U64(&rd); /* in turn: an initializer list is not sequenced */
                fp.sum = RD_U64(&rd);
                if (!rd.bad && h >= a && h < b)
                        fps[h - a] = fp;
        }
        if (r == 0 && rd.bad)
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about buckets",
                                c->hostport);
        return r;
}

/* The summaries written whole whose hour is in [a, b). */
static int load_builds(struct fp_ch *c, uint32_t a, uint32_t b, struct builds *ret)
{
        struct buf q = {0};
        int r;

        ret->n = 0;
        buf_printf(&q,
                   "SELECT hour, span, build, uploads, fingerprint, built_ns FROM %s.rollup_builds"
                   " WHERE hour >= %" PRIu32 " AND hour < %" PRIu32 " FORMAT RowBinary",
                   c->db, a, b);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        struct rd rd = ANSWER(c);
        while (r == 0 && rd.p < rd.end && !rd.bad) {
                struct build x;
                x.hour = RD_U32(&rd);
                x.span = RD_U8(&rd);
                x.id = RD_U64(&rd);
                x.fp.uploads = RD_U64(&rd);
                x.fp.sum = RD_U64(&rd);
                x.built_ns = RD_I64(&rd);
                if (rd.bad)
                        break;
                if (fp_grow((void **)&ret->v, &ret->cap, ret->n + 1, sizeof(*ret->v)) < 0)
                        return fp_ch_oom(c);
                ret->v[ret->n++] = x;
        }
        if (r == 0 && rd.bad)
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about summaries",
                                c->hostport);
        return r;
}

/* The summary a read takes of (hour, span) with fingerprint fp: of those that match, the
 * largest id (every reader and writer chooses alike); NULL: none. */
static const struct build *chosen(const struct builds *bs, uint32_t hour, uint8_t span,
                                  struct fingerprint fp)
{
        const struct build *best = NULL;

        if (!fp.uploads)
                return NULL;
        for (size_t i = 0; i < bs->n; i++) {
                const struct build *x = &bs->v[i];
                if (x->hour == hour && x->span == span && fp_equal(x->fp, fp) &&
                    (!best || x->id > best->id))
                        best = x;
        }
        return best;
}

/* The sum of hours' fingerprints: a day's. */
static struct fingerprint fp_sum(const struct fingerprint *fps, size_t n)
{
        struct fingerprint s = {0, 0};
        for (size_t i = 0; i < n; i++) {
                s.uploads += fps[i].uploads;
                s.sum += fps[i].sum;
        }
        return s;
}

/* ---- reads ---- */

void fp_ch_plan_free(struct fp_ch_plan *p)
{
        free(p->builds.p);
        free(p->raw.p);
        memset(p, 0, sizeof(*p));
}

/*
 * The first hour whose uploads can reach into a range from since_ns: an
 * upload overlaps it when it started before and lasted past it, so the
 * raw rows' hours are bounded below by the longest upload stored (read
 * from buckets, a row per upload) rather than scanned from the first.
 */
static int first_raw_hour(struct fp_ch *c, int64_t since_ns, int64_t until_ns, uint32_t *ret)
{
        struct buf q = {0};
        int r;

        uint64_t longest;

        buf_printf(&q,
                   "SELECT toUInt64(max(length_ns)) FROM %s.buckets WHERE hour <= %" PRIu32
                   " FORMAT RowBinary",
                   c->db, until_ns > 0 ? (uint32_t)(until_ns / HOUR_NS) : UINT32_MAX);
        r = fp_ch_query_number(c, &q, "uploads", &longest);
        free(q.p);
        if (r < 0)
                return r;
        *ret =
            longest < (uint64_t)since_ns ? (uint32_t)((since_ns - (int64_t)longest) / HOUR_NS) : 0;
        return 0;
}

/*
 * The raw rows' hours, [lo, hi) less the covered ones of [a, b), as ranges
 * ClickHouse prunes partitions by (it does not by NOT (...)).
 */
static void raw_ranges(struct buf *raw, uint32_t lo, uint32_t hi, uint32_t a, uint32_t b,
                       const bool *covered)
{
        size_t n = 0;

        buf_printf(raw, " AND (");
        for (uint32_t h = lo; h < hi;) {
                if (h >= a && h < b && covered[h - a]) {
                        h++;
                        continue;
                }
                uint32_t end = h + 1;
                while (end < hi && !(end >= a && end < b && covered[end - a]))
                        end = end < a ? a : end >= b ? hi : end + 1;
                buf_printf(raw, "%s(hour >= %" PRIu32 " AND hour < %" PRIu32 ")", n++ ? " OR " : "",
                           h, end);
                h = end;
        }
        if (!n)
                buf_printf(raw, "hour >= 1 AND hour < 1"); /* none: no part is read */
        buf_printf(raw, ")");
}

int fp_ch_read_plan(struct fp_ch *c, int64_t since_ns, int64_t until_ns, struct fp_ch_plan *ret)
{
        struct builds bs = {0};
        struct fingerprint *fps = NULL;
        bool *covered = NULL;
        int r = 0;

        uint32_t lo = 0;

        memset(ret, 0, sizeof(*ret));
        if (since_ns <= 0)
                return 0;
        if ((r = first_raw_hour(c, since_ns, until_ns, &lo)) < 0)
                goto out;
        if (lo)
                buf_printf(&ret->raw, " AND hour >= %" PRIu32, lo);
        if (c->rollups_off || until_ns <= since_ns)
                goto out;
        /* The whole hours [a, b) and whole days [da, db) inside the range. */
        uint32_t a = (uint32_t)((since_ns + HOUR_NS - 1) / HOUR_NS);
        uint32_t b = (uint32_t)(until_ns / HOUR_NS);
        if (b <= a)
                goto out;
        uint32_t da = (a + SPAN_DAY - 1) / SPAN_DAY, db = b / SPAN_DAY;
        fps = calloc(b - a, sizeof(*fps));
        covered = calloc(b - a, sizeof(*covered));
        if (!fps || !covered) {
                r = fp_ch_oom(c);
                goto out;
        }
        if ((r = fingerprints(c, a, b, fps)) < 0 || (r = load_builds(c, a, b, &bs)) < 0)
                goto out;
        for (uint32_t d = da; d < db; d++) {
                uint32_t h0 = d * SPAN_DAY;
                const struct build *x = chosen(&bs, h0, SPAN_DAY, fp_sum(fps + (h0 - a), SPAN_DAY));
                if (!x)
                        continue;
                buf_printf(&ret->builds, "%s%" PRIu64, ret->n_builds ? ", " : "", x->id);
                ret->n_builds++;
                /* The hours it was made of: those with buckets (samples of an upload whose
                 * bucket never came are read raw, as the summary of their hour holds them). */
                for (uint32_t h = h0; h < h0 + SPAN_DAY; h++)
                        covered[h - a] = fps[h - a].uploads > 0;
        }
        for (uint32_t h = a; h < b; h++) {
                const struct build *x =
                    covered[h - a] ? NULL : chosen(&bs, h, SPAN_HOUR, fps[h - a]);
                if (!x)
                        continue;
                buf_printf(&ret->builds, "%s%" PRIu64, ret->n_builds ? ", " : "", x->id);
                ret->n_builds++;
                covered[h - a] = true;
        }
        /* What the raw rows are read for: the hours not covered. */
        if (ret->n_builds)
                raw_ranges(&ret->raw, lo, (uint32_t)(until_ns / HOUR_NS) + 1, a, b, covered);
        ret->first_hour = a;
        ret->end_hour = b;
out:
        if (r == 0 && (ret->builds.oom || ret->raw.oom))
                r = fp_ch_oom(c);
        if (r < 0)
                fp_ch_plan_free(ret);
        free(bs.v);
        free(fps);
        free(covered);
        return r;
}

int fp_ch_rollups_unsummarised(struct fp_ch *c, int64_t now_ns, uint64_t *ret)
{
        struct buf q = {0};
        char where[64];
        int r;

        snprintf(where, sizeof(where), "hour < %" PRIu32, (uint32_t)(now_ns / HOUR_NS));
        buf_printf(&q, "SELECT toUInt64(count()) FROM (");
        fingerprint_sql(&q, c->db, where);
        buf_printf(&q,
                   ") WHERE (hour, n, s) NOT IN (SELECT hour, uploads, fingerprint FROM"
                   " %s.rollup_builds WHERE span = %d) FORMAT RowBinary",
                   c->db, SPAN_HOUR);
        r = fp_ch_query_number(c, &q, "summaries", ret);
        free(q.p);
        return r;
}

/* ---- writing ---- */

static uint64_t new_build_id(void)
{
        uint64_t id = 0;
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = fp_now_ns(CLOCK_REALTIME) ^ fp_now_ns(CLOCK_MONOTONIC) << 20;
        return id ? id : 1;
}

/* The key of (hour, span) in c->rollup_forget. */
static uint64_t forget_key(uint32_t hour, uint8_t span)
{
        return ((uint64_t)hour + 1) << 8 | span;
}

/*
 * Deletes the summaries of (hour, span) other than keep once keep is
 * STALE_AFTER old; before, notes when to come back (c->rollup_forget).
 * 0 or -errno.
 */
static int forget_replaced(struct fp_ch *c, const struct builds *bs, uint32_t hour, uint8_t span,
                           const struct build *keep, int64_t now_ns)
{
        struct buf ids = {0}, q = {0};
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; i < bs->n; i++) {
                const struct build *x = &bs->v[i];
                if (x->hour != hour || x->span != span || x->id == keep->id)
                        continue;
                buf_printf(&ids, "%s%" PRIu64, n ? ", " : "", x->id);
                n++;
        }
        if (!n)
                return 0;
        if (now_ns - keep->built_ns < STALE_AFTER_NS) {
                /* A read may have chosen them: later. */
                free(ids.p);
                return fp_store_map_put(&c->rollup_forget, forget_key(hour, span),
                                        (uint64_t)(keep->built_ns + STALE_AFTER_NS), 0) < 0
                           ? fp_ch_oom(c)
                           : 0;
        }
        static const char *const tables[] = {"rollup_builds", "rollups", "rollup_drops"};
        for (size_t i = 0; i < 3 && r == 0; i++) {
                q.n = 0;
                buf_printf(&q,
                           "ALTER TABLE %s.%s DELETE WHERE hour = %" PRIu32 " AND build IN (%s)",
                           c->db, tables[i], hour, ids.p ? ids.p : "0");
                q.oom = q.oom || ids.oom;
                r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
        }
        free(ids.p);
        free(q.p);
        return r;
}

/*
 * Writes a summary of (hour, span) with fingerprint fp: its samples from
 * samples_sql (series_id, tid, thread_name, stack_id, c, v) and its drops
 * from drops_sql (target_id, reason, c), then its builds row.
 */
static int write_build(struct fp_ch *c, uint32_t hour, uint8_t span, struct fingerprint fp,
                       const char *samples_sql, const char *drops_sql, struct builds *bs)
{
        struct buf q = {0};
        uint64_t id = new_build_id();
        int r;

        buf_printf(&q,
                   "INSERT INTO %s.rollups (hour, build, series_id, tid, thread_name, stack_id,"
                   " count, value) SELECT toUInt32(%" PRIu32 "), toUInt64(%" PRIu64 "),"
                   " series_id, tid, thread_name, stack_id, toUInt64(sum(c)), toUInt64(sum(v))"
                   " FROM (%s) GROUP BY series_id, tid, thread_name, stack_id",
                   c->db, hour, id, samples_sql);
        r = fp_ch_exec(c, &q, BUILD_TIMEOUT_S);
        q.n = 0;
        if (r == 0) {
                buf_printf(&q,
                           "INSERT INTO %s.rollup_drops (hour, build, target_id, reason, count)"
                           " SELECT toUInt32(%" PRIu32 "), toUInt64(%" PRIu64 "), target_id,"
                           " reason, toUInt64(sum(c)) FROM (%s) GROUP BY target_id, reason",
                           c->db, hour, id, drops_sql);
                r = fp_ch_exec(c, &q, BUILD_TIMEOUT_S);
                q.n = 0;
        }
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        if (r == 0) {
                buf_printf(&q,
                           "INSERT INTO %s.rollup_builds (hour, span, build, uploads, fingerprint,"
                           " built_ns) VALUES (%" PRIu32 ", %u, %" PRIu64 ", %" PRIu64 ", %" PRIu64
                           ", %" PRId64 ")",
                           c->db, hour, (unsigned)span, id, fp.uploads, fp.sum, now);
                r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
        }
        free(q.p);
        if (r == 0 && fp_grow((void **)&bs->v, &bs->cap, bs->n + 1, sizeof(*bs->v)) < 0)
                r = fp_ch_oom(c);
        if (r == 0)
                bs->v[bs->n++] = (struct build){hour, span, id, fp, now};
        return r;
}

/* An hour's samples, each upload counted once (as clickhouse.c's reads count them): rows
 * of an upload with more rows than its bucket says it wrote (or no bucket) taken once. */
static int hour_source(struct fp_ch *c, uint32_t hour, struct buf *q)
{
        const char *db = c->db;
        buf_printf(q,
                   "SELECT series_id, tid, thread_name, stack_id, count AS c, value AS v"
                   " FROM %s.samples WHERE hour = %" PRIu32 " AND (series_id, upload) NOT IN"
                   " (DUPS) UNION ALL SELECT series_id, tid, thread_name, stack_id, any(count)"
                   " AS c, any(value) AS v FROM %s.samples WHERE hour = %" PRIu32
                   " AND (series_id, upload) IN (DUPS)"
                   " GROUP BY series_id, upload, stack_id, tid, thread_name",
                   db, hour, db, hour);
        struct buf dups = {0};
        buf_printf(&dups,
                   "SELECT series_id, upload FROM (SELECT series_id, upload, count() AS n"
                   " FROM %s.samples WHERE hour = %" PRIu32 " GROUP BY series_id, upload)"
                   " ANY LEFT JOIN (SELECT series_id, upload, max(rows) AS r FROM %s.buckets"
                   " WHERE hour = %" PRIu32 " GROUP BY series_id, upload)"
                   " USING (series_id, upload) WHERE n > r",
                   db, hour, db, hour);
        if (q->oom || dups.oom) {
                free(dups.p);
                return fp_ch_oom(c);
        }
        /* DUPS, twice. */
        struct buf out = {0};
        for (const char *s = q->p, *at; s; s = at ? at + 4 : NULL) {
                at = strstr(s, "DUPS");
                buf_add(&out, s, at ? (size_t)(at - s) : strlen(s));
                if (at)
                        buf_add(&out, dups.p, dups.n);
        }
        free(dups.p);
        free(q->p);
        *q = out;
        return q->oom ? fp_ch_oom(c) : 0;
}

/* An hour's drops, each upload counted once. */
static int hour_drops(struct fp_ch *c, uint32_t hour, struct buf *q)
{
        buf_printf(q,
                   "SELECT target_id, reason, any(count) AS c FROM %s.drops WHERE hour = %" PRIu32
                   " GROUP BY target_id, upload, reason",
                   c->db, hour);
        return q->oom ? fp_ch_oom(c) : 0;
}

/* Checks hour h against its summaries; writes one where none matches. 1 or -errno. */
static int keep_hour(struct fp_ch *c, uint32_t h, int64_t now_ns, bool *ret_settled)
{
        struct fingerprint fp;
        struct builds bs = {0};
        struct buf src = {0}, drops = {0};
        int r;

        *ret_settled = false;
        if ((r = fingerprints(c, h, h + 1, &fp)) < 0 || (r = load_builds(c, h, h + 1, &bs)) < 0)
                goto out;
        const struct build *x = chosen(&bs, h, SPAN_HOUR, fp);
        if (!x && fp.uploads) {
                if ((r = hour_source(c, h, &src)) < 0 || (r = hour_drops(c, h, &drops)) < 0 ||
                    (r = write_build(c, h, SPAN_HOUR, fp, src.p, drops.p, &bs)) < 0)
                        goto out;
                x = &bs.v[bs.n - 1];
        }
        r = x ? forget_replaced(c, &bs, h, SPAN_HOUR, x, now_ns) : 0;
        *ret_settled = r >= 0;
out:
        free(src.p);
        free(drops.p);
        free(bs.v);
        return r < 0 ? r : 1;
}

/* Checks day d against its summary; writes one from its hours' where none matches, once
 * every hour of it with buckets is summarised (else marks those hours due). 1 or -errno. */
static int keep_day(struct fp_ch *c, uint32_t d, int64_t now_ns, bool *ret_settled)
{
        uint32_t h0 = d * SPAN_DAY;
        struct fingerprint fps[SPAN_DAY];
        struct builds bs = {0};
        struct buf src = {0}, drops = {0}, ids = {0};
        int r;

        *ret_settled = false;
        if ((r = fingerprints(c, h0, h0 + SPAN_DAY, fps)) < 0 ||
            (r = load_builds(c, h0, h0 + SPAN_DAY, &bs)) < 0)
                goto out;
        struct fingerprint fp = fp_sum(fps, SPAN_DAY);
        const struct build *x = chosen(&bs, h0, SPAN_DAY, fp);
        if (!x && fp.uploads) {
                size_t n = 0;
                for (uint32_t h = h0; h < h0 + SPAN_DAY; h++) {
                        const struct build *y = chosen(&bs, h, SPAN_HOUR, fps[h - h0]);
                        if (fps[h - h0].uploads && !y) {
                                /* An hour changed since it was looked at: it goes first. */
                                fp_store_map_put(&c->rollup_seen, (uint64_t)h + 1, 0, 0);
                                goto out;
                        }
                        if (y)
                                buf_printf(&ids, "%s%" PRIu64, n++ ? ", " : "", y->id);
                }
                const char *in = ids.p ? ids.p : "0";
                buf_printf(&src,
                           "SELECT series_id, tid, thread_name, stack_id, count AS c, value AS v"
                           " FROM %s.rollups WHERE hour >= %" PRIu32 " AND hour < %" PRIu32
                           " AND build IN (%s)",
                           c->db, h0, h0 + SPAN_DAY, in);
                buf_printf(&drops,
                           "SELECT target_id, reason, count AS c FROM %s.rollup_drops"
                           " WHERE hour >= %" PRIu32 " AND hour < %" PRIu32 " AND build IN (%s)",
                           c->db, h0, h0 + SPAN_DAY, in);
                if (src.oom || drops.oom || ids.oom) {
                        r = fp_ch_oom(c);
                        goto out;
                }
                if ((r = write_build(c, h0, SPAN_DAY, fp, src.p, drops.p, &bs)) < 0)
                        goto out;
                x = &bs.v[bs.n - 1];
        }
        r = x ? forget_replaced(c, &bs, h0, SPAN_DAY, x, now_ns) : 0;
        *ret_settled = r >= 0;
out:
        free(src.p);
        free(drops.p);
        free(ids.p);
        free(bs.v);
        return r < 0 ? r : 1;
}

static bool not_key(const struct fp_store_map_entry *e, void *ud)
{
        return e->key != *(const uint64_t *)ud;
}

int fp_ch_rollups_keep(struct fp_ch *c, int64_t now_ns, int64_t grace_ns)
{
        struct buf q = {0};
        uint32_t due_hour = UINT32_MAX, due_day = UINT32_MAX;
        /*
         * A change in the seconds before a look may not be visible to it yet: a look
         * counts for changes before LOOK_MARGIN_S ahead of it.
         */
        uint64_t look_s = (uint64_t)(fp_now_ns(CLOCK_REALTIME) / 1000000000LL) - LOOK_MARGIN_S;
        int r;

        /* The hour partitions of buckets and when each last changed (a write, or a merge:
         * a merge only means one more look). */
        buf_printf(&q,
                   "SELECT toUInt32(partition_id), toUInt64(max(toUInt32(modification_time)))"
                   " FROM system.parts WHERE database = '%s' AND table = 'buckets' AND active"
                   " GROUP BY partition_id FORMAT RowBinary",
                   c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad) {
                uint32_t h = RD_U32(&rd);
                uint64_t changed_s = RD_U64(&rd);
                if (rd.bad || ((int64_t)h + 1) * HOUR_NS + grace_ns > now_ns)
                        continue; /* not ended (a late upload may come) */
                struct fp_store_map_entry *e = fp_store_map_get(&c->rollup_seen, (uint64_t)h + 1);
                if (e && e->a > changed_s)
                        continue; /* looked at after its last change */
                if (h < due_hour)
                        due_hour = h;
        }
        if (rd.bad)
                return fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about parts",
                                   c->hostport);
        bool settled;
        /* Summaries replaced long enough ago to be deleted (the hour or day looked at again). */
        for (size_t i = 0; i < c->rollup_forget.cap; i++) {
                struct fp_store_map_entry *e = &c->rollup_forget.e[i];
                if (!e->key || (int64_t)e->a > now_ns)
                        continue;
                uint64_t key = e->key, retry = (uint64_t)(now_ns + STALE_AFTER_NS);
                uint32_t h = (uint32_t)(key >> 8) - 1;
                e->a = retry; /* if deleting fails, again later */
                r = (key & 0xff) == SPAN_DAY ? keep_day(c, h / SPAN_DAY, now_ns, &settled)
                                             : keep_hour(c, h, now_ns, &settled);
                /* Done unless a newer replacement set a time of its own. */
                const struct fp_store_map_entry *again = fp_store_map_get(&c->rollup_forget, key);
                if (r >= 0 && again && again->a == retry &&
                    fp_store_map_filter(&c->rollup_forget, not_key, &key) < 0)
                        r = fp_ch_oom(c);
                return r;
        }
        if (due_hour != UINT32_MAX) {
                r = keep_hour(c, due_hour, now_ns, &settled);
                /* Looked at (a: when, b: the look's number; its day is due after it). */
                if (r >= 0 && settled &&
                    fp_store_map_put(&c->rollup_seen, (uint64_t)due_hour + 1, look_s,
                                     ++c->rollup_looks) < 0)
                        r = fp_ch_oom(c);
                return r;
        }
        /* A day that ended, none of its hours due, one looked at since the day was. */
        for (size_t i = 0; i < c->rollup_seen.cap; i++) {
                const struct fp_store_map_entry *e = &c->rollup_seen.e[i];
                if (!e->key)
                        continue;
                uint32_t d = (uint32_t)(e->key - 1) / SPAN_DAY;
                const struct fp_store_map_entry *de =
                    fp_store_map_get(&c->rollup_days_seen, (uint64_t)d + 1);
                if (((int64_t)d + 1) * DAY_NS + grace_ns <= now_ns && (!de || de->a < e->b) &&
                    d < due_day)
                        due_day = d;
        }
        if (due_day != UINT32_MAX) {
                r = keep_day(c, due_day, now_ns, &settled);
                if (r >= 0 && settled &&
                    fp_store_map_put(&c->rollup_days_seen, (uint64_t)due_day + 1, c->rollup_looks,
                                     0) < 0)
                        r = fp_ch_oom(c);
                return r;
        }
        return 0;
}
