/* SPDX-License-Identifier: MIT */
/*
 * manystacks: CPU work spread over thousands of distinct call stacks.
 *
 * Each of --threads threads repeatedly walks a random path of --depth
 * calls through four functions (hop_a .. hop_d), each of which picks the
 * next hop from a pseudo-random stream, then spins briefly in the leaf.
 * With depth 7 there are 4^7 = 16384 possible stacks, so a profile of a
 * few seconds holds thousands of distinct ones: the load the store's
 * stack deduplication, eviction and garbage collection are tested with.
 *
 * Usage: manystacks [--threads N] [--seconds S] [--depth D] [--ready FILE]
 * Prints its PID first.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int depth = 7;
static double seconds = 5;
static volatile int stop;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t hop(uint64_t x, int left);
uint64_t hop_a(uint64_t x, int left);
uint64_t hop_b(uint64_t x, int left);
uint64_t hop_c(uint64_t x, int left);
uint64_t hop_d(uint64_t x, int left);

static uint64_t spin(uint64_t x)
{
        for (int i = 0; i < 2000; i++)
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        return x;
}

/* Each hop keeps a frame (frame pointers) and picks the next from x. */
#define HOP(name)                                                                                  \
        __attribute__((noinline)) uint64_t name(uint64_t x, int left)                              \
        {                                                                                          \
                volatile char pad[16];                                                             \
                pad[0] = (char)x;                                                                  \
                x = left ? hop(x * 2862933555777941757ULL + 3037000493ULL, left - 1) : spin(x);    \
                return x + (uint64_t)pad[0];                                                       \
        }
HOP(hop_a)
HOP(hop_b)
HOP(hop_c)
HOP(hop_d)

uint64_t hop(uint64_t x, int left)
{
        switch ((x >> 33) & 3) {
        case 0:
                return hop_a(x, left);
        case 1:
                return hop_b(x, left);
        case 2:
                return hop_c(x, left);
        default:
                return hop_d(x, left);
        }
}

static void *worker(void *arg)
{
        uint64_t x = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
        double end = now_s() + seconds;
        while (!stop && now_s() < end)
                for (int i = 0; i < 100; i++)
                        x = hop(x ^ (uint64_t)i, depth - 1);
        return (void *)(uintptr_t)(x & 1);
}

int main(int argc, char **argv)
{
        int threads = 2;
        const char *ready = NULL;
        for (int i = 1; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--threads") == 0)
                        threads = atoi(argv[i + 1]);
                else if (strcmp(argv[i], "--seconds") == 0)
                        seconds = atof(argv[i + 1]);
                else if (strcmp(argv[i], "--depth") == 0)
                        depth = atoi(argv[i + 1]);
                else if (strcmp(argv[i], "--ready") == 0)
                        ready = argv[i + 1];
                else {
                        fprintf(stderr, "manystacks: unknown option %s\n", argv[i]);
                        return 2;
                }
        }
        if (threads < 1 || threads > 256 || depth < 1 || depth > 32) {
                fprintf(stderr,
                        "usage: manystacks [--threads 1..256] [--seconds S] [--depth 1..32] "
                        "[--ready FILE]\n");
                return 2;
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);
        pthread_t *t = calloc((size_t)threads, sizeof(*t));
        if (!t)
                return 1;
        for (int i = 0; i < threads; i++)
                pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (f)
                        fclose(f);
        }
        for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
        free(t);
        return 0;
}
