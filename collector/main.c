/* SPDX-License-Identifier: MIT */
/*
 * fleetprof-collector: the central profile store of a fleet.
 *
 * One thread runs one libevent loop that serves HTTP(S) (server.c) and
 * answers queries; a writer thread stores uploads (writeq.c). Settings
 * come from the option table (options.c): each "NAME = VALUE" line of the configuration file
 * (--config, default /etc/fleetprof/collector.conf when it exists; format in agent/conf.h) and then
 * each --NAME VALUE on the command line is fp_coll_config_set(NAME, VALUE), so the command line
 * wins. SIGTERM and SIGINT end the loop; the store is closed cleanly.
 */
#include "conf.h"
#include "options.h"
#include "server.h"

#include <errno.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        (void)sig;
        (void)what;
        event_base_loopexit(arg, NULL);
}

#define DEFAULT_CONFIG "/etc/fleetprof/collector.conf"

/* fp_conf_parse's setting function: a line of the file is the option of the same name. */
static int file_setting(const char *key, const char *value, void *userdata, char *err,
                        size_t err_len)
{
        int r = fp_coll_config_set(userdata, key, value, err, err_len);
        if (r == -ENOENT)
                snprintf(err, err_len, "unknown key '%s'", key);
        return r;
}

/*
 * Looks through argv, before anything is applied, for --config FILE (or
 * --config=FILE), --check-config, and --help or --version (which read no
 * file). Every other --NAME without '=' takes the next argument, as in
 * parse_args. 0, or 2 when --config has no value.
 */
static int scan_args(int argc, char **argv, const char **ret_config, bool *ret_check,
                     bool *ret_info)
{
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--check-config") == 0) {
                        *ret_check = true;
                } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ||
                           strcmp(a, "--version") == 0) {
                        *ret_info = true;
                } else if (strncmp(a, "--config=", 9) == 0) {
                        *ret_config = a + 9;
                } else if (strcmp(a, "--config") == 0) {
                        if (i + 1 >= argc) {
                                fprintf(stderr,
                                        "fleetprof-collector: option '--config' needs a value\n");
                                return 2;
                        }
                        *ret_config = argv[++i];
                } else if (strncmp(a, "--", 2) == 0 && !strchr(a, '=')) {
                        i++;
                }
        }
        return 0;
}

/*
 * Applies argv to c: --NAME VALUE or --NAME=VALUE (--config and
 * --check-config were taken by scan_args). 0, 1 (done: --help/--version)
 * or 2 (bad).
 */
static int parse_args(int argc, char **argv, struct fp_coll_config *c)
{
        char err[512];

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *value, *eq;
                char name[64];
                size_t n;

                if (strcmp(a, "--check-config") == 0)
                        continue;

                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        fp_coll_config_usage(stdout);
                        return 1;
                }
                if (strcmp(a, "--version") == 0) {
                        printf("fleetprof-collector %s\n", FP_VERSION);
                        return 1;
                }
                if (strncmp(a, "--", 2) != 0) {
                        fprintf(stderr,
                                "fleetprof-collector: unexpected argument '%s' (see --help)\n", a);
                        return 2;
                }
                eq = strchr(a, '=');
                n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
                if (n >= sizeof(name)) {
                        fprintf(stderr, "fleetprof-collector: unknown option '%s' (see --help)\n",
                                a);
                        return 2;
                }
                memcpy(name, a + 2, n);
                name[n] = 0;
                if (eq) {
                        value = eq + 1;
                } else if (i + 1 < argc) {
                        value = argv[++i];
                } else {
                        fprintf(stderr, "fleetprof-collector: option '%s' needs a value\n", a);
                        return 2;
                }
                if (strcmp(name, "config") == 0)
                        continue;
                int r = fp_coll_config_set(c, name, value, err, sizeof(err));
                if (r == -ENOENT) {
                        fprintf(stderr, "fleetprof-collector: unknown option '--%s' (see --help)\n",
                                name);
                        return 2;
                }
                if (r < 0) {
                        fprintf(stderr, "fleetprof-collector: %s\n", err);
                        return 2;
                }
        }
        if (fp_coll_config_check(c, err, sizeof(err)) < 0) {
                fprintf(stderr, "fleetprof-collector: %s\n", err);
                return 2;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct fp_coll_config c;
        struct fp_coll_server *s = NULL;
        struct event_base *base;
        struct event *sigterm, *sigint;
        char err[512];
        int r;

        if (fp_coll_config_init(&c) < 0) {
                fprintf(stderr, "fleetprof-collector: out of memory\n");
                return 1;
        }
        const char *config = NULL;
        bool check = false, info = false;
        if (scan_args(argc, argv, &config, &check, &info) != 0) {
                fp_coll_config_free(&c);
                return 2;
        }
        /* The default file is optional; one named with --config (or checked) must be there. */
        if (!config && !info && (check || access(DEFAULT_CONFIG, F_OK) == 0))
                config = DEFAULT_CONFIG;
        if (config && !info &&
            fp_conf_parse(config, file_setting, &c, NULL, err, sizeof(err)) < 0) {
                fprintf(stderr, "fleetprof-collector: %s\n", err);
                fp_coll_config_free(&c);
                return 1;
        }
        r = parse_args(argc, argv, &c);
        if (r) {
                fp_coll_config_free(&c);
                return r == 1 ? 0 : 2;
        }
        if (check) {
                printf("ok\n");
                fp_coll_config_free(&c);
                return 0;
        }
        signal(SIGPIPE, SIG_IGN);
        base = event_base_new();
        if (!base) {
                fprintf(stderr, "fleetprof-collector: Failed to create the event loop\n");
                fp_coll_config_free(&c);
                return 1;
        }
        r = fp_coll_server_new(base, &c, &s, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "fleetprof-collector: %s\n", err);
                event_base_free(base);
                fp_coll_config_free(&c);
                return 1;
        }
        sigterm = evsignal_new(base, SIGTERM, on_signal, base);
        sigint = evsignal_new(base, SIGINT, on_signal, base);
        if (!sigterm || !sigint || evsignal_add(sigterm, NULL) < 0 ||
            evsignal_add(sigint, NULL) < 0) {
                fprintf(stderr, "fleetprof-collector: Failed to install signal handlers\n");
                return 1;
        }
        if (!c.token_file)
                fprintf(stderr,
                        "fleetprof-collector: WARNING: no --token-file: uploads are NOT "
                        "authenticated; anyone who can reach %s may store profiles\n",
                        c.listen);
        fprintf(stderr,
                "fleetprof-collector %s: serving %s on %s (pid %d), store %s (budget %llu MiB, "
                "retention %s%llu s)\n",
                FP_VERSION, c.tls_cert ? "HTTPS" : "HTTP", c.listen, (int)getpid(), c.store,
                (unsigned long long)c.store_max_mb,
                c.retention_s ? "" : "off: ", (unsigned long long)c.retention_s);

        event_base_dispatch(base);

        fprintf(stderr, "fleetprof-collector: shutting down\n");
        event_free(sigterm);
        event_free(sigint);
        fp_coll_server_free(s);
        event_base_free(base);
        fp_coll_config_free(&c);
        return 0;
}
