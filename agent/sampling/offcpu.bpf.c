// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Off-CPU profiling, the kernel side: see offcpu.h for the model.
 *
 * Three BTF tracepoint programs, CO-RE:
 *
 *   sched_switch(preempt, prev, next, prev_state)  prev leaves the CPU (in
 *       its own context: its user registers and stack are readable) and
 *       next comes back: its block ends, its parts are kept or not.
 *   sched_wakeup(p)   a sleeping thread becomes runnable: the run-queue
 *       part of its block starts.
 *   sys_exit(regs, ret)  a system call returns, in the caller's context
 *       with its user registers: the stack of the kept parts of the
 *       blocks inside that call is copied here.
 *
 * Per-thread state lives in task storage, which the kernel frees with the
 * task. A thread of a process not profiled costs one hash lookup and a
 * per-CPU array lookup (is the host tier on?) when it is switched out,
 * and a task-storage lookup (a pointer test, it has none) when it is
 * switched in, woken, or returns from a system call. With the host tier
 * on, every process is profiled. Where the stack of a thread of a CPython
 * process is copied, its Python stack is read too (py_procs, pywalk.bpf.h).
 * Fields are read directly through the programs' BTF pointers (one load
 * each, not a helper call per field: this runs on every switch).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "offcpu.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define TASK_INTERRUPTIBLE   0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_DEAD            0x80
#define PF_KTHREAD           0x00200000
#define PAGE                 4096

/* tgid -> the target's period and counts; the loader sizes it. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, __u32);
        __type(value, struct fp_offcpu_target);
} targets SEC(".maps");

/*
 * The host tier's entry: every process not in targets, when its period is
 * not 0. Per CPU: its counts grow on every CPU at once without sharing a
 * cache line (the loader writes the period into each CPU's copy).
 */
struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct fp_offcpu_target);
} host SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 4 << 20);
} records SEC(".maps");

/* tgid -> its interpreter's layout, for the processes running a CPython (the loader's mirror). */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, __u32);
        __type(value, struct fp_pystack_proc);
} py_procs SEC(".maps");

/* tid -> its PyThreadState, as last found (checked before each use). */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 16384);
        __type(key, __u32);
        __type(value, __u64);
} py_tstates SEC(".maps");

/* Whether the Python walk is in (the loader loads without it where the verifier refuses it). */
const volatile bool python = false;

struct thread_state {
        __u64 off_ns;                     /* its switch-out, 0 while it runs */
        __u64 wake_ns;                    /* its wake-up during this block, 0 none yet */
        __u64 ip, sp;                     /* its user registers at the switch-out */
        __u64 pending[FP_OFFCPU_REASONS]; /* kept weights waiting for the call's return */
        __u32 reason;                     /* of the sleeping part */
        __u32 seq;                        /* STACK records written */
        __u8 frame;                       /* FRAME_*: where its user state was left */
        __u8 stacked;                     /* this block's stack was written (STACK seq) */
        __u8 has_pending;
        __u8 stack_err; /* why it could not be: LOST_RING or LOST_COPY */
        __u32 scale;    /* its stack's weights count this many times */
        __u8 sampled;   /* its stack is copied at the switch-out one time in scale */
        /* Sampled blocks to go until the next copy (take_copy()), by scale; 0: none yet. */
        __u8 countdown, countdown_sibling;
        /* Its stack is read on its way back to user mode (rseq_update): see give_stack(). */
        __u8 at_resume;
        /* pending holds kept parts waiting for that moment (not a call's sys_exit) */
        __u8 await_resume;
        __u8 pad[3];
};

/* Where a thread's user state was left when it was switched out. */
#define FRAME_CALL       1 /* inside a system call: its sys_exit comes */
#define FRAME_AFTER_CALL 2 /* a system call returned, on its way back: no sys_exit comes */
#define FRAME_OTHER      3 /* an interrupt or a fault (preempted in user mode, a page fault) */

/*
 * A block after a returned call (a waker rescheduled on its way back, as
 * in a ping-pong, up to one per call) has its stack copied at the
 * switch-out one time in AFTER_CALL_SAMPLING (AFTER_CALL_SIBLING when the
 * CPU goes to a thread of its own process: it most likely comes back after
 * one too), and such a copy weighs that many: unbiased, whatever decides
 * how often, since it is decided before the block's length is known. When
 * the thread comes back after a thread of its own process, its stack is
 * read then instead (always, at its own weight): see give_stack().
 */
#define AFTER_CALL_SAMPLING 16
#define AFTER_CALL_SIBLING  64

/*
 * Set by the loader once fp_offcpu_resume is attached: a thread with
 * restartable sequences registered has its after-call stacks read exactly
 * on its way back to user mode, and none sampled.
 */
bool resume_hook = false;

/* Whether the kernel updates task's rseq area on its way back to user mode. */
static __always_inline bool has_rseq(struct task_struct *task)
{
        if (!bpf_core_field_exists(task->rseq_len))
                return false;
        return BPF_CORE_READ(task, rseq_len) != 0;
}

#define LOST_COPY 1
#define LOST_RING 2

/*
 * The entry that profiles process tgid: its own, else the host tier's
 * when that is on (tier says which), else NULL.
 */
static __always_inline struct fp_offcpu_target *target_of(__u32 tgid, __u32 *tier)
{
        struct fp_offcpu_target *tv = bpf_map_lookup_elem(&targets, &tgid);
        __u32 zero = 0;

        *tier = FP_OFFCPU_TARGET;
        if (tv)
                return tv;
        *tier = FP_OFFCPU_HOST;
        tv = bpf_map_lookup_elem(&host, &zero);
        return tv && tv->period ? tv : NULL;
}

struct {
        __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, int);
        __type(value, struct thread_state);
} threads SEC(".maps");

/* One record being written per CPU (too big for the BPF stack). */
struct scratch {
        __u32 busy; /* a program on this CPU is writing it (another one then gives up) */
        __u32 reserved;
        struct fp_offcpu_record r;
        struct fp_offcpu_pyrecord py;
        /*
         * The verifier's bounds of copy_stack()'s offsets are looser than
         * the real ones (it sees the compiler's OR for an ADD): room for
         * what it thinks a page copy may reach past the stack.
         */
        __u8 slack[2 * PAGE];
};

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct scratch);
} scratch SEC(".maps");

/*
 * Where the thread's user state was left (FRAME_*), from its saved user
 * registers: inside a system call that has not yet returned (its sys_exit
 * is still to come), after one, or elsewhere. On
 * x86-64 the syscall instruction leaves the return address in rcx and the
 * flags in r11, so a call's frame has cx == ip and r11 == flags, which an
 * interrupt's or a fault's frame has only by a coincidence of user values;
 * and the entry code sets ax to -ENOSYS until the call returns its value.
 * A thread switched out on its way back to user mode (after its sys_exit)
 * is after its call: no sys_exit comes before it runs user code again.
 */
static __always_inline __u8 frame_of(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
        if ((long)regs->orig_ax < 0 || regs->cx != regs->ip || regs->r11 != regs->flags)
                return FRAME_OTHER;
        return (long)regs->ax == -38 ? FRAME_CALL : FRAME_AFTER_CALL;
#else
        return FRAME_OTHER; /* elsewhere every block's stack is copied at its switch-out */
#endif
}

/*
 * Copies the user stack from sp up, page by page, until FP_OFFCPU_STACK_MAX
 * bytes or the first page that cannot be read (the end of the stack's
 * mapping). Returns the bytes copied. Runs in the thread's own context.
 */
static __always_inline __u32 copy_stack(__u8 *dst, __u64 sp)
{
        __u32 first = PAGE - (__u32)(sp & (PAGE - 1)), done;

        if (first > PAGE)
                return 0;
        if (bpf_probe_read_user(dst, first, (const void *)sp))
                return 0;
        done = first;
        for (int i = 0; i < FP_OFFCPU_STACK_MAX / PAGE - 1; i++) {
                if (done > FP_OFFCPU_STACK_MAX - PAGE)
                        break;
                if (bpf_probe_read_user(dst + done, PAGE, (const void *)(sp + done)))
                        break;
                done += PAGE;
        }
        return done;
}

#define PYWALK_TSTATES py_tstates
#include "pywalk.bpf.h"
#include "phpwalk.bpf.h"
#include "rubywalk.bpf.h"
#include "perlwalk.bpf.h"

/*
 * Writes the Python stack of thread tid of process tgid (fsbase its fs
 * base) as a FP_OFFCPU_PYTHON record stamped time, when the process runs a
 * CPython: just before the record of its native stack. Once per stack
 * copy, not inlined in each of emit()'s callers; a global function (its
 * arguments all scalars), so that the verifier checks the walks once, not
 * once at each of emit()'s callers.
 */
__noinline int emit_python(__u32 tgid, __u32 tid, __u64 fsbase, __u64 time)
{
        struct fp_pystack_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
        __u32 zero = 0;
        struct scratch *sc;
        __u64 n;

        if (!p)
                return 0;
        sc = bpf_map_lookup_elem(&scratch, &zero);
        if (!sc)
                return 0;
        sc->py.kind = FP_OFFCPU_PYTHON;
        sc->py.py.tid = tid;
        sc->py.py.tgid = tgid;
        sc->py.py.time_ns = time;
        if (p->kind == FP_PYSTACK_PHP)
                phpwalk_read(p, (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()),
                             &sc->py.py);
        else if (p->kind == FP_PYSTACK_RUBY)
                rubywalk_read(p, fsbase,
                              (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()),
                              &sc->py.py);
        else if (p->kind == FP_PYSTACK_PERL)
                perlwalk_read(p, fsbase, &sc->py.py);
        else
                pywalk_read(p, tid, fsbase, &sc->py.py);
        n = sc->py.py.n_frames;
        if (n > FP_PYSTACK_MAX_FRAMES)
                n = FP_PYSTACK_MAX_FRAMES;
        /* Never a wake-up: the stack's record, right after, decides that. */
        return bpf_ringbuf_output(&records, &sc->py,
                                  FP_OFFCPU_PY_HEADER_LEN + n * sizeof(struct fp_pystack_frame),
                                  BPF_RB_NO_WAKEUP);
}

static __always_inline void count_lost(struct fp_offcpu_target *tv, __u64 *counter, const __u64 *w)
{
        __u64 ns = 0;
        for (int i = 0; i < FP_OFFCPU_REASONS; i++)
                if (w[i]) {
                        __sync_fetch_and_add(counter, 1);
                        ns += w[i];
                }
        __sync_fetch_and_add(&tv->lost_ns, ns);
}

/*
 * Writes a record of kind with weights w (STACK: none) and, for CALL and
 * STACK, the user registers regs of task and its stack, read in the
 * current address space (task's own, or its process's). 0, or -LOST_COPY
 * or -LOST_RING with the loss counted in tv.
 */
static __always_inline int emit(struct fp_offcpu_target *tv, __u32 tier, __u32 kind,
                                struct task_struct *task, struct pt_regs *regs, __u32 seq,
                                const __u64 *w)
{
        __u32 zero = 0, len = 0;
        struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
        struct fp_offcpu_record *r;
        int e = -LOST_COPY;

        if (!sc || sc->busy) {
                if (w) /* another program on this CPU is writing (only when preemptible) */
                        count_lost(tv, &tv->lost_copy, w);
                return -LOST_COPY;
        }
        sc->busy = 1;
        r = &sc->r;
        r->kind = kind;
        r->tid = task->pid;
        r->tgid = task->tgid;
        r->seq = seq;
        r->tier = tier;
        r->time_ns = bpf_ktime_get_ns();
        r->cgroup = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
        for (int i = 0; i < FP_OFFCPU_REASONS; i++)
                r->weight[i] = w ? w[i] : 0;
        r->stack_len = 0;
        if (kind != FP_OFFCPU_WEIGHTS) {
                if (python)
                        (void)emit_python(r->tgid, r->tid, pywalk_fsbase(task), r->time_ns);
                r->ip = regs->ip;
                r->sp = regs->sp;
                r->bp = regs->bp;
                len = copy_stack(r->stack, r->sp);
                if (!len) {
                        if (w)
                                count_lost(tv, &tv->lost_copy, w);
                        goto out;
                }
                r->stack_len = len;
        }
        __u64 size = FP_OFFCPU_HEADER_LEN + len;
        if (size > sizeof(*r))
                goto out;
        /* Woken at a quarter full: the agent also reads every 100 ms. */
        __u64 wake = bpf_ringbuf_query(&records, BPF_RB_AVAIL_DATA) > (1 << 20)
                         ? BPF_RB_FORCE_WAKEUP
                         : BPF_RB_NO_WAKEUP;
        if (bpf_ringbuf_output(&records, r, size, wake)) {
                if (w)
                        count_lost(tv, &tv->lost_ring, w);
                e = -LOST_RING;
                goto out;
        }
        e = 0;
out:
        sc->busy = 0;
        return e;
}

/*
 * Keeps a part of d ns with probability min(1, d/T): its weight, or 0.
 * The draw is uniform on [0, T) by a multiply and a shift (a 32-bit
 * random number modulo T would favour low values: by 16% at T = 1 s).
 */
static __always_inline __u64 keep(__u64 d, __u64 period)
{
        if (d >= period)
                return d;
        if (d && (((__u64)bpf_get_prandom_u32() * period) >> 32) < d)
                return period;
        return 0;
}

/*
 * Whether a sampled block gets its copy: every scale-th of the thread's
 * blocks of that scale, the first at random among the first scale. Each
 * block's chance is 1/scale, as with a draw for each, but the copies
 * are spread evenly, so only the blocks' own unevenness is left: 1,000
 * equal preemptions, each drawn one time in 16, would put the thread's
 * run-queue time 12% off (one standard deviation); taken every 16th
 * time, they put it within a block of exact.
 */
static __always_inline bool take_copy(__u8 *countdown, __u32 scale)
{
        if (!*countdown)
                *countdown = (__u8)(1 + bpf_get_prandom_u32() % scale);
        if (--*countdown)
                return false;
        *countdown = (__u8)scale;
        return true;
}

static __always_inline void switch_out(struct task_struct *prev, struct task_struct *next,
                                       bool preempt, unsigned int state)
{
        struct fp_offcpu_target *tv;
        struct thread_state *ts;
        struct pt_regs *regs;
        __u32 tier;

        if (prev->flags & PF_KTHREAD)
                return;
        tv = target_of(prev->tgid, &tier);
        if (!tv)
                return;
        if (state & TASK_DEAD) {
                ts = bpf_task_storage_get(&threads, prev, 0, 0);
                if (ts && (ts->has_pending || ts->await_resume)) {
                        count_lost(tv, &tv->lost_exited, ts->pending);
                        ts->has_pending = 0;
                        ts->await_resume = 0;
                }
                return;
        }
        ts = bpf_task_storage_get(&threads, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
        if (!ts)
                return;
        ts->off_ns = bpf_ktime_get_ns();
        /* Preempted, or yielding while runnable: waiting for a CPU from now. */
        ts->wake_ns =
            preempt || !(state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)) ? ts->off_ns : 0;
        ts->reason = state & TASK_UNINTERRUPTIBLE ? FP_OFFCPU_UNINTERRUPTIBLE : FP_OFFCPU_SLEEP;
        regs = (struct pt_regs *)bpf_task_pt_regs(prev);
        /* Parts waiting for a way back to user mode that never came (it went elsewhere). */
        if (ts->await_resume &&
            (frame_of(regs) != FRAME_AFTER_CALL || regs->ip != ts->ip || regs->sp != ts->sp)) {
                count_lost(tv, &tv->lost_changed, ts->pending);
                for (int i = 0; i < FP_OFFCPU_REASONS; i++)
                        ts->pending[i] = 0;
                ts->await_resume = 0;
        }
        ts->ip = regs->ip;
        ts->sp = regs->sp;
        ts->frame = frame_of(regs);
        ts->stacked = 0;
        ts->stack_err = 0;
        ts->scale = 1;
        /*
         * After a call, the stack waits for the thread's way back to user mode
         * (parts already waiting stay: it has not been there since, its user
         * state is the same).
         */
        ts->at_resume = ts->frame == FRAME_AFTER_CALL && resume_hook && has_rseq(prev);
        /* The host tier samples its preemptions' copies too: a busy host has many. */
        ts->sampled = (ts->frame == FRAME_AFTER_CALL && !ts->at_resume) ||
                      (ts->frame == FRAME_OTHER && tier == FP_OFFCPU_HOST);
        /*
         * A waker handing the CPU to a sibling most likely comes back after
         * one too (read then): its copy is rarer. A preempted thread comes
         * back after whoever ran.
         */
        bool copy = ts->frame != FRAME_CALL && !ts->at_resume;
        if (ts->sampled) {
                bool sibling = ts->frame == FRAME_AFTER_CALL && prev->mm == next->mm;
                ts->scale = sibling ? AFTER_CALL_SIBLING : AFTER_CALL_SAMPLING;
                copy = take_copy(sibling ? &ts->countdown_sibling : &ts->countdown, ts->scale);
        }
        if (copy) {
                int e;
                ts->seq++;
                e = emit(tv, tier, FP_OFFCPU_STACK, prev, regs, ts->seq, 0);
                ts->stacked = e == 0;
                ts->stack_err = e == 0 ? 0 : e == -LOST_RING ? LOST_RING : LOST_COPY;
        }
}

/*
 * The kept parts w of next's block get their stack. Inside a call: at its
 * sys_exit. After a call: read now when the thread that leaves the CPU
 * shares next's address space (its stack is then readable, and unchanged:
 * next has not run), else on next's way back to user mode where the
 * kernel updates its rseq area (at_resume), else from the sampled copy of
 * the switch-out, if it was taken (weighing 1/(its chance) times: not
 * taking it is part of the estimate, not a loss). Elsewhere: the copy of
 * the switch-out.
 * Returns the kept parts given a stack.
 */
static __always_inline __u64 give_stack(struct fp_offcpu_target *tv, __u32 tier,
                                        struct thread_state *ts, struct task_struct *prev,
                                        struct task_struct *next, __u64 *w)
{
        __u64 n = (w[0] != 0) + (w[1] != 0) + (w[2] != 0);
        struct mm_struct *mm;

        if (ts->frame == FRAME_CALL) {
                for (int i = 0; i < FP_OFFCPU_REASONS; i++)
                        ts->pending[i] += w[i];
                ts->has_pending = 1;
                return n;
        }
        mm = next->mm;
        if ((ts->sampled || ts->at_resume) && mm && mm == prev->mm) {
                (void)emit(tv, tier, FP_OFFCPU_CALL, next, (struct pt_regs *)bpf_task_pt_regs(next),
                           0, w);
                return n;
        }
        if (ts->at_resume) {
                for (int i = 0; i < FP_OFFCPU_REASONS; i++)
                        ts->pending[i] += w[i];
                ts->await_resume = 1;
                return n;
        }
        if (ts->stacked) {
                for (int i = 0; i < FP_OFFCPU_REASONS; i++)
                        w[i] *= ts->scale;
                (void)emit(tv, tier, FP_OFFCPU_WEIGHTS, next, 0, ts->seq, w);
                return n;
        }
        if (ts->sampled && !ts->stack_err)
                return 0; /* not sampled */
        count_lost(tv, ts->stack_err == LOST_RING ? &tv->lost_ring : &tv->lost_copy, w);
        return n;
}

static __always_inline void switch_in(struct task_struct *prev, struct task_struct *next)
{
        struct thread_state *ts = bpf_task_storage_get(&threads, next, 0, 0);
        __u64 now, wake, w[FP_OFFCPU_REASONS] = {};
        struct fp_offcpu_target *tv;
        __u32 tier;

        if (!ts || !ts->off_ns)
                return;
        now = bpf_ktime_get_ns();
        tv = target_of(next->tgid, &tier);
        if (tv && tv->period) {
                wake = ts->wake_ns && ts->wake_ns <= now ? ts->wake_ns : now;
                if (ts->reason < FP_OFFCPU_REASONS)
                        w[ts->reason == FP_OFFCPU_UNINTERRUPTIBLE] =
                            keep(wake - ts->off_ns, tv->period);
                w[FP_OFFCPU_RUNQUEUE] = keep(now - wake, tv->period);
                __sync_fetch_and_add(&tv->parts, (wake > ts->off_ns) + (now > wake));
                if (w[0] | w[1] | w[2])
                        __sync_fetch_and_add(&tv->kept, give_stack(tv, tier, ts, prev, next, w));
        }
        ts->off_ns = 0;
        ts->wake_ns = 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(fp_offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state)
{
        switch_out(prev, next, preempt, prev_state);
        switch_in(prev, next);
        return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(fp_offcpu_wakeup, struct task_struct *p)
{
        struct thread_state *ts = bpf_task_storage_get(&threads, p, 0, 0);

        if (ts && ts->off_ns && !ts->wake_ns)
                ts->wake_ns = bpf_ktime_get_ns();
        return 0;
}

/*
 * The kept parts waiting in ts->pending get task's stack now, in its own
 * context with its user registers regs, if those are still the ones it
 * waited with (else they are counted as lost: lost_changed); either way
 * they are done with.
 */
static __always_inline void give_pending(struct task_struct *task, struct thread_state *ts,
                                         struct pt_regs *regs)
{
        __u32 tier;
        struct fp_offcpu_target *tv = target_of(task->tgid, &tier);

        if (tv) {
                if (regs->ip != ts->ip || regs->sp != ts->sp)
                        count_lost(tv, &tv->lost_changed, ts->pending);
                else
                        (void)emit(tv, tier, FP_OFFCPU_CALL, task, regs, 0, ts->pending);
        }
        for (int i = 0; i < FP_OFFCPU_REASONS; i++)
                ts->pending[i] = 0;
}

/*
 * A thread on its way back to user mode after a switch, in its own context,
 * its user registers and stack as it left them (the kernel updates its
 * rseq area here; only threads that registered one come). Kept parts after
 * a returned call get their stack now.
 */
SEC("tp_btf/rseq_update")
int BPF_PROG(fp_offcpu_resume, struct task_struct *t)
{
        struct task_struct *task = bpf_get_current_task_btf();
        struct thread_state *ts = bpf_task_storage_get(&threads, task, 0, 0);

        if (!ts || !ts->await_resume)
                return 0;
        ts->await_resume = 0;
        /* A signal's frame or an rseq abort moved it: not where it waited. */
        give_pending(task, ts, (struct pt_regs *)bpf_task_pt_regs(task));
        return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(fp_offcpu_sys_exit, struct pt_regs *regs, long ret)
{
        struct task_struct *task = bpf_get_current_task_btf();
        struct thread_state *ts = bpf_task_storage_get(&threads, task, 0, 0);

        if (!ts || !ts->has_pending)
                return 0;
        ts->has_pending = 0;
        /* Not the call it blocked in (a fault's frame taken for a call's): no stack. */
        give_pending(task, ts, regs);
        return 0;
}
