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
 * cols NULL: src's types are dst's, in order. Else cols[t] is the dst type
 * of src type t, or -1 to leave it out; values is scratch for dst's types.
 */
static int merge_samples(struct fp_pprof *dst, const struct fp_pprof *src, const uint32_t *smap,
                         const uint64_t *lmap, const int *cols, int64_t *values)
{
        int r;

        for (size_t i = 0; i < src->n_samples; i++) {
                const struct fp_pp_sample *s = &src->samples[i];
                const uint64_t *sl = &src->sample_locs[s->loc_off];
                const struct fp_pp_label *sb = &src->sample_labels[s->label_off];

                if (FP_PP_GROW(dst->scratch_locs, dst->cap_scratch_locs, s->n_locs) < 0)
                        return -ENOMEM;
                if (FP_PP_GROW(dst->scratch_labels, dst->cap_scratch_labels, s->n_labels) < 0)
                        return -ENOMEM;
                for (size_t j = 0; j < s->n_locs; j++)
                        dst->scratch_locs[j] = lmap[sl[j]];
                for (size_t j = 0; j < s->n_labels; j++)
                        dst->scratch_labels[j] = (struct fp_pp_label){
                            .key = smap[sb[j].key],
                            .str = sb[j].str == FP_PP_NOSTR ? FP_PP_NOSTR : smap[sb[j].str],
                            .unit = smap[sb[j].unit],
                            .num = sb[j].num,
                        };
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

static int merge_entities(struct fp_pprof *dst, const struct fp_pprof *src, const uint32_t *smap,
                          uint64_t *mmap, uint64_t *fmap, uint64_t *lmap)
{
        int r;

        for (size_t i = 0; i < src->n_mappings; i++) {
                struct fp_pp_mapping m = src->mappings[i];

                m.filename = smap[m.filename];
                m.build_id = smap[m.build_id];
                r = fp_pp_intern_mapping(dst, &m, &mmap[i + 1]);
                if (r < 0)
                        return r;
        }
        /* The first main binary named wins; a merge never renames it. */
        if (!dst->main_mapping && src->main_mapping)
                dst->main_mapping = mmap[src->main_mapping];
        for (size_t i = 0; i < src->n_functions; i++) {
                const struct fp_pp_function *f = &src->functions[i];

                r = fp_pp_intern_function(dst, smap[f->name], smap[f->system_name],
                                          smap[f->filename], f->start_line, &fmap[i + 1]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < src->n_locations; i++) {
                const struct fp_pp_location *l = &src->locations[i];

                if (FP_PP_GROW(dst->scratch_lines, dst->cap_scratch_lines, l->n_lines) < 0)
                        return -ENOMEM;
                for (size_t j = 0; j < l->n_lines; j++) {
                        dst->scratch_lines[j] = src->lines[l->line_off + j];
                        dst->scratch_lines[j].function_id = fmap[dst->scratch_lines[j].function_id];
                }
                r = fp_pp_intern_location(dst, mmap[l->mapping_id], l->address, dst->scratch_lines,
                                          l->n_lines, l->is_folded, &lmap[i + 1]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The body of both merges. only_type NULL: every type, identical in dst
 * (or dst empty). Else only that type of src, matched or added by name.
 */
static int merge(struct fp_pprof *dst, const struct fp_pprof *src, const char *only_type)
{
        uint32_t *smap = NULL;
        uint64_t *mmap = NULL, *fmap = NULL, *lmap = NULL;
        int *cols = NULL;
        int64_t *values = NULL;
        bool typed = only_type != NULL;
        int r = -ENOMEM;

        smap = fp_pp_calloc(src->n_strs, sizeof(*smap));
        mmap = fp_pp_calloc(src->n_mappings + 1, sizeof(*mmap));
        fmap = fp_pp_calloc(src->n_functions + 1, sizeof(*fmap));
        lmap = fp_pp_calloc(src->n_locations + 1, sizeof(*lmap));
        cols = fp_pp_calloc(src->n_types + 1, sizeof(*cols));
        if (!smap || !mmap || !fmap || !lmap || !cols)
                goto out;
        for (size_t i = 0; i < src->n_strs; i++) {
                r = fp_pp_intern(dst, src->strs[i].s, src->strs[i].len, &smap[i]);
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
                                r = fp_pp_add_type(dst, smap[src->types[i].type],
                                                   smap[src->types[i].unit]);
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
                        r = fp_pp_add_type(dst, smap[src->types[i].type], smap[src->types[i].unit]);
                        if (r < 0)
                                goto out;
                }
        }
        if (!typed || !*only_type) {
                if (dst->period_type.type == 0 && dst->period_type.unit == 0 && dst->period == 0) {
                        dst->period_type.type = smap[src->period_type.type];
                        dst->period_type.unit = smap[src->period_type.unit];
                        dst->period = src->period;
                }
                if (dst->default_type == 0)
                        dst->default_type = smap[src->default_type];
                for (size_t i = 0; i < src->n_comments; i++) {
                        r = fp_pp_add_comment(dst, smap[src->comments[i]]);
                        if (r < 0)
                                goto out;
                }
        }
        if (dst->drop_frames == 0)
                dst->drop_frames = smap[src->drop_frames];
        if (dst->keep_frames == 0)
                dst->keep_frames = smap[src->keep_frames];
        widen_time(dst, src);

        r = merge_entities(dst, src, smap, mmap, fmap, lmap);
        if (r < 0)
                goto out;
        r = merge_samples(dst, src, smap, lmap, typed ? cols : NULL, values);
out:
        free(smap);
        free(mmap);
        free(fmap);
        free(lmap);
        free(cols);
        free(values);
        return r;
}

/* On failure dst may hold part of src (-ENOMEM halfway); -EINVAL leaves it untouched. */
int fp_pprof_merge(struct fp_pprof *dst, const struct fp_pprof *src)
{
        if (!dst || !src || dst == src)
                return -EINVAL;
        /* A src without types can only be empty: nothing to disagree about. */
        if (dst->n_types != 0 && !same_types(dst, src) &&
            !(src->n_types == 0 && src->n_samples == 0))
                return -EINVAL;
        return merge(dst, src, NULL);
}

int fp_pprof_merge_typed(struct fp_pprof *dst, const struct fp_pprof *src, const char *only_type)
{
        bool found = !only_type;

        if (!dst || !src || dst == src)
                return -EINVAL;
        for (size_t i = 0; !found && i < src->n_types; i++)
                found = strcmp(fp_pp_str(src, src->types[i].type), only_type) == 0;
        if (!found)
                return -EINVAL;
        return merge(dst, src, only_type ? only_type : "");
}
