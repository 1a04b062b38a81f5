/* SPDX-License-Identifier: MIT */
/*
 * The host tier: every process on the host, sampled by one event per
 * online CPU (pid -1) at a low rate, beside the per-thread tier's chosen
 * targets.
 *
 * Each CPU has two events, as a target's thread has: a sampler (the
 * configured clock, with callchain, user registers, a stack copy and the
 * task's cgroup) and a side-band event whose FORK, EXIT, COMM (exec),
 * MMAP2 and CGROUP records teach the tier, in time order, which processes
 * exist, what they are called, what they run and what they map. A
 * process is known from those records from its first instruction (its
 * first sample is unwound and symbolized, and it is still named after it
 * exited); one that was running before the tier started is read from
 * /proc the first time a sample names it.
 *
 * A process is kept as generations: an exec ends one and starts the next
 * (new name, new mappings), an exit ends the last, and a sample belongs to
 * the generation its time falls in. A generation's samples are aggregated
 * per bucket (its own aggregator, its own mappings); an ended generation
 * is forgotten once a bucket closed more than a second after its end, so
 * memory follows the processes alive, not those that lived.
 *
 * Samples of idle CPUs (pid 0) are counted, not kept. A sample of a
 * process that a per-thread target covers is dropped and counted
 * (covered_by_target), so no thread is counted by both tiers. What cannot
 * be kept is counted by reason (fp_host_open_drops()).
 *
 * All of it runs on the agent's event-loop thread.
 */
#pragma once

#include "jvmnames.h"
#include "pyframes.h"
#include "rtframe.h"
#include "samplestats.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct fp_symcache;
struct fp_agg;
struct fp_maps;
struct fp_host;
struct fp_host_proc;

/* The rate the host tier samples at unless told (Parca's and the OpenTelemetry profiler's 19-20).
 */
#define FP_HOST_DEFAULT_FREQ 19
#define FP_HOST_MAX_FREQ     1000

/* Generations the tier keeps at most; a sample of one more is counted as process_table_full. */
#define FP_HOST_MAX_PROCS 8192
/* Distinct stacks one generation keeps in one bucket (then "[stack table full]"). */
#define FP_HOST_MAX_STACKS 4096

/* The host tier's off-CPU period (T) unless told: coarse, as its CPU rate is (offcpu.h). */
#define FP_HOST_OFF_CPU_PERIOD_DEFAULT 1000000000ULL

struct fp_host_config {
        uint64_t freq;           /* samples per second per CPU (1 to 1000) */
        bool kernel_frames;      /* kernel callchains too */
        unsigned unwind;         /* enum fp_unwind_mode */
        uint64_t off_cpu_period; /* ns; 0: no off-CPU time (the core feeds the records) */
        bool no_javascript;      /* no-javascript: V8's frames stay native (runtimes/v8/v8.h) */
        bool no_php, no_ruby, no_perl; /* no-php, ...: that interpreter's frames stay native */
};

/* A JVM of the tier, as status shows it (jvmnames.h). */
struct fp_host_jvm {
        pid_t pid;
        char comm[16];
        struct fp_jvm_names_status st;
};
#define FP_HOST_STATUS_JVMS 16 /* JVMs status lists (the first found) */
/*
 * A JVM of the tier is asked for its perf map as a target is, but one
 * request of the tier at a time, and the wait after each answer doubles
 * from FP_HOST_JVM_EVERY_NS to FP_HOST_JVM_EVERY_MAX_NS: the tier is the
 * cheap view of every process, and a JVM compiles most while it warms up.
 */
#define FP_HOST_JVM_EVERY_NS     2000000000ULL
#define FP_HOST_JVM_EVERY_MAX_NS 60000000000ULL

struct fp_host_stats {
        struct fp_target_stats st; /* samples kept, losses and unwinding, as a target's */
        uint64_t idle;             /* samples of an idle CPU: not kept */
        uint64_t covered;         /* samples of a per-thread target's process (covered_by_target) */
        uint64_t unknown;         /* samples of a process neither the ring nor /proc knew */
        uint64_t table_full;      /* samples of a process past FP_HOST_MAX_PROCS */
        uint64_t sideband_lost;   /* side-band records the kernel dropped */
        uint64_t procs_from_ring; /* generations learned from FORK and exec records */
        uint64_t procs_from_proc; /* processes read from /proc on their first sample */
        uint64_t procs_forgotten; /* ended generations forgotten */
        uint64_t jit_maps_refused; /* JIT names not looked up: too many perf maps held */
        uint64_t off_covered;      /* off-CPU block parts of a per-thread target's process */
        uint64_t off_unknown;      /* off-CPU block parts of a process nobody knew */
        uint64_t python_records_unclaimed; /* Python stack records of no known generation */
        bool python_on;                    /* Python stacks are read at its samples */
        uint64_t python_attach_failed;     /* CPUs' events the program could not run at */
        /* By interpreter (FP_PYSTACK_PYTHON, _PHP, _RUBY: fp_pyframes_kinds[]): */
        unsigned interp_procs[FP_PYSTACK_KINDS];           /* generations known to run one now */
        struct fp_pyframes_stats interp[FP_PYSTACK_KINDS]; /* their samples, every generation's */
        unsigned javascript_procs;                         /* live processes recognised to run V8 */
        struct fp_rt_stats javascript;                     /* their JavaScript frames, summed */
        unsigned procs;                                    /* generations kept now */
        unsigned cpus;                                     /* CPUs with their events open */
        unsigned cgroups;                                  /* cgroup paths known */
        unsigned jvms; /* live generations that map libjvm.so and were looked at */
        struct fp_host_jvm jvm[FP_HOST_STATUS_JVMS];
        unsigned n_jvm;
};

/*
 * Whether a per-thread target profiled process pid at time_ns
 * (CLOCK_MONOTONIC, a record's time): its samples are then the target's.
 * A record read after the target saw its process go is still the
 * target's if it was taken before then.
 */
typedef bool (*fp_host_covered_fn)(void *userdata, pid_t pid, uint64_t time_ns);

/*
 * Opens the events of every online CPU and starts reading them on base.
 * On failure returns -errno with a one-line reason in err: -EACCES or
 * -EPERM without the right to sample every CPU (CAP_PERFMON or
 * CAP_SYS_ADMIN, or perf_event_paranoid below 1), -EINVAL for a
 * configuration the kernel refuses.
 */
int fp_host_start(struct event_base *base, struct fp_symcache *cache,
                  const struct fp_host_config *cfg, fp_host_covered_fn covered, void *userdata,
                  struct fp_host **ret, char *err, size_t err_len);
/* Closes every event and forgets everything (the open bucket too). NULL is fine. */
void fp_host_free(struct fp_host *h);
const struct fp_host_config *fp_host_config(const struct fp_host *h);
/* Records that the tier's off-CPU time is now taken at period ns (0: not): the core feeds it. */
void fp_host_set_off_cpu_period(struct fp_host *h, uint64_t period);
void fp_host_stats(const struct fp_host *h, struct fp_host_stats *ret);
/*
 * Python stacks (pyframes.h): the program s runs at each of the tier's
 * samples from now on (NULL: none), reading the processes found to run a
 * CPython; the records the core's program hands out for a process no
 * target has come in through fp_host_pystack_record().
 */
void fp_host_set_pystack(struct fp_host *h, struct fp_pystack *s);
bool fp_host_uses_pystack(const struct fp_host *h);
void fp_host_pystack_record(struct fp_host *h, const struct fp_pystack_record *r);
/* A target stopped profiling pid (and unregistered it): its generation registers again. */
void fp_host_python_recheck(struct fp_host *h, pid_t pid);
/* The names of its Python frames, or NULL (none read). */
const struct fp_pyframes *fp_host_proc_python(const struct fp_host_proc *p);
/* Reads every ring now (side-band first, in time order), so an export holds everything. */
void fp_host_drain(struct fp_host *h);
/* Re-reads the online CPUs, opening the events of new ones and closing those of gone ones. */
void fp_host_check_cpus(struct fp_host *h);

/*
 * A record of the off-CPU profiler's host tier (offcpu.h): its stack into
 * the generation its time falls in, by why it waited, with py's Python
 * frames (read with it; NULL: none). The kernel's counts
 * (fp_offcpu_host_counts()) go to fp_host_offcpu_counts().
 */
struct fp_offcpu_record;
struct fp_offcpu_target;
struct fp_pystack_record;
void fp_host_offcpu_record(struct fp_host *h, const struct fp_offcpu_record *r,
                           const struct fp_pystack_record *py);
void fp_host_offcpu_counts(struct fp_host *h, const struct fp_offcpu_target *k);

/* ---- the open bucket, for the export (keep/export.c) ---- */

/* Generations kept now; i-th (0 <= i < n), NULL past the end. */
size_t fp_host_n_procs(const struct fp_host *h);
struct fp_host_proc *fp_host_proc_at(struct fp_host *h, size_t i);
/* Its samples of the open bucket, NULL when none. */
const struct fp_agg *fp_host_proc_bucket(const struct fp_host_proc *p);
/* Its off-CPU time of the open bucket that waited for reason (enum fp_offcpu_reason), or NULL. */
const struct fp_agg *fp_host_proc_offcpu(const struct fp_host_proc *p, unsigned reason);
struct fp_maps *fp_host_proc_maps(struct fp_host_proc *p);
pid_t fp_host_proc_pid(const struct fp_host_proc *p);
const char *fp_host_proc_comm(const struct fp_host_proc *p);
const char *fp_host_proc_exe(const struct fp_host_proc *p); /* "" unknown */
/* Its labels, from the cgroup of its latest sample: service, unit, container, cgroup path. */
const char *fp_host_proc_service(struct fp_host_proc *p);
const char *fp_host_proc_unit(struct fp_host_proc *p);
const char *fp_host_proc_container(struct fp_host_proc *p);
const char *fp_host_proc_cgroup(struct fp_host_proc *p);
/* Thread tid's name: its COMM, else the process's name. */
const char *fp_host_proc_thread_name(const struct fp_host_proc *p, pid_t tid);
/* The runtime's name (its /tmp/perf-PID.map, perfmap.h) of JIT code at addr, or NULL. */
const char *fp_host_proc_jit_name(struct fp_host_proc *p, uint64_t addr);
/* The name of an interpreted Java method (FP_FRAME_JAVA's Method*), or NULL (proc: p). */
const char *fp_host_proc_java_method(void *proc, uint64_t method);
/* What the process's JVM's code cache says of pc (jvmnames.h's fp_jvm_names_code()). */
struct fp_hotspot_code;
int fp_host_proc_java_code(void *proc, uint64_t pc, bool leaf, struct fp_hotspot_code *ret);

/* A count of samples lost for one reason (reason: a static string or the tier's own). */
struct fp_host_drop {
        const char *reason;
        uint64_t count;
};
#define FP_HOST_MAX_DROPS 24 /* the reasons of fp_host_open_drops() and 8 carried */
/* The drops since the last bucket and those charged for the next; how many of ret were filled. */
size_t fp_host_open_drops(const struct fp_host *h, struct fp_host_drop *ret, size_t max);
/* Counts samples lost elsewhere (queue_full, store_write_failed) into the next bucket. */
void fp_host_charge_drop(struct fp_host *h, const char *reason, uint64_t count);
/*
 * Starts the next bucket once the open one is exported: every generation
 * gets an empty aggregator, generations that ended more than a second ago
 * are forgotten, the drops start from zero. 0 or -ENOMEM (the bucket then
 * stays open).
 */
int fp_host_next_bucket(struct fp_host *h);
