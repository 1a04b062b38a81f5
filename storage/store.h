/* SPDX-License-Identifier: MIT */
/*
 * The time-bucketed ring store: one SQLite file that holds closed buckets
 * of aggregated samples (stack -> count and value per host, process,
 * thread and event), the drop counts beside them, and which buckets have
 * been uploaded. The agent writes one bucket every few seconds and reads
 * profiles back for dumps and uploads; the collector stores every host's
 * uploads in the same schema. The schema, the eviction rule and the
 * on-disk hashes are documented at the top of schema.c.
 *
 * Writing goes through a batch: a self-contained, plain-data copy of one
 * closed bucket (it holds no pointers into its builder's state), so the
 * agent's loop thread can build it and hand it to a writer thread.
 *
 *   b = fp_store_batch_new(start_ns, length_ns);
 *   fp_store_batch_add_target(b, &target, &t);   -- every profiled target
 *   fp_store_batch_add_event(b, &event, &e);
 *   fp_store_batch_add_stack(b, frames, n, &st); -- leaf first, symbolized
 *   fp_store_batch_add_sample(b, t, e, tid, "worker", st, count, value);
 *   fp_store_batch_add_drop(b, t, "throttled", 3);
 *   fp_store_write_batch(store, b);              -- one transaction
 *   fp_store_batch_free(b);
 *
 * Drop reasons the system uses (any short string is accepted):
 *   kernel_ring_overflow  PERF_RECORD_LOST: the kernel's ring was full
 *   throttled             the kernel throttled the event
 *   unwind_failed         no usable callchain
 *   queue_full            the agent's bucket queue to the writer was full
 *   store_write_failed    fp_store_write_batch() failed (disk full, I/O
 *                         error): the caller counts the lost bucket's
 *                         samples (fp_store_batch_target_count()) under this
 *                         reason and adds them to a later batch
 *   evicted               added by the store itself: samples of buckets
 *                         evicted for space before they were uploaded
 *   upload_rejected       added by fp_store_mark_rejected(): samples of
 *                         buckets the collector refused
 *
 * A struct fp_store is not thread-safe: use it from one thread at a time.
 * Other threads or processes may open the same file (a second read-write
 * store, or fp_store_open_readonly()); SQLite's WAL mode lets readers and
 * the writer work at the same time.
 *
 * Every function that can fail returns 0 (or a count) on success and
 * -errno on failure: -ENOMEM, -EINVAL (bad argument), -ENOSPC (disk or
 * file-size limit full), -EIO, -EROFS / -EACCES (cannot write there),
 * -EBADMSG (the file is damaged: close and reopen, which moves it aside),
 * -EPROTO (not a fleetprof store, or a schema this build cannot read),
 * -EBUSY (locked by another process for longer than the busy timeout).
 * After a failed call the store stays usable and fp_store_errmsg() holds
 * one line that says what failed. The library never prints.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp_pprof;
struct fp_store;
struct fp_store_batch;

/* ---- batches ---- */

/* A profiled process. host NULL: this machine's hostname. */
struct fp_store_target {
        const char *host;
        pid_t pid;
        uint64_t starttime; /* /proc/PID/stat field 22: with pid, names one process */
        const char *comm;   /* NULL: "" */
        const char *exe;    /* NULL: "" */
        /*
         * How it is profiled, for resuming after an agent restart: a short
         * text the agent writes and parses, e.g. "event=cpu-clock,page-faults
         * freq=99 period=0 kernel=0". NULL: "". The newest batch's value wins.
         */
        const char *config;
        /*
         * Still being profiled when the bucket closed. The newest batch's
         * value wins; fp_store_list_targets() reports it so a restarted
         * agent resumes active targets (whose pid + starttime still run).
         */
        bool active;
        /*
         * The service it belongs to (the agent's rule that matched it), so
         * that successive processes of one service merge. NULL: "" (none).
         * The newest batch's value wins.
         */
        const char *service;
        /*
         * The container it ran in (a host tier's series: the ID as docker
         * ps shows it). NULL: "" (none). The newest batch's value wins.
         */
        const char *container;
        /*
         * Whom it is profiled for (agent/target.h: the user whose it must
         * stay across execs; 0 for root's requests), so that a restarted
         * agent guards a resumed target as before. has_guard false: not
         * known (stored as -1; resumed guarded for its process's owner).
         */
        bool has_guard;
        uint32_t guard;
};

/*
 * A sampling event and the meaning of its two values: count (e.g.
 * "samples"/"count") and value (e.g. "cpu"/"nanoseconds", or
 * "cycles"/"count"); the pprof sample types of a profile of this event.
 * period_type NULL: no period. name and all four type strings are required.
 * The agent stores each counter of a perf group as an event too (count:
 * the leader's samples, value: e.g. "page-faults"/"count", no period);
 * agent/counters.h puts a group's events back into one profile.
 */
struct fp_store_event {
        const char *name; /* as perf list names it: "cpu-clock", "cycles", "r01c2" */
        const char *count_type, *count_unit;
        const char *value_type, *value_unit;
        const char *period_type, *period_unit;
        int64_t period;
};

/* One symbolized frame of a stack. */
struct fp_store_frame {
        const char *function;     /* NULL or "": unknown (a location without a line) */
        const char *mapping_file; /* NULL or "": outside every mapping */
        const char *build_id;     /* hex; NULL or "": unknown */
        uint64_t mapping_start, mapping_limit, mapping_offset;
        uint64_t address;
        /* Of the function, when it has one: */
        const char *system_name; /* NULL or "": the name (else a mangled symbol, say) */
        const char *filename;    /* NULL or "": unknown (a source file: a Python frame's) */
        int64_t line;            /* 0: unknown; the line of filename it was at */
        uint64_t mapping_vaddr1; /* the ELF address mapping_start holds, plus one; 0: unknown */
};

#define FP_STORE_MAX_FRAMES 4096 /* deepest stack a batch accepts */

/*
 * An empty batch for the bucket [start_ns, start_ns + length_ns), in
 * CLOCK_REALTIME nanoseconds. NULL when out of memory.
 */
struct fp_store_batch *fp_store_batch_new(int64_t start_ns, int64_t length_ns);
/* Accepts NULL. */
void fp_store_batch_free(struct fp_store_batch *b);

/*
 * Each add function copies what it is given; identical targets (host,
 * pid, starttime), events, stacks, samples (target, event, tid, thread
 * name, stack: their count and value are summed) and drops (target,
 * reason: summed) are stored once. ret_idx gets the index later calls
 * refer to. Counts and values are capped at INT64_MAX.
 */
int fp_store_batch_add_target(struct fp_store_batch *b, const struct fp_store_target *t,
                              uint32_t *ret_idx);
int fp_store_batch_add_event(struct fp_store_batch *b, const struct fp_store_event *e,
                             uint32_t *ret_idx);
/* frames leaf first, n <= FP_STORE_MAX_FRAMES (n == 0: an empty stack). */
int fp_store_batch_add_stack(struct fp_store_batch *b, const struct fp_store_frame *frames,
                             size_t n, uint32_t *ret_idx);
/*
 * The same in two steps, for a caller that meets the same frames in many
 * stacks (a decoded profile's locations): a frame once, then stacks of
 * the indices it got.
 */
int fp_store_batch_add_frame(struct fp_store_batch *b, const struct fp_store_frame *f,
                             uint32_t *ret_idx);
int fp_store_batch_add_stack_of(struct fp_store_batch *b, const uint32_t *frame_idx, size_t n,
                                uint32_t *ret_idx);
/*
 * Declares that target was sampled with event over the bucket: the bucket
 * names the series (target, event) even when no sample came, so that its
 * drops are listed, queried and uploaded with it.
 */
int fp_store_batch_set_series(struct fp_store_batch *b, uint32_t target, uint32_t event);
/* thread_name NULL: "". */
int fp_store_batch_add_sample(struct fp_store_batch *b, uint32_t target, uint32_t event, pid_t tid,
                              const char *thread_name, uint32_t stack, uint64_t count,
                              uint64_t value);
/*
 * An off-CPU sample: the same, the thread waiting for wait (one of
 * FP_STORE_WAITS; NULL or "": not waiting, as fp_store_batch_add_sample()).
 * -EINVAL for another wait.
 */
int fp_store_batch_add_waiting(struct fp_store_batch *b, uint32_t target, uint32_t event, pid_t tid,
                               const char *thread_name, const char *wait, uint32_t stack,
                               uint64_t count, uint64_t value);
/* Why an off-CPU sample's thread waited (its "wait" label). */
#define FP_STORE_WAITS                                                                             \
        {                                                                                          \
                "sleep", "uninterruptible", "runqueue"                                             \
        }
/* Whether wait is one of FP_STORE_WAITS. */
bool fp_store_wait_valid(const char *wait);
int fp_store_batch_add_drop(struct fp_store_batch *b, uint32_t target, const char *reason,
                            uint64_t count);
/*
 * Marks the bucket as final where it is stored: it is written as already
 * uploaded, so it is never pending and its eviction is no loss. The
 * collector sets this on what it ingests.
 */
void fp_store_batch_set_uploaded(struct fp_store_batch *b, bool uploaded);
/*
 * Gives the batch an idempotency key (1 to FP_STORE_MAX_KEY bytes; NULL:
 * none): fp_store_write_batch() then stores it only when no stored bucket
 * has this key, and returns -EALREADY otherwise, in the same transaction,
 * so a retried upload is stored exactly once. A key is remembered as long
 * as its bucket is stored. The collector keys what it ingests with the
 * agent's Idempotency-Key. -EINVAL (bad length) or -ENOMEM.
 */
#define FP_STORE_MAX_KEY 128
int fp_store_batch_set_key(struct fp_store_batch *b, const char *key);

/*
 * What profiling cost the host over a bucket: the agent's CPU time, its
 * resident memory at the bucket's end and the host's CPUs, so the
 * profiler's share of the host's CPU can be shown beside its profiles.
 * All 0: unknown.
 */
struct fp_store_cost {
        uint64_t agent_cpu_ns;
        uint64_t agent_rss_bytes;
        uint32_t host_cpus;
        /*
         * The range it covers: 0 for the bucket's own (the agent's store);
         * set, for an upload's (the collector's), it is kept per host and
         * range, once however many uploads carry it.
         */
        int64_t from_ns, to_ns;
};
void fp_store_batch_set_cost(struct fp_store_batch *b, const struct fp_store_cost *cost);
/*
 * The agent's cost summed over buckets bucket_min..bucket_max (rss: the
 * largest), and the range they cover.
 */
int fp_store_bucket_cost(struct fp_store *s, int64_t bucket_min, int64_t bucket_max,
                         struct fp_store_cost *ret);

size_t fp_store_batch_n_samples(const struct fp_store_batch *b);
size_t fp_store_batch_n_stacks(const struct fp_store_batch *b);
/* Bytes the batch holds in memory, for the caller's queue limits. */
size_t fp_store_batch_bytes(const struct fp_store_batch *b);
/*
 * Samples of one target in the batch: the sum of counts of its busiest
 * event (several events of one target count the same samples). What the
 * caller counts as "store_write_failed" when the batch could not be
 * written; the store counts "evicted" and "upload_rejected" the same way.
 */
uint64_t fp_store_batch_target_count(const struct fp_store_batch *b, uint32_t target);

/* ---- opening ---- */

#define FP_STORE_SCHEMA_VERSION 12
#define FP_STORE_MIN_BYTES      ((uint64_t)256 << 10) /* smaller budgets are raised to this */
#define FP_STORE_RECOVERED      1                     /* fp_store_open(): see below */

/*
 * Opens the store at path, creating it (and nothing else: the directory
 * must exist) when missing. max_bytes is the byte budget of the file plus
 * its write-ahead log (0: none); see fp_store_write_batch() for how it is
 * kept. Runs PRAGMA quick_check, which reads the whole file.
 *
 * Returns 0, or FP_STORE_RECOVERED when the file was damaged (not a
 * database, or failing quick_check): it was renamed aside to
 * PATH.corrupt-UNIXTIME (its -wal and -shm too), an empty store was
 * created, and err holds the one line to log. On failure returns -errno
 * with one line in err (err may be NULL, errlen 0): -EPROTO for a file of
 * another application or of a schema version this build cannot migrate,
 * -EROFS / -EACCES / -ENOENT / -ENOSPC / -EIO when the file cannot be
 * created or written. *ret is left untouched on failure.
 */
int fp_store_open(const char *path, uint64_t max_bytes, struct fp_store **ret, char *err,
                  size_t errlen);
/*
 * Opens an existing store for queries only (agentctl dump --store while
 * the agent runs). Nothing is created, checked or moved aside; write
 * calls fail with -EROFS.
 */
int fp_store_open_readonly(const char *path, struct fp_store **ret, char *err, size_t errlen);
/* Accepts NULL. */
void fp_store_close(struct fp_store *s);
/*
 * Statements stop once CLOCK_MONOTONIC passes deadline_ns (0: never), the
 * call failing with -ETIMEDOUT: what bounds the cost of one read.
 */
void fp_store_set_deadline(struct fp_store *s, int64_t deadline_ns);
/* One line on the last failure ("" when none); valid until the next call. */
const char *fp_store_errmsg(const struct fp_store *s);

/* ---- writing ---- */

/*
 * Writes the batch as a new bucket in one transaction: a crash at any
 * moment loses at most this bucket. Stacks, frames, functions, mappings,
 * threads, targets and events are shared with earlier buckets. Drops
 * carried from evicted or rejected buckets join this bucket's drops.
 *
 * Keeps the byte budget (file plus log): before the write, the oldest
 * buckets are evicted so that the live pages plus the room a write takes
 * (learnt from the last writes) fit; after it, so that the live pages
 * fit. One transaction per evicted bucket: a crash in between leaves a
 * consistent store. Samples of evicted buckets that were never uploaded
 * are counted as drops with reason "evicted" and, with the evicted
 * buckets' own drop counts, carried into the next bucket written, so
 * totals never lose them (fp_store_drop_totals() shows them meanwhile).
 * Stacks and the rest that no surviving bucket refers to are deleted;
 * free pages go back to the file system (incremental vacuum) and the log
 * is checkpointed and truncated, so the file plus its log stay within
 * 1.5 x max_bytes (in practice about 1 x) as long as a bucket is smaller
 * than a quarter of the budget. A failure while evicting does not fail
 * the write (the batch is stored); eviction is retried with the next one.
 *
 * On failure nothing of the batch is stored and the store stays usable:
 * -ENOSPC (then the store also lowers its budget below its present size
 * and evicts to make room for the next write), -EIO, -EROFS, -ENOMEM,
 * -EBADMSG (damaged file: reopen). The caller counts the lost samples as
 * "store_write_failed". The batch is not changed and may be retried.
 * -EALREADY: the batch has a key (fp_store_batch_set_key()) that a stored
 * bucket already has; nothing was written, and that is no loss.
 */
int fp_store_write_batch(struct fp_store *s, const struct fp_store_batch *b);
/*
 * Records a target the agent has just started, before its first bucket
 * holds it: with t->active set, an agent killed within that bucket
 * resumes it. The row is kept as a bucket's targets are (it counts as the
 * next bucket's); the first bucket that holds the target updates it.
 */
int fp_store_note_target(struct fp_store *s, const struct fp_store_target *t);

/*
 * Writes n batches in one transaction (group commit: the commit, the
 * checkpoint and the budget's upkeep are paid once, which is what lets
 * the collector keep up with a fleet). Each becomes its own bucket, as
 * with fp_store_write_batch(). results[i] gets batch i's outcome: 0, or
 * -EALREADY for a key already stored (nothing of it written; the others
 * are), or the error that undid the whole transaction. Returns the number
 * of buckets written, or -errno (as fp_store_write_batch()) when nothing
 * was.
 */
int fp_store_write_batches(struct fp_store *s, const struct fp_store_batch *const *batches,
                           size_t n, int *results);

/*
 * Deletes frames, functions and mappings no stack refers to any more.
 * Eviction does this on its own when enough stacks went; this forces it.
 */
int fp_store_gc(struct fp_store *s);

/*
 * Retention: deletes every bucket that ended at or before before_ns
 * (CLOCK_REALTIME), one transaction each, counting the samples of those
 * not yet uploaded as "evicted" drops like the byte budget does, and
 * collects what only they used. Returns the number deleted, or -errno.
 */
int fp_store_expire(struct fp_store *s, int64_t before_ns);

/* ---- summaries ---- */

/*
 * Keeps summaries (a collector's store): each series' samples over an hour
 * and over a day of bucket starts, merged once, which profiles of whole
 * hours and days read in place of their buckets (fp_store_query_pprof()
 * gives the same profile either way). Writes and evictions mark what they
 * change; fp_store_rollup_step() summarises it again.
 */
void fp_store_set_rollups(struct fp_store *s, bool on);
/*
 * Summarises one marked hour (every series of it), else one marked day
 * whose hours are all summarised, of those that ended grace_ns before
 * now_ns, in a transaction of its own. Returns 1 when it did, 0 when
 * nothing is due, or -errno.
 */
/*
 * Off: reads take buckets only and fp_store_rollup_step() makes nothing;
 * writes still mark (with rollups on), so kept summaries stay true.
 */
void fp_store_set_rollup_reads(struct fp_store *s, bool on);
int fp_store_rollup_step(struct fp_store *s, int64_t now_ns, int64_t grace_ns);
/* Marked hours and days waiting, and summaries kept. */
int fp_store_rollup_counts(struct fp_store *s, uint64_t *ret_marked, uint64_t *ret_kept);

/* ---- queries ---- */

/*
 * What a query covers. Zero / NULL fields do not filter. A bucket matches
 * when it overlaps [since_ns, until_ns) and its id is in [bucket_min,
 * bucket_max].
 */
struct fp_store_filter {
        const char *host;
        pid_t pid;
        uint64_t starttime;    /* with pid: one process start */
        const char *process;   /* comm */
        const char *service;   /* NULL: any */
        const char *container; /* NULL: any */
        /*
         * A word of the series' config text (space-separated): "KEY=VALUE",
         * VALUE URL-escaped, a label another protocol's client gave the
         * series (NULL: any).
         */
        const char *config_word;
        const char *event; /* NULL: the event stored first; FP_STORE_WALL_EVENT: below */
        /*
         * Samples of threads of this name only (NULL: all). Profiles only:
         * listings, drops and time lines sum whole series.
         */
        const char *thread_name;
        int64_t since_ns, until_ns;
        int64_t bucket_min, bucket_max;
        /* Buckets that start at or after this only (0: any); SQLite's profiles only. */
        int64_t start_from_ns;
        /* Listings: the series only, their totals (buckets, count, value) left 0 where that
         * is cheaper (ClickHouse). */
        bool no_totals;
        /* Time lines: a point per bucket and series, which says its process (one read where
         * a caller would make one per process). */
        bool by_series;
        /*
         * Which tier's series: FP_STORE_TIER_ANY, _HOST (the host tier's
         * series of many processes, stored with pid 0) or _TARGETS (one
         * process each).
         */
        int tier;
};

/*
 * The wall profile, an event no one samples: of each target that profiled
 * its off-CPU time ("off-cpu", ns), that and its CPU time (its clock event,
 * cpu-clock or task-clock, ns) together, so that each thread's time on and
 * off the CPU adds up to its lifetime. Sample types samples/count and
 * wall/nanoseconds; the off-CPU samples keep their "wait" label. Profiles
 * only (fp_store_query_pprof()).
 */
#define FP_STORE_WALL_EVENT   "wall"
#define FP_STORE_OFFCPU_EVENT "off-cpu"
/* Whether an event of this name and value unit is time on the CPU in ns (a wall profile's part). */
bool fp_store_event_is_cpu_time(const char *name, const char *value_unit);
#define FP_STORE_TIER_ANY     0
#define FP_STORE_TIER_HOST    1
#define FP_STORE_TIER_TARGETS 2

/*
 * Adds every sample that matches f (one event: f->event, or the event
 * that was stored first among the matches) to p. Sample types and period
 * come from the event (p must be empty or have the same two sample types:
 * else -EINVAL). Samples carry the labels thread (tid), thread_name, pid,
 * process (comm), service and container (when the target has one), and host when the
 * matches span several hosts. The time
 * and duration of p widen to cover the matching buckets; one comment per
 * drop reason ("dropped <reason>: <count>") sums the drops of the
 * matching buckets and targets (plus, when the range is open at the end,
 * the carried drops not yet in any bucket). Returns the number of
 * distinct samples added: 0 when nothing matched (p then has no sample
 * types unless it had them).
 */
int fp_store_query_pprof(struct fp_store *s, const struct fp_store_filter *f, struct fp_pprof *p);

/* Drop counts summed per target and reason. Strings are valid during the callback. */
struct fp_store_drop {
        const char *host;
        pid_t pid;
        uint64_t starttime;
        const char *comm;
        const char *reason;
        uint64_t count;
};
/* A callback's negative return stops the walk and is returned. */
typedef int (*fp_store_drop_fn)(void *userdata, const struct fp_store_drop *d);
/*
 * Calls fn for each (target, reason) with drops in the buckets matching f
 * (f->event is ignored; drops belong to targets). Carried drops (not yet
 * in a bucket) are included when f->until_ns and f->bucket_max are 0.
 * Returns the number of calls.
 */
int fp_store_drop_totals(struct fp_store *s, const struct fp_store_filter *f, fp_store_drop_fn fn,
                         void *userdata);

/* What is stored for one target and event: the collector's /api/v1/series. */
struct fp_store_series {
        const char *host;
        pid_t pid;
        uint64_t starttime;
        const char *comm, *exe, *config;
        bool active;
        const char *event;
        /* The event's sample types (fp_store_event's): count, value, period. */
        const char *count_type, *count_unit, *value_type, *value_unit, *period_type, *period_unit;
        const char *service;       /* "": none */
        const char *container;     /* "": none */
        int64_t first_ns, last_ns; /* start of its first bucket, end of its last */
        uint64_t buckets;
        uint64_t count; /* summed counts and values */
        uint64_t value;
};
typedef int (*fp_store_series_fn)(void *userdata, const struct fp_store_series *se);
/* Calls fn for each (target, event) with samples in buckets matching f. Returns the number of
 * calls. */
int fp_store_list_series(struct fp_store *s, const struct fp_store_filter *f, fp_store_series_fn fn,
                         void *userdata);

/* A stored target, with the time range of the buckets that named it. */
/* One bucket's sums for one event: the time line of a selection. */
struct fp_store_point {
        int64_t start_ns, length_ns;
        const char *event;
        uint64_t count, value;
        /* With fp_store_filter.by_series, the process of the series; else NULL, 0. */
        const char *host;
        pid_t pid;
        uint64_t starttime;
};
typedef int (*fp_store_point_fn)(void *userdata, const struct fp_store_point *pt);
/*
 * Calls fn for each (bucket, event) with samples matching f (f->by_series:
 * each (bucket, event, series)), in time order (f->event: that event only).
 * Returns the number of calls.
 */
int fp_store_timeline(struct fp_store *s, const struct fp_store_filter *f, fp_store_point_fn fn,
                      void *userdata);

struct fp_store_target_info {
        const char *host;
        pid_t pid;
        uint64_t starttime;
        const char *comm, *exe, *config;
        bool active;
        int64_t first_ns, last_ns;
        const char *service; /* "": none */
        int64_t guard;       /* fp_store_target's guard, -1: not stored */
};
typedef int (*fp_store_target_fn)(void *userdata, const struct fp_store_target_info *t);
/*
 * Calls fn for every stored target of host (NULL: all hosts), oldest
 * first. A restarted agent resumes those that are active and whose pid
 * still has the same starttime. Returns the number of calls.
 */
int fp_store_list_targets(struct fp_store *s, const char *host, fp_store_target_fn fn,
                          void *userdata);

/* ---- what profiling costs ---- */

/* The profiler's cost on one host over the buckets a filter selects. */
struct fp_store_host_cost {
        const char *host;
        uint64_t agent_cpu_ns;    /* summed over distinct bucket time ranges */
        uint64_t agent_rss_bytes; /* the largest */
        uint32_t host_cpus;
        int64_t covered_ns; /* the time those ranges cover */
};
typedef int (*fp_store_host_cost_fn)(void *userdata, const struct fp_store_host_cost *c);
/*
 * Calls fn per host of the targets f selects, with the costs it reported
 * for ranges that overlap f's time range. Returns the number of calls.
 */
int fp_store_host_costs(struct fp_store *s, const struct fp_store_filter *f,
                        fp_store_host_cost_fn fn, void *userdata);

/* ---- the agent's rules ---- */

/* A rule the agent keeps across restarts: its id, owner's uid and text (agent/rule.h). */
struct fp_store_rule {
        int64_t id;
        uint32_t owner;
        const char *spec;
};
typedef int (*fp_store_rule_fn)(void *userdata, const struct fp_store_rule *r);
/* Keeps rule id (replacing one of the same id), in a transaction of its own. 0 or -errno. */
int fp_store_rule_put(struct fp_store *s, int64_t id, uint32_t owner, const char *spec);
/* Forgets rule id (0 also when there was none). */
int fp_store_rule_delete(struct fp_store *s, int64_t id);
/* Calls fn for every kept rule, by id. Returns the number of calls, or -errno. */
int fp_store_list_rules(struct fp_store *s, fp_store_rule_fn fn, void *userdata);

/* ---- uploads ---- */

struct fp_store_bucket {
        int64_t id; /* increasing in the order buckets were written */
        int64_t start_ns, length_ns;
        int64_t written_ns;
};
/*
 * Fills ret with up to max buckets not yet uploaded, oldest first, and
 * returns how many. Query one with fp_store_filter.bucket_min = bucket_max = id.
 */
int fp_store_pending_uploads(struct fp_store *s, struct fp_store_bucket *ret, size_t max);
/* Number of buckets not yet uploaded. */
int fp_store_count_pending(struct fp_store *s);
/*
 * Marks buckets uploaded (the collector answered 2xx), in one transaction.
 * Ids that are gone (evicted meanwhile) or already marked are skipped.
 * Returns the number marked.
 */
int fp_store_mark_uploaded(struct fp_store *s, const int64_t *ids, size_t n);
/*
 * Marks buckets the collector refused for good as done: their samples are
 * counted as "upload_rejected" drops and, with their drop counts, carried
 * into the next bucket written, so the next upload reports them.
 * Returns the number marked.
 */
int fp_store_mark_rejected(struct fp_store *s, const int64_t *ids, size_t n);

/*
 * ---- the outbox: uploads built and waiting for the collector ----
 *
 * The agent's uploader builds each round's uploads (one per series, over
 * the round's buckets) once, and moves them here with their buckets marked
 * uploaded, in one transaction. From then on an upload is bytes and an
 * idempotency key that never change: a retry, after a backoff or after a
 * restart, sends exactly what the first try sent, so the collector stores
 * it once whatever happened to the answer. An upload leaves the outbox
 * delivered, refused for good (its samples counted as "upload_rejected"),
 * split into smaller ones, or evicted for space or age (its samples
 * counted as "evicted").
 */
struct fp_store_upload {
        int64_t id; /* the store's; 0 before it is added */
        char key[40];
        const char *host, *event;
        int32_t pid;
        uint64_t starttime;
        int64_t bucket_min, bucket_max; /* the buckets it was built from */
        int64_t from_ns, to_ns;
        uint64_t samples;
        bool counter; /* a counter of a group: its samples are its leader's, never charged */
        int64_t created_ns;
        const char *query; /* the upload's query string (the contract's metadata) */
        const uint8_t *body;
        size_t len;
};
/*
 * Adds uploads and marks the buckets they were built from uploaded, in one
 * transaction (either both happen or neither). n may be 0: buckets with
 * nothing to send are just marked. Returns the number of buckets marked.
 */
int fp_store_outbox_add(struct fp_store *s, const struct fp_store_upload *uploads, size_t n,
                        const int64_t *bucket_ids, size_t n_ids);
typedef int (*fp_store_upload_fn)(void *userdata, const struct fp_store_upload *u);
/* Calls fn for up to max uploads, oldest first (the pointers live for the call). */
int fp_store_outbox_list(struct fp_store *s, size_t max, fp_store_upload_fn fn, void *userdata);
enum fp_store_upload_end {
        FP_UPLOAD_DELIVERED, /* the collector has it */
        FP_UPLOAD_REFUSED,   /* refused for good: samples counted as "upload_rejected" */
        FP_UPLOAD_REPLACED,  /* by the uploads given (a split); nothing counted */
};
/*
 * Takes upload id out of the outbox as end says, adding the replacements
 * in the same transaction. An id already gone is no error. Returns 0 or -errno.
 */
int fp_store_outbox_end(struct fp_store *s, int64_t id, enum fp_store_upload_end end,
                        const struct fp_store_upload *replacements, size_t n);

/*
 * Checks the references of every stored sample: *ret_missing gets the
 * samples naming a thread or stack that is gone (damage), *ret_unused the
 * threads and stacks no sample names (garbage eviction should have
 * collected). For tests and repair tools: it reads the whole store.
 */
int fp_store_check_refs(struct fp_store *s, uint64_t *ret_missing, uint64_t *ret_unused);

/* ---- state ---- */

struct fp_store_stats {
        uint64_t max_bytes;  /* the budget in force (lowered after ENOSPC), 0: none */
        uint64_t file_bytes; /* the database file */
        uint64_t wal_bytes;  /* its write-ahead log */
        uint64_t live_bytes; /* pages in use */
        uint64_t buckets;
        uint64_t pending_buckets; /* not delivered: not uploaded yet, or in the outbox */
        uint64_t outbox_uploads, outbox_bytes; /* built, waiting for the collector */
        int64_t oldest_waiting_ns;             /* start of the oldest data not delivered, 0: none */
        uint64_t targets, threads, events, stacks, frames, functions, mappings;
        int64_t first_ns, last_ns; /* range of the stored buckets, 0 when empty */
        uint64_t evicted_buckets;  /* by this handle, since it was opened */
        /* Summaries (rollup.c): kept, and hours and days marked to be made again. */
        uint64_t summaries, summaries_marked;
};
int fp_store_stats(struct fp_store *s, struct fp_store_stats *ret);
