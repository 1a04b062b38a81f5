// SPDX-License-Identifier: MIT
/*
 * pltcall — a program that spends its time in calls through PLT stubs:
 * the test subject of unwinding through them (tests/integration/
 * test-unwind.sh). caller_a calls the library's pltcall_inner() through
 * the executable's PLT; caller_b calls pltcall_outer(), which calls
 * pltcall_inner() through the library's own PLT. The functions are so
 * short that a few percent of the samples land on the stubs' one
 * instruction, where no function's CFI applies but the PLT's.
 *
 * Built twice (tests/CMakeLists.txt): with the classic lazy .plt, and
 * with IBT stubs (.plt and .plt.sec, -z ibtplt), as CET-enabled
 * distributions build.
 *
 * Usage: pltcall [--seconds S] [--go FILE]; prints its pid first.
 */
#include "pltcall.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile uint64_t pltcall_sink;

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static NOINLINE uint64_t caller_a(uint64_t x)
{
        for (int i = 0; i < 64; i++)
                x = pltcall_inner(x);
        return x;
}

static NOINLINE uint64_t caller_b(uint64_t x)
{
        return pltcall_outer(x);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
            {"seconds", required_argument, NULL, 's'}, {"go", required_argument, NULL, 'g'}, {0}};
        double seconds = 4;
        const char *go = NULL;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (c == 's') {
                        seconds = atof(optarg);
                } else if (c == 'g') {
                        go = optarg;
                } else {
                        fprintf(stderr, "usage: pltcall [--seconds S] [--go FILE]\n");
                        return 2;
                }
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);
        while (go && access(go, F_OK) != 0)
                usleep(1000);
        uint64_t x = now_ns(), end = x + (uint64_t)(seconds * 1e9);
        while (now_ns() < end)
                for (int i = 0; i < 1000; i++)
                        x = caller_b(caller_a(x));
        pltcall_sink = x;
        return 0;
}
