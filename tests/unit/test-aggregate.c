/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the sample aggregator (agent/stacks/aggregate.c): identical
 * stacks of one thread merge, anything that differs (a frame, the thread,
 * the maps epoch, the synthetic kernel flag) does not, the resolve
 * callback runs once per distinct stack, a large number of distinct
 * stacks survives the table's growth intact, and a table with counters
 * sums each counter per entry (saturating, never wrapping).
 */
#include "aggregate.h"
#include "fp-test.h"

#include <errno.h>
#include <stdlib.h>

static unsigned resolve_calls;

static void resolve(void *userdata, struct fp_frame *frames, uint32_t n)
{
        (void)userdata;
        resolve_calls++;
        for (uint32_t i = 0; i < n; i++)
                frames[i].mapping = 7;
}

static void test_merge(void)
{
        struct fp_agg *a = fp_agg_new(0);
        struct fp_frame s1[3] = {{.addr = 0x1000}, {.addr = 0x2000}, {.addr = 0x3000}};
        struct fp_frame s2[3] = {{.addr = 0x1000}, {.addr = 0x2001}, {.addr = 0x3000}};
        struct fp_frame k[2] = {{.flags = FP_FRAME_KERNEL_TIME}, {.addr = 0x1000}};
        struct fp_frame u[2] = {{.addr = 0}, {.addr = 0x1000}};

        resolve_calls = 0;
        FP_CHECK(a != NULL);
        for (int i = 0; i < 10; i++)
                FP_CHECK_EQ_INT(fp_agg_add(a, 100, 0, s1, 3, 1000, NULL, resolve, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_n_entries(a), 1);
        FP_CHECK_EQ_INT(resolve_calls, 1);
        const struct fp_agg_entry *e = fp_agg_entry(a, 0);
        FP_CHECK_EQ_INT(e->count, 10);
        FP_CHECK_EQ_INT(e->value, 10000);
        FP_CHECK_EQ_INT(e->frames[2].mapping, 7);
        FP_CHECK_EQ_INT(e->frames[1].addr, 0x2000);

        /* One differing frame, another thread, another epoch: separate entries. */
        FP_CHECK_EQ_INT(fp_agg_add(a, 100, 0, s2, 3, 1, NULL, resolve, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 101, 0, s1, 3, 1, NULL, resolve, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 100, 1, s1, 3, 1, NULL, resolve, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 100, 0, s1, 2, 1, NULL, resolve, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_n_entries(a), 5);
        /* The kernel-time marker differs from a frame at address 0. */
        FP_CHECK_EQ_INT(fp_agg_add(a, 100, 0, k, 2, 1, NULL, resolve, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 100, 0, u, 2, 1, NULL, resolve, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_n_entries(a), 7);
        FP_CHECK_EQ_INT(fp_agg_total_count(a), 16);
        FP_CHECK_EQ_INT(resolve_calls, 7);
        fp_agg_free(a);
        fp_agg_free(NULL);
}

static void test_many(void)
{
        struct fp_agg *a = fp_agg_new(0);
        const unsigned n = 50000;
        uint64_t sum = 0;

        for (unsigned round = 0; round < 3; round++)
                for (unsigned i = 0; i < n; i++) {
                        struct fp_frame f[4] = {{.addr = i},
                                                {.addr = i * 7 + 1},
                                                {.addr = 0x400000},
                                                {.addr = round == 0 ? 1 : 1}};
                        if (fp_agg_add(a, (pid_t)(i % 13), 0, f, 4, i, NULL, NULL, NULL) < 0)
                                FP_CHECK(!"fp_agg_add failed");
                }
        FP_CHECK_EQ_INT(fp_agg_n_entries(a), n);
        FP_CHECK_EQ_INT(fp_agg_total_count(a), 3 * n);
        for (size_t i = 0; i < fp_agg_n_entries(a); i++) {
                const struct fp_agg_entry *e = fp_agg_entry(a, i);
                if (e->count != 3 || e->value != 3 * e->frames[0].addr)
                        FP_CHECK(!"entry count or value wrong");
                sum += e->count;
        }
        FP_CHECK_EQ_INT(sum, 3 * n);
        FP_CHECK(fp_agg_entry(a, n) == NULL);
        fp_agg_free(a);
}

static void test_counters(void)
{
        struct fp_agg *a = fp_agg_new(2);
        struct fp_frame s1[2] = {{.addr = 0x1000}, {.addr = 0x2000}};
        struct fp_frame s2[1] = {{.addr = 0x5000}};
        uint64_t c1[2] = {10, 0}, c2[2] = {5, 3}, big[2] = {UINT64_MAX - 1, 1};

        FP_CHECK(fp_agg_new(65) == NULL);
        FP_CHECK_EQ_INT(fp_agg_n_counters(a), 2);
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, s1, 2, 100, c1, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, s1, 2, 100, c2, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, s2, 1, 100, NULL, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_n_entries(a), 2);
        const struct fp_agg_entry *e = fp_agg_entry(a, 0);
        FP_CHECK_EQ_INT(e->count, 2);
        FP_CHECK_EQ_INT(e->counters[0], 15);
        FP_CHECK_EQ_INT(e->counters[1], 3);
        FP_CHECK_EQ_INT(e->frames[1].addr, 0x2000); /* counters do not overlap the frames */
        e = fp_agg_entry(a, 1);
        FP_CHECK_EQ_INT(e->counters[0], 0);
        FP_CHECK_EQ_INT(e->counters[1], 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, s2, 1, 100, big, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, s2, 1, 100, big, NULL, NULL), 0);
        FP_CHECK(e->counters[0] == UINT64_MAX);
        FP_CHECK_EQ_INT(e->counters[1], 2);
        fp_agg_free(a);
}

/* A limited table refuses a new entry past its limit and keeps adding to the ones it has. */
static void test_limit(void)
{
        struct fp_agg *a = fp_agg_new(0);
        struct fp_frame f[1] = {{.addr = 0}};

        fp_agg_set_limit(a, 3);
        for (uint64_t i = 0; i < 3; i++) {
                f[0].addr = 0x1000 + i;
                FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, f, 1, 1, NULL, NULL, NULL), 0);
        }
        f[0].addr = 0x2000;
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, f, 1, 1, NULL, NULL, NULL), -ENOSPC);
        FP_CHECK_EQ_INT(fp_agg_n_entries(a), 3);
        f[0].addr = 0x1001;
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, f, 1, 5, NULL, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_entry(a, 1)->count, 2);
        FP_CHECK_EQ_INT(fp_agg_entry(a, 1)->value, 6);
        /* The stand-in for what did not fit gets in, once per thread. */
        struct fp_frame full[1] = {{.flags = FP_FRAME_OVERFLOW}};
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, full, 1, 1, NULL, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 1, 0, full, 1, 1, NULL, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_add(a, 2, 0, full, 1, 1, NULL, NULL, NULL), 0);
        FP_CHECK_EQ_INT(fp_agg_n_entries(a), 5);
        fp_agg_free(a);
}

int main(void)
{
        test_merge();
        test_many();
        test_counters();
        test_limit();
        return FP_TEST_DONE();
}
