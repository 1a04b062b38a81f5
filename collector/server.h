/* SPDX-License-Identifier: MIT */
/*
 * The collector's HTTP(S) server: one libevent loop thread owns the
 * listening socket, every connection and the store. Requests are routed
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
 *   GET  /                 the web page                             web.c
 *   GET  /top              a top table of one selection, HTML       web.c
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

struct event_base;
struct evhttp_request;
struct evbuffer;
struct fp_store;

struct fp_coll_stats {
        uint64_t uploads_stored, uploads_duplicate, uploads_rejected, uploads_failed;
        uint64_t samples_stored, bytes_received;
        uint64_t requests;
        uint64_t decode_ns, store_ns; /* time spent decoding and writing uploads */
        uint64_t groups;              /* store transactions that wrote uploads */
        int64_t started_ns;
};

struct fp_coll_server {
        struct event_base *base;
        struct evhttp *http;
        struct evhttp_bound_socket *sock;
        void *ssl_ctx;                 /* SSL_CTX, NULL: plain HTTP */
        struct fp_coll_writeq *writeq; /* the writer thread, with the read-write store */
        struct fp_store *store;        /* read-only: the loop thread's queries */
        uint64_t store_max_bytes;
        char *token; /* NULL: no authentication */
        size_t max_profile_bytes;
        bool tls;
        char listen[128]; /* what is served, for logs and the page */
        struct fp_coll_stats st;
};

/*
 * Opens the store, reads the token, binds the address and starts
 * serving on base. -errno with one line in err.
 * *ret is the caller's.
 */
int fp_coll_server_new(struct event_base *base, const struct fp_coll_config *c,
                       struct fp_coll_server **ret, char *err, size_t errlen);
/* Stops serving, closes the store. Accepts NULL. */
void fp_coll_server_free(struct fp_coll_server *s);

/* ---- for the handlers ---- */

/* Sends {"error": "..."} with the status code. */
void fp_coll_reply_error(struct evhttp_request *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends body (drained) with the status and content type. */
void fp_coll_reply(struct evhttp_request *req, int code, const char *content_type,
                   struct evbuffer *body);
