/* SPDX-License-Identifier: MIT */
/*
 * Label selectors in Pyroscope's syntax (Prometheus' series selector):
 *
 *   {service_name="api", host=~"web-.*", container!="", pid!~"1|2"}
 *
 * A selector is a list of matchers, all of which a series' labels must
 * meet: = and != compare the whole value, =~ and !~ match a regular
 * expression in RE2's syntax (Go's, which Prometheus and Pyroscope use)
 * against the whole value (anchored at both ends, '.' matching a newline,
 * as Prometheus matches). A label a series does not have
 * reads as "" (so {container=""} selects what has no container). Values
 * are quoted with "..." or '...' (\\, \", \', \n, \t and \r escaped) or
 * `...` (raw). "" and "{}" select everything.
 *
 * Input is hostile: the text is at most FP_SEL_MAX_TEXT bytes, with at
 * most FP_SEL_MAX_MATCHERS matchers; a regular expression is compiled
 * once, at most FP_SEL_MAX_REGEX bytes, into at most FP_SEL_REGEX_MEM
 * bytes, and matches in time linear in the value's length (linre.h): no
 * pattern can make a read's matching take the loop or the memory, as
 * glibc's regcomp() could (a++++... doubled its time and memory with each
 * '+'). Pure; unit-tested in tests/unit/test-selector.c.
 */
#pragma once

#include "linre.h"

#include <stdbool.h>
#include <stddef.h>

#define FP_SEL_MAX_TEXT     4096
#define FP_SEL_MAX_MATCHERS 32
#define FP_SEL_MAX_NAME     64
#define FP_SEL_MAX_REGEX    1024
#define FP_SEL_REGEX_MEM    (256 << 10) /* bytes of one expression's program and DFA cache */

enum fp_sel_op {
        FP_SEL_EQ,  /* = */
        FP_SEL_NE,  /* != */
        FP_SEL_RE,  /* =~ */
        FP_SEL_NRE, /* !~ */
};

struct fp_sel_matcher {
        char name[FP_SEL_MAX_NAME + 1];
        enum fp_sel_op op;
        char *value;         /* unquoted */
        struct fp_linre *re; /* FP_SEL_RE, FP_SEL_NRE */
};

struct fp_selector {
        struct fp_sel_matcher m[FP_SEL_MAX_MATCHERS];
        size_t n;
};

/*
 * Parses text (NULL: none) into *ret. 0, or -EINVAL with one line in err
 * (nothing to free), or -ENOMEM.
 */
int fp_sel_parse(const char *text, struct fp_selector *ret, char *err, size_t errlen);
void fp_sel_free(struct fp_selector *s);

/* A label's value by name, "" when the series has none. */
typedef const char *(*fp_sel_label_fn)(void *ctx, const char *name);
/* Whether every matcher holds for the labels fn gives. */
bool fp_sel_match(const struct fp_selector *s, fp_sel_label_fn fn, void *ctx);
/* The value of an = matcher on name, or NULL (the first, when there are several). */
const char *fp_sel_equal(const struct fp_selector *s, const char *name);
