/* SPDX-License-Identifier: MIT */
/*
 * The agent's control socket: the Unix socket agentctl talks to, its
 * clients, the framing of requests and responses (ctl.h), and the table
 * of commands a request's "cmd" selects. It knows nothing of targets:
 * each command is a function of the program's (commands.c) that reads the
 * request and answers through the client API below.
 *
 * Authorisation uses the peer's credentials (SO_PEERCRED), which every
 * command gets with fp_control_cred(). The socket itself is
 * world-connectable (0666) so that users other than root can reach it;
 * commands decide what each may do.
 *
 * A client's life: accepted -> one framed request read (at most
 * FP_CTL_MAX_REQUEST bytes; 30 s to send it) -> its command runs on the
 * loop thread and either answers at once or defers (fp_control_defer())
 * -> the framed response is queued -> freed once written. A deferred
 * client that hangs up is kept until its command calls
 * fp_control_finish(), which then frees it instead of answering.
 * Connections are bounded (control.c: in all, and per user other than
 * root; past that a client gets one error line), and so is the time each
 * write of an answer may take. So is what one user other than root may
 * hold: a command is refused while the user's other connections have
 * FP_CONTROL_MAX_WAITING_PER_USER commands under way, or more than
 * FP_CONTROL_MAX_UNREAD_PER_USER bytes of answers they have not read.
 */
#define FP_CONTROL_MAX_WAITING_PER_USER 2
#define FP_CONTROL_MAX_UNREAD_PER_USER  (4u << 20)
#pragma once

#include "ctl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

struct event_base;
struct fp_control;
struct fp_control_client;

/* A command: name is the request's "cmd"; run answers c (or defers it). */
struct fp_control_command {
        const char *name;
        void (*run)(void *userdata, struct fp_control_client *c, const struct fp_ctl_request *q);
};

/*
 * Listens on path (replacing a stale socket file, refusing with
 * -EADDRINUSE when another agent answers there) and dispatches each
 * request to the command of its name with userdata. cmds must outlive
 * the result. -errno with one line in err.
 */
int fp_control_new(struct event_base *base, const char *path, const struct fp_control_command *cmds,
                   size_t n_cmds, void *userdata, struct fp_control **ret, char *err,
                   size_t err_len);
/*
 * -EADDRINUSE (and one line in err) when an agent already answers on path;
 * a program checks this before it touches its store, then calls
 * fp_control_new() once it is ready to serve (clients then never see a
 * half-started agent).
 */
int fp_control_probe(const char *path, char *err, size_t err_len);
/* Closes the socket, removes its file and frees every client. Accepts NULL. */
void fp_control_free(struct fp_control *ctl);

/* The peer's credentials. */
const struct ucred *fp_control_cred(const struct fp_control_client *c);
/* The body of the answer being built: text, JSON or a profile. */
FILE *fp_control_out(struct fp_control_client *c);
/* Makes the answer one error line (the body is dropped); the last call wins. */
void fp_control_error(struct fp_control_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool fp_control_has_error(const struct fp_control_client *c);
/* The command answers later, with fp_control_finish(). */
void fp_control_defer(struct fp_control_client *c);
/* Sends a deferred answer, or frees the client if it hung up meanwhile. */
void fp_control_finish(struct fp_control_client *c);
/* Whether a deferred client hung up (its answer will go nowhere). */
bool fp_control_gone(const struct fp_control_client *c);
