/* SPDX-License-Identifier: MIT */
/*
 * Regular expressions that match in linear time: the label selectors'
 * =~ and !~ (selector.h), which anyone allowed to read may send.
 *
 * A thin C face on RE2 (Debian's libre2; docs/design.md says why): a
 * pattern is compiled with RE2's syntax, which is the syntax of Go's
 * regexp and so of Prometheus' and Pyroscope's matchers, matched against
 * a whole value (anchored at both ends) with '.' matching a newline too,
 * as Prometheus matches. Its compiled program and its DFA's cache are
 * bounded by max_mem together: a pattern whose program does not fit is
 * refused at compile time ("pattern too large"), and a match whose DFA
 * would outgrow the rest falls back to RE2's NFA, still linear in the
 * value's length. No backtracking, no backreferences: no input makes a
 * match take more than (pattern size) x (value length) steps.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fp_linre;

/*
 * Compiles pattern (NUL-terminated; RE2 syntax) into *ret, bounded by
 * max_mem bytes. 0; -EINVAL with RE2's reason in err (one line); -ENOMEM.
 */
int fp_linre_new(const char *pattern, size_t max_mem, struct fp_linre **ret, char *err,
                 size_t errlen);
/* Whether the whole of s (len bytes) matches. */
bool fp_linre_match(const struct fp_linre *re, const char *s, size_t len);
/* Accepts NULL. */
void fp_linre_free(struct fp_linre *re);

#ifdef __cplusplus
}
#endif
