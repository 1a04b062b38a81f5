/* SPDX-License-Identifier: MIT */
/*
 * The upload contract (proto/upload_contract.h): what the agent encodes
 * the collector parses back to the same values, hostile characters
 * included; what either side must refuse, it refuses.
 */
#include "fp-test.h"
#include "upload_contract.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void test_round_trip(void)
{
        struct fp_upload_meta *m = calloc(1, sizeof(*m)), *back = calloc(1, sizeof(*back));
        char *q = NULL, err[256];

        snprintf(m->host, sizeof(m->host), "web-1.example");
        m->pid = 4242;
        m->starttime = 123456789;
        snprintf(m->comm, sizeof(m->comm), "a b&c=d%%é");
        snprintf(m->exe, sizeof(m->exe), "/opt/x y/bin?z#1");
        snprintf(m->event, sizeof(m->event), "cpu-clock");
        snprintf(m->agent, sizeof(m->agent), "0.1.0");
        m->from_ns = 1000;
        m->to_ns = 2000;
        m->n_drops = 2;
        snprintf(m->drops[0].reason, sizeof(m->drops[0].reason), "throttled");
        m->drops[0].count = 3;
        snprintf(m->drops[1].reason, sizeof(m->drops[1].reason), "kernel_ring_overflow");
        m->drops[1].count = 17;
        FP_CHECK_EQ_INT(fp_upload_encode_query(m, &q), 0);
        FP_CHECK(strchr(q, ' ') == NULL && strchr(q, '#') == NULL);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, back, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(back->host, m->host);
        FP_CHECK_EQ_INT(back->pid, 4242);
        FP_CHECK_EQ_INT(back->starttime, 123456789);
        FP_CHECK_EQ_STR(back->comm, m->comm);
        FP_CHECK_EQ_STR(back->exe, m->exe);
        FP_CHECK_EQ_STR(back->event, "cpu-clock");
        FP_CHECK_EQ_INT(back->from_ns, 1000);
        FP_CHECK_EQ_INT(back->to_ns, 2000);
        FP_CHECK_EQ_INT(back->n_drops, 2);
        FP_CHECK_EQ_STR(back->drops[1].reason, "kernel_ring_overflow");
        FP_CHECK_EQ_INT(back->drops[1].count, 17);
        FP_CHECK_EQ_STR(back->service, "");
        FP_CHECK(strstr(q, "service=") == NULL); /* sent only when there is one */
        free(q);
        q = NULL;
        snprintf(m->service, sizeof(m->service), "nginx@web:1.x");
        FP_CHECK_EQ_INT(fp_upload_encode_query(m, &q), 0);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, back, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(back->service, "nginx@web:1.x");
        FP_CHECK_EQ_STR(back->container, "");
        FP_CHECK(strstr(q, "container=") == NULL); /* sent only when there is one */
        FP_CHECK_EQ_INT(back->cost.host_cpus, 0);
        free(q);
        q = NULL;
        snprintf(m->container, sizeof(m->container), "0123456789ab");
        FP_CHECK_EQ_INT(fp_upload_encode_query(m, &q), 0);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, back, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(back->container, "0123456789ab");
        FP_CHECK(!back->host_tier);
        m->container[0] = '\0';
        free(q);
        q = NULL;
        /* A host tier's round: tier=host, pid 0, no service or container of its own. */
        m->host_tier = true;
        m->service[0] = '\0';
        pid_t pid = m->pid;
        m->pid = 0;
        FP_CHECK_EQ_INT(fp_upload_encode_query(m, &q), 0);
        FP_CHECK(strstr(q, "tier=host") != NULL);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, back, err, sizeof(err)), 0);
        FP_CHECK(back->host_tier);
        m->host_tier = false;
        m->pid = pid;
        free(q);
        q = NULL;
        /* Its series keys: stable, never 0, apart for apart labels, as before containers. */
        uint64_t k1 = fp_upload_host_series_key("nginx", "/usr/sbin/nginx", "");
        FP_CHECK(k1 != 0 && k1 <= INT64_MAX);
        FP_CHECK_EQ_INT(k1, fp_upload_host_series_key("nginx", "/usr/sbin/nginx", ""));
        FP_CHECK(k1 != fp_upload_host_series_key("nginx", "/usr/sbin/nginx", "0123456789ab"));
        FP_CHECK(k1 != fp_upload_host_series_key("nginx/usr/sbin", "/nginx", ""));
        FP_CHECK(fp_upload_host_series_key("", "", "") != 0);
        m->cost.agent_cpu_ns = 123456789;
        m->cost.agent_rss_bytes = 50 << 20;
        m->cost.host_cpus = 8;
        m->cost.from_ns = 1000;
        m->cost.to_ns = 61000;
        FP_CHECK_EQ_INT(fp_upload_encode_query(m, &q), 0);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, back, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(back->cost.agent_cpu_ns, 123456789);
        FP_CHECK_EQ_INT(back->cost.agent_rss_bytes, 50 << 20);
        FP_CHECK_EQ_INT(back->cost.host_cpus, 8);
        FP_CHECK_EQ_INT(back->cost.to_ns, 61000);
        free(q);
        free(m);
        free(back);
}

static void test_refusals(void)
{
        struct fp_upload_meta *m = calloc(1, sizeof(*m));
        char err[256];
        const char *base = "host=h&pid=1&starttime=2&event=cpu-clock&from=1&to=2";
        char q[512];

        FP_CHECK_EQ_INT(fp_upload_parse_query(base, m, err, sizeof(err)), 0);
        snprintf(q, sizeof(q), "%s&hots=x", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "unknown parameter") != NULL);
        snprintf(q, sizeof(q), "%s&pid=3", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_upload_parse_query("host=h&pid=1", m, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "missing parameter") != NULL);
        snprintf(q, sizeof(q), "%s&comm=%%1b%%5b31m", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        snprintf(q, sizeof(q), "%s&service=a%%20b", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "parameter 'service'") != NULL);
        snprintf(q, sizeof(q), "%s&service=", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        /* tier takes one value, and a host tier's round names no process or service. */
        snprintf(q, sizeof(q), "%s&tier=hosts", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "parameter 'tier'") != NULL);
        snprintf(q, sizeof(q), "%s&tier=host", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "pid=0") != NULL);
        /* A container is an ID: lowercase hex digits, at most 64. */
        static const char *const bad_ids[] = {"", "0123456789AB", "abc%27%3B", "xyz",
                                              "00000000000000000000000000000000000000000000000000"
                                              "000000000000000"};
        for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
                snprintf(q, sizeof(q), "%s&container=%s", base, bad_ids[i]);
                FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
                FP_CHECK(strstr(err, "parameter 'container'") != NULL);
        }
        snprintf(q, sizeof(q), "%s&container=%s", base,
                 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), 0);
        /* The cost's parameters come all together. */
        snprintf(q, sizeof(q), "%s&agent_cpu_ns=5&agent_rss=1", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "all together") != NULL);
        snprintf(q, sizeof(q), "%s&agent_cpu_ns=5&agent_rss=1&host_cpus=0&cost_from=1&cost_to=9",
                 base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        snprintf(q, sizeof(q), "%s&agent_cpu_ns=5&agent_rss=1&host_cpus=2&cost_from=9&cost_to=9",
                 base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        snprintf(q, sizeof(q), "%s&agent_cpu_ns=5&agent_rss=1&host_cpus=2&cost_from=1&cost_to=9",
                 base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), 0);
        snprintf(q, sizeof(q), "%s&drops=Bad:1", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        snprintf(q, sizeof(q), "%s&drops=x:-1", base);
        FP_CHECK_EQ_INT(fp_upload_parse_query(q, m, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_upload_parse_query("host=h&pid=1&starttime=2&event=e&from=5&to=5", m,
                                              err, sizeof(err)),
                        -EINVAL);
        FP_CHECK_EQ_INT(fp_upload_check_key("abc-123", err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_upload_check_key("a b", err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_upload_check_key("", err, sizeof(err)), -EINVAL);
        free(m);
}

int main(void)
{
        test_round_trip();
        test_refusals();
        return FP_TEST_DONE();
}
