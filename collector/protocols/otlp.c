/* SPDX-License-Identifier: MIT */
/*
 * OTLP/HTTP profiles; see otlp.h for the pinned protocol and the mapping.
 *
 * The body is read straight from the wire format: one pass over the
 * dictionary records its tables (every count bounded by the input's
 * length, every index checked where it is used), then each resource's
 * attributes become a series and each of its profiles an event, with
 * every location's frames made once per request.
 */
#include "otlp.h"
#include "foreign.h"
#include "http.h"
#include "pbjson.h"
#include "pbwire.h"
#include "pprof.h"
#include "store.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS             1000000000LL
#define DEFAULT_WINDOW (10 * NS)
#define MAX_RESOURCES  4096 /* an agent's host tier round: a resource per service */

struct o_mapping {
        uint64_t start, limit, offset;
        uint64_t filename;
        struct pb attrs; /* its attribute_indices (field 5), as on the wire */
};

struct o_location {
        uint64_t mapping, address;
        struct pb msg; /* the whole Location: its lines are read when it is used */
};

struct o_function {
        uint64_t name, filename;
};

struct o_attr {
        uint64_t key;
        char *value; /* as text ("" when not a string, number or bool) */
};

struct dict {
        const char **str;
        size_t n_str;
        char *chars;
        struct o_mapping *mappings;
        size_t n_mappings;
        struct o_location *locations;
        size_t n_locations;
        struct o_function *functions;
        size_t n_functions;
        struct o_attr *attrs;
        size_t n_attrs;
        struct pb *stacks; /* each Stack's location_indices field(s) */
        size_t n_stacks;
        /* Each location's frames in the batch, made once: first/n by location index. */
        uint32_t *frame_first, *frame_n, *pool;
        size_t n_pool, cap_pool;
};

static void dict_free(struct dict *d)
{
        /* And the one being read when a malformed entry stopped the reading (zeroed if none). */
        for (size_t i = 0; d->attrs && i <= d->n_attrs; i++)
                free(d->attrs[i].value);
        free(d->str);
        free(d->chars);
        free(d->mappings);
        free(d->locations);
        free(d->functions);
        free(d->attrs);
        free(d->stacks);
        free(d->frame_first);
        free(d->frame_n);
        free(d->pool);
}

static int bad(char *err, size_t errlen, const char *what)
{
        return fp_errf(err, errlen, -EBADMSG, "not an ExportProfilesServiceRequest (v1.9.0): %s",
                       what);
}

/* Counts the occurrences of field f (length-delimited) in message c. -EBADMSG when malformed. */
static long count_field(struct pb c, uint32_t want)
{
        long n = 0;

        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub;
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return -EBADMSG;
                n += f == want && wt == WT_LEN;
        }
        return n;
}

/* An AnyValue as text, malloc'd: a string, a number or a bool ("" for the rest). */
static char *any_text(struct pb c)
{
        char buf[64] = "";

        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub = {0};
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return NULL;
                if (f == 1 && wt == WT_LEN) {
                        char *s = malloc((size_t)(sub.end - sub.p) + 1);
                        if (s) {
                                memcpy(s, sub.p, (size_t)(sub.end - sub.p));
                                s[sub.end - sub.p] = 0;
                        }
                        return s;
                }
                if (f == 2 && wt == WT_VARINT)
                        snprintf(buf, sizeof(buf), "%s", v ? "true" : "false");
                else if (f == 3 && wt == WT_VARINT)
                        snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)v);
                else if (f == 4 && wt == WT_I64) {
                        double dv;
                        memcpy(&dv, &v, sizeof(dv));
                        snprintf(buf, sizeof(buf), "%.17g", dv);
                }
        }
        return strdup(buf);
}

/* The i-th string, or NULL when i is outside the table. */
static const char *dstr(const struct dict *d, uint64_t i)
{
        return i < d->n_str ? d->str[i] : NULL;
}

/* Reads the ProfilesDictionary message c into d. 0 or -errno with err said. */
static int dict_read(struct pb c, struct dict *d, char *err, size_t errlen)
{
        long n[8] = {0};
        size_t chars = 0;
        struct pb it = c;

        for (uint32_t f = 1; f <= 7; f++)
                if ((n[f] = count_field(c, f)) < 0)
                        return bad(err, errlen, "a malformed dictionary");
        d->str = calloc((size_t)n[5] + 1, sizeof(*d->str));
        d->chars = malloc((size_t)(c.end - c.p) + (size_t)n[5] + 1);
        d->mappings = calloc((size_t)n[1] + 1, sizeof(*d->mappings));
        d->locations = calloc((size_t)n[2] + 1, sizeof(*d->locations));
        d->functions = calloc((size_t)n[3] + 1, sizeof(*d->functions));
        d->attrs = calloc((size_t)n[6] + 1, sizeof(*d->attrs));
        d->stacks = calloc((size_t)n[7] + 1, sizeof(*d->stacks));
        if (!d->str || !d->chars || !d->mappings || !d->locations || !d->functions || !d->attrs ||
            !d->stacks)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        while (it.p < it.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb m = {0};
                if (pb_field(&it, &f, &wt, &v, &m) < 0)
                        return bad(err, errlen, "a malformed dictionary");
                if (wt != WT_LEN)
                        continue;
                if (f == 5) {
                        size_t len = (size_t)(m.end - m.p);
                        memcpy(d->chars + chars, m.p, len);
                        d->chars[chars + len] = 0;
                        /* Pointers fixed up below: d->chars does not move. */
                        d->str[d->n_str++] = d->chars + chars;
                        chars += len + 1;
                        continue;
                }
                struct pb x = m;
                while (x.p < x.end) {
                        uint32_t g;
                        unsigned gw;
                        uint64_t gv;
                        struct pb sub = {0};
                        if (pb_field(&x, &g, &gw, &gv, &sub) < 0)
                                return bad(err, errlen, "a malformed dictionary entry");
                        if (f == 1) {
                                struct o_mapping *mp = &d->mappings[d->n_mappings];
                                if (g == 1 && gw == WT_VARINT)
                                        mp->start = gv;
                                else if (g == 2 && gw == WT_VARINT)
                                        mp->limit = gv;
                                else if (g == 3 && gw == WT_VARINT)
                                        mp->offset = gv;
                                else if (g == 4 && gw == WT_VARINT)
                                        mp->filename = gv;
                                else if (g == 5)
                                        mp->attrs = gw == WT_LEN ? sub : mp->attrs;
                        } else if (f == 2) {
                                struct o_location *lp = &d->locations[d->n_locations];
                                if (g == 1 && gw == WT_VARINT)
                                        lp->mapping = gv;
                                else if (g == 2 && gw == WT_VARINT)
                                        lp->address = gv;
                        } else if (f == 3) {
                                struct o_function *fp = &d->functions[d->n_functions];
                                if (g == 1 && gw == WT_VARINT)
                                        fp->name = gv;
                                else if (g == 3 && gw == WT_VARINT)
                                        fp->filename = gv;
                        } else if (f == 6) {
                                struct o_attr *ap = &d->attrs[d->n_attrs];
                                if (g == 1 && gw == WT_VARINT)
                                        ap->key = gv;
                                else if (g == 2 && gw == WT_LEN && !ap->value &&
                                         !(ap->value = any_text(sub)))
                                        return fp_errf(err, errlen, -ENOMEM, "out of memory");
                        }
                }
                if (f == 1)
                        d->n_mappings++;
                else if (f == 2)
                        d->locations[d->n_locations++].msg = m;
                else if (f == 3)
                        d->n_functions++;
                else if (f == 6)
                        d->n_attrs++;
                else if (f == 7)
                        d->stacks[d->n_stacks++] = m;
        }
        if (!d->n_str)
                d->str[d->n_str++] = "";
        /* Every index of the tables checked once: a request that breaks one is refused. */
        for (size_t i = 0; i < d->n_mappings; i++)
                if (!dstr(d, d->mappings[i].filename))
                        return bad(err, errlen, "a mapping's file name is outside the strings");
        for (size_t i = 0; i < d->n_functions; i++)
                if (!dstr(d, d->functions[i].name) || !dstr(d, d->functions[i].filename))
                        return bad(err, errlen, "a function's name is outside the strings");
        for (size_t i = 0; i < d->n_attrs; i++)
                if (!dstr(d, d->attrs[i].key))
                        return bad(err, errlen, "an attribute's key is outside the strings");
        for (size_t i = 0; i < d->n_locations; i++) {
                struct pb lm = d->locations[i].msg;
                if (d->locations[i].mapping >= (d->n_mappings ? d->n_mappings : 1))
                        return bad(err, errlen, "a location's mapping is outside the table");
                while (lm.p < lm.end) {
                        uint32_t g;
                        unsigned gw;
                        uint64_t gv;
                        struct pb line = {0};
                        if (pb_field(&lm, &g, &gw, &gv, &line) < 0)
                                return bad(err, errlen, "a malformed location");
                        while (g == 3 && gw == WT_LEN && line.p < line.end) {
                                uint32_t h;
                                unsigned hw;
                                uint64_t hv;
                                struct pb hs;
                                if (pb_field(&line, &h, &hw, &hv, &hs) < 0)
                                        return bad(err, errlen, "a malformed line");
                                if (h == 1 && hw == WT_VARINT && hv >= d->n_functions &&
                                    !(hv == 0 && d->n_functions == 0))
                                        return bad(err, errlen,
                                                   "a line's function is outside the table");
                        }
                }
        }
        d->frame_first = malloc((d->n_locations + 1) * sizeof(*d->frame_first));
        d->frame_n = malloc((d->n_locations + 1) * sizeof(*d->frame_n));
        if (!d->frame_first || !d->frame_n)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        memset(d->frame_n, 0xff, (d->n_locations + 1) * sizeof(*d->frame_n));
        return 0;
}

/* The value of dictionary attribute key among packed/unpacked attribute_indices field f of c. */
static const char *attr_in(const struct dict *d, struct pb c, uint32_t want, const char *key)
{
        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub = {0};
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return NULL;
                if (f != want)
                        continue;
                /* Packed (len) or one (varint). */
                struct pb q = wt == WT_LEN ? sub : (struct pb){0};
                uint64_t one = v;
                bool single = wt == WT_VARINT;
                while (single || q.p < q.end) {
                        uint64_t i = one;
                        if (!single && pb_varint(&q, &i) < 0)
                                break;
                        single = false;
                        if (i < d->n_attrs && d->attrs[i].value) {
                                const char *k = dstr(d, d->attrs[i].key);
                                if (k && strcmp(k, key) == 0)
                                        return d->attrs[i].value;
                        }
                        if (wt == WT_VARINT)
                                break;
                }
        }
        return NULL;
}

/* A mapping's attribute by key, or NULL. */
static const char *mapping_attr(const struct dict *d, const struct o_mapping *m, const char *key)
{
        struct pb q = m->attrs; /* its packed attribute_indices */
        uint64_t i;

        while (q.p < q.end && pb_varint(&q, &i) == 0)
                if (i < d->n_attrs && d->attrs[i].value && dstr(d, d->attrs[i].key) &&
                    strcmp(dstr(d, d->attrs[i].key), key) == 0)
                        return d->attrs[i].value;
        return NULL;
}

/* Location index li's frames into the batch and the cache. 0 or -errno with err said. */
static int location_frames(struct dict *d, uint64_t li, struct fp_store_batch *b, char *err,
                           size_t errlen)
{
        const struct o_location *l = &d->locations[li];
        const struct o_mapping *m =
            l->mapping && l->mapping < d->n_mappings ? &d->mappings[l->mapping] : NULL;
        static const char *const build_ids[] = {"process.executable.build_id.gnu",
                                                "process.executable.build_id.go",
                                                "process.executable.build_id.htlhash", NULL};
        const char *mfile = m ? dstr(d, m->filename) : "", *build_id = NULL;
        struct pb c = l->msg;
        size_t lines = 0;
        int r;

        /* Checked by dict_read(): index 0 with no table at all is no mapping. */
        if (l->mapping >= (d->n_mappings ? d->n_mappings : 1) || !mfile)
                return bad(err, errlen, "a location's mapping or file is outside the dictionary");
        for (const char *const *k = build_ids; m && *k && !build_id; k++)
                build_id = mapping_attr(d, m, *k);
        d->frame_first[li] = (uint32_t)d->n_pool;
        d->frame_n[li] = 0;
        struct fp_store_frame base = {.function = "",
                                      .mapping_file = mfile,
                                      .build_id = build_id ? build_id : "",
                                      .mapping_start = m ? m->start : 0,
                                      .mapping_limit = m ? m->limit : 0,
                                      .mapping_offset = m ? m->offset : 0,
                                      .address = l->address};
        for (;;) {
                struct fp_store_frame f = base;
                bool have = false;
                while (c.p < c.end && !have) {
                        uint32_t g;
                        unsigned gw;
                        uint64_t gv;
                        struct pb line = {0};
                        if (pb_field(&c, &g, &gw, &gv, &line) < 0)
                                return bad(err, errlen, "a malformed location");
                        if (g != 3 || gw != WT_LEN)
                                continue;
                        uint64_t fi = 0;
                        while (line.p < line.end) {
                                uint32_t h;
                                unsigned hw;
                                uint64_t hv;
                                struct pb hs;
                                if (pb_field(&line, &h, &hw, &hv, &hs) < 0)
                                        return bad(err, errlen, "a malformed line");
                                if (h == 1 && hw == WT_VARINT)
                                        fi = hv;
                        }
                        have = true;
                        if (fi == 0 && d->n_functions == 0)
                                continue; /* no function table: a frame without a name */
                        if (fi >= d->n_functions || !dstr(d, d->functions[fi].name) ||
                            !dstr(d, d->functions[fi].filename))
                                return bad(err, errlen,
                                           "a line's function is outside the dictionary");
                        f.function = dstr(d, d->functions[fi].name);
                        /* A runtime's frames (no mapping file): the function's source file. */
                        if (!mfile[0])
                                f.mapping_file = dstr(d, d->functions[fi].filename);
                }
                if (!have && lines > 0)
                        break;
                if (fp_grow(&d->pool, &d->cap_pool, d->n_pool + 1, sizeof(*d->pool)) < 0)
                        return fp_errf(err, errlen, -ENOMEM, "out of memory");
                if ((r = fp_store_batch_add_frame(b, &f, &d->pool[d->n_pool])) < 0)
                        return fp_errf(err, errlen, r, "cannot add a frame: %s", strerror(-r));
                d->n_pool++;
                d->frame_n[li]++;
                lines++;
                if (!have)
                        break;
        }
        return 0;
}

/* A repeated integer field's values (packed or one by one) appended to out. */
static int ints(unsigned wt, uint64_t v, struct pb sub, uint64_t *out, size_t *n, size_t cap)
{
        if (wt == WT_VARINT) {
                if (*n >= cap)
                        return -E2BIG;
                out[(*n)++] = v;
                return 0;
        }
        if (wt != WT_LEN)
                return 0;
        while (sub.p < sub.end) {
                uint64_t x;
                if (pb_varint(&sub, &x) < 0)
                        return -EBADMSG;
                if (*n >= cap)
                        return -E2BIG;
                out[(*n)++] = x;
        }
        return 0;
}

/* A profile's sample type and period (its time range is profile_range()'s). */
struct o_profile {
        uint64_t type, unit, ptype, punit;
        int64_t period;
};

/* A ValueType{type_strindex 1, unit_strindex 2}. */
static void value_type(struct pb c, uint64_t *type, uint64_t *unit)
{
        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub;
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return;
                if (f == 1 && wt == WT_VARINT)
                        *type = v;
                else if (f == 2 && wt == WT_VARINT)
                        *unit = v;
        }
}

/* The next Sample (field 2) of a Profile at cursor c: 1, 0 at its end, -EBADMSG. */
static int next_sample(struct pb *c, struct pb *ret)
{
        while (c->p < c->end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb s = {0};
                if (pb_field(c, &f, &wt, &v, &s) < 0)
                        return -EBADMSG;
                if (f == 2 && wt == WT_LEN) {
                        *ret = s;
                        return 1;
                }
        }
        return 0;
}

/* Whether two samples are the same but for their values (field 2): stack, attributes, link. */
static bool same_but_values(struct pb a, struct pb b)
{
        for (;;) {
                uint32_t fa = 2, fb = 2;
                unsigned wa = 0, wb = 0;
                uint64_t va = 0, vb = 0;
                struct pb sa = {0}, sb = {0};
                while (fa == 2 && a.p < a.end)
                        if (pb_field(&a, &fa, &wa, &va, &sa) < 0)
                                return false;
                while (fb == 2 && b.p < b.end)
                        if (pb_field(&b, &fb, &wb, &vb, &sb) < 0)
                                return false;
                if (fa == 2 || fb == 2)
                        return fa == fb; /* both at their end */
                if (fa != fb || wa != wb || va != vb ||
                    (wa == WT_LEN && memcmp(sa.p, sb.p, (size_t)va) != 0))
                        return false;
        }
}

/* The sum of a sample's values. */
static uint64_t values_sum(struct pb s)
{
        uint64_t sum = 0;

        while (s.p < s.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v, x;
                struct pb sub = {0};
                if (pb_field(&s, &f, &wt, &v, &sub) < 0)
                        break;
                if (f == 2 && wt == WT_VARINT)
                        sum += v;
                while (f == 2 && wt == WT_LEN && sub.p < sub.end && pb_varint(&sub, &x) == 0)
                        sum += x;
        }
        return sum;
}

/*
 * Profile message c of target ti into the batch: checked whole, then
 * added. counts: a samples/count profile of the same scope to take each
 * sample's count from (OTLP's profile has one sample type, so a pprof
 * with two becomes two profiles); -ESRCH when its samples are not c's.
 * 0, -EINVAL or -EBADMSG (the profile is rejected, err says why, nothing
 * of it was added), or -ENOMEM.
 */
static int add_profile(struct dict *d, struct pb c, const struct pb *counts,
                       struct fp_store_batch *b, uint32_t ti, uint32_t *idx, uint64_t *locs,
                       uint64_t *samples, char *err, size_t errlen)
{
        struct o_profile pr = {0};
        struct pb it = c;
        int r;

        while (it.p < it.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub = {0};
                if (pb_field(&it, &f, &wt, &v, &sub) < 0)
                        return bad(err, errlen, "a malformed profile");
                if (f == 1 && wt == WT_LEN)
                        value_type(sub, &pr.type, &pr.unit);
                else if (f == 5 && wt == WT_LEN)
                        value_type(sub, &pr.ptype, &pr.punit);
                else if (f == 6 && wt == WT_VARINT)
                        pr.period = (int64_t)v;
        }
        const char *type = dstr(d, pr.type), *unit = dstr(d, pr.unit);
        const char *ptype = dstr(d, pr.ptype), *punit = dstr(d, pr.punit);
        if (!type || !unit || !ptype || !punit)
                return fp_errf(err, errlen, -EINVAL, "a sample type's string is outside the table");
        bool cpu = !counts && strcmp(type, "samples") == 0 && strcmp(unit, "count") == 0 &&
                   strcmp(ptype, "cpu") == 0 && strcmp(punit, "nanoseconds") == 0 && pr.period > 0;
        const char *name = cpu ? "cpu" : fp_coll_event_name_ok(type) ? type : "samples";
        struct fp_store_event e = {.name = name,
                                   .count_type = "samples",
                                   .count_unit = "count",
                                   .value_type = cpu ? "cpu" : name,
                                   .value_unit = cpu ? "nanoseconds" : unit,
                                   .period_type = cpu      ? "cpu"
                                                  : counts ? ptype
                                                           : NULL,
                                   .period_unit = cpu      ? "nanoseconds"
                                                  : counts ? punit
                                                           : NULL,
                                   .period = cpu || counts ? pr.period : 0};

        /* Checked whole first: a profile is stored or rejected, never half. */
        for (int pass = 0; pass < 2; pass++) {
                uint32_t ei = 0;
                struct pb cc = counts ? *counts : (struct pb){0}, cs = {0};
                if (pass == 1 && ((r = fp_store_batch_add_event(b, &e, &ei)) < 0 ||
                                  (r = fp_store_batch_set_series(b, ti, ei)) < 0))
                        return fp_errf(err, errlen, r, "cannot add an event: %s", strerror(-r));
                for (it = c; it.p < it.end;) {
                        uint32_t f;
                        unsigned wt;
                        uint64_t v;
                        struct pb s = {0};
                        uint64_t stack = 0, sum = 0, n_values = 0, tid = 0;
                        const char *thread_name = NULL;
                        if (pb_field(&it, &f, &wt, &v, &s) < 0)
                                return bad(err, errlen, "a malformed profile");
                        if (f != 2 || wt != WT_LEN)
                                continue;
                        if (counts && (next_sample(&cc, &cs) != 1 || !same_but_values(s, cs)))
                                return -ESRCH;
                        struct pb attrs = s;
                        while (s.p < s.end) {
                                uint32_t g;
                                unsigned gw;
                                uint64_t gv;
                                struct pb sub = {0};
                                if (pb_field(&s, &g, &gw, &gv, &sub) < 0)
                                        return bad(err, errlen, "a malformed sample");
                                if (g == 1 && gw == WT_VARINT) {
                                        stack = gv;
                                } else if (g == 2 && (gw == WT_VARINT || gw == WT_LEN)) {
                                        struct pb q = sub;
                                        uint64_t x = gv;
                                        while (gw == WT_VARINT || q.p < q.end) {
                                                if (gw == WT_LEN && pb_varint(&q, &x) < 0)
                                                        return bad(err, errlen,
                                                                   "a malformed sample value");
                                                if ((int64_t)x < 0)
                                                        return fp_errf(err, errlen, -EINVAL,
                                                                       "a sample has a negative "
                                                                       "value");
                                                sum += x;
                                                n_values++;
                                                if (gw == WT_VARINT)
                                                        break;
                                        }
                                }
                        }
                        if (stack >= d->n_stacks)
                                return fp_errf(err, errlen, -EINVAL,
                                               "a sample's stack_index %" PRIu64
                                               " is outside the dictionary's %zu stacks",
                                               stack, d->n_stacks);
                        /* The stack's locations, leaf first. */
                        size_t nl = 0;
                        struct pb st = d->stacks[stack];
                        while (st.p < st.end) {
                                uint32_t g;
                                unsigned gw;
                                uint64_t gv;
                                struct pb sub = {0};
                                if (pb_field(&st, &g, &gw, &gv, &sub) < 0)
                                        return bad(err, errlen, "a malformed stack");
                                if (g != 1)
                                        continue;
                                r = ints(gw, gv, sub, locs, &nl, FP_STORE_MAX_FRAMES);
                                if (r == -EBADMSG)
                                        return bad(err, errlen, "a malformed stack");
                        }
                        for (size_t k = 0; k < nl; k++)
                                if (locs[k] >= d->n_locations)
                                        return fp_errf(err, errlen, -EINVAL,
                                                       "a stack's location %" PRIu64
                                                       " is outside the dictionary's %zu",
                                                       locs[k], d->n_locations);
                        const char *wait = attr_in(d, attrs, 3, "wait");
                        if (wait && !fp_store_wait_valid(wait))
                                return fp_errf(err, errlen, -EINVAL,
                                               "a sample's wait must be sleep, uninterruptible or "
                                               "runqueue, not '%.40s'",
                                               wait);
                        if (pass == 0 || sum == 0)
                                continue;
                        const char *t = attr_in(d, attrs, 3, "thread.id");
                        thread_name = attr_in(d, attrs, 3, "thread.name");
                        if (t) {
                                char *end;
                                unsigned long long x = strtoull(t, &end, 10);
                                tid = !*end && x <= INT32_MAX ? x : 0;
                        }
                        size_t n = 0;
                        for (size_t k = 0; k < nl && n < FP_STORE_MAX_FRAMES; k++) {
                                uint64_t li = locs[k];
                                if (d->frame_n[li] == UINT32_MAX &&
                                    (r = location_frames(d, li, b, err, errlen)) < 0)
                                        return r;
                                for (uint32_t q = 0; q < d->frame_n[li] && n < FP_STORE_MAX_FRAMES;
                                     q++)
                                        idx[n++] = d->pool[d->frame_first[li] + q];
                        }
                        uint32_t si;
                        if ((r = fp_store_batch_add_stack_of(b, idx, n, &si)) < 0)
                                return fp_errf(err, errlen, r, "cannot add a stack: %s",
                                               strerror(-r));
                        uint64_t count = counts                              ? values_sum(cs)
                                         : cpu || strcmp(unit, "count") == 0 ? sum
                                                                             : n_values;
                        uint64_t value = cpu ? sum * (uint64_t)pr.period : sum;
                        if ((r = fp_store_batch_add_waiting(b, ti, ei, (pid_t)tid, thread_name,
                                                            wait, si, count, value)) < 0)
                                return fp_errf(err, errlen, r, "cannot add a sample: %s",
                                               strerror(-r));
                        *samples += count;
                }
                if (counts && next_sample(&cc, &cs) != 0)
                        return -ESRCH; /* it has more samples */
        }
        return 0;
}

/* A Resource{attributes: [KeyValue{key 1, value 2}]} into labels. 0 or -errno with err said. */
static int resource_labels(struct pb c, struct fp_coll_labels *l, char *err, size_t errlen)
{
        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb kv = {0}, key = {0}, value = {0};
                if (pb_field(&c, &f, &wt, &v, &kv) < 0)
                        return bad(err, errlen, "a malformed resource");
                if (f != 1 || wt != WT_LEN)
                        continue;
                while (kv.p < kv.end) {
                        uint32_t g;
                        unsigned gw;
                        uint64_t gv;
                        struct pb sub = {0};
                        if (pb_field(&kv, &g, &gw, &gv, &sub) < 0)
                                return bad(err, errlen, "a malformed attribute");
                        if (g == 1 && gw == WT_LEN)
                                key = sub;
                        else if (g == 2 && gw == WT_LEN)
                                value = sub;
                }
                char *text = any_text(value);
                if (!text)
                        return fp_errf(err, errlen, -ENOMEM, "out of memory");
                int r = fp_coll_labels_put(l, (const char *)key.p, (size_t)(key.end - key.p), text,
                                           strlen(text), err, errlen);
                free(text);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The profiles' time range (time_unix_nano 3, duration_nano 4), widened over all of them. */
static void profile_range(struct pb c, int64_t *from, int64_t *to)
{
        uint64_t t = 0, d = 0;

        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub;
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return;
                if (f == 3 && wt == WT_I64) {
                        t = v;
                } else if (f == 4 && wt == WT_VARINT) {
                        d = v;
                }
        }
        if (t == 0 || t > (uint64_t)INT64_MAX / 2 || d > (uint64_t)INT64_MAX / 4)
                return;
        if (!*from || (int64_t)t < *from)
                *from = (int64_t)t;
        if ((int64_t)(t + (d ? d : (uint64_t)DEFAULT_WINDOW)) > *to)
                *to = (int64_t)(t + (d ? d : (uint64_t)DEFAULT_WINDOW));
}

/*
 * Calls fn for every Profile of every ScopeProfiles of a ResourceProfiles
 * message, and with an empty one at the end of each scope. Returns fn's
 * first error.
 */
static int each_profile(struct pb rp, int (*fn)(struct pb profile, void *arg), void *arg, char *err,
                        size_t errlen)
{
        while (rp.p < rp.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sp = {0};
                if (pb_field(&rp, &f, &wt, &v, &sp) < 0)
                        return bad(err, errlen, "a malformed ResourceProfiles");
                if (f != 2 || wt != WT_LEN)
                        continue;
                int r;
                while (sp.p < sp.end) {
                        struct pb pr = {0};
                        if (pb_field(&sp, &f, &wt, &v, &pr) < 0)
                                return bad(err, errlen, "a malformed ScopeProfiles");
                        if (f == 2 && wt == WT_LEN && pr.p && (r = fn(pr, arg)) < 0)
                                return r;
                }
                if ((r = fn((struct pb){0}, arg)) < 0) /* the scope's end */
                        return r;
        }
        return 0;
}

struct range {
        int64_t from, to;
};

static int widen(struct pb profile, void *arg)
{
        struct range *rg = arg;
        profile_range(profile, &rg->from, &rg->to);
        return 0;
}

struct adding {
        struct dict *d;
        struct fp_store_batch *b;
        uint32_t ti, *idx;
        uint64_t *locs, *samples;
        size_t profiles, rejected;
        struct pb counts; /* a samples/count profile of this scope, not yet added */
        bool paired;      /* counts gave another profile its counts */
        char *why;
        size_t why_len;
};

/* Adds a profile (with counts from another, or NULL); a rejected one is said in the answer. */
static int add_checked(struct adding *a, struct pb profile, const struct pb *counts)
{
        char perr[256];
        int r = add_profile(a->d, profile, counts, a->b, a->ti, a->idx, a->locs, a->samples, perr,
                            sizeof(perr));

        if (r == -EINVAL || r == -EBADMSG) {
                /* Rejected, alone: the partial success says so. */
                if (!a->rejected++)
                        snprintf(a->why, a->why_len, "%s", perr);
                return 0;
        }
        if (r < 0 && r != -ESRCH)
                snprintf(a->why, a->why_len, "%s", perr);
        return r;
}

/* A samples/count profile that gave no other its counts is an event of its own. */
static int flush_counts(struct adding *a)
{
        struct pb c = a->counts;
        bool paired = a->paired;

        a->counts = (struct pb){0};
        a->paired = false;
        return c.p && !paired ? add_checked(a, c, NULL) : 0;
}

/* The drops a fleetprof agent counted: the profile's attributes fleetprof.drop.REASON. */
static int profile_drops(struct adding *a, struct pb c)
{
        struct dict *d = a->d;

        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v, i;
                struct pb sub = {0};
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return 0; /* add_profile() says what is wrong with it */
                if (f != 11)
                        continue;
                struct pb q = wt == WT_LEN ? sub : (struct pb){0};
                for (bool one = wt == WT_VARINT; one || (q.p < q.end && pb_varint(&q, &v) == 0);
                     one = false) {
                        char reason[64], *end;
                        i = v;
                        if (i >= d->n_attrs || !d->attrs[i].value || !dstr(d, d->attrs[i].key) ||
                            !fp_coll_drop_of(dstr(d, d->attrs[i].key), reason, NULL))
                                continue;
                        unsigned long long n = strtoull(d->attrs[i].value, &end, 10);
                        int r;
                        if (!*end && isdigit((unsigned char)d->attrs[i].value[0]) &&
                            (r = fp_store_batch_add_drop(a->b, a->ti, reason, n)) < 0)
                                return r;
                }
        }
        return 0;
}

/* A samples/count profile: kept back, for the next profiles of the scope to take counts from. */
static bool counts_only(const struct dict *d, struct pb c)
{
        uint64_t type = 0, unit = 0;

        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub = {0};
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return false;
                if (f == 1 && wt == WT_LEN)
                        value_type(sub, &type, &unit);
        }
        const char *t = dstr(d, type), *u = dstr(d, unit);
        return t && u && strcmp(t, "samples") == 0 && strcmp(u, "count") == 0;
}

static int add_one(struct pb profile, void *arg)
{
        struct adding *a = arg;
        int r;

        if (!profile.p)
                return flush_counts(a); /* the scope's end */
        a->profiles++;
        if ((r = profile_drops(a, profile)) < 0) {
                snprintf(a->why, a->why_len, "cannot add a drop: %s", strerror(-r));
                return r;
        }
        if (counts_only(a->d, profile)) {
                r = flush_counts(a);
                a->counts = profile;
                return r;
        }
        if (a->counts.p) {
                r = add_checked(a, profile, &a->counts);
                if (r != -ESRCH) {
                        a->paired |= r == 0;
                        return r;
                }
        }
        return add_checked(a, profile, NULL);
}

/* ---- OTLP's JSON encoding: the request's fields (pbjson.h), v1.9.0 ---- */

#define F(json, proto, n, kind, rep, msg)                                                          \
        {                                                                                          \
                json, proto, n, FP_PBJ_##kind, rep, msg, NULL                                      \
        }
#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct fp_pbj_msg j_any, j_kv;
static const struct fp_pbj_field j_array_f[] = {F("values", NULL, 1, MSG, true, &j_any)};
static const struct fp_pbj_msg j_array = {"an ArrayValue", j_array_f, N(j_array_f)};
static const struct fp_pbj_field j_kvlist_f[] = {F("values", NULL, 1, MSG, true, &j_kv)};
static const struct fp_pbj_msg j_kvlist = {"a KeyValueList", j_kvlist_f, N(j_kvlist_f)};
static const struct fp_pbj_field j_any_f[] = {
    F("stringValue", "string_value", 1, STRING, false, NULL),
    F("boolValue", "bool_value", 2, BOOL, false, NULL),
    F("intValue", "int_value", 3, INT, false, NULL),
    F("doubleValue", "double_value", 4, DOUBLE, false, NULL),
    F("arrayValue", "array_value", 5, MSG, false, &j_array),
    F("kvlistValue", "kvlist_value", 6, MSG, false, &j_kvlist),
    F("bytesValue", "bytes_value", 7, BYTES, false, NULL),
};
static const struct fp_pbj_msg j_any = {"an AnyValue", j_any_f, N(j_any_f)};
static const struct fp_pbj_field j_kv_f[] = {
    F("key", NULL, 1, STRING, false, NULL),
    F("value", NULL, 2, MSG, false, &j_any),
};
static const struct fp_pbj_msg j_kv = {"a KeyValue", j_kv_f, N(j_kv_f)};
static const struct fp_pbj_field j_resource_f[] = {
    F("attributes", NULL, 1, MSG, true, &j_kv),
    F("droppedAttributesCount", "dropped_attributes_count", 2, INT, false, NULL),
};
static const struct fp_pbj_msg j_resource = {"a Resource", j_resource_f, N(j_resource_f)};
static const struct fp_pbj_field j_scope_f[] = {
    F("name", NULL, 1, STRING, false, NULL),
    F("version", NULL, 2, STRING, false, NULL),
    F("attributes", NULL, 3, MSG, true, &j_kv),
    F("droppedAttributesCount", "dropped_attributes_count", 4, INT, false, NULL),
};
static const struct fp_pbj_msg j_scope = {"an InstrumentationScope", j_scope_f, N(j_scope_f)};
static const struct fp_pbj_field j_vt_f[] = {
    F("typeStrindex", "type_strindex", 1, INT, false, NULL),
    F("unitStrindex", "unit_strindex", 2, INT, false, NULL),
};
static const struct fp_pbj_msg j_vt = {"a ValueType", j_vt_f, N(j_vt_f)};
static const struct fp_pbj_field j_sample_f[] = {
    F("stackIndex", "stack_index", 1, INT, false, NULL),
    F("values", NULL, 2, INT, true, NULL),
    F("attributeIndices", "attribute_indices", 3, INT, true, NULL),
    F("linkIndex", "link_index", 4, INT, false, NULL),
    F("timestampsUnixNano", "timestamps_unix_nano", 5, FIXED64, true, NULL),
};
static const struct fp_pbj_msg j_sample = {"a Sample", j_sample_f, N(j_sample_f)};
static const struct fp_pbj_field j_profile_f[] = {
    F("sampleType", "sample_type", 1, MSG, false, &j_vt),
    F("samples", NULL, 2, MSG, true, &j_sample),
    F("timeUnixNano", "time_unix_nano", 3, FIXED64, false, NULL),
    F("durationNano", "duration_nano", 4, INT, false, NULL),
    F("periodType", "period_type", 5, MSG, false, &j_vt),
    F("period", NULL, 6, INT, false, NULL),
    F("profileId", "profile_id", 7, SKIP, false, NULL),
    F("droppedAttributesCount", "dropped_attributes_count", 8, INT, false, NULL),
    F("originalPayloadFormat", "original_payload_format", 9, STRING, false, NULL),
    F("originalPayload", "original_payload", 10, BYTES, false, NULL),
    F("attributeIndices", "attribute_indices", 11, INT, true, NULL),
};
static const struct fp_pbj_msg j_profile = {"a Profile", j_profile_f, N(j_profile_f)};
static const struct fp_pbj_field j_scope_profiles_f[] = {
    F("scope", NULL, 1, MSG, false, &j_scope),
    F("profiles", NULL, 2, MSG, true, &j_profile),
    F("schemaUrl", "schema_url", 3, STRING, false, NULL),
};
static const struct fp_pbj_msg j_scope_profiles = {"a ScopeProfiles", j_scope_profiles_f,
                                                   N(j_scope_profiles_f)};
static const struct fp_pbj_field j_resource_profiles_f[] = {
    F("resource", NULL, 1, MSG, false, &j_resource),
    F("scopeProfiles", "scope_profiles", 2, MSG, true, &j_scope_profiles),
    F("schemaUrl", "schema_url", 3, STRING, false, NULL),
};
static const struct fp_pbj_msg j_resource_profiles = {"a ResourceProfiles", j_resource_profiles_f,
                                                      N(j_resource_profiles_f)};
static const struct fp_pbj_field j_mapping_f[] = {
    F("memoryStart", "memory_start", 1, INT, false, NULL),
    F("memoryLimit", "memory_limit", 2, INT, false, NULL),
    F("fileOffset", "file_offset", 3, INT, false, NULL),
    F("filenameStrindex", "filename_strindex", 4, INT, false, NULL),
    F("attributeIndices", "attribute_indices", 5, INT, true, NULL),
};
static const struct fp_pbj_msg j_mapping = {"a Mapping", j_mapping_f, N(j_mapping_f)};
static const struct fp_pbj_field j_line_f[] = {
    F("functionIndex", "function_index", 1, INT, false, NULL),
    F("line", NULL, 2, INT, false, NULL),
    F("column", NULL, 3, INT, false, NULL),
};
static const struct fp_pbj_msg j_line = {"a Line", j_line_f, N(j_line_f)};
static const struct fp_pbj_field j_location_f[] = {
    F("mappingIndex", "mapping_index", 1, INT, false, NULL),
    F("address", NULL, 2, INT, false, NULL),
    F("lines", NULL, 3, MSG, true, &j_line),
    F("attributeIndices", "attribute_indices", 4, INT, true, NULL),
};
static const struct fp_pbj_msg j_location = {"a Location", j_location_f, N(j_location_f)};
static const struct fp_pbj_field j_function_f[] = {
    F("nameStrindex", "name_strindex", 1, INT, false, NULL),
    F("systemNameStrindex", "system_name_strindex", 2, INT, false, NULL),
    F("filenameStrindex", "filename_strindex", 3, INT, false, NULL),
    F("startLine", "start_line", 4, INT, false, NULL),
};
static const struct fp_pbj_msg j_function = {"a Function", j_function_f, N(j_function_f)};
/* A link's trace and span IDs are hex in OTLP's JSON; links are not used here. */
static const struct fp_pbj_field j_link_f[] = {
    F("traceId", "trace_id", 1, SKIP, false, NULL),
    F("spanId", "span_id", 2, SKIP, false, NULL),
};
static const struct fp_pbj_msg j_link = {"a Link", j_link_f, N(j_link_f)};
static const struct fp_pbj_field j_kvu_f[] = {
    F("keyStrindex", "key_strindex", 1, INT, false, NULL),
    F("value", NULL, 2, MSG, false, &j_any),
    F("unitStrindex", "unit_strindex", 3, INT, false, NULL),
};
static const struct fp_pbj_msg j_kvu = {"a KeyValueAndUnit", j_kvu_f, N(j_kvu_f)};
static const struct fp_pbj_field j_stack_f[] = {
    F("locationIndices", "location_indices", 1, INT, true, NULL),
};
static const struct fp_pbj_msg j_stack = {"a Stack", j_stack_f, N(j_stack_f)};
static const struct fp_pbj_field j_dict_f[] = {
    F("mappingTable", "mapping_table", 1, MSG, true, &j_mapping),
    F("locationTable", "location_table", 2, MSG, true, &j_location),
    F("functionTable", "function_table", 3, MSG, true, &j_function),
    F("linkTable", "link_table", 4, MSG, true, &j_link),
    F("stringTable", "string_table", 5, STRING, true, NULL),
    F("attributeTable", "attribute_table", 6, MSG, true, &j_kvu),
    F("stackTable", "stack_table", 7, MSG, true, &j_stack),
};
static const struct fp_pbj_msg j_dict = {"a ProfilesDictionary", j_dict_f, N(j_dict_f)};
static const struct fp_pbj_field j_request_f[] = {
    F("resourceProfiles", "resource_profiles", 1, MSG, true, &j_resource_profiles),
    F("dictionary", NULL, 2, MSG, false, &j_dict),
};
static const struct fp_pbj_msg j_request = {"an ExportProfilesServiceRequest", j_request_f,
                                            N(j_request_f)};
#undef F
#undef N

/* The decoder, with the client's address for the host of a resource without host.name. */
static int decode(const char *peer, const uint8_t *body, size_t len, size_t max_decompressed,
                  struct fp_store_batch **ret, uint64_t *ret_samples, char *err, size_t errlen)
{
        struct dict d = {0};
        struct fp_store_batch *b = NULL;
        struct pb *resources = malloc(MAX_RESOURCES * sizeof(*resources)), dictionary = {0};
        size_t n_resources = 0;
        uint8_t *raw = NULL;
        size_t raw_len;
        uint32_t *idx = malloc(FP_STORE_MAX_FRAMES * sizeof(*idx));
        uint64_t *locs = malloc((FP_STORE_MAX_FRAMES + 1) * sizeof(*locs)), samples = 0;
        char why[256] = "";
        struct range rg = {0, 0};
        int r = 0;

        *err = 0;
        if (!idx || !locs || !resources) {
                r = fp_errf(err, errlen, -ENOMEM, "out of memory");
                goto out;
        }
        if (len >= 2 && body[0] == 0x1f && body[1] == 0x8b) {
                if ((r = fp_pprof_gunzip(body, len, max_decompressed, &raw, &raw_len, err,
                                         errlen)) < 0)
                        goto out;
                body = raw;
                len = raw_len;
        }
        struct pb c = {body, body + len};
        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub = {0};
                if (pb_field(&c, &f, &wt, &v, &sub) < 0) {
                        r = bad(err, errlen, "not a protobuf message");
                        goto out;
                }
                if (f == 1 && wt == WT_LEN) {
                        if (n_resources == MAX_RESOURCES) {
                                r = fp_errf(err, errlen, -EINVAL,
                                            "more than %d resources in one request", MAX_RESOURCES);
                                goto out;
                        }
                        resources[n_resources++] = sub;
                } else if (f == 2 && wt == WT_LEN) {
                        dictionary = sub;
                }
        }
        if ((r = dict_read(dictionary, &d, err, errlen)) < 0)
                goto out;
        for (size_t i = 0; i < n_resources && r == 0; i++)
                r = each_profile(resources[i], widen, &rg, err, errlen);
        if (r < 0)
                goto out;
        if (!rg.from) {
                rg.to = (int64_t)fp_now_ns(CLOCK_REALTIME);
                rg.from = rg.to - DEFAULT_WINDOW;
        }
        if (!(b = fp_store_batch_new(rg.from, rg.to - rg.from))) {
                r = fp_errf(err, errlen, -ENOMEM, "out of memory");
                goto out;
        }
        struct adding a = {.d = &d,
                           .b = b,
                           .idx = idx,
                           .locs = locs,
                           .samples = &samples,
                           .why = why,
                           .why_len = sizeof(why)};
        for (size_t i = 0; i < n_resources && r == 0; i++) {
                struct fp_coll_labels *l = calloc(1, sizeof(*l));
                struct pb rp = resources[i];
                if (!l) {
                        r = fp_errf(err, errlen, -ENOMEM, "out of memory");
                        break;
                }
                /* Its Resource (field 1), then the series, then its profiles. */
                while (r == 0 && rp.p < rp.end) {
                        uint32_t f;
                        unsigned wt;
                        uint64_t v;
                        struct pb sub = {0};
                        if (pb_field(&rp, &f, &wt, &v, &sub) < 0)
                                r = bad(err, errlen, "a malformed ResourceProfiles");
                        else if (f == 1 && wt == WT_LEN)
                                r = resource_labels(sub, l, err, errlen);
                }
                if (r == 0)
                        r = fp_coll_labels_target(l, "otlp", peer, b, &a.ti, err, errlen);
                free(l);
                if (r == 0)
                        r = each_profile(resources[i], add_one, &a, err, errlen);
                if (r < 0 && why[0])
                        snprintf(err, errlen, "%s", why);
        }
        if (r == 0 && a.rejected && a.rejected == a.profiles)
                r = fp_errf(err, errlen, -EINVAL, "%zu of %zu profiles rejected: %s", a.rejected,
                            a.profiles, why);
        else if (r == 0 && a.rejected)
                snprintf(err, errlen, "%zu of %zu profiles rejected: %s", a.rejected, a.profiles,
                         why);
out:
        dict_free(&d);
        free(resources);
        free(idx);
        free(locs);
        free(raw);
        if (r < 0) {
                fp_store_batch_free(b);
                return r;
        }
        fp_store_batch_set_uploaded(b, true);
        *ret = b;
        *ret_samples = samples;
        return 0;
}

/* A request in OTLP's JSON: gunzipped when it is gzip, read into protobuf, decoded. */
static int decode_json(const char *peer, const uint8_t *body, size_t len, size_t max,
                       struct fp_store_batch **ret, uint64_t *ret_samples, char *err, size_t errlen)
{
        uint8_t *raw = NULL, *bin = NULL;
        size_t raw_len, bin_len;
        int r = 0;

        if (len >= 2 && body[0] == 0x1f && body[1] == 0x8b) {
                if ((r = fp_pprof_gunzip(body, len, max, &raw, &raw_len, err, errlen)) < 0)
                        return r;
                body = raw;
                len = raw_len;
        }
        r = fp_pbjson_read(body, len, &j_request, &bin, &bin_len, err, errlen);
        free(raw);
        if (r == 0)
                r = decode(peer, bin, bin_len, max, ret, ret_samples, err, errlen);
        free(bin);
        return r;
}

int fp_coll_otlp_decode(const uint8_t *body, size_t len, bool json, size_t max_decompressed,
                        struct fp_store_batch **ret, uint64_t *ret_samples, char *err,
                        size_t errlen)
{
        return (json ? decode_json : decode)("unknown", body, len, max_decompressed, ret,
                                             ret_samples, err, errlen);
}

/* A queued request: JSON or protobuf, and the client's address. */
struct otlp_req {
        bool json;
        char peer[64];
};

/* The decoder thread's part: the queued request's body. */
static int build_otlp(void *arg, const uint8_t *body, size_t len, size_t max,
                      struct fp_store_batch **ret, uint64_t *ret_samples, char *err, size_t errlen)
{
        const struct otlp_req *q = arg;

        return (q->json ? decode_json : decode)(q->peer, body, len, max, ret, ret_samples, err,
                                                errlen);
}

void fp_coll_otlp_export(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        const char *ct = evhttp_find_header(h, "Content-Type");
        const char *enc = evhttp_find_header(h, "Content-Encoding");
        bool json = ct && strcmp(ct, "application/json") == 0;
        enum fp_coll_answer how = json ? FP_COLL_ANSWER_OTLP_JSON : FP_COLL_ANSWER_OTLP;
        struct otlp_req *q;

        if (!ct || (strcmp(ct, "application/x-protobuf") != 0 && !json)) {
                s->st.uploads_rejected++;
                return fp_coll_foreign_error(req, FP_COLL_ANSWER_OTLP, 415,
                                             "Content-Type must be application/x-protobuf or "
                                             "application/json (an "
                                             "ExportProfilesServiceRequest)");
        }
        if (enc && strcmp(enc, "identity") != 0 && strcmp(enc, "gzip") != 0) {
                s->st.uploads_rejected++;
                return fp_coll_foreign_error(req, how, 400,
                                             "Content-Encoding must be gzip or identity");
        }
        if (!(q = calloc(1, sizeof(*q))))
                return fp_coll_foreign_error(req, how, 503, "out of memory");
        q->json = json;
        fp_coll_peer_of(req, q->peer, sizeof(q->peer));
        /* The body's gzip is told by its magic. */
        fp_coll_foreign_queue(s, req, build_otlp, q, q->peer, json ? "otlp-json" : "otlp", how);
}
