// SPDX-License-Identifier: MIT
/*
 * spin — CPU-bound threads for benchmarks.
 *
 * --threads N threads named "spin-0".."spin-N-1" each run spin_outer() →
 * spin_inner() in a loop for --seconds S and count the iterations they
 * finish.  With --report-ms MS the main thread prints one line every MS
 * milliseconds on stdout:
 *
 *     t_ms=<since start> iters=<total so far> delta=<since last line> rate=<iters/s>
 * cpu_ns=<process CPU>
 *
 * and at the end "total iters=<N> seconds=<S> rate=<iters/s> cpu_ns=<process CPU>", so a benchmark
 * can see how much throughput a profiler attached to the process costs.
 * The PID is printed as the first line of stdout; --ready FILE is written once
 * every thread runs.  SIGTERM/SIGINT end the run early (still printing the
 * total).
 *
 * --duty F (0 < F <= 1, default 1) makes each thread busy for F of every
 * 10 ms period (by its own CPU clock) and sleep the rest, so a process with
 * many threads can stay within a small machine's cores: 100 threads at
 * --duty 0.012 use 1.2 cores.
 *
 * Usage: spin [--threads N] [--seconds S] [--report-ms MS] [--duty F] [--ready FILE]
 */

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE    __attribute__((noinline, noclone))
#define MAX_THREADS 256

/* Global so they are plain ELF symbols of the binary. */
uint64_t spin_inner(uint64_t x);
uint64_t spin_outer(uint64_t x);
void *spin_thread(void *arg);

struct spinner {
        pthread_t thread;
        int index;
        _Atomic uint64_t iters;
        uint64_t sink;
};

static volatile sig_atomic_t got_signal;
static atomic_int stop;
static atomic_int running;
static void *volatile frame_sink;
static double duty = 1;

#define DUTY_PERIOD_NS 10000000u

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t deadline)
{
        struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000u),
                              .tv_nsec = (long)(deadline % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/* About a microsecond of dependent integer work. */
NOINLINE uint64_t spin_inner(uint64_t x)
{
        frame_sink = __builtin_frame_address(0); /* keep a frame: see truth.c */
        for (int i = 0; i < 256; i++) {
                x ^= x >> 31;
                x *= 0x9e3779b97f4a7c15ULL;
                x += (uint64_t)i;
        }
        return x;
}

NOINLINE uint64_t spin_outer(uint64_t x)
{
        for (int i = 0; i < 16; i++)
                x = spin_inner(x);
        return x;
}

NOINLINE void *spin_thread(void *arg)
{
        struct spinner *s = arg;
        char name[16];
        snprintf(name, sizeof(name), "spin-%d", s->index);
        pthread_setname_np(pthread_self(), name);
        atomic_fetch_add(&running, 1);
        uint64_t x = (uint64_t)s->index + 1;
        if (duty >= 1) {
                while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
                        x = spin_outer(x);
                        atomic_fetch_add_explicit(&s->iters, 1, memory_order_relaxed);
                }
        } else {
                uint64_t busy = (uint64_t)(duty * DUTY_PERIOD_NS), period = now_ns();
                while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
                        uint64_t c0 = thread_cpu_ns();
                        while (thread_cpu_ns() - c0 < busy && now_ns() - period < DUTY_PERIOD_NS) {
                                x = spin_outer(x);
                                atomic_fetch_add_explicit(&s->iters, 1, memory_order_relaxed);
                        }
                        period += DUTY_PERIOD_NS;
                        uint64_t t = now_ns();
                        if (period < t)
                                period = t; /* fell behind: do not try to catch up */
                        sleep_until(period);
                }
        }
        s->sink = x;
        return NULL;
}

static void on_signal(int sig)
{
        (void)sig;
        got_signal = 1;
}

static double parse_num(const char *opt, const char *s, double lo, double hi)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || *end || v < lo || v > hi) {
                fprintf(stderr, "spin: bad value for --%s: '%s' (want %g..%g)\n", opt, s, lo, hi);
                exit(2);
        }
        return v;
}

static uint64_t total_iters(struct spinner *ss, int n)
{
        uint64_t t = 0;
        for (int i = 0; i < n; i++)
                t += atomic_load_explicit(&ss[i].iters, memory_order_relaxed);
        return t;
}

int main(int argc, char **argv)
{
        int n = 2;
        double seconds = 10, report_ms = 0;
        const char *ready = NULL;
        static const struct option opts[] = {
            {"threads", required_argument, NULL, 'n'},
            {"seconds", required_argument, NULL, 's'},
            {"report-ms", required_argument, NULL, 'r'},
            {"ready", required_argument, NULL, 'R'},
            {"duty", required_argument, NULL, 'd'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'n':
                        n = (int)parse_num("threads", optarg, 1, MAX_THREADS);
                        break;
                case 's':
                        seconds = parse_num("seconds", optarg, 0.01, 1e6);
                        break;
                case 'r':
                        report_ms = parse_num("report-ms", optarg, 1, 1e6);
                        break;
                case 'R':
                        ready = optarg;
                        break;
                case 'd':
                        duty = parse_num("duty", optarg, 0.001, 1);
                        break;
                case 'h':
                        printf("usage: spin [--threads N] [--seconds S] [--report-ms MS] [--duty "
                               "F] [--ready FILE]\n");
                        return 0;
                default:
                        fprintf(stderr, "usage: spin [--threads N] [--seconds S] [--report-ms MS] "
                                        "[--duty F] [--ready FILE]\n");
                        return 2;
                }
        }

        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        printf("%d\n", (int)getpid());
        fflush(stdout);

        struct spinner *ss = calloc((size_t)n, sizeof(*ss));
        if (!ss) {
                fprintf(stderr, "spin: out of memory\n");
                return 1;
        }
        for (int i = 0; i < n; i++) {
                ss[i].index = i;
                if (pthread_create(&ss[i].thread, NULL, spin_thread, &ss[i]) != 0) {
                        fprintf(stderr, "spin: Failed to create thread %d\n", i);
                        return 1;
                }
        }
        while (atomic_load(&running) < n)
                usleep(1000);
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (!f) {
                        fprintf(stderr, "spin: Failed to write '%s': %s\n", ready, strerror(errno));
                        return 1;
                }
                fprintf(f, "%d\n", (int)getpid());
                fclose(f);
        }

        uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), last = 0;
        uint64_t step = report_ms > 0 ? (uint64_t)(report_ms * 1e6) : 50000000u;
        uint64_t next = t0 + step;
        while (!got_signal) {
                sleep_until(next < end ? next : end);
                uint64_t t = now_ns();
                if (report_ms > 0 && t >= next) {
                        uint64_t it = total_iters(ss, n);
                        struct timespec cpu;
                        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
                        printf("t_ms=%llu iters=%llu delta=%llu rate=%.0f cpu_ns=%llu\n",
                               (unsigned long long)((t - t0) / 1000000u), (unsigned long long)it,
                               (unsigned long long)(it - last),
                               (double)(it - last) * 1e9 / (double)step,
                               (unsigned long long)cpu.tv_sec * 1000000000u +
                                   (unsigned long long)cpu.tv_nsec);
                        fflush(stdout);
                        last = it;
                }
                if (t >= end)
                        break;
                while (next <= t)
                        next += step;
        }
        atomic_store(&stop, 1);
        for (int i = 0; i < n; i++)
                pthread_join(ss[i].thread, NULL);
        double el = (double)(now_ns() - t0) / 1e9;
        uint64_t it = total_iters(ss, n);
        struct timespec cpu;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
        printf("total iters=%llu seconds=%.3f rate=%.0f cpu_ns=%llu\n", (unsigned long long)it, el,
               (double)it / el,
               (unsigned long long)cpu.tv_sec * 1000000000u + (unsigned long long)cpu.tv_nsec);
        free(ss);
        return 0;
}
