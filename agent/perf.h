/* SPDX-License-Identifier: MIT */
/*
 * perf_event_open for one thread: event names, opening, the mmap ring and
 * its records.
 *
 * Each profiled thread gets two events, each with its own ring:
 *
 *   - the sampling event (cpu-clock by default) writes PERF_RECORD_SAMPLE
 *     (ip, pid/tid, time, period, callchain), plus LOST and THROTTLE
 *     records. Its ring wakes the agent only when a quarter full, so a
 *     busy thread costs a few wakeups a second, not one per sample.
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

/* A named event: what perf list calls it and what perf_event_attr needs. */
struct fp_perf_event {
        char name[FP_PERF_EVENT_NAME_MAX];
        uint32_t type;   /* PERF_TYPE_* */
        uint64_t config; /* PERF_COUNT_* or a raw code */
};

/* How to sample one target: the same for each of its threads. */
struct fp_perf_config {
        struct fp_perf_event event;
        uint64_t period;     /* events (ns for the clocks) between samples, when freq == 0 */
        uint64_t freq;       /* samples per second, kernel-adjusted period, when nonzero */
        bool kernel_frames;  /* --kernel: kernel callchains too */
        bool count_kernel;   /* samples taken in the kernel are kept (exclude_kernel=0) */
        unsigned ring_pages; /* data pages of the sampling ring, a power of two */
};

/* An mmap'd ring of one event. */
struct fp_perf_ring {
        int fd;
        void *base; /* the metadata page followed by the data pages */
        size_t data_size;
        uint8_t *scratch; /* a record that wraps the end is copied here */
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
};

/* Side-band and accounting records, parsed. */
struct fp_perf_record {
        uint32_t type; /* PERF_RECORD_* */
        uint16_t misc;
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
                        uint32_t prot, flags;
                        const char *filename;
                } mmap;
                struct {
                        uint64_t lost;
                } lost; /* LOST, LOST_SAMPLES */
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

/*
 * The ring size (data pages, a power of two) that holds at least 200 ms of
 * samples at freq samples/s with deep callchains, bounded to [8, 256].
 */
unsigned fp_perf_ring_pages_for(uint64_t freq);

/*
 * Opens the sampling event of cfg on thread tid and maps its ring. On
 * failure returns -errno: -ESRCH when the thread is gone, -ENOENT or
 * -EOPNOTSUPP when the machine lacks the event, -EACCES/-EPERM when not
 * allowed. When cfg->count_kernel is set and the kernel refuses it, the
 * event is retried with kernel samples excluded and *ret_kernel_excluded
 * set. ret is untouched on failure.
 */
int fp_perf_open_sampler(const struct fp_perf_config *cfg, pid_t tid, struct fp_perf_ring *ret,
                         bool *ret_kernel_excluded);
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
