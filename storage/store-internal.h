/* SPDX-License-Identifier: MIT */
/*
 * The inside of the store module, shared by its files: batch.c (the plain
 * data batch and its builder), hash.c (in-memory tables), schema.c (the
 * schema, opening, creating, checking and moving aside damaged files, the
 * statement table, transactions), store.c (writing a batch), ring.c
 * (eviction, garbage collection, space, disk full, upload state) and
 * query.c (profiles, series, drops, statistics). Nothing outside storage/ includes
 * this header.
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
 *   function         = step(SEED_FUNCTION, bytes(SEED_STRING, name))
 *   mapping          = step(... step(SEED_MAPPING, bytes(file)), bytes(build_id),
 *                      start, limit, offset)
 *   frame            = step(step(step(SEED_FRAME, mapping or 0), function or 0), address)
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

/* ---- hashing (on-disk format, see above) ---- */

#define FP_SX_K0            0xa0761d6478bd642fULL
#define FP_SX_K1            0xe7037ed1a0b428dbULL
#define FP_SX_SEED_STRING   0x8ebc6af09c88c6e3ULL
#define FP_SX_SEED_FUNCTION 0x589965cc75374cc3ULL
#define FP_SX_SEED_MAPPING  0x1d8e4e27c47d124fULL
#define FP_SX_SEED_FRAME    0x72be5d74f27b896fULL
#define FP_SX_SEED_STACK    0x2d358dccaa6c78a5ULL
#define FP_SX_SEED_OTHER    0x4b33a62ed433d4a3ULL /* in-memory keys only */

static inline uint64_t fp_sx_step(uint64_t h, uint64_t v)
{
        __uint128_t r = (__uint128_t)(h ^ v ^ FP_SX_K0) * FP_SX_K1;
        return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t fp_sx_hash_bytes(uint64_t h, const void *data, size_t len)
{
        const unsigned char *d = data;
        uint64_t w;
        size_t n = len;

        for (; n >= 8; d += 8, n -= 8) {
                memcpy(&w, d, 8);
                h = fp_sx_step(h, le64toh(w));
        }
        if (n) {
                w = 0;
                for (size_t i = 0; i < n; i++)
                        w |= (uint64_t)d[i] << (8 * i);
                h = fp_sx_step(h, w);
        }
        return fp_sx_step(h, (uint64_t)len);
}

static inline uint64_t fp_sx_hash_str(const char *s, size_t len)
{
        return fp_sx_hash_bytes(FP_SX_SEED_STRING, s, len);
}

static inline uint64_t fp_sx_nonzero(uint64_t h)
{
        return h ? h : 1;
}

/* ---- growing arrays ---- */

/* Grows *p (elements of elem bytes, capacity *cap) to hold need; 0 or -ENOMEM. */
int fp_sx_grow(void **p, size_t *cap, size_t need, size_t elem);

/* ---- an index over an array kept elsewhere (the batch's interning) ---- */

/*
 * Open addressing, linear probing, at most half full. A slot holds the
 * top 32 bits of the entry's hash (which also pick its position) and its
 * array index + 1; 0 is empty. Callers compare contents themselves.
 */
struct fp_sx_index {
        uint64_t *slots;
        size_t cap; /* a power of two, or 0 */
        size_t n;
};

typedef bool (*fp_sx_eq_fn)(const void *ctx, uint32_t idx, const void *key);

/* The index of an entry equal to key, or -1. */
int64_t fp_sx_index_find(const struct fp_sx_index *x, uint64_t hash, fp_sx_eq_fn eq,
                         const void *ctx, const void *key);
/* Adds idx (not yet present) under hash; 0 or -ENOMEM. */
int fp_sx_index_add(struct fp_sx_index *x, uint64_t hash, uint32_t idx);
void fp_sx_index_free(struct fp_sx_index *x);

/* ---- a map from nonzero 64-bit keys to two 64-bit values ---- */

struct fp_sx_map_entry {
        uint64_t key; /* 0: empty */
        uint64_t a, b;
};

struct fp_sx_map {
        struct fp_sx_map_entry *e;
        size_t cap; /* a power of two, or 0 */
        size_t n;
};

struct fp_sx_map_entry *fp_sx_map_get(const struct fp_sx_map *m, uint64_t key);
/* Inserts or overwrites key (nonzero); 0 or -ENOMEM. */
int fp_sx_map_put(struct fp_sx_map *m, uint64_t key, uint64_t a, uint64_t b);
/* Keeps the entries for which keep() is true; 0 or -ENOMEM (the map is then empty). */
int fp_sx_map_filter(struct fp_sx_map *m, bool (*keep)(const struct fp_sx_map_entry *e, void *ud),
                     void *ud);
void fp_sx_map_clear(struct fp_sx_map *m);
void fp_sx_map_free(struct fp_sx_map *m);

/* ---- the batch ---- */

#define FP_SB_NONE   UINT32_MAX /* "no string" / "no mapping" / "no function" */
#define FP_SB_RECENT 16         /* mappings the batch builder remembers */

struct fp_sb_str {
        uint32_t off; /* into chars, NUL-terminated */
        uint32_t len;
        uint64_t hash; /* fp_sx_hash_str() */
};

struct fp_sb_target {
        uint32_t host, comm, exe, config; /* string indices */
        pid_t pid;
        bool active;
        uint64_t starttime;
        uint64_t hash;
};

struct fp_sb_event {
        uint32_t name, count_type, count_unit, value_type, value_unit;
        uint32_t period_type, period_unit; /* FP_SB_NONE: no period */
        int64_t period;
        uint64_t hash;
};

struct fp_sb_mapping {
        uint32_t file, build_id;
        uint64_t start, limit, offset;
        uint64_t hash; /* content hash (on disk) */
};

struct fp_sb_frame {
        uint32_t mapping;  /* FP_SB_NONE or a mapping index */
        uint32_t function; /* FP_SB_NONE or a string index: the function's name */
        uint64_t address;
        uint64_t function_hash; /* content hash of the function, 0 when none */
        uint64_t hash;          /* content hash (on disk) */
};

struct fp_sb_stack {
        uint32_t off; /* into frame_ids */
        uint32_t n;
        uint64_t hash; /* content hash (on disk) */
};

struct fp_sb_thread {
        uint32_t target;
        pid_t tid;
        uint32_t name;
        uint64_t hash;
};

struct fp_sb_sample {
        uint32_t thread, event, stack;
        uint64_t count, value;
        uint64_t hash;
};

struct fp_sb_drop {
        uint32_t target, reason;
        uint64_t count;
        uint64_t hash;
};

#define FP_SB_TABLE(type, name)                                                                    \
        type *name;                                                                                \
        size_t n_##name, cap_##name;                                                               \
        struct fp_sx_index idx_##name

struct fp_store_batch {
        int64_t start_ns, length_ns;
        bool uploaded;
        char *key; /* idempotency key (fp_store_batch_set_key()), NULL: none */
        char *chars;
        size_t n_chars, cap_chars;
        FP_SB_TABLE(struct fp_sb_str, strs);
        FP_SB_TABLE(struct fp_sb_target, targets);
        FP_SB_TABLE(struct fp_sb_event, events);
        FP_SB_TABLE(struct fp_sb_mapping, mappings);
        FP_SB_TABLE(struct fp_sb_frame, frames);
        FP_SB_TABLE(struct fp_sb_stack, stacks);
        FP_SB_TABLE(struct fp_sb_thread, threads);
        FP_SB_TABLE(struct fp_sb_sample, samples);
        FP_SB_TABLE(struct fp_sb_drop, drops);
        uint32_t *frame_ids; /* the stacks' frames, leaf first */
        size_t n_frame_ids, cap_frame_ids;
        uint32_t recent_mappings[FP_SB_RECENT]; /* mapping index + 1, by start and limit */
};

static inline const char *fp_sb_str(const struct fp_store_batch *b, uint32_t i)
{
        return i == FP_SB_NONE ? NULL : b->chars + b->strs[i].off;
}

/* ---- the store ---- */

/* Cached prepared statements; their SQL is in schema.c. */
enum fp_st {
        FP_ST_BEGIN,
        FP_ST_COMMIT,
        FP_ST_ROLLBACK,
        FP_ST_PAGE_COUNT,
        FP_ST_FREELIST_COUNT,
        FP_ST_BUCKET_INSERT,
        FP_ST_HOST_UPSERT,
        FP_ST_TARGET_UPSERT,
        FP_ST_EVENT_UPSERT,
        FP_ST_THREAD_UPSERT,
        FP_ST_MAPPING_FIND,
        FP_ST_MAPPING_INSERT,
        FP_ST_FUNCTION_FIND,
        FP_ST_FUNCTION_INSERT,
        FP_ST_FRAME_FIND,
        FP_ST_FRAME_INSERT,
        FP_ST_STACK_TOUCH_ID,
        FP_ST_STACK_TOUCH_HASH,
        FP_ST_STACK_INSERT,
        FP_ST_SAMPLE_INSERT,
        FP_ST_SERIES_INSERT,
        FP_ST_DROP_ADD,
        FP_ST_CARRY_FOLD,
        FP_ST_CARRY_CLEAR,
        FP_ST_CARRY_TOUCH_TARGETS,
        FP_ST_OLDEST_BUCKET,
        FP_ST_CARRY_SAMPLES,
        FP_ST_CARRY_DROPS,
        FP_ST_DELETE_SAMPLES,
        FP_ST_DELETE_DROPS,
        FP_ST_DELETE_SERIES,
        FP_ST_DELETE_BUCKET,
        FP_ST_MIN_BUCKET,
        FP_ST_GC_STACKS,
        FP_ST_GC_THREADS,
        FP_ST_GC_TARGETS,
        FP_ST_GC_HOSTS,
        FP_ST_MARK_UPLOADED,
        FP_ST_BUCKET_PENDING,
        FP_ST_PENDING,
        FP_ST_COUNT_PENDING,
        FP_ST_KEY_FIND,
        FP_ST_KEY_INSERT,
        FP_ST_DELETE_KEYS,
        FP_ST_EXPIRED,
        FP_ST__MAX
};

struct fp_store {
        sqlite3 *db;
        char *path, *wal_path;
        bool readonly;
        uint64_t max_bytes; /* as opened, 0: no budget */
        uint64_t budget;    /* in force: max_bytes, lowered after ENOSPC */
        int64_t page_size;
        sqlite3_stmt *st[FP_ST__MAX];
        /* content hash -> rowid (a) [, last bucket (b) for stacks]; only committed rows */
        struct fp_sx_map stacks, frames, functions, mappings;
        uint64_t stacks_gone; /* stacks deleted since the last frame sweep */
        /* What a write takes, learnt from the last ones: new live pages, and its log. */
        uint64_t est_growth, est_log;
        uint64_t evicted_buckets;
        unsigned read_depth; /* nested read transactions (query.c) */
        char errmsg[512];
};

/* The log is truncated past this when there is no budget (else past a quarter of it). */
#define FP_STORE_WAL_LIMIT ((uint64_t)16 << 20)

/* How long a statement waits for another connection's lock. */
#define FP_STORE_BUSY_MS 2000

/* Caps of the caches above: past them a cache starts over (it is only a cache). */
#define FP_STORE_CACHE_MAX ((size_t)1 << 18)

/* The cached statement id, prepared on first use; NULL with errmsg set on failure. */
sqlite3_stmt *fp_st(struct fp_store *s, enum fp_st id);

/*
 * Records a SQLite failure: errmsg becomes "Failed to <what>: <SQLite's
 * message>" and the return value is the -errno for rc (see store.h).
 */
int fp_sx_fail(struct fp_store *s, int rc, const char *what);
/* Records another failure with a formatted message; returns r. */
int fp_sx_failf(struct fp_store *s, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The -errno for a SQLite result code, consulting the system errno for I/O errors. */
int fp_sx_errno(sqlite3 *db, int rc);

/* Runs a statement with no result rows (or ignores them); SQLite rc. */
int fp_sx_exec(sqlite3 *db, const char *sql);
/* The single integer result of sql, or -errno. */
int fp_sx_pragma_int(struct fp_store *s, const char *sql, int64_t *ret);

/* ---- small SQLite helpers (store.c, ring.c) ---- */

/* Steps st to completion (ignoring rows) and resets it; SQLite rc. */
static inline int fp_sx_step_done(sqlite3_stmt *st)
{
        int rc;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                ;
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Steps st expecting one integer row, or none (*ret = 0); resets it; SQLite rc. */
static inline int fp_sx_step_int(sqlite3_stmt *st, int64_t *ret)
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
                sqlite3_stmt *st_ = fp_st((s), (id));                                              \
                if (!st_)                                                                          \
                        return -EIO;                                                               \
                st_;                                                                               \
        })

/* Returns from the calling function with the store's message for rc unless it is SQLITE_OK. */
#define CHECK_RC(s, rc, what)                                                                      \
        do {                                                                                       \
                int rc_ = (rc);                                                                    \
                if (rc_ != SQLITE_OK)                                                              \
                        return fp_sx_fail((s), rc_, (what));                                       \
        } while (0)

/* Runs a cached one-integer statement; SQLite rc. */
static inline int fp_sx_st_int(struct fp_store *s, enum fp_st id, int64_t *ret)
{
        sqlite3_stmt *st = fp_st(s, id);

        *ret = 0;
        return st ? fp_sx_step_int(st, ret) : SQLITE_ERROR;
}

/* Bytes of pages in use: (page_count - freelist_count) * page_size; *ret_rc the SQLite rc. */
static inline int64_t fp_sx_live_bytes(struct fp_store *s, int *ret_rc)
{
        int64_t pages = 0, free_pages = 0;
        int rc = fp_sx_st_int(s, FP_ST_PAGE_COUNT, &pages);

        if (rc == SQLITE_OK)
                rc = fp_sx_st_int(s, FP_ST_FREELIST_COUNT, &free_pages);
        *ret_rc = rc;
        return (pages - free_pages) * s->page_size;
}

/* schema.c: BEGIN IMMEDIATE (-EROFS on a read-only handle), COMMIT. */
int fp_sx_begin(struct fp_store *s);
int fp_sx_commit(struct fp_store *s);
/* schema.c: rolls back whatever is open and empties the caches (they may name rows it took away).
 */
void fp_sx_rollback(struct fp_store *s);
void fp_sx_caches_clear(struct fp_store *s);

/* ---- the ring (ring.c), used by the writer (store.c) ---- */

/*
 * Evicts the oldest buckets, one transaction each, until the live pages
 * plus reserve fit the budget in force; *ret_disk_full tells whether a
 * checkpoint between the steps found the disk full.
 */
int fp_store_evict(struct fp_store *s, uint64_t reserve, bool *ret_disk_full);
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
int fp_sx_checkpoint(struct fp_store *s, int mode, int *ret_log);
/* Room a write needs within the budget: what the last writes added and logged. */
uint64_t fp_sx_write_reserve(const struct fp_store *s);
/* After -ENOSPC: lowers the budget, empties the log (breaking out of a full one), evicts. */
void fp_sx_make_room(struct fp_store *s);
