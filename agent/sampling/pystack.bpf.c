// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Python stacks at sample time, the kernel side: see pystack.h.
 *
 * One perf_event program, run by each sampling event the loader attaches
 * it to, before the sample is written (it always keeps the sample). For a
 * process in procs it finds the sampled thread's PyThreadState (a cache by
 * tid, checked against the state's own thread id, else a walk of the
 * interpreter's thread list), then walks the frame chain from the
 * thread's current frame, reading each frame's code object, instruction
 * and caller, and writes one record to the ring: frames innermost first,
 * FP_PYSTACK_ENTRY on the outermost frame of each C-level evaluation.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "pystack.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define FRAME_OWNED_BY_CSTACK 3 /* 3.12+: the C stack's entry shim of an evaluation */

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, __u32);
        __type(value, struct fp_pystack_proc);
} procs SEC(".maps");

/* tid -> its PyThreadState, as last found (checked before each use). */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 65536);
        __type(key, __u32);
        __type(value, __u64);
} tstates SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 4 << 20);
} records SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct fp_pystack_record);
} scratch SEC(".maps");

static __always_inline __u64 read_ptr(__u64 addr)
{
        __u64 v = 0;

        if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
                return 0;
        return v;
}

/* Whether thread state ts is the sampled thread's (tid; fsbase its pthread_self()). */
static __always_inline bool is_thread(const struct fp_pystack_proc *p, __u64 ts, __u32 tid,
                                      __u64 fsbase)
{
        if (p->tstate_native_thread_id >= 0)
                return read_ptr(ts + p->tstate_native_thread_id) == tid;
        return fsbase && read_ptr(ts + p->tstate_thread_id) == fsbase;
}

/* The thread list's walk, one state a step (bpf_loop keeps the verifier's work small). */
struct thread_walk {
        const struct fp_pystack_proc *p;
        __u64 ts, fsbase, found;
        __u32 tid;
};

static long thread_step(__u32 i, void *ctx)
{
        struct thread_walk *w = ctx;

        if (!w->ts)
                return 1;
        if (is_thread(w->p, w->ts, w->tid, w->fsbase)) {
                w->found = w->ts;
                return 1;
        }
        w->ts = read_ptr(w->ts + w->p->tstate_next);
        return 0;
}

static __always_inline __u64 find_tstate(const struct fp_pystack_proc *p, __u32 tid)
{
        struct task_struct *task = bpf_get_current_task_btf();
        struct thread_walk w = {.p = p, .tid = tid};
        __u64 *cached, interp;

#if defined(__TARGET_ARCH_x86)
        w.fsbase = task->thread.fsbase;
#endif
        cached = bpf_map_lookup_elem(&tstates, &tid);
        if (cached && *cached && is_thread(p, *cached, tid, w.fsbase))
                return *cached;
        interp = read_ptr(p->runtime + p->runtime_interp_head);
        if (!interp)
                return 0;
        w.ts = read_ptr(interp + p->interp_tstate_head);
        bpf_loop(FP_PYSTACK_MAX_THREADS, thread_step, &w, 0);
        if (w.found)
                bpf_map_update_elem(&tstates, &tid, &w.found, BPF_ANY);
        return w.found;
}

/* The frame chain's walk, one frame a step. */
struct frame_walk {
        const struct fp_pystack_proc *p;
        struct fp_pystack_record *r;
        __u64 frame;
        __u32 n, status;
};

static long frame_step(__u32 i, void *ctx)
{
        struct frame_walk *w = ctx;
        const struct fp_pystack_proc *p = w->p;
        __u64 frame = w->frame, code, instr = 0;
        __u8 owner = 0, entry = 0;
        __u32 n = w->n;

        if (!frame)
                return 1;
        if (p->frame_owner >= 0 &&
            bpf_probe_read_user(&owner, 1, (const void *)(frame + p->frame_owner))) {
                w->status = FP_PYSTACK_UNREADABLE;
                return 1;
        }
        if (owner == FRAME_OWNED_BY_CSTACK) {
                /* The frames since the last shim were one evaluation's. */
                if (n > 0 && n <= FP_PYSTACK_MAX_FRAMES)
                        w->r->frames[n - 1].flags |= FP_PYSTACK_ENTRY;
                w->frame = read_ptr(frame + p->frame_previous);
                return 0;
        }
        if (n >= FP_PYSTACK_MAX_FRAMES) {
                w->status = FP_PYSTACK_TRUNCATED;
                return 1;
        }
        code = read_ptr(frame + p->frame_code);
        if (!code) {
                w->status = FP_PYSTACK_UNREADABLE;
                return 1;
        }
        if (p->minor <= 10) {
                __s32 lasti = 0;
                if (bpf_probe_read_user(&lasti, 4, (const void *)(frame + p->frame_instr))) {
                        w->status = FP_PYSTACK_UNREADABLE;
                        return 1;
                }
                instr = (__u64)(__s64)lasti;
                entry = 1; /* one evaluation per frame */
        } else {
                instr = read_ptr(frame + p->frame_instr);
                if (p->frame_is_entry >= 0 &&
                    bpf_probe_read_user(&entry, 1, (const void *)(frame + p->frame_is_entry))) {
                        w->status = FP_PYSTACK_UNREADABLE;
                        return 1;
                }
        }
        {
                __s32 first = 0;
                __u64 name = read_ptr(code + p->code_name);
                bpf_probe_read_user(&first, 4, (const void *)(code + p->code_firstlineno));
                w->r->frames[n].stamp = FP_PYSTACK_STAMP(name, first);
        }
        w->r->frames[n].code = code;
        w->r->frames[n].instr = instr;
        w->r->frames[n].flags = entry ? FP_PYSTACK_ENTRY : 0;
        w->n = n + 1;
        w->frame = read_ptr(frame + p->frame_previous);
        return 0;
}

SEC("perf_event")
int fp_pystack_sample(struct bpf_perf_event_data *ctx)
{
        __u64 id = bpf_get_current_pid_tgid(), ts;
        __u32 tgid = id >> 32, tid = (__u32)id, zero = 0, n;
        struct fp_pystack_proc *p = bpf_map_lookup_elem(&procs, &tgid);
        struct fp_pystack_record *r;

        if (!p)
                return 1;
        r = bpf_map_lookup_elem(&scratch, &zero);
        if (!r)
                return 1;
        r->tid = tid;
        r->tgid = tgid;
        r->time_ns = bpf_ktime_get_ns();
        r->status = FP_PYSTACK_OK;
        r->n_frames = 0;
        ts = find_tstate(p, tid);
        if (!ts) {
                r->status = FP_PYSTACK_NO_THREAD_STATE;
        } else {
                struct frame_walk w = {.p = p, .r = r};
                w.frame = read_ptr(ts + p->tstate_frame);
                if (w.frame && p->cframe_current_frame >= 0)
                        w.frame = read_ptr(w.frame + p->cframe_current_frame);
                /* Shims between evaluations take steps too: room for some. */
                bpf_loop(FP_PYSTACK_MAX_FRAMES + 32, frame_step, &w, 0);
                if (w.frame && w.status == FP_PYSTACK_OK)
                        w.status = FP_PYSTACK_TRUNCATED;
                r->status = w.status;
                r->n_frames = w.n;
        }
        n = r->n_frames;
        if (n > FP_PYSTACK_MAX_FRAMES)
                n = FP_PYSTACK_MAX_FRAMES;
        bpf_ringbuf_output(&records, r,
                           FP_PYSTACK_HEADER_LEN + (__u64)n * sizeof(struct fp_pystack_frame), 0);
        return 1;
}
