/* SPDX-License-Identifier: MIT */
/*
 * Perl interpreters recognised in a process's files (perl.c): the perl
 * executable with its interpreter linked in (Debian's /usr/bin/perl) or
 * libperl (an embedder, or the perl5.36-x86_64-linux-gnu shim), its run
 * loop, its version, the layouts of the structures a Perl stack is read
 * through, and its subs' names read from a live process.
 *
 * A file is Perl when it defines Perl_runops_standard and the
 * thread-local PL_current_context (each thread's interpreter, set with
 * its pthread key by PERL_SET_CONTEXT). In the executable that variable
 * is in the static TLS block: the code reaches it through a GOT slot the
 * dynamic linker fills with its offset from the thread pointer
 * (R_X86_64_TPOFF64, read from the process). In libperl it is in the
 * library's own block, found as Ruby's is (the DTPMOD64 slot's module
 * ID). Its version is PL_revision, PL_version and PL_subversion, one byte
 * each. Versions without a layout are refused in one line.
 *
 * A Perl stack is the interpreter's context stacks, innermost first: from
 * PL_curstackinfo's topmost sub (si_cxsubix) down each context's
 * old_cxsubix, a sub's or a format's frame (its CV) at the line of the
 * statement it runs (PL_curcop for the innermost, the blk_oldcop of the
 * context above for the others), an eval only moving the line on; then
 * si_prev's stack, down to the main one, whose bottom is the main
 * program's file scope (a CXt_BLOCK whose blk_oldcop is &PL_compiling).
 * Each Perl_runops_* frame runs one run level: a sub called from C
 * (call_sv, a sort's comparator, MULTICALL) has no return op, and a
 * stack other than the main one (a sort block, magic) begins one; their
 * outermost frames are marked FP_PYSTACK_ENTRY. The BPF side walks it at
 * sample time (perlwalk.bpf.h); its frames are spliced in place of the
 * run loop and named as Perl's caller() writes them (Pkg::name), the main
 * program as main::RUNTIME (Devel::NYTProf's name for it).
 *
 * Layout fields are byte offsets for x86-64, from Perl's intrpvar.h,
 * cop.h, sv.h, cv.h, gv.h, hv.h and hv_func.h, for a threaded build
 * (useithreads, MULTIPLICITY), as Debian builds it.
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp_perl_layout {
        int revision, version;
        /* struct interpreter: PL_curcop, PL_curstackinfo, PL_main_cv, PL_compiling (a COP),
         * PL_origfilename */
        int16_t interp_curcop, interp_curstackinfo, interp_main_cv, interp_compiling,
            interp_origfilename;
        /* struct stackinfo: si_cxstack, si_prev, si_cxsubix, si_type */
        int16_t si_cxstack, si_prev, si_cxsubix, si_type;
        /* struct context: its size, cx_type, blk_oldcop, blk_sub.retop, .old_cxsubix, .cv */
        int16_t cx_size, cx_type, cx_oldcop, cx_retop, cx_old_cxsubix, cx_cv;
        int16_t cop_line, cop_file; /* COP: cop_line (U32), cop_file (char *) */
        /* An SV's head: sv_any (its body), sv_flags; its type is sv_flags's low byte */
        int16_t sv_any, sv_flags;
        /* XPVCV: xcv_stash, xcv_gv_u (a GV, or a HEK when CVf_NAMED), xcv_file, xcv_flags */
        int16_t xcv_stash, xcv_gv, xcv_file, xcv_flags;
        /* XPVGV: its name's HEK, its stash */
        int16_t xgv_namehek, xgv_stash;
        /* an HV's aux part, from its body (valid with SVf_OOK): xhv_name_u, xhv_name_count */
        int16_t hv_aux, aux_name, aux_name_count;
        int16_t hek_len, hek_key; /* HEK */
        uint8_t cxt_mask, cxt_block, cxt_sub, cxt_format, cxt_eval;
        uint8_t cxp_sub_re_fake;
        uint8_t si_main;
        uint8_t t_pvgv, t_pvhv, t_pvcv, t_pvfm;
        uint32_t sv_ook;
        uint32_t cvf_named, cvf_lexical;
};

/* The layout of Perl 5.version (revision 5), NULL for one not understood (5.36 is). */
const struct fp_perl_layout *fp_perl_layout_of(int revision, int version);

/*
 * Where a thread's interpreter is: static (the executable's TLS block,
 * at the thread pointer plus the offset in its GOT slot) or in libperl's
 * own block (its module ID in its DTPMOD64 slot).
 */
enum fp_perl_tls {
        FP_PERL_TLS_STATIC = 1,
        FP_PERL_TLS_MODULE = 2,
};

/* What a Perl file is. Addresses are the file's (link-time) ones. */
struct fp_perl_binary {
        int revision, version, subversion;
        enum fp_perl_tls tls;
        uint64_t tls_slot;             /* the GOT slot: TPOFF64's offset or DTPMOD64's module ID */
        uint64_t tls_context;          /* PL_current_context's offset in the block (MODULE) */
        uint64_t eval_start, eval_end; /* Perl_runops_standard */
        uint64_t debug_start, debug_end; /* Perl_runops_debug (0: none) */
        const struct fp_perl_layout *layout;
};

/* What a file's content says (the inspector's answer, per build). */
struct fp_perl_facts {
        uint64_t eval_start, eval_end, debug_start, debug_end;
        int has_context; /* PL_current_context, thread-local, at tls_context of its block */
        uint64_t tls_context;
        uint64_t tpoff_slot, dtpmod_slot;  /* its GOT slots, 0: none */
        int revision, version, subversion; /* -1 when unread */
};
void fp_perl_inspect(Elf *elf, struct fp_perl_facts *ret);
/*
 * Whether the file (path) of facts f is a Perl fleetprof reads: 1 with
 * *ret filled; 0 when it is no Perl; -EPROTONOSUPPORT with one line in
 * why for a Perl it cannot read.
 */
int fp_perl_judge(const struct fp_perl_facts *f, const char *path, struct fp_perl_binary *ret,
                  char *why, size_t why_len);

/* ---- frames: their names ---- */

#define FP_PERL_NAME_MAX 256 /* bytes of a name kept, longer ones cut */
#define FP_PERL_FILE_MAX 512

/* A sub's (or format's) code, as read once from its CV. */
struct fp_perl_code {
        char name[FP_PERL_NAME_MAX];     /* "Pkg::sub", "main::__ANON__", "lexsub" */
        char filename[FP_PERL_FILE_MAX]; /* where it was defined, "" unknown */
};
/*
 * Reads the name of the CV at cv in process pid: 0, or -errno (-EFAULT
 * when it does not read as one). *ret_body and *ret_gv are its body and
 * its name's slot (xcv_gv_u), of which the BPF side stamps its frames
 * (FP_PYSTACK_STAMP), for the caller to check.
 */
int fp_perl_code_read(pid_t pid, const struct fp_perl_layout *l, uint64_t cv,
                      struct fp_perl_code *ret, uint64_t *ret_body, uint64_t *ret_gv);
/*
 * The main program's name and file, read through its interpreter at
 * interp (PL_origfilename): "main::RUNTIME".
 */
int fp_perl_main_read(pid_t pid, const struct fp_perl_layout *l, uint64_t interp,
                      struct fp_perl_code *ret);

/* ---- in a process (maps.h, symbols.h) ---- */

struct fp_maps;
struct fp_sym_inspector;

extern const struct fp_sym_inspector fp_perl_inspector;

/*
 * Whether the process runs a Perl, as fp_py_find() answers for CPython:
 * 1 with *ret_bin and its load bias; -1 with *ret_why (logged once per
 * file) when one was refused; 0 neither.
 */
int fp_perl_find(struct fp_maps *m, const struct fp_perl_binary **ret_bin, uint64_t *ret_bias,
                 const char **ret_why);
