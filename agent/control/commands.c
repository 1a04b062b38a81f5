/* SPDX-License-Identifier: MIT */
/*
 * What each agentctl command does: start, stop, status, dump, flush. Each
 * checks its arguments and the caller's rights (the peer's uid), acts on
 * the agent core (core.h) and answers through the control socket's client
 * API (control.h): an error line, or a body. A dump or a flush answers
 * later, when the writer thread (or the uploader) is done.
 */
#include "commands.h"
#include "core.h"
#include "counters.h"
#include "export.h"
#include "host.h"
#include "escape.h"
#include "pprof.h"
#include "metrics.h"
#include "offcpu.h"
#include "procfs.h"
#include "rule.h"
#include "status.h"
#include "upload_contract.h"
#include "store.h"
#include "targetconf.h"
#include "unwind.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int arg_pid(const char *s, pid_t *ret)
{
        uint64_t v;
        int r = fp_parse_uint(s, 1, INT_MAX, &v);
        if (r == 0)
                *ret = (pid_t)v;
        return r;
}

/* Sampling at: "99 Hz", "99 Hz (every 10101010 ns)" or "every 1000 events". */
static void describe_rate(FILE *out, const struct fp_perf_config *cfg)
{
        if (cfg->freq)
                fprintf(out, "%" PRIu64 " Hz", cfg->freq);
        else if (fp_perf_event_is_clock(&cfg->event))
                fprintf(out, "%" PRIu64 " Hz (every %" PRIu64 " ns)",
                        (uint64_t)(1000000000ULL / cfg->period), cfg->period);
        else
                fprintf(out, "every %" PRIu64 " events", cfg->period);
}

/* `agentctl start --name|--exe|--unit|--cgroup ...`: a rule. */
static void start_rule(struct fp_core *s, struct fp_control_client *c,
                       const struct fp_ctl_request *q)
{
        FILE *out = fp_control_out(c);
        uid_t uid = fp_control_cred(c)->uid;
        struct fp_rule *rule;
        char err[512], desc[FP_RULE_MATCH_MAX + 32], safe[FP_RULE_MATCH_MAX * 4 + 32];
        int64_t id;
        size_t matched;

        if (fp_rule_new(q, uid, &rule, err, sizeof(err)) < 0)
                return fp_control_error(c, "%s", err);
        if (fp_rule_user_rights(&rule->cfg, uid, fp_control_cred(c)->pid, err, sizeof(err)) < 0) {
                fp_rule_free(rule);
                return fp_control_error(c, "%s", err);
        }
        struct fp_perf_config cfg = rule->cfg;
        char service[FP_TARGET_SERVICE_MAX + 1];
        snprintf(service, sizeof(service), "%s", rule->service);
        fp_rule_describe(rule, desc, sizeof(desc));
        if (fp_core_add_rule(s, rule, false, &id, &matched, err, sizeof(err)) < 0)
                return fp_control_error(c, "%s", err);
        fprintf(out, "rule %lld: profiling every process%s with %s", (long long)id,
                uid ? " of yours" : "", fp_terminal_str(desc, safe, sizeof(safe)));
        if (service[0])
                fprintf(out, " as service %s", service);
        else
                fprintf(out, " as the service of its executable's name");
        fprintf(out, " with %s at ", cfg.event.name);
        describe_rate(out, &cfg);
        fprintf(out, "; %zu process%s now%s\n", matched, matched == 1 ? "" : "es",
                fp_core_has_store(s) ? "" : " (no store: the rule ends with the agent)");
}

/* The keys a host tier's start may carry besides cmd and host. */
static const char *const host_keys[] = {"cmd",    "host",    "freq",           "kernel",
                                        "unwind", "off_cpu", "off_cpu_period", NULL};

/*
 * A start of the host tier while it runs (the package's configuration
 * starts it): off-CPU time is added to the running tier; what takes effect
 * only at its start (rate, kernel frames, unwinding) is refused with how
 * to change it, and nothing is changed then.
 */
static void change_host(struct fp_core *s, struct fp_control_client *c,
                        const struct fp_host_config *want, bool freq_given, bool unwind_given)
{
        const struct fp_host_config *run = fp_host_config(fp_core_host(s));
        char err[512], how[160];

        snprintf(how, sizeof(how), "at %" PRIu64 " Hz, %s, unwinding %s, %s", run->freq,
                 run->kernel_frames ? "kernel frames included" : "user frames only",
                 fp_unwind_mode_name(run->unwind),
                 run->off_cpu_period ? "with off-CPU time" : "without off-CPU time");
        if ((freq_given && want->freq != run->freq) ||
            (want->kernel_frames && !run->kernel_frames) ||
            (unwind_given && want->unwind != run->unwind))
                return fp_control_error(
                    c,
                    "the host tier is running already (%s), and --freq, --kernel and --unwind"
                    " apply at its start: run 'agentctl stop --host', then 'agentctl start"
                    " --host' with the settings you want (or set host-freq and host-kernel in the"
                    " configuration and restart the agent)",
                    how);
        if (!want->off_cpu_period || want->off_cpu_period == run->off_cpu_period)
                return fp_control_error(c, "the host tier is running already (%s)", how);
        bool had = run->off_cpu_period != 0; /* run is the tier's own, changed next */
        if (fp_core_host_off_cpu(s, want->off_cpu_period, err, sizeof(err)) < 0)
                return fp_control_error(c, "cannot add off-CPU time to the host tier: %s", err);
        fprintf(fp_control_out(c),
                "host tier: running already at %" PRIu64 " Hz per CPU; its off-CPU time %s"
                " (a wait kept with probability d/%g ms)\n",
                run->freq, had ? "now taken" : "added", (double)want->off_cpu_period / 1e6);
}

static void start_host(struct fp_core *s, struct fp_control_client *c,
                       const struct fp_ctl_request *q)
{
        struct fp_host_config cfg = {.freq = FP_HOST_DEFAULT_FREQ, .unwind = FP_UNWIND_AUTO};
        const char *freq = fp_ctl_request_get(q, "freq"), *unwind = fp_ctl_request_get(q, "unwind");
        const char *off = fp_ctl_request_get(q, "off_cpu_period");
        struct fp_host_stats hs;
        char err[512];
        uint64_t hz;

        if (fp_control_cred(c)->uid != 0)
                return fp_control_error(c, "only root may start the host tier: it samples every "
                                           "user's processes");
        for (size_t i = 0; i < q->n; i++) {
                const char *const *k = host_keys;
                while (*k && strcmp(*k, q->keys[i]) != 0)
                        k++;
                if (!*k)
                        return fp_control_error(
                            c,
                            "--%s does not go with --host (it takes --freq, --kernel, --unwind, "
                            "--off-cpu, --off-cpu-period)",
                            q->keys[i]);
        }
        if (freq) {
                if (fp_parse_uint(freq, 1, FP_HOST_MAX_FREQ, &hz) < 0)
                        return fp_control_error(c,
                                                "invalid --freq '%s' for the host tier: 1 to %d Hz",
                                                freq, FP_HOST_MAX_FREQ);
                cfg.freq = hz;
        }
        if (unwind && fp_unwind_mode_parse(unwind, &cfg.unwind) < 0)
                return fp_control_error(c, "invalid --unwind '%s': fp, dwarf or auto", unwind);
        cfg.kernel_frames = fp_ctl_request_get(q, "kernel") != NULL;
        if (off && !fp_ctl_request_get(q, "off_cpu"))
                return fp_control_error(c, "--off-cpu-period needs --off-cpu");
        if (off && fp_parse_uint(off, 1000, FP_OFFCPU_PERIOD_MAX, &cfg.off_cpu_period) < 0)
                return fp_control_error(
                    c, "invalid --off-cpu-period '%s': 1000 to 1000000000 nanoseconds", off);
        if (fp_ctl_request_get(q, "off_cpu") && !cfg.off_cpu_period)
                cfg.off_cpu_period = FP_HOST_OFF_CPU_PERIOD_DEFAULT;
        if (fp_core_host(s))
                return change_host(s, c, &cfg, freq != NULL, unwind != NULL);
        if (fp_core_start_host(s, &cfg, err, sizeof(err)) < 0)
                return fp_control_error(c, "cannot start the host tier: %s", err);
        fp_host_stats(fp_core_host(s), &hs);
        fprintf(fp_control_out(c),
                "host tier: sampling every process on %u CPU%s with cpu-clock at %" PRIu64
                " Hz per CPU%s",
                hs.cpus, hs.cpus == 1 ? "" : "s", cfg.freq,
                cfg.kernel_frames ? ", kernel frames included" : "");
        if (cfg.off_cpu_period)
                fprintf(fp_control_out(c),
                        ", and its off-CPU time (a wait kept with probability d/%g ms)",
                        (double)cfg.off_cpu_period / 1e6);
        fprintf(fp_control_out(c),
                "; processes a target profiles are counted once, by the target\n");
}

static void cmd_start(void *userdata, struct fp_control_client *c, const struct fp_ctl_request *q)
{
        struct fp_core *s = userdata;
        FILE *out = fp_control_out(c);
        uid_t uid = fp_control_cred(c)->uid;
        struct fp_perf_config cfg = {0};
        const char *pid_s = fp_ctl_request_get(q, "pid");
        bool follow = false;
        struct fp_target *t;
        uid_t owner = 0;
        pid_t pid = 0;
        char err[512];

        if (fp_ctl_request_get(q, "host"))
                return start_host(s, c, q);
        if (fp_rule_requested(q))
                return start_rule(s, c, q);
        if (arg_pid(pid_s, &pid) < 0)
                return fp_control_error(c, "invalid PID '%s'", pid_s ? pid_s : "");
        for (const char *const *k = (const char *const[]){"service", "max_processes", NULL}; *k;
             k++)
                if (fp_ctl_request_get(q, *k))
                        return fp_control_error(c,
                                                "--%s belongs to a rule (--name, --exe, --unit "
                                                "or --cgroup), not to a PID",
                                                strcmp(*k, "service") ? "max-processes"
                                                                      : "service");
        if (fp_rule_sampling_from_request(q, &cfg, &follow, err, sizeof(err)) < 0 ||
            fp_rule_user_rights(&cfg, uid, fp_control_cred(c)->pid, err, sizeof(err)) < 0)
                return fp_control_error(c, "%s", err);

        if (fp_proc_owner(pid, &owner) < 0)
                return fp_control_error(c, "no such process: %d", (int)pid);
        if (fp_core_user_at_limit(s, uid))
                return fp_control_error(c,
                                        "too many targets: a user may profile %d processes at "
                                        "once (agentctl stop one first)",
                                        FP_CORE_MAX_TARGETS_PER_USER);
        if (uid != 0 && uid != owner)
                return fp_control_error(c, "permission denied: process %d belongs to another user",
                                        (int)pid);
        struct fp_core_target *old = fp_core_find(s, pid);
        if (old) {
                struct fp_target_stats st;
                fp_target_stats(old->t, &st);
                if (st.state == FP_TARGET_RUNNING && old->rule_id)
                        return fp_control_error(c,
                                                "process %d is already being profiled by rule %lld",
                                                (int)pid, (long long)old->rule_id);
                if (st.state == FP_TARGET_RUNNING)
                        return fp_control_error(c, "process %d is already being profiled",
                                                (int)pid);
                /*
                 * An exited target under a reused PID: the new process replaces
                 * it, whoever's the old one was (its samples are stored under its
                 * own start time).
                 */
                if (!fp_core_may_see(uid, old) &&
                    fp_target_starttime(old->t) == fp_proc_stat(pid, NULL))
                        return fp_control_error(c, "permission denied: process %d", (int)pid);
                fp_core_stop_target(s, old);
        }
        if (fp_core_start_target(s, pid, &cfg, owner, follow, 0, &t, err, sizeof(err)) < 0)
                return fp_control_error(c, "cannot profile %d: %s", (int)pid, err);
        fp_target_guard(t, uid); /* a user's: must stay the user's (root's: 0, none) */
        fp_core_note_target(s, t);

        struct fp_target_stats st;
        fp_target_stats(t, &st);
        char comm[128];
        fprintf(out, "profiling %d (%s) with %s at ", (int)pid,
                fp_terminal_str(fp_target_comm(t), comm, sizeof(comm)), cfg.event.name);
        describe_rate(out, &cfg);
        fprintf(out, ", %u thread%s%s%s", st.threads_live, st.threads_live == 1 ? "" : "s",
                st.kernel_excluded ? " (kernel-mode samples not permitted: user time only)" : "",
                follow ? ", following its child processes" : "");
        const struct fp_perf_config *tc = fp_target_config(t);
        if (fp_perf_event_is_hardware(&tc->event))
                fprintf(out, ", precise_ip %u", tc->precise_ip);
        for (unsigned i = 0; i < tc->n_members; i++)
                fprintf(out, "%s%s", i ? ", " : "; counting ", tc->members[i].name);
        if (tc->n_members && st.kernel_excluded)
                fprintf(out, " (in user mode only: context-switches and cpu-migrations, which "
                             "happen in the kernel, count nothing)");
        if (fp_target_left_out(t)[0])
                fprintf(out, "; left out (not supported on this machine): %s",
                        fp_target_left_out(t));
        if (tc->off_cpu_period)
                fprintf(out, "; and its off-CPU time (a wait kept with probability d/%g ms)",
                        (double)tc->off_cpu_period / 1e6);
        fputc('\n', out);
}

static void cmd_stop(void *userdata, struct fp_control_client *c, const struct fp_ctl_request *q)
{
        struct fp_core *s = userdata;
        FILE *out = fp_control_out(c);
        uid_t uid = fp_control_cred(c)->uid;
        const char *pid_s = fp_ctl_request_get(q, "pid");
        const char *rule_s = fp_ctl_request_get(q, "rule");
        char comm[128];
        pid_t pid = 0;

        if (fp_ctl_request_get(q, "host")) {
                struct fp_host_stats hs;
                if (uid != 0)
                        return fp_control_error(c, "only root may stop the host tier");
                if (!fp_core_host(s))
                        return fp_control_error(c, "the host tier is not running");
                fp_host_drain(fp_core_host(s));
                fp_host_stats(fp_core_host(s), &hs);
                fp_core_stop_host(s);
                fprintf(out,
                        "stopped the host tier: %" PRIu64 " samples of %" PRIu64 " processes%s\n",
                        hs.st.samples, hs.procs_from_ring + hs.procs_from_proc,
                        fp_core_has_store(s) ? "; its profiles stay in the store" : "");
                return;
        }
        if (rule_s) {
                uint64_t id;
                if (fp_parse_uint(rule_s, 1, INT64_MAX, &id) < 0)
                        return fp_control_error(c, "invalid rule id '%s'", rule_s);
                const struct fp_rule *rule = fp_core_find_rule(s, (int64_t)id);
                if (!rule || (uid != 0 && rule->owner != uid))
                        return fp_control_error(c, "no rule %s%s", rule_s, rule ? " of yours" : "");
                bool from_config = rule->from_config;
                int n = fp_core_remove_rule(s, (int64_t)id);
                fprintf(out, "stopped rule %s and its %d running process%s%s%s\n", rule_s, n,
                        n == 1 ? "" : "es",
                        fp_core_has_store(s) ? "; their profiles stay in the store" : "",
                        from_config ? " (it is declared in the configuration file: it comes back "
                                      "when the agent restarts)"
                                    : "");
                return;
        }
        if (arg_pid(pid_s, &pid) < 0)
                return fp_control_error(c, "invalid PID '%s'", pid_s ? pid_s : "");
        struct fp_core_target *at = fp_core_find(s, pid);
        if (!at)
                return fp_control_error(c, "process %d is not being profiled", (int)pid);
        if (!fp_core_may_see(uid, at))
                return fp_control_error(c, "permission denied: process %d belongs to another user",
                                        (int)pid);
        if (at->rule_id)
                return fp_control_error(c,
                                        "process %d is profiled by rule %lld: stop the rule with "
                                        "'agentctl stop --rule %lld'",
                                        (int)pid, (long long)at->rule_id, (long long)at->rule_id);
        struct fp_target_stats st;
        fp_target_drain(at->t);
        fp_target_stats(at->t, &st);
        fprintf(out, "stopped %d (%s): %" PRIu64 " samples, %" PRIu64 " lost%s\n", (int)pid,
                fp_terminal_str(fp_target_comm(at->t), comm, sizeof(comm)), st.samples, st.lost,
                fp_core_has_store(s) ? "; its profile stays in the store" : "");
        fp_core_stop_target(s, at);
}

static void cmd_status(void *userdata, struct fp_control_client *c, const struct fp_ctl_request *q)
{
        struct fp_core *s = userdata;
        const char *json = fp_ctl_request_get(q, "json");
        struct fp_core_status st;

        if (fp_core_status(s, fp_control_cred(c)->uid, &st) < 0)
                return fp_control_error(c, "out of memory");
        if (json && strcmp(json, "1") == 0)
                fp_status_write_json(&st, fp_control_out(c));
        else
                fp_status_write_text(&st, fp_control_out(c));
        fp_core_status_free(&st);
}

static void on_flush_done(void *userdata, bool ok, const char *message)
{
        struct fp_control_client *c = userdata;
        if (ok)
                fprintf(fp_control_out(c), "%s\n", message);
        else
                fp_control_error(c, "%s", message);
        fp_control_finish(c);
}

static void cmd_flush(void *userdata, struct fp_control_client *c, const struct fp_ctl_request *q)
{
        struct fp_core *s = userdata;
        (void)q;
        if (fp_control_cred(c)->uid != 0)
                return fp_control_error(c, "only root may flush the agent");
        int r = fp_core_flush(s, on_flush_done, c);
        if (r == -ENODEV)
                return fp_control_error(c,
                                        "the agent has no store (--store none): nothing to flush");
        if (r == -EBUSY)
                return fp_control_error(c, "another flush is in progress");
        if (r < 0)
                return fp_control_error(c, "cannot flush: %s", strerror(-r));
        fp_control_defer(c);
}

/* Adds one target's accounting to a dump. */
static void dump_comments(struct fp_pprof *p, struct fp_target *t)
{
        const struct fp_perf_config *cfg = fp_target_config(t);
        struct fp_target_stats st;
        char line[1024];

        fp_target_stats(t, &st);
        char events[FP_PERF_EVENT_LIST_MAX];
        fp_perf_event_list_string(cfg, events, sizeof(events));
        snprintf(line, sizeof(line), "target %d (%s) %s: %s, %s", (int)fp_target_pid(t),
                 fp_target_comm(t), fp_target_exe(t), events,
                 st.state == FP_TARGET_RUNNING ? "running" : "exited");
        fp_pprof_add_comment(p, line);
        snprintf(line, sizeof(line),
                 "pid %d: samples %" PRIu64 ", lost records %" PRIu64 ", throttle events %" PRIu64
                 ", samples without callchain %" PRIu64 ", threads seen %u, threads not "
                 "attached %" PRIu64,
                 (int)fp_target_pid(t), st.samples, st.lost, st.throttled, st.unwind_empty,
                 st.threads_seen, st.attach_failed);
        fp_pprof_add_comment(p, line);
        if (cfg->unwind == FP_UNWIND_FP)
                snprintf(line, sizeof(line),
                         "pid %d: unwound with frame pointers (--unwind fp), %" PRIu64
                         " leaf callers fixed up from CFI",
                         (int)fp_target_pid(t), st.leaf_fixups);
        else
                snprintf(line, sizeof(line),
                         "pid %d: unwound with --unwind %s: %" PRIu64 " of %" PRIu64
                         " samples reached the thread's root; frames by CFI %" PRIu64
                         ", by frame pointer %" PRIu64 "; truncated: unwind_failed %" PRIu64
                         ", stack_copy_short %" PRIu64 ", jit_no_frame_pointer %" PRIu64,
                         (int)fp_target_pid(t), fp_unwind_mode_name(cfg->unwind), st.unwound_root,
                         st.samples, st.frames_cfi, st.frames_fp, st.unwind_failed,
                         st.stack_copy_short, st.jit_no_fp);
        fp_pprof_add_comment(p, line);
        if (st.kernel_excluded) {
                snprintf(line, sizeof(line),
                         "pid %d: kernel-mode samples were not permitted: user time only",
                         (int)fp_target_pid(t));
                fp_pprof_add_comment(p, line);
        }
}

/* Writes the finished profile of a dump in the format asked for into c's answer. */
static void dump_finish(struct fp_control_client *c, const char *format, struct fp_pprof *p)
{
        FILE *out = fp_control_out(c);
        int e;

        if (fp_pprof_n_sample_types(p) == 0) {
                fp_control_error(c, "no samples in the range asked for");
                return;
        }
        if (strcmp(format, "pprof") == 0) {
                uint8_t *buf;
                size_t len;
                e = fp_pprof_encode(p, 1, &buf, &len);
                if (e < 0) {
                        fp_control_error(c, "cannot encode the profile: %s", strerror(-e));
                        return;
                }
                fwrite(buf, 1, len, out);
                free(buf);
        } else if (strcmp(format, "top") == 0) {
                e = fp_pprof_write_top(p, 1, 0, out);
                if (e >= 0)
                        e = fp_counters_write_top(p, 1, 20, out);
        } else {
                e = fp_pprof_write_folded(p, 0, out);
        }
        if (e < 0)
                fp_control_error(c, "cannot write the profile: %s", strerror(-e));
}

/* A dump waiting for the store's part. */
struct dump_wait {
        struct fp_control_client *c;
        char format[16];
};

static void on_dump_done(void *userdata, struct fp_pprof *p, int error, const char *message)
{
        struct dump_wait *w = userdata;
        struct fp_control_client *c = w->c;

        if (error < 0 && error != -ENODEV)
                fp_control_error(c, "cannot read the store: %s", message);
        if (!fp_control_gone(c) && !fp_control_has_error(c))
                dump_finish(c, w->format, p);
        fp_pprof_free(p);
        free(w);
        fp_control_finish(c);
}

/*
 * Hands a dump's store part to the writer (on_dump_done answers c later).
 * Returns -ENODEV when there is no store: p stays the caller's, with the
 * open buckets all there is. Anything else (queued, or an error answered)
 * takes p.
 */
static int queue_dump(struct fp_core *s, struct fp_control_client *c,
                      const struct fp_store_filter *f, struct fp_pprof *p, const char *format)
{
        struct dump_wait *w = calloc(1, sizeof(*w));
        int e;

        if (!w) {
                fp_pprof_free(p);
                fp_control_error(c, "out of memory");
                return -ENOMEM;
        }
        w->c = c;
        snprintf(w->format, sizeof(w->format), "%s", format);
        e = fp_core_submit_dump(s, f, p, on_dump_done, w);
        if (e == 0) {
                fp_control_defer(c);
                return 0;
        }
        free(w);
        if (e != -ENODEV) {
                fp_pprof_free(p);
                fp_control_error(c, "cannot queue the dump: %s", strerror(-e));
        }
        return e;
}

/* dump --host [--service S]: the host tier's open bucket and its stored series. */
static void dump_host(struct fp_core *s, struct fp_control_client *c,
                      const struct fp_ctl_request *q, struct fp_pprof *p, const char *format,
                      const char *service, const char *since, const char *event)
{
        struct fp_store_filter f = {
            .tier = FP_STORE_TIER_HOST, .service = service, .event = event ? event : "cpu-clock"};
        bool off = strcmp(f.event, FP_STORE_OFFCPU_EVENT) == 0;
        bool wall = strcmp(f.event, FP_STORE_WALL_EVENT) == 0;
        const char *type = off || wall ? f.event : "cpu";
        const struct fp_host_config *hc = fp_core_host(s) ? fp_host_config(fp_core_host(s)) : NULL;
        uint64_t since_s = 0;
        bool open = false;
        int e;

        (void)q;
        fp_pprof_add_sample_type(p, "samples", "count");
        fp_pprof_add_sample_type(p, type, "nanoseconds");
        fp_pprof_set_default_sample_type(p, type);
        fp_pprof_set_period(p, type, "nanoseconds",
                            off && hc && hc->off_cpu_period ? (int64_t)hc->off_cpu_period : 1);
        /* The open bucket: of the running tier, when it profiles what is asked. */
        if (hc && (hc->off_cpu_period || (!off && !wall))) {
                char line[200];
                e = fp_export_host_pprof(fp_core_host(s), p, service, !off, off || wall);
                if (e < 0) {
                        fp_pprof_free(p);
                        return fp_control_error(c, "cannot build the profile: %s", strerror(-e));
                }
                int n = snprintf(line, sizeof(line),
                                 "host tier: every process, cpu-clock at %" PRIu64 " Hz per CPU",
                                 hc->freq);
                if (hc->off_cpu_period && n > 0 && (size_t)n < sizeof(line))
                        snprintf(line + n, sizeof(line) - (size_t)n, ", off-CPU time at T = %g ms",
                                 (double)hc->off_cpu_period / 1e6);
                fp_pprof_add_comment(p, line);
                int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
                fp_pprof_set_time(p, fp_core_bucket_start_ns(s), now - fp_core_bucket_start_ns(s));
                open = true;
        }
        if (since && fp_parse_uint(since, 1, UINT32_MAX, &since_s) == 0)
                f.since_ns = (int64_t)fp_now_ns(CLOCK_REALTIME) - (int64_t)since_s * 1000000000LL;
        if (queue_dump(s, c, &f, p, format) != -ENODEV)
                return;
        if (!open) {
                fp_pprof_free(p);
                if (hc)
                        return fp_control_error(c, "the host tier does not profile off-CPU time "
                                                   "(start it with --off-cpu), and there is no "
                                                   "store");
                return fp_control_error(c, "the host tier is not running (and there is no store)");
        }
        dump_finish(c, format, p);
        fp_pprof_free(p);
}

static void cmd_dump(void *userdata, struct fp_control_client *c, const struct fp_ctl_request *q)
{
        struct fp_core *s = userdata;
        uid_t uid = fp_control_cred(c)->uid;
        const char *pid_s = fp_ctl_request_get(q, "pid");
        const char *format = fp_ctl_request_get(q, "format");
        const char *event = fp_ctl_request_get(q, "event");
        const char *since = fp_ctl_request_get(q, "since");
        const char *service = fp_ctl_request_get(q, "service");
        bool host = fp_ctl_request_get(q, "host") != NULL;
        struct fp_store_filter f = {0};
        struct fp_pprof *p;
        struct fp_target *first = NULL;
        uint64_t since_s = 0;
        pid_t pid = 0;
        int e;

        if (!format)
                format = "pprof";
        if (strcmp(format, "pprof") != 0 && strcmp(format, "top") != 0 &&
            strcmp(format, "folded") != 0)
                return fp_control_error(c, "unknown format '%s': pprof, top or folded", format);
        if (pid_s && arg_pid(pid_s, &pid) < 0)
                return fp_control_error(c, "invalid PID '%s'", pid_s);
        if (since && fp_parse_uint(since, 1, UINT32_MAX, &since_s) < 0)
                return fp_control_error(c, "invalid --since '%s'", since);
        if (event && strcmp(event, FP_STORE_OFFCPU_EVENT) != 0 &&
            strcmp(event, FP_STORE_WALL_EVENT) != 0) {
                struct fp_perf_event ev;
                if (fp_perf_event_parse(event, &ev) < 0)
                        return fp_control_error(c, "unknown event '%s'", event);
        }
        fp_core_poll_tracker(s); /* threads born or dead up to now */
        fp_core_poll_offcpu(s);  /* and the waits of their targets */
        struct fp_core_target *at = pid ? fp_core_find(s, pid) : NULL;
        /* For a user: the start time of the process now at that PID (0: none). */
        uint64_t started = pid && uid != 0 ? fp_proc_stat(pid, NULL) : 0;
        /* Another user's exited target under a PID that is now the caller's process: not it. */
        if (at && uid != 0 && !fp_core_may_see(uid, at) && fp_target_starttime(at->t) != started)
                at = NULL;
        if (pid && at && !fp_core_may_see(uid, at))
                return fp_control_error(c, "permission denied: process %d belongs to another user",
                                        (int)pid);
        if (pid && !at) {
                /* Not profiled now: the store may still hold it, for root or its owner. */
                uid_t owner;
                if (uid != 0 && (fp_proc_owner(pid, &owner) < 0 || owner != uid))
                        return fp_control_error(c, "process %d is not being profiled", (int)pid);
                if (!fp_core_has_store(s))
                        return fp_control_error(c, "process %d is not being profiled", (int)pid);
        }
        if (service && pid)
                return fp_control_error(c, "a PID and --service exclude each other");
        if (service && fp_upload_check_service(service) < 0)
                return fp_control_error(c, "invalid --service '%.64s'", service);
        if (service && uid != 0 && !fp_core_user_has_service(s, uid, service))
                return fp_control_error(
                    c, "permission denied: service %s is not one of your rules'", service);
        if (host && (uid != 0 || pid))
                return fp_control_error(c, uid != 0 ? "only root may dump the host tier"
                                                    : "a PID and --host exclude each other");
        if (host && event && strcmp(event, "cpu-clock") != 0 &&
            strcmp(event, FP_STORE_OFFCPU_EVENT) != 0 && strcmp(event, FP_STORE_WALL_EVENT) != 0)
                return fp_control_error(c, "the host tier samples cpu-clock (and, with --off-cpu, "
                                           "off-cpu and wall) only");
        if (!pid && !service && uid != 0)
                return fp_control_error(c, "only root may dump every process: give a PID");

        p = fp_pprof_new();
        if (!p)
                return fp_control_error(c, "out of memory");
        if (host)
                return dump_host(s, c, q, p, format, service, since, event);
        /* The open buckets of the live targets that match. */
        for (size_t i = 0; i < fp_core_n_targets(s); i++) {
                struct fp_target *t = fp_core_target_at(s, i)->t;
                const char *ty[2], *un[2];
                if (!fp_core_may_see(uid, fp_core_target_at(s, i)))
                        continue;
                if (pid && fp_target_pid(t) != pid)
                        continue;
                if (service && strcmp(fp_target_service(t), service) != 0)
                        continue;
                const char *tev = fp_target_config(t)->event.name;
                fp_target_sample_types(t, ty, un);
                bool off = event && strcmp(event, FP_STORE_OFFCPU_EVENT) == 0;
                bool wall = event && strcmp(event, FP_STORE_WALL_EVENT) == 0;
                bool skip;
                if (off || wall)
                        skip = !fp_target_config(t)->off_cpu_period ||
                               (wall && !fp_store_event_is_cpu_time(tev, un[1]));
                else if (event)
                        skip = strcmp(tev, event) != 0;
                else
                        skip = first && strcmp(tev, fp_target_config(first)->event.name) != 0;
                if (skip)
                        continue;
                if (off || wall) {
                        ty[0] = "samples", un[0] = "count";
                        ty[1] = off ? FP_STORE_OFFCPU_EVENT : FP_STORE_WALL_EVENT;
                        un[1] = "nanoseconds";
                }
                if (!first) {
                        first = t;
                        fp_pprof_add_sample_type(p, ty[0], un[0]);
                        fp_pprof_add_sample_type(p, ty[1], un[1]);
                        fp_pprof_set_default_sample_type(p, ty[1]);
                        const struct fp_perf_config *cfg = fp_target_config(t);
                        /* The wall profile has no period: its parts have two. */
                        if (!wall)
                                fp_pprof_set_period(p, ty[1], un[1],
                                                    (int64_t)(off         ? cfg->off_cpu_period
                                                              : cfg->freq ? 1
                                                                          : cfg->period));
                }
                fp_target_drain(t);
                if (wall)
                        e = fp_export_wall_pprof(t, p);
                else if (off)
                        e = fp_export_offcpu_pprof(t, p);
                else
                        e = fp_export_pprof(t, p);
                if (e < 0) {
                        fp_pprof_free(p);
                        return fp_control_error(c, "cannot build the profile: %s", strerror(-e));
                }
                dump_comments(p, t);
        }
        char line[128];
        snprintf(line, sizeof(line), "fleetprof-agent %s", FP_VERSION);
        fp_pprof_add_comment(p, line);
        if (first) {
                /* The open bucket's time; the store's buckets widen it. */
                int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
                fp_pprof_set_time(p, fp_core_bucket_start_ns(s), now - fp_core_bucket_start_ns(s));
        }

        f.pid = pid;
        f.service = service;
        /*
         * A user gets the stored samples of the process now at that PID, its
         * own, never those of an earlier process that had the PID (another
         * user's, perhaps): the store names a process by PID and start time.
         */
        if (pid && uid != 0)
                f.starttime = at ? fp_target_starttime(at->t) : started;
        f.event = event ? event : (first ? fp_target_config(first)->event.name : NULL);
        if (since_s)
                f.since_ns = (int64_t)fp_now_ns(CLOCK_REALTIME) - (int64_t)since_s * 1000000000LL;
        if (queue_dump(s, c, &f, p, format) != -ENODEV)
                return; /* answered when the writer is done, or an error answered */
        /* No store: the open buckets are all there is. */
        if (!first) {
                fp_pprof_free(p);
                if (pid)
                        return fp_control_error(c, "process %d is not profiled with event %s",
                                                (int)pid, event);
                if (service)
                        return fp_control_error(c, "no process of service %s is profiled%s%s",
                                                service, event ? " with event " : "",
                                                event ? event : "");
                return fp_control_error(c, "no profiled process%s%s", event ? " with event " : "",
                                        event ? event : "");
        }
        dump_finish(c, format, p);
        fp_pprof_free(p);
}

static void cmd_metrics(void *userdata, struct fp_control_client *c, const struct fp_ctl_request *q)
{
        struct fp_core *s = userdata;
        struct fp_core_status st;
        (void)q;
        if (fp_control_cred(c)->uid != 0)
                return fp_control_error(c, "only root may read the agent's metrics");
        if (fp_core_status(s, 0, &st) < 0)
                return fp_control_error(c, "out of memory");
        fp_metrics_write(&st, fp_write_file, fp_control_out(c));
        fp_core_status_free(&st);
}

const struct fp_control_command fp_commands[] = {
    {"start", cmd_start}, {"stop", cmd_stop},   {"status", cmd_status},
    {"dump", cmd_dump},   {"flush", cmd_flush}, {"metrics", cmd_metrics},
};
const size_t fp_n_commands = sizeof(fp_commands) / sizeof(fp_commands[0]);
