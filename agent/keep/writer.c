/* SPDX-License-Identifier: MIT */
/*
 * The store's writer thread; see writer.h.
 *
 * Shared state (the job FIFO, the result FIFO, the store's health line) is
 * guarded by one mutex. The store itself is touched only by the thread
 * while it runs, and by fp_writer_free() after it has been joined.
 */
#include "writer.h"
#include "counters.h"
#include "pprof.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct job {
        struct job *next;
        struct fp_writer_result r;
        struct fp_store_filter filter;
        char *filter_strings[5]; /* copies of host, process, event, service, thread_name */
        size_t bytes;            /* counted against the queue bound */
        fp_writer_call_fn fn;
        fp_writer_done_fn call_done;
        void *call_userdata;
        struct fp_writer_drop *drops;
};

struct fp_writer {
        struct event_base *base;
        struct fp_store *store;
        char *path;
        uint64_t max_bytes;
        size_t max_queue_bytes;
        fp_writer_done_fn done;
        void *userdata;

        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        struct job *jobs, **jobs_tail;
        struct job *results, **results_tail;
        size_t queued_bytes, n_pending;
        bool stopping;
        bool store_ok;
        char store_msg[256];

        int efd;
        struct event *ev;
};

static void job_free(struct job *j)
{
        if (!j)
                return;
        for (size_t i = 0; i < 5; i++)
                free(j->filter_strings[i]);
        free(j->drops);
        free(j);
}

struct drops_acc {
        struct fp_writer_drop *v;
        size_t n, cap;
};

static int collect_drop(void *userdata, const struct fp_store_drop *d)
{
        struct drops_acc *a = userdata;
        if (a->n == a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 16;
                void *p = realloc(a->v, cap * sizeof(*a->v));
                if (!p)
                        return -ENOMEM;
                a->v = p;
                a->cap = cap;
        }
        struct fp_writer_drop *x = &a->v[a->n++];
        x->pid = d->pid;
        x->starttime = d->starttime;
        snprintf(x->reason, sizeof(x->reason), "%s", d->reason);
        x->count = d->count;
        return 0;
}

/*
 * (Re)opens the store when it is not open. Called on the writer thread. A
 * damaged file moved aside is reported through note (for the log).
 */
static void ensure_store(struct fp_writer *w, char *note, size_t note_len)
{
        char err[256] = "";
        struct fp_store *s = NULL;
        int r;

        if (w->store || !w->path)
                return;
        r = fp_store_open(w->path, w->max_bytes, &s, err, sizeof(err));
        pthread_mutex_lock(&w->lock);
        if (r >= 0) {
                w->store = s;
                w->store_ok = true;
                w->store_msg[0] = 0;
                if (r == FP_STORE_RECOVERED)
                        snprintf(note, note_len, "%s", err);
        } else {
                w->store_ok = false;
                snprintf(w->store_msg, sizeof(w->store_msg), "%s", err);
        }
        pthread_mutex_unlock(&w->lock);
}

static void run_batch(struct fp_writer *w, struct job *j)
{
        struct drops_acc acc = {0};

        ensure_store(w, j->r.message, sizeof(j->r.message));
        if (!w->store) {
                j->r.error = -ENODEV;
                pthread_mutex_lock(&w->lock);
                snprintf(j->r.message, sizeof(j->r.message), "no store: %.200s", w->store_msg);
                pthread_mutex_unlock(&w->lock);
                return;
        }
        j->r.error = fp_store_write_batch(w->store, j->r.batch);
        if (j->r.error < 0) {
                snprintf(j->r.message, sizeof(j->r.message), "%s", fp_store_errmsg(w->store));
                pthread_mutex_lock(&w->lock);
                snprintf(w->store_msg, sizeof(w->store_msg), "%s", j->r.message);
                pthread_mutex_unlock(&w->lock);
                if (j->r.error == -EBADMSG) {
                        /* Damaged under us: reopening moves it aside and starts afresh. */
                        fp_store_close(w->store);
                        w->store = NULL;
                }
        } else {
                pthread_mutex_lock(&w->lock);
                w->store_ok = true;
                w->store_msg[0] = 0;
                pthread_mutex_unlock(&w->lock);
        }
        if (w->store && fp_store_stats(w->store, &j->r.stats) == 0)
                j->r.have_stats = true;
        if (w->store) {
                struct fp_store_filter all = {0};
                if (fp_store_drop_totals(w->store, &all, collect_drop, &acc) >= 0) {
                        j->drops = acc.v;
                        j->r.drops = acc.v;
                        j->r.n_drops = acc.n;
                } else {
                        free(acc.v);
                }
        }
}

static void run_query(struct fp_writer *w, struct job *j)
{
        ensure_store(w, j->r.message, sizeof(j->r.message));
        if (!w->store) {
                j->r.error = -ENODEV;
                return; /* the builder keeps what the caller put in */
        }
        /* A dump holds up the buckets queued behind it: at most FP_WRITER_QUERY_S of it. */
        fp_store_set_deadline(w->store, (int64_t)fp_now_ns(CLOCK_MONOTONIC) +
                                            FP_WRITER_QUERY_S * 1000000000LL);
        int r = fp_counters_query(w->store, &j->filter, j->r.pprof);
        fp_store_set_deadline(w->store, 0);
        if (r < 0) {
                j->r.error = r;
                snprintf(j->r.message, sizeof(j->r.message), "%s", fp_store_errmsg(w->store));
        }
}

static void *thread_main(void *arg)
{
        struct fp_writer *w = arg;
        uint64_t one = 1;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (!w->jobs && !w->stopping)
                        pthread_cond_wait(&w->wake, &w->lock);
                struct job *j = w->jobs;
                if (!j)
                        break; /* stopping with nothing left */
                pthread_mutex_unlock(&w->lock);

                if (j->r.kind == FP_WRITER_BATCH) {
                        run_batch(w, j);
                } else if (j->r.kind == FP_WRITER_QUERY) {
                        run_query(w, j);
                } else {
                        ensure_store(w, j->r.message, sizeof(j->r.message));
                        j->r.error = j->fn(w->store, j->r.arg);
                        /* A call may change what status shows (uploads mark buckets). */
                        if (w->store && fp_store_stats(w->store, &j->r.stats) == 0)
                                j->r.have_stats = true;
                }

                pthread_mutex_lock(&w->lock);
                w->jobs = j->next;
                if (!w->jobs)
                        w->jobs_tail = &w->jobs;
                w->queued_bytes -= j->bytes;
                j->next = NULL;
                *w->results_tail = j;
                w->results_tail = &j->next;
                pthread_mutex_unlock(&w->lock);
                if (write(w->efd, &one, sizeof(one)) < 0) {
                        /* The counter cannot overflow in practice; the loop reads results anyway.
                         */
                }
                pthread_mutex_lock(&w->lock);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

/* Delivers finished jobs' results on the loop thread. */
static void deliver(struct fp_writer *w)
{
        struct job *list;

        pthread_mutex_lock(&w->lock);
        list = w->results;
        w->results = NULL;
        w->results_tail = &w->results;
        pthread_mutex_unlock(&w->lock);
        while (list) {
                struct job *j = list;
                list = j->next;
                if (j->r.kind == FP_WRITER_CALL) {
                        j->call_done(j->call_userdata, &j->r);
                        if (j->r.have_stats)
                                w->done(w->userdata, &j->r); /* the fresh statistics */
                } else
                        w->done(w->userdata, &j->r);
                pthread_mutex_lock(&w->lock);
                w->n_pending--;
                pthread_mutex_unlock(&w->lock);
                job_free(j);
        }
}

static void on_results(evutil_socket_t fd, short what, void *arg)
{
        struct fp_writer *w = arg;
        uint64_t n;
        (void)what;
        if (read(fd, &n, sizeof(n)) < 0) {
                /* EAGAIN: a spurious wake-up; the results list is the truth. */
        }
        deliver(w);
}

int fp_writer_new(struct event_base *base, struct fp_store *store, const char *path,
                  uint64_t max_bytes, size_t max_queue_bytes, fp_writer_done_fn done,
                  void *userdata, struct fp_writer **ret)
{
        struct fp_writer *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->base = base;
        w->store = store;
        w->store_ok = store != NULL;
        w->max_bytes = max_bytes;
        w->max_queue_bytes = max_queue_bytes;
        w->done = done;
        w->userdata = userdata;
        w->jobs_tail = &w->jobs;
        w->results_tail = &w->results;
        w->efd = -1;
        if (path && !(w->path = strdup(path))) {
                free(w);
                return -ENOMEM;
        }
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0) {
                int e = -errno;
                free(w->path);
                free(w);
                return e;
        }
        w->ev = event_new(base, w->efd, EV_READ | EV_PERSIST, on_results, w);
        if (!w->ev || event_add(w->ev, NULL) < 0) {
                if (w->ev)
                        event_free(w->ev);
                close(w->efd);
                free(w->path);
                free(w);
                return -ENOMEM;
        }
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
        int r = pthread_create(&w->thread, NULL, thread_main, w);
        if (r != 0) {
                event_free(w->ev);
                close(w->efd);
                free(w->path);
                pthread_mutex_destroy(&w->lock);
                pthread_cond_destroy(&w->wake);
                free(w);
                return -r;
        }
        *ret = w;
        return 0;
}

void fp_writer_free(struct fp_writer *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        deliver(w);
        event_free(w->ev);
        close(w->efd);
        fp_store_close(w->store);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
        free(w->path);
        free(w);
}

static int submit(struct fp_writer *w, struct job *j)
{
        pthread_mutex_lock(&w->lock);
        if (j->bytes && w->queued_bytes + j->bytes > w->max_queue_bytes && w->jobs) {
                pthread_mutex_unlock(&w->lock);
                return -ENOBUFS;
        }
        w->queued_bytes += j->bytes;
        w->n_pending++;
        *w->jobs_tail = j;
        w->jobs_tail = &j->next;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        return 0;
}

int fp_writer_submit_batch(struct fp_writer *w, struct fp_store_batch *b, void *cookie)
{
        struct job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->r.kind = FP_WRITER_BATCH;
        j->r.cookie = cookie;
        j->r.batch = b;
        j->bytes = fp_store_batch_bytes(b);
        if (j->bytes == 0)
                j->bytes = 1;
        int r = submit(w, j);
        if (r < 0)
                free(j);
        return r;
}

int fp_writer_submit_query(struct fp_writer *w, const struct fp_store_filter *f, struct fp_pprof *p,
                           void *cookie)
{
        struct job *j = calloc(1, sizeof(*j));
        const char *src[5] = {f->host, f->process, f->event, f->service, f->thread_name};
        if (!j)
                return -ENOMEM;
        j->r.kind = FP_WRITER_QUERY;
        j->r.cookie = cookie;
        j->r.pprof = p;
        j->filter = *f;
        for (size_t i = 0; i < 5; i++) {
                if (src[i] && !(j->filter_strings[i] = strdup(src[i]))) {
                        job_free(j);
                        return -ENOMEM;
                }
        }
        j->filter.host = j->filter_strings[0];
        j->filter.process = j->filter_strings[1];
        j->filter.event = j->filter_strings[2];
        j->filter.service = j->filter_strings[3];
        j->filter.thread_name = j->filter_strings[4];
        int r = submit(w, j);
        if (r < 0)
                job_free(j);
        return r;
}

int fp_writer_submit_call(struct fp_writer *w, fp_writer_call_fn fn, void *arg,
                          fp_writer_done_fn done, void *userdata)
{
        struct job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->r.kind = FP_WRITER_CALL;
        j->r.arg = arg;
        j->fn = fn;
        j->call_done = done;
        j->call_userdata = userdata;
        int r = submit(w, j);
        if (r < 0)
                free(j);
        return r;
}

size_t fp_writer_pending(const struct fp_writer *w)
{
        return w->n_pending;
}

bool fp_writer_store_ok(struct fp_writer *w, char *msg, size_t len)
{
        pthread_mutex_lock(&w->lock);
        bool ok = w->store_ok;
        if (msg && len)
                snprintf(msg, len, "%s", w->store_msg);
        pthread_mutex_unlock(&w->lock);
        return ok;
}
