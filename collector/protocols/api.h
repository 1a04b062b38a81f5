/* SPDX-License-Identifier: MIT */
/*
 * The collector's JSON and pprof API handlers (routes in server.h).
 *
 * POST /api/v1/ingest: decodes and validates the upload (ingest.c) and
 * stores it as one bucket keyed by its Idempotency-Key. 200
 * {"status":"stored",...}; 200 {"status":"duplicate"} for a key already
 * stored (the agent's retry after a lost answer); 400 for a bad upload,
 * 413 for a decompressed size over the limit, 503 when the store cannot
 * take it now (the agent retries).
 *
 * GET /api/v1/series: {"series":[{host, service, process, pid, starttime, exe,
 * event, first, last (RFC 3339), first_ns, last_ns, buckets, samples,
 * value, drops:{reason:count}}]}, filtered like the profile.
 *
 * GET /api/v1/profile: the merged gzip pprof of what the filter
 * (filter.h) selects; 404 when nothing matches.
 *
 * GET /healthz: {"status":"ok", counters}.
 *
 * GET /metrics: the same and more in the Prometheus text format: uploads
 * by outcome, bytes and samples received, decode and store-write latency
 * histograms, the write queue's depth, the store's size and budget,
 * requests by endpoint.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct fp_coll_server;
struct evhttp_request;

void fp_coll_api_ingest(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_api_series(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_api_profile(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_api_healthz(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_metrics(struct fp_coll_server *s, struct evhttp_request *req);

/* The read filter of req's query string (filter.h); answers 400 itself when it is bad. */
struct fp_coll_filter;

/*
 * The series and drop totals a filter selects, for the JSON listing and
 * the web page: fn is called for each series with the drops of its
 * target. Returns the number of series or -errno.
 */
struct fp_store_series;
struct fp_store_filter;
struct fp_coll_drops {
        size_t n;
        struct {
                const char *reason;
                uint64_t count;
        } d[32];
};
typedef int (*fp_coll_series_fn)(void *userdata, const struct fp_store_series *se,
                                 const struct fp_coll_drops *drops);
int fp_coll_api_walk_series(struct fp_coll_server *s, const struct fp_store_filter *f,
                            fp_coll_series_fn fn, void *userdata);
