/* SPDX-License-Identifier: MIT */
/*
 * What the collector's other protocols share (pyroscope.c: Pyroscope's
 * ingest and Connect push; otlp.c: OpenTelemetry's profiles): a series'
 * labels and the target they make, and the way a push is queued for the
 * decoder thread (writeq.h) and answered in its protocol's terms.
 *
 * Labels map onto a series: service_name or service.name is its service
 * (and process name), hostname, host.name or host its host (else the
 * client's address), pid or process.pid its pid, process.executable.path
 * or .name its executable, process or process.executable.name its
 * process name (else the service's), container.id or container_id its container;
 * every other label but a protocol's own (__name__ and the like) is kept
 * in the series' text (its config) and in its key, so that other labels
 * make another series.
 */
#pragma once

#include "writeq.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
struct fp_coll_server;
struct fp_store_batch;

/* Labels one series takes at most, and the length of a label's name and value. */
#define FP_COLL_MAX_LABELS      32
#define FP_COLL_MAX_LABEL_NAME  64
#define FP_COLL_MAX_LABEL_VALUE 256

struct fp_coll_label {
        char name[FP_COLL_MAX_LABEL_NAME + 1];
        char value[FP_COLL_MAX_LABEL_VALUE + 1];
};

struct fp_coll_labels {
        struct fp_coll_label labels[FP_COLL_MAX_LABELS];
        size_t n;
};

/* Adds (or replaces) a label, checked. 0 or -EINVAL with err said. */
int fp_coll_labels_put(struct fp_coll_labels *l, const char *name, size_t nlen, const char *value,
                       size_t vlen, char *err, size_t errlen);
/* A label's value, or NULL. */
const char *fp_coll_labels_get(const struct fp_coll_labels *l, const char *name);
/*
 * Adds the target of a series with these labels to b: *ret its index.
 * origin starts its text ("pyroscope spy=nodespy", "otlp"); peer is the
 * host when no label names one. 0 or -errno with err said.
 */
int fp_coll_labels_target(const struct fp_coll_labels *l, const char *origin, const char *peer,
                          struct fp_store_batch *b, uint32_t *ret, char *err, size_t errlen);
/*
 * A drop count in another protocol (the agent's wire.c): the reason of
 * "fleetprof.drop.REASON" (an OTLP attribute's key) into reason, and with
 * text "fleetprof.drop.REASON=N" (a pprof comment) its count too. false
 * when it is not one (a reason is 1 to 63 of [a-z0-9_]).
 */
bool fp_coll_drop_of(const char *text, char reason[64], uint64_t *count);
/* Whether a name can be an event's: 1 to 127 letters, digits, '_', '-', '.', ':'. */
bool fp_coll_event_name_ok(const char *s);

/* How a protocol answers. */
enum fp_coll_answer {
        FP_COLL_ANSWER_INGEST,       /* Pyroscope's /ingest: 200 empty, errors {"error"} */
        FP_COLL_ANSWER_CONNECT,      /* Connect, binary: empty PushResponse, Connect's errors */
        FP_COLL_ANSWER_CONNECT_JSON, /* Connect, JSON: {} */
        FP_COLL_ANSWER_OTLP,      /* OTLP/HTTP: ExportProfilesServiceResponse, google.rpc.Status */
        FP_COLL_ANSWER_OTLP_JSON, /* the same in JSON */
};

/* The client's address, for a series without a host label. */
void fp_coll_peer_of(struct evhttp_request *req, char *buf, size_t len);
/* Answers an error in the protocol's terms. */
void fp_coll_foreign_error(struct evhttp_request *req, enum fp_coll_answer how, int status,
                           const char *msg);
/*
 * Queues the request's body for build(arg) on the decoder thread and
 * answers once it is stored (or at once when it cannot be queued). The
 * same what and body are the same push: stored once. arg is taken (freed
 * with free()).
 */
void fp_coll_foreign_queue(struct fp_coll_server *s, struct evhttp_request *req,
                           fp_coll_build_fn build, void *arg, const char *peer, const char *what,
                           enum fp_coll_answer how);
