/* SPDX-License-Identifier: MIT */
/*
 * The query API's parts that need no server: label selectors
 * (collector/read/selector.c), protobuf JSON written from binary by a
 * message's table (collector/http/pbjson.c), and the flame graph walked
 * level by level as Pyroscope's FlameGraph lays it out
 * (proto/pprof_flame.c, fp_flame_levels), and the query API's request
 * decoders (fp_coll_querier_decode(), collector/read/querier.c) on the
 * fuzz target's seeds and on bodies it must refuse.
 */
#include "fp-test.h"
#include "pbjson.h"
#include "pbwire.h"
#include "pprof.h"
#include "querier.h"
#include "selector.h"

#include <dirent.h>
#include <errno.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A series' labels for the matcher: "name=value" pairs. */
struct labels {
        const char *const *kv;
};

static const char *label(void *ctx, const char *name)
{
        const struct labels *l = ctx;
        for (const char *const *p = l->kv; *p; p++) {
                size_t n = strlen(name);
                if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
                        return *p + n + 1;
        }
        return "";
}

/* Whether text parses and selects the labels kv. -1: it does not parse. */
static int selects(const char *text, const char *const *kv)
{
        struct fp_selector s;
        struct labels l = {kv};
        char err[256];

        if (fp_sel_parse(text, &s, err, sizeof(err)) < 0)
                return -1;
        int r = fp_sel_match(&s, label, &l);
        fp_sel_free(&s);
        return r;
}

static void test_selectors(void)
{
        static const char *const api[] = {"service_name=api", "host=web-1", "pid=42", NULL};
        static const char *const db[] = {"service_name=db", "host=db-1", "container=c0ffee", NULL};
        char err[256];
        struct fp_selector s;

        FP_CHECK_EQ_INT(selects(NULL, api), 1);
        FP_CHECK_EQ_INT(selects("", api), 1);
        FP_CHECK_EQ_INT(selects(" { } ", api), 1);
        FP_CHECK_EQ_INT(selects("{service_name=\"api\"}", api), 1);
        FP_CHECK_EQ_INT(selects("{service_name=\"api\"}", db), 0);
        FP_CHECK_EQ_INT(selects("{service_name!=\"api\"}", db), 1);
        FP_CHECK_EQ_INT(selects("{service_name!=\"api\"}", api), 0);
        /* Anchored at both ends, as Prometheus' are. */
        FP_CHECK_EQ_INT(selects("{host=~\"web-.*\"}", api), 1);
        FP_CHECK_EQ_INT(selects("{host=~\"web\"}", api), 0);
        FP_CHECK_EQ_INT(selects("{host=~\"eb-1\"}", api), 0);
        FP_CHECK_EQ_INT(selects("{host!~\"web-.*\"}", db), 1);
        FP_CHECK_EQ_INT(selects("{host!~\"web-.*\"}", api), 0);
        FP_CHECK_EQ_INT(selects("{host=~\"web-1|db-1\", service_name=\"db\"}", db), 1);
        FP_CHECK_EQ_INT(selects("{host=~\"web-1|db-1\", service_name=\"db\"}", api), 0);
        /* A label a series lacks reads as "". */
        FP_CHECK_EQ_INT(selects("{container=\"\"}", api), 1);
        FP_CHECK_EQ_INT(selects("{container=\"\"}", db), 0);
        FP_CHECK_EQ_INT(selects("{container!=\"\"}", db), 1);
        FP_CHECK_EQ_INT(selects("{container=~\".+\"}", api), 0);
        /* Quotes, escapes, a trailing comma, spaces. */
        FP_CHECK_EQ_INT(selects("{ service_name = 'api' , }", api), 1);
        FP_CHECK_EQ_INT(selects("{service_name=`api`}", api), 1);
        static const char *const odd[] = {"path=a\"b\\c\nd", NULL};
        FP_CHECK_EQ_INT(selects("{path=\"a\\\"b\\\\c\\nd\"}", odd), 1);
        FP_CHECK_EQ_INT(selects("{path=`a\"b\\c\nd`}", odd), 1);
        FP_CHECK(fp_sel_parse("{a=\"1\", b=~\"x\", a=\"2\"}", &s, err, sizeof(err)) == 0);
        FP_CHECK_EQ_STR(fp_sel_equal(&s, "a"), "1");
        FP_CHECK(fp_sel_equal(&s, "b") == NULL);
        fp_sel_free(&s);

        /* Malformed: each one line, nothing to free. */
        static const char *const bad[] = {
            "service_name=\"api\"", /* no braces */
            "{service_name=\"api\"",
            "{service_name=\"api}",
            "{service_name=api}",
            "{service_name==\"api\"}",
            "{service_name~\"api\"}",
            "{=\"api\"}",
            "{1abc=\"x\"}",
            "{a=\"x\" b=\"y\"}",
            "{a=\"x\"} trailing",
            "{a=~\"(\"}",
            "{a=~\"[z-a]\"}",
            "{a=\"\\q\"}",
            "{a=\"x\",,}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                err[0] = 0;
                int r = fp_sel_parse(bad[i], &s, err, sizeof(err));
                FP_CHECK(r == -EINVAL);
                FP_CHECK(err[0] && !strchr(err, '\n'));
                if (r == 0)
                        fprintf(stderr, "parsed: %s\n", bad[i]);
        }
        /* Bounds: too many matchers, too long a text, name or expression. */
        char big[FP_SEL_MAX_TEXT + 64];
        size_t n = (size_t)snprintf(big, sizeof(big), "{");
        for (int i = 0; i <= FP_SEL_MAX_MATCHERS; i++)
                n += (size_t)snprintf(big + n, sizeof(big) - n, "a%d=\"x\",", i);
        snprintf(big + n, sizeof(big) - n, "}");
        FP_CHECK(fp_sel_parse(big, &s, err, sizeof(err)) == -EINVAL && strstr(err, "matchers"));
        memset(big, ' ', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        FP_CHECK(fp_sel_parse(big, &s, err, sizeof(err)) == -EINVAL);
        char name[FP_SEL_MAX_NAME + 16] = "{";
        memset(name + 1, 'n', FP_SEL_MAX_NAME + 1);
        strcpy(name + FP_SEL_MAX_NAME + 2, "=\"\"}");
        FP_CHECK(fp_sel_parse(name, &s, err, sizeof(err)) == -EINVAL);
        char re[FP_SEL_MAX_REGEX + 32];
        n = (size_t)snprintf(re, sizeof(re), "{a=~\"");
        memset(re + n, 'x', FP_SEL_MAX_REGEX + 1);
        strcpy(re + n + FP_SEL_MAX_REGEX + 1, "\"}");
        FP_CHECK(fp_sel_parse(re, &s, err, sizeof(err)) == -EINVAL && strstr(err, "longer"));
}

/*
 * Patterns as an attacker writes them: glibc's regcomp() doubled its time
 * and memory with each '+' of a++++... (22 took 2.9 GB and 8-22 s of the
 * loop). RE2 refuses what it cannot compile within its budget and matches
 * the rest in linear time; its syntax is Go's, which Grafana sends.
 */
static void test_hostile_patterns(void)
{
        static const char *const a1[] = {"service_name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!",
                                         NULL};
        char err[256], text[256], *value;
        struct fp_selector s;

        /* a++++...: not a pattern in RE2's syntax; one line, at once. */
        snprintf(text, sizeof(text), "{service_name=~\"a++++++++++++++++++++++\"}");
        FP_CHECK(fp_sel_parse(text, &s, err, sizeof(err)) == -EINVAL);
        FP_CHECK(strstr(err, "invalid") && strstr(err, "service_name") && !strchr(err, '\n'));
        /* Nested counted repetition past RE2's limits: refused, not expanded. */
        FP_CHECK(fp_sel_parse("{a=~\"((a{1,1000}){1,1000}){1,1000}\"}", &s, err, sizeof(err)) ==
                 -EINVAL);
        /* A program past the memory bound: refused as too large. */
        FP_CHECK(fp_sel_parse("{a=~\"(((.{0,100}){0,100}){0,100})\"}", &s, err, sizeof(err)) ==
                 -EINVAL);
        /* Classic catastrophic backtracking shapes match (or not) as they should. */
        FP_CHECK_EQ_INT(selects("{service_name=~\"(a+)+\"}", a1), 0);
        FP_CHECK_EQ_INT(selects("{service_name=~\"(a|aa)+!\"}", a1), 1);
        FP_CHECK_EQ_INT(selects("{service_name=~\"(.*a){12}\"}", a1), 0);
        /* (.*){1,1000} compiles within its bound and matches a 4 KiB value. */
        FP_CHECK(fp_sel_parse("{v=~\"(.*){1,1000}x\"}", &s, err, sizeof(err)) == 0);
        FP_CHECK((value = malloc(4097)) != NULL);
        memset(value, 'y', 4096);
        value[4096] = 0;
        const char *kv_value[] = {NULL, NULL};
        char *kv = malloc(4099);
        FP_CHECK(kv != NULL);
        snprintf(kv, 4099, "v=%s", value);
        kv_value[0] = kv;
        struct labels l = {kv_value};
        FP_CHECK(!fp_sel_match(&s, label, &l));
        kv[4097] = 'x';
        FP_CHECK(fp_sel_match(&s, label, &l));
        fp_sel_free(&s);
        free(kv);
        free(value);
        /* RE2's syntax (Go's): classes, flags; '.' matches a newline. */
        static const char *const pid[] = {"pid=4242", "path=a\nb", NULL};
        FP_CHECK_EQ_INT(selects("{pid=~\"\\\\d+\"}", pid), 1);
        FP_CHECK_EQ_INT(selects("{pid=~\"(?i)PID|4242\"}", pid), 1);
        FP_CHECK_EQ_INT(selects("{path=~\"a.b\"}", pid), 1);
        /* A pattern that would close the anchoring group is refused, not unanchored. */
        FP_CHECK_EQ_INT(selects("{pid=~\"x)|(.*\"}", pid), -1);
        FP_CHECK_EQ_INT(selects("{pid=~\"42\"}", pid), 0);
}

/* ---- JSON from binary ---- */

static const char *const colors[] = {"RED", "GREEN", NULL};
static const struct fp_pbj_field inner_f[] = {
    {"name", NULL, 1, FP_PBJ_STRING, false, NULL, NULL},
    {"values", NULL, 2, FP_PBJ_INT, true, NULL, NULL},
};
static const struct fp_pbj_msg inner = {"an Inner", inner_f, 2};
static const struct fp_pbj_field outer_f[] = {
    {"items", NULL, 1, FP_PBJ_MSG, true, &inner, NULL},
    {"total", NULL, 2, FP_PBJ_INT, false, NULL, NULL},
    {"ratio", NULL, 3, FP_PBJ_DOUBLE, false, NULL, NULL},
    {"color", NULL, 4, FP_PBJ_ENUM, false, NULL, colors},
    {"ok", NULL, 5, FP_PBJ_BOOL, false, NULL, NULL},
    {"blob", NULL, 6, FP_PBJ_BYTES, false, NULL, NULL},
    {"ids", NULL, 7, FP_PBJ_UINT, true, NULL, NULL},
};
static const struct fp_pbj_msg outer = {"an Outer", outer_f, 7};

static void to_json(const uint8_t *buf, size_t len, char *out, size_t outlen, int *ret)
{
        FILE *f = fmemopen(out, outlen, "w");
        *ret = fp_pbjson_write(buf, len, &outer, fp_write_file, f);
        fclose(f);
}

static void test_json(void)
{
        struct pbout o = {0}, m = {0}, packed = {0};
        char json[1024];
        double d = 0.5;
        uint64_t bits;
        int r;

        out_str(&m, 1, "a\"b");
        out_varint(&packed, 3);
        out_varint(&packed, (uint64_t)-2); /* an int64 of -2 */
        out_len(&m, 2, packed.buf, packed.len);
        out_msg(&o, 1, &m);
        out_str(&m, 1, "second");
        out_uint(&m, 2, 7); /* unpacked */
        out_msg(&o, 1, &m);
        out_uint(&o, 2, 5);
        out_uint(&o, 2, 9000000000ULL); /* the last one counts */
        memcpy(&bits, &d, sizeof(bits));
        out_fixed64(&o, 3, bits);
        out_uint(&o, 4, 1);
        out_uint(&o, 5, 1);
        out_len(&o, 6, "hi!", 3);
        out_uint(&o, 7, UINT64_MAX);
        out_uint(&o, 99, 1); /* unknown: left out */
        to_json(o.buf, o.len, json, sizeof(json), &r);
        FP_CHECK_EQ_INT(r, 0);
        FP_CHECK_EQ_STR(json,
                        "{\"items\":[{\"name\":\"a\\\"b\",\"values\":[\"3\",\"-2\"]},"
                        "{\"name\":\"second\",\"values\":[\"7\"]}],\"total\":\"9000000000\","
                        "\"ratio\":0.500000,\"color\":\"GREEN\",\"ok\":true,\"blob\":\"aGkh\","
                        "\"ids\":[\"18446744073709551615\"]}");
        /* Not such a message: a truncated field, a string where a number is, a packed single. */
        to_json(o.buf, o.len - 1, json, sizeof(json), &r);
        FP_CHECK_EQ_INT(r, -EBADMSG);
        o.len = 0;
        out_str(&o, 2, "x");
        to_json(o.buf, o.len, json, sizeof(json), &r);
        FP_CHECK_EQ_INT(r, -EBADMSG);
        /* Read back: the JSON into binary and again into JSON, the same text. */
        uint8_t *bin;
        size_t bin_len;
        char err[256], again[1024];
        const char *in = "{\"items\":[{\"name\":\"x\",\"values\":[\"1\",2]}],\"color\":\"RED\","
                         "\"ok\":true,\"total\":\"-4\"}";
        r = fp_pbjson_read((const uint8_t *)in, strlen(in), &outer, &bin, &bin_len, err,
                           sizeof(err));
        FP_CHECK_EQ_INT(r, 0);
        if (r == 0) {
                to_json(bin, bin_len, again, sizeof(again), &r);
                FP_CHECK_EQ_STR(again, "{\"items\":[{\"name\":\"x\",\"values\":[\"1\",\"2\"]}],"
                                       "\"total\":\"-4\",\"color\":\"RED\",\"ok\":true}");
                free(bin);
        }
        in = "{\"color\":\"BLUE\"}";
        FP_CHECK(fp_pbjson_read((const uint8_t *)in, strlen(in), &outer, &bin, &bin_len, err,
                                sizeof(err)) == -EINVAL);
        FP_CHECK(strstr(err, "color") != NULL);
        free(o.buf);
        free(m.buf);
        free(packed.buf);
}

/* ---- the flame graph by levels ---- */

struct bars {
        struct fp_flame_bar b[64];
        size_t n;
};

static int on_bar(void *ctx, const struct fp_flame_bar *b)
{
        struct bars *bs = ctx;
        if (bs->n < 64)
                bs->b[bs->n++] = *b;
        return 0;
}

static void test_levels(void)
{
        /* main;a;x 5, main;a 2, main;b 3, other 1: leaf first in pprof. */
        struct fp_pprof *p = fp_pprof_new();
        struct fp_flame *f = NULL;
        struct bars bs = {0};
        const char *stacks[][4] = {
            {"x", "a", "main", NULL}, {"a", "main", NULL}, {"b", "main", NULL}, {"other", NULL}};
        int64_t counts[] = {5, 2, 3, 1};

        FP_CHECK(p && fp_pprof_add_sample_type(p, "samples", "count") == 0);
        for (size_t i = 0; i < 4; i++) {
                uint64_t locs[4];
                size_t n = 0;
                for (; stacks[i][n]; n++) {
                        uint64_t fn = 0;
                        FP_CHECK(fp_pprof_function(p, stacks[i][n], "", &fn) == 0);
                        FP_CHECK(fp_pprof_location(p, 0, 0x1000 + 16 * fn, fn, &locs[n]) == 0);
                }
                FP_CHECK(fp_pprof_add_sample(p, locs, n, &counts[i], NULL, 0) == 0);
        }
        FP_CHECK(fp_flame_new(&f) == 0);
        FP_CHECK(fp_flame_add(f, p, 0, 0) == 0);
        FP_CHECK(fp_flame_levels(f, on_bar, &bs) == 0);
        /* Level by level; in each, left to right; a node's self first, then its children heaviest
         * first. */
        static const struct {
                size_t level;
                const char *name;
                int64_t x, total, self;
        } want[] = {
            {0, "all", 0, 11, 0}, {1, "main", 0, 10, 0}, {1, "other", 10, 1, 1},
            {2, "a", 0, 7, 2},    {2, "b", 7, 3, 3},     {3, "x", 2, 5, 5},
        };
        FP_CHECK_EQ_INT(bs.n, 6);
        for (size_t i = 0; i < 6 && i < bs.n; i++) {
                FP_CHECK_EQ_INT(bs.b[i].level, want[i].level);
                FP_CHECK_EQ_STR(fp_flame_name(f, bs.b[i].name), want[i].name);
                FP_CHECK_EQ_INT(bs.b[i].x[0], want[i].x);
                FP_CHECK_EQ_INT(bs.b[i].total[0], want[i].total);
                FP_CHECK_EQ_INT(bs.b[i].self[0], want[i].self);
        }
        FP_CHECK_EQ_STR(fp_flame_name(f, 100000), "");
        fp_flame_free(f);
        fp_pprof_free(p);
}

/* Reads a request of method path: 0, or < 0 with err the Connect error that refused it. */
static int decode(const char *path, bool json, const char *body, size_t len, char *err)
{
        err[0] = 0;
        return fp_coll_querier_decode(path, json, (const uint8_t *)body, len, err, 256);
}

static void test_querier_decode(void)
{
        const char *names = "/querier.v1.QuerierService/LabelNames";
        char err[256], path[512], body[4096];
        unsigned seeds = 0;
        size_t n_methods = 0;

        while (fp_coll_querier_method(n_methods))
                n_methods++;
        FP_CHECK_EQ_INT(n_methods, 9);

        /* Every seed of the fuzz target is a request its method reads (fuzz-querier.c's layout). */
        DIR *d = opendir(FP_TEST_DATA "/../fuzz/corpus/querier");
        FP_CHECK(d != NULL);
        for (struct dirent *e; d && (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), FP_TEST_DATA "/../fuzz/corpus/querier/%s", e->d_name);
                FILE *f = fopen(path, "rb");
                size_t n = f ? fread(body, 1, sizeof(body), f) : 0;
                if (f)
                        fclose(f);
                FP_CHECK(n > 1);
                int r = decode(fp_coll_querier_method(((unsigned char)body[0] >> 1) % n_methods),
                               body[0] & 1, body + 1, n - 1, err);
                if (r != 0)
                        fprintf(stderr, "seed %s: %s\n", e->d_name, err);
                FP_CHECK_EQ_INT(r, 0);
                seeds++;
        }
        if (d)
                closedir(d);
        FP_CHECK(seeds >= 16);

        FP_CHECK_EQ_INT(decode("/querier.v1.QuerierService/Nothing", false, "", 0, err), -ENOENT);
        FP_CHECK_EQ_INT(decode(names, true, "{\"matchers\":[\"{a=\\\"b\\\"}\"]}", 26, err), 0);
        /* JSON that is not the message's, a field of the wrong type, a cut binary message. */
        FP_CHECK(decode(names, true, "{\"matchers\":", 12, err) < 0);
        FP_CHECK(strncmp(err, "invalid_argument: ", 18) == 0);
        FP_CHECK(decode(names, true, "{\"start\":\"x\"}", 13, err) < 0);
        FP_CHECK(strncmp(err, "invalid_argument: ", 18) == 0);
        FP_CHECK(decode(names, false,
                        "\x0a\x05"
                        "ab",
                        4, err) < 0); /* 5 bytes said, 2 there */
        FP_CHECK(strncmp(err, "invalid_argument: ", 18) == 0);
        FP_CHECK(decode(names, false,
                        "\x0a\x02"
                        "a\0",
                        4, err) < 0); /* a NUL in a string */
        FP_CHECK(strstr(err, "NUL") != NULL);
        FP_CHECK(decode(names, false, "\x10\x01", 2, err) == 0); /* start = 1 */
        FP_CHECK(decode(names, false,
                        "\x12\x01"
                        "x",
                        3, err) < 0); /* start as bytes */
        /* A Diff's half is read as its own message: a type that is a number is refused there. */
        FP_CHECK(decode("/querier.v1.QuerierService/Diff", false, "\x0a\x02\x08\x01", 4, err) < 0);
        FP_CHECK(strstr(err, "field 1") != NULL);
}

int main(void)
{
        test_selectors();
        test_hostile_patterns();
        test_json();
        test_levels();
        test_querier_decode();
        return FP_TEST_DONE();
}
