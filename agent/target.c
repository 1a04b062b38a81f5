/* SPDX-License-Identifier: MIT */
/*
 * A profiled process; see target.h for the thread life cycle.
 *
 * All of it runs on the agent's one event-loop thread: ring callbacks,
 * the rescan timer and the control requests that dump or stop a target
 * never run concurrently, so nothing here locks.
 */
#include "target.h"
#include "procfs.h"
#include "targetconf.h"
#include "util.h"
#include "aggregate.h"
#include "maps.h"
#include "pprof.h"
#include "store.h"
#include "symbols.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAMES      512
#define RESCAN_INTERVAL 1 /* seconds */
#define COMM_LEN        16
#define RETRY_MAX       16 /* threads waiting for another attach attempt */
#define RETRY_TRIES     5  /* attempts, RETRY_USEC apart */
#define RETRY_USEC      2000
#define LATENCY_RING    512 /* attach latencies kept for the percentiles */
#define PRUNE_MIN       64  /* dead thread records worth a pruning pass */

struct fp_thread {
        struct fp_target *target;
        pid_t tid;
        char comm[COMM_LEN];
        bool live;
        bool exited;        /* detached because it exited: a rescan never reattaches it */
        uint64_t attach_ns; /* CLOCK_MONOTONIC of the last attach */
        bool exit_pending;  /* EXIT seen inside a drain: detached right after it */
        struct fp_perf_ring sampler, sideband;
        struct event *ev_sampler, *ev_sideband;
};

struct fp_target {
        struct event_base *base;
        struct fp_symcache *cache;
        pid_t pid;
        uint64_t starttime;
        char comm[COMM_LEN];
        char *exe;
        struct fp_perf_config cfg;
        struct fp_thread **threads; /* every thread ever attached, live or dead */
        size_t n_threads, cap_threads;
        struct fp_maps *maps;
        struct fp_agg *agg;
        struct event *ev_rescan;
        struct fp_target_stats st;
        struct fp_target_stats st_bucketed; /* st when the last bucket was closed */
        struct {
                char reason[32];
                uint64_t count;
        } carried[FP_TARGET_MAX_CARRIED]; /* drops charged by the agent for the next bucket */
        bool exits_pending;
        uint64_t maps_reload_ns;               /* last unresolved-frame reload of /proc/PID/maps */
        char left_out[FP_PERF_EVENT_LIST_MAX]; /* members --best-effort left out */

        /* Thread tracking (see fp_target_set_tracking()). */
        bool bpf_tracked;     /* births come from the BPF tracker, not FORK records */
        bool follow_children; /* child processes are reported to on_child */
        pid_t parent_pid;     /* the target this one was followed from, 0 if none */
        fp_target_child_fn on_child;
        void *child_userdata;
        struct event *ev_retry;
        struct {
                pid_t tid;
                unsigned tries;
                uint64_t birth_ns;
        } retry[RETRY_MAX]; /* born threads whose attach said ESRCH while they still exist */
        unsigned n_retry;
        uint32_t latency_us[LATENCY_RING]; /* birth -> events open, the last LATENCY_RING */
        uint64_t n_latency;

        struct fp_frame frames[MAX_FRAMES];
};

static struct fp_thread *thread_find(struct fp_target *t, pid_t tid)
{
        for (size_t i = t->n_threads; i-- > 0;)
                if (t->threads[i]->tid == tid)
                        return t->threads[i];
        return NULL;
}

static void on_sampler(evutil_socket_t fd, short what, void *arg);
static void on_sideband(evutil_socket_t fd, short what, void *arg);

static void drain_ring(struct fp_target *t, struct fp_perf_ring *ring);

/*
 * Closes a thread's events at once; its name and samples stay. Never
 * called from inside a ring's drain (the ring would be unmapped under the
 * reader): records only mark exit_pending, and reap_exits() detaches.
 */
static void thread_detach(struct fp_thread *th)
{
        struct fp_target *t = th->target;

        if (!th->live)
                return;
        drain_ring(t, &th->sideband);
        drain_ring(t, &th->sampler); /* its last samples */
        event_free(th->ev_sampler);
        event_free(th->ev_sideband);
        th->ev_sampler = th->ev_sideband = NULL;
        fp_perf_ring_close(&th->sampler);
        fp_perf_ring_close(&th->sideband);
        th->live = false;
        th->exited = true;
        th->exit_pending = false;
        t->st.threads_live--;
}

/* Detaches the threads whose EXIT records arrived during a drain. */
static void reap_exits(struct fp_target *t)
{
        while (t->exits_pending) {
                t->exits_pending = false;
                for (size_t i = 0; i < t->n_threads; i++)
                        if (t->threads[i]->exit_pending)
                                thread_detach(t->threads[i]);
        }
}

static void thread_read_comm(struct fp_target *t, struct fp_thread *th)
{
        (void)fp_proc_comm(t->pid, th->tid, th->comm, sizeof(th->comm));
}

/*
 * Opens both events on tid. Returns 0 when attached or already attached,
 * -ESRCH when the thread is gone, other -errno when the event could not be
 * opened (the caller decides whether that is fatal).
 */
static int thread_attach(struct fp_target *t, pid_t tid)
{
        struct fp_thread *th = thread_find(t, tid);
        bool kernel_excluded = false;
        int r;

        if (th && th->live)
                return 0;
        if (!th) {
                if (t->n_threads == t->cap_threads) {
                        size_t cap = t->cap_threads ? t->cap_threads * 2 : 16;
                        void *p = realloc(t->threads, cap * sizeof(*t->threads));
                        if (!p)
                                return -ENOMEM;
                        t->threads = p;
                        t->cap_threads = cap;
                }
                th = calloc(1, sizeof(*th));
                if (!th)
                        return -ENOMEM;
                th->target = t;
                th->tid = tid;
                th->sampler.fd = th->sideband.fd = -1;
                t->threads[t->n_threads++] = th;
                t->st.threads_seen++;
        }

        /* Side-band first, then the name: a rename in between is caught by a COMM record. */
        r = fp_perf_open_sideband(tid, &th->sideband);
        if (r < 0)
                return r;
        r = fp_perf_open_sampler(&t->cfg, tid, &th->sampler, &kernel_excluded);
        if (r < 0) {
                fp_perf_ring_close(&th->sideband);
                return r;
        }
        if (kernel_excluded)
                t->st.kernel_excluded = true;
        thread_read_comm(t, th);

        th->ev_sampler = event_new(t->base, th->sampler.fd, EV_READ | EV_PERSIST, on_sampler, th);
        th->ev_sideband =
            event_new(t->base, th->sideband.fd, EV_READ | EV_PERSIST, on_sideband, th);
        if (!th->ev_sampler || !th->ev_sideband || event_add(th->ev_sampler, NULL) < 0 ||
            event_add(th->ev_sideband, NULL) < 0) {
                if (th->ev_sampler)
                        event_free(th->ev_sampler);
                if (th->ev_sideband)
                        event_free(th->ev_sideband);
                th->ev_sampler = th->ev_sideband = NULL;
                fp_perf_ring_close(&th->sampler);
                fp_perf_ring_close(&th->sideband);
                return -ENOMEM;
        }
        th->live = true;
        th->attach_ns = fp_now_ns(CLOCK_MONOTONIC);
        t->st.threads_live++;
        return 0;
}

/* Attaches every thread in /proc/PID/task not yet live. Returns threads attached or -errno. */
static int rescan(struct fp_target *t, int *ret_first_error)
{
        char path[64];
        struct dirent *de;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)t->pid);
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char *end;
                long tid = strtol(de->d_name, &end, 10);
                if (*end || tid <= 0)
                        continue;
                struct fp_thread *th = thread_find(t, (pid_t)tid);
                if (th && (th->live || th->exited))
                        continue; /* an exited thread may linger in task/ a moment */
                int r = thread_attach(t, (pid_t)tid);
                if (r == 0) {
                        n++;
                } else if (r != -ESRCH) {
                        t->st.attach_failed++;
                        if (ret_first_error && !*ret_first_error)
                                *ret_first_error = r;
                }
        }
        closedir(d);
        return n;
}

/* Whether the process has exited: gone, a zombie, or its PID reused by another start. */
static bool process_gone(struct fp_target *t)
{
        char state = 0;
        return fp_proc_stat(t->pid, &state) != t->starttime || state == 'Z' || state == 'X';
}

static void check_exited(struct fp_target *t)
{
        if (t->st.state == FP_TARGET_EXITED || t->st.threads_live > 0 || !process_gone(t))
                return;
        t->st.state = FP_TARGET_EXITED;
        if (t->ev_rescan)
                event_del(t->ev_rescan);
}

static int cmp_pid(const void *a, const void *b)
{
        pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
        return x < y ? -1 : x > y;
}

/*
 * Frees the records of dead threads without samples in the open bucket:
 * their names went to the store with their samples. Without this a target
 * that churns through short-lived threads would keep a record of every
 * thread it ever had, and search them all on each lookup.
 */
static void prune_dead_threads(struct fp_target *t)
{
        size_t n_entries = fp_agg_n_entries(t->agg), n_dead = 0, k = 0;
        pid_t *busy;

        for (size_t i = 0; i < t->n_threads; i++)
                n_dead += !t->threads[i]->live;
        if (n_dead < PRUNE_MIN)
                return;
        busy = malloc((n_entries ? n_entries : 1) * sizeof(*busy));
        if (!busy)
                return; /* try again on the next tick */
        for (size_t i = 0; i < n_entries; i++)
                busy[i] = fp_agg_entry(t->agg, i)->tid;
        qsort(busy, n_entries, sizeof(*busy), cmp_pid);
        for (size_t i = 0; i < t->n_threads; i++) {
                struct fp_thread *th = t->threads[i];
                if (!th->live && !bsearch(&th->tid, busy, n_entries, sizeof(*busy), cmp_pid))
                        free(th);
                else
                        t->threads[k++] = th;
        }
        t->n_threads = k;
        free(busy);
}

static void on_rescan(evutil_socket_t fd, short what, void *arg)
{
        struct fp_target *t = arg;
        (void)fd;
        (void)what;

        if (t->st.state == FP_TARGET_EXITED)
                return;
        /* Threads whose exit record we have not seen yet (the hangup catches them too). */
        for (size_t i = 0; i < t->n_threads; i++) {
                struct fp_thread *th = t->threads[i];
                if (th->live && fp_perf_ring_hangup(&th->sideband))
                        thread_detach(th);
        }
        if (!process_gone(t)) {
                /* Found here, a thread was missed by the tracker (or born during start). */
                int n = rescan(t, NULL);
                if (n > 0)
                        t->st.threads_by_rescan += (unsigned)n;
        }
        check_exited(t);
        if (t->st.state == FP_TARGET_RUNNING)
                prune_dead_threads(t);
}

/* ---- thread tracking: births and exits reported by a tracker ---- */

static void record_latency(struct fp_target *t, uint64_t birth_ns)
{
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        uint64_t us = now > birth_ns ? (now - birth_ns) / 1000 : 0;

        if (!birth_ns)
                return;
        t->latency_us[t->n_latency++ % LATENCY_RING] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* Whether thread tid of the target still exists. */
static bool thread_exists(struct fp_target *t, pid_t tid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)t->pid, (int)tid);
        return access(path, F_OK) == 0;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
        struct fp_target *t = arg;
        unsigned kept = 0;
        (void)fd;
        (void)what;

        for (unsigned i = 0; i < t->n_retry; i++) {
                pid_t tid = t->retry[i].tid;
                int r = t->st.state == FP_TARGET_RUNNING ? thread_attach(t, tid) : -ESRCH;
                if (r == 0) {
                        record_latency(t, t->retry[i].birth_ns);
                        continue;
                }
                if (r == -ESRCH && ++t->retry[i].tries < RETRY_TRIES && thread_exists(t, tid)) {
                        t->retry[kept++] = t->retry[i];
                        continue;
                }
                if (r == -ESRCH)
                        t->st.threads_missed++;
                else
                        t->st.attach_failed++;
        }
        t->n_retry = kept;
        if (kept) {
                struct timeval tv = {.tv_usec = RETRY_USEC};
                event_add(t->ev_retry, &tv);
        }
}

int fp_target_thread_born(struct fp_target *t, pid_t tid, uint64_t birth_ns)
{
        struct fp_thread *th = thread_find(t, tid);
        int r;

        if (t->st.state != FP_TARGET_RUNNING)
                return -ESRCH;
        /* Attached already, by a rescan that ran before this birth was read: nothing to do. */
        if (th && (th->live || (th->exited && birth_ns && birth_ns <= th->attach_ns)))
                return 0;
        if (th && th->exited)
                th->exited = false; /* the tid was reused by a new thread */
        r = thread_attach(t, tid);
        if (r == 0) {
                record_latency(t, birth_ns);
                return 0;
        }
        if (r == -ESRCH && t->n_retry < RETRY_MAX && thread_exists(t, tid)) {
                /* Not yet (or no longer) attachable although listed: try again shortly. */
                t->retry[t->n_retry++] = (typeof(t->retry[0])){.tid = tid, .birth_ns = birth_ns};
                struct timeval tv = {.tv_usec = RETRY_USEC};
                event_add(t->ev_retry, &tv);
                return 0;
        }
        if (r == -ESRCH)
                t->st.threads_missed++; /* gone before it could be attached */
        else
                t->st.attach_failed++;
        return r;
}

void fp_target_thread_exited(struct fp_target *t, pid_t tid)
{
        struct fp_thread *th = thread_find(t, tid);

        if (th && th->live)
                thread_detach(th);
        check_exited(t);
}

void fp_target_set_tracking(struct fp_target *t, bool bpf, bool follow_children, pid_t parent_pid,
                            fp_target_child_fn on_child, void *userdata)
{
        t->bpf_tracked = bpf;
        t->follow_children = follow_children;
        t->parent_pid = parent_pid;
        t->on_child = on_child;
        t->child_userdata = userdata;
}

bool fp_target_follows_children(const struct fp_target *t)
{
        return t->follow_children;
}

pid_t fp_target_parent(const struct fp_target *t)
{
        return t->parent_pid;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

void fp_target_attach_latency(const struct fp_target *t, struct fp_target_latency *ret)
{
        uint32_t sorted[LATENCY_RING];
        size_t n = t->n_latency < LATENCY_RING ? (size_t)t->n_latency : LATENCY_RING;

        *ret = (struct fp_target_latency){.count = t->n_latency};
        if (!n)
                return;
        memcpy(sorted, t->latency_us, n * sizeof(sorted[0]));
        qsort(sorted, n, sizeof(sorted[0]), cmp_u32);
        ret->p50_us = sorted[n / 2];
        ret->p90_us = sorted[n * 9 / 10];
        ret->p99_us = sorted[n * 99 / 100];
        ret->max_us = sorted[n - 1];
}

/* Fills each frame's mapping; reloads /proc/PID/maps (at most every 100 ms) on a miss. */
static void resolve_frames(void *userdata, struct fp_frame *frames, uint32_t n)
{
        struct fp_target *t = userdata;
        bool reloaded = false;

        for (uint32_t i = 0; i < n; i++) {
                if (frames[i].flags & FP_FRAME_KERNEL_TIME)
                        continue;
                frames[i].mapping = fp_maps_find(t->maps, frames[i].addr);
                if (!frames[i].mapping && !reloaded) {
                        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
                        reloaded = true;
                        if (now - t->maps_reload_ns > 100000000ULL) {
                                t->maps_reload_ns = now;
                                (void)fp_maps_load_proc(t->maps);
                                frames[i].mapping = fp_maps_find(t->maps, frames[i].addr);
                        }
                }
                if (!frames[i].mapping) {
                        t->st.unresolved++;
                        continue;
                }
                /* Load the symbols while the file is surely still there. */
                (void)fp_maps_symbolize(t->maps, frames[i].mapping, frames[i].addr, NULL);
        }
}

static void handle_sample(void *userdata, const struct fp_perf_sample *s)
{
        struct fp_target *t = userdata;
        struct fp_frame *f = t->frames;
        uint32_t n = 0;
        uint64_t context = PERF_CONTEXT_USER;
        bool in_kernel = (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
        uint32_t first_real;

        /* Time spent in the kernel with kernel frames excluded: one synthetic leaf. */
        if (in_kernel && !t->cfg.kernel_frames)
                f[n++] = (struct fp_frame){.flags = FP_FRAME_KERNEL_TIME};
        first_real = n;

        for (uint64_t i = 0; i < s->nr && n < MAX_FRAMES; i++) {
                uint64_t ip = s->ips[i];
                if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
                        context = ip;
                        continue;
                }
                if (context != PERF_CONTEXT_USER && context != PERF_CONTEXT_KERNEL)
                        continue;
                if (context == PERF_CONTEXT_KERNEL && !t->cfg.kernel_frames)
                        continue;
                /* Every frame below the leaf is a return address: step back into the call. */
                f[n++] = (struct fp_frame){.addr = n == 0 ? ip : ip - 1};
        }
        if (n == first_real) {
                /* No callchain: keep the sample at its ip (or as [unknown]) rather than drop it. */
                t->st.unwind_empty++;
                if (n == 0 || (s->ip && t->cfg.kernel_frames))
                        f[n++] = (struct fp_frame){.addr = s->ip};
        }
        if (fp_agg_add(t->agg, (pid_t)s->tid, fp_maps_epoch(t->maps), f, n, s->period,
                       s->n_counters ? s->counters : NULL, resolve_frames, t) == 0) {
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
                th = thread_find(t, (pid_t)r->task.tid);
                if (th && th->live && (pid_t)r->task.pid == t->pid) {
                        th->exit_pending = true;
                        t->exits_pending = true;
                }
                break;
        case PERF_RECORD_COMM:
                th = thread_find(t, (pid_t)r->comm.tid);
                if (th)
                        snprintf(th->comm, sizeof(th->comm), "%s", r->comm.comm);
                if ((pid_t)r->comm.tid == t->pid)
                        snprintf(t->comm, sizeof(t->comm), "%s", r->comm.comm);
                break;
        case PERF_RECORD_MMAP:
        case PERF_RECORD_MMAP2:
                if ((pid_t)r->mmap.pid == t->pid && (r->mmap.prot & 4 /* PROT_EXEC */))
                        (void)fp_maps_add(t->maps, r->mmap.addr, r->mmap.len, r->mmap.pgoff,
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

static void drain_ring(struct fp_target *t, struct fp_perf_ring *ring)
{
        if (fp_perf_ring_drain(ring, &handlers, t) == -EBADMSG)
                t->st.lost++;
}

static void on_sideband(evutil_socket_t fd, short what, void *arg)
{
        struct fp_thread *th = arg;
        struct fp_target *t = th->target;
        (void)fd;
        (void)what;

        drain_ring(t, &th->sideband);
        reap_exits(t);
        /* No EXIT record (it can be lost), but the task is gone: the hangup tells. */
        if (th->live && !fp_perf_ring_pending(&th->sideband) && fp_perf_ring_hangup(&th->sideband))
                thread_detach(th);
        reap_exits(t);
        check_exited(t);
}

static void on_sampler(evutil_socket_t fd, short what, void *arg)
{
        struct fp_thread *th = arg;
        struct fp_target *t = th->target;
        (void)fd;
        (void)what;

        /* Mappings and names first, so the samples resolve against them. */
        drain_ring(t, &th->sideband);
        drain_ring(t, &th->sampler);
        reap_exits(t);
        if (th->live && !fp_perf_ring_pending(&th->sampler) && fp_perf_ring_hangup(&th->sampler))
                thread_detach(th);
        reap_exits(t);
        check_exited(t);
}

void fp_target_drain(struct fp_target *t)
{
        for (size_t i = 0; i < t->n_threads; i++)
                if (t->threads[i]->live)
                        drain_ring(t, &t->threads[i]->sideband);
        for (size_t i = 0; i < t->n_threads; i++)
                if (t->threads[i]->live)
                        drain_ring(t, &t->threads[i]->sampler);
        reap_exits(t);
        check_exited(t);
}

static const char *errno_reason(int r, const struct fp_perf_config *cfg, char *buf, size_t len)
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

/*
 * Checks that the machine has every event of t's group, counting each on
 * the main thread once. A member it lacks is left out (best effort) or
 * fails the start; a leader it lacks always fails it. Returns 0 or -errno
 * with one line in err.
 */
static int check_events(struct fp_target *t, char *err, size_t err_len)
{
        struct fp_perf_config *cfg = &t->cfg;
        struct fp_perf_config one = *cfg;
        char reason[256];
        unsigned kept = 0;
        /* Kernel mode only matters when --kernel insists on it; else open falls back. */
        bool exclude_kernel = !cfg->kernel_frames;

        for (unsigned i = 0; i <= cfg->n_members; i++) {
                const struct fp_perf_event *e = i ? &cfg->members[i - 1] : &cfg->event;
                int r = fp_perf_probe_event(e, t->pid, exclude_kernel);
                bool missing = r == -ENOENT || r == -EOPNOTSUPP || r == -ENODEV;

                if (r == -ESRCH) {
                        snprintf(err, err_len, "no such process: %d", (int)t->pid);
                        return r;
                }
                if (r < 0 && (!missing || i == 0 || !cfg->best_effort)) {
                        one.event = *e;
                        snprintf(err, err_len, "%s%s",
                                 errno_reason(r, &one, reason, sizeof(reason)),
                                 missing && i == 0 && cfg->best_effort
                                     ? " (it leads the group, so --best-effort cannot leave it "
                                       "out: put an available event first)"
                                     : "");
                        return r;
                }
                if (r < 0) {
                        size_t off = strlen(t->left_out);
                        snprintf(t->left_out + off, sizeof(t->left_out) - off, "%s%s",
                                 off ? "," : "", e->name);
                        continue;
                }
                if (i)
                        cfg->members[kept++] = *e;
        }
        cfg->n_members = kept;
        return 0;
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
        r = check_events(t, err, err_len);
        if (r < 0) {
                free(t->exe);
                free(t);
                return r;
        }
        t->maps = fp_maps_new(pid, cache);
        t->agg = fp_agg_new(t->cfg.n_members);
        t->ev_rescan = event_new(base, -1, EV_PERSIST, on_rescan, t);
        t->ev_retry = event_new(base, -1, 0, on_retry, t);
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

        /* Threads may be born while we attach: rescan until a pass finds none new. */
        for (int pass = 0; pass < 10; pass++) {
                r = rescan(t, &first_error);
                if (r <= 0)
                        break;
        }
        if (t->st.threads_live == 0) {
                if (first_error)
                        snprintf(err, err_len, "%s",
                                 errno_reason(first_error, &t->cfg, reason, sizeof(reason)));
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

static const char *basename_of(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* What one frame is, for people: its function name and mapping. */
struct frame_desc {
        const char *function;             /* never NULL */
        const struct fp_mapping *mapping; /* NULL: none */
        const char *build_id;             /* "" when unknown */
        uint64_t limit;                   /* mapping end for the profile */
        char buf[512];
};

static void frame_describe(struct fp_target *t, const struct fp_frame *f, struct frame_desc *d)
{
        uint64_t off = 0;

        d->mapping = NULL;
        d->build_id = "";
        d->limit = 0;
        if (f->flags & FP_FRAME_KERNEL_TIME) {
                d->function = "[kernel]";
                return;
        }
        if (!f->mapping) {
                d->function = "[unknown]";
                return;
        }
        struct fp_mapping *x = fp_maps_get(t->maps, f->mapping);
        d->function = fp_maps_symbolize(t->maps, f->mapping, f->addr, &off);
        d->mapping = x;
        d->build_id = x->symtab ? fp_symtab_build_id(x->symtab) : "";
        d->limit = x->kind == FP_MAPPING_KERNEL ? UINT64_MAX : x->end;
        if (!d->function) {
                snprintf(d->buf, sizeof(d->buf), "%s+0x%" PRIx64, basename_of(x->path), off);
                d->function = d->buf;
        }
}

/* The pprof location of one frame, interning its mapping and function. */
static int frame_location(struct fp_target *t, struct fp_pprof *p, const struct fp_frame *f,
                          uint64_t *mapping_ids, uint64_t *ret_loc)
{
        struct frame_desc d;
        uint64_t mapping_id = 0, function_id = 0;
        int r;

        frame_describe(t, f, &d);
        if (d.mapping) {
                if (!mapping_ids[f->mapping - 1]) {
                        r = fp_pprof_mapping(p, d.mapping->start, d.limit, d.mapping->pgoff,
                                             d.mapping->path, d.build_id,
                                             &mapping_ids[f->mapping - 1]);
                        if (r < 0)
                                return r;
                }
                mapping_id = mapping_ids[f->mapping - 1];
        }
        r = fp_pprof_function(p, d.function, NULL, &function_id);
        if (r < 0)
                return r;
        return fp_pprof_location(p, mapping_id, f->addr, function_id, ret_loc);
}

/* Where each counter goes among p's sample types (added when missing). */
static int counter_columns(struct fp_target *t, struct fp_pprof *p, size_t *ret)
{
        for (unsigned i = 0; i < t->cfg.n_members; i++) {
                const char *type, *unit;
                fp_target_counter_type(t, i, &type, &unit);
                int r = fp_pprof_find_sample_type(p, type, unit);
                if (r == -ENOENT)
                        r = fp_pprof_add_sample_type(p, type, unit);
                if (r < 0)
                        return r;
                ret[i] = (size_t)r;
        }
        return 0;
}

static int64_t clamp64(uint64_t v)
{
        return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

int fp_target_to_pprof(struct fp_target *t, struct fp_pprof *p)
{
        size_t n_maps = fp_maps_count(t->maps);
        uint64_t *mapping_ids = calloc(n_maps ? n_maps : 1, sizeof(*mapping_ids));
        uint64_t *locs = malloc(MAX_FRAMES * sizeof(*locs));
        size_t column[FP_PERF_MAX_MEMBERS];
        int64_t *values = NULL;
        int r = counter_columns(t, p, column);

        if (r < 0)
                goto out;
        values = calloc(fp_pprof_n_sample_types(p), sizeof(*values));
        if (!mapping_ids || !locs || !values) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < fp_agg_n_entries(t->agg); i++) {
                const struct fp_agg_entry *e = fp_agg_entry(t->agg, i);
                struct fp_thread *th = thread_find(t, e->tid);
                values[0] = clamp64(e->count);
                values[1] = clamp64(e->value);
                for (unsigned j = 0; j < t->cfg.n_members; j++)
                        values[column[j]] = clamp64(e->counters[j]);
                struct fp_pprof_label labels[4] = {
                    {.key = "thread", .num = e->tid},
                    {.key = "thread_name", .str = th ? th->comm : ""},
                    {.key = "pid", .num = t->pid},
                    {.key = "process", .str = t->comm},
                };

                for (uint32_t j = 0; j < e->n_frames; j++) {
                        r = frame_location(t, p, &e->frames[j], mapping_ids, &locs[j]);
                        if (r < 0)
                                goto out;
                }
                r = fp_pprof_add_sample(p, locs, e->n_frames, values, labels, 4);
                if (r < 0)
                        goto out;
        }
out:
        free(mapping_ids);
        free(locs);
        free(values);
        return r;
}

void fp_target_config_string(const struct fp_target *t, char *buf, size_t len)
{
        fp_targetconf_format(&t->cfg, t->follow_children, buf, len);
}

void fp_target_charge_drop(struct fp_target *t, const char *reason, uint64_t count)
{
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED; i++) {
                if (!t->carried[i].reason[0])
                        snprintf(t->carried[i].reason, sizeof(t->carried[i].reason), "%s", reason);
                if (strcmp(t->carried[i].reason, reason) == 0) {
                        t->carried[i].count += count;
                        return;
                }
        }
}

/* Adds one bucket drop count unless it is zero. */
static int batch_drop(struct fp_store_batch *b, uint32_t ti, const char *reason, uint64_t n)
{
        return n ? fp_store_batch_add_drop(b, ti, reason, n) : 0;
}

int fp_target_fill_batch(struct fp_target *t, struct fp_store_batch *b, bool active)
{
        struct fp_store_frame *frames = NULL;
        struct frame_desc *descs = NULL;
        const char *types[2], *units[2];
        char config[FP_PERF_EVENT_LIST_MAX + 128];
        uint32_t ti, ei, si, member_ei[FP_PERF_MAX_MEMBERS];
        int r;

        fp_target_drain(t);
        fp_target_config_string(t, config, sizeof(config));
        fp_target_sample_types(t, types, units);
        struct fp_store_target st = {.host = NULL,
                                     .pid = t->pid,
                                     .starttime = t->starttime,
                                     .comm = t->comm,
                                     .exe = t->exe,
                                     .config = config,
                                     .active = active};
        struct fp_store_event ev = {.name = t->cfg.event.name,
                                    .count_type = types[0],
                                    .count_unit = units[0],
                                    .value_type = types[1],
                                    .value_unit = units[1],
                                    .period_type = types[1],
                                    .period_unit = units[1],
                                    .period = (int64_t)(t->cfg.freq ? 1 : t->cfg.period)};
        r = fp_store_batch_add_target(b, &st, &ti);
        if (r < 0)
                return r;
        r = fp_store_batch_add_event(b, &ev, &ei);
        if (r < 0)
                return r;
        for (unsigned j = 0; j < t->cfg.n_members; j++) {
                struct fp_store_event mev = {
                    .name = t->cfg.members[j].name, .count_type = types[0], .count_unit = units[0]};
                fp_target_counter_type(t, j, &mev.value_type, &mev.value_unit);
                r = fp_store_batch_add_event(b, &mev, &member_ei[j]);
                if (r < 0)
                        return r;
        }
        frames = malloc(MAX_FRAMES * sizeof(*frames));
        descs = malloc(MAX_FRAMES * sizeof(*descs));
        if (!frames || !descs) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < fp_agg_n_entries(t->agg); i++) {
                const struct fp_agg_entry *e = fp_agg_entry(t->agg, i);
                struct fp_thread *th = thread_find(t, e->tid);
                for (uint32_t j = 0; j < e->n_frames; j++) {
                        struct frame_desc *d = &descs[j];
                        frame_describe(t, &e->frames[j], d);
                        frames[j] = (struct fp_store_frame){
                            .function = d->function,
                            .mapping_file = d->mapping ? d->mapping->path : NULL,
                            .build_id = d->build_id,
                            .mapping_start = d->mapping ? d->mapping->start : 0,
                            .mapping_limit = d->limit,
                            .mapping_offset = d->mapping ? d->mapping->pgoff : 0,
                            .address = e->frames[j].addr};
                }
                r = fp_store_batch_add_stack(b, frames, e->n_frames, &si);
                if (r < 0)
                        goto out;
                r = fp_store_batch_add_sample(b, ti, ei, e->tid, th ? th->comm : "", si, e->count,
                                              e->value);
                for (unsigned j = 0; r >= 0 && j < t->cfg.n_members; j++)
                        if (e->counters[j])
                                r = fp_store_batch_add_sample(b, ti, member_ei[j], e->tid,
                                                              th ? th->comm : "", si, e->count,
                                                              e->counters[j]);
                if (r < 0)
                        goto out;
        }
        struct fp_target_stats *now = &t->st, *then = &t->st_bucketed;
        if ((r = batch_drop(b, ti, "kernel_ring_overflow", now->lost - then->lost)) < 0 ||
            (r = batch_drop(b, ti, "throttled", now->throttled - then->throttled)) < 0 ||
            (r = batch_drop(b, ti, "out_of_memory", now->dropped_nomem - then->dropped_nomem)) < 0)
                goto out;
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED && t->carried[i].reason[0]; i++)
                if ((r = batch_drop(b, ti, t->carried[i].reason, t->carried[i].count)) < 0)
                        goto out;

        /* Everything is in the batch: start the next bucket empty. */
        struct fp_agg *fresh = fp_agg_new(t->cfg.n_members);
        if (!fresh) {
                r = -ENOMEM;
                goto out;
        }
        fp_agg_free(t->agg);
        t->agg = fresh;
        t->st_bucketed = t->st;
        memset(t->carried, 0, sizeof(t->carried));
        r = (int)ti;
out:
        free(frames);
        free(descs);
        return r;
}

size_t fp_target_open_drops(const struct fp_target *t, struct fp_target_drop *ret, size_t max)
{
        const struct fp_target_stats *now = &t->st, *then = &t->st_bucketed;
        struct fp_target_drop open[3] = {
            {"kernel_ring_overflow", now->lost - then->lost},
            {"throttled", now->throttled - then->throttled},
            {"out_of_memory", now->dropped_nomem - then->dropped_nomem},
        };
        size_t n = 0;

        for (size_t i = 0; i < 3 && n < max; i++)
                if (open[i].count)
                        ret[n++] = open[i];
        for (size_t i = 0; i < FP_TARGET_MAX_CARRIED && t->carried[i].reason[0] && n < max; i++)
                ret[n++] = (struct fp_target_drop){t->carried[i].reason, t->carried[i].count};
        return n;
}
