/* SPDX-License-Identifier: MIT */
/*
 * The upload contract between the agent (agent/keep/upload.c) and the
 * collector (collector/write/ingest.c, protocols/api.c): one module that writes and
 * parses it, so the two sides cannot drift apart.
 *
 *   POST FP_UPLOAD_PATH?host=H&pid=P&starttime=S&comm=C&exe=E&event=EV
 *                      &from=NS&to=NS&agent=VERSION[&drops=R:N,R:N...][&service=NAME]
 *                      [&container=ID][&tier=host]
 *                      [&agent_cpu_ns=N&agent_rss=BYTES&host_cpus=N&cost_from=NS&cost_to=NS]
 *   Idempotency-Key: K   (FP_UPLOAD_KEY_HEADER; 1 to 128 printable ASCII
 *                         characters, the same for every retry of the
 *                         same bucket range of the same series)
 *   body: a gzip-compressed profile.proto with two sample types (the
 *         event's count and value), samples labelled "thread" (tid) and
 *         "thread_name".
 *
 * host, pid, starttime, event, from and to are required; comm, exe, agent,
 * drops and service optional (service is sent only when the process has
 * one: the agent's rule that matched it, so that its successive processes
 * merge; container is the container a host tier's series ran in, its ID
 * as docker ps shows it, so that a container's samples can be found
 * whatever service they are under); agent_cpu_ns, agent_rss and host_cpus say what profiling cost
 * the host over cost_from..cost_to (the agent's CPU time, its largest resident memory, the host's
 * CPUs; all five or none): every upload of one round carries the same, and the collector counts a
 * host's range once); an unknown or repeated parameter is refused (a typo would otherwise lose data
 * silently). drops are the samples the agent could not keep for this series over the range, by
 * reason ([a-z0-9_]).
 *
 * tier=host: a round of a host tier, all its series in one upload (pid 0;
 * pid, starttime, comm and exe name the tier's own series, which takes
 * the drops). Each sample says which series it belongs to with the string
 * labels service, exe, process (comm) and container (when it ran in one);
 * the collector stores each (service, exe, container) as a series of pid
 * 0 and starttime fp_upload_host_series_key(), as the agent does, so
 * series grow with services and executables, not with processes.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_UPLOAD_PATH       "/api/v1/ingest"
#define FP_UPLOAD_KEY_HEADER "Idempotency-Key"
#define FP_UPLOAD_MAX_KEY    128

#define FP_UPLOAD_MAX_DROPS 32 /* distinct drop reasons one upload may carry */
/*
 * In other protocols (the agent's wire.c, the collector's foreign.c) a
 * drop count is a pprof comment "fleetprof.drop.REASON=N" or an OTLP
 * attribute "fleetprof.drop.REASON".
 */
#define FP_UPLOAD_DROP_PREFIX   "fleetprof.drop."
#define FP_UPLOAD_MAX_SERVICE   64 /* characters of a service name */
#define FP_UPLOAD_MAX_CONTAINER 64 /* hex digits of a container ID */

struct fp_upload_drop {
        char reason[64];
        uint64_t count;
};

/* An upload's query parameters. */
struct fp_upload_meta {
        char host[256];
        pid_t pid;
        uint64_t starttime;
        char comm[256];
        char exe[4096];
        char event[128];
        char agent[64];
        char service[FP_UPLOAD_MAX_SERVICE + 1];     /* "": none */
        char container[FP_UPLOAD_MAX_CONTAINER + 1]; /* "": none */
        bool host_tier;                              /* tier=host */
        struct {
                uint64_t agent_cpu_ns, agent_rss_bytes;
                uint32_t host_cpus; /* 0: no cost given */
                int64_t from_ns, to_ns;
        } cost;
        int64_t from_ns, to_ns;
        struct fp_upload_drop drops[FP_UPLOAD_MAX_DROPS];
        size_t n_drops;
};

/*
 * Builds the query string (without '?') of an upload of m, every value
 * percent-encoded; *ret is malloc'd, the caller's. 0 or -ENOMEM.
 */
int fp_upload_encode_query(const struct fp_upload_meta *m, char **ret);

/*
 * Appends "reason:count" to the drops text *text (malloc'd or NULL, comma
 * separated), the form the drops parameter carries. 0 or -ENOMEM.
 */
int fp_upload_drops_append(char **text, const char *reason, uint64_t count);

/*
 * Parses and checks the query string of an ingest request (the part after
 * '?', already split off; NULL is an empty one). host, pid, starttime,
 * event, from and to are required; comm, exe, agent and drops optional;
 * unknown parameters are refused (a typo would otherwise lose data
 * silently). Returns 0, or -EINVAL with one line in err.
 */
int fp_upload_parse_query(const char *query, struct fp_upload_meta *ret, char *err, size_t errlen);

/*
 * Checks a service name: 1 to FP_UPLOAD_MAX_SERVICE letters, digits, '.',
 * '-', '_', '@' or ':' (a systemd unit name fits). 0 or -EINVAL.
 */
int fp_upload_check_service(const char *name);

/*
 * The starttime a host tier's series is stored under (with pid 0): a
 * stable hash of its service, executable and container ("" for none),
 * never 0.
 */
uint64_t fp_upload_host_series_key(const char *service, const char *exe, const char *container);

/* Checks a container ID: 1 to FP_UPLOAD_MAX_CONTAINER lowercase hex digits. 0 or -EINVAL. */
int fp_upload_check_container(const char *id);

/*
 * Checks an Idempotency-Key header value: 1 to 128 printable ASCII
 * characters. 0 or -EINVAL with one line in err.
 */
int fp_upload_check_key(const char *key, char *err, size_t errlen);
