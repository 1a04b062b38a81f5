/* SPDX-License-Identifier: MIT */
/*
 * The ring: the life of buckets after they are written. Keeping the byte
 * budget (evicting the oldest buckets, one transaction each), collecting
 * what no bucket refers to any more (stacks and threads by last_bucket,
 * frames, functions and mappings by mark and sweep), handing space back
 * (incremental vacuum, log checkpoints), getting out of a full disk, and
 * the upload state (pending, uploaded, rejected). The rules are described
 * with the schema in schema.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store-internal.h"
#include "util.h"

/* ---- garbage collection ---- */

static bool stack_alive(const struct fp_store_map_entry *e, void *ud)
{
        return (int64_t)e->b >= *(const int64_t *)ud;
}

/* Deletes stacks, threads, targets and hosts no surviving bucket refers to. */
static int collect(struct fp_store *s)
{
        int64_t min_bucket = 0;
        sqlite3_stmt *st;
        int rc;

        CHECK_RC(s, fp_store_db_step_int(ST(s, FP_STMT_MIN_BUCKET), &min_bucket),
                 "find the oldest bucket");
        if (!min_bucket)
                min_bucket = INT64_MAX;
        /* A stack's last_bucket may lag (store.c): keep what might still be used. */
        int64_t stacks_before =
            min_bucket == INT64_MAX ? min_bucket : min_bucket - FP_STORE_TOUCH_SLACK;

        st = ST(s, FP_STMT_GC_STACKS);
        sqlite3_bind_int64(st, 1, stacks_before);
        CHECK_RC(s, fp_store_db_step_done(st), "delete unused stacks");
        s->stacks_gone += (uint64_t)sqlite3_changes(s->db);
        if (fp_store_map_filter(&s->stacks, stack_alive, &stacks_before) < 0)
                fp_store_map_clear(&s->stacks);

        st = ST(s, FP_STMT_GC_THREADS);
        sqlite3_bind_int64(st, 1, min_bucket);
        CHECK_RC(s, fp_store_db_step_done(st), "delete unused threads");
        st = ST(s, FP_STMT_GC_TARGETS);
        sqlite3_bind_int64(st, 1, min_bucket);
        CHECK_RC(s, fp_store_db_step_done(st), "delete unused targets");
        rc = fp_store_db_step_done(ST(s, FP_STMT_GC_HOSTS));
        CHECK_RC(s, rc, "delete unused hosts");
        rc = fp_store_db_step_done(ST(s, FP_STMT_GC_COSTS));
        CHECK_RC(s, rc, "delete old costs");
        return 0;
}

static size_t varint_get(const uint8_t *p, size_t len, uint64_t *ret)
{
        uint64_t v = 0;

        for (size_t i = 0; i < len && i < 10; i++) {
                v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
                if (!(p[i] & 0x80)) {
                        *ret = v;
                        return i + 1;
                }
        }
        return 0;
}

/* Sets the bit of every frame id some stack lists; SQLite rc. */
static int mark_frames(struct fp_store *s, uint8_t *marks, int64_t max_id)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "SELECT frames FROM stacks", -1, &st, NULL);

        if (rc != SQLITE_OK)
                return rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const uint8_t *p = sqlite3_column_blob(st, 0);
                size_t len = (size_t)sqlite3_column_bytes(st, 0), k;
                uint64_t id;

                for (size_t off = 0; off < len; off += k) {
                        k = varint_get(p + off, len - off, &id);
                        if (!k)
                                break;
                        if (id && id <= (uint64_t)max_id)
                                marks[id / 8] |= (uint8_t)(1u << (id % 8));
                }
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Deletes the rows of table (frames or stacks) whose bit is clear; SQLite rc, or -ENOMEM. */
static int delete_unmarked(struct fp_store *s, const char *table, const uint8_t *marks,
                           int64_t max_id)
{
        sqlite3_stmt *st = NULL;
        int64_t *dead = NULL;
        size_t n = 0, cap = 0;
        char sql[64];
        int rc;

        snprintf(sql, sizeof(sql), "SELECT id FROM %s", table);
        rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);

        if (rc != SQLITE_OK)
                return rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t id = sqlite3_column_int64(st, 0);

                if (id > 0 && id <= max_id && (marks[id / 8] & (1u << (id % 8))))
                        continue;
                if (fp_grow((void **)&dead, &cap, n + 1, sizeof(*dead)) < 0) {
                        rc = -ENOMEM;
                        break;
                }
                dead[n++] = id;
        }
        sqlite3_finalize(st);
        st = NULL;
        snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE id = ?1", table);
        if (rc == SQLITE_DONE)
                rc = n ? sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) : SQLITE_OK;
        for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
                sqlite3_bind_int64(st, 1, dead[i]);
                rc = fp_store_db_step_done(st);
        }
        sqlite3_finalize(st);
        free(dead);
        return rc;
}

/*
 * Mark and sweep: deletes frames no stack lists, then functions and
 * mappings no frame refers to. Inside the caller's transaction.
 */
static int sweep(struct fp_store *s)
{
        int64_t max_id = 0;
        uint8_t *marks;
        int rc, r;

        r = fp_store_db_pragma_int(s, "SELECT coalesce(max(id), 0) FROM frames", &max_id);
        if (r < 0)
                return r;
        marks = calloc((size_t)max_id / 8 + 1, 1);
        if (!marks)
                return fp_store_db_failf(s, -ENOMEM, "Failed to collect frames: out of memory");
        rc = mark_frames(s, marks, max_id);
        if (rc == SQLITE_OK)
                rc = delete_unmarked(s, "frames", marks, max_id);
        free(marks);
        if (rc == SQLITE_OK)
                rc = fp_store_db_exec(s->db, "DELETE FROM functions WHERE id NOT IN"
                                             " (SELECT function_id FROM frames);"
                                             "DELETE FROM mappings WHERE id NOT IN"
                                             " (SELECT mapping_id FROM frames)");
        fp_store_map_clear(&s->frames);
        fp_store_map_clear(&s->functions);
        fp_store_map_clear(&s->mappings);
        if (rc == -ENOMEM)
                return fp_store_db_failf(s, -ENOMEM, "Failed to collect frames: out of memory");
        if (rc != SQLITE_OK)
                return fp_store_db_fail(s, rc, "collect unused frames");
        s->stacks_gone = 0;
        return 0;
}

struct stack_marks {
        uint8_t *bits;
        int64_t max_id;
};

static int mark_stack(void *userdata, const struct fp_store_sample *e)
{
        struct stack_marks *m = userdata;

        if (e->stack && e->stack <= m->max_id)
                m->bits[e->stack / 8] |= (uint8_t)(1u << (e->stack % 8));
        return 0;
}

/*
 * The exact collection behind collect()'s lagging one: deletes the stacks
 * no sample of a surviving bucket refers to, then sweeps frames. Used when
 * the stacks kept by the lag alone would make the last bucket go. Inside
 * the caller's transaction.
 */
static int collect_exact(struct fp_store *s)
{
        struct stack_marks m = {0};
        sqlite3_stmt *st = NULL;
        int rc, r;

        r = fp_store_db_pragma_int(s, "SELECT coalesce(max(id), 0) FROM stacks", &m.max_id);
        if (r < 0)
                return r;
        m.bits = calloc((size_t)m.max_id / 8 + 1, 1);
        if (!m.bits)
                return fp_store_db_failf(s, -ENOMEM, "Failed to collect stacks: out of memory");
        rc = sqlite3_prepare_v2(s->db, "SELECT data FROM series_samples", -1, &st, NULL);
        if (rc == SQLITE_OK) {
                while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                        if (fp_store_samples_decode(sqlite3_column_blob(st, 0),
                                                    (size_t)sqlite3_column_bytes(st, 0), mark_stack,
                                                    &m) < 0) {
                                rc = SQLITE_CORRUPT;
                                break;
                        }
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE)
                rc = delete_unmarked(s, "stacks", m.bits, m.max_id);
        free(m.bits);
        fp_store_map_clear(&s->stacks);
        if (rc == -ENOMEM)
                return fp_store_db_failf(s, -ENOMEM, "Failed to collect stacks: out of memory");
        if (rc != SQLITE_OK)
                return fp_store_db_fail(s, rc, "collect unused stacks");
        return sweep(s);
}

/* ---- eviction ---- */

/*
 * Moves the samples (as reason) and drops of bucket into carried_drops,
 * unless it was uploaded (then they are the collector's).
 */
static int carry(struct fp_store *s, int64_t bucket, const char *reason)
{
        sqlite3_stmt *st = ST(s, FP_STMT_CARRY_SAMPLES);

        sqlite3_bind_int64(st, 1, bucket);
        sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
        CHECK_RC(s, fp_store_db_step_done(st), "count the samples of a bucket");
        st = ST(s, FP_STMT_CARRY_DROPS);
        sqlite3_bind_int64(st, 1, bucket);
        CHECK_RC(s, fp_store_db_step_done(st), "carry the drops of a bucket");
        return 0;
}

static int delete_bucket(struct fp_store *s, int64_t bucket)
{
        static const enum fp_store_stmt_id del[] = {FP_STMT_DELETE_SAMPLES, FP_STMT_DELETE_DROPS,
                                                    FP_STMT_DELETE_SERIES, FP_STMT_DELETE_KEYS,
                                                    FP_STMT_DELETE_BUCKET};
        /* Its series' summaries go with it, to be made again of what is left. */
        int r = fp_store_rollup_touch_bucket(s, bucket);

        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(del) / sizeof(del[0]); i++) {
                sqlite3_stmt *st = ST(s, del[i]);
                sqlite3_bind_int64(st, 1, bucket);
                CHECK_RC(s, fp_store_db_step_done(st), "delete a bucket");
        }
        return 0;
}

/*
 * One step of keeping the budget, in a transaction of its own: sweeps
 * frames when a quarter of the stacks went since the last sweep (and
 * before the last bucket would go), else evicts the oldest bucket and
 * collects what only it used. With keep_newest the last bucket stays (a
 * reader never finds the store empty between this and the next write).
 * Returns 1 when it did something, 0 when the store fits or nothing is
 * left to evict, or -errno.
 */
static int evict_step(struct fp_store *s, uint64_t target, bool keep_newest)
{
        int64_t live, oldest = 0, stacks = 0, buckets = 0;
        bool uploaded = false;
        sqlite3_stmt *st;
        int rc, r;

        live = fp_store_live_bytes(s, &rc);
        CHECK_RC(s, rc, "measure the store");
        if ((uint64_t)live <= target)
                return 0;
        r = fp_store_db_begin(s);
        if (r < 0)
                return r;
        st = fp_store_stmt(s, FP_STMT_OLDEST_BUCKET);
        if (!st) {
                r = -EIO;
                goto fail;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                oldest = sqlite3_column_int64(st, 0);
                uploaded = sqlite3_column_int(st, 1) != 0;
                rc = SQLITE_DONE;
        }
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) {
                r = fp_store_db_fail(s, rc, "find the oldest bucket");
                goto fail;
        }
        if (s->stacks_gone) {
                if ((r = fp_store_db_pragma_int(s, "SELECT count(*) FROM stacks", &stacks)) < 0 ||
                    (r = fp_store_db_pragma_int(s, "SELECT count(*) FROM buckets", &buckets)) < 0)
                        goto fail;
                if (buckets <= 1 || s->stacks_gone * 4 >= (uint64_t)stacks) {
                        r = sweep(s);
                        if (r == 0)
                                r = fp_store_db_commit(s);
                        if (r < 0)
                                goto fail;
                        return 1;
                }
        }
        if (!uploaded) {
                /*
                 * Uploads waiting in the outbox hold data older than any
                 * pending bucket (rounds take the oldest): they go first.
                 */
                int64_t upload = 0;
                st = fp_store_stmt(s, FP_STMT_OUTBOX_OLDEST);
                rc = st ? fp_store_db_step_int(st, &upload) : SQLITE_ERROR;
                if (rc != SQLITE_OK) {
                        r = st ? fp_store_db_fail(s, rc, "find the oldest upload") : -EIO;
                        goto fail;
                }
                if (upload) {
                        if ((r = fp_store_outbox_charge_delete(s, upload, "evicted")) < 0 ||
                            (r = fp_store_db_commit(s)) < 0)
                                goto fail;
                        return 1;
                }
        }
        if (oldest) {
                int64_t newest = 0;
                if ((r = fp_store_db_pragma_int(s, "SELECT max(id) FROM buckets", &newest)) < 0)
                        goto fail;
                /* Not once the disk was found full: a big transaction would not fit. */
                if (newest == oldest && s->exact_bucket != newest && !fp_store_disk_was_full(s)) {
                        /* The last bucket: first drop the stacks only the lag kept. */
                        s->exact_bucket = newest;
                        if ((r = collect_exact(s)) < 0 || (r = fp_store_db_commit(s)) < 0)
                                goto fail;
                        return 1;
                }
                if (newest == oldest && keep_newest)
                        oldest = 0;
        }
        if (!oldest) {
                fp_store_db_rollback(s);
                return 0;
        }
        if ((!uploaded && (r = carry(s, oldest, "evicted")) < 0) ||
            (r = delete_bucket(s, oldest)) < 0 || (r = collect(s)) < 0 ||
            (r = fp_store_db_commit(s)) < 0)
                goto fail;
        s->evicted_buckets++;
        return 1;
fail:
        fp_store_db_rollback(s);
        return r;
}

int fp_store_evict(struct fp_store *s, uint64_t reserve, bool keep_newest, bool *ret_disk_full)
{
        int r;

        *ret_disk_full = false;
        if (!s->budget)
                return 0;
        while ((r = evict_step(s, s->budget - (reserve < s->budget ? reserve : s->budget),
                               keep_newest)) > 0) {
                /* Drain the log after each step: its peak is one step, not all of them. */
                int rc =
                    sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
                if ((rc & 0xff) == SQLITE_FULL || fp_store_db_errno(s->db, rc) == -ENOSPC)
                        *ret_disk_full = true;
        }
        return r;
}

int fp_store_expire(struct fp_store *s, int64_t before_ns)
{
        int64_t ids[64];
        bool uploaded[64];
        int total = 0, r, rc;

        s->errmsg[0] = '\0';
        if (s->readonly)
                return fp_store_db_failf(s, -EROFS,
                                         "Failed to expire buckets: the store is read-only");
        for (;;) {
                sqlite3_stmt *st = ST(s, FP_STMT_EXPIRED);
                size_t n = 0;

                sqlite3_bind_int64(st, 1, before_ns);
                while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < 64) {
                        ids[n] = sqlite3_column_int64(st, 0);
                        uploaded[n++] = sqlite3_column_int(st, 1) != 0;
                }
                sqlite3_reset(st);
                if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                        return fp_store_db_fail(s, rc, "find expired buckets");
                if (n == 0)
                        break;
                for (size_t i = 0; i < n; i++) {
                        r = fp_store_db_begin(s);
                        if (r < 0)
                                return r;
                        if ((!uploaded[i] && (r = carry(s, ids[i], "evicted")) < 0) ||
                            (r = delete_bucket(s, ids[i])) < 0 || (r = collect(s)) < 0 ||
                            (r = fp_store_db_commit(s)) < 0) {
                                fp_store_db_rollback(s);
                                return r;
                        }
                        s->evicted_buckets++;
                        total++;
                        (void)sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_PASSIVE,
                                                        NULL, NULL);
                }
        }
        for (;;) {
                /* Uploads whose data is as old: counted as evicted too. */
                sqlite3_stmt *st = ST(s, FP_STMT_OUTBOX_EXPIRED);
                size_t n = 0;

                sqlite3_bind_int64(st, 1, before_ns);
                while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < 64)
                        ids[n++] = sqlite3_column_int64(st, 0);
                sqlite3_reset(st);
                if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                        return fp_store_db_fail(s, rc, "find expired uploads");
                if (n == 0)
                        break;
                if ((r = fp_store_db_begin(s)) < 0)
                        return r;
                for (size_t i = 0; i < n && r == 0; i++)
                        r = fp_store_outbox_charge_delete(s, ids[i], "evicted");
                if (r == 0)
                        r = fp_store_db_commit(s);
                if (r < 0) {
                        fp_store_db_rollback(s);
                        return r;
                }
                total += (int)n;
        }
        if (total)
                (void)fp_store_reclaim(s, false);
        return total;
}

static int64_t file_size(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* The log size past which a checkpoint truncates it. */
static uint64_t wal_limit(const struct fp_store *s)
{
        return s->budget ? s->budget / 4 : FP_STORE_WAL_LIMIT;
}

/*
 * Room a write needs within the budget: the live pages it adds and the
 * log it writes, as the last writes did (at most half the budget).
 */
uint64_t fp_store_write_reserve(const struct fp_store *s)
{
        uint64_t r = s->est_growth + s->est_log;
        return r < s->budget / 2 ? r : s->budget / 2;
}

/* Free pages kept for the next write to fill, rather than handed back and asked for again. */
static int64_t free_slack(const struct fp_store *s)
{
        uint64_t keep;

        if (!s->budget)
                return (int64_t)(FP_STORE_WAL_LIMIT / (uint64_t)s->page_size);
        keep = s->est_growth < s->budget / 2 ? s->est_growth : s->budget / 2;
        if (keep < s->budget / 16)
                keep = s->budget / 16;
        return (int64_t)(keep / (uint64_t)s->page_size);
}

/* Checkpoints; TRUNCATE never waits for readers (it is retried after the next write). */
int fp_store_db_checkpoint(struct fp_store *s, int mode, int *ret_log)
{
        int rc;

        if (mode == SQLITE_CHECKPOINT_TRUNCATE)
                sqlite3_busy_timeout(s->db, 0);
        rc = sqlite3_wal_checkpoint_v2(s->db, "main", mode, ret_log, NULL);
        if (mode == SQLITE_CHECKPOINT_TRUNCATE)
                sqlite3_busy_timeout(s->db, FP_STORE_BUSY_MS);
        return rc;
}

int fp_store_reclaim(struct fp_store *s, bool force)
{
        int64_t pages = 0, free_pages = 0, slack;
        char sql[64];
        bool vacuumed = false;
        int mode;

        if (s->readonly)
                return SQLITE_OK;
        if (fp_store_db_stmt_int(s, FP_STMT_PAGE_COUNT, &pages) != SQLITE_OK ||
            fp_store_db_stmt_int(s, FP_STMT_FREELIST_COUNT, &free_pages) != SQLITE_OK)
                return SQLITE_ERROR;
        slack = force ? 0 : free_slack(s);
        if (free_pages > slack) {
                snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%lld)",
                         (long long)(free_pages - slack));
                vacuumed = fp_store_db_exec(s->db, sql) == SQLITE_OK;
        }
        /*
         * Checkpoint after every write, so the log holds one transaction
         * and the database file grows step by step (a log of many could not
         * be checkpointed once the disk is full: the file would have to grow
         * into space the log holds). With a budget the log is truncated
         * too: its space is the room the next write reserved.
         */
        mode = force || vacuumed || s->budget || (uint64_t)file_size(s->wal_path) > wal_limit(s)
                   ? SQLITE_CHECKPOINT_TRUNCATE
                   : SQLITE_CHECKPOINT_PASSIVE;
        return fp_store_db_checkpoint(s, mode, NULL);
}

int fp_store_shrink(struct fp_store *s)
{
        bool full;
        int r = fp_store_evict(s, 0, false, &full);

        (void)fp_store_reclaim(s, true);
        return r;
}

/*
 * The log cannot be checkpointed when its pages would make the database
 * file grow on a full disk; then no transaction can be written either,
 * once the log's file is full. Breaks out with the smallest transaction
 * that helps: evicting the oldest buckets (collection waits) and moving
 * pages so that the database ends inside its present file, whereupon the
 * checkpoint needs no new space and empties the log. It needs the room
 * that the failed transaction's frames left in the log's file; when even
 * that is missing, the store waits for space like any other writer.
 */
static void break_full_log(struct fp_store *s)
{
        int64_t pages = 0, free_pages = 0, need;
        char sql[64];
        int rc;

        if (fp_store_db_stmt_int(s, FP_STMT_PAGE_COUNT, &pages) != SQLITE_OK)
                return;
        need = pages - file_size(s->path) / s->page_size;
        if (need <= 0)
                return;
        need += 8; /* pointer-map and freelist trunk pages move too */
        if (fp_store_db_begin(s) < 0)
                return;
        for (;;) {
                sqlite3_stmt *st;
                int64_t oldest = 0;
                bool uploaded = false;

                if (fp_store_db_stmt_int(s, FP_STMT_FREELIST_COUNT, &free_pages) != SQLITE_OK)
                        goto fail;
                if (free_pages >= need)
                        break;
                st = fp_store_stmt(s, FP_STMT_OLDEST_BUCKET);
                if (!st)
                        goto fail;
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        oldest = sqlite3_column_int64(st, 0);
                        uploaded = sqlite3_column_int(st, 1) != 0;
                }
                sqlite3_reset(st);
                if (!oldest)
                        break;
                if ((!uploaded && carry(s, oldest, "evicted") < 0) || delete_bucket(s, oldest) < 0)
                        goto fail;
                s->evicted_buckets++;
        }
        if (fp_store_db_commit(s) < 0)
                goto fail;
        snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%lld)", (long long)need);
        (void)fp_store_db_exec(s->db, sql);
        (void)sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        return;
fail:
        fp_store_db_rollback(s);
}

/*
 * After -ENOSPC: the disk is fuller than the budget assumed. Lowers the
 * budget in force below what is live now, empties the log (breaking out
 * of a full one if need be), and evicts to the new budget.
 */
void fp_store_make_room(struct fp_store *s)
{
        char msg[sizeof(s->errmsg)];
        int rc;
        int64_t live;

        memcpy(msg, s->errmsg, sizeof(msg));
        live = fp_store_live_bytes(s, &rc);
        if (rc == SQLITE_OK && live > 0) {
                uint64_t lower = (uint64_t)live / 10 * 8;
                if (lower < FP_STORE_MIN_BYTES)
                        lower = FP_STORE_MIN_BYTES;
                if (!s->budget || lower < s->budget)
                        s->budget = lower;
        }
        rc = sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        if ((rc & 0xff) == SQLITE_FULL || (rc & 0xff) == SQLITE_IOERR)
                break_full_log(s);
        (void)fp_store_shrink(s);
        memcpy(s->errmsg, msg, sizeof(msg));
}

int fp_store_gc(struct fp_store *s)
{
        int r = fp_store_db_begin(s);

        if (r < 0)
                return r;
        r = collect(s);
        if (r == 0)
                r = sweep(s);
        if (r == 0)
                r = fp_store_db_commit(s);
        if (r < 0) {
                fp_store_db_rollback(s);
                return r;
        }
        (void)fp_store_reclaim(s, false);
        return 0;
}

/* ---- upload state ---- */

int fp_store_pending_uploads(struct fp_store *s, struct fp_store_bucket *ret, size_t max)
{
        sqlite3_stmt *st = ST(s, FP_STMT_PENDING);
        size_t n = 0;
        int rc;

        sqlite3_bind_int64(st, 1, max > INT32_MAX ? INT32_MAX : (int64_t)max);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < max) {
                ret[n++] = (struct fp_store_bucket){
                    .id = sqlite3_column_int64(st, 0),
                    .start_ns = sqlite3_column_int64(st, 1),
                    .length_ns = sqlite3_column_int64(st, 2),
                    .written_ns = sqlite3_column_int64(st, 3),
                };
        }
        sqlite3_reset(st);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                return fp_store_db_fail(s, rc, "list buckets to upload");
        return (int)n;
}

int fp_store_count_pending(struct fp_store *s)
{
        int64_t n;

        CHECK_RC(s, fp_store_db_step_int(ST(s, FP_STMT_COUNT_PENDING), &n),
                 "count buckets to upload");
        return n > INT32_MAX ? INT32_MAX : (int)n;
}

static int mark(struct fp_store *s, const int64_t *ids, size_t n, bool rejected)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        int marked = 0, r;

        if (n && !ids)
                return -EINVAL;
        r = fp_store_db_begin(s);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r == 0; i++) {
                sqlite3_stmt *st = fp_store_stmt(s, FP_STMT_BUCKET_PENDING);
                int64_t pending = 0;
                int rc;

                if (!st) {
                        r = -EIO;
                        break;
                }
                sqlite3_bind_int64(st, 1, ids[i]);
                rc = fp_store_db_step_int(st, &pending);
                if (rc != SQLITE_OK) {
                        r = fp_store_db_fail(s, rc, "mark buckets uploaded");
                        break;
                }
                if (rejected && pending && (r = carry(s, ids[i], "upload_rejected")) < 0)
                        break;
                st = fp_store_stmt(s, FP_STMT_MARK_UPLOADED);
                if (!st) {
                        r = -EIO;
                        break;
                }
                sqlite3_bind_int64(st, 1, ids[i]);
                sqlite3_bind_int64(st, 2, now);
                rc = fp_store_db_step_done(st);
                if (rc != SQLITE_OK) {
                        r = fp_store_db_fail(s, rc, "mark buckets uploaded");
                        break;
                }
                marked += sqlite3_changes(s->db);
        }
        if (r == 0)
                r = fp_store_db_commit(s);
        if (r < 0) {
                fp_store_db_rollback(s);
                return r;
        }
        return marked;
}

int fp_store_mark_uploaded(struct fp_store *s, const int64_t *ids, size_t n)
{
        return mark(s, ids, n, false);
}

int fp_store_mark_rejected(struct fp_store *s, const int64_t *ids, size_t n)
{
        return mark(s, ids, n, true);
}
