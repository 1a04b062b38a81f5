/* SPDX-License-Identifier: MIT */
/*
 * Aggregation of samples: identical stacks of one thread become one entry
 * with a count and a summed value (the sample period: nanoseconds for the
 * clock events).
 *
 * The key is (tid, maps epoch, raw callchain). A raw address means the same
 * code only within one epoch of the process's mappings (see maps.h), so
 * the epoch is part of the key. When an entry is created the caller's
 * resolve callback fills in each frame's mapping, once per distinct stack;
 * after that a repeated stack costs one hash and one comparison.
 *
 * A target that counts events beside its sampling event (a perf group)
 * makes its table with fp_agg_new(n_counters): each entry then also sums
 * what every counter counted in its samples.
 *
 * Frames are stored leaf first, as pprof wants them. The address of every
 * frame but the leaf is a return address; it is stored minus one so that
 * it falls inside the calling instruction (and so inside the caller, even
 * when the call is a function's last instruction).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp_frame {
        uint64_t addr;
        uint32_t mapping; /* 1-based index into the target's maps, 0: unknown */
        uint32_t flags;   /* FP_FRAME_* */
};

/* synthetic root frame: the stack could not be unwound further (unwind_failed, stack_copy_short) */
#define FP_FRAME_TRUNCATED 2u
#define FP_FRAME_KERNEL_TIME                                                                       \
        1u /* synthetic "[kernel]" leaf: time in the kernel, frames excluded                       \
            */
/* synthetic only frame: the bucket's stack table was full (fp_agg_set_limit()) */
#define FP_FRAME_OVERFLOW 4u
/* synthetic only frame: a thread's exit after its perf events closed (fp_target_exit_tail()) */
#define FP_FRAME_THREAD_EXIT 8u
/* synthetic only frame: a new thread's events before its own counter opened (counted by the kernel)
 */
#define FP_FRAME_THREAD_START 16u
/* a Python function's frame (pyframes.h): addr is its code object's entry << 32 | its line */
#define FP_FRAME_PYTHON 32u
/* a Java method's frame, interpreted or compiled (hotspot.h): addr is its Method* in the JVM */
#define FP_FRAME_JAVA 64u
/* a language runtime's function (runtimes/runtimes.h): addr is the runtime's entry of it */
#define FP_FRAME_RUNTIME 128u

struct fp_agg_entry {
        uint64_t hash;
        pid_t tid;
        unsigned epoch;
        uint32_t n_frames;
        uint64_t count;
        uint64_t value;
        uint64_t *counters; /* n_counters sums, in the entry's own allocation */
        struct fp_frame frames[];
};

struct fp_agg;

/* Fills frames[i].mapping for i < n; called once per new entry. */
typedef void (*fp_agg_resolve_fn)(void *userdata, struct fp_frame *frames, uint32_t n);

/* A table whose entries sum n_counters counters (at most 64) besides count and value. */
struct fp_agg *fp_agg_new(unsigned n_counters);
void fp_agg_free(struct fp_agg *a);

/*
 * Adds one sample of value to the entry (tid, epoch, frames addr/flags),
 * and counters[0..n_counters-1] to its counter sums (counters may be NULL:
 * zeros). frames[].mapping is ignored on input. -ENOMEM leaves the table
 * as it was.
 */
int fp_agg_add(struct fp_agg *a, pid_t tid, unsigned epoch, const struct fp_frame *frames,
               uint32_t n, uint64_t value, const uint64_t *counters, fp_agg_resolve_fn resolve,
               void *userdata);
unsigned fp_agg_n_counters(const struct fp_agg *a);
/*
 * At most max_entries distinct entries (0: no limit): a sample that would
 * make one more gets -ENOSPC, the table unchanged; only a stack of the one
 * stand-in frame FP_FRAME_OVERFLOW is let in past the limit (one per tid).
 */
void fp_agg_set_limit(struct fp_agg *a, size_t max_entries);

size_t fp_agg_n_entries(const struct fp_agg *a);
/* Entry i (0 <= i < n_entries), in insertion order. */
const struct fp_agg_entry *fp_agg_entry(const struct fp_agg *a, size_t i);
/* Totals over all entries. */
uint64_t fp_agg_total_count(const struct fp_agg *a);
