/* SPDX-License-Identifier: MIT */
/*
 * The host tier; see host.h for what it keeps and why.
 *
 * A round (every second, and whenever a ring is a quarter full) reads
 * every CPU's side-band ring into one queue, sorts it by time and applies
 * it: generations begin at FORK and exec and end at exec and exit, MMAP2
 * records extend the generation they fall in, CGROUP records name cgroup
 * ids. Then it reads every CPU's sampler and resolves each sample against
 * the generation of its pid whose time range holds the sample's time, so a
 * sample taken before an exec is unwound against the mappings before it,
 * whichever CPU either record came from. (A side-band record written while
 * the round reads the rings may reach the queue only in the next round;
 * the window is the few milliseconds a round takes.)
 */
#include "host.h"
#include "aggregate.h"
#include "labels.h"
#include "maps.h"
#include "offcpu.h"
#include "perf.h"
#include "perfmap.h"
#include "procfs.h"
#include "pyframes.h"
#include "runtimes.h"
#include "pystack.h"
#include "stackwalk.h"
#include "targetconf.h"
#include "unwind.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define ROUND_MS         1000
#define PID_BUCKETS      4096
#define CGROUP_MAX       65536
#define CGROUP_RESCAN_NS 2000000000ULL
#define THREAD_NAMES_MAX 256 /* per generation; past it threads go by the process's name */
#define FORGET_AFTER_NS  1000000000ULL
#define SIDEBAND_PAGES   64
#define PERFMAPS_MAX     64 /* processes whose JIT perf map is held at once */
#define CGROUP_ROOT      "/sys/fs/cgroup"
#define OFF_PENDING_BITS 10
#define OFF_PENDING      (1u << OFF_PENDING_BITS) /* off-CPU stacks waiting for their weights */
#define OFF_PROBE        8 /* slots a tid's stack may take, from its hash on */

struct thread_name {
        pid_t tid;
        char comm[16];
};

struct fp_host_proc {
        struct fp_host *host;
        pid_t pid;
        uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC; end UINT64_MAX while it lasts */
        bool kthread;
        char comm[16];
        char *exe; /* "" unknown */
        uint64_t cgroup;
        uint64_t labelled_cgroup; /* the cgroup labels and service were computed for */
        struct fp_labels labels;
        char service[FP_LABEL_MAX];
        char *cgroup_path;
        struct fp_maps *maps;
        struct fp_stackwalk walk, off_walk; /* off_walk: its off-CPU records' (copied stacks) */
        struct fp_agg *agg;
        struct fp_agg *off_agg[FP_OFFCPU_REASONS]; /* created by its first off-CPU record */
        struct thread_name *threads;
        size_t n_threads, cap_threads;
        struct fp_perfmap *perfmap; /* its runtime's JIT names, read on a first anonymous frame */
        struct fp_jvm_names *jvm;   /* a JVM's (looked for at a miss in the map) */
        size_t jvm_looked_maps;     /* its mappings when last looked at for one */
        struct fp_pyproc py;        /* whether it runs a CPython, and its frames' names */
        struct fp_host_proc *older; /* the same pid's previous generation */
        struct fp_host_proc *next;  /* the pid bucket's chain (newest generations only) */
};

struct cpu {
        int cpu;
        bool open;
        struct fp_perf_ring sampler, sideband;
        uint64_t period;     /* the sampler's jittered period (ns), 0 until its first change */
        uint64_t since;      /* samples since its last change */
        int64_t period_debt; /* its samples' periods less as many configured ones (ns) */
        struct event *ev_sampler, *ev_sideband;
        struct fp_host *host;
};

/* A side-band record, copied out of its ring until the round applies it in time order. */
struct sbrec {
        uint64_t time, seq;
        uint32_t type;
        uint16_t misc;
        uint32_t pid, tid, ppid;
        uint64_t addr, len, pgoff, dev, ino, id;
        uint32_t prot;
        char *text; /* comm, file name or cgroup path; owned */
};

struct cgroup_name {
        uint64_t id;
        char *path;
};

/* A block's stack from its switch-out, waiting for the weights its switch-in brings. */
struct off_pending {
        pid_t tid, pid; /* tid 0: free */
        uint32_t seq, n;
        uint64_t time; /* the stack's record: whose generation it is */
        unsigned epoch;
        struct fp_frame *frames; /* n of them */
};

struct fp_host {
        struct event_base *base;
        struct fp_symcache *cache;
        struct fp_host_config cfg;
        struct fp_perf_config pcfg; /* the samplers' perf configuration */
        fp_host_covered_fn covered;
        void *covered_userdata;
        struct cpu *cpus;
        size_t n_cpus;
        struct event *ev_round, *ev_cpus;
        struct fp_host_proc **procs; /* every generation kept, in no order */
        size_t n_procs, cap_procs;
        struct fp_host_proc *by_pid[PID_BUCKETS];
        struct sbrec *queue;
        size_t n_queue, cap_queue;
        uint64_t seq;
        struct cgroup_name *cgroups; /* sorted by id */
        size_t n_cgroups, cap_cgroups;
        uint64_t cgroup_scan_ns;
        uint64_t last_time;            /* the newest record or sample time applied */
        unsigned perfmaps;             /* generations holding a perf map */
        struct fp_jvm_group jvm_group; /* the tier's JVM requests: one at a time */
        bool in_round;
        uint64_t period;       /* the samplers' configured period (ns) */
        uint64_t drawn;        /* sample records read from the samplers, idle ones too */
        uint64_t jitter_state; /* fp_perf_random()'s */
        struct fp_host_stats hs, hs_bucketed;
        struct fp_perf_config off_pcfg; /* how off-CPU stacks are walked: copies, user only */
        struct fp_target_stats off_st;  /* their unwinding figures, apart from the samples' */
        struct off_pending *pending;    /* OFF_PENDING, with the first off-CPU record */
        struct fp_pystack *pystack; /* reads Python stacks at its samples (the core's), or NULL */
        struct fp_pyframes_stats py_gone[FP_PYSTACK_KINDS]; /* of the generations forgotten */
        uint64_t py_attach_failed; /* CPUs' events the program could not be attached to */
        struct {
                char reason[32];
                uint64_t count;
        } carried[8];
        struct fp_frame frames[FP_STACKWALK_MAX_FRAMES];
};

/* ---- cgroups ---- */

static int cgroup_cmp(const void *a, const void *b)
{
        const struct cgroup_name *x = a, *y = b;
        return x->id < y->id ? -1 : x->id > y->id;
}

static struct cgroup_name *cgroup_find(struct fp_host *h, uint64_t id)
{
        struct cgroup_name key = {.id = id};
        return h->n_cgroups ? bsearch(&key, h->cgroups, h->n_cgroups, sizeof(key), cgroup_cmp)
                            : NULL;
}

/* Adds (or renames) cgroup id; keeps the table sorted. Past CGROUP_MAX nothing is added. */
static void cgroup_add(struct fp_host *h, uint64_t id, const char *path)
{
        struct cgroup_name *c = cgroup_find(h, id);
        char *copy;

        if (c) {
                if (strcmp(c->path, path) != 0 && (copy = strdup(path))) {
                        free(c->path);
                        c->path = copy;
                }
                return;
        }
        if (h->n_cgroups >= CGROUP_MAX ||
            fp_grow(&h->cgroups, &h->cap_cgroups, h->n_cgroups + 1, sizeof(*h->cgroups)) < 0 ||
            !(copy = strdup(path)))
                return;
        size_t i = h->n_cgroups;
        while (i > 0 && h->cgroups[i - 1].id > id) {
                h->cgroups[i] = h->cgroups[i - 1];
                i--;
        }
        h->cgroups[i] = (struct cgroup_name){id, copy};
        h->n_cgroups++;
}

/*
 * Walks the cgroup v2 tree: a cgroup's id is its directory's inode number
 * (kernfs), the id PERF_SAMPLE_CGROUP gives.
 */
static void cgroup_scan_dir(struct fp_host *h, char *path, size_t len, size_t root_len, int depth)
{
        struct stat st;
        DIR *d;
        struct dirent *e;

        if (depth > 32 || stat(path, &st) < 0)
                return;
        cgroup_add(h, (uint64_t)st.st_ino, len > root_len ? path + root_len : "/");
        if (!(d = opendir(path)))
                return;
        while ((e = readdir(d)) && h->n_cgroups < CGROUP_MAX) {
                if (e->d_type != DT_DIR || e->d_name[0] == '.')
                        continue;
                size_t n = strlen(e->d_name);
                if (len + 1 + n >= 4096)
                        continue;
                path[len] = '/';
                memcpy(path + len + 1, e->d_name, n + 1);
                cgroup_scan_dir(h, path, len + 1 + n, root_len, depth + 1);
                path[len] = 0;
        }
        closedir(d);
}

static void cgroup_scan(struct fp_host *h)
{
        char path[4096];
        struct statfs sf;

        h->cgroup_scan_ns = fp_now_ns(CLOCK_MONOTONIC);
        if (!fp_proc_cgroup2_root(path, sizeof(path)) || statfs(path, &sf) < 0 ||
            sf.f_type != CGROUP2_SUPER_MAGIC)
                return;
        cgroup_scan_dir(h, path, strlen(path), strlen(path), 0);
}

/* The path of cgroup id, rescanning the tree (at most every 2 s) for one not yet known. */
static const char *cgroup_path(struct fp_host *h, uint64_t id)
{
        struct cgroup_name *c;

        if (!id)
                return NULL;
        if ((c = cgroup_find(h, id)))
                return c->path;
        if (fp_now_ns(CLOCK_MONOTONIC) - h->cgroup_scan_ns < CGROUP_RESCAN_NS)
                return NULL;
        cgroup_scan(h);
        return (c = cgroup_find(h, id)) ? c->path : NULL;
}

/* ---- generations ---- */

static struct fp_host_proc **pid_slot(struct fp_host *h, pid_t pid)
{
        struct fp_host_proc **p = &h->by_pid[(uint32_t)pid % PID_BUCKETS];
        while (*p && (*p)->pid != pid)
                p = &(*p)->next;
        return p;
}

static void proc_free(struct fp_host_proc *p)
{
        if (!p)
                return;
        if (p->jvm) {
                fp_jvm_names_free(p->jvm);
                free(p->jvm);
        }
        if (p->perfmap) {
                fp_perfmap_free(p->perfmap);
                p->host->perfmaps--;
        }
        if (p->py.py) {
                struct fp_pyframes_stats ps;
                fp_pyframes_stats(p->py.py, &ps);
                fp_pyframes_stats_add(&p->host->py_gone[fp_pyframes_kind(p->py.py)], &ps);
        }
        fp_pyproc_free(&p->py, p->host->pystack, p->pid);
        fp_agg_free(p->agg);
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++)
                fp_agg_free(p->off_agg[i]);
        fp_maps_free(p->maps);
        free(p->exe);
        free(p->cgroup_path);
        free(p->threads);
        free(p);
}

/*
 * A new generation of pid starting at start_ns, made the newest of its
 * pid (the one before it, if any, ends there). NULL when out of memory or
 * past FP_HOST_MAX_PROCS (counted by the caller's sample, if any).
 */
static const char *jit_warm(void *proc, uint64_t addr);

static struct fp_host_proc *proc_new(struct fp_host *h, pid_t pid, uint64_t start_ns,
                                     const char *comm, const char *exe)
{
        struct fp_host_proc *p, **slot;

        if (h->n_procs >= FP_HOST_MAX_PROCS ||
            fp_grow(&h->procs, &h->cap_procs, h->n_procs + 1, sizeof(*h->procs)) < 0 ||
            !(p = calloc(1, sizeof(*p))))
                return NULL;
        p->host = h;
        p->pid = pid;
        p->start_ns = start_ns;
        p->end_ns = UINT64_MAX;
        p->py.off = fp_perf_interpreters_off(&h->pcfg);
        snprintf(p->comm, sizeof(p->comm), "%s", comm ? comm : "");
        p->exe = strdup(exe ? exe : "");
        p->maps = fp_maps_new(pid, h->cache);
        p->agg = fp_agg_new(0);
        if (!p->exe || !p->maps || !p->agg) {
                proc_free(p);
                return NULL;
        }
        fp_agg_set_limit(p->agg, FP_HOST_MAX_STACKS);
        p->walk = (struct fp_stackwalk){.maps = p->maps,
                                        .cfg = &h->pcfg,
                                        .st = &h->hs.st,
                                        .may_reload = true,
                                        .jit_name = jit_warm,
                                        .java_method = fp_host_proc_java_method,
                                        .java_code = fp_host_proc_java_code,
                                        .jit_ctx = p};
        p->off_walk = p->walk;
        p->off_walk.cfg = &h->off_pcfg;
        p->off_walk.st = &h->off_st;
        slot = pid_slot(h, pid);
        if (*slot) {
                struct fp_host_proc *old = *slot;
                if (old->end_ns > start_ns)
                        old->end_ns = start_ns;
                old->walk.may_reload = old->off_walk.may_reload = false;
                fp_pyproc_forget(&old->py, h->pystack, pid); /* the program reads the new one's */
                p->next = old->next;
                old->next = NULL;
                p->older = old;
        }
        *slot = p;
        h->procs[h->n_procs++] = p;
        return p;
}

/* The generation of pid that time falls in, or NULL. */
static struct fp_host_proc *proc_at(struct fp_host *h, pid_t pid, uint64_t time)
{
        for (struct fp_host_proc *p = *pid_slot(h, pid); p; p = p->older)
                if (p->start_ns <= time)
                        return time < p->end_ns ? p : NULL;
        return NULL;
}

/* Learns a running process from /proc (one that ran before the tier started). */
static struct fp_host_proc *proc_from_proc(struct fp_host *h, pid_t pid)
{
        char comm[16] = "", exe[4096];
        struct fp_host_proc *p;

        if (fp_proc_comm(pid, pid, comm, sizeof(comm)) < 0)
                return NULL;
        /* A kernel thread has no executable (and no user memory to unwind). */
        bool kthread = fp_proc_exe(pid, exe, sizeof(exe)) == -ENOENT;
        p = proc_new(h, pid, 0, comm, exe);
        if (!p)
                return NULL;
        p->kthread = kthread;
        if (!p->kthread)
                (void)fp_maps_load_proc(p->maps);
        h->hs.procs_from_proc++;
        return p;
}

static void thread_name_set(struct fp_host_proc *p, pid_t tid, const char *comm)
{
        for (size_t i = 0; i < p->n_threads; i++)
                if (p->threads[i].tid == tid) {
                        snprintf(p->threads[i].comm, sizeof(p->threads[i].comm), "%s", comm);
                        return;
                }
        if (p->n_threads >= THREAD_NAMES_MAX ||
            fp_grow(&p->threads, &p->cap_threads, p->n_threads + 1, sizeof(*p->threads)) < 0)
                return;
        p->threads[p->n_threads].tid = tid;
        snprintf(p->threads[p->n_threads].comm, sizeof(p->threads[0].comm), "%s", comm);
        p->n_threads++;
}

/* ---- side-band records ---- */

static void sideband_record(void *userdata, const struct fp_perf_record *r)
{
        struct fp_host *h = userdata;
        struct sbrec q = {.time = r->time, .type = r->type, .misc = r->misc};
        const char *text = NULL;

        switch (r->type) {
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
                q.pid = r->task.pid;
                q.ppid = r->task.ppid;
                q.tid = r->task.tid;
                q.time = r->task.time;
                break;
        case PERF_RECORD_COMM:
                q.pid = r->comm.pid;
                q.tid = r->comm.tid;
                text = r->comm.comm;
                break;
        case PERF_RECORD_MMAP:
        case PERF_RECORD_MMAP2:
                if (!(r->mmap.prot & 4 /* PROT_EXEC */))
                        return;
                q.pid = r->mmap.pid;
                q.addr = r->mmap.addr;
                q.len = r->mmap.len;
                q.pgoff = r->mmap.pgoff;
                q.dev = makedev(r->mmap.maj, r->mmap.min);
                q.ino = r->mmap.ino;
                text = r->mmap.filename;
                break;
        case PERF_RECORD_CGROUP:
                q.id = r->cgroup.id;
                text = r->cgroup.path;
                break;
        case PERF_RECORD_LOST:
                h->hs.sideband_lost += r->lost.lost;
                return;
        default:
                return;
        }
        /*
         * The kernel says -1 for a task already detached from its pids (the
         * last moments of a PID namespace's init): no process to learn.
         */
        if (r->type != PERF_RECORD_CGROUP && ((int32_t)q.pid < 0 || (int32_t)q.tid < 0))
                return;
        if (fp_grow(&h->queue, &h->cap_queue, h->n_queue + 1, sizeof(*h->queue)) < 0 ||
            (text && !(q.text = strdup(text)))) {
                h->hs.sideband_lost++;
                return;
        }
        q.seq = h->seq++;
        h->queue[h->n_queue++] = q;
}

static int sbrec_cmp(const void *a, const void *b)
{
        const struct sbrec *x = a, *y = b;
        if (x->time != y->time)
                return x->time < y->time ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void apply(struct fp_host *h, const struct sbrec *q)
{
        struct fp_host_proc *p, *parent;

        switch (q->type) {
        case PERF_RECORD_FORK:
                if (q->pid == q->ppid)
                        return; /* a new thread: it goes by its process's name until a COMM */
                parent = proc_at(h, (pid_t)q->ppid, q->time);
                /* A parent older than the tier and never sampled: /proc, while it runs. */
                if (!parent && !*pid_slot(h, (pid_t)q->ppid) && h->n_procs + 1 < FP_HOST_MAX_PROCS)
                        parent = proc_from_proc(h, (pid_t)q->ppid);
                p = proc_new(h, (pid_t)q->pid, q->time, parent ? parent->comm : "",
                             parent ? parent->exe : "");
                if (!p)
                        return;
                h->hs.procs_from_ring++;
                if (parent) {
                        p->kthread = parent->kthread || q->ppid == 2;
                        p->cgroup = parent->cgroup;
                        (void)fp_maps_copy_live(p->maps, parent->maps);
                } else {
                        /* A parent gone before the tier saw it: the child's own name, from /proc.
                         */
                        p->kthread = q->ppid == 2;
                        (void)fp_proc_comm((pid_t)q->pid, (pid_t)q->pid, p->comm, sizeof(p->comm));
                }
                break;
        case PERF_RECORD_COMM:
                if (q->misc & PERF_RECORD_MISC_COMM_EXEC) {
                        char exe[4096];
                        uint64_t cg;
                        /* The new image: its executable is /proc's now, if it runs it still. */
                        (void)fp_proc_exe((pid_t)q->pid, exe, sizeof(exe));
                        parent = proc_at(h, (pid_t)q->pid, q->time);
                        cg = parent ? parent->cgroup : 0;
                        p = proc_new(h, (pid_t)q->pid, q->time, q->text, exe);
                        if (!p)
                                return;
                        p->cgroup = cg;
                        h->hs.procs_from_ring++;
                        return;
                }
                p = proc_at(h, (pid_t)q->pid, q->time);
                if (!p)
                        return;
                if (q->tid == q->pid)
                        snprintf(p->comm, sizeof(p->comm), "%s", q->text);
                thread_name_set(p, (pid_t)q->tid, q->text);
                break;
        case PERF_RECORD_MMAP:
        case PERF_RECORD_MMAP2:
                p = proc_at(h, (pid_t)q->pid, q->time);
                if (p && !p->exe[0] && q->pgoff == 0 && q->text && q->text[0] == '/') {
                        /* An exec's first file mapping is its executable. */
                        char *exe = strdup(q->text);
                        if (exe) {
                                free(p->exe);
                                p->exe = exe;
                        }
                }
                if (p)
                        (void)fp_maps_add(p->maps, q->addr, q->len, q->pgoff, q->dev, q->ino,
                                          q->text);
                break;
        case PERF_RECORD_EXIT:
                if (q->pid != q->tid)
                        return;
                p = proc_at(h, (pid_t)q->pid, q->time);
                if (p && p->end_ns > q->time) {
                        p->end_ns = q->time;
                        p->walk.may_reload = p->off_walk.may_reload = false;
                        if (p == *pid_slot(h, p->pid))
                                fp_pyproc_forget(&p->py, h->pystack, p->pid);
                }
                break;
        case PERF_RECORD_CGROUP:
                if (q->text)
                        cgroup_add(h, q->id, q->text);
                break;
        default:
                break;
        }
}

/* ---- samples ---- */

static void sampler_record(void *userdata, const struct fp_perf_record *r)
{
        struct fp_host *h = userdata;

        if (r->type == PERF_RECORD_LOST || r->type == PERF_RECORD_LOST_SAMPLES)
                h->hs.st.lost += r->lost.lost;
        else if (r->type == PERF_RECORD_THROTTLE)
                h->hs.st.throttled++;
}

static void sample(void *userdata, const struct fp_perf_sample *s)
{
        struct fp_host *h = userdata;
        struct fp_host_proc *p;
        pid_t pid = (pid_t)s->pid;
        uint32_t n;
        int r;

        h->drawn++;
        if (pid == 0) {
                h->hs.idle++;
                return;
        }
        if (pid < 0 || (pid_t)s->tid < 0) { /* detached from its pids: whose it was is gone */
                h->hs.unknown++;
                return;
        }
        if (h->covered && h->covered(h->covered_userdata, pid, s->time)) {
                h->hs.covered++;
                return;
        }
        p = proc_at(h, pid, s->time);
        if (!p && !*pid_slot(h, pid)) {
                if (h->n_procs >= FP_HOST_MAX_PROCS) {
                        h->hs.table_full++;
                        return;
                }
                p = proc_from_proc(h, pid);
        }
        if (!p) {
                h->hs.unknown++;
                return;
        }
        if (s->cgroup)
                p->cgroup = s->cgroup;
        n = fp_stackwalk(&p->walk, s, h->frames);
        /* Python frames: the program reads only the pid's newest generation while it runs. */
        if (!p->kthread && p->end_ns == UINT64_MAX && p == *pid_slot(h, pid))
                n = fp_pyproc_merge(&p->py, h->pystack, pid, p->maps, (pid_t)s->tid, s->time,
                                    h->frames, n, FP_STACKWALK_MAX_FRAMES);
        r = fp_agg_add(p->agg, (pid_t)s->tid, fp_maps_epoch(p->maps), h->frames, n, s->period, NULL,
                       fp_stackwalk_resolve, &p->walk);
        if (r == -ENOSPC) {
                h->hs.st.stacks_over_limit++;
                h->frames[0] = (struct fp_frame){.flags = FP_FRAME_OVERFLOW};
                r = fp_agg_add(p->agg, (pid_t)s->tid, 0, h->frames, 1, s->period, NULL, NULL, NULL);
        }
        if (r == 0) {
                h->hs.st.samples++;
                h->hs.st.value += s->period;
        } else {
                h->hs.st.dropped_nomem++;
        }
        if (s->time > h->last_time)
                h->last_time = s->time;
}

static const struct fp_perf_handlers sideband_handlers = {.record = sideband_record};
static const struct fp_perf_handlers sampler_handlers = {.sample = sample,
                                                         .record = sampler_record};

/* Reads every side-band ring and applies what it held, in time order. */
static void sideband_round(struct fp_host *h)
{
        for (size_t i = 0; i < h->n_cpus; i++)
                if (h->cpus[i].open &&
                    fp_perf_ring_drain(&h->cpus[i].sideband, &sideband_handlers, h) == -EBADMSG)
                        h->hs.sideband_lost++;
        if (h->n_queue) /* h->queue stays NULL until a record comes */
                qsort(h->queue, h->n_queue, sizeof(*h->queue), sbrec_cmp);
        for (size_t i = 0; i < h->n_queue; i++) {
                apply(h, &h->queue[i]);
                if (h->queue[i].time > h->last_time)
                        h->last_time = h->queue[i].time;
                free(h->queue[i].text);
        }
        h->n_queue = 0;
}

/*
 * A CPU's timer fires at a fixed period and so can lock step with a
 * program's regular work as a thread's can (one function of a loop's two
 * in turn sampled far more than its share), so each CPU's period is
 * jittered as a target thread's is (threads.c's jitter_period()), after
 * each round that read a few dozen of its samples. A sample counts for
 * the configured period whatever the period now (the clocks report the
 * period they were opened with), and the side of each step keeps the
 * periods' mean at it. Setting a period restarts it: the part of a period
 * the CPU had run goes unsampled, half a period a change on average, 0.1%
 * of the samples at one change a second.
 */
static void jitter_cpu(struct fp_host *h, struct cpu *c)
{
        if (h->period < 40 || (c->period && c->since < FP_PERF_JITTER_MIN_SAMPLES))
                return;
        uint64_t np = fp_perf_jitter_period(h->period, c->period_debt,
                                            fp_perf_random(&h->jitter_state, (uint64_t)c->cpu));
        if (fp_perf_set_period(&c->sampler, np) < 0)
                return;
        c->period = np;
        c->since = 0;
}

void fp_host_drain(struct fp_host *h)
{
        if (h->in_round)
                return;
        h->in_round = true;
        sideband_round(h);
        for (size_t i = 0; i < h->n_cpus; i++) {
                struct cpu *c = &h->cpus[i];
                uint64_t n = h->drawn;
                if (!c->open)
                        continue;
                if (fp_perf_ring_drain(&c->sampler, &sampler_handlers, h) == -EBADMSG)
                        h->hs.st.lost++;
                /* Only this CPU's samples are in its ring, taken at c->period. */
                c->since += h->drawn - n;
                if (c->period)
                        c->period_debt +=
                            (int64_t)(h->drawn - n) * ((int64_t)c->period - (int64_t)h->period);
                jitter_cpu(h, c);
        }
        h->in_round = false;
}

/* ---- off-CPU time ---- */

/*
 * The record's stack into f: its registers and copy, walked as a user-mode
 * sample's, with py's Python frames spliced in.
 */
static uint32_t off_walk(struct fp_host *h, struct fp_host_proc *p,
                         const struct fp_offcpu_record *r, const struct fp_pystack_record *py,
                         struct fp_frame *f)
{
        struct fp_perf_sample s;
        uint64_t root = h->off_st.unwound_root;
        uint32_t n;

        fp_offcpu_sample(r, &s);
        n = fp_stackwalk(&p->off_walk, &s, f);
        h->hs.st.off_walked++;
        h->hs.st.off_unwound_root += h->off_st.unwound_root - root;
        return fp_pyproc_splice(&p->py, h->pystack, p->pid, p->maps, r->time_ns, py, f, n,
                                FP_STACKWALK_MAX_FRAMES);
}

/* Adds the stack f to p's bucket of each reason the weights w are not 0 for. */
static void off_add(struct fp_host *h, struct fp_host_proc *p, pid_t tid, unsigned epoch,
                    struct fp_frame *f, uint32_t n, const __u64 *w)
{
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++) {
                int r = -ENOMEM;
                if (!w[i])
                        continue;
                if (!p->off_agg[i] && (p->off_agg[i] = fp_agg_new(0)))
                        fp_agg_set_limit(p->off_agg[i], FP_HOST_MAX_STACKS);
                if (p->off_agg[i])
                        r = fp_agg_add(p->off_agg[i], tid, epoch, f, n, w[i], NULL,
                                       fp_stackwalk_resolve, &p->off_walk);
                if (r == -ENOSPC) {
                        struct fp_frame stand_in = {.flags = FP_FRAME_OVERFLOW};
                        h->hs.st.stacks_over_limit++;
                        r = fp_agg_add(p->off_agg[i], tid, 0, &stand_in, 1, w[i], NULL, NULL, NULL);
                }
                if (r < 0) {
                        h->hs.st.dropped_nomem++;
                        continue;
                }
                h->hs.st.off_samples++;
                h->hs.st.off_value += w[i];
        }
}

/* The generation of pid at time; one the tier never saw is read from /proc. NULL: none. */
static struct fp_host_proc *proc_lookup(struct fp_host *h, pid_t pid, uint64_t time)
{
        struct fp_host_proc *p = proc_at(h, pid, time);

        if (p || *pid_slot(h, pid) || h->n_procs >= FP_HOST_MAX_PROCS)
                return p;
        return proc_from_proc(h, pid);
}

/*
 * The pending slot of tid's stack: its own among the OFF_PROBE slots from
 * its hash, or with claim one to take, a free one else the oldest (most
 * stacks never get weights: a short wait is not kept, and its stack stays
 * until a newer one takes its place). NULL: none of tid.
 */
static struct off_pending *pending_slot(struct fp_host *h, pid_t tid, bool claim)
{
        /* Fibonacci hashing: the product's top bits (ids a power of two apart differ there). */
        uint32_t at = ((uint32_t)tid * 2654435761u) >> (32 - OFF_PENDING_BITS);
        struct off_pending *take = NULL;

        for (unsigned i = 0; i < OFF_PROBE; i++) {
                struct off_pending *q = &h->pending[(at + i) % OFF_PENDING];
                if (q->tid == tid)
                        return q;
                if (claim && (!take || (take->tid && (!q->tid || q->time < take->time))))
                        take = q;
        }
        return take;
}

/*
 * The cgroup r saw p's thread in. A process's cgroup is otherwise its CPU
 * samples' (or its parent's, at its birth): one that moved into a unit's
 * cgroup before its exec (as systemd starts every service) and then only
 * waits would keep its parent's service.
 */
static void off_cgroup(struct fp_host_proc *p, const struct fp_offcpu_record *r)
{
        if (r->cgroup)
                p->cgroup = r->cgroup;
}

void fp_host_offcpu_record(struct fp_host *h, const struct fp_offcpu_record *r,
                           const struct fp_pystack_record *py)
{
        pid_t pid = (pid_t)r->tgid, tid = (pid_t)r->tid;
        struct fp_host_proc *p;
        struct off_pending *q;
        struct fp_frame *copy;
        uint32_t n;

        h->hs.st.off_records++;
        if (!h->pending && !(h->pending = calloc(OFF_PENDING, sizeof(*h->pending)))) {
                h->hs.st.dropped_nomem += fp_offcpu_parts(r);
                return;
        }
        if (h->covered && h->covered(h->covered_userdata, pid, r->time_ns)) {
                h->hs.off_covered += fp_offcpu_parts(r);
                return;
        }
        /* The births and execs up to now first: the record's generation may be that new. */
        sideband_round(h);
        switch (r->kind) {
        case FP_OFFCPU_CALL:
                if (!(p = proc_lookup(h, pid, r->time_ns))) {
                        h->hs.off_unknown += fp_offcpu_parts(r);
                        break;
                }
                off_cgroup(p, r);
                n = off_walk(h, p, r, py, h->frames);
                off_add(h, p, tid, fp_maps_epoch(p->maps), h->frames, n, r->weight);
                break;
        case FP_OFFCPU_STACK:
                /* Its slot, or one of a thread whose stack is older than every other's near. */
                q = pending_slot(h, tid, true);
                q->tid = 0;
                if (!(p = proc_lookup(h, pid, r->time_ns)))
                        break;
                off_cgroup(p, r);
                n = off_walk(h, p, r, py, h->frames);
                if (!(copy = realloc(q->frames, (n ? n : 1) * sizeof(*copy))))
                        break;
                memcpy(copy, h->frames, n * sizeof(*copy));
                *q = (struct off_pending){.tid = tid,
                                          .pid = pid,
                                          .seq = r->seq,
                                          .n = n,
                                          .time = r->time_ns,
                                          .epoch = fp_maps_epoch(p->maps),
                                          .frames = copy};
                break;
        case FP_OFFCPU_WEIGHTS:
                q = pending_slot(h, tid, false);
                if (!q || q->pid != pid || q->seq != r->seq || !(p = proc_at(h, pid, q->time))) {
                        h->hs.st.off_unpaired += fp_offcpu_parts(r);
                        break;
                }
                off_cgroup(p, r);
                off_add(h, p, tid, q->epoch, q->frames, q->n, r->weight);
                q->tid = 0;
                break;
        default:
                break;
        }
}

void fp_host_offcpu_counts(struct fp_host *h, const struct fp_offcpu_target *k)
{
        /* The kernel's counts only grow while the tier is on; keep the highest. */
        if (k->parts < h->hs.st.off_parts)
                return;
        h->hs.st.off_parts = k->parts;
        h->hs.st.off_kept = k->kept;
        h->hs.st.off_lost_ring = k->lost_ring;
        h->hs.st.off_lost_copy = k->lost_copy;
        h->hs.st.off_lost_exited = k->lost_exited;
        h->hs.st.off_lost_changed = k->lost_changed;
        h->hs.st.off_lost_ns = k->lost_ns;
}

static void on_ring(evutil_socket_t fd, short what, void *arg)
{
        struct cpu *c = arg;
        (void)fd;
        (void)what;
        fp_host_drain(c->host);
}

static void on_round(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        fp_host_drain(arg);
}

/* ---- CPUs ---- */

static void cpu_close(struct cpu *c)
{
        if (c->ev_sampler)
                event_free(c->ev_sampler);
        if (c->ev_sideband)
                event_free(c->ev_sideband);
        c->ev_sampler = c->ev_sideband = NULL;
        fp_perf_ring_close(&c->sampler);
        fp_perf_ring_close(&c->sideband);
        c->open = false;
}

static int cpu_open(struct fp_host *h, struct cpu *c)
{
        int r = fp_perf_open_cpu_sideband(c->cpu, SIDEBAND_PAGES, &c->sideband);
        if (r < 0)
                return r;
        r = fp_perf_open_cpu_sampler(&h->pcfg, c->cpu, &c->sampler);
        if (r < 0) {
                fp_perf_ring_close(&c->sideband);
                return r;
        }
        c->host = h;
        c->period = c->since = 0; /* opened at the configured period */
        c->ev_sampler = event_new(h->base, c->sampler.fd, EV_READ | EV_PERSIST, on_ring, c);
        c->ev_sideband = event_new(h->base, c->sideband.fd, EV_READ | EV_PERSIST, on_ring, c);
        if (!c->ev_sampler || !c->ev_sideband || event_add(c->ev_sampler, NULL) < 0 ||
            event_add(c->ev_sideband, NULL) < 0) {
                cpu_close(c);
                return -ENOMEM;
        }
        c->open = true;
        if (h->pystack && fp_pystack_attach(h->pystack, c->sampler.fd) < 0)
                h->py_attach_failed++;
        return 0;
}

void fp_host_check_cpus(struct fp_host *h)
{
        bool online[1024];

        if (fp_proc_online_cpus(online, (int)h->n_cpus) < 0)
                return;
        h->hs.cpus = 0;
        for (size_t i = 0; i < h->n_cpus; i++) {
                struct cpu *c = &h->cpus[i];
                if (c->open && !online[i]) {
                        fp_host_drain(h);
                        cpu_close(c);
                } else if (!c->open && online[i]) {
                        (void)cpu_open(h, c);
                }
                h->hs.cpus += c->open;
        }
}

static void on_cpus(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        fp_host_check_cpus(arg);
}

/* ---- life ---- */

int fp_host_start(struct event_base *base, struct fp_symcache *cache,
                  const struct fp_host_config *cfg, fp_host_covered_fn covered, void *userdata,
                  struct fp_host **ret, char *err, size_t err_len)
{
        struct fp_host *h = calloc(1, sizeof(*h));
        bool online[1024];
        long conf = sysconf(_SC_NPROCESSORS_CONF);
        int r = -ENODEV, first_error = 0;

        if (!h) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        h->base = base;
        h->jvm_group.max = 1;
        h->cache = cache;
        h->cfg = *cfg;
        h->covered = covered;
        h->covered_userdata = userdata;
        h->pcfg.event =
            (struct fp_perf_event){"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK};
        h->pcfg.freq = cfg->freq;
        /* The kernel's period for a clock sampled at a frequency (perf_swevent_init_hrtimer()). */
        h->period = cfg->freq ? 1000000000ULL / cfg->freq : 0;
        h->pcfg.kernel_frames = cfg->kernel_frames;
        h->pcfg.unwind = cfg->unwind;
        h->pcfg.no_javascript = cfg->no_javascript;
        h->pcfg.no_php = cfg->no_php;
        h->pcfg.no_ruby = cfg->no_ruby;
        h->pcfg.no_perl = cfg->no_perl;
        fp_targetconf_finish(&h->pcfg);
        h->off_pcfg = h->pcfg;
        h->off_pcfg.kernel_frames = false;
        h->off_pcfg.stack_bytes = FP_OFFCPU_STACK_MAX;
        /* Frame pointers alone would need the kernel's chain: copies are unwound by CFI. */
        if (h->off_pcfg.unwind == FP_UNWIND_FP)
                h->off_pcfg.unwind = FP_UNWIND_AUTO;
        /*
         * A second of samples per CPU ring (the half second a target's ring
         * holds would be a few stack copies at 19 Hz): its quarter-full
         * wake-up comes every quarter second, not with every sample.
         */
        h->pcfg.ring_pages =
            fp_perf_ring_pages_for_bytes(cfg->freq, 600 + h->pcfg.stack_bytes, 1000);
        h->n_cpus = conf > 0 && conf <= 1024 ? (size_t)conf : 1024;
        h->cpus = calloc(h->n_cpus, sizeof(*h->cpus));
        h->ev_round = event_new(base, -1, EV_PERSIST, on_round, h);
        h->ev_cpus = event_new(base, -1, EV_PERSIST, on_cpus, h);
        if (!h->cpus || !h->ev_round || !h->ev_cpus) {
                snprintf(err, err_len, "out of memory");
                fp_host_free(h);
                return -ENOMEM;
        }
        cgroup_scan(h);
        if (fp_proc_online_cpus(online, (int)h->n_cpus) < 0) {
                snprintf(err, err_len, "cannot read /sys/devices/system/cpu/online");
                fp_host_free(h);
                return -ENOENT;
        }
        for (size_t i = 0; i < h->n_cpus; i++) {
                h->cpus[i] = (struct cpu){.cpu = (int)i, .host = h};
                fp_perf_ring_close(&h->cpus[i].sampler);
                fp_perf_ring_close(&h->cpus[i].sideband);
                if (!online[i])
                        continue;
                r = cpu_open(h, &h->cpus[i]);
                if (r < 0 && !first_error)
                        first_error = r;
                h->hs.cpus += h->cpus[i].open;
        }
        if (!h->hs.cpus) {
                r = first_error ? first_error : -ENODEV;
                if (r == -EACCES || r == -EPERM)
                        snprintf(err, err_len,
                                 "sampling every CPU is not permitted: the agent needs "
                                 "CAP_PERFMON or CAP_SYS_ADMIN (perf_event_paranoid is %d)",
                                 fp_perf_paranoid());
                else
                        snprintf(err, err_len, "cannot open the host tier's events: %s",
                                 strerror(-r));
                fp_host_free(h);
                return r;
        }
        struct timeval round = {.tv_sec = ROUND_MS / 1000, .tv_usec = ROUND_MS % 1000 * 1000},
                       cpus = {.tv_sec = 2};
        event_add(h->ev_round, &round);
        event_add(h->ev_cpus, &cpus);
        *ret = h;
        return 0;
}

void fp_host_free(struct fp_host *h)
{
        if (!h)
                return;
        for (size_t i = 0; h->cpus && i < h->n_cpus; i++)
                cpu_close(&h->cpus[i]);
        free(h->cpus);
        if (h->ev_round)
                event_free(h->ev_round);
        if (h->ev_cpus)
                event_free(h->ev_cpus);
        for (size_t i = 0; i < h->n_procs; i++)
                proc_free(h->procs[i]);
        free(h->procs);
        for (size_t i = 0; i < h->n_queue; i++)
                free(h->queue[i].text);
        free(h->queue);
        for (size_t i = 0; i < h->n_cgroups; i++)
                free(h->cgroups[i].path);
        free(h->cgroups);
        for (size_t i = 0; h->pending && i < OFF_PENDING; i++)
                free(h->pending[i].frames);
        free(h->pending);
        free(h);
}

const struct fp_host_config *fp_host_config(const struct fp_host *h)
{
        return &h->cfg;
}

void fp_host_set_off_cpu_period(struct fp_host *h, uint64_t period)
{
        h->cfg.off_cpu_period = period;
}

void fp_host_stats(const struct fp_host *h, struct fp_host_stats *ret)
{
        *ret = h->hs;
        ret->procs = (unsigned)h->n_procs;
        ret->cgroups = (unsigned)h->n_cgroups;
        ret->python_on = h->pystack != NULL;
        memcpy(ret->interp, h->py_gone, sizeof(ret->interp));
        ret->python_attach_failed = h->py_attach_failed;
        for (size_t i = 0; i < h->n_procs; i++) {
                const struct fp_host_proc *p = h->procs[i];
                if (!p->jvm || p->end_ns != UINT64_MAX)
                        continue;
                ret->jvms++;
                if (ret->n_jvm == FP_HOST_STATUS_JVMS)
                        continue;
                struct fp_host_jvm *j = &ret->jvm[ret->n_jvm++];
                j->pid = p->pid;
                snprintf(j->comm, sizeof(j->comm), "%s", p->comm);
                fp_jvm_names_status(p->jvm, &j->st);
        }
        for (size_t i = 0; i < h->n_procs; i++) {
                struct fp_pyframes_stats ps;
                if (!h->procs[i]->py.py)
                        continue;
                fp_pyframes_stats(h->procs[i]->py.py, &ps);
                int k = fp_pyframes_kind(h->procs[i]->py.py);
                fp_pyframes_stats_add(&ret->interp[k], &ps);
                ret->interp_procs[k]++;
        }
        for (size_t i = 0; i < h->n_procs; i++) {
                struct fp_rt_stats rs;
                if (h->procs[i]->end_ns != UINT64_MAX)
                        continue;
                fp_runtimes_stats(h->procs[i]->maps, &rs);
                if (!rs.runtime[0])
                        continue;
                fp_runtimes_stats_add(&ret->javascript, &rs);
                ret->javascript_procs++;
        }
}

/* ---- Python stacks ---- */

void fp_host_set_pystack(struct fp_host *h, struct fp_pystack *s)
{
        if (h->pystack == s)
                return;
        /* Another program (or none): every generation looks for its CPython again. */
        for (size_t i = 0; i < h->n_procs; i++)
                fp_pyproc_forget(&h->procs[i]->py, h->pystack, h->procs[i]->pid);
        h->pystack = s;
        for (size_t i = 0; s && i < h->n_cpus; i++)
                if (h->cpus[i].open && fp_pystack_attach(s, h->cpus[i].sampler.fd) < 0)
                        h->py_attach_failed++;
}

bool fp_host_uses_pystack(const struct fp_host *h)
{
        return h->pystack != NULL;
}

void fp_host_pystack_record(struct fp_host *h, const struct fp_pystack_record *r)
{
        struct fp_host_proc *p = *pid_slot(h, (pid_t)r->tgid);

        if (p && p->py.live)
                fp_pyframes_record(p->py.py, r);
        else
                h->hs.python_records_unclaimed++;
}

void fp_host_python_recheck(struct fp_host *h, pid_t pid)
{
        struct fp_host_proc *p = *pid_slot(h, pid);

        if (p)
                fp_pyproc_forget(&p->py, h->pystack, pid); /* (its entry is gone: ENOENT) */
}

const struct fp_pyframes *fp_host_proc_python(const struct fp_host_proc *p)
{
        return p->py.py;
}

/* ---- the open bucket ---- */

size_t fp_host_n_procs(const struct fp_host *h)
{
        return h->n_procs;
}

struct fp_host_proc *fp_host_proc_at(struct fp_host *h, size_t i)
{
        return i < h->n_procs ? h->procs[i] : NULL;
}

const struct fp_agg *fp_host_proc_bucket(const struct fp_host_proc *p)
{
        return fp_agg_n_entries(p->agg) ? p->agg : NULL;
}

const struct fp_agg *fp_host_proc_offcpu(const struct fp_host_proc *p, unsigned reason)
{
        return reason < FP_OFFCPU_REASONS && p->off_agg[reason] &&
                       fp_agg_n_entries(p->off_agg[reason])
                   ? p->off_agg[reason]
                   : NULL;
}

struct fp_maps *fp_host_proc_maps(struct fp_host_proc *p)
{
        return p->maps;
}

pid_t fp_host_proc_pid(const struct fp_host_proc *p)
{
        return p->pid;
}

const char *fp_host_proc_comm(const struct fp_host_proc *p)
{
        return p->comm;
}

const char *fp_host_proc_exe(const struct fp_host_proc *p)
{
        return p->exe;
}

/* Computes the labels of p's latest cgroup, once per cgroup. */
static void label(struct fp_host *h, struct fp_host_proc *p)
{
        if (p->service[0] && p->labelled_cgroup == p->cgroup)
                return;
        const char *path = cgroup_path(h, p->cgroup);
        fp_labels_from_cgroup(path ? path : "", &p->labels);
        fp_labels_service(&p->labels, p->exe, p->comm, p->kthread, p->service, sizeof(p->service));
        free(p->cgroup_path);
        p->cgroup_path = strdup(path ? path : "");
        /* A cgroup not found yet (its record still to come) is looked up again next time. */
        p->labelled_cgroup = path ? p->cgroup : UINT64_MAX;
}

const char *fp_host_proc_service(struct fp_host_proc *p)
{
        label(p->host, p);
        return p->service;
}

const char *fp_host_proc_unit(struct fp_host_proc *p)
{
        label(p->host, p);
        return p->labels.unit;
}

const char *fp_host_proc_container(struct fp_host_proc *p)
{
        label(p->host, p);
        return p->labels.container;
}

const char *fp_host_proc_cgroup(struct fp_host_proc *p)
{
        label(p->host, p);
        return p->cgroup_path ? p->cgroup_path : "";
}

const char *fp_host_proc_jit_name(struct fp_host_proc *p, uint64_t addr)
{
        const char *name = jit_warm(p, addr);

        if (name)
                p->host->hs.st.jit_frames++;
        return name;
}

/*
 * JIT code the process's map does not name: a live JVM is asked for a new
 * one (jvmnames.h). Whether it is one (it maps libjvm.so and can be asked;
 * whether its compiled code keeps a frame pointer) is looked at on a miss
 * once it has mappings not looked at before.
 */
static void jvm_miss(struct fp_host_proc *p)
{
        struct fp_host *h = p->host;

        if (p->end_ns != UINT64_MAX)
                return;
        if (!p->jvm && fp_maps_count(p->maps) != p->jvm_looked_maps) {
                const char *lib = fp_maps_live_file(p->maps, "libjvm.so");
                p->jvm_looked_maps = fp_maps_count(p->maps);
                if (!lib || !(p->jvm = malloc(sizeof(*p->jvm))))
                        return;
                const struct fp_jvm_pace pace = {FP_HOST_JVM_EVERY_NS, FP_HOST_JVM_EVERY_MAX_NS, 0,
                                                 0};
                fp_jvm_names_init(p->jvm, h->base, &h->jvm_group, p->pid, p->comm, &pace);
                fp_jvm_names_look(p->jvm, lib);
                p->walk.jvm = p->off_walk.jvm = p->jvm;
        }
        if (p->jvm)
                fp_jvm_names_miss(p->jvm, p->maps);
}

const char *fp_host_proc_java_method(void *proc, uint64_t method)
{
        struct fp_host_proc *p = proc;

        return p->jvm ? fp_jvm_names_method(p->jvm, p->maps, method) : NULL;
}

int fp_host_proc_java_code(void *proc, uint64_t pc, bool leaf, struct fp_hotspot_code *ret)
{
        struct fp_host_proc *p = proc;

        if (!p->jvm) {
                *ret = (struct fp_hotspot_code){0};
                return 0;
        }
        return fp_jvm_names_code(p->jvm, p->maps, pc, leaf, ret);
}

static const char *jit_warm(void *proc, uint64_t addr)
{
        struct fp_host_proc *p = proc;
        struct fp_host *h = p->host;

        /*
         * Read through the process's own root while it lives; at most
         * PERFMAPS_MAX at once (each is bounded by perfmap.h's limits), the
         * rest keep their anonymous frames (status: jit_maps_refused).
         */
        if (!p->perfmap) {
                if (p->end_ns != UINT64_MAX || p->kthread)
                        return NULL;
                if (h->perfmaps >= PERFMAPS_MAX) {
                        h->hs.jit_maps_refused++;
                        return NULL;
                }
                if (!(p->perfmap = fp_perfmap_new(p->pid)))
                        return NULL;
                h->perfmaps++;
        }
        const char *name = fp_jvm_names_jit(p->jvm, p->perfmap, addr);
        if (!name)
                jvm_miss(p);
        return name;
}

const char *fp_host_proc_thread_name(const struct fp_host_proc *p, pid_t tid)
{
        for (size_t i = 0; i < p->n_threads; i++)
                if (p->threads[i].tid == tid)
                        return p->threads[i].comm;
        return p->comm;
}

size_t fp_host_open_drops(const struct fp_host *h, struct fp_host_drop *ret, size_t max)
{
        const struct fp_host_stats *now = &h->hs, *then = &h->hs_bucketed;
        struct fp_host_drop open[] = {
            {"kernel_ring_overflow", now->st.lost - then->st.lost},
            {"throttled", now->st.throttled - then->st.throttled},
            {"out_of_memory", now->st.dropped_nomem - then->st.dropped_nomem},
            {"unwind_failed", now->st.unwind_failed - then->st.unwind_failed},
            {"stack_copy_short", now->st.stack_copy_short - then->st.stack_copy_short},
            {"jit_no_frame_pointer", now->st.jit_no_fp - then->st.jit_no_fp},
            {"covered_by_target", now->covered - then->covered},
            {"process_unknown", now->unknown - then->unknown},
            {"process_table_full", now->table_full - then->table_full},
            {"offcpu_ring_full", now->st.off_lost_ring - then->st.off_lost_ring},
            {"offcpu_stack_unreadable", now->st.off_lost_copy - then->st.off_lost_copy},
            {"offcpu_thread_exited", now->st.off_lost_exited - then->st.off_lost_exited},
            {"offcpu_call_changed", now->st.off_lost_changed - then->st.off_lost_changed},
            {"offcpu_unpaired", now->st.off_unpaired - then->st.off_unpaired},
            {"offcpu_covered_by_target", now->off_covered - then->off_covered},
            {"offcpu_process_unknown", now->off_unknown - then->off_unknown},
        };
        size_t n = 0;

        for (size_t i = 0; i < sizeof(open) / sizeof(open[0]) && n < max; i++)
                if (open[i].count)
                        ret[n++] = open[i];
        for (size_t i = 0;
             i < sizeof(h->carried) / sizeof(h->carried[0]) && h->carried[i].reason[0] && n < max;
             i++)
                ret[n++] = (struct fp_host_drop){h->carried[i].reason, h->carried[i].count};
        return n;
}

void fp_host_charge_drop(struct fp_host *h, const char *reason, uint64_t count)
{
        for (size_t i = 0; i < sizeof(h->carried) / sizeof(h->carried[0]); i++) {
                if (!h->carried[i].reason[0])
                        snprintf(h->carried[i].reason, sizeof(h->carried[i].reason), "%s", reason);
                if (strcmp(h->carried[i].reason, reason) == 0) {
                        h->carried[i].count += count;
                        return;
                }
        }
}

int fp_host_next_bucket(struct fp_host *h)
{
        size_t kept = 0;

        for (size_t i = 0; i < h->n_procs; i++) {
                struct fp_host_proc *p = h->procs[i];
                /* The off-CPU buckets are made again by the next record that needs one. */
                for (unsigned k = 0; k < FP_OFFCPU_REASONS; k++) {
                        fp_agg_free(p->off_agg[k]);
                        p->off_agg[k] = NULL;
                }
                if (p->py.py)
                        fp_pyframes_trim(p->py.py); /* no Python frame is held now */
                if (!fp_agg_n_entries(p->agg))
                        continue;
                struct fp_agg *fresh = fp_agg_new(0);
                if (!fresh)
                        return -ENOMEM;
                fp_agg_set_limit(fresh, FP_HOST_MAX_STACKS);
                fp_agg_free(p->agg);
                p->agg = fresh;
        }
        /* Forget generations that ended long enough ago that no sample of theirs is still coming.
         */
        for (size_t i = 0; i < h->n_procs; i++) {
                struct fp_host_proc *p = h->procs[i];
                if (p->end_ns == UINT64_MAX || p->end_ns + FORGET_AFTER_NS > h->last_time) {
                        h->procs[kept++] = p;
                        continue;
                }
                /* Unlink it: from its pid's chain of generations. */
                struct fp_host_proc **link = pid_slot(h, p->pid);
                if (*link == p) {
                        *link = p->older;
                        if (p->older)
                                p->older->next = p->next;
                        else
                                *link = p->next;
                } else {
                        for (struct fp_host_proc *q = *link; q; q = q->older)
                                if (q->older == p) {
                                        q->older = p->older;
                                        break;
                                }
                }
                proc_free(p);
                h->hs.procs_forgotten++;
        }
        h->n_procs = kept;
        h->hs_bucketed = h->hs;
        memset(h->carried, 0, sizeof(h->carried));
        return 0;
}
