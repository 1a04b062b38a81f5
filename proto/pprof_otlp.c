/* SPDX-License-Identifier: MIT */
/*
 * pprof profiles, written as OpenTelemetry's profiles (OTLP/HTTP's
 * ExportProfilesServiceRequest, opentelemetry-proto v1.9.0).
 *
 * The two models are close: the profile's own tables become the
 * dictionary's, index for id (pprof ids count from 1, and each OTLP table
 * holds its zero value at 0), so strings, mappings, functions and
 * locations are written as they are. What OTLP adds is made here: a stack
 * table (equal location lists share an entry) and an attribute table
 * (sample labels and the mappings' build IDs, each distinct one once).
 * OTLP's profile holds one sample type, so each of pprof's types becomes
 * a profile of its own, all with the same samples in the same order: a
 * reader pairs the samples/count profile with the others by position.
 *
 * Field numbers (opentelemetry/proto/collector/profiles/v1development and
 * profiles/v1development at v1.9.0):
 *   ExportProfilesServiceRequest { resource_profiles 1; dictionary 2 }
 *   ResourceProfiles { resource 1 { attributes 1 }; scope_profiles 2 }
 *   ScopeProfiles    { scope 1 { name 1; version 2 }; profiles 2 }
 *   Profile   { sample_type 1; samples 2; time_unix_nano 3 (fixed64);
 *               duration_nano 4; period_type 5; period 6; attribute_indices 11 }
 *   ValueType { type_strindex 1; unit_strindex 2 }
 *   Sample    { stack_index 1; values 2; attribute_indices 3 }
 *   ProfilesDictionary { mapping_table 1; location_table 2; function_table 3;
 *                        link_table 4; string_table 5; attribute_table 6; stack_table 7 }
 *   Mapping   { memory_start 1; memory_limit 2; file_offset 3; filename_strindex 4;
 *               attribute_indices 5 }
 *   Location  { mapping_index 1; address 2; lines 3 { function_index 1; line 2 } }
 *   Function  { name_strindex 1; system_name_strindex 2; filename_strindex 3; start_line 4 }
 *   KeyValueAndUnit { key_strindex 1; value 2; unit_strindex 3 }
 *   KeyValue  { key 1; value 2 }   AnyValue { string_value 1; int_value 3 }
 *   Stack     { location_indices 1 }
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pbwire.h"
#include "pprof-internal.h"

/* An attribute of the table: a key and a string (str != FP_PP_NOSTR) or an integer. */
struct o_attr {
        uint32_t key, str;
        int64_t num;
};

struct otlp {
        struct fp_pprof *p;
        /* Stacks: each an (offset, length) into p->sample_locs, by sample. */
        uint32_t *sample_stack; /* stack index of each sample */
        size_t *stack_sample;   /* a sample that has the stack, by stack index - 1 */
        size_t n_stacks;
        struct fp_pp_itab stack_tab;
        struct o_attr *attrs; /* index - 1 */
        size_t n_attrs, cap_attrs;
        struct fp_pp_itab attr_tab;
        uint32_t *sample_attrs; /* each sample's attribute indices, sample_attr_off[i].. */
        size_t *sample_attr_off;
        size_t n_sample_attrs, cap_sample_attrs;
        uint32_t *mapping_attr; /* the build ID's attribute of mapping i + 1, 0: none */
};

struct stack_key {
        const struct otlp *o;
        const uint64_t *locs;
        size_t n;
};

static bool stack_eq(const void *ctx, uint32_t idx)
{
        const struct stack_key *k = ctx;
        const struct fp_pprof *p = k->o->p;
        const struct fp_pp_sample *s = &p->samples[k->o->stack_sample[idx]];

        return s->n_locs == k->n &&
               memcmp(&p->sample_locs[s->loc_off], k->locs, k->n * sizeof(*k->locs)) == 0;
}

struct attr_key {
        const struct otlp *o;
        struct o_attr a;
};

static bool attr_key_eq(const void *ctx, uint32_t idx)
{
        const struct attr_key *k = ctx;
        const struct o_attr *b = &k->o->attrs[idx];

        return k->a.key == b->key && k->a.str == b->str &&
               (k->a.str != FP_PP_NOSTR || k->a.num == b->num);
}

/* The attribute table's index of (key, value), added when new. 0 on failure (*err set). */
static uint32_t attr_index(struct otlp *o, uint32_t key, uint32_t str, int64_t num, int *err)
{
        struct attr_key k = {o, {key, str, str == FP_PP_NOSTR ? num : 0}};
        uint64_t h = fp_pp_hash_step(fp_pp_hash_step(o->p->seed, key), str);
        uint32_t hash = fp_pp_hash_final(fp_pp_hash_step(h, (uint64_t)k.a.num));
        bool found;
        size_t slot;

        if (*err || (*err = fp_pp_itab_reserve(&o->attr_tab)) < 0)
                return 0;
        slot = fp_pp_itab_find(&o->attr_tab, hash, attr_key_eq, &k, &found);
        if (found)
                return o->attr_tab.slots[slot].idx1;
        if (FP_PP_GROW(o->attrs, o->cap_attrs, o->n_attrs + 1) < 0) {
                *err = -ENOMEM;
                return 0;
        }
        o->attrs[o->n_attrs] = k.a;
        fp_pp_itab_set(&o->attr_tab, slot, hash, (uint32_t)o->n_attrs);
        return (uint32_t)++o->n_attrs; /* entry 0 is the zero value */
}

static uint32_t str_index(struct otlp *o, const char *s, int *err)
{
        uint32_t i = 0;

        if (!*err)
                *err = fp_pp_intern(o->p, s, strlen(s), &i);
        return i;
}

/* A sample label as an OTLP attribute (NULL: left out, skip names it). */
static const char *attr_name(const char *key, bool numeric, const char *const *skip)
{
        for (; skip && *skip; skip++)
                if (strcmp(key, *skip) == 0)
                        return NULL;
        if (numeric && strcmp(key, "thread") == 0)
                return "thread.id";
        if (!numeric && strcmp(key, "thread_name") == 0)
                return "thread.name";
        if (numeric && strcmp(key, "pid") == 0)
                return "process.pid";
        return key;
}

/* Stacks and sample attributes of every sample, and the mappings' build IDs. */
static int index_samples(struct otlp *o, const char *const *skip)
{
        struct fp_pprof *p = o->p;
        int err = 0;

        o->sample_stack = fp_pp_calloc(p->n_samples + 1, sizeof(*o->sample_stack));
        o->stack_sample = fp_pp_calloc(p->n_samples + 1, sizeof(*o->stack_sample));
        o->sample_attr_off = fp_pp_calloc(p->n_samples + 1, sizeof(*o->sample_attr_off));
        o->mapping_attr = fp_pp_calloc(p->n_mappings + 1, sizeof(*o->mapping_attr));
        if (!o->sample_stack || !o->stack_sample || !o->sample_attr_off || !o->mapping_attr)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_samples; i++) {
                const struct fp_pp_sample *s = &p->samples[i];
                struct stack_key k = {o, &p->sample_locs[s->loc_off], s->n_locs};
                uint64_t h = p->seed;
                bool found;

                for (size_t j = 0; j < k.n; j++)
                        h = fp_pp_hash_step(h, k.locs[j]);
                uint32_t hash = fp_pp_hash_final(h);
                if ((err = fp_pp_itab_reserve(&o->stack_tab)) < 0)
                        return err;
                size_t slot = fp_pp_itab_find(&o->stack_tab, hash, stack_eq, &k, &found);
                if (!found) {
                        o->stack_sample[o->n_stacks] = i;
                        fp_pp_itab_set(&o->stack_tab, slot, hash, (uint32_t)o->n_stacks++);
                }
                o->sample_stack[i] = o->stack_tab.slots[slot].idx1; /* entry 0: the empty stack */

                o->sample_attr_off[i] = o->n_sample_attrs;
                for (size_t j = 0; j < s->n_labels; j++) {
                        const struct fp_pp_label *l = &p->sample_labels[s->label_off + j];
                        bool numeric = l->str == FP_PP_NOSTR;
                        const char *name = attr_name(fp_pp_str(p, l->key), numeric, skip);
                        if (!name)
                                continue;
                        uint32_t a = attr_index(o, str_index(o, name, &err), l->str, l->num, &err);
                        if (err)
                                return err;
                        if (FP_PP_GROW(o->sample_attrs, o->cap_sample_attrs,
                                       o->n_sample_attrs + 1) < 0)
                                return -ENOMEM;
                        o->sample_attrs[o->n_sample_attrs++] = a;
                }
        }
        o->sample_attr_off[p->n_samples] = o->n_sample_attrs;
        for (size_t i = 0; i < p->n_mappings; i++) {
                uint32_t b = p->mappings[i].build_id;
                if (b && p->strs[b].len)
                        o->mapping_attr[i + 1] = attr_index(
                            o, str_index(o, "process.executable.build_id.gnu", &err), b, 0, &err);
        }
        return err;
}

static void any_value(struct pbout *o, const char *str, int64_t num)
{
        struct pbout v = {0};

        if (str)
                out_str(&v, 1, str);
        else
                out_uint(&v, 3, (uint64_t)num);
        out_msg(o, 2, &v);
        free(v.buf);
}

static void packed(struct pbout *o, uint32_t f, const uint32_t *v, size_t n)
{
        struct pbout q = {0};

        if (!n)
                return;
        for (size_t i = 0; i < n; i++)
                out_varint(&q, v[i]);
        out_msg(o, f, &q);
        free(q.buf);
}

static void write_dictionary(struct otlp *o, struct pbout *out)
{
        const struct fp_pprof *p = o->p;
        struct pbout d = {0}, m = {0}, l = {0};

        /* Mappings, locations, functions: entry 0 the zero value, then pprof's by id. */
        out_len(&d, 1, NULL, 0);
        for (size_t i = 0; i < p->n_mappings; i++) {
                const struct fp_pp_mapping *mp = &p->mappings[i];
                out_uint(&m, 1, mp->start);
                out_uint(&m, 2, mp->limit);
                out_uint(&m, 3, mp->offset);
                out_uint(&m, 4, mp->filename);
                if (o->mapping_attr[i + 1])
                        packed(&m, 5, &o->mapping_attr[i + 1], 1);
                out_msg(&d, 1, &m);
        }
        out_len(&d, 2, NULL, 0);
        for (size_t i = 0; i < p->n_locations; i++) {
                const struct fp_pp_location *lc = &p->locations[i];
                out_uint(&m, 1, lc->mapping_id);
                out_uint(&m, 2, lc->address);
                for (size_t j = 0; j < lc->n_lines; j++) {
                        const struct fp_pp_line *ln = &p->lines[lc->line_off + j];
                        out_uint(&l, 1, ln->function_id);
                        out_uint(&l, 2, (uint64_t)ln->line);
                        out_msg(&m, 3, &l);
                }
                out_msg(&d, 2, &m);
        }
        out_len(&d, 3, NULL, 0);
        for (size_t i = 0; i < p->n_functions; i++) {
                const struct fp_pp_function *f = &p->functions[i];
                out_uint(&m, 1, f->name);
                out_uint(&m, 2, f->system_name);
                out_uint(&m, 3, f->filename);
                out_uint(&m, 4, (uint64_t)f->start_line);
                out_msg(&d, 3, &m);
        }
        out_len(&d, 4, NULL, 0); /* the links' zero value: none are used */
        for (size_t i = 0; i < p->n_strs; i++)
                out_len(&d, 5, p->strs[i].s, p->strs[i].len);
        out_len(&d, 6, NULL, 0);
        for (size_t i = 0; i < o->n_attrs; i++) {
                const struct o_attr *a = &o->attrs[i];
                out_uint(&m, 1, a->key);
                any_value(&m, a->str != FP_PP_NOSTR ? p->strs[a->str].s : NULL, a->num);
                out_msg(&d, 6, &m);
        }
        out_len(&d, 7, NULL, 0);
        for (size_t i = 0; i < o->n_stacks; i++) {
                const struct fp_pp_sample *s = &p->samples[o->stack_sample[i]];
                for (size_t j = 0; j < s->n_locs; j++)
                        out_varint(&l, p->sample_locs[s->loc_off + j]);
                out_msg(&m, 1, &l);
                out_msg(&d, 7, &m);
        }
        out_msg(out, 2, &d);
        free(d.buf);
        free(m.buf);
        free(l.buf);
}

/* Attributes given by the caller, as indices of the table. */
static int given_attrs(struct otlp *o, const struct fp_otlp_attr *a, size_t n, uint32_t *ret)
{
        int err = 0;

        for (size_t i = 0; i < n; i++) {
                uint32_t key = str_index(o, a[i].key, &err);
                uint32_t str = a[i].str ? str_index(o, a[i].str, &err) : FP_PP_NOSTR;
                ret[i] = attr_index(o, key, str, a[i].num, &err);
        }
        return err;
}

static void key_value(struct pbout *o, uint32_t f, const struct fp_otlp_attr *a)
{
        struct pbout kv = {0};

        out_str(&kv, 1, a->key);
        any_value(&kv, a->str, a->num);
        out_msg(o, f, &kv);
        free(kv.buf);
}

/* One resource's profiles: a profile per sample type, the same samples in each. */
static int write_resource(struct otlp *o, const struct fp_otlp_resource *r, const char *scope_name,
                          const char *scope_version, struct pbout *out)
{
        const struct fp_pprof *p = o->p;
        struct pbout rp = {0}, m = {0}, prof = {0}, s = {0}, vals = {0};
        uint32_t pattr[FP_OTLP_MAX_ATTRS * 2];
        size_t np = r->n_profile_attrs + r->n_drop_attrs;
        int e;

        if (np > sizeof(pattr) / sizeof(pattr[0]))
                return -EINVAL;
        if ((e = given_attrs(o, r->profile_attrs, r->n_profile_attrs, pattr)) < 0 ||
            (e = given_attrs(o, r->drop_attrs, r->n_drop_attrs, pattr + r->n_profile_attrs)) < 0)
                return e;
        for (size_t i = 0; i < r->n_attrs; i++)
                key_value(&m, 1, &r->attrs[i]);
        out_msg(&rp, 1, &m);
        out_str(&m, 1, scope_name);
        out_str(&m, 2, scope_version);
        struct pbout scope = {0};
        out_msg(&scope, 1, &m);
        for (size_t t = 0; t < p->n_types; t++) {
                out_uint(&m, 1, p->types[t].type);
                out_uint(&m, 2, p->types[t].unit);
                out_msg(&prof, 1, &m);
                for (size_t i = 0; i < p->n_samples; i++) {
                        if (r->keep && !r->keep(p, i, r->arg))
                                continue;
                        out_uint(&s, 1, o->sample_stack[i]);
                        out_varint(&vals, (uint64_t)p->values[i * p->n_types + t]);
                        out_msg(&s, 2, &vals);
                        packed(&s, 3, &o->sample_attrs[o->sample_attr_off[i]],
                               o->sample_attr_off[i + 1] - o->sample_attr_off[i]);
                        out_msg(&prof, 2, &s);
                }
                out_fixed64(&prof, 3, (uint64_t)p->time_nanos);
                out_uint(&prof, 4, (uint64_t)p->duration_nanos);
                if (p->period_type.type || p->period_type.unit) {
                        out_uint(&m, 1, p->period_type.type);
                        out_uint(&m, 2, p->period_type.unit);
                        out_msg(&prof, 5, &m);
                }
                out_uint(&prof, 6, (uint64_t)p->period);
                /* The drops once per resource: on its first profile. */
                packed(&prof, 11, pattr, t == 0 ? np : r->n_profile_attrs);
                out_msg(&scope, 2, &prof);
        }
        out_msg(&rp, 2, &scope);
        out_msg(out, 1, &rp);
        e = rp.oom || m.oom || prof.oom || s.oom || vals.oom || scope.oom ? -ENOMEM : 0;
        free(rp.buf);
        free(m.buf);
        free(prof.buf);
        free(s.buf);
        free(vals.buf);
        free(scope.buf);
        return e;
}

int fp_pprof_to_otlp(struct fp_pprof *p, const struct fp_otlp_resource *res, size_t n_res,
                     const char *const *skip_labels, const char *scope_name,
                     const char *scope_version, uint8_t **ret, size_t *ret_len)
{
        struct otlp o = {.p = p};
        struct pbout out = {0};
        int e;

        *ret = NULL;
        *ret_len = 0;
        e = index_samples(&o, skip_labels);
        for (size_t i = 0; e == 0 && i < n_res; i++)
                e = write_resource(&o, &res[i], scope_name, scope_version, &out);
        /* Last: the resources above may have added strings and attributes. */
        if (e == 0)
                write_dictionary(&o, &out);
        if (e == 0 && out.oom)
                e = -ENOMEM;
        free(o.sample_stack);
        free(o.stack_sample);
        fp_pp_itab_done(&o.stack_tab);
        free(o.attrs);
        fp_pp_itab_done(&o.attr_tab);
        free(o.sample_attrs);
        free(o.sample_attr_off);
        free(o.mapping_attr);
        if (e < 0) {
                free(out.buf);
                return e;
        }
        *ret = out.buf ? out.buf : malloc(1);
        *ret_len = out.len;
        return *ret ? 0 : -ENOMEM;
}
