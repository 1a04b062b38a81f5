/* SPDX-License-Identifier: MIT */
/*
 * Pyroscope's push protocols; see pyroscope.h for what is taken and how
 * it maps onto the store.
 *
 * The loop thread checks what is cheap (the query, the name's labels, the
 * sizes) and queues the body with a description of the push; the decoder
 * thread (writeq.h) parses the body (Connect's protobuf, each pprof, the
 * folded lines) into one batch, written like an agent's upload. The
 * answer goes out when it is stored: 200, or the status and reason.
 */
#include "pyroscope.h"
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
#include <event2/keyvalq_struct.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#define NS 1000000000LL
#define MAX_SERIES                                                                                 \
        1024 /* series in one Connect push (an agent host tier round: one per service)             \
              */
#define MAX_PROFILES    1024  /* raw profiles in one Connect push */
#define MAX_FOLDED_LINE 65536 /* bytes of one folded line */
#define DEFAULT_WINDOW  (10 * NS)

enum push_kind {
        PUSH_PPROF,   /* /ingest?format=pprof */
        PUSH_FOLDED,  /* /ingest?format=folded (the default) */
        PUSH_CONNECT, /* /push.v1.PusherService/Push, application/proto */
};

/* One push, as the loop thread checked it: what the decoder thread needs. */
struct push {
        enum push_kind kind;
        bool gzip;              /* Connect's Content-Encoding: gzip */
        bool json;              /* Connect's JSON (application/json) */
        char peer[64];          /* the client's address: the host when no label names one */
        int64_t from_ns, to_ns; /* /ingest: from, until (0: from the profile, else now) */
        char type[64];          /* /ingest: the name's TYPE suffix ("" none) */
        char units[32];         /* /ingest: units ("" samples) */
        uint64_t sample_rate;
        char spy[64];
        struct fp_coll_labels series; /* /ingest: the name's labels */
};

/*
 * Parses an ingest name, APP[.TYPE]{k=v,...}: the service (service_name)
 * and the labels into sr, the TYPE into type when it is one Pyroscope
 * names (a dotted APP keeps its dots otherwise). 0 or -EINVAL.
 */
static int parse_name(const char *name, struct fp_coll_labels *sr, char *type, size_t type_len,
                      char *err, size_t errlen)
{
        static const char *const types[] = {
            "cpu",         "itimer",         "wall",        "alloc_objects",
            "alloc_space", "inuse_objects",  "inuse_space", "goroutines",
            "mutex_count", "mutex_duration", "block_count", "block_duration",
            "lock_count",  "lock_duration",  "exceptions",  NULL};
        const char *brace = strchr(name, '{');
        size_t app = brace ? (size_t)(brace - name) : strlen(name);
        int r;

        *type = 0;
        if (app == 0)
                return fp_errf(err, errlen, -EINVAL, "parameter 'name' has no application name");
        const char *dot = memrchr(name, '.', app);
        if (dot) {
                for (const char *const *t = types; *t; t++)
                        if (strlen(*t) == (size_t)(name + app - dot - 1) &&
                            !memcmp(*t, dot + 1, strlen(*t))) {
                                snprintf(type, type_len, "%s", *t);
                                app = (size_t)(dot - name);
                                break;
                        }
        }
        if ((r = fp_coll_labels_put(sr, "service_name", strlen("service_name"), name, app, err,
                                    errlen)) < 0)
                return r;
        if (!brace)
                return 0;
        const char *p = brace + 1, *end = strchr(p, '}');
        if (!end || end[1])
                return fp_errf(err, errlen, -EINVAL,
                               "parameter 'name': the labels must be one {k=v,...} at its end");
        while (p < end) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                const char *item_end = comma ? comma : end;
                const char *eq = memchr(p, '=', (size_t)(item_end - p));
                while (p < item_end && *p == ' ')
                        p++;
                if (p == item_end) {
                        p = item_end + 1;
                        continue;
                }
                if (!eq)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'name': label '%.*s' has no '='",
                                       (int)(item_end - p > 64 ? 64 : item_end - p), p);
                const char *v = eq + 1;
                size_t nlen = (size_t)(eq - p);
                while (nlen && p[nlen - 1] == ' ')
                        nlen--;
                while (v < item_end && *v == ' ')
                        v++;
                if ((r = fp_coll_labels_put(sr, p, nlen, v, (size_t)(item_end - v), err, errlen)) <
                    0)
                        return r;
                p = item_end + 1;
        }
        return 0;
}

/* ---- a profile.proto into the batch ---- */

/*
 * The frames of a profile's locations in a batch, each location's made
 * once: a location (id i) is frames pool[first[i] .. first[i] + n[i]),
 * its lines (inlined functions first), as store frame indices.
 */
struct frame_cache {
        uint32_t *first, *n; /* by location id; n UINT32_MAX: not made yet */
        uint32_t *pool;
        size_t n_pool, cap_pool;
};

static void frame_cache_free(struct frame_cache *fc)
{
        free(fc->first);
        free(fc->n);
        free(fc->pool);
}

/* Location id's frames into the batch and the cache. 0 or -errno. */
static int location_frames(const struct fp_pprof *p, uint64_t id, struct fp_store_batch *b,
                           struct frame_cache *fc)
{
        struct fp_pprof_location_view l;
        struct fp_pprof_line_view line;
        size_t n = 0;
        int r;

        fc->first[id] = (uint32_t)fc->n_pool;
        fc->n[id] = 0;
        if (fp_pprof_location_get(p, id, &l) < 0)
                return 0;
        do {
                struct fp_store_frame f = {.mapping_file = l.mapping_file,
                                           .build_id = l.build_id,
                                           .mapping_start = l.mapping_start,
                                           .mapping_limit = l.mapping_limit,
                                           .mapping_offset = l.mapping_offset,
                                           .mapping_vaddr1 =
                                               l.mapping_has_vaddr ? l.mapping_vaddr + 1 : 0,
                                           .address = l.address,
                                           .function = ""};
                if (l.n_lines && fp_pprof_location_line(p, id, n, &line) == 0) {
                        f.function = line.function_name;
                        /* A runtime's frames (JavaScript, Python) have no mapping: the file. */
                        if (!l.mapping_file[0])
                                f.mapping_file = line.filename;
                }
                if (fp_grow(&fc->pool, &fc->cap_pool, fc->n_pool + 1, sizeof(*fc->pool)) < 0)
                        return -ENOMEM;
                if ((r = fp_store_batch_add_frame(b, &f, &fc->pool[fc->n_pool])) < 0)
                        return r;
                fc->n_pool++;
                fc->n[id]++;
        } while (++n < l.n_lines);
        return 0;
}

/*
 * The stack of sample view v as frame indices, leaf first, at most
 * FP_STORE_MAX_FRAMES (deeper: the root end is cut, and a last frame says
 * so). Returns how many, or -errno.
 */
static long sample_frames(const struct fp_pprof *p, const struct fp_pprof_sample_view *v,
                          struct fp_store_batch *b, struct frame_cache *fc, uint32_t *idx)
{
        size_t n = 0;
        int r;

        for (size_t i = 0; i < v->n_locations && n < FP_STORE_MAX_FRAMES; i++) {
                uint64_t id = v->location_ids[i];
                if (id == 0 || id > fp_pprof_n_locations(p))
                        continue;
                if (fc->n[id] == UINT32_MAX && (r = location_frames(p, id, b, fc)) < 0)
                        return r;
                for (uint32_t k = 0; k < fc->n[id] && n < FP_STORE_MAX_FRAMES; k++)
                        idx[n++] = fc->pool[fc->first[id] + k];
        }
        if (n == FP_STORE_MAX_FRAMES) {
                struct fp_store_frame cut = {
                    .function = "[truncated]", .mapping_file = "", .build_id = ""};
                if ((r = fp_store_batch_add_frame(b, &cut, &idx[n - 1])) < 0)
                        return r;
        }
        return (long)n;
}

/*
 * Adds profile p of target ti: an event per value type (all but a
 * samples/count column, which is every event's count). 0 or -errno.
 */
static int add_pprof(struct fp_store_batch *b, uint32_t ti, const struct fp_pprof *p,
                     uint32_t *frames, uint64_t *samples, char *err, size_t errlen)
{
        struct frame_cache fc = {0};
        size_t n_locs = fp_pprof_n_locations(p) + 1;
        size_t nt = fp_pprof_n_sample_types(p), count_col = SIZE_MAX;
        uint32_t ei[16];
        const char *ptype, *punit;
        int64_t period = fp_pprof_period(p, &ptype, &punit);
        int r;

        if (nt == 0 || nt > 16)
                return fp_errf(err, errlen, -EINVAL, "a profile with %zu sample types (1 to 16)",
                               nt);
        for (size_t i = 0; nt > 1 && i < nt; i++) {
                const char *unit, *type = fp_pprof_sample_type(p, i, &unit);
                if (strcmp(type, "samples") == 0 && strcmp(unit, "count") == 0)
                        count_col = i;
        }
        for (size_t i = 0; i < nt; i++) {
                const char *unit, *type = fp_pprof_sample_type(p, i, &unit);
                bool counts = strcmp(unit, "count") == 0;
                if (i == count_col)
                        continue;
                if (!fp_coll_event_name_ok(type))
                        return fp_errf(err, errlen, -EINVAL,
                                       "sample type '%.64s' is not a name (letters, digits, "
                                       "'_', '-', '.', ':')",
                                       type);
                struct fp_store_event e = {
                    .name = type,
                    .count_type = count_col != SIZE_MAX ? "samples"
                                  : counts              ? type
                                                        : "samples",
                    .count_unit = "count",
                    .value_type = type,
                    .value_unit = unit,
                    .period_type = ptype && strcmp(ptype, type) == 0 ? ptype : NULL,
                    .period_unit = ptype && strcmp(ptype, type) == 0 ? punit : NULL,
                    .period = ptype && strcmp(ptype, type) == 0 ? period : 0};
                if ((r = fp_store_batch_add_event(b, &e, &ei[i])) < 0 ||
                    (r = fp_store_batch_set_series(b, ti, ei[i])) < 0)
                        return fp_errf(err, errlen, r, "cannot add an event: %s", strerror(-r));
        }
        fc.first = malloc(n_locs * sizeof(*fc.first));
        fc.n = malloc(n_locs * sizeof(*fc.n));
        if (!fc.first || !fc.n) {
                frame_cache_free(&fc);
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        }
        memset(fc.n, 0xff, n_locs * sizeof(*fc.n));
        r = 0;
        for (size_t s = 0; r == 0 && s < fp_pprof_n_samples(p); s++) {
                struct fp_pprof_sample_view v;
                int64_t tid = 0;
                const char *thread_name = NULL, *wait = NULL;
                uint32_t stack;
                if (fp_pprof_sample_get(p, s, &v) < 0)
                        continue;
                for (size_t j = 0; j < v.n_labels; j++) {
                        struct fp_pprof_label l;
                        if (fp_pprof_sample_label(p, s, j, &l) < 0)
                                continue;
                        if (!l.str &&
                            (strcmp(l.key, "thread") == 0 || strcmp(l.key, "thread_id") == 0) &&
                            l.num > 0 && l.num <= INT32_MAX)
                                tid = l.num;
                        else if (l.str && strcmp(l.key, "thread_name") == 0)
                                thread_name = l.str;
                        else if (l.str && strcmp(l.key, "wait") == 0)
                                wait = l.str;
                }
                if (wait && !fp_store_wait_valid(wait)) {
                        r = fp_errf(err, errlen, -EINVAL,
                                    "label 'wait' must be sleep, uninterruptible or runqueue, "
                                    "not '%.40s'",
                                    wait);
                        break;
                }
                bool any = false;
                for (size_t i = 0; i < nt; i++)
                        any |= i != count_col && v.values[i] > 0;
                if (!any)
                        continue;
                long n = sample_frames(p, &v, b, &fc, frames);
                if (n < 0 || (r = fp_store_batch_add_stack_of(b, frames, (size_t)n, &stack)) < 0) {
                        r = fp_errf(err, errlen, n < 0 ? (int)n : r, "cannot add a stack: %s",
                                    strerror(n < 0 ? (int)-n : -r));
                        break;
                }
                for (size_t i = 0; r == 0 && i < nt; i++) {
                        const char *unit;
                        (void)fp_pprof_sample_type(p, i, &unit);
                        if (i == count_col || v.values[i] <= 0)
                                continue;
                        int64_t count = count_col != SIZE_MAX        ? v.values[count_col]
                                        : strcmp(unit, "count") == 0 ? v.values[i]
                                                                     : 1;
                        r = fp_store_batch_add_waiting(b, ti, ei[i], (pid_t)tid, thread_name, wait,
                                                       stack, (uint64_t)(count > 0 ? count : 0),
                                                       (uint64_t)v.values[i]);
                        if (r < 0)
                                r = fp_errf(err, errlen, r, "cannot add a sample: %s",
                                            strerror(-r));
                        else
                                *samples += (uint64_t)(count > 0 ? count : 0);
                }
        }
        frame_cache_free(&fc);
        /* The drops a fleetprof agent counted, in its comments. */
        for (size_t i = 0; r == 0 && i < fp_pprof_n_comments(p); i++) {
                char reason[64];
                uint64_t n;
                if (fp_coll_drop_of(fp_pprof_comment(p, i), reason, &n) &&
                    (r = fp_store_batch_add_drop(b, ti, reason, n)) < 0)
                        r = fp_errf(err, errlen, r, "cannot add a drop: %s", strerror(-r));
        }
        return r;
}

/* ---- folded text into the batch ---- */

static int add_folded(const struct push *ps, struct fp_store_batch *b, uint32_t ti,
                      const uint8_t *body, size_t len, struct fp_store_frame *frames,
                      uint64_t *samples, char *err, size_t errlen)
{
        const char *type = ps->type[0] ? ps->type : "cpu";
        const char *units = ps->units[0] ? ps->units : "samples";
        bool cpu =
            strcmp(units, "samples") == 0 &&
            (strcmp(type, "cpu") == 0 || strcmp(type, "itimer") == 0 || strcmp(type, "wall") == 0);
        uint64_t rate = ps->sample_rate ? ps->sample_rate : 100;
        uint64_t ns_per = (uint64_t)NS / rate;
        struct fp_store_event e = {.name = type,
                                   .count_type = "samples",
                                   .count_unit = "count",
                                   .value_type = type,
                                   .value_unit = cpu ? "nanoseconds" : units,
                                   .period_type = cpu ? type : NULL,
                                   .period_unit = cpu ? "nanoseconds" : NULL,
                                   .period = cpu ? (int64_t)ns_per : 0};
        const char *p = (const char *)body, *end = p + len;
        char *line = malloc(MAX_FOLDED_LINE + 1);
        uint32_t ei, stack;
        size_t lineno = 0;
        int r;

        if (!line)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        if ((r = fp_store_batch_add_event(b, &e, &ei)) < 0 ||
            (r = fp_store_batch_set_series(b, ti, ei)) < 0) {
                free(line);
                return fp_errf(err, errlen, r, "cannot add an event: %s", strerror(-r));
        }
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = (size_t)((nl ? nl : end) - p);
                lineno++;
                if (n > MAX_FOLDED_LINE) {
                        r = fp_errf(err, errlen, -EINVAL, "folded line %zu is longer than %d bytes",
                                    lineno, MAX_FOLDED_LINE);
                        break;
                }
                memcpy(line, p, n);
                line[n] = 0;
                p += n + (nl != NULL);
                while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
                        line[--n] = 0;
                if (!n)
                        continue;
                char *sp = strrchr(line, ' '), *numend;
                unsigned long long count;
                if (!sp || sp == line || !isdigit((unsigned char)sp[1]) ||
                    ((errno = 0), (count = strtoull(sp + 1, &numend, 10)), errno || *numend)) {
                        r = fp_errf(err, errlen, -EINVAL,
                                    "folded line %zu is not 'frame;frame;... count'", lineno);
                        break;
                }
                *sp = 0;
                for (size_t k = 0; k < (size_t)(sp - line); k++)
                        if ((unsigned char)line[k] < 0x20) {
                                r = -EINVAL;
                                break;
                        }
                if (r < 0) {
                        r = fp_errf(err, errlen, -EINVAL,
                                    "folded line %zu holds a control character", lineno);
                        break;
                }
                if (count == 0)
                        continue;
                /* Root first in the text: the store's frames are leaf first. */
                size_t nf = 0;
                for (char *f = line; f && nf < FP_STORE_MAX_FRAMES;) {
                        char *semi = strchr(f, ';');
                        if (semi)
                                *semi = 0;
                        frames[nf++] = (struct fp_store_frame){
                            .function = f, .mapping_file = "", .build_id = ""};
                        f = semi ? semi + 1 : NULL;
                }
                for (size_t a = 0, z = nf - 1; a < z; a++, z--) {
                        struct fp_store_frame t = frames[a];
                        frames[a] = frames[z];
                        frames[z] = t;
                }
                if ((r = fp_store_batch_add_stack(b, frames, nf, &stack)) < 0 ||
                    (r = fp_store_batch_add_sample(b, ti, ei, 0, NULL, stack, count,
                                                   cpu ? count * ns_per : count)) < 0) {
                        r = fp_errf(err, errlen, r, "cannot add a sample: %s", strerror(-r));
                        break;
                }
                *samples += count;
        }
        free(line);
        return r < 0 ? r : 0;
}

/* ---- Connect's PushRequest ---- */

/* A LabelPair{name = 1, value = 2} into sr. */
static int connect_label(struct pb c, struct fp_coll_labels *sr, char *err, size_t errlen)
{
        struct pb name = {0}, value = {0};

        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb sub = {0};
                if (pb_field(&c, &f, &wt, &v, &sub) < 0)
                        return fp_errf(err, errlen, -EBADMSG, "not a PushRequest message");
                if (wt == WT_LEN && f == 1)
                        name = sub;
                else if (wt == WT_LEN && f == 2)
                        value = sub;
        }
        return fp_coll_labels_put(sr, (const char *)name.p, (size_t)(name.end - name.p),
                                  (const char *)value.p, (size_t)(value.end - value.p), err,
                                  errlen);
}

/* ---- Connect's JSON: the PushRequest's fields (pbjson.h) ---- */

static const struct fp_pbj_field label_fields[] = {
    {"name", NULL, 1, FP_PBJ_STRING, false, NULL, NULL},
    {"value", NULL, 2, FP_PBJ_STRING, false, NULL, NULL},
};
static const struct fp_pbj_msg label_msg = {"a LabelPair", label_fields, 2};
static const struct fp_pbj_field sample_fields[] = {
    {"rawProfile", "raw_profile", 1, FP_PBJ_BYTES, false, NULL, NULL},
    {"ID", "id", 2, FP_PBJ_STRING, false, NULL, NULL},
};
static const struct fp_pbj_msg sample_msg = {"a RawSample", sample_fields, 2};
static const struct fp_pbj_field series_fields[] = {
    {"labels", NULL, 1, FP_PBJ_MSG, true, &label_msg, NULL},
    {"samples", NULL, 2, FP_PBJ_MSG, true, &sample_msg, NULL},
};
static const struct fp_pbj_msg series_msg = {"a RawProfileSeries", series_fields, 2};
static const struct fp_pbj_field push_fields[] = {
    {"series", NULL, 1, FP_PBJ_MSG, true, &series_msg, NULL},
};
static const struct fp_pbj_msg push_msg = {"a PushRequest", push_fields, 1};

/* ---- the decoder thread's part ---- */

/* Now, in Unix ns. */
static int64_t now_ns(void)
{
        return (int64_t)fp_now_ns(CLOCK_REALTIME);
}

/* A profile of a push, decoded, with the labels of its series (owned by the push's list). */
struct decoded {
        const struct fp_coll_labels *labels;
        struct fp_pprof *p;
};

struct decoded_list {
        struct decoded *v;
        size_t n, cap;
        struct fp_coll_labels **labels; /* every series' labels, freed with the list */
        size_t n_labels, cap_labels;
};

static void decoded_free(struct decoded_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                fp_pprof_free(l->v[i].p);
        for (size_t i = 0; i < l->n_labels; i++)
                free(l->labels[i]);
        free(l->v);
        free(l->labels);
}

/* Decodes a raw profile of the series labels into the list. 0 or -errno with err said. */
static int decode_one(struct decoded_list *l, const struct fp_coll_labels *labels,
                      const uint8_t *raw, size_t len, size_t max, char *err, size_t errlen)
{
        struct fp_pprof *p = NULL;
        char perr[256];
        int r = fp_pprof_decode(raw, len, max, &p, perr, sizeof(perr));

        if (r < 0)
                return fp_errf(err, errlen, r, "not a profile: %s", perr);
        if (fp_grow(&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0) {
                fp_pprof_free(p);
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        }
        l->v[l->n++] = (struct decoded){labels, p};
        return 0;
}

/* The time range of a push: the query's, else its profiles' own, else the last 10 s. */
static void push_range(const struct push *ps, const struct decoded_list *l, int64_t *from,
                       int64_t *to)
{
        *from = ps->from_ns;
        *to = ps->to_ns;
        if (*from)
                return;
        for (size_t i = 0; l && i < l->n; i++) {
                int64_t t = 0, d = 0;
                fp_pprof_get_time(l->v[i].p, &t, &d);
                if (t <= 0)
                        continue;
                int64_t end = t + (d > 0 ? d : DEFAULT_WINDOW);
                if (!*from || t < *from)
                        *from = t;
                if (end > *to)
                        *to = end;
        }
        if (!*from) {
                *to = now_ns();
                *from = *to - DEFAULT_WINDOW;
        }
}

/* Connect's PushRequest: every series' labels and raw profiles, decoded into l. */
static int decode_connect(const uint8_t *body, size_t len, size_t max, struct decoded_list *l,
                          char *err, size_t errlen)
{
        struct pb c = {body, body + len};
        size_t n_series = 0, n_profiles = 0;
        int r = 0;

        while (c.p < c.end && r == 0) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb s = {0}, it;
                if (pb_field(&c, &f, &wt, &v, &s) < 0)
                        return fp_errf(err, errlen, -EBADMSG, "not a PushRequest message");
                if (f != 1 || wt != WT_LEN)
                        continue;
                if (++n_series > MAX_SERIES)
                        return fp_errf(err, errlen, -EINVAL, "more than %d series in one push",
                                       MAX_SERIES);
                struct fp_coll_labels *sr = calloc(1, sizeof(*sr));
                if (!sr ||
                    fp_grow(&l->labels, &l->cap_labels, l->n_labels + 1, sizeof(*l->labels)) < 0) {
                        free(sr);
                        return fp_errf(err, errlen, -ENOMEM, "out of memory");
                }
                l->labels[l->n_labels++] = sr;
                /* Its labels first (they may follow its samples on the wire). */
                for (it = s; r == 0 && it.p < it.end;) {
                        struct pb sub = {0};
                        if (pb_field(&it, &f, &wt, &v, &sub) < 0)
                                r = fp_errf(err, errlen, -EBADMSG, "not a PushRequest message");
                        else if (f == 1 && wt == WT_LEN)
                                r = connect_label(sub, sr, err, errlen);
                }
                for (it = s; r == 0 && it.p < it.end;) {
                        struct pb sample = {0}, raw = {0};
                        if (pb_field(&it, &f, &wt, &v, &sample) < 0) {
                                r = fp_errf(err, errlen, -EBADMSG, "not a PushRequest message");
                                break;
                        }
                        if (f != 2 || wt != WT_LEN)
                                continue;
                        if (++n_profiles > MAX_PROFILES)
                                return fp_errf(err, errlen, -EINVAL,
                                               "more than %d profiles in one push", MAX_PROFILES);
                        while (r == 0 && sample.p < sample.end) {
                                struct pb sub = {0};
                                if (pb_field(&sample, &f, &wt, &v, &sub) < 0)
                                        r = fp_errf(err, errlen, -EBADMSG,
                                                    "not a PushRequest message");
                                else if (f == 1 && wt == WT_LEN)
                                        raw = sub;
                        }
                        if (r == 0 && raw.p && raw.p != raw.end) /* empty: nothing to keep */
                                r = decode_one(l, sr, raw.p, (size_t)(raw.end - raw.p), max, err,
                                               errlen);
                }
        }
        if (r == 0 && !n_profiles)
                r = fp_errf(err, errlen, -EINVAL, "a push without a profile");
        return r;
}

static int build_push(void *arg, const uint8_t *body, size_t len, size_t max,
                      struct fp_store_batch **ret, uint64_t *ret_samples, char *err, size_t errlen)
{
        struct push *ps = arg;
        struct fp_store_frame *frames = malloc(FP_STORE_MAX_FRAMES * sizeof(*frames));
        uint32_t *idx = malloc(FP_STORE_MAX_FRAMES * sizeof(*idx));
        struct decoded_list l = {0};
        struct fp_store_batch *b = NULL;
        uint8_t *raw = NULL;
        size_t raw_len = 0;
        uint64_t samples = 0;
        int64_t from, to;
        char origin[96];
        uint32_t ti;
        int r = 0;

        if (!frames || !idx) {
                r = fp_errf(err, errlen, -ENOMEM, "out of memory");
                goto out;
        }
        if (ps->gzip) {
                if ((r = fp_pprof_gunzip(body, len, max, &raw, &raw_len, err, errlen)) < 0)
                        goto out;
                body = raw;
                len = raw_len;
        }
        if (ps->json) {
                uint8_t *bin;
                size_t bin_len;
                if ((r = fp_pbjson_read(body, len, &push_msg, &bin, &bin_len, err, errlen)) < 0)
                        goto out;
                free(raw);
                body = raw = bin;
                len = bin_len;
        }
        /* Every profile decoded first (once): their times make the batch's range. */
        if (ps->kind == PUSH_CONNECT)
                r = decode_connect(body, len, max, &l, err, errlen);
        else if (ps->kind == PUSH_PPROF)
                r = decode_one(&l, &ps->series, body, len, max, err, errlen);
        if (r < 0)
                goto out;
        push_range(ps, &l, &from, &to);
        if (!(b = fp_store_batch_new(from, to - from))) {
                r = fp_errf(err, errlen, -ENOMEM, "out of memory");
                goto out;
        }
        snprintf(origin, sizeof(origin), "pyroscope%s%s", ps->spy[0] ? " spy=" : "", ps->spy);
        if (ps->kind == PUSH_FOLDED) {
                if ((r = fp_coll_labels_target(&ps->series, origin, ps->peer, b, &ti, err,
                                               errlen)) == 0)
                        r = add_folded(ps, b, ti, body, len, frames, &samples, err, errlen);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                if ((r = fp_coll_labels_target(l.v[i].labels, origin, ps->peer, b, &ti, err,
                                               errlen)) == 0)
                        r = add_pprof(b, ti, l.v[i].p, idx, &samples, err, errlen);
out:
        decoded_free(&l);
        free(frames);
        free(idx);
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

int fp_coll_pyro_decode(enum fp_pyro_body kind, const char *name, const uint8_t *body, size_t len,
                        size_t max_decompressed, struct fp_store_batch **ret, uint64_t *ret_samples,
                        char *err, size_t errlen)
{
        struct push *ps = calloc(1, sizeof(*ps));
        int r = 0;

        if (!ps)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        snprintf(ps->peer, sizeof(ps->peer), "decoder");
        ps->kind = kind == FP_PYRO_PPROF    ? PUSH_PPROF
                   : kind == FP_PYRO_FOLDED ? PUSH_FOLDED
                                            : PUSH_CONNECT;
        ps->json = kind == FP_PYRO_CONNECT_JSON;
        if (ps->kind != PUSH_CONNECT)
                r = parse_name(name ? name : "", &ps->series, ps->type, sizeof(ps->type), err,
                               errlen);
        if (r == 0)
                r = build_push(ps, body, len, max_decompressed, ret, ret_samples, err, errlen);
        free(ps);
        return r;
}

/* ---- the loop thread's part ---- */

/* A Pyroscope time: Unix seconds, or milliseconds, microseconds or ns by its size. */
static int parse_time(const char *v, int64_t *ret)
{
        char *end;
        long long t;

        errno = 0;
        t = strtoll(v, &end, 10);
        if (errno || *end || !*v || t <= 0)
                return -EINVAL;
        *ret = t > 100000000000000000LL ? t
               : t > 100000000000000LL  ? t * 1000
               : t > 100000000000LL     ? t * 1000000
                                        : t * NS;
        return 0;
}

void fp_coll_pyro_ingest(struct fp_coll_server *s, struct evhttp_request *req)
{
        const struct evhttp_uri *uri = fp_coll_req_uri(req);
        const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
        struct evkeyvalq q;
        struct evkeyval *kv;
        struct push *ps = calloc(1, sizeof(*ps));
        const char *name = NULL;
        char err[320] = "";
        int r = 0;

        TAILQ_INIT(&q);
        if (!ps)
                return fp_coll_reply_error(req, 503, "out of memory");
        ps->kind = PUSH_FOLDED;
        fp_coll_peer_of(req, ps->peer, sizeof(ps->peer));
        if (query && evhttp_parse_query_str(query, &q) < 0)
                r = fp_errf(err, sizeof(err), -EINVAL, "the query string is not valid");
        TAILQ_FOREACH(kv, &q, next)
        {
                const char *k = kv->key, *v = kv->value;
                if (r < 0)
                        break;
                if (strcmp(k, "name") == 0) {
                        name = v;
                } else if (strcmp(k, "from") == 0 || strcmp(k, "until") == 0) {
                        if (parse_time(v, k[0] == 'f' ? &ps->from_ns : &ps->to_ns) < 0)
                                r = fp_errf(err, sizeof(err), -EINVAL,
                                            "parameter '%s' must be a Unix time", k);
                } else if (strcmp(k, "format") == 0) {
                        if (strcmp(v, "pprof") == 0)
                                ps->kind = PUSH_PPROF;
                        else if (strcmp(v, "folded") == 0 || strcmp(v, "lines") == 0)
                                ps->kind = PUSH_FOLDED;
                        else
                                r = fp_errf(err, sizeof(err), -EINVAL,
                                            "format '%.32s' is not taken here: pprof or folded", v);
                } else if (strcmp(k, "sampleRate") == 0) {
                        char *end;
                        errno = 0;
                        unsigned long long hz = strtoull(v, &end, 10);
                        if (errno || *end || hz == 0 || hz > 1000000)
                                r = fp_errf(err, sizeof(err), -EINVAL,
                                            "parameter 'sampleRate' must be 1 to 1000000 Hz");
                        ps->sample_rate = hz;
                } else if (strcmp(k, "units") == 0) {
                        if (!fp_coll_event_name_ok(v) || strlen(v) >= sizeof(ps->units))
                                r = fp_errf(err, sizeof(err), -EINVAL,
                                            "parameter 'units' is not a unit name");
                        else
                                snprintf(ps->units, sizeof(ps->units), "%s", v);
                } else if (strcmp(k, "spyName") == 0) {
                        if (!fp_coll_event_name_ok(v) || strlen(v) >= sizeof(ps->spy))
                                r = fp_errf(err, sizeof(err), -EINVAL,
                                            "parameter 'spyName' is not a name");
                        else
                                snprintf(ps->spy, sizeof(ps->spy), "%s", v);
                } else if (strcmp(k, "aggregationType") != 0) {
                        r = fp_errf(err, sizeof(err), -EINVAL,
                                    "unknown parameter '%.64s' (known: name, from, until, "
                                    "format, sampleRate, spyName, units, aggregationType)",
                                    k);
                }
        }
        if (r == 0 && !name)
                r = fp_errf(err, sizeof(err), -EINVAL, "parameter 'name' is missing");
        if (r == 0)
                r = parse_name(name, &ps->series, ps->type, sizeof(ps->type), err, sizeof(err));
        if (r == 0 && ps->from_ns && ps->to_ns && ps->to_ns < ps->from_ns)
                r = fp_errf(err, sizeof(err), -EINVAL, "'until' must not be before 'from'");
        /* A push of less than a second in whole seconds (a client's last, at its stop). */
        if (r == 0 && ps->from_ns && ps->to_ns == ps->from_ns)
                ps->to_ns = ps->from_ns + NS;
        if (r == 0 && ps->from_ns && !ps->to_ns)
                ps->to_ns = ps->from_ns + DEFAULT_WINDOW;
        if (r == 0 && !ps->from_ns && ps->to_ns)
                ps->from_ns = ps->to_ns - DEFAULT_WINDOW;
        /* A pprof body may come gzipped or not (fp_pprof_decode() tells by its magic). */
        evhttp_clear_headers(&q);
        if (r < 0) {
                s->st.uploads_rejected++;
                free(ps);
                return fp_coll_reply_error(req, 400, "%s", err);
        }
        fp_coll_foreign_queue(s, req, build_push, ps, ps->peer, query ? query : "",
                              FP_COLL_ANSWER_INGEST);
}

void fp_coll_pyro_push(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct evkeyvalq *h = fp_coll_req_headers(req);
        const char *ct = evhttp_find_header(h, "Content-Type");
        const char *enc = evhttp_find_header(h, "Content-Encoding");
        bool json = ct && strcmp(ct, "application/json") == 0;
        struct push *ps;

        if (!ct || (strcmp(ct, "application/proto") != 0 &&
                    strcmp(ct, "application/x-protobuf") != 0 && !json)) {
                s->st.uploads_rejected++;
                return fp_coll_foreign_error(
                    req, FP_COLL_ANSWER_CONNECT, 415,
                    "Content-Type must be application/proto or application/json "
                    "(a PushRequest)");
        }
        if (enc && strcmp(enc, "identity") != 0 && strcmp(enc, "gzip") != 0) {
                s->st.uploads_rejected++;
                return fp_coll_foreign_error(req, FP_COLL_ANSWER_CONNECT, 400,
                                             "Content-Encoding must be gzip or identity");
        }
        if (!(ps = calloc(1, sizeof(*ps))))
                return fp_coll_foreign_error(req, FP_COLL_ANSWER_CONNECT, 503, "out of memory");
        ps->kind = PUSH_CONNECT;
        ps->gzip = enc && strcmp(enc, "gzip") == 0;
        ps->json = json;
        fp_coll_peer_of(req, ps->peer, sizeof(ps->peer));
        fp_coll_foreign_queue(s, req, build_push, ps, ps->peer, "connect",
                              json ? FP_COLL_ANSWER_CONNECT_JSON : FP_COLL_ANSWER_CONNECT);
}
