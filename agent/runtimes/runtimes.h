/* SPDX-License-Identifier: MIT */
/*
 * What the sampling and export floors ask of the language runtimes
 * without knowing which runtime it is (runtimes.c holds the table):
 * whether a frame of a sample's stack copy is a runtime's, and its names.
 * A runtime's frame is {.flags = FP_FRAME_RUNTIME, .addr = the runtime's
 * handle of its function}, named through the process's maps, which keep
 * each runtime's state of that process (maps.h).
 */
#pragma once

#include "aggregate.h"
#include "rtframe.h"

#include <stdbool.h>
#include <stdint.h>

struct fp_maps;

/*
 * Which of a sample's n frames at[] (leaf first) are a runtime's: each
 * such frame's ret[i] and found[i] (false as given for the others, which
 * stay native). Returns how many.
 */
int fp_runtimes_frames(struct fp_maps *m, const struct fp_rt_frame_at *at, size_t n,
                       struct fp_frame *ret, bool *found);
/* What became of the process's runtime frames (zeros: no runtime of these met). */
void fp_runtimes_stats(struct fp_maps *m, struct fp_rt_stats *ret);
/* Adds b's counts to a's (and b's runtime when a has none). */
void fp_runtimes_stats_add(struct fp_rt_stats *a, const struct fp_rt_stats *b);
/* The names of FP_FRAME_RUNTIME frame f of the process of m: false when unknown. */
bool fp_runtimes_name(struct fp_maps *m, const struct fp_frame *f, struct fp_rt_name *ret);
