/* SPDX-License-Identifier: MIT */
/*
 * The collector's store on ClickHouse (clickhouse.h), over HTTP.
 *
 * Schema (version 6), in the database the URL names. Every table is a
 * ReplacingMergeTree: a row written twice (two collectors storing one
 * retried upload, or a dictionary row each collector writes once) is
 * collapsed by ClickHouse's merges, and until then every read groups by
 * the row's key first, so it is counted once either way.
 *
 *   series       (day, series_id, target_id, host, pid, starttime, comm, exe,
 *                config, active, service, event and its sample types, version,
 *                written_ns, container) what a (target, event) is: a row
 *                whenever a collector sees it change (or first sees it that
 *                day), the newest (version: the upload's end) wins for comm,
 *                exe, config, active, service and container (schema version
 *                2 added it); written_ns orders events as the SQLite
 *                store's event ids do (a profile of no named event takes
 *                the one stored first).
 *   buckets      (hour, upload, series_id, start_ns, length_ns, count, value,
 *                rows, key) one row per upload and series: listings, time
 *                lines, how many samples rows the upload wrote (a larger
 *                count in samples means it was written twice: only such
 *                uploads pay for the per-row deduplication when a profile
 *                is read), and the upload's idempotency key (schema
 *                version 3 added it).
 *   samples      (hour, start_ns, series_id, length_ns, upload, stack_id,
 *                tid, thread_name, count, value), sorted by series, thread
 *                and stack before time (schema version 4, resort_samples());
 *                an off-CPU sample's
 *                thread_name is the name, a NUL byte and why it waited
 *                (the SQLite store's threads.wait), so that the sort key,
 *                which ReplacingMergeTree deduplicates by, tells them
 *                apart (a thread name never holds a NUL).
 *   drops        (hour, start_ns, length_ns, upload, target_id, reason, count)
 *   upload_keys  (hour, key, upload): the idempotency keys stored before
 *                schema version 3, still looked up.
 *   stacks       (day, stack_id, frames Array(UInt64)), frames (day,
 *                frame_id, mapping_id, function_id, address, line), functions
 *                (day, function_id, name, system_name, filename: schema
 *                version 5 added them and line), mappings (day, mapping_id, file,
 *                build_id, memory_start, memory_limit, file_offset, vaddr1:
 *                the ELF address memory_start holds plus one, 0 unknown,
 *                schema version 7): stored
 *                once per day and referenced by content hash (the SQLite
 *                store's hashes, store-internal.h).
 *   costs        (day, host, from_ns, to_ns, agent_cpu_ns, agent_rss, host_cpus)
 *   meta         (version, written_ns): the schema version.
 *   rollups, rollup_drops, rollup_builds: summaries of whole hours and
 *                days (schema version 6), written and chosen by ch-rollup.c.
 *
 * Time: hour = start_ns / 3600 s and day = start_ns / 86400 s of the
 * upload (not of each bucket in it). Tables of samples are partitioned by
 * hour, dictionaries by day; retention and the byte budget drop whole
 * partitions (ALTER TABLE ... DROP PARTITION), oldest first, a day's
 * dictionaries once none of its hours is left. A merged profile is one
 * GROUP BY inside ClickHouse; the collector fetches the stacks, frames and
 * names it references and assembles the pprof.
 *
 * Written for ClickHouse 18.16 (Debian 12's) as much as for current
 * releases: no DateTime64, LowCardinality, TTL, query parameters or
 * lightweight deletes; RowBinary both ways; ids in the query text.
 */
#include "clickhouse.h"
#include "ch-internal.h"
#include "store-internal.h"
#include "pprof.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define IDS_PER_QUERY     8000              /* ids in one IN (...) list: under max_query_size */
#define WRITTEN_MAX       ((size_t)1 << 20) /* dictionary rows remembered as written */
#define UPKEEP_EVERY_NS   (10 * 1000000000LL)
#define FP_CH_SEED_SERIES 0x6a09e667f3bcc909ULL /* written_before()'s table of series rows */

/* ---- schema ---- */

/*
 * One statement of a version's migration, and what it makes: a table, or
 * a column of one. Any number of collectors may run the same step at once
 * (replicas started together): a step whose table or column exists is
 * done, whether it was this collector or another that made it.
 */
struct schema_step {
        const char *table;
        const char *column; /* NULL: the step makes the table */
        const char *sql;    /* "DB." stands for the database */
};

#define RMT "ENGINE = ReplacingMergeTree"

static const struct schema_step schema_v1[] = {
    {"series", NULL,
     "CREATE TABLE IF NOT EXISTS DB.series (day Date, series_id UInt64, target_id UInt64,"
     " host String, pid Int32, starttime UInt64, comm String, exe String, config String,"
     " active UInt8, service String, event String, count_type String, count_unit String,"
     " value_type String, value_unit String, period_type String, period_unit String,"
     " period Int64, version UInt64, written_ns Int64) ENGINE = ReplacingMergeTree(version)"
     " PARTITION BY day ORDER BY series_id"},
    {"buckets", NULL,
     "CREATE TABLE IF NOT EXISTS DB.buckets (hour UInt32, upload UInt64, series_id UInt64,"
     " start_ns Int64, length_ns Int64, count UInt64, value UInt64, rows UInt64) " RMT
     " PARTITION BY hour ORDER BY (series_id, start_ns, upload)"},
    {"samples", NULL,
     "CREATE TABLE IF NOT EXISTS DB.samples (hour UInt32, start_ns Int64, series_id UInt64,"
     " length_ns Int64, upload UInt64, stack_id UInt64, tid Int32, thread_name String,"
     " count UInt64, value UInt64) " RMT
     " PARTITION BY hour ORDER BY (series_id, start_ns, upload, stack_id, tid, thread_name)"},
    {"drops", NULL,
     "CREATE TABLE IF NOT EXISTS DB.drops (hour UInt32, start_ns Int64, length_ns Int64,"
     " upload UInt64, target_id UInt64, reason String, count UInt64) " RMT
     " PARTITION BY hour ORDER BY (target_id, start_ns, upload, reason)"},
    {"upload_keys", NULL,
     "CREATE TABLE IF NOT EXISTS DB.upload_keys (hour UInt32, key String, upload UInt64) " RMT
     " PARTITION BY hour ORDER BY key"},
    {"stacks", NULL,
     "CREATE TABLE IF NOT EXISTS DB.stacks (day Date, stack_id UInt64, frames Array(UInt64)) " RMT
     " PARTITION BY day ORDER BY stack_id"},
    {"frames", NULL,
     "CREATE TABLE IF NOT EXISTS DB.frames (day Date, frame_id UInt64, mapping_id UInt64,"
     " function_id UInt64, address UInt64) " RMT " PARTITION BY day ORDER BY frame_id"},
    {"functions", NULL,
     "CREATE TABLE IF NOT EXISTS DB.functions (day Date, function_id UInt64, name String) " RMT
     " PARTITION BY day ORDER BY function_id"},
    {"mappings", NULL,
     "CREATE TABLE IF NOT EXISTS DB.mappings (day Date, mapping_id UInt64, file String,"
     " build_id String, memory_start UInt64, memory_limit UInt64, file_offset UInt64) " RMT
     " PARTITION BY day ORDER BY mapping_id"},
    {"costs", NULL,
     "CREATE TABLE IF NOT EXISTS DB.costs (day Date, host String, from_ns Int64, to_ns Int64,"
     " agent_cpu_ns UInt64, agent_rss UInt64, host_cpus UInt32) " RMT
     " PARTITION BY day ORDER BY (host, from_ns, to_ns)"},
};

/* The schema's version: every collector that writes makes it first. */
static const struct schema_step meta_step = {
    "meta", NULL,
    "CREATE TABLE IF NOT EXISTS DB.meta (version UInt32, written_ns Int64) ENGINE = MergeTree"
    " ORDER BY version"};

/* 1 -> 2: the container a host tier's series ran in. */
static const struct schema_step schema_v2[] = {
    {"series", "container",
     "ALTER TABLE DB.series ADD COLUMN container String DEFAULT '' AFTER written_ns"},
};

/*
 * 2 -> 3: an upload's idempotency key in its buckets rows, which are
 * written anyway (upload_keys was one more INSERT, one more part, per
 * write; it is still read for the keys stored before).
 */
static const struct schema_step schema_v3[] = {
    {"buckets", "key", "ALTER TABLE DB.buckets ADD COLUMN key String DEFAULT ''"},
};

/*
 * 3 -> 4: samples sorted by (series_id, tid, thread_name, stack_id,
 * start_ns, upload) rather than by time first: a thread's rows of one
 * stack lie side by side, so that its tid, name and stack id repeat and
 * compress to almost nothing (the same key columns, so ReplacingMergeTree
 * collapses the same rows). A sort key cannot be changed in place: the
 * table is made anew (resort_samples()).
 */
#define SAMPLES_COLUMNS                                                                            \
        "hour UInt32, start_ns Int64, series_id UInt64, length_ns Int64, upload UInt64,"           \
        " stack_id UInt64, tid Int32, thread_name String, count UInt64, value UInt64"
#define SAMPLES_NAMES                                                                              \
        "hour, start_ns, series_id, length_ns, upload, stack_id, tid, thread_name, count, value"
#define SAMPLES_SORT     "series_id, tid, thread_name, stack_id, start_ns, upload"
#define RESORT_TIMEOUT_S 600L /* one hour's samples copied */

static int resort_samples(struct fp_ch *c);

/* 4 -> 5: a function's system name (mangled) and source file; a frame's line. */
static const struct schema_step schema_v5[] = {
    {"functions", "system_name",
     "ALTER TABLE DB.functions ADD COLUMN system_name String DEFAULT ''"},
    {"functions", "filename", "ALTER TABLE DB.functions ADD COLUMN filename String DEFAULT ''"},
    {"frames", "line", "ALTER TABLE DB.frames ADD COLUMN line Int64 DEFAULT 0"},
};

/* A schema statement: its "DB." names the database. */
static void buf_sql(struct buf *q, const char *tmpl, const char *db)
{
        for (const char *at; (at = strstr(tmpl, "DB.")); tmpl = at + 3) {
                buf_add(q, tmpl, (size_t)(at - tmpl));
                buf_printf(q, "%s.", db);
        }
        buf_printf(q, "%s", tmpl);
}

/*
 * 5 -> 6: summaries (ch-rollup.c): each hour's and day's samples merged
 * once, and the summaries written whole with what they hold.
 */
static const struct schema_step schema_v6[] = {
    {"rollups", NULL,
     "CREATE TABLE IF NOT EXISTS DB.rollups (hour UInt32, build UInt64, series_id UInt64,"
     " tid Int32, thread_name String, stack_id UInt64, count UInt64, value UInt64) " RMT
     " PARTITION BY hour ORDER BY (build, series_id, tid, thread_name, stack_id)"},
    {"rollup_drops", NULL,
     "CREATE TABLE IF NOT EXISTS DB.rollup_drops (hour UInt32, build UInt64, target_id UInt64,"
     " reason String, count UInt64) " RMT " PARTITION BY hour ORDER BY (build, target_id, reason)"},
    {"rollup_builds", NULL,
     "CREATE TABLE IF NOT EXISTS DB.rollup_builds (hour UInt32, span UInt8, build UInt64,"
     " uploads UInt64, fingerprint UInt64, built_ns Int64) " RMT
     " PARTITION BY hour ORDER BY (hour, span, build)"},
};

/* 6 -> 7: where a mapping's ELF addresses begin (a debug file alone names its frames). */
static const struct schema_step schema_v7[] = {
    {"mappings", "vaddr1", "ALTER TABLE DB.mappings ADD COLUMN vaddr1 UInt64 DEFAULT 0"},
};

/*
 * 7 -> 8: debug files uploaded from CI (ch-debug.c), shared by every
 * collector of the store: a file's bytes once per build ID, and when each
 * collector last named from it (the byte budget evicts the least recent).
 */
static const struct schema_step schema_v8[] = {
    {"debugfiles", NULL,
     "CREATE TABLE IF NOT EXISTS DB.debugfiles (build_id String, executable UInt8, size UInt64,"
     " added_ns Int64, data String) " RMT " ORDER BY build_id"},
    {"debugfiles_used", NULL,
     "CREATE TABLE IF NOT EXISTS DB.debugfiles_used (build_id String, used_ns Int64)"
     " ENGINE = ReplacingMergeTree(used_ns) ORDER BY build_id"},
};

/* Each version's statements; a later version appends its ALTERs here. */
static const struct {
        const struct schema_step *steps;
        size_t n;
        int (*run)(struct fp_ch *c); /* after the statements */
} migrations[FP_CH_SCHEMA_VERSION] = {
    {schema_v1, sizeof(schema_v1) / sizeof(schema_v1[0]), NULL},
    {schema_v2, sizeof(schema_v2) / sizeof(schema_v2[0]), NULL},
    {schema_v3, sizeof(schema_v3) / sizeof(schema_v3[0]), NULL},
    {NULL, 0, resort_samples},
    {schema_v5, sizeof(schema_v5) / sizeof(schema_v5[0]), NULL},
    {schema_v6, sizeof(schema_v6) / sizeof(schema_v6[0]), NULL},
    {schema_v7, sizeof(schema_v7) / sizeof(schema_v7[0]), NULL},
    {schema_v8, sizeof(schema_v8) / sizeof(schema_v8[0]), NULL},
};

/* Summaries first: a read never takes a summary whose rows are gone. */
static const char *const hour_tables[] = {"rollup_builds", "rollups", "rollup_drops", "samples",
                                          "buckets",       "drops",   "upload_keys"};
static const char *const day_tables[] = {"series",    "stacks",   "frames",
                                         "functions", "mappings", "costs"};
#define N_HOUR_TABLES (sizeof(hour_tables) / sizeof(hour_tables[0]))
#define N_DAY_TABLES  (sizeof(day_tables) / sizeof(day_tables[0]))

static int schema_version(struct fp_ch *c, int64_t *ret)
{
        struct buf q = {0};
        int r;

        buf_printf(&q, "SELECT toInt64(max(version)) FROM %s.meta FORMAT RowBinary", c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        *ret = RD_I64(&rd);
        return rd.bad
                   ? fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer to a version query",
                                 c->hostport)
                   : 0;
}

/*
 * Where schema version 4's migration stands: samples (none, in the old
 * order, in the new one, or a table of another engine, such as a
 * cluster's Distributed table, which its operator made and which is left
 * alone), and whether samples_v3 (the old table, or a renamed-away new
 * one) and samples_v4 (a new table not yet put in place) exist.
 */
enum samples_state { SAMPLES_NONE, SAMPLES_OLD, SAMPLES_NEW, SAMPLES_OTHER };
struct resort_state {
        enum samples_state samples;
        bool v3, v4;
};

static int resort_state(struct fp_ch *c, struct resort_state *st)
{
        struct buf q = {0};
        int r;

        *st = (struct resort_state){SAMPLES_NONE, false, false};
        buf_printf(&q,
                   "SELECT name, engine = 'ReplacingMergeTree', sorting_key FROM system.tables"
                   " WHERE database = '%s' AND name IN ('samples', 'samples_v3', 'samples_v4')"
                   " FORMAT RowBinary",
                   c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        while (!rd.bad && rd.p < rd.end) {
                const char *name = rd_str(&rd);
                bool ours = RD_U8(&rd) != 0;
                const char *key = rd_str(&rd);
                if (rd.bad)
                        break;
                if (strcmp(name, "samples") == 0)
                        st->samples = !ours                            ? SAMPLES_OTHER
                                      : strcmp(key, SAMPLES_SORT) == 0 ? SAMPLES_NEW
                                                                       : SAMPLES_OLD;
                else if (strcmp(name, "samples_v3") == 0)
                        st->v3 = ours;
                else
                        st->v4 = true;
        }
        return rd.bad ? fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about its tables",
                                    c->hostport)
                      : 0;
}

/* Copies samples_v3 into samples an hour at a time, then drops it. */
static int copy_old_samples(struct fp_ch *c)
{
        struct buf q = {0};
        int r;

        for (;;) {
                /* The oldest hour left to copy, if any. */
                buf_printf(&q,
                           "SELECT partition_id FROM system.parts WHERE database = '%s'"
                           " AND table = 'samples_v3' AND active ORDER BY partition_id LIMIT 1"
                           " FORMAT RowBinary",
                           c->db);
                r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
                q.n = 0;
                if (r < 0)
                        break;
                struct rd rd = ANSWER(c);
                if (rd.p == rd.end) {
                        buf_printf(&q, "DROP TABLE IF EXISTS %s.samples_v3", c->db);
                        r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                        break;
                }
                char id[24];
                const char *got = rd_str(&rd);
                if (rd.bad || strlen(got) >= sizeof(id) ||
                    strspn(got, "0123456789") != strlen(got)) {
                        r = fp_ch_failf(c, -EIO,
                                        "ClickHouse at %s: unexpected partition of samples_v3",
                                        c->hostport);
                        break;
                }
                memcpy(id, got, strlen(got) + 1);
                buf_printf(&q,
                           "INSERT INTO %s.samples (" SAMPLES_NAMES ") SELECT " SAMPLES_NAMES
                           " FROM %s.samples_v3 WHERE hour = %s",
                           c->db, c->db, id);
                r = fp_ch_exec(c, &q, RESORT_TIMEOUT_S);
                q.n = 0;
                if (r == 0) {
                        buf_printf(&q, "ALTER TABLE %s.samples_v3 DROP PARTITION ID '%s'", c->db,
                                   id);
                        r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                        q.n = 0;
                }
                if (r < 0)
                        break;
        }
        free(q.p);
        return r;
}

/*
 * Schema version 4: samples made anew in its new order, as a state
 * machine that every writer runs at its start until the tables are
 * settled, so that a migration a collector crashed in is finished by the
 * next. Each step is one statement that can be repeated:
 *
 * - samples in the old order: a new table is made as samples_v4 and both
 *   renamed in one statement (samples to samples_v3, samples_v4 to
 *   samples). ClickHouse's RENAME waits for the INSERTs under way into
 *   the old table; later ones find the new one (a collector of version 3
 *   still running writes the same columns to it).
 * - samples_v3 beside the new samples: copied an hour (a partition) at a
 *   time, each hour dropped once copied, then the table dropped. An hour
 *   copied twice (a crash between the copy and the drop, or two copying
 *   at once) holds its rows twice, which the reads count once, as for any
 *   upload written twice.
 * - samples_v4 beside the new samples: a second migrator's table, made
 *   after the first one's rename: dropped.
 * - no samples but a samples_v3: a rename half done, undone. The two
 *   renames of one RENAME statement are two steps on 18.16: a collector
 *   that checked the order before another's whole migration and renamed
 *   after it moves the new samples away, then finds no samples_v4 to put
 *   in its place.
 *
 * A step that fails with an error of ClickHouse's (most often one racing
 * collector's table gone or already there) is retried from a fresh look
 * at the tables, a few times. Past those: -EAGAIN, on which a collector
 * starts all the same and runs this again before its next write.
 */
#define RESORT_FAILURES   8
#define RESORT_PASSES     64         /* steps in all: two racing collectors settle in a few */
#define RESORT_BACKOFF_NS 100000000L /* times the failures so far: 2.8 s in all */

static int resort_samples(struct fp_ch *c)
{
        struct buf q = {0};
        struct resort_state st;
        int r = 0, failures = 0, passes = 0;

        while ((r = resort_state(c, &st)) == 0) {
                q.n = 0;
                if (st.samples == SAMPLES_OTHER || (st.samples == SAMPLES_NEW && !st.v3 && !st.v4))
                        break;
                if (++passes > RESORT_PASSES) {
                        r = fp_ch_failf(
                            c, -EAGAIN,
                            "ClickHouse at %s: the samples table's migration did not settle"
                            " in %d steps (other collectors migrating it?)",
                            c->hostport, RESORT_PASSES);
                        break;
                }
                if (st.samples == SAMPLES_NONE && st.v3) {
                        buf_printf(&q, "RENAME TABLE %s.samples_v3 TO %s.samples", c->db, c->db);
                        r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                } else if (st.samples == SAMPLES_NONE) {
                        /* Between the halves of another's rename, or gone. */
                        r = fp_ch_failf(c, -EIO, "ClickHouse at %s: table %s.samples is missing",
                                        c->hostport, c->db);
                } else if (st.samples == SAMPLES_OLD) {
                        buf_printf(&q,
                                   "CREATE TABLE IF NOT EXISTS %s.samples_v4 (" SAMPLES_COLUMNS
                                   ") " RMT " PARTITION BY hour ORDER BY (" SAMPLES_SORT ")",
                                   c->db);
                        r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                        if (r == 0) {
                                q.n = 0;
                                buf_printf(&q,
                                           "RENAME TABLE %s.samples TO %s.samples_v3,"
                                           " %s.samples_v4 TO %s.samples",
                                           c->db, c->db, c->db, c->db);
                                r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                        }
                } else if (st.v3) {
                        r = copy_old_samples(c);
                } else {
                        buf_printf(&q, "DROP TABLE IF EXISTS %s.samples_v4", c->db);
                        r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                }
                if (r == 0)
                        continue;
                if (r != -EIO)
                        break;
                if (++failures == RESORT_FAILURES) {
                        char last[sizeof(c->errmsg)];
                        snprintf(last, sizeof(last), "%s", c->errmsg);
                        r = fp_ch_failf(
                            c, -EAGAIN,
                            "the samples table's migration did not settle: %d steps failed,"
                            " the last: %s",
                            RESORT_FAILURES, last);
                        break;
                }
                struct timespec ts = {0, RESORT_BACKOFF_NS * failures}; /* under 1 s */
                nanosleep(&ts, NULL);
        }
        free(q.p);
        return r;
}

/* Whether db.table (or its column, when one is named) exists: 1, 0, or -errno. */
static int schema_has(struct fp_ch *c, const char *table, const char *column)
{
        struct buf q = {0};
        int r;

        if (column)
                buf_printf(&q,
                           "SELECT toUInt64(count()) FROM system.columns WHERE database = '%s'"
                           " AND table = '%s' AND name = '%s' FORMAT RowBinary",
                           c->db, table, column);
        else
                buf_printf(&q,
                           "SELECT toUInt64(count()) FROM system.tables WHERE database = '%s'"
                           " AND name = '%s' FORMAT RowBinary",
                           c->db, table);
        uint64_t n;
        r = fp_ch_query_number(c, &q, "its tables", &n);
        free(q.p);
        return r < 0 ? r : n > 0;
}

/*
 * Runs one schema step so that racing collectors all succeed: a column
 * that exists is not added again, and a statement that fails with an
 * error of ClickHouse's (18.16 answers "column with this name already
 * exists" to a second ADD COLUMN, and "table already exists" to a second
 * CREATE TABLE IF NOT EXISTS made at the same moment) is done if what it
 * makes is there, else retried as the samples migration's steps are.
 */
static int run_step(struct fp_ch *c, const struct schema_step *step)
{
        struct buf q = {0};
        int r, failures = 0;

        for (;;) {
                if (step->column && (r = schema_has(c, step->table, step->column)) != 0)
                        break; /* there (1), or the question failed */
                q.n = 0;
                buf_sql(&q, step->sql, c->db);
                r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                if (r != -EIO)
                        break;
                char last[sizeof(c->errmsg)];
                snprintf(last, sizeof(last), "%s", c->errmsg);
                int has = schema_has(c, step->table, step->column);
                if (has != 0) {
                        r = has;
                        break;
                }
                if (++failures == RESORT_FAILURES) {
                        r = fp_ch_failf(c, -EIO, "%s", last);
                        break;
                }
                struct timespec ts = {0, RESORT_BACKOFF_NS * failures}; /* under 1 s */
                nanosleep(&ts, NULL);
        }
        free(q.p);
        return r < 0 ? r : 0;
}

/* Creates or migrates (writer) or checks (reader) the schema. */
static int setup(struct fp_ch *c)
{
        struct buf q = {0};
        int64_t version = 0;
        int r;

        if (c->ready)
                return 0;
        if (c->writer) {
                buf_printf(&q, "CREATE DATABASE IF NOT EXISTS %s", c->db);
                r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                q.n = 0;
                if (r == -EIO) { /* made by another collector at the same moment? */
                        buf_printf(&q,
                                   "SELECT toUInt64(count()) FROM system.databases"
                                   " WHERE name = '%s' FORMAT RowBinary",
                                   c->db);
                        if (fp_ch_exec(c, &q, READ_TIMEOUT_S) == 0) {
                                struct rd rd = ANSWER(c);
                                if (RD_U64(&rd) == 1 && !rd.bad)
                                        r = 0;
                        }
                        q.n = 0;
                }
                if (r == 0)
                        r = run_step(c, &meta_step);
                if (r < 0)
                        goto out;
        }
        r = schema_version(c, &version);
        if (r == -EIO && !c->writer) {
                r = fp_ch_failf(c, -EIO,
                                "ClickHouse at %s: database '%s' has no fleetprof schema yet (%s)",
                                c->hostport, c->db, c->errmsg);
                goto out;
        }
        if (r < 0)
                goto out;
        if (version > FP_CH_SCHEMA_VERSION) {
                r = fp_ch_failf(c, -EPROTO,
                                "ClickHouse database '%s' holds schema version %" PRId64
                                ", newer than this collector's %d: upgrade the collector",
                                c->db, version, FP_CH_SCHEMA_VERSION);
                goto out;
        }
        if (!c->writer && version < FP_CH_SCHEMA_VERSION) {
                r = fp_ch_failf(c, -EIO,
                                "ClickHouse database '%s' is not set up yet (version %" PRId64 ")",
                                c->db, version);
                goto out;
        }
        if (version == 0) {
                /* A database of someone else's tables is not ours to fill. */
                buf_printf(
                    &q,
                    "SELECT toUInt64(count()) FROM system.tables WHERE database = '%s'"
                    " AND name NOT IN ('meta', 'series', 'buckets', 'samples', 'drops',"
                    " 'upload_keys', 'stacks', 'frames', 'functions', 'mappings', 'costs',"
                    " 'samples_v3', 'samples_v4', 'rollups', 'rollup_drops', 'rollup_builds',"
                    " 'debugfiles', 'debugfiles_used')"
                    " FORMAT RowBinary",
                    c->db);
                r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
                q.n = 0;
                if (r < 0)
                        goto out;
                struct rd rd = ANSWER(c);
                if (RD_U64(&rd) != 0) {
                        r = fp_ch_failf(
                            c, -EPROTO,
                            "ClickHouse database '%s' holds tables fleetprof did not create:"
                            " name a database of its own",
                            c->db);
                        goto out;
                }
        }
        for (int64_t v = version + 1; v <= FP_CH_SCHEMA_VERSION; v++) {
                for (size_t i = 0; i < migrations[v - 1].n; i++)
                        if ((r = run_step(c, &migrations[v - 1].steps[i])) < 0)
                                goto out;
                if (migrations[v - 1].run && (r = migrations[v - 1].run(c)) < 0)
                        goto out;
                buf_printf(&q, "INSERT INTO %s.meta VALUES (%" PRId64 ", %" PRId64 ")", c->db, v,
                           (int64_t)fp_now_ns(CLOCK_REALTIME));
                r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
                q.n = 0;
                if (r < 0)
                        goto out;
        }
        /* A migration to version 4 that a collector crashed in is finished by the next. */
        if (c->writer && version == FP_CH_SCHEMA_VERSION && (r = resort_samples(c)) < 0)
                goto out;
        c->ready = true;
out:
        free(q.p);
        return r;
}

/* ---- opening ---- */

bool fp_ch_is_url(const char *spec)
{
        return spec && (strncmp(spec, "clickhouse://", 13) == 0 ||
                        strncmp(spec, "clickhouses://", 14) == 0);
}

static int parse_url(struct fp_ch *c, const char *url, char *err, size_t errlen)
{
        bool tls = strncmp(url, "clickhouses://", 14) == 0;
        const char *hp = url + (tls ? 14 : 13), *slash = strchr(hp, '/');
        size_t hp_len = slash ? (size_t)(slash - hp) : 0;

        if (!slash || hp_len == 0 || hp_len > 255)
                return fp_errf(err, errlen, -EINVAL,
                               "invalid store URL '%s': clickhouse://HOST:PORT/DATABASE", url);
        if (memchr(hp, '@', hp_len))
                return fp_errf(err, errlen, -EINVAL,
                               "the store URL must not hold credentials: put USER:PASSWORD in "
                               "the file --store-credentials names");
        for (size_t i = 0; i < hp_len; i++)
                if (!(hp[i] == '.' || hp[i] == '-' || hp[i] == ':' || hp[i] == '[' ||
                      hp[i] == ']' || (hp[i] >= '0' && hp[i] <= '9') ||
                      (hp[i] >= 'a' && hp[i] <= 'z') || (hp[i] >= 'A' && hp[i] <= 'Z')))
                        return fp_errf(
                            err, errlen, -EINVAL,
                            "invalid host in store URL '%s': clickhouse://HOST:PORT/DATABASE", url);
        const char *db = slash + 1;
        size_t db_len = strlen(db);
        if (db_len == 0 || db_len >= sizeof(c->db) || (db[0] >= '0' && db[0] <= '9'))
                return fp_errf(err, errlen, -EINVAL,
                               "invalid database in store URL '%s': a name of letters, digits "
                               "and _, e.g. clickhouse://127.0.0.1:8123/fleetprof",
                               url);
        for (size_t i = 0; i < db_len; i++)
                if (!(db[i] == '_' || (db[i] >= '0' && db[i] <= '9') ||
                      (db[i] >= 'a' && db[i] <= 'z') || (db[i] >= 'A' && db[i] <= 'Z')))
                        return fp_errf(err, errlen, -EINVAL,
                                       "invalid database in store URL '%s': a name of letters, "
                                       "digits and _",
                                       url);
        memcpy(c->db, db, db_len + 1);
        /* A port after the host (or after a bracketed IPv6 address), else the default. */
        const char *close = memchr(hp, ']', hp_len);
        const char *after = close ? close + 1 : hp;
        bool has_port = memchr(after, ':', (size_t)(slash - after)) != NULL;
        if (asprintf(&c->hostport, "%.*s%s", (int)hp_len, hp,
                     has_port ? ""
                     : tls    ? ":8443"
                              : ":8123") < 0 ||
            asprintf(&c->base, "%s://%s/", tls ? "https" : "http", c->hostport) < 0)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        return 0;
}

static int read_credentials(struct fp_ch *c, const char *path, char *err, size_t errlen)
{
        char *line = NULL, *colon;
        int r;

        if (!path) {
                c->user = strdup("default");
                c->password = strdup("");
                return c->user && c->password ? 0 : fp_errf(err, errlen, -ENOMEM, "out of memory");
        }
        r = fp_read_token_file(path, &line, err, errlen);
        if (r < 0)
                return r;
        colon = strchr(line, ':');
        if (!colon || colon == line) {
                free(line);
                return fp_errf(err, errlen, -EINVAL,
                               "store credentials file '%s': the first line must be USER:PASSWORD",
                               path);
        }
        *colon = 0;
        c->user = strdup(line);
        c->password = strdup(colon + 1);
        explicit_bzero(line, strlen(colon + 1) + (size_t)(colon - line) + 1);
        free(line);
        return c->user && c->password ? 0 : fp_errf(err, errlen, -ENOMEM, "out of memory");
}

void fp_ch_set_deadline(struct fp_ch *c, int64_t deadline_ns)
{
        c->deadline_ns = deadline_ns;
}

int fp_ch_open(const char *url, const char *credentials_file, uint64_t max_bytes, bool writer,
               struct fp_ch **ret, char *err, size_t errlen)
{
        struct fp_ch *c;
        int r;

        if (!fp_ch_is_url(url))
                return fp_errf(err, errlen, -EINVAL, "'%s' is not a clickhouse:// URL",
                               url ? url : "");
        c = calloc(1, sizeof(*c));
        if (!c)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        c->writer = writer;
        c->max_bytes = max_bytes;
        if ((r = parse_url(c, url, err, errlen)) < 0 ||
            (r = read_credentials(c, credentials_file, err, errlen)) < 0)
                goto fail;
        c->curl = curl_easy_init();
        if (!c->curl) {
                r = fp_errf(err, errlen, -ENOMEM, "out of memory");
                goto fail;
        }
        curl_easy_setopt(c->curl, CURLOPT_USERNAME, c->user);
        curl_easy_setopt(c->curl, CURLOPT_PASSWORD, c->password);
        curl_easy_setopt(c->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, fp_ch_on_answer);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
        curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 2L);
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
        r = setup(c);
        /*
         * Unreachable, or an error of ClickHouse's own: most often another
         * collector's schema step racing this one's (18.16 answers a RENAME
         * whose table another collector just dropped with 404): the collector
         * starts all the same and sets up on its next request.
         */
        if (r == -ECONNREFUSED || r == -ETIMEDOUT || r == -EHOSTUNREACH || r == -EAGAIN ||
            r == -EIO) {
                fp_errf(err, errlen, 0, "%s; will try again on every request", c->errmsg);
                *ret = c;
                return FP_CH_DEFERRED;
        }
        if (r < 0) {
                fp_errf(err, errlen, r, "%s", c->errmsg);
                goto fail;
        }
        *ret = c;
        return 0;
fail:
        fp_ch_close(c);
        return r;
}

void fp_ch_close(struct fp_ch *c)
{
        if (!c)
                return;
        if (c->curl)
                curl_easy_cleanup(c->curl);
        free(c->base);
        free(c->hostport);
        free(c->user);
        if (c->password) {
                explicit_bzero(c->password, strlen(c->password));
                free(c->password);
        }
        fp_store_map_free(&c->written);
        fp_store_map_free(&c->rollup_seen);
        fp_store_map_free(&c->rollup_days_seen);
        fp_store_map_free(&c->rollup_forget);
        free(c->answer.p);
        free(c);
}

const char *fp_ch_errmsg(const struct fp_ch *c)
{
        return c ? c->errmsg : "";
}

/* ---- writing ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
        return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static uint32_t hour_of(int64_t ns)
{
        int64_t h = floor_div(ns, HOUR_NS);
        return h < 0 ? 0 : (uint32_t)h;
}

static uint16_t day_of(int64_t ns)
{
        int64_t d = floor_div(ns, DAY_NS);
        return d < 0 ? 0 : d > 65535 ? 65535 : (uint16_t)d;
}

static uint64_t str_hash(const struct fp_store_batch *b, uint32_t i)
{
        return i == FP_BATCH_NONE ? 0 : b->strs[i].hash;
}

static uint64_t target_id(const struct fp_store_batch *b, const struct fp_batch_target *t)
{
        uint64_t h = fp_store_hash_step(FP_STORE_SEED_OTHER, str_hash(b, t->host));
        h = fp_store_hash_step(h, (uint64_t)(uint32_t)t->pid);
        return fp_store_hash_nonzero(fp_store_hash_step(h, t->starttime));
}

static uint64_t series_id(const struct fp_store_batch *b, const struct fp_batch_target *t,
                          const struct fp_batch_event *e)
{
        uint64_t h = target_id(b, t);
        const uint32_t s[] = {e->name,       e->count_type,  e->count_unit, e->value_type,
                              e->value_unit, e->period_type, e->period_unit};
        for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
                h = fp_store_hash_step(h, str_hash(b, s[i]));
        return fp_store_hash_nonzero(fp_store_hash_step(h, (uint64_t)e->period));
}

/* A dictionary row already stored by this handle for that day? Remembers it when not. */
static bool written_before(struct fp_ch *c, uint64_t table, uint16_t day, uint64_t id)
{
        uint64_t key =
            fp_store_hash_nonzero(fp_store_hash_step(fp_store_hash_step(table, day), id));
        if (fp_store_map_get(&c->written, key))
                return true;
        if (c->written.n >= WRITTEN_MAX)
                fp_store_map_clear(&c->written);
        (void)fp_store_map_put(&c->written, key, 1, 0); /* only a cache */
        return false;
}

struct rows {
        struct buf series, buckets, samples, drops, stacks, frames, functions, mappings, costs;
};

static void rows_free(struct rows *w)
{
        struct buf *all[] = {&w->series, &w->buckets,   &w->samples,  &w->drops, &w->stacks,
                             &w->frames, &w->functions, &w->mappings, &w->costs};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                free(all[i]->p);
}

/* The series of one batch: (target, event) with their sums. */
struct series_sum {
        uint32_t target, event;
        uint64_t count, value, rows;
};

static int add_series(struct series_sum **v, size_t *n, size_t *cap, uint32_t t, uint32_t e,
                      uint64_t count, uint64_t value, uint64_t rows)
{
        for (size_t i = 0; i < *n; i++)
                if ((*v)[i].target == t && (*v)[i].event == e) {
                        (*v)[i].count += count;
                        (*v)[i].value += value;
                        (*v)[i].rows += rows;
                        return 0;
                }
        if (fp_grow((void **)v, cap, *n + 1, sizeof(**v)) < 0)
                return -ENOMEM;
        (*v)[(*n)++] = (struct series_sum){t, e, count, value, rows};
        return 0;
}

static int batch_rows(struct fp_ch *c, const struct fp_store_batch *b, struct rows *w)
{
        int64_t start = b->start_ns, end = b->start_ns + b->length_ns,
                written = (int64_t)fp_now_ns(CLOCK_REALTIME);
        uint32_t hour = hour_of(start);
        uint16_t day = day_of(start);
        uint64_t upload;
        struct series_sum *ss = NULL;
        size_t n_ss = 0, cap_ss = 0;
        int r = 0;

        if (b->key)
                upload = fp_store_hash_nonzero(fp_store_hash_str(b->key, strlen(b->key)));
        else if (getrandom(&upload, sizeof(upload), 0) != sizeof(upload))
                upload = fp_now_ns(CLOCK_MONOTONIC) ^ (uint64_t)(uintptr_t)b;

        for (size_t i = 0; i < b->n_targets && r == 0; i++)
                if (b->targets[i].series_event)
                        r = add_series(&ss, &n_ss, &cap_ss, (uint32_t)i,
                                       b->targets[i].series_event - 1, 0, 0, 0);
        for (size_t i = 0; i < b->n_samples && r == 0; i++) {
                const struct fp_batch_sample *s = &b->samples[i];
                r = add_series(&ss, &n_ss, &cap_ss, b->threads[s->thread].target, s->event,
                               s->count, s->value, 1);
        }
        if (r < 0) {
                free(ss);
                return fp_ch_oom(c);
        }
        for (size_t i = 0; i < n_ss; i++) {
                const struct fp_batch_target *t = &b->targets[ss[i].target];
                const struct fp_batch_event *e = &b->events[ss[i].event];
                uint64_t sid = series_id(b, t, e);
                /*
                 * What a series is changes seldom: its row is written when
                 * this handle has not written the same one that day (the
                 * newest version wins, and an older row that says the same
                 * is as good). Every upload still has its buckets row.
                 */
                const uint32_t said[] = {t->comm, t->exe, t->config, t->service, t->container};
                uint64_t h = fp_store_hash_step(sid, t->active);
                for (size_t k = 0; k < sizeof(said) / sizeof(said[0]); k++)
                        h = fp_store_hash_step(h, str_hash(b, said[k]));
                if (written_before(c, FP_CH_SEED_SERIES, day, fp_store_hash_nonzero(h)))
                        goto bucket;
                rb_uint(&w->series, day, 2);
                rb_uint(&w->series, sid, 8);
                rb_uint(&w->series, target_id(b, t), 8);
                rb_str(&w->series, fp_batch_str_at(b, t->host));
                rb_uint(&w->series, (uint32_t)t->pid, 4);
                rb_uint(&w->series, t->starttime, 8);
                rb_str(&w->series, fp_batch_str_at(b, t->comm));
                rb_str(&w->series, fp_batch_str_at(b, t->exe));
                rb_str(&w->series, fp_batch_str_at(b, t->config));
                rb_uint(&w->series, t->active, 1);
                rb_str(&w->series, fp_batch_str_at(b, t->service));
                rb_str(&w->series, fp_batch_str_at(b, e->name));
                rb_str(&w->series, fp_batch_str_at(b, e->count_type));
                rb_str(&w->series, fp_batch_str_at(b, e->count_unit));
                rb_str(&w->series, fp_batch_str_at(b, e->value_type));
                rb_str(&w->series, fp_batch_str_at(b, e->value_unit));
                rb_str(&w->series, fp_batch_str_at(b, e->period_type));
                rb_str(&w->series, fp_batch_str_at(b, e->period_unit));
                rb_uint(&w->series, (uint64_t)e->period, 8);
                rb_uint(&w->series, (uint64_t)end, 8);
                rb_uint(&w->series, (uint64_t)written, 8);
                rb_str(&w->series, fp_batch_str_at(b, t->container));
        bucket:
                rb_uint(&w->buckets, hour, 4);
                rb_uint(&w->buckets, upload, 8);
                rb_uint(&w->buckets, sid, 8);
                rb_uint(&w->buckets, (uint64_t)start, 8);
                rb_uint(&w->buckets, (uint64_t)b->length_ns, 8);
                rb_uint(&w->buckets, ss[i].count, 8);
                rb_uint(&w->buckets, ss[i].value, 8);
                rb_uint(&w->buckets, ss[i].rows, 8);
                rb_str(&w->buckets, b->key ? b->key : "");
        }
        for (size_t i = 0; i < b->n_samples; i++) {
                const struct fp_batch_sample *s = &b->samples[i];
                const struct fp_batch_thread *th = &b->threads[s->thread];
                rb_uint(&w->samples, hour, 4);
                rb_uint(&w->samples, (uint64_t)start, 8);
                rb_uint(&w->samples, series_id(b, &b->targets[th->target], &b->events[s->event]),
                        8);
                rb_uint(&w->samples, (uint64_t)b->length_ns, 8);
                rb_uint(&w->samples, upload, 8);
                rb_uint(&w->samples, b->stacks[s->stack].hash, 8);
                rb_uint(&w->samples, (uint32_t)th->tid, 4);
                rb_thread(&w->samples, fp_batch_str_at(b, th->name), fp_batch_str_at(b, th->wait));
                rb_uint(&w->samples, s->count, 8);
                rb_uint(&w->samples, s->value, 8);
        }
        for (size_t i = 0; i < b->n_drops; i++) {
                const struct fp_batch_drop *d = &b->drops[i];
                rb_uint(&w->drops, hour, 4);
                rb_uint(&w->drops, (uint64_t)start, 8);
                rb_uint(&w->drops, (uint64_t)b->length_ns, 8);
                rb_uint(&w->drops, upload, 8);
                rb_uint(&w->drops, target_id(b, &b->targets[d->target]), 8);
                rb_str(&w->drops, fp_batch_str_at(b, d->reason));
                rb_uint(&w->drops, d->count, 8);
        }
        for (size_t i = 0; i < b->n_stacks; i++) {
                const struct fp_batch_stack *st = &b->stacks[i];
                if (written_before(c, FP_STORE_SEED_STACK, day, st->hash))
                        continue;
                rb_uint(&w->stacks, day, 2);
                rb_uint(&w->stacks, st->hash, 8);
                rb_len(&w->stacks, st->n);
                for (uint32_t k = 0; k < st->n; k++)
                        rb_uint(&w->stacks, b->frames[b->frame_ids[st->off + k]].hash, 8);
        }
        for (size_t i = 0; i < b->n_frames; i++) {
                const struct fp_batch_frame *fr = &b->frames[i];
                uint64_t mid = fr->mapping == FP_BATCH_NONE ? 0 : b->mappings[fr->mapping].hash;
                if (fr->function_hash &&
                    !written_before(c, FP_STORE_SEED_FUNCTION, day, fr->function_hash)) {
                        rb_uint(&w->functions, day, 2);
                        rb_uint(&w->functions, fr->function_hash, 8);
                        rb_str(&w->functions, fp_batch_str_at(b, fr->function));
                        rb_str(&w->functions, fp_batch_str_at(b, fr->system_name)); /* NONE: "" */
                        rb_str(&w->functions, fp_batch_str_at(b, fr->filename));
                }
                if (written_before(c, FP_STORE_SEED_FRAME, day, fr->hash))
                        continue;
                rb_uint(&w->frames, day, 2);
                rb_uint(&w->frames, fr->hash, 8);
                rb_uint(&w->frames, mid, 8);
                rb_uint(&w->frames, fr->function_hash, 8);
                rb_uint(&w->frames, fr->address, 8);
                rb_uint(&w->frames, (uint64_t)fr->line, 8);
        }
        for (size_t i = 0; i < b->n_mappings; i++) {
                const struct fp_batch_mapping *m = &b->mappings[i];
                /*
                 * Written again once its ELF address is known (an older agent's row
                 * first): reads take the row that has it, and the table keeps the
                 * last row written of a mapping_id.
                 */
                if (written_before(c, FP_STORE_SEED_MAPPING, day, m->vaddr1 ? ~m->hash : m->hash))
                        continue;
                rb_uint(&w->mappings, day, 2);
                rb_uint(&w->mappings, m->hash, 8);
                rb_str(&w->mappings, fp_batch_str_at(b, m->file));
                rb_str(&w->mappings, fp_batch_str_at(b, m->build_id));
                rb_uint(&w->mappings, m->start, 8);
                rb_uint(&w->mappings, m->limit, 8);
                rb_uint(&w->mappings, m->offset, 8);
                rb_uint(&w->mappings, m->vaddr1, 8);
        }
        if (b->cost.host_cpus && b->cost.to_ns > b->cost.from_ns && b->n_targets) {
                rb_uint(&w->costs, day_of(b->cost.from_ns), 2);
                rb_str(&w->costs, fp_batch_str_at(b, b->targets[0].host));
                rb_uint(&w->costs, (uint64_t)b->cost.from_ns, 8);
                rb_uint(&w->costs, (uint64_t)b->cost.to_ns, 8);
                rb_uint(&w->costs, b->cost.agent_cpu_ns, 8);
                rb_uint(&w->costs, b->cost.agent_rss_bytes, 8);
                rb_uint(&w->costs, b->cost.host_cpus, 4);
        }
        free(ss);
        return 0;
}

/* Marks results[i] -EALREADY for keys already stored (or earlier in the group). */
static int known_keys(struct fp_ch *c, const struct fp_store_batch *const *batches, size_t n,
                      int *results)
{
        struct buf q = {0}, where = {0};
        bool any = false;
        int r;

        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < i; k++)
                        if (batches[i]->key && batches[k]->key &&
                            strcmp(batches[k]->key, batches[i]->key) == 0)
                                results[i] = -EALREADY;
        buf_printf(&where, "key IN (");
        for (size_t i = 0; i < n; i++)
                if (batches[i]->key) {
                        buf_printf(&where, "%s", any ? ", " : "");
                        buf_lit(&where, batches[i]->key);
                        any = true;
                }
        buf_printf(&where, ") AND hour IN (");
        for (size_t i = 0, first = 1; i < n; i++)
                if (batches[i]->key) {
                        buf_printf(&where, "%s%" PRIu32, first ? "" : ", ",
                                   hour_of(batches[i]->start_ns));
                        first = 0;
                }
        buf_printf(&where, ")");
        /* Keys are in buckets since schema version 3, in upload_keys before. */
        buf_printf(&q,
                   "SELECT DISTINCT key FROM (SELECT key FROM %s.buckets WHERE %.*s"
                   " UNION ALL SELECT key FROM %s.upload_keys WHERE %.*s) FORMAT RowBinary",
                   c->db, (int)where.n, where.p ? where.p : "", c->db, (int)where.n,
                   where.p ? where.p : "");
        q.oom = q.oom || where.oom;
        free(where.p);
        r = any ? fp_ch_exec(c, &q, READ_TIMEOUT_S) : 0;
        free(q.p);
        if (r < 0 || !any)
                return r;
        struct rd rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad) {
                const char *key = rd_str(&rd);
                for (size_t i = 0; i < n && !rd.bad; i++)
                        if (batches[i]->key && strcmp(batches[i]->key, key) == 0)
                                results[i] = -EALREADY;
        }
        return rd.bad ? fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer to a key query",
                                    c->hostport)
                      : 0;
}

static int upkeep(struct fp_ch *c, int64_t before_ns);

int fp_ch_write_batches(struct fp_ch *c, const struct fp_store_batch *const *batches, size_t n,
                        int *results)
{
        struct rows w = {0};
        size_t stored = 0;
        int r;

        c->errmsg[0] = 0;
        for (size_t i = 0; i < n; i++)
                results[i] = 0;
        if (!c->writer)
                return fp_ch_failf(c, -EROFS, "ClickHouse store: opened for reads only");
        if ((r = setup(c)) < 0 || (r = known_keys(c, batches, n, results)) < 0)
                goto fail;
        for (size_t i = 0; i < n; i++) {
                if (results[i] == -EALREADY)
                        continue;
                if ((r = batch_rows(c, batches[i], &w)) < 0)
                        goto fail;
                stored++;
        }
        /*
         * Dictionaries first, buckets (which hold the keys) last: a crash
         * in between leaves rows a retry writes again (reads count them
         * once), never a key without its samples.
         */
        if ((r = fp_ch_insert(
                 c, "mappings",
                 "day, mapping_id, file, build_id, memory_start, memory_limit, file_offset,"
                 " vaddr1",
                 &w.mappings)) < 0 ||
            (r = fp_ch_insert(c, "functions", "day, function_id, name, system_name, filename",
                              &w.functions)) < 0 ||
            (r = fp_ch_insert(c, "frames", "day, frame_id, mapping_id, function_id, address, line",
                              &w.frames)) < 0 ||
            (r = fp_ch_insert(c, "stacks", "day, stack_id, frames", &w.stacks)) < 0 ||
            (r = fp_ch_insert(c, "series",
                              "day, series_id, target_id, host, pid, starttime, comm, exe, config,"
                              " active, service, event, count_type, count_unit, value_type,"
                              " value_unit, period_type, period_unit, period, version, written_ns,"
                              " container",
                              &w.series)) < 0 ||
            (r = fp_ch_insert(c, "samples",
                              "hour, start_ns, series_id, length_ns, upload, stack_id, tid,"
                              " thread_name, count, value",
                              &w.samples)) < 0 ||
            (r = fp_ch_insert(c, "drops",
                              "hour, start_ns, length_ns, upload, target_id, reason, count",
                              &w.drops)) < 0 ||
            (r = fp_ch_insert(c, "costs",
                              "day, host, from_ns, to_ns, agent_cpu_ns, agent_rss, host_cpus",
                              &w.costs)) < 0 ||
            (r = fp_ch_insert(
                 c, "buckets",
                 "hour, upload, series_id, start_ns, length_ns, count, value, rows, key",
                 &w.buckets)) < 0)
                goto fail;
        rows_free(&w);
        if (c->max_bytes && (int64_t)fp_now_ns(CLOCK_MONOTONIC) >= c->next_upkeep_ns) {
                c->next_upkeep_ns = (int64_t)fp_now_ns(CLOCK_MONOTONIC) + UPKEEP_EVERY_NS;
                if (upkeep(c, 0) < 0)
                        c->errmsg[0] = 0; /* the budget is kept next time; the write stands */
        }
        return (int)stored;
fail:
        rows_free(&w);
        /* What this handle thought written may not be: forget it. */
        fp_store_map_clear(&c->written);
        for (size_t i = 0; i < n; i++)
                if (results[i] != -EALREADY)
                        results[i] = r;
        return r;
}

/* ---- space and retention ---- */

struct part {
        bool hourly;
        uint32_t when; /* hour, or day */
        uint64_t bytes, rows;
        char id[24];
};

static int load_parts(struct fp_ch *c, struct part **ret, size_t *ret_n)
{
        struct buf q = {0};
        struct part *v = NULL;
        size_t n = 0, cap = 0;
        int r;

        buf_printf(&q,
                   "SELECT table, partition_id, toUInt64(sum(bytes_on_disk)),"
                   " toUInt64(sumIf(rows, table = 'buckets')) FROM system.parts"
                   " WHERE database = '%s' AND active AND table NOT IN ('meta', 'debugfiles',"
                   " 'debugfiles_used') GROUP BY table, partition_id FORMAT RowBinary",
                   c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad) {
                const char *table = rd_str(&rd), *id = rd_str(&rd);
                uint64_t bytes = RD_U64(&rd), rows = RD_U64(&rd);
                bool hourly = false;
                for (size_t i = 0; i < N_HOUR_TABLES; i++)
                        hourly = hourly || strcmp(table, hour_tables[i]) == 0;
                /* Day partition ids are YYYYMMDD; hour ids the hour's number. */
                struct part p = {.hourly = hourly, .bytes = bytes, .rows = rows};
                snprintf(p.id, sizeof(p.id), "%s", id);
                if (hourly) {
                        p.when = (uint32_t)strtoul(id, NULL, 10);
                } else {
                        struct tm tm = {0};
                        if (strlen(id) != 8 || !strptime(id, "%Y%m%d", &tm))
                                continue;
                        p.when = (uint32_t)(timegm(&tm) / 86400);
                }
                size_t k;
                for (k = 0; k < n; k++)
                        if (v[k].hourly == p.hourly && v[k].when == p.when)
                                break;
                if (k == n) {
                        if (fp_grow((void **)&v, &cap, n + 1, sizeof(*v)) < 0) {
                                free(v);
                                return fp_ch_oom(c);
                        }
                        v[n++] = p;
                } else {
                        v[k].bytes += bytes;
                        v[k].rows += rows;
                }
        }
        if (rd.bad) {
                free(v);
                return fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about parts",
                                   c->hostport);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static int drop_partition(struct fp_ch *c, const struct part *p)
{
        const char *const *tables = p->hourly ? hour_tables : day_tables;
        size_t n = p->hourly ? N_HOUR_TABLES : N_DAY_TABLES;
        struct buf q = {0};
        int r = 0;

        for (size_t i = 0; i < n && r == 0; i++) {
                q.n = 0;
                buf_printf(&q, "ALTER TABLE %s.%s DROP PARTITION ID '%s'", c->db, tables[i], p->id);
                r = fp_ch_exec(c, &q, WRITE_TIMEOUT_S);
        }
        free(q.p);
        return r;
}

static int part_cmp(const void *a, const void *b)
{
        const struct part *x = a, *y = b;
        /* Oldest first; of one day, its hours before the day itself. */
        uint64_t kx = x->hourly ? (uint64_t)x->when * 2 : ((uint64_t)x->when * 24 + 24) * 2 - 1;
        uint64_t ky = y->hourly ? (uint64_t)y->when * 2 : ((uint64_t)y->when * 24 + 24) * 2 - 1;
        return kx < ky ? -1 : kx > ky;
}

/*
 * Drops whole partitions, oldest first: those that ended at or before
 * before_ns, then more while the tables are over the byte budget (never
 * the newest hour). Returns the uploads deleted.
 */
static int upkeep(struct fp_ch *c, int64_t before_ns)
{
        struct part *v = NULL;
        size_t n = 0;
        uint64_t total = 0, deleted = 0;
        uint32_t newest_hour = 0;
        int r = load_parts(c, &v, &n);

        if (r < 0)
                return r;
        if (n) /* no parts: v is NULL */
                qsort(v, n, sizeof(*v), part_cmp);
        for (size_t i = 0; i < n; i++) {
                total += v[i].bytes;
                if (v[i].hourly && v[i].when > newest_hour)
                        newest_hour = v[i].when;
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                const struct part *p = &v[i];
                int64_t end =
                    p->hourly ? ((int64_t)p->when + 1) * HOUR_NS : ((int64_t)p->when + 1) * DAY_NS;
                bool expired = before_ns && end <= before_ns;
                bool over = c->max_bytes && total > c->max_bytes;
                /* A day's dictionaries go once none of its hours is left. */
                bool hours_left = false;
                for (size_t k = i + 1; !p->hourly && k < n; k++)
                        hours_left = hours_left || (v[k].hourly && v[k].when / 24 == p->when);
                if (p->hourly && p->when == newest_hour && !expired)
                        break;
                if (!expired && !over)
                        break;
                if (!p->hourly && hours_left)
                        continue;
                r = drop_partition(c, p);
                if (r == 0) {
                        total -= p->bytes;
                        deleted += p->rows;
                }
        }
        free(v);
        if (r == 0 && deleted)
                fp_store_map_clear(&c->written);
        return r < 0 ? r : (int)(deleted > INT32_MAX ? INT32_MAX : deleted);
}

void fp_ch_set_summaries(struct fp_ch *c, bool on)
{
        c->rollups_off = !on;
}

int fp_ch_rollup_step(struct fp_ch *c, int64_t now_ns, int64_t grace_ns)
{
        int r;

        c->errmsg[0] = 0;
        if (!c->writer || c->rollups_off)
                return 0;
        if ((r = setup(c)) < 0)
                return r;
        return fp_ch_rollups_keep(c, now_ns, grace_ns);
}

int fp_ch_expire(struct fp_ch *c, int64_t before_ns)
{
        int r;

        c->errmsg[0] = 0;
        if ((r = setup(c)) < 0)
                return r;
        return upkeep(c, before_ns ? before_ns : 1);
}

/* ---- reads ---- */

/* What a (target, event) is: the series table's newest values. */
struct meta {
        uint64_t series_id, target_id;
        const char *host;
        int32_t pid;
        uint64_t starttime;
        const char *comm, *exe, *config;
        bool active;
        const char *service, *container, *event, *types[4], *period_type, *period_unit;
        int64_t period;
        /* From the buckets: */
        int64_t first_ns, last_ns;
        uint64_t uploads, count, value;
        bool matched;
};

struct metas {
        struct meta *v;
        size_t n, cap;
        uint8_t *answer;         /* the strings point into it */
        struct fp_store_map idx; /* series_id -> index + 1 */
};

static void metas_free(struct metas *m)
{
        free(m->v);
        free(m->answer);
        fp_store_map_free(&m->idx);
}

/* The series table reduced to one row per series, as a subquery. */
static void meta_from(struct fp_ch *c, struct buf *q)
{
        buf_printf(q,
                   "(SELECT series_id, any(target_id) AS m_target, any(host) AS m_host,"
                   " any(pid) AS m_pid, any(starttime) AS m_starttime,"
                   " argMax(comm, version) AS m_comm, argMax(exe, version) AS m_exe,"
                   " argMax(config, version) AS m_config, argMax(active, version) AS m_active,"
                   " argMax(service, version) AS m_service,"
                   " argMax(container, version) AS m_container, any(event) AS m_event,"
                   " any(count_type) AS m_ct, any(count_unit) AS m_cu, any(value_type) AS m_vt,"
                   " any(value_unit) AS m_vu, any(period_type) AS m_pt,"
                   " any(period_unit) AS m_pu, any(period) AS m_period"
                   " FROM %s.series GROUP BY series_id)",
                   c->db);
}

/* The filter's conditions on the target (and event): a WHERE over meta_from()'s columns. */
static void meta_where(struct buf *q, const struct fp_store_filter *f, bool with_event)
{
        buf_printf(q, " WHERE 1");
        if (f->host) {
                buf_printf(q, " AND m_host = ");
                buf_lit(q, f->host);
        }
        if (f->pid)
                buf_printf(q, " AND m_pid = %d", (int)f->pid);
        if (f->tier)
                buf_printf(q, " AND m_pid %s 0", f->tier == FP_STORE_TIER_HOST ? "=" : "!=");
        if (f->starttime)
                buf_printf(q, " AND m_starttime = %" PRIu64, f->starttime);
        if (f->process) {
                buf_printf(q, " AND m_comm = ");
                buf_lit(q, f->process);
        }
        if (f->service) {
                buf_printf(q, " AND m_service = ");
                buf_lit(q, f->service);
        }
        if (f->container) {
                buf_printf(q, " AND m_container = ");
                buf_lit(q, f->container);
        }
        if (f->config_word) {
                buf_printf(q, " AND position(concat(' ', m_config, ' '), concat(' ', ");
                buf_lit(q, f->config_word);
                buf_printf(q, ", ' ')) > 0");
        }
        if (with_event && f->event) {
                buf_printf(q, " AND m_event = ");
                buf_lit(q, f->event);
        }
}

static bool is_wall(const struct meta *ref)
{
        return strcmp(ref->event, FP_STORE_WALL_EVENT) == 0;
}

/*
 * The series of ref's event (and sample types) among those f selects: a
 * condition over meta_from()'s columns. The wall profile's: the off-CPU
 * series and the CPU-time series of the targets that have one.
 */
static void event_where(struct fp_ch *c, struct buf *q, const struct fp_store_filter *f,
                        const struct meta *ref)
{
        static const char *const cols[] = {"m_ct", "m_cu", "m_vt", "m_vu"};

        if (is_wall(ref)) {
                buf_printf(q, " AND m_vu = 'nanoseconds' AND (m_event = '" FP_STORE_OFFCPU_EVENT "'"
                              " OR m_event = '" FP_STORE_WALL_EVENT "'"
                              " OR (m_event IN ('cpu-clock', 'task-clock') AND m_target IN"
                              " (SELECT m_target FROM ");
                meta_from(c, q);
                meta_where(q, f, false);
                buf_printf(q, " AND m_event = '" FP_STORE_OFFCPU_EVENT "')))");
                return;
        }
        buf_printf(q, " AND m_event = ");
        buf_lit(q, ref->event);
        for (int k = 0; k < 4; k++) {
                buf_printf(q, " AND %s = ", cols[k]);
                buf_lit(q, ref->types[k]);
        }
}

/* The filter's time range over a table with start_ns (and length_ns, or len_expr). */
static void time_where(struct buf *q, const struct fp_store_filter *f, const char *len_expr)
{
        if (f->since_ns)
                buf_printf(q, " AND start_ns + %s > %" PRId64, len_expr, f->since_ns);
        if (f->until_ns)
                buf_printf(q, " AND start_ns < %" PRId64 " AND hour <= %" PRIu32, f->until_ns,
                           hour_of(f->until_ns));
}

/* What load_metas() learns of each series' buckets in the range. */
enum metas_want {
        METAS_SERIES, /* nothing: the series only */
        METAS_RANGE,  /* matched, first_ns and last_ns */
        METAS_TOTALS, /* those, and uploads, count and value (each upload once) */
};

/* One buckets row: an upload's sums for one series. */
struct bucket_row {
        uint64_t series_id, upload;
        int64_t start_ns, length_ns;
        uint64_t count, value;
};

static int bucket_row_cmp(const void *a, const void *b)
{
        const struct bucket_row *x = a, *y = b;
        if (x->start_ns != y->start_ns)
                return x->start_ns < y->start_ns ? -1 : 1;
        return x->series_id < y->series_id ? -1 : x->series_id > y->series_id;
}

/*
 * The buckets rows in f's range of the series the SQL in series (" IN
 * (...)") selects, each (series, upload) once, sorted by start and series.
 * Rows written twice (a retry, a race) are told apart here rather than
 * grouped by upload in ClickHouse, which costs more than the rows.
 */
static int load_bucket_rows(struct fp_ch *c, const struct fp_store_filter *f,
                            const struct buf *series, struct bucket_row **ret, size_t *ret_n)
{
        struct fp_store_map seen = {0};
        struct bucket_row *v = NULL;
        size_t n = 0, cap = 0;
        struct buf q = {0};
        int r;

        buf_printf(&q,
                   "SELECT series_id, upload, start_ns, length_ns, count, value FROM %s.buckets"
                   " WHERE series_id%s",
                   c->db, series->p ? series->p : " IN (0)");
        q.oom = q.oom || series->oom;
        time_where(&q, f, "length_ns");
        buf_printf(&q, " FORMAT RowBinary");
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        struct rd rd = ANSWER(c);
        while (r == 0 && rd.p < rd.end && !rd.bad) {
                struct bucket_row x;
                x.series_id = RD_U64(&rd);
                x.upload = RD_U64(&rd);
                x.start_ns = RD_I64(&rd);
                x.length_ns = RD_I64(&rd);
                x.count = RD_U64(&rd);
                x.value = RD_U64(&rd);
                uint64_t key = fp_store_hash_nonzero(fp_store_hash_step(x.series_id, x.upload));
                if (rd.bad || fp_store_map_get(&seen, key))
                        continue;
                if (fp_store_map_put(&seen, key, 0, 0) < 0 ||
                    fp_grow((void **)&v, &cap, n + 1, sizeof(*v)) < 0)
                        r = fp_ch_oom(c);
                else
                        v[n++] = x;
        }
        if (r == 0 && rd.bad)
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about buckets",
                                c->hostport);
        fp_store_map_free(&seen);
        if (r < 0) {
                free(v);
                return r;
        }
        if (n)
                qsort(v, n, sizeof(*v), bucket_row_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

/*
 * Loads the series f selects (with_event: of f->event only), with what
 * want asks of their buckets in f's time range; matched marks those with
 * buckets (METAS_RANGE, METAS_TOTALS).
 */
static int load_metas(struct fp_ch *c, const struct fp_store_filter *f, bool with_event,
                      enum metas_want want, struct metas *m)
{
        struct buf q = {0};
        int r;

        buf_printf(&q,
                   "SELECT series_id, m_target, m_host, m_pid, m_starttime, m_comm, m_exe,"
                   " m_config, m_active, m_service, m_event, m_ct, m_cu, m_vt, m_vu, m_pt, m_pu,"
                   " m_period, m_container FROM ");
        meta_from(c, &q);
        meta_where(&q, f, with_event);
        buf_printf(&q, " FORMAT RowBinary");
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        /* Keep the answer: the strings live in it. */
        m->answer = (uint8_t *)c->answer.p;
        struct rd rd = {m->answer, m->answer + c->answer.n, false};
        c->answer = (struct buf){0};
        while (rd.p < rd.end && !rd.bad) {
                if (fp_grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)) < 0)
                        return fp_ch_oom(c);
                struct meta *x = &m->v[m->n];
                *x = (struct meta){.series_id = RD_U64(&rd)};
                x->target_id = RD_U64(&rd);
                x->host = rd_str(&rd);
                x->pid = RD_I32(&rd);
                x->starttime = RD_U64(&rd);
                x->comm = rd_str(&rd);
                x->exe = rd_str(&rd);
                x->config = rd_str(&rd);
                x->active = RD_U8(&rd) != 0;
                x->service = rd_str(&rd);
                x->event = rd_str(&rd);
                for (int k = 0; k < 4; k++)
                        x->types[k] = rd_str(&rd);
                x->period_type = rd_str(&rd);
                x->period_unit = rd_str(&rd);
                x->period = RD_I64(&rd);
                x->container = rd_str(&rd);
                if (!rd.bad && fp_store_map_put(&m->idx, x->series_id, m->n + 1, 0) < 0)
                        return fp_ch_oom(c);
                m->n++;
        }
        if (rd.bad)
                return fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about series",
                                   c->hostport);
        if (!m->n || want == METAS_SERIES)
                return 0;

        struct buf in = {0};
        buf_printf(&in, " IN (SELECT series_id FROM ");
        meta_from(c, &in);
        meta_where(&in, f, with_event);
        buf_printf(&in, ")");
        if (want == METAS_TOTALS) {
                /* Each upload counted once. */
                struct bucket_row *rows = NULL;
                size_t n_rows = 0;
                r = load_bucket_rows(c, f, &in, &rows, &n_rows);
                free(in.p);
                for (size_t i = 0; r == 0 && i < n_rows; i++) {
                        struct fp_store_map_entry *e = fp_store_map_get(&m->idx, rows[i].series_id);
                        if (!e)
                                continue;
                        struct meta *x = &m->v[e->a - 1];
                        int64_t end = rows[i].start_ns + rows[i].length_ns;
                        if (!x->matched || rows[i].start_ns < x->first_ns)
                                x->first_ns = rows[i].start_ns;
                        if (!x->matched || end > x->last_ns)
                                x->last_ns = end;
                        x->matched = true;
                        x->uploads++;
                        x->count += rows[i].count;
                        x->value += rows[i].value;
                }
                free(rows);
                return r;
        }
        /* The first and last of each series' uploads: a row written twice changes neither. */
        q = (struct buf){0};
        buf_printf(&q,
                   "SELECT series_id, min(start_ns), max(start_ns + length_ns) FROM %s.buckets"
                   " WHERE series_id%s",
                   c->db, in.p ? in.p : "");
        q.oom = q.oom || in.oom;
        free(in.p);
        time_where(&q, f, "length_ns");
        buf_printf(&q, " GROUP BY series_id FORMAT RowBinary");
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad) {
                uint64_t sid = RD_U64(&rd);
                int64_t first = RD_I64(&rd), last = RD_I64(&rd);
                struct fp_store_map_entry *e = fp_store_map_get(&m->idx, sid);
                if (rd.bad || !e)
                        continue;
                struct meta *x = &m->v[e->a - 1];
                x->matched = true;
                x->first_ns = first;
                x->last_ns = last;
        }
        if (rd.bad)
                return fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about buckets",
                                   c->hostport);
        return 0;
}

static int meta_cmp(const void *a, const void *b)
{
        const struct meta *x = a, *y = b;
        int d = strcmp(x->host, y->host);
        if (d)
                return d;
        if (x->pid != y->pid)
                return x->pid < y->pid ? -1 : 1;
        if (x->starttime != y->starttime)
                return x->starttime < y->starttime ? -1 : 1;
        return strcmp(x->event, y->event);
}

int fp_ch_setup(struct fp_ch *c)
{
        c->errmsg[0] = 0;
        return setup(c);
}

static int start_read(struct fp_ch *c, const struct fp_store_filter *f)
{
        c->errmsg[0] = 0;
        if (f && (f->bucket_min || f->bucket_max))
                return fp_ch_failf(c, -EINVAL, "ClickHouse store: bucket ids do not apply");
        return setup(c);
}

int fp_ch_list_series(struct fp_ch *c, const struct fp_store_filter *f, fp_store_series_fn fn,
                      void *userdata)
{
        struct fp_store_filter none = {0};
        struct metas m = {0};
        int n = 0, r;

        if (!f)
                f = &none;
        if ((r = start_read(c, f)) < 0 ||
            (r = load_metas(c, f, true, f->no_totals ? METAS_RANGE : METAS_TOTALS, &m)) < 0)
                goto out;
        if (m.n)
                qsort(m.v, m.n, sizeof(*m.v), meta_cmp);
        /* One entry per (target, event name), as the SQLite store lists them. */
        for (size_t i = 0; i < m.n && r >= 0;) {
                struct meta *x = &m.v[i];
                struct fp_store_series se = {0};
                bool any = false;
                size_t k;
                for (k = i; k < m.n && m.v[k].target_id == x->target_id &&
                            strcmp(m.v[k].event, x->event) == 0;
                     k++) {
                        const struct meta *y = &m.v[k];
                        if (!y->matched)
                                continue;
                        if (!any || y->first_ns < se.first_ns)
                                se.first_ns = y->first_ns;
                        if (!any || y->last_ns > se.last_ns)
                                se.last_ns = y->last_ns;
                        se.buckets += y->uploads;
                        se.count += y->count;
                        se.value += y->value;
                        any = true;
                }
                if (any) {
                        se.host = x->host;
                        se.pid = x->pid;
                        se.starttime = x->starttime;
                        se.comm = x->comm;
                        se.exe = x->exe;
                        se.config = x->config;
                        se.active = x->active;
                        se.event = x->event;
                        se.service = x->service;
                        se.container = x->container;
                        se.count_type = x->types[0];
                        se.count_unit = x->types[1];
                        se.value_type = x->types[2];
                        se.value_unit = x->types[3];
                        se.period_type = x->period_type;
                        se.period_unit = x->period_unit;
                        r = fn(userdata, &se);
                        n++;
                }
                i = k;
        }
out:
        metas_free(&m);
        return r < 0 ? r : n;
}

int fp_ch_timeline(struct fp_ch *c, const struct fp_store_filter *f, fp_store_point_fn fn,
                   void *userdata)
{
        struct fp_store_filter none = {0};
        struct metas m = {0};
        struct buf q = {0};
        struct bucket_row *rows = NULL;
        size_t n_rows = 0;
        int n = 0, r;

        if (!f)
                f = &none;
        bool wall = f->event && strcmp(f->event, FP_STORE_WALL_EVENT) == 0;
        struct meta wall_ref = {.event = FP_STORE_WALL_EVENT};
        if ((r = start_read(c, f)) < 0 || (r = load_metas(c, f, !wall, METAS_SERIES, &m)) < 0 ||
            !m.n)
                goto out;
        buf_printf(&q, " IN (SELECT series_id FROM ");
        meta_from(c, &q);
        meta_where(&q, f, !wall);
        if (wall)
                event_where(c, &q, f, &wall_ref);
        buf_printf(&q, ")");
        if ((r = load_bucket_rows(c, f, &q, &rows, &n_rows)) < 0)
                goto out;
        for (size_t i = 0; i < n_rows && r >= 0; i++) {
                struct fp_store_map_entry *e = fp_store_map_get(&m.idx, rows[i].series_id);
                if (!e)
                        continue;
                const struct meta *x = &m.v[e->a - 1];
                struct fp_store_point pt = {.start_ns = rows[i].start_ns,
                                            .length_ns = rows[i].length_ns,
                                            .count = rows[i].count,
                                            .value = rows[i].value};
                pt.event = wall ? FP_STORE_WALL_EVENT : x->event;
                if (f->by_series) {
                        pt.host = x->host;
                        pt.pid = x->pid;
                        pt.starttime = x->starttime;
                }
                r = fn(userdata, &pt);
                n++;
        }
out:
        free(rows);
        free(q.p);
        metas_free(&m);
        return r < 0 ? r : n;
}

/* target id -> index + 1 of its first loaded series. */
static int target_index(struct fp_ch *c, const struct metas *m, struct fp_store_map *ret)
{
        for (size_t i = 0; i < m->n; i++)
                if (!fp_store_map_get(ret, m->v[i].target_id) &&
                    fp_store_map_put(ret, m->v[i].target_id, i + 1, 0) < 0)
                        return fp_ch_oom(c);
        return 0;
}

struct drop_row {
        size_t meta;
        const char *reason;
        uint64_t count;
};

static int drop_cmp(const void *a, const void *b, void *ud)
{
        const struct drop_row *x = a, *y = b;
        const struct metas *m = ud;
        int d = meta_cmp(&m->v[x->meta], &m->v[y->meta]);
        return d ? d : strcmp(x->reason, y->reason);
}

int fp_ch_drop_totals(struct fp_ch *c, const struct fp_store_filter *f, fp_store_drop_fn fn,
                      void *userdata)
{
        struct fp_store_filter none = {0};
        struct metas m = {0};
        struct fp_store_map seen = {0};
        struct buf q = {0}, targets = {0};
        struct fp_ch_plan plan = {0};
        struct drop_row *rows = NULL;
        size_t n_rows = 0, cap_rows = 0;
        int n = 0, r;

        if (!f)
                f = &none;
        if ((r = start_read(c, f)) < 0 || (r = load_metas(c, f, false, METAS_SERIES, &m)) < 0 ||
            !m.n || (r = target_index(c, &m, &seen)) < 0 ||
            (r = fp_ch_read_plan(c, f->since_ns, f->until_ns, &plan)) < 0)
                goto out;
        /* The raw rows (each upload once) of the hours no summary the plan takes covers. */
        buf_printf(&targets, "target_id IN (SELECT m_target FROM ");
        meta_from(c, &targets);
        meta_where(&targets, f, false);
        buf_printf(&targets, ")");
        buf_printf(&q,
                   "SELECT target_id, reason, toUInt64(sum(c)) FROM (SELECT target_id, reason,"
                   " any(count) AS c FROM %s.drops WHERE %s",
                   c->db, targets.p ? targets.p : "0");
        time_where(&q, f, "length_ns");
        buf_printf(&q, "%s GROUP BY target_id, upload, reason", plan.raw.p ? plan.raw.p : "");
        if (plan.n_builds)
                buf_printf(&q,
                           " UNION ALL SELECT target_id, reason, count AS c FROM %s.rollup_drops"
                           " WHERE hour >= %" PRIu32 " AND hour < %" PRIu32
                           " AND build IN (%s) AND %s",
                           c->db, plan.first_hour, plan.end_hour, plan.builds.p,
                           targets.p ? targets.p : "0");
        buf_printf(&q, ") GROUP BY target_id, reason FORMAT RowBinary");
        q.oom = q.oom || targets.oom;
        if ((r = fp_ch_exec(c, &q, READ_TIMEOUT_S)) < 0)
                goto out;
        struct rd rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad) {
                uint64_t tid = RD_U64(&rd);
                const char *reason = rd_str(&rd);
                uint64_t count = RD_U64(&rd);
                struct fp_store_map_entry *e = fp_store_map_get(&seen, tid);
                if (rd.bad || !e)
                        continue;
                if (fp_grow((void **)&rows, &cap_rows, n_rows + 1, sizeof(*rows)) < 0) {
                        r = fp_ch_oom(c);
                        goto out;
                }
                rows[n_rows++] = (struct drop_row){e->a - 1, reason, count};
        }
        if (rd.bad) {
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about drops",
                                c->hostport);
                goto out;
        }
        if (n_rows)
                qsort_r(rows, n_rows, sizeof(*rows), drop_cmp, &m);
        for (size_t i = 0; i < n_rows && r >= 0; i++) {
                const struct meta *x = &m.v[rows[i].meta];
                struct fp_store_drop d = {.host = x->host,
                                          .pid = x->pid,
                                          .starttime = x->starttime,
                                          .comm = x->comm,
                                          .reason = rows[i].reason,
                                          .count = rows[i].count};
                r = fn(userdata, &d);
                n++;
        }
out:
        free(rows);
        free(q.p);
        free(targets.p);
        fp_ch_plan_free(&plan);
        fp_store_map_free(&seen);
        metas_free(&m);
        return r < 0 ? r : n;
}

int fp_ch_host_costs(struct fp_ch *c, const struct fp_store_filter *f, fp_store_host_cost_fn fn,
                     void *userdata)
{
        struct fp_store_filter none = {0};
        struct metas m = {0};
        struct buf q = {0};
        bool first = true;
        int n = 0, r;

        if (!f)
                f = &none;
        if ((r = start_read(c, f)) < 0 || (r = load_metas(c, f, true, METAS_RANGE, &m)) < 0 || !m.n)
                goto out;
        buf_printf(&q,
                   "SELECT host, toUInt64(sum(cpu)), toUInt64(max(rss)), toUInt32(max(cpus)),"
                   " toInt64(sum(to_ns - from_ns)) FROM (SELECT host, from_ns, to_ns,"
                   " any(agent_cpu_ns) AS cpu, any(agent_rss) AS rss, any(host_cpus) AS cpus"
                   " FROM %s.costs WHERE host IN (",
                   c->db);
        for (size_t i = 0; i < m.n; i++) {
                if (!m.v[i].matched)
                        continue;
                bool dup = false;
                for (size_t k = 0; k < i && !dup; k++)
                        dup = m.v[k].matched && strcmp(m.v[k].host, m.v[i].host) == 0;
                if (dup)
                        continue;
                if (!first)
                        buf_printf(&q, ", ");
                buf_lit(&q, m.v[i].host);
                first = false;
        }
        if (first)
                goto out; /* no series in the range */
        buf_printf(&q, ")");
        if (f->since_ns)
                buf_printf(&q, " AND to_ns > %" PRId64, f->since_ns);
        if (f->until_ns)
                buf_printf(&q, " AND from_ns < %" PRId64, f->until_ns);
        buf_printf(&q, " GROUP BY host, from_ns, to_ns) GROUP BY host ORDER BY host"
                       " FORMAT RowBinary");
        if ((r = fp_ch_exec(c, &q, READ_TIMEOUT_S)) < 0)
                goto out;
        struct rd rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad && r >= 0) {
                struct fp_store_host_cost hc = {.host = rd_str(&rd)};
                hc.agent_cpu_ns = RD_U64(&rd);
                hc.agent_rss_bytes = RD_U64(&rd);
                hc.host_cpus = RD_U32(&rd);
                hc.covered_ns = RD_I64(&rd);
                if (rd.bad)
                        break;
                r = fn(userdata, &hc);
                n++;
        }
        if (r >= 0 && rd.bad)
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about costs",
                                c->hostport);
out:
        free(q.p);
        metas_free(&m);
        return r < 0 ? r : n;
}

int fp_ch_stats(struct fp_ch *c, struct fp_store_stats *ret)
{
        struct buf q = {0};
        int r;

        *ret = (struct fp_store_stats){.max_bytes = c->max_bytes};
        c->errmsg[0] = 0;
        if ((r = setup(c)) < 0)
                return r;
        buf_printf(&q,
                   "SELECT toUInt64((SELECT uniqExact(upload) FROM %s.buckets)),"
                   " toUInt64((SELECT uniqExact(target_id) FROM %s.series)),"
                   " toUInt64((SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '%s'"
                   " AND active AND table NOT IN ('debugfiles', 'debugfiles_used'))), "
                   "toInt64((SELECT min(start_ns) FROM %s.buckets)),"
                   " toInt64((SELECT max(start_ns + length_ns) FROM %s.buckets)),"
                   " toUInt64((SELECT count() FROM %s.rollup_builds)) FORMAT RowBinary",
                   c->db, c->db, c->db, c->db, c->db, c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        ret->buckets = RD_U64(&rd);
        ret->targets = RD_U64(&rd);
        ret->file_bytes = ret->live_bytes = RD_U64(&rd);
        ret->first_ns = RD_I64(&rd);
        ret->last_ns = RD_I64(&rd);
        ret->summaries = RD_U64(&rd);
        if (!ret->buckets)
                ret->first_ns = ret->last_ns = 0;
        if (rd.bad)
                return fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about the store",
                                   c->hostport);
        return fp_ch_rollups_unsummarised(c, (int64_t)fp_now_ns(CLOCK_REALTIME),
                                          &ret->summaries_marked);
}

/* ---- the merged profile ---- */

/* Frames: (frame id, mapping id, function id, address, line), kept until names are known. */
struct frame_row {
        uint64_t id, mapping, function, address;
        int64_t line;
};

struct prof {
        struct fp_ch *c;
        struct fp_pprof *p;
        struct metas *m;
        uint16_t day_min, day_max;
        struct fp_store_map stack_locs; /* stack id -> offset into locs + 1, n */
        struct fp_store_map frame_locs; /* frame id -> pprof location id */
        struct fp_store_map mapping_ids, function_ids;
        uint64_t *frame_ids; /* of the stacks, then their locations */
        size_t n_frame_ids, cap_frame_ids;
        uint64_t *need; /* ids to fetch */
        size_t n_need, cap_need;
        struct frame_row *frames; /* fetched */
        size_t n_frames, cap_frames;
};

static void prof_free(struct prof *x)
{
        fp_store_map_free(&x->stack_locs);
        fp_store_map_free(&x->frame_locs);
        fp_store_map_free(&x->mapping_ids);
        fp_store_map_free(&x->function_ids);
        free(x->frame_ids);
        free(x->need);
        free(x->frames);
}

static int pprof_fail(struct fp_ch *c, int r)
{
        return fp_ch_failf(c, r, "Failed to build a profile: %s", strerror(-r));
}

static int need_add(struct prof *x, uint64_t id)
{
        if (fp_grow((void **)&x->need, &x->cap_need, x->n_need + 1, sizeof(*x->need)) < 0)
                return fp_ch_oom(x->c);
        x->need[x->n_need++] = id;
        return 0;
}

/*
 * Fetches rows of table for the ids in x->need, IDS_PER_QUERY at a time,
 * one row per id (its first values), and calls row() on each.
 */
/*
 * The rows of table whose id_col is needed, one each (of rows not merged
 * yet, the first by order: "" any).
 */
static int fetch(struct prof *x, const char *table, const char *id_col, const char *cols,
                 const char *order, int (*row)(struct prof *x, struct rd *rd))
{
        struct fp_ch *c = x->c;
        int r = 0;

        for (size_t off = 0; off < x->n_need && r == 0; off += IDS_PER_QUERY) {
                size_t end = off + IDS_PER_QUERY < x->n_need ? off + IDS_PER_QUERY : x->n_need;
                struct buf q = {0};
                buf_printf(&q,
                           "SELECT %s, %s FROM %s.%s WHERE day BETWEEN toDate(toUInt16(%u))"
                           " AND toDate(toUInt16(%u)) AND %s IN (",
                           id_col, cols, c->db, table, x->day_min, x->day_max, id_col);
                for (size_t i = off; i < end; i++)
                        buf_printf(&q, "%s%" PRIu64, i > off ? ", " : "", x->need[i]);
                buf_printf(&q, ")%s%s LIMIT 1 BY %s FORMAT RowBinary", *order ? " ORDER BY " : "",
                           order, id_col);
                r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
                free(q.p);
                if (r < 0)
                        break;
                struct rd rd = ANSWER(c);
                while (r == 0 && rd.p < rd.end && !rd.bad)
                        r = row(x, &rd);
                if (r == 0 && rd.bad)
                        r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about %s",
                                        c->hostport, table);
        }
        x->n_need = 0;
        return r;
}

static int stack_row(struct prof *x, struct rd *rd)
{
        uint64_t id = RD_U64(rd), n = rd_len(rd);
        size_t off = x->n_frame_ids;

        if (rd->bad || n > FP_STORE_MAX_FRAMES || (uint64_t)(rd->end - rd->p) < n * 8) {
                rd->bad = true;
                return 0;
        }
        if (fp_store_map_get(&x->stack_locs, id)) {
                rd->p += n * 8;
                return 0;
        }
        if (fp_grow((void **)&x->frame_ids, &x->cap_frame_ids, off + n + 1, sizeof(*x->frame_ids)) <
            0)
                return fp_ch_oom(x->c);
        for (uint64_t i = 0; i < n; i++)
                x->frame_ids[x->n_frame_ids++] = RD_U64(rd);
        if (fp_store_map_put(&x->stack_locs, id, off + 1, n) < 0)
                return fp_ch_oom(x->c);
        return 0;
}

static int function_row(struct prof *x, struct rd *rd)
{
        uint64_t id = RD_U64(rd), pid;
        const char *name = rd_str(rd), *system_name = rd_str(rd), *filename = rd_str(rd);
        int r;

        if (rd->bad || fp_store_map_get(&x->function_ids, id))
                return 0;
        if ((r = fp_pprof_function_full(x->p, name, system_name, filename, 0, &pid)) < 0)
                return pprof_fail(x->c, r);
        return fp_store_map_put(&x->function_ids, id, pid, 0) < 0 ? fp_ch_oom(x->c) : 0;
}

static int mapping_row(struct prof *x, struct rd *rd)
{
        uint64_t id = RD_U64(rd), pid;
        const char *file = rd_str(rd), *build_id = rd_str(rd);
        uint64_t start = RD_U64(rd), limit = RD_U64(rd), offset = RD_U64(rd);
        uint64_t vaddr1 = RD_U64(rd);
        struct fp_store_map_entry *e;
        int r;

        if (rd->bad)
                return 0;
        if ((e = fp_store_map_get(&x->mapping_ids, id))) {
                /* A row of the same mapping (not merged yet) from an agent that knew it. */
                if (vaddr1 && (r = fp_pprof_mapping_set_vaddr(x->p, e->a, vaddr1 - 1)) < 0)
                        return pprof_fail(x->c, r);
                return 0;
        }
        if ((r = fp_pprof_mapping(x->p, start, limit, offset, file, build_id, &pid)) < 0 ||
            (vaddr1 && (r = fp_pprof_mapping_set_vaddr(x->p, pid, vaddr1 - 1)) < 0))
                return pprof_fail(x->c, r);
        return fp_store_map_put(&x->mapping_ids, id, pid, 0) < 0 ? fp_ch_oom(x->c) : 0;
}

static int frame_row(struct prof *x, struct rd *rd)
{
        struct frame_row f = {.id = RD_U64(rd)};
        f.mapping = RD_U64(rd);
        f.function = RD_U64(rd);
        f.address = RD_U64(rd);
        f.line = RD_I64(rd);
        if (rd->bad)
                return 0;
        if (fp_grow((void **)&x->frames, &x->cap_frames, x->n_frames + 1, sizeof(*x->frames)) < 0)
                return fp_ch_oom(x->c);
        x->frames[x->n_frames++] = f;
        return 0;
}

/* Turns the stacks' frame ids into pprof locations (x->frame_ids rewritten in place). */
static int resolve_frames(struct prof *x)
{
        struct fp_store_map seen = {0};
        int r = 0;

        for (size_t i = 0; i < x->n_frame_ids && r == 0; i++)
                if (!fp_store_map_get(&seen, x->frame_ids[i])) {
                        r = fp_store_map_put(&seen, x->frame_ids[i], 1, 0) < 0
                                ? fp_ch_oom(x->c)
                                : need_add(x, x->frame_ids[i]);
                }
        fp_store_map_free(&seen);
        if (r == 0)
                r = fetch(x, "frames", "frame_id", "mapping_id, function_id, address, line", "",
                          frame_row);
        /* Their functions and mappings. */
        for (size_t i = 0; i < x->n_frames && r == 0; i++)
                if (x->frames[i].function &&
                    !fp_store_map_get(&x->function_ids, x->frames[i].function))
                        r = need_add(x, x->frames[i].function);
        if (r == 0)
                r = fetch(x, "functions", "function_id", "name, system_name, filename", "",
                          function_row);
        for (size_t i = 0; i < x->n_frames && r == 0; i++)
                if (x->frames[i].mapping &&
                    !fp_store_map_get(&x->mapping_ids, x->frames[i].mapping))
                        r = need_add(x, x->frames[i].mapping);
        if (r == 0)
                r = fetch(x, "mappings", "mapping_id",
                          "file, build_id, memory_start, memory_limit, file_offset, vaddr1",
                          "mapping_id, vaddr1 DESC", mapping_row);
        for (size_t i = 0; i < x->n_frames && r == 0; i++) {
                const struct frame_row *f = &x->frames[i];
                struct fp_store_map_entry *me =
                    f->mapping ? fp_store_map_get(&x->mapping_ids, f->mapping) : NULL;
                struct fp_store_map_entry *fe =
                    f->function ? fp_store_map_get(&x->function_ids, f->function) : NULL;
                uint64_t loc;
                if ((f->mapping && !me) || (f->function && !fe)) {
                        r = fp_ch_failf(x->c, -EBADMSG,
                                        "ClickHouse store is inconsistent: frame %" PRIu64
                                        " names a missing %s",
                                        f->id, f->mapping && !me ? "mapping" : "function");
                        break;
                }
                r = fp_pprof_location_at(x->p, me ? me->a : 0, f->address, fe ? fe->a : 0, f->line,
                                         &loc);
                if (r < 0)
                        r = pprof_fail(x->c, r);
                else if (fp_store_map_put(&x->frame_locs, f->id, loc, 0) < 0)
                        r = fp_ch_oom(x->c);
        }
        for (size_t i = 0; i < x->n_frame_ids && r == 0; i++) {
                struct fp_store_map_entry *e = fp_store_map_get(&x->frame_locs, x->frame_ids[i]);
                if (!e)
                        return fp_ch_failf(x->c, -EBADMSG,
                                           "ClickHouse store is inconsistent: frame %" PRIu64
                                           " is missing",
                                           x->frame_ids[i]);
                x->frame_ids[i] = e->a;
        }
        return r;
}

struct sample_row {
        size_t meta;
        int32_t tid;
        const char *thread_name;
        const char *wait; /* "" unless an off-CPU sample's */
        uint64_t stack, count, value;
};

/*
 * The matched series whose event was stored first (of all the store's),
 * the SQLite store's choice by event id; first series of that event.
 */
static int first_event(struct fp_ch *c, const struct metas *m, const struct meta **ret)
{
        struct buf q = {0};
        int r;

        *ret = NULL;
        buf_printf(&q,
                   "SELECT event, count_type, count_unit, value_type, value_unit"
                   " FROM %s.series GROUP BY event, count_type, count_unit, value_type,"
                   " value_unit ORDER BY min(written_ns), event FORMAT RowBinary",
                   c->db);
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        free(q.p);
        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        while (rd.p < rd.end && !rd.bad && !*ret) {
                const char *event = rd_str(&rd), *types[4];
                for (int k = 0; k < 4; k++)
                        types[k] = rd_str(&rd);
                for (size_t i = 0; i < m->n && !rd.bad; i++) {
                        const struct meta *y = &m->v[i];
                        bool same = y->matched && strcmp(y->event, event) == 0;
                        for (int k = 0; k < 4 && same; k++)
                                same = strcmp(y->types[k], types[k]) == 0;
                        if (same && (!*ret || y->first_ns < (*ret)->first_ns))
                                *ret = y;
                }
        }
        return rd.bad ? fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about events",
                                    c->hostport)
                      : 0;
}

/*
 * Whether series y is part of the wall profile: off-CPU, wall time a
 * client stored as such (Pyroscope's), or CPU time of a target with
 * off-CPU.
 */
static bool wall_part(const struct metas *m, const struct meta *y)
{
        if (strcmp(y->event, FP_STORE_OFFCPU_EVENT) == 0 ||
            strcmp(y->event, FP_STORE_WALL_EVENT) == 0)
                return strcmp(y->types[3], "nanoseconds") == 0;
        if (!fp_store_event_is_cpu_time(y->event, y->types[3]))
                return false;
        for (size_t i = 0; i < m->n; i++)
                if (m->v[i].matched && m->v[i].target_id == y->target_id &&
                    strcmp(m->v[i].event, FP_STORE_OFFCPU_EVENT) == 0)
                        return true;
        return false;
}

/*
 * The wall profile's reference (FP_STORE_WALL_EVENT, its sample types),
 * made in *buf from a matched off-CPU or stored wall series; *ret NULL
 * when none matched.
 */
static int wall_event(const struct metas *m, struct meta *buf, const struct meta **ret)
{
        *ret = NULL;
        for (size_t i = 0; i < m->n; i++) {
                const struct meta *y = &m->v[i];
                if (!y->matched || !wall_part(m, y) ||
                    fp_store_event_is_cpu_time(y->event, y->types[3]))
                        continue;
                if (!*ret || y->first_ns < (*ret)->first_ns) {
                        *buf = *y;
                        *ret = buf;
                }
        }
        if (*ret) {
                buf->event = FP_STORE_WALL_EVENT;
                buf->types[0] = "samples";
                buf->types[1] = "count";
                buf->types[2] = "wall";
                buf->types[3] = "nanoseconds";
                buf->period_type = "";
                buf->period_unit = "";
                buf->period = 0;
        }
        return 0;
}

static int set_types(struct fp_ch *c, struct fp_pprof *p, const struct meta *ref)
{
        bool differ = false;
        int r = fp_store_profile_types(p, ref->types, ref->period_type, ref->period_unit,
                                       ref->period, &differ);

        if (differ)
                return fp_ch_failf(
                    c, -EINVAL,
                    "Failed to query the store: the profile's sample types differ from "
                    "event '%s''s",
                    ref->event);
        return r < 0 ? pprof_fail(c, r) : 0;
}

static int add_drop_comments(struct fp_ch *c, const struct fp_store_filter *f, struct fp_pprof *p)
{
        struct fp_store_reasons rs = {0};
        int r = fp_ch_drop_totals(c, f, fp_store_reasons_add, &rs);

        if (r < 0) {
                fp_store_reasons_comment(&rs, NULL); /* frees */
                return r == -ENOMEM && !c->errmsg[0] ? fp_ch_oom(c) : r;
        }
        r = fp_store_reasons_comment(&rs, p);
        return r < 0 ? pprof_fail(c, r) : 0;
}

/* Samples of threads named f->thread_name only (off-CPU: with any wait). */
static void thread_where(struct buf *q, const struct fp_store_filter *f)
{
        static const char *const waits[] = FP_STORE_WAITS;

        if (!f->thread_name)
                return;
        buf_printf(q, " AND thread_name IN (");
        buf_lit(q, f->thread_name);
        for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
                buf_printf(q, ", concat(");
                buf_lit(q, f->thread_name);
                buf_printf(q, ", '\\0%s')", waits[i]);
        }
        buf_printf(q, ")");
}

/* The series of f of ref's event: "series_id IN (...)". */
static void series_in(struct fp_ch *c, const struct fp_store_filter *f, const struct meta *ref,
                      struct buf *q)
{
        buf_printf(q, "series_id IN (SELECT series_id FROM ");
        meta_from(c, q);
        meta_where(q, f, false);
        event_where(c, q, f, ref);
        buf_printf(q, ")");
}

/* The WHERE of the samples of f's series of ref's event, in f's time range, less the hours
 * the plan's summaries cover. */
static void samples_where(struct fp_ch *c, const struct fp_store_filter *f, const struct meta *ref,
                          const struct fp_ch_plan *plan, bool threads, struct buf *q)
{
        buf_printf(q, " FROM %s.samples WHERE ", c->db);
        series_in(c, f, ref, q);
        time_where(q, f, "length_ns");
        if (plan->raw.p)
                buf_printf(q, "%s", plan->raw.p);
        if (threads)
                thread_where(q, f);
}

#define MAX_DUPLICATES 2000 /* uploads named in a query; past them every row is deduplicated */

/*
 * The uploads whose samples rows were written more than once (two
 * collectors raced, or a write failed half-way and was retried) and not
 * merged yet: more rows in samples than the upload wrote. Appends them to
 * list as "(series, upload), ..." and returns how many, or -errno.
 */
static int duplicated_uploads(struct fp_ch *c, const struct fp_store_filter *f,
                              const struct meta *ref, const struct fp_ch_plan *plan,
                              struct buf *list)
{
        struct fp_store_map expected = {0};
        struct buf q = {0};
        int n = 0, r;

        buf_printf(&q, "SELECT series_id, upload, toUInt64(max(rows)) FROM %s.buckets WHERE ",
                   c->db);
        series_in(c, f, ref, &q);
        time_where(&q, f, "length_ns");
        if (plan->raw.p)
                buf_printf(&q, "%s", plan->raw.p);
        buf_printf(&q, " GROUP BY series_id, upload FORMAT RowBinary");
        r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        struct rd rd = ANSWER(c);
        while (r == 0 && rd.p < rd.end && !rd.bad) {
                uint64_t sid = RD_U64(&rd), upload = RD_U64(&rd), rows = RD_U64(&rd);
                uint64_t key = fp_store_hash_nonzero(fp_store_hash_step(sid, upload));
                if (!rd.bad && fp_store_map_put(&expected, key, rows, 0) < 0)
                        r = fp_ch_oom(c);
        }
        q.n = 0;
        if (r == 0) {
                buf_printf(&q, "SELECT series_id, upload, toUInt64(count())");
                samples_where(c, f, ref, plan, false, &q);
                buf_printf(&q, " GROUP BY series_id, upload FORMAT RowBinary");
                r = fp_ch_exec(c, &q, READ_TIMEOUT_S);
        }
        rd = ANSWER(c);
        while (r == 0 && rd.p < rd.end && !rd.bad) {
                uint64_t sid = RD_U64(&rd), upload = RD_U64(&rd), rows = RD_U64(&rd);
                uint64_t key = fp_store_hash_nonzero(fp_store_hash_step(sid, upload));
                struct fp_store_map_entry *e = fp_store_map_get(&expected, key);
                if (rd.bad || (e && rows <= e->a))
                        continue;
                /* More rows than written once, or rows of an upload whose bucket row is not
                 * there (yet): count each row once. */
                buf_printf(list, "%s(%" PRIu64 ", %" PRIu64 ")", n ? ", " : "", sid, upload);
                n++;
        }
        if (r == 0 && rd.bad)
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about uploads",
                                c->hostport);
        free(q.p);
        fp_store_map_free(&expected);
        return r < 0 ? r : n;
}

/*
 * The query of the summed samples (series_id, tid, thread_name, stack_id,
 * count, value, and 1 when the key was summed alone): the samples of the
 * hours the plan's summaries do not cover (rows of uploads written once as
 * they are; those of uploads written more than once grouped per row first,
 * any() of the copies, which is what costs) and the summaries' rows,
 * summed per key. ClickHouse (18.16 as much as later) sums by one 64-bit
 * key far faster than by the four columns, so the key's hash is grouped by
 * unless exact, and a second hash of each group's rows says whether two
 * keys met in one (never seen; then the caller asks again, exact). One
 * summary's rows come after the sum as they are: each key once, and the
 * profile adds equal samples up.
 */
static int samples_query(struct fp_ch *c, const struct fp_store_filter *f, const struct meta *ref,
                         const struct fp_ch_plan *plan, bool exact, struct buf *q)
{
        struct buf dups = {0};
        int n = duplicated_uploads(c, f, ref, plan, &dups);

        if (n < 0) {
                free(dups.p);
                return n;
        }
        if (exact)
                buf_printf(q, "SELECT series_id, tid, thread_name, stack_id, toUInt64(sum(c)),"
                              " toUInt64(sum(v)), toUInt8(1) FROM (");
        else
                buf_printf(q, "SELECT any(series_id), any(tid), any(thread_name), any(stack_id),"
                              " toUInt64(sum(c)), toUInt64(sum(v)), toUInt8(min(h) = max(h))"
                              " FROM (SELECT series_id, tid, thread_name, stack_id, c, v,"
                              " farmHash64(series_id, tid, thread_name, stack_id) AS h FROM (");
        if (n <= MAX_DUPLICATES) {
                buf_printf(q, "SELECT series_id, tid, thread_name, stack_id, count AS c,"
                              " value AS v");
                samples_where(c, f, ref, plan, true, q);
                if (n)
                        buf_printf(q, " AND (series_id, upload) NOT IN (%s) UNION ALL", dups.p);
        }
        if (n) {
                buf_printf(q, " SELECT series_id, tid, thread_name, stack_id, any(count) AS c,"
                              " any(value) AS v");
                samples_where(c, f, ref, plan, true, q);
                if (n <= MAX_DUPLICATES)
                        buf_printf(q, " AND (series_id, upload) IN (%s)", dups.p);
                buf_printf(q, " GROUP BY series_id, upload, stack_id, tid, thread_name");
        }
        /* The summaries' rows: in the sum when there are several, else after it. */
        struct buf sums = {0};
        if (plan->n_builds) {
                buf_printf(&sums,
                           " UNION ALL SELECT series_id, tid, thread_name, stack_id, count AS c,"
                           " value AS v%s FROM %s.rollups WHERE hour >= %" PRIu32
                           " AND hour < %" PRIu32 " AND build IN (%s) AND ",
                           plan->n_builds > 1 ? "" : ", toUInt8(1)", c->db, plan->first_hour,
                           plan->end_hour, plan->builds.p);
                series_in(c, f, ref, &sums);
                thread_where(&sums, f);
        }
        if (plan->n_builds > 1)
                buf_add(q, sums.p, sums.n);
        if (exact)
                buf_printf(q, ") GROUP BY series_id, tid, thread_name, stack_id");
        else
                buf_printf(q, ")) GROUP BY cityHash64(series_id, tid, thread_name, stack_id)");
        if (plan->n_builds == 1)
                buf_add(q, sums.p, sums.n);
        buf_printf(q, " FORMAT RowBinary");
        q->oom = q->oom || sums.oom;
        free(sums.p);
        free(dups.p);
        return q->oom ? fp_ch_oom(c) : 0;
}

int fp_ch_query_pprof(struct fp_ch *c, const struct fp_store_filter *f, struct fp_pprof *p)
{
        struct fp_store_filter none = {0};
        struct metas m = {0};
        struct prof x = {.c = c, .p = p, .m = &m};
        struct sample_row *rows = NULL;
        size_t n_rows = 0, cap_rows = 0;
        const struct meta *ref = NULL;
        struct buf q = {0};
        struct fp_ch_plan plan = {0};
        uint8_t *answer = NULL;
        int64_t start = INT64_MAX, end = INT64_MIN;
        bool with_host = false;
        int r;

        if (!p)
                return -EINVAL;
        if (!f)
                f = &none;
        bool wall = f->event && strcmp(f->event, FP_STORE_WALL_EVENT) == 0;
        struct meta wall_ref;
        if ((r = start_read(c, f)) < 0 || (r = load_metas(c, f, !wall, METAS_RANGE, &m)) < 0)
                goto out;
        /* The reference event: f->event, else the one stored first (or the wall profile's). */
        if (wall)
                r = wall_event(&m, &wall_ref, &ref);
        else
                r = first_event(c, &m, &ref);
        if (r < 0)
                goto out;
        if (!ref)
                goto drops;
        if ((r = set_types(c, p, ref)) < 0)
                goto out;
        for (size_t i = 0; i < m.n; i++) {
                struct meta *y = &m.v[i];
                bool same = y->matched && strcmp(y->event, ref->event) == 0;
                for (int k = 0; k < 4 && same; k++)
                        same = strcmp(y->types[k], ref->types[k]) == 0;
                if (wall)
                        same = y->matched && wall_part(&m, y);
                y->matched = same;
                if (!same)
                        continue;
                if (y->first_ns < start)
                        start = y->first_ns;
                if (y->last_ns > end)
                        end = y->last_ns;
                if (strcmp(y->host, ref->host) != 0)
                        with_host = true;
        }
        x.day_min = day_of(start);
        x.day_max = day_of(end);

        /* The samples, summed per (series, thread, stack) inside ClickHouse, of whole hours
         * and days from their summaries; again, exact, if two keys met in one sum. */
        if ((r = fp_ch_read_plan(c, f->since_ns, f->until_ns, &plan)) < 0)
                goto out;
        struct fp_store_map stacks_seen = {0};
        struct rd rd = {NULL, NULL, false};
        for (int pass = 0; pass < 2; pass++) {
                bool exact = pass == 1, collided = false;
                n_rows = 0;
                x.n_need = 0;
                fp_store_map_clear(&stacks_seen);
                free(answer);
                answer = NULL;
                q.n = 0;
                if ((r = samples_query(c, f, ref, &plan, exact, &q)) < 0 ||
                    (r = fp_ch_exec(c, &q, READ_TIMEOUT_S)) < 0) {
                        fp_store_map_free(&stacks_seen);
                        goto out;
                }
                answer = (uint8_t *)c->answer.p; /* the thread names point into it */
                rd = (struct rd){answer, answer + c->answer.n, false};
                c->answer = (struct buf){0};
                while (rd.p < rd.end && !rd.bad && !collided) {
                        struct sample_row s;
                        uint64_t sid = RD_U64(&rd);
                        s.tid = RD_I32(&rd);
                        size_t column_len = 0;
                        s.thread_name = rd_str_len(&rd, &column_len);
                        /* "name\0wait" (rb_thread()): the wait follows the name's NUL. */
                        size_t name_len = strlen(s.thread_name);
                        s.wait = name_len < column_len ? s.thread_name + name_len + 1 : "";
                        s.stack = RD_U64(&rd);
                        s.count = RD_U64(&rd);
                        s.value = RD_U64(&rd);
                        collided = RD_U8(&rd) == 0 && !rd.bad;
                        struct fp_store_map_entry *e = fp_store_map_get(&m.idx, sid);
                        /* Only the series chosen above (the wall profile's query is wider). */
                        if (rd.bad || collided || !e || !m.v[e->a - 1].matched)
                                continue;
                        s.meta = e->a - 1;
                        if (fp_grow((void **)&rows, &cap_rows, n_rows + 1, sizeof(*rows)) < 0 ||
                            (!fp_store_map_get(&stacks_seen, s.stack) &&
                             (fp_store_map_put(&stacks_seen, s.stack, 1, 0) < 0 ||
                              need_add(&x, s.stack) < 0))) {
                                fp_store_map_free(&stacks_seen);
                                r = fp_ch_oom(c);
                                goto out;
                        }
                        rows[n_rows++] = s;
                }
                if (!collided)
                        break;
        }
        fp_store_map_free(&stacks_seen);
        if (rd.bad) {
                r = fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about samples",
                                c->hostport);
                goto out;
        }
        if ((r = fetch(&x, "stacks", "stack_id", "frames", "", stack_row)) < 0 ||
            (r = resolve_frames(&x)) < 0)
                goto out;
        for (size_t i = 0; i < n_rows; i++) {
                const struct sample_row *s = &rows[i];
                const struct meta *t = &m.v[s->meta];
                struct fp_store_map_entry *e = fp_store_map_get(&x.stack_locs, s->stack);
                struct fp_pprof_label labels[FP_STORE_SAMPLE_LABELS];
                size_t n_labels;
                int64_t values[2] = {s->count > INT64_MAX ? INT64_MAX : (int64_t)s->count,
                                     s->value > INT64_MAX ? INT64_MAX : (int64_t)s->value};
                if (!e) {
                        r = fp_ch_failf(c, -EBADMSG,
                                        "ClickHouse store is inconsistent: stack %" PRIu64
                                        " is missing",
                                        s->stack);
                        goto out;
                }
                n_labels = fp_store_sample_labels(labels, s->tid, s->thread_name, s->wait, t->pid,
                                                  t->comm, with_host ? t->host : NULL, t->service,
                                                  t->container, t->exe);
                r = fp_pprof_add_sample(p, e->b ? x.frame_ids + e->a - 1 : NULL, e->b, values,
                                        labels, n_labels);
                if (r < 0) {
                        r = pprof_fail(c, r);
                        goto out;
                }
        }
        fp_store_profile_widen_time(p, start, end);
        (void)fp_pprof_set_main_binary(p, ref->exe);
drops:
        r = add_drop_comments(c, f, p);
        if (r == 0)
                r = n_rows > INT32_MAX ? INT32_MAX : (int)n_rows;
out:
        free(rows);
        free(answer);
        free(q.p);
        fp_ch_plan_free(&plan);
        prof_free(&x);
        metas_free(&m);
        return r;
}
