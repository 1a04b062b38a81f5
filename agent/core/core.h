/* SPDX-License-Identifier: MIT */
/*
 * The agent core: everything the agent owns and keeps running between
 * commands. It holds the targets (each with its owner), the time buckets
 * they are closed into, the thread tracker (BPF, or the perf FORK-record
 * fallback), the store's writer thread and the uploader. Commands
 * (commands.c) act on it through the functions below; status rendering
 * (status.c) reads the plain snapshot fp_core_status() gives out. The core
 * knows nothing of sockets or clients.
 *
 * Every --bucket seconds (aligned to the wall clock) each target's open
 * bucket is closed into one batch and handed to the writer; dumps merge
 * the store's buckets with the open ones. At start the store's active
 * targets whose processes still run are resumed, and so are the store's
 * rules (rule.h; core-rules.c applies them), beside the configuration
 * file's.
 *
 * Everything here runs on the agent's one event-loop thread.
 */
#pragma once

#include "debugfile.h"
#include "export.h"
#include "host.h"
#include "perf.h"
#include "target.h"
#include "pyframes.h"
#include "rtframe.h"
#include "upload.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_core;
struct fp_pprof;
struct fp_store_filter;
struct fp_rule;

struct fp_core_options {
        const char *store_path; /* NULL: no store, samples live in memory only */
        uint64_t store_max_bytes;
        unsigned bucket_seconds;
        const char *collector_url; /* NULL: no uploads */
        const char *token_file;
        const char *credentials_file;
        const char *ca_file;
        unsigned upload_interval;
        bool no_bpf;            /* --no-bpf: track threads with the perf FORK-record fallback */
        unsigned max_threads;   /* --max-threads: threads sampled per target at most, 0: none */
        bool no_bridge;         /* --no-bridge: new threads unsampled until their own events open */
        bool no_python;         /* --no-python: no Python stacks read (pystack.h) */
        bool first_period_full; /* --first-period full: no random first period (perf's way) */
        bool java_perf_map_only; /* --java-names perf-map: JVMs' code caches not read */
        unsigned keep_exited_s;  /* --keep-exited: an exited PID target stays this long, 0: 60 */
        /* The host tier from the start (host = on; --host ...), and how. */
        bool host;
        struct fp_host_config host_cfg;
        /* The configuration file's rules: "target =" lines (rule.h), checked already. */
        const char *const *rules;
        size_t n_rules;
};

/* A target and the user it is profiled for. */
struct fp_core_target {
        struct fp_target *t;
        uid_t owner;
        bool final_written; /* exited and its last bucket queued: nothing more to write */
        int64_t final_ns;   /* CLOCK_MONOTONIC of that */
        int64_t rule_id;    /* the rule that started it, 0: started by PID */
        bool by_follow;     /* a child its rule follows (--follow-children), matching or not */
        uint64_t children_refused; /* children not followed: its user's targets at the limit */
};

/*
 * Opens the store (logging one line when it had to be moved aside or
 * cannot be used: the agent then keeps sampling without it), resumes
 * stored targets, starts the tracker, the bucket timer and the uploader.
 * -errno with one line in err.
 */
int fp_core_new(struct event_base *base, const struct fp_core_options *opt, struct fp_core **ret,
                char *err, size_t err_len);
/*
 * Closes every open bucket into the store (targets stay marked active, so
 * a restarted agent resumes them), waits for the writer (which answers
 * waiting dumps), and stops every target. Accepts NULL.
 */
void fp_core_free(struct fp_core *core);

/* Whether uid may see, stop or dump target at: root, or its owner. */
bool fp_core_may_see(uid_t uid, const struct fp_core_target *at);
/*
 * Running targets a user other than root asked for (by PID, and the
 * children they follow) at most: each costs perf events and ring memory.
 */
#define FP_CORE_MAX_TARGETS_PER_USER 64
/* Whether uid (not root) has that many running targets it asked for. */
bool fp_core_user_at_limit(const struct fp_core *core, uid_t uid);
/* The target profiling pid (running or exited), or NULL. */
struct fp_core_target *fp_core_find(struct fp_core *core, pid_t pid);
/* Targets by index, 0 <= i < fp_core_n_targets(); valid until a target starts or stops. */
size_t fp_core_n_targets(const struct fp_core *core);
struct fp_core_target *fp_core_target_at(struct fp_core *core, size_t i);

/*
 * Records a target started by hand in the store at once, as active, so
 * that an agent killed before its first bucket is stored resumes it.
 */
void fp_core_note_target(struct fp_core *core, struct fp_target *t);

/*
 * Starts profiling; on failure -errno and one line in err. follow: its
 * child processes are profiled too; parent: the target it was followed
 * from (0: started by a user).
 */
int fp_core_start_target(struct fp_core *core, pid_t pid, const struct fp_perf_config *cfg,
                         uid_t owner, bool follow, pid_t parent, struct fp_target **ret, char *err,
                         size_t err_len);
/* Writes the target's open bucket (not active any more) and forgets it. */
void fp_core_stop_target(struct fp_core *core, struct fp_core_target *at);
/*
 * Handles the tracker's pending records now, then the bridge's samples, so
 * status and dumps are current.
 */
void fp_core_poll_tracker(struct fp_core *core);
/* The same for the off-CPU profiler's records and the kernel side's counts. */
void fp_core_poll_offcpu(struct fp_core *core);

bool fp_core_has_store(const struct fp_core *core);
/* CLOCK_REALTIME start of the open bucket. */
int64_t fp_core_bucket_start_ns(const struct fp_core *core);

/*
 * A dump's store part: the writer adds the stored buckets matching f to p
 * and then calls done on the loop thread with the result (error < 0 and a
 * message; -ENODEV: no store could be read, p holds the open buckets
 * only). p is the callback's to free. Returns -ENODEV when there is no
 * store at all (done is not called), other -errno when it cannot queue.
 */
typedef void (*fp_core_dump_fn)(void *userdata, struct fp_pprof *p, int error, const char *message);
int fp_core_submit_dump(struct fp_core *core, const struct fp_store_filter *f, struct fp_pprof *p,
                        fp_core_dump_fn done, void *userdata);

/*
 * Closes every open bucket and, with a collector, uploads now; done gets
 * ok and one line for the user once it is over. -ENODEV without a store,
 * -EBUSY when a flush is in progress, other -errno (done not called).
 */
typedef void (*fp_core_flush_fn)(void *userdata, bool ok, const char *message);
int fp_core_flush(struct fp_core *core, fp_core_flush_fn done, void *userdata);

/* ---- the host tier (core-host.c) ---- */

/*
 * Starts the host tier (host.h) with cfg; -EALREADY when it runs (its
 * off-CPU time may be changed with fp_core_host_off_cpu(); the rest needs a
 * stop first), other -errno with one line in err.
 */
int fp_core_start_host(struct fp_core *core, const struct fp_host_config *cfg, char *err,
                       size_t err_len);
/* Writes the host tier's open bucket and stops it; -ENOENT when it is not running. */
int fp_core_stop_host(struct fp_core *core);
/*
 * Takes the running host tier's off-CPU time from now on, one wait kept
 * with probability d/period (period ns; 0 stops it). -ENOENT without a host
 * tier; another -errno with err said.
 */
int fp_core_host_off_cpu(struct fp_core *core, uint64_t period, char *err, size_t err_len);
/* The host tier, or NULL when it is off. */
struct fp_host *fp_core_host(struct fp_core *core);
/* Whether Python stacks are read: "on", "off (no-python)", "not loaded (no target)" or why not. */
const char *fp_core_python_state(const struct fp_core *core);

/* ---- rules (core-rules.c) ---- */

#define FP_CORE_MAX_RULES          64 /* rules of the agent, all users */
#define FP_CORE_MAX_RULES_PER_USER 8  /* rules of one user other than root */

/*
 * Adds rule (the core owns it from now on, also on failure) and starts
 * profiling every process it matches now; from_config: declared in the
 * configuration file (else it is kept in the store, to be resumed after a
 * restart). 0 with the rule's id and how many processes it matched now,
 * or -errno with one line in err (-EUSERS: too many rules).
 */
int fp_core_add_rule(struct fp_core *core, struct fp_rule *rule, bool from_config, int64_t *ret_id,
                     size_t *ret_matched, char *err, size_t err_len);
/* The rule of that id, or NULL. */
const struct fp_rule *fp_core_find_rule(const struct fp_core *core, int64_t id);
/*
 * Ends rule id: writes the last bucket of each of its targets and forgets
 * them, and forgets the rule (in the store too). Returns how many targets
 * it stopped, or -ENOENT.
 */
int fp_core_remove_rule(struct fp_core *core, int64_t id);
/*
 * Whether uid has a rule whose processes are stored under service, and
 * no other user has one (a dump of the service then holds uid's
 * processes only).
 */
bool fp_core_user_has_service(const struct fp_core *core, uid_t uid, const char *service);

/* ---- the status snapshot ---- */

#define FP_CORE_MAX_DROPS 24

struct fp_core_target_status {
        pid_t pid, parent;
        const char *comm, *exe;
        const struct fp_perf_config *cfg;
        const char *left_out;
        bool follows_children;
        int64_t rule_id;     /* 0: started by PID */
        const char *service; /* "": none */
        struct fp_target_stats st;
        struct fp_target_latency latency;
        struct fp_target_drop drops[FP_CORE_MAX_DROPS]; /* stored and not yet stored */
        size_t n_drops;
        /*
         * The interpreters read at sample time in it, by kind (FP_PYSTACK_PYTHON,
         * _PHP, _RUBY: pyframes.h's fp_pyframes_kinds[]): each recognised (found 1,
         * with its version), refused (-1, with why) or not seen (0).
         */
        struct fp_core_interp {
                int found;
                char version[32];
                const char *why;
                bool stacks_found; /* its stacks are read: st counts */
                bool stacks_on;    /* the program runs at its samples, for this interpreter */
                struct fp_pyframes_stats st;
        } interp[FP_PYSTACK_KINDS];
        /* Their stacks: read (stacks_on), and the CPUs' events the program could not run at. */
        bool python_stacks_on;
        uint64_t python_attach_failed;
        struct fp_jvm_names_status jvm; /* a JVM asked for its methods' names */
        struct fp_rt_stats javascript;  /* its JavaScript frames (runtimes.h) */
};

struct fp_core_rule_status {
        int64_t id;
        uid_t owner;
        bool from_config;
        const struct fp_rule *rule;
        unsigned running; /* its targets whose process runs */
        uint64_t started, refused, failed;
        const char *last_error; /* "" when none failed */
        uint64_t n_latency;     /* processes timed from exec (or fork) to events open */
        uint32_t p50_us, p99_us, max_us;
};

/*
 * What status shows: plain data, its strings borrowed from the core and
 * valid until control returns to the event loop.
 */
struct fp_core_status {
        pid_t agent_pid;
        const char *version;
        uint64_t uptime_s;
        size_t symbol_files_loaded;
        size_t symbol_sources[FP_SYM_SOURCES]; /* of those, by where the names came from */
        size_t symbol_files_loading;           /* asked for, still being read on a loader thread */
        uint64_t frames_named[FP_EXPORT_NAME_KINDS]; /* export.h: frames exported, by namer */
        size_t python_files, python_refused; /* of the files read: CPython interpreters, refused */
        const char *python_stacks;           /* fp_core_python_state() */
        unsigned bucket_seconds;
        /* The store. */
        const char *store_path;   /* NULL: none */
        bool store_ok;            /* the writer has the store open */
        bool store_write_failing; /* the last bucket could not be written */
        char store_error[256];    /* why not, when either is so */
        uint64_t store_max_bytes, file_bytes, wal_bytes, buckets, pending_buckets;
        uint64_t waiting_uploads, waiting_bytes; /* built, in the store's outbox */
        int64_t oldest_waiting_ns;               /* 0: nothing waits */
        uint64_t buckets_written, buckets_failed;
        size_t queued;
        /* Uploads (url NULL: no collector). */
        const char *upload_url; /* in use; for users other than root: without credentials */
        uint64_t upload_urls;   /* collectors to fail over between */
        char url_redacted[512];
        struct fp_upload_status upload;
        /* Thread tracking. */
        const char *tracker, *tracker_reason;
        uint64_t tracker_events_dropped, children_not_followed;
        /* The bridge (bridge.h): period 0 when closed, and why when it could not open. */
        uint64_t bridge_period, bridge_samples, bridge_lost, bridge_unclaimed, bridge_full;
        uint64_t bridge_exit_tails; /* its ticks in tracked threads' exits, claimed or not */
        unsigned bridge_cpus;
        const char *bridge_error;
        /* The off-CPU profiler (offcpu.h): processes it profiles (0: not loaded), its records. */
        unsigned offcpu_targets;
        uint64_t offcpu_records, offcpu_unclaimed;
        /* Python stacks read off-CPU, and those whose stack's record was lost (since start). */
        uint64_t offcpu_python_records, offcpu_python_unpaired;
        /* The targets uid may see. */
        struct fp_core_target_status *targets;
        size_t n_targets;
        /* Monotonic totals of every target (for metrics): samples kept, drops stored. */
        uint64_t samples_total;
        const struct fp_target_drop *stored_drops;
        size_t n_stored_drops;
        uint64_t evicted_buckets;
        /* The host tier (root sees it; others only whether it runs). */
        bool host_on;
        struct fp_host_config host_cfg;
        struct fp_host_stats host;
        struct fp_target_drop host_drops[FP_CORE_MAX_DROPS]; /* not yet stored */
        size_t n_host_drops;
        /* The rules uid may see (its own; root: all), and the /proc scan's cost. */
        struct fp_core_rule_status *rules;
        size_t n_rules;
        uint64_t rule_scans, rule_scan_us;
};

/*
 * Takes the snapshot for a user (uid: only the targets it may see),
 * draining every such target's rings first so the counts are current.
 * 0 or -ENOMEM; free with fp_core_status_free().
 */
int fp_core_status(struct fp_core *core, uid_t uid, struct fp_core_status *ret);
void fp_core_status_free(struct fp_core_status *st);
