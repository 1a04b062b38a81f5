/* SPDX-License-Identifier: MIT */
/*
 * One sample of a target's thread into its open bucket: the stack
 * (stackwalk.h) aggregated with the sample's period and counters, or
 * counted by why it could not be (a revoked target, a full stack table
 * kept under one stand-in, no memory).
 *
 * This part of the target module only is called (by the ring reader in
 * threads.c); it calls nothing of the target's back.
 */
#include "target-internal.h"
#include "aggregate.h"
#include "maps.h"
#include "stackwalk.h"

#include <errno.h>

void fp_target_add_sample(struct fp_target *t, const struct fp_perf_sample *s)
{
        struct fp_frame *f = t->frames;
        uint32_t n;

        if (t->revoked) {
                t->st.revoked++;
                return;
        }
        n = fp_stackwalk(&t->walk, s, f);
        int r = fp_agg_add(t->agg, (pid_t)s->tid, fp_maps_epoch(t->maps), f, n, s->period,
                           s->n_counters ? s->counters : NULL, fp_stackwalk_resolve, &t->walk);
        if (r == -ENOSPC) {
                /* The bucket's stack table is full: the time is kept, under one stand-in. */
                t->st.stacks_over_limit++;
                f[0] = (struct fp_frame){.flags = FP_FRAME_OVERFLOW};
                r = fp_agg_add(t->agg, (pid_t)s->tid, 0, f, 1, s->period,
                               s->n_counters ? s->counters : NULL, NULL, NULL);
        }
        if (r == 0) {
                t->st.samples++;
                t->st.value += s->period;
                for (unsigned i = 0; i < s->n_counters; i++)
                        t->st.counter_total[i] += s->counters[i];
                t->st.time_enabled += s->d_enabled;
                t->st.time_running += s->d_running;
        } else {
                t->st.dropped_nomem++;
        }
}