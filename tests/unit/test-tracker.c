/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the BPF thread tracker (agent/sampling/tracker.c with the real
 * tracker.bpf.c loaded into the running kernel): it reports this process's
 * new and exiting threads once the process is tracked, and nothing once it
 * is not; a child forked by a process tracked with FP_TRACKER_FOLLOW is
 * reported and tracked in turn (its exit comes with GROUP_DEAD). Where BPF
 * cannot be loaded (not root, no BTF, built without BPF) the test checks
 * that the failure comes with a one-line reason instead.
 */
#include "fp-test.h"
#include "tracker.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 64

struct seen {
        struct fp_tracker_event ev[MAX_EVENTS];
        size_t n;
};

static void on_event(void *userdata, const struct fp_tracker_event *e)
{
        struct seen *s = userdata;
        if (s->n < MAX_EVENTS)
                s->ev[s->n++] = *e;
}

static const struct fp_tracker_event *find(const struct seen *s, unsigned kind, pid_t tid)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->ev[i].kind == kind && (pid_t)s->ev[i].tid == tid)
                        return &s->ev[i];
        return NULL;
}

/* Runs the loop for ms milliseconds, so the ring buffer's records are read. */
static void run_loop(struct event_base *base, struct fp_tracker *tr, int ms)
{
        struct timeval tv = {.tv_sec = 0, .tv_usec = ms * 1000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
        fp_tracker_poll(tr);
}

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static pid_t thread_tid;

static void *thread_main(void *arg)
{
        (void)arg;
        thread_tid = (pid_t)syscall(SYS_gettid);
        usleep(20000);
        return NULL;
}

static pid_t one_thread(void)
{
        pthread_t th;
        if (pthread_create(&th, NULL, thread_main, NULL) != 0)
                return -1;
        pthread_join(th, NULL);
        return thread_tid;
}

int main(void)
{
        struct event_base *base = event_base_new();
        struct fp_tracker *tr = NULL;
        struct seen *s = calloc(1, sizeof(*s));
        char err[256] = "";
        pid_t self = getpid();
        int r;

        FP_CHECK(base && s);
        r = fp_tracker_new(base, on_event, s, &tr, err, sizeof(err));
        if (r < 0) {
                /* No BPF here: the agent falls back; the reason must be one readable line. */
                printf("tracker not loadable: %s\n", err);
                FP_CHECK(err[0] != 0 && !strchr(err, '\n'));
                FP_CHECK(tr == NULL);
                free(s);
                event_base_free(base);
                return FP_TEST_DONE();
        }

        /* Untracked: a thread of ours is not reported. */
        pid_t tid = one_thread();
        run_loop(base, tr, 50);
        FP_CHECK(find(s, FP_TRACKER_THREAD_NEW, tid) == NULL);

        /* Tracked: birth (before the thread ran) and exit of a new thread. */
        FP_CHECK_EQ_INT(fp_tracker_add(tr, self, FP_TRACKER_FOLLOW), 0);
        uint64_t before = mono_ns();
        tid = one_thread();
        run_loop(base, tr, 50);
        const struct fp_tracker_event *born = find(s, FP_TRACKER_THREAD_NEW, tid);
        const struct fp_tracker_event *gone = find(s, FP_TRACKER_THREAD_EXIT, tid);
        FP_CHECK(born != NULL);
        FP_CHECK(gone != NULL);
        if (born && gone) {
                FP_CHECK_EQ_INT(born->tgid, self);
                FP_CHECK_EQ_INT(born->parent_tgid, self);
                FP_CHECK(born->time_ns >= before && born->time_ns <= gone->time_ns);
                FP_CHECK(gone->time_ns - born->time_ns >= 15000000); /* it slept 20 ms */
                FP_CHECK_EQ_INT(gone->flags & FP_TRACKER_EV_GROUP_DEAD, 0);
                FP_CHECK(born < gone);
        }

        /* A child of a followed process: reported, tracked, its exit ends its group. */
        pid_t child = fork();
        if (child == 0)
                _exit(0);
        FP_CHECK(child > 0);
        waitpid(child, NULL, 0);
        run_loop(base, tr, 50);
        const struct fp_tracker_event *c = find(s, FP_TRACKER_CHILD_NEW, child);
        FP_CHECK(c != NULL);
        if (c) {
                FP_CHECK_EQ_INT(c->tgid, child);
                FP_CHECK_EQ_INT(c->parent_tgid, self);
                FP_CHECK_EQ_INT(c->flags & FP_TRACKER_EV_UNTRACKED, 0);
        }
        const struct fp_tracker_event *cx = find(s, FP_TRACKER_THREAD_EXIT, child);
        FP_CHECK(cx != NULL);
        if (cx)
                FP_CHECK(cx->flags & FP_TRACKER_EV_GROUP_DEAD);
        /* The kernel side removed the dead child itself. */
        FP_CHECK_EQ_INT(fp_tracker_remove(tr, child), 0);

        /* Tracked without FOLLOW: children are not reported. */
        FP_CHECK_EQ_INT(fp_tracker_add(tr, self, 0), 0);
        child = fork();
        if (child == 0)
                _exit(0);
        waitpid(child, NULL, 0);
        run_loop(base, tr, 50);
        FP_CHECK(find(s, FP_TRACKER_CHILD_NEW, child) == NULL);

        /* Removed: nothing more. */
        size_t n = s->n;
        FP_CHECK_EQ_INT(fp_tracker_remove(tr, self), 0);
        tid = one_thread();
        run_loop(base, tr, 50);
        FP_CHECK_EQ_INT(s->n, n);
        FP_CHECK_EQ_INT(fp_tracker_dropped(tr), 0);

        fp_tracker_free(tr);
        fp_tracker_free(NULL);
        free(s);
        event_base_free(base);
        return FP_TEST_DONE();
}
