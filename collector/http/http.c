/* SPDX-License-Identifier: MIT */
/*
 * How the collector answers: status, content type, JSON errors; see http.h.
 */
#include "http.h"
#include "escape.h"
#include "util.h"
#include "writeq.h"

#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

bool fp_coll_token_equal(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        unsigned char d = la != lb;

        for (size_t i = 0; i < la; i++)
                d |= (unsigned char)a[i] ^ (unsigned char)b[i % (lb ? lb : 1)];
        return d == 0;
}

static _Thread_local struct {
        bool on, connect;
        uint64_t max_bytes;
} read_bounds;

void fp_coll_read_begin(uint64_t max_bytes, bool connect)
{
        read_bounds.on = true;
        read_bounds.connect = connect;
        read_bounds.max_bytes = max_bytes;
        fp_budget_begin(max_bytes);
}

bool fp_coll_read_end(void)
{
        bool over = fp_budget_exceeded();

        read_bounds.on = false;
        fp_budget_end();
        return over;
}

/* ---- a read's copy ---- */

struct fp_coll_req_copy {
        struct evhttp_request *req; /* a key off the loop thread, never read there */
        int cmd;
        struct evhttp_uri *uri; /* NULL: evhttp could not parse it either */
        struct evkeyvalq in, out;
        struct evbuffer *body, *reply;
        int code; /* 0: not answered yet */
        const char *reason;
};

static _Thread_local struct fp_coll_req_copy *copied;

/* The copy req's getters read on this thread, NULL: evhttp's request itself. */
static struct fp_coll_req_copy *copy_of(struct evhttp_request *req)
{
        if (!copied)
                return NULL;
        if (copied->req != req)
                abort(); /* a read answering another request than its own */
        return copied;
}

static void copy_headers(struct evkeyvalq *to, const struct evkeyvalq *from)
{
        const struct evkeyval *kv;

        TAILQ_FOREACH(kv, from, next)
        {
                /* What evhttp parsed or a handler set is valid; a refusal drops one header. */
                (void)evhttp_add_header(to, kv->key, kv->value);
        }
}

static void copy_free(struct fp_coll_req_copy *c)
{
        if (!c)
                return;
        if (c->uri)
                evhttp_uri_free(c->uri);
        evhttp_clear_headers(&c->in);
        evhttp_clear_headers(&c->out);
        if (c->body)
                evbuffer_free(c->body);
        if (c->reply)
                evbuffer_free(c->reply);
        free(c);
}

struct fp_coll_req_copy *fp_coll_req_copy_new(struct evhttp_request *req)
{
        struct fp_coll_req_copy *c = calloc(1, sizeof(*c));
        const char *uri = evhttp_request_get_uri(req);
        bool parsed = evhttp_request_get_evhttp_uri(req) != NULL;

        if (!c)
                return NULL;
        TAILQ_INIT(&c->in);
        TAILQ_INIT(&c->out);
        c->req = req;
        c->cmd = (int)evhttp_request_get_command(req);
        c->body = evbuffer_new();
        c->reply = evbuffer_new();
        /* evhttp parsed the URI with these flags; what it could not parse stays NULL. */
        if (uri && parsed)
                c->uri = evhttp_uri_parse_with_flags(uri, EVHTTP_URI_NONCONFORMANT);
        if (!c->body || !c->reply || (parsed && !c->uri) ||
            evbuffer_add_buffer(c->body, evhttp_request_get_input_buffer(req)) < 0) {
                copy_free(c);
                return NULL;
        }
        copy_headers(&c->in, evhttp_request_get_input_headers(req));
        return c;
}

struct evhttp_request *fp_coll_req_copy_req(const struct fp_coll_req_copy *c)
{
        return c->req;
}

void fp_coll_req_copy_enter(struct fp_coll_req_copy *c)
{
        copied = c;
}

void fp_coll_req_copy_leave(void)
{
        copied = NULL;
}

bool fp_coll_req_copied(void)
{
        return copied != NULL;
}

void fp_coll_req_copy_send(struct fp_coll_req_copy *c)
{
        if (!c->code) {
                evbuffer_drain(c->reply, evbuffer_get_length(c->reply));
                evbuffer_add_printf(c->reply,
                                    "{\"error\": \"the read ended without an answer\"}\n");
                evhttp_clear_headers(&c->out);
                evhttp_add_header(&c->out, "Content-Type", "application/json");
                c->code = 500;
                c->reason = "Internal Server Error";
        }
        copy_headers(evhttp_request_get_output_headers(c->req), &c->out);
        evhttp_send_reply(c->req, c->code, c->reason, c->reply);
        copy_free(c);
}

void fp_coll_req_copy_drop(struct fp_coll_req_copy *c)
{
        /*
         * evhttp detaches a request from its connection when the peer leaves
         * before the answer: it is then its handler's to free.
         */
        evhttp_request_free(c->req);
        copy_free(c);
}

const struct evhttp_uri *fp_coll_req_uri(struct evhttp_request *req)
{
        struct fp_coll_req_copy *c = copy_of(req);

        return c ? c->uri : evhttp_request_get_evhttp_uri(req);
}

struct evkeyvalq *fp_coll_req_headers(struct evhttp_request *req)
{
        struct fp_coll_req_copy *c = copy_of(req);

        return c ? &c->in : evhttp_request_get_input_headers(req);
}

struct evkeyvalq *fp_coll_req_out_headers(struct evhttp_request *req)
{
        struct fp_coll_req_copy *c = copy_of(req);

        return c ? &c->out : evhttp_request_get_output_headers(req);
}

struct evbuffer *fp_coll_req_body(struct evhttp_request *req)
{
        struct fp_coll_req_copy *c = copy_of(req);

        return c ? c->body : evhttp_request_get_input_buffer(req);
}

int fp_coll_req_command(struct evhttp_request *req)
{
        struct fp_coll_req_copy *c = copy_of(req);

        return c ? c->cmd : (int)evhttp_request_get_command(req);
}

/* Sends the answer, or, on a copy, keeps it for the loop thread to send. */
static void send_reply(struct evhttp_request *req, int code, const char *reason,
                       struct evbuffer *body)
{
        struct fp_coll_req_copy *c = copy_of(req);

        if (!c) {
                evhttp_send_reply(req, code, reason, body);
                return;
        }
        if (c->code) { /* the first answer stands */
                if (body)
                        evbuffer_drain(body, evbuffer_get_length(body));
                return;
        }
        c->code = code;
        c->reason = reason;
        if (body)
                evbuffer_add_buffer(c->reply, body);
}

/* The error of a read past its memory budget, instead of its answer. */
static void reply_budget(struct evhttp_request *req)
{
        char msg[200];

        snprintf(msg, sizeof(msg),
                 "the read needs more than %" PRIu64 " MiB of memory (--max-read-mb): "
                 "select less (fewer series, a shorter range)",
                 read_bounds.max_bytes >> 20);
        read_bounds.on = false; /* one answer */
        if (read_bounds.connect)
                fp_coll_connect_reply(req, 429, "resource_exhausted", msg);
        else
                fp_coll_reply_error(req, 503, "%s", msg);
}

void fp_coll_reply(struct evhttp_request *req, int code, const char *content_type,
                   struct evbuffer *body)
{
        if (read_bounds.on && fp_budget_exceeded()) {
                if (body)
                        evbuffer_drain(body, evbuffer_get_length(body));
                reply_budget(req);
                return;
        }
        struct evkeyvalq *h = fp_coll_req_out_headers(req);
        const char *reason = code == 200   ? "OK"
                             : code == 400 ? "Bad Request"
                             : code == 401 ? "Unauthorized"
                             : code == 404 ? "Not Found"
                             : code == 405 ? "Method Not Allowed"
                             : code == 413 ? "Payload Too Large"
                             : code == 429 ? "Too Many Requests"
                             : code == 431 ? "Request Header Fields Too Large"
                             : code == 503 ? "Service Unavailable"
                                           : "Error";

        evhttp_add_header(h, "Content-Type", content_type);
        evhttp_add_header(h, "Cache-Control", "no-store");
        if (fp_coll_req_command(req) == EVHTTP_REQ_HEAD) {
                /*
                 * The head a GET would have, and no body: evhttp writes a body it is
                 * given even to HEAD (and then no Content-Length), which a keep-alive
                 * peer would read as the start of its next answer.
                 */
                size_t len = body ? evbuffer_get_length(body) : 0;
                char n[32];
                snprintf(n, sizeof(n), "%zu", len);
                evhttp_remove_header(h, "Content-Length");
                evhttp_add_header(h, "Content-Length", n);
                if (body)
                        evbuffer_drain(body, len);
                send_reply(req, code, reason, NULL);
                return;
        }
        send_reply(req, code, reason, body);
}

void fp_coll_reply_error(struct evhttp_request *req, int code, const char *fmt, ...)
{
        struct evbuffer *b = evbuffer_new();
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (!b) {
                send_reply(req, 500, "Internal Server Error", NULL);
                return;
        }
        evbuffer_add_printf(b, "{\"error\": ");
        fp_escape_json_evb(b, msg);
        evbuffer_add_printf(b, "}\n");
        if (code == 401)
                evhttp_add_header(fp_coll_req_out_headers(req), "WWW-Authenticate",
                                  "Bearer realm=\"fleetprof\"");
        fp_coll_reply(req, code, "application/json", b);
        evbuffer_free(b);
}

void fp_coll_connect_reply(struct evhttp_request *req, int status, const char *code,
                           const char *msg)
{
        struct evbuffer *b = evbuffer_new();

        if (!b)
                return fp_coll_reply_error(req, status, "%s", msg);
        evbuffer_add_printf(b, "{\"code\":\"%s\",\"message\":", code);
        fp_escape_json_evb(b, msg);
        evbuffer_add_printf(b, "}\n");
        fp_coll_reply(req, status, "application/json", b);
        evbuffer_free(b);
}

const char *fp_coll_connect_code(int status)
{
        return status == 400 || status == 415                    ? "invalid_argument"
               : status == 401                                   ? "unauthenticated"
               : status == 413 || status == 429 || status == 431 ? "resource_exhausted"
               : status == 503                                   ? "unavailable"
                                                                 : "internal";
}

/*
 * The password of basic authentication (Authorization: Basic
 * base64(user:password)) into buf, as Pyroscope's and OpenTelemetry's
 * clients send a token; false when h is not that. h is strict base64:
 * groups of four of the alphabet's characters, at most two '=' and only
 * at the end (EVP_DecodeBlock alone takes '=' anywhere and counts it as
 * zero bits, so "====" would decode to three bytes and less padding).
 */
static bool basic_password(const char *h, char *buf, size_t len)
{
        static const char alphabet[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        unsigned char raw[768];
        size_t n = strlen(h), pad = 0;
        int got;

        if (n % 4 || n == 0 || n / 4 * 3 >= sizeof(raw))
                return false;
        while (pad < 2 && h[n - 1 - pad] == '=')
                pad++;
        if (strspn(h, alphabet) != n - pad)
                return false;
        got = EVP_DecodeBlock(raw, (const unsigned char *)h, (int)n);
        if (got != (int)(n / 4 * 3))
                return false;
        /* EVP_DecodeBlock counts the padding's bytes as zeros: drop them. */
        got -= (int)pad;
        raw[got] = 0;
        char *colon = memchr(raw, ':', (size_t)got);
        if (!colon || strlen((char *)raw) != (size_t)got)
                return false;
        snprintf(buf, len, "%s", colon + 1);
        return true;
}

bool fp_coll_auth_ok(const char *header, const char *token)
{
        char password[600];

        if (strncasecmp(header, "Bearer ", 7) == 0)
                return fp_coll_token_equal(header + 7, token);
        return strncasecmp(header, "Basic ", 6) == 0 &&
               basic_password(header + 6, password, sizeof(password)) &&
               fp_coll_token_equal(password, token);
}

bool fp_coll_cookie(const char *header, const char *name, char *buf, size_t len)
{
        size_t n = strlen(name);

        for (const char *p = header; p && *p;) {
                while (*p == ' ' || *p == ';')
                        p++;
                size_t item = strcspn(p, ";");
                if (item > n && strncmp(p, name, n) == 0 && p[n] == '=') {
                        char raw[512];
                        snprintf(raw, sizeof(raw), "%.*s", (int)(item - n - 1), p + n + 1);
                        char *v = evhttp_uridecode(raw, 0, NULL);
                        if (!v)
                                return false;
                        snprintf(buf, len, "%s", v);
                        free(v);
                        return true;
                }
                p += item;
        }
        return false;
}

int fp_coll_read_auth(const char *authorization, const char *cookie, const char *token)
{
        const char *h = authorization;
        char value[512];
        bool has_cookie = fp_coll_cookie(cookie, FP_COLL_READ_COOKIE, value, sizeof(value));

        if (h && strncasecmp(h, "Bearer ", 7) == 0 && fp_coll_token_equal(h + 7, token))
                return 1;
        if (h && strncasecmp(h, "Basic ", 6) == 0 && fp_coll_auth_ok(h, token))
                return 1;
        if (has_cookie && fp_coll_token_equal(value, token))
                return 1;
        return h || has_cookie ? -1 : 0;
}

void fp_coll_count_upload(struct fp_coll_stats *st, const struct fp_coll_writeq_result *res)
{
        st->decode_ns += (uint64_t)res->decode_ns;
        fp_hist_observe(&st->decode, (double)res->decode_ns / 1e9);
        if (res->decode_status == 413)
                st->uploads_too_large++;
        else if (res->decode_status)
                st->uploads_rejected++;
        else if (res->result == 0)
                st->uploads_stored++, st->samples_stored += res->samples;
        else if (res->result == -EALREADY)
                st->uploads_duplicate++;
        else
                st->uploads_failed++;
}
