/* SPDX-License-Identifier: MIT */
/*
 * The upload pipeline behind the loop thread: a decoder thread and the
 * store's writer thread. The loop thread queues each upload's body as it
 * came (fp_coll_writeq_add()); the decoder thread decodes and checks it
 * (fp_coll_ingest_build()), so a costly upload never stalls the loop's
 * other connections and reads; the writer thread takes what is decoded
 * (up to FP_COLL_WRITEQ_MAX batches; on ClickHouse it waits, for
 * FP_COLL_WRITEQ_GATHER_NS at most, for those the decoder is still on and
 * uploads still arriving) and writes it in one store
 * transaction (fp_backend_write_batches()), so under load many uploads
 * share one commit, one checkpoint and one budget check. Each upload's
 * callback then runs on the loop thread with its result: decoded or not
 * (with the status and reason to answer), then 0 stored, -EALREADY its
 * idempotency key was stored before, other -errno the store failed. What
 * to answer and count is the caller's (api.c). The writer thread also
 * applies the retention, once a minute.
 *
 *   loop thread                   decoder thread      writer thread
 *   fp_coll_writeq_add() -> raw -> decode -> todo -->  take up to 64, one transaction
 *   done(userdata, result) <------------------ done <-  results, eventfd wake-up
 *
 * The queue holds at most FP_COLL_WRITEQ_LIMIT uploads and max_bytes of
 * their bodies (decoded or not) at once; past either, add() refuses
 * (-EBUSY) and the caller answers 503.
 *
 * The writer thread owns the read-write store; the loop thread reads
 * through a read-only handle of its own (WAL lets both work at once).
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_coll_writeq;
struct fp_backend;
struct fp_upload_meta;
struct fp_store_batch;

#define FP_COLL_WRITEQ_MAX   64   /* uploads per transaction */
#define FP_COLL_WRITEQ_LIMIT 1024 /* uploads queued or being written; then 503 */
/* On ClickHouse, the longest a group waits for uploads being decoded or arriving to join it. */
#define FP_COLL_WRITEQ_GATHER_NS (50 * 1000000LL)
/* On ClickHouse, a group waits while the last upload joined it less than this ago. */
#define FP_COLL_WRITEQ_LINGER_GAP_NS (5 * 1000000LL)
/*
 * Summaries (SQLite, store.h): once uploads have paused for QUIET (or
 * BUSY after its last step, under a stream that never pauses), the
 * writer thread summarises marked hours and days, a step at a time,
 * once they ended GRACE ago (a late upload marks its hour again); with
 * nothing marked, it looks again EVERY.
 */
#define FP_COLL_WRITEQ_SUMMARY_GRACE_NS (120 * 1000000000LL)
#define FP_COLL_WRITEQ_SUMMARY_EVERY_NS (60 * 1000000000LL)
#define FP_COLL_WRITEQ_SUMMARY_QUIET_NS (1000 * 1000000LL)
#define FP_COLL_WRITEQ_SUMMARY_BUSY_NS  (10 * 1000000000LL)

/*
 * Starts the threads with store (taken over, also on failure), the
 * retention in seconds (0: none), the largest decompressed profile and the
 * bytes of bodies the queue may hold. -errno.
 */
int fp_coll_writeq_new(struct event_base *base, struct fp_backend *store, uint64_t retention_s,
                       size_t max_profile_bytes, size_t max_bytes, struct fp_coll_writeq **ret);
/* Writes what is queued (calling back for each), stops the thread, closes its store. Accepts NULL.
 */
void fp_coll_writeq_free(struct fp_coll_writeq *q);
/* What became of one upload. */
struct fp_coll_writeq_result {
        int decode_status; /* 0 decoded; else the HTTP status to answer (400, 413, 503) */
        char error[256];   /* why, when not decoded */
        int result;        /* decoded: 0 stored, -EALREADY a duplicate, other -errno failed */
        uint64_t samples;  /* in the upload */
        int64_t decode_ns; /* time the decoder spent on it */
};
/* Called on the loop thread once the upload was refused or its group written. */
typedef void (*fp_coll_writeq_done_fn)(void *userdata, const struct fp_coll_writeq_result *r);
/*
 * Queues an upload: meta, body (len bytes) and key (NULL: none), each
 * malloc()ed and taken over on success. -EBUSY (the queue is full) or
 * -ENOMEM: nothing queued, the caller still owns them and done is not
 * called.
 */
int fp_coll_writeq_add(struct fp_coll_writeq *q, struct fp_upload_meta *meta, uint8_t *body,
                       size_t len, char *key, fp_coll_writeq_done_fn done, void *userdata);
/*
 * How a queued body becomes a batch, on the decoder thread: the agents'
 * contract (fp_coll_ingest_build() with its meta) or another protocol's
 * decoder (pyroscope.h). Returns 0 with *ret and the samples, or -errno
 * with one line in err (-EFBIG: 413, -ENOMEM: 503, others: 400).
 */
typedef int (*fp_coll_build_fn)(void *arg, const uint8_t *body, size_t len, size_t max_decompressed,
                                struct fp_store_batch **ret, uint64_t *ret_samples, char *err,
                                size_t errlen);
/*
 * As fp_coll_writeq_add(), with build(arg, ...) as the decoder; arg is
 * taken over on success and freed with free_arg once decoded.
 */
int fp_coll_writeq_add_built(struct fp_coll_writeq *q, fp_coll_build_fn build, void *arg,
                             void (*free_arg)(void *), uint8_t *body, size_t len, char *key,
                             fp_coll_writeq_done_fn done, void *userdata);
/* Time spent writing and groups written so far. */
void fp_coll_writeq_stats(struct fp_coll_writeq *q, uint64_t *ret_store_ns, uint64_t *ret_groups);
/* For /metrics: seconds per group written (a copy), uploads and body bytes in the queue. */
struct fp_hist;
void fp_coll_writeq_metrics(struct fp_coll_writeq *q, struct fp_hist *ret_write, size_t *ret_queued,
                            size_t *ret_bytes);
