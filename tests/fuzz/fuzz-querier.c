/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the request decoders of the collector's query API
 * (Pyroscope's QuerierService over Connect), which anyone who reaches its
 * port may call when no read token is set: the input's first byte picks
 * the method (fp_coll_querier_method(), in the order served: ProfileTypes,
 * LabelNames, LabelValues, Series, SelectMergeStacktraces,
 * SelectMergeProfile, SelectSeries, Diff, settings' Get) and whether the
 * rest is its binary protobuf or its JSON,
 * and fp_coll_querier_decode() reads it as the handler does (JSON through
 * fp_pbjson_read(), then the binary message, strings, matchers, a Diff's
 * two halves). Nothing may crash, leak or read out of bounds; a refusal
 * says why in a Connect code.
 *
 * replay.c runs it over tests/fuzz/corpus/querier in every build.
 */
#include "querier.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static size_t n_methods;
        char err[256];

        while (fp_coll_querier_method(n_methods))
                n_methods++;
        if (size == 0)
                return 0;
        const char *path = fp_coll_querier_method((data[0] >> 1) % n_methods);
        err[0] = 0;
        int r = fp_coll_querier_decode(path, data[0] & 1, data + 1, size - 1, err, sizeof(err));
        /* A method it serves: read, or refused with a code and a message. */
        if (r == -ENOENT || (r < 0 && !strchr(err, ':')) || (r == 0 && err[0]))
                abort();
        return 0;
}
