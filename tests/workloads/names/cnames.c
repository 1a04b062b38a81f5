// SPDX-License-Identifier: MIT
//
// A C program whose time is in two functions, alpha_work (two thirds) and
// beta_work (one third), for the tests of stripped builds named at the
// collector (tests/integration/test-debuginfo-upload.sh). Runs for the
// seconds given (default 2). Built with -DPAD=N it also holds N bytes of
// read-only data: an unstripped executable of a chosen size.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef PAD
static const char pad[PAD] = {SEED};
#endif

static volatile unsigned long sink;

__attribute__((noinline)) void alpha_work(long n)
{
        for (long i = 0; i < n; i++)
                sink += (unsigned long)i * 7;
}

__attribute__((noinline)) void beta_work(long n)
{
        for (long i = 0; i < n; i++)
                sink ^= (unsigned long)i * 13;
}

static double now(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        double secs = argc > 1 ? atof(argv[1]) : 2.0, t0 = now();

        while (now() - t0 < secs) {
                alpha_work(200000);
                beta_work(100000);
        }
#ifdef PAD
        printf("%d\n", pad[argc]);
#endif
        return 0;
}
