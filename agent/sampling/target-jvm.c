/* SPDX-License-Identifier: MIT */
/*
 * A JVM target's compiled methods named (jvmattach.h): a target whose
 * process maps libjvm.so and can be asked is asked for its perf map when
 * one of its samples lands in JIT code the map it has does not name
 * (methods compile all the time), at most every JVM_ASK_EVERY_NS, and
 * after a failure not before a back-off that doubles from
 * JVM_BACKOFF_MIN_NS to JVM_BACKOFF_MAX_NS. The map the JVM writes is
 * read by perfmap.c at the next miss. A refusal or the first failure is
 * logged once per process; status shows the counts and the last reason.
 *
 * Part of the target module: called by target.c (start, free, JIT
 * lookups) and threads.c (an exec).
 */
#include "target-internal.h"
#include "log.h"
#include "maps.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#define JVM_ASK_EVERY_NS   2000000000ULL   /* between two requests that were answered */
#define JVM_BACKOFF_MIN_NS 5000000000ULL   /* after a first failure */
#define JVM_BACKOFF_MAX_NS 300000000000ULL /* at most */
/*
 * A JVM whose listener never starts (-XX:+DisableAttachMechanism) prints a
 * thread dump at each SIGQUIT: after this many in a row it is not asked
 * again.
 */
#define JVM_SILENT_MAX 2

void fp_target_jvm_look(struct fp_target *t)
{
        struct fp_target_jvm *j = &t->jvm;
        const char *lib = fp_maps_live_file(t->maps, "libjvm.so");
        int r;

        fp_target_jvm_free(t);
        j->state = 0;
        j->why[0] = 0;
        j->next_ns = 0;
        j->backoff_ns = 0;
        j->frame_pointers = -ENOENT;
        t->walk.jit_no_fp = t->off_walk.jit_no_fp = false;
        r = fp_jvm_check(t->pid, lib, j->why, sizeof(j->why));
        if (r > 0) {
                j->state = 1;
                /*
                 * Without -XX:+PreserveFramePointer compiled methods use rbp as
                 * any register: a walk ends at them rather than follow it.
                 */
                j->frame_pointers = fp_jvm_frame_pointers(t->pid);
                t->walk.jit_no_fp = t->off_walk.jit_no_fp = j->frame_pointers == 0;
        } else if (r < 0) {
                j->state = -1;
                fp_log(LOG_WARNING, "%s", j->why);
        }
}

/*
 * A request failed (-e, err): said the first time, and not made again
 * before the back-off, or at all once the JVM's listener never started
 * JVM_SILENT_MAX times in a row.
 */
static void failed(struct fp_target *t, int e, const char *err, uint64_t now)
{
        struct fp_target_jvm *j = &t->jvm;

        if (!j->failed++)
                fp_log(LOG_WARNING, "java: %d (%s): asking for its compiled methods' names: %s",
                       (int)t->pid, t->comm, err);
        snprintf(j->why, sizeof(j->why), "%s", err);
        j->silent = e == -ETIMEDOUT ? j->silent + 1 : 0;
        if (j->silent >= JVM_SILENT_MAX) {
                j->state = -1;
                snprintf(j->why, sizeof(j->why),
                         "its attach listener never started in %d requests "
                         "(-XX:+DisableAttachMechanism?): not asked again, since each made it "
                         "print a thread dump",
                         JVM_SILENT_MAX);
                fp_log(LOG_WARNING, "java: %d (%s): %s", (int)t->pid, t->comm, j->why);
                return;
        }
        j->backoff_ns = j->backoff_ns ? j->backoff_ns * 2 : JVM_BACKOFF_MIN_NS;
        if (j->backoff_ns > JVM_BACKOFF_MAX_NS)
                j->backoff_ns = JVM_BACKOFF_MAX_NS;
        j->next_ns = now + j->backoff_ns;
}

static void on_answer(evutil_socket_t fd, short what, void *arg)
{
        struct fp_target *t = arg;
        struct fp_target_jvm *j = &t->jvm;
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        char err[sizeof(j->why)];
        (void)fd;
        (void)what;

        event_free(j->ev);
        j->ev = NULL;
        int r = fp_jvm_request_finish(&j->req, err, sizeof(err));
        if (r == 0) {
                j->answered++;
                j->backoff_ns = 0;
                j->silent = 0;
                j->next_ns = now + JVM_ASK_EVERY_NS;
                return;
        }
        failed(t, r, err, now);
}

void fp_target_jvm_miss(struct fp_target *t)
{
        struct fp_target_jvm *j = &t->jvm;
        uint64_t now;
        char err[sizeof(j->why)] = "out of memory";

        if (j->state != 1 || j->ev || t->st.state != FP_TARGET_RUNNING)
                return;
        now = fp_now_ns(CLOCK_MONOTONIC);
        if (now < j->next_ns)
                return;
        j->requests++;
        j->next_ns = now + JVM_ASK_EVERY_NS; /* (a failure to start backs off below) */
        if (fp_jvm_request_perfmap(t->pid, &j->req, err, sizeof(err)) < 0 ||
            !(j->ev = event_new(t->base, j->req.fd, EV_READ, on_answer, t)) ||
            event_add(j->ev, NULL) < 0) {
                if (j->ev) {
                        event_free(j->ev);
                        j->ev = NULL;
                }
                fp_jvm_request_cancel(&j->req);
                failed(t, -EAGAIN, err, now);
        }
}

void fp_target_jvm_free(struct fp_target *t)
{
        struct fp_target_jvm *j = &t->jvm;

        if (j->ev) {
                event_free(j->ev);
                j->ev = NULL;
        }
        if (j->req.helper || j->req.fd >= 0)
                fp_jvm_request_cancel(&j->req);
}

void fp_target_jvm_status(const struct fp_target *t, struct fp_target_jvm_status *ret)
{
        const struct fp_target_jvm *j = &t->jvm;

        *ret = (struct fp_target_jvm_status){.state = j->state,
                                             .why = j->why,
                                             .requests = j->requests,
                                             .answered = j->answered,
                                             .failed = j->failed,
                                             .pending = j->ev != NULL,
                                             .frame_pointers = j->frame_pointers};
}
