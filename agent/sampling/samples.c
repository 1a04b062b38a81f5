/* SPDX-License-Identifier: MIT */
/*
 * One sample of a target's thread into its open bucket: the stack
 * (stackwalk.h) aggregated with the sample's period and counters, or
 * counted by why it could not be (a revoked target, a full stack table
 * kept under one stand-in, no memory).
 *
 * A CPython's samples get their Python stacks here too (pyframes.h): the
 * records the BPF program wrote at each sample, spliced in.
 *
 * This part of the target module only is called (by the ring reader in
 * threads.c and by target.c); it calls nothing of the target's back.
 */
#include "target-internal.h"
#include "aggregate.h"
#include "maps.h"
#include "pystack.h"
#include "stackwalk.h"

#include <errno.h>
#include <stdbool.h>

int fp_target_agg_add(struct fp_target *t, struct fp_agg *agg, struct fp_stackwalk *w, pid_t tid,
                      unsigned epoch, struct fp_frame *f, uint32_t n, uint64_t value,
                      const uint64_t *counters)
{
        int r = fp_agg_add(agg, tid, epoch, f, n, value, counters, fp_stackwalk_resolve, w);

        if (r == -ENOSPC) {
                /* The bucket's stack table is full: the time is kept, under one stand-in. */
                struct fp_frame stand_in = {.flags = FP_FRAME_OVERFLOW};
                t->st.stacks_over_limit++;
                r = fp_agg_add(agg, tid, 0, &stand_in, 1, value, counters, NULL, NULL);
        }
        return r;
}

/* A stack of n frames at f for thread tid, weighing value (and counters, when given). */
static bool add_stack(struct fp_target *t, pid_t tid, struct fp_frame *f, uint32_t n,
                      uint64_t value, unsigned n_counters, const uint64_t *counters)
{
        int r = fp_target_agg_add(t, t->agg, &t->walk, tid, fp_maps_epoch(t->maps), f, n, value,
                                  n_counters ? counters : NULL);
        if (r == 0) {
                t->st.samples++;
                t->st.value += value;
                for (unsigned i = 0; i < n_counters; i++)
                        t->st.counter_total[i] += counters[i];
                return true;
        }
        t->st.dropped_nomem++;
        return false;
}

/* Splices the sample's Python stack (read by the program as it was taken) into f. */
static uint32_t python_merge(struct fp_target *t, const struct fp_perf_sample *s,
                             struct fp_frame *f, uint32_t n)
{
        return fp_pyproc_merge(&t->py, t->pystack, t->pid, t->maps, (pid_t)s->tid, s->time, f, n,
                               MAX_FRAMES);
}

uint32_t fp_target_python_splice(struct fp_target *t, uint64_t time,
                                 const struct fp_pystack_record *py, struct fp_frame *f, uint32_t n)
{
        return fp_pyproc_splice(&t->py, t->pystack, t->pid, t->maps, time, py, f, n, MAX_FRAMES);
}

void fp_target_add_sample(struct fp_target *t, const struct fp_perf_sample *s)
{
        struct fp_frame *f = t->frames;

        if (t->revoked) {
                t->st.revoked++;
                return;
        }
        uint32_t n = python_merge(t, s, f, fp_stackwalk(&t->walk, s, f));
        if (add_stack(t, (pid_t)s->tid, f, n, s->period, s->n_counters, s->counters)) {
                t->st.time_enabled += s->d_enabled;
                t->st.time_running += s->d_running;
        }
}

void fp_target_add_synthetic(struct fp_target *t, pid_t tid, unsigned flag, uint64_t value)
{
        struct fp_frame f = {.flags = flag};

        if (t->revoked) {
                t->st.revoked++;
                return;
        }
        (void)add_stack(t, tid, &f, 1, value, 0, NULL);
}

void fp_target_python_attach(struct fp_target *t, int fd)
{
        if (t->pystack && fp_pystack_attach(t->pystack, fd) < 0)
                t->py_attach_failed++;
}

void fp_target_python_forget(struct fp_target *t)
{
        fp_pyproc_forget(&t->py, t->pystack, t->pid);
}

void fp_target_python_free(struct fp_target *t)
{
        fp_pyproc_free(&t->py, t->pystack, t->pid);
}

void fp_target_pystack_record(struct fp_target *t, const struct fp_pystack_record *r)
{
        if (t->py.live)
                fp_pyframes_record(t->py.py, r);
}
