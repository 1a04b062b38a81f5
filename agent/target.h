/* SPDX-License-Identifier: MIT */
/*
 * A profiled process: its threads and their perf events, its mappings, and
 * the aggregated samples and loss counts gathered so far.
 *
 * Thread life cycle:
 *
 *   attach (at start, on a FORK record from a sibling's side-band, or found
 *   by the once-a-second /proc/PID/task rescan)
 *      -> live: both rings registered with the event loop
 *      -> dead (EXIT record or hangup): rings drained, fds closed at once;
 *         the thread's name is kept for the profile's labels.
 *
 * When no thread is left and /proc/PID is gone (or belongs to another
 * process start), the target is "exited": nothing is open, but its
 * samples, mappings and symbols stay until it is stopped, so it can still
 * be dumped.
 */
#pragma once

#include "perf.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_symcache;
struct fp_pprof;
struct fp_target;

enum fp_target_state {
        FP_TARGET_RUNNING,
        FP_TARGET_EXITED,
};

struct fp_target_stats {
        enum fp_target_state state;
        unsigned threads_live;
        unsigned threads_seen;
        uint64_t samples;       /* samples aggregated */
        uint64_t value;         /* sum of their periods */
        uint64_t lost;          /* records the kernel dropped: ring full (PERF_RECORD_LOST) */
        uint64_t throttled;     /* PERF_RECORD_THROTTLE events */
        uint64_t unwind_empty;  /* samples with no usable callchain (kept with their ip) */
        uint64_t attach_failed; /* threads that could not be given an event */
        uint64_t unresolved;    /* frames outside every known mapping */
        uint64_t dropped_nomem; /* samples that could not be aggregated: out of memory */
        bool kernel_excluded;   /* the kernel refused kernel-mode samples: user time only */
        uint64_t start_ns;      /* CLOCK_REALTIME of start */
};

/*
 * Starts profiling pid: opens both events on every thread and registers
 * them with base. On failure returns -errno and writes one line for the
 * user into err (for example "event 'cycles' is not supported on this
 * machine: no hardware PMU is exposed"): -ESRCH no such process, -EACCES
 * not allowed, -ENOENT/-EOPNOTSUPP event not available.
 */
int fp_target_start(struct event_base *base, struct fp_symcache *cache, pid_t pid,
                    const struct fp_perf_config *cfg, struct fp_target **ret, char *err,
                    size_t err_len);
/* Stops (if still running) and frees everything. Accepts NULL. */
void fp_target_free(struct fp_target *t);

pid_t fp_target_pid(const struct fp_target *t);
const char *fp_target_comm(const struct fp_target *t);
const char *fp_target_exe(const struct fp_target *t);
uint64_t fp_target_starttime(const struct fp_target *t);
const struct fp_perf_config *fp_target_config(const struct fp_target *t);
void fp_target_stats(const struct fp_target *t, struct fp_target_stats *ret);

/* Reads every ring now, so a dump includes samples up to this moment. */
void fp_target_drain(struct fp_target *t);

/*
 * Adds the target's samples to p, whose sample types must be the two of
 * fp_target_sample_types(). with_process_labels adds "pid" and "process"
 * labels (for dumps that merge targets).
 */
int fp_target_to_pprof(struct fp_target *t, struct fp_pprof *p, bool with_process_labels);
/* The (type, unit) pairs of the samples: samples/count and cpu/nanoseconds (or EVENT/count). */
void fp_target_sample_types(const struct fp_target *t, const char *ret_types[2],
                            const char *ret_units[2]);

/*
 * Process start time (clock ticks since boot, /proc/PID/stat field 22), 0
 * when gone; *ret_state (when non-NULL) gets the state letter (R, S, Z, ...).
 */
uint64_t fp_proc_stat(pid_t pid, char *ret_state);
