/* SPDX-License-Identifier: MIT */
/*
 * The verifier's work on each of the agent's BPF programs, as this kernel
 * counts it (log level 4: "processed N insns"): at most 100,000
 * instructions a program, a tenth of the kernel's limit.
 *
 * The kernel checks a program at every load, on the agent's loop: the
 * first target's start loads the interpreters' stack walk (pystack), the
 * first --off-cpu the off-CPU programs with the same walks inside. When the
 * walks' steps were inlined in their bpf_loop callbacks, the verifier went
 * over each step again with the values of the last, 440,000 instructions
 * a program: 0.9 s for pystack, 2.9 s for the off-CPU object, the agent's
 * loop held all along (a target's start took 1 s, 4 s with --off-cpu, and
 * 100,000 more instructions would have passed the limit). Counted, not
 * timed: the count is the same on a busy machine.
 *
 * Skipped (exit 0, said) where BPF programs cannot be loaded.
 */
#include "fp-test.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef FP_HAVE_BPF
#include "offcpu.skel.h"
#include "pystack.skel.h"
#include "tracker.skel.h"

#define MAX_PROGS 8
#define LOG_BYTES (64 * 1024)
#define BUDGET    100000

static char logs[MAX_PROGS][LOG_BYTES];

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
        (void)level;
        (void)fmt;
        (void)ap;
        return 0;
}

/* Asks the kernel for its statistics on each of obj's programs. */
static void want_stats(struct bpf_object *obj)
{
        struct bpf_program *p;
        int i = 0;

        bpf_object__for_each_program(p, obj)
        {
                if (i == MAX_PROGS)
                        break;
                logs[i][0] = 0;
                bpf_program__set_log_level(p, 4);
                bpf_program__set_log_buf(p, logs[i], LOG_BYTES);
                i++;
        }
}

static double since(const struct timespec *a)
{
        struct timespec b;

        clock_gettime(CLOCK_MONOTONIC, &b);
        return (double)(b.tv_sec - a->tv_sec) + (double)(b.tv_nsec - a->tv_nsec) / 1e9;
}

/* Checks the count of each of obj's loaded programs; prints them. */
static void check_stats(const char *what, struct bpf_object *obj, double secs)
{
        struct bpf_program *p;
        int i = 0;

        printf("%s: loaded in %.3f s\n", what, secs);
        bpf_object__for_each_program(p, obj)
        {
                if (i == MAX_PROGS)
                        break;
                if (!bpf_program__autoload(p)) {
                        i++;
                        continue;
                }
                const char *s = strstr(logs[i], "processed ");
                long n = s ? strtol(s + strlen("processed "), NULL, 10) : -1;
                printf("  %-22s %6zu instructions, the verifier processed %ld\n",
                       bpf_program__name(p), bpf_program__insn_cnt(p), n);
                FP_CHECK(n > 0);
                FP_CHECK(n <= BUDGET);
                i++;
        }
}

/*
 * Loads a skeleton's object (obj, its skeleton sk) asking for the
 * verifier's statistics, and checks them when it loaded: the load's result.
 */
static int load_checked(const char *what, struct bpf_object *obj, struct bpf_object_skeleton *sk)
{
        struct timespec t;
        int r;

        want_stats(obj);
        clock_gettime(CLOCK_MONOTONIC, &t);
        r = bpf_object__load_skeleton(sk);
        if (r == 0)
                check_stats(what, obj, since(&t));
        return r;
}

static void pystack(void)
{
        struct pystack_bpf *s = pystack_bpf__open();

        FP_CHECK(s != NULL);
        if (s)
                FP_CHECK_EQ_INT(
                    load_checked("pystack (the interpreters' walks)", s->obj, s->skeleton), 0);
        pystack_bpf__destroy(s);
}

static void offcpu(bool python)
{
        int r = -1;

        /* As the agent loads it: without the rseq_update hook where the kernel has none. */
        for (int resume = 1; resume >= 0 && r != 0; resume--) {
                struct offcpu_bpf *s = offcpu_bpf__open();
                FP_CHECK(s != NULL);
                if (!s)
                        return;
                s->rodata->python = python;
                if (!resume)
                        bpf_program__set_autoload(s->progs.fp_offcpu_resume, false);
                r = load_checked(python ? "offcpu (with the interpreters' walks)"
                                        : "offcpu (native stacks only)",
                                 s->obj, s->skeleton);
                offcpu_bpf__destroy(s);
        }
        FP_CHECK_EQ_INT(r, 0);
}

static void tracker(void)
{
        struct tracker_bpf *s = tracker_bpf__open();

        FP_CHECK(s != NULL);
        if (s)
                FP_CHECK_EQ_INT(load_checked("tracker", s->obj, s->skeleton), 0);
        tracker_bpf__destroy(s);
}

int main(void)
{
        libbpf_set_print(quiet);
        struct pystack_bpf *probe = pystack_bpf__open_and_load();
        if (!probe) {
                printf("test-bpfverify: skipped: this kernel loads no BPF program here (%s)\n",
                       strerror(errno));
                return 0;
        }
        pystack_bpf__destroy(probe);
        pystack();
        offcpu(true);
        offcpu(false);
        tracker();
        return FP_TEST_DONE();
}
#else
int main(void)
{
        printf("test-bpfverify: skipped: built without BPF\n");
        return 0;
}
#endif
