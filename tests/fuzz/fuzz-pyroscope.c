/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the collector's Pyroscope decoder
 * (fp_coll_pyro_decode()): the input's first byte picks what the rest
 * is, as the handlers would hand it over: a Connect PushRequest in binary
 * or in JSON, or an ingest's pprof or folded body (with a fixed name).
 * The input is also, as a NUL-terminated string, an ingest's name
 * parameter (its labels), with an empty body. Nothing may crash, leak or
 * read out of bounds; a body it accepts must make a batch.
 *
 * replay.c runs it over tests/fuzz/corpus/pyroscope in every build.
 */
#include "pyroscope.h"
#include "store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const enum fp_pyro_body kinds[] = {FP_PYRO_CONNECT, FP_PYRO_CONNECT_JSON,
                                                  FP_PYRO_PPROF, FP_PYRO_FOLDED};
        struct fp_store_batch *b = NULL;
        uint64_t samples = 0;
        char err[256];
        char *name;

        if (size == 0)
                return 0;
        enum fp_pyro_body kind = kinds[data[0] % 4];
        if (fp_coll_pyro_decode(kind, "fuzz.cpu{hostname=h,region=r}", data + 1, size - 1, 1 << 20,
                                &b, &samples, err, sizeof(err)) == 0) {
                if (!b)
                        abort();
                fp_store_batch_free(b);
        }
        /* The input as a name: only its parse and an empty profile. */
        if (!(name = malloc(size + 1)))
                return 0;
        memcpy(name, data, size);
        name[size] = 0;
        b = NULL;
        if (fp_coll_pyro_decode(FP_PYRO_FOLDED, name, (const uint8_t *)"a;b 1\n", 6, 1 << 20, &b,
                                &samples, err, sizeof(err)) == 0)
                fp_store_batch_free(b);
        free(name);
        return 0;
}
