/* SPDX-License-Identifier: MIT */
/*
 * Upload decoding and validation; see ingest.h for the contract.
 *
 * Everything here treats its input as hostile: the profile goes through
 * fp_pprof_decode(), which bounds the inflated size and checks every
 * index, id and count, and then through the checks below, which hold it
 * to the shape the agent sends (two sample types, numeric thread labels,
 * stacks no deeper than the store takes). The query parameters are
 * checked for presence, range and characters before anything is stored.
 */
#include "upload_contract.h"
#include "ingest.h"
#include "escape.h"
#include "util.h"
#include "pprof.h"
#include "store.h"

#include <errno.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The batch's frame index of each location id of the decoded profile,
 * filled as samples meet them (a location is in many samples: its frame
 * is hashed and interned once). 0: not yet; else index + 1.
 */
struct frame_cache {
        uint32_t *idx;
        size_t cap;
};

#define FRAME_CACHE_MAX ((size_t)1 << 22) /* location ids past it are looked up each time */

static int frame_of(const struct fp_pprof *p, uint64_t id, struct fp_store_batch *b,
                    struct frame_cache *c, uint32_t *ret)
{
        struct fp_pprof_location_view lv;
        int r;

        if (id < c->cap && c->idx[id]) {
                *ret = c->idx[id] - 1;
                return 0;
        }
        r = fp_pprof_location_get(p, id, &lv);
        if (r < 0)
                return -EBADMSG;
        struct fp_store_frame f = {
            .function = lv.function_name,
            .mapping_file = lv.mapping_file,
            .build_id = lv.build_id,
            .mapping_start = lv.mapping_start,
            .mapping_limit = lv.mapping_limit,
            .mapping_offset = lv.mapping_offset,
            .address = lv.address,
        };
        r = fp_store_batch_add_frame(b, &f, ret);
        if (r < 0)
                return r;
        if (id < FRAME_CACHE_MAX) {
                size_t old = c->cap;
                if (id >= c->cap && fp_grow(&c->idx, &c->cap, id + 1, sizeof(*c->idx)) < 0)
                        return 0; /* only slower */
                if (c->cap > old)
                        memset(c->idx + old, 0, (c->cap - old) * sizeof(*c->idx));
                c->idx[id] = *ret + 1;
        }
        return 0;
}

/* One sample of the decoded profile into the batch. */
static int add_sample(const struct fp_pprof *p, size_t i, struct fp_store_batch *b, uint32_t target,
                      uint32_t event, uint32_t *frames, struct frame_cache *fc, uint64_t *total,
                      char *err, size_t errlen)
{
        struct fp_pprof_sample_view v;
        int64_t tid = 0;
        const char *thread_name = NULL;
        uint32_t stack;
        int r;

        r = fp_pprof_sample_get(p, i, &v);
        if (r < 0)
                return fp_errf(err, errlen, r, "cannot read sample %zu", i);
        if (v.n_locations > FP_STORE_MAX_FRAMES)
                return fp_errf(err, errlen, -EINVAL,
                               "sample %zu has %zu frames; at most %d are kept", i, v.n_locations,
                               FP_STORE_MAX_FRAMES);
        for (size_t j = 0; j < v.n_labels; j++) {
                struct fp_pprof_label l;

                r = fp_pprof_sample_label(p, i, j, &l);
                if (r < 0)
                        return fp_errf(err, errlen, r, "cannot read label %zu of sample %zu", j, i);
                if (strcmp(l.key, "thread") == 0) {
                        if (l.str || l.num < 0 || l.num > INT_MAX)
                                return fp_errf(err, errlen, -EINVAL,
                                               "sample %zu: label 'thread' must be a thread id", i);
                        tid = l.num;
                } else if (strcmp(l.key, "thread_name") == 0) {
                        if (!l.str)
                                return fp_errf(err, errlen, -EINVAL,
                                               "sample %zu: label 'thread_name' must be a string",
                                               i);
                        thread_name = l.str;
                }
                /* pid, process and host come from the upload's parameters. */
        }
        for (size_t j = 0; j < v.n_locations; j++) {
                r = frame_of(p, v.location_ids[j], b, fc, &frames[j]);
                if (r == -EBADMSG)
                        return fp_errf(err, errlen, -EBADMSG,
                                       "sample %zu: location %" PRIu64 " is bad", i,
                                       v.location_ids[j]);
                if (r < 0)
                        return fp_errf(err, errlen, r, "cannot add a frame: %s", strerror(-r));
        }
        if (v.values[0] == 0 && v.values[1] == 0)
                return 0; /* nothing to keep */
        r = fp_store_batch_add_stack_of(b, frames, v.n_locations, &stack);
        if (r < 0)
                return fp_errf(err, errlen, r, "cannot add a stack: %s", strerror(-r));
        r = fp_store_batch_add_sample(b, target, event, (pid_t)tid, thread_name, stack,
                                      (uint64_t)v.values[0], (uint64_t)v.values[1]);
        if (r < 0)
                return fp_errf(err, errlen, r, "cannot add a sample: %s", strerror(-r));
        *total = *total > UINT64_MAX - (uint64_t)v.values[0] ? UINT64_MAX
                                                             : *total + (uint64_t)v.values[0];
        return 0;
}

static int build(const struct fp_upload_meta *meta, const struct fp_pprof *p,
                 struct fp_store_batch *b, uint64_t *ret_samples, char *err, size_t errlen)
{
        const char *ct, *cu, *vt, *vu, *pt, *pu;
        struct frame_cache fc = {0};
        uint32_t *frames, target, event;
        uint64_t total = 0;
        int64_t period;
        int r;

        if (fp_pprof_n_sample_types(p) != 2)
                return fp_errf(err, errlen, -EINVAL,
                               "the profile has %zu sample types; an upload has two (count and "
                               "value)",
                               fp_pprof_n_sample_types(p));
        ct = fp_pprof_sample_type(p, 0, &cu);
        vt = fp_pprof_sample_type(p, 1, &vu);
        if (!*ct || !*cu || !*vt || !*vu)
                return fp_errf(err, errlen, -EINVAL,
                               "a sample type of the profile has no name or unit");
        period = fp_pprof_period(p, &pt, &pu);
        if (period < 0)
                return fp_errf(err, errlen, -EINVAL,
                               "the profile's period is negative (%" PRId64 ")", period);

        struct fp_store_target t = {.host = meta->host,
                                    .pid = meta->pid,
                                    .starttime = meta->starttime,
                                    .comm = meta->comm,
                                    .exe = meta->exe};
        struct fp_store_event e = {.name = meta->event,
                                   .count_type = ct,
                                   .count_unit = cu,
                                   .value_type = vt,
                                   .value_unit = vu,
                                   .period_type = *pt ? pt : NULL,
                                   .period_unit = *pt ? pu : NULL,
                                   .period = period};
        if ((r = fp_store_batch_add_target(b, &t, &target)) < 0 ||
            (r = fp_store_batch_add_event(b, &e, &event)) < 0 ||
            (r = fp_store_batch_set_series(b, target, event)) < 0)
                return fp_errf(err, errlen, r, "cannot describe the upload: %s", strerror(-r));
        for (size_t i = 0; i < meta->n_drops; i++) {
                r = fp_store_batch_add_drop(b, target, meta->drops[i].reason, meta->drops[i].count);
                if (r < 0)
                        return fp_errf(err, errlen, r, "cannot add drop counts: %s", strerror(-r));
        }
        frames = calloc(FP_STORE_MAX_FRAMES, sizeof(*frames));
        if (!frames)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        r = 0;
        for (size_t i = 0; i < fp_pprof_n_samples(p) && r >= 0; i++)
                r = add_sample(p, i, b, target, event, frames, &fc, &total, err, errlen);
        free(frames);
        free(fc.idx);
        if (r < 0)
                return r;
        *ret_samples = total;
        return 0;
}

int fp_coll_ingest_build(const struct fp_upload_meta *meta, const uint8_t *body, size_t len,
                         size_t max_decompressed, struct fp_store_batch **ret,
                         uint64_t *ret_samples, char *err, size_t errlen)
{
        struct fp_pprof *p = NULL;
        struct fp_store_batch *b;
        uint64_t samples = 0;
        char derr[256];
        int r;

        if (len < 2 || body[0] != 0x1f || body[1] != 0x8b)
                return fp_errf(err, errlen, -EBADMSG,
                               "the body is not gzip data (an upload is a gzip-compressed "
                               "profile.proto)");
        r = fp_pprof_decode(body, len, max_decompressed, &p, derr, sizeof(derr));
        if (r < 0)
                return fp_errf(err, errlen, r, "%s", derr[0] ? derr : strerror(-r));
        b = fp_store_batch_new(meta->from_ns, meta->to_ns - meta->from_ns);
        if (!b) {
                fp_pprof_free(p);
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        }
        r = build(meta, p, b, &samples, err, errlen);
        fp_pprof_free(p);
        if (r < 0) {
                fp_store_batch_free(b);
                return r;
        }
        fp_store_batch_set_uploaded(b, true);
        *ret = b;
        *ret_samples = samples;
        return 0;
}
