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

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SAMPLE_TYPE                                                                                \
        (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD |                \
         PERF_SAMPLE_CALLCHAIN)
/* sample_id_all trailer of non-sample records: TID then TIME. */
#define SIDEBAND_TYPE (PERF_SAMPLE_TID | PERF_SAMPLE_TIME)
#define MAX_RECORD    65536 /* header.size is 16 bits */

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

unsigned fp_perf_ring_pages_for(uint64_t freq)
{
        /* A user+kernel sample with a 64-deep callchain is about 600 bytes. */
        uint64_t bytes = freq * 600 / 5;
        long page = sysconf(_SC_PAGESIZE);
        unsigned pages = 8;

        while (pages < 256 && (uint64_t)pages * (uint64_t)page < bytes)
                pages *= 2;
        return pages;
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

int fp_perf_open_sampler(const struct fp_perf_config *cfg, pid_t tid, struct fp_perf_ring *ret,
                         bool *ret_kernel_excluded)
{
        struct perf_event_attr a = {0};
        bool kernel_excluded = false;
        int fd, r;

        attr_common(&a);
        a.type = cfg->event.type;
        a.config = cfg->event.config;
        a.sample_type = SAMPLE_TYPE;
        if (cfg->freq) {
                a.freq = 1;
                a.sample_freq = cfg->freq;
        } else {
                a.sample_period = cfg->period;
        }
        a.exclude_kernel = !(cfg->count_kernel || cfg->kernel_frames);
        a.exclude_callchain_kernel = !cfg->kernel_frames;
        a.watermark = 1;
        a.wakeup_watermark =
            (uint32_t)((size_t)cfg->ring_pages * (size_t)sysconf(_SC_PAGESIZE) / 4);

        fd = perf_event_open(&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if ((fd == -EACCES || fd == -EPERM) && !a.exclude_kernel && !cfg->kernel_frames) {
                /* Not allowed to see kernel-mode samples: keep user time only. */
                a.exclude_kernel = 1;
                kernel_excluded = true;
                fd = perf_event_open(&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        }
        if (fd < 0)
                return fd;
        r = ring_map_shrinking(fd, cfg->ring_pages, ret);
        if (r < 0) {
                close(fd);
                return r;
        }
        if (ret_kernel_excluded)
                *ret_kernel_excluded = kernel_excluded || a.exclude_kernel;
        return 0;
}

int fp_perf_open_sideband(pid_t tid, struct fp_perf_ring *ret)
{
        struct perf_event_attr a = {0};
        int fd, r;

        attr_common(&a);
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_DUMMY;
        a.sample_type = SIDEBAND_TYPE;
        a.sample_period = 1;
        a.exclude_kernel = 1;
        a.task = 1;
        a.comm = 1;
        a.mmap = 1;
        a.mmap2 = 1;
        a.mmap_data = 0;
        a.watermark = 1;
        a.wakeup_watermark = 1;

        fd = perf_event_open(&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                return fd;
        r = ring_map_shrinking(fd, 2, ret);
        if (r < 0) {
                close(fd);
                return r;
        }
        return 0;
}

void fp_perf_ring_close(struct fp_perf_ring *r)
{
        if (!r)
                return;
        if (r->base) {
                munmap(r->base, r->data_size + (size_t)sysconf(_SC_PAGESIZE));
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

static int parse_sample(const uint8_t *p, size_t size, struct fp_perf_sample *s)
{
        const struct perf_event_header *h = (const void *)p;
        const uint64_t *u = (const uint64_t *)(p + sizeof(*h));
        size_t n = (size - sizeof(*h)) / sizeof(uint64_t);

        /* ip, pid|tid, time, period, nr */
        if (n < 5)
                return -EBADMSG;
        s->misc = h->misc;
        s->ip = u[0];
        s->pid = (uint32_t)u[1];
        s->tid = (uint32_t)(u[1] >> 32);
        s->time = u[2];
        s->period = u[3];
        s->nr = u[4];
        if (s->nr > n - 5)
                return -EBADMSG;
        s->ips = u + 5;
        return 0;
}

static int parse_record(const uint8_t *p, size_t size, struct fp_perf_record *rec)
{
        const struct perf_event_header *h = (const void *)p;
        const uint8_t *body = p + sizeof(*h);
        size_t len = size - sizeof(*h);

        memset(rec, 0, sizeof(*rec));
        rec->type = h->type;
        rec->misc = h->misc;
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
                rec->mmap.prot = PROT_EXEC;
                rec->mmap.filename = (const char *)body + fixed;
                return 0;
        }
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
                if (hdr.size < sizeof(hdr) || hdr.size > head - tail)
                        goto garbage;
                if (off + hdr.size <= r->data_size) {
                        rec = (const uint8_t *)r->base + sysconf(_SC_PAGESIZE) + off;
                } else {
                        ring_copy(r, tail, r->scratch, hdr.size);
                        rec = r->scratch;
                }

                if (hdr.type == PERF_RECORD_SAMPLE) {
                        struct fp_perf_sample s;
                        if (h->sample && parse_sample(rec, hdr.size, &s) == 0)
                                h->sample(userdata, &s);
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

bool fp_perf_have_hw_pmu(void)
{
        return access("/sys/bus/event_source/devices/cpu", F_OK) == 0 ||
               access("/sys/bus/event_source/devices/cpu_core", F_OK) == 0;
}
