// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The walk of a PHP thread's frames in BPF (php.h), shared by the
 * sampling program (pystack.bpf.c) and the off-CPU one (offcpu.bpf.c):
 * from executor_globals.current_execute_data along prev_execute_data,
 * each frame's zend_function, its line (its opline's) and its stamp,
 * innermost first; FP_PYSTACK_ENTRY on each frame PHP called from C
 * (ZEND_CALL_TOP) that runs PHP code: the outermost of one execute_ex.
 *
 * The running frame's opline: the VM keeps it in a register (r15 on
 * x86-64, the frame in r14) and stores it in the frame only before a call
 * out; while the thread is in execute_ex with r14 the frame, r15 is it.
 *
 * The includer includes pywalk.bpf.h (read_ptr()) first. Memory is read
 * in the current address space: the thread's process's.
 */
#pragma once

#include "pystack.h"

struct php_walk {
        const struct fp_pystack_proc *p;
        struct fp_pystack_record *r;
        __u64 ex, opline; /* the frame, and (innermost only) its opline from the registers */
        __u32 n, status;
};

static long php_step(__u32 i, void *ctx)
{
        struct php_walk *w = ctx;
        const struct fp_pystack_php *l = &w->p->php;
        __u64 ex = w->ex, func, name, file = 0, opline;
        __u32 n = w->n, info = 0, line = 0, start = 0;
        __u8 type = 0;

        if (!ex)
                return 1;
        if (n >= FP_PYSTACK_MAX_FRAMES) {
                w->status = FP_PYSTACK_TRUNCATED;
                return 1;
        }
        func = read_ptr(ex + l->ex_func);
        opline = w->opline;
        w->opline = 0;
        w->ex = read_ptr(ex + l->ex_prev);
        if (!func)
                return 0; /* a frame of no function (a call being set up): none to show */
        if (bpf_probe_read_user(&type, 1, (const void *)(func + l->func_type)) ||
            bpf_probe_read_user(&info, 4, (const void *)(ex + l->ex_call_info))) {
                w->status = FP_PYSTACK_UNREADABLE;
                return 1;
        }
        name = read_ptr(func + l->func_name);
        if (type != l->internal_function) {
                if (!opline)
                        opline = read_ptr(ex + l->ex_opline);
                if (opline)
                        bpf_probe_read_user(&line, 4, (const void *)(opline + l->op_lineno));
                file = read_ptr(func + l->op_array_filename);
                bpf_probe_read_user(&start, 4, (const void *)(func + l->op_array_line_start));
        }
        w->r->frames[n].code = func;
        w->r->frames[n].instr = line;
        w->r->frames[n].flags =
            (info & l->call_top) && type != l->internal_function ? FP_PYSTACK_ENTRY : 0;
        w->r->frames[n].stamp = FP_PYSTACK_STAMP(name ^ file, start);
        w->n = n + 1;
        return 0;
}

/*
 * Reads the PHP stack of the current thread (process p; regs its user
 * registers, NULL when unknown) into r: its status and frames.
 */
static __always_inline void phpwalk_read(const struct fp_pystack_proc *p, struct pt_regs *regs,
                                         struct fp_pystack_record *r)
{
        struct php_walk w = {.p = p, .r = r};

        r->status = FP_PYSTACK_OK;
        r->n_frames = 0;
        w.ex = read_ptr(p->runtime);
        if (!w.ex) {
                r->status = FP_PYSTACK_NO_THREAD_STATE; /* not running PHP code now */
                return;
        }
#if defined(__TARGET_ARCH_x86)
        if (regs) {
                __u64 ip = BPF_CORE_READ(regs, ip), r14 = BPF_CORE_READ(regs, r14);
                if (ip >= p->eval_lo && ip < p->eval_hi && r14 == w.ex)
                        w.opline = BPF_CORE_READ(regs, r15);
        }
#endif
        bpf_loop(FP_PYSTACK_MAX_FRAMES + 16, php_step, &w, 0);
        if (w.ex && w.status == FP_PYSTACK_OK)
                w.status = FP_PYSTACK_TRUNCATED;
        r->status = w.status;
        r->n_frames = w.n;
}
