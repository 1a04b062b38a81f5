/* SPDX-License-Identifier: MIT */
/*
 * The agent's control server: the Unix socket agentctl talks to, the list
 * of targets, and the commands (start, stop, status, dump).
 *
 * Authorisation uses the peer's credentials (SO_PEERCRED): root may do
 * anything; another user may start, stop and dump only processes it owns,
 * and sees only those in status. The socket itself is world-connectable
 * (0666) so that such users can reach it at all.
 *
 * A client's bad input is answered with one "error ..." line; nothing a
 * client sends can stop the agent.
 */
#pragma once

#include <stddef.h>

struct event_base;
struct fp_server;

/*
 * Listens on socket_path (replacing a stale socket file, refusing when
 * another agent answers there). On failure returns -errno and writes one
 * line into err.
 */
int fp_server_new(struct event_base *base, const char *socket_path, struct fp_server **ret,
                  char *err, size_t err_len);
/* Stops every target, closes the socket and removes its file. Accepts NULL. */
void fp_server_free(struct fp_server *s);
