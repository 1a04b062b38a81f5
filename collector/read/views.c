/* SPDX-License-Identifier: MIT */
/*
 * The JSON the web page draws from (routes in server.h): a selection's
 * flame graph, the diff of two selections, and a selection's time line.
 * Each reads the store on the loop thread like /api/v1/profile, with the
 * same filters (filter.h), plus parameters of its own:
 *
 *   GET /api/v1/flamegraph?FILTERS[&value=samples][&max_nodes=N]
 *     {"type","unit","total","nodes","pruned","drops":{reason:n},"names":[line],
 *      "profiler":[{"host","agent_cpu_ns","covered_ns","host_cpus",
 *                   "agent_rss_bytes","cpu_share"}],
 *      "tree":{"name","self","total","children":[...]}}
 *     The merged profile as a call tree (pprof.h, fp_flame_*): the root's
 *     total is the merged profile's total of the value drawn (its second
 *     sample type, e.g. cpu nanoseconds; value=samples: the sample count).
 *     At most max_nodes nodes (default 50000): lighter subtrees fold into
 *     "(other)" nodes, so every total still adds up. "profiler" is what
 *     profiling cost each host of the selection over its time range, as
 *     its agent measured it: its CPU time and the share of the host's CPU
 *     (cpu_share, 0 to 1), its largest resident memory. "names" says which
 *     builds the collector named and from what (an upload, a server).
 *   GET /api/v1/diff?FILTERS&base_FILTERS...[&value=samples][&max_nodes=N]
 *     The same tree with base_self and base_total: the comparison is
 *     selected by FILTERS, the baseline by the same filters overridden by
 *     every base_ one (base_from=-2h&base_to=-1h: another time range, which
 *     replaces the comparison's whole range; base_host=web2: another
 *     host). Plus "base_total".
 *   GET /api/v1/timeline?FILTERS[&points=N]
 *     {"event","step_ns","from_ns","to_ns","points":[[t_ns, samples, value]...]}:
 *     at most N points (default 300), each the sums of the buckets that
 *     start in its step.
 */
#include "debuginfod.h"
#include "views.h"
#include "filter.h"
#include "http.h"
#include "pprof.h"
#include "backend.h"
#include "util.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_NODES 50000
#define LIMIT_MAX_NODES   1000000
#define DEFAULT_POINTS    300
#define LIMIT_POINTS      5000

static const char *const view_keys[] = {"value", "max_nodes", "points", NULL};

/* The view's own parameters. */
struct view_params {
        bool samples; /* value=samples */
        size_t max_nodes;
        size_t points;
};

/* Reads value, max_nodes and points; answers 400 itself on a bad one. */
static int view_params(struct evhttp_request *req, struct view_params *ret)
{
        const struct evhttp_uri *uri = fp_coll_req_uri(req);
        struct evkeyvalq q;
        struct evkeyval *kv;
        int r = 0;

        *ret = (struct view_params){.max_nodes = DEFAULT_MAX_NODES, .points = DEFAULT_POINTS};
        TAILQ_INIT(&q);
        if (evhttp_parse_query_str(
                uri && evhttp_uri_get_query(uri) ? evhttp_uri_get_query(uri) : "", &q) < 0) {
                fp_coll_reply_error(req, 400, "the query string is malformed");
                return -EINVAL;
        }
        TAILQ_FOREACH(kv, &q, next)
        {
                uint64_t n;
                if (strcmp(kv->key, "value") == 0) {
                        if (strcmp(kv->value, "samples") != 0 && strcmp(kv->value, "value") != 0) {
                                fp_coll_reply_error(req, 400,
                                                    "parameter 'value' must be samples or value");
                                r = -EINVAL;
                                break;
                        }
                        ret->samples = strcmp(kv->value, "samples") == 0;
                } else if (strcmp(kv->key, "max_nodes") == 0 || strcmp(kv->key, "points") == 0) {
                        bool nodes = kv->key[0] == 'm';
                        unsigned long long lo = nodes ? 2 : 1,
                                           hi = nodes ? LIMIT_MAX_NODES : LIMIT_POINTS;
                        if (fp_parse_uint(kv->value, lo, hi, &n) < 0) {
                                fp_coll_reply_error(req, 400, "parameter '%s' must be %llu to %llu",
                                                    kv->key, lo, hi);
                                r = -EINVAL;
                                break;
                        }
                        *(nodes ? &ret->max_nodes : &ret->points) = (size_t)n;
                }
        }
        evhttp_clear_headers(&q);
        return r;
}

/* A selection's filter (prefix: the baseline's); answers 400 itself. */
static int view_filter(struct evhttp_request *req, const char *prefix, struct fp_coll_filter *f)
{
        const struct evhttp_uri *uri = fp_coll_req_uri(req);
        char err[256];
        int r = fp_coll_filter_parse_ex(uri ? evhttp_uri_get_query(uri) : NULL,
                                        (int64_t)fp_now_ns(CLOCK_REALTIME), prefix, view_keys, f,
                                        err, sizeof(err));
        if (r < 0)
                fp_coll_reply_error(req, 400, "%s%s", prefix ? "baseline: " : "", err);
        return r;
}

/* The merged profile of f into *ret; answers the error itself (404: nothing matches). */
static int query(struct fp_coll_server *s, struct evhttp_request *req,
                 const struct fp_store_filter *f, const char *what, struct fp_pprof **ret)
{
        struct fp_pprof *p = fp_pprof_new();
        int r;

        if (!p) {
                fp_coll_reply_error(req, 503, "out of memory");
                return -ENOMEM;
        }
        r = fp_backend_query_pprof(s->store, f, p);
        if (r <= 0) {
                if (r < 0)
                        fp_coll_reply_error(req, r == -EINVAL ? 400 : 503,
                                            "cannot query the store: %s",
                                            fp_backend_errmsg(s->store));
                else
                        fp_coll_reply_error(req, 404, "no samples match %s", what);
                fp_pprof_free(p);
                return r < 0 ? r : -ENOENT;
        }
        fp_dbgi_name(
            s->names, &p,
            fp_backend_deadline(s->store)); /* best effort: unnamed frames keep their offsets */
        *ret = p;
        return 0;
}

/* The drop comments of a merged profile ("dropped REASON: N") as a JSON object. */
static void drops_json(struct evbuffer *b, const struct fp_pprof *p)
{
        bool first = true;

        evbuffer_add_printf(b, "{");
        for (size_t i = 0; i < fp_pprof_n_comments(p); i++) {
                const char *c = fp_pprof_comment(p, i);
                char reason[64];
                unsigned long long n;
                if (sscanf(c, "dropped %63[a-z0-9_]: %llu", reason, &n) != 2)
                        continue;
                evbuffer_add_printf(b, "%s\"%s\":%llu", first ? "" : ",", reason, n);
                first = false;
        }
        evbuffer_add_printf(b, "}");
}

/*
 * ,"names":[...]: what the collector named and from what (debuginfod.h's
 * comments, "fleetprof: N frames of FILE ... named by the collector from
 * ..."), which the page shows beside the graph.
 */
static void names_json(struct evbuffer *b, const struct fp_pprof *p)
{
        static const char mark[] = "fleetprof: ";
        bool first = true;

        evbuffer_add_printf(b, ",\"names\":[");
        for (size_t i = 0; i < fp_pprof_n_comments(p); i++) {
                const char *c = fp_pprof_comment(p, i);
                if (strncmp(c, mark, sizeof(mark) - 1) != 0)
                        continue;
                evbuffer_add_printf(b, "%s", first ? "" : ",");
                fp_escape_json(fp_write_evbuffer, b, c + sizeof(mark) - 1);
                first = false;
        }
        evbuffer_add_printf(b, "]");
}

/* One host's profiling cost as JSON (the userdata: the buffer; commas tracked). */
struct cost_list {
        struct evbuffer *b;
        bool first;
};

static int cost_json(void *userdata, const struct fp_store_host_cost *c)
{
        struct cost_list *l = userdata;
        double share = c->covered_ns > 0 && c->host_cpus
                           ? (double)c->agent_cpu_ns / ((double)c->covered_ns * c->host_cpus)
                           : 0;
        evbuffer_add_printf(l->b, "%s{\"host\":", l->first ? "" : ",");
        fp_escape_json(fp_write_evbuffer, l->b, c->host);
        evbuffer_add_printf(l->b,
                            ",\"agent_cpu_ns\":%" PRIu64 ",\"covered_ns\":%" PRId64
                            ",\"host_cpus\":%u,\"agent_rss_bytes\":%" PRIu64 ",\"cpu_share\":%.6f}",
                            c->agent_cpu_ns, c->covered_ns, c->host_cpus, c->agent_rss_bytes,
                            share);
        l->first = false;
        return 0;
}

/* Builds and sends the tree of p (and base, for a diff), with what profiling cost its hosts. */
static void send_tree(struct fp_coll_server *s, struct evhttp_request *req,
                      const struct view_params *vp, const struct fp_store_filter *sel,
                      const struct fp_pprof *p, const struct fp_pprof *base)
{
        size_t vi = vp->samples ? 0 : 1;
        struct fp_flame *f = NULL;
        struct evbuffer *b = NULL;
        const char *unit, *type = fp_pprof_sample_type(p, vi, &unit);
        int r = fp_flame_new(&f);

        if (r == 0)
                r = fp_flame_add(f, p, vi, 0);
        if (r == 0 && base)
                r = fp_flame_add(f, base, vi, 1);
        size_t before = f ? fp_flame_n_nodes(f) : 0;
        if (r == 0)
                r = fp_flame_prune(f, vp->max_nodes);
        if (r == 0 && !(b = evbuffer_new()))
                r = -ENOMEM;
        if (r < 0) {
                fp_coll_reply_error(req, 503, "cannot build the flame graph: %s", strerror(-r));
                goto out;
        }
        evbuffer_add_printf(b, "{\"type\":\"%s\",\"unit\":\"%s\",\"total\":%" PRId64, type, unit,
                            fp_flame_total(f, 0));
        if (base)
                evbuffer_add_printf(b, ",\"base_total\":%" PRId64, fp_flame_total(f, 1));
        evbuffer_add_printf(b, ",\"nodes\":%zu,\"pruned\":%s,\"drops\":", fp_flame_n_nodes(f),
                            fp_flame_n_nodes(f) < before ? "true" : "false");
        drops_json(b, p);
        names_json(b, p);
        evbuffer_add_printf(b, ",\"profiler\":[");
        struct cost_list cl = {b, true};
        (void)fp_backend_host_costs(s->store, sel, cost_json, &cl); /* a cost is a nicety */
        evbuffer_add_printf(b, "],\"tree\":");
        r = fp_flame_write_json(f, base != NULL, fp_write_evbuffer, b);
        if (r < 0) {
                fp_coll_reply_error(req, 503, "cannot write the flame graph: %s", strerror(-r));
                goto out;
        }
        evbuffer_add_printf(b, "}\n");
        fp_coll_reply(req, 200, "application/json", b);
out:
        if (b)
                evbuffer_free(b);
        fp_flame_free(f);
}

void fp_coll_view_flamegraph(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_coll_filter f;
        struct view_params vp;
        struct fp_pprof *p = NULL;

        if (view_params(req, &vp) < 0 || view_filter(req, NULL, &f) < 0 ||
            query(s, req, &f.f, "this selection", &p) < 0)
                return;
        send_tree(s, req, &vp, &f.f, p, NULL);
        fp_pprof_free(p);
}

void fp_coll_view_diff(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_coll_filter f, bf, over;
        struct view_params vp;
        struct fp_pprof *p = NULL, *base = NULL;

        if (view_params(req, &vp) < 0 || view_filter(req, NULL, &f) < 0 ||
            view_filter(req, FP_COLL_BASE_PREFIX, &over) < 0)
                return;
        /* The baseline: the comparison's filter, with what base_ sets overridden. */
        bf = f;
        if (over.f.host)
                memcpy(bf.host, over.host, sizeof(bf.host));
        if (over.f.process)
                memcpy(bf.process, over.process, sizeof(bf.process));
        if (over.f.service)
                memcpy(bf.service, over.service, sizeof(bf.service));
        if (over.f.container)
                memcpy(bf.container, over.container, sizeof(bf.container));
        if (over.f.config_word)
                memcpy(bf.label, over.label, sizeof(bf.label));
        if (over.f.event)
                memcpy(bf.event, over.event, sizeof(bf.event));
        if (over.f.thread_name)
                memcpy(bf.thread, over.thread, sizeof(bf.thread));
        bf.f.host = over.f.host || f.f.host ? bf.host : NULL;
        bf.f.process = over.f.process || f.f.process ? bf.process : NULL;
        bf.f.service = over.f.service || f.f.service ? bf.service : NULL;
        bf.f.container = over.f.container || f.f.container ? bf.container : NULL;
        bf.f.config_word = over.f.config_word || f.f.config_word ? bf.label : NULL;
        bf.f.event = over.f.event || f.f.event ? bf.event : NULL;
        bf.f.thread_name = over.f.thread_name || f.f.thread_name ? bf.thread : NULL;
        if (over.f.pid)
                bf.f.pid = over.f.pid;
        /* A time bound of the baseline's replaces the comparison's whole range. */
        if (over.f.since_ns || over.f.until_ns) {
                bf.f.since_ns = over.f.since_ns;
                bf.f.until_ns = over.f.until_ns;
        }
        if (query(s, req, &f.f, "the comparison", &p) < 0)
                return;
        if (query(s, req, &bf.f, "the baseline", &base) == 0) {
                if (fp_pprof_n_sample_types(base) != fp_pprof_n_sample_types(p) ||
                    strcmp(fp_pprof_sample_type(base, 1, NULL), fp_pprof_sample_type(p, 1, NULL)))
                        fp_coll_reply_error(req, 400,
                                            "the baseline and the comparison are different events");
                else
                        send_tree(s, req, &vp, &f.f, p, base);
        }
        fp_pprof_free(p);
        fp_pprof_free(base);
}

/* The time line being summed: one event, steps of step_ns from from_ns. */
struct line {
        char event[128];
        int64_t from_ns, end_ns, step_ns;
        size_t n;
        uint64_t *samples, *values;
};

static int first_event(void *userdata, const struct fp_store_point *pt)
{
        struct line *l = userdata;
        if (!l->event[0])
                snprintf(l->event, sizeof(l->event), "%s", pt->event);
        if (!l->from_ns || pt->start_ns < l->from_ns)
                l->from_ns = pt->start_ns;
        if (pt->start_ns + pt->length_ns > l->end_ns)
                l->end_ns = pt->start_ns + pt->length_ns;
        return 0;
}

static int add_point(void *userdata, const struct fp_store_point *pt)
{
        struct line *l = userdata;
        size_t i = (size_t)((pt->start_ns - l->from_ns) / l->step_ns);
        if (i >= l->n)
                i = l->n - 1;
        l->samples[i] += pt->count;
        l->values[i] += pt->value;
        return 0;
}

void fp_coll_view_timeline(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_coll_filter f;
        struct view_params vp;
        struct line l = {0};
        struct evbuffer *b = NULL;
        int r;

        if (view_params(req, &vp) < 0 || view_filter(req, NULL, &f) < 0)
                return;
        /* Pass one: the event (the one asked for, or the first stored) and the range. */
        r = fp_backend_timeline(s->store, &f.f, first_event, &l);
        if (r == 0) {
                fp_coll_reply_error(req, 404, "no samples match this selection");
                return;
        }
        if (r > 0) {
                int64_t end = l.end_ns, span;
                if (f.f.since_ns && f.f.since_ns < l.from_ns)
                        l.from_ns = f.f.since_ns;
                if (f.f.until_ns && f.f.until_ns > end)
                        end = f.f.until_ns;
                span = end - l.from_ns;
                l.step_ns = span / (int64_t)vp.points + 1;
                if (l.step_ns < 1000000000LL)
                        l.step_ns = 1000000000LL;
                l.n = (size_t)(span / l.step_ns) + 1;
                l.samples = calloc(l.n, sizeof(*l.samples));
                l.values = calloc(l.n, sizeof(*l.values));
                f.f.event = l.event;
                r = l.samples && l.values ? fp_backend_timeline(s->store, &f.f, add_point, &l)
                                          : -ENOMEM;
        }
        if (r < 0 || !(b = evbuffer_new())) {
                fp_coll_reply_error(req, 503, "cannot read the time line: %s",
                                    r < 0 ? fp_backend_errmsg(s->store) : "out of memory");
                goto out;
        }
        evbuffer_add_printf(b, "{\"event\":");
        fp_escape_json(fp_write_evbuffer, b, l.event);
        evbuffer_add_printf(b,
                            ",\"step_ns\":%" PRId64 ",\"from_ns\":%" PRId64 ",\"to_ns\":%" PRId64
                            ",\"points\":[",
                            l.step_ns, l.from_ns, l.from_ns + (int64_t)l.n * l.step_ns);
        for (size_t i = 0; i < l.n; i++)
                evbuffer_add_printf(b, "%s[%" PRId64 ",%" PRIu64 ",%" PRIu64 "]", i ? "," : "",
                                    l.from_ns + (int64_t)i * l.step_ns, l.samples[i], l.values[i]);
        evbuffer_add_printf(b, "]}\n");
        fp_coll_reply(req, 200, "application/json", b);
out:
        if (b)
                evbuffer_free(b);
        free(l.samples);
        free(l.values);
}
