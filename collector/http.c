/* SPDX-License-Identifier: MIT */
/*
 * How the collector answers: status, content type, JSON errors; see http.h.
 */
#include "http.h"
#include "escape.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
