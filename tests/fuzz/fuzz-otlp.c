/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the collector's OTLP profiles decoder
 * (fp_coll_otlp_decode()): the input is a request body, an
 * ExportProfilesServiceRequest (gzip when it starts with gzip's magic),
 * read both as protobuf and as OTLP's JSON. Nothing may crash, leak or
 * read out of bounds; a body it accepts must make a batch.
 *
 * replay.c runs it over tests/fuzz/corpus/otlp in every build.
 */
#include "otlp.h"
#include "store.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fp_store_batch *b = NULL;
        uint64_t samples = 0;
        char err[256];

        for (int json = 0; json < 2; json++) {
                b = NULL;
                if (fp_coll_otlp_decode(data, size, json, 1 << 20, &b, &samples, err,
                                        sizeof(err)) == 0) {
                        if (!b)
                                abort();
                        fp_store_batch_free(b);
                }
        }
        return 0;
}
