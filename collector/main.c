/* SPDX-License-Identifier: MIT */
/*
 * fleetprof-collector: the central profile store of a fleet.
 *
 * One thread runs one libevent loop that serves HTTP(S) (server.c) and
 * answers queries; a writer thread stores uploads (writeq.c). Settings come from the option table
 * (options.c): each
 * --NAME VALUE on the command line is fp_coll_config_set(NAME, VALUE).
 * SIGTERM and SIGINT end the loop; the store is closed cleanly.
 */
#include "options.h"
#include "server.h"

#include <errno.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <signal.h>
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

/* Applies argv to c: --NAME VALUE or --NAME=VALUE. 0, 1 (done: --help/--version) or 2 (bad). */
static int parse_args(int argc, char **argv, struct fp_coll_config *c)
{
        char err[512];

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *value, *eq;
                char name[64];
                size_t n;

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
        r = parse_args(argc, argv, &c);
        if (r) {
                fp_coll_config_free(&c);
                return r == 1 ? 0 : 2;
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
