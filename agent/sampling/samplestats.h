/* SPDX-License-Identifier: MIT */
/*
 * What a tier counts about its samples: how many it kept and their value,
 * what the kernel dropped or withheld, how their stacks were unwound, and
 * what could not be kept, by reason. A target (target.h) keeps one; the
 * host tier (host.h) one for all its processes. Read by status, metrics
 * and the export of buckets.
 */
#pragma once

#include "perf.h"

#include <stdbool.h>
#include <stdint.h>

enum fp_target_state {
        FP_TARGET_RUNNING,
        FP_TARGET_EXITED,
};

struct fp_target_stats {
        enum fp_target_state state;
        uint64_t exited_ns; /* CLOCK_MONOTONIC when it was seen gone (0 while it runs) */
        unsigned threads_live;
        unsigned threads_seen;
        uint64_t samples;            /* samples aggregated */
        uint64_t value;              /* sum of their periods */
        uint64_t lost;               /* records the kernel dropped: ring full (PERF_RECORD_LOST) */
        uint64_t throttled;          /* PERF_RECORD_THROTTLE events */
        uint64_t unwind_empty;       /* samples with no usable callchain (kept with their ip) */
        uint64_t attach_failed;      /* threads that could not be given an event */
        uint64_t threads_missed;     /* born, but gone before they could be attached */
        uint64_t threads_over_limit; /* left out: --max-threads of its threads were sampled */
        unsigned threads_by_rescan;  /* found by the /proc rescan, not reported by a tracker */
        uint64_t unresolved;         /* frames outside every known mapping */
        uint64_t dropped_nomem;      /* samples that could not be aggregated: out of memory */
        uint64_t revoked;            /* samples after an exec into another user's program */
        uint64_t
            stacks_over_limit; /* samples kept as "[stack table full]" (FP_TARGET_MAX_STACKS) */
        /* Unwinding (unwind.h): stacks that did not reach the thread's root, and how. */
        uint64_t unwind_failed;         /* no usable CFI row (or, in dwarf mode, no CFI at all) */
        uint64_t stack_copy_short;      /* the stack went on past the copy the kernel took */
        uint64_t jit_no_fp;             /* at JIT code compiled without frame pointers */
        uint64_t unwound_root;          /* samples whose user stack reached the root */
        uint64_t frames_cfi, frames_fp; /* user frames stepped by CFI row, by frame pointer */
        uint64_t frames_java;         /* by a compiled Java method's size (its JVM's code cache) */
        uint64_t leaf_fixups;         /* fp mode: a frameless leaf's caller put back */
        uint64_t stack_bytes;         /* user-stack bytes the kernel copied, in all */
        uint64_t stack_resizes;       /* times the copy's size was fitted (stackwalk.h) */
        uint64_t stack_resize_failed; /* thread reopens for it that failed (old size kept) */
        uint64_t jit_frames;          /* frames named from a perf map */
        uint64_t ring_bytes;          /* memory the live threads' perf rings map */
        uint64_t ring_wakes;          /* times a thread's sampling ring woke the agent */
        /*
         * Random first periods (threads.c): threads whose first sample
         * came in it, and samples its event took in the moment before the
         * agent switched to the group (left out: the first stands for the
         * whole period).
         */
        uint64_t first_samples, first_extra;
        uint64_t first_shift;   /* the switch's delays made up by the groups' first samples */
        unsigned first_pending; /* live threads whose starter waits for its sample (one fd each) */
        /*
         * Threads born while the target was sampled (reported by the
         * tracker) that have exited: how many, their CPU time as the
         * kernel accounts it at their last switch, and what the profile
         * holds of them (the leader's unit: ns for the clocks).
         */
        uint64_t born_exited, born_cpu_ns, born_profiled;
        uint64_t born_before_ns; /* of born_cpu_ns: run before their sampling began (schedstat) */
        /* Samples of the bridge (bridge.h) kept: new threads' CPU before their own events;
         * and those taken after, left to the thread's own events. */
        uint64_t bridged, bridge_twins;
        /* Ticks of the bridge in its threads' exits, after their own events closed (kept). */
        uint64_t exit_tails;
        /*
         * Bridge ticks and exit tails of a target led by a counter (not a
         * clock): CPU time, which a count of page faults or switches cannot
         * hold, so left out and counted here (ticks, and the CPU they stood for).
         */
        uint64_t bridge_left_out, bridge_left_out_ns;
        /*
         * A counter-led target's new threads: their events that their samples
         * do not hold, as the kernel counted them (/proc before their counter
         * opened, the tracker's account at their exit), kept under "[thread
         * start]" (additions, and events).
         */
        uint64_t start_counted, start_events;
        bool kernel_excluded; /* the kernel refused kernel-mode samples: user time only */
        uint64_t start_ns;    /* CLOCK_REALTIME of start */
        /*
         * The group's counters (config members, in order): what each
         * counted in the intervals that ended in a sample, scaled when
         * multiplexed; and the group's time enabled and running over the
         * same intervals (running / enabled: how much of the time the
         * counters were really on the PMU).
         */
        uint64_t counter_total[FP_PERF_MAX_MEMBERS];
        uint64_t time_enabled, time_running;
        /*
         * Off-CPU time (offcpu.h), when profiled: records read; the kept
         * block parts they held (samples) and their weight (ns); kept
         * parts whose stack record never came (unpaired); stacks unwound,
         * and of them those that reached their thread's root. Then the kernel side's counts
         * (fp_target_offcpu_counts()): block parts seen and kept, and kept
         * parts lost, by reason, with their weight.
         */
        uint64_t off_records, off_samples, off_value, off_unpaired, off_walked, off_unwound_root;
        uint64_t off_parts, off_kept, off_lost_ring, off_lost_copy, off_lost_exited;
        uint64_t off_lost_changed, off_lost_ns;
};
