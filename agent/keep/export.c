/* SPDX-License-Identifier: MIT */
/*
 * A target's open bucket exported: to a pprof profile (dumps: frames
 * symbolized into locations, counters into sample types, thread and
 * process labels) and to a store batch (closing the bucket), with the
 * drops counted since the last bucket and those charged for the next.
 */
#include "target-internal.h"
#include "perfmap.h"
#include "procfs.h"
#include "targetconf.h"
#include "util.h"
#include "aggregate.h"
#include "maps.h"
#include "pprof.h"
#include "store.h"
#include "symbols.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *basename_of(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* What one frame is, for people: its function name and mapping. */
struct frame_desc {
        const char *function;             /* never NULL */
        const struct fp_mapping *mapping; /* NULL: none */
        const char *build_id;             /* "" when unknown */
        uint64_t limit;                   /* mapping end for the profile */
        char buf[512];
};

static void frame_describe(struct fp_target *t, const struct fp_frame *f, struct frame_desc *d)
{
        uint64_t off = 0;

        d->mapping = NULL;
        d->build_id = "";
        d->limit = 0;
        if (f->flags & FP_FRAME_KERNEL_TIME) {
                d->function = "[kernel]";
                return;
        }
        if (f->flags & FP_FRAME_TRUNCATED) {
                d->function = "[truncated]";
                return;
        }
        if (f->flags & FP_FRAME_OVERFLOW) {
                d->function = "[stack table full]";
                return;
        }
        if (!f->mapping) {
                d->function = "[unknown]";
                return;
        }
        struct fp_mapping *x = fp_maps_get(t->maps, f->mapping);
        d->function = fp_maps_symbolize(t->maps, f->mapping, f->addr, &off);
        if (!d->function && x->kind == FP_MAPPING_ANON) {
                /* JIT code: the runtime's perf map may name it. */
                if (!t->perfmap)
                        t->perfmap = fp_perfmap_new(t->pid);
                if (t->perfmap && (d->function = fp_perfmap_lookup(t->perfmap, f->addr)))
                        t->st.jit_frames++;
        }
        d->mapping = x;
        d->build_id = x->symtab ? fp_symtab_build_id(x->symtab) : "";
        d->limit = x->kind == FP_MAPPING_KERNEL ? UINT64_MAX : x->end;
        if (!d->function) {
                snprintf(d->buf, sizeof(d->buf), "%s+0x%" PRIx64, basename_of(x->path), off);
                d->function = d->buf;
        }
}

/* The pprof location of one frame, interning its mapping and function. */
static int frame_location(struct fp_target *t, struct fp_pprof *p, const struct fp_frame *f,
                          uint64_t *mapping_ids, uint64_t *ret_loc)
{
        struct frame_desc d;
        uint64_t mapping_id = 0, function_id = 0;
        int r;

        frame_describe(t, f, &d);
        if (d.mapping) {
                if (!mapping_ids[f->mapping - 1]) {
                        r = fp_pprof_mapping(p, d.mapping->start, d.limit, d.mapping->pgoff,
                                             d.mapping->path, d.build_id,
                                             &mapping_ids[f->mapping - 1]);
                        if (r < 0)
                                return r;
                }
                mapping_id = mapping_ids[f->mapping - 1];
        }
        r = fp_pprof_function(p, d.function, NULL, &function_id);
        if (r < 0)
                return r;
        return fp_pprof_location(p, mapping_id, f->addr, function_id, ret_loc);
}

/* Where each counter goes among p's sample types (added when missing). */
static int counter_columns(struct fp_target *t, struct fp_pprof *p, size_t *ret)
{
        for (unsigned i = 0; i < t->cfg.n_members; i++) {
                const char *type, *unit;
                fp_target_counter_type(t, i, &type, &unit);
                int r = fp_pprof_find_sample_type(p, type, unit);
                if (r == -ENOENT)
                        r = fp_pprof_add_sample_type(p, type, unit);
                if (r < 0)
                        return r;
                ret[i] = (size_t)r;
        }
        return 0;
}

static int64_t clamp64(uint64_t v)
{
        return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

int fp_target_to_pprof(struct fp_target *t, struct fp_pprof *p)
{
        size_t n_maps = fp_maps_count(t->maps);
        uint64_t *mapping_ids = calloc(n_maps ? n_maps : 1, sizeof(*mapping_ids));
        uint64_t *locs = malloc(MAX_FRAMES * sizeof(*locs));
        size_t column[FP_PERF_MAX_MEMBERS];
        int64_t *values = NULL;
        int r = counter_columns(t, p, column);

        if (r < 0)
                goto out;
        values = calloc(fp_pprof_n_sample_types(p), sizeof(*values));
        if (!mapping_ids || !locs || !values) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < fp_agg_n_entries(t->agg); i++) {
                const struct fp_agg_entry *e = fp_agg_entry(t->agg, i);
                struct fp_thread *th = fp_thread_find(t, e->tid);
                values[0] = clamp64(e->count);
                values[1] = clamp64(e->value);
                for (unsigned j = 0; j < t->cfg.n_members; j++)
                        values[column[j]] = clamp64(e->counters[j]);
                struct fp_pprof_label labels[5] = {
                    {.key = "thread", .num = e->tid},
                    {.key = "thread_name", .str = th ? th->comm : ""},
                    {.key = "pid", .num = t->pid},
                    {.key = "process", .str = t->comm},
                    {.key = "service", .str = t->service},
                };

                for (uint32_t j = 0; j < e->n_frames; j++) {
                        r = frame_location(t, p, &e->frames[j], mapping_ids, &locs[j]);
                        if (r < 0)
                                goto out;
                }
                r = fp_pprof_add_sample(p, locs, e->n_frames, values, labels,
                                        t->service[0] ? 5 : 4);
                if (r < 0)
                        goto out;
        }
out:
        free(mapping_ids);
        free(locs);
        free(values);
        return r;
}

void fp_target_config_string(const struct fp_target *t, char *buf, size_t len)
{
        fp_targetconf_format(&t->cfg, t->follow_children, buf, len);
}

void fp_target_charge_drop(struct fp_target *t, const char *reason, uint64_t count)
{
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED; i++) {
                if (!t->carried[i].reason[0])
                        snprintf(t->carried[i].reason, sizeof(t->carried[i].reason), "%s", reason);
                if (strcmp(t->carried[i].reason, reason) == 0) {
                        t->carried[i].count += count;
                        return;
                }
        }
}

/* Adds one bucket drop count unless it is zero. */
static int batch_drop(struct fp_store_batch *b, uint32_t ti, const char *reason, uint64_t n)
{
        return n ? fp_store_batch_add_drop(b, ti, reason, n) : 0;
}

int fp_target_fill_batch(struct fp_target *t, struct fp_store_batch *b, bool active)
{
        struct fp_store_frame *frames = NULL;
        struct frame_desc *descs = NULL;
        const char *types[2], *units[2];
        char config[FP_PERF_EVENT_LIST_MAX + 128];
        uint32_t ti, ei, si, member_ei[FP_PERF_MAX_MEMBERS];
        int r;

        fp_target_drain(t);
        fp_target_config_string(t, config, sizeof(config));
        fp_target_sample_types(t, types, units);
        struct fp_store_target st = {.host = NULL,
                                     .pid = t->pid,
                                     .starttime = t->starttime,
                                     .comm = t->comm,
                                     .exe = t->exe,
                                     .config = config,
                                     .active = active,
                                     .service = t->service,
                                     .has_guard = true,
                                     .guard = fp_target_guarded_for(t)};
        struct fp_store_event ev = {.name = t->cfg.event.name,
                                    .count_type = types[0],
                                    .count_unit = units[0],
                                    .value_type = types[1],
                                    .value_unit = units[1],
                                    .period_type = types[1],
                                    .period_unit = units[1],
                                    .period = (int64_t)(t->cfg.freq ? 1 : t->cfg.period)};
        r = fp_store_batch_add_target(b, &st, &ti);
        if (r < 0)
                return r;
        r = fp_store_batch_add_event(b, &ev, &ei);
        if (r == 0)
                r = fp_store_batch_set_series(b, ti, ei); /* its drops travel even with no sample */
        if (r < 0)
                return r;
        for (unsigned j = 0; j < t->cfg.n_members; j++) {
                struct fp_store_event mev = {
                    .name = t->cfg.members[j].name, .count_type = types[0], .count_unit = units[0]};
                fp_target_counter_type(t, j, &mev.value_type, &mev.value_unit);
                r = fp_store_batch_add_event(b, &mev, &member_ei[j]);
                if (r < 0)
                        return r;
        }
        frames = malloc(MAX_FRAMES * sizeof(*frames));
        descs = malloc(MAX_FRAMES * sizeof(*descs));
        if (!frames || !descs) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < fp_agg_n_entries(t->agg); i++) {
                const struct fp_agg_entry *e = fp_agg_entry(t->agg, i);
                struct fp_thread *th = fp_thread_find(t, e->tid);
                for (uint32_t j = 0; j < e->n_frames; j++) {
                        struct frame_desc *d = &descs[j];
                        frame_describe(t, &e->frames[j], d);
                        frames[j] = (struct fp_store_frame){
                            .function = d->function,
                            .mapping_file = d->mapping ? d->mapping->path : NULL,
                            .build_id = d->build_id,
                            .mapping_start = d->mapping ? d->mapping->start : 0,
                            .mapping_limit = d->limit,
                            .mapping_offset = d->mapping ? d->mapping->pgoff : 0,
                            .address = e->frames[j].addr};
                }
                r = fp_store_batch_add_stack(b, frames, e->n_frames, &si);
                if (r < 0)
                        goto out;
                r = fp_store_batch_add_sample(b, ti, ei, e->tid, th ? th->comm : "", si, e->count,
                                              e->value);
                for (unsigned j = 0; r >= 0 && j < t->cfg.n_members; j++)
                        if (e->counters[j])
                                r = fp_store_batch_add_sample(b, ti, member_ei[j], e->tid,
                                                              th ? th->comm : "", si, e->count,
                                                              e->counters[j]);
                if (r < 0)
                        goto out;
        }
        struct fp_target_stats *now = &t->st, *then = &t->st_bucketed;
        if ((r = batch_drop(b, ti, "kernel_ring_overflow", now->lost - then->lost)) < 0 ||
            (r = batch_drop(b, ti, "throttled", now->throttled - then->throttled)) < 0 ||
            (r = batch_drop(b, ti, "out_of_memory", now->dropped_nomem - then->dropped_nomem)) <
                0 ||
            (r = batch_drop(b, ti, "revoked_exec", now->revoked - then->revoked)) < 0 ||
            (r = batch_drop(b, ti, "unwind_failed", now->unwind_failed - then->unwind_failed)) <
                0 ||
            (r = batch_drop(b, ti, "stack_copy_short",
                            now->stack_copy_short - then->stack_copy_short)) < 0)
                goto out;
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED && t->carried[i].reason[0]; i++)
                if ((r = batch_drop(b, ti, t->carried[i].reason, t->carried[i].count)) < 0)
                        goto out;

        /* Everything is in the batch: start the next bucket empty. */
        struct fp_agg *fresh = fp_agg_new(t->cfg.n_members);
        if (!fresh) {
                r = -ENOMEM;
                goto out;
        }
        fp_agg_set_limit(fresh, FP_TARGET_MAX_STACKS);
        fp_agg_free(t->agg);
        t->agg = fresh;
        t->st_bucketed = t->st;
        memset(t->carried, 0, sizeof(t->carried));
        r = (int)ti;
out:
        free(frames);
        free(descs);
        return r;
}

size_t fp_target_open_drops(const struct fp_target *t, struct fp_target_drop *ret, size_t max)
{
        const struct fp_target_stats *now = &t->st, *then = &t->st_bucketed;
        struct fp_target_drop open[] = {
            {"kernel_ring_overflow", now->lost - then->lost},
            {"throttled", now->throttled - then->throttled},
            {"out_of_memory", now->dropped_nomem - then->dropped_nomem},
            {"revoked_exec", now->revoked - then->revoked},
            {"unwind_failed", now->unwind_failed - then->unwind_failed},
            {"stack_copy_short", now->stack_copy_short - then->stack_copy_short},
        };
        size_t n = 0;

        for (size_t i = 0; i < sizeof(open) / sizeof(open[0]) && n < max; i++)
                if (open[i].count)
                        ret[n++] = open[i];
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED && t->carried[i].reason[0] && n < max; i++)
                ret[n++] = (struct fp_target_drop){t->carried[i].reason, t->carried[i].count};
        return n;
}
