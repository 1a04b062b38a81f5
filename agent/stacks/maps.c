/* SPDX-License-Identifier: MIT */
/*
 * The executable mappings of one process; see maps.h for the model
 * (append-only history, a sorted live index, an epoch per displacement).
 */
#include "util.h"
#include "maps.h"
#include "procfs.h"
#include "symbols.h"
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#define KERNEL_START 0xffff800000000000ULL

struct fp_maps {
        pid_t pid;
        struct fp_symcache *cache;
        struct fp_mapping **all; /* owned, append-only */
        size_t n_all, cap_all;
        uint32_t *index; /* open addressing over all: 1-based indices, 0 empty */
        size_t n_index;  /* a power of two, at least twice n_all */
        uint32_t *live;  /* 1-based indices into all, sorted by start */
        size_t n_live, cap_live;
        uint32_t kernel; /* index of the kernel pseudo-mapping, 0 until needed */
        unsigned epoch;
        uint64_t fuse_dev; /* the last anonymous device on_fuse() looked up */
        bool fuse_dev_known, fuse_dev_is;
        bool owner_known;
        uint32_t owner;                   /* the process's user, for whom its files are read */
        void *runtime[FP_SYM_INSPECTORS]; /* what each runtime keeps of the process */
};

struct fp_maps *fp_maps_new(pid_t pid, struct fp_symcache *cache)
{
        struct fp_maps *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->pid = pid;
        m->cache = cache;
        return m;
}

void fp_maps_free(struct fp_maps *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_all; i++) {
                fp_symtab_unref(m->all[i]->symtab);
                fp_symcache_cancel(m->cache, m->all[i]->symload);
                free(m->all[i]->path);
                free(m->all[i]);
        }
        free(m->all);
        free(m->index);
        free(m->live);
        for (size_t i = 0; i < FP_SYM_INSPECTORS; i++) {
                if (m->runtime[i] && fp_sym_inspectors[i] && fp_sym_inspectors[i]->free_state)
                        fp_sym_inspectors[i]->free_state(m->runtime[i]);
                free(m->runtime[i]);
        }
        free(m);
}

static uint64_t mapping_hash(uint64_t start, uint64_t end, uint64_t pgoff, uint64_t ino,
                             const char *path)
{
        const uint64_t v[] = {start, end, pgoff, ino};
        uint64_t h = 0xcbf29ce484222325ull;

        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
                h = (h ^ v[i]) * 0x100000001b3ull;
        for (; *path; path++)
                h = (h ^ (unsigned char)*path) * 0x100000001b3ull;
        return h;
}

/* Puts idx (1-based) into the index, growing it to keep it at most half full. */
static int index_put(struct fp_maps *m, uint32_t idx)
{
        if (m->n_all * 2 > m->n_index) {
                size_t n = m->n_index ? m->n_index * 2 : 64;
                uint32_t *t = calloc(n, sizeof(*t));
                if (!t)
                        return -ENOMEM;
                free(m->index);
                m->index = t;
                m->n_index = n;
                for (size_t i = 0; i < m->n_all; i++)
                        if (i + 1 != idx)
                                (void)index_put(m, (uint32_t)i + 1);
        }
        const struct fp_mapping *x = m->all[idx - 1];
        size_t s = mapping_hash(x->start, x->end, x->pgoff, x->ino, x->path) & (m->n_index - 1);
        while (m->index[s])
                s = (s + 1) & (m->n_index - 1);
        m->index[s] = idx;
        return 0;
}

/*
 * Finds an identical mapping in the history, or appends a new one. Returns
 * its index, -ENOSPC past FP_MAPS_MAX (a process that maps and unmaps code
 * without end: later mappings' frames stay unresolved), or -ENOMEM.
 */
static int64_t intern(struct fp_maps *m, uint64_t start, uint64_t end, uint64_t pgoff, uint64_t dev,
                      uint64_t ino, const char *path)
{
        if (m->n_index) {
                size_t s = mapping_hash(start, end, pgoff, ino, path) & (m->n_index - 1);
                for (; m->index[s]; s = (s + 1) & (m->n_index - 1)) {
                        struct fp_mapping *x = m->all[m->index[s] - 1];
                        if (x->start == start && x->end == end && x->pgoff == pgoff &&
                            x->dev == dev && x->ino == ino && strcmp(x->path, path) == 0)
                                return m->index[s];
                }
        }
        if (m->n_all >= FP_MAPS_MAX)
                return -ENOSPC;
        if (fp_grow((void **)&m->all, &m->cap_all, m->n_all + 1, sizeof(*m->all)) < 0)
                return -ENOMEM;
        struct fp_mapping *x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->path = strdup(path);
        if (!x->path) {
                free(x);
                return -ENOMEM;
        }
        x->start = start;
        x->end = end;
        x->pgoff = pgoff;
        x->dev = dev;
        x->ino = ino;
        if (strcmp(path, "[vdso]") == 0)
                x->kind = FP_MAPPING_VDSO;
        else if (strcmp(path, "[kernel.kallsyms]") == 0)
                x->kind = FP_MAPPING_KERNEL;
        else if (path[0] == '/')
                x->kind = FP_MAPPING_FILE;
        else
                x->kind = FP_MAPPING_ANON;
        m->all[m->n_all++] = x;
        if (index_put(m, (uint32_t)m->n_all) < 0) {
                m->n_all--;
                free(x->path);
                free(x);
                return -ENOMEM;
        }
        return (int64_t)m->n_all;
}

/* Inserts idx into the live index, dropping live mappings it overlaps. */
static int live_insert(struct fp_maps *m, uint32_t idx)
{
        struct fp_mapping *x = m->all[idx - 1];
        size_t lo = 0, hi = m->n_live, end;

        /* Live mappings are sorted and do not overlap: ends are sorted too. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (m->all[m->live[mid] - 1]->end <= x->start)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* [lo, end): the live mappings x overlaps, which it displaces. */
        for (end = lo; end < m->n_live && m->all[m->live[end] - 1]->start < x->end; end++)
                if (m->live[end] == idx)
                        return 0; /* already live */
        if (end > lo) {
                memmove(m->live + lo, m->live + end, (m->n_live - end) * sizeof(*m->live));
                m->n_live -= end - lo;
                m->epoch++;
        }
        if (fp_grow((void **)&m->live, &m->cap_live, m->n_live + 1, sizeof(*m->live)) < 0)
                return -ENOMEM;
        memmove(m->live + lo + 1, m->live + lo, (m->n_live - lo) * sizeof(*m->live));
        m->live[lo] = idx;
        m->n_live++;
        return 0;
}

int fp_maps_add(struct fp_maps *m, uint64_t start, uint64_t len, uint64_t pgoff, uint64_t dev,
                uint64_t ino, const char *path)
{
        if (len == 0 || start + len < start)
                return -EINVAL;
        /* perf names anonymous executable memory (JIT code) "//anon"; maps leaves it blank. */
        if (!path || !*path || strcmp(path, "//anon") == 0)
                path = "[anon]";
        int64_t idx = intern(m, start, start + len, pgoff, dev, ino, path);
        if (idx < 0)
                return (int)idx;
        return live_insert(m, (uint32_t)idx);
}

int fp_maps_copy_live(struct fp_maps *dst, const struct fp_maps *src)
{
        for (size_t i = 0; i < src->n_live; i++) {
                const struct fp_mapping *x = src->all[src->live[i] - 1];
                if (x->kind == FP_MAPPING_KERNEL)
                        continue;
                int r = fp_maps_add(dst, x->start, x->end - x->start, x->pgoff, x->dev, x->ino,
                                    x->path);
                if (r < 0)
                        return r;
        }
        return 0;
}

int fp_maps_load_proc(struct fp_maps *m)
{
        char fn[64], line[4096 + 128];
        FILE *f;
        int r = 0;

        snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)m->pid);
        f = fopen(fn, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                uint64_t start, end, pgoff, ino;
                unsigned maj, min;
                char perms[8];
                int path_at = 0;

                if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n",
                           &start, &end, perms, &pgoff, &maj, &min, &ino, &path_at) < 7)
                        continue;
                if (perms[2] != 'x')
                        continue;
                char *path = line + path_at;
                path[strcspn(path, "\n")] = 0;
                if (strcmp(path, "[vsyscall]") == 0)
                        continue;
                r = fp_maps_add(m, start, end - start, pgoff, makedev(maj, min), ino, path);
                if (r < 0)
                        break;
        }
        fclose(f);
        return r;
}

int fp_maps_exec(struct fp_maps *m)
{
        /*
         * Only mappings the new program overlaps were displaced before: an old
         * library left live (libruby, once Ruby exec'd Perl) was taken for the
         * new program's runtime.
         */
        m->n_live = 0;
        m->epoch++;
        return fp_maps_load_proc(m);
}

unsigned fp_maps_epoch(const struct fp_maps *m)
{
        return m->epoch;
}

uint32_t fp_maps_find(struct fp_maps *m, uint64_t addr)
{
        if (addr >= KERNEL_START) {
                if (!m->kernel) {
                        int64_t idx =
                            intern(m, KERNEL_START, UINT64_MAX, 0, 0, 0, "[kernel.kallsyms]");
                        if (idx < 0)
                                return 0;
                        m->kernel = (uint32_t)idx;
                }
                return m->kernel;
        }
        size_t lo = 0, hi = m->n_live;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                struct fp_mapping *x = m->all[m->live[mid] - 1];
                if (addr < x->start)
                        hi = mid;
                else if (addr >= x->end)
                        lo = mid + 1;
                else
                        return m->live[mid];
        }
        return 0;
}

struct fp_mapping *fp_maps_get(const struct fp_maps *m, uint32_t idx)
{
        if (idx == 0 || idx > m->n_all)
                return NULL;
        return m->all[idx - 1];
}

size_t fp_maps_count(const struct fp_maps *m)
{
        return m->n_all;
}

/*
 * Whether the device dev is a FUSE mount, as the process's mountinfo says.
 * Only devices without a major number (anonymous: FUSE, overlayfs, tmpfs,
 * btrfs, ...) are looked up; the last answer is kept.
 */
static bool on_fuse(struct fp_maps *m, uint64_t dev)
{
        char fn[64], line[4096];
        bool fuse = false;
        FILE *f;

        if (major(dev) != 0 || dev == 0)
                return false;
        if (m->fuse_dev_known && m->fuse_dev == dev)
                return m->fuse_dev_is;
        snprintf(fn, sizeof(fn), "/proc/%d/mountinfo", (int)m->pid);
        f = fopen(fn, "re");
        if (!f)
                return true; /* cannot tell: do not risk it */
        while (fgets(line, sizeof(line), f)) {
                unsigned maj, min;
                int at = 0;
                /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ... */
                if (sscanf(line, "%*u %*u %u:%u %n", &maj, &min, &at) < 2 ||
                    makedev(maj, min) != dev)
                        continue;
                const char *sep = strstr(line + at, " - ");
                fuse = sep && strncmp(sep + 3, "fuse", 4) == 0;
                break;
        }
        fclose(f);
        m->fuse_dev = dev;
        m->fuse_dev_is = fuse;
        m->fuse_dev_known = true;
        return fuse;
}

/*
 * Loads x's symbols from the file it maps and no other (same device and
 * inode): through the process's root (other mount namespaces), as named on
 * the host's, then through map_files (deleted or replaced files). The file
 * is read on the cache's loader threads: a slow one is waited for
 * FP_MAPS_LOAD_WAIT_MS, then picked up by a later call once read.
 */
static void load_symtab(struct fp_maps *m, struct fp_mapping *x)
{
        const struct fp_file_id want = {.dev = x->dev, .ino = x->ino};
        const struct fp_file_id *w = x->ino ? &want : NULL;
        char root[4200], mapped[128];
        const char *paths[FP_SYMLOAD_MAX_PATHS];
        size_t n = 0;
        int r;

        if (x->symload) {
                r = fp_symcache_poll(m->cache, x->symload, &x->symtab);
                if (r == -EINPROGRESS)
                        return;
                x->symload = NULL;
                x->symtab_tried = true;
                return;
        }
        switch (x->kind) {
        case FP_MAPPING_VDSO:
                x->symtab_tried = true;
                (void)fp_symcache_get_vdso(m->cache, &x->symtab);
                return;
        case FP_MAPPING_KERNEL:
                x->symtab_tried = true;
                (void)fp_symcache_get_kernel(m->cache, &x->symtab);
                return;
        case FP_MAPPING_ANON:
                x->symtab_tried = true;
                return;
        case FP_MAPPING_FILE:
                break;
        }
        if (on_fuse(m, x->dev)) {
                x->symtab_tried = true;
                return;
        }
        snprintf(root, sizeof(root), "/proc/%d/root%s", (int)m->pid, x->path);
        paths[n++] = root;
        /* Only a file known to be the mapped one is read through the host's own root. */
        if (w)
                paths[n++] = x->path;
        /* A deleted or replaced file is still reachable through map_files while mapped. */
        snprintf(mapped, sizeof(mapped), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)m->pid,
                 x->start, x->end);
        paths[n++] = mapped;
        if (!m->owner_known) {
                uid_t owner;

                /* Gone already: read as nobody's, never as root's. */
                m->owner = fp_proc_owner(m->pid, &owner) == 0 ? (uint32_t)owner : UINT32_MAX;
                m->owner_known = true;
        }
        r = fp_symcache_start(m->cache, paths, n, w, m->owner, FP_MAPS_LOAD_WAIT_MS, &x->symtab,
                              &x->symload);
        if (r == -EINPROGRESS)
                return;
        if (r != -EBUSY) /* too many loads outstanding: asked again at the next use */
                x->symtab_tried = true;
}

const char *fp_maps_symbolize(struct fp_maps *m, uint32_t idx, uint64_t addr, uint64_t *ret_offset)
{
        struct fp_mapping *x = fp_maps_get(m, idx);
        uint64_t off, vaddr;

        if (!x)
                return NULL;
        if (!x->symtab_tried)
                load_symtab(m, x);
        off = x->kind == FP_MAPPING_KERNEL ? addr : addr - x->start + x->pgoff;
        if (ret_offset)
                *ret_offset = off;
        if (!x->symtab)
                return NULL;
        if (fp_symtab_offset_to_vaddr(x->symtab, off, &vaddr) < 0)
                return NULL;
        return fp_symtab_lookup(x->symtab, vaddr, NULL);
}

size_t fp_maps_inlined(struct fp_maps *m, uint32_t idx, uint64_t addr, const char **names,
                       size_t max)
{
        struct fp_mapping *x = fp_maps_get(m, idx);
        uint64_t vaddr;

        if (!x || !x->symtab || x->kind == FP_MAPPING_KERNEL ||
            fp_symtab_offset_to_vaddr(x->symtab, addr - x->start + x->pgoff, &vaddr) < 0)
                return 0;
        return fp_symtab_inlined(x->symtab, vaddr, names, max);
}

size_t fp_maps_n_live(const struct fp_maps *m)
{
        return m->n_live;
}

const struct fp_mapping *fp_maps_live_at(const struct fp_maps *m, size_t i)
{
        return i < m->n_live ? m->all[m->live[i] - 1] : NULL;
}

void fp_maps_read_files_named(struct fp_maps *m, const char *part)
{
        for (size_t i = 0; i < m->n_live; i++) {
                struct fp_mapping *x = m->all[m->live[i] - 1];
                const char *base = x ? strrchr(x->path, '/') : NULL;
                if (x && x->kind == FP_MAPPING_FILE && !x->symtab_tried &&
                    strstr(base ? base + 1 : x->path, part))
                        load_symtab(m, x);
        }
}

struct fp_symcache *fp_maps_symcache(const struct fp_maps *m)
{
        return m->cache;
}

pid_t fp_maps_pid(const struct fp_maps *m)
{
        return m->pid;
}

void *fp_maps_runtime_state(struct fp_maps *m, size_t which, size_t size)
{
        if (which >= FP_SYM_INSPECTORS)
                return NULL;
        if (!m->runtime[which])
                m->runtime[which] = calloc(1, size);
        return m->runtime[which];
}

const struct fp_mapping *fp_maps_live_mapping(const struct fp_maps *m, const char *name)
{
        for (size_t i = 0; i < m->n_live; i++) {
                const struct fp_mapping *x = m->all[m->live[i] - 1];
                const char *base = x ? strrchr(x->path, '/') : NULL;
                if (x && x->kind == FP_MAPPING_FILE && base && strcmp(base + 1, name) == 0)
                        return x;
        }
        return NULL;
}

const char *fp_maps_live_file(const struct fp_maps *m, const char *name)
{
        const struct fp_mapping *x = fp_maps_live_mapping(m, name);

        return x ? x->path : NULL;
}

struct fp_symtab *fp_maps_symtab(struct fp_maps *m, uint32_t idx)
{
        struct fp_mapping *x = fp_maps_get(m, idx);

        if (!x)
                return NULL;
        if (!x->symtab_tried)
                load_symtab(m, x);
        return x->symtab;
}
