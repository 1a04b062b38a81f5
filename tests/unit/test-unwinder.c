/* SPDX-License-Identifier: MIT */
/*
 * The unwinder (agent/stacks/unwind.c) on this very process: a chain of
 * functions built without frame pointers (this file is compiled with
 * -fomit-frame-pointer, see tests/CMakeLists.txt) captures its registers
 * and a copy of its stack, and the unwinder, with the tables the agent's
 * own symbol cache compiles from /proc/self/exe and libc, must name every
 * caller up to main and libc's __libc_start_main. A copy cut short ends as
 * stack_copy_short; in dwarf mode a frame without CFI ends the walk, and in
 * JIT code known to keep no frame pointer too.
 */
#include "cfi.h"
#include "fp-test.h"
#include "maps.h"
#include "stackwalk.h"
#include "symbols.h"
#include "unwind.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE  __attribute__((noinline, noclone))
#define COPY_SIZE 16384

struct snap {
        struct fp_unwind_regs regs;
        uint64_t size;
        uint8_t stack[COPY_SIZE];
};

static struct snap snap;
static uint64_t stack_top;
static volatile int chain_sink;

/* Records rip (inside this function), rsp and rbp, and copies the stack above rsp. */
static NOINLINE void capture(struct snap *s)
{
        uint64_t ip, sp, bp;
        __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                         : "=r"(ip), "=r"(sp), "=r"(bp));
        s->regs = (struct fp_unwind_regs){ip, sp, bp};
        s->size = stack_top - sp < COPY_SIZE ? stack_top - sp : COPY_SIZE;
        memcpy(s->stack, (const void *)(uintptr_t)sp, s->size);
}

static NOINLINE void chain_c(int n)
{
        char buf[64];
        memset(buf, n, sizeof(buf));
        capture(&snap);
        chain_sink += buf[n & 63];
}

static NOINLINE void chain_b(int n)
{
        chain_c(n + 1);
        chain_sink++;
}

static NOINLINE void chain_a(int n)
{
        chain_b(n + 1);
        chain_sink++;
}

struct ctx {
        struct fp_maps *maps;
};

static void lookup(void *userdata, uint64_t ip, struct fp_unwind_code *ret)
{
        struct ctx *c = userdata;
        uint32_t idx = fp_maps_find(c->maps, ip);
        struct fp_mapping *x = fp_maps_get(c->maps, idx);
        struct fp_symtab *st;

        *ret = (struct fp_unwind_code){0};
        if (!x || x->kind != FP_MAPPING_FILE)
                return;
        ret->file_backed = true;
        st = fp_maps_symtab(c->maps, idx);
        if (st && fp_symtab_offset_to_vaddr(st, ip - x->start + x->pgoff, &ret->vaddr) == 0)
                ret->cfi = fp_symtab_cfi(st);
}

/* JIT code: anonymous, no tables. */
static void anon_code(void *userdata, uint64_t ip, struct fp_unwind_code *ret)
{
        (void)userdata;
        (void)ip;
        *ret = (struct fp_unwind_code){0};
}

/* JIT code compiled without frame pointers (a JVM without -XX:+PreserveFramePointer). */
static void anon_code_no_fp(void *userdata, uint64_t ip, struct fp_unwind_code *ret)
{
        (void)userdata;
        (void)ip;
        *ret = (struct fp_unwind_code){.no_frame_pointer = true};
}

static void no_tables(void *userdata, uint64_t ip, struct fp_unwind_code *ret)
{
        (void)userdata;
        (void)ip;
        *ret = (struct fp_unwind_code){.file_backed = true};
}

/* The function names of ips (return addresses looked up at ip - 1), joined with ';'. */
static void names(struct ctx *c, const uint64_t *ips, size_t n, char *out, size_t len)
{
        out[0] = 0;
        for (size_t i = 0; i < n; i++) {
                uint64_t a = i ? ips[i] - 1 : ips[i];
                const char *f = fp_maps_symbolize(c->maps, fp_maps_find(c->maps, a), a, NULL);
                size_t l = strlen(out);
                snprintf(out + l, len - l, "%s%s", i ? ";" : "", f ? f : "?");
        }
}

static uint64_t find_stack_top(void)
{
        char line[512];
        uint64_t lo, hi = 0;
        FILE *f = fopen("/proc/self/maps", "r");
        while (f && fgets(line, sizeof(line), f))
                if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
                        break;
        if (f)
                fclose(f);
        return hi;
}

int main(void)
{
        struct fp_symcache *cache = fp_symcache_new();
        struct ctx c = {fp_maps_new(getpid(), cache)};
        struct fp_unwind_result res;
        uint64_t ips[64];
        char buf[2048];

        stack_top = find_stack_top();
        FP_CHECK(stack_top != 0);
        chain_a(0);
        FP_CHECK_EQ_INT(fp_maps_load_proc(c.maps), 0);

        fp_unwind_user(FP_UNWIND_AUTO, &snap.regs, snap.stack, snap.size, lookup, &c, ips, NULL, 64,
                       &res);
        names(&c, ips, res.n, buf, sizeof(buf));
        printf("auto: %s (end %d, %u by CFI, %u by frame pointer)\n", buf, res.end, res.by_cfi,
               res.by_fp);
        FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_ROOT);
        FP_CHECK(strncmp(buf, "capture;chain_c;chain_b;chain_a;main;", 37) == 0);
        FP_CHECK(strstr(buf, "__libc_start_main") != NULL);
        FP_CHECK(res.by_cfi >= 6);

        /* What it read of the copy is all it needs: that much reaches the root, less does not. */
        uint64_t reach = res.reach;
        FP_CHECK(reach >= 64 && reach <= snap.size);
        fp_unwind_user(FP_UNWIND_AUTO, &snap.regs, snap.stack, reach, lookup, &c, ips, NULL, 64,
                       &res);
        FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_ROOT);
        FP_CHECK_EQ_INT(res.reach, reach);
        fp_unwind_user(FP_UNWIND_AUTO, &snap.regs, snap.stack, reach - 8, lookup, &c, ips, NULL, 64,
                       &res);
        FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_STACK_SHORT);
        printf("reach: %" PRIu64 " bytes of the copy\n", reach);

        fp_unwind_user(FP_UNWIND_DWARF, &snap.regs, snap.stack, snap.size, lookup, &c, ips, NULL,
                       64, &res);
        FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_ROOT);
        FP_CHECK_EQ_INT(res.by_fp, 0);

        /* A copy cut short: the walk stops, and says why. */
        fp_unwind_user(FP_UNWIND_AUTO, &snap.regs, snap.stack, 24, lookup, &c, ips, NULL, 64, &res);
        FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_STACK_SHORT);
        FP_CHECK(res.n >= 1 && res.n < 4);

        /* Room for three addresses: the deepest three, then "depth". */
        fp_unwind_user(FP_UNWIND_AUTO, &snap.regs, snap.stack, snap.size, lookup, &c, ips, NULL, 3,
                       &res);
        FP_CHECK_EQ_INT(res.n, 3);
        FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_DEPTH);

        /*
         * A frame pointer followed to a zero return address: the root in a
         * file built for the chain, not in JIT code that may keep no frame
         * pointer (a JVM without -XX:+PreserveFramePointer: rbp is any
         * register there), where the stack is cut, not said to be whole.
         */
        {
                const uint64_t words[4] = {0, 0, 0x7ffd00000100, 0}; /* [bp]: a bp, [bp+8]: 0 */
                const struct fp_unwind_regs fr = {
                    .ip = 0x7f0000001000, .sp = 0x7ffd00000000, .bp = 0x7ffd00000010};
                fp_unwind_user(FP_UNWIND_AUTO, &fr, (const uint8_t *)words, sizeof(words),
                               anon_code, &c, ips, NULL, 64, &res);
                FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_FAILED);
                fp_unwind_user(FP_UNWIND_AUTO, &fr, (const uint8_t *)words, sizeof(words),
                               no_tables, &c, ips, NULL, 64, &res);
                FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_ROOT);
        }
        /*
         * JIT code known to keep no frame pointer: the walk ends at it, its
         * frame kept, and says why; rbp (a good-looking chain here) is not
         * followed to a caller.
         */
        {
                const uint64_t words[6] = {0, 0, 0x7ffd00000020, 0x7f0000002000, 0, 0};
                const struct fp_unwind_regs fr = {
                    .ip = 0x7f0000001000, .sp = 0x7ffd00000000, .bp = 0x7ffd00000010};
                fp_unwind_user(FP_UNWIND_AUTO, &fr, (const uint8_t *)words, sizeof(words),
                               anon_code, &c, ips, NULL, 64, &res);
                FP_CHECK(res.n >= 2 && ips[1] == 0x7f0000002000); /* followed, without the flag */
                fp_unwind_user(FP_UNWIND_AUTO, &fr, (const uint8_t *)words, sizeof(words),
                               anon_code_no_fp, &c, ips, NULL, 64, &res);
                FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_NO_FP);
                FP_CHECK_EQ_INT(res.n, 1);
                FP_CHECK(ips[0] == 0x7f0000001000);
        }

        /* No tables at all: dwarf gives up at once, after the leaf. */
        fp_unwind_user(FP_UNWIND_DWARF, &snap.regs, snap.stack, snap.size, no_tables, &c, ips, NULL,
                       64, &res);
        FP_CHECK_EQ_INT(res.end, FP_UNWIND_END_FAILED);
        FP_CHECK_EQ_INT(res.n, 1);
        /*
         * The copy's size, fitted: kept while learning, shrunk to half as
         * much again plus 1 KiB over the deepest stack, doubled on a short
         * sample (up to the bound), a later shrink waiting twice as long.
         */
        struct fp_stackfit fit = {.reach_max = 1000, .roots = FP_STACKFIT_LEARN - 1};
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 16384), 16384);
        fit.roots++;
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 16384), 2560); /* 1000 + 500 + 1024, up to 512s */
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 3072), 3072);  /* a quarter is not saved */
        fit.reach_max = 100;
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 16384), FP_STACKFIT_MIN);
        fit.reach_max = 30000;
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 16384), 16384);
        fit = (struct fp_stackfit){.reach_max = 1500, .roots = 5000, .shorts = 1};
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 2560), 5120);
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 20480), FP_STACKFIT_MAX);
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, FP_STACKFIT_MAX), FP_STACKFIT_MAX);
        fit = (struct fp_stackfit){.reach_max = 9000, .shorts = 1};
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 2560), 14848); /* the deepest seen, more than 2x */
        fit =
            (struct fp_stackfit){.reach_max = 1000, .roots = 2 * FP_STACKFIT_LEARN - 1, .grows = 1};
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 16384), 16384);
        fit.roots++;
        FP_CHECK_EQ_INT(fp_stackfit_size(&fit, 16384), 2560);

        unsigned mode;
        FP_CHECK_EQ_INT(fp_unwind_mode_parse("dwarf", &mode), 0);
        FP_CHECK_EQ_INT(mode, FP_UNWIND_DWARF);
        FP_CHECK(fp_unwind_mode_parse("frames", &mode) < 0);
        FP_CHECK(strcmp(fp_unwind_mode_name(FP_UNWIND_AUTO), "auto") == 0);

        fp_maps_free(c.maps);
        fp_symcache_free(cache);
        return FP_TEST_DONE();
}
