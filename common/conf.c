/* SPDX-License-Identifier: MIT */
/*
 * fp_conf: the table-driven configuration of fleetprof's programs (see
 * conf.h for the file format and the precedence rules).
 *
 * Invariant: values[i] always holds a valid value of keys[i]'s type
 * within its bounds; a failed set leaves the previous value in place.
 * Strings are owned copies.
 */
#include "conf.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct fp_conf_value {
        char *str;
        char **list; /* FP_CONF_LIST: n_list values */
        size_t n_list, cap_list;
        unsigned long long num;
        enum fp_conf_source source;
};

struct fp_conf {
        const struct fp_conf_key *keys;
        size_t n_keys;
        struct fp_conf_value *values;
        fp_conf_check_fn *checks; /* per key, NULL: none */
};

static ssize_t find_key(const struct fp_conf *c, const char *name)
{
        for (size_t i = 0; i < c->n_keys; i++)
                if (strcmp(c->keys[i].name, name) == 0)
                        return (ssize_t)i;
        return -1;
}

static int parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = {"true", "yes", "on", "1"};
        static const char *const no[] = {"false", "no", "off", "0"};
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

/*
 * Validates text for key k; on success stores the number (or bool) in
 * *ret_num. The error names the setting as it was written: "--key VALUE"
 * on the command line, "key = VALUE" elsewhere.
 */
static int check_value(const struct fp_conf_key *k, fp_conf_check_fn check, const char *text,
                       enum fp_conf_source source, unsigned long long *ret_num, char *err,
                       size_t err_len)
{
        const char *dashes = source == FP_CONF_ARGS ? "--" : "";
        const char *sep = source == FP_CONF_ARGS ? " " : " = ";
        unsigned long long v;
        char *end;
        bool b;

        switch (k->type) {
        case FP_CONF_STRING:
        case FP_CONF_LIST:
                *ret_num = 0;
                if (check && text && *text) {
                        char why[512] = "";
                        int r = check(text, why, sizeof(why));
                        if (r < 0) {
                                fp_errf(err, err_len, 0, "%s%s%s%.200s: %s", dashes, k->name, sep,
                                        text, why);
                                return r;
                        }
                }
                return 0;
        case FP_CONF_BOOL:
                if (parse_bool(text, &b) < 0) {
                        fp_errf(err, err_len, 0, "%s%s%s%s: not a boolean (true or false)", dashes,
                                k->name, sep, text);
                        return -EINVAL;
                }
                *ret_num = b;
                return 0;
        case FP_CONF_UINT:
                if (!*text || *text < '0' || *text > '9') {
                        fp_errf(err, err_len, 0, "%s%s%s%s: not a number (%llu to %llu)", dashes,
                                k->name, sep, text, k->min, k->max);
                        return -EINVAL;
                }
                errno = 0;
                v = strtoull(text, &end, 10);
                if (*end) {
                        fp_errf(err, err_len, 0, "%s%s%s%s: not a number (%llu to %llu)", dashes,
                                k->name, sep, text, k->min, k->max);
                        return -EINVAL;
                }
                if (errno == ERANGE || v < k->min || v > k->max) {
                        fp_errf(err, err_len, 0, "%s%s%s%s: out of range, %llu to %llu", dashes,
                                k->name, sep, text, k->min, k->max);
                        return -ERANGE;
                }
                *ret_num = v;
                return 0;
        case FP_CONF_DURATION: {
                uint64_t secs;
                int r = fp_parse_duration(text, k->min, k->max, &secs);
                if (r == -EINVAL)
                        fp_errf(err, err_len, 0,
                                "%s%s%s%s: not a duration (such as 30s, 90m, 12h or 7d)", dashes,
                                k->name, sep, text);
                else if (r < 0)
                        fp_errf(err, err_len, 0, "%s%s%s%s: out of range, %llus to %llus", dashes,
                                k->name, sep, text, k->min, k->max);
                if (r < 0)
                        return r;
                *ret_num = secs;
                return 0;
        }
        }
        abort();
}

/* Stores an already checked value; text NULL or "" unsets a string. */
static int store_value(struct fp_conf *c, size_t i, const char *text, unsigned long long num,
                       enum fp_conf_source source)
{
        struct fp_conf_value *v = &c->values[i];
        char *copy = NULL;

        if (c->keys[i].type == FP_CONF_LIST) {
                /* Another source replaces the list; the same one adds to it. */
                if (v->source != source) {
                        for (size_t k = 0; k < v->n_list; k++)
                                free(v->list[k]);
                        v->n_list = 0;
                        v->source = source;
                }
                if (!text || !*text)
                        return 0;
                if (fp_grow(&v->list, &v->cap_list, v->n_list + 1, sizeof(*v->list)) < 0 ||
                    !(copy = strdup(text)))
                        return -ENOMEM;
                v->list[v->n_list++] = copy;
                return 0;
        }
        if (c->keys[i].type == FP_CONF_STRING && text && *text) {
                copy = strdup(text);
                if (!copy)
                        return -ENOMEM;
        }
        free(v->str);
        v->str = copy;
        v->num = num;
        v->source = source;
        return 0;
}

int fp_conf_new(const struct fp_conf_key *keys, size_t n_keys, struct fp_conf **ret)
{
        struct fp_conf *c;
        unsigned long long num;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->keys = keys;
        c->n_keys = n_keys;
        c->values = calloc(n_keys ? n_keys : 1, sizeof(*c->values));
        c->checks = calloc(n_keys ? n_keys : 1, sizeof(*c->checks));
        if (!c->values || !c->checks) {
                free(c->values);
                free(c->checks);
                free(c);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_keys; i++) {
                if (keys[i].type != FP_CONF_STRING && keys[i].type != FP_CONF_LIST &&
                    !keys[i].def) {
                        fp_conf_free(c);
                        return -EINVAL; /* numbers and booleans always have a default */
                }
                if (!keys[i].def)
                        continue;
                r = check_value(&keys[i], NULL, keys[i].def, FP_CONF_DEFAULT, &num, NULL, 0);
                if (r >= 0)
                        r = store_value(c, i, keys[i].def, num, FP_CONF_DEFAULT);
                if (r < 0) {
                        fp_conf_free(c);
                        return r;
                }
        }
        *ret = c;
        return 0;
}

void fp_conf_free(struct fp_conf *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_keys; i++) {
                free(c->values[i].str);
                for (size_t k = 0; k < c->values[i].n_list; k++)
                        free(c->values[i].list[k]);
                free(c->values[i].list);
        }
        free(c->values);
        free(c->checks);
        free(c);
}

int fp_conf_set_check(struct fp_conf *c, const char *key, fp_conf_check_fn check)
{
        ssize_t i = find_key(c, key);
        if (i < 0 || (c->keys[i].type != FP_CONF_STRING && c->keys[i].type != FP_CONF_LIST))
                return -ENOENT;
        c->checks[i] = check;
        return 0;
}

static int set_index(struct fp_conf *c, size_t i, const char *value, enum fp_conf_source source,
                     char *err, size_t err_len)
{
        unsigned long long num;
        int r;

        r = check_value(&c->keys[i], c->checks[i], value, source, &num, err, err_len);
        if (r < 0)
                return r;
        if (source == FP_CONF_FILE && c->values[i].source == FP_CONF_ARGS)
                return 0; /* the command line wins; the file's value was still checked */
        r = store_value(c, i, value, num, source);
        if (r < 0)
                fp_errf(err, err_len, 0, "%s: out of memory", c->keys[i].name);
        return r;
}

int fp_conf_set(struct fp_conf *c, const char *key, const char *value, enum fp_conf_source source,
                char *err, size_t err_len)
{
        ssize_t i = find_key(c, key);
        if (i < 0) {
                fp_errf(err, err_len, 0, "unknown key '%s'", key);
                return -ENOENT;
        }
        return set_index(c, (size_t)i, value, source, err, err_len);
}

static char *strip(char *s)
{
        char *e;
        while (*s == ' ' || *s == '\t')
                s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
                *--e = 0;
        return s;
}

/* The keys a file has set so far, for "set twice". */
struct seen {
        char **keys;
        unsigned *lines;
        size_t n, cap;
};

/* Records key at line; -EEXIST (with *ret_first) when it was set before. */
static int seen_add(struct seen *sn, const char *key, unsigned line, unsigned *ret_first)
{
        for (size_t i = 0; i < sn->n; i++)
                if (strcmp(sn->keys[i], key) == 0) {
                        *ret_first = sn->lines[i];
                        return -EEXIST;
                }
        if (sn->n == sn->cap) {
                size_t cap = sn->cap ? 2 * sn->cap : 16;
                char **keys = reallocarray(sn->keys, cap, sizeof(*keys));
                if (!keys)
                        return -ENOMEM;
                sn->keys = keys;
                unsigned *lines = reallocarray(sn->lines, cap, sizeof(*lines));
                if (!lines)
                        return -ENOMEM;
                sn->lines = lines;
                sn->cap = cap;
        }
        sn->keys[sn->n] = strdup(key);
        if (!sn->keys[sn->n])
                return -ENOMEM;
        sn->lines[sn->n++] = line;
        return 0;
}

static void seen_free(struct seen *sn)
{
        for (size_t i = 0; i < sn->n; i++)
                free(sn->keys[i]);
        free(sn->keys);
        free(sn->lines);
}

/* Parses one line and hands a setting to fn; 0 for a blank or comment line. */
/* Which keys may be given on many lines (NULL: none). */
typedef bool (*repeatable_fn)(const char *key, void *userdata);

static int parse_line(char *line, unsigned lineno, struct seen *sn, repeatable_fn repeatable,
                      fp_conf_setting_fn fn, void *userdata, char *err, size_t err_len)
{
        char *s = strip(line), *eq, *key, *value;
        unsigned first;
        size_t n;
        int r;

        if (!*s || *s == '#')
                return 0;
        eq = strchr(s, '=');
        if (!eq) {
                fp_errf(err, err_len, 0, "expected 'key = value', got '%.60s'", s);
                return -EINVAL;
        }
        *eq = 0;
        key = strip(s);
        value = strip(eq + 1);
        if (!*key) {
                fp_errf(err, err_len, 0, "expected 'key = value': the key is missing");
                return -EINVAL;
        }
        n = strlen(value);
        if (n >= 2 && value[0] == '"' && value[n - 1] == '"') {
                value[n - 1] = 0;
                value++;
        } else if (value[0] == '"' || (n && value[n - 1] == '"')) {
                fp_errf(err, err_len, 0, "%.60s: unbalanced quote in the value", key);
                return -EINVAL;
        }
        r = repeatable && repeatable(key, userdata) ? 0 : seen_add(sn, key, lineno, &first);
        if (r == -EEXIST)
                fp_errf(err, err_len, 0, "%.60s is set twice (first on line %u)", key, first);
        else if (r < 0)
                fp_errf(err, err_len, 0, "out of memory");
        if (r < 0)
                return r;
        return fn(key, value, userdata, err, err_len);
}

static int parse_file(const char *path, repeatable_fn repeatable, fp_conf_setting_fn fn,
                      void *userdata, unsigned *ret_line, char *err, size_t err_len)
{
        struct seen sn = {0};
        char msg[256];
        char *line = NULL;
        size_t cap = 0;
        unsigned lineno = 0;
        ssize_t len;
        FILE *f;
        int r = 0;

        f = fopen(path, "re");
        if (!f) {
                r = -errno;
                fp_errf(err, err_len, 0, "%s: %s", path, strerror(-r));
                if (ret_line)
                        *ret_line = 0;
                return r;
        }
        for (;;) {
                errno = 0;
                len = getline(&line, &cap, f);
                if (len < 0) {
                        if (errno) {
                                r = -errno;
                                fp_errf(err, err_len, 0, "%s: %s", path, strerror(-r));
                        }
                        break;
                }
                lineno++;
                if (strlen(line) != (size_t)len) {
                        fp_errf(err, err_len, 0, "%s:%u: a NUL byte in the line", path, lineno);
                        r = -EINVAL;
                        break;
                }
                msg[0] = 0;
                r = parse_line(line, lineno, &sn, repeatable, fn, userdata, msg, sizeof(msg));
                if (r < 0) {
                        fp_errf(err, err_len, 0, "%s:%u: %s", path, lineno, msg);
                        break;
                }
        }
        if (ret_line)
                *ret_line = r < 0 ? lineno : 0;
        seen_free(&sn);
        free(line);
        fclose(f);
        return r;
}

int fp_conf_parse(const char *path, fp_conf_setting_fn fn, void *userdata, unsigned *ret_line,
                  char *err, size_t err_len)
{
        return parse_file(path, NULL, fn, userdata, ret_line, err, err_len);
}

static bool is_list_key(const char *key, void *userdata)
{
        const struct fp_conf *c = userdata;
        ssize_t i = find_key(c, key);
        return i >= 0 && c->keys[i].type == FP_CONF_LIST;
}

/* fp_conf_load's setting function: the key must be in the table. */
static int load_setting(const char *key, const char *value, void *userdata, char *err,
                        size_t err_len)
{
        struct fp_conf *c = userdata;
        ssize_t i = find_key(c, key);

        if (i < 0) {
                fp_errf(err, err_len, 0, "unknown key '%.60s'", key);
                return -ENOENT;
        }
        if (!*value && c->keys[i].type != FP_CONF_STRING && c->keys[i].type != FP_CONF_LIST) {
                fp_errf(err, err_len, 0, "%s: the value is missing", key);
                return -EINVAL;
        }
        return set_index(c, (size_t)i, value, FP_CONF_FILE, err, err_len);
}

int fp_conf_load(struct fp_conf *c, const char *path, unsigned *ret_line, char *err, size_t err_len)
{
        return parse_file(path, is_list_key, load_setting, c, ret_line, err, err_len);
}

void fp_conf_getopt_table(const struct fp_conf *c, const struct option *extra, size_t n_extra,
                          struct option *opts)
{
        size_t n = 0;
        for (size_t i = 0; i < n_extra; i++)
                opts[n++] = extra[i];
        for (size_t i = 0; i < c->n_keys; i++)
                opts[n++] = (struct option){
                    .name = c->keys[i].name,
                    .has_arg =
                        c->keys[i].type == FP_CONF_BOOL ? optional_argument : required_argument,
                    .flag = NULL,
                    .val = FP_CONF_OPT_BASE + (int)i,
                };
        opts[n] = (struct option){0};
}

int fp_conf_set_option(struct fp_conf *c, int val, const char *arg, char *err, size_t err_len)
{
        size_t i;

        if (val < FP_CONF_OPT_BASE || (size_t)(val - FP_CONF_OPT_BASE) >= c->n_keys) {
                fp_errf(err, err_len, 0, "not a configuration option");
                return -ENOENT;
        }
        i = (size_t)(val - FP_CONF_OPT_BASE);
        if (!arg && c->keys[i].type == FP_CONF_BOOL)
                arg = "true";
        if (!arg) {
                fp_errf(err, err_len, 0, "--%s needs a value", c->keys[i].name);
                return -EINVAL;
        }
        return set_index(c, i, arg, FP_CONF_ARGS, err, err_len);
}

static size_t key_of_type(const struct fp_conf *c, const char *key, enum fp_conf_type type)
{
        ssize_t i = find_key(c, key);
        if (i < 0 || c->keys[i].type != type) {
                fprintf(stderr, "fp_conf: no %s key '%s' in the table\n",
                        type == FP_CONF_STRING                             ? "string"
                        : type == FP_CONF_LIST                             ? "list"
                        : type == FP_CONF_UINT || type == FP_CONF_DURATION ? "number"
                                                                           : "boolean",
                        key);
                abort();
        }
        return (size_t)i;
}

const char *fp_conf_string(const struct fp_conf *c, const char *key)
{
        return c->values[key_of_type(c, key, FP_CONF_STRING)].str;
}

unsigned long long fp_conf_uint(const struct fp_conf *c, const char *key)
{
        return c->values[key_of_type(c, key, FP_CONF_UINT)].num;
}

uint64_t fp_conf_duration(const struct fp_conf *c, const char *key)
{
        return c->values[key_of_type(c, key, FP_CONF_DURATION)].num;
}

const char *const *fp_conf_list(const struct fp_conf *c, const char *key, size_t *ret_n)
{
        const struct fp_conf_value *v = &c->values[key_of_type(c, key, FP_CONF_LIST)];
        *ret_n = v->n_list;
        return (const char *const *)v->list;
}

const char *fp_conf_path(const struct fp_conf *c, const char *key)
{
        const char *s = fp_conf_string(c, key);
        return s && strcmp(s, "none") != 0 ? s : NULL;
}

bool fp_conf_bool(const struct fp_conf *c, const char *key)
{
        return c->values[key_of_type(c, key, FP_CONF_BOOL)].num != 0;
}

enum fp_conf_source fp_conf_source_of(const struct fp_conf *c, const char *key)
{
        ssize_t i = find_key(c, key);
        if (i < 0)
                abort();
        return c->values[i].source;
}

void fp_conf_print_help(const struct fp_conf *c, FILE *f)
{
        for (size_t i = 0; i < c->n_keys; i++) {
                const struct fp_conf_key *k = &c->keys[i];
                char left[64];

                if (k->type == FP_CONF_BOOL)
                        snprintf(left, sizeof(left), "--%s[=BOOL]", k->name);
                else
                        snprintf(left, sizeof(left), "--%s %s", k->name, k->arg ? k->arg : "VALUE");
                fprintf(f, "  %-24s %s%s", left, k->help,
                        k->type == FP_CONF_LIST ? " (repeatable)" : "");
                /* The default goes on a line of its own when the line would pass 80 columns. */
                if (k->def && 27 + strlen(k->help) + strlen(k->def) + 11 > 80)
                        fprintf(f, "\n  %-24s (default %s)", "", k->def);
                else if (k->def)
                        fprintf(f, " (default %s)", k->def);
                fputc('\n', f);
        }
}

int fp_conf_configure(struct fp_conf *c, const struct fp_conf_program *p, int argc, char **argv)
{
        static const struct option own[] = {
            {"config", required_argument, NULL, 'C'},
            {"check-config", no_argument, NULL, 'K'},
            {"version", no_argument, NULL, 'V'},
            {"help", no_argument, NULL, 'h'},
        };
        const size_t n_own = sizeof(own) / sizeof(own[0]);
        size_t n_opts = n_own + p->n_flags + c->n_keys + 1;
        _cleanup_free_ struct option *opts = calloc(n_opts, sizeof(*opts));
        _cleanup_free_ struct option *extra = calloc(n_own + p->n_flags + 1, sizeof(*extra));
        const char *config = NULL;
        bool check = false;
        char err[512];
        int opt;

        if (!opts || !extra) {
                fp_log(LOG_ERR, "out of memory");
                return 1;
        }
        for (size_t i = 0; i < n_own; i++)
                extra[i] = own[i];
        for (size_t i = 0; i < p->n_flags; i++)
                extra[n_own + i] =
                    (struct option){p->flags[i].name, no_argument, NULL, 'F' + 256 + (int)i};
        fp_conf_getopt_table(c, extra, n_own + p->n_flags, opts);
        opterr = 0;
        optind = 1;
        while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (opt >= 'F' + 256 && opt < 'F' + 256 + (int)p->n_flags) {
                        *p->flags[opt - 'F' - 256].set = true;
                        continue;
                }
                switch (opt) {
                case 'C':
                        config = optarg;
                        break;
                case 'K':
                        check = true;
                        break;
                case 'V':
                        printf("%s %s\n", p->name, p->version);
                        return 0;
                case 'h':
                        p->usage(stdout, c);
                        fp_conf_print_help(c, stdout);
                        printf("  %-24s print the version and exit\n"
                               "  %-24s this text\n",
                               "--version", "--help");
                        return 0;
                case '?':
                case ':':
                        fp_log(LOG_ERR, "unknown or incomplete option '%s' (see --help)",
                               argv[optind - 1]);
                        return 2;
                default:
                        if (fp_conf_set_option(c, opt, optarg, err, sizeof(err)) < 0) {
                                fp_log(LOG_ERR, "invalid %s", err);
                                return 2;
                        }
                }
        }
        if (optind < argc) {
                fp_log(LOG_ERR, "unexpected argument '%s' (see --help)", argv[optind]);
                return 2;
        }
        /* The default file is optional; one named with --config (or checked) must be there. */
        if (!config && p->default_config && (check || access(p->default_config, F_OK) == 0))
                config = p->default_config;
        if (config && fp_conf_load(c, config, NULL, err, sizeof(err)) < 0) {
                fp_log(LOG_ERR, "%s", err);
                return 1;
        }
        if (p->check && p->check(c, err, sizeof(err)) < 0) {
                fp_log(LOG_ERR, "%s", err);
                return 2;
        }
        if (check) {
                printf("ok\n");
                return 0;
        }
        return -1;
}
