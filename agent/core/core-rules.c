/* SPDX-License-Identifier: MIT */
/*
 * The core's rules (rule.h says what a rule is): they turn the processes
 * that match into targets, as those processes come and go.
 *
 * When a process may start to match, and who says so:
 *
 *   a rule is added          a scan of /proc, at once
 *   exec                     the BPF tracker (sched_process_exec), while
 *                            rules exist; the process has its new image
 *   a move to a cgroup       the BPF tracker (cgroup_attach_task)
 *   fork of a rule's target  the BPF tracker (the child is tracked before
 *                            it runs; it inherits name, executable and
 *                            cgroup, so it matches as its parent did)
 *   anything missed          the /proc scan every SCAN_BPF_SECONDS (every
 *                            SCAN_FALLBACK_SECONDS without BPF, where it
 *                            is the only trigger)
 *
 * A rule's target whose process execs something the rule no longer
 * matches is stopped (unless its rule follows children and it is one).
 * When a rule's target ends, its last bucket is written and, once the
 * writer has stored it, the target is forgotten: the store keeps its
 * samples under the rule's service, so a rule may see any number of
 * processes come and go in bounded memory.
 *
 * Limits: FP_CORE_MAX_RULES rules, FP_CORE_MAX_RULES_PER_USER for a user
 * other than root, and a rule's --max-processes running targets: a new
 * process past that is counted as refused and left alone (the scan takes
 * it up once a place is free).
 */
#include "core-internal.h"
#include "log.h"
#include "procfs.h"
#include "tracker.h"
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SCAN_BPF_SECONDS      5
#define SCAN_FALLBACK_SECONDS 1
#define KEEP_EXITED_NO_STORE  64 /* exited targets a rule keeps when there is no store */

static struct core_rule *rule_by_id(struct fp_core *s, int64_t id)
{
        for (size_t i = 0; i < s->n_rules; i++)
                if (s->rules[i].rule->id == id)
                        return &s->rules[i];
        return NULL;
}

const struct fp_rule *fp_core_find_rule(const struct fp_core *s, int64_t id)
{
        for (size_t i = 0; i < s->n_rules; i++)
                if (s->rules[i].rule->id == id)
                        return s->rules[i].rule;
        return NULL;
}

static bool target_running(const struct fp_core_target *at)
{
        struct fp_target_stats st;
        fp_target_stats(at->t, &st);
        return st.state == FP_TARGET_RUNNING;
}

static unsigned count_running(const struct fp_core *s, int64_t id)
{
        unsigned n = 0;
        for (size_t i = 0; i < s->n_targets; i++)
                if (s->targets[i].rule_id == id && target_running(&s->targets[i]))
                        n++;
        return n;
}

/* What the rules together need to read of a process. */
static unsigned needs_of_all(const struct fp_core *s)
{
        unsigned need = 0;
        for (size_t i = 0; i < s->n_rules; i++)
                need |= fp_rule_needs(s->rules[i].rule);
        return need;
}

/*
 * Without a store, a rule's exited targets are all that is left of their
 * samples: keep the newest KEEP_EXITED_NO_STORE of them.
 */
static void trim_exited(struct fp_core *s, int64_t id)
{
        size_t n = 0, oldest = SIZE_MAX;

        if (s->writer)
                return;
        for (size_t i = 0; i < s->n_targets; i++)
                if (s->targets[i].rule_id == id && !target_running(&s->targets[i])) {
                        if (oldest == SIZE_MAX)
                                oldest = i;
                        n++;
                }
        if (n >= KEEP_EXITED_NO_STORE)
                fp_core_stop_target(s, &s->targets[oldest]);
}

static void record_latency(struct core_rule *cr, uint64_t event_ns)
{
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        uint64_t us = now > event_ns ? (now - event_ns) / 1000 : 0;
        cr->latency_us[cr->n_latency++ % RULE_LATENCY_RING] =
            us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/*
 * Profiles process p for rule cr. event_ns: CLOCK_MONOTONIC of the exec
 * or fork that made it match (0: found by a scan); counted: a refusal
 * for --max-processes is counted (a new process, not a rescan).
 */
static void start_for_rule(struct fp_core *s, struct core_rule *cr, const struct fp_rule_proc *p,
                           bool by_follow, uint64_t event_ns, bool counted)
{
        const struct fp_rule *rule = cr->rule;
        struct fp_target *t;
        char err[512], service[FP_TARGET_SERVICE_MAX + 1];

        if (count_running(s, rule->id) >= rule->max_processes) {
                if (counted)
                        cr->refused++;
                return;
        }
        trim_exited(s, rule->id);
        int r = fp_core_start_target_tracked(s, p->pid, &rule->cfg, p->owner, rule->follow, true, 0,
                                             &t, err, sizeof(err));
        if (r == -ESRCH)
                return; /* gone already */
        if (r < 0) {
                if (cr->failed++ == 0 || strcmp(cr->last_error, err) != 0)
                        fp_log(LOG_ERR, "Failed to profile %d for rule %lld: %s", (int)p->pid,
                               (long long)rule->id, err);
                snprintf(cr->last_error, sizeof(cr->last_error), "%.*s",
                         (int)sizeof(cr->last_error) - 1, err);
                return;
        }
        struct fp_core_target *at = &s->targets[s->n_targets - 1];
        at->rule_id = rule->id;
        at->by_follow = by_follow;
        fp_target_guard(t, rule->owner); /* a user's rule: its processes must stay the user's */
        fp_rule_service_of(rule, p, service, sizeof(service));
        fp_target_set_service(t, service);
        cr->started++;
        if (event_ns)
                record_latency(cr, event_ns);
        /* Taken at its exec: the bridge sampled it and the threads it made since; no more. */
        pid_t tids[64];
        size_t n = event_ns && s->tracker ? fp_target_live_tids(t, tids, 64) : 0;
        for (size_t i = 0; i < n; i++)
                fp_tracker_unbridge(s->tracker, tids[i]);
}

/* The first rule (hint first) that matches p, or NULL. */
static struct core_rule *match(struct fp_core *s, const struct fp_rule_proc *p, int64_t hint)
{
        struct core_rule *cr = hint ? rule_by_id(s, hint) : NULL;

        if (cr && fp_rule_matches(cr->rule, p))
                return cr;
        for (size_t i = 0; i < s->n_rules; i++)
                if (fp_rule_matches(s->rules[i].rule, p))
                        return &s->rules[i];
        return NULL;
}

/* Reads pid as rules see it; false for kernel threads, zombies, the agent and gone processes. */
static bool read_proc(struct fp_core *s, pid_t pid, struct fp_rule_proc *p)
{
        if (pid <= 1 || pid == getpid())
                return false;
        /* The executable too: kernel threads and zombies have none, and are never targets. */
        if (fp_rule_read_proc(pid, needs_of_all(s) | FP_RULE_NEED_EXE, p) < 0)
                return false;
        return p->exe[0] != 0;
}

/*
 * Decides about pid now: a new process that a rule matches becomes a
 * target; a rule's target its rule no longer matches is stopped.
 */
static void consider(struct fp_core *s, pid_t pid, uint64_t event_ns, bool is_new)
{
        struct fp_core_target *at = fp_core_find(s, pid);
        struct fp_rule_proc p;
        int64_t hint = 0;

        if (s->n_rules == 0)
                return;
        if (at) {
                if (at->rule_id == 0)
                        return; /* profiled by PID: the user's choice stands */
                if (target_running(at)) {
                        struct core_rule *own = rule_by_id(s, at->rule_id);
                        if (at->by_follow)
                                return;
                        if (own && read_proc(s, pid, &p) && fp_rule_matches(own->rule, &p))
                                return;
                } else {
                        hint = at->rule_id;
                }
                /* It execs something else, or an exited target's pid came back. */
                fp_core_stop_target(s, at);
        }
        if (!read_proc(s, pid, &p))
                return;
        struct core_rule *cr = match(s, &p, hint);
        if (cr)
                start_for_rule(s, cr, &p, false, event_ns, is_new);
}

/*
 * Whether a process whose name is comm may match a rule: false only when
 * every rule is by name and none matches comm (most execs on a host),
 * which spares reading /proc for them.
 */
static bool may_match(const struct fp_core *s, const char *comm)
{
        struct fp_rule_proc p = {0};

        snprintf(p.comm, sizeof(p.comm), "%s", comm);
        for (size_t i = 0; i < s->n_rules; i++) {
                const struct fp_rule *r = s->rules[i].rule;
                if (r->kind != FP_RULE_NAME)
                        return true;
                p.owner = r->owner; /* the name alone; rights are checked on /proc's answer */
                if (fp_rule_matches(r, &p))
                        return true;
        }
        return false;
}

void fp_core_rules_on_exec(struct fp_core *s, pid_t pid, const char *comm, uint64_t event_ns)
{
        struct fp_core_target *at = fp_core_find(s, pid);

        /* A rule's target is always looked at: it may no longer match. */
        if (!at && comm && !may_match(s, comm))
                return;
        consider(s, pid, event_ns, true);
}

bool fp_core_rules_on_child(struct fp_core *s, pid_t child, pid_t parent, uint64_t event_ns)
{
        struct fp_core_target *pat = fp_core_find(s, parent);
        struct fp_rule_proc p;

        if (!pat || pat->rule_id == 0)
                return false;
        struct core_rule *cr = rule_by_id(s, pat->rule_id);
        if (fp_core_find(s, child) || !read_proc(s, child, &p)) {
                if (!fp_core_find(s, child) && s->tracker)
                        (void)fp_tracker_remove(s->tracker, child);
                return true;
        }
        if (cr && cr->rule->follow) {
                start_for_rule(s, cr, &p, true, event_ns, true);
        } else if ((cr = match(s, &p, pat->rule_id))) {
                start_for_rule(s, cr, &p, false, event_ns, true);
        }
        if (!fp_core_find(s, child) && s->tracker)
                (void)fp_tracker_remove(s->tracker, child);
        return true;
}

static bool may_match(const struct fp_core *s, const char *comm);

/* The processes the rules have started, in all. */
static uint64_t total_started(const struct fp_core *s)
{
        uint64_t n = 0;
        for (size_t i = 0; i < s->n_rules; i++)
                n += s->rules[i].started;
        return n;
}

/* Every process in /proc that is no running target, considered. Returns how many started. */
static size_t scan(struct fp_core *s)
{
        uint64_t t0 = fp_now_ns(CLOCK_MONOTONIC), before = total_started(s);
        DIR *d = opendir("/proc");
        struct dirent *de;

        if (!d)
                return 0;
        while ((de = readdir(d))) {
                if (!isdigit((unsigned char)de->d_name[0]))
                        continue;
                pid_t pid = (pid_t)atoi(de->d_name);
                struct fp_core_target *at = fp_core_find(s, pid);
                char comm[16];
                if (at && target_running(at))
                        continue;
                if (!at && (fp_proc_comm(pid, pid, comm, sizeof(comm)) < 0 || !may_match(s, comm)))
                        continue;
                consider(s, pid, 0, false);
        }
        closedir(d);
        s->rule_scans++;
        s->rule_scan_us = (fp_now_ns(CLOCK_MONOTONIC) - t0) / 1000;
        return (size_t)(total_started(s) - before);
}

static void arm_scan(struct fp_core *s)
{
        struct timeval tv = {.tv_sec = s->tracker ? SCAN_BPF_SECONDS : SCAN_FALLBACK_SECONDS};
        if (s->n_rules)
                event_add(s->ev_rule_scan, &tv);
        else
                event_del(s->ev_rule_scan);
        if (s->tracker)
                fp_tracker_watch(s->tracker, s->n_rules > 0);
        fp_core_bridge_update(s);
}

static void on_scan(evutil_socket_t fd, short what, void *arg)
{
        struct fp_core *s = arg;
        (void)fd;
        (void)what;
        fp_core_poll_tracker(s); /* what the tracker saw first comes first, with its time */
        scan(s);
        arm_scan(s);
}

/* ---- keeping rules in the store ---- */

struct rule_write {
        int64_t id;
        uint32_t owner;
        char *spec; /* NULL: forget the rule */
};

static int write_rule(struct fp_store *store, void *arg)
{
        struct rule_write *w = arg;
        if (!store)
                return -ENODEV;
        return w->spec ? fp_store_rule_put(store, w->id, w->owner, w->spec)
                       : fp_store_rule_delete(store, w->id);
}

static void on_rule_written(void *userdata, const struct fp_writer_result *r)
{
        struct rule_write *w = userdata;
        if (r->error < 0 && r->error != -ENODEV)
                fp_log(LOG_ERR, "Failed to %s rule %lld in the store: %s",
                       w->spec ? "keep" : "forget", (long long)w->id,
                       r->message[0] ? r->message : strerror(-r->error));
        free(w->spec);
        free(w);
}

/* Queues the rule's record (spec NULL: its removal) for the store. */
static void keep_rule(struct fp_core *s, int64_t id, uid_t owner, const char *spec)
{
        struct rule_write *w = calloc(1, sizeof(*w));

        if (!s->writer) {
                free(w);
                return;
        }
        if (!w || (spec && !(w->spec = strdup(spec)))) {
                fp_log(LOG_ERR, "Failed to keep rule %lld in the store: out of memory",
                       (long long)id);
                free(w);
                return;
        }
        w->id = id;
        w->owner = (uint32_t)owner;
        if (fp_writer_submit_call(s->writer, write_rule, w, on_rule_written, w) < 0) {
                fp_log(LOG_ERR, "Failed to keep rule %lld in the store: the queue is full",
                       (long long)id);
                free(w->spec);
                free(w);
        }
}

/* ---- adding and removing ---- */

/* Adds rule under its id (set) without scanning. The core owns rule. */
static int insert_rule(struct fp_core *s, struct fp_rule *rule, char *err, size_t err_len)
{
        size_t mine = 0;

        for (size_t i = 0; i < s->n_rules; i++)
                if (s->rules[i].rule->owner == rule->owner)
                        mine++;
        if (s->n_rules >= FP_CORE_MAX_RULES) {
                fp_rule_free(rule);
                return fp_errf(err, err_len, -EUSERS, "too many rules: the agent has %d",
                               FP_CORE_MAX_RULES);
        }
        if (rule->owner != 0 && mine >= FP_CORE_MAX_RULES_PER_USER) {
                fp_rule_free(rule);
                return fp_errf(err, err_len, -EUSERS, "too many rules: a user may have %d",
                               FP_CORE_MAX_RULES_PER_USER);
        }
        if (!s->ev_rule_scan && !(s->ev_rule_scan = event_new(s->base, -1, 0, on_scan, s))) {
                fp_rule_free(rule);
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        }
        if (fp_grow(&s->rules, &s->cap_rules, s->n_rules + 1, sizeof(*s->rules)) < 0) {
                fp_rule_free(rule);
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        }
        s->rules[s->n_rules++] = (struct core_rule){.rule = rule};
        if (rule->id >= s->next_rule_id)
                s->next_rule_id = rule->id + 1;
        arm_scan(s);
        return 0;
}

int fp_core_add_rule(struct fp_core *s, struct fp_rule *rule, bool from_config, int64_t *ret_id,
                     size_t *ret_matched, char *err, size_t err_len)
{
        int64_t id = s->next_rule_id;
        int r;

        /* A rule whose processes could not get their off-CPU time is refused now, in one line. */
        if (rule->cfg.off_cpu_period && (r = fp_core_offcpu_check(s, err, err_len)) < 0) {
                fp_rule_free(rule);
                return r;
        }
        rule->id = id;
        rule->from_config = from_config;
        uid_t owner = rule->owner;
        char *spec = from_config ? NULL : strdup(rule->spec);
        if (!from_config && !spec) {
                fp_rule_free(rule);
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        }
        r = insert_rule(s, rule, err, err_len);
        if (r < 0) {
                free(spec);
                return r;
        }
        if (spec)
                keep_rule(s, id, owner, spec);
        free(spec);
        /* Loaded now, not in the first matching process's birth. */
        if (fp_perf_interpreters_off(&rule->cfg) != FP_PERF_INTERPRETERS)
                (void)fp_core_pystack_get(s);
        fp_core_poll_tracker(s);
        size_t n = scan(s);
        if (ret_id)
                *ret_id = id;
        if (ret_matched)
                *ret_matched = n;
        return 0;
}

int fp_core_remove_rule(struct fp_core *s, int64_t id)
{
        struct core_rule *cr = rule_by_id(s, id);
        int stopped = 0;

        if (!cr)
                return -ENOENT;
        for (size_t i = 0; i < s->n_targets;) {
                if (s->targets[i].rule_id != id) {
                        i++;
                        continue;
                }
                fp_target_drain(s->targets[i].t);
                if (target_running(&s->targets[i]))
                        stopped++;
                fp_core_stop_target(s, &s->targets[i]); /* swaps the last one in */
        }
        if (!cr->rule->from_config)
                keep_rule(s, id, cr->rule->owner, NULL);
        fp_rule_free(cr->rule);
        *cr = s->rules[--s->n_rules];
        fp_core_pystack_unload_unused(s);
        arm_scan(s);
        return stopped;
}

bool fp_core_user_has_service(const struct fp_core *s, uid_t uid, const char *service)
{
        bool mine = false;
        for (size_t i = 0; i < s->n_rules; i++) {
                const struct fp_rule *r = s->rules[i].rule;
                if (strcmp(r->service, service) != 0)
                        continue;
                if (r->owner != uid)
                        return false; /* shared with another user's rule: theirs too */
                mine = true;
        }
        return mine;
}

/* ---- life cycle ---- */

static int resume_rule(void *userdata, const struct fp_store_rule *sr)
{
        struct fp_core *s = userdata;
        struct fp_rule *rule;
        char err[512];

        if (fp_rule_from_spec(sr->spec, (uid_t)sr->owner, &rule, err, sizeof(err)) < 0) {
                fp_log(LOG_ERR, "Failed to resume rule %lld: %s", (long long)sr->id, err);
                return 0;
        }
        rule->id = sr->id;
        /* Its owner's rights now (no capabilities known without the owner at hand). */
        if (fp_rule_user_rights(&rule->cfg, rule->owner, 0, err, sizeof(err)) < 0) {
                fp_log(LOG_ERR, "Failed to resume rule %lld: %s", (long long)sr->id, err);
                fp_rule_free(rule);
                return 0;
        }
        if (insert_rule(s, rule, err, sizeof(err)) < 0)
                fp_log(LOG_ERR, "Failed to resume rule %lld: %s", (long long)sr->id, err);
        return 0;
}

void fp_core_rules_resume(struct fp_core *s, struct fp_store *store)
{
        int n = fp_store_list_rules(store, resume_rule, s);
        if (n < 0)
                fp_log(LOG_ERR, "Failed to read the rules of the store: %s",
                       fp_store_errmsg(store));
        else if (n > 0)
                fp_log(LOG_INFO, "resumed %d rule%s", n, n == 1 ? "" : "s");
}

void fp_core_rules_from_config(struct fp_core *s)
{
        for (size_t i = 0; i < s->opt.n_rules; i++) {
                struct fp_ctl_request q;
                struct fp_rule *rule;
                char err[512];

                if (fp_rule_request_from_words(s->opt.rules[i], &q, err, sizeof(err)) < 0 ||
                    fp_rule_new(&q, 0, &rule, err, sizeof(err)) < 0) {
                        if (q.buf)
                                fp_ctl_request_done(&q);
                        fp_log(LOG_ERR, "Failed to add the rule 'target = %s': %s", s->opt.rules[i],
                               err);
                        continue;
                }
                fp_ctl_request_done(&q);
                rule->id = s->next_rule_id;
                rule->from_config = true;
                if (insert_rule(s, rule, err, sizeof(err)) < 0)
                        fp_log(LOG_ERR, "Failed to add the rule 'target = %s': %s", s->opt.rules[i],
                               err);
        }
        if (s->n_rules) {
                fp_core_poll_tracker(s);
                scan(s);
        }
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

int fp_core_rules_status(struct fp_core *s, uid_t uid, struct fp_core_status *st)
{
        st->rules = calloc(s->n_rules ? s->n_rules : 1, sizeof(*st->rules));
        if (!st->rules)
                return -ENOMEM;
        st->rule_scans = s->rule_scans;
        st->rule_scan_us = s->rule_scan_us;
        for (size_t i = 0; i < s->n_rules; i++) {
                struct core_rule *cr = &s->rules[i];
                struct fp_core_rule_status *rs = &st->rules[st->n_rules];
                uint32_t lat[RULE_LATENCY_RING];
                size_t n = cr->n_latency < RULE_LATENCY_RING ? cr->n_latency : RULE_LATENCY_RING;

                if (uid != 0 && cr->rule->owner != uid)
                        continue;
                *rs = (struct fp_core_rule_status){
                    .id = cr->rule->id,
                    .owner = cr->rule->owner,
                    .from_config = cr->rule->from_config,
                    .rule = cr->rule,
                    .running = count_running(s, cr->rule->id),
                    .started = cr->started,
                    .refused = cr->refused,
                    .failed = cr->failed,
                    .last_error = cr->last_error,
                    .n_latency = cr->n_latency,
                };
                if (n) {
                        memcpy(lat, cr->latency_us, n * sizeof(lat[0]));
                        qsort(lat, n, sizeof(lat[0]), cmp_u32);
                        rs->p50_us = lat[n / 2];
                        rs->p99_us = lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
                        rs->max_us = lat[n - 1];
                }
                st->n_rules++;
        }
        return 0;
}

void fp_core_rules_free(struct fp_core *s)
{
        for (size_t i = 0; i < s->n_rules; i++)
                fp_rule_free(s->rules[i].rule);
        free(s->rules);
        s->rules = NULL;
        s->n_rules = 0;
        if (s->ev_rule_scan)
                event_free(s->ev_rule_scan);
        s->ev_rule_scan = NULL;
}
