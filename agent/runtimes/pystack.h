/* SPDX-License-Identifier: MIT */
/*
 * Python stacks read at sample time: a BPF program run by the sampling
 * events of CPython processes (pystack.bpf.c) finds the sampled thread's
 * thread state and walks its frame chain, writing for each frame its code
 * object's address and where in it the frame was (its instruction: what
 * the frame holds, fp_py_instr_offset() makes it an offset), innermost
 * first; user space names them later (python.h). The first half of this
 * header is what the kernel side and the loader (pystack.c) share; the
 * second half, hidden from the BPF compiler, is the loader's API.
 *
 * Why at sample time: CPython 3.11 and later keep their frames in chunks
 * of the heap that the interpreter rewrites as it runs; read after the
 * sample they would be another moment's.
 *
 * The same program walks PHP's frames (a process's entry of kind
 * FP_PYSTACK_PHP, php/phpwalk.bpf.h) into the same records: a frame's
 * code is then its zend_function, its instruction its line.
 */
#pragma once

#ifndef __bpf__
#include <linux/types.h>
#endif

#define FP_PYSTACK_MAX_FRAMES  128 /* innermost kept; a deeper stack is cut (TRUNCATED) */
#define FP_PYSTACK_MAX_THREADS 64  /* thread states looked through for the sampled one */

/* Which interpreter a process's entry is of. */
#define FP_PYSTACK_PYTHON 0
#define FP_PYSTACK_PHP    1 /* php/php.h, walked by php/phpwalk.bpf.h */
#define FP_PYSTACK_RUBY   2 /* ruby/ruby.h, walked by ruby/rubywalk.bpf.h */
#define FP_PYSTACK_PERL   3 /* perl/perl.h, walked by perl/perlwalk.bpf.h */
#define FP_PYSTACK_KINDS  4

/* PHP's layout, as the walk needs it (php.h: struct fp_php_layout). */
struct fp_pystack_php {
        __s16 ex_opline, ex_func, ex_call_info, ex_prev;
        __s16 func_type, func_name, op_array_filename, op_array_line_start, op_lineno;
        __u8 internal_function, pad0;
        __u32 call_top;
};

/* Ruby's layout, as the walk needs it (ruby.h: struct fp_ruby_layout). */
struct fp_pystack_ruby {
        __u64 tls_module; /* the module ID of libruby's TLS block, read from the process */
        __u64 tls_ec;     /* ruby_current_ec's offset in it */
        __s16 ec_vm_stack, ec_vm_stack_size, ec_cfp;
        __s16 cfp_size, cfp_pc, cfp_iseq, cfp_ep;
        __s16 iseq_body, body_label, body_first_lineno, body_iseq_encoded, body_iseq_size;
        __s16 me_def, def_original_id, pad1;
        __u32 frame_cframe, frame_finish, env_local, pad2;
        __u8 t_mask, t_imemo, fl_ushift, imemo_ment, imemo_svar, pad[3];
};

/* Perl's layout, as the walk needs it (perl.h: struct fp_perl_layout). */
struct fp_pystack_perl {
        __u64 tls_module; /* libperl's TLS module ID, read from the process; 0: static TLS */
        __s64 tls_offset; /* PL_current_context: from the thread pointer (static), in the block */
        __s16 interp_curcop, interp_curstackinfo, interp_compiling;
        __s16 si_cxstack, si_prev, si_cxsubix, si_type;
        __s16 cx_size, cx_oldcop, cx_retop, cx_old_cxsubix, cx_cv;
        __s16 cop_line, sv_any, xcv_gv, pad1;
        __u8 cxt_mask, cxt_block, cxt_sub, cxt_format, cxt_eval, cxp_sub_re_fake, si_main, pad;
};

/*
 * Where a process's interpreter is and how its structures are laid out:
 * a CPython's (python.h), or a PHP's (kind FP_PYSTACK_PHP: runtime is
 * then the address of executor_globals.current_execute_data, and
 * [eval_lo, eval_hi) execute_ex's code, in which the VM keeps the running
 * frame's opline in a register), or a Ruby's (FP_PYSTACK_RUBY: each
 * thread's execution context in libruby's TLS block, ruby.tls_*).
 */
struct fp_pystack_proc {
        __u64 runtime; /* _PyRuntime's address in the process */
        __u32 minor;
        __u16 kind, pad0;
        union {
                struct {
                        __s16 runtime_interp_head, interp_tstate_head;
                        __s16 tstate_next, tstate_thread_id, tstate_native_thread_id, tstate_frame;
                        __s16 cframe_current_frame;
                        __s16 frame_previous, frame_code, frame_instr, frame_owner, frame_is_entry;
                        __s16 code_name, code_firstlineno; /* for each frame's stamp */
                        __s16 pad[2];
                };
                struct fp_pystack_php php;
                struct fp_pystack_ruby ruby;
                struct fp_pystack_perl perl;
        };
        __u64 eval_lo, eval_hi;
};

/*
 * A code object's stamp: its name's address and first line mixed. A code
 * object freed and another allocated at its address is told apart by it
 * (the same name object at the same line is the same function).
 */
#define FP_PYSTACK_STAMP(name_addr, firstlineno)                                                   \
        ((__u32)((name_addr) >> 4) ^ ((__u32)(firstlineno)*0x9e3779b1u))

/* A frame's flags. */
#define FP_PYSTACK_ENTRY  1 /* the outermost Python frame of one C-level evaluation */
#define FP_PYSTACK_NATIVE 2 /* Ruby: a C function's frame, its code its method entry */
#define FP_PYSTACK_MAIN   4 /* Perl: the main program's file scope, its code the interpreter */

struct fp_pystack_frame {
        /* the code object (3.13: the frame's executable); PHP: its zend_function; Ruby: its iseq
         * or (NATIVE) its method entry */
        __u64 code;
        /* f_lasti (3.8-3.10, an int) or the instruction pointer (3.11+); PHP: the line; Ruby: its
         * pc */
        __u64 instr;
        __u32 flags;
        __u32 stamp; /* FP_PYSTACK_STAMP() of the code object */
        /* Ruby: a Ruby frame's method entry (a block's: its method's), 0 for none; else 0 */
        __u64 aux;
};

/* Why a sample has no Python stack, or only part of it. */
enum fp_pystack_status {
        FP_PYSTACK_OK = 0,
        FP_PYSTACK_NO_THREAD_STATE = 1, /* the thread has none (not a Python thread yet) */
        FP_PYSTACK_UNREADABLE = 2,      /* the interpreter's memory did not read */
        FP_PYSTACK_TRUNCATED = 3,       /* deeper than FP_PYSTACK_MAX_FRAMES: innermost kept */
};

struct fp_pystack_record {
        __u32 tid, tgid;
        __u64 time_ns; /* CLOCK_MONOTONIC, as the perf sample's */
        __u32 status, n_frames;
        struct fp_pystack_frame frames[FP_PYSTACK_MAX_FRAMES];
};
#define FP_PYSTACK_HEADER_LEN ((unsigned long)&((struct fp_pystack_record *)0)->frames)

#ifndef __bpf__
#include "perl.h"
#include "php.h"
#include "python.h"
#include "ruby.h"

#include <stdint.h>
#include <sys/types.h>

struct fp_pystack;

typedef void (*fp_pystack_fn)(void *userdata, const struct fp_pystack_record *r);

/* Loads the program: 0, or -errno with one line in err. */
int fp_pystack_new(fp_pystack_fn fn, void *userdata, struct fp_pystack **ret, char *err,
                   size_t err_len);
void fp_pystack_free(struct fp_pystack *s);
/* Process tgid runs interpreter b, loaded bias bytes above its link-time addresses. */
int fp_pystack_add(struct fp_pystack *s, pid_t tgid, const struct fp_py_binary *b, uint64_t bias);
/* Process tgid runs PHP b, loaded bias bytes above its link-time addresses. */
int fp_pystack_add_php(struct fp_pystack *s, pid_t tgid, const struct fp_php_binary *b,
                       uint64_t bias);
/* Process tgid runs Ruby b, loaded bias bytes above its link-time addresses. */
int fp_pystack_add_ruby(struct fp_pystack *s, pid_t tgid, const struct fp_ruby_binary *b,
                        uint64_t bias);
/* Process tgid runs Perl b, loaded bias bytes above its link-time addresses. */
int fp_pystack_add_perl(struct fp_pystack *s, pid_t tgid, const struct fp_perl_binary *b,
                        uint64_t bias);
int fp_pystack_remove(struct fp_pystack *s, pid_t tgid);
/* The program's fd: another perf_event program's tail call may run it. */
int fp_pystack_prog_fd(const struct fp_pystack *s);
/* Runs the program at each sample of the perf event perf_fd (PERF_EVENT_IOC_SET_BPF). */
int fp_pystack_attach(struct fp_pystack *s, int perf_fd);
/*
 * Keeps map_fd (another program's map of the same type: the off-CPU
 * profiler's) holding the same processes from now on, until called with
 * -1 or freed, which take them out of it again.
 */
void fp_pystack_mirror(struct fp_pystack *s, int map_fd);
/* Hands each record written so far to the callback; returns how many, or -errno. */
int fp_pystack_poll(struct fp_pystack *s);
#endif
