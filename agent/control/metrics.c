/* SPDX-License-Identifier: MIT */
/*
 * The agent's metrics; see metrics.h for what they are.
 */
#include "metrics.h"
#include "core.h"
#include "log.h"
#include "procfs.h"
#include "rule.h"
#include "util.h"
#include "prom.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One metric of one value: its family and its sample. */
static void one(struct fp_prom *p, const char *name, const char *type, const char *help, double v)
{
        fp_prom_family(p, name, type, help);
        fp_prom_value(p, name, NULL, NULL, v);
}

void fp_metrics_write(const struct fp_core_status *st, fp_write_fn w, void *ctx)
{
        struct fp_prom p;
        uint64_t running = 0, exited = 0, threads = 0, ring = 0;
        uint32_t p50 = 0, p90 = 0, p99 = 0;
        uint64_t started = 0, refused = 0;

        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                if (ts->st.state == FP_TARGET_RUNNING)
                        running++;
                else
                        exited++;
                threads += ts->st.threads_live;
                ring += ts->st.ring_bytes;
                /* The worst target's: a quantile of quantiles would mean nothing. */
                if (ts->latency.p99_us > p99) {
                        p50 = ts->latency.p50_us;
                        p90 = ts->latency.p90_us;
                        p99 = ts->latency.p99_us;
                }
        }
        for (size_t i = 0; i < st->n_rules; i++) {
                started += st->rules[i].started;
                refused += st->rules[i].refused;
        }

        fp_prom_init(&p, w, ctx);
        fp_prom_family(&p, "fleetprof_agent_build_info", "gauge", "The agent's version.");
        fp_prom_value(&p, "fleetprof_agent_build_info", "version", st->version, 1);
        one(&p, "fleetprof_agent_uptime_seconds", "gauge", "Seconds since the agent started.",
            (double)st->uptime_s);
        fp_prom_family(&p, "fleetprof_agent_targets", "gauge",
                       "Profiled processes: running, or exited and not yet forgotten.");
        fp_prom_value(&p, "fleetprof_agent_targets", "state", "running", (double)running);
        fp_prom_value(&p, "fleetprof_agent_targets", "state", "exited", (double)exited);
        one(&p, "fleetprof_agent_threads", "gauge", "Threads with perf events open.",
            (double)threads);
        one(&p, "fleetprof_agent_rules", "gauge", "Rules (agentctl start --name ... and target =).",
            (double)st->n_rules);
        one(&p, "fleetprof_agent_rule_processes_started_total", "counter",
            "Processes the rules started to profile.", (double)started);
        one(&p, "fleetprof_agent_rule_processes_refused_total", "counter",
            "New processes a rule left out: its --max-processes were running.", (double)refused);
        one(&p, "fleetprof_agent_samples_total", "counter", "Samples kept, of every target.",
            (double)st->samples_total);
        one(&p, "fleetprof_agent_host_tier_cpus", "gauge",
            "CPUs the host tier samples (0: the host tier is off).",
            st->host_on ? (double)st->host.cpus : 0);
        fp_prom_family(&p, "fleetprof_agent_frames_named_total", "counter",
                       "Frames exported (stored or dumped) by what named them: their file's "
                       "symbol table (dynsym: exported symbols only; symtab; build_id and "
                       "debuglink: a debug file; minidebuginfo; pclntab: a stripped Go "
                       "binary's table), kernel, jit (a perf map), python, or unnamed (an "
                       "address left as FILE+0xOFFSET).");
        for (int i = 0; i < FP_EXPORT_NAME_KINDS; i++)
                fp_prom_value(&p, "fleetprof_agent_frames_named_total", "source",
                              fp_export_name_kind(i), (double)st->frames_named[i]);
        fp_prom_family(&p, "fleetprof_agent_host_tier_samples_total", "counter",
                       "The host tier's samples: kept, of an idle CPU (not kept), or of a "
                       "target's process (counted by the target).");
        fp_prom_value(&p, "fleetprof_agent_host_tier_samples_total", "outcome", "kept",
                      (double)st->host.st.samples);
        fp_prom_value(&p, "fleetprof_agent_host_tier_samples_total", "outcome", "idle",
                      (double)st->host.idle);
        fp_prom_value(&p, "fleetprof_agent_host_tier_samples_total", "outcome", "covered_by_target",
                      (double)st->host.covered);
        one(&p, "fleetprof_agent_host_tier_processes", "gauge",
            "Processes (generations) the host tier keeps now.", (double)st->host.procs);
        fp_prom_family(&p, "fleetprof_agent_dropped_samples_total", "counter",
                       "Samples that could not be kept, by reason, as written to the store.");
        for (size_t i = 0; i < st->n_stored_drops; i++)
                fp_prom_value(&p, "fleetprof_agent_dropped_samples_total", "reason",
                              st->stored_drops[i].reason, (double)st->stored_drops[i].count);
        fp_prom_family(&p, "fleetprof_agent_attach_latency_seconds", "gauge",
                       "Thread birth to its perf events open, the worst target's quantiles over "
                       "its last 512 threads.");
        fp_prom_value(&p, "fleetprof_agent_attach_latency_seconds", "percentile", "50",
                      (double)p50 / 1e6);
        fp_prom_value(&p, "fleetprof_agent_attach_latency_seconds", "percentile", "90",
                      (double)p90 / 1e6);
        fp_prom_value(&p, "fleetprof_agent_attach_latency_seconds", "percentile", "99",
                      (double)p99 / 1e6);
        one(&p, "fleetprof_agent_cpu_seconds_total", "counter",
            "CPU time the agent used, all its threads, user and system.",
            (double)fp_proc_self_cpu_ns() / 1e9);
        one(&p, "fleetprof_agent_resident_bytes", "gauge", "The agent's resident memory.",
            (double)fp_proc_self_rss());
        one(&p, "fleetprof_agent_perf_ring_bytes", "gauge",
            "Memory the perf rings of the profiled threads map (locked kernel memory).",
            (double)ring);
        one(&p, "fleetprof_agent_store_bytes", "gauge", "The store: database file and log.",
            (double)(st->file_bytes + st->wal_bytes));
        one(&p, "fleetprof_agent_store_budget_bytes", "gauge", "The store's byte budget.",
            (double)st->store_max_bytes);
        one(&p, "fleetprof_agent_store_buckets", "gauge", "Buckets in the store.",
            (double)st->buckets);
        one(&p, "fleetprof_agent_store_pending_buckets", "gauge",
            "Buckets the collector does not have yet.", (double)st->pending_buckets);
        one(&p, "fleetprof_agent_store_evicted_buckets_total", "counter",
            "Buckets evicted for space since the agent started.", (double)st->evicted_buckets);
        fp_prom_family(&p, "fleetprof_agent_uploads_total", "counter",
                       "Uploads the collector answered: delivered (2xx) or refused for good.");
        fp_prom_value(&p, "fleetprof_agent_uploads_total", "outcome", "delivered",
                      (double)st->upload.uploads_ok);
        fp_prom_value(&p, "fleetprof_agent_uploads_total", "outcome", "refused",
                      (double)st->upload.uploads_rejected);
        fp_prom_family(&p, "fleetprof_agent_upload_rounds_total", "counter",
                       "Upload rounds, by outcome.");
        fp_prom_value(&p, "fleetprof_agent_upload_rounds_total", "outcome", "ok",
                      (double)st->upload.rounds_ok);
        fp_prom_value(&p, "fleetprof_agent_upload_rounds_total", "outcome", "failed",
                      (double)st->upload.rounds_failed);
        one(&p, "fleetprof_agent_upload_bytes_total", "counter", "Bytes of uploads sent.",
            (double)st->upload.bytes_sent);
        one(&p, "fleetprof_agent_upload_waiting_uploads", "gauge",
            "Uploads built and waiting for the collector.", (double)st->waiting_uploads);
        one(&p, "fleetprof_agent_upload_waiting_bytes", "gauge",
            "Bytes of the uploads waiting for the collector.", (double)st->waiting_bytes);
        double age =
            st->oldest_waiting_ns
                ? (double)((int64_t)fp_now_ns(CLOCK_REALTIME) - st->oldest_waiting_ns) / 1e9
                : 0;
        one(&p, "fleetprof_agent_upload_oldest_waiting_seconds", "gauge",
            "Age of the oldest data the collector does not have (0: none).", age < 0 ? 0 : age);
        one(&p, "fleetprof_agent_upload_config_error", "gauge",
            "1 when the collector's last answer says the URL or token is wrong.",
            st->upload.config_error ? 1 : 0);
}

/* ---- the HTTP listener ---- */

struct fp_metrics_server {
        struct fp_core *core;
        struct evhttp *http;
};

static void on_request(struct evhttp_request *req, void *arg)
{
        struct fp_metrics_server *m = arg;
        const char *uri = evhttp_request_get_uri(req);
        struct fp_core_status st;
        struct evbuffer *b;

        if (evhttp_request_get_command(req) != EVHTTP_REQ_GET || strncmp(uri, "/metrics", 8) != 0 ||
            (uri[8] && uri[8] != '?')) {
                evhttp_send_error(req, 404, "only GET /metrics is served here");
                return;
        }
        b = evbuffer_new();
        if (!b || fp_core_status(m->core, 0, &st) < 0) {
                if (b)
                        evbuffer_free(b);
                evhttp_send_error(req, 503, "out of memory");
                return;
        }
        fp_metrics_write(&st, fp_write_evbuffer, b);
        fp_core_status_free(&st);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/plain; version=0.0.4; charset=utf-8");
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
}

int fp_metrics_listen(struct event_base *base, struct fp_core *core, const char *addr,
                      struct fp_metrics_server **ret, char *err, size_t err_len)
{
        struct fp_metrics_server *m;
        char host[256];
        unsigned port;

        if (fp_parse_listen(addr, host, sizeof(host), &port) < 0)
                return fp_errf(err, err_len, -EINVAL,
                               "invalid --metrics-listen '%s': ADDR:PORT, e.g. 127.0.0.1:9465",
                               addr);
        m = calloc(1, sizeof(*m));
        if (!m || !(m->http = evhttp_new(base))) {
                free(m);
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        }
        m->core = core;
        evhttp_set_timeout(m->http, 10);
        evhttp_set_max_headers_size(m->http, 16 << 10);
        evhttp_set_max_body_size(m->http, 0);
        evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET);
        evhttp_set_gencb(m->http, on_request, m);
        if (evhttp_bind_socket(m->http, host, (ev_uint16_t)port) < 0) {
                int e = errno ? errno : EADDRINUSE;
                fp_metrics_server_free(m);
                return fp_errf(err, err_len, -e, "Failed to listen on '%s' for metrics: %s", addr,
                               strerror(e));
        }
        *ret = m;
        return 0;
}

void fp_metrics_server_free(struct fp_metrics_server *m)
{
        if (!m)
                return;
        if (m->http)
                evhttp_free(m->http);
        free(m);
}
