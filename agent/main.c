/* SPDX-License-Identifier: MIT */
/*
 * fleetprof-agent: the per-host profiling daemon.
 *
 * One thread runs one libevent loop: perf ring wake-ups, thread rescans
 * and agentctl requests all arrive there (see server.c and target.c).
 * SIGTERM and SIGINT end the loop; every target is detached on the way out.
 */
#include "server.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SOCKET "/run/fleetprof/agent.sock"
#define DEFAULT_STORE  "/var/lib/fleetprof/agent.db"

static void usage(FILE *f)
{
        fprintf(
            f,
            "Usage: fleetprof-agent [--foreground] [--socket PATH] [--store PATH]\n"
            "                       [--bucket SECS] [--store-max-mb N] [--collector URL]\n"
            "                       [--token-file FILE] [--ca-file FILE] [--upload-interval SECS]\n"
            "                       [--no-bpf]\n"
            "\n"
            "The fleetprof profiling agent. Control it with agentctl.\n"
            "\n"
            "  --foreground      stay in the foreground and log to stderr\n"
            "  --socket PATH     control socket (default " DEFAULT_SOCKET ")\n"
            "  --store PATH      the on-disk ring of buckets (default " DEFAULT_STORE ");\n"
            "                    'none' keeps samples in memory only\n"
            "  --bucket SECS     length of a time bucket, 1 to 3600 (default 10)\n"
            "  --store-max-mb N  byte budget of the store, file and log (default 256)\n"
            "  --collector URL   upload merged profiles to this fleetprof-collector\n"
            "                    (http://host:port or https://...)\n"
            "  --token-file FILE bearer token for the collector (first line of FILE)\n"
            "  --ca-file FILE    CA certificates to verify an https collector with\n"
            "  --upload-interval SECS  seconds between uploads, 5 to 86400 (default 60)\n"
            "  --no-bpf          track new and exiting threads with perf fork records and\n"
            "                    /proc rescans instead of the BPF tracker\n"
            "  --version         print the version and exit\n"
            "  --help            this text\n");
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        (void)sig;
        (void)what;
        event_base_loopexit(arg, NULL);
}

/* Raises a soft limit to the hard one: many threads need many fds and locked ring pages. */
static void raise_limit(int resource)
{
        struct rlimit rl;
        if (getrlimit(resource, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(resource, &rl);
        }
}

static int parse_ulong(const char *s, unsigned long lo, unsigned long hi, unsigned long *ret)
{
        char *end;
        if (!*s || *s == '-')
                return -EINVAL;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || *end || v < lo || v > hi)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* Creates the directory holding the socket or the store (one level) when missing. */
static int ensure_parent_dir(const char *path)
{
        char *dir = strdup(path);
        char *slash;
        int r = 0;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        r = -errno;
        }
        free(dir);
        return r;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
            {"foreground", no_argument, NULL, 'f'},
            {"socket", required_argument, NULL, 's'},
            {"store", required_argument, NULL, 'S'},
            {"bucket", required_argument, NULL, 'b'},
            {"store-max-mb", required_argument, NULL, 'm'},
            {"collector", required_argument, NULL, 'c'},
            {"token-file", required_argument, NULL, 't'},
            {"ca-file", required_argument, NULL, 'a'},
            {"upload-interval", required_argument, NULL, 'u'},
            {"no-bpf", no_argument, NULL, 'B'},
            {"version", no_argument, NULL, 'V'},
            {"help", no_argument, NULL, 'h'},
            {0},
        };
        struct fp_server_options opt = {.socket_path = DEFAULT_SOCKET,
                                        .store_path = DEFAULT_STORE,
                                        .store_max_bytes = 256ULL << 20,
                                        .bucket_seconds = 10,
                                        .upload_interval = 60};
        bool foreground = false;
        unsigned long v;
        struct fp_server *server = NULL;
        struct event_base *base;
        struct event *sigterm, *sigint;
        char err[512];
        int c, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'f':
                        foreground = true;
                        break;
                case 's':
                        opt.socket_path = optarg;
                        break;
                case 'S':
                        opt.store_path = strcmp(optarg, "none") == 0 ? NULL : optarg;
                        break;
                case 'b':
                        if (parse_ulong(optarg, 1, 3600, &v) < 0) {
                                fprintf(
                                    stderr,
                                    "fleetprof-agent: invalid --bucket '%s': 1 to 3600 seconds\n",
                                    optarg);
                                return 2;
                        }
                        opt.bucket_seconds = (unsigned)v;
                        break;
                case 'm':
                        if (parse_ulong(optarg, 1, 1024 * 1024, &v) < 0) {
                                fprintf(
                                    stderr,
                                    "fleetprof-agent: invalid --store-max-mb '%s': 1 to 1048576\n",
                                    optarg);
                                return 2;
                        }
                        opt.store_max_bytes = (uint64_t)v << 20;
                        break;
                case 'c':
                        opt.collector_url = optarg;
                        break;
                case 't':
                        opt.token_file = optarg;
                        break;
                case 'a':
                        opt.ca_file = optarg;
                        break;
                case 'u':
                        if (parse_ulong(optarg, 5, 86400, &v) < 0) {
                                fprintf(stderr,
                                        "fleetprof-agent: invalid --upload-interval '%s': 5 to "
                                        "86400 seconds\n",
                                        optarg);
                                return 2;
                        }
                        opt.upload_interval = (unsigned)v;
                        break;
                case 'B':
                        opt.no_bpf = true;
                        break;
                case 'V':
                        printf("fleetprof-agent %s\n", FP_VERSION);
                        return 0;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        fprintf(stderr,
                                "fleetprof-agent: unknown or incomplete option '%s' (see --help)\n",
                                argv[optind - 1]);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "fleetprof-agent: unexpected argument '%s' (see --help)\n",
                        argv[optind]);
                return 2;
        }

        signal(SIGPIPE, SIG_IGN);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
                fprintf(stderr, "fleetprof-agent: Failed to initialise libcurl\n");
                return 1;
        }
        raise_limit(RLIMIT_NOFILE);
        raise_limit(RLIMIT_MEMLOCK);

        r = ensure_parent_dir(opt.socket_path);
        if (r < 0) {
                fprintf(stderr, "fleetprof-agent: Failed to create the directory of '%s': %s\n",
                        opt.socket_path, strerror(-r));
                return 1;
        }
        if (opt.store_path && (r = ensure_parent_dir(opt.store_path)) < 0)
                fprintf(stderr, "fleetprof-agent: Failed to create the directory of '%s': %s\n",
                        opt.store_path, strerror(-r)); /* the store reports it again; not fatal */
        if (!foreground && daemon(0, 0) < 0) {
                fprintf(stderr, "fleetprof-agent: Failed to daemonize: %s\n", strerror(errno));
                return 1;
        }

        base = event_base_new();
        if (!base) {
                fprintf(stderr, "fleetprof-agent: Failed to create the event loop\n");
                return 1;
        }
        r = fp_server_new(base, &opt, &server, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "fleetprof-agent: %s\n", err);
                event_base_free(base);
                return 1;
        }
        sigterm = evsignal_new(base, SIGTERM, on_signal, base);
        sigint = evsignal_new(base, SIGINT, on_signal, base);
        if (!sigterm || !sigint || evsignal_add(sigterm, NULL) < 0 ||
            evsignal_add(sigint, NULL) < 0) {
                fprintf(stderr, "fleetprof-agent: Failed to install signal handlers\n");
                return 1;
        }
        fprintf(stderr, "fleetprof-agent %s: listening on %s (pid %d), store %s\n", FP_VERSION,
                opt.socket_path, (int)getpid(), opt.store_path ? opt.store_path : "none");

        event_base_dispatch(base);

        fprintf(stderr, "fleetprof-agent: shutting down\n");
        event_free(sigterm);
        event_free(sigint);
        fp_server_free(server);
        event_base_free(base);
        curl_global_cleanup();
        return 0;
}
