// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The walk of a CPython thread's frames in BPF, shared by the sampling
 * program (pystack.bpf.c) and the off-CPU one (offcpu.bpf.c): find the
 * thread's PyThreadState (a cache by tid, checked against the state's own
 * thread id, else a walk of the interpreter's thread list), then follow
 * its frame chain from the current frame, reading each frame's code
 * object, instruction and caller: frames innermost first,
 * FP_PYSTACK_ENTRY on the outermost frame of each C-level evaluation.
 *
 * The includer defines PYWALK_TSTATES, its LRU hash map of tid -> thread
 * state, before including this. Memory is read in the current address
 * space: the thread's process's.
 */
#pragma once

#include "pystack.h"

#define FRAME_OWNED_BY_CSTACK 3 /* 3.12+: the C stack's entry shim of an evaluation */

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

static __always_inline __u64 find_tstate(const struct fp_pystack_proc *p, __u32 tid, __u64 fsbase)
{
        struct thread_walk w = {.p = p, .tid = tid, .fsbase = fsbase};
        __u64 *cached, interp;

        cached = bpf_map_lookup_elem(&PYWALK_TSTATES, &tid);
        if (cached && *cached && is_thread(p, *cached, tid, w.fsbase))
                return *cached;
        interp = read_ptr(p->runtime + p->runtime_interp_head);
        if (!interp)
                return 0;
        w.ts = read_ptr(interp + p->interp_tstate_head);
        bpf_loop(FP_PYSTACK_MAX_THREADS, thread_step, &w, 0);
        if (w.found)
                bpf_map_update_elem(&PYWALK_TSTATES, &tid, &w.found, BPF_ANY);
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

/* The thread's fs base (x86-64's pthread_self()): how 3.7-style states name their thread. */
static __always_inline __u64 pywalk_fsbase(struct task_struct *task)
{
#if defined(__TARGET_ARCH_x86)
        return task->thread.fsbase;
#else
        return 0;
#endif
}

/*
 * Reads thread tid's Python stack (process p) into r: its status and
 * frames. The header's other fields are the caller's.
 */
static __always_inline void pywalk_read(const struct fp_pystack_proc *p, __u32 tid, __u64 fsbase,
                                        struct fp_pystack_record *r)
{
        __u64 ts = find_tstate(p, tid, fsbase);

        r->status = FP_PYSTACK_OK;
        r->n_frames = 0;
        if (!ts) {
                r->status = FP_PYSTACK_NO_THREAD_STATE;
                return;
        }
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
