/* SPDX-License-Identifier: MIT */
/*
 * The agent's other protocols (agent/keep/wire.c) and the pprof cuts they
 * are made of: a profile cut by its samples' labels keeps only what those
 * samples use; URLs name their protocol; a credentials file is read or
 * refused in one line; a host tier's round becomes a series per service,
 * every sample in exactly one; a damaged stored profile is refused.
 */
#include "fp-test.h"
#include "pbwire.h"
#include "pprof.h"
#include "upload_contract.h"
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A sample of stack names (leaf first) with labels thread_name and service. */
static void add(struct fp_pprof *p, const char *const *names, size_t n, int64_t count,
                const char *thread, const char *service)
{
        uint64_t locs[8], fid, m;
        int64_t v[] = {count, count * 1000};
        struct fp_pprof_label l[] = {{.key = "thread_name", .str = thread},
                                     {.key = "service", .str = service},
                                     {.key = "exe", .str = "/bin/prog"}};

        FP_CHECK(fp_pprof_mapping(p, 0x1000, 0x9000, 0, "/bin/prog", "bid", &m) == 0);
        for (size_t i = 0; i < n; i++) {
                FP_CHECK(fp_pprof_function(p, names[i], NULL, &fid) == 0);
                FP_CHECK(fp_pprof_location(p, m, 0x1000 + 16 * fid, fid, &locs[i]) == 0);
        }
        FP_CHECK(fp_pprof_add_sample(p, locs, n, v, l, 3) == 0);
}

static struct fp_pprof *two_services(void)
{
        const char *a[] = {"leaf_a", "mid_a", "main"}, *b[] = {"leaf_b", "mid_b", "main"};
        struct fp_pprof *p = fp_pprof_new();

        FP_CHECK(fp_pprof_add_sample_type(p, "samples", "count") == 0);
        FP_CHECK(fp_pprof_add_sample_type(p, "cpu", "nanoseconds") == 1);
        add(p, a, 3, 5, "t1", "alpha");
        add(p, b, 3, 7, "t2", "beta");
        add(p, a, 2, 1, "t3", "alpha");
        return p;
}

static bool is_alpha(const struct fp_pprof *p, size_t i, void *arg)
{
        struct fp_pprof_label l;
        (void)arg;
        return fp_pprof_sample_label(p, i, 1, &l) == 0 && l.str && strcmp(l.str, "alpha") == 0;
}

static void test_merge_where(void)
{
        struct fp_pprof *p = two_services(), *q = fp_pprof_new();
        struct fp_pprof_location_view lv;

        printf("# merge_where\n");
        FP_CHECK_EQ_INT(fp_pprof_merge_where(q, p, is_alpha, NULL), 0);
        FP_CHECK_EQ_INT(fp_pprof_n_samples(q), 2);
        FP_CHECK_EQ_INT(fp_pprof_total(q, 0), 6);
        FP_CHECK_EQ_INT(fp_pprof_total(q, 1), 6000);
        /* Only alpha's locations: leaf_a, mid_a, main; none of beta's. */
        FP_CHECK_EQ_INT(fp_pprof_n_locations(q), 3);
        for (uint64_t id = 1; id <= 3; id++) {
                FP_CHECK(fp_pprof_location_get(q, id, &lv) == 0);
                FP_CHECK(strstr(lv.function_name, "_b") == NULL);
        }
        uint8_t *buf;
        size_t len;
        FP_CHECK(fp_pprof_encode(q, 0, &buf, &len) == 0);
        FP_CHECK(memmem(buf, len, "mid_b", 5) == NULL);
        FP_CHECK(memmem(buf, len, "beta", 4) == NULL);
        FP_CHECK(memmem(buf, len, "mid_a", 5) != NULL);
        free(buf);
        FP_CHECK_EQ_INT(fp_pprof_merge_where(q, q, is_alpha, NULL), -EINVAL);
        fp_pprof_free(p);
        fp_pprof_free(q);
}

static void test_urls(void)
{
        enum fp_wire w;
        size_t skip;

        printf("# urls\n");
        FP_CHECK(fp_wire_of_url("http://h:1", &w, &skip) == 0 && w == FP_WIRE_NATIVE && !skip);
        FP_CHECK(fp_wire_of_url("pyroscope+https://h:1", &w, &skip) == 0 &&
                 w == FP_WIRE_PYROSCOPE && skip == 10);
        FP_CHECK(fp_wire_of_url("otlp+http://h:1", &w, &skip) == 0 && w == FP_WIRE_OTLP &&
                 skip == 5);
        FP_CHECK_EQ_INT(fp_wire_of_url("otlp+ftp://h", &w, &skip), -EINVAL);
        FP_CHECK_EQ_INT(fp_wire_of_url("zipkin+http://h", &w, &skip), -EINVAL);
        FP_CHECK_EQ_INT(fp_wire_of_url("pyroscope+", &w, &skip), -EINVAL);
        FP_CHECK_EQ_STR(fp_wire_path(FP_WIRE_OTLP), "/v1development/profiles");
}

static int creds(const char *dir, const char *text, mode_t mode, struct fp_wire_credentials *c,
                 char *err, size_t len)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/creds", dir);
        FILE *f = fopen(path, "w");
        FP_CHECK(f != NULL);
        fputs(text, f);
        fclose(f);
        chmod(path, mode);
        return fp_wire_read_credentials(path, c, err, len);
}

static void test_credentials(void)
{
        char dir[] = "/tmp/fp-test-wire.XXXXXX", err[512];
        struct fp_wire_credentials c;

        printf("# credentials\n");
        FP_CHECK(mkdtemp(dir) != NULL);
        FP_CHECK_EQ_INT(
            creds(dir, "# x\n  basic  u:p:w  \r\ntenant team-1\n", 0600, &c, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(c.user, "u");
        FP_CHECK_EQ_STR(c.password, "p:w");
        FP_CHECK_EQ_STR(c.tenant, "team-1");
        FP_CHECK(c.bearer == NULL);
        fp_wire_credentials_clear(&c);
        FP_CHECK_EQ_INT(creds(dir, "bearer abc\n", 0640, &c, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(c.bearer, "abc");
        fp_wire_credentials_clear(&c);
        static const struct {
                const char *text;
                mode_t mode;
                const char *want;
        } bad[] = {
            {"bearer abc\n", 0604, "can be read or written by anyone"},
            {"bearer a\nbasic u:p\n", 0600, "one of bearer and basic"},
            {"basic nopassword\n", 0600, "USER:PASSWORD"},
            {"basic :p\n", 0600, "USER:PASSWORD"},
            {"tenant a/b\n", 0600, "letters, digits"},
            {"tenant a\ntenant b\n", 0600, "twice"},
            {"token x\n", 0600, "unknown key 'token'"},
            {"bearer\n", 0600, "without a value"},
            {"bearer a b\n", 0600, "no spaces"},
            {"bearer a\x01\n", 0600, "non-printable"},
            {"# only a comment\n", 0600, "holds no bearer"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int r = creds(dir, bad[i].text, bad[i].mode, &c, err, sizeof(err));
                FP_CHECK(r < 0);
                FP_CHECK(strstr(err, bad[i].want) != NULL);
                FP_CHECK(strchr(err, '\n') == NULL);
                FP_CHECK(c.bearer == NULL && c.user == NULL && c.tenant == NULL);
        }
        char path[256];
        snprintf(path, sizeof(path), "%s/creds", dir);
        unlink(path);
        FP_CHECK(fp_wire_read_credentials(path, &c, err, sizeof(err)) == -ENOENT);
        rmdir(dir);
}

/* A LEN field's bytes as text. */
static void text_of(struct pb x, char *out, size_t len)
{
        snprintf(out, len, "%.*s", (int)(x.end - x.p), (const char *)x.p);
}

/* The PushRequest's series: their service_name labels, and each raw profile's sample count. */
static size_t push_series(const uint8_t *buf, size_t len, char names[][32], int64_t *counts)
{
        struct pb c = {buf, buf + len}, s = {0};
        size_t n = 0;
        uint32_t f;
        unsigned wt;
        uint64_t v;

        while (c.p < c.end && pb_field(&c, &f, &wt, &v, &s) == 0) {
                struct pb part = {0};
                uint32_t pf;
                names[n][0] = 0;
                counts[n] = -1;
                while (s.p < s.end && pb_field(&s, &pf, &wt, &v, &part) == 0) {
                        char name[32] = "", value[32] = "";
                        struct pb x = {0};
                        while (part.p < part.end && pb_field(&part, &f, &wt, &v, &x) == 0) {
                                if (pf == 1) /* a LabelPair: name 1, value 2 */
                                        text_of(x, f == 1 ? name : value, 32);
                                else if (f == 1) { /* a RawSample's raw_profile */
                                        struct fp_pprof *p;
                                        FP_CHECK(fp_pprof_decode(x.p, (size_t)(x.end - x.p), 0, &p,
                                                                 NULL, 0) == 0);
                                        counts[n] = fp_pprof_total(p, 0);
                                        fp_pprof_free(p);
                                }
                        }
                        if (pf == 1 && strcmp(name, "service_name") == 0)
                                snprintf(names[n], 32, "%s", value);
                }
                n++;
        }
        return n;
}

static void test_host_round(void)
{
        struct fp_pprof *p = two_services();
        struct fp_upload_meta *m = calloc(1, sizeof(*m));
        uint8_t *gz, *body;
        size_t gz_len, len;
        char err[256], names[8][32];
        int64_t counts[8];

        printf("# a host tier's round\n");
        FP_CHECK(fp_pprof_encode(p, 1, &gz, &gz_len) == 0);
        snprintf(m->host, sizeof(m->host), "h1");
        snprintf(m->event, sizeof(m->event), "cpu-clock");
        m->host_tier = true;
        m->n_drops = 1;
        snprintf(m->drops[0].reason, sizeof(m->drops[0].reason), "process_unknown");
        m->drops[0].count = 4;
        FP_CHECK_EQ_INT(
            fp_wire_body(FP_WIRE_PYROSCOPE, m, "k1", gz, gz_len, &body, &len, err, sizeof(err)), 0);
        size_t n = push_series(body, len, names, counts);
        FP_CHECK_EQ_INT(n, 3); /* alpha, beta and the tier's own, with its drops */
        FP_CHECK_EQ_STR(names[0], "alpha");
        FP_CHECK_EQ_INT(counts[0], 6);
        FP_CHECK_EQ_STR(names[1], "beta");
        FP_CHECK_EQ_INT(counts[1], 7);
        FP_CHECK_EQ_STR(names[2], "fleetprof-host-tier");
        FP_CHECK_EQ_INT(counts[2], 0);
        FP_CHECK(memmem(body, len, "k1.0", 4) != NULL && memmem(body, len, "k1.tier", 7) != NULL);
        /* The same upload makes the same bytes. */
        uint8_t *again;
        size_t again_len;
        FP_CHECK(fp_wire_body(FP_WIRE_PYROSCOPE, m, "k1", gz, gz_len, &again, &again_len, err,
                              sizeof(err)) == 0);
        FP_CHECK(again_len == len && memcmp(again, body, len) == 0);
        free(again);
        free(body);
        FP_CHECK(fp_wire_body(FP_WIRE_OTLP, m, "k1", gz, gz_len, &body, &len, err, sizeof(err)) ==
                 0);
        FP_CHECK(len > 20 && body[0] == 0x1f && body[1] == 0x8b);
        free(body);
        /* A damaged stored profile: refused with a line, nothing made. */
        gz[gz_len / 2] ^= 0x55;
        gz[gz_len - 1] ^= 0x55;
        int r = fp_wire_body(FP_WIRE_OTLP, m, "k1", gz, gz_len, &body, &len, err, sizeof(err));
        FP_CHECK(r < 0 && r != -ENOMEM && body == NULL && err[0]);
        free(gz);
        free(m);
        fp_pprof_free(p);
}

int main(void)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        test_merge_where();
        test_urls();
        test_credentials();
        test_host_round();
        return FP_TEST_DONE();
}
