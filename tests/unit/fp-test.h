/* SPDX-License-Identifier: MIT */
/*
 * The unit tests' few checking macros. Each check prints its failures with
 * file and line and counts; FP_TEST_DONE() prints the closing
 * "N passed, M failed" line and yields main's exit status. fp_test_run()
 * runs a shell command (the tests that build what they check).
 */
#pragma once

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static unsigned fp_test_passed, fp_test_failed;

#define FP_CHECK(cond)                                                                             \
        do {                                                                                       \
                if (cond) {                                                                        \
                        fp_test_passed++;                                                          \
                } else {                                                                           \
                        fp_test_failed++;                                                          \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
                }                                                                                  \
        } while (0)

#define FP_CHECK_EQ_INT(a, b)                                                                      \
        do {                                                                                       \
                long long fp_a_ = (long long)(a), fp_b_ = (long long)(b);                          \
                if (fp_a_ == fp_b_) {                                                              \
                        fp_test_passed++;                                                          \
                } else {                                                                           \
                        fp_test_failed++;                                                          \
                        fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__,        \
                                __LINE__, #a, #b, fp_a_, fp_b_);                                   \
                }                                                                                  \
        } while (0)

#define FP_CHECK_EQ_STR(a, b)                                                                      \
        do {                                                                                       \
                const char *fp_a_ = (a), *fp_b_ = (b);                                             \
                if (fp_a_ && fp_b_ && strcmp(fp_a_, fp_b_) == 0) {                                 \
                        fp_test_passed++;                                                          \
                } else {                                                                           \
                        fp_test_failed++;                                                          \
                        fprintf(stderr, "%s:%d: %s == %s failed: '%s' != '%s'\n", __FILE__,        \
                                __LINE__, #a, #b, fp_a_ ? fp_a_ : "(null)",                        \
                                fp_b_ ? fp_b_ : "(null)");                                         \
                }                                                                                  \
        } while (0)

/*
 * Runs a shell command made like printf's (at most 4 KiB), for tests that
 * build their subjects at run time; its status, said on stderr when not 0.
 */
static inline int fp_test_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int fp_test_run(const char *fmt, ...)
{
        char cmd[4096];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        int r = system(cmd);
        if (r != 0)
                fprintf(stderr, "command failed (%d): %s\n", r, cmd);
        return r;
}

/*
 * Where the file at path is mapped from its start (file offset 0) in process
 * pid, 0 when it is not: a shared object's load bias when its first segment
 * is linked at address 0.
 */
static inline uint64_t fp_test_map_start(pid_t pid, const char *path)
{
        char maps[64], line[1024], real[4096];
        uint64_t start = 0;
        FILE *f;

        if (!realpath(path, real))
                return 0;
        snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
        f = fopen(maps, "r");
        while (f && fgets(line, sizeof(line), f)) {
                char *p = strchr(line, '/');
                unsigned long long s, off;
                if (p && strncmp(p, real, strlen(real)) == 0 &&
                    sscanf(line, "%llx-%*[0-9a-f] %*s %llx", &s, &off) == 2 && off == 0) {
                        start = s;
                        break;
                }
        }
        if (f)
                fclose(f);
        return start;
}

#define FP_TEST_DONE()                                                                             \
        (printf("%u passed, %u failed\n", fp_test_passed, fp_test_failed), fp_test_failed ? 1 : 0)
