/* SPDX-License-Identifier: MIT */
/*
 * The uploader's state machine (agent/keep/upload.c) against the real
 * collector library, both on one event loop of this test: a round
 * delivers every pending bucket and marks it uploaded; with the collector
 * gone a round fails, says why, schedules a retry and keeps the buckets;
 * once the collector is back (same port, same store) the next round
 * delivers them, and the collector holds each sample once.
 */
#include "fp-test.h"
#include "pprof.h"
#include "server.h"
#include "settings.h"
#include "store.h"
#include "upload.h"
#include "writer.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static struct event_base *base;
static int flushes_done;
static bool last_ok;
static char last_msg[512];

static void on_flush(void *userdata, bool ok, const char *message)
{
        (void)userdata;
        flushes_done++;
        last_ok = ok;
        snprintf(last_msg, sizeof(last_msg), "%s", message);
}

static void on_writer(void *userdata, const struct fp_writer_result *r)
{
        (void)userdata;
        if (r->kind == FP_WRITER_BATCH)
                fp_store_batch_free(r->batch);
}

/* Runs the loop until n flushes have answered (30 s at most). */
static void run_until(int n)
{
        for (int i = 0; i < 3000 && flushes_done < n; i++) {
                struct timeval tv = {0, 10000};
                event_base_loopexit(base, &tv);
                event_base_dispatch(base);
        }
}

static struct fp_store_batch *bucket(int64_t start, unsigned samples)
{
        struct fp_store_batch *b = fp_store_batch_new(start, 1000000000);
        struct fp_store_target t = {.host = "testhost",
                                    .pid = 4242,
                                    .starttime = 99,
                                    .comm = "w",
                                    .exe = "/bin/w",
                                    .config = "event=cpu-clock freq=0 period=1000000 kernel=0",
                                    .active = true};
        struct fp_store_event e = {.name = "cpu-clock",
                                   .count_type = "samples",
                                   .count_unit = "count",
                                   .value_type = "cpu",
                                   .value_unit = "nanoseconds",
                                   .period_type = "cpu",
                                   .period_unit = "nanoseconds",
                                   .period = 1000000};
        struct fp_store_frame f = {.function = "work", .address = 0x1234};
        uint32_t ti, ei, si;
        FP_CHECK(b && fp_store_batch_add_target(b, &t, &ti) == 0 &&
                 fp_store_batch_add_event(b, &e, &ei) == 0 &&
                 fp_store_batch_add_stack(b, &f, 1, &si) == 0 &&
                 fp_store_batch_add_sample(b, ti, ei, 4243, "w", si, samples,
                                           samples * 1000000ULL) == 0);
        return b;
}

/* A bucket in which the target lost every sample: only drops, and its declared series. */
static struct fp_store_batch *drops_only(int64_t start, uint64_t lost)
{
        struct fp_store_batch *d = fp_store_batch_new(start, 1000000000);
        struct fp_store_target t = {.host = "testhost",
                                    .pid = 4242,
                                    .starttime = 99,
                                    .comm = "w",
                                    .exe = "/bin/w",
                                    .config = "event=cpu-clock freq=0 period=1000000 kernel=0",
                                    .active = true};
        struct fp_store_event e = {.name = "cpu-clock",
                                   .count_type = "samples",
                                   .count_unit = "count",
                                   .value_type = "cpu",
                                   .value_unit = "nanoseconds",
                                   .period_type = "cpu",
                                   .period_unit = "nanoseconds",
                                   .period = 1000000};
        uint32_t ti, ei;
        FP_CHECK(d && fp_store_batch_add_target(d, &t, &ti) == 0 &&
                 fp_store_batch_add_event(d, &e, &ei) == 0 &&
                 fp_store_batch_set_series(d, ti, ei) == 0 &&
                 fp_store_batch_add_drop(d, ti, "kernel_ring_overflow", lost) == 0);
        return d;
}

/* What the collector's store counts as dropped by reason for the test's series. */
static int sum_reason(void *userdata, const struct fp_store_drop *d)
{
        uint64_t *n = userdata;
        if (strcmp(d->reason, "kernel_ring_overflow") == 0)
                *n += d->count;
        return 0;
}

static uint64_t collector_lost(const char *path)
{
        struct fp_store *st = NULL;
        char err[256];
        uint64_t n = 0;
        if (fp_store_open_readonly(path, &st, err, sizeof(err)) < 0)
                return 0;
        struct fp_store_filter f = {.pid = 4242};
        (void)fp_store_drop_totals(st, &f, sum_reason, &n);
        fp_store_close(st);
        return n;
}

static int free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM, 0), port;
        bind(fd, (struct sockaddr *)&a, sizeof(a));
        getsockname(fd, (struct sockaddr *)&a, &len);
        port = ntohs(a.sin_port);
        close(fd);
        return port;
}

static struct fp_coll_server *start_collector(const char *listen, const char *store)
{
        struct fp_conf *conf = NULL;
        struct fp_coll_config c;
        struct fp_coll_server *s = NULL;
        char err[256];

        FP_CHECK_EQ_INT(fp_conf_new(fp_coll_settings, fp_coll_n_settings, &conf), 0);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "listen", listen, FP_CONF_ARGS, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "store", store, FP_CONF_ARGS, err, sizeof(err)), 0);
        fp_coll_config_from(conf, &c);
        int r = fp_coll_server_new(base, &c, &s, err, sizeof(err));
        if (r < 0)
                fprintf(stderr, "collector: %s\n", err);
        FP_CHECK_EQ_INT(r, 0);
        fp_conf_free(conf);
        return s;
}

/* Samples the collector's store holds for the test's series. */
static uint64_t collector_samples(const char *path)
{
        struct fp_store *st = NULL;
        struct fp_store_stats ss;
        char err[256];
        uint64_t n = 0;
        if (fp_store_open_readonly(path, &st, err, sizeof(err)) < 0)
                return 0;
        struct fp_store_filter f = {.pid = 4242};
        struct fp_pprof *p = fp_pprof_new();
        (void)ss;
        if (fp_store_query_pprof(st, &f, p) > 0)
                n = (uint64_t)fp_pprof_total(p, 0);
        fp_pprof_free(p);
        fp_store_close(st);
        return n;
}

int main(void)
{
        char dir[] = "/tmp/fp-test-upload.XXXXXX", agent_db[128], coll_db[128], listen[64], url[96],
             err[256];
        struct fp_store *store = NULL;
        struct fp_writer *w = NULL;
        struct fp_uploader *u = NULL;
        struct fp_upload_status us;

        FP_CHECK(mkdtemp(dir) != NULL);
        snprintf(agent_db, sizeof(agent_db), "%s/agent.db", dir);
        snprintf(coll_db, sizeof(coll_db), "%s/collector.db", dir);
        int port = free_port();
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        base = event_base_new();

        /* Three closed buckets wait in the agent's store. */
        FP_CHECK(fp_store_open(agent_db, 64 << 20, &store, err, sizeof(err)) >= 0);
        for (int i = 0; i < 3; i++) {
                struct fp_store_batch *b = bucket((int64_t)(i + 1) * 1000000000LL, 10);
                FP_CHECK_EQ_INT(fp_store_write_batch(store, b), 0);
                fp_store_batch_free(b);
        }
        FP_CHECK_EQ_INT(
            fp_writer_new(base, store, agent_db, 64 << 20, 1 << 20, on_writer, NULL, &w), 0);
        struct fp_upload_options o = {.url = url, .interval_seconds = 3600};
        FP_CHECK_EQ_INT(fp_uploader_new(base, w, &o, &u, err, sizeof(err)), 0);

        /* 1. The collector is up: one round delivers all three. */
        struct fp_coll_server *c = start_collector(listen, coll_db);
        FP_CHECK_EQ_INT(fp_uploader_flush(u, on_flush, NULL), 0);
        run_until(1);
        printf("first round: %s: %s\n", last_ok ? "ok" : "failed", last_msg);
        FP_CHECK(last_ok);
        fp_uploader_status(u, &us);
        FP_CHECK_EQ_INT(us.buckets_built, 3);
        FP_CHECK(us.last_success_ns > 0);
        FP_CHECK_EQ_INT(collector_samples(coll_db), 30);

        /* 2. The collector is gone: the round fails, keeps the bucket, plans a retry. */
        fp_coll_server_free(c);
        struct fp_store_batch *b = bucket(10 * 1000000000LL, 5);
        FP_CHECK_EQ_INT(fp_writer_submit_batch(w, b, NULL), 0);
        FP_CHECK_EQ_INT(fp_uploader_flush(u, on_flush, NULL), 0);
        run_until(2);
        printf("second round: %s: %s\n", last_ok ? "ok" : "failed", last_msg);
        FP_CHECK(!last_ok);
        fp_uploader_status(u, &us);
        FP_CHECK(us.rounds_failed >= 1);
        FP_CHECK(us.last_error[0] != 0);
        FP_CHECK(!us.config_error); /* nobody answered: transient */
        FP_CHECK_EQ_INT(us.buckets_built, 4);
        FP_CHECK_EQ_INT(collector_samples(coll_db), 30);

        /* 3. Back on the same port and store: the kept bucket goes, nothing twice. */
        c = start_collector(listen, coll_db);
        FP_CHECK_EQ_INT(fp_uploader_flush(u, on_flush, NULL), 0);
        run_until(3);
        printf("third round: %s: %s\n", last_ok ? "ok" : "failed", last_msg);
        FP_CHECK(last_ok);
        fp_uploader_status(u, &us);
        FP_CHECK(strstr(last_msg, "uploaded 1 profile") != NULL);
        FP_CHECK_EQ_INT(us.buckets_built, 4);
        FP_CHECK_EQ_INT(collector_samples(coll_db), 35);

        /* 4. A bucket in which every sample was lost: its drops still reach the collector. */
        FP_CHECK_EQ_INT(fp_writer_submit_batch(w, drops_only(20 * 1000000000LL, 17), NULL), 0);
        FP_CHECK_EQ_INT(fp_uploader_flush(u, on_flush, NULL), 0);
        run_until(4);
        printf("fourth round: %s: %s\n", last_ok ? "ok" : "failed", last_msg);
        FP_CHECK(last_ok);
        FP_CHECK_EQ_INT(collector_lost(coll_db), 17);
        FP_CHECK_EQ_INT(collector_samples(coll_db), 35);

        fp_uploader_close(u);
        fp_writer_free(w);
        fp_uploader_free(u);
        fp_coll_server_free(c);
        event_base_free(base);
        curl_global_cleanup();
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        FP_CHECK_EQ_INT(system(cmd), 0);
        return FP_TEST_DONE();
}
