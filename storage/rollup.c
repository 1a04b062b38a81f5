/* SPDX-License-Identifier: MIT */
/*
 * Summaries of a collector's store (store.h, schema.c's rollups and
 * rollup_dirty): each series' samples over an hour and a day of bucket
 * starts, merged once, so that a profile of a long range reads a few
 * summaries where it would read every bucket (profile.c).
 *
 * Writes and evictions mark the hour and day they change and delete
 * their summaries in the same transaction (fp_store_rollup_touch()); the
 * collector's writer thread, when idle, summarises marked hours once they
 * have ended, an hour at a time for every series of it (its buckets are
 * read once), and marked days from their hours' summaries once none of
 * their hours is marked. So a series' hour is always summarised, marked
 * (its buckets read instead), or without buckets.
 */
#include "store-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void fp_store_set_rollups(struct fp_store *s, bool on)
{
        s->rollups = on;
}

void fp_store_set_rollup_reads(struct fp_store *s, bool on)
{
        s->rollups_unread = !on;
}

int fp_store_rollup_touch(struct fp_store *s, int64_t target, int64_t event, int64_t start_ns)
{
        static const int64_t spans[] = {FP_STORE_HOUR_NS, FP_STORE_DAY_NS};

        if (!s->rollups)
                return 0;
        for (size_t i = 0; i < 2; i++) {
                int64_t span = spans[i], start = start_ns - start_ns % span;
                sqlite3_stmt *st = fp_store_stmt(s, FP_STMT_ROLLUP_DIRTY);
                if (!st)
                        return -EIO;
                sqlite3_bind_int64(st, 1, span);
                sqlite3_bind_int64(st, 2, start);
                sqlite3_bind_int64(st, 3, target);
                sqlite3_bind_int64(st, 4, event);
                int rc = fp_store_db_step_done(st);
                if (rc != SQLITE_OK)
                        return fp_store_db_fail(s, rc, "mark a summary");
                if (sqlite3_changes(s->db) == 0)
                        continue; /* marked already: its summary went then */
                st = fp_store_stmt(s, FP_STMT_ROLLUP_FORGET);
                if (!st)
                        return -EIO;
                sqlite3_bind_int64(st, 1, span);
                sqlite3_bind_int64(st, 2, start);
                sqlite3_bind_int64(st, 3, target);
                sqlite3_bind_int64(st, 4, event);
                rc = fp_store_db_step_done(st);
                if (rc != SQLITE_OK)
                        return fp_store_db_fail(s, rc, "forget a summary");
        }
        return 0;
}

int fp_store_rollup_touch_bucket(struct fp_store *s, int64_t bucket)
{
        struct {
                int64_t target, event, start;
        } v[64];
        size_t n = 0;
        int rc, r = 0;

        if (!s->rollups)
                return 0;
        sqlite3_stmt *st = fp_store_stmt(s, FP_STMT_BUCKET_SERIES_LIST);
        if (!st)
                return -EIO;
        sqlite3_bind_int64(st, 1, bucket);
        /* A bucket holds a few series (an upload: one); touched in rounds of 64. */
        do {
                n = 0;
                while (n < 64 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                        v[n].target = sqlite3_column_int64(st, 0);
                        v[n].event = sqlite3_column_int64(st, 1);
                        v[n].start = sqlite3_column_int64(st, 2);
                        n++;
                }
                if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
                        sqlite3_reset(st);
                        return fp_store_db_fail(s, rc, "list a bucket's series");
                }
                for (size_t i = 0; i < n && r == 0; i++)
                        r = fp_store_rollup_touch(s, v[i].target, v[i].event, v[i].start);
        } while (r == 0 && n == 64 && rc == SQLITE_ROW);
        sqlite3_reset(st);
        return r;
}

/* ---- summarising ---- */

/* One series being summarised: its samples merged by (thread << 32 | stack). */
struct acc {
        int64_t target, event;
        bool dirty; /* marked: to be written */
        struct fp_store_map samples;
        int64_t first_ns, last_ns;
        uint64_t buckets, count, value;
};

struct accs {
        struct acc *v;
        size_t n, cap;
};

static void accs_free(struct accs *a)
{
        for (size_t i = 0; i < a->n; i++)
                fp_store_map_free(&a->v[i].samples);
        free(a->v);
        memset(a, 0, sizeof(*a));
}

static struct acc *acc_find(struct accs *a, int64_t target, int64_t event)
{
        /* Few series an hour per store (a fleet's processes): a scan is as fast as a map. */
        for (size_t i = 0; i < a->n; i++)
                if (a->v[i].target == target && a->v[i].event == event)
                        return &a->v[i];
        return NULL;
}

static int add_sample(void *userdata, const struct fp_store_sample *e)
{
        struct acc *x = userdata;
        uint64_t key = (uint64_t)e->thread << 32 | e->stack;
        struct fp_store_map_entry *m = fp_store_map_get(&x->samples, key);

        if (!e->thread || !e->stack)
                return -EBADMSG;
        if (m) {
                m->a += e->count;
                m->b += e->value;
                return 0;
        }
        return fp_store_map_put(&x->samples, key, e->count, e->value);
}

static int cmp_sample(const void *a, const void *b)
{
        const struct fp_store_sample *x = a, *y = b;
        if (x->thread != y->thread)
                return x->thread < y->thread ? -1 : 1;
        return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The marked series of (span, start) into a. */
static int load_marks(struct fp_store *s, int64_t span, int64_t start, struct accs *a)
{
        sqlite3_stmt *st = NULL;
        int rc, r = fp_store_prepare(s,
                                     "SELECT target_id, event_id FROM rollup_dirty"
                                     " WHERE span_ns = ?1 AND start_ns = ?2",
                                     &st);

        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, span);
        sqlite3_bind_int64(st, 2, start);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (fp_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)) < 0) {
                        r = -ENOMEM;
                        break;
                }
                a->v[a->n++] = (struct acc){.target = sqlite3_column_int64(st, 0),
                                            .event = sqlite3_column_int64(st, 1),
                                            .dirty = true};
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "read summary marks");
        sqlite3_finalize(st);
        return r;
}

/*
 * Reads rows (target, event, first_ns, last_ns, buckets, count, value,
 * data) of st into the marked series of a.
 */
static int merge_rows(struct fp_store *s, sqlite3_stmt *st, struct accs *a)
{
        int rc, r = 0;

        while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct acc *x =
                    acc_find(a, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
                if (!x)
                        continue; /* summarised already */
                int64_t first = sqlite3_column_int64(st, 2), last = sqlite3_column_int64(st, 3);
                if (!x->buckets || first < x->first_ns)
                        x->first_ns = first;
                if (!x->buckets || last > x->last_ns)
                        x->last_ns = last;
                x->buckets += (uint64_t)sqlite3_column_int64(st, 4);
                x->count += (uint64_t)sqlite3_column_int64(st, 5);
                x->value += (uint64_t)sqlite3_column_int64(st, 6);
                if (sqlite3_column_type(st, 7) == SQLITE_NULL)
                        continue; /* a series row without samples */
                r = fp_store_samples_decode(sqlite3_column_blob(st, 7),
                                            (size_t)sqlite3_column_bytes(st, 7), add_sample, x);
                if (r < 0 && r != -ENOMEM)
                        r = fp_store_db_failf(s, -EBADMSG,
                                              "Store '%s' is damaged: samples cannot be decoded",
                                              s->path);
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "read what to summarise");
        return r;
}

/* Writes the summaries of a's marked series for (span, start) and clears their marks. */
static int write_summaries(struct fp_store *s, int64_t span, int64_t start, struct accs *a)
{
        sqlite3_stmt *ins = NULL, *del = NULL;
        struct fp_store_sample *v = NULL;
        size_t cap = 0;
        int r = fp_store_prepare(s,
                                 "INSERT OR REPLACE INTO rollups (span_ns, start_ns, target_id,"
                                 " event_id, first_ns, last_ns, buckets, count, value, data)"
                                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                                 &ins);

        if (r == 0)
                r = fp_store_prepare(s,
                                     "DELETE FROM rollup_dirty WHERE span_ns = ?1 AND start_ns = ?2"
                                     " AND target_id = ?3 AND event_id = ?4",
                                     &del);
        for (size_t i = 0; r == 0 && i < a->n; i++) {
                struct acc *x = &a->v[i];
                uint8_t *data = NULL;
                size_t len = 0, n = 0;
                int rc;

                if (!x->dirty)
                        continue;
                if (x->buckets) {
                        if (fp_grow((void **)&v, &cap, x->samples.n ? x->samples.n : 1,
                                    sizeof(*v)) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        for (size_t k = 0; k < x->samples.cap; k++) {
                                const struct fp_store_map_entry *e = &x->samples.e[k];
                                if (e->key)
                                        v[n++] = (struct fp_store_sample){
                                            (uint32_t)(e->key >> 32), (uint32_t)e->key, e->a, e->b};
                        }
                        qsort(v, n, sizeof(*v), cmp_sample);
                        if ((r = fp_store_samples_encode(v, n, &data, &len)) < 0)
                                break;
                        sqlite3_bind_int64(ins, 1, span);
                        sqlite3_bind_int64(ins, 2, start);
                        sqlite3_bind_int64(ins, 3, x->target);
                        sqlite3_bind_int64(ins, 4, x->event);
                        sqlite3_bind_int64(ins, 5, x->first_ns);
                        sqlite3_bind_int64(ins, 6, x->last_ns);
                        sqlite3_bind_int64(ins, 7, (int64_t)x->buckets);
                        sqlite3_bind_int64(ins, 8, (int64_t)x->count);
                        sqlite3_bind_int64(ins, 9, (int64_t)x->value);
                        sqlite3_bind_blob64(ins, 10, data, len, free);
                        rc = fp_store_db_step_done(ins);
                        sqlite3_reset(ins);
                        if (rc != SQLITE_OK) {
                                r = fp_store_db_fail(s, rc, "write a summary");
                                break;
                        }
                }
                /* Nothing left of it (its buckets evicted): the mark goes, no summary. */
                sqlite3_bind_int64(del, 1, span);
                sqlite3_bind_int64(del, 2, start);
                sqlite3_bind_int64(del, 3, x->target);
                sqlite3_bind_int64(del, 4, x->event);
                rc = fp_store_db_step_done(del);
                sqlite3_reset(del);
                if (rc != SQLITE_OK)
                        r = fp_store_db_fail(s, rc, "clear a summary mark");
        }
        free(v);
        sqlite3_finalize(ins);
        sqlite3_finalize(del);
        return r;
}

/*
 * Summarises the marked series of the hour or day (span) at start: an
 * hour from its buckets, a day from its hours' summaries.
 */
static int summarise(struct fp_store *s, int64_t span, int64_t start, struct accs *a)
{
        /* Rows (target, event, first_ns, last_ns, buckets, count, value, data) in [?1, ?2). */
        static const char hour_sql[] =
            "SELECT bs.target_id, bs.event_id, b.start_ns, b.start_ns + b.length_ns, 1,"
            " bs.count, bs.value, ss.data FROM buckets b"
            " JOIN bucket_series bs ON bs.bucket_id = b.id"
            " LEFT JOIN series_samples ss ON ss.bucket_id = bs.bucket_id"
            " AND ss.target_id = bs.target_id AND ss.event_id = bs.event_id"
            " WHERE b.start_ns >= ?1 AND b.start_ns < ?2";
        static const char day_sql[] =
            "SELECT target_id, event_id, first_ns, last_ns, buckets, count, value, data"
            " FROM rollups WHERE span_ns = " FP_STORE_HOUR_NS_SQL
            " AND start_ns >= ?1 AND start_ns < ?2";
        sqlite3_stmt *st = NULL;
        int r = load_marks(s, span, start, a);

        if (r == 0)
                r = fp_store_prepare(s, span == FP_STORE_HOUR_NS ? hour_sql : day_sql, &st);
        if (r == 0) {
                sqlite3_bind_int64(st, 1, start);
                sqlite3_bind_int64(st, 2, start + span);
                r = merge_rows(s, st, a);
        }
        sqlite3_finalize(st);
        if (r == 0)
                r = write_summaries(s, span, start, a);
        return r;
}

/* The start of the oldest marked hour, or day with no hour marked, ended before cutoff; 0: none. */
static int next_due(struct fp_store *s, int64_t cutoff, int64_t *ret_span, int64_t *ret_start)
{
        static const char *const sql[] = {
            "SELECT start_ns FROM rollup_dirty WHERE span_ns = ?1 AND start_ns + ?1 <= ?2"
            " ORDER BY start_ns LIMIT 1",
            "SELECT d.start_ns FROM rollup_dirty d WHERE d.span_ns = ?1 AND d.start_ns + ?1 <= ?2"
            " AND NOT EXISTS (SELECT 1 FROM rollup_dirty h WHERE h.span_ns = ?3"
            " AND h.start_ns >= d.start_ns AND h.start_ns < d.start_ns + ?1)"
            " ORDER BY d.start_ns LIMIT 1",
        };
        static const int64_t spans[] = {FP_STORE_HOUR_NS, FP_STORE_DAY_NS};

        *ret_start = 0;
        for (size_t i = 0; i < 2; i++) {
                sqlite3_stmt *st = NULL;
                int rc, r = fp_store_prepare(s, sql[i], &st);
                if (r < 0)
                        return r;
                sqlite3_bind_int64(st, 1, spans[i]);
                sqlite3_bind_int64(st, 2, cutoff);
                sqlite3_bind_int64(st, 3, FP_STORE_HOUR_NS);
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        *ret_span = spans[i];
                        *ret_start = sqlite3_column_int64(st, 0);
                }
                sqlite3_finalize(st);
                if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                        return fp_store_db_fail(s, rc, "find what to summarise");
                if (rc == SQLITE_ROW)
                        return 1;
        }
        return 0;
}

int fp_store_rollup_step(struct fp_store *s, int64_t now_ns, int64_t grace_ns)
{
        struct accs a = {0};
        int64_t span = 0, start = 0;
        int r;

        if (s->readonly || !s->rollups || s->rollups_unread)
                return 0;
        r = fp_store_db_begin(s);
        if (r < 0)
                return r;
        r = next_due(s, now_ns - grace_ns, &span, &start);
        if (r == 1)
                r = summarise(s, span, start, &a);
        if (r == -ENOMEM)
                r = fp_store_db_failf(s, -ENOMEM, "Failed to summarise: out of memory");
        if (r < 0) {
                fp_store_db_rollback(s);
                accs_free(&a);
                return r;
        }
        accs_free(&a);
        int done = span != 0;
        r = fp_store_db_commit(s);
        return r < 0 ? r : done;
}

int fp_store_rollup_counts(struct fp_store *s, uint64_t *ret_marked, uint64_t *ret_kept)
{
        static const char *const sql[] = {"SELECT count(*) FROM rollup_dirty",
                                          "SELECT count(*) FROM rollups"};
        uint64_t *out[] = {ret_marked, ret_kept};
        int r = fp_store_read_begin(s);

        for (size_t i = 0; r >= 0 && i < 2; i++) {
                sqlite3_stmt *st = NULL;
                if ((r = fp_store_prepare(s, sql[i], &st)) < 0)
                        break;
                int rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        *out[i] = (uint64_t)sqlite3_column_int64(st, 0);
                else
                        r = fp_store_db_fail(s, rc, "count summaries");
                sqlite3_finalize(st);
        }
        fp_store_read_end(s);
        return r < 0 ? r : 0;
}
