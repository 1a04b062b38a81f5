/* SPDX-License-Identifier: MIT */
/*
 * What the three files of the target module share: target.c (start,
 * free, accessors, the bucket's drops), threads.c (the thread table and
 * the rings) and samples.c (a sample into a stack). Calls run one way:
 * target.c -> threads.c -> samples.c. Not for other modules: the export
 * of a bucket (keep/export.c) reads a target through target.h.
 */
#pragma once

#include "jvmattach.h"
#include "aggregate.h"
#include "offcpu.h"
#include "pyframes.h"
#include "stackwalk.h"
#include "target.h"

#include <event2/util.h>
#include <stdbool.h>
#include <stdint.h>

struct fp_maps;
struct fp_agg;

#define MAX_FRAMES FP_TARGET_MAX_FRAMES
_Static_assert(FP_TARGET_MAX_FRAMES == FP_STACKWALK_MAX_FRAMES, "a target's stacks are walked");
#define RESCAN_INTERVAL   1  /* seconds */
#define PROC_PASS_TRACKED 10 /* seconds between /proc passes while BPF reports every birth */
#define COMM_LEN          16
#define RETRY_MAX         16 /* threads waiting for another attach attempt */
#define RETRY_TRIES       5  /* attempts, RETRY_USEC apart */
#define RETRY_USEC        2000
#define LATENCY_RING      512 /* attach latencies kept for the percentiles */
#define PRUNE_MIN         64  /* dead thread records worth a pruning pass */

struct fp_thread {
        struct fp_target *target;
        pid_t tid;
        char comm[COMM_LEN];
        bool live;
        bool exited;          /* detached because it exited: a rescan never reattaches it */
        uint64_t attach_ns;   /* CLOCK_MONOTONIC of the last attach */
        uint64_t detach_ns;   /* and of its detach (its record outlives the bridge's samples) */
        uint64_t jitter_ns;   /* CLOCK_MONOTONIC of the last period change */
        uint64_t period;      /* its sampling period now; 0: as configured */
        int64_t period_debt;  /* its samples' periods less as many configured ones (ns) */
        bool exit_pending;    /* EXIT seen inside a drain: detached right after it */
        bool over_limit;      /* left out (counted once): the target had cfg.max_threads live */
        bool born;            /* its birth was reported: its whole life is the target's */
        bool cpu_known;       /* the kernel's count of its CPU time came (born threads) */
        uint64_t start_value; /* counter-led: its events under [thread start] so far */
        uint64_t value;       /* what its samples hold (the leader's unit), for the born account */
        uint64_t cpu_before;  /* the CPU it had run (ns) when its sampling began */
        uint64_t first;       /* its starter's period (the random first period) */
        uint64_t shift;       /* what its group's next sample adds: progress a restart lost */
        uint64_t restarted;   /* the group leader's count when its period last (re)started */
        uint64_t since;       /* its group's samples since then */
        bool group_started;   /* the group was enabled at the starter's sample */
        struct fp_perf_ring sampler, sideband;
        struct fp_perf_ring
            starter; /* its random first period until the first sample (fd -1: none) */
        /* Off-CPU: the stack of its block outside a system call, until the block's weights. */
        struct fp_frame *off_frames; /* MAX_FRAMES, allocated on its first such block */
        uint32_t off_n, off_seq;     /* frames held (0: none), the block's record number */
        unsigned off_epoch;
        struct event *ev_sampler, *ev_sideband, *ev_starter;
};

struct fp_target {
        struct event_base *base;
        struct fp_symcache *cache;
        pid_t pid;
        uint64_t starttime;
        char comm[COMM_LEN];
        char *exe;
        struct fp_perf_config cfg;
        struct fp_thread **threads; /* every thread ever attached, live or dead */
        size_t n_threads, cap_threads;
        struct fp_maps *maps;
        uint64_t jitter_state;      /* the sampling period's random jitter */
        pid_t bonus_tid;            /* while a ring drains: its first sample of this thread */
        uint64_t bonus;             /* counts for this much more (see start_group()) */
        struct fp_perfmap *perfmap; /* JIT names (perfmap.h), read on the first anonymous frame */
        struct fp_jvm_names jvm;    /* a HotSpot JVM asked for its perf map (target-jvm.c) */
        size_t jvm_looked_maps;     /* its mappings when last looked at for one */
        struct fp_agg *agg;
        struct event *ev_rescan;
        struct fp_target_stats st;
        struct fp_target_stats st_bucketed; /* st when the last bucket was closed */
        struct {
                char reason[32];
                uint64_t count;
        } carried[FP_TARGET_MAX_CARRIED]; /* drops charged by the agent for the next bucket */
        bool exits_pending;
        struct fp_stackwalk walk;                /* its samples into stacks (maps, cfg, st) */
        char left_out[FP_PERF_EVENT_LIST_MAX];   /* members --best-effort left out */
        char service[FP_TARGET_SERVICE_MAX + 1]; /* its rule's service, "" when none */
        uid_t guard;  /* a user's target: the process must stay this uid's (0: root's, none) */
        bool revoked; /* it exec'd into another user's program: nothing more is kept */

        /* Thread tracking (see fp_target_set_tracking()). */
        bool bpf_tracked;      /* births come from the BPF tracker, not FORK records */
        bool proc_due;         /* a /proc pass at the next rescan (the tracker lost records) */
        uint64_t proc_pass_ns; /* the last /proc pass (CLOCK_MONOTONIC) */
        bool follow_children;  /* child processes are reported to on_child */
        pid_t parent_pid;      /* the target this one was followed from, 0 if none */
        fp_target_child_fn on_child;
        void *child_userdata;
        struct event *ev_retry;
        struct event *ev_fit; /* made active when the stack copy is to change size */
        struct {
                pid_t tid;
                unsigned tries;
                uint64_t birth_ns;
        } retry[RETRY_MAX]; /* born threads whose attach said ESRCH while they still exist */
        unsigned n_retry;
        uint32_t latency_us[LATENCY_RING]; /* birth -> sampling began, the last LATENCY_RING */
        uint64_t n_latency;

        /* Python stacks (samples.c), when the agent reads them and cfg.no_python is not set. */
        struct fp_pystack *pystack; /* the program its sampling events run (core's) */
        struct fp_pyproc py;        /* whether it runs one, and its frames' names */
        uint64_t py_attach_failed;  /* events the program could not be attached to */

        /* Off-CPU time (target-offcpu.c), when cfg.off_cpu_period is set. */
        struct fp_perf_config off_cfg; /* how its stacks are walked: copied stacks, user only */
        struct fp_target_stats off_st; /* their unwinding figures (kept apart from the CPU's) */
        struct fp_stackwalk off_walk;
        struct fp_agg *off_agg[FP_OFFCPU_REASONS]; /* the open bucket, by why it waited */

        struct fp_frame frames[MAX_FRAMES];
};

/* ---- threads.c ---- */

/* The record of thread tid (live or dead), or NULL. */
struct fp_thread *fp_thread_find(struct fp_target *t, pid_t tid);
/* Closes whatever th still has open and frees it (the target is being freed). */
void fp_thread_free(struct fp_thread *th);
/* Closes a thread's events at once (after reading them); its name and samples stay. */
void fp_thread_detach(struct fp_thread *th);
/* Detaches the threads whose EXIT records arrived during a drain. */
void fp_target_reap_exits(struct fp_target *t);
/* Marks the target exited once no thread is left and its process is gone. */
void fp_target_check_exited(struct fp_target *t);
/* Attaches every thread in /proc/PID/task not yet live; threads attached or -errno. */
int fp_target_rescan(struct fp_target *t, int *ret_first_error);
/* The rescan timer and the retry timer. */
void fp_target_on_rescan(evutil_socket_t fd, short what, void *arg);
void fp_target_on_retry(evutil_socket_t fd, short what, void *arg);
/* Fits the stack copy at once (threads.c): the samples say it should change. */
void fp_target_on_fit(evutil_socket_t fd, short what, void *arg);

/* ---- samples.c ---- */

/* Aggregates one sample of the target (or counts why it could not). */
void fp_target_add_sample(struct fp_target *t, const struct fp_perf_sample *s);
/*
 * Aggregates value of thread tid under one synthetic frame, flag:
 * FP_FRAME_THREAD_EXIT (its exit after its events closed, "[thread exit]")
 * or FP_FRAME_THREAD_START (a new thread's events its samples do not hold,
 * "[thread start]").
 */
void fp_target_add_synthetic(struct fp_target *t, pid_t tid, unsigned flag, uint64_t value);
/*
 * Adds the stack f (n frames, of maps epoch) of thread tid with value (and
 * counters, or NULL) to agg, resolving a new entry's frames with w; a full
 * table keeps it under the stand-in (counted). 0 or -ENOMEM.
 */
int fp_target_agg_add(struct fp_target *t, struct fp_agg *agg, struct fp_stackwalk *w, pid_t tid,
                      unsigned epoch, struct fp_frame *f, uint32_t n, uint64_t value,
                      const uint64_t *counters);

/* Runs the Python stacks' program at the samples of the event fd (when the target reads them). */
void fp_target_python_attach(struct fp_target *t, int fd);
/*
 * Forgets the process's CPython (an exec): looked for again in the new
 * program; the names of the frames read so far stay (fp_target_python()).
 */
void fp_target_python_forget(struct fp_target *t);
/* Frees what the target keeps of Python (the target is being freed). */
void fp_target_python_free(struct fp_target *t);
/* The off-CPU stack f (n frames) at time with py's Python frames spliced in: the new count. */
uint32_t fp_target_python_splice(struct fp_target *t, uint64_t time,
                                 const struct fp_pystack_record *py, struct fp_frame *f,
                                 uint32_t n);

/* ---- target-jvm.c ---- */

/* Looks whether the process is a JVM that can be asked (at start and after an exec). */
void fp_target_jvm_look(struct fp_target *t);
/* A sample landed in JIT code its perf map does not name: ask the JVM, if due. */
void fp_target_jvm_miss(struct fp_target *t);
/* Gives up a request under way (the target is freed, or exec'd). */
void fp_target_jvm_free(struct fp_target *t);

/* ---- target-offcpu.c ---- */

/* Sets up off-CPU profiling when t->cfg asks for it. 0 or -ENOMEM. */
int fp_target_offcpu_init(struct fp_target *t);
/* Frees its buckets. */
void fp_target_offcpu_free(struct fp_target *t);
/* Starts the next off-CPU bucket. 0 or -ENOMEM (the open one kept). */
int fp_target_offcpu_next(struct fp_target *t);

/* ---- threads.c: the rings ---- */

/* Reads every record now in ring. */
void fp_target_drain_ring(struct fp_target *t, struct fp_perf_ring *ring);
/* Drains th's sampling ring, keeping its period debt (see jitter_period()). */
void fp_target_drain_sampler(struct fp_target *t, struct fp_thread *th);
/* The event loop's callbacks of a thread's two rings (arg: the struct fp_thread). */
void fp_target_on_sampler(evutil_socket_t fd, short what, void *arg);
void fp_target_on_starter(evutil_socket_t fd, short what, void *arg);
void fp_target_on_sideband(evutil_socket_t fd, short what, void *arg);
