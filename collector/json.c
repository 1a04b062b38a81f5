/* SPDX-License-Identifier: MIT */
/*
 * JSON, HTML and URL escaping and RFC 3339 times; see json.h.
 */
#include "json.h"

#include <event2/buffer.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
        size_t n;
        unsigned cp;

        if (s[0] < 0x80)
                return 1;
        if ((s[0] & 0xe0) == 0xc0)
                n = 2, cp = s[0] & 0x1f;
        else if ((s[0] & 0xf0) == 0xe0)
                n = 3, cp = s[0] & 0x0f;
        else if ((s[0] & 0xf8) == 0xf0)
                n = 4, cp = s[0] & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        /* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                return 0;
        return n;
}

void fp_coll_json_str(struct evbuffer *b, const char *s)
{
        const unsigned char *p = (const unsigned char *)(s ? s : "");

        evbuffer_add(b, "\"", 1);
        while (*p) {
                size_t n = utf8_len(p);

                if (n == 0) {
                        evbuffer_add(b, "\\ufffd", 6);
                        p++;
                } else if (n > 1) {
                        evbuffer_add(b, p, n);
                        p += n;
                } else if (*p == '"' || *p == '\\') {
                        evbuffer_add_printf(b, "\\%c", *p++);
                } else if (*p < 0x20 || *p == 0x7f) {
                        evbuffer_add_printf(b, "\\u%04x", *p++);
                } else {
                        evbuffer_add(b, p++, 1);
                }
        }
        evbuffer_add(b, "\"", 1);
}

void fp_coll_html_str(struct evbuffer *b, const char *s)
{
        const unsigned char *p = (const unsigned char *)(s ? s : "");

        while (*p) {
                size_t n = utf8_len(p);

                if (n == 0) {
                        evbuffer_add(b, "\xef\xbf\xbd", 3);
                        p++;
                        continue;
                }
                if (n > 1) {
                        evbuffer_add(b, p, n);
                        p += n;
                        continue;
                }
                switch (*p) {
                case '<':
                        evbuffer_add(b, "&lt;", 4);
                        break;
                case '>':
                        evbuffer_add(b, "&gt;", 4);
                        break;
                case '&':
                        evbuffer_add(b, "&amp;", 5);
                        break;
                case '"':
                        evbuffer_add(b, "&quot;", 6);
                        break;
                case '\'':
                        evbuffer_add(b, "&#39;", 5);
                        break;
                default:
                        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
                                evbuffer_add(b, "?", 1);
                        else
                                evbuffer_add(b, p, 1);
                }
                p++;
        }
}

void fp_coll_url_str(struct evbuffer *b, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";

        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-_.~", *p)) {
                        evbuffer_add(b, p, 1);
                } else {
                        char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
                        evbuffer_add(b, e, 3);
                }
        }
}

void fp_coll_rfc3339(int64_t ns, char *buf, unsigned long len)
{
        time_t t = (time_t)(ns / 1000000000LL);
        struct tm tm;

        if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, len, "%lld", (long long)ns);
}

int fp_coll_errf(char *err, size_t errlen, int r, const char *fmt, ...)
{
        va_list ap;

        if (err && errlen) {
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return r;
}
