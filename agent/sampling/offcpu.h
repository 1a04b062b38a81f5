/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU profiling: where a target's threads wait, with the stack they
 * waited in and an unbiased weight. The first half of this header is what
 * the kernel side (offcpu.bpf.c) and the loader (offcpu.c) share; the
 * second half, hidden from the BPF compiler, is the loader's API.
 *
 * A block is the time from a thread's switch-out to its next switch-in.
 * It has up to two parts: sleeping (the thread's state at the switch-out:
 * interruptible or uninterruptible) until its wake-up, then waiting in the
 * run queue until it runs (all of it, for a preempted thread). Each part of
 * duration d is kept with probability min(1, d/T) and a kept part weighs
 * max(d, T) ns: every stack's expected total is its exact off-CPU time,
 * parts longer than T are always kept, and at most (blocked time)/T plus
 * the number of parts longer than T are kept. T is the target's off-CPU
 * period.
 *
 * The stack is the thread's own: its user registers and a copy of the top
 * of its user stack, taken in its own context and unwound by the agent
 * like a CPU sample's.
 *   - A block inside a system call (the usual case: sleep, read, futex,
 *     fsync) leaves the user state as it was at the call: the copy is taken
 *     when the call returns (sys_exit), and only for kept parts. A thread
 *     that blocks several times in one call gets one record for all.
 *   - A block after a call returned (a thread rescheduled on its way back
 *     to user mode: a waker, as in a ping-pong) has no such moment. When
 *     the thread comes back after another thread of its process, the
 *     stack (unchanged: the thread has not run) is read then, in their
 *     shared address space (FP_OFFCPU_CALL). Otherwise, for a thread with
 *     restartable sequences registered (glibc 2.35 and later registers
 *     every thread), it is read on the thread's way back to user mode,
 *     where the kernel updates its rseq area after any switch
 *     (FP_OFFCPU_CALL from the rseq_update tracepoint): exact, as a
 *     call's. For other threads one such block in 16 (in 64 when the CPU
 *     went to a thread of its process) has its stack copied at the
 *     switch-out (FP_OFFCPU_STACK), whose kept parts weigh 16 (64) times
 *     as much (FP_OFFCPU_WEIGHTS follows at the switch-in): unbiased at a
 *     sixteenth of the copies or less, but a rare long wait (another
 *     process ran in between) then weighs 64 times its length.
 *   - A block elsewhere (preempted in user mode, or waiting in a page
 *     fault) is copied at the switch-out, the weights following at the
 *     switch-in. Such preemptions are bounded by the interrupt rate.
 *
 * A CPython process's threads also get their Python stack, read where the
 * native stack is copied (pywalk.bpf.h), as a FP_OFFCPU_PYTHON record just
 * before the stack's (CALL or STACK) record, with the same tid and time:
 * the loader hands the two over together.
 *
 * This header is included by the BPF program too: fixed-width types only.
 */
#pragma once

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "pystack.h"

#define FP_OFFCPU_STACK_MAX  16384         /* bytes of user stack copied at most */
#define FP_OFFCPU_PERIOD_MAX 1000000000ULL /* T at most: 1 s */

/* Why a thread waited: the label of its samples. */
enum fp_offcpu_reason {
        FP_OFFCPU_SLEEP = 0,           /* interruptible sleep (S) */
        FP_OFFCPU_UNINTERRUPTIBLE = 1, /* uninterruptible sleep (D): disk, some locks */
        FP_OFFCPU_RUNQUEUE = 2, /* runnable, waiting for a CPU (from wake-up or preemption) */
        FP_OFFCPU_REASONS = 3,
};

/*
 * A target's entry in the kernel's map (tgid -> this), and the host
 * tier's (every other process; kept per CPU, the agent sums them).
 */
struct fp_offcpu_target {
        __u64 period; /* T, ns */
        /* Counts the kernel side keeps (the agent reads them as they grow). */
        __u64 parts;        /* block parts seen */
        __u64 kept;         /* of which kept */
        __u64 lost_ring;    /* kept parts whose record the ring had no room for */
        __u64 lost_copy;    /* kept parts whose stack could not be copied */
        __u64 lost_exited;  /* kept parts of threads that exited before their call returned */
        __u64 lost_changed; /* kept parts whose call returned with other registers */
        __u64 lost_ns;      /* the weight of all the lost ones */
};

/* Whose a record is: a target's (its tgid is in the targets map) or the host tier's. */
enum fp_offcpu_tier {
        FP_OFFCPU_TARGET = 0,
        FP_OFFCPU_HOST = 1,
};

enum fp_offcpu_kind {
        FP_OFFCPU_CALL = 1,    /* a system call returned: stack and weights */
        FP_OFFCPU_STACK = 2,   /* a block outside a call began: its stack (weights follow) */
        FP_OFFCPU_WEIGHTS = 3, /* that block ended: its weights (seq matches the stack's) */
        FP_OFFCPU_PYTHON = 4,  /* the Python stack of the next CALL or STACK of its thread */
};

struct fp_offcpu_record {
        __u32 kind; /* enum fp_offcpu_kind */
        __u32 tid;
        __u32 tgid;
        __u32 seq;     /* the thread's STACK records, counted: pairs WEIGHTS with its STACK */
        __u64 time_ns; /* bpf_ktime_get_ns() of the record: CLOCK_MONOTONIC */
        __u64 weight[FP_OFFCPU_REASONS]; /* ns this record stands for, per reason */
        __u64 ip, sp, bp;                /* user registers (CALL, STACK) */
        __u32 stack_len;                 /* bytes of stack that follow (from sp up) */
        __u32 tier;                      /* FP_OFFCPU_TARGET or FP_OFFCPU_HOST: whose it is */
        __u64 cgroup; /* the thread's cgroup (v2 id) at the record: its service, unsampled */
        __u8 stack[FP_OFFCPU_STACK_MAX];
};

#define FP_OFFCPU_HEADER_LEN ((unsigned long)&((struct fp_offcpu_record *)0)->stack)

/* A FP_OFFCPU_PYTHON record: py.tid and py.time_ns are its stack record's. */
struct fp_offcpu_pyrecord {
        __u32 kind; /* FP_OFFCPU_PYTHON */
        __u32 pad;
        struct fp_pystack_record py; /* py.n_frames frames follow the header */
};

#define FP_OFFCPU_PY_HEADER_LEN ((unsigned long)&((struct fp_offcpu_pyrecord *)0)->py.frames)

#ifndef __bpf__

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_offcpu;
struct fp_perf_sample;

/* How many of a record's parts (reasons) carry a weight: what a lost record loses. */
unsigned fp_offcpu_parts(const struct fp_offcpu_record *r);
/*
 * The record as a user-mode sample of its thread (registers and stack
 * copy) for the stack walker; ret points into r.
 */
void fp_offcpu_sample(const struct fp_offcpu_record *r, struct fp_perf_sample *ret);

/*
 * Called on the loop thread for every record, in the order the kernel
 * wrote them; py: the Python stack of a CALL or STACK record's thread,
 * read with it, else NULL.
 */
typedef void (*fp_offcpu_fn)(void *userdata, const struct fp_offcpu_record *r,
                             const struct fp_pystack_record *py);

/*
 * Loads and attaches the BPF programs and registers their ring buffer with
 * base. On failure -errno and one line in err naming what is missing (no
 * BTF, not permitted, a kernel without task storage or BTF tracepoints,
 * built without BPF).
 */
int fp_offcpu_new(struct event_base *base, fp_offcpu_fn fn, void *userdata, struct fp_offcpu **ret,
                  char *err, size_t err_len);
/* Detaches the programs and frees everything. Accepts NULL. */
void fp_offcpu_free(struct fp_offcpu *o);
/* Profiles the off-CPU time of process tgid at period ns (T). 0 or -errno. */
int fp_offcpu_add(struct fp_offcpu *o, pid_t tgid, uint64_t period);
/* Stops; 0 also when it was not profiled. */
int fp_offcpu_remove(struct fp_offcpu *o, pid_t tgid);
/* The kernel's counts of tgid (zeros when it is not profiled). */
void fp_offcpu_counts(const struct fp_offcpu *o, pid_t tgid, struct fp_offcpu_target *ret);
/*
 * The host tier: every process not in the targets map, at period ns (0
 * stops it). Unlike a target's, a block outside a system call (after a
 * returned call, or preempted in user mode) gets its stack copied one time
 * in 16 at most (weighing 16 times), so that a busy host does not pay a
 * copy per preemption. 0 or -errno.
 */
int fp_offcpu_host(struct fp_offcpu *o, uint64_t period);
/* The host tier's kernel counts, summed over the CPUs (zeros when off). */
void fp_offcpu_host_counts(const struct fp_offcpu *o, struct fp_offcpu_target *ret);
/* Whether the host tier is on. */
bool fp_offcpu_host_on(const struct fp_offcpu *o);
/* Reads every record now in the ring. */
void fp_offcpu_poll(struct fp_offcpu *o);
/*
 * The map of the processes whose Python stacks the programs read
 * (tgid -> struct fp_pystack_proc: fp_pystack_mirror() keeps it), or -1
 * when this kernel's verifier refused the Python walk (said once in the log).
 */
int fp_offcpu_python_map(const struct fp_offcpu *o);
/* FP_OFFCPU_PYTHON records read, and of those, the ones no stack record took. */
void fp_offcpu_python_counts(const struct fp_offcpu *o, uint64_t *records, uint64_t *unpaired);
/* Processes profiled now. */
unsigned fp_offcpu_targets(const struct fp_offcpu *o);
/* Records the agent read. */
uint64_t fp_offcpu_records(const struct fp_offcpu *o);

#endif
