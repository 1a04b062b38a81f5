/* SPDX-License-Identifier: MIT */
/*
 * A profiled process: its threads and their perf events, its mappings, and
 * the aggregated samples and loss counts gathered so far.
 *
 * Thread life cycle:
 *
 *   attach (at start; on a birth reported by the thread tracker: the BPF
 *   tracker, or in its fallback a FORK record from a sibling's side-band;
 *   or found by the /proc/PID/task rescan, which catches what a tracker
 *   missed: each second, every 10 s while BPF reports the births)
 *      -> live: both rings registered with the event loop
 *      -> dead (EXIT record or hangup): rings drained, fds closed at once;
 *         the thread's name is kept for the profile's labels.
 *
 * When no thread is left and /proc/PID is gone (or belongs to another
 * process start), the target is "exited": nothing is open, but its
 * samples, mappings and symbols stay until it is stopped, so it can still
 * be dumped.
 */
#pragma once

#include "jvmnames.h"
#include "perf.h"
#include "samplestats.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_symcache;
struct fp_pprof;
struct fp_target;

/*
 * Distinct stacks (per thread) a target keeps in one bucket; past them a
 * sample's time is kept under one "[stack table full]" frame, so a process
 * that makes every stack different cannot grow the agent without bound.
 */
#define FP_TARGET_MAX_STACKS 32768

/*
 * Starts profiling pid: checks that the machine has every event of cfg
 * (with cfg->best_effort, members it lacks are left out instead: see
 * fp_target_left_out()), opens both events on every thread and registers
 * them with base. On failure returns -errno and writes one line for the
 * user into err (for example "event 'cycles' is not supported on this
 * machine: no hardware PMU is exposed"): -ESRCH no such process, -EACCES
 * not allowed, -ENOENT/-EOPNOTSUPP event not available.
 */
int fp_target_start(struct event_base *base, struct fp_symcache *cache, pid_t pid,
                    const struct fp_perf_config *cfg, struct fp_target **ret, char *err,
                    size_t err_len);
/* Stops (if still running) and frees everything. Accepts NULL. */
void fp_target_free(struct fp_target *t);

pid_t fp_target_pid(const struct fp_target *t);
const char *fp_target_comm(const struct fp_target *t);
const char *fp_target_exe(const struct fp_target *t);
uint64_t fp_target_starttime(const struct fp_target *t);
const struct fp_perf_config *fp_target_config(const struct fp_target *t);
#define FP_TARGET_SERVICE_MAX 64
/*
 * The service the target's samples are stored under (the rule that
 * matched it; "" for none, the default), so that successive processes of
 * one service merge. At most FP_TARGET_SERVICE_MAX characters are kept.
 */
void fp_target_set_service(struct fp_target *t, const char *service);
const char *fp_target_service(const struct fp_target *t);
/*
 * A target a user (not root) asked for: the process must stay that user's.
 * When it execs a program that makes it another's (set-user-ID or
 * set-group-ID, or file capabilities, which make it root's in /proc), the
 * samples after the exec are not kept (counted as revoked_exec) and
 * fp_target_revoked() turns true, for the caller to stop it.
 */
void fp_target_guard(struct fp_target *t, uid_t user);
uid_t fp_target_guarded_for(const struct fp_target *t); /* 0: not guarded */
bool fp_target_revoked(const struct fp_target *t);
/* The events --best-effort left out at start ("cycles,instructions"), "" when none. */
const char *fp_target_left_out(const struct fp_target *t);
void fp_target_stats(const struct fp_target *t, struct fp_target_stats *ret);

/*
 * Thread tracking. A tracker (core.c: the BPF one, or the perf FORK
 * records of the fallback) reports births and exits:
 *
 * fp_target_thread_born() attaches thread tid now, birth_ns being its
 * CLOCK_MONOTONIC creation time (0 unknown) for the attach latency. A
 * thread that is listed in /proc but not yet attachable (ESRCH) is tried
 * again a few times, 2 ms apart. Returns 0 when attached or queued, -ESRCH
 * when the thread is already gone (counted as missed), other -errno.
 *
 * fp_target_thread_exited() closes thread tid's events at once (after
 * reading its last samples); it may not be called from a ring drain.
 *
 * fp_target_thread_cpu() gives a born thread's CPU time as the kernel
 * accounted it at its last switch (the tracker's exit accounting): status
 * shows it beside what the profile holds of the same threads.
 */
int fp_target_thread_born(struct fp_target *t, pid_t tid, uint64_t birth_ns);
void fp_target_thread_exited(struct fp_target *t, pid_t tid);
/* A thread's counts of the events the kernel keeps per thread, at its last switch. */
struct fp_thread_events {
        uint64_t min_flt, maj_flt, nvcsw, nivcsw;
};
void fp_target_thread_cpu(struct fp_target *t, pid_t tid, uint64_t cpu_ns,
                          const struct fp_thread_events *ev);
/*
 * A record of the off-CPU profiler (offcpu.h) of one of the target's
 * threads, with the Python stack read with it (NULL: none).
 */
/*
 * Whether the target is a JVM asked for its compiled methods' names
 * (target-jvm.c): state 1 asked (on samples in JIT code it did not name),
 * -1 refused (why says), 0 not a JVM; why: the refusal or the last
 * failure ("" none); requests made, answered (the JVM wrote its map),
 * failed; pending: one is under way.
 */
/*
 * A target's JVM (jvmnames.h): at least FP_TARGET_JVM_EVERY_NS after an
 * answer, FP_TARGET_JVM_BURST requests at once and then one every
 * FP_TARGET_JVM_REFILL_NS: code compiled in a burst (a JVM warming up) is
 * named before its bucket is written, and over time a JVM is asked every
 * 2 s at most.
 */
#define FP_TARGET_JVM_EVERY_NS  250000000ULL
#define FP_TARGET_JVM_BURST     3
#define FP_TARGET_JVM_REFILL_NS 2000000000ULL
void fp_target_jvm_status(const struct fp_target *t, struct fp_jvm_names_status *ret);

struct fp_offcpu_record;
struct fp_offcpu_target;
struct fp_pystack_record;
void fp_target_offcpu_record(struct fp_target *t, const struct fp_offcpu_record *r,
                             const struct fp_pystack_record *py);
/* The kernel side's counts of the target (fp_offcpu_counts()), for its stats and drops. */
void fp_target_offcpu_counts(struct fp_target *t, const struct fp_offcpu_target *k);
/* A sample of the bridge (bridge.h) of one of the target's threads, taken at bridge_period. */
void fp_target_bridge_sample(struct fp_target *t, const struct fp_perf_sample *s,
                             uint64_t bridge_period);
/*
 * A tick of the bridge (at bridge_period) that found thread tid exiting
 * with its own events closed (the tracker's THREAD_TAIL): kernel time
 * after its last own sample, weighed as a bridge sample and kept under
 * one "[thread exit]" frame.
 */
void fp_target_exit_tail(struct fp_target *t, pid_t tid, uint64_t bridge_period);

/* Called, from inside a ring drain, when a followed target forks process child. */
typedef void (*fp_target_child_fn)(void *userdata, struct fp_target *t, pid_t child);
/*
 * How threads are tracked: bpf set means births come from the BPF tracker
 * (FORK records are then ignored); otherwise FORK records are the tracker,
 * and with follow_children those of new child processes call on_child.
 * parent_pid is the target this one was followed from (0: none).
 */
void fp_target_set_tracking(struct fp_target *t, bool bpf, bool follow_children, pid_t parent_pid,
                            fp_target_child_fn on_child, void *userdata);
bool fp_target_follows_children(const struct fp_target *t);
/*
 * Python stacks: s is the agent's program (pystack.h), run from now on at
 * each sample of the target's threads unless its configuration says
 * no_python; once the process's CPython is recognised (samples.c) each
 * sample carries its Python stack. The program's records of the process
 * are handed in by fp_target_pystack_record().
 */
struct fp_pystack;
struct fp_pystack_record;
struct fp_pyframes;
void fp_target_set_pystack(struct fp_target *t, struct fp_pystack *s);
void fp_target_pystack_record(struct fp_target *t, const struct fp_pystack_record *r);
/*
 * Its Python frames (pyframes.h: names, figures), NULL while no CPython is
 * recognised; *ret_on: whether they are read at all.
 */
struct fp_pyframes *fp_target_python(const struct fp_target *t, bool *ret_on,
                                     uint64_t *ret_attach_failed);
/* The live threads' ids, at most max of them: how many. */
size_t fp_target_live_tids(const struct fp_target *t, pid_t *ret, size_t max);
/* Whether the BPF tracker reports its threads' births (and the bridge covers them). */
bool fp_target_bpf_tracked(const struct fp_target *t);
/*
 * The /proc rescan runs each second, or every 10 s while the BPF tracker
 * reports the births: this asks for it at the next second (the tracker
 * lost records).
 */
void fp_target_proc_pass_soon(struct fp_target *t);
pid_t fp_target_parent(const struct fp_target *t);

/* Birth -> events open of the threads attached by a tracker, in microseconds. */
struct fp_target_latency {
        uint64_t count; /* threads measured; the percentiles cover the last 512 */
        uint32_t p50_us, p90_us, p99_us, max_us;
};
void fp_target_attach_latency(const struct fp_target *t, struct fp_target_latency *ret);

/* Reads every ring now, so a dump includes samples up to this moment. */
void fp_target_drain(struct fp_target *t);

#define FP_TARGET_MAX_CARRIED 8

/*
 * The open bucket: the samples aggregated since the last bucket (an
 * aggregator of FP_TARGET_MAX_FRAMES frames at most per stack). Valid
 * until fp_target_next_bucket().
 */
#define FP_TARGET_MAX_FRAMES 512
struct fp_agg;
const struct fp_agg *fp_target_bucket(const struct fp_target *t);
/*
 * The open bucket's off-CPU stacks of threads that waited for reason
 * (enum fp_offcpu_reason), values in ns; NULL when the target's off-CPU
 * time is not profiled.
 */
const struct fp_agg *fp_target_offcpu_bucket(const struct fp_target *t, unsigned reason);
/*
 * Starts the next bucket empty, once the open one is stored: its samples
 * and drops (fp_target_open_drops()) are forgotten. 0 or -ENOMEM (the
 * bucket then stays open).
 */
int fp_target_next_bucket(struct fp_target *t);
/* The process's executable mappings (maps.h), to name the bucket's frames. */
struct fp_maps;
struct fp_maps *fp_target_maps(struct fp_target *t);
/*
 * The name of JIT code at addr from the runtime's perf map
 * (/tmp/perf-PID.map, read on the first call), counted in the stats as a
 * JIT frame; NULL when the map has none.
 */
const char *fp_target_jit_name(struct fp_target *t, uint64_t addr);
/* The same, not counted as a named frame: the stack walk's look as samples arrive (target: t). */
const char *fp_target_jit_warm(void *target, uint64_t addr);
/* The name of an interpreted Java method (FP_FRAME_JAVA's Method*), or NULL (target: t). */
const char *fp_target_java_method(void *target, uint64_t method);
/* What the target's JVM's code cache says of pc (jvmnames.h's fp_jvm_names_code()). */
struct fp_hotspot_code;
int fp_target_java_code(void *target, uint64_t pc, bool leaf, struct fp_hotspot_code *ret);
/* The name of thread tid, "" when the target never had such a thread. */
const char *fp_target_thread_name(struct fp_target *t, pid_t tid);
/* Counts samples lost elsewhere (queue_full, store_write_failed) into the next bucket. */
void fp_target_charge_drop(struct fp_target *t, const char *reason, uint64_t count);
/* A count of samples lost for one reason. */
struct fp_target_drop {
        const char *reason;
        uint64_t count;
};
/*
 * The drops not yet in the store: those of the open bucket (by the reasons
 * kernel_ring_overflow, throttled, out_of_memory, revoked_exec,
 * unwind_failed, stack_copy_short) and those charged for the next one.
 * Returns how many of ret were filled; FP_TARGET_MAX_DROPS always suffice.
 */
#define FP_TARGET_MAX_DROPS (11 + FP_TARGET_MAX_CARRIED)
size_t fp_target_open_drops(const struct fp_target *t, struct fp_target_drop *ret, size_t max);
/* How to start it again, as the target configuration text (targetconf.h). */
void fp_target_config_string(const struct fp_target *t, char *buf, size_t len);

/* The (type, unit) pairs of the samples: samples/count and cpu/nanoseconds (or EVENT/count). */
void fp_target_sample_types(const struct fp_target *t, const char *ret_types[2],
                            const char *ret_units[2]);
/*
 * The pprof sample type of counter i (0 <= i < cfg n_members): the event's
 * name and unit, "page-faults"/"count". In the store each counter is an
 * event of its own whose count is the samples and whose value is what it
 * counted in them (zero rows are left out).
 */
void fp_target_counter_type(const struct fp_target *t, unsigned i, const char **ret_type,
                            const char **ret_unit);
