/* SPDX-License-Identifier: MIT */
/*
 * Upload decoding and validation; see ingest.h for the contract.
 *
 * Everything here treats its input as hostile: the body is inflated with
 * the bound fp_pprof_gunzip() keeps, then read from the wire format with
 * every length, index, id and count checked, and held to the shape the
 * agent sends (two sample types, numeric thread labels, stacks no deeper
 * than the store takes). The query parameters are checked for presence,
 * range and characters before anything is stored.
 */
#include "upload_contract.h"
#include "ingest.h"
#include "escape.h"
#include "util.h"
#include "pbwire.h"
#include "pprof.h"
#include "store.h"

#include <errno.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The body is read straight from the protobuf wire format into the batch,
 * without protobuf-c's unpacked message or the pprof model in between
 * (they cost two thirds of the collector's CPU per upload): one pass over
 * the message records where its strings, mappings, functions and
 * locations are; they are checked and resolved; a second pass adds the
 * samples. Every count is bounded by the input's length (each entry takes
 * at least two bytes on the wire), every index and id is checked, and the
 * problems are named as fp_pprof_decode() names them.
 */

/* A repeated integer field's values, packed (len) or one by one (varint). */
static int pb_each(unsigned wt, uint64_t v, struct pb *sub, uint64_t *out, size_t *n, size_t cap)
{
        if (wt == WT_VARINT) {
                if (*n >= cap)
                        return -E2BIG;
                out[(*n)++] = v;
                return 0;
        }
        if (wt != WT_LEN)
                return -EBADMSG;
        while (sub->p < sub->end) {
                uint64_t x;
                if (pb_varint(sub, &x) < 0)
                        return -EBADMSG;
                if (*n >= cap)
                        return -E2BIG;
                out[(*n)++] = x;
        }
        return 0;
}

struct w_mapping {
        uint64_t id, start, limit, offset, vaddr1;
        int64_t filename, build_id;
};
struct w_function {
        uint64_t id;
        int64_t name, system_name, filename;
};
struct w_location {
        uint64_t id, mapping_id, address, function_id; /* the first line's function */
        int64_t line;                                  /* and its line (0: none) */
        uint32_t mapping, function, frame;             /* resolved: index + 1; batch frame + 1 */
};
struct w_line { /* a location's line past its first: only checked */
        uint64_t function_id;
        size_t location;
};

/* One id -> index table for mappings, functions or locations (open addressing). */
struct w_ids {
        uint64_t *keys;
        uint32_t *vals;
        size_t cap;
};

static size_t w_slot(uint64_t id, size_t mask)
{
        return fp_mix64(id) & mask;
}

/* Builds the table of n ids; -EEXIST names a duplicate in *ret_dup. */
static int w_ids_build(struct w_ids *t, const uint64_t *ids, size_t stride, size_t n,
                       uint64_t *ret_dup)
{
        size_t cap = 16;

        while (cap < 2 * n)
                cap *= 2;
        t->keys = calloc(cap, sizeof(*t->keys));
        t->vals = calloc(cap, sizeof(*t->vals));
        t->cap = cap;
        if (!t->keys || !t->vals)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint64_t id = *(const uint64_t *)((const uint8_t *)ids + i * stride);
                size_t k = w_slot(id, cap - 1);
                while (t->keys[k] && t->keys[k] != id)
                        k = (k + 1) & (cap - 1);
                if (t->keys[k]) {
                        *ret_dup = id;
                        return -EEXIST;
                }
                t->keys[k] = id;
                t->vals[k] = (uint32_t)i + 1;
        }
        return 0;
}

/* The index + 1 of id, 0: none. */
static uint32_t w_ids_get(const struct w_ids *t, uint64_t id)
{
        if (!id || !t->cap)
                return 0;
        for (size_t k = w_slot(id, t->cap - 1);; k = (k + 1) & (t->cap - 1)) {
                if (t->keys[k] == id)
                        return t->vals[k];
                if (!t->keys[k])
                        return 0;
        }
}

static void w_ids_free(struct w_ids *t)
{
        free(t->keys);
        free(t->vals);
}

struct wire {
        const struct fp_upload_meta *meta;
        char *err;
        size_t errlen;
        /* the string table, each NUL-terminated in one block */
        const char **strs;
        size_t n_strs;
        char *chars;
        int64_t types[2][2]; /* sample types: (type, unit) string indices */
        size_t n_types;
        int64_t period_type[2];
        int64_t period;
        struct w_mapping *mappings;
        struct w_function *functions;
        struct w_location *locations;
        size_t n_mappings, n_functions, n_locations;
        struct w_ids mapping_ids, function_ids, location_ids;
        struct w_line *lines;
        size_t n_lines;
        struct pb *samples; /* where each sample's bytes are */
        size_t n_samples;
        bool empty_first; /* the string table starts with "" */
        /* A host tier's round: its series so far, by their labels' string indices. */
        struct w_series *series;
        size_t n_series, last_series;
};

/* A host tier's series in one upload: (service, exe, container, process) and its target. */
struct w_series {
        int64_t service, exe, container, process; /* string indices, 0: "" */
        uint32_t target;
};

#define W_MAX_SERIES 4096 /* series one host tier's round may hold */

__attribute__((format(printf, 3, 4))) static int werr(struct wire *w, int r, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, w->errlen, fmt, ap);
        va_end(ap);
        return r;
}

/* String index i, checked; what and n say whose it is in the message. */
static int wstr(struct wire *w, int64_t i, const char **ret, const char *what, size_t n)
{
        if (i < 0 || (uint64_t)i >= w->n_strs)
                return werr(w, -EBADMSG,
                            "%s %zu: string index %" PRId64 " outside the string table (%zu)", what,
                            n, i, w->n_strs);
        *ret = w->strs[i];
        return 0;
}

#define W_GROW(w, arr, n) fp_grow(&(w)->arr, &cap_##arr, (w)->n + 1, sizeof(*(w)->arr))

/* Pass 1: records the top-level fields; sub-messages are read for their scalars. */
static int wire_scan(struct wire *w, struct pb c)
{
        size_t cap_mappings = 0, cap_functions = 0, cap_locations = 0, cap_samples = 0;
        size_t cap_lines = 0;
        struct pb *strs = NULL;
        size_t n_strs = 0, cap_strs = 0, chars = 0;
        int r = 0;

        while (r == 0 && c.p < c.end) {
                uint32_t f, ff;
                unsigned wt, wt2;
                uint64_t v, v2;
                struct pb sub = {0}, x = {0};

                if (pb_field(&c, &f, &wt, &v, &sub) < 0) {
                        r = -EBADMSG;
                        break;
                }
                if (f == 6 && wt == WT_LEN) { /* string_table */
                        if ((r = fp_grow(&strs, &cap_strs, n_strs + 1, sizeof(*strs))) < 0)
                                break;
                        if (n_strs == 0)
                                w->empty_first = v == 0;
                        strs[n_strs++] = sub;
                        chars += v + 1;
                } else if ((f == 1 || f == 11) && wt == WT_LEN) { /* sample_type, period_type */
                        int64_t t[2] = {0, 0};
                        while (r == 0 && sub.p < sub.end) {
                                if (pb_field(&sub, &ff, &wt2, &v2, &x) < 0)
                                        r = -EBADMSG;
                                else if ((ff == 1 || ff == 2) && wt2 == WT_VARINT)
                                        t[ff - 1] = (int64_t)v2;
                        }
                        if (f == 11) {
                                memcpy(w->period_type, t, sizeof(t));
                        } else if (w->n_types < 2) {
                                memcpy(w->types[w->n_types], t, sizeof(t));
                                w->n_types++;
                        } else {
                                w->n_types++;
                        }
                } else if (f == 12 && wt == WT_VARINT) {
                        w->period = (int64_t)v;
                } else if (f == 2 && wt == WT_LEN) {
                        if ((r = W_GROW(w, samples, n_samples)) == 0)
                                w->samples[w->n_samples++] = sub;
                } else if (f == 3 && wt == WT_LEN) {
                        struct w_mapping m = {0};
                        while (r == 0 && sub.p < sub.end) {
                                if (pb_field(&sub, &ff, &wt2, &v2, &x) < 0)
                                        r = -EBADMSG;
                                else if (wt2 != WT_VARINT)
                                        continue;
                                else if (ff == 1)
                                        m.id = v2;
                                else if (ff == 2)
                                        m.start = v2;
                                else if (ff == 3)
                                        m.limit = v2;
                                else if (ff == 4)
                                        m.offset = v2;
                                else if (ff == 5)
                                        m.filename = (int64_t)v2;
                                else if (ff == 6)
                                        m.build_id = (int64_t)v2;
                                else if (ff == 100) /* fleetprof's: the ELF address, plus one */
                                        m.vaddr1 = v2;
                        }
                        if (r == 0 && (r = W_GROW(w, mappings, n_mappings)) == 0)
                                w->mappings[w->n_mappings++] = m;
                } else if (f == 5 && wt == WT_LEN) {
                        struct w_function fn = {0};
                        while (r == 0 && sub.p < sub.end) {
                                if (pb_field(&sub, &ff, &wt2, &v2, &x) < 0)
                                        r = -EBADMSG;
                                else if (wt2 != WT_VARINT)
                                        continue;
                                else if (ff == 1)
                                        fn.id = v2;
                                else if (ff == 2)
                                        fn.name = (int64_t)v2;
                                else if (ff == 3)
                                        fn.system_name = (int64_t)v2;
                                else if (ff == 4)
                                        fn.filename = (int64_t)v2;
                        }
                        if (r == 0 && (r = W_GROW(w, functions, n_functions)) == 0)
                                w->functions[w->n_functions++] = fn;
                } else if (f == 4 && wt == WT_LEN) {
                        struct w_location l = {0};
                        bool first_line = true;
                        while (r == 0 && sub.p < sub.end) {
                                if (pb_field(&sub, &ff, &wt2, &v2, &x) < 0) {
                                        r = -EBADMSG;
                                } else if (ff == 4 && wt2 == WT_LEN) {
                                        /* line: the first names the frame's function */
                                        uint64_t fid = 0, line_no = 0;
                                        uint32_t lf;
                                        unsigned lw;
                                        uint64_t lv;
                                        struct pb ls;
                                        while (r == 0 && x.p < x.end) {
                                                if (pb_field(&x, &lf, &lw, &lv, &ls) < 0)
                                                        r = -EBADMSG;
                                                else if (lf == 1 && lw == WT_VARINT)
                                                        fid = lv;
                                                else if (lf == 2 && lw == WT_VARINT)
                                                        line_no = lv;
                                        }
                                        if (!first_line && fid) {
                                                /* the others are checked, not kept */
                                                if ((r = W_GROW(w, lines, n_lines)) < 0)
                                                        break;
                                                w->lines[w->n_lines++] =
                                                    (struct w_line){fid, w->n_locations};
                                        }
                                        if (first_line) {
                                                l.function_id = fid;
                                                /* int64 on the wire; a negative one means none */
                                                l.line =
                                                    (int64_t)line_no > 0 ? (int64_t)line_no : 0;
                                        }
                                        first_line = false;
                                } else if (wt2 == WT_VARINT) {
                                        if (ff == 1)
                                                l.id = v2;
                                        else if (ff == 2)
                                                l.mapping_id = v2;
                                        else if (ff == 3)
                                                l.address = v2;
                                }
                        }
                        if (r == 0 && (r = W_GROW(w, locations, n_locations)) == 0)
                                w->locations[w->n_locations++] = l;
                }
                /* Other fields (comments, times, drop and keep frames) are not kept. */
        }
        if (r == 0 && n_strs) {
                w->chars = malloc(chars);
                w->strs = calloc(n_strs, sizeof(*w->strs));
                if (!w->chars || !w->strs)
                        r = -ENOMEM;
                for (size_t i = 0, off = 0; r == 0 && i < n_strs; i++) {
                        size_t n = (size_t)(strs[i].end - strs[i].p);
                        memcpy(w->chars + off, strs[i].p, n);
                        w->chars[off + n] = 0;
                        w->strs[i] = w->chars + off;
                        off += n + 1;
                }
                w->n_strs = n_strs;
        }
        free(strs);
        return r;
}

/* Pass 2: every reference checked, ids resolved to indices. */
static int wire_resolve(struct wire *w)
{
        const char *a = "", *b = "";
        uint64_t dup = 0;
        int r;

        if (!w->n_strs || !w->empty_first)
                return werr(w, -EBADMSG, "string table does not start with the empty string");
        if (w->n_types != 2)
                return werr(w, -EINVAL,
                            "the profile has %zu sample types; an upload has two (count and "
                            "value)",
                            w->n_types);
        for (size_t i = 0; i < 2; i++) {
                if ((r = wstr(w, w->types[i][0], &a, "sample type", i)) < 0 ||
                    (r = wstr(w, w->types[i][1], &b, "sample type", i)) < 0)
                        return r;
                if (!*a || !*b)
                        return werr(w, -EINVAL, "a sample type of the profile has no name or unit");
        }
        if ((r = wstr(w, w->period_type[0], &a, "period type", 0)) < 0 ||
            (r = wstr(w, w->period_type[1], &b, "period type", 0)) < 0)
                return r;
        if (w->period < 0)
                return werr(w, -EINVAL, "the profile's period is negative (%" PRId64 ")",
                            w->period);
        for (size_t i = 0; i < w->n_mappings; i++) {
                if (!w->mappings[i].id)
                        return werr(w, -EBADMSG, "mapping %zu has id 0", i);
                if ((r = wstr(w, w->mappings[i].filename, &a, "mapping", i)) < 0 ||
                    (r = wstr(w, w->mappings[i].build_id, &a, "mapping", i)) < 0)
                        return r;
        }
        for (size_t i = 0; i < w->n_functions; i++) {
                if (!w->functions[i].id)
                        return werr(w, -EBADMSG, "function %zu has id 0", i);
                if ((r = wstr(w, w->functions[i].name, &a, "function", i)) < 0 ||
                    (r = wstr(w, w->functions[i].system_name, &a, "function", i)) < 0 ||
                    (r = wstr(w, w->functions[i].filename, &a, "function", i)) < 0)
                        return r;
        }
        for (size_t i = 0; i < w->n_locations; i++)
                if (!w->locations[i].id)
                        return werr(w, -EBADMSG, "location %zu has id 0", i);
        const struct {
                struct w_ids *t;
                const void *v;
                size_t stride, n;
                const char *what;
        } tabs[] = {
            {&w->mapping_ids, w->mappings, sizeof(*w->mappings), w->n_mappings, "mapping"},
            {&w->function_ids, w->functions, sizeof(*w->functions), w->n_functions, "function"},
            {&w->location_ids, w->locations, sizeof(*w->locations), w->n_locations, "location"},
        };
        for (size_t k = 0; k < 3; k++) {
                r = w_ids_build(tabs[k].t, tabs[k].v, tabs[k].stride, tabs[k].n, &dup);
                if (r == -EEXIST)
                        return werr(w, -EBADMSG, "%s id %" PRIu64 " is not unique", tabs[k].what,
                                    dup);
                if (r < 0)
                        return werr(w, r, "out of memory");
        }
        for (size_t i = 0; i < w->n_locations; i++) {
                struct w_location *l = &w->locations[i];
                if (l->mapping_id && !(l->mapping = w_ids_get(&w->mapping_ids, l->mapping_id)))
                        return werr(w, -EBADMSG,
                                    "location %zu refers to mapping %" PRIu64
                                    ", which does not exist",
                                    i, l->mapping_id);
                if (l->function_id && !(l->function = w_ids_get(&w->function_ids, l->function_id)))
                        return werr(w, -EBADMSG,
                                    "location %zu refers to function %" PRIu64
                                    ", which does not exist",
                                    i, l->function_id);
        }
        for (size_t i = 0; i < w->n_lines; i++)
                if (!w_ids_get(&w->function_ids, w->lines[i].function_id))
                        return werr(w, -EBADMSG,
                                    "location %zu refers to function %" PRIu64
                                    ", which does not exist",
                                    w->lines[i].location, w->lines[i].function_id);
        return 0;
}

/* The batch frame of location index li, added on its first use. */
static int wire_frame(struct wire *w, struct fp_store_batch *b, size_t li, uint32_t *ret)
{
        struct w_location *l = &w->locations[li];
        const struct w_mapping *m = l->mapping ? &w->mappings[l->mapping - 1] : NULL;
        int r;

        if (l->frame) {
                *ret = l->frame - 1;
                return 0;
        }
        struct fp_store_frame f = {
            .function = l->function ? w->strs[w->functions[l->function - 1].name] : "",
            .mapping_file = m ? w->strs[m->filename] : "",
            .build_id = m ? w->strs[m->build_id] : "",
            .mapping_start = m ? m->start : 0,
            .mapping_limit = m ? m->limit : 0,
            .mapping_offset = m ? m->offset : 0,
            .mapping_vaddr1 = m ? m->vaddr1 : 0,
            .address = l->address,
        };
        if (l->function) {
                const struct w_function *fn = &w->functions[l->function - 1];
                f.system_name = w->strs[fn->system_name];
                f.filename = w->strs[fn->filename];
                f.line = l->line;
        }
        if ((r = fp_store_batch_add_frame(b, &f, ret)) < 0)
                return r;
        l->frame = *ret + 1;
        return 0;
}

/*
 * The target of a host tier's sample from its labels (string indices):
 * the series (service, exe, container) as the agent keys it, named by the
 * process label. 0 or -errno with the error in w.
 */
static int wire_series(struct wire *w, size_t i, struct fp_store_batch *b,
                       const struct w_series *key, uint32_t *ret)
{
        const char *service = w->strs[key->service], *exe = w->strs[key->exe];
        const char *container = w->strs[key->container], *comm = w->strs[key->process];
        int r;

        /* The agent writes a series' samples together: the last one first. */
        for (size_t n = 0; n < w->n_series; n++) {
                size_t k = (w->last_series + n) % w->n_series;
                const struct w_series *s = &w->series[k];
                if (s->service == key->service && s->exe == key->exe &&
                    s->container == key->container && s->process == key->process) {
                        w->last_series = k;
                        *ret = s->target;
                        return 0;
                }
        }
        if (!service[0] || fp_upload_check_service(service) < 0)
                return werr(w, -EINVAL,
                            "sample %zu of a host tier's round: label 'service' must be 1 to %d "
                            "letters, digits, '.', '-', '_', '@' or ':'",
                            i, FP_UPLOAD_MAX_SERVICE);
        if (container[0] && fp_upload_check_container(container) < 0)
                return werr(w, -EINVAL,
                            "sample %zu of a host tier's round: label 'container' must be 1 to "
                            "%d lowercase hex digits",
                            i, FP_UPLOAD_MAX_CONTAINER);
        if (w->n_series == W_MAX_SERIES)
                return werr(w, -EINVAL, "a host tier's round holds more than %d series",
                            W_MAX_SERIES);
        struct fp_store_target t = {.host = w->meta->host,
                                    .pid = 0,
                                    .starttime = fp_upload_host_series_key(service, exe, container),
                                    .comm = comm,
                                    .exe = exe,
                                    .service = service,
                                    .container = container};
        r = fp_store_batch_add_target(b, &t, ret);
        if (r < 0)
                return werr(w, r, "cannot add a series: %s", strerror(-r));
        if (w->n_series % 64 == 0) {
                struct w_series *v = realloc(w->series, (w->n_series + 64) * sizeof(*v));
                if (!v)
                        return werr(w, -ENOMEM, "out of memory");
                w->series = v;
        }
        w->series[w->n_series] = *key;
        w->series[w->n_series].target = *ret;
        w->last_series = w->n_series++;
        return 0;
}

/* Pass 3: sample i, checked, into the batch. */
static int wire_sample(struct wire *w, size_t i, struct fp_store_batch *b, uint32_t target,
                       uint32_t event, uint64_t *locs, uint32_t *frames, uint64_t *total)
{
        struct pb c = w->samples[i];
        uint64_t values[3];
        size_t n_locs = 0, n_values = 0;
        int64_t tid = 0;
        const char *thread_name = NULL, *wait = NULL;
        struct w_series series = {0};
        uint32_t stack;
        int r;

        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub = {0};

                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return werr(w, -EBADMSG, "not a profile.proto message");
                if (f == 1) {
                        r = pb_each(wt, v, &sub, locs, &n_locs, FP_STORE_MAX_FRAMES + 1);
                        if (r == -E2BIG)
                                return werr(w, -EINVAL,
                                            "sample %zu has more than %d frames; at most %d are "
                                            "kept",
                                            i, FP_STORE_MAX_FRAMES, FP_STORE_MAX_FRAMES);
                } else if (f == 2) {
                        r = pb_each(wt, v, &sub, values, &n_values, 3);
                        if (r == -E2BIG)
                                return werr(w, -EBADMSG,
                                            "sample %zu has more than 2 values for 2 sample types",
                                            i);
                } else if (f == 3 && wt == WT_LEN) {
                        int64_t key = 0, str = 0, num = 0, unit = 0;
                        const char *k = "", *sv = "", *u = "";
                        r = 0;
                        while (r == 0 && sub.p < sub.end) {
                                uint32_t lf;
                                unsigned lw;
                                uint64_t lv;
                                struct pb ls;
                                if (pb_field(&sub, &lf, &lw, &lv, &ls) < 0)
                                        r = -EBADMSG;
                                else if (lw != WT_VARINT)
                                        continue;
                                else if (lf == 1)
                                        key = (int64_t)lv;
                                else if (lf == 2)
                                        str = (int64_t)lv;
                                else if (lf == 3)
                                        num = (int64_t)lv;
                                else if (lf == 4)
                                        unit = (int64_t)lv;
                        }
                        if (r < 0)
                                return werr(w, -EBADMSG, "not a profile.proto message");
                        if ((r = wstr(w, key, &k, "label of sample", i)) < 0 ||
                            (r = wstr(w, str, &sv, "label of sample", i)) < 0 ||
                            (r = wstr(w, unit, &u, "label of sample", i)) < 0)
                                return r;
                        if (strcmp(k, "thread") == 0) {
                                if (str != 0 || num < 0 || num > INT_MAX)
                                        return werr(w, -EINVAL,
                                                    "sample %zu: label 'thread' must be a thread "
                                                    "id",
                                                    i);
                                tid = num;
                        } else if (strcmp(k, "thread_name") == 0) {
                                if (str == 0)
                                        return werr(w, -EINVAL,
                                                    "sample %zu: label 'thread_name' must be a "
                                                    "string",
                                                    i);
                                thread_name = sv;
                        } else if (strcmp(k, "wait") == 0) {
                                if (!fp_store_wait_valid(sv))
                                        return werr(w, -EINVAL,
                                                    "sample %zu: label 'wait' must be sleep, "
                                                    "uninterruptible or runqueue",
                                                    i);
                                wait = sv;
                        } else if (w->meta->host_tier && str != 0) {
                                /* A host tier's round: which series the sample is of. */
                                if (strcmp(k, "service") == 0)
                                        series.service = str;
                                else if (strcmp(k, "exe") == 0)
                                        series.exe = str;
                                else if (strcmp(k, "container") == 0)
                                        series.container = str;
                                else if (strcmp(k, "process") == 0)
                                        series.process = str;
                        }
                        /* Else pid, process and host come from the upload's parameters. */
                        continue;
                } else {
                        continue;
                }
                if (r < 0)
                        return werr(w, -EBADMSG, "not a profile.proto message");
        }
        if (n_locs > FP_STORE_MAX_FRAMES)
                return werr(w, -EINVAL, "sample %zu has %zu frames; at most %d are kept", i, n_locs,
                            FP_STORE_MAX_FRAMES);
        if (n_values != 2)
                return werr(w, -EBADMSG, "sample %zu has %zu values for %zu sample types", i,
                            n_values, (size_t)2);
        for (size_t j = 0; j < 2; j++)
                if ((int64_t)values[j] < 0)
                        return werr(w, -EBADMSG, "sample %zu has a negative value (%" PRId64 ")", i,
                                    (int64_t)values[j]);
        for (size_t j = 0; j < n_locs; j++) {
                uint32_t li = w_ids_get(&w->location_ids, locs[j]);
                if (!li)
                        return werr(w, -EBADMSG,
                                    "sample %zu refers to location %" PRIu64
                                    ", which does not exist",
                                    i, locs[j]);
                if ((r = wire_frame(w, b, li - 1, &frames[j])) < 0)
                        return werr(w, r, "cannot add a frame: %s", strerror(-r));
        }
        if (values[0] == 0 && values[1] == 0)
                return 0; /* nothing to keep */
        if (w->meta->host_tier && (r = wire_series(w, i, b, &series, &target)) < 0)
                return r;
        r = fp_store_batch_add_stack_of(b, frames, n_locs, &stack);
        if (r < 0)
                return werr(w, r, "cannot add a stack: %s", strerror(-r));
        r = fp_store_batch_add_waiting(b, target, event, (pid_t)tid, thread_name, wait, stack,
                                       values[0], values[1]);
        if (r < 0)
                return werr(w, r, "cannot add a sample: %s", strerror(-r));
        *total = *total > UINT64_MAX - values[0] ? UINT64_MAX : *total + values[0];
        return 0;
}

/* The batch of one decoded upload: its target, event, drops and samples. */
static int wire_build(struct wire *w, struct fp_store_batch *b, uint64_t *ret_samples)
{
        const struct fp_upload_meta *meta = w->meta;
        const char *pt = w->strs[w->period_type[0]], *pu = w->strs[w->period_type[1]];
        uint32_t target, event, *frames;
        uint64_t *locs, total = 0;
        int r;

        struct fp_store_target t = {.host = meta->host,
                                    .pid = meta->pid,
                                    .starttime = meta->starttime,
                                    .comm = meta->comm,
                                    .exe = meta->exe,
                                    .service = meta->service,
                                    .container = meta->container};
        struct fp_store_event e = {.name = meta->event,
                                   .count_type = w->strs[w->types[0][0]],
                                   .count_unit = w->strs[w->types[0][1]],
                                   .value_type = w->strs[w->types[1][0]],
                                   .value_unit = w->strs[w->types[1][1]],
                                   .period_type = *pt ? pt : NULL,
                                   .period_unit = *pt ? pu : NULL,
                                   .period = w->period};
        if ((r = fp_store_batch_add_target(b, &t, &target)) < 0 ||
            (r = fp_store_batch_add_event(b, &e, &event)) < 0 ||
            (r = fp_store_batch_set_series(b, target, event)) < 0)
                return werr(w, r, "cannot describe the upload: %s", strerror(-r));
        for (size_t i = 0; i < meta->n_drops; i++) {
                r = fp_store_batch_add_drop(b, target, meta->drops[i].reason, meta->drops[i].count);
                if (r < 0)
                        return werr(w, r, "cannot add drop counts: %s", strerror(-r));
        }
        locs = malloc((FP_STORE_MAX_FRAMES + 1) * sizeof(*locs));
        frames = malloc((FP_STORE_MAX_FRAMES + 1) * sizeof(*frames));
        r = locs && frames ? 0 : werr(w, -ENOMEM, "out of memory");
        for (size_t i = 0; r == 0 && i < w->n_samples; i++)
                r = wire_sample(w, i, b, target, event, locs, frames, &total);
        free(locs);
        free(frames);
        if (r == 0)
                *ret_samples = total;
        return r;
}

static void wire_free(struct wire *w)
{
        free(w->strs);
        free(w->chars);
        free(w->mappings);
        free(w->functions);
        free(w->locations);
        free(w->lines);
        free(w->samples);
        free(w->series);
        w_ids_free(&w->mapping_ids);
        w_ids_free(&w->function_ids);
        w_ids_free(&w->location_ids);
}

int fp_coll_ingest_build(const struct fp_upload_meta *meta, const uint8_t *body, size_t len,
                         size_t max_decompressed, struct fp_store_batch **ret,
                         uint64_t *ret_samples, char *err, size_t errlen)
{
        struct wire w = {.meta = meta, .err = err, .errlen = errlen};
        struct fp_store_batch *b = NULL;
        uint8_t *raw = NULL;
        size_t raw_len = 0;
        uint64_t samples = 0;
        int r;

        if (len < 2 || body[0] != 0x1f || body[1] != 0x8b)
                return fp_errf(err, errlen, -EBADMSG,
                               "the body is not gzip data (an upload is a gzip-compressed "
                               "profile.proto)");
        r = fp_pprof_gunzip(body, len, max_decompressed, &raw, &raw_len, err, errlen);
        if (r < 0)
                return r;
        r = wire_scan(&w, (struct pb){raw, raw + raw_len});
        if (r == -EBADMSG)
                r = werr(&w, r, "not a profile.proto message (%zu bytes)", raw_len);
        else if (r < 0)
                r = werr(&w, r, "out of memory decoding a profile of %zu bytes", raw_len);
        if (r == 0)
                r = wire_resolve(&w);
        if (r == 0) {
                b = fp_store_batch_new(meta->from_ns, meta->to_ns - meta->from_ns);
                r = b ? wire_build(&w, b, &samples) : werr(&w, -ENOMEM, "out of memory");
        }
        wire_free(&w);
        free(raw);
        if (r < 0) {
                fp_store_batch_free(b);
                return r;
        }
        fp_store_batch_set_uploaded(b, true);
        if (meta->cost.host_cpus) {
                struct fp_store_cost cost = {.agent_cpu_ns = meta->cost.agent_cpu_ns,
                                             .agent_rss_bytes = meta->cost.agent_rss_bytes,
                                             .host_cpus = meta->cost.host_cpus,
                                             .from_ns = meta->cost.from_ns,
                                             .to_ns = meta->cost.to_ns};
                fp_store_batch_set_cost(b, &cost);
        }
        *ret = b;
        *ret_samples = samples;
        return 0;
}
