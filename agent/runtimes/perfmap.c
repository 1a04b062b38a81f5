/* SPDX-License-Identifier: MIT */
/*
 * perf map reading; see perfmap.h.
 *
 * The entries are kept sorted by start, and among equal starts by the
 * order of their lines (seq), so that a lookup finds the latest line that
 * starts at or before an address. Lines read from where the last read
 * stopped are appended and the array sorted again (the runtime's order is
 * mostly ascending already; a read happens at most every
 * FP_PERFMAP_RECHECK_NS, and only after a miss).
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

#define OVERLAP_STEPS 16 /* entries looked back past a shorter one for a longer that covers */

struct entry {
        uint64_t start, end;
        uint32_t name; /* offset into names */
        uint32_t seq;  /* line order: the later line wins */
};

struct fp_perfmap {
        pid_t pid;
        pid_t ns_pid;     /* the PID the process knows itself by (its map's name) */
        uint64_t start;   /* its start time, to tell it from a later process of the same PID */
        int64_t start_s;  /* the same as a time of day (s): a map older is an earlier process's */
        bool same_mnt_ns; /* it shared the agent's /tmp: its map is found there after its exit */
        uid_t uid, euid;  /* whose file a map it left may be */
        bool ids_known;
        struct entry *e;
        size_t n, cap;
        char *names;
        size_t names_len, names_cap;
        uint32_t seq;
        /* The file as last read: to notice the runtime appending or writing anew. */
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        off_t consumed; /* bytes of whole lines read */
        char tail[64];  /* the last bytes of those: unchanged if the file was only appended to */
        size_t tail_len;
        uint64_t checked_ns; /* CLOCK_MONOTONIC of the last look at the file after a miss */
        uint64_t reads;
};

/* NSpid's innermost PID and the real and effective uid, from /proc/PID/status. */
static void read_ids(struct fp_perfmap *m)
{
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)m->pid);
        FILE *f = fopen(path, "re");
        bool uids = false;

        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                unsigned long r, e;
                if (strncmp(line, "Uid:", 4) == 0 && sscanf(line + 4, "%lu %lu", &r, &e) == 2) {
                        m->uid = (uid_t)r;
                        m->euid = (uid_t)e;
                        uids = true;
                } else if (strncmp(line, "NSpid:", 6) == 0) {
                        /* The innermost namespace's pid is the last field. */
                        char *last = strrchr(line, '\t');
                        if (last)
                                m->ns_pid = (pid_t)atoi(last + 1);
                }
        }
        fclose(f);
        m->ids_known = uids;
}

static bool same_mnt_ns(pid_t pid)
{
        char path[64];
        struct stat a, b;
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
        return stat(path, &a) == 0 && stat("/proc/self/ns/mnt", &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
}

struct fp_perfmap *fp_perfmap_new(pid_t pid)
{
        struct fp_perfmap *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->pid = m->ns_pid = pid;
        m->start = fp_proc_stat(pid, NULL);
        if (m->start) {
                /* /proc's start time counts clock ticks since boot (CLOCK_BOOTTIME). */
                struct timespec real, boot;
                long hz = sysconf(_SC_CLK_TCK);
                clock_gettime(CLOCK_REALTIME, &real);
                clock_gettime(CLOCK_BOOTTIME, &boot);
                m->start_s = (int64_t)real.tv_sec - (int64_t)boot.tv_sec +
                             (int64_t)(m->start / (uint64_t)(hz > 0 ? hz : 100));
        }
        read_ids(m);
        m->same_mnt_ns = m->start && same_mnt_ns(pid);
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

uint64_t fp_perfmap_reads(const struct fp_perfmap *m)
{
        return m->reads;
}

static int cmp_entry(const void *a, const void *b)
{
        const struct entry *x = a, *y = b;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
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
        if (m->n == FP_PERFMAP_MAX_ENTRIES || m->names_len + len + 1 > UINT32_MAX)
                return 0;
        if (fp_grow(&m->e, &m->cap, m->n + 1, sizeof(*m->e)) < 0 ||
            fp_grow(&m->names, &m->names_cap, m->names_len + len + 1, 1) < 0)
                return -ENOMEM;
        memcpy(m->names + m->names_len, line, len);
        m->names[m->names_len + len] = 0;
        m->e[m->n++] = (struct entry){start, start + size, (uint32_t)m->names_len, m->seq++};
        m->names_len += len + 1;
        return 0;
}

/*
 * Reads the whole lines of fd from m->consumed on (the file's identity in
 * st), at most FP_PERFMAP_MAX_BYTES of file in all; a line cut short at
 * the end (being written) is left for the next read.
 */
static int read_lines(struct fp_perfmap *m, int fd, const struct stat *st)
{
        char buf[65536], line[FP_PERFMAP_MAX_NAME + 64];
        size_t len = 0;
        off_t pos = m->consumed;
        int r = 0;

        if (lseek(fd, pos, SEEK_SET) < 0)
                return -errno;
        while (r == 0 && pos < (off_t)FP_PERFMAP_MAX_BYTES) {
                size_t want = sizeof(buf);
                if ((off_t)want > (off_t)FP_PERFMAP_MAX_BYTES - pos)
                        want = (size_t)((off_t)FP_PERFMAP_MAX_BYTES - pos);
                ssize_t got = read(fd, buf, want);
                if (got < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (got == 0)
                        break;
                for (ssize_t i = 0; i < got && r == 0; i++) {
                        pos++;
                        if (buf[i] != '\n') {
                                if (len < sizeof(line) - 1) /* past it, the name is cut */
                                        line[len++] = buf[i];
                                continue;
                        }
                        line[len] = 0;
                        r = add_line(m, line);
                        m->consumed = pos;
                        len = 0;
                }
        }
        m->tail_len = m->consumed < (off_t)sizeof(m->tail) ? (size_t)m->consumed : sizeof(m->tail);
        if (m->tail_len && pread(fd, m->tail, m->tail_len, m->consumed - (off_t)m->tail_len) !=
                               (ssize_t)m->tail_len)
                m->tail_len = 0;
        if (m->n)
                qsort(m->e, m->n, sizeof(*m->e), cmp_entry);
        m->dev = st->st_dev;
        m->ino = st->st_ino;
        m->size = st->st_size;
        m->mtime = st->st_mtim;
        m->reads++;
        return r;
}

static void forget(struct fp_perfmap *m)
{
        m->n = 0;
        m->names_len = 0;
        m->consumed = 0;
        m->tail_len = 0;
        m->seq = 0;
}

/* Whether the file at fd still holds what was read of it (appended to, not written anew). */
static bool only_appended(const struct fp_perfmap *m, int fd, const struct stat *st)
{
        char now[sizeof(m->tail)];

        if (!m->reads || st->st_dev != m->dev || st->st_ino != m->ino || st->st_size < m->consumed)
                return false;
        return m->tail_len == 0 || (pread(fd, now, m->tail_len, m->consumed - (off_t)m->tail_len) ==
                                        (ssize_t)m->tail_len &&
                                    memcmp(now, m->tail, m->tail_len) == 0);
}

static int open_map(const char *path, struct stat *st)
{
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
                close(fd);
                return -EINVAL;
        }
        return fd;
}

int fp_perfmap_load(struct fp_perfmap *m, const char *path)
{
        struct stat st;
        int fd = open_map(path, &st);
        if (fd < 0)
                return fd;
        forget(m);
        int r = read_lines(m, fd, &st);
        close(fd);
        return r;
}

static int open_current_file(struct fp_perfmap *m, struct stat *st);

/*
 * The map, opened, unless it is older than the process: a map an earlier
 * process of the same PID left in /tmp (a stale file names other code,
 * and may be one the process cannot write over) is none of its.
 */
static int open_current(struct fp_perfmap *m, struct stat *st)
{
        int fd = open_current_file(m, st);

        if (fd >= 0 && m->start_s && (int64_t)st->st_mtim.tv_sec < m->start_s - 1) {
                close(fd);
                return -ESTALE;
        }
        return fd;
}

/*
 * The map's file, opened: through the process's root while the process
 * (not a later one of its PID) lives; once it is gone, from the agent's
 * /tmp when it shared it, and only a file of the process's user or root.
 */
static int open_current_file(struct fp_perfmap *m, struct stat *st)
{
        char path[128];
        int fd;

        if (m->start && fp_proc_stat(m->pid, NULL) == m->start) {
                snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-%d.map", (int)m->pid,
                         (int)m->ns_pid);
                fd = open_map(path, st);
                /* Still this process after the open: the file is its. */
                if (fd < 0 || fp_proc_stat(m->pid, NULL) == m->start)
                        return fd;
                close(fd);
        }
        if (!m->same_mnt_ns || !m->ids_known)
                return -ESRCH;
        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)m->pid);
        fd = open_map(path, st);
        if (fd >= 0 && st->st_uid != 0 && st->st_uid != m->uid && st->st_uid != m->euid) {
                close(fd);
                return -EPERM;
        }
        return fd;
}

/* The latest entry covering addr, or NULL. */
static const struct entry *find(const struct fp_perfmap *m, uint64_t addr)
{
        size_t lo = 0, hi = m->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (m->e[mid].start <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* e[lo - 1] is the latest line of the last start at or before addr. */
        const struct entry *best = NULL;
        for (size_t i = lo, steps = 0; i > 0 && steps < OVERLAP_STEPS; i--, steps++) {
                const struct entry *x = &m->e[i - 1];
                if (addr < x->end && (!best || x->seq > best->seq))
                        best = x;
        }
        return best;
}

void fp_perfmap_recheck(struct fp_perfmap *m)
{
        m->checked_ns = 0;
}

const char *fp_perfmap_lookup(struct fp_perfmap *m, uint64_t addr)
{
        const struct entry *x = find(m, addr);
        struct stat st;
        int fd;

        if (x)
                return m->names + x->name;
        /* A miss: the runtime may have written more since. */
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
        if (m->checked_ns && now - m->checked_ns < FP_PERFMAP_RECHECK_NS)
                return NULL;
        m->checked_ns = now;
        if ((fd = open_current(m, &st)) < 0)
                return NULL;
        if (m->reads && st.st_dev == m->dev && st.st_ino == m->ino && st.st_size == m->size &&
            st.st_mtim.tv_sec == m->mtime.tv_sec && st.st_mtim.tv_nsec == m->mtime.tv_nsec) {
                close(fd);
                return NULL;
        }
        /* Appended to: read on; written anew (jcmd), shorter or another file: read it all. */
        if (!only_appended(m, fd, &st))
                forget(m);
        (void)read_lines(m, fd, &st);
        close(fd);
        x = find(m, addr);
        return x ? m->names + x->name : NULL;
}
