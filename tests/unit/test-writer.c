/* SPDX-License-Identifier: MIT */
/*
 * The agent's store writer (agent/keep/writer.c): its queue is bounded in
 * bytes. With the writer thread held busy, batches are queued until one
 * does not fit: that one is refused with -ENOBUFS and stays the caller's
 * (the agent counts its samples as queue_full); every batch accepted is
 * written, in order, once the thread is free again. A real store file, a
 * real writer thread, a real event loop.
 */
#include "fp-test.h"
#include "store.h"
#include "writer.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int released, holding;
static unsigned written, failed, next_expected;
static bool in_order = true;

/* Runs on the writer thread: holds it until the test releases it. */
static int hold(struct fp_store *store, void *arg)
{
        (void)store;
        (void)arg;
        pthread_mutex_lock(&lock);
        holding = 1;
        pthread_cond_broadcast(&cond);
        while (!released)
                pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        return 0;
}

static void on_call(void *userdata, const struct fp_writer_result *r)
{
        (void)userdata;
        (void)r;
}

static void on_done(void *userdata, const struct fp_writer_result *r)
{
        (void)userdata;
        if (r->kind != FP_WRITER_BATCH)
                return;
        if (r->error < 0)
                failed++;
        else
                written++;
        if ((unsigned)(uintptr_t)r->cookie != next_expected)
                in_order = false;
        next_expected++;
        fp_store_batch_free(r->batch);
}

/* A bucket of one target with n distinct stacks. */
static struct fp_store_batch *make_batch(int64_t start, unsigned n)
{
        struct fp_store_batch *b = fp_store_batch_new(start, 1000000000);
        struct fp_store_target t = {.host = "h",
                                    .pid = 42,
                                    .starttime = 7,
                                    .comm = "w",
                                    .config = "event=cpu-clock freq=0 period=1000000 kernel=0",
                                    .active = true};
        struct fp_store_event e = {.name = "cpu-clock",
                                   .count_type = "samples",
                                   .count_unit = "count",
                                   .value_type = "cpu",
                                   .value_unit = "nanoseconds",
                                   .period_type = "cpu",
                                   .period_unit = "nanoseconds",
                                   .period = 1000000};
        uint32_t ti, ei, si;
        char name[32];

        FP_CHECK(b && fp_store_batch_add_target(b, &t, &ti) == 0 &&
                 fp_store_batch_add_event(b, &e, &ei) == 0);
        for (unsigned i = 0; i < n; i++) {
                snprintf(name, sizeof(name), "f%u", i);
                struct fp_store_frame f = {.function = name, .address = 0x1000 + i};
                FP_CHECK_EQ_INT(fp_store_batch_add_stack(b, &f, 1, &si), 0);
                FP_CHECK_EQ_INT(fp_store_batch_add_sample(b, ti, ei, 43, "w", si, 1, 1000000), 0);
        }
        return b;
}

int main(void)
{
        char dir[] = "/tmp/fp-test-writer.XXXXXX", path[128], err[256];
        struct event_base *base = event_base_new();
        struct fp_store *store = NULL;
        struct fp_writer *w = NULL;
        unsigned accepted = 0, refused = 0;
        size_t bound = 256 * 1024, queued_bytes = 0, batch_bytes = 0;

        FP_CHECK(mkdtemp(dir) != NULL);
        snprintf(path, sizeof(path), "%s/agent.db", dir);
        FP_CHECK(fp_store_open(path, 64 << 20, &store, err, sizeof(err)) >= 0);
        FP_CHECK_EQ_INT(fp_writer_new(base, store, path, 64 << 20, bound, on_done, NULL, &w), 0);

        /* Hold the thread, then fill the queue. */
        FP_CHECK_EQ_INT(fp_writer_submit_call(w, hold, NULL, on_call, NULL), 0);
        pthread_mutex_lock(&lock);
        while (!holding)
                pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        for (unsigned i = 0; i < 200 && refused == 0; i++) {
                struct fp_store_batch *b = make_batch((int64_t)i * 1000000000, 200);
                batch_bytes = fp_store_batch_bytes(b);
                int r = fp_writer_submit_batch(w, b, (void *)(uintptr_t)accepted);
                if (r == -ENOBUFS) {
                        refused++;
                        fp_store_batch_free(b); /* still ours */
                } else {
                        FP_CHECK_EQ_INT(r, 0);
                        accepted++;
                        queued_bytes += batch_bytes;
                }
        }
        printf(
            "batches of %zu bytes: %u accepted (%zu bytes) under a %zu-byte bound, then refused\n",
            batch_bytes, accepted, queued_bytes, bound);
        FP_CHECK_EQ_INT(refused, 1);
        FP_CHECK(accepted >= 1);
        FP_CHECK(queued_bytes <= bound);
        FP_CHECK(queued_bytes + batch_bytes > bound);
        FP_CHECK(fp_writer_pending(w) >= accepted);

        /* Free the thread: everything accepted is written, in order. */
        pthread_mutex_lock(&lock);
        released = 1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
        for (int i = 0; i < 500 && written + failed < accepted; i++) {
                struct timeval tv = {0, 10000};
                event_base_loopexit(base, &tv);
                event_base_dispatch(base);
        }
        FP_CHECK_EQ_INT(written, accepted);
        FP_CHECK_EQ_INT(failed, 0);
        FP_CHECK(in_order);
        /* And the queue takes batches again. */
        FP_CHECK_EQ_INT(
            fp_writer_submit_batch(w, make_batch(999000000000LL, 10), (void *)(uintptr_t)accepted),
            0);
        fp_writer_free(w);
        FP_CHECK_EQ_INT(written, accepted + 1);
        event_base_free(base);
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        FP_CHECK_EQ_INT(system(cmd), 0);
        return FP_TEST_DONE();
}
