/* SPDX-License-Identifier: MIT */
/*
 * The BPF thread tracker's loader; see tracker.h for what the kernel side
 * reports and for the API.
 *
 * Loading follows libbpf-tools: open the skeleton generated at build time
 * (tracker.skel.h, never committed), size the maps, load (the verifier
 * runs here, and CO-RE relocates field offsets against the running
 * kernel's BTF), attach both tracepoints, then hand the ring buffer's
 * epoll fd to the event loop. The ring is consumed on the loop thread, so
 * the callback runs there too and needs no locking.
 *
 * Built without BPF (FP_HAVE_BPF unset: no clang, bpftool or kernel BTF at
 * build time), fp_tracker_new() fails with -EOPNOTSUPP and says why, and
 * the agent uses its fallback.
 */
#include "tracker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FP_HAVE_BPF

#include "bpflog.h"

#include "tracker.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <event2/event.h>

#define TARGETS_MAX 4096
#define RING_BYTES  (256 * 1024) /* ~6500 records: bursts of thousands of forks */
#define VMLINUX_BTF "/sys/kernel/btf/vmlinux"

struct fp_tracker {
        struct tracker_bpf *skel;
        struct ring_buffer *ring;
        struct event *ev;
        fp_tracker_fn fn;
        void *userdata;
};

static int on_record(void *ctx, void *data, size_t len)
{
        struct fp_tracker *tr = ctx;
        struct fp_tracker_event e;

        if (len < sizeof(e))
                return 0;
        memcpy(&e, data, sizeof(e));
        e.comm[sizeof(e.comm) - 1] = 0;
        tr->fn(tr->userdata, &e);
        return 0;
}

static void on_ring(evutil_socket_t fd, short what, void *arg)
{
        struct fp_tracker *tr = arg;
        (void)fd;
        (void)what;
        (void)ring_buffer__consume(tr->ring);
}

/* One line on why loading failed, for the agent's log and status. */
static void load_reason(int r, char *err, size_t err_len)
{
        if (r == -EPERM || r == -EACCES)
                snprintf(err, err_len,
                         "loading BPF programs is not permitted: the agent needs root, or "
                         "CAP_BPF and CAP_PERFMON");
        else
                snprintf(err, err_len, "cannot load the BPF programs: %s%s", strerror(-r),
                         fp_bpflog_suffix());
}

int fp_tracker_new(struct event_base *base, fp_tracker_fn fn, void *userdata,
                   struct fp_tracker **ret, char *err, size_t err_len)
{
        struct fp_tracker *tr;
        int r;

        if (access(VMLINUX_BTF, R_OK) < 0) {
                r = -errno;
                snprintf(err, err_len, "the kernel exposes no BTF: %s: %s", VMLINUX_BTF,
                         strerror(-r));
                return r;
        }
        tr = calloc(1, sizeof(*tr));
        if (!tr) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        tr->fn = fn;
        tr->userdata = userdata;
        fp_bpflog_begin();

        tr->skel = tracker_bpf__open();
        if (!tr->skel) {
                r = -errno;
                snprintf(err, err_len, "cannot open the BPF object: %s", strerror(-r));
                goto fail;
        }
        /* Configure between open and load: map sizes are fixed at load. */
        if ((r = bpf_map__set_max_entries(tr->skel->maps.targets, TARGETS_MAX)) < 0 ||
            (r = bpf_map__set_max_entries(tr->skel->maps.events, RING_BYTES)) < 0) {
                snprintf(err, err_len, "cannot size the BPF maps: %s", strerror(-r));
                goto fail;
        }
        r = tracker_bpf__load(tr->skel);
        if (r < 0) {
                load_reason(r, err, err_len);
                goto fail;
        }
        r = tracker_bpf__attach(tr->skel);
        if (r < 0) {
                snprintf(err, err_len, "cannot attach to the scheduler tracepoints: %s%s",
                         strerror(-r), fp_bpflog_suffix());
                goto fail;
        }
        tr->ring = ring_buffer__new(bpf_map__fd(tr->skel->maps.events), on_record, tr, NULL);
        if (!tr->ring) {
                r = -errno;
                snprintf(err, err_len, "cannot map the BPF ring buffer: %s", strerror(-r));
                goto fail;
        }
        tr->ev =
            event_new(base, ring_buffer__epoll_fd(tr->ring), EV_READ | EV_PERSIST, on_ring, tr);
        if (!tr->ev || event_add(tr->ev, NULL) < 0) {
                r = -ENOMEM;
                snprintf(err, err_len, "out of memory");
                goto fail;
        }
        fp_bpflog_end();
        *ret = tr;
        return 0;
fail:
        fp_bpflog_end();
        fp_tracker_free(tr);
        return r;
}

void fp_tracker_free(struct fp_tracker *tr)
{
        if (!tr)
                return;
        if (tr->ev)
                event_free(tr->ev);
        ring_buffer__free(tr->ring);
        tracker_bpf__destroy(tr->skel);
        free(tr);
}

int fp_tracker_add(struct fp_tracker *tr, pid_t tgid, unsigned flags)
{
        __u32 key = (__u32)tgid, value = flags;
        if (bpf_map_update_elem(bpf_map__fd(tr->skel->maps.targets), &key, &value, BPF_ANY) < 0)
                return -errno;
        return 0;
}

int fp_tracker_remove(struct fp_tracker *tr, pid_t tgid)
{
        __u32 key = (__u32)tgid;
        if (bpf_map_delete_elem(bpf_map__fd(tr->skel->maps.targets), &key) < 0)
                return errno == ENOENT ? 0 : -errno;
        return 0;
}

void fp_tracker_poll(struct fp_tracker *tr)
{
        (void)ring_buffer__consume(tr->ring);
}

void fp_tracker_watch(struct fp_tracker *tr, bool on)
{
        __atomic_store_n(&tr->skel->bss->watch, on ? 1u : 0u, __ATOMIC_RELAXED);
}

uint64_t fp_tracker_dropped(const struct fp_tracker *tr)
{
        return __atomic_load_n(&tr->skel->bss->dropped, __ATOMIC_RELAXED);
}

int fp_tracker_bridge_fd(const struct fp_tracker *tr)
{
        return bpf_program__fd(tr->skel->progs.fp_tracker_bridge);
}

uint64_t fp_tracker_bridge_full(const struct fp_tracker *tr)
{
        return __atomic_load_n(&tr->skel->bss->bridge_full, __ATOMIC_RELAXED);
}

void fp_tracker_unbridge(struct fp_tracker *tr, pid_t tid)
{
        __u32 key = (__u32)tid;
        (void)bpf_map_delete_elem(bpf_map__fd(tr->skel->maps.bridged), &key);
}

int fp_tracker_python(struct fp_tracker *tr, int prog_fd)
{
        __u32 key = 0, fd = (__u32)prog_fd;
        int map = bpf_map__fd(tr->skel->maps.python);

        if (prog_fd < 0)
                return bpf_map_delete_elem(map, &key) < 0 && errno != ENOENT ? -errno : 0;
        return bpf_map_update_elem(map, &key, &fd, BPF_ANY) < 0 ? -errno : 0;
}

#else /* !FP_HAVE_BPF */

struct fp_tracker {
        int unused;
};

int fp_tracker_new(struct event_base *base, fp_tracker_fn fn, void *userdata,
                   struct fp_tracker **ret, char *err, size_t err_len)
{
        (void)base;
        (void)fn;
        (void)userdata;
        (void)ret;
        snprintf(err, err_len,
                 "this agent was built without BPF: clang, bpftool or kernel BTF were missing "
                 "at build time");
        return -EOPNOTSUPP;
}

void fp_tracker_free(struct fp_tracker *tr)
{
        free(tr);
}

int fp_tracker_add(struct fp_tracker *tr, pid_t tgid, unsigned flags)
{
        (void)tr;
        (void)tgid;
        (void)flags;
        return -EOPNOTSUPP;
}

int fp_tracker_remove(struct fp_tracker *tr, pid_t tgid)
{
        (void)tr;
        (void)tgid;
        return -EOPNOTSUPP;
}

void fp_tracker_poll(struct fp_tracker *tr)
{
        (void)tr;
}

void fp_tracker_watch(struct fp_tracker *tr, bool on)
{
        (void)tr;
        (void)on;
}

int fp_tracker_bridge_fd(const struct fp_tracker *tr)
{
        (void)tr;
        return -EOPNOTSUPP;
}

void fp_tracker_unbridge(struct fp_tracker *tr, pid_t tid)
{
        (void)tr;
        (void)tid;
}

int fp_tracker_python(struct fp_tracker *tr, int prog_fd)
{
        (void)tr;
        (void)prog_fd;
        return -EOPNOTSUPP;
}

uint64_t fp_tracker_bridge_full(const struct fp_tracker *tr)
{
        (void)tr;
        return 0;
}

uint64_t fp_tracker_dropped(const struct fp_tracker *tr)
{
        (void)tr;
        return 0;
}

#endif
