/* SPDX-License-Identifier: MIT */
/*
 * The agent's control server; see server.h.
 *
 * Each accepted connection is a bufferevent that collects one framed
 * request (ctl.h), runs it on the loop thread, queues the framed response
 * and frees itself once the response has been written.
 */
#include "server.h"
#include "ctl.h"
#include "perf.h"
#include "pprof.h"
#include "symbols.h"
#include "target.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct agent_target {
        struct fp_target *t;
        uid_t owner;
};

struct fp_server {
        struct event_base *base;
        struct fp_symcache *cache;
        struct evconnlistener *listener;
        char *socket_path;
        struct agent_target *targets;
        size_t n_targets, cap_targets;
        uint64_t start_ns;
};

struct client {
        struct fp_server *server;
        struct bufferevent *bev;
        struct ucred cred;
        bool answered;
};

/* A response being built: status line and body. */
struct reply {
        char *status; /* NULL means ok */
        char *body;
        size_t body_len;
        FILE *out; /* open_memstream on body */
};

static uint64_t now_ns(clockid_t clk)
{
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void reply_error(struct reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply_error(struct reply *r, const char *fmt, ...)
{
        va_list ap;
        free(r->status);
        r->status = NULL;
        va_start(ap, fmt);
        if (vasprintf(&r->status, fmt, ap) < 0)
                r->status = NULL;
        va_end(ap);
        if (!r->status)
                r->status = strdup("out of memory");
}

static struct agent_target *find_target(struct fp_server *s, pid_t pid)
{
        for (size_t i = 0; i < s->n_targets; i++)
                if (fp_target_pid(s->targets[i].t) == pid)
                        return &s->targets[i];
        return NULL;
}

static bool may_see(const struct client *c, const struct agent_target *at)
{
        return c->cred.uid == 0 || c->cred.uid == at->owner;
}

/* Parses a positive decimal number no larger than max; -EINVAL otherwise. */
static int parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
        char *end;
        if (!s || !*s || *s == '-' || *s == '+')
                return -EINVAL;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end || v == 0 || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_pid(const char *s, pid_t *ret)
{
        uint64_t v;
        int r = parse_u64(s, INT_MAX, &v);
        if (r == 0)
                *ret = (pid_t)v;
        return r;
}

static int proc_owner(pid_t pid, uid_t *ret)
{
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/proc/%d", (int)pid);
        if (stat(path, &st) < 0)
                return -errno;
        *ret = st.st_uid;
        return 0;
}

static void cmd_start(struct fp_server *s, struct client *c, const struct fp_ctl_request *q,
                      struct reply *r)
{
        struct fp_perf_config cfg = {0};
        const char *pid_s = fp_ctl_request_get(q, "pid");
        const char *ev = fp_ctl_request_get(q, "event");
        const char *freq = fp_ctl_request_get(q, "freq");
        const char *period = fp_ctl_request_get(q, "period");
        const char *kernel = fp_ctl_request_get(q, "kernel");
        struct fp_target *t;
        uid_t owner = 0;
        pid_t pid = 0;
        char err[512];

        if (parse_pid(pid_s, &pid) < 0)
                return reply_error(r, "invalid PID '%s'", pid_s ? pid_s : "");
        if (fp_perf_event_parse(ev ? ev : "cpu-clock", &cfg.event) < 0)
                return reply_error(r, "unknown event '%s'", ev);
        if (freq && period)
                return reply_error(r, "--freq and --period exclude each other");
        if (period) {
                if (parse_u64(period, UINT64_MAX / 2, &cfg.period) < 0)
                        return reply_error(r, "invalid period '%s': a positive number of %s",
                                           period,
                                           fp_perf_event_is_clock(&cfg.event) ? "nanoseconds"
                                                                               : "events");
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
        cfg.count_kernel = true;
        cfg.ring_pages = fp_perf_ring_pages_for(
                cfg.freq ? cfg.freq
                         : (fp_perf_event_is_clock(&cfg.event) ? 1000000000ULL / cfg.period : 1000));

        if (proc_owner(pid, &owner) < 0)
                return reply_error(r, "no such process: %d", (int)pid);
        if (c->cred.uid != 0 && c->cred.uid != owner)
                return reply_error(r, "permission denied: process %d belongs to another user",
                                   (int)pid);
        struct agent_target *old = find_target(s, pid);
        if (old) {
                struct fp_target_stats st;
                fp_target_stats(old->t, &st);
                if (st.state == FP_TARGET_RUNNING)
                        return reply_error(r, "process %d is already being profiled", (int)pid);
                if (!may_see(c, old))
                        return reply_error(r, "permission denied: process %d", (int)pid);
                /* An exited target under a reused PID: the new process replaces it. */
                fp_target_free(old->t);
                *old = s->targets[--s->n_targets];
        }
        if (s->n_targets == s->cap_targets) {
                size_t cap = s->cap_targets ? s->cap_targets * 2 : 8;
                void *p = realloc(s->targets, cap * sizeof(*s->targets));
                if (!p)
                        return reply_error(r, "out of memory");
                s->targets = p;
                s->cap_targets = cap;
        }
        int e = fp_target_start(s->base, s->cache, pid, &cfg, &t, err, sizeof(err));
        if (e < 0)
                return reply_error(r, "cannot profile %d: %s", (int)pid, err);
        s->targets[s->n_targets++] = (struct agent_target){.t = t, .owner = owner};

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
        fprintf(r->out, ", %u thread%s%s\n", st.threads_live, st.threads_live == 1 ? "" : "s",
                st.kernel_excluded ? " (kernel-mode samples not permitted: user time only)"
                                   : "");
}

static void cmd_stop(struct fp_server *s, struct client *c, const struct fp_ctl_request *q,
                     struct reply *r)
{
        const char *pid_s = fp_ctl_request_get(q, "pid");
        pid_t pid = 0;

        if (parse_pid(pid_s, &pid) < 0)
                return reply_error(r, "invalid PID '%s'", pid_s ? pid_s : "");
        struct agent_target *at = find_target(s, pid);
        if (!at)
                return reply_error(r, "process %d is not being profiled", (int)pid);
        if (!may_see(c, at))
                return reply_error(r, "permission denied: process %d belongs to another user",
                                   (int)pid);
        struct fp_target_stats st;
        fp_target_drain(at->t);
        fp_target_stats(at->t, &st);
        fprintf(r->out, "stopped %d (%s): %" PRIu64 " samples, %" PRIu64 " lost\n", (int)pid,
                fp_target_comm(at->t), st.samples, st.lost);
        fp_target_free(at->t);
        *at = s->targets[--s->n_targets];
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

static void cmd_status(struct fp_server *s, struct client *c, const struct fp_ctl_request *q,
                       struct reply *r)
{
        const char *json = fp_ctl_request_get(q, "json");
        uint64_t up = (now_ns(CLOCK_MONOTONIC) - s->start_ns) / 1000000000ULL;
        size_t visible = 0;

        for (size_t i = 0; i < s->n_targets; i++) {
                if (!may_see(c, &s->targets[i]))
                        continue;
                visible++;
                fp_target_drain(s->targets[i].t); /* counts up to this moment */
        }

        if (json && strcmp(json, "1") == 0) {
                bool first = true;
                fprintf(r->out,
                        "{\"agent_pid\":%d,\"version\":\"%s\",\"uptime_seconds\":%" PRIu64
                        ",\"symbol_files_loaded\":%zu,\"targets\":[",
                        (int)getpid(), FP_VERSION, up, fp_symcache_n_loaded(s->cache));
                for (size_t i = 0; i < s->n_targets; i++) {
                        struct fp_target *t = s->targets[i].t;
                        const struct fp_perf_config *cfg = fp_target_config(t);
                        struct fp_target_stats st;
                        if (!may_see(c, &s->targets[i]))
                                continue;
                        fp_target_stats(t, &st);
                        fprintf(r->out, "%s{\"pid\":%d,\"comm\":", first ? "" : ",",
                                (int)fp_target_pid(t));
                        json_str(r->out, fp_target_comm(t));
                        fprintf(r->out, ",\"exe\":");
                        json_str(r->out, fp_target_exe(t));
                        fprintf(r->out,
                                ",\"event\":\"%s\",\"frequency\":%" PRIu64 ",\"period\":%" PRIu64
                                ",\"state\":\"%s\",\"threads\":%u,\"threads_seen\":%u"
                                ",\"samples\":%" PRIu64 ",\"value\":%" PRIu64
                                ",\"lost\":%" PRIu64 ",\"throttled\":%" PRIu64
                                ",\"unwind_empty\":%" PRIu64 ",\"attach_failed\":%" PRIu64
                                ",\"unresolved_frames\":%" PRIu64 ",\"dropped_nomem\":%" PRIu64
                                ",\"kernel_excluded\":%s}",
                                cfg->event.name, rate_hz(cfg), cfg->period, state_name(st.state),
                                st.threads_live, st.threads_seen, st.samples, st.value, st.lost,
                                st.throttled, st.unwind_empty, st.attach_failed, st.unresolved,
                                st.dropped_nomem, st.kernel_excluded ? "true" : "false");
                        first = false;
                }
                fprintf(r->out, "]}\n");
                return;
        }

        fprintf(r->out, "fleetprof-agent %s, pid %d, up %" PRIu64 "s, %zu target%s\n",
                FP_VERSION, (int)getpid(), up, visible, visible == 1 ? "" : "s");
        if (!visible)
                return;
        fprintf(r->out, "%-8s %-16s %-12s %8s %-8s %8s %10s %8s %9s\n", "PID", "COMM", "EVENT",
                "RATE", "STATE", "THREADS", "SAMPLES", "LOST", "THROTTLED");
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target *t = s->targets[i].t;
                const struct fp_perf_config *cfg = fp_target_config(t);
                struct fp_target_stats st;
                char rate[32];
                if (!may_see(c, &s->targets[i]))
                        continue;
                fp_target_stats(t, &st);
                if (rate_hz(cfg))
                        snprintf(rate, sizeof(rate), "%" PRIu64 "Hz", rate_hz(cfg));
                else
                        snprintf(rate, sizeof(rate), "1/%" PRIu64, cfg->period);
                fprintf(r->out, "%-8d %-16s %-12s %8s %-8s %8u %10" PRIu64 " %8" PRIu64
                                " %9" PRIu64 "\n",
                        (int)fp_target_pid(t), fp_target_comm(t), cfg->event.name, rate,
                        state_name(st.state), st.threads_live, st.samples, st.lost,
                        st.throttled);
        }
}

/* Adds the comments and accounting of one target to a dump. */
static void dump_comments(struct fp_pprof *p, struct fp_target *t)
{
        const struct fp_perf_config *cfg = fp_target_config(t);
        struct fp_target_stats st;
        char line[1024];

        fp_target_stats(t, &st);
        snprintf(line, sizeof(line), "target %d (%s) %s: %s, %s", (int)fp_target_pid(t),
                 fp_target_comm(t), fp_target_exe(t), cfg->event.name, state_name(st.state));
        fp_pprof_add_comment(p, line);
        snprintf(line, sizeof(line),
                 "pid %d: samples %" PRIu64 ", lost records %" PRIu64 ", throttle events %" PRIu64
                 ", samples without callchain %" PRIu64 ", threads seen %u, threads not attached %" PRIu64,
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

static void cmd_dump(struct fp_server *s, struct client *c, const struct fp_ctl_request *q,
                     struct reply *r)
{
        const char *pid_s = fp_ctl_request_get(q, "pid");
        const char *format = fp_ctl_request_get(q, "format");
        const char *event = fp_ctl_request_get(q, "event");
        struct fp_pprof *p = NULL;
        struct fp_target *first = NULL;
        size_t n_selected = 0, n_skipped = 0;
        uint64_t t_start = UINT64_MAX;
        const char *types[2] = {NULL, NULL}, *units[2] = {NULL, NULL};
        pid_t pid = 0;
        int e;

        if (!format)
                format = "pprof";
        if (strcmp(format, "pprof") != 0 && strcmp(format, "top") != 0 &&
            strcmp(format, "folded") != 0)
                return reply_error(r, "unknown format '%s': pprof, top or folded", format);
        if (pid_s && parse_pid(pid_s, &pid) < 0)
                return reply_error(r, "invalid PID '%s'", pid_s);
        if (pid) {
                struct agent_target *at = find_target(s, pid);
                if (!at)
                        return reply_error(r, "process %d is not being profiled", (int)pid);
                if (!may_see(c, at))
                        return reply_error(r,
                                           "permission denied: process %d belongs to another user",
                                           (int)pid);
        }
        if (event) {
                struct fp_perf_event ev;
                if (fp_perf_event_parse(event, &ev) < 0)
                        return reply_error(r, "unknown event '%s'", event);
        }

        p = fp_pprof_new();
        if (!p)
                return reply_error(r, "out of memory");
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target *t = s->targets[i].t;
                const char *ty[2], *un[2];
                if ((pid && fp_target_pid(t) != pid) || !may_see(c, &s->targets[i]))
                        continue;
                if (event && strcmp(fp_target_config(t)->event.name, event) != 0)
                        continue;
                fp_target_sample_types(t, ty, un);
                if (!first) {
                        first = t;
                        types[0] = ty[0], types[1] = ty[1], units[0] = un[0], units[1] = un[1];
                        fp_pprof_add_sample_type(p, ty[0], un[0]);
                        fp_pprof_add_sample_type(p, ty[1], un[1]);
                        fp_pprof_set_default_sample_type(p, ty[1]);
                } else if (strcmp(ty[1], types[1]) != 0 || strcmp(un[1], units[1]) != 0) {
                        n_skipped++; /* a profile holds one set of sample types */
                        continue;
                }
                fp_target_drain(t);
                e = fp_target_to_pprof(t, p, pid == 0);
                if (e < 0) {
                        reply_error(r, "cannot build the profile: %s", strerror(-e));
                        goto out;
                }
                dump_comments(p, t);
                struct fp_target_stats st;
                fp_target_stats(t, &st);
                if (st.start_ns < t_start)
                        t_start = st.start_ns;
                n_selected++;
        }
        if (!first) {
                if (pid)
                        reply_error(r, "process %d is not profiled with event %s", (int)pid,
                                    event);
                else
                        reply_error(r, "no profiled process%s%s", event ? " with event " : "",
                                    event ? event : "");
                goto out;
        }
        {
                const struct fp_perf_config *cfg = fp_target_config(first);
                char line[256];
                fp_pprof_set_period(p, types[1], units[1],
                                    (int64_t)(cfg->freq ? 1 : cfg->period));
                fp_pprof_set_time(p, (int64_t)t_start,
                                  (int64_t)(now_ns(CLOCK_REALTIME) - t_start));
                snprintf(line, sizeof(line), "fleetprof-agent %s: %zu process%s", FP_VERSION,
                         n_selected, n_selected == 1 ? "" : "es");
                fp_pprof_add_comment(p, line);
                if (n_skipped) {
                        snprintf(line, sizeof(line),
                                 "%zu process%s with other sample types left out: use --event",
                                 n_skipped, n_skipped == 1 ? "" : "es");
                        fp_pprof_add_comment(p, line);
                }
        }
        if (strcmp(format, "pprof") == 0) {
                uint8_t *buf;
                size_t len;
                e = fp_pprof_encode(p, 1, &buf, &len);
                if (e < 0) {
                        reply_error(r, "cannot encode the profile: %s", strerror(-e));
                        goto out;
                }
                fwrite(buf, 1, len, r->out);
                free(buf);
        } else if (strcmp(format, "top") == 0) {
                e = fp_pprof_write_top(p, 1, 0, r->out);
        } else {
                e = fp_pprof_write_folded(p, 0, r->out);
        }
        if (e < 0)
                reply_error(r, "cannot write the profile: %s", strerror(-e));
out:
        fp_pprof_free(p);
}

static void client_free(struct client *c)
{
        bufferevent_free(c->bev);
        free(c);
}

static void on_client_write(struct bufferevent *bev, void *arg)
{
        struct client *c = arg;
        if (c->answered && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                client_free(c);
}

static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
        (void)bev;
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
                client_free(arg);
}

/* Frames and queues the reply, then frees it. */
static void send_reply(struct client *c, struct reply *r)
{
        struct evbuffer *out = bufferevent_get_output(c->bev);
        char *status = NULL;
        uint8_t len[4];

        fclose(r->out);
        r->out = NULL;
        if (r->status) {
                /* One line: the status may not break the framing. */
                for (char *p = r->status; *p; p++)
                        if (*p == '\n')
                                *p = ' ';
                if (asprintf(&status, "error %s\n", r->status) < 0)
                        status = NULL;
                r->body_len = 0;
        }
        const char *line = status ? status : (r->status ? "error out of memory\n" : "ok\n");
        size_t total = strlen(line) + r->body_len;
        if (total > FP_CTL_MAX_RESPONSE) {
                line = "error the response is too large\n";
                total = strlen(line);
                r->body_len = 0;
        }
        fp_ctl_put_length(len, (uint32_t)total);
        evbuffer_add(out, len, sizeof(len));
        evbuffer_add(out, line, strlen(line));
        if (r->body_len)
                evbuffer_add(out, r->body, r->body_len);
        free(status);
        free(r->status);
        free(r->body);
        c->answered = true;
        bufferevent_disable(c->bev, EV_READ);
}

static void handle_request(struct client *c, const uint8_t *payload, size_t len)
{
        struct fp_server *s = c->server;
        struct fp_ctl_request q;
        struct reply r = {0};

        r.out = open_memstream(&r.body, &r.body_len);
        if (!r.out) {
                bufferevent_free(c->bev);
                free(c);
                return;
        }
        if (fp_ctl_request_parse(payload, len, &q) < 0) {
                reply_error(&r, "malformed request");
                send_reply(c, &r);
                return;
        }
        const char *cmd = fp_ctl_request_get(&q, "cmd");
        if (strcmp(cmd, "start") == 0)
                cmd_start(s, c, &q, &r);
        else if (strcmp(cmd, "stop") == 0)
                cmd_stop(s, c, &q, &r);
        else if (strcmp(cmd, "status") == 0)
                cmd_status(s, c, &q, &r);
        else if (strcmp(cmd, "dump") == 0)
                cmd_dump(s, c, &q, &r);
        else
                reply_error(&r, "unknown command '%s'", cmd);
        fp_ctl_request_done(&q);
        send_reply(c, &r);
}

static void on_client_read(struct bufferevent *bev, void *arg)
{
        struct client *c = arg;
        struct evbuffer *in = bufferevent_get_input(bev);
        uint8_t hdr[4];

        if (c->answered || evbuffer_get_length(in) < sizeof(hdr))
                return;
        evbuffer_copyout(in, hdr, sizeof(hdr));
        uint32_t len = fp_ctl_get_length(hdr);
        if (len > FP_CTL_MAX_REQUEST) {
                struct reply r = {0};
                r.out = open_memstream(&r.body, &r.body_len);
                if (!r.out) {
                        client_free(c);
                        return;
                }
                reply_error(&r, "request too large");
                send_reply(c, &r);
                return;
        }
        if (evbuffer_get_length(in) < sizeof(hdr) + len)
                return;
        uint8_t *payload = evbuffer_pullup(in, (ev_ssize_t)(sizeof(hdr) + len));
        if (!payload) {
                client_free(c);
                return;
        }
        handle_request(c, payload + sizeof(hdr), len);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *addr,
                      int socklen, void *arg)
{
        struct fp_server *s = arg;
        struct client *c = calloc(1, sizeof(*c));
        socklen_t cl = sizeof(c ? c->cred : (struct ucred){0});
        (void)l;
        (void)addr;
        (void)socklen;

        if (!c) {
                close(fd);
                return;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &cl) < 0) {
                close(fd);
                free(c);
                return;
        }
        c->server = s;
        c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev) {
                close(fd);
                free(c);
                return;
        }
        bufferevent_setcb(c->bev, on_client_read, on_client_write, on_client_event, c);
        struct timeval tv = {.tv_sec = 30};
        bufferevent_set_timeouts(c->bev, &tv, NULL);
        bufferevent_enable(c->bev, EV_READ);
}

/* Whether an agent answers on path. */
static bool socket_alive(const struct sockaddr_un *sa)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool alive;
        if (fd < 0)
                return false;
        alive = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
        close(fd);
        return alive;
}

int fp_server_new(struct event_base *base, const char *socket_path, struct fp_server **ret,
                  char *err, size_t err_len)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct fp_server *s;

        if (strlen(socket_path) >= sizeof(sa.sun_path)) {
                snprintf(err, err_len, "socket path too long: %s", socket_path);
                return -ENAMETOOLONG;
        }
        strcpy(sa.sun_path, socket_path);
        if (socket_alive(&sa)) {
                snprintf(err, err_len, "another agent is already listening on %s", socket_path);
                return -EADDRINUSE;
        }
        (void)unlink(socket_path);

        s = calloc(1, sizeof(*s));
        if (!s) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        s->base = base;
        s->start_ns = now_ns(CLOCK_MONOTONIC);
        s->socket_path = strdup(socket_path);
        s->cache = fp_symcache_new();
        if (!s->socket_path || !s->cache) {
                snprintf(err, err_len, "out of memory");
                fp_server_free(s);
                return -ENOMEM;
        }
        mode_t old = umask(0111); /* 0666: every user may connect; SO_PEERCRED decides */
        s->listener = evconnlistener_new_bind(base, on_accept, s,
                                              LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
                                              (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        umask(old);
        if (!s->listener) {
                snprintf(err, err_len, "cannot listen on %s: %s", socket_path, strerror(e));
                free(s->socket_path);
                s->socket_path = NULL; /* not ours to unlink */
                fp_server_free(s);
                return -e;
        }
        *ret = s;
        return 0;
}

void fp_server_free(struct fp_server *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n_targets; i++)
                fp_target_free(s->targets[i].t);
        free(s->targets);
        if (s->listener)
                evconnlistener_free(s->listener);
        if (s->socket_path)
                (void)unlink(s->socket_path);
        free(s->socket_path);
        fp_symcache_free(s->cache);
        free(s);
}
