/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of rules (agent/core/rule.c): how a rule is read from a request,
 * from a configuration file's words and from its stored text; what it
 * matches (name, executable, unit, cgroup, the owner's rights); its
 * service names; and the refusal of every malformed rule, regexes too
 * costly to compile among them.
 */
#include "fp-test.h"
#include "rule.h"
#include "targetconf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A rule from configuration words, or NULL (err filled). */
static struct fp_rule *from_words(const char *line, uid_t owner, char *err, size_t len)
{
        struct fp_ctl_request q;
        struct fp_rule *r = NULL;

        if (fp_rule_request_from_words(line, &q, err, len) < 0)
                return NULL;
        if (fp_rule_new(&q, owner, &r, err, len) < 0)
                r = NULL;
        fp_ctl_request_done(&q);
        return r;
}

static struct fp_rule_proc proc(uid_t owner, const char *comm, const char *exe, const char *cgroup)
{
        struct fp_rule_proc p = {.pid = 4242, .owner = owner, .starttime = 1};
        snprintf(p.comm, sizeof(p.comm), "%s", comm);
        snprintf(p.exe, sizeof(p.exe), "%s", exe);
        snprintf(p.cgroup, sizeof(p.cgroup), "%s", cgroup);
        return p;
}

static void test_name(void)
{
        char err[512] = "", svc[80];
        struct fp_rule *r = from_words("--name '^api (worker)?$' --freq 199", 0, err, sizeof(err));

        FP_CHECK(r != NULL);
        if (!r) {
                fprintf(stderr, "%s\n", err);
                return;
        }
        FP_CHECK_EQ_INT(r->kind, FP_RULE_NAME);
        FP_CHECK_EQ_STR(r->match, "^api (worker)?$");
        FP_CHECK_EQ_INT(r->max_processes, FP_RULE_MAX_PROCESSES_DEFAULT);
        FP_CHECK_EQ_INT(r->cfg.period, 1000000000 / 199); /* a clock samples by period */
        FP_CHECK(fp_rule_matches(r, &(struct fp_rule_proc){0}) == false);
        struct fp_rule_proc a = proc(1000, "api worker", "/usr/bin/python3.11", "");
        struct fp_rule_proc b = proc(1000, "api-worker", "/usr/bin/api", "");
        FP_CHECK(fp_rule_matches(r, &a));
        FP_CHECK(!fp_rule_matches(r, &b));
        /* No --service: each process's executable names it. */
        FP_CHECK_EQ_INT(fp_rule_needs(r), FP_RULE_NEED_EXE);
        fp_rule_service_of(r, &a, svc, sizeof(svc));
        FP_CHECK_EQ_STR(svc, "python3.11");
        struct fp_rule_proc odd = proc(0, "x", "/opt/my app/x y", "");
        fp_rule_service_of(r, &odd, svc, sizeof(svc));
        FP_CHECK_EQ_STR(svc, "x_y");
        /* Its text gives the same rule back. */
        struct fp_rule *back = NULL;
        FP_CHECK_EQ_INT(fp_rule_from_spec(r->spec, 7, &back, err, sizeof(err)), 0);
        if (back) {
                FP_CHECK_EQ_STR(back->match, r->match);
                FP_CHECK_EQ_INT(back->owner, 7);
                FP_CHECK_EQ_INT(back->cfg.period, r->cfg.period);
                FP_CHECK_EQ_STR(back->spec, r->spec);
        }
        fp_rule_free(back);
        fp_rule_free(r);
}

static void test_owner(void)
{
        char err[512];
        struct fp_rule *mine = from_words("--name job", 1000, err, sizeof(err));
        struct fp_rule *roots = from_words("--name job", 0, err, sizeof(err));
        struct fp_rule_proc theirs = proc(1001, "job", "/bin/job", "");
        struct fp_rule_proc own = proc(1000, "job", "/bin/job", "");
        struct fp_rule_proc root = proc(0, "job", "/bin/job", "");

        FP_CHECK(mine && roots);
        if (!mine || !roots)
                return;
        FP_CHECK(fp_rule_matches(mine, &own));
        FP_CHECK(!fp_rule_matches(mine, &theirs));
        FP_CHECK(!fp_rule_matches(mine, &root));
        FP_CHECK(fp_rule_matches(roots, &theirs));
        FP_CHECK(fp_rule_matches(roots, &root));
        fp_rule_free(mine);
        fp_rule_free(roots);
}

static void test_exe(void)
{
        char err[512], link[] = "/tmp/fp-test-rule-XXXXXX", path[600];
        FP_CHECK(mkdtemp(link) != NULL);
        snprintf(path, sizeof(path), "%s/sh", link);
        FP_CHECK_EQ_INT(symlink("/bin/true", path), 0);
        char words[700];
        snprintf(words, sizeof(words), "--exe %s", path);
        struct fp_rule *r = from_words(words, 0, err, sizeof(err));
        FP_CHECK(r != NULL);
        if (r) {
                char real[PATH_MAX];
                FP_CHECK(realpath("/bin/true", real) != NULL);
                struct fp_rule_proc viaLink = proc(0, "true", real, "");
                struct fp_rule_proc other = proc(0, "true", "/bin/false", "");
                FP_CHECK(fp_rule_matches(r, &viaLink)); /* /proc/PID/exe shows the resolved path */
                FP_CHECK(!fp_rule_matches(r, &other));
                FP_CHECK_EQ_STR(r->service, "sh");
                FP_CHECK_EQ_INT(fp_rule_needs(r), FP_RULE_NEED_EXE);
        }
        fp_rule_free(r);
        unlink(path);
        rmdir(link);
}

static void test_unit_and_cgroup(void)
{
        char err[512];
        struct fp_rule *u = from_words("--unit nginx", 0, err, sizeof(err));

        if (!u) {
                /* Only where no cgroup v2 hierarchy is mounted. */
                FP_CHECK(strstr(err, "cgroup v2") != NULL);
                fprintf(stderr, "test-rule: no cgroup v2 here: %s\n", err);
                return;
        }
        FP_CHECK_EQ_STR(u->match, "nginx.service");
        FP_CHECK_EQ_STR(u->service, "nginx");
        struct fp_rule_proc in = proc(0, "nginx", "/usr/sbin/nginx", "/system.slice/nginx.service");
        struct fp_rule_proc below =
            proc(0, "php", "/usr/bin/php", "/system.slice/nginx.service/workers");
        struct fp_rule_proc prefix =
            proc(0, "nginx", "/usr/sbin/nginx", "/system.slice/nginx.service2");
        struct fp_rule_proc none = proc(0, "nginx", "/usr/sbin/nginx", "");
        FP_CHECK(fp_rule_matches(u, &in));
        FP_CHECK(fp_rule_matches(u, &below));
        FP_CHECK(!fp_rule_matches(u, &prefix));
        FP_CHECK(!fp_rule_matches(u, &none));
        fp_rule_free(u);

        struct fp_rule *t =
            from_words("--unit 'getty@tty1.service' --service tty", 0, err, sizeof(err));
        FP_CHECK(t && strcmp(t->match, "getty@tty1.service") == 0 &&
                 strcmp(t->service, "tty") == 0);
        fp_rule_free(t);

        /* The root cgroup exists everywhere: every process is under it. */
        struct fp_rule *c = from_words("--cgroup /", 0, err, sizeof(err));
        FP_CHECK(c != NULL);
        if (c) {
                FP_CHECK_EQ_STR(c->match, "/");
                FP_CHECK_EQ_STR(c->service, "root");
                FP_CHECK(fp_rule_matches(c, &in));
                FP_CHECK(!fp_rule_matches(c, &none)); /* cgroup unknown: no match */
        }
        fp_rule_free(c);
        c = from_words("--cgroup /no-such-fp-cgroup", 0, err, sizeof(err));
        FP_CHECK(c == NULL && strstr(err, "no such cgroup") != NULL);
        c = from_words("--cgroup /a/../b", 0, err, sizeof(err));
        FP_CHECK(c == NULL && strstr(err, "not a plain path") != NULL);
        c = from_words("--cgroup relative", 0, err, sizeof(err));
        FP_CHECK(c == NULL && strstr(err, "absolute path") != NULL);
}

/* Every malformed rule is refused with one line naming what is wrong. */
static void test_refused(void)
{
        static const struct {
                const char *words, *why;
        } bad[] = {
            {"", "empty target"},
            {"--name", "needs a value"},
            {"--name a --exe /bin/true", "not several"},
            {"--freq 99", "give a PID, or one of"},
            {"--name 'a(", "unbalanced quote"},
            {"--name 'a('", "invalid --name regex"},
            {"--name a --name b", "given twice"},
            {"--name a --bogus", "unknown option '--bogus'"},
            {"--name a 42", "unexpected word '42'"},
            {"--exe bin/true", "absolute path"},
            {"--unit 'bad unit'", "invalid --unit"},
            {"--name a --service 'a b'", "invalid --service"},
            {"--name a --service " /* 65 characters */
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "invalid --service"},
            {"--name a --max-processes 0", "invalid --max-processes"},
            {"--name a --max-processes 5000", "invalid --max-processes"},
            {"--name a --event no-such-event", "unknown event 'no-such-event'"},
            {"--name a --freq 0", "invalid frequency"},
            {"--name a --freq 10 --period 5", "exclude each other"},
            {"--name a --unwind sideways", "invalid --unwind"},
            {"--name a --off-cpu --off-cpu-period 999", "invalid --off-cpu-period"},
            {"--name a --off-cpu --off-cpu-period 1000000001", "invalid --off-cpu-period"},
            {"--name a --off-cpu --off-cpu-period 1ms", "invalid --off-cpu-period"},
            {"--name a --off-cpu-period 1000000", "--off-cpu-period needs --off-cpu"},
            /* Regexes glibc would take seconds to forever to compile (found by fuzz-control). */
            {"--name 'r++++++++++++++++++++++++++++++++++++++++++++++++'", "a repeat of a repeat"},
            {"--name 'a*{2}'", "a repeat of a repeat"},
            {"--name 'x?+'", "a repeat of a repeat"},
            {"--name '((a{1,255}){1,255}){1,255}'", "multiply past 1000"},
            {"--name 'a{2000,}'", "multiply past 1000"},
        };
        char err[512];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                err[0] = 0;
                struct fp_rule *r = from_words(bad[i].words, 0, err, sizeof(err));
                if (r || !strstr(err, bad[i].why) || strchr(err, '\n')) {
                        fprintf(stderr, "test-rule: '%s' gave '%s', want '%s'\n", bad[i].words, err,
                                bad[i].why);
                        FP_CHECK(false);
                }
                fp_rule_free(r);
                FP_CHECK(fp_rule_check_words(bad[i].words, err, sizeof(err)) < 0);
        }
        FP_CHECK_EQ_INT(
            fp_rule_check_words("--name ok --freq 49 --follow-children", err, sizeof(err)), 0);
        /* What the regex check must not refuse: one repeat each, escapes, brackets, bounds. */
        static const char *const fine[] = {
            "--name '^(api|web)-[0-9]+ worker?$'",
            "--name 'a\\++b'",
            "--name '[+*?{]+x'",
            "--name '[]+*]{2,3}y'",
            "--name '[[:digit:]]+[[:alpha:]]*'",
            "--name '(ab){3}(cd){10,20}'",
            "--name '(((a+)+)+)+'",
        };
        for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
                if (fp_rule_check_words(fine[i], err, sizeof(err)) != 0) {
                        fprintf(stderr, "test-rule: '%s' refused: %s\n", fine[i], err);
                        FP_CHECK(false);
                }
        /* A long but valid selector, and one too long. */
        char *line = malloc(FP_RULE_MATCH_MAX + 64);
        memset(line, 0, FP_RULE_MATCH_MAX + 64);
        memcpy(line, "--name ", 7);
        memset(line + 7, 'a', FP_RULE_MATCH_MAX);
        FP_CHECK_EQ_INT(fp_rule_check_words(line, err, sizeof(err)), 0);
        line[7 + FP_RULE_MATCH_MAX] = 'a';
        FP_CHECK(fp_rule_check_words(line, err, sizeof(err)) < 0);
        free(line);
}

/*
 * --off-cpu on a rule: its period (10 ms by default), kept in the rule's
 * text and in the target configuration text a restarted agent resumes.
 */
static void test_off_cpu(void)
{
        char err[512] = "", text[512];
        struct fp_rule *r = from_words("--name db --off-cpu", 0, err, sizeof(err));
        struct fp_perf_config back;
        bool follow = true;

        FP_CHECK(r != NULL);
        if (!r) {
                fprintf(stderr, "%s\n", err);
                return;
        }
        FP_CHECK_EQ_INT(r->cfg.off_cpu_period, FP_PERF_OFF_CPU_PERIOD_DEFAULT);
        struct fp_rule *again = NULL;
        FP_CHECK_EQ_INT(fp_rule_from_spec(r->spec, 0, &again, err, sizeof(err)), 0);
        FP_CHECK(again && again->cfg.off_cpu_period == FP_PERF_OFF_CPU_PERIOD_DEFAULT);
        fp_rule_free(again);
        fp_rule_free(r);
        r = from_words("--name db --off-cpu --off-cpu-period 2500000 --freq 49", 0, err,
                       sizeof(err));
        FP_CHECK(r && r->cfg.off_cpu_period == 2500000);
        if (!r)
                return;
        fp_targetconf_format(&r->cfg, false, text, sizeof(text));
        FP_CHECK(strstr(text, " off_cpu=2500000") != NULL);
        FP_CHECK_EQ_INT(fp_targetconf_parse(text, &back, &follow), 0);
        FP_CHECK_EQ_INT(back.off_cpu_period, 2500000);
        FP_CHECK(!follow);
        fp_targetconf_format(&r->cfg, true, text, sizeof(text));
        FP_CHECK_EQ_INT(fp_targetconf_parse(text, &back, &follow), 0);
        FP_CHECK(follow && back.off_cpu_period == 2500000);
        /* Without --off-cpu the text says nothing of it, and reads back without it. */
        r->cfg.off_cpu_period = 0;
        fp_targetconf_format(&r->cfg, false, text, sizeof(text));
        FP_CHECK(strstr(text, "off_cpu") == NULL);
        FP_CHECK_EQ_INT(fp_targetconf_parse(text, &back, NULL), 0);
        FP_CHECK_EQ_INT(back.off_cpu_period, 0);
        FP_CHECK_EQ_INT(fp_targetconf_parse("event=cpu-clock freq=0 period=10101010 kernel=0 "
                                            "off_cpu=0",
                                            &back, NULL),
                        -EINVAL);
        FP_CHECK_EQ_INT(fp_targetconf_parse("event=cpu-clock freq=0 period=10101010 kernel=0 "
                                            "off_cpu=5000000000",
                                            &back, NULL),
                        -EINVAL);
        fp_rule_free(r);
}

static void test_start_options(void)
{
        const struct fp_start_option *o = fp_start_option_find("--follow-children");
        FP_CHECK(o && strcmp(o->key, "follow") == 0 && !o->has_value);
        o = fp_start_option_find("--max-processes");
        FP_CHECK(o && strcmp(o->key, "max_processes") == 0 && o->has_value);
        FP_CHECK(fp_start_option_find("--pid") == NULL);
}

/* Each interpreter's switch, in a rule and through the stored text, alone and all together. */
static void test_interpreters_off(void)
{
        static const char *const words[] = {"--no-python", "--no-php", "--no-ruby", "--no-perl"};
        char err[256], line[128], text[512];
        struct fp_perf_config back;

        for (unsigned i = 0; i < 4; i++) {
                snprintf(line, sizeof(line), "--name app %s", words[i]);
                struct fp_rule *r = from_words(line, 0, err, sizeof(err));
                FP_CHECK(r != NULL);
                if (!r)
                        continue;
                FP_CHECK_EQ_INT(fp_perf_interpreters_off(&r->cfg), 1u << i);
                fp_targetconf_format(&r->cfg, false, text, sizeof(text));
                FP_CHECK_EQ_INT(fp_targetconf_parse(text, &back, NULL), 0);
                FP_CHECK_EQ_INT(fp_perf_interpreters_off(&back), 1u << i);
                fp_rule_free(r);
        }
        struct fp_rule *r = from_words("--name app --no-perl --no-ruby --no-php --no-python "
                                       "--no-javascript --follow-children --off-cpu",
                                       0, err, sizeof(err));
        FP_CHECK(r != NULL);
        if (!r)
                return;
        FP_CHECK_EQ_INT(fp_perf_interpreters_off(&r->cfg), FP_PERF_INTERPRETERS);
        fp_targetconf_format(&r->cfg, true, text, sizeof(text));
        FP_CHECK(strstr(text, " python=0 php=0 ruby=0 perl=0 javascript=0") != NULL);
        bool follow = false;
        FP_CHECK_EQ_INT(fp_targetconf_parse(text, &back, &follow), 0);
        FP_CHECK(follow && back.no_javascript && back.off_cpu_period);
        FP_CHECK_EQ_INT(fp_perf_interpreters_off(&back), FP_PERF_INTERPRETERS);
        FP_CHECK_EQ_INT(fp_targetconf_parse("event=cpu-clock freq=0 period=10101010 kernel=0 "
                                            "ruby=1",
                                            &back, NULL),
                        -EINVAL);
        fp_rule_free(r);
}

/* This process, read as rules read it. */
static void test_read_proc(void)
{
        struct fp_rule_proc p;
        FP_CHECK_EQ_INT(fp_rule_read_proc(getpid(), FP_RULE_NEED_EXE | FP_RULE_NEED_CGROUP, &p), 0);
        FP_CHECK_EQ_INT(p.owner, getuid());
        FP_CHECK(p.starttime > 0);
        FP_CHECK_EQ_STR(p.comm, "test-rule");
        FP_CHECK(strstr(p.exe, "/test-rule") != NULL);
        FP_CHECK(fp_rule_read_proc(0x7ffffff0, 0, &p) < 0);
}

int main(void)
{
        test_name();
        test_owner();
        test_exe();
        test_unit_and_cgroup();
        test_refused();
        test_start_options();
        test_off_cpu();
        test_interpreters_off();
        test_read_proc();
        return FP_TEST_DONE();
}
