/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the control protocol (agent/base/ctl.c): framing lengths,
 * request parsing, and the rejection of malformed requests that a client
 * could send to the agent.
 */
#include "ctl.h"
#include "fp-test.h"

#include <errno.h>
#include <stdlib.h>

static int parse(const char *s, struct fp_ctl_request *q)
{
        return fp_ctl_request_parse((const uint8_t *)s, strlen(s), q);
}

int main(void)
{
        struct fp_ctl_request q;
        uint8_t hdr[4];

        fp_ctl_put_length(hdr, 0x01020304);
        FP_CHECK_EQ_INT(hdr[0], 1);
        FP_CHECK_EQ_INT(hdr[3], 4);
        FP_CHECK_EQ_INT(fp_ctl_get_length(hdr), 0x01020304);

        FP_CHECK_EQ_INT(parse("cmd=start\npid=42\nevent=cpu-clock\nempty=\n", &q), 0);
        FP_CHECK_EQ_STR(fp_ctl_request_get(&q, "cmd"), "start");
        FP_CHECK_EQ_STR(fp_ctl_request_get(&q, "pid"), "42");
        FP_CHECK_EQ_STR(fp_ctl_request_get(&q, "event"), "cpu-clock");
        FP_CHECK_EQ_STR(fp_ctl_request_get(&q, "empty"), "");
        FP_CHECK(fp_ctl_request_get(&q, "freq") == NULL);
        fp_ctl_request_done(&q);

        /* Malformed: no cmd first, no newline at the end, no '=', empty key, NUL byte. */
        FP_CHECK_EQ_INT(parse("pid=42\ncmd=start\n", &q), -EBADMSG);
        FP_CHECK_EQ_INT(parse("cmd=start", &q), -EBADMSG);
        FP_CHECK_EQ_INT(parse("cmd=start\ngarbage\n", &q), -EBADMSG);
        FP_CHECK_EQ_INT(parse("cmd=start\n=x\n", &q), -EBADMSG);
        FP_CHECK_EQ_INT(parse("", &q), -EBADMSG);
        FP_CHECK_EQ_INT(fp_ctl_request_parse((const uint8_t *)"cmd=a\0\n", 7, &q), -EBADMSG);

        /* Too many keys, too long. */
        char many[4096] = "cmd=x\n";
        for (int i = 0; i < FP_CTL_MAX_KEYS + 1; i++)
                strcat(many, "k=v\n");
        FP_CHECK_EQ_INT(parse(many, &q), -E2BIG);
        uint8_t *big = calloc(1, FP_CTL_MAX_REQUEST + 1);
        FP_CHECK_EQ_INT(fp_ctl_request_parse(big, FP_CTL_MAX_REQUEST + 1, &q), -E2BIG);
        free(big);
        return FP_TEST_DONE();
}
