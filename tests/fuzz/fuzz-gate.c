/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the collector's gate (collector/http/gate.h), which
 * reads the head of every request anyone who reaches the port sends: the
 * input is a request head, judged with and without an upload and a read
 * token. None may crash or read out of bounds, and what the gate lets in
 * with a body is a POST that carries the token (upload or read token, as
 * bearer, basic password or cookie): with another token it is refused,
 * unless the head carries that other token too (the fuzzer finds it among
 * this file's constants: a 10-minute run put it in a cookie beside the
 * right one in a bearer header).
 */
#include "gate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char token[] = "s3cret-token", other_token[] = "s3cret-tokem";
        /* An exact-size copy, so a read past the head is caught by ASan. */
        char *head = malloc(size ? size : 1);
        struct fp_coll_gate_verdict v;

        if (!head)
                return 0;
        memcpy(head, data, size);
        for (int with_token = 0; with_token < 2; with_token++) {
                const char *t = with_token ? token : NULL;
                fp_coll_gate_judge(head, size, t, t, &v);
                if (v.reason >= FP_GATE_N_REASONS || v.line_len > size)
                        abort();
                if (v.reason >= 0 || (!v.body && !v.pass_rest))
                        continue;
                if (size < 5 || memcmp(head, "POST ", 5) != 0 || !v.line_ok)
                        abort();
                /* The token let it in: with another token of the same length, it is refused. */
                struct fp_coll_gate_verdict other;
                fp_coll_gate_judge(head, size, with_token ? other_token : NULL,
                                   with_token ? other_token : NULL, &other);
                if (with_token && other.reason < 0 &&
                    !memmem(head, size, other_token, sizeof(other_token) - 1))
                        abort();
        }
        free(head);
        return 0;
}
