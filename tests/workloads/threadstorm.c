// SPDX-License-Identifier: MIT
/*
 * threadstorm — short-lived threads and child processes for the thread
 * tracker's tests and benchmark.
 *
 * After start-up it prints its PID (first line of stdout), writes --ready
 * FILE, and waits until --go FILE exists (so a profiler can be attached
 * first). Then:
 *
 *   --threads N    creates N threads one after another (each joined before
 *                  the next starts). Thread i names itself "storm-<i>"
 *                  (zero-padded to 3 digits) and burns --cpu-ms of its own
 *                  CPU time (CLOCK_THREAD_CPUTIME_ID) in storm_work().
 *   --children N   then forks N child processes one after another; child i
 *                  names itself "child-<i>", burns --cpu-ms in child_work(),
 *                  and with --grandchildren forks one grandchild first,
 *                  named "grandchild-<i>", burning --cpu-ms in
 *                  grandchild_work().
 *   --child-wait PREFIX  child i waits (after naming itself and forking its
 *                  grandchild) until the file PREFIX.<i> exists before its
 *                  work, at most 30 s: a test that must see every child
 *                  profiled releases each once the profiler has it, so a
 *                  slow machine cannot let a child finish unobserved.
 *
 *   --cpu-us US    the same in microseconds (overrides --cpu-ms).
 *   --touch-pages N  each storm thread also maps N fresh pages, writes a
 *                  byte to each (N minor page faults) and unmaps them.
 *   --naps N       each storm thread also sleeps N times for 100 µs (N
 *                  voluntary context switches).
 *   --sleep-ms MS  each storm thread first sleeps MS milliseconds (so a
 *                  profiler has attached before its work: its first
 *                  period alone decides whether it is sampled).
 *   --early-us US  burns US µs of its CPU in early_work() as soon as its
 *                  options are read, sleeps --sleep-ms, and exits: a
 *                  process that works from its exec on (before a profiler
 *                  that learns of the exec can have opened its events),
 *                  alive long enough to be found. Nothing else is done.
 *
 * --times FILE gets one line per thread: "<index> <tid> <start_ns>", the
 * CLOCK_MONOTONIC time the thread began running. When all is done it
 * writes "elapsed_ns NS" (the threads' and children's wall time), "rusage
 * MINFLT NVCSW NIVCSW" (the process's minor faults and voluntary and
 * involuntary context switches from --go to the end, as getrusage()
 * counts them) and "done" to stdout and, with --hold, waits for SIGTERM (so a test
 * can dump the profile while the process lives); otherwise it exits.
 *
 * Usage: threadstorm [--threads N] [--children N] [--grandchildren]
 *                    [--cpu-ms MS] [--cpu-us US] [--sleep-ms MS]
 *                    [--times FILE] [--ready FILE]
 *                    [--go FILE] [--child-wait PREFIX] [--hold]
 *                    [--early-us US]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

/* Global so they are plain ELF symbols of the binary. */
uint64_t storm_work(unsigned ms);
uint64_t child_work(unsigned ms);
uint64_t grandchild_work(unsigned ms);
uint64_t early_work(unsigned us);

static volatile sig_atomic_t got_signal;
static unsigned cpu_us = 30000, sleep_ms, touch_pages, naps;
static uint64_t *start_ns;
static pid_t *tids;

static void on_signal(int sig)
{
        (void)sig;
        got_signal = 1;
}

static uint64_t clock_ns(clockid_t clk)
{
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins until this thread has used us microseconds of CPU. */
static NOINLINE uint64_t burn(unsigned us)
{
        uint64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + (uint64_t)us * 1000u, x = 1;
        while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
                for (int i = 0; i < 1000; i++)
                        x = x * 6364136223846793005u + 1442695040888963407u;
        return x;
}

NOINLINE uint64_t storm_work(unsigned us)
{
        return burn(us) + 1;
}

NOINLINE uint64_t child_work(unsigned us)
{
        return burn(us) + 2;
}

NOINLINE uint64_t early_work(unsigned us)
{
        return burn(us) + 4;
}

NOINLINE uint64_t grandchild_work(unsigned us)
{
        return burn(us) + 3;
}

static void *storm_thread(void *arg)
{
        unsigned i = (unsigned)(uintptr_t)arg;
        char name[16];

        start_ns[i] = clock_ns(CLOCK_MONOTONIC);
        tids[i] = (pid_t)syscall(SYS_gettid);
        snprintf(name, sizeof(name), "storm-%03u", i);
        prctl(PR_SET_NAME, name);
        if (sleep_ms) {
                struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
        }
        if (touch_pages) {
                size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (size_t)touch_pages * page;
                char *m =
                    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m != MAP_FAILED) {
                        madvise(m, len, MADV_NOHUGEPAGE);
                        for (size_t off = 0; off < len; off += page)
                                ((volatile char *)m)[off] = 1;
                        munmap(m, len);
                }
        }
        for (unsigned k = 0; k < naps; k++) {
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
        }
        return (void *)(uintptr_t)storm_work(cpu_us);
}

static void name_self(const char *prefix, unsigned i)
{
        char name[16];
        snprintf(name, sizeof(name), "%s-%u", prefix, i);
        prctl(PR_SET_NAME, name);
}

static const char *child_wait;

/* With --child-wait: until PREFIX.<i> exists (30 s at most). */
static void wait_release(unsigned i)
{
        char path[4096];

        if (!child_wait)
                return;
        snprintf(path, sizeof(path), "%s.%u", child_wait, i);
        for (int n = 0; n < 30000 && access(path, F_OK) != 0; n++)
                usleep(1000);
}

static void run_child(unsigned i, int grandchildren)
{
        pid_t g = -1;

        name_self("child", i);
        if (grandchildren) {
                g = fork();
                if (g == 0) {
                        name_self("grandchild", i);
                        grandchild_work(cpu_us);
                        _exit(0);
                }
        }
        wait_release(i);
        child_work(cpu_us);
        if (g > 0)
                waitpid(g, NULL, 0);
        _exit(0);
}

static int parse_uint(const char *s, unsigned max, unsigned *ret)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (!*s || *s == '-' || errno || *end || v > max)
                return -1;
        *ret = (unsigned)v;
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
            {"threads", required_argument, NULL, 't'},
            {"children", required_argument, NULL, 'c'},
            {"grandchildren", no_argument, NULL, 'g'},
            {"cpu-ms", required_argument, NULL, 'm'},
            {"cpu-us", required_argument, NULL, 'u'},
            {"sleep-ms", required_argument, NULL, 's'},
            {"times", required_argument, NULL, 'T'},
            {"ready", required_argument, NULL, 'R'},
            {"go", required_argument, NULL, 'G'},
            {"hold", no_argument, NULL, 'H'},
            {"child-wait", required_argument, NULL, 'W'},
            {"early-us", required_argument, NULL, 'E'},
            {"touch-pages", required_argument, NULL, 'P'},
            {"naps", required_argument, NULL, 'N'},
            {0},
        };
        const char *usage =
            "usage: threadstorm [--threads N] [--children N] [--grandchildren] "
            "[--cpu-ms MS] [--cpu-us US] [--sleep-ms MS] [--times FILE] [--ready FILE] [--go FILE] "
            "[--child-wait PREFIX] [--hold] [--early-us US] [--touch-pages N] [--naps N]\n";
        unsigned n_threads = 0, n_children = 0, early_us = 0;
        int grandchildren = 0, hold = 0, c;
        const char *times = NULL, *ready = NULL, *go = NULL;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 't':
                        if (parse_uint(optarg, 100000, &n_threads) < 0)
                                goto bad;
                        break;
                case 'c':
                        if (parse_uint(optarg, 1000, &n_children) < 0)
                                goto bad;
                        break;
                case 'g':
                        grandchildren = 1;
                        break;
                case 'm':
                        if (parse_uint(optarg, 60000, &cpu_us) < 0)
                                goto bad;
                        cpu_us *= 1000;
                        break;
                case 'u':
                        if (parse_uint(optarg, 60000000, &cpu_us) < 0)
                                goto bad;
                        break;
                case 's':
                        if (parse_uint(optarg, 60000, &sleep_ms) < 0)
                                goto bad;
                        break;
                case 'T':
                        times = optarg;
                        break;
                case 'R':
                        ready = optarg;
                        break;
                case 'G':
                        go = optarg;
                        break;
                case 'H':
                        hold = 1;
                        break;
                case 'W':
                        child_wait = optarg;
                        break;
                case 'E':
                        if (parse_uint(optarg, 60000000, &early_us) < 0)
                                goto bad;
                        break;
                case 'P':
                        if (parse_uint(optarg, 1 << 20, &touch_pages) < 0)
                                goto bad;
                        break;
                case 'N':
                        if (parse_uint(optarg, 100000, &naps) < 0)
                                goto bad;
                        break;
                default:
                        goto bad;
                }
        }
        if (optind < argc)
                goto bad;
        if (early_us) {
                uint64_t r = early_work(early_us);
                struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
                return r ? 0 : 1;
        }

        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        start_ns = calloc(n_threads ? n_threads : 1, sizeof(*start_ns));
        tids = calloc(n_threads ? n_threads : 1, sizeof(*tids));
        if (!start_ns || !tids) {
                fprintf(stderr, "threadstorm: out of memory\n");
                return 1;
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (!f) {
                        fprintf(stderr, "threadstorm: Failed to write '%s': %s\n", ready,
                                strerror(errno));
                        return 1;
                }
                fclose(f);
        }
        while (go && access(go, F_OK) < 0 && !got_signal)
                usleep(10000);

        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        uint64_t began = clock_ns(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < n_threads && !got_signal; i++) {
                pthread_t th;
                int r = pthread_create(&th, NULL, storm_thread, (void *)(uintptr_t)i);
                if (r) {
                        fprintf(stderr, "threadstorm: Failed to create thread %u: %s\n", i,
                                strerror(r));
                        return 1;
                }
                pthread_join(th, NULL);
        }
        for (unsigned i = 0; i < n_children && !got_signal; i++) {
                pid_t p = fork();
                if (p < 0) {
                        fprintf(stderr, "threadstorm: Failed to fork: %s\n", strerror(errno));
                        return 1;
                }
                if (p == 0)
                        run_child(i, grandchildren);
                waitpid(p, NULL, 0);
        }
        if (times) {
                FILE *f = fopen(times, "w");
                if (!f) {
                        fprintf(stderr, "threadstorm: Failed to write '%s': %s\n", times,
                                strerror(errno));
                        return 1;
                }
                for (unsigned i = 0; i < n_threads; i++)
                        fprintf(f, "%u %d %llu\n", i, (int)tids[i],
                                (unsigned long long)start_ns[i]);
                fclose(f);
        }
        getrusage(RUSAGE_SELF, &ru1);
        printf("elapsed_ns %llu\nrusage %ld %ld %ld\ndone\n",
               (unsigned long long)(clock_ns(CLOCK_MONOTONIC) - began),
               ru1.ru_minflt - ru0.ru_minflt, ru1.ru_nvcsw - ru0.ru_nvcsw,
               ru1.ru_nivcsw - ru0.ru_nivcsw);
        fflush(stdout);
        while (hold && !got_signal)
                pause();
        return 0;
bad:
        fputs(usage, stderr);
        return 2;
}
