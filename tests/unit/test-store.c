/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the store (storage/store.h): round trips through a real
 * SQLite file, merging across buckets, filters, eviction under a small
 * budget with its drop accounting and garbage collection, reopening,
 * upload state, damaged files and schema versions. Failure injection,
 * full and read-only file systems and kill -9 are in test-store-faults.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp-test.h"
#include "pprof.h"
#include <zlib.h>

#include "store.h"
#include "store-internal.h"

#define SEC 1000000000LL
#define T0  (1700000000LL * SEC)

static char dir[64];
static char path[128];

static void fresh_path(const char *name)
{
        snprintf(path, sizeof(path), "%s/%s", dir, name);
}

/* ---- building batches ---- */

static const struct fp_store_event cpu_clock = {
    .name = "cpu-clock",
    .count_type = "samples",
    .count_unit = "count",
    .value_type = "cpu",
    .value_unit = "nanoseconds",
    .period_type = "cpu",
    .period_unit = "nanoseconds",
    .period = 10101010,
};

static const struct fp_store_event cycles = {
    .name = "cycles",
    .count_type = "samples",
    .count_unit = "count",
    .value_type = "cycles",
    .value_unit = "count",
};

/*
 * Stack k: a distinct leaf "leaf_k" in /usr/bin/app, then callers from a
 * shared pool in libc and the app, 4 + k % 12 frames deep.
 */
static int add_stack(struct fp_store_batch *b, unsigned k, uint32_t *ret)
{
        struct fp_store_frame f[16];
        char names[16][32];
        unsigned n = 4 + k % 12;

        for (unsigned j = 0; j < n; j++) {
                bool libc = j % 3 == 1;
                if (j == 0)
                        snprintf(names[j], sizeof(names[j]), "leaf_%u", k);
                else
                        snprintf(names[j], sizeof(names[j]), "%s_%u", libc ? "libc_fn" : "caller",
                                 (k / 7 + j * 13) % 50);
                f[j] = (struct fp_store_frame){
                    .function = names[j],
                    .mapping_file = libc ? "/lib/x86_64-linux-gnu/libc.so.6" : "/usr/bin/app",
                    .build_id = libc ? "bbbb0123456789" : "aaaa0123456789",
                    .mapping_start = libc ? 0x7f0000000000 : 0x400000,
                    .mapping_limit = libc ? 0x7f0000200000 : 0x800000,
                    .mapping_offset = 0,
                    .address = (libc ? 0x7f0000001000 : 0x401000) + 16 * ((k * 131 + j) % 4096),
                };
        }
        return fp_store_batch_add_stack(b, f, n, ret);
}

/*
 * A batch of one target (pid) with n_stacks stacks first_stack.. spread
 * over n_threads threads, each sample count `count` and value count * 1000.
 */
static struct fp_store_batch *make_batch(int64_t start, pid_t pid, unsigned first_stack,
                                         unsigned n_stacks, unsigned n_threads, uint64_t count)
{
        struct fp_store_batch *b = fp_store_batch_new(start, 10 * SEC);
        struct fp_store_target t = {.host = "host-a",
                                    .pid = pid,
                                    .starttime = 1000 + (uint64_t)pid,
                                    .comm = "app",
                                    .exe = "/usr/bin/app",
                                    .config = "event=cpu-clock freq=99 kernel=0",
                                    .active = true};
        uint32_t ti, ei;

        FP_CHECK(b != NULL);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &ei), 0);
        for (unsigned i = 0; i < n_stacks; i++) {
                uint32_t si;
                char tname[32];
                unsigned th = i % n_threads;
                snprintf(tname, sizeof(tname), "worker-%u", th);
                if (add_stack(b, first_stack + i, &si) < 0 ||
                    fp_store_batch_add_sample(b, ti, ei, pid + (pid_t)th, tname, si, count,
                                              count * 1000) < 0)
                        FP_CHECK(!"building a batch failed");
        }
        return b;
}

static int write_and_free(struct fp_store *s, struct fp_store_batch *b)
{
        int r = fp_store_write_batch(s, b);
        if (r < 0)
                fprintf(stderr, "write failed: %s\n", fp_store_errmsg(s));
        fp_store_batch_free(b);
        return r;
}

static int64_t db_int(const char *sql)
{
        sqlite3 *db;
        sqlite3_stmt *st;
        int64_t v = -1;

        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
                return -1;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW)
                        v = sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
        }
        sqlite3_close(db);
        return v;
}

static int db_exec(const char *sql)
{
        sqlite3 *db;
        int rc = sqlite3_open(path, &db);

        if (rc == SQLITE_OK)
                rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        return rc;
}

static bool integrity_ok(void)
{
        sqlite3 *db;
        sqlite3_stmt *st;
        bool ok = false;

        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
                return false;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW)
                        ok = strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
                sqlite3_finalize(st);
        }
        sqlite3_close(db);
        return ok;
}

struct drop_sum {
        const char *reason;
        uint64_t count;
};

static int sum_drops(void *ud, const struct fp_store_drop *d)
{
        struct drop_sum *ds = ud;
        if (!ds->reason || strcmp(ds->reason, d->reason) == 0)
                ds->count += d->count;
        return 0;
}

static uint64_t drops_of(struct fp_store *s, const char *reason)
{
        struct drop_sum ds = {reason, 0};
        FP_CHECK(fp_store_drop_totals(s, NULL, sum_drops, &ds) >= 0);
        return ds.count;
}

static int64_t total_of(struct fp_store *s, const struct fp_store_filter *f, size_t type)
{
        struct fp_pprof *p = fp_pprof_new();
        int64_t v = -1;

        if (p && fp_store_query_pprof(s, f, p) >= 0)
                v = fp_pprof_n_sample_types(p) ? fp_pprof_total(p, type) : 0;
        fp_pprof_free(p);
        return v;
}

/* ---- tests ---- */

static const char *label_str(const struct fp_pprof *p, size_t i, const char *key, int64_t *num)
{
        struct fp_pprof_sample_view v;
        struct fp_pprof_label l;

        fp_pprof_sample_get(p, i, &v);
        for (size_t j = 0; j < v.n_labels; j++) {
                fp_pprof_sample_label(p, i, j, &l);
                if (strcmp(l.key, key) == 0) {
                        if (num)
                                *num = l.num;
                        return l.str ? l.str : "";
                }
        }
        return NULL;
}

static void test_round_trip(void)
{
        struct fp_store *s = NULL;
        struct fp_store_batch *b = fp_store_batch_new(T0, 10 * SEC);
        struct fp_store_target t1 = {.host = "host-a",
                                     .pid = 100,
                                     .starttime = 5555,
                                     .comm = "server",
                                     .exe = "/usr/sbin/server",
                                     .config = "event=cpu-clock freq=99",
                                     .active = true};
        struct fp_store_target t2 = {.host = "host-a",
                                     .pid = 200,
                                     .starttime = 6666,
                                     .comm = "batch",
                                     .exe = "/usr/bin/batch"};
        struct fp_store_frame frames[3] = {
            {"do_work", "/usr/sbin/server", "deadbeef01", 0x400000, 0x500000, 0x1000, 0x401234,
             NULL, NULL, 0, 0},
            {"main", "/usr/sbin/server", "deadbeef01", 0x400000, 0x500000, 0x1000, 0x400100, NULL,
             NULL, 0, 0},
            {"__libc_start_main", "/lib/libc.so.6", "c0ffee", 0x7f00, 0x9f00, 0, 0x7f10, NULL, NULL,
             0, 0},
        };
        struct fp_store_frame anon = {NULL, NULL, NULL, 0, 0, 0, 0xdead, NULL, NULL, 0, 0};
        uint32_t a, c, e, s1, s2, s3, again;
        char err[256];

        fresh_path("roundtrip.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK(s != NULL);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t1, &a), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t2, &c), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &e), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, frames, 3, &s1), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, frames + 1, 2, &s2), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, &anon, 1, &s3), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, frames, 3, &again), 0);
        FP_CHECK_EQ_INT(again, s1);
        FP_CHECK_EQ_INT(fp_store_batch_n_stacks(b), 3);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, a, e, 101, "http", s1, 7, 70000), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, a, e, 101, "http", s1, 3, 30000), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, a, e, 102, "gc", s2, 5, 50000), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, c, e, 200, "batch", s3, 2, 20000), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, c, 9, 200, "batch", s3, 2, 20000), -EINVAL);
        FP_CHECK_EQ_INT(fp_store_batch_n_samples(b), 3);
        FP_CHECK_EQ_INT(fp_store_batch_target_count(b, a), 15);
        FP_CHECK_EQ_INT(fp_store_batch_add_drop(b, a, "throttled", 3), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_drop(b, a, "throttled", 1), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_drop(b, c, "kernel_ring_overflow", 9), 0);
        FP_CHECK_EQ_INT(write_and_free(s, b), 0);

        struct fp_pprof *p = fp_pprof_new();
        const char *unit;
        int64_t time, dur, num = 0;
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, NULL, p), 3);
        FP_CHECK_EQ_INT(fp_pprof_n_samples(p), 3);
        FP_CHECK_EQ_STR(fp_pprof_sample_type(p, 0, &unit), "samples");
        FP_CHECK_EQ_STR(unit, "count");
        FP_CHECK_EQ_STR(fp_pprof_sample_type(p, 1, &unit), "cpu");
        FP_CHECK_EQ_STR(unit, "nanoseconds");
        FP_CHECK_EQ_INT(fp_pprof_period(p, NULL, NULL), 10101010);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 0), 17);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 1), 170000);
        fp_pprof_get_time(p, &time, &dur);
        FP_CHECK_EQ_INT(time, T0);
        FP_CHECK_EQ_INT(dur, 10 * SEC);
        FP_CHECK_EQ_INT(fp_pprof_n_comments(p), 2);
        FP_CHECK_EQ_STR(fp_pprof_comment(p, 0), "dropped kernel_ring_overflow: 9");
        FP_CHECK_EQ_STR(fp_pprof_comment(p, 1), "dropped throttled: 4");
        bool seen_http = false;
        for (size_t i = 0; i < fp_pprof_n_samples(p); i++) {
                struct fp_pprof_sample_view v;
                struct fp_pprof_location_view loc;
                fp_pprof_sample_get(p, i, &v);
                FP_CHECK(label_str(p, i, "host", NULL) == NULL); /* one host */
                if (v.values[0] == 10) {
                        seen_http = true;
                        FP_CHECK_EQ_INT(v.values[1], 100000);
                        FP_CHECK_EQ_STR(label_str(p, i, "thread_name", NULL), "http");
                        FP_CHECK(label_str(p, i, "thread", &num) != NULL);
                        FP_CHECK_EQ_INT(num, 101);
                        FP_CHECK(label_str(p, i, "pid", &num) != NULL);
                        FP_CHECK_EQ_INT(num, 100);
                        FP_CHECK_EQ_STR(label_str(p, i, "process", NULL), "server");
                        FP_CHECK_EQ_INT(v.n_locations, 3);
                        fp_pprof_location_get(p, v.location_ids[0], &loc);
                        FP_CHECK_EQ_STR(loc.function_name, "do_work");
                        FP_CHECK_EQ_STR(loc.build_id, "deadbeef01");
                        FP_CHECK_EQ_STR(loc.mapping_file, "/usr/sbin/server");
                        FP_CHECK_EQ_INT(loc.address, 0x401234);
                        fp_pprof_location_get(p, v.location_ids[2], &loc);
                        FP_CHECK_EQ_STR(loc.function_name, "__libc_start_main");
                        FP_CHECK_EQ_STR(loc.build_id, "c0ffee");
                } else if (v.values[0] == 2) {
                        FP_CHECK_EQ_INT(v.n_locations, 1);
                        fp_pprof_location_get(p, v.location_ids[0], &loc);
                        FP_CHECK_EQ_STR(loc.function_name, "");
                        FP_CHECK_EQ_INT(loc.mapping_id, 0);
                        FP_CHECK_EQ_INT(loc.address, 0xdead);
                }
        }
        FP_CHECK(seen_http);
        /* The profile encodes (and so is well formed for pprof readers). */
        uint8_t *buf = NULL;
        size_t len = 0;
        FP_CHECK_EQ_INT(fp_pprof_encode(p, 1, &buf, &len), 0);
        free(buf);
        fp_pprof_free(p);

        /* Filter by pid, and an unknown event: nothing. */
        struct fp_store_filter f = {.pid = 200};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 2);
        f = (struct fp_store_filter){.event = "cycles"};
        p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, &f, p), 0);
        FP_CHECK_EQ_INT(fp_pprof_n_sample_types(p), 0);
        fp_pprof_free(p);

        struct fp_store_stats st;
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK_EQ_INT(st.buckets, 1);
        FP_CHECK_EQ_INT(st.pending_buckets, 1);
        FP_CHECK_EQ_INT(st.targets, 2);
        FP_CHECK_EQ_INT(st.threads, 3);
        FP_CHECK_EQ_INT(st.stacks, 3);
        FP_CHECK_EQ_INT(st.frames, 4);
        FP_CHECK_EQ_INT(st.functions, 3);
        FP_CHECK_EQ_INT(st.mappings, 2);
        FP_CHECK_EQ_INT(st.first_ns, T0);
        FP_CHECK_EQ_INT(st.last_ns, T0 + 10 * SEC);
        fp_store_close(s);
}

/*
 * A function's system name and file and a frame's line (schema version 9):
 * kept apart, read back into pprof's Function and Line.
 */
static void test_names(void)
{
        struct fp_store *s = NULL;
        struct fp_store_batch *b = fp_store_batch_new(T0, 10 * SEC);
        struct fp_store_target t = {
            .host = "h", .pid = 7, .starttime = 1, .comm = "py", .exe = "/py"};
        struct fp_store_frame py[] = {
            {"Shop.price", NULL, NULL, 0, 0, 0, 0, "price", "/srv/shop.py", 41, 0},
            {"Shop.price", NULL, NULL, 0, 0, 0, 0, "price", "/srv/shop.py", 44, 0},
            {"std::vector<int>::push_back(int const&)", "/usr/bin/app", "ab", 0x1000, 0x2000, 0,
             0x1100, "_ZNSt6vectorIiSaIiEE9push_backERKi", NULL, 0, 0},
            /* The same name without a system name: another function. */
            {"std::vector<int>::push_back(int const&)", "/usr/bin/app", "ab", 0x1000, 0x2000, 0,
             0x1100, NULL, NULL, 0, 0},
        };
        uint32_t tid, e, st[4];
        char err[256];

        fresh_path("names.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &tid), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &e), 0);
        for (int i = 0; i < 4; i++) {
                FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, &py[i], 1, &st[i]), 0);
                FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, tid, e, 7, "py", st[i],
                                                          (uint64_t)i + 1,
                                                          ((uint64_t)i + 1) * 1000),
                                0);
        }
        FP_CHECK_EQ_INT(fp_store_batch_n_stacks(b), 4);
        FP_CHECK_EQ_INT(write_and_free(s, b), 0);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM functions"), 3);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM frames"), 4);

        struct fp_pprof *p = fp_pprof_new();
        int seen = 0;
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, NULL, p), 4);
        for (size_t i = 0; i < fp_pprof_n_samples(p); i++) {
                struct fp_pprof_sample_view v;
                struct fp_pprof_line_view l;
                fp_pprof_sample_get(p, i, &v);
                FP_CHECK_EQ_INT(v.n_locations, 1);
                FP_CHECK_EQ_INT(fp_pprof_location_line(p, v.location_ids[0], 0, &l), 0);
                int k = (int)v.values[0] - 1;
                FP_CHECK_EQ_STR(l.function_name, py[k].function);
                FP_CHECK_EQ_STR(l.system_name,
                                py[k].system_name ? py[k].system_name : py[k].function);
                FP_CHECK_EQ_STR(l.filename, py[k].filename ? py[k].filename : "");
                FP_CHECK_EQ_INT(l.line, py[k].line);
                seen |= 1 << k;
        }
        FP_CHECK_EQ_INT(seen, 15);
        fp_pprof_free(p);
        fp_store_close(s);
}

static int count_series(void *ud, const struct fp_store_series *se)
{
        int *n = ud;
        (*n)++;
        FP_CHECK_EQ_STR(se->host, "host-a");
        return 0;
}

static void test_merge_and_filters(void)
{
        struct fp_store *s = NULL;
        char err[256];

        fresh_path("merge.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        /* Three buckets with the same 10 stacks (one of them in two targets), counts 1, 2, 4. */
        for (int i = 0; i < 3; i++)
                FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + i * 10 * SEC, 300, 0, 10, 2,
                                                             (uint64_t)1 << i)),
                                0);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + 30 * SEC, 400, 0, 10, 1, 100)), 0);

        struct fp_store_stats st;
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK_EQ_INT(st.stacks, 10); /* shared across buckets and targets */
        FP_CHECK_EQ_INT(st.buckets, 4);

        struct fp_pprof *p = fp_pprof_new();
        struct fp_store_filter f = {.pid = 300};
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, &f, p), 10);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 0), 70);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 1), 70000);
        int64_t time, dur;
        fp_pprof_get_time(p, &time, &dur);
        FP_CHECK_EQ_INT(time, T0);
        FP_CHECK_EQ_INT(dur, 30 * SEC);
        fp_pprof_free(p);

        /* Both targets: 10 stacks x 2 processes, pid labels tell them apart. */
        p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, NULL, p), 20);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 0), 1070);
        fp_pprof_free(p);

        /* since/until select overlapping buckets. */
        f = (struct fp_store_filter){.pid = 300, .since_ns = T0 + 10 * SEC};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 60);
        f = (struct fp_store_filter){
            .pid = 300, .since_ns = T0 + 5 * SEC, .until_ns = T0 + 15 * SEC};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 30);
        f = (struct fp_store_filter){.pid = 300, .until_ns = T0 + 10 * SEC};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 10);
        f = (struct fp_store_filter){.since_ns = T0 + 100 * SEC};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 0);
        f = (struct fp_store_filter){.bucket_min = 2, .bucket_max = 2};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 20);
        f = (struct fp_store_filter){.host = "host-b"};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 0);
        f = (struct fp_store_filter){.host = "host-a", .process = "app", .starttime = 1300};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 70);

        /* A second event in a later bucket: the default stays the first event. */
        struct fp_store_batch *b = fp_store_batch_new(T0 + 40 * SEC, 10 * SEC);
        struct fp_store_target t = {.host = "host-b", .pid = 300, .starttime = 1300, .comm = "app"};
        uint32_t ti, ei, si;
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cycles, &ei), 0);
        FP_CHECK_EQ_INT(add_stack(b, 3, &si), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ei, 300, "main", si, 5, 123456), 0);
        FP_CHECK_EQ_INT(write_and_free(s, b), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), 1070);
        f = (struct fp_store_filter){.event = "cycles"};
        FP_CHECK_EQ_INT(total_of(s, &f, 1), 123456);
        p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, &f, p), 1);
        const char *unit;
        FP_CHECK_EQ_STR(fp_pprof_sample_type(p, 1, &unit), "cycles");
        FP_CHECK_EQ_INT(fp_pprof_period(p, NULL, NULL), 0);
        /* Merging a cpu-clock query into a cycles profile: sample types differ. */
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, NULL, p), -EINVAL);
        FP_CHECK(fp_store_errmsg(s)[0] != '\0');
        fp_pprof_free(p);

        /* Two hosts with pid 300: a host label appears. */
        p = fp_pprof_new();
        f = (struct fp_store_filter){.pid = 300};
        struct fp_store_batch *b2 = make_batch(T0 + 50 * SEC, 300, 0, 1, 1, 1);
        FP_CHECK_EQ_INT(write_and_free(s, b2), 0);
        b2 = fp_store_batch_new(T0 + 60 * SEC, 10 * SEC);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b2, &t, &ti), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b2, &cpu_clock, &ei), 0);
        FP_CHECK_EQ_INT(add_stack(b2, 0, &si), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b2, ti, ei, 300, "main", si, 1, 1), 0);
        FP_CHECK_EQ_INT(write_and_free(s, b2), 0);
        FP_CHECK(fp_store_query_pprof(s, &f, p) > 0);
        FP_CHECK(label_str(p, 0, "host", NULL) != NULL);
        fp_pprof_free(p);

        int n = 0;
        FP_CHECK_EQ_INT(
            fp_store_list_series(s, &(struct fp_store_filter){.host = "host-a"}, count_series, &n),
            2);
        FP_CHECK_EQ_INT(n, 2);
        fp_store_close(s);
}

struct series_want {
        int n;
        int64_t first, last;
        uint64_t count;
        bool active;
        char config[64];
        int64_t guard;
};

static int grab_series(void *ud, const struct fp_store_series *se)
{
        struct series_want *w = ud;
        w->n++;
        w->first = se->first_ns;
        w->last = se->last_ns;
        w->count = se->count;
        return 0;
}

static int grab_target(void *ud, const struct fp_store_target_info *t)
{
        struct series_want *w = ud;
        w->n++;
        w->active = t->active;
        snprintf(w->config, sizeof(w->config), "%s", t->config);
        w->first = t->first_ns;
        w->last = t->last_ns;
        w->guard = t->guard;
        return 0;
}

static void test_reopen_and_targets(void)
{
        struct fp_store *s = NULL;
        struct series_want w = {0};
        char err[256];

        fresh_path("reopen.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        for (int i = 0; i < 5; i++)
                FP_CHECK_EQ_INT(
                    write_and_free(s, make_batch(T0 + i * 10 * SEC, 77, (unsigned)i * 5, 20, 4, 3)),
                    0);
        /* The last batch says the target was stopped. */
        struct fp_store_batch *b = fp_store_batch_new(T0 + 50 * SEC, 10 * SEC);
        struct fp_store_target t = {.host = "host-a",
                                    .pid = 77,
                                    .starttime = 1077,
                                    .comm = "app",
                                    .exe = "/usr/bin/app",
                                    .config = "event=cycles period=100000",
                                    .active = false,
                                    .has_guard = true,
                                    .guard = 65534};
        uint32_t ti;
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_drop(b, ti, "queue_full", 11), 0);
        FP_CHECK_EQ_INT(write_and_free(s, b), 0);
        fp_store_close(s);

        s = NULL;
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), 5 * 20 * 3);
        FP_CHECK_EQ_INT(drops_of(s, "queue_full"), 11);
        FP_CHECK_EQ_INT(fp_store_list_series(s, NULL, grab_series, &w), 1);
        FP_CHECK_EQ_INT(w.first, T0);
        FP_CHECK_EQ_INT(w.last, T0 + 50 * SEC);
        FP_CHECK_EQ_INT(w.count, 300);
        w = (struct series_want){0};
        FP_CHECK_EQ_INT(fp_store_list_targets(s, "host-a", grab_target, &w), 1);
        FP_CHECK(!w.active);
        FP_CHECK_EQ_STR(w.config, "event=cycles period=100000");
        FP_CHECK_EQ_INT(w.last, T0 + 60 * SEC);
        FP_CHECK_EQ_INT(w.guard, 65534); /* whom it was profiled for: the newest batch's */
        FP_CHECK_EQ_INT(fp_store_list_targets(s, "nohost", grab_target, &w), 0);
        /* Writing after reopening reuses the stored stacks (the caches start cold). */
        struct fp_store_stats st0, st1;
        FP_CHECK_EQ_INT(fp_store_stats(s, &st0), 0);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + 60 * SEC, 77, 0, 20, 4, 3)), 0);
        FP_CHECK_EQ_INT(fp_store_stats(s, &st1), 0);
        FP_CHECK_EQ_INT(st1.stacks, st0.stacks);
        FP_CHECK_EQ_INT(st1.frames, st0.frames);
        fp_store_close(s);

        /* Read-only handle: queries work, writes do not. */
        FP_CHECK_EQ_INT(fp_store_open_readonly(path, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), 6 * 20 * 3);
        b = make_batch(T0, 1, 0, 1, 1, 1);
        FP_CHECK_EQ_INT(fp_store_write_batch(s, b), -EROFS);
        fp_store_batch_free(b);
        fp_store_close(s);
        fresh_path("missing.db");
        FP_CHECK_EQ_INT(fp_store_open_readonly(path, &s, err, sizeof(err)), -ENOENT);
        FP_CHECK(access(path, F_OK) != 0);
}

static void test_uploads(void)
{
        struct fp_store *s = NULL;
        struct fp_store_bucket pend[8];
        char err[256];

        fresh_path("upload.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        for (int i = 0; i < 4; i++)
                FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + i * 10 * SEC, 55, 0, 5, 1, 2)),
                                0);
        /* What the collector ingests is final. */
        struct fp_store_batch *b = make_batch(T0 + 40 * SEC, 55, 0, 5, 1, 2);
        fp_store_batch_set_uploaded(b, true);
        FP_CHECK_EQ_INT(write_and_free(s, b), 0);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), 4);
        FP_CHECK_EQ_INT(fp_store_pending_uploads(s, pend, 2), 2);
        FP_CHECK_EQ_INT(pend[0].start_ns, T0);
        FP_CHECK_EQ_INT(pend[1].start_ns, T0 + 10 * SEC);
        FP_CHECK_EQ_INT(pend[1].length_ns, 10 * SEC);
        FP_CHECK(pend[0].id < pend[1].id);
        /* The uploader queries one bucket by id. */
        struct fp_store_filter f = {.bucket_min = pend[1].id, .bucket_max = pend[1].id};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 10);

        int64_t ids[3] = {pend[0].id, pend[1].id, 999};
        FP_CHECK_EQ_INT(fp_store_mark_uploaded(s, ids, 3), 2);
        FP_CHECK_EQ_INT(fp_store_mark_uploaded(s, ids, 2), 0);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), 2);
        FP_CHECK_EQ_INT(fp_store_pending_uploads(s, pend, 8), 2);
        FP_CHECK_EQ_INT(pend[0].start_ns, T0 + 20 * SEC);

        /* A rejected bucket: its samples become upload_rejected drops in the next bucket. */
        FP_CHECK_EQ_INT(fp_store_mark_rejected(s, &pend[0].id, 1), 1);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), 1);
        FP_CHECK_EQ_INT(drops_of(s, "upload_rejected"), 10); /* carried, not in a bucket yet */
        f = (struct fp_store_filter){.until_ns = T0 + 1000 * SEC};
        struct drop_sum ds = {"upload_rejected", 0};
        FP_CHECK(fp_store_drop_totals(s, &f, sum_drops, &ds) >= 0);
        FP_CHECK_EQ_INT(ds.count, 0);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + 50 * SEC, 55, 0, 5, 1, 2)), 0);
        FP_CHECK_EQ_INT(fp_store_pending_uploads(s, pend, 8), 2);
        f = (struct fp_store_filter){.bucket_min = pend[1].id, .bucket_max = pend[1].id};
        ds = (struct drop_sum){"upload_rejected", 0};
        FP_CHECK(fp_store_drop_totals(s, &f, sum_drops, &ds) >= 0);
        FP_CHECK_EQ_INT(ds.count, 10);
        struct fp_pprof *p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, &f, p), 5);
        FP_CHECK_EQ_INT(fp_pprof_n_comments(p), 1);
        FP_CHECK_EQ_STR(fp_pprof_comment(p, 0), "dropped upload_rejected: 10");
        fp_pprof_free(p);
        fp_store_close(s);

        /* Upload state survives reopening. */
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), 2);
        fp_store_close(s);
}

/* Frames that no stack lists (decoding the stacks' varint frame lists). */
static int64_t orphan_frames(void)
{
        sqlite3 *db;
        sqlite3_stmt *st;
        int64_t max = db_int("SELECT coalesce(max(id), 0) FROM frames"), orphans = 0;
        uint8_t *used = calloc((size_t)max + 1, 1);

        if (!used || sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
                return -1;
        sqlite3_prepare_v2(db, "SELECT frames FROM stacks", -1, &st, NULL);
        while (sqlite3_step(st) == SQLITE_ROW) {
                const uint8_t *p = sqlite3_column_blob(st, 0);
                int len = sqlite3_column_bytes(st, 0);
                uint64_t v = 0;
                unsigned shift = 0;
                for (int i = 0; i < len; i++) {
                        v |= (uint64_t)(p[i] & 0x7f) << shift;
                        shift += 7;
                        if (!(p[i] & 0x80)) {
                                if (v <= (uint64_t)max)
                                        used[v] = 1;
                                v = 0;
                                shift = 0;
                        }
                }
        }
        sqlite3_finalize(st);
        sqlite3_prepare_v2(db, "SELECT id FROM frames", -1, &st, NULL);
        while (sqlite3_step(st) == SQLITE_ROW)
                if (!used[sqlite3_column_int64(st, 0)])
                        orphans++;
        sqlite3_finalize(st);
        sqlite3_close(db);
        free(used);
        return orphans;
}

static void test_eviction(void)
{
        const uint64_t budget = 2 << 20;
        struct fp_store *s = NULL;
        struct fp_store_stats st;
        uint64_t written = 0, worst = 0;
        char err[256];
        int over = 0, empty = 0;

        fresh_path("evict.db");
        FP_CHECK_EQ_INT(fp_store_open(path, budget, &s, err, sizeof(err)), 0);
        /* 100 buckets of 400 new stacks each (about 250 KiB a bucket): 25 MiB unevicted. */
        for (int i = 0; i < 100; i++) {
                uint64_t count = 1 + (uint64_t)i % 3;
                FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + i * 10 * SEC, 900,
                                                             (unsigned)i * 400, 400, 8, count)),
                                0);
                written += 400 * count;
                FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
                if (i == 0)
                        printf("eviction: one bucket takes %.0f KiB\n", st.live_bytes / 1024.0);
                if (st.file_bytes + st.wal_bytes > worst)
                        worst = st.file_bytes + st.wal_bytes;
                if (st.file_bytes + st.wal_bytes > budget + budget / 2)
                        over++;
                /* Stacks only the touch slack keeps never push out the bucket just written. */
                if (st.buckets == 0)
                        empty++;
                /* Upload the first five: their eviction is no loss. */
                if (i == 4) {
                        struct fp_store_bucket pend[5];
                        int64_t ids[5];
                        FP_CHECK_EQ_INT(fp_store_pending_uploads(s, pend, 5), 5);
                        for (int k = 0; k < 5; k++)
                                ids[k] = pend[k].id;
                        FP_CHECK_EQ_INT(fp_store_mark_uploaded(s, ids, 5), 5);
                }
        }
        printf("eviction: worst file+wal %.2f MiB for a %.2f MiB budget, %llu buckets evicted\n",
               worst / 1048576.0, budget / 1048576.0, (unsigned long long)st.evicted_buckets);
        printf("eviction: left empty after %d of 100 writes\n", empty);
        FP_CHECK_EQ_INT(over, 0);
        FP_CHECK_EQ_INT(empty, 0);
        FP_CHECK(st.evicted_buckets > 5);
        FP_CHECK(st.buckets < 100);
        FP_CHECK(st.live_bytes <= budget);

        /* Nothing lost silently: stored + evicted == written - uploaded (first five). */
        uint64_t uploaded = 400 * (1 + 2 + 3 + 1 + 2);
        uint64_t stored = (uint64_t)total_of(s, NULL, 0);
        uint64_t evicted = drops_of(s, "evicted");
        printf("eviction: written %llu, stored %llu, evicted %llu, uploaded %llu\n",
               (unsigned long long)written, (unsigned long long)stored, (unsigned long long)evicted,
               (unsigned long long)uploaded);
        FP_CHECK_EQ_INT(stored + evicted + uploaded, written);
        /* The evicted counts sit in recent buckets, so their uploads report them. */
        struct fp_store_filter f = {.since_ns = T0 + 90 * 10 * SEC};
        struct drop_sum ds = {"evicted", 0};
        FP_CHECK(fp_store_drop_totals(s, &f, sum_drops, &ds) > 0);
        FP_CHECK(ds.count > 0);

        /* Garbage: every stack is referenced; after a sweep, every frame and function too. */
        uint64_t missing = 1, unused = 1;
        FP_CHECK_EQ_INT(fp_store_check_refs(s, &missing, &unused), 0);
        FP_CHECK_EQ_INT(missing, 0);
        FP_CHECK_EQ_INT(unused, 0);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM stacks"), (int64_t)st.stacks);
        /* Frames are kept relative to their mapping: offsets inside it. */
        FP_CHECK(db_int("SELECT count(*) FROM frames WHERE mapping_id != 0") > 1000);
        FP_CHECK_EQ_INT(
            db_int("SELECT count(*) FROM frames f JOIN mappings m ON m.id = f.mapping_id"
                   " WHERE f.offset < 0 OR f.offset >= m.memory_limit - m.memory_start"),
            0);
        FP_CHECK_EQ_INT(fp_store_gc(s), 0);
        FP_CHECK_EQ_INT(orphan_frames(), 0);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM functions WHERE id NOT IN"
                               " (SELECT function_id FROM frames)"),
                        0);
        FP_CHECK(db_int("SELECT count(*) FROM functions") < 1500 * 10);
        fp_store_close(s);
        FP_CHECK(integrity_ok());

        /* Reopening with a smaller budget evicts at once. */
        FP_CHECK_EQ_INT(fp_store_open(path, budget / 2, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK(st.live_bytes <= budget / 2);
        FP_CHECK(st.file_bytes + st.wal_bytes <= budget / 2 + budget / 4);
        stored = (uint64_t)total_of(s, NULL, 0);
        evicted = drops_of(s, "evicted");
        FP_CHECK_EQ_INT(stored + evicted + uploaded, written);
        /* A budget smaller than one bucket: the bucket itself goes, its count is kept. */
        fp_store_close(s);
        FP_CHECK_EQ_INT(fp_store_open(path, 1, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK_EQ_INT(st.max_bytes, FP_STORE_MIN_BYTES);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + 70 * SEC, 900, 500000, 6000, 8, 1)), 0);
        written += 6000;
        stored = (uint64_t)total_of(s, NULL, 0);
        evicted = drops_of(s, "evicted");
        FP_CHECK_EQ_INT(stored + evicted + uploaded, written);
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK(st.live_bytes <= FP_STORE_MIN_BYTES);
        fp_store_close(s);
        FP_CHECK(integrity_ok());
}

/* After each commit of the store's connection: counts the commits that leave no bucket. */
static int count_empty_commits(void *userdata, sqlite3 *db, const char *name, int pages)
{
        (void)db, (void)name, (void)pages;
        if (db_int("SELECT count(*) FROM buckets") == 0)
                ++*(int *)userdata;
        return SQLITE_OK;
}

/*
 * A budget that holds a few buckets and a writer that needs room for a
 * big one: a reader (dump --store) must never find the store empty, not
 * even between making room and writing, and the stacks the touch slack
 * keeps of evicted buckets must not push out the bucket just written.
 */
static void test_big_buckets(void)
{
        const uint64_t budget = 2 << 20;
        struct fp_store *s = NULL;
        struct fp_store_stats st;
        uint64_t written = 0, missing = 1, unused = 0;
        char err[256];
        int empty = 0, over = 0, empty_commits = 0;

        fresh_path("big.db");
        FP_CHECK_EQ_INT(fp_store_open(path, budget, &s, err, sizeof(err)), 0);
        /*
         * Seven small buckets, then one of several times their size: the
         * reserve learnt from the small ones is too little for the big one.
         */
        for (int i = 0; i < 40; i++) {
                unsigned n = i % 8 == 7 ? 1800 : 300;
                FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + i * 10 * SEC, 900,
                                                             100000 + (unsigned)i * 2000, n, 8, 1)),
                                0);
                written += n;
                if (i == 0) /* replaces the autocheckpoint: the store checkpoints itself */
                        sqlite3_wal_hook(s->db, count_empty_commits, &empty_commits);
                FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
                if (i == 0)
                        printf("big buckets: a small one takes %.0f KiB of a %.0f KiB budget\n",
                               st.live_bytes / 1024.0, budget / 1024.0);
                empty += st.buckets == 0;
                over += st.live_bytes > budget;
        }
        printf("big buckets: left empty after %d of 40 writes (by %d commits), over the budget "
               "after %d\n",
               empty, empty_commits, over);
        FP_CHECK_EQ_INT(empty, 0);
        FP_CHECK_EQ_INT(empty_commits, 0);
        FP_CHECK_EQ_INT(over, 0);
        FP_CHECK_EQ_INT((uint64_t)total_of(s, NULL, 0) + drops_of(s, "evicted"), written);
        FP_CHECK_EQ_INT(fp_store_check_refs(s, &missing, &unused), 0);
        FP_CHECK_EQ_INT(missing, 0);
        fp_store_close(s);
        FP_CHECK(integrity_ok());
}

static void write_file(const char *p, const void *data, size_t len)
{
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        FP_CHECK(fd >= 0);
        FP_CHECK(write(fd, data, len) == (ssize_t)len);
        close(fd);
}

static bool aside_exists(void)
{
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "ls %s.corrupt-* >/dev/null 2>&1", path);
        return system(cmd) == 0;
}

static void test_damaged(void)
{
        struct fp_store *s = NULL;
        char err[512], garbage[8192];
        struct stat sb;

        /* Garbage. */
        fresh_path("garbage.db");
        for (size_t i = 0; i < sizeof(garbage); i++)
                garbage[i] = (char)(i * 7 + 3);
        write_file(path, garbage, sizeof(garbage));
        err[0] = '\0';
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), FP_STORE_RECOVERED);
        FP_CHECK(strstr(err, "moved it aside") != NULL);
        printf("garbage: %s\n", err);
        FP_CHECK(aside_exists());
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0, 5, 0, 10, 2, 1)), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), 10);
        fp_store_close(s);

        /* A valid store truncated in the middle. */
        fresh_path("truncated.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        for (int i = 0; i < 10; i++)
                FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + i * 10 * SEC, 5,
                                                             (unsigned)i * 300, 300, 4, 1)),
                                0);
        fp_store_close(s);
        FP_CHECK_EQ_INT(stat(path, &sb), 0);
        FP_CHECK(sb.st_size > 200000);
        FP_CHECK_EQ_INT(truncate(path, sb.st_size / 2), 0);
        err[0] = '\0';
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), FP_STORE_RECOVERED);
        printf("truncated: %s\n", err);
        FP_CHECK(aside_exists());
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), 0);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0, 5, 0, 10, 2, 1)), 0);
        fp_store_close(s);
        FP_CHECK(integrity_ok());

        /* A page overwritten in the middle. */
        fresh_path("scribbled.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        for (int i = 0; i < 10; i++)
                FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + i * 10 * SEC, 5,
                                                             (unsigned)i * 300, 300, 4, 1)),
                                0);
        fp_store_close(s);
        int fd = open(path, O_WRONLY);
        FP_CHECK(pwrite(fd, garbage, 4096, 4096 * 20) == 4096);
        close(fd);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), FP_STORE_RECOVERED);
        printf("scribbled: %s\n", err);
        fp_store_close(s);

        /* Tiny files. */
        fresh_path("tiny.db");
        write_file(path, "SQLite format 3", 15);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), FP_STORE_RECOVERED);
        fp_store_close(s);
        fresh_path("empty.db");
        write_file(path, "", 0);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0); /* empty is new */
        fp_store_close(s);
}

static int count_upload(void *userdata, const struct fp_store_upload *u)
{
        (void)userdata;
        (void)u;
        return 0;
}

static int upload_first(void *userdata, const struct fp_store_upload *u)
{
        struct fp_store_upload *first = userdata;
        *first = (struct fp_store_upload){.id = u->id};
        return 0;
}

/* Uploads the outbox gives back, one by one. */
struct outbox_seen {
        size_t n;
        char key[4][40];
        char query[4][64];
        uint64_t samples[4];
        size_t len[4];
};

static int see_upload(void *userdata, const struct fp_store_upload *u)
{
        struct outbox_seen *o = userdata;
        if (o->n < 4) {
                snprintf(o->key[o->n], sizeof(o->key[0]), "%s", u->key);
                snprintf(o->query[o->n], sizeof(o->query[0]), "%s", u->query);
                o->samples[o->n] = u->samples;
                o->len[o->n] = u->len;
                FP_CHECK_EQ_INT(u->pid, 55);
                FP_CHECK_EQ_STR(u->host, "host-a");
        }
        o->n++;
        return 0;
}

static struct fp_store_upload upload_of(const char *key, int64_t bmin, int64_t bmax,
                                        uint64_t samples)
{
        static const uint8_t body[] = {1, 2, 3, 4};
        return (struct fp_store_upload){.host = "host-a",
                                        .event = "cpu-clock",
                                        .pid = 55,
                                        .starttime = 1055,
                                        .bucket_min = bmin,
                                        .bucket_max = bmax,
                                        .from_ns = T0,
                                        .to_ns = T0 + 30 * SEC,
                                        .samples = samples,
                                        .query = key,
                                        .body = body,
                                        .len = sizeof(body)};
}

/* The outbox: uploads move in with their buckets, and leave delivered, refused, split or evicted.
 */
static void test_outbox(void)
{
        struct fp_store *s = NULL;
        struct fp_store_bucket pend[8];
        struct fp_store_stats st;
        struct outbox_seen seen = {0};
        char err[512];

        fresh_path("outbox.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        for (int i = 0; i < 3; i++)
                FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + i * 10 * SEC, 55, 0, 5, 1, 2)),
                                0);
        FP_CHECK_EQ_INT(fp_store_pending_uploads(s, pend, 8), 3);
        int64_t ids[3] = {pend[0].id, pend[1].id, pend[2].id};

        /* In with the buckets: they are no longer pending but still waiting. */
        struct fp_store_upload a = upload_of("q=a", ids[0], ids[2], 30);
        snprintf(a.key, sizeof(a.key), "key-a");
        FP_CHECK_EQ_INT(fp_store_outbox_add(s, &a, 1, ids, 3), 3);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), 0);
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK_EQ_INT(st.pending_buckets, 3);
        FP_CHECK_EQ_INT(st.outbox_uploads, 1);
        FP_CHECK_EQ_INT(st.outbox_bytes, 4);
        FP_CHECK_EQ_INT(st.oldest_waiting_ns, T0);
        /* An upload without a key is refused, and nothing changes. */
        struct fp_store_upload bad = upload_of("q=bad", ids[0], ids[0], 1);
        FP_CHECK_EQ_INT(fp_store_outbox_add(s, &bad, 1, NULL, 0), -EINVAL);
        fp_store_close(s);

        /* Bytes, key and query survive a restart unchanged. */
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 8, see_upload, &seen), 1);
        FP_CHECK_EQ_STR(seen.key[0], "key-a");
        FP_CHECK_EQ_STR(seen.query[0], "q=a");
        FP_CHECK_EQ_INT(seen.samples[0], 30);
        FP_CHECK_EQ_INT(seen.len[0], 4);

        /* Split: replaced by two, atomically, nothing counted. */
        struct fp_store_upload half[2] = {upload_of("q=a1", ids[0], ids[1], 20),
                                          upload_of("q=a2", ids[2], ids[2], 10)};
        snprintf(half[0].key, sizeof(half[0].key), "key-a1");
        snprintf(half[1].key, sizeof(half[1].key), "key-a2");
        struct fp_store_upload first = {0};
        seen = (struct outbox_seen){0};
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 1, upload_first, &first), 1);
        FP_CHECK_EQ_INT(fp_store_outbox_end(s, first.id, FP_UPLOAD_REPLACED, half, 2), 0);
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 8, see_upload, &seen), 2);
        FP_CHECK_EQ_STR(seen.key[0], "key-a1");
        FP_CHECK_EQ_STR(seen.key[1], "key-a2");
        FP_CHECK_EQ_INT(drops_of(s, "upload_rejected"), 0);

        /* Delivered: gone, nothing counted; ending it again is no error. */
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 1, upload_first, &first), 1);
        FP_CHECK_EQ_INT(fp_store_outbox_end(s, first.id, FP_UPLOAD_DELIVERED, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_store_outbox_end(s, first.id, FP_UPLOAD_DELIVERED, NULL, 0), 0);
        /* Refused: gone, its samples carried as upload_rejected into the next bucket. */
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 1, upload_first, &first), 1);
        FP_CHECK_EQ_INT(fp_store_outbox_end(s, first.id, FP_UPLOAD_REFUSED, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 8, count_upload, NULL), 0);
        FP_CHECK_EQ_INT(drops_of(s, "upload_rejected"), 10);
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK_EQ_INT(st.pending_buckets, 0);
        FP_CHECK_EQ_INT(st.oldest_waiting_ns, 0);

        /* Eviction takes a waiting upload before any pending bucket, and counts it. */
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + 30 * SEC, 55, 0, 5, 1, 2)), 0);
        FP_CHECK_EQ_INT(fp_store_pending_uploads(s, pend, 8), 1);
        struct fp_store_upload c = upload_of("q=c", ids[0], ids[2], 30);
        snprintf(c.key, sizeof(c.key), "key-c");
        FP_CHECK_EQ_INT(fp_store_outbox_add(s, &c, 1, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_store_expire(s, T0 + 30 * SEC), 4); /* three buckets, one upload */
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 8, count_upload, NULL), 0);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), 1);
        FP_CHECK_EQ_INT(drops_of(s, "evicted"), 30);
        fp_store_close(s);
}

struct codec_check {
        const struct fp_store_sample *want;
        size_t n, seen;
        bool same;
};

static int codec_seen(void *userdata, const struct fp_store_sample *e)
{
        struct codec_check *c = userdata;
        if (c->want) {
                if (c->seen >= c->n)
                        c->same = false;
                else
                        c->same = c->same && memcmp(e, &c->want[c->seen], sizeof(*e)) == 0;
        }
        c->seen++;
        return 0;
}

/* The samples encoding: exact round trips; damaged values are errors, never crashes. */
static void test_samples_codec(void)
{
        enum { N = 5000 };
        struct fp_store_sample *v = calloc(N, sizeof(*v));
        uint8_t *data = NULL, *bad;
        size_t len = 0, n = 0;
        uint32_t thread = 1, stack = 0;

        FP_CHECK(v != NULL);
        srandom(7);
        while (n < N) {
                if (random() % 50 == 0) {
                        thread += 1 + (uint32_t)(random() % 3);
                        stack = 0;
                }
                stack += 1 + (uint32_t)(random() % 200);
                uint64_t count = 1 + (uint64_t)(random() % 4);
                /* Periods around 10 ms that vary, and a few far off. */
                uint64_t value = count * 10101010 + (uint64_t)(random() % 1000000);
                if (random() % 100 == 0)
                        value = (uint64_t)random() * 1000;
                v[n++] = (struct fp_store_sample){thread, stack, count, value};
        }
        FP_CHECK_EQ_INT(fp_store_samples_encode(v, N, &data, &len), 0);
        printf("samples codec: %d entries in %zu bytes (%.2f bytes each)\n", N, len,
               (double)len / N);
        struct codec_check c = {.want = v, .n = N, .same = true};
        FP_CHECK_EQ_INT(fp_store_samples_decode(data, len, codec_seen, &c), 0);
        FP_CHECK(c.same);
        FP_CHECK_EQ_INT(c.seen, N);
        /* Extremes survive too. */
        struct fp_store_sample ext[2] = {{1, 1, 1, 0}, {UINT32_MAX, UINT32_MAX, UINT64_MAX / 2, 1}};
        uint8_t *d2 = NULL;
        size_t l2 = 0;
        FP_CHECK_EQ_INT(fp_store_samples_encode(ext, 2, &d2, &l2), 0);
        c = (struct codec_check){.want = ext, .n = 2, .same = true};
        FP_CHECK_EQ_INT(fp_store_samples_decode(d2, l2, codec_seen, &c), 0);
        FP_CHECK(c.same && c.seen == 2);
        free(d2);
        /* Unsorted or repeated entries are refused. */
        struct fp_store_sample twice[2] = {{1, 5, 1, 1}, {1, 5, 1, 1}};
        FP_CHECK_EQ_INT(fp_store_samples_encode(twice, 2, &d2, &l2), -EINVAL);

        /* Every truncation, and bytes scribbled anywhere: an error or a decode, never a crash. */
        size_t failed = 0;
        for (size_t cut = 1; cut < len; cut += (cut < 64 ? 1 : 97)) {
                c = (struct codec_check){0};
                failed += fp_store_samples_decode(data, cut, codec_seen, &c) < 0;
        }
        FP_CHECK(failed > 0);
        bad = malloc(len);
        FP_CHECK(bad != NULL);
        for (int k = 0; k < 300; k++) {
                memcpy(bad, data, len);
                for (int j = 0; j < 4; j++)
                        bad[(size_t)random() % len] = (uint8_t)random();
                c = (struct codec_check){0};
                (void)fp_store_samples_decode(bad, len, codec_seen, &c);
        }
        /* A payload that claims more than it holds, inside valid compression. */
        uint8_t lie[64];
        uLongf zl = sizeof(lie) - 2;
        const uint8_t payload[] = {200, 1, 1, 1, 0, 1}; /* 200 entries, then almost nothing */
        lie[0] = 1;
        lie[1] = sizeof(payload);
        FP_CHECK_EQ_INT(compress2(lie + 2, &zl, payload, sizeof(payload), 6), Z_OK);
        c = (struct codec_check){0};
        FP_CHECK_EQ_INT(fp_store_samples_decode(lie, zl + 2, codec_seen, &c), -EBADMSG);
        free(bad);
        free(data);
        free(v);

        /* A damaged value in a store: the query says so, clearly. */
        struct fp_store *s = NULL;
        char err[512];
        fresh_path("damaged-samples.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0, 55, 0, 5, 1, 2)), 0);
        fp_store_close(s);
        FP_CHECK_EQ_INT(db_exec("UPDATE series_samples SET data = X'01FF0012'"), SQLITE_OK);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        struct fp_pprof *p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, NULL, p), -EBADMSG);
        printf("damaged samples: %s\n", fp_store_errmsg(s));
        FP_CHECK(strstr(fp_store_errmsg(s), "damaged") != NULL);
        fp_pprof_free(p);
        fp_store_close(s);
}

/* A bucket using stack 0 (in every bucket) and stack k (in this one only). */
static struct fp_store_batch *slack_batch(int64_t start, unsigned k)
{
        struct fp_store_batch *b = fp_store_batch_new(start, 10 * SEC);
        struct fp_store_target t = {.host = "host-a", .pid = 77, .starttime = 1077, .comm = "app"};
        uint32_t ti, ei, s0, sk;

        FP_CHECK(b != NULL);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &ei), 0);
        FP_CHECK_EQ_INT(add_stack(b, 0, &s0), 0);
        FP_CHECK_EQ_INT(add_stack(b, k, &sk), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ei, 77, "main", s0, 1, 1000), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ei, 77, "main", sk, 1, 1000), 0);
        return b;
}

/*
 * Stacks' last_bucket lags by up to FP_STORE_TOUCH_SLACK buckets: eviction
 * never takes a stack a surviving bucket uses (the one in every bucket is
 * touched only now and then), and takes unused ones once they are older
 * than the slack.
 */
static void test_touch_slack(void)
{
        struct fp_store *s = NULL;
        struct fp_store_stats st;
        const unsigned n = 3 * FP_STORE_TOUCH_SLACK + 17, keep = 10;
        uint64_t missing = 1, unused = 0, most_unused = 0;

        fresh_path("slack.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, NULL, 0), 0);
        for (unsigned i = 0; i < n; i++) {
                FP_CHECK_EQ_INT(
                    write_and_free(s, slack_batch(T0 + (int64_t)i * 10 * SEC, 1000 + i)), 0);
                if (i >= keep && i % 5 == 0) {
                        FP_CHECK(fp_store_expire(s, T0 + (int64_t)(i - keep) * 10 * SEC) >= 0);
                        FP_CHECK_EQ_INT(fp_store_check_refs(s, &missing, &unused), 0);
                        FP_CHECK_EQ_INT(missing, 0);
                        if (unused > most_unused)
                                most_unused = unused;
                }
        }
        /* Every surviving bucket still reads whole: two samples each. */
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), (int64_t)(2 * st.buckets));
        printf("touch slack: %u buckets written, %" PRIu64 " kept, %" PRIu64
               " stacks stored, at most %" PRIu64 " unused ones waiting\n",
               n, st.buckets, st.stacks, most_unused);
        /* Garbage waits at most the slack (plus the buckets expired at once). */
        FP_CHECK(most_unused > 0);
        FP_CHECK(most_unused <= FP_STORE_TOUCH_SLACK + 5 + 2);
        FP_CHECK(st.stacks <= 1 + st.buckets + FP_STORE_TOUCH_SLACK + 5);
        fp_store_close(s);
}

static void test_versions(void)
{
        struct fp_store *s = NULL;
        char err[512];

        fresh_path("newer.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0, 5, 0, 10, 2, 1)), 0);
        fp_store_close(s);
        FP_CHECK_EQ_INT(db_exec("PRAGMA user_version = 99"), SQLITE_OK);
        s = NULL;
        err[0] = '\0';
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), -EPROTO);
        FP_CHECK(s == NULL);
        FP_CHECK(strstr(err, "newer") != NULL);
        printf("newer: %s\n", err);
        FP_CHECK_EQ_INT(fp_store_open_readonly(path, &s, err, sizeof(err)), -EPROTO);
        /* The file is left alone. */
        FP_CHECK_EQ_INT(db_int("PRAGMA user_version"), 99);
        FP_CHECK(!aside_exists());

        FP_CHECK_EQ_INT(db_exec("PRAGMA user_version = 0"), SQLITE_OK);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), -EPROTO);
        printf("older: %s\n", err);
        /* A file of version 1, written by the build before version 2: migrated, data kept. */
        char cmd[1024];
        fresh_path("v1.db");
        snprintf(cmd, sizeof(cmd), "cp '%s/store-v1.db' '%s'", FP_TEST_DATA, path);
        FP_CHECK_EQ_INT(system(cmd), 0);
        int64_t v1_samples = db_int("SELECT sum(count) FROM samples");
        int64_t v1_rows = db_int("SELECT count(*) FROM samples");
        int64_t v1_pending = db_int("SELECT count(*) FROM buckets WHERE uploaded_ns IS NULL");
        /* Every frame's address, as a checksum: version 7 keeps it relative to its mapping. */
        int64_t v1_frames = db_int("SELECT sum((address & 16777215) * 7 + id) FROM frames");
        int64_t v1_max_frame = db_int("SELECT max(id) FROM frames");
        int64_t v1_threads = db_int("SELECT count(*) FROM threads");
        FP_CHECK(v1_samples > 1000 && v1_rows > 100);
        FP_CHECK_EQ_INT(fp_store_open_readonly(path, &s, err, sizeof(err)), -EPROTO);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), v1_samples);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), v1_pending);
        FP_CHECK_EQ_INT(fp_store_outbox_list(s, 8, count_upload, NULL), 0);
        struct series_want tw = {.guard = 0};
        FP_CHECK(fp_store_list_targets(s, NULL, grab_target, &tw) > 0);
        FP_CHECK_EQ_INT(tw.guard, -1); /* not known before version 5 */
        uint64_t missing = 1, unused = 1;
        FP_CHECK_EQ_INT(fp_store_check_refs(s, &missing, &unused), 0);
        FP_CHECK_EQ_INT(missing, 0);
        /* And it takes new buckets. */
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + 100000 * SEC, 55, 0, 5, 1, 2)), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), v1_samples + 10);
        fp_store_close(s);
        printf("v1 store migrated: %lld samples in %lld rows kept\n", (long long)v1_samples,
               (long long)v1_rows);
        FP_CHECK_EQ_INT(db_int("PRAGMA user_version"), FP_STORE_SCHEMA_VERSION);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM sqlite_master WHERE name = 'samples'"), 0);
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "SELECT sum(((f.offset + coalesce(m.memory_start, 0)) & 16777215) * 7 + f.id)"
                 " FROM frames f LEFT JOIN mappings m ON m.id = f.mapping_id WHERE f.id <= %lld",
                 (long long)v1_max_frame);
        FP_CHECK_EQ_INT(db_int(sql), v1_frames);
        /* Version 8 rebuilt threads with a wait column: every thread kept, none waiting. */
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM threads WHERE wait = ''"), v1_threads + 1);
        FP_CHECK(integrity_ok());

        fresh_path("other.db");
        FP_CHECK_EQ_INT(db_exec("CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('x')"),
                        SQLITE_OK);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), -EPROTO);
        printf("other: %s\n", err);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM notes"), 1);

        /* Bad arguments. */
        FP_CHECK_EQ_INT(fp_store_open("", 0, &s, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_store_open("/nonexistent-dir/x.db", 0, &s, err, sizeof(err)), -ENOENT);
        printf("missing dir: %s\n", err);
}

static void test_batch_edges(void)
{
        struct fp_store_batch *b = fp_store_batch_new(T0, 10 * SEC);
        struct fp_store_target t = {.pid = 1}; /* host NULL: this machine */
        struct fp_store_event bad = {.name = "x"};
        struct fp_store_frame deep[FP_STORE_MAX_FRAMES + 1];
        uint32_t ti, ei, si;

        memset(deep, 0, sizeof(deep));
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &(struct fp_store_target){.pid = -1}, &ti),
                        -EINVAL);
        /* pid 0: a host-tier series of many processes. */
        FP_CHECK_EQ_INT(
            fp_store_batch_add_target(b, &(struct fp_store_target){.pid = 0, .starttime = 7}, &ti),
            0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &bad, &ei), -EINVAL);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &ei), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, deep, FP_STORE_MAX_FRAMES + 1, &si), -EINVAL);
        FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, NULL, 0, &si), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ei, 1, NULL, si, UINT64_MAX, 5), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ei, 1, NULL, si, 5, 5), 0);
        FP_CHECK_EQ_INT(fp_store_batch_target_count(b, ti), INT64_MAX);
        FP_CHECK_EQ_INT(fp_store_batch_add_drop(b, ti, "", 1), -EINVAL);
        FP_CHECK_EQ_INT(fp_store_batch_add_drop(b, 7, "x", 1), -EINVAL);
        FP_CHECK(fp_store_batch_bytes(b) > sizeof(void *));

        struct fp_store *s = NULL;
        char err[256], host[256];
        fresh_path("edges.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_write_batch(s, b), 0);
        fp_store_batch_free(b);
        gethostname(host, sizeof(host));
        host[sizeof(host) - 1] = '\0';
        struct fp_store_filter f = {.host = host};
        struct fp_pprof *p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, &f, p), 1);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 0), INT64_MAX);
        fp_pprof_free(p);
        /* An empty batch is a bucket too. */
        b = fp_store_batch_new(T0 + 10 * SEC, 10 * SEC);
        FP_CHECK_EQ_INT(fp_store_write_batch(s, b), 0);
        fp_store_batch_free(b);
        FP_CHECK_EQ_INT(fp_store_count_pending(s), 2);
        fp_store_close(s);
        fp_store_close(NULL);
        fp_store_batch_free(NULL);
}

/* A query from inside a series walk: reads nest (the uploader does this). */
static int nested_query(void *ud, const struct fp_store_series *se)
{
        struct fp_store *s = ud;
        struct fp_store_filter f = {.pid = se->pid, .starttime = se->starttime};
        struct fp_pprof *p = fp_pprof_new();
        int r = fp_store_query_pprof(s, &f, p);

        fp_pprof_free(p);
        return r < 0 ? r : 0;
}

static void test_keys_and_expiry(void)
{
        struct fp_store *s = NULL;
        struct fp_store_batch *b;

        fresh_path("keys.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, NULL, 0), 0);
        b = make_batch(T0, 10, 0, 4, 1, 5);
        FP_CHECK_EQ_INT(fp_store_batch_set_key(b, ""), -EINVAL);
        FP_CHECK_EQ_INT(fp_store_batch_set_key(b, "upload-1"), 0);
        FP_CHECK_EQ_INT(fp_store_write_batch(s, b), 0);
        /* The same key again: refused in the write transaction, nothing added. */
        FP_CHECK_EQ_INT(fp_store_write_batch(s, b), -EALREADY);
        FP_CHECK(strstr(fp_store_errmsg(s), "upload-1") != NULL);
        fp_store_batch_free(b);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM buckets"), 1);
        FP_CHECK_EQ_INT(db_int("SELECT sum(count) FROM bucket_series"), 20);
        /* Another key, and no key, are stored. */
        b = make_batch(T0 + 3600 * SEC, 10, 0, 4, 1, 5);
        FP_CHECK_EQ_INT(fp_store_batch_set_key(b, "upload-2"), 0);
        FP_CHECK_EQ_INT(write_and_free(s, b), 0);
        FP_CHECK_EQ_INT(write_and_free(s, make_batch(T0 + 7200 * SEC, 11, 0, 2, 1, 1)), 0);
        /* Keys outlive a reopen. */
        fp_store_close(s);
        s = NULL;
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, NULL, 0), 0);
        b = make_batch(T0, 10, 0, 4, 1, 5);
        FP_CHECK_EQ_INT(fp_store_batch_set_key(b, "upload-1"), 0);
        FP_CHECK_EQ_INT(fp_store_write_batch(s, b), -EALREADY);
        /* Queries nest inside a series walk. */
        FP_CHECK_EQ_INT(fp_store_list_series(s, NULL, nested_query, s), 2);
        /* Retention: buckets that ended by T0 + 3700 s go, with their keys. */
        FP_CHECK_EQ_INT(fp_store_expire(s, T0 + 3700 * SEC), 2);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM buckets"), 1);
        FP_CHECK_EQ_INT(db_int("SELECT count(*) FROM ingest_keys"), 0);
        FP_CHECK_EQ_INT(fp_store_expire(s, T0 + 3700 * SEC), 0);
        /* A key whose bucket is gone may be stored again. */
        FP_CHECK_EQ_INT(fp_store_write_batch(s, b), 0);
        fp_store_batch_free(b);
        FP_CHECK(integrity_ok());
        fp_store_close(s);
}

/* A target's service: stored, filtered on, listed; the agent's rules kept and forgotten. */
static int count_rule(void *userdata, const struct fp_store_rule *r)
{
        char *out = userdata;
        size_t n = strlen(out);
        snprintf(out + n, 256 - n, "%lld:%u:%s;", (long long)r->id, r->owner, r->spec);
        return 0;
}

static int grab_service(void *userdata, const struct fp_store_series *se)
{
        char *out = userdata;
        size_t n = strlen(out);
        snprintf(out + n, 256 - n, "%d=%s%s%s;", (int)se->pid, se->service,
                 se->container[0] ? "/" : "", se->container);
        return 0;
}

static int grab_cost(void *userdata, const struct fp_store_host_cost *c)
{
        *(struct fp_store_host_cost *)userdata = *c;
        return 0;
}

static void test_services_and_rules(void)
{
        struct fp_store *s = NULL;
        char err[256], got[256] = "";

        fresh_path("services.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        /* pids 10 and 11 are two processes of service "api"; 12 has none. */
        for (pid_t pid = 10; pid <= 12; pid++) {
                struct fp_store_batch *b = fp_store_batch_new(T0, 10 * SEC);
                struct fp_store_target t = {.host = "host-a",
                                            .pid = pid,
                                            .starttime = 5,
                                            .comm = "app",
                                            .config = "event=cpu-clock freq=99 kernel=0",
                                            .active = true,
                                            .service = pid < 12 ? "api" : NULL,
                                            .container = pid > 10 ? "0123456789ab" : NULL};
                uint32_t ti, ei, si;
                FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
                FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &ei), 0);
                FP_CHECK_EQ_INT(add_stack(b, (unsigned)pid, &si), 0);
                FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ei, pid, "main", si, (uint64_t)pid,
                                                          (uint64_t)pid * 1000),
                                0);
                FP_CHECK_EQ_INT(write_and_free(s, b), 0);
        }
        struct fp_store_filter f = {.service = "api"};
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 10 + 11);
        f.service = "nope";
        FP_CHECK_EQ_INT(total_of(s, &f, 0), 0);
        /* A container spans services: 11 (api) and 12 (none). */
        struct fp_store_filter cf = {.container = "0123456789ab"};
        FP_CHECK_EQ_INT(total_of(s, &cf, 0), 11 + 12);
        cf.service = "api";
        FP_CHECK_EQ_INT(total_of(s, &cf, 0), 11);
        cf = (struct fp_store_filter){.container = "0123456789"};
        FP_CHECK_EQ_INT(total_of(s, &cf, 0), 0);
        /* Samples of one thread name: pid 11's thread is "main" too, "none" has nothing. */
        struct fp_store_filter tf = {.thread_name = "main", .pid = 11};
        FP_CHECK_EQ_INT(total_of(s, &tf, 0), 11);
        tf.thread_name = "none";
        FP_CHECK_EQ_INT(total_of(s, &tf, 0), 0);
        FP_CHECK_EQ_INT(total_of(s, NULL, 0), 10 + 11 + 12);
        FP_CHECK_EQ_INT(fp_store_list_series(s, NULL, grab_service, got), 3);
        FP_CHECK_EQ_STR(got, "10=api;11=api/0123456789ab;12=/0123456789ab;");
        /* Samples carry the service label. */
        struct fp_pprof *p = fp_pprof_new();
        f.service = "api";
        FP_CHECK(fp_store_query_pprof(s, &f, p) > 0);
        uint8_t *buf = NULL;
        size_t len = 0;
        FP_CHECK_EQ_INT(fp_pprof_encode(p, 0, &buf, &len), 0);
        FP_CHECK(memmem(buf, len, "service", 7) != NULL);
        FP_CHECK(memmem(buf, len, "0123456789ab", 12) != NULL); /* pid 11's container label */
        free(buf);
        fp_pprof_free(p);

        /* Two uploads of one round carry the same cost: counted once per host and range. */
        for (pid_t pid = 10; pid <= 11; pid++) {
                struct fp_store_batch *b = fp_store_batch_new(T0 + 100 * SEC, 10 * SEC);
                struct fp_store_target t = {.host = "host-a", .pid = pid, .starttime = 5};
                struct fp_store_cost cost = {.agent_cpu_ns = 300000000,
                                             .agent_rss_bytes = 20 << 20,
                                             .host_cpus = 4,
                                             .from_ns = T0 + 100 * SEC,
                                             .to_ns = T0 + 110 * SEC};
                uint32_t ti, ei;
                FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
                FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &ei), 0);
                FP_CHECK_EQ_INT(fp_store_batch_set_series(b, ti, ei), 0);
                fp_store_batch_set_cost(b, &cost);
                FP_CHECK_EQ_INT(write_and_free(s, b), 0);
        }
        struct fp_store_host_cost hc = {0};
        FP_CHECK_EQ_INT(fp_store_host_costs(s, NULL, grab_cost, &hc), 1);
        FP_CHECK_EQ_INT(hc.agent_cpu_ns, 300000000);
        FP_CHECK_EQ_INT(hc.covered_ns, 10 * SEC);
        FP_CHECK_EQ_INT(hc.host_cpus, 4);
        struct fp_store_filter early = {.until_ns = T0 + 50 * SEC};
        FP_CHECK_EQ_INT(fp_store_host_costs(s, &early, grab_cost, &hc), 0); /* outside the range */

        got[0] = 0;
        FP_CHECK_EQ_INT(fp_store_list_rules(s, count_rule, got), 0);
        FP_CHECK_EQ_INT(fp_store_rule_put(s, 3, 1000, "name=api\nfreq=99\n"), 0);
        FP_CHECK_EQ_INT(fp_store_rule_put(s, 1, 0, "unit=nginx\n"), 0);
        FP_CHECK_EQ_INT(fp_store_rule_put(s, 3, 1000, "name=api\nfreq=49\n"), 0); /* replaced */
        FP_CHECK_EQ_INT(fp_store_rule_put(s, 0, 0, "x=1\n"), -EINVAL);
        fp_store_close(s);
        s = NULL;
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_list_rules(s, count_rule, got), 2);
        FP_CHECK_EQ_STR(got, "1:0:unit=nginx\n;3:1000:name=api\nfreq=49\n;");
        FP_CHECK_EQ_INT(fp_store_rule_delete(s, 1), 0);
        FP_CHECK_EQ_INT(fp_store_rule_delete(s, 99), 0);
        got[0] = 0;
        FP_CHECK_EQ_INT(fp_store_list_rules(s, count_rule, got), 1);
        fp_store_close(s);
}

/* Sums sample type 1 of p's samples labelled wait=want ("" : without a wait label). */
static int64_t wait_total(const struct fp_pprof *p, const char *want)
{
        int64_t sum = 0;
        for (size_t i = 0; i < fp_pprof_n_samples(p); i++) {
                struct fp_pprof_sample_view v;
                const char *w = label_str(p, i, "wait", NULL);
                fp_pprof_sample_get(p, i, &v);
                if (strcmp(w ? w : "", want) == 0)
                        sum += v.values[1];
        }
        return sum;
}

/*
 * Off-CPU samples: one thread's stack under each wait reason and running,
 * stored as distinct samples with a "wait" label; the wall profile (event
 * wall) adds the CPU time of targets that have off-CPU time, and only
 * theirs; a wait no one knows is refused.
 */
static void test_waits(void)
{
        static const struct fp_store_event off_cpu = {
            .name = FP_STORE_OFFCPU_EVENT,
            .count_type = "samples",
            .count_unit = "count",
            .value_type = "off-cpu",
            .value_unit = "nanoseconds",
            .period_type = "off-cpu",
            .period_unit = "nanoseconds",
            .period = 10000000,
        };
        static const char *const waits[] = FP_STORE_WAITS;
        struct fp_store *s = NULL;
        struct fp_store_batch *b = fp_store_batch_new(T0, 10 * SEC);
        struct fp_store_target t = {.host = "host-w",
                                    .pid = 70,
                                    .starttime = 7,
                                    .comm = "srv",
                                    .exe = "/usr/bin/srv",
                                    .config = "event=cpu-clock",
                                    .active = true};
        struct fp_store_target other = t;
        uint32_t ti, oi, ec, eo, si;
        char err[256];

        other.pid = 71;
        fresh_path("waits.db");
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &t, &ti), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_target(b, &other, &oi), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &cpu_clock, &ec), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_event(b, &off_cpu, &eo), 0);
        FP_CHECK_EQ_INT(add_stack(b, 3, &si), 0);
        /* 70: 2 ms on the CPU; 10, 20, 30 ms off it, by reason, all in one thread and stack. */
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ec, 700, "io", si, 2, 2000000), 0);
        for (int i = 0; i < 3; i++)
                FP_CHECK_EQ_INT(fp_store_batch_add_waiting(b, ti, eo, 700, "io", waits[i], si, 1,
                                                           10000000 * (uint64_t)(i + 1)),
                                0);
        /* 71: CPU time only, no off-CPU: not part of any wall profile. */
        FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, oi, ec, 710, "cpu", si, 5, 5000000), 0);
        FP_CHECK_EQ_INT(fp_store_batch_add_waiting(b, ti, eo, 700, "io", "napping", si, 1, 1),
                        -EINVAL);
        FP_CHECK_EQ_INT(write_and_free(s, b), 0);

        struct fp_store_filter f = {.event = FP_STORE_OFFCPU_EVENT};
        struct fp_pprof *p = fp_pprof_new();
        FP_CHECK(fp_store_query_pprof(s, &f, p) >= 0);
        FP_CHECK_EQ_INT(fp_pprof_n_samples(p), 3);
        FP_CHECK_EQ_STR(fp_pprof_sample_type(p, 1, NULL), "off-cpu");
        FP_CHECK_EQ_INT(wait_total(p, "sleep"), 10000000);
        FP_CHECK_EQ_INT(wait_total(p, "uninterruptible"), 20000000);
        FP_CHECK_EQ_INT(wait_total(p, "runqueue"), 30000000);
        fp_pprof_free(p);

        /* A thread's name still selects its off-CPU samples. */
        f.thread_name = "io";
        p = fp_pprof_new();
        FP_CHECK(fp_store_query_pprof(s, &f, p) >= 0);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 1), 60000000);
        fp_pprof_free(p);

        f = (struct fp_store_filter){.event = FP_STORE_WALL_EVENT};
        p = fp_pprof_new();
        FP_CHECK(fp_store_query_pprof(s, &f, p) >= 0);
        FP_CHECK_EQ_STR(fp_pprof_sample_type(p, 1, NULL), "wall");
        FP_CHECK_EQ_INT(fp_pprof_n_samples(p), 4);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 1), 62000000); /* 71's CPU time is not in it */
        FP_CHECK_EQ_INT(wait_total(p, ""), 2000000);
        fp_pprof_free(p);

        /* Only 71: no off-CPU time, no wall profile. */
        f.pid = 71;
        p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(s, &f, p), 0);
        FP_CHECK_EQ_INT(fp_pprof_n_samples(p), 0);
        fp_pprof_free(p);
        fp_store_close(s);
}

int main(void)
{
        snprintf(dir, sizeof(dir), "/tmp/fp-test-store-XXXXXX");
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        test_round_trip();
        test_names();
        test_merge_and_filters();
        test_reopen_and_targets();
        test_uploads();
        test_eviction();
        test_big_buckets();
        test_damaged();
        test_samples_codec();
        test_touch_slack();
        test_versions();
        test_outbox();
        test_batch_edges();
        test_keys_and_expiry();
        test_services_and_rules();
        test_waits();

        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
        return FP_TEST_DONE();
}
