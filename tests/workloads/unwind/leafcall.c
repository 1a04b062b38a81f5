// SPDX-License-Identifier: MIT
/*
 * leafcall — one hot leaf, four known callers: the test subject of exact
 * callers (tests/integration/test-unwind.sh).
 *
 * caller_1 .. caller_4 call shared_leaf() in turn, each with its own
 * number of iterations per call (1, 2, 3 and 4 units), so the callers'
 * shares of the leaf's time are 10, 20, 30 and 40 %; the program measures
 * each caller's own CPU time around its calls (CLOCK_THREAD_CPUTIME_ID)
 * and writes the measured truth as JSON. shared_leaf is a true leaf (no
 * calls, no stack frame once optimized), the worst case for a
 * frame-pointer unwinder: a sample in it loses its caller.
 *
 * The leaf and the callers live in leafcall-lib.c; this file is the
 * driver, so the same code is built as one executable with and without
 * frame pointers, and as a PIE calling them in a shared library built
 * without frame pointers (see tests/CMakeLists.txt).
 *
 * Usage: leafcall [--seconds S] [--truth FILE] [--ready FILE] [--go FILE]
 */
#include "leafcall.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(clockid_t c)
{
        struct timespec ts;
        clock_gettime(c, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
                                             {"truth", required_argument, NULL, 't'},
                                             {"ready", required_argument, NULL, 'r'},
                                             {"go", required_argument, NULL, 'g'},
                                             {0}};
        double seconds = 4;
        const char *truth = NULL, *ready = NULL, *go = NULL;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        seconds = atof(optarg);
                        break;
                case 't':
                        truth = optarg;
                        break;
                case 'r':
                        ready = optarg;
                        break;
                case 'g':
                        go = optarg;
                        break;
                default:
                        fprintf(stderr,
                                "usage: leafcall [--seconds S] [--truth FILE] [--ready FILE] "
                                "[--go FILE]\n");
                        return 2;
                }
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (f)
                        fclose(f);
        }
        while (go && access(go, F_OK) != 0)
                usleep(1000);

        uint64_t spent[4] = {0}, end = now_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
        while (now_ns(CLOCK_MONOTONIC) < end)
                leafcall_round(spent);

        if (truth) {
                FILE *f = fopen(truth, "w");
                if (!f)
                        return 1;
                uint64_t total = spent[0] + spent[1] + spent[2] + spent[3];
                fprintf(f, "{\"callers\": {");
                for (int i = 0; i < 4; i++)
                        fprintf(f, "%s\"caller_%d\": %.6f", i ? ", " : "", i + 1,
                                total ? (double)spent[i] / (double)total : 0.0);
                fprintf(f, "}}\n");
                fclose(f);
        }
        printf("done\n");
        fflush(stdout);
        return 0;
}
