// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The thread tracker's kernel side: see tracker.h for what it reports.
 *
 * Five BTF tracepoint programs, CO-RE (vmlinux.h generated at build time):
 *
 *   sched_process_fork(parent, child)  runs in the parent, after the child
 *       is fully set up and visible by its pid, before it first runs. So a
 *       perf event can be opened on the child as soon as the record is read.
 *   sched_process_exit(p)              runs in the exiting thread, before
 *       its files and perf events are torn down.
 *   sched_process_exec(p, ...)         runs in the process that exec'd,
 *       with its new image and name, before its first instruction in it.
 *   cgroup_attach_task(dst, .., task)  runs as a task is moved to another
 *       cgroup (once per task of a moved process: only the leader's counts).
 *   sched_switch(.., prev, .., state)  a tracked thread's last switch (state
 *       TASK_DEAD): its CPU time is final only then (at sched_process_exit
 *       the running slice is not yet in it, up to a tick: 4 ms at 250 Hz).
 *       Every other switch costs the program's entry and one compare.
 *
 * and the bridge's filter (a perf_event program on a cpu-clock per CPU),
 * which also reports the exit tail of a tracked thread: its ticks between
 * the closing of the thread's perf events and its last switch.
 *
 * Everything is filtered in the kernel by the targets map: processes the
 * agent does not profile cost one hash lookup per fork and exit, and, while
 * the agent has no rules (`watch` clear), per exec. A record the ring
 * buffer has no room for is counted in `dropped`; on a new loss the
 * agent's /proc rescan (every 10 s otherwise) runs at the next second and
 * finds such a thread, and its rules' /proc scan such a process.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "tracker.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* tgid -> FP_TRACKER_* flags; the loader sizes it before load. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, __u32);
        __type(value, __u32);
} targets SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/*
 * New threads and followed children of tracked processes (tid -> 1), from
 * their fork until the agent's own events sample them (it deletes them),
 * and while the agent has rules, every other process from its exec (and
 * the threads it makes) until the agent has decided: the per-CPU bridge
 * samples only these (fp_tracker_bridge).
 */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 8192);
        __type(key, __u32);
        __type(value, __u32);
} bridged SEC(".maps");

/*
 * The Python stacks' program (pystack.bpf.c), when loaded: a bridged
 * thread's sample runs it too (a tail call), so that a new thread's
 * first samples have their Python stacks as its own events' do.
 */
struct {
        __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u32);
} python SEC(".maps");

/* Exiting threads of tracked processes (tid -> tgid) until their last switch. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 8192);
        __type(key, __u32);
        __type(value, __u32);
} exiting SEC(".maps");

/* Records lost because the ring buffer was full (read by the agent). */
__u64 dropped = 0;
/* Births the bridged map had no room for (the bridge does not sample them). */
__u64 bridge_full = 0;

static __always_inline void bridge(__u32 tid)
{
        __u32 one = 1;

        if (bpf_map_update_elem(&bridged, &tid, &one, BPF_ANY))
                __sync_fetch_and_add(&bridge_full, 1);
}
/* Set by the agent while it has rules: report every exec and cgroup move. */
__u32 watch = 0;

static __always_inline void emit(__u32 kind, __u32 flags, struct task_struct *task,
                                 __u32 parent_tgid)
{
        struct fp_tracker_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

        if (!e) {
                __sync_fetch_and_add(&dropped, 1);
                return;
        }
        e->time_ns = bpf_ktime_get_ns();
        e->kind = kind;
        e->flags = flags;
        e->tid = BPF_CORE_READ(task, pid);
        e->tgid = BPF_CORE_READ(task, tgid);
        e->parent_tgid = parent_tgid;
        e->reserved = 0;
        e->period = 0;
        e->cpu_ns = BPF_CORE_READ(task, se.sum_exec_runtime);
        e->min_flt = BPF_CORE_READ(task, min_flt);
        e->maj_flt = BPF_CORE_READ(task, maj_flt);
        e->nvcsw = BPF_CORE_READ(task, nvcsw);
        e->nivcsw = BPF_CORE_READ(task, nivcsw);
        BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
        bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fp_tracker_fork, struct task_struct *parent, struct task_struct *child)
{
        __u32 ptgid = BPF_CORE_READ(parent, tgid);
        __u32 ctgid = BPF_CORE_READ(child, tgid);
        __u32 *flags = bpf_map_lookup_elem(&targets, &ptgid);

        __u32 ctid = BPF_CORE_READ(child, pid);
        if (!flags) {
                /* A thread of a process a rule may take (bridged at its exec): bridged too. */
                __u32 ptid = BPF_CORE_READ(parent, pid);
                if (watch && ctgid == ptgid && bpf_map_lookup_elem(&bridged, &ptid))
                        bridge(ctid);
                return 0;
        }
        if (ctgid == ptgid) {
                bridge(ctid);
                emit(FP_TRACKER_THREAD_NEW, 0, child, ptgid);
                return 0;
        }
        if (!(*flags & FP_TRACKER_FOLLOW))
                return 0;
        /* Track the child before it runs, so none of its threads or children is missed. */
        __u32 cflags = *flags;
        long err = bpf_map_update_elem(&targets, &ctgid, &cflags, BPF_NOEXIST);
        if (!err)
                bridge(ctid);
        emit(FP_TRACKER_CHILD_NEW, err ? FP_TRACKER_EV_UNTRACKED : 0, child, ptgid);
        return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(fp_tracker_exit, struct task_struct *p)
{
        __u32 tgid = BPF_CORE_READ(p, tgid);
        bool group_dead;

        __u32 tid = BPF_CORE_READ(p, pid);
        if (!bpf_map_lookup_elem(&targets, &tgid)) {
                if (watch) /* bridged at an exec no rule took, its record perhaps dropped */
                        bpf_map_delete_elem(&bridged, &tid);
                return 0;
        }
        /* do_exit() decremented signal->live before this tracepoint. */
        group_dead = BPF_CORE_READ(p, signal, live.counter) == 0;
        emit(FP_TRACKER_THREAD_EXIT, group_dead ? FP_TRACKER_EV_GROUP_DEAD : 0, p, tgid);
        bpf_map_delete_elem(&bridged, &tid);
        if (bpf_map_update_elem(&exiting, &tid, &tgid, BPF_ANY))
                __sync_fetch_and_add(&dropped, 1);
        if (group_dead)
                bpf_map_delete_elem(&targets, &tgid);
        return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(fp_tracker_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
        __u32 tgid = BPF_CORE_READ(p, tgid);

        bool target = bpf_map_lookup_elem(&targets, &tgid);
        if (!watch && !target)
                return 0;
        /* A process a rule may take: the bridge samples it until the agent has decided. */
        if (!target)
                bridge(BPF_CORE_READ(p, pid));
        emit(FP_TRACKER_EXEC, 0, p, tgid);
        return 0;
}

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(fp_tracker_cgroup, struct cgroup *dst, const char *path, struct task_struct *task,
             bool threadgroup)
{
        /* One record per process: a whole-process move lists its leader too. */
        if (!watch || BPF_CORE_READ(task, pid) != BPF_CORE_READ(task, tgid))
                return 0;
        emit(FP_TRACKER_CGROUP, 0, task, BPF_CORE_READ(task, tgid));
        return 0;
}

#define FP_TASK_DEAD 0x80 /* include/linux/sched.h */

SEC("tp_btf/sched_switch")
int BPF_PROG(fp_tracker_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state)
{
        if (!(prev_state & FP_TASK_DEAD))
                return 0;
        __u32 tid = BPF_CORE_READ(prev, pid);
        __u32 *tgid = bpf_map_lookup_elem(&exiting, &tid);
        if (!tgid)
                return 0;
        emit(FP_TRACKER_THREAD_CPU, 0, prev, *tgid);
        bpf_map_delete_elem(&exiting, &tid);
        return 0;
}

/*
 * The task's perf event contexts: one pointer since Linux 6.2, one per
 * kind of PMU (hardware, software) before. do_exit() clears them in
 * perf_event_exit_task(), after sched_process_exit: from then on none of
 * the thread's own events counts or samples it.
 */
struct task_struct___ctx_one {
        struct perf_event_context *perf_event_ctxp;
} __attribute__((preserve_access_index));
struct task_struct___ctx_per_pmu {
        struct perf_event_context *perf_event_ctxp[2];
} __attribute__((preserve_access_index));

static __always_inline bool events_closed(void)
{
        void *task = (void *)bpf_get_current_task();

        if (bpf_core_field_exists(struct task_struct___ctx_one, perf_event_ctxp))
                return !BPF_CORE_READ((struct task_struct___ctx_one *)task, perf_event_ctxp);
        if (bpf_core_field_exists(struct task_struct___ctx_per_pmu, perf_event_ctxp)) {
                struct task_struct___ctx_per_pmu *t = task;
                return !BPF_CORE_READ(t, perf_event_ctxp[0]) &&
                       !BPF_CORE_READ(t, perf_event_ctxp[1]);
        }
        return false; /* a layout unknown here: no exit tails */
}

/*
 * The bridge's filter, attached to a cpu-clock event per CPU: a sample is
 * kept (1) only when the thread it interrupted is in `bridged` (through
 * the Python stacks' program when there is one: it keeps every sample). A thread
 * of a tracked process that is exiting with its events closed is reported
 * in the ring instead (THREAD_TAIL), after its THREAD_EXIT record and
 * before its THREAD_CPU one, so the agent sees it in that order. Every
 * other tick costs two lookups and nothing more.
 */
SEC("perf_event")
int fp_tracker_bridge(struct bpf_perf_event_data *ctx)
{
        __u32 tid = (__u32)bpf_get_current_pid_tgid();

        if (bpf_map_lookup_elem(&bridged, &tid)) {
                bpf_tail_call(ctx, &python, 0);
                return 1; /* (no program there) */
        }
        __u32 *tgid = bpf_map_lookup_elem(&exiting, &tid);
        if (!tgid || !events_closed())
                return 0;
        struct fp_tracker_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
        if (!e) {
                __sync_fetch_and_add(&dropped, 1);
                return 0;
        }
        __builtin_memset(e, 0, sizeof(*e));
        e->time_ns = bpf_ktime_get_ns();
        e->kind = FP_TRACKER_THREAD_TAIL;
        e->tid = tid;
        e->tgid = *tgid;
        e->parent_tgid = *tgid;
        e->period = ctx->sample_period;
        bpf_ringbuf_submit(e, 0);
        return 0;
}
