/* SPDX-License-Identifier: MIT */
/*
 * fleetprof-collector: the central profile store of a fleet.
 *
 * One thread runs one libevent loop that serves HTTP(S) (server.c) and
 * answers queries; a writer thread stores uploads (writeq.c). Settings
 * come from the table in settings.c through the common parser
 * (common/conf.h): the configuration file (--config, default
 * /etc/fleetprof/collector.conf when it exists) and the command line,
 * which wins. SIGTERM and SIGINT end the loop; the store is closed cleanly.
 */
#include "conf.h"
#include "log.h"
#include "settings.h"
#include "util.h"
#include "server.h"

#include <errno.h>
#include <event2/event.h>
#include <malloc.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/resource.h>
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

static void usage(FILE *f, const struct fp_conf *conf)
{
        (void)conf;
        fprintf(f,
                "Usage: fleetprof-collector [OPTIONS]\n"
                "\n"
                "The fleetprof collector: stores the profiles agents upload and serves\n"
                "them over HTTP (JSON, pprof, a web page).\n"
                "\n"
                "  --config FILE            settings file (default " DEFAULT_CONFIG ",\n"
                "                           if it exists); the options below override it\n"
                "  --check-config           check the settings file and the options, print ok\n");
}

/* Whether ADDR:PORT listens on loopback only. */
static bool listen_is_loopback(const char *listen)
{
        char addr[256];
        unsigned port;
        if (fp_parse_listen(listen, addr, sizeof(addr), &port) < 0)
                return false;
        return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 ||
               strcmp(addr, "localhost") == 0;
}

/*
 * Each connection is a descriptor, and the gate lets a quarter more than
 * --max-connections in before it closes newcomers: raise the soft limit
 * to the hard one, and when that is still short, serve fewer (said once).
 */
static void fit_connections(struct fp_coll_config *c)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
                (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
        rlim_t need = (rlim_t)c->max_connections + c->max_connections / 4 + 64;
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
                unsigned fit = rl.rlim_cur > 128 ? (unsigned)((rl.rlim_cur - 64) * 4 / 5) : 32;
                fp_log(LOG_WARNING,
                       "--max-connections %u needs %llu descriptors, the limit is %llu: serving "
                       "%u (raise LimitNOFILE)",
                       c->max_connections, (unsigned long long)need,
                       (unsigned long long)rl.rlim_cur, fit);
                c->max_connections = fit;
        }
}

int main(int argc, char **argv)
{
        const struct fp_conf_program prog = {
            .name = "fleetprof-collector",
            .version = FP_VERSION,
            .default_config = DEFAULT_CONFIG,
            .usage = usage,
            .check = fp_coll_settings_check,
        };
        _cleanup_(fp_conf_freep) struct fp_conf *conf = NULL;
        struct fp_coll_config c;
        struct fp_coll_server *s = NULL;
        struct event_base *base;
        struct event *sigterm, *sigint;
        char err[512];
        int r;

        fp_log_init("fleetprof-collector");
        r = fp_conf_new(fp_coll_settings, fp_coll_n_settings, &conf);
        if (r < 0) {
                fp_log(LOG_ERR, "Failed to set up the settings: %s", strerror(-r));
                return 1;
        }
        r = fp_conf_configure(conf, &prog, argc, argv);
        if (r >= 0)
                return r;
        fp_coll_config_from(conf, &c);
        fit_connections(&c);
        signal(SIGPIPE, SIG_IGN);
        /*
         * A fleet's profile is built in arrays of tens of MB, grown as it
         * is read. Left to glibc, each would be mapped afresh, copied at
         * every doubling and unmapped after: on a VM the page faults cost
         * half the read (0.97 s of the day of 100 hosts, 0.48 s with
         * this). Kept in the heap and reused, up to 256 MiB idle.
         */
        mallopt(M_MMAP_THRESHOLD, 128 << 20);
        mallopt(M_TRIM_THRESHOLD, 256 << 20);
        base = event_base_new();
        if (!base) {
                fp_log(LOG_ERR, "Failed to create the event loop");
                return 1;
        }
        r = fp_coll_server_new(base, &c, &s, err, sizeof(err));
        if (r < 0) {
                fp_log(LOG_ERR, "%s", err);
                event_base_free(base);
                return 1;
        }
        sigterm = evsignal_new(base, SIGTERM, on_signal, base);
        sigint = evsignal_new(base, SIGINT, on_signal, base);
        if (!sigterm || !sigint || evsignal_add(sigterm, NULL) < 0 ||
            evsignal_add(sigint, NULL) < 0) {
                fp_log(LOG_ERR, "Failed to install signal handlers");
                return 1;
        }
        if (!c.token_file)
                fp_log(LOG_WARNING,
                       "WARNING: no --token-file: uploads are NOT "
                       "authenticated; anyone who can reach %s may store profiles",
                       c.listen);
        if (!c.read_token_file && !listen_is_loopback(c.listen))
                fp_log(LOG_WARNING,
                       "WARNING: no --read-token-file: reads are open to anyone who can reach %s "
                       "(profiles name hosts, processes and functions)",
                       c.listen);
        fp_log(LOG_INFO,
               "version %s, serving %s on %s (pid %d), store %s (budget %llu MiB, "
               "retention %s%llu s)",
               FP_VERSION, c.tls_cert ? "HTTPS" : "HTTP", c.listen, (int)getpid(), c.store,
               (unsigned long long)c.store_max_mb,
               c.retention_s ? "" : "off: ", (unsigned long long)c.retention_s);

        event_base_dispatch(base);

        fp_log(LOG_INFO, "shutting down");
        fp_coll_server_stop(s); /* answers the reads under way and queued */
        event_free(sigterm);
        event_free(sigint);
        fp_coll_server_free(s);
        event_base_free(base);
        return 0;
}
