/* SPDX-License-Identifier: MIT */
/*
 * A target's off-CPU time (offcpu.h): the kernel side's records into the
 * open bucket, one aggregate per reason the thread waited, each stack
 * unwound from the thread's own registers and stack copy by the same
 * walker as its CPU samples (with a configuration of its own: a copied
 * stack always, no kernel frames). A block outside a system call comes in
 * two records, its stack at the switch-out and its weights at the
 * switch-in: the thread holds the unwound stack in between.
 *
 * Part of the target module: called by target.c (set-up, buckets) and by
 * the agent through target.h; calls samples.c.
 */
#include "target-internal.h"
#include "maps.h"
#include "offcpu.h"
#include "unwind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fp_target_offcpu_init(struct fp_target *t)
{
        if (!t->cfg.off_cpu_period)
                return 0;
        t->off_cfg = t->cfg;
        t->off_cfg.n_members = 0;
        t->off_cfg.kernel_frames = false;
        t->off_cfg.stack_bytes = FP_OFFCPU_STACK_MAX;
        /* Frame pointers alone would need the kernel's chain: copies are unwound by CFI. */
        if (t->off_cfg.unwind == FP_UNWIND_FP)
                t->off_cfg.unwind = FP_UNWIND_AUTO;
        /* (target.c names its JIT frames: .jit_name set there.) */
        t->off_walk = (struct fp_stackwalk){
            .maps = t->maps, .cfg = &t->off_cfg, .st = &t->off_st, .may_reload = true};
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++) {
                t->off_agg[i] = fp_agg_new(0);
                if (!t->off_agg[i])
                        return -ENOMEM;
                fp_agg_set_limit(t->off_agg[i], FP_TARGET_MAX_STACKS);
        }
        return 0;
}

void fp_target_offcpu_free(struct fp_target *t)
{
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++) {
                fp_agg_free(t->off_agg[i]);
                t->off_agg[i] = NULL;
        }
}

int fp_target_offcpu_next(struct fp_target *t)
{
        struct fp_agg *fresh[FP_OFFCPU_REASONS] = {0};

        if (!t->off_agg[0])
                return 0;
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++) {
                fresh[i] = fp_agg_new(0);
                if (!fresh[i]) {
                        for (unsigned j = 0; j < i; j++)
                                fp_agg_free(fresh[j]);
                        return -ENOMEM;
                }
                fp_agg_set_limit(fresh[i], FP_TARGET_MAX_STACKS);
        }
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++) {
                fp_agg_free(t->off_agg[i]);
                t->off_agg[i] = fresh[i];
        }
        return 0;
}

const struct fp_agg *fp_target_offcpu_bucket(const struct fp_target *t, unsigned reason)
{
        return reason < FP_OFFCPU_REASONS ? t->off_agg[reason] : NULL;
}

/*
 * The record's stack into f: the thread's registers and copy, as a
 * user-mode sample's, with py's Python frames spliced in (read with it).
 */
static uint32_t walk(struct fp_target *t, const struct fp_offcpu_record *r,
                     const struct fp_pystack_record *py, struct fp_frame *f)
{
        struct fp_perf_sample s;
        uint64_t root = t->off_st.unwound_root;
        uint32_t n;

        fp_offcpu_sample(r, &s);
        n = fp_stackwalk(&t->off_walk, &s, f);
        t->st.off_walked++;
        t->st.off_unwound_root += t->off_st.unwound_root - root;
        return fp_target_python_splice(t, r->time_ns, py, f, n);
}

/* Adds the stack f to the bucket of each reason the record weighs something for. */
static void add(struct fp_target *t, pid_t tid, unsigned epoch, struct fp_frame *f, uint32_t n,
                const __u64 *weight)
{
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++) {
                if (!weight[i])
                        continue;
                if (fp_target_agg_add(t, t->off_agg[i], &t->off_walk, tid, epoch, f, n, weight[i],
                                      NULL) < 0) {
                        t->st.dropped_nomem++;
                        continue;
                }
                t->st.off_samples++;
                t->st.off_value += weight[i];
        }
}

void fp_target_offcpu_record(struct fp_target *t, const struct fp_offcpu_record *r,
                             const struct fp_pystack_record *py)
{
        struct fp_thread *th = fp_thread_find(t, (pid_t)r->tid);
        uint32_t n;

        if (!t->off_agg[0])
                return;
        t->st.off_records++;
        if (t->revoked) {
                t->st.revoked += fp_offcpu_parts(r);
                return;
        }
        switch (r->kind) {
        case FP_OFFCPU_CALL:
                n = walk(t, r, py, t->frames);
                add(t, (pid_t)r->tid, fp_maps_epoch(t->maps), t->frames, n, r->weight);
                break;
        case FP_OFFCPU_STACK:
                if (!th)
                        break; /* not one of its threads (yet): its weights count as unpaired */
                if (!th->off_frames &&
                    !(th->off_frames = malloc(MAX_FRAMES * sizeof(struct fp_frame))))
                        break;
                th->off_n = walk(t, r, py, th->off_frames);
                th->off_seq = r->seq;
                th->off_epoch = fp_maps_epoch(t->maps);
                break;
        case FP_OFFCPU_WEIGHTS:
                if (th && th->off_n && th->off_seq == r->seq) {
                        add(t, (pid_t)r->tid, th->off_epoch, th->off_frames, th->off_n, r->weight);
                        th->off_n = 0;
                } else {
                        t->st.off_unpaired += fp_offcpu_parts(r);
                }
                break;
        default:
                break;
        }
}

void fp_target_offcpu_counts(struct fp_target *t, const struct fp_offcpu_target *k)
{
        /* The kernel's counts only grow while the target is in its map; keep the highest. */
        if (k->parts < t->st.off_parts)
                return;
        t->st.off_parts = k->parts;
        t->st.off_kept = k->kept;
        t->st.off_lost_ring = k->lost_ring;
        t->st.off_lost_copy = k->lost_copy;
        t->st.off_lost_exited = k->lost_exited;
        t->st.off_lost_changed = k->lost_changed;
        t->st.off_lost_ns = k->lost_ns;
}
