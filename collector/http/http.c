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
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
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
        if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
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
                evhttp_send_reply(req, code, reason, NULL);
                return;
        }
        evhttp_send_reply(req, code, reason, body);
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
                evhttp_send_error(req, 500, NULL);
                return;
        }
        evbuffer_add_printf(b, "{\"error\": ");
        fp_escape_json_evb(b, msg);
        evbuffer_add_printf(b, "}\n");
        if (code == 401)
                evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
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
