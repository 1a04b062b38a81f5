/* SPDX-License-Identifier: MIT */
/*
 * The executable mappings of a process (agent/stacks/maps.c), on this process:
 * /proc/self/maps gives the live set (this binary, libc, the vdso);
 * MMAP2-style additions that overlap a live mapping advance the epoch and
 * displace it from lookups while its index stays valid (stacks already
 * resolved keep their meaning); kernel addresses map to the kernel;
 * symbols load lazily through the shared cache; a walker's frames outside
 * every mapping re-read the maps less and less often, until one is found.
 */
#include "fp-test.h"
#include "maps.h"
#include "samplestats.h"
#include "stackwalk.h"
#include "symbols.h"
#include "util.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) int maps_probe(int x);
__attribute__((noinline)) int maps_probe(int x)
{
        return x * 3 + 1;
}

int main(void)
{
        struct fp_symcache *cache = fp_symcache_new();
        struct fp_maps *m = fp_maps_new(getpid(), cache);
        uint64_t self = (uint64_t)(uintptr_t)&maps_probe, off;

        FP_CHECK(m != NULL);
        FP_CHECK_EQ_INT(fp_maps_load_proc(m), 0);
        unsigned epoch0 = fp_maps_epoch(m);
        uint32_t idx = fp_maps_find(m, self);
        FP_CHECK(idx != 0);
        struct fp_mapping *x = fp_maps_get(m, idx);
        FP_CHECK(x && x->kind == FP_MAPPING_FILE && strstr(x->path, "test-maps") != NULL);
        FP_CHECK(x->start <= self && self < x->end);
        FP_CHECK_EQ_STR(fp_maps_symbolize(m, idx, self + 2, &off), "maps_probe");
        FP_CHECK_EQ_INT(off, self + 2 - x->start + x->pgoff);
        FP_CHECK(fp_maps_symtab(m, idx) != NULL);
        FP_CHECK(fp_symtab_cfi(fp_maps_symtab(m, idx)) != NULL);

        /* libc and the vdso are there too, each of its kind. */
        uint32_t libc = fp_maps_find(m, (uint64_t)(uintptr_t)&getpid);
        FP_CHECK(libc != 0 && libc != idx);
        FP_CHECK(strstr(fp_maps_get(m, libc)->path, "libc") != NULL);
        bool have_vdso = false;
        for (uint32_t i = 1; i <= fp_maps_count(m); i++)
                if (fp_maps_get(m, i)->kind == FP_MAPPING_VDSO)
                        have_vdso = true;
        FP_CHECK(have_vdso);

        /* A kernel address is the kernel's; an unmapped one nobody's. */
        uint32_t k = fp_maps_find(m, 0xffffffff81000000ULL);
        FP_CHECK(k != 0 && fp_maps_get(m, k)->kind == FP_MAPPING_KERNEL);
        FP_CHECK_EQ_INT(fp_maps_find(m, 0x1000), 0);

        /* Anonymous executable memory (JIT) appears after a reload, as anonymous. */
        void *jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        FP_CHECK(jit != MAP_FAILED);
        FP_CHECK_EQ_INT(fp_maps_load_proc(m), 0);
        uint32_t a = fp_maps_find(m, (uint64_t)(uintptr_t)jit + 10);
        FP_CHECK(a != 0 && fp_maps_get(m, a)->kind == FP_MAPPING_ANON);
        FP_CHECK(fp_maps_symbolize(m, a, (uint64_t)(uintptr_t)jit + 10, NULL) == NULL);

        /* A new mapping over the binary's text (as an MMAP2 record would say). */
        size_t before = fp_maps_count(m);
        FP_CHECK_EQ_INT(fp_maps_add(m, x->start, 4096, 0, 0, 0, "/nonexistent/other.so"), 0);
        FP_CHECK(fp_maps_epoch(m) != epoch0);
        FP_CHECK_EQ_INT(fp_maps_count(m), before + 1);
        uint32_t now = fp_maps_find(m, x->start + 16);
        FP_CHECK(now != idx && strcmp(fp_maps_get(m, now)->path, "/nonexistent/other.so") == 0);
        /* The old index still names the old mapping, with its symbols. */
        FP_CHECK(strstr(fp_maps_get(m, idx)->path, "test-maps") != NULL);
        FP_CHECK_EQ_STR(fp_maps_symbolize(m, idx, self, NULL), "maps_probe");
        FP_CHECK(fp_maps_symbolize(m, now, x->start + 16, NULL) == NULL); /* no such file */

        munmap(jit, 4096);
        fp_maps_free(m);

        /*
         * A process that maps code without end (a JIT mapping and unmapping):
         * re-adding a known mapping finds it, and the history stops at
         * FP_MAPS_MAX instead of growing the agent.
         */
        struct fp_maps *h = fp_maps_new(getpid(), cache);
        for (uint64_t i = 0; i < FP_MAPS_MAX; i++)
                if (fp_maps_add(h, 0x10000000 + (i << 12), 4096, 0, 0, 0, "//anon") != 0)
                        FP_CHECK(!"adding a mapping failed");
        FP_CHECK_EQ_INT(fp_maps_count(h), FP_MAPS_MAX);
        FP_CHECK_EQ_INT(fp_maps_add(h, 0x10000000 + (7 << 12), 4096, 0, 0, 0, "//anon"), 0);
        FP_CHECK_EQ_INT(fp_maps_count(h), FP_MAPS_MAX);
        FP_CHECK_EQ_INT(fp_maps_add(h, 0x90000000, 4096, 0, 0, 0, "//anon"), -ENOSPC);
        FP_CHECK_EQ_INT(fp_maps_count(h), FP_MAPS_MAX);
        fp_maps_free(h);

        /*
         * Frames that are no code's (as frame pointers read from a binary built
         * without them give) re-read the maps at 0, 0.2, 0.6 and 1.4 s, not each
         * 100 ms (16 times in 1.6 s). A re-read that finds a mapping not known
         * before, or the frame's, makes the wait short again.
         */
        struct fp_maps *wm = fp_maps_new(getpid(), cache);
        struct fp_target_stats st = {0};
        struct fp_stackwalk w = {.maps = wm, .st = &st, .may_reload = true};
        uint64_t t0 = fp_now_ns(CLOCK_MONOTONIC);
        while (fp_now_ns(CLOCK_MONOTONIC) - t0 < 1600000000ULL) {
                struct fp_frame f = {.addr = 0x1000};
                fp_stackwalk_resolve(&w, &f, 1);
                if (f.mapping)
                        FP_CHECK(!"an unmapped address resolved");
                usleep(5000);
        }
        FP_CHECK(w.maps_reloads >= 2 && w.maps_reloads <= 5);
        FP_CHECK(w.maps_reload_gap_ns >= 4 * FP_MAPS_RELOAD_GAP_MIN_NS);
        FP_CHECK(st.unresolved > w.maps_reloads);
        /* New code (a JIT's) is seen by the next re-read, whichever frame asked. */
        void *code = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        FP_CHECK(code != MAP_FAILED);
        uint64_t reloads = w.maps_reloads;
        t0 = fp_now_ns(CLOCK_MONOTONIC);
        while (fp_now_ns(CLOCK_MONOTONIC) - t0 < 3 * FP_MAPS_RELOAD_GAP_MAX_NS / 10 &&
               w.maps_reloads == reloads) {
                struct fp_frame f = {.addr = 0x1000};
                fp_stackwalk_resolve(&w, &f, 1);
                usleep(5000);
        }
        FP_CHECK_EQ_INT(w.maps_reloads, reloads + 1);
        FP_CHECK_EQ_INT(w.maps_reload_gap_ns, FP_MAPS_RELOAD_GAP_MIN_NS);
        struct fp_frame f = {.addr = (uint64_t)(uintptr_t)code + 8};
        fp_stackwalk_resolve(&w, &f, 1);
        FP_CHECK(f.mapping != 0 && fp_maps_get(wm, f.mapping)->kind == FP_MAPPING_ANON);
        FP_CHECK_EQ_INT(w.maps_reloads, reloads + 1);
        /* The frame's own mapping, after the wait has grown again. */
        t0 = fp_now_ns(CLOCK_MONOTONIC);
        while (fp_now_ns(CLOCK_MONOTONIC) - t0 < 3000000000ULL &&
               w.maps_reload_gap_ns < 4 * FP_MAPS_RELOAD_GAP_MIN_NS) {
                struct fp_frame g = {.addr = 0x1000};
                fp_stackwalk_resolve(&w, &g, 1);
                usleep(5000);
        }
        FP_CHECK(w.maps_reload_gap_ns >= 4 * FP_MAPS_RELOAD_GAP_MIN_NS);
        void *more = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        FP_CHECK(more != MAP_FAILED);
        f = (struct fp_frame){.addr = (uint64_t)(uintptr_t)more + 8};
        t0 = fp_now_ns(CLOCK_MONOTONIC);
        while (fp_now_ns(CLOCK_MONOTONIC) - t0 < 3 * FP_MAPS_RELOAD_GAP_MAX_NS / 10 && !f.mapping) {
                fp_stackwalk_resolve(&w, &f, 1);
                usleep(5000);
        }
        FP_CHECK(f.mapping != 0 && fp_maps_get(wm, f.mapping)->kind == FP_MAPPING_ANON);
        FP_CHECK_EQ_INT(w.maps_reload_gap_ns, FP_MAPS_RELOAD_GAP_MIN_NS);
        munmap(more, 4096);
        munmap(code, 4096);
        fp_maps_free(wm);
        fp_symcache_free(cache);
        return FP_TEST_DONE();
}
