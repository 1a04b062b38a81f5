/* SPDX-License-Identifier: MIT */
/*
 * A process's JVM names asked for; see jvmnames.h.
 */
#include "jvmnames.h"
#include "log.h"
#include "maps.h"
#include "perfmap.h"
#include "procfs.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define JVM_RETRY_NS 1000000000ULL /* a miss while a request is under way: looked at again */

/*
 * Whether compiled code is read from code caches (the agent's java-names
 * setting, made once at its start; off: from perf maps only).
 */
static bool code_cache_on = true;

void fp_jvm_names_init(struct fp_jvm_names *j, struct event_base *base, struct fp_jvm_group *group,
                       pid_t pid, const char *comm, const struct fp_jvm_pace *pace)
{
        *j = (struct fp_jvm_names){.base = base,
                                   .group = group,
                                   .pid = pid,
                                   .pace = *pace,
                                   .wait_ns = pace->every_ns,
                                   .req = {.fd = -1},
                                   .frame_pointers = -ENOENT};
        snprintf(j->comm, sizeof(j->comm), "%s", comm);
        if (j->pace.every_max_ns < j->pace.every_ns)
                j->pace.every_max_ns = j->pace.every_ns;
        j->bucket_ns = j->pace.burst * j->pace.refill_ns; /* full */
}

static void ask_later(struct fp_jvm_names *j, uint64_t now, uint64_t when);
static void miss(struct fp_jvm_names *j);

int fp_jvm_names_look(struct fp_jvm_names *j, const char *libjvm)
{
        char *lib = libjvm ? strdup(libjvm) : NULL;
        int r;

        fp_jvm_names_free(j);
        j->state = 0;
        j->why[0] = 0;
        j->next_ns = 0;
        j->backoff_ns = 0;
        j->wait_ns = j->pace.every_ns;
        j->frame_pointers = -ENOENT;
        r = fp_jvm_check(j->pid, lib, j->why, sizeof(j->why));
        if (r > 0) {
                j->state = 1;
                j->frame_pointers = fp_jvm_frame_pointers(j->pid);
        } else if (r == -EPERM && lib && fp_proc_age_ns(j->pid) < FP_JVM_YOUNG_NS) {
                /* Young: it may not have set up its handlers yet. */
                uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
                snprintf(j->why, sizeof(j->why), "not yet: it does not catch SIGQUIT yet");
                j->libjvm = lib;
                lib = NULL;
                ask_later(j, now, now + FP_JVM_LOOK_AGAIN_NS);
        } else if (r < 0) {
                j->state = -1;
                fp_log(LOG_WARNING, "%s", j->why);
        }
        free(lib);
        return j->state;
}

/*
 * A request failed (-e, err): said the first time, and not made again
 * before the back-off, or at all once the JVM's listener never started
 * FP_JVM_SILENT_MAX times in a row.
 */
static void failed(struct fp_jvm_names *j, int e, const char *err, uint64_t now)
{
        if (!j->failed++)
                fp_log(LOG_WARNING, "java: %d (%s): asking for its compiled methods' names: %s",
                       (int)j->pid, j->comm, err);
        snprintf(j->why, sizeof(j->why), "%s", err);
        /* Signalled and never answered (the listener never started, or the helper ran out of
         * time waiting): each such signal may have printed a thread dump. */
        j->silent = e == -ETIMEDOUT || e == -ETIME ? j->silent + 1 : 0;
        if (j->silent >= FP_JVM_SILENT_MAX) {
                j->state = -1;
                snprintf(j->why, sizeof(j->why),
                         "its attach listener never started in %d requests "
                         "(-XX:+DisableAttachMechanism?): not asked again, since each made it "
                         "print a thread dump",
                         FP_JVM_SILENT_MAX);
                fp_log(LOG_WARNING, "java: %d (%s): %s", (int)j->pid, j->comm, j->why);
                return;
        }
        j->backoff_ns = j->backoff_ns ? j->backoff_ns * 2 : FP_JVM_BACKOFF_MIN_NS;
        if (j->backoff_ns > FP_JVM_BACKOFF_MAX_NS)
                j->backoff_ns = FP_JVM_BACKOFF_MAX_NS;
        j->next_ns = now + j->backoff_ns;
}

/* The request's event gone, and its place in the group. */
static void request_done(struct fp_jvm_names *j)
{
        if (j->ev) {
                event_free(j->ev);
                j->ev = NULL;
        }
        if (j->group && j->group->pending)
                j->group->pending--;
}

static void on_answer(evutil_socket_t fd, short what, void *arg)
{
        struct fp_jvm_names *j = arg;
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        char err[sizeof(j->why)];
        (void)fd;
        (void)what;

        request_done(j);
        int r = fp_jvm_request_finish(&j->req, err, sizeof(err));
        if (r == 0) {
                j->answered++;
                j->backoff_ns = 0;
                j->silent = 0;
                j->next_ns = now + j->wait_ns;
                j->wait_ns =
                    j->wait_ns * 2 < j->pace.every_max_ns ? j->wait_ns * 2 : j->pace.every_max_ns;
                return;
        }
        failed(j, r, err, now);
}

/* Whether process pid has exited (its first interpreted frames may be read after). */
static bool gone(pid_t pid)
{
        char path[32];

        snprintf(path, sizeof(path), "/proc/%d", (int)pid);
        return access(path, F_OK) < 0 && errno == ENOENT;
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
        struct fp_jvm_names *j = arg;
        (void)fd;
        (void)what;

        if (gone(j->pid))
                return;
        if (j->state == 0 && j->libjvm) {
                char *lib = j->libjvm; /* (look takes a copy) */
                j->libjvm = NULL;
                fp_jvm_names_look(j, lib);
                free(lib);
                return;
        }
        miss(j);
}

/* A miss that may not be asked for now: asked for at when (or later, when it may be). */
static void ask_later(struct fp_jvm_names *j, uint64_t now, uint64_t when)
{
        uint64_t wait = when > now ? when - now : 0;
        struct timeval tv = {(time_t)(wait / 1000000000ULL), (long)(wait % 1000000000ULL / 1000)};

        if (!j->later && !(j->later = evtimer_new(j->base, on_later, j)))
                return;
        if (!evtimer_pending(j->later, NULL))
                (void)evtimer_add(j->later, &tv);
}

/* A miss of a JVM that is asked: asks when it is due. */
static void miss(struct fp_jvm_names *j)
{
        char err[sizeof(j->why)] = "out of memory";
        uint64_t now;

        if (j->state != 1)
                return;
        now = fp_now_ns(CLOCK_MONOTONIC);
        /* A request under way, or the group's bound: ask once it may be. */
        if (j->ev || (j->group && j->group->max && j->group->pending >= j->group->max)) {
                ask_later(j, now, (j->next_ns > now ? j->next_ns : now) + JVM_RETRY_NS);
                return;
        }
        /* Not before the wait after the last answer, nor with the bucket empty. */
        uint64_t when = j->next_ns;
        if (j->pace.burst) {
                uint64_t cap = j->pace.burst * j->pace.refill_ns;
                if (!j->filled_ns)
                        j->filled_ns = now;
                j->bucket_ns += now - j->filled_ns;
                j->bucket_ns = j->bucket_ns < cap ? j->bucket_ns : cap;
                j->filled_ns = now;
                if (j->bucket_ns < j->pace.refill_ns &&
                    now + (j->pace.refill_ns - j->bucket_ns) > when)
                        when = now + (j->pace.refill_ns - j->bucket_ns);
        }
        if (now < when) {
                ask_later(j, now, when);
                return;
        }
        if (j->pace.burst)
                j->bucket_ns -= j->pace.refill_ns;
        j->requests++;
        j->next_ns = now + j->wait_ns; /* (a failure to start backs off below) */
        if (fp_jvm_request_perfmap(j->pid, &j->req, err, sizeof(err)) < 0 ||
            !(j->ev = event_new(j->base, j->req.fd, EV_READ, on_answer, j)) ||
            event_add(j->ev, NULL) < 0) {
                if (j->ev) {
                        event_free(j->ev);
                        j->ev = NULL;
                }
                fp_jvm_request_cancel(&j->req);
                failed(j, -EAGAIN, err, now);
                return;
        }
        if (j->group)
                j->group->pending++;
}

/* j's JVM's layouts (hotspot.h), read at the first need; NULL when they cannot be. */
static struct fp_hotspot *hotspot(struct fp_jvm_names *j, struct fp_maps *maps)
{
        if (j->state != 1)
                return NULL;
        if (!j->hotspot && !j->hotspot_tried) {
                const struct fp_mapping *x = fp_maps_live_mapping(maps, "libjvm.so");
                char path[4096];
                j->hotspot_tried = true;
                snprintf(j->hotspot_why, sizeof(j->hotspot_why), "libjvm.so is not mapped");
                if (x && snprintf(path, sizeof(path), "/proc/%d/root%s", (int)j->pid, x->path) <
                             (int)sizeof(path)) {
                        j->hotspot_why[0] = 0;
                        /* (A process that exited, or exits now, has nothing to say.) */
                        int r = fp_hotspot_open(j->pid, path, x->start, x->pgoff, &j->hotspot,
                                                j->hotspot_why, sizeof(j->hotspot_why));
                        if (r < 0 && r != -ESRCH && !gone(j->pid))
                                fp_log(LOG_WARNING,
                                       "java: %d (%s): its methods are not read from its memory: "
                                       "%s",
                                       (int)j->pid, j->comm, j->hotspot_why);
                }
        }
        return j->hotspot;
}

/* Whether j's compiled code is read from its code cache (then its perf map is not asked for). */
static bool reads_code(struct fp_jvm_names *j, struct fp_maps *maps)
{
        struct fp_hotspot *h;

        if (!code_cache_on || !(h = hotspot(j, maps)))
                return false;
        /* (Not yet readable: a JVM still starting. Its perf map serves meanwhile.) */
        if (!j->code_ok) {
                j->code_ok = fp_hotspot_code_ok(h);
                if (!j->code_ok && !j->code_tried && !gone(j->pid))
                        fp_log(LOG_WARNING, "java: %d (%s): %s", (int)j->pid, j->comm,
                               fp_hotspot_code_why(h));
                j->code_tried = true;
        }
        return j->code_ok;
}

void fp_jvm_names_miss(struct fp_jvm_names *j, struct fp_maps *maps)
{
        /* Code its code cache does not hold is no Java method: no perf map names it either. */
        if (j->state == 1 && !reads_code(j, maps))
                miss(j);
}

void fp_jvm_names_set_code_cache(bool on)
{
        code_cache_on = on;
}

const char *fp_jvm_names_method(struct fp_jvm_names *j, struct fp_maps *maps, uint64_t method)
{
        return fp_hotspot_method(hotspot(j, maps), method);
}

int fp_jvm_names_code(struct fp_jvm_names *j, struct fp_maps *maps, uint64_t pc, bool leaf,
                      struct fp_hotspot_code *ret)
{
        *ret = (struct fp_hotspot_code){0};
        if (!reads_code(j, maps))
                return 0;
        return fp_hotspot_code_at(j->hotspot, pc, leaf, ret);
}

void fp_jvm_names_free(struct fp_jvm_names *j)
{
        if (j->later) {
                event_free(j->later);
                j->later = NULL;
        }
        free(j->libjvm);
        j->libjvm = NULL;
        fp_hotspot_free(j->hotspot);
        j->hotspot = NULL;
        j->hotspot_tried = false;
        j->hotspot_why[0] = 0;
        j->code_tried = j->code_ok = false;
        if (j->ev)
                request_done(j);
        if (j->req.helper || j->req.fd >= 0)
                fp_jvm_request_cancel(&j->req);
}

void fp_jvm_names_status(const struct fp_jvm_names *j, struct fp_jvm_names_status *ret)
{
        *ret = (struct fp_jvm_names_status){.state = j->state,
                                            .requests = j->requests,
                                            .answered = j->answered,
                                            .failed = j->failed,
                                            .pending = j->ev != NULL,
                                            .frame_pointers = j->frame_pointers};
        snprintf(ret->why, sizeof(ret->why), "%s", j->why);
        snprintf(ret->interpreted_why, sizeof(ret->interpreted_why), "%s", j->hotspot_why);
        size_t failed = 0;
        ret->methods_named = fp_hotspot_n_named(j->hotspot, &failed);
        ret->methods_failed = failed;
        ret->code_cache = j->code_ok;
        snprintf(ret->code_why, sizeof(ret->code_why), "%s",
                 !code_cache_on ? "off (java-names = perf-map)"
                 : j->code_tried && !j->code_ok
                     ? (j->hotspot ? fp_hotspot_code_why(j->hotspot) : j->hotspot_why)
                     : "");
        fp_hotspot_code_stats(j->code_ok ? j->hotspot : NULL, &ret->code);
}

const char *fp_jvm_names_jit(struct fp_jvm_names *j, struct fp_perfmap *m, uint64_t addr)
{
        struct fp_hotspot_code code;

        /* The code cache names its stubs and the interpreter; a compiled method, its own. */
        if (j && j->code_ok && fp_hotspot_code_at(j->hotspot, addr, false, &code) > 0)
                return code.compiled
                           ? fp_hotspot_method(j->hotspot, code.methods[code.n_methods - 1])
                           : code.name;
        if (j && j->answered != j->answers_read) {
                j->answers_read = j->answered;
                fp_perfmap_recheck(m);
        }
        return fp_perfmap_lookup(m, addr);
}
