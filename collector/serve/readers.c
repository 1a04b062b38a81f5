/* SPDX-License-Identifier: MIT */
/*
 * The reader thread and its queue; see readers.h.
 *
 * Only the loop thread touches evhttp's requests and connections and the
 * counters in struct fp_coll_server; the reader thread works on a read's
 * copies (http.h) and on the read-only store, and the two share the job
 * lists under the lock, the read state under its own.
 */
#include "readers.h"
#include "backend.h"
#include "gate.h"
#include "http.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct job {
        struct job *next;
        struct fp_coll_readers *rs;
        fp_coll_read_fn fn;
        bool connect;
        bool probe;       /* counted in no read's place (readers.h) */
        bool gone;        /* its client left: under the lock */
        bool over_memory; /* it ran past --max-read-mb */
        struct fp_coll_req_copy *copy;
        struct evhttp_connection *evcon; /* the loop thread's; not read once gone */
        int64_t queued_ns;
        struct fp_coll_server view; /* the server as it was when the read came */
};

struct fp_coll_readers {
        struct fp_coll_server *s;
        pthread_t thread;
        bool started, stopping;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        struct job *todo, **todo_tail;
        struct job *running;
        struct job *done, **done_tail;
        int efd;
        struct event *ev_done;
};

/* ---- reader thread ---- */

static void run(struct job *j)
{
        struct fp_coll_read_state *st = j->view.reads;
        int64_t t0 = (int64_t)fp_now_ns(CLOCK_MONOTONIC), t1;

        fp_coll_req_copy_enter(j->copy);
        fp_backend_set_deadline(j->view.store, t0 + (int64_t)j->view.max_read_ns);
        fp_coll_read_begin(j->view.max_read_bytes, j->connect);
        j->fn(&j->view, fp_coll_req_copy_req(j->copy));
        fp_backend_set_deadline(j->view.store, 0);
        j->over_memory = fp_coll_read_end();
        fp_coll_req_copy_leave();
        t1 = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
        pthread_mutex_lock(&st->lock);
        st->ran++;
        st->ran_ns += (uint64_t)(t1 - t0);
        st->waited_ns += (uint64_t)(t0 - j->queued_ns);
        pthread_mutex_unlock(&st->lock);
}

static void *reader_main(void *arg)
{
        struct fp_coll_readers *rs = arg;
        uint64_t one = 1;

        pthread_mutex_lock(&rs->lock);
        for (;;) {
                while (!rs->todo && !rs->stopping)
                        pthread_cond_wait(&rs->wake, &rs->lock);
                if (rs->stopping)
                        break; /* what is queued is answered by fp_coll_readers_free() */
                struct job *j = rs->todo;
                rs->todo = j->next;
                if (!rs->todo)
                        rs->todo_tail = &rs->todo;
                j->next = NULL;
                rs->running = j;
                bool gone = j->gone;
                pthread_mutex_unlock(&rs->lock);
                if (!gone)
                        run(j);
                pthread_mutex_lock(&rs->lock);
                rs->running = NULL;
                *rs->done_tail = j;
                rs->done_tail = &j->next;
                if (write(rs->efd, &one, sizeof(one)) < 0) {
                        /* Cannot overflow in practice; the done list is the truth. */
                }
        }
        pthread_mutex_unlock(&rs->lock);
        return NULL;
}

/* ---- loop thread ---- */

static void on_closed(void *arg)
{
        struct job *j = arg;

        pthread_mutex_lock(&j->rs->lock);
        j->gone = true;
        pthread_mutex_unlock(&j->rs->lock);
}

/* Answers j (or drops it, its client gone) and frees it. */
static void finish(struct fp_coll_readers *rs, struct job *j)
{
        struct fp_coll_server *s = rs->s;
        bool gone;

        pthread_mutex_lock(&rs->lock);
        gone = j->gone;
        pthread_mutex_unlock(&rs->lock);
        s->st.reads_over_memory += j->over_memory;
        if (gone) {
                fp_coll_req_copy_drop(j->copy);
        } else {
                if (j->evcon)
                        fp_coll_gate_on_close(s->gate, j->evcon, NULL, NULL);
                fp_coll_req_copy_send(j->copy);
        }
        pthread_mutex_lock(&s->reads->lock);
        s->reads->waiting -= !j->probe;
        pthread_mutex_unlock(&s->reads->lock);
        free(j);
}

static unsigned deliver(struct fp_coll_readers *rs)
{
        struct job *list;
        unsigned n = 0;

        pthread_mutex_lock(&rs->lock);
        list = rs->done;
        rs->done = NULL;
        rs->done_tail = &rs->done;
        pthread_mutex_unlock(&rs->lock);
        while (list) {
                struct job *j = list;

                list = j->next;
                finish(rs, j);
                n++;
        }
        return n;
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
        uint64_t n;

        (void)what;
        if (read(fd, &n, sizeof(n)) < 0) {
                /* EAGAIN: a spurious wake-up; the done list is the truth. */
        }
        (void)deliver(arg);
}

int fp_coll_readers_new(struct fp_coll_server *s, struct fp_coll_readers **ret)
{
        struct fp_coll_readers *rs = calloc(1, sizeof(*rs));
        int r;

        if (!rs)
                return -ENOMEM;
        rs->s = s;
        rs->efd = -1;
        rs->todo_tail = &rs->todo;
        rs->done_tail = &rs->done;
        pthread_mutex_init(&rs->lock, NULL);
        pthread_cond_init(&rs->wake, NULL);
        rs->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (rs->efd < 0) {
                r = -errno;
                goto fail;
        }
        rs->ev_done = event_new(s->base, rs->efd, EV_READ | EV_PERSIST, on_done, rs);
        if (!rs->ev_done || event_add(rs->ev_done, NULL) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        r = -pthread_create(&rs->thread, NULL, reader_main, rs);
        if (r < 0)
                goto fail;
        rs->started = true;
        *ret = rs;
        return 0;
fail:
        fp_coll_readers_free(rs);
        return r;
}

unsigned fp_coll_readers_free(struct fp_coll_readers *rs)
{
        unsigned answered = 0;

        if (!rs)
                return 0;
        if (rs->started) {
                pthread_mutex_lock(&rs->lock);
                rs->stopping = true;
                pthread_cond_signal(&rs->wake);
                pthread_mutex_unlock(&rs->lock);
                pthread_join(rs->thread, NULL);
        }
        answered += deliver(rs);
        while (rs->todo) {
                struct job *j = rs->todo;
                struct evhttp_request *req = fp_coll_req_copy_req(j->copy);
                static const char msg[] = "the collector is stopping: ask again";

                rs->todo = j->next;
                fp_coll_req_copy_enter(j->copy);
                if (j->connect)
                        fp_coll_connect_reply(req, 503, "unavailable", msg);
                else
                        fp_coll_reply_error(req, 503, "%s", msg);
                fp_coll_req_copy_leave();
                finish(rs, j);
                answered++;
        }
        if (rs->ev_done)
                event_free(rs->ev_done);
        if (rs->efd >= 0)
                close(rs->efd);
        pthread_cond_destroy(&rs->wake);
        pthread_mutex_destroy(&rs->lock);
        free(rs);
        return answered;
}

int fp_coll_readers_add(struct fp_coll_readers *rs, struct evhttp_request *req, fp_coll_read_fn fn,
                        bool connect, bool probe)
{
        struct fp_coll_server *s = rs->s;
        struct job *j;

        pthread_mutex_lock(&s->reads->lock);
        if (!probe && s->reads->waiting >= FP_COLL_READS_WAITING) {
                s->reads->busy++;
                pthread_mutex_unlock(&s->reads->lock);
                return -EBUSY;
        }
        pthread_mutex_unlock(&s->reads->lock);
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->copy = fp_coll_req_copy_new(req);
        if (!j->copy) {
                free(j);
                return -ENOMEM;
        }
        j->rs = rs;
        j->fn = fn;
        j->connect = connect;
        j->probe = probe;
        j->evcon = evhttp_request_get_connection(req);
        j->queued_ns = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
        j->view = *s;
        _Static_assert(FP_GATE_N_REASONS <= FP_COLL_GATE_REASONS_MAX, "gate_refused");
        fp_coll_gate_stats(s->gate, &j->view.st.gate_open, j->view.st.gate_refused);
        if (j->evcon)
                fp_coll_gate_on_close(s->gate, j->evcon, on_closed, j);
        pthread_mutex_lock(&s->reads->lock);
        s->reads->waiting += !probe;
        pthread_mutex_unlock(&s->reads->lock);
        pthread_mutex_lock(&rs->lock);
        *rs->todo_tail = j;
        rs->todo_tail = &j->next;
        pthread_cond_signal(&rs->wake);
        pthread_mutex_unlock(&rs->lock);
        return 0;
}

bool fp_coll_readers_idle(struct fp_coll_readers *rs)
{
        bool idle;

        pthread_mutex_lock(&rs->lock);
        idle = !rs->todo && !rs->running;
        pthread_mutex_unlock(&rs->lock);
        return idle;
}
