/* SPDX-License-Identifier: MIT */
/* The bridge: see bridge.h. */
#include "bridge.h"
#include "procfs.h"

#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CPUS 1024

struct fp_bridge {
        struct event_base *base;
        struct fp_perf_config cfg;
        int prog_fd;
        fp_bridge_fn fn;
        fp_bridge_wake_fn wake;
        void *userdata;
        unsigned n_cpus, open;
        uint64_t samples, lost;
        struct fp_perf_ring *rings; /* fd -1: CPU offline */
        struct event **evs;
};

static void handle_sample(void *userdata, const struct fp_perf_sample *s)
{
        struct fp_bridge *b = userdata;
        b->samples++;
        b->fn(b->userdata, s, b->cfg.period);
}

static void handle_record(void *userdata, const struct fp_perf_record *r)
{
        struct fp_bridge *b = userdata;
        if (r->type == PERF_RECORD_LOST || r->type == PERF_RECORD_LOST_SAMPLES)
                b->lost += r->lost.lost;
}

static const struct fp_perf_handlers handlers = {.sample = handle_sample, .record = handle_record};

void fp_bridge_drain(struct fp_bridge *b)
{
        for (unsigned i = 0; b && i < b->n_cpus; i++)
                if (b->rings[i].fd >= 0 && fp_perf_ring_drain(&b->rings[i], &handlers, b) < 0)
                        b->lost++; /* garbage in the ring: at least one sample */
}

static void on_ring(evutil_socket_t fd, short what, void *arg)
{
        struct fp_bridge *b = arg;
        (void)fd;
        (void)what;
        b->wake(b->userdata);
}

static void cpu_close(struct fp_bridge *b, unsigned i)
{
        if (b->evs[i]) {
                event_free(b->evs[i]);
                b->evs[i] = NULL;
        }
        if (b->rings[i].fd >= 0) {
                fp_perf_ring_close(&b->rings[i]);
                b->open--;
        }
        b->rings[i].fd = -1;
}

static int cpu_open(struct fp_bridge *b, unsigned i)
{
        int r = fp_perf_open_cpu_bridge(&b->cfg, (int)i, b->prog_fd, &b->rings[i]);

        if (r < 0) {
                b->rings[i].fd = -1;
                return r;
        }
        b->open++;
        b->evs[i] = event_new(b->base, b->rings[i].fd, EV_READ | EV_PERSIST, on_ring, b);
        if (!b->evs[i] || event_add(b->evs[i], NULL) < 0) {
                cpu_close(b, i);
                return -ENOMEM;
        }
        return 0;
}

void fp_bridge_check_cpus(struct fp_bridge *b)
{
        bool online[MAX_CPUS];

        if (fp_proc_online_cpus(online, (int)b->n_cpus) < 0)
                return;
        for (unsigned i = 0; i < b->n_cpus; i++) {
                if (b->rings[i].fd >= 0 && !online[i]) {
                        b->wake(b->userdata);
                        cpu_close(b, i);
                } else if (b->rings[i].fd < 0 && online[i]) {
                        (void)cpu_open(b, i);
                }
        }
}

uint64_t fp_bridge_period(const struct fp_bridge *b)
{
        return b->cfg.period;
}

unsigned fp_bridge_cpus(const struct fp_bridge *b)
{
        return b->open;
}

uint64_t fp_bridge_samples(const struct fp_bridge *b)
{
        return b->samples;
}

uint64_t fp_bridge_lost(const struct fp_bridge *b)
{
        return b->lost;
}

int fp_bridge_set_period(struct fp_bridge *b, uint64_t period)
{
        int r = 0;

        /* What the rings hold was taken at the old period. */
        b->wake(b->userdata);
        b->cfg.period = period;
        for (unsigned i = 0; i < b->n_cpus; i++)
                if (b->rings[i].fd >= 0) {
                        int e = fp_perf_set_period(&b->rings[i], period);
                        if (e < 0 && !r)
                                r = e;
                }
        return r;
}

int fp_bridge_new(struct event_base *base, const struct fp_perf_config *tmpl, uint64_t period,
                  int prog_fd, fp_bridge_fn fn, fp_bridge_wake_fn wake, void *userdata,
                  struct fp_bridge **ret, char *err, size_t err_len)
{
        struct fp_bridge *b = calloc(1, sizeof(*b));
        bool online[MAX_CPUS];
        long n = sysconf(_SC_NPROCESSORS_CONF);
        int r = 0, first_error = 0;

        if (!b || n <= 0)
                goto nomem;
        b->base = base;
        b->prog_fd = prog_fd;
        b->cfg = *tmpl;
        b->cfg.freq = 0;
        b->cfg.period = period;
        b->cfg.n_members = 0;
        b->cfg.kernel_frames = false;
        /*
         * 512 KiB per CPU: it holds about 30 samples with a 16 KiB stack copy
         * each, and wakes the agent at a quarter full. Only the first moments
         * of new threads are written, so it is mostly empty (256 KiB lost a
         * sample in a hundred to a storm of births).
         */
        b->cfg.ring_pages = (unsigned)(512 * 1024 / sysconf(_SC_PAGESIZE));
        b->fn = fn;
        b->wake = wake;
        b->userdata = userdata;
        b->n_cpus = n <= MAX_CPUS ? (unsigned)n : MAX_CPUS;
        b->rings = calloc(b->n_cpus, sizeof(*b->rings));
        b->evs = calloc(b->n_cpus, sizeof(*b->evs));
        if (!b->rings || !b->evs)
                goto nomem;
        for (unsigned i = 0; i < b->n_cpus; i++)
                b->rings[i].fd = -1;
        if (fp_proc_online_cpus(online, (int)b->n_cpus) < 0) {
                snprintf(err, err_len, "cannot read /sys/devices/system/cpu/online");
                fp_bridge_free(b);
                return -ENOENT;
        }
        for (unsigned i = 0; i < b->n_cpus; i++)
                if (online[i] && (r = cpu_open(b, i)) < 0 && !first_error)
                        first_error = r;
        if (!b->open) {
                r = first_error ? first_error : -ENODEV;
                snprintf(err, err_len, "cannot open the bridge's per-CPU events: %s", strerror(-r));
                fp_bridge_free(b);
                return r;
        }
        *ret = b;
        return 0;
nomem:
        snprintf(err, err_len, "out of memory");
        fp_bridge_free(b);
        return -ENOMEM;
}

void fp_bridge_free(struct fp_bridge *b)
{
        if (!b)
                return;
        for (unsigned i = 0; b->rings && b->evs && i < b->n_cpus; i++)
                cpu_close(b, i);
        free(b->rings);
        free(b->evs);
        free(b);
}
