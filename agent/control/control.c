/* SPDX-License-Identifier: MIT */
/*
 * The agent's control socket, its clients and the command table; see
 * control.h.
 *
 * Each accepted connection is a bufferevent that collects one framed
 * request, runs its command on the loop thread, queues the framed
 * response and frees itself once the response has been written.
 */
#include "control.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/*
 * Bounds on what clients may hold: connections in all and per user other
 * than root (a connection pins its request and its whole answer), and
 * time: 30 s to send a request, 60 s for each write of the answer to
 * progress (a client that asks for a dump and never reads it is dropped,
 * and its answer freed); what a user's connections hold unread and have
 * under way is bounded as control.h says.
 */
#define MAX_CLIENTS          256
#define MAX_CLIENTS_PER_USER 16
#define READ_TIMEOUT_S       30
#define WRITE_TIMEOUT_S      60

struct fp_control_client {
        struct fp_control_client *next, *prev;
        struct fp_control *ctl;
        struct bufferevent *bev;
        struct ucred cred;
        bool answered;
        bool waiting; /* deferred: its command answers later */
        bool gone;    /* hung up while waiting: freed when the answer comes */
        char *status; /* NULL: ok */
        char *body;
        size_t body_len;
        FILE *out; /* open_memstream on body */
};

struct fp_control {
        struct event_base *base;
        struct evconnlistener *listener;
        char *path;
        const struct fp_control_command *cmds;
        size_t n_cmds;
        void *userdata;
        struct fp_control_client *clients;
};

const struct ucred *fp_control_cred(const struct fp_control_client *c)
{
        return &c->cred;
}

FILE *fp_control_out(struct fp_control_client *c)
{
        return c->out;
}

void fp_control_error(struct fp_control_client *c, const char *fmt, ...)
{
        va_list ap;
        free(c->status);
        va_start(ap, fmt);
        if (vasprintf(&c->status, fmt, ap) < 0)
                c->status = strdup("out of memory");
        va_end(ap); /* a NULL status after all that: send_reply says "out of memory" */
}

bool fp_control_has_error(const struct fp_control_client *c)
{
        return c->status != NULL;
}

void fp_control_defer(struct fp_control_client *c)
{
        c->waiting = true;
}

bool fp_control_gone(const struct fp_control_client *c)
{
        return c->gone;
}

static void client_unlink(struct fp_control_client *c)
{
        struct fp_control *ctl = c->ctl;
        if (c->prev)
                c->prev->next = c->next;
        else if (ctl->clients == c)
                ctl->clients = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
}

static void client_free(struct fp_control_client *c)
{
        if (c->bev)
                bufferevent_free(c->bev);
        c->bev = NULL;
        client_unlink(c);
        if (c->waiting) {
                c->gone = true; /* its command's fp_control_finish() frees it */
                return;
        }
        if (c->out)
                fclose(c->out);
        free(c->body);
        free(c->status);
        free(c);
}

static void on_client_write(struct bufferevent *bev, void *arg)
{
        struct fp_control_client *c = arg;
        if (c->answered && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                client_free(c);
}

static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
        (void)bev;
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
                client_free(arg);
}

/* Frames and queues the client's answer, then frees its buffers. */
static void send_reply(struct fp_control_client *c)
{
        struct evbuffer *out = bufferevent_get_output(c->bev);
        char *status = NULL;
        uint8_t len[4];

        fclose(c->out);
        c->out = NULL;
        if (c->status) {
                /* One line: the status may not break the framing. */
                for (char *p = c->status; *p; p++)
                        if (*p == '\n')
                                *p = ' ';
                if (asprintf(&status, "error %s\n", c->status) < 0)
                        status = NULL;
                c->body_len = 0;
        }
        const char *line = status ? status : (c->status ? "error out of memory\n" : "ok\n");
        size_t total = strlen(line) + c->body_len;
        if (total > FP_CTL_MAX_RESPONSE) {
                line = "error the response is too large\n";
                total = strlen(line);
                c->body_len = 0;
        }
        fp_ctl_put_length(len, (uint32_t)total);
        evbuffer_add(out, len, sizeof(len));
        evbuffer_add(out, line, strlen(line));
        if (c->body_len)
                evbuffer_add(out, c->body, c->body_len);
        free(status);
        free(c->status);
        free(c->body);
        c->status = c->body = NULL;
        c->body_len = 0;
        c->answered = true;
        bufferevent_disable(c->bev, EV_READ);
}

void fp_control_finish(struct fp_control_client *c)
{
        c->waiting = false;
        if (c->gone)
                client_free(c);
        else
                send_reply(c);
}

/* Bytes of c's answer its peer has not read: in the agent's buffer and the socket's queue. */
static size_t unread_bytes(const struct fp_control_client *c)
{
        int queued = 0;

        if (!c->bev)
                return 0;
        if (ioctl(bufferevent_getfd(c->bev), SIOCOUTQ, &queued) < 0 || queued < 0)
                queued = 0;
        return evbuffer_get_length(bufferevent_get_output(c->bev)) + (size_t)queued;
}

/* Refuses c's command when its user (not root) holds too much already. */
static bool over_user_budget(struct fp_control_client *c)
{
        size_t unread = 0, waiting = 0;

        if (c->cred.uid == 0)
                return false;
        for (const struct fp_control_client *o = c->ctl->clients; o; o = o->next) {
                if (o == c || o->cred.uid != c->cred.uid)
                        continue;
                waiting += o->waiting;
                if (o->answered)
                        unread += unread_bytes(o);
        }
        if (waiting >= FP_CONTROL_MAX_WAITING_PER_USER) {
                fp_control_error(
                    c, "your user has %zu commands under way: try again when they finish", waiting);
                return true;
        }
        if (unread > FP_CONTROL_MAX_UNREAD_PER_USER) {
                fp_control_error(c,
                                 "your user's earlier answers hold %zu KiB unread: read them first",
                                 unread / 1024);
                return true;
        }
        return false;
}

static void handle_request(struct fp_control_client *c, const uint8_t *payload, size_t len)
{
        struct fp_control *ctl = c->ctl;
        struct fp_ctl_request q;
        size_t i;

        if (over_user_budget(c)) {
                send_reply(c);
                return;
        }
        if (fp_ctl_request_parse(payload, len, &q) < 0) {
                fp_control_error(c, "malformed request");
                send_reply(c);
                return;
        }
        const char *cmd = fp_ctl_request_get(&q, "cmd");
        for (i = 0; i < ctl->n_cmds; i++)
                if (strcmp(cmd, ctl->cmds[i].name) == 0)
                        break;
        if (i < ctl->n_cmds)
                ctl->cmds[i].run(ctl->userdata, c, &q);
        else
                fp_control_error(c, "unknown command '%s'", cmd);
        fp_ctl_request_done(&q);
        if (!c->waiting)
                send_reply(c);
}

static void on_client_read(struct bufferevent *bev, void *arg)
{
        struct fp_control_client *c = arg;
        struct evbuffer *in = bufferevent_get_input(bev);
        uint8_t hdr[4];

        if (c->answered || c->waiting || evbuffer_get_length(in) < sizeof(hdr))
                return;
        evbuffer_copyout(in, hdr, sizeof(hdr));
        uint32_t len = fp_ctl_get_length(hdr);
        if (len > FP_CTL_MAX_REQUEST) {
                fp_control_error(c, "request too large");
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
        struct fp_control *ctl = arg;
        struct fp_control_client *c = calloc(1, sizeof(*c));
        socklen_t cl = sizeof(struct ucred);
        (void)l;
        (void)addr;
        (void)socklen;

        if (!c) {
                close(fd);
                return;
        }
        c->out = open_memstream(&c->body, &c->body_len);
        if (!c->out || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &cl) < 0) {
                if (c->out)
                        fclose(c->out);
                free(c->body);
                close(fd);
                free(c);
                return;
        }
        c->ctl = ctl;
        c->bev = bufferevent_socket_new(ctl->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->bev) {
                fclose(c->out);
                free(c->body);
                close(fd);
                free(c);
                return;
        }
        size_t all = 0, mine = 0;
        for (const struct fp_control_client *o = ctl->clients; o; o = o->next) {
                all++;
                mine += o->cred.uid == c->cred.uid;
        }
        c->next = ctl->clients;
        if (ctl->clients)
                ctl->clients->prev = c;
        ctl->clients = c;
        bufferevent_setcb(c->bev, on_client_read, on_client_write, on_client_event, c);
        struct timeval rtv = {.tv_sec = READ_TIMEOUT_S}, wtv = {.tv_sec = WRITE_TIMEOUT_S};
        bufferevent_set_timeouts(c->bev, &rtv, &wtv);
        if (all >= MAX_CLIENTS || (c->cred.uid != 0 && mine >= MAX_CLIENTS_PER_USER)) {
                fp_control_error(c, "too many connections%s: try again later",
                                 all >= MAX_CLIENTS ? "" : " of your user");
                send_reply(c);
                return;
        }
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

int fp_control_probe(const char *path, char *err, size_t err_len)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        if (strlen(path) >= sizeof(sa.sun_path)) {
                snprintf(err, err_len, "socket path too long: %s", path);
                return -ENAMETOOLONG;
        }
        strcpy(sa.sun_path, path);
        if (socket_alive(&sa)) {
                snprintf(err, err_len, "another agent is already listening on %s", path);
                return -EADDRINUSE;
        }
        return 0;
}

int fp_control_new(struct event_base *base, const char *path, const struct fp_control_command *cmds,
                   size_t n_cmds, void *userdata, struct fp_control **ret, char *err,
                   size_t err_len)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct fp_control *ctl;
        int r = fp_control_probe(path, err, err_len);

        if (r < 0)
                return r;
        strcpy(sa.sun_path, path);
        (void)unlink(path);
        ctl = calloc(1, sizeof(*ctl));
        if (!ctl || !(ctl->path = strdup(path))) {
                free(ctl);
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        ctl->base = base;
        ctl->cmds = cmds;
        ctl->n_cmds = n_cmds;
        ctl->userdata = userdata;

        mode_t old = umask(0111); /* 0666: every user may connect; SO_PEERCRED decides */
        ctl->listener = evconnlistener_new_bind(base, on_accept, ctl,
                                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
                                                (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        umask(old);
        if (!ctl->listener) {
                snprintf(err, err_len, "cannot listen on %s: %s", path, strerror(e));
                free(ctl->path);
                free(ctl);
                return -e;
        }
        *ret = ctl;
        return 0;
}

void fp_control_free(struct fp_control *ctl)
{
        if (!ctl)
                return;
        if (ctl->listener)
                evconnlistener_free(ctl->listener);
        (void)unlink(ctl->path);
        while (ctl->clients) {
                ctl->clients->waiting = false;
                client_free(ctl->clients);
        }
        free(ctl->path);
        free(ctl);
}
