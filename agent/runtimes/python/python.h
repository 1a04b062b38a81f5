/* SPDX-License-Identifier: MIT */
/*
 * CPython interpreters recognised in a process's files (python.c): which
 * version, where its runtime state and its evaluation loop are, and the
 * layouts of the structures a Python stack is read through.
 *
 * A binary is CPython when it defines _PyRuntime (the interpreter in the
 * executable, as Debian's non-PIE /usr/bin/python3.11, or in a shared
 * libpython3.X.so, as pyenv's builds). Its version is Py_Version's value
 * (3.11 and later export it), else the minor version in the file's name
 * (python3.X, libpython3.X.so). CPython 3.8 to 3.13 are understood; the
 * layouts are per minor version, taken from CPython's headers for x86-64
 * (test-python checks them against each pyenv build's DWARF, and against
 * the thread list of a live interpreter).
 *
 * Layout fields are byte offsets; -1 where that version has no such field.
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_PY_MINOR_MIN 8
#define FP_PY_MINOR_MAX 13

struct fp_py_layout {
        int minor;
        /* _PyRuntime.interpreters.head, PyInterpreterState's first thread state */
        int16_t runtime_interp_head, interp_tstate_head;
        /* PyThreadState: next, pthread_self(), the kernel's tid (3.11+), its frame
         * (3.8-3.10 PyFrameObject *frame; 3.11-3.12 _PyCFrame *cframe; 3.13 current_frame) */
        int16_t tstate_next, tstate_thread_id, tstate_native_thread_id, tstate_frame;
        int16_t cframe_current_frame; /* 3.11-3.12: _PyCFrame.current_frame */
        /* A frame: PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+): the
         * caller's, the code object, where it is (f_lasti, prev_instr, instr_ptr) */
        int16_t frame_previous, frame_code, frame_instr;
        int16_t frame_owner, frame_is_entry; /* 3.11+; 3.11 only */
        /* PyCodeObject */
        int16_t code_filename, code_name, code_qualname, code_firstlineno, code_linetable;
        int16_t code_adaptive; /* 3.11+: the instructions, inside the code object */
        /* str (PyASCIIObject) and bytes */
        int16_t unicode_length, unicode_state, unicode_ascii_data, unicode_compact_data;
        int16_t bytes_size, bytes_data;
        int16_t object_type;
};

/* The layout of CPython 3.minor, NULL outside 3.8-3.13. */
const struct fp_py_layout *fp_py_layout_of(int minor);

/* What a CPython binary is. Addresses are the file's (link-time) ones. */
struct fp_py_binary {
        int major, minor, micro;
        uint64_t runtime;                        /* _PyRuntime */
        uint64_t eval_start, eval_end;           /* _PyEval_EvalFrameDefault, 0 when unknown */
        uint64_t eval_cold_start, eval_cold_end; /* its .cold part, 0 when none named */
        const struct fp_py_layout *layout;
};

/*
 * What a file's content says (python_inspect()): the part of the answer
 * shared by every name the file is mapped under (files are shared by
 * build ID).
 */
struct fp_py_facts {
        uint64_t runtime;                        /* _PyRuntime, 0: none */
        uint64_t version;                        /* Py_Version's value, 0: none */
        uint64_t eval_start, eval_end;           /* _PyEval_EvalFrameDefault */
        uint64_t eval_cold_start, eval_cold_end; /* its .cold part */
        int launcher;   /* links a libpython (the runtime is there, not here) */
        int old_python; /* defines Py_Initialize without _PyRuntime: before 3.7 */
};
void fp_py_inspect(Elf *elf, struct fp_py_facts *ret);
/* The answer of fp_py_detect() from a file's facts and the name it is mapped under. */
int fp_py_judge(const struct fp_py_facts *f, const char *path, struct fp_py_binary *ret, char *why,
                size_t why_len);

/*
 * Whether elf (opened from path; its name counts) is a CPython interpreter:
 * 1 with *ret filled; 0 when it is no Python (no _PyRuntime); or, for a
 * binary that looks like one but cannot be read (a version outside
 * 3.8-3.13, a file named like Python without the runtime that does not
 * link a libpython, no version found), -EPROTONOSUPPORT with one line in
 * why.
 */
int fp_py_detect(const char *path, Elf *elf, struct fp_py_binary *ret, char *why, size_t why_len);

/*
 * Calls fn for each thread state of the live process pid whose
 * interpreter is b loaded bias bytes above its link-time addresses (0
 * for a non-PIE executable): its address and its thread's ids (native_tid
 * 0 before 3.11, which does not keep it). At most 4096; returns how many,
 * or -errno (-EFAULT when the memory does not read as that interpreter).
 */
typedef int (*fp_py_thread_fn)(void *userdata, uint64_t tstate, uint64_t pthread_id,
                               pid_t native_tid);
int fp_py_threads(pid_t pid, const struct fp_py_binary *b, uint64_t bias, fp_py_thread_fn fn,
                  void *userdata);

/* ---- code objects: a frame's function, file and line ---- */

#define FP_PY_NAME_MAX      256   /* bytes of a name kept (UTF-8), longer ones cut */
#define FP_PY_FILE_MAX      512   /* of a file name */
#define FP_PY_LINETABLE_MAX 65536 /* bytes of a line table read at most */

/* What names a code object. */
struct fp_py_code {
        char name[FP_PY_NAME_MAX];     /* co_qualname (3.11+), else co_name */
        char filename[FP_PY_FILE_MAX]; /* co_filename */
        int firstlineno;
        uint64_t name_addr; /* the name's str object (with firstlineno: tells reuse apart) */
        uint8_t *linetable; /* co_lnotab (3.8-3.9), co_linetable (3.10+); malloc'd */
        size_t linetable_len;
};

/*
 * Reads the code object at code in process pid, laid out as l says, into
 * *ret (fp_py_code_free() frees it): 0, or -errno (-EFAULT when its memory
 * does not read as a code object: a string not a str, a size out of range).
 */
int fp_py_code_read(pid_t pid, const struct fp_py_layout *l, uint64_t code, struct fp_py_code *ret);
void fp_py_code_free(struct fp_py_code *c);

/*
 * The line c's instruction at byte offset off is on, from its line table
 * as CPython 3.l->minor writes it (3.8-3.9 lnotab, 3.10 line table, 3.11+
 * location table): the line, or 0 when the table gives none (or ends
 * before off).
 */
int fp_py_line(const struct fp_py_layout *l, const struct fp_py_code *c, uint64_t off);

/*
 * The byte offset of a frame's instruction from what its frame holds
 * (frame_instr): 3.8-3.9 f_lasti is one, 3.10 counts code units, 3.11+
 * hold a pointer into the code object's instructions (code is the code
 * object's address). UINT64_MAX when it cannot be one.
 */
uint64_t fp_py_instr_offset(const struct fp_py_layout *l, uint64_t code, uint64_t instr);

/* ---- in a process (maps.h, symbols.h) ---- */

struct fp_maps;
struct fp_symcache;
struct fp_sym_inspector;

/* What CPython reads in each process's file (symbols.h): its fp_py_facts. */
extern const struct fp_sym_inspector fp_py_inspector;

/*
 * Whether the process runs a CPython interpreter, of the files whose
 * symbols are read (each judged under the name the process maps it by):
 * 1 with *ret_bin and its load bias (what its addresses are above the
 * file's); -1 with *ret_why (one line, logged once per file) when one was
 * refused; 0 neither. Both live as long as m, until the next call.
 */
int fp_py_find(struct fp_maps *m, const struct fp_py_binary **ret_bin, uint64_t *ret_bias,
               const char **ret_why);
/*
 * Reads the symbols of the live file mappings whose name holds "python"
 * now (not at their first sample), so that fp_py_find() can tell a
 * CPython from a process's first sample on.
 */
void fp_py_read_files(struct fp_maps *m);
/* CPython interpreters among the files c read; *ret_refused: those refused. */
size_t fp_py_n_files(const struct fp_symcache *c, size_t *ret_refused);
