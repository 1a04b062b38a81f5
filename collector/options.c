/* SPDX-License-Identifier: MIT */
/*
 * The collector's settings table and the code that applies it; see
 * options.h. Adding a setting is one row here and one field in struct
 * fp_coll_config: the command line and --help follow.
 */
#include "options.h"
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define OFF(field) offsetof(struct fp_coll_config, field)

const struct fp_coll_option fp_coll_options[] = {
    {"listen", "ADDR:PORT", FP_COLL_OPT_STRING, OFF(listen), "127.0.0.1:7070", 0, 0,
     "address and port to serve HTTP (or HTTPS) on"},
    {"store", "PATH", FP_COLL_OPT_STRING, OFF(store), "/var/lib/fleetprof/collector.db", 0, 0,
     "the SQLite store of every host's profiles"},
    {"token-file", "FILE", FP_COLL_OPT_STRING, OFF(token_file), NULL, 0, 0,
     "agents must send the bearer token on FILE's first line; without it\n"
     "anyone who can connect may upload"},
    {"tls-cert", "FILE", FP_COLL_OPT_STRING, OFF(tls_cert), NULL, 0, 0,
     "serve HTTPS with this PEM certificate (chain) ..."},
    {"tls-key", "FILE", FP_COLL_OPT_STRING, OFF(tls_key), NULL, 0, 0,
     "... and this PEM private key"},
    {"max-body-mb", "N", FP_COLL_OPT_UINT, OFF(max_body_mb), "16", 1, 1024,
     "largest upload body accepted (413 beyond, before it is read)"},
    {"max-profile-mb", "N", FP_COLL_OPT_UINT, OFF(max_profile_mb), "64", 1, 4096,
     "largest decompressed profile accepted (413 beyond: gzip bombs)"},
    {"store-max-mb", "N", FP_COLL_OPT_UINT, OFF(store_max_mb), "1024", 1, 1048576,
     "byte budget of the store; the oldest uploads go first"},
    {"retention", "DURATION", FP_COLL_OPT_DURATION, OFF(retention_s), "0", 0, 100ULL * 366 * 86400,
     "delete uploads older than this (e.g. 7d, 12h; 0: keep until the\nbudget evicts them)"},
};
const size_t fp_coll_n_options = sizeof(fp_coll_options) / sizeof(fp_coll_options[0]);

int fp_coll_parse_duration(const char *s, uint64_t *ret)
{
        char *end;
        unsigned long long v, mul = 1;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno)
                return -EINVAL;
        if (*end && end[1])
                return -EINVAL;
        switch (*end) {
        case 0:
        case 's':
                break;
        case 'm':
                mul = 60;
                break;
        case 'h':
                mul = 3600;
                break;
        case 'd':
                mul = 86400;
                break;
        default:
                return -EINVAL;
        }
        if (v > UINT64_MAX / mul)
                return -EINVAL;
        *ret = v * mul;
        return 0;
}

int fp_coll_config_set(struct fp_coll_config *c, const char *name, const char *value, char *err,
                       size_t errlen)
{
        const struct fp_coll_option *o = NULL;
        uint64_t v;
        char *end;

        for (size_t i = 0; i < fp_coll_n_options; i++)
                if (strcmp(fp_coll_options[i].name, name) == 0)
                        o = &fp_coll_options[i];
        if (!o)
                return fp_coll_errf(err, errlen, -ENOENT, "unknown setting '%s'", name);
        switch (o->kind) {
        case FP_COLL_OPT_STRING: {
                char **dst = (char **)((char *)c + o->offset);
                char *copy = NULL;

                if (value && *value && strcmp(value, "none") != 0 && !(copy = strdup(value)))
                        return fp_coll_errf(err, errlen, -ENOMEM, "out of memory");
                free(*dst);
                *dst = copy;
                return 0;
        }
        case FP_COLL_OPT_UINT:
                errno = 0;
                v = value && *value >= '0' && *value <= '9' ? strtoull(value, &end, 10) : 0;
                if (!value || *value < '0' || *value > '9' || errno || *end || v < o->min ||
                    v > o->max)
                        return fp_coll_errf(err, errlen, -EINVAL,
                                            "invalid --%s '%s': an integer from %" PRIu64
                                            " to %" PRIu64,
                                            o->name, value ? value : "", o->min, o->max);
                break;
        case FP_COLL_OPT_DURATION:
                if (!value || fp_coll_parse_duration(value, &v) < 0 || v < o->min || v > o->max)
                        return fp_coll_errf(
                            err, errlen, -EINVAL,
                            "invalid --%s '%s': a duration such as 30s, 90m, 12h or 7d "
                            "(0: off)",
                            o->name, value ? value : "");
                break;
        default:
                return -EINVAL;
        }
        *(uint64_t *)((char *)c + o->offset) = v;
        return 0;
}

int fp_coll_config_init(struct fp_coll_config *c)
{
        *c = (struct fp_coll_config){0};
        for (size_t i = 0; i < fp_coll_n_options; i++) {
                const struct fp_coll_option *o = &fp_coll_options[i];
                int r;

                if (!o->def)
                        continue;
                r = fp_coll_config_set(c, o->name, o->def, NULL, 0);
                if (r < 0) {
                        fp_coll_config_free(c);
                        return r;
                }
        }
        return 0;
}

void fp_coll_config_free(struct fp_coll_config *c)
{
        free(c->listen);
        free(c->store);
        free(c->token_file);
        free(c->tls_cert);
        free(c->tls_key);
        *c = (struct fp_coll_config){0};
}

int fp_coll_config_check(const struct fp_coll_config *c, char *err, size_t errlen)
{
        if (!c->listen)
                return fp_coll_errf(err, errlen, -EINVAL, "--listen ADDR:PORT is required");
        if (!c->store)
                return fp_coll_errf(err, errlen, -EINVAL, "--store PATH is required");
        if (!!c->tls_cert != !!c->tls_key)
                return fp_coll_errf(
                    err, errlen, -EINVAL,
                    "HTTPS needs both --tls-cert and --tls-key (only --%s was given)",
                    c->tls_cert ? "tls-cert" : "tls-key");
        return 0;
}

void fp_coll_config_usage(FILE *f)
{
        fprintf(f, "Usage: fleetprof-collector [OPTIONS]\n"
                   "\n"
                   "The fleetprof collector: stores the profiles agents upload and serves\n"
                   "them over HTTP (JSON, pprof, a web page).\n"
                   "\n");
        fprintf(f, "  %-26s%s\n  %-26s%s\n  %-26s%s\n", "--config FILE",
                "settings file (default /etc/fleetprof/collector.conf if it", "",
                "exists); the options below override it", "--check-config",
                "check the settings file and the options, print ok");
        for (size_t i = 0; i < fp_coll_n_options; i++) {
                const struct fp_coll_option *o = &fp_coll_options[i];
                char head[64];
                const char *h = o->help;

                snprintf(head, sizeof(head), "--%s %s", o->name, o->metavar);
                fprintf(f, "  %-26s", head);
                while (*h) {
                        size_t n = strcspn(h, "\n");
                        fprintf(f, "%.*s\n", (int)n, h);
                        h += n;
                        if (*h == '\n') {
                                h++;
                                fprintf(f, "  %-26s", "");
                        }
                }
                if (o->def)
                        fprintf(f, "  %-26s(default %s)\n", "", o->def);
        }
        fprintf(f, "  %-26s%s\n  %-26s%s\n", "--version", "print the version and exit", "--help",
                "this text");
}
