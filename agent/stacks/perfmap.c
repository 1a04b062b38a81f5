/* SPDX-License-Identifier: MIT */
/*
 * perf map reading; see perfmap.h.
 */
#include "perfmap.h"
#include "procfs.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct entry {
        uint64_t start, end;
        uint32_t name; /* offset into names */
};

struct fp_perfmap {
        pid_t pid;
        struct entry *e;
        size_t n, cap;
        char *names;
        size_t names_len, names_cap;
        /* What was read: to notice the runtime appending. */
        off_t size;
        struct timespec mtime;
        uint64_t checked_ns; /* CLOCK_MONOTONIC of the last look at the file */
};

struct fp_perfmap *fp_perfmap_new(pid_t pid)
{
        struct fp_perfmap *m = calloc(1, sizeof(*m));
        if (m)
                m->pid = pid;
        return m;
}

void fp_perfmap_free(struct fp_perfmap *m)
{
        if (!m)
                return;
        free(m->e);
        free(m->names);
        free(m);
}

static int cmp_entry(const void *a, const void *b)
{
        const struct entry *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start;
}

/* "START SIZE NAME": one line (NUL-terminated, no newline) into m. */
static int add_line(struct fp_perfmap *m, char *line)
{
        char *end;
        uint64_t start, size;

        errno = 0;
        start = strtoull(line, &end, 16);
        if (errno || end == line || *end != ' ')
                return 0;
        line = end + 1;
        size = strtoull(line, &end, 16);
        if (errno || end == line || *end != ' ' || size == 0 || start + size < start)
                return 0;
        line = end + 1;
        size_t len = strnlen(line, FP_PERFMAP_MAX_NAME);
        if (m->n == FP_PERFMAP_MAX_ENTRIES)
                return 0;
        if (fp_grow(&m->e, &m->cap, m->n + 1, sizeof(*m->e)) < 0 ||
            fp_grow(&m->names, &m->names_cap, m->names_len + len + 1, 1) < 0)
                return -ENOMEM;
        memcpy(m->names + m->names_len, line, len);
        m->names[m->names_len + len] = 0;
        m->e[m->n++] = (struct entry){start, start + size, (uint32_t)m->names_len};
        m->names_len += len + 1;
        return 0;
}

int fp_perfmap_load(struct fp_perfmap *m, const char *path)
{
        struct stat st;
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        int r = 0;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return -EINVAL;
        }
        FILE *f = fdopen(fd, "re");
        if (!f) {
                r = -errno;
                close(fd);
                return r;
        }
        m->n = 0;
        m->names_len = 0;
        char line[FP_PERFMAP_MAX_NAME + 64];
        size_t total = 0;
        while (fgets(line, sizeof(line), f)) {
                size_t len = strlen(line);
                total += len;
                if (total > FP_PERFMAP_MAX_BYTES)
                        break;
                if (len && line[len - 1] == '\n') {
                        line[len - 1] = 0;
                } else if (!feof(f)) {
                        /* A longer line: its name is cut; skip the rest of it. */
                        int c;
                        while ((c = fgetc(f)) != EOF && c != '\n')
                                if (++total > FP_PERFMAP_MAX_BYTES)
                                        break;
                }
                if ((r = add_line(m, line)) < 0)
                        break;
        }
        fclose(f);
        if (m->n) /* an empty map has no array */
                qsort(m->e, m->n, sizeof(*m->e), cmp_entry);
        m->size = st.st_size;
        m->mtime = st.st_mtim;
        return r;
}

/* The map's path as the agent reaches it: the target's root, the PID it knows itself by. */
static void map_path(pid_t pid, char *buf, size_t len)
{
        char status[64], line[256];
        pid_t ns_pid = pid;
        snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
        FILE *f = fopen(status, "re");
        if (f) {
                while (fgets(line, sizeof(line), f))
                        if (strncmp(line, "NSpid:", 6) == 0) {
                                /* The innermost namespace's pid is the last field. */
                                char *last = strrchr(line, '\t');
                                if (last)
                                        ns_pid = (pid_t)atoi(last + 1);
                                break;
                        }
                fclose(f);
        }
        snprintf(buf, len, "/proc/%d/root/tmp/perf-%d.map", (int)pid, (int)ns_pid);
}

const char *fp_perfmap_lookup(struct fp_perfmap *m, uint64_t addr)
{
        for (int pass = 0; pass < 2; pass++) {
                size_t lo = 0, hi = m->n;
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (m->e[mid].start <= addr)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo && addr < m->e[lo - 1].end)
                        return m->names + m->e[lo - 1].name;
                /* A miss: the runtime may have written more since. */
                uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
                if (pass || (m->checked_ns && now - m->checked_ns < 1000000000ULL))
                        return NULL;
                m->checked_ns = now;
                char path[128];
                struct stat st;
                map_path(m->pid, path, sizeof(path));
                if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
                    (st.st_size == m->size && st.st_mtim.tv_sec == m->mtime.tv_sec &&
                     st.st_mtim.tv_nsec == m->mtime.tv_nsec))
                        return NULL;
                (void)fp_perfmap_load(m, path);
        }
        return NULL;
}
