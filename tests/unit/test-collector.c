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
#include <unistd.h>
#include <zlib.h>

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
        FP_CHECK_EQ_STR(c.store, "/var/lib/fleetprof-collector/collector.db");
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
        FP_CHECK(!f.f.service);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("service=api", now, &f, err, sizeof(err)), 0);
        FP_CHECK(f.f.service == f.service && strcmp(f.service, "api") == 0);
        FP_CHECK(!f.f.container);
        FP_CHECK_EQ_INT(
            fp_coll_filter_parse("container=0123456789ab&service=api", now, &f, err, sizeof(err)),
            0);
        FP_CHECK(f.f.container == f.container && strcmp(f.container, "0123456789ab") == 0);
        /* A label: its word in a series' text, the value URL-escaped. */
        FP_CHECK_EQ_INT(fp_coll_filter_parse("label=region%3Aeu%201", now, &f, err, sizeof(err)),
                        0);
        FP_CHECK(f.f.config_word == f.label);
        FP_CHECK_EQ_STR(f.label, "region=eu%201");
        FP_CHECK_EQ_INT(fp_coll_filter_parse("label=k.8:a:b", now, &f, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(f.label, "k.8=a%3Ab");
        FP_CHECK_EQ_INT(fp_coll_filter_parse("label=noval", now, &f, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("label=:v", now, &f, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("label=a%20b:v", now, &f, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_coll_filter_parse("label=a:%01", now, &f, err, sizeof(err)), -EINVAL);
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
            {"host=h&pid=-1&starttime=1&event=e&from=1&to=2", "'pid'"},
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

/*
 * A host tier's round (tier=host): samples labelled by series are stored as
 * one series each (pid 0, keyed as the agent keys them), the drops go to
 * the tier's own series, and a sample without a service is refused.
 */
struct round_sample {
        const char *service, *exe, *process, *container;
        int64_t count;
};

static int make_round(const struct round_sample *v, size_t n, uint8_t **ret, size_t *ret_len)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t m, fn, loc;
        int r;

        if (!p)
                return -ENOMEM;
        fp_pprof_add_sample_type(p, "samples", "count");
        fp_pprof_add_sample_type(p, "cpu", "nanoseconds");
        fp_pprof_set_period(p, "cpu", "nanoseconds", 1);
        fp_pprof_mapping(p, 0x1000, 0x9000, 0, "/bin/x", "beef", &m);
        fp_pprof_function(p, "work", NULL, &fn);
        fp_pprof_location(p, m, 0x1000, fn, &loc);
        for (size_t i = 0; i < n; i++) {
                int64_t val[2] = {v[i].count, v[i].count * 1000};
                struct fp_pprof_label l[7] = {{.key = "thread", .num = 7 + (int64_t)i},
                                              {.key = "thread_name", .str = "w"},
                                              {.key = "pid", .num = 0},
                                              {.key = "process", .str = v[i].process},
                                              {.key = "exe", .str = v[i].exe},
                                              {.key = "service", .str = v[i].service},
                                              {.key = "container", .str = v[i].container}};
                size_t nl = 5 + (v[i].service != NULL) + (v[i].container != NULL);
                fp_pprof_add_sample(p, &loc, 1, val, l, nl);
        }
        r = fp_pprof_encode(p, 1, ret, ret_len);
        fp_pprof_free(p);
        return r;
}

static int grab_series(void *userdata, const struct fp_store_series *se)
{
        char *out = userdata;
        size_t n = strlen(out);
        snprintf(out + n, 1024 - n, "%d/%s/%s/%s/%s=%llu;", (int)se->pid, se->service, se->exe,
                 se->container, se->comm, (unsigned long long)se->count);
        return 0;
}

static void test_host_round(void)
{
        static const struct round_sample v[] = {
            {"nginx", "/usr/sbin/nginx", "nginx", "", 5},
            {"nginx", "/usr/sbin/nginx", "nginx", "", 2}, /* another thread, one series */
            {"nginx", "/usr/sbin/nginx", "nginx", "0123456789ab", 3},
            {"cron", "/usr/bin/sh", "sh", "", 4},
        };
        static const char query[] =
            "host=web-1&pid=0&starttime=77&comm=%5Bhost%20tier%5D&exe="
            "&event=cpu-clock&from=1000&to=2000&drops=throttled:3&tier=host";
        struct fp_upload_meta *m = malloc(sizeof(*m));
        struct fp_store_batch *b = NULL;
        struct fp_store *st = NULL;
        uint8_t *body = NULL;
        size_t len = 0;
        uint64_t samples = 0;
        char err[256], path[] = "/tmp/fp-test-round-XXXXXX", got[1024] = "";
        int fd = mkstemp(path);

        FP_CHECK(fd >= 0);
        close(fd);
        FP_CHECK_EQ_INT(fp_upload_parse_query(query, m, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(make_round(v, 4, &body, &len), 0);
        FP_CHECK_EQ_INT(fp_coll_ingest_build(m, body, len, 0, &b, &samples, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(samples, 14);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &st, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_store_write_batch(st, b), 0);
        FP_CHECK(fp_store_list_series(st, NULL, grab_series, got) == 4);
        char want[1024];
        snprintf(want, sizeof(want),
                 "0/cron/%s/%s/%s=%d;0/nginx/%s/%s/%s=%d;0/nginx/%s/%s/%s=%d;0////%s=%d;",
                 "/usr/bin/sh", "", "sh", 4, "/usr/sbin/nginx", "", "nginx", 7, "/usr/sbin/nginx",
                 "0123456789ab", "nginx", 3, "[host tier]", 0);
        /* Listed by pid and starttime: the keys' order, so compare as sets. */
        for (char *tok = strtok(want, ";"); tok; tok = strtok(NULL, ";")) {
                if (!strstr(got, tok))
                        fprintf(stderr, "host round: '%s' not in '%s'\n", tok, got);
                FP_CHECK(strstr(got, tok) != NULL);
        }
        struct fp_store_filter f = {
            .starttime = fp_upload_host_series_key("nginx", "/usr/sbin/nginx", "0123456789ab")};
        struct fp_pprof *p = fp_pprof_new();
        FP_CHECK_EQ_INT(fp_store_query_pprof(st, &f, p), 1);
        FP_CHECK_EQ_INT(fp_pprof_total(p, 0), 3);
        fp_pprof_free(p);
        fp_store_batch_free(b);
        b = NULL;
        fp_store_close(st);
        unlink(path);
        free(body);
        /* A sample that names no service cannot be placed: refused, one line. */
        static const struct round_sample nameless[] = {{NULL, "/bin/x", "x", NULL, 1}};
        FP_CHECK_EQ_INT(make_round(nameless, 1, &body, &len), 0);
        FP_CHECK_EQ_INT(fp_coll_ingest_build(m, body, len, 0, &b, &samples, err, sizeof(err)),
                        -EINVAL);
        FP_CHECK(strstr(err, "label 'service'") != NULL && !strchr(err, '\n'));
        FP_CHECK(b == NULL);
        free(body);
        free(m);
}

/* ---- handcrafted profile.proto messages, to attack the wire decoder ---- */

struct msg {
        uint8_t b[8192];
        size_t n;
};

static void put_varint(struct msg *m, uint64_t v)
{
        do {
                FP_CHECK(m->n < sizeof(m->b));
                m->b[m->n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                v >>= 7;
        } while (v);
}

static void put_uint(struct msg *m, unsigned field, uint64_t v)
{
        put_varint(m, (uint64_t)field << 3);
        put_varint(m, v);
}

static void put_msg(struct msg *m, unsigned field, const struct msg *sub)
{
        put_varint(m, (uint64_t)field << 3 | 2);
        put_varint(m, sub->n);
        FP_CHECK(m->n + sub->n <= sizeof(m->b));
        memcpy(m->b + m->n, sub->b, sub->n);
        m->n += sub->n;
}

static void put_str(struct msg *m, unsigned field, const char *s)
{
        struct msg x = {.n = strlen(s)};
        memcpy(x.b, s, x.n);
        put_msg(m, field, &x);
}

enum attack {
        A_NONE,
        A_DUP_LOCATION,
        A_MISSING_INLINE_FUNCTION,
        A_THREE_VALUES,
        A_THREAD_AS_STRING,
        A_TOO_DEEP,
        A_ZERO_MAPPING_ID,
};

/* A valid two-type profile of one sample (3 of thread 7), or that with one attack. */
static void wire_profile(struct msg *m, enum attack a)
{
        static const char *const strs[] = {"",       "samples", "count", "cpu",    "nanoseconds",
                                           "/bin/x", "f",       "g",     "thread", "thread_name",
                                           "w"};
        struct msg x, y;

        m->n = 0;
        for (int t = 0; t < 2; t++) {
                x = (struct msg){0};
                put_uint(&x, 1, 1 + 2 * (unsigned)t);
                put_uint(&x, 2, 2 + 2 * (unsigned)t);
                put_msg(m, 1, &x);
        }
        x = (struct msg){0};
        put_uint(&x, 1, a == A_ZERO_MAPPING_ID ? 0 : 1);
        put_uint(&x, 2, 0x1000);
        put_uint(&x, 3, 0x9000);
        put_uint(&x, 5, 5);
        put_msg(m, 3, &x);
        for (unsigned f = 1; f <= 2; f++) {
                x = (struct msg){0};
                put_uint(&x, 1, f);
                put_uint(&x, 2, 5 + f);
                put_msg(m, 5, &x);
        }
        for (unsigned l = 1; l <= 2; l++) {
                x = (struct msg){0};
                put_uint(&x, 1, a == A_DUP_LOCATION ? 1 : l);
                put_uint(&x, 2, 1);
                put_uint(&x, 3, 0x1000 + 16 * l);
                y = (struct msg){0};
                put_uint(&y, 1, l);
                put_msg(&x, 4, &y);
                if (a == A_MISSING_INLINE_FUNCTION && l == 2) {
                        y = (struct msg){0};
                        put_uint(&y, 1, 77);
                        put_msg(&x, 4, &y);
                }
                put_msg(m, 4, &x);
        }
        x = (struct msg){0};
        unsigned depth = a == A_TOO_DEEP ? FP_STORE_MAX_FRAMES + 1 : 2;
        y = (struct msg){0};
        for (unsigned i = 0; i < depth; i++)
                put_varint(&y, 1 + i % 2);
        put_msg(&x, 1, &y);
        y = (struct msg){0};
        put_varint(&y, 3);
        put_varint(&y, 3000000);
        if (a == A_THREE_VALUES)
                put_varint(&y, 1);
        put_msg(&x, 2, &y);
        y = (struct msg){0};
        put_uint(&y, 1, 8);
        if (a == A_THREAD_AS_STRING)
                put_uint(&y, 2, 10);
        else
                put_uint(&y, 3, 7);
        put_msg(&x, 3, &y);
        y = (struct msg){0};
        put_uint(&y, 1, 9);
        put_uint(&y, 2, 10);
        put_msg(&x, 3, &y);
        put_msg(m, 2, &x);
        for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
                put_str(m, 6, strs[i]);
        put_uint(m, 12, 1000000);
}

static int gzip_bytes(const uint8_t *in, size_t n, uint8_t **ret, size_t *ret_len)
{
        z_stream z = {0};
        uint8_t *out = malloc(n + 128);
        if (!out || deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                return -ENOMEM;
        z.next_in = (uint8_t *)in;
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = (uInt)(n + 128);
        int zr = deflate(&z, Z_FINISH);
        *ret_len = z.total_out;
        deflateEnd(&z);
        *ret = out;
        return zr == Z_STREAM_END ? 0 : -EIO;
}

static int ingest_wire(const struct msg *m, size_t n, char *err, size_t errlen,
                       uint64_t *ret_samples)
{
        struct fp_upload_meta *meta = malloc(sizeof(*meta));
        struct fp_store_batch *b = NULL;
        uint8_t *gz = NULL;
        size_t gz_len = 0;
        int r;

        FP_CHECK(meta && fp_upload_parse_query(good_query, meta, err, errlen) == 0);
        FP_CHECK_EQ_INT(gzip_bytes(m->b, n, &gz, &gz_len), 0);
        r = fp_coll_ingest_build(meta, gz, gz_len, 0, &b, ret_samples, err, errlen);
        FP_CHECK(r < 0 ? b == NULL : b != NULL);
        fp_store_batch_free(b);
        free(gz);
        free(meta);
        return r;
}

/* The wire decoder against handcrafted messages: each attack named, every prefix survived. */
static void test_wire(void)
{
        static const struct {
                enum attack a;
                int r;
                const char *says;
        } cases[] = {
            {A_DUP_LOCATION, -EBADMSG, "location id 1 is not unique"},
            {A_MISSING_INLINE_FUNCTION, -EBADMSG, "refers to function 77, which does not exist"},
            {A_THREE_VALUES, -EBADMSG, "values for 2 sample types"},
            {A_THREAD_AS_STRING, -EINVAL, "label 'thread' must be a thread id"},
            {A_TOO_DEEP, -EINVAL, "at most 4096 are kept"},
            {A_ZERO_MAPPING_ID, -EBADMSG, "mapping 0 has id 0"},
        };
        struct msg m;
        uint64_t samples = 0;
        char err[512];

        wire_profile(&m, A_NONE);
        FP_CHECK_EQ_INT(ingest_wire(&m, m.n, err, sizeof(err), &samples), 0);
        FP_CHECK_EQ_INT(samples, 3);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                wire_profile(&m, cases[i].a);
                err[0] = 0;
                FP_CHECK_EQ_INT(ingest_wire(&m, m.n, err, sizeof(err), &samples), cases[i].r);
                if (!strstr(err, cases[i].says))
                        fprintf(stderr, "attack %d: '%s' lacks '%s'\n", (int)cases[i].a, err,
                                cases[i].says);
                FP_CHECK(strstr(err, cases[i].says) != NULL);
                FP_CHECK(strchr(err, '\n') == NULL);
        }
        /* Every prefix, and bytes scribbled: an answer (usually an error), never a crash. */
        wire_profile(&m, A_NONE);
        size_t refused = 0;
        for (size_t n = 0; n < m.n; n++)
                refused += ingest_wire(&m, n, err, sizeof(err), &samples) < 0;
        FP_CHECK(refused > m.n / 2);
        srandom(11);
        struct msg bad;
        for (int k = 0; k < 500; k++) {
                bad = m;
                for (int j = 0; j < 3; j++)
                        bad.b[(size_t)random() % bad.n] = (uint8_t)random();
                (void)ingest_wire(&bad, bad.n, err, sizeof(err), &samples);
        }
        printf("wire decoder: %zu of %zu prefixes refused\n", refused, m.n);
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
        test_wire();
        test_host_round();
        test_escaping();
        return FP_TEST_DONE();
}
