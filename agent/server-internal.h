/* SPDX-License-Identifier: MIT */
/*
 * What server.c (socket, clients, buckets, the store) and commands.c
 * (start, stop, status, dump) share. Not for other modules.
 */
#pragma once

#include "ctl.h"
#include "util.h"
#include "perf.h"
#include "server.h"
#include "target.h"
#include "tracker.h"
#include "upload.h"
#include "writer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

struct agent_target {
        struct fp_target *t;
        uid_t owner;
        bool final_written; /* exited and its last bucket queued: nothing more to write */
};

struct fp_server {
        struct event_base *base;
        struct fp_symcache *cache;
        struct evconnlistener *listener;
        struct fp_server_options opt;
        char *socket_path;
        struct agent_target *targets;
        size_t n_targets, cap_targets;
        uint64_t start_ns;

        /* The store and its buckets. */
        struct fp_writer *writer;
        struct event *ev_bucket;
        int64_t bucket_start_ns; /* CLOCK_REALTIME start of the open bucket */
        uint64_t buckets_closed, buckets_failed;
        bool have_stats;
        struct fp_store_stats stats;  /* after the last write */
        struct fp_writer_drop *drops; /* stored drop totals after the last write */
        size_t n_drops;
        char store_error[256];
        struct client *clients; /* connected, for the shutdown */
        struct fp_uploader *uploader;

        /* Thread tracking: the BPF tracker, or NULL and why (the fallback is in use). */
        struct fp_tracker *tracker;
        char tracker_reason[256];
        struct event *ev_children; /* starts the children the fallback reported */
        struct {
                pid_t pid, parent;
        } pending_children[64];
        size_t n_pending_children;
        uint64_t children_not_followed; /* the pending list was full */
};

/* A response being built: status line and body. */
struct reply {
        char *status; /* NULL means ok */
        char *body;
        size_t body_len;
        FILE *out; /* open_memstream on body */
};

struct client {
        struct client *next, *prev;
        struct fp_server *server;
        struct bufferevent *bev;
        struct ucred cred;
        bool answered;
        bool waiting; /* a query for it is with the writer */
        bool gone;    /* disconnected while waiting: freed when the answer comes */
        char format[16];
        struct reply reply;
};

void reply_error(struct reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frames and queues the client's reply (c->reply), then frees it. */
void send_reply(struct client *c);

struct agent_target *server_find_target(struct fp_server *s, pid_t pid);
bool server_may_see(const struct client *c, const struct agent_target *at);
/*
 * Starts profiling; on failure -errno and one line in err. follow: its
 * child processes are profiled too; parent: the target it was followed
 * from (0: started by a user).
 */
int server_start_target(struct fp_server *s, pid_t pid, const struct fp_perf_config *cfg,
                        uid_t owner, bool follow, pid_t parent, struct fp_target **ret, char *err,
                        size_t err_len);
/* The thread tracker in use: "bpf" or "perf-fork" (the fallback). */
const char *server_tracker_name(const struct fp_server *s);
/* Handles the tracker's pending records now, so status and dumps are current. */
void server_poll_tracker(struct fp_server *s);
/* Writes the target's open bucket (active or not) and forgets it. */
void server_stop_target(struct fp_server *s, struct agent_target *at);
/* Hands a dump query to the writer; the reply is sent when it is done. */
int server_submit_dump(struct fp_server *s, struct client *c, const struct fp_store_filter *f,
                       struct fp_pprof *p);

void cmd_start(struct fp_server *s, struct client *c, const struct fp_ctl_request *q);
void cmd_stop(struct fp_server *s, struct client *c, const struct fp_ctl_request *q);
void cmd_status(struct fp_server *s, struct client *c, const struct fp_ctl_request *q);
void cmd_dump(struct fp_server *s, struct client *c, const struct fp_ctl_request *q);
void cmd_flush(struct fp_server *s, struct client *c, const struct fp_ctl_request *q);
/* Closes every open bucket into the store now (active ones stay active). */
void server_close_buckets(struct fp_server *s);
/* Answers a client that waited (dump, flush), or frees it if it hung up. */
void server_answer_waiting(struct client *c);
/* Writes the finished profile of a dump in the client's format into its reply. */
void dump_finish(struct client *c, struct fp_pprof *p);

int parse_u64(const char *s, uint64_t max, uint64_t *ret);
int parse_pid(const char *s, pid_t *ret);
int proc_owner(pid_t pid, uid_t *ret);
/* Parses fp_target_config_string()'s text back; -EINVAL when malformed. */
int parse_config_string(const char *s, struct fp_perf_config *cfg);
/* Fills the ring size and defaults of a config whose event and rate are set. */
void config_finish(struct fp_perf_config *cfg);
