/* SPDX-License-Identifier: MIT */
/*
 * Group commit of uploads. The ingest handler decodes an upload into a
 * batch and queues it here instead of writing it at once; the queue is
 * written in one store transaction (fp_store_write_batches()) when it
 * holds FP_COLL_WRITEQ_MAX uploads, or when the loop has nothing more
 * urgent to do: the flush event has the lowest priority, so it runs after
 * every connection that is ready has been read. Under load many uploads
 * share one commit, one checkpoint and one eviction check; when idle, an
 * upload is written in the same loop iteration it arrived in.
 *
 * Each queued upload is answered after its group is written: 200
 * "stored" or "duplicate", or 503 when the store failed (the agent
 * retries). A client that hangs up meanwhile is noticed (the
 * connection's close callback) and its upload still stored.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct evhttp_request;
struct fp_coll_server;
struct fp_coll_writeq;
struct fp_store_batch;

#define FP_COLL_WRITEQ_MAX 64

/* The flush event gets the lowest of the base's priorities (main sets up three). */
int fp_coll_writeq_new(struct fp_coll_server *s, struct fp_coll_writeq **ret);
/* Writes what is queued (answering it), then frees. Accepts NULL. */
void fp_coll_writeq_free(struct fp_coll_writeq *q);
/*
 * Queues batch (taken over) for the upload req, which is answered later.
 * -ENOMEM: nothing queued, the caller still owns batch and answers req.
 */
int fp_coll_writeq_add(struct fp_coll_writeq *q, struct evhttp_request *req,
                       struct fp_store_batch *batch, uint64_t samples);
