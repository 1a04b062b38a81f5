/* SPDX-License-Identifier: MIT */
/*
 * The control protocol between agentctl and the agent, over a Unix stream
 * socket. One request, one response, then the agent closes.
 *
 *   message  = length (4 bytes, big endian) || payload
 *   request  = "key=value\n"...    the first key is "cmd"; values hold no '\n'
 *   response = status line "ok\n" or "error <one line for the user>\n",
 *              then the body: raw bytes (text, JSON or a gzip profile)
 *
 * Requests are small (FP_CTL_MAX_REQUEST); responses may be large (a dump).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FP_CTL_MAX_REQUEST  (64 * 1024)
#define FP_CTL_MAX_RESPONSE (1024u * 1024u * 1024u)
#define FP_CTL_MAX_KEYS     32

struct fp_ctl_request {
        size_t n;
        const char *keys[FP_CTL_MAX_KEYS];
        const char *values[FP_CTL_MAX_KEYS];
        char *buf; /* owns the strings above */
};

/*
 * Parses a request payload (not NUL-terminated) into req, which owns a copy.
 * -EBADMSG when it is not key=value lines, -E2BIG with too many keys.
 */
int fp_ctl_request_parse(const uint8_t *payload, size_t len, struct fp_ctl_request *req);
void fp_ctl_request_done(struct fp_ctl_request *req);
/* Value of key, or NULL. */
const char *fp_ctl_request_get(const struct fp_ctl_request *req, const char *key);

/* The 4-byte big-endian length header. */
void fp_ctl_put_length(uint8_t out[4], uint32_t len);
uint32_t fp_ctl_get_length(const uint8_t in[4]);
