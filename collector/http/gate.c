/* SPDX-License-Identifier: MIT */
/*
 * The connection gate; see gate.h.
 *
 * Not a bufferevent filter: evhttp takes a filter's "written" for the
 * socket's and shuts a closing connection down before its answer is sent.
 * Instead the gate watches the connection's input buffer: each time the
 * socket adds bytes, it takes them (held) before evhttp's read callback
 * runs and puts back what it lets through. One struct conn per connection:
 *
 *   ADMIT --(next loop turn: the peer is known, caps counted)--> HEAD
 *   HEAD  --(blank line; judged)--> BODY (Content-Length bytes) --> HEAD
 *                                   PASS (a Transfer-Encoding: the rest as is)
 *                                   DISCARD (refused: nothing more passes)
 *
 * The gate learns that evhttp freed a connection from its close callback,
 * which is therefore the gate's; the upload handler chains its own
 * through fp_coll_gate_on_close().
 *
 * The head is read line by line with libevent's own end-of-line rule
 * (EVBUFFER_EOL_CRLF), the rule evhttp reads it by, so both agree on where
 * the head ends; the judge reads headers as evhttp does (key up to the
 * first colon, case-insensitive; value without leading spaces or trailing
 * white space; continuation lines joined with a space; the first of a
 * repeated header counts) and refuses what could read otherwise.
 */
#include "gate.h"
#include "http.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

const char *const fp_coll_gate_reason_names[FP_GATE_N_REASONS] = {
    [FP_GATE_UNAUTHORIZED] = "unauthorized",
    [FP_GATE_WRONG_TOKEN] = "wrong_token",
    [FP_GATE_BAD_HEAD] = "bad_head",
    [FP_GATE_NO_BODY] = "body_not_allowed",
    [FP_GATE_HEAD_LARGE] = "head_too_large",
    [FP_GATE_BUSY] = "busy",
    [FP_GATE_PEER_BUSY] = "peer_busy",
    [FP_GATE_QUERY_LARGE] = "query_too_large",
    [FP_GATE_SLOW] = "slow",
    [FP_GATE_FLOOD] = "flood",
    [FP_GATE_SHED] = "shed",
    [FP_GATE_READ_UNAUTHORIZED] = "read_unauthorized",
    [FP_GATE_QUERIES_BUSY] = "query_bodies_busy",
};

/* Status and message of each refusal the server answers. */
static const struct {
        int code;
        const char *msg;
} answers[FP_GATE_N_REASONS] = {
    [FP_GATE_UNAUTHORIZED] = {401, "missing bearer token (Authorization: Bearer ...); "
                                   "the body was not read"},
    [FP_GATE_WRONG_TOKEN] = {401, "wrong bearer token (or basic password); the body was not read"},
    [FP_GATE_BAD_HEAD] = {400, "malformed request head"},
    [FP_GATE_NO_BODY] = {400, "only POST takes a request body"},
    [FP_GATE_HEAD_LARGE] = {431, "request head too large"},
    [FP_GATE_BUSY] = {503, "too many connections; try again later"},
    [FP_GATE_PEER_BUSY] = {429, "too many connections from this address; try again later"},
    [FP_GATE_QUERY_LARGE] = {413, "a query's body is larger than 4 MiB"},
    [FP_GATE_READ_UNAUTHORIZED] = {401, "a query's body needs the read token (Authorization: "
                                        "Bearer ...); the body was dropped unread"},
    [FP_GATE_QUERIES_BUSY] = {503, "too many query bodies on their way; try again later"},
};

/* ---- the judge ---- */

/*
 * Appends a header's value as evhttp keeps it: after the colon without
 * leading spaces, or a continuation line without leading blanks and after
 * a space; without trailing blanks either way.
 */
static bool value_append(char *buf, size_t *n, size_t cap, const char *v, size_t len, bool cont)
{
        while (len && (*v == ' ' || (cont && *v == '\t')))
                v++, len--;
        while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
                len--;
        if (*n + len + 2 > cap)
                return false;
        if (cont)
                buf[(*n)++] = ' ';
        memcpy(buf + *n, v, len);
        *n += len;
        buf[*n] = '\0';
        return true;
}

enum { H_OTHER, H_AUTH, H_LENGTH, H_TE, H_COOKIE, H_N };

static int header_kind(const char *key, size_t len)
{
        static const char *const names[H_N] = {
            [H_AUTH] = "Authorization",
            [H_LENGTH] = "Content-Length",
            [H_TE] = "Transfer-Encoding",
            [H_COOKIE] = "Cookie",
        };
        for (int k = H_AUTH; k < H_N; k++)
                if (strlen(names[k]) == len && strncasecmp(key, names[k], len) == 0)
                        return k;
        return H_OTHER;
}

/* The request line reads METHOD SP TARGET SP HTTP/1.x, each part free of spaces. */
static bool request_line_ok(const char *l, size_t len)
{
        const char *sp1 = memchr(l, ' ', len), *sp2;

        if (!sp1 || sp1 == l)
                return false;
        sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - l));
        if (!sp2 || sp2 == sp1 + 1)
                return false;
        len -= (size_t)(sp2 + 1 - l);
        return len == 8 && memcmp(sp2 + 1, "HTTP/1.", 7) == 0 && (sp2[8] == '0' || sp2[8] == '1');
}

/* Whether the request line's target is a call of the query API. */
static bool query_call(const char *line, size_t len)
{
        static const char *const paths[] = FP_COLL_GATE_QUERY_PATHS;
        const char *target = memchr(line, ' ', len);

        if (!target)
                return false;
        target++;
        len -= (size_t)(target - line);
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                if (len > strlen(paths[i]) && memcmp(target, paths[i], strlen(paths[i])) == 0)
                        return true;
        return false;
}

/*
 * Keeps a header's value (value_append()); a Cookie too long to keep is
 * only forgotten (its token is then not found), anything else is a head
 * the gate cannot read.
 */
static bool keep_value(int kind, char *buf, size_t *n, size_t cap, const char *v, size_t len,
                       bool cont, bool *ret_lost)
{
        if (value_append(buf, n, cap, v, len, cont))
                return true;
        if (kind != H_COOKIE)
                return false;
        *ret_lost = true;
        return true;
}

void fp_coll_gate_judge(const char *head, size_t len, const char *token, const char *read_token,
                        struct fp_coll_gate_verdict *v)
{
        bool cookie_lost = false;
        char vals[H_N][4096];
        size_t vlen[H_N] = {0};
        int seen[H_N] = {0};
        int last = -1; /* the kind of the header a continuation line belongs to; -2: none yet */
        const char *p = head, *end = head + len;
        bool first = true, post;

        *v = (struct fp_coll_gate_verdict){.reason = -1};
        if (memchr(head, '\0', len)) { /* evhttp's C strings would end there; the gate's not */
                v->reason = FP_GATE_BAD_HEAD;
                return;
        }
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

                if (l && p[l - 1] == '\r')
                        l--;
                if (first) {
                        v->line_len = l;
                        v->line_ok = request_line_ok(p, l);
                        first = false;
                        last = -2;
                } else if (*p == ' ' || *p == '\t') {
                        if (last == -2) { /* a continuation of nothing: evhttp refuses it */
                                v->reason = FP_GATE_BAD_HEAD;
                                return;
                        }
                        if (last > H_OTHER && seen[last] == 1 &&
                            !keep_value(last, vals[last], &vlen[last], sizeof(vals[last]), p, l,
                                        true, &cookie_lost)) {
                                v->reason = FP_GATE_BAD_HEAD;
                                return;
                        }
                } else {
                        const char *colon = memchr(p, ':', l);
                        if (!colon) {
                                v->reason = FP_GATE_BAD_HEAD;
                                return;
                        }
                        last = header_kind(p, (size_t)(colon - p));
                        if (last > H_OTHER && ++seen[last] == 1 &&
                            !keep_value(last, vals[last], &vlen[last], sizeof(vals[last]),
                                        colon + 1, l - (size_t)(colon + 1 - p), false,
                                        &cookie_lost)) {
                                v->reason = FP_GATE_BAD_HEAD;
                                return;
                        }
                }
                p = nl ? nl + 1 : end;
        }
        if (first) {
                v->reason = FP_GATE_BAD_HEAD;
                return;
        }
        for (int k = H_AUTH; k < H_N; k++)
                if (!seen[k])
                        vals[k][0] = '\0';
        if (seen[H_LENGTH] > 1) { /* which one counts is a matter of reading */
                v->reason = FP_GATE_BAD_HEAD;
                return;
        }
        if (seen[H_LENGTH]) {
                const char *s = vals[H_LENGTH];
                if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 15) {
                        v->reason = FP_GATE_BAD_HEAD;
                        return;
                }
                v->body = strtoull(s, NULL, 10);
        }
        if (!v->body && !seen[H_TE])
                return; /* no body: nothing to buffer, the server judges the rest */
        post = v->line_len > 5 && memcmp(head, "POST ", 5) == 0;
        if (!v->line_ok) {
                v->reason = FP_GATE_BAD_HEAD;
                return;
        }
        if (!post) {
                v->reason = FP_GATE_NO_BODY;
                return;
        }
        if (query_call(head, v->line_len)) {
                /*
                 * A query: a small body, and with a read token only with that token
                 * (read as the server reads it: fp_coll_read_auth()). Chunked: capped
                 * as it passes.
                 */
                v->query = true;
                if (v->body > FP_COLL_GATE_QUERY_BODY)
                        v->reason = FP_GATE_QUERY_LARGE;
                else if (read_token &&
                         fp_coll_read_auth(seen[H_AUTH] ? vals[H_AUTH] : NULL,
                                           seen[H_COOKIE] && !cookie_lost ? vals[H_COOKIE] : NULL,
                                           read_token) <= 0)
                        v->reason = FP_GATE_READ_UNAUTHORIZED;
                v->pass_rest = seen[H_TE] > 0;
                v->chunked = seen[H_TE] && strcasecmp(vals[H_TE], "chunked") == 0;
                return;
        }
        if (token && !(seen[H_AUTH] && fp_coll_auth_ok(vals[H_AUTH], token))) {
                v->reason = seen[H_AUTH] && (strncasecmp(vals[H_AUTH], "Bearer ", 7) == 0 ||
                                             strncasecmp(vals[H_AUTH], "Basic ", 6) == 0)
                                ? FP_GATE_WRONG_TOKEN
                                : FP_GATE_UNAUTHORIZED;
                return;
        }
        /* A Transfer-Encoding, whatever the server makes of it: the rest passes as is. */
        v->pass_rest = seen[H_TE] > 0;
}

/* ---- connections ---- */

enum state { ADMIT, HEAD, BODY, PASS, DRAIN, DISCARD };
/* Where a DRAIN of a chunked body is: a chunk's size line, its data (and CRLF), the trailer. */
#define DRAIN_MAX_LINE 1024       /* bytes of a chunk's size line or a trailer's line */
#define DRAIN_FRAMING  (64 << 10) /* bytes of chunked framing past the body's own */
#define DRAIN_MARK     ";drain"   /* after the refusal's reason: keep the connection */
enum chunk_at { CH_SIZE, CH_DATA, CH_TRAILER };

struct conn {
        struct conn *prev, *next;
        struct fp_coll_gate *g;
        struct bufferevent *bev;         /* evhttp's */
        struct evhttp_connection *evcon; /* known from admit() on */
        struct evbuffer_cb_entry *watch; /* on bev's input */
        struct event *timer;
        struct evbuffer *held; /* bytes the gate has not let through yet */
        struct evbuffer *tmp;
        size_t scanned; /* bytes of held already split into complete lines */
        size_t lines;
        enum state state;
        bool busy;          /* moving bytes: the watch's own changes are not new input */
        bool held_ref;      /* a reference on bev until admit() */
        uint64_t body_left; /* BODY, DRAIN: bytes of it still to come (DRAIN: of a chunk) */
        uint64_t drained;   /* DRAIN: bytes of the refused body so far */
        bool drain_chunked; /* DRAIN: the body is chunked (chunk_at says where) */
        enum chunk_at chunk_at;
        uint64_t pass_left;   /* PASS of a chunked query: bytes it may still pass (0: no cap) */
        int refuse;           /* -1, or the reason to refuse the next request with */
        bool counted_peer;    /* counted in g->peers */
        bool hung;            /* hung up: closing, not counted as open */
        unsigned char trust;  /* 0: no head passed yet; 1: bodiless requests; 2: an upload */
        bool in_request;      /* a head passed, and the server has not written an answer since */
        uint64_t query_bytes; /* of the query bodies it let in that are not answered yet */
        struct evbuffer_cb_entry *out_watch; /* on bev's output */
        uint64_t last_input; /* CLOCK_MONOTONIC ns of its last bytes (or its accept) */
        uint64_t since;      /* CLOCK_MONOTONIC ns of its accept */
        struct sockaddr_storage peer;
        void (*on_close)(void *arg);
        void *on_close_arg;
};

struct fp_coll_gate {
        struct event_base *base;
        const char *token, *read_token;
        unsigned max_conns, max_per_peer;
        struct conn *conns, *tail; /* newest first */
        size_t open, hung;
        uint64_t query_bytes; /* every connection's query_bytes */
        uint64_t released;    /* query bytes answered or closed since the last trim */
        struct event *trim;   /* gives the heap's free pages back, after large query bodies */
        struct peer *peers;   /* connections per address: open addressing, cap_peers a power of 2 */
        size_t cap_peers, used_peers;
        uint64_t refused[FP_GATE_N_REASONS];
};

/* An address and how many counted connections come from it (0: a slot kept until a rebuild). */
struct peer {
        uint8_t key[17]; /* family, then the address (IPv4's 4 bytes or IPv6's 16) */
        bool used;
        uint32_t n;
};

static void peer_key(const struct sockaddr_storage *a, uint8_t key[17])
{
        memset(key, 0, 17);
        key[0] = (uint8_t)a->ss_family;
        if (a->ss_family == AF_INET)
                memcpy(key + 1, &((const struct sockaddr_in *)a)->sin_addr, 4);
        else if (a->ss_family == AF_INET6)
                memcpy(key + 1, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
        /* a UNIX socket: one peer */
}

static size_t peer_hash(const uint8_t key[17])
{
        uint64_t h = fp_fnv1a(FP_FNV1A_SEED, key, 17);

        return (size_t)(h ^ h >> 29);
}

/* The slot of key (found, or where it goes); the table has room. */
static struct peer *peer_slot(struct peer *t, size_t cap, const uint8_t key[17])
{
        for (size_t i = peer_hash(key) & (cap - 1);; i = (i + 1) & (cap - 1))
                if (!t[i].used || memcmp(t[i].key, key, 17) == 0)
                        return &t[i];
}

/* Keeps a quarter of the table free, dropping the addresses no connection counts any more. */
static int peers_room(struct fp_coll_gate *g)
{
        if (g->cap_peers && (g->used_peers + 1) * 4 <= g->cap_peers * 3)
                return 0;
        size_t live = 0, cap = 64;
        for (size_t i = 0; i < g->cap_peers; i++)
                live += g->peers[i].used && g->peers[i].n;
        while ((live + 1) * 2 > cap)
                cap *= 2;
        struct peer *t = calloc(cap, sizeof(*t));
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < g->cap_peers; i++)
                if (g->peers[i].used && g->peers[i].n)
                        *peer_slot(t, cap, g->peers[i].key) = g->peers[i];
        free(g->peers);
        g->peers = t;
        g->cap_peers = cap;
        g->used_peers = live;
        return 0;
}

/* A connection from a counted; false when the address already has max of them (or no memory). */
static bool peer_count(struct fp_coll_gate *g, const struct sockaddr_storage *a, unsigned max)
{
        uint8_t key[17];
        struct peer *p;

        if (peers_room(g) < 0)
                return false;
        peer_key(a, key);
        p = peer_slot(g->peers, g->cap_peers, key);
        if (p->used && p->n >= max)
                return false;
        if (!p->used) {
                memcpy(p->key, key, 17);
                p->used = true;
                g->used_peers++;
        }
        p->n++;
        return true;
}

static void peer_uncount(struct fp_coll_gate *g, const struct sockaddr_storage *a)
{
        uint8_t key[17];
        struct peer *p;

        peer_key(a, key);
        p = peer_slot(g->peers, g->cap_peers, key);
        if (p->used && p->n)
                p->n--;
}

/*
 * The query bodies c holds are answered (or c closed): evhttp frees them
 * once the answer is written. The collector keeps freed memory for its
 * next read (main.c's mallopt()), so megabytes of query bodies would stay
 * resident; once every body is gone and at least a whole query's worth
 * went, the heap's free pages are given back a second later.
 */
static void release_query(struct conn *c)
{
        struct fp_coll_gate *g = c->g;
        struct timeval tv = {.tv_sec = 1};

        g->query_bytes -= c->query_bytes;
        g->released += c->query_bytes;
        c->query_bytes = 0;
        if (g->trim && g->query_bytes == 0 && g->released >= FP_COLL_GATE_QUERY_BODY &&
            !evtimer_pending(g->trim, NULL))
                evtimer_add(g->trim, &tv);
}

static void on_trim(evutil_socket_t fd, short what, void *arg)
{
        struct fp_coll_gate *g = arg;

        (void)fd, (void)what;
        if (g->query_bytes)
                return; /* the next release schedules it again */
        malloc_trim(0);
        g->released = 0;
}

static void arm(struct conn *c, int seconds)
{
        struct timeval tv = {.tv_sec = seconds};

        evtimer_add(c->timer, &tv);
}

/* Frees what c holds, and c. */
static void conn_release(struct conn *c)
{
        if (c->watch)
                evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->watch);
        if (c->out_watch)
                evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_watch);
        if (c->held_ref)
                bufferevent_decref(c->bev);
        if (c->timer)
                event_free(c->timer);
        if (c->held)
                evbuffer_free(c->held);
        if (c->tmp)
                evbuffer_free(c->tmp);
        free(c);
}

static void conn_free(struct conn *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else
                c->g->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                c->g->tail = c->prev;
        c->g->open--;
        c->g->hung -= c->hung;
        release_query(c);
        if (c->counted_peer)
                peer_uncount(c->g, &c->peer);
        conn_release(c);
}

/* evhttp frees the connection. */
static void on_evcon_close(struct evhttp_connection *evcon, void *arg)
{
        struct conn *c = arg;

        (void)evcon;
        if (c->on_close)
                c->on_close(c->on_close_arg);
        conn_free(c);
}

/* Has evhttp close the connection, as if the peer had gone (its error callback frees it). */
static void hang_up(struct conn *c, enum fp_coll_gate_reason why)
{
        c->g->refused[why]++;
        if (!c->hung)
                c->g->hung++;
        c->hung = true;
        c->state = DISCARD;
        evtimer_del(c->timer);
        bufferevent_trigger_event(c->bev, BEV_EVENT_EOF | BEV_EVENT_READING,
                                  BEV_TRIG_DEFER_CALLBACKS);
}

/*
 * The connection to shed for a newcomer (not c), or NULL: the oldest that
 * never finished a head, else the longest idle of those that only made
 * bodiless requests; never one in a request or one that uploaded.
 */
static struct conn *victim(struct fp_coll_gate *g, const struct conn *c)
{
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        struct conn *idle = NULL;

        /* Oldest first: in a flood, the first one looked at is the one. */
        for (struct conn *o = g->tail; o; o = o->prev) {
                if (now - o->since < (uint64_t)FP_COLL_GATE_YOUNG_MS * 1000000)
                        break; /* the rest are younger still */
                if (o == c || o->hung || o->state != HEAD)
                        continue;
                if (o->trust == 0)
                        return o;
                if (o->trust == 1 && !idle && !o->in_request && evbuffer_get_length(o->held) == 0 &&
                    now - o->last_input >= (uint64_t)FP_COLL_GATE_IDLE_MS * 1000000)
                        idle = o;
        }
        return idle;
}

/*
 * From the next loop turn on (or the first input), evhttp has set the
 * socket and its callbacks: the peer is known and so is the connection.
 * Returns false when evhttp already freed it (c is gone).
 */
static bool admit(struct conn *c)
{
        struct fp_coll_gate *g = c->g;
        socklen_t sl = sizeof(c->peer);
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        void *evcon = NULL;

        evtimer_del(c->timer);
        bufferevent_getcb(c->bev, NULL, NULL, NULL, &evcon);
        if (!evcon) { /* freed before it read a byte: only our reference kept it */
                conn_free(c);
                return false;
        }
        c->evcon = evcon;
        evhttp_connection_set_closecb(c->evcon, on_evcon_close, c);
        bufferevent_decref(c->bev);
        c->held_ref = false;
        c->state = HEAD;
        arm(c, FP_COLL_GATE_HEAD_S); /* its first head, from now */
        if (g->open - g->hung > g->max_conns) {
                struct conn *v = victim(g, c);
                if (v)
                        hang_up(v, FP_GATE_SHED);
        }
        /* Past the cap it may still send its head: an upload with the token goes in. */
        if (g->open - g->hung > (size_t)g->max_conns + g->max_conns / 4) {
                hang_up(c, FP_GATE_FLOOD);
                return true;
        }
        if (fd < 0 || getpeername(fd, (struct sockaddr *)&c->peer, &sl) < 0)
                return true;
        if (!peer_count(g, &c->peer, g->max_per_peer)) {
                c->refuse = FP_GATE_PEER_BUSY;
                return true;
        }
        c->counted_peer = true;
        return true;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct conn *c = arg;

        (void)fd, (void)what;
        if (c->state == ADMIT)
                (void)admit(c);
        else if (c->state == HEAD || c->state == BODY || c->state == DRAIN ||
                 (c->state == PASS && c->query_bytes))
                hang_up(c, c->refuse >= 0 ? c->refuse : FP_GATE_SLOW);
}

/* Writes the refusal's head for evhttp: the request line (when it reads as one), the mark. */
static void refuse(struct conn *c, const char *line, size_t len, bool line_ok, int why, bool drain,
                   struct evbuffer *dst)
{
        c->g->refused[why]++;
        if (line_ok)
                evbuffer_add(dst, line, len);
        else
                evbuffer_add_printf(dst, "GET / HTTP/1.1");
        evbuffer_add_printf(dst, "\r\n" FP_COLL_GATE_HEADER ": %d%s\r\nContent-Length: 0\r\n\r\n",
                            why, drain ? DRAIN_MARK : "");
        c->state = DISCARD;
        evtimer_del(c->timer);
}

/* Passes the head on without any FP_COLL_GATE_HEADER of the client's (nor its continuations). */
static void pass_head(const char *head, size_t len, struct evbuffer *dst)
{
        const char *p = head, *end = head + len;
        size_t klen = strlen(FP_COLL_GATE_HEADER);
        bool dropping = false, first = true;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *next = nl ? nl + 1 : end;

                if (first)
                        dropping = false;
                else if (*p != ' ' && *p != '\t')
                        dropping = (size_t)(end - p) > klen && p[klen] == ':' &&
                                   strncasecmp(p, FP_COLL_GATE_HEADER, klen) == 0;
                if (!dropping)
                        evbuffer_add(dst, p, (size_t)(next - p));
                first = false;
                p = next;
        }
}

/* A complete head of hlen bytes (the blank line's end of line, eol, more) starts c->held. */
static void judge_head(struct conn *c, size_t hlen, size_t eol, struct evbuffer *dst)
{
        struct fp_coll_gate_verdict v;
        const char *h = (const char *)evbuffer_pullup(c->held, (ev_ssize_t)(hlen + eol));

        if (!h) { /* out of memory: nothing sensible to pass on */
                hang_up(c, FP_GATE_FLOOD);
                return;
        }
        fp_coll_gate_judge(h, hlen, c->g->token, c->g->read_token, &v);
        if (c->refuse >= 0 && v.reason < 0)
                v.reason = c->refuse;
        /* Past the cap, uploads with the token go before everyone else: the rest wait (503). */
        bool upload = (v.body || v.pass_rest) && !v.query;
        if (v.reason < 0 && !upload && c->g->open - c->g->hung > c->g->max_conns)
                v.reason = FP_GATE_BUSY;
        /* Query bodies are buffered whole by evhttp: all of them together are bounded. */
        uint64_t query = v.query ? (v.pass_rest ? FP_COLL_GATE_QUERY_BODY : v.body) : 0;
        if (v.reason < 0 && query && c->g->query_bytes + query > FP_COLL_GATE_QUERY_INFLIGHT)
                v.reason = FP_GATE_QUERIES_BUSY;
        if (v.reason >= 0) {
                /*
                 * A query refused for its token: its body (bounded as any query's) is read
                 * and dropped, not buffered, and the connection kept, so that the client,
                 * still sending it, reads its 401 rather than a reset.
                 */
                bool drain = v.reason == FP_GATE_READ_UNAUTHORIZED &&
                             ((v.body && !v.pass_rest) || v.chunked);
                refuse(c, h, v.line_len, v.line_ok, v.reason, drain, dst);
                if (drain) {
                        c->state = DRAIN;
                        c->drain_chunked = v.chunked;
                        c->chunk_at = CH_SIZE;
                        c->body_left = v.chunked ? 0 : v.body;
                        c->drained = 0;
                        arm(c, FP_COLL_GATE_QUERY_BODY_S);
                }
        } else {
                pass_head(h, hlen + eol, dst);
                c->in_request = true;
                c->query_bytes += query;
                c->g->query_bytes += query;
                /* An upload that passed the judge (with the token, when there is one). */
                if (upload)
                        c->trust = 2;
                else if (c->trust == 0)
                        c->trust = 1;
                c->body_left = v.body;
                c->pass_left = v.pass_rest && v.query ? FP_COLL_GATE_QUERY_BODY : 0;
                c->state = v.pass_rest ? PASS : v.body ? BODY : HEAD;
                evtimer_del(c->timer);
                /* A query's body holds a share of the bound on them all: it comes at once. */
                if (query)
                        arm(c, FP_COLL_GATE_QUERY_BODY_S);
                else if (c->state == BODY)
                        arm(c, FP_COLL_GATE_BODY_S + (int)(v.body / FP_COLL_GATE_MIN_RATE));
        }
        evbuffer_drain(c->held, hlen + eol);
        c->scanned = 0;
        c->lines = 0;
}

/* Looks for the blank line in c->held. Returns true when a head was judged (or refused). */
static bool read_head(struct conn *c, struct evbuffer *dst)
{
        struct evbuffer_ptr p;
        size_t eol;

        for (;;) {
                if (evbuffer_ptr_set(c->held, &p, c->scanned, EVBUFFER_PTR_SET) < 0)
                        break;
                struct evbuffer_ptr e = evbuffer_search_eol(c->held, &p, &eol, EVBUFFER_EOL_CRLF);
                if (e.pos < 0)
                        break;
                if ((size_t)e.pos == c->scanned && c->lines > 0) {
                        judge_head(c, c->scanned, eol, dst);
                        return true;
                }
                c->scanned = (size_t)e.pos + eol;
                c->lines++;
        }
        if (evbuffer_get_length(c->held) > FP_COLL_GATE_MAX_HEAD) {
                size_t n = evbuffer_get_length(c->held);
                const char *h = (const char *)evbuffer_pullup(c->held, (ev_ssize_t)n);
                const char *nl = h ? memchr(h, '\n', n) : NULL;
                size_t line = nl ? (size_t)(nl - h) : 0;

                if (line && h[line - 1] == '\r')
                        line--;
                refuse(c, h, line, line && request_line_ok(h, line), FP_GATE_HEAD_LARGE, false,
                       dst);
                evbuffer_drain(c->held, n);
                return true;
        }
        return false;
}

/*
 * Drops what c->held has of a refused query's body (DRAIN). Returns true
 * when the body ended (c back in HEAD, for its next request) or the
 * connection was hung up; false when it needs more bytes. A chunked body
 * is followed by its framing: size lines of at most 1 KiB, the data and
 * its CRLF, the trailer up to its blank line; in all at most a query's
 * FP_COLL_GATE_QUERY_BODY bytes.
 */
static bool drain_body(struct conn *c)
{
        bool ended = false;

        while (!ended) {
                if (c->body_left) {
                        size_t n = evbuffer_get_length(c->held);
                        if (n == 0)
                                return false;
                        if (n > c->body_left)
                                n = (size_t)c->body_left;
                        evbuffer_drain(c->held, n);
                        c->body_left -= n;
                        c->drained += n;
                        ended = !c->body_left && !c->drain_chunked;
                        continue;
                }
                size_t eol, len;
                struct evbuffer_ptr e = evbuffer_search_eol(c->held, NULL, &eol, EVBUFFER_EOL_CRLF);
                if (e.pos < 0) {
                        if (evbuffer_get_length(c->held) <= DRAIN_MAX_LINE)
                                return false;
                        hang_up(c, FP_GATE_BAD_HEAD);
                        return true;
                }
                len = (size_t)e.pos;
                char line[DRAIN_MAX_LINE + 1] = "";
                if (len <= DRAIN_MAX_LINE)
                        evbuffer_copyout(c->held, line, len);
                evbuffer_drain(c->held, len + eol);
                c->drained += len + eol;
                if (len > DRAIN_MAX_LINE) {
                        hang_up(c, FP_GATE_BAD_HEAD);
                        return true;
                }
                if (c->chunk_at == CH_TRAILER) {
                        ended = len == 0; /* the blank line that ends the body */
                } else if (c->chunk_at == CH_DATA) {
                        c->chunk_at = CH_SIZE; /* the CRLF after a chunk's data */
                } else {
                        char *end;
                        unsigned long long size = strtoull(line, &end, 16);
                        if (end == line || (*end && *end != ';' && *end != ' ' && *end != '\t') ||
                            size > FP_COLL_GATE_QUERY_BODY) {
                                hang_up(c, FP_GATE_BAD_HEAD);
                                return true;
                        }
                        c->chunk_at = size ? CH_DATA : CH_TRAILER;
                        c->body_left = size;
                }
                if (c->drained > FP_COLL_GATE_QUERY_BODY + DRAIN_FRAMING) {
                        hang_up(c, FP_GATE_QUERY_LARGE);
                        return true;
                }
        }
        c->state = HEAD;
        arm(c, FP_COLL_GATE_HEAD_S); /* its next head, if any */
        return true;
}

/* Lets through what c->held's bytes allow, into in (evhttp's input). */
static void let_through(struct conn *c, struct evbuffer *in)
{
        while (evbuffer_get_length(c->held) > 0) {
                switch (c->state) {
                case ADMIT:
                case HEAD:
                        if (!read_head(c, in))
                                return;
                        break;
                case BODY: {
                        size_t n = evbuffer_get_length(c->held);
                        if (n > c->body_left)
                                n = (size_t)c->body_left;
                        evbuffer_remove_buffer(c->held, in, n);
                        c->body_left -= n;
                        if (!c->body_left) {
                                c->state = HEAD;
                                evtimer_del(c->timer);
                        }
                        break;
                }
                case PASS:
                        evbuffer_add_buffer(in, c->held);
                        return;
                case DRAIN:
                        if (!drain_body(c))
                                return;
                        break;
                case DISCARD:
                        evbuffer_drain(c->held, evbuffer_get_length(c->held));
                        return;
                }
        }
}

/*
 * The socket added info->n_added bytes to the end of in, and evhttp's read
 * callback runs next: the new bytes go to held, and back comes what may pass.
 */
static void on_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
        struct conn *c = arg;
        size_t len = evbuffer_get_length(in);

        if (c->busy || !info->n_added || info->n_added > len)
                return;
        if (c->state == ADMIT && !admit(c))
                return;
        c->last_input = fp_now_ns(CLOCK_MONOTONIC);
        c->busy = true;
        if (c->state == PASS && c->pass_left) {
                /* A chunked query: its bytes counted as they pass, the connection's rest too. */
                if (info->n_added > c->pass_left) {
                        evbuffer_remove_buffer(in, c->tmp, len - info->n_added);
                        evbuffer_drain(in, evbuffer_get_length(in));
                        evbuffer_add_buffer(in, c->tmp);
                        hang_up(c, FP_GATE_QUERY_LARGE);
                } else {
                        c->pass_left -= info->n_added;
                }
        } else if (c->state != PASS) {
                if (evbuffer_get_length(c->held) == 0 && c->state == HEAD && c->refuse < 0 &&
                    c->trust > 0)
                        arm(c, FP_COLL_GATE_HEAD_S); /* a later head's first byte */
                evbuffer_remove_buffer(in, c->tmp, len - info->n_added);
                evbuffer_add_buffer(c->held, in);
                /* A bufferevent may keep the end of its input frozen but while it reads. */
                bool frozen = evbuffer_add(in, "", 0) < 0;
                if (frozen)
                        evbuffer_unfreeze(in, 0);
                evbuffer_add_buffer(in, c->tmp);
                let_through(c, in);
                if (frozen)
                        evbuffer_freeze(in, 0);
        }
        c->busy = false;
}

/* The server writes an answer: the request it answers is no longer in the server's hands. */
static void on_output(struct evbuffer *out, const struct evbuffer_cb_info *info, void *arg)
{
        struct conn *c = arg;

        (void)out;
        if (info->n_added) {
                c->in_request = false;
                release_query(c);
        }
}

struct bufferevent *fp_coll_gate_wrap(struct fp_coll_gate *g, struct bufferevent *bev)
{
        struct conn *c = calloc(1, sizeof(*c));

        if (!c)
                goto fail;
        c->g = g;
        c->bev = bev;
        c->refuse = -1;
        c->held = evbuffer_new();
        c->tmp = evbuffer_new();
        c->timer = evtimer_new(g->base, on_timer, c);
        if (!c->held || !c->tmp || !c->timer)
                goto fail;
        c->watch = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
        c->out_watch = evbuffer_add_cb(bufferevent_get_output(bev), on_output, c);
        if (!c->watch || !c->out_watch)
                goto fail;
        bufferevent_incref(bev); /* until admit(): evhttp could free it before */
        c->held_ref = true;
        c->next = g->conns;
        if (g->conns)
                g->conns->prev = c;
        else
                g->tail = c;
        g->conns = c;
        g->open++;
        c->since = c->last_input = fp_now_ns(CLOCK_MONOTONIC);
        arm(c, 0);
        return bev;
fail:
        if (c)
                conn_release(c);
        bufferevent_free(bev);
        return NULL;
}

void fp_coll_gate_on_close(struct fp_coll_gate *g, struct evhttp_connection *evcon,
                           void (*fn)(void *arg), void *arg)
{
        for (struct conn *c = g->conns; c; c = c->next)
                if (c->evcon == evcon) {
                        c->on_close = fn;
                        c->on_close_arg = arg;
                        return;
                }
}

bool fp_coll_gate_refusal(struct evhttp_request *req, int *ret_code, const char **ret_msg)
{
        const char *mark =
            evhttp_find_header(evhttp_request_get_input_headers(req), FP_COLL_GATE_HEADER);
        int why;

        if (!mark)
                return false;
        why = atoi(mark);
        if (why < 0 || why >= FP_GATE_N_REASONS || !answers[why].code)
                why = FP_GATE_BAD_HEAD;
        /* A drained refusal keeps its connection (judge_head()); every other one closes. */
        if (!strstr(mark, DRAIN_MARK))
                evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        if (why == FP_GATE_BUSY || why == FP_GATE_PEER_BUSY || why == FP_GATE_QUERIES_BUSY)
                evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        *ret_code = answers[why].code;
        *ret_msg = answers[why].msg;
        return true;
}

int fp_coll_gate_new(struct event_base *base, const char *upload_token, const char *read_token,
                     unsigned max_conns, unsigned max_per_peer, struct fp_coll_gate **ret)
{
        struct fp_coll_gate *g = calloc(1, sizeof(*g));

        if (!g)
                return -ENOMEM;
        g->trim = evtimer_new(base, on_trim, g);
        if (!g->trim) {
                free(g);
                return -ENOMEM;
        }
        g->base = base;
        g->token = upload_token;
        g->read_token = read_token;
        g->max_conns = max_conns;
        g->max_per_peer = max_per_peer;
        *ret = g;
        return 0;
}

void fp_coll_gate_free(struct fp_coll_gate *g)
{
        if (!g)
                return;
        while (g->conns) /* not yet admitted when evhttp_free() freed them */
                conn_free(g->conns);
        if (g->trim)
                event_free(g->trim);
        free(g->peers);
        free(g);
}

void fp_coll_gate_stats(const struct fp_coll_gate *g, size_t *ret_open,
                        uint64_t ret_refused[FP_GATE_N_REASONS])
{
        *ret_open = g->open;
        memcpy(ret_refused, g->refused, sizeof(g->refused));
}
