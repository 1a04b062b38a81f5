/* SPDX-License-Identifier: MIT */
/*
 * fleetprof-agent: the per-host profiling daemon.
 *
 * One thread runs one libevent loop: perf ring wake-ups, thread rescans
 * and agentctl requests all arrive there (see core.c, control.c and target.c).
 * SIGTERM and SIGINT end the loop; every target is detached on the way out.
 */
#include "conf.h"
#include "metrics.h"
#include "util.h"
#include "rule.h"
#include "log.h"
#include "commands.h"
#include "control.h"
#include "core.h"
#include "unwind.h"

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
#define DEFAULT_STORE  "/var/lib/fleetprof-agent/agent.db"
#define DEFAULT_CONFIG "/etc/fleetprof/agent.conf"

/*
 * Every setting of the agent: a key of /etc/fleetprof/agent.conf and the
 * long option of the same name (packaging/agent.conf documents each one).
 */
static const struct fp_conf_key agent_keys[] = {
    {"socket", FP_CONF_STRING, DEFAULT_SOCKET, 0, 0, "PATH", "control socket agentctl talks to"},
    {"store", FP_CONF_STRING, DEFAULT_STORE, 0, 0, "PATH",
     "the on-disk ring of buckets; 'none': in memory only"},
    {"bucket", FP_CONF_UINT, "10", 1, 3600, "SECS", "length of a time bucket, 1 to 3600"},
    {"store-max-mb", FP_CONF_UINT, "256", 1, 1024 * 1024, "N",
     "byte budget of the store, file and log"},
    {"collector", FP_CONF_STRING, NULL, 0, 0, "URL[,URL]",
     "upload merged profiles to this collector (several: fail over in turn); "
     "pyroscope+http(s)://: Pyroscope's push, otlp+http(s)://: OTLP profiles"},
    {"token-file", FP_CONF_STRING, NULL, 0, 0, "FILE",
     "bearer token for the collector (first line of FILE)"},
    {"credentials-file", FP_CONF_STRING, NULL, 0, 0, "FILE",
     "lines 'bearer TOKEN', 'basic USER:PASSWORD', 'tenant ID' (X-Scope-OrgID); not with "
     "--token-file"},
    {"ca-file", FP_CONF_STRING, NULL, 0, 0, "FILE", "CA certificates for an https collector"},
    {"upload-interval", FP_CONF_UINT, "60", 5, 86400, "SECS",
     "seconds between uploads, 5 to 86400"},
    {"max-threads", FP_CONF_UINT, "4096", 1, 65536, "N",
     "threads sampled per target at most (each costs two events and ring memory)"},
    {"first-period", FP_CONF_STRING, "random", 0, 0, "random|full",
     "a new thread's first sample: after a random part of the period, or a whole one as perf"},
    {"keep-exited", FP_CONF_UINT, "60", 1, 86400, "SECS",
     "seconds an exited target started by PID stays in status, its data stored"},
    {"no-bpf", FP_CONF_BOOL, "false", 0, 0, NULL,
     "track threads with perf fork records and /proc rescans, not the BPF tracker"},
    {"no-bridge", FP_CONF_BOOL, "false", 0, 0, NULL,
     "no per-CPU bridge: new threads are sampled from when their own events open"},
    {"no-python", FP_CONF_BOOL, "false", 0, 0, NULL,
     "read no Python, PHP, Ruby or Perl stacks: their processes show the interpreter's frames "
     "only"},
    {"no-javascript", FP_CONF_BOOL, "false", 0, 0, NULL,
     "read no JavaScript frames: the host tier's Node.js processes show V8's code unnamed"},
    {"no-php", FP_CONF_BOOL, "false", 0, 0, NULL,
     "read no PHP stacks in the host tier: its PHP processes show the interpreter's frames only"},
    {"no-ruby", FP_CONF_BOOL, "false", 0, 0, NULL,
     "read no Ruby stacks in the host tier: its Ruby processes show the interpreter's frames "
     "only"},
    {"no-perl", FP_CONF_BOOL, "false", 0, 0, NULL,
     "read no Perl stacks in the host tier: its Perl processes show the interpreter's frames "
     "only"},
    {"java-names", FP_CONF_STRING, "code-cache", 0, 0, "code-cache|perf-map",
     "a JVM's compiled methods: read from its code cache, or only from the perf map it is asked "
     "for"},
    {"metrics-listen", FP_CONF_STRING, NULL, 0, 0, "ADDR:PORT",
     "serve the agent's metrics on GET /metrics here (Prometheus)"},
    {"host", FP_CONF_BOOL, "false", 0, 0, NULL,
     "the host tier: sample every process, one cpu-clock event per CPU"},
    {"host-freq", FP_CONF_UINT, "19", 1, 1000, "HZ", "the host tier's samples per second per CPU"},
    {"host-kernel", FP_CONF_BOOL, "false", 0, 0, NULL, "kernel frames in the host tier's stacks"},
    {"host-off-cpu", FP_CONF_BOOL, "false", 0, 0, NULL,
     "the host tier profiles every process's off-CPU time too (BPF)"},
    {"host-off-cpu-period", FP_CONF_UINT, "1000000000", 1000, 1000000000, "NS",
     "the host tier's off-CPU period T: a wait of d ns is kept with probability d/T"},
    {"target", FP_CONF_LIST, NULL, 0, 0, "RULE",
     "a rule: what agentctl start takes after 'start' for one"},
};
#define N_AGENT_KEYS (sizeof(agent_keys) / sizeof(agent_keys[0]))

/* --first-period: random (unbiased for short threads) or full (perf's way, for comparison). */
static int check_first_period(const char *value, char *err, size_t err_len)
{
        if (strcmp(value, "random") != 0 && strcmp(value, "full") != 0)
                return fp_errf(err, err_len, -EINVAL, "not random or full");
        return 0;
}

/* --java-names: code-cache or perf-map. */
static int check_java_names(const char *value, char *err, size_t err_len)
{
        if (strcmp(value, "code-cache") != 0 && strcmp(value, "perf-map") != 0)
                return fp_errf(err, err_len, -EINVAL, "not code-cache or perf-map");
        return 0;
}

/* --metrics-listen: ADDR:PORT. */
static int check_listen(const char *value, char *err, size_t err_len)
{
        char host[256];
        unsigned port;
        if (fp_parse_listen(value, host, sizeof(host), &port) < 0)
                return fp_errf(err, err_len, -EINVAL, "not ADDR:PORT, e.g. 127.0.0.1:9465");
        return 0;
}

static void usage(FILE *f, const struct fp_conf *conf)
{
        fprintf(f,
                "Usage: fleetprof-agent [--config FILE] [--check-config] [--foreground]\n"
                "                       [--socket PATH] [--store PATH] [--bucket SECS]\n"
                "                       [--store-max-mb N] [--collector URL] [--token-file FILE]\n"
                "                       [--credentials-file FILE] [--ca-file FILE]\n"
                "                       [--upload-interval SECS]\n"
                "\n"
                "The fleetprof profiling agent. Control it with agentctl.\n"
                "\n"
                "  --config FILE            settings file (default " DEFAULT_CONFIG
                " if it exists);\n"
                "                           options given here override it\n"
                "  --check-config           check the settings file and the options, print ok\n"
                "  --foreground             stay in the foreground and log to stderr\n");
        (void)conf;
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

/*
 * Reads the command line and the settings file into opt (strings point
 * into conf, which must outlive opt). Returns -1 to go on, or the exit
 * status: 0 after --help, --version or a good --check-config, 1 for a bad
 * file, 2 for a bad command line.
 */
static int configure(int argc, char **argv, struct fp_conf *conf, struct fp_core_options *opt,
                     const char **ret_socket, bool *ret_foreground)
{
        const struct fp_conf_flag flags[] = {{"foreground", ret_foreground}};
        const struct fp_conf_program prog = {
            .name = "fleetprof-agent",
            .version = FP_VERSION,
            .default_config = DEFAULT_CONFIG,
            .usage = usage,
            .flags = flags,
            .n_flags = 1,
        };
        const char *store;
        int r = fp_conf_configure(conf, &prog, argc, argv);
        if (r >= 0)
                return r;

        store = fp_conf_string(conf, "store");
        *opt = (struct fp_core_options){
            .store_path = store && strcmp(store, "none") != 0 ? store : NULL,
            .store_max_bytes = (uint64_t)fp_conf_uint(conf, "store-max-mb") << 20,
            .bucket_seconds = (unsigned)fp_conf_uint(conf, "bucket"),
            .collector_url = fp_conf_string(conf, "collector"),
            .token_file = fp_conf_string(conf, "token-file"),
            .credentials_file = fp_conf_string(conf, "credentials-file"),
            .ca_file = fp_conf_string(conf, "ca-file"),
            .upload_interval = (unsigned)fp_conf_uint(conf, "upload-interval"),
            .no_bpf = fp_conf_bool(conf, "no-bpf"),
            .no_bridge = fp_conf_bool(conf, "no-bridge"),
            .no_python = fp_conf_bool(conf, "no-python"),
            .max_threads = (unsigned)fp_conf_uint(conf, "max-threads"),
            .first_period_full = strcmp(fp_conf_string(conf, "first-period"), "full") == 0,
            .java_perf_map_only = strcmp(fp_conf_string(conf, "java-names"), "perf-map") == 0,
            .keep_exited_s = (unsigned)fp_conf_uint(conf, "keep-exited"),
            .host = fp_conf_bool(conf, "host"),
            .host_cfg = {.freq = fp_conf_uint(conf, "host-freq"),
                         .kernel_frames = fp_conf_bool(conf, "host-kernel"),
                         .unwind = FP_UNWIND_AUTO,
                         .no_javascript = fp_conf_bool(conf, "no-javascript"),
                         .no_php = fp_conf_bool(conf, "no-php"),
                         .no_ruby = fp_conf_bool(conf, "no-ruby"),
                         .no_perl = fp_conf_bool(conf, "no-perl"),
                         .off_cpu_period = fp_conf_bool(conf, "host-off-cpu")
                                               ? fp_conf_uint(conf, "host-off-cpu-period")
                                               : 0},
        };
        opt->rules = fp_conf_list(conf, "target", &opt->n_rules);
        *ret_socket = fp_conf_string(conf, "socket");
        if (!*ret_socket) {
                fp_log(LOG_ERR, "the socket path must not be empty");
                return 2;
        }
        return -1;
}

int main(int argc, char **argv)
{
        struct fp_core_options opt;
        __attribute__((cleanup(fp_conf_freep))) struct fp_conf *conf = NULL;
        bool foreground = false;
        struct fp_core *core = NULL;
        struct fp_control *control = NULL;
        struct fp_metrics_server *metrics = NULL;
        const char *socket_path = NULL, *metrics_listen = NULL;
        struct event_base *base;
        struct event *sigterm, *sigint;
        char err[512];
        int r;

        fp_log_init("fleetprof-agent");
        r = fp_conf_new(agent_keys, N_AGENT_KEYS, &conf);
        if (r == 0)
                r = fp_conf_set_check(conf, "target", fp_rule_check_words);
        if (r == 0)
                r = fp_conf_set_check(conf, "metrics-listen", check_listen);
        if (r == 0)
                r = fp_conf_set_check(conf, "first-period", check_first_period);
        if (r == 0)
                r = fp_conf_set_check(conf, "java-names", check_java_names);
        if (r < 0) {
                fp_log(LOG_ERR, "Failed to set up the settings: %s", strerror(-r));
                return 1;
        }
        r = configure(argc, argv, conf, &opt, &socket_path, &foreground);
        if (r >= 0)
                return r;

        signal(SIGPIPE, SIG_IGN);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
                fp_log(LOG_ERR, "Failed to initialise libcurl");
                return 1;
        }
        raise_limit(RLIMIT_NOFILE);
        raise_limit(RLIMIT_MEMLOCK);

        r = ensure_parent_dir(socket_path);
        if (r < 0) {
                fp_log(LOG_ERR, "Failed to create the directory of '%s': %s", socket_path,
                       strerror(-r));
                return 1;
        }
        if (opt.store_path && (r = ensure_parent_dir(opt.store_path)) < 0)
                fp_log(LOG_ERR, "Failed to create the directory of '%s': %s", opt.store_path,
                       strerror(-r)); /* the store reports it again; not fatal */
        if (!foreground) {
                if (daemon(0, 0) < 0) {
                        fp_log(LOG_ERR, "Failed to daemonize: %s", strerror(errno));
                        return 1;
                }
                fp_log_to_syslog(); /* stderr is /dev/null from here on */
        }

        /*
         * Precise timers (CLOCK_MONOTONIC and a timerfd, where the default is
         * the coarse clock and milliseconds): the periodic timers aimed at
         * the same second (tick.h) then fire in one wake-up, not a few
         * milliseconds apart.
         */
        struct event_config *ecfg = event_config_new();
        if (ecfg)
                (void)event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER);
        base = ecfg ? event_base_new_with_config(ecfg) : NULL;
        if (ecfg)
                event_config_free(ecfg);
        if (!base) {
                fp_log(LOG_ERR, "Failed to create the event loop");
                return 1;
        }
        /*
         * A second agent must fail before it touches the store; the socket
         * appears only once the store is open and its targets resumed.
         */
        r = fp_control_probe(socket_path, err, sizeof(err));
        if (r >= 0)
                r = fp_core_new(base, &opt, &core, err, sizeof(err));
        if (r >= 0)
                r = fp_control_new(base, socket_path, fp_commands, fp_n_commands, core, &control,
                                   err, sizeof(err));
        metrics_listen = fp_conf_string(conf, "metrics-listen");
        if (r >= 0 && metrics_listen)
                r = fp_metrics_listen(base, core, metrics_listen, &metrics, err, sizeof(err));
        if (r < 0) {
                fp_log(LOG_ERR, "%s", err);
                fp_control_free(control);
                fp_core_free(core);
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
        fp_log(LOG_INFO, "version %s, listening on %s (pid %d), store %s", FP_VERSION, socket_path,
               (int)getpid(), opt.store_path ? opt.store_path : "none");

        event_base_dispatch(base);

        fp_log(LOG_INFO, "shutting down");
        event_free(sigterm);
        event_free(sigint);
        fp_metrics_server_free(metrics);
        fp_core_free(core); /* answers the dumps still waiting for the writer */
        fp_control_free(control);
        event_base_free(base);
        curl_global_cleanup();
        return 0;
}
