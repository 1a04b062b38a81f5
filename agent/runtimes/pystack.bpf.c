// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Python stacks at sample time, the kernel side: see pystack.h.
 *
 * One perf_event program, run by each sampling event the loader attaches
 * it to, before the sample is written (it always keeps the sample). For a
 * process in procs it reads the sampled thread's Python stack
 * (pywalk.bpf.h), PHP stack (phpwalk.bpf.h) or Ruby stack (rubywalk.bpf.h)
 * and writes one record to
 * the ring.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "pystack.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, __u32);
        __type(value, struct fp_pystack_proc);
} procs SEC(".maps");

/* tid -> its PyThreadState, as last found (checked before each use). */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 65536);
        __type(key, __u32);
        __type(value, __u64);
} tstates SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 4 << 20);
} records SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct fp_pystack_record);
} scratch SEC(".maps");

#define PYWALK_TSTATES tstates
#include "pywalk.bpf.h"
#include "phpwalk.bpf.h"
#include "rubywalk.bpf.h"
#include "perlwalk.bpf.h"

SEC("perf_event")
int fp_pystack_sample(struct bpf_perf_event_data *ctx)
{
        __u64 id = bpf_get_current_pid_tgid();
        __u32 tgid = id >> 32, tid = (__u32)id, zero = 0, n;
        struct fp_pystack_proc *p = bpf_map_lookup_elem(&procs, &tgid);
        struct fp_pystack_record *r;

        if (!p)
                return 1;
        r = bpf_map_lookup_elem(&scratch, &zero);
        if (!r)
                return 1;
        r->tid = tid;
        r->tgid = tgid;
        r->time_ns = bpf_ktime_get_ns();
        if (p->kind == FP_PYSTACK_PHP)
                phpwalk_read(p, (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()), r);
        else if (p->kind == FP_PYSTACK_RUBY)
                rubywalk_read(p, pywalk_fsbase(bpf_get_current_task_btf()),
                              (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()), r);
        else if (p->kind == FP_PYSTACK_PERL)
                perlwalk_read(p, pywalk_fsbase(bpf_get_current_task_btf()), r);
        else
                pywalk_read(p, tid, pywalk_fsbase(bpf_get_current_task_btf()), r);
        n = r->n_frames; /* (read back: bounded again for the verifier) */
        if (n > FP_PYSTACK_MAX_FRAMES)
                n = FP_PYSTACK_MAX_FRAMES;
        bpf_ringbuf_output(&records, r,
                           FP_PYSTACK_HEADER_LEN + (__u64)n * sizeof(struct fp_pystack_frame), 0);
        return 1;
}
