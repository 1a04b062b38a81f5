/* SPDX-License-Identifier: MIT */
/*
 * Escaping of untrusted text for every output fleetprof writes: JSON
 * strings, HTML text and attributes, URL query values, and text printed
 * to a terminal. Process names, thread names, paths and symbols can be any
 * bytes a profiled program chose; each escaper validates UTF-8 and turns
 * what is not UTF-8 into U+FFFD (or '?' where only ASCII is safe), so one
 * odd name can never break a JSON document, a page, or root's terminal.
 *
 * Every escaper writes through a sink (fp_write_fn, ctx), so the same code
 * serves a FILE * (the agent's replies) and an evbuffer (the collector's
 * HTTP answers); the _file and _evb helpers below bind the two.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct evbuffer;

typedef void (*fp_write_fn)(void *ctx, const void *data, size_t len);

/* Sinks: ctx is a FILE * or a struct evbuffer *. */
void fp_write_file(void *ctx, const void *data, size_t len);
void fp_write_evbuffer(void *ctx, const void *data, size_t len);

/*
 * Length of the valid UTF-8 sequence at s (1 to 4 bytes; s[0] == 0 counts
 * as 1), or 0 when s does not start one: overlong forms, surrogates and
 * code points past U+10FFFF are not UTF-8.
 */
size_t fp_utf8_len(const unsigned char *s);
/* Whether the whole string is valid UTF-8. */
int fp_utf8_valid(const char *s);
/*
 * Code point c as UTF-8 into out (room for 4 bytes): how many bytes. A
 * surrogate or a value past U+10FFFF is written as U+FFFD.
 */
size_t fp_utf8_put(char *out, uint32_t c);

/* s as a JSON string, quotes included; NULL is "". */
void fp_escape_json(fp_write_fn w, void *ctx, const char *s);
/* s for HTML text and quoted attribute values. */
void fp_escape_html(fp_write_fn w, void *ctx, const char *s);
/* s percent-encoded for a URL query value (everything but A-Za-z0-9-_.~). */
void fp_escape_url(fp_write_fn w, void *ctx, const char *s);
/*
 * s for a terminal: valid UTF-8 printable text as is; control bytes (C0,
 * DEL, and the C1 range U+0080..U+009F, which includes CSI) as \xNN, and
 * bytes that are not UTF-8 as \xNN too, so no escape sequence can reach
 * the terminal and the bytes stay recognisable.
 */
void fp_escape_terminal(fp_write_fn w, void *ctx, const char *s);

/*
 * fp_escape_terminal into buf (always NUL-terminated; the result is cut
 * at a character boundary when buf is too small). Returns buf, so it can
 * stand in a printf argument list.
 */
const char *fp_terminal_str(const char *s, char *buf, size_t len);

static inline void fp_escape_json_file(FILE *f, const char *s)
{
        fp_escape_json(fp_write_file, f, s);
}
static inline void fp_escape_json_evb(struct evbuffer *b, const char *s)
{
        fp_escape_json(fp_write_evbuffer, b, s);
}
static inline void fp_escape_html_evb(struct evbuffer *b, const char *s)
{
        fp_escape_html(fp_write_evbuffer, b, s);
}
static inline void fp_escape_url_evb(struct evbuffer *b, const char *s)
{
        fp_escape_url(fp_write_evbuffer, b, s);
}
