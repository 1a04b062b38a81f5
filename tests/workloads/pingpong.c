// SPDX-License-Identifier: MIT
/*
 * pingpong — two threads ("ping", "pong") pass one byte back and forth
 * over a pair of pipes as fast as they can: every round trip is two
 * blocking reads, two wake-ups and (on one CPU, or when the other thread
 * is not spinning) two context switches per thread. The cost benchmark of
 * off-CPU profiling runs it with and without profilers.
 *
 * After --seconds (default 5) it prints one line:
 *
 *   round_trips R seconds S per_second X
 *
 * With --cpu N both threads are pinned to CPU N (every round trip then
 * switches twice). The PID is printed first; --ready FILE is written once
 * both threads run, and --wait-for-start FILE (when given) is awaited
 * before the measured window.
 *
 * Usage: pingpong [--seconds S] [--cpu N] [--ready FILE] [--wait-for-start FILE]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];
static atomic_int started;
static int cpu = -1;

static void pin(void)
{
        if (cpu < 0)
                return;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *pong(void *arg)
{
        char c;
        (void)arg;
        prctl(PR_SET_NAME, "pong", 0, 0, 0);
        pin();
        atomic_fetch_add(&started, 1);
        while (read(ab[0], &c, 1) == 1 && c)
                if (write(ba[1], &c, 1) != 1)
                        break;
        return NULL;
}

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"seconds", 1, 0, 's'},
                                             {"cpu", 1, 0, 'c'},
                                             {"ready", 1, 0, 'r'},
                                             {"wait-for-start", 1, 0, 'w'},
                                             {0, 0, 0, 0}};
        double seconds = 5;
        const char *ready = NULL, *start = NULL;
        pthread_t th;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        seconds = atof(optarg);
                        break;
                case 'c':
                        cpu = atoi(optarg);
                        break;
                case 'r':
                        ready = optarg;
                        break;
                case 'w':
                        start = optarg;
                        break;
                default:
                        fprintf(stderr, "usage: pingpong [--seconds S] [--cpu N] [--ready FILE] "
                                        "[--wait-for-start FILE]\n");
                        return 2;
                }
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (pipe(ab) < 0 || pipe(ba) < 0) {
                perror("pipe");
                return 1;
        }
        prctl(PR_SET_NAME, "ping", 0, 0, 0);
        pin();
        pthread_create(&th, NULL, pong, NULL);
        while (!atomic_load(&started))
                usleep(1000);
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (f)
                        fclose(f);
        }
        while (start && access(start, F_OK) < 0)
                usleep(2000);
        double t0 = now(), t1;
        unsigned long long n = 0;
        char b = 1;
        for (;;) {
                if (write(ab[1], &b, 1) != 1 || read(ba[0], &b, 1) != 1) {
                        perror("pingpong");
                        return 1;
                }
                if (++n % 1024 == 0 && (t1 = now()) - t0 >= seconds)
                        break;
        }
        b = 0;
        (void)!write(ab[1], &b, 1);
        pthread_join(th, NULL);
        printf("round_trips %llu seconds %.3f per_second %.0f\n", n, t1 - t0,
               (double)n / (t1 - t0));
        return 0;
}
