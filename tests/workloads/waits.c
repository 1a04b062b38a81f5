// SPDX-License-Identifier: MIT
/*
 * waits — a workload whose off-CPU profile is known because it measures it.
 *
 * Each named thread waits in one function of its own, in one way:
 *
 *   w-sleep    wait_sleep()     nanosleep of --sleep-us (1000), interruptible
 *   w-long     wait_long()      nanosleep of --long-ms (50), one block > T
 *   w-pipe     wait_pipe()      read() of a pipe that w-feed writes every
 *                               --pipe-us (3000); w-feed sleeps in between
 *   w-mutex    wait_mutex()     pthread_mutex_lock() of a mutex w-holder
 *                               holds while it sleeps --hold-us (2000)
 *   w-disk     wait_disk()      pwrite + fdatasync of 4 KiB to --dir
 *                               (uninterruptible: the disk)
 *   w-spin-N   spin_contend()   --spinners (3) threads burning CPU, all
 *                               pinned to CPU 0: each waits in the run
 *                               queue, preempted in user mode
 *
 * The truth is measured, not assumed: each call that may block is
 * bracketed by CLOCK_MONOTONIC and CLOCK_THREAD_CPUTIME_ID reads, and its
 * wall time less its CPU time is added to its function's off-CPU time.
 * The spinners' off-CPU time is their wall time less their CPU time over
 * the measured window. Each measured thread's run-queue wait over the
 * window is the kernel's (schedstat run_delay): runq_ns. Helper threads
 * (w-feed, w-holder) are not measured.
 *
 * At the end (after --seconds, or on SIGTERM) the truth is written as JSON
 * to --truth FILE (atomically):
 *
 *   {"pid": P, "seconds": S,
 *    "host_steal_per_busy": F,
 *    "threads": {"w-sleep": {"function": "wait_sleep", "off_ns": N,
 *                            "calls": K, "runq_ns": R, "cpu_ns": C}, ...}}
 *
 * cpu_ns is the CPU time inside the measured calls. host_steal_per_busy is
 * the host's time stolen by its hypervisor per second of its busy time over
 * the window (/proc/stat): a thread's CPU clock leaves out the time its
 * vCPU was stolen while it ran (Linux's paravirtual steal accounting), so
 * its wall time less its CPU time holds about cpu_ns times that of steal,
 * which no profile of off-CPU time sees, nor should.
 *
 * The PID is printed first on stdout. --ready FILE is written once every
 * thread is named and waiting for --wait-for-start FILE (when given) or
 * working. --only F,G,... runs only those functions' threads.
 *
 * Usage: waits [--seconds S] [--truth FILE] [--ready FILE]
 *              [--wait-for-start FILE] [--sleep-us U] [--long-ms M]
 *              [--pipe-us U] [--hold-us U] [--spinners N] [--dir DIR]
 *              [--only LIST]
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_SPINNERS 8

static double opt_seconds = 5;
static const char *opt_truth, *opt_ready, *opt_start, *opt_only, *opt_dir = "/var/tmp";
static long opt_sleep_us = 1000, opt_long_ms = 50, opt_pipe_us = 3000, opt_hold_us = 2000;
static int opt_spinners = 3;

static atomic_int go, stop_now;
static atomic_int named;
static int pipe_fd[2];
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t got_signal;

struct measure {
        const char *function, *thread;
        uint64_t off_ns, calls, cpu_ns;
        bool on;
        uint64_t run_delay[2]; /* schedstat's run-queue wait at the start and the end */
};

enum { M_SLEEP, M_LONG, M_PIPE, M_MUTEX, M_DISK, M_SPIN0 };
static struct measure m[M_SPIN0 + MAX_SPINNERS] = {
    [M_SLEEP] = {"wait_sleep", "w-sleep"}, [M_LONG] = {"wait_long", "w-long"},
    [M_PIPE] = {"wait_pipe", "w-pipe"},    [M_MUTEX] = {"wait_mutex", "w-mutex"},
    [M_DISK] = {"wait_disk", "w-disk"},
};
static char spin_names[MAX_SPINNERS][24];

static uint64_t now_ns(clockid_t c)
{
        struct timespec ts;
        clock_gettime(c, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * The calling thread's time waiting in the run queue so far, as the kernel
 * accounts it (/proc/thread-self/schedstat, second field), into
 * mm->run_delay[at]: the truth of the "runqueue" reason.
 */
static void read_schedstat(struct measure *mm, int at)
{
        unsigned long long run = 0, wait = 0;
        FILE *f = fopen("/proc/thread-self/schedstat", "r");
        if (f && fscanf(f, "%llu %llu", &run, &wait) == 2)
                mm->run_delay[at] = wait;
        if (f)
                fclose(f);
}

/* The host's busy and stolen CPU time so far (/proc/stat's first line), in its ticks. */
static void host_cpu(unsigned long long *busy, unsigned long long *steal)
{
        unsigned long long v[8] = {0};
        FILE *f = fopen("/proc/stat", "r");
        *busy = *steal = 0;
        if (!f)
                return;
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) == 8) {
                *busy = v[0] + v[1] + v[2] + v[5] + v[6];
                *steal = v[7];
        }
        fclose(f);
}

static bool running(void)
{
        return !atomic_load(&stop_now) && !got_signal;
}

/*
 * Adds a call's wall time less its CPU time to mm. The thread CPU clock is a
 * system call, whose return may be preempted on a busy machine: it is read
 * inside the wall clock's bracket at both ends (the wall clock is the vDSO's),
 * so that such a wait, which the profile rightly finds in the function, is in
 * the truth too.
 */
#define MEASURED(mm, call)                                                                         \
        do {                                                                                       \
                uint64_t w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);       \
                call;                                                                              \
                uint64_t c1 = now_ns(CLOCK_THREAD_CPUTIME_ID), w1 = now_ns(CLOCK_MONOTONIC);       \
                uint64_t off = (w1 - w0) > (c1 - c0) ? (w1 - w0) - (c1 - c0) : 0;                  \
                if (running()) {                                                                   \
                        (mm)->off_ns += off;                                                       \
                        (mm)->cpu_ns += c1 - c0;                                                   \
                        (mm)->calls++;                                                             \
                }                                                                                  \
        } while (0)

static void sleep_us(long us)
{
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR && running())
                ;
}

static __attribute__((noinline)) void wait_sleep(void)
{
        MEASURED(&m[M_SLEEP], sleep_us(opt_sleep_us));
}

static __attribute__((noinline)) void wait_long(void)
{
        MEASURED(&m[M_LONG], sleep_us(opt_long_ms * 1000));
}

static __attribute__((noinline)) void wait_pipe(void)
{
        char c;
        MEASURED(&m[M_PIPE], (void)!read(pipe_fd[0], &c, 1));
}

static __attribute__((noinline)) void wait_mutex(void)
{
        MEASURED(&m[M_MUTEX], pthread_mutex_lock(&held));
        pthread_mutex_unlock(&held);
}

static int disk_fd = -1;

static __attribute__((noinline)) void wait_disk(void)
{
        static char block[4096] __attribute__((aligned(4096)));
        static unsigned n;
        block[0] = (char)n++;
        MEASURED(&m[M_DISK], {
                (void)!pwrite(disk_fd, block, sizeof(block), (off_t)(n % 64) * 4096);
                (void)fdatasync(disk_fd);
        });
}

static volatile uint64_t spin_sink;

static __attribute__((noinline)) void spin_contend(void)
{
        for (int i = 0; i < 20000; i++)
                spin_sink = spin_sink * 6364136223846793005ULL + 1442695040888963407ULL;
}

static bool wanted(const char *function)
{
        if (!opt_only)
                return true;
        size_t n = strlen(function);
        for (const char *p = opt_only; (p = strstr(p, function)); p += n)
                if ((p == opt_only || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
                        return true;
        return false;
}

static void name_self(const char *name)
{
        prctl(PR_SET_NAME, name, 0, 0, 0);
        atomic_fetch_add(&named, 1);
        while (!atomic_load(&go) && running())
                usleep(1000);
}

static void *waiter(void *arg)
{
        struct measure *mm = arg;
        void (*fn)(void) = mm == &m[M_SLEEP]   ? wait_sleep
                           : mm == &m[M_LONG]  ? wait_long
                           : mm == &m[M_PIPE]  ? wait_pipe
                           : mm == &m[M_MUTEX] ? wait_mutex
                                               : wait_disk;
        name_self(mm->thread);
        read_schedstat(mm, 0);
        while (running()) {
                fn();
                if (fn == wait_mutex)
                        sleep_us(100); /* let the holder take it again (not in wait_mutex) */
        }
        read_schedstat(mm, 1);
        return NULL;
}

static void *feeder(void *arg)
{
        (void)arg;
        name_self("w-feed");
        while (running()) {
                sleep_us(opt_pipe_us);
                (void)!write(pipe_fd[1], "x", 1);
        }
        (void)!write(pipe_fd[1], "x", 1);
        return NULL;
}

static void *holder(void *arg)
{
        (void)arg;
        name_self("w-holder");
        while (running()) {
                pthread_mutex_lock(&held);
                sleep_us(opt_hold_us);
                pthread_mutex_unlock(&held);
                sleep_us(50);
        }
        return NULL;
}

static void *spinner(void *arg)
{
        struct measure *mm = arg;
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(0, &cpus);
        (void)pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
        name_self(mm->thread);
        read_schedstat(mm, 0);
        uint64_t w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        while (running()) {
                spin_contend();
                mm->calls++;
        }
        uint64_t w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        read_schedstat(mm, 1);
        mm->off_ns = (w1 - w0) > (c1 - c0) ? (w1 - w0) - (c1 - c0) : 0;
        return NULL;
}

static void write_file(const char *path, const char *text)
{
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) < 0) {
                perror(path);
                exit(1);
        }
}

static void on_signal(int sig)
{
        (void)sig;
        got_signal = 1;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"seconds", 1, 0, 's'},  {"truth", 1, 0, 't'},
                                             {"ready", 1, 0, 'r'},    {"wait-for-start", 1, 0, 'w'},
                                             {"sleep-us", 1, 0, 'S'}, {"long-ms", 1, 0, 'L'},
                                             {"pipe-us", 1, 0, 'P'},  {"hold-us", 1, 0, 'H'},
                                             {"spinners", 1, 0, 'n'}, {"dir", 1, 0, 'd'},
                                             {"only", 1, 0, 'o'},     {0, 0, 0, 0}};
        pthread_t th[16];
        int n_th = 0, c;
        char path[4096];

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        opt_seconds = atof(optarg);
                        break;
                case 't':
                        opt_truth = optarg;
                        break;
                case 'r':
                        opt_ready = optarg;
                        break;
                case 'w':
                        opt_start = optarg;
                        break;
                case 'S':
                        opt_sleep_us = atol(optarg);
                        break;
                case 'L':
                        opt_long_ms = atol(optarg);
                        break;
                case 'P':
                        opt_pipe_us = atol(optarg);
                        break;
                case 'H':
                        opt_hold_us = atol(optarg);
                        break;
                case 'n':
                        opt_spinners = atoi(optarg);
                        break;
                case 'd':
                        opt_dir = optarg;
                        break;
                case 'o':
                        opt_only = optarg;
                        break;
                default:
                        fprintf(stderr, "usage: see the comment at the top of waits.c\n");
                        return 2;
                }
        }
        if (opt_spinners < 0 || opt_spinners > MAX_SPINNERS) {
                fprintf(stderr, "--spinners: 0 to %d\n", MAX_SPINNERS);
                return 2;
        }
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (pipe(pipe_fd) < 0) {
                perror("pipe");
                return 1;
        }
        snprintf(path, sizeof(path), "%s/waits-%d.dat", opt_dir, (int)getpid());
        disk_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (disk_fd < 0) {
                perror(path);
                return 1;
        }
        unlink(path);
        int expect = 0;
        for (int i = M_SLEEP; i <= M_DISK; i++) {
                if (!wanted(m[i].function))
                        continue;
                m[i].on = true;
                pthread_create(&th[n_th++], NULL, waiter, &m[i]);
                expect++;
        }
        if (m[M_PIPE].on) {
                pthread_create(&th[n_th++], NULL, feeder, NULL);
                expect++;
        }
        if (m[M_MUTEX].on) {
                pthread_create(&th[n_th++], NULL, holder, NULL);
                expect++;
        }
        for (int i = 0; wanted("spin_contend") && i < opt_spinners; i++) {
                struct measure *mm = &m[M_SPIN0 + i];
                snprintf(spin_names[i], sizeof(spin_names[i]), "w-spin-%d", i);
                *mm = (struct measure){"spin_contend", spin_names[i], 0, 0, 0, true, {0, 0}};
                pthread_create(&th[n_th++], NULL, spinner, mm);
                expect++;
        }
        while (atomic_load(&named) < expect)
                usleep(1000);
        if (opt_ready)
                write_file(opt_ready, "ready\n");
        while (opt_start && access(opt_start, F_OK) < 0 && !got_signal)
                usleep(2000);
        unsigned long long busy0, steal0, busy1, steal1;
        host_cpu(&busy0, &steal0);
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        atomic_store(&go, 1);
        while (!got_signal &&
               (opt_seconds <= 0 || now_ns(CLOCK_MONOTONIC) - t0 < opt_seconds * 1e9))
                usleep(5000);
        atomic_store(&stop_now, 1);
        double seconds = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
        host_cpu(&busy1, &steal1);
        double steal_per_busy =
            busy1 > busy0 ? (double)(steal1 - steal0) / (double)(busy1 - busy0) : 0;
        for (int i = 0; i < n_th; i++)
                pthread_join(th[i], NULL);

        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        fprintf(f, "{\"pid\": %d, \"seconds\": %.3f, \"host_steal_per_busy\": %.4f, \"threads\": {",
                (int)getpid(), seconds, steal_per_busy);
        bool first_fn = true;
        for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
                if (!m[i].on)
                        continue;
                fprintf(f,
                        "%s\"%s\": {\"function\": \"%s\", \"off_ns\": %llu, \"calls\": %llu, "
                        "\"runq_ns\": %llu, \"cpu_ns\": %llu}",
                        first_fn ? "" : ", ", m[i].thread, m[i].function,
                        (unsigned long long)m[i].off_ns, (unsigned long long)m[i].calls,
                        (unsigned long long)(m[i].run_delay[1] - m[i].run_delay[0]),
                        (unsigned long long)m[i].cpu_ns);
                first_fn = false;
        }
        fprintf(f, "}}\n");
        fclose(f);
        if (opt_truth)
                write_file(opt_truth, out);
        else
                fputs(out, stdout);
        free(out);
        return 0;
}
