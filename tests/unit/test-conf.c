/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fp_conf (common/conf.c): defaults, typed values and their
 * bounds, the file parser (comments, quotes, bad lines, unknown and
 * repeated keys, line numbers in the error), and the precedence of the
 * command line over the file over the defaults, through real getopt_long.
 */
#include "conf.h"
#include "fp-test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct fp_conf_key keys[] = {
    {"socket", FP_CONF_STRING, "/run/x.sock", 0, 0, "PATH", "the socket"},
    {"collector", FP_CONF_STRING, NULL, 0, 0, "URL", "where to upload"},
    {"bucket", FP_CONF_UINT, "10", 1, 3600, "SECS", "bucket length"},
    {"store-max-mb", FP_CONF_UINT, "256", 1, 1048576, "N", "store budget"},
    {"verbose", FP_CONF_BOOL, "false", 0, 0, NULL, "say more"},
};
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

static char tmpdir[] = "/tmp/fp-test-conf.XXXXXX";

/* Writes text into a fresh file under tmpdir and returns its path (static buffer). */
static const char *write_file(const char *name, const char *text)
{
        static char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        f = fopen(path, "we");
        if (!f) {
                perror(path);
                exit(1);
        }
        fputs(text, f);
        fclose(f);
        return path;
}

/* Loads text as a file; returns the result, with the line and message. */
static int load_text(const char *text, unsigned *line, char *err, size_t err_len)
{
        struct fp_conf *c = NULL;
        int r;

        FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
        r = fp_conf_load(c, write_file("t.conf", text), line, err, err_len);
        fp_conf_free(c);
        return r;
}

static void test_defaults(void)
{
        struct fp_conf *c = NULL;

        FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
        FP_CHECK_EQ_STR(fp_conf_string(c, "socket"), "/run/x.sock");
        FP_CHECK(fp_conf_string(c, "collector") == NULL);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 10);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "store-max-mb"), 256);
        FP_CHECK(!fp_conf_bool(c, "verbose"));
        FP_CHECK_EQ_INT(fp_conf_source_of(c, "bucket"), FP_CONF_DEFAULT);
        fp_conf_free(c);
        fp_conf_free(NULL);

        /* A table whose default breaks its own bounds is refused. */
        static const struct fp_conf_key bad[] = {
            {"n", FP_CONF_UINT, "0", 1, 5, "N", "n"},
        };
        c = NULL;
        FP_CHECK_EQ_INT(fp_conf_new(bad, 1, &c), -ERANGE);
        FP_CHECK(c == NULL);
        static const struct fp_conf_key nodefault[] = {
            {"n", FP_CONF_UINT, NULL, 1, 5, "N", "n"},
        };
        FP_CHECK_EQ_INT(fp_conf_new(nodefault, 1, &c), -EINVAL);
}

static void test_set(void)
{
        struct fp_conf *c = NULL;
        char err[256];

        FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "3600", FP_CONF_FILE, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 3600);
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "1", FP_CONF_FILE, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 1);

        /* Bounds, both ends, and a failed set keeps the old value. */
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "0", FP_CONF_FILE, err, sizeof(err)), -ERANGE);
        FP_CHECK_EQ_STR(err, "bucket = 0: out of range, 1 to 3600");
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "3601", FP_CONF_FILE, err, sizeof(err)), -ERANGE);
        FP_CHECK_EQ_INT(
            fp_conf_set(c, "bucket", "99999999999999999999999", FP_CONF_FILE, err, sizeof(err)),
            -ERANGE);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 1);

        /* Not numbers. */
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "-5", FP_CONF_FILE, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "10s", FP_CONF_FILE, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_STR(err, "bucket = 10s: not a number (1 to 3600)");
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "", FP_CONF_FILE, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", " 5", FP_CONF_FILE, err, sizeof(err)), -EINVAL);
        /* On the command line the error reads as the option. */
        FP_CHECK_EQ_INT(fp_conf_set(c, "bucket", "x", FP_CONF_ARGS, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_STR(err, "--bucket x: not a number (1 to 3600)");

        /* Booleans. */
        FP_CHECK_EQ_INT(fp_conf_set(c, "verbose", "yes", FP_CONF_FILE, err, sizeof(err)), 0);
        FP_CHECK(fp_conf_bool(c, "verbose"));
        FP_CHECK_EQ_INT(fp_conf_set(c, "verbose", "Off", FP_CONF_FILE, err, sizeof(err)), 0);
        FP_CHECK(!fp_conf_bool(c, "verbose"));
        FP_CHECK_EQ_INT(fp_conf_set(c, "verbose", "maybe", FP_CONF_FILE, err, sizeof(err)),
                        -EINVAL);
        FP_CHECK_EQ_STR(err, "verbose = maybe: not a boolean (true or false)");

        /* Strings: any text; empty unsets. */
        FP_CHECK_EQ_INT(fp_conf_set(c, "collector", "http://h:1", FP_CONF_FILE, err, sizeof(err)),
                        0);
        FP_CHECK_EQ_STR(fp_conf_string(c, "collector"), "http://h:1");
        FP_CHECK_EQ_INT(fp_conf_set(c, "collector", "", FP_CONF_FILE, err, sizeof(err)), 0);
        FP_CHECK(fp_conf_string(c, "collector") == NULL);

        FP_CHECK_EQ_INT(fp_conf_set(c, "nope", "1", FP_CONF_FILE, err, sizeof(err)), -ENOENT);
        FP_CHECK_EQ_STR(err, "unknown key 'nope'");
        fp_conf_free(c);
}

static void test_file(void)
{
        struct fp_conf *c = NULL;
        const char *path;
        char err[512], want[512];
        unsigned line = 99;

        FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
        path = write_file("good.conf", "# fleetprof test\n"
                                       "\n"
                                       "   # indented comment\n"
                                       "socket = /tmp/a.sock\n"
                                       "bucket=30\n"
                                       "\tstore-max-mb   =   8   \r\n"
                                       "collector = \"http://h:9/#frag  \"\n"
                                       "verbose = on\n"
                                       "# bucket = 7   (commented out: not applied)\n");
        FP_CHECK_EQ_INT(fp_conf_load(c, path, &line, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(line, 0);
        FP_CHECK_EQ_STR(fp_conf_string(c, "socket"), "/tmp/a.sock");
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 30);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "store-max-mb"), 8);
        FP_CHECK_EQ_STR(fp_conf_string(c, "collector"), "http://h:9/#frag  ");
        FP_CHECK(fp_conf_bool(c, "verbose"));
        FP_CHECK_EQ_INT(fp_conf_source_of(c, "bucket"), FP_CONF_FILE);
        FP_CHECK_EQ_INT(fp_conf_source_of(c, "socket"), FP_CONF_FILE);
        fp_conf_free(c);

        /* Each bad file: the error names the FIRST bad line, by number. */
        FP_CHECK_EQ_INT(
            load_text("bucket = 5\n# ok\n\nsockt = /x\nbucket = 0\n", &line, err, sizeof(err)),
            -ENOENT);
        FP_CHECK_EQ_INT(line, 4);
        snprintf(want, sizeof(want), "%s/t.conf:4: unknown key 'sockt'", tmpdir);
        FP_CHECK_EQ_STR(err, want);

        FP_CHECK_EQ_INT(load_text("socket = /a\nbucket = 0\nsockt = 1\n", &line, err, sizeof(err)),
                        -ERANGE);
        FP_CHECK_EQ_INT(line, 2);
        snprintf(want, sizeof(want), "%s/t.conf:2: bucket = 0: out of range, 1 to 3600", tmpdir);
        FP_CHECK_EQ_STR(err, want);

        FP_CHECK_EQ_INT(load_text("\n\nthis is not a setting\n", &line, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(line, 3);
        snprintf(want, sizeof(want),
                 "%s/t.conf:3: expected 'key = value', got 'this is not a setting'", tmpdir);
        FP_CHECK_EQ_STR(err, want);

        FP_CHECK_EQ_INT(load_text("= 5\n", &line, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(line, 1);
        FP_CHECK_EQ_INT(load_text("bucket =\n", &line, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(load_text("socket = \"/x\n", &line, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(load_text("verbose = 2\n", &line, err, sizeof(err)), -EINVAL);

        FP_CHECK_EQ_INT(
            load_text("# a\nbucket = 5\nsocket = /s\nbucket = 6\n", &line, err, sizeof(err)),
            -EEXIST);
        FP_CHECK_EQ_INT(line, 4);
        snprintf(want, sizeof(want), "%s/t.conf:4: bucket is set twice (first on line 2)", tmpdir);
        FP_CHECK_EQ_STR(err, want);

        /* A NUL byte inside a line is refused, not read as the end of the line. */
        {
                char nul[] = "bucket = 5\nsocket = /a\0b\n";
                char p[256];
                FILE *f;
                snprintf(p, sizeof(p), "%s/nul.conf", tmpdir);
                f = fopen(p, "we");
                fwrite(nul, 1, sizeof(nul) - 1, f);
                fclose(f);
                FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
                FP_CHECK_EQ_INT(fp_conf_load(c, p, &line, err, sizeof(err)), -EINVAL);
                FP_CHECK_EQ_INT(line, 2);
                fp_conf_free(c);
        }

        /* A missing file: -ENOENT, line 0, the path and the reason. */
        FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
        snprintf(want, sizeof(want), "%s/missing.conf", tmpdir);
        FP_CHECK_EQ_INT(fp_conf_load(c, want, &line, err, sizeof(err)), -ENOENT);
        FP_CHECK_EQ_INT(line, 0);
        FP_CHECK(strstr(err, "missing.conf: No such file or directory") != NULL);
        /* An empty file is valid and changes nothing. */
        FP_CHECK_EQ_INT(fp_conf_load(c, write_file("empty.conf", ""), &line, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 10);
        fp_conf_free(c);
}

/* The command line, parsed by getopt_long with the generated table, beats the file. */
static void test_overrides(void)
{
        static const struct option extra[] = {{"config", required_argument, NULL, 'C'}};
        struct option opts[1 + N_KEYS + 1];
        struct fp_conf *c = NULL;
        const char *config = NULL;
        char err[256];
        char *argv[] = {"prog", "--bucket",  "20",           "--config",
                        NULL,   "--verbose", "--collector=", NULL};
        int argc = 7, o, r = 0;

        argv[4] = (char *)write_file("over.conf", "bucket = 30\n"
                                                  "store-max-mb = 8\n"
                                                  "collector = http://file:1\n"
                                                  "verbose = false\n");
        FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
        fp_conf_getopt_table(c, extra, 1, opts);
        FP_CHECK_EQ_STR(opts[0].name, "config");
        FP_CHECK_EQ_STR(opts[3].name, "bucket");
        FP_CHECK_EQ_INT(opts[3].has_arg, required_argument);
        FP_CHECK_EQ_INT(opts[5].has_arg, optional_argument);
        FP_CHECK(opts[1 + N_KEYS].name == NULL);

        optind = 1;
        opterr = 0;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (o == 'C')
                        config = optarg;
                else
                        r |= fp_conf_set_option(c, o, optarg, err, sizeof(err));
        }
        FP_CHECK_EQ_INT(r, 0);
        FP_CHECK(config != NULL);
        /* The file comes after the flags, as in the programs, and still loses to them. */
        FP_CHECK_EQ_INT(fp_conf_load(c, config, NULL, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 20);
        FP_CHECK_EQ_INT(fp_conf_source_of(c, "bucket"), FP_CONF_ARGS);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "store-max-mb"), 8);
        FP_CHECK_EQ_INT(fp_conf_source_of(c, "store-max-mb"), FP_CONF_FILE);
        FP_CHECK(fp_conf_bool(c, "verbose"));
        FP_CHECK(fp_conf_string(c, "collector") == NULL); /* --collector= unset it */
        FP_CHECK_EQ_STR(fp_conf_string(c, "socket"), "/run/x.sock");

        /* A file value that the command line overrides is still checked. */
        FP_CHECK_EQ_INT(
            fp_conf_load(c, write_file("over2.conf", "bucket = 0\n"), NULL, err, sizeof(err)),
            -ERANGE);
        /* Bad option values and values that are not options. */
        FP_CHECK_EQ_INT(fp_conf_set_option(c, FP_CONF_OPT_BASE + 2, "0", err, sizeof(err)),
                        -ERANGE);
        FP_CHECK_EQ_STR(err, "--bucket 0: out of range, 1 to 3600");
        FP_CHECK_EQ_INT(fp_conf_set_option(c, FP_CONF_OPT_BASE + 2, NULL, err, sizeof(err)),
                        -EINVAL);
        FP_CHECK_EQ_INT(fp_conf_set_option(c, 'x', "1", err, sizeof(err)), -ENOENT);
        FP_CHECK_EQ_INT(
            fp_conf_set_option(c, FP_CONF_OPT_BASE + (int)N_KEYS, "1", err, sizeof(err)), -ENOENT);
        FP_CHECK_EQ_INT(fp_conf_uint(c, "bucket"), 20);
        fp_conf_free(c);
}

static void test_help(void)
{
        struct fp_conf *c = NULL;
        char *buf = NULL;
        size_t len = 0;
        FILE *f;

        FP_CHECK_EQ_INT(fp_conf_new(keys, N_KEYS, &c), 0);
        f = open_memstream(&buf, &len);
        fp_conf_print_help(c, f);
        fclose(f);
        FP_CHECK(strstr(buf, "  --bucket SECS            bucket length (default 10)\n") != NULL);
        FP_CHECK(strstr(buf, "  --verbose[=BOOL]         say more (default false)\n") != NULL);
        FP_CHECK(strstr(buf, "  --collector URL          where to upload\n") != NULL);
        free(buf);
        fp_conf_free(c);
}

/* A program's own table behind fp_conf_parse: records what it is given, refuses "bad". */
struct recorder {
        char seen[256];
};
static int record(const char *key, const char *value, void *userdata, char *err, size_t err_len)
{
        struct recorder *rec = userdata;
        size_t n = strlen(rec->seen);

        if (strcmp(key, "bad") == 0) {
                snprintf(err, err_len, "unknown setting '%s'", key);
                return -ENOENT;
        }
        snprintf(rec->seen + n, sizeof(rec->seen) - n, "[%s=%s]", key, value);
        return 0;
}

static void test_parse_callback(void)
{
        struct recorder rec = {{0}};
        char err[512], want[512];
        unsigned line = 99;
        const char *path;

        path = write_file("cb.conf", "# x\nlisten = 127.0.0.1:7070\nretention = 7d\n"
                                     "token-file =\nname = \"a b\"\n");
        FP_CHECK_EQ_INT(fp_conf_parse(path, record, &rec, &line, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(line, 0);
        FP_CHECK_EQ_STR(rec.seen, "[listen=127.0.0.1:7070][retention=7d][token-file=][name=a b]");

        rec.seen[0] = 0;
        path = write_file("cb.conf", "a = 1\n\nbad = 2\nc = 3\n");
        FP_CHECK_EQ_INT(fp_conf_parse(path, record, &rec, &line, err, sizeof(err)), -ENOENT);
        FP_CHECK_EQ_INT(line, 3);
        snprintf(want, sizeof(want), "%s:3: unknown setting 'bad'", path);
        FP_CHECK_EQ_STR(err, want);
        FP_CHECK_EQ_STR(rec.seen, "[a=1]"); /* nothing after the bad line was applied */

        /* Repeats are caught by the parser, before the program sees them. */
        rec.seen[0] = 0;
        path = write_file("cb.conf", "a = 1\nb = 2\na = 3\n");
        FP_CHECK_EQ_INT(fp_conf_parse(path, record, &rec, &line, err, sizeof(err)), -EEXIST);
        FP_CHECK_EQ_INT(line, 3);
        FP_CHECK_EQ_STR(rec.seen, "[a=1][b=2]");

        /* Many distinct keys (the seen-list grows past its first allocation). */
        {
                char text[2048] = "";
                for (int i = 0; i < 40; i++) {
                        size_t n = strlen(text);
                        snprintf(text + n, sizeof(text) - n, "k%d = %d\n", i, i);
                }
                strcat(text, "k17 = again\n");
                path = write_file("cb.conf", text);
                FP_CHECK_EQ_INT(fp_conf_parse(path, record, &rec, &line, err, sizeof(err)),
                                -EEXIST);
                FP_CHECK_EQ_INT(line, 41);
                FP_CHECK(strstr(err, "k17 is set twice (first on line 18)") != NULL);
        }
}

/* A list key: many lines add values, a check refuses bad ones with their line, argv replaces. */
static int no_x(const char *value, char *err, size_t err_len)
{
        if (strchr(value, 'x')) {
                snprintf(err, err_len, "no x allowed");
                return -EINVAL;
        }
        return 0;
}

static void test_list(void)
{
        static const struct fp_conf_key lkeys[] = {
            {"target", FP_CONF_LIST, NULL, 0, 0, "RULE", "a rule"},
            {"bucket", FP_CONF_UINT, "10", 1, 3600, "SECS", "bucket length"},
        };
        struct fp_conf *c = NULL;
        const char *const *v;
        char err[512];
        unsigned line = 0;
        size_t n;

        FP_CHECK_EQ_INT(fp_conf_new(lkeys, 2, &c), 0);
        FP_CHECK_EQ_INT(fp_conf_set_check(c, "target", no_x), 0);
        FP_CHECK_EQ_INT(fp_conf_set_check(c, "bucket", no_x), -ENOENT);
        v = fp_conf_list(c, "target", &n);
        FP_CHECK_EQ_INT(n, 0);
        const char *path =
            write_file("list.conf", "target = --name a\nbucket = 5\ntarget = \"--name 'b c'\"\n");
        FP_CHECK_EQ_INT(fp_conf_load(c, path, &line, err, sizeof(err)), 0);
        v = fp_conf_list(c, "target", &n);
        FP_CHECK_EQ_INT(n, 2);
        if (n == 2) {
                FP_CHECK_EQ_STR(v[0], "--name a");
                FP_CHECK_EQ_STR(v[1], "--name 'b c'");
        }
        /* Another key still may not be set twice. */
        path = write_file("l2.conf", "bucket = 5\nbucket = 6\n");
        FP_CHECK_EQ_INT(fp_conf_load(c, path, &line, err, sizeof(err)), -EEXIST);
        /* The check runs on each value, and the error has the line. */
        path = write_file("l3.conf", "target = ok\n\ntarget = xx\n");
        FP_CHECK_EQ_INT(fp_conf_load(c, path, &line, err, sizeof(err)), -EINVAL);
        FP_CHECK_EQ_INT(line, 3);
        FP_CHECK(strstr(err, "l3.conf:3: target = xx: no x allowed") != NULL);
        fp_conf_free(c);

        /* The command line's list replaces the file's, whatever the order. */
        FP_CHECK_EQ_INT(fp_conf_new(lkeys, 2, &c), 0);
        FP_CHECK_EQ_INT(fp_conf_set(c, "target", "one", FP_CONF_ARGS, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(fp_conf_set(c, "target", "two", FP_CONF_ARGS, err, sizeof(err)), 0);
        path = write_file("l4.conf", "target = file\n");
        FP_CHECK_EQ_INT(fp_conf_load(c, path, &line, err, sizeof(err)), 0);
        v = fp_conf_list(c, "target", &n);
        FP_CHECK_EQ_INT(n, 2);
        if (n == 2) {
                FP_CHECK_EQ_STR(v[0], "one");
                FP_CHECK_EQ_STR(v[1], "two");
        }
        fp_conf_free(c);
}

int main(void)
{
        char cmd[64];

        if (!mkdtemp(tmpdir)) {
                perror("mkdtemp");
                return 1;
        }
        test_defaults();
        test_set();
        test_file();
        test_overrides();
        test_help();
        test_parse_callback();
        test_list();
        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", tmpdir);
        return FP_TEST_DONE();
}
