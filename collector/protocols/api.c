/* SPDX-License-Identifier: MIT */
/*
 * The JSON and pprof API handlers; see api.h for what each answers.
 */
#include "debuginfod.h"
#include "debugfiles.h"
#include "upload_contract.h"
#include "api.h"
#include "log.h"
#include "filter.h"
#include "ingest.h"
#include "escape.h"
#include "util.h"
#include "pprof.h"
#include "http.h"
#include "json.h"
#include "prom.h"
#include "backend.h"
#include "writeq.h"
#include "gate.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- ingest ---- */

/* An upload queued for the writer, answered when its group is written. */
struct pending_upload {
        struct fp_coll_server *s;
        struct evhttp_request *req;
        struct evhttp_connection *evcon;
        bool gone;      /* the client hung up (its upload is still stored) */
        char host[256]; /* for the log */
        pid_t pid;
};

static void on_conn_closed(void *arg)
{
        struct pending_upload *pu = arg;

        pu->gone = true;
}

/*
 * What became of one upload, on the loop thread: refused by the decoder
 * (400, 413, 503 with the reason), or written: counted, then 200 "stored"
 * or "duplicate", or 503 when the store failed (the agent retries).
 */
static void on_stored(void *userdata, const struct fp_coll_writeq_result *res)
{
        struct pending_upload *pu = userdata;
        struct fp_coll_server *s = pu->s;
        struct evbuffer *b;

        fp_coll_count_upload(&s->st, res);
        if (res->decode_status)
                fp_log(LOG_ERR, "Refused an upload from %s (pid %d): %s", pu->host, (int)pu->pid,
                       res->error);
        fp_coll_writeq_stats(s->writeq, &s->st.store_ns, &s->st.groups);
        if (pu->gone) {
                /* evhttp left the request, detached from its closed connection, to us. */
                evhttp_request_free(pu->req);
                goto out;
        }
        if (pu->evcon)
                fp_coll_gate_on_close(s->gate, pu->evcon, NULL, NULL);
        if (res->decode_status) {
                fp_coll_reply_error(pu->req, res->decode_status, "%s", res->error);
                goto out;
        }
        if (res->result < 0 && res->result != -EALREADY) {
                fp_coll_reply_error(pu->req, 503, "cannot store the upload now: %s",
                                    strerror(-res->result));
                goto out;
        }
        b = evbuffer_new();
        if (!b) {
                fp_coll_reply_error(pu->req, 503, "out of memory");
                goto out;
        }
        if (res->result == 0)
                evbuffer_add_printf(b, "{\"status\": \"stored\", \"samples\": %" PRIu64 "}\n",
                                    res->samples);
        else
                evbuffer_add_printf(b, "{\"status\": \"duplicate\"}\n");
        fp_coll_reply(pu->req, 200, "application/json", b);
        evbuffer_free(b);
out:
        free(pu);
}

/*
 * Checks what can be checked at once (the query, the key) and queues the
 * body for the decoder thread; the answer comes from on_stored().
 */
void fp_coll_api_ingest(struct fp_coll_server *s, struct evhttp_request *req)
{
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        const char *key =
            evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");
        struct fp_upload_meta *meta = NULL;
        struct pending_upload *pu = NULL;
        size_t len = evbuffer_get_length(in);
        uint8_t *body = NULL;
        char *key_copy = NULL;
        char err[512];
        int r;

        meta = malloc(sizeof(*meta));
        if (!meta) {
                fp_coll_reply_error(req, 503, "out of memory");
                goto out;
        }
        r = fp_upload_parse_query(uri ? evhttp_uri_get_query(uri) : NULL, meta, err, sizeof(err));
        if (r == 0 && key)
                r = fp_upload_check_key(key, err, sizeof(err));
        if (r < 0) {
                s->st.uploads_rejected++;
                fp_coll_reply_error(req, r == -ENOMEM ? 503 : 400, "%s", err);
                goto out;
        }
        body = malloc(len ? len : 1);
        key_copy = key ? strdup(key) : NULL;
        pu = calloc(1, sizeof(*pu));
        if (!body || (key && !key_copy) || !pu) {
                fp_coll_reply_error(req, 503, "out of memory");
                goto out;
        }
        evbuffer_remove(in, body, len);
        s->st.bytes_received += len;
        pu->s = s;
        pu->req = req;
        pu->evcon = evhttp_request_get_connection(req);
        snprintf(pu->host, sizeof(pu->host), "%s", meta->host);
        pu->pid = meta->pid;
        r = fp_coll_writeq_add(s->writeq, meta, body, len, key_copy, on_stored, pu);
        if (r < 0) {
                s->st.uploads_busy++;
                fp_coll_reply_error(req, 503, "%s",
                                    r == -EBUSY ? "too many uploads are waiting to be stored; "
                                                  "try again later"
                                                : "out of memory");
                goto out;
        }
        if (pu->evcon)
                fp_coll_gate_on_close(s->gate, pu->evcon, on_conn_closed, pu);
        return;
out:
        free(meta);
        free(body);
        free(key_copy);
        free(pu);
}

/* ---- series ---- */

struct drop_row {
        char *host;
        pid_t pid;
        uint64_t starttime;
        char *reason;
        uint64_t count;
};

struct drop_list {
        struct drop_row *rows;
        size_t n, cap;
};

static int collect_drop(void *userdata, const struct fp_store_drop *d)
{
        struct drop_list *l = userdata;

        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                void *p = realloc(l->rows, cap * sizeof(*l->rows));
                if (!p)
                        return -ENOMEM;
                l->rows = p;
                l->cap = cap;
        }
        l->rows[l->n] = (struct drop_row){.host = strdup(d->host ? d->host : ""),
                                          .pid = d->pid,
                                          .starttime = d->starttime,
                                          .reason = strdup(d->reason),
                                          .count = d->count};
        if (!l->rows[l->n].host || !l->rows[l->n].reason) {
                free(l->rows[l->n].host);
                free(l->rows[l->n].reason);
                return -ENOMEM;
        }
        l->n++;
        return 0;
}

static void drop_list_free(struct drop_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->rows[i].host);
                free(l->rows[i].reason);
        }
        free(l->rows);
}

struct walk {
        struct drop_list drops;
        fp_coll_series_fn fn;
        void *userdata;
};

static int walk_one(void *userdata, const struct fp_store_series *se)
{
        struct walk *w = userdata;
        struct fp_coll_drops d = {0};

        for (size_t i = 0; i < w->drops.n; i++) {
                const struct drop_row *r = &w->drops.rows[i];

                if (r->pid == se->pid && r->starttime == se->starttime &&
                    strcmp(r->host, se->host ? se->host : "") == 0 &&
                    d.n < sizeof(d.d) / sizeof(d.d[0])) {
                        d.d[d.n].reason = r->reason;
                        d.d[d.n++].count = r->count;
                }
        }
        return w->fn(w->userdata, se, &d);
}

int fp_coll_api_walk_series(struct fp_coll_server *s, const struct fp_store_filter *f,
                            fp_coll_series_fn fn, void *userdata)
{
        struct walk w = {.fn = fn, .userdata = userdata};
        int r;

        r = fp_backend_drop_totals(s->store, f, collect_drop, &w.drops);
        if (r >= 0)
                r = fp_backend_list_series(s->store, f, walk_one, &w);
        drop_list_free(&w.drops);
        return r;
}

/* One series as a JSON object, through the common JSON writer (userdata). */
static int series_json(void *userdata, const struct fp_store_series *se,
                       const struct fp_coll_drops *d)
{
        struct fp_json *j = userdata;
        char first[40], last[40];

        fp_rfc3339(se->first_ns, first, sizeof(first));
        fp_rfc3339(se->last_ns, last, sizeof(last));
        fp_json_begin_object(j);
        fp_json_key(j, "host");
        fp_json_string(j, se->host);
        fp_json_key(j, "service");
        fp_json_string(j, se->service ? se->service : "");
        fp_json_key(j, "container");
        fp_json_string(j, se->container ? se->container : "");
        fp_json_key(j, "process");
        fp_json_string(j, se->comm);
        fp_json_key(j, "pid");
        fp_json_int(j, se->pid);
        fp_json_key(j, "starttime");
        fp_json_uint(j, se->starttime);
        fp_json_key(j, "exe");
        fp_json_string(j, se->exe);
        fp_json_key(j, "event");
        fp_json_string(j, se->event);
        fp_json_key(j, "config");
        fp_json_string(j, se->config ? se->config : "");
        fp_json_key(j, "first");
        fp_json_string(j, first);
        fp_json_key(j, "last");
        fp_json_string(j, last);
        fp_json_key(j, "first_ns");
        fp_json_int(j, se->first_ns);
        fp_json_key(j, "last_ns");
        fp_json_int(j, se->last_ns);
        fp_json_key(j, "buckets");
        fp_json_uint(j, se->buckets);
        fp_json_key(j, "samples");
        fp_json_uint(j, se->count);
        fp_json_key(j, "value");
        fp_json_uint(j, se->value);
        fp_json_key(j, "drops");
        fp_json_begin_object(j);
        for (size_t i = 0; i < d->n; i++) {
                fp_json_key(j, d->d[i].reason);
                fp_json_uint(j, d->d[i].count);
        }
        fp_json_end_object(j);
        fp_json_end_object(j);
        return 0;
}

void fp_coll_api_series(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_coll_filter f;
        struct evbuffer *b;
        struct fp_json j;
        int r;

        if (fp_coll_filter_from_request(req, &f) < 0)
                return;
        b = evbuffer_new();
        if (!b) {
                fp_coll_reply_error(req, 503, "out of memory");
                return;
        }
        fp_json_init(&j, fp_write_evbuffer, b);
        fp_json_begin_object(&j);
        fp_json_key(&j, "series");
        fp_json_begin_array(&j);
        r = fp_coll_api_walk_series(s, &f.f, series_json, &j);
        if (r < 0) {
                fp_coll_reply_error(req, 503, "cannot read the store: %s",
                                    fp_backend_errmsg(s->store));
        } else {
                fp_json_end_array(&j);
                fp_json_end_object(&j);
                evbuffer_add(b, "\n", 1);
                fp_coll_reply(req, 200, "application/json", b);
        }
        evbuffer_free(b);
}

/* ---- profile ---- */

static void free_buf(const void *data, size_t len, void *arg)
{
        (void)len;
        (void)arg;
        free((void *)data);
}

void fp_coll_api_profile(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_coll_filter f;
        struct fp_pprof *p;
        struct evbuffer *b;
        uint8_t *buf = NULL;
        size_t len = 0;
        int r;

        if (fp_coll_filter_from_request(req, &f) < 0)
                return;
        p = fp_pprof_new();
        if (!p) {
                fp_coll_reply_error(req, 503, "out of memory");
                return;
        }
        r = fp_backend_query_pprof(s->store, &f.f, p);
        if (r < 0) {
                fp_coll_reply_error(req, r == -EINVAL ? 400 : 503, "cannot query the store: %s",
                                    fp_backend_errmsg(s->store));
                goto out;
        }
        if (r == 0) {
                fp_coll_reply_error(req, 404, "no samples match this selection");
                goto out;
        }
        fp_dbgi_name(
            s->names, &p,
            fp_backend_deadline(s->store)); /* best effort: unnamed frames keep their offsets */
        r = fp_pprof_encode(p, 1, &buf, &len);
        if (r < 0) {
                fp_coll_reply_error(req, 503, "cannot encode the profile: %s", strerror(-r));
                goto out;
        }
        /* The buffer is handed over: evhttp may send it after this returns. */
        b = evbuffer_new();
        if (!b || evbuffer_add_reference(b, buf, len, free_buf, NULL) < 0) {
                if (b)
                        evbuffer_free(b);
                fp_coll_reply_error(req, 503, "out of memory");
                goto out;
        }
        buf = NULL;
        evhttp_add_header(fp_coll_req_out_headers(req), "Content-Disposition",
                          "attachment; filename=\"profile.pb.gz\"");
        fp_coll_reply(req, 200, "application/octet-stream", b);
        evbuffer_free(b);
out:
        free(buf);
        fp_pprof_free(p);
}

/* ---- healthz ---- */

/*
 * The store's figures for /healthz and /metrics: read now on the reader
 * thread (and kept for the loop), or, on the loop thread while a read
 * takes the reader, the last ones read. *age_ns: how old they are.
 */
static int store_figures(struct fp_coll_server *s, struct fp_store_stats *ss, int64_t *age_ns)
{
        struct fp_coll_read_state *st = s->reads;
        int64_t now = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
        int r;

        if (fp_coll_req_copied()) {
                r = fp_backend_stats(s->store, ss);
                pthread_mutex_lock(&st->lock);
                st->store = *ss;
                st->store_r = r;
                st->store_ns = now;
                pthread_mutex_unlock(&st->lock);
                *age_ns = 0;
                return r;
        }
        pthread_mutex_lock(&st->lock);
        *ss = st->store;
        r = st->store_ns ? st->store_r : -EAGAIN;
        *age_ns = st->store_ns ? now - st->store_ns : -1;
        pthread_mutex_unlock(&st->lock);
        return r;
}

void fp_coll_api_healthz(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_store_stats ss = {0};
        struct evbuffer *b = evbuffer_new();
        int64_t age_ns;
        int r = store_figures(s, &ss, &age_ns);
        /* Not read yet (the reader has been busy since the start): not a failure. */
        bool failed = r < 0 && r != -EAGAIN;

        if (!b) {
                fp_coll_reply_error(req, 503, "out of memory");
                return;
        }
        evbuffer_add_printf(
            b,
            "{\"status\": \"%s\", \"version\": \"%s\", \"uptime_s\": %" PRId64
            ", \"requests\": %" PRIu64 ", \"uploads_stored\": %" PRIu64
            ", \"uploads_duplicate\": %" PRIu64 ", \"uploads_rejected\": %" PRIu64
            ", \"uploads_failed\": %" PRIu64 ", \"samples_stored\": %" PRIu64
            ", \"bytes_received\": %" PRIu64 ", \"decode_ms\": %" PRIu64
            ", \"store_write_ms\": %" PRIu64 ", \"store_groups\": %" PRIu64
            ", \"store\": {\"buckets\": %" PRIu64 ", \"targets\": %" PRIu64
            ", \"file_bytes\": %" PRIu64 ", \"wal_bytes\": %" PRIu64 ", \"max_bytes\": %" PRIu64
            ", \"age_ms\": %" PRId64 "}}\n",
            failed ? "degraded" : "ok", FP_VERSION,
            (int64_t)(((int64_t)fp_now_ns(CLOCK_REALTIME) - s->st.started_ns) / 1000000000LL),
            s->st.requests, s->st.uploads_stored, s->st.uploads_duplicate, s->st.uploads_rejected,
            s->st.uploads_failed, s->st.samples_stored, s->st.bytes_received,
            s->st.decode_ns / 1000000, s->st.store_ns / 1000000, s->st.groups, ss.buckets,
            ss.targets, ss.file_bytes, ss.wal_bytes, s->store_max_bytes,
            age_ns < 0 ? (int64_t)-1 : age_ns / 1000000);
        fp_coll_reply(req, failed ? 503 : 200, "application/json", b);
        evbuffer_free(b);
}

/* ---- metrics ---- */

/* What debuginfod naming did (debuginfod.h), with --debuginfod only. */
static void names_metrics(struct fp_dbgi *d, struct fp_prom *p)
{
        static const char fetches[] = "fleetprof_collector_debuginfod_fetches_total";
        static const char lookups[] = "fleetprof_collector_debuginfod_lookups_total";
        struct fp_dbgi_stats st;

        fp_dbgi_stats(d, &st);
        fp_prom_family(p, fetches, "counter",
                       "Builds asked of the debuginfod servers, by result: fetched, missing (no "
                       "server has it), failed (an error, a timeout, a file that is not what it "
                       "says, a build ID that cannot be one).");
        fp_prom_value(p, fetches, "result", "fetched", (double)st.fetched);
        fp_prom_value(p, fetches, "result", "missing", (double)st.missing);
        fp_prom_value(p, fetches, "result", "failed", (double)st.failed);
        fp_prom_family(p, lookups, "counter",
                       "Builds a query wanted names from, by result: hit (cached), miss (not "
                       "yet, asked for, or backing off).");
        fp_prom_value(p, lookups, "result", "hit", (double)st.hits);
        fp_prom_value(p, lookups, "result", "miss", (double)st.misses);
        static const struct {
                const char *name, *type, *help;
        } one[] = {
            /* each with its value in values[] */
            {"fleetprof_collector_debuginfod_frames_named_total", "counter",
             "Locations of query answers named from debug files."},
            {"fleetprof_collector_debuginfod_cache_bytes", "gauge",
             "Bytes of the debug file cache (--debuginfod-cache-mb)."},
            {"fleetprof_collector_debuginfod_cache_builds", "gauge",
             "Builds in the debug file cache."},
            {"fleetprof_collector_debuginfod_symbol_bytes", "gauge",
             "Memory held by the cached builds' symbol tables."},
            {"fleetprof_collector_debuginfod_evicted_total", "counter",
             "Builds evicted from the cache for its byte budget."},
        };
        const uint64_t values[] = {st.frames_named, st.cache_bytes, st.cache_builds,
                                   st.symbol_bytes, st.evicted};
        for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++) {
                fp_prom_family(p, one[i].name, one[i].type, one[i].help);
                fp_prom_value(p, one[i].name, NULL, NULL, (double)values[i]);
        }
}

/* Uploaded debug files (debugfiles.h): what came, and what the store's files hold now. */
static void uploads_metrics(struct fp_coll_server *s, struct fp_prom *p)
{
        static const char ups[] = "fleetprof_collector_debuginfo_uploads_total";
        uint64_t stored, held, refused, files = 0, bytes = 0, named = 0;
        struct fp_dbgi_stats st;

        pthread_mutex_lock(&s->reads->lock);
        stored = s->reads->debug_stored;
        held = s->reads->debug_held;
        refused = s->reads->debug_refused;
        pthread_mutex_unlock(&s->reads->lock);
        if (s->names) {
                fp_dbgi_stats(s->names, &st);
                named = st.uploads_named;
        }
        fp_prom_family(p, ups, "counter",
                       "Debug files POSTed to /buildid/, by result: stored, held (that build was "
                       "stored already), refused (not ELF, cut short, another build, no symbols, "
                       "over the budget).");
        fp_prom_value(p, ups, "result", "stored", (double)stored);
        fp_prom_value(p, ups, "result", "held", (double)held);
        fp_prom_value(p, ups, "result", "refused", (double)refused);
        fp_prom_family(p, "fleetprof_collector_debuginfo_builds_loaded_total", "counter",
                       "Builds whose names were loaded from an uploaded debug file.");
        fp_prom_value(p, "fleetprof_collector_debuginfo_builds_loaded_total", NULL, NULL,
                      (double)named);
        if (fp_dfiles_totals(s->dfiles, &files, &bytes) < 0)
                return; /* the store cannot say now: no figure rather than a wrong one */
        fp_prom_family(p, "fleetprof_collector_debuginfo_files", "gauge",
                       "Uploaded debug files held (--debuginfo-mb).");
        fp_prom_value(p, "fleetprof_collector_debuginfo_files", NULL, NULL, (double)files);
        fp_prom_family(p, "fleetprof_collector_debuginfo_bytes", "gauge",
                       "Bytes of the uploaded debug files held.");
        fp_prom_value(p, "fleetprof_collector_debuginfo_bytes", NULL, NULL, (double)bytes);
}

void fp_coll_metrics(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_store_stats ss = {0};
        struct evbuffer *b = evbuffer_new();
        struct fp_hist write;
        size_t queued = 0, queued_bytes = 0;
        struct fp_prom p;
        int64_t age_ns;
        int r = store_figures(s, &ss, &age_ns);

        if (!b) {
                fp_coll_reply_error(req, 503, "out of memory");
                return;
        }
        fp_coll_writeq_metrics(s->writeq, &write, &queued, &queued_bytes);
        fp_prom_init(&p, fp_write_evbuffer, b);
        fp_prom_family(&p, "fleetprof_collector_build_info", "gauge", "The collector's version.");
        fp_prom_value(&p, "fleetprof_collector_build_info", "version", FP_VERSION, 1);
        fp_prom_family(&p, "fleetprof_collector_uptime_seconds", "gauge",
                       "Seconds since the collector started.");
        fp_prom_value(&p, "fleetprof_collector_uptime_seconds", NULL, NULL,
                      (double)((int64_t)fp_now_ns(CLOCK_REALTIME) - s->st.started_ns) / 1e9);
        static const char uploads[] = "fleetprof_collector_uploads_total";
        fp_prom_family(&p, uploads, "counter",
                       "Uploads by outcome: stored, duplicate (a retry of a stored one), rejected "
                       "(400), too_large (413), busy (503: the write queue was full), failed (503: "
                       "the store failed).");
        fp_prom_value(&p, uploads, "outcome", "stored", (double)s->st.uploads_stored);
        fp_prom_value(&p, uploads, "outcome", "duplicate", (double)s->st.uploads_duplicate);
        fp_prom_value(&p, uploads, "outcome", "rejected", (double)s->st.uploads_rejected);
        fp_prom_value(&p, uploads, "outcome", "too_large", (double)s->st.uploads_too_large);
        fp_prom_value(&p, uploads, "outcome", "busy", (double)s->st.uploads_busy);
        fp_prom_value(&p, uploads, "outcome", "failed", (double)s->st.uploads_failed);
        fp_prom_family(&p, "fleetprof_collector_received_bytes_total", "counter",
                       "Bytes of upload bodies received (compressed).");
        fp_prom_value(&p, "fleetprof_collector_received_bytes_total", NULL, NULL,
                      (double)s->st.bytes_received);
        fp_prom_family(&p, "fleetprof_collector_samples_stored_total", "counter",
                       "Samples in the uploads stored.");
        fp_prom_value(&p, "fleetprof_collector_samples_stored_total", NULL, NULL,
                      (double)s->st.samples_stored);
        fp_prom_family(&p, "fleetprof_collector_decode_seconds", "histogram",
                       "Time to decode and check one upload.");
        fp_prom_hist(&p, "fleetprof_collector_decode_seconds", &s->st.decode);
        fp_prom_family(&p, "fleetprof_collector_store_write_seconds", "histogram",
                       "Time to write one group of uploads (one transaction).");
        fp_prom_hist(&p, "fleetprof_collector_store_write_seconds", &write);
        fp_prom_family(&p, "fleetprof_collector_write_queue_uploads", "gauge",
                       "Uploads waiting to be decoded or stored, or being stored.");
        fp_prom_value(&p, "fleetprof_collector_write_queue_uploads", NULL, NULL, (double)queued);
        fp_prom_family(&p, "fleetprof_collector_write_queue_bytes", "gauge",
                       "Bytes of the upload bodies in the queue (--max-queue-mb).");
        fp_prom_value(&p, "fleetprof_collector_write_queue_bytes", NULL, NULL,
                      (double)queued_bytes);
        fp_prom_family(&p, "fleetprof_collector_store_bytes", "gauge",
                       "Bytes of the store: database file and write-ahead log.");
        fp_prom_value(&p, "fleetprof_collector_store_bytes", NULL, NULL,
                      (double)(ss.file_bytes + ss.wal_bytes));
        fp_prom_family(&p, "fleetprof_collector_store_budget_bytes", "gauge",
                       "The store's byte budget (0: none).");
        fp_prom_value(&p, "fleetprof_collector_store_budget_bytes", NULL, NULL,
                      (double)s->store_max_bytes);
        fp_prom_family(&p, "fleetprof_collector_store_buckets", "gauge",
                       "Uploads (buckets) in the store.");
        fp_prom_value(&p, "fleetprof_collector_store_buckets", NULL, NULL, (double)ss.buckets);
        fp_prom_family(&p, "fleetprof_collector_store_summaries", "gauge",
                       "Summaries kept (SQLite: of a series' hour or day; ClickHouse: of an hour "
                       "or day of every series), and hours and days to be summarised again "
                       "(ClickHouse: hours).");
        fp_prom_value(&p, "fleetprof_collector_store_summaries", "state", "kept",
                      (double)ss.summaries);
        fp_prom_value(&p, "fleetprof_collector_store_summaries", "state", "marked",
                      (double)ss.summaries_marked);
        fp_prom_family(&p, "fleetprof_collector_store_up", "gauge",
                       "1 when the store could be read for these figures.");
        fp_prom_value(&p, "fleetprof_collector_store_up", NULL, NULL, r < 0 ? 0 : 1);
        fp_prom_family(&p, "fleetprof_collector_requests_total", "counter",
                       "HTTP requests by endpoint (\"other\": no such endpoint).");
        for (size_t i = 0; i < FP_COLL_MAX_ROUTES; i++)
                if (s->st.by_route[i].path)
                        fp_prom_value(&p, "fleetprof_collector_requests_total", "path",
                                      s->st.by_route[i].path, (double)s->st.by_route[i].n);
        fp_prom_value(&p, "fleetprof_collector_requests_total", "path", "other",
                      (double)s->st.not_found);
        const size_t open = s->st.gate_open; /* as the read was queued (readers.h) */
        const uint64_t *refused = s->st.gate_refused;
        fp_prom_family(&p, "fleetprof_collector_connections", "gauge",
                       "Connections open, including those being refused or closed.");
        fp_prom_value(&p, "fleetprof_collector_connections", NULL, NULL, (double)open);
        static const char gate[] = "fleetprof_collector_refused_total";
        fp_prom_family(&p, gate, "counter",
                       "Requests refused from their head and connections closed, by reason: "
                       "unauthorized and wrong_token (401, the body unread), bad_head and "
                       "body_not_allowed (400), head_too_large (431), busy (503: "
                       "--max-connections), peer_busy (429: --max-connections-per-ip), slow (a "
                       "head or body too slow: closed), flood (closed at once), shed (closed "
                       "to make room for a new connection), read_unauthorized (401: a query's "
                       "body without the read token, unread), query_bodies_busy (503: query "
                       "bodies on their way past their bound in all).");
        for (int i = 0; i < FP_GATE_N_REASONS; i++)
                fp_prom_value(&p, gate, "reason", fp_coll_gate_reason_names[i], (double)refused[i]);
        fp_prom_family(&p, "fleetprof_collector_read_budget_refused_total", "counter",
                       "Reads stopped because they needed more memory than --max-read-mb.");
        fp_prom_value(&p, "fleetprof_collector_read_budget_refused_total", NULL, NULL,
                      (double)s->st.reads_over_memory);
        uint64_t waiting, busy, ran, ran_ns, waited_ns;
        pthread_mutex_lock(&s->reads->lock);
        waiting = s->reads->waiting, busy = s->reads->busy, ran = s->reads->ran;
        ran_ns = s->reads->ran_ns, waited_ns = s->reads->waited_ns;
        pthread_mutex_unlock(&s->reads->lock);
        fp_prom_family(&p, "fleetprof_collector_reads_waiting", "gauge",
                       "Reads queued for the reader thread or running (this one too).");
        fp_prom_value(&p, "fleetprof_collector_reads_waiting", NULL, NULL, (double)waiting);
        fp_prom_family(&p, "fleetprof_collector_reads_busy_total", "counter",
                       "Reads refused (503) because too many were waiting.");
        fp_prom_value(&p, "fleetprof_collector_reads_busy_total", NULL, NULL, (double)busy);
        fp_prom_family(&p, "fleetprof_collector_reads_total", "counter",
                       "Reads the reader thread ran.");
        fp_prom_value(&p, "fleetprof_collector_reads_total", NULL, NULL, (double)ran);
        fp_prom_family(&p, "fleetprof_collector_read_seconds_total", "counter",
                       "Time the reader thread spent on reads.");
        fp_prom_value(&p, "fleetprof_collector_read_seconds_total", NULL, NULL,
                      (double)ran_ns / 1e9);
        fp_prom_family(&p, "fleetprof_collector_read_wait_seconds_total", "counter",
                       "Time reads waited in the queue before they ran.");
        fp_prom_value(&p, "fleetprof_collector_read_wait_seconds_total", NULL, NULL,
                      (double)waited_ns / 1e9);
        if (s->names)
                names_metrics(s->names, &p);
        if (s->dfiles)
                uploads_metrics(s, &p);
        fp_coll_reply(req, 200, "text/plain; version=0.0.4; charset=utf-8", b);
        evbuffer_free(b);
}
