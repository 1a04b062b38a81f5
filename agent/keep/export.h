/* SPDX-License-Identifier: MIT */
/*
 * A target's open bucket, exported for people (a pprof profile, for dumps)
 * and for the store (a batch, which closes the bucket). Frames are
 * symbolized here, once per export: a stack's function names, mappings
 * and build IDs are what the profile and the store keep.
 */
#pragma once

#include "debugfile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fp_host;
struct fp_pprof;
struct fp_store_batch;
struct fp_store_target;
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
 * The same for the open bucket's off-CPU time (nothing when the target's
 * is not profiled): p's first two sample types are samples/count and
 * off-cpu/nanoseconds; each sample has a wait label too.
 */
int fp_export_offcpu_pprof(struct fp_target *t, struct fp_pprof *p);
/*
 * Both: the open bucket's CPU time (a clock event's, in ns; its counters
 * left out) and its off-CPU time, for the wall profile
 * (FP_STORE_WALL_EVENT): p's sample types are samples/count and
 * wall/nanoseconds.
 */
int fp_export_wall_pprof(struct fp_target *t, struct fp_pprof *p);
/*
 * Closes t's open bucket into b: the target (its config as text, active
 * or not), its event and counters, every aggregated stack symbolized, and
 * the drops since the last bucket (fp_target_open_drops()). Then t starts
 * an empty bucket. Returns the target's index in b, or -errno (the bucket
 * then stays open).
 */
int fp_export_batch(struct fp_target *t, struct fp_store_batch *b, bool active);
/*
 * The store's row of target t, as fp_export_batch() writes it: its strings
 * are t's own (and config the caller's, fp_target_config_string()).
 */
struct fp_store_target fp_export_target_row(struct fp_target *t, const char *config, bool active);

/*
 * Closes the host tier's open bucket into b: one store target per series
 * (service and executable; pid 0, its identity a hash of the two, active
 * never, so no restart resumes it as a process), the samples of every
 * process of the series with their thread labels, and the tier's drops on
 * a series of its own ("[host tier]", no service). Then the tier starts
 * its next bucket. The series' indices in b go to ret_idx (max_idx at
 * most, their number to *ret_n), so a batch that cannot be stored can be
 * charged back (fp_host_charge_drop()). 0 or -errno (the bucket then
 * stays open).
 */
int fp_export_host_batch(struct fp_host *h, struct fp_store_batch *b, uint32_t *ret_idx,
                         size_t max_idx, size_t *ret_n);
/*
 * Adds the samples of the host tier's open bucket (of one service, or all
 * with service NULL) to p, whose first two sample types are samples/count
 * and nanoseconds: its CPU samples (cpu), its off-CPU time (off_cpu), or
 * both (the wall profile); labels thread, thread_name, pid, process,
 * service, container (when in one) and wait (off-CPU time).
 */
int fp_export_host_pprof(struct fp_host *h, struct fp_pprof *p, const char *service, bool cpu,
                         bool off_cpu);

/*
 * Frames exported (to the store or a dump) by what named them: the symbol
 * source of their file's table (debugfile.h: dynsym, symtab, build_id,
 * debuglink, minidebuginfo, pclntab), then kernel (kallsyms), jit (a perf
 * map), python (a Python frame read at sample time), and unnamed (an
 * address left as FILE+0xOFFSET, or a Python frame not read). Since the
 * agent started; every frame of every stack of every export counts.
 */
/*
 * Frames of one exported stack at most: the stack's own
 * (FP_TARGET_MAX_FRAMES) and as many calls inlined at them.
 */
#define FP_EXPORT_MAX_FRAMES 1024
#define FP_EXPORT_NAME_KINDS (FP_SYM_SOURCES + 9)
/* The kind's name in status and metrics. */
const char *fp_export_name_kind(int kind);
void fp_export_names(uint64_t out[FP_EXPORT_NAME_KINDS]);
