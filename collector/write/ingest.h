/* SPDX-License-Identifier: MIT */
/*
 * Decoding and validating one agent upload into a store batch.
 *
 * An upload (agent/keep/upload.c) is
 *
 *   POST /api/v1/ingest?host=H&pid=P&starttime=S&comm=C&exe=E&event=EV
 *                      &from=NS&to=NS&agent=VERSION[&drops=R:N,R:N...]
 *   Idempotency-Key: K          (optional: without it there is no dedup)
 *   body: a gzip-compressed profile.proto with two sample types (the
 *         event's count and value), samples labelled "thread" (tid) and
 *         "thread_name".
 *
 * This module is pure (no I/O, no globals): it turns the query string and
 * the body into a struct fp_store_batch holding one bucket [from, to) of
 * one target (host, pid, starttime) and one event, or into one line that
 * says what is wrong with them. The HTTP layer maps its return values to
 * statuses: -EINVAL and -EBADMSG are 400, -EFBIG 413, -ENOMEM 500. The
 * fuzz target (tests/fuzz/fuzz-ingest.c) drives fp_coll_ingest_build().
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp_store_batch;
struct fp_upload_meta;

/*
 * Decodes body (gzip profile.proto, at most max_decompressed bytes once
 * inflated) and builds the batch of meta's target and event. Returns 0
 * with *ret (the caller's, free with fp_store_batch_free()) and the
 * upload's sample count in *ret_samples; or -EINVAL / -EBADMSG (the body
 * is not what an agent sends), -EFBIG (decompressed size over the limit),
 * -ENOMEM, each with one line in err. *ret is untouched on failure.
 */
int fp_coll_ingest_build(const struct fp_upload_meta *meta, const uint8_t *body, size_t len,
                         size_t max_decompressed, struct fp_store_batch **ret,
                         uint64_t *ret_samples, char *err, size_t errlen);
