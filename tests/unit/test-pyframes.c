/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of how Python stack records meet their samples and are
 * spliced into the native stacks (agent/runtimes/pyframes.c), with records
 * made here as the BPF program writes them:
 *   - samples read out of time order (the host tier reads its CPUs' rings
 *     one after another) each find their own record;
 *   - a sample whose record is missing takes no neighbour's, and is
 *     counted "early" when it was taken before the process was read;
 *   - each evaluation's Python frames go just leafward of its
 *     _PyEval_EvalFrameDefault frame, the leftovers at the root end before
 *     [truncated], and a stack past its room is cut with [truncated];
 *   - a Ruby's frames take the place of the frame rb_vm_exec called (its
 *     loop, which has no symbol);
 *   - a record no sample took goes once a newer one is 2 s later, counted.
 * The code objects' addresses are not this process's code objects: their
 * frames stay unnamed ("[python]"), which is counted too.
 */
#include "pyframes.h"
#include "fp-test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define EVAL_LO 0x1000u
#define EVAL_HI 0x2000u
#define MS      1000000ULL

static struct fp_pyframes *new_frames(void)
{
        struct fp_py_binary b = {.major = 3,
                                 .minor = 11,
                                 .micro = 0,
                                 .eval_start = EVAL_LO,
                                 .eval_end = EVAL_HI,
                                 .layout = fp_py_layout_of(11)};
        return fp_pyframes_new(getpid(), &b, 0);
}

/* A record of tid at time: n frames, code addresses base + i, ENTRY where entry has bit i. */
static void record(struct fp_pyframes *p, pid_t tid, uint64_t time, uint32_t n, uint64_t base,
                   uint32_t entry)
{
        static struct fp_pystack_record r;

        memset(&r, 0, sizeof(r));
        r.tid = (uint32_t)tid;
        r.tgid = (uint32_t)getpid();
        r.time_ns = time;
        r.status = FP_PYSTACK_OK;
        r.n_frames = n;
        for (uint32_t i = 0; i < n; i++)
                r.frames[i] = (struct fp_pystack_frame){
                    .code = base + i, .instr = 0, .flags = (entry >> i & 1) ? FP_PYSTACK_ENTRY : 0};
        fp_pyframes_record(p, &r);
}

static struct fp_frame native(uint64_t addr)
{
        return (struct fp_frame){.addr = addr, .mapping = 1};
}

static bool is_python(const struct fp_frame *f)
{
        return (f->flags & FP_FRAME_PYTHON) != 0;
}

/* The frames as letters, leaf first: N native, E eval loop, P Python, T [truncated]. */
static void shape(const struct fp_frame *f, uint32_t n, char *out)
{
        for (uint32_t i = 0; i < n; i++)
                out[i] = is_python(&f[i])                              ? 'P'
                         : (f[i].flags & FP_FRAME_TRUNCATED)           ? 'T'
                         : f[i].addr >= EVAL_LO && f[i].addr < EVAL_HI ? 'E'
                                                                       : 'N';
        out[n] = '\0';
}

static void test_out_of_order(void)
{
        struct fp_pyframes *p = new_frames();
        struct fp_pyframes_stats st;
        struct fp_frame f[8];
        char s[16];

        FP_CHECK(p != NULL);
        fp_pyframes_reading_since(p, 1 * MS);
        /* Three samples of thread 7, their records 5 us after each (as the kernel stamps). */
        for (int i = 1; i <= 3; i++)
                record(p, 7, (uint64_t)i * 10 * MS + 5000, 1, 0x100 * (uint64_t)i, 1);
        /* Read as the host tier may: the last first. */
        const int order[3] = {3, 1, 2};
        for (int k = 0; k < 3; k++) {
                f[0] = native(0x500);
                f[1] = native(EVAL_LO + 0x10);
                f[2] = native(0x600);
                uint32_t n = fp_pyframes_merge(p, 7, (uint64_t)order[k] * 10 * MS, f, 3, 8);
                shape(f, n, s);
                FP_CHECK_EQ_STR(s, "NPEN");
        }
        fp_pyframes_stats(p, &st);
        FP_CHECK_EQ_INT(st.samples, 3);
        FP_CHECK_EQ_INT(st.no_record, 0);
        FP_CHECK_EQ_INT(st.records_unmatched, 0);
        /* Each took its own: another thread's sample at the same time takes none. */
        f[0] = native(EVAL_LO);
        FP_CHECK_EQ_INT(fp_pyframes_merge(p, 8, 10 * MS, f, 1, 8), 1);
        fp_pyframes_free(p);
}

static void test_missing_record(void)
{
        struct fp_pyframes *p = new_frames();
        struct fp_pyframes_stats st;
        struct fp_frame f[4] = {native(EVAL_LO)};

        fp_pyframes_reading_since(p, 100 * MS);
        record(p, 7, 100 * MS + 1000, 1, 0x100, 1);
        record(p, 7, 102 * MS + 1000, 1, 0x200, 1);
        /* A sample 1 ms after one record and 1 ms before the next: its own was lost. */
        FP_CHECK_EQ_INT(fp_pyframes_merge(p, 7, 101 * MS, f, 1, 4), 1);
        /* One taken before the process was read: early, not missing. */
        FP_CHECK_EQ_INT(fp_pyframes_merge(p, 7, 99 * MS, f, 1, 4), 1);
        fp_pyframes_stats(p, &st);
        FP_CHECK_EQ_INT(st.no_record, 1);
        FP_CHECK_EQ_INT(st.early, 1);
        FP_CHECK_EQ_INT(st.samples, 0);
        /* The two records still wait for their own samples. */
        FP_CHECK_EQ_INT(fp_pyframes_merge(p, 7, 100 * MS, f, 1, 4), 2);
        FP_CHECK_EQ_INT(fp_pyframes_merge(p, 7, 102 * MS, f, 1, 4), 2);
        fp_pyframes_free(p);
}

static void test_splice(void)
{
        struct fp_pyframes *p = new_frames();
        struct fp_frame f[16];
        char s[32];
        uint32_t n;

        /*
         * Native, leaf first: a C function, an eval, a C call, an eval, main.
         * Python, innermost first: two frames of the inner evaluation (the
         * second its entry), then the outer evaluation's one.
         */
        record(p, 7, 10 * MS, 3, 0x100, 0x2 | 0x4);
        f[0] = native(0x500);
        f[1] = native(EVAL_LO + 1);
        f[2] = native(0x600);
        f[3] = native(EVAL_LO + 2);
        f[4] = native(0x700);
        n = fp_pyframes_merge(p, 7, 10 * MS, f, 5, 16);
        shape(f, n, s);
        FP_CHECK_EQ_STR(s, "NPPENPEN");
        /* The innermost Python frame is the leafmost: entries are in record order. */
        FP_CHECK(f[1].addr >> 32 != f[2].addr >> 32);

        /* A native stack cut short: what has no eval frame goes at the root end. */
        record(p, 7, 20 * MS, 3, 0x100, 0x2 | 0x4);
        f[0] = native(0x500);
        f[1] = native(EVAL_LO + 1);
        f[2] = (struct fp_frame){.flags = FP_FRAME_TRUNCATED};
        n = fp_pyframes_merge(p, 7, 20 * MS, f, 3, 16);
        shape(f, n, s);
        FP_CHECK_EQ_STR(s, "NPPEPT");

        /* No room: cut at max, the last frame says so. */
        record(p, 7, 30 * MS, 3, 0x100, 0x4);
        f[0] = native(0x500);
        f[1] = native(EVAL_LO + 1);
        f[2] = native(0x700);
        n = fp_pyframes_merge(p, 7, 30 * MS, f, 3, 4);
        shape(f, n, s);
        FP_CHECK_EQ_STR(s, "NPPT");

        struct fp_pyframes_stats st;
        fp_pyframes_stats(p, &st);
        FP_CHECK_EQ_INT(st.samples, 3);
        FP_CHECK(st.frames_unnamed > 0); /* not this process's code objects */
        fp_pyframes_free(p);
}

/*
 * Ruby's: each group goes in place of the frame rb_vm_exec (the range)
 * called, its unnamed loop; C functions' frames (Array#each here) lie with
 * the Ruby frames of the evaluation that called them.
 */
static void test_splice_ruby(void)
{
        struct fp_ruby_binary b = {.major = 3,
                                   .minor = 1,
                                   .eval_start = EVAL_LO,
                                   .eval_end = EVAL_HI,
                                   .layout = fp_ruby_layout_of(3, 1)};
        struct fp_pyframes *p = fp_pyframes_new_ruby(getpid(), &b, 0);
        struct fp_frame f[16];
        char s[32];

        FP_CHECK(p != NULL);
        FP_CHECK_EQ_INT(fp_pyframes_kind(p), FP_PYSTACK_RUBY);
        /*
         * Native, leaf first: the inner loop, rb_vm_exec, the C function
         * (rb_ary_each), the outer loop, rb_vm_exec, main. Ruby, innermost
         * first: a block (an entry: called from C), Array#each (NATIVE), the
         * method and <main> (an entry).
         */
        record(p, 7, 10 * MS, 4, 0x100, 0x1 | 0x8);
        f[0] = native(0x400);
        f[1] = native(EVAL_LO + 1);
        f[2] = native(0x600);
        f[3] = native(0x480);
        f[4] = native(EVAL_LO + 2);
        f[5] = native(0x700);
        uint32_t n = fp_pyframes_merge(p, 7, 10 * MS, f, 6, 16);
        shape(f, n, s);
        FP_CHECK_EQ_STR(s, "PENPPPEN");
        FP_CHECK_EQ_INT(f[2].addr, 0x600);

        /* A leaf in rb_vm_exec itself: no loop frame to take the place of; the frames at the root.
         */
        record(p, 7, 20 * MS, 1, 0x100, 0x1);
        f[0] = native(EVAL_LO + 3);
        f[1] = native(0x700);
        n = fp_pyframes_merge(p, 7, 20 * MS, f, 2, 16);
        shape(f, n, s);
        FP_CHECK_EQ_STR(s, "ENP");
        fp_pyframes_free(p);
}

/*
 * Perl's: each group goes leafward of its run loop's frame, which stays
 * (named: Perl_runops_standard, or Perl_runops_debug in the second range);
 * a sort's comparator runs in a run loop of its own, below pp_sort.
 */
static void test_splice_perl(void)
{
        struct fp_perl_binary b = {.revision = 5,
                                   .version = 36,
                                   .eval_start = EVAL_LO,
                                   .eval_end = EVAL_HI,
                                   .debug_start = 0x3000,
                                   .debug_end = 0x3100,
                                   .layout = fp_perl_layout_of(5, 36)};
        struct fp_pyframes *p = fp_pyframes_new_perl(getpid(), &b, 0);
        struct fp_frame f[16];
        char s[32];

        FP_CHECK(p != NULL);
        FP_CHECK_EQ_INT(fp_pyframes_kind(p), FP_PYSTACK_PERL);
        /*
         * Native, leaf first: an op, the comparator's Perl_runops_standard,
         * sortsv, pp_sort, the program's Perl_runops_debug, main. Perl,
         * innermost first: the comparator's sub (an entry: called from C),
         * the sub that sorted, the main program (an entry).
         */
        record(p, 7, 10 * MS, 3, 0x100, 0x1 | 0x4);
        f[0] = native(0x500);
        f[1] = native(EVAL_LO + 1);
        f[2] = native(0x600);
        f[3] = native(0x650);
        f[4] = native(0x3010);
        f[5] = native(0x700);
        uint32_t n = fp_pyframes_merge(p, 7, 10 * MS, f, 6, 16);
        shape(f, n, s);
        FP_CHECK_EQ_STR(s, "NPENNPPNN");
        FP_CHECK_EQ_INT(f[7].addr, 0x3010);
        FP_CHECK_EQ_INT(f[3].addr, 0x600);
        FP_CHECK_EQ_STR(fp_pyframes_kinds[FP_PYSTACK_PERL].key, "perl");
        fp_pyframes_free(p);
}

static void test_stale(void)
{
        struct fp_pyframes *p = new_frames();
        struct fp_pyframes_stats st;
        struct fp_frame f[4] = {native(EVAL_LO)};

        record(p, 7, 10 * MS, 1, 0x100, 1);
        record(p, 7, 3000 * MS, 1, 0x200, 1); /* 3 s on: the first has no sample to come */
        fp_pyframes_stats(p, &st);
        FP_CHECK_EQ_INT(st.records_unmatched, 1);
        FP_CHECK_EQ_INT(fp_pyframes_merge(p, 7, 10 * MS, f, 1, 4), 1);
        FP_CHECK_EQ_INT(fp_pyframes_merge(p, 7, 3000 * MS, f, 1, 4), 2);
        fp_pyframes_free(p);
}

int main(void)
{
        test_out_of_order();
        test_missing_record();
        test_splice();
        test_splice_ruby();
        test_splice_perl();
        test_stale();
        return FP_TEST_DONE();
}
