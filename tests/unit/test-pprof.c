/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the pprof module (proto/pprof*.c): a profile survives
 * encode -> decode with everything in it; identical samples merge and
 * anything that tells them apart keeps them apart; merging sums; decode
 * rejects every kind of bad input (garbage, bad gzip, a gzip bomb, broken
 * references and values) with a message; top and folded print what the
 * samples say; and `go tool pprof`, the reference reader, accepts what we
 * write (skipped when go is not installed). Each check prints one line.
 */
#include "fp-test.h"
#include "pprof.h"
#include "pprof-internal.h"
#include "profile.pb-c.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* fp-test.h counts and reports failures; these also print a line for every check. */
#define CHECK(cond)                                                                                \
        do {                                                                                       \
                unsigned f_ = fp_test_failed;                                                      \
                FP_CHECK(cond);                                                                    \
                printf("%s %s:%d: %s\n", fp_test_failed == f_ ? "ok  " : "FAIL", __FILE__,         \
                       __LINE__, #cond);                                                           \
        } while (0)
#define CHECK_INT(a, b)                                                                            \
        do {                                                                                       \
                unsigned f_ = fp_test_failed;                                                      \
                FP_CHECK_EQ_INT(a, b);                                                             \
                printf("%s %s:%d: %s == %s\n", fp_test_failed == f_ ? "ok  " : "FAIL", __FILE__,   \
                       __LINE__, #a, #b);                                                          \
        } while (0)
#define CHECK_STR(a, b)                                                                            \
        do {                                                                                       \
                unsigned f_ = fp_test_failed;                                                      \
                FP_CHECK_EQ_STR(a, b);                                                             \
                printf("%s %s:%d: %s == %s\n", fp_test_failed == f_ ? "ok  " : "FAIL", __FILE__,   \
                       __LINE__, #a, #b);                                                          \
        } while (0)

static double now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A profile with a bit of everything: two sample types, a period, time,
 * comments, two mappings with build ids, functions, a location without a
 * function, string and numeric labels (one with a unit).
 */
static struct fp_pprof *make_profile(void)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t m_app, m_libc, f_main, f_work, f_leaf, l_main, l_work, l_leaf, l_libc;
        int r = 0;

        if (!p)
                return NULL;
        r |= fp_pprof_add_sample_type(p, "samples", "count") < 0;
        r |= fp_pprof_add_sample_type(p, "cpu", "nanoseconds") < 0;
        r |= fp_pprof_set_period(p, "cpu-clock", "nanoseconds", 10000000);
        fp_pprof_set_time(p, INT64_C(1700000000123456789), INT64_C(10000000000));
        r |= fp_pprof_set_default_sample_type(p, "cpu");
        r |= fp_pprof_add_comment(p, "host=web-1");
        r |= fp_pprof_add_comment(p, "dropped: 3 lost records");
        r |= fp_pprof_mapping(p, 0x400000, 0x500000, 0, "/usr/bin/app", "abc123def", &m_app);
        r |= fp_pprof_mapping(p, 0x7f0000000000, 0x7f0000100000, 0x1000, "/lib/libc.so.6",
                              "0123456789abcdef", &m_libc);
        r |= fp_pprof_function(p, "main", "app.c", &f_main);
        r |= fp_pprof_function(p, "work", "app.c", &f_work);
        r |= fp_pprof_function(p, "leaf_fn", "leaf.c", &f_leaf);
        r |= fp_pprof_location(p, m_app, 0x401000, f_main, &l_main);
        r |= fp_pprof_location(p, m_app, 0x402000, f_work, &l_work);
        r |= fp_pprof_location(p, m_app, 0x403000, f_leaf, &l_leaf);
        r |= fp_pprof_location(p, m_libc, 0x7f0000000500, 0, &l_libc);
        if (r) {
                fp_pprof_free(p);
                return NULL;
        }

        uint64_t s1[] = {l_leaf, l_work, l_main}, s2[] = {l_libc, l_work, l_main},
                 s3[] = {l_work, l_main};
        struct fp_pprof_label lw[] = {{.key = "thread_name", .str = "worker"},
                                      {.key = "thread", .num = 11},
                                      {.key = "pid", .num = 10},
                                      {.key = "bytes", .num = 4096, .num_unit = "bytes"}};
        struct fp_pprof_label lm[] = {{.key = "thread_name", .str = "main"},
                                      {.key = "thread", .num = 10},
                                      {.key = "pid", .num = 10}};
        int64_t v1[] = {3, 30000000}, v2[] = {1, 10000000}, v3[] = {2, 20000000};

        r |= fp_pprof_add_sample(p, s1, 3, v1, lw, 4);
        r |= fp_pprof_add_sample(p, s2, 3, v2, lw, 4);
        r |= fp_pprof_add_sample(p, s3, 2, v3, lm, 3);
        r |= fp_pprof_add_sample(p, s1, 3, v2, lm, 3);
        if (r) {
                fp_pprof_free(p);
                return NULL;
        }
        return p;
}

/*
 * Everything a profile says, as sorted text independent of ids and
 * order: header lines, then one line per sample with frames by name,
 * mapping file and build id, labels and values.
 */
static char *canon(const struct fp_pprof *p)
{
        char *lines[4096], *out = NULL;
        size_t n = 0, size = 0;
        FILE *f;
        const char *t, *u;
        int64_t time_ns, dur;

        for (size_t i = 0; i < fp_pprof_n_samples(p) && n < 4096; i++) {
                struct fp_pprof_sample_view v;
                char *line = NULL;
                size_t len = 0;
                FILE *g = open_memstream(&line, &len);

                if (!g || fp_pprof_sample_get(p, i, &v) < 0)
                        abort();
                for (size_t j = 0; j < v.n_locations; j++) {
                        struct fp_pprof_location_view l;

                        if (fp_pprof_location_get(p, v.location_ids[j], &l) < 0)
                                abort();
                        fprintf(g, "%s@%s[%s]+%" PRIx64 ";", l.function_name, l.mapping_file,
                                l.build_id, l.address);
                }
                /* Labels in a canonical order: they are kept sorted by string index. */
                char *labs[64];
                size_t nl = 0;

                for (size_t j = 0; j < v.n_labels && nl < 64; j++) {
                        struct fp_pprof_label lab;
                        char *s = NULL;

                        if (fp_pprof_sample_label(p, i, j, &lab) < 0)
                                abort();
                        if (lab.str) {
                                if (asprintf(&s, "%s=%s", lab.key, lab.str) < 0)
                                        abort();
                        } else if (asprintf(&s, "%s=%" PRId64 "%s", lab.key, lab.num,
                                            lab.num_unit ? lab.num_unit : "") < 0) {
                                abort();
                        }
                        labs[nl++] = s;
                }
                for (size_t a = 0; a < nl; a++)
                        for (size_t b = a + 1; b < nl; b++)
                                if (strcmp(labs[a], labs[b]) > 0) {
                                        char *x = labs[a];

                                        labs[a] = labs[b];
                                        labs[b] = x;
                                }
                for (size_t j = 0; j < nl; j++) {
                        fprintf(g, " %s", labs[j]);
                        free(labs[j]);
                }
                for (size_t j = 0; j < fp_pprof_n_sample_types(p); j++)
                        fprintf(g, " %" PRId64, v.values[j]);
                fclose(g);
                lines[n++] = line;
        }
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++)
                        if (strcmp(lines[a], lines[b]) > 0) {
                                char *x = lines[a];

                                lines[a] = lines[b];
                                lines[b] = x;
                        }
        f = open_memstream(&out, &size);
        if (!f)
                abort();
        for (size_t i = 0; i < fp_pprof_n_sample_types(p); i++) {
                t = fp_pprof_sample_type(p, i, &u);
                fprintf(f, "type %s/%s\n", t, u);
        }
        fprintf(f, "period %" PRId64, fp_pprof_period(p, &t, &u));
        fprintf(f, " %s/%s\n", t, u);
        fp_pprof_get_time(p, &time_ns, &dur);
        fprintf(f, "time %" PRId64 " %" PRId64 "\n", time_ns, dur);
        fprintf(f, "default %s\n", fp_pprof_default_sample_type(p));
        for (size_t i = 0; i < fp_pprof_n_comments(p); i++)
                fprintf(f, "comment %s\n", fp_pprof_comment(p, i));
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%s\n", lines[i]);
                free(lines[i]);
        }
        fclose(f);
        return out;
}

static void test_round_trip(void)
{
        struct fp_pprof *p = make_profile(), *q = NULL, *q2 = NULL;
        uint8_t *buf = NULL, *raw = NULL;
        size_t len = 0, raw_len = 0;
        char err[256] = "x";
        char *a, *b;

        printf("# round trip\n");
        CHECK(p != NULL);
        if (!p)
                return;
        CHECK_INT(fp_pprof_n_samples(p), 4);
        CHECK_INT(fp_pprof_total(p, 0), 7);
        CHECK_INT(fp_pprof_total(p, 1), 70000000);
        CHECK_INT(fp_pprof_encode(p, 1, &buf, &len), 0);
        CHECK(len > 2 && buf[0] == 0x1f && buf[1] == 0x8b);
        CHECK_INT(fp_pprof_decode(buf, len, 1 << 20, &q, err, sizeof(err)), 0);
        CHECK_STR(err, "");
        CHECK(q != NULL);
        CHECK_INT(fp_pprof_encode(p, 0, &raw, &raw_len), 0);
        CHECK(raw_len > 0 && raw[0] != 0x1f);
        CHECK_INT(fp_pprof_decode(raw, raw_len, 1 << 20, &q2, err, sizeof(err)), 0);
        if (!q || !q2)
                goto out;

        a = canon(p);
        b = canon(q);
        CHECK_STR(a, b);
        free(b);
        b = canon(q2);
        CHECK_STR(a, b);
        free(a);
        free(b);

        /* And spot checks, in case canon() hides something. */
        const char *unit = NULL;
        const char *t;
        int64_t tn, dn;

        CHECK_INT(fp_pprof_n_sample_types(q), 2);
        t = fp_pprof_sample_type(q, 1, &unit);
        CHECK_STR(t, "cpu");
        CHECK_STR(unit, "nanoseconds");
        CHECK(fp_pprof_sample_type(q, 2, NULL) == NULL);
        CHECK_INT(fp_pprof_period(q, &t, &unit), 10000000);
        CHECK_STR(t, "cpu-clock");
        fp_pprof_get_time(q, &tn, &dn);
        CHECK_INT(tn, INT64_C(1700000000123456789));
        CHECK_INT(dn, INT64_C(10000000000));
        CHECK_STR(fp_pprof_default_sample_type(q), "cpu");
        CHECK_INT(fp_pprof_n_comments(q), 2);
        CHECK_STR(fp_pprof_comment(q, 1), "dropped: 3 lost records");
        CHECK_INT(fp_pprof_total(q, 0), 7);
        CHECK_INT(fp_pprof_total(q, 1), 70000000);
        CHECK_INT(fp_pprof_n_samples(q), 4);

        bool saw_libc = false, saw_unit = false;

        for (size_t i = 0; i < fp_pprof_n_samples(q); i++) {
                struct fp_pprof_sample_view v;
                struct fp_pprof_location_view l;
                struct fp_pprof_label lab;

                fp_pprof_sample_get(q, i, &v);
                fp_pprof_location_get(q, v.location_ids[0], &l);
                if (!strcmp(l.mapping_file, "/lib/libc.so.6") &&
                    !strcmp(l.build_id, "0123456789abcdef") && l.address == 0x7f0000000500 &&
                    !strcmp(l.function_name, ""))
                        saw_libc = true;
                for (size_t j = 0; j < v.n_labels; j++)
                        if (fp_pprof_sample_label(q, i, j, &lab) == 0 &&
                            !strcmp(lab.key, "bytes") && !lab.str && lab.num == 4096 &&
                            lab.num_unit && !strcmp(lab.num_unit, "bytes"))
                                saw_unit = true;
        }
        CHECK(saw_libc);
        CHECK(saw_unit);

        /* Re-encoding the decoded profile gives the same bytes: nothing drifts. */
        uint8_t *raw2 = NULL;
        size_t raw2_len = 0;

        CHECK_INT(fp_pprof_encode(q2, 0, &raw2, &raw2_len), 0);
        CHECK(raw2_len == raw_len && memcmp(raw, raw2, raw_len) == 0);
        free(raw2);

        /* A sample type added after samples gives them a 0 for it. */
        CHECK_INT(fp_pprof_add_sample_type(q, "extra", "count"), 2);
        CHECK_INT(fp_pprof_total(q, 2), 0);
        CHECK_INT(fp_pprof_total(q, 1), 70000000);
        {
                struct fp_pprof_sample_view v;

                CHECK_INT(fp_pprof_sample_get(q, 0, &v), 0);
                CHECK_INT(v.values[2], 0);
                CHECK(v.values[0] > 0);
        }
out:
        free(buf);
        free(raw);
        fp_pprof_free(p);
        fp_pprof_free(q);
        fp_pprof_free(q2);
}

static void test_aggregation(void)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t m, f1, f2, l1, l2, again;
        int64_t v[] = {1, 100};
        struct fp_pprof_label ab[] = {{.key = "a", .str = "x"}, {.key = "b", .num = 2}};
        struct fp_pprof_label ba[] = {{.key = "b", .num = 2}, {.key = "a", .str = "x"}};
        struct fp_pprof_label ac[] = {{.key = "a", .str = "x"}, {.key = "b", .num = 3}};
        struct fp_pprof_label as[] = {{.key = "a", .str = "x"}, {.key = "b", .str = "2"}};

        printf("# aggregation\n");
        CHECK(p != NULL);
        if (!p)
                return;
        CHECK_INT(fp_pprof_add_sample_type(p, "samples", "count"), 0);
        CHECK_INT(fp_pprof_add_sample_type(p, "cpu", "nanoseconds"), 1);
        CHECK_INT(fp_pprof_mapping(p, 0x1000, 0x2000, 0, "/bin/x", "b1", &m), 0);
        CHECK_INT(fp_pprof_mapping(p, 0x1000, 0x2000, 0, "/bin/x", "b1", &again), 0);
        CHECK_INT(again, m);
        CHECK_INT(fp_pprof_function(p, "f1", NULL, &f1), 0);
        CHECK_INT(fp_pprof_function(p, "f2", NULL, &f2), 0);
        CHECK_INT(fp_pprof_function(p, "f1", NULL, &again), 0);
        CHECK_INT(again, f1);
        CHECK(f1 != f2 && f1 != 0 && f2 != 0);
        CHECK_INT(fp_pprof_location(p, m, 0x1100, f1, &l1), 0);
        CHECK_INT(fp_pprof_location(p, m, 0x1200, f2, &l2), 0);
        CHECK_INT(fp_pprof_location(p, m, 0x1100, f1, &again), 0);
        CHECK_INT(again, l1);

        uint64_t s12[] = {l1, l2}, s21[] = {l2, l1};

        CHECK_INT(fp_pprof_add_sample(p, s12, 2, v, ab, 2), 0);
        CHECK_INT(fp_pprof_add_sample(p, s12, 2, v, ab, 2), 0);
        CHECK_INT(fp_pprof_n_samples(p), 1);
        CHECK_INT(fp_pprof_add_sample(p, s12, 2, v, ba, 2), 0);
        CHECK_INT(fp_pprof_n_samples(p), 1); /* label order does not matter */
        CHECK_INT(fp_pprof_add_sample(p, s12, 2, v, ac, 2), 0);
        CHECK_INT(fp_pprof_n_samples(p), 2); /* a different label value does */
        CHECK_INT(fp_pprof_add_sample(p, s12, 2, v, as, 2), 0);
        CHECK_INT(fp_pprof_n_samples(p), 3); /* string "2" is not number 2 */
        CHECK_INT(fp_pprof_add_sample(p, s12, 2, v, ab, 1), 0);
        CHECK_INT(fp_pprof_n_samples(p), 4); /* fewer labels */
        CHECK_INT(fp_pprof_add_sample(p, s21, 2, v, ab, 2), 0);
        CHECK_INT(fp_pprof_n_samples(p), 5); /* another stack */
        CHECK_INT(fp_pprof_add_sample(p, s12, 1, v, ab, 2), 0);
        CHECK_INT(fp_pprof_n_samples(p), 6); /* a shorter stack */

        struct fp_pprof_sample_view sv;

        CHECK_INT(fp_pprof_sample_get(p, 0, &sv), 0);
        CHECK_INT(sv.values[0], 3);
        CHECK_INT(sv.values[1], 300);
        CHECK_INT(sv.n_locations, 2);
        CHECK_INT(sv.n_labels, 2);
        CHECK_INT(fp_pprof_total(p, 0), 8);
        CHECK_INT(fp_pprof_total(p, 1), 800);
        CHECK_INT(fp_pprof_sample_get(p, 6, &sv), -ENOENT);

        /* Bad arguments leave the profile alone. */
        int64_t neg[] = {1, -1};
        uint64_t bad[] = {l1, 99};

        CHECK_INT(fp_pprof_add_sample(p, s12, 2, neg, NULL, 0), -EINVAL);
        CHECK_INT(fp_pprof_add_sample(p, bad, 2, v, NULL, 0), -EINVAL);
        CHECK_INT(fp_pprof_location(p, 7, 0, f1, &again), -EINVAL);
        CHECK_INT(fp_pprof_location(p, m, 0, 42, &again), -EINVAL);
        CHECK_INT(fp_pprof_n_samples(p), 6);
        CHECK_INT(fp_pprof_total(p, 0), 8);

        /* Values saturate instead of wrapping. */
        int64_t big[] = {INT64_MAX - 1, 1};

        CHECK_INT(fp_pprof_add_sample(p, s21, 2, big, NULL, 0), 0);
        CHECK_INT(fp_pprof_add_sample(p, s21, 2, big, NULL, 0), 0);
        CHECK_INT(fp_pprof_total(p, 0), INT64_MAX);
        fp_pprof_free(p);
}

/* A small profile with the given stack of function names (leaf first) and values. */
/*
 * A profile of one sample (names leaf first, one label thread_name=t1 or
 * thread): samples/count = count and (type, unit) = value, with one comment.
 */
static struct fp_pprof *one_sample(const char *const *names, size_t n, int64_t count,
                                   const char *type, const char *unit, int64_t value,
                                   const char *thread, const char *comment)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t locs[16];
        int64_t v[] = {count, value};
        struct fp_pprof_label l = {.key = "thread_name", .str = thread};
        uint64_t fid, m;

        if (!p || n > 16)
                abort();
        if (fp_pprof_add_sample_type(p, "samples", "count") < 0 ||
            fp_pprof_add_sample_type(p, type, unit) < 0 ||
            fp_pprof_mapping(p, 0x1000, 0x9000, 0, "/bin/prog", "bid", &m) < 0 ||
            fp_pprof_add_comment(p, comment) < 0)
                abort();
        for (size_t i = 0; i < n; i++)
                if (fp_pprof_function(p, names[i], NULL, &fid) < 0 ||
                    fp_pprof_location(p, m, 0x1000 + 16 * fid, fid, &locs[i]) < 0)
                        abort();
        if (fp_pprof_add_sample(p, locs, n, v, &l, 1) < 0)
                abort();
        return p;
}

static struct fp_pprof *tiny(const char *const *names, size_t n, int64_t count, int64_t ns,
                             const char *thread, const char *comment, int64_t t0)
{
        struct fp_pprof *p = one_sample(names, n, count, "cpu", "nanoseconds", ns, thread, comment);
        fp_pprof_set_time(p, t0, 1000);
        return p;
}

static void test_merge(void)
{
        const char *sa[] = {"c", "b", "a"}, *sb[] = {"x", "b", "a"};
        struct fp_pprof *a = tiny(sa, 3, 2, 20, "t1", "from a", 5000);
        struct fp_pprof *b = tiny(sb, 3, 3, 30, "t1", "from b", 4000);
        struct fp_pprof *b2 = tiny(sa, 3, 4, 40, "t1", "again", 5500);
        struct fp_pprof *e = fp_pprof_new(), *odd = fp_pprof_new();
        int64_t t, d;

        printf("# merge\n");
        CHECK_INT(fp_pprof_merge(a, b), 0);
        CHECK_INT(fp_pprof_total(a, 0), 5);
        CHECK_INT(fp_pprof_total(a, 1), 50);
        CHECK_INT(fp_pprof_n_samples(a), 2);
        CHECK_INT(fp_pprof_merge(a, b2), 0);
        CHECK_INT(fp_pprof_n_samples(a), 2); /* same stack and labels as a's own sample */
        CHECK_INT(fp_pprof_total(a, 0), 9);
        CHECK_INT(fp_pprof_total(a, 1), 90);
        CHECK_INT(fp_pprof_n_comments(a), 3);
        CHECK_STR(fp_pprof_comment(a, 1), "from b");
        fp_pprof_get_time(a, &t, &d);
        CHECK_INT(t, 4000);
        CHECK_INT(d, 2500); /* 4000 .. 6500 */

        /* An empty profile takes the types of the first it merges. */
        CHECK_INT(fp_pprof_merge(e, a), 0);
        CHECK_INT(fp_pprof_n_sample_types(e), 2);
        CHECK_INT(fp_pprof_total(e, 1), 90);
        CHECK_INT(fp_pprof_n_samples(e), 2);

        /* Types must match. */
        CHECK_INT(fp_pprof_add_sample_type(odd, "alloc", "bytes"), 0);
        CHECK_INT(fp_pprof_merge(a, odd), -EINVAL);
        CHECK_INT(fp_pprof_merge(a, a), -EINVAL);
        CHECK_INT(fp_pprof_total(a, 0), 9);

        fp_pprof_free(a);
        fp_pprof_free(b);
        fp_pprof_free(b2);
        fp_pprof_free(e);
        fp_pprof_free(odd);
}

/* Renames every location whose function is arg's [0] to arg's [1], system name [2]. */
static int rename_x(const struct fp_pprof *src, uint64_t loc, void *arg, const char **ret_name,
                    const char **ret_system)
{
        const char *const *to = arg;
        struct fp_pprof_location_view v;

        if (fp_pprof_location_get(src, loc, &v) < 0 || strcmp(v.function_name, to[0]) != 0)
                return 0;
        *ret_name = to[1];
        *ret_system = to[2];
        return 1;
}

/* The names of a profile's locations' lines, "name/system" joined by spaces. */
static void line_names(const struct fp_pprof *p, char *buf, size_t len)
{
        size_t at = 0;

        buf[0] = '\0';
        for (uint64_t id = 1; id <= fp_pprof_n_locations(p); id++) {
                struct fp_pprof_location_view v;
                struct fp_pprof_line_view l;

                if (fp_pprof_location_get(p, id, &v) < 0)
                        continue;
                for (size_t j = 0; j < v.n_lines && at < len; j++)
                        if (fp_pprof_location_line(p, id, j, &l) == 0)
                                at += (size_t)snprintf(buf + at, len - at, "%s%s/%s", at ? " " : "",
                                                       l.function_name, l.system_name);
        }
}

/* Locations renamed on the way through a merge: the collector naming what the agent could not. */
static void test_merge_renamed(void)
{
        const char *sa[] = {"c", "b", "a"}, *sb[] = {"lib.so+0x10", "b", "a"};
        const char *to[] = {"lib.so+0x10", "ns::f(int)", "_ZN2ns1fEi"};
        struct fp_pprof *a = tiny(sa, 3, 2, 20, "t1", "from a", 5000);
        struct fp_pprof *b = tiny(sb, 3, 3, 30, "t1", "from b", 4000);
        struct fp_pprof *out = fp_pprof_new();
        char names[512];

        printf("# merge renamed\n");
        CHECK_INT(fp_pprof_merge(a, b), 0);
        CHECK_INT(fp_pprof_merge_renamed(out, a, rename_x, (void *)to), 0);
        line_names(out, names, sizeof(names));
        CHECK(strstr(names, "ns::f(int)/_ZN2ns1fEi") != NULL);
        CHECK(strstr(names, "lib.so+0x10") == NULL);
        CHECK(strstr(names, "c/") != NULL);
        CHECK_INT(fp_pprof_total(out, 0), 5);
        CHECK_INT(fp_pprof_total(out, 1), 50);
        CHECK_INT(fp_pprof_n_samples(out), 2);
        CHECK_INT(fp_pprof_n_comments(out), 2);
        CHECK_INT(fp_pprof_merge_renamed(out, out, rename_x, (void *)to), -EINVAL);
        CHECK_INT(fp_pprof_merge_renamed(out, a, NULL, NULL), -EINVAL);
        fp_pprof_free(a);
        fp_pprof_free(b);
        fp_pprof_free(out);
}

/*
 * A stripped build with one mapping of known ELF address (fleetprof's field
 * 100 of Mapping): one sample at addr in it; vaddr UINT64_MAX: unknown.
 */
static struct fp_pprof *stripped_profile(uint64_t addr, uint64_t vaddr)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t m, l;
        int64_t v[] = {1};

        if (!p || fp_pprof_add_sample_type(p, "samples", "count") < 0 ||
            fp_pprof_mapping(p, 0x55550000a000, 0x55550000f000, 0x9000, "/srv/app", "feed", &m) ||
            (vaddr != UINT64_MAX && fp_pprof_mapping_set_vaddr(p, m, vaddr)) ||
            fp_pprof_location(p, m, addr, 0, &l) || fp_pprof_add_sample(p, &l, 1, v, NULL, 0)) {
                fp_pprof_free(p);
                return NULL;
        }
        return p;
}

/* The ELF address of a mapping's start: encoded, decoded, merged, taken from a copy that has it. */
static void test_mapping_vaddr(void)
{
        struct fp_pprof *p = stripped_profile(0x55550000a123, 0xa000), *q = NULL;
        struct fp_pprof *old = stripped_profile(0x55550000a456, UINT64_MAX), *out = fp_pprof_new();
        struct fp_pprof_location_view v;
        uint8_t *buf = NULL;
        size_t len = 0;
        char err[256];

        printf("# mapping vaddr\n");
        CHECK(p && old && out);
        if (!p || !old || !out)
                goto out;
        CHECK_INT(fp_pprof_mapping_set_vaddr(p, 2, 0), -EINVAL);
        CHECK_INT(fp_pprof_mapping_set_vaddr(p, 1, UINT64_MAX), -EINVAL);
        CHECK_INT(fp_pprof_encode(p, 0, &buf, &len), 0);
        CHECK_INT(fp_pprof_decode(buf, len, 0, &q, err, sizeof(err)), 0);
        CHECK(q && fp_pprof_location_get(q, 1, &v) == 0 && v.mapping_has_vaddr &&
              v.mapping_vaddr == 0xa000 && v.mapping_offset == 0x9000);
        /* The agent of the version before: none. */
        CHECK(fp_pprof_location_get(old, 1, &v) == 0 && !v.mapping_has_vaddr && !v.mapping_vaddr);
        /* Its copy of the mapping first, then one that knows: the merge knows. */
        CHECK_INT(fp_pprof_merge(out, old), 0);
        CHECK_INT(fp_pprof_merge(out, q), 0);
        CHECK(fp_pprof_location_get(out, 1, &v) == 0 && v.mapping_has_vaddr &&
              v.mapping_vaddr == 0xa000);
        /* An ELF address of 0 (a PIE's first segment) is one. */
        CHECK_INT(fp_pprof_mapping_set_vaddr(out, 1, 0), 0);
        CHECK(fp_pprof_location_get(out, 1, &v) == 0 && v.mapping_has_vaddr && !v.mapping_vaddr);
out:
        free(buf);
        fp_pprof_free(p);
        fp_pprof_free(q);
        fp_pprof_free(old);
        fp_pprof_free(out);
}

/* A counter's profile as the store gives it: samples and the counter's values. */
static struct fp_pprof *counter_profile(const char *const *names, size_t n, int64_t count,
                                        const char *type, int64_t value)
{
        return one_sample(names, n, count, type, "count", value, "t1", "dropped throttled: 1");
}

/* A counter's values join the sampling event's profile as one more sample type. */
static void test_merge_typed(void)
{
        const char *sa[] = {"c", "b", "a"}, *sb[] = {"x", "b", "a"};
        struct fp_pprof *a = tiny(sa, 3, 2, 20, "t1", "from a", 5000);
        struct fp_pprof *pf = counter_profile(sa, 3, 2, "page-faults", 700);
        struct fp_pprof *pf2 = counter_profile(sb, 3, 1, "page-faults", 5);
        struct fp_pprof *cs = counter_profile(sa, 3, 2, "context-switches", 3);
        struct fp_pprof *e = fp_pprof_new();
        const char *unit;

        printf("# merge by sample type\n");
        CHECK_INT(fp_pprof_find_sample_type(a, "cpu", "nanoseconds"), 1);
        CHECK_INT(fp_pprof_find_sample_type(a, "cpu", "count"), -ENOENT);
        CHECK_INT(fp_pprof_merge_typed(a, pf, "page-faults"), 0);
        CHECK_INT(fp_pprof_n_sample_types(a), 3);
        CHECK_STR(fp_pprof_sample_type(a, 2, &unit), "page-faults");
        CHECK_STR(unit, "count");
        CHECK_INT(fp_pprof_n_samples(a), 1); /* same stack and labels: the same sample */
        CHECK_INT(fp_pprof_total(a, 0), 2);  /* the counter's own sample count is not taken */
        CHECK_INT(fp_pprof_total(a, 1), 20);
        CHECK_INT(fp_pprof_total(a, 2), 700);
        CHECK_INT(fp_pprof_n_comments(a), 1); /* nor its comments */
        /* A stack only the counter saw becomes a sample with zeros elsewhere. */
        CHECK_INT(fp_pprof_merge_typed(a, pf2, "page-faults"), 0);
        CHECK_INT(fp_pprof_n_samples(a), 2);
        CHECK_INT(fp_pprof_total(a, 2), 705);
        CHECK_INT(fp_pprof_total(a, 0), 2);
        CHECK_INT(fp_pprof_merge_typed(a, cs, "context-switches"), 0);
        CHECK_INT(fp_pprof_n_sample_types(a), 4);
        CHECK_INT(fp_pprof_total(a, 3), 3);
        CHECK_INT(fp_pprof_total(a, 2), 705);
        /* Unknown type: refused, nothing changed. */
        CHECK_INT(fp_pprof_merge_typed(a, cs, "cycles"), -EINVAL);
        CHECK_INT(fp_pprof_n_sample_types(a), 4);
        CHECK_INT(fp_pprof_merge_typed(a, a, NULL), -EINVAL);
        /* Everything, matched by name: a 4-type profile into an empty one and into
         * a 2-type one (the open bucket's profile meeting the store's). */
        CHECK_INT(fp_pprof_merge_typed(e, a, NULL), 0);
        CHECK_INT(fp_pprof_n_sample_types(e), 4);
        CHECK_INT(fp_pprof_total(e, 2), 705);
        CHECK_INT(fp_pprof_n_comments(e), 1);
        struct fp_pprof *two = tiny(sa, 3, 1, 10, "t1", "open bucket", 6000);
        CHECK_INT(fp_pprof_merge_typed(e, two, NULL), 0);
        CHECK_INT(fp_pprof_total(e, 0), 3);
        CHECK_INT(fp_pprof_total(e, 1), 30);
        CHECK_INT(fp_pprof_total(e, 2), 705);
        CHECK_INT(fp_pprof_n_samples(e), 2);
        CHECK_INT(fp_pprof_merge_typed(two, e, NULL), 0);
        CHECK_INT(fp_pprof_n_sample_types(two), 4);
        CHECK_INT(fp_pprof_total(two, 3), 3);
        CHECK_INT(fp_pprof_total(two, 0), 4);

        fp_pprof_free(a);
        fp_pprof_free(pf);
        fp_pprof_free(pf2);
        fp_pprof_free(cs);
        fp_pprof_free(e);
        fp_pprof_free(two);
}

/* gzip of in[0..len), or of `zeros` zero bytes when in is NULL (never all in memory). */
static uint8_t *gz(const void *in, size_t len, size_t zeros, size_t *ret_len)
{
        static uint8_t zero[1 << 16];
        z_stream z = {0};
        size_t cap = 1 << 20;
        uint8_t *out = malloc(cap);
        size_t left = in ? len : zeros;

        if (!out || deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
                abort();
        for (;;) {
                int r;

                if (z.avail_in == 0 && left) {
                        size_t c = in ? left : (left < sizeof(zero) ? left : sizeof(zero));

                        z.next_in = in ? (Bytef *)(uintptr_t)in : zero;
                        z.avail_in = (uInt)c;
                        left -= c;
                }
                if (z.total_out == cap) {
                        cap *= 2;
                        out = realloc(out, cap);
                        if (!out)
                                abort();
                }
                z.next_out = out + z.total_out;
                z.avail_out = (uInt)(cap - z.total_out);
                r = deflate(&z, left || z.avail_in ? Z_NO_FLUSH : Z_FINISH);
                if (r == Z_STREAM_END)
                        break;
                if (r != Z_OK && r != Z_BUF_ERROR)
                        abort();
        }
        *ret_len = z.total_out;
        deflateEnd(&z);
        return out;
}

/* Decodes and expects failure r with a message. */
static void expect_reject(const char *what, const uint8_t *buf, size_t len, size_t max, int want)
{
        struct fp_pprof *p = NULL;
        char err[256] = "";
        int r = fp_pprof_decode(buf, len, max, &p, err, sizeof(err));

        printf("# %s: %d (%s)\n", what, r, err);
        CHECK_INT(r, want);
        CHECK(p == NULL);
        CHECK(err[0] != 0 && strchr(err, '\n') == NULL);
        fp_pprof_free(p);
}

/* protobuf-c message builders for hand-made (bad) profiles. */
struct msg {
        Perftools__Profiles__Profile prof;
        Perftools__Profiles__ValueType vt[2], *vtp[2];
        Perftools__Profiles__Sample smp, *smpp[1];
        uint64_t smp_locs[2];
        int64_t smp_vals[2];
        Perftools__Profiles__Label lab, *labp[1];
        Perftools__Profiles__Location loc[2], *locp[2];
        Perftools__Profiles__Line line[2], *linep[2];
        Perftools__Profiles__Function fn, *fnp[3], inl[2];
        Perftools__Profiles__Line inl_line[2], *inl_linep[2];
        Perftools__Profiles__Mapping map, *mapp[1];
        char *strs[10];
};

/* A valid profile: types samples/count, cpu/nanoseconds; location 1 -> function 7 in mapping 3. */
static void msg_init(struct msg *m)
{
        static char s0[] = "", s1[] = "samples", s2[] = "count", s3[] = "cpu", s4[] = "nanoseconds",
                    s5[] = "main", s6[] = "/bin/x", s7[] = "thread_name", s8[] = "inlined",
                    s9[] = "outer";

        *m = (struct msg){.prof = PERFTOOLS__PROFILES__PROFILE__INIT};
        m->strs[0] = s0, m->strs[1] = s1, m->strs[2] = s2, m->strs[3] = s3;
        m->strs[4] = s4, m->strs[5] = s5, m->strs[6] = s6, m->strs[7] = s7;
        m->strs[8] = s8, m->strs[9] = s9;
        m->prof.string_table = m->strs;
        m->prof.n_string_table = 10;
        for (int i = 0; i < 2; i++) {
                m->vt[i] = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
                m->vt[i].type = 1 + 2 * i;
                m->vt[i].unit = 2 + 2 * i;
                m->vtp[i] = &m->vt[i];
        }
        m->prof.sample_type = m->vtp;
        m->prof.n_sample_type = 2;
        m->map = (Perftools__Profiles__Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
        m->map.id = 3;
        m->map.memory_start = 0x1000;
        m->map.memory_limit = 0x2000;
        m->map.filename = 6;
        m->mapp[0] = &m->map;
        m->prof.mapping = m->mapp;
        m->prof.n_mapping = 1;
        m->fn = (Perftools__Profiles__Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
        m->fn.id = 7;
        m->fn.name = 5;
        m->fnp[0] = &m->fn;
        m->prof.function = m->fnp;
        m->prof.n_function = 1;
        for (int i = 0; i < 2; i++) {
                m->line[i] = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
                m->line[i].function_id = 7;
                m->line[i].line = 10 + i;
                m->linep[i] = &m->line[i];
                m->loc[i] = (Perftools__Profiles__Location)PERFTOOLS__PROFILES__LOCATION__INIT;
                m->loc[i].id = 1 + (uint64_t)i;
                m->loc[i].mapping_id = 3;
                m->loc[i].address = 0x1100 + 0x10 * (uint64_t)i;
                m->loc[i].line = &m->linep[i];
                m->loc[i].n_line = 1;
                m->locp[i] = &m->loc[i];
        }
        m->prof.location = m->locp;
        m->prof.n_location = 2;
        m->lab = (Perftools__Profiles__Label)PERFTOOLS__PROFILES__LABEL__INIT;
        m->lab.key = 7;
        m->lab.str = 5;
        m->labp[0] = &m->lab;
        m->smp = (Perftools__Profiles__Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
        m->smp_locs[0] = 1;
        m->smp_locs[1] = 2;
        m->smp_vals[0] = 1;
        m->smp_vals[1] = 10000000;
        m->smp.location_id = m->smp_locs;
        m->smp.n_location_id = 2;
        m->smp.value = m->smp_vals;
        m->smp.n_value = 2;
        m->smp.label = m->labp;
        m->smp.n_label = 1;
        m->smpp[0] = &m->smp;
        m->prof.sample = m->smpp;
        m->prof.n_sample = 1;
}

static uint8_t *msg_pack(const struct msg *m, size_t *ret_len)
{
        size_t n = perftools__profiles__profile__get_packed_size(&m->prof);
        uint8_t *buf = malloc(n ? n : 1);

        if (!buf)
                abort();
        *ret_len = perftools__profiles__profile__pack(&m->prof, buf);
        return buf;
}

static void reject_msg(const char *what, const struct msg *m)
{
        size_t len;
        uint8_t *buf = msg_pack(m, &len);

        expect_reject(what, buf, len, 1 << 20, -EBADMSG);
        free(buf);
}

/* Inlined frames (several lines in a location) survive decoding and print in order. */
static void test_inline(void)
{
        struct fp_pprof *p = NULL, *q = NULL;
        struct msg m;
        uint8_t *buf, *enc = NULL;
        size_t len, enc_len = 0, out_len = 0;
        char err[256] = "", *out = NULL;
        FILE *f;

        printf("# inlined frames\n");
        msg_init(&m);
        for (int i = 0; i < 2; i++) {
                m.inl[i] = (Perftools__Profiles__Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
                m.inl[i].id = 9 + (uint64_t)i;
                m.inl[i].name = 8 + i;
                m.fnp[1 + i] = &m.inl[i];
                m.inl_line[i] = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
                m.inl_line[i].function_id = 9 + (uint64_t)i;
                m.inl_line[i].line = 5 + i;
                m.inl_linep[i] = &m.inl_line[i];
        }
        m.prof.n_function = 3;
        m.loc[0].line = m.inl_linep; /* location 1: inlined inside outer */
        m.loc[0].n_line = 2;
        buf = msg_pack(&m, &len);
        CHECK_INT(fp_pprof_decode(buf, len, 1 << 20, &p, err, sizeof(err)), 0);
        free(buf);
        if (!p)
                return;
        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_folded(p, 1, f), 0);
        fclose(f);
        CHECK_STR(out, "main;outer;inlined 10000000\n");
        free(out);
        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_top(p, 1, 0, f), 0);
        fclose(f);
        CHECK(strstr(out, "      10ms 100.00% 100.00%       10ms 100.00%  inlined\n") != NULL);
        CHECK(strstr(out, "         0  0.00% 100.00%       10ms 100.00%  outer\n") != NULL);
        CHECK(strstr(out, "Threads:\n") != NULL && strstr(out, "  main\n") != NULL);
        free(out);

        /* And through our own encoder again. */
        CHECK_INT(fp_pprof_encode(p, 1, &enc, &enc_len), 0);
        CHECK_INT(fp_pprof_decode(enc, enc_len, 1 << 20, &q, err, sizeof(err)), 0);
        if (q) {
                f = open_memstream(&out, &out_len);
                CHECK_INT(fp_pprof_write_folded(q, 1, f), 0);
                fclose(f);
                CHECK_STR(out, "main;outer;inlined 10000000\n");
                free(out);
        }
        free(enc);
        fp_pprof_free(p);
        fp_pprof_free(q);
}

static void test_reject(void)
{
        static const char garbage[] = "this is not a profile, just some text\n";
        uint8_t rnd[4096];
        uint8_t *buf, *enc;
        size_t len, enc_len;
        struct fp_pprof *p = NULL;
        struct msg m;
        char err[256];

        printf("# rejects\n");

        /* The hand-made message is fine as it is. */
        msg_init(&m);
        buf = msg_pack(&m, &len);
        CHECK_INT(fp_pprof_decode(buf, len, 1 << 20, &p, err, sizeof(err)), 0);
        if (p) {
                struct fp_pprof_location_view lv;
                struct fp_pprof_sample_view sv;

                CHECK_INT(fp_pprof_n_samples(p), 1);
                CHECK_INT(fp_pprof_sample_get(p, 0, &sv), 0);
                CHECK_INT(fp_pprof_location_get(p, sv.location_ids[0], &lv), 0);
                CHECK_STR(lv.function_name, "main");
                CHECK_STR(lv.mapping_file, "/bin/x");
        }
        fp_pprof_free(p);
        p = NULL;
        free(buf);

        expect_reject("non-gzip garbage", (const uint8_t *)garbage, sizeof(garbage) - 1, 1 << 20,
                      -EBADMSG);
        srand(42);
        for (size_t i = 0; i < sizeof(rnd); i++)
                rnd[i] = (uint8_t)rand();
        rnd[0] = 0x0a; /* not a gzip magic */
        expect_reject("random bytes", rnd, sizeof(rnd), 1 << 20, -EBADMSG);
        buf = gz(rnd, sizeof(rnd), 0, &len);
        expect_reject("gzip of garbage", buf, len, 1 << 20, -EBADMSG);
        free(buf);
        expect_reject("empty input", (const uint8_t *)"", 0, 1 << 20, -EBADMSG);

        struct fp_pprof *good = make_profile();

        CHECK_INT(fp_pprof_encode(good, 1, &enc, &enc_len), 0);
        expect_reject("truncated gzip", enc, enc_len / 2, 1 << 20, -EBADMSG);
        expect_reject("gzip header only", enc, 10, 1 << 20, -EBADMSG);
        expect_reject("gzip too big", enc, enc_len, 64, -EFBIG);
        {
                uint8_t *twice = malloc(enc_len * 2 + 3);

                memcpy(twice, enc, enc_len);
                memcpy(twice + enc_len, "xyz", 3);
                expect_reject("gzip with trailing garbage", twice, enc_len + 3, 1 << 20, -EBADMSG);
                /* Two members are one stream: decodes, as gzip -c a b > c does. */
                memcpy(twice + enc_len, enc, enc_len);
                CHECK_INT(fp_pprof_decode(twice, enc_len * 2, 1 << 20, &p, err, sizeof(err)),
                          -EBADMSG);
                printf("# two gzip members (one stream, two profiles in it): %s\n", err);
                CHECK(strstr(err, "gzip") == NULL);
                free(twice);
        }
        free(enc);
        CHECK_INT(fp_pprof_encode(good, 0, &enc, &enc_len), 0);
        expect_reject("raw too big", enc, enc_len, 16, -EFBIG);
        free(enc);
        fp_pprof_free(good);

        /* A gzip bomb: 100 MB of zeros, in about 100 kB, against a 16 MB limit. */
        {
                struct rusage before, after;
                double t0, dt;

                buf = gz(NULL, 0, (size_t)100 << 20, &len);
                printf("# bomb: %zu bytes of gzip for 100 MiB\n", len);
                getrusage(RUSAGE_SELF, &before);
                t0 = now();
                expect_reject("gzip bomb", buf, len, (size_t)16 << 20, -EFBIG);
                dt = now() - t0;
                getrusage(RUSAGE_SELF, &after);
                printf("# bomb rejected in %.3f s, peak RSS grew %ld kB\n", dt,
                       after.ru_maxrss - before.ru_maxrss);
                CHECK(dt < 5.0);
                CHECK(after.ru_maxrss - before.ru_maxrss < 64 * 1024);
                free(buf);
        }

        /* Amplification: 1 MB of empty samples would unpack into ~40 MB of structs. */
        {
                size_t n = 1 << 20;
                uint8_t *amp = malloc(n + 8);

                amp[0] = 0x32, amp[1] = 0x00; /* string_table: "" */
                for (size_t i = 2; i + 1 < n; i += 2)
                        amp[i] = 0x12, amp[i + 1] = 0x00; /* sample {} */
                expect_reject("memory amplification", amp, n, 4 << 20, -EFBIG);
                free(amp);
        }

        msg_init(&m);
        m.strs[0] = m.strs[1];
        reject_msg("string_table[0] not empty", &m);
        msg_init(&m);
        m.prof.n_string_table = 0;
        reject_msg("no string table", &m);
        msg_init(&m);
        m.fn.name = 10;
        reject_msg("function name index out of range", &m);
        msg_init(&m);
        m.vt[1].unit = -1;
        reject_msg("negative string index", &m);
        msg_init(&m);
        m.lab.str = 100;
        reject_msg("label string index out of range", &m);
        msg_init(&m);
        m.prof.comment = (int64_t[]){3, 10};
        m.prof.n_comment = 2;
        reject_msg("comment index out of range", &m);
        msg_init(&m);
        m.line[1].function_id = 8;
        reject_msg("location refers to a missing function", &m);
        msg_init(&m);
        m.loc[0].mapping_id = 4;
        reject_msg("location refers to a missing mapping", &m);
        msg_init(&m);
        m.smp_locs[1] = 5;
        reject_msg("sample refers to a missing location", &m);
        msg_init(&m);
        m.smp.n_value = 1;
        reject_msg("wrong value count", &m);
        msg_init(&m);
        m.smp_vals[1] = -5;
        reject_msg("negative value", &m);
        msg_init(&m);
        m.loc[1].id = 1;
        reject_msg("duplicate location id", &m);
        msg_init(&m);
        m.fn.id = 0;
        reject_msg("function id 0", &m);
        msg_init(&m);
        m.map.id = 0;
        m.loc[0].mapping_id = 0;
        m.loc[1].mapping_id = 0;
        reject_msg("mapping id 0", &m);

        /* Truncated protobuf (not gzip). */
        msg_init(&m);
        buf = msg_pack(&m, &len);
        expect_reject("truncated protobuf", buf, len - 3, 1 << 20, -EBADMSG);
        free(buf);
}

static char *slurp(FILE *f)
{
        char *s = NULL;
        size_t n = 0, cap = 0, r;

        for (;;) {
                if (cap - n < 4096) {
                        cap = cap ? cap * 2 : 65536;
                        s = realloc(s, cap);
                        if (!s)
                                abort();
                }
                r = fread(s + n, 1, cap - n - 1, f);
                if (r == 0)
                        break;
                n += r;
        }
        s[n] = 0;
        return s;
}

static void test_text(void)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t m, fm, fw, fl, fr, lm, lw, ll, lr, lx, lu;
        char *out = NULL;
        size_t out_len = 0;
        FILE *f;

        printf("# top and folded\n");
        CHECK(fp_pprof_add_sample_type(p, "samples", "count") == 0);
        CHECK(fp_pprof_add_sample_type(p, "cpu", "nanoseconds") == 1);
        CHECK_INT(fp_pprof_add_comment(p, "event=cpu-clock"), 0);
        fp_pprof_set_time(p, 0, 60000000);
        CHECK_INT(fp_pprof_mapping(p, 0x400000, 0x500000, 0, "/usr/bin/app", "", &m), 0);
        CHECK_INT(fp_pprof_function(p, "main", NULL, &fm), 0);
        CHECK_INT(fp_pprof_function(p, "work", NULL, &fw), 0);
        CHECK_INT(fp_pprof_function(p, "leaf_fn", NULL, &fl), 0);
        CHECK_INT(fp_pprof_function(p, "rec", NULL, &fr), 0);
        CHECK_INT(fp_pprof_location(p, m, 0x401000, fm, &lm), 0);
        CHECK_INT(fp_pprof_location(p, m, 0x402000, fw, &lw), 0);
        CHECK_INT(fp_pprof_location(p, m, 0x403000, fl, &ll), 0);
        CHECK_INT(fp_pprof_location(p, m, 0x404000, fr, &lr), 0);
        CHECK_INT(fp_pprof_location(p, m, 0x404010, fr, &lx), 0); /* rec, another address */
        CHECK_INT(fp_pprof_location(p, m, 0x410000, 0, &lu), 0);  /* no function */

        uint64_t sa[] = {ll, lw, lm}, sb[] = {lw, lm}, sc[] = {lr, lx, lr, lm}, sd[] = {lu, lm};
        struct fp_pprof_label tw[] = {{.key = "thread_name", .str = "worker"},
                                      {.key = "thread", .num = 11}};
        struct fp_pprof_label tm[] = {{.key = "thread_name", .str = "main"},
                                      {.key = "thread", .num = 10}};
        int64_t va[] = {3, 30000000}, vb[] = {1, 10000000}, vc[] = {2, 20000000}, vd[] = {0, 0};

        CHECK_INT(fp_pprof_add_sample(p, sa, 3, va, tw, 2), 0);
        CHECK_INT(fp_pprof_add_sample(p, sb, 2, vb, tm, 2), 0);
        CHECK_INT(fp_pprof_add_sample(p, sc, 4, vc, tw, 2), 0);
        CHECK_INT(fp_pprof_add_sample(p, sd, 2, vd, tw, 2), 0);
        CHECK_INT(fp_pprof_add_sample(p, sc, 4, vc, tm, 2), 0); /* merged in folded */

        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_folded(p, 1, f), 0);
        fclose(f);
        printf("%s", out);
        CHECK_STR(out, "main;rec;rec;rec 40000000\n"
                       "main;work 10000000\n"
                       "main;work;leaf_fn 30000000\n");
        free(out);

        /* With counts, and an unsymbolised frame. */
        vd[0] = 5;
        CHECK_INT(fp_pprof_add_sample(p, sd, 2, vd, tw, 2), 0);
        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_folded(p, 0, f), 0);
        fclose(f);
        CHECK(strstr(out, "main;app+0x10000 5\n") != NULL);
        CHECK(strstr(out, "main;rec;rec;rec 4\n") != NULL);
        free(out);

        /* A sample without a stack is still counted, in folded as well as in top's total. */
        vd[0] = 7;
        CHECK_INT(fp_pprof_add_sample(p, NULL, 0, vd, NULL, 0), 0);
        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_folded(p, 0, f), 0);
        fclose(f);
        CHECK(strncmp(out, "[unknown] 7\n", 12) == 0);
        free(out);
        vd[0] = 0;

        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_top(p, 1, 0, f), 0);
        fclose(f);
        printf("%s", out);
        CHECK(strncmp(out, "# event=cpu-clock\n", 18) == 0);
        CHECK(strstr(out, "Type: cpu (nanoseconds)\n") != NULL);
        CHECK(strstr(out, "Duration: 60ms\n") != NULL);
        CHECK(strstr(out, "Total: 80ms\n") != NULL);
        CHECK(strstr(out, "      flat  flat%   sum%        cum   cum%  function\n") != NULL);
        /* rec is on the stack three times per sample but counted once. */
        CHECK(strstr(out, "      40ms 50.00% 50.00%       40ms 50.00%  rec\n") != NULL);
        CHECK(strstr(out, "      30ms 37.50% 87.50%       30ms 37.50%  leaf_fn\n") != NULL);
        CHECK(strstr(out, "      10ms 12.50% 100.00%       40ms 50.00%  work\n") != NULL);
        CHECK(strstr(out, "         0  0.00% 100.00%       80ms 100.00%  main\n") != NULL);
        CHECK(strstr(out, "Threads:\n") != NULL);
        CHECK(strstr(out, "      50ms 62.50%  worker (11)\n") != NULL);
        CHECK(strstr(out, "      30ms 37.50%  main (10)\n") != NULL);
        CHECK(strstr(out, "worker (11)") < strstr(out, "main (10)"));
        CHECK(strstr(out, "Waits:") == NULL); /* no sample waited */
        free(out);

        /* Top 2, by count. */
        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_top(p, 0, 2, f), 0);
        fclose(f);
        CHECK(strstr(out, "Showing 2 of 5 functions") != NULL);
        CHECK(strstr(out, "         5 25.00% 25.00%          5 25.00%  app+0x10000\n") != NULL);
        CHECK(strstr(out, "  leaf_fn\n") == NULL);
        free(out);

        CHECK_INT(fp_pprof_write_top(p, 2, 0, stdout), -EINVAL);
        CHECK_INT(fp_pprof_write_folded(p, 2, stdout), -EINVAL);

        /* A wall profile's samples: some waited (by wait), the rest ran. */
        struct fp_pprof_label ws[] = {{.key = "thread_name", .str = "main"},
                                      {.key = "wait", .str = "sleep"}};
        struct fp_pprof_label wr[] = {{.key = "thread_name", .str = "main"},
                                      {.key = "wait", .str = "runqueue"}};
        int64_t vs[] = {1, 50000000}, vr[] = {1, 5000000};
        CHECK_INT(fp_pprof_add_sample(p, sb, 2, vs, ws, 2), 0);
        CHECK_INT(fp_pprof_add_sample(p, sb, 2, vr, wr, 2), 0);
        f = open_memstream(&out, &out_len);
        CHECK_INT(fp_pprof_write_top(p, 1, 0, f), 0);
        fclose(f);
        CHECK(strstr(out, "Waits:\n     value  share  wait\n") != NULL);
        CHECK(strstr(out, "      80ms 59.26%  [on the CPU]\n") != NULL);
        CHECK(strstr(out, "      50ms 37.04%  sleep\n") != NULL);
        CHECK(strstr(out, "       5ms  3.70%  runqueue\n") != NULL);
        CHECK(strstr(out, "Waits:") < strstr(out, "Threads:"));
        free(out);
        fp_pprof_free(p);
}

/* 100k distinct stacks, then all of them again: figures only, no timing verdicts. */
static void test_scale(void)
{
        struct fp_pprof *p = fp_pprof_new(), *q = NULL;
        uint64_t m, locs[1000], stack[8];
        int64_t v[] = {1, 10000000};
        struct fp_pprof_label l[2] = {{.key = "thread_name", .str = "w"}, {.key = "thread"}};
        uint8_t *buf = NULL;
        size_t len = 0;
        char err[256];
        double t0, t1;
        int bad = 0;

        printf("# scale\n");
        if (fp_pprof_add_sample_type(p, "samples", "count") < 0 ||
            fp_pprof_add_sample_type(p, "cpu", "nanoseconds") < 0 ||
            fp_pprof_mapping(p, 0x400000, 0x900000, 0, "/bin/big", "id", &m) < 0)
                abort();
        for (size_t i = 0; i < 1000; i++) {
                char name[32];
                uint64_t fid;

                snprintf(name, sizeof(name), "fn_%zu", i);
                if (fp_pprof_function(p, name, "big.c", &fid) < 0 ||
                    fp_pprof_location(p, m, 0x400000 + 64 * i, fid, &locs[i]) < 0)
                        abort();
        }
        t0 = now();
        for (int round = 0; round < 2; round++)
                for (uint32_t i = 0; i < 100000; i++) {
                        uint32_t x = i * 2654435761u;

                        for (int j = 0; j < 8; j++) {
                                stack[j] = locs[(x >> (j * 3)) % 1000];
                                x = x * 1103515245u + 12345u;
                        }
                        stack[0] = locs[i % 1000];
                        stack[7] = locs[i / 1000];
                        l[1].num = i % 16;
                        bad |= fp_pprof_add_sample(p, stack, 8, v, l, 2) < 0;
                }
        t1 = now();
        printf("# 200k add_sample (100k distinct): %.1f ms, %.0f ns per add\n", (t1 - t0) * 1e3,
               (t1 - t0) * 1e9 / 200000);
        CHECK(!bad);
        CHECK_INT(fp_pprof_n_samples(p), 100000);
        CHECK_INT(fp_pprof_total(p, 0), 200000);
        t0 = now();
        CHECK_INT(fp_pprof_encode(p, 1, &buf, &len), 0);
        t1 = now();
        printf("# encode+gzip: %.1f ms, %zu bytes\n", (t1 - t0) * 1e3, len);
        t0 = now();
        CHECK_INT(fp_pprof_decode(buf, len, 64 << 20, &q, err, sizeof(err)), 0);
        t1 = now();
        printf("# decode: %.1f ms %s\n", (t1 - t0) * 1e3, err);
        CHECK_INT(fp_pprof_n_samples(q), 100000);
        CHECK_INT(fp_pprof_total(q, 1), INT64_C(2000000000000));
        t0 = now();
        CHECK_INT(fp_pprof_merge(q, p), 0);
        t1 = now();
        printf("# merge of 100k samples: %.1f ms\n", (t1 - t0) * 1e3);
        CHECK_INT(fp_pprof_n_samples(q), 100000);
        CHECK_INT(fp_pprof_total(q, 0), 400000);
        free(buf);
        fp_pprof_free(p);
        fp_pprof_free(q);
}

/* Totals match the samples, and every location a sample names exists. */
static bool consistent(const struct fp_pprof *p)
{
        for (size_t t = 0; t < fp_pprof_n_sample_types(p); t++) {
                int64_t sum = 0;

                for (size_t i = 0; i < fp_pprof_n_samples(p); i++) {
                        struct fp_pprof_sample_view v;

                        if (fp_pprof_sample_get(p, i, &v) < 0)
                                return false;
                        sum += v.values[t];
                        for (size_t j = 0; j < v.n_locations; j++) {
                                struct fp_pprof_location_view l;

                                if (fp_pprof_location_get(p, v.location_ids[j], &l) < 0)
                                        return false;
                        }
                }
                if (sum != fp_pprof_total(p, t))
                        return false;
        }
        return true;
}

/* Build, encode, decode, merge twice, print: everything that allocates. */
static int scenario(bool *ret_consistent)
{
        struct fp_pprof *p, *q = NULL, *e = NULL;
        uint8_t *buf = NULL;
        size_t len = 0, out_len = 0;
        char err[256] = "", *out = NULL;
        FILE *f;
        int r;

        *ret_consistent = true;
        p = make_profile();
        if (!p)
                return -ENOMEM;
        r = fp_pprof_encode(p, 1, &buf, &len);
        if (r >= 0) {
                r = fp_pprof_decode(buf, len, 1 << 20, &q, err, sizeof(err));
                if (r < 0 && !err[0])
                        r = -EPROTO; /* every failure must say why */
        }
        if (r >= 0)
                r = fp_pprof_merge(q, p);
        if (r >= 0) {
                e = fp_pprof_new();
                r = e ? fp_pprof_merge(e, q) : -ENOMEM;
        }
        if (r >= 0) {
                f = open_memstream(&out, &out_len);
                if (!f)
                        abort();
                r = fp_pprof_write_top(q, 1, 0, f);
                if (r >= 0)
                        r = fp_pprof_write_folded(q, 1, f);
                fclose(f);
                free(out);
        }
        *ret_consistent = consistent(p) && (!q || consistent(q)) && (!e || consistent(e));
        free(buf);
        fp_pprof_free(p);
        fp_pprof_free(q);
        fp_pprof_free(e);
        return r;
}

/* Fails each allocation of the scenario in turn: -ENOMEM, no leak, no broken profile. */
static void test_alloc_failures(void)
{
        unsigned points = 0, bad = 0, broken = 0;
        bool ok;
        int r;

        printf("# allocation failures\n");
        for (long k = 0;; k++) {
                fp_pp_alloc_countdown = k;
                r = scenario(&ok);
                if (fp_pp_alloc_countdown >= 0) {
                        fp_pp_alloc_countdown = -1;
                        CHECK_INT(r, 0);
                        break;
                }
                points++;
                if (r != -ENOMEM) {
                        bad++;
                        printf("# failing allocation %ld gave %d\n", k, r);
                }
                if (!ok) {
                        broken++;
                        printf("# failing allocation %ld left an inconsistent profile\n", k);
                }
        }
        printf("# %u allocations failed one at a time\n", points);
        CHECK(points > 50);
        CHECK_INT(bad, 0);
        CHECK_INT(broken, 0);
}

static bool have_go(void)
{
        return system("command -v go >/dev/null 2>&1") == 0;
}

/* Runs cmd, returns its exit status and (in *ret_out) what it printed. */
static int run(const char *cmd, char **ret_out)
{
        FILE *f = popen(cmd, "r");
        int st;

        if (!f)
                return -1;
        *ret_out = slurp(f);
        st = pclose(f);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_go_pprof(void)
{
        struct fp_pprof *p;
        char path[] = "/tmp/test-pprof-XXXXXX", cmd[1536], *out = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        int fd, st;

        printf("# go tool pprof\n");
        if (!have_go()) {
                printf("# skipped: go is not on PATH\n");
                return;
        }
        if (!getenv("HOME") && !getenv("GOCACHE"))
                setenv("GOCACHE", "/tmp/test-pprof-gocache", 0);
        p = make_profile();
        CHECK(p != NULL);
        CHECK_INT(fp_pprof_encode(p, 1, &buf, &len), 0);
        fd = mkstemp(path);
        CHECK(fd >= 0);
        if (fd < 0)
                goto out;
        CHECK(write(fd, buf, len) == (ssize_t)len);
        close(fd);

        snprintf(cmd, sizeof(cmd), "go tool pprof -raw -symbolize=none %s 2>&1", path);
        st = run(cmd, &out);
        printf("%s", out);
        CHECK_INT(st, 0);
        CHECK(strstr(out, "leaf_fn") != NULL);
        CHECK(strstr(out, "abc123def") != NULL);
        CHECK(strstr(out, "thread_name:[worker]") != NULL);
        CHECK(strstr(out, "bytes:[4096") != NULL);
        free(out);

        snprintf(cmd, sizeof(cmd), "go tool pprof -top -symbolize=none %s 2>&1", path);
        st = run(cmd, &out);
        printf("%s", out);
        CHECK_INT(st, 0);
        CHECK(strstr(out, "leaf_fn") != NULL);
        CHECK(strstr(out, "Type: cpu") != NULL);
        CHECK(strstr(out, "host=web-1") != NULL);
        CHECK(strstr(out, "File: app") != NULL);
        free(out);

        /* The named main binary is the one pprof reports, whatever its rank. */
        CHECK_INT(fp_pprof_set_main_binary(p, "/no/such/file"), -ENOENT);
        CHECK_INT(fp_pprof_set_main_binary(p, "/lib/libc.so.6"), 0);
        {
                uint8_t *b2 = NULL;
                size_t l2 = 0;
                FILE *f;

                CHECK_INT(fp_pprof_encode(p, 1, &b2, &l2), 0);
                f = fopen(path, "wb");
                CHECK(f && fwrite(b2, 1, l2, f) == l2);
                if (f)
                        fclose(f);
                free(b2);
        }
        st = run(cmd, &out);
        CHECK_INT(st, 0);
        CHECK(strstr(out, "File: libc.so.6") != NULL);
        CHECK(strstr(out, "leaf_fn") != NULL);
        free(out);
        /* A merge keeps the main binary its source named. */
        {
                struct fp_pprof *m = fp_pprof_new();
                uint8_t *b3 = NULL;
                size_t l3 = 0;
                FILE *f;

                CHECK(m != NULL);
                if (m) {
                        CHECK(fp_pprof_add_sample_type(m, "samples", "count") >= 0);
                        CHECK(fp_pprof_add_sample_type(m, "cpu", "nanoseconds") >= 0);
                        CHECK_INT(fp_pprof_merge(m, p), 0);
                        CHECK_INT(fp_pprof_encode(m, 1, &b3, &l3), 0);
                        f = fopen(path, "wb");
                        CHECK(f && fwrite(b3, 1, l3, f) == l3);
                        if (f)
                                fclose(f);
                        free(b3);
                        fp_pprof_free(m);
                        st = run(cmd, &out);
                        CHECK_INT(st, 0);
                        CHECK(strstr(out, "File: libc.so.6") != NULL);
                        free(out);
                }
        }

        snprintf(cmd, sizeof(cmd),
                 "go tool pprof -top -sample_index=samples -symbolize=none %s 2>&1", path);
        st = run(cmd, &out);
        CHECK_INT(st, 0);
        CHECK(strstr(out, "Total samples = 7") != NULL || strstr(out, "of 7 total") != NULL);
        free(out);

        /* And what go writes back, we read. */
        char back[600];

        snprintf(back, sizeof(back), "%s.back", path);
        snprintf(cmd, sizeof(cmd), "go tool pprof -proto -symbolize=none -output %s %s 2>&1", back,
                 path);
        st = run(cmd, &out);
        CHECK_INT(st, 0);
        free(out);
        {
                FILE *f = fopen(back, "rb");
                struct fp_pprof *q = NULL;
                char err[256] = "";
                char *data = f ? slurp(f) : NULL;
                long n = f ? ftell(f) : 0;

                CHECK(f != NULL);
                if (f) {
                        CHECK_INT(fp_pprof_decode((uint8_t *)data, (size_t)n, 1 << 20, &q, err,
                                                  sizeof(err)),
                                  0);
                        printf("# go's re-encoding: %s\n", err);
                        CHECK_INT(fp_pprof_total(q, 1), 70000000);
                        fp_pprof_free(q);
                        fclose(f);
                }
                free(data);
                unlink(back);
        }
out:
        unlink(path);
        free(buf);
        fp_pprof_free(p);
}

/* Flame graphs: totals add up, self where the stack ends, pruning keeps every value, JSON. */
static void test_flame(void)
{
        struct fp_pprof *p = fp_pprof_new(), *q = fp_pprof_new();
        uint64_t m, fmain, fa, fb, lmain, la, lb;
        struct fp_flame *f = NULL;
        int64_t v1[2] = {1, 10}, v2[2] = {1, 20}, v3[2] = {1, 5}, v4[2] = {1, 7};

        FP_CHECK(p && q);
        for (struct fp_pprof *x = p;; x = q) {
                fp_pprof_add_sample_type(x, "samples", "count");
                fp_pprof_add_sample_type(x, "cpu", "nanoseconds");
                fp_pprof_mapping(x, 0x1000, 0x9000, 0, "/bin/app", "", &m);
                fp_pprof_function(x, "main", "", &fmain);
                fp_pprof_function(x, "a", "", &fa);
                fp_pprof_function(x, "b", "", &fb);
                fp_pprof_location(x, m, 0x1100, fmain, &lmain);
                fp_pprof_location(x, m, 0x1200, fa, &la);
                fp_pprof_location(x, m, 0x1300, fb, &lb);
                if (x == q)
                        break;
        }
        /* main;a;b 10, main;b 20, main 5 (self); and an empty stack 7. */
        FP_CHECK_EQ_INT(fp_pprof_add_sample(p, (uint64_t[]){lb, la, lmain}, 3, v1, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_pprof_add_sample(p, (uint64_t[]){lb, lmain}, 2, v2, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_pprof_add_sample(p, (uint64_t[]){lmain}, 1, v3, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_pprof_add_sample(p, NULL, 0, v4, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_pprof_add_sample(q, (uint64_t[]){lb, lmain}, 2, v3, NULL, 0), 0);
        FP_CHECK_EQ_INT(fp_flame_new(&f), 0);
        FP_CHECK_EQ_INT(fp_flame_add(f, p, 1, 0), 0);
        FP_CHECK_EQ_INT(fp_flame_add(f, q, 1, 1), 0);
        FP_CHECK_EQ_INT(fp_flame_add(f, p, 2, 0), -EINVAL);
        FP_CHECK_EQ_INT(fp_flame_total(f, 0), 42);
        FP_CHECK_EQ_INT(fp_flame_total(f, 1), 5);
        /* all, main, a, b under a, b under main, [unknown] */
        FP_CHECK_EQ_INT(fp_flame_n_nodes(f), 6);
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        FP_CHECK_EQ_INT(fp_flame_write_json(f, true, fp_write_file, out), 0);
        fclose(out);
        FP_CHECK_EQ_STR(
            buf, "{\"name\":\"all\",\"self\":0,\"total\":42,\"base_self\":0,\"base_total\":5,"
                 "\"children\":[{\"name\":\"main\",\"self\":5,\"total\":35,\"base_self\":0,"
                 "\"base_total\":5,\"children\":[{\"name\":\"b\",\"self\":20,\"total\":20,"
                 "\"base_self\":5,\"base_total\":5,\"children\":[]},{\"name\":\"a\",\"self\":0,"
                 "\"total\":10,\"base_self\":0,\"base_total\":0,\"children\":[{\"name\":\"b\","
                 "\"self\":10,\"total\":10,\"base_self\":0,\"base_total\":0,\"children\":[]}]}]},"
                 "{\"name\":\"[unknown]\",\"self\":7,\"total\":7,\"base_self\":0,"
                 "\"base_total\":0,\"children\":[]}]}");
        free(buf);
        /* Pruned to 4: the lighter subtrees fold into "(other)"; totals stay. */
        FP_CHECK_EQ_INT(fp_flame_prune(f, 4), 0);
        FP_CHECK(fp_flame_n_nodes(f) <= 6);
        FP_CHECK_EQ_INT(fp_flame_total(f, 0), 42);
        buf = NULL;
        out = open_memstream(&buf, &len);
        FP_CHECK_EQ_INT(fp_flame_write_json(f, false, fp_write_file, out), 0);
        fclose(out);
        FP_CHECK(strstr(buf, "\"(other)\"") != NULL);
        FP_CHECK(strstr(buf, "\"name\":\"main\",\"self\":5,\"total\":35") != NULL);
        free(buf);
        fp_flame_free(f);
        fp_pprof_free(p);
        fp_pprof_free(q);
}

int main(void)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        test_round_trip();
        test_aggregation();
        test_merge();
        test_merge_renamed();
        test_mapping_vaddr();
        test_merge_typed();
        test_reject();
        test_inline();
        test_text();
        test_scale();
        test_alloc_failures();
        test_go_pprof();
        test_flame();
        return FP_TEST_DONE();
}
