/* SPDX-License-Identifier: MIT */
/*
 * PHP interpreters recognised in a process's files (php.c): the Zend
 * engine's executor globals, its VM's loop, its version, and the layouts
 * of the structures a PHP stack is read through.
 *
 * A file is PHP when it defines executor_globals and execute_ex: the php
 * CLI and php-fpm executables, or a libphp.so embedded in a server (an
 * Apache module). Its version is the one its "X-Powered-By: PHP/x.y.z"
 * string says. A thread-safe (ZTS) build keeps its globals per thread
 * (executor_globals_offset, no executor_globals): refused in one line.
 *
 * A PHP stack is the chain of zend_execute_data from
 * executor_globals.current_execute_data by prev_execute_data, innermost
 * first: each with its zend_function (user code's zend_op_array, or an
 * internal function's), the opline it is at (its line) and its call info
 * (ZEND_CALL_TOP: called from C, the outermost frame of one execute_ex).
 * The BPF side walks it at sample time (phpwalk.bpf.h), its frames spliced
 * in and named as Python's are (pyframes.h).
 *
 * Layout fields are byte offsets for x86-64, taken from PHP's headers
 * (test-php checks them against php-dev's headers when they are there).
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp_php_layout {
        int major, minor;
        int16_t eg_current_execute_data; /* in zend_executor_globals */
        /* zend_execute_data: the opline, the function, This.u1.type_info (the call info), caller */
        int16_t ex_opline, ex_func, ex_call_info, ex_prev;
        /* zend_function: type (1 internal, 2 user, 4 eval), common.fn_flags, common.function_name,
         * common.scope; zend_op_array's filename and line_start */
        int16_t func_type, func_flags, func_name, func_scope, op_array_filename,
            op_array_line_start;
        int16_t op_lineno;                                   /* zend_op */
        int16_t string_len, string_val;                      /* zend_string */
        int16_t class_name;                                  /* zend_class_entry */
        uint32_t call_top, acc_closure;                      /* ZEND_CALL_TOP, ZEND_ACC_CLOSURE */
        uint8_t internal_function, user_function, eval_code; /* zend_function's types */
};

/* The layout of PHP major.minor, NULL for a version not understood (8.2 is). */
const struct fp_php_layout *fp_php_layout_of(int major, int minor);

/* What a PHP binary is. Addresses are the file's (link-time) ones. */
struct fp_php_binary {
        int major, minor, micro;
        uint64_t executor_globals;
        uint64_t eval_start, eval_end; /* execute_ex: the VM's loop */
        const struct fp_php_layout *layout;
};

/* What a file's content says (the inspector's answer, per build). */
struct fp_php_facts {
        uint64_t executor_globals;     /* 0: none */
        uint64_t eval_start, eval_end; /* execute_ex */
        int zts;                       /* executor_globals_offset: globals per thread */
        int major, minor, micro;       /* from "X-Powered-By: PHP/", -1 when absent */
};
void fp_php_inspect(Elf *elf, struct fp_php_facts *ret);
/*
 * Whether the file (path) of facts f is a PHP interpreter fleetprof reads:
 * 1 with *ret filled; 0 when it is no PHP; -EPROTONOSUPPORT with one line
 * in why for a PHP it cannot read (ZTS, a version without a layout, no
 * version found).
 */
int fp_php_judge(const struct fp_php_facts *f, const char *path, struct fp_php_binary *ret,
                 char *why, size_t why_len);

/* ---- functions: a frame's names ---- */

#define FP_PHP_NAME_MAX 256 /* bytes of a name kept, longer ones cut */
#define FP_PHP_FILE_MAX 512 /* of a file name */

struct fp_php_function {
        char name[FP_PHP_NAME_MAX];     /* Class::method, function, {closure}, {main} */
        char filename[FP_PHP_FILE_MAX]; /* "" for internal functions */
        int line_start;                 /* 0 for internal functions */
        uint64_t name_addr, file_addr;  /* its zend_strings (with line_start: tell reuse apart) */
        int internal;
};
/*
 * Reads the zend_function at func in process pid, laid out as l says:
 * 0, or -errno (-EFAULT when its memory does not read as a function: a
 * type not one of PHP's, a string's length out of range).
 */
int fp_php_function_read(pid_t pid, const struct fp_php_layout *l, uint64_t func,
                         struct fp_php_function *ret);
/* The stamp the BPF side gives a frame of f (pystack.h: FP_PYSTACK_STAMP). */
uint32_t fp_php_stamp(const struct fp_php_function *f);

/* ---- in a process (maps.h, symbols.h) ---- */

struct fp_maps;
struct fp_symcache;
struct fp_sym_inspector;

extern const struct fp_sym_inspector fp_php_inspector;

/*
 * Whether the process runs a PHP interpreter, as fp_py_find() answers for
 * CPython: 1 with *ret_bin and its load bias; -1 with *ret_why (logged
 * once per file) when one was refused; 0 neither.
 */
int fp_php_find(struct fp_maps *m, const struct fp_php_binary **ret_bin, uint64_t *ret_bias,
                const char **ret_why);
/* PHP interpreters among the files c read; *ret_refused: those refused. */
size_t fp_php_n_files(const struct fp_symcache *c, size_t *ret_refused);
