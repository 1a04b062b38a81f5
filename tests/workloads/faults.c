// SPDX-License-Identifier: MIT
/*
 * faults — a workload where one function takes page faults and another
 * does not, measuring both itself, for the tests of counter groups.
 *
 * One worker thread, "w-faults", loops over
 *
 *     fault_touch()   maps fresh anonymous memory (huge pages refused),
 *                     writes one byte per page, so every page is a minor
 *                     fault, and unmaps it again;
 *     compute_only()  pure arithmetic on registers: no faults;
 *     pause           a short sleep, so the thread uses about 60 % of one
 *                     core and the test machine stays responsive;
 *
 * each phase lasting --phase-ms of CPU. Around every call it reads
 * CLOCK_THREAD_CPUTIME_ID and getrusage(RUSAGE_THREAD) minor faults, and
 * at the end (after --seconds of work, or on SIGTERM/SIGINT) writes the
 * truth as JSON to --truth FILE (atomically):
 *
 *   {"pid": P, "tid": T,
 *    "functions": {"fault_touch": {"cpu_ns": N, "minor_faults": F},
 *                  "compute_only": {"cpu_ns": N, "minor_faults": F}}}
 *
 * The PID is printed on stdout as the first line; --ready FILE is written
 * once the worker exists and is named; with --wait-for-start FILE the
 * worker starts only once FILE exists; --hold keeps the process alive
 * (idle) after the truth is written, until a signal.
 *
 * Usage: faults [--seconds S] [--phase-ms MS] [--truth FILE] [--ready FILE]
 *               [--wait-for-start FILE] [--hold]
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
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define CHUNK    (2u << 20) /* bytes mapped per round of fault_touch */

uint64_t fault_touch(uint64_t budget_ns);
uint64_t compute_only(uint64_t budget_ns);
void *worker_main(void *arg);

static volatile sig_atomic_t got_signal;
static atomic_int done;
static double opt_seconds = 5;
static unsigned opt_phase_ms = 20;
static const char *opt_truth, *opt_ready, *opt_wait;
static int opt_hold;
static pid_t worker_tid;

struct measure {
        uint64_t cpu_ns, minflt;
};
static struct measure m_fault, m_compute;

static uint64_t thread_cpu_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_minflt(void)
{
        struct rusage ru;
        getrusage(RUSAGE_THREAD, &ru);
        return (uint64_t)ru.ru_minflt;
}

/* Touches fresh pages until budget_ns of CPU have gone; returns the pages touched. */
NOINLINE uint64_t fault_touch(uint64_t budget_ns)
{
        long page = sysconf(_SC_PAGESIZE);
        uint64_t start = thread_cpu_ns(), pages = 0;

        while (thread_cpu_ns() - start < budget_ns) {
                char *p =
                    mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED)
                        return pages;
                (void)madvise(p, CHUNK, MADV_NOHUGEPAGE);
                for (size_t off = 0; off < CHUNK; off += (size_t)page) {
                        ((volatile char *)p)[off] = 1;
                        pages++;
                }
                munmap(p, CHUNK);
        }
        return pages;
}

/* Register arithmetic until budget_ns of CPU have gone: no memory, no faults. */
NOINLINE uint64_t compute_only(uint64_t budget_ns)
{
        uint64_t start = thread_cpu_ns(), x = 88172645463325252ULL;

        while (thread_cpu_ns() - start < budget_ns)
                for (int i = 0; i < 2000; i++) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                }
        return x;
}

static void measured(uint64_t (*fn)(uint64_t), uint64_t budget_ns, struct measure *m)
{
        uint64_t c0 = thread_cpu_ns(), f0 = thread_minflt();
        (void)fn(budget_ns);
        m->minflt += thread_minflt() - f0;
        m->cpu_ns += thread_cpu_ns() - c0;
}

void *worker_main(void *arg)
{
        uint64_t budget = (uint64_t)opt_phase_ms * 1000000u;
        uint64_t end;
        (void)arg;

        worker_tid = (pid_t)syscall(SYS_gettid);
        pthread_setname_np(pthread_self(), "w-faults");
        while (opt_wait && access(opt_wait, F_OK) != 0 && !got_signal)
                usleep(5000);
        end = mono_ns() + (uint64_t)(opt_seconds * 1e9);
        while (!got_signal && mono_ns() < end) {
                measured(fault_touch, budget, &m_fault);
                measured(compute_only, budget, &m_compute);
                struct timespec pause = {0, (long)(budget * 4 / 3)};
                nanosleep(&pause, NULL);
        }
        done = 1;
        return NULL;
}

static void on_signal(int sig)
{
        (void)sig;
        got_signal = 1;
}

static int write_atomically(const char *path, const char *text)
{
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f)
                return -1;
        fputs(text, f);
        if (fclose(f) != 0)
                return -1;
        return rename(tmp, path);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"seconds", required_argument, 0, 's'},
                                             {"phase-ms", required_argument, 0, 'p'},
                                             {"truth", required_argument, 0, 't'},
                                             {"ready", required_argument, 0, 'r'},
                                             {"wait-for-start", required_argument, 0, 'w'},
                                             {"hold", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
        pthread_t th;
        char buf[1024];
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        opt_seconds = atof(optarg);
                        break;
                case 'p':
                        opt_phase_ms = (unsigned)atoi(optarg);
                        break;
                case 't':
                        opt_truth = optarg;
                        break;
                case 'r':
                        opt_ready = optarg;
                        break;
                case 'w':
                        opt_wait = optarg;
                        break;
                case 'h':
                        opt_hold = 1;
                        break;
                default:
                        fprintf(stderr,
                                "usage: faults [--seconds S] [--phase-ms MS] [--truth FILE] "
                                "[--ready FILE] [--wait-for-start FILE] [--hold]\n");
                        return 2;
                }
        }
        if (opt_phase_ms == 0 || opt_seconds <= 0) {
                fprintf(stderr, "faults: --phase-ms and --seconds must be positive\n");
                return 2;
        }
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (pthread_create(&th, NULL, worker_main, NULL) != 0) {
                fprintf(stderr, "faults: cannot create the worker: %s\n", strerror(errno));
                return 1;
        }
        while (!worker_tid)
                usleep(1000);
        usleep(20000); /* the name is set right after the tid */
        if (opt_ready && write_atomically(opt_ready, "ready\n") < 0) {
                fprintf(stderr, "faults: cannot write %s: %s\n", opt_ready, strerror(errno));
                return 1;
        }
        pthread_join(th, NULL);
        snprintf(buf, sizeof(buf),
                 "{\"pid\": %d, \"tid\": %d, \"functions\": {"
                 "\"fault_touch\": {\"cpu_ns\": %llu, \"minor_faults\": %llu}, "
                 "\"compute_only\": {\"cpu_ns\": %llu, \"minor_faults\": %llu}}}\n",
                 (int)getpid(), (int)worker_tid, (unsigned long long)m_fault.cpu_ns,
                 (unsigned long long)m_fault.minflt, (unsigned long long)m_compute.cpu_ns,
                 (unsigned long long)m_compute.minflt);
        if (opt_truth && write_atomically(opt_truth, buf) < 0) {
                fprintf(stderr, "faults: cannot write %s: %s\n", opt_truth, strerror(errno));
                return 1;
        }
        printf("%s", buf);
        fflush(stdout);
        while (opt_hold && !got_signal)
                pause();
        return 0;
}
