/* SPDX-License-Identifier: MIT */
/*
 * The reader thread: every read whose cost grows with what a client
 * asked for or what is stored (series, profiles, the page's views, the
 * query API, /metrics) runs here, never on the loop thread, so the loop
 * keeps taking uploads and answering /healthz while a read takes its
 * time (at most --max-read-ms, or its memory at most --max-read-mb).
 *
 *   loop thread                            reader thread
 *   fp_coll_readers_add(): copy the request  -> queue -> fn(copy of the server, copy)
 *   send the answer (eventfd) <--------------- done <-  the answer, kept in the copy
 *
 * Reads run one at a time, in the order they came, on the read-only store
 * handle (struct fp_coll_server's store), which only this thread uses
 * once the server is started. At most FP_COLL_READS_WAITING wait or run;
 * past that add() refuses (-EBUSY) and the caller answers 503. A read
 * whose client left before its answer is dropped when it ends.
 */
#pragma once

#include <stdbool.h>

struct fp_coll_server;
struct fp_coll_readers;
struct evhttp_request;

#define FP_COLL_READS_WAITING 64

typedef void (*fp_coll_read_fn)(struct fp_coll_server *s, struct evhttp_request *req);

/* Starts the thread for s's reads. -errno. */
int fp_coll_readers_new(struct fp_coll_server *s, struct fp_coll_readers **ret);
/*
 * Stops the thread once the read it runs ends, answers what was queued
 * (503, stopping) and what was done, and returns how many it answered.
 * On the loop thread, before evhttp is freed. Accepts NULL.
 */
unsigned fp_coll_readers_free(struct fp_coll_readers *r);
/*
 * Queues fn(s, req) as a read (connect: its errors in Connect's terms):
 * 0, -EBUSY (the queue is full), -ENOMEM. On the loop thread. A probe
 * (/healthz, queued only while the thread is idle) takes none of the
 * FP_COLL_READS_WAITING places, so it never turns a client's read away.
 */
int fp_coll_readers_add(struct fp_coll_readers *r, struct evhttp_request *req, fp_coll_read_fn fn,
                        bool connect, bool probe);
/* Whether no read is queued or running now. */
bool fp_coll_readers_idle(struct fp_coll_readers *r);
