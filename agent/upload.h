/* SPDX-License-Identifier: MIT */
/*
 * Store-and-forward upload of the store's buckets to the collector.
 *
 * Every --upload-interval seconds (with +-10% jitter, so a fleet does not
 * upload in lockstep), or at once on `agentctl flush`, a round runs:
 *
 *   1. on the writer thread: take up to 64 of the oldest buckets not yet
 *      uploaded; for each (target, event) in them, merge them into one
 *      gzip pprof, with its drop counts;
 *   2. on the loop thread: POST each to COLLECTOR/api/v1/ingest through
 *      libcurl's multi interface driven by libevent, so nothing blocks;
 *   3. when every POST got a 2xx (or a permanent refusal), mark the
 *      buckets uploaded on the writer thread.
 *
 * Retryable failures (no connection, timeout, 5xx, 408, 429, and 401/403:
 * a token problem, which an operator fixes while the data waits) retry
 * the same buckets with exponential backoff and jitter. Every upload
 * carries an Idempotency-Key derived from (host, pid, start time, event,
 * bucket ids), so a retry of a round whose response was lost, or in which
 * some POSTs succeeded, is stored once by the collector. Any other 4xx is
 * a permanent refusal: logged once, its samples counted as
 * "upload_rejected" drops of the target, its buckets not sent again.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_writer;
struct fp_uploader;

struct fp_upload_options {
        const char *url;        /* http(s)://host:port of the collector */
        const char *token_file; /* NULL: no Authorization header */
        const char *ca_file;    /* NULL: the system's CAs */
        unsigned interval_seconds;
};

/* Counts samples of a target that the collector refused for good. */
typedef void (*fp_upload_reject_fn)(void *userdata, pid_t pid, uint64_t starttime,
                                    uint64_t samples);
/* The end of a flush: ok, and one line saying what happened. */
typedef void (*fp_upload_done_fn)(void *userdata, bool ok, const char *message);

struct fp_upload_status {
        bool in_progress;
        int64_t last_success_ns; /* CLOCK_REALTIME, 0: never */
        int64_t last_attempt_ns;
        int64_t next_attempt_ns;
        uint64_t rounds_ok, rounds_failed;
        uint64_t uploads_ok, uploads_rejected, bytes_sent;
        uint64_t buckets_uploaded;
        char last_error[256];
};

/*
 * Reads the token file (-errno and a line in err when it cannot) and arms
 * the first round. The uploader uses writer for every store access.
 */
int fp_uploader_new(struct event_base *base, struct fp_writer *writer,
                    const struct fp_upload_options *opt, fp_upload_reject_fn reject, void *userdata,
                    struct fp_uploader **ret, char *err, size_t err_len);
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
const char *fp_uploader_url(const struct fp_uploader *u);
