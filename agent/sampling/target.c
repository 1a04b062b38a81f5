/* SPDX-License-Identifier: MIT */
/*
 * A profiled process: starting and freeing it, reading its rings (samples
 * into the aggregator, side-band records into the thread table and the
 * mappings), and its accessors; see target.h for the thread life cycle.
 * The thread table lives in threads.c, the export of buckets to pprof and
 * to the store in export.c; target-internal.h is what the three share.
 *
 * All of it runs on the agent's one event-loop thread: ring callbacks,
 * the rescan timer and the control requests that dump or stop a target
 * never run concurrently, so nothing here locks.
 */
#include "target-internal.h"
#include "perfmap.h"
#include "procfs.h"
#include "targetconf.h"
#include "unwind.h"
#include "util.h"
#include "aggregate.h"
#include "maps.h"
#include "pprof.h"
#include "store.h"
#include "symbols.h"

#include <dirent.h>
#include <errno.h>
#include <sys/sysmacros.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * The mapping of addr, re-reading /proc/PID/maps on a miss (a mapping newer
 * than our view, from dlopen), at most every 100 ms and at most once per
 * call site's *reloaded.
 */
static uint32_t find_mapping(struct fp_target *t, uint64_t addr, bool *reloaded)
{
        uint32_t idx = fp_maps_find(t->maps, addr);
        uint64_t now;

        if (idx || *reloaded)
                return idx;
        *reloaded = true;
        now = fp_now_ns(CLOCK_MONOTONIC);
        if (now - t->maps_reload_ns <= 100000000ULL)
                return 0;
        t->maps_reload_ns = now;
        (void)fp_maps_load_proc(t->maps);
        return fp_maps_find(t->maps, addr);
}

static void resolve_frames(void *userdata, struct fp_frame *frames, uint32_t n)
{
        struct fp_target *t = userdata;
        bool reloaded = false;

        for (uint32_t i = 0; i < n; i++) {
                if (frames[i].flags & FP_FRAME_KERNEL_TIME)
                        continue;
                frames[i].mapping = find_mapping(t, frames[i].addr, &reloaded);
                if (!frames[i].mapping) {
                        t->st.unresolved++;
                        continue;
                }
                /* Load the symbols while the file is surely still there. */
                (void)fp_maps_symbolize(t->maps, frames[i].mapping, frames[i].addr, NULL);
        }
}

/* The unwinder's view of a code address: its mapping's CFI table, or none. */
static void lookup_code(void *userdata, uint64_t ip, struct fp_unwind_code *ret)
{
        struct fp_target *t = userdata;
        bool reloaded = false;
        uint32_t idx = find_mapping(t, ip, &reloaded);
        struct fp_mapping *x;
        struct fp_symtab *st;

        *ret = (struct fp_unwind_code){0};
        if (!idx)
                return;
        x = fp_maps_get(t->maps, idx);
        if (x->kind != FP_MAPPING_FILE && x->kind != FP_MAPPING_VDSO)
                return;
        ret->file_backed = true;
        st = fp_maps_symtab(t->maps, idx);
        if (st && fp_symtab_offset_to_vaddr(st, ip - x->start + x->pgoff, &ret->vaddr) == 0)
                ret->cfi = fp_symtab_cfi(st);
}

/*
 * Frame n of a stack at code address ip: the leaf (n == 0) is where the
 * thread was; every frame below it is a return address, stepped back into
 * the call so that it names the caller's line and function even when the
 * call was the function's last instruction.
 */
static struct fp_frame code_frame(uint32_t n, uint64_t ip)
{
        return (struct fp_frame){.addr = n == 0 ? ip : ip - 1};
}

/*
 * The user part of a sample's stack into f (n frames so far), from the
 * stack copy (auto, dwarf), or from the kernel's frame-pointer callchain
 * with the leaf fixed up (fp). Returns the new n.
 */
static uint32_t user_frames(struct fp_target *t, const struct fp_perf_sample *s, struct fp_frame *f,
                            uint32_t n, const uint64_t *chain, size_t n_chain)
{
        struct fp_unwind_regs regs = {s->user_ip, s->user_sp, s->user_bp};
        uint64_t ips[MAX_FRAMES];
        size_t n_ips = 0;

        t->st.stack_bytes += s->stack_size;
        if (t->cfg.unwind == FP_UNWIND_FP || !s->has_regs) {
                uint64_t ra;
                for (size_t i = 0; i < n_chain && n_ips < MAX_FRAMES; i++)
                        ips[n_ips++] = chain[i];
                if (s->has_regs && n_ips && ips[0] == s->user_ip && n_ips < MAX_FRAMES &&
                    fp_unwind_fix_leaf(&regs, s->stack, s->stack_size, lookup_code, t,
                                       n_ips > 1 ? ips[1] : 0, &ra)) {
                        memmove(ips + 2, ips + 1, (n_ips - 1) * sizeof(ips[0]));
                        ips[1] = ra;
                        n_ips++;
                        t->st.leaf_fixups++;
                }
        } else {
                struct fp_unwind_result res;
                fp_unwind_user(t->cfg.unwind, &regs, s->stack, s->stack_size, lookup_code, t, ips,
                               MAX_FRAMES - n - 1, &res);
                n_ips = res.n;
                t->st.frames_cfi += res.by_cfi;
                t->st.frames_fp += res.by_fp;
                if (res.end == FP_UNWIND_END_ROOT) {
                        t->st.unwound_root++;
                } else if (res.end == FP_UNWIND_END_STACK_SHORT) {
                        t->st.stack_copy_short++;
                } else {
                        t->st.unwind_failed++;
                }
                for (size_t i = 0; i < n_ips && n < MAX_FRAMES - 1; i++, n++)
                        f[n] = code_frame(n, ips[i]);
                if (res.end != FP_UNWIND_END_ROOT)
                        f[n++] = (struct fp_frame){.flags = FP_FRAME_TRUNCATED};
                return n;
        }
        for (size_t i = 0; i < n_ips && n < MAX_FRAMES; i++, n++)
                f[n] = code_frame(n, ips[i]);
        return n;
}

static void handle_sample(void *userdata, const struct fp_perf_sample *s)
{
        struct fp_target *t = userdata;
        struct fp_frame *f = t->frames;
        uint32_t n = 0;
        uint64_t context = PERF_CONTEXT_USER;
        bool in_kernel = (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
        uint32_t first_real;
        const uint64_t *user = NULL;
        size_t n_user = 0;

        if (t->revoked) {
                t->st.revoked++;
                return;
        }
        /* Time spent in the kernel with kernel frames excluded: one synthetic leaf. */
        if (in_kernel && !t->cfg.kernel_frames)
                f[n++] = (struct fp_frame){.flags = FP_FRAME_KERNEL_TIME};
        first_real = n;

        for (uint64_t i = 0; i < s->nr && n < MAX_FRAMES; i++) {
                uint64_t ip = s->ips[i];
                if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
                        context = ip;
                        if (context == PERF_CONTEXT_USER && t->cfg.stack_bytes) {
                                /* The user part is unwound (or fixed up) below. */
                                user = s->ips + i + 1;
                                n_user = s->nr - i - 1;
                                break;
                        }
                        continue;
                }
                if (context != PERF_CONTEXT_USER && context != PERF_CONTEXT_KERNEL)
                        continue;
                if (context == PERF_CONTEXT_KERNEL && !t->cfg.kernel_frames)
                        continue;
                f[n] = code_frame(n, ip);
                n++;
        }
        if (t->cfg.stack_bytes && (s->has_regs || user))
                n = user_frames(t, s, f, n, user, n_user);
        if (n == first_real) {
                /* No callchain: keep the sample at its ip (or as [unknown]) rather than drop it. */
                t->st.unwind_empty++;
                if (n == 0 || (s->ip && t->cfg.kernel_frames))
                        f[n++] = (struct fp_frame){.addr = s->ip};
        }
        int r = fp_agg_add(t->agg, (pid_t)s->tid, fp_maps_epoch(t->maps), f, n, s->period,
                           s->n_counters ? s->counters : NULL, resolve_frames, t);
        if (r == -ENOSPC) {
                /* The bucket's stack table is full: the time is kept, under one stand-in. */
                t->st.stacks_over_limit++;
                f[0] = (struct fp_frame){.flags = FP_FRAME_OVERFLOW};
                r = fp_agg_add(t->agg, (pid_t)s->tid, 0, f, 1, s->period,
                               s->n_counters ? s->counters : NULL, NULL, NULL);
        }
        if (r == 0) {
                t->st.samples++;
                t->st.value += s->period;
                for (unsigned i = 0; i < s->n_counters; i++)
                        t->st.counter_total[i] += s->counters[i];
                t->st.time_enabled += s->d_enabled;
                t->st.time_running += s->d_running;
        } else {
                t->st.dropped_nomem++;
        }
}

static void handle_record(void *userdata, const struct fp_perf_record *r)
{
        struct fp_target *t = userdata;
        struct fp_thread *th;

        switch (r->type) {
        case PERF_RECORD_LOST:
        case PERF_RECORD_LOST_SAMPLES:
                t->st.lost += r->lost.lost;
                break;
        case PERF_RECORD_THROTTLE:
                t->st.throttled++;
                break;
        case PERF_RECORD_FORK:
                /*
                 * The fallback tracker: a new thread of the target, or (followed
                 * only when asked) a child process. With BPF the tracker reports both.
                 */
                if (t->bpf_tracked || t->st.state != FP_TARGET_RUNNING)
                        break;
                if ((pid_t)r->task.pid == t->pid && r->task.tid != r->task.pid)
                        (void)fp_target_thread_born(t, (pid_t)r->task.tid, r->task.time);
                else if ((pid_t)r->task.pid != t->pid && (pid_t)r->task.ppid == t->pid &&
                         r->task.tid == r->task.pid && t->follow_children && t->on_child)
                        t->on_child(t->child_userdata, t, (pid_t)r->task.pid);
                break;
        case PERF_RECORD_EXIT:
                th = fp_thread_find(t, (pid_t)r->task.tid);
                if (th && th->live && (pid_t)r->task.pid == t->pid) {
                        th->exit_pending = true;
                        t->exits_pending = true;
                }
                break;
        case PERF_RECORD_COMM:
                /*
                 * An exec: a user's target must still be the user's. The records
                 * after this one (samples of the new program) are in order behind it.
                 */
                if ((r->misc & PERF_RECORD_MISC_COMM_EXEC) && (pid_t)r->comm.pid == t->pid &&
                    t->guard && !t->revoked) {
                        uid_t now;
                        if (fp_proc_owner(t->pid, &now) < 0 || now != t->guard)
                                t->revoked = true;
                }
                th = fp_thread_find(t, (pid_t)r->comm.tid);
                if (th)
                        snprintf(th->comm, sizeof(th->comm), "%s", r->comm.comm);
                if ((pid_t)r->comm.tid == t->pid)
                        snprintf(t->comm, sizeof(t->comm), "%s", r->comm.comm);
                break;
        case PERF_RECORD_MMAP:
        case PERF_RECORD_MMAP2:
                if ((pid_t)r->mmap.pid == t->pid && (r->mmap.prot & 4 /* PROT_EXEC */))
                        (void)fp_maps_add(t->maps, r->mmap.addr, r->mmap.len, r->mmap.pgoff,
                                          makedev(r->mmap.maj, r->mmap.min), r->mmap.ino,
                                          r->mmap.filename);
                break;
        default:
                break;
        }
}

static const struct fp_perf_handlers handlers = {
    .sample = handle_sample,
    .record = handle_record,
};

void fp_target_drain_ring(struct fp_target *t, struct fp_perf_ring *ring)
{
        if (fp_perf_ring_drain(ring, &handlers, t) == -EBADMSG)
                t->st.lost++;
}

void fp_target_on_sideband(evutil_socket_t fd, short what, void *arg)
{
        struct fp_thread *th = arg;
        struct fp_target *t = th->target;
        (void)fd;
        (void)what;

        fp_target_drain_ring(t, &th->sideband);
        fp_target_reap_exits(t);
        /* No EXIT record (it can be lost), but the task is gone: the hangup tells. */
        if (th->live && !fp_perf_ring_pending(&th->sideband) && fp_perf_ring_hangup(&th->sideband))
                fp_thread_detach(th);
        fp_target_reap_exits(t);
        fp_target_check_exited(t);
}

void fp_target_drain_sampler(struct fp_target *t, struct fp_thread *th)
{
        uint64_t n = t->st.samples;

        fp_target_drain_ring(t, &th->sampler);
        /* Only this thread's samples are in its ring, taken at th->period. */
        if (th->period)
                th->period_debt +=
                    (int64_t)(t->st.samples - n) * ((int64_t)th->period - (int64_t)t->cfg.period);
}

/*
 * A fixed period can lock step with regular work (a loop that runs as
 * long as the period samples the same phase every time). A wake-up (at
 * most every 100 ms) gives the thread's sampling event a new period,
 * 2.5-5% shorter or longer than the configured one: the phase then drifts
 * by a fortieth to a twentieth of a period per sample, a whole period
 * within forty samples, which is what breaks the lock step (a step that
 * could be near 0 left a phase standing: one function of two in turn got
 * 45-54% instead of 50; with these, 49-51; with none, 36-74).
 *
 * A sample counts for the configured period (the timer events cpu-clock
 * and task-clock report the period they were opened with whatever it is
 * now), so a thread's count and value follow its mean period: a random
 * walk of periods leaves them about 1% off in a few seconds (four equal
 * threads' shares 0.2-0.3 points apart, where perf's fixed period gives
 * 0.03). So the size of each step is random but its side is not: the
 * thread's debt (the periods its samples were taken at, less as many
 * configured ones) says whether it has had too few samples (a shorter
 * period next) or too many (a longer one), which keeps its count as near
 * the exact one as one step can take it: 5% of the samples of 100 ms.
 */
static void jitter_period(struct fp_target *t, struct fp_thread *th)
{
        uint64_t p = t->cfg.period, x, now = fp_now_ns(CLOCK_MONOTONIC);

        /*
         * At most every 100 ms per thread: the ioctl costs an IPI to the
         * thread's CPU, and a phase that drifts every tenth of a second is
         * drift enough.
         */
        if (t->cfg.freq || p < 8 || !th->live || now - th->jitter_ns < 100000000ULL)
                return;
        th->jitter_ns = now;
        /* xorshift64*: no need for more than decorrelation here. */
        x = t->jitter_state ? t->jitter_state : (now | 1) ^ (uint64_t)th->tid;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        t->jitter_state = x;
        x *= 0x2545f4914f6cdd1dULL;
        uint64_t step = p / 40 + (x >> 11) % (p / 40 + 1);
        uint64_t np = th->period_debt > 0 ? p - step : p + step;
        if (fp_perf_set_period(&th->sampler, np) == 0)
                th->period = np;
}

void fp_target_on_sampler(evutil_socket_t fd, short what, void *arg)
{
        struct fp_thread *th = arg;
        struct fp_target *t = th->target;
        (void)fd;
        (void)what;

        /* Mappings and names first, so the samples resolve against them. */
        fp_target_drain_ring(t, &th->sideband);
        fp_target_drain_sampler(t, th);
        jitter_period(t, th);
        fp_target_reap_exits(t);
        if (th->live && !fp_perf_ring_pending(&th->sampler) && fp_perf_ring_hangup(&th->sampler))
                fp_thread_detach(th);
        fp_target_reap_exits(t);
        fp_target_check_exited(t);
}

void fp_target_drain(struct fp_target *t)
{
        for (size_t i = 0; i < t->n_threads; i++)
                if (t->threads[i]->live)
                        fp_target_drain_ring(t, &t->threads[i]->sideband);
        for (size_t i = 0; i < t->n_threads; i++)
                if (t->threads[i]->live)
                        fp_target_drain_sampler(t, t->threads[i]);
        fp_target_reap_exits(t);
        fp_target_check_exited(t);
}

int fp_target_start(struct event_base *base, struct fp_symcache *cache, pid_t pid,
                    const struct fp_perf_config *cfg, struct fp_target **ret, char *err,
                    size_t err_len)
{
        struct fp_target *t;
        char path[64], buf[4096], reason[256];
        int r, first_error = 0;

        t = calloc(1, sizeof(*t));
        if (!t) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        t->base = base;
        t->cache = cache;
        t->pid = pid;
        t->cfg = *cfg;
        t->starttime = fp_proc_stat(pid, NULL);
        t->st.state = FP_TARGET_RUNNING;
        t->st.start_ns = fp_now_ns(CLOCK_REALTIME);
        if (!t->starttime) {
                snprintf(err, err_len, "no such process: %d", (int)pid);
                free(t);
                return -ESRCH;
        }
        (void)fp_proc_comm(pid, pid, t->comm, sizeof(t->comm));
        snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
        ssize_t n = readlink(path, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = 0;
        t->exe = strdup(buf);
        r = fp_perf_check_events(&t->cfg, pid, t->left_out, sizeof(t->left_out), err, err_len);
        if (r < 0) {
                free(t->exe);
                free(t);
                return r;
        }
        t->maps = fp_maps_new(pid, cache);
        t->agg = fp_agg_new(t->cfg.n_members);
        if (t->agg)
                fp_agg_set_limit(t->agg, FP_TARGET_MAX_STACKS);
        t->ev_rescan = event_new(base, -1, EV_PERSIST, fp_target_on_rescan, t);
        t->ev_retry = event_new(base, -1, 0, fp_target_on_retry, t);
        if (!t->exe || !t->maps || !t->agg || !t->ev_rescan || !t->ev_retry) {
                snprintf(err, err_len, "out of memory");
                fp_target_free(t);
                return -ENOMEM;
        }
        r = fp_maps_load_proc(t->maps);
        if (r < 0) {
                snprintf(err, err_len, "cannot read the mappings of %d: %s", (int)pid,
                         strerror(-r));
                fp_target_free(t);
                return r == -ENOENT ? -ESRCH : r;
        }

        /* Threads may be born while we attach: fp_target_rescan until a pass finds none new. */
        for (int pass = 0; pass < 10; pass++) {
                r = fp_target_rescan(t, &first_error);
                if (r <= 0)
                        break;
        }
        if (t->st.threads_live == 0) {
                if (first_error)
                        snprintf(
                            err, err_len, "%s",
                            fp_perf_explain_error(first_error, &t->cfg, reason, sizeof(reason)));
                else
                        snprintf(err, err_len, "no such process: %d", (int)pid);
                r = first_error ? first_error : -ESRCH;
                fp_target_free(t);
                return r;
        }
        struct timeval tv = {.tv_sec = RESCAN_INTERVAL};
        event_add(t->ev_rescan, &tv);
        *ret = t;
        return 0;
}

void fp_target_free(struct fp_target *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_threads; i++) {
                struct fp_thread *th = t->threads[i];
                if (th->ev_sampler)
                        event_free(th->ev_sampler);
                if (th->ev_sideband)
                        event_free(th->ev_sideband);
                fp_perf_ring_close(&th->sampler);
                fp_perf_ring_close(&th->sideband);
                free(th);
        }
        free(t->threads);
        if (t->ev_rescan)
                event_free(t->ev_rescan);
        if (t->ev_retry)
                event_free(t->ev_retry);
        fp_agg_free(t->agg);
        fp_maps_free(t->maps);
        free(t->exe);
        fp_perfmap_free(t->perfmap);
        free(t);
}

pid_t fp_target_pid(const struct fp_target *t)
{
        return t->pid;
}

const char *fp_target_comm(const struct fp_target *t)
{
        return t->comm;
}

const char *fp_target_exe(const struct fp_target *t)
{
        return t->exe;
}

uint64_t fp_target_starttime(const struct fp_target *t)
{
        return t->starttime;
}

const struct fp_perf_config *fp_target_config(const struct fp_target *t)
{
        return &t->cfg;
}

void fp_target_set_service(struct fp_target *t, const char *service)
{
        snprintf(t->service, sizeof(t->service), "%s", service ? service : "");
}

const char *fp_target_service(const struct fp_target *t)
{
        return t->service;
}

void fp_target_guard(struct fp_target *t, uid_t user)
{
        t->guard = user;
}

uid_t fp_target_guarded_for(const struct fp_target *t)
{
        return t->guard;
}

bool fp_target_revoked(const struct fp_target *t)
{
        return t->revoked;
}

const char *fp_target_left_out(const struct fp_target *t)
{
        return t->left_out;
}

void fp_target_counter_type(const struct fp_target *t, unsigned i, const char **ret_type,
                            const char **ret_unit)
{
        *ret_type = t->cfg.members[i].name;
        *ret_unit = fp_perf_event_unit(&t->cfg.members[i]);
}

void fp_target_stats(const struct fp_target *t, struct fp_target_stats *ret)
{
        *ret = t->st;
}

void fp_target_sample_types(const struct fp_target *t, const char *ret_types[2],
                            const char *ret_units[2])
{
        ret_types[0] = "samples";
        ret_units[0] = "count";
        if (fp_perf_event_is_clock(&t->cfg.event)) {
                ret_types[1] = "cpu";
                ret_units[1] = "nanoseconds";
        } else {
                ret_types[1] = t->cfg.event.name;
                ret_units[1] = "count";
        }
}
