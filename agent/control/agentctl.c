/* SPDX-License-Identifier: MIT */
/*
 * agentctl: the command-line client of fleetprof-agent.
 *
 * It checks what it can locally (numbers, event names, formats) so that a
 * typo gets its answer without an agent, sends one request over the
 * agent's Unix socket (ctl.h), and prints the response: the body on
 * stdout (or into -o FILE), an error as one line on stderr with exit
 * status 1. Usage errors exit with 2.
 */
#include "unwind.h"
#include "counters.h"
#include "ctl.h"
#include "perf.h"
#include "rule.h"
#include "pprof.h"
#include "store.h"
#include "upload-debuginfo.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SOCKET "/run/fleetprof/agent.sock"

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: agentctl [--socket PATH] COMMAND [ARGS]\n"
                "\n"
                "  start PID [--event EVENT[,EVENT...]] [--freq HZ | --period N] [--kernel]\n"
                "            [--best-effort] [--follow-children] [--unwind fp|dwarf|auto]\n"
                "            [--off-cpu [--off-cpu-period NS]] [--no-python] [--no-php]\n"
                "            [--no-ruby] [--no-perl] [--no-javascript]\n"
                "        sample every thread of PID (default cpu-clock at 99 Hz per thread);\n"
                "        the first event samples, the others are counted per stack;\n"
                "        --best-effort leaves out counters the machine lacks;\n"
                "        --follow-children also profiles the processes it forks from now on\n"
                "        (and theirs), each as a target of its own;\n"
                "        --unwind: how user stacks are unwound: auto (default: CFI tables\n"
                "        where the code has them, frame pointers elsewhere), dwarf (CFI\n"
                "        only) or fp (frame pointers, with the leaf's caller fixed up);\n"
                "        --off-cpu: also where its threads wait off the CPU, by stack and\n"
                "        reason (event off-cpu, label wait: sleep, uninterruptible,\n"
                "        runqueue); a wait of d ns is kept with probability d/NS (default\n"
                "        10 ms) and weighs NS, one longer than NS always and as itself\n"
                "        --no-python: a CPython's samples without its Python functions\n"
                "        (by default read at each sample and put above the interpreter's\n"
                "        frames, with file and line); --no-php, --no-ruby, --no-perl: the\n"
                "        same for PHP's, Ruby's and Perl's functions\n"
                "        --no-javascript: a Node.js (V8) process's samples without its\n"
                "        JavaScript functions (by default found in each sample's stack and\n"
                "        named from the process's memory, with file and line)\n"
                "  start (--name REGEX | --exe PATH | --unit UNIT | --cgroup PATH)\n"
                "        [--service NAME] [--max-processes N] [the options above]\n"
                "        a rule: profile every process that matches, now and whenever one\n"
                "        starts (exec), with those options; --name matches the process name\n"
                "        (a regular expression), --unit a systemd unit, --cgroup a cgroup v2\n"
                "        directory; samples are stored under the service NAME (default: the\n"
                "        unit, the executable's or the cgroup's name), across restarts;\n"
                "        at most N processes at once (default 64)\n"
                "  start --host [--freq HZ] [--kernel] [--unwind fp|dwarf|auto]\n"
                "        [--off-cpu [--off-cpu-period NS]]\n"
                "        the host tier (root): every process on the host, one cpu-clock event\n"
                "        per CPU at HZ per CPU (default 19), labelled by service (systemd\n"
                "        unit, else container, else executable); a process a target or rule\n"
                "        profiles is counted once, by the target; --off-cpu adds every\n"
                "        process's off-CPU time, T NS (default 1 s)\n"
                "  stop PID | stop --rule ID | stop --host\n"
                "        stop sampling PID (its samples stay in the store), end a rule and\n"
                "        its processes, or stop the host tier\n"
                "  status [--json]\n"
                "        rules, targets, threads, samples and lost records\n"
                "  dump [PID | --service NAME | --host [--service NAME]] [--since DURATION]\n"
                "       [--event EVENT | --event off-cpu | --event wall]\n"
                "       [--format pprof|top|folded] [-o FILE] [--store PATH]\n"
                "        the profile (pprof: gzip profile.proto for go tool pprof); --since 15m\n"
                "        limits it to recent buckets (s, m, h, d); --store reads the agent's\n"
                "        store file directly, also when the agent is not running; --service\n"
                "        merges every process of a rule's service, past and present; --host\n"
                "        the host tier's samples (of one service with --service)\n"
                "\n"
                "  flush\n"
                "        close the open bucket and upload to the collector now\n"
                "  metrics\n"
                "        the agent's own metrics in the Prometheus text format (root)\n"
                "  upload-debuginfo --collector URL [--token-file FILE] PATH...\n"
                "        for CI, no agent needed: send every ELF file with symbols under\n"
                "        PATH (debug files of objcopy --only-keep-debug, unstripped\n"
                "        executables) to the collector by\n"
                "        build ID, skipping those it holds, so that it names stripped\n"
                "        builds of them; FILE holds the collector's write token\n"
                "\n"
                "  --socket PATH   the agent's socket (default " DEFAULT_SOCKET ")\n"
                "  --version       print the version\n"
                "  --help          this text\n");
}

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int status, const char *fmt, ...)
{
        va_list ap;
        fputs("agentctl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return status;
}

static bool is_number(const char *s, unsigned long long max)
{
        char *end;
        if (!s || !*s || *s == '-' || *s == '+')
                return false;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        return !errno && !*end && v > 0 && v <= max;
}

struct request {
        char buf[FP_CTL_MAX_REQUEST];
        size_t len;
};

static int req_add(struct request *q, const char *key, const char *value)
{
        if (strchr(value, '\n'))
                return -EINVAL;
        int n = snprintf(q->buf + q->len, sizeof(q->buf) - q->len, "%s=%s\n", key, value);
        if (n < 0 || (size_t)n >= sizeof(q->buf) - q->len)
                return -E2BIG;
        q->len += (size_t)n;
        return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
        uint8_t *p = buf;
        while (len) {
                ssize_t n = read(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EPIPE;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Sends q, prints the answer's body to out_path (or stdout). Returns the exit status. */
static int transact(const char *socket_path, const struct request *q, const char *out_path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        uint8_t hdr[4];
        char *resp;
        int fd, r;

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return fail(2, "socket path too long: %s", socket_path);
        strcpy(sa.sun_path, socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return fail(1, "cannot create a socket: %s", strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;
                close(fd);
                return fail(1, "the agent is not running (cannot connect to %s: %s)", socket_path,
                            strerror(e));
        }
        fp_ctl_put_length(hdr, (uint32_t)q->len);
        /*
         * An agent that refuses the connection (too many of them) answers
         * at once and closes: the write may fail, its answer still waits.
         */
        signal(SIGPIPE, SIG_IGN);
        if ((fp_write_all(fd, hdr, sizeof(hdr)) < 0 || fp_write_all(fd, q->buf, q->len) < 0) &&
            errno != EPIPE && errno != ECONNRESET) {
                close(fd);
                return fail(1, "cannot send the request to the agent: %s", strerror(errno));
        }
        r = read_all(fd, hdr, sizeof(hdr));
        if (r < 0) {
                close(fd);
                return fail(1, "the agent closed the connection without answering");
        }
        uint32_t len = fp_ctl_get_length(hdr);
        if (len > FP_CTL_MAX_RESPONSE) {
                close(fd);
                return fail(1, "the agent's answer is malformed");
        }
        resp = malloc((size_t)len + 1);
        if (!resp) {
                close(fd);
                return fail(1, "out of memory for a %u-byte answer", len);
        }
        r = read_all(fd, resp, len);
        close(fd);
        if (r < 0) {
                free(resp);
                return fail(1, "the agent's answer was cut short");
        }
        resp[len] = 0;
        char *nl = memchr(resp, '\n', len);
        if (!nl) {
                free(resp);
                return fail(1, "the agent's answer is malformed");
        }
        *nl = 0;
        if (strncmp(resp, "error ", 6) == 0) {
                int st = fail(1, "%s", resp + 6);
                free(resp);
                return st;
        }
        if (strcmp(resp, "ok") != 0) {
                free(resp);
                return fail(1, "the agent's answer is malformed");
        }
        const char *body = nl + 1;
        size_t body_len = len - (size_t)(body - resp);
        int out = STDOUT_FILENO;
        if (out_path) {
                out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (out < 0) {
                        int e = errno;
                        free(resp);
                        return fail(1, "cannot write '%s': %s", out_path, strerror(e));
                }
        }
        r = fp_write_all(out, body, body_len);
        if (out_path && close(out) < 0 && r == 0)
                r = -errno;
        free(resp);
        if (r < 0)
                return fail(1, "cannot write %s: %s", out_path ? out_path : "to stdout",
                            strerror(-r));
        if (out_path)
                fprintf(stderr, "wrote %zu bytes to %s\n", body_len, out_path);
        return 0;
}

/* "90", "90s", "15m", "2h", "1d" -> seconds; -EINVAL otherwise. */
static int parse_duration(const char *s, uint64_t *ret)
{
        char *end;
        if (!*s || *s == '-' || *s == '+')
                return -EINVAL;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        uint64_t mult = 1;
        if (errno || end == s)
                return -EINVAL;
        if (*end == 'm')
                mult = 60;
        else if (*end == 'h')
                mult = 3600;
        else if (*end == 'd')
                mult = 86400;
        else if (*end != 's' && *end)
                return -EINVAL;
        if (*end && end[1])
                return -EINVAL;
        if (v == 0 || v > UINT32_MAX / mult)
                return -EINVAL;
        *ret = v * mult;
        return 0;
}

/*
 * dump --store PATH: reads the store file directly, without the agent.
 * Returns the exit status.
 */
static int dump_from_store(const char *path, pid_t pid, const char *service, bool host,
                           const char *event, uint64_t since_s, const char *format,
                           const char *out_path)
{
        struct fp_store *st = NULL;
        struct fp_pprof *p = NULL;
        struct fp_store_filter f = {.pid = pid,
                                    .service = service,
                                    .event = event,
                                    .tier = host ? FP_STORE_TIER_HOST : FP_STORE_TIER_ANY};
        char err[256] = "";
        FILE *out = stdout;
        int r, status = 1;

        if (since_s) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                f.since_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec -
                             (int64_t)since_s * 1000000000LL;
        }
        r = fp_store_open_readonly(path, &st, err, sizeof(err));
        if (r < 0)
                return fail(1, "cannot read the store '%s': %s", path, err);
        p = fp_pprof_new();
        if (!p) {
                fp_store_close(st);
                return fail(1, "out of memory");
        }
        r = fp_counters_query(st, &f, p);
        if (r < 0) {
                fail(1, "cannot read the store '%s': %s", path, fp_store_errmsg(st));
                goto out;
        }
        if (r == 0) {
                fail(1, "no samples in '%s'%s%s", path, host ? " of the host tier" : "",
                     pid       ? " for that process"
                     : service ? " for that service"
                               : "");
                goto out;
        }
        fp_pprof_add_comment(p, "read from the store file by agentctl");
        if (out_path && !(out = fopen(out_path, "we"))) {
                fail(1, "cannot write '%s': %s", out_path, strerror(errno));
                goto out;
        }
        if (strcmp(format, "pprof") == 0) {
                uint8_t *buf;
                size_t len;
                r = fp_pprof_encode(p, 1, &buf, &len);
                if (r == 0) {
                        if (fwrite(buf, 1, len, out) != len)
                                r = -EIO;
                        free(buf);
                }
        } else if (strcmp(format, "top") == 0) {
                r = fp_pprof_write_top(p, 1, 0, out);
                if (r >= 0)
                        r = fp_counters_write_top(p, 1, 20, out);
        } else {
                r = fp_pprof_write_folded(p, 0, out);
        }
        if (out != stdout && fclose(out) != 0 && r == 0)
                r = -errno;
        if (r < 0)
                fail(1, "cannot write the profile: %s", strerror(-r));
        else
                status = 0;
out:
        fp_pprof_free(p);
        fp_store_close(st);
        return status;
}

#define EVENT_HINT                                                                                 \
        "(try cpu-clock, task-clock, page-faults, context-switches, cycles, instructions, or "     \
        "rNNNN)"

/* A start's --event list, or (list false) a dump's one event. Returns 0 or the exit status. */
static int check_event_list(const char *list, bool is_list)
{
        struct fp_perf_config cfg = {0};
        struct fp_perf_event ev;
        char bad[FP_PERF_EVENT_NAME_MAX + 1];

        if (!is_list) {
                if (fp_perf_event_parse(list, &ev) < 0)
                        return fail(2, "unknown event '%s' " EVENT_HINT, list);
                return 0;
        }
        switch (fp_perf_event_list_parse(list, &cfg, bad, sizeof(bad))) {
        case 0:
                return 0;
        case -EEXIST:
                return fail(2, "event '%s' appears twice in --event list", bad);
        case -E2BIG:
                return fail(2, "too many events in --event list '%s': at most %d", list,
                            FP_PERF_MAX_EVENTS);
        default:
                if (strchr(list, ','))
                        return fail(2, "unknown event '%s' in --event list " EVENT_HINT, bad);
                return fail(2, "unknown event '%s' " EVENT_HINT, list);
        }
}

int main(int argc, char **argv)
{
        const char *socket_path = DEFAULT_SOCKET;
        const char *out_path = NULL;
        struct request *q;
        int i = 1, st;

        while (i < argc && argv[i][0] == '-') {
                if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
                        socket_path = argv[i + 1];
                        i += 2;
                } else if (strcmp(argv[i], "--version") == 0) {
                        printf("agentctl %s\n", FP_VERSION);
                        return 0;
                } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        usage(stdout);
                        return 0;
                } else {
                        return fail(2, "unknown option '%s' (see --help)", argv[i]);
                }
        }
        if (i >= argc) {
                usage(stderr);
                return 2;
        }
        const char *cmd = argv[i++];
        if (strcmp(cmd, "upload-debuginfo") == 0) /* to the collector, not the agent */
                return fp_ctl_upload_debuginfo(argc - i, argv + i);
        q = calloc(1, sizeof(*q));
        if (!q)
                return fail(1, "out of memory");
#define ADD(k, v)                                                                                  \
        do {                                                                                       \
                if (req_add(q, (k), (v)) < 0) {                                                    \
                        free(q);                                                                   \
                        return fail(2, "argument too long or malformed: %s", (v));                 \
                }                                                                                  \
        } while (0)

        if (strcmp(cmd, "start") == 0 || strcmp(cmd, "stop") == 0 || strcmp(cmd, "status") == 0 ||
            strcmp(cmd, "dump") == 0 || strcmp(cmd, "flush") == 0 || strcmp(cmd, "metrics") == 0) {
                ADD("cmd", cmd);
        } else {
                free(q);
                return fail(2,
                            "unknown command '%s' (start, stop, status, dump, flush, metrics, "
                            "upload-debuginfo)",
                            cmd);
        }
        bool want_pid = strcmp(cmd, "start") == 0 || strcmp(cmd, "stop") == 0;
        bool may_pid = want_pid || strcmp(cmd, "dump") == 0;
        bool have_pid = false, have_freq = false, have_period = false;
        const char *store_path = NULL, *format = "pprof", *event = NULL, *pid_arg = NULL;
        const char *service = NULL;
        const struct fp_start_option *o;
        bool have_rule = false, have_host = false;
        uint64_t since_s = 0;

        for (; i < argc; i++) {
                const char *a = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;
                bool is_start = strcmp(cmd, "start") == 0, is_dump = strcmp(cmd, "dump") == 0;

                if (a[0] != '-' && may_pid && !have_pid) {
                        if (!is_number(a, INT_MAX)) {
                                free(q);
                                return fail(2, "invalid PID '%s'", a);
                        }
                        ADD("pid", a);
                        have_pid = true;
                        pid_arg = a;
                } else if ((is_start || is_dump) && strcmp(a, "--event") == 0 && v) {
                        /* A dump may ask for the off-CPU or wall time, which no perf event names.
                         */
                        if (!(is_dump && (strcmp(v, "off-cpu") == 0 || strcmp(v, "wall") == 0)) &&
                            (st = check_event_list(v, is_start))) {
                                free(q);
                                return st;
                        }
                        ADD("event", v);
                        event = v;
                        i++;
                } else if (is_start && strcmp(a, "--freq") == 0 && v) {
                        if (!is_number(v, FP_PERF_MAX_FREQ)) {
                                free(q);
                                return fail(2, "invalid frequency '%s': 1 to %d Hz", v,
                                            FP_PERF_MAX_FREQ);
                        }
                        ADD("freq", v);
                        have_freq = true;
                        i++;
                } else if (is_start && strcmp(a, "--period") == 0 && v) {
                        if (!is_number(v, ULLONG_MAX / 2)) {
                                free(q);
                                return fail(2, "invalid period '%s': a positive number", v);
                        }
                        ADD("period", v);
                        have_period = true;
                        i++;
                } else if (is_start && strcmp(a, "--unwind") == 0 && v) {
                        unsigned mode;
                        if (fp_unwind_mode_parse(v, &mode) < 0) {
                                free(q);
                                return fail(2, "invalid --unwind '%s': fp, dwarf or auto", v);
                        }
                        ADD("unwind", v);
                        i++;
                } else if (is_start && (o = fp_start_option_find(a)) && (!o->has_value || v)) {
                        /* The rest the agent checks: --name, --exe, --unit, --cgroup, ... */
                        if (o->has_value && !*v) {
                                free(q);
                                return fail(2, "%s needs a value", a);
                        }
                        ADD(o->key, o->has_value ? v : "1");
                        if (o->has_value)
                                i++;
                        if (!strcmp(o->key, "name") || !strcmp(o->key, "exe") ||
                            !strcmp(o->key, "unit") || !strcmp(o->key, "cgroup"))
                                have_rule = true;
                } else if ((is_start || is_dump || strcmp(cmd, "stop") == 0) &&
                           strcmp(a, "--host") == 0) {
                        ADD("host", "1");
                        have_host = true;
                } else if (strcmp(cmd, "stop") == 0 && strcmp(a, "--rule") == 0 && v) {
                        if (!is_number(v, INT64_MAX)) {
                                free(q);
                                return fail(2, "invalid rule id '%s'", v);
                        }
                        ADD("rule", v);
                        have_rule = true;
                        i++;
                } else if (is_dump && strcmp(a, "--service") == 0 && v) {
                        ADD("service", v);
                        service = v;
                        i++;
                } else if (strcmp(cmd, "status") == 0 && strcmp(a, "--json") == 0) {
                        ADD("json", "1");
                } else if (is_dump && strcmp(a, "--format") == 0 && v) {
                        if (strcmp(v, "pprof") && strcmp(v, "top") && strcmp(v, "folded")) {
                                free(q);
                                return fail(2, "unknown format '%s': pprof, top or folded", v);
                        }
                        ADD("format", v);
                        format = v;
                        i++;
                } else if (is_dump && strcmp(a, "--since") == 0 && v) {
                        char secs[32];
                        if (parse_duration(v, &since_s) < 0) {
                                free(q);
                                return fail(2, "invalid --since '%s': like 90s, 15m, 2h or 1d", v);
                        }
                        snprintf(secs, sizeof(secs), "%llu", (unsigned long long)since_s);
                        ADD("since", secs);
                        i++;
                } else if (is_dump && strcmp(a, "--store") == 0 && v) {
                        store_path = v;
                        i++;
                } else if (is_dump && strcmp(a, "-o") == 0 && v) {
                        out_path = v;
                        i++;
                } else {
                        free(q);
                        if (a[0] != '-')
                                return fail(2, "unexpected argument '%s'", a);
                        return fail(2, "unknown or incomplete option '%s' for %s (see --help)", a,
                                    cmd);
                }
        }
        if (have_host && (have_pid || have_rule)) {
                free(q);
                return fail(2, "--host and %s exclude each other", have_pid ? "a PID" : "a rule");
        }
        if (want_pid && !have_pid && !have_rule && !have_host) {
                free(q);
                return fail(2, "%s needs a PID%s", cmd,
                            strcmp(cmd, "start") == 0
                                ? ", or --name, --exe, --unit or --cgroup for a rule, or --host"
                                : ", --rule ID or --host");
        }
        if (have_pid && have_rule) {
                free(q);
                return fail(2, "a PID and %s exclude each other",
                            strcmp(cmd, "start") == 0 ? "a rule's --name, --exe, --unit or --cgroup"
                                                      : "--rule");
        }
        if (have_pid && service) {
                free(q);
                return fail(2, "a PID and --service exclude each other");
        }
        if (have_freq && have_period) {
                free(q);
                return fail(2, "--freq and --period exclude each other");
        }
        if (store_path) {
                free(q);
                return dump_from_store(store_path, pid_arg ? (pid_t)atoi(pid_arg) : 0, service,
                                       have_host, event, since_s, format, out_path);
        }
        st = transact(socket_path, q, out_path);
        free(q);
        return st;
}
