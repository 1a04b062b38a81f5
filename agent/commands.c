/* SPDX-License-Identifier: MIT */
/*
 * What each agentctl command does: start, stop, status, dump. Each checks
 * its arguments and the caller's rights, then answers into c->reply (an
 * error line, or a body). A dump's answer waits for the writer thread,
 * which adds the stored buckets to the open ones (see server.c).
 */
#include "server-internal.h"
#include "counters.h"
#include "pprof.h"
#include "symbols.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cmd_start(struct fp_server *s, struct client *c, const struct fp_ctl_request *q)
{
        struct reply *r = &c->reply;
        struct fp_perf_config cfg = {0};
        const char *pid_s = fp_ctl_request_get(q, "pid");
        const char *ev = fp_ctl_request_get(q, "event");
        const char *freq = fp_ctl_request_get(q, "freq");
        const char *period = fp_ctl_request_get(q, "period");
        const char *kernel = fp_ctl_request_get(q, "kernel");
        const char *best_effort = fp_ctl_request_get(q, "best_effort");
        const char *follow_s = fp_ctl_request_get(q, "follow");
        bool follow = follow_s && strcmp(follow_s, "1") == 0;
        struct fp_target *t;
        uid_t owner = 0;
        pid_t pid = 0;
        char err[512], bad[FP_PERF_EVENT_NAME_MAX + 1];

        if (parse_pid(pid_s, &pid) < 0)
                return reply_error(r, "invalid PID '%s'", pid_s ? pid_s : "");
        switch (fp_perf_event_list_parse(ev ? ev : "cpu-clock", &cfg, bad, sizeof(bad))) {
        case 0:
                break;
        case -EEXIST:
                return reply_error(r, "event '%s' appears twice in --event list", bad);
        case -E2BIG:
                return reply_error(r, "too many events in --event list: at most %d",
                                   FP_PERF_MAX_EVENTS);
        default:
                if (ev && strchr(ev, ','))
                        return reply_error(r, "unknown event '%s' in --event list", bad);
                return reply_error(r, "unknown event '%s'", ev);
        }
        cfg.best_effort = best_effort && strcmp(best_effort, "1") == 0;
        if (freq && period)
                return reply_error(r, "--freq and --period exclude each other");
        if (period) {
                if (parse_u64(period, UINT64_MAX / 2, &cfg.period) < 0)
                        return reply_error(
                            r, "invalid period '%s': a positive number of %s", period,
                            fp_perf_event_is_clock(&cfg.event) ? "nanoseconds" : "events");
        } else {
                uint64_t hz = 99;
                if (freq && parse_u64(freq, FP_PERF_MAX_FREQ, &hz) < 0)
                        return reply_error(r, "invalid frequency '%s': 1 to %d Hz", freq,
                                           FP_PERF_MAX_FREQ);
                /* Clocks count nanoseconds: a fixed period gives exact time weights. */
                if (fp_perf_event_is_clock(&cfg.event))
                        cfg.period = 1000000000ULL / hz;
                else
                        cfg.freq = hz;
        }
        cfg.kernel_frames = kernel && strcmp(kernel, "1") == 0;
        config_finish(&cfg);

        if (proc_owner(pid, &owner) < 0)
                return reply_error(r, "no such process: %d", (int)pid);
        if (c->cred.uid != 0 && c->cred.uid != owner)
                return reply_error(r, "permission denied: process %d belongs to another user",
                                   (int)pid);
        struct agent_target *old = server_find_target(s, pid);
        if (old) {
                struct fp_target_stats st;
                fp_target_stats(old->t, &st);
                if (st.state == FP_TARGET_RUNNING)
                        return reply_error(r, "process %d is already being profiled", (int)pid);
                if (!server_may_see(c, old))
                        return reply_error(r, "permission denied: process %d", (int)pid);
                /* An exited target under a reused PID: the new process replaces it. */
                server_stop_target(s, old);
        }
        if (server_start_target(s, pid, &cfg, owner, follow, 0, &t, err, sizeof(err)) < 0)
                return reply_error(r, "cannot profile %d: %s", (int)pid, err);

        struct fp_target_stats st;
        fp_target_stats(t, &st);
        fprintf(r->out, "profiling %d (%s) with %s at ", (int)pid, fp_target_comm(t),
                cfg.event.name);
        if (cfg.freq)
                fprintf(r->out, "%" PRIu64 " Hz", cfg.freq);
        else if (fp_perf_event_is_clock(&cfg.event))
                fprintf(r->out, "%" PRIu64 " Hz (every %" PRIu64 " ns)",
                        (uint64_t)(1000000000ULL / cfg.period), cfg.period);
        else
                fprintf(r->out, "every %" PRIu64 " events", cfg.period);
        fprintf(r->out, ", %u thread%s%s%s", st.threads_live, st.threads_live == 1 ? "" : "s",
                st.kernel_excluded ? " (kernel-mode samples not permitted: user time only)" : "",
                follow ? ", following its child processes" : "");
        const struct fp_perf_config *tc = fp_target_config(t);
        if (fp_perf_event_is_hardware(&tc->event))
                fprintf(r->out, ", precise_ip %u", tc->precise_ip);
        for (unsigned i = 0; i < tc->n_members; i++)
                fprintf(r->out, "%s%s", i ? ", " : "; counting ", tc->members[i].name);
        if (tc->n_members && st.kernel_excluded)
                fprintf(r->out, " (in user mode only: context-switches and cpu-migrations, which "
                                "happen in the kernel, count nothing)");
        if (fp_target_left_out(t)[0])
                fprintf(r->out, "; left out (not supported on this machine): %s",
                        fp_target_left_out(t));
        fputc('\n', r->out);
}

void cmd_stop(struct fp_server *s, struct client *c, const struct fp_ctl_request *q)
{
        struct reply *r = &c->reply;
        const char *pid_s = fp_ctl_request_get(q, "pid");
        pid_t pid = 0;

        if (parse_pid(pid_s, &pid) < 0)
                return reply_error(r, "invalid PID '%s'", pid_s ? pid_s : "");
        struct agent_target *at = server_find_target(s, pid);
        if (!at)
                return reply_error(r, "process %d is not being profiled", (int)pid);
        if (!server_may_see(c, at))
                return reply_error(r, "permission denied: process %d belongs to another user",
                                   (int)pid);
        struct fp_target_stats st;
        fp_target_drain(at->t);
        fp_target_stats(at->t, &st);
        fprintf(r->out, "stopped %d (%s): %" PRIu64 " samples, %" PRIu64 " lost%s\n", (int)pid,
                fp_target_comm(at->t), st.samples, st.lost,
                s->writer ? "; its profile stays in the store" : "");
        server_stop_target(s, at);
}

static const char *state_name(enum fp_target_state st)
{
        return st == FP_TARGET_RUNNING ? "running" : "exited";
}

/* Writes s as a JSON string literal. */
static void json_str(FILE *f, const char *s)
{
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fprintf(f, "\\%c", *p);
                else if (*p < 0x20)
                        fprintf(f, "\\u%04x", *p);
                else
                        fputc(*p, f);
        }
        fputc('"', f);
}

static uint64_t rate_hz(const struct fp_perf_config *cfg)
{
        if (cfg->freq)
                return cfg->freq;
        return fp_perf_event_is_clock(&cfg->event) ? 1000000000ULL / cfg->period : 0;
}

static void format_age(char *buf, size_t len, int64_t then_ns)
{
        if (!then_ns) {
                snprintf(buf, len, "never");
                return;
        }
        int64_t ago = ((int64_t)fp_now_ns(CLOCK_REALTIME) - then_ns) / 1000000000LL;
        snprintf(buf, len, "%" PRId64 "s ago", ago < 0 ? 0 : ago);
}

/* Drop totals of one target by reason: what is stored plus what is not yet. */
static size_t target_drops(const struct fp_server *s, struct fp_target *t,
                           struct fp_target_drop *rows, size_t max)
{
        size_t n = fp_target_open_drops(t, rows, max);

        for (size_t i = 0; i < s->n_drops; i++) {
                const struct fp_writer_drop *d = &s->drops[i];
                if (d->pid != fp_target_pid(t) || d->starttime != fp_target_starttime(t))
                        continue;
                size_t j = 0;
                while (j < n && strcmp(rows[j].reason, d->reason) != 0)
                        j++;
                if (j == n) {
                        if (n == max)
                                continue;
                        rows[n++] = (struct fp_target_drop){d->reason, 0};
                }
                rows[j].count += d->count;
        }
        return n;
}

/* The share of its enabled time the group was on the PMU, in percent; < 0 when unknown. */
static double running_percent(const struct fp_target_stats *st)
{
        if (!st->time_enabled)
                return -1;
        return 100.0 * (double)st->time_running / (double)st->time_enabled;
}

/* The group of a target in status --json: events, counters, precise_ip, what was left out. */
static void counters_json(FILE *out, struct fp_target *t, const struct fp_target_stats *st)
{
        const struct fp_perf_config *cfg = fp_target_config(t);
        const char *left = fp_target_left_out(t);
        double pct = running_percent(st);
        char events[FP_PERF_EVENT_LIST_MAX];

        fp_perf_event_list_string(cfg, events, sizeof(events));
        fprintf(out, ",\"events\":");
        json_str(out, events);
        if (fp_perf_event_is_hardware(&cfg->event))
                fprintf(out, ",\"precise_ip\":%u", cfg->precise_ip);
        else
                fprintf(out, ",\"precise_ip\":null");
        fprintf(out, ",\"left_out\":[");
        for (const char *p = left; *p;) {
                size_t n = strcspn(p, ",");
                fprintf(out, "%s\"%.*s\"", p == left ? "" : ",", (int)n, p);
                p += n + (p[n] == ',');
        }
        fprintf(out,
                "],\"time_enabled_ns\":%" PRIu64 ",\"time_running_ns\":%" PRIu64 ",\"counters\":[",
                st->time_enabled, st->time_running);
        for (unsigned i = 0; i < cfg->n_members; i++) {
                fprintf(out, "%s{\"event\":", i ? "," : "");
                json_str(out, cfg->members[i].name);
                fprintf(out, ",\"unit\":\"%s\",\"value\":%" PRIu64 ",\"running_percent\":",
                        fp_perf_event_unit(&cfg->members[i]), st->counter_total[i]);
                if (pct < 0)
                        fprintf(out, "null}");
                else
                        fprintf(out, "%.1f}", pct);
        }
        fprintf(out, "]");
}

static void status_json(struct fp_server *s, struct client *c, uint64_t up)
{
        FILE *out = c->reply.out;
        char store_msg[256] = "";
        bool store_ok = s->writer && fp_writer_store_ok(s->writer, store_msg, sizeof(store_msg));
        bool first = true;

        fprintf(out,
                "{\"agent_pid\":%d,\"version\":\"%s\",\"uptime_seconds\":%" PRIu64
                ",\"symbol_files_loaded\":%zu,\"bucket_seconds\":%u,\"store\":{\"path\":",
                (int)getpid(), FP_VERSION, up, fp_symcache_n_loaded(s->cache),
                s->opt.bucket_seconds);
        json_str(out, s->opt.store_path ? s->opt.store_path : "");
        fprintf(out, ",\"ok\":%s,\"error\":", store_ok ? "true" : "false");
        json_str(out, store_msg[0] ? store_msg : s->store_error);
        fprintf(out,
                ",\"max_bytes\":%" PRIu64 ",\"file_bytes\":%" PRIu64 ",\"wal_bytes\":%" PRIu64
                ",\"buckets\":%" PRIu64 ",\"pending_upload\":%" PRIu64
                ",\"buckets_written\":%" PRIu64 ",\"buckets_failed\":%" PRIu64 ",\"queued\":%zu}",
                s->have_stats ? s->stats.max_bytes : s->opt.store_max_bytes, s->stats.file_bytes,
                s->stats.wal_bytes, s->stats.buckets, s->stats.pending_buckets, s->buckets_closed,
                s->buckets_failed, s->writer ? fp_writer_pending(s->writer) : 0);
        if (s->uploader) {
                struct fp_upload_status us;
                fp_uploader_status(s->uploader, &us);
                fprintf(out, ",\"upload\":{\"url\":");
                json_str(out, fp_uploader_url(s->uploader));
                fprintf(out,
                        ",\"in_progress\":%s,\"last_success_ns\":%" PRId64
                        ",\"last_attempt_ns\":%" PRId64 ",\"next_attempt_ns\":%" PRId64
                        ",\"rounds_ok\":%" PRIu64 ",\"rounds_failed\":%" PRIu64
                        ",\"uploads_ok\":%" PRIu64 ",\"uploads_rejected\":%" PRIu64
                        ",\"bytes_sent\":%" PRIu64 ",\"buckets_uploaded\":%" PRIu64
                        ",\"pending_buckets\":%" PRIu64 ",\"last_error\":",
                        us.in_progress ? "true" : "false", us.last_success_ns, us.last_attempt_ns,
                        us.next_attempt_ns, us.rounds_ok, us.rounds_failed, us.uploads_ok,
                        us.uploads_rejected, us.bytes_sent, us.buckets_uploaded,
                        s->stats.pending_buckets);
                json_str(out, us.last_error);
                fputc('}', out);
        }
        fprintf(out, ",\"thread_tracker\":{\"name\":\"%s\",\"reason\":", server_tracker_name(s));
        json_str(out, s->tracker ? "" : s->tracker_reason);
        fprintf(out, ",\"events_dropped\":%" PRIu64 ",\"children_not_followed\":%" PRIu64 "}",
                s->tracker ? fp_tracker_dropped(s->tracker) : 0, s->children_not_followed);
        fprintf(out, ",\"targets\":[");
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target *t = s->targets[i].t;
                const struct fp_perf_config *cfg = fp_target_config(t);
                struct fp_target_stats st;
                struct fp_target_drop rows[16];
                if (!server_may_see(c, &s->targets[i]))
                        continue;
                fp_target_stats(t, &st);
                fprintf(out, "%s{\"pid\":%d,\"comm\":", first ? "" : ",", (int)fp_target_pid(t));
                json_str(out, fp_target_comm(t));
                fprintf(out, ",\"exe\":");
                json_str(out, fp_target_exe(t));
                fprintf(out,
                        ",\"event\":\"%s\",\"frequency\":%" PRIu64 ",\"period\":%" PRIu64
                        ",\"state\":\"%s\",\"threads\":%u,\"threads_seen\":%u"
                        ",\"samples\":%" PRIu64 ",\"value\":%" PRIu64 ",\"lost\":%" PRIu64
                        ",\"throttled\":%" PRIu64 ",\"unwind_empty\":%" PRIu64
                        ",\"attach_failed\":%" PRIu64 ",\"unresolved_frames\":%" PRIu64
                        ",\"dropped_nomem\":%" PRIu64 ",\"kernel_excluded\":%s,\"drops\":{",
                        cfg->event.name, rate_hz(cfg), cfg->period, state_name(st.state),
                        st.threads_live, st.threads_seen, st.samples, st.value, st.lost,
                        st.throttled, st.unwind_empty, st.attach_failed, st.unresolved,
                        st.dropped_nomem, st.kernel_excluded ? "true" : "false");
                size_t n = target_drops(s, t, rows, 16);
                for (size_t j = 0; j < n; j++)
                        fprintf(out, "%s\"%s\":%" PRIu64, j ? "," : "", rows[j].reason,
                                rows[j].count);
                struct fp_target_latency lat;
                fp_target_attach_latency(t, &lat);
                fprintf(out,
                        "},\"follow_children\":%s,\"parent_pid\":%d,\"threads_missed\":%" PRIu64
                        ",\"threads_by_rescan\":%u,\"attach_latency_us\":{\"count\":%" PRIu64
                        ",\"p50\":%u,\"p90\":%u,\"p99\":%u,\"max\":%u}",
                        fp_target_follows_children(t) ? "true" : "false", (int)fp_target_parent(t),
                        st.threads_missed, st.threads_by_rescan, lat.count, lat.p50_us, lat.p90_us,
                        lat.p99_us, lat.max_us);
                counters_json(out, t, &st);
                fprintf(out, "}");
                first = false;
        }
        fprintf(out, "]}\n");
}

static void human_bytes(char *buf, size_t len, uint64_t b)
{
        if (b >= 10ULL << 20)
                snprintf(buf, len, "%" PRIu64 " MiB", b >> 20);
        else if (b >= 10ULL << 10)
                snprintf(buf, len, "%" PRIu64 " KiB", b >> 10);
        else
                snprintf(buf, len, "%" PRIu64 " B", b);
}

void cmd_status(struct fp_server *s, struct client *c, const struct fp_ctl_request *q)
{
        FILE *out = c->reply.out;
        const char *json = fp_ctl_request_get(q, "json");
        uint64_t up = (fp_now_ns(CLOCK_MONOTONIC) - s->start_ns) / 1000000000ULL;
        size_t visible = 0;

        server_poll_tracker(s);
        for (size_t i = 0; i < s->n_targets; i++) {
                if (!server_may_see(c, &s->targets[i]))
                        continue;
                visible++;
                fp_target_drain(s->targets[i].t); /* counts up to this moment */
        }
        if (json && strcmp(json, "1") == 0)
                return status_json(s, c, up);

        fprintf(out, "fleetprof-agent %s, pid %d, up %" PRIu64 "s, %zu target%s\n", FP_VERSION,
                (int)getpid(), up, visible, visible == 1 ? "" : "s");
        if (!s->opt.store_path) {
                fprintf(out, "store: none (samples are kept in memory only)\n");
        } else {
                char msg[256] = "", used[32], max[32];
                bool ok = s->writer && fp_writer_store_ok(s->writer, msg, sizeof(msg));
                human_bytes(used, sizeof(used), s->stats.file_bytes + s->stats.wal_bytes);
                human_bytes(max, sizeof(max),
                            s->have_stats ? s->stats.max_bytes : s->opt.store_max_bytes);
                fprintf(out,
                        "store: %s, %s of %s, %" PRIu64 " buckets of %us, %" PRIu64
                        " not uploaded%s%s\n",
                        s->opt.store_path, used, max, s->stats.buckets, s->opt.bucket_seconds,
                        s->stats.pending_buckets, ok && !s->store_error[0] ? "" : ", FAILING: ",
                        ok && !s->store_error[0] ? "" : (msg[0] ? msg : s->store_error));
        }
        if (s->uploader) {
                struct fp_upload_status us;
                char last[32];
                fp_uploader_status(s->uploader, &us);
                format_age(last, sizeof(last), us.last_success_ns);
                fprintf(out,
                        "upload: %s, last success %s, %" PRIu64 " buckets uploaded, %" PRIu64
                        " profiles refused%s%s%s\n",
                        fp_uploader_url(s->uploader), last, us.buckets_uploaded,
                        us.uploads_rejected, us.in_progress ? ", uploading now" : "",
                        us.last_error[0] ? ", last error: " : "", us.last_error);
        } else {
                fprintf(out, "upload: none (no --collector)\n");
        }
        if (s->tracker)
                fprintf(out, "thread tracker: bpf (scheduler tracepoints)\n");
        else
                fprintf(out, "thread tracker: perf-fork (fallback: %s)\n", s->tracker_reason);
        if (!visible)
                return;
        fprintf(out, "%-8s %-16s %-12s %8s %-8s %8s %10s %8s %9s\n", "PID", "COMM", "EVENT", "RATE",
                "STATE", "THREADS", "SAMPLES", "LOST", "THROTTLED");
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target *t = s->targets[i].t;
                const struct fp_perf_config *cfg = fp_target_config(t);
                struct fp_target_stats st;
                char rate[32];
                if (!server_may_see(c, &s->targets[i]))
                        continue;
                fp_target_stats(t, &st);
                if (rate_hz(cfg))
                        snprintf(rate, sizeof(rate), "%" PRIu64 "Hz", rate_hz(cfg));
                else
                        snprintf(rate, sizeof(rate), "1/%" PRIu64, cfg->period);
                fprintf(out,
                        "%-8d %-16s %-12s %8s %-8s %8u %10" PRIu64 " %8" PRIu64 " %9" PRIu64 "\n",
                        (int)fp_target_pid(t), fp_target_comm(t), cfg->event.name, rate,
                        state_name(st.state), st.threads_live, st.samples, st.lost, st.throttled);
        }
        /* The group's counters, and what the machine could not give. */
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target *t = s->targets[i].t;
                const struct fp_perf_config *cfg = fp_target_config(t);
                struct fp_target_stats st;
                if (!server_may_see(c, &s->targets[i]))
                        continue;
                fp_target_stats(t, &st);
                double pct = running_percent(&st);
                if (fp_perf_event_is_hardware(&cfg->event))
                        fprintf(out, "%d: %s samples with precise_ip %u\n", (int)fp_target_pid(t),
                                cfg->event.name, cfg->precise_ip);
                for (unsigned j = 0; j < cfg->n_members; j++) {
                        if (j == 0)
                                fprintf(out, "counters of %d:", (int)fp_target_pid(t));
                        if (pct < 0)
                                fprintf(out, "%s %s %" PRIu64 " (ran: no samples yet)",
                                        j ? "," : "", cfg->members[j].name, st.counter_total[j]);
                        else
                                fprintf(out, "%s %s %" PRIu64 " (ran %.1f%%)", j ? "," : "",
                                        cfg->members[j].name, st.counter_total[j], pct);
                        if (j + 1 == cfg->n_members)
                                fputc('\n', out);
                }
                if (fp_target_left_out(t)[0])
                        fprintf(out, "%d: left out (not supported on this machine): %s\n",
                                (int)fp_target_pid(t), fp_target_left_out(t));
        }
        /* Every sample that could not be kept, by reason. */
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target_drop rows[16];
                if (!server_may_see(c, &s->targets[i]))
                        continue;
                size_t n = target_drops(s, s->targets[i].t, rows, 16);
                if (!n)
                        continue;
                fprintf(out, "dropped from %d:", (int)fp_target_pid(s->targets[i].t));
                for (size_t j = 0; j < n; j++)
                        fprintf(out, "%s %s %" PRIu64, j ? "," : "", rows[j].reason, rows[j].count);
                fputc('\n', out);
        }
}

static void on_flush_done(void *userdata, bool ok, const char *message)
{
        struct client *c = userdata;
        if (ok)
                fprintf(c->reply.out, "%s\n", message);
        else
                reply_error(&c->reply, "%s", message);
        server_answer_waiting(c);
}

/*
 * Runs on the writer thread after every job queued before it: the writer's
 * queue is first in, first out, so by then the closed buckets are stored.
 */
static int flush_barrier(struct fp_store *store, void *arg)
{
        (void)store;
        (void)arg;
        return 0;
}

static void on_stored(void *userdata, const struct fp_writer_result *res)
{
        struct client *c = userdata;

        if (res->error < 0)
                reply_error(&c->reply, "cannot flush: %s", strerror(-res->error));
        else
                fprintf(c->reply.out,
                        "closed the open bucket into the store; no collector is configured "
                        "(--collector URL), so nothing was uploaded\n");
        server_answer_waiting(c);
}

void cmd_flush(struct fp_server *s, struct client *c, const struct fp_ctl_request *q)
{
        (void)q;
        if (c->cred.uid != 0)
                return reply_error(&c->reply, "only root may flush the agent");
        if (!s->writer)
                return reply_error(&c->reply,
                                   "the agent has no store (--store none): nothing to flush");
        server_close_buckets(s);
        if (!s->uploader) {
                /* Answer once the writer has stored what was just closed. */
                int e = fp_writer_submit_call(s->writer, flush_barrier, NULL, on_stored, c);
                if (e < 0)
                        return reply_error(&c->reply, "cannot flush: %s", strerror(-e));
                c->waiting = true;
                return;
        }
        int r = fp_uploader_flush(s->uploader, on_flush_done, c);
        if (r == -EBUSY)
                return reply_error(&c->reply, "another flush is in progress");
        if (r < 0)
                return reply_error(&c->reply, "cannot flush: %s", strerror(-r));
        c->waiting = true;
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
        if (st.kernel_excluded) {
                snprintf(line, sizeof(line),
                         "pid %d: kernel-mode samples were not permitted: user time only",
                         (int)fp_target_pid(t));
                fp_pprof_add_comment(p, line);
        }
}

void dump_finish(struct client *c, struct fp_pprof *p)
{
        struct reply *r = &c->reply;
        int e;

        if (fp_pprof_n_sample_types(p) == 0) {
                reply_error(r, "no samples in the range asked for");
                return;
        }
        if (strcmp(c->format, "pprof") == 0) {
                uint8_t *buf;
                size_t len;
                e = fp_pprof_encode(p, 1, &buf, &len);
                if (e < 0) {
                        reply_error(r, "cannot encode the profile: %s", strerror(-e));
                        return;
                }
                fwrite(buf, 1, len, r->out);
                free(buf);
        } else if (strcmp(c->format, "top") == 0) {
                e = fp_pprof_write_top(p, 1, 0, r->out);
                if (e >= 0)
                        e = fp_counters_write_top(p, 1, 20, r->out);
        } else {
                e = fp_pprof_write_folded(p, 0, r->out);
        }
        if (e < 0)
                reply_error(r, "cannot write the profile: %s", strerror(-e));
}

void cmd_dump(struct fp_server *s, struct client *c, const struct fp_ctl_request *q)
{
        struct reply *r = &c->reply;
        const char *pid_s = fp_ctl_request_get(q, "pid");
        const char *format = fp_ctl_request_get(q, "format");
        const char *event = fp_ctl_request_get(q, "event");
        const char *since = fp_ctl_request_get(q, "since");
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
                return reply_error(r, "unknown format '%s': pprof, top or folded", format);
        snprintf(c->format, sizeof(c->format), "%s", format);
        if (pid_s && parse_pid(pid_s, &pid) < 0)
                return reply_error(r, "invalid PID '%s'", pid_s);
        if (since && parse_u64(since, UINT32_MAX, &since_s) < 0)
                return reply_error(r, "invalid --since '%s'", since);
        if (event) {
                struct fp_perf_event ev;
                if (fp_perf_event_parse(event, &ev) < 0)
                        return reply_error(r, "unknown event '%s'", event);
        }
        server_poll_tracker(s); /* threads born or dead up to now */
        struct agent_target *at = pid ? server_find_target(s, pid) : NULL;
        if (pid && at && !server_may_see(c, at))
                return reply_error(r, "permission denied: process %d belongs to another user",
                                   (int)pid);
        if (pid && !at) {
                /* Not profiled now: the store may still hold it, for root or its owner. */
                uid_t owner;
                if (c->cred.uid != 0 && (proc_owner(pid, &owner) < 0 || owner != c->cred.uid))
                        return reply_error(r, "process %d is not being profiled", (int)pid);
                if (!s->writer)
                        return reply_error(r, "process %d is not being profiled", (int)pid);
        }
        if (!pid && c->cred.uid != 0)
                return reply_error(r, "only root may dump every process: give a PID");

        p = fp_pprof_new();
        if (!p)
                return reply_error(r, "out of memory");
        /* The open buckets of the live targets that match. */
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target *t = s->targets[i].t;
                const char *ty[2], *un[2];
                if (pid && fp_target_pid(t) != pid)
                        continue;
                const char *tev = fp_target_config(t)->event.name;
                if (event ? strcmp(tev, event) != 0
                          : (first && strcmp(tev, fp_target_config(first)->event.name) != 0))
                        continue;
                fp_target_sample_types(t, ty, un);
                if (!first) {
                        first = t;
                        fp_pprof_add_sample_type(p, ty[0], un[0]);
                        fp_pprof_add_sample_type(p, ty[1], un[1]);
                        fp_pprof_set_default_sample_type(p, ty[1]);
                        const struct fp_perf_config *cfg = fp_target_config(t);
                        fp_pprof_set_period(p, ty[1], un[1],
                                            (int64_t)(cfg->freq ? 1 : cfg->period));
                }
                fp_target_drain(t);
                e = fp_target_to_pprof(t, p);
                if (e < 0) {
                        fp_pprof_free(p);
                        return reply_error(r, "cannot build the profile: %s", strerror(-e));
                }
                dump_comments(p, t);
        }
        char line[128];
        snprintf(line, sizeof(line), "fleetprof-agent %s", FP_VERSION);
        fp_pprof_add_comment(p, line);
        if (first) {
                /* The open bucket's time; the store's buckets widen it. */
                int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
                fp_pprof_set_time(p, s->bucket_start_ns, now - s->bucket_start_ns);
        }

        f.pid = pid;
        f.event = event ? event : (first ? fp_target_config(first)->event.name : NULL);
        if (since_s)
                f.since_ns = (int64_t)fp_now_ns(CLOCK_REALTIME) - (int64_t)since_s * 1000000000LL;
        e = server_submit_dump(s, c, &f, p);
        if (e == 0)
                return; /* answered when the writer is done */
        if (e != -ENODEV) {
                fp_pprof_free(p);
                return reply_error(r, "cannot queue the dump: %s", strerror(-e));
        }
        /* No store: the open buckets are all there is. */
        if (!first) {
                fp_pprof_free(p);
                if (pid)
                        return reply_error(r, "process %d is not profiled with event %s", (int)pid,
                                           event);
                return reply_error(r, "no profiled process%s%s", event ? " with event " : "",
                                   event ? event : "");
        }
        dump_finish(c, p);
        fp_pprof_free(p);
}
