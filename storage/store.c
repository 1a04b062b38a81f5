/* SPDX-License-Identifier: MIT */
/*
 * Writing to the store: a batch becomes one bucket in one transaction,
 * the byte budget is kept by evicting the oldest buckets, what nothing
 * refers to any more is collected, and the upload state is kept. The
 * schema and the eviction rule are described in schema.c.
 *
 * Speed. The writer looks content up by the hashes the batch computed,
 * first in the store's in-memory caches (content hash -> rowid, and for
 * stacks the last bucket that used them), then in the tables' hash
 * indices; only a stack never seen before costs its frames' lookups and
 * inserts. Samples are inserted in primary-key order, so the samples
 * tree only ever grows at its end. A stack seen again costs one UPDATE of
 * its last_bucket, which is what lets eviction find unreferenced stacks
 * through an index instead of scanning the samples.
 *
 * Failure. Any error rolls the transaction back and empties the caches
 * (they may name rows the rollback took away); the store stays usable.
 * After -ENOSPC the budget in force is lowered below the present size and
 * the store evicts, so that the next write has room.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store-internal.h"

/* Per-write state: the rowid of each batch entry, 0 when not resolved yet. */
struct writer {
        struct fp_store *s;
        const struct fp_store_batch *b;
        int64_t bucket;
        int64_t *target_ids, *event_ids, *thread_ids, *stack_ids, *frame_ids, *mapping_ids;
        uint8_t *blob;
        size_t blob_cap;
};

static void caches_clear(struct fp_store *s)
{
        fp_sx_map_clear(&s->stacks);
        fp_sx_map_clear(&s->frames);
        fp_sx_map_clear(&s->functions);
        fp_sx_map_clear(&s->mappings);
}

static int cache_put(struct fp_sx_map *m, uint64_t key, uint64_t a, uint64_t b)
{
        if (m->n >= FP_STORE_CACHE_MAX)
                fp_sx_map_clear(m);
        /* A cache that cannot grow is only slower: ignore -ENOMEM. */
        (void)fp_sx_map_put(m, key, a, b);
        return 0;
}

/* Steps st to completion (ignoring rows) and resets it; SQLite rc. */
static int step_done(sqlite3_stmt *st)
{
        int rc;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                ;
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Steps st expecting one integer row, or none (*ret = 0); resets it; SQLite rc. */
static int step_int(sqlite3_stmt *st, int64_t *ret)
{
        int rc = sqlite3_step(st);

        *ret = 0;
        if (rc == SQLITE_ROW) {
                *ret = sqlite3_column_int64(st, 0);
                while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                        ;
        }
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void bind_text(sqlite3_stmt *st, int i, const char *t)
{
        sqlite3_bind_text(st, i, t ? t : "", -1, SQLITE_STATIC);
}

#define ST(s, id)                                                                                  \
        ({                                                                                         \
                sqlite3_stmt *st_ = fp_st((s), (id));                                              \
                if (!st_)                                                                          \
                        return -EIO;                                                               \
                st_;                                                                               \
        })

/* Fails with the store's message for rc unless it is SQLITE_OK. */
#define CHECK_RC(s, rc, what)                                                                      \
        do {                                                                                       \
                int rc_ = (rc);                                                                    \
                if (rc_ != SQLITE_OK)                                                              \
                        return fp_sx_fail((s), rc_, (what));                                       \
        } while (0)

/* Runs a cached one-integer statement; SQLite rc. */
static int st_int(struct fp_store *s, enum fp_st id, int64_t *ret)
{
        sqlite3_stmt *st = fp_st(s, id);

        *ret = 0;
        return st ? step_int(st, ret) : SQLITE_ERROR;
}

static int64_t live_bytes(struct fp_store *s, int *ret_rc)
{
        int64_t pages = 0, free_pages = 0;
        int rc = st_int(s, FP_ST_PAGE_COUNT, &pages);

        if (rc == SQLITE_OK)
                rc = st_int(s, FP_ST_FREELIST_COUNT, &free_pages);
        *ret_rc = rc;
        return (pages - free_pages) * s->page_size;
}

/* ---- transactions ---- */

static int begin(struct fp_store *s)
{
        if (s->readonly)
                return fp_sx_failf(s, -EROFS, "Failed to write to store '%s': opened read-only",
                                   s->path);
        CHECK_RC(s, step_done(ST(s, FP_ST_BEGIN)), "begin a transaction");
        return 0;
}

static int commit(struct fp_store *s)
{
        CHECK_RC(s, step_done(ST(s, FP_ST_COMMIT)), "commit");
        return 0;
}

/* Rolls back whatever is open and forgets what the caches learnt meanwhile. */
static void rollback(struct fp_store *s)
{
        if (!sqlite3_get_autocommit(s->db)) {
                sqlite3_stmt *st = fp_st(s, FP_ST_ROLLBACK);
                if (st)
                        (void)step_done(st);
                else
                        (void)fp_sx_exec(s->db, "ROLLBACK");
        }
        caches_clear(s);
}

/* ---- garbage collection ---- */

static bool stack_alive(const struct fp_sx_map_entry *e, void *ud)
{
        return (int64_t)e->b >= *(const int64_t *)ud;
}

/* Deletes stacks, threads, targets and hosts no surviving bucket refers to. */
static int collect(struct fp_store *s)
{
        int64_t min_bucket = 0;
        sqlite3_stmt *st;
        int rc;

        CHECK_RC(s, step_int(ST(s, FP_ST_MIN_BUCKET), &min_bucket), "find the oldest bucket");
        if (!min_bucket)
                min_bucket = INT64_MAX;

        st = ST(s, FP_ST_GC_STACKS);
        sqlite3_bind_int64(st, 1, min_bucket);
        CHECK_RC(s, step_done(st), "delete unused stacks");
        s->stacks_gone += (uint64_t)sqlite3_changes(s->db);
        if (fp_sx_map_filter(&s->stacks, stack_alive, &min_bucket) < 0)
                fp_sx_map_clear(&s->stacks);

        st = ST(s, FP_ST_GC_THREADS);
        sqlite3_bind_int64(st, 1, min_bucket);
        CHECK_RC(s, step_done(st), "delete unused threads");
        st = ST(s, FP_ST_GC_TARGETS);
        sqlite3_bind_int64(st, 1, min_bucket);
        CHECK_RC(s, step_done(st), "delete unused targets");
        rc = step_done(ST(s, FP_ST_GC_HOSTS));
        CHECK_RC(s, rc, "delete unused hosts");
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

static size_t varint_put(uint8_t *p, uint64_t v)
{
        size_t n = 0;

        do {
                p[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                v >>= 7;
        } while (v);
        return n;
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

/* Deletes the frames whose bit is clear; SQLite rc, or -ENOMEM. */
static int delete_unmarked(struct fp_store *s, const uint8_t *marks, int64_t max_id)
{
        sqlite3_stmt *st = NULL;
        int64_t *dead = NULL;
        size_t n = 0, cap = 0;
        int rc = sqlite3_prepare_v2(s->db, "SELECT id FROM frames", -1, &st, NULL);

        if (rc != SQLITE_OK)
                return rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t id = sqlite3_column_int64(st, 0);

                if (id > 0 && id <= max_id && (marks[id / 8] & (1u << (id % 8))))
                        continue;
                if (fp_sx_grow((void **)&dead, &cap, n + 1, sizeof(*dead)) < 0) {
                        rc = -ENOMEM;
                        break;
                }
                dead[n++] = id;
        }
        sqlite3_finalize(st);
        st = NULL;
        if (rc == SQLITE_DONE)
                rc = n ? sqlite3_prepare_v2(s->db, "DELETE FROM frames WHERE id = ?1", -1, &st,
                                            NULL)
                       : SQLITE_OK;
        for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
                sqlite3_bind_int64(st, 1, dead[i]);
                rc = step_done(st);
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

        r = fp_sx_pragma_int(s, "SELECT coalesce(max(id), 0) FROM frames", &max_id);
        if (r < 0)
                return r;
        marks = calloc((size_t)max_id / 8 + 1, 1);
        if (!marks)
                return fp_sx_failf(s, -ENOMEM, "Failed to collect frames: out of memory");
        rc = mark_frames(s, marks, max_id);
        if (rc == SQLITE_OK)
                rc = delete_unmarked(s, marks, max_id);
        free(marks);
        if (rc == SQLITE_OK)
                rc = fp_sx_exec(s->db, "DELETE FROM functions WHERE id NOT IN"
                                       " (SELECT function_id FROM frames);"
                                       "DELETE FROM mappings WHERE id NOT IN"
                                       " (SELECT mapping_id FROM frames)");
        fp_sx_map_clear(&s->frames);
        fp_sx_map_clear(&s->functions);
        fp_sx_map_clear(&s->mappings);
        if (rc == -ENOMEM)
                return fp_sx_failf(s, -ENOMEM, "Failed to collect frames: out of memory");
        if (rc != SQLITE_OK)
                return fp_sx_fail(s, rc, "collect unused frames");
        s->stacks_gone = 0;
        return 0;
}

/* ---- eviction ---- */

/*
 * Moves the samples (as reason) and drops of bucket into carried_drops,
 * unless it was uploaded (then they are the collector's).
 */
static int carry(struct fp_store *s, int64_t bucket, const char *reason)
{
        sqlite3_stmt *st = ST(s, FP_ST_CARRY_SAMPLES);

        sqlite3_bind_int64(st, 1, bucket);
        sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
        CHECK_RC(s, step_done(st), "count the samples of a bucket");
        st = ST(s, FP_ST_CARRY_DROPS);
        sqlite3_bind_int64(st, 1, bucket);
        CHECK_RC(s, step_done(st), "carry the drops of a bucket");
        return 0;
}

static int delete_bucket(struct fp_store *s, int64_t bucket)
{
        static const enum fp_st del[] = {FP_ST_DELETE_SAMPLES, FP_ST_DELETE_DROPS,
                                         FP_ST_DELETE_SERIES, FP_ST_DELETE_BUCKET};

        for (size_t i = 0; i < sizeof(del) / sizeof(del[0]); i++) {
                sqlite3_stmt *st = ST(s, del[i]);
                sqlite3_bind_int64(st, 1, bucket);
                CHECK_RC(s, step_done(st), "delete a bucket");
        }
        return 0;
}

/*
 * One step of keeping the budget, in a transaction of its own: sweeps
 * frames when a quarter of the stacks went since the last sweep (and
 * before the last bucket would go), else evicts the oldest bucket and
 * collects what only it used. Returns 1 when it did something, 0 when the
 * store fits or nothing is left to evict, or -errno.
 */
static int evict_step(struct fp_store *s)
{
        int64_t live, oldest = 0, stacks = 0, buckets = 0;
        bool uploaded = false;
        sqlite3_stmt *st;
        int rc, r;

        live = live_bytes(s, &rc);
        CHECK_RC(s, rc, "measure the store");
        if ((uint64_t)live <= s->budget)
                return 0;
        r = begin(s);
        if (r < 0)
                return r;
        st = fp_st(s, FP_ST_OLDEST_BUCKET);
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
                r = fp_sx_fail(s, rc, "find the oldest bucket");
                goto fail;
        }
        if (s->stacks_gone) {
                if ((r = fp_sx_pragma_int(s, "SELECT count(*) FROM stacks", &stacks)) < 0 ||
                    (r = fp_sx_pragma_int(s, "SELECT count(*) FROM buckets", &buckets)) < 0)
                        goto fail;
                if (buckets <= 1 || s->stacks_gone * 4 >= (uint64_t)stacks) {
                        r = sweep(s);
                        if (r == 0)
                                r = commit(s);
                        if (r < 0)
                                goto fail;
                        return 1;
                }
        }
        if (!oldest) {
                rollback(s);
                return 0;
        }
        if ((!uploaded && (r = carry(s, oldest, "evicted")) < 0) ||
            (r = delete_bucket(s, oldest)) < 0 || (r = collect(s)) < 0 || (r = commit(s)) < 0)
                goto fail;
        s->evicted_buckets++;
        return 1;
fail:
        rollback(s);
        return r;
}

int fp_store_evict(struct fp_store *s, bool *ret_disk_full)
{
        int r;

        *ret_disk_full = false;
        if (!s->budget)
                return 0;
        while ((r = evict_step(s)) > 0) {
                /* Drain the log after each step: its peak is one step, not all of them. */
                int rc = sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL,
                                                   NULL);
                if ((rc & 0xff) == SQLITE_FULL || fp_sx_errno(s->db, rc) == -ENOSPC)
                        *ret_disk_full = true;
        }
        return r;
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

int fp_store_reclaim(struct fp_store *s, bool force)
{
        int64_t pages = 0, free_pages = 0, slack;
        char sql[64];
        bool vacuumed = false;
        int mode;

        if (s->readonly)
                return SQLITE_OK;
        if (st_int(s, FP_ST_PAGE_COUNT, &pages) != SQLITE_OK ||
            st_int(s, FP_ST_FREELIST_COUNT, &free_pages) != SQLITE_OK)
                return SQLITE_ERROR;
        slack = (int64_t)(s->budget ? s->budget / 8 : FP_STORE_WAL_LIMIT) / s->page_size;
        if (force)
                slack = 0;
        if (free_pages > slack) {
                snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%lld)",
                         (long long)(free_pages - slack / 2));
                vacuumed = fp_sx_exec(s->db, sql) == SQLITE_OK;
        }
        /*
         * Checkpoint after every write: the log then holds one transaction,
         * and the database file grows step by step. A log that held many
         * could not be checkpointed once the disk is full (the file would
         * have to grow into space the log holds), and nothing could be
         * written again.
         */
        mode = force || vacuumed || (uint64_t)file_size(s->wal_path) > wal_limit(s)
                       ? SQLITE_CHECKPOINT_TRUNCATE
                       : SQLITE_CHECKPOINT_PASSIVE;
        return sqlite3_wal_checkpoint_v2(s->db, "main", mode, NULL, NULL);
}

int fp_store_shrink(struct fp_store *s)
{
        bool full;
        int r = fp_store_evict(s, &full);

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

        if (st_int(s, FP_ST_PAGE_COUNT, &pages) != SQLITE_OK)
                return;
        need = pages - file_size(s->path) / s->page_size;
        if (need <= 0)
                return;
        need += 8; /* pointer-map and freelist trunk pages move too */
        if (begin(s) < 0)
                return;
        for (;;) {
                sqlite3_stmt *st;
                int64_t oldest = 0;
                bool uploaded = false;

                if (st_int(s, FP_ST_FREELIST_COUNT, &free_pages) != SQLITE_OK)
                        goto fail;
                if (free_pages >= need)
                        break;
                st = fp_st(s, FP_ST_OLDEST_BUCKET);
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
                if ((!uploaded && carry(s, oldest, "evicted") < 0) ||
                    delete_bucket(s, oldest) < 0)
                        goto fail;
                s->evicted_buckets++;
        }
        if (commit(s) < 0)
                goto fail;
        snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%lld)", (long long)need);
        (void)fp_sx_exec(s->db, sql);
        (void)sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        return;
fail:
        rollback(s);
}

/*
 * After -ENOSPC: the disk is fuller than the budget assumed. Lowers the
 * budget in force below what is live now, empties the log (breaking out
 * of a full one if need be), and evicts to the new budget.
 */
static void make_room(struct fp_store *s)
{
        char msg[sizeof(s->errmsg)];
        int rc;
        int64_t live;

        memcpy(msg, s->errmsg, sizeof(msg));
        live = live_bytes(s, &rc);
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
        int r = begin(s);

        if (r < 0)
                return r;
        r = collect(s);
        if (r == 0)
                r = sweep(s);
        if (r == 0)
                r = commit(s);
        if (r < 0) {
                rollback(s);
                return r;
        }
        (void)fp_store_reclaim(s, false);
        return 0;
}

/* ---- writing a batch ---- */

static int upsert_id(struct fp_store *s, sqlite3_stmt *st, int64_t *ret, const char *what)
{
        int rc = step_int(st, ret);

        CHECK_RC(s, rc, what);
        if (!*ret)
                return fp_sx_failf(s, -EIO, "Failed to %s in '%s': no row id", what, s->path);
        return 0;
}

static int write_targets(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;
        int64_t end = b->start_ns + b->length_ns;

        for (size_t i = 0; i < b->n_targets; i++) {
                const struct fp_sb_target *t = &b->targets[i];
                sqlite3_stmt *st = ST(s, FP_ST_HOST_UPSERT);
                int64_t host;
                int r;

                bind_text(st, 1, fp_sb_str(b, t->host));
                r = upsert_id(s, st, &host, "store a host");
                if (r < 0)
                        return r;
                st = ST(s, FP_ST_TARGET_UPSERT);
                sqlite3_bind_int64(st, 1, host);
                sqlite3_bind_int64(st, 2, t->pid);
                sqlite3_bind_int64(st, 3, (int64_t)t->starttime);
                bind_text(st, 4, fp_sb_str(b, t->comm));
                bind_text(st, 5, fp_sb_str(b, t->exe));
                bind_text(st, 6, fp_sb_str(b, t->config));
                sqlite3_bind_int(st, 7, t->active);
                sqlite3_bind_int64(st, 8, b->start_ns);
                sqlite3_bind_int64(st, 9, end);
                sqlite3_bind_int64(st, 10, w->bucket);
                r = upsert_id(s, st, &w->target_ids[i], "store a target");
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < b->n_events; i++) {
                const struct fp_sb_event *e = &b->events[i];
                sqlite3_stmt *st = ST(s, FP_ST_EVENT_UPSERT);
                int r;

                bind_text(st, 1, fp_sb_str(b, e->name));
                bind_text(st, 2, fp_sb_str(b, e->count_type));
                bind_text(st, 3, fp_sb_str(b, e->count_unit));
                bind_text(st, 4, fp_sb_str(b, e->value_type));
                bind_text(st, 5, fp_sb_str(b, e->value_unit));
                bind_text(st, 6, fp_sb_str(b, e->period_type));
                bind_text(st, 7, fp_sb_str(b, e->period_unit));
                sqlite3_bind_int64(st, 8, e->period);
                r = upsert_id(s, st, &w->event_ids[i], "store an event");
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < b->n_threads; i++) {
                const struct fp_sb_thread *t = &b->threads[i];
                sqlite3_stmt *st = ST(s, FP_ST_THREAD_UPSERT);
                int r;

                sqlite3_bind_int64(st, 1, w->target_ids[t->target]);
                sqlite3_bind_int64(st, 2, t->tid);
                bind_text(st, 3, fp_sb_str(b, t->name));
                sqlite3_bind_int64(st, 4, w->bucket);
                r = upsert_id(s, st, &w->thread_ids[i], "store a thread");
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The rowid of content hash in a deduplicated table: from the cache, else
 * from the table's hash index; 0 when absent.
 */
static int find(struct fp_store *s, struct fp_sx_map *cache, enum fp_st find_st, uint64_t hash,
                int64_t *ret)
{
        struct fp_sx_map_entry *e = fp_sx_map_get(cache, hash);
        sqlite3_stmt *st;

        if (e) {
                *ret = (int64_t)e->a;
                return 0;
        }
        st = ST(s, find_st);
        sqlite3_bind_int64(st, 1, (int64_t)hash);
        CHECK_RC(s, step_int(st, ret), "look up a stack's frames");
        if (*ret)
                cache_put(cache, hash, (uint64_t)*ret, 0);
        return 0;
}

static int insert_row(struct fp_store *s, sqlite3_stmt *st, struct fp_sx_map *cache, uint64_t hash,
                      int64_t *ret)
{
        CHECK_RC(s, step_done(st), "store a stack's frames");
        *ret = sqlite3_last_insert_rowid(s->db);
        cache_put(cache, hash, (uint64_t)*ret, 0);
        return 0;
}

static int resolve_mapping(struct writer *w, uint32_t i, int64_t *ret)
{
        struct fp_store *s = w->s;
        const struct fp_sb_mapping *m = &w->b->mappings[i];
        sqlite3_stmt *st;
        int r;

        if (w->mapping_ids[i]) {
                *ret = w->mapping_ids[i];
                return 0;
        }
        r = find(s, &s->mappings, FP_ST_MAPPING_FIND, m->hash, ret);
        if (r < 0 || *ret)
                goto out;
        st = ST(s, FP_ST_MAPPING_INSERT);
        sqlite3_bind_int64(st, 1, (int64_t)m->hash);
        bind_text(st, 2, fp_sb_str(w->b, m->file));
        bind_text(st, 3, fp_sb_str(w->b, m->build_id));
        sqlite3_bind_int64(st, 4, (int64_t)m->start);
        sqlite3_bind_int64(st, 5, (int64_t)m->limit);
        sqlite3_bind_int64(st, 6, (int64_t)m->offset);
        r = insert_row(s, st, &s->mappings, m->hash, ret);
out:
        if (r == 0)
                w->mapping_ids[i] = *ret;
        return r;
}

static int resolve_function(struct writer *w, const struct fp_sb_frame *f, int64_t *ret)
{
        struct fp_store *s = w->s;
        sqlite3_stmt *st;
        int r = find(s, &s->functions, FP_ST_FUNCTION_FIND, f->function_hash, ret);

        if (r < 0 || *ret)
                return r;
        st = ST(s, FP_ST_FUNCTION_INSERT);
        sqlite3_bind_int64(st, 1, (int64_t)f->function_hash);
        bind_text(st, 2, fp_sb_str(w->b, f->function));
        return insert_row(s, st, &s->functions, f->function_hash, ret);
}

static int resolve_frame(struct writer *w, uint32_t i, int64_t *ret)
{
        struct fp_store *s = w->s;
        const struct fp_sb_frame *f = &w->b->frames[i];
        int64_t mapping = 0, function = 0;
        sqlite3_stmt *st;
        int r;

        if (w->frame_ids[i]) {
                *ret = w->frame_ids[i];
                return 0;
        }
        r = find(s, &s->frames, FP_ST_FRAME_FIND, f->hash, ret);
        if (r < 0)
                return r;
        if (!*ret) {
                if (f->mapping != FP_SB_NONE && (r = resolve_mapping(w, f->mapping, &mapping)) < 0)
                        return r;
                if (f->function != FP_SB_NONE && (r = resolve_function(w, f, &function)) < 0)
                        return r;
                st = ST(s, FP_ST_FRAME_INSERT);
                sqlite3_bind_int64(st, 1, (int64_t)f->hash);
                sqlite3_bind_int64(st, 2, mapping);
                sqlite3_bind_int64(st, 3, function);
                sqlite3_bind_int64(st, 4, (int64_t)f->address);
                r = insert_row(s, st, &s->frames, f->hash, ret);
                if (r < 0)
                        return r;
        }
        w->frame_ids[i] = *ret;
        return 0;
}

static int insert_stack(struct writer *w, const struct fp_sb_stack *k, int64_t *ret)
{
        struct fp_store *s = w->s;
        size_t len = 0;
        sqlite3_stmt *st;
        int r;

        if (fp_sx_grow((void **)&w->blob, &w->blob_cap, (size_t)k->n * 10 + 1, 1) < 0)
                return fp_sx_failf(s, -ENOMEM, "Failed to store a stack: out of memory");
        for (uint32_t j = 0; j < k->n; j++) {
                int64_t id;
                r = resolve_frame(w, w->b->frame_ids[k->off + j], &id);
                if (r < 0)
                        return r;
                len += varint_put(w->blob + len, (uint64_t)id);
        }
        st = ST(s, FP_ST_STACK_INSERT);
        sqlite3_bind_int64(st, 1, (int64_t)k->hash);
        sqlite3_bind_int64(st, 2, w->bucket);
        sqlite3_bind_blob(st, 3, w->blob, (int)len, SQLITE_STATIC);
        CHECK_RC(s, step_done(st), "store a stack");
        *ret = sqlite3_last_insert_rowid(s->db);
        return 0;
}

/* The rowid of a stack the batch's samples use, marking it used by this bucket. */
static int resolve_stack(struct writer *w, uint32_t i)
{
        struct fp_store *s = w->s;
        const struct fp_sb_stack *k = &w->b->stacks[i];
        struct fp_sx_map_entry *e = fp_sx_map_get(&s->stacks, k->hash);
        sqlite3_stmt *st;
        int64_t id = 0;
        int r;

        if (e) {
                id = (int64_t)e->a;
                if ((int64_t)e->b != w->bucket) {
                        st = ST(s, FP_ST_STACK_TOUCH_ID);
                        sqlite3_bind_int64(st, 1, id);
                        sqlite3_bind_int64(st, 2, w->bucket);
                        CHECK_RC(s, step_done(st), "mark a stack used");
                        e->b = (uint64_t)w->bucket;
                }
                w->stack_ids[i] = id;
                return 0;
        }
        st = ST(s, FP_ST_STACK_TOUCH_HASH);
        sqlite3_bind_int64(st, 1, (int64_t)k->hash);
        sqlite3_bind_int64(st, 2, w->bucket);
        CHECK_RC(s, step_int(st, &id), "look up a stack");
        if (!id) {
                r = insert_stack(w, k, &id);
                if (r < 0)
                        return r;
        }
        cache_put(&s->stacks, k->hash, (uint64_t)id, (uint64_t)w->bucket);
        w->stack_ids[i] = id;
        return 0;
}

struct sample_ref {
        int64_t event, thread, stack;
        uint32_t idx;
};

static int sample_ref_cmp(const void *x, const void *y)
{
        const struct sample_ref *a = x, *b = y;

        if (a->event != b->event)
                return a->event < b->event ? -1 : 1;
        if (a->thread != b->thread)
                return a->thread < b->thread ? -1 : 1;
        if (a->stack != b->stack)
                return a->stack < b->stack ? -1 : 1;
        return 0;
}

static int write_samples(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;
        struct sample_ref *refs = NULL;
        struct fp_sx_map series = {0};
        sqlite3_stmt *st;
        int r = 0, rc;

        for (size_t i = 0; i < b->n_samples; i++) {
                uint32_t k = b->samples[i].stack;
                if (!w->stack_ids[k] && (r = resolve_stack(w, k)) < 0)
                        return r;
        }
        refs = calloc(b->n_samples ? b->n_samples : 1, sizeof(*refs));
        if (!refs)
                return fp_sx_failf(s, -ENOMEM, "Failed to store samples: out of memory");
        for (size_t i = 0; i < b->n_samples; i++) {
                const struct fp_sb_sample *sa = &b->samples[i];
                refs[i] = (struct sample_ref){w->event_ids[sa->event], w->thread_ids[sa->thread],
                                              w->stack_ids[sa->stack], (uint32_t)i};
        }
        /* Key order: the samples tree grows at its end only. */
        qsort(refs, b->n_samples, sizeof(*refs), sample_ref_cmp);
        st = fp_st(s, FP_ST_SAMPLE_INSERT);
        if (!st) {
                r = -EIO;
                goto out;
        }
        sqlite3_bind_int64(st, 1, w->bucket);
        for (size_t i = 0; i < b->n_samples; i++) {
                const struct fp_sb_sample *sa = &b->samples[refs[i].idx];
                uint32_t target = b->threads[sa->thread].target;
                uint64_t key = ((uint64_t)target << 32 | sa->event) + 1;
                struct fp_sx_map_entry *e;

                sqlite3_bind_int64(st, 2, refs[i].event);
                sqlite3_bind_int64(st, 3, refs[i].thread);
                sqlite3_bind_int64(st, 4, refs[i].stack);
                sqlite3_bind_int64(st, 5, (int64_t)sa->count);
                sqlite3_bind_int64(st, 6, (int64_t)sa->value);
                rc = step_done(st);
                if (rc != SQLITE_OK) {
                        r = fp_sx_fail(s, rc, "store samples");
                        goto out;
                }
                e = fp_sx_map_get(&series, key);
                if (e) {
                        e->a += sa->count;
                        e->b += sa->value;
                } else if (fp_sx_map_put(&series, key, sa->count, sa->value) < 0) {
                        r = fp_sx_failf(s, -ENOMEM, "Failed to store samples: out of memory");
                        goto out;
                }
        }
        st = fp_st(s, FP_ST_SERIES_INSERT);
        if (!st) {
                r = -EIO;
                goto out;
        }
        for (size_t i = 0; i < series.cap; i++) {
                const struct fp_sx_map_entry *e = &series.e[i];
                uint64_t key = e->key - 1;
                if (!e->key)
                        continue;
                sqlite3_bind_int64(st, 1, w->bucket);
                sqlite3_bind_int64(st, 2, w->target_ids[key >> 32]);
                sqlite3_bind_int64(st, 3, w->event_ids[(uint32_t)key]);
                sqlite3_bind_int64(st, 4, e->a > INT64_MAX ? INT64_MAX : (int64_t)e->a);
                sqlite3_bind_int64(st, 5, e->b > INT64_MAX ? INT64_MAX : (int64_t)e->b);
                rc = step_done(st);
                if (rc != SQLITE_OK) {
                        r = fp_sx_fail(s, rc, "store sample totals");
                        goto out;
                }
        }
out:
        free(refs);
        fp_sx_map_free(&series);
        return r;
}

static int write_drops(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;

        for (size_t i = 0; i < b->n_drops; i++) {
                const struct fp_sb_drop *d = &b->drops[i];
                sqlite3_stmt *st = ST(s, FP_ST_DROP_ADD);

                sqlite3_bind_int64(st, 1, w->bucket);
                sqlite3_bind_int64(st, 2, w->target_ids[d->target]);
                bind_text(st, 3, fp_sb_str(b, d->reason));
                sqlite3_bind_int64(st, 4, (int64_t)d->count);
                CHECK_RC(s, step_done(st), "store drop counts");
        }
        return 0;
}

/* Moves carried_drops into bucket. */
static int fold_carried(struct fp_store *s, int64_t bucket)
{
        sqlite3_stmt *st = ST(s, FP_ST_CARRY_TOUCH_TARGETS);

        sqlite3_bind_int64(st, 1, bucket);
        CHECK_RC(s, step_done(st), "carry drop counts");
        st = ST(s, FP_ST_CARRY_FOLD);
        sqlite3_bind_int64(st, 1, bucket);
        CHECK_RC(s, step_done(st), "carry drop counts");
        CHECK_RC(s, step_done(ST(s, FP_ST_CARRY_CLEAR)), "carry drop counts");
        return 0;
}

static int write_bucket(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;
        int64_t now = fp_sx_now_ns();
        sqlite3_stmt *st = ST(s, FP_ST_BUCKET_INSERT);
        int r;

        sqlite3_bind_int64(st, 1, b->start_ns);
        sqlite3_bind_int64(st, 2, b->length_ns);
        sqlite3_bind_int64(st, 3, now);
        if (b->uploaded)
                sqlite3_bind_int64(st, 4, now);
        else
                sqlite3_bind_null(st, 4);
        CHECK_RC(s, step_done(st), "store a bucket");
        w->bucket = sqlite3_last_insert_rowid(s->db);

        if ((r = write_targets(w)) < 0 || (r = write_samples(w)) < 0 || (r = write_drops(w)) < 0)
                return r;
        /* Drops of evicted or rejected buckets: reported with this one. */
        return fold_carried(s, w->bucket);
}

static void writer_free(struct writer *w)
{
        free(w->target_ids);
        free(w->event_ids);
        free(w->thread_ids);
        free(w->stack_ids);
        free(w->frame_ids);
        free(w->mapping_ids);
        free(w->blob);
}

static int64_t *ids_new(size_t n)
{
        return calloc(n ? n : 1, sizeof(int64_t));
}

int fp_store_write_batch(struct fp_store *s, const struct fp_store_batch *b)
{
        struct writer w = {.s = s, .b = b};
        bool full;
        int r, rc;

        s->errmsg[0] = '\0';
        w.target_ids = ids_new(b->n_targets);
        w.event_ids = ids_new(b->n_events);
        w.thread_ids = ids_new(b->n_threads);
        w.stack_ids = ids_new(b->n_stacks);
        w.frame_ids = ids_new(b->n_frames);
        w.mapping_ids = ids_new(b->n_mappings);
        if (!w.target_ids || !w.event_ids || !w.thread_ids || !w.stack_ids || !w.frame_ids ||
            !w.mapping_ids) {
                writer_free(&w);
                return fp_sx_failf(s, -ENOMEM, "Failed to write a bucket: out of memory");
        }
        r = begin(s);
        if (r == 0) {
                r = write_bucket(&w);
                if (r == 0)
                        r = commit(s);
                if (r < 0)
                        rollback(s);
        }
        writer_free(&w);
        if (r == -ENOSPC) {
                make_room(s);
                return r;
        }
        if (r < 0)
                return r;
        /*
         * Committed. Now the budget: eviction failing here is retried at the
         * next write. A checkpoint that found the disk full means the next
         * write would not fit: make room now.
         */
        (void)fp_store_evict(s, &full);
        rc = fp_store_reclaim(s, false);
        if (full || (rc & 0xff) == SQLITE_FULL || fp_sx_errno(s->db, rc) == -ENOSPC)
                make_room(s);
        s->errmsg[0] = '\0';
        return 0;
}

/* ---- upload state ---- */

int fp_store_pending_uploads(struct fp_store *s, struct fp_store_bucket *ret, size_t max)
{
        sqlite3_stmt *st = ST(s, FP_ST_PENDING);
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
                return fp_sx_fail(s, rc, "list buckets to upload");
        return (int)n;
}

int fp_store_count_pending(struct fp_store *s)
{
        int64_t n;

        CHECK_RC(s, step_int(ST(s, FP_ST_COUNT_PENDING), &n), "count buckets to upload");
        return n > INT32_MAX ? INT32_MAX : (int)n;
}

static int mark(struct fp_store *s, const int64_t *ids, size_t n, bool rejected)
{
        int64_t now = fp_sx_now_ns();
        int marked = 0, r;

        if (n && !ids)
                return -EINVAL;
        r = begin(s);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r == 0; i++) {
                sqlite3_stmt *st = fp_st(s, FP_ST_BUCKET_PENDING);
                int64_t pending = 0;
                int rc;

                if (!st) {
                        r = -EIO;
                        break;
                }
                sqlite3_bind_int64(st, 1, ids[i]);
                rc = step_int(st, &pending);
                if (rc != SQLITE_OK) {
                        r = fp_sx_fail(s, rc, "mark buckets uploaded");
                        break;
                }
                if (rejected && pending && (r = carry(s, ids[i], "upload_rejected")) < 0)
                        break;
                st = fp_st(s, FP_ST_MARK_UPLOADED);
                if (!st) {
                        r = -EIO;
                        break;
                }
                sqlite3_bind_int64(st, 1, ids[i]);
                sqlite3_bind_int64(st, 2, now);
                rc = step_done(st);
                if (rc != SQLITE_OK) {
                        r = fp_sx_fail(s, rc, "mark buckets uploaded");
                        break;
                }
                marked += sqlite3_changes(s->db);
        }
        if (r == 0)
                r = commit(s);
        if (r < 0) {
                rollback(s);
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
