/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the collector's readers of credentials
 * (collector/http/http.h), which run on every upload and read before any
 * token is known to be right: the input, as a string, is an
 * Authorization header (Bearer or Basic, whose base64 once decoded
 * "====" to length -1 and wrote before its buffer) and a Cookie header.
 * None may crash or read or write out of bounds; nothing but the token
 * itself is taken for it.
 */
#include "http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char token[] = "s3cret-token", other[] = "s3cret-tokem";
        /* Exact-size copies: a read past either end is ASan's to catch. */
        char *h = malloc(size + 1), value[512];

        if (!h)
                return 0;
        memcpy(h, data, size);
        h[size] = 0;
        bool ok = fp_coll_auth_ok(h, token);
        /* The same header cannot carry two tokens that differ. */
        if (ok && fp_coll_auth_ok(h, other))
                abort();
        int r = fp_coll_read_auth(h, h, token);
        if (r < -1 || r > 1 || (r == 1 && fp_coll_read_auth(h, h, other) == 1))
                abort();
        if (fp_coll_cookie(h, "fleetprof_read", value, sizeof(value)) && strlen(value) >= 512)
                abort();
        free(h);
        return 0;
}
