/* SPDX-License-Identifier: MIT */
/*
 * The host tier's pairing of off-CPU records (agent/sampling/host.c): a
 * block's STACK record (its copy at the switch-out) waits for the
 * WEIGHTS record its switch-in brings. Threads whose ids hash alike, and
 * stacks that never get weights (a short wait not kept), must not cost
 * another thread its pair: each of 12 threads whose ids are 1024 apart
 * (one slot each in a direct-mapped table), interleaved with 40 stacks
 * left without weights, gets its own weights. A WEIGHTS record with no
 * stack of its thread or of another sequence number counts as unpaired.
 */
#include "fp-test.h"
#include "host.h"
#include "offcpu.h"
#include "symbols.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void feed(struct fp_host *h, struct fp_offcpu_record *r, unsigned kind, pid_t tid,
                 uint32_t seq, uint64_t runqueue_ns)
{
        memset(r, 0, FP_OFFCPU_HEADER_LEN);
        r->kind = kind;
        r->tid = (uint32_t)tid;
        r->tgid = (uint32_t)getpid();
        r->seq = seq;
        r->time_ns = mono_ns();
        r->tier = FP_OFFCPU_HOST;
        if (kind == FP_OFFCPU_STACK)
                r->ip = (uint64_t)(uintptr_t)&feed; /* a frame of this program */
        else
                r->weight[FP_OFFCPU_RUNQUEUE] = runqueue_ns;
        fp_host_offcpu_record(h, r, NULL);
}

int main(void)
{
        struct event_base *base = event_base_new();
        struct fp_symcache *cache = fp_symcache_new();
        struct fp_host_config cfg = {.freq = 1, .off_cpu_period = 1000000};
        struct fp_offcpu_record *r = calloc(1, sizeof(*r));
        struct fp_host_stats st;
        struct fp_host *h = NULL;
        char err[256];

        int rc = fp_host_start(base, cache, &cfg, NULL, NULL, &h, err, sizeof(err));
        if (rc < 0)
                fprintf(stderr, "host tier: %s\n", err);
        FP_CHECK_EQ_INT(rc, 0);
        if (rc < 0 || !r)
                return FP_TEST_DONE();

        /* Stacks that never get weights, then 12 threads' stacks, 1024 apart. */
        for (pid_t i = 0; i < 40; i++)
                feed(h, r, FP_OFFCPU_STACK, 500000 + 1024 * i + 7, 1, 0);
        for (pid_t i = 0; i < 12; i++)
                feed(h, r, FP_OFFCPU_STACK, 100000 + 1024 * i, 3, 0);
        for (pid_t i = 0; i < 12; i++)
                feed(h, r, FP_OFFCPU_WEIGHTS, 100000 + 1024 * i, 3, 2000000);
        fp_host_stats(h, &st);
        FP_CHECK_EQ_INT(st.st.off_unpaired, 0);
        FP_CHECK_EQ_INT(st.st.off_samples, 12);
        FP_CHECK_EQ_INT(st.st.off_value, 12 * 2000000ULL);

        /* Paired once: again, and with another sequence number, unpaired. */
        feed(h, r, FP_OFFCPU_WEIGHTS, 100000, 3, 2000000);
        feed(h, r, FP_OFFCPU_STACK, 100000, 4, 0);
        feed(h, r, FP_OFFCPU_WEIGHTS, 100000, 5, 2000000);
        fp_host_stats(h, &st);
        FP_CHECK_EQ_INT(st.st.off_unpaired, 2);
        FP_CHECK_EQ_INT(st.st.off_samples, 12);

        fp_host_free(h);
        free(r);
        fp_symcache_free(cache);
        event_base_free(base);
        return FP_TEST_DONE();
}
