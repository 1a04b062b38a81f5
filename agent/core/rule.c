/* SPDX-License-Identifier: MIT */
/*
 * Rules: what they are, how they are written and how they match; see
 * rule.h. Pure but for reading /proc and resolving an --exe path.
 */
#include "rule.h"
#include "procfs.h"
#include "targetconf.h"
#include "offcpu.h"
#include "unwind.h"
#include "upload_contract.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup"

static const struct fp_start_option start_options[] = {
    {"--event", "event", true},
    {"--freq", "freq", true},
    {"--period", "period", true},
    {"--kernel", "kernel", false},
    {"--best-effort", "best_effort", false},
    {"--follow-children", "follow", false},
    {"--unwind", "unwind", true},
    {"--off-cpu", "off_cpu", false},
    {"--off-cpu-period", "off_cpu_period", true},
    {"--no-python", "no_python", false},
    {"--no-php", "no_php", false},
    {"--no-ruby", "no_ruby", false},
    {"--no-perl", "no_perl", false},
    {"--no-javascript", "no_javascript", false},
    {"--name", "name", true},
    {"--exe", "exe", true},
    {"--unit", "unit", true},
    {"--cgroup", "cgroup", true},
    {"--service", "service", true},
    {"--max-processes", "max_processes", true},
};

/* The largest product of the bounds of {n,m} repeats a --name regex may hold. */
#define REGEX_MAX_REPEAT 1000

/*
 * Why a --name regex would cost the agent too much to compile, or NULL.
 * glibc's regcomp() copies a repeated expression once per repetition: a
 * repeat of a repeat ("a++++", "a*{9}") doubles its work with each one, so
 * twenty of them take seconds and sixty forever, and bounded repeats inside
 * bounded repeats multiply ("((a{1,255}){1,255}){1,255}"). Any local user
 * may send one, to the root agent's event loop, so both are refused (a
 * repeat of a repeat matches nothing a single one does not).
 */
static const char *regex_risk(const char *re)
{
        bool after_repeat = false;
        uint64_t product = 1;

        for (const char *p = re; *p; p++) {
                if (*p == '\\' && p[1]) {
                        p++;
                        after_repeat = false;
                } else if (*p == '[') {
                        /* A bracket expression: ']' first is literal, [:class:] nests. */
                        const char *q = p + 1;
                        if (*q == '^')
                                q++;
                        if (*q == ']')
                                q++;
                        while (*q && *q != ']') {
                                if (*q == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
                                        const char *end = strchr(q + 2, q[1]);
                                        q = end && end[1] == ']' ? end + 2 : q + 1;
                                } else {
                                        q++;
                                }
                        }
                        p = *q ? q : q - 1;
                        after_repeat = false;
                } else if (*p == '*' || *p == '+' || *p == '?' || *p == '{') {
                        if (after_repeat)
                                return "a repeat of a repeat (as in a++ or a*{2}) is too costly "
                                       "to compile";
                        if (*p == '{') {
                                char *end;
                                unsigned long lo = strtoul(p + 1, &end, 10), hi = lo;
                                if (*end == ',') /* {n,}: counted as n + 1 copies */
                                        hi = end[1] == '}' ? lo + 1 : strtoul(end + 1, NULL, 10);
                                product *=
                                    hi > REGEX_MAX_REPEAT ? REGEX_MAX_REPEAT + 1 : (hi ? hi : 1);
                                if (product > REGEX_MAX_REPEAT)
                                        return "its {n,m} repeats multiply past 1000 copies";
                                const char *close = strchr(p, '}');
                                if (close)
                                        p = close;
                        }
                        after_repeat = true;
                } else {
                        after_repeat = false;
                }
        }
        return NULL;
}

const struct fp_start_option *fp_start_option_find(const char *flag)
{
        for (size_t i = 0; i < sizeof(start_options) / sizeof(start_options[0]); i++)
                if (strcmp(start_options[i].flag, flag) == 0)
                        return &start_options[i];
        return NULL;
}

static bool is_on(const struct fp_ctl_request *q, const char *key)
{
        const char *v = fp_ctl_request_get(q, key);
        return v && strcmp(v, "1") == 0;
}

int fp_rule_sampling_from_request(const struct fp_ctl_request *q, struct fp_perf_config *ret,
                                  bool *ret_follow, char *err, size_t err_len)
{
        const char *ev = fp_ctl_request_get(q, "event");
        const char *freq = fp_ctl_request_get(q, "freq");
        const char *period = fp_ctl_request_get(q, "period");
        const char *unwind = fp_ctl_request_get(q, "unwind");
        char bad[FP_PERF_EVENT_NAME_MAX + 1];
        struct fp_perf_config cfg = {0};

        switch (fp_perf_event_list_parse(ev ? ev : "cpu-clock", &cfg, bad, sizeof(bad))) {
        case 0:
                break;
        case -EEXIST:
                return fp_errf(err, err_len, -EINVAL, "event '%s' appears twice in --event list",
                               bad);
        case -E2BIG:
                return fp_errf(err, err_len, -EINVAL, "too many events in --event list: at most %d",
                               FP_PERF_MAX_EVENTS);
        default:
                if (ev && strchr(ev, ','))
                        return fp_errf(err, err_len, -EINVAL, "unknown event '%s' in --event list",
                                       bad);
                return fp_errf(err, err_len, -EINVAL, "unknown event '%s'", ev);
        }
        cfg.best_effort = is_on(q, "best_effort");
        if (freq && period)
                return fp_errf(err, err_len, -EINVAL, "--freq and --period exclude each other");
        if (period) {
                if (fp_parse_uint(period, 1, UINT64_MAX / 2, &cfg.period) < 0)
                        return fp_errf(
                            err, err_len, -EINVAL, "invalid period '%s': a positive number of %s",
                            period, fp_perf_event_is_clock(&cfg.event) ? "nanoseconds" : "events");
        } else {
                uint64_t hz = 99;
                if (freq && fp_parse_uint(freq, 1, FP_PERF_MAX_FREQ, &hz) < 0)
                        return fp_errf(err, err_len, -EINVAL, "invalid frequency '%s': 1 to %d Hz",
                                       freq, FP_PERF_MAX_FREQ);
                /* Clocks count nanoseconds: a fixed period gives exact time weights. */
                if (fp_perf_event_is_clock(&cfg.event))
                        cfg.period = 1000000000ULL / hz;
                else
                        cfg.freq = hz;
        }
        cfg.kernel_frames = is_on(q, "kernel");
        cfg.no_python = is_on(q, "no_python");
        cfg.no_php = is_on(q, "no_php");
        cfg.no_ruby = is_on(q, "no_ruby");
        cfg.no_perl = is_on(q, "no_perl");
        cfg.no_javascript = is_on(q, "no_javascript");
        const char *off = fp_ctl_request_get(q, "off_cpu_period");
        if (off && fp_parse_uint(off, 1000, FP_OFFCPU_PERIOD_MAX, &cfg.off_cpu_period) < 0)
                return fp_errf(err, err_len, -EINVAL,
                               "invalid --off-cpu-period '%s': 1000 to 1000000000 nanoseconds",
                               off);
        if (off && !is_on(q, "off_cpu"))
                return fp_errf(err, err_len, -EINVAL, "--off-cpu-period needs --off-cpu");
        if (is_on(q, "off_cpu") && !cfg.off_cpu_period)
                cfg.off_cpu_period = FP_PERF_OFF_CPU_PERIOD_DEFAULT;
        if (unwind && fp_unwind_mode_parse(unwind, &cfg.unwind) < 0)
                return fp_errf(err, err_len, -EINVAL, "invalid --unwind '%s': fp, dwarf or auto",
                               unwind);
        fp_targetconf_finish(&cfg);
        *ret = cfg;
        if (ret_follow)
                *ret_follow = is_on(q, "follow");
        return 0;
}

int fp_rule_user_rights(struct fp_perf_config *cfg, uid_t uid, pid_t peer, char *err,
                        size_t err_len)
{
        int paranoid = fp_perf_paranoid();

        if (uid == 0 || paranoid <= 1 || (peer > 0 && fp_perf_pid_capable(peer)))
                return 0;
        if (paranoid >= 3)
                return fp_errf(err, err_len, -EACCES,
                               "permission denied: perf_event_paranoid is %d, so the kernel lets "
                               "no user without CAP_PERFMON profile",
                               paranoid);
        if (cfg->kernel_frames)
                return fp_errf(err, err_len, -EACCES,
                               "permission denied: kernel frames (--kernel) need CAP_PERFMON or "
                               "CAP_SYS_ADMIN at perf_event_paranoid %d",
                               paranoid);
        cfg->count_kernel = false; /* user mode only, as the kernel would count for this user */
        return 0;
}

static const char *const selector_keys[] = {
    [FP_RULE_NAME] = "name",
    [FP_RULE_EXE] = "exe",
    [FP_RULE_UNIT] = "unit",
    [FP_RULE_CGROUP] = "cgroup",
};

const char *fp_rule_kind_name(enum fp_rule_kind kind)
{
        return selector_keys[kind];
}

bool fp_rule_requested(const struct fp_ctl_request *q)
{
        for (size_t k = 0; k < sizeof(selector_keys) / sizeof(selector_keys[0]); k++)
                if (fp_ctl_request_get(q, selector_keys[k]))
                        return true;
        return false;
}

/* Letters, digits and extra only. */
static bool chars_ok(const char *s, const char *extra)
{
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || strchr(extra, *s)))
                        return false;
        return true;
}

/* A unit name as systemd writes it; "nginx" means nginx.service. */
static int parse_unit(const char *v, char *buf, size_t len, char *err, size_t err_len)
{
        if (!*v || strlen(v) > 200 || !chars_ok(v, ":-_.@\\"))
                return fp_errf(err, err_len, -EINVAL,
                               "invalid --unit '%.64s': a systemd unit name such as nginx.service",
                               v);
        snprintf(buf, len, "%s%s", v, strchr(v, '.') ? "" : ".service");
        return 0;
}

/* --unit and --cgroup read the cgroup v2 hierarchy; its mount point into root. */
static int need_cgroup2(char *root, size_t len, char *err, size_t err_len)
{
        if (!fp_proc_cgroup2_root(root, len))
                return fp_errf(err, err_len, -EOPNOTSUPP,
                               "no cgroup v2 hierarchy is mounted: --unit and --cgroup need it");
        return 0;
}

/* Whether p starts with the directory dir; the rest of p into *ret_rest. */
static bool strip_dir(const char *p, const char *dir, const char **ret_rest)
{
        size_t n = strlen(dir);
        if (strncmp(p, dir, n) != 0 || (p[n] != '/' && p[n]))
                return false;
        *ret_rest = p + n;
        return true;
}

/*
 * A cgroup v2 path, given under the hierarchy's mount point
 * (/sys/fs/cgroup/a/b) or as the processes' cgroup files show it (/a/b),
 * into "/a/b" ("/" for the root). It must exist: a typo would otherwise
 * match nothing for ever, silently.
 */
static int parse_cgroup(const char *v, char *buf, size_t len, char *err, size_t err_len)
{
        char dir[PATH_MAX], root[PATH_MAX];
        struct stat st;
        const char *p = v;
        size_t n;
        int e = need_cgroup2(root, sizeof(root), err, err_len);

        if (e < 0)
                return e;
        if (!strip_dir(v, root, &p) && !strip_dir(v, CGROUP_ROOT, &p))
                p = v;
        if (*p != '/' && *p)
                return fp_errf(err, err_len, -EINVAL,
                               "invalid --cgroup '%.64s': an absolute path such as "
                               "/system.slice/nginx.service",
                               v);
        snprintf(buf, len, "%s", *p ? p : "/");
        n = strlen(buf);
        while (n > 1 && buf[n - 1] == '/')
                buf[--n] = 0;
        if (strstr(buf, "/../") || strstr(buf, "/./") || strstr(buf, "//") ||
            (n >= 3 && strcmp(buf + n - 3, "/..") == 0) ||
            (n >= 2 && strcmp(buf + n - 2, "/.") == 0) || strchr(buf, '\n'))
                return fp_errf(err, err_len, -EINVAL, "invalid --cgroup '%.64s': not a plain path",
                               v);
        snprintf(dir, sizeof(dir), "%s%s", root, strcmp(buf, "/") == 0 ? "" : buf);
        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                return fp_errf(err, err_len, -ENOENT, "no such cgroup: %.200s", dir);
        return 0;
}

/* The last path component of s (s itself when it has none). */
static const char *base_name(const char *s)
{
        const char *slash = strrchr(s, '/');
        return slash && slash[1] ? slash + 1 : s;
}

/* A service name from any text: characters the upload contract refuses become '_'. */
static void service_from(const char *s, char *buf, size_t len)
{
        size_t n = 0;

        for (; *s && n + 1 < len && n < FP_TARGET_SERVICE_MAX; s++)
                buf[n++] = chars_ok((char[]){*s, 0}, ".-_@:") ? *s : '_';
        buf[n] = 0;
        if (!n)
                snprintf(buf, len, "unknown");
}

/* The rule's text: every key of q but cmd, one "key=value" line each. */
static char *spec_of(const struct fp_ctl_request *q)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return NULL;
        for (size_t i = 0; i < q->n; i++)
                if (strcmp(q->keys[i], "cmd") != 0)
                        fprintf(f, "%s=%s\n", q->keys[i], q->values[i]);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

int fp_rule_new(const struct fp_ctl_request *q, uid_t owner, struct fp_rule **ret, char *err,
                size_t err_len)
{
        struct fp_rule *r;
        const char *v = NULL, *service = fp_ctl_request_get(q, "service");
        const char *maxp = fp_ctl_request_get(q, "max_processes");
        int n = 0, e;

        r = calloc(1, sizeof(*r));
        if (!r)
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        r->owner = owner;
        for (size_t k = 0; k < sizeof(selector_keys) / sizeof(selector_keys[0]); k++)
                if (fp_ctl_request_get(q, selector_keys[k])) {
                        v = fp_ctl_request_get(q, selector_keys[k]);
                        r->kind = (enum fp_rule_kind)k;
                        n++;
                }
        if (n != 1) {
                e = fp_errf(err, err_len, -EINVAL,
                            n ? "give one of --name, --exe, --unit and --cgroup, not several"
                              : "give a PID, or one of --name, --exe, --unit and --cgroup");
                goto fail;
        }
        if (fp_ctl_request_get(q, "pid")) {
                e = fp_errf(err, err_len, -EINVAL, "a PID and --%s exclude each other",
                            selector_keys[r->kind]);
                goto fail;
        }
        if (!*v || strlen(v) > FP_RULE_MATCH_MAX) {
                e = fp_errf(err, err_len, -EINVAL, "--%s must be 1 to %d characters",
                            selector_keys[r->kind], FP_RULE_MATCH_MAX);
                goto fail;
        }
        switch (r->kind) {
        case FP_RULE_NAME: {
                const char *risk = regex_risk(v);
                if (risk) {
                        e = fp_errf(err, err_len, -EINVAL, "--name regex '%.64s' refused: %s", v,
                                    risk);
                        goto fail;
                }
                snprintf(r->match, sizeof(r->match), "%s", v);
                int rc = regcomp(&r->re, v, REG_EXTENDED | REG_NOSUB);
                if (rc != 0) {
                        char why[128];
                        regerror(rc, &r->re, why, sizeof(why));
                        e = fp_errf(err, err_len, -EINVAL, "invalid --name regex '%.64s': %s", v,
                                    why);
                        goto fail;
                }
                r->have_re = true;
                break;
        }
        case FP_RULE_EXE:
                if (v[0] != '/') {
                        e = fp_errf(err, err_len, -EINVAL,
                                    "invalid --exe '%.64s': an absolute path such as "
                                    "/usr/sbin/nginx",
                                    v);
                        goto fail;
                }
                snprintf(r->match, sizeof(r->match), "%s", v);
                /* The path with its links resolved, as /proc/PID/exe shows it. */
                if (!realpath(v, r->exe_real))
                        snprintf(r->exe_real, sizeof(r->exe_real), "%s", v);
                break;
        case FP_RULE_UNIT: {
                char root[PATH_MAX];
                if ((e = parse_unit(v, r->match, sizeof(r->match), err, err_len)) < 0 ||
                    (e = need_cgroup2(root, sizeof(root), err, err_len)) < 0)
                        goto fail;
                break;
        }
        case FP_RULE_CGROUP:
                if ((e = parse_cgroup(v, r->match, sizeof(r->match), err, err_len)) < 0)
                        goto fail;
                break;
        }
        if (service) {
                if (fp_upload_check_service(service) < 0) {
                        e = fp_errf(err, err_len, -EINVAL,
                                    "invalid --service '%.64s': 1 to %d letters, digits, '.', "
                                    "'-', '_', '@' or ':'",
                                    service, FP_UPLOAD_MAX_SERVICE);
                        goto fail;
                }
                snprintf(r->service, sizeof(r->service), "%s", service);
        } else if (r->kind == FP_RULE_UNIT) {
                char unit[sizeof(r->match)];
                snprintf(unit, sizeof(unit), "%s", r->match);
                size_t un = strlen(unit);
                if (un > 8 && strcmp(unit + un - 8, ".service") == 0)
                        unit[un - 8] = 0;
                service_from(unit, r->service, sizeof(r->service));
        } else if (r->kind == FP_RULE_EXE || r->kind == FP_RULE_CGROUP) {
                service_from(strcmp(r->match, "/") == 0 ? "root" : base_name(r->match), r->service,
                             sizeof(r->service));
        }
        r->max_processes = FP_RULE_MAX_PROCESSES_DEFAULT;
        if (maxp) {
                uint64_t m;
                if (fp_parse_uint(maxp, 1, FP_RULE_MAX_PROCESSES_LIMIT, &m) < 0) {
                        e = fp_errf(err, err_len, -EINVAL,
                                    "invalid --max-processes '%.32s': 1 to %d", maxp,
                                    FP_RULE_MAX_PROCESSES_LIMIT);
                        goto fail;
                }
                r->max_processes = (unsigned)m;
        }
        if ((e = fp_rule_sampling_from_request(q, &r->cfg, &r->follow, err, err_len)) < 0)
                goto fail;
        r->spec = spec_of(q);
        if (!r->spec) {
                e = fp_errf(err, err_len, -ENOMEM, "out of memory");
                goto fail;
        }
        *ret = r;
        return 0;
fail:
        fp_rule_free(r);
        return e;
}

int fp_rule_from_spec(const char *spec, uid_t owner, struct fp_rule **ret, char *err,
                      size_t err_len)
{
        struct fp_ctl_request q;
        char *payload = NULL;
        int e;

        if (asprintf(&payload, "cmd=start\n%s", spec) < 0)
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        e = fp_ctl_request_parse((const uint8_t *)payload, strlen(payload), &q);
        free(payload);
        if (e < 0)
                return fp_errf(err, err_len, -EINVAL, "malformed rule text");
        e = fp_rule_new(&q, owner, ret, err, err_len);
        fp_ctl_request_done(&q);
        return e;
}

void fp_rule_free(struct fp_rule *r)
{
        if (!r)
                return;
        if (r->have_re)
                regfree(&r->re);
        free(r->spec);
        free(r);
}

/* Appends "key=value\n" to buf; -E2BIG when it would not fit or holds a newline. */
static int put_kv(char *buf, size_t cap, size_t *len, const char *key, const char *value)
{
        if (strchr(value, '\n'))
                return -EINVAL;
        int n = snprintf(buf + *len, cap - *len, "%s=%s\n", key, value);
        if (n < 0 || (size_t)n >= cap - *len)
                return -E2BIG;
        *len += (size_t)n;
        return 0;
}

int fp_rule_request_from_words(const char *line, struct fp_ctl_request *q, char *err,
                               size_t err_len)
{
        _cleanup_free_ char *words = malloc(strlen(line) + 1);
        _cleanup_free_ char *payload = malloc(FP_CTL_MAX_REQUEST);
        const char *argv[FP_CTL_MAX_KEYS * 2];
        size_t argc = 0, len = 0;
        char *w;
        const char *p = line;
        int e;

        if (!words || !payload)
                return fp_errf(err, err_len, -ENOMEM, "out of memory");
        /* Split into words; '...' keeps blanks. */
        w = words;
        for (;;) {
                while (*p == ' ' || *p == '\t')
                        p++;
                if (!*p)
                        break;
                if (argc == sizeof(argv) / sizeof(argv[0]))
                        return fp_errf(err, err_len, -EINVAL, "too many words");
                argv[argc++] = w;
                while (*p && *p != ' ' && *p != '\t') {
                        if (*p == '\'') {
                                const char *close = strchr(p + 1, '\'');
                                if (!close)
                                        return fp_errf(err, err_len, -EINVAL,
                                                       "unbalanced quote in '%.64s'", line);
                                memcpy(w, p + 1, (size_t)(close - p - 1));
                                w += close - p - 1;
                                p = close + 1;
                        } else {
                                *w++ = *p++;
                        }
                }
                *w++ = 0;
        }
        if (argc == 0)
                return fp_errf(err, err_len, -EINVAL,
                               "empty target: give --name, --exe, --unit or --cgroup and options");
        if ((e = put_kv(payload, FP_CTL_MAX_REQUEST, &len, "cmd", "start")) < 0)
                return fp_errf(err, err_len, e, "too long");
        for (size_t i = 0; i < argc; i++) {
                const struct fp_start_option *o = fp_start_option_find(argv[i]);
                if (!o)
                        return fp_errf(err, err_len, -EINVAL,
                                       argv[i][0] == '-' ? "unknown option '%.64s'"
                                                         : "unexpected word '%.64s' (a rule "
                                                           "names no PID)",
                                       argv[i]);
                if (o->has_value && i + 1 == argc)
                        return fp_errf(err, err_len, -EINVAL, "%s needs a value", o->flag);
                e = put_kv(payload, FP_CTL_MAX_REQUEST, &len, o->key,
                           o->has_value ? argv[++i] : "1");
                if (e < 0)
                        return fp_errf(err, err_len, -EINVAL, "%s: value too long or malformed",
                                       o->flag);
        }
        e = fp_ctl_request_parse((const uint8_t *)payload, len, q);
        if (e == -E2BIG)
                return fp_errf(err, err_len, -EINVAL, "too many options");
        if (e < 0)
                return fp_errf(err, err_len, e, "malformed options");
        for (size_t i = 1; i < q->n; i++)
                for (size_t j = 1; j < i; j++)
                        if (strcmp(q->keys[i], q->keys[j]) == 0) {
                                fp_errf(err, err_len, -EINVAL, "option for '%s' given twice",
                                        q->keys[i]);
                                fp_ctl_request_done(q);
                                return -EINVAL;
                        }
        return 0;
}

int fp_rule_check_words(const char *line, char *err, size_t err_len)
{
        struct fp_ctl_request q;
        struct fp_rule *r = NULL;
        int e = fp_rule_request_from_words(line, &q, err, err_len);

        if (e < 0)
                return e;
        e = fp_rule_new(&q, 0, &r, err, err_len);
        fp_ctl_request_done(&q);
        fp_rule_free(r);
        return e;
}

unsigned fp_rule_needs(const struct fp_rule *r)
{
        switch (r->kind) {
        case FP_RULE_EXE:
                return FP_RULE_NEED_EXE;
        case FP_RULE_UNIT:
        case FP_RULE_CGROUP:
                return FP_RULE_NEED_CGROUP;
        case FP_RULE_NAME:
                return r->service[0] ? 0 : FP_RULE_NEED_EXE;
        }
        return 0;
}

/* The cgroup v2 line of /proc/PID/cgroup ("0::/path"). */
static int read_cgroup(pid_t pid, char *buf, size_t len)
{
        char path[64], line[PATH_MAX + 8];
        FILE *f;
        int r = -ENOENT;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "0::", 3) == 0) {
                        line[strcspn(line, "\n")] = 0;
                        snprintf(buf, len, "%.*s", (int)(len - 1), line + 3);
                        r = 0;
                        break;
                }
        fclose(f);
        return r;
}

int fp_rule_read_proc(pid_t pid, unsigned need, struct fp_rule_proc *ret)
{
        struct fp_rule_proc p = {.pid = pid};
        int r;

        p.starttime = fp_proc_stat(pid, NULL);
        if (!p.starttime)
                return -ESRCH;
        if ((r = fp_proc_owner(pid, &p.owner)) < 0 ||
            (r = fp_proc_comm(pid, pid, p.comm, sizeof(p.comm))) < 0)
                return r;
        if (need & FP_RULE_NEED_EXE) {
                (void)fp_proc_exe(pid, p.exe, sizeof(p.exe));
                size_t l = strlen(p.exe);
                if (l > 10 && strcmp(p.exe + l - 10, " (deleted)") == 0)
                        p.exe[l - 10] = 0;
        }
        if (need & FP_RULE_NEED_CGROUP)
                (void)read_cgroup(pid, p.cgroup, sizeof(p.cgroup));
        *ret = p;
        return 0;
}

/* Whether path is dir or below it. */
static bool path_under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        if (strcmp(dir, "/") == 0)
                return path[0] == '/';
        return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == 0);
}

/* Whether one component of the cgroup path is the unit. */
static bool cgroup_has_unit(const char *cgroup, const char *unit)
{
        size_t n = strlen(unit);
        for (const char *p = strchr(cgroup, '/'); p; p = strchr(p + 1, '/'))
                if (strncmp(p + 1, unit, n) == 0 && (p[1 + n] == '/' || p[1 + n] == 0))
                        return true;
        return false;
}

bool fp_rule_matches(const struct fp_rule *r, const struct fp_rule_proc *p)
{
        if (r->owner != 0 && p->owner != r->owner)
                return false;
        switch (r->kind) {
        case FP_RULE_NAME:
                return regexec(&r->re, p->comm, 0, NULL, 0) == 0;
        case FP_RULE_EXE:
                return p->exe[0] &&
                       (strcmp(p->exe, r->match) == 0 || strcmp(p->exe, r->exe_real) == 0);
        case FP_RULE_UNIT:
                return p->cgroup[0] && cgroup_has_unit(p->cgroup, r->match);
        case FP_RULE_CGROUP:
                return p->cgroup[0] && path_under(p->cgroup, r->match);
        }
        return false;
}

void fp_rule_service_of(const struct fp_rule *r, const struct fp_rule_proc *p, char *buf,
                        size_t len)
{
        if (r->service[0])
                snprintf(buf, len, "%s", r->service);
        else
                service_from(p->exe[0] ? base_name(p->exe) : p->comm, buf, len);
}

void fp_rule_describe(const struct fp_rule *r, char *buf, size_t len)
{
        snprintf(buf, len, "--%s '%s'", selector_keys[r->kind], r->match);
}
