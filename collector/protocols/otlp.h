/* SPDX-License-Identifier: MIT */
/*
 * OpenTelemetry's profiles over OTLP/HTTP, into the collector's store:
 *
 *   POST /v1development/profiles    Content-Type: application/x-protobuf
 *        body: ExportProfilesServiceRequest (gzip with Content-Encoding),
 *        or Content-Type: application/json, its JSON encoding (read into
 *        protobuf by pbjson.h, then the same)
 *
 * Pinned to opentelemetry-proto v1.9.0 (profiles v1development, an Alpha
 * protocol whose field numbers still move between releases): a request
 * holds resource_profiles = 1 and the ProfilesDictionary dictionary = 2
 * (mapping_table 1, location_table 2, function_table 3, link_table 4,
 * string_table 5, attribute_table 6, stack_table 7); each Profile has
 * sample_type 1, samples 2 (Sample: stack_index 1, values 2,
 * attribute_indices 3, link_index 4, timestamps_unix_nano 5),
 * time_unix_nano 3, duration_nano 4, period_type 5, period 6.
 *
 * A resource's attributes are its series' labels (foreign.h: service.name,
 * host.name, process.pid, process.executable.*, container.id; the rest
 * kept). A profile's sample type is its event; "samples"/"count" with a
 * cpu/nanoseconds period (the OpenTelemetry eBPF profiler's) is event
 * cpu, each sample worth the period. Sample attributes thread.id and
 * thread.name name the thread; a mapping's build ID comes from its
 * process.executable.build_id.gnu (else .go, .htlhash) attribute.
 *
 * A profile whose indices point outside the dictionary is rejected and
 * the rest stored: the answer's partial_success says how many and why
 * (as the specification asks); when none is left, 400 with a
 * google.rpc.Status. The same request sent twice is stored once. A JSON
 * request is answered in JSON.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
struct fp_coll_server;
struct fp_store_batch;

/* POST /v1development/profiles */
void fp_coll_otlp_export(struct fp_coll_server *s, struct evhttp_request *req);

/*
 * The decoder, pure (the fuzz target's): an ExportProfilesServiceRequest
 * (gzip when it starts with gzip's magic; in JSON when json) into a batch.
 * 0 with *ret, or -errno with one line in err. On 0, a non-empty err says
 * which profiles were rejected ("N of M profiles rejected: why").
 */
int fp_coll_otlp_decode(const uint8_t *body, size_t len, bool json, size_t max_decompressed,
                        struct fp_store_batch **ret, uint64_t *ret_samples, char *err,
                        size_t errlen);
