/* SPDX-License-Identifier: MIT */
/*
 * A sample's stack, as frames of one process: the kernel's callchain
 * (kernel frames when the configuration keeps them, else one synthetic
 * "[kernel]" leaf for time spent there), then the user part, unwound from
 * the sample's registers and stack copy (auto, dwarf) or taken from the
 * frame-pointer chain with a frameless leaf's caller put back (fp). Frames
 * are return addresses stepped back into their call, the leaf excepted;
 * a stack that could not be unwound to its thread's root ends in a
 * FP_FRAME_TRUNCATED frame. What happened is counted in *st.
 */
#pragma once

#include "aggregate.h"
#include "perf.h"
#include "samplestats.h"

#include <stdbool.h>
#include <stdint.h>

#define FP_STACKWALK_MAX_FRAMES 512

struct fp_maps;
struct fp_jvm_names;
struct fp_hotspot_code;

/*
 * The stack copy fitted to the stacks a target has (auto and dwarf): the
 * kernel copies a sample's stack_bytes in the interrupt, on the target's
 * CPU, so a copy far larger than the stacks costs the target for nothing.
 * What the unwinds have needed since the copy last changed is gathered
 * here; fp_stackfit_size() says what the copy should be, and threads.c
 * reopens the threads' events with it:
 *   - a sample that ran out of a copy smaller than FP_STACKFIT_MAX doubles
 *     it at once (or more, to fit the deepest stack seen);
 *   - FP_STACKFIT_LEARN samples to their root, none cut short, shrink it
 *     to half as much again as the deepest of them plus a kilobyte (when
 *     that saves a quarter); each growth doubles the samples a later
 *     shrink waits for, so a deep path that comes back now and then does
 *     not cost its roots again and again.
 */
#define FP_STACKFIT_MIN   2048
#define FP_STACKFIT_MAX   32768
#define FP_STACKFIT_LEARN 1000

struct fp_stackfit {
        uint64_t reach_max;     /* the most of a copy an unwind to the root read */
        uint64_t roots, shorts; /* samples to the root, and cut short by the copy */
        unsigned grows;         /* times the copy grew, over the target's life */
};

/* The copy size (a multiple of 512) for a target whose copy is cur; cur: keep it. */
uint32_t fp_stackfit_size(const struct fp_stackfit *f, uint32_t cur);

/*
 * A frame outside every known mapping re-reads /proc/PID/maps: a mapping the
 * side band's records have not told of yet (or lost). A re-read that finds
 * it, or any mapping not known before, leaves the next one
 * FP_MAPS_RELOAD_GAP_MIN_NS away; one that finds neither doubles the wait,
 * up to FP_MAPS_RELOAD_GAP_MAX_NS: return addresses that
 * are no code's (frame pointers read from a binary built without them, a
 * corrupt stack) would otherwise re-read a process's maps ten times a
 * second for ever: most of the agent's CPU on a process of many mappings.
 */
#define FP_MAPS_RELOAD_GAP_MIN_NS 100000000ULL   /* 100 ms */
#define FP_MAPS_RELOAD_GAP_MAX_NS 10000000000ULL /* 10 s */

/* One process's walker: what its samples are unwound and resolved against. */
struct fp_stackwalk {
        struct fp_maps *maps;
        const struct fp_perf_config *cfg; /* kernel_frames, unwind, stack_bytes */
        struct fp_target_stats *st;       /* unwinding figures and unresolved frames */
        bool may_reload;                  /* a miss may re-read /proc/PID/maps (live processes) */
        /*
         * Names JIT code (the process's perf map) or NULL; called for each
         * new stack's anonymous frames as the samples arrive, so that the map
         * is read while the process lives (its exported names come later).
         */
        const char *(*jit_name)(void *ctx, uint64_t addr);
        void *jit_ctx;
        /*
         * The process's JVM (jvmnames.h), or NULL: when its compiled code
         * keeps no frame pointer (no -XX:+PreserveFramePointer), a walk
         * ends at its first compiled frame, counted as jit_no_fp, instead
         * of following rbp.
         */
        const struct fp_jvm_names *jvm;
        /*
         * Names an interpreted Java method (the Method* an interpreter frame
         * keeps; ctx: jit_ctx), or NULL: a HotSpot JVM's interpreter frames
         * become FP_FRAME_JAVA frames, named as the arrive (the JVM's memory
         * is read while it lives) and at export. NULL: none are made.
         */
        const char *(*java_method)(void *ctx, uint64_t method);
        /*
         * What a JVM's code cache says of a code address (ctx: jit_ctx;
         * jvmnames.h's fp_jvm_names_code()), or NULL. A compiled Java
         * method's frame is stepped by its size and becomes FP_FRAME_JAVA
         * frames, the methods inlined there and its own; the interpreter is
         * known by its blob. Where it says nothing, the perf map's names
         * decide as above.
         */
        int (*java_code)(void *ctx, uint64_t pc, bool leaf, struct fp_hotspot_code *ret);
        uint64_t leaf_ip;            /* the user leaf of the sample being walked */
        uint64_t maps_reload_ns;     /* the last such re-read */
        uint64_t maps_reload_gap_ns; /* until the next may be (0: FP_MAPS_RELOAD_GAP_MIN_NS) */
        uint64_t maps_reloads;       /* re-reads so far */
        struct fp_stackfit fit;
};

/*
 * Fills f (FP_STACKWALK_MAX_FRAMES at most) with s's stack, leaf first, and
 * returns how many frames. Never 0: a sample without a usable callchain is
 * kept at its ip (or as an unknown frame) and counted as unwind_empty.
 */
uint32_t fp_stackwalk(struct fp_stackwalk *w, const struct fp_perf_sample *s, struct fp_frame *f);
/*
 * The aggregator's resolve callback (aggregate.h; userdata: the walker):
 * each frame's mapping, its symbols loaded while the file is surely there.
 */
void fp_stackwalk_resolve(void *userdata, struct fp_frame *frames, uint32_t n);
