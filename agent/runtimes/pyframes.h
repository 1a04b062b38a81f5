/* SPDX-License-Identifier: MIT */
/*
 * One CPython (or PHP) process's interpreter frames (pyframes.c): the
 * stacks the BPF program read at its samples (pystack.h), waiting for
 * their perf samples; spliced into each sample's native stack (for PHP at
 * execute_ex, the frames of one evaluation up to the one PHP was called
 * into from C); and named.
 *
 * Matching. The program runs in the sampling event's overflow, before the
 * kernel writes the sample, so a sample's record is in the ring before
 * the sample is in its own: records are kept per thread, in time order,
 * and a sample takes the first of its thread's from
 * FP_PYFRAMES_MATCH_EARLY_NS before it to FP_PYFRAMES_MATCH_NS after it
 * (both clocks are CLOCK_MONOTONIC; the kernel stamps the sample before
 * the program runs: the record's stamp is 0-10 us later in 99.8% of
 * samples measured, under 0.1 ms in all). Shorter than a sampling period,
 * so that a sample whose record was lost takes no other's. One taken
 * from the middle leaves the older ones waiting: the host tier reads its
 * CPUs' rings one after another, so a thread that moved between CPUs has
 * its later samples read before its earlier ones.
 *
 * Splicing. Native frames run leaf to root; at each frame inside
 * _PyEval_EvalFrameDefault the Python frames that evaluation ran are put
 * in just leafward of it (the innermost first, up to and including the
 * next FP_PYSTACK_ENTRY frame), so that a C extension called from Python
 * lies under its Python caller and the interpreter's frames stay where
 * they are. Python frames left over (a native stack cut short) go at the
 * root end, before its [truncated].
 *
 * A Python frame is {.flags = FP_FRAME_PYTHON, .mapping = 0, .addr = its
 * code object's entry here << 32 | its line}. The entry names it (read
 * once from the process's memory at its first sample, cached by address
 * and stamp) and lives until fp_pyframes_trim() between buckets.
 */
#pragma once

#include "aggregate.h"
#include "php.h"
#include "pystack.h"
#include "python.h"
#include "perl.h"
#include "ruby.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_PYFRAMES_MATCH_NS       500000ULL /* a record at most this long after its sample */
#define FP_PYFRAMES_MATCH_EARLY_NS 20000ULL  /* or this long before it */
#define FP_PYFRAMES_CODES          32768     /* code objects named per process at most */

/* What happened to the samples of the process (monotonic counts). */
struct fp_pyframes_stats {
        uint64_t samples;           /* samples given a Python stack */
        uint64_t early;             /* samples taken before the program read the process */
        uint64_t no_record;         /* samples with no record of their thread */
        uint64_t no_thread_state;   /* the thread had no Python thread state (not Python yet) */
        uint64_t unreadable;        /* the interpreter's memory did not read in BPF */
        uint64_t truncated;         /* deeper than FP_PYSTACK_MAX_FRAMES (innermost kept) */
        uint64_t records;           /* records received */
        uint64_t records_unmatched; /* records no sample took */
        uint64_t evals_without;     /* eval frames left without Python frames */
        uint64_t frames_unnamed;    /* frames whose code object did not read */
        uint64_t codes_full;        /* frames past FP_PYFRAMES_CODES */
        uint64_t codes;             /* code objects read */
        uint64_t codes_unnamed;     /* of those, unreadable (or changed since their sample) */
        uint64_t offcpu;            /* off-CPU stacks given a Python stack */
        uint64_t offcpu_without;    /* off-CPU stacks left without (none read, or no state) */
};

struct fp_pyframes;

/* pid runs interpreter b, loaded bias bytes above its file's addresses. NULL: no memory. */
struct fp_pyframes *fp_pyframes_new(pid_t pid, const struct fp_py_binary *b, uint64_t bias);
void fp_pyframes_free(struct fp_pyframes *p);
const struct fp_py_binary *fp_pyframes_binary(const struct fp_pyframes *p);
/* The interpreters whose frames a pyframes holds, by kind (FP_PYSTACK_PYTHON, _PHP, _RUBY). */
struct fp_pyframes_kind {
        const char *key;     /* in status: "python", "php", "ruby", "perl" */
        const char *runtime; /* "CPython", "PHP", "Ruby" */
        const char *lang;    /* "Python": "a Python stack" */
        const char *codes;   /* what its frames' code is: "code objects", "functions", "methods" */
        const char *unread;  /* the name of a frame whose code did not read: "[python]" */
};
extern const struct fp_pyframes_kind fp_pyframes_kinds[FP_PYSTACK_KINDS];
/* Which interpreter's frames p holds: FP_PYSTACK_PYTHON, _PHP or _RUBY. */
int fp_pyframes_kind(const struct fp_pyframes *p);
/*
 * Whether process m runs an interpreter of kind: fp_py_find()'s answer
 * (php, ruby's), with its version ("3.11.2") in version.
 */
struct fp_maps;
int fp_pyframes_find(int kind, struct fp_maps *m, char *version, size_t len, const char **why);
/*
 * The process exec'd another CPython: its frames are read as b's from now
 * on (the records of the old program dropped). The code objects named so
 * far stay, each with the layout it was read under, so that the frames a
 * bucket holds keep their names.
 */
void fp_pyframes_rebind(struct fp_pyframes *p, const struct fp_py_binary *b, uint64_t bias);
/*
 * The same for a PHP (php.h): its frames' code is their zend_function and
 * their instruction their line, read with them; named as PHP writes them.
 */
struct fp_pyframes *fp_pyframes_new_php(pid_t pid, const struct fp_php_binary *b, uint64_t bias);
void fp_pyframes_rebind_php(struct fp_pyframes *p, const struct fp_php_binary *b, uint64_t bias);
/*
 * And a Ruby (ruby.h): its frames' code is their iseq (their instruction
 * their pc) or a C function's method entry (FP_PYSTACK_NATIVE), spliced at
 * the frame rb_vm_exec called.
 */
struct fp_pyframes *fp_pyframes_new_ruby(pid_t pid, const struct fp_ruby_binary *b, uint64_t bias);
void fp_pyframes_rebind_ruby(struct fp_pyframes *p, const struct fp_ruby_binary *b, uint64_t bias);
/*
 * And a Perl (perl.h): its frames' code is their CV (or, FP_PYSTACK_MAIN,
 * the interpreter of the main program's file scope) and their
 * instruction their line, read with them; named as caller() writes them.
 */
struct fp_pyframes *fp_pyframes_new_perl(pid_t pid, const struct fp_perl_binary *b, uint64_t bias);
void fp_pyframes_rebind_perl(struct fp_pyframes *p, const struct fp_perl_binary *b, uint64_t bias);

/* The program reads the process from time on (CLOCK_MONOTONIC): samples before have no record. */
void fp_pyframes_reading_since(struct fp_pyframes *p, uint64_t time);
/* Keeps a record of the program's for its sample. */
void fp_pyframes_record(struct fp_pyframes *p, const struct fp_pystack_record *r);

/*
 * Splices the Python stack of thread tid's sample at time into the native
 * stack f (n frames, leaf first, room for max): the new count.
 */
uint32_t fp_pyframes_merge(struct fp_pyframes *p, pid_t tid, uint64_t time, struct fp_frame *f,
                           uint32_t n, uint32_t max);

/*
 * Splices r, the Python stack the off-CPU program read with the native
 * stack f (n frames, room for max), into it: the new count. r NULL: none
 * was read (counted).
 */
uint32_t fp_pyframes_splice(struct fp_pyframes *p, const struct fp_pystack_record *r,
                            struct fp_frame *f, uint32_t n, uint32_t max);

/* A Python frame's names: valid until the next fp_pyframes_trim(). */
struct fp_pyframe_name {
        bool named;
        const char *function;    /* the qualified name, or "[python]" ("[php]") when unread */
        const char *system_name; /* its plain name (co_name) when it differs, else NULL */
        const char *filename;    /* "" when unknown */
        int64_t start_line;      /* the function's first line, 0 unknown */
        int64_t line;            /* the line the frame was at, 0 unknown */
};
void fp_pyframes_name(const struct fp_pyframes *p, const struct fp_frame *f,
                      struct fp_pyframe_name *ret);

/*
 * Between buckets (no Python frame is held): forgets the code objects
 * when they are more than half of FP_PYFRAMES_CODES, and the records no
 * sample took.
 */
void fp_pyframes_trim(struct fp_pyframes *p);

void fp_pyframes_stats(const struct fp_pyframes *p, struct fp_pyframes_stats *ret);
/* Adds b's counts to a's. */
void fp_pyframes_stats_add(struct fp_pyframes_stats *a, const struct fp_pyframes_stats *b);

/*
 * A sampled process's Python state, as its sampler (a target, a host-tier
 * process) keeps it: whether it runs a CPython, looked for at most every
 * FP_PYPROC_CHECK_NS of sample time until found (its interpreter's
 * symbols are read as its first samples land in it), and registered with
 * the program so that its samples have records.
 */
#define FP_PYPROC_CHECK_NS 50000000ULL /* 50 ms of sample time */
struct fp_maps;
struct fp_pyproc {
        struct fp_pyframes *py; /* once a CPython was recognised: names its frames */
        bool live;              /* py is the running program's and registered */
        bool refused;           /* a CPython not understood (said once per file) */
        uint64_t check_ns;      /* the sample time of the last look for one */
        unsigned off;           /* interpreters not looked for: 1 << FP_PYSTACK_PYTHON, ... */
};
/* Whether pid (mappings m) is known to run a CPython registered with s; looks again if due. */
bool fp_pyproc_known(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid, struct fp_maps *m,
                     uint64_t time);
/*
 * The native stack f (n frames, room for max) of thread tid's sample at
 * time with its Python frames spliced in (fp_pyframes_merge()): the new
 * count; n when the process is not known to run a CPython.
 */
uint32_t fp_pyproc_merge(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid, struct fp_maps *m,
                         pid_t tid, uint64_t time, struct fp_frame *f, uint32_t n, uint32_t max);
/*
 * fp_pyframes_splice() of an off-CPU stack at time, once pid is known to
 * run a CPython (else n, and looked for as at a sample).
 */
uint32_t fp_pyproc_splice(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid, struct fp_maps *m,
                          uint64_t time, const struct fp_pystack_record *r, struct fp_frame *f,
                          uint32_t n, uint32_t max);
/* Unregisters it (an exec, an exit): looked for again; py keeps the names read so far. */
void fp_pyproc_forget(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid);
/* fp_pyproc_forget(), and py freed. */
void fp_pyproc_free(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid);
