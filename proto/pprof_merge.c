/* SPDX-License-Identifier: MIT */
/*
 * pprof profiles, merging: adds every sample of one profile to another.
 *
 * The source's strings, mappings, functions and locations are re-interned
 * into the destination first, giving one translation table per kind
 * (source index -> destination id); its samples are then added through
 * the same path as the agent's own, so equal stacks with equal labels
 * merge by summing. Cost is linear in the size of the source.
 *
 * fp_pprof_merge_typed() goes the same way with a column map (source
 * sample type -> destination sample type, or none), so profiles whose
 * sample types differ (a counter's values joining the sampling event's
 * profile) merge too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pprof-internal.h"

static bool same_types(const struct fp_pprof *a, const struct fp_pprof *b)
{
        if (a->n_types != b->n_types)
                return false;
        for (size_t i = 0; i < a->n_types; i++)
                if (strcmp(fp_pp_str(a, a->types[i].type), fp_pp_str(b, b->types[i].type)) ||
                    strcmp(fp_pp_str(a, a->types[i].unit), fp_pp_str(b, b->types[i].unit)))
                        return false;
        return true;
}

static void widen_time(struct fp_pprof *dst, const struct fp_pprof *src)
{
        int64_t start, end, dend, send;

        if (src->time_nanos == 0 && src->duration_nanos == 0)
                return;
        if (dst->time_nanos == 0 && dst->duration_nanos == 0) {
                dst->time_nanos = src->time_nanos;
                dst->duration_nanos = src->duration_nanos;
                return;
        }
        dend = fp_pp_add_sat(dst->time_nanos, dst->duration_nanos);
        send = fp_pp_add_sat(src->time_nanos, src->duration_nanos);
        start = dst->time_nanos < src->time_nanos ? dst->time_nanos : src->time_nanos;
        end = dend > send ? dend : send;
        dst->time_nanos = start;
        if (__builtin_sub_overflow(end, start, &dst->duration_nanos))
                dst->duration_nanos = INT64_MAX;
}

/*
 * Source string index -> destination index, interned on first use: a
 * merge of some samples takes only the strings they need. 0 for a string
 * not yet interned (a destination's "" is 0 too, and re-interning "" is
 * harmless); m->err is set when interning fails.
 */
struct smap {
        struct fp_pprof *dst;
        const struct fp_pprof *src;
        uint32_t *v;
        int err;
};

static uint32_t sm(struct smap *m, uint32_t i)
{
        int r;

        if (i == 0 || m->v[i] || m->err)
                return m->v[i];
        r = fp_pp_intern(m->dst, m->src->strs[i].s, m->src->strs[i].len, &m->v[i]);
        if (r < 0)
                m->err = r;
        return m->v[i];
}

/* Which of src's samples a merge takes, and which entities they use (by src id). */
struct pick {
        fp_pprof_keep_fn keep; /* NULL: every sample, every entity */
        void *arg;
        bool *loc, *map, *fn;      /* [id]: used by a taken sample */
        fp_pprof_rename_fn rename; /* NULL: every location keeps its lines */
        void *rename_arg;
};

static bool taken(const struct pick *pk, const struct fp_pprof *src, size_t i)
{
        return !pk->keep || pk->keep(src, i, pk->arg);
}

/* Marks what the taken samples use, so only that is interned. */
static int mark_used(struct pick *pk, const struct fp_pprof *src)
{
        pk->loc = fp_pp_calloc(src->n_locations + 1, sizeof(*pk->loc));
        pk->map = fp_pp_calloc(src->n_mappings + 1, sizeof(*pk->map));
        pk->fn = fp_pp_calloc(src->n_functions + 1, sizeof(*pk->fn));
        if (!pk->loc || !pk->map || !pk->fn)
                return -ENOMEM;
        for (size_t i = 0; i < src->n_samples; i++) {
                const struct fp_pp_sample *s = &src->samples[i];
                if (!taken(pk, src, i))
                        continue;
                for (size_t j = 0; j < s->n_locs; j++)
                        pk->loc[src->sample_locs[s->loc_off + j]] = true;
        }
        for (size_t i = 0; i < src->n_locations; i++) {
                const struct fp_pp_location *l = &src->locations[i];
                if (!pk->loc[i + 1])
                        continue;
                pk->map[l->mapping_id] = true;
                for (size_t j = 0; j < l->n_lines; j++)
                        pk->fn[src->lines[l->line_off + j].function_id] = true;
        }
        return 0;
}

/*
 * cols NULL: src's types are dst's, in order. Else cols[t] is the dst type
 * of src type t, or -1 to leave it out; values is scratch for dst's types.
 */
static int merge_samples(struct fp_pprof *dst, const struct fp_pprof *src, struct smap *sp,
                         const struct pick *pk, const uint64_t *lmap, const int *cols,
                         int64_t *values)
{
        int r;

        for (size_t i = 0; i < src->n_samples; i++) {
                const struct fp_pp_sample *s = &src->samples[i];
                const uint64_t *sl = &src->sample_locs[s->loc_off];
                const struct fp_pp_label *sb = &src->sample_labels[s->label_off];

                if (!taken(pk, src, i))
                        continue;
                if (FP_PP_GROW(dst->scratch_locs, dst->cap_scratch_locs, s->n_locs) < 0)
                        return -ENOMEM;
                if (FP_PP_GROW(dst->scratch_labels, dst->cap_scratch_labels, s->n_labels) < 0)
                        return -ENOMEM;
                for (size_t j = 0; j < s->n_locs; j++)
                        dst->scratch_locs[j] = lmap[sl[j]];
                for (size_t j = 0; j < s->n_labels; j++)
                        dst->scratch_labels[j] = (struct fp_pp_label){
                            .key = sm(sp, sb[j].key),
                            .str = sb[j].str == FP_PP_NOSTR ? FP_PP_NOSTR : sm(sp, sb[j].str),
                            .unit = sm(sp, sb[j].unit),
                            .num = sb[j].num,
                        };
                if (sp->err)
                        return sp->err;
                const int64_t *v = &src->values[i * src->n_types];
                if (cols) {
                        memset(values, 0, dst->n_types * sizeof(*values));
                        for (size_t t = 0; t < src->n_types; t++)
                                if (cols[t] >= 0)
                                        values[cols[t]] = v[t];
                        v = values;
                }
                r = fp_pp_add_sample(dst, dst->scratch_locs, s->n_locs, v, dst->scratch_labels,
                                     s->n_labels);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The one line of a renamed location: its new function, no line number. */
static int rename_line(struct fp_pprof *dst, const char *name, const char *sys,
                       struct fp_pp_line *ret)
{
        uint32_t n = 0, y = 0;
        uint64_t fid;
        int r;

        r = fp_pp_intern(dst, name, strlen(name), &n);
        if (r >= 0 && sys && *sys)
                r = fp_pp_intern(dst, sys, strlen(sys), &y);
        if (r >= 0)
                r = fp_pp_intern_function(dst, n, y, 0, 0, &fid);
        if (r < 0)
                return r;
        *ret = (struct fp_pp_line){.function_id = fid, .line = 0};
        return 0;
}

static int merge_entities(struct fp_pprof *dst, const struct fp_pprof *src, struct smap *sp,
                          const struct pick *pk, uint64_t *mmap, uint64_t *fmap, uint64_t *lmap)
{
        int r;

        for (size_t i = 0; i < src->n_mappings; i++) {
                struct fp_pp_mapping m = src->mappings[i];

                if (pk->map && !pk->map[i + 1])
                        continue;
                m.filename = sm(sp, m.filename);
                m.build_id = sm(sp, m.build_id);
                if (sp->err)
                        return sp->err;
                r = fp_pp_intern_mapping(dst, &m, &mmap[i + 1]);
                if (r < 0)
                        return r;
        }
        /* The first main binary named wins; a merge never renames it. */
        if (!dst->main_mapping && src->main_mapping)
                dst->main_mapping = mmap[src->main_mapping];
        for (size_t i = 0; i < src->n_functions; i++) {
                const struct fp_pp_function *f = &src->functions[i];

                if (pk->fn && !pk->fn[i + 1])
                        continue;
                uint32_t name = sm(sp, f->name), sys = sm(sp, f->system_name);
                uint32_t file = sm(sp, f->filename);
                if (sp->err)
                        return sp->err;
                r = fp_pp_intern_function(dst, name, sys, file, f->start_line, &fmap[i + 1]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < src->n_locations; i++) {
                const struct fp_pp_location *l = &src->locations[i];

                size_t n_lines = l->n_lines;

                if (pk->loc && !pk->loc[i + 1])
                        continue;
                if (FP_PP_GROW(dst->scratch_lines, dst->cap_scratch_lines, n_lines + 1) < 0)
                        return -ENOMEM;
                for (size_t j = 0; j < n_lines; j++) {
                        dst->scratch_lines[j] = src->lines[l->line_off + j];
                        dst->scratch_lines[j].function_id = fmap[dst->scratch_lines[j].function_id];
                }
                if (pk->rename) {
                        const char *name = NULL, *sys = NULL;

                        if (pk->rename(src, i + 1, pk->rename_arg, &name, &sys) > 0) {
                                r = rename_line(dst, name, sys, &dst->scratch_lines[0]);
                                if (r < 0)
                                        return r;
                                n_lines = 1;
                        }
                }
                r = fp_pp_intern_location(dst, mmap[l->mapping_id], l->address, dst->scratch_lines,
                                          n_lines, l->is_folded, &lmap[i + 1]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The body of the merges. only_type NULL: every type, identical in dst
 * (or dst empty). Else only that type of src, matched or added by name.
 * pk->keep set: only the samples it takes, and only what they use.
 */
static int merge(struct fp_pprof *dst, const struct fp_pprof *src, const char *only_type,
                 struct pick *pk)
{
        struct smap sp = {.dst = dst, .src = src};
        uint64_t *mmap = NULL, *fmap = NULL, *lmap = NULL;
        int *cols = NULL;
        int64_t *values = NULL;
        bool typed = only_type != NULL;
        int r = -ENOMEM;

        sp.v = fp_pp_calloc(src->n_strs + 1, sizeof(*sp.v));
        mmap = fp_pp_calloc(src->n_mappings + 1, sizeof(*mmap));
        fmap = fp_pp_calloc(src->n_functions + 1, sizeof(*fmap));
        lmap = fp_pp_calloc(src->n_locations + 1, sizeof(*lmap));
        cols = fp_pp_calloc(src->n_types + 1, sizeof(*cols));
        if (!sp.v || !mmap || !fmap || !lmap || !cols)
                goto out;
        if (pk->keep && (r = mark_used(pk, src)) < 0)
                goto out;
        /* A whole merge interns every string, in src's order. */
        for (size_t i = 0; !pk->keep && i < src->n_strs; i++) {
                r = fp_pp_intern(dst, src->strs[i].s, src->strs[i].len, &sp.v[i]);
                if (r < 0)
                        goto out;
        }
        if (typed) {
                for (size_t i = 0; i < src->n_types; i++) {
                        cols[i] = -1;
                        if (*only_type && strcmp(fp_pp_str(src, src->types[i].type), only_type))
                                continue;
                        r = fp_pprof_find_sample_type(dst, fp_pp_str(src, src->types[i].type),
                                                      fp_pp_str(src, src->types[i].unit));
                        if (r == -ENOENT)
                                r = fp_pp_add_type(dst, sm(&sp, src->types[i].type),
                                                   sm(&sp, src->types[i].unit));
                        if (r < 0)
                                goto out;
                        cols[i] = r;
                }
                values = fp_pp_calloc(dst->n_types + 1, sizeof(*values));
                r = -ENOMEM;
                if (!values)
                        goto out;
        } else if (dst->n_types == 0) {
                for (size_t i = 0; i < src->n_types; i++) {
                        r = fp_pp_add_type(dst, sm(&sp, src->types[i].type),
                                           sm(&sp, src->types[i].unit));
                        if (r < 0)
                                goto out;
                }
        }
        if (!typed || !*only_type) {
                if (dst->period_type.type == 0 && dst->period_type.unit == 0 && dst->period == 0) {
                        dst->period_type.type = sm(&sp, src->period_type.type);
                        dst->period_type.unit = sm(&sp, src->period_type.unit);
                        dst->period = src->period;
                }
                if (dst->default_type == 0)
                        dst->default_type = sm(&sp, src->default_type);
                for (size_t i = 0; i < src->n_comments; i++) {
                        r = fp_pp_add_comment(dst, sm(&sp, src->comments[i]));
                        if (r < 0)
                                goto out;
                }
        }
        if (dst->drop_frames == 0)
                dst->drop_frames = sm(&sp, src->drop_frames);
        if (dst->keep_frames == 0)
                dst->keep_frames = sm(&sp, src->keep_frames);
        r = sp.err;
        if (r < 0)
                goto out;
        widen_time(dst, src);

        r = merge_entities(dst, src, &sp, pk, mmap, fmap, lmap);
        if (r < 0)
                goto out;
        r = merge_samples(dst, src, &sp, pk, lmap, typed ? cols : NULL, values);
out:
        free(sp.v);
        free(mmap);
        free(fmap);
        free(lmap);
        free(cols);
        free(values);
        free(pk->loc);
        free(pk->map);
        free(pk->fn);
        return r;
}

/*
 * A merge of every type of src into dst, whose types must be src's (or
 * none yet): -EINVAL, with dst untouched, when they are not. On failure
 * dst may hold part of src (-ENOMEM halfway).
 */
static int merge_same_types(struct fp_pprof *dst, const struct fp_pprof *src, struct pick *pk)
{
        if (!dst || !src || dst == src)
                return -EINVAL;
        /* A src without types can only be empty: nothing to disagree about. */
        if (dst->n_types != 0 && !same_types(dst, src) &&
            !(src->n_types == 0 && src->n_samples == 0))
                return -EINVAL;
        return merge(dst, src, NULL, pk);
}

int fp_pprof_merge(struct fp_pprof *dst, const struct fp_pprof *src)
{
        struct pick all = {0};

        return merge_same_types(dst, src, &all);
}

int fp_pprof_merge_where(struct fp_pprof *dst, const struct fp_pprof *src, fp_pprof_keep_fn keep,
                         void *arg)
{
        struct pick pk = {.keep = keep, .arg = arg};

        return keep ? merge_same_types(dst, src, &pk) : -EINVAL;
}

int fp_pprof_merge_renamed(struct fp_pprof *dst, const struct fp_pprof *src,
                           fp_pprof_rename_fn rename, void *arg)
{
        struct pick all = {.rename = rename, .rename_arg = arg};

        return rename ? merge_same_types(dst, src, &all) : -EINVAL;
}

int fp_pprof_merge_typed(struct fp_pprof *dst, const struct fp_pprof *src, const char *only_type)
{
        struct pick all = {0};
        bool found = !only_type;

        if (!dst || !src || dst == src)
                return -EINVAL;
        for (size_t i = 0; !found && i < src->n_types; i++)
                found = strcmp(fp_pp_str(src, src->types[i].type), only_type) == 0;
        if (!found)
                return -EINVAL;
        return merge(dst, src, only_type ? only_type : "", &all);
}
