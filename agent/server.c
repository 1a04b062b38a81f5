/* SPDX-License-Identifier: MIT */
/*
 * The agent's control server; see server.h. This file holds the socket
 * and its clients, the targets' life cycle and the buckets; commands.c
 * holds what each command does.
 *
 * Each accepted connection is a bufferevent that collects one framed
 * request (ctl.h), runs it on the loop thread, queues the framed response
 * and frees itself once the response has been written. A dump is answered
 * later, when the writer thread has added the store's part: the client
 * waits (and, should it hang up meanwhile, is freed when the answer comes).
 */
#include "server-internal.h"
#include "log.h"
#include "pprof.h"
#include "store.h"
#include "symbols.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_QUEUE_BYTES (256u << 20) /* closed buckets waiting for the disk */

void reply_error(struct reply *r, const char *fmt, ...)
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

int parse_u64(const char *s, uint64_t max, uint64_t *ret)
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

int parse_pid(const char *s, pid_t *ret)
{
        uint64_t v;
        int r = parse_u64(s, INT_MAX, &v);
        if (r == 0)
                *ret = (pid_t)v;
        return r;
}

int proc_owner(pid_t pid, uid_t *ret)
{
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/proc/%d", (int)pid);
        if (stat(path, &st) < 0)
                return -errno;
        *ret = st.st_uid;
        return 0;
}

void config_finish(struct fp_perf_config *cfg)
{
        uint64_t hz = cfg->freq;
        if (!hz)
                hz = fp_perf_event_is_clock(&cfg->event) && cfg->period
                         ? 1000000000ULL / cfg->period
                         : 1000;
        cfg->count_kernel = true;
        cfg->ring_pages = fp_perf_ring_pages_for(hz);
}

int parse_config_string(const char *s, struct fp_perf_config *cfg)
{
        char ev[FP_PERF_EVENT_LIST_MAX];
        unsigned long long freq, period;
        int kernel;
        struct fp_perf_config c = {0};

        static_assert(FP_PERF_EVENT_LIST_MAX == 256, "the %255s below");
        if (sscanf(s, "event=%255s freq=%llu period=%llu kernel=%d", ev, &freq, &period, &kernel) !=
            4)
                return -EINVAL;
        if (fp_perf_event_list_parse(ev, &c, NULL, 0) < 0 || (freq == 0) == (period == 0) ||
            freq > FP_PERF_MAX_FREQ)
                return -EINVAL;
        c.freq = freq;
        c.period = period;
        c.kernel_frames = kernel != 0;
        config_finish(&c);
        *cfg = c;
        return 0;
}

struct agent_target *server_find_target(struct fp_server *s, pid_t pid)
{
        for (size_t i = 0; i < s->n_targets; i++)
                if (fp_target_pid(s->targets[i].t) == pid)
                        return &s->targets[i];
        return NULL;
}

bool server_may_see(const struct client *c, const struct agent_target *at)
{
        return c->cred.uid == 0 || c->cred.uid == at->owner;
}

static void on_fallback_child(void *userdata, struct fp_target *parent, pid_t child);

const char *server_tracker_name(const struct fp_server *s)
{
        return s->tracker ? "bpf" : "perf-fork";
}

int server_start_target(struct fp_server *s, pid_t pid, const struct fp_perf_config *cfg,
                        uid_t owner, bool follow, pid_t parent, struct fp_target **ret, char *err,
                        size_t err_len)
{
        struct fp_target *t;
        bool bpf = false;
        int r;

        if (s->n_targets == s->cap_targets) {
                size_t cap = s->cap_targets ? s->cap_targets * 2 : 8;
                void *p = realloc(s->targets, cap * sizeof(*s->targets));
                if (!p) {
                        snprintf(err, err_len, "out of memory");
                        return -ENOMEM;
                }
                s->targets = p;
                s->cap_targets = cap;
        }
        /* Tracked before its threads are listed, so none born meanwhile is missed. */
        if (s->tracker)
                bpf = fp_tracker_add(s->tracker, pid, follow ? FP_TRACKER_FOLLOW : 0) == 0;
        r = fp_target_start(s->base, s->cache, pid, cfg, &t, err, err_len);
        if (r < 0) {
                if (s->tracker)
                        (void)fp_tracker_remove(s->tracker, pid);
                return r;
        }
        fp_target_set_tracking(t, bpf, follow, parent, on_fallback_child, s);
        s->targets[s->n_targets++] = (struct agent_target){.t = t, .owner = owner};
        *ret = t;
        return 0;
}

/* ---- buckets ---- */

/* Which target of the agent each target index of a batch was. */
struct batch_ctx {
        size_t n;
        struct {
                pid_t pid;
                uint64_t starttime;
                uint32_t idx;
        } t[];
};

/* Charges the samples of a batch that could not be stored to its targets' next buckets. */
static void charge_batch(struct fp_server *s, struct batch_ctx *ctx, struct fp_store_batch *b,
                         const char *reason)
{
        for (size_t i = 0; i < ctx->n; i++) {
                struct agent_target *at = server_find_target(s, ctx->t[i].pid);
                uint64_t n = fp_store_batch_target_count(b, ctx->t[i].idx);
                if (at && fp_target_starttime(at->t) == ctx->t[i].starttime && n)
                        fp_target_charge_drop(at->t, reason, n);
        }
        s->buckets_failed++;
}

/*
 * Closes the open bucket of one target (only != NULL, written with the
 * given active flag) or of all (each active while it runs) into one batch
 * for the writer. Without a store the samples stay in memory.
 */
static void close_buckets(struct fp_server *s, struct agent_target *only, bool active)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        struct fp_store_batch *b;
        struct batch_ctx *ctx;
        size_t n = only ? 1 : s->n_targets;

        if (!s->writer || n == 0)
                return;
        b = fp_store_batch_new(s->bucket_start_ns,
                               now > s->bucket_start_ns ? now - s->bucket_start_ns : 1);
        ctx = calloc(1, sizeof(*ctx) + n * sizeof(ctx->t[0]));
        if (!b || !ctx) {
                fp_store_batch_free(b);
                free(ctx);
                fp_log(LOG_ERR, "Failed to close a bucket: out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                struct agent_target *at = only ? only : &s->targets[i];
                struct fp_target_stats st;
                fp_target_stats(at->t, &st);
                if (at->final_written)
                        continue;
                bool running = st.state == FP_TARGET_RUNNING;
                int r = fp_target_fill_batch(at->t, b, only ? active : running);
                if (r < 0) {
                        fp_log(LOG_ERR, "Failed to close the bucket of %d: %s",
                                (int)fp_target_pid(at->t), strerror(-r));
                        continue;
                }
                ctx->t[ctx->n].pid = fp_target_pid(at->t);
                ctx->t[ctx->n].starttime = fp_target_starttime(at->t);
                ctx->t[ctx->n].idx = (uint32_t)r;
                ctx->n++;
                if (!running)
                        at->final_written = true;
        }
        if (!only)
                s->bucket_start_ns = now;
        if (ctx->n == 0) {
                fp_store_batch_free(b);
                free(ctx);
                return;
        }
        int r = fp_writer_submit_batch(s->writer, b, ctx);
        if (r < 0) {
                charge_batch(s, ctx, b, "queue_full");
                fp_store_batch_free(b);
                free(ctx);
        }
}

/* Seconds to the next multiple of the bucket length on the wall clock. */
static void arm_bucket_timer(struct fp_server *s)
{
        uint64_t len = (uint64_t)s->opt.bucket_seconds * 1000000000ULL;
        uint64_t now = fp_now_ns(CLOCK_REALTIME);
        uint64_t next = (now / len + 1) * len;
        struct timeval tv = {.tv_sec = (time_t)((next - now) / 1000000000ULL),
                             .tv_usec = (suseconds_t)((next - now) % 1000000000ULL / 1000)};
        event_add(s->ev_bucket, &tv);
}

static void on_bucket(evutil_socket_t fd, short what, void *arg)
{
        struct fp_server *s = arg;
        (void)fd;
        (void)what;
        close_buckets(s, NULL, true);
        arm_bucket_timer(s);
}

static void client_free(struct client *c);

static void on_writer_done(void *userdata, const struct fp_writer_result *r)
{
        struct fp_server *s = userdata;

        if (r->kind == FP_WRITER_CALL) {
                /* After a call (the uploader's): only the statistics are news. */
                if (r->have_stats) {
                        s->have_stats = true;
                        s->stats = r->stats;
                }
                return;
        }
        if (r->kind == FP_WRITER_QUERY) {
                struct client *c = r->cookie;
                if (r->error < 0 && r->error != -ENODEV)
                        reply_error(&c->reply, "cannot read the store: %s", r->message);
                else if (r->error == -ENODEV)
                        fp_pprof_add_comment(r->pprof, "the store is unavailable: only the open "
                                                       "bucket is included");
                if (!c->gone && !c->reply.status)
                        dump_finish(c, r->pprof);
                fp_pprof_free(r->pprof);
                server_answer_waiting(c);
                return;
        }

        struct batch_ctx *ctx = r->cookie;
        if (r->message[0] && r->error == 0)
                fp_log(LOG_WARNING, "%s", r->message); /* store moved aside */
        if (r->error < 0) {
                if (strcmp(s->store_error, r->message) != 0)
                        fp_log(LOG_ERR, "Failed to write a bucket to '%s': %s",
                                s->opt.store_path, r->message);
                snprintf(s->store_error, sizeof(s->store_error), "%s", r->message);
                charge_batch(s, ctx, r->batch, "store_write_failed");
        } else {
                s->store_error[0] = 0;
                s->buckets_closed++;
        }
        if (r->have_stats) {
                s->have_stats = true;
                s->stats = r->stats;
        }
        if (r->have_stats) {
                /* Replace the drop totals snapshot (n_drops may be 0). */
                struct fp_writer_drop *copy = NULL;
                if (r->n_drops && (copy = malloc(r->n_drops * sizeof(*copy))))
                        memcpy(copy, r->drops, r->n_drops * sizeof(*copy));
                if (copy || !r->n_drops) {
                        free(s->drops);
                        s->drops = copy;
                        s->n_drops = r->n_drops;
                }
        }
        fp_store_batch_free(r->batch);
        free(ctx);
}

void server_answer_waiting(struct client *c)
{
        c->waiting = false;
        if (c->gone)
                client_free(c);
        else
                send_reply(c);
}

void server_close_buckets(struct fp_server *s)
{
        close_buckets(s, NULL, true);
}

/* ---- thread tracking ---- */

/*
 * Profiles child, just forked by the followed target parent, as a target
 * of its own with the parent's events and rate, following its children
 * in turn. A child already gone is not worth a log line; any other
 * failure is.
 */
static void follow_child(struct fp_server *s, pid_t child, pid_t parent)
{
        struct agent_target *pat = server_find_target(s, parent);
        struct agent_target *old = server_find_target(s, child);
        struct fp_target *t;
        char err[512];
        uid_t owner;

        if (!pat || !fp_target_follows_children(pat->t)) {
                if (s->tracker)
                        (void)fp_tracker_remove(s->tracker, child);
                return;
        }
        if (old) {
                struct fp_target_stats st;
                fp_target_stats(old->t, &st);
                if (st.state == FP_TARGET_RUNNING)
                        return;             /* already profiled */
                server_stop_target(s, old); /* an exited target under a reused PID */
                pat = server_find_target(s, parent);
                if (!pat)
                        return;
        }
        owner = pat->owner;
        (void)proc_owner(child, &owner);
        struct fp_perf_config cfg = *fp_target_config(pat->t);
        int r = server_start_target(s, child, &cfg, owner, true, parent, &t, err, sizeof(err));
        if (r < 0 && r != -ESRCH)
                fp_log(LOG_ERR, "Failed to follow child %d of %d: %s",
                        (int)child, (int)parent, err);
}

static void on_tracker_event(void *userdata, const struct fp_tracker_event *e)
{
        struct fp_server *s = userdata;
        struct agent_target *at;

        switch (e->kind) {
        case FP_TRACKER_THREAD_NEW:
                if ((at = server_find_target(s, (pid_t)e->tgid)))
                        (void)fp_target_thread_born(at->t, (pid_t)e->tid, e->time_ns);
                break;
        case FP_TRACKER_THREAD_EXIT:
                if ((at = server_find_target(s, (pid_t)e->tgid)))
                        fp_target_thread_exited(at->t, (pid_t)e->tid);
                break;
        case FP_TRACKER_CHILD_NEW:
                follow_child(s, (pid_t)e->tgid, (pid_t)e->parent_tgid);
                break;
        default:
                break;
        }
}

/*
 * The fallback reports a child from inside a ring drain, while a caller
 * may hold pointers into s->targets: start it from the loop instead.
 */
static void on_fallback_child(void *userdata, struct fp_target *parent, pid_t child)
{
        struct fp_server *s = userdata;

        if (s->n_pending_children == sizeof(s->pending_children) / sizeof(s->pending_children[0])) {
                s->children_not_followed++;
                return;
        }
        s->pending_children[s->n_pending_children].pid = child;
        s->pending_children[s->n_pending_children++].parent = fp_target_pid(parent);
        event_active(s->ev_children, EV_TIMEOUT, 0);
}

static void on_children(evutil_socket_t fd, short what, void *arg)
{
        struct fp_server *s = arg;
        (void)fd;
        (void)what;

        for (size_t i = 0; i < s->n_pending_children; i++)
                follow_child(s, s->pending_children[i].pid, s->pending_children[i].parent);
        s->n_pending_children = 0;
}

/* Loads the BPF tracker unless told not to; says in one line which tracker is used and why. */
static void start_tracker(struct fp_server *s)
{
        int r;

        if (s->opt.no_bpf) {
                snprintf(s->tracker_reason, sizeof(s->tracker_reason), "disabled by --no-bpf");
        } else {
                r = fp_tracker_new(s->base, on_tracker_event, s, &s->tracker, s->tracker_reason,
                                   sizeof(s->tracker_reason));
                if (r == 0) {
                        fp_log(LOG_INFO, "thread tracker: bpf");
                        return;
                }
                s->tracker = NULL;
        }
        fp_log(LOG_INFO, "thread tracker: perf-fork fallback (%s)",
                s->tracker_reason);
}

void server_poll_tracker(struct fp_server *s)
{
        if (s->tracker)
                fp_tracker_poll(s->tracker);
}

void server_stop_target(struct fp_server *s, struct agent_target *at)
{
        if (s->tracker)
                (void)fp_tracker_remove(s->tracker, fp_target_pid(at->t));
        close_buckets(s, at, false);
        fp_target_free(at->t);
        *at = s->targets[--s->n_targets];
}

int server_submit_dump(struct fp_server *s, struct client *c, const struct fp_store_filter *f,
                       struct fp_pprof *p)
{
        if (!s->writer)
                return -ENODEV;
        int r = fp_writer_submit_query(s->writer, f, p, c);
        if (r == 0)
                c->waiting = true;
        return r;
}

/* ---- clients ---- */

static void client_unlink(struct client *c)
{
        struct fp_server *s = c->server;
        if (c->prev)
                c->prev->next = c->next;
        else if (s->clients == c)
                s->clients = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
}

static void client_free(struct client *c)
{
        if (c->bev)
                bufferevent_free(c->bev);
        c->bev = NULL;
        client_unlink(c);
        if (c->waiting) {
                c->gone = true; /* the writer's answer frees it */
                return;
        }
        if (c->reply.out)
                fclose(c->reply.out);
        free(c->reply.body);
        free(c->reply.status);
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
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
                client_free(arg);
}

void send_reply(struct client *c)
{
        struct reply *r = &c->reply;
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
        *r = (struct reply){0};
        c->answered = true;
        bufferevent_disable(c->bev, EV_READ);
}

static void handle_request(struct client *c, const uint8_t *payload, size_t len)
{
        struct fp_server *s = c->server;
        struct fp_ctl_request q;

        if (fp_ctl_request_parse(payload, len, &q) < 0) {
                reply_error(&c->reply, "malformed request");
                send_reply(c);
                return;
        }
        const char *cmd = fp_ctl_request_get(&q, "cmd");
        if (strcmp(cmd, "start") == 0)
                cmd_start(s, c, &q);
        else if (strcmp(cmd, "stop") == 0)
                cmd_stop(s, c, &q);
        else if (strcmp(cmd, "status") == 0)
                cmd_status(s, c, &q);
        else if (strcmp(cmd, "dump") == 0)
                cmd_dump(s, c, &q);
        else if (strcmp(cmd, "flush") == 0)
                cmd_flush(s, c, &q);
        else
                reply_error(&c->reply, "unknown command '%s'", cmd);
        fp_ctl_request_done(&q);
        if (!c->waiting)
                send_reply(c);
}

static void on_client_read(struct bufferevent *bev, void *arg)
{
        struct client *c = arg;
        struct evbuffer *in = bufferevent_get_input(bev);
        uint8_t hdr[4];

        if (c->answered || c->waiting || evbuffer_get_length(in) < sizeof(hdr))
                return;
        evbuffer_copyout(in, hdr, sizeof(hdr));
        uint32_t len = fp_ctl_get_length(hdr);
        if (len > FP_CTL_MAX_REQUEST) {
                reply_error(&c->reply, "request too large");
                send_reply(c);
                return;
        }
        if (evbuffer_get_length(in) < sizeof(hdr) + len)
                return;
        uint8_t *payload = evbuffer_pullup(in, (ev_ssize_t)(sizeof(hdr) + len));
        if (!payload) {
                client_free(c);
                return;
        }
        bufferevent_disable(bev, EV_READ);
        handle_request(c, payload + sizeof(hdr), len);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *addr,
                      int socklen, void *arg)
{
        struct fp_server *s = arg;
        struct client *c = calloc(1, sizeof(*c));
        socklen_t cl = sizeof(struct ucred);
        (void)l;
        (void)addr;
        (void)socklen;

        if (!c) {
                close(fd);
                return;
        }
        c->reply.out = open_memstream(&c->reply.body, &c->reply.body_len);
        if (!c->reply.out || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &cl) < 0) {
                if (c->reply.out)
                        fclose(c->reply.out);
                free(c->reply.body);
                close(fd);
                free(c);
                return;
        }
        c->server = s;
        c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev) {
                fclose(c->reply.out);
                free(c->reply.body);
                close(fd);
                free(c);
                return;
        }
        c->next = s->clients;
        if (s->clients)
                s->clients->prev = c;
        s->clients = c;
        bufferevent_setcb(c->bev, on_client_read, on_client_write, on_client_event, c);
        struct timeval tv = {.tv_sec = 30};
        bufferevent_set_timeouts(c->bev, &tv, NULL);
        bufferevent_enable(c->bev, EV_READ);
}

/* ---- life cycle ---- */

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

static int resume_one(void *userdata, const struct fp_store_target_info *ti)
{
        struct fp_server *s = userdata;
        struct fp_perf_config cfg;
        struct fp_target *t;
        char err[256];
        uid_t owner = 0;

        if (!ti->active || server_find_target(s, ti->pid))
                return 0;
        if (fp_proc_stat(ti->pid, NULL) != ti->starttime || proc_owner(ti->pid, &owner) < 0)
                return 0; /* that process is gone (or the pid is another's now) */
        if (parse_config_string(ti->config, &cfg) < 0) {
                fp_log(LOG_ERR, "Failed to resume %d: unreadable config '%s'",
                        (int)ti->pid, ti->config);
                return 0;
        }
        bool follow = strstr(ti->config, " follow=1") != NULL;
        if (server_start_target(s, ti->pid, &cfg, owner, follow, 0, &t, err, sizeof(err)) < 0) {
                fp_log(LOG_ERR, "Failed to resume %d: %s", (int)ti->pid, err);
                return 0;
        }
        fp_log(LOG_INFO, "resumed profiling %d (%s) with %s", (int)ti->pid,
                fp_target_comm(t), cfg.event.name);
        return 0;
}

/* Opens the store, resumes its targets, and starts the writer. Never fatal. */
static void open_store(struct fp_server *s)
{
        struct fp_store *store = NULL;
        char err[256] = "";
        int r;

        if (!s->opt.store_path)
                return;
        r = fp_store_open(s->opt.store_path, s->opt.store_max_bytes, &store, err, sizeof(err));
        if (r == FP_STORE_RECOVERED)
                fp_log(LOG_WARNING, "%s", err);
        if (r < 0) {
                fp_log(LOG_ERR, "Failed to open the store '%s': %s (sampling goes on; "
                        "buckets are counted as lost until it can be opened)",
                        s->opt.store_path, err);
                snprintf(s->store_error, sizeof(s->store_error), "%s", err);
                store = NULL;
        } else {
                (void)fp_store_list_targets(store, NULL, resume_one, s);
        }
        r = fp_writer_new(s->base, store, s->opt.store_path, s->opt.store_max_bytes,
                          MAX_QUEUE_BYTES, on_writer_done, s, &s->writer);
        if (r < 0) {
                fp_log(LOG_ERR, "Failed to start the store writer: %s",
                        strerror(-r));
                fp_store_close(store);
        }
}

static void on_upload_rejected(void *userdata, pid_t pid, uint64_t starttime, uint64_t samples)
{
        struct fp_server *s = userdata;
        struct agent_target *at = server_find_target(s, pid);
        if (at && fp_target_starttime(at->t) == starttime)
                fp_target_charge_drop(at->t, "upload_rejected", samples);
}

int fp_server_new(struct event_base *base, const struct fp_server_options *opt,
                  struct fp_server **ret, char *err, size_t err_len)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct fp_server *s;

        if (strlen(opt->socket_path) >= sizeof(sa.sun_path)) {
                snprintf(err, err_len, "socket path too long: %s", opt->socket_path);
                return -ENAMETOOLONG;
        }
        strcpy(sa.sun_path, opt->socket_path);
        if (socket_alive(&sa)) {
                snprintf(err, err_len, "another agent is already listening on %s",
                         opt->socket_path);
                return -EADDRINUSE;
        }
        (void)unlink(opt->socket_path);

        s = calloc(1, sizeof(*s));
        if (!s) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        s->base = base;
        s->opt = *opt;
        if (!s->opt.bucket_seconds)
                s->opt.bucket_seconds = 10;
        s->start_ns = fp_now_ns(CLOCK_MONOTONIC);
        s->bucket_start_ns = (int64_t)fp_now_ns(CLOCK_REALTIME);
        s->cache = fp_symcache_new();
        s->ev_bucket = event_new(base, -1, 0, on_bucket, s);
        s->ev_children = event_new(base, -1, 0, on_children, s);
        if (!s->cache || !s->ev_bucket || !s->ev_children) {
                snprintf(err, err_len, "out of memory");
                fp_server_free(s);
                return -ENOMEM;
        }
        start_tracker(s); /* before the store resumes targets */
        open_store(s);
        arm_bucket_timer(s);
        if (opt->collector_url) {
                struct fp_upload_options uo = {.url = opt->collector_url,
                                               .token_file = opt->token_file,
                                               .ca_file = opt->ca_file,
                                               .interval_seconds = opt->upload_interval};
                int r;
                if (!s->writer) {
                        snprintf(err, err_len, "uploads need the store (--store)");
                        fp_server_free(s);
                        return -EINVAL;
                }
                r = fp_uploader_new(base, s->writer, &uo, on_upload_rejected, s, &s->uploader, err,
                                    err_len);
                if (r < 0) {
                        fp_server_free(s);
                        return r;
                }
        }

        mode_t old = umask(0111); /* 0666: every user may connect; SO_PEERCRED decides */
        s->listener = evconnlistener_new_bind(base, on_accept, s,
                                              LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
                                              (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        umask(old);
        if (!s->listener) {
                snprintf(err, err_len, "cannot listen on %s: %s", opt->socket_path, strerror(e));
                fp_server_free(s);
                return -e;
        }
        s->socket_path = strdup(opt->socket_path);
        if (!s->socket_path) {
                snprintf(err, err_len, "out of memory");
                fp_server_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

void fp_server_free(struct fp_server *s)
{
        if (!s)
                return;
        if (s->listener)
                evconnlistener_free(s->listener);
        if (s->socket_path)
                (void)unlink(s->socket_path);
        fp_uploader_close(s->uploader);
        close_buckets(s, NULL, true);
        fp_writer_free(s->writer); /* writes what is queued, answers waiting dumps */
        fp_uploader_free(s->uploader);
        while (s->clients) {
                s->clients->waiting = false;
                client_free(s->clients);
        }
        for (size_t i = 0; i < s->n_targets; i++)
                fp_target_free(s->targets[i].t);
        free(s->targets);
        fp_tracker_free(s->tracker);
        if (s->ev_children)
                event_free(s->ev_children);
        if (s->ev_bucket)
                event_free(s->ev_bucket);
        free(s->socket_path);
        free(s->drops);
        fp_symcache_free(s->cache);
        free(s);
}
