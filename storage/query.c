/* SPDX-License-Identifier: MIT */
/*
 * Reading the store: merged pprof profiles, drop totals, series and
 * targets, statistics. Each query runs in one read transaction, so it
 * sees one consistent state even while another connection writes.
 *
 * A profile query first finds the matching (bucket, target, event) rows
 * in bucket_series (small: one row per bucket, target and event), then
 * reads the samples of each matching bucket and event through the
 * samples primary key, sums them per (thread, stack) in memory, and only
 * then builds the pprof samples: each distinct stack is decoded, and each
 * distinct frame, function and mapping interned into the profile, once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pprof.h"
#include "store-internal.h"

void fp_store_bind_filter(sqlite3_stmt *st, const struct fp_store_filter *f)
{
        if (f->host)
                sqlite3_bind_text(st, 1, f->host, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 1);
        sqlite3_bind_int64(st, 2, f->pid);
        sqlite3_bind_int64(st, 3, (int64_t)f->starttime);
        if (f->process)
                sqlite3_bind_text(st, 4, f->process, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 4);
        sqlite3_bind_int64(st, 5, f->since_ns);
        sqlite3_bind_int64(st, 15,
                           f->since_ns); /* FILTER_REACH's (a statement without it: ignored) */
        sqlite3_bind_int64(st, 6, f->until_ns);
        sqlite3_bind_int64(st, 7, f->bucket_min);
        sqlite3_bind_int64(st, 8, f->bucket_max);
        if (f->service)
                sqlite3_bind_text(st, 9, f->service, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 9);
        sqlite3_bind_int(st, 11, f->tier);
        if (f->container)
                sqlite3_bind_text(st, 12, f->container, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 12);
        if (f->config_word)
                sqlite3_bind_text(st, 13, f->config_word, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 13);
        sqlite3_bind_int64(st, 14, f->start_from_ns);
}

const char *fp_store_col_text(sqlite3_stmt *st, int i)
{
        const char *t = (const char *)sqlite3_column_text(st, i);
        return t ? t : "";
}

/*
 * A read transaction, so that a query's statements see one state. Reads
 * nest: a query made from another's callback (the uploader queries each
 * series while it lists them) joins the outer transaction.
 */
int fp_store_read_begin(struct fp_store *s)
{
        int rc;

        if (s->read_depth++ > 0)
                return 0;
        rc = fp_store_db_exec(s->db, "BEGIN");
        if (rc == SQLITE_OK)
                return 0;
        s->read_depth--;
        return fp_store_db_fail(s, rc, "begin reading");
}

void fp_store_read_end(struct fp_store *s)
{
        if (--s->read_depth == 0 && !sqlite3_get_autocommit(s->db))
                (void)fp_store_db_exec(s->db, "COMMIT");
}

int fp_store_prepare(struct fp_store *s, const char *sql, sqlite3_stmt **ret)
{
        int rc = sqlite3_prepare_v2(s->db, sql, -1, ret, NULL);
        return rc == SQLITE_OK ? 0 : fp_store_db_fail(s, rc, "prepare a query");
}

/* ---- drop totals ---- */

/* The drops of f's buckets (REACH: " AND " FILTER_REACH for a range with both ends). */
#define DROPS_SQL(REACH)                                                                           \
        "SELECT h.name, t.pid, t.starttime, t.comm, x.reason, sum(x.count) FROM ("                 \
        " SELECT d.target_id AS target_id, d.reason AS reason, d.count AS count"                   \
        " FROM drops d JOIN buckets b ON b.id = d.bucket_id WHERE " FILTER_BUCKETS REACH           \
        " UNION ALL SELECT target_id, reason, count FROM carried_drops WHERE ?6 = 0 AND ?8 = 0"    \
        ") x JOIN targets t ON t.id = x.target_id JOIN hosts h ON h.id = t.host_id"                \
        " WHERE " FILTER_TARGETS " GROUP BY x.target_id, x.reason"                                 \
        " ORDER BY h.name, t.pid, t.starttime, x.reason"
static const char drops_sql[] = DROPS_SQL("");
static const char drops_range_sql[] = DROPS_SQL(" AND " FILTER_REACH);

int fp_store_drop_rows(struct fp_store *s, const struct fp_store_filter *f, fp_store_drop_fn fn,
                       void *userdata)
{
        sqlite3_stmt *st = NULL;
        bool range = f->since_ns > 0 && f->until_ns > 0;
        int n = 0, rc, r = fp_store_prepare(s, range ? drops_range_sql : drops_sql, &st);

        if (r < 0)
                return r;
        fp_store_bind_filter(st, f);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t count = sqlite3_column_int64(st, 5);
                struct fp_store_drop d = {
                    .host = fp_store_col_text(st, 0),
                    .pid = (pid_t)sqlite3_column_int64(st, 1),
                    .starttime = (uint64_t)sqlite3_column_int64(st, 2),
                    .comm = fp_store_col_text(st, 3),
                    .reason = fp_store_col_text(st, 4),
                    .count = count > 0 ? (uint64_t)count : 0,
                };
                r = fn(userdata, &d);
                if (r < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "sum drop counts");
        sqlite3_finalize(st);
        return r < 0 ? r : n;
}

int fp_store_drop_totals(struct fp_store *s, const struct fp_store_filter *f, fp_store_drop_fn fn,
                         void *userdata)
{
        struct fp_store_filter none = {0};
        int r = fp_store_read_begin(s);

        if (r < 0)
                return r;
        r = fp_store_drop_rows(s, f ? f : &none, fn, userdata);
        fp_store_read_end(s);
        return r;
}

/* ---- series and targets ---- */

static const char series_sql[] =
    "SELECT h.name, t.pid, t.starttime, t.comm, t.exe, t.config, t.active, e.name,"
    " min(b.start_ns), max(b.start_ns + b.length_ns), count(DISTINCT b.id), sum(bs.count),"
    " sum(bs.value), t.service, t.container, e.count_type, e.count_unit, e.value_type,"
    " e.value_unit, e.period_type, e.period_unit"
    " FROM bucket_series bs JOIN buckets b ON b.id = bs.bucket_id"
    " JOIN targets t ON t.id = bs.target_id JOIN hosts h ON h.id = t.host_id"
    " JOIN events e ON e.id = bs.event_id"
    " WHERE " FILTER_TARGETS " AND " FILTER_BUCKETS " AND (?10 IS NULL OR e.name = ?10)"
    " GROUP BY bs.target_id, e.name ORDER BY h.name, t.pid, t.starttime, e.name";

/*
 * The same from summaries (rollup.c) for the whole hours [?20, ?21) and
 * days [?23, ?24) of a range: the buckets of its ragged ends and of its
 * marked hours, each series' day summaries, and its hour summaries but
 * those of a day it has a summary of (as profile.c reads them).
 */
static const char series_summarised_sql[] =
    "WITH parts (target_id, event_id, first_ns, last_ns, buckets, count, value) AS ("
    " SELECT bs.target_id, bs.event_id, b.start_ns, b.start_ns + b.length_ns, 1, bs.count,"
    " bs.value FROM buckets b JOIN bucket_series bs ON bs.bucket_id = b.id"
    " WHERE (b.start_ns < ?20 AND b.start_ns + b.length_ns > ?5)"
    " OR (b.start_ns >= ?21 AND b.start_ns < ?6)"
    " UNION ALL SELECT target_id, event_id, first_ns, last_ns, buckets, count, value"
    " FROM rollups WHERE span_ns = ?22 AND start_ns >= ?23 AND start_ns < ?24"
    " UNION ALL SELECT r.target_id, r.event_id, r.first_ns, r.last_ns, r.buckets, r.count,"
    " r.value FROM rollups r WHERE r.span_ns = ?25 AND r.start_ns >= ?20 AND r.start_ns < ?21"
    " AND NOT (r.start_ns >= ?23 AND r.start_ns < ?24 AND EXISTS (SELECT 1 FROM rollups d"
    " WHERE d.span_ns = ?22 AND d.start_ns = r.start_ns - r.start_ns % ?22"
    " AND d.target_id = r.target_id AND d.event_id = r.event_id))"
    " UNION ALL SELECT bs.target_id, bs.event_id, b.start_ns, b.start_ns + b.length_ns, 1,"
    " bs.count, bs.value FROM rollup_dirty m JOIN buckets b ON b.start_ns >= m.start_ns"
    " AND b.start_ns < m.start_ns + m.span_ns JOIN bucket_series bs ON bs.bucket_id = b.id"
    " AND bs.target_id = m.target_id AND bs.event_id = m.event_id"
    " WHERE m.span_ns = ?25 AND m.start_ns >= ?20 AND m.start_ns < ?21)"
    " SELECT h.name, t.pid, t.starttime, t.comm, t.exe, t.config, t.active, e.name,"
    " min(p.first_ns), max(p.last_ns), sum(p.buckets), sum(p.count), sum(p.value), t.service,"
    " t.container, e.count_type, e.count_unit, e.value_type, e.value_unit, e.period_type,"
    " e.period_unit FROM parts p JOIN targets t ON t.id = p.target_id"
    " JOIN hosts h ON h.id = t.host_id JOIN events e ON e.id = p.event_id"
    " WHERE " FILTER_TARGETS " AND (?10 IS NULL OR e.name = ?10)"
    " GROUP BY p.target_id, e.name ORDER BY h.name, t.pid, t.starttime, e.name";

int fp_store_list_series(struct fp_store *s, const struct fp_store_filter *f, fp_store_series_fn fn,
                         void *userdata)
{
        struct fp_store_filter none = {0};
        sqlite3_stmt *st = NULL;
        int n = 0, rc, r;

        if (!f)
                f = &none;
        struct fp_store_span sp;
        bool summarised = fp_store_rollup_range(s, f, &sp);
        r = fp_store_read_begin(s);
        if (r < 0)
                return r;
        r = fp_store_prepare(s, summarised ? series_summarised_sql : series_sql, &st);
        if (r < 0)
                goto out;
        fp_store_bind_filter(st, f);
        if (summarised) {
                sqlite3_bind_int64(st, 20, sp.h0);
                sqlite3_bind_int64(st, 21, sp.h1);
                sqlite3_bind_int64(st, 22, FP_STORE_DAY_NS);
                sqlite3_bind_int64(st, 23, sp.d0);
                sqlite3_bind_int64(st, 24, sp.d1);
                sqlite3_bind_int64(st, 25, FP_STORE_HOUR_NS);
        }
        if (f->event)
                sqlite3_bind_text(st, 10, f->event, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct fp_store_series se = {
                    .host = fp_store_col_text(st, 0),
                    .pid = (pid_t)sqlite3_column_int64(st, 1),
                    .starttime = (uint64_t)sqlite3_column_int64(st, 2),
                    .comm = fp_store_col_text(st, 3),
                    .exe = fp_store_col_text(st, 4),
                    .config = fp_store_col_text(st, 5),
                    .active = sqlite3_column_int(st, 6) != 0,
                    .event = fp_store_col_text(st, 7),
                    .first_ns = sqlite3_column_int64(st, 8),
                    .last_ns = sqlite3_column_int64(st, 9),
                    .buckets = (uint64_t)sqlite3_column_int64(st, 10),
                    .count = (uint64_t)sqlite3_column_int64(st, 11),
                    .value = (uint64_t)sqlite3_column_int64(st, 12),
                    .service = fp_store_col_text(st, 13),
                    .container = fp_store_col_text(st, 14),
                    .count_type = fp_store_col_text(st, 15),
                    .count_unit = fp_store_col_text(st, 16),
                    .value_type = fp_store_col_text(st, 17),
                    .value_unit = fp_store_col_text(st, 18),
                    .period_type = fp_store_col_text(st, 19),
                    .period_unit = fp_store_col_text(st, 20),
                };
                r = fn(userdata, &se);
                if (r < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "list series");
out:
        sqlite3_finalize(st);
        fp_store_read_end(s);
        return r < 0 ? r : n;
}

/*
 * A time line's points, per bucket and event (GROUP: ", t.id" for one per series too; REACH:
 * " AND " FILTER_REACH for a range with both ends).
 */
#define TIMELINE_SQL(GROUP, REACH)                                                                 \
        "SELECT b.start_ns, b.length_ns, e.name, sum(bs.count), sum(bs.value), h.name, t.pid,"     \
        " t.starttime"                                                                             \
        " FROM bucket_series bs JOIN buckets b ON b.id = bs.bucket_id"                             \
        " JOIN targets t ON t.id = bs.target_id JOIN hosts h ON h.id = t.host_id"                  \
        " JOIN events e ON e.id = bs.event_id"                                                     \
        " WHERE " FILTER_TARGETS " AND " FILTER_BUCKETS " AND (?10 IS NULL OR e.name = ?10)" REACH \
        " GROUP BY b.id, e.name" GROUP " ORDER BY b.start_ns, b.id"

/*
 * The wall profile's (FP_STORE_WALL_EVENT): off-CPU and CPU time of the
 * targets with off-CPU, and wall time a client stored as such.
 */
#define TIMELINE_WALL_SQL(GROUP, REACH)                                                            \
        "SELECT b.start_ns, b.length_ns, '" FP_STORE_WALL_EVENT "', sum(bs.count), sum(bs.value)," \
        " h.name, t.pid, t.starttime"                                                              \
        " FROM bucket_series bs JOIN buckets b ON b.id = bs.bucket_id"                             \
        " JOIN targets t ON t.id = bs.target_id JOIN hosts h ON h.id = t.host_id"                  \
        " JOIN events e ON e.id = bs.event_id"                                                     \
        " WHERE " FILTER_TARGETS " AND " FILTER_BUCKETS " AND ?10 IS NOT NULL" REACH               \
        " AND e.value_unit = 'nanoseconds' AND (e.name = '" FP_STORE_OFFCPU_EVENT "'"              \
        " OR e.name = '" FP_STORE_WALL_EVENT "'"                                                   \
        " OR (e.name IN ('cpu-clock', 'task-clock') AND EXISTS (SELECT 1 FROM bucket_series o"     \
        " JOIN events oe ON oe.id = o.event_id WHERE o.target_id = bs.target_id"                   \
        " AND oe.name = '" FP_STORE_OFFCPU_EVENT "')))"                                            \
        " GROUP BY b.id" GROUP " ORDER BY b.start_ns, b.id"
#define REACH " AND " FILTER_REACH
/* [wall][by series][a range with both ends] */
static const char *const timeline_sqls[2][2][2] = {
    {{TIMELINE_SQL("", ""), TIMELINE_SQL("", REACH)},
     {TIMELINE_SQL(", t.id", ""), TIMELINE_SQL(", t.id", REACH)}},
    {{TIMELINE_WALL_SQL("", ""), TIMELINE_WALL_SQL("", REACH)},
     {TIMELINE_WALL_SQL(", t.id", ""), TIMELINE_WALL_SQL(", t.id", REACH)}},
};
#undef REACH

int fp_store_timeline(struct fp_store *s, const struct fp_store_filter *f, fp_store_point_fn fn,
                      void *userdata)
{
        struct fp_store_filter none = {0};
        sqlite3_stmt *st = NULL;
        int n = 0, rc, r;

        if (!f)
                f = &none;
        r = fp_store_read_begin(s);
        if (r < 0)
                return r;
        bool wall = f->event && strcmp(f->event, FP_STORE_WALL_EVENT) == 0;
        r = fp_store_prepare(
            s, timeline_sqls[wall][f->by_series][f->since_ns > 0 && f->until_ns > 0], &st);
        if (r < 0)
                goto out;
        fp_store_bind_filter(st, f);
        if (f->event)
                sqlite3_bind_text(st, 10, f->event, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct fp_store_point pt = {
                    .start_ns = sqlite3_column_int64(st, 0),
                    .length_ns = sqlite3_column_int64(st, 1),
                    .event = fp_store_col_text(st, 2),
                    .count = (uint64_t)sqlite3_column_int64(st, 3),
                    .value = (uint64_t)sqlite3_column_int64(st, 4),
                };
                if (f->by_series) {
                        pt.host = fp_store_col_text(st, 5);
                        pt.pid = (pid_t)sqlite3_column_int64(st, 6);
                        pt.starttime = (uint64_t)sqlite3_column_int64(st, 7);
                }
                r = fn(userdata, &pt);
                if (r < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "read the time line");
out:
        sqlite3_finalize(st);
        fp_store_read_end(s);
        return r < 0 ? r : n;
}

int fp_store_list_targets(struct fp_store *s, const char *host, fp_store_target_fn fn,
                          void *userdata)
{
        sqlite3_stmt *st = NULL;
        int n = 0, rc,
            r = fp_store_prepare(s,
                                 "SELECT h.name, t.pid, t.starttime, t.comm, t.exe, t.config,"
                                 " t.active, t.first_ns, t.last_ns, t.service, t.guard"
                                 " FROM targets t JOIN hosts h ON h.id = t.host_id"
                                 " WHERE ?1 IS NULL OR h.name = ?1 ORDER BY t.first_ns, t.id",
                                 &st);

        if (r < 0)
                return r;
        if (host)
                sqlite3_bind_text(st, 1, host, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct fp_store_target_info t = {
                    .host = fp_store_col_text(st, 0),
                    .pid = (pid_t)sqlite3_column_int64(st, 1),
                    .starttime = (uint64_t)sqlite3_column_int64(st, 2),
                    .comm = fp_store_col_text(st, 3),
                    .exe = fp_store_col_text(st, 4),
                    .config = fp_store_col_text(st, 5),
                    .active = sqlite3_column_int(st, 6) != 0,
                    .first_ns = sqlite3_column_int64(st, 7),
                    .last_ns = sqlite3_column_int64(st, 8),
                    .service = fp_store_col_text(st, 9),
                    .guard = sqlite3_column_int64(st, 10),
                };
                r = fn(userdata, &t);
                if (r < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "list targets");
        sqlite3_finalize(st);
        return r < 0 ? r : n;
}

/* ---- statistics ---- */

static int64_t file_size(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

int fp_store_stats(struct fp_store *s, struct fp_store_stats *ret)
{
        static const char sql[] =
            "SELECT (SELECT count(*) FROM buckets),"
            " (SELECT count(*) FROM buckets b WHERE uploaded_ns IS NULL OR EXISTS (SELECT 1"
            "  FROM outbox o WHERE b.id BETWEEN o.bucket_min AND o.bucket_max)),"
            " (SELECT count(*) FROM targets), (SELECT count(*) FROM threads),"
            " (SELECT count(*) FROM events), (SELECT count(*) FROM stacks),"
            " (SELECT count(*) FROM frames), (SELECT count(*) FROM functions),"
            " (SELECT count(*) FROM mappings), (SELECT coalesce(min(start_ns), 0) FROM buckets),"
            " (SELECT coalesce(max(start_ns + length_ns), 0) FROM buckets),"
            " (SELECT count(*) FROM outbox), (SELECT coalesce(sum(length(body)), 0) FROM outbox),"
            " (SELECT min(t) FROM (SELECT min(from_ns) AS t FROM outbox UNION ALL"
            "  SELECT min(start_ns) FROM buckets WHERE uploaded_ns IS NULL)),"
            " (SELECT count(*) FROM rollups), (SELECT count(*) FROM rollup_dirty)";
        struct fp_store_stats st = {.max_bytes = s->budget};
        sqlite3_stmt *q = NULL;
        int64_t pages = 0, free_pages = 0;
        int rc, r = fp_store_read_begin(s);

        if (r < 0)
                return r;
        if ((r = fp_store_db_pragma_int(s, "PRAGMA page_count", &pages)) < 0 ||
            (r = fp_store_db_pragma_int(s, "PRAGMA freelist_count", &free_pages)) < 0 ||
            (r = fp_store_prepare(s, sql, &q)) < 0)
                goto out;
        rc = sqlite3_step(q);
        if (rc != SQLITE_ROW) {
                r = fp_store_db_fail(s, rc, "count rows");
                goto out;
        }
        st.buckets = (uint64_t)sqlite3_column_int64(q, 0);
        st.pending_buckets = (uint64_t)sqlite3_column_int64(q, 1);
        st.targets = (uint64_t)sqlite3_column_int64(q, 2);
        st.threads = (uint64_t)sqlite3_column_int64(q, 3);
        st.events = (uint64_t)sqlite3_column_int64(q, 4);
        st.stacks = (uint64_t)sqlite3_column_int64(q, 5);
        st.frames = (uint64_t)sqlite3_column_int64(q, 6);
        st.functions = (uint64_t)sqlite3_column_int64(q, 7);
        st.mappings = (uint64_t)sqlite3_column_int64(q, 8);
        st.first_ns = sqlite3_column_int64(q, 9);
        st.last_ns = sqlite3_column_int64(q, 10);
        st.summaries = (uint64_t)sqlite3_column_int64(q, 14);
        st.summaries_marked = (uint64_t)sqlite3_column_int64(q, 15);
        st.outbox_uploads = (uint64_t)sqlite3_column_int64(q, 11);
        st.outbox_bytes = (uint64_t)sqlite3_column_int64(q, 12);
        st.oldest_waiting_ns = sqlite3_column_int64(q, 13);
        st.live_bytes = (uint64_t)((pages - free_pages) * s->page_size);
        st.file_bytes = (uint64_t)file_size(s->path);
        st.wal_bytes = (uint64_t)file_size(s->wal_path);
        st.evicted_buckets = s->evicted_buckets;
        *ret = st;
out:
        sqlite3_finalize(q);
        fp_store_read_end(s);
        return r;
}

/* ---- what profiling costs ---- */

int fp_store_bucket_cost(struct fp_store *s, int64_t bucket_min, int64_t bucket_max,
                         struct fp_store_cost *ret)
{
        static const char sql[] =
            "SELECT coalesce(sum(agent_cpu_ns), 0), coalesce(max(agent_rss), 0),"
            " coalesce(max(host_cpus), 0), coalesce(min(start_ns), 0),"
            " coalesce(max(start_ns + length_ns), 0) FROM buckets WHERE id BETWEEN ?1 AND ?2";
        sqlite3_stmt *st = NULL;
        int rc, r = fp_store_prepare(s, sql, &st);

        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, bucket_min);
        sqlite3_bind_int64(st, 2, bucket_max);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                ret->agent_cpu_ns = (uint64_t)sqlite3_column_int64(st, 0);
                ret->agent_rss_bytes = (uint64_t)sqlite3_column_int64(st, 1);
                ret->host_cpus = (uint32_t)sqlite3_column_int64(st, 2);
                ret->from_ns = sqlite3_column_int64(st, 3);
                ret->to_ns = sqlite3_column_int64(st, 4);
        } else {
                r = fp_store_db_fail(s, rc, "sum the agent's cost");
        }
        sqlite3_finalize(st);
        return r;
}

static const char host_costs_sql[] =
    "SELECT hh.name, sum(c.agent_cpu_ns), max(c.agent_rss), max(c.host_cpus),"
    " sum(c.to_ns - c.from_ns) FROM host_costs c JOIN hosts hh ON hh.id = c.host_id"
    " WHERE c.host_id IN (SELECT t.host_id FROM bucket_series bs"
    " JOIN buckets b ON b.id = bs.bucket_id JOIN targets t ON t.id = bs.target_id"
    " JOIN hosts h ON h.id = t.host_id WHERE " FILTER_TARGETS " AND " FILTER_BUCKETS ")"
    " AND (?5 = 0 OR c.to_ns > ?5) AND (?6 = 0 OR c.from_ns < ?6)"
    " GROUP BY c.host_id ORDER BY hh.name";

int fp_store_host_costs(struct fp_store *s, const struct fp_store_filter *f,
                        fp_store_host_cost_fn fn, void *userdata)
{
        struct fp_store_filter none = {0};
        sqlite3_stmt *st = NULL;
        int n = 0, rc, r;

        if (!f)
                f = &none;
        r = fp_store_read_begin(s);
        if (r < 0)
                return r;
        r = fp_store_prepare(s, host_costs_sql, &st);
        if (r < 0)
                goto out;
        fp_store_bind_filter(st, f);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct fp_store_host_cost c = {
                    .host = fp_store_col_text(st, 0),
                    .agent_cpu_ns = (uint64_t)sqlite3_column_int64(st, 1),
                    .agent_rss_bytes = (uint64_t)sqlite3_column_int64(st, 2),
                    .host_cpus = (uint32_t)sqlite3_column_int64(st, 3),
                    .covered_ns = sqlite3_column_int64(st, 4),
                };
                r = fn(userdata, &c);
                if (r < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "sum the profiler's cost");
out:
        sqlite3_finalize(st);
        fp_store_read_end(s);
        return r < 0 ? r : n;
}
