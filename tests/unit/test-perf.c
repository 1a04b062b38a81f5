/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of agent/sampling/perf.c against the real kernel: event names, the
 * sampling event on a busy thread of this test (samples carry its tid, the
 * requested period and a callchain; a small ring is drained many times,
 * so records that wrap its end are exercised), and the side-band event
 * (FORK when the thread creates a thread, COMM on a rename, EXIT and a
 * hangup when it ends). Hardware events must either open or fail with
 * the "not supported" errors the agent turns into a clear message.
 *
 * Counter groups: event lists, the parsing of group reads and the
 * arithmetic of deltas scaled by time enabled / running, checked against
 * hand-made reads; and a real group (cpu-clock leading, page-faults
 * counted) on a thread that touches fresh pages, whose per-sample deltas
 * must add up to the faults the thread itself counted (getrusage).
 */
#include "fp-test.h"
#include "perf.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int go, stop;
static atomic_int worker_tid;
static atomic_int worker_burned; /* its 0.6 s of CPU and its child are done */

static void *child(void *arg)
{
        (void)arg;
        return NULL;
}

static double thread_cpu_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Burns seconds of this thread's CPU (not wall time: a busy machine must not thin the samples). */
__attribute__((noinline)) static uint64_t burn(double seconds)
{
        volatile uint64_t x = 0;
        double end = thread_cpu_s() + seconds;
        while (thread_cpu_s() < end)
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
        worker_burned = 1;
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
        FP_CHECK_EQ_INT(fp_perf_ring_pages_for(99), 32); /* 1.25 s of 600-byte samples */
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
        FP_CHECK_EQ_INT(fp_perf_open_sampler(&cfg, x.tid, 0, &sampler, &kernel_excluded), 0);
        go = 1;
        /*
         * 10 kHz into a 32 KiB ring drained every 10 ms, until the worker
         * has burned its CPU (however long a busy machine makes that, at
         * most 60 s): it wraps many times, and never fills.
         */
        for (int i = 0; i < 100 || (!worker_burned && i < 6000); i++) {
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

struct chains {
        unsigned samples, with_regs, with_user_chain;
};

static void on_chain_sample(void *u, const struct fp_perf_sample *s)
{
        struct chains *c = u;
        c->samples++;
        c->with_regs += s->has_regs && s->stack_size > 0;
        for (uint64_t i = 0; i < s->nr; i++)
                if (s->ips[i] == (uint64_t)PERF_CONTEXT_USER) {
                        c->with_user_chain++;
                        break;
                }
}

/*
 * A stack copy with no_user_chain (auto, dwarf): the kernel does not walk
 * the user frame pointers, so no sample carries a user callchain, while
 * every one has its registers and copy; without it (fp) they do.
 */
static void test_user_chain(void)
{
        for (int no_chain = 0; no_chain <= 1; no_chain++) {
                struct fp_perf_config cfg = {.period = 200000,
                                             .ring_pages = 64,
                                             .stack_bytes = 1024,
                                             .no_user_chain = no_chain};
                struct fp_perf_handlers h = {on_chain_sample, NULL};
                struct fp_perf_ring r;
                struct chains c = {0};

                FP_CHECK_EQ_INT(fp_perf_event_parse("cpu-clock", &cfg.event), 0);
                FP_CHECK_EQ_INT(fp_perf_open_sampler(&cfg, (pid_t)syscall(SYS_gettid), 0, &r, NULL),
                                0);
                for (int i = 0; i < 20; i++) { /* 0.2 s of CPU, drained as it goes */
                        burn(0.01);
                        FP_CHECK(fp_perf_ring_drain(&r, &h, &c) >= 0);
                }
                fp_perf_ring_close(&r);
                printf("no_user_chain %d: %u samples, %u with registers and a copy, %u with a "
                       "user callchain\n",
                       no_chain, c.samples, c.with_regs, c.with_user_chain);
                FP_CHECK(c.samples >= 500); /* about 1,000 at 5 kHz */
                FP_CHECK_EQ_INT(c.with_regs, c.samples);
                if (no_chain)
                        FP_CHECK_EQ_INT(c.with_user_chain, 0);
                else
                        FP_CHECK(c.with_user_chain > c.samples * 9 / 10);
        }
}

static void test_hardware(void)
{
        struct fp_perf_config cfg = {.freq = 1000, .ring_pages = 8};
        struct fp_perf_ring r;
        int e;

        FP_CHECK_EQ_INT(fp_perf_event_parse("cycles", &cfg.event), 0);
        e = fp_perf_open_sampler(&cfg, (pid_t)syscall(SYS_gettid), 0, &r, NULL);
        printf("cycles: %s (hardware PMU %s)\n", e == 0 ? "available" : strerror(-e),
               fp_perf_have_hw_pmu() ? "present" : "absent");
        FP_CHECK(e == 0 || e == -ENOENT || e == -EOPNOTSUPP || e == -ENODEV);
        if (e == 0)
                fp_perf_ring_close(&r);
}

static void test_event_lists(void)
{
        struct fp_perf_config cfg = {0};
        char bad[64], text[FP_PERF_EVENT_LIST_MAX];

        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock", &cfg, bad, sizeof(bad)), 0);
        FP_CHECK_EQ_STR(cfg.event.name, "cpu-clock");
        FP_CHECK_EQ_INT(cfg.n_members, 0);
        FP_CHECK_EQ_INT(
            fp_perf_event_list_parse("cpu-clock,page-faults,cs,r01c2", &cfg, bad, sizeof(bad)), 0);
        FP_CHECK_EQ_STR(cfg.event.name, "cpu-clock");
        FP_CHECK_EQ_INT(cfg.n_members, 3);
        FP_CHECK_EQ_STR(cfg.members[1].name, "cs");
        FP_CHECK_EQ_INT(cfg.members[2].type, PERF_TYPE_RAW);
        fp_perf_event_list_string(&cfg, text, sizeof(text));
        FP_CHECK_EQ_STR(text, "cpu-clock,page-faults,cs,r01c2");
        FP_CHECK_EQ_STR(fp_perf_event_unit(&cfg.event), "nanoseconds");
        FP_CHECK_EQ_STR(fp_perf_event_unit(&cfg.members[0]), "count");
        FP_CHECK(fp_perf_event_is_hardware(&cfg.members[2]));
        FP_CHECK(!fp_perf_event_is_hardware(&cfg.members[0]));

        /* Failures name the culprit and leave cfg alone. */
        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock,foo", &cfg, bad, sizeof(bad)), -EINVAL);
        FP_CHECK_EQ_STR(bad, "foo");
        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock,,page-faults", &cfg, bad, sizeof(bad)),
                        -EINVAL);
        FP_CHECK_EQ_STR(bad, "");
        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock,", &cfg, bad, sizeof(bad)), -EINVAL);
        FP_CHECK_EQ_INT(
            fp_perf_event_list_parse("context-switches,page-faults,cs", &cfg, bad, sizeof(bad)),
            -EEXIST);
        FP_CHECK_EQ_STR(bad, "cs");
        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock,page-faults,context-switches,"
                                                 "cpu-migrations,minor-faults,major-faults,"
                                                 "alignment-faults,emulation-faults,task-clock",
                                                 &cfg, bad, sizeof(bad)),
                        -E2BIG);
        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock,waytoolongeventnamethatisnotanevent",
                                                 &cfg, NULL, 0),
                        -EINVAL);
        FP_CHECK_EQ_STR(cfg.event.name, "cpu-clock");
        FP_CHECK_EQ_INT(cfg.n_members, 3);
}

static void test_group_read(void)
{
        const uint64_t ids[3] = {70, 71, 72};
        struct fp_perf_counts c;
        /* nr, enabled, running, then (value, id) pairs in any order. */
        uint64_t u[9] = {3, 5000, 4000, 111, 70, 333, 72, 222, 71};

        FP_CHECK_EQ_INT(fp_perf_group_read_parse(u, 9, ids, 3, &c), 9);
        FP_CHECK_EQ_INT(c.time_enabled, 5000);
        FP_CHECK_EQ_INT(c.time_running, 4000);
        FP_CHECK_EQ_INT(c.value[0], 111);
        FP_CHECK_EQ_INT(c.value[1], 222);
        FP_CHECK_EQ_INT(c.value[2], 333);
        /* Trailing words (the callchain) are not taken. */
        uint64_t longer[11] = {2, 10, 10, 1, 70, 2, 71, 99, 99, 99, 99};
        FP_CHECK_EQ_INT(fp_perf_group_read_parse(longer, 11, ids, 3, &c), 7);
        FP_CHECK_EQ_INT(c.value[2], 0);
        FP_CHECK_EQ_INT(fp_perf_group_read_parse(u, 8, ids, 3, &c), -EBADMSG); /* cut short */
        FP_CHECK_EQ_INT(fp_perf_group_read_parse(u, 2, ids, 3, &c), -EBADMSG);
        FP_CHECK_EQ_INT(fp_perf_group_read_parse(u, 9, ids, 2, &c), -EBADMSG); /* nr > ids */
        uint64_t stranger[5] = {1, 1, 1, 5, 99};
        FP_CHECK_EQ_INT(fp_perf_group_read_parse(stranger, 5, ids, 3, &c), -EBADMSG);
        uint64_t huge[5] = {UINT64_MAX, 1, 1, 5, 70};
        FP_CHECK_EQ_INT(fp_perf_group_read_parse(huge, 5, ids, 3, &c), -EBADMSG);
}

static void test_delta(void)
{
        struct fp_perf_counts a = {
            .time_enabled = 1000, .time_running = 1000, .value = {5, 10, 20}};
        struct fp_perf_counts b = {
            .time_enabled = 2000, .time_running = 2000, .value = {9, 15, 20}};
        uint64_t d[FP_PERF_MAX_MEMBERS];

        /* Not multiplexed: plain differences. */
        fp_perf_counts_delta(&a, &b, 2, d);
        FP_CHECK_EQ_INT(d[0], 5);
        FP_CHECK_EQ_INT(d[1], 0);
        /* Ran a quarter of the interval: counts scale by 4. */
        b.time_running = 1250;
        b.value[1] = 110;
        fp_perf_counts_delta(&a, &b, 2, d);
        FP_CHECK_EQ_INT(d[0], 400);
        /* The ratio is the interval's, not the cumulative one (2000/1250 would give 160). */
        a.time_running = 250;
        b.time_running = 1250;
        fp_perf_counts_delta(&a, &b, 1, d);
        FP_CHECK_EQ_INT(d[0], 100);
        /* Did not run at all: nothing counted, nothing invented. */
        b.time_running = a.time_running;
        fp_perf_counts_delta(&a, &b, 1, d);
        FP_CHECK_EQ_INT(d[0], 0);
        /* Backwards (a reopened counter): 0, never a wrapped huge number. */
        b.time_running = 2000;
        b.value[1] = 3;
        fp_perf_counts_delta(&a, &b, 1, d);
        FP_CHECK_EQ_INT(d[0], 0);
        /* From zero (a thread's first sample): everything since the open. */
        struct fp_perf_counts z = {0};
        b.value[1] = 77;
        fp_perf_counts_delta(&z, &b, 1, d);
        FP_CHECK_EQ_INT(d[0], 77);
        /* Scaling never overflows: saturates. */
        struct fp_perf_counts big = {
            .time_enabled = UINT64_MAX, .time_running = 1, .value = {0, UINT64_MAX}};
        fp_perf_counts_delta(&z, &big, 1, d);
        FP_CHECK(d[0] == UINT64_MAX);
}

struct group_seen {
        unsigned samples, with_counters, bad;
        uint64_t faults, enabled, running;
};

static void on_group_sample(void *u, const struct fp_perf_sample *s)
{
        struct group_seen *x = u;
        x->samples++;
        if (s->n_counters == 1) {
                x->with_counters++;
                x->faults += s->counters[0];
                x->enabled += s->d_enabled;
                x->running += s->d_running;
        }
        x->bad += s->nr == 0; /* the callchain still follows the read */
}

static atomic_int fault_go, fault_tid;
static atomic_ullong fault_count;

static void *fault_worker(void *arg)
{
        long page = sysconf(_SC_PAGESIZE);
        struct rusage r0, r1;
        (void)arg;
        fault_tid = (int)syscall(SYS_gettid);
        while (!fault_go)
                usleep(1000);
        getrusage(RUSAGE_THREAD, &r0);
        double end = thread_cpu_s() + 0.3; /* CPU time: a busy machine must not thin it */
        while (thread_cpu_s() < end) {
                size_t len = 1u << 20;
                char *p =
                    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED)
                        break;
                (void)madvise(p, len, MADV_NOHUGEPAGE);
                for (size_t off = 0; off < len; off += (size_t)page)
                        ((volatile char *)p)[off] = 1;
                munmap(p, len);
        }
        getrusage(RUSAGE_THREAD, &r1);
        fault_count = (unsigned long long)(r1.ru_minflt - r0.ru_minflt);
        return NULL;
}

static void test_group_sampling(void)
{
        struct fp_perf_config cfg = {.period = 1000000, .ring_pages = 16, .count_kernel = true};
        struct fp_perf_handlers h = {on_group_sample, NULL};
        struct group_seen x = {0};
        struct fp_perf_ring ring;
        pthread_t t;

        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock,page-faults", &cfg, NULL, 0), 0);
        pthread_create(&t, NULL, fault_worker, NULL);
        while (!fault_tid)
                usleep(1000);
        FP_CHECK_EQ_INT(fp_perf_open_sampler(&cfg, fault_tid, 0, &ring, NULL), 0);
        FP_CHECK_EQ_INT(ring.n_members, 1);
        FP_CHECK(ring.id[0] != 0 && ring.id[1] != 0 && ring.id[0] != ring.id[1]);
        fault_go = 1;
        while (fault_count == 0) {
                usleep(20000);
                FP_CHECK(fp_perf_ring_drain(&ring, &h, &x) >= 0);
        }
        pthread_join(t, NULL);
        FP_CHECK(fp_perf_ring_drain(&ring, &h, &x) >= 0);
        printf("group: %u samples, page-faults in samples %llu, thread counted %llu, "
               "enabled %llu ns, running %llu ns\n",
               x.samples, (unsigned long long)x.faults, (unsigned long long)fault_count,
               (unsigned long long)x.enabled, (unsigned long long)x.running);
        FP_CHECK(x.samples > 150); /* 0.3 s of CPU at 1 kHz */
        FP_CHECK_EQ_INT(x.with_counters, x.samples);
        FP_CHECK_EQ_INT(x.bad, 0);
        /* Faults after the last sample are not in any sample: at most one period's worth. */
        FP_CHECK(x.faults <= fault_count + 16 && x.faults >= fault_count * 9 / 10);
        FP_CHECK_EQ_INT(x.enabled, x.running); /* software events are never multiplexed */
        fp_perf_ring_close(&ring);
        fp_perf_ring_close(&ring);
}

static void test_probe(void)
{
        struct fp_perf_event e;
        pid_t self = (pid_t)syscall(SYS_gettid);

        FP_CHECK_EQ_INT(fp_perf_event_parse("page-faults", &e), 0);
        FP_CHECK_EQ_INT(fp_perf_probe_event(&e, self, true), 0);
        FP_CHECK_EQ_INT(fp_perf_event_parse("cycles", &e), 0);
        int r = fp_perf_probe_event(&e, self, true);
        FP_CHECK(fp_perf_have_hw_pmu() ? r == 0 || r == -EOPNOTSUPP
                                       : r == -ENOENT || r == -EOPNOTSUPP || r == -ENODEV);
        FP_CHECK_EQ_INT(fp_perf_probe_event(&e, 999999999, true), -ESRCH);
}

int main(void)
{
        test_events();
        test_event_lists();
        test_group_read();
        test_delta();
        test_sampling();
        test_user_chain();
        test_group_sampling();
        test_hardware();
        test_probe();
        return FP_TEST_DONE();
}
