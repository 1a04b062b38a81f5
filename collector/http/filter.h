/* SPDX-License-Identifier: MIT */
/*
 * The query string of the read endpoints (/api/v1/series,
 * /api/v1/profile, the web page) into a store filter. Every parameter is
 * optional:
 *
 *   host=NAME  service=NAME  process=COMM  pid=N  event=NAME
 *   container=ID               a container's host tier series (its ID as
 *                              docker ps shows it)
 *   label=KEY:VALUE            the series another protocol's client
 *                              labelled so (a Pyroscope tag, an OTLP
 *                              resource attribute kept in the series' text)
 *   thread=NAME                the samples of threads of that name only
 *                              (profiles and flame graphs; listings and
 *                              time lines count whole series)
 *   from=TIME  to=TIME       TIME: Unix seconds ("1763888590" or with a
 *                            fraction), RFC 3339 UTC ("2026-11-23T09:00:00Z"),
 *                            "now", or relative to now ("-15m", "-2h", "-7d")
 *   seconds=N                the last N seconds (what `go tool pprof
 *                            -seconds N` adds; not with from)
 *   n=N                      rows of a top table (web page only)
 *
 * Unknown parameters and malformed values are errors (a typo must not
 * silently widen a query). Pure; unit-tested in tests/unit/test-collector.c.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "upload_contract.h"

struct fp_coll_filter {
        char host[256], process[256], event[128], service[FP_UPLOAD_MAX_SERVICE + 1], thread[256];
        char container[FP_UPLOAD_MAX_CONTAINER + 1];
        char label[1024];         /* "KEY=VALUE", VALUE URL-escaped as in a series' text */
        struct fp_store_filter f; /* points into the fields above */
        unsigned top_n;           /* 0: not given */
};

/* 0, or -EINVAL with one line in err. now_ns is CLOCK_REALTIME. */
int fp_coll_filter_parse(const char *query, int64_t now_ns, struct fp_coll_filter *ret, char *err,
                         size_t errlen);
/*
 * The same for an endpoint with parameters of its own: keys listed in
 * extra (NULL-terminated) are left to the caller, and so are keys that
 * start with FP_COLL_BASE_PREFIX when extra is given (a diff's baseline).
 * With prefix, only the keys that start with it are read, without it (the
 * baseline: "base_from=-2h" is its from); everything else is left alone.
 */
#define FP_COLL_BASE_PREFIX "base_"
int fp_coll_filter_parse_ex(const char *query, int64_t now_ns, const char *prefix,
                            const char *const *extra, struct fp_coll_filter *ret, char *err,
                            size_t errlen);
/* A TIME as above into nanoseconds. 0 or -EINVAL. */
int fp_coll_parse_time(const char *s, int64_t now_ns, int64_t *ret);

struct evhttp_request;
/*
 * The filter of a read request's query string; on a bad one answers 400
 * with the reason and returns -EINVAL.
 */
int fp_coll_filter_from_request(struct evhttp_request *req, struct fp_coll_filter *f);
