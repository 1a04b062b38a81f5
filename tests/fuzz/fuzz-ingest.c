/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the collector's ingest decoder: the input is an
 * upload body handed to fp_coll_ingest_build() with fixed, valid
 * parameters. An input that is not gzip is gzipped first, so mutations
 * of a plain profile.proto reach the protobuf decoder and the checks
 * after it (mutated gzip mostly stops at the CRC); gzip inputs go in as
 * they are. The input is also, as a NUL-terminated string, a query
 * string for fp_upload_parse_query(). Neither may crash, leak or read
 * out of bounds, whatever the bytes; a body they accept must make a
 * batch the store would take.
 *
 * Built with -fsanitize=fuzzer when FP_FUZZ=ON (clang); replay.c runs it
 * over the committed seed corpus (tests/fuzz/corpus/ingest) in every
 * build, as the ctest fuzz/ingest-replay.
 */
#include "upload_contract.h"
#include "ingest.h"
#include "store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* gzip of data into a malloc'd buffer; NULL when out of memory. */
static uint8_t *gzip_of(const uint8_t *data, size_t size, size_t *ret_len)
{
        z_stream z = {0};
        uint8_t *out;
        size_t cap;

        if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                return NULL;
        cap = deflateBound(&z, size) + 32;
        out = malloc(cap);
        if (!out) {
                deflateEnd(&z);
                return NULL;
        }
        z.next_in = (Bytef *)(uintptr_t)data;
        z.avail_in = (uInt)size;
        z.next_out = out;
        z.avail_out = (uInt)cap;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
                deflateEnd(&z);
                free(out);
                return NULL;
        }
        *ret_len = cap - z.avail_out;
        deflateEnd(&z);
        return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char query[] = "host=fuzz&pid=1&starttime=2&comm=c&exe=/e&event=cpu-clock"
                                    "&from=1000&to=2000&agent=f&drops=throttled:1";
        struct fp_upload_meta *meta = malloc(sizeof(*meta));
        struct fp_store_batch *b = NULL;
        uint64_t samples = 0;
        char err[256], *text;
        uint8_t *gz = NULL;
        const uint8_t *body = data;
        size_t body_len = size;

        if (!meta)
                return 0;
        if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) {
                gz = gzip_of(data, size, &body_len);
                if (!gz) {
                        free(meta);
                        return 0;
                }
                body = gz;
        }
        if (fp_upload_parse_query(query, meta, err, sizeof(err)) != 0)
                abort(); /* the fixed parameters are valid */
        if (fp_coll_ingest_build(meta, body, body_len, 8 << 20, &b, &samples, err, sizeof(err)) ==
            0) {
                if (!b)
                        abort();
                fp_store_batch_free(b);
        } else if (!err[0]) {
                abort(); /* every refusal says why */
        }
        text = malloc(size + 1);
        if (text) {
                memcpy(text, data, size);
                text[size] = 0;
                (void)fp_upload_parse_query(text, meta, err, sizeof(err));
                free(text);
        }
        free(gz);
        free(meta);
        return 0;
}
