/* SPDX-License-Identifier: MIT */
/*
 * What the collector's handlers (api.c, web.c) and its writer queue
 * (writeq.c) share with the server that routes to them (server.c): the
 * server's state (the store handles, the writer queue, limits, counters)
 * and the way every answer is sent. The server owns struct
 * fp_coll_server; handlers on the loop thread read it and bump its
 * counters, reads on the reader thread (readers.h) get a copy of it as it
 * was when they were queued, and change nothing in it.
 */
#pragma once

#include "prom.h"
#include "store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
struct evhttp_uri;
struct evkeyvalq;
struct evbuffer;
struct fp_backend;
struct fp_coll_writeq_result;
struct fp_coll_readers;
struct fp_dbgi;
struct fp_dfiles;

#define FP_COLL_MAX_ROUTES       40
#define FP_COLL_GATE_REASONS_MAX 16 /* room for gate.h's reasons (readers.c checks) */

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
        /* The gate's figures (gate.h), in a read's copy of the server only: as it was queued. */
        size_t gate_open;
        uint64_t gate_refused[FP_COLL_GATE_REASONS_MAX]; /* FP_GATE_N_REASONS of them */
};

/*
 * What the reader thread (readers.h) and the loop thread share, under
 * lock: the store's figures as a read last found them (/healthz answers
 * them while the reader is busy), and how reads fared in the queue.
 */
struct fp_coll_read_state {
        pthread_mutex_t lock;
        struct fp_store_stats store;
        int store_r;                     /* what reading them returned: < 0 the store failed */
        int64_t store_ns;                /* CLOCK_MONOTONIC when read, 0: never */
        uint64_t waiting;                /* reads queued or running */
        uint64_t busy;                   /* reads refused with the queue full */
        uint64_t ran, ran_ns, waited_ns; /* reads run, their time and their time queued */
        uint64_t debug_stored, debug_held, debug_refused; /* uploads of debug files */
};

struct fp_coll_server {
        struct event_base *base;
        struct evhttp *http;
        struct evhttp_bound_socket *sock;
        void *ssl_ctx;                    /* SSL_CTX, NULL: plain HTTP */
        struct fp_coll_gate *gate;        /* every connection's (gate.h) */
        struct fp_coll_writeq *writeq;    /* the writer thread, with the read-write store */
        struct fp_coll_readers *readers;  /* the reader thread (readers.h) */
        struct fp_coll_read_state *reads; /* shared with it */
        struct fp_backend *store;         /* read-only: the reader thread's queries */
        struct fp_dbgi *names;            /* debuginfod.h; NULL: neither servers nor uploads */
        struct fp_dfiles *dfiles;         /* uploaded debug files: the reader thread's handle */
        struct fp_dfiles *dfiles_fetch;   /* the same, the debuginfod fetcher's */
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
 * A read as the reader thread runs it (readers.h): a copy of its request
 * (method, URI, headers, body) that the loop thread takes, and the answer
 * the handler gives, which the loop thread sends. evhttp's request and
 * connection are the loop thread's alone: while a thread runs a read
 * (fp_coll_req_copy_enter()), the getters below and every fp_coll_reply*()
 * work on its copy, and the request it was made from is only a key.
 * Elsewhere the getters are evhttp's own.
 */
struct fp_coll_req_copy;
/* On the loop thread: a copy of req, its body moved into it. NULL: out of memory. */
struct fp_coll_req_copy *fp_coll_req_copy_new(struct evhttp_request *req);
/* The request it was made from. */
struct evhttp_request *fp_coll_req_copy_req(const struct fp_coll_req_copy *c);
/* This thread's replies and getters work on c until fp_coll_req_copy_leave(). */
void fp_coll_req_copy_enter(struct fp_coll_req_copy *c);
void fp_coll_req_copy_leave(void);
/* Whether this thread runs a copied read now. */
bool fp_coll_req_copied(void);
/*
 * On the loop thread: sends the answer given to c (500 when the handler
 * gave none) on its request, and frees c.
 */
void fp_coll_req_copy_send(struct fp_coll_req_copy *c);
/* Frees c and the request it was made from, whose connection has closed. */
void fp_coll_req_copy_drop(struct fp_coll_req_copy *c);

const struct evhttp_uri *fp_coll_req_uri(struct evhttp_request *req);
struct evkeyvalq *fp_coll_req_headers(struct evhttp_request *req);     /* the request's */
struct evkeyvalq *fp_coll_req_out_headers(struct evhttp_request *req); /* the answer's */
struct evbuffer *fp_coll_req_body(struct evhttp_request *req);
int fp_coll_req_command(struct evhttp_request *req); /* enum evhttp_cmd_type */

/*
 * The bounds of one read, which the reader thread sets around it: its memory (fp_budget_begin() of
 * max_bytes, util.h) and how its errors read (connect: Connect's, else {"error"}). While its memory
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
