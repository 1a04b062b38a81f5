/* SPDX-License-Identifier: MIT */
/*
 * A shared library the "symbolic" workload loads with dlopen() after it is
 * already being profiled, so the agent must learn of it from an MMAP2
 * record. plugin_spin() is exported (in .dynsym, so it resolves even in
 * the stripped copy); plugin_hidden_work() is not, so in the stripped copy
 * its frames can only be shown as "libfpplugin-stripped.so+0xOFFSET".
 */
#include <stdint.h>

#ifndef FP_PLUGIN_VARIANT
#define FP_PLUGIN_VARIANT 1
#endif

uint64_t plugin_spin(uint64_t n);

static __attribute__((noinline)) uint64_t plugin_hidden_work(uint64_t n)
{
        volatile uint64_t x = 1;
        for (uint64_t i = 0; i < n; i++)
                x = x * 6364136223846793005ULL + i;
        return x;
}

__attribute__((noinline)) uint64_t plugin_spin(uint64_t n)
{
        return plugin_hidden_work(n) + FP_PLUGIN_VARIANT;
}
