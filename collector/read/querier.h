/* SPDX-License-Identifier: MIT */
/*
 * Pyroscope's query API over Connect, as Grafana's Pyroscope data source
 * and its Profiles Drilldown app call it: unary calls, POST
 * /SERVICE/METHOD with a binary protobuf (application/proto) or JSON
 * (application/json) body, answered in kind; errors are Connect's
 * ({"code","message"} with the matching HTTP status). Served:
 *
 *   querier.v1.QuerierService/ProfileTypes     every event's two types
 *   querier.v1.QuerierService/LabelNames       label names of the series
 *   querier.v1.QuerierService/LabelValues      one label's values
 *   querier.v1.QuerierService/Series           the series' label sets
 *   querier.v1.QuerierService/SelectMergeStacktraces   a FlameGraph
 *   querier.v1.QuerierService/SelectMergeProfile       the merged pprof
 *   querier.v1.QuerierService/SelectSeries     points per step, grouped
 *   querier.v1.QuerierService/Diff             a FlameGraphDiff
 *   settings.v1.SettingsService/Get            no settings
 *
 * A profile type's ID is Pyroscope's NAME:SAMPLE_TYPE:UNIT:PERIOD_TYPE:
 * PERIOD_UNIT: the event's name and one of its two sample types (e.g.
 * cpu-clock:cpu:nanoseconds:cpu:nanoseconds, cpu-clock:samples:count:
 * cpu:nanoseconds). A series' labels: service_name (its service, else
 * its process name), host, process, pid (a process's), container, event
 * and __name__ (the event), __profile_type__, and the labels a pushed
 * series came with; thread_name selects samples (= only). Selectors are
 * selector.h's. Times are milliseconds since the epoch (0: open).
 *
 * Reads run on the reader thread under the read deadline, as the other
 * read endpoints do; frames are named by debuginfod where configured.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
struct fp_coll_server;

void fp_coll_querier(struct fp_coll_server *s, struct evhttp_request *req);
/* The path of the i-th method served (/querier.v1.QuerierService/ProfileTypes, ...), NULL past
 * them. */
const char *fp_coll_querier_method(size_t i);
/*
 * Reads a request body of the method at path (/querier.v1.QuerierService/
 * LabelNames, ...) as fp_coll_querier() does, binary or (json) JSON, and
 * frees what it read; no store is read. 0; -ENOENT for no such method; or
 * < 0 with the Connect error (code: message) in err. For the fuzz target.
 */
int fp_coll_querier_decode(const char *path, bool json, const uint8_t *body, size_t len, char *err,
                           size_t err_len);
/*
 * GET /pyroscope/render?query=TYPE{SELECTOR}&from=&until=[&max-nodes=N]:
 * Pyroscope's older render API (Profiles Drilldown's): the selection's
 * flame graph as flamebearer JSON (names; levels of [x offset, total,
 * self, name]; numTicks; maxSelf), metadata, and its timeline (samples
 * per durationDelta seconds from startTime). Times: now, now-1h, Unix
 * seconds or milliseconds, or the collector's own forms.
 */
void fp_coll_pyro_render(struct fp_coll_server *s, struct evhttp_request *req);
/*
 * A Connect error, {"code","message"}, with the HTTP status of code
 * (invalid_argument 400, unauthenticated 401, not_found 404, ...).
 */
void fp_coll_connect_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
