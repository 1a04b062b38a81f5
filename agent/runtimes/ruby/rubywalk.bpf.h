// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The walk of a Ruby thread's control frames in BPF (ruby.h), shared by
 * the sampling program (pystack.bpf.c) and the off-CPU one (offcpu.bpf.c).
 *
 * The thread's execution context is its ruby_current_ec, in libruby's
 * TLS block: the thread pointer (fsbase) leads to its dynamic thread
 * vector (tcbhead_t.dtv, 8 bytes in), whose entry for libruby's module
 * (16 bytes each) is the block. From ec->cfp up to the end of its VM
 * stack (the last frame, the thread's own dummy, left out), innermost
 * first: a Ruby frame's iseq and pc, or (a C function's frame) its method
 * entry, ep[-2] (an imemo_ment, or an imemo_svar holding one), which a
 * Ruby frame records too for its name's class (a block's is its method's:
 * the first down its eps, ep[-1], to the local one, as
 * rb_vm_frame_method_entry() finds it);
 * FP_PYSTACK_ENTRY on each frame pushed from C (VM_FRAME_FLAG_FINISH in
 * ep[0]): the outermost of one rb_vm_exec.
 *
 * The running frame's pc: the VM's loop (vm_exec_core) keeps it in a
 * register (r14 on x86-64, the frame in r15) and stores it in the frame
 * before what needs it, so the frame's own may be an instruction behind;
 * while r15 is the innermost frame and r14 inside its instructions, r14
 * is it.
 *
 * The includer includes pywalk.bpf.h (read_ptr()) first. Memory is read
 * in the current address space: the thread's process's.
 */
#pragma once

#include "pystack.h"

#define FP_RUBY_BLOCK_DEPTH 8 /* envs down to a block's method's, at most */

struct ruby_walk {
        const struct fp_pystack_proc *p;
        struct fp_pystack_record *r;
        __u64 cfp, end;
        __u64 reg_cfp, reg_pc; /* the VM's registers (ruby_step()), 0: unknown */
        __u32 n, status;
};

/* v if it is a heap object of imemo type t, else 0. */
static __always_inline __u64 ruby_imemo(const struct fp_pystack_ruby *l, __u64 v, __u8 t)
{
        __u64 flags;

        if (!v || (v & 7))
                return 0;
        flags = read_ptr(v);
        if ((flags & l->t_mask) != l->t_imemo || ((flags >> l->fl_ushift) & 0xf) != t)
                return 0;
        return v;
}

/* The method entry at ep[-2], directly or in an svar: 0 when it holds none (a cref). */
static __always_inline __u64 ruby_me(const struct fp_pystack_ruby *l, __u64 ep)
{
        __u64 me = read_ptr(ep - 16), svar = ruby_imemo(l, me, l->imemo_svar);

        if (svar)
                me = read_ptr(svar + 8);
        return ruby_imemo(l, me, l->imemo_ment);
}

/*
 * The method entry a Ruby frame of env ep runs in: its own, or its block's
 * method's. A global function, which the verifier checks once (inlined in
 * ruby_step() it checked the unrolled loop again at each of the walk's
 * steps: 340,000 of the 440,000 instructions a program took, 1 s each).
 */
__noinline __u64 ruby_frame_me(const struct fp_pystack_ruby *l, __u64 ep, __u64 flags)
{
        if (!l)
                return 0;
        for (int k = 0; k < FP_RUBY_BLOCK_DEPTH; k++) {
                __u64 me = ruby_me(l, ep);
                if (me || (flags & l->env_local))
                        return me;
                ep = read_ptr(ep - 8) & ~3ULL;
                if (!ep || bpf_probe_read_user(&flags, 8, (const void *)ep))
                        return 0;
        }
        return 0;
}

static long ruby_step(__u32 i, void *ctx)
{
        struct ruby_walk *w = ctx;
        const struct fp_pystack_ruby *l = &w->p->ruby;
        __u64 cfp = w->cfp, iseq, pc, ep, flags, code, stamp_a, stamp_b, instr = 0, me = 0;
        __u32 n = w->n, kind = 0;

        if (cfp + l->cfp_size >= w->end)
                return 1; /* the thread's first frame, its dummy */
        if (n >= FP_PYSTACK_MAX_FRAMES) {
                w->status = FP_PYSTACK_TRUNCATED;
                return 1;
        }
        w->cfp = cfp + l->cfp_size;
        ep = read_ptr(cfp + l->cfp_ep);
        if (!ep || bpf_probe_read_user(&flags, 8, (const void *)ep)) {
                w->status = FP_PYSTACK_UNREADABLE;
                return 1;
        }
        if (!(flags & l->frame_cframe)) {
                iseq = read_ptr(cfp + l->cfp_iseq);
                pc = read_ptr(cfp + l->cfp_pc);
                if (!iseq || !pc)
                        return 0; /* a dummy frame: none to show */
                __u64 body = read_ptr(iseq + l->iseq_body);
                if (cfp == w->reg_cfp && n == 0) {
                        __u64 start = read_ptr(body + l->body_iseq_encoded);
                        __u32 size = 0;
                        bpf_probe_read_user(&size, 4, (const void *)(body + l->body_iseq_size));
                        if (w->reg_pc >= start && w->reg_pc < start + (__u64)size * 8)
                                pc = w->reg_pc;
                }
                code = iseq;
                instr = pc;
                stamp_a = read_ptr(body + l->body_label);
                stamp_b = read_ptr(body + l->body_first_lineno);
                me = ruby_frame_me(l, ep, flags);
        } else {
                code = ruby_me(l, ep);
                if (!code)
                        return 0; /* a block of C (an ifunc): no method */
                kind = FP_PYSTACK_NATIVE;
                stamp_a = read_ptr(code + l->me_def);
                stamp_b = read_ptr(stamp_a + l->def_original_id);
        }
        w->r->frames[n].code = code;
        w->r->frames[n].instr = instr;
        w->r->frames[n].flags = kind | ((flags & l->frame_finish) ? FP_PYSTACK_ENTRY : 0);
        w->r->frames[n].stamp = FP_PYSTACK_STAMP(stamp_a, stamp_b);
        w->r->frames[n].aux = me;
        w->n = n + 1;
        return 0;
}

/*
 * Reads the Ruby stack of the current thread (process p, thread pointer
 * fsbase, regs its user registers or NULL) into r.
 */
static __always_inline void rubywalk_read(const struct fp_pystack_proc *p, __u64 fsbase,
                                          struct pt_regs *regs, struct fp_pystack_record *r)
{
        const struct fp_pystack_ruby *l = &p->ruby;
        struct ruby_walk w = {.p = p, .r = r};
        __u64 dtv, block, ec, stack, size;

        r->status = FP_PYSTACK_OK;
        r->n_frames = 0;
        dtv = fsbase ? read_ptr(fsbase + 8) : 0;
        block = dtv ? read_ptr(dtv + 16 * l->tls_module) : 0;
        ec = block && block != (__u64)-1 ? read_ptr(block + l->tls_ec) : 0;
        if (!ec) {
                r->status = FP_PYSTACK_NO_THREAD_STATE; /* no Ruby thread (yet) */
                return;
        }
        stack = read_ptr(ec + l->ec_vm_stack);
        size = read_ptr(ec + l->ec_vm_stack_size);
        w.cfp = read_ptr(ec + l->ec_cfp);
        w.end = stack + size * 8;
        if (!stack || !w.cfp || w.cfp < stack || w.cfp >= w.end) {
                r->status = FP_PYSTACK_UNREADABLE;
                return;
        }
#if defined(__TARGET_ARCH_x86)
        if (regs) {
                w.reg_cfp = BPF_CORE_READ(regs, r15);
                w.reg_pc = BPF_CORE_READ(regs, r14);
        }
#endif
        bpf_loop(FP_PYSTACK_MAX_FRAMES + 32, ruby_step, &w, 0);
        if (w.cfp + l->cfp_size < w.end && w.status == FP_PYSTACK_OK)
                w.status = FP_PYSTACK_TRUNCATED;
        r->status = w.status;
        r->n_frames = w.n;
}
