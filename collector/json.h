/* SPDX-License-Identifier: MIT */
/*
 * Text output helpers for the collector's HTTP answers: JSON strings and
 * HTML text escaped into an evbuffer, times as RFC 3339, and the one-line
 * error messages every module returns. Strings from
 * agents may hold any bytes; the output is always valid UTF-8 (invalid
 * sequences become U+FFFD), so one odd process name never breaks a page
 * or a JSON document.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/* Appends s as a JSON string, quotes included. */
void fp_coll_json_str(struct evbuffer *b, const char *s);
/* Appends s escaped for HTML text and attribute values. */
void fp_coll_html_str(struct evbuffer *b, const char *s);
/* Appends s percent-encoded for a URL query value. */
void fp_coll_url_str(struct evbuffer *b, const char *s);
/*
 * Writes one formatted line into err (errlen bytes; err may be NULL) and
 * returns r: `return fp_coll_errf(err, errlen, -EINVAL, "...", ...);`.
 */
int fp_coll_errf(char *err, size_t errlen, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Writes ns (CLOCK_REALTIME nanoseconds) as "2026-11-23T09:03:10Z" into buf (>= 32 bytes). */
void fp_coll_rfc3339(int64_t ns, char *buf, unsigned long len);
