// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The walk of a Perl thread's context stacks in BPF (perl.h), shared by
 * the sampling program (pystack.bpf.c) and the off-CPU one (offcpu.bpf.c).
 *
 * The thread's interpreter is its PL_current_context: in the executable's
 * static TLS block (at the thread pointer plus perl.tls_offset), or in
 * libperl's own block (the thread pointer leads to its dynamic thread
 * vector, tcbhead_t.dtv 8 bytes in, whose entry for libperl's module, 16
 * bytes each, is the block). From PL_curstackinfo's topmost sub
 * (si_cxsubix) down each context's old_cxsubix, innermost first: a sub's
 * or a format's CV at the line of the statement it runs (PL_curcop for
 * the innermost, then each context's blk_oldcop for the one below), an
 * eval only moving the line on. Then si_prev's stack, down to the main
 * one (never si_next: a spare kept for reuse). The main stack's bottom,
 * when it is the main program's file scope (a CXt_BLOCK whose blk_oldcop
 * is &PL_compiling), is a frame of its own (FP_PYSTACK_MAIN, its code the
 * interpreter).
 *
 * FP_PYSTACK_ENTRY marks the outermost frame of each run level (one
 * Perl_runops_* frame): a sub called from C has no return op, and each
 * stack but the main one begins a level.
 *
 * The includer includes pywalk.bpf.h (read_ptr()) first. Memory is read
 * in the current address space: the thread's process's.
 */
#pragma once

#include "pystack.h"

/* The walk's state: what perl_step() keeps from one step to the next. */
struct perl_state {
        __u64 interp, si, cxstack, cop;
        __s32 ix, si_type;
        __u32 n, status;
        __u8 si_open;
};

struct perl_walk {
        const struct fp_pystack_proc *p;
        struct fp_pystack_record *r;
        struct perl_state s;
};

static __always_inline __u32 perl_line(const struct fp_pystack_perl *l, __u64 cop)
{
        __u32 line = 0;

        if (cop)
                bpf_probe_read_user(&line, 4, (const void *)(cop + l->cop_line));
        return line;
}

/* The last frame written ends a run level. */
static __always_inline void perl_entry(struct perl_state *w, struct fp_pystack_record *r)
{
        __u32 k = w->n - 1;

        if (w->n && k < FP_PYSTACK_MAX_FRAMES)
                r->frames[k].flags |= FP_PYSTACK_ENTRY;
}

/*
 * One step of the walk: 1 when it ends. A global function, which the
 * verifier checks once, with every field of the state unknown (inlined in
 * the bpf_loop callback it was checked step after step, each with the
 * state's values of the last: 95,000 instructions of the 440,000 the
 * programs' walks took, 1 s a program).
 */
__noinline int perl_step_g(struct perl_state *w, const struct fp_pystack_perl *l,
                           struct fp_pystack_record *r)
{
        __u64 cx, cv, body, oldcop, retop;
        __s32 next = -1;
        __u8 type = 0, t;
        __u32 n;

        if (!w || !l || !r)
                return 1;
        n = w->n;
        if (!w->si_open) {
                /* A stack's contexts: its topmost sub, its kind. */
                w->cxstack = read_ptr(w->si + l->si_cxstack);
                if (!w->cxstack ||
                    bpf_probe_read_user(&w->ix, 4, (const void *)(w->si + l->si_cxsubix)) ||
                    bpf_probe_read_user(&w->si_type, 4, (const void *)(w->si + l->si_type))) {
                        w->status = FP_PYSTACK_UNREADABLE;
                        return 1;
                }
                w->si_open = 1;
                return 0;
        }
        if (w->ix < 0) {
                if (w->si_type != l->si_main) {
                        /* The bottom of a sort's or magic's stack: a run level begins there. */
                        perl_entry(w, r);
                        w->si = read_ptr(w->si + l->si_prev);
                        w->si_open = 0;
                        return w->si ? 0 : 1;
                }
                /* The main stack's bottom: the main program's file scope, or (a thread's, an
                 * embedder's call) none. */
                bpf_probe_read_user(&type, 1, (const void *)w->cxstack);
                oldcop = read_ptr(w->cxstack + l->cx_oldcop);
                if ((type & l->cxt_mask) == l->cxt_block && oldcop &&
                    oldcop == w->interp + l->interp_compiling && n < FP_PYSTACK_MAX_FRAMES) {
                        r->frames[n].code = w->interp;
                        r->frames[n].instr = perl_line(l, w->cop);
                        r->frames[n].flags = FP_PYSTACK_MAIN;
                        r->frames[n].stamp = FP_PYSTACK_STAMP(w->interp, 0);
                        w->n = n + 1;
                }
                perl_entry(w, r);
                return 1;
        }
        if (n >= FP_PYSTACK_MAX_FRAMES) {
                w->status = FP_PYSTACK_TRUNCATED;
                return 1;
        }
        cx = w->cxstack + (__u64)w->ix * (__u64)l->cx_size;
        if (bpf_probe_read_user(&type, 1, (const void *)cx) || /* cx_type: its first byte */
            bpf_probe_read_user(&next, 4, (const void *)(cx + l->cx_old_cxsubix))) {
                w->status = FP_PYSTACK_UNREADABLE; /* the top context half-written */
                return 1;
        }
        oldcop = read_ptr(cx + l->cx_oldcop);
        t = type & l->cxt_mask;
        if ((t == l->cxt_sub || t == l->cxt_format) && !(type & l->cxp_sub_re_fake)) {
                cv = read_ptr(cx + l->cx_cv);
                retop = read_ptr(cx + l->cx_retop);
                body = cv ? read_ptr(cv + l->sv_any) : 0;
                r->frames[n].code = cv;
                r->frames[n].instr = perl_line(l, w->cop);
                r->frames[n].flags = retop ? 0 : FP_PYSTACK_ENTRY;
                r->frames[n].stamp = FP_PYSTACK_STAMP(body, body ? read_ptr(body + l->xcv_gv) : 0);
                w->n = n + 1;
        } else if (t != l->cxt_eval && t != l->cxt_sub && t != l->cxt_format) {
                w->status = FP_PYSTACK_UNREADABLE; /* si_cxsubix names only those */
                return 1;
        }
        w->cop = oldcop;
        /* Each such context's old_cxsubix is the next one below; one above it is corrupt. */
        if (next >= w->ix)
                next = -1;
        w->ix = next;
        return 0;
}

static long perl_step(__u32 i, void *ctx)
{
        struct perl_walk *w = ctx;

        return perl_step_g(&w->s, &w->p->perl, w->r) ? 1 : 0;
}

/* Reads the Perl stack of the current thread (process p, thread pointer fsbase) into r. */
static __always_inline void perlwalk_read(const struct fp_pystack_proc *p, __u64 fsbase,
                                          struct fp_pystack_record *r)
{
        const struct fp_pystack_perl *l = &p->perl;
        struct perl_walk w = {.p = p, .r = r};
        __u64 block = 0;

        r->status = FP_PYSTACK_OK;
        r->n_frames = 0;
        if (fsbase && l->tls_module) {
                __u64 dtv = read_ptr(fsbase + 8);
                block = dtv ? read_ptr(dtv + 16 * l->tls_module) : 0;
                if (block == (__u64)-1)
                        block = 0; /* not allocated in this thread: it never ran Perl */
        } else if (fsbase) {
                block = fsbase;
        }
        w.s.interp = block ? read_ptr(block + (__u64)l->tls_offset) : 0;
        if (!w.s.interp) {
                r->status = FP_PYSTACK_NO_THREAD_STATE; /* no Perl in this thread (yet) */
                return;
        }
        w.s.cop = read_ptr(w.s.interp + l->interp_curcop);
        w.s.si = read_ptr(w.s.interp + l->interp_curstackinfo);
        if (!w.s.si) {
                r->status = FP_PYSTACK_UNREADABLE;
                return;
        }
        /* Two steps a stack (its head, its bottom) beside one a frame. */
        bpf_loop(FP_PYSTACK_MAX_FRAMES + 32, perl_step, &w, 0);
        if (w.s.status == FP_PYSTACK_OK && (w.s.si_open ? w.s.ix >= 0 : w.s.si != 0))
                w.s.status = FP_PYSTACK_TRUNCATED;
        r->status = w.s.status;
        r->n_frames = w.s.n;
}
