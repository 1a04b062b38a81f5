/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the collector's query parameters, which anyone who
 * reaches its port may send: the input, as a string, is the query string
 * of a read (fp_coll_filter_parse_ex(), plain and with the diff's base_
 * prefix), a time (fp_coll_parse_time()) and an upload's query string
 * (fp_upload_parse_query()). None may crash, leak or read out of bounds;
 * a filter that parses holds strings within their buffers.
 */
#include "filter.h"
#include "upload_contract.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A filter that parses points into itself, with a range that is not empty. */
static void check(const struct fp_coll_filter *f)
{
        const char *s[] = {f->f.host, f->f.process, f->f.service, f->f.event, f->f.thread_name};
        const char *own[] = {f->host, f->process, f->service, f->event, f->thread};
        for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
                if (s[i] && (s[i] != own[i] || strlen(s[i]) >= sizeof(f->host)))
                        abort();
        if (f->f.until_ns && f->f.until_ns <= f->f.since_ns)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const int64_t now = 1795544000000000000LL;
        struct fp_coll_filter *f = malloc(sizeof(*f));
        struct fp_upload_meta *meta = malloc(sizeof(*meta));
        char err[512], *q = malloc(size + 1);
        int64_t t;

        if (f && meta && q) {
                memcpy(q, data, size);
                q[size] = 0;
                if (fp_coll_filter_parse(q, now, f, err, sizeof(err)) == 0)
                        check(f);
                static const char *const extra[] = {"value", "max_nodes", "points", NULL};
                if (fp_coll_filter_parse_ex(q, now, NULL, extra, f, err, sizeof(err)) == 0)
                        check(f);
                if (fp_coll_filter_parse_ex(q, now, FP_COLL_BASE_PREFIX, extra, f, err,
                                            sizeof(err)) == 0)
                        check(f);
                (void)fp_coll_parse_time(q, now, &t);
                (void)fp_upload_parse_query(q, meta, err, sizeof(err));
        }
        free(q);
        free(meta);
        free(f);
        return 0;
}
