/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of agent/perf.c against the real kernel: event names, the
 * sampling event on a busy thread of this test (samples carry its tid, the
 * requested period and a callchain; a small ring is drained many times,
 * so records that wrap its end are exercised), and the side-band event
 * (FORK when the thread creates a thread, COMM on a rename, EXIT and a
 * hangup when it ends). Hardware events must either open or fail with
 * the "not supported" errors the agent turns into a clear message.
 */
#include "fp-test.h"
#include "perf.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int go, stop;
static atomic_int worker_tid;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *child(void *arg)
{
        (void)arg;
        return NULL;
}

__attribute__((noinline)) static uint64_t burn(double seconds)
{
        volatile uint64_t x = 0;
        double end = now_s() + seconds;
        while (now_s() < end)
                for (int i = 0; i < 10000; i++)
                        x += (uint64_t)i * 2654435761u;
        return x;
}

static void *worker(void *arg)
{
        (void)arg;
        worker_tid = (int)syscall(SYS_gettid);
        while (!go)
                usleep(1000);
        burn(0.6);
        pthread_setname_np(pthread_self(), "fp-renamed");
        pthread_t t;
        pthread_create(&t, NULL, child, NULL);
        pthread_join(t, NULL);
        while (!stop)
                usleep(1000);
        return NULL;
}

struct seen {
        unsigned samples, bad_tid, bad_period, with_chain;
        unsigned fork, comm, exit_, lost;
        pid_t tid;
        uint64_t period;
};

static void on_sample(void *u, const struct fp_perf_sample *s)
{
        struct seen *x = u;
        x->samples++;
        x->bad_tid += s->tid != (uint32_t)x->tid;
        x->bad_period += s->period != x->period;
        x->with_chain += s->nr >= 2;
}

static void on_record(void *u, const struct fp_perf_record *r)
{
        struct seen *x = u;
        if (r->type == PERF_RECORD_FORK && r->task.ptid == (uint32_t)x->tid)
                x->fork++;
        if (r->type == PERF_RECORD_COMM && strcmp(r->comm.comm, "fp-renamed") == 0)
                x->comm++;
        if (r->type == PERF_RECORD_EXIT && r->task.tid == (uint32_t)x->tid)
                x->exit_++;
        if (r->type == PERF_RECORD_LOST)
                x->lost += (unsigned)r->lost.lost;
}

static void test_events(void)
{
        struct fp_perf_event e;
        FP_CHECK_EQ_INT(fp_perf_event_parse("cpu-clock", &e), 0);
        FP_CHECK(fp_perf_event_is_clock(&e));
        FP_CHECK_EQ_INT(e.type, PERF_TYPE_SOFTWARE);
        FP_CHECK_EQ_INT(fp_perf_event_parse("task-clock", &e), 0);
        FP_CHECK(fp_perf_event_is_clock(&e));
        FP_CHECK_EQ_INT(fp_perf_event_parse("page-faults", &e), 0);
        FP_CHECK(!fp_perf_event_is_clock(&e));
        FP_CHECK_EQ_INT(fp_perf_event_parse("instructions", &e), 0);
        FP_CHECK_EQ_INT(e.type, PERF_TYPE_HARDWARE);
        FP_CHECK_EQ_INT(fp_perf_event_parse("r01c2", &e), 0);
        FP_CHECK_EQ_INT(e.type, PERF_TYPE_RAW);
        FP_CHECK_EQ_INT(e.config, 0x1c2);
        FP_CHECK_EQ_INT(fp_perf_event_parse("bogus", &e), -EINVAL);
        FP_CHECK_EQ_INT(fp_perf_event_parse("rxyz", &e), -EINVAL);
        FP_CHECK_EQ_INT(fp_perf_event_parse("", &e), -EINVAL);
        FP_CHECK_EQ_INT(fp_perf_event_parse("r", &e), -EINVAL);
        FP_CHECK_EQ_INT(fp_perf_ring_pages_for(99), 8);
        FP_CHECK(fp_perf_ring_pages_for(10000) >= 256 / 2);
        FP_CHECK(fp_perf_ring_pages_for(100000) <= 256);
}

static void test_sampling(void)
{
        struct fp_perf_config cfg = {.period = 100000, .ring_pages = 8};
        struct fp_perf_ring sampler, sideband;
        struct fp_perf_handlers h = {on_sample, on_record};
        struct seen x = {0};
        bool kernel_excluded;
        pthread_t t;

        FP_CHECK_EQ_INT(fp_perf_event_parse("cpu-clock", &cfg.event), 0);
        pthread_create(&t, NULL, worker, NULL);
        while (!worker_tid)
                usleep(1000);
        x.tid = worker_tid;
        x.period = cfg.period;
        FP_CHECK_EQ_INT(fp_perf_open_sideband(x.tid, &sideband), 0);
        FP_CHECK_EQ_INT(fp_perf_open_sampler(&cfg, x.tid, &sampler, &kernel_excluded), 0);
        go = 1;
        /* 10 kHz into a 32 KiB ring drained every 10 ms: it wraps many times. */
        for (int i = 0; i < 100; i++) {
                usleep(10000);
                FP_CHECK(fp_perf_ring_drain(&sampler, &h, &x) >= 0);
                FP_CHECK(fp_perf_ring_drain(&sideband, &h, &x) >= 0);
        }
        stop = 1;
        pthread_join(t, NULL);
        usleep(20000);
        FP_CHECK(fp_perf_ring_drain(&sampler, &h, &x) >= 0);
        FP_CHECK(fp_perf_ring_drain(&sideband, &h, &x) >= 0);
        printf("samples %u (expect about 6000 for 0.6 s at 10 kHz), lost %u\n", x.samples, x.lost);
        FP_CHECK(x.samples > 3000 && x.samples < 7500);
        FP_CHECK_EQ_INT(x.bad_tid, 0);
        FP_CHECK_EQ_INT(x.bad_period, 0);
        FP_CHECK(x.with_chain > x.samples * 9 / 10);
        FP_CHECK_EQ_INT(x.fork, 1);
        FP_CHECK_EQ_INT(x.comm, 1);
        FP_CHECK_EQ_INT(x.exit_, 1);
        FP_CHECK(fp_perf_ring_hangup(&sampler));
        FP_CHECK(fp_perf_ring_hangup(&sideband));
        FP_CHECK(!fp_perf_ring_pending(&sampler));
        fp_perf_ring_close(&sampler);
        fp_perf_ring_close(&sideband);
        fp_perf_ring_close(&sampler); /* idempotent */
        FP_CHECK_EQ_INT(fp_perf_open_sideband(x.tid, &sideband), -ESRCH);
}

static void test_hardware(void)
{
        struct fp_perf_config cfg = {.freq = 1000, .ring_pages = 8};
        struct fp_perf_ring r;
        int e;

        FP_CHECK_EQ_INT(fp_perf_event_parse("cycles", &cfg.event), 0);
        e = fp_perf_open_sampler(&cfg, (pid_t)syscall(SYS_gettid), &r, NULL);
        printf("cycles: %s (hardware PMU %s)\n", e == 0 ? "available" : strerror(-e),
               fp_perf_have_hw_pmu() ? "present" : "absent");
        FP_CHECK(e == 0 || e == -ENOENT || e == -EOPNOTSUPP || e == -ENODEV);
        if (e == 0)
                fp_perf_ring_close(&r);
}

int main(void)
{
        test_events();
        test_sampling();
        test_hardware();
        return FP_TEST_DONE();
}
