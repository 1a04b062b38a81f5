/* SPDX-License-Identifier: MIT */
/*
 * Escaping of untrusted text for JSON, HTML, URLs and terminals; see
 * escape.h.
 */
#include "escape.h"

#include <event2/buffer.h>
#include <string.h>

void fp_write_file(void *ctx, const void *data, size_t len)
{
        fwrite(data, 1, len, ctx);
}

void fp_write_evbuffer(void *ctx, const void *data, size_t len)
{
        evbuffer_add(ctx, data, len);
}

size_t fp_utf8_put(char *out, uint32_t c)
{
        if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
                c = 0xfffd;
        if (c < 0x80) {
                out[0] = (char)c;
                return 1;
        }
        if (c < 0x800) {
                out[0] = (char)(0xc0 | c >> 6);
                out[1] = (char)(0x80 | (c & 0x3f));
                return 2;
        }
        if (c < 0x10000) {
                out[0] = (char)(0xe0 | c >> 12);
                out[1] = (char)(0x80 | (c >> 6 & 0x3f));
                out[2] = (char)(0x80 | (c & 0x3f));
                return 3;
        }
        out[0] = (char)(0xf0 | c >> 18);
        out[1] = (char)(0x80 | (c >> 12 & 0x3f));
        out[2] = (char)(0x80 | (c >> 6 & 0x3f));
        out[3] = (char)(0x80 | (c & 0x3f));
        return 4;
}

size_t fp_utf8_len(const unsigned char *s)
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
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                return 0;
        return n;
}

int fp_utf8_valid(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        while (*p) {
                size_t n = fp_utf8_len(p);
                if (n == 0)
                        return 0;
                p += n;
        }
        return 1;
}

static void put_hex(fp_write_fn w, void *ctx, const char *prefix, unsigned v, int digits)
{
        /* Percent-encoding is conventionally upper case, JSON's \u and \x lower case. */
        const char *hex = prefix[0] == '%' ? "0123456789ABCDEF" : "0123456789abcdef";
        char buf[8];
        size_t n = strlen(prefix);

        memcpy(buf, prefix, n);
        for (int i = digits - 1; i >= 0; i--)
                buf[n++] = hex[(v >> (4 * i)) & 15];
        w(ctx, buf, n);
}

void fp_escape_json(fp_write_fn w, void *ctx, const char *s)
{
        const unsigned char *p = (const unsigned char *)(s ? s : "");

        w(ctx, "\"", 1);
        while (*p) {
                size_t n = fp_utf8_len(p);

                if (n == 0) {
                        w(ctx, "\\ufffd", 6);
                        p++;
                } else if (n > 1) {
                        w(ctx, p, n);
                        p += n;
                } else if (*p == '"' || *p == '\\') {
                        w(ctx, "\\", 1);
                        w(ctx, p++, 1);
                } else if (*p < 0x20 || *p == 0x7f) {
                        put_hex(w, ctx, "\\u", *p++, 4);
                } else {
                        w(ctx, p++, 1);
                }
        }
        w(ctx, "\"", 1);
}

void fp_escape_html(fp_write_fn w, void *ctx, const char *s)
{
        const unsigned char *p = (const unsigned char *)(s ? s : "");

        while (*p) {
                size_t n = fp_utf8_len(p);

                if (n == 0) {
                        w(ctx, "\xef\xbf\xbd", 3);
                        p++;
                        continue;
                }
                if (n > 1) {
                        w(ctx, p, n);
                        p += n;
                        continue;
                }
                switch (*p) {
                case '<':
                        w(ctx, "&lt;", 4);
                        break;
                case '>':
                        w(ctx, "&gt;", 4);
                        break;
                case '&':
                        w(ctx, "&amp;", 5);
                        break;
                case '"':
                        w(ctx, "&quot;", 6);
                        break;
                case '\'':
                        w(ctx, "&#39;", 5);
                        break;
                default:
                        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
                                w(ctx, "?", 1);
                        else
                                w(ctx, p, 1);
                }
                p++;
        }
}

void fp_escape_url(fp_write_fn w, void *ctx, const char *s)
{
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-_.~", *p))
                        w(ctx, p, 1);
                else
                        put_hex(w, ctx, "%", *p, 2);
        }
}

void fp_escape_terminal(fp_write_fn w, void *ctx, const char *s)
{
        const unsigned char *p = (const unsigned char *)(s ? s : "");

        while (*p) {
                size_t n = fp_utf8_len(p);

                if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f || *p == '\\'))) {
                        if (*p == '\\')
                                w(ctx, "\\\\", 2);
                        else
                                put_hex(w, ctx, "\\x", *p, 2);
                        p++;
                } else if (n == 2 && p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        /* C1 controls (U+0080..U+009F): CSI and friends. */
                        put_hex(w, ctx, "\\x", p[0], 2);
                        put_hex(w, ctx, "\\x", p[1], 2);
                        p += 2;
                } else {
                        w(ctx, p, n);
                        p += n;
                }
        }
}

struct bounded {
        char *buf;
        size_t len, used;
        int full;
};

static void write_bounded(void *ctx, const void *data, size_t n)
{
        struct bounded *b = ctx;
        if (b->full || b->used + n + 1 > b->len) {
                b->full = 1; /* pieces are whole characters or escapes: stop at this boundary */
                return;
        }
        memcpy(b->buf + b->used, data, n);
        b->used += n;
}

const char *fp_terminal_str(const char *s, char *buf, size_t len)
{
        struct bounded b = {buf, len, 0, 0};
        if (len == 0)
                return "";
        fp_escape_terminal(write_bounded, &b, s);
        buf[b.used] = 0;
        return buf;
}
