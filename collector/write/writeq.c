/* SPDX-License-Identifier: MIT */
/*
 * The decoder and writer threads and their queues; see writeq.h.
 *
 *   loop thread                  decoder thread           writer thread
 *   add(): job -> raw, signal -> decode one job;     ->   take up to FP_COLL_WRITEQ_MAX
 *                               decoded: -> todo,         jobs, fp_backend_write_batches()
 *                               refused: -> done          (one transaction), jobs -> done,
 *   on_done() (eventfd) <------------------------------   eventfd write;
 *   answers each job's request                            retention when due
 *
 * Only the loop thread touches requests, connections and the counters in
 * struct fp_coll_server; only the writer thread touches the read-write
 * store. The lock guards the three lists, the queue's size and the
 * writer's time figures.
 */
#include "writeq.h"
#include "prom.h"
#include "util.h"
#include "log.h"
#include "backend.h"
#include "ingest.h"
#include "store.h"
#include "upload_contract.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct job {
        struct job *next;
        fp_coll_build_fn build;
        void *arg; /* build's: the agent's upload meta, or another protocol's request */
        void (*free_arg)(void *);
        uint8_t *body; /* until decoded */
        size_t len;
        char *key;
        struct fp_store_batch *batch; /* once decoded */
        fp_coll_writeq_done_fn done;
        void *userdata;
        struct fp_coll_writeq_result r;
};

struct fp_coll_writeq {
        struct event_base *base;
        struct fp_backend *store; /* the writer thread's */
        uint64_t retention_s;
        size_t max_profile_bytes, max_bytes;
        int efd;
        struct event *ev_done;
        pthread_t thread, decoder;
        bool started, decoder_started;

        pthread_mutex_t lock;
        pthread_cond_t wake, wake_decoder;
        struct job *raw, **raw_tail;
        struct job *todo, **todo_tail;
        struct job *done, **done_tail;
        size_t queued, bytes; /* jobs added and not yet delivered, and their bodies' bytes */
        bool stopping, decoder_stopped;
        bool decoding; /* the decoder is on a job (taken off raw) */
        size_t n_todo; /* jobs in todo */
        bool linger;   /* a group waits for uploads still arriving (ClickHouse) */
        uint64_t store_ns, groups, expired; /* the writer's figures, under lock */
        struct fp_hist write_hist;          /* seconds per group, under lock */
        char error[256];                    /* the last store failure, under lock */
};

static void push(struct job ***tail, struct job *j)
{
        j->next = NULL;
        **tail = j;
        *tail = &j->next;
}

/* The first job of a list (head, tail), taken off it; NULL when empty. */
static struct job *pop(struct job **head, struct job ***tail)
{
        struct job *j = *head;

        if (!j)
                return NULL;
        *head = j->next;
        if (!*head)
                *tail = head;
        j->next = NULL;
        return j;
}

/* Tells the loop thread that the done list has news. */
static void wake_loop(struct fp_coll_writeq *q)
{
        uint64_t one = 1;

        if (write(q->efd, &one, sizeof(one)) < 0) {
                /* Cannot overflow in practice; the done list is the truth. */
        }
}

/* ---- decoder thread ---- */

static void decode(struct fp_coll_writeq *q, struct job *j)
{
        int64_t t0 = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
        int r = j->build(j->arg, j->body, j->len, q->max_profile_bytes, &j->batch, &j->r.samples,
                         j->r.error, sizeof(j->r.error));

        if (r == 0 && j->key && fp_store_batch_set_key(j->batch, j->key) < 0) {
                r = -ENOMEM;
                snprintf(j->r.error, sizeof(j->r.error), "out of memory");
        }
        if (r < 0)
                j->r.decode_status = r == -EFBIG ? 413 : r == -ENOMEM ? 503 : 400;
        j->r.decode_ns = (int64_t)fp_now_ns(CLOCK_MONOTONIC) - t0;
        free(j->body);
        j->body = NULL;
        j->free_arg(j->arg);
        j->arg = NULL;
}

static void *decoder_main(void *arg)
{
        struct fp_coll_writeq *q = arg;

        pthread_mutex_lock(&q->lock);
        for (;;) {
                struct job *j = pop(&q->raw, &q->raw_tail);

                if (!j && q->stopping)
                        break;
                if (!j) {
                        pthread_cond_wait(&q->wake_decoder, &q->lock);
                        continue;
                }
                q->decoding = true;
                pthread_mutex_unlock(&q->lock);
                decode(q, j);
                pthread_mutex_lock(&q->lock);
                q->decoding = false;
                if (j->r.decode_status) {
                        push(&q->done_tail, j);
                        wake_loop(q);
                } else {
                        push(&q->todo_tail, j);
                        q->n_todo++;
                }
                pthread_cond_signal(&q->wake); /* a job for the writer, or its group complete */
        }
        q->decoder_stopped = true;
        pthread_cond_signal(&q->wake);
        pthread_mutex_unlock(&q->lock);
        return NULL;
}

/* ---- writer thread ---- */

static void expire(struct fp_coll_writeq *q)
{
        int64_t before =
            (int64_t)fp_now_ns(CLOCK_REALTIME) - (int64_t)q->retention_s * 1000000000LL;
        int n = fp_backend_expire(q->store, before);

        if (n < 0)
                fp_log(LOG_ERR, "Failed to apply the retention: %s", fp_backend_errmsg(q->store));
        else if (n > 0)
                fp_log(LOG_INFO, "retention: deleted %d old uploads", n);
}

/* Writes one group; called without the lock. */
static void write_group(struct fp_coll_writeq *q, struct job **jobs, size_t n)
{
        const struct fp_store_batch *batches[FP_COLL_WRITEQ_MAX];
        int results[FP_COLL_WRITEQ_MAX];
        int64_t t0 = (int64_t)fp_now_ns(CLOCK_MONOTONIC), took;
        int r;

        for (size_t i = 0; i < n; i++)
                batches[i] = jobs[i]->batch;
        r = fp_backend_write_batches(q->store, batches, n, results);
        took = (int64_t)fp_now_ns(CLOCK_MONOTONIC) - t0;
        for (size_t i = 0; i < n; i++)
                jobs[i]->r.result = results[i];
        pthread_mutex_lock(&q->lock);
        q->store_ns += (uint64_t)took;
        q->groups++;
        fp_hist_observe(&q->write_hist, (double)took / 1e9);
        if (r < 0)
                snprintf(q->error, sizeof(q->error), "%s", fp_backend_errmsg(q->store));
        for (size_t i = 0; i < n; i++)
                push(&q->done_tail, jobs[i]);
        pthread_mutex_unlock(&q->lock);
        if (r < 0)
                fp_log(LOG_ERR, "Failed to store %zu uploads: %s", n, q->error);
}

/*
 * One step of keeping the store's summaries (an hour or a day of every
 * series), while nothing waits to be written: true when there may be
 * more. Called without the lock.
 */
static bool summarise(struct fp_coll_writeq *q)
{
        int r = fp_backend_rollup_step(q->store, (int64_t)fp_now_ns(CLOCK_REALTIME),
                                       FP_COLL_WRITEQ_SUMMARY_GRACE_NS);

        if (r < 0)
                fp_log(LOG_ERR, "Failed to summarise the store: %s", fp_backend_errmsg(q->store));
        return r > 0;
}

static void *thread_main(void *arg)
{
        struct fp_coll_writeq *q = arg;
        int64_t next_expiry = 0;   /* CLOCK_REALTIME ns; 0: now */
        int64_t next_summary = 0;  /* the same, for summaries */
        int64_t last_write = 0;    /* CLOCK_MONOTONIC ns of the last group written */
        int64_t last_summary = 0;  /* ... and of the last summarising step */
        bool summaries_due = true; /* a write (or the start) may have marked some */

        pthread_mutex_lock(&q->lock);
        for (;;) {
                struct job *jobs[FP_COLL_WRITEQ_MAX];
                size_t n = 0;

                if (q->retention_s && (int64_t)fp_now_ns(CLOCK_REALTIME) >= next_expiry) {
                        pthread_mutex_unlock(&q->lock);
                        expire(q);
                        next_expiry = (int64_t)fp_now_ns(CLOCK_REALTIME) + 60 * 1000000000LL;
                        pthread_mutex_lock(&q->lock);
                }
                if (!q->todo && q->stopping && q->decoder_stopped)
                        break;
                int64_t mono = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
                bool quiet = mono - last_write >= FP_COLL_WRITEQ_SUMMARY_QUIET_NS ||
                             mono - last_summary >= FP_COLL_WRITEQ_SUMMARY_BUSY_NS;
                if (!q->todo && !q->stopping && quiet &&
                    (summaries_due || (int64_t)fp_now_ns(CLOCK_REALTIME) >= next_summary)) {
                        /*
                         * Summaries, a step at a time, when uploads pause (a step
                         * now and then under a steady stream of them).
                         */
                        pthread_mutex_unlock(&q->lock);
                        summaries_due = summarise(q);
                        last_summary = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
                        if (!summaries_due)
                                next_summary = (int64_t)fp_now_ns(CLOCK_REALTIME) +
                                               FP_COLL_WRITEQ_SUMMARY_EVERY_NS;
                        pthread_mutex_lock(&q->lock);
                        continue;
                }
                if (!q->todo && q->stopping) {
                        pthread_cond_wait(&q->wake, &q->lock); /* for the decoder to stop */
                        continue;
                }
                if (!q->todo) {
                        int64_t wake = next_summary;
                        if (summaries_due) /* until uploads have paused (CLOCK_REALTIME) */
                                wake = (int64_t)fp_now_ns(CLOCK_REALTIME) +
                                       FP_COLL_WRITEQ_SUMMARY_QUIET_NS - (mono - last_write);
                        if (q->retention_s && next_expiry < wake)
                                wake = next_expiry;
                        struct timespec ts = {.tv_sec = wake / 1000000000LL,
                                              .tv_nsec = wake % 1000000000LL};
                        pthread_cond_timedwait(&q->wake, &q->lock, &ts);
                        continue;
                }
                summaries_due = true;
                last_write = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
                /*
                 * On ClickHouse (linger) uploads already received join the
                 * group: the writer waits while the decoder is still on
                 * some, and while uploads keep coming, each within
                 * FP_COLL_WRITEQ_LINGER_GAP_NS of the last, for
                 * FP_COLL_WRITEQ_GATHER_NS at most. Every INSERT makes a
                 * part of files that ClickHouse creates and later merges,
                 * so fewer, larger writes are what its cost depends on.
                 * SQLite's commit is cheap: its groups are what is ready.
                 */
                int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME), last = now,
                        until = now + FP_COLL_WRITEQ_GATHER_NS;
                size_t seen = q->n_todo;
                while (q->linger && q->n_todo < FP_COLL_WRITEQ_MAX && !q->stopping && now < until &&
                       (q->raw || q->decoding || now - last < FP_COLL_WRITEQ_LINGER_GAP_NS)) {
                        int64_t wake =
                            q->raw || q->decoding || until < last + FP_COLL_WRITEQ_LINGER_GAP_NS
                                ? until
                                : last + FP_COLL_WRITEQ_LINGER_GAP_NS;
                        struct timespec ts = {.tv_sec = wake / 1000000000LL,
                                              .tv_nsec = wake % 1000000000LL};
                        pthread_cond_timedwait(&q->wake, &q->lock, &ts);
                        now = (int64_t)fp_now_ns(CLOCK_REALTIME);
                        if (q->n_todo != seen) {
                                seen = q->n_todo;
                                last = now;
                        }
                }
                while (n < FP_COLL_WRITEQ_MAX && (jobs[n] = pop(&q->todo, &q->todo_tail))) {
                        n++;
                        q->n_todo--;
                }
                pthread_mutex_unlock(&q->lock);
                write_group(q, jobs, n);
                wake_loop(q);
                pthread_mutex_lock(&q->lock);
        }
        pthread_mutex_unlock(&q->lock);
        return NULL;
}

/* ---- loop thread ---- */

static void job_free(struct job *j)
{
        if (j->arg)
                j->free_arg(j->arg);
        free(j->body);
        free(j->key);
        fp_store_batch_free(j->batch);
        free(j);
}

static void deliver(struct fp_coll_writeq *q)
{
        struct job *list;

        pthread_mutex_lock(&q->lock);
        list = q->done;
        q->done = NULL;
        q->done_tail = &q->done;
        pthread_mutex_unlock(&q->lock);
        while (list) {
                struct job *j = list;

                list = j->next;
                j->done(j->userdata, &j->r);
                pthread_mutex_lock(&q->lock);
                q->queued--;
                q->bytes -= j->len;
                pthread_mutex_unlock(&q->lock);
                job_free(j);
        }
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
        uint64_t n;

        (void)what;
        if (read(fd, &n, sizeof(n)) < 0) {
                /* EAGAIN: a spurious wake-up; the done list is the truth. */
        }
        deliver(arg);
}

int fp_coll_writeq_new(struct event_base *base, struct fp_backend *store, uint64_t retention_s,
                       size_t max_profile_bytes, size_t max_bytes, struct fp_coll_writeq **ret)
{
        struct fp_coll_writeq *q = calloc(1, sizeof(*q));
        int r;

        if (!q)
                return -ENOMEM;
        q->base = base;
        q->store = store;
        q->linger = fp_backend_is_clickhouse(store);
        q->retention_s = retention_s;
        q->max_profile_bytes = max_profile_bytes;
        q->max_bytes = max_bytes;
        q->efd = -1;
        q->raw_tail = &q->raw;
        q->todo_tail = &q->todo;
        q->done_tail = &q->done;
        pthread_mutex_init(&q->lock, NULL);
        fp_hist_init(&q->write_hist, fp_hist_latency_bounds, fp_hist_latency_n);
        pthread_cond_init(&q->wake, NULL);
        pthread_cond_init(&q->wake_decoder, NULL);
        q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (q->efd < 0) {
                r = -errno;
                goto fail;
        }
        q->ev_done = event_new(base, q->efd, EV_READ | EV_PERSIST, on_done, q);
        if (!q->ev_done || event_add(q->ev_done, NULL) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        r = -pthread_create(&q->thread, NULL, thread_main, q);
        if (r < 0)
                goto fail;
        q->started = true;
        r = -pthread_create(&q->decoder, NULL, decoder_main, q);
        if (r < 0)
                goto fail;
        q->decoder_started = true;
        *ret = q;
        return 0;
fail:
        q->store = NULL; /* the caller's on failure */
        fp_coll_writeq_free(q);
        return r;
}

void fp_coll_writeq_free(struct fp_coll_writeq *q)
{
        if (!q)
                return;
        if (q->started) {
                pthread_mutex_lock(&q->lock);
                q->stopping = true;
                if (!q->decoder_started)
                        q->decoder_stopped = true;
                pthread_cond_signal(&q->wake);
                pthread_cond_signal(&q->wake_decoder);
                pthread_mutex_unlock(&q->lock);
                if (q->decoder_started)
                        pthread_join(q->decoder, NULL);
                pthread_join(q->thread, NULL);
                deliver(q); /* what was decoded and written last, answered */
        }
        if (q->ev_done)
                event_free(q->ev_done);
        if (q->efd >= 0)
                close(q->efd);
        fp_backend_close(q->store);
        pthread_cond_destroy(&q->wake);
        pthread_cond_destroy(&q->wake_decoder);
        pthread_mutex_destroy(&q->lock);
        free(q);
}

void fp_coll_writeq_metrics(struct fp_coll_writeq *q, struct fp_hist *ret_write, size_t *ret_queued,
                            size_t *ret_bytes)
{
        pthread_mutex_lock(&q->lock);
        *ret_write = q->write_hist;
        *ret_queued = q->queued;
        *ret_bytes = q->bytes;
        pthread_mutex_unlock(&q->lock);
}

void fp_coll_writeq_stats(struct fp_coll_writeq *q, uint64_t *ret_store_ns, uint64_t *ret_groups)
{
        pthread_mutex_lock(&q->lock);
        *ret_store_ns = q->store_ns;
        *ret_groups = q->groups;
        pthread_mutex_unlock(&q->lock);
}

/* The agents' contract: the decoder of ingest.h with the upload's meta. */
static int build_native(void *arg, const uint8_t *body, size_t len, size_t max_decompressed,
                        struct fp_store_batch **ret, uint64_t *ret_samples, char *err,
                        size_t errlen)
{
        return fp_coll_ingest_build(arg, body, len, max_decompressed, ret, ret_samples, err,
                                    errlen);
}

int fp_coll_writeq_add(struct fp_coll_writeq *q, struct fp_upload_meta *meta, uint8_t *body,
                       size_t len, char *key, fp_coll_writeq_done_fn done, void *userdata)
{
        return fp_coll_writeq_add_built(q, build_native, meta, free, body, len, key, done,
                                        userdata);
}

int fp_coll_writeq_add_built(struct fp_coll_writeq *q, fp_coll_build_fn build, void *arg,
                             void (*free_arg)(void *), uint8_t *body, size_t len, char *key,
                             fp_coll_writeq_done_fn done, void *userdata)
{
        struct job *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        pthread_mutex_lock(&q->lock);
        /* One upload larger than the whole budget still passes into an empty queue. */
        if (q->queued >= FP_COLL_WRITEQ_LIMIT || (q->queued && q->bytes + len > q->max_bytes)) {
                pthread_mutex_unlock(&q->lock);
                free(j);
                return -EBUSY;
        }
        *j = (struct job){.build = build,
                          .arg = arg,
                          .free_arg = free_arg,
                          .body = body,
                          .len = len,
                          .key = key,
                          .done = done,
                          .userdata = userdata};
        q->queued++;
        q->bytes += len;
        push(&q->raw_tail, j);
        pthread_cond_signal(&q->wake_decoder);
        pthread_mutex_unlock(&q->lock);
        return 0;
}
