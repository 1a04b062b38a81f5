/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the agent's control protocol, which any local user
 * may speak to the root agent: the input is a request payload as it
 * arrives on the socket (after the length header), parsed by
 * fp_ctl_request_parse() and, when it parses, handed to what reads a
 * start request without a running agent: the sampling options
 * (fp_rule_sampling_from_request()), a rule (fp_rule_new(): regular
 * expressions, paths, units, cgroups, services) and the event list parser.
 * The input is also, as a string, a configuration file's target line
 * (fp_rule_request_from_words(): quoting). None may crash, leak, read out
 * of bounds or accept what it then cannot describe.
 */
#include "ctl.h"
#include "perf.h"
#include "rule.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use_request(const struct fp_ctl_request *q)
{
        struct fp_perf_config cfg = {0};
        struct fp_rule *rule = NULL;
        char err[512];
        bool follow;
        const char *events = fp_ctl_request_get(q, "event");

        for (size_t i = 0; i < q->n; i++)
                if (!q->keys[i] || !q->values[i] || strchr(q->values[i], '\n'))
                        abort(); /* a parsed request holds whole key=value lines */
        (void)fp_rule_sampling_from_request(q, &cfg, &follow, err, sizeof(err));
        if (events) {
                struct fp_perf_config ev = {0};
                char bad[64], back[1024];
                if (fp_perf_event_list_parse(events, &ev, bad, sizeof(bad)) == 0)
                        fp_perf_event_list_string(&ev, back, sizeof(back));
        }
        if (fp_rule_requested(q) && fp_rule_new(q, 1000, &rule, err, sizeof(err)) == 0) {
                struct fp_rule *again = NULL;
                /* What a rule keeps as its text must read back as a rule. */
                if (!rule->spec || fp_rule_from_spec(rule->spec, 1000, &again, err, sizeof(err)))
                        abort();
                fp_rule_free(again);
        }
        fp_rule_free(rule);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fp_ctl_request q = {0};
        char err[512], *line;

        if (size > FP_CTL_MAX_REQUEST)
                return 0;
        if (fp_ctl_request_parse(data, size, &q) == 0)
                use_request(&q);
        fp_ctl_request_done(&q);

        line = malloc(size + 1);
        if (!line)
                return 0;
        memcpy(line, data, size);
        line[size] = 0;
        struct fp_ctl_request w = {0};
        if (fp_rule_request_from_words(line, &w, err, sizeof(err)) == 0)
                use_request(&w);
        fp_ctl_request_done(&w);
        (void)fp_rule_check_words(line, err, sizeof(err));
        free(line);
        return 0;
}
