/* SPDX-License-Identifier: MIT */
/*
 * Text output helpers for the collector's HTTP answers: JSON strings and
 * HTML text escaped into an evbuffer, and times as RFC 3339. Strings from
 * agents may hold any bytes; the output is always valid UTF-8 (invalid
 * sequences become U+FFFD), so one odd process name never breaks a page
 * or a JSON document.
 */
#pragma once

#include <stdint.h>

struct evbuffer;

/* Appends s as a JSON string, quotes included. */
void fp_coll_json_str(struct evbuffer *b, const char *s);
/* Appends s escaped for HTML text and attribute values. */
void fp_coll_html_str(struct evbuffer *b, const char *s);
/* Appends s percent-encoded for a URL query value. */
void fp_coll_url_str(struct evbuffer *b, const char *s);
/* Writes ns (CLOCK_REALTIME nanoseconds) as "2026-11-23T09:03:10Z" into buf (>= 32 bytes). */
void fp_coll_rfc3339(int64_t ns, char *buf, unsigned long len);
