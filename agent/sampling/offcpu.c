/* SPDX-License-Identifier: MIT */
/*
 * The off-CPU profiler's loader; see offcpu.h for the model and the API.
 *
 * Loaded on the first target that asks for off-CPU time and kept while
 * any does, as the thread tracker is (tracker.c): open the skeleton, size
 * the maps, load (the verifier runs here; CO-RE relocates against the
 * running kernel's BTF), attach the three tracepoints, hand the ring's
 * epoll fd to the event loop. The kernel wakes the agent only when a
 * megabyte waits; a 100 ms timer reads the rest, so a busy ring costs one
 * wake-up per megabyte rather than one per record.
 */
#include "offcpu.h"
#include "log.h"
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned fp_offcpu_parts(const struct fp_offcpu_record *r)
{
        unsigned n = 0;
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++)
                n += r->weight[i] != 0;
        return n;
}

void fp_offcpu_sample(const struct fp_offcpu_record *r, struct fp_perf_sample *ret)
{
        *ret = (struct fp_perf_sample){.misc = PERF_RECORD_MISC_USER,
                                       .ip = r->ip,
                                       .pid = r->tgid,
                                       .tid = r->tid,
                                       .time = r->time_ns,
                                       .has_regs = true,
                                       .user_ip = r->ip,
                                       .user_sp = r->sp,
                                       .user_bp = r->bp,
                                       .stack = r->stack,
                                       .stack_size = r->stack_len};
}

#ifdef FP_HAVE_BPF

#include "bpflog.h"

#include "offcpu.skel.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <stdbool.h>
#include <event2/event.h>

#define TARGETS_MAX 4096
#define RING_BYTES  (4 << 20) /* about 1000 records of a few KiB of stack */
#define VMLINUX_BTF "/sys/kernel/btf/vmlinux"
/*
 * Python stacks waiting for their stack record, by tid: only records of
 * other CPUs come between the two, so a slot is seldom wanted by two
 * threads at once (the second then loses its Python frames, counted).
 */
#define PY_SLOTS 64

struct py_slot {
        bool full;
        struct fp_pystack_record r;
};

struct fp_offcpu {
        struct offcpu_bpf *skel;
        struct ring_buffer *ring;
        struct event *ev, *tick;
        fp_offcpu_fn fn;
        void *userdata;
        unsigned n_targets;
        uint64_t host_period; /* the host tier's T, 0 off */
        uint64_t records;
        struct py_slot *py; /* PY_SLOTS, from the first Python record on */
        uint64_t py_records, py_unpaired;
};

static struct py_slot *py_slot_of(struct fp_offcpu *o, __u32 tid)
{
        return &o->py[(tid * 2654435761u) % PY_SLOTS];
}

/* Keeps a Python record for its thread's next stack record. */
static void py_keep(struct fp_offcpu *o, const struct fp_offcpu_pyrecord *pr, size_t len)
{
        const struct fp_pystack_record *r = &pr->py;
        struct py_slot *q;

        if (len < FP_OFFCPU_PY_HEADER_LEN || r->n_frames > FP_PYSTACK_MAX_FRAMES ||
            r->n_frames * sizeof(r->frames[0]) > len - FP_OFFCPU_PY_HEADER_LEN)
                return;
        o->py_records++;
        if (!o->py && !(o->py = calloc(PY_SLOTS, sizeof(*o->py)))) {
                o->py_unpaired++;
                return;
        }
        q = py_slot_of(o, r->tid);
        o->py_unpaired += q->full;
        memcpy(&q->r, r, FP_PYSTACK_HEADER_LEN + r->n_frames * sizeof(r->frames[0]));
        q->full = true;
}

/* The Python record of stack record r: its thread's, stamped the same. */
static const struct fp_pystack_record *py_take(struct fp_offcpu *o,
                                               const struct fp_offcpu_record *r)
{
        struct py_slot *q;

        if (!o->py || r->kind == FP_OFFCPU_WEIGHTS)
                return NULL;
        q = py_slot_of(o, r->tid);
        if (!q->full || q->r.tid != r->tid)
                return NULL;
        q->full = false;
        if (q->r.time_ns == r->time_ns)
                return &q->r;
        o->py_unpaired++; /* its own stack record was lost */
        return NULL;
}

static int on_record(void *ctx, void *data, size_t len)
{
        struct fp_offcpu *o = ctx;
        const struct fp_offcpu_record *r = data;

        if (len >= sizeof(__u32) && r->kind == FP_OFFCPU_PYTHON) {
                py_keep(o, data, len);
                return 0;
        }
        /* The ring holds the header and stack_len bytes of stack: never read past it. */
        if (len < FP_OFFCPU_HEADER_LEN || r->stack_len > len - FP_OFFCPU_HEADER_LEN)
                return 0;
        o->records++;
        o->fn(o->userdata, r, py_take(o, r));
        return 0;
}

static void on_ring(evutil_socket_t fd, short what, void *arg)
{
        struct fp_offcpu *o = arg;
        (void)fd;
        (void)what;
        (void)ring_buffer__consume(o->ring);
}

/* Whether the running kernel's BTF has the BTF tracepoint type name. */
static bool has_tracepoint(const char *name)
{
        struct btf *btf = btf__load_vmlinux_btf();
        bool found;

        if (!btf)
                return false;
        found = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF) > 0;
        btf__free(btf);
        return found;
}

/*
 * One line on what the kernel lacks, for the user: the programs need BTF
 * tracepoints (5.5), task storage for tracing programs (5.11),
 * bpf_task_pt_regs (5.15) and ring buffers (5.8).
 */
static void load_reason(int r, char *err, size_t err_len)
{
        /* (For root, EACCES is the verifier's refusal, not a permission.) */
        if (r == -EPERM || (r == -EACCES && geteuid() != 0))
                snprintf(err, err_len,
                         "off-CPU profiling: loading BPF programs is not permitted: the agent "
                         "needs root, or CAP_BPF and CAP_PERFMON");
        else
                snprintf(err, err_len,
                         "off-CPU profiling needs BTF tracepoints, BPF task storage, "
                         "bpf_task_pt_regs and a BPF ring buffer (Linux 5.15 or later), and "
                         "this kernel refused them: %s%s",
                         strerror(-r), fp_bpflog_suffix());
}

int fp_offcpu_new(struct event_base *base, fp_offcpu_fn fn, void *userdata, struct fp_offcpu **ret,
                  char *err, size_t err_len)
{
        struct fp_offcpu *o;
        int r;

        if (access(VMLINUX_BTF, R_OK) < 0) {
                r = -errno;
                snprintf(err, err_len, "off-CPU profiling needs kernel BTF: %s: %s", VMLINUX_BTF,
                         strerror(-r));
                return r;
        }
        o = calloc(1, sizeof(*o));
        if (!o) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        o->fn = fn;
        o->userdata = userdata;
        fp_bpflog_begin();
        /* Without the rseq_update tracepoint, after-call stacks are sampled at the switch-out. */
        bool resume = has_tracepoint("btf_trace_rseq_update");
        /*
         * With the Python walk first (bpf_loop: Linux 5.17); a kernel that
         * refuses it still gets off-CPU time, with native stacks.
         */
        for (int python = 1; python >= 0; python--) {
                o->skel = offcpu_bpf__open();
                if (!o->skel) {
                        r = -errno;
                        snprintf(err, err_len, "cannot open the off-CPU BPF object: %s",
                                 strerror(-r));
                        goto fail;
                }
                if ((r = bpf_map__set_max_entries(o->skel->maps.targets, TARGETS_MAX)) < 0 ||
                    (r = bpf_map__set_max_entries(o->skel->maps.records, RING_BYTES)) < 0) {
                        snprintf(err, err_len, "cannot size the off-CPU BPF maps: %s",
                                 strerror(-r));
                        goto fail;
                }
                if (!resume)
                        bpf_program__set_autoload(o->skel->progs.fp_offcpu_resume, false);
                o->skel->rodata->python = python;
                if ((r = offcpu_bpf__load(o->skel)) == 0)
                        break;
                if (!python || r == -EPERM || (r == -EACCES && geteuid() != 0)) {
                        load_reason(r, err, err_len);
                        goto fail;
                }
                fp_log(LOG_WARNING,
                       "off-CPU profiling: this kernel refused the Python and PHP stack walks "
                       "(%s%s); off-CPU stacks of those processes show native frames only",
                       strerror(-r), fp_bpflog_suffix());
                offcpu_bpf__destroy(o->skel);
                o->skel = NULL;
        }
        if ((r = offcpu_bpf__attach(o->skel)) < 0) {
                snprintf(err, err_len,
                         "off-CPU profiling: cannot attach to sched_switch, sched_wakeup and "
                         "sys_exit: %s%s",
                         strerror(-r), fp_bpflog_suffix());
                goto fail;
        }
        o->skel->bss->resume_hook = resume;
        o->ring = ring_buffer__new(bpf_map__fd(o->skel->maps.records), on_record, o, NULL);
        if (!o->ring) {
                r = -errno;
                snprintf(err, err_len, "cannot map the off-CPU ring buffer: %s", strerror(-r));
                goto fail;
        }
        o->ev = event_new(base, ring_buffer__epoll_fd(o->ring), EV_READ | EV_PERSIST, on_ring, o);
        o->tick = event_new(base, -1, EV_PERSIST, on_ring, o);
        struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
        if (!o->ev || !o->tick || event_add(o->ev, NULL) < 0 || event_add(o->tick, &tv) < 0) {
                r = -ENOMEM;
                snprintf(err, err_len, "out of memory");
                goto fail;
        }
        fp_bpflog_end();
        *ret = o;
        return 0;
fail:
        fp_bpflog_end();
        fp_offcpu_free(o);
        return r;
}

void fp_offcpu_free(struct fp_offcpu *o)
{
        if (!o)
                return;
        if (o->ev)
                event_free(o->ev);
        if (o->tick)
                event_free(o->tick);
        ring_buffer__free(o->ring);
        offcpu_bpf__destroy(o->skel);
        free(o->py);
        free(o);
}

int fp_offcpu_add(struct fp_offcpu *o, pid_t tgid, uint64_t period)
{
        __u32 key = (__u32)tgid;
        struct fp_offcpu_target v = {.period = period};

        if (!period || period > FP_OFFCPU_PERIOD_MAX)
                return -EINVAL;
        if (bpf_map_update_elem(bpf_map__fd(o->skel->maps.targets), &key, &v, BPF_NOEXIST) < 0)
                return errno == EEXIST ? 0 : -errno;
        o->n_targets++;
        return 0;
}

int fp_offcpu_remove(struct fp_offcpu *o, pid_t tgid)
{
        __u32 key = (__u32)tgid;

        (void)ring_buffer__consume(o->ring); /* its last records first */
        if (bpf_map_delete_elem(bpf_map__fd(o->skel->maps.targets), &key) < 0)
                return errno == ENOENT ? 0 : -errno;
        o->n_targets--;
        return 0;
}

void fp_offcpu_counts(const struct fp_offcpu *o, pid_t tgid, struct fp_offcpu_target *ret)
{
        __u32 key = (__u32)tgid;

        if (bpf_map_lookup_elem(bpf_map__fd(o->skel->maps.targets), &key, ret) < 0)
                memset(ret, 0, sizeof(*ret));
}

void fp_offcpu_poll(struct fp_offcpu *o)
{
        (void)ring_buffer__consume(o->ring);
}

int fp_offcpu_host(struct fp_offcpu *o, uint64_t period)
{
        int n = libbpf_num_possible_cpus();
        struct fp_offcpu_target *v;
        __u32 zero = 0;
        int r = 0;

        if (period > FP_OFFCPU_PERIOD_MAX)
                return -EINVAL;
        if (n <= 0)
                return n < 0 ? n : -ENODEV;
        /* Every CPU's copy gets the period and starts its counts from 0. */
        if (!(v = calloc((size_t)n, sizeof(*v))))
                return -ENOMEM;
        for (int i = 0; i < n; i++)
                v[i].period = period;
        if (!period)
                (void)ring_buffer__consume(o->ring); /* its last records first */
        if (bpf_map_update_elem(bpf_map__fd(o->skel->maps.host), &zero, v, BPF_ANY) < 0)
                r = -errno;
        else
                o->host_period = period;
        free(v);
        return r;
}

void fp_offcpu_host_counts(const struct fp_offcpu *o, struct fp_offcpu_target *ret)
{
        int n = libbpf_num_possible_cpus();
        struct fp_offcpu_target *v;
        __u32 zero = 0;

        memset(ret, 0, sizeof(*ret));
        if (n <= 0 || !(v = calloc((size_t)n, sizeof(*v))))
                return;
        if (bpf_map_lookup_elem(bpf_map__fd(o->skel->maps.host), &zero, v) == 0) {
                ret->period = o->host_period;
                for (int i = 0; i < n; i++) {
                        ret->parts += v[i].parts;
                        ret->kept += v[i].kept;
                        ret->lost_ring += v[i].lost_ring;
                        ret->lost_copy += v[i].lost_copy;
                        ret->lost_exited += v[i].lost_exited;
                        ret->lost_changed += v[i].lost_changed;
                        ret->lost_ns += v[i].lost_ns;
                }
        }
        free(v);
}

bool fp_offcpu_host_on(const struct fp_offcpu *o)
{
        return o->host_period != 0;
}

unsigned fp_offcpu_targets(const struct fp_offcpu *o)
{
        return o->n_targets;
}

uint64_t fp_offcpu_records(const struct fp_offcpu *o)
{
        return o->records;
}

int fp_offcpu_python_map(const struct fp_offcpu *o)
{
        return o->skel->rodata->python ? bpf_map__fd(o->skel->maps.py_procs) : -1;
}

void fp_offcpu_python_counts(const struct fp_offcpu *o, uint64_t *records, uint64_t *unpaired)
{
        *records = o->py_records;
        *unpaired = o->py_unpaired;
}

#else /* !FP_HAVE_BPF */

struct fp_offcpu {
        int unused;
};

int fp_offcpu_new(struct event_base *base, fp_offcpu_fn fn, void *userdata, struct fp_offcpu **ret,
                  char *err, size_t err_len)
{
        (void)base;
        (void)fn;
        (void)userdata;
        (void)ret;
        snprintf(err, err_len,
                 "off-CPU profiling needs BPF, and this agent was built without it (clang, "
                 "bpftool or kernel BTF were missing at build time)");
        return -EOPNOTSUPP;
}

void fp_offcpu_free(struct fp_offcpu *o)
{
        (void)o;
}

int fp_offcpu_add(struct fp_offcpu *o, pid_t tgid, uint64_t period)
{
        (void)o;
        (void)tgid;
        (void)period;
        return -EOPNOTSUPP;
}

int fp_offcpu_remove(struct fp_offcpu *o, pid_t tgid)
{
        (void)o;
        (void)tgid;
        return 0;
}

void fp_offcpu_counts(const struct fp_offcpu *o, pid_t tgid, struct fp_offcpu_target *ret)
{
        (void)o;
        (void)tgid;
        memset(ret, 0, sizeof(*ret));
}

void fp_offcpu_poll(struct fp_offcpu *o)
{
        (void)o;
}

unsigned fp_offcpu_targets(const struct fp_offcpu *o)
{
        (void)o;
        return 0;
}

uint64_t fp_offcpu_records(const struct fp_offcpu *o)
{
        (void)o;
        return 0;
}

int fp_offcpu_host(struct fp_offcpu *o, uint64_t period)
{
        (void)o;
        (void)period;
        return -EOPNOTSUPP;
}

void fp_offcpu_host_counts(const struct fp_offcpu *o, struct fp_offcpu_target *ret)
{
        (void)o;
        memset(ret, 0, sizeof(*ret));
}

bool fp_offcpu_host_on(const struct fp_offcpu *o)
{
        (void)o;
        return false;
}

int fp_offcpu_python_map(const struct fp_offcpu *o)
{
        (void)o;
        return -1;
}

void fp_offcpu_python_counts(const struct fp_offcpu *o, uint64_t *records, uint64_t *unpaired)
{
        (void)o;
        *records = 0;
        *unpaired = 0;
}

#endif
