/* SPDX-License-Identifier: MIT */
/*
 * perf_event_open for one thread: event names, opening, the mmap ring and
 * its records. See perf.h for the two-events-per-thread design.
 *
 * Ring protocol: the kernel advances data_head; we read it with acquire
 * ordering, consume records up to it, and publish data_tail with release
 * ordering so the kernel may reuse the space. A record that straddles the
 * end of the data area is copied into a scratch buffer first, so handlers
 * always see one contiguous record.
 */
#include "perf.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <asm/perf_regs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SAMPLE_TYPE                                                                                \
        (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD |                \
         PERF_SAMPLE_CALLCHAIN)
/* The group read every sample of a leader with members carries. */
#define READ_FORMAT                                                                                \
        (PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED |                     \
         PERF_FORMAT_TOTAL_TIME_RUNNING)
/* sample_id_all trailer of non-sample records: TID then TIME. */
#define SIDEBAND_TYPE (PERF_SAMPLE_TID | PERF_SAMPLE_TIME)
#define MAX_RECORD    65536 /* header.size is 16 bits */
/* The user registers a stack copy needs: rbp, rsp, rip (in this order in a sample). */
#define SAMPLE_REGS                                                                                \
        ((1ULL << PERF_REG_X86_BP) | (1ULL << PERF_REG_X86_SP) | (1ULL << PERF_REG_X86_IP))

struct event_name {
        const char *name;
        uint32_t type;
        uint64_t config;
};

static const struct event_name event_names[] = {
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"alignment-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS},
    {"emulation-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES},
    {"stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"stalled-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
};

int fp_perf_event_parse(const char *name, struct fp_perf_event *ret)
{
        struct fp_perf_event e = {0};

        if (!name || !*name || strlen(name) >= sizeof(e.name))
                return -EINVAL;
        for (size_t i = 0; i < sizeof(event_names) / sizeof(event_names[0]); i++) {
                if (strcmp(event_names[i].name, name) != 0)
                        continue;
                snprintf(e.name, sizeof(e.name), "%s", name);
                e.type = event_names[i].type;
                e.config = event_names[i].config;
                *ret = e;
                return 0;
        }
        if (name[0] == 'r' && name[1]) {
                char *end;
                errno = 0;
                unsigned long long code = strtoull(name + 1, &end, 16);
                if (errno || *end)
                        return -EINVAL;
                snprintf(e.name, sizeof(e.name), "%s", name);
                e.type = PERF_TYPE_RAW;
                e.config = code;
                *ret = e;
                return 0;
        }
        return -EINVAL;
}

bool fp_perf_event_is_clock(const struct fp_perf_event *e)
{
        return e->type == PERF_TYPE_SOFTWARE &&
               (e->config == PERF_COUNT_SW_CPU_CLOCK || e->config == PERF_COUNT_SW_TASK_CLOCK);
}

const char *fp_perf_event_unit(const struct fp_perf_event *e)
{
        return fp_perf_event_is_clock(e) ? "nanoseconds" : "count";
}

bool fp_perf_event_is_hardware(const struct fp_perf_event *e)
{
        return e->type == PERF_TYPE_HARDWARE || e->type == PERF_TYPE_RAW ||
               e->type == PERF_TYPE_HW_CACHE;
}

int fp_perf_event_list_parse(const char *list, struct fp_perf_config *cfg, char *bad,
                             size_t bad_len)
{
        struct fp_perf_event ev[FP_PERF_MAX_EVENTS];
        unsigned n = 0;
        const char *p = list ? list : "";

        for (;;) {
                size_t len = strcspn(p, ",");
                char name[FP_PERF_EVENT_NAME_MAX + 1];
                struct fp_perf_event e;

                snprintf(name, sizeof(name), "%.*s",
                         (int)(len < FP_PERF_EVENT_NAME_MAX ? len : FP_PERF_EVENT_NAME_MAX), p);
                if (bad && bad_len)
                        snprintf(bad, bad_len, "%s", name);
                if (len >= FP_PERF_EVENT_NAME_MAX || fp_perf_event_parse(name, &e) < 0)
                        return -EINVAL;
                for (unsigned i = 0; i < n; i++)
                        if (ev[i].type == e.type && ev[i].config == e.config)
                                return -EEXIST;
                if (n == FP_PERF_MAX_EVENTS)
                        return -E2BIG;
                ev[n++] = e;
                if (!p[len])
                        break;
                p += len + 1;
        }
        cfg->event = ev[0];
        cfg->n_members = n - 1;
        for (unsigned i = 1; i < n; i++)
                cfg->members[i - 1] = ev[i];
        return 0;
}

void fp_perf_event_list_string(const struct fp_perf_config *cfg, char *buf, size_t len)
{
        size_t off = 0;
        int w = snprintf(buf, len, "%s", cfg->event.name);

        for (unsigned i = 0; i < cfg->n_members && w >= 0; i++) {
                off += (size_t)w;
                if (off >= len)
                        return;
                w = snprintf(buf + off, len - off, ",%s", cfg->members[i].name);
        }
}

int fp_perf_group_read_parse(const uint64_t *u, size_t n_words, const uint64_t *ids, unsigned n_ids,
                             struct fp_perf_counts *ret)
{
        struct fp_perf_counts c = {0};
        uint64_t nr;

        if (n_words < 3)
                return -EBADMSG;
        nr = u[0];
        if (nr > n_ids || nr > (n_words - 3) / 2)
                return -EBADMSG;
        c.time_enabled = u[1];
        c.time_running = u[2];
        for (uint64_t i = 0; i < nr; i++) {
                uint64_t value = u[3 + 2 * i], id = u[4 + 2 * i];
                unsigned k = 0;
                while (k < n_ids && ids[k] != id)
                        k++;
                if (k == n_ids)
                        return -EBADMSG;
                c.value[k] = value;
        }
        *ret = c;
        return (int)(3 + 2 * nr);
}

void fp_perf_counts_delta(const struct fp_perf_counts *prev, const struct fp_perf_counts *now,
                          unsigned n_members, uint64_t *ret)
{
        uint64_t de =
            now->time_enabled > prev->time_enabled ? now->time_enabled - prev->time_enabled : 0;
        uint64_t dr =
            now->time_running > prev->time_running ? now->time_running - prev->time_running : 0;

        for (unsigned i = 0; i < n_members && i < FP_PERF_MAX_MEMBERS; i++) {
                uint64_t d = now->value[i + 1] > prev->value[i + 1]
                                 ? now->value[i + 1] - prev->value[i + 1]
                                 : 0;
                if (dr == 0) {
                        /* Never on the PMU in this interval: nothing counted, nothing to scale. */
                        ret[i] = 0;
                } else if (de > dr) {
                        unsigned __int128 x = (unsigned __int128)d * de / dr;
                        ret[i] = x > UINT64_MAX ? UINT64_MAX : (uint64_t)x;
                } else {
                        ret[i] = d;
                }
        }
}

unsigned fp_perf_ring_pages_for_bytes(uint64_t freq, uint64_t sample_bytes, unsigned ms)
{
        uint64_t bytes = freq * sample_bytes * ms / 1000;
        long page = sysconf(_SC_PAGESIZE);
        unsigned pages = 8;

        while (pages < 256 && (uint64_t)pages * (uint64_t)page < bytes)
                pages *= 2;
        return pages;
}

unsigned fp_perf_ring_pages_for(uint64_t freq)
{
        /* A user+kernel sample with a 64-deep callchain is about 600 bytes. */
        return fp_perf_ring_pages_for_bytes(freq, 600, FP_PERF_THREAD_RING_MS);
}

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
                           unsigned long flags)
{
        int fd = (int)syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
        return fd < 0 ? -errno : fd;
}

static int ring_map(int fd, unsigned pages, struct fp_perf_ring *ret)
{
        long page = sysconf(_SC_PAGESIZE);
        size_t len = (size_t)(pages + 1) * (size_t)page;
        void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
                return -errno;
        uint8_t *scratch = malloc(MAX_RECORD);
        if (!scratch) {
                munmap(base, len);
                return -ENOMEM;
        }
        *ret = (struct fp_perf_ring){
            .fd = fd, .base = base, .data_size = (size_t)pages * (size_t)page, .scratch = scratch};
        return 0;
}

/* Maps fd's ring, halving the size when the locked-memory budget refuses it. */
static int ring_map_shrinking(int fd, unsigned pages, struct fp_perf_ring *ret)
{
        int r;
        for (;;) {
                r = ring_map(fd, pages, ret);
                if (r != -EPERM && r != -ENOMEM)
                        return r;
                if (pages <= 1)
                        return r;
                pages /= 2;
        }
}

static void attr_common(struct perf_event_attr *a)
{
        a->size = sizeof(*a);
        a->disabled = 0;
        a->sample_id_all = 1;
        a->use_clockid = 1;
        a->clockid = CLOCK_MONOTONIC;
        a->exclude_hv = 1;
}

/*
 * Opens the leader; a hardware leader probes precise_ip from 3 down to
 * what the machine accepts (once: later threads use cfg's answer).
 */
static int open_leader(struct perf_event_attr *a, struct fp_perf_config *cfg, pid_t tid)
{
        int fd;

        if (!fp_perf_event_is_hardware(&cfg->event))
                return perf_event_open(a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (cfg->precise_probed) {
                a->precise_ip = cfg->precise_ip;
                return perf_event_open(a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        }
        for (int p = 3;; p--) {
                a->precise_ip = (unsigned)p;
                fd = perf_event_open(a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
                if (fd >= 0) {
                        cfg->precise_probed = true;
                        cfg->precise_ip = (unsigned)p;
                        return fd;
                }
                if (p == 0 || (fd != -EINVAL && fd != -EOPNOTSUPP))
                        return fd;
        }
}

/* Opens cfg's members into leader's group; closes what it opened on failure. */
static int open_members(const struct fp_perf_config *cfg, pid_t tid, bool exclude_kernel,
                        int leader_fd, int *fds, uint64_t *ids)
{
        for (unsigned i = 0; i < cfg->n_members; i++) {
                struct perf_event_attr a = {0};
                a.size = sizeof(a);
                a.type = cfg->members[i].type;
                a.config = cfg->members[i].config;
                a.read_format = READ_FORMAT;
                a.exclude_kernel = exclude_kernel;
                a.exclude_hv = 1;
                /* Siblings must keep the leader's clock, or the kernel refuses them. */
                a.use_clockid = 1;
                a.clockid = CLOCK_MONOTONIC;
                int fd = perf_event_open(&a, tid, -1, leader_fd, PERF_FLAG_FD_CLOEXEC);
                if (fd >= 0 && ioctl(fd, PERF_EVENT_IOC_ID, &ids[i]) < 0) {
                        int e = -errno;
                        close(fd);
                        fd = e;
                }
                if (fd < 0) {
                        while (i-- > 0)
                                close(fds[i]);
                        return fd;
                }
                fds[i] = fd;
        }
        return 0;
}

/*
 * The sampling leader's attributes, for a thread or a CPU: event, rate,
 * callchain, kernel mode, stack copy, a quarter-ring wake-up (a thread's:
 * half, fp_perf_open_sampler()). Returns whether its samples carry no
 * period (the agent knows it):
 *
 * A software event other than the clocks, asked for PERF_SAMPLE_PERIOD at
 * a fixed period, is sampled by the kernel at every event (each sample's
 * period 1): a page-faults leader at --period 50 cost fifty samples
 * instead of one. Its period is the one the agent set, so it is left out
 * of the sample and put back by the parser (fp_perf_ring.fixed_period).
 */
static bool sampler_attr(const struct fp_perf_config *cfg, struct perf_event_attr *a)
{
        bool fixed = !cfg->freq && cfg->event.type == PERF_TYPE_SOFTWARE &&
                     !fp_perf_event_is_clock(&cfg->event);

        attr_common(a);
        a->type = cfg->event.type;
        a->config = cfg->event.config;
        a->sample_type = SAMPLE_TYPE;
        if (cfg->freq) {
                a->freq = 1;
                a->sample_freq = cfg->freq;
        } else {
                a->sample_period = cfg->period;
        }
        if (fixed)
                a->sample_type &= ~(uint64_t)PERF_SAMPLE_PERIOD;
        a->exclude_kernel = !(cfg->count_kernel || cfg->kernel_frames);
        a->exclude_callchain_kernel = !cfg->kernel_frames;
        a->exclude_callchain_user = cfg->stack_bytes && cfg->no_user_chain;
        if (cfg->stack_bytes) {
                a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
                a->sample_regs_user = SAMPLE_REGS;
                a->sample_stack_user = cfg->stack_bytes;
        }
        a->watermark = 1;
        a->wakeup_watermark =
            (uint32_t)((size_t)cfg->ring_pages * (size_t)sysconf(_SC_PAGESIZE) / 4);
        return fixed;
}

/* A side-band dummy event's attributes: FORK, EXIT, COMM (exec) and MMAP2 records. */
static void sideband_attr(struct perf_event_attr *a)
{
        attr_common(a);
        a->type = PERF_TYPE_SOFTWARE;
        a->config = PERF_COUNT_SW_DUMMY;
        a->sample_type = SIDEBAND_TYPE;
        a->sample_period = 1;
        a->task = 1;
        a->comm = 1;
        a->comm_exec = 1; /* COMM records of an exec say so (target.c re-checks the owner) */
        a->mmap = 1;
        a->mmap2 = 1;
        a->watermark = 1;
}

/* Opens a on (pid, cpu) and maps its ring of pages pages; the fd is closed on failure. */
static int open_mapped(struct perf_event_attr *a, pid_t pid, int cpu, unsigned pages,
                       struct fp_perf_ring *ret)
{
        int r, fd = perf_event_open(a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

        if (fd < 0)
                return fd;
        r = ring_map_shrinking(fd, pages, ret);
        if (r < 0)
                close(fd);
        return r;
}

int fp_perf_open_sampler(struct fp_perf_config *cfg, pid_t tid, unsigned flags,
                         struct fp_perf_ring *ret, bool *ret_kernel_excluded)
{
        struct perf_event_attr a = {0};
        bool kernel_excluded = false;
        int member_fd[FP_PERF_MAX_MEMBERS];
        uint64_t id[FP_PERF_MAX_EVENTS];
        bool fixed = sampler_attr(cfg, &a);
        long page = sysconf(_SC_PAGESIZE);
        int fd, r;

        a.disabled = (flags & FP_PERF_OPEN_DISABLED) != 0;
        /* Each 7/8 of a ring that holds a second (FP_PERF_THREAD_RING_MS), else each half. */
        a.wakeup_watermark = cfg->ring_wake_bytes;

        if (cfg->n_members) {
                a.sample_type |= PERF_SAMPLE_READ;
                a.read_format = READ_FORMAT;
        }

        fd = open_leader(&a, cfg, tid);
        if ((fd == -EACCES || fd == -EPERM) && !a.exclude_kernel && !cfg->kernel_frames) {
                /* Not allowed to see kernel-mode samples: keep user time only. */
                a.exclude_kernel = 1;
                kernel_excluded = true;
                fd = open_leader(&a, cfg, tid);
        }
        if (fd < 0)
                return fd;
        if (cfg->n_members && ioctl(fd, PERF_EVENT_IOC_ID, &id[0]) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        r = open_members(cfg, tid, a.exclude_kernel, fd, member_fd, id + 1);
        if (r < 0) {
                close(fd);
                return r;
        }
        r = ring_map_shrinking(fd, cfg->ring_pages, ret);
        if (r < 0) {
                for (unsigned i = 0; i < cfg->n_members; i++)
                        close(member_fd[i]);
                close(fd);
                return r;
        }
        ret->n_members = cfg->n_members;
        ret->stack_bytes = cfg->stack_bytes;
        ret->fixed_period = fixed ? cfg->period : 0;
        for (unsigned i = 0; i < cfg->n_members; i++) {
                ret->member_fd[i] = member_fd[i];
                ret->id[i + 1] = id[i + 1];
        }
        ret->id[0] = cfg->n_members ? id[0] : 0;
        if (a.wakeup_watermark && ret->data_size < (size_t)cfg->ring_pages * (size_t)page) {
                /*
                 * Shrunk (locked memory ran short): the kernel would wake the
                 * agent only once it is full. Again, at half, with what fits.
                 */
                cfg->ring_pages = (unsigned)(ret->data_size / (size_t)page);
                cfg->ring_wake_bytes = 0;
                fp_perf_ring_close(ret);
                return fp_perf_open_sampler(cfg, tid, flags, ret, ret_kernel_excluded);
        }
        if (ret_kernel_excluded)
                *ret_kernel_excluded = kernel_excluded || a.exclude_kernel;
        return 0;
}

int fp_perf_open_starter(struct fp_perf_config *cfg, pid_t tid, uint64_t first,
                         struct fp_perf_ring *ret)
{
        struct perf_event_attr a = {0};
        int fd, r;

        (void)sampler_attr(cfg, &a);
        a.sample_period = first ? first : 1;
        /* Its one sample stands for a whole configured period (see perf.h). */
        a.sample_type &= ~(uint64_t)PERF_SAMPLE_PERIOD;
        /* Woken at each sample, not at a quarter ring: the agent switches at once. */
        a.watermark = 0;
        a.wakeup_events = 1;
        /*
         * Enabled by the caller once its ring is mapped and watched: a first
         * period of a few µs would otherwise end before the ring exists, and
         * its sample (and the wake-up) be lost.
         */
        a.disabled = 1;
        fd = open_leader(&a, cfg, tid);
        if ((fd == -EACCES || fd == -EPERM) && !a.exclude_kernel && !cfg->kernel_frames) {
                a.exclude_kernel = 1; /* as fp_perf_open_sampler() falls back */
                fd = open_leader(&a, cfg, tid);
        }
        if (fd < 0)
                return fd;
        /*
         * Room for two samples with their stack copy (a few more without),
         * whatever the copy's size: a sample larger than the ring is dropped
         * by the kernel unsaid, and the thread would wait for its first
         * sample, unsampled, until it exits (a target's copy grown to 32 KiB
         * did that to every thread born after: 8 pages hold 32 KiB).
         */
        unsigned pages =
            fp_perf_ring_pages_for_bytes(1, 2 * (600 + (uint64_t)cfg->stack_bytes), 1000);
        r = ring_map_shrinking(fd, pages, ret);
        if (r < 0) {
                close(fd);
                return r;
        }
        ret->stack_bytes = cfg->stack_bytes;
        ret->fixed_period = cfg->period;
        return 0;
}

int fp_perf_enable(struct fp_perf_ring *r)
{
        return ioctl(r->fd, PERF_EVENT_IOC_ENABLE, 0) < 0 ? -errno : 0;
}

int fp_perf_disable(struct fp_perf_ring *r)
{
        return ioctl(r->fd, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP) < 0 ? -errno : 0;
}

int fp_perf_read_count(const struct fp_perf_ring *r, uint64_t *ret)
{
        /* A group's read: nr, time enabled, time running, then {value, id} leader first. */
        uint64_t u[3 + 2 * FP_PERF_MAX_EVENTS];
        size_t want =
            r->n_members ? (3 + 2 * (size_t)(r->n_members + 1)) * sizeof(u[0]) : sizeof(u[0]);
        ssize_t n = read(r->fd, u, want);

        if (n != (ssize_t)want)
                return n < 0 ? -errno : -EIO;
        *ret = r->n_members ? u[3] : u[0];
        return 0;
}

int fp_perf_probe_event(const struct fp_perf_event *e, pid_t tid, bool exclude_kernel)
{
        struct perf_event_attr a = {0};
        a.size = sizeof(a);
        a.type = e->type;
        a.config = e->config;
        a.exclude_kernel = exclude_kernel;
        a.exclude_hv = 1;
        a.disabled = 1;
        int fd = perf_event_open(&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

int fp_perf_open_cpu_sampler(struct fp_perf_config *cfg, int cpu, struct fp_perf_ring *ret)
{
        struct perf_event_attr a = {0};
        bool fixed = sampler_attr(cfg, &a);
        int r;

        a.sample_type |= PERF_SAMPLE_CGROUP;
        r = open_mapped(&a, -1, cpu, cfg->ring_pages, ret);
        if (r < 0)
                return r;
        ret->stack_bytes = cfg->stack_bytes;
        ret->fixed_period = fixed ? cfg->period : 0;
        ret->cgroup = true;
        return 0;
}

int fp_perf_open_cpu_bridge(struct fp_perf_config *cfg, int cpu, int prog_fd,
                            struct fp_perf_ring *ret)
{
        struct perf_event_attr a = {0};
        bool fixed = sampler_attr(cfg, &a);
        int r;

        r = open_mapped(&a, -1, cpu, cfg->ring_pages, ret);
        if (r < 0)
                return r;
        if (ioctl(ret->fd, PERF_EVENT_IOC_SET_BPF, prog_fd) < 0) {
                r = -errno;
                fp_perf_ring_close(ret);
                return r;
        }
        ret->stack_bytes = cfg->stack_bytes;
        ret->fixed_period = fixed ? cfg->period : 0;
        return 0;
}

int fp_perf_open_cpu_sideband(int cpu, unsigned pages, struct fp_perf_ring *ret)
{
        struct perf_event_attr a = {0};

        sideband_attr(&a);
        a.cgroup = 1;
        /* The agent drains every side-band ring on a timer and on a quarter-full ring. */
        a.wakeup_watermark = (uint32_t)((size_t)pages * (size_t)sysconf(_SC_PAGESIZE) / 4);
        return open_mapped(&a, -1, cpu, pages, ret);
}

int fp_perf_open_sideband(pid_t tid, struct fp_perf_ring *ret)
{
        struct perf_event_attr a = {0};

        sideband_attr(&a);
        a.exclude_kernel = 1;
        a.wakeup_watermark = 1;
        return open_mapped(&a, tid, -1, 2, ret);
}

void fp_perf_ring_close(struct fp_perf_ring *r)
{
        if (!r)
                return;
        if (r->base) {
                munmap(r->base, r->data_size + (size_t)sysconf(_SC_PAGESIZE));
                /* Members first: closing the leader first would promote them to singletons. */
                for (unsigned i = 0; i < r->n_members; i++)
                        close(r->member_fd[i]);
                close(r->fd);
        }
        free(r->scratch);
        *r = (struct fp_perf_ring){.fd = -1};
}

static struct perf_event_mmap_page *ring_meta(const struct fp_perf_ring *r)
{
        return r->base;
}

bool fp_perf_ring_pending(const struct fp_perf_ring *r)
{
        if (!r->base)
                return false;
        struct perf_event_mmap_page *m = ring_meta(r);
        return __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE) != m->data_tail;
}

bool fp_perf_ring_hangup(const struct fp_perf_ring *r)
{
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        if (r->fd < 0)
                return true;
        if (poll(&p, 1, 0) < 0)
                return false;
        return (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* Copies `size` bytes starting at ring offset `pos` (wrapping) into dst. */
static void ring_copy(const struct fp_perf_ring *r, uint64_t pos, void *dst, size_t size)
{
        const uint8_t *data = (const uint8_t *)r->base + sysconf(_SC_PAGESIZE);
        size_t off = (size_t)(pos & (r->data_size - 1));
        size_t first = r->data_size - off;

        if (first >= size) {
                memcpy(dst, data + off, size);
        } else {
                memcpy(dst, data + off, first);
                memcpy((uint8_t *)dst + first, data, size - first);
        }
}

static int parse_sample(struct fp_perf_ring *r, const uint8_t *p, size_t size,
                        struct fp_perf_sample *s)
{
        const struct perf_event_header *h = (const void *)p;
        const uint64_t *u = (const uint64_t *)(p + sizeof(*h));
        size_t n = (size - sizeof(*h)) / sizeof(uint64_t), at = 4;

        /* ip, pid|tid, time, period (unless fixed), [group read], nr */
        if (n < 5)
                return -EBADMSG;
        s->misc = h->misc;
        s->ip = u[0];
        s->pid = (uint32_t)u[1];
        s->tid = (uint32_t)(u[1] >> 32);
        s->time = u[2];
        if (r->fixed_period) {
                s->period = r->fixed_period;
                at = 3;
        } else {
                s->period = u[3];
        }
        s->n_counters = 0;
        s->d_enabled = s->d_running = 0;
        if (r->n_members) {
                struct fp_perf_counts now;
                int w = fp_perf_group_read_parse(u + at, n - at, r->id, r->n_members + 1, &now);
                if (w < 0)
                        return w;
                at += (size_t)w;
                fp_perf_counts_delta(&r->last, &now, r->n_members, s->counters);
                s->n_counters = r->n_members;
                if (now.time_enabled > r->last.time_enabled)
                        s->d_enabled = now.time_enabled - r->last.time_enabled;
                if (now.time_running > r->last.time_running)
                        s->d_running = now.time_running - r->last.time_running;
                r->last = now;
        }
        if (at >= n)
                return -EBADMSG;
        s->nr = u[at];
        if (s->nr > n - at - 1)
                return -EBADMSG;
        s->ips = u + at + 1;
        at += 1 + s->nr;
        s->has_regs = false;
        s->stack = NULL;
        s->stack_size = 0;
        if (!r->stack_bytes)
                return 0;
        /* regs_user: abi, then the three registers unless abi is NONE. */
        if (at >= n)
                return -EBADMSG;
        uint64_t abi = u[at++];
        if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
                if (n - at < 3)
                        return -EBADMSG;
                s->user_bp = u[at];
                s->user_sp = u[at + 1];
                s->user_ip = u[at + 2];
                s->has_regs = true;
                at += 3;
        }
        /* stack_user: size, the bytes, then dyn_size (absent when size is 0). */
        if (at >= n)
                return -EBADMSG;
        uint64_t sz = u[at++];
        if (sz) {
                if (sz % 8 || sz / 8 >= n - at)
                        return -EBADMSG;
                uint64_t dyn = u[at + sz / 8];
                s->stack = (const uint8_t *)(u + at);
                s->stack_size = dyn < sz ? dyn : sz;
                at += sz / 8 + 1;
        }
        return 0;
}

/* The per-CPU sampler's cgroup id: the last word (after the stack copy). */
static void parse_sample_cgroup(const struct fp_perf_ring *r, const uint8_t *p, size_t size,
                                struct fp_perf_sample *s)
{
        s->cgroup = 0;
        if (r->cgroup && size >= sizeof(struct perf_event_header) + 8)
                memcpy(&s->cgroup, p + size - 8, 8);
}

static int parse_record(const uint8_t *p, size_t size, struct fp_perf_record *rec)
{
        const struct perf_event_header *h = (const void *)p;
        const uint8_t *body = p + sizeof(*h);
        size_t len = size - sizeof(*h);

        memset(rec, 0, sizeof(*rec));
        rec->type = h->type;
        rec->misc = h->misc;
        /* sample_id_all: every record but a sample ends in TID, TIME (SIDEBAND_TYPE, SAMPLE_TYPE).
         */
        if (len >= 16)
                memcpy(&rec->time, body + len - 8, 8);
        switch (h->type) {
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
                if (len < 24)
                        return -EBADMSG;
                memcpy(&rec->task.pid, body, 4);
                memcpy(&rec->task.ppid, body + 4, 4);
                memcpy(&rec->task.tid, body + 8, 4);
                memcpy(&rec->task.ptid, body + 12, 4);
                memcpy(&rec->task.time, body + 16, 8);
                return 0;
        case PERF_RECORD_COMM:
                if (len < 9 || !memchr(body + 8, 0, len - 8))
                        return -EBADMSG;
                memcpy(&rec->comm.pid, body, 4);
                memcpy(&rec->comm.tid, body + 4, 4);
                rec->comm.comm = (const char *)body + 8;
                return 0;
        case PERF_RECORD_MMAP2: {
                /* pid, tid, addr, len, pgoff, maj/min/ino/gen or build id (24), prot, flags */
                const size_t fixed = 8 + 24 + 24 + 8;
                if (len < fixed + 1 || !memchr(body + fixed, 0, len - fixed))
                        return -EBADMSG;
                memcpy(&rec->mmap.pid, body, 4);
                memcpy(&rec->mmap.tid, body + 4, 4);
                memcpy(&rec->mmap.addr, body + 8, 8);
                memcpy(&rec->mmap.len, body + 16, 8);
                memcpy(&rec->mmap.pgoff, body + 24, 8);
                memcpy(&rec->mmap.maj, body + 32, 4); /* not a build ID: attr.build_id is off */
                memcpy(&rec->mmap.min, body + 36, 4);
                memcpy(&rec->mmap.ino, body + 40, 8);
                memcpy(&rec->mmap.prot, body + 56, 4);
                memcpy(&rec->mmap.flags, body + 60, 4);
                rec->mmap.filename = (const char *)body + fixed;
                return 0;
        }
        case PERF_RECORD_MMAP: {
                const size_t fixed = 8 + 24;
                if (len < fixed + 1 || !memchr(body + fixed, 0, len - fixed))
                        return -EBADMSG;
                memcpy(&rec->mmap.pid, body, 4);
                memcpy(&rec->mmap.tid, body + 4, 4);
                memcpy(&rec->mmap.addr, body + 8, 8);
                memcpy(&rec->mmap.len, body + 16, 8);
                memcpy(&rec->mmap.pgoff, body + 24, 8);
                rec->mmap.maj = rec->mmap.min = 0;
                rec->mmap.ino = 0;
                rec->mmap.prot = PROT_EXEC;
                rec->mmap.filename = (const char *)body + fixed;
                return 0;
        }
        case PERF_RECORD_CGROUP:
                if (len < 9 || !memchr(body + 8, 0, len - 8))
                        return -EBADMSG;
                memcpy(&rec->cgroup.id, body, 8);
                rec->cgroup.path = (const char *)body + 8;
                return 0;
        case PERF_RECORD_LOST:
                if (len < 16)
                        return -EBADMSG;
                memcpy(&rec->lost.lost, body + 8, 8);
                return 0;
        case PERF_RECORD_LOST_SAMPLES:
                if (len < 8)
                        return -EBADMSG;
                memcpy(&rec->lost.lost, body, 8);
                return 0;
        case PERF_RECORD_THROTTLE:
        case PERF_RECORD_UNTHROTTLE:
                if (len < 8)
                        return -EBADMSG;
                memcpy(&rec->throttle.time, body, 8);
                return 0;
        default:
                return -EOPNOTSUPP;
        }
}

int fp_perf_ring_drain(struct fp_perf_ring *r, const struct fp_perf_handlers *h, void *userdata)
{
        struct perf_event_mmap_page *m;
        uint64_t head, tail;
        int n = 0;

        if (!r->base)
                return 0;
        m = ring_meta(r);
        head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
        tail = m->data_tail;
        if (head - tail > r->data_size)
                goto garbage;

        while (tail < head) {
                struct perf_event_header hdr;
                const uint8_t *rec;
                size_t off = (size_t)(tail & (r->data_size - 1));

                if (head - tail < sizeof(hdr))
                        goto garbage;
                ring_copy(r, tail, &hdr, sizeof(hdr));
                /* The kernel writes whole 8-byte words; anything else is not a record. */
                if (hdr.size < sizeof(hdr) || hdr.size % 8 || hdr.size > head - tail)
                        goto garbage;
                if (off + hdr.size <= r->data_size) {
                        rec = (const uint8_t *)r->base + sysconf(_SC_PAGESIZE) + off;
                } else {
                        ring_copy(r, tail, r->scratch, hdr.size);
                        rec = r->scratch;
                }

                if (hdr.type == PERF_RECORD_SAMPLE) {
                        struct fp_perf_sample s;
                        if (h->sample && parse_sample(r, rec, hdr.size, &s) == 0) {
                                parse_sample_cgroup(r, rec, hdr.size, &s);
                                h->sample(userdata, &s);
                        }
                } else if (h->record) {
                        struct fp_perf_record pr;
                        if (parse_record(rec, hdr.size, &pr) == 0)
                                h->record(userdata, &pr);
                }
                tail += hdr.size;
                n++;
        }
        __atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
        return n;

garbage:
        __atomic_store_n(&m->data_tail, head, __ATOMIC_RELEASE);
        return -EBADMSG;
}

int fp_perf_paranoid(void)
{
        FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
        int v = 2;
        if (!f)
                return v;
        if (fscanf(f, "%d", &v) != 1)
                v = 2;
        fclose(f);
        return v;
}

bool fp_perf_capable(void)
{
        return fp_perf_pid_capable(0);
}

bool fp_perf_pid_capable(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), pid > 0 ? "/proc/%d/status" : "/proc/self/status", (int)pid);
        FILE *f = fopen(path, "re");
        char line[256];
        unsigned long long eff = 0;
        bool found = false;

        if (!f)
                return false;
        while (!found && fgets(line, sizeof(line), f))
                found = sscanf(line, "CapEff: %llx", &eff) == 1;
        fclose(f);
        /* CAP_SYS_ADMIN is 21, CAP_PERFMON 38 (Linux 5.8). */
        return (eff >> 21 & 1) || (eff >> 38 & 1);
}

bool fp_perf_have_hw_pmu(void)
{
        return access("/sys/bus/event_source/devices/cpu", F_OK) == 0 ||
               access("/sys/bus/event_source/devices/cpu_core", F_OK) == 0;
}

/* ---- what a refusal means, for the user ---- */

const char *fp_perf_explain_error(int r, const struct fp_perf_config *cfg, char *buf, size_t len)
{
        switch (r) {
        case -ENOENT:
        case -EOPNOTSUPP:
        case -ENODEV:
                if (cfg->event.type == PERF_TYPE_HARDWARE || cfg->event.type == PERF_TYPE_RAW)
                        snprintf(buf, len, "event '%s' is not supported on this machine%s",
                                 cfg->event.name,
                                 fp_perf_have_hw_pmu() ? "" : ": no hardware PMU is exposed");
                else
                        snprintf(buf, len, "event '%s' is not supported on this machine",
                                 cfg->event.name);
                return buf;
        case -EACCES:
        case -EPERM:
                if (cfg->kernel_frames && fp_perf_paranoid() > 1 && !fp_perf_capable())
                        snprintf(buf, len,
                                 "kernel frames (--kernel) are not permitted: "
                                 "perf_event_paranoid is %d and the agent has neither CAP_PERFMON "
                                 "nor CAP_SYS_ADMIN (grant one, or set perf_event_paranoid to 1)",
                                 fp_perf_paranoid());
                else
                        snprintf(buf, len,
                                 "perf_event_open refused (perf_event_paranoid is %d; the agent "
                                 "needs root or CAP_PERFMON)",
                                 fp_perf_paranoid());
                return buf;
        case -EINVAL:
                snprintf(buf, len, "the kernel rejected event '%s' with these settings",
                         cfg->event.name);
                return buf;
        case -EMFILE:
        case -ENFILE:
                snprintf(buf, len, "out of file descriptors");
                return buf;
        default:
                snprintf(buf, len, "%s", strerror(-r));
                return buf;
        }
}

int fp_perf_check_events(struct fp_perf_config *cfg, pid_t pid, char *left_out, size_t left_len,
                         char *err, size_t err_len)
{
        struct fp_perf_config one = *cfg;
        char reason[256];
        unsigned kept = 0;
        /* Kernel mode only matters when --kernel insists on it; else open falls back. */
        bool exclude_kernel = !cfg->kernel_frames;

        for (unsigned i = 0; i <= cfg->n_members; i++) {
                const struct fp_perf_event *e = i ? &cfg->members[i - 1] : &cfg->event;
                int r = fp_perf_probe_event(e, pid, exclude_kernel);
                bool missing = r == -ENOENT || r == -EOPNOTSUPP || r == -ENODEV;

                if (r == -ESRCH) {
                        snprintf(err, err_len, "no such process: %d", (int)pid);
                        return r;
                }
                if (r < 0 && (!missing || i == 0 || !cfg->best_effort)) {
                        one.event = *e;
                        snprintf(err, err_len, "%s%s",
                                 fp_perf_explain_error(r, &one, reason, sizeof(reason)),
                                 missing && i == 0 && cfg->best_effort
                                     ? " (it leads the group, so --best-effort cannot leave it "
                                       "out: put an available event first)"
                                     : "");
                        return r;
                }
                if (r < 0) {
                        size_t off = strlen(left_out);
                        snprintf(left_out + off, left_len - off, "%s%s", off ? "," : "", e->name);
                        continue;
                }
                if (i)
                        cfg->members[kept++] = *e;
        }
        cfg->n_members = kept;
        return 0;
}

uint64_t fp_perf_random(uint64_t *state, uint64_t seed)
{
        uint64_t x = *state ? *state : (fp_now_ns(CLOCK_MONOTONIC) | 1) ^ seed;

        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        return x * 0x2545f4914f6cdd1dULL;
}

uint64_t fp_perf_jitter_period(uint64_t period, int64_t debt, uint64_t random)
{
        uint64_t step = period / 40 + (random >> 11) % (period / 40 + 1);
        bool shorter = debt > 0 || (debt == 0 && ((random >> 7) & 1));

        return shorter ? period - step : period + step;
}

int fp_perf_set_period(struct fp_perf_ring *r, uint64_t period)
{
        if (ioctl(r->fd, PERF_EVENT_IOC_PERIOD, &period) < 0)
                return -errno;
        if (r->fixed_period)
                r->fixed_period = period;
        return 0;
}
