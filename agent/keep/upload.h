/* SPDX-License-Identifier: MIT */
/*
 * Store-and-forward upload of the store's buckets to the collector.
 *
 * Every --upload-interval seconds (with +-10% jitter, so a fleet does not
 * upload in lockstep), or at once on `agentctl flush`, a round runs:
 *
 *   1. on the writer thread: when the store's outbox is empty, take up to
 *      64 of the oldest buckets not yet uploaded, merge them per (target,
 *      event) into one gzip pprof with its drop counts and a random
 *      Idempotency-Key, and move those uploads into the outbox with the
 *      buckets marked, in one transaction; then read the outbox;
 *   2. on the loop thread: POST each upload to COLLECTOR/api/v1/ingest
 *      through libcurl's multi interface driven by libevent;
 *   3. on the writer thread: take out of the outbox what was delivered or
 *      refused for good, and split what was too large.
 *
 * An upload's bytes and key never change once in the outbox, so a retry
 * (after a backoff, a crash between the 2xx and step 3, or a restart) is
 * stored once by the collector, and nothing is sent twice under two keys.
 * The answers:
 *   2xx            delivered.
 *   400, 422       the profile is malformed: refused for good, logged, its
 *                  samples counted as "upload_rejected" drops.
 *   413            too large: split in two halves of its buckets, down to
 *                  one bucket (then refused, with the limit named).
 *   408, 429, 5xx, no connection, timeout: transient; retried.
 *   anything else  (3xx, 401, 403, 404, 405, ...) a configuration error:
 *                  the data waits, the round is retried, and status and
 *                  the log say so on every try until it is fixed.
 * Retries back off exponentially (1 s to 5 min) with jitter.
 *
 * With several collectors (--collector URL,URL), a round that fails with a
 * transient or configuration error fails over to the next one, which gets
 * the same uploads (bytes and keys) at once; only once each has failed
 * since the last good round does the backoff start. Collectors that share
 * one store (ClickHouse) store a retried upload once whichever got it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_writer;
struct fp_uploader;

#define FP_UPLOAD_MAX_URLS 16

struct fp_upload_options {
        const char *url; /* [pyroscope+|otlp+]http(s)://host:port of the collector[,another,...] */
        const char *token_file;       /* NULL: no Authorization header */
        const char *credentials_file; /* bearer, basic, tenant (wire.h); NULL: none */
        const char *ca_file;          /* NULL: the system's CAs */
        unsigned interval_seconds;
};

/* The end of a flush: ok, and one line saying what happened. */
typedef void (*fp_upload_done_fn)(void *userdata, bool ok, const char *message);

struct fp_upload_status {
        bool in_progress;
        int64_t last_success_ns; /* CLOCK_REALTIME, 0: never */
        int64_t last_attempt_ns;
        int64_t next_attempt_ns;
        uint64_t rounds_ok, rounds_failed;
        uint64_t uploads_ok, uploads_rejected, bytes_sent;
        uint64_t buckets_built; /* buckets built into uploads (delivered or waiting) */
        bool config_error;      /* the last round's answer says the URL or token is wrong */
        uint64_t failovers;     /* switches to the next collector */
        char last_error[1024];
};

/*
 * Reads the token file (-errno and a line in err when it cannot) and arms
 * the first round. The uploader uses writer for every store access.
 */
int fp_uploader_new(struct event_base *base, struct fp_writer *writer,
                    const struct fp_upload_options *opt, struct fp_uploader **ret, char *err,
                    size_t err_len);
/*
 * Abandons a round in flight (its buckets stay pending) and answers a
 * waiting flush. Call before the writer is freed: results it still
 * delivers are then only cleaned up. Accepts NULL.
 */
void fp_uploader_close(struct fp_uploader *u);
/* Closes (if not yet) and frees; after the writer is gone. Accepts NULL. */
void fp_uploader_free(struct fp_uploader *u);

/*
 * Uploads now (after whatever the writer has queued, so close the open
 * bucket first). done is called when the round ends, however it ends; a
 * round already running is joined. -EBUSY when another flush waits.
 */
int fp_uploader_flush(struct fp_uploader *u, fp_upload_done_fn done, void *userdata);
void fp_uploader_status(const struct fp_uploader *u, struct fp_upload_status *ret);
/* The collector in use, and how many there are to fail over between. */
const char *fp_uploader_url(const struct fp_uploader *u);
size_t fp_uploader_n_urls(const struct fp_uploader *u);
