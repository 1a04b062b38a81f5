/* SPDX-License-Identifier: MIT */
/*
 * The store's writer thread, with group commit. The loop thread decodes
 * an upload into a batch and queues it here; the writer thread takes
 * what is queued (up to FP_COLL_WRITEQ_MAX uploads) and writes it in one
 * store transaction (fp_store_write_batches()), so under load many
 * uploads share one commit, one checkpoint and one budget check, and the
 * loop decodes the next uploads (and answers reads) meanwhile. Each
 * upload is answered on the loop thread once its group is written: 200
 * "stored" or "duplicate", or 503 when the store failed (the agent
 * retries). A client that hangs up meanwhile is noticed (the
 * connection's close callback); its upload is still stored. The writer
 * thread also applies the retention, once a minute.
 *
 * The writer thread owns the read-write store; the loop thread reads
 * through a read-only handle of its own (WAL lets both work at once).
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct evhttp_request;
struct fp_coll_server;
struct fp_coll_writeq;
struct fp_store;
struct fp_store_batch;

#define FP_COLL_WRITEQ_MAX   64   /* uploads per transaction */
#define FP_COLL_WRITEQ_LIMIT 1024 /* uploads queued or being written; then 503 */

/*
 * Starts the writer thread with store (taken over, also on failure) and
 * the retention in seconds (0: none). -errno.
 */
int fp_coll_writeq_new(struct fp_coll_server *s, struct fp_store *store, uint64_t retention_s,
                       struct fp_coll_writeq **ret);
/* Writes and answers what is queued, stops the thread, closes its store. Accepts NULL. */
void fp_coll_writeq_free(struct fp_coll_writeq *q);
/*
 * Queues batch (taken over) for the upload req, which is answered later.
 * -EBUSY (FP_COLL_WRITEQ_LIMIT uploads wait) or -ENOMEM: nothing queued,
 * the caller still owns batch and answers req.
 */
int fp_coll_writeq_add(struct fp_coll_writeq *q, struct evhttp_request *req,
                       struct fp_store_batch *batch, uint64_t samples);
