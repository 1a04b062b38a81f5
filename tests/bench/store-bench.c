/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of the store (storage/store.h). Prints figures, never passes
 * or fails:
 *
 *   1. bucket writes: a bucket of brand-new stacks (new stacks/s), and a
 *      bucket of 200,000 samples over stacks the store already has
 *      (samples/s);
 *   2. one simulated hour of a realistic workload, at 99 Hz and at 1 kHz:
 *      100 threads in 4 processes, all on CPU, 10 s buckets, stacks drawn
 *      from a per-process pool of call paths with Zipf popularity (hot
 *      paths reused, a long tail seen rarely); bytes stored per hour and
 *      write time per bucket;
 *   3. dump: one hour of buckets queried into one pprof profile, then
 *      gzip-encoded;
 *   4. steady state under a byte budget: write time with eviction, and the
 *      largest file plus log seen.
 *
 * Build: linked with fp_storage and fp_proto in CMake; standalone, compile
 * tests/bench/store-bench.c with every .c file of storage/ and proto/ and
 * BUILD/proto/profile.pb-c.c, with -D_GNU_SOURCE, include paths storage,
 * proto and BUILD/proto, and -lsqlite3 -lprotobuf-c -lz.
 * Usage: store-bench [DIR] [--quick]   (DIR: where the store files go, default /tmp)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

#include "pprof.h"
#include "store.h"

#define SEC       1000000000LL
#define T0        (1700000000LL * SEC)
#define N_PROCS   4
#define N_THREADS 100
#define POOL      8000 /* distinct call paths per process */
#define N_FUNCS   3000 /* functions per process */
#define N_ROLES   5    /* kinds of threads, each with its own hot paths */
#define ZIPF_S    1.3
#define MAX_DEPTH 40

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
        uint64_t x = rng_state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        rng_state = x;
        return x * 0x2545f4914f6cdd1dULL;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
        uint64_t h =
            (a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2))) * 0xff51afd7ed558ccdULL;
        return h ^ (h >> 31);
}

static void die(const char *what, int r)
{
        fprintf(stderr, "store-bench: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

/* ---- the simulated programs ---- */

static const struct fp_store_event cpu_clock_99 = {
    "cpu-clock", "samples", "count", "cpu", "nanoseconds", "cpu", "nanoseconds", 10101010,
};
static const struct fp_store_event cpu_clock_1k = {
    "cpu-clock", "samples", "count", "cpu", "nanoseconds", "cpu", "nanoseconds", 1000000,
};

static char func_names[N_PROCS][N_FUNCS][40];
static double zipf_cdf[POOL];

struct mapping {
        const char *file, *build_id;
        uint64_t start, limit;
};

static const struct mapping maps[4] = {
    {NULL, NULL, 0x400000, 0x2400000}, /* the program: file set per process */
    {"/usr/lib/x86_64-linux-gnu/libc.so.6", "3e3c1b6a6d2b1d8a0f5e9c7a", 0x7f1000000000,
     0x7f1000200000},
    {"/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "9a8b7c6d5e4f3a2b1c0d9e8f", 0x7f2000000000,
     0x7f2000300000},
    {"/usr/lib/x86_64-linux-gnu/libssl.so.3", "0f1e2d3c4b5a69788796a5b4", 0x7f3000000000,
     0x7f3000100000},
};
static char exe_names[N_PROCS][32], exe_build_ids[N_PROCS][32];

/*
 * Call path i of process p, leaf first: depth 8..39; the frame at depth j
 * (from the root) belongs to tree node i >> ((depth - j) / 3 * 2), so
 * paths share their roots and part of their trunks, and differ near their
 * leaves, as real call paths do.
 */
static size_t make_stack(unsigned p, unsigned i, struct fp_store_frame *f)
{
        unsigned depth = 8 + (unsigned)(mix(p, i) % 32);

        for (unsigned j = 0; j < depth; j++) {
                unsigned shift = (depth - 1 - j) / 3 * 2;
                uint64_t node = mix(mix(p, j), i >> (shift < 31 ? shift : 31));
                unsigned fn = (unsigned)(node % N_FUNCS);
                unsigned m = fn < N_FUNCS * 6 / 10     ? 0
                             : fn < N_FUNCS * 8 / 10   ? 1
                             : fn < N_FUNCS * 95 / 100 ? 2
                                                       : 3;
                const struct mapping *mp = &maps[m];
                uint64_t base = mp->start + (uint64_t)fn * 0x1000 % (mp->limit - mp->start);

                f[depth - 1 - j] = (struct fp_store_frame){
                    .function = func_names[p][fn],
                    .mapping_file = m ? mp->file : exe_names[p],
                    .build_id = m ? mp->build_id : exe_build_ids[p],
                    .mapping_start = mp->start,
                    .mapping_limit = mp->limit,
                    .address = base + (node >> 20) % 0x800,
                };
        }
        return depth;
}

/* k^-ZIPF_S for ZIPF_S = 1.3: 1 / (k * k^0.3), k^0.3 the root of x^10 = k^3 (no libm). */
static double zipf_weight(unsigned k)
{
        double c = (double)k * k * k, x = 1.0 + (k > 1 ? (k - 1) / 10.0 : 0);

        for (int i = 0; i < 200; i++) {
                double x9 = x * x * x * x * x * x * x * x * x, next = x - (x9 * x - c) / (10 * x9);
                if (next == x)
                        break;
                x = next;
        }
        return 1.0 / (k * x);
}

static void setup(void)
{
        double sum = 0;

        for (unsigned p = 0; p < N_PROCS; p++) {
                snprintf(exe_names[p], sizeof(exe_names[p]), "/usr/bin/service%u", p);
                snprintf(exe_build_ids[p], sizeof(exe_build_ids[p]), "b1d0%08x",
                         0x1234567 * (p + 1));
                for (unsigned f = 0; f < N_FUNCS; f++)
                        snprintf(func_names[p][f], sizeof(func_names[p][f]),
                                 "ns%u::Component%u::method_%u", p, f % 97, f);
        }
        double run = 0;

        for (unsigned k = 0; k < POOL; k++)
                sum += zipf_weight(k + 1);
        for (unsigned k = 0; k < POOL; k++) {
                run += zipf_weight(k + 1) / sum;
                zipf_cdf[k] = run;
        }
        zipf_cdf[POOL - 1] = 1.0;
        printf("workload: %u processes, %u threads, %u call paths per process (depth 8-39), Zipf "
               "s=%.1f: the 100 hottest paths take %.0f%% of the samples\n",
               N_PROCS, N_THREADS, POOL, ZIPF_S, 100 * zipf_cdf[99]);
}

static unsigned zipf_draw(void)
{
        double u = (double)(rng() >> 11) / 9007199254740992.0;
        unsigned lo = 0, hi = POOL - 1;

        while (lo < hi) {
                unsigned mid = (lo + hi) / 2;
                if (zipf_cdf[mid] < u)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/*
 * One 10 s bucket at hz: each thread draws its samples; identical
 * (thread, stack) draws are aggregated, as the agent does, before they
 * reach the batch.
 */
static struct fp_store_batch *make_bucket(int64_t start, unsigned hz, size_t *ret_raw)
{
        static uint32_t counts[POOL];
        static unsigned touched[POOL];
        struct fp_store_batch *b = fp_store_batch_new(start, 10 * SEC);
        struct fp_store_frame frames[MAX_DEPTH];
        uint32_t targets[N_PROCS], event;
        size_t raw = 0;
        int r;

        if (!b)
                die("batch", ENOMEM);
        if ((r = fp_store_batch_add_event(b, hz >= 1000 ? &cpu_clock_1k : &cpu_clock_99, &event)) <
            0)
                die("event", r);
        for (unsigned p = 0; p < N_PROCS; p++) {
                char comm[16];
                snprintf(comm, sizeof(comm), "service%u", p);
                struct fp_store_target t = {.host = "bench-host",
                                            .pid = 1000 + (pid_t)p * 100,
                                            .starttime = 4242 + p,
                                            .comm = comm,
                                            .exe = exe_names[p],
                                            .config = "event=cpu-clock freq=99 kernel=0",
                                            .active = true};
                if ((r = fp_store_batch_add_target(b, &t, &targets[p])) < 0)
                        die("target", r);
        }
        for (unsigned t = 0; t < N_THREADS; t++) {
                unsigned p = t % N_PROCS, role = t % N_ROLES, n_touched = 0;
                unsigned n =
                    hz * 10 - (unsigned)(rng() % (hz / 10 + 1)); /* a little off-CPU time */
                char name[16];

                snprintf(name, sizeof(name), "worker-%u", t / N_PROCS % 8);
                for (unsigned k = 0; k < n; k++) {
                        unsigned s = (zipf_draw() * 7919u + role * 104729u) % POOL;
                        if (!counts[s]++)
                                touched[n_touched++] = s;
                }
                raw += n;
                for (unsigned k = 0; k < n_touched; k++) {
                        unsigned s = touched[k];
                        uint32_t si;
                        size_t depth = make_stack(p, s, frames);
                        if ((r = fp_store_batch_add_stack(b, frames, depth, &si)) < 0 ||
                            (r = fp_store_batch_add_sample(
                                 b, targets[p], event, 1000 + (pid_t)p * 100 + 1 + (pid_t)t, name,
                                 si, counts[s], (uint64_t)counts[s] * (SEC / hz))) < 0)
                                die("sample", r);
                        counts[s] = 0;
                }
        }
        if (ret_raw)
                *ret_raw = raw;
        return b;
}

static struct fp_store *open_fresh(const char *dir, const char *name, char *path, size_t len)
{
        char err[512], p[600];
        struct fp_store *s = NULL;
        int r;

        snprintf(path, len, "%s/%s", dir, name);
        unlink(path);
        snprintf(p, sizeof(p), "%s-wal", path);
        unlink(p);
        snprintf(p, sizeof(p), "%s-shm", path);
        unlink(p);
        r = fp_store_open(path, 0, &s, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "store-bench: %s\n", err);
                exit(1);
        }
        return s;
}

static void write_or_die(struct fp_store *s, struct fp_store_batch *b)
{
        int r = fp_store_write_batch(s, b);
        if (r < 0) {
                fprintf(stderr, "store-bench: %s\n", fp_store_errmsg(s));
                exit(1);
        }
}

/* ---- 1. bucket writes ---- */

static void bench_writes(const char *dir)
{
        struct fp_store_frame frames[MAX_DEPTH];
        char path[512];
        struct fp_store *s = open_fresh(dir, "bench-writes.db", path, sizeof(path));
        struct fp_store_batch *b;
        uint32_t t, e, si;
        double t0, dt;
        const unsigned n_new = 50000;
        size_t n_frames = 0;
        struct fp_store_target tg = {.host = "bench-host", .pid = 7, .starttime = 1, .comm = "x"};

        /* Brand-new stacks: unique leaves (pool indices past the pool), shared trunks. */
        b = fp_store_batch_new(T0, 10 * SEC);
        fp_store_batch_add_target(b, &tg, &t);
        fp_store_batch_add_event(b, &cpu_clock_99, &e);
        for (unsigned i = 0; i < n_new; i++) {
                size_t depth = make_stack(0, POOL + i, frames);
                n_frames += depth;
                fp_store_batch_add_stack(b, frames, depth, &si);
                fp_store_batch_add_sample(b, t, e, 8 + (pid_t)(i % 16), "w", si, 1, SEC / 99);
        }
        t0 = now_s();
        write_or_die(s, b);
        dt = now_s() - t0;
        fp_store_batch_free(b);
        printf("write, new stacks:   %u stacks (%.1f frames each) in %.3f s: %.0f new stacks/s\n",
               n_new, (double)n_frames / n_new, dt, n_new / dt);

        /* Known stacks, many samples: the same 50,000 stacks over 4 threads each. */
        b = fp_store_batch_new(T0 + 10 * SEC, 10 * SEC);
        fp_store_batch_add_target(b, &tg, &t);
        fp_store_batch_add_event(b, &cpu_clock_99, &e);
        for (unsigned i = 0; i < n_new; i++) {
                size_t depth = make_stack(0, POOL + i, frames);
                fp_store_batch_add_stack(b, frames, depth, &si);
                for (unsigned k = 0; k < 4; k++)
                        fp_store_batch_add_sample(b, t, e, 100 + (pid_t)k, "w", si, 1 + k,
                                                  (1 + k) * (SEC / 99));
        }
        t0 = now_s();
        write_or_die(s, b);
        dt = now_s() - t0;
        printf("write, known stacks: %zu samples in %.3f s: %.0f samples/s\n",
               fp_store_batch_n_samples(b), dt, fp_store_batch_n_samples(b) / dt);
        fp_store_batch_free(b);

        /* Both again after closing: the in-memory caches start cold. */
        fp_store_close(s);
        char err[512];
        if (fp_store_open(path, 0, &s, err, sizeof(err)) < 0) {
                fprintf(stderr, "store-bench: %s\n", err);
                exit(1);
        }
        b = fp_store_batch_new(T0 + 20 * SEC, 10 * SEC);
        fp_store_batch_add_target(b, &tg, &t);
        fp_store_batch_add_event(b, &cpu_clock_99, &e);
        for (unsigned i = 0; i < n_new; i++) {
                size_t depth = make_stack(0, POOL + i, frames);
                fp_store_batch_add_stack(b, frames, depth, &si);
                for (unsigned k = 0; k < 4; k++)
                        fp_store_batch_add_sample(b, t, e, 100 + (pid_t)k, "w", si, 1, SEC / 99);
        }
        t0 = now_s();
        write_or_die(s, b);
        dt = now_s() - t0;
        printf("write, known stacks, cold caches (after reopen): %zu samples in %.3f s: "
               "%.0f samples/s\n",
               fp_store_batch_n_samples(b), dt, fp_store_batch_n_samples(b) / dt);
        fp_store_batch_free(b);
        fp_store_close(s);
        unlink(path);
}

/* The largest tables and indexes of the store at path, by pages (SQLite's dbstat). */
static void print_tables(const char *path)
{
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;

        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(db,
                               "SELECT name, sum(pgsize) FROM dbstat GROUP BY name"
                               " ORDER BY 2 DESC LIMIT 6",
                               -1, &st, NULL) != SQLITE_OK) {
                printf("  by table:        (dbstat unavailable: %s)\n", sqlite3_errmsg(db));
                sqlite3_close(db);
                return;
        }
        printf("  by table:       ");
        while (sqlite3_step(st) == SQLITE_ROW)
                printf(" %s %.1f MiB;", (const char *)sqlite3_column_text(st, 0),
                       sqlite3_column_int64(st, 1) / 1048576.0);
        printf("\n");
        sqlite3_finalize(st);
        sqlite3_close(db);
}

/* ---- 2. and 3. an hour ---- */

static void bench_hour(const char *dir, unsigned hz, unsigned minutes)
{
        char path[512], name[64];
        struct fp_store *s;
        struct fp_store_stats st;
        unsigned n_buckets = minutes * 6;
        double build = 0, write = 0, worst = 0, first = 0, t0;
        size_t rows = 0, raw = 0;
        unsigned warm = n_buckets / 6; /* the stack dictionary is mostly built by then */
        uint64_t live_warm = 0;

        snprintf(name, sizeof(name), "bench-hour-%uhz.db", hz);
        s = open_fresh(dir, name, path, sizeof(path));
        for (unsigned i = 0; i < n_buckets; i++) {
                size_t n_raw;
                struct fp_store_batch *b;
                double dt;

                t0 = now_s();
                b = make_bucket(T0 + (int64_t)i * 10 * SEC, hz, &n_raw);
                build += now_s() - t0;
                rows += fp_store_batch_n_samples(b);
                raw += n_raw;
                t0 = now_s();
                write_or_die(s, b);
                dt = now_s() - t0;
                if (i == 0) {
                        first = dt; /* every stack is new */
                } else {
                        write += dt;
                        if (dt > worst)
                                worst = dt;
                }
                fp_store_batch_free(b);
                if (i + 1 == warm) {
                        if (fp_store_stats(s, &st) < 0)
                                die("stats", EIO);
                        live_warm = st.live_bytes;
                }
        }
        if (fp_store_stats(s, &st) < 0)
                die("stats", EIO);
        double scale = 60.0 / minutes;
        printf("\n%u Hz x %u threads, %u s of buckets (%u buckets)%s:\n", hz, N_THREADS,
               minutes * 60, n_buckets, minutes == 60 ? "" : ", per-hour figures extrapolated");
        printf("  samples taken:   %zu per bucket; distinct (thread, stack) rows: %zu per bucket\n",
               raw / n_buckets, rows / n_buckets);
        printf("  stacks stored:   %" PRIu64 " (frames %" PRIu64 ", functions %" PRIu64 ")\n",
               st.stacks, st.frames, st.functions);
        printf("  bucket write:    first (all stacks new) %.0f ms; then %.1f ms average, %.1f ms "
               "worst; %.0f rows/s, %.0f samples/s\n",
               1e3 * first, 1e3 * write / (n_buckets - 1), 1e3 * worst,
               (double)rows * (n_buckets - 1) / n_buckets / write,
               (double)raw * (n_buckets - 1) / n_buckets / write);
        printf("  bucket build:    %.1f ms average (agent side: drawing, aggregating, batch)\n",
               1e3 * build / n_buckets);
        printf("  store size:      %.1f MiB live, %.1f MiB file + %.1f MiB log -> %.1f MiB per "
               "hour, %.0f bytes per row\n",
               st.live_bytes / 1048576.0, st.file_bytes / 1048576.0, st.wal_bytes / 1048576.0,
               st.live_bytes * scale / 1048576.0, (double)st.live_bytes / rows);
        printf("  steady growth:   %.1f MiB per hour once the stacks are known (buckets %u-%u), "
               "%.1f bytes per row\n",
               (double)(st.live_bytes - live_warm) / (n_buckets - warm) * 360 / 1048576.0, warm + 1,
               n_buckets,
               (double)(st.live_bytes - live_warm) /
                   ((double)rows * (n_buckets - warm) / n_buckets));
        print_tables(path);

        /* 3. Dump: everything in one profile, then gzip-encoded. */
        struct fp_pprof *p = fp_pprof_new();
        uint8_t *buf = NULL;
        size_t len = 0;
        int n;

        t0 = now_s();
        n = fp_store_query_pprof(s, NULL, p);
        double q = now_s() - t0;
        if (n < 0) {
                fprintf(stderr, "store-bench: %s\n", fp_store_errmsg(s));
                exit(1);
        }
        t0 = now_s();
        if (fp_pprof_encode(p, 1, &buf, &len) < 0)
                die("encode", ENOMEM);
        double enc = now_s() - t0;
        printf("  dump of %u min:  query into pprof %.2f s (%d samples, total %" PRId64
               "), gzip encode %.2f s, %.1f MiB\n",
               minutes, q, n, fp_pprof_total(p, 0), enc, len / 1048576.0);
        free(buf);
        fp_pprof_free(p);

        /* The last five minutes, as agentctl dump --since 5m would. */
        struct fp_store_filter f = {
            .since_ns = T0 + (int64_t)(n_buckets > 30 ? n_buckets - 30 : 0) * 10 * SEC};
        p = fp_pprof_new();
        t0 = now_s();
        n = fp_store_query_pprof(s, &f, p);
        printf("  dump of the last 5 min: %.3f s (%d samples)\n", now_s() - t0, n);
        fp_pprof_free(p);
        fp_store_close(s);
        unlink(path);
}

/* ---- 4. steady state under a budget: every write also evicts ---- */

static void bench_budget(const char *dir, unsigned minutes, uint64_t budget)
{
        char path[512], err[512];
        struct fp_store *s = NULL;
        struct fp_store_stats st;
        unsigned n_buckets = minutes * 6, evicting = 0;
        double write = 0, worst = 0, t0;
        uint64_t peak = 0;

        snprintf(path, sizeof(path), "%s/bench-budget.db", dir);
        fp_store_close(open_fresh(dir, "bench-budget.db", path, sizeof(path)));
        if (fp_store_open(path, budget, &s, err, sizeof(err)) < 0) {
                fprintf(stderr, "store-bench: %s\n", err);
                exit(1);
        }
        for (unsigned i = 0; i < n_buckets; i++) {
                struct fp_store_batch *b = make_bucket(T0 + (int64_t)i * 10 * SEC, 99, NULL);
                double dt;

                t0 = now_s();
                write_or_die(s, b);
                dt = now_s() - t0;
                fp_store_batch_free(b);
                if (fp_store_stats(s, &st) < 0)
                        die("stats", EIO);
                if (st.file_bytes + st.wal_bytes > peak)
                        peak = st.file_bytes + st.wal_bytes;
                if (st.evicted_buckets) {
                        evicting++;
                        write += dt;
                        if (dt > worst)
                                worst = dt;
                }
        }
        printf("\n99 Hz x %u threads under a %.0f MiB budget, %u buckets:\n", N_THREADS,
               budget / 1048576.0, n_buckets);
        printf("  evicting writes: %u; %.1f ms average, %.1f ms worst (write plus eviction)\n",
               evicting, evicting ? 1e3 * write / evicting : 0, 1e3 * worst);
        printf("  kept %" PRIu64 " buckets (%.0f min); largest file + log after a write %.1f MiB "
               "(%.2f x budget)\n",
               st.buckets, st.buckets / 6.0, peak / 1048576.0, (double)peak / budget);
        fp_store_close(s);
        unlink(path);
}

int main(int argc, char **argv)
{
        const char *dir = "/tmp";
        bool quick = false;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--quick") == 0)
                        quick = true;
                else
                        dir = argv[i];
        }
        setup();
        printf("store-bench: store files in %s, SQLite %s, %ld CPUs\n\n", dir, sqlite3_libversion(),
               sysconf(_SC_NPROCESSORS_ONLN));
        bench_writes(dir);
        bench_hour(dir, 99, quick ? 10 : 60);
        bench_hour(dir, 1000, quick ? 2 : 10);
        bench_budget(dir, quick ? 10 : 30, (uint64_t)(quick ? 16 : 64) << 20);
        return 0;
}
