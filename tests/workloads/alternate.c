// SPDX-License-Identifier: MIT
/*
 * alternate — regular work that a fixed sampling period locks step with.
 *
 * One thread alternates between two functions, alternate_a() and
 * alternate_b(), each busy for --half-us microseconds of the thread's own
 * CPU clock, for --seconds S of CPU time: each takes exactly half the time.
 * Sampled every 2 x half-us of CPU time, a profiler with a fixed period
 * hits the same phase of the cycle again and again and gives one function
 * far more than half (seen 36-74 % here); one that varies its period (the
 * agent's jitter) gives each about half.
 *
 * The PID is printed as the first line of stdout; --ready FILE is written
 * and the thread waits for --wait-for-start FILE to appear before it works.
 *
 * Usage: alternate [--half-us U] [--seconds S] [--ready FILE] [--wait-for-start FILE]
 */

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile uint64_t sink;

static int64_t thread_cpu_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static NOINLINE void alternate_a(int64_t until)
{
        while (thread_cpu_ns() < until)
                sink++;
}

static NOINLINE void alternate_b(int64_t until)
{
        while (thread_cpu_ns() < until)
                sink++;
}

static int touch(const char *path)
{
        FILE *f = fopen(path, "w");
        if (!f)
                return -errno;
        return fclose(f) == 0 ? 0 : -errno;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"half-us", required_argument, NULL, 'h'},
                                             {"seconds", required_argument, NULL, 's'},
                                             {"ready", required_argument, NULL, 'r'},
                                             {"wait-for-start", required_argument, NULL, 'w'},
                                             {0}};
        const char *ready = NULL, *wait_for = NULL;
        double seconds = 5;
        int64_t half = 500000;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                char *end;
                switch (c) {
                case 'h':
                        half = strtoll(optarg, &end, 10) * 1000;
                        if (*end || half <= 0) {
                                fprintf(stderr, "alternate: bad --half-us '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case 's':
                        seconds = strtod(optarg, &end);
                        if (*end || !(seconds > 0)) {
                                fprintf(stderr, "alternate: bad --seconds '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case 'r':
                        ready = optarg;
                        break;
                case 'w':
                        wait_for = optarg;
                        break;
                default:
                        fprintf(stderr,
                                "usage: alternate [--half-us U] [--seconds S] [--ready FILE] "
                                "[--wait-for-start FILE]\n");
                        return 2;
                }
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (ready && touch(ready) < 0) {
                fprintf(stderr, "alternate: cannot write %s: %s\n", ready, strerror(errno));
                return 1;
        }
        while (wait_for && access(wait_for, F_OK) != 0) {
                struct timespec d = {0, 10000000};
                nanosleep(&d, NULL);
        }
        int64_t t = thread_cpu_ns(), end = t + (int64_t)(seconds * 1e9);
        while (t < end) {
                alternate_a(t + half);
                alternate_b(t + 2 * half);
                t += 2 * half;
        }
        return 0;
}
