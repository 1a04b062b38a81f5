/* SPDX-License-Identifier: MIT */
/*
 * /proc readers; see procfs.h.
 */
#include "procfs.h"

#include <errno.h>
#include <unistd.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>

int fp_proc_read_line(const char *path, char *buf, size_t len)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        if (!fgets(buf, (int)len, f)) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return 0;
}

uint64_t fp_proc_stat(pid_t pid, char *ret_state)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (fp_proc_read_line(path, buf, sizeof(buf)) < 0)
                return 0;
        /* comm may hold spaces and parentheses: fields resume after the last ')'. */
        char *p = strrchr(buf, ')');
        if (!p)
                return 0;
        unsigned long long st = 0;
        char state = 0;
        /* state is field 3; starttime is field 22, the 20th after the ')'. */
        if (sscanf(p + 2,
                   "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                   "%*d %*d %llu",
                   &state, &st) != 2)
                return 0;
        if (ret_state)
                *ret_state = state;
        return st;
}

uint64_t fp_proc_age_ns(pid_t pid)
{
        uint64_t start = fp_proc_stat(pid, NULL);
        long hz = sysconf(_SC_CLK_TCK);
        struct timespec boot;

        if (!start || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
                return 0;
        uint64_t now = (uint64_t)boot.tv_sec * 1000000000ULL + (uint64_t)boot.tv_nsec;
        uint64_t at = start * (1000000000ULL / (uint64_t)hz);
        return now > at ? now - at : 1;
}

int fp_proc_owner(pid_t pid, uid_t *ret)
{
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/proc/%d", (int)pid);
        if (stat(path, &st) < 0)
                return -errno;
        *ret = st.st_uid;
        return 0;
}

int fp_proc_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
        char path[96];
        if (tid == pid)
                snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        else
                snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
        return fp_proc_read_line(path, buf, len);
}

uint64_t fp_proc_thread_cpu_ns(pid_t pid, pid_t tid)
{
        char path[96], buf[128];
        unsigned long long ns;

        snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
        if (fp_proc_read_line(path, buf, sizeof(buf)) < 0 || sscanf(buf, "%llu", &ns) != 1)
                return 0;
        return (uint64_t)ns;
}

/* Field n (1-based, n >= 3) of /proc/PID/task/TID/stat, after the comm's closing parenthesis. */
static int task_stat_field(pid_t pid, pid_t tid, int n, uint64_t *ret)
{
        char path[96], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
        if (fp_proc_read_line(path, buf, sizeof(buf)) < 0)
                return -ESRCH;
        char *p = strrchr(buf, ')'); /* a comm may hold spaces and parentheses */
        if (!p)
                return -EIO;
        p++;
        for (int field = 3; field <= n; field++) {
                while (*p == ' ')
                        p++;
                if (!*p)
                        return -EIO;
                if (field == n) {
                        *ret = strtoull(p, NULL, 10);
                        return 0;
                }
                while (*p && *p != ' ')
                        p++;
        }
        return -EIO;
}

int fp_proc_thread_events(pid_t pid, pid_t tid, enum fp_proc_events kind, uint64_t *ret)
{
        uint64_t a = 0, b = 0;
        char path[96], line[256];
        int r = 0;

        switch (kind) {
        case FP_PROC_PAGE_FAULTS:
                if ((r = task_stat_field(pid, tid, 10, &a)) == 0)
                        r = task_stat_field(pid, tid, 12, &b);
                break;
        case FP_PROC_MINOR_FAULTS:
                r = task_stat_field(pid, tid, 10, &a);
                break;
        case FP_PROC_MAJOR_FAULTS:
                r = task_stat_field(pid, tid, 12, &a);
                break;
        case FP_PROC_CONTEXT_SWITCHES: {
                snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
                FILE *f = fopen(path, "re");
                int found = 0;
                if (!f)
                        return -ESRCH;
                while (fgets(line, sizeof(line), f)) {
                        unsigned long long v;
                        if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1)
                                a = v, found++;
                        else if (sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
                                b = v, found++;
                }
                fclose(f);
                r = found == 2 ? 0 : -EIO;
                break;
        }
        default:
                return -EOPNOTSUPP;
        }
        if (r == 0)
                *ret = a + b;
        return r;
}

uint64_t fp_proc_self_rss(void)
{
        unsigned long size = 0, resident = 0;
        FILE *f = fopen("/proc/self/statm", "re");

        if (!f)
                return 0;
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
                resident = 0;
        fclose(f);
        return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t fp_proc_self_cpu_ns(void)
{
        struct timespec ts;
        if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0)
                return 0;
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup, or on a
 * "hybrid" system beside the v1 controllers (/sys/fs/cgroup/unified).
 * NULL when it is not mounted.
 */
const char *fp_proc_cgroup2_root(char *buf, size_t len)
{
        char line[PATH_MAX + 256], dev[64], dir[PATH_MAX], type[64];
        FILE *f = fopen("/proc/self/mounts", "re");
        const char *found = NULL;

        if (!f)
                return NULL;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "%63s %4095s %63s", dev, dir, type) != 3 ||
                    strcmp(type, "cgroup2") != 0)
                        continue;
                if (!found || strcmp(dir, "/sys/fs/cgroup") == 0) {
                        snprintf(buf, len, "%s", dir);
                        found = buf;
                }
        }
        fclose(f);
        return found;
}

int fp_proc_exe(pid_t pid, char *buf, size_t len)
{
        char path[64];
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
        n = len ? readlink(path, buf, len - 1) : -1;
        int r = n < 0 ? -errno : 0;
        if (len)
                buf[n > 0 ? n : 0] = 0;
        return r;
}

/* The online CPUs ("0-3,6") into a bitmap of max bits; how many are online. */
int fp_proc_online_cpus(bool *online, int max)
{
        char buf[4096];
        int n = 0;

        memset(online, 0, (size_t)max);
        if (fp_proc_read_line("/sys/devices/system/cpu/online", buf, sizeof(buf)) < 0)
                return -ENOENT;
        for (char *s = buf; *s;) {
                char *end;
                long a = strtol(s, &end, 10), b = a;
                if (end == s)
                        break;
                if (*end == '-')
                        b = strtol(end + 1, &end, 10);
                for (long i = a; i <= b && i < max; i++)
                        if (i >= 0 && !online[i]) {
                                online[i] = true;
                                n++;
                        }
                s = *end == ',' ? end + 1 : end;
                if (*s == '\n')
                        break;
        }
        return n;
}
