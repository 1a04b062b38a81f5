/* SPDX-License-Identifier: MIT */
/*
 * Summaries (storage/rollup.c): a collector's store that keeps them and
 * one that does not, written the same batches, give the same profile of
 * every range (whole hours and days read from summaries, ragged ends and
 * marked hours from buckets): uploads spanning hour and day boundaries,
 * out of order and twice, a late one into a summarised hour, retention's
 * evictions, and a summariser killed (SIGKILL) mid-step any number of
 * times.
 */
#include "fp-test.h"
#include "pprof.h"
#include "store.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEC  1000000000LL
#define HOUR (3600 * SEC)
#define DAY  (24 * HOUR)
/* 2026-01-01T00:00:00Z less 20 minutes: the first day and hour are ragged. */
#define T0 (1767225600LL * SEC - 20 * 60 * SEC)

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

/* Bucket i of target pid: a few stacks of a pool, on two threads, counts that vary. */
static struct fp_store_batch *make_batch(int64_t start, int64_t length, pid_t pid, unsigned i)
{
        struct fp_store_batch *b = fp_store_batch_new(start, length);
        struct fp_store_target t = {.host = pid % 2 ? "host-a" : "host-b",
                                    .pid = pid,
                                    .starttime = 1000 + (uint64_t)pid,
                                    .comm = "app",
                                    .exe = "/usr/bin/app",
                                    .active = true};
        uint32_t ti, ei;

        FP_CHECK(b && fp_store_batch_add_target(b, &t, &ti) == 0);
        FP_CHECK(fp_store_batch_add_event(b, &cpu_clock, &ei) == 0);
        for (unsigned k = 0; k < 6; k++) {
                char leaf[32], caller[32], thread[16];
                unsigned s = (i * 7 + k * 3) % 40;
                snprintf(leaf, sizeof(leaf), "leaf_%u", s);
                snprintf(caller, sizeof(caller), "caller_%u", s % 5);
                snprintf(thread, sizeof(thread), "worker-%u", k % 2);
                struct fp_store_frame f[2] = {
                    {.function = leaf, .mapping_file = "/usr/bin/app", .address = 0x1000 + 16 * s},
                    {.function = caller,
                     .mapping_file = "/usr/bin/app",
                     .address = 0x9000 + 16 * (s % 5)},
                };
                uint32_t si;
                uint64_t count = 1 + (i + k) % 9;
                FP_CHECK(fp_store_batch_add_stack(b, f, 2, &si) == 0);
                FP_CHECK(fp_store_batch_add_sample(b, ti, ei, pid + (pid_t)(k % 2), thread, si,
                                                   count, count * 10101010) == 0);
        }
        return b;
}

static void write_both(struct fp_store *a, struct fp_store *b, int64_t start, pid_t pid, unsigned i)
{
        struct fp_store_batch *x = make_batch(start, 60 * SEC, pid, i);
        FP_CHECK(fp_store_write_batch(a, x) == 0);
        FP_CHECK(fp_store_write_batch(b, x) == 0);
        fp_store_batch_free(x);
}

/* A series listing as text: every series' sums and time range. */
static int series_line(void *ud, const struct fp_store_series *se)
{
        fprintf(ud, "%s %d %s %lld %lld %llu %llu %llu\n", se->host, (int)se->pid, se->event,
                (long long)se->first_ns, (long long)se->last_ns, (unsigned long long)se->buckets,
                (unsigned long long)se->count, (unsigned long long)se->value);
        return 0;
}

static char *series_text(struct fp_store *s, const struct fp_store_filter *f)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        FP_CHECK(fp_store_list_series(s, f, series_line, out) >= 0);
        fclose(out);
        return buf;
}

static int cmp_line(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The profile of f as sorted folded lines with samples and values: comparable text. */
static char *profile_text(struct fp_store *s, const struct fp_store_filter *f)
{
        struct fp_pprof *p = fp_pprof_new();
        char *buf = NULL, *lines[4096];
        size_t len = 0, n = 0;
        FILE *out = open_memstream(&buf, &len);

        FP_CHECK(p && out);
        int r = fp_store_query_pprof(s, f, p);
        FP_CHECK(r >= 0);
        if (r > 0) {
                fprintf(out, "total %lld %lld\n", (long long)fp_pprof_total(p, 0),
                        (long long)fp_pprof_total(p, 1));
                fp_pprof_write_folded(p, 0, out);
                fp_pprof_write_folded(p, 1, out);
        }
        fclose(out);
        fp_pprof_free(p);
        /* Sorted, so that the order samples were merged in does not matter. */
        for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l && n < 4096;
             l = strtok_r(NULL, "\n", &save))
                lines[n++] = l;
        qsort(lines, n, sizeof(*lines), cmp_line);
        char *text = NULL;
        size_t tlen = 0;
        FILE *t = open_memstream(&text, &tlen);
        for (size_t i = 0; i < n; i++)
                fprintf(t, "%s\n", lines[i]);
        fclose(t);
        free(buf);
        return text;
}

/* a and b give the same profile of every range tried; returns how many held samples. */
static unsigned compare(struct fp_store *a, struct fp_store *b, const char *when)
{
        static const int64_t ranges[][2] = {
            {T0, T0 + 3 * DAY},
            {T0 + 20 * 60 * SEC, T0 + 20 * 60 * SEC + DAY},    /* one whole day */
            {T0 + 20 * 60 * SEC, T0 + 20 * 60 * SEC + HOUR},   /* one whole hour */
            {T0 + 5 * 60 * SEC, T0 + 2 * DAY + 17 * 60 * SEC}, /* ragged, days inside */
            {T0 + 50 * 60 * SEC, T0 + 3 * HOUR + 10 * 60 * SEC},
            {T0 + 30 * HOUR + 59 * 60 * SEC, T0 + 31 * HOUR + 61 * SEC},
            {T0 - DAY, T0 + 4 * DAY},
            {T0 + 20 * 60 * SEC + DAY, T0 + 20 * 60 * SEC + 2 * DAY},
        };
        unsigned n = 0;

        for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
                for (int variant = 0; variant < 3; variant++) {
                        struct fp_store_filter f = {.since_ns = ranges[i][0],
                                                    .until_ns = ranges[i][1]};
                        if (variant == 1)
                                f.pid = 11;
                        if (variant == 2)
                                f.thread_name = "worker-1";
                        char *x = profile_text(a, &f), *y = profile_text(b, &f);
                        if (strcmp(x, y) != 0) {
                                fprintf(
                                    stderr,
                                    "%s: range %zu variant %d differs:\n--- summaries\n%.600s\n--- "
                                    "buckets\n%.600s\n",
                                    when, i, variant, x, y);
                                FP_CHECK(!"the summaries' profile is not the buckets'");
                        }
                        n += x[0] != 0; /* compared with something in it */
                        free(x);
                        free(y);
                        x = series_text(a, &f);
                        y = series_text(b, &f);
                        if (strcmp(x, y) != 0) {
                                fprintf(stderr,
                                        "%s: range %zu variant %d: series "
                                        "differ:\n%.400s\n--\n%.400s\n",
                                        when, i, variant, x, y);
                                FP_CHECK(!"the summaries' series are not the buckets'");
                        }
                        free(x);
                        free(y);
                }
        return n;
}

static int summarise_all(struct fp_store *s)
{
        int r, steps = 0;
        while ((r = fp_store_rollup_step(s, T0 + 30 * DAY, 0)) == 1)
                steps++;
        FP_CHECK_EQ_INT(r, 0);
        return steps;
}

int main(void)
{
        char dir[] = "/tmp/fp-rollup.XXXXXX", pa[96], pb[96], err[256];
        struct fp_store *a = NULL, *b = NULL;
        uint64_t marked = 0, kept = 0;

        FP_CHECK(mkdtemp(dir) != NULL);
        snprintf(pa, sizeof(pa), "%s/summaries.db", dir);
        snprintf(pb, sizeof(pb), "%s/buckets.db", dir);
        FP_CHECK(fp_store_open(pa, 0, &a, err, sizeof(err)) == 0);
        FP_CHECK(fp_store_open(pb, 0, &b, err, sizeof(err)) == 0);
        fp_store_set_rollups(a, true);

        /* Two and a half days of four targets, a bucket a minute each; some late, some twice. */
        unsigned n = 0;
        for (unsigned i = 0; i < 3600; i += 1 + i % 3) {
                int64_t start = T0 + (int64_t)i * 60 * SEC;
                pid_t pid = 10 + (pid_t)(i % 4);
                if (i % 97 == 5)
                        continue; /* written last, out of order */
                write_both(a, b, start, pid, i);
                if (i % 211 == 0)
                        write_both(a, b, start, pid, i); /* the same upload twice */
                n++;
        }
        for (unsigned i = 0; i < 3600; i += 1 + i % 3)
                if (i % 97 == 5)
                        write_both(a, b, T0 + (int64_t)i * 60 * SEC, 10 + (pid_t)(i % 4), i);
        /* Before any summary: the marks stand for the buckets. */
        unsigned compared = compare(a, b, "unsummarised");
        FP_CHECK(compared >= 20);
        int steps = summarise_all(a);
        FP_CHECK(fp_store_rollup_counts(a, &marked, &kept) == 0);
        FP_CHECK_EQ_INT(marked, 0);
        FP_CHECK(kept > 100 && steps > 60);
        compared += compare(a, b, "summarised");

        /* A late upload into a summarised hour: its hour and day marked, read from buckets. */
        write_both(a, b, T0 + 25 * HOUR + 90 * SEC, 11, 99999);
        write_both(a, b, T0 + 25 * HOUR + 90 * SEC, 12, 99998);
        FP_CHECK(fp_store_rollup_counts(a, &marked, &kept) == 0);
        FP_CHECK(marked >= 4);
        compared += compare(a, b, "late upload");
        summarise_all(a);
        compared += compare(a, b, "late upload summarised");

        /*
         * A bucket of five hours (a pushed profile can be long): a range inside it, of no
         * whole hour, finds it by its start (FILTER_REACH: the longest bucket's length back).
         */
        for (int k = 0; k < 2; k++) {
                struct fp_store *s = k ? b : a;
                struct fp_store_batch *x = make_batch(T0 + 40 * HOUR, 5 * HOUR, 77, 7);
                FP_CHECK(fp_store_write_batch(s, x) == 0);
                fp_store_batch_free(x);
                struct fp_store_filter f = {.pid = 77,
                                            .since_ns = T0 + 43 * HOUR + 10 * 60 * SEC,
                                            .until_ns = T0 + 43 * HOUR + 40 * 60 * SEC};
                char *text = profile_text(s, &f);
                FP_CHECK(strstr(text, "leaf_") != NULL);
                free(text);
        }
        summarise_all(a);
        compared += compare(a, b, "a long bucket");

        /* Retention: the oldest day and a half go, and their summaries with them. */
        FP_CHECK(fp_store_expire(a, T0 + 36 * HOUR) > 0);
        FP_CHECK(fp_store_expire(b, T0 + 36 * HOUR) > 0);
        compared += compare(a, b, "expired");
        summarise_all(a);
        compared += compare(a, b, "expired and summarised");

        /* A summariser killed mid-step, again and again: what it did not commit is done again. */
        for (unsigned i = 0; i < 3600; i += 5)
                write_both(a, b, T0 + 2 * DAY + (int64_t)(i % 700) * 60 * SEC + 7 * SEC,
                           20 + (pid_t)(i % 3), i);
        fp_store_close(a);
        srand((unsigned)time(NULL));
        unsigned kills = 0;
        for (int round = 0; round < 12; round++) {
                pid_t child = fork();
                if (child == 0) {
                        struct fp_store *c = NULL;
                        if (fp_store_open(pa, 0, &c, err, sizeof(err)) != 0)
                                _exit(3);
                        fp_store_set_rollups(c, true);
                        while (fp_store_rollup_step(c, T0 + 30 * DAY, 0) == 1)
                                ;
                        _exit(0);
                }
                struct timespec ts = {0, (long)(rand() % 15) * 1000000L};
                nanosleep(&ts, NULL);
                if (kill(child, SIGKILL) == 0)
                        kills++;
                int status;
                waitpid(child, &status, 0);
        }
        FP_CHECK(fp_store_open(pa, 0, &a, err, sizeof(err)) == 0);
        fp_store_set_rollups(a, true);
        compared += compare(a, b, "after kills");
        summarise_all(a);
        compared += compare(a, b, "after kills, summarised");
        FP_CHECK(fp_store_rollup_counts(a, &marked, &kept) == 0);
        FP_CHECK_EQ_INT(marked, 0);
        printf(
            "%u uploads, %d summarising steps, %u profiles compared, %u summarisers killed, %llu "
            "summaries\n",
            n, steps, compared, kills, (unsigned long long)kept);

        fp_store_close(a);
        fp_store_close(b);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        FP_CHECK(system(cmd) == 0);
        return FP_TEST_DONE();
}
