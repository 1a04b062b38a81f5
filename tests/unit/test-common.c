/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/: escaping (JSON, HTML, URL, terminal) against
 * hostile bytes, the JSON writer, checked array growth, durations, token
 * files, error lines, and that fp_log reaches syslog once daemonized.
 */
#include "escape.h"
#include "fp-test.h"
#include "json.h"
#include "log.h"
#include "prom.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs an escaper into a string (malloc'd). */
static char *escaped(void (*fn)(fp_write_fn, void *, const char *), const char *s)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        fn(fp_write_file, f, s);
        fclose(f);
        return buf;
}

static void test_utf8(void)
{
        FP_CHECK(fp_utf8_valid("plain"));
        FP_CHECK(fp_utf8_valid("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5"));
        FP_CHECK(!fp_utf8_valid("\xff"));
        FP_CHECK(!fp_utf8_valid("\xc0\xaf"));         /* overlong '/' */
        FP_CHECK(!fp_utf8_valid("\xed\xa0\x80"));     /* a surrogate */
        FP_CHECK(!fp_utf8_valid("\xf4\x90\x80\x80")); /* past U+10FFFF */
        FP_CHECK(!fp_utf8_valid("\xe2\x82"));         /* cut short */
}

static void test_json_escape(void)
{
        char *s = escaped(fp_escape_json, "a\"b\\c\n\x1b[31m\xff\xc3\xa9");
        FP_CHECK_EQ_STR(s, "\"a\\\"b\\\\c\\u000a\\u001b[31m\\ufffd\xc3\xa9\"");
        free(s);
        s = escaped(fp_escape_json, NULL);
        FP_CHECK_EQ_STR(s, "\"\"");
        free(s);
}

static void test_html_url(void)
{
        char *s = escaped(fp_escape_html, "<a href='x'>&\"\x01\xfe");
        FP_CHECK_EQ_STR(s, "&lt;a href=&#39;x&#39;&gt;&amp;&quot;?\xef\xbf\xbd");
        free(s);
        s = escaped(fp_escape_url, "a b&c=d/\xc3\xa9~");
        FP_CHECK_EQ_STR(s, "a%20b%26c%3Dd%2F%C3%A9~");
        free(s);
}

static void test_terminal(void)
{
        char buf[64];
        /* ESC, BEL, CSI as C1 (U+009B), a lone invalid byte, a backslash, UTF-8 kept. */
        FP_CHECK_EQ_STR(fp_terminal_str("x\x1b]0;pwn\x07\xc2\x9b\xff\\\xc3\xa9", buf, sizeof(buf)),
                        "x\\x1b]0;pwn\\x07\\xc2\\x9b\\xff\\\\\xc3\xa9");
        /* Cut at a boundary: never half an escape or half a character. */
        FP_CHECK_EQ_STR(fp_terminal_str("ab\x1b", buf, 5), "ab");
        FP_CHECK_EQ_STR(fp_terminal_str("\xc3\xa9\xc3\xa9", buf, 4), "\xc3\xa9");
        FP_CHECK_EQ_STR(fp_terminal_str(NULL, buf, sizeof(buf)), "");
}

static void test_json_writer(void)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct fp_json j;

        fp_json_init(&j, fp_write_file, f);
        fp_json_begin_object(&j);
        fp_json_key(&j, "n");
        fp_json_int(&j, -3);
        fp_json_key(&j, "list");
        fp_json_begin_array(&j);
        fp_json_uint(&j, 18446744073709551615ULL);
        fp_json_double(&j, 1.25, 1);
        fp_json_double(&j, 0.0 / 0.0, 1);
        fp_json_bool(&j, true);
        fp_json_null(&j);
        fp_json_begin_object(&j);
        fp_json_end_object(&j);
        fp_json_end_array(&j);
        fp_json_key(&j, "s\x1b");
        fp_json_string(&j, "\xff");
        fp_json_end_object(&j);
        fclose(f);
        FP_CHECK_EQ_STR(buf, "{\"n\":-3,\"list\":[18446744073709551615,1.2,null,true,null,{}],"
                             "\"s\\u001b\":\"\\ufffd\"}");
        free(buf);
}

static void test_grow(void)
{
        int *a = NULL;
        size_t cap = 0;
        FP_CHECK_EQ_INT(fp_grow(&a, &cap, 1, sizeof(*a)), 0);
        FP_CHECK_EQ_INT(cap, 16);
        FP_CHECK_EQ_INT(fp_grow(&a, &cap, 17, sizeof(*a)), 0);
        FP_CHECK_EQ_INT(cap, 32);
        a[31] = 7;
        /* cap * size would overflow: refused, array and capacity unchanged. */
        FP_CHECK_EQ_INT(fp_grow(&a, &cap, SIZE_MAX / 2, sizeof(*a)), -ENOMEM);
        FP_CHECK_EQ_INT(fp_grow(&a, &cap, SIZE_MAX, 1), -ENOMEM);
        FP_CHECK_EQ_INT(cap, 32);
        FP_CHECK_EQ_INT(a[31], 7);
        free(a);
}

static void test_duration(void)
{
        uint64_t v = 0;
        FP_CHECK_EQ_INT(fp_parse_duration("90m", 0, UINT64_MAX, &v), 0);
        FP_CHECK_EQ_INT(v, 5400);
        FP_CHECK_EQ_INT(fp_parse_duration("7d", 0, UINT64_MAX, &v), 0);
        FP_CHECK_EQ_INT(v, 7 * 86400);
        FP_CHECK_EQ_INT(fp_parse_duration("12", 0, UINT64_MAX, &v), 0);
        FP_CHECK_EQ_INT(v, 12);
        FP_CHECK_EQ_INT(fp_parse_duration("1w", 0, UINT64_MAX, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_duration("-1s", 0, UINT64_MAX, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_duration("5ss", 0, UINT64_MAX, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_duration("", 0, UINT64_MAX, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_duration("2h", 0, 3600, &v), -ERANGE);
        FP_CHECK_EQ_INT(fp_parse_duration("99999999999999999999d", 0, UINT64_MAX, &v), -ERANGE);
        FP_CHECK_EQ_INT(fp_parse_duration("300000000000000000d", 0, UINT64_MAX, &v), -ERANGE);
}

static void test_token_file(void)
{
        char dir[] = "/tmp/fp-test-common.XXXXXX", path[128], err[256];
        char *tok = NULL;
        FP_CHECK(mkdtemp(dir) != NULL);
        snprintf(path, sizeof(path), "%s/token", dir);

        FILE *f = fopen(path, "w");
        fputs("  s3cret \nsecond line\n", f);
        fclose(f);
        FP_CHECK_EQ_INT(fp_read_token_file(path, &tok, err, sizeof(err)), 0);
        FP_CHECK_EQ_STR(tok, "s3cret");
        free(tok);

        f = fopen(path, "w");
        fputs("\n", f);
        fclose(f);
        FP_CHECK_EQ_INT(fp_read_token_file(path, &tok, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "is empty") != NULL);

        f = fopen(path, "w");
        fputs("to\x01ken\n", f);
        fclose(f);
        FP_CHECK_EQ_INT(fp_read_token_file(path, &tok, err, sizeof(err)), -EINVAL);
        unlink(path);

        /* A FIFO must not block the reader: refused at once. */
        FP_CHECK_EQ_INT(mkfifo(path, 0600), 0);
        FP_CHECK_EQ_INT(fp_read_token_file(path, &tok, err, sizeof(err)), -EINVAL);
        FP_CHECK(strstr(err, "not a regular file") != NULL);
        unlink(path);
        FP_CHECK_EQ_INT(fp_read_token_file(path, &tok, err, sizeof(err)), -ENOENT);
        rmdir(dir);
}

static void test_errf(void)
{
        char err[16];
        FP_CHECK_EQ_INT(fp_errf(err, sizeof(err), -EINVAL, "bad '%s'", "value-that-is-long"),
                        -EINVAL);
        FP_CHECK_EQ_STR(err, "bad 'value-that");
        FP_CHECK_EQ_INT(fp_errf(NULL, 0, -ENOENT, "ignored"), -ENOENT);
}

/* The Prometheus writer: escaped label values, exact integers, cumulative histograms. */
static void test_prom(void)
{
        static const double bounds[] = {0.01, 0.1, 1};
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct fp_prom p;
        struct fp_hist h;

        fp_prom_init(&p, fp_write_file, f);
        fp_prom_family(&p, "x_total", "counter", "Things.");
        fp_prom_value(&p, "x_total", "why", "a\"b\\c\nd\x1b\xc3\xa9", 18446744073709551615.0);
        fp_prom_value(&p, "x_total", NULL, NULL, 12345678901234.0);
        fp_prom_value(&p, "x_total", "f", "half", 0.5);
        fp_hist_init(&h, bounds, 3);
        fp_hist_observe(&h, 0.005);
        fp_hist_observe(&h, 0.01); /* on a bound: in that bucket */
        fp_hist_observe(&h, 0.5);
        fp_hist_observe(&h, 7);
        fp_prom_hist(&p, "lat_seconds", &h);
        fclose(f);
        FP_CHECK_EQ_STR(buf, "# HELP x_total Things.\n"
                             "# TYPE x_total counter\n"
                             "x_total{why=\"a\\\"b\\\\c\\nd???\"} 1.84467441e+19\n"
                             "x_total 12345678901234\n"
                             "x_total{f=\"half\"} 0.5\n"
                             "lat_seconds_bucket{le=\"0.01\"} 2\n"
                             "lat_seconds_bucket{le=\"0.1\"} 2\n"
                             "lat_seconds_bucket{le=\"1\"} 3\n"
                             "lat_seconds_bucket{le=\"+Inf\"} 4\n"
                             "lat_seconds_sum 7.515\n"
                             "lat_seconds_count 4\n");
        free(buf);
}

static void test_url_redact(void)
{
        char b[256];
        fp_url_redact("https://user:s3cret@collector:8443/base?token=abc#x", b, sizeof(b));
        FP_CHECK_EQ_STR(b, "https://collector:8443/base");
        fp_url_redact("http://127.0.0.1:7070", b, sizeof(b));
        FP_CHECK_EQ_STR(b, "http://127.0.0.1:7070");
        fp_url_redact("http://h/p@q?x=1", b, sizeof(b)); /* '@' in the path is no credential */
        FP_CHECK_EQ_STR(b, "http://h/p@q");
        fp_url_redact("weird", b, sizeof(b));
        FP_CHECK_EQ_STR(b, "weird");
}

static void test_parse_uint(void)
{
        uint64_t v = 7;
        FP_CHECK_EQ_INT(fp_parse_uint("42", 1, 100, &v), 0);
        FP_CHECK_EQ_INT(v, 42);
        FP_CHECK_EQ_INT(fp_parse_uint("0", 1, 100, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_uint("101", 1, 100, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_uint(" 5", 1, 100, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_uint("+5", 1, 100, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_uint("5x", 1, 100, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_uint("", 1, 100, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_uint(NULL, 1, 100, &v), -EINVAL);
        FP_CHECK_EQ_INT(fp_parse_uint("99999999999999999999999", 1, UINT64_MAX, &v), -EINVAL);
        FP_CHECK_EQ_INT(v, 42); /* untouched on failure */
}

/* fp_write_all: every byte through a pipe in small reads' time; a closed descriptor's errno. */
static void test_write_all(void)
{
        static char big[200000], back[sizeof(big)];
        size_t got = 0;
        int fds[2];

        for (size_t i = 0; i < sizeof(big); i++)
                big[i] = (char)(i * 7);
        FP_CHECK_EQ_INT(pipe(fds), 0);
        if (fork() == 0) { /* the writer: more than a pipe holds, so writes are short */
                close(fds[0]);
                _exit(fp_write_all(fds[1], big, sizeof(big)) == 0 ? 0 : 1);
        }
        close(fds[1]);
        for (ssize_t n; got < sizeof(back) && (n = read(fds[0], back + got, 4096)) > 0;)
                got += (size_t)n;
        close(fds[0]);
        wait(NULL);
        FP_CHECK(got == sizeof(big) && memcmp(big, back, sizeof(big)) == 0);
        FP_CHECK_EQ_INT(fp_write_all(fds[1], "x", 1), -EBADF);
        FP_CHECK_EQ_INT(errno, EBADF);
}

int main(void)
{
        test_parse_uint();
        test_url_redact();
        test_prom();
        test_utf8();
        test_json_escape();
        test_html_url();
        test_terminal();
        test_json_writer();
        test_grow();
        test_duration();
        test_token_file();
        test_errf();
        test_write_all();
        return FP_TEST_DONE();
}
