/* SPDX-License-Identifier: MIT */
/*
 * pprof profiles, the model: an interned profile.proto in memory.
 *
 * Everything a profile holds is stored once and found again through a hash
 * index (struct fp_pp_itab), so adding a sample costs a hash of its
 * location ids and labels plus one probe, O(1) amortised, and a profile of
 * hundreds of thousands of samples builds in milliseconds. Arrays grow by
 * doubling; strings are allocated one by one and never move, so the
 * pointers the accessors hand out stay valid for the profile's lifetime.
 * The invariants are listed in pprof-internal.h. Merging lives in
 * pprof_merge.c, encoding and decoding in pprof_wire.c, the text printers
 * in pprof_text.c.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "pprof-internal.h"
#include "util.h"

long fp_pp_alloc_countdown = -1;

static bool alloc_fails(void)
{
        if (fp_pp_alloc_countdown < 0)
                return false;
        return fp_pp_alloc_countdown-- == 0;
}

void *fp_pp_malloc(size_t size)
{
        return alloc_fails() || !fp_budget_charge(size) ? NULL : malloc(size ? size : 1);
}

void *fp_pp_calloc(size_t n, size_t size)
{
        if (n && size > SIZE_MAX / n)
                return NULL;
        return alloc_fails() || !fp_budget_charge(n * size) ? NULL
                                                            : calloc(n ? n : 1, size ? size : 1);
}

/* What a realloc adds to the thread's budget (util.h): the bytes past ptr's block. */
void *fp_pp_realloc(void *ptr, size_t size)
{
        size_t had = ptr ? malloc_usable_size(ptr) : 0;

        if (alloc_fails() || (size > had && !fp_budget_charge(size - had)))
                return NULL;
        return realloc(ptr, size ? size : 1);
}

void *fp_pp_grow(void *ptr, size_t *cap, size_t need, size_t elem)
{
        size_t n = *cap ? *cap : 8;
        void *q;

        while (n < need) {
                if (n > SIZE_MAX / 2)
                        return NULL;
                n *= 2;
        }
        if (n > SIZE_MAX / elem)
                return NULL;
        q = fp_pp_realloc(ptr, n * elem);
        if (!q)
                return NULL;
        *cap = n;
        return q;
}

uint64_t fp_pp_hash_bytes(uint64_t h, const void *data, size_t len)
{
        const unsigned char *d = data;
        uint64_t w;

        for (; len >= 8; d += 8, len -= 8) {
                memcpy(&w, d, 8);
                h = fp_pp_hash_step(h, w);
        }
        w = 0;
        memcpy(&w, d, len);
        return fp_pp_hash_step(h, w ^ ((uint64_t)len << 56));
}

/* ---- hash index ---- */

static int itab_rehash(struct fp_pp_itab *t, size_t cap)
{
        struct fp_pp_slot *slots = fp_pp_calloc(cap, sizeof(*slots));

        if (!slots)
                return -ENOMEM;
        for (size_t i = 0; i < t->cap; i++) {
                size_t j;

                if (!t->slots[i].idx1)
                        continue;
                for (j = t->slots[i].hash & (cap - 1); slots[j].idx1; j = (j + 1) & (cap - 1))
                        ;
                slots[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
        return 0;
}

/* Makes room for one more entry, so that find + set cannot fail. */
int fp_pp_itab_reserve(struct fp_pp_itab *t)
{
        if (t->n >= FP_PP_MAX_ENTRIES)
                return -E2BIG;
        if ((t->n + 1) * 4 <= t->cap * 3)
                return 0;
        if (t->cap > SIZE_MAX / 2 / sizeof(struct fp_pp_slot))
                return -ENOMEM;
        return itab_rehash(t, t->cap ? t->cap * 2 : 64);
}

/*
 * Returns the slot holding an entry equal to ctx (*ret_found = true) or the
 * empty slot where it belongs. The table must have been reserved.
 */
size_t fp_pp_itab_find(const struct fp_pp_itab *t, uint32_t hash, fp_pp_eq_fn eq, const void *ctx,
                       bool *ret_found)
{
        size_t mask = t->cap - 1;

        for (size_t j = hash & mask;; j = (j + 1) & mask) {
                const struct fp_pp_slot *s = &t->slots[j];

                if (!s->idx1) {
                        *ret_found = false;
                        return j;
                }
                if (s->hash == hash && eq(ctx, s->idx1 - 1)) {
                        *ret_found = true;
                        return j;
                }
        }
}

void fp_pp_itab_set(struct fp_pp_itab *t, size_t slot, uint32_t hash, uint32_t idx)
{
        t->slots[slot].hash = hash;
        t->slots[slot].idx1 = idx + 1;
        t->n++;
}

void fp_pp_itab_done(struct fp_pp_itab *t)
{
        free(t->slots);
        *t = (struct fp_pp_itab){0};
}

/* ---- strings ---- */

struct str_key {
        const struct fp_pprof *p;
        const char *s;
        size_t len;
};

static bool str_eq(const void *ctx, uint32_t idx)
{
        const struct str_key *k = ctx;
        const struct fp_pp_str *e = &k->p->strs[idx];

        return e->len == k->len && memcmp(e->s, k->s, k->len) == 0;
}

int fp_pprof_set_main_binary(struct fp_pprof *p, const char *filename)
{
        if (!p || !filename)
                return -EINVAL;
        for (size_t i = 0; i < p->n_mappings; i++)
                if (strcmp(fp_pp_str(p, p->mappings[i].filename), filename) == 0) {
                        p->main_mapping = i + 1;
                        return 0;
                }
        return -ENOENT;
}

const char *fp_pp_str(const struct fp_pprof *p, uint32_t i)
{
        if (i >= p->n_strs)
                return "";
        return p->strs[i].s;
}

int fp_pp_intern(struct fp_pprof *p, const char *s, size_t len, uint32_t *ret)
{
        struct str_key k = {p, s, len};
        uint32_t h = fp_pp_hash_final(fp_pp_hash_bytes(p->seed, s, len));
        struct fp_pp_str *e;
        size_t slot;
        bool found;
        int r;

        r = fp_pp_itab_reserve(&p->str_tab);
        if (r < 0)
                return r;
        slot = fp_pp_itab_find(&p->str_tab, h, str_eq, &k, &found);
        if (found) {
                *ret = p->str_tab.slots[slot].idx1 - 1;
                return 0;
        }
        if (FP_PP_GROW(p->strs, p->cap_strs, p->n_strs + 1) < 0)
                return -ENOMEM;
        e = &p->strs[p->n_strs];
        e->s = fp_pp_malloc(len + 1);
        if (!e->s)
                return -ENOMEM;
        memcpy(e->s, s, len);
        e->s[len] = 0;
        e->len = len;
        e->hash = h;
        fp_pp_itab_set(&p->str_tab, slot, h, (uint32_t)p->n_strs);
        *ret = (uint32_t)p->n_strs++;
        return 0;
}

uint32_t fp_pp_find_str(const struct fp_pprof *p, const char *s)
{
        struct str_key k = {p, s, strlen(s)};
        uint32_t h = fp_pp_hash_final(fp_pp_hash_bytes(p->seed, s, k.len));
        size_t slot;
        bool found;

        /* Never empty: "" is always there, and the table is never full. */
        slot = fp_pp_itab_find(&p->str_tab, h, str_eq, &k, &found);
        return found ? p->str_tab.slots[slot].idx1 - 1 : FP_PP_NOSTR;
}

static int intern_cstr(struct fp_pprof *p, const char *s, uint32_t *ret)
{
        if (!s) {
                *ret = 0;
                return 0;
        }
        return fp_pp_intern(p, s, strlen(s), ret);
}

/* ---- life cycle ---- */

struct fp_pprof *fp_pprof_new(void)
{
        struct fp_pprof *p = fp_pp_calloc(1, sizeof(*p));
        uint32_t empty;

        if (!p)
                return NULL;
        if (getrandom(&p->seed, sizeof(p->seed), GRND_NONBLOCK) != sizeof(p->seed)) {
                struct timespec ts;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                p->seed = fp_pp_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                                    (uint64_t)(uintptr_t)p);
        }
        if (fp_pp_intern(p, "", 0, &empty) < 0) {
                fp_pprof_free(p);
                return NULL;
        }
        return p;
}

void fp_pprof_free(struct fp_pprof *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n_strs; i++)
                free(p->strs[i].s);
        free(p->strs);
        fp_pp_itab_done(&p->str_tab);
        free(p->types);
        free(p->totals);
        free(p->comments);
        free(p->mappings);
        fp_pp_itab_done(&p->mapping_tab);
        free(p->functions);
        fp_pp_itab_done(&p->function_tab);
        free(p->locations);
        free(p->lines);
        fp_pp_itab_done(&p->location_tab);
        free(p->samples);
        free(p->sample_locs);
        free(p->sample_labels);
        free(p->values);
        fp_pp_itab_done(&p->sample_tab);
        free(p->scratch_labels);
        free(p->scratch_locs);
        free(p->scratch_lines);
        free(p);
}

/* ---- sample types, period, time, comments ---- */

/*
 * Appends a sample type. Samples already present get a 0 for it, which
 * means re-laying out the value array: O(samples), but profiles get their
 * types before their samples.
 */
int fp_pp_add_type(struct fp_pprof *p, uint32_t type, uint32_t unit)
{
        size_t n = p->n_types, ns = p->n_samples;
        int64_t *totals;

        if (n >= INT32_MAX)
                return -E2BIG;
        if (n + 1 > p->cap_types) {
                size_t cap = p->cap_types;
                struct fp_pp_vtype *t = fp_pp_grow(p->types, &cap, n + 1, sizeof(*t));

                if (!t)
                        return -ENOMEM;
                p->types = t;
                totals = fp_pp_realloc(p->totals, cap * sizeof(*totals));
                if (!totals)
                        return -ENOMEM;
                p->totals = totals;
                p->cap_types = cap;
        }
        if (ns > 0) {
                int64_t *v;

                if (ns > SIZE_MAX / (n + 1) / sizeof(*v))
                        return -ENOMEM;
                v = fp_pp_calloc(ns * (n + 1), sizeof(*v));
                if (!v)
                        return -ENOMEM;
                for (size_t i = 0; n && i < ns; i++)
                        memcpy(&v[i * (n + 1)], &p->values[i * n], n * sizeof(*v));
                free(p->values);
                p->values = v;
                p->cap_values = ns * (n + 1);
        }
        p->types[n] = (struct fp_pp_vtype){type, unit};
        p->totals[n] = 0;
        p->n_types++;
        return (int)n;
}

int fp_pprof_add_sample_type(struct fp_pprof *p, const char *type, const char *unit)
{
        uint32_t t, u;
        int r;

        if (!p || !type)
                return -EINVAL;
        r = intern_cstr(p, type, &t);
        if (r < 0)
                return r;
        r = intern_cstr(p, unit, &u);
        if (r < 0)
                return r;
        return fp_pp_add_type(p, t, u);
}

int fp_pprof_find_sample_type(const struct fp_pprof *p, const char *type, const char *unit)
{
        if (!p || !type)
                return -EINVAL;
        for (size_t i = 0; i < p->n_types; i++)
                if (strcmp(fp_pp_str(p, p->types[i].type), type) == 0 &&
                    strcmp(fp_pp_str(p, p->types[i].unit), unit ? unit : "") == 0)
                        return (int)i;
        return -ENOENT;
}

size_t fp_pprof_n_sample_types(const struct fp_pprof *p)
{
        return p ? p->n_types : 0;
}

const char *fp_pprof_sample_type(const struct fp_pprof *p, size_t i, const char **ret_unit)
{
        if (!p || i >= p->n_types)
                return NULL;
        if (ret_unit)
                *ret_unit = fp_pp_str(p, p->types[i].unit);
        return fp_pp_str(p, p->types[i].type);
}

int fp_pprof_set_period(struct fp_pprof *p, const char *type, const char *unit, int64_t period)
{
        uint32_t t, u;
        int r;

        if (!p)
                return -EINVAL;
        r = intern_cstr(p, type, &t);
        if (r < 0)
                return r;
        r = intern_cstr(p, unit, &u);
        if (r < 0)
                return r;
        p->period_type = (struct fp_pp_vtype){t, u};
        p->period = period;
        return 0;
}

int64_t fp_pprof_period(const struct fp_pprof *p, const char **ret_type, const char **ret_unit)
{
        if (ret_type)
                *ret_type = p ? fp_pp_str(p, p->period_type.type) : "";
        if (ret_unit)
                *ret_unit = p ? fp_pp_str(p, p->period_type.unit) : "";
        return p ? p->period : 0;
}

void fp_pprof_set_time(struct fp_pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
        if (!p)
                return;
        p->time_nanos = time_nanos;
        p->duration_nanos = duration_nanos;
}

void fp_pprof_get_time(const struct fp_pprof *p, int64_t *ret_time_nanos,
                       int64_t *ret_duration_nanos)
{
        if (ret_time_nanos)
                *ret_time_nanos = p ? p->time_nanos : 0;
        if (ret_duration_nanos)
                *ret_duration_nanos = p ? p->duration_nanos : 0;
}

int fp_pprof_set_default_sample_type(struct fp_pprof *p, const char *type)
{
        if (!p)
                return -EINVAL;
        return intern_cstr(p, type, &p->default_type);
}

const char *fp_pprof_default_sample_type(const struct fp_pprof *p)
{
        return p ? fp_pp_str(p, p->default_type) : "";
}

int fp_pp_add_comment(struct fp_pprof *p, uint32_t text)
{
        if (FP_PP_GROW(p->comments, p->cap_comments, p->n_comments + 1) < 0)
                return -ENOMEM;
        p->comments[p->n_comments++] = text;
        return 0;
}

int fp_pprof_add_comment(struct fp_pprof *p, const char *text)
{
        uint32_t t;
        int r;

        if (!p || !text)
                return -EINVAL;
        r = intern_cstr(p, text, &t);
        if (r < 0)
                return r;
        return fp_pp_add_comment(p, t);
}

size_t fp_pprof_n_comments(const struct fp_pprof *p)
{
        return p ? p->n_comments : 0;
}

const char *fp_pprof_comment(const struct fp_pprof *p, size_t i)
{
        if (!p || i >= p->n_comments)
                return NULL;
        return fp_pp_str(p, p->comments[i]);
}

/* ---- mappings, functions, locations ---- */

static uint32_t mapping_hash(const struct fp_pprof *p, const struct fp_pp_mapping *m)
{
        uint64_t h = p->seed;

        h = fp_pp_hash_step(h, m->start);
        h = fp_pp_hash_step(h, m->limit);
        h = fp_pp_hash_step(h, m->offset);
        h = fp_pp_hash_step(h, (uint64_t)m->filename << 32 | m->build_id);
        return fp_pp_hash_final(h);
}

struct mapping_key {
        const struct fp_pprof *p;
        const struct fp_pp_mapping *m;
};

static bool mapping_eq(const void *ctx, uint32_t idx)
{
        const struct mapping_key *k = ctx;
        const struct fp_pp_mapping *a = &k->p->mappings[idx], *b = k->m;

        return a->start == b->start && a->limit == b->limit && a->offset == b->offset &&
               a->filename == b->filename && a->build_id == b->build_id;
}

/* Mappings equal but for their has_* flags are one mapping with the flags or'ed. */
int fp_pp_intern_mapping(struct fp_pprof *p, const struct fp_pp_mapping *m, uint64_t *ret_id)
{
        struct mapping_key k = {p, m};
        uint32_t h = mapping_hash(p, m);
        size_t slot;
        bool found;
        int r;

        r = fp_pp_itab_reserve(&p->mapping_tab);
        if (r < 0)
                return r;
        slot = fp_pp_itab_find(&p->mapping_tab, h, mapping_eq, &k, &found);
        if (found) {
                uint32_t idx = p->mapping_tab.slots[slot].idx1 - 1;

                p->mappings[idx].flags |= m->flags;
                if (!p->mappings[idx].vaddr1)
                        p->mappings[idx].vaddr1 = m->vaddr1; /* an older agent's copy first */
                *ret_id = (uint64_t)idx + 1;
                return 0;
        }
        if (FP_PP_GROW(p->mappings, p->cap_mappings, p->n_mappings + 1) < 0)
                return -ENOMEM;
        p->mappings[p->n_mappings] = *m;
        p->mappings[p->n_mappings].hash = h;
        fp_pp_itab_set(&p->mapping_tab, slot, h, (uint32_t)p->n_mappings);
        *ret_id = ++p->n_mappings;
        return 0;
}

int fp_pprof_mapping(struct fp_pprof *p, uint64_t memory_start, uint64_t memory_limit,
                     uint64_t file_offset, const char *filename, const char *build_id,
                     uint64_t *ret_id)
{
        struct fp_pp_mapping m = {
            .start = memory_start,
            .limit = memory_limit,
            .offset = file_offset,
        };
        uint64_t id;
        int r;

        if (!p || !ret_id)
                return -EINVAL;
        r = intern_cstr(p, filename, &m.filename);
        if (r < 0)
                return r;
        r = intern_cstr(p, build_id, &m.build_id);
        if (r < 0)
                return r;
        r = fp_pp_intern_mapping(p, &m, &id);
        if (r < 0)
                return r;
        *ret_id = id;
        return 0;
}

int fp_pprof_mapping_set_vaddr(struct fp_pprof *p, uint64_t id, uint64_t vaddr)
{
        if (!p || id == 0 || id > p->n_mappings || vaddr == UINT64_MAX)
                return -EINVAL;
        p->mappings[id - 1].vaddr1 = vaddr + 1;
        return 0;
}

struct function_key {
        const struct fp_pprof *p;
        const struct fp_pp_function *f;
};

static bool function_eq(const void *ctx, uint32_t idx)
{
        const struct function_key *k = ctx;
        const struct fp_pp_function *a = &k->p->functions[idx], *b = k->f;

        return a->name == b->name && a->system_name == b->system_name &&
               a->filename == b->filename && a->start_line == b->start_line;
}

int fp_pp_intern_function(struct fp_pprof *p, uint32_t name, uint32_t system_name,
                          uint32_t filename, int64_t start_line, uint64_t *ret_id)
{
        struct fp_pp_function f = {name, system_name, filename, 0, start_line};
        struct function_key k = {p, &f};
        uint64_t h = p->seed;
        size_t slot;
        bool found;
        int r;

        h = fp_pp_hash_step(h, (uint64_t)name << 32 | system_name);
        h = fp_pp_hash_step(h, filename);
        h = fp_pp_hash_step(h, (uint64_t)start_line);
        f.hash = fp_pp_hash_final(h);

        r = fp_pp_itab_reserve(&p->function_tab);
        if (r < 0)
                return r;
        slot = fp_pp_itab_find(&p->function_tab, f.hash, function_eq, &k, &found);
        if (found) {
                *ret_id = (uint64_t)p->function_tab.slots[slot].idx1;
                return 0;
        }
        if (FP_PP_GROW(p->functions, p->cap_functions, p->n_functions + 1) < 0)
                return -ENOMEM;
        p->functions[p->n_functions] = f;
        fp_pp_itab_set(&p->function_tab, slot, f.hash, (uint32_t)p->n_functions);
        *ret_id = ++p->n_functions;
        return 0;
}

int fp_pprof_function(struct fp_pprof *p, const char *name, const char *filename, uint64_t *ret_id)
{
        return fp_pprof_function_full(p, name, NULL, filename, 0, ret_id);
}

int fp_pprof_function_full(struct fp_pprof *p, const char *name, const char *system_name,
                           const char *filename, int64_t start_line, uint64_t *ret_id)
{
        uint32_t n, sn, f;
        uint64_t id;
        int r;

        if (!p || !ret_id)
                return -EINVAL;
        if ((r = intern_cstr(p, name, &n)) < 0)
                return r;
        sn = n;
        if (system_name && *system_name && (r = intern_cstr(p, system_name, &sn)) < 0)
                return r;
        if ((r = intern_cstr(p, filename, &f)) < 0)
                return r;
        r = fp_pp_intern_function(p, n, sn, f, start_line, &id);
        if (r < 0)
                return r;
        *ret_id = id;
        return 0;
}

struct location_key {
        const struct fp_pprof *p;
        uint64_t mapping_id;
        uint64_t address;
        const struct fp_pp_line *lines;
        size_t n_lines;
        bool is_folded;
};

static bool location_eq(const void *ctx, uint32_t idx)
{
        const struct location_key *k = ctx;
        const struct fp_pp_location *a = &k->p->locations[idx];
        const struct fp_pp_line *al = &k->p->lines[a->line_off];

        if (a->mapping_id != k->mapping_id || a->address != k->address ||
            a->n_lines != k->n_lines || a->is_folded != k->is_folded)
                return false;
        for (size_t i = 0; i < k->n_lines; i++)
                if (al[i].function_id != k->lines[i].function_id || al[i].line != k->lines[i].line)
                        return false;
        return true;
}

int fp_pp_intern_location(struct fp_pprof *p, uint64_t mapping_id, uint64_t address,
                          const struct fp_pp_line *lines, size_t n_lines, bool is_folded,
                          uint64_t *ret_id)
{
        struct location_key k = {p, mapping_id, address, lines, n_lines, is_folded};
        uint64_t h = p->seed;
        struct fp_pp_location *l;
        size_t slot;
        bool found;
        uint32_t hash;
        int r;

        if (n_lines > FP_PP_MAX_ENTRIES)
                return -E2BIG;
        h = fp_pp_hash_step(h, mapping_id);
        h = fp_pp_hash_step(h, address);
        h = fp_pp_hash_step(h, (uint64_t)n_lines << 1 | is_folded);
        for (size_t i = 0; i < n_lines; i++) {
                h = fp_pp_hash_step(h, lines[i].function_id);
                h = fp_pp_hash_step(h, (uint64_t)lines[i].line);
        }
        hash = fp_pp_hash_final(h);

        r = fp_pp_itab_reserve(&p->location_tab);
        if (r < 0)
                return r;
        slot = fp_pp_itab_find(&p->location_tab, hash, location_eq, &k, &found);
        if (found) {
                *ret_id = (uint64_t)p->location_tab.slots[slot].idx1;
                return 0;
        }
        if (FP_PP_GROW(p->locations, p->cap_locations, p->n_locations + 1) < 0)
                return -ENOMEM;
        if (n_lines > SIZE_MAX - p->n_lines)
                return -ENOMEM;
        if (FP_PP_GROW(p->lines, p->cap_lines, p->n_lines + n_lines) < 0)
                return -ENOMEM;
        if (n_lines)
                memcpy(&p->lines[p->n_lines], lines, n_lines * sizeof(*lines));
        l = &p->locations[p->n_locations];
        *l = (struct fp_pp_location){
            .mapping_id = mapping_id,
            .address = address,
            .line_off = p->n_lines,
            .n_lines = (uint32_t)n_lines,
            .hash = hash,
            .is_folded = is_folded,
        };
        p->n_lines += n_lines;
        fp_pp_itab_set(&p->location_tab, slot, hash, (uint32_t)p->n_locations);
        *ret_id = ++p->n_locations;
        return 0;
}

int fp_pprof_location(struct fp_pprof *p, uint64_t mapping_id, uint64_t address,
                      uint64_t function_id, uint64_t *ret_id)
{
        return fp_pprof_location_at(p, mapping_id, address, function_id, 0, ret_id);
}

int fp_pprof_location_at(struct fp_pprof *p, uint64_t mapping_id, uint64_t address,
                         uint64_t function_id, int64_t line_no, uint64_t *ret_id)
{
        struct fp_pp_line line = {function_id, function_id ? line_no : 0};
        uint64_t id;
        int r;

        if (!p || !ret_id || mapping_id > p->n_mappings || function_id > p->n_functions)
                return -EINVAL;
        r = fp_pp_intern_location(p, mapping_id, address, &line, function_id ? 1 : 0, false, &id);
        if (r < 0)
                return r;
        *ret_id = id;
        return 0;
}

/* ---- samples ---- */

static int label_cmp(const struct fp_pp_label *a, const struct fp_pp_label *b)
{
        if (a->key != b->key)
                return a->key < b->key ? -1 : 1;
        if (a->str != b->str)
                return a->str < b->str ? -1 : 1;
        if (a->num != b->num)
                return a->num < b->num ? -1 : 1;
        if (a->unit != b->unit)
                return a->unit < b->unit ? -1 : 1;
        return 0;
}

/* Insertion sort: samples carry a handful of labels. */
static void labels_sort(struct fp_pp_label *l, size_t n)
{
        for (size_t i = 1; i < n; i++) {
                struct fp_pp_label x = l[i];
                size_t j = i;

                for (; j > 0 && label_cmp(&l[j - 1], &x) > 0; j--)
                        l[j] = l[j - 1];
                l[j] = x;
        }
}

struct sample_key {
        const struct fp_pprof *p;
        const uint64_t *locs;
        size_t n_locs;
        const struct fp_pp_label *labels;
        size_t n_labels;
};

static bool sample_eq(const void *ctx, uint32_t idx)
{
        const struct sample_key *k = ctx;
        const struct fp_pp_sample *s = &k->p->samples[idx];

        if (s->n_locs != k->n_locs || s->n_labels != k->n_labels)
                return false;
        if (k->n_locs &&
            memcmp(&k->p->sample_locs[s->loc_off], k->locs, k->n_locs * sizeof(*k->locs)) != 0)
                return false;
        for (size_t i = 0; i < k->n_labels; i++)
                if (label_cmp(&k->p->sample_labels[s->label_off + i], &k->labels[i]) != 0)
                        return false;
        return true;
}

int fp_pp_add_sample(struct fp_pprof *p, const uint64_t *locs, size_t n_locs, const int64_t *values,
                     struct fp_pp_label *labels, size_t n_labels)
{
        struct sample_key k = {p, locs, n_locs, labels, n_labels};
        uint64_t h = p->seed;
        struct fp_pp_sample *s;
        size_t slot, nt = p->n_types, idx;
        uint32_t hash;
        bool found;
        int r;

        if (n_locs > FP_PP_MAX_ENTRIES || n_labels > FP_PP_MAX_ENTRIES)
                return -E2BIG;
        labels_sort(labels, n_labels);
        h = fp_pp_hash_step(h, (uint64_t)n_locs << 32 | n_labels);
        for (size_t i = 0; i < n_locs; i++)
                h = fp_pp_hash_step(h, locs[i]);
        for (size_t i = 0; i < n_labels; i++) {
                h = fp_pp_hash_step(h, (uint64_t)labels[i].key << 32 | labels[i].str);
                h = fp_pp_hash_step(h, (uint64_t)labels[i].num ^ (uint64_t)labels[i].unit << 48);
        }
        hash = fp_pp_hash_final(h);

        r = fp_pp_itab_reserve(&p->sample_tab);
        if (r < 0)
                return r;
        slot = fp_pp_itab_find(&p->sample_tab, hash, sample_eq, &k, &found);
        if (found) {
                idx = p->sample_tab.slots[slot].idx1 - 1;
        } else {
                /* Grow everything first, so a failure leaves the profile as it was. */
                if (n_locs > SIZE_MAX - p->n_sample_locs ||
                    n_labels > SIZE_MAX - p->n_sample_labels ||
                    (nt && p->n_samples + 1 > SIZE_MAX / nt))
                        return -ENOMEM;
                if (FP_PP_GROW(p->samples, p->cap_samples, p->n_samples + 1) < 0 ||
                    FP_PP_GROW(p->sample_locs, p->cap_sample_locs, p->n_sample_locs + n_locs) < 0 ||
                    FP_PP_GROW(p->sample_labels, p->cap_sample_labels,
                               p->n_sample_labels + n_labels) < 0 ||
                    FP_PP_GROW(p->values, p->cap_values, (p->n_samples + 1) * nt) < 0)
                        return -ENOMEM;
                idx = p->n_samples;
                s = &p->samples[idx];
                *s = (struct fp_pp_sample){
                    .loc_off = p->n_sample_locs,
                    .label_off = p->n_sample_labels,
                    .n_locs = (uint32_t)n_locs,
                    .n_labels = (uint32_t)n_labels,
                    .hash = hash,
                };
                if (n_locs)
                        memcpy(&p->sample_locs[s->loc_off], locs, n_locs * sizeof(*locs));
                if (n_labels)
                        memcpy(&p->sample_labels[s->label_off], labels, n_labels * sizeof(*labels));
                if (nt)
                        memset(&p->values[idx * nt], 0, nt * sizeof(*p->values));
                p->n_sample_locs += n_locs;
                p->n_sample_labels += n_labels;
                p->n_samples++;
                fp_pp_itab_set(&p->sample_tab, slot, hash, (uint32_t)idx);
        }
        for (size_t t = 0; t < nt; t++) {
                p->values[idx * nt + t] = fp_pp_add_sat(p->values[idx * nt + t], values[t]);
                p->totals[t] = fp_pp_add_sat(p->totals[t], values[t]);
        }
        return 0;
}

static int scratch_labels(struct fp_pprof *p, size_t n)
{
        return FP_PP_GROW(p->scratch_labels, p->cap_scratch_labels, n);
}

int fp_pprof_add_sample(struct fp_pprof *p, const uint64_t *location_ids, size_t n_locations,
                        const int64_t *values, const struct fp_pprof_label *labels, size_t n_labels)
{
        int r;

        if (!p || (n_locations && !location_ids) || (n_labels && !labels) ||
            (p->n_types && !values))
                return -EINVAL;
        for (size_t i = 0; i < n_locations; i++)
                if (location_ids[i] == 0 || location_ids[i] > p->n_locations)
                        return -EINVAL;
        for (size_t t = 0; t < p->n_types; t++)
                if (values[t] < 0)
                        return -EINVAL;
        for (size_t i = 0; i < n_labels; i++)
                if (!labels[i].key)
                        return -EINVAL;

        r = scratch_labels(p, n_labels);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_labels; i++) {
                struct fp_pp_label *l = &p->scratch_labels[i];

                r = intern_cstr(p, labels[i].key, &l->key);
                if (r < 0)
                        return r;
                l->str = FP_PP_NOSTR;
                l->num = 0;
                l->unit = 0;
                if (labels[i].str) {
                        r = intern_cstr(p, labels[i].str, &l->str);
                } else {
                        l->num = labels[i].num;
                        r = intern_cstr(p, labels[i].num_unit, &l->unit);
                }
                if (r < 0)
                        return r;
        }
        return fp_pp_add_sample(p, location_ids, n_locations, values, p->scratch_labels, n_labels);
}

size_t fp_pprof_n_samples(const struct fp_pprof *p)
{
        return p ? p->n_samples : 0;
}

size_t fp_pprof_n_locations(const struct fp_pprof *p)
{
        return p ? p->n_locations : 0;
}

int fp_pprof_sample_get(const struct fp_pprof *p, size_t i, struct fp_pprof_sample_view *ret)
{
        const struct fp_pp_sample *s;

        if (!p || !ret)
                return -EINVAL;
        if (i >= p->n_samples)
                return -ENOENT;
        s = &p->samples[i];
        *ret = (struct fp_pprof_sample_view){
            .location_ids = &p->sample_locs[s->loc_off],
            .n_locations = s->n_locs,
            .values = &p->values[i * p->n_types],
            .n_labels = s->n_labels,
        };
        return 0;
}

int fp_pprof_sample_label(const struct fp_pprof *p, size_t i, size_t j, struct fp_pprof_label *ret)
{
        const struct fp_pp_label *l;

        if (!p || !ret)
                return -EINVAL;
        if (i >= p->n_samples || j >= p->samples[i].n_labels)
                return -ENOENT;
        l = &p->sample_labels[p->samples[i].label_off + j];
        *ret = (struct fp_pprof_label){
            .key = fp_pp_str(p, l->key),
            .str = l->str == FP_PP_NOSTR ? NULL : fp_pp_str(p, l->str),
            .num = l->num,
            .num_unit = l->unit ? fp_pp_str(p, l->unit) : NULL,
        };
        return 0;
}

int fp_pprof_location_get(const struct fp_pprof *p, uint64_t location_id,
                          struct fp_pprof_location_view *ret)
{
        const struct fp_pp_location *l;
        const struct fp_pp_mapping *m = NULL;
        const char *fn = "";

        if (!p || !ret)
                return -EINVAL;
        if (location_id == 0 || location_id > p->n_locations)
                return -ENOENT;
        l = &p->locations[location_id - 1];
        if (l->mapping_id)
                m = &p->mappings[l->mapping_id - 1];
        if (l->n_lines) {
                uint64_t fid = p->lines[l->line_off].function_id;

                if (fid)
                        fn = fp_pp_str(p, p->functions[fid - 1].name);
        }
        *ret = (struct fp_pprof_location_view){
            .mapping_id = l->mapping_id,
            .address = l->address,
            .function_name = fn,
            .mapping_file = m ? fp_pp_str(p, m->filename) : "",
            .build_id = m ? fp_pp_str(p, m->build_id) : "",
            .mapping_start = m ? m->start : 0,
            .mapping_limit = m ? m->limit : 0,
            .mapping_offset = m ? m->offset : 0,
            .mapping_has_vaddr = m && m->vaddr1,
            .mapping_vaddr = m && m->vaddr1 ? m->vaddr1 - 1 : 0,
            .n_lines = l->n_lines,
        };
        return 0;
}

int fp_pprof_location_line(const struct fp_pprof *p, uint64_t location_id, size_t j,
                           struct fp_pprof_line_view *ret)
{
        const struct fp_pp_location *l;
        const struct fp_pp_line *line;
        const struct fp_pp_function *f = NULL;

        if (!p || !ret)
                return -EINVAL;
        if (location_id == 0 || location_id > p->n_locations)
                return -ENOENT;
        l = &p->locations[location_id - 1];
        if (j >= l->n_lines)
                return -ENOENT;
        line = &p->lines[l->line_off + j];
        if (line->function_id)
                f = &p->functions[line->function_id - 1];
        *ret = (struct fp_pprof_line_view){.function_name = f ? fp_pp_str(p, f->name) : "",
                                           .system_name = f ? fp_pp_str(p, f->system_name) : "",
                                           .filename = f ? fp_pp_str(p, f->filename) : "",
                                           .line = line->line};
        return 0;
}

int64_t fp_pprof_total(const struct fp_pprof *p, size_t i)
{
        if (!p || i >= p->n_types)
                return 0;
        return p->totals[i];
}
