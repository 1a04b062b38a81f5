/* SPDX-License-Identifier: MIT */
/*
 * The agent's own metrics in the Prometheus text format (common/prom.h):
 * what `agentctl metrics` prints and what --metrics-listen ADDR:PORT
 * serves on GET /metrics, for Prometheus to scrape. Aggregates only (no
 * per-process labels, so neither the series count nor what a scrape shows
 * depends on which processes run):
 *
 *   fleetprof_agent_build_info{version}, _uptime_seconds
 *   fleetprof_agent_targets{state="running"|"exited"}, _threads
 *   fleetprof_agent_rules, _rule_processes_started_total, _rule_processes_refused_total
 *   fleetprof_agent_samples_total                 samples kept, every target ever
 *   fleetprof_agent_dropped_samples_total{reason} drops written to the store
 *   fleetprof_agent_attach_latency_seconds{percentile}  thread birth to events
 *                                                 open, the worst target's
 *   fleetprof_agent_cpu_seconds_total, _resident_bytes, _perf_ring_bytes
 *   fleetprof_agent_store_bytes, _store_budget_bytes, _store_buckets,
 *   _store_pending_buckets, _store_evicted_buckets_total
 *   fleetprof_agent_uploads_total{outcome="delivered"|"refused"},
 *   _upload_rounds_total{outcome="ok"|"failed"}, _upload_bytes_total,
 *   _upload_waiting_uploads, _upload_waiting_bytes, _upload_oldest_waiting_seconds,
 *   _upload_config_error
 */
#pragma once

#include "escape.h"

#include <stddef.h>

struct event_base;
struct fp_core;
struct fp_core_status;
struct fp_metrics_server;

/* Writes the metrics of a status snapshot (taken for root) through w. */
void fp_metrics_write(const struct fp_core_status *st, fp_write_fn w, void *ctx);

/*
 * Serves GET /metrics on addr ("127.0.0.1:9465", "[::1]:9465") from the
 * core's state, on base. -errno with one line in err.
 */
int fp_metrics_listen(struct event_base *base, struct fp_core *core, const char *addr,
                      struct fp_metrics_server **ret, char *err, size_t err_len);
void fp_metrics_server_free(struct fp_metrics_server *m);
