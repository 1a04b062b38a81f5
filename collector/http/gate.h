/* SPDX-License-Identifier: MIT */
/*
 * The gate: what every connection passes through before libevent's HTTP
 * server sees a byte of it. libevent 2.1 reads a request's whole body
 * before the server sees its headers, so without the gate any client that
 * reaches the port could make the collector buffer --max-body-mb per
 * connection without a token, and hold as many connections as it likes
 * for as long as it likes.
 *
 * The gate watches each connection's input (plain or TLS) and holds back
 * a request's head until the blank line that ends it, judges the
 * head (fp_coll_gate_judge()), and then either passes the head and exactly
 * its body on, or passes a head of its own that carries the refusal
 * (FP_COLL_GATE_HEADER, no body, Connection: close) and drops everything
 * the client sends after it; the server answers the refusal
 * (fp_coll_gate_answer()) and closes. So:
 *
 *   - a body is taken only with a POST, and (with --token-file) only with
 *     the upload token: 401 from the headers, the body never read; but a
 *     call of the query API over Connect (read/querier.h: its paths start
 *     with FP_COLL_GATE_QUERY_PATHS) takes a body of at most
 *     FP_COLL_GATE_QUERY_BODY bytes without it (413 from a Content-Length
 *     past it; a chunked body, as Connect's Node.js client sends, is
 *     counted as it passes and the connection closed past it); with
 *     --read-token-file only with the read token (401 from the headers;
 *     the body, a Content-Length's or chunked, is then read and dropped,
 *     not buffered, and the connection kept, so that a client still
 *     sending it reads the 401 rather than a reset), and all query bodies on their way at once hold
 * at most FP_COLL_GATE_QUERY_INFLIGHT bytes (503 past it): evhttp buffers a body whole, so no
 * client can make the collector hold more; and a query's body must be whole within
 * FP_COLL_GATE_QUERY_BODY_S seconds of its head (else closed), so none holds a share of that for
 * long;
 *   - a connection's first head must arrive within FP_COLL_GATE_HEAD_S
 *     seconds of its accept, any later one within as long from its first
 *     byte, and a body at FP_COLL_GATE_MIN_RATE bytes a second after a
 *     grace of FP_COLL_GATE_BODY_S seconds, or the connection is closed;
 *   - --max-connections in all: a new connection past it makes room by
 *     shedding another (FP_GATE_SHED), the one that has earned the least:
 *     first the oldest that never finished a head (a flood of half-open
 *     connections), then the longest idle that only ever made requests
 *     without a body; never one in the middle of a request, one that
 *     uploaded with the token (an agent), nor one accepted less than
 *     FP_COLL_GATE_YOUNG_MS ago (its head may be on its way: a fast
 *     flood must not shed a client before the gate has read it). While
 *     still past the cap, an upload with the token goes in and any other
 *     request is answered 503 and closed; past a quarter more, a newcomer
 *     is closed at once;
 *   - --max-connections-per-ip from one address: past it 429 and closed.
 *
 * The gate only ever refuses more than the server would; a head the gate
 * cannot read the way the server would (two Content-Lengths, a body on
 * another method, a continuation line first) is refused with 400.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct bufferevent;
struct evhttp_request;
struct fp_coll_gate;

#define FP_COLL_GATE_HEADER         "X-Fleetprof-Gate"
#define FP_COLL_GATE_MAX_HEAD       (64 << 10) /* bytes of a request's head (as evhttp's limit) */
#define FP_COLL_GATE_HEAD_S         5          /* seconds to a head's end, see above */
#define FP_COLL_GATE_IDLE_MS        1000       /* idle this long, a bodiless client's may be shed */
#define FP_COLL_GATE_YOUNG_MS       250        /* younger than this, no connection is shed */
#define FP_COLL_GATE_BODY_S         30         /* grace for a body, then ... */
#define FP_COLL_GATE_MIN_RATE       (16 << 10) /* ... bytes a second on average */
#define FP_COLL_GATE_QUERY_BODY     (4 << 20)  /* a query's body, see above */
#define FP_COLL_GATE_QUERY_INFLIGHT (8 << 20)  /* all query bodies let in and not answered */
#define FP_COLL_GATE_QUERY_BODY_S   10         /* seconds to a query body's end from its head */
/* The paths of the query API's calls: their services. */
#define FP_COLL_GATE_QUERY_PATHS                                                                   \
        {                                                                                          \
                "/querier.v1.QuerierService/", "/settings.v1.SettingsService/"                     \
        }

/* Why a connection or request was refused; the index of its counter. */
enum fp_coll_gate_reason {
        FP_GATE_UNAUTHORIZED,      /* 401: a body without the upload token */
        FP_GATE_WRONG_TOKEN,       /* 401: a body with another bearer token */
        FP_GATE_BAD_HEAD,          /* 400: a head the gate cannot read as the server would */
        FP_GATE_NO_BODY,           /* 400: a body on a method other than POST */
        FP_GATE_HEAD_LARGE,        /* 431: a head past FP_COLL_GATE_MAX_HEAD */
        FP_GATE_BUSY,              /* 503: --max-connections reached */
        FP_GATE_PEER_BUSY,         /* 429: --max-connections-per-ip reached */
        FP_GATE_QUERY_LARGE,       /* 413: a query's body too large */
        FP_GATE_SLOW,              /* closed: a head or body too slow */
        FP_GATE_FLOOD,             /* closed at once: far past --max-connections */
        FP_GATE_SHED,              /* closed to make room for a new one (see above) */
        FP_GATE_READ_UNAUTHORIZED, /* 401: a query's body without the read token */
        FP_GATE_QUERIES_BUSY,      /* 503: FP_COLL_GATE_QUERY_INFLIGHT of query bodies */
        FP_GATE_N_REASONS,
};
extern const char *const fp_coll_gate_reason_names[FP_GATE_N_REASONS];

/*
 * A new gate. upload_token (NULL: uploads need none) and read_token
 * (NULL: queries need none) must outlive the gate. -ENOMEM.
 */
int fp_coll_gate_new(struct event_base *base, const char *upload_token, const char *read_token,
                     unsigned max_conns, unsigned max_per_peer, struct fp_coll_gate **ret);
/* Accepts NULL. Only after every connection is closed (evhttp_free()). */
void fp_coll_gate_free(struct fp_coll_gate *g);
/*
 * Puts the gate in front of a new connection's bufferevent (evhttp's
 * bevcb): returns bev, or NULL (bev freed) when out of memory. The gate
 * takes the connection's close callback (evhttp_connection_set_closecb()).
 */
struct bufferevent *fp_coll_gate_wrap(struct fp_coll_gate *g, struct bufferevent *bev);
/* fn(arg) is called when evcon closes; instead of evhttp_connection_set_closecb(). NULL: none. */
struct evhttp_connection;
void fp_coll_gate_on_close(struct fp_coll_gate *g, struct evhttp_connection *evcon,
                           void (*fn)(void *arg), void *arg);
/*
 * When the gate refused req: sets its answer's headers (Connection: close,
 * Retry-After where waiting helps), the status and the one-line message
 * into *ret_code and *ret_msg (static), and returns true; false for a
 * request it let in. The server writes the answer (a JSON error, or
 * Connect's for the query API).
 */
bool fp_coll_gate_refusal(struct evhttp_request *req, int *ret_code, const char **ret_msg);
/* Open connections, and refusals by reason (a copy). */
void fp_coll_gate_stats(const struct fp_coll_gate *g, size_t *ret_open,
                        uint64_t ret_refused[FP_GATE_N_REASONS]);

/*
 * The verdict on one request head: head is its bytes up to and without
 * the blank line's end of line (no NUL needed), token the upload token or
 * NULL, read_token the read token or NULL. Pure, for the unit tests and
 * the fuzzer.
 */
struct fp_coll_gate_verdict {
        int reason;      /* -1: let in; else an enum fp_coll_gate_reason */
        bool pass_rest;  /* let in with a Transfer-Encoding: pass the connection's rest as is */
        uint64_t body;   /* bytes of body that follow (Content-Length) */
        size_t line_len; /* length of the request line */
        bool line_ok;    /* the request line reads METHOD SP TARGET SP HTTP/1.x */
        bool query;      /* a call of the query API (its body no upload) */
        bool chunked;    /* a query's Transfer-Encoding is chunked (alone) */
};
void fp_coll_gate_judge(const char *head, size_t len, const char *token, const char *read_token,
                        struct fp_coll_gate_verdict *v);
