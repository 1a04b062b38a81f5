/* SPDX-License-Identifier: MIT */
/* Asking a HotSpot JVM for its perf map: see jvmattach.h. */
#include "jvmattach.h"
#include "procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* For the JVM to start its listener after the signal (ms): 2 s was short on a loaded host. */
#define SOCKET_WAIT_MS 5000
#define ANSWER_MAX     4096 /* of the JVM's answer read (a result code and a line are enough) */

/* What /proc/PID/status says of the JVM. */
struct jvm_proc {
        uid_t euid;
        gid_t egid;
        pid_t nspid;     /* its pid in its own namespace: the names it gives its files */
        uint64_t sigcgt; /* the signals it catches */
};

static int read_status(pid_t pid, struct jvm_proc *ret)
{
        char path[64], line[512];
        unsigned found = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (!(f = fopen(path, "re")))
                return errno == ENOENT ? -ESRCH : -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long r, e;
                if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
                        ret->euid = (uid_t)e;
                        found |= 1;
                } else if (sscanf(line, "Gid: %lu %lu", &r, &e) == 2) {
                        ret->egid = (gid_t)e;
                        found |= 2;
                } else if (strncmp(line, "NSpid:", 6) == 0) {
                        /* The last field: its pid in the innermost namespace. */
                        char *p = line + 6, *end;
                        long v;
                        while ((v = strtol(p, &end, 10)), end != p) {
                                ret->nspid = (pid_t)v;
                                p = end;
                        }
                        found |= 4;
                } else if (sscanf(line, "SigCgt: %" SCNx64, &ret->sigcgt) == 1) {
                        found |= 8;
                }
        }
        fclose(f);
        if ((found & 11) != 11)
                return -EIO;
        if (!(found & 4))
                ret->nspid = pid; /* a kernel without NSpid: no pid namespaces to speak of */
        return 0;
}

int fp_jvm_check(pid_t pid, const char *libjvm, char *why, size_t len)
{
        struct jvm_proc j = {0};
        int r;

        if (!libjvm)
                return 0;
        if ((r = read_status(pid, &j)) < 0) {
                snprintf(why, len, "java: cannot read /proc/%d/status: %s", (int)pid, strerror(-r));
                return r;
        }
        if (!(j.sigcgt & (1ULL << (SIGQUIT - 1)))) {
                snprintf(why, len,
                         "java: %d maps %s but does not catch SIGQUIT (not a HotSpot JVM, or one "
                         "run with -Xrs): it is not asked for names, its JIT code stays unnamed",
                         (int)pid, libjvm);
                return -EPERM;
        }
        return 1;
}

/* ---- -XX:+PreserveFramePointer ---- */

#define JVM_OPTIONS_MAX (1u << 20) /* of a command line or an environment read */

/* The flag as opt sets it (1, 0), else keeps it (*on). */
static void option(const char *opt, size_t len, int *on)
{
        static const char flag[] = "PreserveFramePointer";

        if (len == 5 + sizeof(flag) - 1 && strncmp(opt, "-XX:", 4) == 0 &&
            (opt[4] == '+' || opt[4] == '-') && strncmp(opt + 5, flag, sizeof(flag) - 1) == 0)
                *on = opt[4] == '+';
}

/* The options of a variable's value, separated by white space. */
static void options_of(const char *v, size_t len, int *on)
{
        for (size_t i = 0; i < len;) {
                while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n'))
                        i++;
                size_t start = i;
                while (i < len && v[i] != ' ' && v[i] != '\t' && v[i] != '\n')
                        i++;
                option(v + start, i - start, on);
        }
}

/* The value of variable name (with its '=') in a NUL-separated environment, else NULL. */
static const char *env_value(const char *env, size_t len, const char *name, size_t *ret_len)
{
        size_t n = strlen(name);

        for (size_t i = 0; i < len;) {
                size_t l = strnlen(env + i, len - i);
                if (l >= n && strncmp(env + i, name, n) == 0) {
                        *ret_len = l - n;
                        return env + i + n;
                }
                i += l + 1;
        }
        return NULL;
}

/* A launcher option whose value is the next argument. */
static bool takes_value(const char *a)
{
        static const char *const opts[] = {"-cp",
                                           "-classpath",
                                           "--class-path",
                                           "-p",
                                           "--module-path",
                                           "--add-modules",
                                           "--limit-modules",
                                           "--add-reads",
                                           "--add-exports",
                                           "--add-opens",
                                           "--patch-module",
                                           "--upgrade-module-path",
                                           "--source",
                                           "--enable-native-access"};
        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
                if (strcmp(a, opts[i]) == 0)
                        return true;
        return false;
}

int fp_jvm_frame_pointers_in(const char *cmdline, size_t cmdline_len, const char *environ,
                             size_t environ_len)
{
        static const char *const before[] = {"JAVA_TOOL_OPTIONS=", "JDK_JAVA_OPTIONS="};
        const char *v;
        size_t vlen;
        int on = 0;

        for (size_t i = 0; i < 2; i++)
                if ((v = env_value(environ, environ_len, before[i], &vlen)))
                        options_of(v, vlen, &on);
        /* The command line's options: past the program, up to the main class, -jar or -m. */
        size_t i = cmdline_len ? strnlen(cmdline, cmdline_len) + 1 : 0;
        while (i < cmdline_len) {
                const char *a = cmdline + i;
                size_t l = strnlen(a, cmdline_len - i);
                i += l + 1;
                if (l == 0 || a[0] != '-' || strcmp(a, "-jar") == 0 || strcmp(a, "-m") == 0 ||
                    strcmp(a, "--module") == 0)
                        break;
                if (takes_value(a) && i < cmdline_len) {
                        i += strnlen(cmdline + i, cmdline_len - i) + 1;
                        continue;
                }
                option(a, l, &on);
        }
        if ((v = env_value(environ, environ_len, "_JAVA_OPTIONS=", &vlen)))
                options_of(v, vlen, &on);
        return on;
}

/* All of /proc/PID/NAME (at most JVM_OPTIONS_MAX bytes) into *ret (malloc'd); -errno. */
static int read_proc(pid_t pid, const char *name, char **ret, size_t *ret_len)
{
        char path[64];
        size_t n = 0, cap = 4096;
        char *buf = malloc(cap);
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
        if (!buf)
                return -ENOMEM;
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                free(buf);
                return errno == ENOENT ? -ESRCH : -errno;
        }
        for (;;) {
                if (n == cap) {
                        char *b = cap < JVM_OPTIONS_MAX ? realloc(buf, cap * 2) : NULL;
                        if (!b)
                                break; /* what was read is what is used */
                        buf = b;
                        cap *= 2;
                }
                ssize_t r = read(fd, buf + n, cap - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        int e = -errno;
                        close(fd);
                        free(buf);
                        return e;
                }
                if (r == 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        *ret = buf;
        *ret_len = n;
        return 0;
}

int fp_jvm_frame_pointers(pid_t pid)
{
        char *cmd = NULL, *env = NULL;
        size_t cmd_len = 0, env_len = 0;
        int r = read_proc(pid, "cmdline", &cmd, &cmd_len);

        if (r >= 0)
                r = read_proc(pid, "environ", &env, &env_len);
        if (r >= 0)
                r = fp_jvm_frame_pointers_in(cmd, cmd_len, env, env_len);
        free(cmd);
        free(env);
        return r;
}

/* ---- the helper (a forked child: system calls only, no allocation) ---- */

/* Its one answer on the pipe: err 0 when the map was written; sys_errno: a call's, or 0. */
struct answer {
        int err, sys_errno;
        char line[200];
};

/* Appends s to the answer's line (an async-signal-safe strlcat). */
static void add(struct answer *a, const char *s)
{
        size_t n = strlen(a->line);

        while (*s && n + 1 < sizeof(a->line))
                a->line[n++] = *s++;
        a->line[n] = 0;
}

static void add_int(struct answer *a, long v)
{
        char buf[24], *p = buf + sizeof(buf) - 1;
        bool neg = v < 0;
        unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;

        *p = 0;
        do
                *--p = (char)('0' + u % 10);
        while ((u /= 10) && p > buf + 1);
        if (neg)
                *--p = '-';
        add(a, p);
}

static __attribute__((noreturn)) void answer(int fd, int err, const char *what, int sys_errno)
{
        struct answer a = {.err = err, .sys_errno = sys_errno};

        add(&a, what);
        (void)!write(fd, &a, sizeof(a));
        _exit(err ? 1 : 0);
}

static void sleep_ms(long ms)
{
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* The JVM's /tmp, from its root, without following a link (openat2 where the kernel has it). */
static int open_tmp(int root)
{
        struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
                                          RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
        int fd = (int)syscall(SYS_openat2, root, "tmp", &how, sizeof(how));

        if (fd < 0 && errno == ENOSYS)
                fd = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == EXDEV) /* /tmp is a mount of its own: no link crossed, still */
                fd = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd;
}

/* Whether name in dir is the JVM's socket: a socket (not a link to one) of its user. */
static bool is_jvm_socket(int dir, const char *name, uid_t euid)
{
        struct stat st;

        return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
               st.st_uid == euid;
}

struct helper_args {
        pid_t pid;
        struct jvm_proc j;
        int root, out;
        char sock_name[48], trigger_name[48];
};

static __attribute__((noreturn)) void helper(const struct helper_args *h)
{
        static const char request[] = "1\0jcmd\0Compiler.perfmap\0\0\0";
        char buf[ANSWER_MAX];
        size_t got = 0;
        int tmp, fd, s;

        alarm(FP_JVM_REQUEST_SECONDS); /* SIGALRM's default: the helper dies, the pipe says so */
        if ((tmp = open_tmp(h->root)) < 0)
                answer(h->out, EACCES, "cannot open its /tmp (not a directory, or a link)", errno);
        /* The socket through that fd: no path of the JVM's is looked up again. */
        struct answer path = {0};
        add(&path, "/proc/self/fd/");
        add_int(&path, tmp);
        add(&path, "/");
        add(&path, h->sock_name);
        if (!is_jvm_socket(tmp, h->sock_name, h->j.euid)) {
                /* The trigger, as the JVM's user: it ignores one that is not its own. */
                fd = openat(tmp, h->trigger_name,
                            O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 && errno != EEXIST)
                        answer(h->out, EACCES, "cannot create its attach trigger in /tmp", errno);
                if (fd >= 0) {
                        if (fchown(fd, h->j.euid, h->j.egid) < 0) {
                                int e = errno;
                                close(fd);
                                (void)unlinkat(tmp, h->trigger_name, 0);
                                answer(h->out, EPERM, "cannot give the attach trigger to its user",
                                       e);
                        }
                        close(fd);
                }
                if (kill(h->pid, SIGQUIT) < 0)
                        answer(h->out, ESRCH, "it is gone", errno);
                for (long waited = 0;
                     waited < SOCKET_WAIT_MS && !is_jvm_socket(tmp, h->sock_name, h->j.euid);
                     waited += 20)
                        sleep_ms(20);
                if (fd >= 0)
                        (void)unlinkat(tmp, h->trigger_name, 0);
                if (!is_jvm_socket(tmp, h->sock_name, h->j.euid))
                        answer(h->out, ETIMEDOUT,
                               "its attach listener did not start (-XX:+DisableAttachMechanism?)",
                               0);
        }
        /* From here on as the JVM's user, its groups dropped. */
        if (setgroups(0, NULL) < 0 || setgid(h->j.egid) < 0 || setuid(h->j.euid) < 0)
                answer(h->out, EPERM, "cannot take its user's identity", errno);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path, path.line, sizeof(sa.sun_path) - 1);
        if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
            connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                answer(h->out, ECONNREFUSED, "cannot connect to its attach socket", errno);
        if (write(s, request, sizeof(request) - 1) != (ssize_t)(sizeof(request) - 1))
                answer(h->out, EPIPE, "cannot send the request", errno);
        for (ssize_t n;
             got < sizeof(buf) - 1 && (n = read(s, buf + got, sizeof(buf) - 1 - got)) > 0;)
                got += (size_t)n;
        buf[got] = 0;
        if (got == 0)
                answer(h->out, EPROTO, "it closed the connection without an answer", 0);
        if (buf[0] == '0' && buf[1] == '\n')
                answer(h->out, 0, "", 0);
        /* An error: its code and the first line of what it said. */
        char *nl = strchr(buf, '\n');
        char *text = nl ? nl + 1 : buf;
        char *end = strchr(text, '\n');
        if (end)
                *end = 0;
        if (nl)
                *nl = 0;
        struct answer a = {.err = EPROTO};
        add(&a, "it answered ");
        add(&a, buf);
        add(&a, " (JDK 17 or later has Compiler.perfmap): ");
        add(&a, text);
        (void)!write(h->out, &a, sizeof(a));
        _exit(1);
}

int fp_jvm_request_perfmap(pid_t pid, struct fp_jvm_request *ret, char *err, size_t len)
{
        struct helper_args h = {.pid = pid};
        char root[64];
        int pipefd[2], r;
        pid_t child;

        if ((r = read_status(pid, &h.j)) < 0) {
                snprintf(err, len, "cannot read /proc/%d/status: %s", (int)pid, strerror(-r));
                return r;
        }
        snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
        if ((h.root = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
                r = -errno;
                snprintf(err, len, "cannot open %s: %s", root, strerror(-r));
                return r;
        }
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                r = -errno;
                close(h.root);
                snprintf(err, len, "cannot make a pipe: %s", strerror(-r));
                return r;
        }
        h.out = pipefd[1];
        snprintf(h.sock_name, sizeof(h.sock_name), ".java_pid%d", (int)h.j.nspid);
        snprintf(h.trigger_name, sizeof(h.trigger_name), ".attach_pid%d", (int)h.j.nspid);
        child = fork();
        if (child < 0) {
                r = -errno;
                close(h.root);
                close(pipefd[0]);
                close(pipefd[1]);
                snprintf(err, len, "cannot fork: %s", strerror(-r));
                return r;
        }
        if (child == 0)
                helper(&h);
        close(h.root);
        close(pipefd[1]);
        *ret = (struct fp_jvm_request){.helper = child, .fd = pipefd[0]};
        return 0;
}

int fp_jvm_request_finish(struct fp_jvm_request *r, char *err, size_t len)
{
        struct answer a = {0};
        ssize_t n = r->fd >= 0 ? read(r->fd, &a, sizeof(a)) : -1;
        int status = 0, e;

        if (r->fd >= 0)
                close(r->fd);
        if (r->helper > 0)
                (void)waitpid(r->helper, &status, 0);
        *r = (struct fp_jvm_request){.helper = 0, .fd = -1};
        if (n != (ssize_t)sizeof(a)) {
                snprintf(err, len, "the request gave up after %d s (the JVM did not answer)",
                         FP_JVM_REQUEST_SECONDS);
                return -ETIME;
        }
        a.line[sizeof(a.line) - 1] = 0;
        if (!a.err)
                return 0;
        e = a.err > 0 ? a.err : EPROTO;
        if (a.sys_errno)
                snprintf(err, len, "%s: %s", a.line, strerror(a.sys_errno));
        else
                snprintf(err, len, "%s", a.line);
        return -e;
}

void fp_jvm_request_cancel(struct fp_jvm_request *r)
{
        if (r->helper > 0) {
                (void)kill(r->helper, SIGKILL);
                (void)waitpid(r->helper, NULL, 0);
        }
        if (r->fd >= 0)
                close(r->fd);
        *r = (struct fp_jvm_request){.helper = 0, .fd = -1};
}
