// SPDX-License-Identifier: MIT
/*
 * The callers and the leaf of leafcall (see leafcall.c). Each caller
 * calls shared_leaf() with its own number of units and measures its own
 * CPU time around the call; nothing else in a caller costs time.
 */
#include "leafcall.h"

#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))
#define UNIT     200000

static volatile uint64_t leafcall_sink;

/* A true leaf: no calls, and with optimization no stack frame at all. */
static NOINLINE uint64_t shared_leaf(uint64_t n, uint64_t x)
{
        for (uint64_t i = 0; i < n; i++)
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        return x;
}

static uint64_t cpu_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#define CALLER(k)                                                                                  \
        static NOINLINE uint64_t caller_##k(uint64_t *spent)                                       \
        {                                                                                          \
                uint64_t t0 = cpu_ns();                                                            \
                uint64_t r = shared_leaf((k) * (uint64_t)UNIT, t0);                                \
                *spent += cpu_ns() - t0;                                                           \
                return r;                                                                          \
        }
CALLER(1)
CALLER(2)
CALLER(3)
CALLER(4)

void leafcall_round(uint64_t spent[4])
{
        leafcall_sink += caller_1(&spent[0]);
        leafcall_sink += caller_2(&spent[1]);
        leafcall_sink += caller_3(&spent[2]);
        leafcall_sink += caller_4(&spent[3]);
}
