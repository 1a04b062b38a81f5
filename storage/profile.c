/* SPDX-License-Identifier: MIT */
/*
 * A merged pprof profile from the store: the buckets, targets and events
 * a filter selects, their samples summed per (thread, stack), and the
 * stacks, frames, functions and mappings they reference turned into the
 * profile's locations (fp_store_query_pprof(), store.h). query.c holds the
 * store's other reads and the helpers both share.
 */
#include "store-internal.h"
#include "pprof.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- profiles ---- */

struct q_event {
        int64_t id;
        char *name, *types[4], *period_type, *period_unit;
        int64_t period;
};

/* A series in one bucket, or in one summary (span: an hour or a day, rollup.c). */
struct q_match {
        int64_t bucket, target, event;
        int64_t start_ns,
            length_ns;            /* the buckets' time (a summary's: from its first to its last) */
        int64_t span, span_start; /* a summary's; span 0: a bucket */
};

struct q_target {
        int64_t id;
        pid_t pid;
        char *comm, *host, *exe, *service, *container;
};

struct q_thread {
        uint32_t target; /* index into targets */
        pid_t tid;
        char *name;
        char *wait; /* off-CPU samples: why the thread waited ("" otherwise) */
};

struct query {
        struct fp_store *s;
        struct fp_pprof *p;
        const char *thread_name; /* the filter's: samples of these threads only */
        struct q_event *events;
        size_t n_events, cap_events;
        struct q_match *matches;
        size_t n_matches, cap_matches;
        struct q_target *targets;
        size_t n_targets, cap_targets;
        struct q_thread *threads;
        size_t n_threads, cap_threads;
        struct fp_store_map target_idx; /* target rowid -> index + 1 */
        struct fp_store_map thread_idx; /* thread rowid -> index + 1 */
        struct fp_store_map *agg;       /* per thread index: stack -> count, value */
        uint32_t last_thread;           /* the thread of the last sample decoded, */
        size_t last_ti;                 /* its index + 1 (0: filtered out) */
        struct fp_store_map stack_locs; /* stack rowid -> offset into locs + 1, n */
        struct fp_store_map frame_locs; /* frame rowid -> pprof location id */
        struct fp_store_map mapping_ids, function_ids;
        uint64_t *locs;
        size_t n_locs, cap_locs;
        sqlite3_stmt *st_stack, *st_frame, *st_mapping, *st_function;
};

static void query_free(struct query *q)
{
        for (size_t i = 0; i < q->n_events; i++) {
                free(q->events[i].name);
                for (int j = 0; j < 4; j++)
                        free(q->events[i].types[j]);
                free(q->events[i].period_type);
                free(q->events[i].period_unit);
        }
        free(q->events);
        free(q->matches);
        for (size_t i = 0; i < q->n_targets; i++) {
                free(q->targets[i].comm);
                free(q->targets[i].exe);
                free(q->targets[i].service);
                free(q->targets[i].container);
                free(q->targets[i].host);
        }
        free(q->targets);
        for (size_t i = 0; i < q->n_threads; i++) {
                free(q->threads[i].name);
                free(q->threads[i].wait);
        }
        free(q->threads);
        fp_store_map_free(&q->target_idx);
        fp_store_map_free(&q->thread_idx);
        for (size_t i = 0; q->agg && i < q->n_threads; i++)
                fp_store_map_free(&q->agg[i]);
        free(q->agg);
        fp_store_map_free(&q->stack_locs);
        fp_store_map_free(&q->frame_locs);
        fp_store_map_free(&q->mapping_ids);
        fp_store_map_free(&q->function_ids);
        free(q->locs);
        sqlite3_finalize(q->st_stack);
        sqlite3_finalize(q->st_frame);
        sqlite3_finalize(q->st_mapping);
        sqlite3_finalize(q->st_function);
}

static int oom(struct query *q)
{
        return fp_store_db_failf(q->s, -ENOMEM, "Failed to query store '%s': out of memory",
                                 q->s->path);
}

static char *dup_col(sqlite3_stmt *st, int i)
{
        return strdup(fp_store_col_text(st, i));
}

static int load_events(struct query *q)
{
        sqlite3_stmt *st = NULL;
        int rc,
            r = fp_store_prepare(q->s,
                                 "SELECT id, name, count_type, count_unit, value_type, value_unit,"
                                 " period_type, period_unit, period FROM events ORDER BY id",
                                 &st);

        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct q_event *e;
                bool ok;

                if (fp_grow((void **)&q->events, &q->cap_events, q->n_events + 1,
                            sizeof(*q->events)) < 0) {
                        r = oom(q);
                        break;
                }
                e = &q->events[q->n_events++];
                *e = (struct q_event){.id = sqlite3_column_int64(st, 0),
                                      .period = sqlite3_column_int64(st, 8)};
                e->name = dup_col(st, 1);
                ok = e->name;
                for (int j = 0; j < 4; j++)
                        ok = (e->types[j] = dup_col(st, 2 + j)) && ok;
                ok = (e->period_type = dup_col(st, 6)) && ok;
                ok = (e->period_unit = dup_col(st, 7)) && ok;
                if (!ok) {
                        r = oom(q);
                        break;
                }
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(q->s, rc, "read events");
        sqlite3_finalize(st);
        return r;
}

static const struct q_event *event_by_id(const struct query *q, int64_t id)
{
        for (size_t i = 0; i < q->n_events; i++)
                if (q->events[i].id == id)
                        return &q->events[i];
        return NULL;
}

static bool same_types(const struct q_event *a, const struct q_event *b)
{
        for (int j = 0; j < 4; j++)
                if (strcmp(a->types[j], b->types[j]) != 0)
                        return false;
        return true;
}

bool fp_store_event_is_cpu_time(const char *name, const char *value_unit)
{
        return (strcmp(name, "cpu-clock") == 0 || strcmp(name, "task-clock") == 0) &&
               strcmp(value_unit, "nanoseconds") == 0;
}

/* The wall profile's event (FP_STORE_WALL_EVENT): stored nowhere. */
static const struct q_event wall_event = {
    .id = -1,
    .name = (char *)FP_STORE_WALL_EVENT,
    .types = {(char *)"samples", (char *)"count", (char *)"wall", (char *)"nanoseconds"},
    .period_type = (char *)"",
    .period_unit = (char *)""};

/*
 * The wall profile's matches: of the targets with an off-CPU series, that
 * and their CPU-time series; and wall time a client stored as such
 * (Pyroscope's wall profiles). Returns how many are kept (at the front).
 */
static size_t wall_matches(struct query *q)
{
        struct fp_store_map off = {0}; /* target rowid -> 1: it has off-CPU samples */
        size_t kept = 0;

        for (size_t i = 0; i < q->n_matches; i++) {
                const struct q_event *e = event_by_id(q, q->matches[i].event);
                if (e && strcmp(e->name, FP_STORE_OFFCPU_EVENT) == 0 &&
                    !fp_store_map_get(&off, (uint64_t)q->matches[i].target) &&
                    fp_store_map_put(&off, (uint64_t)q->matches[i].target, 1, 0) < 0) {
                        fp_store_map_free(&off);
                        return SIZE_MAX;
                }
        }
        for (size_t i = 0; i < q->n_matches; i++) {
                const struct q_event *e = event_by_id(q, q->matches[i].event);
                if (!e)
                        continue;
                if ((strcmp(e->name, FP_STORE_WALL_EVENT) == 0 &&
                     strcmp(e->types[3], "nanoseconds") == 0) ||
                    (fp_store_map_get(&off, (uint64_t)q->matches[i].target) &&
                     (strcmp(e->name, FP_STORE_OFFCPU_EVENT) == 0 ||
                      fp_store_event_is_cpu_time(e->name, e->types[3]))))
                        q->matches[kept++] = q->matches[i];
        }
        fp_store_map_free(&off);
        return kept;
}

/*
 * Finds the matching (bucket, target, event) rows and keeps those of one
 * event name: f->event, else the event stored first (or those of the wall
 * profile). *ret_ref gets the event whose sample types the profile takes
 * (NULL: nothing matched).
 */
/*
 * Adds the rows of st (bucket or span start, target, event, start_ns,
 * length_ns) as matches of span (0: buckets), but those keep() refuses.
 */
static int add_matches(struct query *q, sqlite3_stmt *st, int64_t span,
                       bool (*keep)(struct query *q, const struct q_match *m, void *ud), void *ud)
{
        int rc, r = 0;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct q_match m = {.bucket = sqlite3_column_int64(st, 0),
                                    .target = sqlite3_column_int64(st, 1),
                                    .event = sqlite3_column_int64(st, 2),
                                    .start_ns = sqlite3_column_int64(st, 3),
                                    .length_ns = sqlite3_column_int64(st, 4)};
                if (span) {
                        m.span = span;
                        m.span_start = m.bucket;
                        m.bucket = 0;
                }
                if (keep && !keep(q, &m, ud))
                        continue;
                if (fp_grow((void **)&q->matches, &q->cap_matches, q->n_matches + 1,
                            sizeof(*q->matches)) < 0) {
                        r = oom(q);
                        break;
                }
                q->matches[q->n_matches++] = m;
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(q->s, rc, "find matching buckets");
        return r;
}

/* The buckets f selects, as matches (keep: as add_matches()). */
static int raw_matches(struct query *q, const struct fp_store_filter *f,
                       bool (*keep)(struct query *q, const struct q_match *m, void *ud), void *ud)
{
#define RAW_SQL(REACH)                                                                             \
        "SELECT bs.bucket_id, bs.target_id, bs.event_id, b.start_ns, b.length_ns"                  \
        " FROM bucket_series bs JOIN buckets b ON b.id = bs.bucket_id"                             \
        " JOIN targets t ON t.id = bs.target_id JOIN hosts h ON h.id = t.host_id"                  \
        " WHERE " FILTER_TARGETS " AND " FILTER_BUCKETS " AND " FILTER_START REACH                 \
        " ORDER BY bs.bucket_id, bs.event_id"
        static const char sql[] = RAW_SQL(""), range_sql[] = RAW_SQL(" AND " FILTER_REACH);
        sqlite3_stmt *st = NULL;
        int r = fp_store_prepare(q->s, f->since_ns > 0 && f->until_ns > 0 ? range_sql : sql, &st);

        if (r < 0)
                return r;
        fp_store_bind_filter(st, f);
        r = add_matches(q, st, 0, keep, ud);
        sqlite3_finalize(st);
        return r;
}

/* A series' day or hour: (target, event, span start), for the sets below. */
struct series_span {
        int64_t target, event, start;
};

struct span_set {
        struct series_span *v;
        size_t n, cap;
};

static int cmp_span(const void *a, const void *b)
{
        const struct series_span *x = a, *y = b;
        if (x->target != y->target)
                return x->target < y->target ? -1 : 1;
        if (x->event != y->event)
                return x->event < y->event ? -1 : 1;
        return x->start < y->start ? -1 : x->start > y->start;
}

static bool span_in(const struct span_set *set, int64_t target, int64_t event, int64_t start)
{
        struct series_span k = {target, event, start};
        return set->n && bsearch(&k, set->v, set->n, sizeof(k), cmp_span);
}

/* An hour's summary whose day's summary is read instead is left out. */
static bool hour_not_in_day(struct query *q, const struct q_match *m, void *ud)
{
        (void)q;
        return !span_in(ud, m->target, m->event, m->span_start - m->span_start % FP_STORE_DAY_NS);
}

/* A bucket of a marked hour: only the series marked (the others' are in their summaries). */
static bool marked_series(struct query *q, const struct q_match *m, void *ud)
{
        (void)q;
        return span_in(ud, m->target, m->event, m->start_ns - m->start_ns % FP_STORE_HOUR_NS);
}

/* The summaries of span starting in [from, to) of the targets f selects, as matches. */
static int summary_matches(struct query *q, const struct fp_store_filter *f, int64_t span,
                           int64_t from, int64_t to, struct span_set *covered,
                           bool (*keep)(struct query *q, const struct q_match *m, void *ud),
                           void *ud)
{
        static const char sql[] =
            "SELECT r.start_ns, r.target_id, r.event_id, r.first_ns, r.last_ns - r.first_ns"
            " FROM rollups r JOIN targets t ON t.id = r.target_id JOIN hosts h ON h.id = t.host_id"
            " WHERE r.span_ns = ?20 AND r.start_ns >= ?21 AND r.start_ns < ?22 AND " FILTER_TARGETS;
        sqlite3_stmt *st = NULL;
        size_t before = q->n_matches;
        int r = fp_store_prepare(q->s, sql, &st);

        if (r < 0)
                return r;
        fp_store_bind_filter(st, f);
        sqlite3_bind_int64(st, 20, span);
        sqlite3_bind_int64(st, 21, from);
        sqlite3_bind_int64(st, 22, to);
        r = add_matches(q, st, span, keep, ud);
        sqlite3_finalize(st);
        for (size_t i = before; r == 0 && covered && i < q->n_matches; i++) {
                if (fp_grow((void **)&covered->v, &covered->cap, covered->n + 1,
                            sizeof(*covered->v)) < 0)
                        return oom(q);
                covered->v[covered->n++] = (struct series_span){
                    q->matches[i].target, q->matches[i].event, q->matches[i].span_start};
        }
        if (covered && covered->n)
                qsort(covered->v, covered->n, sizeof(*covered->v), cmp_span);
        return r;
}

/*
 * The matches of a range of whole hours read from summaries (rollup.c):
 * the buckets that start in [since, H0) and [H1, until) as they are; in
 * [H0, H1), each series' day summary where it has one, else its hours'
 * summaries, and the buckets of its marked hours (not summarised yet).
 * The same buckets as raw_matches() over the whole range, merged once.
 */
static int summarised_matches(struct query *q, const struct fp_store_filter *f,
                              const struct fp_store_span *sp)
{
        int64_t h0 = sp->h0, h1 = sp->h1, d0 = sp->d0, d1 = sp->d1;
        struct span_set days = {0}, marked = {0};
        struct fp_store_filter edge = *f;
        sqlite3_stmt *st = NULL;
        int rc, r;

        /* The ragged ends. */
        edge.until_ns = h0;
        r = raw_matches(q, &edge, NULL, NULL);
        edge = *f;
        edge.start_from_ns = h1;
        if (r == 0)
                r = raw_matches(q, &edge, NULL, NULL);
        /* Whole days, then the hours their days do not cover. */
        if (r == 0 && d1 > d0)
                r = summary_matches(q, f, FP_STORE_DAY_NS, d0, d1, &days, NULL, NULL);
        if (r == 0)
                r = summary_matches(q, f, FP_STORE_HOUR_NS, h0, h1, NULL, hour_not_in_day, &days);
        /* Marked hours: their marked series' buckets. */
        if (r == 0)
                r = fp_store_prepare(q->s,
                                     "SELECT start_ns, target_id, event_id FROM rollup_dirty"
                                     " WHERE span_ns = ?1 AND start_ns >= ?2 AND start_ns < ?3"
                                     " ORDER BY start_ns",
                                     &st);
        if (r == 0) {
                sqlite3_bind_int64(st, 1, FP_STORE_HOUR_NS);
                sqlite3_bind_int64(st, 2, h0);
                sqlite3_bind_int64(st, 3, h1);
                while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                        if (fp_grow((void **)&marked.v, &marked.cap, marked.n + 1,
                                    sizeof(*marked.v)) < 0) {
                                r = oom(q);
                                break;
                        }
                        marked.v[marked.n++] = (struct series_span){sqlite3_column_int64(st, 1),
                                                                    sqlite3_column_int64(st, 2),
                                                                    sqlite3_column_int64(st, 0)};
                }
                if (r == 0 && rc != SQLITE_DONE)
                        r = fp_store_db_fail(q->s, rc, "find marked hours");
        }
        sqlite3_finalize(st);
        if (r == 0 && marked.n) {
                struct series_span *hours = malloc(marked.n * sizeof(*hours));
                size_t n_hours = 0;
                if (!hours)
                        r = oom(q);
                /* Each marked hour's buckets once (the marks came sorted by hour). */
                for (size_t i = 0; r == 0 && i < marked.n; i++)
                        if (!n_hours || hours[n_hours - 1].start != marked.v[i].start)
                                hours[n_hours++] = marked.v[i];
                qsort(marked.v, marked.n, sizeof(*marked.v), cmp_span);
                for (size_t i = 0; r == 0 && i < n_hours; i++) {
                        edge = *f;
                        edge.since_ns = hours[i].start;
                        edge.start_from_ns = hours[i].start;
                        edge.until_ns = hours[i].start + FP_STORE_HOUR_NS;
                        r = raw_matches(q, &edge, marked_series, &marked);
                }
                free(hours);
        }
        free(days.v);
        free(marked.v);
        return r;
}

/*
 * Finds the matching (bucket, target, event) rows and keeps those of one
 * event name: f->event, else the event stored first (or those of the wall
 * profile). *ret_ref gets the event whose sample types the profile takes
 * (NULL: nothing matched). A range of whole hours on a collector's store
 * reads summaries where it can.
 */
static int find_matches(struct query *q, const struct fp_store_filter *f,
                        const struct q_event **ret_ref)
{
        const struct q_event *ref = NULL;
        size_t kept = 0;
        struct fp_store_span sp;
        int r;

        *ret_ref = NULL;
        if (fp_store_rollup_range(q->s, f, &sp))
                r = summarised_matches(q, f, &sp);
        else
                r = raw_matches(q, f, NULL, NULL);
        if (r < 0)
                return r;

        if (f->event && strcmp(f->event, FP_STORE_WALL_EVENT) == 0) {
                kept = wall_matches(q);
                if (kept == SIZE_MAX)
                        return oom(q);
                q->n_matches = kept;
                *ret_ref = kept ? &wall_event : NULL;
                return 0;
        }
        /* The reference event: the lowest id with the wanted name among the matches. */
        for (size_t i = 0; i < q->n_matches; i++) {
                const struct q_event *e = event_by_id(q, q->matches[i].event);
                if (!e || (f->event && strcmp(e->name, f->event) != 0))
                        continue;
                if (!ref || e->id < ref->id)
                        ref = e;
        }
        for (size_t i = 0; ref && i < q->n_matches; i++) {
                const struct q_event *e = event_by_id(q, q->matches[i].event);
                if (e && strcmp(e->name, ref->name) == 0 && same_types(e, ref))
                        q->matches[kept++] = q->matches[i];
        }
        q->n_matches = kept;
        *ret_ref = ref;
        return 0;
}

static int load_targets(struct query *q)
{
        sqlite3_stmt *st = NULL, *th = NULL;
        int r = fp_store_prepare(
            q->s,
            "SELECT t.pid, t.comm, h.name, t.exe, t.service, t.container FROM targets t"
            " JOIN hosts h ON h.id = t.host_id WHERE t.id = ?1",
            &st);

        if (r == 0)
                r = fp_store_prepare(
                    q->s, "SELECT id, tid, name, wait FROM threads WHERE target_id = ?1", &th);
        for (size_t i = 0; r == 0 && i < q->n_matches; i++) {
                int64_t id = q->matches[i].target;
                struct q_target *t;
                int rc;

                if (fp_store_map_get(&q->target_idx, (uint64_t)id))
                        continue;
                if (fp_grow((void **)&q->targets, &q->cap_targets, q->n_targets + 1,
                            sizeof(*q->targets)) < 0 ||
                    fp_store_map_put(&q->target_idx, (uint64_t)id, q->n_targets + 1, 0) < 0) {
                        r = oom(q);
                        break;
                }
                t = &q->targets[q->n_targets++];
                *t = (struct q_target){.id = id};
                sqlite3_bind_int64(st, 1, id);
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        t->pid = (pid_t)sqlite3_column_int64(st, 0);
                        t->comm = dup_col(st, 1);
                        t->host = dup_col(st, 2);
                        t->exe = dup_col(st, 3);
                        t->service = dup_col(st, 4);
                        t->container = dup_col(st, 5);
                        if (!t->comm || !t->host || !t->exe || !t->service || !t->container)
                                r = oom(q);
                        rc = SQLITE_DONE;
                }
                sqlite3_reset(st);
                if (r == 0 && rc != SQLITE_DONE)
                        r = fp_store_db_fail(q->s, rc, "read a target");
                if (r == 0 && !t->host)
                        r = fp_store_db_failf(q->s, -EBADMSG,
                                              "Store '%s' is inconsistent: target %lld missing",
                                              q->s->path, (long long)id);

                sqlite3_bind_int64(th, 1, id);
                while (r == 0 && (rc = sqlite3_step(th)) == SQLITE_ROW) {
                        int64_t tid_row = sqlite3_column_int64(th, 0);
                        struct q_thread *x;
                        if (fp_grow((void **)&q->threads, &q->cap_threads, q->n_threads + 1,
                                    sizeof(*q->threads)) < 0 ||
                            fp_store_map_put(&q->thread_idx, (uint64_t)tid_row, q->n_threads + 1,
                                             0) < 0) {
                                r = oom(q);
                                break;
                        }
                        x = &q->threads[q->n_threads++];
                        *x = (struct q_thread){(uint32_t)(q->n_targets - 1),
                                               (pid_t)sqlite3_column_int64(th, 1), dup_col(th, 2),
                                               dup_col(th, 3)};
                        if (!x->name || !x->wait)
                                r = oom(q);
                }
                if (r == 0 && rc != SQLITE_DONE)
                        r = fp_store_db_fail(q->s, rc, "read threads");
                sqlite3_reset(th);
        }
        sqlite3_finalize(st);
        sqlite3_finalize(th);
        return r;
}

/*
 * Adds one decoded sample to the query's sums, unless its thread is
 * filtered out. Sums are kept per thread: a series' samples come thread by
 * thread, and a thread's map is small enough to stay in the cache, where
 * one map of every (thread, stack) of a large merge would miss it on
 * every sample.
 */
static int add_one(void *userdata, const struct fp_store_sample *e)
{
        struct query *q = userdata;
        struct fp_store_map_entry *m;

        if (!e->thread || !e->stack)
                return -EBADMSG;
        if (e->thread != q->last_thread) {
                m = fp_store_map_get(&q->thread_idx, e->thread);
                q->last_thread = e->thread;
                q->last_ti = m ? m->a : 0;
        }
        if (!q->last_ti)
                return 0; /* a thread the filter left out */
        struct fp_store_map *agg = &q->agg[q->last_ti - 1];
        m = fp_store_map_get(agg, e->stack);
        if (m) {
                m->a += e->count;
                m->b += e->value;
        } else if (fp_store_map_put(agg, e->stack, e->count, e->value) < 0) {
                return -ENOMEM;
        }
        return 0;
}

/* Sums the samples of the matching (bucket, target, event) series per (thread, stack). */
static int aggregate(struct query *q)
{
        sqlite3_stmt *raw = NULL, *sum = NULL, *st;
        int r = fp_store_prepare(q->s,
                                 "SELECT data FROM series_samples"
                                 " WHERE bucket_id = ?1 AND target_id = ?2 AND event_id = ?3",
                                 &raw);

        if (r == 0 && q->s->rollups)
                r = fp_store_prepare(q->s,
                                     "SELECT data FROM rollups WHERE span_ns = ?4 AND start_ns = ?1"
                                     " AND target_id = ?2 AND event_id = ?3",
                                     &sum);
        q->agg = calloc(q->n_threads ? q->n_threads : 1, sizeof(*q->agg));
        if (r == 0 && !q->agg)
                r = oom(q);
        q->last_thread = 0;
        q->last_ti = 0;

        for (size_t i = 0; r == 0 && i < q->n_matches; i++) {
                const struct q_match *m = &q->matches[i];
                int rc;

                st = m->span ? sum : raw;
                if (!st) {
                        r = fp_store_db_failf(q->s, -EINVAL, "a summary read without summaries");
                        break;
                }
                sqlite3_bind_int64(st, 1, m->span ? m->span_start : m->bucket);
                sqlite3_bind_int64(st, 2, m->target);
                sqlite3_bind_int64(st, 3, m->event);
                if (m->span)
                        sqlite3_bind_int64(st, 4, m->span);
                while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                        r = fp_store_samples_decode(sqlite3_column_blob(st, 0),
                                                    (size_t)sqlite3_column_bytes(st, 0), add_one,
                                                    q);
                        if (r == -ENOMEM)
                                r = oom(q);
                        else if (r < 0)
                                r = fp_store_db_failf(
                                    q->s, -EBADMSG,
                                    "Store '%s' is damaged: the samples of bucket %lld cannot be "
                                    "decoded",
                                    q->s->path, (long long)m->bucket);
                }
                if (r == 0 && rc != SQLITE_DONE)
                        r = fp_store_db_fail(q->s, rc, "read samples");
                sqlite3_reset(st);
        }
        sqlite3_finalize(raw);
        sqlite3_finalize(sum);
        return r;
}

static int inconsistent(struct query *q, const char *what, int64_t id)
{
        return fp_store_db_failf(q->s, -EBADMSG, "Store '%s' is inconsistent: %s %lld is missing",
                                 q->s->path, what, (long long)id);
}

/* The pprof mapping of stored mapping id, and its memory_start (frames are relative to it). */
static int mapping_id(struct query *q, int64_t id, uint64_t *ret, uint64_t *ret_start)
{
        struct fp_store_map_entry *e = fp_store_map_get(&q->mapping_ids, (uint64_t)id);
        int rc, r = 0;

        if (e) {
                *ret = e->a;
                *ret_start = e->b;
                return 0;
        }
        sqlite3_bind_int64(q->st_mapping, 1, id);
        rc = sqlite3_step(q->st_mapping);
        if (rc == SQLITE_ROW) {
                *ret_start = (uint64_t)sqlite3_column_int64(q->st_mapping, 2);
                r = fp_pprof_mapping(
                    q->p, *ret_start, (uint64_t)sqlite3_column_int64(q->st_mapping, 3),
                    (uint64_t)sqlite3_column_int64(q->st_mapping, 4),
                    fp_store_col_text(q->st_mapping, 0), fp_store_col_text(q->st_mapping, 1), ret);
                uint64_t vaddr1 = (uint64_t)sqlite3_column_int64(q->st_mapping, 5);
                if (r == 0 && vaddr1)
                        r = fp_pprof_mapping_set_vaddr(q->p, *ret, vaddr1 - 1);
                if (r == 0 && fp_store_map_put(&q->mapping_ids, (uint64_t)id, *ret, *ret_start) < 0)
                        r = -ENOMEM;
                if (r < 0)
                        r = fp_store_db_failf(q->s, r, "Failed to build a profile: %s",
                                              strerror(-r));
        } else {
                r = rc == SQLITE_DONE ? inconsistent(q, "mapping", id)
                                      : fp_store_db_fail(q->s, rc, "read a mapping");
        }
        sqlite3_reset(q->st_mapping);
        return r;
}

static int function_id(struct query *q, int64_t id, uint64_t *ret)
{
        struct fp_store_map_entry *e = fp_store_map_get(&q->function_ids, (uint64_t)id);
        int rc, r = 0;

        if (e) {
                *ret = e->a;
                return 0;
        }
        sqlite3_bind_int64(q->st_function, 1, id);
        rc = sqlite3_step(q->st_function);
        if (rc == SQLITE_ROW) {
                r = fp_pprof_function_full(q->p, fp_store_col_text(q->st_function, 0),
                                           fp_store_col_text(q->st_function, 1),
                                           fp_store_col_text(q->st_function, 2), 0, ret);
                if (r == 0 && fp_store_map_put(&q->function_ids, (uint64_t)id, *ret, 0) < 0)
                        r = -ENOMEM;
                if (r < 0)
                        r = fp_store_db_failf(q->s, r, "Failed to build a profile: %s",
                                              strerror(-r));
        } else {
                r = rc == SQLITE_DONE ? inconsistent(q, "function", id)
                                      : fp_store_db_fail(q->s, rc, "read a function");
        }
        sqlite3_reset(q->st_function);
        return r;
}

static int frame_location(struct query *q, int64_t id, uint64_t *ret)
{
        struct fp_store_map_entry *e = fp_store_map_get(&q->frame_locs, (uint64_t)id);
        int64_t mapping, function, line;
        uint64_t address, mid = 0, fid = 0, start = 0;
        int rc, r;

        if (e) {
                *ret = e->a;
                return 0;
        }
        sqlite3_bind_int64(q->st_frame, 1, id);
        rc = sqlite3_step(q->st_frame);
        mapping = sqlite3_column_int64(q->st_frame, 0);
        function = sqlite3_column_int64(q->st_frame, 1);
        address = (uint64_t)sqlite3_column_int64(q->st_frame, 2);
        line = sqlite3_column_int64(q->st_frame, 3);
        sqlite3_reset(q->st_frame);
        if (rc != SQLITE_ROW)
                return rc == SQLITE_DONE ? inconsistent(q, "frame", id)
                                         : fp_store_db_fail(q->s, rc, "read a frame");
        if (mapping && (r = mapping_id(q, mapping, &mid, &start)) < 0)
                return r;
        address += start; /* stored relative to its mapping */
        if (function && (r = function_id(q, function, &fid)) < 0)
                return r;
        r = fp_pprof_location_at(q->p, mid, address, fid, line, ret);
        if (r == 0 && fp_store_map_put(&q->frame_locs, (uint64_t)id, *ret, 0) < 0)
                r = -ENOMEM;
        if (r < 0)
                return fp_store_db_failf(q->s, r, "Failed to build a profile: %s", strerror(-r));
        return 0;
}

/* The pprof location ids of a stack: *ret_off into q->locs, *ret_n of them. */
static int stack_locations(struct query *q, int64_t id, size_t *ret_off, size_t *ret_n)
{
        struct fp_store_map_entry *e = fp_store_map_get(&q->stack_locs, (uint64_t)id);
        const uint8_t *p;
        size_t len, off = q->n_locs;
        int rc, r = 0;

        if (e) {
                *ret_off = e->a - 1;
                *ret_n = e->b;
                return 0;
        }
        sqlite3_bind_int64(q->st_stack, 1, id);
        rc = sqlite3_step(q->st_stack);
        if (rc != SQLITE_ROW) {
                sqlite3_reset(q->st_stack);
                return rc == SQLITE_DONE ? inconsistent(q, "stack", id)
                                         : fp_store_db_fail(q->s, rc, "read a stack");
        }
        p = sqlite3_column_blob(q->st_stack, 0);
        len = (size_t)sqlite3_column_bytes(q->st_stack, 0);
        /* Decode the frame ids first: building locations runs other statements. */
        if (fp_grow((void **)&q->locs, &q->cap_locs, off + len, sizeof(*q->locs)) < 0) {
                sqlite3_reset(q->st_stack);
                return oom(q);
        }
        for (size_t i = 0; i < len;) {
                uint64_t v = 0;
                unsigned shift = 0;
                while (i < len && shift < 64) {
                        v |= (uint64_t)(p[i] & 0x7f) << shift;
                        shift += 7;
                        if (!(p[i++] & 0x80))
                                break;
                }
                q->locs[q->n_locs++] = v;
        }
        sqlite3_reset(q->st_stack);
        for (size_t i = off; i < q->n_locs && r == 0; i++)
                r = frame_location(q, (int64_t)q->locs[i], &q->locs[i]);
        if (r == 0 && fp_store_map_put(&q->stack_locs, (uint64_t)id, off + 1, q->n_locs - off) < 0)
                r = oom(q);
        if (r < 0) {
                q->n_locs = off;
                return r;
        }
        *ret_off = off;
        *ret_n = q->n_locs - off;
        return 0;
}

static bool thread_wanted(const struct query *q, size_t i)
{
        return !q->thread_name || strcmp(q->threads[i].name, q->thread_name) == 0;
}

static int add_samples(struct query *q)
{
        bool with_host = false;
        int r;

        for (size_t i = 1; i < q->n_targets; i++)
                if (strcmp(q->targets[i].host, q->targets[0].host) != 0)
                        with_host = true;
        if ((r = fp_store_prepare(q->s, "SELECT frames FROM stacks WHERE id = ?1", &q->st_stack)) <
                0 ||
            (r = fp_store_prepare(
                 q->s, "SELECT mapping_id, function_id, offset, line FROM frames WHERE id = ?1",
                 &q->st_frame)) < 0 ||
            (r = fp_store_prepare(q->s,
                                  "SELECT file, build_id, memory_start, memory_limit, file_offset,"
                                  " vaddr1 FROM mappings WHERE id = ?1",
                                  &q->st_mapping)) < 0 ||
            (r = fp_store_prepare(q->s,
                                  "SELECT name, system_name, filename FROM functions WHERE id = ?1",
                                  &q->st_function)) < 0)
                return r;
        for (size_t i = 0; q->agg && i < q->n_threads; i++) {
                if (!thread_wanted(q, i))
                        continue;
                for (size_t k = 0; k < q->agg[i].cap; k++) {
                        const struct fp_store_map_entry *e = &q->agg[i].e[k];
                        const struct q_thread *th = &q->threads[i];
                        const struct q_target *t;
                        struct fp_pprof_label labels[FP_STORE_SAMPLE_LABELS];
                        int64_t values[2];
                        size_t off = 0, n = 0, n_labels = 0;

                        if (!e->key)
                                continue;
                        t = &q->targets[th->target];
                        r = stack_locations(q, (int64_t)e->key, &off, &n);
                        if (r < 0)
                                return r;
                        values[0] = e->a > INT64_MAX ? INT64_MAX : (int64_t)e->a;
                        values[1] = e->b > INT64_MAX ? INT64_MAX : (int64_t)e->b;
                        n_labels = fp_store_sample_labels(
                            labels, th->tid, th->name, th->wait, t->pid, t->comm,
                            with_host ? t->host : NULL, t->service, t->container, t->exe);
                        r = fp_pprof_add_sample(q->p, n ? q->locs + off : NULL, n, values, labels,
                                                n_labels);
                        if (r < 0)
                                return fp_store_db_failf(q->s, r, "Failed to build a profile: %s",
                                                         strerror(-r));
                }
        }
        return 0;
}

/* Distinct (thread, stack) pairs summed, capped at INT32_MAX. */
static int agg_count(const struct query *q)
{
        size_t n = 0;
        for (size_t i = 0; q->agg && i < q->n_threads; i++)
                if (thread_wanted(q, i))
                        n += q->agg[i].n;
        return n > INT32_MAX ? INT32_MAX : (int)n;
}

static int set_types(struct query *q, const struct q_event *ref)
{
        bool differ = false;
        int r = fp_store_profile_types(q->p, (const char *const *)ref->types, ref->period_type,
                                       ref->period_unit, ref->period, &differ);

        if (differ)
                return fp_store_db_failf(q->s, -EINVAL,
                                         "Failed to query store '%s': the profile's sample types "
                                         "differ from event '%s''s",
                                         q->s->path, ref->name);
        if (r < 0)
                return fp_store_db_failf(q->s, r, "Failed to build a profile: %s", strerror(-r));
        return 0;
}

static int add_drop_comments(struct query *q, const struct fp_store_filter *f)
{
        struct fp_store_reasons rs = {0};
        int r = fp_store_drop_rows(q->s, f, fp_store_reasons_add, &rs);

        if (r < 0) {
                fp_store_reasons_comment(&rs, NULL); /* frees */
                return r == -ENOMEM ? oom(q) : r;
        }
        r = fp_store_reasons_comment(&rs, q->p);
        if (r < 0)
                return fp_store_db_failf(q->s, r, "Failed to build a profile: %s", strerror(-r));
        return 0;
}

static void set_time(struct query *q)
{
        int64_t start = INT64_MAX, end = INT64_MIN;

        for (size_t i = 0; i < q->n_matches; i++) {
                const struct q_match *m = &q->matches[i];
                if (m->start_ns < start)
                        start = m->start_ns;
                if (m->start_ns + m->length_ns > end)
                        end = m->start_ns + m->length_ns;
        }
        if (q->n_matches)
                fp_store_profile_widen_time(q->p, start, end);
}

/* ---- the parts any store's merged profile shares (store-internal.h) ---- */

size_t fp_store_sample_labels(struct fp_pprof_label *out, pid_t tid, const char *thread_name,
                              const char *wait, pid_t pid, const char *comm, const char *host,
                              const char *service, const char *container, const char *exe)
{
        size_t n = 0;

        out[n++] = (struct fp_pprof_label){.key = "thread", .num = tid};
        out[n++] = (struct fp_pprof_label){.key = "thread_name",
                                           .str = thread_name[0] ? thread_name : "?"};
        if (wait[0])
                out[n++] = (struct fp_pprof_label){.key = "wait", .str = wait};
        out[n++] = (struct fp_pprof_label){.key = "pid", .num = pid};
        out[n++] = (struct fp_pprof_label){.key = "process", .str = comm[0] ? comm : "?"};
        if (host)
                out[n++] = (struct fp_pprof_label){.key = "host", .str = host};
        if (service[0])
                out[n++] = (struct fp_pprof_label){.key = "service", .str = service};
        if (container[0])
                out[n++] = (struct fp_pprof_label){.key = "container", .str = container};
        if (pid == 0 && exe[0])
                out[n++] = (struct fp_pprof_label){.key = "exe", .str = exe};
        return n;
}

int fp_store_profile_types(struct fp_pprof *p, const char *const types[4], const char *period_type,
                           const char *period_unit, int64_t period, bool *ret_differ)
{
        const char *unit;
        int r;

        *ret_differ = false;
        if (fp_pprof_n_sample_types(p) == 0) {
                if ((r = fp_pprof_add_sample_type(p, types[0], types[1])) < 0 ||
                    (r = fp_pprof_add_sample_type(p, types[2], types[3])) < 0)
                        return r;
                return period_type[0] ? fp_pprof_set_period(p, period_type, period_unit, period)
                                      : 0;
        }
        for (size_t i = 0; i < 2; i++) {
                const char *type = fp_pprof_sample_type(p, i, &unit);
                if (fp_pprof_n_sample_types(p) != 2 || !type || strcmp(type, types[2 * i]) != 0 ||
                    strcmp(unit, types[2 * i + 1]) != 0) {
                        *ret_differ = true;
                        return -EINVAL;
                }
        }
        return 0;
}

void fp_store_profile_widen_time(struct fp_pprof *p, int64_t start_ns, int64_t end_ns)
{
        int64_t t0, d0;

        fp_pprof_get_time(p, &t0, &d0);
        if (t0 || d0) {
                if (t0 < start_ns)
                        start_ns = t0;
                if (t0 + d0 > end_ns)
                        end_ns = t0 + d0;
        }
        fp_pprof_set_time(p, start_ns, end_ns - start_ns);
}

struct fp_store_reason_sum {
        char reason[64];
        uint64_t count;
};

int fp_store_reasons_add(void *userdata, const struct fp_store_drop *d)
{
        struct fp_store_reasons *rs = userdata;
        size_t i;

        for (i = 0; i < rs->n; i++)
                if (strncmp(rs->v[i].reason, d->reason, sizeof(rs->v[i].reason) - 1) == 0)
                        break;
        if (i == rs->n) {
                if (fp_grow((void **)&rs->v, &rs->cap, rs->n + 1, sizeof(*rs->v)) < 0)
                        return -ENOMEM;
                rs->v[rs->n] = (struct fp_store_reason_sum){.count = 0};
                snprintf(rs->v[rs->n].reason, sizeof(rs->v[rs->n].reason), "%s", d->reason);
                rs->n++;
        }
        rs->v[i].count += d->count;
        return 0;
}

static int reason_cmp(const void *a, const void *b)
{
        return strcmp(((const struct fp_store_reason_sum *)a)->reason,
                      ((const struct fp_store_reason_sum *)b)->reason);
}

int fp_store_reasons_comment(struct fp_store_reasons *rs, struct fp_pprof *p)
{
        char line[128];
        int r = 0;

        if (p && rs->n)
                qsort(rs->v, rs->n, sizeof(*rs->v), reason_cmp);
        for (size_t i = 0; p && i < rs->n && r == 0; i++) {
                if (!rs->v[i].count)
                        continue;
                snprintf(line, sizeof(line), "dropped %s: %llu", rs->v[i].reason,
                         (unsigned long long)rs->v[i].count);
                r = fp_pprof_add_comment(p, line);
        }
        free(rs->v);
        *rs = (struct fp_store_reasons){0};
        return r;
}

int fp_store_query_pprof(struct fp_store *s, const struct fp_store_filter *f, struct fp_pprof *p)
{
        struct fp_store_filter none = {0};
        struct query q = {.s = s, .p = p, .thread_name = f ? f->thread_name : NULL};
        const struct q_event *ref = NULL;
        int r;

        if (!p)
                return -EINVAL;
        if (!f)
                f = &none;
        s->errmsg[0] = '\0';
        r = fp_store_read_begin(s);
        if (r < 0)
                return r;
        if ((r = load_events(&q)) < 0 || (r = find_matches(&q, f, &ref)) < 0)
                goto out;
        if (ref) {
                if ((r = set_types(&q, ref)) < 0 || (r = load_targets(&q)) < 0 ||
                    (r = aggregate(&q)) < 0 || (r = add_samples(&q)) < 0)
                        goto out;
                set_time(&q);
                /* The first target's executable is the profile's main binary;
                 * -ENOENT (no sample in it) leaves the first mapping. */
                if (q.n_targets > 0)
                        (void)fp_pprof_set_main_binary(p, q.targets[0].exe);
        }
        r = add_drop_comments(&q, f);
        if (r == 0)
                r = agg_count(&q);
out:
        query_free(&q);
        fp_store_read_end(s);
        return r;
}
