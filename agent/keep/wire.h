/* SPDX-License-Identifier: MIT */
/*
 * The protocols an upload can travel in (upload.c sends, this writes):
 *
 *   http(s)://HOST:PORT            fleetprof's own contract (upload_contract.h):
 *                                  the stored gzip pprof as it is.
 *   pyroscope+http(s)://HOST:PORT  Grafana Pyroscope's Connect push,
 *                                  POST /push.v1.PusherService/Push, a binary
 *                                  PushRequest (push/v1/push.proto): one series
 *                                  per target (per service for a host tier's
 *                                  round), its raw_profile the gzip pprof, its
 *                                  ID the upload's idempotency key.
 *   otlp+http(s)://HOST:PORT       OpenTelemetry's profiles over HTTP,
 *                                  POST /v1development/profiles, a gzip
 *                                  ExportProfilesServiceRequest of
 *                                  opentelemetry-proto v1.9.0 (fp_pprof_to_otlp()).
 *
 * The body is made from the stored upload (its pprof and its query) each
 * time it is sent, and the same upload always makes the same bytes, so a
 * collector that keys pushes by their content stores a retry once.
 *
 * What travels as what:
 *                 Pyroscope (series labels)      OTLP (resource attributes)
 *   service       service_name (else process)    service.name
 *   host          hostname                       host.name
 *   pid           pid                            process.pid
 *   process       process                        process.executable.name
 *   executable    process.executable.path        process.executable.path
 *   container     container.id                   container.id
 *   event         __name__ (cpu: process_cpu)    profile attribute fleetprof.event
 *   thread        pprof labels thread,           sample attributes thread.id,
 *                 thread_name                    thread.name
 *   drops         pprof comments                 first profile's attributes
 *                 "fleetprof.drop.REASON=N"      fleetprof.drop.REASON (int)
 * A host tier's round goes as one series (resource) per (service,
 * executable, container), plus one named fleetprof-host-tier for the
 * tier's own drops when it has some.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct fp_upload_meta;

enum fp_wire {
        FP_WIRE_NATIVE,
        FP_WIRE_PYROSCOPE,
        FP_WIRE_OTLP,
};

/*
 * The protocol a --collector URL names, and where its http(s):// part
 * starts. -EINVAL when it names none.
 */
int fp_wire_of_url(const char *url, enum fp_wire *ret, size_t *ret_skip);
const char *fp_wire_name(enum fp_wire w);
/* The path a protocol posts to. */
const char *fp_wire_path(enum fp_wire w);

/* What a credentials file says. */
struct fp_wire_credentials {
        char *bearer;   /* Authorization: Bearer */
        char *user;     /* Authorization: Basic user:password */
        char *password; /* with user */
        char *tenant;   /* X-Scope-OrgID */
};

/*
 * Reads a credentials file: lines "bearer TOKEN", "basic USER:PASSWORD",
 * "tenant ID" (at most one of bearer and basic), '#' comments. Refuses a
 * file others may read or write. 0, or -errno and one line in err.
 */
int fp_wire_read_credentials(const char *path, struct fp_wire_credentials *ret, char *err,
                             size_t err_len);
void fp_wire_credentials_clear(struct fp_wire_credentials *c);

/*
 * The body of an upload in protocol w (not FP_WIRE_NATIVE): from its query
 * (m), its key and its stored gzip pprof. *ret is malloc'd. 0, or -errno
 * with a line in err.
 */
int fp_wire_body(enum fp_wire w, const struct fp_upload_meta *m, const char *key,
                 const uint8_t *pprof, size_t len, uint8_t **ret, size_t *ret_len, char *err,
                 size_t err_len);

/*
 * An OTLP answer's partial success (ExportProfilesServiceResponse): the
 * profiles rejected (0: none) and why, from the body.
 */
int64_t fp_wire_otlp_rejected(const uint8_t *body, size_t len, char *why, size_t why_len);
/*
 * An OTLP error's body (a google.rpc.Status) replaced by its message, in
 * place; its new length (len when it is not one).
 */
size_t fp_wire_otlp_status(char *body, size_t len);
