/* SPDX-License-Identifier: MIT */
/*
 * The BPF thread tracker. The first half of this header is what the kernel
 * side (tracker.bpf.c) and the loader (tracker.c) share: the flags of a
 * tracked process and the record the kernel side writes into the ring
 * buffer. The second half, hidden from the BPF compiler, is the loader's
 * API for the agent.
 *
 * The kernel side keeps a hash map tgid -> flags of the processes the
 * agent profiles. On the scheduler's fork tracepoint it reports a new
 * thread of a tracked process; a new child process of a tracked process
 * whose flags say FP_TRACKER_FOLLOW is added to the map at once (so its
 * own threads and children are seen from its first instruction) and
 * reported. On the exit tracepoint it reports each exiting thread of a
 * tracked process and, when the whole thread group is dead, removes the
 * process from the map. What such a thread runs after do_exit() has closed
 * its perf events (its files, its exit notice, its last switch: tens of
 * µs, much of a short thread's life) no event of its own can see: the
 * bridge's tick (bridge.h) reports it, one record per tick that finds it.
 *
 * For the agent's rules (rule.h) it also reports, while the loader's
 * fp_tracker_watch() says so, every exec in the system (sched_process_exec:
 * the process has its new image, before its first instruction in it) and
 * every process moved to another cgroup (cgroup_attach_task, for the
 * thread group leader): the two moments a process may start to match a
 * rule. Execs of tracked processes are reported whether watched or not.
 *
 * This header is included by the BPF program too, so it uses only the
 * kernel's fixed-width types.
 */
#pragma once

#ifndef __bpf__
#include <linux/types.h>
#endif

#define FP_TRACKER_COMM_LEN 16

/* Flags of a tracked process (the map's value). */
#define FP_TRACKER_FOLLOW 1u /* its child processes are tracked (and reported) too */

/* What a record reports. */
enum fp_tracker_kind {
        FP_TRACKER_THREAD_NEW = 1,  /* a new thread (tid) of process tgid */
        FP_TRACKER_THREAD_EXIT = 2, /* thread tid of tgid is exiting */
        FP_TRACKER_CHILD_NEW = 3,   /* a new process tgid forked by parent_tgid */
        FP_TRACKER_EXEC = 4,        /* process tgid has just exec'd (comm: its new name) */
        FP_TRACKER_CGROUP = 5,      /* process tgid was moved to another cgroup */
        FP_TRACKER_THREAD_CPU = 6,  /* thread tid of tgid has run for the last time: cpu_ns */
        FP_TRACKER_THREAD_TAIL = 7, /* the bridge's tick found tid of tgid exiting, its events
                                       closed: period ns of its CPU that no event of its own sees */
};

/* Flags of a record. */
#define FP_TRACKER_EV_GROUP_DEAD 1u /* THREAD_EXIT: the last thread of the process */
#define FP_TRACKER_EV_UNTRACKED  2u /* CHILD_NEW: the map was full, the child is not tracked */

struct fp_tracker_event {
        __u64 time_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
        __u32 kind;    /* enum fp_tracker_kind */
        __u32 flags;   /* FP_TRACKER_EV_* */
        __u32 tid;
        __u32 tgid;
        __u32 parent_tgid; /* the creating process (THREAD_NEW: tgid itself) */
        __u32 reserved;
        __u64 cpu_ns; /* the thread's CPU time so far (se.sum_exec_runtime) */
        char comm[FP_TRACKER_COMM_LEN];
        __u64 period; /* THREAD_TAIL: the bridge's period (ns), what its tick stands for */
        /* The thread's page faults and context switches so far (task_struct's, as /proc's). */
        __u64 min_flt, maj_flt, nvcsw, nivcsw;
};

#ifndef __bpf__

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_tracker;

/* Called on the loop thread for every record, in the order the kernel wrote them. */
typedef void (*fp_tracker_fn)(void *userdata, const struct fp_tracker_event *e);

/*
 * Loads and attaches the BPF programs and registers their ring buffer with
 * base. On failure returns -errno and writes one line into err saying why
 * (no BTF, not permitted, verifier refusal, built without BPF), so the
 * agent can log it and use its fallback.
 */
int fp_tracker_new(struct event_base *base, fp_tracker_fn fn, void *userdata,
                   struct fp_tracker **ret, char *err, size_t err_len);
/* Detaches the programs and frees everything. Accepts NULL. */
void fp_tracker_free(struct fp_tracker *tr);
/* Tracks process tgid (FP_TRACKER_* flags), replacing its flags if tracked. */
int fp_tracker_add(struct fp_tracker *tr, pid_t tgid, unsigned flags);
/* Stops tracking tgid; 0 also when it was not tracked. */
int fp_tracker_remove(struct fp_tracker *tr, pid_t tgid);
/* Reads every record now in the ring (before a status or dump). */
void fp_tracker_poll(struct fp_tracker *tr);
/*
 * Whether every exec and every cgroup move in the system is reported
 * (the agent has rules), or only execs of tracked processes.
 */
void fp_tracker_watch(struct fp_tracker *tr, bool on);
/* The bridge's filter program (a BPF perf_event program), for PERF_EVENT_IOC_SET_BPF. */
int fp_tracker_bridge_fd(const struct fp_tracker *tr);
/*
 * The bridge's samples run the Python stacks' program prog_fd too
 * (fp_pystack_prog_fd(); -1: none any more). 0 or -errno.
 */
int fp_tracker_python(struct fp_tracker *tr, int prog_fd);
/* Thread tid has its own events now: the bridge stops sampling it. */
void fp_tracker_unbridge(struct fp_tracker *tr, pid_t tid);
/* Births the bridge could not take (its map was full). */
uint64_t fp_tracker_bridge_full(const struct fp_tracker *tr);
/* Records the kernel side could not write: its ring buffer was full. */
uint64_t fp_tracker_dropped(const struct fp_tracker *tr);

#endif
