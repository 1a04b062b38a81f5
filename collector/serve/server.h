/* SPDX-License-Identifier: MIT */
/*
 * The collector's HTTP(S) server: one libevent loop thread owns the
 * listening socket and every connection; reads run on the reader thread
 * (readers.h), uploads are stored by the writer thread. Requests are routed
 * by path to the API handlers (api.c) and the web page (web.c); this
 * module does what is common to all of them: TLS, the bearer token,
 * method checks, body limits (evhttp refuses a body over --max-body-mb
 * with 413 as soon as its length is known, before reading it), JSON error
 * replies, and the counters /healthz shows. Uploads are written by the
 * writer thread (writeq.h), which also applies the retention.
 *
 * Routes:
 *   POST /api/v1/ingest    an agent's upload (token required)      api.c
 *   GET  /api/v1/series    what is stored, JSON                     api.c
 *   GET  /api/v1/profile   one merged gzip pprof                    api.c
 *   GET  /healthz          liveness and counters, JSON              api.c
 *   GET  /metrics          Prometheus text format                   api.c
 *   GET  /api/v1/flamegraph, /api/v1/diff, /api/v1/timeline: the web
 *                          page's JSON                              views.c
 *   GET  /                 the web page                             web.c
 *   GET  /top              a top table of one selection, HTML       web.c
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

struct event_base;
struct fp_coll_server;
struct evhttp_request;
struct evbuffer;
struct fp_backend;

/*
 * Opens the store, reads the token, binds the address and starts
 * serving on base. -errno with one line in err.
 * *ret is the caller's.
 */
int fp_coll_server_new(struct event_base *base, const struct fp_coll_config *c,
                       struct fp_coll_server **ret, char *err, size_t errlen);
/*
 * Once the loop has ended: stops taking connections, waits for the read
 * under way, answers the queued reads (503: stopping) and runs the loop
 * up to FP_COLL_STOP_FLUSH_MS more for those answers to be written.
 */
#define FP_COLL_STOP_FLUSH_MS 500
void fp_coll_server_stop(struct fp_coll_server *s);
/* Stops serving, closes the store. Accepts NULL. */
void fp_coll_server_free(struct fp_coll_server *s);
