/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the collector's pure modules: the settings table
 * (options.c), read-query parsing (filter.c), upload parameters and
 * decoding into a batch (ingest.c, with profiles built by proto/), and
 * the JSON/HTML escaping (json.c). The HTTP server itself is tested by
 * tests/integration/test-collector*.sh.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "upload_contract.h"
#include "filter.h"
#include "fp-test.h"
#include "ingest.h"
#include "escape.h"
#include "util.h"
#include "conf.h"
#include "settings.h"
#include "pprof.h"
#include "store.h"

#define SEC 1000000000LL

static void test_options(void)
{
        struct fp_conf *conf = NULL;
        struct fp_coll_config c;
        char err[256];

        FP_CHECK_EQ_INT(fp_conf_new(fp_coll_settings, fp_coll_n_settings, &conf), 0);
        fp_coll_config_from(conf, &c);
        FP_CHECK_EQ_STR(c.listen, "127.0.0.1:7070");
        FP_CHECK_EQ_STR(c.store, "/var/lib/fleetprof/collector.db");
        FP_CHECK(c.token_file == NULL);
        FP_CHECK_EQ_INT(c.max_body_mb, 16);
        FP_CHECK_EQ_INT(c.retention_s, 0);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "max-body-mb", "32", FP_CONF_ARGS, err, sizeof(err)), 0);
        fp_coll_config_from(conf, &c);
        FP_CHECK_EQ_INT(c.max_body_mb, 32);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "max-body-mb", "0", FP_CONF_ARGS, err, sizeof(err)),
                        -ERANGE);
        FP_CHECK(strstr(err, "1 to 1024") != NULL);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "max-body-mb", "-1", FP_CONF_ARGS, err, sizeof(err)),
                        -EINVAL);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "max-body-mb", "12x", FP_CONF_ARGS, err, sizeof(err)),
                        -EINVAL);
        fp_coll_config_from(conf, &c);
        FP_CHECK_EQ_INT(c.max_body_mb, 32);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "retention", "7d", FP_CONF_ARGS, err, sizeof(err)), 0);
        fp_coll_config_from(conf, &c);
        FP_CHECK_EQ_INT(c.retention_s, 7 * 86400);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "retention", "90m", FP_CONF_ARGS, err, sizeof(err)), 0);
        fp_coll_config_from(conf, &c);
        FP_CHECK_EQ_INT(c.retention_s, 5400);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "retention", "1w", FP_CONF_ARGS, err, sizeof(err)),
                        -EINVAL);
        FP_CHECK_EQ_STR(err, "--retention 1w: not a duration (such as 30s, 90m, 12h or 7d)");
        FP_CHECK_EQ_INT(fp_conf_set(conf, "nope", "1", FP_CONF_ARGS, err, sizeof(err)), -ENOENT);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "tls-cert", "/c.pem", FP_CONF_ARGS, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_coll_settings_check(conf, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "--tls-key") != NULL);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "tls-key", "/k.pem", FP_CONF_ARGS, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_coll_settings_check(conf, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_conf_set(conf, "token-file", "none", FP_CONF_ARGS, err, sizeof(err)), 0);
        fp_coll_config_from(conf, &c);
        FP_CHECK(c.token_file == NULL);
        fp_conf_free(conf);
}

static void test_filter(void)
{
        const int64_t now = 1767225600LL * SEC; /* 2026-01-01T00:00:00Z */
        struct fp_coll_filter f;
        char err[256];
        int64_t t;

        FP_CHECK_EQ_INT(fp_coll_filter_parse(NULL, now, &f, err, sizeof(err)), 0);
        FP_CHECK(!f.f.host && !f.f.process && !f.f.event && !f.f.pid && !f.f.since_ns);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("host=a&process=b%20c&event=cycles&pid=7", now, &f,
                                             err, sizeof(err)),
                        0);
        FP_CHECK_EQ_STR(f.f.host, "a");
        FP_CHECK_EQ_STR(f.f.process, "b c");
        FP_CHECK_EQ_STR(f.f.event, "cycles");
        FP_CHECK(f.f.host == f.host); /* points into the copy */
        FP_CHECK_EQ_INT(f.f.pid, 7);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("seconds=30", now, &f, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(f.f.since_ns, now - 30 * SEC);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("from=-2h&to=now", now, &f, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(f.f.since_ns, now - 7200 * SEC);
        FP_CHECK_EQ_INT(f.f.until_ns, now);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("from=2026-01-01T00:00:10Z&to=1767225620.5", now, &f,
                                             err, sizeof(err)),
                        0);
        FP_CHECK_EQ_INT(f.f.since_ns, now + 10 * SEC);
        FP_CHECK_EQ_INT(f.f.until_ns, now + 20 * SEC + SEC / 2);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("from=10&to=5", now, &f, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("from=-1h&seconds=5", now, &f, err, sizeof(err)),
                        -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("hots=a", now, &f, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "hots") != NULL);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("pid=0", now, &f, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("host=", now, &f, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_parse_time("yesterday", now, &t), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_parse_time("2026-13-01T00:00:00Z", now, &t), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_parse_time("-3d", now, &t), 0);
        FP_CHECK_EQ_INT(t, now - 3 * 86400 * SEC);
}

static const char good_query[] = "host=web-1.example&pid=42&starttime=99&comm=nginx&exe=/usr/sbin/"
                                 "nginx&event=cpu-clock&from=1000&to=2000&agent=0.1.0"
                                 "&drops=throttled:3,evicted:2,throttled:1";

static void test_meta(void)
{
        struct fp_upload_meta *m = malloc(sizeof(*m));
        char err[256];

        FP_CHECK_EQ_INT(fp_upload_parse_query(good_query, m, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(m->host, "web-1.example");
        FP_CHECK_EQ_INT(m->pid, 42);
        FP_CHECK_EQ_INT(m->starttime, 99);
        FP_CHECK_EQ_STR(m->exe, "/usr/sbin/nginx");
        FP_CHECK_EQ_INT(m->from_ns, 1000);
        FP_CHECK_EQ_INT(m->to_ns, 2000);
        FP_CHECK_EQ_INT(m->n_drops, 2);
        FP_CHECK_EQ_STR(m->drops[0].reason, "throttled");
        FP_CHECK_EQ_INT(m->drops[0].count, 4);
        FP_CHECK_EQ_INT(m->drops[1].count, 2);

        static const struct {
                const char *query, *says;
        } bad[] = {
            {"pid=1&starttime=1&event=e&from=1&to=2", "missing parameter 'host'"},
            {"host=h&pid=0&starttime=1&event=e&from=1&to=2", "'pid'"},
            {"host=h&pid=1x&starttime=1&event=e&from=1&to=2", "'pid'"},
            {"host=h&pid=1&starttime=-1&event=e&from=1&to=2", "'starttime'"},
            {"host=h&pid=1&starttime=1&event=e&from=2&to=2", "time range"},
            {"host=h&pid=1&starttime=1&event=e&from=-5&to=2", "'from'"},
            {"host=h&pid=1&starttime=1&event=a%20b&from=1&to=2", "'event'"},
            {"host=h%0a&pid=1&starttime=1&event=e&from=1&to=2", "'host'"},
            {"host=h&pid=1&starttime=1&event=e&from=1&to=2&comm=a%01", "control characters"},
            {"host=h&pid=1&starttime=1&event=e&from=1&to=2&drops=x", "reason:count"},
            {"host=h&pid=1&starttime=1&event=e&from=1&to=2&drops=X:1", "[a-z0-9_]"},
            {"host=h&pid=1&starttime=1&event=e&from=1&to=2&drops=x:-1", "non-negative"},
            {"host=h&pid=1&starttime=1&event=e&from=1&to=2&x=1", "unknown parameter 'x'"},
            {"host=h&host=h&pid=1&starttime=1&event=e&from=1&to=2", "given twice"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                err[0] = 0;
                FP_CHECK_EQ_INT(fp_upload_parse_query(bad[i].query, m, err, sizeof(err)), -EINVAL);
                if (!strstr(err, bad[i].says))
                        fprintf(stderr, "query %zu: '%s' does not say '%s'\n", i, err, bad[i].says);
                FP_CHECK(strstr(err, bad[i].says) != NULL);
        }
        FP_CHECK_EQ_INT(fp_upload_check_key("abc-123", err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_upload_check_key("", err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_upload_check_key("a b", err, sizeof(err)), -EINVAL);
        free(m);
}

/* A two-type profile: n_stacks stacks of 2 frames, count i + 1 each, in thread 7 "w". */
static int make_profile(unsigned n_stacks, int types, uint8_t **ret, size_t *ret_len)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t m, fn, loc[2];
        int r;

        if (!p)
                return -ENOMEM;
        fp_pprof_add_sample_type(p, "samples", "count");
        if (types > 1)
                fp_pprof_add_sample_type(p, "cpu", "nanoseconds");
        fp_pprof_set_period(p, "cpu", "nanoseconds", 1000000);
        fp_pprof_mapping(p, 0x1000, 0x9000, 0, "/bin/x", "beef", &m);
        for (unsigned i = 0; i < n_stacks; i++) {
                char name[32];
                int64_t v[2] = {(int64_t)i + 1, ((int64_t)i + 1) * 1000000};
                struct fp_pprof_label l[2] = {{.key = "thread", .num = 7},
                                              {.key = "thread_name", .str = "w"}};

                snprintf(name, sizeof(name), "f%u", i);
                fp_pprof_function(p, name, NULL, &fn);
                fp_pprof_location(p, m, 0x1000 + 16 * i, fn, &loc[0]);
                fp_pprof_function(p, "main", NULL, &fn);
                fp_pprof_location(p, m, 0x8000, fn, &loc[1]);
                fp_pprof_add_sample(p, loc, 2, v, l, 2);
        }
        r = fp_pprof_encode(p, 1, ret, ret_len);
        fp_pprof_free(p);
        return r;
}

static void test_build(void)
{
        struct fp_upload_meta *m = malloc(sizeof(*m));
        struct fp_store_batch *b = NULL;
        uint8_t *body = NULL;
        size_t len = 0;
        uint64_t samples = 0;
        char err[256];

        FP_CHECK_EQ_INT(fp_upload_parse_query(good_query, m, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(make_profile(10, 2, &body, &len), 0);
        FP_CHECK_EQ_INT(fp_coll_ingest_build(m, body, len, 0, &b, &samples, err, sizeof(err)), 0);
        FP_CHECK(b != NULL);
        FP_CHECK_EQ_INT(samples, 55);
        FP_CHECK_EQ_INT(fp_store_batch_n_samples(b), 10);
        FP_CHECK_EQ_INT(fp_store_batch_n_stacks(b), 10);
        FP_CHECK_EQ_INT(fp_store_batch_target_count(b, 0), 55);
        fp_store_batch_free(b);
        b = NULL;
        /* A limit below the inflated size: -EFBIG (413). */
        FP_CHECK_EQ_INT(fp_coll_ingest_build(m, body, len, 64, &b, &samples, err, sizeof(err)),
                        -EFBIG);
        FP_CHECK(b == NULL);
        /* Not gzip: the same bytes inflated are refused. */
        FP_CHECK_EQ_INT(fp_coll_ingest_build(m, (const uint8_t *)"\x0a\x02", 2, 0, &b, &samples,
                                             err, sizeof(err)),
                        -EBADMSG);
        FP_CHECK(strstr(err, "not gzip") != NULL);
        free(body);
        /* One sample type: refused with what an upload has. */
        FP_CHECK_EQ_INT(make_profile(3, 1, &body, &len), 0);
        FP_CHECK_EQ_INT(fp_coll_ingest_build(m, body, len, 0, &b, &samples, err, sizeof(err)),
                        -EINVAL);
        FP_CHECK(strstr(err, "two") != NULL);
        free(body);
        free(m);
}

static void test_escaping(void)
{
        struct evbuffer *b = evbuffer_new();
        char out[256];
        size_t n;

        fp_escape_json_evb(b, "a\"b\\c\n\x01\xff\xc3\xa9");
        n = evbuffer_remove(b, out, sizeof(out) - 1);
        out[n] = 0;
        FP_CHECK_EQ_STR(out, "\"a\\\"b\\\\c\\u000a\\u0001\\ufffd\xc3\xa9\"");
        fp_escape_html_evb(b, "<a href='x'>&</a>");
        n = evbuffer_remove(b, out, sizeof(out) - 1);
        out[n] = 0;
        FP_CHECK_EQ_STR(out, "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
        fp_escape_url_evb(b, "a b&c=d/é");
        n = evbuffer_remove(b, out, sizeof(out) - 1);
        out[n] = 0;
        FP_CHECK_EQ_STR(out, "a%20b%26c%3Dd%2F%C3%A9");
        fp_rfc3339(1767225600LL * SEC, out, sizeof(out));
        FP_CHECK_EQ_STR(out, "2026-01-01T00:00:00Z");
        evbuffer_free(b);
}

int main(void)
{
        test_options();
        test_filter();
        test_meta();
        test_build();
        test_escaping();
        return FP_TEST_DONE();
}
