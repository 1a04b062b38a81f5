/* SPDX-License-Identifier: MIT */
/*
 * The inside of the store module, shared by its files: db.c (the
 * connection core: errors, the statement cache, transactions), schema.c
 * (the schema and its statements' SQL, opening, creating, migrating,
 * checking and moving aside damaged files), batch.c (the plain data batch
 * and its builder), hash.c (in-memory tables), store.c (writing a batch),
 * ring.c (eviction, garbage collection, space, disk full, upload state),
 * query.c (series, drops, statistics, and the read helpers) and profile.c
 * (a merged pprof profile from the store). Nothing outside storage/
 * includes this header.
 *
 * Content hashes. Mappings, functions, frames and stacks are deduplicated
 * across buckets by a 64-bit hash of their content, stored on disk in
 * their tables' `hash` columns. The hash is therefore part of the file
 * format: it must never change without a schema version bump. It is
 * computed from little-endian words, so it is the same on every machine:
 *
 *   bytes(seed, s)   = for each 8-byte little-endian word w of s (the last
 *                      one zero-padded): h = step(h, w); then
 *                      h = step(h, length)
 *   function         = step(SEED_FUNCTION, bytes(SEED_STRING, name)), then
 *                      h = step(h, bytes(system_name) ^ 1) when it has one
 *                      and h = step(h, bytes(filename) ^ 2) when it has one
 *   mapping          = step(... step(SEED_MAPPING, bytes(file)), bytes(build_id),
 *                      start, limit, offset)
 *   frame            = step(step(step(SEED_FRAME, mapping or 0), function or 0), address),
 *                      then h = step(h, line) when it has one
 *   stack            = step(... step(SEED_STACK, n), frame_1) ..., frame_n)
 *   step(h, v)       = mum(h ^ v ^ K0, K1), mum(a, b) = lo(a*b) ^ hi(a*b) (128-bit product)
 *
 * and a hash of 0 is replaced by 1. Two different contents with one hash
 * would share a row; at 64 bits that takes billions of rows to be likely.
 */
#pragma once

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sqlite3.h>

#include "store.h"
#include "util.h"

/* ---- hashing (on-disk format, see above) ---- */

#define FP_STORE_HASH_K0       0xa0761d6478bd642fULL
#define FP_STORE_HASH_K1       0xe7037ed1a0b428dbULL
#define FP_STORE_SEED_STRING   0x8ebc6af09c88c6e3ULL
#define FP_STORE_SEED_FUNCTION 0x589965cc75374cc3ULL
#define FP_STORE_SEED_MAPPING  0x1d8e4e27c47d124fULL
#define FP_STORE_SEED_FRAME    0x72be5d74f27b896fULL
#define FP_STORE_SEED_STACK    0x2d358dccaa6c78a5ULL
#define FP_STORE_SEED_OTHER    0x4b33a62ed433d4a3ULL /* in-memory keys only */

static inline uint64_t fp_store_hash_step(uint64_t h, uint64_t v)
{
        __uint128_t r = (__uint128_t)(h ^ v ^ FP_STORE_HASH_K0) * FP_STORE_HASH_K1;
        return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t fp_store_hash_bytes(uint64_t h, const void *data, size_t len)
{
        const unsigned char *d = data;
        uint64_t w;
        size_t n = len;

        for (; n >= 8; d += 8, n -= 8) {
                memcpy(&w, d, 8);
                h = fp_store_hash_step(h, le64toh(w));
        }
        if (n) {
                w = 0;
                for (size_t i = 0; i < n; i++)
                        w |= (uint64_t)d[i] << (8 * i);
                h = fp_store_hash_step(h, w);
        }
        return fp_store_hash_step(h, (uint64_t)len);
}

static inline uint64_t fp_store_hash_str(const char *s, size_t len)
{
        return fp_store_hash_bytes(FP_STORE_SEED_STRING, s, len);
}

static inline uint64_t fp_store_hash_nonzero(uint64_t h)
{
        return h ? h : 1;
}

/* ---- growing arrays ---- */

/* ---- an index over an array kept elsewhere (the batch's interning) ---- */

/*
 * Open addressing, linear probing, at most half full. A slot holds the
 * top 32 bits of the entry's hash (which also pick its position) and its
 * array index + 1; 0 is empty. Callers compare contents themselves.
 */
struct fp_store_index {
        uint64_t *slots;
        size_t cap; /* a power of two, or 0 */
        size_t n;
};

typedef bool (*fp_store_eq_fn)(const void *ctx, uint32_t idx, const void *key);

/* The index of an entry equal to key, or -1. */
int64_t fp_store_index_find(const struct fp_store_index *x, uint64_t hash, fp_store_eq_fn eq,
                            const void *ctx, const void *key);
/* Adds idx (not yet present) under hash; 0 or -ENOMEM. */
int fp_store_index_add(struct fp_store_index *x, uint64_t hash, uint32_t idx);
void fp_store_index_free(struct fp_store_index *x);

/* ---- a map from nonzero 64-bit keys to two 64-bit values ---- */

struct fp_store_map_entry {
        uint64_t key; /* 0: empty */
        uint64_t a, b;
};

struct fp_store_map {
        struct fp_store_map_entry *e;
        size_t cap; /* a power of two, or 0 */
        size_t n;
};

struct fp_store_map_entry *fp_store_map_get(const struct fp_store_map *m, uint64_t key);
/* Inserts or overwrites key (nonzero); 0 or -ENOMEM. */
int fp_store_map_put(struct fp_store_map *m, uint64_t key, uint64_t a, uint64_t b);
/* Keeps the entries for which keep() is true; 0 or -ENOMEM (the map is then empty). */
int fp_store_map_filter(struct fp_store_map *m,
                        bool (*keep)(const struct fp_store_map_entry *e, void *ud), void *ud);
void fp_store_map_clear(struct fp_store_map *m);
void fp_store_map_free(struct fp_store_map *m);

/* ---- the batch ---- */

#define FP_BATCH_NONE   UINT32_MAX /* "no string" / "no mapping" / "no function" */
#define FP_BATCH_RECENT 16         /* mappings the batch builder remembers */

struct fp_batch_string {
        uint32_t off; /* into chars, NUL-terminated */
        uint32_t len;
        uint64_t hash; /* fp_store_hash_str() */
};

struct fp_batch_target {
        uint32_t host, comm, exe, config, service, container; /* string indices */
        uint32_t series_event; /* event index + 1 (fp_store_batch_set_series()), 0: none */
        pid_t pid;
        bool active;
        int64_t guard; /* -1: not known */
        uint64_t starttime;
        uint64_t hash;
};

struct fp_batch_event {
        uint32_t name, count_type, count_unit, value_type, value_unit;
        uint32_t period_type, period_unit; /* FP_BATCH_NONE: no period */
        int64_t period;
        uint64_t hash;
};

struct fp_batch_mapping {
        uint32_t file, build_id;
        uint64_t start, limit, offset;
        uint64_t vaddr1; /* the ELF address start holds, plus one; 0: unknown (not in the hash) */
        uint64_t hash;   /* content hash (on disk) */
};

struct fp_batch_frame {
        uint32_t mapping;  /* FP_BATCH_NONE or a mapping index */
        uint32_t function; /* FP_BATCH_NONE or a string index: the function's name */
        /* The function's system name and file: FP_BATCH_NONE when none (or no function). */
        uint32_t system_name, filename;
        int64_t line; /* 0: none */
        uint64_t address;
        uint64_t function_hash; /* content hash of the function, 0 when none */
        uint64_t hash;          /* content hash (on disk) */
};

struct fp_batch_stack {
        uint32_t off; /* into frame_ids */
        uint32_t n;
        uint64_t hash; /* content hash (on disk) */
};

struct fp_batch_thread {
        uint32_t target;
        pid_t tid;
        uint32_t name;
        uint32_t wait; /* string: "" unless an off-CPU sample's */
        uint64_t hash;
};

struct fp_batch_sample {
        uint32_t thread, event, stack;
        uint64_t count, value;
        uint64_t hash;
};

struct fp_batch_drop {
        uint32_t target, reason;
        uint64_t count;
        uint64_t hash;
};

#define FP_BATCH_TABLE(type, name)                                                                 \
        type *name;                                                                                \
        size_t n_##name, cap_##name;                                                               \
        struct fp_store_index idx_##name

struct fp_store_batch {
        int64_t start_ns, length_ns;
        bool uploaded;
        char *key;                 /* idempotency key (fp_store_batch_set_key()), NULL: none */
        struct fp_store_cost cost; /* the profiler's own cost over the bucket */
        char *chars;
        size_t n_chars, cap_chars;
        FP_BATCH_TABLE(struct fp_batch_string, strs);
        FP_BATCH_TABLE(struct fp_batch_target, targets);
        FP_BATCH_TABLE(struct fp_batch_event, events);
        FP_BATCH_TABLE(struct fp_batch_mapping, mappings);
        FP_BATCH_TABLE(struct fp_batch_frame, frames);
        FP_BATCH_TABLE(struct fp_batch_stack, stacks);
        FP_BATCH_TABLE(struct fp_batch_thread, threads);
        FP_BATCH_TABLE(struct fp_batch_sample, samples);
        FP_BATCH_TABLE(struct fp_batch_drop, drops);
        uint32_t *frame_ids; /* the stacks' frames, leaf first */
        size_t n_frame_ids, cap_frame_ids;
        uint32_t recent_mappings[FP_BATCH_RECENT]; /* mapping index + 1, by start and limit */
};

static inline const char *fp_batch_str_at(const struct fp_store_batch *b, uint32_t i)
{
        return i == FP_BATCH_NONE ? NULL : b->chars + b->strs[i].off;
}

/* ---- the store ---- */

/* Cached prepared statements; their SQL is in schema.c. */
enum fp_store_stmt_id {
        FP_STMT_BEGIN,
        FP_STMT_COMMIT,
        FP_STMT_ROLLBACK,
        FP_STMT_PAGE_COUNT,
        FP_STMT_FREELIST_COUNT,
        FP_STMT_BUCKET_INSERT,
        FP_STMT_HOST_UPSERT,
        FP_STMT_TARGET_UPSERT,
        FP_STMT_EVENT_UPSERT,
        FP_STMT_THREAD_UPSERT,
        FP_STMT_MAPPING_FIND,
        FP_STMT_MAPPING_INSERT,
        FP_STMT_MAPPING_VADDR,
        FP_STMT_FUNCTION_FIND,
        FP_STMT_FUNCTION_INSERT,
        FP_STMT_FRAME_FIND,
        FP_STMT_FRAME_INSERT,
        FP_STMT_STACK_TOUCH_ID,
        FP_STMT_STACK_TOUCH_HASH,
        FP_STMT_STACK_INSERT,
        FP_STMT_SAMPLE_INSERT,
        FP_STMT_SERIES_INSERT,
        FP_STMT_DROP_ADD,
        FP_STMT_CARRY_FOLD,
        FP_STMT_CARRY_CLEAR,
        FP_STMT_CARRY_TOUCH_TARGETS,
        FP_STMT_OLDEST_BUCKET,
        FP_STMT_CARRY_SAMPLES,
        FP_STMT_CARRY_DROPS,
        FP_STMT_DELETE_SAMPLES,
        FP_STMT_DELETE_DROPS,
        FP_STMT_DELETE_SERIES,
        FP_STMT_DELETE_BUCKET,
        FP_STMT_MIN_BUCKET,
        FP_STMT_GC_STACKS,
        FP_STMT_GC_THREADS,
        FP_STMT_GC_TARGETS,
        FP_STMT_GC_HOSTS,
        FP_STMT_GC_COSTS,
        FP_STMT_MARK_UPLOADED,
        FP_STMT_BUCKET_PENDING,
        FP_STMT_PENDING,
        FP_STMT_COUNT_PENDING,
        FP_STMT_KEY_FIND,
        FP_STMT_KEY_INSERT,
        FP_STMT_DELETE_KEYS,
        FP_STMT_EXPIRED,
        FP_STMT_SERIES_SAMPLES_INSERT,
        FP_STMT_OUTBOX_INSERT,
        FP_STMT_OUTBOX_LIST,
        FP_STMT_OUTBOX_CHARGE,
        FP_STMT_OUTBOX_DELETE,
        FP_STMT_OUTBOX_OLDEST,
        FP_STMT_OUTBOX_EXPIRED,
        FP_STMT_ROLLUP_DIRTY,
        FP_STMT_ROLLUP_FORGET,
        FP_STMT_BUCKET_SERIES_LIST,
        FP_STMT__MAX
};

struct fp_store {
        sqlite3 *db;
        char *path, *wal_path;
        bool readonly;
        uint64_t max_bytes; /* as opened, 0: no budget */
        uint64_t budget;    /* in force: max_bytes, lowered after ENOSPC */
        int64_t page_size;
        sqlite3_stmt *st[FP_STMT__MAX];
        /* content hash -> rowid (a) [, last bucket (b) for stacks]; only committed rows */
        struct fp_store_map stacks, frames, functions, mappings;
        uint64_t stacks_gone; /* stacks deleted since the last frame sweep */
        int64_t exact_bucket; /* the last bucket collect_exact() (ring.c) ran for */
        /* What a write takes, learnt from the last ones: new live pages, and its log. */
        uint64_t est_growth, est_log;
        uint64_t evicted_buckets;
        unsigned read_depth; /* nested read transactions (query.c) */
        int64_t deadline_ns; /* CLOCK_MONOTONIC past which statements stop; 0: none */
        bool rollups;        /* summaries kept (rollup.c): writes mark what they change */
        bool rollups_unread; /* ... but neither read nor made (fp_store_set_rollup_reads()) */
        char errmsg[512];
};

/* The filter's WHERE clause over targets t, hosts h and buckets b: parameters ?1 to ?9,
 * ?11 to ?13 (fp_store_bind_filter()). */
#define FILTER_TARGETS                                                                             \
        "(?1 IS NULL OR h.name = ?1) AND (?2 = 0 OR t.pid = ?2) AND (?3 = 0 OR t.starttime = ?3)"  \
        " AND (?4 IS NULL OR t.comm = ?4) AND (?9 IS NULL OR t.service = ?9)"                      \
        " AND (?11 = 0 OR (t.pid = 0) = (?11 = 1)) AND (?12 IS NULL OR t.container = ?12)"         \
        " AND (?13 IS NULL OR instr(' ' || t.config || ' ', ' ' || ?13 || ' ') > 0)"
#define FILTER_BUCKETS                                                                             \
        "(?5 = 0 OR b.start_ns + b.length_ns > ?5) AND (?6 = 0 OR b.start_ns < ?6)"                \
        " AND (?7 = 0 OR b.id >= ?7) AND (?8 = 0 OR b.id <= ?8)"

/* Buckets that start at or after ?14 (0: any), beside FILTER_BUCKETS (fp_store_filter's
 * start_from_ns). */
#define FILTER_START "(?14 = 0 OR b.start_ns >= ?14)"
/*
 * Beside FILTER_BUCKETS, of a range with both ends (since_ns, until_ns
 * set): the buckets that can reach into it, by start: from ?15 (since_ns)
 * less the longest bucket (buckets_by_length), to until_ns. It lets SQLite
 * find them by buckets_by_start, where FILTER_BUCKETS' terms that a zero
 * turns off cannot; a query of all time is better served without it.
 */
#define FILTER_REACH                                                                               \
        "b.start_ns >= ?15 - (SELECT ifnull(max(length_ns), 0) FROM buckets) AND b.start_ns < ?6"

/*
 * Summaries (rollup.c): the samples of one series (target, event) over an
 * hour or a day of bucket starts, merged.
 */
#define FP_STORE_HOUR_NS     (3600LL * 1000000000LL)
#define FP_STORE_HOUR_NS_SQL "3600000000000" /* the same, in SQL text */
#define FP_STORE_DAY_NS      (24 * FP_STORE_HOUR_NS)
/*
 * Inside the caller's write transaction: the hour and the day of start_ns
 * of series (target, event) changed: their summaries go, and they are
 * marked to be summarised again. Only when s->rollups.
 */
int fp_store_rollup_touch(struct fp_store *s, int64_t target, int64_t event, int64_t start_ns);
/* The same for every series of a bucket about to be deleted. */
int fp_store_rollup_touch_bucket(struct fp_store *s, int64_t bucket);
/*
 * Whether a read of f takes summaries (profile.c, query.c): a collector's
 * store, a closed range of buckets by time only, holding a whole hour.
 * Then the whole hours [h0, h1) and the whole days [d0, d1) inside it
 * (d1 == d0: none).
 */
struct fp_store_span {
        int64_t h0, h1, d0, d1;
};
static inline bool fp_store_rollup_range(const struct fp_store *s, const struct fp_store_filter *f,
                                         struct fp_store_span *ret)
{
        struct fp_store_span r = {
            .h0 = (f->since_ns + FP_STORE_HOUR_NS - 1) / FP_STORE_HOUR_NS * FP_STORE_HOUR_NS,
            .h1 = f->until_ns / FP_STORE_HOUR_NS * FP_STORE_HOUR_NS,
        };

        r.d0 = (r.h0 + FP_STORE_DAY_NS - 1) / FP_STORE_DAY_NS * FP_STORE_DAY_NS;
        r.d1 = r.h1 / FP_STORE_DAY_NS * FP_STORE_DAY_NS;
        if (r.d1 < r.d0)
                r.d1 = r.d0;
        *ret = r;
        return s->rollups && !s->rollups_unread && f->since_ns > 0 && f->until_ns > 0 &&
               r.h1 > r.h0 && !f->bucket_min && !f->bucket_max && !f->start_from_ns;
}

/* Binds f to a statement whose WHERE clause holds FILTER_TARGETS and FILTER_BUCKETS. */
void fp_store_bind_filter(sqlite3_stmt *st, const struct fp_store_filter *f);
/* Column i as text, "" for NULL. */
const char *fp_store_col_text(sqlite3_stmt *st, int i);
/* A read transaction (nested reads share the outermost); -errno. */
int fp_store_read_begin(struct fp_store *s);
void fp_store_read_end(struct fp_store *s);
/* The drop totals rows for f, inside the caller's read transaction; rows or -errno. */
int fp_store_drop_rows(struct fp_store *s, const struct fp_store_filter *f, fp_store_drop_fn fn,
                       void *userdata);
/*
 * Inside the caller's transaction: deletes outbox upload id, first adding
 * its samples to carried_drops as reason (NULL: nothing counted). outbox.c.
 */
int fp_store_outbox_charge_delete(struct fp_store *s, int64_t id, const char *reason);
/*
 * The samples of one series in one bucket, encoded as bucket_series
 * samples are stored (samples.c describes the format). Entries must be
 * sorted by (thread, stack), each pair once.
 */
struct fp_store_sample {
        uint32_t thread, stack; /* row ids */
        uint64_t count, value;
};
typedef int (*fp_store_sample_fn)(void *userdata, const struct fp_store_sample *e);
/* 0 with *ret malloc'd, -EINVAL (not sorted) or -ENOMEM. */
int fp_store_samples_encode(const struct fp_store_sample *v, size_t n, uint8_t **ret,
                            size_t *ret_len);
/* Calls fn for each entry; -EBADMSG for a damaged value, or fn's error. */
int fp_store_samples_decode(const uint8_t *data, size_t len, fp_store_sample_fn fn, void *userdata);
/*
 * ---- a merged profile's parts, the same whichever store it comes from
 * (profile.c; clickhouse.c uses them too) ----
 */
struct fp_pprof;
struct fp_pprof_label;

#define FP_STORE_SAMPLE_LABELS 9
/*
 * A merged sample's labels into out (FP_STORE_SAMPLE_LABELS of room):
 * thread, thread_name ("?" when ""), wait when not "" (an off-CPU sample's
 * reason), pid, process ("?" when ""), host when
 * host is not NULL (the selection spans hosts), service and container when
 * not "", and exe for a host tier's series (pid 0: its executable is part
 * of what it is). Returns how many.
 */
size_t fp_store_sample_labels(struct fp_pprof_label *out, pid_t tid, const char *thread_name,
                              const char *wait, pid_t pid, const char *comm, const char *host,
                              const char *service, const char *container, const char *exe);
/*
 * Gives p (without sample types) an event's two sample types (count type,
 * unit, value type, unit) and its period (period_type "": none), or checks
 * them against p's: -EINVAL with *ret_differ set when they differ, or the
 * pprof's -errno.
 */
int fp_store_profile_types(struct fp_pprof *p, const char *const types[4], const char *period_type,
                           const char *period_unit, int64_t period, bool *ret_differ);
/* Widens p's time and duration to cover [start_ns, end_ns) as well. */
void fp_store_profile_widen_time(struct fp_pprof *p, int64_t start_ns, int64_t end_ns);
/*
 * Drop counts summed per reason (fp_store_reasons_add() is an
 * fp_store_drop_fn), then written into a profile as one "dropped <reason>:
 * <count>" comment each, by reason (fp_store_reasons_comment(), which also
 * frees them). 0 or -errno.
 */
struct fp_store_reasons {
        struct fp_store_reason_sum *v;
        size_t n, cap;
};
int fp_store_reasons_add(void *userdata, const struct fp_store_drop *d);
int fp_store_reasons_comment(struct fp_store_reasons *rs, struct fp_pprof *p);

/* Prepares an uncached statement; -errno with errmsg set. */
int fp_store_prepare(struct fp_store *s, const char *sql, sqlite3_stmt **ret);

/* The log is truncated past this when there is no budget (else past a quarter of it). */
#define FP_STORE_WAL_LIMIT ((uint64_t)16 << 20)

/* How long a statement waits for another connection's lock. */
#define FP_STORE_BUSY_MS 2000

/* Caps of the caches above: past them a cache starts over (it is only a cache). */
#define FP_STORE_CACHE_MAX ((size_t)1 << 18)
/*
 * How many buckets a stack's stored last_bucket may lag behind the newest
 * bucket that uses it (store.c); eviction keeps stacks whose last_bucket
 * is at most this much older than the oldest bucket (ring.c), so a lag
 * never loses a stack a bucket still uses. Part of the format: a store
 * written with a larger slack must not be collected with a smaller one.
 */
#define FP_STORE_TOUCH_SLACK 64

/* The SQL of every cached statement (schema.c: it names the schema's tables). */
extern const char *const fp_store_stmt_sql[FP_STMT__MAX];
/* The cached statement id, prepared on first use; NULL with errmsg set on failure. */
sqlite3_stmt *fp_store_stmt(struct fp_store *s, enum fp_store_stmt_id id);

/*
 * Records a SQLite failure: errmsg becomes "Failed to <what>: <SQLite's
 * message>" and the return value is the -errno for rc (see store.h).
 */
int fp_store_db_fail(struct fp_store *s, int rc, const char *what);
/* Records another failure with a formatted message; returns r. */
int fp_store_db_failf(struct fp_store *s, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The -errno for a SQLite result code, consulting the system errno for I/O errors. */
int fp_store_db_errno(sqlite3 *db, int rc);

/* Runs a statement with no result rows (or ignores them); SQLite rc. */
int fp_store_db_exec(sqlite3 *db, const char *sql);
/* The single integer result of sql, or -errno. */
int fp_store_db_pragma_int(struct fp_store *s, const char *sql, int64_t *ret);

/* ---- small SQLite helpers (store.c, ring.c) ---- */

/* Steps st to completion (ignoring rows) and resets it; SQLite rc. */
static inline int fp_store_db_step_done(sqlite3_stmt *st)
{
        int rc;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                ;
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Steps st expecting one integer row, or none (*ret = 0); resets it; SQLite rc. */
static inline int fp_store_db_step_int(sqlite3_stmt *st, int64_t *ret)
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

/* The cached statement id, or return -EIO from the calling function (errmsg is set). */
#define ST(s, id)                                                                                  \
        ({                                                                                         \
                sqlite3_stmt *st_ = fp_store_stmt((s), (id));                                      \
                if (!st_)                                                                          \
                        return -EIO;                                                               \
                st_;                                                                               \
        })

/* Returns from the calling function with the store's message for rc unless it is SQLITE_OK. */
#define CHECK_RC(s, rc, what)                                                                      \
        do {                                                                                       \
                int rc_ = (rc);                                                                    \
                if (rc_ != SQLITE_OK)                                                              \
                        return fp_store_db_fail((s), rc_, (what));                                 \
        } while (0)

/* Runs a cached one-integer statement; SQLite rc. */
static inline int fp_store_db_stmt_int(struct fp_store *s, enum fp_store_stmt_id id, int64_t *ret)
{
        sqlite3_stmt *st = fp_store_stmt(s, id);

        *ret = 0;
        return st ? fp_store_db_step_int(st, ret) : SQLITE_ERROR;
}

/* Bytes of pages in use: (page_count - freelist_count) * page_size; *ret_rc the SQLite rc. */
static inline int64_t fp_store_live_bytes(struct fp_store *s, int *ret_rc)
{
        int64_t pages = 0, free_pages = 0;
        int rc = fp_store_db_stmt_int(s, FP_STMT_PAGE_COUNT, &pages);

        if (rc == SQLITE_OK)
                rc = fp_store_db_stmt_int(s, FP_STMT_FREELIST_COUNT, &free_pages);
        *ret_rc = rc;
        return (pages - free_pages) * s->page_size;
}

/* schema.c: BEGIN IMMEDIATE (-EROFS on a read-only handle), COMMIT. */
int fp_store_db_begin(struct fp_store *s);
int fp_store_db_commit(struct fp_store *s);
/* schema.c: rolls back whatever is open and empties the caches (they may name rows it took away).
 */
void fp_store_db_rollback(struct fp_store *s);
void fp_store_caches_clear(struct fp_store *s);

/* ---- the ring (ring.c), used by the writer (store.c) ---- */

/*
 * Evicts the oldest buckets, one transaction each, until the live pages
 * plus reserve fit the budget in force, leaving the newest when
 * keep_newest; *ret_disk_full tells whether a checkpoint between the steps
 * found the disk full.
 */
int fp_store_evict(struct fp_store *s, uint64_t reserve, bool keep_newest, bool *ret_disk_full);
/* Whether the disk was found full: a write's -ENOSPC set the budget in force (it is max_bytes till
 * then). */
static inline bool fp_store_disk_was_full(const struct fp_store *s)
{
        return s->budget != s->max_bytes;
}
/* fp_store_evict() to the budget, then fp_store_reclaim(s, true). */
int fp_store_shrink(struct fp_store *s);
/*
 * Hands free pages past what the next write will fill back to the file
 * system and checkpoints the log, truncating it when there is a budget or
 * it grew large (force: all free pages, always truncate). Best effort;
 * returns the checkpoint's SQLite rc.
 */
int fp_store_reclaim(struct fp_store *s, bool force);
/* Checkpoints in mode; TRUNCATE never waits for readers. SQLite rc, *ret_log frames in the log. */
int fp_store_db_checkpoint(struct fp_store *s, int mode, int *ret_log);
/* Room a write needs within the budget: what the last writes added and logged. */
uint64_t fp_store_write_reserve(const struct fp_store *s);
/* After -ENOSPC: lowers the budget, empties the log (breaking out of a full one), evicts. */
void fp_store_make_room(struct fp_store *s);
