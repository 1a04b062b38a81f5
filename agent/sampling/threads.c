/* SPDX-License-Identifier: MIT */
/*
 * A target's thread table: attaching each thread's events (at start, on a
 * tracker's birth report, on the /proc rescan, and a few
 * retries for threads listed before they can be attached), detaching them
 * on exit, forgetting dead threads once their samples are stored, and the
 * attach latencies; and reading the threads' rings: samples to
 * samples.c, side-band records (births, exits, names, mappings, losses)
 * into the table and the target. See target.h for the life cycle.
 *
 * The table calls nothing of target.c (which starts and frees a target
 * and answers for it): target.c -> threads.c -> samples.c, one way.
 */
#include "target-internal.h"
#include "procfs.h"
#include "targetconf.h"
#include "tick.h"
#include "util.h"
#include "log.h"
#include "aggregate.h"
#include "maps.h"
#include "pprof.h"
#include "store.h"
#include "symbols.h"
#include "unwind.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <linux/perf_event.h>
#include <sys/sysmacros.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct fp_thread *fp_thread_find(struct fp_target *t, pid_t tid)
{
        for (size_t i = t->n_threads; i-- > 0;)
                if (t->threads[i]->tid == tid)
                        return t->threads[i];
        return NULL;
}

const char *fp_target_thread_name(struct fp_target *t, pid_t tid)
{
        struct fp_thread *th = fp_thread_find(t, tid);
        return th ? th->comm : "";
}

/* Memory a live thread's two rings map (data pages and each metadata page). */
static uint64_t ring_bytes(const struct fp_thread *th)
{
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        return th->sampler.data_size + th->sideband.data_size + 2 * page +
               (th->starter.fd >= 0 ? th->starter.data_size + page : 0);
}

static void close_starter(struct fp_thread *th);
static void drain_starter(struct fp_target *t, struct fp_thread *th);

/*
 * Closes a thread's events at once; its name and samples stay. Never
 * called from inside a ring's drain (the ring would be unmapped under the
 * reader): records only mark exit_pending, and fp_target_reap_exits() detaches.
 */
void fp_thread_detach(struct fp_thread *th)
{
        struct fp_target *t = th->target;

        if (!th->live)
                return;
        fp_target_drain_ring(t, &th->sideband);
        drain_starter(t, th); /* a first sample taken just before it exited */
        close_starter(th);
        fp_target_drain_sampler(t, th); /* its last samples */
        event_free(th->ev_sampler);
        event_free(th->ev_sideband);
        th->ev_sampler = th->ev_sideband = NULL;
        t->st.ring_bytes -= ring_bytes(th);
        fp_perf_ring_close(&th->sampler);
        fp_perf_ring_close(&th->sideband);
        th->live = false;
        th->exited = true;
        th->exit_pending = false;
        th->detach_ns = fp_now_ns(CLOCK_MONOTONIC);
        t->st.threads_live--;
}

void fp_thread_free(struct fp_thread *th)
{
        if (th->ev_sampler)
                event_free(th->ev_sampler);
        if (th->ev_sideband)
                event_free(th->ev_sideband);
        close_starter(th);
        fp_perf_ring_close(&th->sampler);
        fp_perf_ring_close(&th->sideband);
        free(th->off_frames);
        free(th);
}

/* Detaches the threads whose EXIT records arrived during a drain. */
void fp_target_reap_exits(struct fp_target *t)
{
        while (t->exits_pending) {
                t->exits_pending = false;
                for (size_t i = 0; i < t->n_threads; i++)
                        if (t->threads[i]->exit_pending)
                                fp_thread_detach(t->threads[i]);
        }
}

static void thread_read_comm(struct fp_target *t, struct fp_thread *th)
{
        (void)fp_proc_comm(t->pid, th->tid, th->comm, sizeof(th->comm));
}

/* ---- a thread's random first period ---- */

static uint64_t next_random(struct fp_target *t, pid_t tid)
{
        return fp_perf_random(&t->jitter_state, (uint64_t)tid);
}

/*
 * A thread sampled every period P from the moment its event opens is never
 * sampled if it runs less than P, and every thread's first period is
 * lost: short threads vanish from the profile (1 ms threads at 1 kHz: 1%
 * of their CPU). So a thread's first sample comes after a random part of
 * the period, uniform over 1..P, and counts for P like every other: a
 * thread that runs c < P is sampled with probability c/P, and what the
 * profile holds of any thread is c on average (the Go runtime starts its
 * per-thread timers so).
 *
 * The kernel has no way to make only the first period shorter (setting a
 * period restarts it), so the first period is an event of its own, the
 * starter, woken at its sample; the thread's group is opened disabled and
 * enabled when the starter's sample is read (start_group()), and the
 * starter closed. Samples the starter took meanwhile are counted
 * (first_extra) and left out: the first one stands for the period they
 * fall in.
 */
static int open_starter(struct fp_target *t, struct fp_thread *th)
{
        uint64_t first = 1 + next_random(t, th->tid) % t->cfg.period;
        int r = fp_perf_open_starter(&t->cfg, th->tid, first, &th->starter);

        if (r < 0) {
                th->starter.fd = -1;
                return r;
        }
        th->target->st.first_pending++;
        th->first = first;
        th->group_started = false;
        th->shift = 0;
        fp_target_python_attach(t, th->starter.fd);
        th->ev_starter =
            event_new(t->base, th->starter.fd, EV_READ | EV_PERSIST, fp_target_on_starter, th);
        if (!th->ev_starter || event_add(th->ev_starter, NULL) < 0) {
                close_starter(th);
                return -ENOMEM;
        }
        r = fp_perf_enable(&th->starter);
        if (r < 0) {
                close_starter(th);
                return r;
        }
        return 0;
}

static void close_starter(struct fp_thread *th)
{
        if (th->ev_starter)
                event_free(th->ev_starter);
        th->ev_starter = NULL;
        if (th->starter.fd >= 0) {
                fp_perf_ring_close(&th->starter);
                th->target->st.first_pending--;
        }
        th->starter.fd = -1;
}

struct starter_drain {
        struct fp_target *t;
        struct fp_thread *th;
        bool first; /* the first sample was taken in this drain */
};

static void starter_sample(void *userdata, const struct fp_perf_sample *s)
{
        struct starter_drain *d = userdata;
        uint64_t v = d->t->st.value;

        if (d->first) {
                d->t->st.first_extra++;
                return;
        }
        fp_target_add_sample(d->t, s);
        d->th->value += d->t->st.value - v;
        d->t->st.first_samples++;
        d->first = true;
}

/* Its ring holds samples only: a loss is of samples after the first (a tiny ring), extras too. */
static void starter_record(void *userdata, const struct fp_perf_record *r)
{
        struct starter_drain *d = userdata;

        if (r->type == PERF_RECORD_LOST)
                d->t->st.first_extra += r->lost.lost;
}

static const struct fp_perf_handlers starter_handlers = {
    .sample = starter_sample,
    .record = starter_record,
};

/*
 * Enables th's group at its starter's first sample. The group's samples
 * then fall every period after the enable, not after the first sample: a
 * grid shifted by the thread's CPU time in between (the agent's wake-up
 * and this ioctl, tens to hundreds of µs), which would lose that much of
 * every thread that runs on past a period more. The starter counted it
 * (its count past its one period), so the group's first sample counts
 * for that much more (t->bonus): exact on average for every thread that
 * has a group sample, and nothing for one that has none, which lost
 * nothing (its first sample stands for its whole period).
 */
static void start_group(struct fp_target *t, struct fp_thread *th)
{
        uint64_t count;

        if (th->group_started)
                return;
        th->group_started = true;
        if (fp_perf_enable(&th->sampler) < 0) {
                t->st.attach_failed++; /* the thread goes on unsampled; status says so */
                return;
        }
        if (fp_perf_read_count(&th->starter, &count) == 0 && count > th->first)
                th->shift = count - th->first;
        th->restarted = th->since = 0; /* the group's count starts at the enable */
}

/* Reads th's starter; once its first sample is in, enables th's group and closes the starter. */
static void drain_starter(struct fp_target *t, struct fp_thread *th)
{
        struct starter_drain d = {.t = t, .th = th};

        if (th->starter.fd < 0)
                return;
        (void)fp_perf_ring_drain(&th->starter, &starter_handlers, &d);
        if (!d.first)
                return;
        start_group(t, th);
        t->st.ring_bytes -= ring_bytes(th);
        close_starter(th);
        t->st.ring_bytes += ring_bytes(th);
}

void fp_target_on_starter(evutil_socket_t fd, short what, void *arg)
{
        struct fp_thread *th = arg;
        struct fp_target *t = th->target;
        (void)fd;
        (void)what;

        /*
         * Woken by the first sample: the group starts before anything else
         * (what the thread runs until then is not sampled). Then mappings
         * and names, so the sample resolves against them.
         */
        if (th->starter.fd >= 0 && fp_perf_ring_pending(&th->starter))
                start_group(t, th);
        fp_target_drain_ring(t, &th->sideband);
        drain_starter(t, th);
        fp_target_reap_exits(t);
        if (th->live && th->starter.fd >= 0 && !fp_perf_ring_pending(&th->starter) &&
            fp_perf_ring_hangup(&th->starter))
                fp_thread_detach(th);
        fp_target_reap_exits(t);
        fp_target_check_exited(t);
}

/*
 * Opens both events on tid. Returns 0 when attached or already attached,
 * -ESRCH when the thread is gone, other -errno when the event could not be
 * opened (the caller decides whether that is fatal).
 */
static int thread_attach(struct fp_target *t, pid_t tid)
{
        struct fp_thread *th = fp_thread_find(t, tid);
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
                th->sampler.fd = th->sideband.fd = th->starter.fd = -1;
                t->threads[t->n_threads++] = th;
                t->st.threads_seen++;
        }
        if (t->cfg.max_threads && t->st.threads_live >= t->cfg.max_threads) {
                /* Counted once per thread; a rescan tries again once there is room. */
                if (!th->over_limit) {
                        if (!t->st.threads_over_limit)
                                fp_log(LOG_WARNING,
                                       "%d (%s): %u threads are sampled, the agent's "
                                       "--max-threads; more are counted in status, not sampled",
                                       (int)t->pid, t->comm, t->cfg.max_threads);
                        t->st.threads_over_limit++;
                        th->over_limit = true;
                }
                return -EUSERS;
        }
        th->over_limit = false;

        /*
         * The starter first: the thread is sampled from that moment on (the
         * group's ring takes a while to map). Then the side-band, then the
         * name: a rename in between is caught by a COMM record.
         */
        bool random_first = !t->cfg.freq && !t->cfg.first_period_full && t->cfg.period > 1;
        if (random_first && open_starter(t, th) == -ESRCH)
                return -ESRCH;
        uint64_t began = th->starter.fd >= 0 ? fp_now_ns(CLOCK_MONOTONIC) : 0;
        /*
         * What it ran before its sampling began: a born thread's unsampled
         * start (status). At least: the scheduler brings a running thread's
         * sum up to date only at a tick or a switch.
         */
        th->cpu_before = fp_proc_thread_cpu_ns(t->pid, tid);
        r = fp_perf_open_sideband(tid, &th->sideband);
        if (r < 0) {
                close_starter(th);
                return r;
        }
        r = fp_perf_open_sampler(&t->cfg, tid, th->starter.fd >= 0 ? FP_PERF_OPEN_DISABLED : 0,
                                 &th->sampler, &kernel_excluded);
        if (r < 0) {
                close_starter(th);
                fp_perf_ring_close(&th->sideband);
                return r;
        }
        if (kernel_excluded)
                t->st.kernel_excluded = true;
        fp_target_python_attach(t, th->sampler.fd);
        th->period = 0; /* a new event: the configured period, its debt kept */
        thread_read_comm(t, th);

        th->ev_sampler =
            event_new(t->base, th->sampler.fd, EV_READ | EV_PERSIST, fp_target_on_sampler, th);
        th->ev_sideband =
            event_new(t->base, th->sideband.fd, EV_READ | EV_PERSIST, fp_target_on_sideband, th);
        if (!th->ev_sampler || !th->ev_sideband || event_add(th->ev_sampler, NULL) < 0 ||
            event_add(th->ev_sideband, NULL) < 0) {
                if (th->ev_sampler)
                        event_free(th->ev_sampler);
                if (th->ev_sideband)
                        event_free(th->ev_sideband);
                th->ev_sampler = th->ev_sideband = NULL;
                close_starter(th);
                fp_perf_ring_close(&th->sampler);
                fp_perf_ring_close(&th->sideband);
                return -ENOMEM;
        }
        th->live = true;
        th->attach_ns = began ? began : fp_now_ns(CLOCK_MONOTONIC); /* when sampling began */
        th->jitter_ns = th->attach_ns; /* its first period change 100 ms on (jitter_period()) */
        t->st.threads_live++;
        t->st.ring_bytes += ring_bytes(th);
        return 0;
}

/* Attaches every thread in /proc/PID/task not yet live. Returns threads attached or -errno. */
int fp_target_rescan(struct fp_target *t, int *ret_first_error)
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
                struct fp_thread *th = fp_thread_find(t, (pid_t)tid);
                if (th && (th->live || th->exited))
                        continue; /* an exited thread may linger in task/ a moment */
                int r = thread_attach(t, (pid_t)tid);
                if (r == 0) {
                        n++;
                } else if (r != -ESRCH && r != -EUSERS) {
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

void fp_target_check_exited(struct fp_target *t)
{
        if (t->st.state == FP_TARGET_EXITED || t->st.threads_live > 0 || !process_gone(t))
                return;
        t->st.state = FP_TARGET_EXITED;
        t->st.exited_ns = fp_now_ns(CLOCK_MONOTONIC);
        if (t->ev_rescan)
                event_del(t->ev_rescan);
}

static int cmp_pid(const void *a, const void *b)
{
        pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
        return x < y ? -1 : x > y;
}

/*
 * Frees the records of dead threads without samples in the open bucket
 * (their names went to the store with their samples), a second after
 * their exit (the bridge's samples of them, a tenth of a second late at
 * most, still find their attach time). Without this a target
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
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        for (size_t i = 0; i < t->n_threads; i++) {
                struct fp_thread *th = t->threads[i];
                if (!th->live && now - th->detach_ns > 1000000000ULL &&
                    !bsearch(&th->tid, busy, n_entries, sizeof(*busy), cmp_pid))
                        free(th);
                else
                        t->threads[k++] = th;
        }
        t->n_threads = k;
        free(busy);
}

/*
 * Gives a live thread a sampler with the target's present stack copy: the
 * new group is opened disabled, the old one stopped, the new one started,
 * and the old ring read and closed. Between the two the thread runs
 * unsampled for a few system calls; the part of a period the old event
 * had counted is lost, once per change of size. 0 or -errno (the old
 * sampler then stays).
 */
static int resize_sampler(struct fp_target *t, struct fp_thread *th)
{
        struct fp_perf_ring ring;
        struct event *ev;
        bool kernel_excluded = false;
        int r =
            fp_perf_open_sampler(&t->cfg, th->tid, FP_PERF_OPEN_DISABLED, &ring, &kernel_excluded);

        if (r < 0)
                return r;
        fp_target_python_attach(t, ring.fd);
        ev = event_new(t->base, ring.fd, EV_READ | EV_PERSIST, fp_target_on_sampler, th);
        if (!ev || event_add(ev, NULL) < 0) {
                if (ev)
                        event_free(ev);
                fp_perf_ring_close(&ring);
                return -ENOMEM;
        }
        if (kernel_excluded)
                t->st.kernel_excluded = true;
        (void)fp_perf_disable(&th->sampler); /* closed below either way */
        (void)fp_perf_enable(&ring);
        fp_target_drain_sampler(t, th);
        event_free(th->ev_sampler);
        t->st.ring_bytes -= ring_bytes(th);
        fp_perf_ring_close(&th->sampler);
        th->sampler = ring;
        th->ev_sampler = ev;
        th->period = 0; /* a new event: the configured period, its debt kept */
        t->st.ring_bytes += ring_bytes(th);
        return 0;
}

/*
 * Fits the stack copy to the stacks the target has (stackwalk.h), as soon
 * as a drain of samples says it should change (and once a second for the
 * threads left): a new size applies to threads attached from now on, and the
 * live ones are reopened with it. A thread whose first period is still
 * running (its sampler waits for the starter) is reopened at a later tick.
 */
static void fit_stack(struct fp_target *t)
{
        uint32_t want;

        if (t->cfg.unwind == FP_UNWIND_FP || !t->cfg.stack_bytes)
                return;
        want = fp_stackfit_size(&t->walk.fit, t->cfg.stack_bytes);
        if (want != t->cfg.stack_bytes) {
                unsigned grows = t->walk.fit.grows + (want > t->cfg.stack_bytes);
                fp_targetconf_set_stack(&t->cfg, want);
                t->walk.fit = (struct fp_stackfit){.grows = grows};
                t->st.stack_resizes++;
        }
        for (size_t i = 0; i < t->n_threads; i++) {
                struct fp_thread *th = t->threads[i];
                int r;
                if (th->live && !th->exit_pending && th->starter.fd < 0 &&
                    th->sampler.stack_bytes != t->cfg.stack_bytes &&
                    (r = resize_sampler(t, th)) < 0 && r != -ESRCH) /* ESRCH: it just exited */
                        t->st.stack_resize_failed++;
        }
}

void fp_target_on_fit(evutil_socket_t fd, short what, void *arg)
{
        struct fp_target *t = arg;
        (void)fd;
        (void)what;

        if (t->st.state == FP_TARGET_RUNNING)
                fit_stack(t);
}

static void jitter_period(struct fp_target *t, struct fp_thread *th);

void fp_target_on_rescan(evutil_socket_t fd, short what, void *arg)
{
        struct fp_target *t = arg;
        (void)fd;
        (void)what;

        if (t->st.state == FP_TARGET_EXITED)
                return;
        fp_tick_arm(t->ev_rescan, RESCAN_INTERVAL);
        /*
         * Every ring, each second: a ring that holds a second wakes the
         * agent only each 7/8 of it written (FP_PERF_THREAD_RING_MS), so
         * at low rates this tick reads most samples, and the room it
         * leaves is what keeps the ring from overflowing between wake-ups.
         */
        fp_target_drain(t);
        for (size_t i = 0; i < t->n_threads; i++) /* as a ring's wake-up does, after samples */
                if (t->threads[i]->since && t->threads[i]->starter.fd < 0)
                        jitter_period(t, t->threads[i]);
        if (t->st.state == FP_TARGET_EXITED)
                return;
        /*
         * The /proc pass, a safety net for births and exits no record told
         * of: each second, or while the BPF tracker reports them all (it
         * counts the records it could not keep) every PROC_PASS_TRACKED
         * seconds and at the first rescan after a loss.
         */
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        /* (A tenth of a second early: the tenth tick must not wait for the eleventh.) */
        if (!t->bpf_tracked || t->proc_due ||
            now - t->proc_pass_ns >= PROC_PASS_TRACKED * 1000000000ULL - 100000000ULL) {
                t->proc_due = false;
                t->proc_pass_ns = now;
                /* Threads whose exit record we have not seen yet (the hangup catches them too). */
                for (size_t i = 0; i < t->n_threads; i++) {
                        struct fp_thread *th = t->threads[i];
                        if (th->live && fp_perf_ring_hangup(&th->sideband))
                                fp_thread_detach(th);
                }
                if (!process_gone(t)) {
                        /* Found here, a thread was missed by the tracker (or born during start). */
                        int n = fp_target_rescan(t, NULL);
                        if (n > 0)
                                t->st.threads_by_rescan += (unsigned)n;
                }
        }
        fp_target_check_exited(t);
        if (t->st.state == FP_TARGET_RUNNING) {
                prune_dead_threads(t);
                fit_stack(t);
        }
}

/* ---- thread tracking: births and exits reported by a tracker ---- */

/* Birth to the moment th's sampling began. */
static void record_latency(struct fp_target *t, const struct fp_thread *th, uint64_t birth_ns)
{
        uint64_t now = th ? th->attach_ns : fp_now_ns(CLOCK_MONOTONIC);
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

void fp_target_on_retry(evutil_socket_t fd, short what, void *arg)
{
        struct fp_target *t = arg;
        unsigned kept = 0;
        (void)fd;
        (void)what;

        for (unsigned i = 0; i < t->n_retry; i++) {
                pid_t tid = t->retry[i].tid;
                int r = t->st.state == FP_TARGET_RUNNING ? thread_attach(t, tid) : -ESRCH;
                if (r == 0) {
                        record_latency(t, fp_thread_find(t, tid), t->retry[i].birth_ns);
                        continue;
                }
                if (r == -EUSERS)
                        continue; /* counted; the rescan takes it up when there is room */
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

/*
 * The kernel's per-thread count of a software event that leads t (page
 * faults, context switches), if it keeps one: a new thread's events before
 * its own counter opens are then counted from its birth.
 */
static bool kernel_counts(const struct fp_target *t, enum fp_proc_events *ret)
{
        if (t->cfg.event.type != PERF_TYPE_SOFTWARE)
                return false;
        switch (t->cfg.event.config) {
        case PERF_COUNT_SW_PAGE_FAULTS:
                *ret = FP_PROC_PAGE_FAULTS;
                return true;
        case PERF_COUNT_SW_PAGE_FAULTS_MIN:
                *ret = FP_PROC_MINOR_FAULTS;
                return true;
        case PERF_COUNT_SW_PAGE_FAULTS_MAJ:
                *ret = FP_PROC_MAJOR_FAULTS;
                return true;
        case PERF_COUNT_SW_CONTEXT_SWITCHES:
                *ret = FP_PROC_CONTEXT_SWITCHES;
                return true;
        default:
                return false;
        }
}

/* Adds n events of a new thread that its samples do not hold, under [thread start]. */
static void thread_start(struct fp_target *t, struct fp_thread *th, pid_t tid, uint64_t n)
{
        fp_target_add_synthetic(t, tid, FP_FRAME_THREAD_START, n);
        t->st.start_counted++;
        t->st.start_events += n;
        if (th)
                th->start_value += n;
}

int fp_target_thread_born(struct fp_target *t, pid_t tid, uint64_t birth_ns)
{
        struct fp_thread *th = fp_thread_find(t, tid);
        enum fp_proc_events kind;
        uint64_t before = 0;
        int r;

        if (t->st.state != FP_TARGET_RUNNING)
                return -ESRCH;
        /* Attached already, by a fp_target_rescan that ran before this birth was read: nothing to
         * do. */
        if (th && (th->live || (th->exited && birth_ns && birth_ns <= th->attach_ns)))
                return 0;
        if (th && th->exited)
                th->exited = false; /* the tid was reused by a new thread */
        /* Read before its counter opens: what the counter then counts is not in it. */
        bool counted =
            kernel_counts(t, &kind) && fp_proc_thread_events(t->pid, tid, kind, &before) == 0;
        r = thread_attach(t, tid);
        th = fp_thread_find(t, tid);
        if (th) {
                /* Its whole life is the target's: its CPU is accounted at its exit. */
                th->born = true;
                th->cpu_known = false;
                th->value = 0;
                th->start_value = 0;
        }
        if (r == 0) {
                record_latency(t, th, birth_ns);
                if (counted && before)
                        thread_start(t, th, tid, before);
                return 0;
        }
        if (r == -EUSERS)
                return 0; /* over --max-threads: counted, not an error */
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
        struct fp_thread *th = fp_thread_find(t, tid);

        if (th && th->live)
                fp_thread_detach(th);
        fp_target_check_exited(t);
}

/* Of ev, the count of the event kind. */
static uint64_t events_of(const struct fp_thread_events *ev, enum fp_proc_events kind)
{
        switch (kind) {
        case FP_PROC_PAGE_FAULTS:
                return ev->min_flt + ev->maj_flt;
        case FP_PROC_MINOR_FAULTS:
                return ev->min_flt;
        case FP_PROC_MAJOR_FAULTS:
                return ev->maj_flt;
        default:
                return ev->nvcsw + ev->nivcsw;
        }
}

void fp_target_thread_cpu(struct fp_target *t, pid_t tid, uint64_t cpu_ns,
                          const struct fp_thread_events *ev)
{
        struct fp_thread *th = fp_thread_find(t, tid);
        enum fp_proc_events kind;
        bool counter = ev && kernel_counts(t, &kind);
        uint64_t n;

        /* A thread that lived and died before the agent knew it: its whole count. */
        if (!th) {
                if (counter && (n = events_of(ev, kind)))
                        thread_start(t, NULL, tid, n);
                return;
        }
        if (!th->born || th->cpu_known)
                return;
        if (th->live)
                fp_thread_detach(th); /* it is dead: its last samples now */
        th->cpu_known = true;
        t->st.born_exited++;
        t->st.born_cpu_ns += cpu_ns;
        t->st.born_profiled += th->value;
        t->st.born_before_ns += th->cpu_before < cpu_ns ? th->cpu_before : cpu_ns;
        /*
         * A counter-led target: what the kernel counted of the thread beyond
         * what its samples and its start hold. A burst at a thread's start (a
         * hundred page faults in 50 us) passes its first sample before the
         * agent can switch from the random first period to its group: those
         * events, and any before its counter opened, are kept here.
         */
        if (counter && !th->over_limit && (n = events_of(ev, kind)) > th->value + th->start_value)
                thread_start(t, th, tid, n - th->value - th->start_value);
}

/*
 * The weight of a bridge tick of thread tid in t, 0 when it is left out.
 * Each tick stands for a bridge period of CPU. A target sampled slower
 * keeps each with probability bridge/own period and weighs it as its own;
 * one sampled faster (or by frequency) weighs it as the bridge's: either
 * way the expected weight is the CPU it ran.
 */
static uint64_t bridge_weight(struct fp_target *t, pid_t tid, uint64_t bridge_period)
{
        uint64_t p = t->cfg.period;

        if (t->cfg.freq || p <= bridge_period)
                return bridge_period;
        return next_random(t, tid) % p < bridge_period ? p : 0;
}

/* What thread th's bridge ticks added to t since value v: its share of the born account. */
static void bridge_account(struct fp_target *t, struct fp_thread *th, uint64_t v)
{
        /* No record (its birth not handled yet, or refused): not in the born account. */
        if (th && th->cpu_known)
                t->st.born_profiled += t->st.value - v; /* its exit accounting came first */
        else if (th)
                th->value += t->st.value - v;
}

void fp_target_bridge_sample(struct fp_target *t, const struct fp_perf_sample *s,
                             uint64_t bridge_period)
{
        struct fp_thread *th = fp_thread_find(t, (pid_t)s->tid);
        uint64_t v = t->st.value;

        /* Its own sampling has begun: from then on the bridge's samples are its events' twins. */
        if (th && th->attach_ns && s->time >= th->attach_ns) {
                t->st.bridge_twins++;
                return;
        }
        /* Kernel time of a target that does not count it (a user's rule). */
        if (!t->cfg.count_kernel &&
            (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
                return;
        /* A tick is CPU time: only a clock's profile can hold it. */
        if (!fp_perf_event_is_clock(&t->cfg.event)) {
                t->st.bridge_left_out++;
                t->st.bridge_left_out_ns += bridge_period;
                return;
        }
        struct fp_perf_sample c = *s;
        c.n_counters = 0;
        c.period = bridge_weight(t, (pid_t)s->tid, bridge_period);
        if (!c.period)
                return;
        fp_target_add_sample(t, &c);
        t->st.bridged++;
        bridge_account(t, th, v);
}

void fp_target_exit_tail(struct fp_target *t, pid_t tid, uint64_t bridge_period)
{
        uint64_t v = t->st.value, w;

        /* All kernel time: a target that does not count it has none. */
        if (!t->cfg.count_kernel)
                return;
        if (!fp_perf_event_is_clock(&t->cfg.event)) { /* CPU time, as the bridge's ticks */
                t->st.bridge_left_out++;
                t->st.bridge_left_out_ns += bridge_period;
                return;
        }
        if (!(w = bridge_weight(t, tid, bridge_period)))
                return;
        fp_target_add_synthetic(t, tid, FP_FRAME_THREAD_EXIT, w);
        t->st.exit_tails++;
        bridge_account(t, fp_thread_find(t, tid), v);
}

void fp_target_set_tracking(struct fp_target *t, bool bpf, bool follow_children, pid_t parent_pid,
                            fp_target_child_fn on_child, void *userdata)
{
        t->bpf_tracked = bpf;
        t->follow_children = follow_children;
        t->parent_pid = parent_pid;
        /* A followed child was tracked from its fork: its threads' lives are all its own. */
        for (size_t i = 0; parent_pid && i < t->n_threads; i++)
                t->threads[i]->born = true;
        t->on_child = on_child;
        t->child_userdata = userdata;
}

size_t fp_target_live_tids(const struct fp_target *t, pid_t *ret, size_t max)
{
        size_t n = 0;

        for (size_t i = 0; i < t->n_threads && n < max; i++)
                if (t->threads[i]->live)
                        ret[n++] = t->threads[i]->tid;
        return n;
}

bool fp_target_bpf_tracked(const struct fp_target *t)
{
        return t->bpf_tracked;
}

void fp_target_proc_pass_soon(struct fp_target *t)
{
        t->proc_due = true;
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
                /* Another program: its CPython, if any, is another's. */
                if ((r->misc & PERF_RECORD_MISC_COMM_EXEC) && (pid_t)r->comm.pid == t->pid) {
                        fp_target_python_forget(t);
                        (void)fp_maps_exec(t->maps); /* the new program's mappings live */
                        fp_target_jvm_look(t);       /* a JVM, or none any more */
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

static void handle_sample(void *userdata, const struct fp_perf_sample *s)
{
        struct fp_target *t = userdata;

        if (t->bonus && s->tid == (uint32_t)t->bonus_tid) {
                struct fp_perf_sample c = *s;
                c.period += t->bonus;
                t->bonus = 0;
                fp_target_add_sample(t, &c);
                return;
        }
        fp_target_add_sample(t, s);
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
        uint64_t n = t->st.samples, v = t->st.value;

        /* The group's first sample makes up for the switch's delay (start_group()). */
        t->bonus_tid = th->tid;
        t->bonus = th->shift;
        fp_target_drain_ring(t, &th->sampler);
        if (th->shift && !t->bonus) {
                t->st.first_shift += th->shift;
                th->shift = 0;
        }
        t->bonus = 0;
        th->since += t->st.samples - n;
        th->value += t->st.value - v;
        /* Only this thread's samples are in its ring, taken at th->period. */
        if (th->period)
                th->period_debt +=
                    (int64_t)(t->st.samples - n) * ((int64_t)th->period - (int64_t)t->cfg.period);
}

/*
 * A fixed period can lock step with regular work (a loop that runs as
 * long as the period samples the same phase every time). A drain (at
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
 * the exact one as one step can take it: 5% of the samples of a step.
 */
static void jitter_period(struct fp_target *t, struct fp_thread *th)
{
        uint64_t p = t->cfg.period, now = fp_now_ns(CLOCK_MONOTONIC);

        /*
         * Reading the count and setting the period each cost an IPI to the
         * thread's CPU when it runs, so a change comes at most every 100 ms
         * and, after the first, every FP_PERF_JITTER_MIN_SAMPLES samples: at low
         * rates the step's 2.5-5% phase drift per sample still walks the
         * phase 0.8-1.6 periods between changes.
         */
        if (t->cfg.freq || p < 8 || !th->live || now - th->jitter_ns < 100000000ULL ||
            (th->period && th->since < FP_PERF_JITTER_MIN_SAMPLES))
                return;
        th->jitter_ns = now;
        /* No debt yet (a first change): either side, or a thread that ends soon is biased. */
        uint64_t np = fp_perf_jitter_period(p, th->period_debt, next_random(t, th->tid));
        /*
         * Setting a period restarts it: what the thread ran since its last
         * sample would be lost (half a period on average, at every change).
         * The leader's count says how much that is (its count at the last
         * sample is where the period last restarted plus a period a sample
         * since), and the group's next sample counts for that much more,
         * as after the first period's switch (start_group()).
         */
        uint64_t count, cur = th->period ? th->period : p;
        bool counted = fp_perf_read_count(&th->sampler, &count) == 0;
        if (fp_perf_set_period(&th->sampler, np) < 0)
                return;
        th->period = np;
        if (!counted)
                return;
        uint64_t last = th->restarted + th->since * cur;
        if (count > last && count - last < cur)
                th->shift += count - last;
        th->restarted = count;
        th->since = 0;
}

void fp_target_on_sampler(evutil_socket_t fd, short what, void *arg)
{
        struct fp_thread *th = arg;
        struct fp_target *t = th->target;
        (void)fd;
        (void)what;

        t->st.ring_wakes++;
        /* Mappings and names first, so the samples resolve against them. */
        fp_target_drain_ring(t, &th->sideband);
        fp_target_drain_sampler(t, th);
        jitter_period(t, th);
        /* The stack copy is to change size: reopen the threads after this callback. */
        if (t->cfg.unwind != FP_UNWIND_FP && t->cfg.stack_bytes &&
            fp_stackfit_size(&t->walk.fit, t->cfg.stack_bytes) != t->cfg.stack_bytes &&
            !event_pending(t->ev_fit, EV_TIMEOUT, NULL))
                event_active(t->ev_fit, EV_TIMEOUT, 1);
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
