/* SPDX-License-Identifier: MIT */
/*
 * What core.c (targets, buckets, tracker, store) and core-rules.c (the
 * rules that start and stop targets as processes come and go) share: the
 * core's record. Not for other modules.
 */
#pragma once

#include "core.h"
#include "rule.h"
#include "store.h"
#include "writer.h"

#include <stdbool.h>
#include <stdint.h>

#define MAX_QUEUE_BYTES (256u << 20) /* closed buckets waiting for the disk */

#define RULE_LATENCY_RING 512 /* start -> events open of a rule's processes, the last N */

/* A rule and what it did. */
struct core_rule {
        struct fp_rule *rule;
        uint64_t started; /* processes it profiled */
        uint64_t refused; /* new processes left out: --max-processes were running */
        uint64_t failed;  /* processes that could not be profiled */
        char last_error[256];
        uint32_t latency_us[RULE_LATENCY_RING];
        uint64_t n_latency;
};

struct fp_core {
        struct event_base *base;
        struct fp_symcache *cache;
        struct fp_core_options opt;
        struct fp_core_target *targets;
        size_t n_targets, cap_targets;
        uint64_t start_ns;

        /* The store and its buckets. */
        struct fp_writer *writer;
        struct event *ev_bucket;
        int64_t bucket_start_ns; /* CLOCK_REALTIME start of the open bucket */
        uint64_t buckets_closed, buckets_failed;
        bool have_stats;
        struct fp_store_stats stats;  /* after the last write */
        struct fp_writer_drop *drops; /* stored drop totals after the last write */
        size_t n_drops;
        char store_error[256];
        struct fp_uploader *uploader;

        /* Thread tracking: the BPF tracker, or NULL and why (the fallback is in use). */
        struct fp_tracker *tracker;
        uint64_t tracker_dropped; /* its lost records, as last seen */
        char tracker_reason[256];
        struct fp_offcpu *offcpu;  /* loaded while a target profiles its off-CPU time */
        uint64_t offcpu_unclaimed; /* off-CPU records of no target (one gone meanwhile) */
        struct fp_pystack
            *pystack;       /* reads Python stacks (pystack.h), loaded with the first target */
        bool pystack_tried; /* loaded, or could not be: pystack_error says why */
        char pystack_error[256];
        uint64_t pystack_unclaimed; /* its records of no target (one gone meanwhile) */
        struct fp_bridge *bridge;   /* born threads until their own events (bridge.h), or NULL */
        char bridge_error[256];     /* why it could not open */
        struct event *ev_bridge;    /* follows the targets: period, closed with the last */
        uint64_t bridge_unclaimed;  /* samples of no target (a child not followed, one gone) */
        uint64_t bridge_samples, bridge_lost;           /* of bridges closed before */
        uint64_t offcpu_py_records, offcpu_py_unpaired; /* of off-CPU profilers unloaded */
        uint64_t bridge_exit_tails; /* its ticks in threads' exits (the tracker's) */
        struct event *ev_children;  /* starts the children the fallback reported */
        struct {
                pid_t pid, parent;
        } pending_children[64];
        size_t n_pending_children;
        uint64_t children_not_followed; /* the pending list was full */
        struct batch_ctx *in_flight;    /* batches queued for the writer */

        uint64_t cost_cpu_ns; /* the agent's CPU time when the last bucket closed */

        /* Monotonic totals for metrics: samples of targets forgotten, drops stored. */
        uint64_t gone_samples;
        struct fp_target_drop stored_drops[FP_CORE_MAX_DROPS]; /* reasons: static strings */
        char stored_drop_names[FP_CORE_MAX_DROPS][32];
        size_t n_stored_drops;

        /* The host tier (core-host.c), NULL when off. */
        struct fp_host *host;

        /* Rules (core-rules.c). */
        struct core_rule *rules;
        size_t n_rules, cap_rules;
        int64_t next_rule_id;
        struct event *ev_rule_scan; /* the /proc scan: the fallback's trigger, the BPF's net */
        uint64_t rule_scans;
        uint64_t rule_scan_us; /* time the last scan took */
};

/* ---- core.c ---- */

/*
 * fp_core_start_target() with the BPF tracker told to report (and track
 * from their first instruction) the processes pid forks when
 * track_children, whether or not they are followed.
 */
int fp_core_start_target_tracked(struct fp_core *s, pid_t pid, const struct fp_perf_config *cfg,
                                 uid_t owner, bool follow, bool track_children, pid_t parent,
                                 struct fp_target **ret, char *err, size_t err_len);
/* The program that reads Python stacks, loaded on first use; NULL when off or refused (said). */
struct fp_pystack *fp_core_pystack_get(struct fp_core *s);
/* Unloads it once no target or rule needs it (loaded again by the next). */
void fp_core_pystack_unload_unused(struct fp_core *s);
/* The bridge follows the targets and rules: opened, its period changed, or closed. */
void fp_core_bridge_update(struct fp_core *s);
/* Whether a batch still on its way to the writer holds the target's last bucket. */
bool fp_core_in_flight(const struct fp_core *s, pid_t pid, uint64_t starttime);

/*
 * A batch on its way to the store: which target of the agent each target
 * index of the batch was, and the drops each carried into it; and which
 * were the host tier's series. Until the writer answers, those drops are
 * "in flight": status adds them (they are neither open nor stored), and a
 * failed write charges them again, with the batch's samples, so no count
 * is lost however often writes fail.
 */
#define CTX_MAX_DROPS FP_TARGET_MAX_DROPS
struct batch_ctx {
        struct batch_ctx *next; /* in flight, oldest first */
        uint32_t *host_idx;     /* the host tier's series in the batch */
        size_t n_host_idx;
        size_t n_host_drops;
        struct {
                char reason[32];
                uint64_t count;
        } host_drops[FP_HOST_MAX_DROPS];
        size_t n;
        struct {
                pid_t pid;
                uint64_t starttime;
                uint32_t idx;
                size_t n_drops;
                struct {
                        char reason[32];
                        uint64_t count;
                } drops[CTX_MAX_DROPS];
        } t[];
};

/* ---- core-host.c: called by core.c, calling nothing of it ---- */

/* Adds the host tier's open bucket (when it runs) to b; notes its series in ctx. */
void fp_core_host_close_bucket(struct fp_core *s, struct fp_store_batch *b, struct batch_ctx *ctx);
/* A batch that could not be stored: its host series' samples and drops go to the next bucket. */
void fp_core_host_charge(struct fp_core *s, struct batch_ctx *ctx, struct fp_store_batch *b,
                         const char *reason);
/* The host tier's part of a status snapshot. */
void fp_core_host_status(struct fp_core *s, struct fp_core_status *st);
/* Starts the host tier (no bucket to write first). */
int fp_core_host_start(struct fp_core *s, const struct fp_host_config *cfg, char *err,
                       size_t err_len);

/* ---- core-rules.c ---- */

/* Resumes the rules kept in the store (before the writer owns it). */
void fp_core_rules_resume(struct fp_core *s, struct fp_store *store);
/* Adds the configuration file's rules (opt.rules); logs the ones that fail. */
void fp_core_rules_from_config(struct fp_core *s);
/*
 * The tracker's news: an exec (comm: the new name, NULL: unknown), a move
 * to another cgroup.
 */
void fp_core_rules_on_exec(struct fp_core *s, pid_t pid, const char *comm, uint64_t event_ns);
/*
 * A child forked by a target: true when the parent is a rule's target
 * (the rules decided about the child), false to follow it as before.
 */
bool fp_core_rules_on_child(struct fp_core *s, pid_t child, pid_t parent, uint64_t event_ns);
/* Fills the rules part of a status snapshot for uid. 0 or -ENOMEM. */
int fp_core_rules_status(struct fp_core *s, uid_t uid, struct fp_core_status *st);
/* Frees every rule (at the end). */
void fp_core_rules_free(struct fp_core *s);

/* ---- core.c: off-CPU time ---- */

/*
 * Whether the off-CPU profiler can be loaded here (it is, or it loads and
 * is unloaded again): 0, or -errno with the one line that says what the
 * kernel lacks (a rule with --off-cpu is refused with it).
 */
int fp_core_offcpu_check(struct fp_core *s, char *err, size_t err_len);
