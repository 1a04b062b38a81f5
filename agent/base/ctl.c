/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's framing and request parsing; see ctl.h.
 */
#include "ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fp_ctl_request_parse(const uint8_t *payload, size_t len, struct fp_ctl_request *req)
{
        struct fp_ctl_request r = {0};
        char *p, *end;

        if (len > FP_CTL_MAX_REQUEST)
                return -E2BIG;
        r.buf = malloc(len + 1);
        if (!r.buf)
                return -ENOMEM;
        memcpy(r.buf, payload, len);
        r.buf[len] = 0;
        if (memchr(r.buf, 0, len)) {
                free(r.buf);
                return -EBADMSG;
        }
        for (p = r.buf; *p; p = end) {
                char *nl = strchr(p, '\n');
                if (!nl) {
                        free(r.buf);
                        return -EBADMSG;
                }
                *nl = 0;
                end = nl + 1;
                char *eq = strchr(p, '=');
                if (!eq || eq == p) {
                        free(r.buf);
                        return -EBADMSG;
                }
                if (r.n == FP_CTL_MAX_KEYS) {
                        free(r.buf);
                        return -E2BIG;
                }
                *eq = 0;
                r.keys[r.n] = p;
                r.values[r.n] = eq + 1;
                r.n++;
        }
        if (r.n == 0 || strcmp(r.keys[0], "cmd") != 0) {
                free(r.buf);
                return -EBADMSG;
        }
        *req = r;
        return 0;
}

void fp_ctl_request_done(struct fp_ctl_request *req)
{
        free(req->buf);
        *req = (struct fp_ctl_request){0};
}

const char *fp_ctl_request_get(const struct fp_ctl_request *req, const char *key)
{
        for (size_t i = 0; i < req->n; i++)
                if (strcmp(req->keys[i], key) == 0)
                        return req->values[i];
        return NULL;
}

void fp_ctl_put_length(uint8_t out[4], uint32_t len)
{
        out[0] = (uint8_t)(len >> 24);
        out[1] = (uint8_t)(len >> 16);
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
}

uint32_t fp_ctl_get_length(const uint8_t in[4])
{
        return (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
}
