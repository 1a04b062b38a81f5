/* SPDX-License-Identifier: MIT */
/*
 * Grafana Pyroscope's push protocols, into the collector's store:
 *
 *   POST /ingest?name=APP[.TYPE]{k=v,...}&from=S&until=S[&format=pprof|folded]
 *                [&sampleRate=HZ][&spyName=..][&units=..][&aggregationType=..]
 *        body: a profile.proto (gzip or not), or folded text ("a;b;c 12"
 *        lines, root first), as Pyroscope's SDKs send it
 *   POST /push.v1.PusherService/Push   (Connect, application/proto)
 *        body: PushRequest{series: [RawProfileSeries{labels: [LabelPair],
 *        samples: [RawSample{raw_profile, ID}]}]}
 *
 * Both take the collector's write token as a bearer token or as the
 * password of basic authentication (server.c).
 *
 * Labels map onto a series: service_name (or the ingest's APP) is the
 * service, hostname / host.name / host the host (else the client's
 * address), pid / process.pid the pid, process.executable.path (or .name)
 * the executable, container.id the container; every other label but
 * Pyroscope's own (__name__ and the like) is kept in the series' text
 * (its config, as /api/v1/series shows it) and makes a series of its own.
 * A profile's sample types become events: each value type but a
 * "samples" count (which is every event's count) is an event of that
 * name: cpu, wall, inuse_space, alloc_objects... A folded push is one
 * event: its name's TYPE (cpu when none), its values samples at
 * sampleRate (100 Hz) for cpu, else counts of units.
 *
 * Everything is checked as hostile input: sizes, label counts and
 * lengths, the protobuf wire format, the pprof (fp_pprof_decode()), the
 * folded lines. A push is stored whole or not at all; the same push sent
 * twice (the same body and parameters, or the same sample IDs) is stored
 * once.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
struct fp_coll_server;
struct fp_store_batch;

/* POST /ingest (Pyroscope's HTTP ingest API). */
void fp_coll_pyro_ingest(struct fp_coll_server *s, struct evhttp_request *req);
/* POST /push.v1.PusherService/Push (Pyroscope's Connect push API). */
void fp_coll_pyro_push(struct fp_coll_server *s, struct evhttp_request *req);

/* What a body is: Connect's PushRequest (binary or JSON), or an ingest's pprof or folded text. */
enum fp_pyro_body {
        FP_PYRO_CONNECT,
        FP_PYRO_CONNECT_JSON,
        FP_PYRO_PPROF,
        FP_PYRO_FOLDED,
};
/*
 * The decoder the handlers queue, pure (no I/O; the fuzz target's): a
 * body of kind, with the ingest's name parameter (its labels; NULL for
 * Connect), at most max_decompressed bytes once inflated, into a batch
 * (*ret, the caller's) and its sample count. 0, or -errno with one line
 * in err (-EFBIG too large, -ENOMEM, else the body is wrong).
 */
int fp_coll_pyro_decode(enum fp_pyro_body kind, const char *name, const uint8_t *body, size_t len,
                        size_t max_decompressed, struct fp_store_batch **ret, uint64_t *ret_samples,
                        char *err, size_t errlen);
