/* SPDX-License-Identifier: MIT */
/*
 * The store's writer thread.
 *
 * SQLite can stall for as long as the disk likes, and the event loop must
 * never stall: it drains the perf rings. So the loop hands work to this
 * thread through a FIFO of jobs and hears back through an eventfd:
 *
 *   batch  a closed bucket (struct fp_store_batch) to write;
 *   query  a dump: a pprof builder already holding the open bucket's
 *          samples, to which the thread adds what the store holds for a
 *          filter (the event and the counters of its group, see
 *          counters.h), after every batch queued before it has been
 *          written.
 *
 * Results come back to the loop thread through the done callback, in job
 * order, with ownership of the batch or builder returned. After each
 * batch the thread also reports the store's statistics and its drop
 * totals per target and reason, so status needs no query of its own.
 *
 * The queue is bounded in bytes; a batch that does not fit is refused
 * (-ENOBUFS) and stays the caller's, who counts its samples as
 * "queue_full". When the store could not be opened or a write fails, the
 * thread tries to reopen it before the next batch.
 */
#pragma once

#include "store.h"

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct fp_pprof;
struct fp_writer;

/* Drop totals per (pid, starttime, reason), as stored. */
struct fp_writer_drop {
        pid_t pid;
        uint64_t starttime;
        char reason[32];
        uint64_t count;
};

struct fp_writer_result;
typedef void (*fp_writer_done_fn)(void *userdata, const struct fp_writer_result *r);

enum fp_writer_job_kind {
        FP_WRITER_BATCH,
        FP_WRITER_QUERY,
        FP_WRITER_CALL,
};

/*
 * A function run on the writer thread with the store (NULL when it cannot
 * be opened); its return value becomes the result's error.
 */
typedef int (*fp_writer_call_fn)(struct fp_store *store, void *arg);

struct fp_writer_result {
        enum fp_writer_job_kind kind;
        void *cookie; /* the caller's, as submitted */
        int error;    /* 0 or -errno */
        char message[256];
        /* batch: returned to the caller (freed by it). query: the builder, filled. */
        struct fp_store_batch *batch;
        struct fp_pprof *pprof;
        void *arg; /* call: the argument, returned */
        /*
         * batch and call: a snapshot taken after the job (valid during the
         * callback); a call with one is also passed to the done function.
         */
        bool have_stats;
        struct fp_store_stats stats;
        const struct fp_writer_drop *drops;
        size_t n_drops;
};

/*
 * Starts the thread. store may be NULL (it could not be opened): path and
 * max_bytes are kept to retry. The writer owns store from here on.
 */
int fp_writer_new(struct event_base *base, struct fp_store *store, const char *path,
                  uint64_t max_bytes, size_t max_queue_bytes, fp_writer_done_fn done,
                  void *userdata, struct fp_writer **ret);
/*
 * Finishes the queued jobs (waiting for them), stops the thread, closes
 * the store. Accepts NULL. Results still pending are delivered first.
 */
void fp_writer_free(struct fp_writer *w);

/* Queues a batch; on success the writer owns it until its result. -ENOBUFS: queue full. */
int fp_writer_submit_batch(struct fp_writer *w, struct fp_store_batch *b, void *cookie);
/*
 * Queues a query; the filter's strings are copied; the writer owns p until
 * its result. A query runs at most FP_WRITER_QUERY_S seconds (then
 * -ETIMEDOUT, saying why): the buckets queued behind it wait that long at
 * most.
 */
#define FP_WRITER_QUERY_S 10
int fp_writer_submit_query(struct fp_writer *w, const struct fp_store_filter *f, struct fp_pprof *p,
                           void *cookie);

/*
 * Queues a call of fn(store, arg) on the writer thread, after every job
 * queued before it. Its result goes to done(userdata, result) on the loop
 * thread, not to the writer's own callback.
 */
int fp_writer_submit_call(struct fp_writer *w, fp_writer_call_fn fn, void *arg,
                          fp_writer_done_fn done, void *userdata);

/* Jobs queued or running. */
size_t fp_writer_pending(const struct fp_writer *w);
/* Whether the store is open now, and the last open/write error ("" if none). */
bool fp_writer_store_ok(struct fp_writer *w, char *msg, size_t len);
