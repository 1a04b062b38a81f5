/* SPDX-License-Identifier: MIT */
/*
 * A target's open bucket, exported for people (a pprof profile, for dumps)
 * and for the store (a batch, which closes the bucket). Frames are
 * symbolized here, once per export: a stack's function names, mappings
 * and build IDs are what the profile and the store keep.
 */
#pragma once

#include <stdbool.h>

struct fp_pprof;
struct fp_store_batch;
struct fp_target;

/*
 * Adds the samples of t's open bucket to p, whose first sample types must
 * be the two of fp_target_sample_types(); each counter of the group goes
 * to the sample type named for its event (fp_target_counter_type()),
 * which is added to p when p lacks it. Labels: thread, thread_name, pid,
 * process and service (the same the store's queries give, so samples
 * merge). 0 or -errno (-ENOMEM).
 */
int fp_export_pprof(struct fp_target *t, struct fp_pprof *p);
/*
 * Closes t's open bucket into b: the target (its config as text, active
 * or not), its event and counters, every aggregated stack symbolized, and
 * the drops since the last bucket (fp_target_open_drops()). Then t starts
 * an empty bucket. Returns the target's index in b, or -errno (the bucket
 * then stays open).
 */
int fp_export_batch(struct fp_target *t, struct fp_store_batch *b, bool active);
