/* SPDX-License-Identifier: MIT */
/*
 * A profiled process: starting and freeing it, reading its rings (samples
 * into the aggregator, side-band records into the thread table and the
 * mappings), and its accessors; see target.h for the thread life cycle.
 * The thread table lives in threads.c, the export of buckets to pprof and
 * to the store in export.c; target-internal.h is what the three share.
 *
 * All of it runs on the agent's one event-loop thread: ring callbacks,
 * the rescan timer and the control requests that dump or stop a target
 * never run concurrently, so nothing here locks.
 */
#include "target-internal.h"
#include "perfmap.h"
#include "pystack.h"
#include "procfs.h"
#include "targetconf.h"
#include "tick.h"
#include "unwind.h"
#include "util.h"
#include "aggregate.h"
#include "maps.h"
#include "pprof.h"
#include "store.h"
#include "symbols.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <sys/sysmacros.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int fp_target_start(struct event_base *base, struct fp_symcache *cache, pid_t pid,
                    const struct fp_perf_config *cfg, struct fp_target **ret, char *err,
                    size_t err_len)
{
        struct fp_target *t;
        char buf[4096], reason[256];
        int r, first_error = 0;

        t = calloc(1, sizeof(*t));
        if (!t) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        t->base = base;
        t->cache = cache;
        t->pid = pid;
        const struct fp_jvm_pace pace = {FP_TARGET_JVM_EVERY_NS, FP_TARGET_JVM_EVERY_NS,
                                         FP_TARGET_JVM_BURST, FP_TARGET_JVM_REFILL_NS};
        fp_jvm_names_init(&t->jvm, base, NULL, pid, "", &pace);
        t->cfg = *cfg;
        /* (the config's bits are pyframes.h's, by interpreter kind) */
        static_assert(FP_PYSTACK_PYTHON == 0 && FP_PYSTACK_PHP == 1 && FP_PYSTACK_RUBY == 2 &&
                          FP_PYSTACK_PERL == 3,
                      "fp_perf_interpreters_off()'s bits");
        t->py.off = fp_perf_interpreters_off(cfg);
        t->starttime = fp_proc_stat(pid, NULL);
        t->st.state = FP_TARGET_RUNNING;
        t->st.start_ns = fp_now_ns(CLOCK_REALTIME);
        if (!t->starttime) {
                snprintf(err, err_len, "no such process: %d", (int)pid);
                free(t);
                return -ESRCH;
        }
        (void)fp_proc_comm(pid, pid, t->comm, sizeof(t->comm));
        (void)fp_proc_exe(pid, buf, sizeof(buf));
        t->exe = strdup(buf);
        r = fp_perf_check_events(&t->cfg, pid, t->left_out, sizeof(t->left_out), err, err_len);
        if (r < 0) {
                free(t->exe);
                free(t);
                return r;
        }
        t->maps = fp_maps_new(pid, cache);
        t->walk = (struct fp_stackwalk){.maps = t->maps,
                                        .cfg = &t->cfg,
                                        .st = &t->st,
                                        .may_reload = true,
                                        .jit_name = fp_target_jit_warm,
                                        .java_method = fp_target_java_method,
                                        .java_code = fp_target_java_code,
                                        .jvm = &t->jvm,
                                        .jit_ctx = t};
        t->agg = fp_agg_new(t->cfg.n_members);
        if (t->agg)
                fp_agg_set_limit(t->agg, FP_TARGET_MAX_STACKS);
        t->ev_rescan = event_new(base, -1, 0, fp_target_on_rescan, t);
        t->ev_retry = event_new(base, -1, 0, fp_target_on_retry, t);
        t->ev_fit = event_new(base, -1, 0, fp_target_on_fit, t);
        if (!t->exe || !t->maps || !t->agg || !t->ev_rescan || !t->ev_retry || !t->ev_fit ||
            fp_target_offcpu_init(t) < 0) {
                snprintf(err, err_len, "out of memory");
                fp_target_free(t);
                return -ENOMEM;
        }
        t->off_walk.jit_name = fp_target_jit_warm; /* its off-CPU stacks' JIT frames too */
        t->off_walk.java_method = fp_target_java_method;
        t->off_walk.java_code = fp_target_java_code;
        t->off_walk.jvm = &t->jvm;
        t->off_walk.jit_ctx = t;
        r = fp_maps_load_proc(t->maps);
        if (r < 0) {
                snprintf(err, err_len, "cannot read the mappings of %d: %s", (int)pid,
                         strerror(-r));
                fp_target_free(t);
                return r == -ENOENT ? -ESRCH : r;
        }

        /* Threads may be born while we attach: fp_target_rescan until a pass finds none new. */
        for (int pass = 0; pass < 10; pass++) {
                r = fp_target_rescan(t, &first_error);
                if (r <= 0)
                        break;
        }
        if (t->st.threads_live == 0) {
                if (first_error)
                        snprintf(
                            err, err_len, "%s",
                            fp_perf_explain_error(first_error, &t->cfg, reason, sizeof(reason)));
                else
                        snprintf(err, err_len, "no such process: %d", (int)pid);
                r = first_error ? first_error : -ESRCH;
                fp_target_free(t);
                return r;
        }
        fp_target_jvm_look(t);
        fp_tick_arm(t->ev_rescan, RESCAN_INTERVAL);
        *ret = t;
        return 0;
}

void fp_target_free(struct fp_target *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_threads; i++)
                fp_thread_free(t->threads[i]);
        free(t->threads);
        if (t->ev_rescan)
                event_free(t->ev_rescan);
        if (t->ev_retry)
                event_free(t->ev_retry);
        if (t->ev_fit)
                event_free(t->ev_fit);
        fp_agg_free(t->agg);
        fp_target_jvm_free(t);
        fp_target_python_free(t);
        fp_target_offcpu_free(t);
        fp_maps_free(t->maps);
        free(t->exe);
        fp_perfmap_free(t->perfmap);
        free(t);
}

pid_t fp_target_pid(const struct fp_target *t)
{
        return t->pid;
}

const char *fp_target_comm(const struct fp_target *t)
{
        return t->comm;
}

const char *fp_target_exe(const struct fp_target *t)
{
        return t->exe;
}

uint64_t fp_target_starttime(const struct fp_target *t)
{
        return t->starttime;
}

const struct fp_perf_config *fp_target_config(const struct fp_target *t)
{
        return &t->cfg;
}

void fp_target_set_service(struct fp_target *t, const char *service)
{
        snprintf(t->service, sizeof(t->service), "%s", service ? service : "");
}

const char *fp_target_service(const struct fp_target *t)
{
        return t->service;
}

void fp_target_guard(struct fp_target *t, uid_t user)
{
        t->guard = user;
}

uid_t fp_target_guarded_for(const struct fp_target *t)
{
        return t->guard;
}

bool fp_target_revoked(const struct fp_target *t)
{
        return t->revoked;
}

const char *fp_target_left_out(const struct fp_target *t)
{
        return t->left_out;
}

void fp_target_counter_type(const struct fp_target *t, unsigned i, const char **ret_type,
                            const char **ret_unit)
{
        *ret_type = t->cfg.members[i].name;
        *ret_unit = fp_perf_event_unit(&t->cfg.members[i]);
}

void fp_target_stats(const struct fp_target *t, struct fp_target_stats *ret)
{
        *ret = t->st;
}

void fp_target_sample_types(const struct fp_target *t, const char *ret_types[2],
                            const char *ret_units[2])
{
        ret_types[0] = "samples";
        ret_units[0] = "count";
        if (fp_perf_event_is_clock(&t->cfg.event)) {
                ret_types[1] = "cpu";
                ret_units[1] = "nanoseconds";
        } else {
                ret_types[1] = t->cfg.event.name;
                ret_units[1] = "count";
        }
}

void fp_target_config_string(const struct fp_target *t, char *buf, size_t len)
{
        fp_targetconf_format(&t->cfg, t->follow_children, buf, len);
}

void fp_target_charge_drop(struct fp_target *t, const char *reason, uint64_t count)
{
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED; i++) {
                if (!t->carried[i].reason[0])
                        snprintf(t->carried[i].reason, sizeof(t->carried[i].reason), "%s", reason);
                if (strcmp(t->carried[i].reason, reason) == 0) {
                        t->carried[i].count += count;
                        return;
                }
        }
}

size_t fp_target_open_drops(const struct fp_target *t, struct fp_target_drop *ret, size_t max)
{
        const struct fp_target_stats *now = &t->st, *then = &t->st_bucketed;
        struct fp_target_drop open[] = {
            {"kernel_ring_overflow", now->lost - then->lost},
            {"throttled", now->throttled - then->throttled},
            {"out_of_memory", now->dropped_nomem - then->dropped_nomem},
            {"revoked_exec", now->revoked - then->revoked},
            {"unwind_failed", now->unwind_failed - then->unwind_failed},
            {"stack_copy_short", now->stack_copy_short - then->stack_copy_short},
            {"jit_no_frame_pointer", now->jit_no_fp - then->jit_no_fp},
            /* Off-CPU block parts kept but lost on the way (offcpu.h). */
            {"offcpu_ring_full", now->off_lost_ring - then->off_lost_ring},
            {"offcpu_stack_unreadable", now->off_lost_copy - then->off_lost_copy},
            {"offcpu_thread_exited", now->off_lost_exited - then->off_lost_exited},
            {"offcpu_call_changed", now->off_lost_changed - then->off_lost_changed},
            {"offcpu_unpaired", now->off_unpaired - then->off_unpaired},
        };
        size_t n = 0;

        for (size_t i = 0; i < sizeof(open) / sizeof(open[0]) && n < max; i++)
                if (open[i].count)
                        ret[n++] = open[i];
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED && t->carried[i].reason[0] && n < max; i++)
                ret[n++] = (struct fp_target_drop){t->carried[i].reason, t->carried[i].count};
        return n;
}

const struct fp_agg *fp_target_bucket(const struct fp_target *t)
{
        return t->agg;
}

int fp_target_next_bucket(struct fp_target *t)
{
        struct fp_agg *fresh = fp_agg_new(t->cfg.n_members);

        if (!fresh || fp_target_offcpu_next(t) < 0) {
                fp_agg_free(fresh);
                return -ENOMEM;
        }
        fp_agg_set_limit(fresh, FP_TARGET_MAX_STACKS);
        fp_agg_free(t->agg);
        t->agg = fresh;
        t->st_bucketed = t->st;
        memset(t->carried, 0, sizeof(t->carried));
        if (t->py.py)
                fp_pyframes_trim(t->py.py); /* no Python frame is held now */
        return 0;
}

struct fp_maps *fp_target_maps(struct fp_target *t)
{
        return t->maps;
}

const char *fp_target_java_method(void *target, uint64_t method)
{
        struct fp_target *t = target;

        return fp_jvm_names_method(&t->jvm, t->maps, method);
}

int fp_target_java_code(void *target, uint64_t pc, bool leaf, struct fp_hotspot_code *ret)
{
        struct fp_target *t = target;

        return fp_jvm_names_code(&t->jvm, t->maps, pc, leaf, ret);
}

const char *fp_target_jit_warm(void *target, uint64_t addr)
{
        struct fp_target *t = target;

        const char *name;

        if (!t->perfmap)
                t->perfmap = fp_perfmap_new(t->pid);
        name = t->perfmap ? fp_jvm_names_jit(&t->jvm, t->perfmap, addr) : NULL;
        if (!name)
                fp_target_jvm_miss(t); /* a JVM's newly compiled code: ask it, if due */
        return name;
}

const char *fp_target_jit_name(struct fp_target *t, uint64_t addr)
{
        const char *name = fp_target_jit_warm(t, addr);

        if (name)
                t->st.jit_frames++;
        return name;
}

/* ---- Python stacks ---- */

void fp_target_set_pystack(struct fp_target *t, struct fp_pystack *s)
{
        if (fp_perf_interpreters_off(&t->cfg) == FP_PERF_INTERPRETERS || t->pystack)
                return;
        t->pystack = s;
        (void)fp_pyproc_known(&t->py, s, t->pid, t->maps, fp_now_ns(CLOCK_MONOTONIC));
        for (size_t i = 0; i < t->n_threads; i++) {
                struct fp_thread *th = t->threads[i];
                if (!th->live)
                        continue;
                fp_target_python_attach(t, th->sampler.fd);
                if (th->starter.fd >= 0)
                        fp_target_python_attach(t, th->starter.fd);
        }
}

struct fp_pyframes *fp_target_python(const struct fp_target *t, bool *ret_on,
                                     uint64_t *ret_attach_failed)
{
        *ret_on = t->pystack != NULL;
        *ret_attach_failed = t->py_attach_failed;
        return t->py.py;
}
