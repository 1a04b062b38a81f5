/* SPDX-License-Identifier: MIT */
/*
 * perf_event_open for one thread: event names, opening, the mmap ring and
 * its records.
 *
 * Each profiled thread gets two events, each with its own ring:
 *
 *   - the sampling event (cpu-clock by default) writes PERF_RECORD_SAMPLE
 *     (ip, pid/tid, time, period, callchain), plus LOST and THROTTLE
 *     records. Its ring wakes the agent only when half full, so a busy
 *     thread costs a few wakeups a second, not one per sample.
 *   - a side-band dummy event writes FORK, EXIT, COMM and MMAP2 records
 *     with a one-byte watermark, so the agent hears of a new thread, a
 *     renamed thread or a dlopen'd library at once.
 *
 * Timestamps use CLOCK_MONOTONIC (use_clockid) so they compare with the
 * agent's own clock. This module only opens, reads and parses; what the
 * records mean for a target is target.c's business.
 */
#pragma once

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_PERF_EVENT_NAME_MAX 32
#define FP_PERF_MAX_FREQ       100000
/* A group: the sampling leader and up to seven counters read on its every sample. */
#define FP_PERF_MAX_EVENTS  8
#define FP_PERF_MAX_MEMBERS (FP_PERF_MAX_EVENTS - 1)
/* An event list as text: every name plus its comma. */
#define FP_PERF_EVENT_LIST_MAX (FP_PERF_MAX_EVENTS * FP_PERF_EVENT_NAME_MAX)

/* A named event: what perf list calls it and what perf_event_attr needs. */
struct fp_perf_event {
        char name[FP_PERF_EVENT_NAME_MAX];
        uint32_t type;   /* PERF_TYPE_* */
        uint64_t config; /* PERF_COUNT_* or a raw code */
};

/*
 * How to sample one target: the same for each of its threads. event
 * leads the group and samples; the members are counted and read with
 * every sample (PERF_SAMPLE_READ), so each sample carries how much each
 * member counted since the thread's previous sample.
 */
struct fp_perf_config {
        struct fp_perf_event event;
        struct fp_perf_event members[FP_PERF_MAX_MEMBERS];
        unsigned n_members;
        /*
         * A hardware or raw leader samples with the best precise_ip (skid
         * control) the machine accepts: the first open probes 3 down to 0
         * and records what it got here, so later threads use the same.
         */
        bool precise_probed;
        unsigned precise_ip;
        uint64_t period;     /* events (ns for the clocks) between samples, when freq == 0 */
        uint64_t freq;       /* samples per second, kernel-adjusted period, when nonzero */
        bool kernel_frames;  /* --kernel: kernel callchains too */
        bool count_kernel;   /* samples taken in the kernel are kept (exclude_kernel=0) */
        unsigned ring_pages; /* data pages of the sampling ring, a power of two */
        /* A thread's ring wakes the agent at this many bytes (0: at half full). */
        uint32_t ring_wake_bytes;
        bool best_effort; /* at start: leave out members the machine lacks, do not fail */
        /*
         * How user stacks are unwound (unwind.h): FP_UNWIND_FP takes the
         * kernel's frame-pointer callchain (plus the leaf fix-up); dwarf and
         * auto also ask for the user registers and a copy of the top
         * stack_bytes of the user stack with every sample.
         */
        unsigned unwind;      /* enum fp_unwind_mode */
        uint32_t stack_bytes; /* PERF_SAMPLE_STACK_USER size, a multiple of 8 */
        /*
         * The kernel does not walk the user frame-pointer chain with each
         * sample (exclude_callchain_user): dwarf and auto unwind the copy
         * instead (set by fp_targetconf_finish()).
         */
        bool no_user_chain;
        /*
         * The agent's --max-threads: threads sampled at once at most (each
         * costs two events and locked ring memory), 0: no limit. Not part
         * of the configuration text: the running agent's setting applies.
         */
        unsigned max_threads;
        /*
         * The agent's --first-period full: a new thread's first sample
         * comes after a whole period, as perf's does (a diagnostic: short
         * threads are then under-counted). Not in the configuration text.
         */
        bool first_period_full;
        /*
         * --off-cpu: the target's off-CPU time is profiled too (offcpu.h),
         * a block part of d ns kept with probability min(1, d / this); 0: not.
         */
        uint64_t off_cpu_period;
        /*
         * --no-python, --no-php, --no-ruby, --no-perl: that interpreter's
         * samples keep native frames only (pyframes.h); with all four the
         * interpreters' BPF program is not attached.
         */
        bool no_python, no_php, no_ruby, no_perl;
        /* --no-javascript: a V8's samples keep native frames only (runtimes/v8/v8.h). */
        bool no_javascript;
};

/*
 * The interpreters cfg reads no stacks of, a bit each by their kind in
 * pystack.h (1 << FP_PYSTACK_PYTHON, _PHP, _RUBY, _PERL): struct
 * fp_pyproc's off. FP_PERF_INTERPRETERS: all of them.
 */
#define FP_PERF_INTERPRETERS 0xfu
static inline unsigned fp_perf_interpreters_off(const struct fp_perf_config *cfg)
{
        return (cfg->no_python ? 1u : 0) | (cfg->no_php ? 2u : 0) | (cfg->no_ruby ? 4u : 0) |
               (cfg->no_perl ? 8u : 0);
}

#define FP_PERF_OFF_CPU_PERIOD_DEFAULT 10000000ULL /* 10 ms: --off-cpu's T */

/* Sets the sampling event's period (PERF_EVENT_IOC_PERIOD). 0 or -errno. */
struct fp_perf_ring;
int fp_perf_set_period(struct fp_perf_ring *r, uint64_t period);
/*
 * Jitter, against lock step with periodic work (threads.c's jitter_period()
 * says why these steps): the next period of a sampler whose configured
 * period is period, 2.5-5% (random, from random's bits) shorter when debt
 * (its samples' periods less as many configured ones) is positive, longer
 * when negative, either side at 0. A sampler's period changes at most
 * every FP_PERF_JITTER_MIN_SAMPLES samples after its first change.
 */
#define FP_PERF_JITTER_MIN_SAMPLES 32
/*
 * The periods' randomness (first periods, jitter): xorshift64* on *state,
 * seeded from the clock and seed when 0; decorrelation is all they need.
 */
uint64_t fp_perf_random(uint64_t *state, uint64_t seed);
uint64_t fp_perf_jitter_period(uint64_t period, int64_t debt, uint64_t random);

/* The default size of the user-stack copy; see unwind.h for how it was chosen. */
#define FP_PERF_STACK_BYTES 16384

/*
 * One group read (PERF_FORMAT_GROUP | ID | TOTAL_TIME_ENABLED |
 * TOTAL_TIME_RUNNING): the group's times and each event's count since it
 * was opened, leader first, in the order of the config.
 */
struct fp_perf_counts {
        uint64_t time_enabled, time_running;
        uint64_t value[FP_PERF_MAX_EVENTS];
};

/*
 * An mmap'd ring of one event. The sampling event's ring also owns the
 * group's member fds, their kernel ids (to order the values of a group
 * read) and the previous sample's read, from which each sample's deltas
 * are computed: samples of one thread are read in order from its ring.
 */
struct fp_perf_ring {
        int fd;
        void *base; /* the metadata page followed by the data pages */
        size_t data_size;
        uint8_t *scratch; /* a record that wraps the end is copied here */
        unsigned n_members;
        uint32_t stack_bytes; /* samples carry a user-stack copy of this size */
        bool cgroup;          /* samples carry PERF_SAMPLE_CGROUP (per-CPU events) */
        /* Not 0: samples carry no period; each stands for this many events (see perf.c). */
        uint64_t fixed_period;
        int member_fd[FP_PERF_MAX_MEMBERS];
        uint64_t id[FP_PERF_MAX_EVENTS]; /* leader first */
        struct fp_perf_counts last;
};

/* A parsed PERF_RECORD_SAMPLE. Pointers refer into the ring or scratch. */
struct fp_perf_sample {
        uint16_t misc; /* PERF_RECORD_MISC_* cpumode of ip */
        uint64_t ip;
        uint32_t pid, tid;
        uint64_t time;
        uint64_t period;
        uint64_t nr; /* callchain entries, PERF_CONTEXT_* markers included */
        const uint64_t *ips;
        /*
         * With group members: what each counted since the thread's
         * previous sample, scaled up by time_enabled / time_running of
         * that interval when the kernel multiplexed the group, and the
         * interval's times themselves.
         */
        unsigned n_counters;
        uint64_t counters[FP_PERF_MAX_MEMBERS];
        uint64_t d_enabled, d_running;
        /*
         * With a stack copy configured: the user registers at the sample
         * (has_regs false when the sample came from a kernel thread or the
         * kernel could not give them) and the copied bytes, stack[0] being
         * the byte at regs sp.
         */
        bool has_regs;
        uint64_t user_ip, user_sp, user_bp;
        const uint8_t *stack;
        uint64_t stack_size; /* bytes valid at stack (the kernel's dyn_size) */
        uint64_t cgroup;     /* the task's cgroup v2 id (per-CPU events), 0 unknown */
};

/* Side-band and accounting records, parsed. */
struct fp_perf_record {
        uint32_t type; /* PERF_RECORD_* */
        uint16_t misc;
        /*
         * CLOCK_MONOTONIC of the record (the sample_id trailer every record
         * of these events carries), 0 when it has none.
         */
        uint64_t time;
        union {
                struct {
                        uint32_t pid, ppid, tid, ptid;
                        uint64_t time;
                } task; /* FORK, EXIT */
                struct {
                        uint32_t pid, tid;
                        const char *comm;
                } comm;
                struct {
                        uint32_t pid, tid;
                        uint64_t addr, len, pgoff;
                        uint32_t maj, min; /* the file's device; 0 0 when unknown (MMAP) */
                        uint64_t ino;      /* and inode; 0 when unknown */
                        uint32_t prot, flags;
                        const char *filename;
                } mmap;
                struct {
                        uint64_t lost;
                } lost; /* LOST, LOST_SAMPLES */
                struct {
                        uint64_t id;
                        const char *path; /* below the cgroup v2 root, "/" first */
                } cgroup;                 /* CGROUP */
                struct {
                        uint64_t time;
                } throttle; /* THROTTLE, UNTHROTTLE */
        };
};

/*
 * Parses an event name as perf list spells it (cpu-clock, task-clock,
 * cycles, instructions, cache-misses, page-faults, context-switches, ...,
 * rNNNN for raw codes). -EINVAL for a name it does not know.
 */
int fp_perf_event_parse(const char *name, struct fp_perf_event *ret);
/* Whether the event counts time in nanoseconds (cpu-clock, task-clock). */
bool fp_perf_event_is_clock(const struct fp_perf_event *e);
/* The unit of the event's counts: "nanoseconds" for the clocks, else "count". */
const char *fp_perf_event_unit(const struct fp_perf_event *e);
/* Whether the event needs a hardware PMU (PERF_TYPE_HARDWARE, PERF_TYPE_RAW, cache events). */
bool fp_perf_event_is_hardware(const struct fp_perf_event *e);

/*
 * Parses a comma-separated list ("cpu-clock,page-faults,context-switches")
 * into cfg's leader (the first) and members, leaving cfg's other fields
 * alone. On failure cfg is untouched, bad (bad_len bytes, may be NULL)
 * gets the offending name, and the result is -EINVAL (an unknown or empty
 * name), -EEXIST (an event named twice, aliases included) or -E2BIG (more
 * than FP_PERF_MAX_EVENTS).
 */
int fp_perf_event_list_parse(const char *list, struct fp_perf_config *cfg, char *bad,
                             size_t bad_len);
/* "cpu-clock,page-faults": the leader and members of cfg, as the parser reads them. */
void fp_perf_event_list_string(const struct fp_perf_config *cfg, char *buf, size_t len);

/*
 * Parses a group read at u (n_words 64-bit words) into ret, putting each
 * value where its id stands in ids (n_ids of them: the leader's, then the
 * members'). Returns the words it took, or -EBADMSG when the read is cut
 * short, holds more events than n_ids, or an id that is not in ids.
 */
int fp_perf_group_read_parse(const uint64_t *u, size_t n_words, const uint64_t *ids, unsigned n_ids,
                             struct fp_perf_counts *ret);
/*
 * What each of the n_members members (values 1..n_members) counted from
 * prev to now, into ret[0..n_members-1]. When the group did not run all
 * the time it was enabled in that interval (the kernel multiplexed it with
 * other groups), each delta is scaled by enabled / running, perf's
 * estimate of the full count; a group that did not run at all counts 0.
 * A value or time that went backwards counts 0.
 */
void fp_perf_counts_delta(const struct fp_perf_counts *prev, const struct fp_perf_counts *now,
                          unsigned n_members, uint64_t *ret);

/*
 * What a thread's ring holds: a second and a quarter of samples, at most
 * 1 MiB (at 1 kHz and more the bound holds). At low rates the wake-up, not
 * the sample, is what the agent spends, and the target's tick drains every
 * ring each second, so a ring that holds a second or more wakes the agent
 * only each time 7/8 of its size has been written (the kernel counts bytes
 * written since its last wake-up, not bytes unread): less than once a
 * second at the rate it was sized for. A ring that holds less wakes it at
 * each half written.
 */
#define FP_PERF_THREAD_RING_MS 1250

/*
 * The ring size (data pages, a power of two) that holds at least
 * FP_PERF_THREAD_RING_MS of samples at freq samples/s with deep
 * callchains, bounded to [8, 256].
 */
unsigned fp_perf_ring_pages_for(uint64_t freq);
/* The same for ms milliseconds of samples of about bytes each (a stack copy makes them larger). */
unsigned fp_perf_ring_pages_for_bytes(uint64_t freq, uint64_t bytes, unsigned ms);

/*
 * Opens the sampling event of cfg on thread tid, with its members in one
 * group, and maps its ring. On failure returns -errno: -ESRCH when the
 * thread is gone, -ENOENT or -EOPNOTSUPP when the machine lacks an event,
 * -EACCES/-EPERM when not allowed. When cfg->count_kernel is set and the
 * kernel refuses it, the events are retried with kernel samples excluded
 * and *ret_kernel_excluded set. A hardware leader's first open probes
 * precise_ip and records it in cfg (see struct fp_perf_config). ret is
 * untouched on failure.
 */
#define FP_PERF_OPEN_DISABLED 1u /* opened disabled: counts and samples after fp_perf_enable() */
int fp_perf_open_sampler(struct fp_perf_config *cfg, pid_t tid, unsigned flags,
                         struct fp_perf_ring *ret, bool *ret_kernel_excluded);
int fp_perf_enable(struct fp_perf_ring *r);
/* Stops a group (its leader and members) counting and sampling; what its ring holds stays. */
int fp_perf_disable(struct fp_perf_ring *r);
/* The leader's count so far (ns for the clocks: the thread's CPU time while enabled). */
int fp_perf_read_count(const struct fp_perf_ring *r, uint64_t *ret);
/*
 * A thread's first period (see threads.c): cfg's leader alone on tid,
 * sampling after `first` events (ns for the clocks) and then every `first`
 * again, waking the agent at each sample. Opened disabled: the caller
 * watches its fd, then calls fp_perf_enable(). Its samples carry no period:
 * each stands for cfg->period (fp_perf_ring.fixed_period), because the
 * first one is the thread's first sample of a random phase, which counts
 * for a whole period like every other. The agent keeps its first sample,
 * enables the thread's group (opened with FP_PERF_OPEN_DISABLED) and
 * closes it. Kernel samples fall back as fp_perf_open_sampler()'s do.
 */
int fp_perf_open_starter(struct fp_perf_config *cfg, pid_t tid, uint64_t first,
                         struct fp_perf_ring *ret);
/*
 * Whether the machine lets the agent count event e on thread tid: opens
 * it as a plain counter and closes it again. 0, or the -errno of
 * perf_event_open (see fp_perf_open_sampler()).
 */
int fp_perf_probe_event(const struct fp_perf_event *e, pid_t tid, bool exclude_kernel);
/*
 * The host tier's events on one CPU (pid -1: every task that runs there).
 * fp_perf_open_cpu_sampler() opens cfg's leader alone (no members: a
 * group would be read across tasks) sampling with callchain, user
 * registers and stack copy as cfg says, plus each task's cgroup.
 * fp_perf_open_cpu_sideband() opens the CPU's side-band: FORK, EXIT,
 * COMM (exec), MMAP2 and CGROUP records of every task, each with its time.
 * -errno as fp_perf_open_sampler(); -ENODEV for a CPU that is offline.
 */
int fp_perf_open_cpu_sampler(struct fp_perf_config *cfg, int cpu, struct fp_perf_ring *ret);
int fp_perf_open_cpu_sideband(int cpu, unsigned pages, struct fp_perf_ring *ret);
/*
 * The bridge's event on one CPU: cfg's leader alone (pid -1), with BPF
 * program prog_fd deciding which samples are written (a perf_event
 * program: 0 drops the sample before it is prepared).
 */
int fp_perf_open_cpu_bridge(struct fp_perf_config *cfg, int cpu, int prog_fd,
                            struct fp_perf_ring *ret);

/* Opens the side-band (fork/exit/comm/mmap) event of thread tid. */
int fp_perf_open_sideband(pid_t tid, struct fp_perf_ring *ret);
/* Unmaps and closes; safe on a zeroed or already-closed ring. */
void fp_perf_ring_close(struct fp_perf_ring *r);

/* Whether the ring holds unread records. */
bool fp_perf_ring_pending(const struct fp_perf_ring *r);
/* Whether the event's task has exited (the fd reports POLLHUP). */
bool fp_perf_ring_hangup(const struct fp_perf_ring *r);

struct fp_perf_handlers {
        void (*sample)(void *userdata, const struct fp_perf_sample *s);
        void (*record)(void *userdata, const struct fp_perf_record *r);
};

/*
 * Consumes every record now in the ring, calling the handlers; records of
 * types nobody asked for are skipped, malformed ones counted. Returns the
 * number of records read, or -EBADMSG if the ring holds garbage (the ring
 * is then reset to empty and the caller should count a loss).
 */
int fp_perf_ring_drain(struct fp_perf_ring *r, const struct fp_perf_handlers *h, void *userdata);

/* The machine's perf_event_paranoid, or 2 if it cannot be read. */
int fp_perf_paranoid(void);
/* Whether the machine exposes a hardware PMU (a "cpu" event source). */
bool fp_perf_have_hw_pmu(void);
/* Whether this process may sample kernel mode at any paranoid level (CAP_PERFMON or CAP_SYS_ADMIN).
 */
bool fp_perf_capable(void);
/* The same of process pid (0: this one); false when it cannot be read. */
bool fp_perf_pid_capable(pid_t pid);

/*
 * One line for the user on why perf_event_open refused cfg's event with r
 * (-errno): an event the machine lacks (and whether it exposes a hardware
 * PMU at all), the paranoid level and capabilities, and so on. Written
 * into buf, which is returned.
 */
const char *fp_perf_explain_error(int r, const struct fp_perf_config *cfg, char *buf, size_t len);
/*
 * Checks that the machine has every event of cfg's group, opening each on
 * pid once. A member it lacks is left out with cfg->best_effort (its name
 * appended to left_out, comma-separated, and cfg's members compacted) or
 * fails; a leader it lacks always fails. 0 or -errno with one line in err.
 */
int fp_perf_check_events(struct fp_perf_config *cfg, pid_t pid, char *left_out, size_t left_len,
                         char *err, size_t err_len);
