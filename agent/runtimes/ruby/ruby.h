/* SPDX-License-Identifier: MIT */
/*
 * Ruby interpreters recognised in a process's files (ruby.c): CRuby's
 * shared library (libruby), its VM's loop, its version, the layouts of the
 * structures a Ruby stack is read through, and its methods' names read
 * from a live process.
 *
 * A file is Ruby when it defines ruby_current_vm_ptr, rb_vm_exec and the
 * thread-local ruby_current_ec (each thread's execution context), with
 * the "DTPMOD64" slot of its own thread-local block (the module ID the
 * dynamic linker gave it, read from the process). Its version is its
 * ruby_version string. A Ruby linked into its executable (no module slot)
 * is refused in one line, as are versions without a layout.
 *
 * A Ruby stack is its thread's execution context's control frames, from
 * ec->cfp up to the end of its VM stack, innermost first: each a Ruby
 * frame (its instruction sequence and pc) or a C function's (its method
 * entry). A frame pushed from C (VM_FRAME_FLAG_FINISH) is the outermost
 * of one rb_vm_exec. The BPF side walks it at sample time
 * (rubywalk.bpf.h), its frames spliced in and named as Python's are
 * (pyframes.h): Ruby frames by their label as Ruby's backtraces write them
 * ("area", "block in <main>", "<main>"), C functions as Class#name.
 *
 * Layout fields are byte offsets for x86-64, from Ruby's vm_core.h,
 * iseq.h, method.h and internal headers (test-ruby checks them against
 * ruby-dev's headers when they are there).
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp_ruby_layout {
        int major, minor;
        /* rb_execution_context_t: vm_stack, vm_stack_size (VALUEs), cfp */
        int16_t ec_vm_stack, ec_vm_stack_size, ec_cfp;
        /* rb_control_frame_t: its size, pc, iseq, ep */
        int16_t cfp_size, cfp_pc, cfp_iseq, cfp_ep;
        /* rb_iseq_t.body; rb_iseq_constant_body: iseq_size, iseq_encoded, location's pathobj,
         * label, first_lineno; insns_info's body, positions, size, succ_index_table */
        int16_t iseq_body, body_iseq_size, body_iseq_encoded, body_pathobj, body_label,
            body_first_lineno, body_insns_info, body_insns_positions, body_insns_size,
            body_succ_index_table;
        int16_t insn_info_size, insn_info_line; /* struct iseq_insn_info_entry */
        /* rb_callable_method_entry_t: defined_class, def; rb_method_definition_t: original_id */
        int16_t me_defined_class, me_def, def_original_id;
        /* RString (embedded length in the flags), RArray */
        int16_t string_len, string_ptr, string_ary, array_len, array_ptr, array_ary;
        uint64_t string_noembed, string_embed_len_mask;
        int string_embed_len_shift;
        uint64_t array_embed, array_embed_len_mask;
        int array_embed_len_shift;
        /* RClass.ptr (rb_classext_t), its iv_tbl; st_table's entries_start, _bound, entries */
        int16_t class_ext, ext_iv_tbl, st_entries_start, st_entries_bound, st_entries,
            st_entry_size;
        /* rb_symbols_t.last_id, .ids (an Array of Arrays of ID_ENTRY_UNIT entries) */
        int16_t symbols_last_id, symbols_ids;
        unsigned id_scope_shift, id_entry_unit, id_entry_size, last_op_id;
        /* ep[0] flags (a C frame's, a frame pushed from C, an env's with no previous one), ep[-2]
         * the method entry (an imemo), ep[-1] a block's previous ep (tagged) */
        uint32_t frame_cframe, frame_finish, env_local;
        uint8_t t_mask, t_string, t_array, t_class, t_module, t_iclass, t_imemo;
        uint8_t fl_ushift, imemo_ment, imemo_svar;
        uint64_t fl_singleton;
};

/* The layout of Ruby major.minor, NULL for a version not understood (3.1 is). */
const struct fp_ruby_layout *fp_ruby_layout_of(int major, int minor);

/* What a Ruby library is. Addresses are the file's (link-time) ones. */
struct fp_ruby_binary {
        int major, minor, micro;
        uint64_t tls_module_slot;      /* its DTPMOD64 slot: the module ID of its TLS block */
        uint64_t tls_ec;               /* ruby_current_ec's offset in that block */
        uint64_t symbols;              /* ruby_global_symbols (0: C functions' names not read) */
        uint64_t eval_start, eval_end; /* rb_vm_exec */
        const struct fp_ruby_layout *layout;
};

/* What a file's content says (the inspector's answer, per build). */
struct fp_ruby_facts {
        uint64_t vm_ptr;               /* ruby_current_vm_ptr, 0: none */
        uint64_t eval_start, eval_end; /* rb_vm_exec */
        int has_ec;                    /* ruby_current_ec, at tls_ec of its block */
        uint64_t tls_ec, tls_module_slot, symbols;
        int major, minor, micro; /* from ruby_version, -1 when unread */
};
void fp_ruby_inspect(Elf *elf, struct fp_ruby_facts *ret);
/*
 * Whether the file (path) of facts f is a Ruby fleetprof reads: 1 with
 * *ret filled; 0 when it is no Ruby; -EPROTONOSUPPORT with one line in
 * why for a Ruby it cannot read.
 */
int fp_ruby_judge(const struct fp_ruby_facts *f, const char *path, struct fp_ruby_binary *ret,
                  char *why, size_t why_len);

/* ---- frames: their names and lines ---- */

#define FP_RUBY_NAME_MAX 256 /* bytes of a name kept, longer ones cut */
#define FP_RUBY_FILE_MAX 512
#define FP_RUBY_LINES    (1 << 16) /* instructions' line entries read per iseq at most */

/* A frame's code, as read once: a method's (or block's) iseq, or a C function's entry. */
struct fp_ruby_code {
        char name[FP_RUBY_NAME_MAX];
        char filename[FP_RUBY_FILE_MAX]; /* "" for C functions */
        int first_line;                  /* 0 for C functions */
        uint64_t encoded;                /* iseq_encoded: a pc's offset from it is its position */
        /* Lines by position: entries (line), and positions or the succinct index */
        int32_t *lines;
        uint32_t n_lines;
        uint32_t *positions;
        uint64_t *succ; /* the succ_index_table as read (its immediate part, then blocks) */
        size_t succ_words;
};
/*
 * Reads the code of a frame in process pid: an iseq (native false; me the
 * frame's method entry, 0 for none, whose class qualifies its name) or a
 * C function's method entry (native true); names of methods are read
 * through the symbols table at symbols: 0, or -errno (-EFAULT when it
 * does not read as one).
 * The stamp the BPF side gave the frame is checked by the caller
 * (fp_ruby_stamp()).
 */
int fp_ruby_code_read(pid_t pid, const struct fp_ruby_layout *l, uint64_t symbols, uint64_t addr,
                      uint64_t me, bool native, struct fp_ruby_code *ret, uint32_t *ret_stamp);
void fp_ruby_code_free(struct fp_ruby_code *c);
/* The line of the frame of c at pc, 0 unknown. */
int fp_ruby_line(const struct fp_ruby_code *c, uint64_t pc);

/* ---- in a process (maps.h, symbols.h) ---- */

struct fp_maps;
struct fp_symcache;
struct fp_sym_inspector;

extern const struct fp_sym_inspector fp_ruby_inspector;

/*
 * Whether the process runs a Ruby, as fp_py_find() answers for CPython:
 * 1 with *ret_bin and its load bias; -1 with *ret_why (logged once per
 * file) when one was refused; 0 neither.
 */
int fp_ruby_find(struct fp_maps *m, const struct fp_ruby_binary **ret_bin, uint64_t *ret_bias,
                 const char **ret_why);
