/* SPDX-License-Identifier: MIT */
/*
 * Pyroscope's query API over Connect; see querier.h.
 *
 * A call: its body (gzip or not; JSON read into the binary form by
 * pbjson's tables) is decoded into a struct query, the method runs over
 * the store's series listing and merged profiles, and the answer is
 * written in binary (pbwire.h) and, for a JSON call, turned into JSON by
 * the answer's table.
 *
 * Selecting: the store lists the series (target x event) of the time
 * range, narrowed by the selector's = matchers it can filter on (host,
 * process, pid, container); each is matched against the whole selector
 * with its labels. When every listed series matched, the selection is
 * one query with that filter; else one per matched series, merged.
 */
#include "querier.h"
#include "backend.h"
#include "debuginfod.h"
#include "filter.h"
#include "foreign.h"
#include "http.h"
#include "pbjson.h"
#include "pbwire.h"
#include "pprof.h"
#include "selector.h"
#include "util.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS_NS             1000000LL
#define MAX_BODY          (4u << 20) /* a request, once inflated */
#define MAX_LIST          64         /* matchers, label names, group_by */
#define MAX_STRING        (FP_SEL_MAX_TEXT + 1)
#define DEFAULT_MAX_NODES 8192
#define LIMIT_MAX_NODES   1000000
#define MAX_POINTS        11000     /* of one series (Prometheus' bound) */
#define MAX_CELLS         (4 << 20) /* points of all groups */
#define MAX_TARGETS       100000

/* ---- errors ---- */

void fp_coll_connect_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
{
        static const struct {
                const char *code;
                int status;
        } codes[] = {
            {"invalid_argument", 400},   {"unauthenticated", 401}, {"not_found", 404},
            {"resource_exhausted", 429}, {"unimplemented", 501},   {"unavailable", 503},
            {"deadline_exceeded", 504},  {"internal", 500},
        };
        int status = 500;
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
                if (strcmp(codes[i].code, code) == 0)
                        status = codes[i].status;
        fp_coll_connect_reply(req, status, code, msg);
}

/* ---- the messages, for JSON (pbjson.h) ---- */

#define FLD(json, proto, n, kind, rep, msg)                                                        \
        {                                                                                          \
                json, proto, n, FP_PBJ_##kind, rep, msg, NULL                                      \
        }
#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const format_names[] = {
    "PROFILE_FORMAT_UNSPECIFIED", "PROFILE_FORMAT_FLAMEGRAPH", "PROFILE_FORMAT_TREE", NULL};
static const char *const aggregation_names[] = {"TIME_SERIES_AGGREGATION_TYPE_SUM",
                                                "TIME_SERIES_AGGREGATION_TYPE_AVERAGE", NULL};

static const struct fp_pbj_msg j_empty = {"a GetSettingsRequest", NULL, 0};
static const struct fp_pbj_field j_types_req_f[] = {
    FLD("start", NULL, 1, INT, false, NULL),
    FLD("end", NULL, 2, INT, false, NULL),
};
static const struct fp_pbj_msg j_types_req = {"a ProfileTypesRequest", j_types_req_f,
                                              N(j_types_req_f)};
static const struct fp_pbj_field j_names_req_f[] = {
    FLD("matchers", NULL, 1, STRING, true, NULL),
    FLD("start", NULL, 2, INT, false, NULL),
    FLD("end", NULL, 3, INT, false, NULL),
};
static const struct fp_pbj_msg j_names_req = {"a LabelNamesRequest", j_names_req_f,
                                              N(j_names_req_f)};
static const struct fp_pbj_field j_values_req_f[] = {
    FLD("name", NULL, 1, STRING, false, NULL),
    FLD("matchers", NULL, 2, STRING, true, NULL),
    FLD("start", NULL, 3, INT, false, NULL),
    FLD("end", NULL, 4, INT, false, NULL),
};
static const struct fp_pbj_msg j_values_req = {"a LabelValuesRequest", j_values_req_f,
                                               N(j_values_req_f)};
static const struct fp_pbj_field j_series_req_f[] = {
    FLD("matchers", NULL, 1, STRING, true, NULL),
    FLD("labelNames", "label_names", 2, STRING, true, NULL),
    FLD("start", NULL, 3, INT, false, NULL),
    FLD("end", NULL, 4, INT, false, NULL),
};
static const struct fp_pbj_msg j_series_req = {"a SeriesRequest", j_series_req_f,
                                               N(j_series_req_f)};
static const struct fp_pbj_field j_stacks_req_f[] = {
    FLD("profileTypeID", "profile_typeID", 1, STRING, false, NULL),
    FLD("labelSelector", "label_selector", 2, STRING, false, NULL),
    FLD("start", NULL, 3, INT, false, NULL),
    FLD("end", NULL, 4, INT, false, NULL),
    FLD("maxNodes", "max_nodes", 5, INT, false, NULL),
    {"format", NULL, 6, FP_PBJ_ENUM, false, NULL, format_names},
    FLD("stackTraceSelector", "stack_trace_selector", 7, SKIP, false, NULL),
    FLD("profileIdSelector", "profile_id_selector", 8, STRING, true, NULL),
};
static const struct fp_pbj_msg j_stacks_req = {"a SelectMergeStacktracesRequest", j_stacks_req_f,
                                               N(j_stacks_req_f)};
static const struct fp_pbj_field j_profile_req_f[] = {
    FLD("profileTypeID", "profile_typeID", 1, STRING, false, NULL),
    FLD("labelSelector", "label_selector", 2, STRING, false, NULL),
    FLD("start", NULL, 3, INT, false, NULL),
    FLD("end", NULL, 4, INT, false, NULL),
    FLD("maxNodes", "max_nodes", 5, INT, false, NULL),
    FLD("stackTraceSelector", "stack_trace_selector", 6, SKIP, false, NULL),
    FLD("profileIdSelector", "profile_id_selector", 7, STRING, true, NULL),
};
static const struct fp_pbj_msg j_profile_req = {"a SelectMergeProfileRequest", j_profile_req_f,
                                                N(j_profile_req_f)};
static const struct fp_pbj_field j_sseries_req_f[] = {
    FLD("profileTypeID", "profile_typeID", 1, STRING, false, NULL),
    FLD("labelSelector", "label_selector", 2, STRING, false, NULL),
    FLD("start", NULL, 3, INT, false, NULL),
    FLD("end", NULL, 4, INT, false, NULL),
    FLD("groupBy", "group_by", 5, STRING, true, NULL),
    FLD("step", NULL, 6, DOUBLE, false, NULL),
    {"aggregation", NULL, 7, FP_PBJ_ENUM, false, NULL, aggregation_names},
    FLD("stackTraceSelector", "stack_trace_selector", 8, SKIP, false, NULL),
    FLD("limit", NULL, 9, INT, false, NULL),
    FLD("exemplarType", "exemplar_type", 10, SKIP, false, NULL),
};
static const struct fp_pbj_msg j_sseries_req = {"a SelectSeriesRequest", j_sseries_req_f,
                                                N(j_sseries_req_f)};
static const struct fp_pbj_field j_diff_req_f[] = {
    FLD("left", NULL, 1, MSG, false, &j_stacks_req),
    FLD("right", NULL, 2, MSG, false, &j_stacks_req),
};
static const struct fp_pbj_msg j_diff_req = {"a DiffRequest", j_diff_req_f, N(j_diff_req_f)};

/* Answers. */
static const struct fp_pbj_field j_ptype_f[] = {
    FLD("ID", NULL, 1, STRING, false, NULL),
    FLD("name", NULL, 2, STRING, false, NULL),
    FLD("sampleType", "sample_type", 4, STRING, false, NULL),
    FLD("sampleUnit", "sample_unit", 5, STRING, false, NULL),
    FLD("periodType", "period_type", 6, STRING, false, NULL),
    FLD("periodUnit", "period_unit", 7, STRING, false, NULL),
};
static const struct fp_pbj_msg j_ptype = {"a ProfileType", j_ptype_f, N(j_ptype_f)};
static const struct fp_pbj_field j_types_f[] = {
    FLD("profileTypes", "profile_types", 1, MSG, true, &j_ptype)};
static const struct fp_pbj_msg j_types = {"a ProfileTypesResponse", j_types_f, N(j_types_f)};
static const struct fp_pbj_field j_names_f[] = {FLD("names", NULL, 1, STRING, true, NULL)};
static const struct fp_pbj_msg j_names = {"a LabelNamesResponse", j_names_f, N(j_names_f)};
static const struct fp_pbj_field j_pair_f[] = {
    FLD("name", NULL, 1, STRING, false, NULL),
    FLD("value", NULL, 2, STRING, false, NULL),
};
static const struct fp_pbj_msg j_pair = {"a LabelPair", j_pair_f, N(j_pair_f)};
static const struct fp_pbj_field j_labels_f[] = {FLD("labels", NULL, 1, MSG, true, &j_pair)};
static const struct fp_pbj_msg j_labels = {"a Labels", j_labels_f, N(j_labels_f)};
static const struct fp_pbj_field j_series_f[] = {
    FLD("labelsSet", "labels_set", 2, MSG, true, &j_labels)};
static const struct fp_pbj_msg j_series = {"a SeriesResponse", j_series_f, N(j_series_f)};
static const struct fp_pbj_field j_level_f[] = {FLD("values", NULL, 1, INT, true, NULL)};
static const struct fp_pbj_msg j_level = {"a Level", j_level_f, N(j_level_f)};
static const struct fp_pbj_field j_flame_f[] = {
    FLD("names", NULL, 1, STRING, true, NULL),   FLD("levels", NULL, 2, MSG, true, &j_level),
    FLD("total", NULL, 3, INT, false, NULL),     FLD("maxSelf", "max_self", 4, INT, false, NULL),
    FLD("leftTicks", NULL, 5, INT, false, NULL), FLD("rightTicks", NULL, 6, INT, false, NULL),
};
static const struct fp_pbj_msg j_flame = {"a FlameGraph", j_flame_f, N(j_flame_f)};
static const struct fp_pbj_field j_stacks_f[] = {FLD("flamegraph", NULL, 1, MSG, false, &j_flame),
                                                 FLD("tree", NULL, 2, BYTES, false, NULL)};
static const struct fp_pbj_msg j_stacks = {"a SelectMergeStacktracesResponse", j_stacks_f,
                                           N(j_stacks_f)};
static const struct fp_pbj_field j_point_f[] = {
    FLD("value", NULL, 1, DOUBLE, false, NULL),
    FLD("timestamp", NULL, 2, INT, false, NULL),
};
static const struct fp_pbj_msg j_point = {"a Point", j_point_f, N(j_point_f)};
static const struct fp_pbj_field j_one_series_f[] = {
    FLD("labels", NULL, 1, MSG, true, &j_pair),
    FLD("points", NULL, 2, MSG, true, &j_point),
};
static const struct fp_pbj_msg j_one_series = {"a Series", j_one_series_f, N(j_one_series_f)};
static const struct fp_pbj_field j_sseries_f[] = {FLD("series", NULL, 1, MSG, true, &j_one_series)};
static const struct fp_pbj_msg j_sseries = {"a SelectSeriesResponse", j_sseries_f, N(j_sseries_f)};
static const struct fp_pbj_field j_setting_f[] = {
    FLD("name", NULL, 1, STRING, false, NULL),
    FLD("value", NULL, 2, STRING, false, NULL),
    FLD("modifiedAt", "modified_at", 3, INT, false, NULL),
};
static const struct fp_pbj_msg j_setting = {"a Setting", j_setting_f, N(j_setting_f)};
static const struct fp_pbj_field j_settings_f[] = {FLD("settings", NULL, 1, MSG, true, &j_setting)};
static const struct fp_pbj_msg j_settings = {"a GetSettingsResponse", j_settings_f,
                                             N(j_settings_f)};

/* pprof's Profile (proto/profile.proto), SelectMergeProfile's answer. */
static const struct fp_pbj_field j_vtype_f[] = {
    FLD("type", NULL, 1, INT, false, NULL),
    FLD("unit", NULL, 2, INT, false, NULL),
};
static const struct fp_pbj_msg j_vtype = {"a ValueType", j_vtype_f, N(j_vtype_f)};
static const struct fp_pbj_field j_label_f[] = {
    FLD("key", NULL, 1, INT, false, NULL),
    FLD("str", NULL, 2, INT, false, NULL),
    FLD("num", NULL, 3, INT, false, NULL),
    FLD("numUnit", "num_unit", 4, INT, false, NULL),
};
static const struct fp_pbj_msg j_label = {"a Label", j_label_f, N(j_label_f)};
static const struct fp_pbj_field j_sample_f[] = {
    FLD("locationId", "location_id", 1, UINT, true, NULL),
    FLD("value", NULL, 2, INT, true, NULL),
    FLD("label", NULL, 3, MSG, true, &j_label),
};
static const struct fp_pbj_msg j_sample = {"a Sample", j_sample_f, N(j_sample_f)};
static const struct fp_pbj_field j_mapping_f[] = {
    FLD("id", NULL, 1, UINT, false, NULL),
    FLD("memoryStart", "memory_start", 2, UINT, false, NULL),
    FLD("memoryLimit", "memory_limit", 3, UINT, false, NULL),
    FLD("fileOffset", "file_offset", 4, UINT, false, NULL),
    FLD("filename", NULL, 5, INT, false, NULL),
    FLD("buildId", "build_id", 6, INT, false, NULL),
    FLD("hasFunctions", "has_functions", 7, BOOL, false, NULL),
    FLD("hasFilenames", "has_filenames", 8, BOOL, false, NULL),
    FLD("hasLineNumbers", "has_line_numbers", 9, BOOL, false, NULL),
    FLD("hasInlineFrames", "has_inline_frames", 10, BOOL, false, NULL),
};
static const struct fp_pbj_msg j_mapping = {"a Mapping", j_mapping_f, N(j_mapping_f)};
static const struct fp_pbj_field j_line_f[] = {
    FLD("functionId", "function_id", 1, UINT, false, NULL),
    FLD("line", NULL, 2, INT, false, NULL),
    FLD("column", NULL, 3, INT, false, NULL),
};
static const struct fp_pbj_msg j_line = {"a Line", j_line_f, N(j_line_f)};
static const struct fp_pbj_field j_location_f[] = {
    FLD("id", NULL, 1, UINT, false, NULL),
    FLD("mappingId", "mapping_id", 2, UINT, false, NULL),
    FLD("address", NULL, 3, UINT, false, NULL),
    FLD("line", NULL, 4, MSG, true, &j_line),
    FLD("isFolded", "is_folded", 5, BOOL, false, NULL),
};
static const struct fp_pbj_msg j_location = {"a Location", j_location_f, N(j_location_f)};
static const struct fp_pbj_field j_function_f[] = {
    FLD("id", NULL, 1, UINT, false, NULL),
    FLD("name", NULL, 2, INT, false, NULL),
    FLD("systemName", "system_name", 3, INT, false, NULL),
    FLD("filename", NULL, 4, INT, false, NULL),
    FLD("startLine", "start_line", 5, INT, false, NULL),
};
static const struct fp_pbj_msg j_function = {"a Function", j_function_f, N(j_function_f)};
static const struct fp_pbj_field j_profile_f[] = {
    FLD("sampleType", "sample_type", 1, MSG, true, &j_vtype),
    FLD("sample", NULL, 2, MSG, true, &j_sample),
    FLD("mapping", NULL, 3, MSG, true, &j_mapping),
    FLD("location", NULL, 4, MSG, true, &j_location),
    FLD("function", NULL, 5, MSG, true, &j_function),
    FLD("stringTable", "string_table", 6, STRING, true, NULL),
    FLD("dropFrames", "drop_frames", 7, INT, false, NULL),
    FLD("keepFrames", "keep_frames", 8, INT, false, NULL),
    FLD("timeNanos", "time_nanos", 9, INT, false, NULL),
    FLD("durationNanos", "duration_nanos", 10, INT, false, NULL),
    FLD("periodType", "period_type", 11, MSG, false, &j_vtype),
    FLD("period", NULL, 12, INT, false, NULL),
    FLD("comment", NULL, 13, INT, true, NULL),
    FLD("defaultSampleType", "default_sample_type", 14, INT, false, NULL),
};
static const struct fp_pbj_msg j_profile = {"a Profile", j_profile_f, N(j_profile_f)};

/* ---- a call ---- */

/* A request's fields, whichever message it is (each method says which number is which). */
struct query {
        int64_t start_ms, end_ms;
        char *type, *selector, *name;
        int64_t max_nodes;
        uint64_t format, aggregation;
        double step;
        int64_t limit;
        char *list[MAX_LIST]; /* matchers */
        size_t n_list;
        char *names[MAX_LIST]; /* label_names, group_by */
        size_t n_names;
};

enum slot {
        S_NONE,
        S_START,
        S_END,
        S_TYPE,
        S_SELECTOR,
        S_NAME,
        S_MAX_NODES,
        S_FORMAT,
        S_MATCHERS,
        S_NAMES,
        S_STEP,
        S_AGGREGATION,
        S_LIMIT,
        S_LEFT,
        S_RIGHT,
};

struct call;

struct method {
        const char *path;
        const struct fp_pbj_msg *req_json, *resp_json;
        enum slot slots[11]; /* by field number */
        int (*run)(struct call *c);
};

struct call {
        struct fp_coll_server *s;
        struct evhttp_request *req;
        const struct method *m;
        bool json;
        struct query q, left, right;
        struct pbout out;
        bool answered; /* an error was sent (or, with no request, kept in err) */
        char err[256]; /* the error of a call with no request (fp_coll_querier_decode()) */
};

static void query_free(struct query *q)
{
        free(q->type);
        free(q->selector);
        free(q->name);
        for (size_t i = 0; i < q->n_list; i++)
                free(q->list[i]);
        for (size_t i = 0; i < q->n_names; i++)
                free(q->names[i]);
        memset(q, 0, sizeof(*q));
}

/* Sends a Connect error and marks the call answered; returns -EINVAL for the caller to return. */
static int fail(struct call *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct call *c, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (c->req)
                fp_coll_connect_error(c->req, code, "%s", msg);
        else
                snprintf(c->err, sizeof(c->err), "%s: %.200s", code, msg);
        c->answered = true;
        return -EINVAL;
}

/* A store's failure as a Connect error. */
static int store_fail(struct call *c, int r)
{
        if (r == -ETIMEDOUT)
                return fail(c, "deadline_exceeded", "the read ran past its time limit");
        if (r == -ENOMEM)
                return fail(c, "resource_exhausted", "out of memory");
        return fail(c, "unavailable", "cannot read the store: %s", fp_backend_errmsg(c->s->store));
}

static int take_string(struct call *c, struct pb sub, char **ret)
{
        size_t n = (size_t)(sub.end - sub.p);

        if (n >= MAX_STRING)
                return fail(c, "invalid_argument",
                            "a string of the request is longer than %d bytes", MAX_STRING - 1);
        if (memchr(sub.p, 0, n))
                return fail(c, "invalid_argument", "a string of the request holds a NUL byte");
        char *s = fp_budget_malloc(n + 1);
        if (!s)
                return fail(c, "resource_exhausted", "out of memory");
        memcpy(s, sub.p, n);
        s[n] = 0;
        free(*ret);
        *ret = s;
        return 0;
}

/* The binary message of the method's request into q (left and right: a Diff's halves). */
static int decode(struct call *c, const struct method *m, struct pb msg, struct query *q, int depth)
{
        uint32_t num;
        unsigned wt;
        uint64_t v;
        struct pb sub;
        int r;

        while (msg.p < msg.end) {
                if (pb_field(&msg, &num, &wt, &v, &sub) < 0)
                        return fail(c, "invalid_argument", "the body is not %s", m->req_json->name);
                enum slot sl = num < N(m->slots) ? m->slots[num] : S_NONE;
                bool len = wt == WT_LEN;
                switch (sl) {
                case S_NONE:
                        continue;
                case S_START:
                case S_END:
                case S_MAX_NODES:
                case S_FORMAT:
                case S_AGGREGATION:
                case S_LIMIT:
                        if (wt != WT_VARINT)
                                goto bad;
                        if (sl == S_START)
                                q->start_ms = (int64_t)v;
                        else if (sl == S_END)
                                q->end_ms = (int64_t)v;
                        else if (sl == S_MAX_NODES)
                                q->max_nodes = (int64_t)v;
                        else if (sl == S_FORMAT)
                                q->format = v;
                        else if (sl == S_AGGREGATION)
                                q->aggregation = v;
                        else
                                q->limit = (int64_t)v;
                        continue;
                case S_STEP:
                        if (wt != WT_I64)
                                goto bad;
                        memcpy(&q->step, &v, sizeof(q->step));
                        continue;
                case S_TYPE:
                case S_SELECTOR:
                case S_NAME:
                        if (!len)
                                goto bad;
                        r = take_string(c, sub,
                                        sl == S_TYPE       ? &q->type
                                        : sl == S_SELECTOR ? &q->selector
                                                           : &q->name);
                        if (r < 0)
                                return r;
                        continue;
                case S_MATCHERS:
                case S_NAMES: {
                        if (!len)
                                goto bad;
                        bool names = sl == S_NAMES;
                        size_t *n = names ? &q->n_names : &q->n_list;
                        if (*n == MAX_LIST)
                                return fail(c, "invalid_argument",
                                            "the request lists more than %d %s", MAX_LIST,
                                            names ? "label names" : "matchers");
                        char **slot = names ? &q->names[*n] : &q->list[*n];
                        *slot = NULL;
                        if ((r = take_string(c, sub, slot)) < 0)
                                return r;
                        (*n)++;
                        continue;
                }
                case S_LEFT:
                case S_RIGHT:
                        if (!len || depth > 0)
                                goto bad;
                        {
                                static const struct method half = {"",
                                                                   &j_stacks_req,
                                                                   NULL,
                                                                   {S_NONE, S_TYPE, S_SELECTOR,
                                                                    S_START, S_END, S_MAX_NODES,
                                                                    S_FORMAT},
                                                                   NULL};
                                r = decode(c, &half, sub, sl == S_LEFT ? &c->left : &c->right,
                                           depth + 1);
                                if (r < 0)
                                        return r;
                        }
                        continue;
                }
        bad:
                return fail(c, "invalid_argument", "the body is not %s (field %u)",
                            m->req_json->name, num);
        }
        return 0;
}

/* ---- a series' labels ---- */

struct slabels {
        const struct fp_store_series *se;
        char pid[16];
        char types[2][640]; /* the two profile type IDs */
        int vi;             /* which is __profile_type__ */
        /* The labels a pushed series came with (its text's KEY=VALUE words after the origin). */
        char *keys[FP_COLL_MAX_LABELS], *vals[FP_COLL_MAX_LABELS];
        size_t n;
};

static void type_id(char *buf, size_t len, const struct fp_store_series *se, int vi)
{
        snprintf(buf, len, "%s:%s:%s:%s:%s", se->event, vi ? se->value_type : se->count_type,
                 vi ? se->value_unit : se->count_unit, se->period_type ? se->period_type : "",
                 se->period_unit ? se->period_unit : "");
}

static void slabels_free(struct slabels *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->keys[i]);
                free(l->vals[i]);
        }
        l->n = 0;
}

static int slabels_init(struct slabels *l, const struct fp_store_series *se)
{
        const char *cfg = se->config ? se->config : "";
        size_t w = strcspn(cfg, " ");

        memset(l, 0, sizeof(*l));
        l->se = se;
        if (se->pid)
                snprintf(l->pid, sizeof(l->pid), "%d", (int)se->pid);
        type_id(l->types[0], sizeof(l->types[0]), se, 0);
        type_id(l->types[1], sizeof(l->types[1]), se, 1);
        /* An agent's text is its settings (event=... freq=...); another protocol's starts with its
         * name. */
        if (memchr(cfg, '=', w))
                return 0;
        for (const char *p = cfg + w; *p && l->n < FP_COLL_MAX_LABELS;) {
                while (*p == ' ')
                        p++;
                size_t n = strcspn(p, " ");
                const char *eq = memchr(p, '=', n);
                if (eq && eq > p) {
                        char raw[FP_COLL_MAX_LABEL_VALUE * 3 + 1];
                        snprintf(raw, sizeof(raw), "%.*s", (int)(p + n - eq - 1), eq + 1);
                        l->keys[l->n] = strndup(p, (size_t)(eq - p));
                        l->vals[l->n] = evhttp_uridecode(raw, 0, NULL);
                        if (!l->keys[l->n] || !l->vals[l->n]) {
                                free(l->keys[l->n]);
                                free(l->vals[l->n]);
                                slabels_free(l);
                                return -ENOMEM;
                        }
                        l->n++;
                }
                p += n;
        }
        return 0;
}

static const char *slabel(void *ctx, const char *name)
{
        struct slabels *l = ctx;
        const struct fp_store_series *se = l->se;

        if (strcmp(name, "service_name") == 0)
                return se->service && se->service[0] ? se->service : se->comm;
        if (strcmp(name, "host") == 0)
                return se->host;
        if (strcmp(name, "process") == 0)
                return se->comm;
        if (strcmp(name, "pid") == 0)
                return l->pid;
        if (strcmp(name, "container") == 0)
                return se->container;
        if (strcmp(name, "event") == 0 || strcmp(name, "__name__") == 0)
                return se->event;
        if (strcmp(name, "__profile_type__") == 0)
                return l->types[l->vi];
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->keys[i], name) == 0)
                        return l->vals[i];
        return "";
}

typedef int (*label_fn)(void *ctx, const char *name, const char *value);

/* Each label the series has (for __profile_type__: the one of l->vi), in a fixed order. */
static int slabels_each(struct slabels *l, label_fn fn, void *ctx)
{
        static const char *const fixed[] = {
            "service_name", "host",  "process",  "pid",
            "container",    "event", "__name__", "__profile_type__"};
        int r;

        for (size_t i = 0; i < N(fixed); i++) {
                const char *v = slabel(l, fixed[i]);
                if (v && *v && (r = fn(ctx, fixed[i], v)) < 0)
                        return r;
        }
        for (size_t i = 0; i < l->n; i++)
                if ((r = fn(ctx, l->keys[i], l->vals[i])) < 0)
                        return r;
        return 0;
}

/* Whether the series matches any of the selectors (none: every series), with either type. */
static bool matches_any(struct slabels *l, const struct fp_selector *sels, size_t n)
{
        if (n == 0)
                return true;
        for (size_t i = 0; i < n; i++)
                for (l->vi = 0; l->vi < 2; l->vi++)
                        if (fp_sel_match(&sels[i], slabel, l))
                                return true;
        l->vi = 0;
        return false;
}

/* ---- string sets (sorted on output) ---- */

/* Strings, each once: a vector, and an open-addressing index of it (a power of two). */
struct strset {
        char **v;
        size_t n, cap;
        uint32_t *index; /* slot -> position in v + 1; 0: empty */
        size_t slots;
};

static uint64_t str_hash(const char *x)
{
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (; *x; x++)
                h = (h ^ (uint8_t)*x) * 1099511628211ULL;
        return h;
}

static int strset_add(struct strset *s, const char *x)
{
        if (2 * (s->n + 1) > s->slots) {
                size_t slots = s->slots ? 2 * s->slots : 64;
                uint32_t *index = fp_budget_calloc(slots, sizeof(*index));
                if (!index)
                        return -ENOMEM;
                for (size_t i = 0; i < s->n; i++) {
                        size_t k = str_hash(s->v[i]) & (slots - 1);
                        while (index[k])
                                k = (k + 1) & (slots - 1);
                        index[k] = (uint32_t)i + 1;
                }
                free(s->index);
                s->index = index;
                s->slots = slots;
        }
        size_t k = str_hash(x) & (s->slots - 1);
        for (; s->index[k]; k = (k + 1) & (s->slots - 1))
                if (strcmp(s->v[s->index[k] - 1], x) == 0)
                        return 0;
        if (s->n >= MAX_TARGETS)
                return -E2BIG;
        if (fp_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v)) < 0 ||
            !(s->v[s->n] = fp_budget_strdup(x)))
                return -ENOMEM;
        s->index[k] = (uint32_t)++s->n;
        return 0;
}

/* x's position in s + 1, or 0 when s lacks it. */
static size_t strset_find(const struct strset *s, const char *x)
{
        if (!s->slots)
                return 0;
        for (size_t k = str_hash(x) & (s->slots - 1); s->index[k]; k = (k + 1) & (s->slots - 1))
                if (strcmp(s->v[s->index[k] - 1], x) == 0)
                        return s->index[k];
        return 0;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strset_free(struct strset *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        free(s->index);
        memset(s, 0, sizeof(*s));
}

/* The strings, sorted, as repeated field f (the set is done with). */
static void strset_out(struct strset *s, struct pbout *o, uint32_t f)
{
        free(s->index); /* sorting moves what it points at */
        s->index = NULL;
        s->slots = 0;
        if (s->n)
                qsort(s->v, s->n, sizeof(*s->v), cmp_str);
        for (size_t i = 0; i < s->n; i++)
                out_str(o, f, s->v[i]);
}

/* ---- selectors and the time range ---- */

/* The call's matchers (a list of selectors) parsed into sels[]. */
static int parse_matchers(struct call *c, const struct query *q, struct fp_selector *sels)
{
        char err[256];

        for (size_t i = 0; i < q->n_list; i++)
                if (fp_sel_parse(q->list[i], &sels[i], err, sizeof(err)) < 0) {
                        for (size_t k = 0; k < i; k++)
                                fp_sel_free(&sels[k]);
                        return fail(c, "invalid_argument", "matcher %zu: %s", i + 1, err);
                }
        return 0;
}

static void free_matchers(struct fp_selector *sels, size_t n)
{
        for (size_t i = 0; i < n; i++)
                fp_sel_free(&sels[i]);
}

static int time_range(struct call *c, const struct query *q, struct fp_store_filter *f)
{
        if (q->start_ms < 0 || q->end_ms < 0 || q->start_ms > INT64_MAX / MS_NS ||
            q->end_ms > INT64_MAX / MS_NS)
                return fail(c, "invalid_argument",
                            "start and end are milliseconds since the epoch");
        if (q->start_ms && q->end_ms && q->end_ms < q->start_ms)
                return fail(c, "invalid_argument", "end is before start");
        f->since_ns = q->start_ms * MS_NS;
        f->until_ns = q->end_ms * MS_NS;
        return 0;
}

/* ---- ProfileTypes, LabelNames, LabelValues, Series ---- */

struct walk {
        struct call *c;
        struct fp_selector *sels;
        size_t n_sels;
        const char *name;    /* LabelValues */
        struct strset set;   /* names, values or type IDs */
        struct query *q;     /* Series: label_names */
        struct pbout *out;   /* Series */
        struct strset seen;  /* Series: label sets written */
        struct pbout labels; /* Series: the set being built */
};

static int add_name(void *ctx, const char *name, const char *value)
{
        (void)value;
        return strset_add(ctx, name);
}

static int on_names(void *ud, const struct fp_store_series *se)
{
        struct walk *w = ud;
        struct slabels l;
        int r = slabels_init(&l, se);

        if (r < 0)
                return r;
        if (matches_any(&l, w->sels, w->n_sels)) {
                r = slabels_each(&l, add_name, &w->set);
                if (r >= 0)
                        r = strset_add(&w->set, "thread_name");
        }
        slabels_free(&l);
        return r;
}

static int on_values(void *ud, const struct fp_store_series *se)
{
        struct walk *w = ud;
        struct slabels l;
        int r = slabels_init(&l, se);

        if (r < 0)
                return r;
        if (strcmp(w->name, "__profile_type__") == 0) {
                /* Each of its two types that the matchers select. */
                for (int vi = 0; vi < 2 && r >= 0; vi++) {
                        bool ok = w->n_sels == 0;
                        l.vi = vi;
                        for (size_t i = 0; i < w->n_sels && !ok; i++)
                                ok = fp_sel_match(&w->sels[i], slabel, &l);
                        if (ok)
                                r = strset_add(&w->set, l.types[vi]);
                }
        } else if (matches_any(&l, w->sels, w->n_sels)) {
                const char *v = slabel(&l, w->name);
                if (v && *v)
                        r = strset_add(&w->set, v);
        }
        slabels_free(&l);
        return r;
}

/* Series: one label pair into the set being built, when asked for. */
static int add_pair(void *ctx, const char *name, const char *value)
{
        struct walk *w = ctx;
        struct pbout pair = {0};

        if (w->q->n_names) {
                bool wanted = false;
                for (size_t i = 0; i < w->q->n_names && !wanted; i++)
                        wanted = strcmp(w->q->names[i], name) == 0;
                if (!wanted)
                        return 0;
        }
        out_str(&pair, 1, name);
        out_str(&pair, 2, value);
        out_msg(&w->labels, 1, &pair);
        free(pair.buf);
        return w->labels.oom ? -ENOMEM : 0;
}

static int on_series(void *ud, const struct fp_store_series *se)
{
        struct walk *w = ud;
        struct slabels l;
        int r = slabels_init(&l, se);

        if (r < 0)
                return r;
        for (int vi = 0; vi < 2 && r >= 0; vi++) {
                l.vi = vi;
                bool ok = w->n_sels == 0;
                for (size_t i = 0; i < w->n_sels && !ok; i++)
                        ok = fp_sel_match(&w->sels[i], slabel, &l);
                if (!ok)
                        continue;
                w->labels.len = 0;
                if ((r = slabels_each(&l, add_pair, w)) < 0)
                        break;
                /* Each distinct set once (its bytes as the key). */
                char *key = fp_budget_malloc(2 * w->labels.len + 1);
                if (!key) {
                        r = -ENOMEM;
                        break;
                }
                for (size_t k = 0; k < w->labels.len; k++)
                        snprintf(key + 2 * k, 3, "%02x", w->labels.buf[k]);
                key[2 * w->labels.len] = 0;
                size_t before = w->seen.n;
                r = strset_add(&w->seen, key);
                free(key);
                if (r >= 0 && w->seen.n > before)
                        out_len(w->out, 2, w->labels.buf, w->labels.len);
        }
        slabels_free(&l);
        return r;
}

static int on_types(void *ud, const struct fp_store_series *se)
{
        struct walk *w = ud;
        struct slabels l;
        int r = slabels_init(&l, se);

        if (r < 0)
                return r;
        for (int vi = 0; vi < 2 && r >= 0; vi++) {
                size_t before = w->set.n;
                r = strset_add(&w->set, l.types[vi]);
                if (r < 0 || w->set.n == before)
                        continue;
                struct pbout t = {0};
                out_str(&t, 1, l.types[vi]);
                out_str(&t, 2, se->event);
                out_str(&t, 4, vi ? se->value_type : se->count_type);
                out_str(&t, 5, vi ? se->value_unit : se->count_unit);
                out_str(&t, 6, se->period_type ? se->period_type : "");
                out_str(&t, 7, se->period_unit ? se->period_unit : "");
                out_msg(w->out, 1, &t);
                free(t.buf);
        }
        slabels_free(&l);
        return r;
}

static int run_listing(struct call *c, fp_store_series_fn fn, struct walk *w)
{
        struct fp_store_filter f = {0};
        int r;

        if ((r = time_range(c, &c->q, &f)) < 0)
                return r;
        w->c = c;
        w->q = &c->q;
        w->out = &c->out;
        f.no_totals = true; /* names and labels only */
        r = fp_backend_list_series(c->s->store, &f, fn, w);
        if (r < 0 && !c->answered)
                r = store_fail(c, r);
        return r;
}

static int run_profile_types(struct call *c)
{
        struct walk w = {0};
        int r = run_listing(c, on_types, &w);

        strset_free(&w.set);
        return r < 0 ? r : 0;
}

static int run_label_names(struct call *c)
{
        struct fp_selector sels[MAX_LIST];
        struct walk w = {.sels = sels, .n_sels = c->q.n_list};
        int r = parse_matchers(c, &c->q, sels);

        if (r < 0)
                return r;
        r = run_listing(c, on_names, &w);
        if (r >= 0)
                strset_out(&w.set, &c->out, 1);
        free_matchers(sels, c->q.n_list);
        strset_free(&w.set);
        return r < 0 ? r : 0;
}

static int thread_names(struct call *c, struct walk *w);

static int run_label_values(struct call *c)
{
        struct fp_selector sels[MAX_LIST];
        struct walk w = {.sels = sels, .n_sels = c->q.n_list, .name = c->q.name};
        int r;

        if (!c->q.name || !*c->q.name)
                return fail(c, "invalid_argument", "name (the label's) is required");
        if ((r = parse_matchers(c, &c->q, sels)) < 0)
                return r;
        r = strcmp(c->q.name, "thread_name") == 0 ? thread_names(c, &w)
                                                  : run_listing(c, on_values, &w);
        if (r >= 0)
                strset_out(&w.set, &c->out, 1);
        free_matchers(sels, c->q.n_list);
        strset_free(&w.set);
        return r < 0 ? r : 0;
}

static int run_series(struct call *c)
{
        struct fp_selector sels[MAX_LIST];
        struct walk w = {.sels = sels, .n_sels = c->q.n_list};
        int r = parse_matchers(c, &c->q, sels);

        if (r < 0)
                return r;
        r = run_listing(c, on_series, &w);
        free_matchers(sels, c->q.n_list);
        strset_free(&w.seen);
        free(w.labels.buf);
        return r < 0 ? r : 0;
}

/* ---- selections: a profile type and a selector over a time range ---- */

struct target {
        char *host, *service, *container, *comm, *group;
        pid_t pid;
        uint64_t starttime;
};

struct selection {
        char event[256];
        char sample[300], period[300]; /* "TYPE:UNIT" of the sample type and the period */
        int vi;                        /* the sample type's index: 0 count, 1 value */
        struct fp_selector sel;        /* thread_name taken out */
        const char *thread;            /* thread_name="..." (points into sel's text copy) */
        char *thread_copy;
        struct fp_store_filter base; /* event, time range, what the store can narrow by */
        char pid_text[16];
        struct target *t;
        size_t n, cap;
        size_t listed; /* series of the type the store listed under base */
        bool other_units;
        char **group_by;
        size_t n_group_by;
        struct call *c;
        int err;
};

static void selection_free(struct selection *s)
{
        for (size_t i = 0; i < s->n; i++) {
                free(s->t[i].host);
                free(s->t[i].service);
                free(s->t[i].container);
                free(s->t[i].comm);
                free(s->t[i].group);
        }
        free(s->t);
        free(s->thread_copy);
        fp_sel_free(&s->sel);
        memset(s, 0, sizeof(*s));
}

/* The group a series falls in: the values of the group_by labels, joined by \x1f. */
static char *group_of(struct selection *s, struct slabels *l)
{
        size_t len = 1;

        for (size_t i = 0; i < s->n_group_by; i++)
                len += strlen(slabel(l, s->group_by[i])) + 1;
        char *g = fp_budget_malloc(len), *p = g;
        if (!g)
                return NULL;
        *p = 0;
        for (size_t i = 0; i < s->n_group_by; i++)
                p += sprintf(p, "%s%s", i ? "\x1f" : "", slabel(l, s->group_by[i]));
        return g;
}

static int on_select(void *ud, const struct fp_store_series *se)
{
        struct selection *s = ud;
        char sample[2][300], period[300];
        struct slabels l;
        int vi, r;

        snprintf(sample[0], sizeof(sample[0]), "%s:%s", se->count_type, se->count_unit);
        snprintf(sample[1], sizeof(sample[1]), "%s:%s", se->value_type, se->value_unit);
        snprintf(period, sizeof(period), "%s:%s", se->period_type ? se->period_type : "",
                 se->period_unit ? se->period_unit : "");
        if (strcmp(se->event, s->event) != 0)
                return 0;
        vi = strcmp(sample[1], s->sample) == 0 ? 1 : strcmp(sample[0], s->sample) == 0 ? 0 : -1;
        if (vi < 0 || strcmp(period, s->period) != 0) {
                s->other_units = true;
                return 0;
        }
        s->vi = vi;
        s->listed++;
        if ((r = slabels_init(&l, se)) < 0)
                return r;
        l.vi = vi;
        if (fp_sel_match(&s->sel, slabel, &l)) {
                if (s->n >= MAX_TARGETS) {
                        r = -E2BIG;
                } else if (fp_grow((void **)&s->t, &s->cap, s->n + 1, sizeof(*s->t)) < 0) {
                        r = -ENOMEM;
                } else {
                        struct target *t = &s->t[s->n];
                        *t = (struct target){
                            .host = fp_budget_strdup(se->host ? se->host : ""),
                            .service = fp_budget_strdup(se->service ? se->service : ""),
                            .container = fp_budget_strdup(se->container ? se->container : ""),
                            .comm = fp_budget_strdup(se->comm ? se->comm : ""),
                            .group = group_of(s, &l),
                            .pid = se->pid,
                            .starttime = se->starttime,
                        };
                        s->n++;
                        if (!t->host || !t->service || !t->container || !t->comm || !t->group)
                                r = -ENOMEM;
                }
        }
        slabels_free(&l);
        return r;
}

/*
 * Selects what q asks for into s: the profile type's event and sample
 * type, the series that match. Answers the error itself.
 */
static int select_targets(struct call *c, const struct query *q, char **group_by, size_t n_group_by,
                          struct selection *s)
{
        const char *type = q->type ? q->type : "";
        const char *colon[4] = {0};
        char err[256];
        int r;

        memset(s, 0, sizeof(*s));
        s->c = c;
        /* NAME:SAMPLE_TYPE:UNIT:PERIOD_TYPE:PERIOD_UNIT, the name itself maybe holding ':'. */
        const char *p = type + strlen(type);
        for (int k = 3; k >= 0; k--) {
                while (p > type && p[-1] != ':')
                        p--;
                if (p == type)
                        return fail(c, "invalid_argument",
                                    "profile type '%.200s' is not "
                                    "NAME:SAMPLE_TYPE:UNIT:PERIOD_TYPE:PERIOD_UNIT",
                                    type);
                colon[k] = --p;
        }
        if (colon[0] == type || (size_t)(colon[0] - type) >= sizeof(s->event))
                return fail(c, "invalid_argument", "profile type '%.200s' has no name", type);
        snprintf(s->event, sizeof(s->event), "%.*s", (int)(colon[0] - type), type);
        snprintf(s->sample, sizeof(s->sample), "%.*s", (int)(colon[2] - colon[0] - 1),
                 colon[0] + 1);
        snprintf(s->period, sizeof(s->period), "%s", colon[2] + 1);
        if (fp_sel_parse(q->selector, &s->sel, err, sizeof(err)) < 0)
                return fail(c, "invalid_argument", "label selector: %s", err);
        /* thread_name selects samples, not series. */
        for (size_t i = 0; i < s->sel.n; i++) {
                struct fp_sel_matcher *m = &s->sel.m[i];
                if (strcmp(m->name, "thread_name") != 0)
                        continue;
                if (m->op != FP_SEL_EQ || s->thread)
                        return fail(c, "invalid_argument",
                                    "thread_name selects samples with one = matcher only");
                s->thread_copy = m->value;
                s->thread = s->thread_copy;
                memmove(m, m + 1, (s->sel.n - i - 1) * sizeof(*m));
                s->sel.n--;
                i--;
        }
        if ((r = time_range(c, q, &s->base)) < 0)
                return r;
        s->base.event = s->event;
        s->base.host = fp_sel_equal(&s->sel, "host");
        s->base.process = fp_sel_equal(&s->sel, "process");
        s->base.container = fp_sel_equal(&s->sel, "container");
        const char *pid = fp_sel_equal(&s->sel, "pid");
        if (pid) {
                uint64_t n;
                if (fp_parse_uint(pid, 1, INT32_MAX, &n) < 0)
                        return 0; /* matches no process: nothing selected */
                s->base.pid = (pid_t)n;
        }
        s->group_by = group_by;
        s->n_group_by = n_group_by;
        s->base.no_totals = true; /* which series, not their sums */
        r = fp_backend_list_series(c->s->store, &s->base, on_select, s);
        if (r == -E2BIG)
                return fail(c, "resource_exhausted", "the selection holds more than %d series",
                            MAX_TARGETS);
        if (r < 0)
                return store_fail(c, r);
        if (s->listed)
                return 0;
        /* Nothing in range: a type that exists elsewhere in time is an empty answer. */
        struct fp_store_filter any = {.event = s->event, .no_totals = true};
        size_t n = s->n;
        r = fp_backend_list_series(c->s->store, &any, on_select, s);
        if (r < 0)
                return store_fail(c, r);
        for (size_t i = n; i < s->n; i++) {
                free(s->t[i].host);
                free(s->t[i].service);
                free(s->t[i].container);
                free(s->t[i].comm);
                free(s->t[i].group);
        }
        s->n = n;
        if (!s->listed)
                return fail(c, "invalid_argument",
                            s->other_units ? "profile type '%.200s': its event has other types"
                                           : "unknown profile type '%.200s'",
                            type);
        s->listed = 0;
        return 0;
}

/* The store filter of one selected series. */
static void target_filter(const struct selection *s, const struct target *t,
                          struct fp_store_filter *f)
{
        *f = (struct fp_store_filter){
            .host = t->host,
            .pid = t->pid,
            .starttime = t->starttime,
            .event = s->event,
            .thread_name = s->thread,
            .since_ns = s->base.since_ns,
            .until_ns = s->base.until_ns,
        };
        if (!t->pid) {
                /* A host tier's series: its service, container and process name. */
                f->tier = FP_STORE_TIER_HOST;
                f->service = t->service;
                f->container = t->container;
                f->process = t->comm;
        }
}

/* The merged profile of s into *ret (NULL: nothing selected). Answers errors itself. */
static int merged(struct call *c, struct selection *s, struct fp_pprof **ret)
{
        struct fp_pprof *p = fp_pprof_new();
        int r = 0;

        *ret = NULL;
        if (!p)
                return fail(c, "resource_exhausted", "out of memory");
        if (s->n && s->n == s->listed && !s->other_units) {
                struct fp_store_filter f = s->base;
                f.thread_name = s->thread;
                r = fp_backend_query_pprof(c->s->store, &f, p);
        } else {
                for (size_t i = 0; i < s->n && r >= 0; i++) {
                        struct fp_store_filter f;
                        target_filter(s, &s->t[i], &f);
                        r = fp_backend_query_pprof(c->s->store, &f, p);
                }
        }
        if (r < 0) {
                fp_pprof_free(p);
                return r == -EINVAL
                           ? fail(c, "invalid_argument", "the selected series' sample types differ")
                           : store_fail(c, r);
        }
        if (!fp_pprof_n_sample_types(p)) {
                fp_pprof_free(p);
                return 0;
        }
        fp_dbgi_name(
            c->s->names, &p,
            fp_backend_deadline(c->s->store)); /* best effort: unnamed frames keep their offsets */
        *ret = p;
        return 0;
}

/* ---- flame graphs ---- */

struct levels {
        struct pbout *fg; /* the FlameGraph (Diff) being written */
        struct pbout level;
        size_t at; /* the level being written */
        bool diff;
        int64_t end[2]; /* where the last bar of this level ended, per set */
        int64_t max_self;
        uint32_t root_name;
};

static void flush_level(struct levels *lv)
{
        struct pbout values = {0};

        out_len(&values, 1, lv->level.buf, lv->level.len);
        out_msg(lv->fg, 2, &values);
        free(values.buf);
        lv->level.len = 0;
}

static int on_bar(void *ctx, const struct fp_flame_bar *b)
{
        struct levels *lv = ctx;

        if (b->level == 0)
                lv->root_name = b->name;
        if (b->level != lv->at) {
                flush_level(lv);
                lv->at = b->level;
                lv->end[0] = lv->end[1] = 0;
        }
        for (int s = 0; s < (lv->diff ? 2 : 1); s++) {
                /* x as the offset from the end of the bar before it on this level. */
                out_varint(&lv->level, (uint64_t)(b->x[s] - lv->end[s]));
                out_varint(&lv->level, (uint64_t)b->total[s]);
                out_varint(&lv->level, (uint64_t)b->self[s]);
                lv->end[s] = b->x[s] + b->total[s];
                if (b->self[s] > lv->max_self)
                        lv->max_self = b->self[s];
        }
        out_varint(&lv->level, b->name);
        return lv->level.oom ? -ENOMEM : 0;
}

/*
 * p (and base, for a Diff: p the left) as a FlameGraph (FlameGraphDiff)
 * into field 1 of the answer, at most max_nodes nodes.
 */
static int write_flame(struct call *c, const struct fp_pprof *p, int vi,
                       const struct fp_pprof *right, int right_vi, int64_t max_nodes)
{
        struct fp_flame *f = NULL;
        struct pbout fg = {0};
        struct levels lv = {.fg = &fg, .diff = right != NULL};
        int r = fp_flame_new(&f);

        if (r == 0 && p)
                r = fp_flame_add(f, p, (size_t)vi, 0);
        if (r == 0 && right)
                r = fp_flame_add(f, right, (size_t)right_vi, 1);
        if (r == 0)
                r = fp_flame_prune(f, (size_t)max_nodes);
        if (r == 0)
                r = fp_flame_levels(f, on_bar, &lv);
        if (r == 0) {
                flush_level(&lv);
                for (size_t i = 0; i < fp_flame_n_names(f); i++)
                        out_str(&fg, 1, i == lv.root_name ? "total" : fp_flame_name(f, i));
                int64_t left = fp_flame_total(f, 0), rt = fp_flame_total(f, 1);
                out_uint(&fg, 3, (uint64_t)(left + (right ? rt : 0)));
                out_uint(&fg, 4, (uint64_t)lv.max_self);
                if (right) {
                        out_uint(&fg, 5, (uint64_t)left);
                        out_uint(&fg, 6, (uint64_t)rt);
                }
                out_msg(&c->out, 1, &fg);
                if (fg.oom || c->out.oom)
                        r = -ENOMEM;
        }
        free(lv.level.buf);
        free(fg.buf);
        fp_flame_free(f);
        return r < 0
                   ? fail(c, "resource_exhausted", "cannot build the flame graph: %s", strerror(-r))
                   : 0;
}

static int max_nodes_of(struct call *c, const struct query *q, int64_t *ret)
{
        *ret = q->max_nodes ? q->max_nodes : DEFAULT_MAX_NODES;
        if (*ret < 2 || *ret > LIMIT_MAX_NODES)
                return fail(c, "invalid_argument", "max_nodes must be 2 to %d", LIMIT_MAX_NODES);
        if (q->format == 2)
                return fail(c, "unimplemented",
                            "the tree format is not served: ask for the flame graph");
        return 0;
}

static int run_stacks(struct call *c)
{
        struct selection s = {0};
        struct fp_pprof *p = NULL;
        int64_t max_nodes;
        int r = max_nodes_of(c, &c->q, &max_nodes);

        if (r == 0 && (r = select_targets(c, &c->q, NULL, 0, &s)) == 0) {
                if ((r = merged(c, &s, &p)) == 0)
                        r = write_flame(c, p, s.vi, NULL, 0, max_nodes);
        }
        selection_free(&s);
        fp_pprof_free(p);
        return r;
}

static int run_diff(struct call *c)
{
        struct selection l = {0}, rs = {0};
        struct fp_pprof *lp = NULL, *rp = NULL;
        int64_t max_nodes, unused;
        int r = max_nodes_of(c, &c->left, &max_nodes);

        if (r == 0)
                r = max_nodes_of(c, &c->right, &unused);
        if (r == 0 && (!c->left.type || !c->right.type))
                r = fail(c, "invalid_argument", "a Diff needs left and right");
        if (r == 0)
                r = select_targets(c, &c->left, NULL, 0, &l);
        if (r == 0)
                r = select_targets(c, &c->right, NULL, 0, &rs);
        if (r == 0)
                r = merged(c, &l, &lp);
        if (r == 0)
                r = merged(c, &rs, &rp);
        if (r == 0) {
                /* Both sides drawn even when one is empty: an empty profile of the same shape. */
                struct fp_pprof *empty = fp_pprof_new();
                if (!empty)
                        r = fail(c, "resource_exhausted", "out of memory");
                else
                        r = write_flame(c, lp, l.vi, rp ? rp : empty, rs.vi, max_nodes);
                fp_pprof_free(empty);
        }
        selection_free(&l);
        selection_free(&rs);
        fp_pprof_free(lp);
        fp_pprof_free(rp);
        return r;
}

static int run_profile(struct call *c)
{
        struct selection s = {0};
        struct fp_pprof *p = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        int r = select_targets(c, &c->q, NULL, 0, &s);

        if (r == 0 && (r = merged(c, &s, &p)) == 0 && p) {
                if (fp_pprof_encode(p, 0, &buf, &len) < 0)
                        r = fail(c, "resource_exhausted", "cannot encode the profile");
                else
                        out_bytes(&c->out, buf, len);
        }
        selection_free(&s);
        fp_pprof_free(p);
        free(buf);
        return r;
}

/* ---- SelectSeries ---- */

struct group {
        char *key; /* the group_by values, \x1f-joined */
        double *sum;
        uint32_t *n;
        double total;
};

struct points {
        struct selection *s;
        int64_t start_ms, step_ms;
        size_t n_points;
        struct group *g;
        size_t n_groups, cap_groups;
        struct group *cur;    /* the point's group */
        size_t *target_group; /* target (index into s->t) -> index into g */
};

/* ---- the selection's time lines ---- */

/* A point of a time line, and the process it is of (index into the selection's targets). */
typedef int (*target_point_fn)(void *ud, size_t target, const struct fp_store_point *pt);

struct timeline_walk {
        struct strset keys; /* the selected processes' keys */
        size_t *target;     /* position in keys -> its first target */
        target_point_fn fn;
        void *ud;
};

/*
 * A process's key: its host, pid and start (a host tier's or a pushed
 * series' pid is 0, its start a hash of its service, executable, labels
 * and container: the store's targets are unique by the three).
 */
static void process_key(char *buf, size_t len, const char *host, pid_t pid, uint64_t starttime)
{
        snprintf(buf, len, "%s\x1f%d\x1f%" PRIu64, host, (int)pid, starttime);
}

static int on_walk_point(void *ud, const struct fp_store_point *pt)
{
        struct timeline_walk *w = ud;
        char key[1024];

        process_key(key, sizeof(key), pt->host ? pt->host : "", pt->pid, pt->starttime);
        size_t at = strset_find(&w->keys, key);
        return at ? w->fn(w->ud, w->target[at - 1], pt) : 0; /* not selected */
}

/*
 * Calls fn with each point of the time lines of s's processes: one read
 * of every series under s->base, each point saying its process
 * (fp_store_filter.by_series), where a read per process costs a read
 * each (on ClickHouse 20 ms: 2.6 s for 121 processes). 0, or the store's
 * -errno, or -ENOMEM.
 */
static int selection_timeline(struct fp_backend *store, const struct selection *s,
                              target_point_fn fn, void *ud)
{
        struct timeline_walk w = {.fn = fn, .ud = ud};
        int r = 0;

        if (!(w.target = fp_budget_calloc(s->n ? s->n : 1, sizeof(*w.target))))
                return -ENOMEM;
        for (size_t i = 0; i < s->n && r == 0; i++) {
                char key[1024];
                const struct target *t = &s->t[i];
                size_t known = w.keys.n;
                process_key(key, sizeof(key), t->host, t->pid, t->starttime);
                r = strset_add(&w.keys, key) < 0 ? -ENOMEM : 0;
                if (r == 0 && w.keys.n > known)
                        w.target[w.keys.n - 1] = i; /* a key met twice: the first's */
        }
        if (r == 0 && s->n) {
                struct fp_store_filter f = s->base;
                f.thread_name = NULL; /* time lines sum whole series */
                f.by_series = true;
                r = fp_backend_timeline(store, &f, on_walk_point, &w);
        }
        strset_free(&w.keys);
        free(w.target);
        return r < 0 ? r : 0;
}

/* ---- SelectSeries' points ---- */

static int on_point(void *ud, size_t target, const struct fp_store_point *pt)
{
        struct points *ps = ud;
        int64_t t_ms = pt->start_ns / MS_NS;

        ps->cur = &ps->g[ps->target_group[target]];
        if (t_ms < ps->start_ms)
                t_ms = ps->start_ms;
        size_t k = (size_t)((t_ms - ps->start_ms) / ps->step_ms);
        if (k >= ps->n_points)
                k = ps->n_points - 1;
        double v = (double)(ps->s->vi ? pt->value : pt->count);
        ps->cur->sum[k] += v;
        ps->cur->n[k]++;
        ps->cur->total += v;
        return 0;
}

static struct group *group_for(struct points *ps, const char *key)
{
        for (size_t i = 0; i < ps->n_groups; i++)
                if (strcmp(ps->g[i].key, key) == 0)
                        return &ps->g[i];
        if ((ps->n_groups + 1) * ps->n_points > MAX_CELLS)
                return NULL;
        if (fp_grow((void **)&ps->g, &ps->cap_groups, ps->n_groups + 1, sizeof(*ps->g)) < 0)
                return NULL;
        struct group *g = &ps->g[ps->n_groups];
        *g = (struct group){.key = fp_budget_strdup(key),
                            .sum = fp_budget_calloc(ps->n_points, sizeof(double)),
                            .n = fp_budget_calloc(ps->n_points, sizeof(uint32_t))};
        if (!g->key || !g->sum || !g->n) {
                free(g->key);
                free(g->sum);
                free(g->n);
                return NULL;
        }
        ps->n_groups++;
        return g;
}

static int cmp_group(const void *a, const void *b)
{
        const struct group *x = a, *y = b;
        if (x->total != y->total)
                return x->total < y->total ? 1 : -1;
        return strcmp(x->key, y->key);
}

static int run_select_series(struct call *c)
{
        struct query *q = &c->q;
        struct selection s = {0};
        struct points ps = {.s = &s};
        int r;

        if (!q->start_ms || !q->end_ms)
                return fail(c, "invalid_argument", "SelectSeries needs start and end");
        if (q->step < 0 || q->step != q->step)
                return fail(c, "invalid_argument", "step must be seconds, not negative");
        if (q->limit < 0)
                return fail(c, "invalid_argument", "limit must not be negative");
        if (q->aggregation > 1)
                return fail(c, "invalid_argument", "unknown aggregation %" PRIu64, q->aggregation);
        ps.start_ms = q->start_ms;
        ps.step_ms = q->step > 0 ? (int64_t)(q->step * 1000) : 0;
        if (ps.step_ms <= 0)
                ps.step_ms =
                    (q->end_ms - q->start_ms) / 300 > 1000 ? (q->end_ms - q->start_ms) / 300 : 1000;
        if ((q->end_ms - q->start_ms) / ps.step_ms >= MAX_POINTS)
                return fail(c, "invalid_argument",
                            "more than %d points of %" PRId64 " ms: take a longer step", MAX_POINTS,
                            ps.step_ms);
        ps.n_points = (size_t)((q->end_ms - q->start_ms) / ps.step_ms) + 1;
        if ((r = select_targets(c, q, q->names, q->n_names, &s)) < 0) {
                selection_free(&s);
                return r;
        }
        /* Each process's group, then every point to its process's. */
        if (!(ps.target_group = fp_budget_calloc(s.n ? s.n : 1, sizeof(*ps.target_group))))
                r = fail(c, "resource_exhausted", "out of memory");
        for (size_t i = 0; i < s.n && r >= 0; i++) {
                struct group *g = group_for(&ps, s.t[i].group);
                if (!g)
                        r = fail(c, "resource_exhausted",
                                 "too many groups of points: take a longer step or fewer groups");
                else
                        ps.target_group[i] = (size_t)(g - ps.g);
        }
        if (r >= 0 && (r = selection_timeline(c->s->store, &s, on_point, &ps)) < 0)
                r = r == -ENOMEM ? fail(c, "resource_exhausted", "out of memory")
                                 : store_fail(c, r);
        if (r >= 0) {
                if (ps.n_groups)
                        qsort(ps.g, ps.n_groups, sizeof(*ps.g), cmp_group);
                size_t n =
                    q->limit && (size_t)q->limit < ps.n_groups ? (size_t)q->limit : ps.n_groups;
                for (size_t i = 0; i < n; i++) {
                        struct pbout se = {0}, m = {0};
                        const char *v = ps.g[i].key;
                        for (size_t k = 0; k < s.n_group_by; k++) {
                                size_t len = strcspn(v, "\x1f");
                                out_str(&m, 1, s.group_by[k]);
                                out_len(&m, 2, v, len);
                                out_msg(&se, 1, &m);
                                v += len + (v[len] ? 1 : 0);
                        }
                        for (size_t k = 0; k < ps.n_points; k++) {
                                if (!ps.g[i].n[k])
                                        continue;
                                double val = ps.g[i].sum[k];
                                if (q->aggregation == 1)
                                        val /= ps.g[i].n[k];
                                uint64_t bits;
                                memcpy(&bits, &val, sizeof(bits));
                                out_fixed64(&m, 1, bits);
                                out_uint(&m, 2, (uint64_t)(ps.start_ms + (int64_t)k * ps.step_ms));
                                out_msg(&se, 2, &m);
                        }
                        out_msg(&c->out, 1, &se);
                        free(se.buf);
                        free(m.buf);
                }
        }
        for (size_t i = 0; i < ps.n_groups; i++) {
                free(ps.g[i].key);
                free(ps.g[i].sum);
                free(ps.g[i].n);
        }
        free(ps.g);
        free(ps.target_group);
        selection_free(&s);
        return r < 0 ? r : 0;
}

/* ---- LabelValues of thread_name: the samples' own labels ---- */

static int thread_names(struct call *c, struct walk *w)
{
        struct fp_store_filter f = {0};
        int r;

        if ((r = time_range(c, &c->q, &f)) < 0)
                return r;
        /* Each event's series that match, merged, and their samples' thread names read. */
        struct walk ev = {.sels = w->sels, .n_sels = w->n_sels, .name = "event"};
        f.no_totals = true;
        r = fp_backend_list_series(c->s->store, &f, on_values, &ev);
        for (size_t e = 0; r >= 0 && e < ev.set.n; e++) {
                struct query q = {.start_ms = c->q.start_ms, .end_ms = c->q.end_ms};
                struct selection s = {0};
                struct fp_pprof *p = NULL;
                char type[700];
                /* Any of the event's series' types selects them all: find one. */
                struct fp_store_filter one = f;
                one.event = ev.set.v[e];
                struct walk tw = {0};
                struct pbout unused = {0};
                tw.out = &unused;
                r = fp_backend_list_series(c->s->store, &one, on_types, &tw);
                free(unused.buf);
                if (r < 0 || !tw.set.n) {
                        strset_free(&tw.set);
                        continue;
                }
                snprintf(type, sizeof(type), "%s", tw.set.v[0]);
                strset_free(&tw.set);
                q.type = type;
                /* The matchers are alternatives: each one's selection. */
                size_t n_sel = c->q.n_list ? c->q.n_list : 1;
                for (size_t k = 0; k < n_sel && r >= 0; k++) {
                        q.selector = c->q.n_list ? c->q.list[k] : NULL;
                        r = select_targets(c, &q, NULL, 0, &s);
                        if (r == 0)
                                r = merged(c, &s, &p);
                        selection_free(&s);
                        for (size_t i = 0; r == 0 && p && i < fp_pprof_n_samples(p); i++) {
                                struct fp_pprof_sample_view v;
                                if (fp_pprof_sample_get(p, i, &v) < 0)
                                        continue;
                                for (size_t j = 0; j < v.n_labels && r >= 0; j++) {
                                        struct fp_pprof_label lab;
                                        if (fp_pprof_sample_label(p, i, j, &lab) == 0 && lab.str &&
                                            strcmp(lab.key, "thread_name") == 0 && *lab.str)
                                                r = strset_add(&w->set, lab.str);
                                }
                        }
                        fp_pprof_free(p);
                        p = NULL;
                }
        }
        strset_free(&ev.set);
        if (r < 0 && !c->answered)
                r = store_fail(c, r);
        return r;
}

/* ---- settings.v1.SettingsService/Get ---- */

static int run_settings(struct call *c)
{
        (void)c; /* no settings are kept: an empty list */
        return 0;
}

/* ---- /pyroscope/render: the flame graph as Pyroscope's older API answers it ---- */

/* A bar as flamebearer JSON: [x offset, total, self, name] (rows of a level). */
struct bearer {
        struct evbuffer *b;
        size_t at;
        bool first_level, first_bar;
        int64_t end, max_self;
};

static int on_bearer_bar(void *ctx, const struct fp_flame_bar *bar)
{
        struct bearer *br = ctx;

        if (br->first_level || bar->level != br->at) {
                evbuffer_add_printf(br->b, "%s[", br->first_level ? "" : "],");
                br->first_level = false;
                br->first_bar = true;
                br->at = bar->level;
                br->end = 0;
        }
        evbuffer_add_printf(br->b, "%s%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRIu32,
                            br->first_bar ? "" : ",", bar->x[0] - br->end, bar->total[0],
                            bar->self[0], bar->name);
        br->first_bar = false;
        br->end = bar->x[0] + bar->total[0];
        if (bar->self[0] > br->max_self)
                br->max_self = bar->self[0];
        return 0;
}

/* A render time: now, now-1h, Unix seconds or milliseconds, or the collector's own forms. */
static int render_time(const char *v, int64_t now_ns, int64_t *ret_ms)
{
        int64_t ns;
        size_t digits = strspn(v, "0123456789");

        if (strncmp(v, "now-", 4) == 0)
                v += 3; /* "-1h": relative to now */
        if (digits >= 13 && !v[digits]) {
                *ret_ms = strtoll(v, NULL, 10);
                return 0;
        }
        if (fp_coll_parse_time(v, now_ns, &ns) < 0)
                return -EINVAL;
        *ret_ms = ns / MS_NS;
        return 0;
}

/* The timeline's points: samples per step (the series' count or value, as the type says). */
struct render_line {
        int64_t start_ms, step_ms;
        size_t n;
        double *v;
        int vi;
};

static int on_render_point(void *ud, size_t target, const struct fp_store_point *pt)
{
        struct render_line *l = ud;
        (void)target; /* one line of them all */
        int64_t k = (pt->start_ns / MS_NS - l->start_ms) / l->step_ms;

        if (k < 0)
                k = 0;
        if ((size_t)k >= l->n)
                k = (int64_t)l->n - 1;
        l->v[k] += (double)(l->vi ? pt->value : pt->count);
        return 0;
}

void fp_coll_pyro_render(struct fp_coll_server *s, struct evhttp_request *req)
{
        const struct evhttp_uri *uri = fp_coll_req_uri(req);
        const char *qs = uri ? evhttp_uri_get_query(uri) : NULL;
        int64_t now_ns = (int64_t)fp_now_ns(CLOCK_REALTIME), max_nodes = DEFAULT_MAX_NODES;
        struct call c = {.s = s, .req = req, .json = true};
        struct evkeyvalq q;
        struct evkeyval *kv;
        const char *query = NULL, *from = "now-1h", *until = "now";
        struct selection sel = {0};
        struct fp_pprof *p = NULL;
        struct render_line line = {0};
        int r = 0;

        TAILQ_INIT(&q);
        if (evhttp_parse_query_str(qs ? qs : "", &q) < 0) {
                fp_coll_reply_error(req, 400, "the query string is malformed");
                return;
        }
        TAILQ_FOREACH(kv, &q, next)
        {
                if (strcmp(kv->key, "query") == 0)
                        query = kv->value;
                else if (strcmp(kv->key, "from") == 0)
                        from = kv->value;
                else if (strcmp(kv->key, "until") == 0)
                        until = kv->value;
                else if (strcmp(kv->key, "max-nodes") == 0 || strcmp(kv->key, "maxNodes") == 0) {
                        uint64_t n;
                        if (fp_parse_uint(kv->value, 2, LIMIT_MAX_NODES, &n) < 0) {
                                r = -EINVAL;
                                fp_coll_reply_error(req, 400, "parameter '%s' must be 2 to %d",
                                                    kv->key, LIMIT_MAX_NODES);
                                break;
                        }
                        max_nodes = (int64_t)n;
                } else if (strcmp(kv->key, "format") == 0) {
                        if (strcmp(kv->value, "json") != 0) {
                                r = -EINVAL;
                                fp_coll_reply_error(req, 400, "only format=json is served");
                                break;
                        }
                } else if (strcmp(kv->key, "groupBy") != 0 && strcmp(kv->key, "aggregation") != 0) {
                        r = -EINVAL;
                        fp_coll_reply_error(req, 400,
                                            "unknown parameter '%.64s' (known: query, from, until, "
                                            "max-nodes, format, groupBy, aggregation)",
                                            kv->key);
                        break;
                }
        }
        if (r == 0 && !query) {
                r = -EINVAL;
                fp_coll_reply_error(req, 400, "parameter 'query' (TYPE{SELECTOR}) is missing");
        }
        if (r == 0 && (render_time(from, now_ns, &c.q.start_ms) < 0 ||
                       render_time(until, now_ns, &c.q.end_ms) < 0 || c.q.end_ms <= c.q.start_ms)) {
                r = -EINVAL;
                fp_coll_reply_error(req, 400,
                                    "'from' and 'until' must be times (now-1h, Unix seconds or "
                                    "milliseconds), 'from' first");
        }
        if (r == 0) {
                const char *brace = strchr(query, '{');
                size_t tl = brace ? (size_t)(brace - query) : strlen(query);
                c.q.type = strndup(query, tl);
                c.q.selector = fp_budget_strdup(brace ? brace : "");
                if (!c.q.type || !c.q.selector) {
                        r = -ENOMEM;
                        fp_coll_reply_error(req, 503, "out of memory");
                }
        }
        /* Selection errors come as Connect's JSON, with their status. */
        if (r == 0)
                r = select_targets(&c, &c.q, NULL, 0, &sel);
        if (r == 0)
                r = merged(&c, &sel, &p);
        struct fp_flame *f = NULL;
        struct evbuffer *b = evbuffer_new();
        if (r == 0 &&
            (!b || fp_flame_new(&f) < 0 || (p && fp_flame_add(f, p, (size_t)sel.vi, 0) < 0) ||
             fp_flame_prune(f, (size_t)max_nodes) < 0)) {
                r = -ENOMEM;
                fp_coll_reply_error(req, 503, "out of memory");
        }
        if (r == 0) {
                /* The timeline: 10 s steps, wider over long ranges (at most 1000 points). */
                line.start_ms = c.q.start_ms;
                line.step_ms = 10000;
                while ((c.q.end_ms - c.q.start_ms) / line.step_ms >= 1000)
                        line.step_ms *= 2;
                line.n = (size_t)((c.q.end_ms - c.q.start_ms) / line.step_ms) + 1;
                line.vi = sel.vi;
                line.v = fp_budget_calloc(line.n, sizeof(*line.v));
                if (line.v && (r = selection_timeline(s->store, &sel, on_render_point, &line)) < 0)
                        r = store_fail(&c, r);
                if (!line.v) {
                        r = -ENOMEM;
                        fp_coll_reply_error(req, 503, "out of memory");
                }
        }
        if (r == 0) {
                struct bearer br = {.b = b, .first_level = true};
                const char *unit = "";
                if (p)
                        fp_pprof_sample_type(p, (size_t)sel.vi, &unit);
                evbuffer_add_printf(b, "{\"version\":1,\"flamebearer\":{\"names\":[");
                for (size_t i = 0; i < fp_flame_n_names(f); i++) {
                        evbuffer_add_printf(b, "%s", i ? "," : "");
                        fp_escape_json_evb(b, strcmp(fp_flame_name(f, i), "all") == 0
                                                  ? "total"
                                                  : fp_flame_name(f, i));
                }
                evbuffer_add_printf(b, "],\"levels\":[");
                fp_flame_levels(f, on_bearer_bar, &br);
                evbuffer_add_printf(b, "%s],\"numTicks\":%" PRId64 ",\"maxSelf\":%" PRId64 "},",
                                    br.first_level ? "" : "]", fp_flame_total(f, 0), br.max_self);
                evbuffer_add_printf(b,
                                    "\"metadata\":{\"format\":\"single\",\"spyName\":\"fleetprof\","
                                    "\"sampleRate\":100,\"units\":");
                fp_escape_json_evb(b, strcmp(unit, "count") == 0 ? "samples" : unit);
                evbuffer_add_printf(b, ",\"name\":");
                fp_escape_json_evb(b, query);
                evbuffer_add_printf(b, "},\"timeline\":{\"startTime\":%" PRId64 ",\"samples\":[",
                                    c.q.start_ms / 1000);
                for (size_t i = 0; i < line.n; i++)
                        evbuffer_add_printf(b, "%s%.0f", i ? "," : "", line.v[i]);
                evbuffer_add_printf(b, "],\"durationDelta\":%" PRId64 "}}\n", line.step_ms / 1000);
                fp_coll_reply(req, 200, "application/json", b);
        }
        free(line.v);
        if (b)
                evbuffer_free(b);
        fp_flame_free(f);
        fp_pprof_free(p);
        selection_free(&sel);
        query_free(&c.q);
        evhttp_clear_headers(&q);
}

/* ---- dispatch ---- */

static const struct method methods[] = {
    {"/querier.v1.QuerierService/ProfileTypes",
     &j_types_req,
     &j_types,
     {S_NONE, S_START, S_END},
     run_profile_types},
    {"/querier.v1.QuerierService/LabelNames",
     &j_names_req,
     &j_names,
     {S_NONE, S_MATCHERS, S_START, S_END},
     run_label_names},
    {"/querier.v1.QuerierService/LabelValues",
     &j_values_req,
     &j_names,
     {S_NONE, S_NAME, S_MATCHERS, S_START, S_END},
     run_label_values},
    {"/querier.v1.QuerierService/Series",
     &j_series_req,
     &j_series,
     {S_NONE, S_MATCHERS, S_NAMES, S_START, S_END},
     run_series},
    {"/querier.v1.QuerierService/SelectMergeStacktraces",
     &j_stacks_req,
     &j_stacks,
     {S_NONE, S_TYPE, S_SELECTOR, S_START, S_END, S_MAX_NODES, S_FORMAT},
     run_stacks},
    {"/querier.v1.QuerierService/SelectMergeProfile",
     &j_profile_req,
     &j_profile,
     {S_NONE, S_TYPE, S_SELECTOR, S_START, S_END, S_MAX_NODES},
     run_profile},
    {"/querier.v1.QuerierService/SelectSeries",
     &j_sseries_req,
     &j_sseries,
     {S_NONE, S_TYPE, S_SELECTOR, S_START, S_END, S_NAMES, S_STEP, S_AGGREGATION, S_NONE, S_LIMIT},
     run_select_series},
    {"/querier.v1.QuerierService/Diff",
     &j_diff_req,
     &j_stacks,
     {S_NONE, S_LEFT, S_RIGHT},
     run_diff},
    {"/settings.v1.SettingsService/Get", &j_empty, &j_settings, {S_NONE}, run_settings},
};

/*
 * The request's body (raw_len bytes at raw, the call's method's message in
 * binary or, c->json, in JSON, translated into *ret_bin, the caller's to
 * free) into c->q and the Diff's halves: 0, or < 0 with the call failed.
 */
static int read_request(struct call *c, const uint8_t *raw, size_t raw_len, uint8_t **ret_bin)
{
        char err[256];

        if (c->json) {
                int r = fp_pbjson_read(raw, raw_len, c->m->req_json, ret_bin, &raw_len, err,
                                       sizeof(err));
                if (r < 0)
                        return fail(c, r == -ENOMEM ? "resource_exhausted" : "invalid_argument",
                                    "%s", err);
                raw = *ret_bin;
        }
        return decode(c, c->m, (struct pb){raw, raw + raw_len}, &c->q, 0);
}

static const struct method *method_at(const char *path)
{
        for (size_t i = 0; i < N(methods); i++)
                if (path && strcmp(path, methods[i].path) == 0)
                        return &methods[i];
        return NULL;
}

const char *fp_coll_querier_method(size_t i)
{
        return i < N(methods) ? methods[i].path : NULL;
}

int fp_coll_querier_decode(const char *path, bool json, const uint8_t *body, size_t len, char *err,
                           size_t err_len)
{
        struct call c = {.m = method_at(path), .json = json};
        uint8_t *json_bin = NULL;
        int r;

        if (!c.m) {
                snprintf(err, err_len, "unimplemented: no such method: %.200s", path);
                return -ENOENT;
        }
        r = read_request(&c, body, len, &json_bin);
        if (r < 0)
                snprintf(err, err_len, "%s", c.err);
        query_free(&c.q);
        query_free(&c.left);
        query_free(&c.right);
        free(json_bin);
        return r;
}

void fp_coll_querier(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct evkeyvalq *h = fp_coll_req_headers(req);
        const struct evhttp_uri *uri = fp_coll_req_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : "";
        const char *ct = evhttp_find_header(h, "Content-Type");
        const char *ver = evhttp_find_header(h, "Connect-Protocol-Version");
        const char *enc = evhttp_find_header(h, "Content-Encoding");
        struct evbuffer *in = fp_coll_req_body(req);
        struct call c = {.s = s, .req = req};
        uint8_t *body = NULL, *raw = NULL, *json_bin = NULL;
        size_t len = evbuffer_get_length(in), raw_len = 0;
        char err[256];
        int r;

        c.m = method_at(path);
        if (!c.m)
                return fp_coll_connect_error(req, "unimplemented", "no such method: %.200s", path);
        size_t ct_len = ct ? strcspn(ct, "; ") : 0;
        if (ct && ct_len == 16 && strncmp(ct, "application/json", 16) == 0)
                c.json = true;
        else if (!ct || !((ct_len == 17 && strncmp(ct, "application/proto", 17) == 0) ||
                          (ct_len == 22 && strncmp(ct, "application/x-protobuf", 22) == 0)))
                return fp_coll_connect_reply(req, 415, "invalid_argument",
                                             "Content-Type must be application/proto or "
                                             "application/json (Connect's unary calls)");
        if (ver && strcmp(ver, "1") != 0)
                return fp_coll_connect_error(req, "invalid_argument",
                                             "Connect-Protocol-Version must be 1");
        if (enc && strcmp(enc, "identity") != 0 && strcmp(enc, "gzip") != 0)
                return fp_coll_connect_error(req, "unimplemented",
                                             "Content-Encoding must be gzip or identity");
        if (len > MAX_BODY)
                return fp_coll_connect_error(req, "resource_exhausted",
                                             "the request is larger than %u bytes", MAX_BODY);
        if (!(body = fp_budget_malloc(len + 1)))
                return fp_coll_connect_error(req, "resource_exhausted", "out of memory");
        evbuffer_copyout(in, body, len);
        raw = body;
        raw_len = len;
        if (enc && strcmp(enc, "gzip") == 0) {
                if (fp_pprof_gunzip(body, len, MAX_BODY, &raw, &raw_len, err, sizeof(err)) < 0) {
                        free(body);
                        return fp_coll_connect_error(req, "invalid_argument", "%s", err);
                }
                free(body);
                body = raw;
        }
        r = read_request(&c, raw, raw_len, &json_bin);
        if (r == 0)
                r = c.m->run(&c);
        if (r == 0 && c.out.oom)
                r = fail(&c, "resource_exhausted", "out of memory");
        if (r == 0) {
                struct evbuffer *b = evbuffer_new();
                if (!b) {
                        fp_coll_connect_error(req, "resource_exhausted", "out of memory");
                } else {
                        if (c.json)
                                r = fp_pbjson_write(c.out.buf, c.out.len, c.m->resp_json,
                                                    fp_write_evbuffer, b);
                        else
                                evbuffer_add(b, c.out.buf ? c.out.buf : (uint8_t *)"", c.out.len);
                        if (r < 0)
                                fp_coll_connect_error(req, "internal", "cannot write the answer");
                        else
                                fp_coll_reply(req, 200,
                                              c.json ? "application/json" : "application/proto", b);
                        evbuffer_free(b);
                }
        } else if (!c.answered) {
                fp_coll_connect_error(req, "internal", "the call failed: %s", strerror(-r));
        }
        query_free(&c.q);
        query_free(&c.left);
        query_free(&c.right);
        free(c.out.buf);
        free(body);
        free(json_bin);
}
