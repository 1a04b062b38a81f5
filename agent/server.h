/* SPDX-License-Identifier: MIT */
/*
 * The agent's control server: the Unix socket agentctl talks to, the list
 * of targets, the time buckets they are closed into, and the commands
 * (start, stop, status, dump).
 *
 * Every --bucket seconds (aligned to the wall clock) each target's open
 * bucket is closed into one batch and handed to the store's writer
 * thread; dumps merge the store's buckets with the open ones. At start the
 * server resumes the targets the store says were being profiled, when the
 * same processes (pid and start time) still run.
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct fp_server;

struct fp_server_options {
        const char *socket_path;
        const char *store_path; /* NULL: no store, samples live in memory only */
        uint64_t store_max_bytes;
        unsigned bucket_seconds;
        const char *collector_url; /* NULL: no uploads */
        const char *token_file;
        const char *ca_file;
        unsigned upload_interval;
        bool no_bpf; /* --no-bpf: track threads with the perf FORK-record fallback */
};

/*
 * Opens the store (logging one line to stderr when it had to be moved
 * aside or cannot be used: the agent then keeps sampling without it),
 * resumes stored targets, and listens on the socket (replacing a stale
 * socket file, refusing when another agent answers there). On failure
 * returns -errno and writes one line into err.
 */
int fp_server_new(struct event_base *base, const struct fp_server_options *opt,
                  struct fp_server **ret, char *err, size_t err_len);
/*
 * Closes every open bucket into the store (targets stay marked active, so
 * a restarted agent resumes them), waits for the writer, stops every
 * target, closes the socket and removes its file. Accepts NULL.
 */
void fp_server_free(struct fp_server *s);
