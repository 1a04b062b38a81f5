/* SPDX-License-Identifier: MIT */
/*
 * The agent core; see core.h. It owns the targets, the buckets, the
 * thread tracker, the store's writer and the uploader, and answers the
 * commands' requests through its API; it never talks to a client.
 *
 * Buckets: every --bucket seconds each target's open bucket is closed
 * into one batch for the writer thread. A batch that cannot be queued or
 * written charges its samples to its targets' next buckets as a drop
 * (queue_full, store_write_failed), so nothing is lost silently.
 */
#include "core-internal.h"
#include "bridge.h"
#include "export.h"
#include "jvmnames.h"
#include "maps.h"
#include "offcpu.h"
#include "pystack.h"
#include "runtimes.h"
#include "procfs.h"
#include "symbols.h"
#include "targetconf.h"
#include "tick.h"
#include "tracker.h"
#include "upload.h"
#include "util.h"
#include "writer.h"
#include "log.h"
#include "pprof.h"
#include "store.h"
#include "escape.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BRIDGE_MIN_PERIOD 1000000ULL /* ns: the bridge samples at most at 1 kHz per CPU */

static void on_bridge_sample(void *userdata, const struct fp_perf_sample *sample, uint64_t period)
{
        struct fp_core *s = userdata;
        struct fp_core_target *at = fp_core_find(s, (pid_t)sample->pid);

        if (at)
                fp_target_bridge_sample(at->t, sample, period);
        else
                s->bridge_unclaimed++; /* a child not followed, or a target gone meanwhile */
}

/*
 * The bridge's rings want reading. The tracker's records go first: a
 * thread's birth is written before any bridge sample of it, so its thread
 * (and a child's target) exists when its samples are read.
 */
static void on_bridge_wake(void *userdata)
{
        struct fp_core *s = userdata;

        if (s->tracker) {
                fp_tracker_poll(s->tracker);
                /* Births it lost: the targets' /proc passes find them. */
                uint64_t dropped = fp_tracker_dropped(s->tracker);
                if (dropped != s->tracker_dropped) {
                        s->tracker_dropped = dropped;
                        for (size_t i = 0; i < s->n_targets; i++)
                                fp_target_proc_pass_soon(s->targets[i].t);
                }
        }
        fp_bridge_drain(s->bridge);
}

/* A configuration's sampling period, as the bridge may take it (at most 1 kHz). */
static uint64_t bridge_period_of(const struct fp_perf_config *cfg)
{
        uint64_t q = cfg->freq ? 1000000000ULL / cfg->freq : cfg->period;
        return q > BRIDGE_MIN_PERIOD ? q : BRIDGE_MIN_PERIOD;
}

/*
 * The bridge's period for the running targets BPF tracks and the rules
 * (whose processes it samples from their exec): the fastest's; 0: none.
 */
static uint64_t bridge_period_wanted(const struct fp_core *s)
{
        uint64_t p = 0;

        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target_stats st;
                if (!fp_target_bpf_tracked(s->targets[i].t))
                        continue;
                fp_target_stats(s->targets[i].t, &st);
                if (st.state != FP_TARGET_RUNNING)
                        continue;
                uint64_t q = bridge_period_of(fp_target_config(s->targets[i].t));
                if (!p || q < p)
                        p = q;
        }
        for (size_t i = 0; s->tracker && i < s->n_rules; i++) {
                uint64_t q = bridge_period_of(&s->rules[i].rule->cfg);
                if (!p || q < p)
                        p = q;
        }
        return p;
}

/*
 * Opens the bridge at period ns, before the first thread it is for is
 * born: cpu-clock with kernel time and a stack copy, no kernel frames
 * (each target drops what its own events would not have counted).
 */
static void open_bridge(struct fp_core *s, uint64_t period)
{
        struct fp_perf_config tmpl = {0}; /* unwind auto */

        if (s->bridge || s->opt.no_bridge || !s->tracker)
                return;
        if (fp_perf_event_list_parse("cpu-clock", &tmpl, NULL, 0) < 0)
                return;
        fp_targetconf_finish(&tmpl);
        if (fp_bridge_new(s->base, &tmpl, period, fp_tracker_bridge_fd(s->tracker),
                          on_bridge_sample, on_bridge_wake, s, &s->bridge, s->bridge_error,
                          sizeof(s->bridge_error)) < 0) {
                s->bridge = NULL;
                fp_log(LOG_WARNING, "no bridge for new threads: %s", s->bridge_error);
                return;
        }
        s->bridge_error[0] = 0;
        fp_tick_arm(s->ev_bridge, 1); /* each second, and at once when a target goes */
}

void fp_core_bridge_update(struct fp_core *s)
{
        uint64_t p;

        if (s->bridge)
                event_active(s->ev_bridge, EV_TIMEOUT, 0);
        else if ((p = bridge_period_wanted(s)))
                open_bridge(s, p);
}

/*
 * The bridge follows its targets and the online CPUs, each second and when
 * a target goes (from the loop: a tracker or bridge callback may have
 * stopped it): the fastest one's period, closed when none is left. Each
 * second is also when it is drained of what no ring woke the agent for.
 */
static void on_bridge_check(evutil_socket_t fd, short what, void *arg)
{
        struct fp_core *s = arg;
        (void)fd;
        (void)what;

        if (!s->bridge)
                return;
        fp_tick_arm(s->ev_bridge, 1);
        on_bridge_wake(s); /* what it holds now, at the period it was taken at */
        fp_bridge_check_cpus(s->bridge);
        uint64_t p = bridge_period_wanted(s);
        if (!p) {
                s->bridge_samples += fp_bridge_samples(s->bridge);
                s->bridge_lost += fp_bridge_lost(s->bridge);
                fp_bridge_free(s->bridge);
                s->bridge = NULL;
                event_del(s->ev_bridge);
        } else if (p != fp_bridge_period(s->bridge) && fp_bridge_set_period(s->bridge, p) < 0) {
                fp_log(LOG_WARNING, "cannot change the bridge's period to %" PRIu64 " ns", p);
        }
}

/* A dump waiting for the writer: whom to tell. */
struct dump_request {
        fp_core_dump_fn done;
        void *userdata;
};

struct fp_core_target *fp_core_find(struct fp_core *s, pid_t pid)
{
        for (size_t i = 0; i < s->n_targets; i++)
                if (fp_target_pid(s->targets[i].t) == pid)
                        return &s->targets[i];
        return NULL;
}

static void on_fallback_child(void *userdata, struct fp_target *parent, pid_t child);

/* ---- Python stacks ---- */

static void on_pystack_record(void *userdata, const struct fp_pystack_record *r)
{
        struct fp_core *s = userdata;
        struct fp_core_target *at = fp_core_find(s, (pid_t)r->tgid);

        if (at)
                fp_target_pystack_record(at->t, r);
        else if (s->host)
                fp_host_pystack_record(s->host, r);
        else
                s->pystack_unclaimed++;
}

struct fp_pystack *fp_core_pystack_get(struct fp_core *s)
{
        if (s->opt.no_python || s->pystack_tried)
                return s->pystack;
        s->pystack_tried = true;
        if (fp_pystack_new(on_pystack_record, s, &s->pystack, s->pystack_error,
                           sizeof(s->pystack_error)) < 0)
                fp_log(LOG_WARNING, "%s; Python processes show the interpreter's frames only",
                       s->pystack_error);
        else {
                if (s->offcpu)
                        fp_pystack_mirror(s->pystack, fp_offcpu_python_map(s->offcpu));
                /* New threads' first samples, the bridge's, read their Python stacks too. */
                int r =
                    s->tracker ? fp_tracker_python(s->tracker, fp_pystack_prog_fd(s->pystack)) : 0;
                if (r < 0)
                        fp_log(LOG_WARNING,
                               "Python stacks: the bridge cannot run the program (%s): a new "
                               "thread's first samples show native frames only",
                               strerror(-r));
        }
        return s->pystack;
}

void fp_core_pystack_unload_unused(struct fp_core *s)
{
        if (!s->pystack || s->n_rules || (s->host && fp_host_uses_pystack(s->host)))
                return;
        for (size_t i = 0; i < s->n_targets; i++) {
                bool on;
                uint64_t attach_failed;

                (void)fp_target_python(s->targets[i].t, &on, &attach_failed);
                if (on)
                        return;
        }
        if (s->tracker)
                (void)fp_tracker_python(s->tracker, -1);
        fp_pystack_free(s->pystack);
        s->pystack = NULL;
        s->pystack_tried = false;
}

const char *fp_core_python_state(const struct fp_core *s)
{
        if (s->opt.no_python)
                return "off (no-python)";
        if (!s->pystack_tried)
                return "not loaded (no target)";
        return s->pystack ? "on" : s->pystack_error;
}

/* ---- off-CPU time ---- */

static void on_offcpu_record(void *userdata, const struct fp_offcpu_record *r,
                             const struct fp_pystack_record *py)
{
        struct fp_core *s = userdata;
        struct fp_core_target *at;

        if (r->tier == FP_OFFCPU_HOST) {
                if (s->host)
                        fp_host_offcpu_record(s->host, r, py);
                else
                        s->offcpu_unclaimed++;
                return;
        }
        at = fp_core_find(s, (pid_t)r->tgid);
        if (at)
                fp_target_offcpu_record(at->t, r, py);
        else
                s->offcpu_unclaimed++;
}

void fp_core_poll_offcpu(struct fp_core *s)
{
        struct fp_offcpu_target k;

        if (!s->offcpu)
                return;
        fp_offcpu_poll(s->offcpu);
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target *t = s->targets[i].t;
                if (!fp_target_config(t)->off_cpu_period)
                        continue;
                fp_offcpu_counts(s->offcpu, fp_target_pid(t), &k);
                fp_target_offcpu_counts(t, &k);
        }
        if (s->host && fp_offcpu_host_on(s->offcpu)) {
                fp_offcpu_host_counts(s->offcpu, &k);
                fp_host_offcpu_counts(s->host, &k);
        }
}

/* Loads the BPF side unless it is. 0 or -errno, err said. */
static int offcpu_load(struct fp_core *s, char *err, size_t err_len)
{
        int r;

        if (s->offcpu)
                return 0;
        r = fp_offcpu_new(s->base, on_offcpu_record, s, &s->offcpu, err, err_len);
        if (r == 0) {
                fp_log(LOG_INFO, "off-CPU profiler loaded");
                if (s->pystack) /* its Python processes' stacks read off-CPU too */
                        fp_pystack_mirror(s->pystack, fp_offcpu_python_map(s->offcpu));
        }
        return r;
}

/* Unloads the BPF side once neither a target nor the host tier needs it. */
static void offcpu_unload_unused(struct fp_core *s)
{
        if (!s->offcpu || fp_offcpu_targets(s->offcpu) || fp_offcpu_host_on(s->offcpu))
                return;
        if (s->pystack)
                fp_pystack_mirror(s->pystack, -1);
        uint64_t records, unpaired;
        fp_offcpu_python_counts(s->offcpu, &records, &unpaired);
        s->offcpu_py_records += records;
        s->offcpu_py_unpaired += unpaired;
        fp_offcpu_free(s->offcpu);
        s->offcpu = NULL;
        fp_log(LOG_INFO, "off-CPU profiler unloaded");
}

/* Profiles pid's off-CPU time at period ns, loading the BPF side first. 0 or -errno, err said. */
static int offcpu_add(struct fp_core *s, pid_t pid, uint64_t period, char *err, size_t err_len)
{
        int r = offcpu_load(s, err, err_len);

        if (r < 0)
                return r;
        r = fp_offcpu_add(s->offcpu, pid, period);
        if (r < 0)
                snprintf(err, err_len, "cannot profile the off-CPU time of %d: %s", (int)pid,
                         strerror(-r));
        return r;
}

int fp_core_offcpu_check(struct fp_core *s, char *err, size_t err_len)
{
        struct fp_offcpu *o;
        int r;

        if (s->offcpu)
                return 0;
        r = fp_offcpu_new(s->base, on_offcpu_record, s, &o, err, err_len);
        if (r == 0)
                fp_offcpu_free(o); /* loaded again by the first process that needs it */
        return r;
}

/* Stops profiling pid's off-CPU time; unloads the BPF side after the last. */
static void offcpu_remove(struct fp_core *s, pid_t pid)
{
        if (!s->offcpu)
                return;
        (void)fp_offcpu_remove(s->offcpu, pid);
        offcpu_unload_unused(s);
}

/*
 * Profiles the host tier's off-CPU time at period ns (0: stops), loading
 * the BPF side first (unloading it when nothing else needs it). 0 or
 * -errno with err said.
 */
static int offcpu_host(struct fp_core *s, uint64_t period, char *err, size_t err_len)
{
        int r;

        if (!period) {
                if (s->offcpu) {
                        (void)fp_offcpu_host(s->offcpu, 0);
                        offcpu_unload_unused(s);
                }
                return 0;
        }
        if ((r = offcpu_load(s, err, err_len)) < 0)
                return r;
        if ((r = fp_offcpu_host(s->offcpu, period)) < 0) {
                snprintf(err, err_len, "cannot profile the host's off-CPU time: %s", strerror(-r));
                offcpu_unload_unused(s);
        }
        return r;
}

/* Starts the host tier, and its off-CPU time when cfg asks. 0 or -errno with err said. */
static int host_start(struct fp_core *s, const struct fp_host_config *cfg, char *err,
                      size_t err_len)
{
        /* The Python stack reader first: its load holds the loop (see the targets' start). */
        struct fp_pystack *py = s->opt.no_python ? NULL : fp_core_pystack_get(s);
        int r = fp_core_host_start(s, cfg, err, err_len);

        if (r == 0 && cfg->off_cpu_period &&
            (r = offcpu_host(s, cfg->off_cpu_period, err, err_len)) < 0) {
                fp_host_free(s->host);
                s->host = NULL;
        }
        if (r == 0)
                fp_host_set_pystack(s->host, py);
        else
                fp_core_pystack_unload_unused(s);
        return r;
}

static const char *tracker_name(const struct fp_core *s)
{
        return s->tracker ? "bpf" : "perf-fork";
}

int fp_core_start_target_tracked(struct fp_core *s, pid_t pid, const struct fp_perf_config *cfg,
                                 uid_t owner, bool follow, bool track_children, pid_t parent,
                                 struct fp_target **ret, char *err, size_t err_len)
{
        struct fp_target *t;
        bool bpf = false;
        int r;

        if (s->n_targets == s->cap_targets) {
                size_t cap = s->cap_targets ? s->cap_targets * 2 : 8;
                void *p = realloc(s->targets, cap * sizeof(*s->targets));
                if (!p) {
                        snprintf(err, err_len, "out of memory");
                        return -ENOMEM;
                }
                s->targets = p;
                s->cap_targets = cap;
        }
        /*
         * The Python stack reader loaded first (0.1 s of the loop): once its
         * off-CPU time is on, the target's blocks fill the ring meanwhile.
         */
        struct fp_pystack *py =
            fp_perf_interpreters_off(cfg) == FP_PERF_INTERPRETERS ? NULL : fp_core_pystack_get(s);
        /* Tracked before its threads are listed, so none born meanwhile is missed. */
        if (s->tracker)
                bpf = fp_tracker_add(s->tracker, pid,
                                     follow || track_children ? FP_TRACKER_FOLLOW : 0) == 0;
        /* Its off-CPU time from before its threads are listed too (or a clear refusal). */
        if (cfg->off_cpu_period &&
            (r = offcpu_add(s, pid, cfg->off_cpu_period, err, err_len)) < 0) {
                if (s->tracker)
                        (void)fp_tracker_remove(s->tracker, pid);
                fp_core_pystack_unload_unused(s);
                return r;
        }
        if (bpf)
                open_bridge(s, bridge_period_of(cfg));
        struct fp_perf_config limited = *cfg;
        limited.max_threads = s->opt.max_threads;
        limited.first_period_full = s->opt.first_period_full;
        r = fp_target_start(s->base, s->cache, pid, &limited, &t, err, err_len);
        if (r < 0) {
                if (s->tracker)
                        (void)fp_tracker_remove(s->tracker, pid);
                if (cfg->off_cpu_period)
                        offcpu_remove(s, pid);
                fp_core_pystack_unload_unused(s);
                return r;
        }
        fp_target_set_tracking(t, bpf, follow, parent, on_fallback_child, s);
        if (py)
                fp_target_set_pystack(t, py);
        s->targets[s->n_targets++] = (struct fp_core_target){.t = t, .owner = owner};
        *ret = t;
        return 0;
}

int fp_core_start_target(struct fp_core *s, pid_t pid, const struct fp_perf_config *cfg,
                         uid_t owner, bool follow, pid_t parent, struct fp_target **ret, char *err,
                         size_t err_len)
{
        return fp_core_start_target_tracked(s, pid, cfg, owner, follow, follow, parent, ret, err,
                                            err_len);
}

/* ---- buckets ---- */

bool fp_core_in_flight(const struct fp_core *s, pid_t pid, uint64_t starttime)
{
        for (const struct batch_ctx *ctx = s->in_flight; ctx; ctx = ctx->next)
                for (size_t i = 0; i < ctx->n; i++)
                        if (ctx->t[i].pid == pid && ctx->t[i].starttime == starttime)
                                return true;
        return false;
}

static void ctx_unlink(struct fp_core *s, struct batch_ctx *ctx)
{
        for (struct batch_ctx **p = &s->in_flight; *p; p = &(*p)->next)
                if (*p == ctx) {
                        *p = ctx->next;
                        return;
                }
}

/*
 * Charges what a batch that could not be stored held to its targets' next
 * buckets: its samples as reason, and the drops it carried as they were.
 */
static void charge_batch(struct fp_core *s, struct batch_ctx *ctx, struct fp_store_batch *b,
                         const char *reason)
{
        for (size_t i = 0; i < ctx->n; i++) {
                struct fp_core_target *at = fp_core_find(s, ctx->t[i].pid);
                uint64_t n = fp_store_batch_target_count(b, ctx->t[i].idx);
                if (!at || fp_target_starttime(at->t) != ctx->t[i].starttime)
                        continue;
                if (n)
                        fp_target_charge_drop(at->t, reason, n);
                for (size_t k = 0; k < ctx->t[i].n_drops; k++)
                        fp_target_charge_drop(at->t, ctx->t[i].drops[k].reason,
                                              ctx->t[i].drops[k].count);
        }
        fp_core_host_charge(s, ctx, b, reason);
        s->buckets_failed++;
}

/*
 * Closes the open bucket of one target (only != NULL, written with the
 * given active flag) or of all (each active while it runs) into one batch
 * for the writer. Without a store the samples stay in memory.
 */
static void close_buckets(struct fp_core *s, struct fp_core_target *only, bool active)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        struct fp_store_batch *b;
        struct batch_ctx *ctx;
        size_t n = only ? 1 : s->n_targets;

        if (!s->writer || (n == 0 && !s->host))
                return;
        fp_core_poll_offcpu(s); /* the off-CPU records and losses up to now */
        b = fp_store_batch_new(s->bucket_start_ns,
                               now > s->bucket_start_ns ? now - s->bucket_start_ns : 1);
        ctx = calloc(1, sizeof(*ctx) + n * sizeof(ctx->t[0]));
        if (!b || !ctx) {
                fp_store_batch_free(b);
                free(ctx);
                fp_log(LOG_ERR, "Failed to close a bucket: out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                struct fp_core_target *at = only ? only : &s->targets[i];
                struct fp_target_stats st;
                fp_target_stats(at->t, &st);
                if (at->final_written)
                        continue;
                bool running = st.state == FP_TARGET_RUNNING;
                /*
                 * The drops going into this batch, copied (reasons too: the
                 * fill empties the target's carried slots they point into).
                 */
                struct fp_target_drop carried[CTX_MAX_DROPS];
                size_t nd = fp_target_open_drops(at->t, carried, CTX_MAX_DROPS);
                ctx->t[ctx->n].n_drops = 0;
                for (size_t k = 0; k < nd; k++) {
                        if (!carried[k].count)
                                continue;
                        size_t m = ctx->t[ctx->n].n_drops++;
                        snprintf(ctx->t[ctx->n].drops[m].reason,
                                 sizeof(ctx->t[ctx->n].drops[m].reason), "%s", carried[k].reason);
                        ctx->t[ctx->n].drops[m].count = carried[k].count;
                }
                int r = fp_export_batch(at->t, b, only ? active : running);
                if (r < 0) {
                        fp_log(LOG_ERR, "Failed to close the bucket of %d: %s",
                               (int)fp_target_pid(at->t), strerror(-r));
                        continue;
                }
                ctx->t[ctx->n].pid = fp_target_pid(at->t);
                ctx->t[ctx->n].starttime = fp_target_starttime(at->t);
                ctx->t[ctx->n].idx = (uint32_t)r;
                ctx->n++;
                if (!running) {
                        at->final_written = true;
                        at->final_ns = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
                }
        }
        if (!only) {
                fp_core_host_close_bucket(s, b, ctx);
                s->bucket_start_ns = now;
                /* What profiling cost over the bucket: the agent's CPU since the last one. */
                uint64_t cpu = fp_proc_self_cpu_ns();
                struct fp_store_cost cost = {.agent_cpu_ns = cpu - s->cost_cpu_ns,
                                             .agent_rss_bytes = fp_proc_self_rss(),
                                             .host_cpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN)};
                s->cost_cpu_ns = cpu;
                fp_store_batch_set_cost(b, &cost);
        }
        if (ctx->n == 0 && ctx->n_host_idx == 0) {
                fp_store_batch_free(b);
                free(ctx);
                return;
        }
        int r = fp_writer_submit_batch(s->writer, b, ctx);
        if (r < 0) {
                charge_batch(s, ctx, b, "queue_full");
                fp_store_batch_free(b);
                free(ctx->host_idx);
                free(ctx);
                return;
        }
        struct batch_ctx **tail = &s->in_flight;
        while (*tail)
                tail = &(*tail)->next;
        *tail = ctx;
}

/* Arms the bucket timer for the next multiple of the bucket length on the wall clock. */
static void arm_bucket_timer(struct fp_core *s)
{
        fp_tick_arm(s->ev_bucket, s->opt.bucket_seconds);
}

/* Stops the targets that exec'd into another user's program (fp_target_guard()). */
static void stop_revoked(struct fp_core *s)
{
        for (size_t i = 0; i < s->n_targets;) {
                struct fp_core_target *at = &s->targets[i];
                if (!fp_target_revoked(at->t)) {
                        i++;
                        continue;
                }
                char safe[64];
                fp_log(LOG_WARNING,
                       "Stopped profiling %d (%s): it exec'd a program that runs as another user "
                       "than uid %u, who asked for it",
                       (int)fp_target_pid(at->t),
                       fp_terminal_str(fp_target_comm(at->t), safe, sizeof(safe)),
                       (unsigned)fp_target_guarded_for(at->t));
                fp_core_stop_target(s, at); /* moves the last target into i */
        }
}

/*
 * Forgets the targets whose process ended and whose last bucket is stored:
 * a rule's at once, one started by PID --keep-exited seconds later (until
 * then status shows it exited), so exited targets do not pile up.
 */
static void forget_finished(struct fp_core *s)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
        int64_t keep = (int64_t)(s->opt.keep_exited_s ? s->opt.keep_exited_s : 60) * 1000000000LL;

        for (size_t i = 0; i < s->n_targets;) {
                struct fp_core_target *at = &s->targets[i];
                if (at->final_written && (at->rule_id || now - at->final_ns >= keep) &&
                    !fp_core_in_flight(s, fp_target_pid(at->t), fp_target_starttime(at->t)))
                        fp_core_stop_target(s, at); /* swaps the last one in */
                else
                        i++;
        }
}

static void on_bucket(evutil_socket_t fd, short what, void *arg)
{
        struct fp_core *s = arg;
        (void)fd;
        (void)what;
        stop_revoked(s);
        on_bridge_wake(s); /* the newborn threads' samples the bridge holds, into this bucket */
        close_buckets(s, NULL, true);
        /* Also here: with no target running, no bucket is written to call it. */
        forget_finished(s);
        arm_bucket_timer(s);
}

/* Adds count to the monotonic total of drops stored for reason. */
static void count_stored_drop(struct fp_core *s, const char *reason, uint64_t count)
{
        size_t i = 0;
        while (i < s->n_stored_drops && strcmp(s->stored_drop_names[i], reason) != 0)
                i++;
        if (i == s->n_stored_drops) {
                if (i == FP_CORE_MAX_DROPS)
                        return;
                snprintf(s->stored_drop_names[i], sizeof(s->stored_drop_names[i]), "%s", reason);
                s->stored_drops[i] = (struct fp_target_drop){s->stored_drop_names[i], 0};
                s->n_stored_drops++;
        }
        s->stored_drops[i].count += count;
}

static void on_writer_done(void *userdata, const struct fp_writer_result *r)
{
        struct fp_core *s = userdata;

        if (r->kind == FP_WRITER_CALL) {
                /* After a call (the uploader's): only the statistics are news. */
                if (r->have_stats) {
                        s->have_stats = true;
                        s->stats = r->stats;
                }
                return;
        }
        if (r->kind == FP_WRITER_QUERY) {
                struct dump_request *d = r->cookie;
                if (r->error == -ENODEV)
                        fp_pprof_add_comment(r->pprof, "the store is unavailable: only the open "
                                                       "bucket is included");
                d->done(d->userdata, r->pprof, r->error, r->message);
                free(d);
                return;
        }

        struct batch_ctx *ctx = r->cookie;
        ctx_unlink(s, ctx);
        if (r->message[0] && r->error == 0)
                fp_log(LOG_WARNING, "%s", r->message); /* store moved aside */
        if (r->error < 0) {
                if (strcmp(s->store_error, r->message) != 0)
                        fp_log(LOG_ERR, "Failed to write a bucket to '%s': %s", s->opt.store_path,
                               r->message);
                snprintf(s->store_error, sizeof(s->store_error), "%s", r->message);
                charge_batch(s, ctx, r->batch, "store_write_failed");
        } else {
                s->store_error[0] = 0;
                s->buckets_closed++;
                for (size_t i = 0; i < ctx->n; i++)
                        for (size_t k = 0; k < ctx->t[i].n_drops; k++)
                                count_stored_drop(s, ctx->t[i].drops[k].reason,
                                                  ctx->t[i].drops[k].count);
                for (size_t k = 0; k < ctx->n_host_drops; k++)
                        count_stored_drop(s, ctx->host_drops[k].reason, ctx->host_drops[k].count);
        }
        if (r->have_stats) {
                s->have_stats = true;
                s->stats = r->stats;
        }
        if (r->have_stats) {
                /* Replace the drop totals snapshot (n_drops may be 0). */
                struct fp_writer_drop *copy = NULL;
                if (r->n_drops && (copy = malloc(r->n_drops * sizeof(*copy))))
                        memcpy(copy, r->drops, r->n_drops * sizeof(*copy));
                if (copy || !r->n_drops) {
                        free(s->drops);
                        s->drops = copy;
                        s->n_drops = r->n_drops;
                }
        }
        fp_store_batch_free(r->batch);
        free(ctx->host_idx);
        free(ctx);
        forget_finished(s);
}

/* ---- thread tracking ---- */

/*
 * Profiles child, just forked by the followed target parent, as a target
 * of its own with the parent's events and rate, following its children
 * in turn. A child already gone is not worth a log line; any other
 * failure is.
 */
static void follow_child(struct fp_core *s, pid_t child, pid_t parent)
{
        struct fp_core_target *pat = fp_core_find(s, parent);
        struct fp_core_target *old = fp_core_find(s, child);
        struct fp_target *t;
        char err[512];
        uid_t owner;

        if (!pat || !fp_target_follows_children(pat->t)) {
                if (s->tracker)
                        (void)fp_tracker_remove(s->tracker, child);
                return;
        }
        if (old) {
                struct fp_target_stats st;
                fp_target_stats(old->t, &st);
                if (st.state == FP_TARGET_RUNNING)
                        return;              /* already profiled */
                fp_core_stop_target(s, old); /* an exited target under a reused PID */
                pat = fp_core_find(s, parent);
                if (!pat)
                        return;
        }
        owner = pat->owner;
        (void)fp_proc_owner(child, &owner);
        struct fp_perf_config cfg = *fp_target_config(pat->t);
        uid_t guard = fp_target_guarded_for(pat->t);
        if (fp_core_user_at_limit(s, guard)) {
                if (!pat->children_refused++)
                        fp_log(LOG_WARNING,
                               "Not following the children of %d: uid %u has %d targets running "
                               "already",
                               (int)parent, (unsigned)guard, FP_CORE_MAX_TARGETS_PER_USER);
                if (s->tracker)
                        (void)fp_tracker_remove(s->tracker, child);
                return;
        }
        int r = fp_core_start_target(s, child, &cfg, owner, true, parent, &t, err, sizeof(err));
        if (r < 0 && r != -ESRCH)
                fp_log(LOG_ERR, "Failed to follow child %d of %d: %s", (int)child, (int)parent,
                       err);
        if (r == 0)
                fp_target_guard(t, guard); /* the parent's user's, as the parent */
}

static void on_tracker_event(void *userdata, const struct fp_tracker_event *e)
{
        struct fp_core *s = userdata;
        struct fp_core_target *at;

        switch (e->kind) {
        case FP_TRACKER_THREAD_NEW:
                if ((at = fp_core_find(s, (pid_t)e->tgid)))
                        (void)fp_target_thread_born(at->t, (pid_t)e->tid, e->time_ns);
                /* Its own events are open (or will not be: over the limit, failed). */
                fp_tracker_unbridge(s->tracker, (pid_t)e->tid);
                break;
        case FP_TRACKER_THREAD_EXIT:
                if ((at = fp_core_find(s, (pid_t)e->tgid)))
                        fp_target_thread_exited(at->t, (pid_t)e->tid);
                /* Its PID may be another process's soon: no more off-CPU time of it. */
                if (at && (e->flags & FP_TRACKER_EV_GROUP_DEAD) &&
                    fp_target_config(at->t)->off_cpu_period) {
                        fp_core_poll_offcpu(s); /* its last records and counts first */
                        offcpu_remove(s, (pid_t)e->tgid);
                }
                if (s->bridge && (e->flags & FP_TRACKER_EV_GROUP_DEAD))
                        event_active(s->ev_bridge, EV_TIMEOUT, 0); /* its last target may be gone */
                break;
        case FP_TRACKER_THREAD_TAIL:
                s->bridge_exit_tails++;
                if ((at = fp_core_find(s, (pid_t)e->tgid)))
                        fp_target_exit_tail(at->t, (pid_t)e->tid, e->period);
                else
                        s->bridge_unclaimed++;
                break;
        case FP_TRACKER_THREAD_CPU:
                if ((at = fp_core_find(s, (pid_t)e->tgid)))
                        fp_target_thread_cpu(at->t, (pid_t)e->tid, e->cpu_ns,
                                             &(struct fp_thread_events){e->min_flt, e->maj_flt,
                                                                        e->nvcsw, e->nivcsw});
                break;
        case FP_TRACKER_CHILD_NEW:
                if (!fp_core_rules_on_child(s, (pid_t)e->tgid, (pid_t)e->parent_tgid, e->time_ns))
                        follow_child(s, (pid_t)e->tgid, (pid_t)e->parent_tgid);
                fp_tracker_unbridge(s->tracker, (pid_t)e->tgid);
                break;
        case FP_TRACKER_EXEC:
                fp_core_rules_on_exec(s, (pid_t)e->tgid, e->comm, e->time_ns);
                /* A rule's new process has its own events now (or no rule took it). */
                fp_tracker_unbridge(s->tracker, (pid_t)e->tgid);
                break;
        case FP_TRACKER_CGROUP:
                fp_core_rules_on_exec(s, (pid_t)e->tgid, NULL, e->time_ns);
                break;
        default:
                break;
        }
}

/*
 * The fallback reports a child from inside a ring drain, while a caller
 * may hold pointers into s->targets: start it from the loop instead.
 */
static void on_fallback_child(void *userdata, struct fp_target *parent, pid_t child)
{
        struct fp_core *s = userdata;

        if (s->n_pending_children == sizeof(s->pending_children) / sizeof(s->pending_children[0])) {
                s->children_not_followed++;
                return;
        }
        s->pending_children[s->n_pending_children].pid = child;
        s->pending_children[s->n_pending_children++].parent = fp_target_pid(parent);
        event_active(s->ev_children, EV_TIMEOUT, 0);
}

static void on_children(evutil_socket_t fd, short what, void *arg)
{
        struct fp_core *s = arg;
        (void)fd;
        (void)what;

        for (size_t i = 0; i < s->n_pending_children; i++)
                follow_child(s, s->pending_children[i].pid, s->pending_children[i].parent);
        s->n_pending_children = 0;
}

/* Loads the BPF tracker unless told not to; says in one line which tracker is used and why. */
static void start_tracker(struct fp_core *s)
{
        int r;

        if (s->opt.no_bpf) {
                snprintf(s->tracker_reason, sizeof(s->tracker_reason), "disabled by --no-bpf");
        } else {
                r = fp_tracker_new(s->base, on_tracker_event, s, &s->tracker, s->tracker_reason,
                                   sizeof(s->tracker_reason));
                if (r == 0) {
                        fp_log(LOG_INFO, "thread tracker: bpf");
                        return;
                }
                s->tracker = NULL;
        }
        fp_log(LOG_INFO, "thread tracker: perf-fork fallback (%s)", s->tracker_reason);
}

void fp_core_poll_tracker(struct fp_core *s)
{
        on_bridge_wake(s);
}

void fp_core_stop_target(struct fp_core *s, struct fp_core_target *at)
{
        struct fp_target_stats st;

        fp_bridge_drain(s->bridge); /* its samples in the bridge's rings */
        fp_target_stats(at->t, &st);
        s->gone_samples += st.samples;
        if (s->tracker)
                (void)fp_tracker_remove(s->tracker, fp_target_pid(at->t));
        close_buckets(s, at, false);
        if (fp_target_config(at->t)->off_cpu_period)
                offcpu_remove(s, fp_target_pid(at->t));
        pid_t pid = fp_target_pid(at->t);
        fp_target_free(at->t);
        *at = s->targets[--s->n_targets];
        if (s->host)
                fp_host_python_recheck(s->host, pid); /* the target took its program entry away */
        fp_core_pystack_unload_unused(s);
        if (s->bridge)
                event_active(s->ev_bridge, EV_TIMEOUT, 0);
}

/* ---- life cycle ---- */

/* A started target's row for the store, its strings copied for the writer thread. */
struct target_note {
        struct fp_store_target st;
        char comm[64];
        char exe[PATH_MAX];
        char service[256];
        char config[FP_PERF_EVENT_LIST_MAX + 128];
};

static int write_note(struct fp_store *store, void *arg)
{
        return store ? fp_store_note_target(store, &((struct target_note *)arg)->st) : -ENODEV;
}

static void on_note_written(void *userdata, const struct fp_writer_result *r)
{
        struct target_note *n = userdata;
        if (r->error < 0 && r->error != -ENODEV)
                fp_log(LOG_WARNING,
                       "Failed to note target %d in the store (its first bucket will): %s",
                       (int)n->st.pid, r->message[0] ? r->message : strerror(-r->error));
        free(n);
}

void fp_core_note_target(struct fp_core *s, struct fp_target *t)
{
        struct target_note *n;

        if (!s->writer || !(n = calloc(1, sizeof(*n))))
                return; /* its first bucket writes it all the same */
        fp_target_config_string(t, n->config, sizeof(n->config));
        n->st = fp_export_target_row(t, n->config, true);
        /* The writer thread reads them later: copies, not t's own. */
        snprintf(n->comm, sizeof(n->comm), "%s", n->st.comm);
        snprintf(n->exe, sizeof(n->exe), "%s", n->st.exe);
        snprintf(n->service, sizeof(n->service), "%s", n->st.service);
        n->st.comm = n->comm;
        n->st.exe = n->exe;
        n->st.service = n->service;
        if (fp_writer_submit_call(s->writer, write_note, n, on_note_written, n) < 0)
                free(n);
}

static int resume_one(void *userdata, const struct fp_store_target_info *ti)
{
        struct fp_core *s = userdata;
        struct fp_perf_config cfg;
        struct fp_target *t;
        char err[256];
        uid_t owner = 0;

        if (!ti->active || fp_core_find(s, ti->pid))
                return 0;
        if (ti->service[0])
                return 0; /* a rule's: the rule, resumed too, takes it up again */
        if (fp_proc_stat(ti->pid, NULL) != ti->starttime || fp_proc_owner(ti->pid, &owner) < 0)
                return 0; /* that process is gone (or the pid is another's now) */
        bool follow;
        if (fp_targetconf_parse(ti->config, &cfg, &follow) < 0) {
                fp_log(LOG_ERR, "Failed to resume %d: unreadable config '%s'", (int)ti->pid,
                       ti->config);
                return 0;
        }
        if (fp_core_start_target(s, ti->pid, &cfg, owner, follow, 0, &t, err, sizeof(err)) < 0) {
                fp_log(LOG_ERR, "Failed to resume %d: %s", (int)ti->pid, err);
                return 0;
        }
        /* Guarded for whom it was before; in a store of before that was kept, for its owner. */
        fp_target_guard(t, ti->guard >= 0 ? (uid_t)ti->guard : owner);
        fp_log(LOG_INFO, "resumed profiling %d (%s) with %s", (int)ti->pid, fp_target_comm(t),
               cfg.event.name);
        return 0;
}

/* Opens the store, resumes its targets, and starts the writer. Never fatal. */
static void open_store(struct fp_core *s)
{
        struct fp_store *store = NULL;
        char err[256] = "";
        int r;

        if (!s->opt.store_path)
                return;
        r = fp_store_open(s->opt.store_path, s->opt.store_max_bytes, &store, err, sizeof(err));
        if (r == FP_STORE_RECOVERED)
                fp_log(LOG_WARNING, "%s", err);
        if (r < 0) {
                fp_log(LOG_ERR,
                       "Failed to open the store '%s': %s (sampling goes on; "
                       "buckets are counted as lost until it can be opened)",
                       s->opt.store_path, err);
                snprintf(s->store_error, sizeof(s->store_error), "%s", err);
                store = NULL;
        } else {
                (void)fp_store_list_targets(store, NULL, resume_one, s);
                fp_core_rules_resume(s, store);
        }
        r = fp_writer_new(s->base, store, s->opt.store_path, s->opt.store_max_bytes,
                          MAX_QUEUE_BYTES, on_writer_done, s, &s->writer);
        if (r < 0) {
                fp_log(LOG_ERR, "Failed to start the store writer: %s", strerror(-r));
                fp_store_close(store);
        }
}

int fp_core_new(struct event_base *base, const struct fp_core_options *opt, struct fp_core **ret,
                char *err, size_t err_len)
{
        struct fp_core *s = calloc(1, sizeof(*s));

        if (!s) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        s->base = base;
        s->opt = *opt;
        fp_jvm_names_set_code_cache(!opt->java_perf_map_only);
        if (!s->opt.bucket_seconds)
                s->opt.bucket_seconds = 10;
        s->start_ns = fp_now_ns(CLOCK_MONOTONIC);
        s->bucket_start_ns = (int64_t)fp_now_ns(CLOCK_REALTIME);
        s->cost_cpu_ns = fp_proc_self_cpu_ns();
        s->cache = fp_symcache_new();
        s->ev_bucket = event_new(base, -1, 0, on_bucket, s);
        s->ev_children = event_new(base, -1, 0, on_children, s);
        s->ev_bridge = event_new(base, -1, 0, on_bridge_check, s);
        if (!s->cache || !s->ev_bucket || !s->ev_children || !s->ev_bridge) {
                snprintf(err, err_len, "out of memory");
                fp_core_free(s);
                return -ENOMEM;
        }
        start_tracker(s); /* before the store resumes targets */
        s->next_rule_id = 1;
        open_store(s);
        fp_core_rules_from_config(s);
        if (opt->host) {
                char herr[256];
                int r = host_start(s, &opt->host_cfg, herr, sizeof(herr));
                if (r < 0)
                        fp_log(LOG_ERR, "Failed to start the host tier: %s", herr);
        }
        arm_bucket_timer(s);
        if (opt->collector_url) {
                struct fp_upload_options uo = {.url = opt->collector_url,
                                               .token_file = opt->token_file,
                                               .credentials_file = opt->credentials_file,
                                               .ca_file = opt->ca_file,
                                               .interval_seconds = opt->upload_interval};
                int r;
                if (!s->writer) {
                        snprintf(err, err_len, "uploads need the store (--store)");
                        fp_core_free(s);
                        return -EINVAL;
                }
                r = fp_uploader_new(base, s->writer, &uo, &s->uploader, err, err_len);
                if (r < 0) {
                        fp_core_free(s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

void fp_core_free(struct fp_core *s)
{
        if (!s)
                return;
        fp_uploader_close(s->uploader);
        close_buckets(s, NULL, true);
        fp_writer_free(s->writer); /* writes what is queued, answers waiting dumps */
        fp_host_free(s->host);
        fp_uploader_free(s->uploader);
        fp_bridge_free(s->bridge);
        if (s->ev_bridge)
                event_free(s->ev_bridge);
        for (size_t i = 0; i < s->n_targets; i++)
                fp_target_free(s->targets[i].t);
        free(s->targets);
        fp_core_rules_free(s);
        if (s->pystack)
                fp_pystack_mirror(s->pystack, -1);
        if (s->pystack && s->tracker)
                (void)fp_tracker_python(s->tracker, -1);
        fp_offcpu_free(s->offcpu);
        fp_pystack_free(s->pystack); /* after the targets, which leave its map */
        fp_tracker_free(s->tracker);
        if (s->ev_children)
                event_free(s->ev_children);
        if (s->ev_bucket)
                event_free(s->ev_bucket);
        free(s->drops);
        fp_symcache_free(s->cache);
        free(s);
}

/* ---- what commands ask ---- */

bool fp_core_user_at_limit(const struct fp_core *s, uid_t uid)
{
        size_t n = 0;

        if (uid == 0)
                return false;
        for (size_t i = 0; i < s->n_targets; i++) {
                const struct fp_core_target *at = &s->targets[i];
                struct fp_target_stats st;
                if (at->rule_id || fp_target_guarded_for(at->t) != uid)
                        continue;
                fp_target_stats(at->t, &st);
                n += st.state == FP_TARGET_RUNNING;
        }
        return n >= FP_CORE_MAX_TARGETS_PER_USER;
}

bool fp_core_may_see(uid_t uid, const struct fp_core_target *at)
{
        return uid == 0 || uid == at->owner;
}

size_t fp_core_n_targets(const struct fp_core *s)
{
        return s->n_targets;
}

struct fp_core_target *fp_core_target_at(struct fp_core *s, size_t i)
{
        return i < s->n_targets ? &s->targets[i] : NULL;
}

bool fp_core_has_store(const struct fp_core *s)
{
        return s->writer != NULL;
}

int64_t fp_core_bucket_start_ns(const struct fp_core *s)
{
        return s->bucket_start_ns;
}

int fp_core_submit_dump(struct fp_core *s, const struct fp_store_filter *f, struct fp_pprof *p,
                        fp_core_dump_fn done, void *userdata)
{
        struct dump_request *d;

        if (!s->writer)
                return -ENODEV;
        d = malloc(sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (struct dump_request){done, userdata};
        int r = fp_writer_submit_query(s->writer, f, p, d);
        if (r < 0)
                free(d);
        return r;
}

/* The flush of a core without a collector: answered once the writer stored the buckets. */
struct flush_request {
        fp_core_flush_fn done;
        void *userdata;
};

/*
 * Runs on the writer thread after every job queued before it: the writer's
 * queue is first in, first out, so by then the closed buckets are stored.
 */
static int flush_barrier(struct fp_store *store, void *arg)
{
        (void)store;
        (void)arg;
        return 0;
}

static void on_flush_stored(void *userdata, const struct fp_writer_result *res)
{
        struct flush_request *fr = userdata;
        char msg[256];

        if (res->error < 0)
                snprintf(msg, sizeof(msg), "cannot flush: %s", strerror(-res->error));
        else
                snprintf(msg, sizeof(msg),
                         "closed the open bucket into the store; no collector is configured "
                         "(--collector URL), so nothing was uploaded");
        fr->done(fr->userdata, res->error >= 0, msg);
        free(fr);
}

int fp_core_start_host(struct fp_core *s, const struct fp_host_config *cfg, char *err,
                       size_t err_len)
{
        if (s->host) {
                snprintf(err, err_len, "the host tier is running already (at %" PRIu64 " Hz)",
                         fp_host_config(s->host)->freq);
                return -EALREADY;
        }
        return host_start(s, cfg, err, err_len);
}

int fp_core_host_off_cpu(struct fp_core *s, uint64_t period, char *err, size_t err_len)
{
        int r;

        if (!s->host)
                return -ENOENT;
        if ((r = offcpu_host(s, period, err, err_len)) == 0)
                fp_host_set_off_cpu_period(s->host, period);
        return r;
}

int fp_core_stop_host(struct fp_core *s)
{
        if (!s->host)
                return -ENOENT;
        fp_core_poll_offcpu(s);
        close_buckets(s, NULL, true); /* its last bucket, with every target's */
        (void)offcpu_host(s, 0, NULL, 0);
        fp_host_free(s->host);
        s->host = NULL;
        fp_core_pystack_unload_unused(s);
        return 0;
}

struct fp_host *fp_core_host(struct fp_core *s)
{
        return s->host;
}

int fp_core_flush(struct fp_core *s, fp_core_flush_fn done, void *userdata)
{
        if (!s->writer)
                return -ENODEV;
        close_buckets(s, NULL, true);
        if (s->uploader)
                return fp_uploader_flush(s->uploader, done, userdata);
        struct flush_request *fr = malloc(sizeof(*fr));
        if (!fr)
                return -ENOMEM;
        *fr = (struct flush_request){done, userdata};
        int r = fp_writer_submit_call(s->writer, flush_barrier, NULL, on_flush_stored, fr);
        if (r < 0)
                free(fr);
        return r;
}

/* Adds count for reason to rows (n used of max); returns the new n. */
static size_t add_drop(struct fp_target_drop *rows, size_t n, size_t max, const char *reason,
                       uint64_t count)
{
        size_t j = 0;
        while (j < n && strcmp(rows[j].reason, reason) != 0)
                j++;
        if (j == n) {
                if (n == max)
                        return n;
                rows[n++] = (struct fp_target_drop){reason, 0};
        }
        rows[j].count += count;
        return n;
}

/*
 * Drop totals of one target by reason: what is stored, what is on its way
 * to the store, and what is not yet closed into a bucket.
 */
static size_t target_drops(const struct fp_core *s, struct fp_target *t,
                           struct fp_target_drop *rows, size_t max)
{
        size_t n = fp_target_open_drops(t, rows, max);

        /* Drops in batches the writer has not answered yet. */
        for (const struct batch_ctx *ctx = s->in_flight; ctx; ctx = ctx->next)
                for (size_t i = 0; i < ctx->n; i++) {
                        if (ctx->t[i].pid != fp_target_pid(t) ||
                            ctx->t[i].starttime != fp_target_starttime(t))
                                continue;
                        for (size_t k = 0; k < ctx->t[i].n_drops; k++)
                                n = add_drop(rows, n, max, ctx->t[i].drops[k].reason,
                                             ctx->t[i].drops[k].count);
                }

        for (size_t i = 0; i < s->n_drops; i++) {
                const struct fp_writer_drop *d = &s->drops[i];
                if (d->pid == fp_target_pid(t) && d->starttime == fp_target_starttime(t))
                        n = add_drop(rows, n, max, d->reason, d->count);
        }
        return n;
}

int fp_core_status(struct fp_core *s, uid_t uid, struct fp_core_status *ret)
{
        struct fp_core_status st = {0};

        fp_core_poll_tracker(s);
        fp_core_poll_offcpu(s);
        st.targets = calloc(s->n_targets ? s->n_targets : 1, sizeof(*st.targets));
        if (!st.targets)
                return -ENOMEM;
        st.agent_pid = getpid();
        st.version = FP_VERSION;
        st.uptime_s = (fp_now_ns(CLOCK_MONOTONIC) - s->start_ns) / 1000000000ULL;
        st.symbol_files_loaded = fp_symcache_n_loaded(s->cache);
        for (int i = 0; i < FP_SYM_SOURCES; i++)
                st.symbol_sources[i] = fp_symcache_n_by_source(s->cache, (enum fp_sym_source)i);
        st.symbol_files_loading = fp_symcache_n_loading(s->cache);
        fp_export_names(st.frames_named);
        st.python_files = fp_py_n_files(s->cache, &st.python_refused);
        st.bucket_seconds = s->opt.bucket_seconds;
        st.store_path = s->opt.store_path;
        if (s->opt.store_path) {
                char msg[256] = "";
                st.store_ok = s->writer && fp_writer_store_ok(s->writer, msg, sizeof(msg));
                snprintf(st.store_error, sizeof(st.store_error), "%s",
                         msg[0] ? msg : s->store_error);
                st.store_write_failing = s->store_error[0] != 0;
        }
        st.store_max_bytes = s->have_stats ? s->stats.max_bytes : s->opt.store_max_bytes;
        st.file_bytes = s->stats.file_bytes;
        st.wal_bytes = s->stats.wal_bytes;
        st.buckets = s->stats.buckets;
        st.pending_buckets = s->stats.pending_buckets;
        st.waiting_uploads = s->stats.outbox_uploads;
        st.waiting_bytes = s->stats.outbox_bytes;
        st.oldest_waiting_ns = s->stats.oldest_waiting_ns;
        st.buckets_written = s->buckets_closed;
        st.buckets_failed = s->buckets_failed;
        st.queued = s->writer ? fp_writer_pending(s->writer) : 0;
        if (s->uploader) {
                st.upload_url = fp_uploader_url(s->uploader);
                st.upload_urls = fp_uploader_n_urls(s->uploader);
                fp_uploader_status(s->uploader, &st.upload);
                if (uid != 0) {
                        /* The URL may carry credentials (user:password@, ?token=): not for users.
                         */
                        fp_url_redact(st.upload_url, st.url_redacted, sizeof(st.url_redacted));
                        char *at = strstr(st.upload.last_error, st.upload_url);
                        if (at) {
                                char rest[sizeof(st.upload.last_error)];
                                snprintf(rest, sizeof(rest), "%s", at + strlen(st.upload_url));
                                snprintf(at,
                                         sizeof(st.upload.last_error) -
                                             (size_t)(at - st.upload.last_error),
                                         "%s%s", st.url_redacted, rest);
                        }
                        st.upload_url = st.url_redacted;
                }
        }
        st.python_stacks = fp_core_python_state(s);
        st.tracker = tracker_name(s);
        st.tracker_reason = s->tracker ? "" : s->tracker_reason;
        st.tracker_events_dropped = s->tracker ? fp_tracker_dropped(s->tracker) : 0;
        st.bridge_samples = s->bridge_samples;
        st.bridge_lost = s->bridge_lost;
        if (s->bridge) {
                st.bridge_period = fp_bridge_period(s->bridge);
                st.bridge_cpus = fp_bridge_cpus(s->bridge);
                st.bridge_samples += fp_bridge_samples(s->bridge);
                st.bridge_lost += fp_bridge_lost(s->bridge);
        }
        st.bridge_unclaimed = s->bridge_unclaimed;
        st.bridge_exit_tails = s->bridge_exit_tails;
        st.bridge_full = s->tracker ? fp_tracker_bridge_full(s->tracker) : 0;
        st.bridge_error = s->opt.no_bridge ? "off (--no-bridge)" : s->bridge_error;
        st.children_not_followed = s->children_not_followed;
        if (s->offcpu) {
                st.offcpu_targets = fp_offcpu_targets(s->offcpu);
                st.offcpu_records = fp_offcpu_records(s->offcpu);
                fp_offcpu_python_counts(s->offcpu, &st.offcpu_python_records,
                                        &st.offcpu_python_unpaired);
        }
        st.offcpu_python_records += s->offcpu_py_records;
        st.offcpu_python_unpaired += s->offcpu_py_unpaired;
        st.offcpu_unclaimed = s->offcpu_unclaimed;
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_core_target *at = &s->targets[i];
                struct fp_target *t = at->t;
                struct fp_core_target_status *ts = &st.targets[st.n_targets];
                if (!fp_core_may_see(uid, at))
                        continue;
                fp_target_drain(t); /* counts up to this moment */
                ts->pid = fp_target_pid(t);
                ts->parent = fp_target_parent(t);
                ts->comm = fp_target_comm(t);
                ts->exe = fp_target_exe(t);
                ts->cfg = fp_target_config(t);
                ts->left_out = fp_target_left_out(t);
                ts->follows_children = fp_target_follows_children(t);
                ts->rule_id = at->rule_id;
                ts->service = fp_target_service(t);
                fp_target_stats(t, &ts->st);
                fp_target_attach_latency(t, &ts->latency);
                ts->n_drops = target_drops(s, t, ts->drops, FP_CORE_MAX_DROPS);
                struct fp_pyframes *py =
                    fp_target_python(t, &ts->python_stacks_on, &ts->python_attach_failed);
                for (int k = 0; k < FP_PYSTACK_KINDS; k++) {
                        struct fp_core_interp *in = &ts->interp[k];
                        in->found = fp_pyframes_find(k, fp_target_maps(t), in->version,
                                                     sizeof(in->version), &in->why);
                        in->stacks_found = py && fp_pyframes_kind(py) == k;
                        in->stacks_on = ts->python_stacks_on &&
                                        !(fp_perf_interpreters_off(fp_target_config(t)) & 1u << k);
                        if (in->stacks_found)
                                fp_pyframes_stats(py, &in->st);
                }
                fp_target_jvm_status(t, &ts->jvm);
                fp_runtimes_stats(fp_target_maps(t), &ts->javascript);
                st.n_targets++;
        }
        st.samples_total = s->gone_samples;
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target_stats ts;
                fp_target_stats(s->targets[i].t, &ts);
                st.samples_total += ts.samples;
        }
        st.stored_drops = s->stored_drops;
        st.n_stored_drops = s->n_stored_drops;
        st.evicted_buckets = s->stats.evicted_buckets;
        fp_core_host_status(s, &st);
        if (uid != 0) {
                st.n_host_drops = 0;
                memset(&st.host, 0, sizeof(st.host));
        }
        if (fp_core_rules_status(s, uid, &st) < 0) {
                fp_core_status_free(&st);
                return -ENOMEM;
        }
        *ret = st;
        if (st.upload_url == st.url_redacted) /* into the copy, not this frame's */
                ret->upload_url = ret->url_redacted;
        return 0;
}

void fp_core_status_free(struct fp_core_status *st)
{
        free(st->rules);
        st->rules = NULL;
        st->n_rules = 0;
        free(st->targets);
        st->targets = NULL;
        st->n_targets = 0;
}
