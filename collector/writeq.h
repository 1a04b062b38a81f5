/* SPDX-License-Identifier: MIT */
/*
 * The store's writer thread: a group-commit queue. The loop thread queues
 * batches here, each with a completion callback; the writer thread takes
 * what is queued (up to FP_COLL_WRITEQ_MAX batches) and writes it in one
 * store transaction (fp_store_write_batches()), so under load many
 * uploads share one commit, one checkpoint and one budget check, and the
 * loop decodes the next uploads (and answers reads) meanwhile. Once a
 * group is written, each batch's callback runs on the loop thread with
 * its own result (0 stored, -EALREADY its idempotency key was stored
 * before, other -errno the store failed); what to answer and count is the
 * caller's (api.c). The writer thread also applies the retention, once a
 * minute.
 *
 *   loop thread                         writer thread
 *   fp_coll_writeq_add() -> todo ---->  take up to 64, one transaction
 *   done(userdata, result) <- done <--  results, eventfd wake-up
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
struct fp_store_batch;

#define FP_COLL_WRITEQ_MAX   64   /* uploads per transaction */
#define FP_COLL_WRITEQ_LIMIT 1024 /* uploads queued or being written; then 503 */

/*
 * Starts the writer thread with store (taken over, also on failure) and
 * the retention in seconds (0: none). -errno.
 */
int fp_coll_writeq_new(struct event_base *base, struct fp_backend *store, uint64_t retention_s,
                       struct fp_coll_writeq **ret);
/* Writes what is queued (calling back for each), stops the thread, closes its store. Accepts NULL.
 */
void fp_coll_writeq_free(struct fp_coll_writeq *q);
/* Called on the loop thread once the batch's group is written. */
typedef void (*fp_coll_writeq_done_fn)(void *userdata, int result);
/*
 * Queues batch (taken over; freed after done ran). -EBUSY
 * (FP_COLL_WRITEQ_LIMIT batches wait) or -ENOMEM: nothing queued, the
 * caller still owns batch and done is not called.
 */
int fp_coll_writeq_add(struct fp_coll_writeq *q, struct fp_store_batch *batch,
                       fp_coll_writeq_done_fn done, void *userdata);
/* Time spent writing and groups written so far. */
void fp_coll_writeq_stats(struct fp_coll_writeq *q, uint64_t *ret_store_ns, uint64_t *ret_groups);
/* For /metrics: seconds per group written (a copy), and uploads queued or being written. */
struct fp_hist;
void fp_coll_writeq_metrics(struct fp_coll_writeq *q, struct fp_hist *ret_write,
                            size_t *ret_queued);
