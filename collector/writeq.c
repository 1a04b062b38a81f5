/* SPDX-License-Identifier: MIT */
/*
 * Group commit of uploads; see writeq.h.
 */
#include "writeq.h"
#include "server.h"
#include "store.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct job {
        struct fp_coll_writeq *q;
        struct evhttp_request *req; /* NULL: the client hung up */
        struct evhttp_connection *evcon;
        struct fp_store_batch *batch;
        uint64_t samples;
};

struct fp_coll_writeq {
        struct fp_coll_server *s;
        struct event *ev_flush;
        struct job *jobs[FP_COLL_WRITEQ_MAX];
        size_t n;
};

static int64_t mono_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void on_conn_closed(struct evhttp_connection *evcon, void *arg)
{
        struct job *j = arg;

        (void)evcon;
        j->req = NULL;
        j->evcon = NULL;
}

static void answer(struct fp_coll_server *s, struct job *j, int result)
{
        struct evbuffer *b;

        if (result == 0) {
                s->st.uploads_stored++;
                s->st.samples_stored += j->samples;
        } else if (result == -EALREADY) {
                s->st.uploads_duplicate++;
        } else {
                s->st.uploads_failed++;
        }
        if (!j->req)
                return;
        evhttp_connection_set_closecb(j->evcon, NULL, NULL);
        if (result < 0 && result != -EALREADY) {
                fp_coll_reply_error(j->req, 503, "cannot store the upload now: %s",
                                    strerror(-result));
                return;
        }
        b = evbuffer_new();
        if (!b) {
                fp_coll_reply_error(j->req, 503, "out of memory");
                return;
        }
        if (result == 0)
                evbuffer_add_printf(b, "{\"status\": \"stored\", \"samples\": %" PRIu64 "}\n",
                                    j->samples);
        else
                evbuffer_add_printf(b, "{\"status\": \"duplicate\"}\n");
        fp_coll_reply(j->req, 200, "application/json", b);
        evbuffer_free(b);
}

static void flush(struct fp_coll_writeq *q)
{
        struct fp_coll_server *s = q->s;
        const struct fp_store_batch *batches[FP_COLL_WRITEQ_MAX];
        int results[FP_COLL_WRITEQ_MAX];
        size_t n = q->n;
        int64_t t0;
        int r;

        if (n == 0)
                return;
        for (size_t i = 0; i < n; i++)
                batches[i] = q->jobs[i]->batch;
        t0 = mono_ns();
        r = fp_store_write_batches(s->store, batches, n, results);
        s->st.store_ns += (uint64_t)(mono_ns() - t0);
        s->st.groups++;
        if (r < 0)
                fprintf(stderr, "fleetprof-collector: Failed to store %zu uploads: %s\n", n,
                        fp_store_errmsg(s->store));
        q->n = 0;
        for (size_t i = 0; i < n; i++) {
                answer(s, q->jobs[i], results[i]);
                fp_store_batch_free(q->jobs[i]->batch);
                free(q->jobs[i]);
        }
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        flush(arg);
}

int fp_coll_writeq_new(struct fp_coll_server *s, struct fp_coll_writeq **ret)
{
        struct fp_coll_writeq *q = calloc(1, sizeof(*q));

        if (!q)
                return -ENOMEM;
        q->s = s;
        q->ev_flush = event_new(s->base, -1, 0, on_flush, q);
        if (!q->ev_flush) {
                free(q);
                return -ENOMEM;
        }
        /* The lowest priority: after every ready connection has been served. */
        (void)event_priority_set(q->ev_flush, event_base_get_npriorities(s->base) - 1);
        *ret = q;
        return 0;
}

void fp_coll_writeq_free(struct fp_coll_writeq *q)
{
        if (!q)
                return;
        flush(q);
        event_free(q->ev_flush);
        free(q);
}

int fp_coll_writeq_add(struct fp_coll_writeq *q, struct evhttp_request *req,
                       struct fp_store_batch *batch, uint64_t samples)
{
        struct job *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        j->q = q;
        j->req = req;
        j->evcon = evhttp_request_get_connection(req);
        j->batch = batch;
        j->samples = samples;
        if (j->evcon)
                evhttp_connection_set_closecb(j->evcon, on_conn_closed, j);
        q->jobs[q->n++] = j;
        if (q->n == FP_COLL_WRITEQ_MAX)
                flush(q);
        else
                event_active(q->ev_flush, 0, 0);
        return 0;
}
