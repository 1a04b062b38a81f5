/* SPDX-License-Identifier: MIT */
/*
 * How the collector answers: status, content type, JSON errors; see http.h.
 */
#include "http.h"
#include "escape.h"
#include "writeq.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
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

void fp_coll_reply(struct evhttp_request *req, int code, const char *content_type,
                   struct evbuffer *body)
{
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

/*
 * The password of basic authentication (Authorization: Basic
 * base64(user:password)) into buf, as Pyroscope's and OpenTelemetry's
 * clients send a token; false when h is not that.
 */
static bool basic_password(const char *h, char *buf, size_t len)
{
        unsigned char raw[768];
        size_t n = strlen(h);
        int got;

        if (n % 4 || n == 0 || n / 4 * 3 >= sizeof(raw))
                return false;
        got = EVP_DecodeBlock(raw, (const unsigned char *)h, (int)n);
        if (got < 0)
                return false;
        /* EVP_DecodeBlock counts the padding's bytes as zeros: drop them. */
        for (size_t i = n; i > 0 && h[i - 1] == '='; i--)
                got--;
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
