/* SPDX-License-Identifier: MIT */
/*
 * The store's on-disk format, and opening a store: creating, checking,
 * migrating, and moving aside files that are damaged.
 *
 * ==== Schema, version 4 (PRAGMA user_version = 4) ====
 *
 * One SQLite file (PRAGMA application_id = 0x46505354, "FPST") in WAL mode,
 * synchronous=NORMAL, auto_vacuum=INCREMENTAL (set at creation: free pages
 * are handed back with PRAGMA incremental_vacuum), 4 KiB pages. Times are
 * CLOCK_REALTIME nanoseconds; 64-bit unsigned quantities (addresses,
 * hashes) are stored as the signed integer of the same bits. References
 * are kept by this library, not by FOREIGN KEY constraints (which would
 * cost a lookup per row written); "-> t" below names the table a column
 * refers to.
 *
 * hosts          id INTEGER PRIMARY KEY, name TEXT UNIQUE
 *                  A machine: the agent's own hostname, or each host the
 *                  collector ingests from.
 * targets        id INTEGER PRIMARY KEY, host_id -> hosts, pid, starttime,
 *                comm, exe, config, active, first_ns, last_ns, last_bucket,
 *                service, guard, container
 *                                     UNIQUE (host_id, pid, starttime)
 *                INDEX (service) WHERE service != ''
 *                  service: the name under which the successive processes
 *                  an agent's rule matched are merged ('' for a process
 *                  profiled by PID). container: the container a host
 *                  tier's series ran in ('' for none).
 *                  A profiled process: pid plus /proc/PID/stat starttime
 *                  tell apart reuses of a pid. config is the agent's text
 *                  for how it samples the target (event list, frequency
 *                  or period, kernel flag) and active whether it still did
 *                  when the newest bucket naming it closed: a restarted
 *                  agent resumes active targets that still run. first_ns
 *                  and last_ns span the buckets that named it;
 *                  last_bucket is the newest of them (for GC). guard: the
 *                  uid the agent keeps it profiled for across execs (0:
 *                  root asked, none), -1 when not known.
 * events         id INTEGER PRIMARY KEY, name, count_type, count_unit,
 *                value_type, value_unit, period_type, period_unit, period
 *                UNIQUE over all columns but id
 *                  A sampling event and the pprof sample types of its two
 *                  values ('' period_type: no period). A counter that rode
 *                  in a sampling event's perf group is an event of its own
 *                  (no period): count is the samples of the group's leader,
 *                  value what the counter counted in them.
 * threads        id INTEGER PRIMARY KEY, target_id -> targets, tid, name,
 *                last_bucket, wait    UNIQUE (target_id, tid, name, wait)
 *                  A thread under one name (a renamed thread gets a row
 *                  per name), and, for off-CPU samples, why it waited
 *                  (wait: sleep, uninterruptible, runqueue; '' for the
 *                  rest): a sample's labels come from its thread's row.
 * mappings       id INTEGER PRIMARY KEY, hash UNIQUE, file, build_id,
 *                memory_start, memory_limit, file_offset, vaddr1
 *                  vaddr1: the ELF address memory_start holds, plus one
 *                  (0: unknown; not in the hash: an older agent's copy of
 *                  the mapping gets it from a newer one's)
 * functions      id INTEGER PRIMARY KEY, hash UNIQUE, name, system_name,
 *                filename
 *                  system_name: the name as the code carries it when it
 *                  differs (a mangled symbol); filename: its source file
 *                  (a Python function's); '' when none.
 * frames         id INTEGER PRIMARY KEY, mapping_id -> mappings (0: none),
 *                function_id -> functions (0: none), offset, line
 *                UNIQUE (mapping_id, offset, function_id, line)
 *                  offset: the address less its mapping's memory_start
 *                  (the address itself without a mapping), so that it
 *                  takes a few bytes; the unique index is the frame's key
 *                  (no content hash is stored: the writer looks a frame
 *                  up by its mapping's and function's ids).
 *                  A pprof location: a code address in a mapping, with the
 *                  function it symbolized to.
 * stacks         id INTEGER PRIMARY KEY, hash UNIQUE, last_bucket,
 *                frames BLOB         INDEX (last_bucket)
 *                  frames is the stack's frame ids, leaf first, each an
 *                  unsigned LEB128 varint. last_bucket is the newest
 *                  bucket with a sample of this stack, or at most
 *                  FP_STORE_TOUCH_SLACK buckets older (see Eviction).
 *                  The four tables above are deduplicated across buckets
 *                  by content hash (store-internal.h defines it: it is part
 *                  of this format).
 * buckets        id INTEGER PRIMARY KEY AUTOINCREMENT, start_ns, length_ns,
 *                written_ns, uploaded_ns (NULL: not uploaded yet),
 *                agent_cpu_ns, agent_rss, host_cpus (0: unknown)
 *                INDEX (id) WHERE uploaded_ns IS NULL
 *                  One written batch: the time range [start_ns, start_ns +
 *                  length_ns). Ids grow in write order and are never
 *                  reused. This is the per-bucket upload state.
 * bucket_series  bucket_id -> buckets, target_id -> targets, event_id ->
 *                events, count, value       PRIMARY KEY (all three ids)
 *                  Sums of the bucket's samples per target and event: what
 *                  series listings, eviction accounting and queries use
 *                  without reading samples.
 * series_samples bucket_id -> buckets, target_id -> targets, event_id ->
 *                events, data       PRIMARY KEY (all three ids)
 *                  The bucket's samples of one target and event, as one
 *                  value: entries (thread -> threads, stack -> stacks,
 *                  count, value) sorted by thread and stack, delta- and
 *                  varint-coded in columns and deflated (samples.c has
 *                  the format). count samples of this stack in this
 *                  thread, whose values (e.g. nanoseconds) sum to value.
 *                  Why not a row per entry, as version 1 had: a row with
 *                  its key costs 10 to 12 bytes in SQLite's b-tree; an
 *                  entry here costs 1.4 (store-bench: 99 Hz, 100 threads,
 *                  23,000 entries per bucket), every read wants all the
 *                  entries of a series anyway, and one insert per series
 *                  is cheaper than thousands. Per-thread detail is kept.
 * drops          bucket_id -> buckets, target_id -> targets, reason, count
 *                PRIMARY KEY (bucket_id, target_id, reason), WITHOUT ROWID
 *                  What was lost, by reason (store.h lists them).
 * ingest_keys    key TEXT PRIMARY KEY, bucket_id -> buckets
 *                INDEX (bucket_id), WITHOUT ROWID
 *                  The idempotency key of each bucket written with one
 *                  (the collector: an agent's Idempotency-Key), so a
 *                  retried upload is stored once. A key lives as long as
 *                  its bucket. Created by any read-write open when missing
 *                  (added after version 1 shipped; older builds ignore it).
 * carried_drops  target_id -> targets, reason, count
 *                PRIMARY KEY (target_id, reason), WITHOUT ROWID
 *                  Drops of buckets that were evicted before upload or
 *                  rejected by the collector, waiting for the next bucket:
 *                  writing a bucket moves them into its drops (in the same
 *                  transaction), so they are uploaded with it. A bucket
 *                  the uploader may already have read is never changed.
 *
 * Eviction. The budget covers the database file and its log. Before a
 * bucket is written, the oldest buckets but the newest are evicted until
 * the live pages ((page_count - freelist_count) * page_size) plus what a
 * write takes (the live pages and the log the last writes added, learnt
 * as they happen, at most half the budget) fit; after the commit, until
 * the live pages alone fit. So a reader never finds the store empty
 * between making room and writing (once the disk was found full, the
 * newest goes too if it must). A bucket goes with its samples, drops and series rows,
 * in a transaction of its own followed by a checkpoint (so the log holds
 * one step, never all of them). If it had not been uploaded, each of
 * its targets' sample count (of the target's busiest event) is added to
 * carried_drops as "evicted", and so are the bucket's own drops. Then
 * threads whose last_bucket is older than the oldest surviving bucket are
 * deleted, stacks whose last_bucket is older than that by more than
 * FP_STORE_TOUCH_SLACK buckets (a stack's last_bucket is refreshed only
 * when it lags by more than that: one UPDATE per stack per 64 buckets
 * instead of one per bucket), and so are targets (unless carried_drops
 * or the outbox refers to them) and hosts nothing refers to. Uploads in
 * the outbox hold data older than any bucket not yet uploaded (rounds
 * take the oldest): once the oldest bucket is one of those, the oldest
 * upload goes first, its samples added to carried_drops as "evicted"; so
 * do uploads whose data is older than the retention. Frames, functions and
 * mappings are swept (mark and sweep from the stacks' frame lists) when a
 * quarter of the stacks went since the last sweep, or before the last
 * bucket would go. Before the last bucket goes for room, the stacks
 * no surviving sample refers to are deleted exactly (the slack keeps
 * stacks of evicted buckets that could crowd it out), once per bucket,
 * unless the disk was found full (that transaction would not fit).
 * Free pages beyond what the next write will fill are
 * handed back (incremental_vacuum), and the log is checkpointed and
 * truncated after every write. A bucket larger than the budget evicts
 * itself: its samples are counted, nothing else is kept.
 *
 * Disk full. A write that fails for space (-ENOSPC) is rolled back; the
 * budget in force drops to 80% of the live pages and the store evicts to
 * it. A checkpoint that cannot grow the database file leaves the log
 * full; then the store deletes the oldest buckets with no collection and
 * vacuums just enough that the database ends inside its file, so that the
 * checkpoint needs no new space. When even that finds no room, writes fail
 * with -ENOSPC, and nothing is damaged, until space is freed.
 *
 * outbox         id INTEGER PRIMARY KEY, key, target_id -> targets, event,
 *                bucket_min, bucket_max, from_ns, to_ns, samples, counter,
 *                created_ns, query, body
 *                  Uploads built from buckets and not yet delivered (the
 *                  agent's; store.h says how they come and go): the
 *                  idempotency key, the upload's query string and gzip
 *                  pprof body, fixed once built; the buckets they came
 *                  from, their time range and sample count (charged as a
 *                  drop if the upload is refused or evicted).
 *
 * host_costs     host_id -> hosts, from_ns, to_ns, agent_cpu_ns, agent_rss,
 *                host_cpus     PRIMARY KEY (host_id, from_ns, to_ns)
 *                  What profiling cost a host over a range (the
 *                  collector's: each upload of an agent's round carries the
 *                  round's cost; they meet in one row). Deleted with their
 *                  host, or once older than every bucket.
 * rules          id INTEGER PRIMARY KEY, owner (uid), spec, created_ns
 *                  The agent's rules added with agentctl (not those of its
 *                  configuration file), resumed by a restarted agent. spec
 *                  is the rule as its start request (agent/rule.h owns
 *                  the text). The collector leaves this table empty.
 * rollups        id INTEGER PRIMARY KEY, span_ns, start_ns, target_id ->
 *                targets, event_id -> events, first_ns, last_ns, buckets,
 *                count, value, data
 *                UNIQUE (span_ns, start_ns, target_id, event_id)
 *                  A summary (a collector's store, rollup.c): the samples
 *                  of one series over the buckets that start in [start_ns,
 *                  start_ns + span_ns), an hour or a day (UTC), merged per
 *                  (thread, stack) and encoded as series_samples' data;
 *                  first_ns and last_ns span those buckets, count and
 *                  value sum them. A day's is made from its hours'.
 * rollup_dirty   span_ns, start_ns, target_id, event_id    PRIMARY KEY (all)
 *                  An hour or day of a series whose buckets changed (a
 *                  write, an eviction) since it was summarised: its
 *                  summary is gone, and it is summarised again once the
 *                  hour or day has ended (a day once its hours have).
 *                  Marked in the transaction that changes the buckets, so
 *                  a crash between the two leaves the mark.
 *                A series' hour is thus summarised, marked, or without
 *                buckets; a day's summary stands for its hours'.
 *
 * Versions. A file whose user_version is this build's is used as is; an
 * older one is migrated step by step in one transaction (1 -> 2: the
 * outbox is added and the samples table's rows are encoded into
 * series_samples; 2 -> 3: targets gain their service, and rules come; 3 -> 4:
 * buckets gain the agent's cost; 4 -> 5: targets gain their guard; ... 9 -> 10: buckets are
 * indexed by start, and summaries come, every hour and day of the buckets marked); a newer one, or
 * a file of another application, is refused with -EPROTO, and so is an older one opened read-only.
 * A file that is not a database or fails PRAGMA quick_check at open is renamed to
 * PATH.corrupt-UNIXTIME (with its -wal and -shm) and a new store created.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store-internal.h"
#include "util.h"

#define FP_STORE_APP_ID 0x46505354 /* "FPST" */

static const char schema_v1[] =
    "CREATE TABLE hosts ("
    " id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL UNIQUE);"
    "CREATE TABLE targets ("
    " id INTEGER PRIMARY KEY,"
    " host_id INTEGER NOT NULL,"
    " pid INTEGER NOT NULL,"
    " starttime INTEGER NOT NULL,"
    " comm TEXT NOT NULL,"
    " exe TEXT NOT NULL,"
    " config TEXT NOT NULL,"
    " active INTEGER NOT NULL,"
    " first_ns INTEGER NOT NULL,"
    " last_ns INTEGER NOT NULL,"
    " last_bucket INTEGER NOT NULL,"
    " UNIQUE (host_id, pid, starttime));"
    "CREATE TABLE events ("
    " id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " count_type TEXT NOT NULL,"
    " count_unit TEXT NOT NULL,"
    " value_type TEXT NOT NULL,"
    " value_unit TEXT NOT NULL,"
    " period_type TEXT NOT NULL,"
    " period_unit TEXT NOT NULL,"
    " period INTEGER NOT NULL,"
    " UNIQUE (name, count_type, count_unit, value_type, value_unit, period_type,"
    "         period_unit, period));"
    "CREATE TABLE threads ("
    " id INTEGER PRIMARY KEY,"
    " target_id INTEGER NOT NULL,"
    " tid INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " last_bucket INTEGER NOT NULL,"
    " UNIQUE (target_id, tid, name));"
    "CREATE TABLE mappings ("
    " id INTEGER PRIMARY KEY,"
    " hash INTEGER NOT NULL UNIQUE,"
    " file TEXT NOT NULL,"
    " build_id TEXT NOT NULL,"
    " memory_start INTEGER NOT NULL,"
    " memory_limit INTEGER NOT NULL,"
    " file_offset INTEGER NOT NULL);"
    "CREATE TABLE functions ("
    " id INTEGER PRIMARY KEY,"
    " hash INTEGER NOT NULL UNIQUE,"
    " name TEXT NOT NULL);"
    "CREATE TABLE frames ("
    " id INTEGER PRIMARY KEY,"
    " hash INTEGER NOT NULL UNIQUE,"
    " mapping_id INTEGER NOT NULL,"
    " function_id INTEGER NOT NULL,"
    " address INTEGER NOT NULL);"
    "CREATE TABLE stacks ("
    " id INTEGER PRIMARY KEY,"
    " hash INTEGER NOT NULL UNIQUE,"
    " last_bucket INTEGER NOT NULL,"
    " frames BLOB NOT NULL);"
    "CREATE INDEX stacks_by_last_bucket ON stacks (last_bucket);"
    "CREATE TABLE buckets ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " start_ns INTEGER NOT NULL,"
    " length_ns INTEGER NOT NULL,"
    " written_ns INTEGER NOT NULL,"
    " uploaded_ns INTEGER);"
    "CREATE INDEX buckets_pending ON buckets (id) WHERE uploaded_ns IS NULL;"
    "CREATE TABLE bucket_series ("
    " bucket_id INTEGER NOT NULL,"
    " target_id INTEGER NOT NULL,"
    " event_id INTEGER NOT NULL,"
    " count INTEGER NOT NULL,"
    " value INTEGER NOT NULL,"
    " PRIMARY KEY (bucket_id, target_id, event_id)) WITHOUT ROWID;"
    "CREATE TABLE samples ("
    " bucket_id INTEGER NOT NULL,"
    " event_id INTEGER NOT NULL,"
    " thread_id INTEGER NOT NULL,"
    " stack_id INTEGER NOT NULL,"
    " count INTEGER NOT NULL,"
    " value INTEGER NOT NULL,"
    " PRIMARY KEY (bucket_id, event_id, thread_id, stack_id)) WITHOUT ROWID;"
    "CREATE TABLE drops ("
    " bucket_id INTEGER NOT NULL,"
    " target_id INTEGER NOT NULL,"
    " reason TEXT NOT NULL,"
    " count INTEGER NOT NULL,"
    " PRIMARY KEY (bucket_id, target_id, reason)) WITHOUT ROWID;"
    "CREATE TABLE carried_drops ("
    " target_id INTEGER NOT NULL,"
    " reason TEXT NOT NULL,"
    " count INTEGER NOT NULL,"
    " PRIMARY KEY (target_id, reason)) WITHOUT ROWID;";

/*
 * Version 1 kept one row per (bucket, event, thread, stack) in samples;
 * version 2 keeps one encoded value per (bucket, target, event) in
 * series_samples. Converts every bucket's rows, inside the migration's
 * transaction. 0 or -errno.
 */
static int convert_samples(struct fp_store *s)
{
        static const char sql[] =
            "SELECT sa.bucket_id, th.target_id, sa.event_id, sa.thread_id, sa.stack_id,"
            " sa.count, sa.value FROM samples sa JOIN threads th ON th.id = sa.thread_id"
            " ORDER BY 1, 2, 3, 4, 5";
        sqlite3_stmt *st = NULL, *ins = NULL;
        struct fp_store_sample *v = NULL;
        size_t n = 0, cap = 0;
        int64_t key[3] = {0, 0, 0};
        int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL), r = 0;

        if (rc == SQLITE_OK)
                rc = sqlite3_prepare_v2(s->db,
                                        "INSERT INTO series_samples (bucket_id, target_id,"
                                        " event_id, data) VALUES (?1, ?2, ?3, ?4)",
                                        -1, &ins, NULL);
        for (bool more = rc == SQLITE_OK; more && r == 0;) {
                int64_t row[3] = {0, 0, 0};
                rc = sqlite3_step(st);
                more = rc == SQLITE_ROW;
                if (more)
                        for (int i = 0; i < 3; i++)
                                row[i] = sqlite3_column_int64(st, i);
                if (n && (!more || memcmp(row, key, sizeof(key)) != 0)) {
                        /* A series is complete: encode and insert it. */
                        uint8_t *data = NULL;
                        size_t len = 0;
                        r = fp_store_samples_encode(v, n, &data, &len);
                        if (r < 0)
                                break;
                        for (int i = 0; i < 3; i++)
                                sqlite3_bind_int64(ins, i + 1, key[i]);
                        sqlite3_bind_blob64(ins, 4, data, len, free);
                        if ((rc = fp_store_db_step_done(ins)) != SQLITE_OK)
                                break;
                        n = 0;
                }
                if (!more)
                        break;
                memcpy(key, row, sizeof(key));
                int64_t thread = sqlite3_column_int64(st, 3), stack = sqlite3_column_int64(st, 4);
                if (thread <= 0 || stack <= 0 || thread > UINT32_MAX || stack > UINT32_MAX) {
                        r = -EOVERFLOW;
                        break;
                }
                if (fp_grow((void **)&v, &cap, n + 1, sizeof(*v)) < 0) {
                        r = -ENOMEM;
                        break;
                }
                v[n++] = (struct fp_store_sample){(uint32_t)thread, (uint32_t)stack,
                                                  (uint64_t)sqlite3_column_int64(st, 5),
                                                  (uint64_t)sqlite3_column_int64(st, 6)};
        }
        if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_OK)
                r = fp_store_db_errno(s->db, rc) ?: -EIO;
        sqlite3_finalize(st);
        sqlite3_finalize(ins);
        free(v);
        return r;
}

/*
 * Migrations: migrations[v - 1] turns schema v into v + 1: SQL, then a
 * conversion in C (or none), then SQL again. A new file gets version 1
 * and then every migration, so both paths give the same schema.
 */
static const struct {
        const char *before;
        int (*convert)(struct fp_store *s);
        const char *after;
} migrations[] = {
    /* 1 -> 2: the outbox; samples encoded per series. */
    {"CREATE TABLE outbox ("
     " id INTEGER PRIMARY KEY,"
     " key TEXT NOT NULL,"
     " target_id INTEGER,"
     " event TEXT NOT NULL,"
     " bucket_min INTEGER NOT NULL,"
     " bucket_max INTEGER NOT NULL,"
     " from_ns INTEGER NOT NULL,"
     " to_ns INTEGER NOT NULL,"
     " samples INTEGER NOT NULL,"
     " counter INTEGER NOT NULL,"
     " created_ns INTEGER NOT NULL,"
     " query TEXT NOT NULL,"
     " body BLOB NOT NULL);"
     "CREATE TABLE series_samples ("
     " bucket_id INTEGER NOT NULL,"
     " target_id INTEGER NOT NULL,"
     " event_id INTEGER NOT NULL,"
     " data BLOB NOT NULL,"
     " PRIMARY KEY (bucket_id, target_id, event_id));",
     convert_samples, "DROP TABLE samples;"},
    /* 2 -> 3: targets belong to a service; the agent's rules. */
    {"ALTER TABLE targets ADD COLUMN service TEXT NOT NULL DEFAULT '';"
     "CREATE INDEX targets_by_service ON targets (service) WHERE service != '';"
     "CREATE TABLE rules ("
     " id INTEGER PRIMARY KEY,"
     " owner INTEGER NOT NULL,"
     " spec TEXT NOT NULL,"
     " created_ns INTEGER NOT NULL);",
     NULL, NULL},
    /* 3 -> 4: what profiling cost the host, per bucket. */
    {"ALTER TABLE buckets ADD COLUMN agent_cpu_ns INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE buckets ADD COLUMN agent_rss INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE buckets ADD COLUMN host_cpus INTEGER NOT NULL DEFAULT 0;"
     "CREATE TABLE host_costs ("
     " host_id INTEGER NOT NULL,"
     " from_ns INTEGER NOT NULL,"
     " to_ns INTEGER NOT NULL,"
     " agent_cpu_ns INTEGER NOT NULL,"
     " agent_rss INTEGER NOT NULL,"
     " host_cpus INTEGER NOT NULL,"
     " PRIMARY KEY (host_id, from_ns, to_ns)) WITHOUT ROWID;",
     NULL, NULL},
    /* 4 -> 5: whom a target is profiled for. */
    {"ALTER TABLE targets ADD COLUMN guard INTEGER NOT NULL DEFAULT -1;", NULL, NULL},
    /* 5 -> 6: the container a host tier's series ran in. */
    {"ALTER TABLE targets ADD COLUMN container TEXT NOT NULL DEFAULT '';", NULL, NULL},
    /* 6 -> 7: frames keyed by place, their addresses relative to their mapping (smaller). */
    {"CREATE TABLE frames_v7 ("
     " id INTEGER PRIMARY KEY,"
     " mapping_id INTEGER NOT NULL,"
     " offset INTEGER NOT NULL,"
     " function_id INTEGER NOT NULL);"
     "INSERT INTO frames_v7 (id, mapping_id, offset, function_id)"
     " SELECT f.id, f.mapping_id, f.address - coalesce(m.memory_start, 0), f.function_id"
     " FROM frames f LEFT JOIN mappings m ON m.id = f.mapping_id;"
     "DROP TABLE frames;"
     "ALTER TABLE frames_v7 RENAME TO frames;"
     "CREATE UNIQUE INDEX frames_by_place ON frames (mapping_id, offset, function_id);",
     NULL, NULL},
    /* 7 -> 8: off-CPU samples say why their thread waited. */
    {"CREATE TABLE threads_v8 ("
     " id INTEGER PRIMARY KEY,"
     " target_id INTEGER NOT NULL,"
     " tid INTEGER NOT NULL,"
     " name TEXT NOT NULL,"
     " last_bucket INTEGER NOT NULL,"
     " wait TEXT NOT NULL DEFAULT '',"
     " UNIQUE (target_id, tid, name, wait));"
     "INSERT INTO threads_v8 (id, target_id, tid, name, last_bucket)"
     " SELECT id, target_id, tid, name, last_bucket FROM threads;"
     "DROP TABLE threads;"
     "ALTER TABLE threads_v8 RENAME TO threads;",
     NULL, NULL},
    /* 8 -> 9: a function's system name (mangled) and source file; a frame's line. */
    {"ALTER TABLE functions ADD COLUMN system_name TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE functions ADD COLUMN filename TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE frames ADD COLUMN line INTEGER NOT NULL DEFAULT 0;"
     "DROP INDEX frames_by_place;"
     "CREATE UNIQUE INDEX frames_by_place ON frames (mapping_id, offset, function_id, line);",
     NULL, NULL},
    /* 9 -> 10: buckets found by time; summaries of each series' hours and days (rollup.c). */
    {"CREATE INDEX buckets_by_start ON buckets (start_ns);"
     "CREATE TABLE rollups ("
     " id INTEGER PRIMARY KEY,"
     " span_ns INTEGER NOT NULL,"
     " start_ns INTEGER NOT NULL,"
     " target_id INTEGER NOT NULL,"
     " event_id INTEGER NOT NULL,"
     " first_ns INTEGER NOT NULL,"
     " last_ns INTEGER NOT NULL,"
     " buckets INTEGER NOT NULL,"
     " count INTEGER NOT NULL,"
     " value INTEGER NOT NULL,"
     " data BLOB NOT NULL,"
     " UNIQUE (span_ns, start_ns, target_id, event_id));"
     "CREATE TABLE rollup_dirty ("
     " span_ns INTEGER NOT NULL,"
     " start_ns INTEGER NOT NULL,"
     " target_id INTEGER NOT NULL,"
     " event_id INTEGER NOT NULL,"
     " PRIMARY KEY (span_ns, start_ns, target_id, event_id)) WITHOUT ROWID;"
     "INSERT OR IGNORE INTO rollup_dirty SELECT 3600000000000, b.start_ns - b.start_ns % "
     "3600000000000,"
     " bs.target_id, bs.event_id FROM bucket_series bs JOIN buckets b ON b.id = bs.bucket_id;"
     "INSERT OR IGNORE INTO rollup_dirty SELECT 86400000000000,"
     " b.start_ns - b.start_ns % 86400000000000, bs.target_id, bs.event_id"
     " FROM bucket_series bs JOIN buckets b ON b.id = bs.bucket_id;",
     NULL, NULL},
    /* 10 -> 11: the longest bucket, found at once (FILTER_REACH). */
    {"CREATE INDEX buckets_by_length ON buckets (length_ns);", NULL, NULL},
    /* 11 -> 12: where a mapping's ELF addresses begin (a debug file names its frames). */
    {"ALTER TABLE mappings ADD COLUMN vaddr1 INTEGER NOT NULL DEFAULT 0;", NULL, NULL},
};
#define FP_STORE_OLDEST_MIGRATABLE 1

/* Runs migration step v -> v + 1; SQLite rc (a conversion's -errno becomes SQLITE_ERROR). */
static int migrate_step(struct fp_store *s, int v, int *ret_errno)
{
        int rc = fp_store_db_exec(s->db, migrations[v - 1].before);

        if (rc == SQLITE_OK && migrations[v - 1].convert) {
                int r = migrations[v - 1].convert(s);
                if (r < 0) {
                        *ret_errno = r;
                        return SQLITE_ERROR;
                }
        }
        if (rc == SQLITE_OK && migrations[v - 1].after)
                rc = fp_store_db_exec(s->db, migrations[v - 1].after);
        return rc;
}

const char *const fp_store_stmt_sql[FP_STMT__MAX] = {
    [FP_STMT_BEGIN] = "BEGIN IMMEDIATE",
    [FP_STMT_COMMIT] = "COMMIT",
    [FP_STMT_ROLLBACK] = "ROLLBACK",
    [FP_STMT_PAGE_COUNT] = "PRAGMA page_count",
    [FP_STMT_FREELIST_COUNT] = "PRAGMA freelist_count",
    [FP_STMT_BUCKET_INSERT] = "INSERT INTO buckets (start_ns, length_ns, written_ns, uploaded_ns,"
                              " agent_cpu_ns, agent_rss, host_cpus)"
                              " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [FP_STMT_HOST_UPSERT] = "INSERT INTO hosts (name) VALUES (?1) ON CONFLICT (name)"
                            " DO UPDATE SET name = excluded.name RETURNING id",
    [FP_STMT_TARGET_UPSERT] =
        "INSERT INTO targets (host_id, pid, starttime, comm, exe, config, active,"
        " first_ns, last_ns, last_bucket, service, guard, container)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
        " ON CONFLICT (host_id, pid, starttime) DO UPDATE SET"
        " guard = iif(excluded.last_ns >= last_ns, excluded.guard, guard),"
        " comm = iif(excluded.last_ns >= last_ns, excluded.comm, comm),"
        " service = iif(excluded.last_ns >= last_ns, excluded.service, service),"
        " container = iif(excluded.last_ns >= last_ns, excluded.container, container),"
        " exe = iif(excluded.last_ns >= last_ns, excluded.exe, exe),"
        " config = iif(excluded.last_ns >= last_ns, excluded.config, config),"
        " active = iif(excluded.last_ns >= last_ns, excluded.active, active),"
        " first_ns = min(first_ns, excluded.first_ns),"
        " last_ns = max(last_ns, excluded.last_ns),"
        " last_bucket = excluded.last_bucket RETURNING id",
    [FP_STMT_EVENT_UPSERT] =
        "INSERT INTO events (name, count_type, count_unit, value_type, value_unit,"
        " period_type, period_unit, period) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        " ON CONFLICT (name, count_type, count_unit, value_type, value_unit, period_type,"
        " period_unit, period) DO UPDATE SET name = excluded.name RETURNING id",
    [FP_STMT_THREAD_UPSERT] =
        "INSERT INTO threads (target_id, tid, name, last_bucket, wait)"
        " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (target_id, tid, name, wait)"
        " DO UPDATE SET last_bucket = excluded.last_bucket RETURNING id",
    [FP_STMT_MAPPING_FIND] = "SELECT id FROM mappings WHERE hash = ?1",
    [FP_STMT_MAPPING_INSERT] = "INSERT INTO mappings (hash, file, build_id, memory_start,"
                               " memory_limit, file_offset, vaddr1)"
                               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [FP_STMT_MAPPING_VADDR] = "UPDATE mappings SET vaddr1 = ?2 WHERE id = ?1 AND vaddr1 = 0",
    [FP_STMT_FUNCTION_FIND] = "SELECT id FROM functions WHERE hash = ?1",
    [FP_STMT_FUNCTION_INSERT] = "INSERT INTO functions (hash, name, system_name, filename)"
                                " VALUES (?1, ?2, ?3, ?4)",
    [FP_STMT_FRAME_FIND] = "SELECT id FROM frames WHERE mapping_id = ?1 AND offset = ?2"
                           " AND function_id = ?3 AND line = ?4",
    [FP_STMT_FRAME_INSERT] = "INSERT INTO frames (mapping_id, offset, function_id, line)"
                             " VALUES (?1, ?2, ?3, ?4)",
    [FP_STMT_STACK_TOUCH_ID] = "UPDATE stacks SET last_bucket = ?2 WHERE id = ?1",
    [FP_STMT_STACK_TOUCH_HASH] = "UPDATE stacks SET last_bucket = ?2 WHERE hash = ?1 RETURNING id",
    [FP_STMT_STACK_INSERT] = "INSERT INTO stacks (hash, last_bucket, frames) VALUES (?1, ?2, ?3)",
    [FP_STMT_SERIES_SAMPLES_INSERT] = "INSERT INTO series_samples (bucket_id, target_id,"
                                      " event_id, data) VALUES (?1, ?2, ?3, ?4)",
    [FP_STMT_SERIES_INSERT] = "INSERT INTO bucket_series (bucket_id, target_id, event_id, count,"
                              " value) VALUES (?1, ?2, ?3, ?4, ?5)",
    [FP_STMT_DROP_ADD] = "INSERT INTO drops (bucket_id, target_id, reason, count)"
                         " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (bucket_id, target_id, reason)"
                         " DO UPDATE SET count = count + excluded.count",
    [FP_STMT_CARRY_FOLD] = "INSERT INTO drops (bucket_id, target_id, reason, count)"
                           " SELECT ?1, target_id, reason, count FROM carried_drops WHERE true"
                           " ON CONFLICT (bucket_id, target_id, reason)"
                           " DO UPDATE SET count = count + excluded.count",
    [FP_STMT_CARRY_CLEAR] = "DELETE FROM carried_drops",
    [FP_STMT_CARRY_TOUCH_TARGETS] = "UPDATE targets SET last_bucket = max(last_bucket, ?1)"
                                    " WHERE id IN (SELECT target_id FROM carried_drops)",
    [FP_STMT_OLDEST_BUCKET] = "SELECT id, uploaded_ns IS NOT NULL FROM buckets ORDER BY id LIMIT 1",
    [FP_STMT_CARRY_SAMPLES] = "INSERT INTO carried_drops (target_id, reason, count)"
                              " SELECT target_id, ?2, max(count) FROM bucket_series"
                              " WHERE bucket_id = ?1 GROUP BY target_id"
                              " ON CONFLICT (target_id, reason)"
                              " DO UPDATE SET count = count + excluded.count",
    [FP_STMT_CARRY_DROPS] = "INSERT INTO carried_drops (target_id, reason, count)"
                            " SELECT target_id, reason, count FROM drops WHERE bucket_id = ?1"
                            " ON CONFLICT (target_id, reason)"
                            " DO UPDATE SET count = count + excluded.count",
    [FP_STMT_DELETE_SAMPLES] = "DELETE FROM series_samples WHERE bucket_id = ?1",
    [FP_STMT_DELETE_DROPS] = "DELETE FROM drops WHERE bucket_id = ?1",
    [FP_STMT_DELETE_SERIES] = "DELETE FROM bucket_series WHERE bucket_id = ?1",
    [FP_STMT_DELETE_BUCKET] = "DELETE FROM buckets WHERE id = ?1",
    [FP_STMT_MIN_BUCKET] = "SELECT min(id) FROM buckets",
    [FP_STMT_GC_STACKS] = "DELETE FROM stacks WHERE last_bucket < ?1",
    [FP_STMT_GC_THREADS] = "DELETE FROM threads WHERE last_bucket < ?1",
    [FP_STMT_GC_TARGETS] = "DELETE FROM targets WHERE last_bucket < ?1"
                           " AND id NOT IN (SELECT target_id FROM carried_drops)"
                           " AND id NOT IN (SELECT target_id FROM outbox WHERE target_id NOT NULL)",
    [FP_STMT_GC_HOSTS] = "DELETE FROM hosts WHERE id NOT IN (SELECT host_id FROM targets)",
    [FP_STMT_GC_COSTS] = "DELETE FROM host_costs WHERE host_id NOT IN (SELECT id FROM hosts)"
                         " OR to_ns <= (SELECT coalesce(min(start_ns), 0) FROM buckets)",
    [FP_STMT_MARK_UPLOADED] =
        "UPDATE buckets SET uploaded_ns = ?2 WHERE id = ?1 AND uploaded_ns IS NULL",
    [FP_STMT_BUCKET_PENDING] = "SELECT uploaded_ns IS NULL FROM buckets WHERE id = ?1",
    [FP_STMT_PENDING] = "SELECT id, start_ns, length_ns, written_ns FROM buckets"
                        " WHERE uploaded_ns IS NULL ORDER BY id LIMIT ?1",
    [FP_STMT_COUNT_PENDING] = "SELECT count(*) FROM buckets WHERE uploaded_ns IS NULL",
    [FP_STMT_KEY_FIND] = "SELECT bucket_id FROM ingest_keys WHERE key = ?1",
    [FP_STMT_KEY_INSERT] = "INSERT INTO ingest_keys (key, bucket_id) VALUES (?1, ?2)",
    [FP_STMT_DELETE_KEYS] = "DELETE FROM ingest_keys WHERE bucket_id = ?1",
    [FP_STMT_EXPIRED] = "SELECT id, uploaded_ns IS NOT NULL FROM buckets"
                        " WHERE start_ns + length_ns <= ?1 ORDER BY id LIMIT 64",
    [FP_STMT_OUTBOX_INSERT] =
        "INSERT INTO outbox (key, target_id, event, bucket_min, bucket_max, from_ns, to_ns,"
        " samples, counter, created_ns, query, body) VALUES (?1, (SELECT t.id FROM targets t"
        " JOIN hosts h ON h.id = t.host_id WHERE h.name = ?2 AND t.pid = ?3 AND t.starttime = ?4),"
        " ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [FP_STMT_OUTBOX_LIST] =
        "SELECT o.id, o.key, coalesce(h.name, ''), coalesce(t.pid, 0), coalesce(t.starttime, 0),"
        " o.event, o.bucket_min, o.bucket_max, o.from_ns, o.to_ns, o.samples, o.counter,"
        " o.created_ns, o.query, o.body FROM outbox o LEFT JOIN targets t ON t.id = o.target_id"
        " LEFT JOIN hosts h ON h.id = t.host_id ORDER BY o.id LIMIT ?1",
    [FP_STMT_OUTBOX_CHARGE] = "INSERT INTO carried_drops (target_id, reason, count)"
                              " SELECT target_id, ?2, samples FROM outbox"
                              " WHERE id = ?1 AND target_id NOT NULL AND NOT counter"
                              " AND samples > 0 ON CONFLICT (target_id, reason)"
                              " DO UPDATE SET count = count + excluded.count",
    [FP_STMT_OUTBOX_DELETE] = "DELETE FROM outbox WHERE id = ?1",
    [FP_STMT_OUTBOX_OLDEST] = "SELECT id FROM outbox ORDER BY id LIMIT 1",
    [FP_STMT_OUTBOX_EXPIRED] = "SELECT id FROM outbox WHERE to_ns <= ?1 ORDER BY id LIMIT 64",
    [FP_STMT_ROLLUP_DIRTY] = "INSERT OR IGNORE INTO rollup_dirty (span_ns, start_ns, target_id,"
                             " event_id) VALUES (?1, ?2, ?3, ?4)",
    [FP_STMT_ROLLUP_FORGET] = "DELETE FROM rollups WHERE span_ns = ?1 AND start_ns = ?2"
                              " AND target_id = ?3 AND event_id = ?4",
    [FP_STMT_BUCKET_SERIES_LIST] = "SELECT bs.target_id, bs.event_id, b.start_ns"
                                   " FROM bucket_series bs JOIN buckets b ON b.id = bs.bucket_id"
                                   " WHERE bs.bucket_id = ?1",
};

/*
 * Tables added to version 1 without a version bump: created when missing
 * by every read-write open, so files of older builds gain them, and
 * ignored by older builds, which never read them.
 */
static const char schema_v1_additions[] =
    "CREATE TABLE IF NOT EXISTS ingest_keys ("
    " key TEXT PRIMARY KEY,"
    " bucket_id INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS ingest_keys_bucket ON ingest_keys (bucket_id);";

/* ---- opening ---- */

static void store_free(struct fp_store *s)
{
        if (!s)
                return;
        for (int i = 0; i < FP_STMT__MAX; i++)
                sqlite3_finalize(s->st[i]);
        /* Closing checkpoints and removes the log when it is the last connection. */
        sqlite3_close_v2(s->db);
        fp_store_map_free(&s->stacks);
        fp_store_map_free(&s->frames);
        fp_store_map_free(&s->functions);
        fp_store_map_free(&s->mappings);
        free(s->path);
        free(s->wal_path);
        free(s);
}

void fp_store_close(struct fp_store *s)
{
        store_free(s);
}

static struct fp_store *store_alloc(const char *path)
{
        struct fp_store *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->path = strdup(path);
        if (!s->path || asprintf(&s->wal_path, "%s-wal", path) < 0) {
                s->wal_path = NULL;
                store_free(s);
                return NULL;
        }
        return s;
}

/* What went wrong, for a message: the system's reason when there is one. */
static const char *reason(struct fp_store *s, int r)
{
        if (r == -EROFS || r == -EACCES || r == -ENOSPC || r == -ENOENT || r == -ENOTDIR)
                return strerror(-r);
        return s->db ? sqlite3_errmsg(s->db) : strerror(-r);
}

/* Creates the schema (version 1, then each migration) in an empty file. */
static int create_schema(struct fp_store *s)
{
        char sql[128];
        int rc, conv = 0;

        /* page_size and auto_vacuum only take effect before the first table exists. */
        rc = fp_store_db_exec(s->db, "PRAGMA page_size = 4096; PRAGMA auto_vacuum = INCREMENTAL;");
        if (rc == SQLITE_OK)
                rc = fp_store_db_exec(s->db, "PRAGMA journal_mode = WAL");
        if (rc == SQLITE_OK)
                rc = fp_store_db_exec(s->db, "BEGIN IMMEDIATE");
        if (rc == SQLITE_OK)
                rc = fp_store_db_exec(s->db, schema_v1);
        for (int v = 1; rc == SQLITE_OK && v < FP_STORE_SCHEMA_VERSION; v++)
                rc = migrate_step(s, v, &conv);
        if (rc == SQLITE_OK) {
                snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d",
                         FP_STORE_APP_ID, FP_STORE_SCHEMA_VERSION);
                rc = fp_store_db_exec(s->db, sql);
        }
        if (rc == SQLITE_OK)
                rc = fp_store_db_exec(s->db, "COMMIT");
        if (rc != SQLITE_OK) {
                int r = conv ? conv : fp_store_db_errno(s->db, rc);
                if (!sqlite3_get_autocommit(s->db))
                        fp_store_db_exec(s->db, "ROLLBACK");
                return r ? r : -EIO;
        }
        return 0;
}

static int migrate(struct fp_store *s, int64_t from)
{
        char sql[64];
        int rc = fp_store_db_exec(s->db, "BEGIN IMMEDIATE"), conv = 0;

        for (int v = (int)from; rc == SQLITE_OK && v < FP_STORE_SCHEMA_VERSION; v++)
                rc = migrate_step(s, v, &conv);
        if (rc == SQLITE_OK) {
                snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", FP_STORE_SCHEMA_VERSION);
                rc = fp_store_db_exec(s->db, sql);
        }
        if (rc == SQLITE_OK)
                rc = fp_store_db_exec(s->db, "COMMIT");
        if (rc != SQLITE_OK) {
                int r = conv ? conv : fp_store_db_errno(s->db, rc);
                if (!sqlite3_get_autocommit(s->db))
                        fp_store_db_exec(s->db, "ROLLBACK");
                return r ? r : -EIO;
        }
        return 0;
}

/*
 * Runs quick_check; 0 when the file is sound, -EBADMSG with the first
 * problem in msg when it is damaged, another -errno when it cannot be read.
 */
static int quick_check(struct fp_store *s, char *msg, size_t msglen)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
        int r = 0;

        if (rc == SQLITE_OK) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        const char *t = (const char *)sqlite3_column_text(st, 0);
                        if (!t || strcmp(t, "ok") != 0) {
                                snprintf(msg, msglen, "%s", t ? t : "quick_check failed");
                                r = -EBADMSG;
                        }
                        rc = SQLITE_OK;
                }
        }
        sqlite3_finalize(st);
        if (!r && rc != SQLITE_OK) {
                r = fp_store_db_errno(s->db, rc);
                snprintf(msg, msglen, "%s", sqlite3_errmsg(s->db));
        }
        return r;
}

static int settings(struct fp_store *s)
{
        char sql[320];
        int64_t wal_pages = 1000, limit = (int64_t)FP_STORE_WAL_LIMIT;
        int rc;

        /*
         * Writes checkpoint after each commit (store.c); these are the
         * safety net for other writers: a checkpoint every eighth of the
         * budget, a reset log cut back to a quarter.
         */
        if (s->budget) {
                wal_pages = (int64_t)(s->budget / 8) / s->page_size;
                if (wal_pages < 16)
                        wal_pages = 16;
                limit = (int64_t)(s->budget / 4);
        }
        snprintf(sql, sizeof(sql),
                 "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = %lld;"
                 " PRAGMA journal_size_limit = %lld; PRAGMA cache_size = -8192;"
                 " PRAGMA temp_store = MEMORY; PRAGMA foreign_keys = OFF",
                 (long long)wal_pages, (long long)limit);
        rc = fp_store_db_exec(s->db, sql);
        return rc == SQLITE_OK ? 0 : fp_store_db_errno(s->db, rc);
}

/*
 * A read-only handle needs the -shm file, which a read-only file system
 * may lack. When there is no log (the last writer closed cleanly), the
 * file can be read as immutable instead: no locks, no -shm. SQLite rc.
 */
static int readonly_fallback(struct fp_store *s, const char *path)
{
        static const char hex[] = "0123456789ABCDEF";
        struct stat st;
        char *uri;
        size_t n = 0;
        int rc = fp_store_db_exec(s->db, "PRAGMA application_id");

        if ((rc & 0xff) != SQLITE_CANTOPEN || stat(s->wal_path, &st) == 0)
                return rc;
        uri = malloc(strlen(path) * 3 + 32);
        if (!uri)
                return SQLITE_NOMEM;
        n += (size_t)sprintf(uri, "file:");
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("/._-~", *p)) {
                        uri[n++] = (char)*p;
                } else {
                        uri[n++] = '%';
                        uri[n++] = hex[*p >> 4];
                        uri[n++] = hex[*p & 15];
                }
        }
        strcpy(uri + n, "?immutable=1");
        sqlite3_close_v2(s->db);
        s->db = NULL;
        rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        free(uri);
        if (rc == SQLITE_OK)
                rc = fp_store_db_exec(s->db, "PRAGMA application_id");
        return rc;
}

/* SQLite's progress handler: stops the statement once the deadline passed. */
static int past_deadline(void *arg)
{
        const struct fp_store *s = arg;

        return s->deadline_ns && (int64_t)fp_now_ns(CLOCK_MONOTONIC) > s->deadline_ns;
}

void fp_store_set_deadline(struct fp_store *s, int64_t deadline_ns)
{
        s->deadline_ns = deadline_ns;
}

/*
 * One attempt at opening. -EBADMSG means the file is damaged (detail in
 * damage) and may be moved aside; other failures are final.
 */
static int open_once(const char *path, uint64_t max_bytes, bool readonly, struct fp_store **ret,
                     char *err, size_t errlen, char *damage, size_t damagelen)
{
        struct fp_store *s = store_alloc(path);
        int64_t app_id = 0, version = 0, n_tables = 0;
        int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        int rc, r;

        if (!s) {
                fp_errf(err, errlen, 0, "Failed to open store '%s': out of memory", path);
                return -ENOMEM;
        }
        s->readonly = readonly;
        s->stacks_gone =
            1; /* unknown after a restart: allow one sweep before the last bucket goes */
        s->max_bytes = max_bytes && max_bytes < FP_STORE_MIN_BYTES ? FP_STORE_MIN_BYTES : max_bytes;
        s->budget = s->max_bytes;
        if (!readonly) {
                /*
                 * Create the file here: SQLite falls back to opening
                 * read-only when it cannot write, which hides why (EROFS,
                 * EACCES, ENOSPC). An empty file is a valid new database.
                 */
                int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
                if (fd < 0) {
                        r = -errno;
                        fp_errf(err, errlen, 0, "Failed to open store '%s': %s", path,
                                strerror(-r));
                        store_free(s);
                        return r;
                }
                close(fd);
        }
        rc = sqlite3_open_v2(path, &s->db, flags, NULL);
        if (rc == SQLITE_OK && readonly)
                rc = readonly_fallback(s, path);
        if (rc != SQLITE_OK) {
                r = fp_store_db_errno(s->db, rc);
                if (!r || r == -EBADMSG)
                        r = -EIO;
                fp_errf(err, errlen, 0, "Failed to open store '%s': %s", path, reason(s, r));
                store_free(s);
                return r;
        }
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, FP_STORE_BUSY_MS);
        sqlite3_progress_handler(s->db, 4096, past_deadline, s);
        if (!readonly && sqlite3_db_readonly(s->db, "main") == 1) {
                fp_errf(err, errlen, 0, "Failed to open store '%s': the file is read-only", path);
                store_free(s);
                return -EROFS;
        }

        r = readonly ? 0 : quick_check(s, damage, damagelen);
        if (r == -EBADMSG) {
                store_free(s);
                return r;
        }
        if (r < 0) {
                fp_errf(err, errlen, 0, "Failed to open store '%s': %s", path, reason(s, r));
                store_free(s);
                return r;
        }
        if ((r = fp_store_db_pragma_int(s, "PRAGMA application_id", &app_id)) < 0 ||
            (r = fp_store_db_pragma_int(s, "PRAGMA user_version", &version)) < 0 ||
            (r = fp_store_db_pragma_int(s, "SELECT count(*) FROM sqlite_master", &n_tables)) < 0) {
                fp_errf(err, errlen, 0, "%s", s->errmsg);
                store_free(s);
                return r;
        }
        if (n_tables == 0 && version == 0) {
                if (readonly) {
                        fp_errf(err, errlen, 0, "Failed to open store '%s': it is empty", path);
                        store_free(s);
                        return -ENOENT;
                }
                r = create_schema(s);
                if (r < 0) {
                        fp_errf(err, errlen, 0, "Failed to create store '%s': %s", path,
                                reason(s, r));
                        store_free(s);
                        return r;
                }
        } else if (app_id != FP_STORE_APP_ID) {
                fp_errf(err, errlen, 0,
                        "Refusing to use '%s' as a store: it is an SQLite database of another "
                        "application (application_id 0x%llx, user_version %lld)",
                        path, (unsigned long long)app_id, (long long)version);
                store_free(s);
                return -EPROTO;
        } else if (version > FP_STORE_SCHEMA_VERSION) {
                fp_errf(err, errlen, 0,
                        "Refusing to use store '%s': its schema version %lld is newer than this "
                        "build's %d; upgrade fleetprof or move the file away",
                        path, (long long)version, FP_STORE_SCHEMA_VERSION);
                store_free(s);
                return -EPROTO;
        } else if (version < FP_STORE_SCHEMA_VERSION) {
                if (version < FP_STORE_OLDEST_MIGRATABLE || readonly) {
                        fp_errf(err, errlen, 0,
                                "Refusing to use store '%s': its schema version %lld cannot be "
                                "%s (this build has version %d); move the file away",
                                path, (long long)version,
                                readonly ? "read without migrating" : "migrated",
                                FP_STORE_SCHEMA_VERSION);
                        store_free(s);
                        return -EPROTO;
                }
                r = migrate(s, version);
                if (r < 0) {
                        fp_errf(err, errlen, 0,
                                "Failed to migrate store '%s' from version %lld: %s", path,
                                (long long)version, reason(s, r));
                        store_free(s);
                        return r;
                }
        }
        if ((r = fp_store_db_pragma_int(s, "PRAGMA page_size", &s->page_size)) < 0) {
                fp_errf(err, errlen, 0, "%s", s->errmsg);
                store_free(s);
                return r;
        }
        if (!readonly) {
                rc = fp_store_db_exec(s->db, "PRAGMA journal_mode = WAL");
                if (rc == SQLITE_OK)
                        rc = fp_store_db_exec(s->db, schema_v1_additions);
                r = rc == SQLITE_OK ? settings(s) : fp_store_db_errno(s->db, rc);
                if (r < 0) {
                        fp_errf(err, errlen, 0, "Failed to set up store '%s': %s", path,
                                reason(s, r));
                        store_free(s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

/* Renames path (and its -wal, -shm) to path.corrupt-T[-N]; fills ret_aside. */
static int move_aside(const char *path, char *ret_aside, size_t len)
{
        static const char *const suffix[] = {"-wal", "-shm"};
        char from[4096], to[4096];
        long long t = (long long)time(NULL);
        struct stat st;

        snprintf(ret_aside, len, "%s.corrupt-%lld", path, t);
        for (int n = 1; lstat(ret_aside, &st) == 0 && n < 100; n++)
                snprintf(ret_aside, len, "%s.corrupt-%lld-%d", path, t, n);
        if (rename(path, ret_aside) < 0)
                return -errno;
        for (size_t i = 0; i < 2; i++) {
                snprintf(from, sizeof(from), "%s%s", path, suffix[i]);
                snprintf(to, sizeof(to), "%s%s", ret_aside, suffix[i]);
                if (rename(from, to) < 0 && errno != ENOENT)
                        (void)unlink(from);
        }
        return 0;
}

int fp_store_open(const char *path, uint64_t max_bytes, struct fp_store **ret, char *err,
                  size_t errlen)
{
        char damage[256] = "", aside[4096];
        struct fp_store *s = NULL;
        int r;

        if (!path || !*path || !ret) {
                fp_errf(err, errlen, 0, "Failed to open store: no path given");
                return -EINVAL;
        }
        r = open_once(path, max_bytes, false, &s, err, errlen, damage, sizeof(damage));
        if (r == -EBADMSG) {
                int m = move_aside(path, aside, sizeof(aside));
                if (m < 0) {
                        fp_errf(err, errlen, 0,
                                "Store '%s' is damaged (%s) and could not be moved aside: %s", path,
                                damage, strerror(-m));
                        return m;
                }
                r = open_once(path, max_bytes, false, &s, err, errlen, damage, sizeof(damage));
                if (r == -EBADMSG) {
                        fp_errf(err, errlen, 0, "Failed to create store '%s': %s", path, damage);
                        return -EIO;
                }
                if (r < 0)
                        return r;
                fp_errf(err, errlen, 0,
                        "Store '%s' was damaged (%s): moved it aside to '%s' and started an empty "
                        "store",
                        path, damage, aside);
                r = FP_STORE_RECOVERED;
        } else if (r < 0) {
                return r;
        }
        /* A budget lowered since the last run: evict now rather than at the first write. */
        if (s->budget)
                (void)fp_store_shrink(s);
        s->errmsg[0] = '\0';
        *ret = s;
        return r;
}

int fp_store_open_readonly(const char *path, struct fp_store **ret, char *err, size_t errlen)
{
        char damage[256] = "";
        int r;

        if (!path || !*path || !ret) {
                fp_errf(err, errlen, 0, "Failed to open store: no path given");
                return -EINVAL;
        }
        r = open_once(path, 0, true, ret, err, errlen, damage, sizeof(damage));
        if (r == -EBADMSG)
                fp_errf(err, errlen, 0, "Store '%s' is damaged: %s", path, damage);
        return r;
}
