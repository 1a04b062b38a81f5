/* SPDX-License-Identifier: MIT */
/*
 * What the collector's handlers (api.c, web.c) and its writer queue
 * (writeq.c) share with the server that routes to them (server.c): the
 * server's state (the store handles, the writer queue, limits, counters)
 * and the way every answer is sent. The server owns struct
 * fp_coll_server; handlers read it and bump its counters on the loop
 * thread.
 */
#pragma once

#include "prom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
struct evbuffer;
struct fp_backend;
struct fp_coll_writeq_result;
struct fp_dbgi;

#define FP_COLL_MAX_ROUTES 40

/* The cookie the web page keeps the read token in (--read-token-file). */
#define FP_COLL_READ_COOKIE "fleetprof_read"

struct fp_coll_stats {
        uint64_t uploads_stored, uploads_duplicate, uploads_rejected, uploads_failed;
        uint64_t uploads_too_large, uploads_busy; /* 413 for the inflated size; 503 queue full */
        uint64_t samples_stored, bytes_received;
        uint64_t requests;
        uint64_t decode_ns, store_ns; /* time spent decoding and writing uploads */
        uint64_t groups;              /* store transactions that wrote uploads */
        int64_t started_ns;
        struct fp_hist decode; /* seconds to decode one upload */
        /* Requests by route (server.c's table), and by nothing (404). */
        struct {
                const char *path;
                uint64_t n;
        } by_route[FP_COLL_MAX_ROUTES];
        uint64_t not_found;
        uint64_t reads_over_memory; /* reads stopped at --max-read-mb */
};

struct fp_coll_server {
        struct event_base *base;
        struct evhttp *http;
        struct evhttp_bound_socket *sock;
        void *ssl_ctx;                 /* SSL_CTX, NULL: plain HTTP */
        struct fp_coll_gate *gate;     /* every connection's (gate.h) */
        struct fp_coll_writeq *writeq; /* the writer thread, with the read-write store */
        struct fp_backend *store;      /* read-only: the loop thread's queries */
        struct fp_dbgi *names;         /* debuginfod.h; NULL: no debuginfod */
        uint64_t store_max_bytes;
        uint64_t max_read_ns;    /* one read's time budget (--max-read-ms) */
        uint64_t max_read_bytes; /* one read's memory budget (--max-read-mb) */
        char *token;             /* NULL: no authentication */
        char *read_token;        /* NULL: reads are open */
        bool tls;
        char listen[128]; /* what is served, for logs and the page */
        struct fp_coll_stats st;
};

/*
 * Counts what became of one upload or push (writeq.h's result): its
 * decoding time, and stored, duplicate, refused (413 apart) or failed.
 */
void fp_coll_count_upload(struct fp_coll_stats *st, const struct fp_coll_writeq_result *res);

/* Compares tokens without an early exit, so timing does not reveal how much matched. */
bool fp_coll_token_equal(const char *a, const char *b);
/*
 * Whether an Authorization header carries token: "Bearer TOKEN", or
 * "Basic base64(user:TOKEN)" (any user) as Pyroscope's and OpenTelemetry's
 * clients send it.
 */
bool fp_coll_auth_ok(const char *header, const char *token);
/*
 * The value of cookie name in a Cookie header (NULL: none), percent-decoded
 * (the page sets it with encodeURIComponent), into buf; false when absent.
 */
bool fp_coll_cookie(const char *header, const char *name, char *buf, size_t len);
/*
 * Whether a read carries the read token: as a bearer token, as basic
 * authentication's password (Grafana's data sources send it so) or in
 * the FP_COLL_READ_COOKIE cookie (the web page). 1: it does; 0: none of
 * them is there; -1: one is, with another token. authorization and
 * cookie are the headers' values, NULL when absent. The gate (at a
 * query's head) and the server (at every read) both decide by it.
 */
int fp_coll_read_auth(const char *authorization, const char *cookie, const char *token);

/*
 * The bounds of one read, which the server sets around it on the loop
 * thread: its memory (fp_budget_begin() of max_bytes, util.h) and how its
 * errors read (connect: Connect's, else {"error"}). While its memory
 * budget is exceeded, fp_coll_reply() answers the budget's error (503, or
 * Connect's resource_exhausted) instead of what it was given, so no
 * answer is built from a read that was refused memory. fp_coll_read_end()
 * says whether the read ran past its budget.
 */
void fp_coll_read_begin(uint64_t max_bytes, bool connect);
bool fp_coll_read_end(void);

/* Connect's error body, {"code","message"}, with this HTTP status. */
void fp_coll_connect_reply(struct evhttp_request *req, int status, const char *code,
                           const char *msg);
/* The Connect error code of an HTTP status the collector answers with. */
const char *fp_coll_connect_code(int status);
/* Sends {"error": "..."} with the status code. */
void fp_coll_reply_error(struct evhttp_request *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends body (drained) with the status and content type. */
void fp_coll_reply(struct evhttp_request *req, int code, const char *content_type,
                   struct evbuffer *body);
